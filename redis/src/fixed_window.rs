//! Fixed windows with release estimates in Redis: [`RedisFixedWindow`].

use ratelane::Nanos;
use ratelane::server::script::{
    FixedWindowOp, check_fixed_window, clamp_min_ttl_ms, fixed_window_argv,
};
use ratelane::server::{Decision, FixedWindow, Scheduled};
use redis::ConnectionLike;

use crate::error::Error;
use crate::reply;
use crate::script::{Arg, Call, FIXED_WINDOW};

/// A [`FixedWindow`] whose per-group state lives in Redis, run by `scripts/fixed_window.lua`
/// in one round trip per call. The same answers as
/// [`FixedWindowStore`](ratelane::server::FixedWindowStore): `check` for a server, `schedule`
/// and `release` for a job queue shared by several workers.
///
/// One difference in expiry: a group whose jobs were delayed but never released is forgotten
/// one window after its last booked window is over (the in-memory store keeps counting them
/// until [`release`](Self::release) is called). A job must start within its window, so only a
/// driver that lost its jobs is affected.
///
/// The value holds only the configuration: share it (it is `Copy`), and pass each call the
/// connection to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedisFixedWindow {
    window: FixedWindow,
    min_ttl_ms: u64,
}

impl RedisFixedWindow {
    /// The windows `window`, evaluated in Redis.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when the window is longer than
    /// [`MAX_WINDOW`](crate::MAX_WINDOW).
    pub fn new(window: FixedWindow) -> Result<RedisFixedWindow, Error> {
        crate::require_window(check_fixed_window(&window))?;
        Ok(RedisFixedWindow { window, min_ttl_ms: 0 })
    }

    /// Keys live at least `ms` milliseconds (see [`crate`] docs, "Time"); 0 by default.
    /// Values above [`MAX_WINDOW`](crate::MAX_WINDOW) in milliseconds are clamped.
    #[must_use]
    pub fn with_min_ttl_ms(self, ms: u64) -> RedisFixedWindow {
        RedisFixedWindow { min_ttl_ms: clamp_min_ttl_ms(ms), ..self }
    }

    /// The windows.
    pub fn window(&self) -> &FixedWindow {
        &self.window
    }

    /// Checks one request for `key` at Redis's clock: admitted (and counted) if the current
    /// window has a free slot (see [`FixedWindow::check`]).
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]).
    pub fn check(&self, con: &mut dyn ConnectionLike, key: &str) -> Result<Decision, Error> {
        self.call(key, FixedWindowOp::Check, None, reply::decision).run(con)
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
        self.call(key, FixedWindowOp::Check, Some(now), reply::decision).run(con)
    }

    /// Books a slot for one job of group `key` at Redis's clock (see
    /// [`FixedWindow::schedule`]). Returns the booking, whose `release_at` is in Redis's clock
    /// (Unix epoch, nanoseconds), and Redis's clock when the script ran: `release_at - now` is
    /// the delay, without trusting the local clock.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfRange`] when the job's window would end more than
    /// [`MAX_WINDOW`](crate::MAX_WINDOW) from now (nothing is booked); Redis failures.
    pub fn schedule(
        &self,
        con: &mut dyn ConnectionLike,
        key: &str,
    ) -> Result<(Scheduled, Nanos), Error> {
        self.call(key, FixedWindowOp::Schedule, None, reply::scheduled).run(con)
    }

    /// [`schedule`](Self::schedule) at `now` (nanoseconds, the caller's clock); `release_at`
    /// is in the same clock.
    ///
    /// # Errors
    ///
    /// As for [`schedule`](Self::schedule).
    pub fn schedule_at(
        &self,
        con: &mut dyn ConnectionLike,
        key: &str,
        now: Nanos,
    ) -> Result<Scheduled, Error> {
        self.call(key, FixedWindowOp::Schedule, Some(now), scheduled_at).run(con)
    }

    /// Records that one delayed job of group `key` was released (or dropped). Returns false
    /// when the group has no delayed job (see [`FixedWindow::release`]).
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]).
    pub fn release(&self, con: &mut dyn ConnectionLike, key: &str) -> Result<bool, Error> {
        self.call(key, FixedWindowOp::Release, None, reply::released).run(con)
    }

    /// [`release`](Self::release) at `now` (nanoseconds, the caller's clock).
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]).
    pub fn release_at(
        &self,
        con: &mut dyn ConnectionLike,
        key: &str,
        now: Nanos,
    ) -> Result<bool, Error> {
        self.call(key, FixedWindowOp::Release, Some(now), reply::released).run(con)
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
        self.call(key, FixedWindowOp::Check, None, reply::decision).run_async(con).await
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
        self.call(key, FixedWindowOp::Check, Some(now), reply::decision).run_async(con).await
    }

    /// [`schedule`](Self::schedule) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`schedule`](Self::schedule).
    #[cfg(feature = "aio")]
    pub async fn schedule_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
    ) -> Result<(Scheduled, Nanos), Error> {
        self.call(key, FixedWindowOp::Schedule, None, reply::scheduled).run_async(con).await
    }

    /// [`schedule_at`](Self::schedule_at) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`schedule`](Self::schedule).
    #[cfg(feature = "aio")]
    pub async fn schedule_at_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
        now: Nanos,
    ) -> Result<Scheduled, Error> {
        self.call(key, FixedWindowOp::Schedule, Some(now), scheduled_at).run_async(con).await
    }

    /// [`release`](Self::release) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`release`](Self::release).
    #[cfg(feature = "aio")]
    pub async fn release_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
    ) -> Result<bool, Error> {
        self.call(key, FixedWindowOp::Release, None, reply::released).run_async(con).await
    }

    /// [`release_at`](Self::release_at) on an async connection (feature `aio`).
    ///
    /// # Errors
    ///
    /// As for [`release`](Self::release).
    #[cfg(feature = "aio")]
    pub async fn release_at_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
        now: Nanos,
    ) -> Result<bool, Error> {
        self.call(key, FixedWindowOp::Release, Some(now), reply::released).run_async(con).await
    }

    fn call<'a, T>(
        &self,
        key: &'a str,
        op: FixedWindowOp,
        now: Option<Nanos>,
        read: fn(&redis::Value) -> Result<T, Error>,
    ) -> Call<'a, T> {
        let args = fixed_window_argv(&self.window, op, now, self.min_ttl_ms)
            .into_iter()
            .map(Arg::from)
            .collect();
        Call::new(&FIXED_WINDOW, key, args, read)
    }
}

/// A `schedule` reply read in the caller's clock: only the `Scheduled`.
fn scheduled_at(value: &redis::Value) -> Result<Scheduled, Error> {
    Ok(reply::scheduled(value)?.0)
}
