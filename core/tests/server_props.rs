//! Property tests for the server-side limiters: never more than the configured rate over any
//! span of time, fixed-window release times that are safe (and exactly the documented
//! formula), headers consistent with the decision, and stores whose expiry is invisible.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratelane::server::{
    Algorithm, Decision, FixedWindow, Gcra, GcraState, LeakyBucket, LeakyBucketState, LegacyLimit,
    Store,
};
use ratelane::{Nanos, SECOND};

/// `cases` per property unless `PROPTEST_CASES` says otherwise; failures are saved next to
/// this file, in `server_props.proptest-regressions`.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Headers.

fn header<'a>(headers: &'a [(&'static str, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
}

fn secs(value: &str) -> u64 {
    value.parse().unwrap_or_else(|_| panic!("not whole seconds: {value:?}"))
}

/// The IETF item's integer parameter `name` (`"p";r=1;t=2`).
fn param(item: &str, name: &str) -> Option<u64> {
    item.split(';').skip(1).find_map(|p| p.strip_prefix(name)?.strip_prefix('=')).map(secs)
}

/// Every header tells the truth about `d`, rounded in the client's disfavour. `single`: the
/// check was for one request, so a block means nothing remains.
fn assert_headers_consistent(d: &Decision, single: bool) {
    let x = d.x_ratelimit_headers();
    let ietf = d.ietf_headers("p");
    let retry = header(&x, "Retry-After");
    assert_eq!(retry.is_some(), !d.allowed, "Retry-After iff blocked: {d:?} {x:?}");
    assert_eq!(header(&x, "X-RateLimit-Reset"), retry);
    assert_eq!(header(&ietf, "Retry-After"), retry);
    if let Some(retry) = retry {
        let retry = secs(retry);
        assert!(retry >= 1 && retry * SECOND >= d.reset_after, "{d:?}");
        assert!((retry - 1) * SECOND < d.reset_after, "rounded up, not padded: {d:?}");
        assert!(d.reset_after > 0);
    }
    assert_eq!(header(&x, "X-RateLimit-Remaining"), Some(d.remaining.to_string().as_str()));
    if single && !d.allowed {
        assert_eq!(d.remaining, 0, "{d:?}");
    }
    let clear = secs(header(&x, "X-RateLimit-Clear").expect("Clear"));
    assert!(clear * SECOND >= d.clear_after && clear * SECOND < d.clear_after + SECOND);
    if d.allowed || single {
        assert!(d.remaining == 0 || d.reset_after == 0, "{d:?}");
    }

    let limit = header(&ietf, "RateLimit").expect("RateLimit");
    assert_eq!(param(limit, "r"), Some(u64::from(d.remaining)));
    let t = param(limit, "t");
    assert_eq!(t.is_some(), d.replenish_after.is_some(), "{limit} {d:?}");
    if let (Some(t), Some(replenish)) = (t, d.replenish_after) {
        assert!(t >= 1 && t * SECOND >= replenish, "{limit} {d:?}");
    }
    if d.remaining == 0 {
        assert!(t.is_some_and(|t| t >= 1), "r=0 needs t>=1: {limit}");
    }
    if let (Some(retry), Some(t)) = (retry, t) {
        assert!(secs(retry) >= t, "Retry-After is never earlier than t");
    }
    let policy = header(&ietf, "RateLimit-Policy").expect("RateLimit-Policy");
    assert_eq!(param(policy, "q"), Some(u64::from(d.limit)));
    let w = param(policy, "w").expect("w");
    assert!(w >= 1 && w * SECOND >= d.window);
}

// ---------------------------------------------------------------------------------------------
// GCRA.

/// Admitted (time, weight) pairs obey `sum × T <= burst × T + span` over every run.
fn assert_gcra_rate(admitted: &[(Nanos, u32)], gcra: &Gcra) {
    let t = gcra.interval();
    for i in 0..admitted.len() {
        let mut cells = 0u64;
        for j in i..admitted.len() {
            cells += u64::from(admitted[j].1);
            let span = admitted[j].0 - admitted[i].0;
            assert!(
                cells * t <= gcra.window() + span,
                "{cells} cells in {span} ns with T={t}, burst={}",
                gcra.burst()
            );
        }
    }
}

/// A check of a weight the GCRA can admit, at an instant it takes.
fn gcra_check(gcra: &Gcra, state: &mut GcraState, now: Nanos, n: u32) -> Decision {
    gcra.check_n(state, now, n).expect("an instant the GCRA takes").expect("n <= burst")
}

/// `(interval, burst, steps of (time advance, weight))`; weights go up to `burst + 1`.
fn gcra_scenario() -> impl Strategy<Value = (Nanos, u32, Vec<(Nanos, u32)>)> {
    (1u64..=50, 1u32..=8).prop_flat_map(|(interval, burst)| {
        let step = (0..=3 * interval, 0..=burst + 1);
        (Just(interval), Just(burst), prop::collection::vec(step, 1..120))
    })
}

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn gcra_never_exceeds_burst_plus_rate_and_headers_hold((interval, burst, steps) in gcra_scenario()) {
        let gcra = Gcra::new(interval, burst).unwrap();
        let mut store = Store::new(gcra, 10).unwrap();
        let (mut now, mut admitted) = (1_000, Vec::new());
        for (dt, n) in steps {
            now += dt;
            let before = store.state("k").copied().unwrap_or_default();
            match store.check_n("k", now, n).expect("an instant the GCRA takes") {
                Err(e) => {
                    prop_assert!(n > burst);
                    prop_assert_eq!((e.requested, e.capacity), (n, burst));
                }
                Ok(d) => {
                    prop_assert!(n <= burst);
                    assert_headers_consistent(&d, n == 1);
                    if d.allowed {
                        admitted.push((now, n));
                    } else {
                        // Exact: blocked one nanosecond before reset_after, admitted at it.
                        let mut s = before;
                        prop_assert!(!gcra_check(&gcra, &mut s, now + d.reset_after - 1, n).allowed);
                        prop_assert!(gcra_check(&gcra, &mut s, now + d.reset_after, n).allowed);
                    }
                    let after = store.state("k").copied().unwrap_or_default();
                    let peek = |at| gcra_check(&gcra, &mut after.clone(), at, 0).remaining;
                    if let Some(r) = d.replenish_after {
                        prop_assert_eq!(peek(now + r - 1), d.remaining);
                        prop_assert!(peek(now + r) > d.remaining);
                    }
                    prop_assert_eq!(peek(now + d.clear_after), burst);
                    prop_assert!(d.clear_after == 0 || peek(now + d.clear_after - 1) < burst);
                }
            }
        }
        assert_gcra_rate(&admitted, &gcra);
    }

    /// Same burst convention and the same answers as governor, nanosecond for nanosecond.
    #[test]
    fn gcra_agrees_with_governor((interval, burst, steps) in gcra_scenario()) {
        let gcra = Gcra::new(interval, burst).unwrap();
        let quota = Quota::with_period(Duration::from_nanos(interval))
            .unwrap()
            .allow_burst(NonZeroU32::new(burst).unwrap());
        let clock = FakeRelativeClock::default();
        let governor = RateLimiter::direct_with_clock(quota, clock.clone());
        let mut state = GcraState::default();
        let mut now = 0;
        for (dt, n) in steps {
            now += dt;
            clock.advance(Duration::from_nanos(dt));
            let Some(weight) = NonZeroU32::new(n) else { continue };
            let ours = gcra.check_n(&mut state, now, n).expect("an instant the GCRA takes");
            match governor.check_n(weight) {
                Err(_) => prop_assert!(ours.is_err()),
                Ok(Ok(())) => prop_assert!(ours.unwrap().allowed),
                Ok(Err(not_until)) => {
                    let d = ours.unwrap();
                    prop_assert!(!d.allowed);
                    let wait = not_until.wait_time_from(governor::clock::Clock::now(&clock));
                    prop_assert_eq!(wait, Duration::from_nanos(d.reset_after));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Leaky bucket.

/// Admitted times obey `count <= size + drip_size × ⌈span / drip_rate⌉` over every run, and
/// two admitted requests are at least `min_interval` apart.
fn assert_leaky_rate(admitted: &[Nanos], bucket: &LeakyBucket) {
    for i in 0..admitted.len() {
        for j in i..admitted.len() {
            let span = admitted[j] - admitted[i];
            let bound = u64::from(bucket.size())
                + u64::from(bucket.drip_size()) * span.div_ceil(bucket.drip_rate());
            assert!((j - i + 1) as u64 <= bound, "{} admitted in {span} ns: {bucket:?}", j - i + 1);
        }
        if let (Some(min), Some(next)) = (bucket.min_interval(), admitted.get(i + 1)) {
            assert!(next - admitted[i] >= min, "closer than min_interval: {bucket:?}");
        }
    }
}

fn leaky_bucket() -> impl Strategy<Value = LeakyBucket> {
    let plain = (1u32..=6, 1u64..=40, 1u32..=3, prop::option::of(1u64..=60)).prop_map(
        |(size, rate, drip, min)| {
            let b = LeakyBucket::new(size, rate, drip).unwrap();
            min.map_or(b, |m| b.with_min_interval(m).unwrap())
        },
    );
    let legacy = (1u32..=6, 1u64..=12, prop::option::of(1u64..=60)).prop_map(|(max, per, min)| {
        let duration = Some(u64::from(max) * per + per / 2);
        LeakyBucket::from_legacy(LegacyLimit { max: Some(max), duration, min_interval: min })
            .unwrap()
    });
    prop_oneof![plain, legacy]
}

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn leaky_bucket_never_exceeds_size_plus_drips_and_headers_hold(
        bucket in leaky_bucket(),
        factor in prop::sample::select(vec![1.0, 0.75, 0.5, 0.2]),
        steps in prop::collection::vec((0u64..=30, any::<bool>()), 1..120),
    ) {
        let mut store = Store::new(bucket, 10).unwrap();
        let (mut now, mut admitted) = (1_000, Vec::new());
        for (dt, scaled) in steps {
            now += dt;
            let before = store.state("k").copied().unwrap_or_default();
            // Alternating factors over-fill the bucket from time to time.
            let used = if scaled { bucket.scaled(factor).unwrap() } else { bucket };
            let d = store.check_scaled("k", now, if scaled { factor } else { 1.0 }).unwrap();
            assert_headers_consistent(&d, true);
            prop_assert_eq!(d.limit, used.size());
            if d.allowed {
                admitted.push(now);
            } else {
                let mut s = before;
                prop_assert!(!used.check(&mut s, now + d.reset_after - 1).allowed);
                prop_assert!(used.check(&mut s, now + d.reset_after).allowed);
            }
            let after: LeakyBucketState = store.state("k").copied().unwrap_or_default();
            prop_assert!(bucket.is_idle(&after, now + d.clear_after));
            prop_assert!(d.clear_after == 0 || !bucket.is_idle(&after, now + d.clear_after - 1));
        }
        assert_leaky_rate(&admitted, &bucket);
    }
}

// ---------------------------------------------------------------------------------------------
// Legacy limits: at most 2 × max − 1 within any span shorter than `duration`.

/// The most admitted instants (sorted) within any half-open span of `duration`.
fn most_within(admitted: &[Nanos], duration: Nanos) -> usize {
    (0..admitted.len())
        .map(|i| admitted[i..].iter().take_while(|&&t| t - admitted[i] < duration).count())
        .max()
        .unwrap_or(0)
}

/// `(max, duration, min_interval)`: durations from `max` to `60 × max` (mostly not multiples
/// of `max`), in nanoseconds, microseconds or seconds.
fn legacy_limit() -> impl Strategy<Value = LegacyLimit> {
    let unit = prop::sample::select(vec![1, 1_000, SECOND]);
    (1u32..=8, 1u64..=60, 0u64..=59, prop::option::of(1u64..=120), unit).prop_map(
        |(max, per, extra, min, unit)| {
            let duration = (u64::from(max) * per + extra % per.max(1)).max(u64::from(max));
            LegacyLimit {
                max: Some(max),
                duration: Some(duration * unit),
                min_interval: min.map(|m| m * unit),
            }
        },
    )
}

/// A client's next move: retry at the last answer's `reset_after` (at once after an admitted
/// request), or wait `n / 16` of a duration.
#[derive(Debug, Clone, Copy)]
enum Client {
    AtResetAfter,
    Wait(u64),
}

fn client() -> impl Strategy<Value = Client> {
    prop_oneof![3 => Just(Client::AtResetAfter), 1 => (0u64..=40).prop_map(Client::Wait)]
}

proptest! {
    #![proptest_config(config(400))]

    /// The bound the module docs state for legacy limits, for a client that retries exactly at
    /// `reset_after` and waits at random in between.
    #[test]
    fn legacy_limits_admit_at_most_two_max_minus_one_per_duration(
        limit in legacy_limit(),
        start in prop_oneof![Just(0u64), any::<u64>().prop_map(|t| t / 2)],
        moves in prop::collection::vec(client(), 1..300),
    ) {
        let (max, duration) = (limit.max.unwrap(), limit.duration.unwrap());
        let bucket = LeakyBucket::from_legacy(limit).unwrap();
        let mut store = Store::new(bucket, 10).unwrap();
        let (mut now, mut admitted) = (start, Vec::new());
        let mut last = store.check("k", now);
        if last.allowed {
            admitted.push(now);
        }
        for client in moves {
            now += match client {
                Client::AtResetAfter => if last.allowed { 0 } else { last.reset_after },
                Client::Wait(sixteenths) => duration / 16 * sixteenths,
            };
            last = store.check("k", now);
            if last.allowed {
                admitted.push(now);
            }
        }
        let (most, bound) = (most_within(&admitted, duration) as u64, 2 * u64::from(max) - 1);
        prop_assert!(most <= bound, "{} within {} ns: {:?}", most, duration, bucket);
    }

    /// The bound is the true one, not a loose one: from an empty key, a client that retries at
    /// `reset_after` reaches `2 × max − 1` within one duration whenever the `max − 1` drips
    /// fit in it (`duration >= max²`) and no minimum interval spaces the burst.
    #[test]
    fn a_client_at_reset_after_reaches_the_legacy_bound(limit in legacy_limit()) {
        let (max, duration) = (limit.max.unwrap(), limit.duration.unwrap());
        prop_assume!(duration >= u64::from(max) * u64::from(max));
        let bucket = LeakyBucket::from_legacy(LegacyLimit { min_interval: None, ..limit }).unwrap();
        let mut store = Store::new(bucket, 10).unwrap();
        let (mut now, mut admitted) = (0, Vec::new());
        while now < 3 * duration {
            let d = store.check("k", now);
            if d.allowed {
                admitted.push(now);
            } else {
                now += d.reset_after;
            }
        }
        prop_assert_eq!(most_within(&admitted, duration) as u64, 2 * u64::from(max) - 1);
    }
}

// ---------------------------------------------------------------------------------------------
// Fixed window.

/// A Discord-like server, independent of the implementation: a window opens with the first
/// request after the previous one closed, and takes at most `quota` requests.
#[derive(Debug, Default)]
struct Server {
    window_start: Option<Nanos>,
    count: u32,
}

impl Server {
    /// The requests already counted in the window open at `now` (0 if none is open).
    fn used_at(&self, now: Nanos, window: Nanos) -> u32 {
        match self.window_start {
            Some(start) if now < start + window => self.count,
            _ => 0,
        }
    }

    fn receive(&mut self, at: Nanos, fw: &FixedWindow) {
        if self.used_at(at, fw.window()) == 0 {
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
    /// Drops the earliest delayed job: released at once, and never started.
    Drop,
}

fn jobs(with_drops: bool) -> impl Strategy<Value = Vec<(Nanos, Job)>> {
    let job = if with_drops {
        prop_oneof![4 => Just(Job::Schedule), 2 => Just(Job::Check), 1 => Just(Job::Drop)].boxed()
    } else {
        prop_oneof![3 => Just(Job::Schedule), 1 => Just(Job::Check)].boxed()
    };
    prop::collection::vec((0u64..=25, job), 1..150)
}

/// Runs `jobs` with a driver that releases (and starts) every delayed job exactly at its
/// release time, sending everything that starts to an independent [`Server`], and checks
/// that every delayed job's release time is exactly
/// `next window start + ⌊waiting / quota⌋ × window` from the server's point of view.
///
/// A dropped job is released at once and never starts, but its slot stays booked: the server
/// receives a placeholder at its release time, so the server's windows stay the limiter's
/// (a real first-arrival server may open its window later after an unused slot; see the
/// `fixed_window` module docs).
fn drive(fw: FixedWindow, jobs: Vec<(Nanos, Job)>) {
    let mut store = Store::new(fw, 10).unwrap();
    let mut server = Server::default();
    let mut pending: BTreeMap<(Nanos, u64), bool> = BTreeMap::new(); // (release_at, seq) -> dropped
    let (mut now, mut seq) = (1_000, 0);
    let quota = u64::from(fw.quota());
    for (dt, job) in jobs {
        now += dt;
        // Due releases first, in order, each at its own time.
        while let Some((&(at, id), &dropped)) = pending.first_key_value() {
            if at > now {
                break;
            }
            pending.remove(&(at, id));
            server.receive(at, &fw);
            if !dropped {
                assert!(store.release("g", at));
            }
        }
        match job {
            Job::Schedule => {
                let slots_held = pending.len() as u64;
                let waiting = pending.values().filter(|&&dropped| !dropped).count() as u64;
                let used = server.used_at(now, fw.window());
                let s = store.schedule("g", now).expect("a release time within the clock");
                assert_eq!(s.waiting, waiting + u64::from(!s.run_now));
                assert_eq!(s.run_now, slots_held == 0 && u64::from(used) < quota, "{s:?}");
                if !s.run_now {
                    let next = server.window_start.expect("a window is open") + fw.window();
                    assert_eq!(s.release_at, next + slots_held / quota * fw.window());
                }
                if s.run_now {
                    assert_eq!(s.release_at, now);
                    server.receive(now, &fw);
                } else {
                    assert!(s.release_at > now);
                    pending.insert((s.release_at, seq), false);
                    seq += 1;
                }
            }
            Job::Check => {
                let d = store.check("g", now);
                assert_headers_consistent(&d, true);
                if d.allowed {
                    server.receive(now, &fw);
                }
            }
            Job::Drop => {
                if let Some(dropped) = pending.values_mut().find(|dropped| !**dropped) {
                    *dropped = true;
                    assert!(store.release("g", now));
                }
            }
        }
    }
}

fn fixed_window() -> impl Strategy<Value = FixedWindow> {
    (1u32..=4, 1u64..=60).prop_map(|(quota, window)| FixedWindow::new(quota, window).unwrap())
}

proptest! {
    #![proptest_config(config(400))]

    /// Released on time, delayed jobs and checks never exceed the quota of any server
    /// window (the estimate is never earlier than the true release time), and every estimate
    /// is the documented formula (it is not later either).
    #[test]
    fn fixed_window_release_times_are_safe_and_follow_the_formula(fw in fixed_window(), jobs in jobs(false)) {
        drive(fw, jobs);
    }

    /// Dropped delayed jobs (released early) keep their slots: no later estimate moves earlier.
    #[test]
    fn fixed_window_dropped_jobs_keep_their_slots(fw in fixed_window(), jobs in jobs(true)) {
        drive(fw, jobs);
    }
}

// ---------------------------------------------------------------------------------------------
// Stores: dropping empty keys never changes an answer, and memory stays bounded.

/// Compares a store with a plain map that never forgets, over random keys and times.
fn assert_store_matches_map<A: Algorithm + Clone, R: PartialEq + std::fmt::Debug>(
    store: &mut Store<A>,
    steps: &[(Nanos, usize)],
    mut through_store: impl FnMut(&mut Store<A>, &str, Nanos) -> R,
    mut pure: impl FnMut(&A, &mut A::State, &str, Nanos) -> R,
) {
    let algorithm = store.algorithm().clone();
    let mut map: HashMap<String, A::State> = HashMap::new();
    let mut now = 0;
    for &(dt, key) in steps {
        now += dt;
        let key = format!("key{key}");
        let expected = pure(&algorithm, map.entry(key.clone()).or_default(), &key, now);
        assert_eq!(through_store(store, &key, now), expected, "{key} at {now}");
        let live = map.values().filter(|s| !algorithm.is_idle(s, now)).count();
        assert!(store.len() <= store.max_keys() && store.len() >= live.min(store.max_keys()));
    }
}

fn store_steps() -> impl Strategy<Value = Vec<(Nanos, usize)>> {
    prop::collection::vec((prop_oneof![3 => 0u64..=5, 1 => 0u64..=200], 0usize..12), 1..200)
}

proptest! {
    #![proptest_config(config(200))]

    #[test]
    fn gcra_store_expiry_is_invisible(steps in store_steps()) {
        let mut store = Store::new(Gcra::new(10, 3).unwrap(), 1000).unwrap();
        assert_store_matches_map(
            &mut store,
            &steps,
            |s, k, now| s.check(k, now).unwrap(),
            |g, st, _, now| gcra_check(g, st, now, 1),
        );
    }

    #[test]
    fn leaky_bucket_store_expiry_is_invisible(steps in store_steps()) {
        let bucket = LeakyBucket::new(3, 7, 2).unwrap().with_min_interval(2).unwrap();
        let mut store = Store::new(bucket, 1000).unwrap();
        assert_store_matches_map(&mut store, &steps, |s, k, now| s.check(k, now), |b, st, _, now| b.check(st, now));
    }

    #[test]
    fn fixed_window_store_expiry_is_invisible(steps in store_steps()) {
        let mut store = Store::new(FixedWindow::new(2, 15).unwrap(), 1000).unwrap();
        // Schedule on even keys (a delayed job is dropped at once, so that groups can expire),
        // check on odd ones.
        let even = |key: &str| key.ends_with(['0', '2', '4', '6', '8']);
        assert_store_matches_map(
            &mut store,
            &steps,
            |s, k, now| {
                if !even(k) {
                    return (Some(s.check(k, now)), None);
                }
                let scheduled = s.schedule(k, now).unwrap();
                let released = !scheduled.run_now && s.release(k, now);
                (None, Some((scheduled, released)))
            },
            |fw, st, k, now| {
                if !even(k) {
                    return (Some(fw.check(st, now)), None);
                }
                let scheduled = fw.schedule(st, now).unwrap();
                let released = !scheduled.run_now && fw.release(st);
                (None, Some((scheduled, released)))
            },
        );
    }

    #[test]
    fn stores_never_exceed_max_keys(steps in store_steps(), max_keys in 1usize..6) {
        let mut store = Store::new(Gcra::new(50, 2).unwrap(), max_keys).unwrap();
        let mut now = 0;
        for (dt, key) in steps {
            now += dt;
            let d = store.check(&format!("key{key}"), now).unwrap();
            assert_headers_consistent(&d, true);
            prop_assert!(store.len() <= max_keys);
        }
    }
}
