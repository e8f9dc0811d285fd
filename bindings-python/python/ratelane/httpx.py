"""httpx transports that rate-limit every request made through them (async and sync).

::

    import httpx, ratelane.httpx

    transport = ratelane.httpx.RateLimitedTransport(max_wait=30.0)            # AsyncClient
    async with httpx.AsyncClient(base_url="https://discord.com/api/v10", transport=transport) as client:
        response = await client.post("/channels/123/messages", json={"content": "hi"})

    client = httpx.Client(transport=ratelane.httpx.SyncRateLimitedTransport(profile="github"))

(httpx2, on which the OpenAI and Anthropic SDKs now run, has the same two classes in
``ratelane.httpx2``.)

Each takes a limiter to share (``RateLimiter`` / ``SyncRateLimiter``, left open when the
transport closes) or the limiter's settings as keyword arguments (a new limiter, closed with the
transport), and the transport to wrap (default: httpx's ``AsyncHTTPTransport()`` /
``HTTPTransport()``).

The route and major parameter come from the URL path; the ``Authorization`` header (hashed)
keys the token; the keys of a JSON object body tell the profile a request the server limits
apart (a channel's ``name``/``topic`` edit). 429s and transport failures are retried inside
the transport as ``RateLimiter.run`` does (requests with a streaming body cannot be re-sent
after a 429). The async transport also tells the limiter when httpcore wrote each request's
headers (the ``trace`` request extension, chained to one the caller set), so the global limit
counts from then.

A request ratelane does not complete reaches the client as an answer, as if the server had
given it (``refusal="respond"``, the default): the server's own last answer when there was one
(a 429 after the retries), else a 429 whose JSON body names ratelane's code and whose
``retry-after`` says when the request could go (``ratelane._transport.refusal_answer``). So
``response.raise_for_status()`` raises httpx's ``HTTPStatusError``, and an SDK raises its own
rate-limit error. ``refusal="raise"`` raises ratelane's ``RateLimitError`` subclasses from the
client's call instead.
"""

from __future__ import annotations

import httpx

from ._transport import AsyncTransport, SyncTransport

__all__ = ["RateLimitedTransport", "SyncRateLimitedTransport"]


class RateLimitedTransport(AsyncTransport, httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport`` for ``httpx.AsyncClient(transport=...)``."""

    _library = httpx


class SyncRateLimitedTransport(SyncTransport, httpx.BaseTransport):
    """An ``httpx.BaseTransport`` for ``httpx.Client(transport=...)``; thread-safe."""

    _library = httpx
