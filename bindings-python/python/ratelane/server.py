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

from typing import Optional

from ._core import Decision, Limit, Scheduled, Store

__all__ = ["Decision", "Scheduled", "GcraStore", "LeakyBucketStore", "FixedWindowStore"]

# Each store is the core's one keyed store over one limit (``_core.Store`` over
# ``_core.Limit``); the classes below only pick the limit and name the ops it has
# (``Store.check`` is every algorithm's; it raises InvalidRequestError for a GCRA ``now_ns``
# later than ``2**64 - 1 - burst * interval_ns``, nothing counted).


class GcraStore(Store):
    """GCRA per key: one request per ``interval_ns``, ``burst`` back to back."""

    def __new__(cls, interval_ns: int, burst: int, max_keys: int = 100000) -> "GcraStore":
        return super().__new__(cls, Limit("gcra", interval_ns=interval_ns, burst=burst), max_keys)

    @staticmethod
    def per_window(quota: int, window_ns: int, max_keys: int = 100000) -> "GcraStore":
        """``quota`` requests per ``window_ns``, all allowed back to back."""
        return Store.__new__(GcraStore, Limit("gcra_per_window", quota=quota, window_ns=window_ns), max_keys)

    def check_n(self, key: str, now_ns: int, n: int) -> Decision:
        """Checks a request of weight ``n``. Raises InsufficientCapacityError when ``n`` exceeds
        the burst, InvalidRequestError when ``now_ns`` is later than ``2**64 - 1 - burst *
        interval_ns`` (nothing is counted)."""
        return self._apply("check_n", key, now_ns, n=n)


class LeakyBucketStore(Store):
    """A leaky bucket per key: ``size`` requests, draining ``drip_size`` every ``drip_rate_ns``,
    optionally at most one per ``min_interval_ns``."""

    def __new__(
        cls,
        size: int,
        drip_rate_ns: int,
        drip_size: int = 1,
        max_keys: int = 100000,
        *,
        min_interval_ns: Optional[int] = None,
    ) -> "LeakyBucketStore":
        return super().__new__(cls, Limit("leaky_bucket", size=size, drip_rate_ns=drip_rate_ns, drip_size=drip_size, min_interval_ns=min_interval_ns), max_keys)

    @staticmethod
    def from_legacy(
        *,
        max: Optional[int] = None,
        duration_ns: Optional[int] = None,
        min_interval_ns: Optional[int] = None,
        max_keys: int = 100000,
    ) -> "LeakyBucketStore":
        """From a legacy ``{max, duration, min_interval}`` limit (Misskey/Sharkey)."""
        return Store.__new__(LeakyBucketStore, Limit("legacy", max=max, duration_ns=duration_ns, min_interval_ns=min_interval_ns), max_keys)

    def check(self, key: str, now_ns: int, factor: Optional[float] = None) -> Decision:
        """Checks one request for ``key`` at ``now_ns``; with ``factor`` (in (0, 1]) the bucket
        is scaled for this subject."""
        if factor is None:
            return Store.check(self, key, now_ns)
        return self._apply("check_scaled", key, now_ns, factor=factor)


class FixedWindowStore(Store):
    """A fixed window per key, with release-time estimates for delayed jobs."""

    def __new__(cls, quota: int, window_ns: int, max_keys: int = 100000) -> "FixedWindowStore":
        return super().__new__(cls, Limit("fixed_window", quota=quota, window_ns=window_ns), max_keys)

    def schedule(self, key: str, now_ns: int) -> Scheduled:
        """Books a slot for one job of group ``key``. Raises InvalidRequestError when the job
        would be released after ``2**64 - 1`` ns (nothing is booked)."""
        return self._apply("schedule", key, now_ns)

    def release(self, key: str, now_ns: int) -> bool:
        """Records that one delayed job of ``key`` was released (or dropped); False if none waits."""
        return self._apply("release", key, now_ns)
