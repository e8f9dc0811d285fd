//! The demo: a Discord bot's busy minute, run against the Discord simulator in virtual time.
//!
//! The bot posts 400 messages across 20 channels (5 per 5 s per channel, sliding windows on
//! some), edits messages, renames a channel twice (a hidden sub-limit of 2 per 10 minutes), and
//! answers 30 interactions (exempt from the global limit), with uneven latency (20 to 150 ms each
//! way), 2% of answers lost or failing with 5xx, and the global limit of 50 requests per second
//! counted at the server on arrival. ratelane drives it all; the report shows what the server
//! saw.
//!
//! Run: `cargo run --release -p ratelane --example discord_bot`
use ratelane::sim::{BucketSpec, Latency, RouteSpec, Server, ServerConfig, ServerOutcome, SimConfig, Simulation};
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
    let total = report.requests.len();
    println!("ratelane demo: a Discord bot's busy minute, in virtual time");
    println!("  requests                 {total}");
    println!("  answered 2xx             {}", report.count(ServerOutcome::Accepted));
    println!("  completed (any status)   {}", report.succeeded());
    println!("  failed fast (max_wait)   {}", report.failed_with("max_wait_exceeded"));
    println!("  not re-sent (maybe_sent) {}", report.failed_with("maybe_sent"));
    println!("  sends on the wire        {}", report.total_sends());
    println!("  429s from known limits   {}", report.known_limit_violations().len());
    println!("  429s in total            {} (a 429 on a bucket's first request cannot be avoided)", report.count_429());
    println!("  most requests the server counted in any 1 s (global limit 50): {}", report.max_global_in_window(""));
    println!("  virtual time until the last answer: {:.1} s", report.makespan() as f64 / SECOND as f64);
    let unfinished = report.unfinished();
    assert!(unfinished.is_empty(), "every request ends: {unfinished:?}");
    assert!(report.known_limit_violations().is_empty(), "no 429 from a limit the engine knew");
    assert!(report.max_global_in_window("") <= 50, "the global limit held at the server");
    println!("OK: every request ended exactly once, and no known limit was exceeded.");
    Ok(())
}
