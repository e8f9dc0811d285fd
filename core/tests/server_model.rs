//! The server-side limiters against a small reference model, at every instant of the `u64`
//! clock: traces that start near 0, near `u64::MAX` (and cross the end of what a limiter
//! takes) or anywhere between.
//!
//! The model is the documented formulas evaluated in `u128`, where no sum of a time and a
//! duration can overflow, so it never needs to refuse an instant. Each property checks that a
//! store
//!
//! - answers exactly as the model wherever it answers,
//! - refuses (with `invalid_request`, changing nothing) exactly the calls the module docs say
//!   it refuses ("the end of the clock"), and
//! - never admits more than its limit over any span of time, counted independently of both.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratelane::server::{
    Decision, FixedWindow, Gcra, InsufficientCapacity, LeakyBucket, LegacyLimit, Store,
};
use ratelane::{Nanos, SECOND};

/// `cases` per property unless `PROPTEST_CASES` says otherwise; failures are saved next to
/// this file, in `server_model.proptest-regressions`.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

/// The unit of every duration of a trace: nanoseconds, microseconds or seconds, so that the
/// same shapes of traces also run with realistic magnitudes.
fn unit() -> impl Strategy<Value = Nanos> {
    prop::sample::select(vec![1, 1_000, SECOND])
}

/// Where a trace starts: near 0, within `span` of the end of the clock, or anywhere.
fn start(span: Nanos) -> impl Strategy<Value = Nanos> {
    prop_oneof![
        2 => 0..=span,
        3 => (0..=span).prop_map(|back| u64::MAX - back),
        1 => any::<u64>(),
    ]
}

/// `now + dt`, staying at the last instant of the clock once there: time never goes back.
fn advance(now: Nanos, dt: Nanos) -> Nanos {
    now.saturating_add(dt)
}

const KEYS: [&str; 2] = ["a", "b"];

// ---------------------------------------------------------------------------------------------
// GCRA: the TAT in u128.

/// The decision the formulas of `gcra.rs` give for a request of weight `n` at `now` against a
/// key whose theoretical arrival time is `tat`, and the TAT after it.
fn gcra_model(gcra: &Gcra, tat: u128, now: u128, n: u32) -> Result<(Decision, u128), InsufficientCapacity> {
    let (t, burst) = (u128::from(gcra.interval()), gcra.burst());
    if n > burst {
        return Err(InsufficientCapacity { requested: n, capacity: burst });
    }
    let tau = t * u128::from(burst);
    let new_tat = tat.max(now) + u128::from(n) * t;
    let allowed = new_tat - now <= tau;
    let level = if allowed { new_tat - now } else { tat.max(now) - now };
    let remaining = (tau.saturating_sub(level) / t) as u32;
    let nanos = |v: u128| Nanos::try_from(v).expect("a duration within the clock");
    let decision = Decision {
        allowed,
        limit: burst,
        remaining,
        reset_after: nanos(if allowed { (level + t).saturating_sub(tau) } else { new_tat - tau - now }),
        clear_after: nanos(level),
        replenish_after: (remaining < burst)
            .then(|| nanos(level - (tau - (u128::from(remaining) + 1) * t))),
        window: nanos(tau),
    };
    Ok((decision, if allowed { new_tat } else { tat }))
}

/// Every run of admitted `(time, weight)` obeys `cells × T <= burst × T + span`.
fn assert_gcra_rate(admitted: &[(Nanos, u32)], gcra: &Gcra) {
    let (t, tau) = (u128::from(gcra.interval()), u128::from(gcra.window()));
    for i in 0..admitted.len() {
        let mut cells = 0u128;
        for later in &admitted[i..] {
            cells += u128::from(later.1);
            let span = u128::from(later.0 - admitted[i].0);
            assert!(cells * t <= tau + span, "{cells} cells in {span} ns: {gcra:?}");
        }
    }
}

fn gcra_trace() -> impl Strategy<Value = (Gcra, Nanos, Nanos, Vec<(Nanos, usize, u32)>)> {
    (1u64..=50, 1u32..=8, unit()).prop_flat_map(|(interval, burst, unit)| {
        let gcra = Gcra::new(interval * unit, burst).unwrap();
        // The last instant is one window before the end: start around it.
        let span = (u64::from(burst) + 400) * interval * unit;
        let step = (prop_oneof![2 => Just(0), 3 => 0..=3 * interval], 0..KEYS.len(), 0..=burst + 1);
        (Just(gcra), Just(unit), start(span), prop::collection::vec(step, 1..150))
    })
}

proptest! {
    #![proptest_config(config(500))]

    #[test]
    fn gcra_is_the_model_at_every_instant((gcra, unit, start, steps) in gcra_trace()) {
        let mut store = Store::new(gcra, 4).unwrap();
        let mut tats: HashMap<&str, u128> = HashMap::new();
        let mut admitted: HashMap<&str, Vec<(Nanos, u32)>> = HashMap::new();
        let mut now = start;
        for (dt, key, n) in steps {
            now = advance(now, dt * unit);
            let key = KEYS[key];
            let tat = tats.entry(key).or_default();
            match store.check_n(key, now, n) {
                Err(e) => {
                    prop_assert_eq!(e.code(), "invalid_request");
                    prop_assert!(now > u64::MAX - gcra.window(), "refused at {} <= the last instant", now);
                }
                Ok(answer) => {
                    prop_assert!(now <= gcra.last_instant());
                    let expected = gcra_model(&gcra, *tat, u128::from(now), n);
                    match (answer, expected) {
                        (Ok(d), Ok((model, new_tat))) => {
                            prop_assert_eq!(d, model, "{} at {} (TAT {})", key, now, tat);
                            *tat = new_tat;
                            if d.allowed && n > 0 {
                                admitted.entry(key).or_default().push((now, n));
                            }
                        }
                        (Err(e), Err(model)) => prop_assert_eq!(e, model),
                        (ours, model) => prop_assert!(false, "{:?} but the model says {:?}", ours, model),
                    }
                }
            }
        }
        for admitted in admitted.values() {
            assert_gcra_rate(admitted, &gcra);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Leaky bucket: levels and drip clocks in u128.

#[derive(Debug, Clone, Copy, Default)]
struct Level {
    level: u128,
    last_drip: u128,
}

impl Level {
    /// Every whole `rate` since the last drip removes `size`; an emptied bucket stops its clock.
    fn drip(&mut self, now: u128, rate: u128, size: u128) {
        if self.level == 0 || now < self.last_drip {
            return;
        }
        let drips = (now - self.last_drip) / rate;
        if drips * size >= self.level {
            *self = Level::default();
        } else {
            self.level -= drips * size;
            self.last_drip += drips * rate;
        }
    }

    /// The first request into an empty bucket starts its drip clock.
    fn add(&mut self, now: u128) {
        if self.level == 0 {
            self.last_drip = now;
        }
        self.level += 1;
    }

    /// Until the level is at most `target`.
    fn until(&self, target: u128, now: u128, rate: u128, size: u128) -> u128 {
        if self.level <= target {
            return 0;
        }
        ((self.level - target).div_ceil(size) * rate).saturating_sub(now.saturating_sub(self.last_drip))
    }
}

/// The decision of the module docs of `leaky_bucket.rs` for one request at `now`.
fn leaky_model(bucket: &LeakyBucket, main: &mut Level, spacing: &mut Level, now: u128) -> Decision {
    let (size, rate, drip) =
        (u128::from(bucket.size()), u128::from(bucket.drip_rate()), u128::from(bucket.drip_size()));
    let min = bucket.min_interval().map(u128::from);
    main.drip(now, rate, drip);
    if let Some(min) = min {
        spacing.drip(now, min, 1);
    }
    let allowed = main.level < size && spacing.level == 0;
    if allowed {
        main.add(now);
        if min.is_some() {
            spacing.add(now);
        }
    }
    let spacing_wait = min.map_or(0, |min| spacing.until(0, now, min, 1));
    let reset_after = main.until(size - 1, now, rate, drip).max(spacing_wait);
    let remaining = if spacing.level > 0 { 0 } else { size.saturating_sub(main.level) as u32 };
    let nanos = |v: u128| Nanos::try_from(v).expect("a duration within the clock");
    Decision {
        allowed,
        limit: bucket.size(),
        remaining,
        reset_after: nanos(reset_after),
        clear_after: nanos(main.until(0, now, rate, drip).max(spacing_wait)),
        replenish_after: if remaining == 0 {
            Some(nanos(reset_after))
        } else if main.level == 0 {
            None
        } else {
            Some(nanos(main.until(main.level - 1, now, rate, drip)))
        },
        window: nanos(size.div_ceil(drip) * rate),
    }
}

/// Every run of admitted times obeys `count <= size + drip_size × ⌈span / drip_rate⌉`, and two
/// admitted requests are at least `min_interval` apart.
fn assert_leaky_rate(admitted: &[Nanos], bucket: &LeakyBucket) {
    let (size, rate, drip) =
        (u128::from(bucket.size()), u128::from(bucket.drip_rate()), u128::from(bucket.drip_size()));
    for i in 0..admitted.len() {
        for (j, later) in admitted.iter().enumerate().skip(i) {
            let span = u128::from(later - admitted[i]);
            let count = (j - i + 1) as u128;
            assert!(count <= size + drip * span.div_ceil(rate), "{count} in {span} ns: {bucket:?}");
        }
        if let (Some(min), Some(next)) = (bucket.min_interval(), admitted.get(i + 1)) {
            assert!(next - admitted[i] >= min, "closer than min_interval: {bucket:?}");
        }
    }
}

fn leaky_trace() -> impl Strategy<Value = (LeakyBucket, Nanos, Nanos, Vec<(Nanos, usize)>)> {
    let plain = (1u32..=6, 1u64..=40, 1u32..=3, prop::option::of(1u64..=60), unit()).prop_map(
        |(size, rate, drip, min, unit)| {
            let b = LeakyBucket::new(size, rate * unit, drip).unwrap();
            (min.map_or(b, |m| b.with_min_interval(m * unit).unwrap()), unit)
        },
    );
    let legacy = (1u32..=6, 1u64..=60, prop::option::of(1u64..=60), unit()).prop_map(
        |(max, duration, min, unit)| {
            let limit = LegacyLimit {
                max: Some(max),
                duration: Some((u64::from(max) + duration) * unit),
                min_interval: min.map(|m| m * unit),
            };
            (LeakyBucket::from_legacy(limit).unwrap(), unit)
        },
    );
    prop_oneof![plain, legacy].prop_flat_map(|(bucket, unit)| {
        let step = (prop_oneof![2 => Just(0), 3 => 0..=40u64], 0..KEYS.len());
        (Just(bucket), Just(unit), start(6_000 * unit), prop::collection::vec(step, 1..150))
    })
}

proptest! {
    #![proptest_config(config(500))]

    #[test]
    fn leaky_bucket_is_the_model_at_every_instant((bucket, unit, start, steps) in leaky_trace()) {
        let mut store = Store::new(bucket, 4).unwrap();
        let mut levels: HashMap<&str, (Level, Level)> = HashMap::new();
        let mut admitted: HashMap<&str, Vec<Nanos>> = HashMap::new();
        let mut now = start;
        for (dt, key) in steps {
            now = advance(now, dt * unit);
            let key = KEYS[key];
            let (main, spacing) = levels.entry(key).or_default();
            let d = store.check(key, now);
            let model = leaky_model(&bucket, main, spacing, u128::from(now));
            prop_assert_eq!(d, model, "{} at {}", key, now);
            if d.allowed {
                admitted.entry(key).or_default().push(now);
            }
        }
        for admitted in admitted.values() {
            assert_leaky_rate(admitted, &bucket);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Fixed window: an independent server, in u128, and the release-time formula.

/// A Discord-like server: a window opens with the first request after the previous one
/// closed, and takes at most `quota` requests.
#[derive(Debug, Default)]
struct Server {
    window_start: Option<u128>,
    count: u32,
}

impl Server {
    fn used_at(&self, now: u128, window: u128) -> u32 {
        match self.window_start {
            Some(start) if now < start + window => self.count,
            _ => 0,
        }
    }

    fn receive(&mut self, at: u128, fw: &FixedWindow) {
        if self.used_at(at, u128::from(fw.window())) == 0 {
            self.window_start = Some(at);
            self.count = 0;
        }
        self.count += 1;
        assert!(self.count <= fw.quota(), "a request over the quota reached the server at {at}");
    }
}

#[derive(Debug, Clone, Copy)]
enum Job {
    Schedule,
    Check,
}

fn fixed_trace() -> impl Strategy<Value = (FixedWindow, Nanos, Nanos, Vec<(Nanos, usize, Job)>)> {
    (1u32..=4, 1u64..=60, unit()).prop_flat_map(|(quota, window, unit)| {
        let fw = FixedWindow::new(quota, window * unit).unwrap();
        let job = prop_oneof![3 => Just(Job::Schedule), 2 => Just(Job::Check)];
        let step = (prop_oneof![2 => Just(0), 3 => 0..=window / 2 + 1], 0..KEYS.len(), job);
        (Just(fw), Just(unit), start(40 * window * unit), prop::collection::vec(step, 1..150))
    })
}

/// One group's server and the jobs the driver holds until their release time.
#[derive(Debug, Default)]
struct Group {
    server: Server,
    /// `(release_at, sequence)` of the delayed jobs not released yet.
    pending: BTreeMap<(Nanos, u64), ()>,
}

proptest! {
    #![proptest_config(config(500))]

    /// A driver releases every delayed job exactly at its release time into an independent
    /// server; checks and jobs never exceed the quota of any server window, every release time
    /// is the documented formula, and a schedule is refused exactly when that formula gives a
    /// time after `u64::MAX`.
    #[test]
    fn fixed_window_is_the_model_at_every_instant((fw, unit, start, steps) in fixed_trace()) {
        let mut store = Store::new(fw, 4).unwrap();
        let mut groups: HashMap<&str, Group> = HashMap::new();
        let (window, quota) = (u128::from(fw.window()), u128::from(fw.quota()));
        let (mut now, mut seq) = (start, 0);
        for (dt, key, job) in steps {
            now = advance(now, dt * unit);
            let key = KEYS[key];
            // Due releases first, in order, each at its own time.
            for group_key in KEYS {
                let group = groups.entry(group_key).or_default();
                while let Some((&(at, id), ())) = group.pending.first_key_value() {
                    if at > now {
                        break;
                    }
                    group.pending.remove(&(at, id));
                    group.server.receive(u128::from(at), &fw);
                    prop_assert!(store.release(group_key, at));
                }
            }
            let group = groups.entry(key).or_default();
            let held = group.pending.len() as u128;
            let used = u128::from(group.server.used_at(u128::from(now), window));
            let free_now = held == 0 && used < quota;
            match job {
                Job::Check => {
                    let d = store.check(key, now);
                    prop_assert_eq!(d.allowed, free_now, "{:?}", d);
                    if d.allowed {
                        group.server.receive(u128::from(now), &fw);
                    }
                }
                Job::Schedule => {
                    // The documented formula, in u128: the next window start plus one window per
                    // `quota` slots already held by delayed jobs.
                    let release = (!free_now).then(|| {
                        group.server.window_start.expect("a window is open") + window
                            + held / quota * window
                    });
                    match store.schedule(key, now) {
                        Ok(s) => {
                            prop_assert_eq!(s.run_now, free_now, "{:?}", s);
                            prop_assert_eq!(s.waiting, held as u64 + u64::from(!s.run_now));
                            if s.run_now {
                                prop_assert_eq!(s.release_at, now);
                                group.server.receive(u128::from(now), &fw);
                            } else {
                                prop_assert_eq!(Some(u128::from(s.release_at)), release);
                                prop_assert!(s.release_at > now);
                                group.pending.insert((s.release_at, seq), ());
                                seq += 1;
                            }
                        }
                        Err(e) => {
                            prop_assert_eq!(e.code(), "invalid_request");
                            let release = release.expect("only a delayed job is refused");
                            prop_assert!(release > u128::from(u64::MAX), "refused a release at {}", release);
                        }
                    }
                }
            }
        }
    }
}
