//! Server-side limiters: the cost of one keyed check, GCRA side by side with governor's keyed
//! limiter on the same keys, single-threaded, and the memory per key. Results and the exact
//! command are in BENCHMARKS.md ("Server-side limiters").
//!
//! `cargo bench -p ratelane --bench server` (warm-up 1 s and measurement 3 s are set below).
//!
//! Every check is admitted and no key ever expires (interval 1 ms, burst 10⁹, time advancing
//! 1 ns per check), so both sides measure the steady-state lookup-and-update path on a live
//! key, our amortised cleanup included.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use ratelane::MILLISECOND;
use ratelane::server::{FixedWindow, FixedWindowStore, Gcra, GcraState, GcraStore, LeakyBucket};
use ratelane::server::{LeakyBucketStore, Store};

const BURST: u32 = 1_000_000_000;

fn gcra() -> Gcra {
    Gcra::new(MILLISECOND, BURST).expect("valid")
}

fn quota() -> Quota {
    Quota::with_period(Duration::from_millis(1))
        .expect("non-zero")
        .allow_burst(NonZeroU32::new(BURST).expect("non-zero"))
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("user:{i}")).collect()
}

/// Round-robin over `n` keys.
fn next(i: &mut usize, n: usize) -> usize {
    *i += 1;
    if *i == n {
        *i = 0;
    }
    *i
}

fn gcra_side_by_side(c: &mut Criterion) {
    let mut group = c.benchmark_group("gcra_check");
    for n in [1, 10_000, 100_000] {
        let keys = keys(n);
        group.bench_function(BenchmarkId::new("ratelane", n), |b| {
            let mut store = GcraStore::new(gcra(), 2 * n).expect("valid");
            let (mut now, mut i) = (0, 0);
            b.iter(|| {
                now += 1;
                black_box(store.check(keys[next(&mut i, n)].as_str(), now).map(|d| d.allowed))
            });
        });
        // governor reading its fake clock: the algorithm and the map, no clock cost (the
        // harness advances the clock by 1 ns per check, one atomic add).
        group.bench_function(BenchmarkId::new("governor_fake_clock", n), |b| {
            let clock = FakeRelativeClock::default();
            let limiter = RateLimiter::dashmap_with_clock(quota(), clock.clone());
            let mut i = 0;
            b.iter(|| {
                clock.advance(Duration::from_nanos(1));
                black_box(limiter.check_key(&keys[next(&mut i, n)]).is_ok())
            });
        });
        // What the harness adds to the line above: advancing the fake clock alone.
        if n == 1 {
            group.bench_function("harness_fake_clock_advance", |b| {
                let clock = FakeRelativeClock::default();
                b.iter(|| clock.advance(Duration::from_nanos(1)));
            });
        }
        // governor as most users run it: `RateLimiter::keyed` with its default clock.
        group.bench_function(BenchmarkId::new("governor_default_clock", n), |b| {
            let limiter = RateLimiter::keyed(quota());
            let mut i = 0;
            b.iter(|| black_box(limiter.check_key(&keys[next(&mut i, n)]).is_ok()));
        });
    }
    group.finish();
}

fn other_algorithms(c: &mut Criterion) {
    let n = 10_000;
    let keys = keys(n);
    let mut group = c.benchmark_group("other_check");
    group.bench_function(BenchmarkId::new("leaky_bucket", n), |b| {
        let bucket = LeakyBucket::new(BURST, MILLISECOND, 1).expect("valid");
        let mut store = LeakyBucketStore::new(bucket, 2 * n).expect("valid");
        let (mut now, mut i) = (0, 0);
        b.iter(|| {
            now += 1;
            black_box(store.check(keys[next(&mut i, n)].as_str(), now).allowed)
        });
    });
    group.bench_function(BenchmarkId::new("fixed_window", n), |b| {
        let window = FixedWindow::new(BURST, 1_000_000 * MILLISECOND).expect("valid");
        let mut store = FixedWindowStore::new(window, 2 * n).expect("valid");
        let (mut now, mut i) = (0, 0);
        b.iter(|| {
            now += 1;
            black_box(store.check(keys[next(&mut i, n)].as_str(), now).allowed)
        });
    });
    group.finish();
}

/// Resident memory of this process, in bytes (Linux; 4 KiB pages).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    Some(statm.split_whitespace().nth(1)?.parse::<u64>().ok()? * 4096)
}

/// Bytes of resident memory per key once `n` `u64` keys are stored (no per-key heap
/// allocation, so only the state and the map are counted; the tables are large enough to be
/// mapped and unmapped whole, so measuring one store after the other is fair).
fn memory_per_key(n: u64) {
    let before = resident_bytes();
    let mut store: Store<Gcra, u64> = Store::new(gcra(), 2 * n as usize).expect("valid");
    for key in 0..n {
        store.check(&key, 0).expect("an instant the GCRA takes");
    }
    let ours =
        resident_bytes().zip(before).map(|(after, before)| (after - before) as f64 / n as f64);
    assert_eq!(store.len() as u64, n);
    drop(store);

    let before = resident_bytes();
    let limiter = RateLimiter::dashmap_with_clock(quota(), FakeRelativeClock::default());
    for key in 0..n {
        let _ = limiter.check_key(&key);
    }
    let theirs =
        resident_bytes().zip(before).map(|(after, before)| (after - before) as f64 / n as f64);
    assert_eq!(limiter.len() as u64, n);
    drop(limiter);

    println!(
        "memory per key ({n} u64 keys, resident set growth): ratelane GcraStore {:.1} B, \
         governor keyed (DashMap) {:.1} B; GCRA state: ratelane {} B",
        ours.unwrap_or(f64::NAN),
        theirs.unwrap_or(f64::NAN),
        size_of::<GcraState>(),
    );
}

fn memory(_: &mut Criterion) {
    memory_per_key(1_000_000);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = memory, gcra_side_by_side, other_algorithms
}
criterion_main!(benches);
