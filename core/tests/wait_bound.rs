//! One bound for every wait the engine takes from outside itself (issue 44, defect 3): a live
//! 429, a response's reset, the shared store's denial and a restored snapshot's pauses and
//! windows all pass `Config::bound_wait` (`max_server_wait`, one hour by default). Before, a
//! restored `host_pause` ten years ahead made `predict` answer ten years, `until_ms = 2^64 - 1`
//! gave `WaitUntil(u64::MAX)`, and a store denying for 2^53 - 1 microseconds left the request
//! pending past its `max_wait`.

use ratelane::shared::{OnUnavailable, ReservationAnswer, SharedConfig, SharedScope};
use ratelane::snapshot::Snapshot;
use ratelane::{Config, FailReason, Limiter, MILLISECOND, Nanos, Output, Request, Response, SECOND};

const HOUR: Nanos = 3600 * SECOND;
const WALL: u64 = 1_700_000_000_000;

/// Drains the outputs; returns them with the last (`WaitUntil` or `Idle`) last.
fn drain(l: &mut Limiter) -> Vec<Output> {
    let mut out = Vec::new();
    loop {
        let o = l.poll_output();
        let last = matches!(o, Output::WaitUntil(_) | Output::Idle);
        out.push(o);
        if last {
            return out;
        }
    }
}

fn snapshot(body: &str) -> Snapshot {
    let text = format!(
        r#"{{"format": "ratelane.snapshot", "version": 1, "taken_at_ms": {WALL}, "profile": "discord",
            "routes": [], "windows": [], "invalid_requests_ms": [], {body}}}"#
    );
    Snapshot::from_json(&text).expect("a valid snapshot")
}

fn get() -> Request {
    Request::new("GET", "/users/@me")
}

#[test]
fn a_host_pause_ten_years_ahead_holds_for_max_server_wait() {
    let ten_years_ms = 10 * 365 * 24 * 3600 * 1000u64;
    let mut l = Limiter::new(Config::default()).unwrap();
    let s = snapshot(&format!(r#""global_pauses": [], "host_pause": {{"until_ms": {}, "strikes": 1}}"#, WALL + ten_years_ms));
    l.restore(5 * SECOND, WALL, &s).unwrap();
    assert_eq!(drain(&mut l), [Output::Idle], "nothing waits yet");
    assert_eq!(l.predict(5 * SECOND, &get()).unwrap().send_at, 5 * SECOND + HOUR);
    // The default max_wait (none): the request waits, for the bound and no longer.
    l.enqueue(6 * SECOND, get()).unwrap();
    assert_eq!(drain(&mut l), [Output::WaitUntil(5 * SECOND + HOUR)]);
    l.handle_timeout(5 * SECOND + HOUR);
    assert_eq!(drain(&mut l), [Output::Send(1), Output::Idle]);
}

#[test]
fn a_pause_at_the_end_of_the_clock_is_clamped_too() {
    let mut l = Limiter::new(Config::default()).unwrap();
    let s = snapshot(r#""global_pauses": [{"identity": "", "until_ms": 18446744073709551615}], "host_pause": null"#);
    l.restore(0, WALL, &s).unwrap();
    assert_eq!(drain(&mut l), [Output::Idle]);
    l.enqueue(0, get()).unwrap();
    assert_eq!(drain(&mut l), [Output::WaitUntil(HOUR)]);
    // A smaller bound is the bound.
    let mut c = Config::default();
    c.max_server_wait = 90 * SECOND;
    let mut l = Limiter::new(c).unwrap();
    l.restore(0, WALL, &s).unwrap();
    assert_eq!(l.predict(0, &get()).unwrap().send_at, 90 * SECOND);
}

#[test]
fn a_restored_window_length_is_clamped() {
    let mut l = Limiter::new(Config::default()).unwrap();
    let text = format!(
        r#"{{"format": "ratelane.snapshot", "version": 1, "taken_at_ms": {WALL}, "profile": "discord",
            "routes": [{{"route": "GET /users/@me", "bucket": "b"}}],
            "windows": [{{"bucket": "b", "window_ns": 18446744073709551615}}],
            "global_pauses": [], "host_pause": null, "invalid_requests_ms": []}}"#
    );
    l.restore(0, WALL, &Snapshot::from_json(&text).unwrap()).unwrap();
    let back = l.snapshot(0, WALL);
    assert_eq!(back.windows[0].window_ns, HOUR, "{back:?}");
}

#[test]
fn a_live_retry_after_beyond_the_bound_is_clamped() {
    let mut l = Limiter::new(Config::default()).unwrap();
    let id = l.enqueue(0, get()).unwrap();
    drain(&mut l);
    let headers = [("Retry-After", "9999999999"), ("X-RateLimit-Scope", "user"), ("X-RateLimit-Remaining", "0"), ("X-RateLimit-Limit", "1")];
    l.handle_response(10 * MILLISECOND, id, &Response::new(429, &headers)).unwrap();
    let out = drain(&mut l);
    assert!(out.contains(&Output::WaitUntil(10 * MILLISECOND + HOUR)), "{out:?}");
    assert!(
        out.iter().any(|o| matches!(o, Output::Observe(ratelane::Observation::RateLimited { retry_after, .. }) if *retry_after == HOUR)),
        "the observation carries the clamped wait: {out:?}"
    );
}

fn shared(max_wait: Option<Nanos>) -> Limiter {
    let mut c = Config::default();
    c.shared = Some(SharedConfig::with_policy(OnUnavailable::FailOpen));
    c.max_wait = max_wait;
    Limiter::new(c).unwrap()
}

/// The store's `["denied", 9007199254740991, "global", 1]`, as the core reads it.
fn denied_forever(scope: SharedScope) -> ReservationAnswer {
    ReservationAnswer::Denied { retry_after: 9_007_199_254_740_991u64.saturating_mul(1000), scope, processes: Some(1) }
}

#[test]
fn a_store_denial_beyond_the_bound_meets_max_wait() {
    for scope in [SharedScope::Global, SharedScope::Edge, SharedScope::Route, SharedScope::Bucket] {
        let mut l = shared(Some(10 * SECOND));
        let id = l.enqueue(0, get()).unwrap();
        assert!(matches!(drain(&mut l)[0], Output::Reserve(_)));
        l.handle_reservation(MILLISECOND, id, denied_forever(scope)).unwrap();
        let out = drain(&mut l);
        let failed = out.iter().any(|o| matches!(o, Output::Fail(i, FailReason::MaxWaitExceeded { .. }) if *i == id));
        assert!(failed, "{scope:?}: the request fails its max_wait at once: {out:?}");
        assert_eq!(l.queued() + l.in_flight() + l.reserving(), 0, "{scope:?}");
    }
}

#[test]
fn a_store_denial_beyond_the_bound_waits_the_bound() {
    for scope in [SharedScope::Global, SharedScope::Edge, SharedScope::Route, SharedScope::Bucket] {
        let mut l = shared(None);
        let id = l.enqueue(0, get()).unwrap();
        drain(&mut l);
        l.handle_reservation(MILLISECOND, id, denied_forever(scope)).unwrap();
        let out = drain(&mut l);
        let wake = match out.last() {
            Some(Output::WaitUntil(t)) => *t,
            other => panic!("{scope:?}: {other:?} in {out:?}"),
        };
        assert!(wake <= MILLISECOND + HOUR, "{scope:?}: waits {wake} ns");
        assert!(l.predict(MILLISECOND, &get()).unwrap().send_at <= MILLISECOND + HOUR, "{scope:?}");
        // It is reserved again once the hold ends.
        l.handle_timeout(MILLISECOND + HOUR);
        let out = drain(&mut l);
        assert!(matches!(out[0], Output::Reserve(ref r) if r.id == id), "{scope:?}: {out:?}");
    }
}

#[test]
fn min_rate_limit_wait_above_the_bound_is_a_config_error() {
    let mut c = Config::default();
    c.min_rate_limit_wait = 2 * HOUR;
    assert_eq!(Limiter::new(c).unwrap_err().code(), "invalid_config");
}
