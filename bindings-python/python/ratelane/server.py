"""Server-side limiters: protect your own API, keyed by subject (user, IP, token...).

Each store keeps per-key state bounded by ``max_keys`` (idle keys are dropped as they are met,
without a sweeper) and answers every check with a ``Decision`` that also renders the response
headers. Times are integer nanoseconds from an epoch of your choice (``time.monotonic_ns()``).

::

    from ratelane.server import GcraStore

    limits = GcraStore.per_window(10, 60 * 10**9)           # 10 per minute per key
    decision = limits.check(user_id, time.monotonic_ns())
    headers = decision.ietf_headers("default") + decision.x_ratelimit_headers()
    if not decision.allowed:
        return 429, headers                                  # Retry-After included

* ``GcraStore(interval_ns, burst)`` / ``GcraStore.per_window(quota, window_ns)``: GCRA, with
  ``check_n`` for weighted requests (``InsufficientCapacityError`` above the burst).
* ``LeakyBucketStore(size, drip_rate_ns, drip_size, min_interval_ns=...)`` and
  ``LeakyBucketStore.from_legacy(max=..., duration_ns=..., min_interval_ns=...)``
  (Misskey/Sharkey limits); ``check(key, now_ns, factor)`` scales the bucket per subject.
* ``FixedWindowStore(quota, window_ns)``: ``check``, plus ``schedule``/``release`` for delayed
  jobs with a release-time estimate (``Scheduled``).

These stores live in one process. For several processes or machines sharing one limit,
``ratelane.redis`` runs the same three algorithms in Redis (``RedisGcra``, ``RedisLeakyBucket``,
``RedisFixedWindow``), answering with the same ``Decision`` and ``Scheduled``.
"""

from __future__ import annotations

from ._core import Decision, FixedWindowStore, GcraStore, LeakyBucketStore, Scheduled

__all__ = ["Decision", "Scheduled", "GcraStore", "LeakyBucketStore", "FixedWindowStore"]
