//! GCRA in Redis: [`RedisGcra`].

use ratelane::Nanos;
use ratelane::server::script::{check_gcra, clamp_min_ttl_ms, gcra_argv};
use ratelane::server::{Decision, Gcra};
use redis::ConnectionLike;

use crate::error::Error;
use crate::reply;
use crate::script::{Arg, Call, GCRA};

/// A [`Gcra`] limit whose per-key state lives in Redis, checked by `scripts/gcra.lua` in one
/// round trip. The same answers as [`GcraStore`](ratelane::server::GcraStore) (burst
/// convention, weights, peeks, [`InsufficientCapacity`](ratelane::server::InsufficientCapacity)),
/// for any number of processes.
///
/// The value holds only the configuration: share it (it is `Copy`), and pass each call the
/// connection to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedisGcra {
    gcra: Gcra,
    min_ttl_ms: u64,
}

impl RedisGcra {
    /// The limit `gcra`, evaluated in Redis.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `burst × interval` is longer than
    /// [`MAX_WINDOW`](crate::MAX_WINDOW).
    pub fn new(gcra: Gcra) -> Result<RedisGcra, Error> {
        crate::require_window(check_gcra(&gcra))?;
        Ok(RedisGcra { gcra, min_ttl_ms: 0 })
    }

    /// Keys live at least `ms` milliseconds (see [`crate`] docs, "Time"); 0 by default.
    /// Values above [`MAX_WINDOW`](crate::MAX_WINDOW) in milliseconds are clamped.
    #[must_use]
    pub fn with_min_ttl_ms(self, ms: u64) -> RedisGcra {
        RedisGcra { min_ttl_ms: clamp_min_ttl_ms(ms), ..self }
    }

    /// The limit.
    pub fn gcra(&self) -> &Gcra {
        &self.gcra
    }

    /// Checks one request for `key` at Redis's clock, and counts it if admitted.
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]).
    pub fn check(&self, con: &mut dyn ConnectionLike, key: &str) -> Result<Decision, Error> {
        self.call(key, 1, None)?.run(con)
    }

    /// [`check`](Self::check) at `now` (nanoseconds, the caller's clock) instead of Redis's.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when `now` is later than
    /// [`Gcra::last_instant`](ratelane::server::Gcra::last_instant), as the in-memory store
    /// refuses it (decided without a round trip); Redis failures (see [`Error`]).
    pub fn check_at(
        &self,
        con: &mut dyn ConnectionLike,
        key: &str,
        now: Nanos,
    ) -> Result<Decision, Error> {
        self.call(key, 1, Some(now))?.run(con)
    }

    /// Checks a request of weight `n` for `key` at Redis's clock (see
    /// [`Gcra::check_n`]; `n = 0` is a peek).
    ///
    /// # Errors
    ///
    /// [`Error::InsufficientCapacity`] when `n` is larger than the burst (decided without a
    /// round trip); Redis failures.
    pub fn check_n(
        &self,
        con: &mut dyn ConnectionLike,
        key: &str,
        n: u32,
    ) -> Result<Decision, Error> {
        self.call(key, n, None)?.run(con)
    }

    /// [`check_n`](Self::check_n) at `now` (nanoseconds, the caller's clock).
    ///
    /// # Errors
    ///
    /// As for [`check_n`](Self::check_n), and [`Error::InvalidRequest`] as for
    /// [`check_at`](Self::check_at).
    pub fn check_n_at(
        &self,
        con: &mut dyn ConnectionLike,
        key: &str,
        n: u32,
        now: Nanos,
    ) -> Result<Decision, Error> {
        self.call(key, n, Some(now))?.run(con)
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
        self.call(key, 1, None)?.run_async(con).await
    }

    /// [`check_at`](Self::check_at) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`check_at`](Self::check_at).
    #[cfg(feature = "aio")]
    pub async fn check_at_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
        now: Nanos,
    ) -> Result<Decision, Error> {
        self.call(key, 1, Some(now))?.run_async(con).await
    }

    /// [`check_n`](Self::check_n) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`check_n`](Self::check_n).
    #[cfg(feature = "aio")]
    pub async fn check_n_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
        n: u32,
    ) -> Result<Decision, Error> {
        self.call(key, n, None)?.run_async(con).await
    }

    /// [`check_n_at`](Self::check_n_at) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`check_n_at`](Self::check_n_at).
    #[cfg(feature = "aio")]
    pub async fn check_n_at_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
        n: u32,
        now: Nanos,
    ) -> Result<Decision, Error> {
        self.call(key, n, Some(now))?.run_async(con).await
    }

    fn call<'a>(
        &self,
        key: &'a str,
        n: u32,
        now: Option<Nanos>,
    ) -> Result<Call<'a, Decision>, Error> {
        let args = gcra_argv(&self.gcra, n, now, self.min_ttl_ms)?
            .map_err(Error::InsufficientCapacity)?
            .into_iter()
            .map(Arg::from)
            .collect();
        Ok(Call::new(&GCRA, key, args, reply::decision))
    }
}
