//! GCRA, the generic cell rate algorithm: the fast default. One `u64` of state per key.
//!
//! A key may take one request (a "cell") every `interval`, and up to `burst` back to back.
//! The state is the key's theoretical arrival time (TAT): the moment its bucket would be empty
//! again. A request of weight `n` at `now` is admitted when
//! `max(tat, now) + n × interval − now <= burst × interval`, and then
//! `tat = max(tat, now) + n × interval`; a blocked request changes nothing.
//!
//! **Burst convention** (governor's): `burst = N` admits exactly N requests back to back on an
//! empty key, and the (N+1)-th is blocked for `interval`. (redis-cell's `max_burst = N` would
//! admit N+1.) In any span of time `L`, at most `burst + L / interval` requests are admitted.
//!
//! [`check_n`](Gcra::check_n) with `n > burst` can never succeed: it answers
//! [`InsufficientCapacity`] instead of a [`Decision`] with a wait. `n = 0` is a peek: it is
//! always allowed and changes nothing, and its decision describes the key.
//!
//! A check takes `now` up to [`last_instant`](Gcra::last_instant), `u64::MAX − burst ×
//! interval`: an admitted request moves the TAT up to one window past `now`, and the TAT must
//! stay a `u64`. A later `now` is refused with [`Error::InvalidRequest`] (see
//! [the end of the clock](super#the-end-of-the-clock)).
//!
//! ```
//! use ratelane::server::{Gcra, GcraStore};
//! use ratelane::{MILLISECOND, SECOND};
//!
//! // 10 requests per second, at most 10 back to back.
//! let mut store = GcraStore::new(Gcra::per_window(10, SECOND)?, 100_000)?;
//! for _ in 0..10 {
//!     assert!(store.check("203.0.113.7", 0)?.allowed);
//! }
//! let blocked = store.check("203.0.113.7", 0)?;
//! assert!(!blocked.allowed);
//! assert_eq!(blocked.reset_after, 100 * MILLISECOND); // one interval
//! assert_eq!(blocked.retry_after_secs(), Some(1)); // rounded up
//! assert!(store.check("203.0.113.7", 100 * MILLISECOND)?.allowed);
//!
//! // A weight above the burst can never be admitted: a distinct answer from "not yet".
//! assert!(store.check_n("batch", 0, 11)?.is_err());
//! // A `now` the TAT cannot follow is the caller's mistake, not a decision.
//! assert_eq!(store.check("203.0.113.7", u64::MAX).unwrap_err().code(), "invalid_request");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;

use super::decision::Decision;
use super::store::{Algorithm, Store};
use super::{MAX_DURATION, require, require_count, require_duration};
use crate::error::Error;
use crate::types::Nanos;

/// A GCRA limit: one request per `interval`, `burst` back to back. Build it with
/// [`Gcra::new`] or [`Gcra::per_window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    interval: Nanos,
    burst: u32,
}

/// The state of one key: its theoretical arrival time, in the caller's epoch.
/// `GcraState::default()` (TAT 0) is the empty state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GcraState {
    /// When the key's bucket is empty again; at or before `now` means empty.
    pub tat: Nanos,
}

/// The answer to a request heavier than the whole burst: it can never be admitted, whatever
/// the wait. Stable code: [`InsufficientCapacity::CODE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct InsufficientCapacity {
    /// The weight asked for.
    pub requested: u32,
    /// The largest weight that can ever be admitted (the burst).
    pub capacity: u32,
}

impl InsufficientCapacity {
    /// The stable machine-readable code, identical in every binding.
    pub const CODE: &'static str = "insufficient_capacity";
}

impl fmt::Display for InsufficientCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a request of weight {} can never be admitted: the burst is {}",
            self.requested, self.capacity
        )
    }
}

impl std::error::Error for InsufficientCapacity {}

impl Gcra {
    /// One request per `interval` (nanoseconds), up to `burst` back to back.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `interval` or `burst` is 0, or `burst × interval` is
    /// longer than about 146 years.
    pub fn new(interval: Nanos, burst: u32) -> Result<Gcra, Error> {
        require_duration("interval", interval)?;
        require_count("burst", burst)?;
        require(interval.checked_mul(u64::from(burst)).is_some_and(|w| w <= MAX_DURATION), || {
            format!("burst × interval is too long ({burst} × {interval} ns)")
        })?;
        Ok(Gcra { interval, burst })
    }

    /// `quota` requests per `window`, all of them allowed back to back (`burst = quota`).
    ///
    /// The interval is `window / quota` rounded down to the nanosecond, as governor's
    /// `Quota::per_second` does: `burst × interval` stays within `window`, so the IETF policy
    /// reads exactly `q=quota;w=window` for a whole-second window, and a cell comes back at
    /// most `quota − 1` nanoseconds per window earlier than an exact division would give.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `quota` is 0, `window` is shorter than `quota`
    /// nanoseconds, or `window` is too long.
    pub fn per_window(quota: u32, window: Nanos) -> Result<Gcra, Error> {
        require_count("quota", quota)?;
        require_duration("window", window)?;
        require(window >= u64::from(quota), || {
            format!("window ({window} ns) must be at least one nanosecond per request ({quota})")
        })?;
        Gcra::new(window / u64::from(quota), quota)
    }

    /// The time between two requests at the sustained rate.
    pub fn interval(&self) -> Nanos {
        self.interval
    }

    /// How many requests an empty key admits back to back.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// `burst × interval`: the time an exhausted key takes to be empty again.
    pub fn window(&self) -> Nanos {
        self.interval * u64::from(self.burst)
    }

    /// The latest `now` a check takes: `u64::MAX − burst × interval`. An admitted request
    /// moves the key's TAT up to one window past `now`, and the TAT is a `u64`.
    pub fn last_instant(&self) -> Nanos {
        Nanos::MAX - self.window()
    }

    /// `Ok` when `now` is at most [`last_instant`](Self::last_instant).
    pub(crate) fn require_instant(&self, now: Nanos) -> Result<(), Error> {
        let last = self.last_instant();
        if now <= last {
            return Ok(());
        }
        Err(Error::InvalidRequest(format!(
            "now ({now} ns) is later than this GCRA's last instant ({last} ns = 2^64 - 1 - burst × \
             interval): an admitted request would move the key's TAT past the end of the u64 clock"
        )))
    }

    /// Checks a request of weight `n` against `state` at `now`, and counts it if admitted.
    ///
    /// Answers the [`Decision`], or [`InsufficientCapacity`] when `n > burst`: such a request
    /// can never be admitted, whatever the wait.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when `now` is later than [`last_instant`](Self::last_instant);
    /// nothing is counted.
    pub fn check_n(
        &self,
        state: &mut GcraState,
        now: Nanos,
        n: u32,
    ) -> Result<Result<Decision, InsufficientCapacity>, Error> {
        self.require_instant(now)?;
        if n > self.burst {
            return Ok(Err(InsufficientCapacity { requested: n, capacity: self.burst }));
        }
        let (t, tau) = (self.interval, self.window());
        let cost = u64::from(n) * t; // <= tau
        // The bucket's level in time units: how far ahead of now the key's TAT is. Above tau
        // only when `now` went backwards; then any request is blocked.
        let before = state.tat.saturating_sub(now);
        let allowed = before <= tau - cost;
        let level = if allowed {
            // now + before + cost <= now + tau <= u64::MAX, by the last instant.
            state.tat = now + before + cost;
            before + cost
        } else {
            before
        };
        let room = tau.saturating_sub(level);
        let remaining = (room / t) as u32;
        Ok(Ok(Decision {
            allowed,
            limit: self.burst,
            remaining,
            reset_after: if allowed {
                // level <= tau, so level + t <= 2 × tau: no overflow.
                (level + t).saturating_sub(tau)
            } else {
                // Until before + cost - tau, written so that it cannot overflow (before > tau - cost).
                before - (tau - cost)
            },
            clear_after: level,
            // `remaining` grows once the level drops to tau - (remaining + 1) × t.
            replenish_after: (remaining < self.burst)
                .then(|| level - (tau - (u64::from(remaining) + 1) * t)),
            window: tau,
        }))
    }
}

impl Algorithm for Gcra {
    type State = GcraState;

    fn is_idle(&self, state: &GcraState, now: Nanos) -> bool {
        state.tat <= now
    }
}

/// A [`Store`] of GCRA states, keyed by `String` unless another key type is chosen.
pub type GcraStore<K = String> = Store<Gcra, K>;

impl<K: Hash + Eq> Store<Gcra, K> {
    /// Checks one request for `key` at `now`, and counts it if admitted.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when `now` is later than [`Gcra::last_instant`]; the store
    /// is not touched.
    pub fn check<Q>(&mut self, key: &Q, now: Nanos) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        Ok(self.check_n(key, now, 1)?.expect("a burst is at least 1"))
    }

    /// Checks a request of weight `n` for `key` at `now` (see [`Gcra::check_n`]): the
    /// [`Decision`], or [`InsufficientCapacity`] when `n` is larger than the burst (nothing
    /// is counted).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when `now` is later than [`Gcra::last_instant`]; the store
    /// is not touched.
    pub fn check_n<Q>(
        &mut self,
        key: &Q,
        now: Nanos,
        n: u32,
    ) -> Result<Result<Decision, InsufficientCapacity>, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        // Refused before the store is touched (no sweep, no new key).
        self.algorithm.require_instant(now)?;
        self.update(key, now, |gcra, state| gcra.check_n(state, now, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::MILLISECOND;

    const T: Nanos = 100 * MILLISECOND;

    /// A check at an instant the GCRA takes, of a weight it can admit.
    fn check(gcra: &Gcra, state: &mut GcraState, now: Nanos, n: u32) -> Decision {
        gcra.check_n(state, now, n).expect("an instant the GCRA takes").expect("a weight <= burst")
    }

    #[test]
    fn burst_n_admits_exactly_n_back_to_back() {
        let gcra = Gcra::new(T, 3).unwrap();
        let mut s = GcraState::default();
        let start = 5 * T;
        for left in [2, 1, 0] {
            let d = check(&gcra, &mut s, start, 1);
            assert!(d.allowed);
            assert_eq!(d.remaining, left);
        }
        let d = check(&gcra, &mut s, start, 1);
        assert!(!d.allowed);
        assert_eq!((d.remaining, d.reset_after, d.clear_after), (0, T, 3 * T));
        assert_eq!(d.replenish_after, Some(T));
        // One nanosecond early is still too early; on time is fine.
        assert!(!check(&gcra, &mut s, start + T - 1, 1).allowed);
        assert!(check(&gcra, &mut s, start + T, 1).allowed);
    }

    #[test]
    fn weights_above_the_burst_are_never_admitted() {
        let gcra = Gcra::new(T, 3).unwrap();
        let mut s = GcraState::default();
        assert_eq!(
            gcra.check_n(&mut s, 0, 4),
            Ok(Err(InsufficientCapacity { requested: 4, capacity: 3 }))
        );
        let d = check(&gcra, &mut s, 0, 3);
        assert!(d.allowed);
        assert_eq!(d.reset_after, T);
        let d = check(&gcra, &mut s, T, 2);
        assert!(!d.allowed);
        assert_eq!((d.remaining, d.reset_after), (1, T));
    }

    #[test]
    fn peek_changes_nothing() {
        let gcra = Gcra::new(T, 2).unwrap();
        let mut s = GcraState::default();
        check(&gcra, &mut s, 0, 1);
        let before = s;
        let d = check(&gcra, &mut s, T / 2, 0);
        assert_eq!(s, before);
        assert!(d.allowed);
        assert_eq!((d.remaining, d.clear_after, d.replenish_after), (1, T / 2, Some(T / 2)));
    }

    #[test]
    fn per_window_rounds_the_interval_down() {
        let gcra = Gcra::per_window(3, 1_000_000_000).unwrap();
        assert_eq!((gcra.interval(), gcra.window()), (333_333_333, 999_999_999));
        assert!(Gcra::per_window(0, 1).is_err());
        assert!(Gcra::per_window(3, 2).is_err());
        assert!(Gcra::new(0, 1).is_err());
        assert!(Gcra::new(u64::MAX / 2, 2).is_err());
    }

    #[test]
    fn the_last_instant_leaves_one_window_for_the_tat() {
        let gcra = Gcra::new(T, 3).unwrap();
        let last = gcra.last_instant();
        assert_eq!(last, u64::MAX - 3 * T);
        let mut s = GcraState::default();
        for _ in 0..3 {
            assert!(check(&gcra, &mut s, last, 1).allowed);
        }
        assert_eq!(s.tat, u64::MAX);
        let d = check(&gcra, &mut s, last, 1);
        assert_eq!((d.allowed, d.reset_after, d.clear_after), (false, T, 3 * T));
        let before = s;
        let e = gcra.check_n(&mut s, last + 1, 0).unwrap_err();
        assert_eq!(e.code(), "invalid_request");
        assert!(e.to_string().contains("last instant"), "{e}");
        // The instant is refused before the weight is looked at, and nothing changes.
        assert!(gcra.check_n(&mut s, u64::MAX, 4).is_err());
        assert_eq!(s, before);
    }

    #[test]
    fn a_state_far_ahead_of_now_is_blocked_without_overflow() {
        // A TAT from a much later `now` (time went backwards): blocked, with exact waits.
        let gcra = Gcra::new(T, 3).unwrap();
        let mut s = GcraState { tat: u64::MAX };
        let d = check(&gcra, &mut s, 0, 3);
        assert!(!d.allowed);
        assert_eq!((d.reset_after, d.clear_after, d.remaining), (u64::MAX, u64::MAX, 0));
        assert_eq!(d.replenish_after, Some(u64::MAX - 2 * T));
    }
}
