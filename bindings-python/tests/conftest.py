"""Shared helpers for the ratelane test suite."""

from __future__ import annotations

import pathlib
from typing import Any, Dict

import ratelane

VECTORS = pathlib.Path(__file__).resolve().parents[2] / "tests" / "vectors"


def output_json(output: Any) -> Dict[str, Any]:
    """An output in the vector files' JSON form (tests/vectors/README.md)."""
    if isinstance(output, ratelane.Send):
        return {"send": output.id}
    if isinstance(output, ratelane.Fail):
        d: Dict[str, Any] = {"fail": output.id, "code": output.code}
        if output.code == "deadline_exceeded":
            d["predicted_send_at_ns"] = output.predicted_send_at_ns
        elif output.code == "max_wait_exceeded":
            d["predicted_wait_ns"] = output.predicted_wait_ns
        elif output.code == "deferred":
            d["retry_at_ns"] = output.retry_at_ns
        elif output.code in ("retries_exhausted", "network_error"):
            d["attempts"] = output.attempts
        elif output.code == "insufficient_capacity":
            d["dimension"] = output.dimension
            d["cost"] = output.cost
            d["limit"] = output.limit
        return d
    if isinstance(output, ratelane.RateLimited):
        return {
            "observe": "rate_limited",
            "id": output.id,
            "scope": output.scope,
            "retry_after_ns": output.retry_after_ns,
        }
    if isinstance(output, ratelane.BucketLearned):
        return {"observe": "bucket_learned", "route": output.route, "bucket": output.bucket}
    if isinstance(output, ratelane.InvalidRequestWarning):
        return {"observe": "invalid_request_warning", "count": output.count, "limit": output.limit}
    if isinstance(output, ratelane.Reserve):
        d = {
            "reserve": output.id,
            **{
                k: getattr(output, k)
                for k in ("identity", "route", "major", "bucket", "counts_global", "global_limit",
                          "global_want", "global_window_ns", "margin_ns", "invalid_limit", "invalid_window_ns")
            },
        }
        # After a store outage only: the files hold these when set.
        if output.processes_since_ns is not None:
            d["processes_since_ns"] = output.processes_since_ns
        if output.reporting:
            d["reporting"] = True
        if output.unrecorded_ns:
            d["unrecorded_ns"] = list(output.unrecorded_ns)
        if output.granted_ns:
            d["granted_ns"] = list(output.granted_ns)
        return d
    if isinstance(output, ratelane.ShareBucket):
        return {"share": "bucket", **fields(output, "id", "identity", "route", "major", "bucket", "unlimited",
                                            "limit", "remaining", "reset_after_ns", "window_ns")}
    if isinstance(output, ratelane.ShareRelease):
        return {"share": "release", **fields(output, "id", "identity", "route", "major", "bucket", "reached",
                                             "window_ns")}
    if isinstance(output, ratelane.ShareHold):
        return {"share": "hold", **fields(output, "scope", "identity", "route", "major", "bucket",
                                          "retry_after_ns")}
    if isinstance(output, ratelane.ShareInvalid):
        return {"share": "invalid", "id": output.id, "window_ns": output.window_ns}
    if isinstance(output, ratelane.StoreUnavailable):
        return {"observe": "store_unavailable", "id": output.id, "retry_at_ns": output.retry_at_ns}
    if isinstance(output, ratelane.StoreRecovered):
        return {"observe": "store_recovered"}
    if isinstance(output, ratelane.WaitUntil):
        return {"wait_until_ns": output.at_ns}
    if isinstance(output, ratelane.Idle):
        return {"idle": True}
    raise AssertionError(f"unknown output {output!r}")


def fields(output: Any, *names: str) -> Dict[str, Any]:
    return {name: getattr(output, name) for name in names}


def request_kwargs(request: Dict[str, Any]) -> Dict[str, Any]:
    """A vector's request object as keyword arguments of enqueue/predict."""
    kwargs = {k: request[k] for k in ("major", "identity", "priority", "idempotent", "global_exempt", "sub_limit", "body_keys") if k in request}
    if "deadline_ns" in request:
        kwargs["deadline_ns"] = request["deadline_ns"]
    if "defer_after_ns" in request:
        kwargs["defer_after_ns"] = request["defer_after_ns"]
    if "costs" in request:
        kwargs["costs"] = request["costs"]
    if "model" in request:
        kwargs["model"] = request["model"]
    return kwargs
