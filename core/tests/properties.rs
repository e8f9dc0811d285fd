//! Property tests: random workloads driven through the engine against `ratelane::sim`'s Discord
//! model, in virtual time.
//!
//! Invariants checked on every run:
//!
//! * the driver contract holds (the simulator returns an error otherwise): every request ends
//!   in exactly one outcome, no output names an unknown or finished request;
//! * no starvation: every request ends before the virtual time limit (1 h);
//! * no 429 from a bucket whose limit the engine knew (see `Report::known_limit_violations`:
//!   every request counted in that server window was sent after a response with bucket
//!   headers for its route and major parameter had been delivered);
//! * never a global 429, and never more than the global limit in any window at the server
//!   (sliding, on arrival time);
//! * FIFO per (identity, route, major, priority) among completed requests (first sends);
//! * no request sent after its deadline, none after `close`;
//! * a non-idempotent request is never re-sent after `Failure::MaybeSent`;
//! * bounded attempts: at most 1 + max_rate_limit_retries + max_error_retries sends;
//! * priority order for the global budget (its own workload);
//! * throughput: a single-bucket burst of N with limit L per window W finishes within
//!   1.25 x optimum + W, where optimum = (ceil(N / L) - 1) * W + the largest round trip, or
//!   (on a jittery link, where that is more) one largest round trip per window more than the
//!   optimum, + W (see the test for why).
//!
//! `PROPTEST_CASES` overrides the case counts (kept small so the file runs in seconds in debug).

use proptest::prelude::*;
use ratelane::sim::{
    BucketSpec, Latency, Outcome, Report, RouteSpec, Server, ServerConfig, ServerOutcome,
    SimConfig, Simulation, StopReason,
};
use ratelane::{Config, Failure, Limiter, MILLISECOND, Nanos, Request, SECOND};

/// `SIM_TRACE=1`: trace every run and print the trace of a failing one.
fn tracing() -> bool {
    std::env::var_os("SIM_TRACE").is_some()
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Clone)]
struct BucketGen {
    limit: u32,
    window_ms: u64,
    sliding: bool,
}

#[derive(Debug, Clone)]
struct RouteGen {
    bucket: Option<usize>,
    sub_limit: Option<(u32, u64)>,
    shared_limit: Option<(u32, u64)>,
    exempt: bool,
}

#[derive(Debug, Clone)]
struct ReqGen {
    route: usize,
    major: u8,
    identity: u8,
    priority: i8,
    at_ms: u64,
    deadline_after_ms: Option<u64>,
    cancel_after_ms: Option<u64>,
}

#[derive(Debug, Clone)]
struct NetGen {
    seed: u64,
    up: (u64, u64),
    down: (u64, u64),
    spike_chance: f64,
    spike_ms: u64,
    drop: f64,
    error_rate: f64,
    global: u32,
    close_at_ms: Option<u64>,
    /// Discord renames the bucket of route 0 at this time (a hash change).
    remap_at_ms: Option<u64>,
}

#[derive(Debug, Clone)]
struct Workload {
    buckets: Vec<BucketGen>,
    routes: Vec<RouteGen>,
    requests: Vec<ReqGen>,
    net: NetGen,
}

fn bucket_gen() -> impl Strategy<Value = BucketGen> {
    (1u32..=6, 500u64..=5_000, prop::bool::weighted(0.25)).prop_map(
        |(limit, window_ms, sliding)| BucketGen {
            limit,
            window_ms,
            sliding,
        },
    )
}

fn route_gen(buckets: usize) -> impl Strategy<Value = RouteGen> {
    (
        prop::option::weighted(0.85, 0..buckets),
        prop::option::weighted(0.1, (1u32..=3, 1_000u64..=10_000)),
        prop::option::weighted(0.1, (1u32..=3, 1_000u64..=10_000)),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(bucket, sub_limit, shared_limit, exempt)| RouteGen {
            bucket,
            sub_limit,
            shared_limit,
            exempt,
        })
}

fn req_gen(routes: usize) -> impl Strategy<Value = ReqGen> {
    (
        0..routes,
        0u8..3,
        prop::bool::weighted(0.2),
        -1i8..=1,
        0u64..5_000,
        prop::option::weighted(0.2, 0u64..15_000),
        prop::option::weighted(0.1, 0u64..3_000),
    )
        .prop_map(
            |(route, major, id2, priority, at_ms, deadline_after_ms, cancel_after_ms)| ReqGen {
                route,
                major,
                identity: u8::from(id2),
                priority,
                at_ms,
                deadline_after_ms,
                cancel_after_ms,
            },
        )
}

fn net_gen() -> impl Strategy<Value = NetGen> {
    (
        any::<u64>(),
        (1u64..=40, 0u64..=60),
        (1u64..=40, 0u64..=60),
        (prop::sample::select(vec![0.0, 0.0, 0.1, 0.3]), 0u64..=2_000),
        prop::sample::select(vec![0.0, 0.0, 0.05, 0.15]),
        prop::sample::select(vec![0.0, 0.0, 0.05, 0.2]),
        prop::sample::select(vec![3u32, 10, 50]),
        (
            prop::option::weighted(0.1, 0u64..8_000),
            prop::option::weighted(0.15, 0u64..6_000),
        ),
    )
        .prop_map(
            |(
                seed,
                up,
                down,
                (spike_chance, spike_ms),
                drop,
                error_rate,
                global,
                (close_at_ms, remap_at_ms),
            )| NetGen {
                seed,
                up,
                down,
                spike_chance,
                spike_ms,
                drop,
                error_rate,
                global,
                close_at_ms,
                remap_at_ms,
            },
        )
}

fn workload(max_requests: usize) -> impl Strategy<Value = Workload> {
    (prop::collection::vec(bucket_gen(), 1..=3), 1usize..=4).prop_flat_map(
        move |(buckets, n_routes)| {
            let nb = buckets.len();
            (
                Just(buckets),
                prop::collection::vec(route_gen(nb), n_routes),
                prop::collection::vec(req_gen(n_routes), 1..=max_requests),
                net_gen(),
            )
                .prop_map(|(buckets, routes, requests, net)| Workload {
                    buckets,
                    routes,
                    requests,
                    net,
                })
        },
    )
}

fn method(route: usize) -> &'static str {
    if route.is_multiple_of(2) {
        "POST"
    } else {
        "GET"
    }
}

fn template(route: usize) -> String {
    format!("/r{route}/:id")
}

fn spec(limit: u32, window_ms: u64, sliding: bool) -> BucketSpec {
    if sliding {
        BucketSpec::sliding(limit, window_ms * MILLISECOND)
    } else {
        BucketSpec::fixed(limit, window_ms * MILLISECOND)
    }
}

const MAX_TIME: Nanos = 3600 * SECOND;

fn run_workload(w: &Workload) -> Result<Report, TestCaseError> {
    let mut cfg = ServerConfig::discord()
        .seed(w.net.seed ^ 0xABCD)
        .error_rate(w.net.error_rate);
    cfg.global = Some(BucketSpec::fixed(w.net.global, SECOND));
    for (i, b) in w.buckets.iter().enumerate() {
        cfg = cfg.bucket(format!("b{i}"), spec(b.limit, b.window_ms, b.sliding));
    }
    for (i, r) in w.routes.iter().enumerate() {
        let mut rs = match r.bucket {
            Some(b) => RouteSpec::bucket(format!("b{b}")),
            None => RouteSpec::unlimited(),
        };
        if let Some((l, ms)) = r.sub_limit {
            rs = rs.with_sub_limit(BucketSpec::fixed(l, ms * MILLISECOND));
        }
        if let Some((l, ms)) = r.shared_limit {
            rs = rs.with_shared_limit(BucketSpec::fixed(l, ms * MILLISECOND));
        }
        if r.exempt {
            rs = rs.exempt();
        }
        cfg = cfg.route(format!("{} {}", method(i), template(i)), rs);
    }
    if let (Some(at), Some(_)) = (w.net.remap_at_ms, w.routes[0].bucket) {
        cfg = cfg.remap(
            at * MILLISECOND,
            format!("{} {}", method(0), template(0)),
            Some("renamed"),
        );
    }
    let mut config = Config::default();
    config.global_limit = w.net.global;
    let limiter = Limiter::new(config).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let n = &w.net;
    let net = SimConfig {
        seed: n.seed,
        uplink: Latency::jittered(n.up.0 * MILLISECOND, n.up.1 * MILLISECOND),
        downlink: Latency::jittered(n.down.0 * MILLISECOND, n.down.1 * MILLISECOND)
            .with_spikes(n.spike_chance, n.spike_ms * MILLISECOND),
        drop_chance: n.drop,
        max_time: MAX_TIME,
        trace: tracing(),
        ..SimConfig::default()
    };
    let mut sim = Simulation::new(limiter, Server::new(cfg), net);
    for r in &w.requests {
        let at = r.at_ms * MILLISECOND;
        let mut req =
            Request::with_route(method(r.route), template(r.route), format!("{}", r.major))
                .identity(format!("bot{}", r.identity))
                .priority(i32::from(r.priority));
        if w.routes[r.route].exempt {
            req = req.global_exempt(true);
        }
        if let Some(d) = r.deadline_after_ms {
            req = req.deadline(at + d * MILLISECOND);
        }
        let t = sim.enqueue_at(at, req);
        if let Some(c) = r.cancel_after_ms {
            sim.cancel_at(at + c * MILLISECOND, t);
        }
    }
    if let Some(c) = n.close_at_ms {
        sim.close_at(c * MILLISECOND);
    }
    sim.run()
        .map_err(|e| TestCaseError::fail(format!("driver contract broken: {e}")))
}

fn check_invariants(w: &Workload, report: &Report) -> Result<(), TestCaseError> {
    // Exactly one outcome each, and no starvation.
    prop_assert_eq!(
        report.stop,
        StopReason::Finished,
        "unfinished: {:?}",
        report.unfinished()
    );
    prop_assert!(report.unfinished().is_empty());
    // Known limits are never exceeded at the server.
    let violations = report.known_limit_violations();
    prop_assert!(
        violations.is_empty(),
        "429 from a known bucket: {:?}",
        violations
            .iter()
            .map(|&i| &report.server_log[i])
            .collect::<Vec<_>>()
    );
    // The global limit, always.
    prop_assert_eq!(report.count(ServerOutcome::GlobalLimited), 0, "global 429s");
    for identity in ["bot0", "bot1"] {
        let most = report.max_global_in_window(identity);
        prop_assert!(
            most <= w.net.global as usize,
            "{identity}: {most} arrivals in one second (limit {})",
            w.net.global
        );
    }
    // FIFO per bucket.
    let fifo = report.fifo_violations();
    prop_assert!(fifo.is_empty(), "FIFO broken: {:?}", fifo);
    // Deadlines, close.
    prop_assert!(
        report.deadline_violations().is_empty(),
        "sent after deadline: {:?}",
        report.deadline_violations()
    );
    prop_assert!(
        report.sends_after_close().is_empty(),
        "sent after close: {:?}",
        report.sends_after_close()
    );
    for r in &report.requests {
        // A POST that may have reached the server is never re-sent.
        if r.request.method == "POST"
            && let Some(i) = r
                .sends
                .iter()
                .position(|s| s.failure == Some(Failure::MaybeSent))
        {
            prop_assert_eq!(
                i + 1,
                r.sends.len(),
                "POST re-sent after MaybeSent: {:?}",
                r
            );
        }
        let cfg = Config::default();
        let most = 1 + cfg.max_rate_limit_retries + cfg.max_error_retries;
        prop_assert!(
            r.sends.len() as u32 <= most,
            "sent {} times: {:?}",
            r.sends.len(),
            r
        );
        // A cancelled request was not sent after its cancellation.
        if r.outcome == Some(Outcome::Cancelled) {
            let at = r.finished_at.unwrap_or(0);
            prop_assert!(r.sends.iter().all(|s| s.at <= at));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(96), max_shrink_iters: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn random_workloads_keep_every_invariant(w in workload(60)) {
        let report = run_workload(&w)?;
        let checked = check_invariants(&w, &report);
        if checked.is_err() && tracing() {
            eprintln!("{}", report.trace.join("\n"));
        }
        checked?;
    }
}

// ---------------------------------------------------------------------------------------------
// Priority order for the global budget
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    /// Every request has its own route and major parameter on a route without rate-limit
    /// headers, so only the global limit (5/s) orders them. Whenever a request is sent, no
    /// request of higher priority that was already queued may still be waiting.
    #[test]
    fn global_budget_goes_to_higher_priority_first(
        reqs in prop::collection::vec((-2i32..=2, 0u64..3_000), 5..40),
        seed in any::<u64>(),
    ) {
        let cfg = ServerConfig::discord().global(Some(BucketSpec::fixed(5, SECOND)));
        let mut config = Config::default();
        config.global_limit = 5;
        let lat = Latency::jittered(10 * MILLISECOND, 20 * MILLISECOND);
        let mut sim = Simulation::new(
            Limiter::new(config).unwrap(),
            Server::new(cfg),
            SimConfig::default().seed(seed).latency(lat, lat),
        );
        for (i, &(priority, at_ms)) in reqs.iter().enumerate() {
            sim.enqueue_at(at_ms * MILLISECOND, Request::with_route("GET", format!("/p{i}"), "").priority(priority));
        }
        let report = sim.run().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(report.stop, StopReason::Finished);
        prop_assert!(report.all_succeeded());
        prop_assert_eq!(report.count_429(), 0);
        let rs = &report.requests;
        for b in rs {
            let sb = b.sends[0].seq;
            for a in rs {
                let sa = a.sends[0].seq;
                prop_assert!(
                    !(a.request.priority > b.request.priority && a.enqueue_seq < sb && sa > sb),
                    "priority {} queued at {} waited while priority {} was sent at {}",
                    a.request.priority, a.enqueued_at.unwrap(), b.request.priority, b.sends[0].at
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Throughput
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    /// A burst of `n` to one channel with a bucket of `limit` per `window`: the makespan is at
    /// most 1.25 x the optimum plus one window, where the optimum sends a full window's worth
    /// at each reset and pays one round trip: (ceil(n / limit) - 1) * window + max RTT.
    /// No 429 at all: the pioneer is alone until the bucket is known.
    ///
    /// Or, where that is more, one round trip more per window than the optimum (plus the same
    /// window): that is what the design gives on a jittery link. The engine sends ahead of a
    /// reported reset only by its send lead (`RoundTrips::lead`), which is 0 unless round trips
    /// are steady (their spread within a tenth of the fastest): elsewhere a request timed to
    /// arrive just after the reset could arrive before it. So each window waits for the reset
    /// the last answer reported (up to a downlink late) and the next request's trip out (up to
    /// an uplink): up to one max RTT per window. When max RTT is over a quarter of the window, 1.25 x
    /// cannot hold (found with a fresh seed, kept in the regression file: n 49, 2 per 500 ms,
    /// round trips 84-169 ms, 15,970 ms against an optimum of 12,169 ms).
    #[test]
    fn single_bucket_burst_is_near_optimal(
        n in 1usize..=80,
        limit in 1u32..=10,
        window_ms in 500u64..=5_000,
        sliding in any::<bool>(),
        up in (1u64..=50, 0u64..=50),
        down in (1u64..=50, 0u64..=50),
        seed in any::<u64>(),
    ) {
        let window = window_ms * MILLISECOND;
        let cfg = ServerConfig::discord()
            .bucket("h", spec(limit, window_ms, sliding))
            .route("POST /channels/:id/messages", RouteSpec::bucket("h"));
        let up = Latency::jittered(up.0 * MILLISECOND, up.1 * MILLISECOND);
        let down = Latency::jittered(down.0 * MILLISECOND, down.1 * MILLISECOND);
        let mut sim = Simulation::new(
            Limiter::new(Config::default()).unwrap(),
            Server::new(cfg),
            SimConfig::default().seed(seed).latency(up, down),
        );
        for _ in 0..n {
            sim.enqueue_at(0, Request::with_route("POST", "/channels/:id/messages", "1"));
        }
        let report = sim.run().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(report.stop, StopReason::Finished);
        prop_assert!(report.all_succeeded());
        prop_assert_eq!(report.count_429(), 0);
        prop_assert!(report.fifo_violations().is_empty());
        let rtt = up.max() + down.max();
        let windows = (n as u64).div_ceil(u64::from(limit)) - 1;
        let optimum = windows * window + rtt;
        let one_trip_per_window = windows * (window + rtt) + rtt;
        let bound = (optimum * 5 / 4).max(one_trip_per_window) + window;
        let makespan = report.makespan();
        prop_assert!(
            makespan <= bound,
            "makespan {} ms, optimum {} ms, bound {} ms (n {n}, {limit} per {window_ms} ms)",
            makespan / MILLISECOND, optimum / MILLISECOND, bound / MILLISECOND
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The global limit whatever the runtime's delays
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    /// A runtime that writes requests late (any delay after their `Send`, long spikes
    /// included, in order or not), reported to the engine or not: the server never sees more
    /// than the global limit in one window, and never answers a global 429.
    #[test]
    fn global_limit_holds_whatever_the_runtime_delays(
        limit in 3u32..=30,
        channels in 1u32..=60,
        per_channel in 1u32..=6,
        lag_ms in 0u64..=60,
        spike in (0.0f64..0.5, 0u64..=2_000),
        serial_us in prop_oneof![Just(0u64), 0u64..=3_000],
        reported in any::<bool>(),
        sliding in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let global = if sliding { BucketSpec::sliding(limit, SECOND) } else { BucketSpec::fixed(limit, SECOND) };
        let cfg = ServerConfig::discord()
            .bucket("h", BucketSpec::fixed(5, SECOND))
            .route("POST /channels/:id/messages", RouteSpec::bucket("h"))
            .global(Some(global));
        let mut config = Config::default();
        config.global_limit = limit;
        let lat = Latency::jittered(10 * MILLISECOND, 2 * MILLISECOND);
        let dispatch = Latency::jittered(0, lag_ms * MILLISECOND).with_spikes(spike.0, spike.1 * MILLISECOND);
        let net = SimConfig::default().seed(seed).latency(lat, lat).dispatch(dispatch, reported).serial(serial_us * 1_000);
        let mut sim = Simulation::new(Limiter::new(config).unwrap(), Server::new(cfg), net);
        for c in 0..channels {
            for _ in 0..per_channel {
                sim.enqueue_at(0, Request::with_route("POST", "/channels/:id/messages", c.to_string()));
            }
        }
        let report = sim.run().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(report.stop, StopReason::Finished);
        prop_assert!(report.all_succeeded());
        prop_assert_eq!(report.count(ServerOutcome::GlobalLimited), 0, "global 429s");
        let most = report.max_global_in_window("");
        prop_assert!(most <= limit as usize, "{} arrivals in one window (limit {})", most, limit);
    }
}

// ---------------------------------------------------------------------------------------------
// A bucket's window, whatever its kind and the runtime's delays
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    /// A burst to one bucket whose window is fixed or slides, sent by a runtime that writes
    /// requests late (reported or not): the engine never sends more than the window admits.
    /// (A sliding window's slot frees a window after its request arrived, which a late write
    /// puts well after its send: the sliding log takes each answered request's arrival.)
    #[test]
    fn a_bucket_never_admits_more_than_its_window_allows(
        n in 1usize..=40,
        limit in 1u32..=6,
        window_ms in 200u64..=2_000,
        sliding in any::<bool>(),
        lag_ms in 0u64..=100,
        spike in (0.0f64..0.5, 0u64..=1_500),
        reported in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let spec = if sliding { BucketSpec::sliding(limit, window_ms * MILLISECOND) } else { BucketSpec::fixed(limit, window_ms * MILLISECOND) };
        let cfg = ServerConfig::discord()
            .bucket("h", spec)
            .route("POST /channels/:id/messages", RouteSpec::bucket("h"));
        let lat = Latency::jittered(10 * MILLISECOND, 2 * MILLISECOND);
        let dispatch = Latency::jittered(0, lag_ms * MILLISECOND).with_spikes(spike.0, spike.1 * MILLISECOND);
        let net = SimConfig::default().seed(seed).latency(lat, lat).dispatch(dispatch, reported);
        let mut sim = Simulation::new(Limiter::new(Config::default()).unwrap(), Server::new(cfg), net);
        for _ in 0..n {
            sim.enqueue_at(0, Request::with_route("POST", "/channels/:id/messages", "1"));
        }
        let report = sim.run().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(report.stop, StopReason::Finished);
        prop_assert!(report.all_succeeded());
        prop_assert_eq!(report.count_429(), 0);
    }
}

