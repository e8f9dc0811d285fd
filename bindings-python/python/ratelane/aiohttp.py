"""An aiohttp client middleware that rate-limits every request of a session (aiohttp 3.12+).

::

    import aiohttp, ratelane, ratelane.aiohttp

    limiter = ratelane.RateLimiter(max_wait=30.0)
    async with aiohttp.ClientSession(middlewares=[ratelane.aiohttp.middleware(limiter)]) as session:
        async with session.post("https://discord.com/api/v10/channels/123/messages", json=...) as r:
            ...
    await limiter.aclose()

Add ``trace_configs=[ratelane.aiohttp.trace_config()]`` to the session too: the limiter then
learns when aiohttp wrote each request (after opening a connection, or on a busy loop, later
than the limiter let it go) and counts the global limit from then.

The route and major parameter come from the URL path; the ``Authorization`` header (hashed)
keys the token; the keys of a JSON object body tell the profile a request the server limits
apart (a channel's ``name``/``topic`` edit), so its sub-limit holds only its own kind. 429s and transport failures are retried inside the middleware as
``RateLimiter.run`` does (a retried response is released); ``RateLimitError`` subclasses
reach the caller. For aiohttp before 3.12, wrap calls in ``limiter.run`` instead.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Awaitable, Callable, List, Mapping, Optional

from aiohttp import ClientRequest, ClientResponse, TraceConfig, TraceRequestHeadersSentParams

from ._body import MAX_BODY, json_body_keys
from ._driver import RateLimiter, report_written
from ._identity import identity_of

__all__ = ["middleware", "trace_config"]

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
            body_keys=body_keys(request),
        )

    return rate_limited


def trace_config() -> TraceConfig:
    """A ``TraceConfig`` (``ClientSession(trace_configs=[...])``) that reports when aiohttp
    wrote a request to the limiter whose ``run`` (or middleware) is sending it
    (``ratelane.report_written``). Requests sent outside a limiter are not affected.

    A request without a body is reported when its headers are sent; one with a body when its
    first chunk is. aiohttp calls the headers hook before it writes anything, and since 3.10
    it holds the headers back to write them with the body's first chunk, from a task of its
    own (eager only from Python 3.12): on a busy event loop that task runs tens of
    milliseconds later, and a request reported at its headers was counted from before it
    left (with a warm pool, 33-50 global 429s on the Scoreboard's ``interactions``).
    The chunk hook runs just before that chunk is written, in the same step."""

    async def on_request_headers_sent(session: object, context: object, params: TraceRequestHeadersSentParams) -> None:
        if not has_body(params.headers):
            report_written()

    async def on_request_chunk_sent(session: object, context: SimpleNamespace, params: object) -> None:
        # Once per request: `context` is this trace config's, one per request.
        if not getattr(context, "ratelane_written", False):
            context.ratelane_written = True
            report_written()

    config = TraceConfig()
    config.on_request_headers_sent.append(on_request_headers_sent)
    config.on_request_chunk_sent.append(on_request_chunk_sent)
    config.freeze()
    return config


def has_body(headers: Mapping[str, str]) -> bool:
    """Whether request headers announce a body (a non-zero ``Content-Length``, or chunks)."""
    length = headers.get("Content-Length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "chunked" in headers.get("Transfer-Encoding", "").lower()


def body_keys(request: ClientRequest) -> Optional[List[str]]:
    """The top-level keys of the request's JSON object body (``json=`` or a JSON ``data=``),
    or ``None``."""
    body = request.body
    decode = getattr(body, "decode", None)
    size = getattr(body, "size", None)
    if decode is None or size is None or size > MAX_BODY:
        return None
    return json_body_keys(request.headers.get("Content-Type"), decode())
