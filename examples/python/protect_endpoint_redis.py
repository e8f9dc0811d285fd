"""Protecting your own HTTP endpoint with a limit kept in Redis (an aiohttp server).

Each client IP may make 5 requests per 10 seconds (GCRA: a burst of 5, then one every 2 s).
The count lives in Redis (``ratelane.redis.RedisGcra``: one Lua script call per request, on
Redis's clock), so every process and machine that serves this endpoint with the same Redis
and prefix enforces one shared limit. Every answer carries the IETF ``RateLimit`` fields and the
``X-RateLimit-*`` headers; a refused request gets 429 with ``Retry-After``. The headers are
rendered by ratelane's core, not by this file.

Run (after ``pip install './bindings-python[redis,aiohttp]'``), with a Redis server:

    redis-server --port 6379 --save '' &        # or any Redis you may write to
    python examples/python/protect_endpoint_redis.py redis://127.0.0.1:6379/0
        # serves on a free port, sends itself 7 requests, prints them, exits
    python examples/python/protect_endpoint_redis.py redis://127.0.0.1:6379/0 --serve 8080
        # keeps serving; try curl -i http://127.0.0.1:8080/ (from several terminals, or
        # several copies of this server on other ports: they share the limit)

When Redis cannot decide (down, too slow for ``socket_timeout``), this endpoint fails open: it
serves the request without rate-limit headers and logs why. Return a 503 there instead to
fail closed.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from typing import List, Tuple

import aiohttp
import redis.asyncio
from aiohttp import web

import ratelane
from ratelane.redis import RedisGcra
from ratelane.server import Decision

SECOND = 1_000_000_000
POLICY = "per-client"

log = logging.getLogger("protect_endpoint_redis")


def rate_limit_headers(decision: Decision) -> List[Tuple[str, str]]:
    """The IETF fields, then the X-RateLimit-* ones; Retry-After (in both sets) only once."""
    headers = decision.ietf_headers(POLICY)
    headers += [(name, value) for name, value in decision.x_ratelimit_headers() if name != "Retry-After"]
    return headers


def make_app(per_client: RedisGcra) -> web.Application:
    """The web application: one endpoint, limited per client IP by ``per_client``."""

    async def hello(request: web.Request) -> web.Response:
        try:
            decision = await per_client.check(request.remote or "unknown")
        except ratelane.RedisLimiterError as exc:
            # The limiter could not decide (exc.code: redis_connection, redis_server...).
            log.warning("rate limit unavailable, serving anyway: %s (%s)", exc, exc.code)
            return web.json_response({"hello": "world"})
        headers = rate_limit_headers(decision)
        if not decision.allowed:
            body = {"error": "rate limited", "retry_after_s": decision.retry_after_s}
            return web.json_response(body, status=429, headers=headers)
        return web.json_response({"hello": "world", "remaining": decision.remaining}, headers=headers)

    app = web.Application()
    app.router.add_get("/", hello)
    return app


async def serve(app: web.Application, port: int) -> Tuple[web.AppRunner, int]:
    """Serves ``app`` on 127.0.0.1 (``port`` 0: a free one); returns the runner and the port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, int(runner.addresses[0][1])


async def demo(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for i in range(1, 8):
            async with session.get(url) as response:
                await response.read()
                shown = ", ".join(
                    f"{name}: {response.headers.get(name, '-')}"
                    for name in ("RateLimit", "X-RateLimit-Remaining", "Retry-After")
                )
                print(f"request {i}: {response.status}  {shown}")


async def main(redis_url: str, serve_port: int) -> None:
    # socket_timeout bounds every check: a Redis that does not answer in time is a
    # RedisConnectionError, and the endpoint fails open (above).
    client = redis.asyncio.Redis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
    # One prefix per limiter. The demo takes a fresh one so that each run starts empty.
    prefix = "example:per-client:" if serve_port else f"example:{uuid.uuid4().hex[:8]}:per-client:"
    per_client = RedisGcra.per_window(client, 5, 10 * SECOND, prefix=prefix)
    runner, port = await serve(make_app(per_client), serve_port)
    try:
        if serve_port:
            print(f"listening on http://127.0.0.1:{port}/ (limits in {redis_url}, keys {prefix}*)")
            await asyncio.Event().wait()
        else:
            await demo(f"http://127.0.0.1:{port}/")
            print(f"5 requests per 10 s per client IP, counted in Redis under {prefix}*")
    finally:
        await runner.cleanup()
        await client.aclose()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    if len(sys.argv) < 2:
        sys.exit("usage: protect_endpoint_redis.py REDIS_URL [--serve PORT]")
    port = 0
    if "--serve" in sys.argv:
        at = sys.argv.index("--serve")
        port = int(sys.argv[at + 1]) if len(sys.argv) > at + 1 else 8080
    try:
        asyncio.run(main(sys.argv[1], port))
    except KeyboardInterrupt:
        pass
