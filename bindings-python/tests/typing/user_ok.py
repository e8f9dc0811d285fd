"""A user's file that ``mypy --strict`` must accept (scripts/tests.d/10-python.sh): the
drivers' settings and options as keyword arguments, and the adapters' one lines."""

from __future__ import annotations

import httpx

import ratelane
import ratelane.httpx
import ratelane.requests


async def main() -> None:
    limiter = ratelane.RateLimiter(max_wait=30.0, profile="openai", global_limit=50, defer_after=None)
    sync = ratelane.SyncRateLimiter({"max_wait": 30.0}, backoff_base=0.5, route_groups=[["GET /a", "GET /b"]])
    transport = ratelane.httpx.RateLimitedTransport(max_wait=30.0, refusal="raise")
    async with httpx.AsyncClient(transport=transport) as client:
        await client.get("https://discord.com/api/v10/users/@me")
    adapter = ratelane.requests.RateLimitedAdapter(sync, refusal="respond")
    adapter.close()
    wait: float = limiter.predict("GET", "/users/@me", major=None)
    print(wait)
    await limiter.aclose()
