//! The proxy's figures (BENCHMARKS.md, "Issue 40"), side by side in one run, against the
//! project's Discord imitation on 127.0.0.1 (in this process):
//!
//! 1. latency the proxy adds: p50 / p99 of `GET /api/v10/users/@me` (answered by the
//!    imitation outside its limits, no round trip added) one at a time, direct and through the
//!    proxy, interleaved;
//! 2. requests per second through one proxy (64 at a time, the same route), beside direct;
//! 3. memory per token and per bucket held by the limiter (a counting allocator);
//! 4. a burst at the global cap (50/s, 200 messages over 100 channels, 20 ms round trip):
//!    discord.js alone against the imitation, then discord.js through the proxy (needs
//!    `proxy/tests/discordjs/node_modules`: `bash scripts/tests.d/50-proxy.sh` installs it).
//!
//! `cargo run --profile scoreboard -p ratelane-proxy --example proxy_bench`
#![allow(clippy::disallowed_methods)] // a benchmark reads the clock
#![allow(unsafe_code)] // the counting allocator below; nothing else (as core/benches/client.rs)

#[path = "../tests/support/mod.rs"]
mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use ratelane::sim::WindowKind;
use ratelane::{Config, MILLISECOND};
use ratelane_realtime::limits::Limits;
use ratelane_tokio::{Buffered, Options, RateLimiter};
use support::{Imitation, Proxy, TOKEN, settings};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn get(client: &reqwest::Client, url: &str) -> Duration {
    let start = Instant::now();
    let answer = client.get(url).header("authorization", format!("Bot {TOKEN}")).send().await.expect("an answer");
    assert_eq!(answer.status(), 200);
    let _ = answer.bytes().await;
    start.elapsed()
}

async fn latency(direct: &str, proxied: &str) {
    let client = support::http_client();
    let (mut d, mut p) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        get(&client, direct).await;
        get(&client, proxied).await;
    }
    for _ in 0..2000 {
        d.push(get(&client, direct).await);
        p.push(get(&client, proxied).await);
    }
    d.sort();
    p.sort();
    let (d50, d99, p50, p99) = (percentile(&d, 0.5), percentile(&d, 0.99), percentile(&p, 0.5), percentile(&p, 0.99));
    println!("| latency, one at a time (2000 each, interleaved) | direct p50 {:.3} ms, p99 {:.3} ms | through the proxy p50 {:.3} ms, p99 {:.3} ms | added: p50 {:.3} ms, p99 {:.3} ms |",
        ms(d50), ms(d99), ms(p50), ms(p99), ms(p50.saturating_sub(d50)), ms(p99.saturating_sub(d99)));
}

async fn throughput(url: &str, seconds: u64) -> f64 {
    let client = support::http_client();
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let (client, url) = (client.clone(), url.to_string());
        tasks.spawn(async move {
            let mut n = 0u64;
            while Instant::now() < end {
                get(&client, &url).await;
                n += 1;
            }
            n
        });
    }
    let total: u64 = tasks.join_all().await.into_iter().sum();
    total as f64 / seconds as f64
}

/// Bytes the limiter holds per distinct token and per distinct bucket.
async fn memory() {
    // One route, one bucket hash (as Discord's messages); each channel is a bucket of its own.
    let headers = |_: u64| {
        vec![
            ("x-ratelimit-limit".to_string(), "5".to_string()),
            ("x-ratelimit-remaining".to_string(), "4".to_string()),
            ("x-ratelimit-reset-after".to_string(), "1".to_string()),
            ("x-ratelimit-bucket".to_string(), "hash0".to_string()),
        ]
    };
    let n = 10_000u64;
    for (what, tokens) in [("token", true), ("bucket (channel)", false)] {
        let mut config = Config::default();
        config.global_limit = 100_000; // not the point here: what each token and bucket holds
        let limiter = RateLimiter::new(config).unwrap();
        // Warm: the route map and the first identity.
        let ok = |i: u64| async move { Ok::<_, std::io::Error>(Buffered { status: 200, headers: headers(i), body: vec![] }) };
        limiter.run("POST", "/channels/1/messages", || ok(0)).await.unwrap();
        let before = LIVE.load(Ordering::SeqCst);
        for i in 0..n {
            let (path, identity) = if tokens {
                ("/channels/1/messages".to_string(), format!("t:{i:032x}"))
            } else {
                (format!("/channels/{}/messages", 100_000_000_000_000_000 + i), String::new())
            };
            let options = Options { identity: Some(identity), ..Options::default() };
            limiter.run_with("POST", &path, &options, || ok(i)).await.unwrap();
        }
        let after = LIVE.load(Ordering::SeqCst);
        println!("| memory per {what} | {:.0} bytes ({n} of them; buckets held: {}) | | |", (after - before) as f64 / n as f64, limiter.buckets());
    }
}

/// Runs burst.mjs against `api`; returns its report.
fn discordjs(api: &str, first_rid: u64) -> Option<serde_json::Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/discordjs/burst.mjs");
    let output = std::process::Command::new("node")
        .args([script, api, TOKEN, "100", "2", &first_rid.to_string()])
        .output()
        .ok()?;
    serde_json::from_str(String::from_utf8_lossy(&output.stdout).trim()).ok()
}

async fn global_cap() {
    if !std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/discordjs/node_modules/discord.js")).exists() {
        println!("| burst at the global cap | skipped: install discord.js (bash scripts/tests.d/50-proxy.sh) | | |");
        return;
    }
    for (label, through_proxy) in [("discord.js alone", false), ("discord.js through ratelane-proxy", true)] {
        let imitation = Imitation::start(50).await;
        let mut proxy = Proxy::start(settings(&imitation.base)).await;
        let api = if through_proxy { format!("{}/api", proxy.url()) } else { format!("{}/api", imitation.base) };
        let report = tokio::task::spawn_blocking(move || discordjs(&api, 0)).await.unwrap();
        let tally = imitation.tally();
        match report {
            Some(r) => println!(
                "| {label}: 200 messages, 100 channels, global 50/s | ok {} of {}, {:.2} s | global 429s at the server: {}, bucket 429s: {}, arrivals: {} | duplicates: {} |",
                r["ok"], r["sent"], r["seconds"].as_f64().unwrap_or(0.0), tally.global_429, tally.bucket_429, tally.arrivals, tally.duplicates()
            ),
            None => println!("| {label} | node failed | | |"),
        }
        proxy.shutdown();
        proxy.stopped().await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!("| what | figure | beside it | |\n| --- | --- | --- | --- |");
    // No round trip added: the figures are the proxy's own cost.
    let imitation = Imitation::start_with(Limits::discord(0.2, 50, 0, WindowKind::Fixed)).await;
    let mut s = settings(&imitation.base);
    s.config.max_wait = None;
    // The proxy's own cost, not Discord's limit: the global limit out of the way (every
    // request still goes through the limiter's whole path).
    s.config.global_limit = 100_000;
    let mut proxy = Proxy::start(s).await;
    let direct = format!("{}/api/v10/users/@me", imitation.base);
    let proxied = format!("{}/api/v10/users/@me", proxy.url());
    latency(&direct, &proxied).await;
    let d = throughput(&direct, 5).await;
    let p = throughput(&proxied, 5).await;
    println!("| requests per second, 64 at a time, 5 s each | through the proxy {p:.0}/s | direct {d:.0}/s (the imitation in the same process) | proxy/direct {:.2} |", p / d);
    proxy.shutdown();
    proxy.stopped().await;
    memory().await;
    global_cap().await;
    let _ = MILLISECOND;
}
