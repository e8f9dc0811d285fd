"""``ratelane.Limiter``: the sans-IO engine, one to one with the core's ``Limiter``."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from . import _core
from ._settings import config_json

__all__ = ["Limiter"]


class Limiter(_core.Limiter):
    """The sans-IO rate limiter: feed it inputs, drain its outputs, do the I/O yourself.

    ::

        limiter = ratelane.Limiter(global_limit=50, max_wait_ns=30_000_000_000)
        rid = limiter.enqueue(time.monotonic_ns(), "POST", "/channels/123/messages")
        for output in limiter.drain():     # after EVERY input: the drain invariant
            match output:
                case ratelane.Send(id): ...            # start the HTTP request for id
                case ratelane.Fail(id, code): ...      # output.exception() is the error
                case ratelane.WaitUntil(at_ns): ...    # call handle_timeout(at_ns) then
                case ratelane.Idle(): ...              # nothing waits on time
                case _: ...                            # observations: RateLimited, ...
        disposition = limiter.handle_response(now_ns, rid, 200, response_headers)

    Settings are the core's JSON keys (``ratelane::json``), given as a mapping and/or
    keyword arguments: ``profile`` (one of ``ratelane.PROFILES``: ``"discord"``, ``"ietf"``,
    ``"github"``, ``"retry_after_only"``, ``"openai"``, ``"anthropic"``, ``"azure_openai"``,
    ``"shopify"``, ``"auto"``), ``global_limit``, ``global_window_ns``, ``max_wait_ns``,
    ``defer_after_ns``, ``max_rate_limit_retries``, ``max_error_retries``, ``backoff_base_ns``... Durations are
    integer nanoseconds. Absent keys take the profile's defaults; unknown keys, wrong types
    and out-of-range values raise ``InvalidConfigError`` naming the key.

    Methods (times are integer nanoseconds, ``now_ns`` never going backwards):

    * inputs: ``enqueue``, ``handle_response``, ``handle_failure``, ``cancel``,
      ``handle_timeout``, ``close``, ``restore(now_ns, wall_clock_ms, snapshot)``;
    * outputs: ``poll_output`` (one) and ``drain`` (all, up to ``WaitUntil``/``Idle``);
    * getters: ``predict``, ``queued``, ``in_flight``, ``buckets``, ``is_closed``,
      ``config_json()``, ``snapshot(now_ns, wall_clock_ms)``.

    ``snapshot`` returns what the limiter learned (routes sharing a bucket, global and host
    pauses, the invalid-request budget spent) as JSON text, instants on the wall clock
    ``wall_clock_ms`` (ms since the Unix epoch); ``restore`` reads such text into a limiter
    that holds no request, so a restarted program starts informed. See ``RateLimiter.snapshot``.

    ``route_groups`` (a list of lists of route keys) replaces the routes known to share a
    bucket before any answer (Discord's reaction routes by default); ``[]`` turns it off.
    """

    __slots__ = ()

    def __new__(cls, config: Optional[Mapping[str, Any]] = None, /, **settings: Any) -> "Limiter":
        return super().__new__(cls, config_json(config, **settings))
