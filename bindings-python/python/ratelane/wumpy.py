"""A drop-in for wumpy-rest's ``Ratelimiter`` protocol.

::

    from wumpy.rest import APIClient
    from ratelane.wumpy import WumpyRatelimiter

    async with APIClient(token, ratelimiter=WumpyRatelimiter(max_wait=60.0)) as api:
        await api.create_message(channel_id, content="hi")

wumpy calls ``async with limiter:`` once, then for each request
``async with limiter(route) as update: response = ...; await update(response.headers)``, and
raises its own ``RateLimited`` / ``ServerException`` inside the block for 429s and 5xx.

* The route's concrete path goes to the engine, which derives the route template and major
  parameter itself (webhook tokens, reactions... as the other ratelane drivers do).
* A 429 (its headers and body's ``retry_after``/``global``) holds the bucket in the engine; the
  exception is swallowed so that wumpy re-sends, and the re-send waits in the engine.
* A 5xx the engine wants retried (idempotent methods) waits out the engine's backoff, then is
  swallowed so wumpy re-sends; other answers propagate as wumpy raised them.
* Inside wumpy's ``abort_if_ratelimited()``, a request that would have to wait raises wumpy's
  ``RateLimited(429)`` at once, and a 429 is not retried.
* A wait longer than ``max_wait`` raises ``ratelane.MaxWaitExceededError``.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Optional, Type
from urllib.parse import quote

from wumpy.rest import RateLimited, RatelimiterContext

from ._driver import Permit, RateLimiter
from ._errors import DeadlineExceededError
from ._responses import headers_of, hints_from_body
from ._transport import own_limiter

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._settings import LimiterSettings

__all__ = ["WumpyRatelimiter"]


class WumpyRatelimiter:
    """wumpy-rest's ``Ratelimiter`` protocol on the ratelane engine.

    Give it a ``RateLimiter`` to share (it is not closed on exit), or settings for its own
    (``WumpyRatelimiter(max_wait=60.0)``; closed when wumpy's client closes).
    """

    def __init__(self, limiter: Optional[RateLimiter] = None, **settings: Unpack[LimiterSettings]) -> None:
        self.limiter: RateLimiter
        self.limiter, self._owns_limiter = own_limiter(limiter, RateLimiter, dict(settings), "WumpyRatelimiter")

    async def __aenter__(self) -> "WumpyRatelimiter":
        await self.limiter.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]] = None,
        exc_val: Optional[BaseException] = None,
        exc_tb: Optional[TracebackType] = None,
    ) -> Optional[bool]:
        if self._owns_limiter:
            await self.limiter.aclose()
        return None

    def __call__(self, route: Any) -> "_RouteLimit":
        return _RouteLimit(self.limiter, route)


def _concrete_path(route: Any) -> str:
    params = {k: quote(v) if isinstance(v, str) else v for k, v in route.params.items()}
    return str(route.path.format_map(params))


class _RouteLimit:
    """One request of wumpy's, as an async context manager yielding ``update``."""

    __slots__ = ("_limiter", "_route", "_permit", "_headers", "_abort")

    def __init__(self, limiter: RateLimiter, route: Any) -> None:
        self._limiter = limiter
        self._route = route
        self._permit: Optional[Permit] = None
        self._headers: Any = None
        self._abort = False

    async def __aenter__(self) -> Callable[[Mapping[str, str]], Awaitable[object]]:
        self._abort = RatelimiterContext.abort_if_ratelimited()
        # Inside abort_if_ratelimited(): fail at once if it would have to wait (the core's
        # deadlines are exclusive, hence one microsecond rather than zero).
        timeout = 1e-6 if self._abort else None
        permit = self._limiter.acquire(self._route.method, _concrete_path(self._route), timeout=timeout)
        try:
            await permit.__aenter__()
        except DeadlineExceededError:
            raise RateLimited(429, {}) from None
        self._permit = permit
        return self._update

    async def _update(self, headers: Mapping[str, str]) -> None:
        self._headers = headers

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Optional[bool]:
        permit = self._permit
        assert permit is not None
        try:
            status = 200 if exc is None else getattr(exc, "status_code", None)
            if not isinstance(status, int) or (self._headers is None and exc is None):
                return None  # no answer to report (a transport error, or update not called)
            headers = self._headers if self._headers is not None else getattr(exc, "headers", None)
            disposition = permit.update(status, headers_of(headers), **hints_from_body(getattr(exc, "data", None)))
            if disposition != "retry" or self._abort:
                return None
            if status != 429:
                await permit.ready()  # the engine's backoff before a 5xx is re-sent
            return True  # wumpy re-sends; the new request waits in the engine
        finally:
            await permit.__aexit__(None, None, None)
