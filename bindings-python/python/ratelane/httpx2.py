"""httpx2 transports that rate-limit every request made through them (async and sync): the
OpenAI and Anthropic SDKs (``openai`` 3.x, ``anthropic`` 2.x run on httpx2) in one line.

::

    import httpx2, openai, ratelane.httpx2

    client = openai.AsyncOpenAI(http_client=httpx2.AsyncClient(
        transport=ratelane.httpx2.RateLimitedTransport(profile="openai")))
    sync = openai.OpenAI(http_client=httpx2.Client(
        transport=ratelane.httpx2.SyncRateLimitedTransport(profile="openai")))

The same transports as ``ratelane.httpx`` (see there), on httpx2's classes. A request ratelane
does not complete reaches the SDK as a 429 answer with ``x-should-retry: false`` (or the
server's own last answer), so the SDK raises its own ``RateLimitError`` (``openai`` /
``anthropic``) at once; ``refusal="raise"`` raises ratelane's errors instead. The SDK's own
retries (``max_retries``) stay on: they re-send only what reaches them as a 429 (after
ratelane's own retries, ``max_rate_limit_retries``).
"""

from __future__ import annotations

import httpx2

from ._transport import AsyncTransport, SyncTransport

__all__ = ["RateLimitedTransport", "SyncRateLimitedTransport"]


class RateLimitedTransport(AsyncTransport, httpx2.AsyncBaseTransport):
    """An ``httpx2.AsyncBaseTransport`` for ``httpx2.AsyncClient(transport=...)``."""

    _library = httpx2


class SyncRateLimitedTransport(SyncTransport, httpx2.BaseTransport):
    """An ``httpx2.BaseTransport`` for ``httpx2.Client(transport=...)``; thread-safe."""

    _library = httpx2
