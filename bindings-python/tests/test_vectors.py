"""Replays every tests/vectors/client_*.json through the Python binding: the same inputs must
give exactly the outputs, results and counts the Rust core recorded."""

from __future__ import annotations

import json
from typing import Any, Dict

import pytest

import ratelane
from conftest import VECTORS, output_json, request_kwargs

CLIENT_FILES = sorted(VECTORS.glob("client_*.json"))


def test_there_are_vectors() -> None:
    assert len(CLIENT_FILES) > 20
    # Shared mode (Reserve, Share*, handle_reservation) is replayed too.
    shared = [p for p in CLIENT_FILES if "shared" in json.loads(p.read_text())["config"]]
    assert len(shared) >= 8


def run_step(limiter: ratelane.Limiter, step: Dict[str, Any]) -> Dict[str, Any]:
    op = step["op"]
    now = step["at_ns"]
    try:
        if op == "enqueue":
            r = step["request"]
            return {"id": limiter.enqueue(now, r["method"], r["path"], **request_kwargs(r))}
        if op == "predict":
            r = step["request"]
            return {"send_at_ns": limiter.predict(now, r["method"], r["path"], **request_kwargs(r))}
        if op == "response":
            body = step.get("body") or {}
            d = limiter.handle_response(
                now,
                step["id"],
                step["status"],
                step["headers"],
                retry_after=body.get("retry_after"),
                global_=body.get("global"),
                wall_clock_ms=step.get("wall_clock_ms"),
                cost=body.get("cost"),
                errors=body.get("errors"),
                usage=body.get("usage"),
            )
            return {"disposition": d}
        if op == "failure":
            return {"disposition": limiter.handle_failure(now, step["id"], step["failure"])}
        if op == "written":
            limiter.handle_written(now, step["id"])
            return {"ok": True}
        if op == "cancel":
            limiter.cancel(now, step["id"])
            return {"ok": True}
        if op == "timeout":
            limiter.handle_timeout(now)
            return {"ok": True}
        if op == "close":
            limiter.close(now)
            return {"ok": True}
        if op == "snapshot":
            return {"snapshot": json.loads(limiter.snapshot(now, step["wall_clock_ms"]))}
        if op == "restore":
            limiter.restore(now, step["wall_clock_ms"], json.dumps(step["snapshot"]))
            return {"ok": True}
        if op == "reservation":
            answer = step["answer"]
            if answer == "denied":
                limiter.handle_reservation(
                    now,
                    step["id"],
                    "denied",
                    retry_after_ns=step["retry_after_ns"],
                    scope=step["scope"],
                    processes=step.get("processes"),
                )
            elif "processes" in step or "store_time_ns" in step:
                limiter.handle_reservation(
                    now,
                    step["id"],
                    answer,
                    processes=step.get("processes"),
                    leased=step.get("leased"),
                    store_time_ns=step.get("store_time_ns"),
                )
            else:
                limiter.handle_reservation(now, step["id"], answer)
            return {"ok": True}
    except ratelane.RatelaneError as exc:
        assert exc.code in ratelane.ERROR_CODES
        assert isinstance(exc, ratelane.ERROR_CLASSES[exc.code])
        return {"error": exc.code}
    raise AssertionError(f"unknown op {op}")


@pytest.mark.parametrize("path", CLIENT_FILES, ids=lambda p: p.stem)
def test_client_vector(path: Any) -> None:
    replay(json.loads(path.read_text()), path.name)


def replay(vector: Dict[str, Any], name: str) -> None:
    assert vector["kind"] == "client"
    limiter = ratelane.Limiter(vector["config"])
    # The binding parses the config exactly as the core wrote it.
    assert json.loads(limiter.config_json()) == vector["config"]
    for index, step in enumerate(vector["steps"]):
        where = f"{name} step {index} ({step['op']} at {step['at_ns']})"
        if step["op"] == "restart":
            # A restarted process: a new limiter of the same configuration.
            limiter = ratelane.Limiter(vector["config"])
            result: Dict[str, Any] = {"ok": True}
        else:
            result = run_step(limiter, step)
        assert result == step["result"], where
        getter = step["op"] in ("predict", "snapshot")
        outputs = [] if getter else [output_json(o) for o in limiter.drain()]
        assert outputs == step["outputs"], where
        assert limiter.queued == step["queued"], where
        assert limiter.in_flight == step["in_flight"], where
        if "shared" in vector["config"]:
            assert limiter.reserving == step["reserving"], where


COST_FILES = {
    "client_costs.json",
    "client_costs_anthropic.json",
    "client_costs_insufficient.json",
    "client_costs_insufficient_429.json",
    "client_costs_predict.json",
}


def test_the_cost_vectors_are_replayed() -> None:
    """The vectors of costs (issue 17 item 1: requests' ``costs``, answers' ``body.usage``, the
    ``insufficient_capacity`` fail with ``dimension``/``cost``/``limit``) are among the files
    ``test_client_vector`` replays."""
    assert COST_FILES <= {p.name for p in CLIENT_FILES}


def test_the_body_usage_reaches_the_core() -> None:
    """An answer's ``usage`` teaches the margin: 1000 estimated tokens that cost 3000 make the
    next estimate of 3000 a charge of 9000, more than the 8000 left; without the usage it is
    charged at the prior (2 before any answer settles: 6000) and goes."""
    headers = [
        ("x-ratelimit-limit-requests", "60"), ("x-ratelimit-remaining-requests", "59"),
        ("x-ratelimit-reset-requests", "1s"), ("x-ratelimit-limit-tokens", "10000"),
        ("x-ratelimit-remaining-tokens", "8000"), ("x-ratelimit-reset-tokens", "6s"),
    ]
    sent = []
    for usage in ({"total_tokens": 3000}, None):
        limiter = ratelane.Limiter(profile="openai")
        first = limiter.enqueue(0, "POST", "/v1/chat/completions", costs={"tokens": 1000})
        limiter.drain()
        limiter.handle_response(100_000_000, first, 200, headers, usage=usage)
        limiter.drain()
        limiter.enqueue(100_000_000, "POST", "/v1/chat/completions", costs={"tokens": 3000})
        sent.append([output_json(o) for o in limiter.drain()])
    assert sent[0] == [{"wait_until_ns": 6_100_000_000}]
    assert sent[1] == [{"send": 2}, {"idle": True}]
