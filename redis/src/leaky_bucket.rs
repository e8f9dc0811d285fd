//! Sharkey's leaky bucket in Redis: [`RedisLeakyBucket`].

use ratelane::Nanos;
use ratelane::server::{Decision, LeakyBucket};
use redis::ConnectionLike;

use crate::error::Error;
use crate::reply;
use crate::script::{Arg, LEAKY_BUCKET, now_arg};

/// A [`LeakyBucket`] whose per-key state lives in Redis, checked by
/// `scripts/leaky_bucket.lua` in one round trip. The same answers as
/// [`LeakyBucketStore`](ratelane::server::LeakyBucketStore): discrete drips, the optional
/// minimum interval (legacy limits), per-subject factors.
///
/// The value holds only the configuration: share it (it is `Copy`), and pass each call the
/// connection to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedisLeakyBucket {
    bucket: LeakyBucket,
    min_ttl_ms: u64,
}

impl RedisLeakyBucket {
    /// The bucket `bucket`, evaluated in Redis.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when the time a full bucket takes to drain, or the minimum
    /// interval, is longer than [`MAX_WINDOW`](crate::MAX_WINDOW).
    pub fn new(bucket: LeakyBucket) -> Result<RedisLeakyBucket, Error> {
        crate::require_window("the time a full bucket takes to drain", bucket.window())?;
        if let Some(min_interval) = bucket.min_interval() {
            crate::require_window("min_interval", min_interval)?;
        }
        Ok(RedisLeakyBucket { bucket, min_ttl_ms: 0 })
    }

    /// Keys live at least `ms` milliseconds (see [`crate`] docs, "Time"); 0 by default.
    /// Values above [`MAX_WINDOW`](crate::MAX_WINDOW) in milliseconds are clamped.
    #[must_use]
    pub fn with_min_ttl_ms(self, ms: u64) -> RedisLeakyBucket {
        RedisLeakyBucket { min_ttl_ms: ms.min(crate::MAX_WINDOW), ..self }
    }

    /// The bucket.
    pub fn bucket(&self) -> &LeakyBucket {
        &self.bucket
    }

    /// Checks one request for `key` at Redis's clock, and counts it if admitted.
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]).
    pub fn check(&self, con: &mut dyn ConnectionLike, key: &str) -> Result<Decision, Error> {
        run(&self.bucket, self.min_ttl_ms, con, key, None)
    }

    /// [`check`](Self::check) at `now` (nanoseconds, the caller's clock) instead of Redis's.
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]).
    pub fn check_at(
        &self,
        con: &mut dyn ConnectionLike,
        key: &str,
        now: Nanos,
    ) -> Result<Decision, Error> {
        run(&self.bucket, self.min_ttl_ms, con, key, Some(now))
    }

    /// Checks one request for `key` at Redis's clock with the bucket scaled by the subject's
    /// `factor` (see [`LeakyBucket::scaled`]; the key's state is shared across factors).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `factor` is not in `(0, 1]` (nothing is sent); Redis
    /// failures.
    pub fn check_scaled(
        &self,
        con: &mut dyn ConnectionLike,
        key: &str,
        factor: f64,
    ) -> Result<Decision, Error> {
        run(&self.bucket.scaled(factor)?, self.min_ttl_ms, con, key, None)
    }

    /// [`check_scaled`](Self::check_scaled) at `now` (nanoseconds, the caller's clock).
    ///
    /// # Errors
    ///
    /// As for [`check_scaled`](Self::check_scaled).
    pub fn check_scaled_at(
        &self,
        con: &mut dyn ConnectionLike,
        key: &str,
        factor: f64,
        now: Nanos,
    ) -> Result<Decision, Error> {
        run(&self.bucket.scaled(factor)?, self.min_ttl_ms, con, key, Some(now))
    }
}

fn run(
    bucket: &LeakyBucket,
    min_ttl_ms: u64,
    con: &mut dyn ConnectionLike,
    key: &str,
    now: Option<Nanos>,
) -> Result<Decision, Error> {
    let args = [
        Arg::Int(u64::from(bucket.size())),
        Arg::Int(bucket.drip_rate()),
        Arg::Int(u64::from(bucket.drip_size())),
        Arg::Int(bucket.min_interval().unwrap_or(0)),
        now_arg(now),
        Arg::Int(min_ttl_ms),
    ];
    reply::decision(&LEAKY_BUCKET.invoke(con, key, &args)?)
}
