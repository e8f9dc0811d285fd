"""ratelane under hikari: a bucket manager for its REST clients, and one call for its bots.

::

    import hikari, ratelane.hikari

    bot = hikari.GatewayBot(token)                 # or hikari.RESTBot(...), hikari.RESTApp()
    ratelane.hikari.install(bot, max_wait=30.0)    # before bot.run() / app.start()

hikari's REST clients take a bucket manager: its ``RESTClientImpl`` takes a ``bucket_manager``
(and ``bucket_manager_owner``) in its constructor, public since hikari 2.0.0.dev115, and uses it
through ``acquire_bucket``, ``update_rate_limits``, ``throttle``, ``max_rate_limit``, ``start``
and ``close``; ``BucketManager`` provides exactly those, on the ratelane engine::

    from hikari.impl import rest as rest_impl
    rest = rest_impl.RESTClientImpl(..., bucket_manager=ratelane.hikari.BucketManager(), ...)

What users write is a ``GatewayBot``, a ``RESTBot`` or a ``RESTApp``, which build their
manager themselves and take none. ``install`` puts one under them, on the least private
surface hikari has: the bots' REST client is public (``bot.rest``), but the manager it holds
is the private slot ``_bucket_manager`` of ``RESTClientImpl`` (``RESTApp`` holds it in the
same slot and hands it to every client it acquires). Tested with hikari 2.7.0; the tests
(``tests/test_hikari.py``) fail when a new hikari renames the slot (``install`` then raises
``TypeError`` rather than leaving hikari's own manager in place silently).

hikari reports only a response's bucket headers and global 429s to its
manager, not its status, so this manager cannot see sub-limit or shared 429s (hikari sleeps
those out itself), and a response without bucket headers (a 5xx) leaves the request
cancelled in the engine. A wait longer than ``max_rate_limit`` raises hikari's
``RateLimitTooLongError``, as hikari's own manager does.
"""

from __future__ import annotations

import contextvars
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, List, Optional, Tuple, Type

from hikari import errors

from ._driver import Permit, RateLimiter
from ._errors import MaxWaitExceededError
from ._identity import identity_of
from ._transport import own_limiter

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._settings import LimiterSettings

__all__ = ["BucketManager", "install"]

_current: "contextvars.ContextVar[Optional[_Acquired]]" = contextvars.ContextVar(
    "ratelane_hikari_permit", default=None
)


class BucketManager:
    """Drop-in for ``hikari.impl.buckets.RESTBucketManager`` (duck-typed: hikari annotates
    the parameter with its own class, so type checkers want a ``typing.cast``)."""

    def __init__(
        self, max_rate_limit: float = 300.0, limiter: Optional[RateLimiter] = None, **settings: Unpack[LimiterSettings]
    ) -> None:
        if isinstance(max_rate_limit, bool) or not isinstance(max_rate_limit, (int, float)):
            raise TypeError(f"max_rate_limit must be a number of seconds, got {max_rate_limit!r}")
        self._max_rate_limit = float(max_rate_limit)
        self._limiter: RateLimiter
        if limiter is None:
            settings.setdefault("max_wait", self._max_rate_limit)
        self._limiter, _ = own_limiter(limiter, RateLimiter, dict(settings), "BucketManager")
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


def install(
    target: Any, manager: Optional[BucketManager] = None, **settings: Unpack[LimiterSettings]
) -> BucketManager:
    """Puts ratelane under a hikari ``GatewayBot``, ``RESTBot`` or ``RESTApp`` (or a
    ``RESTClientImpl``): every REST request it makes, and every client a ``RESTApp`` acquires,
    goes through ``manager`` (default: a new ``BucketManager(**settings)`` whose
    ``max_rate_limit`` is the one hikari was given). Call it before the bot runs or the app
    starts. Returns the manager (its ``limiter`` is the ``RateLimiter``).

    Raises:
        TypeError: ``target`` is none of those, or hikari no longer keeps its manager where
            this relies on (see the module doc).
        hikari.errors.ComponentStateConflictError: the bot or app is already running.
    """
    from hikari.impl import rest as rest_impl

    def is_a(value: Any, *classes: type) -> bool:
        # By the class's own lineage: hikari's interfaces answer isinstance for any object
        # with the right attributes (a GatewayBot "is" a RESTClientImpl to isinstance).
        return any(cls in type(value).__mro__ for cls in classes)

    holder: Any = target
    if not is_a(target, rest_impl.RESTApp, rest_impl.RESTClientImpl):
        holder = getattr(target, "rest", None)  # GatewayBot.rest, RESTBot.rest: public
        if not is_a(holder, rest_impl.RESTClientImpl):
            raise TypeError(f"not a hikari GatewayBot, RESTBot, RESTApp or RESTClientImpl: {target!r}")
    current = getattr(holder, "_bucket_manager", None)
    if current is None or not hasattr(current, "acquire_bucket"):
        raise TypeError(
            f"{type(holder).__name__} keeps no bucket manager in _bucket_manager: this hikari is not one "
            "ratelane.hikari knows (tested: 2.7.0)"
        )
    if current.is_alive:
        raise errors.ComponentStateConflictError("install ratelane before the bot runs or the app starts")
    if manager is None:
        manager = BucketManager(current.max_rate_limit, **settings)
    elif settings:
        raise TypeError("pass either a manager or settings for a new one, not both")
    setattr(holder, "_bucket_manager", manager)  # the private slot (see the module doc)
    return manager
