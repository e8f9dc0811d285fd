"""Settings: Python keyword arguments -> the core's JSON form (``ratelane::json``).

Every binding hands the core one JSON object, so every language accepts the same keys with
the same defaults and the same error messages. The sans-IO ``Limiter`` takes the core's keys
as they are (durations in integer nanoseconds, ``*_ns``); the asyncio driver takes durations
in seconds under the same names without the suffix and converts them here.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

from ._errors import InvalidConfigError

__all__ = ["config_json", "seconds_settings", "DURATION_KEYS"]

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


def config_json(config: Optional[Mapping[str, Any]] = None, **settings: Any) -> str:
    """JSON text for the native constructors from a mapping and/or keyword arguments in the
    core's form (``global_limit=40``, ``max_wait_ns=...``)."""
    merged: Dict[str, Any] = dict(config or {})
    merged.update(settings)
    try:
        return json.dumps(merged, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidConfigError(f"settings must be JSON values: {exc}") from None
