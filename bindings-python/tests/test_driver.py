"""The asyncio driver against a local server that imitates Discord (real time, short windows).

Assertions are on counts (requests, 429s, outcomes), never on durations.
"""

from __future__ import annotations

import asyncio
from typing import Any, List

import aiohttp
import httpx
import pytest
from aiohttp import web

import ratelane
from discord_server import DiscordImitation, json_response, messages_bucket, run, serve

CHANNEL = "/api/v10/channels/100000000000000001/messages"


def channel(n: int) -> str:
    return f"/api/v10/channels/{100000000000000000 + n}/messages"


def test_a_burst_to_one_channel_gets_no_429() -> None:
    imitation = DiscordImitation(**messages_bucket(3, 0.3))

    async def main() -> List[int]:
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(max_wait=10.0) as limiter:
                async def post() -> int:
                    response = await limiter.run(
                        "POST", CHANNEL, lambda: session.post(base + CHANNEL, json={"content": "hi"})
                    )
                    async with response:
                        return response.status

                return list(await asyncio.gather(*(post() for _ in range(9))))

    statuses = run(main())
    assert statuses == [200] * 9
    assert imitation.count(429) == 0
    assert len(imitation.log) == 9  # nothing sent twice


def test_channels_do_not_wait_on_each_other_and_share_the_global_limit() -> None:
    imitation = DiscordImitation(**messages_bucket(2, 0.3, **{"global": {"limit": 5, "window_ns": 300_000_000}}))

    async def main() -> None:
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            limiter = ratelane.RateLimiter(global_limit=5, global_window=0.3)
            try:
                async def post(n: int) -> None:
                    response = await limiter.run("POST", channel(n), lambda: session.post(base + channel(n)))
                    response.release()
                    assert response.status == 200

                await asyncio.gather(*(post(n % 4) for n in range(12)))
            finally:
                await limiter.aclose()

    run(main())
    assert imitation.count(429) == 0
    assert len(imitation.log) == 12


def test_429_with_a_json_body_is_retried_after_retry_after() -> None:
    calls = []

    async def override(request: web.Request) -> Any:
        calls.append(request.path)
        if len(calls) == 1:
            return json_response(
                429,
                {"message": "You are being rate limited.", "retry_after": 0.2, "global": False},
                {"X-RateLimit-Scope": "user", "X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "1",
                 "X-RateLimit-Reset-After": "0.2", "X-RateLimit-Bucket": "b", "Retry-After": "1"},
            )
        return json_response(200, {"id": "1"})

    imitation = DiscordImitation(override)
    seen: List[Any] = []

    async def main() -> int:
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(on_observation=seen.append) as limiter:
                response = await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL))
                async with response:
                    assert (await response.json()) == {"id": "1"}
                    return response.status

    assert run(main()) == 200
    assert len(calls) == 2
    limited = [o for o in seen if isinstance(o, ratelane.RateLimited)]
    assert len(limited) == 1 and limited[0].scope == "bucket"
    # Retry-After (1 s, an integer ceiling) is the larger hint: the core waits for it.
    assert limited[0].retry_after_ns >= 200_000_000


def test_429_retries_are_bounded() -> None:
    async def override(request: web.Request) -> Any:
        return json_response(
            429, {"message": "slow down", "retry_after": 0.01, "global": False},
            {"X-RateLimit-Scope": "user", "Retry-After": "0"},
        )

    imitation = DiscordImitation(override)

    async def main() -> None:
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(
                max_rate_limit_retries=2, min_rate_limit_wait=0.01, invalid_request_limit=0
            ) as limiter:
                with pytest.raises(ratelane.RetriesExhaustedError) as info:
                    await limiter.run("GET", "/api/v10/users/@me", lambda: session.get(base + "/api/v10/users/@me"))
                assert info.value.attempts == 3 and info.value.code == "retries_exhausted"

    run(main())
    assert imitation.count(429) == 3


async def _bucket_429_for_30s(request: web.Request) -> Any:
    """Every answer a bucket 429 that asks for 30 s."""
    return json_response(
        429, {"message": "long", "retry_after": 30.0, "global": False},
        {"X-RateLimit-Scope": "user", "Retry-After": "30", "X-RateLimit-Limit": "5",
         "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "30", "X-RateLimit-Bucket": "b"},
    )


def test_max_wait_fails_fast_with_the_predicted_wait() -> None:
    imitation = DiscordImitation(_bucket_429_for_30s)

    async def main() -> None:
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(max_wait=2.0) as limiter:
                with pytest.raises(ratelane.MaxWaitExceededError) as info:
                    await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL))
                assert info.value.predicted_wait is not None and info.value.predicted_wait > 2.0
                # A new request for the same bucket fails at once, before sending.
                with pytest.raises(ratelane.MaxWaitExceededError):
                    await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL))
                with pytest.raises(ratelane.DeadlineExceededError) as deadline:
                    await limiter.run(
                        "POST", CHANNEL, lambda: session.post(base + CHANNEL), timeout=1.0
                    )
                assert deadline.value.predicted_send_at is not None
                assert limiter.queued == 0

    run(main())
    assert len(imitation.log) == 1


def test_a_cancelled_task_gives_back_its_slot() -> None:
    release = asyncio.Event()
    imitation_holder: List[DiscordImitation] = []

    async def override(request: web.Request) -> Any:
        if request.query.get("slow"):
            await release.wait()
        return None

    imitation = DiscordImitation(override, **messages_bucket(1, 60.0))
    imitation_holder.append(imitation)

    async def main() -> None:
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter() as limiter:
                # The pioneer learns the bucket: 1 per 60 s, nothing left.
                first = asyncio.ensure_future(
                    limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL + "?slow=1"))
                )
                await asyncio.sleep(0.05)
                assert limiter.in_flight == 1
                waiting = asyncio.ensure_future(limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL)))
                await asyncio.sleep(0.05)
                assert limiter.queued == 1
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
                assert limiter.queued == 0  # the queue slot is given back at once
                release.set()
                (await first).release()
                # Another channel is not held by any of this.
                other = await limiter.run("POST", channel(7), lambda: session.post(base + channel(7)))
                other.release()
                assert other.status == 200

    run(main())
    assert len(imitation.log) == 2


def test_a_task_cancelled_after_its_turn_came_gives_the_slot_back() -> None:
    release = asyncio.Event()

    async def override(request: web.Request) -> Any:
        if request.query.get("slow"):
            await release.wait()
        return None

    imitation = DiscordImitation(override, **messages_bucket(2, 60.0))
    tasks: List[Any] = []

    def cancel_the_second(event: Any) -> None:
        # Runs while the driver dispatches the pioneer's outputs, just before the Send that
        # gives the second request its turn: its task is cancelled before it can send.
        if isinstance(event, ratelane.BucketLearned):
            tasks[0].cancel()

    async def main() -> None:
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(on_observation=cancel_the_second) as limiter:
                pioneer = asyncio.ensure_future(
                    limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL + "?slow=1"))
                )
                await asyncio.sleep(0.05)
                tasks.append(
                    asyncio.ensure_future(limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL)))
                )
                await asyncio.sleep(0.05)
                assert limiter.queued == 1  # waits for the pioneer's headers
                release.set()
                (await pioneer).release()
                with pytest.raises(asyncio.CancelledError):
                    await tasks[0]
                # It never left, so its slot (1 of 2 left) came back: the next one goes at once.
                assert (limiter.queued, limiter.in_flight) == (0, 0)
                assert limiter.predict("POST", CHANNEL) == 0.0
                third = await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL))
                third.release()

    run(main())
    assert [status for _, _, status in imitation.log] == [200, 200]


def test_aclose_fails_every_queued_request() -> None:
    imitation = DiscordImitation(**messages_bucket(1, 60.0))

    async def main() -> None:
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            limiter = ratelane.RateLimiter()
            (await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL))).release()
            queued = [
                asyncio.ensure_future(limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL)))
                for _ in range(3)
            ]
            await asyncio.sleep(0.05)
            assert limiter.queued == 3
            await limiter.aclose()
            results = await asyncio.gather(*queued, return_exceptions=True)
            assert all(type(r) is ratelane.ClosedError for r in results), results
            assert all(r.code == "closed" for r in results)  # type: ignore[union-attr]
            with pytest.raises(ratelane.LimiterClosedError):
                await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL))
            await limiter.aclose()  # idempotent

    run(main())
    assert len(imitation.log) == 1


def test_connection_refused_is_retried_then_network_error() -> None:
    async def main() -> None:
        # A port that was just free: nothing listens there.
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        url = f"http://127.0.0.1:{port}/api/v10/users/@me"
        attempts = 0
        async with aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(max_error_retries=2, backoff_base=0.01, backoff_max=0.02) as limiter:
                async def send() -> Any:
                    nonlocal attempts
                    attempts += 1
                    return await session.get(url)

                with pytest.raises(ratelane.NetworkError) as info:
                    await limiter.run("GET", "/api/v10/users/@me", send)
                assert info.value.attempts == 3
                assert isinstance(info.value.__cause__, aiohttp.ClientConnectorError)
        assert attempts == 3

    run(main())


def test_a_post_that_may_have_been_sent_is_not_resent() -> None:
    async def override(request: web.Request) -> Any:
        assert request.transport is not None
        request.transport.close()  # drop the connection without an answer
        await asyncio.sleep(0.05)
        return web.Response(status=200)

    imitation = DiscordImitation(override)

    async def main() -> None:
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(backoff_base=0.01, backoff_max=0.02) as limiter:
                with pytest.raises(ratelane.MaybeSentError):
                    await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL))
                # The same request marked idempotent is re-sent, then gives up: maybe_sent, not
                # network_error, since its attempts reached the server (the log below shows 4).
                with pytest.raises(ratelane.MaybeSentError):
                    await limiter.run("POST", channel(2), lambda: session.post(base + channel(2)), idempotent=True)

    run(main())
    assert sum(1 for _, path, _ in imitation.log if path == CHANNEL) == 1
    assert sum(1 for _, path, _ in imitation.log if path == channel(2)) == 4


def test_a_send_that_raises_is_cancelled_and_the_error_propagates() -> None:
    async def main() -> None:
        async with ratelane.RateLimiter() as limiter:
            async def broken() -> Any:
                raise KeyError("bug in the caller")

            with pytest.raises(KeyError):
                await limiter.run("GET", "/api/v10/users/@me", broken)
            assert (limiter.queued, limiter.in_flight) == (0, 0)

    run(main())


def test_permit_flow_with_retry_in_place() -> None:
    calls = []

    async def override(request: web.Request) -> Any:
        calls.append(1)
        if len(calls) == 1:
            return json_response(429, {"retry_after": 0.05, "global": False},
                                 {"X-RateLimit-Scope": "user", "Retry-After": "0"})
        return None

    imitation = DiscordImitation(override, **messages_bucket(5, 1.0))

    async def main() -> None:
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(min_rate_limit_wait=0.05) as limiter:
                async with limiter.acquire("POST", CHANNEL) as permit:
                    while True:
                        async with session.post(base + CHANNEL) as response:
                            if await permit.update_from(response) != "retry":
                                break
                        await permit.ready()
                    assert permit.disposition == "complete"
                assert (limiter.queued, limiter.in_flight) == (0, 0)
                # The plain form, with headers given by hand.
                async with limiter.acquire("POST", channel(3)) as permit:
                    async with session.post(base + channel(3)) as response:
                        assert permit.update(response.status, response.headers) == "complete"
                # Leaving without reporting cancels the request in the limiter.
                async with limiter.acquire("GET", "/api/v10/users/@me"):
                    pass
                assert (limiter.queued, limiter.in_flight) == (0, 0)

    run(main())
    assert len(calls) == 3


def test_httpx_responses_are_read_too() -> None:
    imitation = DiscordImitation(**messages_bucket(2, 0.3))

    async def main() -> None:
        async with serve(imitation) as base, httpx.AsyncClient(base_url=base) as client:
            async with ratelane.RateLimiter() as limiter:
                responses = await asyncio.gather(
                    *(limiter.run("POST", CHANNEL, lambda: client.post(CHANNEL)) for _ in range(5))
                )
                assert [r.status_code for r in responses] == [200] * 5

    run(main())
    assert imitation.count(429) == 0


def test_the_timer_is_armed_only_for_earlier_deadlines() -> None:
    imitation = DiscordImitation(**messages_bucket(2, 0.2))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        armed: List[float] = []
        original = loop.call_at

        def counting_call_at(when: float, callback: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(callback, "__name__", "") == "_on_timer":
                armed.append(when)
            return original(when, callback, *args, **kwargs)

        loop.call_at = counting_call_at  # type: ignore[method-assign]
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            async with ratelane.RateLimiter(global_limit=0) as limiter:
                async def post() -> None:
                    (await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL))).release()

                await asyncio.gather(*(post() for _ in range(8)))
        # 8 requests, 2 per window: a handful of wake-ups, never one per request per input,
        # and each armed deadline is earlier than the one it replaced or the first after one fired.
        assert 1 <= len(armed) <= 8

    run(main())
    assert imitation.count(429) == 0


def test_settings_in_seconds_and_bad_settings() -> None:
    limiter = ratelane.RateLimiter(max_wait=30.0, global_window=0.5, backoff_base=0.25)
    import json

    config = json.loads(limiter.limiter.config_json())
    assert config["max_wait_ns"] == 30_000_000_000
    assert config["global_window_ns"] == 500_000_000
    assert config["backoff_base_ns"] == 250_000_000
    with pytest.raises(ratelane.InvalidConfigError):
        ratelane.RateLimiter(max_wiat=3)
    with pytest.raises(ratelane.InvalidConfigError):
        ratelane.RateLimiter(max_wait=-1)
    with pytest.raises(ratelane.InvalidConfigError):
        ratelane.RateLimiter(max_wait="soon")


def test_settings_come_from_the_core_table() -> None:
    # The drivers' names and units are the core's settings table's (ratelane::json::SETTINGS);
    # LimiterSettings, which types them for mypy, names exactly the same.
    from ratelane import _core
    from ratelane._settings import DURATION_KEYS, SETTING_NAMES, LimiterSettings

    keys = [key for key, kind in _core.SETTINGS if kind != "shared"]
    assert list(SETTING_NAMES) == [k[: -len("_ns")] if k.endswith("_ns") else k for k in keys]
    assert set(LimiterSettings.__annotations__) == set(SETTING_NAMES)
    assert {key + "_ns" for key in DURATION_KEYS} == {k for k, kind in _core.SETTINGS if kind.startswith("nanos")}
    assert "shared" in dict(_core.SETTINGS) and "profile" in SETTING_NAMES


def test_a_limiter_belongs_to_one_loop() -> None:
    limiter = ratelane.RateLimiter()

    async def use() -> float:
        return limiter.predict("GET", "/api/v10/users/@me")

    assert asyncio.run(use()) == 0.0
    with pytest.raises(RuntimeError, match="another event loop"):
        asyncio.run(limiter.__aenter__())


def test_defer_after_fails_at_once_with_retry_at_on_both_clocks() -> None:
    import datetime
    import time

    imitation = DiscordImitation(_bucket_429_for_30s)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with serve(imitation) as base, aiohttp.ClientSession() as session:
            # The limiter-wide default: the first request's 429 asks for 30 s, longer than 2 s.
            async with ratelane.RateLimiter(defer_after=2.0) as limiter:
                with pytest.raises(ratelane.DeferredError) as info:
                    await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL))
                exc = info.value
                assert exc.code == "deferred" and isinstance(exc, ratelane.RateLimitError)
                assert exc.retry_at_ns is not None and exc.retry_at is not None
                assert exc.retry_at - loop.time() > 25
                assert exc.retry_at_unix is not None and exc.retry_at_unix - time.time() > 25
                wall = exc.retry_at_wall
                assert isinstance(wall, datetime.datetime) and wall.tzinfo is not None
                assert wall.utcoffset() == datetime.timedelta(0)
                assert abs(wall.timestamp() - exc.retry_at_unix) < 1e-3
                assert exc.retry_after is not None and 25 < exc.retry_after <= 31
                # The per-request option: a longer budget waits (cancelled here), a shorter one
                # fails before anything is sent.
                with pytest.raises(ratelane.DeferredError):
                    await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL), defer_after=1.0)
                patient = asyncio.ensure_future(
                    limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL), defer_after=60.0)
                )
                await asyncio.sleep(0.05)
                assert not patient.done() and limiter.queued == 1
                patient.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await patient
                for bad in (-1, float("nan"), float("inf"), "2s", True):
                    with pytest.raises(ratelane.InvalidArgumentError) as usage:
                        await limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL), defer_after=bad)
                    assert usage.value.code == "invalid_argument"
            for bad_config in (-1, float("nan"), "2s"):
                with pytest.raises(ratelane.InvalidConfigError):
                    ratelane.RateLimiter(defer_after=bad_config)

    run(main())
    assert len(imitation.log) == 1
