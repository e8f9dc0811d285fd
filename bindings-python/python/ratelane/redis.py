"""Several processes sharing one token's limits through Redis (the core's shared mode).

::

    store = ratelane.redis.RedisStore("redis://127.0.0.1:6379/0", prefix="{ratelane:mybot}:")
    limiter = ratelane.RateLimiter(shared=store)

Every process of the bot creates its own ``RateLimiter`` with a ``RedisStore`` on the same
Redis and the same ``prefix``: together they then send at most what one process alone would
(the global limit, the buckets learned from responses, sub-limit and global holds, the
invalid-request budget). The rate-limit decisions are the core's and the store script's
(``redis/scripts/shared_store.lua``, shipped inside the native module); this module only does
the I/O with redis-py's asyncio client (``pip install 'ratelane[redis]'``).

I/O: every reservation and update goes through one ordered queue, sent in pipelines (one round
trip for all that is waiting) over one connection at a time, so a report always reaches Redis
before the reservations queued after it. A reservation not answered within ``timeout`` seconds
(Redis down, paused or slow) is answered "unavailable" to the core, which then follows
``on_unavailable``: ``"fail_open"`` sends under this process's own limits (safe for one
process; N processes may together exceed the shared limits until Redis is back),
``"fail_closed"`` holds requests (their deadlines and ``max_wait`` still apply) until Redis
answers again. Recovery is automatic: the core probes Redis again after a pause that doubles
up to ``retry_max``. Updates are written fire-and-forget; those that cannot be written while
Redis is down are dropped (the store then errs on the conservative side until its keys expire).
"""

from __future__ import annotations

import asyncio
import collections
import uuid
from typing import TYPE_CHECKING, Any, Deque, Dict, List, Optional, Tuple, Union

from . import _core
from ._errors import InvalidConfigError

if TYPE_CHECKING:
    import redis.asyncio

__all__ = ["RedisStore", "SHARED_STORE_LUA", "reserve_args", "record_args"]

SHARED_STORE_LUA: str = _core.SHARED_STORE_LUA
"""The text of ``redis/scripts/shared_store.lua``, embedded in the native module at build time."""

_POLICIES = ("fail_open", "fail_closed")
_SETTINGS = ("lease", "pioneer_poll", "state_ttl", "retry_base", "retry_max")
_MAX_QUEUED = 10_000  # updates waiting while Redis is away; the oldest go first beyond this
_BATCH = 256

Answer = Tuple[str, Optional[int], Optional[str]]
"""``(answer, retry_after_ns, scope)`` for ``Limiter.handle_reservation``."""
UNAVAILABLE: Answer = ("unavailable", None, None)


def _opt_str(value: Optional[str]) -> str:
    return "" if value is None else "=" + value


def _opt_num(value: Optional[int]) -> str:
    return "" if value is None else str(value)


def _flag(value: bool) -> str:
    return "1" if value else "0"


def reserve_args(r: Any) -> List[str]:
    """The script's ARGV after the common part for a ``Reserve`` (see the script's header)."""
    return [
        str(r.id),
        r.identity,
        r.route,
        r.major,
        _opt_str(r.bucket),
        _flag(r.counts_global),
        str(r.global_limit),
        str(r.global_window_ns),
        str(r.margin_ns),
        str(r.invalid_limit),
        str(r.invalid_window_ns),
    ]


def record_args(u: Any) -> List[str]:
    """The script's ARGV after the common part for a ``ShareBucket``, ``ShareRelease``,
    ``ShareHold`` or ``ShareInvalid`` (by class name, so any object with those attributes
    works)."""
    kind = type(u).__name__
    if kind == "ShareBucket":
        return [
            "bucket",
            str(u.id),
            u.identity,
            u.route,
            u.major,
            _opt_str(u.bucket),
            _flag(u.unlimited),
            _opt_num(u.limit),
            _opt_num(u.remaining),
            _opt_num(u.reset_after_ns),
            _opt_num(u.window_ns),
        ]
    if kind == "ShareRelease":
        return ["release", str(u.id), u.identity, u.route, u.major, _opt_str(u.bucket), _flag(u.reached),
                _opt_num(u.window_ns)]
    if kind == "ShareHold":
        return ["hold", u.scope, u.identity, u.route, u.major, _opt_str(u.bucket), str(u.retry_after_ns)]
    if kind == "ShareInvalid":
        return ["invalid", str(u.id), str(u.window_ns)]
    raise TypeError(f"not a shared-mode update: {u!r}")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def parse_answer(reply: Any) -> Answer:
    """The script's reply to a reservation as ``(answer, retry_after_ns, scope)``."""
    if isinstance(reply, list) and reply:
        tag = _text(reply[0])
        if tag == "granted" and len(reply) == 1:
            return ("granted", None, None)
        if tag == "denied" and len(reply) == 3 and isinstance(reply[1], int) and reply[1] >= 0:
            return ("denied", reply[1] * 1000, _text(reply[2]))
    raise ValueError(f"unexpected reply from the shared store script: {reply!r}")


class _Op:
    """One script call waiting in the queue; ``future`` for a reservation's answer."""

    __slots__ = ("args", "future")

    def __init__(self, args: List[str], future: "Optional[asyncio.Future[Answer]]") -> None:
        self.args = args
        self.future = future


class RedisStore:
    """The shared store in Redis, for ``RateLimiter(shared=...)``.

    Args:
        client_or_url: a ``redis.asyncio.Redis`` client (left open by ``aclose``), or a URL
            (``redis://host:port/db``) for a client this store creates and closes.
        prefix: every key starts with it; give all processes of one bot the same one, with a
            Redis Cluster hash tag (``"{ratelane:mybot}:"``).
        timeout: seconds to wait for a reservation's answer before telling the core that the
            store is unavailable.
        on_unavailable: ``"fail_open"`` (default) or ``"fail_closed"``.
        lease, pioneer_poll, state_ttl, retry_base, retry_max: the core's ``SharedConfig``, in
            seconds (defaults: 30, 0.05, 600, 0.1, 5). Every process of one bot must use the
            same ``lease``, ``pioneer_poll`` and ``state_ttl``.
        client_name: this process's name in the store (default: a random UUID).
    """

    def __init__(
        self,
        client_or_url: "Union[str, redis.asyncio.Redis]",
        *,
        prefix: str = "{ratelane}:",
        timeout: float = 0.25,
        on_unavailable: str = "fail_open",
        lease: Optional[float] = None,
        pioneer_poll: Optional[float] = None,
        state_ttl: Optional[float] = None,
        retry_base: Optional[float] = None,
        retry_max: Optional[float] = None,
        client_name: Optional[str] = None,
    ) -> None:
        if on_unavailable not in _POLICIES:
            raise InvalidConfigError(f"on_unavailable must be 'fail_open' or 'fail_closed', got {on_unavailable!r}")
        if not isinstance(prefix, str) or not prefix:
            raise InvalidConfigError("prefix must be a non-empty str")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise InvalidConfigError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        settings: Dict[str, Any] = {"on_unavailable": on_unavailable}
        for name, value in zip(_SETTINGS, (lease, pioneer_poll, state_ttl, retry_base, retry_max)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise InvalidConfigError(f"{name} must be a number of seconds >= 0, got {value!r}")
            settings[name + "_ns"] = round(value * 1_000_000_000)
        self._settings = settings
        try:
            import redis.asyncio as aioredis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
            from redis.exceptions import NoScriptError
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("ratelane.redis needs redis-py: pip install 'ratelane[redis]'") from exc
        self._no_script = NoScriptError
        if isinstance(client_or_url, str):
            # No retries inside redis-py: the core decides what a failure means, and the
            # reservation timeout bounds every wait.
            self._redis: Any = aioredis.Redis.from_url(
                client_or_url, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0)
            )
            self._owns = True
        else:
            self._redis = client_or_url
            self._owns = False
        self.prefix = prefix
        self.timeout = float(timeout)
        self.client_name = client_name or uuid.uuid4().hex
        self._sha: Optional[str] = None
        self._common: List[str] = []
        self._queue: Deque[_Op] = collections.deque()
        self._wakeup: Optional[asyncio.Event] = None
        self._worker: "Optional[asyncio.Task[None]]" = None
        self._closed = False
        self.dropped = 0
        """Updates dropped because Redis could not take them (down, or an error reply)."""

    # ------------------------------------------------------------------ for the driver

    def core_settings(self) -> Dict[str, Any]:
        """The core's ``shared`` configuration object (``ratelane::json``)."""
        return dict(self._settings)

    def bind(self, shared_config: Dict[str, Any]) -> None:
        """Takes the store-wide settings the core validated (``config_json()["shared"]``)."""
        self._common = [
            "",  # now: Redis's clock
            self.client_name,
            str(shared_config["lease_ns"]),
            str(shared_config["pioneer_poll_ns"]),
            str(shared_config["state_ttl_ns"]),
        ]

    def reserve(self, reservation: Any) -> "asyncio.Future[Answer]":
        """Queues a reservation; the future holds its answer (or an exception)."""
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._submit(_Op(["reserve", *self._common, *reserve_args(reservation)], future))
        return future

    def record(self, update: Any) -> None:
        """Queues an update, fire-and-forget."""
        if self._closed:
            self.dropped += 1
            return
        if len(self._queue) >= _MAX_QUEUED:
            for i, op in enumerate(self._queue):
                if op.future is None:
                    del self._queue[i]
                    self.dropped += 1
                    break
        self._submit(_Op(["record", *self._common, *record_args(update)], None))

    async def flush(self, timeout: Optional[float] = None) -> None:
        """Waits (at most ``timeout`` seconds, default 4 x ``timeout``) until every queued
        call has been sent and answered, or dropped."""
        limit = 4 * self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        end = loop.time() + limit
        while (self._queue or self._busy) and loop.time() < end:
            await asyncio.sleep(min(0.01, max(0.0, end - loop.time())))

    async def aclose(self) -> None:
        """Sends what is queued (bounded by ``flush``), stops, and closes the client if this
        store created it. Idempotent."""
        if self._closed:
            return
        await self.flush()
        self._closed = True
        for op in self._queue:
            if op.future is not None and not op.future.done():
                op.future.cancel()
        self._queue.clear()
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
        if self._owns:
            await self._redis.aclose()

    # ------------------------------------------------------------------ the queue

    _busy = False

    def _submit(self, op: _Op) -> None:
        if self._closed:
            if op.future is not None:
                op.future.set_exception(RuntimeError("the Redis store is closed"))
            return
        self._queue.append(op)
        if self._worker is None:
            self._wakeup = asyncio.Event()
            self._worker = asyncio.get_running_loop().create_task(self._run())
        assert self._wakeup is not None
        self._wakeup.set()

    async def _run(self) -> None:
        assert self._wakeup is not None
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._queue:
                batch: List[_Op] = []
                while self._queue and len(batch) < _BATCH:
                    op = self._queue.popleft()
                    if op.future is not None and op.future.done():
                        continue  # the driver gave up on it: do not take a grant nobody uses
                    batch.append(op)
                if not batch:
                    continue
                self._busy = True
                try:
                    replies = await asyncio.wait_for(self._send(batch), max(2 * self.timeout, 1.0))
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # Redis down, paused, slow: nothing in the batch answered
                    for op in batch:
                        self._fail(op, exc)
                else:
                    for op, reply in zip(batch, replies):
                        self._settle(op, reply)
                finally:
                    self._busy = False

    async def _send(self, batch: List[_Op]) -> List[Any]:
        if self._sha is None:
            self._sha = await self._redis.script_load(SHARED_STORE_LUA)
        replies = await self._pipeline(batch)
        # A server that lost its script cache (restart, SCRIPT FLUSH) answers NOSCRIPT to every
        # call from the first on; load it again and send those calls again, in order.
        first = next((i for i, r in enumerate(replies) if isinstance(r, self._no_script)), None)
        if first is not None:
            self._sha = await self._redis.script_load(SHARED_STORE_LUA)
            replies = replies[:first] + await self._pipeline(batch[first:])
        return replies

    async def _pipeline(self, batch: List[_Op]) -> List[Any]:
        pipe = self._redis.pipeline(transaction=False)
        for op in batch:
            pipe.evalsha(self._sha, 1, self.prefix, *op.args)
        replies: List[Any] = await pipe.execute(raise_on_error=False)
        return replies

    def _fail(self, op: _Op, exc: BaseException) -> None:
        if op.future is None:
            self.dropped += 1
        elif not op.future.done():
            op.future.set_exception(exc)

    def _settle(self, op: _Op, reply: Any) -> None:
        if isinstance(reply, Exception):
            self._fail(op, reply)
            return
        if op.future is None or op.future.done():
            return
        try:
            op.future.set_result(parse_answer(reply))
        except ValueError as exc:
            op.future.set_exception(exc)
