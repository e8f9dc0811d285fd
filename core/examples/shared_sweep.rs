//! The simulator sweep behind the store's rule that an answer from the next window starts it
//! (`3a06c88`; the sweep's figures are in that commit's `BENCHMARKS.md`): 100 new channels x 6 messages (bucket 5 per 1 s, global 250 per 1 s) split over K
//! shared-mode processes whose runtime delays each write (up to 100 or 200 ms), with the store
//! next to them or 0-20 ms away each way; 40 seeds per case. Prints, per case, the mean and the
//! longest makespan (the bound is 2.02 s), how many runs took over 3 s, and the 429s the
//! simulated server gave.
//!
//! ```text
//! cargo run --release -p ratelane --example shared_sweep
//! ```

use ratelane::shared::{MemoryStore, OnUnavailable, SharedConfig};
use ratelane::sim::{BucketSpec, Latency, Report, RouteSpec, Server, ServerConfig, SimConfig, Simulation, StoreLink};
use ratelane::{Config, Limiter, MILLISECOND, Nanos, Request, SECOND};

const MS: Nanos = MILLISECOND;
const SEEDS: u64 = 40;

fn run(processes: usize, write_delay: Nanos, far_store: bool, seed: u64) -> Report {
    let server = ServerConfig::discord()
        .global(Some(BucketSpec::fixed(250, SECOND)))
        .bucket("h", BucketSpec::fixed(5, SECOND))
        .route("POST /channels/:id/messages", RouteSpec::bucket("h"));
    let mut config = Config::default();
    config.shared = Some(SharedConfig::with_policy(OnUnavailable::FailOpen));
    config.global_limit = 250;
    let net = SimConfig::default().seed(seed).dispatch(Latency::jittered(0, write_delay), true);
    let link = if far_store {
        StoreLink::default().latency(Latency::jittered(0, 20 * MS), Latency::jittered(0, 20 * MS))
    } else {
        StoreLink::default()
    };
    let store = MemoryStore::new(config.shared.as_ref().expect("shared mode"));
    let limiters = (0..processes).map(|_| Limiter::new(config.clone()).expect("a valid config")).collect();
    let mut sim = Simulation::cluster(limiters, Server::new(server), net).with_store(store, link);
    for i in 0..600 {
        sim.enqueue_on(i % processes, 0, Request::with_route("POST", "/channels/:id/messages", (i / 6).to_string()));
    }
    sim.run().unwrap_or_else(|e| panic!("the engine broke the driver contract: {e}"))
}

fn main() {
    println!("| processes, write delay, store | mean / max makespan | runs over 3 s | 429s |");
    println!("|---|---|---|---|");
    for (processes, delay_ms, far) in
        [(2, 100, false), (4, 100, false), (4, 200, false), (4, 100, true), (4, 200, true), (8, 100, false)]
    {
        let mut makespans = Vec::new();
        let mut refused = 0;
        for seed in 1..=SEEDS {
            let report = run(processes, delay_ms * MS, far, seed);
            refused += report.server_log.iter().filter(|a| a.status == 429).count();
            makespans.push(report.makespan() as f64 / 1e9);
        }
        let mean = makespans.iter().sum::<f64>() / makespans.len() as f64;
        let max = makespans.iter().copied().fold(0.0, f64::max);
        let slow = makespans.iter().filter(|&&m| m > 3.0).count();
        let store = if far { "0-20 ms away" } else { "next to them" };
        println!("| {processes}, 0-{delay_ms} ms, {store} | {mean:.2} / {max:.2} s | {slow} | {refused} |");
    }
}
