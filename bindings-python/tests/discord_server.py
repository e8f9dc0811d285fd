"""A local HTTP server that imitates Discord's rate limits, for the driver and adapter tests.

It answers with ratelane's Discord model (``ratelane.sim.Server``) in real time, so the
answers carry Discord's headers and 429 bodies, and it logs every request. It listens on
127.0.0.1 on a free port, and ``serve`` stops it when the block ends (each test also bounds
its own run time).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Tuple

from aiohttp import web

from ratelane.sim import Server

SECOND = 1_000_000_000

Override = Callable[[web.Request], Awaitable[Optional[web.StreamResponse]]]


class DiscordImitation:
    """Answers like Discord: buckets, major parameters, global limit, 429 bodies."""

    def __init__(self, override: Optional[Override] = None, **settings: Any) -> None:
        settings.setdefault("global", None)
        self.model = Server(settings)
        self.start = time.monotonic_ns()
        self.override = override
        self.log: List[Tuple[str, str, int]] = []  # (method, path, status)
        self.concurrent = 0
        self.max_concurrent = 0

    def count(self, status: int) -> int:
        return sum(1 for _, _, s in self.log if s == status)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.concurrent += 1
        self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            if self.override is not None:
                response = await self.override(request)
                if response is not None:
                    self.log.append((request.method, request.path, response.status))
                    return response
            answer = self.model.handle(time.monotonic_ns() - self.start, request.method, request.path)
            self.log.append((request.method, request.path, answer.status))
            headers = [(k, v) for k, v in answer.headers if k.lower() not in ("content-type", "date")]
            content_type = answer.header("content-type") or "application/json"
            body = answer.body_text or ("{}" if answer.status < 300 else "")
            return web.Response(
                status=answer.status,
                body=body.encode(),
                headers=headers,
                content_type=content_type.split(";")[0],
            )
        finally:
            self.concurrent -= 1


@contextlib.asynccontextmanager
async def serve(imitation: DiscordImitation) -> AsyncIterator[str]:
    """Serves ``imitation`` on 127.0.0.1 (a free port); yields the base URL."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", imitation.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def run(coro: Awaitable[Any], limit: float = 30.0) -> Any:
    """Runs a test coroutine with a hard time bound, so no test can hang."""

    async def bounded() -> Any:
        return await asyncio.wait_for(coro, limit)

    return asyncio.run(bounded())


def json_response(status: int, body: Dict[str, Any], headers: Optional[Dict[str, str]] = None) -> web.Response:
    import json

    return web.Response(
        status=status, body=json.dumps(body).encode(), content_type="application/json", headers=headers
    )


def messages_bucket(limit: int, window_s: float, **extra: Any) -> Dict[str, Any]:
    """Server settings: POST /channels/:id/messages limited to ``limit`` per ``window_s``."""
    settings: Dict[str, Any] = {
        "buckets": {"msg": {"limit": limit, "window_ns": int(window_s * SECOND)}},
        "routes": {"POST /channels/:id/messages": {"bucket": "msg"}},
    }
    settings.update(extra)
    return settings
