//! Request lives in a loop, for counting instructions, which unlike a timing do not move with
//! the machine's load: `cargo build --release -p ratelane --example request_life`, then
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='request_life::counted' \
//!     target/release/examples/request_life <buckets> <lives> [<max round trip, µs>]
//! ```
//!
//! and divide the instructions collected by `<lives>`. A life is the one `benches/client.rs`
//! times (`benches/support/life.rs`: enqueue, send, answer with Discord headers, drain), at
//! `<buckets>` learned buckets; with a maximum round trip the answers come back after 0 to that
//! many microseconds, spread, as real round trips are (the latency estimates then do their real
//! work), instead of at once.

use ratelane::{Config, Limiter, MILLISECOND, SECOND};

const MICROSECOND: u64 = 1_000;

#[path = "../benches/support/life.rs"]
mod life;

/// One life (`benches/support/life.rs`): the function callgrind counts.
#[inline(never)]
fn counted(l: &mut Limiter, now: u64, path: &str, trip: u64) {
    life::life(l, now, path, trip);
}

/// The lives that learn the buckets (not counted: another function than [`counted`]).
#[inline(never)]
fn learn(l: &mut Limiter, path: &str) {
    life::life(l, MILLISECOND, path, 0);
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
        counted(&mut l, now, &paths[i], trip);
    }
    println!("{} buckets, {lives} lives", l.buckets());
}
