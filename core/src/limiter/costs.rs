//! Costs in several dimensions: a request's estimated tokens (points, ...) beside the one
//! request every request costs. See the [`crate::Limiter`] docs, "Costs".
//!
//! Each queue keeps one [`Budget`] per dimension its requests name. A budget is a window the
//! answers report: the lowest `remaining` reported since the window began locally, and when
//! the dimension is whole again (`reset`). What may still be sent is that report less what is
//! in flight (each request's charge), the same rule the request count follows: the lowest
//! report is the server's latest state, and what it did not count yet is still in flight.
//! Before a report of the window, the limit less what was sent since the local reset (its
//! settled cost once the answer says it) and what was still in flight at the reset.
//!
//! A request is charged its estimate times the worst ratio of actual to estimated cost seen
//! so far in that dimension ([`Ratio`]), so estimates that err low by a steady factor do not
//! overrun the budget; its answer gives the charge back and, from the body's `usage`, teaches
//! the ratio and settles what the window spent.

use crate::types::Nanos;

/// One dimension's budget in one queue.
#[derive(Debug, Clone)]
pub(super) struct Budget {
    pub(super) name: Box<str>,
    /// The dimension's capacity, as the latest answer reported it.
    pub(super) limit: Option<u64>,
    /// The lowest `remaining` reported by an answer sent since the local reset.
    reported: Option<u64>,
    /// When the dimension is whole again: the latest end an answer of this window reported.
    reset_at: Option<Nanos>,
    /// Counts local resets: answers to requests sent before the last one say nothing of the
    /// current window.
    epoch: u64,
    /// Charged since the local reset (settled to the actual cost once an answer says it).
    spent: u64,
    /// In flight at the local reset: they may land in the new window.
    carried: u64,
    /// Charges of the requests in flight.
    in_flight: u64,
    /// The longest time to the reset an answer reported: the window's length, as far as known.
    longest_reset: Nanos,
}

/// What one send charged one budget.
#[derive(Debug, Clone)]
pub(super) struct Charge {
    pub(super) name: Box<str>,
    /// The caller's estimate.
    pub(super) estimate: u64,
    /// What was charged: the estimate times the dimension's [`Ratio::margin`], at most the limit.
    pub(super) charged: u64,
    /// The budget's epoch at the send.
    epoch: u64,
}

/// Why a request cannot go now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Blocked {
    /// Until this time (a dimension's reset).
    Until(Nanos),
    /// Until an answer tells more (charges in flight, no reset known).
    UntilResponse,
    /// Never: its estimate is above the dimension's whole limit.
    Never { dimension: String, cost: u64, limit: u64 },
}

impl Budget {
    pub(super) fn new(name: &str) -> Self {
        Budget {
            name: name.into(),
            limit: None,
            reported: None,
            reset_at: None,
            epoch: 0,
            spent: 0,
            carried: 0,
            in_flight: 0,
            longest_reset: 0,
        }
    }

    /// Begins a new local window once the reported reset has passed.
    pub(super) fn roll(&mut self, now: Nanos) {
        if self.reset_at.is_some_and(|t| t <= now) {
            self.reset_at = None;
            self.reported = None;
            self.epoch += 1;
            self.spent = 0;
            self.carried = self.in_flight;
        }
    }

    /// What may still be charged; `None`: nothing known (no limit, no report).
    fn room(&self) -> Option<u64> {
        let by_count = self.limit.map(|l| l.saturating_sub(self.carried).saturating_sub(self.spent));
        match (self.reported, by_count) {
            (Some(r), Some(c)) => Some(r.saturating_sub(self.in_flight).min(c)),
            (Some(r), None) => Some(r.saturating_sub(self.in_flight)),
            (None, c) => c,
        }
    }

    /// Whether `charge` may go now, or until when it waits.
    fn admits(&self, charge: u64) -> Result<(), Blocked> {
        match self.room() {
            Some(room) if room < charge => match self.reset_at {
                Some(t) => Err(Blocked::Until(t)),
                None if self.in_flight > 0 => Err(Blocked::UntilResponse),
                // Nothing out there to tell: the request goes and its answer tells.
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// Charges a send of `estimate` at `margin`.
    pub(super) fn charge(&mut self, estimate: u64, margin: f64) -> Charge {
        let charged = self.charge_for(estimate, margin);
        self.spent = self.spent.saturating_add(charged);
        self.in_flight = self.in_flight.saturating_add(charged);
        Charge { name: self.name.clone(), estimate, charged, epoch: self.epoch }
    }

    fn charge_for(&self, estimate: u64, margin: f64) -> u64 {
        let charged = (estimate as f64 * margin).ceil();
        let charged = if charged >= u64::MAX as f64 { u64::MAX } else { (charged as u64).max(estimate) };
        match self.limit {
            Some(l) if estimate <= l => charged.min(l),
            _ => charged,
        }
    }

    /// The answer to `charge` came back at `now`. `report`: the dimension's `(limit,
    /// remaining, reset_after)` in it; `actual`: what the request cost, if the answer says;
    /// `refund`: the request was not counted (refused, or never sent).
    pub(super) fn settle(
        &mut self,
        now: Nanos,
        charge: &Charge,
        report: Option<(Option<u64>, Option<u64>, Option<Nanos>)>,
        actual: Option<u64>,
        refund: bool,
    ) {
        self.in_flight = self.in_flight.saturating_sub(charge.charged);
        let fresh = charge.epoch == self.epoch;
        if fresh {
            let cost = if refund { 0 } else { actual.unwrap_or(charge.charged) };
            self.spent = self.spent.saturating_sub(charge.charged).saturating_add(cost);
        }
        let Some((limit, remaining, reset_after)) = report else { return };
        if let Some(l) = limit.filter(|&l| l > 0) {
            self.limit = Some(l);
        }
        if let Some(ra) = reset_after {
            self.longest_reset = self.longest_reset.max(ra);
        }
        let reset_at = reset_after.map(|ra| now.saturating_add(ra));
        if !fresh {
            // Counted in a window before the local reset, or in this one after its lowest
            // report: its numbers describe neither for sure. But a reset still ahead says the
            // window outlasts the local reset.
            if let Some(at) = reset_at
                && self.reported.is_none()
                && self.spent == 0
                && self.reset_at.is_none_or(|r| r < at)
            {
                self.reset_at = Some(at);
            }
            return;
        }
        if let Some(rem) = remaining {
            self.reported = Some(self.reported.map_or(rem, |old| old.min(rem)));
        }
        if let Some(at) = reset_at {
            self.reset_at = Some(self.reset_at.map_or(at, |old| old.max(at)));
        }
    }
}

impl Budget {
    /// When `need` more (the charges of the requests ahead and of this one) can have gone, as
    /// far as known: `None` when now, or when nothing is known to hold it (no report, or no
    /// reset known).
    pub(super) fn wait_for(&self, now: Nanos, need: u64) -> Option<Nanos> {
        let (room, first_reset) = match self.reset_at {
            Some(t) if t > now => (self.room()?, t),
            // Its reset passed (or none is known): the next evaluation starts a new window.
            Some(_) => (self.limit?.saturating_sub(self.in_flight), now),
            None => (self.room()?, now),
        };
        if need <= room {
            return None;
        }
        let limit = self.limit.filter(|&l| l > 0)?;
        let period = if self.longest_reset > 0 { self.longest_reset } else { return Some(first_reset) };
        // Windows after the first reset the rest needs: each gives the whole limit.
        let windows = (need - room).div_ceil(limit);
        Some(first_reset.saturating_add(period.saturating_mul(windows.saturating_sub(1))))
    }

    /// What `estimate` is charged at `margin` in this budget.
    pub(super) fn charge_of(&self, estimate: u64, margin: f64) -> u64 {
        self.charge_for(estimate, margin)
    }
}

/// Whether `costs` (with their margins) may go now through `budgets`.
pub(super) fn gate<'c>(
    budgets: &[Budget],
    costs: impl Iterator<Item = (&'c str, u64)>,
    margin: impl Fn(&str) -> f64,
) -> Result<(), Blocked> {
    let mut wait: Option<Blocked> = None;
    for (name, estimate) in costs {
        let Some(b) = budgets.iter().find(|b| &*b.name == name) else { continue };
        if let Some(limit) = b.limit
            && estimate > limit
        {
            return Err(Blocked::Never { dimension: name.to_string(), cost: estimate, limit });
        }
        if let Err(blocked) = b.admits(b.charge_for(estimate, margin(name))) {
            wait = Some(match (wait, blocked) {
                (Some(Blocked::Until(a)), Blocked::Until(b)) => Blocked::Until(a.max(b)),
                (Some(Blocked::UntilResponse), _) | (_, Blocked::UntilResponse) => Blocked::UntilResponse,
                (_, b) => b,
            });
        }
    }
    wait.map_or(Ok(()), Err)
}

/// The worst ratio of actual to estimated cost seen in one dimension: the margin each
/// estimate is charged at.
#[derive(Debug, Clone, Default)]
pub(super) struct Ratio {
    worst: f64,
    best: f64,
    samples: u32,
}

impl Ratio {
    /// A settled cost: `actual` for an estimate of `estimate`.
    pub(super) fn learn(&mut self, estimate: u64, actual: u64) {
        if estimate == 0 {
            return;
        }
        let r = actual as f64 / estimate as f64;
        if r.is_finite() {
            if self.samples == 0 {
                (self.worst, self.best) = (r, r);
            }
            self.worst = self.worst.max(r);
            self.best = self.best.min(r);
            self.samples = self.samples.saturating_add(1);
        }
    }

    /// The factor estimates are charged at: the worst ratio seen, widened by the spread of the
    /// ratios seen over their number `n` (the worst of `n` draws falls short of the true worst
    /// by about that much), never below 1 (an estimate that errs high is the caller's own
    /// margin) and at most [`Ratio::MAX`]. Exact estimates keep it at 1.
    ///
    /// Until [`Ratio::LEARNED`] answers have settled, it is at least [`Ratio::PRIOR`]: the first
    /// answers of a window come back together, and the sends they free go out together, before
    /// any of them says how far the estimates err.
    pub(super) fn margin(&self) -> f64 {
        let prior = if self.samples < Self::LEARNED { Self::PRIOR } else { 1.0 };
        if self.samples == 0 {
            return prior;
        }
        let n = f64::from(self.samples);
        (self.worst + (self.worst - self.best) / n).clamp(prior, Self::MAX)
    }

    /// The margin before [`Ratio::LEARNED`] settled answers: estimates twice too low.
    pub(super) const PRIOR: f64 = 2.0;

    /// How many settled answers replace the prior.
    pub(super) const LEARNED: u32 = 8;

    /// The widest margin: an estimate 16 times too low is not an estimate.
    pub(super) const MAX: f64 = 16.0;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_the_lowest_report_less_what_is_in_flight() {
        let mut b = Budget::new("tokens");
        let c1 = b.charge(100, 1.0);
        let c2 = b.charge(100, 1.0);
        assert_eq!(b.room(), None);
        b.settle(0, &c1, Some((Some(1000), Some(850), Some(60))), Some(150), false);
        // 850 reported, c2 (100) still out.
        assert_eq!(b.room(), Some(750));
        b.settle(0, &c2, Some((Some(1000), Some(900), Some(60))), Some(50), false);
        assert_eq!(b.room(), Some(800), "the lowest report wins; spent 200 of 1000 by count");
        assert_eq!(gate(&[b.clone()], [("tokens", 801)].into_iter(), |_| 1.0), Err(Blocked::Until(60)));
        assert_eq!(gate(&[b.clone()], [("tokens", 800)].into_iter(), |_| 1.0), Ok(()));
        assert!(matches!(
            gate(&[b.clone()], [("tokens", 1001)].into_iter(), |_| 1.0),
            Err(Blocked::Never { limit: 1000, cost: 1001, .. })
        ));
        assert_eq!(b.wait_for(0, 800), None);
        assert_eq!(b.wait_for(0, 801), Some(60));
        // 2,800 more: the 800 left now, then two whole windows of 1,000 (each 60 long).
        assert_eq!(b.wait_for(0, 2800), Some(120));
        assert_eq!(b.wait_for(0, 2801), Some(180));
        b.roll(60);
        assert_eq!(b.room(), Some(1000));
    }

    #[test]
    fn in_flight_at_a_reset_counts_against_the_new_window() {
        let mut b = Budget::new("tokens");
        let c1 = b.charge(100, 1.0);
        b.settle(0, &c1, Some((Some(1000), Some(0), Some(10))), Some(100), false);
        let c2 = b.charge(0, 1.0);
        b.roll(10);
        assert_eq!(b.room(), Some(1000));
        let c3 = b.charge(300, 2.0);
        assert_eq!(c3.charged, 600);
        assert_eq!(b.room(), Some(400));
        // A stale answer does not lower the new window's report.
        b.settle(10, &c2, Some((Some(1000), Some(0), Some(1))), None, false);
        assert_eq!(b.room(), Some(400));
        b.settle(10, &c3, Some((Some(1000), Some(700), Some(20))), Some(300), false);
        assert_eq!(b.room(), Some(700));
    }

    #[test]
    fn a_refused_request_gives_its_charge_back() {
        let mut b = Budget::new("tokens");
        b.limit = Some(1000);
        let c = b.charge(400, 1.0);
        assert_eq!(b.room(), Some(600));
        b.settle(0, &c, None, None, true);
        assert_eq!(b.room(), Some(1000));
    }

    #[test]
    fn the_margin_is_the_worst_ratio_widened() {
        let mut r = Ratio::default();
        assert_eq!(r.margin(), Ratio::PRIOR);
        r.learn(100, 50);
        assert_eq!(r.margin(), Ratio::PRIOR, "the prior holds until enough answers settled");
        r.learn(100, 150);
        // Worst 1.5, spread 1.0 over 2: under the prior still.
        assert_eq!(r.margin(), Ratio::PRIOR);
        for _ in 0..98 {
            r.learn(100, 100);
        }
        assert!((r.margin() - 1.51).abs() < 1e-9);
        let mut exact = Ratio::default();
        for _ in 0..Ratio::LEARNED {
            exact.learn(100, 100);
        }
        assert_eq!(exact.margin(), 1.0);
        r.learn(1, 1000);
        assert_eq!(r.margin(), Ratio::MAX);
    }
}
