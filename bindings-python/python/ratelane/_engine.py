"""What the asyncio driver (``RateLimiter``) and the synchronous one (``SyncRateLimiter``)
share: the sans-IO core, the requests they track, how the core's outputs are acted on, and
how options, settings and failures are read. Only the waiting differs (an asyncio future and
``loop.call_at``, or a ``threading.Event`` and one timer thread), in the two subclasses.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Dict, Iterable, List, Mapping, Optional, Tuple, TypedDict

from ._core import Idle, Send, WaitUntil
from ._core import Limiter as NativeLimiter
from ._errors import DeadlineExceededError, DeferredError, InvalidArgumentError, RatelaneError, RateLimitError
from ._outputs import Fail, Reserve, ShareBucket, ShareHold, ShareInvalid, ShareRelease
from ._settings import config_json, driver_config

if TYPE_CHECKING:
    from .redis import RedisStore

__all__ = ["Engine", "Waiter", "RequestOptions", "Observer", "WAITING", "SENDABLE", "FAILED", "DONE"]


class RequestOptions(TypedDict, total=False):
    """Per-request options of ``run`` and ``acquire`` (both drivers)."""

    major: Optional[str]
    """When given, ``path`` is a route template and this its major parameter (channel id...)."""
    identity: Optional[str]
    """Key of the token the request is sent with (a hash or the bot id, never the token)."""
    deadline: Optional[float]
    """An instant on the driver's clock (``loop.time()``; ``time.monotonic()`` for the
    synchronous driver): fail at once if the request could not be sent before it."""
    timeout: Optional[float]
    """Seconds from now; the same as ``deadline`` relative to now."""
    defer_after: Optional[float]
    """Seconds: if the predicted wait is longer, fail at once with ``DeferredError`` (carrying
    ``retry_at``, ``retry_at_wall``...) instead of waiting (default: the limiter's
    ``defer_after``, else none)."""
    priority: int
    """Higher goes first when requests compete for the global limit (default 0)."""
    idempotent: Optional[bool]
    """Whether re-sending is harmless (default: by method)."""
    global_exempt: Optional[bool]
    """Whether the route is exempt from the global limit (default: by route)."""
    sub_limit: Optional[str]
    """The request's sub-limit class: a sub-limit 429 holds only requests of the same class on
    the route (default: derived from ``body_keys``; Discord: ``"channel_name_topic"`` for a
    channel edit with ``name`` or ``topic``)."""
    body_keys: Optional[Iterable[str]]
    """The top-level keys of the JSON body (or the body's dict itself): the sub-limit class is
    derived from them."""
    costs: Optional[Mapping[str, int]]
    """What the request will cost beyond one request, estimated, by dimension as the API's
    answers name it: ``{"tokens": 1200}`` for an LLM API's tokens per minute (the prompt's
    length / 4 plus ``max_tokens`` is a usual estimate), ``{"points": 50}`` for a GraphQL
    API's points. It is sent only when every dimension it names has room for it (the
    estimate, times a margin learned from the recent ratios of actual to estimated cost); its answer's
    body (``usage``: ``total_tokens``, ``input_tokens`` + ``output_tokens``...) settles the
    estimate, so the driver reads the JSON body of every answer to such a request. Ints >= 0;
    names of 1 to 32 bytes of ``[a-z0-9_]``, not ``requests``, at most 8. An estimate above
    the dimension's whole limit fails with ``InsufficientCapacityError``."""
    model: Optional[str]
    """The LLM model the request asks for (``read_llm_request(body).model``): under the
    ``openai``, ``azure_openai``, ``anthropic`` and ``auto`` profiles, whose providers limit
    per model, it keeps the model's queue and budgets apart from other models' (unless
    ``major`` is given). 1 to 256 bytes."""


OPTION_NAMES = frozenset(RequestOptions.__annotations__)

WAITING = 0  # queued (or in flight): no Send for it since it last went out
SENDABLE = 1  # the core said Send: it may go now
FAILED = 2  # the core said Fail
DONE = 3  # answered, failed or cancelled: nothing left in the core

_SHARE_TYPES: Tuple[type, ...] = (ShareBucket, ShareRelease, ShareHold, ShareInvalid)

Observer = Callable[[Any], None]


class Waiter:
    """One request as a driver tracks it. ``wake`` is the driver's handle on whoever waits
    for it (an asyncio future, a ``threading.Event``), or ``None`` while nobody does."""

    __slots__ = ("id", "state", "wake", "fail", "settles")

    def __init__(self, rid: int) -> None:
        self.id = rid
        self.state = WAITING
        self.wake: Any = None
        self.fail: Optional[Fail] = None
        # It has costs: its answers' JSON bodies are read for their usage.
        self.settles = False


def _seconds(value: Any, name: str, finite: bool = False) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0 or (finite and value == float("inf")):
        raise InvalidArgumentError(f"{name} must be a {'finite ' if finite else ''}number of seconds >= 0, got {value!r}")
    return float(value)


def native_options(options: Mapping[str, Any], now_ns: int) -> Tuple[Dict[str, Any], bool]:
    """``RequestOptions`` as the core's ``enqueue`` keyword arguments (only those set: each
    costs a dict entry), and whether the request has costs (its answers' bodies are read).
    ``now_ns`` is the driver's clock, on which ``deadline`` is an instant."""
    unknown = set(options) - OPTION_NAMES
    if unknown:
        raise InvalidArgumentError(f"unknown request options {sorted(unknown)}; expected {sorted(OPTION_NAMES)}")
    native: Dict[str, Any] = {}
    timeout = options.get("timeout")
    deadline = options.get("deadline")
    if timeout is not None:
        if deadline is not None:
            raise InvalidArgumentError("give either deadline or timeout, not both")
        native["deadline_ns"] = now_ns + int(_seconds(timeout, "timeout") * 1e9)
    elif deadline is not None:
        native["deadline_ns"] = int(_seconds(deadline, "deadline (an instant of the driver's clock)") * 1e9)
    defer_after = options.get("defer_after")
    if defer_after is not None:
        native["defer_after_ns"] = round(_seconds(defer_after, "defer_after", finite=True) * 1e9)
    for name in ("major", "identity", "idempotent", "global_exempt", "sub_limit", "body_keys", "model"):
        value = options.get(name)
        if value is not None:
            native[name] = value
    priority = options.get("priority", 0)
    if priority:
        native["priority"] = priority
    costs = options.get("costs")
    if costs is not None:
        native["costs"] = costs  # the native module checks it (InvalidArgumentError)
    return native, bool(costs)


class Engine:
    """The sans-IO core and the requests a driver tracks; acts on the core's outputs.

    Subclasses say how time is read (``_now``), how a waiting request is woken (``_wake``) and
    how the earliest ``WaitUntil`` is armed (``_arm``)."""

    _core: NativeLimiter
    _closed: bool

    def __init__(
        self,
        config: Optional[Mapping[str, Any]],
        settings: Mapping[str, Any],
        on_observation: Optional[Observer],
        shared: "Optional[RedisStore]" = None,
    ) -> None:
        core_settings = driver_config(config, settings, type(self).__name__)
        if shared is not None:
            core_settings["shared"] = shared.core_settings()
        self._core = NativeLimiter(config_json(core_settings))
        self._waiters: Dict[int, Waiter] = {}
        self._on_observation = on_observation
        self._store = shared
        self._closed = False

    # ------------------------------------------------------------------ to provide

    def _now(self) -> int:
        raise NotImplementedError

    def _clock_ns(self) -> Optional[int]:
        """The driver's clock now, in ns, or ``None`` before it has one (the asyncio driver
        before its first use on a loop)."""
        raise NotImplementedError

    def _wake(self, waiter: Waiter) -> None:
        raise NotImplementedError

    def _arm(self, at_ns: int) -> None:
        raise NotImplementedError

    def _reserve(self, reservation: Reserve) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ shared

    def _pump(self) -> None:
        """Drains the core's outputs (the drain invariant) and acts on each."""
        self._dispatch(self._core.drain())

    def _dispatch(self, outputs: List[Any]) -> None:
        """Acts on drained outputs (``Any``: dispatched on their exact type)."""
        for output in outputs:
            kind = type(output)
            if kind is Send:
                waiter = self._waiters.get(output.id)
                if waiter is not None:
                    waiter.state = SENDABLE
                    if waiter.wake is not None:
                        self._wake(waiter)
            elif kind is WaitUntil:
                self._arm(output.at_ns)
            elif kind is Idle:
                pass  # a pending timer may fire; an early handle_timeout is harmless
            elif kind is Fail:
                waiter = self._waiters.get(output.id)
                if waiter is not None:
                    waiter.state = FAILED
                    waiter.fail = output
                    if waiter.wake is not None:
                        self._wake(waiter)
            elif kind is Reserve:
                self._reserve(output)
            elif kind in _SHARE_TYPES:
                assert self._store is not None
                self._store.record(output)
            elif self._on_observation is not None:
                self._on_observation(output)

    def _enqueue_waiter(self, method: str, path: str, options: Mapping[str, Any]) -> Waiter:
        """Enqueues a request in the core and tracks it (the caller holds any lock)."""
        now = self._now()
        if options:
            native, settles = native_options(options, now)
            rid = self._core.enqueue(now, method, path, **native) if native else self._core.enqueue(now, method, path)
        else:
            rid, settles = self._core.enqueue(now, method, path), False
        waiter = Waiter(rid)
        waiter.settles = settles
        self._waiters[rid] = waiter
        self._pump()
        return waiter

    def _forget(self, waiter: Waiter) -> None:
        """The request's outcome is known to the caller: cancel it in the core if it is
        still live there (the task was cancelled, or ``send`` raised)."""
        self._waiters.pop(waiter.id, None)
        state = waiter.state
        if state == DONE or state == FAILED:
            return
        waiter.state = DONE
        try:
            if state == SENDABLE:
                # The core said Send, but the caller gave up before the request left: "not
                # sent" gives its global token and bucket slot back (a plain cancel would
                # keep them used until the window resets).
                self._core.handle_failure(self._now(), waiter.id, "not_sent")
                self._pump()
            self._core.cancel(self._now(), waiter.id)
        except RatelaneError:
            return  # already ended in the core (failed, or closed while in flight)
        self._pump()

    def _failure(self, waiter: Waiter) -> RateLimitError:
        """The exception of a request the core failed (its ``Fail``), with the driver's clocks."""
        waiter.state = DONE
        fail = waiter.fail
        if fail is None:  # the core answered "failed" without a Fail output: a core bug
            raise RuntimeError(f"request {waiter.id} failed without a Fail output")
        exc: RateLimitError = fail.exception()
        if isinstance(exc, DeadlineExceededError) and exc.predicted_send_at_ns is not None:
            exc.predicted_send_at = exc.predicted_send_at_ns / 1e9
        elif isinstance(exc, DeferredError):
            # The core's retry time is on the driver's clock: the wall clock's is as far ahead.
            now = self._clock_ns() or 0
            exc.set_clocks(now, time.time(), now / 1e9)
        return exc

    def _locked(self) -> ContextManager[Any]:
        """What guards the core around a call from the caller's side: nothing on one event
        loop, the lock for threads."""
        return contextlib.nullcontext()

    def predict(
        self,
        method: str,
        path: str,
        *,
        major: Optional[str] = None,
        identity: Optional[str] = None,
        priority: int = 0,
        sub_limit: Optional[str] = None,
        body_keys: Optional[Iterable[str]] = None,
    ) -> float:
        """Seconds until a request enqueued now would be sent, as far as the limiter knows
        (0.0 when it could go at once; an unknown bucket is assumed open).

        Raises:
            LimiterClosedError: after the limiter was closed (nothing will be sent).
            InvalidRequestError: a malformed method or path."""
        with self._locked():
            now = self._now()
            at = self._core.predict(
                now, method, path, major=major, identity=identity, priority=priority, sub_limit=sub_limit,
                body_keys=body_keys,
            )
            return max(0, at - now) / 1e9

    def snapshot(self) -> str:
        """What this limiter learned, as JSON text to keep across a restart.

        Holds the routes found to share a bucket, the learned window lengths, global and
        host-wide pauses still running, and the invalid-request budget spent (format
        ``"ratelane.snapshot"``, versioned; see the README). Instants are stored on the wall
        clock (``time.time()``), since the driver's clock does not survive a restart. Take it
        at shutdown, or every few minutes; pass it to ``restore`` in the next run.
        """
        with self._locked():
            now = self._clock_ns()
            return self._core.snapshot(0 if now is None else now, int(time.time() * 1000))

    def restore(self, snapshot: str) -> None:
        """Restores ``snapshot`` (text from ``snapshot()``, usually of the previous run), so the
        first requests after a restart share one pioneer per known bucket and honour pauses
        that are still running. Call it before the first request (the asyncio driver: inside
        the event loop).

        Raises:
            SnapshotForeignError: not a ratelane snapshot, or one of another header profile.
            SnapshotVersionError: written by a newer ratelane.
            SnapshotMalformedError: a ratelane snapshot with malformed content.
            LimiterBusyError: requests are queued or in flight.
            LimiterClosedError: after the limiter was closed.
            InvalidArgumentError: ``snapshot`` is not a ``str``.
        """
        with self._locked():
            self._core.restore(self._now(), int(time.time() * 1000), snapshot)
            self._pump()

    @property
    def queued(self) -> int:
        """Requests waiting to be sent."""
        return self._core.queued

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return self._core.in_flight

    @property
    def closed(self) -> bool:
        """Whether the limiter was closed."""
        return self._closed

    @property
    def limiter(self) -> NativeLimiter:
        """The sans-IO limiter underneath (for its getters; do not feed it inputs)."""
        return self._core
