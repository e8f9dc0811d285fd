//! What holds the whole host, every identity alike: the invalid-request budget (Cloudflare
//! bans a host after too many 401, 403 and 429 answers in a window) and an edge ban's hold
//! with its backoff.

use crate::types::Nanos;

use super::backoff;
use super::bucket::Gate;
use super::timelog::TimeLog;

/// The invalid responses (401 / 403 / non-shared 429, as the limiter counts them) still
/// within `invalid_request_window`, and whether the warning about them is out.
#[derive(Debug, Default)]
pub(super) struct InvalidBudget {
    /// When each one leaves the window: its arrival plus the window, in arrival order. (Kept
    /// as ends, not arrivals, so a restored response older than the monotonic clock's epoch is
    /// exact: see [`Limiter::restore`].)
    ends: TimeLog,
    /// The warning was emitted, and the count has not fallen below half its threshold since.
    warned: bool,
}

impl InvalidBudget {
    /// How many are in the window now (a read: expired ones are counted out, not dropped).
    pub(super) fn used_at(&self, now: Nanos) -> usize {
        self.ends.within(now, 0)
    }

    /// Counts one that leaves the window at `end`.
    pub(super) fn record(&mut self, end: Nanos) {
        self.ends.insert(end);
    }

    /// Drops those that left the window by `now`; below half of `warn_at`, a later warning may
    /// be emitted again.
    pub(super) fn expire(&mut self, now: Nanos, warn_at: u32) {
        self.ends.prune(now, 0);
        if (self.ends.len() as u32) < warn_at / 2 {
            self.warned = false;
        }
    }

    /// The count to warn about, once it reaches `warn_at` (once until it falls below half).
    pub(super) fn warning(&mut self, warn_at: u32) -> Option<u32> {
        let count = self.ends.len() as u32;
        if count < warn_at || self.warned {
            return None;
        }
        self.warned = true;
        Some(count)
    }

    /// When the budget opens again if the invalid responses alone fill it (`stop_at` of them):
    /// the first one's end.
    pub(super) fn full_until(&self, stop_at: u32) -> Option<Nanos> {
        self.ends.first().filter(|_| self.ends.len() >= stop_at as usize)
    }

    /// The budget's gate: closed while the invalid responses and the `pending` requests that
    /// may yet be invalid (in flight or reserving) reach `stop_at`.
    pub(super) fn gate(&self, pending: usize, stop_at: u32) -> Gate {
        if self.ends.len() + pending < stop_at as usize {
            return Gate::Open;
        }
        self.full_until(stop_at).map_or(Gate::UntilResponse, Gate::Until)
    }

    /// The ends still after `now`, oldest first.
    pub(super) fn ends_after(&self, now: Nanos) -> impl Iterator<Item = Nanos> + '_ {
        self.ends.iter().filter(move |&end| end > now)
    }

    /// Adds restored ends to those counted, keeping them in order.
    pub(super) fn restore(&mut self, restored: impl Iterator<Item = Nanos>) {
        self.ends = self.ends.iter().chain(restored).collect();
    }
}

/// An edge ban (a 429 from the edge, with no rate-limit headers): no request goes out before
/// `until`; each ban in a row without a 2xx between waits twice as long.
#[derive(Debug, Default)]
pub(super) struct EdgeBan {
    pub(super) until: Nanos,
    pub(super) strikes: u32,
}

impl EdgeBan {
    /// One more ban in a row: the backoff it waits when the answer gives no wait, doubling at
    /// most 20 times (strikes beyond the 21st wait as long).
    pub(super) fn strike(&mut self, base: Nanos, max: Nanos) -> Nanos {
        self.strikes = self.strikes.saturating_add(1);
        backoff(base, self.strikes.min(21), max)
    }

    /// Holds the host until `until`, or longer if it already is.
    pub(super) fn hold(&mut self, until: Nanos) {
        self.until = self.until.max(until);
    }
}
