//! Fuzz the client engine with arbitrary input sequences decoded from bytes: it must never
//! panic, every request must end exactly once, and its counts must match the outputs.
//!
//! Each op takes 4 bytes: `[kind, a, b, c]`. kinds: enqueue (route a%4, channel b%4, method c%3,
//! identity c>>7), response (pick a, status from b, header set from c), failure (pick a,
//! maybe_sent b&1), cancel (pick a), advance time (a*b ms), close.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use ratelane::{Config, Disposition, Failure, Limiter, Output, Request, Response, SECOND};

const STATUSES: [u16; 8] = [200, 204, 429, 500, 502, 401, 403, 404];
const HEADER_SETS: [&[(&str, &str)]; 8] = [
    &[],
    &[("X-RateLimit-Limit", "2"), ("X-RateLimit-Remaining", "1"), ("X-RateLimit-Reset-After", "1.5"), ("X-RateLimit-Bucket", "a")],
    &[("X-RateLimit-Limit", "2"), ("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset-After", "0.25"), ("X-RateLimit-Bucket", "b")],
    &[("Retry-After", "2"), ("X-RateLimit-Global", "true"), ("X-RateLimit-Scope", "global")],
    &[("Retry-After", "3"), ("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "4"), ("X-RateLimit-Scope", "shared"), ("X-RateLimit-Bucket", "a")],
    &[("X-RateLimit-Limit", "NaN"), ("X-RateLimit-Remaining", "-1"), ("X-RateLimit-Reset-After", "1e309")],
    &[("Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Date", "Sun, 06 Nov 1994 08:49:30 GMT")],
    &[("X-RateLimit-Limit", "1"), ("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset-After", "5"), ("X-RateLimit-Bucket", "c")],
];

fn drain(l: &mut Limiter, live: &mut BTreeMap<u64, bool>) {
    for _ in 0..1_000_000 {
        match l.poll_output() {
            Output::Send(id) => assert_eq!(live.insert(id, true), Some(false), "send of a request not queued"),
            Output::Fail(id, _) => assert!(live.remove(&id).is_some(), "fail of a request not live"),
            Output::Observe(_) => {}
            Output::Reserve(_) | Output::Share(_) => panic!("shared-mode output with shared mode off"),
            Output::WaitUntil(_) | Output::Idle => return,
        }
    }
    panic!("outputs never drained");
}

fn pick(live: &BTreeMap<u64, bool>, in_flight: bool, n: u8) -> Option<u64> {
    let ids: Vec<u64> = live.iter().filter(|(_, f)| !in_flight || **f).map(|(id, _)| *id).collect();
    (!ids.is_empty()).then(|| ids[n as usize % ids.len()])
}

fuzz_target!(|data: &[u8]| {
    let mut config = Config::default();
    config.global_limit = 3;
    config.max_wait = Some(120 * SECOND);
    let mut l = Limiter::new(config).unwrap();
    let mut live: BTreeMap<u64, bool> = BTreeMap::new();
    let mut now = 0u64;
    for op in data.chunks_exact(4) {
        let (a, b, c) = (op[1], op[2], op[3]);
        match op[0] % 6 {
            0 => {
                let path = match a % 4 {
                    0 => format!("/channels/{}/messages", 100_000_000_000_000_000u64 + (b % 4) as u64),
                    1 => format!("/guilds/{}", 100_000_000_000_000_000u64 + (b % 4) as u64),
                    2 => format!("/webhooks/{}/token", 100_000_000_000_000_000u64 + (b % 4) as u64),
                    _ => "/interactions/1/tok/callback".to_string(),
                };
                let method = ["GET", "POST", "PATCH"][(c % 3) as usize];
                let r = Request::new(method, path).identity(if c >> 7 == 1 { "b" } else { "a" });
                if let Ok(id) = l.enqueue(now, r) {
                    live.insert(id, false);
                }
            }
            1 => {
                if let Some(id) = pick(&live, true, a) {
                    let resp = Response::new(STATUSES[(b % 8) as usize], HEADER_SETS[(c % 8) as usize]);
                    match l.handle_response(now, id, &resp).expect("in flight") {
                        Disposition::Complete => {
                            live.remove(&id);
                        }
                        Disposition::Retry | Disposition::Failed => {
                            live.insert(id, false);
                        }
                    }
                }
            }
            2 => {
                if let Some(id) = pick(&live, true, a) {
                    let f = if b & 1 == 1 { Failure::MaybeSent } else { Failure::NotSent };
                    l.handle_failure(now, id, f).expect("in flight");
                    live.insert(id, false);
                }
            }
            3 => {
                if let Some(id) = pick(&live, false, a) {
                    l.cancel(now, id).expect("live");
                    live.remove(&id);
                }
            }
            4 => {
                now += a as u64 * b as u64 * 1_000_000;
                l.handle_timeout(now);
            }
            _ => l.close(now),
        }
        drain(&mut l, &mut live);
        assert_eq!(l.in_flight(), live.values().filter(|f| **f).count());
        assert_eq!(l.queued(), live.values().filter(|f| !**f).count());
        assert!(l.buckets() <= 64, "bucket state grew past what the inputs can name");
    }
});
