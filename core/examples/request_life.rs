//! Request lives in a loop, for counting instructions, which unlike a timing do not move with
//! the machine's load: `cargo build --release -p ratelane --example request_life`, then
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='request_life::life' \
//!     target/release/examples/request_life <buckets> <lives> [<max round trip, µs>]
//! ```
//!
//! and divide the instructions collected by `<lives>`. A life is the one of `benches/client.rs`
//! (enqueue, send, answer with Discord headers, drain) at `<buckets>` learned buckets; with a
//! maximum round trip the answers come back after 0 to that many microseconds, spread, as real
//! round trips are (the latency estimates then do their real work), instead of at once.

use ratelane::{Config, Limiter, MILLISECOND, Output, Request, Response, SECOND};

const MICROSECOND: u64 = 1_000;

const HEADERS: [(&str, &str); 4] = [
    ("X-RateLimit-Limit", "1000000"),
    ("X-RateLimit-Remaining", "999999"),
    ("X-RateLimit-Reset-After", "0.001"),
    ("X-RateLimit-Bucket", "bench"),
];

fn drain(l: &mut Limiter) -> Option<u64> {
    let mut sent = None;
    loop {
        match l.poll_output() {
            Output::Send(id) => sent = Some(id),
            Output::WaitUntil(_) | Output::Idle => return sent,
            _ => {}
        }
    }
}

/// One life: enqueue at `now`, send, answer `trip` later, drain.
#[inline(never)]
fn life(l: &mut Limiter, now: u64, path: &str, trip: u64) {
    l.enqueue(now, Request::new("POST", path)).expect("a valid request");
    let id = drain(l).expect("sent at once");
    l.handle_response(now + trip, id, &Response::new(200, &HEADERS)).expect("a known request");
    drain(l);
}

/// The lives that learn the buckets (not counted: another function than [`life`]).
#[inline(never)]
fn learn(l: &mut Limiter, path: &str) {
    l.enqueue(MILLISECOND, Request::new("POST", path)).expect("a valid request");
    let id = drain(l).expect("sent at once");
    l.handle_response(MILLISECOND, id, &Response::new(200, &HEADERS)).expect("a known request");
    drain(l);
}

fn arg(n: usize, default: u64) -> u64 {
    std::env::args().nth(n).map_or(default, |a| a.parse().expect("a whole number"))
}

fn main() {
    let (buckets, lives, max_trip_us) = (arg(1, 10_000) as usize, arg(2, 20_000), arg(3, 0));
    let mut config = Config::default();
    // As the criterion benchmark: the engine, not the global limit's waiting.
    config.global_limit = 0;
    config.invalid_request_limit = 0;
    config.bucket_idle_ttl = 24 * 3600 * SECOND;
    let mut l = Limiter::new(config).expect("a valid config");
    let paths: Vec<String> =
        (0..buckets).map(|i| format!("/channels/{}/messages", 100_000_000_000_000_000u64 + i as u64)).collect();
    for p in &paths {
        learn(&mut l, p);
    }
    let (mut now, mut i) = (SECOND, 0usize);
    for _ in 0..lives {
        i = (i + 7919) % buckets;
        now += MILLISECOND;
        // Spread over 0..=max by a fixed stride: the same lives on every run.
        let trip = if max_trip_us == 0 { 0 } else { (i as u64 * 7919) % (max_trip_us + 1) * MICROSECOND };
        life(&mut l, now, &paths[i], trip);
    }
    println!("{} buckets, {lives} lives", l.buckets());
}
