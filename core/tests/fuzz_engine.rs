//! A proptest-based fuzzer for the client engine: arbitrary input sequences, including hostile
//! responses, must never panic, must end every request exactly once, and must not grow without
//! bound, under every header profile (the provider packs turn some 403s and 200s into 429s).
//! (The cargo-fuzz target `engine` in core/fuzz drives the same checks from raw bytes.)

use std::collections::HashMap;

use proptest::prelude::*;
use ratelane::{
    BodyHints, Config, Disposition, Failure, HeaderProfile, Limiter, Output, QueryCost, Request, Response, SECOND,
};

#[derive(Debug, Clone)]
enum Op {
    Enqueue { route: u8, channel: u8, identity: u8, priority: i8, deadline: Option<u16>, method: u8, tokens: Option<u32> },
    Respond {
        pick: u16,
        status: u16,
        headers: Vec<(u8, String)>,
        retry_after: Option<f64>,
        global: Option<bool>,
        errors: Vec<String>,
        cost: Option<(f64, f64, f64)>,
        usage: Option<f64>,
    },
    Fail { pick: u16, maybe_sent: bool },
    Cancel { pick: u16 },
    Advance { ms: u32 },
    Close,
}

const NAMES: &[&str] = &[
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset-After",
    "X-RateLimit-Reset",
    "X-RateLimit-Bucket",
    "X-RateLimit-Scope",
    "X-RateLimit-Global",
    "Retry-After",
    "Date",
    "RateLimit",
    "RateLimit-Policy",
    "x-ratelimit-resource",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-limit-tokens",
    "retry-after-ms",
    "x-ms-retry-after-ms",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-tokens-reset",
    "X-Shopify-Shop-Api-Call-Limit",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u32..20).prop_map(|n| n.to_string()),
        (0u32..100_000).prop_map(|n| format!("{}.{}", n / 1000, n % 1000)),
        Just("-1".to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        Just("99999999999999999999999".to_string()),
        Just("".to_string()),
        Just("user".to_string()),
        Just("shared".to_string()),
        Just("global".to_string()),
        Just("true".to_string()),
        Just("Sun, 06 Nov 1994 08:49:37 GMT".to_string()),
        Just("6m0s".to_string()),
        Just("1.5s".to_string()),
        Just("20ms".to_string()),
        Just("2023-11-14T22:13:21Z".to_string()),
        Just("40/40".to_string()),
        Just("3/40".to_string()),
        "[a-z0-9]{1,8}",
        "\\PC{0,16}",
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (
            0u8..4,
            0u8..4,
            0u8..2,
            -2i8..3,
            proptest::option::of(0u16..20_000),
            0u8..3,
            proptest::option::of(prop_oneof![0u32..30, 0u32..300_000, Just(u32::MAX)]),
        )
            .prop_map(|(route, channel, identity, priority, deadline, method, tokens)| Op::Enqueue {
                route, channel, identity, priority, deadline, method, tokens
            }),
        4 => (
            any::<u16>(),
            prop_oneof![Just(200u16), Just(429), Just(500), Just(502), Just(401), Just(403), Just(404), 100u16..600],
            proptest::collection::vec((0u8..NAMES.len() as u8, value()), 0..6),
            proptest::option::of(prop_oneof![-5.0f64..100.0, Just(f64::NAN), Just(f64::INFINITY), Just(1e300)]),
            proptest::option::of(any::<bool>()),
            proptest::collection::vec(
                prop_oneof![Just("THROTTLED"), Just("RATE_LIMITED"), Just("You have exceeded a secondary rate limit"), Just("x")]
                    .prop_map(str::to_string),
                0..2,
            ),
            proptest::option::of((-1.0f64..2000.0, -1.0f64..2000.0, prop_oneof![Just(0.0f64), Just(f64::NAN), 0.5f64..100.0])),
            proptest::option::of(prop_oneof![-5.0f64..400_000.0, Just(f64::NAN), Just(f64::INFINITY), Just(1e300)]),
        )
            .prop_map(|(pick, status, headers, retry_after, global, errors, cost, usage)| Op::Respond {
                pick, status, headers, retry_after, global, errors, cost, usage
            }),
        1 => (any::<u16>(), any::<bool>()).prop_map(|(pick, maybe_sent)| Op::Fail { pick, maybe_sent }),
        1 => any::<u16>().prop_map(|pick| Op::Cancel { pick }),
        3 => (0u32..120_000).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Close),
    ]
}

#[derive(Default)]
struct Book {
    /// Requests that have not ended yet, and whether they are in flight.
    live: HashMap<u64, bool>,
    ended: HashMap<u64, &'static str>,
}

impl Book {
    fn end(&mut self, id: u64, how: &'static str) {
        assert!(self.live.remove(&id).is_some(), "request {id} ended ({how}) but was not live");
        assert!(self.ended.insert(id, how).is_none(), "request {id} ended twice");
    }
}

fn drain(l: &mut Limiter, book: &mut Book) -> Option<u64> {
    for _ in 0..100_000 {
        match l.poll_output() {
            Output::Send(id) => {
                let was = book.live.insert(id, true);
                assert_eq!(was, Some(false), "Send for request {id} that was not queued");
            }
            Output::Fail(id, _) => book.end(id, "failed"),
            Output::Observe(_) => {}
            Output::Reserve(r) => panic!("Reserve({}) with shared mode off", r.id),
            Output::Share(u) => panic!("Share({u:?}) with shared mode off"),
            Output::WaitUntil(t) => return Some(t),
            Output::Idle => return None,
        }
    }
    panic!("outputs never drained");
}

fn in_flight(book: &Book) -> Vec<u64> {
    let mut v: Vec<u64> = book.live.iter().filter(|(_, f)| **f).map(|(id, _)| *id).collect();
    v.sort_unstable();
    v
}

fn queued(book: &Book) -> Vec<u64> {
    let mut v: Vec<u64> = book.live.iter().filter(|(_, f)| !**f).map(|(id, _)| *id).collect();
    v.sort_unstable();
    v
}

fn run(profile: HeaderProfile, ops: Vec<Op>) {
    let mut config = Config::for_profile(profile);
    config.global_limit = 5;
    config.max_wait = Some(300 * SECOND);
    config.bucket_idle_ttl = 30 * SECOND;
    let mut l = Limiter::new(config).unwrap();
    let mut book = Book::default();
    let mut now = 0u64;
    let mut wake: Option<u64> = None;
    for op in ops {
        match op {
            Op::Enqueue { route, channel, identity, priority, deadline, method, tokens } => {
                let path = match route {
                    0 => format!("/channels/{}/messages", 100_000_000_000_000_000u64 + channel as u64),
                    1 => format!("/guilds/{}/members", 100_000_000_000_000_000u64 + channel as u64),
                    2 => format!("/webhooks/{}/tok{channel}", 100_000_000_000_000_000u64 + channel as u64),
                    _ => "/users/@me".to_string(),
                };
                let method = ["GET", "POST", "PATCH"][method as usize];
                let mut r = Request::new(method, path).identity(format!("bot{identity}")).priority(priority as i32);
                if let Some(d) = deadline {
                    r = r.deadline(now + d as u64 * 1_000_000);
                }
                if let Some(t) = tokens {
                    r = r.cost("tokens", u64::from(t));
                }
                match l.enqueue(now, r) {
                    Ok(id) => {
                        book.live.insert(id, false);
                    }
                    Err(e) => assert_eq!(e.code(), "limiter_closed"),
                }
            }
            Op::Respond { pick, status, headers, retry_after, global, errors, cost, usage } => {
                let flying = in_flight(&book);
                if flying.is_empty() {
                    continue;
                }
                let id = flying[pick as usize % flying.len()];
                let pairs: Vec<(&str, &str)> =
                    headers.iter().map(|(n, v)| (NAMES[*n as usize], v.as_str())).collect();
                let mut response = Response::new(status, &pairs);
                response.body = BodyHints {
                    retry_after,
                    global,
                    errors,
                    cost: cost.map(|(requested, available, restore_rate)| QueryCost {
                        requested: Some(requested),
                        actual: None,
                        maximum_available: Some(1000.0),
                        currently_available: Some(available),
                        restore_rate: Some(restore_rate),
                    }),
                    usage: usage.map(|total| vec![("total_tokens".to_string(), total)]).unwrap_or_default(),
                };
                let d = l.handle_response(now, id, &response).expect("in flight");
                match d {
                    Disposition::Complete => book.end(id, "completed"),
                    Disposition::Retry => {
                        book.live.insert(id, false);
                    }
                    Disposition::Failed => {
                        // The Fail output follows in the drain.
                        book.live.insert(id, false);
                    }
                }
            }
            Op::Fail { pick, maybe_sent } => {
                let flying = in_flight(&book);
                if flying.is_empty() {
                    continue;
                }
                let id = flying[pick as usize % flying.len()];
                let failure = if maybe_sent { Failure::MaybeSent } else { Failure::NotSent };
                l.handle_failure(now, id, failure).expect("in flight");
                book.live.insert(id, false);
            }
            Op::Cancel { pick } => {
                let all: Vec<u64> = {
                    let mut v: Vec<u64> = book.live.keys().copied().collect();
                    v.sort_unstable();
                    v
                };
                if all.is_empty() {
                    continue;
                }
                let id = all[pick as usize % all.len()];
                l.cancel(now, id).expect("live request");
                book.end(id, "cancelled");
            }
            Op::Advance { ms } => {
                now += ms as u64 * 1_000_000;
                if let Some(w) = wake {
                    // Honour the wake-up the engine asked for (as a driver would).
                    if w <= now {
                        l.handle_timeout(w.max(now - ms as u64 * 1_000_000));
                        drain(&mut l, &mut book);
                    }
                }
                l.handle_timeout(now);
            }
            Op::Close => l.close(now),
        }
        wake = drain(&mut l, &mut book);
        assert_eq!(l.queued(), queued(&book).len(), "queued count");
        assert_eq!(l.in_flight(), in_flight(&book).len(), "in-flight count");
    }
    // Finish: answer everything in flight with a success, let time pass, and check that every
    // request ended exactly once and idle state goes away.
    for _ in 0..10_000 {
        let flying = in_flight(&book);
        if let Some(&id) = flying.first() {
            now += 1_000_000;
            if l.handle_response(now, id, &Response::new(200, &[])).expect("in flight") == Disposition::Complete {
                book.end(id, "completed");
            } else {
                book.live.insert(id, false);
            }
        } else if let Some(w) = wake {
            now = now.max(w);
            l.handle_timeout(now);
        } else {
            break;
        }
        wake = drain(&mut l, &mut book);
    }
    assert!(book.live.is_empty(), "requests never ended: {:?}", book.live);
    // Bounded state: with nothing live, a few inputs after the idle TTL evict every bucket.
    for _ in 0..5_000 {
        now += 3600 * SECOND;
        l.handle_timeout(now);
        let _ = drain(&mut l, &mut book);
        if l.buckets() == 0 {
            break;
        }
    }
    assert_eq!(l.buckets(), 0, "idle buckets were never evicted");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]
    #[test]
    fn arbitrary_inputs_never_panic_and_end_every_request_once(
        profile in prop::sample::select(HeaderProfile::ALL),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        run(profile, ops);
    }
}
