//! Server-side limiters: protecting your own API (or your own job queue) per subject.
//!
//! Three algorithms, each a pure function over a small plain state, and one bounded keyed
//! [`Store`] that keeps that state per key (user, IP, token, job group):
//!
//! | algorithm | config | state per key | answers with |
//! | --- | --- | --- | --- |
//! | [GCRA](gcra) (the fast default) | [`Gcra`] | [`GcraState`]: one `u64` | [`Decision`], or [`InsufficientCapacity`] for `n > burst` |
//! | [leaky bucket](leaky_bucket) (Sharkey's) | [`LeakyBucket`], [`LegacyLimit`] | [`LeakyBucketState`] | [`Decision`] |
//! | [fixed window](fixed_window) with a delay estimate | [`FixedWindow`] | [`FixedWindowState`] | [`Decision`] or [`Scheduled`] |
//!
//! Like the rest of the crate these never read a clock: every call takes `now`, a monotonic
//! timestamp in nanoseconds ([`Nanos`]) from an epoch of the caller's choice.
//! `now` must not go backwards for one store; an earlier `now` is tolerated (never a panic)
//! but may be answered more strictly or, after an entry has expired, more leniently.
//!
//! # The end of the clock
//!
//! A `now` is any `u64`, and every answer is exact up to the last nanosecond of that range:
//! no sum of a time and a duration wraps or saturates into a more lenient answer. Where an
//! answer would need an absolute time past `u64::MAX`, the call is refused with
//! [`Error::InvalidRequest`] (code `invalid_request`) and changes nothing:
//!
//! - a GCRA check at a `now` later than [`Gcra::last_instant`] (`u64::MAX − burst × interval`),
//!   because an admitted request may move the key's stored TAT up to one window past `now`;
//! - a fixed-window [`schedule`](FixedWindow::schedule) whose job would be released after
//!   `u64::MAX`.
//!
//! The leaky bucket, fixed-window checks and releases store no time later than `now` and
//! answer at every instant. No clock a driver reads comes near these instants (2^64 ns is
//! 584 years after its epoch); such a `now` is a unit or sign mistake, and the error says so
//! instead of limiting nothing.
//!
//! # One decision, two header sets
//!
//! Every check returns a [`Decision`]: allowed or blocked, `remaining`, `reset_after` (until the
//! next request is allowed), `clear_after` (until the key is back to empty), `replenish_after`
//! (until `remaining` next grows) and the policy (`limit` per `window`). It renders
//! the `X-RateLimit-*` headers as Sharkey defines them ([`Decision::x_ratelimit_headers`]) and the
//! IETF `RateLimit-Policy` / `RateLimit` fields ([`Decision::ietf_headers`]). Every time is
//! rounded **up** to whole seconds, so a header never tells a client to come back before it is
//! allowed; `Retry-After` is present exactly when the request is blocked.
//!
//! # Bounded stores without a sweeper
//!
//! A [`Store`] drops a key as soon as its state is back to empty (an empty state decides
//! exactly like a key never seen, so expiry is invisible to callers). Expired keys go lazily
//! when they are touched, and an amortised cleanup inspects two entries per call. `max_keys`
//! bounds memory; see [`Store`] for what happens when it is reached.
//!
//! # For bindings
//!
//! Configs are validated once by their constructors (zero sizes and rates are
//! [`Error::InvalidConfig`]); decisions and states are plain structs
//! of integers; keys are owned `String`s in [`GcraStore`], [`LeakyBucketStore`] and
//! [`FixedWindowStore`] (Rust callers may pick another key type with the `K` parameter).
//! The same limiters evaluated in Redis share one wire format, in [`script`]: each script
//! call's `ARGV` and the reading of its reply, for every host.
//!
//! A host that picks the algorithm at run time (a binding) holds a [`Limit`] (one of the
//! three configs) and a [`LimitStore`] over it, and calls them with an [`Op`]; the limit also
//! names its Redis script, builds its `ARGV` and reads its reply, so such a host needs no
//! code per algorithm.

mod decision;
pub mod fixed_window;
pub mod gcra;
pub mod leaky_bucket;
mod limit;
pub mod script;
mod slots;
mod store;

pub use decision::Decision;
pub use fixed_window::{FixedWindow, FixedWindowState, FixedWindowStore, Scheduled};
pub use gcra::{Gcra, GcraState, GcraStore, InsufficientCapacity};
pub use leaky_bucket::{BucketLevel, LeakyBucket, LeakyBucketState, LeakyBucketStore, LegacyLimit};
pub use limit::{Answer, Limit, LimitState, LimitStore, Op};
pub use store::{Algorithm, Store};

use crate::error::Error;
use crate::types::Nanos;

/// The longest duration a config may describe (about 146 years), so that sums of times and
/// durations stay far from `u64::MAX` (the same bound governor uses).
pub(crate) const MAX_DURATION: Nanos = u64::MAX / 4;

/// `Ok(())` when `ok`, else [`Error::InvalidConfig`] with `what`.
pub(crate) fn require(ok: bool, what: impl FnOnce() -> String) -> Result<(), Error> {
    if ok { Ok(()) } else { Err(Error::InvalidConfig(what())) }
}

/// Checks a configured duration: non-zero and at most [`MAX_DURATION`].
pub(crate) fn require_duration(name: &str, value: Nanos) -> Result<(), Error> {
    require(value > 0 && value <= MAX_DURATION, || {
        format!("{name} must be between 1 ns and {MAX_DURATION} ns, got {value}")
    })
}

/// Checks a configured count: non-zero.
pub(crate) fn require_count(name: &str, value: u32) -> Result<(), Error> {
    require(value > 0, || format!("{name} must be at least 1, got 0"))
}

/// A duration in `u128` (an exact sum or difference of times) as a [`Nanos`], saturated
/// upward: a wait longer than the clock is still longer than any wait it can express.
pub(crate) fn saturate(duration: u128) -> Nanos {
    Nanos::try_from(duration).unwrap_or(Nanos::MAX)
}
