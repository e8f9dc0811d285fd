"""Redis for ratelane: limits shared by several processes or machines (``pip install 'ratelane[redis]'``).

Two independent parts, each running one of the Lua scripts of ``redis/scripts/`` (embedded in
the native module at build time, the same files every ratelane binding loads):

* Server-side limiters for your own API, evaluated atomically in Redis: ``RedisGcra``,
  ``RedisLeakyBucket``, ``RedisFixedWindow``. The same algorithms and answers as
  ``ratelane.server``'s in-memory stores, for any number of processes (below, "Server side").
* ``RedisStore``: the store of the client-side shared mode (several processes of one bot
  sharing one token's Discord limits), for ``RateLimiter(shared=...)`` (below, "Shared mode").

Server side
-----------

::

    client = redis.asyncio.Redis.from_url("redis://127.0.0.1:6379/0", socket_timeout=0.25)
    per_user = ratelane.redis.RedisGcra.per_window(client, 10, 60 * 10**9, prefix="api:per-user:")
    decision = await per_user.check(user_id)            # one script call, one round trip
    headers = decision.ietf_headers("per-user")          # rendered by the core
    if not decision.allowed:
        return 429, headers                              # Retry-After included

Each check is one ``EVALSHA`` (``EVAL`` once when Redis answers ``NOSCRIPT``), reads Redis's
own clock (``TIME``) so the processes' clocks do not matter, and answers with the same
``ratelane.server.Decision`` (``Scheduled`` for ``RedisFixedWindow.schedule``) as the in-memory
stores. Keys are ``prefix + key``: give each limiter its own prefix. Configuration is validated
by the core (``InvalidConfigError``, the in-memory stores' messages), and windows longer than
2^52 ns (about 52 days), which the scripts cannot evaluate exactly, are refused. A call the
in-memory store refuses as past the end of the ``u64`` clock (a ``now_ns`` later than a GCRA's
``2**64 - 1 - window_ns``, a job released after ``2**64 - 1``) raises the same
``InvalidRequestError`` here.

When a check cannot decide it raises a ``RedisLimiterError`` with a stable ``code``:
``redis_connection``, ``redis_server``, ``redis_bad_state``, ``out_of_range``,
``redis_bad_reply`` (the codes of the Rust crate ``ratelane-redis``). Nothing retries inside
and nothing falls back: admit (fail open) or refuse (fail closed) as suits the endpoint. Bound
the wait with the client's ``socket_timeout`` (a timeout is a ``RedisConnectionError``).

Shared mode
-----------

Several processes sharing one token's limits through Redis (the core's shared mode).

::

    store = ratelane.redis.RedisStore("redis://127.0.0.1:6379/0", prefix="{ratelane:mybot}:")
    limiter = ratelane.RateLimiter(shared=store)

Every process of the bot creates its own ``RateLimiter`` with a ``RedisStore`` on the same
Redis and the same ``prefix``: together they then send at most what one process alone would
(the global limit, the buckets learned from responses, sub-limit and global holds, the
invalid-request budget). The rate-limit decisions are the core's and the store script's
(``redis/scripts/shared_store.lua``, shipped inside the native module); this module only does
the I/O with redis-py's asyncio client (``pip install 'ratelane[redis]'``).

I/O: every reservation and update goes through one ordered queue; what is waiting goes as one
``batch`` call of the script (one ``EVALSHA``, one round trip, each operation run as its own
call would, in order) over one connection at a time, so a report always reaches Redis
before the reservations queued after it. A reservation not answered within ``timeout`` seconds
(Redis down, paused or slow) is answered "unavailable" to the core, which then follows
``on_unavailable``: ``"fail_open"`` sends without asking Redis, on this process's share of
the limits (each limit divided by the live processes Redis counted in its last answer, so that
the processes together stay within them), ``"fail_closed"`` holds requests (their deadlines
and ``max_wait`` still apply) until Redis answers again. Recovery is automatic: the core probes
Redis again after a pause that doubles per failed probe (not per waiting request) from
``retry_base`` up to ``retry_max``. Updates are written fire-and-forget; those that cannot be written while
Redis is down are dropped (the store then errs on the conservative side until its keys expire).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import uuid
from types import ModuleType
from typing import TYPE_CHECKING, Any, Deque, Dict, List, Optional, Sequence, Tuple, Union

from . import _args, _core
from ._core import Decision, Scheduled
from ._outputs import core_form
from ._errors import (
    REDIS_ERROR_CLASSES,
    InvalidArgumentError,
    InvalidConfigError,
    InvalidRequestError,
    OutOfRangeError,
    RedisBadReplyError,
    RedisBadStateError,
    RedisConnectionError,
    RatelaneError,
    RedisLimiterError,
    RedisServerError,
)

if TYPE_CHECKING:
    import redis.asyncio

    _Client = Union[redis.asyncio.Redis, redis.asyncio.RedisCluster]

__all__ = [
    "RedisGcra",
    "RedisLeakyBucket",
    "RedisFixedWindow",
    "RedisStore",
    "GCRA_LUA",
    "LEAKY_BUCKET_LUA",
    "FIXED_WINDOW_LUA",
    "SHARED_STORE_LUA",
    "REDIS_ERROR_CODES",
    "RedisLimiterError",
    "RedisConnectionError",
    "RedisServerError",
    "RedisBadStateError",
    "OutOfRangeError",
    "RedisBadReplyError",
    "store_op",
    "bounded_parser",
    "reserve_args",
    "record_args",
]

SHARED_STORE_LUA: str = _core.SHARED_STORE_LUA
"""The text of ``redis/scripts/shared_store.lua``, embedded in the native module at build time."""
GCRA_LUA: str = _core.GCRA_LUA
"""The text of ``redis/scripts/gcra.lua`` (``RedisGcra``), embedded at build time."""
LEAKY_BUCKET_LUA: str = _core.LEAKY_BUCKET_LUA
"""The text of ``redis/scripts/leaky_bucket.lua`` (``RedisLeakyBucket``), embedded at build time."""
FIXED_WINDOW_LUA: str = _core.FIXED_WINDOW_LUA
"""The text of ``redis/scripts/fixed_window.lua`` (``RedisFixedWindow``), embedded at build time."""

REDIS_ERROR_CODES: Tuple[str, ...] = (
    "invalid_config",
    "insufficient_capacity",
    "invalid_request",
    *REDIS_ERROR_CLASSES,
)
"""Every code a server-side limiter of this module raises (``RatelaneError.code``): the same
list as the Rust crate's ``ratelane_redis::Error::ALL_CODES``."""

_POLICIES = ("fail_open", "fail_closed")
_SETTINGS = ("lease", "pioneer_poll", "state_ttl", "retry_base", "retry_max")
_MAX_QUEUED = 10_000  # updates waiting while Redis is away; the oldest go first beyond this
_BATCH = 256

Answer = Tuple[str, Optional[int], Optional[str], Optional[int], Optional[int], Optional[int]]
"""``(answer, retry_after_ns, scope, processes, leased, store_time_ns)`` for
``Limiter.handle_reservation``."""
UNAVAILABLE: Answer = ("unavailable", None, None, None, None, None)


def store_op(op: Any) -> "_core.StoreOp":
    """A ``Reserve`` or ``Share*`` output (or any object with their attributes, a ``Share*``
    one known by its class name) as the core's store operation. Raises ``TypeError`` for
    anything else, ``InvalidArgumentError`` for an attribute the core cannot read."""
    drained: "Optional[_core.StoreOp]" = getattr(op, "_op", None)  # encoded as it was drained
    return drained if drained is not None else _core.store_op(*core_form(op))


def reserve_args(r: Any) -> List[str]:
    """The script's ARGV after the common part for a ``Reserve`` (or any object with its
    attributes), as the core's ``ratelane::shared::wire`` writes them."""
    op = store_op(r)
    if op.name != "reserve":
        raise TypeError(f"not a reservation: {r!r}")
    return op.args


def record_args(u: Any) -> List[str]:
    """The script's ARGV after the common part for a ``ShareBucket``, ``ShareRelease``,
    ``ShareHold`` or ``ShareInvalid`` (by class name, so any object with those attributes
    works), as the core writes them."""
    op = store_op(u)
    if op.name != "record":
        raise TypeError(f"not a shared-mode update: {u!r}")
    return op.args


def parse_answer(reply: Any) -> Answer:
    """The script's reply to a reservation as ``(answer, retry_after_ns, scope, processes,
    leased, store_time_ns)`` (``processes``, ``leased`` and ``store_time_ns`` are None for a
    reply without them, as from a script of an earlier version), read by the core. Raises
    ``RedisBadReplyError`` for any other reply."""
    return _core.store_answer(reply)


#: What a reply of ratelane's scripts may hold at most, checked by ``bounded_parser`` as each
#: header is read: elements of one array (a batch answers one reply per operation, at most
#: 256), arrays in one reply, elements in all, and bytes of one string.
MAX_ARRAY = 1024
MAX_ARRAYS = 512
MAX_ELEMENTS = 16_384
MAX_BULK = 1 << 20

_PARSERS: Dict[int, Any] = {}


def _default_protocol() -> int:
    """The RESP version redis-py speaks when none is given: 3 from redis-py 8, 2 before."""
    import redis.utils

    return int(getattr(redis.utils, "DEFAULT_RESP_VERSION", 2))


def bounded_parser(protocol: int = 2) -> Any:
    """redis-py's asyncio parser for ``protocol`` (2 or 3) that refuses a reply larger than any
    of ratelane's scripts gives before it reads it: an array of more than ``MAX_ARRAY``
    elements, more than ``MAX_ARRAYS`` arrays (a reply nested that deep, too) or
    ``MAX_ELEMENTS`` elements in all, a string of more than ``MAX_BULK`` bytes. It raises
    redis-py's ``InvalidResponse`` (a ``RedisBadReplyError`` to the limiters; the store answers
    the core "unavailable"), and redis-py drops the connection. redis-py's own parsers read
    every element first: a hostile or broken server's million-element reply held the event loop
    for seconds, one nested ten thousand deep raised ``RecursionError``.

    ``RedisStore`` uses it for the client it makes from a URL. Give it to a client of your own
    as ``redis.asyncio.Redis.from_url(url, parser_class=ratelane.redis.bounded_parser(3))``:
    the protocol the client speaks (redis-py 8 speaks 3 unless told ``protocol=2``; earlier
    versions 2). It reads header lines through the parsers'
    ``_readline``, a private part of redis-py (tested with redis-py 5.0 to 8.1: the test
    suite fails when a version moves it)."""
    cached = _PARSERS.get(protocol)
    if cached is not None:
        return cached
    from redis._parsers.resp2 import _AsyncRESP2Parser
    from redis._parsers.resp3 import _AsyncRESP3Parser
    from redis.exceptions import InvalidResponse

    base: Any
    if protocol == 3:
        base = _AsyncRESP3Parser
    elif protocol == 2:
        base = _AsyncRESP2Parser
    else:
        raise InvalidConfigError(f"protocol must be 2 or 3, got {protocol!r}")

    async def read_response(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._arrays = self._elements = 0
        return await super(parser, self).read_response(*args, **kwargs)

    async def _readline(self: Any) -> bytes:
        line: bytes = await super(parser, self)._readline()
        kind = line[:1]
        if kind and kind in b"*%~>|$=!":
            try:
                n = int(line[1:])
            except ValueError:
                raise InvalidResponse(f"Protocol Error: a length of {line[1:64]!r}") from None
            if kind in b"$=!":
                if n > MAX_BULK:
                    raise InvalidResponse(f"a string of {n} bytes, more than ratelane reads ({MAX_BULK})")
            else:
                n *= 2 if kind in b"%|" else 1
                self._arrays += 1
                self._elements += max(n, 0)
                if n > MAX_ARRAY or self._arrays > MAX_ARRAYS or self._elements > MAX_ELEMENTS:
                    raise InvalidResponse(
                        f"a reply larger than ratelane reads (an array of {n} elements, "
                        f"{self._arrays} arrays, {self._elements} elements so far)"
                    )
        return line

    # Made with type(): a class statement here would be a name of the module to the stub check.
    parser: Any = type(
        f"BoundedRESP{protocol}Parser",
        (base,),
        {"read_response": read_response, "_readline": _readline, "_arrays": 0, "_elements": 0},
    )
    _PARSERS[protocol] = parser
    return parser


def _item_reply(item: Any, error: Any) -> Any:
    """A batch item's reply as a single call's: ``["error", message]`` (an op the script
    refused) becomes the error reply the single call would have raised."""
    if isinstance(item, list) and len(item) == 2 and item[0] in (b"error", "error"):
        text = item[1]
        message = text.decode(errors="replace") if isinstance(text, bytes) else text if isinstance(text, str) else type(text).__name__
        return error(message)
    return item


class _Op:
    """One script call waiting in the queue; ``future`` for a reservation's answer."""

    __slots__ = ("op", "future")

    def __init__(self, op: Any, future: "Optional[asyncio.Future[Answer]]") -> None:
        self.op = op  # the core's ``_core.StoreOp``, read from the output when it was queued
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
        global_lease: lease the global budget (default True): one reservation takes the
            global tokens this process's ready requests need, and the others spend them
            instead of each asking the store's window (see the core's ``ratelane::shared``,
            "Leases"). False: every reservation asks the window.
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
        global_lease: bool = True,
    ) -> None:
        if on_unavailable not in _POLICIES:
            raise InvalidConfigError(f"on_unavailable must be 'fail_open' or 'fail_closed', got {on_unavailable!r}")
        if not isinstance(prefix, str) or not prefix:
            raise InvalidConfigError("prefix must be a non-empty str")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise InvalidConfigError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        if not isinstance(global_lease, bool):
            raise InvalidConfigError(f"global_lease must be a bool, got {global_lease!r}")
        settings: Dict[str, Any] = {"on_unavailable": on_unavailable, "global_lease": global_lease}
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
            from redis.exceptions import NoScriptError, ResponseError
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("ratelane.redis needs redis-py: pip install 'ratelane[redis]'") from exc
        self._no_script = NoScriptError
        self._response_error = ResponseError
        if isinstance(client_or_url, str):
            # No retries inside redis-py: the core decides what a failure means, and the
            # reservation timeout bounds every wait.
            self._redis: Any = aioredis.Redis.from_url(
                client_or_url, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0)
            )
            # Replies bounded before they are read (``bounded_parser``), in the protocol the
            # URL asks for.
            kwargs = self._redis.connection_pool.connection_kwargs
            protocol = kwargs.get("protocol") or _default_protocol()
            kwargs["parser_class"] = bounded_parser(int(protocol))
            self._owns = True
        else:
            self._redis = client_or_url
            self._owns = False
        self.prefix = prefix
        self.timeout = float(timeout)
        self.client_name = client_name or uuid.uuid4().hex
        self._sha: Optional[str] = None
        # The core's validated lease, pioneer_poll and state_ttl (ns), given by ``bind``.
        self._durations: Optional[Tuple[int, int, int]] = None
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
        self._durations = (
            shared_config["lease_ns"],
            shared_config["pioneer_poll_ns"],
            shared_config["state_ttl_ns"],
        )

    def reserve(self, reservation: Any) -> "asyncio.Future[Answer]":
        """Queues a reservation; the future holds its answer (or an exception)."""
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._submit(_Op(store_op(reservation), future))
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
        self._submit(_Op(store_op(update), None))

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
        """One reply per op. Several ops go as one ``batch`` call of the script (one
        ``EVALSHA``, each op run as its own call would); an op the script refused gets its
        error, and a failed call (``NOSCRIPT``, an error reply) is every op's reply."""
        if self._durations is None:
            raise RuntimeError("RedisStore: bind() was not called (pass the store to RateLimiter(shared=...))")
        # The core writes the ARGV: one op's own call, or a ``batch`` of them.
        args = _core.store_argv(self.client_name, *self._durations, [op.op for op in batch])
        pipe = self._redis.pipeline(transaction=False)
        pipe.evalsha(self._sha, 1, self.prefix, *args)
        (reply,) = await pipe.execute(raise_on_error=False)
        if len(batch) == 1 or isinstance(reply, Exception):
            return [reply] * len(batch)
        if not isinstance(reply, list) or len(reply) != len(batch):
            # Its kind and size only: its repr may be any size, or recurse any depth.
            size = f" of {len(reply)} elements" if isinstance(reply, list) else ""
            raise RedisBadReplyError(f"the shared store answered a batch of {len(batch)} with a {type(reply).__name__}{size}")
        return [_item_reply(item, self._response_error) for item in reply]

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
            op.future.set_result(_core.store_answer(reply))
        except RedisBadReplyError as exc:
            op.future.set_exception(exc)


# ---------------------------------------------------------------------- server-side limiters


class _Script:
    """One of the scripts: its text and the SHA-1 of its exact bytes, as ``EVALSHA`` takes it."""

    __slots__ = ("text", "sha")

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()


# By the name ``_core.Limit.script`` gives.
_SCRIPTS = {"GCRA_LUA": _Script(GCRA_LUA), "LEAKY_BUCKET_LUA": _Script(LEAKY_BUCKET_LUA), "FIXED_WINDOW_LUA": _Script(FIXED_WINDOW_LUA)}


def _redis_exceptions() -> ModuleType:
    try:
        import redis.exceptions
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("ratelane.redis needs redis-py: pip install 'ratelane[redis]'") from exc
    return redis.exceptions


def _failure(exc: BaseException, rx: ModuleType) -> Optional[RatelaneError]:
    """The ``RedisLimiterError`` for what redis-py (or the socket under it) raised, or None for
    anything that is not a Redis failure (a bug: left to propagate). A script's
    ``RATELANE_CLOCK`` is the ``InvalidRequestError`` the in-memory store raises for the same call
    (a job that would be released after 2^64 - 1 ns), not a failure of Redis."""
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, rx.ResponseError):
        # An error reply. The scripts' own start with a code; redis-py leaves unknown codes
        # (RATELANE_*, WRONGTYPE) at the start of the message.
        code = str(exc).split(" ", 1)[0]
        if code in ("RATELANE_STATE", "WRONGTYPE"):
            return RedisBadStateError(str(exc))
        if code == "RATELANE_RANGE":
            return OutOfRangeError(str(exc))
        if code == "RATELANE_CLOCK":
            return InvalidRequestError(str(exc))
        return RedisServerError(f"Redis answered with an error: {message}")
    if isinstance(exc, (rx.ConnectionError, rx.TimeoutError, OSError, asyncio.TimeoutError)):
        return RedisConnectionError(f"Redis connection failed: {message}")
    if isinstance(exc, rx.InvalidResponse):
        return RedisBadReplyError(f"unexpected reply from Redis: {message}")
    if isinstance(exc, (rx.RedisError, rx.RedisClusterException)):
        return RedisServerError(f"Redis failed: {message}")
    if isinstance(exc, RecursionError):
        # The client's reader recursed into a reply nested deeper than Python's stack: no
        # script answers that (a hostile or broken server, or a proxy), so it is a bad reply.
        return RedisBadReplyError(f"unexpected reply from Redis: nested too deep to read ({exc})")
    return None


async def _evaluate(client: Any, script: _Script, key: str, argv: Sequence[str]) -> Any:
    """One script call: ``EVALSHA`` (one round trip), and only when Redis answers ``NOSCRIPT``
    (a fresh server, ``SCRIPT FLUSH``, a failover) ``EVAL`` with the full text, which also
    caches it for the next calls. Redis failures become ``RedisLimiterError``s."""
    rx = _redis_exceptions()
    try:
        try:
            return await client.evalsha(script.sha, 1, key, *argv)
        except rx.NoScriptError:
            return await client.eval(script.text, 1, key, *argv)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        failure = _failure(exc, rx)
        if failure is None:
            raise
        raise failure from exc


class _RedisLimiter:
    """What the three limiters share.

    Attributes:
        client: the redis-py asyncio client every check goes through (left open: the caller's).
        prefix: every key is ``prefix + key``.
        min_ttl_ms: keys live at least this long (0: exactly until their state is empty again).
    """

    __slots__ = ("client", "prefix", "min_ttl_ms", "_script", "_lua")

    def _setup(self, client: "_Client", limit: _core.Limit, prefix: str, min_ttl_ms: int) -> None:
        limit.check_script()
        self._script = limit
        self._lua = _SCRIPTS[limit.script]
        if not isinstance(prefix, str):
            raise InvalidConfigError(f"prefix must be a str, got {prefix!r}")
        if isinstance(min_ttl_ms, bool) or not isinstance(min_ttl_ms, int) or min_ttl_ms < 0:
            raise InvalidConfigError(f"min_ttl_ms must be an int >= 0, got {min_ttl_ms!r}")
        if client is None or not hasattr(client, "evalsha"):
            raise InvalidConfigError(f"client must be a redis.asyncio.Redis (or RedisCluster) client, got {client!r}")
        self.client: Any = client
        self.prefix = prefix
        self.min_ttl_ms = min_ttl_ms

    def _key(self, key: str) -> str:
        if not isinstance(key, str):
            raise InvalidArgumentError(f"a key must be a str, got {key!r}")
        return self.prefix + _args.text(key, "a key")

    def _param(self, name: str) -> int:
        value = self._script.params[name]
        assert value is not None
        return value

    async def _call(self, op: str, key: str, now_ns: Optional[int], **arg: Any) -> Any:
        """One call of the limit's script for ``op``, read back by the core: the ARGV first
        (refusals without a round trip), then the key."""
        argv = self._script.argv(op, now_ns, self.min_ttl_ms, **arg)
        return self._script.read_reply(op, await _evaluate(self.client, self._lua, self._key(key), argv))


class RedisGcra(_RedisLimiter):
    """GCRA per key in Redis (``redis/scripts/gcra.lua``): one request per ``interval_ns``,
    ``burst`` back to back; the same answers as ``ratelane.server.GcraStore``, shared by every
    process that uses the same Redis and ``prefix``.

    Args:
        client: a ``redis.asyncio.Redis`` (or ``RedisCluster``) client; left open.
        interval_ns: nanoseconds between two requests at the sustained rate.
        burst: requests admitted back to back on an empty key.
        prefix: prepended to every key; one prefix per limiter.
        min_ttl_ms: keys live at least this long (for replays that run virtual time faster
            than real time; 0 by default).
    """

    __slots__ = ()

    def __init__(self, client: "_Client", interval_ns: int, burst: int, *, prefix: str, min_ttl_ms: int = 0) -> None:
        self._setup(client, _core.Limit("gcra", interval_ns=interval_ns, burst=burst), prefix, min_ttl_ms)

    @classmethod
    def per_window(cls, client: "_Client", quota: int, window_ns: int, *, prefix: str, min_ttl_ms: int = 0) -> "RedisGcra":
        """``quota`` requests per ``window_ns``, all allowed back to back."""
        limiter = cls.__new__(cls)
        limiter._setup(client, _core.Limit("gcra_per_window", quota=quota, window_ns=window_ns), prefix, min_ttl_ms)
        return limiter

    @property
    def interval_ns(self) -> int:
        return self._param("interval_ns")

    @property
    def burst(self) -> int:
        return self._param("burst")

    @property
    def window_ns(self) -> int:
        """``burst × interval_ns``: the time a full burst takes to come back."""
        return self._param("window_ns")

    async def check(self, key: str, *, now_ns: Optional[int] = None) -> Decision:
        """Checks one request for ``key`` at Redis's clock, and counts it if admitted.

        ``now_ns`` replaces Redis's clock with integer nanoseconds of your own (replaying fixed
        timestamps in tests; every caller of a key must then use the same clock)."""
        return await self.check_n(key, 1, now_ns=now_ns)

    async def check_n(self, key: str, n: int, *, now_ns: Optional[int] = None) -> Decision:
        """Checks a request of weight ``n`` (``0`` peeks: always allowed, counts nothing).

        Raises ``InsufficientCapacityError`` when ``n`` exceeds the burst, and
        ``InvalidRequestError`` when ``now_ns`` is later than ``2**64 - 1 - window_ns`` (as
        ``GcraStore.check``), without a round trip."""
        return await self._call("check_n", key, now_ns, n=n)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"RedisGcra(interval_ns={self.interval_ns}, burst={self.burst}, prefix={self.prefix!r})"


class RedisLeakyBucket(_RedisLimiter):
    """A leaky bucket per key in Redis (``redis/scripts/leaky_bucket.lua``): ``size`` requests,
    draining ``drip_size`` every ``drip_rate_ns``, optionally at most one per
    ``min_interval_ns``; the same answers as ``ratelane.server.LeakyBucketStore``.

    ``from_legacy`` takes Misskey/Sharkey's ``{max, duration, minInterval}`` limits, translated by
    the core; ``check_scaled`` scales the bucket for one subject (Sharkey's factor).
    """

    __slots__ = ()

    def __init__(
        self,
        client: "_Client",
        size: int,
        drip_rate_ns: int,
        drip_size: int = 1,
        *,
        min_interval_ns: Optional[int] = None,
        prefix: str,
        min_ttl_ms: int = 0,
    ) -> None:
        limit = _core.Limit("leaky_bucket", size=size, drip_rate_ns=drip_rate_ns, drip_size=drip_size, min_interval_ns=min_interval_ns)
        self._setup(client, limit, prefix, min_ttl_ms)

    @classmethod
    def from_legacy(
        cls,
        client: "_Client",
        *,
        max: Optional[int] = None,
        duration_ns: Optional[int] = None,
        min_interval_ns: Optional[int] = None,
        prefix: str,
        min_ttl_ms: int = 0,
    ) -> "RedisLeakyBucket":
        """From a legacy ``{max, duration, min_interval}`` limit (Misskey/Sharkey)."""
        limiter = cls.__new__(cls)
        limiter._setup(client, _core.Limit("legacy", max=max, duration_ns=duration_ns, min_interval_ns=min_interval_ns), prefix, min_ttl_ms)
        return limiter

    @property
    def size(self) -> int:
        return self._param("size")

    @property
    def drip_rate_ns(self) -> int:
        return self._param("drip_rate_ns")

    @property
    def drip_size(self) -> int:
        return self._param("drip_size")

    @property
    def min_interval_ns(self) -> Optional[int]:
        return self._script.params["min_interval_ns"]

    @property
    def window_ns(self) -> int:
        """The time a full bucket takes to drain."""
        return self._param("window_ns")

    async def check(self, key: str, *, now_ns: Optional[int] = None) -> Decision:
        """Checks one request for ``key`` at Redis's clock (or ``now_ns``, see ``RedisGcra.check``)."""
        return await self._call("check", key, now_ns)  # type: ignore[no-any-return]

    async def check_scaled(self, key: str, factor: float, *, now_ns: Optional[int] = None) -> Decision:
        """``check`` with the bucket scaled by ``factor`` in (0, 1] for this subject (the core's
        ``LeakyBucket::scaled``); ``InvalidConfigError`` otherwise, nothing sent."""
        return await self._call("check_scaled", key, now_ns, factor=factor)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return (
            f"RedisLeakyBucket(size={self.size}, drip_rate_ns={self.drip_rate_ns}, drip_size={self.drip_size}, "
            f"min_interval_ns={self.min_interval_ns}, prefix={self.prefix!r})"
        )


class RedisFixedWindow(_RedisLimiter):
    """A fixed window per key (a group) in Redis (``redis/scripts/fixed_window.lua``): ``quota``
    per ``window_ns``, with release-time estimates for delayed jobs; the same answers as
    ``ratelane.server.FixedWindowStore``.

    Unlike the in-memory store, a group whose delayed jobs are never released is forgotten one
    window after its last booked window (a job must start within its window).
    """

    __slots__ = ()

    def __init__(self, client: "_Client", quota: int, window_ns: int, *, prefix: str, min_ttl_ms: int = 0) -> None:
        self._setup(client, _core.Limit("fixed_window", quota=quota, window_ns=window_ns), prefix, min_ttl_ms)

    @property
    def quota(self) -> int:
        return self._param("quota")

    @property
    def window_ns(self) -> int:
        return self._param("window_ns")

    async def check(self, key: str, *, now_ns: Optional[int] = None) -> Decision:
        """Checks one request for ``key`` at Redis's clock (or ``now_ns``, see ``RedisGcra.check``)."""
        return await self._call("check", key, now_ns)  # type: ignore[no-any-return]

    async def schedule(self, key: str, *, now_ns: Optional[int] = None) -> Tuple[Scheduled, int]:
        """Books a slot for one job of group ``key``: ``(scheduled, now_ns)``, ``now_ns`` being
        the clock the script used (Redis's, Unix nanoseconds), so ``scheduled.release_at_ns -
        now_ns`` is the delay without trusting the local clock. A delayed job
        (``not scheduled.run_now``) is ``release``d when it starts (or is dropped).

        Raises ``OutOfRangeError`` when the job's window would end more than 2^52 ns from now,
        and ``InvalidRequestError`` when the job would be released after 2^64 - 1 ns (as
        ``FixedWindowStore.schedule``); nothing is booked."""
        return await self._call("schedule", key, now_ns)  # type: ignore[no-any-return]

    async def release(self, key: str, *, now_ns: Optional[int] = None) -> bool:
        """Records that one delayed job of ``key`` was released (or dropped); False if none waits."""
        return await self._call("release", key, now_ns)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"RedisFixedWindow(quota={self.quota}, window_ns={self.window_ns}, prefix={self.prefix!r})"
