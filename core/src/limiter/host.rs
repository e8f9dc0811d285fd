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
    until: Nanos,
    strikes: u32,
}

impl EdgeBan {
    /// No request goes out before then.
    pub(super) fn until(&self) -> Nanos {
        self.until
    }

    /// Bans in a row without a 2xx between.
    pub(super) fn strikes(&self) -> u32 {
        self.strikes
    }

    /// A 2xx: the next ban starts its backoff over.
    pub(super) fn clear_strikes(&mut self) {
        self.strikes = 0;
    }

    /// A snapshot's ban: held until `until` at least, with `strikes` in a row at least.
    pub(super) fn restore(&mut self, until: Nanos, strikes: u32) {
        self.hold(until);
        self.strikes = self.strikes.max(strikes);
    }

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

#[cfg(test)]
mod tests {
    use super::{EdgeBan, InvalidBudget};
    use crate::limiter::bucket::Gate;
    use crate::types::{MILLISECOND, SECOND};

    #[test]
    fn edge_bans_in_a_row_double_until_a_success() {
        let mut ban = EdgeBan::default();
        let base = 100 * MILLISECOND;
        assert_eq!(ban.strike(base, 60 * SECOND), base);
        assert_eq!(ban.strike(base, 60 * SECOND), 2 * base);
        assert_eq!(ban.strike(base, SECOND / 4), SECOND / 4, "at most the max");
        ban.clear_strikes();
        assert_eq!(ban.strike(base, 60 * SECOND), base);
        ban.hold(5 * SECOND);
        ban.hold(SECOND);
        assert_eq!(ban.until(), 5 * SECOND, "a hold never shortens");
        ban.restore(SECOND, 7);
        assert_eq!((ban.until(), ban.strikes()), (5 * SECOND, 7));
    }

    #[test]
    fn the_invalid_budget_closes_at_its_stop_and_warns_once() {
        let mut budget = InvalidBudget::default();
        for end in [10, 20, 30] {
            budget.record(end);
        }
        assert_eq!(budget.used_at(15), 2, "the one ending at 10 is out of the window");
        assert_eq!(budget.gate(0, 4), Gate::Open);
        assert_eq!(budget.gate(1, 4), Gate::UntilResponse, "one in flight may be invalid too: its answer tells");
        assert_eq!(budget.gate(0, 3), Gate::Until(10), "full by themselves: until the first ends");
        assert_eq!(budget.full_until(3), Some(10));
        assert_eq!(budget.warning(3), Some(3));
        assert_eq!(budget.warning(3), None, "once");
        budget.expire(25, 4); // 1 left, below half of 4
        assert_eq!(budget.used_at(25), 1);
        assert_eq!(budget.warning(1), Some(1), "below half the threshold: it may warn again");
        budget.restore([5, 40].into_iter());
        assert_eq!(budget.ends_after(0).collect::<Vec<_>>(), [5, 30, 40]);
    }
}
