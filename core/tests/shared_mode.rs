//! Shared mode end to end: N limiters ("processes") share one `MemoryStore` and one simulated
//! Discord server, with latency on the way to the store, in virtual time.
//!
//! What must hold (scenarios below, and `properties` at the end over random workloads):
//!
//! * together the processes never exceed a limit one of them knew (no avoidable bucket 429,
//!   `Report::known_limit_violations` with knowledge shared through the store), never get a
//!   global 429 and never put more than the global limit in any window at the server;
//! * every request ends exactly once (the harness checks the driver contract, now including
//!   reservations: at most one outstanding, no `Send` while one is, late answers accepted);
//! * a store outage: fail-closed sends nothing it could not reserve and recovers by itself;
//!   fail-open keeps sending on its share of the limits (divided by the live processes the
//!   store last counted), so that together the processes lose nothing to 429s; both recover by
//!   themselves; nothing hangs;
//! * throughput: k processes sharing a burst finish within ~1.3x of one process doing it all.
#![allow(clippy::identity_op)]

use proptest::prelude::*;
use ratelane::shared::{MemoryStore, OnUnavailable, ReservationAnswer, SharedConfig};
use ratelane::sim::{
    BucketSpec, Latency, Outcome, Report, RouteSpec, Server, ServerConfig, ServerOutcome,
    SimConfig, Simulation, StopReason, StoreLink,
};
use ratelane::{Config, Failure, Limiter, MILLISECOND, Nanos, Observation, Request, SECOND};

const MS: Nanos = MILLISECOND;

fn shared_config(policy: OnUnavailable) -> Config {
    let mut c = Config::default();
    c.shared = Some(SharedConfig::with_policy(policy));
    c
}

/// `n` processes in shared mode over one store.
fn cluster(n: usize, config: Config, server: ServerConfig, net: SimConfig, link: StoreLink) -> Simulation {
    let store = MemoryStore::new(config.shared.as_ref().expect("shared mode"));
    let limiters = (0..n).map(|_| Limiter::new(config.clone()).expect("valid config")).collect();
    Simulation::cluster(limiters, Server::new(server), net).with_store(store, link)
}

fn run(sim: &mut Simulation) -> Report {
    let report = match sim.run() {
        Ok(r) => r,
        Err(e) => panic!("the engine broke the driver contract: {e}"),
    };
    if trace_on() {
        println!("{}", report.trace.join("\n"));
    }
    report
}

/// `SIM_TRACE=1`: print the trace of every run.
fn trace_on() -> bool {
    std::env::var_os("SIM_TRACE").is_some()
}

fn net(seed: u64) -> SimConfig {
    SimConfig::default().seed(seed).trace(trace_on())
}

fn one_bucket(limit: u32, window: Nanos) -> ServerConfig {
    ServerConfig::discord()
        .bucket("h", BucketSpec::fixed(limit, window))
        .route("POST /channels/:id/messages", RouteSpec::bucket("h"))
}

fn msg(channel: &str) -> Request {
    Request::with_route("POST", "/channels/:id/messages", channel)
}

fn limit_violations(report: &Report) -> Vec<String> {
    report.known_limit_violations().iter().map(|&i| format!("{:?}", report.server_log[i])).collect()
}

/// `Report::known_limit_violations` minus the engine's documented limitation (README, "Known
/// limitations"): when a bucket's window length was never observed (no 2xx that opened a
/// window had been answered, only 429s and header-less answers), a header-less answer is
/// counted until an *estimated* window end, and a longer real window costs one 429. One
/// process alone has the same limitation; shared mode must not add to it.
fn avoidable_violations(report: &Report) -> Vec<String> {
    let sent_at: std::collections::HashMap<usize, (Nanos, Option<Nanos>)> = report
        .requests
        .iter()
        .flat_map(|r| &r.sends)
        .filter_map(|s| s.arrival.map(|i| (i, (s.at, s.answered_at))))
        .collect();
    report
        .known_limit_violations()
        .into_iter()
        .filter(|&i| {
            let a = &report.server_log[i];
            let Some(&(send, _)) = sent_at.get(&i) else { return true };
            let spec = a.bucket_spec.expect("a bucket 429 has a bucket");
            // A 2xx that opened its window (nothing else counted in the window before it),
            // answered before this request was sent: its headers gave the window length.
            report.server_log[..i].iter().enumerate().any(|(j, b)| {
                let opened = match spec.kind {
                    ratelane::sim::WindowKind::Fixed => b.bucket_window == Some(b.at),
                    ratelane::sim::WindowKind::Sliding | ratelane::sim::WindowKind::Refill => !report.server_log[..j].iter().any(|c| {
                        c.counted_in_bucket
                            && c.identity == b.identity
                            && c.bucket == b.bucket
                            && c.major == b.major
                            && c.at + spec.window > b.at
                    }),
                };
                b.identity == a.identity
                    && b.bucket == a.bucket
                    && b.major == a.major
                    && b.counted_in_bucket
                    && (200..300).contains(&b.status)
                    && opened
                    && sent_at.get(&j).and_then(|s| s.1).is_some_and(|t| t <= send)
            })
        })
        .map(|i| format!("{:?}", report.server_log[i]))
        .collect()
}

/// The invariants every shared-mode run keeps while the store is up (or down, fail-closed).
fn check_limits(report: &Report, global: usize) {
    assert_eq!(report.stop, StopReason::Finished, "unfinished: {:?}", report.unfinished());
    let v = limit_violations(report);
    assert!(v.is_empty(), "429s on known buckets: {v:?}");
    assert_eq!(report.count(ServerOutcome::GlobalLimited), 0, "global 429s");
    let identities: std::collections::BTreeSet<&str> =
        report.requests.iter().map(|r| r.request.identity.as_str()).collect();
    for id in identities {
        let most = report.max_global_in_window(id);
        assert!(most <= global, "{id}: {most} arrivals in one global window (limit {global})");
    }
    assert!(report.deadline_violations().is_empty());
    assert!(report.sends_after_close().is_empty());
    assert!(report.fifo_violations().is_empty(), "FIFO per process: {:?}", report.fifo_violations());
}

/// One process doing the whole workload, the baseline for throughput.
fn single(server: ServerConfig, seed: u64, requests: &[Request]) -> Report {
    let mut sim = Simulation::new(Limiter::new(Config::default()).unwrap(), Server::new(server), net(seed));
    for r in requests {
        sim.enqueue_at(0, r.clone());
    }
    run(&mut sim)
}

// ---------------------------------------------------------------------------------------------
// Buckets
// ---------------------------------------------------------------------------------------------

#[test]
fn two_processes_without_shared_mode_do_get_429s() {
    // The problem: the same burst from two unaware processes overshoots the bucket.
    let limiters = (0..2).map(|_| Limiter::new(Config::default()).unwrap()).collect();
    let mut sim = Simulation::cluster(limiters, Server::new(one_bucket(5, 5 * SECOND)), net(3));
    for i in 0..40 {
        sim.enqueue_on(i % 2, 0, msg("1"));
    }
    let report = run(&mut sim);
    assert!(report.count(ServerOutcome::BucketLimited) > 0);
}

#[test]
fn processes_share_one_bucket_without_429s_at_one_process_speed() {
    let requests: Vec<Request> = (0..40).map(|_| msg("1")).collect();
    let alone = single(one_bucket(5, 5 * SECOND), 3, &requests);
    for n in 2..=4 {
        let mut sim = cluster(
            n,
            shared_config(OnUnavailable::FailOpen),
            one_bucket(5, 5 * SECOND),
            net(3),
            StoreLink::default(),
        );
        for (i, r) in requests.iter().enumerate() {
            sim.enqueue_on(i % n, 0, r.clone());
        }
        let report = run(&mut sim);
        check_limits(&report, 50);
        assert!(report.all_succeeded());
        assert_eq!(report.count_429(), 0, "{n} processes");
        let (ours, base) = (report.makespan(), alone.makespan());
        println!("bucket 5/5s, 40 requests: 1 process {} ms, {n} processes {} ms", base / MS, ours / MS);
        assert!(ours * 10 <= base * 13, "{n} processes: {} ms vs {} ms alone", ours / MS, base / MS);
    }
}

#[test]
fn pioneers_of_several_processes_probe_an_unknown_bucket_one_at_a_time() {
    // A bucket of 1 per 2 s: two pioneers at once would get a 429. Every process starts
    // with the bucket unknown; the store's pioneer lock lets one through.
    let mut sim = cluster(
        4,
        shared_config(OnUnavailable::FailOpen),
        one_bucket(1, 2 * SECOND),
        net(11),
        StoreLink::default(),
    );
    for p in 0..4 {
        for _ in 0..2 {
            sim.enqueue_on(p, 0, msg("7"));
        }
    }
    let report = run(&mut sim);
    check_limits(&report, 50);
    assert_eq!(report.count_429(), 0);
    assert!(report.all_succeeded());
    let denied_pioneer = report
        .requests
        .iter()
        .flat_map(|r| &r.reservations)
        .filter(|a| matches!(a, ReservationAnswer::Denied { scope: ratelane::shared::SharedScope::Pioneer, .. }))
        .count();
    assert!(denied_pioneer >= 3, "the other processes waited for the pioneer");
}

#[test]
fn sliding_window_bucket_is_shared_too() {
    let server = ServerConfig::discord()
        .bucket("h", BucketSpec::sliding(3, 2 * SECOND))
        .route("POST /channels/:id/messages", RouteSpec::bucket("h"));
    let mut sim = cluster(3, shared_config(OnUnavailable::FailOpen), server, net(5), StoreLink::default());
    for i in 0..30 {
        sim.enqueue_on(i % 3, (i as u64 % 7) * 300 * MS, msg("1"));
    }
    let report = run(&mut sim);
    check_limits(&report, 50);
    assert!(report.all_succeeded());
}

// ---------------------------------------------------------------------------------------------
// The global limit
// ---------------------------------------------------------------------------------------------

fn unlimited_routes() -> ServerConfig {
    ServerConfig::discord()
}

fn distinct(i: usize) -> Request {
    Request::with_route("GET", format!("/g{i}"), format!("{i}"))
}

#[test]
fn processes_share_the_global_limit() {
    let requests: Vec<Request> = (0..200).map(distinct).collect();
    let alone = single(unlimited_routes(), 9, &requests);
    for n in [2, 4] {
        let mut sim = cluster(n, shared_config(OnUnavailable::FailOpen), unlimited_routes(), net(9), StoreLink::default());
        for (i, r) in requests.iter().enumerate() {
            sim.enqueue_on(i % n, 0, r.clone());
        }
        let report = run(&mut sim);
        check_limits(&report, 50);
        assert!(report.all_succeeded());
        let (ours, base) = (report.makespan(), alone.makespan());
        println!(
            "global 50/s, 200 requests: 1 process {} ms, {n} processes {} ms ({} reservations)",
            base / MS,
            ours / MS,
            report.total_reservations()
        );
        assert!(ours * 10 <= base * 13, "{n} processes: {} ms vs {} ms alone", ours / MS, base / MS);
    }
}

#[test]
fn without_shared_mode_processes_break_the_global_limit() {
    let limiters = (0..2).map(|_| Limiter::new(Config::default()).unwrap()).collect();
    let mut sim = Simulation::cluster(limiters, Server::new(unlimited_routes()), net(9));
    for i in 0..200 {
        sim.enqueue_on(i % 2, 0, distinct(i));
    }
    let report = run(&mut sim);
    assert!(report.count(ServerOutcome::GlobalLimited) > 0);
}

#[test]
fn global_limit_holds_with_a_slow_and_jittery_store() {
    // Store round trips of 5-45 ms, uneven: the margin each process passes grows with their
    // spread, so the grants' arrivals at the server still fit the window.
    let link = StoreLink::default().latency(
        Latency::jittered(2 * MS, 20 * MS),
        Latency::jittered(3 * MS, 20 * MS),
    );
    let mut sim = cluster(3, shared_config(OnUnavailable::FailOpen), unlimited_routes(), net(21), link);
    for i in 0..300 {
        sim.enqueue_on(i % 3, (i as u64 / 30) * 100 * MS, distinct(i));
    }
    let report = run(&mut sim);
    check_limits(&report, 50);
    assert!(report.all_succeeded());
}

#[test]
fn leased_tokens_are_spent_in_their_window_when_pioneers_and_a_full_window_get_in_the_way() {
    // 100 new channels x 6 messages (bucket 5 per 1 s), global 250 per 1 s, over 2 and 4
    // processes whose runtime delays each write by up to 100 or 200 ms, the store 0-20 ms
    // away: every process has requests for every channel, so one takes the pioneer locks and
    // the others' first requests are denied (scope pioneer) until its answers come, while
    // their leases are out. The first global window must still send what the store counted
    // in it: the leased tokens come back from the pioneer denials and are spent.
    //
    // Before: 133-216 arrivals in the first second of 250 for 4 processes, 179-207 in two of
    // six seeds for 2. A `global` denial (the window had no room for more tokens) paused the
    // whole identity while its lease still had tokens coming back, and a new lease replaced the
    // tokens left of the current one: either way those tokens lapsed unspent, and the store
    // counted them to the end of its window (the real-time K = 4 slow mode, 0.56-0.64 of one
    // process, came from the same: in one run three processes out of four sent almost nothing
    // in the first window).
    for (k, lag) in [(2, 100), (4, 100), (4, 200)] {
        for seed in 1..=6 {
            let net = net(seed)
                .latency(Latency::fixed(10 * MS), Latency::fixed(10 * MS))
                .dispatch(Latency::jittered(0, lag * MS), true);
            let link = StoreLink::default().latency(Latency::jittered(0, 20 * MS), Latency::jittered(0, 20 * MS));
            let report = hundred_channels(k, net, link);
            let first = report.server_log.iter().filter(|a| a.at < SECOND).count();
            assert!(first >= 245, "{k} processes, lag {lag} ms, seed {seed}: {first} arrivals in the first second");
        }
    }
}

/// 100 new channels x 6 messages (bucket 5 per 1 s), global 250 per 1 s, all at once over `k`
/// processes in shared mode (request `i` on process `i mod k`); checks the limits and that
/// every request succeeded.
fn hundred_channels(k: usize, net: SimConfig, link: StoreLink) -> Report {
    let server = ServerConfig::discord()
        .global(Some(BucketSpec::fixed(250, SECOND)))
        .bucket("h", BucketSpec::fixed(5, SECOND))
        .route("POST /channels/:id/messages", RouteSpec::bucket("h"));
    let mut config = shared_config(OnUnavailable::FailOpen);
    config.global_limit = 250;
    let mut sim = cluster(k, config, server, net, link);
    for i in 0..600 {
        sim.enqueue_on(i % k, 0, msg(&(i / 6).to_string()));
    }
    let report = run(&mut sim);
    check_limits(&report, 250);
    assert!(report.all_succeeded());
    report
}

#[test]
fn an_answer_from_the_next_window_starts_it_in_the_store() {
    // 100 new channels x 6 messages (bucket 5 per 1 s), global 250 per 1 s, over 4 processes
    // whose runtime delays each write by up to 200 ms, the store next to them. A request
    // granted near the end of its bucket's window and written late reaches the server in the
    // next window; its answer (remaining 4, reset 1 s) was merged into the old window, whose
    // lowest report it kept, with the new window's end: the channel's last message waited a
    // whole window more (seed 4: 3.45 s, where the others took 2.5-2.7 s). The store now reads
    // such an answer as the first of a new window: the request left after its grant, so its
    // window ends at least a reset after the grant, later than every end the old window was
    // told.
    for seed in 1..=8 {
        let net = net(seed).dispatch(Latency::jittered(0, 200 * MS), true);
        let report = hundred_channels(4, net, StoreLink::default());
        let makespan = report.makespan();
        assert!(makespan < 2_900 * MS, "seed {seed}: {} ms", makespan / MS);
    }
}

#[test]
fn a_reservation_s_wait_before_the_store_counts_does_not_widen_the_window() {
    // 100 new channels x 6 messages, global 250 per 1 s, over 4 processes; the store's queue
    // holds each reservation 1-151 ms before it counts (the uplink), and its answers come back
    // in 1-2 ms. The wait moves the count itself and does not spread the time from the count
    // to the server's arrival, so it is no part of the margin a process passes: the processes
    // take it from the store's clock in each grant, not from the reservations' round trips.
    // Before: 3.36-3.64 s (the round trips' spread widened every global window by up to the
    // 250 ms cap); after: 3.10-3.31 s (bound 2.02 s; the rest is the queue's own delay).
    for seed in 1..=6 {
        let link = StoreLink::default().latency(Latency::jittered(MS, 150 * MS), Latency::jittered(MS, MS));
        let makespan = hundred_channels(4, net(seed), link).makespan();
        assert!(makespan < 3_350 * MS, "seed {seed}: {} ms", makespan / MS);
    }
}

// ---------------------------------------------------------------------------------------------
// What one process learns, the others respect
// ---------------------------------------------------------------------------------------------

#[test]
fn a_sub_limit_hit_by_one_process_holds_the_others() {
    let server = ServerConfig::discord()
        .bucket("rename", BucketSpec::fixed(10, 60 * SECOND))
        .route(
            "PATCH /channels/:id",
            RouteSpec::bucket("rename").with_sub_limit(BucketSpec::fixed(2, 10 * SECOND)),
        );
    let rename = || Request::with_route("PATCH", "/channels/:id", "5");
    let mut sim = cluster(3, shared_config(OnUnavailable::FailOpen), server, net(4), StoreLink::default());
    for p in 0..3 {
        for k in 0..2 {
            sim.enqueue_on(p, (p as u64 * 2 + k) * 100 * MS, rename());
        }
    }
    let report = run(&mut sim);
    check_limits(&report, 50);
    assert!(report.all_succeeded());
    // The first 429 is unavoidable (the sub-limit is hidden); the hold it shares spares the
    // other processes theirs: no other one until the hold (10 s) is over. (After it, the
    // hidden limit can be hit again, as by a single process.)
    let hits: Vec<Nanos> =
        report.server_log.iter().filter(|a| a.outcome == ServerOutcome::SubLimited).map(|a| a.at).collect();
    assert!(!hits.is_empty());
    assert!(hits[1..].iter().all(|&t| t >= hits[0] + 10 * SECOND), "sub-limit 429s at {hits:?}");
}

#[test]
fn the_invalid_request_budget_is_shared() {
    // Every request gets a 403. Budget: stop at 20 invalid responses per 60 s, shared.
    let server = ServerConfig::discord().route("GET /forbidden/:id", RouteSpec::unlimited().with_status(403));
    let mut config = shared_config(OnUnavailable::FailOpen);
    config.invalid_request_limit = 30;
    config.invalid_request_stop_at = 20;
    config.invalid_request_warn_at = 10;
    config.invalid_request_window = 60 * SECOND;
    let mut sim = cluster(3, config, server, net(8), StoreLink::default());
    for i in 0..60 {
        sim.enqueue_on(i % 3, (i as u64) * 10 * MS, Request::with_route("GET", "/forbidden/:id", format!("{i}")));
    }
    let report = sim.run_until(30 * SECOND).expect("contract");
    // Alone, each process would have sent 20 (60 together) within the window. Shared, the store
    // stops granting at 20 recorded invalid responses; what other processes have in flight at
    // that moment is not counted (one request every 10 ms, round trips up to 100 ms: at most
    // 10 more).
    let invalid = report.server_log.iter().filter(|a| a.status == 403).count();
    assert!(invalid <= 20 + 10, "{invalid} invalid responses in one window (shared stop at 20)");
    assert!(invalid >= 20, "the budget is used, not starved: {invalid}");
}

#[test]
fn a_global_429_pauses_every_process() {
    // The server's global limit is lower than the one the processes believe (10/s vs 50/s): a
    // global 429 is shared as a pause, so the other processes do not each collect their own.
    let server = ServerConfig::discord().global(Some(BucketSpec::fixed(10, SECOND)));
    let mut sim = cluster(3, shared_config(OnUnavailable::FailOpen), server, net(12), StoreLink::default());
    for i in 0..60 {
        sim.enqueue_on(i % 3, 0, distinct(i));
    }
    let report = run(&mut sim);
    assert_eq!(report.stop, StopReason::Finished);
    // (Some requests run out of 429 retries either way: the configuration is wrong on purpose.)
    let global_429 = report.count(ServerOutcome::GlobalLimited);
    // Unshared, each process would get a wave of them per window.
    let limiters = (0..3).map(|_| Limiter::new(Config::default()).unwrap()).collect();
    let mut alone = Simulation::cluster(limiters, Server::new(ServerConfig::discord().global(Some(BucketSpec::fixed(10, SECOND)))), net(12));
    for i in 0..60 {
        alone.enqueue_on(i % 3, 0, distinct(i));
    }
    let unshared = run(&mut alone).count(ServerOutcome::GlobalLimited);
    println!("global 429s: shared {global_429}, unshared {unshared}");
    assert!(global_429 < unshared, "shared {global_429} vs unshared {unshared}");
}

// ---------------------------------------------------------------------------------------------
// The store goes down
// ---------------------------------------------------------------------------------------------

fn outage_link(start: Nanos, end: Nanos) -> StoreLink {
    StoreLink::default().outage(start, end)
}

fn observed(report: &Report, f: impl Fn(&Observation) -> bool) -> usize {
    report.observations.iter().filter(|(_, o)| f(o)).count()
}

#[test]
fn fail_closed_holds_during_an_outage_and_recovers() {
    let (start, end) = (2 * SECOND, 6 * SECOND);
    let mut sim = cluster(
        3,
        shared_config(OnUnavailable::FailClosed),
        one_bucket(5, SECOND),
        net(14),
        outage_link(start, end),
    );
    for i in 0..90 {
        sim.enqueue_on(i % 3, (i as u64) * 100 * MS, msg(&format!("{}", i % 4)));
    }
    let report = run(&mut sim);
    check_limits(&report, 50);
    assert!(report.all_succeeded(), "every request completes after the outage");
    // Nothing is sent while the store is known to be down (a grant answered just before the
    // outage may still go out within one store round trip).
    let slack = StoreLink::default().uplink.max() + StoreLink::default().downlink.max();
    for r in &report.requests {
        for s in &r.sends {
            assert!(!(start + slack < s.at && s.at < end), "sent at {} ms during the outage", s.at / MS);
        }
    }
    assert!(observed(&report, |o| matches!(o, Observation::StoreUnavailable { .. })) >= 3);
    assert!(observed(&report, |o| matches!(o, Observation::StoreRecovered)) >= 3);
    // Recovery is automatic and prompt: the first send after the outage is within one probe
    // pause (at most retry_max) of its end.
    let first_after = report.requests.iter().flat_map(|r| &r.sends).map(|s| s.at).filter(|&t| t >= end).min();
    let retry_max = SharedConfig::default().retry_max;
    assert!(first_after.is_some_and(|t| t <= end + retry_max + SECOND), "{first_after:?}");
}

#[test]
fn fail_closed_deadlines_fail_instead_of_hanging() {
    let (start, end) = (SECOND, 60 * SECOND);
    let mut sim = cluster(
        2,
        shared_config(OnUnavailable::FailClosed),
        one_bucket(5, SECOND),
        net(15),
        outage_link(start, end),
    );
    let mut late = Vec::new();
    for i in 0..20 {
        let at = 2 * SECOND + i * 100 * MS;
        late.push(sim.enqueue_on(i as usize % 2, at, msg("1").deadline(at + 5 * SECOND)));
    }
    let report = run(&mut sim);
    assert_eq!(report.stop, StopReason::Finished);
    for t in late {
        assert_eq!(report.outcome(t).and_then(Outcome::code), Some("deadline_exceeded"), "{t:?}");
    }
    assert!(report.deadline_violations().is_empty());
}

#[test]
fn fail_open_keeps_sending_during_an_outage_and_recovers() {
    let (start, end) = (2 * SECOND, 6 * SECOND);
    let mut sim = cluster(
        2,
        shared_config(OnUnavailable::FailOpen),
        unlimited_routes(),
        net(16),
        outage_link(start, end),
    );
    for i in 0..300 {
        sim.enqueue_on(i % 2, (i as u64) * 50 * MS, distinct(i));
    }
    let report = run(&mut sim);
    assert_eq!(report.stop, StopReason::Finished);
    assert!(report.all_succeeded());
    let during = report
        .requests
        .iter()
        .flat_map(|r| &r.sends)
        .filter(|s| start + 300 * MS < s.at && s.at < end)
        .count();
    assert!(during > 0, "fail-open sends under local limits during the outage");
    // After the outage every process reserves again, at the latest one probe pause (at most
    // retry_max) after its end.
    let retry_max = SharedConfig::default().retry_max;
    let after: Vec<_> =
        report.requests.iter().filter(|r| r.enqueued_at.is_some_and(|t| t > end + retry_max)).collect();
    assert!(!after.is_empty());
    let reserved_after = after.iter().all(|r| !r.reservations.is_empty());
    assert!(reserved_after, "reservations resume after the outage");
    assert!(observed(&report, |o| matches!(o, Observation::StoreRecovered)) >= 2);
    // Two processes at 20 requests/s never reach 50/s: no global 429 even while unshared.
    assert_eq!(report.count(ServerOutcome::GlobalLimited), 0);
}

/// Fail-open while the store is down: each of three processes runs on a third of the bucket
/// (it learned that three are live from the store's answers before the outage), so together
/// they stay within it and no request meets a 429, let alone runs out of retries. Before, each
/// ran on the whole bucket: three times the limit, 429s, and requests failed with
/// `retries_exhausted`.
#[test]
fn fail_open_runs_on_shares_during_an_outage_and_loses_nothing() {
    let (start, end) = (SECOND, 60 * SECOND);
    let mut sim = cluster(
        3,
        shared_config(OnUnavailable::FailOpen),
        one_bucket(6, SECOND),
        net(31),
        outage_link(start, end),
    );
    // Before the outage each process reserves now and then, and so learns from the store's
    // answers how many processes are live.
    for i in 0..12 {
        sim.enqueue_on(i % 3, (i as u64) * 70 * MS, msg("1"));
    }
    for i in 0..90 {
        sim.enqueue_on(i % 3, start + 200 * MS + (i as u64 / 3) * 10 * MS, msg("1"));
    }
    let report = run(&mut sim);
    assert_eq!(report.stop, StopReason::Finished);
    assert!(report.all_succeeded(), "failed: {}", report.failed_with("retries_exhausted"));
    let during = report.requests.iter().flat_map(|r| &r.sends).filter(|s| start < s.at && s.at < end).count();
    assert!(during >= 80, "fail-open keeps sending during the outage: {during}");
    assert_eq!(report.count_429(), 0, "three shares of 2 fill the bucket of 6, never more");
}

#[test]
fn a_slow_store_is_unavailable_for_the_driver() {
    // Answers take ~300 ms, beyond the driver's 250 ms timeout: every reservation times out.
    // Fail-closed waits (bounded by the deadline); nothing is lost.
    let link = StoreLink::default().latency(Latency::fixed(150 * MS), Latency::fixed(150 * MS));
    let mut sim = cluster(2, shared_config(OnUnavailable::FailClosed), one_bucket(5, SECOND), net(17), link);
    for i in 0..6 {
        sim.enqueue_on(i % 2, 0, msg("1").deadline(3 * SECOND));
    }
    let report = run(&mut sim);
    assert_eq!(report.stop, StopReason::Finished);
    assert_eq!(report.failed_with("deadline_exceeded"), 6);
    assert_eq!(report.total_sends(), 0);
}

// ---------------------------------------------------------------------------------------------
// Properties over random workloads
// ---------------------------------------------------------------------------------------------

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A route: its bucket (index), a hidden sub-limit (limit, window ms), whether it is exempt.
type RouteGen = (Option<usize>, Option<(u32, u64)>, bool);
/// A request: process, route, major, identity, enqueue time (ms), deadline and cancellation
/// (ms after enqueue).
type ReqGen = (usize, usize, u8, u8, u64, Option<u64>, Option<u64>);

#[derive(Debug, Clone)]
struct Gen {
    processes: usize,
    buckets: Vec<(u32, u64, bool)>,
    routes: Vec<RouteGen>,
    requests: Vec<ReqGen>,
    seed: u64,
    up: (u64, u64),
    down: (u64, u64),
    store: (u64, u64),
    drop: f64,
    error_rate: f64,
    global: u32,
    outage: Option<(u64, u64, bool)>,
    close_at_ms: Option<u64>,
}

/// `max_processes` processes; with `slow_store`, store round trips sometimes longer than a
/// lease's validity. (The first property keeps the generator its regression lines were found
/// with: 2-4 processes, fast store.)
fn workload_of(max_processes: usize, slow_store: bool) -> impl Strategy<Value = Gen> {
    let store = if slow_store {
        prop_oneof![3 => (0u64..=5, 0u64..=10), 1 => (0u64..=30, 0u64..=60)].boxed()
    } else {
        (0u64..=5, 0u64..=10).boxed()
    };
    (
        2usize..=max_processes,
        prop::collection::vec((1u32..=6, 500u64..=5_000, prop::bool::weighted(0.25)), 1..=3),
        1usize..=4,
    )
        .prop_flat_map(move |(processes, buckets, n_routes)| {
            let nb = buckets.len();
            (
                Just(processes),
                Just(buckets),
                prop::collection::vec(
                    (
                        prop::option::weighted(0.85, 0..nb),
                        prop::option::weighted(0.1, (1u32..=3, 1_000u64..=10_000)),
                        prop::bool::weighted(0.1),
                    ),
                    n_routes,
                ),
                prop::collection::vec(
                    (
                        0..processes,
                        0..n_routes,
                        0u8..3,
                        0u8..2,
                        0u64..5_000,
                        prop::option::weighted(0.2, 0u64..15_000),
                        prop::option::weighted(0.1, 0u64..3_000),
                    ),
                    1..=60,
                ),
                (any::<u64>(), (1u64..=40, 0u64..=60), (1u64..=40, 0u64..=60), store.clone()),
                (
                    prop::sample::select(vec![0.0, 0.0, 0.05, 0.15]),
                    prop::sample::select(vec![0.0, 0.0, 0.05, 0.2]),
                    prop::sample::select(vec![3u32, 10, 50]),
                    prop::option::weighted(0.3, (0u64..5_000, 100u64..5_000, any::<bool>())),
                    prop::option::weighted(0.1, 0u64..8_000),
                ),
            )
        })
        .prop_map(|(processes, buckets, routes, requests, (seed, up, down, store), (drop, error_rate, global, outage, close_at_ms))| Gen {
            processes,
            buckets,
            routes,
            requests,
            seed,
            up,
            down,
            store,
            drop,
            error_rate,
            global,
            outage,
            close_at_ms,
        })
}

fn method(route: usize) -> &'static str {
    if route.is_multiple_of(2) { "POST" } else { "GET" }
}

fn run_gen(g: &Gen) -> Result<Report, TestCaseError> {
    let mut server = ServerConfig::discord().seed(g.seed ^ 0xABCD).error_rate(g.error_rate);
    server.global = Some(BucketSpec::fixed(g.global, SECOND));
    for (i, &(limit, window_ms, sliding)) in g.buckets.iter().enumerate() {
        let w = window_ms * MS;
        server = server.bucket(format!("b{i}"), if sliding { BucketSpec::sliding(limit, w) } else { BucketSpec::fixed(limit, w) });
    }
    for (i, &(bucket, sub, exempt)) in g.routes.iter().enumerate() {
        let mut rs = match bucket {
            Some(b) => RouteSpec::bucket(format!("b{b}")),
            None => RouteSpec::unlimited(),
        };
        if let Some((l, ms)) = sub {
            rs = rs.with_sub_limit(BucketSpec::fixed(l, ms * MS));
        }
        if exempt {
            rs = rs.exempt();
        }
        server = server.route(format!("{} /r{i}/:id", method(i)), rs);
    }
    let fail_closed = g.outage.is_some_and(|o| o.2);
    let policy = if fail_closed { OnUnavailable::FailClosed } else { OnUnavailable::FailOpen };
    let mut config = shared_config(policy);
    config.global_limit = g.global;
    let mut link = StoreLink::default().latency(
        Latency::jittered(g.store.0 * MS / 2 + 100_000, g.store.1 * MS / 2),
        Latency::jittered(g.store.0 * MS / 2 + 100_000, g.store.1 * MS / 2),
    );
    if let Some((start, len, _)) = g.outage {
        link = link.outage(start * MS, (start + len) * MS);
    }
    let net = SimConfig {
        seed: g.seed,
        uplink: Latency::jittered(g.up.0 * MS, g.up.1 * MS),
        downlink: Latency::jittered(g.down.0 * MS, g.down.1 * MS),
        drop_chance: g.drop,
        max_time: 3600 * SECOND,
        trace: trace_on(),
        ..SimConfig::default()
    };
    let mut sim = cluster(g.processes, config, server, net, link);
    for &(p, route, major, identity, at_ms, deadline, cancel) in &g.requests {
        let at = at_ms * MS;
        let mut req = Request::with_route(method(route), format!("/r{route}/:id"), format!("{major}"))
            .identity(format!("bot{identity}"));
        if g.routes[route].2 {
            req = req.global_exempt(true);
        }
        if let Some(d) = deadline {
            req = req.deadline(at + d * MS);
        }
        let t = sim.enqueue_on(p, at, req);
        if let Some(c) = cancel {
            sim.cancel_at(at + c * MS, t);
        }
    }
    if let Some(c) = g.close_at_ms {
        sim.close_process_at(0, c * MS);
    }
    sim.run().map_err(|e| TestCaseError::fail(format!("driver contract broken: {e}")))
}

fn check_gen(g: &Gen, report: &Report) -> Result<(), TestCaseError> {
    prop_assert_eq!(report.stop, StopReason::Finished, "unfinished: {:?}", report.unfinished());
    // While the store decides (always, or fail-closed through an outage), the processes
    // together keep every limit they knew. Fail-open during an outage runs on its share of the
    // limits, as of the process count it last saw, which a random workload does not keep
    // current (a process may not have reserved since another joined), so only liveness is
    // checked then (`fail_open_runs_on_shares_during_an_outage_and_loses_nothing` checks the
    // shares with a current count).
    let limits_hold = g.outage.is_none_or(|o| o.2);
    if limits_hold {
        let v = avoidable_violations(report);
        prop_assert!(v.is_empty(), "429 from a known bucket: {:?}", v);
        prop_assert_eq!(report.count(ServerOutcome::GlobalLimited), 0, "global 429s");
        for identity in ["bot0", "bot1"] {
            let most = report.max_global_in_window(identity);
            prop_assert!(most <= g.global as usize, "{}: {} in one window (limit {})", identity, most, g.global);
        }
    }
    prop_assert!(report.fifo_violations().is_empty(), "FIFO per process: {:?}", report.fifo_violations());
    prop_assert!(report.deadline_violations().is_empty(), "sent after deadline: {:?}", report.deadline_violations());
    prop_assert!(report.sends_after_close().is_empty());
    let cfg = Config::default();
    for r in &report.requests {
        if r.request.method == "POST"
            && let Some(i) = r.sends.iter().position(|s| s.failure == Some(Failure::MaybeSent))
        {
            prop_assert_eq!(i + 1, r.sends.len(), "POST re-sent after MaybeSent: {:?}", r);
        }
        let most = 1 + cfg.max_rate_limit_retries + cfg.max_error_retries;
        prop_assert!(r.sends.len() as u32 <= most, "sent {} times", r.sends.len());
        if r.outcome == Some(Outcome::Cancelled) {
            let at = r.finished_at.unwrap_or(0);
            prop_assert!(r.sends.iter().all(|s| s.at <= at));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), max_shrink_iters: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn random_cluster_workloads_keep_every_invariant(g in workload_of(4, false)) {
        let report = run_gen(&g)?;
        let checked = check_gen(&g, &report);
        if checked.is_err() && trace_on() {
            std::fs::write("/tmp/ratelane-shared-trace.txt", report.trace.join("\n")).ok();
        }
        checked?;
    }

    /// The same with up to 8 processes and store round trips up to 90 ms, longer than a
    /// global lease's validity: the global limit and every known bucket still hold.
    #[test]
    fn random_workloads_of_up_to_eight_processes_keep_every_invariant(g in workload_of(8, true)) {
        let report = run_gen(&g)?;
        let checked = check_gen(&g, &report);
        if checked.is_err() && trace_on() {
            std::fs::write("/tmp/ratelane-shared-trace.txt", report.trace.join("\n")).ok();
        }
        checked?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), ..ProptestConfig::default() })]

    /// A burst to one channel split over k processes finishes within 1.3x of one process
    /// sending all of it, plus a store round trip per window and a fixed cost for learning the
    /// bucket: the other processes wait for the first one's pioneer (one poll), then each sends
    /// one request alone until its own first response tells it the bucket (two HTTP round
    /// trips), plus one window: with a reservation per request, a process can miss the last
    /// slots of a window the others did not fill and wait for the next one (found with a fresh
    /// seed, kept in the regression file: n 18, 6 per 500 ms, 2 processes, 1,715 ms against
    /// 1,160 ms alone; the leases of the shared-mode issue are to remove it). No 429 at all.
    #[test]
    fn split_bursts_finish_near_one_process_speed(
        n in 8usize..=60,
        limit in 1u32..=10,
        window_ms in 500u64..=5_000,
        k in 2usize..=4,
        seed in any::<u64>(),
    ) {
        let window = window_ms * MS;
        let requests: Vec<Request> = (0..n).map(|_| msg("1")).collect();
        let alone = single(one_bucket(limit, window), seed, &requests);
        let mut sim = cluster(k, shared_config(OnUnavailable::FailOpen), one_bucket(limit, window), net(seed), StoreLink::default());
        for (i, r) in requests.iter().enumerate() {
            sim.enqueue_on(i % k, 0, r.clone());
        }
        let report = sim.run().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(report.stop, StopReason::Finished);
        prop_assert!(report.all_succeeded());
        prop_assert_eq!(report.count_429(), 0);
        let windows = (n as u64).div_ceil(u64::from(limit));
        let rtt = SimConfig::default().uplink.max() + SimConfig::default().downlink.max();
        let slack = windows * 10 * MS + SharedConfig::default().pioneer_poll + 2 * rtt + window;
        prop_assert!(
            report.makespan() * 10 <= alone.makespan() * 13 + slack * 10,
            "{} processes: {} ms, one process: {} ms", k, report.makespan() / MS, alone.makespan() / MS
        );
    }
}

/// The second cause: every process reserved its whole local budget at once, so the
/// store saw K x the global limit in reservations per window for the limit's worth of grants
/// (5.7 reservations per request at 8 processes here without leases). With leases, one
/// reservation per process asks for the tokens its ready requests need and the others wait
/// for its answer: 1.1-1.3 reservations per request at K = 2-8 (the rest are the K lease
/// requests each time the window frees), and the makespan of one process within 2 %.
#[test]
fn leases_keep_reservations_near_one_per_request() {
    let requests: Vec<Request> = (0..1000).map(distinct).collect();
    let alone = single(unlimited_routes(), 9, &requests);
    for lease in [false, true] {
        for n in [2, 4, 8] {
            let mut config = shared_config(OnUnavailable::FailOpen);
            config.shared.as_mut().expect("shared").global_lease = lease;
            let mut sim = cluster(n, config, unlimited_routes(), net(9), StoreLink::default());
            for (i, r) in requests.iter().enumerate() {
                sim.enqueue_on(i % n, 0, r.clone());
            }
            let report = run(&mut sim);
            check_limits(&report, 50);
            assert!(report.all_succeeded());
            let per_request = report.total_reservations() as f64 / requests.len() as f64;
            println!(
                "leases {lease}, {n} processes: {:.2} reservations per request, {} ms (one process {} ms)",
                per_request,
                report.makespan() / MS,
                alone.makespan() / MS
            );
            if lease {
                assert!(per_request <= 1.4, "{n} processes: {per_request:.2} reservations per request");
                assert!(report.makespan() * 100 <= alone.makespan() * 103, "{n} processes: {} ms", report.makespan() / MS);
            } else if n == 8 {
                // The repro: the test fails without leases.
                assert!(per_request > 3.0, "{per_request:.2}");
            }
        }
    }
}
