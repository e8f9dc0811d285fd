"""The adapters, each against the real library (installed from PyPI) and the local server
that imitates Discord."""

from __future__ import annotations

import asyncio
from typing import Any, List

import aiohttp
import httpx
import pytest
from aiohttp import web

import ratelane
import ratelane.aiohttp
import ratelane.httpx
from discord_server import DiscordImitation, json_response, messages_bucket, run, serve, serve_in_thread

CHANNEL = "/api/v10/channels/100000000000000001/messages"


def once_429(retry_after: float = 0.1, scope: str = "user", **extra: str) -> Any:
    """An override answering the first request with a Discord 429, the rest normally."""
    calls: List[str] = []

    async def override(request: web.Request) -> Any:
        calls.append(request.path)
        if len(calls) == 1:
            headers = {"X-RateLimit-Scope": scope, "Retry-After": "1", **extra}
            if scope == "global":
                headers["X-RateLimit-Global"] = "true"
            return json_response(
                429,
                {"message": "You are being rate limited.", "retry_after": retry_after, "global": scope == "global"},
                headers,
            )
        return None

    override.calls = calls  # type: ignore[attr-defined]
    return override


# ---------------------------------------------------------------------------- httpx


def test_httpx_transport_rate_limits_every_request() -> None:
    imitation = DiscordImitation(**messages_bucket(2, 0.3))

    async def main() -> None:
        async with serve(imitation) as base:
            transport = ratelane.httpx.RateLimitedTransport(max_wait=10.0)
            async with httpx.AsyncClient(base_url=base, transport=transport, headers={"Authorization": "Bot a"}) as client:
                responses = await asyncio.gather(*(client.post(CHANNEL, json={"n": n}) for n in range(6)))
                assert [r.status_code for r in responses] == [200] * 6
                assert transport.limiter.closed is False
            assert transport.limiter.closed  # it owned its limiter

    run(main())
    assert imitation.count(429) == 0 and len(imitation.log) == 6


def test_httpx_transport_retries_a_429_and_raises_rate_limit_errors() -> None:
    override = once_429(0.1)
    imitation = DiscordImitation(override)

    async def main() -> None:
        async with serve(imitation) as base:
            limiter = ratelane.RateLimiter(max_rate_limit_retries=0)
            transport = ratelane.httpx.RateLimitedTransport(limiter, refusal="raise")
            async with httpx.AsyncClient(base_url=base, transport=transport) as client:
                with pytest.raises(ratelane.RetriesExhaustedError) as info:
                    await client.get("/api/v10/users/@me")
                assert info.value.response.status_code == 429  # the server's answer, kept
            assert not limiter.closed  # shared limiters stay open
            await limiter.aclose()
            transport = ratelane.httpx.RateLimitedTransport()
            async with httpx.AsyncClient(base_url=base, transport=transport) as client:
                response = await client.get("/api/v10/users/@me")
                assert response.status_code == 200

    run(main())
    assert len(override.calls) == 2


def test_httpx_transport_answers_refusals_as_429s() -> None:
    """The default ``refusal="respond"``: the server's own last 429 when ratelane gives up
    after it, and a 429 of ratelane's (its code in the body, when it could go in
    ``retry-after``) for a request refused before it is sent."""
    override = once_429(0.1)
    imitation = DiscordImitation(override)

    async def main() -> None:
        async with serve(imitation) as base:
            transport = ratelane.httpx.RateLimitedTransport(max_rate_limit_retries=0)
            async with httpx.AsyncClient(base_url=base, transport=transport) as client:
                first = await client.get("/api/v10/users/@me")
                assert first.status_code == 429 and first.json()["retry_after"] == 0.1
                assert "x-ratelane-code" not in first.headers  # the server's own answer
            transport = ratelane.httpx.RateLimitedTransport(global_limit=1, global_window=30.0, max_wait=1.0)
            async with httpx.AsyncClient(base_url=base, transport=transport) as client:
                assert (await client.get("/api/v10/users/@me")).status_code == 200
                refused = await client.get("/api/v10/users/@me")
                assert refused.status_code == 429
                assert refused.json()["error"]["code"] == "max_wait_exceeded"
                assert refused.headers["x-should-retry"] == "false"
                assert int(refused.headers["retry-after"]) > 1
                with pytest.raises(httpx.HTTPStatusError):
                    refused.raise_for_status()

    run(main())
    assert len(override.calls) == 2  # the refused request never reached the server


def test_httpx_sync_transport_rate_limits_threads() -> None:
    """``SyncRateLimitedTransport`` under ``httpx.Client`` used from several threads at once:
    every request answered, no 429, the bucket learned (the server runs on its own loop in a
    thread of its own)."""
    import concurrent.futures

    imitation = DiscordImitation(**messages_bucket(2, 0.3))
    with serve_in_thread(imitation) as base:
        transport = ratelane.httpx.SyncRateLimitedTransport(max_wait=10.0)
        with httpx.Client(base_url=base, transport=transport, headers={"Authorization": "Bot a"}) as client:
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                statuses = list(pool.map(lambda n: client.post(CHANNEL, json={"n": n}).status_code, range(6)))
            assert statuses == [200] * 6
            assert transport.limiter.limiter.buckets >= 1
        assert transport.limiter.closed
    assert imitation.count(429) == 0 and len(imitation.log) == 6


# ---------------------------------------------------------------------------- aiohttp


def test_aiohttp_middleware_rate_limits_every_request() -> None:
    imitation = DiscordImitation(**messages_bucket(3, 0.3))

    async def main() -> None:
        async with serve(imitation) as base:
            async with ratelane.RateLimiter() as limiter:
                async with aiohttp.ClientSession(base, middlewares=[ratelane.aiohttp.middleware(limiter)]) as session:
                    async def post(n: int) -> int:
                        async with session.post(CHANNEL, json={"n": n}) as response:
                            return response.status

                    assert await asyncio.gather(*(post(n) for n in range(7))) == [200] * 7

    run(main())
    assert imitation.count(429) == 0 and len(imitation.log) == 7


def test_aiohttp_middleware_retries_a_global_429() -> None:
    override = once_429(0.1, scope="global")
    imitation = DiscordImitation(override)
    seen: List[Any] = []

    async def main() -> None:
        async with serve(imitation) as base:
            async with ratelane.RateLimiter(on_observation=seen.append) as limiter:
                async with aiohttp.ClientSession(base, middlewares=[ratelane.aiohttp.middleware(limiter)]) as session:
                    async with session.get("/api/v10/users/@me") as response:
                        assert response.status == 200

    run(main())
    assert len(override.calls) == 2
    assert [o.scope for o in seen if isinstance(o, ratelane.RateLimited)] == ["global"]


# ---------------------------------------------------------------------------- wumpy


def wumpy_requester(base: str, ratelimiter: Any) -> Any:
    from wumpy.rest import HTTPXRequester, Route

    Route.BASE = base + "/api/v10"  # the local imitation instead of discord.com
    return HTTPXRequester("token", ratelimiter=ratelimiter)


def test_wumpy_requester_with_ratelane() -> None:
    from wumpy.rest import Route

    from ratelane.wumpy import WumpyRatelimiter

    imitation = DiscordImitation(**messages_bucket(2, 0.3))
    original = Route.BASE

    async def main() -> None:
        async with serve(imitation) as base:
            ratelimiter = WumpyRatelimiter(max_wait=10.0)
            async with wumpy_requester(base, ratelimiter) as api:
                results = await asyncio.gather(
                    *(
                        api.request(
                            Route("POST", "/channels/{channel_id}/messages", channel_id=100000000000000001),
                            json={"content": str(n)},
                        )
                        for n in range(6)
                    )
                )
                assert results == [{}] * 6
            assert ratelimiter.limiter.closed

    try:
        run(main())
    finally:
        Route.BASE = original
    assert imitation.count(429) == 0 and len(imitation.log) == 6


def test_wumpy_429_is_retried_by_wumpy_after_the_engine_wait() -> None:
    from wumpy.rest import Route

    from ratelane.wumpy import WumpyRatelimiter

    override = once_429(0.1)
    imitation = DiscordImitation(override)
    original = Route.BASE
    seen: List[Any] = []

    async def main() -> None:
        async with serve(imitation) as base:
            limiter = ratelane.RateLimiter(on_observation=seen.append)
            async with wumpy_requester(base, WumpyRatelimiter(limiter)) as api:
                route = Route("GET", "/channels/{channel_id}", channel_id=100000000000000001)
                assert await api.request(route) == {}
            assert not limiter.closed  # a shared limiter stays open
            await limiter.aclose()

    try:
        run(main())
    finally:
        Route.BASE = original
    assert [o.scope for o in seen if isinstance(o, ratelane.RateLimited)] == ["bucket"]
    assert [status for _, _, status in imitation.log] == [429, 200]


def test_wumpy_abort_if_ratelimited_skips_requests_that_would_wait() -> None:
    from wumpy.rest import Route, abort_if_ratelimited

    from ratelane.wumpy import WumpyRatelimiter

    async def override(request: web.Request) -> Any:
        return json_response(
            429, {"message": "slow down", "retry_after": 30.0, "global": False},
            {"X-RateLimit-Scope": "user", "Retry-After": "30", "X-RateLimit-Limit": "5",
             "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "30", "X-RateLimit-Bucket": "b"},
        )

    imitation = DiscordImitation(override)
    original = Route.BASE

    async def main() -> None:
        async with serve(imitation) as base:
            async with wumpy_requester(base, WumpyRatelimiter()) as api:
                route = Route("GET", "/channels/{channel_id}", channel_id=100000000000000001)
                with abort_if_ratelimited() as first:
                    await api.request(route)  # sent, answered 429: not retried
                assert first.aborted
                with abort_if_ratelimited() as second:
                    await api.request(route)  # the bucket is held for 30 s: not sent at all
                assert second.aborted

    try:
        run(main())
    finally:
        Route.BASE = original
    assert len(imitation.log) == 1


# ---------------------------------------------------------------------------- hikari


def hikari_rest(base: str, manager: Any) -> Any:
    from hikari.impl import config as config_impl
    from hikari.impl import rest as rest_impl

    return rest_impl.RESTClientImpl(
        cache=None,
        entity_factory=None,  # type: ignore[arg-type]  # not used by the calls below
        executor=None,
        http_settings=config_impl.HTTPSettings(),
        proxy_settings=config_impl.ProxySettings(),
        token="token",
        token_type="Bot",
        rest_url=base + "/api/v10",
        bucket_manager=manager,
        bucket_manager_owner=True,
        max_retries=0,
    )


def test_hikari_rest_client_takes_the_bucket_manager() -> None:
    from ratelane.hikari import BucketManager

    imitation = DiscordImitation(
        buckets={"del": {"limit": 2, "window_ns": 300_000_000}},
        routes={"DELETE /channels/:id/messages/:id": {"bucket": "del"}},
    )
    manager = BucketManager(max_rate_limit=10.0)

    async def main() -> None:
        async with serve(imitation) as base:
            rest = hikari_rest(base, manager)
            rest.start()
            try:
                await asyncio.gather(*(rest.delete_message(100000000000000001, 200 + n) for n in range(6)))
            finally:
                await rest.close()
        assert not manager.is_alive and manager.limiter.closed

    run(main())
    assert imitation.count(429) == 0 and len(imitation.log) == 6


def test_hikari_global_429_and_max_rate_limit() -> None:
    import hikari

    from ratelane.hikari import BucketManager

    calls: List[str] = []

    async def override(request: web.Request) -> Any:
        calls.append(request.path)
        if len(calls) == 1:  # a global 429
            return json_response(
                429, {"message": "You are being rate limited.", "retry_after": 0.1, "global": True},
                {"X-RateLimit-Scope": "global", "X-RateLimit-Global": "true", "Retry-After": "1"},
            )
        if request.path.endswith("/7"):  # a bucket held for 30 s
            return json_response(
                429, {"message": "You are being rate limited.", "retry_after": 30.0, "global": False},
                {"X-RateLimit-Scope": "user", "Retry-After": "30", "X-RateLimit-Bucket": "d",
                 "X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "30"},
            )
        return None

    imitation = DiscordImitation(override)
    seen: List[Any] = []
    manager = BucketManager(max_rate_limit=1.0, on_observation=seen.append)

    async def main() -> None:
        async with serve(imitation) as base:
            rest = hikari_rest(base, manager)
            rest.start()
            try:
                await rest.delete_message(100000000000000001, 5)
                assert [o.scope for o in seen if isinstance(o, ratelane.RateLimited)] == ["global"]
                # hikari retries the user-scope 429 at once; the engine knows the bucket is
                # held for 30 s, longer than max_rate_limit: hikari's own error.
                with pytest.raises(hikari.errors.RateLimitTooLongError) as info:
                    await rest.delete_message(100000000000000001, 7)
                assert info.value.retry_after > 1.0
            finally:
                await rest.close()

    run(main())
    assert [p.rsplit("/", 1)[-1] for p in calls] == ["5", "5", "7"]


# ---------------------------------------------------------------------------- sub-limit classes

RENAME = "/api/v10/channels/100000000000000001"


def sub_limited_renames() -> Any:
    """An override answering every channel rename (a body with `name`) with a sub-limit 429:
    the bucket still shows room, the rename waits 30 s."""
    calls: List[str] = []

    async def override(request: web.Request) -> Any:
        body = await request.json() if request.can_read_body else {}
        calls.append(",".join(sorted(body)))
        headers = {"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "3", "X-RateLimit-Reset": "1",
                   "X-RateLimit-Reset-After": "1", "X-RateLimit-Bucket": "edit"}
        if "name" in body:
            return json_response(
                429,
                {"message": "You are being rate limited.", "retry_after": 30.0, "global": False},
                {**headers, "Retry-After": "30", "X-RateLimit-Scope": "user"},
            )
        return json_response(200, {"id": "100000000000000001"}, headers)

    override.calls = calls  # type: ignore[attr-defined]
    return override


def test_body_keys_of_json_bodies_only() -> None:
    from ratelane._body import json_body_keys

    assert json_body_keys("application/json", b'{"name": "a", "nsfw": true}') == ["name", "nsfw"]
    assert json_body_keys("application/json; charset=utf-8", '{"topic": "t"}') == ["topic"]
    assert json_body_keys("application/json", b"[1, 2]") is None
    assert json_body_keys("application/json", b"{not json") is None
    assert json_body_keys("text/plain", b'{"name": "a"}') is None
    assert json_body_keys(None, b'{"name": "a"}') is None
    assert json_body_keys("application/json", b'{"name": "' + b"x" * 70000 + b'"}') is None


@pytest.mark.parametrize("adapter", ["aiohttp", "httpx"])
def test_a_renames_sub_limit_holds_only_renames(adapter: str) -> None:
    # The adapters read the JSON body's keys: the rename's sub-limit 429 holds the channel's
    # renames only, so an edit of another field goes at once instead of waiting 30 s.
    override = sub_limited_renames()
    imitation = DiscordImitation(override)

    async def main() -> None:
        async with serve(imitation) as base:
            limiter = ratelane.RateLimiter()
            if adapter == "aiohttp":
                session: Any = aiohttp.ClientSession(base, middlewares=[ratelane.aiohttp.middleware(limiter)])
                patch = lambda body: session.patch(RENAME, json=body)
            else:
                session = httpx.AsyncClient(base_url=base, transport=ratelane.httpx.RateLimitedTransport(limiter))
                patch = lambda body: session.patch(RENAME, json=body)
            async with session:
                rename = asyncio.ensure_future(patch({"name": "general"}))
                while "name" not in override.calls:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.1)  # the 429 is in: the rename class is held
                edit = await asyncio.wait_for(patch({"nsfw": True}), timeout=2.0)
                assert (edit.status if adapter == "aiohttp" else edit.status_code) == 200
                assert not rename.done()
                rename.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await rename
            await limiter.aclose()

    run(main())
    assert override.calls == ["name", "nsfw"]


# ---------------------------------------------------------------------------- written reports


def recording_writes(monkeypatch: pytest.MonkeyPatch) -> List[int]:
    """Records the id of every request reported written (while the core still has it in
    flight), through the real RateLimiter._written."""
    calls: List[int] = []
    original = ratelane.RateLimiter._written

    def written(self: ratelane.RateLimiter, waiter: Any) -> None:
        assert self.in_flight >= 1
        calls.append(waiter.id)
        original(self, waiter)

    monkeypatch.setattr(ratelane.RateLimiter, "_written", written)
    return calls


def test_aiohttp_trace_config_reports_each_written_request(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = recording_writes(monkeypatch)
    imitation = DiscordImitation(**messages_bucket(5, 0.3))

    async def main() -> None:
        async with serve(imitation) as base:
            async with ratelane.RateLimiter(global_limit=50) as limiter:
                async with aiohttp.ClientSession(
                    base,
                    middlewares=[ratelane.aiohttp.middleware(limiter)],
                    trace_configs=[ratelane.aiohttp.trace_config()],
                ) as session:
                    async def post(n: int) -> int:
                        async with session.post(CHANNEL, json={"n": n}) as response:
                            return response.status

                    assert await asyncio.gather(*(post(n) for n in range(3))) == [200] * 3
            # Outside a limiter the hook does nothing.
            async with aiohttp.ClientSession(base, trace_configs=[ratelane.aiohttp.trace_config()]) as session:
                async with session.get("/api/v10/users/@me") as response:
                    assert response.status == 200

    run(main())
    assert sorted(calls) == [1, 2, 3]


def test_aiohttp_trace_config_reports_a_body_request_when_its_body_goes_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # aiohttp calls the headers hook before it writes anything, and (3.10+) writes the headers
    # with the body's first chunk, from a task a busy loop runs later: a request with a body
    # is reported at that chunk, one without at its headers.
    events: List[str] = []
    original = ratelane.RateLimiter._written

    def written(self: ratelane.RateLimiter, waiter: Any) -> None:
        events.append("written")
        original(self, waiter)

    monkeypatch.setattr(ratelane.RateLimiter, "_written", written)

    async def headers_sent(session: object, context: object, params: object) -> None:
        events.append("headers")

    async def chunk_sent(session: object, context: object, params: object) -> None:
        events.append("chunk")

    seen = aiohttp.TraceConfig()
    seen.on_request_headers_sent.append(headers_sent)
    seen.on_request_chunk_sent.append(chunk_sent)
    imitation = DiscordImitation(**messages_bucket(5, 0.3))

    async def main() -> List[List[str]]:
        orders = []
        async with serve(imitation) as base:
            async with ratelane.RateLimiter(global_limit=50) as limiter:
                async with aiohttp.ClientSession(
                    base,
                    middlewares=[ratelane.aiohttp.middleware(limiter)],
                    trace_configs=[ratelane.aiohttp.trace_config(), seen],
                ) as session:
                    for send in (
                        lambda: session.post(CHANNEL, json={"content": "x" * 100}),
                        lambda: session.post(CHANNEL, data=b"y" * 70_000),
                        lambda: session.get("/api/v10/channels/1/messages"),
                    ):
                        events.clear()
                        async with send() as response:
                            await response.read()
                        orders.append(list(events))
        return orders

    with_body, large_body, without = run(main())
    # Once each, after the headers hook and just before the first chunk is written.
    assert with_body[:3] == ["headers", "written", "chunk"] and with_body.count("written") == 1
    assert large_body[:3] == ["headers", "written", "chunk"] and large_body.count("written") == 1
    assert without == ["written", "headers"]


def test_aiohttp_without_the_trace_config_reports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = recording_writes(monkeypatch)
    imitation = DiscordImitation(**messages_bucket(5, 0.3))

    async def main() -> None:
        async with serve(imitation) as base:
            async with ratelane.RateLimiter(global_limit=50) as limiter:
                async with aiohttp.ClientSession(base, middlewares=[ratelane.aiohttp.middleware(limiter)]) as session:
                    async with session.post(CHANNEL, json={}) as response:
                        assert response.status == 200

    run(main())
    assert calls == []


def test_httpx_transport_reports_written_requests_and_keeps_the_callers_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = recording_writes(monkeypatch)
    imitation = DiscordImitation(**messages_bucket(5, 0.3))
    events: List[str] = []

    async def caller_trace(event: str, info: dict) -> None:
        events.append(event)

    async def main() -> None:
        async with serve(imitation) as base:
            transport = ratelane.httpx.RateLimitedTransport(global_limit=50)
            async with httpx.AsyncClient(base_url=base, transport=transport) as client:
                responses = await asyncio.gather(*(client.post(CHANNEL, json={"n": n}) for n in range(2)))
                assert [r.status_code for r in responses] == [200, 200]
                response = await client.get("/api/v10/users/@me", extensions={"trace": caller_trace})
                assert response.status_code == 200

    run(main())
    assert sorted(calls) == [1, 2, 3]
    assert "http11.send_request_headers.complete" in events


def test_report_written_outside_a_send_does_nothing() -> None:
    ratelane.report_written()
