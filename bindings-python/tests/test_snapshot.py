"""First contact from Python: the prior route groups as a setting, and a limiter's snapshot
carried across a restart (``Limiter.snapshot``/``restore``, ``RateLimiter.snapshot``/``restore``).
The behaviour is the core's (the vectors replay it); these tests check the binding's surface:
types, the exception classes and their codes, and the driver's clocks."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Dict

import pytest

import ratelane

WALL = 1_700_000_000_000
SECOND = 1_000_000_000


def paused_snapshot(until_ms: int, taken_at_ms: int = WALL) -> Dict[str, Any]:
    return {
        "format": "ratelane.snapshot",
        "version": 1,
        "taken_at_ms": taken_at_ms,
        "profile": "discord",
        "routes": [
            {"route": "POST /channels/:id/messages", "bucket": "msgs"},
            {"route": "DELETE /channels/:id/messages/:id", "bucket": "msgs"},
        ],
        "windows": [{"bucket": "msgs", "window_ns": SECOND}],
        "global_pauses": [{"identity": "", "until_ms": until_ms}],
        "host_pause": None,
        "invalid_requests_ms": [taken_at_ms - 1_000],
    }


def test_route_groups_are_a_setting() -> None:
    default = json.loads(ratelane.Limiter().config_json())
    assert "route_groups" not in default  # the profile's own groups are not written
    off = ratelane.Limiter(route_groups=[])
    assert json.loads(off.config_json())["route_groups"] == []
    mine = ratelane.Limiter(route_groups=[["GET /a", "POST /a"]])
    assert json.loads(mine.config_json())["route_groups"] == [["GET /a", "POST /a"]]
    with pytest.raises(ratelane.InvalidConfigError) as info:
        ratelane.Limiter(route_groups=[["GET /a"]])
    assert "route_groups[0]" in str(info.value)


def test_snapshot_restore_round_trip() -> None:
    limiter = ratelane.Limiter()
    limiter.restore(0, WALL + 10_000, json.dumps(paused_snapshot(WALL + 60_000)))
    assert limiter.drain()[-1] == ratelane.Idle()
    taken = json.loads(limiter.snapshot(0, WALL + 10_000))
    assert taken["routes"] == paused_snapshot(0)["routes"]
    assert taken["global_pauses"] == [{"identity": "", "until_ms": WALL + 60_000}]
    assert taken["invalid_requests_ms"] == [WALL - 1_000]
    # The restored pause holds the first request: 50 s left at the restore.
    limiter.enqueue(0, "POST", "/channels/1/messages")
    assert limiter.drain() == [ratelane.WaitUntil(50 * SECOND)]


@pytest.mark.parametrize(
    "document, error",
    [
        ("not json", ratelane.SnapshotForeignError),
        (json.dumps({"format": "other", "version": 1}), ratelane.SnapshotForeignError),
        (json.dumps({**paused_snapshot(0), "profile": "github"}), ratelane.SnapshotForeignError),
        (json.dumps({"format": "ratelane.snapshot", "version": 3}), ratelane.SnapshotVersionError),
        (json.dumps({**paused_snapshot(0), "routes": "nope"}), ratelane.SnapshotMalformedError),
    ],
)
def test_restore_errors_are_typed(document: str, error: type) -> None:
    with pytest.raises(error) as info:
        ratelane.Limiter().restore(0, WALL, document)
    assert isinstance(info.value, ratelane.SnapshotError) and isinstance(info.value, ValueError)
    assert info.value.code == error.code
    assert ratelane.ERROR_CLASSES[info.value.code] is error


def test_restore_into_a_busy_limiter_and_wrong_types() -> None:
    limiter = ratelane.Limiter()
    limiter.enqueue(0, "GET", "/users/@me")
    with pytest.raises(ratelane.LimiterBusyError) as info:
        limiter.restore(0, WALL, json.dumps(paused_snapshot(WALL + 60_000)))
    assert info.value.code == "limiter_busy" and isinstance(info.value, RuntimeError)
    with pytest.raises(ratelane.InvalidArgumentError):
        ratelane.Limiter().restore(0, WALL, paused_snapshot(WALL))  # type: ignore[arg-type]
    with pytest.raises(ratelane.InvalidArgumentError):
        ratelane.Limiter().snapshot(0, -1)


def test_the_driver_restores_on_its_own_clocks() -> None:
    async def main() -> None:
        now_ms = int(time.time() * 1000)
        async with ratelane.RateLimiter() as limiter:
            limiter.restore(json.dumps(paused_snapshot(now_ms + 60_000, taken_at_ms=now_ms)))
            # The restored global pause (about 60 s) makes a 1 s deadline hopeless at once.
            with pytest.raises(ratelane.DeadlineExceededError):
                await limiter.run("GET", "/users/@me", lambda: asyncio.sleep(0), timeout=1.0)
            taken = json.loads(limiter.snapshot())
            assert taken["routes"][0]["bucket"] == "msgs"
            assert len(taken["global_pauses"]) == 1
            assert taken["global_pauses"][0]["until_ms"] >= now_ms + 59_000
            with pytest.raises(ratelane.SnapshotMalformedError):
                limiter.restore(json.dumps({**paused_snapshot(0), "windows": [{"bucket": "x"}]}))

    asyncio.run(main())
