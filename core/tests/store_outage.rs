//! Shared mode when the store goes away, sans-IO: one limiter, answers given by hand at fixed
//! times, so each test shows the cause of a behaviour rather than its effect in a simulation.
//!
//! * Store health is counted per outage, not per reservation: N reservations answered
//!   `unavailable` at once are one failure, so the first probe comes `retry_base` later for any
//!   N, and each failed probe doubles the pause up to `retry_max`.
//! * Fail-open runs on its share: while the store is down, the global limit and each bucket's
//!   limit are divided by the live processes the store last counted, so that K processes
//!   together stay within the limits; for the global limit only after the outage's first
//!   window (the store's last grants may fill it, unevenly). When the store answers again it
//!   is told what was sent without it, as ages, and the share holds until the store counts
//!   every process back; then the full limits apply again.
#![allow(clippy::identity_op)]

use ratelane::shared::{OnUnavailable, Reservation, ReservationAnswer, SharedConfig};
use ratelane::{Config, Limiter, MILLISECOND, Nanos, Observation, Output, Request, RequestId, Response, SECOND};

const MS: Nanos = MILLISECOND;

/// Global leases off: each request reserves its own global token, so N requests put N
/// reservations out at once, as in the repro. (With leases on, the identity's requests
/// wait for one lease request first; the N reservations then go out together on leased tokens,
/// and the same rules apply to them.)
fn limiter(policy: OnUnavailable) -> Limiter {
    let mut c = Config::default();
    let mut shared = SharedConfig::with_policy(policy);
    shared.global_lease = false;
    c.shared = Some(shared);
    Limiter::new(c).expect("valid config")
}

fn channel(i: usize) -> Request {
    Request::new("POST", format!("/channels/{}/messages", 100_000_000_000_000_000u64 + i as u64))
}

/// Drains the outputs: the reservations emitted, the sends, the `StoreUnavailable`
/// observations' retry times, and the final wait (if any).
#[derive(Debug, Default)]
struct Drained {
    reserved: Vec<RequestId>,
    reservations: Vec<Reservation>,
    sent: Vec<RequestId>,
    unavailable: Vec<Nanos>,
    recovered: usize,
    wait_until: Option<Nanos>,
}

fn drain(l: &mut Limiter) -> Drained {
    let mut d = Drained::default();
    loop {
        match l.poll_output() {
            Output::Reserve(r) => {
                d.reserved.push(r.id);
                d.reservations.push(r);
            }
            Output::Send(id) => d.sent.push(id),
            Output::Observe(Observation::StoreUnavailable { retry_at, .. }) => d.unavailable.push(retry_at),
            Output::Observe(Observation::StoreRecovered) => d.recovered += 1,
            Output::WaitUntil(t) => {
                d.wait_until = Some(t);
                return d;
            }
            Output::Idle => return d,
            _ => {}
        }
    }
}

/// Runs timeouts from `now` until the limiter emits a reservation; returns when, and its ids.
fn next_probe(l: &mut Limiter, mut now: Nanos) -> (Nanos, Vec<RequestId>) {
    for _ in 0..1000 {
        let d = drain(l);
        if !d.reserved.is_empty() {
            return (now, d.reserved);
        }
        now = d.wait_until.expect("a fail-closed hold always comes with a WaitUntil");
        l.handle_timeout(now);
    }
    panic!("no probe");
}

/// The repro of the issue: N requests to N channels, fail-closed, every reservation answered
/// `unavailable` at the same instant. Before the fix the first probe came after 0.1 / 0.2 /
/// 1.6 / 5.0 s for N = 1 / 2 / 5 / 50 (each answer counted as one more consecutive failure).
#[test]
fn an_outage_is_one_failure_however_many_reservations_were_out() {
    let base = SharedConfig::default().retry_base;
    let max = SharedConfig::default().retry_max;
    for n in [1usize, 2, 5, 50] {
        let mut l = limiter(OnUnavailable::FailClosed);
        for i in 0..n {
            l.enqueue(0, channel(i)).unwrap();
        }
        let d = drain(&mut l);
        assert_eq!(d.reserved.len(), n, "one pioneer reservation per channel");
        let t0 = 10 * MS;
        let mut unavailable = Vec::new();
        for &id in &d.reserved {
            l.handle_reservation(t0, id, ReservationAnswer::Unavailable).unwrap();
            unavailable.extend(drain(&mut l).unavailable);
        }
        assert_eq!(unavailable, vec![t0 + base], "N = {n}: one StoreUnavailable, retry_base later");
        // Each failed probe doubles the pause: 0.1, 0.2, 0.4, ... s, at most retry_max.
        let mut now = t0;
        let mut pause = base;
        for _ in 0..8 {
            let (at, probe) = next_probe(&mut l, now);
            assert_eq!(at, now + pause, "N = {n}: probe after {} ms", pause / MS);
            assert_eq!(probe.len(), 1, "one probe at a time");
            l.handle_reservation(at, probe[0], ReservationAnswer::Unavailable).unwrap();
            now = at;
            pause = (pause * 2).min(max);
        }
        // The probe's grant ends the outage; every other request is reserved again at once.
        let (at, probe) = next_probe(&mut l, now);
        assert_eq!(at, now + pause);
        l.handle_reservation(at, probe[0], granted()).unwrap();
        let d = drain(&mut l);
        assert_eq!(d.recovered, 1);
        assert_eq!(d.sent, vec![probe[0]]);
        assert_eq!(d.reserved.len(), n - 1, "N = {n}: the others are reserved again");
        // A new outage starts again from retry_base.
        let t1 = at + SECOND;
        for id in d.reserved {
            l.handle_reservation(t1, id, ReservationAnswer::Unavailable).unwrap();
            let u = drain(&mut l).unavailable;
            assert!(u.is_empty() || u == vec![t1 + base], "N = {n}: {u:?}");
        }
    }
}

/// A reservation still outstanding from before the outage that fails after the probe was
/// emitted is the same failure: it neither doubles the pause nor delays the probe's answer.
#[test]
fn a_late_failure_from_before_the_outage_is_not_counted_again() {
    let base = SharedConfig::default().retry_base;
    let mut l = limiter(OnUnavailable::FailClosed);
    for i in 0..3 {
        l.enqueue(0, channel(i)).unwrap();
    }
    let ids = drain(&mut l).reserved;
    l.handle_reservation(10 * MS, ids[0], ReservationAnswer::Unavailable).unwrap();
    assert_eq!(drain(&mut l).unavailable, vec![10 * MS + base]);
    // ids[1] and ids[2] are still out (a slow store); the probe waits for them (one at a time).
    l.handle_reservation(200 * MS, ids[1], ReservationAnswer::Unavailable).unwrap();
    assert!(drain(&mut l).unavailable.is_empty(), "an outstanding reservation's failure is not a new one");
    l.handle_reservation(250 * MS, ids[2], ReservationAnswer::Unavailable).unwrap();
    let d = drain(&mut l);
    assert!(d.unavailable.is_empty());
    assert_eq!(d.reserved.len(), 1, "the pause has passed: one probe");
    // The probe fails: the second step, twice retry_base.
    l.handle_reservation(260 * MS, d.reserved[0], ReservationAnswer::Unavailable).unwrap();
    assert_eq!(drain(&mut l).unavailable, vec![260 * MS + 2 * base]);
}

/// A grant or a denial for a reservation that was out before the outage proves the store is
/// back: it ends the outage like the probe's answer would.
#[test]
fn any_answer_from_the_store_ends_the_outage() {
    let mut l = limiter(OnUnavailable::FailClosed);
    for i in 0..2 {
        l.enqueue(0, channel(i)).unwrap();
    }
    let ids = drain(&mut l).reserved;
    l.handle_reservation(10 * MS, ids[0], ReservationAnswer::Unavailable).unwrap();
    drain(&mut l);
    l.handle_reservation(20 * MS, ids[1], granted()).unwrap();
    let d = drain(&mut l);
    assert_eq!(d.recovered, 1);
    assert_eq!(d.sent, vec![ids[1]]);
    assert_eq!(d.reserved, vec![ids[0]], "reserved again at once");
}

fn granted() -> ReservationAnswer {
    ReservationAnswer::GRANTED
}

/// Fail-open, a bucket of 6 per second, three live processes: while the store is down this
/// process sends 2 per window (a third), not 6; every request still goes, window by window,
/// and the probe's grant brings the full limit back. (The requests are exempt from the global
/// limit, which has a rule of its own: the next test.)
#[test]
fn fail_open_runs_on_its_share_of_a_bucket() {
    let mut l = limiter(OnUnavailable::FailOpen);
    let ch = || channel(1).global_exempt(true);
    let first = l.enqueue(0, ch()).unwrap();
    assert_eq!(drain(&mut l).reserved, vec![first]);
    // The store grants it and says three processes are live.
    l.handle_reservation(1 * MS, first, ReservationAnswer::Granted { processes: Some(3), leased: 0, store_time: None }).unwrap();
    assert_eq!(drain(&mut l).sent, vec![first]);
    let headers = [
        ("X-RateLimit-Limit", "6"),
        ("X-RateLimit-Remaining", "5"),
        ("X-RateLimit-Reset-After", "1"),
        ("X-RateLimit-Bucket", "b"),
    ];
    l.handle_response(50 * MS, first, &Response::new(200, &headers)).unwrap();
    drain(&mut l);
    let ids: Vec<RequestId> = (0..8).map(|_| l.enqueue(100 * MS, ch()).unwrap()).collect();
    let reserved = drain(&mut l).reserved;
    assert_eq!(reserved, ids[..5].to_vec(), "pipelined up to what the server reported");
    // The store goes away: the five reservations fail together.
    let mut sent = Vec::new();
    for &id in &reserved {
        l.handle_reservation(110 * MS, id, ReservationAnswer::Unavailable).unwrap();
        let d = drain(&mut l);
        assert!(d.reserved.is_empty(), "no reservation during the pause");
        sent.extend(d.sent);
    }
    // A third of 6 is 2 per window, and `first` was one of them.
    assert_eq!(sent, vec![ids[0]], "this process's share of the window, not the whole of it");
    // The answer to ids[0] closes this process's part of the window: nothing more goes until
    // the reset (1 s after `first`'s answer), though the server says 4 remain.
    let headers = [
        ("X-RateLimit-Limit", "6"),
        ("X-RateLimit-Remaining", "4"),
        ("X-RateLimit-Reset-After", "0.9"),
        ("X-RateLimit-Bucket", "b"),
    ];
    l.handle_response(150 * MS, ids[0], &Response::new(200, &headers)).unwrap();
    let d = drain(&mut l);
    assert!(d.sent.is_empty() && d.reserved.is_empty(), "{d:?}");
    let reset = d.wait_until.expect("the reset");
    assert!(reset >= 1_000 * MS, "waits for the window's end, not for the store: {}", reset / MS);
    // Next window: the pause has passed, so one request probes the store (the requests of its
    // queue wait for its answer rather than overtake it).
    l.handle_timeout(reset);
    let d = drain(&mut l);
    assert_eq!(d.reserved, vec![ids[1]], "the probe");
    assert!(d.sent.is_empty());
    // The probe fails: it goes back in line, and the window's share (2) goes directly.
    let t = reset + 5 * MS;
    l.handle_reservation(t, ids[1], ReservationAnswer::Unavailable).unwrap();
    let d = drain(&mut l);
    assert_eq!(d.sent, vec![ids[1], ids[2]], "this window's share, in order");
    for (k, &id) in d.sent.iter().enumerate() {
        let headers = [
            ("X-RateLimit-Limit", "6"),
            ("X-RateLimit-Remaining", if k == 0 { "5" } else { "4" }),
            ("X-RateLimit-Reset-After", "0.9"),
            ("X-RateLimit-Bucket", "b"),
        ];
        l.handle_response(t + 50 * MS, id, &Response::new(200, &headers)).unwrap();
    }
    let d = drain(&mut l);
    assert!(d.sent.is_empty() && d.reserved.is_empty(), "{d:?}");
    // The store is back: the probe of the following window is granted (with the count), and
    // the full limit applies again.
    let t = d.wait_until.expect("the reset");
    l.handle_timeout(t);
    let d = drain(&mut l);
    assert_eq!(d.reserved, vec![ids[3]], "{d:?}");
    l.handle_reservation(t + 1 * MS, ids[3], ReservationAnswer::Granted { processes: Some(3), leased: 0, store_time: None }).unwrap();
    let d = drain(&mut l);
    assert_eq!(d.recovered, 1);
    assert_eq!(d.sent, vec![ids[3]]);
    assert_eq!(d.reserved, ids[4..].to_vec(), "beyond the share once the store decides again");
}

/// Runs timeouts from `now`, answering every probe `Unavailable` at once, until the limiter
/// sends without the store; returns when, and that drain (the sends, and a probe left out).
fn first_sends_without_the_store(l: &mut Limiter, mut now: Nanos, until: Nanos) -> (Nanos, Drained) {
    let mut d = drain(l);
    loop {
        assert!(now <= until, "nothing sent by {} ms", until / MS);
        if !d.sent.is_empty() {
            return (now, d);
        }
        if let Some(&id) = d.reserved.first() {
            l.handle_reservation(now, id, ReservationAnswer::Unavailable).unwrap();
        } else {
            now = d.wait_until.expect("a wake-up").max(now);
            l.handle_timeout(now);
        }
        d = drain(l);
    }
}

/// Fail-open, global limit 50 per second, three live processes: for one global window after
/// the outage began nothing goes without the store (the store may have granted that window,
/// unevenly, to the other processes); then at most this process's share, 16 per window. When
/// the store answers again, the share holds until it counts every process back.
#[test]
fn fail_open_waits_one_window_then_runs_on_its_share_of_the_global_limit() {
    let mut l = limiter(OnUnavailable::FailOpen);
    let first = l.enqueue(0, channel(0)).unwrap();
    drain(&mut l);
    l.handle_reservation(1 * MS, first, ReservationAnswer::Granted { processes: Some(3), leased: 0, store_time: None }).unwrap();
    drain(&mut l);
    // Answered (an unanswered request holds its place in the global window: it may still be
    // on its way).
    l.handle_response(20 * MS, first, &Response::new(200, &[])).unwrap();
    drain(&mut l);
    // Thirty channels, thirty pioneers: all reserved at once (31 of 50).
    let ids: Vec<RequestId> = (1..=30).map(|i| l.enqueue(100 * MS, channel(i)).unwrap()).collect();
    assert_eq!(drain(&mut l).reserved.len(), 30);
    for &id in &ids {
        l.handle_reservation(110 * MS, id, ReservationAnswer::Unavailable).unwrap();
        assert!(drain(&mut l).sent.is_empty(), "not in the outage's first window");
    }
    // The longest window a reservation passes: 1 s plus the largest margin. Then this
    // process's share (16) without the store, before the next probe.
    let t1 = 110 * MS + SECOND + Config::default().global_margin_max;
    let (at, d) = first_sends_without_the_store(&mut l, 110 * MS, 10 * SECOND);
    assert_eq!(at, t1, "one window after the outage began");
    assert!(d.reservations.is_empty(), "the next probe comes at its time");
    assert_eq!(d.sent.len(), 50 / 3, "a third of the global limit in a window");
    // Answered 20 ms later (a request still unanswered holds its place in the global window:
    // it may not have reached the server yet).
    for &id in &d.sent {
        l.handle_response(at + 20 * MS, id, &Response::new(200, &[])).unwrap();
    }
    drain(&mut l);
    // A window later, the share again: a probe, which tells the store what went without it
    // (how long ago) and asks how many processes are back since the outage began, and the
    // rest of the share without the store while it is out.
    let (t2, d) = next_reservations(&mut l, at);
    // When those 16 left this process's window: a window after their answers, which bound
    // when they reached the server (these answers do not tell the server's clock).
    assert_eq!(t2, t1 + 20 * MS + SECOND, "a window after those 16 were answered");
    let probe = &d.reservations[0];
    assert_eq!(probe.unrecorded, vec![t2 - t1; 16], "the 16 sent without the store, as ages");
    assert!(probe.granted.is_empty(), "`first` (1 ms) has left the window");
    assert!(probe.reporting, "it may send without the store while its probe is out");
    assert_eq!(probe.processes_since, Some(t2 - 110 * MS));
    assert_eq!(d.sent.len(), ids.len() - 16 - 1, "the rest of the thirty, within the share");
    // Granted, but the store counts only this process back: the share still holds.
    l.handle_reservation(t2, probe.id, ReservationAnswer::Granted { processes: Some(1), leased: 0, store_time: None }).unwrap();
    let d = drain(&mut l);
    assert_eq!(d.recovered, 1);
    assert_eq!(d.sent, vec![probe.id]);
    // More requests: the share has room for 2 more in this window (the probe and 13 are in
    // it). Their reservations report everything sent without the store in the window (the 16
    // and the 13, and the probe's grant: the store may have lost state), and still ask how
    // many are back; when the store counts all three, the whole limit applies.
    let more: Vec<RequestId> = (31..=60).map(|i| l.enqueue(t2, channel(i)).unwrap()).collect();
    let d = drain(&mut l);
    assert_eq!(d.reservations.len(), 2, "the room left in the share: {d:?}");
    let r = &d.reservations[0];
    let mut ages = vec![t2 - t1; 16];
    ages.extend([0; 13]);
    assert_eq!(r.unrecorded, ages);
    assert_eq!(r.granted, vec![0], "the probe's send");
    assert!(r.reporting);
    assert_eq!(r.processes_since, Some(t2 - 110 * MS));
    l.handle_reservation(t2, r.id, ReservationAnswer::Granted { processes: Some(3), leased: 0, store_time: None }).unwrap();
    let d = drain(&mut l);
    assert_eq!(d.reserved.len(), more.len() - 2, "the rest, reserved under the whole limit: {d:?}");
}

/// Runs timeouts from `now` until the limiter reserves; returns when, and that drain.
fn next_reservations(l: &mut Limiter, mut now: Nanos) -> (Nanos, Drained) {
    for _ in 0..1000 {
        let d = drain(l);
        if !d.reservations.is_empty() {
            return (now, d);
        }
        now = d.wait_until.expect("a wake-up");
        l.handle_timeout(now);
    }
    panic!("no reservation");
}

/// A send without the store made while the probe that carries the report is out is not in
/// that report: the report stays pending, and the next reservation carries it again (the
/// store replaces the first one).
#[test]
fn a_send_made_while_the_report_is_out_is_reported_again() {
    let mut l = limiter(OnUnavailable::FailOpen);
    let first = l.enqueue(0, channel(0)).unwrap();
    drain(&mut l);
    l.handle_reservation(1 * MS, first, ReservationAnswer::Granted { processes: Some(2), leased: 0, store_time: None }).unwrap();
    drain(&mut l);
    let ids: Vec<RequestId> = (1..=3).map(|i| l.enqueue(100 * MS, channel(i)).unwrap()).collect();
    assert_eq!(drain(&mut l).reserved, ids);
    for &id in &ids {
        l.handle_reservation(110 * MS, id, ReservationAnswer::Unavailable).unwrap();
        drain(&mut l);
    }
    // Once the hold is over, the pause has passed: one request probes, and the others go
    // without the store while it is out.
    let t = 110 * MS + SECOND + Config::default().global_margin_max;
    l.handle_timeout(t);
    let mut probe = None;
    let mut sent = Vec::new();
    loop {
        match l.poll_output() {
            Output::Reserve(r) => probe = Some(r),
            Output::Send(id) => sent.push(id),
            Output::WaitUntil(_) | Output::Idle => break,
            _ => {}
        }
    }
    let probe = probe.expect("a probe");
    assert_eq!(sent.len(), 2, "the others go without the store");
    assert!(probe.reporting && probe.unrecorded.is_empty(), "nothing sent without the store before it");
    l.handle_reservation(t + MS, probe.id, ReservationAnswer::Granted { processes: Some(2), leased: 0, store_time: None }).unwrap();
    drain(&mut l);
    // The next reservation reports the two sends.
    let next = l.enqueue(t + 2 * MS, channel(9)).unwrap();
    let r = loop {
        match l.poll_output() {
            Output::Reserve(r) => break r,
            Output::WaitUntil(_) | Output::Idle => panic!("no reservation"),
            _ => {}
        }
    };
    assert_eq!(r.id, next);
    assert_eq!(r.unrecorded, vec![2 * MS, 2 * MS]);
    assert!(r.reporting);
}

/// A count of 0 (nonsense) reads as one process; a huge one leaves one request per window.
#[test]
fn a_nonsense_process_count_is_tolerated() {
    for (count, expected) in [(0u32, 5usize), (u32::MAX, 0)] {
        let mut l = limiter(OnUnavailable::FailOpen);
        let first = l.enqueue(0, channel(0)).unwrap();
        drain(&mut l);
        l.handle_reservation(1 * MS, first, ReservationAnswer::Granted { processes: Some(count), leased: 0, store_time: None }).unwrap();
        drain(&mut l);
        let ids: Vec<RequestId> = (1..=5).map(|i| l.enqueue(100 * MS, channel(i)).unwrap()).collect();
        drain(&mut l);
        let mut sent = 0;
        for &id in &ids {
            l.handle_reservation(110 * MS, id, ReservationAnswer::Unavailable).unwrap();
            sent += drain(&mut l).sent.len();
        }
        assert_eq!(sent, expected, "processes = {count}");
    }
}
