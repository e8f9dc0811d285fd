"""What the httpx and httpx2 transports and the requests adapter share: reading a request for
the driver's options, and turning a refusal into an answer the client understands; and the
httpx / httpx2 transports themselves (``AsyncTransport``, ``SyncTransport``), which
``ratelane.httpx`` and ``ratelane.httpx2`` bind to their library (the two are the same
library under two names).

Nothing here imports an HTTP library: requests are read by their attributes (``method``,
``url``, ``headers``, ``content`` / ``body``) and refusal answers built by the caller's own
response class.
"""

from __future__ import annotations

import json
import math
from types import ModuleType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, Literal, Optional, Tuple, TypeVar, Union

from ._body import json_body_keys
from ._core import read_llm_request
from ._driver import RateLimiter, report_written
from ._errors import InvalidArgumentError, RateLimitError
from ._identity import identity_of
from ._sync import SyncRateLimiter

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._settings import LimiterSettings

__all__ = [
    "Refusal",
    "check_refusal",
    "own_limiter",
    "request_options",
    "refusal_answer",
    "run_async",
    "run_sync",
    "reporting_trace",
    "REFUSAL_HEADERS",
    "Estimate",
    "AsyncTransport",
    "SyncTransport",
]

Refusal = Literal["respond", "raise"]
"""What a transport does with a request ratelane refuses: ``"respond"`` hands the client a
429 answer (or the server's own last answer), ``"raise"`` raises the ``RateLimitError``."""

R = TypeVar("R")


def check_refusal(refusal: Any) -> Refusal:
    if refusal not in ("respond", "raise"):
        raise InvalidArgumentError(f"refusal must be 'respond' or 'raise', got {refusal!r}")
    result: Refusal = refusal
    return result


Estimate = Callable[[bytes], Optional[int]]
"""A user's token estimate for an LLM request body (``estimate=`` of the transports): the
tokens it will cost, or ``None`` for no estimate (the request then carries no ``costs``)."""


def request_options(
    method: str, headers: Any, content: Union[bytes, str, None], estimate: Optional[Estimate] = None
) -> Dict[str, Any]:
    """The driver's options for a request, each only when there is one: ``identity`` (the
    ``Authorization`` header, hashed), ``body_keys`` (the keys of a JSON object body, which
    tell the profile a request the server limits apart) and, for an OpenAI- or
    Anthropic-style JSON body, ``model`` and ``costs={"tokens": n}``. ``n`` is the core's
    documented estimate (``ratelane.read_llm_request``: the prompt's characters / 4 plus the
    completion budget the body asks for), or ``estimate(body)`` when the caller gives one;
    the engine settles it from the answer's ``usage``. ``content`` is ``None`` when the body is
    a stream that is not read."""
    options: Dict[str, Any] = {}
    identity = identity_of(headers.get("authorization"))
    if identity is not None:
        options["identity"] = identity
    if content is not None:
        content_type = headers.get("content-type")
        keys = json_body_keys(content_type, content)
        if keys is not None:
            options["body_keys"] = keys
        # Any size (a long prompt is beyond body_keys' 64 KiB), JSON only.
        if content and "json" in (content_type or "").lower():
            llm = read_llm_request(content)
            if llm is not None:
                if llm.model is not None:
                    options["model"] = llm.model
                tokens: Optional[int] = llm.tokens
                if estimate is not None:
                    body = content.encode() if isinstance(content, str) else content
                    tokens = estimate(body)
                if tokens is not None:
                    options["costs"] = {"tokens": tokens}
    return options


#: Headers of a refusal answer: the SDKs of OpenAI and Anthropic (Stainless) obey
#: ``x-should-retry``; ``retry-after`` / ``retry-after-ms`` say when the request could go.
REFUSAL_HEADERS = ("retry-after", "retry-after-ms", "x-should-retry", "x-ratelane-code")


def refusal_answer(exc: RateLimitError, make: Callable[[int, Dict[str, str], bytes], R]) -> R:
    """What a transport in ``"respond"`` mode hands the client for a request ratelane did not
    complete: the server's own last answer when there was one (``exc.response``: a 429 after
    the retries, a 401...), else a 429 made with ``make(status, headers, body)``. That answer
    says why in a JSON body shaped as the LLM APIs' errors (``error.type`` is
    ``"rate_limit_error"``, ``error.code`` ratelane's code, ``error.message`` its message),
    when the request could go (``retry-after``, ``retry-after-ms``, from the predicted wait
    or the deferral time, when known) and ``x-should-retry: false``: the wait is over the
    caller's budget, so a client that retries 429s by itself (the OpenAI and Anthropic SDKs)
    raises its own rate-limit error at once rather than re-sending into the same wait."""
    if exc.response is not None:
        response: R = exc.response
        return response
    headers = {"content-type": "application/json", "x-should-retry": "false", "x-ratelane-code": exc.code}
    wait = exc.predicted_wait
    if wait is None:
        wait = getattr(exc, "retry_after", None)
    if wait is not None:
        headers["retry-after"] = str(max(1, math.ceil(wait)))
        headers["retry-after-ms"] = str(max(0, round(wait * 1000)))
    body = {"error": {"message": f"ratelane: {exc.message}", "type": "rate_limit_error", "code": exc.code}}
    return make(429, headers, json.dumps(body).encode())


def own_limiter(limiter: Any, kind: type, settings: Dict[str, Any], caller: str) -> Tuple[Any, bool]:
    """The limiter an adapter uses, and whether it owns it (closes it with itself): the one
    given, or a new ``kind(**settings)``. A positional argument that is not a limiter is a
    ``TypeError`` saying how settings are passed."""
    if limiter is None:
        return kind(**settings), True
    if not isinstance(limiter, kind):
        raise TypeError(
            f"{caller}() takes a {kind.__name__} or settings as keyword arguments, e.g. "
            f"{caller}(max_wait=30.0); got {limiter!r}"
        )
    if settings:
        raise TypeError(f"{caller}(): pass either a limiter or settings for a new one, not both")
    return limiter, False


async def run_async(
    limiter: Any, refusal: Refusal, method: str, path: str, send: Callable[[], Awaitable[R]],
    options: Dict[str, Any], make: Callable[[int, Dict[str, str], bytes], R],
) -> R:
    """``limiter.run(...)`` (asyncio), a refusal answered as ``refusal`` says."""
    try:
        response: R = await limiter.run(method, path, send, **options)
        return response
    except RateLimitError as exc:
        if refusal == "raise":
            raise
        return refusal_answer(exc, make)


def run_sync(
    limiter: Any, refusal: Refusal, method: str, path: str, send: Callable[[], R],
    options: Dict[str, Any], make: Callable[[int, Dict[str, str], bytes], R],
) -> R:
    """``limiter.run(...)`` (synchronous), a refusal answered as ``refusal`` says."""
    try:
        response: R = limiter.run(method, path, send, **options)
        return response
    except RateLimitError as exc:
        if refusal == "raise":
            raise
        return refusal_answer(exc, make)


Trace = Callable[[str, Dict[str, Any]], Any]

# httpcore's (and httpcore2's) trace events for "the request's headers are on the wire".
_HEADERS_SENT = frozenset(("http11.send_request_headers.complete", "http2.send_request_headers.complete"))


def reporting_trace(inner: Optional[Trace]) -> Callable[[str, Dict[str, Any]], Awaitable[None]]:
    """An httpcore ``trace`` extension (async) that reports the written headers
    (``ratelane.report_written``), then calls ``inner`` (the caller's own, if any)."""

    async def trace(event: str, info: Dict[str, Any]) -> None:
        if event in _HEADERS_SENT:
            report_written()
        if inner is not None:
            result = inner(event, info)
            if hasattr(result, "__await__"):
                await result

    return trace


# ---------------------------------------------------------------------- httpx and httpx2


def _httpx_options(library: ModuleType, request: Any, estimate: Optional[Estimate]) -> Dict[str, Any]:
    """The driver's options for an httpx / httpx2 ``Request`` (a streamed body is not read)."""
    try:
        content: Union[bytes, None] = request.content
    except library.RequestNotRead:
        content = None
    return request_options(request.method, request.headers, content, estimate)


class AsyncTransport:
    """An httpx / httpx2 ``AsyncBaseTransport`` that sends every request through a
    ``RateLimiter``; ``_library`` is the module (``httpx`` or ``httpx2``)."""

    _library: ModuleType

    def __init__(
        self,
        limiter: Optional[RateLimiter] = None,
        transport: Optional[Any] = None,
        *,
        refusal: Refusal = "respond",
        estimate: Optional[Estimate] = None,
        **settings: Unpack[LimiterSettings],
    ) -> None:
        self.limiter: RateLimiter
        self.limiter, self._owns_limiter = own_limiter(limiter, RateLimiter, dict(settings), type(self).__name__)
        self._refusal = check_refusal(refusal)
        self._estimate = estimate
        self._transport = transport if transport is not None else self._library.AsyncHTTPTransport()

    def _response(self, status: int, headers: Dict[str, str], body: bytes) -> Any:
        return self._library.Response(status, headers=headers, content=body)

    async def handle_async_request(self, request: Any) -> Any:
        transport = self._transport
        request.extensions = {**request.extensions, "trace": reporting_trace(request.extensions.get("trace"))}
        return await run_async(
            self.limiter,
            self._refusal,
            request.method,
            request.url.path,
            lambda: transport.handle_async_request(request),
            _httpx_options(self._library, request, self._estimate),
            self._response,
        )

    async def aclose(self) -> None:
        if self._owns_limiter:
            await self.limiter.aclose()
        await self._transport.aclose()


class SyncTransport:
    """An httpx / httpx2 ``BaseTransport`` (for ``Client``) that sends every request through a
    ``SyncRateLimiter``; thread-safe, as the clients are."""

    _library: ModuleType

    def __init__(
        self,
        limiter: Optional[SyncRateLimiter] = None,
        transport: Optional[Any] = None,
        *,
        refusal: Refusal = "respond",
        estimate: Optional[Estimate] = None,
        **settings: Unpack[LimiterSettings],
    ) -> None:
        self.limiter: SyncRateLimiter
        self.limiter, self._owns_limiter = own_limiter(limiter, SyncRateLimiter, dict(settings), type(self).__name__)
        self._refusal = check_refusal(refusal)
        self._estimate = estimate
        self._transport = transport if transport is not None else self._library.HTTPTransport()

    def _response(self, status: int, headers: Dict[str, str], body: bytes) -> Any:
        return self._library.Response(status, headers=headers, content=body)

    def handle_request(self, request: Any) -> Any:
        transport = self._transport
        return run_sync(
            self.limiter,
            self._refusal,
            request.method,
            request.url.path,
            lambda: transport.handle_request(request),
            _httpx_options(self._library, request, self._estimate),
            self._response,
        )

    def close(self) -> None:
        if self._owns_limiter:
            self.limiter.close()
        self._transport.close()
