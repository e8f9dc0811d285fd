"""A Hypothesis fuzzer for what crosses from Python into the native module (issue 44).

Every argument of the sans-IO ``Limiter``, the server-side stores and the Redis reply readers
is drawn at every edge: the values the API takes, and ints beyond 64 bits, negative ints,
floats (NaN, infinities, -0.0, fractions), bools, ``None``, strings with lone surrogates,
bytes, lists, dicts, objects whose ``__index__`` raises, replies nested deep or long. A call
either works or raises a ``RatelaneError`` with a documented code (``InvalidArgumentError``
for a Python value of the wrong type or range) and changes nothing; never ``TypeError``,
``OverflowError``, ``UnicodeEncodeError``, ``RecursionError`` or a panic. Every request still
ends exactly once.

Examples are random on every run; a failure prints the ``@reproduce_failure`` blob that
replays it. Bounded: a few hundred examples, a few seconds (``RATELANE_FUZZ_EXAMPLES``
overrides the count).
"""

from __future__ import annotations

import fractions
import math
import os
from typing import Any, List, Set

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ratelane
from ratelane.server import FixedWindowStore, GcraStore, LeakyBucketStore

SECOND = 1_000_000_000
MS = 1_000_000
# RATELANE_FUZZ_EXAMPLES runs more (the longer runs in BENCHMARKS.md, issue 44).
PROFILE = settings(
    max_examples=int(os.environ.get("RATELANE_FUZZ_EXAMPLES", "200")),
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
CODES = set(ratelane.ERROR_CODES) | {"invalid_argument", "insufficient_capacity"}


class BadIndex:
    """An object that pretends to be an int and fails when asked."""

    def __index__(self) -> int:
        raise ZeroDivisionError("not an int after all")

    def __int__(self) -> int:
        raise ZeroDivisionError("not an int after all")


garbage = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.5, 1.5, 1e300, True, False, None, "", "1", "\ud800", b"1",
                     [], {}, (), [1], {"a": 1}, BadIndex(), fractions.Fraction(1, 2), object()]),
    st.integers(-(2**200), -1),
    st.integers(2**64, 2**200),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)


def edge(valid: Any) -> Any:
    """Mostly ``valid``, sometimes anything at all."""
    return st.one_of(valid, valid, valid, garbage)


ns = edge(st.integers(0, 10**12))
rid = edge(st.integers(0, 20))
status = edge(st.sampled_from([200, 204, 401, 403, 429, 500, 100, 999]))
path = edge(st.sampled_from(["/channels/1/messages", "/webhooks/1/tok", "/interactions/2/t/callback", "/users/@me", "https://x/y"]))
method = edge(st.sampled_from(["GET", "POST", "PATCH"]))
headers = edge(st.lists(st.tuples(st.sampled_from(["X-RateLimit-Remaining", "Retry-After", "X-RateLimit-Bucket"]),
                                  st.sampled_from(["0", "1", "x", "1e309"])), max_size=3))
option = st.sampled_from(["major", "identity", "deadline_ns", "defer_after_ns", "priority", "idempotent", "global_exempt",
                          "sub_limit", "body_keys", "costs"])
options = st.dictionaries(option, garbage | st.sampled_from([1, "x", ["k"], {"tokens": 5}]), max_size=3)

operation = st.one_of(
    st.tuples(st.just("enqueue"), ns, method, path, options),
    st.tuples(st.just("response"), ns, rid, status, headers, edge(st.none() | st.floats(0, 10)), edge(st.none() | st.booleans())),
    st.tuples(st.just("failure"), ns, rid, edge(st.sampled_from(["not_sent", "maybe_sent"]))),
    st.tuples(st.just("written"), ns, rid),
    st.tuples(st.just("cancel"), ns, rid),
    st.tuples(st.just("reservation"), ns, rid, edge(st.sampled_from(["granted", "denied", "unavailable"])),
              edge(st.none() | st.integers(0, 10**15)), edge(st.none() | st.sampled_from(["global", "route", "bucket"])),
              edge(st.none() | st.integers(0, 5))),
    st.tuples(st.just("timeout"), ns),
    st.tuples(st.just("predict"), ns, method, path, options),
    st.tuples(st.just("reads_body"), status),
    st.tuples(st.just("invalid_requests"), ns),
    st.tuples(st.just("snapshot"), ns, ns),
)


def typed(exc: BaseException) -> None:
    assert isinstance(exc, ratelane.RatelaneError), f"{type(exc).__name__}: {exc}"
    assert exc.code in CODES, exc


@PROFILE
@given(st.lists(operation, max_size=40), st.booleans())
def test_any_argument_is_taken_or_refused_with_a_typed_error(ops: List[Any], shared: bool) -> None:
    limiter = ratelane.Limiter({"shared": {}} if shared else {})
    live: Set[int] = set()
    in_flight: Set[int] = set()
    reserving: Set[int] = set()

    def drain() -> None:
        for output in limiter.drain():
            if isinstance(output, ratelane.Send):
                assert output.id in live
                reserving.discard(output.id)
                in_flight.add(output.id)
            elif isinstance(output, ratelane.Reserve):
                assert output.id in live
                reserving.add(output.id)
            elif isinstance(output, ratelane.Fail):
                assert output.id in live, output
                live.discard(output.id)
                in_flight.discard(output.id)
                reserving.discard(output.id)

    for op in ops:
        kind = op[0]
        before = (limiter.queued, limiter.in_flight, limiter.reserving)
        try:
            if kind == "enqueue":
                _, now, m, p, opts = op
                live.add(limiter.enqueue(now, m, p, **opts))
            elif kind == "response":
                _, now, i, s, h, retry_after, global_ = op
                d = limiter.handle_response(now, i, s, h, retry_after=retry_after, global_=global_)
                in_flight.discard(i)
                if d == "complete":
                    live.discard(i)
            elif kind == "failure":
                limiter.handle_failure(op[1], op[2], op[3])
                in_flight.discard(op[2])
            elif kind == "written":
                limiter.handle_written(op[1], op[2])
            elif kind == "cancel":
                limiter.cancel(op[1], op[2])
                for s in (live, in_flight, reserving):
                    s.discard(op[2])
            elif kind == "reservation":
                _, now, i, answer, retry, scope, processes = op
                limiter.handle_reservation(now, i, answer, retry_after_ns=retry, scope=scope, processes=processes)
                reserving.discard(i)
            elif kind == "timeout":
                limiter.handle_timeout(op[1])
            elif kind == "predict":
                _, now, m, p, opts = op
                assert isinstance(limiter.predict(now, m, p, **opts), int)
            elif kind == "reads_body":
                assert isinstance(limiter.reads_body(op[1]), bool)
            elif kind == "invalid_requests":
                assert isinstance(limiter.invalid_requests(op[1]), int)
            elif kind == "snapshot":
                assert limiter.snapshot(op[1], op[2]).startswith("{")
        except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
            typed(exc)
            assert (limiter.queued, limiter.in_flight, limiter.reserving) == before, f"{kind} refused, yet changed the counts"
        drain()
        assert limiter.in_flight == len(in_flight), (kind, op)
        assert limiter.reserving == len(reserving), (kind, op)
        assert limiter.queued == len(live) - len(in_flight) - len(reserving), (kind, op)


store_op = st.one_of(
    st.tuples(st.just("check"), edge(st.text(max_size=4)), ns),
    st.tuples(st.just("check_n"), edge(st.text(max_size=4)), ns, edge(st.integers(0, 20))),
    st.tuples(st.just("contains"), edge(st.text(max_size=4))),
)
store_kind = st.sampled_from(["gcra", "fixed", "leaky"])
param = edge(st.integers(1, 10**10))


@PROFILE
@given(store_kind, param, param, edge(st.integers(0, 1000)), st.lists(store_op, max_size=20))
def test_server_side_stores_take_or_refuse_any_argument(kind: str, a: Any, b: Any, max_keys: Any, ops: List[Any]) -> None:
    try:
        if kind == "gcra":
            store: Any = GcraStore(a, b, max_keys)
        elif kind == "fixed":
            store = FixedWindowStore(a, b, max_keys)
        else:
            store = LeakyBucketStore(a, b, 1, max_keys)
    except Exception as exc:  # noqa: BLE001
        typed(exc)
        return
    for op in ops:
        try:
            if op[0] == "check":
                store.check(op[1], op[2])
            elif op[0] == "check_n":
                if isinstance(store, GcraStore):
                    store.check_n(op[1], op[2], op[3])
            else:
                assert isinstance(op[1] in store, bool)
        except Exception as exc:  # noqa: BLE001
            typed(exc)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


reply_leaf = st.one_of(st.integers(-(2**70), 2**70), st.binary(max_size=12), st.text(max_size=12), st.none(), st.booleans(),
                       st.floats(), st.sampled_from([b"granted", b"denied", b"decision", b"released", b"scheduled",
                                                     b"global", b"route", b"recorded", "granted"]))
reply = st.one_of(
    st.recursive(reply_leaf, lambda inner: st.lists(inner, max_size=12) | st.tuples(inner, inner), max_leaves=30),
    st.sampled_from([nested(10_000), [b"decision", nested(5_000)], list(range(100_000)), [b"granted"] * 17, {b"k": 1}]),
)


@PROFILE
@given(reply)
def test_any_store_reply_is_read_or_refused_as_a_bad_reply(value: Any) -> None:
    limits = [ratelane._core.Limit("gcra", interval_ns=10**6, burst=3), ratelane._core.Limit("fixed_window", quota=3, window_ns=10**9)]
    for read in [lambda: ratelane._core.store_answer(value)] + [
        (lambda limit=limit, name=name: limit.read_reply(name, value))
        for limit in limits
        for name in ("check", "check_n", "schedule", "release")
        if not (limit.script == "GCRA_LUA" and name in ("schedule", "release"))
    ]:
        try:
            read()
        except Exception as exc:  # noqa: BLE001
            typed_reply(exc)


def typed_reply(exc: BaseException) -> None:
    assert isinstance(exc, (ratelane.RedisBadReplyError, ratelane.InsufficientCapacityError, ratelane.InvalidArgumentError)), (
        f"{type(exc).__name__}: {exc}"
    )
    assert len(str(exc)) < 400
