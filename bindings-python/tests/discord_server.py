"""A local HTTP server that imitates Discord's rate limits, for the driver and adapter tests.

It answers with ratelane's Discord model (``ratelane.sim.Server``) in real time, so the
answers carry Discord's headers and 429 bodies, and it logs every request. It listens on
127.0.0.1 on a free port, and ``serve`` stops it when the block ends (each test also bounds
its own run time).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Iterator, List, Optional, Tuple

from aiohttp import web

from ratelane.sim import Server

SECOND = 1_000_000_000

Override = Callable[[web.Request], Awaitable[Optional[web.StreamResponse]]]

# The objects a Discord library builds from a 200 answer (a log-in, a message sent), for the
# tests that drive discord.py and its forks: only the fields they read.
USER = {"id": "100000000000000009", "username": "ratelane-test", "discriminator": "0", "global_name": None,
        "avatar": None, "bot": True, "verified": True, "mfa_enabled": False, "flags": 0, "public_flags": 0}


def discord_object(method: str, path: str) -> Dict[str, Any]:
    """What Discord answers a 200 with, for the requests the library tests make."""
    if path.endswith("/users/@me"):
        return USER
    if path.endswith("/oauth2/applications/@me"):  # discord.py's log-in asks for it too
        return {"id": USER["id"], "name": "ratelane-test", "description": "", "icon": None, "bot_public": True,
                "bot_require_code_grant": False, "owner": USER, "verify_key": "0" * 64, "flags": 0}
    parts = path.strip("/").split("/")
    if method == "POST" and parts[-1] == "messages" and "channels" in parts:
        channel = parts[parts.index("channels") + 1]
        return {
            "id": str(100000000000000000 + (hash(path) % 1000)), "channel_id": channel, "type": 0,
            "content": "hi", "author": USER, "timestamp": "2026-01-01T00:00:00+00:00",
            "edited_timestamp": None, "tts": False, "mention_everyone": False, "mentions": [],
            "mention_roles": [], "attachments": [], "embeds": [], "pinned": False, "flags": 0,
            "components": [],
        }
    return {}


class DiscordImitation:
    """Answers like Discord: buckets, major parameters, global limit, 429 bodies."""

    def __init__(self, override: Optional[Override] = None, objects: bool = False, **settings: Any) -> None:
        settings.setdefault("global", None)
        self.objects = objects  # 200 answers carry the object (discord_object), not {}
        self.model = Server(settings)
        self.start = time.monotonic_ns()
        self.override = override
        self.log: List[Tuple[str, str, int]] = []  # (method, path, status)
        self.scopes: Dict[str, int] = {}  # the model's 429s by X-RateLimit-Scope
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
            if answer.status == 429:
                scope = answer.header("x-ratelimit-scope") or "unscoped"
                self.scopes[scope] = self.scopes.get(scope, 0) + 1
                if answer.header("via") is None:
                    headers.append(("Via", "1.1 google"))  # Discord's API 429s come through Google's edge
            content_type = answer.header("content-type") or "application/json"
            body = answer.body_text or ("{}" if answer.status < 300 else "")
            if self.objects and answer.status == 200:
                body = json.dumps(discord_object(request.method, request.path))
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


@contextlib.contextmanager
def serve_in_thread(imitation: DiscordImitation, limit: float = 60.0) -> Iterator[str]:
    """Serves ``imitation`` from an event loop in a thread of its own, for synchronous
    clients; yields the base URL. Stops when the block ends (or after ``limit`` seconds)."""
    import concurrent.futures
    import threading

    ready: "concurrent.futures.Future[str]" = concurrent.futures.Future()
    stop = threading.Event()

    async def server() -> None:
        async with serve(imitation) as base:
            ready.set_result(base)
            while not stop.is_set():
                await asyncio.sleep(0.01)

    thread = threading.Thread(target=run, args=(server(), limit), daemon=True)
    thread.start()
    try:
        yield ready.result(10)
    finally:
        stop.set()
        thread.join(limit)


def run(coro: Awaitable[Any], limit: float = 30.0) -> Any:
    """Runs a test coroutine with a hard time bound, so no test can hang."""

    async def bounded() -> Any:
        return await asyncio.wait_for(coro, limit)

    return asyncio.run(bounded())


def json_response(status: int, body: Dict[str, Any], headers: Optional[Dict[str, str]] = None) -> web.Response:
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
