//! ratelane's server-side limiters evaluated atomically in Redis, for several processes or
//! machines sharing one limit.
//!
//! Also the store of the core's shared mode ([`ratelane::shared`]: several processes sharing
//! one Discord token's limits): [`RedisStore`], run by `redis/scripts/shared_store.lua`
//! ([`SHARED_STORE_LUA`]).
//!
//! The three algorithms of [`ratelane::server`] — [GCRA](RedisGcra),
//! [Sharkey's leaky bucket](RedisLeakyBucket) and [fixed windows with release
//! estimates](RedisFixedWindow) — each run by one Lua script (`redis/scripts/*.lua`, also
//! exported as [`GCRA_LUA`], [`LEAKY_BUCKET_LUA`] and [`FIXED_WINDOW_LUA`]): **one script call,
//! one round trip per check** (`EVALSHA`; `EVAL` once when Redis answers `NOSCRIPT`). Answers
//! are the core's own types ([`Decision`](ratelane::server::Decision),
//! [`Scheduled`](ratelane::server::Scheduled)), equal field for field to the in-memory stores'
//! on the same inputs, so response headers come from the core's
//! [`Decision::x_ratelimit_headers`](ratelane::server::Decision::x_ratelimit_headers) and
//! [`Decision::ietf_headers`](ratelane::server::Decision::ietf_headers).
//!
//! ```no_run
//! use ratelane::server::Gcra;
//! use ratelane::SECOND;
//! use ratelane_redis::RedisGcra;
//!
//! let client = redis::Client::open("redis://127.0.0.1/")?;
//! let mut con = client.get_connection()?;
//! // 10 requests per second per user, all of them allowed back to back.
//! let limiter = RedisGcra::new(Gcra::per_window(10, SECOND)?)?;
//! let decision = limiter.check(&mut con, "ratelane:user:42")?;
//! if !decision.allowed {
//!     // 429 with decision.ietf_headers("per-user") and decision.retry_after_secs()
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The limiter values hold only configuration (they are `Copy`); every call takes the
//! connection to use (`&mut dyn redis::ConnectionLike`: a `Connection`, a pooled one, a
//! cluster connection, or a wrapper). Keys are used as given: prefix them yourself.
//!
//! With the feature **`aio`** every call also has an `_async` twin (`check_async`,
//! `schedule_at_async`, [`RedisStore::reserve_async`], ...) taking
//! `&mut impl redis::aio::ConnectionLike` (a tokio `MultiplexedConnection`, a pool's
//! connection): the same script call, the same answers.
//!
//! # Time
//!
//! Every script reads **Redis's own clock** (`TIME`), so the clocks of the processes that
//! share a key do not matter. The `*_at` methods pass `now` (nanoseconds, any epoch) instead,
//! for replaying fixed timestamps in tests; all callers of one key must then use that clock.
//! Absolute times in answers ([`Scheduled::release_at`](ratelane::server::Scheduled)) are in
//! the clock used: Unix nanoseconds for Redis's clock.
//!
//! # Expiry
//!
//! No sweeper: a script deletes a key as soon as its state is back to empty and otherwise writes
//! it with a TTL (`SET … PX`, rounded up to the millisecond) that ends when it will be, so an
//! expired key decides exactly like one never seen. (Fixed windows keep a group one window
//! longer while delayed jobs are unreleased; see [`RedisFixedWindow`].) Each key holds one
//! string value in the layout documented in its script. A test replaying virtual time faster
//! than real time can keep keys longer with `with_min_ttl_ms`; the scripts then still treat a
//! state that has emptied in virtual time as empty.
//!
//! # Failures
//!
//! An [`Error`] means the limiter could not decide (Redis unreachable, an error reply, a key
//! holding something else, a reply of the wrong shape); nothing panics. Whether to admit
//! (fail open) or refuse (fail closed) is the caller's decision. There are no retries inside:
//! a check that failed after being sent may or may not have been counted.
//!
//! # Precision
//!
//! Lua numbers are doubles. The scripts keep absolute times as decimal strings of nanoseconds
//! and compute every duration relative to now, in integer nanoseconds, so results are exact as
//! long as each configured window is at most [`MAX_WINDOW`] (2^52 ns, about 52 days); the
//! constructors reject longer ones.

#![deny(missing_docs)]

mod error;
mod fixed_window;
mod gcra;
mod leaky_bucket;
mod reply;
mod script;
mod shared;

pub use error::Error;
pub use fixed_window::RedisFixedWindow;
pub use gcra::RedisGcra;
pub use leaky_bucket::RedisLeakyBucket;
pub use shared::{RedisStore, StoreOp, StoreReply};

use ratelane::Nanos;

/// `redis/scripts/gcra.lua`: GCRA check (contract in its header comment and the README).
pub const GCRA_LUA: &str = include_str!("../scripts/gcra.lua");
/// `redis/scripts/leaky_bucket.lua`: leaky-bucket check.
pub const LEAKY_BUCKET_LUA: &str = include_str!("../scripts/leaky_bucket.lua");
/// `redis/scripts/fixed_window.lua`: fixed-window check, schedule and release.
pub const FIXED_WINDOW_LUA: &str = include_str!("../scripts/fixed_window.lua");

/// `redis/scripts/shared_store.lua`: the store of the core's shared mode ([`RedisStore`]).
pub const SHARED_STORE_LUA: &str = include_str!("../scripts/shared_store.lua");

/// The SHA-1 of `shared_store.lua`, as `EVALSHA` takes it.
pub fn shared_store_sha() -> &'static str {
    script::SHARED_STORE.sha()
}

/// The longest window the scripts evaluate exactly: 2^52 ns (about 52 days). Lua numbers
/// are doubles, exact for integers below 2^53, and the scripts add up to two windows
/// (the core's [`ratelane::server::script::MAX_WINDOW`]).
pub const MAX_WINDOW: Nanos = ratelane::server::script::MAX_WINDOW;

/// The SHA-1 of each script, as `EVALSHA` takes it: `(gcra, leaky_bucket, fixed_window)`.
pub fn script_shas() -> (&'static str, &'static str, &'static str) {
    (script::GCRA.sha(), script::LEAKY_BUCKET.sha(), script::FIXED_WINDOW.sha())
}

/// The core's check of a configured window against [`MAX_WINDOW`]
/// (`ratelane::server::script::check_*`), with its message.
fn require_window(checked: Result<(), ratelane::Error>) -> Result<(), Error> {
    checked.map_err(|e| match e {
        ratelane::Error::InvalidConfig(message) => Error::InvalidConfig(message),
        other => Error::from(other),
    })
}
