"""An httpx transport that rate-limits every request made through it.

::

    import httpx, ratelane.httpx

    transport = ratelane.httpx.RateLimitedTransport(max_wait=30.0)
    async with httpx.AsyncClient(base_url="https://discord.com/api/v10", transport=transport) as client:
        response = await client.post("/channels/123/messages", json={"content": "hi"})

The route and major parameter come from the URL path; the ``Authorization`` header (hashed)
keys the token. 429s and transport failures are retried inside the transport as
``RateLimiter.run`` does; ``RateLimitError`` subclasses reach the caller of
``client.request``. Requests with a streaming body cannot be re-sent after a 429.
"""

from __future__ import annotations

from typing import Any, Optional

import httpx

from ._driver import RateLimiter
from ._identity import identity_of

__all__ = ["RateLimitedTransport"]


class RateLimitedTransport(httpx.AsyncBaseTransport):
    """Wraps ``transport`` (default: ``httpx.AsyncHTTPTransport()``) with ``limiter``
    (default: a new ``RateLimiter(**settings)``, closed with the transport)."""

    def __init__(
        self,
        limiter: Optional[RateLimiter] = None,
        transport: Optional[httpx.AsyncBaseTransport] = None,
        **settings: Any,
    ) -> None:
        if limiter is not None and settings:
            raise TypeError("pass either a limiter or settings for a new one, not both")
        self.limiter = limiter if limiter is not None else RateLimiter(**settings)
        self._owns_limiter = limiter is None
        self._transport = transport if transport is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        transport = self._transport
        return await self.limiter.run(
            request.method,
            request.url.path,
            lambda: transport.handle_async_request(request),
            identity=identity_of(request.headers.get("authorization")),
        )

    async def aclose(self) -> None:
        if self._owns_limiter:
            await self.limiter.aclose()
        await self._transport.aclose()
