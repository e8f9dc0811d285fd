//! The demo: a Discord bot's busy twenty seconds, run against the Discord simulator in virtual
//! time.
//!
//! Over 10 seconds the bot posts 400 messages across 20 channels (the server allows 5 per 5 s
//! per channel, fixed windows), edits 100 of them (5 per 5 s per channel, sliding windows),
//! renames a channel twice (a hidden sub-limit of 2 per 10 minutes) and answers 30
//! interactions (exempt from the global limit). The network is uneven (20 to 150 ms each way)
//! and 1% of connections fail (some before the request left, some after: those may have
//! reached the server and are not sent again); the server answers 1% of what reaches it with
//! a 5xx, and counts its global limit of 50 requests per second on arrival. ratelane drives it
//! all; the report counts every request once, under how it ended, then what the server saw.
//!
//! Run: `cargo run --release -p ratelane --example discord_bot`
//! With `-- --timeline FILE` it also writes every arrival at the server as CSV (the picture in
//! README.md is drawn from it by `scripts/demo_picture.py`).
use std::collections::BTreeMap;
use std::io::Write;

use ratelane::sim::{BucketSpec, Latency, Outcome, Report, RouteSpec, Server, ServerConfig, ServerOutcome, SimConfig, Simulation};
use ratelane::{Config, Limiter, MILLISECOND, Request, SECOND};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = Server::new(
        ServerConfig::discord()
            .bucket("msg", BucketSpec::fixed(5, 5 * SECOND))
            .bucket("edit", BucketSpec::sliding(5, 5 * SECOND))
            .bucket("channel", BucketSpec::fixed(5, 10 * SECOND))
            .route("POST /channels/:id/messages", RouteSpec::bucket("msg"))
            .route("PATCH /channels/:id/messages/:id", RouteSpec::bucket("edit"))
            .route(
                "PATCH /channels/:id",
                RouteSpec::bucket("channel").with_sub_limit(BucketSpec::fixed(2, 600 * SECOND)),
            )
            .route("POST /interactions/:id/:token/callback", RouteSpec::unlimited().exempt())
            .global(Some(BucketSpec::fixed(50, SECOND)))
            .error_rate(0.01)
            .seed(2026),
    );
    let mut config = Config::default();
    config.max_wait = Some(120 * SECOND);
    let limiter = Limiter::new(config)?;
    let net = SimConfig::default()
        .seed(11)
        .latency(Latency::jittered(20 * MILLISECOND, 130 * MILLISECOND), Latency::jittered(20 * MILLISECOND, 130 * MILLISECOND))
        .drops(0.01);
    let mut sim = Simulation::new(limiter, server, net);

    let mut t = 0;
    for i in 0..400u64 {
        let channel = format!("{}", 100 + i % 20);
        sim.enqueue_at(t, Request::with_route("POST", "/channels/:id/messages", channel.clone()));
        if i % 4 == 0 {
            sim.enqueue_at(t, Request::with_route("PATCH", "/channels/:id/messages/:id", channel));
        }
        t += 25 * MILLISECOND; // the bot produces 40 messages per second
    }
    for i in 0..30u64 {
        let token = format!("{}/tok{i}", 900 + i);
        sim.enqueue_at(i * 300 * MILLISECOND, Request::with_route("POST", "/interactions/:id/:token/callback", token));
    }
    sim.enqueue_at(SECOND, Request::with_route("PATCH", "/channels/:id", "100"));
    sim.enqueue_at(2 * SECOND, Request::with_route("PATCH", "/channels/:id", "100"));

    let report = sim.run()?;
    let makespan = report.makespan() as f64 / SECOND as f64;
    println!("ratelane demo: a Discord bot's burst, {makespan:.1} s in virtual time");
    print_outcomes(&report);
    print_wire(&report);
    if let Some(path) = timeline_arg() {
        write_timeline(&report, &path)?;
        println!("timeline of arrivals written to {path}");
    }
    let unfinished = report.unfinished();
    assert!(unfinished.is_empty(), "every request ends: {unfinished:?}");
    assert!(report.known_limit_violations().is_empty(), "no 429 from a limit the engine knew");
    assert!(report.max_global_in_window("") <= 50, "the global limit held at the server");
    println!("OK: every request ended exactly once, and no known limit was exceeded.");
    Ok(())
}

/// Every request once, under how it ended; the lines add up to the total.
fn print_outcomes(report: &Report) {
    let mut ended: BTreeMap<String, usize> = BTreeMap::new();
    for r in &report.requests {
        let key = match &r.outcome {
            Some(Outcome::Completed(s)) if (200..300).contains(s) => "a  completed, 2xx".to_string(),
            Some(Outcome::Completed(s)) => format!("b  completed, status {s} (handed to the caller)"),
            Some(Outcome::Failed(reason)) => format!("c  failed: {}", describe_failure(reason.code())),
            Some(Outcome::Cancelled) => "d  cancelled".to_string(),
            Some(Outcome::Rejected(code)) => format!("e  refused at enqueue: {code}"),
            None => "f  never ended (a bug)".to_string(),
        };
        *ended.entry(key).or_default() += 1;
    }
    let total = report.requests.len();
    println!("  {total} requests, each counted once under how it ended:");
    for (key, n) in &ended {
        println!("    {n:>4}  {}", &key[3..]);
    }
    assert_eq!(ended.values().sum::<usize>(), total, "the outcomes add up to the requests");
}

fn describe_failure(code: &str) -> String {
    match code {
        "maybe_sent" => "maybe_sent (the connection broke after it left; not sent again)".to_string(),
        "max_wait_exceeded" => "max_wait_exceeded (would have waited longer than allowed)".to_string(),
        other => other.to_string(),
    }
}

/// What went over the wire and what the server answered.
fn print_wire(report: &Report) {
    let arrivals = report.server_log.len();
    let lost = report.server_log.iter().filter(|a| a.response_lost).count();
    let sends = report.total_sends();
    println!("  on the wire:");
    println!("    {sends:>4}  sends (a request whose connection failed before it left is sent again)");
    println!("    {arrivals:>4}  reached the server:");
    println!("    {:>4}    answered 2xx", report.count(ServerOutcome::Accepted));
    println!("    {:>4}    answered 5xx", report.count(ServerOutcome::ServerError));
    println!("    {:>4}    answered 429 (none from a limit the engine knew: {})", report.count_429(), report.known_limit_violations().len());
    println!("    {lost:>4}  answers lost on the way back (the bot saw the connection break)");
    println!("  most requests the server counted in any 1 s: {} (global limit 50)", report.max_global_in_window(""));
}

fn timeline_arg() -> Option<String> {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--timeline" {
            return args.next();
        }
    }
    None
}

/// One CSV line per arrival at the server: when, which route and channel, what it answered.
fn write_timeline(report: &Report, path: &str) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "at_ms,route,major,status,counted_global")?;
    for a in &report.server_log {
        writeln!(
            out,
            "{:.3},{},{},{},{}",
            a.at as f64 / MILLISECOND as f64,
            a.route,
            a.major,
            a.status,
            a.counted_global
        )?;
    }
    out.flush()
}
