"""An httpx transport that rate-limits every request made through it.

::

    import httpx, ratelane.httpx

    transport = ratelane.httpx.RateLimitedTransport(max_wait=30.0)
    async with httpx.AsyncClient(base_url="https://discord.com/api/v10", transport=transport) as client:
        response = await client.post("/channels/123/messages", json={"content": "hi"})

The route and major parameter come from the URL path; the ``Authorization`` header (hashed)
keys the token; the keys of a JSON object body tell the profile a request the server limits
apart (a channel's ``name``/``topic`` edit). 429s and transport failures are retried inside the transport as
``RateLimiter.run`` does; ``RateLimitError`` subclasses reach the caller of
``client.request``. Requests with a streaming body cannot be re-sent after a 429. The
transport also tells the limiter when httpcore wrote each request's headers (the ``trace``
request extension, chained to one the caller set), so the global limit counts from then.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, List, Optional

import httpx

from ._body import json_body_keys
from ._driver import RateLimiter, report_written
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
        request.extensions = {**request.extensions, "trace": reporting_trace(request.extensions.get("trace"))}
        return await self.limiter.run(
            request.method,
            request.url.path,
            lambda: transport.handle_async_request(request),
            identity=identity_of(request.headers.get("authorization")),
            body_keys=body_keys(request),
        )

    async def aclose(self) -> None:
        if self._owns_limiter:
            await self.limiter.aclose()
        await self._transport.aclose()


Trace = Callable[[str, Dict[str, Any]], Any]

# httpcore's trace events for "the request's headers are on the wire".
_HEADERS_SENT = frozenset(("http11.send_request_headers.complete", "http2.send_request_headers.complete"))


def reporting_trace(inner: Optional[Trace]) -> Callable[[str, Dict[str, Any]], Awaitable[None]]:
    """An httpcore ``trace`` extension that reports the written headers
    (``ratelane.report_written``), then calls ``inner`` (the caller's own, if any)."""

    async def trace(event: str, info: Dict[str, Any]) -> None:
        if event in _HEADERS_SENT:
            report_written()
        if inner is not None:
            result = inner(event, info)
            if hasattr(result, "__await__"):
                await result

    return trace


def body_keys(request: httpx.Request) -> Optional[List[str]]:
    """The top-level keys of the request's JSON object body, or ``None`` (a streamed body is
    not read)."""
    try:
        content = request.content
    except httpx.RequestNotRead:
        return None
    return json_body_keys(request.headers.get("content-type"), content)
