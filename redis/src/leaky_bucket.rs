//! Sharkey's leaky bucket in Redis: [`RedisLeakyBucket`].

use ratelane::Nanos;
use ratelane::server::script::{check_leaky_bucket, clamp_min_ttl_ms, leaky_bucket_argv};
use ratelane::server::{Decision, LeakyBucket};
use redis::ConnectionLike;

use crate::error::Error;
use crate::reply;
use crate::script::{Arg, Call, LEAKY_BUCKET};

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
        crate::require_window(check_leaky_bucket(&bucket))?;
        Ok(RedisLeakyBucket { bucket, min_ttl_ms: 0 })
    }

    /// Keys live at least `ms` milliseconds (see [`crate`] docs, "Time"); 0 by default.
    /// Values above [`MAX_WINDOW`](crate::MAX_WINDOW) in milliseconds are clamped.
    #[must_use]
    pub fn with_min_ttl_ms(self, ms: u64) -> RedisLeakyBucket {
        RedisLeakyBucket { min_ttl_ms: clamp_min_ttl_ms(ms), ..self }
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
        call(&self.bucket, self.min_ttl_ms, key, None).run(con)
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
        call(&self.bucket, self.min_ttl_ms, key, Some(now)).run(con)
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
        call(&self.bucket.scaled(factor)?, self.min_ttl_ms, key, None).run(con)
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
        call(&self.bucket.scaled(factor)?, self.min_ttl_ms, key, Some(now)).run(con)
    }

    /// [`check`](Self::check) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check).
    #[cfg(feature = "aio")]
    pub async fn check_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
    ) -> Result<Decision, Error> {
        call(&self.bucket, self.min_ttl_ms, key, None).run_async(con).await
    }

    /// [`check_at`](Self::check_at) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`check`](Self::check).
    #[cfg(feature = "aio")]
    pub async fn check_at_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
        now: Nanos,
    ) -> Result<Decision, Error> {
        call(&self.bucket, self.min_ttl_ms, key, Some(now)).run_async(con).await
    }

    /// [`check_scaled`](Self::check_scaled) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`check_scaled`](Self::check_scaled).
    #[cfg(feature = "aio")]
    pub async fn check_scaled_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
        factor: f64,
    ) -> Result<Decision, Error> {
        call(&self.bucket.scaled(factor)?, self.min_ttl_ms, key, None).run_async(con).await
    }

    /// [`check_scaled_at`](Self::check_scaled_at) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`check_scaled`](Self::check_scaled).
    #[cfg(feature = "aio")]
    pub async fn check_scaled_at_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
        factor: f64,
        now: Nanos,
    ) -> Result<Decision, Error> {
        call(&self.bucket.scaled(factor)?, self.min_ttl_ms, key, Some(now)).run_async(con).await
    }
}

fn call<'a>(
    bucket: &LeakyBucket,
    min_ttl_ms: u64,
    key: &'a str,
    now: Option<Nanos>,
) -> Call<'a, Decision> {
    let args = leaky_bucket_argv(bucket, now, min_ttl_ms).into_iter().map(Arg::from).collect();
    Call::new(&LEAKY_BUCKET, key, args, reply::decision)
}
