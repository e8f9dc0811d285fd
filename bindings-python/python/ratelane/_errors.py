"""The exceptions of ratelane.

Hierarchy (every class carries a stable ``code`` string, the same in every ratelane binding)::

    RatelaneError                                   anything ratelane raises
    ├── RateLimitError                              a request ended without being answered
    │   ├── DeadlineExceededError     deadline_exceeded
    │   ├── MaxWaitExceededError      max_wait_exceeded
    │   ├── DeferredError             deferred
    │   ├── RetriesExhaustedError     retries_exhausted
    │   ├── MaybeSentError            maybe_sent
    │   ├── NetworkError              network_error
    │   ├── UnauthorizedError         unauthorized
    │   ├── ClosedError               closed
    │   └── InsufficientCapacityError insufficient_capacity (also ValueError; server side too)
    ├── UnknownRequestError           unknown_request    (also LookupError)
    ├── InvalidStateError             invalid_state      (also RuntimeError)
    ├── InvalidConfigError            invalid_config     (also ValueError)
    ├── InvalidRequestError           invalid_request    (also ValueError)
    ├── LimiterClosedError            limiter_closed     (also RuntimeError)
    ├── LimiterBusyError              limiter_busy       (also RuntimeError)
    ├── SnapshotError                                a snapshot cannot be restored (also ValueError)
    │   ├── SnapshotForeignError      snapshot_foreign
    │   ├── SnapshotVersionError      snapshot_version
    │   └── SnapshotMalformedError    snapshot_malformed
    ├── InvalidArgumentError          invalid_argument   (also TypeError and ValueError)
    ├── RedisLimiterError                               a Redis-backed check could not decide
    │   ├── RedisConnectionError      redis_connection
    │   ├── RedisServerError          redis_server
    │   ├── RedisBadStateError        redis_bad_state
    │   ├── OutOfRangeError           out_of_range
    │   └── RedisBadReplyError        redis_bad_reply
    └── SimulationContractError       simulation_contract (also AssertionError)

``RateLimitError`` subclasses are request outcomes: the core decided a request cannot be
served (``Fail`` outputs of the sans-IO API; raised by the asyncio driver). The others are
caller mistakes, except ``InsufficientCapacityError``, which the server-side limiters raise
too (a weight above the whole burst: the same code and meaning). ``RedisLimiterError`` subclasses come from ``ratelane.redis``'s server-side
limiters (the codes of the Rust crate ``ratelane-redis``): the limiter could not decide, and the
caller chooses to admit (fail open) or refuse (fail closed). The native module picks the class with an exhaustive ``match`` over the
core's reasons, so every code listed in ``ratelane.FAIL_CODES`` and ``ratelane.ERROR_CODES``
has its class here (checked when ``ratelane`` is imported).
"""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Optional, Type

__all__ = [
    "RatelaneError",
    "RateLimitError",
    "DeadlineExceededError",
    "MaxWaitExceededError",
    "DeferredError",
    "RetriesExhaustedError",
    "MaybeSentError",
    "NetworkError",
    "UnauthorizedError",
    "ClosedError",
    "UnknownRequestError",
    "InvalidStateError",
    "InvalidConfigError",
    "InvalidRequestError",
    "LimiterClosedError",
    "LimiterBusyError",
    "SnapshotError",
    "SnapshotForeignError",
    "SnapshotVersionError",
    "SnapshotMalformedError",
    "InvalidArgumentError",
    "InsufficientCapacityError",
    "RedisLimiterError",
    "RedisConnectionError",
    "RedisServerError",
    "RedisBadStateError",
    "OutOfRangeError",
    "RedisBadReplyError",
    "SimulationContractError",
    "FAIL_CLASSES",
    "ERROR_CLASSES",
    "REDIS_ERROR_CLASSES",
]


class RatelaneError(Exception):
    """Base of every exception ratelane raises.

    Attributes:
        code: the stable machine-readable code (``"max_wait_exceeded"``, ``"invalid_config"``...).
        message: the human-readable description.
        request_id: the sans-IO request id concerned, when there is one.
    """

    code: str = "ratelane_error"

    def __init__(self, message: str, *, request_id: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id

    def __str__(self) -> str:
        return self.message


class RateLimitError(RatelaneError):
    """A request ended without being answered: the limiter decided it cannot be served.

    Raised by ``RateLimiter.run`` / ``RateLimiter.acquire``; in the sans-IO API the same
    outcome is a ``Fail`` output, whose ``exception()`` builds this.
    """

    code = "rate_limit_error"

    def __init__(
        self,
        message: str,
        *,
        request_id: Optional[int] = None,
        predicted_send_at_ns: Optional[int] = None,
        predicted_wait_ns: Optional[int] = None,
        attempts: Optional[int] = None,
        retry_at_ns: Optional[int] = None,
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.predicted_send_at_ns = predicted_send_at_ns
        self.predicted_wait_ns = predicted_wait_ns
        self.attempts = attempts
        self.retry_at_ns = retry_at_ns
        self.response: Any = None
        """The server's last answer when the request failed after one (``retries_exhausted``
        after a 429, ``unauthorized``...): the host library's response, its body read and its
        connection released, so that an adapter can hand the server's own answer on. ``None``
        when the request failed before an answer (``max_wait_exceeded``...)."""

    @property
    def predicted_wait(self) -> Optional[float]:
        """The predicted wait in seconds (``MaxWaitExceededError``), else ``None``."""
        if self.predicted_wait_ns is None:
            return None
        return self.predicted_wait_ns / 1e9


class DeadlineExceededError(RateLimitError):
    """The request's deadline would pass (or passed) before it could be sent.

    ``predicted_send_at_ns`` is when the core expected it could go (``None`` if unknown); the
    asyncio driver also sets ``predicted_send_at`` in ``loop.time()`` seconds.
    """

    code = "deadline_exceeded"
    predicted_send_at: Optional[float] = None


class MaxWaitExceededError(RateLimitError):
    """The predicted wait exceeds ``max_wait``; ``predicted_wait`` (seconds) tells how long."""

    code = "max_wait_exceeded"


class DeferredError(RateLimitError):
    """The predicted wait exceeds the request's ``defer_after`` budget: instead of waiting, the
    request is handed back to be enqueued again at ``retry_at`` (a job queue's ``retry``).

    ``retry_at_ns`` is the core's predicted send time on the monotonic clock it was given. The
    asyncio driver converts it to its clocks at the moment the request fails: ``retry_at``
    (``loop.time()`` seconds), ``retry_at_unix`` (``time.time()`` seconds) and
    ``retry_at_wall`` (an aware UTC ``datetime``, what Celery's ``retry(eta=...)`` takes).
    ``retry_after`` is the seconds from then until ``retry_at``. From the sans-IO API, call
    ``set_clocks(now_ns, wall_now)`` with the same clock's now and the wall clock to fill them.
    """

    code = "deferred"
    retry_at: Optional[float] = None
    retry_at_unix: Optional[float] = None
    retry_at_wall: Optional[datetime.datetime] = None
    retry_after: Optional[float] = None
    """Seconds from the moment it failed until ``retry_at`` (set with the clocks)."""

    def set_clocks(self, now_ns: int, wall_now: float, loop_now: Optional[float] = None) -> None:
        """Fills ``retry_at_unix`` and ``retry_at_wall`` from ``now_ns`` (the monotonic clock
        ``retry_at_ns`` is on) and ``wall_now`` (``time.time()`` at the same moment), and
        ``retry_at`` from ``loop_now`` (that clock in seconds; default ``now_ns / 1e9``).
        A retry time already past reads as now."""
        if self.retry_at_ns is None:
            return
        ahead = max(0, self.retry_at_ns - now_ns) / 1e9
        self.retry_after = ahead
        self.retry_at = (now_ns / 1e9 if loop_now is None else loop_now) + ahead
        self.retry_at_unix = wall_now + ahead
        self.retry_at_wall = datetime.datetime.fromtimestamp(self.retry_at_unix, tz=datetime.timezone.utc)


class RetriesExhaustedError(RateLimitError):
    """The request kept getting 429s; ``attempts`` is how many times it was sent."""

    code = "retries_exhausted"


class MaybeSentError(RateLimitError):
    """The transport failed after the request may have reached the server, and it was not
    re-sent: it is not idempotent (pass ``idempotent=True`` to allow re-sending), or it is and
    its retries are used up."""

    code = "maybe_sent"


class NetworkError(RateLimitError):
    """The request failed to reach the server ``attempts`` times; no attempt reached it."""

    code = "network_error"


class UnauthorizedError(RateLimitError):
    """The token was rejected with 401 earlier; its requests are no longer sent."""

    code = "unauthorized"


class ClosedError(RateLimitError):
    """The limiter was closed (``aclose()``/``close()``) before the request was sent."""

    code = "closed"


class InsufficientCapacityError(RateLimitError, ValueError):
    """A request heavier than a whole budget: it can never be served, however long it waits.

    Client side (code ``insufficient_capacity`` of a ``Fail``; raised by ``RateLimiter.run``):
    the request's estimated cost in ``dimension`` (its ``costs`` option: ``tokens``...) is
    ``cost``, more than the dimension's whole ``limit`` as the server reported it. Decided at
    enqueue when the limit is known, else when an answer reports it. Split the request, or
    lower an estimate that errs high.

    Server side (``GcraStore.check_n``, ``ratelane.redis.RedisGcra.check_n``): a weight above
    the whole burst. ``requested`` and ``capacity`` say by how much; ``dimension`` is ``None``.

    ``requested``/``capacity`` and ``cost``/``limit`` are the same two numbers on both sides.
    """

    code = "insufficient_capacity"

    def __init__(
        self,
        message: str,
        *,
        request_id: Optional[int] = None,
        dimension: Optional[str] = None,
        cost: Optional[int] = None,
        limit: Optional[int] = None,
        requested: Optional[int] = None,
        capacity: Optional[int] = None,
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.dimension: Optional[str] = dimension
        """The dimension (``tokens``, ``points``...); ``None`` server side."""
        self.cost: int = cost if cost is not None else (requested or 0)
        """The request's estimated cost in ``dimension`` (server side: the weight asked for)."""
        self.limit: int = limit if limit is not None else (capacity or 0)
        """The dimension's whole limit (server side: the burst)."""
        self.requested: int = self.cost
        """The same as ``cost`` (the server-side name)."""
        self.capacity: int = self.limit
        """The same as ``limit`` (the server-side name)."""


class UnknownRequestError(RatelaneError, LookupError):
    """The request id is not known to the limiter (never issued, or already finished)."""

    code = "unknown_request"


class InvalidStateError(RatelaneError, RuntimeError):
    """The request is not in a state where this input makes sense (e.g. a response for a
    request that was not sent)."""

    code = "invalid_state"


class InvalidConfigError(RatelaneError, ValueError):
    """A setting is unknown, of the wrong type or out of range; the message names it."""

    code = "invalid_config"


class InvalidRequestError(RatelaneError, ValueError):
    """A request description is malformed (empty method, bad path...), or a server-side call
    asks for a time past the end of the ``u64`` nanosecond clock (a ``GcraStore`` check later
    than ``2**64 - 1 - burst * interval_ns``, a ``FixedWindowStore.schedule`` whose job would be
    released after ``2**64 - 1``); nothing is counted."""

    code = "invalid_request"


class LimiterClosedError(RatelaneError, RuntimeError):
    """The limiter was closed and accepts no new requests."""

    code = "limiter_closed"


class LimiterBusyError(RatelaneError, RuntimeError):
    """``restore`` was called on a limiter that holds requests (restore before the first one)."""

    code = "limiter_busy"


class SnapshotError(RatelaneError, ValueError):
    """A snapshot given to ``restore`` cannot be restored (see the three subclasses)."""

    code = "snapshot_error"


class SnapshotForeignError(SnapshotError):
    """Not a ratelane snapshot (not JSON, another ``format``), or one of another header profile."""

    code = "snapshot_foreign"


class SnapshotVersionError(SnapshotError):
    """A snapshot of a newer format version than this ratelane reads."""

    code = "snapshot_version"


class SnapshotMalformedError(SnapshotError):
    """A ratelane snapshot with malformed content (missing or unknown keys, wrong types, ranges)."""

    code = "snapshot_malformed"


class InvalidArgumentError(RatelaneError, TypeError, ValueError):
    """A value of the wrong Python type or range, caught by the binding itself."""

    code = "invalid_argument"


class RedisLimiterError(RatelaneError):
    """A Redis-backed server-side check (``ratelane.redis.RedisGcra``, ``RedisLeakyBucket``,
    ``RedisFixedWindow``) could not decide. Whether to admit (fail open) or refuse (fail closed)
    is the caller's choice; nothing retries inside. The redis-py exception, if any, is
    ``__cause__``.

    Nothing was counted, except that after a ``RedisConnectionError`` it is unknown whether Redis
    ran the script (the connection may have failed after the command was sent).
    """

    code = "redis_error"


class RedisConnectionError(RedisLimiterError):
    """Redis could not be reached or the connection failed: refused, dropped, I/O error,
    timeout (the client's ``socket_timeout``), authentication."""

    code = "redis_connection"


class RedisServerError(RedisLimiterError):
    """Redis answered with an error: out of memory, read-only replica, cluster redirection, a
    script error, or ``RATELANE_ARG`` (the script on the server is another version than the
    one this package builds arguments for)."""

    code = "redis_server"


class RedisBadStateError(RedisLimiterError):
    """The key holds something that is not this algorithm's state (``RATELANE_STATE``, or
    Redis's ``WRONGTYPE``): two limiters, or another program, share a key name. The key is left
    alone, except a key of the algorithm's shape holding a count no check writes (a leaky-bucket
    level above ``2**32 - 1``, a fixed-window count of ``2**53`` or more: corrupted), which the
    script resets (deletes), so that only this check fails and the next starts from an empty key."""

    code = "redis_bad_state"


class OutOfRangeError(RedisLimiterError):
    """A scheduled job's window would end more than 2^52 ns (about 52 days) from now
    (``RATELANE_RANGE``); nothing was booked."""

    code = "out_of_range"


class RedisBadReplyError(RedisLimiterError):
    """Redis answered, but not with the layout the scripts document."""

    code = "redis_bad_reply"


class SimulationContractError(RatelaneError, AssertionError):
    """The simulator caught the limiter breaking the driver contract (a bug in ratelane).

    ``at_ns`` is the virtual time, ``trace`` the last trace lines (if tracing was on).
    """

    code = "simulation_contract"

    def __init__(self, message: str, *, at_ns: int = 0, trace: Optional[List[str]] = None) -> None:
        super().__init__(message)
        self.at_ns = at_ns
        self.trace = list(trace or [])


FAIL_CLASSES: Dict[str, Type[RateLimitError]] = {
    cls.code: cls
    for cls in (
        DeadlineExceededError,
        MaxWaitExceededError,
        DeferredError,
        RetriesExhaustedError,
        MaybeSentError,
        NetworkError,
        UnauthorizedError,
        ClosedError,
        InsufficientCapacityError,
    )
}
"""Failure code -> exception class."""

ERROR_CLASSES: Dict[str, Type[RatelaneError]] = {
    cls.code: cls
    for cls in (
        UnknownRequestError,
        InvalidStateError,
        InvalidConfigError,
        InvalidRequestError,
        LimiterClosedError,
        LimiterBusyError,
        SnapshotForeignError,
        SnapshotVersionError,
        SnapshotMalformedError,
        InvalidArgumentError,
    )
}
"""Caller-error code -> exception class."""

REDIS_ERROR_CLASSES: Dict[str, Type[RedisLimiterError]] = {
    cls.code: cls
    for cls in (RedisConnectionError, RedisServerError, RedisBadStateError, OutOfRangeError, RedisBadReplyError)
}
"""Code -> exception class for the failures of ``ratelane.redis``'s server-side limiters."""
