//! Sharkey's leaky bucket: a bucket of `size` requests that drips `drip_size` of them every
//! `drip_rate`, with a per-subject `factor` that shrinks it and legacy limits translated.
//!
//! Each admitted request adds one to the bucket's level; a request is blocked while the level
//! is at or above `size`. Drips are discrete, as in Sharkey: every whole `drip_rate` since the
//! last drip removes `drip_size`, and the first request into an empty bucket starts the drip
//! clock. In any span of time `L`, at most `size + drip_size × ⌈L / drip_rate⌉` requests are
//! admitted.
//!
//! - **Factor.** [`LeakyBucket::scaled`] (or [`Store::check_scaled`]) multiplies the size by a
//!   `factor` in `(0, 1]`, rounded down, at least 1: a smaller burst for a suspicious subject,
//!   at the same drip.
//! - **Over-filled buckets.** A level above the size (a smaller factor than when the requests
//!   were admitted, or a state written by another process under concurrency) is not an error:
//!   the request is blocked until the bucket has dripped below the size, so the delay grows.
//! - **Legacy limits** `{max, duration, min_interval}` ([`LegacyLimit`]) become a bucket of
//!   `size = max` dripping one request every `⌈duration / max⌉` (rounded **up** to the
//!   nanosecond, so that `max` drips never take less than `duration`), checked together with
//!   a second bucket of size 1 dripping every `min_interval` (two admitted requests are never
//!   closer than `min_interval`). One bucket cannot hold both: its burst would have to be 1
//!   for the interval and `max` for the window. A request is admitted only when both buckets
//!   have room, and counted in both.
//!
//!   The bound, for any client (one that retries exactly at `reset_after` included): at most
//!   `max` back to back, at most `2 × max − 1` within any span shorter than `duration` (a
//!   full burst of `max`, then the `max − 1` drips that fit before `duration` has passed),
//!   and in the long run `max` per `max × ⌈duration / max⌉`: `duration` plus less than `max`
//!   nanoseconds, never faster than `max` per `duration`. When `duration` is not a multiple
//!   of `max` the bucket so drains in a little more than `duration`, and the IETF policy's
//!   `w`, rounded up, may read one second more (`q=3;w=11` for 3 per 10 s). Like Sharkey's
//!   translation this is a leaky bucket, not a sliding log: a sliding window of `duration`
//!   may see up to `2 × max − 1`, not `max`. (Rounding the drip down, as before, let the
//!   `max`-th drip land inside the span: `{max: 3, duration: 10 s}` admitted 6 within 10 s to
//!   a client retrying at `reset_after`.)
//!
//! ```
//! use ratelane::server::{LeakyBucket, LeakyBucketStore, LegacyLimit};
//! use ratelane::{MILLISECOND, SECOND};
//!
//! // Sharkey's { size: 3, dripRate: 1000, dripSize: 1 }.
//! let mut store = LeakyBucketStore::new(LeakyBucket::new(3, SECOND, 1)?, 100_000)?;
//! for _ in 0..3 {
//!     assert!(store.check("user:1", 0).allowed);
//! }
//! let blocked = store.check("user:1", 200 * MILLISECOND);
//! assert!(!blocked.allowed);
//! assert_eq!(blocked.reset_after, 800 * MILLISECOND); // the next drip
//! assert_eq!(blocked.x_ratelimit_headers(), [
//!     ("X-RateLimit-Remaining", "0".to_string()),
//!     ("X-RateLimit-Clear", "3".to_string()),
//!     ("X-RateLimit-Reset", "1".to_string()),
//!     ("Retry-After", "1".to_string()),
//! ]);
//!
//! // A suspicious subject gets a third of the bucket.
//! assert!(store.check_scaled("user:2", 0, 0.34)?.allowed);
//! assert!(!store.check_scaled("user:2", 0, 0.34)?.allowed);
//!
//! // Misskey's { max: 10, duration: 60s, minInterval: 1s }.
//! let legacy = LeakyBucket::from_legacy(LegacyLimit {
//!     max: Some(10),
//!     duration: Some(60 * SECOND),
//!     min_interval: Some(SECOND),
//! })?;
//! let mut store = LeakyBucketStore::new(legacy, 100_000)?;
//! assert!(store.check("user:3", 0).allowed);
//! assert!(!store.check("user:3", 500 * MILLISECOND).allowed); // too soon
//! assert!(store.check("user:3", SECOND).allowed);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Borrow;
use std::hash::Hash;

use super::decision::Decision;
use super::store::{Algorithm, Store};
use super::{require, require_count, require_duration, saturate};
use crate::error::Error;
use crate::types::Nanos;

/// A leaky bucket: `size` requests, `drip_size` of them leaving every `drip_rate`, and
/// optionally at least `min_interval` between two admitted requests. Build it with
/// [`LeakyBucket::new`] or [`LeakyBucket::from_legacy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyBucket {
    size: u32,
    drip_rate: Nanos,
    drip_size: u32,
    min_interval: Option<Nanos>,
}

/// A legacy Misskey limit: at most `max` requests per `duration`, and at least `min_interval`
/// between two requests. `max` and `duration` go together; either pair or `min_interval` may
/// be left out, not both. Durations in nanoseconds (Misskey's are milliseconds: multiply by
/// [`MILLISECOND`](crate::MILLISECOND)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LegacyLimit {
    /// Requests allowed per `duration`.
    pub max: Option<u32>,
    /// The window of `max`.
    pub duration: Option<Nanos>,
    /// The shortest time between two admitted requests.
    pub min_interval: Option<Nanos>,
}

/// The level of one bucket. `BucketLevel::default()` is an empty bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BucketLevel {
    /// Requests in the bucket. May exceed the size (an over-filled bucket).
    pub level: u64,
    /// When the bucket last dripped (or started dripping); meaningless when `level` is 0.
    pub last_drip: Nanos,
}

/// The state of one key: the main bucket and the `min_interval` bucket (empty when the limit
/// has no minimum interval). `LeakyBucketState::default()` is the empty state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LeakyBucketState {
    /// The bucket of `size`.
    pub main: BucketLevel,
    /// The bucket of size 1 dripping every `min_interval`.
    pub spacing: BucketLevel,
}

/// How a bucket drains: `size` requests every `rate`.
#[derive(Debug, Clone, Copy)]
struct Drain {
    rate: Nanos,
    size: u64,
}

impl BucketLevel {
    /// Applies every whole drip due at `now`.
    fn drip(&mut self, now: Nanos, drain: Drain) {
        let drips = now.saturating_sub(self.last_drip) / drain.rate;
        if self.level == 0 || drips == 0 {
            return;
        }
        let drained = drips.saturating_mul(drain.size);
        if drained >= self.level {
            *self = BucketLevel::default();
        } else {
            self.level -= drained;
            self.last_drip += drips * drain.rate;
        }
    }

    /// Adds one request; the first one into an empty bucket starts the drip clock.
    fn add(&mut self, now: Nanos) {
        if self.level == 0 {
            self.last_drip = now;
        }
        self.level += 1;
    }

    /// Time from `now` until the level is at most `target` (0 if it already is).
    fn time_until(&self, target: u64, now: Nanos, drain: Drain) -> Nanos {
        if self.level <= target {
            return 0;
        }
        let drips = (self.level - target).div_ceil(drain.size);
        // Exact in u128: a wait longer than the clock saturates upward, never to an earlier
        // time (an earlier one would let the store forget a bucket that is not empty).
        let due = u128::from(drips) * u128::from(drain.rate);
        saturate(due.saturating_sub(u128::from(now.saturating_sub(self.last_drip))))
    }
}

impl LeakyBucket {
    /// A bucket of `size` requests that drips `drip_size` requests every `drip_rate`
    /// nanoseconds (Sharkey's `dripRate` is in milliseconds: multiply by
    /// [`MILLISECOND`](crate::MILLISECOND)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when a value is 0 or `drip_rate` is too long.
    pub fn new(size: u32, drip_rate: Nanos, drip_size: u32) -> Result<LeakyBucket, Error> {
        require_count("size", size)?;
        require_duration("drip_rate", drip_rate)?;
        require_count("drip_size", drip_size)?;
        Ok(LeakyBucket { size, drip_rate, drip_size, min_interval: None })
    }

    /// The same bucket, and at least `min_interval` between two admitted requests (a second
    /// bucket of size 1 dripping every `min_interval`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `min_interval` is 0 or too long.
    pub fn with_min_interval(self, min_interval: Nanos) -> Result<LeakyBucket, Error> {
        require_duration("min_interval", min_interval)?;
        Ok(LeakyBucket { min_interval: Some(min_interval), ..self })
    }

    /// Translates a legacy limit (see the [module docs](self) for the bound it keeps):
    ///
    /// - `max` per `duration`: `size = max`, one request dripping every `⌈duration / max⌉`
    ///   (rounded up: at most `2 × max − 1` requests within any span shorter than `duration`);
    /// - `min_interval`: a second bucket of size 1 dripping every `min_interval`
    ///   (alone, it is the only bucket: size 1, one drip per `min_interval`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `max` comes without `duration` or the other way round,
    /// when nothing is set, when a value is 0, or when `duration` is shorter than `max`
    /// nanoseconds.
    pub fn from_legacy(limit: LegacyLimit) -> Result<LeakyBucket, Error> {
        match (limit.max, limit.duration, limit.min_interval) {
            (Some(max), Some(duration), min_interval) => {
                require_count("max", max)?;
                require_duration("duration", duration)?;
                require(duration >= u64::from(max), || {
                    format!(
                        "duration ({duration} ns) must be at least one nanosecond per request ({max})"
                    )
                })?;
                let bucket = LeakyBucket::new(max, duration.div_ceil(u64::from(max)), 1)?;
                match min_interval {
                    Some(min_interval) => bucket.with_min_interval(min_interval),
                    None => Ok(bucket),
                }
            }
            (None, None, Some(min_interval)) => LeakyBucket::new(1, min_interval, 1),
            (None, None, None) => Err(Error::InvalidConfig(
                "a legacy limit needs max and duration, or min_interval".into(),
            )),
            _ => Err(Error::InvalidConfig("legacy max and duration must be given together".into())),
        }
    }

    /// This bucket for a subject with rate-limit `factor`: the size multiplied by `factor`,
    /// rounded down (forgiving float representation error such as `100 × 0.29`), at least 1.
    /// The drip and the minimum interval do not change.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `factor` is not in `(0, 1]`.
    pub fn scaled(&self, factor: f64) -> Result<LeakyBucket, Error> {
        require(factor > 0.0 && factor <= 1.0, || {
            format!("factor must be greater than 0 and at most 1, got {factor}")
        })?;
        let size = (f64::from(self.size) * factor * (1.0 + 1e-12)).floor().max(1.0) as u32;
        Ok(LeakyBucket { size: size.min(self.size), ..*self })
    }

    /// Requests the bucket holds.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Time between two drips.
    pub fn drip_rate(&self) -> Nanos {
        self.drip_rate
    }

    /// Requests removed by one drip.
    pub fn drip_size(&self) -> u32 {
        self.drip_size
    }

    /// The shortest time between two admitted requests, if any.
    pub fn min_interval(&self) -> Option<Nanos> {
        self.min_interval
    }

    /// The time a full bucket takes to drain: `⌈size / drip_size⌉ × drip_rate`.
    pub fn window(&self) -> Nanos {
        u64::from(self.size.div_ceil(self.drip_size)).saturating_mul(self.drip_rate)
    }

    fn main_drain(&self) -> Drain {
        Drain { rate: self.drip_rate, size: u64::from(self.drip_size) }
    }

    fn spacing_drain(&self) -> Option<Drain> {
        self.min_interval.map(|rate| Drain { rate, size: 1 })
    }

    /// Checks one request against `state` at `now`, and counts it if admitted.
    pub fn check(&self, state: &mut LeakyBucketState, now: Nanos) -> Decision {
        let size = u64::from(self.size);
        let main = self.main_drain();
        state.main.drip(now, main);
        let spacing = self.spacing_drain();
        if let Some(drain) = spacing {
            state.spacing.drip(now, drain);
        }
        let allowed = state.main.level < size && state.spacing.level == 0;
        if allowed {
            state.main.add(now);
            if spacing.is_some() {
                state.spacing.add(now);
            }
        }

        // The spacing bucket has size 1: room for one more and empty are the same thing.
        let spacing_wait = spacing.map_or(0, |drain| state.spacing.time_until(0, now, drain));
        let reset_after = state.main.time_until(size - 1, now, main).max(spacing_wait);
        let remaining =
            if state.spacing.level > 0 { 0 } else { size.saturating_sub(state.main.level) as u32 };
        let replenish_after = if remaining == 0 {
            Some(reset_after)
        } else if state.main.level == 0 {
            None
        } else {
            // Below the size, `remaining` grows with the next drip.
            Some(state.main.time_until(state.main.level - 1, now, main))
        };
        Decision {
            allowed,
            limit: self.size,
            remaining,
            reset_after,
            clear_after: state.main.time_until(0, now, main).max(spacing_wait),
            replenish_after,
            window: self.window(),
        }
    }
}

impl Algorithm for LeakyBucket {
    type State = LeakyBucketState;

    fn is_idle(&self, state: &LeakyBucketState, now: Nanos) -> bool {
        state.main.time_until(0, now, self.main_drain()) == 0
            && self.spacing_drain().is_none_or(|drain| state.spacing.time_until(0, now, drain) == 0)
    }
}

/// A [`Store`] of leaky-bucket states, keyed by `String` unless another key type is chosen.
pub type LeakyBucketStore<K = String> = Store<LeakyBucket, K>;

impl<K: Hash + Eq> Store<LeakyBucket, K> {
    /// Checks one request for `key` at `now` with the configured bucket (factor 1).
    pub fn check<Q>(&mut self, key: &Q, now: Nanos) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.update(key, now, |bucket, state| bucket.check(state, now))
    }

    /// Checks one request for `key` at `now` with the bucket scaled by the subject's `factor`
    /// (see [`LeakyBucket::scaled`]). The key's state is shared across factors: a subject
    /// whose factor shrinks may find its bucket over-filled, and then waits longer.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `factor` is not in `(0, 1]`; the store is not touched.
    pub fn check_scaled<Q>(&mut self, key: &Q, now: Nanos, factor: f64) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let bucket = self.algorithm.scaled(factor)?;
        Ok(self.update(key, now, |_, state| bucket.check(state, now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{MILLISECOND, SECOND};

    #[test]
    fn drips_are_discrete_and_start_with_the_first_request() {
        let bucket = LeakyBucket::new(2, SECOND, 1).unwrap();
        let mut s = LeakyBucketState::default();
        let t0 = 10 * SECOND;
        assert!(bucket.check(&mut s, t0).allowed);
        let d = bucket.check(&mut s, t0 + 300 * MILLISECOND);
        assert!(d.allowed);
        assert_eq!(
            (d.remaining, d.reset_after, d.clear_after),
            (0, 700 * MILLISECOND, 1700 * MILLISECOND)
        );
        let d = bucket.check(&mut s, t0 + 999 * MILLISECOND);
        assert!(!d.allowed);
        assert_eq!(d.reset_after, MILLISECOND);
        assert!(bucket.check(&mut s, t0 + SECOND).allowed);
    }

    #[test]
    fn over_filled_bucket_waits_until_below_the_size() {
        let bucket = LeakyBucket::new(10, SECOND, 2).unwrap();
        let mut s = LeakyBucketState::default();
        for _ in 0..9 {
            assert!(bucket.check(&mut s, 0).allowed);
        }
        let small = bucket.scaled(0.5).unwrap();
        assert_eq!(small.size(), 5);
        let d = small.check(&mut s, 100 * MILLISECOND);
        assert!(!d.allowed);
        // Level 9 must drop to 4: three drips of 2.
        assert_eq!((d.remaining, d.reset_after), (0, 3 * SECOND - 100 * MILLISECOND));
        assert_eq!(d.clear_after, 5 * SECOND - 100 * MILLISECOND);
    }

    #[test]
    fn factors_round_down_but_keep_one_request() {
        let bucket = LeakyBucket::new(100, SECOND, 1).unwrap();
        assert_eq!(bucket.scaled(0.29).unwrap().size(), 29);
        assert_eq!(bucket.scaled(0.001).unwrap().size(), 1);
        assert_eq!(bucket.scaled(1.0).unwrap().size(), 100);
        for bad in [0.0, -1.0, 1.5, f64::NAN, f64::INFINITY] {
            assert!(bucket.scaled(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn legacy_translation() {
        let limit = |max, duration, min_interval| {
            LeakyBucket::from_legacy(LegacyLimit { max, duration, min_interval })
        };
        let b = limit(Some(10), Some(60 * SECOND), Some(SECOND)).unwrap();
        assert_eq!(
            (b.size(), b.drip_rate(), b.drip_size(), b.min_interval()),
            (10, 6 * SECOND, 1, Some(SECOND))
        );
        // Rounded up: three drips of 10 s / 3 never fit in less than 10 s.
        let b = limit(Some(3), Some(10 * SECOND), None).unwrap();
        assert_eq!((b.size(), b.drip_rate()), (3, 3_333_333_334));
        let b = limit(None, None, Some(2 * SECOND)).unwrap();
        assert_eq!((b.size(), b.drip_rate(), b.min_interval()), (1, 2 * SECOND, None));
        assert!(limit(Some(10), None, None).is_err());
        assert!(limit(None, Some(SECOND), Some(SECOND)).is_err());
        assert!(limit(None, None, None).is_err());
        assert!(limit(Some(0), Some(SECOND), None).is_err());
    }

    #[test]
    fn min_interval_leaves_nothing_to_send_at_once() {
        let b = LeakyBucket::new(5, 10 * SECOND, 1).unwrap().with_min_interval(SECOND).unwrap();
        let mut s = LeakyBucketState::default();
        let d = b.check(&mut s, 0);
        assert!(d.allowed);
        assert_eq!((d.remaining, d.reset_after, d.replenish_after), (0, SECOND, Some(SECOND)));
        let d = b.check(&mut s, SECOND / 2);
        assert!(!d.allowed);
        // Every admitted request fills the spacing bucket: nothing can follow at once, and
        // the headers say so (r=0, t=min_interval) while the main bucket still has room.
        let d = b.check(&mut s, SECOND);
        assert!(d.allowed);
        assert_eq!((d.remaining, d.replenish_after, d.clear_after), (0, Some(SECOND), 19 * SECOND));
    }
}
