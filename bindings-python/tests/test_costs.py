"""Costs beyond the request count (issue 17 item 1) from Python: the ``costs`` argument and
option, the answers' ``usage``, ``InsufficientCapacityError``, the simulator's token budget,
and the asyncio driver against a local OpenAI-like server over HTTP.

The HTTP tests run in real time with short windows; they assert on counts (requests, 429s,
outcomes), never on durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

import aiohttp
import pytest
from aiohttp import web

import ratelane
from discord_server import run
from ratelane.sim import Server, Simulation

SECOND = 1_000_000_000
CHAT = "/v1/chat/completions"


def openai_headers(remaining_tokens: int = 9000, limit_tokens: int = 10000) -> List[Tuple[str, str]]:
    return [
        ("x-ratelimit-limit-requests", "60"),
        ("x-ratelimit-remaining-requests", "59"),
        ("x-ratelimit-reset-requests", "1s"),
        ("x-ratelimit-limit-tokens", str(limit_tokens)),
        ("x-ratelimit-remaining-tokens", str(remaining_tokens)),
        ("x-ratelimit-reset-tokens", "6s"),
    ]


# ------------------------------------------------------------------ the sans-IO arguments


@pytest.mark.parametrize(
    "costs, needle",
    [
        ({"tokens": -1}, "costs['tokens'] must be an int"),
        ({"tokens": 1.5}, "costs['tokens'] must be an int"),
        ({"tokens": 1200.0}, "costs['tokens'] must be an int"),
        ({"tokens": True}, "costs['tokens'] must be an int"),
        ({"tokens": "1200"}, "costs['tokens'] must be an int"),
        ({"tokens": None}, "costs['tokens'] must be an int"),
        ({"tokens": 2**64}, "costs['tokens'] must be an int"),
        ({1: 5}, "costs keys must be str"),
        ([("tokens", 5)], "costs must be a mapping"),
        ("tokens", "costs must be a mapping"),
        (5, "costs must be a mapping"),
    ],
)
def test_costs_of_the_wrong_type_are_invalid_arguments(costs: Any, needle: str) -> None:
    limiter = ratelane.Limiter(profile="openai")
    with pytest.raises(ratelane.InvalidArgumentError, match=re.escape(needle)) as info:
        limiter.enqueue(0, "POST", CHAT, costs=costs)
    assert info.value.code == "invalid_argument"
    with pytest.raises(ratelane.InvalidArgumentError):
        limiter.predict(0, "POST", CHAT, costs=costs)
    with pytest.raises(ratelane.InvalidArgumentError):
        Simulation().enqueue_at(0, "POST", CHAT, costs=costs)
    assert limiter.queued == 0 and limiter.in_flight == 0


@pytest.mark.parametrize(
    "costs, needle",
    [
        ({"requests": 1}, "requests"),
        ({"Tokens": 1}, "Tokens"),
        ({"": 1}, "1 to 32 bytes"),
        ({"t" * 33: 1}, "1 to 32 bytes"),
        ({"input-tokens": 1}, "input-tokens"),
        ({f"d{i}": 1 for i in range(9)}, "at most 8"),
    ],
)
def test_malformed_cost_names_are_the_cores_invalid_request(costs: Any, needle: str) -> None:
    limiter = ratelane.Limiter(profile="openai")
    with pytest.raises(ratelane.InvalidRequestError, match=needle) as info:
        limiter.enqueue(0, "POST", CHAT, costs=costs)
    assert info.value.code == "invalid_request"


def test_costs_take_any_mapping_and_zero_or_nothing() -> None:
    import types

    limiter = ratelane.Limiter(profile="openai")
    assert limiter.enqueue(0, "POST", CHAT, costs=types.MappingProxyType({"tokens": 10, "points": 0})) == 1
    assert limiter.enqueue(0, "POST", CHAT, costs={}) == 2
    assert limiter.enqueue(0, "POST", CHAT, costs=None) == 3
    assert limiter.enqueue(0, "POST", CHAT, costs={"tokens": 2**64 - 1}) == 4
    assert limiter.predict(0, "POST", CHAT, costs={"tokens": 10}) >= 0


def test_usage_types_are_checked_but_server_numbers_never_raise() -> None:
    limiter = ratelane.Limiter(profile="openai")
    for bad, needle in (
        ({"total_tokens": True}, "usage['total_tokens'] must be a number"),
        ({"total_tokens": "950"}, "usage['total_tokens'] must be a number"),
        ({"total_tokens": None}, "usage['total_tokens'] must be a number"),
        ({1: 950}, "usage keys must be str"),
        ([("total_tokens", 950)], "usage must be a mapping"),
    ):
        rid = limiter.enqueue(0, "POST", CHAT, costs={"tokens": 100})
        limiter.drain()
        with pytest.raises(ratelane.InvalidArgumentError, match=re.escape(needle)):
            limiter.handle_response(1, rid, 200, openai_headers(), usage=bad)
        limiter.cancel(1, rid)
        limiter.drain()
    # What a server may send: negative, infinite, NaN, beyond a float, and too many entries.
    rid = limiter.enqueue(2, "POST", CHAT, costs={"tokens": 100})
    limiter.drain()
    hostile: Dict[str, Any] = {"total_tokens": float("nan"), "input_tokens": -5, "output_tokens": float("inf"),
                               "prompt_tokens": 10**400, **{f"extra_{i}": i for i in range(40)}}
    assert limiter.handle_response(3, rid, 200, openai_headers(), usage=hostile) == "complete"


def test_usage_settles_the_estimate() -> None:
    """An answer whose usage is four times the estimate makes the next estimates weigh four
    times as much (the worst ratio seen): 2000 tokens left hold a request of 600 estimated,
    which goes at once without the usage (charged at the prior, 2) or with a usage under the
    estimate."""

    def second_request_goes(usage: Optional[Dict[str, float]]) -> bool:
        limiter = ratelane.Limiter(profile="openai")
        rid = limiter.enqueue(0, "POST", CHAT, costs={"tokens": 1000})
        limiter.drain()
        limiter.handle_response(1, rid, 200, openai_headers(remaining_tokens=2000), usage=usage)
        limiter.drain()
        nxt = limiter.enqueue(2, "POST", CHAT, costs={"tokens": 600})
        return any(isinstance(o, ratelane.Send) and o.id == nxt for o in limiter.drain())

    assert second_request_goes(None)
    assert second_request_goes({"total_tokens": 900})
    assert not second_request_goes({"total_tokens": 4000})
    # Anthropic's form: input + output.
    assert not second_request_goes({"input_tokens": 3000, "output_tokens": 1000})


def test_insufficient_capacity_is_a_fail_with_its_numbers() -> None:
    limiter = ratelane.Limiter(profile="openai")
    first = limiter.enqueue(0, "POST", CHAT, costs={"tokens": 100})
    limiter.drain()
    limiter.handle_response(1, first, 200, openai_headers(limit_tokens=10000), usage={"total_tokens": 100})
    limiter.drain()
    rid = limiter.enqueue(2, "POST", CHAT, costs={"tokens": 10001})
    (fail,) = [o for o in limiter.drain() if isinstance(o, ratelane.Fail)]
    assert (fail.id, fail.code, fail.dimension, fail.cost, fail.limit) == (rid, "insufficient_capacity", "tokens", 10001, 10000)
    assert "10001" in fail.message and "10000" in fail.message
    assert fail.predicted_wait_ns is None and fail.retry_at_ns is None and fail.attempts is None
    exc = fail.exception()
    assert type(exc) is ratelane.InsufficientCapacityError
    assert isinstance(exc, ratelane.RateLimitError) and isinstance(exc, ValueError)
    assert (exc.code, exc.request_id, exc.dimension, exc.cost, exc.limit) == (
        "insufficient_capacity", rid, "tokens", 10001, 10000,
    )
    assert (exc.requested, exc.capacity) == (10001, 10000)
    assert ratelane.FAIL_CLASSES["insufficient_capacity"] is ratelane.InsufficientCapacityError
    assert "insufficient_capacity" in ratelane.FAIL_CODES
    # Other fails say nothing of dimensions.
    fresh = ratelane.Limiter(profile="openai")
    fresh.enqueue(0, "POST", CHAT)
    queued = fresh.enqueue(0, "POST", CHAT, costs={"tokens": 5})  # behind the first answer
    fresh.drain()
    fresh.close(1)
    (closed,) = [o for o in fresh.drain() if isinstance(o, ratelane.Fail)]
    assert (closed.id, closed.code) == (queued, "closed")
    assert (closed.dimension, closed.cost, closed.limit) == (None, None, None)
    # An estimate at the limit fits a whole window: it waits for the reset (6 s), then goes.
    other = ratelane.Limiter(profile="openai")
    first = other.enqueue(0, "POST", CHAT, costs={"tokens": 1})
    other.drain()
    other.handle_response(1, first, 200, openai_headers(remaining_tokens=9999), usage={"total_tokens": 1})
    other.drain()
    at_limit = other.enqueue(2, "POST", CHAT, costs={"tokens": 10000})
    assert other.drain() == [ratelane.WaitUntil(1 + 6 * SECOND)]
    other.handle_timeout(1 + 6 * SECOND)
    assert ratelane.Send(at_limit) in other.drain()


def test_the_server_side_weight_error_is_the_same_class() -> None:
    from ratelane.server import GcraStore

    with pytest.raises(ratelane.InsufficientCapacityError) as info:
        GcraStore(SECOND, 3).check_n("k", 0, 4)
    exc = info.value
    assert (exc.requested, exc.capacity, exc.cost, exc.limit, exc.dimension) == (4, 3, 4, 3, None)
    assert isinstance(exc, ratelane.RateLimitError) and isinstance(exc, ValueError)


def test_the_core_reads_usage_from_the_body() -> None:
    # An answer to a request with costs: its body's usage settles the estimate, read by the
    # core (ratelane::BodyHints::from_json), the same as the usage given as numbers (as
    # test_usage_settles_the_estimate: a usage four times the estimate holds the next request).
    def second_request_goes(**body: Any) -> bool:
        limiter = ratelane.Limiter(profile="openai")
        rid = limiter.enqueue(0, "POST", CHAT, costs={"tokens": 1000})
        limiter.drain()
        assert limiter.handle_response(1, rid, 200, openai_headers(remaining_tokens=2000), **body) == "complete"
        limiter.drain()
        nxt = limiter.enqueue(2, "POST", CHAT, costs={"tokens": 600})
        return any(isinstance(o, ratelane.Send) and o.id == nxt for o in limiter.drain())

    openai = {"id": "x", "usage": {"prompt_tokens": 3000, "completion_tokens": 1000, "total_tokens": 4000,
                                   "prompt_tokens_details": {"cached_tokens": 0}}}
    assert second_request_goes()
    assert not second_request_goes(usage={"total_tokens": 4000})
    assert not second_request_goes(body=json.dumps(openai))
    assert not second_request_goes(body=json.dumps(openai).encode())
    assert second_request_goes(body=json.dumps({"usage": {"total_tokens": 900}}))
    # Hostile usage values are skipped, never an error; a body cut short says nothing.
    hostile = {"usage": {"a": True, "b": "7000", "e": -1, "total_tokens": 4000}}
    assert not second_request_goes(body=json.dumps(hostile))
    assert second_request_goes(body=json.dumps({"usage": {"a": True, "b": "7000", "e": -1}}))
    assert second_request_goes(body=b'{"usage": {"total_tokens": 4000')
    # Both a body and the hints of one: a caller's mistake.
    with pytest.raises(ratelane.InvalidArgumentError):
        second_request_goes(body="{}", usage={"total_tokens": 1})


def test_sim_server_weighs_each_request() -> None:
    server = Server({
        "profile": "openai", "dialect": "openai", "global": None,
        "buckets": {"chat": {"limit": 100, "window_ns": 6 * SECOND}},
        "routes": {f"POST {CHAT}": {"bucket": "chat"}},
        "tokens": {"cost": 100, "limit": 10, "window_ns": 6 * SECOND},
    })
    first = server.handle(0, "POST", CHAT, tokens=700)
    assert first.status == 200 and first.usage == {"total_tokens": 700.0}
    assert json.loads(first.body_text) == {"usage": {"total_tokens": 700}}
    assert first.header("x-ratelimit-limit-tokens") == "1000" and first.header("x-ratelimit-remaining-tokens") == "300"
    # No tokens: the budget's cost (100).
    assert server.handle(1, "POST", CHAT).usage == {"total_tokens": 100.0}
    refused = server.handle(2, "POST", CHAT, tokens=201)
    assert refused.status == 429 and refused.usage == {} and refused.header("retry-after") is not None
    assert server.handle(3, "POST", CHAT, tokens=200).status == 200
    assert server.count_429() == 1
    for bad in (-1, 1.5, True, "5"):
        with pytest.raises(ratelane.InvalidArgumentError, match="tokens"):
            server.handle(4, "POST", CHAT, tokens=bad)  # type: ignore[arg-type]
    # Without a token budget the body says nothing of usage.
    assert Server().handle(0, "GET", "/api/v10/users/@me").usage == {}


def test_simulation_gates_costs_in_virtual_time() -> None:
    sim = Simulation(
        {"profile": "openai"},
        {"profile": "openai", "dialect": "openai", "global": None,
         "buckets": {"chat": {"limit": 100, "window_ns": 6 * SECOND}},
         "routes": {f"POST {CHAT}": {"bucket": "chat"}},
         "tokens": {"cost": 100, "limit": 10, "window_ns": 6 * SECOND}},
        {"seed": 3},
    )
    # 30 requests of 100 tokens each against 1000 per 6 s: the costs hold them to 10 a window.
    for _ in range(30):
        sim.enqueue_at(0, "POST", CHAT, costs={"tokens": 100})
    report = sim.run()
    assert report["stop"] == "finished" and report["succeeded"] == 30
    assert report["count_429"] <= 1
    assert report["makespan_ns"] > 12 * SECOND  # three windows at least, in virtual time


# ------------------------------------------------------------------ the driver


class _Response:
    """A response object as the driver reads it (``status``, ``headers``, ``json()``)."""

    def __init__(self, status: int, headers: List[Tuple[str, str]], body: Any) -> None:
        self.status = status
        self.headers = headers
        self._body = body
        self.reads = 0

    def json(self) -> Any:
        self.reads += 1
        return self._body


async def _answer(response: _Response) -> _Response:
    return response


def test_the_driver_reads_a_2xx_body_only_for_a_request_with_costs() -> None:
    headers = openai_headers() + [("Content-Type", "application/json")]

    async def main() -> Tuple[int, int, int, int]:
        async with ratelane.RateLimiter(profile="openai") as limiter:
            plain = _Response(200, headers, {"usage": {"total_tokens": 5}})
            await limiter.run("POST", CHAT, lambda: _answer(plain))
            costly = _Response(200, headers, {"usage": {"total_tokens": 5}})
            await limiter.run("POST", CHAT, lambda: _answer(costly), costs={"tokens": 5})
            empty = _Response(200, headers, {"usage": {"total_tokens": 5}})
            await limiter.run("POST", CHAT, lambda: _answer(empty), costs={})
            permitted = _Response(200, headers, {"usage": {"total_tokens": 5}})
            async with limiter.acquire("POST", CHAT, costs={"tokens": 5}) as permit:
                assert await permit.update_from(permitted) == "complete"
            return plain.reads, costly.reads, empty.reads, permitted.reads

    assert asyncio.run(main()) == (0, 1, 0, 1)


def test_the_driver_checks_the_costs_option() -> None:
    async def main() -> None:
        async with ratelane.RateLimiter(profile="openai") as limiter:
            for bad in ({"tokens": -1}, {"tokens": 0.5}, {"tokens": True}, ["tokens"]):
                with pytest.raises(ratelane.InvalidArgumentError, match="costs"):
                    await limiter.run("POST", CHAT, lambda: _answer(_Response(200, [], {})), costs=bad)
            with pytest.raises(ratelane.InvalidRequestError, match="requests"):
                await limiter.run("POST", CHAT, lambda: _answer(_Response(200, [], {})), costs={"requests": 1})
            assert limiter.queued == 0 and limiter.in_flight == 0

    asyncio.run(main())


class OpenAIImitation:
    """An OpenAI-like chat endpoint served from ``ratelane.sim.Server`` (dialect and profile
    ``openai``): requests per window in the ``chat`` bucket and a token budget. Each request
    says in its JSON body what it really costs (``{"tokens": N}``), as the API would compute
    it; the answer reports it in ``usage``."""

    def __init__(self, requests: int, tokens: int, window_s: float) -> None:
        window_ns = int(window_s * SECOND)
        assert tokens % requests == 0
        self.model = Server({
            "profile": "openai", "dialect": "openai", "global": None,
            "buckets": {"chat": {"limit": requests, "window_ns": window_ns}},
            "routes": {f"POST {CHAT}": {"bucket": "chat"}},
            "tokens": {"cost": tokens // requests, "limit": requests, "window_ns": window_ns},
        })
        self.start = time.monotonic_ns()
        self.log: List[Tuple[int, int]] = []  # (status, tokens)

    def count(self, status: int) -> int:
        return sum(1 for s, _ in self.log if s == status)

    async def handle(self, request: web.Request) -> web.Response:
        tokens = int((await request.json())["tokens"])
        answer = self.model.handle(time.monotonic_ns() - self.start, request.method, request.path, tokens=tokens)
        self.log.append((answer.status, tokens))
        headers = [(k, v) for k, v in answer.headers if k.lower() not in ("content-type", "date")]
        return web.Response(status=answer.status, body=answer.body_text.encode(), headers=headers,
                            content_type="application/json")


@contextlib.asynccontextmanager
async def serve(imitation: OpenAIImitation) -> AsyncIterator[str]:
    """Serves ``imitation`` on 127.0.0.1 (a free port); yields the endpoint's URL."""
    app = web.Application()
    app.router.add_post(CHAT, imitation.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    imitation.start = time.monotonic_ns()
    try:
        yield f"http://127.0.0.1:{port}{CHAT}"
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("seed", [1, 2])
def test_estimates_off_by_half_complete_with_few_429s(seed: int) -> None:
    """60 requests of 100 to 300 tokens (about 12000) against 4000 tokens per 0.5 s, each
    estimated 50 % too low to 50 % too high: every request completes, and the token gate
    keeps the 429s to a few (the first answers teach the margin)."""
    rng = random.Random(seed)
    jobs = []
    for _ in range(60):
        actual = rng.randint(100, 300)
        jobs.append((actual, round(actual * rng.uniform(0.5, 1.5))))
    imitation = OpenAIImitation(requests=100, tokens=4000, window_s=0.5)

    async def main() -> List[int]:
        async with serve(imitation) as url, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(profile="openai", max_rate_limit_retries=5) as limiter:

                async def chat(actual: int, estimate: int) -> int:
                    response = await limiter.run(
                        "POST", url, lambda: session.post(url, json={"tokens": actual}), costs={"tokens": estimate}
                    )
                    async with response:
                        assert (await response.json())["usage"]["total_tokens"] == actual
                        return response.status

                return list(await asyncio.gather(*(chat(a, e) for a, e in jobs)))

    statuses = run(main(), limit=60.0)
    assert statuses == [200] * len(jobs)
    assert imitation.count(200) == len(jobs)
    assert imitation.count(429) <= 3, imitation.log
    assert sum(t for s, t in imitation.log if s == 200) == sum(a for a, _ in jobs)


def test_an_estimate_above_the_token_limit_raises_insufficient_capacity() -> None:
    imitation = OpenAIImitation(requests=100, tokens=4000, window_s=0.5)

    async def main() -> None:
        async with serve(imitation) as url, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(profile="openai") as limiter:

                def post(tokens: int) -> Any:
                    return lambda: session.post(url, json={"tokens": tokens})

                # Before any answer the limit is unknown: the request goes, the server refuses
                # it (it never fits), and the refusal's report fails it.
                with pytest.raises(ratelane.InsufficientCapacityError) as first:
                    await limiter.run("POST", url, post(5000), costs={"tokens": 5000})
                assert (first.value.dimension, first.value.cost, first.value.limit) == ("tokens", 5000, 4000)
                assert imitation.log == [(429, 5000)]
                # Known now: one over the limit fails at once, without a request; one at the
                # limit is sent.
                with pytest.raises(ratelane.InsufficientCapacityError) as info:
                    await limiter.run("POST", url, post(4001), costs={"tokens": 4001})
                exc = info.value
                assert isinstance(exc, ratelane.RateLimitError)
                assert (exc.code, exc.dimension, exc.cost, exc.limit) == ("insufficient_capacity", "tokens", 4001, 4000)
                assert len(imitation.log) == 1
                response = await limiter.run("POST", url, post(3000), costs={"tokens": 4000})
                response.release()
                assert response.status == 200
                assert limiter.queued == 0 and limiter.in_flight == 0

    run(main(), limit=30.0)
