//! Fixed windows with release estimates in Redis: [`RedisFixedWindow`].

use ratelane::Nanos;
use ratelane::server::{Decision, FixedWindow, Scheduled};
use redis::ConnectionLike;

use crate::error::Error;
use crate::reply;
use crate::script::{Arg, FIXED_WINDOW, now_arg};

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
        crate::require_window("window", window.window())?;
        Ok(RedisFixedWindow { window, min_ttl_ms: 0 })
    }

    /// Keys live at least `ms` milliseconds (see [`crate`] docs, "Time"); 0 by default.
    /// Values above [`MAX_WINDOW`](crate::MAX_WINDOW) in milliseconds are clamped.
    #[must_use]
    pub fn with_min_ttl_ms(self, ms: u64) -> RedisFixedWindow {
        RedisFixedWindow { min_ttl_ms: ms.min(crate::MAX_WINDOW), ..self }
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
        reply::decision(&self.run(con, key, "check", None)?)
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
        reply::decision(&self.run(con, key, "check", Some(now))?)
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
        reply::scheduled(&self.run(con, key, "schedule", None)?)
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
        Ok(reply::scheduled(&self.run(con, key, "schedule", Some(now))?)?.0)
    }

    /// Records that one delayed job of group `key` was released (or dropped). Returns false
    /// when the group has no delayed job (see [`FixedWindow::release`]).
    ///
    /// # Errors
    ///
    /// Redis failures (see [`Error`]).
    pub fn release(&self, con: &mut dyn ConnectionLike, key: &str) -> Result<bool, Error> {
        reply::released(&self.run(con, key, "release", None)?)
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
        reply::released(&self.run(con, key, "release", Some(now))?)
    }

    fn run(
        &self,
        con: &mut dyn ConnectionLike,
        key: &str,
        op: &str,
        now: Option<Nanos>,
    ) -> Result<redis::Value, Error> {
        let args = [
            Arg::Str(op),
            Arg::Int(u64::from(self.window.quota())),
            Arg::Int(self.window.window()),
            now_arg(now),
            Arg::Int(self.min_ttl_ms),
        ];
        FIXED_WINDOW.invoke(con, key, &args)
    }
}
