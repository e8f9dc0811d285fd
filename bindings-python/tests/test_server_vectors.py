"""Replays every tests/vectors/server_*.json (GCRA, leaky bucket, fixed window) through the
Python binding: each step's decision, rendered headers and store counts must equal what the
Rust core recorded."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Union

import pytest

import ratelane
from conftest import VECTORS
from ratelane.server import Decision, FixedWindowStore, GcraStore, LeakyBucketStore, Scheduled

SERVER_FILES = sorted(VECTORS.glob("server_*.json"))
MS = 1_000_000

Store = Union[GcraStore, LeakyBucketStore, FixedWindowStore]


def test_there_are_server_vectors() -> None:
    assert {p.stem for p in SERVER_FILES} == {"server_gcra", "server_leaky_bucket", "server_fixed_window"}


def ms(config: Dict[str, Any], key: str) -> Any:
    return None if key not in config else config[key] * MS


def build(algorithm: str, config: Dict[str, Any]) -> Store:
    max_keys = config["max_keys"]
    if algorithm == "gcra":
        if "quota" in config:
            return GcraStore.per_window(config["quota"], ms(config, "window_ms"), max_keys)
        return GcraStore(ms(config, "interval_ms"), config["burst"], max_keys)
    if algorithm == "leaky_bucket":
        if "legacy" in config:
            legacy = config["legacy"]
            return LeakyBucketStore.from_legacy(
                max=legacy.get("max"),
                duration_ns=ms(legacy, "duration_ms"),
                min_interval_ns=ms(legacy, "min_interval_ms"),
                max_keys=max_keys,
            )
        return LeakyBucketStore(
            config["size"],
            ms(config, "drip_rate_ms"),
            config["drip_size"],
            max_keys,
            min_interval_ns=ms(config, "min_interval_ms"),
        )
    assert algorithm == "fixed_window"
    return FixedWindowStore(config["quota"], ms(config, "window_ms"), max_keys)


def decision_json(d: Decision, policy: str) -> Dict[str, Any]:
    def pairs(headers: List[Any]) -> List[List[str]]:
        return [[name, value] for name, value in headers]

    return {
        "allowed": d.allowed,
        "limit": d.limit,
        "remaining": d.remaining,
        "reset_after_ns": d.reset_after_ns,
        "clear_after_ns": d.clear_after_ns,
        "replenish_after_ns": d.replenish_after_ns,
        "window_ns": d.window_ns,
        "retry_after_s": d.retry_after_s,
        "x_ratelimit_headers": pairs(d.x_ratelimit_headers()),
        "ietf_headers": pairs(d.ietf_headers(policy)),
    }


def scheduled_json(s: Scheduled) -> Dict[str, Any]:
    return {"run_now": s.run_now, "release_at_ns": s.release_at_ns, "waiting": s.waiting}


def run_step(store: Any, step: Dict[str, Any], policy: str) -> Dict[str, Any]:
    now, key, op = step["at_ms"] * MS, step["key"], step["op"]
    outcome: Dict[str, Any]
    try:
        if op == "check" and "n" in step:
            outcome = decision_json(store.check_n(key, now, step["n"]), policy)
        elif op == "check" and "factor" in step:
            outcome = decision_json(store.check(key, now, step["factor"]), policy)
        elif op == "check":
            outcome = decision_json(store.check(key, now), policy)
        elif op == "schedule":
            outcome = scheduled_json(store.schedule(key, now))
        elif op == "release":
            outcome = {"released": store.release(key, now)}
        else:
            raise AssertionError(f"unknown op {op}")
    except ratelane.InsufficientCapacityError as exc:
        outcome = {"error": exc.code, "requested": exc.requested, "capacity": exc.capacity}
    except ratelane.RatelaneError as exc:
        outcome = {"error": exc.code}
    outcome["store_len"] = len(store)
    outcome["untracked"] = store.untracked
    return outcome


def cases() -> List[Any]:
    out = []
    for path in SERVER_FILES:
        vector = json.loads(path.read_text())
        for index, case in enumerate(vector["cases"]):
            out.append(pytest.param(vector["algorithm"], case, id=f"{path.stem}-{index}"))
    return out


@pytest.mark.parametrize("algorithm, case", cases())
def test_server_vector(algorithm: str, case: Dict[str, Any]) -> None:
    config = case["config"]
    if "expect_error" in case:
        with pytest.raises(ratelane.RatelaneError) as info:
            build(algorithm, config)
        assert info.value.code == case["expect_error"]
        return
    store = build(algorithm, config)
    for index, step in enumerate(case["steps"]):
        assert run_step(store, step, config["policy"]) == step["expect"], f"{case['name']}: step {index}"
