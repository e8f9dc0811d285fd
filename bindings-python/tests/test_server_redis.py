"""Server-side limiters in Redis (``ratelane.redis.RedisGcra``, ``RedisLeakyBucket``,
``RedisFixedWindow``) against a real redis-server, and their plumbing against fake clients.

* Every case of every ``tests/vectors/server_*.json`` replayed through the Python API and the
  scripts (with the scripts' ``now_ns`` override): decision fields, rendered headers, bookings
  and releases equal the file's ``expect``, and an unbounded in-memory store's answers.
  ``store_len`` / ``untracked`` are in-memory counters: instead the key exists in Redis exactly
  when the in-memory store holds it (as ``redis/tests/redis_vectors.rs`` does).
* One round trip per check, ``EVAL`` only after ``NOSCRIPT``; the scripts are the files of
  ``redis/scripts/``; error replies, dead servers and malformed replies become the typed errors
  with ratelane-redis's codes.
* Concurrency: asyncio tasks on several connections, and OS processes, on one key with Redis's
  clock: the admitted count never exceeds the algorithm's bound.
* ``examples/python/protect_endpoint_redis.py``, served on 127.0.0.1 and exercised.

Needs RATELANE_REDIS_URL for the tests marked ``needs_redis`` (scripts/tests.d/10-python.sh
starts a server). No assertion depends on how long anything takes: bounds computed from
elapsed time only grow with it, and limits with real time use windows of an hour.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import uuid
from typing import Any, Dict, List, Optional, Tuple

import pytest

import ratelane
import ratelane.redis
from conftest import VECTORS
from discord_server import run
from ratelane.redis import RedisFixedWindow, RedisGcra, RedisLeakyBucket
from test_server_vectors import build, decision_json, run_step, scheduled_json

REDIS_URL = os.environ.get("RATELANE_REDIS_URL")
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="RATELANE_REDIS_URL is not set (scripts/tests.d/10-python.sh sets it)")

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRIPTS = REPO / "redis" / "scripts"
SECOND = 1_000_000_000
MS = 1_000_000
HOUR = 3600 * SECOND
#: No key expires in real time during a replay (virtual time runs much faster).
MIN_TTL_MS = 60_000

Limiter = Any  # RedisGcra | RedisLeakyBucket | RedisFixedWindow


def unique_prefix(what: str) -> str:
    return f"ratelane-py-test:{what}:{uuid.uuid4().hex[:12]}:"


def client(**kwargs: Any) -> Any:
    import redis.asyncio

    assert REDIS_URL
    return redis.asyncio.Redis.from_url(REDIS_URL, **kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------ the scripts


def test_the_embedded_scripts_are_the_files_of_redis_scripts() -> None:
    for name, text in (
        ("gcra", ratelane.redis.GCRA_LUA),
        ("leaky_bucket", ratelane.redis.LEAKY_BUCKET_LUA),
        ("fixed_window", ratelane.redis.FIXED_WINDOW_LUA),
        ("shared_store", ratelane.redis.SHARED_STORE_LUA),
    ):
        assert text == (SCRIPTS / f"{name}.lua").read_text(), name


def test_the_error_codes_are_ratelane_redis_codes() -> None:
    source = (REPO / "redis" / "src" / "error.rs").read_text()
    listed = re.search(r"ALL_CODES: &'static \[&'static str\] = &\[(.*?)\];", source, re.S)
    assert listed is not None
    assert ratelane.redis.REDIS_ERROR_CODES == tuple(re.findall(r'"([a-z_]+)"', listed.group(1)))
    for code, cls in ratelane.REDIS_ERROR_CLASSES.items():
        assert cls.code == code and issubclass(cls, ratelane.RedisLimiterError)
        assert getattr(ratelane.redis, cls.__name__) is cls


# ------------------------------------------------------------------------------ vectors


def build_redis(algorithm: str, config: Dict[str, Any], redis_client: Any, prefix: str) -> Limiter:
    kw: Dict[str, Any] = {"prefix": prefix, "min_ttl_ms": MIN_TTL_MS}

    def ms(c: Dict[str, Any], key: str) -> Optional[int]:
        return None if key not in c else c[key] * MS

    if algorithm == "gcra":
        if "quota" in config:
            return RedisGcra.per_window(redis_client, config["quota"], ms(config, "window_ms"), **kw)
        return RedisGcra(redis_client, ms(config, "interval_ms"), config["burst"], **kw)
    if algorithm == "leaky_bucket":
        if "legacy" in config:
            legacy = config["legacy"]
            return RedisLeakyBucket.from_legacy(
                redis_client,
                max=legacy.get("max"),
                duration_ns=ms(legacy, "duration_ms"),
                min_interval_ns=ms(legacy, "min_interval_ms"),
                **kw,
            )
        return RedisLeakyBucket(
            redis_client,
            config["size"],
            ms(config, "drip_rate_ms"),
            config["drip_size"],
            min_interval_ns=ms(config, "min_interval_ms"),
            **kw,
        )
    assert algorithm == "fixed_window"
    return RedisFixedWindow(redis_client, config["quota"], ms(config, "window_ms"), **kw)


async def redis_step(limiter: Limiter, step: Dict[str, Any], policy: str) -> Dict[str, Any]:
    """A step through Redis, in the file's layout (without the in-memory counters)."""
    now, key, op = step["at_ms"] * MS, step["key"], step["op"]
    try:
        if op == "check" and "n" in step:
            return decision_json(await limiter.check_n(key, step["n"], now_ns=now), policy)
        if op == "check" and "factor" in step:
            return decision_json(await limiter.check_scaled(key, step["factor"], now_ns=now), policy)
        if op == "check":
            return decision_json(await limiter.check(key, now_ns=now), policy)
        if op == "schedule":
            scheduled, script_now = await limiter.schedule(key, now_ns=now)
            assert script_now == now, "the script's clock is the one given"
            return scheduled_json(scheduled)
        if op == "release":
            return {"released": await limiter.release(key, now_ns=now)}
    except ratelane.InsufficientCapacityError as exc:
        return {"error": exc.code, "requested": exc.requested, "capacity": exc.capacity}
    except ratelane.RedisLimiterError:
        raise  # Redis failed: never an expected outcome
    except ratelane.RatelaneError as exc:
        return {"error": exc.code}
    raise AssertionError(f"unknown op {op}")


def vector_cases() -> List[Any]:
    out = []
    for path in sorted(VECTORS.glob("server_*.json")):
        vector = json.loads(path.read_text())
        for index, case in enumerate(vector["cases"]):
            out.append(pytest.param(vector["algorithm"], case, id=f"{path.stem}-{index}"))
    return out


def test_every_server_vector_file_is_replayed() -> None:
    files = {p.stem for p in VECTORS.glob("server_*.json")}
    assert files == {"server_gcra", "server_leaky_bucket", "server_fixed_window"}
    steps = sum(len(p.values[1].get("steps", [])) for p in vector_cases())
    assert steps > 60


@needs_redis
@pytest.mark.parametrize("algorithm, case", vector_cases())
def test_server_vector_in_redis(algorithm: str, case: Dict[str, Any]) -> None:
    config = case["config"]
    if "expect_error" in case:
        # Validated by the core before anything is sent, with the in-memory stores' message.
        with pytest.raises(ratelane.RatelaneError) as in_memory:
            build(algorithm, config)
        with pytest.raises(ratelane.RatelaneError) as in_redis:
            build_redis(algorithm, config, object(), "unused:")
        assert in_redis.value.code == case["expect_error"]
        assert in_redis.value.message == in_memory.value.message
        return

    async def replay() -> None:
        redis_client = client()
        prefix = unique_prefix(f"vectors:{algorithm}")
        try:
            limiter = build_redis(algorithm, config, redis_client, prefix)
            # Redis has no max_keys: it is compared with a store that has room for every key.
            unbounded = build(algorithm, {**config, "max_keys": 1 << 20})
            untracked = 0
            for index, step in enumerate(case["steps"]):
                where = f"{case['name']}: step {index} {step}"
                in_redis = await redis_step(limiter, step, config["policy"])
                in_memory = run_step(unbounded, step, config["policy"])
                del in_memory["store_len"], in_memory["untracked"]
                assert in_redis == in_memory, f"Redis vs unbounded store, {where}"
                expect = dict(step["expect"])
                grew = expect.pop("untracked") > untracked
                untracked = step["expect"]["untracked"]
                del expect["store_len"]
                if not grew:  # else answered from a state the bounded store could not keep
                    assert in_redis == expect, where
                exists = await redis_client.exists(prefix + step["key"]) == 1
                assert exists == (step["key"] in unbounded), f"the key exists exactly when its state is not empty, {where}"
        finally:
            await redis_client.aclose()

    run(replay())


# ------------------------------------------------------------------------------ configuration


def test_configuration_is_validated_by_the_core_with_the_in_memory_messages() -> None:
    from ratelane.server import FixedWindowStore, GcraStore, LeakyBucketStore

    cases = [
        (lambda: GcraStore(0, 3), lambda c: RedisGcra(c, 0, 3, prefix="p:")),
        (lambda: GcraStore.per_window(0, SECOND), lambda c: RedisGcra.per_window(c, 0, SECOND, prefix="p:")),
        (lambda: LeakyBucketStore(0, SECOND), lambda c: RedisLeakyBucket(c, 0, SECOND, prefix="p:")),
        (lambda: LeakyBucketStore.from_legacy(max=3), lambda c: RedisLeakyBucket.from_legacy(c, max=3, prefix="p:")),
        (lambda: FixedWindowStore(3, 0), lambda c: RedisFixedWindow(c, 3, 0, prefix="p:")),
    ]
    fake = FakeClient([])
    for in_memory, in_redis in cases:
        with pytest.raises(ratelane.InvalidConfigError) as expected:
            in_memory()
        with pytest.raises(ratelane.InvalidConfigError) as got:
            in_redis(fake)
        assert got.value.message == expected.value.message
    assert fake.calls == []


def test_windows_the_scripts_cannot_evaluate_exactly_are_refused() -> None:
    fake = FakeClient([])
    limit = 1 << 52
    RedisGcra(fake, limit, 1, prefix="p:")
    RedisFixedWindow(fake, 1, limit, prefix="p:")
    RedisLeakyBucket(fake, 1, limit, prefix="p:")
    for make in (
        lambda: RedisGcra(fake, limit // 2 + 1, 2, prefix="p:"),
        lambda: RedisGcra.per_window(fake, 1, limit + 1, prefix="p:"),
        lambda: RedisFixedWindow(fake, 1, limit + 1, prefix="p:"),
        lambda: RedisLeakyBucket(fake, 2, limit, prefix="p:"),
        lambda: RedisLeakyBucket(fake, 1, SECOND, min_interval_ns=limit + 1, prefix="p:"),
    ):
        with pytest.raises(ratelane.InvalidConfigError, match="longer than the Redis scripts evaluate exactly"):
            make()
    with pytest.raises(ratelane.InvalidConfigError, match="prefix"):
        RedisGcra(fake, SECOND, 1, prefix=None)  # type: ignore[arg-type]
    with pytest.raises(ratelane.InvalidConfigError, match="client"):
        RedisGcra(None, SECOND, 1, prefix="p:")  # type: ignore[arg-type]
    with pytest.raises(ratelane.InvalidConfigError, match="min_ttl_ms"):
        RedisGcra(fake, SECOND, 1, prefix="p:", min_ttl_ms=-1)
    gcra = RedisGcra.per_window(fake, 10, 60 * SECOND, prefix="p:")
    assert (gcra.interval_ns, gcra.burst, gcra.window_ns) == (6 * SECOND, 10, 60 * SECOND)
    legacy = RedisLeakyBucket.from_legacy(fake, max=10, duration_ns=60 * SECOND, min_interval_ns=SECOND, prefix="p:")
    assert (legacy.size, legacy.drip_rate_ns, legacy.drip_size, legacy.min_interval_ns) == (10, 6 * SECOND, 1, SECOND)
    assert "RedisGcra(interval_ns=6000000000, burst=10" in repr(gcra)


# ------------------------------------------------------------------------------ plumbing (fake client)


class FakeClient:
    """Answers ``evalsha``/``eval`` from a list (an exception is raised), recording the calls."""

    def __init__(self, replies: List[Any]) -> None:
        self.replies = list(replies)
        self.calls: List[Tuple[Any, ...]] = []

    async def _answer(self, *call: Any) -> Any:
        self.calls.append(call)
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    async def evalsha(self, sha: str, numkeys: int, *args: str) -> Any:
        return await self._answer("evalsha", sha, numkeys, *args)

    async def eval(self, text: str, numkeys: int, *args: str) -> Any:
        return await self._answer("eval", text, numkeys, *args)


def decision_reply(allowed: int = 1, limit: int = 3, remaining: int = 2, reset: int = 0, clear: int = 100,
                   replenish: int = 100, window: int = 300, now: Any = b"1732364823000000005") -> List[Any]:
    return [b"decision", allowed, limit, remaining, reset, clear, replenish, window, now]


def sha1(name: str) -> str:
    return hashlib.sha1((SCRIPTS / f"{name}.lua").read_bytes()).hexdigest()


def test_each_check_is_one_evalsha_with_the_documented_arguments() -> None:
    async def go() -> None:
        fake = FakeClient([decision_reply()] * 6 + [[b"scheduled", 0, b"1732364823000000305", 1, b"1732364823000000005"],
                                                    [b"released", 1]])
        gcra = RedisGcra(fake, 100, 3, prefix="g:", min_ttl_ms=7)
        bucket = RedisLeakyBucket(fake, 10, 1000, 2, min_interval_ns=50, prefix="b:")
        window = RedisFixedWindow(fake, 4, 1000, prefix="w:")
        d = await gcra.check("k")
        assert (d.allowed, d.remaining, d.clear_after_ns, d.replenish_after_ns, d.window_ns) == (True, 2, 100, 100, 300)
        await gcra.check_n("k", 0, now_ns=42)
        await bucket.check("k")
        await bucket.check_scaled("k", 0.5, now_ns=10**19)
        await window.check("k")
        await window.check("k", now_ns=5)
        scheduled, now = await window.schedule("k")
        assert (scheduled.run_now, scheduled.release_at_ns, scheduled.waiting, now) == (
            False, 1732364823000000305, 1, 1732364823000000005)
        assert await window.release("k") is True
        assert fake.calls == [
            ("evalsha", sha1("gcra"), 1, "g:k", "100", "3", "1", "", "7"),
            ("evalsha", sha1("gcra"), 1, "g:k", "100", "3", "0", "42", "7"),
            ("evalsha", sha1("leaky_bucket"), 1, "b:k", "10", "1000", "2", "50", "", "0"),
            ("evalsha", sha1("leaky_bucket"), 1, "b:k", "5", "1000", "2", "50", "10000000000000000000", "0"),
            ("evalsha", sha1("fixed_window"), 1, "w:k", "check", "4", "1000", "", "0"),
            ("evalsha", sha1("fixed_window"), 1, "w:k", "check", "4", "1000", "5", "0"),
            ("evalsha", sha1("fixed_window"), 1, "w:k", "schedule", "4", "1000", "", "0"),
            ("evalsha", sha1("fixed_window"), 1, "w:k", "release", "4", "1000", "", "0"),
        ]

    run(go())


def test_noscript_falls_back_to_eval_with_the_file_text() -> None:
    from redis.exceptions import NoScriptError

    async def go() -> None:
        fake = FakeClient([NoScriptError("No matching script."), decision_reply()])
        await RedisGcra(fake, 100, 3, prefix="g:").check("k")
        assert [c[0] for c in fake.calls] == ["evalsha", "eval"]
        assert fake.calls[1][1] == (SCRIPTS / "gcra.lua").read_text()
        assert fake.calls[0][2:] == fake.calls[1][2:]

    run(go())


def test_what_is_refused_before_any_round_trip() -> None:
    async def go() -> None:
        fake = FakeClient([])
        with pytest.raises(ratelane.InsufficientCapacityError) as info:
            await RedisGcra(fake, 100, 3, prefix="g:").check_n("k", 4)
        assert (info.value.code, info.value.requested, info.value.capacity) == ("insufficient_capacity", 4, 3)
        assert str(info.value) == "a request of weight 4 can never be admitted: the burst is 3"
        bucket = RedisLeakyBucket(fake, 10, 1000, prefix="b:")
        for factor in (0.0, 1.5, -1.0, float("nan")):
            with pytest.raises(ratelane.InvalidConfigError, match="factor"):
                await bucket.check_scaled("k", factor)
        with pytest.raises(ratelane.InvalidArgumentError):
            await bucket.check("k", now_ns=-1)
        with pytest.raises(ratelane.InvalidArgumentError):
            await bucket.check(7)  # type: ignore[arg-type]
        # A now past the GCRA's last instant (2**64 - 1 - window), as GcraStore refuses it.
        gcra = RedisGcra(fake, 100, 3, prefix="g:")
        for now in (2**64 - 300, 2**64 - 1):
            with pytest.raises(ratelane.InvalidRequestError):
                await gcra.check("k", now_ns=now)
        assert fake.calls == []

    run(go())


def test_redis_failures_become_typed_errors_with_stable_codes() -> None:
    import redis.exceptions as rx

    cases: List[Tuple[BaseException, str]] = [
        (rx.ConnectionError("Connection refused"), "redis_connection"),
        (rx.TimeoutError("Timeout reading from socket"), "redis_connection"),
        (rx.AuthenticationError("invalid password"), "redis_connection"),
        (ConnectionResetError("reset by peer"), "redis_connection"),
        (asyncio.TimeoutError(), "redis_connection"),
        (rx.ResponseError("RATELANE_ARG interval_ns must be an integer from 1 to 2^52"), "redis_server"),
        (rx.ReadOnlyError("You can't write against a read only replica."), "redis_server"),
        (rx.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), "redis_server"),
        (rx.ResponseError("Error running script (call to f_0123): @user_script:1: boom"), "redis_server"),
        (rx.ResponseError("RATELANE_STATE the key does not hold a GCRA state"), "redis_bad_state"),
        (rx.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), "redis_bad_state"),
        (rx.ResponseError("RATELANE_RANGE the job's window would end more than 2^52 ns from now"), "out_of_range"),
        (rx.InvalidResponse("Protocol Error: b'?'"), "redis_bad_reply"),
        (rx.DataError("Invalid input"), "redis_server"),
    ]

    async def go() -> None:
        for exc, code in cases:
            limiter = RedisGcra(FakeClient([exc]), 100, 3, prefix="g:")
            with pytest.raises(ratelane.RedisLimiterError) as info:
                await limiter.check("k")
            assert info.value.code == code, repr(exc)
            assert type(info.value) is ratelane.REDIS_ERROR_CLASSES[code]
            assert info.value.__cause__ is exc
        # The in-memory store's refusal of the same call: a caller error, not a Redis failure.
        clock = rx.ResponseError("RATELANE_CLOCK the job would be released after 2^64 - 1 ns")
        with pytest.raises(ratelane.InvalidRequestError) as refused:
            await RedisFixedWindow(FakeClient([clock]), 1, 100, prefix="w:").schedule("k")
        assert refused.value.code == "invalid_request" and refused.value.__cause__ is clock
        assert not isinstance(refused.value, ratelane.RedisLimiterError)
        # Not a Redis failure: a bug, left as it is.
        with pytest.raises(KeyError):
            await RedisGcra(FakeClient([KeyError("x")]), 100, 3, prefix="g:").check("k")

    run(go())


def test_a_malformed_reply_is_a_bad_reply_never_a_crash() -> None:
    malformed: List[Any] = [
        None,
        1,
        b"decision",
        [],
        [1],
        [b"nonsense"],
        [b"decision", 1],
        decision_reply(allowed=2),
        decision_reply(allowed=True),  # a bool is not a Redis integer
        decision_reply(limit=-3),
        decision_reply(limit=1 << 40),
        decision_reply(reset=-5),
        decision_reply(replenish=-2),
        decision_reply(clear=1 << 70),
        decision_reply(now=b""),
        decision_reply(now=b"-1"),
        decision_reply(now=b"99999999999999999999999"),
        decision_reply(now=5),
        decision_reply() + [b"extra"],
        [b"released", b"1"],
        [b"released", 1, 1],
        [b"scheduled", 1, 5],
        [b"\xff\xfe", 1],
    ]

    async def go() -> None:
        for reply in malformed:
            with pytest.raises(ratelane.RedisBadReplyError) as info:
                await RedisGcra(FakeClient([reply]), 100, 3, prefix="g:").check("k")
            assert info.value.code == "redis_bad_reply"
        window = RedisFixedWindow(FakeClient([[b"released", 1], decision_reply(), decision_reply()]), 3, 100, prefix="w:")
        with pytest.raises(ratelane.RedisBadReplyError, match="expected a decision"):
            await window.check("k")
        with pytest.raises(ratelane.RedisBadReplyError, match="expected a booking"):
            await window.schedule("k")
        with pytest.raises(ratelane.RedisBadReplyError, match="expected a release"):
            await window.release("k")
        # The script's own refusal of a weight above the burst (a server-side check).
        fake = FakeClient([[b"insufficient_capacity", 6, 5]])
        with pytest.raises(ratelane.InsufficientCapacityError) as refused:
            await RedisGcra(fake, 100, 8, prefix="g:").check_n("k", 6)
        assert (refused.value.requested, refused.value.capacity) == (6, 5)
        # decode_responses=True clients give str instead of bytes.
        text = FakeClient([["decision", 0, 3, 0, 100, 300, 100, 300, "17"]])
        d = await RedisGcra(text, 100, 3, prefix="g:").check("k")
        assert (d.allowed, d.retry_after_s) == (False, 1)

    run(go())


# ------------------------------------------------------------------------------ a real Redis


async def command_calls(redis_client: Any, *names: str) -> Dict[str, int]:
    stats = await redis_client.info("commandstats")
    return {name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in names}


@needs_redis
def test_one_round_trip_per_check_and_eval_only_after_noscript() -> None:
    async def go() -> None:
        c = client()
        try:
            gcra = RedisGcra.per_window(c, 100, HOUR, prefix=unique_prefix("round-trips"))
            await gcra.check("warm-up")  # loads the script if this server never saw it
            before = await command_calls(c, "evalsha", "eval", "script|load")
            for i in range(20):
                await gcra.check(f"k{i % 3}")
            after = await command_calls(c, "evalsha", "eval", "script|load")
            assert after["evalsha"] - before["evalsha"] == 20
            assert after["eval"] == before["eval"] and after["script|load"] == before["script|load"]
            # A server that lost its scripts: EVALSHA fails with NOSCRIPT, EVAL runs and caches it.
            await c.script_flush()
            sha = hashlib.sha1(ratelane.redis.GCRA_LUA.encode()).hexdigest()
            assert await c.script_exists(sha) == [False]
            d = await gcra.check("k0")
            assert d.allowed and d.remaining == 100 - 8
            assert await c.script_exists(sha) == [True]
            again = await command_calls(c, "evalsha", "eval")
            assert again["eval"] - after["eval"] == 1
        finally:
            await c.aclose()

    run(go())


@needs_redis
def test_with_redis_clock_keys_expire_when_empty_and_decode_responses_works() -> None:
    async def go() -> None:
        c = client(decode_responses=True)
        prefix = unique_prefix("clock")
        try:
            gcra = RedisGcra(c, 10 * SECOND, 3, prefix=prefix)
            d = await gcra.check("k")
            assert d.allowed and d.remaining == 2 and d.clear_after_ns <= 10 * SECOND
            ttl = await c.pttl(prefix + "k")
            assert 0 < ttl <= 10_000
            peek = await gcra.check_n("k", 0)
            assert peek.allowed and peek.remaining == 2
            window = RedisFixedWindow(c, 1, HOUR, prefix=prefix)
            first, now = await window.schedule("job")
            second, now2 = await window.schedule("job")
            assert first.run_now and not second.run_now
            assert first.release_at_ns == now and 0 < second.release_at_ns - now2 <= HOUR
            assert await window.release("job") is True
            assert await window.release("job") is False
        finally:
            await c.aclose()

    run(go())


@needs_redis
def test_a_key_holding_something_else_is_left_alone() -> None:
    async def go() -> None:
        c = client()
        prefix = unique_prefix("foreign")
        try:
            await c.set(prefix + "text", "not a state")
            await c.rpush(prefix + "list", "x")
            limiters = [
                RedisGcra(c, SECOND, 3, prefix=prefix),
                RedisLeakyBucket(c, 3, SECOND, prefix=prefix),
                RedisFixedWindow(c, 3, SECOND, prefix=prefix),
            ]
            for limiter in limiters:
                for key in ("text", "list"):
                    with pytest.raises(ratelane.RedisBadStateError) as info:
                        await limiter.check(key)
                    assert info.value.code == "redis_bad_state"
            assert await c.get(prefix + "text") == b"not a state"
            assert await c.lrange(prefix + "list", 0, -1) == [b"x"]
        finally:
            await c.aclose()

    run(go())


@needs_redis
def test_a_booking_beyond_the_scripts_range_is_out_of_range() -> None:
    async def go() -> None:
        c = client()
        try:
            window = RedisFixedWindow(c, 1, 1 << 51, prefix=unique_prefix("range"))
            assert (await window.schedule("g", now_ns=0))[0].run_now
            assert not (await window.schedule("g", now_ns=0))[0].run_now
            with pytest.raises(ratelane.OutOfRangeError) as info:
                await window.schedule("g", now_ns=0)
            assert info.value.code == "out_of_range"
        finally:
            await c.aclose()

    run(go())


def test_an_unreachable_redis_is_a_connection_error() -> None:
    import redis.asyncio
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    async def go() -> None:
        c = redis.asyncio.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=2.0, retry=Retry(NoBackoff(), 0))
        try:
            with pytest.raises(ratelane.RedisConnectionError) as info:
                await RedisGcra(c, SECOND, 3, prefix="p:").check("k")
            assert info.value.code == "redis_connection"
            assert isinstance(info.value, ratelane.RedisLimiterError)
        finally:
            await c.aclose()

    run(go())


# ------------------------------------------------------------------------------ concurrency


async def redis_now(c: Any) -> int:
    seconds, micros = await c.time()
    return int(seconds) * SECOND + int(micros) * 1000


@needs_redis
def test_concurrent_tasks_on_one_key_never_exceed_the_bound() -> None:
    tasks, per_task = 8, 40

    async def hammer(limiter: Limiter, c: Any) -> Tuple[int, int]:
        async def worker() -> int:
            return sum([(await limiter.check("shared")).allowed for _ in range(per_task)])

        start = await redis_now(c)
        allowed = sum(await asyncio.gather(*(worker() for _ in range(tasks))))
        return allowed, await redis_now(c) - start

    async def go() -> None:
        c = client()
        try:
            gcra = RedisGcra.per_window(c, 20, HOUR, prefix=unique_prefix("tasks-gcra"))
            allowed, elapsed = await hammer(gcra, c)
            assert 20 <= allowed <= 20 + elapsed // gcra.interval_ns, (allowed, elapsed)

            bucket = RedisLeakyBucket(c, 20, HOUR // 20, prefix=unique_prefix("tasks-bucket"))
            allowed, elapsed = await hammer(bucket, c)
            assert 20 <= allowed <= 20 + elapsed // bucket.drip_rate_ns, (allowed, elapsed)

            window = RedisFixedWindow(c, 20, HOUR, prefix=unique_prefix("tasks-window"))
            allowed, elapsed = await hammer(window, c)
            assert 20 <= allowed <= 20 * (elapsed // HOUR + 1), (allowed, elapsed)

            # Jobs booked at once: each window holds exactly its quota, every waiting number once.
            jobs = RedisFixedWindow(c, 4, HOUR, prefix=unique_prefix("tasks-jobs"))
            booked = await asyncio.gather(*(jobs.schedule("group") for _ in range(tasks * 5)))
            assert sum(s.run_now for s, _ in booked) == 4
            assert sorted(s.waiting for s, _ in booked if not s.run_now) == list(range(1, tasks * 5 - 4 + 1))
            per_window: Dict[int, int] = {}
            for s, _ in booked:
                if not s.run_now:
                    per_window[s.release_at_ns] = per_window.get(s.release_at_ns, 0) + 1
            assert sorted(per_window.values()) == [4] * (tasks * 5 // 4 - 1)
        finally:
            await c.aclose()

    run(go(), limit=120.0)


WORKER = """
import asyncio, sys
import redis.asyncio
from ratelane.redis import RedisGcra

async def main(url, prefix, n):
    client = redis.asyncio.Redis.from_url(url)
    limiter = RedisGcra.per_window(client, 25, 3600 * 10**9, prefix=prefix)
    allowed = 0
    for _ in range(n):
        allowed += (await limiter.check("shared")).allowed
    await client.aclose()
    print(allowed)

asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2], int(sys.argv[3])), 60))
"""


@needs_redis
def test_processes_on_one_key_never_exceed_the_bound() -> None:
    assert REDIS_URL
    prefix = unique_prefix("processes")

    async def go() -> Tuple[int, int]:
        c = client()
        try:
            start = await redis_now(c)
            procs = [
                await asyncio.create_subprocess_exec(
                    sys.executable, "-c", WORKER, REDIS_URL, prefix, "40", stdout=asyncio.subprocess.PIPE
                )
                for _ in range(3)
            ]
            try:
                outs = await asyncio.gather(*(p.communicate() for p in procs))
            finally:
                for p in procs:
                    if p.returncode is None:
                        p.kill()
            assert all(p.returncode == 0 for p in procs)
            return sum(int(out.decode().split()[-1]) for out, _ in outs), await redis_now(c) - start
        finally:
            await c.aclose()

    allowed, elapsed = run(go(), limit=90.0)
    interval = HOUR // 25
    assert 25 <= allowed <= 25 + elapsed // interval, (allowed, elapsed)


# ------------------------------------------------------------------------------ the example


def load_example() -> Any:
    path = REPO / "examples" / "python" / "protect_endpoint_redis.py"
    spec = importlib.util.spec_from_file_location("protect_endpoint_redis", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_redis
def test_the_protect_endpoint_example_limits_per_client_ip() -> None:
    import aiohttp

    example = load_example()

    async def go() -> None:
        c = client()
        # The example's limit, 5 per window, with a window of an hour: nothing replenishes
        # during the test however slow the machine is.
        per_client = RedisGcra.per_window(c, 5, HOUR, prefix=unique_prefix("example"))
        runner, port = await example.serve(example.make_app(per_client), 0)
        try:
            async with aiohttp.ClientSession() as session:
                answers = []
                for _ in range(7):
                    async with session.get(f"http://127.0.0.1:{port}/") as response:
                        answers.append((response.status, list(response.headers.items()), await response.json()))
        finally:
            await runner.cleanup()
            await c.aclose()
        assert [status for status, _, _ in answers] == [200] * 5 + [429] * 2
        for i, (status, headers, body) in enumerate(answers):
            names = [name for name, _ in headers]
            got = {name: value for name, value in headers}
            assert got["RateLimit-Policy"] == '"per-client";q=5;w=3600'
            assert got["X-RateLimit-Remaining"] == str(max(0, 4 - i))
            if status == 200:
                assert body == {"hello": "world", "remaining": 4 - i}
                assert "Retry-After" not in got
            else:
                assert names.count("Retry-After") == 1
                retry = int(got["Retry-After"])
                assert 0 < retry <= 720  # one interval of 12 minutes, rounded up
                assert got["X-RateLimit-Reset"] == got["Retry-After"]
                assert got["RateLimit"] == f'"per-client";r=0;t={retry}'
                assert body == {"error": "rate limited", "retry_after_s": retry}

    run(go())


def test_the_protect_endpoint_example_fails_open_without_redis() -> None:
    import aiohttp
    import redis.asyncio
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    example = load_example()

    async def go() -> None:
        dead = redis.asyncio.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=2.0, retry=Retry(NoBackoff(), 0))
        runner, port = await example.serve(example.make_app(RedisGcra.per_window(dead, 5, HOUR, prefix="p:")), 0)
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{port}/") as response:
                    assert response.status == 200
                    assert "RateLimit" not in response.headers
                    assert await response.json() == {"hello": "world"}
        finally:
            await runner.cleanup()
            await dead.aclose()

    run(go())


@needs_redis
def test_the_protect_endpoint_example_runs_as_a_program() -> None:
    assert REDIS_URL
    script = REPO / "examples" / "python" / "protect_endpoint_redis.py"
    out = subprocess.run([sys.executable, str(script), REDIS_URL], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # A fresh key admits the burst of 5 whatever the timing; what follows depends on the clock.
    assert [line.split()[:3] for line in lines[:5]] == [["request", f"{i}:", "200"] for i in range(1, 6)]
    assert [line.split()[:2] for line in lines[5:7]] == [["request", "6:"], ["request", "7:"]]
    assert "counted in Redis" in lines[-1]
