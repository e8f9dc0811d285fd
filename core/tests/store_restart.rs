//! Shared mode through a store restart: K processes at the global cap, the store goes down
//! and comes back **empty** (Redis killed and started again without persistence), in virtual
//! time against the simulated Discord server.
//!
//! What must hold under both policies: no global 429 at the server and at most the global
//! limit in any of its windows, every request ends exactly once (the harness checks the driver
//! contract), and the outage costs no more than it forces.
//!
//! The empty store has no record of the last global window: the grants it lost and the sends
//! the fail-open processes made while it was down, without a reservation. Before the fix it
//! granted a whole window at once while the server's window still held those sends (the
//! benchmark's 79-168 global 429s at K = 4): each process now tells the store what it sent that
//! the store may not count, and keeps to its share of the limits until the store has counted
//! every process back. The random property below also found that a fail-open process's share
//! is not its own in the outage's first window (the store may have granted it all, unevenly,
//! to the others): it now waits for that window to pass (`ratelane::shared`, "Through an
//! outage").
#![allow(clippy::identity_op)]

use proptest::prelude::*;
use ratelane::shared::{MemoryStore, OnUnavailable, ReservationAnswer, SharedConfig};
use ratelane::sim::{
    BucketSpec, Latency, Report, Server, ServerConfig, ServerOutcome, SimConfig, Simulation, StopReason, StoreLink,
};
use ratelane::{Config, Limiter, MILLISECOND, Nanos, Request, SECOND};

const MS: Nanos = MILLISECOND;

fn shared_config(policy: OnUnavailable) -> Config {
    let mut c = Config::default();
    c.shared = Some(SharedConfig::with_policy(policy));
    c
}

/// `SIM_TRACE=1`: print the trace of every run.
fn trace_on() -> bool {
    std::env::var_os("SIM_TRACE").is_some()
}

/// A request to a route of its own (no bucket): only the global limit binds.
fn distinct(i: usize) -> Request {
    Request::with_route("GET", format!("/g{i}"), format!("{i}"))
}

/// `k` processes over one store reached through `link`; `n` requests at the global cap, request
/// `i` on process `i mod k`, enqueued in waves so that every process is busy before, during and
/// after the outage.
fn global_cap(k: usize, policy: OnUnavailable, link: StoreLink, seed: u64, n: usize) -> Report {
    let config = shared_config(policy);
    let store = MemoryStore::new(config.shared.as_ref().expect("shared mode"));
    let limiters = (0..k).map(|_| Limiter::new(config.clone()).expect("valid config")).collect();
    let net = SimConfig::default().seed(seed).trace(trace_on());
    let mut sim = Simulation::cluster(limiters, Server::new(ServerConfig::discord()), net).with_store(store, link);
    for i in 0..n {
        // 100 per 200 ms: twice the global limit, so every window is full.
        sim.enqueue_on(i % k, (i as u64 / 100) * 200 * MS, distinct(i));
    }
    let report = match sim.run() {
        Ok(r) => r,
        Err(e) => panic!("the engine broke the driver contract: {e}"),
    };
    if trace_on() {
        std::fs::write(format!("/tmp/ratelane-restart-{k}-{}.txt", policy.as_str()), report.trace.join("\n")).ok();
    }
    report
}

/// When each global 429 arrived, for the failure message.
fn global_429_times(report: &Report) -> Vec<Nanos> {
    report.server_log.iter().filter(|a| a.outcome == ServerOutcome::GlobalLimited).map(|a| a.at / MS).collect()
}

fn check(report: &Report, what: &str) {
    assert_eq!(report.stop, StopReason::Finished, "{what}: unfinished: {:?}", report.unfinished());
    assert!(report.all_succeeded(), "{what}: every request completes");
    let at = global_429_times(report);
    assert!(at.is_empty(), "{what}: {} global 429s, at (ms) {at:?}", at.len());
    let most = report.max_global_in_window("");
    assert!(most <= 50, "{what}: {most} arrivals in one global window (limit 50)");
    assert!(report.deadline_violations().is_empty());
    assert!(report.fifo_violations().is_empty());
}

/// K = 4 and 8, three seeds each, through the outage `link` makes of `[start, end)`: the
/// invariants, and a cost of at most the outage, the driver's timeout and one global window
/// (the window the outage's first requests miss) and 500 ms over the same run without an
/// outage. (The local windows the fail-open sends and the recovery keep to count each send no
/// transport reported until a window after its answer says it reached the server, its uplink
/// included, rather than a window and the uplinks' spread after its send, which a runtime
/// writing it late breaks: the K = 4 runs cost 2.32-2.71 s, against 2.26-2.36 s before; the
/// same runs without an outage take as long as before.) (Before,
/// a fail-closed outage of 1 s cost 4-5 s: every `Unavailable` answer was taken as a round trip
/// of the driver's timeout, and the margin passed to the store grew to its cap.)
fn through(policy: OnUnavailable, start: Nanos, end: Nanos, link: impl Fn(StoreLink) -> StoreLink) {
    for k in [4, 8] {
        for seed in [1, 2, 3] {
            let what = format!("{}, K = {k}, seed {seed}", policy.as_str());
            let report = global_cap(k, policy, link(StoreLink::default()), seed, 1_500);
            check(&report, &what);
            let alone = global_cap(k, policy, StoreLink::default(), seed, 1_500);
            let cost = report.makespan().saturating_sub(alone.makespan());
            let most = (end - start) + StoreLink::default().timeout + 1_500 * MS;
            assert!(cost <= most, "{what}: the outage cost {} ms (at most {} ms)", cost / MS, most / MS);
        }
    }
}

#[test]
fn fail_open_through_a_restart_that_empties_the_store() {
    through(OnUnavailable::FailOpen, 2 * SECOND, 3 * SECOND, |l| l.restart(2 * SECOND, 3 * SECOND));
}

#[test]
fn fail_closed_through_a_restart_that_empties_the_store() {
    through(OnUnavailable::FailClosed, 2 * SECOND, 3 * SECOND, |l| l.restart(2 * SECOND, 3 * SECOND));
}

/// The store keeps its state, but never saw the fail-open sends: the same overshoot before.
#[test]
fn fail_open_through_an_outage_that_keeps_the_store() {
    through(OnUnavailable::FailOpen, 2 * SECOND, 3 * SECOND, |l| l.outage(2 * SECOND, 3 * SECOND));
}

/// A restart shorter than the global window: the grants the store lost are still in the
/// server's window when it is back, and the processes report them.
#[test]
fn a_short_restart_under_both_policies() {
    let (start, end) = (2 * SECOND, 2 * SECOND + 200 * MS);
    for policy in [OnUnavailable::FailOpen, OnUnavailable::FailClosed] {
        through(policy, start, end, |l| l.restart(start, end));
    }
}

/// One of four processes has nothing to send after the first second (its requests all went
/// out at once), so it never reserves again and the store never counts it back: the other
/// three keep to their shares only until a process still sending without the store would have
/// probed it (its pause is at most the time since the store was last seen up, plus
/// `retry_base`) and what it sent has left the window, not for `2 x retry_max`. (Found by
/// the benchmark: 0.56 of the bound at K = 8 against 0.72 without an outage.)
#[test]
fn an_idle_process_holds_the_others_on_their_shares_only_briefly() {
    for policy in [OnUnavailable::FailOpen, OnUnavailable::FailClosed] {
        for seed in [1, 2, 3] {
            let what = format!("{}, seed {seed}", policy.as_str());
            let run = |link: StoreLink| {
                let config = shared_config(policy);
                let store = MemoryStore::new(config.shared.as_ref().expect("shared mode"));
                let limiters = (0..4).map(|_| Limiter::new(config.clone()).expect("valid config")).collect();
                let net = SimConfig::default().seed(seed).trace(trace_on());
                let mut sim =
                    Simulation::cluster(limiters, Server::new(ServerConfig::discord()), net).with_store(store, link);
                // Process 3: ten requests at once, then nothing.
                for i in 0..10 {
                    sim.enqueue_on(3, 0, distinct(10_000 + i));
                }
                for i in 0..1_200 {
                    sim.enqueue_on(i % 3, (i as u64 / 100) * 200 * MS, distinct(i));
                }
                sim.run().unwrap_or_else(|e| panic!("the engine broke the driver contract: {e}"))
            };
            let report = run(StoreLink::default().restart(2 * SECOND, 3 * SECOND));
            check(&report, &what);
            let cost = report.makespan().saturating_sub(run(StoreLink::default()).makespan());
            let most = SECOND + StoreLink::default().timeout + 1_300 * MS;
            assert!(cost <= most, "{what}: the outage cost {} ms (at most {} ms)", cost / MS, most / MS);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Random restarts and outages under load
// ---------------------------------------------------------------------------------------------

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[derive(Debug, Clone)]
struct Load {
    processes: usize,
    fail_closed: bool,
    /// The store comes back empty (else with what it had).
    wipe: bool,
    start_ms: u64,
    len_ms: u64,
    /// Store round trip: base and jitter (ms).
    store: (u64, u64),
    global: u32,
    /// Requests per second, all processes together, as a multiple of the global limit.
    demand: u64,
    seed: u64,
}

fn load() -> impl Strategy<Value = Load> {
    (
        (2usize..=8, any::<bool>(), prop::bool::weighted(0.7)),
        (300u64..4_000, 20u64..2_500, 1_500u64..3_000),
        prop_oneof![3 => (0u64..=5, 0u64..=10), 1 => (0u64..=30, 0u64..=60)],
        (prop::sample::select(vec![10u32, 50]), 1u64..=3, any::<u64>()),
    )
        .prop_map(|((processes, fail_closed, wipe), (start_ms, len_ms, restart_ms), store, (global, demand, seed))| Load {
            processes,
            fail_closed,
            wipe,
            start_ms,
            // A restart long enough for every process to see the outage before the store
            // answers it again (see `outage_noticed`).
            len_ms: if wipe { restart_ms } else { len_ms },
            store,
            global,
            demand,
            seed,
        })
}

/// 8 s of requests at `demand` times the global limit, spread evenly over the processes.
fn run_load(l: &Load) -> Report {
    let policy = if l.fail_closed { OnUnavailable::FailClosed } else { OnUnavailable::FailOpen };
    let mut config = shared_config(policy);
    config.global_limit = l.global;
    let (start, end) = (l.start_ms * MS, (l.start_ms + l.len_ms) * MS);
    let half = |ms: u64| ms * MS / 2;
    let mut link = StoreLink::default().latency(
        Latency::jittered(half(l.store.0) + 100_000, half(l.store.1)),
        Latency::jittered(half(l.store.0) + 100_000, half(l.store.1)),
    );
    link = if l.wipe { link.restart(start, end) } else { link.outage(start, end) };
    let mut server = ServerConfig::discord().seed(l.seed ^ 0x5EED);
    server.global = Some(BucketSpec::fixed(l.global, SECOND));
    let store = MemoryStore::new(config.shared.as_ref().expect("shared mode"));
    let limiters = (0..l.processes).map(|_| Limiter::new(config.clone()).expect("valid config")).collect();
    let net = SimConfig { seed: l.seed, trace: trace_on(), ..SimConfig::default() };
    let mut sim = Simulation::cluster(limiters, Server::new(server), net).with_store(store, link);
    // Every process reserves twice before the outage (at 0 and 100 ms), so that each has the
    // store's current count of processes (shares are exact only with a current count).
    for p in 0..l.processes {
        for (k, at) in [0, 100 * MS].into_iter().enumerate() {
            sim.enqueue_on(p, at, distinct(1_000_000 + 2 * p + k));
        }
    }
    let per_second = u64::from(l.global) * l.demand;
    let n = 8 * per_second as usize;
    for i in 0..n {
        sim.enqueue_on(i % l.processes, i as u64 * SECOND / per_second, distinct(i));
    }
    sim.run().unwrap_or_else(|e| panic!("the engine broke the driver contract: {e}"))
}

/// Whether every process saw the outage (one of its reservations was answered
/// `Unavailable`). One that did not cannot know that the others may be sending without the
/// store, nor that a store restarted empty lost its grants (see the module documentation of
/// `ratelane::shared`, "Through an outage"): the limits are checked when every process saw it.
fn outage_noticed(l: &Load, report: &Report) -> bool {
    (0..l.processes).all(|p| {
        report
            .requests
            .iter()
            .filter(|r| r.process == p)
            .any(|r| r.reservations.contains(&ReservationAnswer::Unavailable))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), max_shrink_iters: 500, ..ProptestConfig::default() })]

    /// K processes at or above the global cap through an outage at a random time, of a random
    /// length, under either policy, the store coming back empty or not: no global 429, nothing
    /// lost, nothing left unfinished.
    #[test]
    fn random_outages_under_load_keep_the_global_limit(l in load()) {
        let report = run_load(&l);
        prop_assert_eq!(report.stop, StopReason::Finished, "unfinished: {:?}", report.unfinished());
        prop_assert!(report.all_succeeded(), "every request completes");
        prop_assert!(report.fifo_violations().is_empty());
        if outage_noticed(&l, &report) {
            let at = global_429_times(&report);
            prop_assert!(at.is_empty(), "{} global 429s at (ms) {:?}", at.len(), at);
            let most = report.max_global_in_window("");
            prop_assert!(most <= l.global as usize, "{} arrivals in one global window (limit {})", most, l.global);
        }
    }
}



