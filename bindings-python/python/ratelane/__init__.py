"""ratelane: a native rate limiter for Discord bots and clients of rate-limited HTTP APIs.

* ``RateLimiter``: the asyncio driver (``await limiter.run(method, path, send)``,
  ``async with limiter.acquire(method, path) as permit``); ``report_written()`` tells it,
  from an HTTP client's hook inside ``send``, when the request was written.
* ``SyncRateLimiter``: the same for threads (``limiter.run(method, path, send)`` blocks).
  Both take their settings as keyword arguments (``LimiterSettings``) and per-request
  options (``RequestOptions``), typed for mypy.
* ``Limiter``: the sans-IO engine for frameworks that run their own loop, with its outputs
  ``Send``, ``Fail``, ``WaitUntil``, ``Idle`` and the observations ``RateLimited``,
  ``BucketLearned``, ``InvalidRequestWarning``; in shared mode also ``Reserve``, the updates
  ``ShareBucket``, ``ShareRelease``, ``ShareHold``, ``ShareInvalid`` and the observations
  ``StoreUnavailable``, ``StoreRecovered``.
* ``read_llm_request(body)``: the model and estimated tokens of an OpenAI or Anthropic request
  body (``LlmRequest``), for a request's ``model`` and ``costs={"tokens": ...}`` options.
* ``ratelane.sim``: the Discord simulator, to test code in virtual time.
* ``ratelane.server``: server-side limiters (GCRA, leaky bucket, fixed window) that render
  ``X-RateLimit-*`` and IETF ``RateLimit`` headers, for your own API; ``ratelane.redis`` runs
  the same three in Redis, for several processes sharing one limit.
* Adapters (the integrations table of the README): ``ratelane.discordpy`` (discord.py and
  its forks), ``ratelane.hikari`` (hikari's bots and REST clients), ``ratelane.httpx`` and
  ``ratelane.httpx2`` (transports, async and sync: the OpenAI and Anthropic SDKs),
  ``ratelane.requests`` (an adapter to mount), ``ratelane.aiohttp`` (a middleware),
  ``ratelane.wumpy`` (wumpy-rest's ``Ratelimiter`` protocol).
* Exceptions: ``RatelaneError`` > ``RateLimitError`` > one class per failure code, one class
  per caller-error code, and ``RedisLimiterError`` > one class per Redis failure code (see
  ``ratelane._errors``).
"""

from __future__ import annotations

from . import _core
from ._core import Idle, LlmRequest, Send, WaitUntil, read_llm_request
from ._outputs import (
    BucketLearned,
    Fail,
    InvalidRequestWarning,
    RateLimited,
    Reserve,
    ShareBucket,
    ShareHold,
    ShareInvalid,
    ShareRelease,
    StoreRecovered,
    StoreUnavailable,
)
from ._driver import Permit, RateLimiter, report_written
from ._engine import RequestOptions
from ._settings import LimiterSettings
from ._sync import SyncRateLimiter
from ._errors import (
    ERROR_CLASSES,
    FAIL_CLASSES,
    ClosedError,
    DeadlineExceededError,
    InvalidArgumentError,
    InsufficientCapacityError,
    InvalidConfigError,
    InvalidRequestError,
    InvalidStateError,
    LimiterBusyError,
    LimiterClosedError,
    MaxWaitExceededError,
    DeferredError,
    MaybeSentError,
    NetworkError,
    OutOfRangeError,
    RateLimitError,
    RatelaneError,
    REDIS_ERROR_CLASSES,
    RedisBadReplyError,
    RedisBadStateError,
    RedisConnectionError,
    RedisLimiterError,
    RedisServerError,
    RetriesExhaustedError,
    SimulationContractError,
    SnapshotError,
    SnapshotForeignError,
    SnapshotMalformedError,
    SnapshotVersionError,
    UnauthorizedError,
    UnknownRequestError,
)
from ._limiter import Limiter
from ._responses import NotSentError

FAIL_CODES: "tuple[str, ...]" = tuple(_core.FAIL_CODES)
"""Every failure code the core can emit (``Fail.code``, ``RateLimitError.code``)."""
ERROR_CODES: "tuple[str, ...]" = tuple(_core.ERROR_CODES)
"""Every caller-error code of the core (``InvalidArgumentError`` adds ``invalid_argument``)."""
PROFILES: "tuple[str, ...]" = tuple(_core.PROFILES)
"""Every header profile's name (``profile=``): ``discord``, ``ietf``, ``github``,
``retry_after_only``, the provider packs ``openai``, ``anthropic``, ``azure_openai``,
``shopify``, and ``auto``."""

# Every code the core knows has its class: a core that grew a code this package does not
# know fails here, at import, rather than later with a wrong exception.
_missing = [c for c in FAIL_CODES if c not in FAIL_CLASSES] + [
    c for c in ERROR_CODES if c not in ERROR_CLASSES
]
if _missing:  # pragma: no cover
    raise ImportError(f"ratelane's Python package lacks exception classes for {_missing}")
del _missing

__version__ = "0.1.0"

__all__ = [
    "RateLimiter",
    "SyncRateLimiter",
    "LimiterSettings",
    "RequestOptions",
    "Permit",
    "read_llm_request",
    "LlmRequest",
    "report_written",
    "Limiter",
    "Send",
    "Fail",
    "WaitUntil",
    "Idle",
    "RateLimited",
    "BucketLearned",
    "InvalidRequestWarning",
    "Reserve",
    "ShareBucket",
    "ShareRelease",
    "ShareHold",
    "ShareInvalid",
    "StoreUnavailable",
    "StoreRecovered",
    "RatelaneError",
    "RateLimitError",
    "DeadlineExceededError",
    "MaxWaitExceededError",
    "DeferredError",
    "RetriesExhaustedError",
    "MaybeSentError",
    "NetworkError",
    "UnauthorizedError",
    "ClosedError",
    "UnknownRequestError",
    "InvalidStateError",
    "InvalidConfigError",
    "InvalidRequestError",
    "LimiterClosedError",
    "LimiterBusyError",
    "SnapshotError",
    "SnapshotForeignError",
    "SnapshotVersionError",
    "SnapshotMalformedError",
    "InvalidArgumentError",
    "InsufficientCapacityError",
    "RedisLimiterError",
    "RedisConnectionError",
    "RedisServerError",
    "RedisBadStateError",
    "OutOfRangeError",
    "RedisBadReplyError",
    "SimulationContractError",
    "NotSentError",
    "FAIL_CODES",
    "ERROR_CODES",
    "PROFILES",
    "FAIL_CLASSES",
    "ERROR_CLASSES",
    "REDIS_ERROR_CLASSES",
]
