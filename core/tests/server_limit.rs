//! The dynamic store over a [`Limit`] answers exactly like the typed store of its algorithm,
//! on random sequences of calls: the same decisions, bookings, refusals and errors, and the
//! same stored keys and untracked count (small `max_keys`, so that eviction is exercised).

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratelane::server::{
    Answer, FixedWindow, FixedWindowStore, Gcra, GcraStore, LeakyBucket, LeakyBucketStore, Limit,
    LimitStore, Op,
};
use ratelane::{Error, Nanos};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

/// One step: a key out of a few, a move of the clock (sometimes backwards, sometimes to the
/// end of the `u64` range), and an op selector with its argument.
type Step = (u8, i64, bool, u8, u32);

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec((0u8..6, -50i64..400, prop::bool::weighted(0.03), 0u8..5, 0u32..6), 1..120)
}

/// The clocks of a sequence: a walk from `start`, or the end of the range when `end` is set.
fn instants(start: Nanos, steps: &[Step]) -> Vec<Nanos> {
    let mut now = start;
    steps
        .iter()
        .map(|&(_, delta, end, _, _)| {
            now = now.saturating_add_signed(delta * 10);
            if end { u64::MAX - u64::from(delta.unsigned_abs() as u32) } else { now }
        })
        .collect()
}

fn key(k: u8) -> String {
    format!("key:{k}")
}

type Answered = Result<Answer, Error>;

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn gcra(interval in 1u64..60, burst in 1u32..5, max_keys in 1usize..5, start in 0u64..1000, steps in steps()) {
        let gcra = Gcra::new(interval, burst).unwrap();
        let mut typed = GcraStore::new(gcra, max_keys).unwrap();
        let mut dynamic = LimitStore::new(Limit::from(gcra), max_keys).unwrap();
        for (&(k, _, _, op, n), now) in steps.iter().zip(instants(start, &steps)) {
            let (expected, got): (Answered, Answered) = if op % 2 == 0 {
                let typed = typed.check(&key(k), now).map(Answer::Decision);
                (typed, dynamic.apply(&key(k), now, Op::Check))
            } else {
                let typed = typed.check_n(&key(k), now, n).map(|a| match a {
                    Ok(d) => Answer::Decision(d),
                    Err(e) => Answer::InsufficientCapacity(e),
                });
                (typed, dynamic.apply(&key(k), now, Op::CheckN(n)))
            };
            prop_assert_eq!(expected, got);
            prop_assert_eq!((typed.len(), typed.untracked()), (dynamic.len(), dynamic.untracked()));
        }
    }

    #[test]
    fn leaky_bucket(size in 1u32..5, rate in 1u64..60, drip in 1u32..3, min_interval in prop::option::of(1u64..90),
                    max_keys in 1usize..5, start in 0u64..1000, steps in steps()) {
        let mut bucket = LeakyBucket::new(size, rate, drip).unwrap();
        if let Some(m) = min_interval {
            bucket = bucket.with_min_interval(m).unwrap();
        }
        let mut typed = LeakyBucketStore::new(bucket, max_keys).unwrap();
        let mut dynamic = LimitStore::new(Limit::from(bucket), max_keys).unwrap();
        for (&(k, _, _, op, n), now) in steps.iter().zip(instants(start, &steps)) {
            let (expected, got): (Answered, Answered) = if op % 2 == 0 {
                (Ok(Answer::Decision(typed.check(&key(k), now))), dynamic.apply(&key(k), now, Op::Check))
            } else {
                // Factors from 0 (refused) to 1.25 (refused), through (0, 1].
                let factor = f64::from(n) / 4.0;
                let typed = typed.check_scaled(&key(k), now, factor).map(Answer::Decision);
                (typed, dynamic.apply(&key(k), now, Op::CheckScaled(factor)))
            };
            prop_assert_eq!(expected, got);
            prop_assert_eq!((typed.len(), typed.untracked()), (dynamic.len(), dynamic.untracked()));
        }
    }

    #[test]
    fn fixed_window(quota in 1u32..4, window in 1u64..200, max_keys in 1usize..5, start in 0u64..1000, steps in steps()) {
        let fixed = FixedWindow::new(quota, window).unwrap();
        let mut typed = FixedWindowStore::new(fixed, max_keys).unwrap();
        let mut dynamic = LimitStore::new(Limit::from(fixed), max_keys).unwrap();
        for (&(k, _, _, op, _), now) in steps.iter().zip(instants(start, &steps)) {
            let (expected, got): (Answered, Answered) = match op % 3 {
                0 => (Ok(Answer::Decision(typed.check(&key(k), now))), dynamic.apply(&key(k), now, Op::Check)),
                1 => (typed.schedule(&key(k), now).map(Answer::Scheduled), dynamic.apply(&key(k), now, Op::Schedule)),
                _ => (Ok(Answer::Released(typed.release(&key(k), now))), dynamic.apply(&key(k), now, Op::Release)),
            };
            prop_assert_eq!(expected, got);
            prop_assert_eq!((typed.len(), typed.untracked()), (dynamic.len(), dynamic.untracked()));
        }
    }
}
