"""Serves ratelane's model of Discord (``ratelane.sim.Server``) over HTTP on 127.0.0.1, for the
examples that run without a network (the Node examples share
``bindings-node/test/discord-server.cjs`` the same way).

    runner, base_url, statuses = await serve(Server(buckets=..., routes=...))
    ...
    await runner.cleanup()

The model answers each request at the time since ``serve`` started, with Discord's headers and
429 bodies; ``statuses`` counts the answers by status. Build the ``Server`` with
``wall_epoch_ms=wall_epoch_ms()`` so that its absolute resets (``X-RateLimit-Reset``) are on the
client's wall clock.
"""

from __future__ import annotations

import collections
import time
from typing import Counter, Tuple

from aiohttp import web

from ratelane.sim import Server


def wall_epoch_ms() -> int:
    """The wall clock now, in ms: the model's time 0 when ``serve`` is called right after."""
    return int(time.time() * 1000)


async def serve(model: Server, path_prefix: str = "/api/v10") -> Tuple[web.AppRunner, str, Counter[int]]:
    """Starts serving ``model`` on a free port of 127.0.0.1; returns the runner (``cleanup()``
    stops it), the base URL (``path_prefix`` included) and the answers' status counts."""
    start = time.monotonic_ns()
    statuses: Counter[int] = collections.Counter()

    async def handle(request: web.Request) -> web.Response:
        answer = model.handle(time.monotonic_ns() - start, request.method, request.path)
        statuses[answer.status] += 1
        headers = [(k, v) for k, v in answer.headers if k.lower() not in ("content-type", "date")]
        return web.Response(
            status=answer.status,
            body=(answer.body_text or "{}").encode(),
            headers=headers,
            content_type="application/json",
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}{path_prefix}", statuses
