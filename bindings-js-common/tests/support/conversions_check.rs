// What the conversion fuzzers check, shared by the proptest fuzzer
// (bindings-js-common/tests/fuzz_conversions.rs, in the test command) and the cargo-fuzz
// target `conversions` (core/fuzz, longer runs): the JS cores' reading of JS numbers and
// strings (`ratelane_js_common`), at every edge (NaN, +-0, +-Infinity, fractions, negatives,
// 2^53 and beyond, 1e300), alone and driving a shared-mode limiter.
//
// A conversion either refuses the value with a short message, or gives exactly the value the
// JS caller meant: an id or a status is the same number (never a truncation into another
// request's id: `cancel(now, 1.5)` once cancelled request 1), a time the number less its
// fraction. What passes drives the core, which answers with its own typed error or acts, and
// every request still ends exactly once.
#[allow(dead_code)]
pub mod conversions_check {
    use ratelane::shared::{OnUnavailable, SharedConfig};
    use ratelane::{Config, Disposition, Limiter, Output, Response};
    use ratelane_js_common::{self as common, MAX_SAFE, RequestParts, server};
    use std::collections::BTreeMap;

    /// Numbers at every edge of the conversions.
    pub const EDGES: [f64; 24] = [
        0.0, -0.0, 1.0, 1.5, 0.999_999, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 99.0, 100.0, 200.0, 200.5,
        429.0, 599.0, 999.0, 1000.0, 65_536.0, 4_294_967_295.0, 4_294_967_296.0, MAX_SAFE, MAX_SAFE + 1.0,
        1.152_921_504_606_847e18, 1e300,
    ];

    fn in_range(v: f64) -> bool {
        v.is_finite() && (0.0..=MAX_SAFE).contains(&v)
    }

    /// Every single-number conversion of `v`.
    pub fn number(v: f64) {
        match common::whole(v, "x") {
            Ok(n) => {
                assert!(in_range(v), "whole({v}) passed");
                assert_eq!(n as f64, v.trunc(), "whole({v})");
            }
            Err(m) => {
                assert!(!in_range(v), "whole({v}) refused");
                assert!(m.len() < 200);
            }
        }
        match common::id(v, "id") {
            Ok(n) => {
                assert_eq!(n as f64, v, "id({v}) is not the number given");
                assert!(v.fract() == 0.0 && in_range(v));
            }
            Err(m) => {
                assert!(!(v.fract() == 0.0 && in_range(v)), "id({v}) refused");
                assert!(m.len() < 200);
            }
        }
        match common::status(v) {
            Ok(s) => {
                assert_eq!(f64::from(s), v, "status({v})");
                assert!(Response::STATUSES.contains(&s));
            }
            Err(m) => {
                assert!(!(v.fract() == 0.0 && (100.0..=999.0).contains(&v)), "status({v}) refused");
                assert!(m.len() < 200);
            }
        }
        if let Ok(n) = server::count(v, "n") {
            assert_eq!(f64::from(n), v);
        }
        let _ = server::op("check_n", Some(v));
        let _ = server::op("check_scaled", Some(v));
        let _ = server::limit("gcra", [Some(v), Some(v), None, None]);
        let _ = server::limit("leakyBucket", [Some(v), Some(1e9), Some(v), Some(v)]);
        let _ = server::limit("legacy", [Some(v), Some(v), Some(v), None]);
        let _ = server::headers(Some("p"), &[1.0, v, v, v, v, v, v]);
        let _ = server::now_text(&v.to_string());
    }

    /// One input to [`drive`].
    #[derive(Debug, Clone)]
    pub enum Step {
        /// Enqueue with these numbers as deadline, defer-after, priority and a cost.
        Enqueue { path: u8, numbers: [f64; 4], text: String },
        /// Answer the request whose id JS passes as `id` with status `status`.
        Respond { id: f64, status: f64, retry_after: f64 },
        /// Answer a reservation: `kind` 0 granted, 1 denied, 2 unavailable, 3 garbage.
        Reserve { id: f64, kind: u8, numbers: [f64; 4], scope: String },
        /// Cancel the request JS names `id`.
        Cancel { id: f64 },
        /// `readsBody`-like: the status alone.
        Status { status: f64 },
        /// Time passes (ms, as JS gives it).
        Advance { ms: f64 },
    }

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum State {
        Queued,
        Reserving,
        InFlight,
    }

    fn drain(l: &mut Limiter, live: &mut BTreeMap<u64, State>) {
        for _ in 0..100_000 {
            match l.poll_output() {
                Output::Send(id) => assert!(matches!(live.insert(id, State::InFlight), Some(State::Queued | State::Reserving))),
                Output::Reserve(r) => assert_eq!(live.insert(r.id, State::Reserving), Some(State::Queued)),
                Output::Fail(id, _) => assert!(live.remove(&id).is_some(), "fail of a request not live"),
                Output::Share(_) | Output::Observe(_) => {}
                Output::WaitUntil(_) | Output::Idle => return,
            }
        }
        panic!("outputs never drained");
    }

    /// Drives a shared-mode limiter with the steps, every JS value through the conversions.
    pub fn drive(steps: &[Step]) {
        let mut config = Config::default();
        config.shared = Some(SharedConfig::with_policy(OnUnavailable::FailOpen));
        config.global_limit = 5;
        let mut l = Limiter::new(config).unwrap();
        let mut live: BTreeMap<u64, State> = BTreeMap::new();
        let mut now = 0u64;
        let typed = |e: ratelane::Error| assert!(ratelane::Error::ALL_CODES.contains(&e.code()), "{e:?}");
        for step in steps {
            match step {
                Step::Enqueue { path, numbers: [deadline, defer, priority, cost], text } => {
                    let path = match path % 4 {
                        0 => "/channels/100000000000000001/messages".to_string(),
                        1 => format!("/webhooks/1/{text}"),
                        2 => text.clone(),
                        _ => "/users/@me".to_string(),
                    };
                    let parts = RequestParts {
                        method: "POST".into(),
                        path,
                        identity: Some(text.chars().take(8).collect()),
                        deadline_ns: deadline.is_finite().then(|| (now as f64) + deadline.abs()),
                        defer_after_ns: Some(*defer),
                        priority: Some(*priority),
                        cost_names: Some(vec!["tokens".into()]),
                        cost_values: Some(vec![*cost]),
                        ..RequestParts::default()
                    };
                    match parts.request() {
                        Ok(request) => match l.enqueue(now, request) {
                            Ok(id) => {
                                live.insert(id, State::Queued);
                            }
                            Err(e) => typed(e),
                        },
                        Err(m) => assert!(m.len() < 300),
                    }
                }
                Step::Respond { id, status, retry_after } => {
                    let (Ok(id), Ok(status)) = (common::id(*id, "id"), common::status(*status)) else { continue };
                    let body = common::body(Some(*retry_after), None, None, None, None, None).unwrap();
                    let response = Response { status, headers: &[], body, wall_clock_ms: None };
                    match l.handle_response(now, id, &response) {
                        Ok(Disposition::Complete) => assert_eq!(live.remove(&id), Some(State::InFlight)),
                        Ok(_) => assert_eq!(live.insert(id, State::Queued), Some(State::InFlight)),
                        Err(e) => {
                            typed(e);
                            assert_ne!(live.get(&id), Some(&State::InFlight), "an in-flight request refused its answer");
                        }
                    }
                }
                Step::Reserve { id, kind, numbers: [processes, leased, store_us, retry], scope } => {
                    let Ok(id) = common::id(*id, "id") else { continue };
                    let kind = ["granted", "denied", "unavailable", "nonsense"][usize::from(*kind % 4)];
                    let scope = if scope.is_empty() { "global" } else { scope.as_str() };
                    match common::answer(kind, Some(*processes), Some(*leased), Some(*store_us), Some(*retry), Some(scope)) {
                        Ok(answer) => match l.handle_reservation(now, id, answer) {
                            Ok(()) => {
                                if live.get(&id) == Some(&State::Reserving) {
                                    live.insert(id, State::Queued);
                                }
                            }
                            Err(e) => typed(e),
                        },
                        Err(m) => assert!(m.len() < 300),
                    }
                }
                Step::Cancel { id } => {
                    let Ok(id) = common::id(*id, "id") else { continue };
                    match l.cancel(now, id) {
                        Ok(()) => assert!(live.remove(&id).is_some(), "cancelled a request not live"),
                        Err(e) => typed(e),
                    }
                }
                Step::Status { status } => number(*status),
                Step::Advance { ms } => {
                    if let Ok(ns) = common::whole(ms * 1e6, "nowNs") {
                        now = now.max(ns);
                    }
                    l.handle_timeout(now);
                }
            }
            drain(&mut l, &mut live);
            assert_eq!(l.in_flight(), live.values().filter(|s| **s == State::InFlight).count());
            assert_eq!(l.reserving(), live.values().filter(|s| **s == State::Reserving).count());
            assert_eq!(l.queued(), live.values().filter(|s| **s == State::Queued).count());
        }
    }
}
