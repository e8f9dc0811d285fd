"""Property tests (Hypothesis) over the sans-IO API, in virtual time.

1. Random Discord-like servers and workloads run through the simulator: every request ends
   exactly once, no known limit is exceeded, FIFO per bucket holds, the global limit holds
   at the server, deadlines are honoured.
2. Random input sequences straight into ``Limiter`` (including hostile headers and caller
   mistakes): only documented exceptions, every request id ends at most once, ``Send`` only
   for live requests, and ``drain`` always ends with ``WaitUntil``/``Idle``.

Examples are random on every run (the properties must hold for any); a failure prints the
``@reproduce_failure`` blob that replays it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Set

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ratelane
from ratelane.sim import Simulation

SECOND = 1_000_000_000
MS = 1_000_000

PROFILE = settings(
    max_examples=100, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)

bucket = st.fixed_dictionaries(
    {
        "limit": st.integers(1, 6),
        "window_ns": st.integers(1, 5).map(lambda s: s * SECOND),
        "kind": st.sampled_from(["fixed", "sliding"]),
    }
)


@st.composite
def scenario(draw: Any) -> Dict[str, Any]:
    buckets = {"msg": draw(bucket), "edit": draw(bucket)}
    routes: Dict[str, Any] = {
        "POST /channels/:id/messages": {"bucket": "msg"},
        "PATCH /channels/:id/messages/:id": {"bucket": "edit"},
    }
    if draw(st.booleans()):
        routes["PATCH /channels/:id"] = {
            "bucket": "edit",
            "sub_limit": {"limit": 1, "window_ns": 3 * SECOND},
        }
    server = {
        "buckets": buckets,
        "routes": routes,
        "global": {"limit": draw(st.integers(3, 50)), "window_ns": SECOND},
        "error_rate": draw(st.sampled_from([0.0, 0.0, 0.05])),
        "seed": draw(st.integers(0, 2**32)),
    }
    network = {
        "seed": draw(st.integers(0, 2**32)),
        "uplink": {"base_ns": 10 * MS, "jitter_ns": draw(st.integers(0, 80)) * MS},
        "downlink": {"base_ns": 10 * MS, "jitter_ns": draw(st.integers(0, 80)) * MS},
        "drop_chance": draw(st.sampled_from([0.0, 0.0, 0.03])),
    }
    config = {"global_limit": server["global"]["limit"], "max_error_retries": 5}
    requests = draw(
        st.lists(
            st.tuples(
                st.integers(0, 3000),  # enqueue time, ms
                st.sampled_from(
                    [
                        ("POST", "/channels/:id/messages"),
                        ("PATCH", "/channels/:id/messages/:id"),
                        ("PATCH", "/channels/:id"),
                    ]
                ),
                st.sampled_from(["1", "2", "3"]),  # channel
                st.one_of(st.none(), st.integers(1, 20)),  # deadline, seconds after enqueue
            ),
            min_size=1,
            max_size=40,
        )
    )
    return {"server": server, "network": network, "config": config, "requests": requests}


@PROFILE
@given(scenario())
def test_simulated_discord_invariants(case: Dict[str, Any]) -> None:
    sim = Simulation(case["config"], case["server"], case["network"])
    for at_ms, (method, template), channel, deadline_s in case["requests"]:
        at = at_ms * MS
        sim.enqueue_at(
            at,
            method,
            template,
            major=channel,
            deadline_ns=None if deadline_s is None else at + deadline_s * SECOND,
        )
    report = sim.run()
    assert report["stop"] == "finished", report["stop"]
    assert report["unfinished"] == 0
    assert report["known_limit_violations"] == 0
    assert report["fifo_violations"] == 0
    assert report["deadline_violations"] == 0
    assert report["sends_after_close"] == 0
    assert report["max_global_in_window"].get("", 0) <= case["server"]["global"]["limit"]
    outcomes = [r["outcome"] for r in report["requests"]]
    assert all(o is not None for o in outcomes)
    assert report["succeeded"] + report["cancelled"] + sum(report["failed"].values()) <= len(outcomes)
    for code in report["failed"]:
        assert code in ratelane.FAIL_CODES


@PROFILE
@given(
    st.integers(1, 30),
    st.integers(0, 2**32),
    st.floats(0.0, 0.5),
)
def test_close_fails_everything_queued_exactly_once(count: int, seed: int, close_at_s: float) -> None:
    sim = Simulation(
        {},
        {
            "buckets": {"msg": {"limit": 2, "window_ns": SECOND}},
            "routes": {"POST /channels/:id/messages": {"bucket": "msg"}},
            "seed": seed,
        },
        {"seed": seed},
    )
    for _ in range(count):
        sim.enqueue_at(0, "POST", "/channels/:id/messages", major="9")
    sim.close_at(int(close_at_s * SECOND))
    report = sim.run()
    assert report["unfinished"] == 0 and report["sends_after_close"] == 0
    kinds = [r["outcome"]["kind"] for r in report["requests"]]
    assert set(kinds) <= {"completed", "failed"}
    assert set(report["failed"]) <= {"closed"}


header_names = st.sampled_from(
    [
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset-After",
        "X-RateLimit-Reset",
        "X-RateLimit-Bucket",
        "X-RateLimit-Scope",
        "X-RateLimit-Global",
        "Retry-After",
        "Date",
        "x-ratelimit-remaining",
    ]
)
header_values = st.one_of(
    st.sampled_from(["0", "1", "5", "-1", "NaN", "1e309", "0.5", "abc", "", "user", "shared", "global", "true"]),
    st.text(max_size=12),
)
operation = st.one_of(
    st.tuples(st.just("enqueue"), st.sampled_from(["/channels/1/messages", "/channels/2/messages", "/guilds/3", "/users/@me", "x"]), st.sampled_from(["GET", "POST", ""])),
    st.tuples(st.just("response"), st.integers(0, 12), st.sampled_from([200, 204, 401, 403, 429, 500, 503]), st.lists(st.tuples(header_names, header_values), max_size=6), st.one_of(st.none(), st.floats(-1, 100), st.just(float("nan")), st.just(float("inf")))),
    st.tuples(st.just("failure"), st.integers(0, 12), st.sampled_from(["not_sent", "maybe_sent"])),
    st.tuples(st.just("cancel"), st.integers(0, 12)),
    st.tuples(st.just("timeout"), st.integers(0, 5000)),
    st.tuples(st.just("close"),),
)


@settings(max_examples=300, deadline=None, print_blob=True)
@given(st.lists(st.tuples(st.integers(0, 2000), operation), max_size=40))
def test_random_inputs_keep_the_contract(ops: List[Any]) -> None:
    limiter = ratelane.Limiter(max_wait_ns=60 * SECOND)
    now = 0
    live: Set[int] = set()  # enqueued, no outcome yet
    in_flight: Set[int] = set()
    ended: Set[int] = set()

    def drain() -> None:
        outputs = limiter.drain()
        assert isinstance(outputs[-1], (ratelane.WaitUntil, ratelane.Idle))
        for output in outputs[:-1]:
            assert not isinstance(output, (ratelane.WaitUntil, ratelane.Idle))
            if isinstance(output, ratelane.Send):
                assert output.id in live and output.id not in in_flight
                in_flight.add(output.id)
            elif isinstance(output, ratelane.Fail):
                assert output.id in live, output
                assert output.code in ratelane.FAIL_CODES
                assert isinstance(output.exception(), ratelane.FAIL_CLASSES[output.code])
                live.discard(output.id)
                in_flight.discard(output.id)
                ended.add(output.id)

    for step, op in ops:
        now += step * MS
        kind = op[0]
        try:
            if kind == "enqueue":
                rid = limiter.enqueue(now, op[2], op[1])
                assert rid not in live and rid not in ended
                live.add(rid)
            elif kind == "response":
                rid = op[1]
                d = limiter.handle_response(now, rid, op[2], op[3], retry_after=op[4])
                assert rid in in_flight
                in_flight.discard(rid)
                if d == "complete":
                    live.discard(rid)
                    ended.add(rid)
            elif kind == "failure":
                rid = op[1]
                limiter.handle_failure(now, rid, op[2])
                assert rid in in_flight
                in_flight.discard(rid)
            elif kind == "cancel":
                limiter.cancel(now, op[1])
                assert op[1] in live
                live.discard(op[1])
                in_flight.discard(op[1])
                ended.add(op[1])
            elif kind == "timeout":
                limiter.handle_timeout(now + op[1] * MS)
                now += op[1] * MS
            elif kind == "close":
                limiter.close(now)
        except ratelane.RatelaneError as exc:
            # Only caller mistakes, each with its documented code.
            assert exc.code in ratelane.ERROR_CODES, exc
            if isinstance(exc, (ratelane.UnknownRequestError, ratelane.InvalidStateError)):
                assert kind in ("response", "failure", "cancel")
            elif isinstance(exc, ratelane.InvalidRequestError):
                assert kind == "enqueue"
            elif isinstance(exc, ratelane.LimiterClosedError):
                assert kind == "enqueue" and limiter.is_closed
        drain()
        assert limiter.in_flight == len(in_flight)
        assert limiter.queued == len(live) - len(in_flight)
