//! # ratelane
//!
//! A sans-IO rate-limit engine for programs that call rate-limited HTTP APIs (Discord first;
//! IETF `RateLimit`, GitHub, OpenAI, Anthropic, Azure OpenAI, Shopify and plain `Retry-After`
//! through header profiles, or [`HeaderProfile::Auto`] to recognise them), and a set of
//! server-side limiters for APIs that must limit their own clients.
//!
//! The engine never opens a socket, never reads a clock and never sleeps. A driver feeds it
//! inputs — a request enqueued, a response received, a transport failure, a cancellation, time
//! passing — and drains the outputs it emits: [`Output::Send`] this request now,
//! [`Output::Fail`] that one with a reason, [`Output::WaitUntil`] call me back at that time,
//! [`Output::Idle`], plus [`Output::Observe`] events for metrics (and, in [`shared`] mode,
//! [`Output::Reserve`] / [`Output::Share`] for the store). Because time is an argument,
//! tests run in virtual time: [`sim`] holds a model of Discord's rate limiting that jumps
//! straight to the next deadline, so an hour of throttling takes milliseconds.
//!
//! ## The driver loop
//!
//! **The drain invariant:** after every input, call [`Limiter::poll_output`] until it returns
//! [`Output::WaitUntil`] or [`Output::Idle`]. The loop below is a complete driver against a
//! pretend server; real drivers (the Python, Node and browser packages) do the same with their
//! runtime's HTTP client and timers.
//!
//! ```
//! use ratelane::{Config, Disposition, Limiter, Output, Request, Response, MILLISECOND, SECOND};
//!
//! let mut limiter = Limiter::new(Config::default()).unwrap();
//! let mut now = 0;
//! let mut in_flight = Vec::new();
//! let mut delivered = 0;
//! for _ in 0..8 {
//!     limiter.enqueue(now, Request::new("POST", "/channels/123456789012345678/messages")).unwrap();
//! }
//! // The pretend server: a bucket of 5 per 2 s, answering 50 ms after each send.
//! let mut window_start = 0;
//! let mut used = 0;
//! loop {
//!     let wake = loop {
//!         match limiter.poll_output() {
//!         Output::Send(id) => in_flight.push((now + 50 * MILLISECOND, id)),
//!         Output::Fail(id, reason) => panic!("request {id} failed: {reason}"),
//!         Output::Observe(_) => {}
//!         Output::Reserve(_) | Output::Share(_) => unreachable!("shared mode is off"),
//!         Output::WaitUntil(t) => break Some(t),
//!         Output::Idle => break None,
//!         }
//!     };
//!     // Next event: the earliest response, or the limiter's wake-up.
//!     in_flight.sort();
//!     let response_first = match (in_flight.first(), wake) {
//!         (Some(&(t, _)), Some(w)) => t <= w,
//!         (Some(_), None) => true,
//!         (None, _) => false,
//!     };
//!     if response_first {
//!         let (t, id) = in_flight.remove(0);
//!         now = t;
//!         if now >= window_start + 2 * SECOND { window_start = now; used = 0; }
//!         used += 1;
//!         assert!(used <= 5, "the limiter never exceeds the bucket");
//!         let reset_after = format!("{:.3}", (window_start + 2 * SECOND - now) as f64 / 1e9);
//!         let remaining = (5 - used).to_string();
//!         let headers = [
//!             ("X-RateLimit-Limit", "5"),
//!             ("X-RateLimit-Remaining", remaining.as_str()),
//!             ("X-RateLimit-Reset-After", reset_after.as_str()),
//!             ("X-RateLimit-Bucket", "abc"),
//!         ];
//!         let disposition = limiter.handle_response(now, id, &Response::new(200, &headers)).unwrap();
//!         assert_eq!(disposition, Disposition::Complete);
//!         delivered += 1;
//!     } else if let Some(t) = wake {
//!         now = t;
//!         limiter.handle_timeout(now);
//!     } else {
//!         break;
//!     }
//! }
//! assert_eq!(delivered, 8);
//! ```
//!
//! ## Where things are
//!
//! * [`Limiter`] — the client-side engine; its [module](limiter) documents the call order.
//! * [`Config`] — settings; `Config::default()` suits a Discord bot.
//! * [`headers`] — what a response says about rate limits, per [`HeaderProfile`].
//! * [`route`] — route templates and major parameters; [`prior`] — route groups known to
//!   share a bucket before the first answer ([`Config::route_groups`]).
//! * [`snapshot`] — what a limiter learned, exported and restored across a restart
//!   ([`Limiter::snapshot`], [`Limiter::restore`]).
//! * [`server`] — server-side limiters (GCRA, leaky bucket, fixed window) and their headers.
//! * [`shared`] — shared mode: several processes share one token's limits through a store
//!   (Redis), with the store's reference model [`shared::MemoryStore`] and its Redis script's
//!   wire format ([`shared::wire`]).
//! * [`sim`] — a Discord simulator to test your own code in virtual time.
//! * `llm` (feature `json`) — the model and estimated tokens of an OpenAI or Anthropic
//!   request body, for a request's `model` and `costs`.
//!
//! Errors: caller misuse is an [`Error`] with a stable [`Error::code`]; a request that cannot
//! be served ends with an [`Output::Fail`] carrying a [`FailReason`] with a stable
//! [`FailReason::code`]. A server's malformed headers are never an error.
#![deny(missing_docs)]

pub mod config;
pub mod error;
pub mod headers;
#[cfg(feature = "json")]
pub mod json;
pub mod limiter;
#[cfg(feature = "json")]
pub mod llm;
pub mod prior;
mod rng;
pub mod route;
pub mod server;
pub mod shared;
pub mod sim;
pub mod snapshot;
pub mod types;

pub use config::Config;
pub use error::Error;
pub use limiter::{Limiter, Prediction};
pub use types::*;
