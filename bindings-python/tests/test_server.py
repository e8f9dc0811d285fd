"""The server-side limiters' Python surface (their behaviour is in test_server_vectors.py)."""

from __future__ import annotations

import pytest

import ratelane
from ratelane.server import FixedWindowStore, GcraStore, LeakyBucketStore

SECOND = 1_000_000_000


def test_gcra_blocks_with_headers_a_client_can_follow() -> None:
    store = GcraStore.per_window(2, 10 * SECOND, max_keys=10)
    assert store.check("alice", 0).allowed and store.check("alice", 0).allowed
    blocked = store.check("alice", 1)
    assert not blocked.allowed and blocked.remaining == 0
    assert blocked.retry_after_s == 5
    assert ("Retry-After", "5") in blocked.x_ratelimit_headers()
    ietf = dict(blocked.ietf_headers("per-user"))
    assert ietf["RateLimit-Policy"] == '"per-user";q=2;w=10'
    assert store.check("bob", 1).allowed  # keys are independent
    assert len(store) == 2 and store.untracked == 0 and store.max_keys == 10


def test_server_errors_are_ratelane_errors() -> None:
    with pytest.raises(ratelane.InvalidConfigError):
        GcraStore(0, 1)
    with pytest.raises(ratelane.InvalidConfigError):
        FixedWindowStore(1, SECOND, max_keys=0)
    with pytest.raises(ratelane.InvalidConfigError):
        LeakyBucketStore.from_legacy(max=3)
    with pytest.raises(ratelane.InsufficientCapacityError) as info:
        GcraStore(SECOND, 3).check_n("k", 0, 4)
    assert (info.value.code, info.value.requested, info.value.capacity) == ("insufficient_capacity", 4, 3)
    assert isinstance(info.value, ValueError)
    with pytest.raises(ratelane.InvalidConfigError):
        LeakyBucketStore(3, SECOND).check("k", 0, factor=1.5)


def test_fixed_window_schedules_delayed_jobs() -> None:
    store = FixedWindowStore(1, 10 * SECOND)
    first = store.schedule("jobs", 0)
    second = store.schedule("jobs", 0)
    assert first.run_now and not second.run_now
    assert second.release_at_ns == 10 * SECOND and second.waiting == 1
    assert store.release("jobs", 10 * SECOND) and not store.release("jobs", 10 * SECOND)


def test_the_end_of_the_clock_limits_or_refuses_never_admits() -> None:
    end = 2**64 - 1
    gcra = GcraStore(SECOND, 3)
    last = end - 3 * SECOND  # 2**64 - 1 - burst * interval
    assert [gcra.check("k", last).allowed for _ in range(6)] == [True] * 3 + [False] * 3
    for now in (last + 1, end):
        with pytest.raises(ratelane.InvalidRequestError) as info:
            gcra.check("k", now)
        assert info.value.code == "invalid_request" and isinstance(info.value, ValueError)
        with pytest.raises(ratelane.InvalidRequestError):
            gcra.check_n("k", now, 9)
    window = FixedWindowStore(2, SECOND)
    assert [window.check("k", end).allowed for _ in range(5)] == [True, True, False, False, False]
    jobs = FixedWindowStore(2, SECOND)
    now = end - 2 * SECOND
    releases = [jobs.schedule("g", now).release_at_ns for _ in range(6)]
    assert releases == [now, now, end - SECOND, end - SECOND, end, end]
    with pytest.raises(ratelane.InvalidRequestError):
        jobs.schedule("g", now)
    assert not jobs.check("g", now).allowed
