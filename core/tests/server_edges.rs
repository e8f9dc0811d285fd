//! The server-side limiters at the edges of their input (issue 16, item 7): instants near the
//! top of the `u64` range, and the legacy `{max, duration, min_interval}` translation under a
//! client that retries exactly at `reset_after`. Each test is one reported failure, replayed
//! deterministically.

use ratelane::server::{FixedWindow, FixedWindowStore, Gcra, GcraStore, LeakyBucket, LegacyLimit};
use ratelane::server::{LeakyBucketStore, Store};
use ratelane::{Nanos, SECOND};

const END: Nanos = u64::MAX;

/// `GcraStore(1 s, burst 3)` admitted 6 of 6 checks at `now = 2^64 - 1 - 3 s`: the TAT
/// saturated at `u64::MAX`, so the bucket never looked fuller than 3 s.
#[test]
fn gcra_near_the_end_of_the_clock_admits_the_burst_only() {
    let mut store: GcraStore = Store::new(Gcra::new(SECOND, 3).unwrap(), 10).unwrap();
    let now = END - 3 * SECOND;
    let admitted = (0..6).filter(|_| store.check("k", now).unwrap().allowed).count();
    assert_eq!(admitted, 3);
    // One nanosecond later an admitted request's TAT could not be stored: refused, not
    // decided, and the store is left alone.
    for later in [now + 1, END] {
        let refused = store.check("k", later).unwrap_err();
        assert_eq!(refused.code(), "invalid_request", "{refused}");
        assert_eq!(store.check_n("k", later, 9).unwrap_err(), refused);
        assert_eq!(store.check("other", later).unwrap_err().code(), "invalid_request");
    }
    assert_eq!(store.len(), 1);
    assert!(!store.check("k", now).unwrap().allowed);
}

/// `FixedWindowStore(2 per 1 s)` admitted 5 of 5 checks at `now = 2^64 - 1`: the window's end
/// saturated at `u64::MAX`, so the store found the key idle and forgot it after every check.
#[test]
fn fixed_window_check_at_the_last_instant_admits_the_quota_only() {
    let mut store: FixedWindowStore = Store::new(FixedWindow::new(2, SECOND).unwrap(), 10).unwrap();
    let admitted = (0..5).filter(|_| store.check("k", END).allowed).count();
    assert_eq!(admitted, 2);
}

/// `FixedWindowStore(2 per 1 s)` scheduled 4 jobs into one window at `now = 2^64 - 1 - 2 s`:
/// every release time past the last representable window saturated to `u64::MAX`.
#[test]
fn fixed_window_never_schedules_more_than_the_quota_into_one_window() {
    let mut store: FixedWindowStore = Store::new(FixedWindow::new(2, SECOND).unwrap(), 10).unwrap();
    let now = END - 2 * SECOND;
    let mut per_window = std::collections::BTreeMap::<Nanos, u32>::new();
    let mut refused = 0;
    for _ in 0..8 {
        match store.schedule("k", now) {
            Ok(s) => *per_window.entry(s.release_at).or_default() += 1,
            Err(e) => {
                assert_eq!(e.code(), "invalid_request", "{e}");
                refused += 1;
            }
        }
    }
    for (&release_at, &jobs) in &per_window {
        assert!(jobs <= 2, "{jobs} jobs released at {release_at}");
    }
    // Three windows start within the clock (end - 2 s, end - 1 s, end); the next would not.
    assert_eq!(per_window.len(), 3, "{per_window:?}");
    assert_eq!(refused, 2);
}

/// Every admitted instant of `bucket` checked by a client that retries exactly at
/// `reset_after`, from `start` until `until`.
fn retry_at_reset_after(bucket: LeakyBucket, start: Nanos, until: Nanos) -> Vec<Nanos> {
    let mut store: LeakyBucketStore = Store::new(bucket, 10).unwrap();
    let (mut now, mut admitted) = (start, Vec::new());
    while now < until {
        let d = store.check("k", now);
        if d.allowed {
            admitted.push(now);
        } else {
            now += d.reset_after;
        }
    }
    admitted
}

/// The most admitted instants within any half-open span of `duration`.
fn most_within(admitted: &[Nanos], duration: Nanos) -> usize {
    (0..admitted.len())
        .map(|i| admitted[i..].iter().take_while(|&&t| t - admitted[i] < duration).count())
        .max()
        .unwrap_or(0)
}

/// `{max: 3, duration: 10 s}` admitted 6 within one duration to a client retrying at
/// `reset_after`, above the documented bound `2 × max − 1 = 5`: the drip rate `10 s / 3` was
/// rounded down, so the third drip came 1 ns before the duration was over.
#[test]
fn legacy_limit_admits_at_most_two_max_minus_one_per_duration() {
    let duration = 10 * SECOND;
    let legacy = LegacyLimit { max: Some(3), duration: Some(duration), min_interval: None };
    let admitted = retry_at_reset_after(LeakyBucket::from_legacy(legacy).unwrap(), 0, 60 * SECOND);
    assert_eq!(most_within(&admitted, duration), 5, "{admitted:?}");
}
