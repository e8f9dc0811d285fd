"""An aiohttp client middleware that rate-limits every request of a session (aiohttp 3.12+).

::

    import aiohttp, ratelane, ratelane.aiohttp

    limiter = ratelane.RateLimiter(max_wait=30.0)
    async with aiohttp.ClientSession(middlewares=[ratelane.aiohttp.middleware(limiter)]) as session:
        async with session.post("https://discord.com/api/v10/channels/123/messages", json=...) as r:
            ...
    await limiter.aclose()

The route and major parameter come from the URL path; the ``Authorization`` header (hashed)
keys the token. 429s and transport failures are retried inside the middleware as
``RateLimiter.run`` does (a retried response is released); ``RateLimitError`` subclasses
reach the caller. For aiohttp before 3.12, wrap calls in ``limiter.run`` instead.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from aiohttp import ClientRequest, ClientResponse

from ._driver import RateLimiter
from ._identity import identity_of

__all__ = ["middleware"]

Handler = Callable[[ClientRequest], Awaitable[ClientResponse]]


def middleware(limiter: RateLimiter) -> Callable[[ClientRequest, Handler], Awaitable[ClientResponse]]:
    """A client middleware (``ClientSession(middlewares=[...])``) that sends every request
    through ``limiter``."""

    async def rate_limited(request: ClientRequest, handler: Handler) -> ClientResponse:
        return await limiter.run(
            request.method,
            request.url.path,
            lambda: handler(request),
            identity=identity_of(request.headers.get("Authorization")),
        )

    return rate_limited
