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
            elif "processes" in step:
                limiter.handle_reservation(
                    now, step["id"], answer, processes=step["processes"], leased=step.get("leased")
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
    vector = json.loads(path.read_text())
    assert vector["kind"] == "client"
    limiter = ratelane.Limiter(vector["config"])
    # The binding parses the config exactly as the core wrote it.
    assert json.loads(limiter.config_json()) == vector["config"]
    for index, step in enumerate(vector["steps"]):
        where = f"{path.name} step {index} ({step['op']} at {step['at_ns']})"
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
