//! Fuzz the shared mode against a fake store that answers every reply shape: a shared-mode
//! limiter's reservations are answered with reply items decoded from the input (integers at
//! every edge, the script's tags and scopes, any text, nils, nested arrays, replies longer than
//! any), read as a driver reads them (`check_reply_len`, then `wire::parse_reserve_answer`; an
//! unreadable reply is `Unavailable`); the same items also go through the server-side limiters'
//! reader (`script::parse_reply`) and the record reader. Nothing may panic, every request ends
//! exactly once, the counts match the outputs, and no wait passes `max_server_wait` (plus a
//! global window). The proptest twin is `core/tests/fuzz_shared.rs` (in the test command).
//!
//! Input: ops of 4 bytes `[kind, a, b, c]`: kind % 6: enqueue (route a % 4, channel b % 4);
//! answer the reserving request a with the reply decoded from the next b % 24 items (an item is
//! 2 bytes: `[k, v]`); respond to in-flight a with status b; cancel a; advance a*b ms; a
//! granted or unavailable answer (b & 1) to reserving a.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use ratelane::server::script::{ReplyItem, check_reply_len, parse_reply};
use ratelane::shared::wire::{parse_record_answer, parse_reserve_answer};
use ratelane::shared::{OnUnavailable, ReservationAnswer, SharedConfig};
use ratelane::{Config, Disposition, Limiter, Output, Request, Response, SECOND};

const LONGEST_WAIT: u64 = 3_600 * SECOND + 2 * SECOND;
const TEXTS: [&str; 12] = ["granted", "denied", "recorded", "decision", "released", "global", "route", "bucket", "pioneer", "edge", "invalid", ""];
const INTS: [i64; 12] = [0, 1, -1, 2, 1_000, 50_000, u32::MAX as i64, u32::MAX as i64 + 1, 9_007_199_254_740_991, 9_007_199_254_740_992, i64::MAX, i64::MIN];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Queued,
    Reserving,
    InFlight,
}

fn item(k: u8, v: u8) -> ReplyItem<'static> {
    match k % 5 {
        0 | 1 => ReplyItem::Int(INTS[usize::from(v) % INTS.len()]),
        2 => ReplyItem::Text(TEXTS[usize::from(v) % TEXTS.len()].into()),
        3 => ReplyItem::Nil,
        _ => ReplyItem::nested(usize::from(v) * 1000),
    }
}

fn read(items: &[ReplyItem<'_>]) -> ReservationAnswer {
    // The other readers take any items without a panic, with short messages.
    if let Err(e) = parse_reply(items) {
        assert!(e.message().len() < 2_000);
    }
    let _ = parse_record_answer(items);
    if check_reply_len(items.len()).is_err() {
        return ReservationAnswer::Unavailable;
    }
    parse_reserve_answer(items).unwrap_or(ReservationAnswer::Unavailable)
}

fn drain(l: &mut Limiter, live: &mut BTreeMap<u64, State>, now: u64) -> Option<u64> {
    for _ in 0..1_000_000 {
        match l.poll_output() {
            Output::Send(id) => assert!(matches!(live.insert(id, State::InFlight), Some(State::Queued | State::Reserving))),
            Output::Reserve(r) => assert_eq!(live.insert(r.id, State::Reserving), Some(State::Queued)),
            Output::Fail(id, _) => assert!(live.remove(&id).is_some(), "fail of a request not live"),
            Output::Share(_) | Output::Observe(_) => {}
            Output::WaitUntil(t) => {
                assert!(t <= now.saturating_add(LONGEST_WAIT), "a wait of {} s", (t - now) / SECOND);
                return Some(t);
            }
            Output::Idle => return None,
        }
    }
    panic!("outputs never drained");
}

fn pick(live: &BTreeMap<u64, State>, state: Option<State>, n: u8) -> Option<u64> {
    let ids: Vec<u64> = live.iter().filter(|(_, s)| state.is_none_or(|x| **s == x)).map(|(id, _)| *id).collect();
    (!ids.is_empty()).then(|| ids[usize::from(n) % ids.len()])
}

fuzz_target!(|data: &[u8]| {
    let mut config = Config::default();
    config.global_limit = 5;
    config.shared = Some(SharedConfig::with_policy(if data.first().is_some_and(|b| b & 1 == 1) {
        OnUnavailable::FailClosed
    } else {
        OnUnavailable::FailOpen
    }));
    let mut l = Limiter::new(config).unwrap();
    let mut live: BTreeMap<u64, State> = BTreeMap::new();
    let mut now = 0u64;
    let mut at = 1;
    while at + 4 <= data.len() {
        let (kind, a, b, c) = (data[at], data[at + 1], data[at + 2], data[at + 3]);
        at += 4;
        match kind % 6 {
            0 => {
                let path = match a % 4 {
                    0 => format!("/channels/{}/messages", 100_000_000_000_000_000u64 + u64::from(b % 4)),
                    1 => format!("/guilds/{}", 100_000_000_000_000_000u64 + u64::from(b % 4)),
                    2 => format!("/webhooks/{}/token{}", 100_000_000_000_000_000u64 + u64::from(b % 4), c % 2),
                    _ => "/interactions/1/tok/callback".to_string(),
                };
                if let Ok(id) = l.enqueue(now, Request::new("POST", path)) {
                    live.insert(id, State::Queued);
                }
            }
            1 => {
                let n = usize::from(b % 24);
                let bytes = data.get(at..at + 2 * n).unwrap_or(&[]);
                at += bytes.len();
                let items: Vec<ReplyItem<'_>> = bytes.chunks_exact(2).map(|kv| item(kv[0], kv[1])).collect();
                let answer = read(&items);
                if let Some(id) = pick(&live, Some(State::Reserving), a) {
                    l.handle_reservation(now, id, answer).expect("reserving");
                    live.insert(id, State::Queued);
                }
            }
            2 => {
                if let Some(id) = pick(&live, Some(State::InFlight), a) {
                    let status = [200u16, 429, 500, 401, 403, 404][usize::from(b) % 6];
                    match l.handle_response(now, id, &Response::new(status, &[])).expect("in flight") {
                        Disposition::Complete => {
                            live.remove(&id);
                        }
                        Disposition::Retry | Disposition::Failed => {
                            live.insert(id, State::Queued);
                        }
                    }
                }
            }
            3 => {
                if let Some(id) = pick(&live, None, a) {
                    l.cancel(now, id).expect("live");
                    live.remove(&id);
                }
            }
            4 => {
                now += u64::from(a) * u64::from(b) * 1_000_000;
                l.handle_timeout(now);
            }
            _ => {
                if let Some(id) = pick(&live, Some(State::Reserving), a) {
                    let answer = if b & 1 == 1 { ReservationAnswer::GRANTED } else { ReservationAnswer::Unavailable };
                    l.handle_reservation(now, id, answer).expect("reserving");
                    live.insert(id, State::Queued);
                }
            }
        }
        drain(&mut l, &mut live, now);
        assert_eq!(l.in_flight(), live.values().filter(|s| **s == State::InFlight).count());
        assert_eq!(l.reserving(), live.values().filter(|s| **s == State::Reserving).count());
        assert_eq!(l.queued(), live.values().filter(|s| **s == State::Queued).count());
    }
});
