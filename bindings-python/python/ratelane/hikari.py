"""A bucket manager for hikari's REST client, on the ratelane engine.

hikari's ``RESTClientImpl`` takes a ``bucket_manager`` (and ``bucket_manager_owner``) in its
constructor and uses it through ``acquire_bucket``, ``update_rate_limits``, ``throttle``,
``max_rate_limit``, ``start`` and ``close``; ``BucketManager`` provides exactly those::

    import hikari
    from hikari.impl import rest as rest_impl
    from ratelane.hikari import BucketManager

    rest = rest_impl.RESTClientImpl(
        ..., bucket_manager=BucketManager(max_rate_limit=300.0), bucket_manager_owner=True, ...
    )

(hikari's ``GatewayBot``, ``RESTBot`` and ``RESTApp`` build their own manager and take no
such argument.) hikari reports only a response's bucket headers and global 429s to its
manager, not its status, so this manager cannot see sub-limit or shared 429s (hikari sleeps
those out itself), and a response without bucket headers (a 5xx) leaves the request
cancelled in the engine. A wait longer than ``max_rate_limit`` raises hikari's
``RateLimitTooLongError``, as hikari's own manager does.
"""

from __future__ import annotations

import contextvars
import time
from types import TracebackType
from typing import Any, List, Optional, Tuple, Type

from hikari import errors

from ._driver import Permit, RateLimiter
from ._errors import MaxWaitExceededError
from ._identity import identity_of

__all__ = ["BucketManager"]

_current: "contextvars.ContextVar[Optional[_Acquired]]" = contextvars.ContextVar(
    "ratelane_hikari_permit", default=None
)


class BucketManager:
    """Drop-in for ``hikari.impl.buckets.RESTBucketManager`` (duck-typed: hikari annotates
    the parameter with its own class, so type checkers want a ``typing.cast``)."""

    def __init__(self, max_rate_limit: float = 300.0, limiter: Optional[RateLimiter] = None, **settings: Any) -> None:
        if limiter is not None and settings:
            raise TypeError("pass either a limiter or settings for a new one, not both")
        self._max_rate_limit = float(max_rate_limit)
        settings.setdefault("max_wait", self._max_rate_limit)
        self._limiter = limiter if limiter is not None else RateLimiter(**settings)
        self._alive = False

    @property
    def limiter(self) -> RateLimiter:
        """The ratelane driver underneath."""
        return self._limiter

    @property
    def max_rate_limit(self) -> float:
        """Longer waits raise ``RateLimitTooLongError``."""
        return self._max_rate_limit

    @property
    def is_alive(self) -> bool:
        return self._alive

    def start(self, poll_period: float = 20.0, expire_after: float = 10.0) -> None:
        """Starts the manager (no garbage-collection task: the engine evicts idle buckets)."""
        if self._alive:
            raise errors.ComponentStateConflictError("Cannot start an active bucket manager")
        self._limiter._bind()
        self._alive = True

    async def close(self) -> None:
        """Closes the engine: requests still waiting fail."""
        if not self._alive:
            raise errors.ComponentStateConflictError("Cannot interact with an inactive bucket manager")
        self._alive = False
        await self._limiter.aclose()

    def acquire_bucket(self, compiled_route: Any, authentication: Optional[str]) -> "_Acquired":
        """The context manager hikari holds around one request."""
        if not self._alive:
            raise errors.ComponentStateConflictError("Cannot interact with an inactive bucket manager")
        return _Acquired(self, compiled_route, authentication)

    def update_rate_limits(
        self,
        compiled_route: Any,
        authentication: Optional[str],
        bucket_header: str,
        remaining_header: int,
        limit_header: int,
        reset_at: float,
        reset_after: float,
    ) -> None:
        """hikari's report of a response's bucket headers (called inside ``acquire_bucket``)."""
        acquired = _current.get()
        if acquired is None:
            return
        acquired.headers = [
            ("X-RateLimit-Bucket", bucket_header),
            ("X-RateLimit-Limit", str(limit_header)),
            ("X-RateLimit-Remaining", str(remaining_header)),
            ("X-RateLimit-Reset-After", repr(float(reset_after))),
        ]

    def throttle(self, retry_after: float) -> None:
        """hikari's report of a global 429 (called inside ``acquire_bucket``)."""
        acquired = _current.get()
        if acquired is not None:
            acquired.global_retry_after = float(retry_after)


class _Acquired:
    __slots__ = ("_manager", "_route", "_auth", "_permit", "_token", "headers", "global_retry_after")

    def __init__(self, manager: BucketManager, route: Any, authentication: Optional[str]) -> None:
        self._manager = manager
        self._route = route
        self._auth = authentication
        self._permit: Optional[Permit] = None
        self._token: Optional[contextvars.Token[Optional[_Acquired]]] = None
        self.headers: Optional[List[Tuple[str, str]]] = None
        self.global_retry_after: Optional[float] = None

    async def __aenter__(self) -> None:
        limiter = self._manager.limiter
        permit = limiter.acquire(
            self._route.method, self._route.compiled_path, identity=identity_of(self._auth)
        )
        try:
            await permit.__aenter__()
        except MaxWaitExceededError as exc:
            wait = exc.predicted_wait or 0.0
            raise errors.RateLimitTooLongError(
                route=self._route,
                is_global=False,
                retry_after=wait,
                max_retry_after=self._manager.max_rate_limit,
                reset_at=time.time() + wait,
                limit=None,
                period=None,
            ) from exc
        self._permit = permit
        self._token = _current.set(self)

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        permit = self._permit
        assert permit is not None
        if self._token is not None:
            _current.reset(self._token)
        try:
            if self.global_retry_after is not None:
                permit.update(
                    429,
                    [("X-RateLimit-Global", "true"), ("X-RateLimit-Scope", "global")],
                    retry_after=self.global_retry_after,
                    global_=True,
                )
            elif self.headers is not None:
                permit.update(200, self.headers)
            # Otherwise hikari saw no rate-limit headers (a 5xx, a transport error): leaving
            # cancels the request; what it used stays used until its window resets.
        finally:
            await permit.__aexit__(None, None, None)
