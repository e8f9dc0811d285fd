//! # ratelane-tokio
//!
//! The [ratelane](ratelane) engine on tokio: [`RateLimiter::run`] sends a request when the
//! limits allow it and learns from each answer, with the semantics of the Python and Node
//! drivers (one timer, re-armed only when the deadline moves; cancellation by dropping the
//! future gives the slot back; `max_wait`, deadlines, `defer_after`, `close`; typed errors with
//! the core's stable codes). On top of it:
//!
//! * [`middleware::RateLimitMiddleware`] (feature `reqwest`): a `reqwest-middleware`
//!   middleware, so `ClientBuilder::new(reqwest::Client::new()).with(middleware)` limits every
//!   call;
//! * [`redis::RedisStore`] (feature `redis`): shared mode, several processes (or proxies)
//!   sharing each token's limits through Redis (`ratelane-redis`'s script);
//! * [`metrics::Metrics`] (feature `prometheus`): the drivers' instruments, in Prometheus
//!   text.
//!
//! `ratelane-proxy` (a Discord REST proxy) is built on this crate.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use ratelane::{Config, SECOND};
//! use ratelane_tokio::{Buffered, Options, RateLimiter};
//!
//! let mut config = Config::default();
//! config.max_wait = Some(30 * SECOND);
//! let limiter = RateLimiter::new(config)?;
//! let options = Options { timeout: Some(Duration::from_secs(5)), ..Options::default() };
//! let answer = limiter
//!     .run_with("POST", "/channels/123/messages", &options, || async {
//!         // Send the request with any client; hand back its status, headers and body.
//!         Ok::<_, std::io::Error>(Buffered { status: 200, headers: vec![], body: vec![] })
//!     })
//!     .await;
//! match answer {
//!     Ok(reply) => println!("{}", reply.status),
//!     Err(e) => println!("refused: {} ({})", e, e.code()),
//! }
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod driver;
mod error;
mod reply;

#[cfg(feature = "prometheus")]
pub mod metrics;
#[cfg(feature = "reqwest")]
pub mod middleware;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "reqwest")]
mod written;

pub use driver::{Attempt, Builder, Observer, Options, RateLimiter, SharedStore};
#[cfg(feature = "reqwest")]
pub use written::WrittenBody;
pub use error::{Error, Rejection};
pub use reply::{Buffered, MAX_HINTS_BODY, Reply, TransportError, body_hints};
