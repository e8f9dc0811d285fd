//! What the engine remembers about a bucket when routes move between buckets, and what a
//! request sent across a window's reset counts for: small scenarios driven by hand against the
//! engine (and the shared store), each the root cause of a property-test failure found with a
//! fresh seed (the full cases are in `properties.proptest-regressions` and
//! `shared_mode.proptest-regressions`).

use ratelane::shared::{MemoryStore, Reservation, ReservationAnswer, SharedConfig, SharedUpdate};
use ratelane::{Config, Disposition, Limiter, MILLISECOND, Nanos, Output, Request, RequestId, Response, SECOND};

const MS: Nanos = MILLISECOND;

fn limiter() -> Limiter {
    let mut c = Config::default();
    c.route_groups = Vec::new();
    Limiter::new(c).unwrap()
}

/// Drains the outputs: the ids sent, in order.
fn drain(l: &mut Limiter) -> Vec<RequestId> {
    let mut sent = Vec::new();
    loop {
        match l.poll_output() {
            Output::Send(id) => sent.push(id),
            Output::WaitUntil(_) | Output::Idle => return sent,
            _ => {}
        }
    }
}

/// Advances through the limiter's timers (at most until `limit`) until it sends something:
/// when and what.
fn next_send(l: &mut Limiter, mut now: Nanos, limit: Nanos) -> Option<(Nanos, Vec<RequestId>)> {
    loop {
        let sent = drain(l);
        if !sent.is_empty() {
            return Some((now, sent));
        }
        // `drain` consumed the WaitUntil: ask again (nothing new is queued, so it repeats it).
        match l.poll_output() {
            Output::WaitUntil(t) if t <= limit => {
                now = t.max(now);
                l.handle_timeout(now);
            }
            _ => return None,
        }
    }
}

fn secs(ns: Nanos) -> String {
    format!("{}.{:03}", ns / SECOND, (ns % SECOND) / MS)
}

/// Answers `id` with `status` and Discord's headers for bucket `hash`.
#[allow(clippy::too_many_arguments)]
fn answer(l: &mut Limiter, now: Nanos, id: RequestId, status: u16, hash: &str, limit: u32, remaining: u32, reset_after: Nanos) -> Disposition {
    let (limit, remaining, reset_after) = (limit.to_string(), remaining.to_string(), secs(reset_after));
    let headers = [
        ("X-RateLimit-Bucket", hash),
        ("X-RateLimit-Limit", limit.as_str()),
        ("X-RateLimit-Remaining", remaining.as_str()),
        ("X-RateLimit-Reset-After", reset_after.as_str()),
    ];
    l.handle_response(now, id, &Response::new(status, &headers)).unwrap()
}

fn enqueue(l: &mut Limiter, now: Nanos, method: &str, template: &str, major: &str) -> RequestId {
    l.enqueue(now, Request::with_route(method, template, major)).unwrap()
}

/// Properties case `be596d…`: a route first seen after its bucket's window length was learned
/// (under another route) probes in its own queue; when the answer names the bucket, that queue
/// becomes the bucket's queue and must take the learned length. Else a header-less answer (a
/// 5xx) in a window it opens is counted only until a reset estimated from what the 429 told,
/// far shorter than the window, and the retry meets the server's window: a 429 on a known
/// bucket.
#[test]
fn a_route_queue_that_learns_its_bucket_takes_the_buckets_window_length() {
    let mut l = limiter();
    // Route a teaches bucket b: 1 per 2 s.
    let a = enqueue(&mut l, 0, "POST", "/a/:id", "0");
    assert_eq!(drain(&mut l), [a]);
    assert_eq!(answer(&mut l, MS, a, 200, "b", 1, 0, 2 * SECOND), Disposition::Complete);
    // Route c, unknown so far, on another major parameter: its pioneer meets a window of b
    // that some other request opened (it ends in 200 ms).
    let c = enqueue(&mut l, 100 * MS, "GET", "/c/:id", "1");
    assert_eq!(drain(&mut l), [c]);
    assert_eq!(answer(&mut l, 101 * MS, c, 429, "b", 1, 0, 200 * MS), Disposition::Retry);
    let (second, sent) = next_send(&mut l, 101 * MS, 10 * SECOND).expect("retried after the reset");
    assert_eq!(sent, [c]);
    // The retry opens the server's next window (2 s); its answer is a 502 without headers.
    let d = l.handle_response(second + MS, c, &Response::new(502, &[])).unwrap();
    assert_eq!(d, Disposition::Retry);
    let (third, _) = next_send(&mut l, second + MS, 10 * SECOND).expect("retried");
    assert!(
        third >= second + 2 * SECOND,
        "the 502's slot counts for the bucket's learned window (2 s): sent at {} s, retried at {} s",
        secs(second),
        secs(third)
    );
}

/// Properties case `20b75a…`: the server moves route a to a new bucket. The old bucket's queue
/// keeps its state for the routes still in it (route c); only route a's requests move. Before
/// the fix the whole queue moved (it held only route a's requests at that moment), and route
/// c's next request started from an unknown bucket: its 5xx was not counted, and the retry met
/// the server's window.
#[test]
fn a_route_moved_to_another_bucket_leaves_the_old_buckets_state_to_its_other_routes() {
    let mut l = limiter();
    // Routes a and c share bucket b, 1 per 2 s (a learned on major 2, c on major 1).
    let a2 = enqueue(&mut l, 0, "POST", "/a/:id", "2");
    let c1 = enqueue(&mut l, 0, "GET", "/c/:id", "1");
    assert_eq!(drain(&mut l), [a2, c1]);
    answer(&mut l, MS, a2, 200, "b", 1, 0, 2 * SECOND);
    answer(&mut l, MS, c1, 200, "b", 1, 0, 2 * SECOND);
    // After the window, a request of route a on major 1 goes to b's queue; the server counts
    // it in a new bucket b2 and says so.
    let a1 = enqueue(&mut l, 2100 * MS, "POST", "/a/:id", "1");
    assert_eq!(drain(&mut l), [a1]);
    answer(&mut l, 2101 * MS, a1, 200, "b2", 1, 0, 2 * SECOND);
    // Route c on major 1 still counts against b: its request opens b's window, and its 502
    // keeps the slot until that window ends.
    let c2 = enqueue(&mut l, 2200 * MS, "GET", "/c/:id", "1");
    assert_eq!(drain(&mut l), [c2], "b (major 1) did not count a1: the slot is free");
    assert_eq!(l.handle_response(2201 * MS, c2, &Response::new(502, &[])).unwrap(), Disposition::Retry);
    let (retry, _) = next_send(&mut l, 2201 * MS, 10 * SECOND).expect("retried");
    assert!(retry >= 4200 * MS, "c2's retry waits out b's window (opened at 2.2 s): {} s", secs(retry));
}

/// Properties case `6dcb81…`: a late answer to a request sent before the server moved its
/// route, arriving after an answer (to a later request) that taught the new bucket, must not
/// move the route back. Before the fix it did, and the route's requests were split between two
/// queues (the old bucket's and the new one's): a later request overtook an earlier one.
#[test]
fn a_late_answer_from_before_a_bucket_change_does_not_change_the_route_back() {
    let mut l = limiter();
    // Route a, unknown: a pioneer on major 0 (`slow`: its answer will take long), then one on
    // major 1 (`quick`). Meanwhile the server moves route a from bucket b to b2: `quick` comes
    // back first and says b2, then `slow` says b.
    let slow = enqueue(&mut l, 0, "POST", "/a/:id", "0");
    assert_eq!(drain(&mut l), [slow]);
    let quick = enqueue(&mut l, 10 * MS, "POST", "/a/:id", "1");
    assert_eq!(drain(&mut l), [quick]);
    answer(&mut l, 30 * MS, quick, 200, "b2", 5, 4, SECOND);
    answer(&mut l, 500 * MS, slow, 200, "b", 5, 4, SECOND);
    let snap = l.snapshot(500 * MS, 1_700_000_000_000);
    let learned = snap.routes.iter().find(|r| r.route == "POST /a/:id").map(|r| r.bucket.as_str());
    assert_eq!(learned, Some("b2"), "the answer to the later request rules");
    // Route a's requests on major 0 now go to b2's queue, in order: the first is sent (as the
    // pioneer of b2 on major 0), the second waits for its answer.
    let early = enqueue(&mut l, 600 * MS, "POST", "/a/:id", "0");
    let late = enqueue(&mut l, 600 * MS, "POST", "/a/:id", "0");
    assert_eq!(drain(&mut l), [early]);
    answer(&mut l, 610 * MS, early, 200, "b2", 5, 3, SECOND);
    assert_eq!(drain(&mut l), [late]);
}

/// The engine's side of shared-mode cases `55afa3…` (and, at the store, `409ce0…`,
/// `8e257a…`): a request sent just before a local reset may arrive after the server's reset,
/// after a request sent later. Its answer is stale (it describes the old window as far as the
/// engine can tell), but the server may have counted it in the new window before the report
/// the engine keeps (the later request's, which arrived first): its slot counts until the
/// next reset. Before the fix it counted only when a report of the new window had already
/// been taken when its answer came.
#[test]
fn an_answer_from_before_a_reset_keeps_its_slot_until_the_next_one() {
    let mut l = limiter();
    // Bucket b: 3 per 1 s. One request learns it; it opens the window (ends at 1.001 s).
    let first = enqueue(&mut l, 0, "POST", "/a/:id", "0");
    assert_eq!(drain(&mut l), [first]);
    answer(&mut l, MS, first, 200, "b", 3, 2, SECOND);
    // `carried` goes at 990 ms, just before the local reset; `fresh` just after it.
    let carried = enqueue(&mut l, 990 * MS, "POST", "/a/:id", "0");
    assert_eq!(drain(&mut l), [carried]);
    let fresh = enqueue(&mut l, 1002 * MS, "POST", "/a/:id", "0");
    let (t, sent) = next_send(&mut l, 1002 * MS, 2 * SECOND).expect("sent");
    assert_eq!((t, sent.as_slice()), (1002 * MS, [fresh].as_slice()));
    // At the server, `fresh` arrived first and opened the new window (remaining 2), then
    // `carried` (remaining 1). `carried`'s answer comes back first.
    answer(&mut l, 1030 * MS, carried, 200, "b", 3, 1, 990 * MS);
    answer(&mut l, 1040 * MS, fresh, 200, "b", 3, 2, 990 * MS);
    // One slot is left in the server's window, not two.
    let more: Vec<RequestId> = (0..2).map(|_| enqueue(&mut l, 1050 * MS, "POST", "/a/:id", "0")).collect();
    let sent = drain(&mut l);
    assert_eq!(sent, [more[0]], "one slot left until the reset at ~2.03 s");
}

fn reservation(id: RequestId) -> Reservation {
    Reservation {
        id,
        identity: "bot".into(),
        route: "POST /a/:id".into(),
        major: "0".into(),
        bucket: Some("b".into()),
        counts_global: false,
        global_limit: 0,
        global_want: 1,
        global_window: SECOND,
        margin: 0,
        invalid_limit: 0,
        invalid_window: 0,
        ..Reservation::default()
    }
}

fn report(id: RequestId, remaining: u32, reset_after: Nanos) -> SharedUpdate {
    SharedUpdate::Bucket {
        id,
        identity: "bot".into(),
        route: "POST /a/:id".into(),
        major: "0".into(),
        bucket: Some("b".into()),
        unlimited: false,
        limit: Some(3),
        remaining: Some(remaining),
        reset_after: Some(reset_after),
        window: Some(SECOND),
    }
}

/// Shared-mode cases `55afa3…`, `409ce0…` and `8e257a…`, at the store: a grant carried into a
/// new window by the roll is answered with a report the store reads as the old window's
/// (stale), while the server counted it in the new one, after the lowest report the store
/// keeps. It must keep counting (as a ghost), or the store grants one slot too many.
#[test]
fn the_store_counts_a_carried_grant_whose_report_it_reads_as_stale() {
    let mut store = MemoryStore::new(&SharedConfig::default());
    let granted = |answer: ReservationAnswer| matches!(answer, ReservationAnswer::Granted { .. });
    // The bucket: 3 per 1 s, learned at 0 (window ends at 1 s).
    assert!(granted(store.reserve(0, "p", &reservation(1))));
    store.record(MS, "p", &report(1, 2, SECOND - MS));
    // `q:1` is granted just before the end, `p:2` just after (the store rolls the window,
    // carrying q:1).
    assert!(granted(store.reserve(990 * MS, "q", &reservation(1))));
    assert!(granted(store.reserve(1001 * MS, "p", &reservation(2))));
    // At the server p:2 arrived first (remaining 2), q:1 second (remaining 1); q's report is
    // recorded first and is stale (granted before the window started); p's is the lowest kept.
    store.record(1030 * MS, "q", &report(1, 1, 990 * MS));
    store.record(1040 * MS, "p", &report(2, 2, 990 * MS));
    // One slot is left, not two.
    assert!(granted(store.reserve(1050 * MS, "p", &reservation(3))));
    assert!(
        matches!(store.reserve(1051 * MS, "q", &reservation(2)), ReservationAnswer::Denied { .. }),
        "the server's window is full: q:1, p:2 and p:3"
    );
}

/// Properties case `fe9677…`: two requests of a route sent at the same instant, one counted
/// before the server moved the route (old bucket b), one after (b2). The answer saying b2
/// came back first; the one saying b, from a request sent with it (not after it), must not
/// move the route back, and its retry goes where the route goes now.
#[test]
fn an_answer_to_a_request_sent_with_the_teacher_does_not_change_the_route_back() {
    let mut l = limiter();
    // Route a in bucket b: 5 per 1 s, learned on major 0.
    let first = enqueue(&mut l, 0, "POST", "/a/:id", "0");
    assert_eq!(drain(&mut l), [first]);
    answer(&mut l, MS, first, 200, "b", 5, 4, SECOND);
    // Two requests at 10 ms; the server moves route a to b2 between their arrivals.
    let before = enqueue(&mut l, 10 * MS, "POST", "/a/:id", "0");
    let after = enqueue(&mut l, 10 * MS, "POST", "/a/:id", "0");
    assert_eq!(drain(&mut l), [before, after]);
    answer(&mut l, 20 * MS, after, 200, "b2", 5, 4, SECOND);
    // `before` was refused by b (a 429 with b's headers): it is retried later.
    let until = answer(&mut l, 30 * MS, before, 429, "b", 5, 0, 500 * MS);
    assert_eq!(until, Disposition::Retry);
    let snap = l.snapshot(30 * MS, 1_700_000_000_000);
    let learned = snap.routes.iter().find(|r| r.route == "POST /a/:id").map(|r| r.bucket.as_str());
    assert_eq!(learned, Some("b2"), "the answer sent with the teacher does not undo it");
    // A later request of route a on major 0 queues behind `before`, in b2's queue: FIFO.
    let later = enqueue(&mut l, 40 * MS, "POST", "/a/:id", "0");
    let (_, sent) = next_send(&mut l, 40 * MS, 5 * SECOND).expect("sent");
    assert_eq!(sent.first(), Some(&before), "the retry goes first: {sent:?} (later is {later})");
}

/// Properties case `859f11…` (its shrunk input): when the server moves a route to a new bucket,
/// the new bucket's queue starts from the old bucket's window length, not from a guess drawn
/// from a 429 or a 5xx (Discord keeps a route's limit when it renames its bucket): else a 5xx
/// there counts only until the guessed window end, and the retry meets the real window.
#[test]
fn a_route_moved_to_a_new_bucket_starts_from_the_old_buckets_window_length() {
    let mut l = limiter();
    // Route a in bucket b: 1 per 2 s (the window length is learned from this answer).
    let first = enqueue(&mut l, 0, "POST", "/a/:id", "0");
    assert_eq!(drain(&mut l), [first]);
    answer(&mut l, MS, first, 200, "b", 1, 0, 2 * SECOND);
    // After the window, the server has moved a to b2; the first request there is refused by a
    // hidden sub-limit (1 s), with b2's headers: remaining 1, reset in 100 ms.
    let r = enqueue(&mut l, 2100 * MS, "POST", "/a/:id", "0");
    assert_eq!(drain(&mut l), [r]);
    assert_eq!(answer(&mut l, 2101 * MS, r, 429, "b2", 1, 1, 100 * MS), Disposition::Retry);
    // Its retry opens b2's window and gets a 503: its slot counts for b2's window (2 s).
    let (sent_at, sent) = next_send(&mut l, 2101 * MS, 10 * SECOND).expect("retried");
    assert_eq!(sent, [r]);
    assert_eq!(l.handle_response(sent_at + MS, r, &Response::new(503, &[])).unwrap(), Disposition::Complete);
    let next = enqueue(&mut l, sent_at + 2 * MS, "POST", "/a/:id", "0");
    let (t, sent) = next_send(&mut l, sent_at + 2 * MS, 10 * SECOND).expect("sent");
    assert_eq!(sent, [next]);
    assert!(t >= sent_at + 2 * SECOND, "the 503's slot counts for 2 s from {} s: sent at {} s", secs(sent_at), secs(t));
}

/// Properties case `859f11…` (its full input): an answer from before a local reset that was
/// premature (the reset was estimated from the window length) reports a window end still ahead:
/// the request keeps its slot until then, not merely until the next (unknown) reset.
#[test]
fn a_stale_answer_reporting_a_later_window_end_keeps_the_bucket_closed_until_then() {
    let mut l = limiter();
    // Bucket b: 1 per window. What the engine knows of its length is a guess: 300 ms from a
    // 429 (a window some other request opened).
    let probe = enqueue(&mut l, 0, "POST", "/a/:id", "0");
    assert_eq!(drain(&mut l), [probe]);
    assert_eq!(answer(&mut l, MS, probe, 429, "b", 1, 0, 300 * MS), Disposition::Retry);
    let (sent_at, sent) = next_send(&mut l, MS, 10 * SECOND).expect("retried");
    assert_eq!(sent, [probe]);
    // The next request waits for its answer, which takes long: the engine's estimated window
    // end passes first (a local reset). The answer then says the server's window (which
    // counted it) ends 1 s from now.
    let next = enqueue(&mut l, sent_at + 10 * MS, "POST", "/a/:id", "0");
    assert!(drain(&mut l).is_empty());
    let late = sent_at + 900 * MS;
    l.handle_timeout(late);
    assert!(drain(&mut l).is_empty(), "nothing goes while the only slot is in flight");
    assert_eq!(answer(&mut l, late, probe, 200, "b", 1, 0, SECOND), Disposition::Complete);
    let (t, sent) = next_send(&mut l, late, 10 * SECOND).expect("sent");
    assert_eq!(sent, [next]);
    assert!(t >= late + SECOND, "waits for the reported end at {} s: sent at {} s", secs(late + SECOND), secs(t));
}

/// Answers `id` like [`answer`], with the server's clock: `X-RateLimit-Reset` (the window's end
/// on the server's clock, whose epoch is `EPOCH_MS`) beside `X-RateLimit-Reset-After`, the
/// answer stamped at `stamped` (test time, which the server's clock follows).
#[allow(clippy::too_many_arguments)]
fn answer_clocked(l: &mut Limiter, now: Nanos, id: RequestId, hash: &str, limit: u32, remaining: u32, stamped: Nanos, reset_after: Nanos) {
    const EPOCH_MS: Nanos = 1_700_000_000_000;
    let end_ms = EPOCH_MS + (stamped + reset_after) / MS;
    let (limit, remaining) = (limit.to_string(), remaining.to_string());
    let (reset, reset_after) = (format!("{}.{:03}", end_ms / 1000, end_ms % 1000), secs(reset_after));
    let headers = [
        ("X-RateLimit-Bucket", hash),
        ("X-RateLimit-Limit", limit.as_str()),
        ("X-RateLimit-Remaining", remaining.as_str()),
        ("X-RateLimit-Reset", reset.as_str()),
        ("X-RateLimit-Reset-After", reset_after.as_str()),
    ];
    l.handle_response(now, id, &Response::new(200, &headers)).unwrap();
}

/// Properties case (shrunk from `71515c…`): each answer that carries the server's clock lets
/// the next window go early by its own lead (its round trip less its uplink's excess: an
/// answer read late has a long one). Two answers of one window of a sliding bucket report two
/// ends: the earlier request's end through a slow answer (the latest end the client saw, but
/// the earliest to wait for by its lead), the later request's end through a fast one. The
/// next request must wait for the latest end by each answer's own lead, not for the latest
/// end less the lead of the answer that reported it: that would send it 400 ms into the
/// window the later request holds.
#[test]
fn the_next_window_waits_for_the_latest_end_by_each_answers_own_lead() {
    let mut l = limiter();
    // Eight answers on another bucket, each sent alone: uplinks 10 ms, read 10 ms later.
    let mut t = 0;
    for _ in 0..8 {
        let id = enqueue(&mut l, t, "GET", "/warm/:id", "0");
        assert_eq!(drain(&mut l), vec![id]);
        answer_clocked(&mut l, t + 20 * MS, id, "w", 100, 99, t + 10 * MS, SECOND);
        drain(&mut l);
        t += 100 * MS;
    }
    // Bucket b, 2 per second, sliding: its pioneer, whose window passes.
    let p = enqueue(&mut l, t, "POST", "/b/:id", "0");
    assert_eq!(drain(&mut l), vec![p]);
    answer_clocked(&mut l, t + 20 * MS, p, "b", 2, 1, t + 10 * MS, SECOND);
    drain(&mut l);
    let start = t + 3 * SECOND;
    l.handle_timeout(start);
    drain(&mut l);
    // r1 reaches the server 10 ms after it leaves (its end: 1,010 ms from the start); its
    // answer is read 890 ms after the server sent it.
    let r1 = enqueue(&mut l, start, "POST", "/b/:id", "0");
    assert_eq!(drain(&mut l), vec![r1]);
    // r2 at 400 ms reaches it at 410 (the sliding window is empty again at 1,410), read 10 ms later.
    let r2 = enqueue(&mut l, start + 400 * MS, "POST", "/b/:id", "0");
    assert_eq!(drain(&mut l), vec![r2]);
    let r3 = enqueue(&mut l, start + 401 * MS, "POST", "/b/:id", "0");
    assert!(drain(&mut l).is_empty());
    answer_clocked(&mut l, start + 420 * MS, r2, "b", 2, 0, start + 410 * MS, SECOND);
    drain(&mut l);
    answer_clocked(&mut l, start + 900 * MS, r1, "b", 2, 1, start + 10 * MS, SECOND);
    // r3 may reach the server from 1,410 ms on: it leaves at most 10 ms and the allowance
    // (2 ms for the clock's reading) before, not at about 1,000 ms.
    let (at, sent) = next_send(&mut l, start + 900 * MS, start + 5 * SECOND).expect("r3 is sent");
    assert_eq!(sent, vec![r3]);
    assert!(at >= start + 1_395 * MS, "r3 left at {} ms", (at - start) / MS);
    assert!(at <= start + 1_410 * MS, "r3 left at {} ms: the answers' leads were not used", (at - start) / MS);
}
