//! Redis against the in-memory stores on random sequences: same configs, same keys, same
//! times (through `now_ns`), so every answer must be equal, field for field, and a key must
//! exist in Redis exactly when the store holds it. Times are arbitrary nanoseconds from
//! four epochs (0, a Unix time, 2^62, and one that runs into the end of the `u64` clock), so
//! the scripts' split of seconds and nanoseconds, their sub-millisecond arithmetic and their
//! refusals at the end of the clock (the store's `invalid_request`) are exercised.
//!
//! Bounded: 32 sequences of at most 40 steps per algorithm (about 4,000 script calls), or
//! `PROPTEST_CASES` sequences when that is set.

mod support;

use std::cell::RefCell;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use ratelane::Nanos;
use ratelane::server::{
    Decision, FixedWindow, FixedWindowStore, Gcra, GcraStore, LeakyBucket, LeakyBucketStore, Store,
};
use ratelane_redis::{RedisFixedWindow, RedisGcra, RedisLeakyBucket};

const CASES: u32 = 32;
const MIN_TTL_MS: u64 = 60_000;
/// The last epoch leaves about 30 s before the end of the clock: a sequence of up to 40 steps
/// of up to 4 periods of up to 2 s × 6 may run past it.
const EPOCHS: [Nanos; 4] = [0, 1_732_364_823_123_456_789, 1 << 62, u64::MAX - 30_000_000_000];

/// `CASES` sequences, or `PROPTEST_CASES` when set (to explore more, locally).
fn runner() -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok());
    TestRunner::new(Config { cases: cases.unwrap_or(CASES), ..Config::default() })
}

/// A duration in nanoseconds: tiny, around `scale`, or several `scale`s.
fn duration(scale: Nanos) -> impl Strategy<Value = Nanos> {
    prop_oneof![0..1_000u64, 0..scale.max(1), 0..scale.max(1) * 4]
}

/// 1 ns to 2 s, biased towards awkward values.
fn period() -> impl Strategy<Value = Nanos> {
    prop_oneof![Just(333_333_333u64), Just(1_000_000), 1..1_000u64, 1..2_000_000_000u64]
}

const KEYS: [&str; 2] = ["a", "b"];

/// Compares one step; `redis` is the answer through the script, `memory` the store's.
fn same<T: PartialEq + std::fmt::Debug>(
    step: usize,
    redis: T,
    memory: T,
    redis_holds_key: bool,
    memory_holds_key: bool,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(redis, memory, "step {}", step);
    prop_assert_eq!(redis_holds_key, memory_holds_key, "key existence, step {}", step);
    Ok(())
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn gcra_in_redis_equals_the_store() {
    let con = RefCell::new(support::connection());
    let strategy = (period(), 1..=6u32, prop::sample::select(EPOCHS.to_vec())).prop_flat_map(
        |(interval, burst, epoch)| {
            let step = (duration(interval * u64::from(burst)), 0..2usize, 0..=burst + 1);
            (Just((interval, burst, epoch)), prop::collection::vec(step, 1..40))
        },
    );
    runner()
        .run(&strategy, |((interval, burst, epoch), steps)| {
            let con = &mut *con.borrow_mut();
            let prefix = support::unique_prefix(con, "prop:gcra");
            let gcra = Gcra::new(interval, burst).unwrap();
            let limiter = RedisGcra::new(gcra).unwrap().with_min_ttl_ms(MIN_TTL_MS);
            let mut store: GcraStore = Store::new(gcra, 1000).unwrap();
            let mut now = epoch;
            for (i, (advance, key, n)) in steps.into_iter().enumerate() {
                now = now.saturating_add(advance);
                let redis_key = format!("{prefix}{}", KEYS[key]);
                let redis = limiter.check_n_at(con, &redis_key, n, now).map_err(|e| e.code());
                let memory = match store.check_n(KEYS[key], now, n) {
                    Ok(Ok(d)) => Ok(d),
                    Ok(Err(_)) => Err("insufficient_capacity"),
                    Err(e) => Err(e.code()),
                };
                // A weight above the burst is answered without a round trip: Redis does not
                // see the key then (the store may sweep it if it has emptied meanwhile).
                let memory_holds = store.state(KEYS[key]).is_some();
                let held =
                    if redis.is_ok() { support::exists(con, &redis_key) } else { memory_holds };
                same(i, redis, memory, held, memory_holds)?;
            }
            Ok(())
        })
        .unwrap();
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn leaky_bucket_in_redis_equals_the_store() {
    let con = RefCell::new(support::connection());
    let config = (1..=6u32, period(), 1..=3u32, prop::option::of(period()));
    let strategy = (config, prop::sample::select(EPOCHS.to_vec())).prop_flat_map(
        |((size, drip_rate, drip_size, min_interval), epoch)| {
            let factor = prop::option::of(prop::sample::select(vec![0.34, 0.5, 1.0]));
            let step = (duration(drip_rate * u64::from(size)), 0..2usize, factor);
            (
                Just((size, drip_rate, drip_size, min_interval, epoch)),
                prop::collection::vec(step, 1..40),
            )
        },
    );
    runner()
        .run(&strategy, |((size, drip_rate, drip_size, min_interval, epoch), steps)| {
            let con = &mut *con.borrow_mut();
            let prefix = support::unique_prefix(con, "prop:leaky");
            let mut bucket = LeakyBucket::new(size, drip_rate, drip_size).unwrap();
            if let Some(min_interval) = min_interval {
                bucket = bucket.with_min_interval(min_interval).unwrap();
            }
            let limiter = RedisLeakyBucket::new(bucket).unwrap().with_min_ttl_ms(MIN_TTL_MS);
            let mut store: LeakyBucketStore = Store::new(bucket, 1000).unwrap();
            let mut now = epoch;
            for (i, (advance, key, factor)) in steps.into_iter().enumerate() {
                now = now.saturating_add(advance);
                let redis_key = format!("{prefix}{}", KEYS[key]);
                let (redis, memory): (Decision, Decision) = match factor {
                    None => (
                        limiter.check_at(con, &redis_key, now).unwrap(),
                        store.check(KEYS[key], now),
                    ),
                    Some(f) => (
                        limiter.check_scaled_at(con, &redis_key, f, now).unwrap(),
                        store.check_scaled(KEYS[key], now, f).unwrap(),
                    ),
                };
                let held = support::exists(con, &redis_key);
                same(i, redis, memory, held, store.state(KEYS[key]).is_some())?;
            }
            Ok(())
        })
        .unwrap();
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Check,
    Schedule,
    Release,
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn fixed_window_in_redis_equals_the_store() {
    let con = RefCell::new(support::connection());
    let strategy = (1..=4u32, period(), prop::sample::select(EPOCHS.to_vec())).prop_flat_map(
        |(quota, window, epoch)| {
            let op = prop::sample::select(vec![Op::Check, Op::Schedule, Op::Schedule, Op::Release]);
            let step = (duration(window), 0..2usize, op);
            (Just((quota, window, epoch)), prop::collection::vec(step, 1..40))
        },
    );
    runner()
        .run(&strategy, |((quota, window, epoch), steps)| {
            let con = &mut *con.borrow_mut();
            let prefix = support::unique_prefix(con, "prop:fixed");
            let fixed = FixedWindow::new(quota, window).unwrap();
            let limiter = RedisFixedWindow::new(fixed).unwrap().with_min_ttl_ms(MIN_TTL_MS);
            let mut store: FixedWindowStore = Store::new(fixed, 1000).unwrap();
            let mut now = epoch;
            for (i, (advance, key, op)) in steps.into_iter().enumerate() {
                now = now.saturating_add(advance);
                let (k, redis_key) = (KEYS[key], format!("{prefix}{}", KEYS[key]));
                let (redis, memory) = match op {
                    Op::Check => (
                        format!("{:?}", limiter.check_at(con, &redis_key, now).unwrap()),
                        format!("{:?}", store.check(k, now)),
                    ),
                    // A job released after u64::MAX is refused by both, with one code.
                    Op::Schedule => (
                        format!("{:?}", limiter.schedule_at(con, &redis_key, now).map_err(|e| e.code())),
                        format!("{:?}", store.schedule(k, now).map_err(|e| e.code())),
                    ),
                    Op::Release => (
                        format!("{:?}", limiter.release_at(con, &redis_key, now).unwrap()),
                        format!("{:?}", store.release(k, now)),
                    ),
                };
                let held = support::exists(con, &redis_key);
                same(i, redis, memory, held, store.state(k).is_some())?;
            }
            Ok(())
        })
        .unwrap();
}
