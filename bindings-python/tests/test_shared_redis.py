"""Shared mode through Redis (``ratelane.redis``) against a real redis-server.

* the store vectors replayed through the Python argument encoding (same answers and live
  key counts as the core's reference model);
* several OS processes, each with its own RateLimiter, against one local Discord imitation
  and one Redis: no 429 and every request answered with shared mode; the same workload
  without it does get 429s (so the test can fail);
* outages: Redis stopped mid-run and started again; fail-open completes everything on local
  limits, fail-closed holds (or fails by deadline) and completes after Redis is back; every
  request ends exactly once and recovery is automatic.

Needs RATELANE_REDIS_URL (scripts/tests.d/10-python.sh starts a server) and, for the outage
tests, the redis-server binary. Assertions are on counts and outcomes, never on durations;
every run is bounded by asyncio timeouts.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import types
import uuid
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import ratelane
import ratelane.redis
from conftest import VECTORS
from discord_server import DiscordImitation, messages_bucket, run, serve

REDIS_URL = os.environ.get("RATELANE_REDIS_URL")
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="RATELANE_REDIS_URL is not set (scripts/tests.d/10-python.sh sets it)")
needs_server_binary = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")

HERE = pathlib.Path(__file__).resolve().parent


def unique_prefix(what: str) -> str:
    return "{ratelane-py-test:" + what + ":" + uuid.uuid4().hex[:12] + "}:"


# ------------------------------------------------------------------------------ vectors


class ShareBucket(types.SimpleNamespace):
    pass


class ShareRelease(types.SimpleNamespace):
    pass


class ShareHold(types.SimpleNamespace):
    pass


class ShareInvalid(types.SimpleNamespace):
    pass


UPDATE_CLASSES = {"bucket": ShareBucket, "release": ShareRelease, "hold": ShareHold, "invalid": ShareInvalid}


def live_keys(client: Any, prefix: str, now_ns: int) -> int:
    """Keys of the namespace alive at virtual time ``now_ns`` (the script's ~expiry index)."""
    index = prefix + "~expiry"
    count = 0
    for key in client.scan_iter(match=prefix.replace("[", "\\[").replace("]", "\\]") + "*", count=1000):
        name = key.decode()
        if name == index:
            continue
        score = client.zscore(index, name)
        if score is None or score > now_ns // 1000:
            count += 1
    return count


def test_script_replies_read_back_as_the_core_reads_them() -> None:
    parse = ratelane.redis.parse_answer
    assert parse([b"granted", 3, 2, 1_795_812_403_404_294]) == ("granted", None, None, 3, 2, 1_795_812_403_404_294_000)
    assert parse([b"granted", 3]) == ("granted", None, None, 3, None, None)
    # A clock past 2^64 - 1 ns is no clock; a retry past it is the longest one (as in Rust).
    assert parse([b"granted", 1, 0, 2**60]) == ("granted", None, None, 1, 0, None)
    assert parse([b"denied", 2**60, b"bucket", 1]) == ("denied", 2**64 - 1, "bucket", 1, None, None)
    for bad in ([b"granted", 1, 1, -1], [b"granted", 1, 1, 1, 1], [b"granted", 1, 1, b"1"], b"granted", None):
        with pytest.raises(ratelane.RedisBadReplyError) as raised:
            parse(bad)
        assert raised.value.code == "redis_bad_reply"
    # The core's message says what was wrong.
    with pytest.raises(ratelane.RedisBadReplyError, match="unknown scope"):
        parse([b"denied", 1, b"nope"])


def test_the_store_arguments_are_the_cores() -> None:
    """The ARGV is written by the core (``ratelane::shared::wire``): an op read from an object
    with the outputs' attributes, one call's arguments or a batch's."""
    r = types.SimpleNamespace(id=3, identity="bot", route="GET /x", major="", bucket="", counts_global=True,
                              global_limit=50, global_window_ns=10**9, margin_ns=2 * 10**7, invalid_limit=0,
                              invalid_window_ns=0, unrecorded_ns=[1, 2])
    # The empty bucket hash stays apart from none; optional attributes of an earlier version
    # take their defaults (one token, no outage report).
    assert ratelane.redis.reserve_args(r) == [
        "3", "bot", "GET /x", "", "=", "1", "50", "1000000000", "20000000", "0", "0", "1", "", "0", "1,2", ""]
    hold = ShareHold(scope="route", identity="bot", route="r", major="m", bucket=None, retry_after_ns=5)
    assert ratelane.redis.record_args(hold) == ["hold", "route", "bot", "r", "m", "", "5"]
    ops = [ratelane.redis.store_op(r), ratelane.redis.store_op(ShareInvalid(id=4, window_ns=10))]
    assert [op.name for op in ops] == ["reserve", "record"]
    assert ratelane._core.store_argv("p", 5, 6, 7, ops[1:]) == ["record", "", "p", "5", "6", "7", "invalid", "4", "10"]
    batch = ratelane._core.store_argv("p", 5, 6, 7, ops)
    assert batch[:8] == ["batch", "", "p", "5", "6", "7", "17", "reserve"]
    assert batch[24:] == ["4", "record", "invalid", "4", "10"]
    with pytest.raises(TypeError):
        ratelane.redis.store_op(object())
    with pytest.raises(TypeError):
        ratelane.redis.record_args(r)
    with pytest.raises(ratelane.InvalidArgumentError, match="global_limit"):
        ratelane.redis.reserve_args(types.SimpleNamespace(**{**vars(r), "global_limit": -1}))


@needs_redis
@pytest.mark.parametrize("path", sorted(VECTORS.glob("store_*.json")), ids=lambda p: p.stem)
def test_store_vectors_through_the_python_encoding(path: pathlib.Path) -> None:
    import redis

    vector = json.loads(path.read_text())
    client = redis.Redis.from_url(REDIS_URL)
    prefix = unique_prefix("vectors")
    sha = client.script_load(ratelane.redis.SHARED_STORE_LUA)
    config = vector["config"]
    try:
        for index, step in enumerate(vector["steps"]):
            where = f"{path.name} step {index}"
            common = [str(step["at_ns"]), step["client"], str(config["lease_ns"]),
                      str(config["pioneer_poll_ns"]), str(config["state_ttl_ns"])]
            if step["op"] == "reserve":
                r = dict(step["reservation"])
                args = ["reserve", *common, *ratelane.redis.reserve_args(types.SimpleNamespace(**r))]
                answer = ratelane.redis.parse_answer(client.evalsha(sha, 1, prefix, *args))
                expected = step["answer"]
                assert answer[0] == expected["answer"], where
                assert answer[3] == expected.get("processes"), where
                if answer[0] == "denied":
                    assert (answer[1], answer[2]) == (expected["retry_after_ns"], expected["scope"]), where
                else:
                    assert (answer[4] or 0, answer[5]) == (expected.get("leased", 0), expected.get("store_time_ns")), where
            else:
                u = dict(step["update"])
                cls = UPDATE_CLASSES[u.pop("share")]
                args = ["record", *common, *ratelane.redis.record_args(cls(**u))]
                assert client.evalsha(sha, 1, prefix, *args) == [b"recorded"], where
            assert live_keys(client, prefix, step["at_ns"]) == step["keys"], where
    finally:
        client.close()


@needs_redis
def test_what_waits_in_the_queue_goes_as_one_script_call() -> None:
    """Reservations and updates queued in one turn of the event loop are one ``batch`` call
    (one ``EVALSHA``), answered as each would be alone: one pioneer granted per route and
    major, the others denied by its lock; the update in the middle is written in order."""
    import redis

    def evalsha_calls(client: Any) -> int:
        stats = client.info("commandstats")
        return sum(int(stats.get(name, {}).get("calls", 0)) for name in ("cmdstat_evalsha", "cmdstat_eval"))

    def reservation(i: int, channel: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            id=i, identity="bot", route="POST /channels/:id/messages", major=str(channel), bucket=None,
            counts_global=True, global_limit=50, global_window_ns=1_100_000_000, margin_ns=100_000_000,
            invalid_limit=9000, invalid_window_ns=600_000_000_000,
        )

    async def main() -> Tuple[List[Any], int, int]:
        admin = redis.Redis.from_url(REDIS_URL)
        store = ratelane.redis.RedisStore(REDIS_URL, prefix=unique_prefix("batch"))
        ratelane.RateLimiter(shared=store)  # binds the store to the core's validated settings
        try:
            await store.reserve(reservation(0, 0))  # loads the script
            before = evalsha_calls(admin)
            futures = [store.reserve(reservation(i, i % 4)) for i in range(1, 9)]
            store.record(ShareHold(scope="global", identity="bot", route="POST /channels/:id/messages",
                                   major="0", bucket=None, retry_after_ns=1_000_000))
            futures += [store.reserve(reservation(i, i % 4)) for i in range(9, 12)]
            answers = await asyncio.wait_for(asyncio.gather(*futures), 5.0)
            calls = evalsha_calls(admin) - before
            await store.aclose()
            return answers, calls, store.dropped
        finally:
            admin.close()

    answers, calls, dropped = run(main(), limit=10.0)
    # Channel 0's pioneer is reservation 0; channels 1-3 get theirs from reservations 1-3.
    assert [a[0] for a in answers[:8]] == ["granted"] * 3 + ["denied"] * 5, answers
    assert {a[2] for a in answers[3:8]} == {"pioneer"}, answers
    # After the global hold (written in order, between them) every reservation is denied by it.
    assert [(a[0], a[2]) for a in answers[8:]] == [("denied", "global")] * 3, answers
    assert calls == 1, f"{calls} script calls for 12 operations queued together"
    assert dropped == 0


# ------------------------------------------------------------------------------ processes


def run_processes(shared: bool, n_processes: int = 3, per_process: int = 40) -> Tuple[DiscordImitation, List[Dict[str, Any]]]:
    """``n_processes`` OS processes each sending ``per_process`` messages through their own
    RateLimiter (sharing one Redis namespace if ``shared``) to one Discord imitation: message
    buckets of 5 per 0.5 s on 4 channels, and a global limit of 30 per second."""
    global_limit = 30
    imitation = DiscordImitation(
        **messages_bucket(5, 0.5, **{"global": {"limit": global_limit, "window_ns": 1_000_000_000}})
    )
    prefix = unique_prefix("processes")

    async def main() -> List[Dict[str, Any]]:
        async with serve(imitation) as base:
            start_at = time.time() + 2.0
            procs = [
                await asyncio.create_subprocess_exec(
                    sys.executable, str(HERE / "shared_worker.py"), base, REDIS_URL if shared else "none",
                    prefix, str(per_process), str(start_at), str(global_limit),
                    stdout=asyncio.subprocess.PIPE,
                )
                for _ in range(n_processes)
            ]
            try:
                outs = await asyncio.gather(*(p.communicate() for p in procs))
            finally:
                for p in procs:
                    if p.returncode is None:
                        p.kill()
            reports = []
            for p, (out, _) in zip(procs, outs):
                assert p.returncode == 0, f"a worker failed ({p.returncode})"
                reports.append(json.loads(out.decode().strip().splitlines()[-1]))
            return reports

    return imitation, run(main(), limit=120.0)


@needs_redis
def test_processes_sharing_limits_through_redis_get_no_429_and_all_complete() -> None:
    imitation, reports = run_processes(shared=True)
    results = [r for report in reports for r in report["results"]]
    assert len(results) == 120
    assert results == ["200"] * 120, sorted(set(results))
    # No 429 at the server: no bucket overrun (4 channels x 5 per 0.5 s) and the global limit
    # (30 per second, counted at the server from each request's arrival) held.
    assert imitation.count(429) == 0
    assert len(imitation.log) == 120  # nothing sent twice, nothing lost
    assert all(report["dropped"] == 0 for report in reports)
    print(f"3 processes x 40 requests, shared through Redis: {imitation.count(200)} x 200, 0 x 429")


@needs_redis
def test_the_same_processes_without_shared_mode_do_get_429s() -> None:
    imitation, reports = run_processes(shared=False)
    results = [r for report in reports for r in report["results"]]
    assert len(results) == 120  # every request still ends exactly once
    # Each process alone believes it has the whole budget: together they overrun it.
    assert imitation.count(429) > 0
    print(f"3 processes x 40 requests, not shared: {imitation.count(429)} x 429 at the server")


# ------------------------------------------------------------------------------ outages


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """A redis-server of this test's own (so it can be stopped mid-run), on 127.0.0.1."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp()
        self.proc: "subprocess.Popen[bytes] | None" = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        for _ in range(100):
            try:
                if client.ping():
                    client.close()
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("the private redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


CHANNEL = "/api/v10/channels/{}/messages"


async def outage_run(
    server: PrivateRedis, policy: str, requests: int, every: float, down_at: float, up_at: float,
    deadline_every: int = 0,
) -> Tuple[DiscordImitation, List[str], List[str]]:
    """One process sends ``requests`` messages, one every ``every`` seconds, while Redis is
    stopped at ``down_at`` and started again at ``up_at`` (seconds from the start). Returns the
    imitation, each request's outcome ("200" or a failure code) and the observations."""
    imitation = DiscordImitation(**messages_bucket(5, 0.5))
    observed: List[str] = []
    store = ratelane.redis.RedisStore(
        server.url, prefix=unique_prefix("outage"), timeout=0.2, on_unavailable=policy,
        retry_base=0.05, retry_max=0.3,
    )
    limiter = ratelane.RateLimiter(max_wait=30.0, shared=store, on_observation=lambda o: observed.append(type(o).__name__))
    loop = asyncio.get_running_loop()

    async def outage() -> None:
        await asyncio.sleep(down_at)
        await loop.run_in_executor(None, server.stop)
        await asyncio.sleep(up_at - down_at)
        await loop.run_in_executor(None, server.start)

    async with serve(imitation) as base:
        import aiohttp

        async with aiohttp.ClientSession() as session:

            async def one(i: int) -> str:
                await asyncio.sleep(i * every)
                path = CHANNEL.format(100000000000000000 + i % 3)
                options: Dict[str, Any] = {}
                if deadline_every and i % deadline_every == 0:
                    options["timeout"] = 0.15
                try:
                    response = await limiter.run("POST", path, lambda: session.post(base + path), **options)
                except ratelane.RateLimitError as exc:
                    return exc.code
                response.release()
                return str(response.status)

            flip = asyncio.ensure_future(outage())
            results = await asyncio.gather(*(one(i) for i in range(requests)))
            await flip
    await limiter.aclose()
    return imitation, list(results), observed


@needs_server_binary
def test_outage_fail_open_completes_everything_on_local_limits(private_redis: PrivateRedis) -> None:
    imitation, results, observed = run(
        outage_run(private_redis, "fail_open", requests=60, every=0.04, down_at=0.6, up_at=1.4), limit=60.0
    )
    assert len(results) == 60
    assert results == ["200"] * 60, sorted(set(results))
    assert len(imitation.log) == 60  # each request sent once: nothing lost, nothing doubled
    assert imitation.count(429) == 0  # one process: its local limits are enough
    assert "StoreUnavailable" in observed
    assert "StoreRecovered" in observed  # automatic: the core probed Redis again after the restart
    print(f"fail-open outage: 60/60 completed, 0 x 429, observations {sorted(set(observed))}")


@needs_server_binary
def test_outage_fail_closed_holds_then_completes_and_deadlines_fail(private_redis: PrivateRedis) -> None:
    imitation, results, observed = run(
        outage_run(private_redis, "fail_closed", requests=60, every=0.04, down_at=0.6, up_at=1.4, deadline_every=5),
        limit=60.0,
    )
    assert len(results) == 60  # every request ended exactly once; none hangs (bounded by run())
    ok = results.count("200")
    failed = [r for r in results if r != "200"]
    assert set(failed) <= {"deadline_exceeded", "max_wait_exceeded"}, failed
    assert failed, "some requests with a short deadline met the outage"
    # Only requests with a deadline may fail; the others waited for Redis and completed.
    for i, r in enumerate(results):
        if i % 5 != 0:
            assert r == "200", (i, r)
    assert len(imitation.log) == ok  # nothing sent that the store did not grant twice
    assert imitation.count(429) == 0
    assert "StoreUnavailable" in observed and "StoreRecovered" in observed
    print(f"fail-closed outage: {ok}/60 completed, {len(failed)} failed by deadline, 0 x 429")
