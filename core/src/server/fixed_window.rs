//! Fixed windows with a reservoir per group, and a release time for what cannot run now.
//!
//! Each group (a key) has a reservoir of `quota` slots per `window`. A window opens with the
//! first job of an idle group (as a Discord bucket's window opens with its first request) and
//! the following windows follow it back to back for as long as slots are booked in them; once
//! every booked window is over the group is idle and the next job opens a new window.
//!
//! Two ways in:
//!
//! - [`check`](FixedWindow::check), for a server: admitted if the current window has a free
//!   slot, blocked otherwise (nothing is booked), with a [`Decision`] and its headers.
//! - [`schedule`](FixedWindow::schedule), for a job queue: every job gets a slot. It runs now
//!   if the slot is in the current window; otherwise it is *delayed*, and [`Scheduled`] gives
//!   the time to release it:
//!
//!   ```text
//!   release_at = start of the next window + ⌊waiting / quota⌋ × window
//!   ```
//!
//!   where `waiting` counts the jobs already delayed into the windows after the current one.
//!   The driver releases the job at that time and calls [`release`](FixedWindow::release),
//!   which decrements the group's count of delayed jobs.
//!
//! Slots are booked in order and never handed out twice: a delayed job whose window has come
//! but which the driver has not released yet still holds its slot, so a job arriving at that
//! moment queues behind it instead of taking its place (a plain counter reset at each window
//! would let both run). A job must start within its window, `[release_at, release_at + window)`;
//! a driver that misses it should schedule the job again.
//!
//! Every time is exact up to the end of the `u64` clock: a check or a release answers at any
//! `now`, and a schedule is refused with [`Error::InvalidRequest`] (nothing is booked) when its
//! job would be released after `u64::MAX` (see [the end of the clock](super#the-end-of-the-clock)).
//!
//! A delayed job that is dropped (call [`release`](FixedWindow::release) for it all the same)
//! keeps its slot: later estimates never move earlier, and the limiter's windows stay what
//! they were. A remote server that opens its window with the first request it *receives*
//! (Discord) cannot see an unused slot, though: if the dropped job held the first slot of a
//! window, that server may open its window later than the limiter and count the next
//! window's jobs into it. Rather than dropping a job, start another job of the group in its
//! slot.
//!
//! ```
//! use ratelane::server::{FixedWindow, FixedWindowStore};
//! use ratelane::SECOND;
//!
//! // 10 role updates per 10 s per guild.
//! let mut queue = FixedWindowStore::new(FixedWindow::new(10, 10 * SECOND)?, 100_000)?;
//! let now = 3 * SECOND;
//! for _ in 0..10 {
//!     assert!(queue.schedule("guild:42", now)?.run_now);
//! }
//! // The next 25 jobs fill the next two windows and half of the third.
//! let releases = (0..25)
//!     .map(|_| queue.schedule("guild:42", now).map(|s| s.release_at))
//!     .collect::<Result<Vec<_>, _>>()?;
//! assert_eq!(releases[0], now + 10 * SECOND);
//! assert_eq!(releases[10], now + 20 * SECOND);
//! assert_eq!(releases[24], now + 30 * SECOND);
//!
//! // At its release time the driver starts a job and releases it.
//! assert!(queue.release("guild:42", now + 10 * SECOND));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Borrow;
use std::hash::Hash;

use super::decision::Decision;
use super::store::{Algorithm, Store};
use super::{require_count, require_duration, saturate};
use crate::error::Error;
use crate::types::Nanos;

/// `quota` jobs or requests per fixed `window`. Build it with [`FixedWindow::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    quota: u32,
    window: Nanos,
}

/// The state of one group. `FixedWindowState::default()` is the empty state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FixedWindowState {
    /// When the current window opened; meaningless when `booked` is 0.
    pub window_start: Nanos,
    /// Slots booked from `window_start` on: those used in the current window, then those of
    /// the delayed jobs, `quota` per window.
    pub booked: u64,
    /// Delayed jobs not released yet.
    pub waiting: u64,
}

/// When a scheduled job may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Scheduled {
    /// True when the job runs now (its slot is in the current window); it needs no release.
    pub run_now: bool,
    /// When to start the job, in the caller's epoch: `now` when it runs now, otherwise the
    /// start of the window that holds its slot. Release it then.
    pub release_at: Nanos,
    /// The group's delayed jobs not released yet, this one included if it is delayed.
    pub waiting: u64,
}

impl FixedWindow {
    /// `quota` slots per `window` (nanoseconds).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when a value is 0 or `window` is too long.
    pub fn new(quota: u32, window: Nanos) -> Result<FixedWindow, Error> {
        require_count("quota", quota)?;
        require_duration("window", window)?;
        Ok(FixedWindow { quota, window })
    }

    /// Slots per window.
    pub fn quota(&self) -> u32 {
        self.quota
    }

    /// The window's length.
    pub fn window(&self) -> Nanos {
        self.window
    }

    /// The start of the `k`-th window after the current one, exact (it may lie past the end
    /// of the `u64` clock).
    fn window_at(&self, state: &FixedWindowState, k: u64) -> u128 {
        u128::from(state.window_start) + u128::from(k) * u128::from(self.window)
    }

    /// The time from `now` until the start of the `k`-th window after the current one (zero
    /// if it has started), saturated upward.
    fn until(&self, state: &FixedWindowState, now: Nanos, k: u64) -> Nanos {
        saturate(self.window_at(state, k).saturating_sub(u128::from(now)))
    }

    /// Moves the current window forward to the one holding `now`, giving back the slots of
    /// the windows that are over.
    fn roll(&self, state: &mut FixedWindowState, now: Nanos) {
        if state.booked == 0 || u128::from(now) < self.window_at(state, 1) {
            return;
        }
        let elapsed = (now - state.window_start) / self.window;
        let consumed = elapsed.saturating_mul(u64::from(self.quota));
        if state.booked <= consumed {
            state.booked = 0; // every booked window is over: idle
        } else {
            state.window_start += elapsed * self.window;
            state.booked -= consumed;
        }
    }

    /// Books the next slot (opening a window at `now` if none is open) and returns its
    /// index from the current window's start.
    fn book(&self, state: &mut FixedWindowState, now: Nanos) -> u64 {
        if state.booked == 0 {
            state.window_start = now;
        }
        state.booked += 1;
        state.booked - 1
    }

    /// Checks one request at `now`: admitted (and counted) if the current window has a free
    /// slot; otherwise blocked until the first window with a free slot.
    pub fn check(&self, state: &mut FixedWindowState, now: Nanos) -> Decision {
        self.roll(state, now);
        let quota = u64::from(self.quota);
        let allowed = state.booked < quota;
        if allowed {
            self.book(state, now);
        }
        let full_windows = state.booked / quota;
        let until = |k: u64| self.until(state, now, k);
        Decision {
            allowed,
            limit: self.quota,
            remaining: quota.saturating_sub(state.booked) as u32,
            reset_after: if full_windows == 0 { 0 } else { until(full_windows) },
            clear_after: if state.booked == 0 { 0 } else { until(state.booked.div_ceil(quota)) },
            replenish_after: (state.booked > 0).then(|| until(full_windows.max(1))),
            window: self.window,
        }
    }

    /// Books a slot for one job at `now`: it runs now, or is delayed until the window that
    /// holds its slot (see the [module docs](self)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when the job would be released after `u64::MAX`, the end of
    /// the clock; nothing is booked.
    pub fn schedule(&self, state: &mut FixedWindowState, now: Nanos) -> Result<Scheduled, Error> {
        let mut next = *state;
        self.roll(&mut next, now);
        let slot = self.book(&mut next, now);
        let window = slot / u64::from(self.quota);
        if window == 0 {
            *state = next;
            return Ok(Scheduled { run_now: true, release_at: now, waiting: state.waiting });
        }
        let release_at = Nanos::try_from(self.window_at(&next, window)).map_err(|_| {
            Error::InvalidRequest(format!(
                "the job would be released {} windows of {} ns after {}, past the end of the \
                 u64 clock",
                window, self.window, next.window_start
            ))
        })?;
        *state = next;
        state.waiting += 1;
        Ok(Scheduled { run_now: false, release_at, waiting: state.waiting })
    }

    /// Records that one delayed job was released (or dropped). Returns false, and changes
    /// nothing, when the group has no delayed job.
    pub fn release(&self, state: &mut FixedWindowState) -> bool {
        let had = state.waiting > 0;
        state.waiting = state.waiting.saturating_sub(1);
        had
    }
}

impl Algorithm for FixedWindow {
    type State = FixedWindowState;

    fn is_idle(&self, state: &FixedWindowState, now: Nanos) -> bool {
        state.waiting == 0
            && (state.booked == 0
                || u128::from(now)
                    >= self.window_at(state, state.booked.div_ceil(u64::from(self.quota))))
    }
}

/// A [`Store`] of fixed-window states, keyed by `String` unless another key type is chosen.
pub type FixedWindowStore<K = String> = Store<FixedWindow, K>;

impl<K: Hash + Eq> Store<FixedWindow, K> {
    /// Checks one request for `key` at `now` (see [`FixedWindow::check`]).
    pub fn check<Q>(&mut self, key: &Q, now: Nanos) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.update(key, now, |window, state| window.check(state, now))
    }

    /// Books a slot for one job of group `key` at `now` (see [`FixedWindow::schedule`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when the job would be released after `u64::MAX`; nothing is
    /// booked.
    pub fn schedule<Q>(&mut self, key: &Q, now: Nanos) -> Result<Scheduled, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.update(key, now, |window, state| window.schedule(state, now))
    }

    /// Records that one delayed job of group `key` was released at `now` (or dropped).
    /// Returns false when the group has no delayed job.
    pub fn release<Q>(&mut self, key: &Q, now: Nanos) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.update(key, now, |window, state| window.release(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::SECOND;

    #[test]
    fn windows_open_with_the_first_job_and_follow_while_booked() {
        let fw = FixedWindow::new(2, 10 * SECOND).unwrap();
        let mut s = FixedWindowState::default();
        let t0 = 7 * SECOND;
        assert!(fw.check(&mut s, t0).allowed);
        let d = fw.check(&mut s, t0 + SECOND);
        assert!(d.allowed);
        assert_eq!(
            (d.remaining, d.reset_after, d.replenish_after),
            (0, 9 * SECOND, Some(9 * SECOND))
        );
        let d = fw.check(&mut s, t0 + 2 * SECOND);
        assert!(!d.allowed);
        assert_eq!(d.reset_after, 8 * SECOND);
        // The window is over: the next request opens a new one at its own time.
        let d = fw.check(&mut s, t0 + 25 * SECOND);
        assert!(d.allowed);
        assert_eq!(s.window_start, t0 + 25 * SECOND);
    }

    #[test]
    fn delayed_jobs_hold_their_slots_until_released() {
        let fw = FixedWindow::new(1, SECOND).unwrap();
        let mut s = FixedWindowState::default();
        assert!(fw.schedule(&mut s, 0).unwrap().run_now);
        let b = fw.schedule(&mut s, SECOND / 2).unwrap();
        assert_eq!((b.run_now, b.release_at, b.waiting), (false, SECOND, 1));
        // At B's release time, before the driver released it, a newcomer queues behind it.
        let c = fw.schedule(&mut s, SECOND).unwrap();
        assert_eq!((c.run_now, c.release_at, c.waiting), (false, 2 * SECOND, 2));
        assert!(fw.release(&mut s));
        assert!(fw.release(&mut s));
        assert!(!fw.release(&mut s));
        assert!(!fw.is_idle(&s, 2 * SECOND + 1));
        assert!(fw.is_idle(&s, 3 * SECOND));
    }

    #[test]
    fn the_end_of_the_clock_is_exact() {
        let fw = FixedWindow::new(2, SECOND).unwrap();
        let end = u64::MAX;
        // Checks at the last instant: the window runs past the clock, and still holds 2.
        let mut s = FixedWindowState::default();
        assert!(fw.check(&mut s, end).allowed);
        let d = fw.check(&mut s, end);
        assert_eq!((d.allowed, d.remaining, d.reset_after, d.clear_after), (true, 0, SECOND, SECOND));
        assert!(!fw.check(&mut s, end).allowed);
        assert!(!fw.is_idle(&s, end));

        // Schedules 2 s before the end: windows at end - 2 s, end - 1 s and end hold two jobs
        // each; the next job's window would open past the clock, so it is refused and nothing
        // is booked.
        let mut s = FixedWindowState::default();
        let now = end - 2 * SECOND;
        let releases: Vec<_> = (0..6).map(|_| fw.schedule(&mut s, now).unwrap()).collect();
        let at: Vec<_> = releases.iter().map(|r| r.release_at).collect();
        assert_eq!(at, [now, now, end - SECOND, end - SECOND, end, end]);
        let before = s;
        let e = fw.schedule(&mut s, now).unwrap_err();
        assert_eq!(e.code(), "invalid_request");
        assert_eq!(s, before);
        // A check still answers, exactly: the first free slot is in the window after `end`.
        let d = fw.check(&mut s, now);
        assert_eq!((d.allowed, d.reset_after, d.clear_after), (false, 3 * SECOND, 3 * SECOND));
    }
}
