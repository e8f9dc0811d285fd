"""Hostile servers, hostile callers, a fake Redis answering garbage (issue 44): every case
ends in the documented typed error or a documented clamped value, never in ``TypeError``,
``OverflowError``, ``UnicodeEncodeError``, ``RecursionError``, a hung request or a count left
behind.

* ``send`` returning a response whose status is not one the core takes (NaN, ``'200'``, 42,
  ``None``, -1, 2**60, 1e300, 200.5, a bool): ``InvalidArgumentError`` for that request, the
  limiter empty after it and the next request served;
* the server-side limiters' arguments (``check_n``'s weight, ``max_keys``, a key with a lone
  surrogate): ``InvalidArgumentError``, in memory and in Redis (decided before a round trip);
* the Redis reply readers (a fake client): a million elements, ten thousand deep, a client
  whose own reader recursed too deep: ``RedisBadReplyError``, at once;
* a stored state out of range (real Redis): ``RedisBadStateError`` once, the key reset;
* waits from a snapshot or from the store: within ``max_server_wait``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import uuid
from types import SimpleNamespace
from typing import Any, List

import pytest

import ratelane
import ratelane.redis
from ratelane.server import FixedWindowStore, GcraStore, LeakyBucketStore

REDIS_URL = os.environ.get("RATELANE_REDIS_URL")
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="RATELANE_REDIS_URL is not set (scripts/tests.d/10-python.sh sets it)")

BAD_STATUSES = [math.nan, math.inf, -math.inf, "200", 42, None, -1, 2**60, 1e300, 200.5, 429.0, True, 1000, 99]


# ------------------------------------------------------------------------------ send's status


@pytest.mark.parametrize("status", BAD_STATUSES, ids=repr)
def test_a_send_returning_a_bad_status_ends_that_request_with_a_typed_error(status: Any) -> None:
    async def main() -> None:
        limiter = ratelane.RateLimiter()
        bad = SimpleNamespace(status=status, headers={})

        async def send_bad() -> Any:
            return bad

        with pytest.raises(ratelane.InvalidArgumentError) as raised:
            await asyncio.wait_for(limiter.run("GET", "/users/@me", send_bad), 5)
        assert raised.value.code == "invalid_argument"
        # Nothing is left behind: the request left the limiter.
        assert (limiter.queued, limiter.in_flight) == (0, 0)

        async def send_ok() -> Any:
            return SimpleNamespace(status=200, headers={})

        assert (await asyncio.wait_for(limiter.run("GET", "/users/@me", send_ok), 5)).status == 200
        await limiter.aclose()

    asyncio.run(main())


def test_a_response_without_a_status_is_a_typed_error() -> None:
    async def main() -> None:
        limiter = ratelane.RateLimiter()

        async def send() -> Any:
            return SimpleNamespace(headers={})

        with pytest.raises(ratelane.InvalidArgumentError):
            await asyncio.wait_for(limiter.run("GET", "/users/@me", send), 5)
        assert (limiter.queued, limiter.in_flight) == (0, 0)
        await limiter.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("status", BAD_STATUSES, ids=repr)
def test_the_sans_io_status_checks_are_typed(status: Any) -> None:
    limiter = ratelane.Limiter()
    rid = limiter.enqueue(0, "GET", "/users/@me")
    limiter.drain()
    with pytest.raises(ratelane.InvalidArgumentError):
        limiter.reads_body(status)
    with pytest.raises(ratelane.InvalidArgumentError):
        limiter.handle_response(1, rid, status, [])
    assert limiter.in_flight == 1, "a refused answer changes nothing"
    assert ratelane._core.STATUSES == (100, 999)


@pytest.mark.parametrize("rid", [1.5, -1, math.nan, math.inf, 2**64, "1", None])
def test_request_ids_are_whole_numbers(rid: Any) -> None:
    limiter = ratelane.Limiter()
    limiter.enqueue(0, "GET", "/users/@me")
    with pytest.raises(ratelane.InvalidArgumentError):
        limiter.cancel(1, rid)
    assert limiter.in_flight == 1, "request 1 was not touched"


# ------------------------------------------------------------------------------ server side


@pytest.mark.parametrize("n", [-1, 2**32, 2**64, 1.5, "2", math.nan])
def test_a_weight_out_of_range_is_a_typed_error(n: Any) -> None:
    with pytest.raises(ratelane.InvalidArgumentError):
        GcraStore(1_000_000, 10).check_n("k", 0, n)
    limiter = ratelane.redis.RedisGcra(FakeClient([]), 1_000_000, 10, prefix="p:")
    with pytest.raises(ratelane.InvalidArgumentError):
        asyncio.run(limiter.check_n("k", n))


@pytest.mark.parametrize("max_keys", [-1, math.nan, 2**64, "10", 1.5])
def test_max_keys_out_of_range_is_a_typed_error(max_keys: Any) -> None:
    for make in (lambda: GcraStore(1_000_000, 10, max_keys), lambda: FixedWindowStore(10, 1_000_000, max_keys),
                 lambda: LeakyBucketStore(10, 1_000_000, 1, max_keys)):
        with pytest.raises(ratelane.InvalidArgumentError):
            make()


@pytest.mark.parametrize("key", ["\ud800", "a\udfffb", b"bytes", 7, None])
def test_a_key_that_is_not_text_is_a_typed_error(key: Any) -> None:
    store = GcraStore(1_000_000, 10)
    with pytest.raises(ratelane.InvalidArgumentError):
        store.check(key, 0)
    with pytest.raises(ratelane.InvalidArgumentError):
        store.check_n(key, 0, 1)
    with pytest.raises(ratelane.InvalidArgumentError):
        key in store  # noqa: B015
    limiter = ratelane.redis.RedisGcra(FakeClient([]), 1_000_000, 10, prefix="p:")
    with pytest.raises(ratelane.InvalidArgumentError):
        asyncio.run(limiter.check(key))


def test_a_bad_factor_is_a_typed_error() -> None:
    with pytest.raises((ratelane.InvalidArgumentError, ratelane.InvalidConfigError)):
        LeakyBucketStore(10, 1_000_000)._apply("check_scaled", "k", 0, factor="half")


# ------------------------------------------------------------------------------ Redis replies


class FakeClient:
    """A redis-py stand-in whose every script call answers (or raises) the next item."""

    def __init__(self, replies: List[Any]) -> None:
        self.replies = list(replies)
        self.calls = 0

    async def evalsha(self, *args: Any) -> Any:
        self.calls += 1
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    async def eval(self, *args: Any) -> Any:
        return await self.evalsha(*args)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def garbage_replies() -> List[Any]:
    return [
        [1] * 1_000_000,
        [b"decision"] + [[1] * 1000] * 1000,
        nested(10_000),
        [b"decision", nested(10_000)],
        [b"released", 10**100_000],
        b"x" * (1 << 20),
        {b"a": nested(10_000)},
        [b"x" * (1 << 20)],
    ]


@pytest.mark.parametrize("index", range(len(garbage_replies())))
def test_a_garbage_reply_is_a_bad_reply_at_once(index: int) -> None:
    reply = garbage_replies()[index]
    for limiter in (
        ratelane.redis.RedisGcra(FakeClient([reply]), 1_000_000, 10, prefix="p:"),
        ratelane.redis.RedisFixedWindow(FakeClient([reply]), 10, 1_000_000, prefix="p:"),
        ratelane.redis.RedisLeakyBucket(FakeClient([reply]), 10, 1_000_000, prefix="p:"),
    ):
        with pytest.raises(ratelane.RedisBadReplyError) as raised:
            asyncio.run(limiter.check("k"))
        assert len(str(raised.value)) < 400, "the message describes the reply, not the whole of it"
    with pytest.raises(ratelane.RedisBadReplyError):
        ratelane.redis.parse_answer(reply)


def test_a_client_whose_reader_recursed_is_a_bad_reply() -> None:
    limiter = ratelane.redis.RedisGcra(FakeClient([RecursionError("maximum recursion depth exceeded")]), 1_000_000, 10, prefix="p:")
    with pytest.raises(ratelane.RedisBadReplyError):
        asyncio.run(limiter.check("k"))


def test_a_batch_answered_with_garbage_fails_its_reservations_not_the_process() -> None:
    async def main() -> None:
        store = ratelane.redis.RedisStore("redis://127.0.0.1:1/0", prefix="{p}:", timeout=0.2)
        store._sha = "0" * 40
        store.bind({"lease_ns": 30 * 10**9, "pioneer_poll_ns": 50 * 10**6, "state_ttl_ns": 600 * 10**9})

        class Pipe:
            def evalsha(self, *args: Any) -> None:
                pass

            async def execute(self, raise_on_error: bool = True) -> List[Any]:
                return [nested(10_000)]

        store._redis = SimpleNamespace(pipeline=lambda transaction=False: Pipe(), aclose=lambda: asyncio.sleep(0))
        limiter = ratelane.Limiter({"shared": {}})
        limiter.enqueue(0, "GET", "/users/@me")
        limiter.enqueue(0, "GET", "/users/@me/guilds")
        reserves = [o for o in limiter.drain() if isinstance(o, ratelane.Reserve)]
        futures = [store.reserve(r) for r in reserves]
        for future in futures:
            with pytest.raises(ratelane.RedisBadReplyError):
                await asyncio.wait_for(future, 5)
        store._closed = True

    asyncio.run(main())


async def serve_garbage(port_ready: "asyncio.Future[int]", stop: asyncio.Event) -> None:
    """A TCP server speaking enough RESP for a client to connect (``+OK`` to everything), whose
    script calls are answered with a million elements or ten thousand levels."""
    wide = b"*1000000\r\n" + b":1\r\n" * 1_000_000
    deep = b"*1\r\n" * 10_000 + b":1\r\n"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if b"EVALSHA" in data.upper():
                    writer.write(deep if b"deep" in data else wide)
                else:
                    writer.write(b"+OK\r\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port_ready.set_result(server.sockets[0].getsockname()[1])
    async with server:
        await stop.wait()


def test_a_huge_or_deep_reply_on_the_wire_is_refused_before_it_is_read() -> None:
    """redis-py's parsers read a whole reply before anything can look at it: a million elements
    held the event loop for seconds (about a minute on a loaded machine), ten thousand levels
    raised RecursionError. ``bounded_parser`` refuses them as their headers come in."""
    import redis.asyncio

    # The private part of redis-py it builds on: fail loudly if a version moves it.
    from redis._parsers.resp2 import _AsyncRESP2Parser
    from redis._parsers.resp3 import _AsyncRESP3Parser

    assert callable(getattr(_AsyncRESP2Parser, "_readline")) and callable(getattr(_AsyncRESP3Parser, "_readline"))

    async def main() -> None:
        ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()
        task = asyncio.create_task(serve_garbage(ready, stop))
        port = await ready
        try:
            for protocol in (2, 3):
                for prefix in ("wide:", "deep:"):
                    client = redis.asyncio.Redis.from_url(
                        f"redis://127.0.0.1:{port}/0?protocol={protocol}", socket_timeout=10,
                        parser_class=ratelane.redis.bounded_parser(protocol),
                    )
                    limiter = ratelane.redis.RedisGcra(client, 1_000_000, 10, prefix=prefix)
                    with pytest.raises(ratelane.RedisBadReplyError):
                        await asyncio.wait_for(limiter.check("k"), 10)
                    await client.aclose()
            # The store's own client (from a URL) bounds its replies: the reservation fails
            # (the driver answers the core "unavailable"), the loop is not held.
            store = ratelane.redis.RedisStore(f"redis://127.0.0.1:{port}/0", prefix="{p}:", timeout=0.25)
            store._sha = "0" * 40
            store.bind({"lease_ns": 30 * 10**9, "pioneer_poll_ns": 50 * 10**6, "state_ttl_ns": 600 * 10**9})
            limiter_core = ratelane.Limiter({"shared": {}})
            limiter_core.enqueue(0, "GET", "/users/@me")
            (reserve,) = [o for o in limiter_core.drain() if isinstance(o, ratelane.Reserve)]
            with pytest.raises(Exception) as raised:
                await asyncio.wait_for(store.reserve(reserve), 10)
            assert "larger than ratelane reads" in str(raised.value), raised.value
            await store.aclose()
        finally:
            stop.set()
            await task

    asyncio.run(main())


@needs_redis
def test_a_stored_count_out_of_range_is_a_bad_state_once_and_the_key_is_reset() -> None:
    import redis.asyncio

    async def main() -> None:
        client = redis.asyncio.Redis.from_url(REDIS_URL)
        prefix = "ratelane-py-range:" + uuid.uuid4().hex[:12] + ":"
        try:
            leaky = ratelane.redis.RedisLeakyBucket(client, 2, 10**9, prefix=prefix)
            fixed = ratelane.redis.RedisFixedWindow(client, 2, 10**9, prefix=prefix)
            cases = [
                (leaky, "lb", "9007199254740993 1700000000000000000 0 0"),
                (leaky, "lb-huge", "99999999999999999999 1700000000000000000 0 0"),
                (fixed, "fw", "1700000000000000000 9007199254740992 0"),
                (fixed, "fw-waiting", "1700000000000000000 1 99999999999999999999"),
            ]
            for limiter, name, value in cases:
                await client.set(prefix + name, value)
                with pytest.raises(ratelane.RedisBadStateError):
                    await limiter.check(name)
                assert not await client.exists(prefix + name), f"{name}: the key was reset"
                assert (await limiter.check(name)).allowed, f"{name}: the next check starts from an empty key"
        finally:
            await client.aclose()

    asyncio.run(main())


# ------------------------------------------------------------------------------ waits


def test_waits_from_a_snapshot_or_the_store_are_clamped_to_max_server_wait() -> None:
    hour = 3600 * 10**9
    wall = 1_700_000_000_000
    limiter = ratelane.Limiter()
    snapshot = {
        "format": "ratelane.snapshot", "version": 1, "taken_at_ms": wall, "profile": "discord",
        "routes": [], "windows": [], "invalid_requests_ms": [],
        "global_pauses": [{"identity": "", "until_ms": 2**64 - 1}],
        "host_pause": {"until_ms": wall + 10 * 365 * 86_400_000, "strikes": 1},
    }
    limiter.restore(0, wall, json.dumps(snapshot))
    assert limiter.predict(0, "GET", "/users/@me") == hour
    limiter.enqueue(0, "GET", "/users/@me")
    assert limiter.drain() == [ratelane.WaitUntil(hour)]

    shared = ratelane.Limiter({"shared": {}, "max_wait_ns": 2 * hour})
    rid = shared.enqueue(0, "GET", "/users/@me")
    shared.drain()
    shared.handle_reservation(1, rid, "denied", retry_after_ns=9_007_199_254_740_991_000, scope="global", processes=1)
    assert shared.drain() == [ratelane.WaitUntil(1 + hour)], "held for the bound, not failed by max_wait"

