"""ratelane.otel: the driver's OpenTelemetry instruments, read back with the SDK's
InMemoryMetricReader while the driver talks to the local Discord imitation.

Assertions are on counts and on values the core decided (never on how long anything took).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import aiohttp
import pytest
from aiohttp import web
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import ratelane
import ratelane.otel
from discord_server import DiscordImitation, json_response, run, serve

CHANNEL = "/api/v10/channels/100000000000000001/messages"
OTHER = "/api/v10/channels/100000000000000002/messages"
ME = "/api/v10/users/@me"

Points = Dict[str, List[Tuple[Dict[str, Any], Any]]]


def collect(reader: InMemoryMetricReader) -> Points:
    """Every instrument's data points, by name, as (attributes, point)."""
    out: Points = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out[metric.name] = [(dict(p.attributes or {}), p) for p in metric.data.data_points]
    return out


def value(points: Points, name: str, **attributes: str) -> Any:
    """The one point of ``name`` whose attributes are exactly ``attributes`` (dots as ``__``)."""
    wanted = {k.replace("__", "."): v for k, v in attributes.items()}
    found = [p for a, p in points.get(name, []) if a == wanted]
    assert len(found) == 1, f"{name} {wanted}: {points.get(name)}"
    return found[0]


def meter() -> Tuple[Any, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]).get_meter("test"), reader


def test_outcomes_429_scopes_waits_and_the_invalid_budget() -> None:
    calls: Dict[str, int] = {}

    async def override(request: web.Request) -> Any:
        calls[request.path] = calls.get(request.path, 0) + 1
        if request.path == CHANNEL and calls[request.path] == 1:  # a bucket 429, then 200
            return json_response(
                429, {"message": "You are being rate limited.", "retry_after": 0.05, "global": False},
                {"X-RateLimit-Scope": "user", "X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "1",
                 "X-RateLimit-Reset-After": "0.05", "X-RateLimit-Bucket": "b"},
            )
        if request.path == ME:  # an invalid request (counted in the budget), handed back
            return json_response(403, {"message": "Missing Access"})
        if request.path == OTHER:  # a shared-resource 429 too long for max_wait
            return json_response(
                429, {"message": "busy", "retry_after": 30.0, "global": False},
                {"X-RateLimit-Scope": "shared", "Retry-After": "30"},
            )
        return json_response(200, {"id": "1"})

    imitation = DiscordImitation(override)
    provider_meter, reader = meter()

    async def main() -> None:
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(max_wait=2.0) as limiter:
                ratelane.otel.instrument(limiter, provider_meter, name="bot")
                response = await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL))
                assert response.status == 200
                response.release()
                response = await limiter.run("GET", ME, lambda: session.get(base + ME))
                assert response.status == 403
                response.release()
                with pytest.raises(ratelane.MaxWaitExceededError):
                    await limiter.run("POST", OTHER, lambda: session.post(base + OTHER))

    run(main())
    assert calls == {CHANNEL: 2, ME: 1, OTHER: 1}
    points = collect(reader)
    bot = {"ratelane__limiter": "bot"}
    assert value(points, "ratelane.requests", ratelane__outcome="sent", **bot).value == 4
    # Both 429s were answered "retry"; the shared one's wait then exceeded max_wait: failed
    # before a second send.
    assert value(points, "ratelane.requests", ratelane__outcome="retried", **bot).value == 2
    assert value(points, "ratelane.requests", ratelane__outcome="answered", **bot).value == 2
    failed = value(points, "ratelane.requests", ratelane__outcome="failed", error__type="max_wait_exceeded", **bot)
    assert failed.value == 1
    assert {a["ratelane.outcome"] for a, _ in points["ratelane.requests"]} == {"sent", "retried", "answered", "failed"}
    assert value(points, "ratelane.rate_limited", ratelane__scope="bucket", **bot).value == 1
    assert value(points, "ratelane.rate_limited", ratelane__scope="shared", **bot).value == 1
    wait = value(points, "ratelane.wait.duration", **bot)
    assert wait.count == 4  # one per Send
    # The retry was held for the 429's retry_after (0.05 s) at least: the core's decision.
    assert wait.sum >= 0.05 and wait.max >= 0.05
    assert list(wait.explicit_bounds) == list(ratelane.otel.WAIT_BOUNDARIES)
    # The bucket 429 and the 403 are in the budget; the shared 429 is not.
    assert value(points, "ratelane.invalid_requests.used", **bot).value == 2
    assert value(points, "ratelane.queue.depth", **bot).value == 0
    assert value(points, "ratelane.requests.in_flight", **bot).value == 0
    assert "ratelane.store.unavailable" not in points  # not shared mode: never recorded


def test_gauges_read_the_core_and_a_permit_left_unreported_is_cancelled() -> None:
    provider_meter, reader = meter()

    async def main() -> None:
        limiter = ratelane.RateLimiter()
        metrics = ratelane.otel.Metrics(provider_meter)
        metrics.attach(limiter)
        with pytest.raises(ValueError):
            metrics.attach(limiter)
        async with limiter.acquire("POST", CHANNEL) as pioneer:
            # The bucket is unknown: a second request waits for the pioneer's headers.
            second = asyncio.ensure_future(limiter.run("POST", CHANNEL, _never_sent))
            await asyncio.sleep(0)
            points = collect(reader)
            assert value(points, "ratelane.queue.depth").value == 1
            assert value(points, "ratelane.requests.in_flight").value == 1
            second.cancel()
            with pytest.raises(asyncio.CancelledError):
                await second
            assert pioneer.id > 0
            # Left without update(): the driver cancels it in the core.
        points = collect(reader)
        assert value(points, "ratelane.queue.depth").value == 0
        assert value(points, "ratelane.requests.in_flight").value == 0
        assert value(points, "ratelane.requests", ratelane__outcome="sent").value == 1
        assert value(points, "ratelane.requests", ratelane__outcome="cancelled").value == 2
        assert value(points, "ratelane.wait.duration").count == 1
        metrics.detach(limiter)
        assert type(limiter._core) is ratelane._core.Limiter  # the driver has its own core back
        assert not collect(reader).get("ratelane.queue.depth")  # and it is no longer reported
        await limiter.aclose()

    run(main())


class _FlakyStore:
    """A shared-mode store of the driver's interface in memory: unanswered (so unavailable
    after ``timeout``) until ``up``, then granting every reservation."""

    timeout = 0.02

    def __init__(self) -> None:
        self.up = False

    def core_settings(self) -> Dict[str, Any]:
        return {"on_unavailable": "fail_open", "retry_base_ns": 10_000_000, "retry_max_ns": 40_000_000}

    def bind(self, config: Any) -> None:
        pass

    def reserve(self, reservation: Any) -> "asyncio.Future[Any]":
        future: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        if self.up:
            future.set_result(("granted", None, None, None, None, None))
        return future

    def record(self, update: Any) -> None:
        pass

    async def aclose(self) -> None:
        pass


def test_shared_mode_store_outage_and_recovery_as_the_core_observed_them() -> None:
    provider_meter, reader = meter()
    seen: List[Any] = []

    async def ok() -> Any:
        class Ok:
            status = 200
            headers: Dict[str, str] = {}

        return Ok()

    async def main() -> None:
        store = _FlakyStore()
        limiter = ratelane.RateLimiter(shared=store, on_observation=seen.append)  # type: ignore[arg-type]
        ratelane.otel.instrument(limiter, provider_meter)
        assert (await limiter.run("GET", ME, ok)).status == 200  # fail_open: sent without the store
        store.up = True
        # Bounded: requests go on until the core probes the store again and sees it back.
        for _ in range(200):
            if any(isinstance(o, ratelane.StoreRecovered) for o in seen):
                break
            await limiter.run("GET", ME, ok)
            await asyncio.sleep(0.005)
        await limiter.aclose()

    run(main())
    assert isinstance(seen[-1], ratelane.StoreRecovered)
    unavailable = sum(isinstance(o, ratelane.StoreUnavailable) for o in seen)
    points = collect(reader)
    assert unavailable >= 1
    assert value(points, "ratelane.store.unavailable").value == unavailable
    assert value(points, "ratelane.store.recovered").value == 1


async def _never_sent() -> Any:
    raise AssertionError("the pioneer was never answered: this request cannot go")


def test_importing_ratelane_does_not_need_opentelemetry() -> None:
    # Without the API installed (blocked here), ratelane imports and runs, and ratelane.otel
    # says what to install.
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "import ratelane\n"
        "limiter = ratelane.RateLimiter()\n"
        "try:\n"
        "    import ratelane.otel\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "else:\n"
        "    print('imported')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'ratelane[otel]'" in out


def test_the_example_prints_every_instrument() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "python" / "metrics.py"
    out = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, check=True, timeout=60).stdout
    assert "messages: ['200'] x24, renames: ['200', '200', 'max_wait_exceeded']" in out, out
    for name in (
        "ratelane.requests ({request})", "ratelane.wait.duration (s)", "ratelane.rate_limited ({response})",
        "ratelane.queue.depth ({request})", "ratelane.requests.in_flight ({request})",
        "ratelane.invalid_requests.used ({response})",
    ):
        assert f"\n{name}\n" in out, out
    assert "  {'ratelane.outcome': 'failed', 'error.type': 'max_wait_exceeded'} 1\n" in out, out
    assert "  {'ratelane.scope': 'sub_limit'} 1\n" in out, out
