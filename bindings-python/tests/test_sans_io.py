"""The sans-IO API: construction, outputs, errors and their codes."""

from __future__ import annotations

import json
import sys

import pytest

import ratelane
import ratelane.redis

CHANNEL = "/channels/100000000000000001/messages"
HEADERS = [
    ("X-RateLimit-Limit", "2"),
    ("X-RateLimit-Remaining", "1"),
    ("X-RateLimit-Reset-After", "1.000"),
    ("X-RateLimit-Bucket", "abc"),
]
# The same bucket spent: a 429 with these is the bucket's, which holds the route (one with a
# slot left is a hidden sub-limit's, which holds only the refused request until it meets a second).
SPENT = [(k, "0" if k == "X-RateLimit-Remaining" else v) for k, v in HEADERS]


def test_settings_are_the_core_json_keys() -> None:
    limiter = ratelane.Limiter(global_limit=40, max_wait_ns=5_000_000_000)
    config = json.loads(limiter.config_json())
    assert config["global_limit"] == 40
    assert config["max_wait_ns"] == 5_000_000_000
    # A mapping and keywords merge; keywords win.
    limiter = ratelane.Limiter({"global_limit": 10, "profile": "github"}, global_limit=11)
    config = json.loads(limiter.config_json())
    assert (config["global_limit"], config["profile"]) == (11, "github")


@pytest.mark.parametrize(
    "settings, needle",
    [
        ({"globl_limit": 1}, "globl_limit"),
        ({"global_limit": -1}, "global_limit"),
        ({"global_limit": "50"}, "global_limit"),
        ({"profile": "slack"}, "slack"),
        ({"backoff_base_ns": 0}, "backoff_base"),
        ({"max_wait_ns": float("nan")}, "JSON"),
    ],
)
def test_bad_settings_raise_invalid_config(settings: dict, needle: str) -> None:
    with pytest.raises(ratelane.InvalidConfigError) as info:
        ratelane.Limiter(**settings)
    assert info.value.code == "invalid_config"
    assert needle in str(info.value)
    assert isinstance(info.value, ValueError)


def test_request_life_and_outputs() -> None:
    limiter = ratelane.Limiter()
    rid = limiter.enqueue(0, "POST", CHANNEL)
    assert limiter.drain() == [ratelane.Send(rid), ratelane.Idle()]
    assert limiter.poll_output() is ratelane.Idle()  # one shared instance
    second = limiter.enqueue(0, "POST", CHANNEL)
    assert limiter.drain() == [ratelane.Idle()]  # waits for the pioneer's headers
    assert (limiter.queued, limiter.in_flight) == (1, 1)
    assert limiter.handle_response(50_000_000, rid, 200, HEADERS) == "complete"
    outputs = limiter.drain()
    assert isinstance(outputs[0], ratelane.BucketLearned)
    assert (outputs[0].route, outputs[0].bucket) == ("POST /channels/:id/messages", "abc")
    assert ratelane.Send(second) in outputs
    assert isinstance(outputs[-1], (ratelane.WaitUntil, ratelane.Idle))
    assert limiter.buckets >= 1 and not limiter.is_closed


def test_invalid_requests_counts_the_window_and_changes_nothing() -> None:
    limiter = ratelane.Limiter(invalid_request_window_ns=600 * 10**9)
    assert limiter.invalid_requests(0) == 0
    rid = limiter.enqueue(0, "GET", "/users/@me")
    limiter.drain()
    assert limiter.handle_response(1000, rid, 403, {}) == "complete"
    limiter.drain()
    assert limiter.invalid_requests(1000) == 1
    assert limiter.invalid_requests(600 * 10**9 + 999) == 1
    assert limiter.invalid_requests(600 * 10**9 + 1000) == 0
    assert limiter.invalid_requests(2000) == 1


def test_outputs_support_match() -> None:
    if sys.version_info < (3, 10):
        pytest.skip("match needs Python 3.10")
    namespace: dict = {}
    exec(
        "def kind(o):\n"
        "    match o:\n"
        "        case ratelane.Send(i): return ('send', i)\n"
        "        case ratelane.WaitUntil(t): return ('wait', t)\n"
        "        case ratelane.Idle(): return ('idle',)\n"
        "        case ratelane.Fail(i, code): return ('fail', i, code)\n",
        {"ratelane": ratelane},
        namespace,
    )
    kind = namespace["kind"]
    assert kind(ratelane.Send(3)) == ("send", 3)
    assert kind(ratelane.WaitUntil(7)) == ("wait", 7)
    assert kind(ratelane.Idle()) == ("idle",)
    limiter = ratelane.Limiter()
    limiter.close(0)
    limiter = ratelane.Limiter(max_wait_ns=1)
    first = limiter.enqueue(0, "POST", CHANNEL)
    limiter.drain()
    limiter.handle_response(0, first, 429, [("Retry-After", "5"), ("X-RateLimit-Scope", "user")] + SPENT)
    limiter.drain()
    rid = limiter.enqueue(1, "POST", CHANNEL)
    fails = [o for o in limiter.drain() if isinstance(o, ratelane.Fail) and o.id == rid]
    assert [kind(f) for f in fails] == [("fail", rid, "max_wait_exceeded")]


def test_fail_outputs_carry_their_exception() -> None:
    limiter = ratelane.Limiter(max_wait_ns=1_000_000)
    first = limiter.enqueue(0, "POST", CHANNEL)
    limiter.drain()
    limiter.handle_response(
        10, first, 429, SPENT + [("Retry-After", "3"), ("X-RateLimit-Scope", "user")], retry_after=2.5
    )
    limiter.drain()
    rid = limiter.enqueue(20, "POST", CHANNEL)
    (fail,) = [o for o in limiter.drain() if isinstance(o, ratelane.Fail) and o.id == rid]
    assert (fail.id, fail.code) == (rid, "max_wait_exceeded")
    assert fail.predicted_wait_ns and fail.predicted_wait_ns > 1_000_000
    assert "max_wait" in fail.message
    exc = fail.exception()
    assert type(exc) is ratelane.MaxWaitExceededError
    assert isinstance(exc, ratelane.RateLimitError) and isinstance(exc, ratelane.RatelaneError)
    assert (exc.code, exc.request_id, exc.predicted_wait_ns) == ("max_wait_exceeded", rid, fail.predicted_wait_ns)
    assert exc.predicted_wait == pytest.approx(fail.predicted_wait_ns / 1e9)


def test_outputs_are_data() -> None:
    """Every output but Idle has a constructor, fields, ==, __match_args__ (every field, in
    order) and a repr from its fields; Send and WaitUntil are variants of one native enum, the
    rarer ones Python classes (ratelane._outputs)."""
    send = ratelane.Send(3)
    assert type(send) is ratelane._core.Output.Send and isinstance(send, ratelane._core.Output)
    assert type(send).__name__ == "Send"
    assert repr(send) == "Send(id=3)" and repr(ratelane.StoreRecovered()) == "StoreRecovered()"
    assert send == ratelane.Send(id=3) and send != ratelane.Send(4) and send != ratelane.WaitUntil(3)
    assert ratelane.Fail.__match_args__[:2] == ("id", "code")
    assert ratelane.ShareRelease.__match_args__[:2] == ("id", "reached")
    assert ratelane.ShareHold.__match_args__[:2] == ("scope", "retry_after_ns")
    hold = ratelane.ShareHold("global", 5, "", "POST /x", "", None)
    assert repr(hold) == "ShareHold(scope='global', retry_after_ns=5, identity='', route='POST /x', major='', bucket=None)"
    assert hold == ratelane.ShareHold(**{n: getattr(hold, n) for n in ratelane.ShareHold.__match_args__})
    assert hold != ratelane.ShareHold("route", 5, "", "POST /x", "", None) and hold != send
    with pytest.raises(AttributeError):
        hold.scope = "route"  # type: ignore[misc]
    for wrong in ((), ("global", 5, "", "POST /x", "", None, 1)):
        with pytest.raises(TypeError):
            ratelane.ShareHold(*wrong)
    with pytest.raises(TypeError):
        ratelane.ShareHold("global", 5, "", "POST /x", "", None, scope="route")
    limiter = ratelane.Limiter(max_wait_ns=1)
    first = limiter.enqueue(0, "POST", CHANNEL)
    limiter.drain()
    limiter.handle_response(0, first, 429, [("Retry-After", "5"), ("X-RateLimit-Scope", "user")] + SPENT)
    limiter.drain()
    rid = limiter.enqueue(1, "POST", CHANNEL)
    (fail,) = [o for o in limiter.drain() if isinstance(o, ratelane.Fail)]
    fields = [getattr(fail, name) for name in ratelane.Fail.__match_args__]
    assert fields[:2] == [rid, "max_wait_exceeded"] and ratelane.Fail(*fields) == fail
    assert repr(fail) == "Fail(" + ", ".join(f"{n}={v!r}" for n, v in zip(ratelane.Fail.__match_args__, fields)) + ")"
    assert type(ratelane.Fail(*fields).exception()) is ratelane.MaxWaitExceededError
    with pytest.raises(TypeError):
        send.exception()


def test_shared_mode_outputs_carry_their_store_operation() -> None:
    """A drained Reserve or Share* output carries the store operation the core encoded as it
    was drained; its fields, read from that operation when first asked, make an equal output
    whose operation (encoded from the attributes) is the same."""
    limiter = ratelane.Limiter(shared={})
    rid = limiter.enqueue(0, "POST", CHANNEL)
    (reserve, _idle) = limiter.drain()
    assert type(reserve) is ratelane.Reserve and reserve.id == rid
    copy = ratelane.Reserve(*[getattr(reserve, n) for n in ratelane.Reserve.__match_args__])
    assert copy == reserve and repr(copy) == repr(reserve) and copy.route == "POST /channels/:id/messages"
    assert ratelane.redis.store_op(copy).args == ratelane.redis.store_op(reserve).args
    limiter.handle_reservation(1, rid, "granted")
    limiter.drain()
    limiter.handle_response(2, rid, 200, HEADERS)
    (share,) = [o for o in limiter.drain() if isinstance(o, ratelane.ShareBucket)]
    assert type(share) is ratelane.ShareBucket and (share.id, share.limit, share.remaining) == (rid, 2, 1)
    fields = {n: getattr(share, n) for n in ratelane.ShareBucket.__match_args__}
    assert ratelane.redis.store_op(ratelane.ShareBucket(**fields)).args == ratelane.redis.store_op(share).args
    with pytest.raises(AttributeError):
        share.nothing  # noqa: B018


def test_deferred_fail_carries_retry_at_and_its_exception() -> None:
    import datetime

    limiter = ratelane.Limiter(defer_after_ns=1_000_000_000)
    assert json.loads(limiter.config_json())["defer_after_ns"] == 1_000_000_000
    first = limiter.enqueue(0, "POST", CHANNEL)
    limiter.drain()
    limiter.handle_response(
        10, first, 429, SPENT + [("Retry-After", "3"), ("X-RateLimit-Scope", "user")], retry_after=3.0
    )
    (requeued,) = [o for o in limiter.drain() if isinstance(o, ratelane.Fail)]
    assert (requeued.id, requeued.code) == (first, "deferred")
    assert requeued.retry_at_ns == 3_000_000_010
    assert requeued.predicted_wait_ns is None and requeued.predicted_send_at_ns is None
    # The per-request budget overrides the default: 5 s covers the wait, 0.5 s does not.
    waits = limiter.enqueue(20, "POST", CHANNEL, defer_after_ns=5_000_000_000)
    assert not [o for o in limiter.drain() if isinstance(o, ratelane.Fail)]
    rid = limiter.enqueue(20, "POST", CHANNEL, defer_after_ns=500_000_000)
    (fail,) = [o for o in limiter.drain() if isinstance(o, ratelane.Fail)]
    assert fail.id == rid and fail.code == "deferred" and "defer_after" in fail.message
    assert fail.retry_at_ns == 3_000_000_010  # the bucket (limit 2) has room for both then
    exc = fail.exception()
    assert type(exc) is ratelane.DeferredError and isinstance(exc, ratelane.RateLimitError)
    assert (exc.code, exc.request_id, exc.retry_at_ns) == ("deferred", rid, fail.retry_at_ns)
    assert exc.retry_at_wall is None  # the sans-IO core has no clock
    exc.set_clocks(20, 1_700_000_000.0)
    assert exc.retry_after == pytest.approx((fail.retry_at_ns - 20) / 1e9)
    assert exc.retry_at_unix == pytest.approx(1_700_000_000.0 + exc.retry_after)
    assert exc.retry_at_wall == datetime.datetime.fromtimestamp(exc.retry_at_unix, tz=datetime.timezone.utc)
    assert exc.retry_at == pytest.approx(fail.retry_at_ns / 1e9)
    limiter.cancel(30, waits)
    for bad in (-1, 1.5, "1", float("nan")):
        with pytest.raises(ratelane.InvalidArgumentError):
            limiter.enqueue(40, "POST", CHANNEL, defer_after_ns=bad)  # type: ignore[arg-type]
    with pytest.raises(ratelane.InvalidConfigError):
        ratelane.Limiter(defer_after_ns=-1)


def test_close_fails_queued_requests_with_closed() -> None:
    limiter = ratelane.Limiter()
    first = limiter.enqueue(0, "POST", CHANNEL)
    queued = [limiter.enqueue(0, "POST", CHANNEL) for _ in range(3)]
    limiter.drain()
    limiter.close(1)
    fails = [o for o in limiter.drain() if isinstance(o, ratelane.Fail)]
    assert [f.id for f in fails] == queued and {f.code for f in fails} == {"closed"}
    assert all(type(f.exception()) is ratelane.ClosedError for f in fails)
    with pytest.raises(ratelane.LimiterClosedError) as info:
        limiter.enqueue(2, "GET", "/users/@me")
    assert info.value.code == "limiter_closed" and isinstance(info.value, RuntimeError)
    # The request in flight still takes its answer.
    assert limiter.handle_response(3, first, 200, HEADERS) == "complete"


def test_caller_errors_have_codes_and_classes() -> None:
    limiter = ratelane.Limiter()
    with pytest.raises(ratelane.UnknownRequestError) as unknown:
        limiter.cancel(0, 42)
    assert (unknown.value.code, unknown.value.request_id) == ("unknown_request", 42)
    assert isinstance(unknown.value, LookupError)
    rid = limiter.enqueue(0, "POST", CHANNEL)
    limiter.enqueue(0, "POST", CHANNEL)
    second = rid + 1
    limiter.drain()
    with pytest.raises(ratelane.InvalidStateError) as state:
        limiter.handle_response(0, second, 200, [])
    assert state.value.code == "invalid_state" and state.value.request_id == second
    with pytest.raises(ratelane.InvalidRequestError) as bad:
        limiter.enqueue(0, "", CHANNEL)
    assert bad.value.code == "invalid_request" and isinstance(bad.value, ValueError)


@pytest.mark.parametrize(
    "call",
    [
        lambda l: l.enqueue(-1, "GET", "/x"),
        lambda l: l.enqueue(1.5, "GET", "/x"),
        lambda l: l.enqueue(0, 3, "/x"),
        lambda l: l.enqueue(0, "GET", "/x", priority=2**40),
        lambda l: l.enqueue(0, "GET", "/x", idempotent="yes"),
        lambda l: l.handle_response(0, 1, 99, []),
        lambda l: l.handle_response(0, 1, 200, [("a", 1)]),
        lambda l: l.handle_response(0, 1, 200, [("a",)]),
        lambda l: l.handle_response(0, 1, 200, 5),
        lambda l: l.handle_response(0, 1, 200, [], retry_after="soon"),
        lambda l: l.handle_failure(0, 1, "lost"),
        lambda l: l.cancel(0, -3),
    ],
)
def test_wrong_python_values_raise_invalid_argument(call) -> None:  # type: ignore[no-untyped-def]
    limiter = ratelane.Limiter()
    limiter.enqueue(0, "GET", "/users/@me")
    limiter.drain()
    with pytest.raises(ratelane.InvalidArgumentError) as info:
        call(limiter)
    assert info.value.code == "invalid_argument"
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_request_options_are_keywords_read_once_for_every_call() -> None:
    # enqueue, predict and Simulation.enqueue_at read one set of keyword options (one reader
    # in the native module); help() shows them, an unknown one is Python's TypeError, and a
    # positional one is refused as for any keyword-only parameter.
    import inspect

    from ratelane import _core

    limiter = ratelane.Limiter()
    simulation = _core.Simulation()
    for call in (limiter.enqueue, limiter.predict, simulation.enqueue_at):
        signature = inspect.signature(call)
        assert list(signature.parameters)[3:] == [
            "major", "identity", "deadline_ns", "defer_after_ns", "priority", "idempotent",
            "global_exempt", "sub_limit", "body_keys", "costs", "model",
        ]
        assert signature.parameters["priority"].kind is inspect.Parameter.KEYWORD_ONLY
        with pytest.raises(TypeError, match=f"^{call.__name__}\\(\\) got an unexpected keyword argument 'deadline'$"):
            call(0, "GET", "/x", deadline=5)
        with pytest.raises(TypeError):
            call(0, "GET", "/x", None)  # type: ignore[misc]
        with pytest.raises(ratelane.InvalidArgumentError, match="priority must be a 32-bit int"):
            call(0, "GET", "/x", priority=2**40)
    # Every option reaches the request: an identity of its own, a deadline already past.
    assert limiter.predict(7, "POST", CHANNEL, identity="b", priority=-1, idempotent=True) == 7
    rid = limiter.enqueue(0, "POST", CHANNEL, identity="b", deadline_ns=0, body_keys=["name"], costs={})
    assert isinstance(rid, int)


def test_headers_in_every_shape() -> None:
    for shape in (
        HEADERS,
        tuple(HEADERS),
        dict(HEADERS),
        [list(h) for h in HEADERS],
        iter(HEADERS),
        (h for h in HEADERS),
    ):
        limiter = ratelane.Limiter()
        rid = limiter.enqueue(0, "POST", CHANNEL)
        limiter.drain()
        assert limiter.handle_response(1, rid, 200, shape) == "complete"
        assert any(isinstance(o, ratelane.BucketLearned) for o in limiter.drain())


def test_non_ascii_header_values_are_tolerated() -> None:
    limiter = ratelane.Limiter()
    rid = limiter.enqueue(0, "POST", CHANNEL)
    limiter.drain()
    headers = [("X-RateLimit-Bucket", "bücket-✓"), ("X-RateLimit-Remaining", "ünf")]
    assert limiter.handle_response(1, rid, 200, headers) == "complete"
    with pytest.raises(ratelane.InvalidArgumentError):
        limiter.handle_response(1, rid, 200, [("X-RateLimit-Bucket", "\ud800")])


def test_predict_and_profiles() -> None:
    limiter = ratelane.Limiter(profile="ietf")
    assert limiter.predict(5, "GET", "/repos/1/issues") == 5
    assert json.loads(limiter.config_json())["global_limit"] == 0


def test_every_code_has_a_class() -> None:
    assert set(ratelane.FAIL_CODES) == set(ratelane.FAIL_CLASSES)
    assert set(ratelane.ERROR_CODES) <= set(ratelane.ERROR_CLASSES)
    for code, cls in {**ratelane.FAIL_CLASSES, **ratelane.ERROR_CLASSES}.items():
        assert cls.code == code
        assert issubclass(cls, ratelane.RatelaneError)
    for cls in ratelane.FAIL_CLASSES.values():
        assert issubclass(cls, ratelane.RateLimitError)


def test_simulator_runs_in_virtual_time() -> None:
    from ratelane.sim import Simulation

    sim = Simulation(
        {},
        {
            "buckets": {"msg": {"limit": 5, "window_ns": 5_000_000_000}},
            "routes": {"POST /channels/:id/messages": {"bucket": "msg"}},
        },
        {"seed": 7},
    )
    tickets = [sim.enqueue_at(0, "POST", "/channels/:id/messages", major="1") for _ in range(40)]
    report = sim.run()
    assert report["stop"] == "finished"
    assert report["succeeded"] == len(tickets)
    assert report["count_429"] == 0
    assert report["makespan_ns"] > 30_000_000_000  # 8 windows of 5 s, in milliseconds of real time
    assert report["known_limit_violations"] == 0 and report["fifo_violations"] == 0


def test_simulator_settings_are_checked() -> None:
    from ratelane.sim import Server, Simulation

    with pytest.raises(ratelane.InvalidConfigError, match="not in buckets"):
        Server({"routes": {"GET /x": {"bucket": "nope"}}})
    with pytest.raises(ratelane.InvalidConfigError):
        Simulation(network={"latency": 3})
    with pytest.raises(ratelane.InvalidArgumentError):
        Simulation().script_send(0, 0, "deliver")


def test_sim_server_answers_like_discord() -> None:
    from ratelane.sim import Server

    server = Server(
        buckets={"msg": {"limit": 1, "window_ns": 1_000_000_000}},
        routes={"POST /channels/:id/messages": {"bucket": "msg"}},
    )
    ok = server.handle(0, "POST", CHANNEL)
    assert ok.status == 200 and ok.header("x-ratelimit-bucket") == "msg"
    limited = server.handle(1, "POST", CHANNEL)
    assert limited.status == 429 and limited.retry_after and limited.global_ is False
    assert json.loads(limited.body_text)["retry_after"] == pytest.approx(limited.retry_after)
    assert server.count_429() == 1
