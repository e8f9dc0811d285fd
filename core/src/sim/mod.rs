//! A Discord simulator: test code that uses a [`Limiter`](crate::Limiter) in virtual time.
//!
//! Two parts, usable separately:
//!
//! * [`Server`]: a model of Discord's REST rate limiting (protocols.md §1). Buckets shared
//!   between routes (route key -> bucket hash), state per (identity, hash, major
//!   parameter), fixed or sliding windows, the global limit per identity counted on
//!   **arrival** time, routes exempt from it, hidden sub-limits, shared-scope 429s, routes
//!   without rate-limit headers, the invalid-request counter (401/403/non-shared 429) and the
//!   Cloudflare ban that follows it, bucket-hash changes over time, random 5xx. It answers
//!   with Discord's headers (`X-RateLimit-Limit/Remaining/Reset/Reset-After/Bucket`, and on
//!   429 `Retry-After` (integer, rounded up), `X-RateLimit-Scope`, `X-RateLimit-Global`, plus
//!   the body's `retry_after`/`global` as [`BodyHints`](crate::BodyHints)) and logs every
//!   arrival with its outcome ([`Arrival`]). The same limits can be told in another provider's
//!   headers ([`ServerConfig::dialect`]: IETF, GitHub, OpenAI, Azure OpenAI, Anthropic,
//!   Shopify), with a token budget beside each bucket ([`ServerConfig::tokens`]) or a leaky
//!   bucket per identity ([`ServerConfig::leaky`]).
//! * [`Simulation`]: a driver loop around a [`Limiter`](crate::Limiter), a [`Server`] and a
//!   timed event queue. It behaves as a real driver must (drain
//!   [`Limiter::poll_output`](crate::Limiter::poll_output) until `WaitUntil`/`Idle` after every
//!   input; one timer), adds latency (base + jitter + spikes, so arrivals and responses are
//!   reordered) and dropped connections ([`Failure::NotSent`](crate::Failure::NotSent) /
//!   [`Failure::MaybeSent`](crate::Failure::MaybeSent); a test can also script the fate of
//!   one send with [`Simulation::script_send`]), jumps straight to the next event, and checks
//!   the driver contract: every request ends exactly once, no output names an
//!   unknown or finished request. The [`Report`] holds each request's outcome and sends,
//!   the server log, and checks for the usual invariants
//!   ([`Report::known_limit_violations`], [`Report::fifo_violations`],
//!   [`Report::deadline_violations`], [`Report::max_global_in_window`]).
//!
//! Everything is deterministic: the only randomness comes from [`SplitMix64`] generators
//! seeded by [`SimConfig::seed`] and [`ServerConfig::seed`], so a failing run replays exactly.
//!
//! Route keys are the limiter's: `METHOD /template` for [`Request::with_route`](crate::Request::with_route)
//! requests, [`route_for`](crate::route::route_for) for concrete paths. Tests that must not
//! depend on path parsing use `with_route`.
//!
//! # Example: a burst of 100 messages to one channel
//!
//! ```
//! use ratelane::sim::{BucketSpec, Outcome, RouteSpec, Server, ServerConfig, SimConfig, Simulation, StopReason};
//! use ratelane::{Config, Limiter, Request, SECOND};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Discord's server: messages to a channel are limited to 5 per 5 seconds.
//! let server = Server::new(
//!     ServerConfig::discord()
//!         .bucket("80c17d2f203122d936070c88c8d10f33", BucketSpec::fixed(5, 5 * SECOND))
//!         .route("POST /channels/:id/messages", RouteSpec::bucket("80c17d2f203122d936070c88c8d10f33")),
//! );
//! let limiter = Limiter::new(Config::default())?;
//! let mut sim = Simulation::new(limiter, server, SimConfig::default().seed(42));
//!
//! // The code under test enqueues 100 messages at t = 0.
//! let tickets: Vec<_> = (0..100)
//!     .map(|_| sim.enqueue_at(0, Request::with_route("POST", "/channels/:id/messages", "123")))
//!     .collect();
//!
//! let report = sim.run()?; // virtual time: takes milliseconds, not minutes
//! assert_eq!(report.stop, StopReason::Finished);
//! assert!(tickets.iter().all(|&t| report.outcome(t) == Some(&Outcome::Completed(200))));
//! assert_eq!(report.count_429(), 0); // the limiter learned the bucket from the first response
//! assert_eq!(report.total_sends(), 100); // nothing was sent twice
//! // 20 windows of 5: the last batch goes out after 19 resets, at ~95 s.
//! assert!(report.makespan() < 100 * SECOND);
//! assert!(report.fifo_violations().is_empty());
//! # Ok(())
//! # }
//! ```

mod harness;
mod server;

pub use harness::{
    Fate, Latency, Outcome, Report, RequestRecord, SendRecord, SimConfig, SimError, Simulation,
    StopReason, StoreLink, Ticket,
};
pub use crate::rng::SplitMix64;
pub use server::{
    Arrival, BucketSpec, LeakySpec, Remap, RouteSpec, Server, ServerConfig, ServerOutcome,
    ServerResponse, TokenSpec, WindowKind, max_in_window, route_of,
};
