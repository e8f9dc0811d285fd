"""A user's file that ``mypy --strict`` must reject (scripts/tests.d/10-python.sh checks each
error below is reported, by line): misspelt and mistyped settings and options."""

from __future__ import annotations

import ratelane
import ratelane.httpx


async def main() -> None:
    ratelane.RateLimiter(max_wiat=30.0)  # E1: a misspelt setting
    ratelane.RateLimiter(max_wait="30")  # E2: a mistyped setting
    ratelane.SyncRateLimiter(profile="opneai")  # E3: a profile that does not exist
    ratelane.httpx.RateLimitedTransport(global_limt=40)  # E4: a misspelt setting, through an adapter
    limiter = ratelane.RateLimiter()
    await limiter.run("GET", "/users/@me", lambda: limiter_send(), timout=5.0)  # E5: a misspelt option


async def limiter_send() -> object:
    return object()
