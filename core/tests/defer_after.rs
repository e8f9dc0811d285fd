//! `defer_after`: a request whose predicted wait exceeds its budget fails at once with
//! `FailReason::Deferred { retry_at }` (the predicted send time) instead of waiting, at
//! enqueue and again while queued when new knowledge pushes its predicted send time past
//! `enqueued + defer_after`. All in virtual time.

use ratelane::sim::{BucketSpec, Outcome, RouteSpec, Server, ServerConfig, SimConfig, Simulation, StopReason};
use ratelane::{Config, FailReason, Limiter, MILLISECOND as MS, Nanos, Output, Request, Response, SECOND as S};

const CH1: &str = "/channels/100000000000000001/messages";

fn drain(l: &mut Limiter) -> Vec<Output> {
    let mut out = Vec::new();
    loop {
        match l.poll_output() {
            o @ (Output::WaitUntil(_) | Output::Idle) => {
                out.push(o);
                return out;
            }
            o => out.push(o),
        }
    }
}

/// Drains and asserts that nothing failed.
fn drain_checked(l: &mut Limiter) -> Vec<Output> {
    let out = drain(l);
    assert!(fails(&out).is_empty(), "{out:?}");
    out
}

fn fails(outputs: &[Output]) -> Vec<(u64, FailReason)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Fail(id, r) => Some((*id, r.clone())),
            _ => None,
        })
        .collect()
}

fn sends(outputs: &[Output]) -> Vec<u64> {
    outputs.iter().filter_map(|o| if let Output::Send(id) = o { Some(*id) } else { None }).collect()
}

fn limiter(f: impl FnOnce(&mut Config)) -> Limiter {
    let mut c = Config::default();
    f(&mut c);
    Limiter::new(c).expect("valid config")
}

fn post() -> Request {
    Request::new("POST", CH1)
}

/// Sends one request at 0 and answers it at 100 ms with its bucket spent for 5 s: the next
/// one can go at 5.1 s.
fn spent_bucket(l: &mut Limiter) {
    let id = l.enqueue(0, post()).unwrap();
    assert_eq!(sends(&drain(l)), vec![id]);
    let headers = [
        ("X-RateLimit-Limit", "1"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset-After", "5"),
        ("X-RateLimit-Bucket", "b1"),
    ];
    l.handle_response(100 * MS, id, &Response::new(200, &headers)).unwrap();
    drain(l);
}

#[test]
fn at_enqueue_it_fails_with_the_predicted_send_time_and_a_retry_then_goes() {
    let mut l = limiter(|_| {});
    spent_bucket(&mut l);
    let predicted = l.predict(S, &post()).unwrap().send_at;
    assert_eq!(predicted, 5100 * MS);

    let id = l.enqueue(S, post().defer_after(2 * S)).unwrap();
    let out = drain(&mut l);
    assert_eq!(fails(&out), vec![(id, FailReason::Deferred { retry_at: predicted })]);
    assert_eq!(FailReason::Deferred { retry_at: 1 }.code(), "deferred");
    assert_eq!((l.queued(), l.in_flight()), (0, 0), "a deferred request leaves nothing behind");

    // A budget that covers the wait queues it.
    let waits = l.enqueue(S, post().defer_after(5 * S)).unwrap();
    assert!(fails(&drain(&mut l)).is_empty());
    assert_eq!(l.queued(), 1);
    l.cancel(S, waits).unwrap();
    drain(&mut l);

    // The job queue enqueues it again at retry_at: it goes at once.
    let again = l.enqueue(predicted, post().defer_after(2 * S)).unwrap();
    assert_eq!(sends(&drain(&mut l)), vec![again]);
}

#[test]
fn a_budget_exactly_met_is_not_deferred() {
    let mut l = limiter(|_| {});
    spent_bucket(&mut l);
    // Predicted at 5.1 s; enqueued at 1.1 s with exactly 4 s of budget: it waits.
    let id = l.enqueue(1100 * MS, post().defer_after(4 * S)).unwrap();
    assert!(fails(&drain(&mut l)).is_empty());
    l.handle_timeout(5100 * MS);
    assert_eq!(sends(&drain(&mut l)), vec![id]);
}

#[test]
fn the_config_default_applies_and_a_request_overrides_it() {
    let mut l = limiter(|c| c.defer_after = Some(S));
    spent_bucket(&mut l);
    let plain = l.enqueue(S, post()).unwrap();
    assert_eq!(fails(&drain(&mut l)), vec![(plain, FailReason::Deferred { retry_at: 5100 * MS })]);
    let patient = l.enqueue(S, post().defer_after(10 * S)).unwrap();
    assert!(fails(&drain(&mut l)).is_empty());
    l.handle_timeout(5100 * MS);
    assert_eq!(sends(&drain(&mut l)), vec![patient]);
}

#[test]
fn defer_after_replaces_max_wait_and_the_deadline_wins_when_it_is_sooner_than_the_send() {
    let mut l = limiter(|c| c.max_wait = Some(3 * S));
    spent_bucket(&mut l);
    // Without defer_after: max_wait_exceeded, as before.
    let plain = l.enqueue(S, post()).unwrap();
    assert_eq!(fails(&drain(&mut l)), vec![(plain, FailReason::MaxWaitExceeded { predicted_wait: 4100 * MS })]);
    // With defer_after 10 s the budget is min(10 s, max_wait 3 s), and exceeding it defers.
    let deferred = l.enqueue(S, post().defer_after(10 * S)).unwrap();
    assert_eq!(fails(&drain(&mut l)), vec![(deferred, FailReason::Deferred { retry_at: 5100 * MS })]);
    // A deadline before the predicted send: deadline_exceeded, even though the deferral
    // budget (1 s) is shorter: a retry at 5.1 s would miss the deadline anyway.
    let hopeless = l.enqueue(S, post().defer_after(S).deadline(4 * S)).unwrap();
    assert_eq!(
        fails(&drain(&mut l)),
        vec![(hopeless, FailReason::DeadlineExceeded { predicted_send_at: Some(5100 * MS) })]
    );
    // A deadline after the predicted send: deferred.
    let later = l.enqueue(S, post().defer_after(S).deadline(6 * S)).unwrap();
    assert_eq!(fails(&drain(&mut l)), vec![(later, FailReason::Deferred { retry_at: 5100 * MS })]);
    // A deadline earlier than the deferral budget and met: queued.
    let fine = l.enqueue(S, post().defer_after(10 * S).deadline(6 * S)).unwrap();
    // (max_wait 3 s still caps it: 4.1 s of wait defers it.)
    assert_eq!(fails(&drain(&mut l)), vec![(fine, FailReason::Deferred { retry_at: 5100 * MS })]);
}

#[test]
fn a_global_429_while_queued_defers_at_once() {
    let mut l = limiter(|_| {});
    let pioneer = l.enqueue(0, post()).unwrap();
    let follower = l.enqueue(0, post().defer_after(5 * S)).unwrap();
    let patient = l.enqueue(0, post().defer_after(120 * S)).unwrap();
    assert_eq!(sends(&drain(&mut l)), vec![pioneer], "the others wait for the pioneer's headers");
    let headers = [("Retry-After", "60"), ("X-RateLimit-Global", "true"), ("X-RateLimit-Scope", "global")];
    let mut response = Response::new(429, &headers);
    response.body.retry_after = Some(60.0);
    response.body.global = Some(true);
    l.handle_response(100 * MS, pioneer, &response).unwrap();
    let out = drain(&mut l);
    let failed = fails(&out);
    assert_eq!(failed.len(), 1, "{out:?}");
    let (id, reason) = &failed[0];
    assert_eq!(*id, follower);
    let FailReason::Deferred { retry_at } = *reason else { panic!("{reason:?}") };
    assert!(retry_at >= 60 * S + 100 * MS, "after the pause: {retry_at}");
    assert!(retry_at > 5 * S, "past its budget");
    // The pioneer (re-queued, no budget) and the patient one wait; nothing else fails later,
    // and the deferred one is never sent.
    let mut sent = Vec::new();
    let mut t = 100 * MS;
    while t < 200 * S {
        t += 500 * MS;
        l.handle_timeout(t);
        let mut pending = sends(&drain_checked(&mut l));
        while let Some(id) = pending.pop() {
            sent.push(id);
            l.handle_response(t, id, &Response::new(200, &[])).unwrap();
            pending.extend(sends(&drain_checked(&mut l)));
        }
    }
    sent.sort_unstable();
    assert_eq!(sent, vec![pioneer, patient]);
}

#[test]
fn a_bucket_429_while_queued_defers_its_followers_with_the_new_prediction() {
    let mut l = limiter(|_| {});
    let pioneer = l.enqueue(0, post().defer_after(60 * S)).unwrap();
    let follower = l.enqueue(0, post().defer_after(10 * S)).unwrap();
    drain(&mut l);
    let headers = [
        ("Retry-After", "30"),
        ("X-RateLimit-Limit", "1"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset-After", "30"),
        ("X-RateLimit-Bucket", "b1"),
        ("X-RateLimit-Scope", "user"),
    ];
    l.handle_response(200 * MS, pioneer, &Response::new(429, &headers)).unwrap();
    let out = drain(&mut l);
    // The pioneer is re-queued (30.2 s is within its 60 s); its follower comes after it, one
    // window later (60.2 s), past its 10 s.
    assert_eq!(fails(&out), vec![(follower, FailReason::Deferred { retry_at: 60200 * MS })]);
    assert_eq!(l.queued(), 1);
}

#[test]
fn still_queued_when_the_budget_passes_it_is_deferred_one_ns_later() {
    let mut l = limiter(|_| {});
    let pioneer = l.enqueue(0, post()).unwrap();
    let follower = l.enqueue(500 * MS, post().defer_after(S)).unwrap();
    let out = drain(&mut l);
    assert_eq!(out.last(), Some(&Output::WaitUntil(1500 * MS + 1)));
    // At the budget's end it could still go (a send at 1.5 s is allowed).
    l.handle_timeout(1500 * MS);
    assert!(fails(&drain(&mut l)).is_empty());
    l.handle_timeout(1500 * MS + 1);
    let failed = fails(&drain(&mut l));
    assert_eq!(failed.len(), 1);
    let (id, reason) = &failed[0];
    assert_eq!(*id, follower);
    let FailReason::Deferred { retry_at } = *reason else { panic!("{reason:?}") };
    assert!(retry_at > 1500 * MS, "never in the past: {retry_at}");
    // The pioneer's answer comes later: the follower is gone, nothing else happens to it.
    l.handle_response(2 * S, pioneer, &Response::new(200, &[])).unwrap();
    assert!(sends(&drain(&mut l)).is_empty());
    assert!(l.cancel(2 * S, follower).is_err(), "it already ended");
}

/// Many requests with assorted budgets against a bucket of 3 per 2 s: each ends exactly once;
/// none is sent later than its budget; every deferral's retry time is no earlier than when it
/// failed, and a wait longer than its budget was in fact predicted.
#[test]
fn in_the_simulator_each_request_ends_once_and_none_waits_past_its_budget() {
    const MSG: &str = "POST /channels/:id/messages";
    for seed in 1..=8u64 {
        let server = ServerConfig::discord()
            .bucket("b", BucketSpec::fixed(3, 2 * S))
            .route(MSG, RouteSpec::bucket("b"));
        let mut s = Simulation::new(
            Limiter::new(Config::default()).unwrap(),
            Server::new(server),
            SimConfig::default().seed(seed),
        );
        let mut tickets = Vec::new();
        let mut x = seed;
        for i in 0..60u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let budget: Nanos = (x >> 33) % 12 * S;
            let at = i * 150 * MS;
            let request = Request::with_route("POST", "/channels/:id/messages", "1").defer_after(budget);
            tickets.push((s.enqueue_at(at, request), at, budget));
        }
        let report = s.run().expect("driver contract");
        assert_eq!(report.stop, StopReason::Finished, "seed {seed}: {:?}", report.unfinished());
        let mut deferred = 0;
        for &(t, at, budget) in &tickets {
            let record = report.record(t);
            match record.outcome.as_ref().expect("an outcome") {
                Outcome::Completed(status) => {
                    assert_eq!(*status, 200);
                    let first = record.sends.first().expect("sent").at;
                    assert!(first <= at + budget, "seed {seed}: sent at {first}, budget ends {}", at + budget);
                }
                Outcome::Failed(FailReason::Deferred { retry_at }) => {
                    deferred += 1;
                    let finished = record.finished_at.unwrap();
                    assert!(*retry_at >= finished);
                    assert!(*retry_at > at + budget, "seed {seed}: deferred though predicted in budget");
                    assert!(record.sends.is_empty(), "a deferred request was never sent");
                }
                other => panic!("seed {seed}: unexpected {other:?}"),
            }
        }
        assert!(deferred > 0, "seed {seed}: the scenario defers some");
        assert!(deferred < tickets.len(), "seed {seed}: and sends some");
    }
}
