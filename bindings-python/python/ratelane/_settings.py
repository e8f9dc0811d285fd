"""Settings: Python keyword arguments -> the core's JSON form (``ratelane::json``).

Every binding hands the core one JSON object, so every language accepts the same keys with
the same defaults and the same error messages. The sans-IO ``Limiter`` takes the core's keys
as they are (durations in integer nanoseconds, ``*_ns``); the asyncio driver takes durations
in seconds under the same names without the suffix and converts them here.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Dict, Literal, Mapping, Optional, Sequence, TypedDict

from ._errors import InvalidConfigError

__all__ = ["config_json", "seconds_settings", "driver_config", "DURATION_KEYS", "LimiterSettings", "Profile"]

#: The header profiles (``ratelane.PROFILES``, checked against the core by the tests).
Profile = Literal[
    "discord", "ietf", "github", "retry_after_only", "openai", "anthropic", "azure_openai", "shopify", "auto"
]


class LimiterSettings(TypedDict, total=False):
    """The settings of the drivers (``RateLimiter``, ``SyncRateLimiter`` and every adapter
    that builds one), as keyword arguments: the core's settings (``ratelane::json``) with
    durations in **seconds** under the name without ``_ns``. Absent ones take the profile's
    defaults. ``mypy --strict`` rejects a misspelt or mistyped one; at run time the same
    mistakes raise ``InvalidConfigError`` naming the setting in these names and units."""

    profile: Profile
    """The header profile: ``"discord"`` (default), ``"ietf"``, ``"github"``,
    ``"retry_after_only"``, ``"openai"``, ``"anthropic"``, ``"azure_openai"``, ``"shopify"``
    or ``"auto"`` (recognises the provider from each answer)."""
    global_limit: int
    """Requests per ``global_window`` per token (Discord: 50; 0 for none)."""
    global_window: float
    """Seconds."""
    global_margin_max: float
    """Seconds: the most the global window's learned margin may grow to."""
    max_wait: Optional[float]
    """Seconds: a request whose predicted wait is longer fails at once with
    ``MaxWaitExceededError`` (``None``: no limit)."""
    defer_after: Optional[float]
    """Seconds: a request whose predicted wait is longer fails at once with ``DeferredError``
    (``None``: never)."""
    max_rate_limit_retries: int
    """How many times a request answered 429 is re-sent (0: none; the 429 is then the
    answer)."""
    max_error_retries: int
    """How many times a transport failure or a 5xx of an idempotent request is re-sent."""
    backoff_base: float
    """Seconds: the first error backoff (doubling, with jitter)."""
    backoff_max: float
    """Seconds: the longest error backoff."""
    min_rate_limit_wait: float
    """Seconds: the shortest wait after a 429."""
    max_server_wait: float
    """Seconds: the longest wait a server's answer can impose (longer ones are capped)."""
    invalid_request_limit: int
    """Invalid requests (401, 403, 429) allowed per ``invalid_request_window`` (0: not
    counted)."""
    invalid_request_window: float
    """Seconds."""
    invalid_request_stop_at: int
    """Stop sending when this many invalid requests are counted in the window."""
    invalid_request_warn_at: int
    """Observe ``InvalidRequestWarning`` from this many."""
    edge_backoff_base: float
    """Seconds: the first pause after an edge ban (an HTML 429)."""
    edge_backoff_max: float
    """Seconds."""
    stop_on_unauthorized: bool
    """Stop sending after a 401 (the token is revoked)."""
    jitter_seed: int
    """Seed of the backoff jitter (for reproducible runs)."""
    max_routes: int
    """Routes remembered (route -> bucket)."""
    bucket_idle_ttl: float
    """Seconds an idle learned bucket is kept."""
    route_groups: Sequence[Sequence[str]]
    """Routes known to share a bucket before any answer (``"METHOD /template"`` keys)."""

#: Settings that are durations: ``name`` in seconds for the driver, ``name_ns`` in the core.
DURATION_KEYS = (
    "global_window",
    "global_margin_max",
    "max_wait",
    "defer_after",
    "backoff_base",
    "backoff_max",
    "min_rate_limit_wait",
    "max_server_wait",
    "invalid_request_window",
    "edge_backoff_base",
    "edge_backoff_max",
    "bucket_idle_ttl",
)


def _ns(key: str, seconds: Any) -> Optional[int]:
    if seconds is None:
        if key in ("max_wait", "defer_after"):
            return None
        raise InvalidConfigError(f"{key}: expected a number of seconds, got None")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise InvalidConfigError(f"{key}: expected a number of seconds, got {seconds!r}")
    if not seconds >= 0 or seconds == float("inf"):
        raise InvalidConfigError(f"{key}: expected a finite number of seconds >= 0, got {seconds!r}")
    return round(seconds * 1_000_000_000)


def seconds_settings(settings: Mapping[str, Any]) -> Dict[str, Any]:
    """The driver's keyword arguments in the core's form: ``max_wait=30.0`` becomes
    ``max_wait_ns=30_000_000_000``; other keys pass through unchanged (unknown ones are then
    rejected by the core)."""
    out: Dict[str, Any] = {}
    for key, value in settings.items():
        if key in DURATION_KEYS:
            out[key + "_ns"] = _ns(key, value)
        else:
            out[key] = value
    return out


#: The driver's setting names (``LimiterSettings``); the core's ``*_ns`` names are accepted too.
SETTING_NAMES = tuple(LimiterSettings.__annotations__)
_ACCEPTED = frozenset(SETTING_NAMES) | {key + "_ns" for key in DURATION_KEYS}


def driver_config(config: Optional[Mapping[str, Any]], settings: Mapping[str, Any], caller: str) -> Dict[str, Any]:
    """The settings of a driver (``config``, a mapping, then the keyword arguments) in the
    core's form. A positional argument that is not a mapping is a ``TypeError`` saying how
    to pass settings; an unknown name is an ``InvalidConfigError`` in the driver's names
    (with the closest one when there is one); durations are converted as ``seconds_settings``
    does. ``caller`` names the class in messages."""
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(
            f"{caller}() takes its settings as keyword arguments, e.g. {caller}(max_wait=30.0), "
            f"or one mapping of them; got {config!r} as a positional argument"
        )
    merged: Dict[str, Any] = dict(config or {})
    merged.update(settings)
    for key in merged:
        if key not in _ACCEPTED:
            close = difflib.get_close_matches(str(key), SETTING_NAMES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidConfigError(
                f"{caller}: unknown setting {key!r}{hint}; expected one of: {', '.join(SETTING_NAMES)}"
            )
    return seconds_settings(merged)


def config_json(config: Optional[Mapping[str, Any]] = None, **settings: Any) -> str:
    """JSON text for the native constructors from a mapping and/or keyword arguments in the
    core's form (``global_limit=40``, ``max_wait_ns=...``)."""
    merged: Dict[str, Any] = dict(config or {})
    merged.update(settings)
    try:
        return json.dumps(merged, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidConfigError(f"settings must be JSON values: {exc}") from None
