//! A proptest-based fuzzer for shared mode: arbitrary input sequences, including arbitrary store
//! answers (denials of any scope and length, zero waits, unavailability, answers for the wrong
//! id, answers twice), must never panic, must end every request exactly once, and must keep the
//! counts (`queued`, `in_flight`, `reserving`) consistent with the outputs. Every reservation
//! and update also goes through a `MemoryStore`, which must never panic either. Store health
//! is counted per outage step: two `StoreUnavailable` observations of one outage always have a
//! reservation (the probe) emitted between them.
//!
//! Since issue 44 it also answers with store replies of every shape (`AnswerReply`: the reply
//! items a Redis script could give, or any other, of any length, read with the core's
//! `wire::parse_reserve_answer` as a driver does, an unreadable one answered `Unavailable`),
//! denials of any length up to `u64::MAX` ns, with and without `max_wait`; and every wait the
//! engine asks for stays within the one bound on waits from outside (`max_server_wait`, one
//! hour: a denial of 2^53 us was once held as it came).

use std::collections::HashMap;

use proptest::prelude::*;
use ratelane::server::script::{MAX_REPLY_LEN, ReplyItem, check_reply_len};
use ratelane::shared::wire::parse_reserve_answer;
use ratelane::shared::{MemoryStore, OnUnavailable, ReservationAnswer, SharedConfig, SharedScope};
use ratelane::{Config, Disposition, Failure, Limiter, Observation, Output, Request, Response, SECOND};

/// The longest wait the engine may ask for in these runs: `max_server_wait` (and the edge
/// backoff's cap), one hour, plus a global window and its margin.
const LONGEST_WAIT: u64 = 3_600 * SECOND + 2 * SECOND;

#[derive(Debug, Clone)]
enum Op {
    Enqueue { route: u8, channel: u8, identity: u8, deadline: Option<u16> },
    /// Answer a reserving request (`pick`), or with `stray` an arbitrary id.
    Answer { pick: u16, answer: u8, retry_ns: u64, scope: u8, stray: Option<u8> },
    /// Answer a reserving request with a store reply of any shape, read as a driver reads it.
    AnswerReply { pick: u16, reply: Vec<Item> },
    /// Ask the store and pass its answer on.
    AskStore { pick: u16 },
    Respond { pick: u16, status: u16, headers: u8 },
    Fail { pick: u16, maybe_sent: bool },
    Cancel { pick: u16 },
    Advance { ms: u32 },
    Close,
}

const HEADER_SETS: [&[(&str, &str)]; 6] = [
    &[],
    &[("X-RateLimit-Limit", "2"), ("X-RateLimit-Remaining", "1"), ("X-RateLimit-Reset-After", "1.5"), ("X-RateLimit-Bucket", "a")],
    &[("X-RateLimit-Limit", "2"), ("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset-After", "0.25"), ("X-RateLimit-Bucket", "b")],
    &[("Retry-After", "2"), ("X-RateLimit-Global", "true"), ("X-RateLimit-Scope", "global")],
    &[("Retry-After", "3"), ("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "4"), ("X-RateLimit-Scope", "shared"), ("X-RateLimit-Bucket", "a")],
    &[("X-RateLimit-Limit", "1"), ("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset-After", "5"), ("X-RateLimit-Bucket", "c")],
];

/// One element of a store reply, as a host hands it to the core ([`ReplyItem`]).
#[derive(Debug, Clone)]
enum Item {
    Int(i64),
    Text(String),
    Nil,
    Nested(usize),
}

impl Item {
    fn reply_item(&self) -> ReplyItem<'_> {
        match self {
            Item::Int(n) => ReplyItem::Int(*n),
            Item::Text(t) => ReplyItem::Text(t.as_str().into()),
            Item::Nil => ReplyItem::Nil,
            Item::Nested(len) => ReplyItem::nested(*len),
        }
    }
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        3 => prop_oneof![
            Just(0i64), Just(1), Just(-1), Just(2), Just(1_000), Just(50_000), Just(i64::from(u32::MAX)),
            Just(i64::from(u32::MAX) + 1), Just(9_007_199_254_740_991), Just(9_007_199_254_740_992),
            Just(i64::MAX), Just(i64::MIN), any::<i64>(),
        ].prop_map(Item::Int),
        3 => prop_oneof![
            Just("granted"), Just("denied"), Just("recorded"), Just("error"), Just("global"), Just("route"),
            Just("bucket"), Just("pioneer"), Just("edge"), Just("invalid"), Just("decision"), Just(""),
        ].prop_map(|t| Item::Text(t.to_string())),
        1 => "\\PC{0,40}".prop_map(Item::Text),
        1 => Just(Item::Nil),
        1 => prop_oneof![Just(0usize), Just(1), Just(10_000), Just(1_000_000)].prop_map(Item::Nested),
    ]
}

/// A reply: mostly of the lengths the script gives, sometimes longer than any.
fn reply() -> impl Strategy<Value = Vec<Item>> {
    prop_oneof![
        8 => proptest::collection::vec(item(), 0..6),
        1 => proptest::collection::vec(item(), MAX_REPLY_LEN..MAX_REPLY_LEN + 40),
    ]
}

/// A denial's wait: the usual, and every edge up to the end of the clock.
fn retry_ns() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => Just(0u64),
        8 => (0u64..5_000).prop_map(|ms| ms * 1_000_000),
        1 => Just(3_600 * SECOND + 1),
        1 => Just(864_000 * SECOND),
        1 => Just(9_007_199_254_740_991u64 * 1_000),
        1 => Just(u64::MAX),
        1 => any::<u64>(),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..4, 0u8..4, 0u8..2, proptest::option::of(0u16..20_000))
            .prop_map(|(route, channel, identity, deadline)| Op::Enqueue { route, channel, identity, deadline }),
        4 => (any::<u16>(), 0u8..4, retry_ns(), 0u8..6, proptest::option::weighted(0.1, any::<u8>()))
            .prop_map(|(pick, answer, retry_ns, scope, stray)| Op::Answer { pick, answer, retry_ns, scope, stray }),
        2 => (any::<u16>(), reply()).prop_map(|(pick, reply)| Op::AnswerReply { pick, reply }),
        3 => any::<u16>().prop_map(|pick| Op::AskStore { pick }),
        3 => (any::<u16>(), prop_oneof![Just(200u16), Just(429), Just(500), Just(401), Just(403)], 0u8..6)
            .prop_map(|(pick, status, headers)| Op::Respond { pick, status, headers }),
        1 => (any::<u16>(), any::<bool>()).prop_map(|(pick, maybe_sent)| Op::Fail { pick, maybe_sent }),
        1 => any::<u16>().prop_map(|pick| Op::Cancel { pick }),
        3 => (0u32..30_000).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Close),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Queued,
    Reserving,
    InFlight,
}

#[derive(Default)]
struct Book {
    live: HashMap<u64, State>,
    ended: HashMap<u64, &'static str>,
    /// Reservations emitted, by id (the latest).
    reservations: HashMap<u64, ratelane::shared::Reservation>,
    /// During an outage: reservations emitted since its last `StoreUnavailable`.
    probes_since_failure: Option<usize>,
}

impl Book {
    fn end(&mut self, id: u64, how: &'static str) {
        assert!(self.live.remove(&id).is_some(), "request {id} ended ({how}) but was not live");
        assert!(self.ended.insert(id, how).is_none(), "request {id} ended twice");
    }
    fn with(&self, state: State) -> Vec<u64> {
        let mut v: Vec<u64> = self.live.iter().filter(|(_, s)| **s == state).map(|(id, _)| *id).collect();
        v.sort_unstable();
        v
    }
}

fn drain(l: &mut Limiter, book: &mut Book, store: &mut MemoryStore, now: u64) -> Option<u64> {
    for _ in 0..100_000 {
        match l.poll_output() {
            Output::Send(id) => {
                let was = book.live.insert(id, State::InFlight);
                assert!(matches!(was, Some(State::Queued) | Some(State::Reserving)), "Send({id}) from {was:?}");
            }
            Output::Reserve(r) => {
                let was = book.live.insert(r.id, State::Reserving);
                assert_eq!(was, Some(State::Queued), "Reserve({}) from {was:?}", r.id);
                book.reservations.insert(r.id, r);
                if let Some(n) = &mut book.probes_since_failure {
                    *n += 1;
                }
            }
            Output::Share(u) => store.record(now, "p", &u),
            Output::Fail(id, _) => book.end(id, "failed"),
            Output::Observe(Observation::StoreUnavailable { id, .. }) => {
                // One failure per outage step: the reservations that were out when the store
                // went away fail for the same cause, so a new failure needs a new reservation.
                assert_ne!(book.probes_since_failure, Some(0), "StoreUnavailable({id}) counted twice in one outage step");
                book.probes_since_failure = Some(0);
            }
            Output::Observe(Observation::StoreRecovered) => book.probes_since_failure = None,
            Output::Observe(_) => {}
            Output::WaitUntil(t) => {
                assert!(t <= now.saturating_add(LONGEST_WAIT), "a wait of {} s, past the bound on waits", (t - now) / SECOND);
                return Some(t);
            }
            Output::Idle => return None,
        }
    }
    panic!("outputs never drained");
}

/// A store reply as a driver reads it: its length first, then the core's reader; a reply it
/// cannot read is no answer (`Unavailable`). The reader never panics, and its message is short.
fn read_reply(reply: &[Item]) -> ReservationAnswer {
    if let Err(e) = check_reply_len(reply.len()) {
        assert!(e.message().len() < 200, "{e}");
        return ReservationAnswer::Unavailable;
    }
    let items: Vec<ReplyItem<'_>> = reply.iter().map(Item::reply_item).collect();
    match parse_reserve_answer(&items) {
        Ok(answer) => answer,
        Err(e) => {
            assert!(e.message().len() < 2_000, "{} bytes", e.message().len());
            ReservationAnswer::Unavailable
        }
    }
}

fn answer_of(kind: u8, retry_ns: u64, scope: u8) -> ReservationAnswer {
    let retry_ms = u32::try_from(retry_ns / 1_000_000).unwrap_or(u32::MAX);
    const SCOPES: [SharedScope; 6] = [
        SharedScope::Edge,
        SharedScope::Invalid,
        SharedScope::Global,
        SharedScope::Route,
        SharedScope::Bucket,
        SharedScope::Pioneer,
    ];
    const PROCESSES: [u32; 6] = [0, 1, 2, 3, 1000, u32::MAX];
    match kind {
        0 => ReservationAnswer::GRANTED,
        // Any process count, including nonsense (0, u32::MAX): never a panic.
        // and any lease count (a hostile store may lease more than was asked for).
        // And any store clock, also one that jumps about.
        1 => ReservationAnswer::Granted {
            processes: Some(PROCESSES[scope as usize]),
            leased: PROCESSES[(retry_ms % 6) as usize],
            store_time: match retry_ms % 4 {
                0 => None,
                1 => Some(0),
                2 => Some(u64::MAX),
                _ => Some(u64::from(retry_ms) * 1_000_000),
            },
        },
        2 => ReservationAnswer::Denied {
            retry_after: retry_ns,
            scope: SCOPES[scope as usize],
            processes: retry_ms.is_multiple_of(2).then_some(PROCESSES[scope as usize]),
        },
        _ => ReservationAnswer::Unavailable,
    }
}

/// Hands `answer` to the limiter for reserving request `id` and updates the book: the request
/// is queued again unless the drain sends or fails it.
fn answer(l: &mut Limiter, book: &mut Book, id: u64, now: u64, a: ReservationAnswer) {
    l.handle_reservation(now, id, a).expect("reserving");
    book.live.insert(id, State::Queued);
}

fn run(ops: Vec<Op>, fail_closed: bool, max_wait: bool) {
    let mut config = Config::default();
    config.global_limit = 5;
    config.max_wait = max_wait.then_some(300 * SECOND);
    config.bucket_idle_ttl = 30 * SECOND;
    let policy = if fail_closed { OnUnavailable::FailClosed } else { OnUnavailable::FailOpen };
    config.shared = Some(SharedConfig::with_policy(policy));
    let mut store = MemoryStore::new(config.shared.as_ref().unwrap());
    let mut l = Limiter::new(config).unwrap();
    let mut book = Book::default();
    let mut now = 0u64;
    let mut wake: Option<u64> = None;
    for op in ops {
        match op {
            Op::Enqueue { route, channel, identity, deadline } => {
                let path = match route {
                    0 => format!("/channels/{}/messages", 100_000_000_000_000_000u64 + u64::from(channel)),
                    1 => format!("/guilds/{}/members", 100_000_000_000_000_000u64 + u64::from(channel)),
                    2 => "/interactions/1/tok/callback".to_string(),
                    _ => "/users/@me".to_string(),
                };
                let mut r = Request::new("POST", path).identity(format!("bot{identity}"));
                if let Some(d) = deadline {
                    r = r.deadline(now + u64::from(d) * 1_000_000);
                }
                match l.enqueue(now, r) {
                    Ok(id) => {
                        book.live.insert(id, State::Queued);
                    }
                    Err(e) => assert_eq!(e.code(), "limiter_closed"),
                }
            }
            Op::AnswerReply { pick, reply } => {
                let reserving = book.with(State::Reserving);
                if reserving.is_empty() {
                    continue;
                }
                let a = read_reply(&reply);
                answer(&mut l, &mut book, reserving[pick as usize % reserving.len()], now, a);
            }
            Op::Answer { pick, answer: kind, retry_ns, scope, stray } => {
                let a = answer_of(kind, retry_ns, scope);
                if let Some(x) = stray {
                    // Not reserving: an error (ignored for an ended one), never a panic.
                    let id = u64::from(x);
                    if book.live.get(&id) != Some(&State::Reserving) {
                        let r = l.handle_reservation(now, id, a);
                        if let Err(e) = r {
                            assert!(matches!(e.code(), "unknown_request" | "invalid_state"), "{e}");
                        }
                    }
                } else {
                    let reserving = book.with(State::Reserving);
                    if reserving.is_empty() {
                        continue;
                    }
                    answer(&mut l, &mut book, reserving[pick as usize % reserving.len()], now, a);
                }
            }
            Op::AskStore { pick } => {
                let reserving = book.with(State::Reserving);
                if reserving.is_empty() {
                    continue;
                }
                let id = reserving[pick as usize % reserving.len()];
                let a = store.reserve(now, "p", &book.reservations[&id]);
                answer(&mut l, &mut book, id, now, a);
            }
            Op::Respond { pick, status, headers } => {
                let flying = book.with(State::InFlight);
                if flying.is_empty() {
                    continue;
                }
                let id = flying[pick as usize % flying.len()];
                let d = l.handle_response(now, id, &Response::new(status, HEADER_SETS[headers as usize])).expect("in flight");
                match d {
                    Disposition::Complete => book.end(id, "completed"),
                    Disposition::Retry | Disposition::Failed => {
                        book.live.insert(id, State::Queued);
                    }
                }
            }
            Op::Fail { pick, maybe_sent } => {
                let flying = book.with(State::InFlight);
                if flying.is_empty() {
                    continue;
                }
                let id = flying[pick as usize % flying.len()];
                let failure = if maybe_sent { Failure::MaybeSent } else { Failure::NotSent };
                l.handle_failure(now, id, failure).expect("in flight");
                book.live.insert(id, State::Queued);
            }
            Op::Cancel { pick } => {
                let mut all: Vec<u64> = book.live.keys().copied().collect();
                all.sort_unstable();
                if all.is_empty() {
                    continue;
                }
                let id = all[pick as usize % all.len()];
                l.cancel(now, id).expect("live request");
                book.end(id, "cancelled");
            }
            Op::Advance { ms } => {
                now += u64::from(ms) * 1_000_000;
                if let Some(w) = wake
                    && w <= now
                {
                    l.handle_timeout(w);
                    drain(&mut l, &mut book, &mut store, w);
                }
                l.handle_timeout(now);
            }
            Op::Close => l.close(now),
        }
        wake = drain(&mut l, &mut book, &mut store, now);
        assert_eq!(l.queued(), book.with(State::Queued).len(), "queued count");
        assert_eq!(l.in_flight(), book.with(State::InFlight).len(), "in-flight count");
        assert_eq!(l.reserving(), book.with(State::Reserving).len(), "reserving count");
    }
    // Finish as a working store and server would: grant every reservation, answer every send,
    // let time pass; every request must end exactly once.
    for _ in 0..20_000 {
        if let Some(&id) = book.with(State::Reserving).first() {
            answer(&mut l, &mut book, id, now, ReservationAnswer::GRANTED);
        } else if let Some(&id) = book.with(State::InFlight).first() {
            now += 1_000_000;
            if l.handle_response(now, id, &Response::new(200, &[])).expect("in flight") == Disposition::Complete {
                book.end(id, "completed");
            } else {
                book.live.insert(id, State::Queued);
            }
        } else if let Some(w) = wake {
            now = now.max(w);
            l.handle_timeout(now);
        } else {
            break;
        }
        wake = drain(&mut l, &mut book, &mut store, now);
    }
    assert!(book.live.is_empty(), "requests never ended: {:?}", book.live);
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(300), ..ProptestConfig::default() })]
    #[test]
    fn arbitrary_shared_mode_inputs_never_panic_and_end_every_request_once(
        ops in proptest::collection::vec(op(), 1..120),
        fail_closed in any::<bool>(),
        max_wait in any::<bool>(),
    ) {
        run(ops, fail_closed, max_wait);
    }
}
