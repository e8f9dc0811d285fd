//! Costs in several dimensions: a request's estimated tokens (points, ...) beside the one
//! request every request costs. The rules in full: [`Budget`], "Costs" (the [`crate::Limiter`]
//! docs keep a summary).
//!
//! Each queue keeps one [`Budget`] per dimension its requests name. A budget comes back in one
//! of two ways, chosen by the profile and learned from the answers:
//!
//! - **A window** (Discord, GitHub, IETF policies, Azure OpenAI): the answers report the lowest
//!   `remaining` since the window began locally and when the dimension is whole again (`reset`).
//!   What may still be sent is that report less what is in flight (each request's charge), the
//!   same rule the request count follows: the lowest report is the server's latest state, and
//!   what it did not count yet is still in flight. Before a report of the window, the limit
//!   less what was sent since the local reset (its settled cost once the answer says it) and
//!   what was still in flight at the reset.
//! - **Continuous refill** ([`Refill`]; OpenAI's and Anthropic's requests and tokens, Shopify
//!   GraphQL's points): the budget refills at `limit / period`, where the period (the time from
//!   empty to full) is learned from the answers, each giving an upper bound (`reset` is the time
//!   to full, `limit - remaining` what is missing; Shopify also says its restore rate). What may
//!   be sent at `t` is a level carried forward from answer to answer (what refilled since,
//!   capped at the limit, less every cost settled since) and raised by each report (what it
//!   says was left, less the costs settled since its request was sent, which the report may
//!   not count), less what is in flight. Each report also caps the level (what it says was left
//!   plus what refilled since its request was sent), so costs the answers do not tell cannot
//!   drift it upward. Until the period is known, the budget is read as a window.
//!
//! A request is charged its estimate times a margin drawn from the recent ratios of actual to
//! estimated cost in that dimension ([`Ratio`]), so estimates that err low do not overrun the
//! budget; its answer gives the charge back and, from the body's `usage`, teaches the ratio
//! and settles what the window spent. An answer to a request sent before the local reset
//! leaves what was carried, and its reported reset tells which window counted it. In shared
//! mode a budget is this process's part (`share`) of the limit and of what the server reports.

use crate::types::{Dimension, FailReason, HeaderProfile, MILLISECOND, Nanos};

/// One dimension's budget in one queue: the engine's costs. (This chapter was the
/// limiter's public "Costs" docs; they keep a summary.)
///
/// # Costs
///
/// Every request costs one request of its bucket. APIs that limit more than requests (LLM
/// APIs' tokens per minute, GraphQL points) report those budgets as further dimensions
/// ([`RateLimitInfo::dimensions`]); a request names what it will cost in them with
/// [`Request::costs`] (`tokens: 1200`), an estimate. Then, per queue (route and major
/// parameter, or learned bucket) and dimension:
///
/// - **The gate.** The queue's head is sent only when every dimension it names has room for
///   its *charge*. A dimension comes back in one of two ways, chosen by the profile and
///   learned from the answers (the module docs say how):
///   - *a window* (Discord, GitHub, IETF policies, Azure OpenAI): room is the lowest
///     `remaining` any answer of the dimension's current window reported, less the charges
///     still in flight; before such a report, the limit less what was charged since the window
///     began locally and what was in flight then. Otherwise the head waits for the dimension's
///     reset (the latest end an answer of the window reported), or for an answer when no reset
///     is known;
///   - *continuous refill* (OpenAI's and Anthropic's requests and tokens, Shopify GraphQL's
///     points): the budget refills at `limit / period`, the period learned from the answers
///     (each reset is the time until the budget is full; two reports of different depths must
///     agree on a period, or the answer states its restore rate; reports no one period explains
///     make the dimension a window). Room at `t` is a level carried from answer to answer —
///     what refilled since, capped at the limit, less every cost settled since — raised to what
///     a report proves is left (its `remaining` less what settled after its request was sent)
///     and capped by what it allows (its `remaining` plus what refilled since its request was
///     sent), less the charges in flight. The head waits until what it lacks has refilled, not
///     for the reset.
///
///   The queue stays in order behind the head. A dimension no answer reported yet does not
///   hold anything (the first answers tell). Under the OpenAI and Anthropic profiles every
///   request also costs one `requests` (its request budget refills continuously too); a
///   request whose costs name a dimension leaves the request count to that budget, and the
///   bucket sees only the dimensions it does not name.
/// - **The charge** is the estimate times the dimension's margin: the worst ratio of actual to
///   estimated cost settled so far, widened by the ratios' spread over their number (the worst
///   of `n` draws falls short of the true worst by about that much), between 1 and 16 (an
///   estimate that errs high stays the caller's own margin; exact estimates are charged as
///   they are), and never above the limit for an estimate within it. Only the last 64 ratios
///   count, so one wild estimate is forgotten. Before any answer settles it is at least 2, and
///   that floor falls linearly to 1 over the first 8 answers: the first answers come back
///   together and free a burst of sends before most of them say how far the estimates err.
/// - **Settling.** The answer gives the charge back. Its body's actual cost
///   ([`BodyHints::usage`], read by [`headers::settled_cost`]) teaches the margin and replaces
///   the charge in what the window spent; its reports lower the dimension's `remaining`. A 429
///   (or a send that never left) gives the charge back whole; an answer that does not say
///   keeps the charge spent.
/// - **Never fits.** A request whose estimate is above a dimension's reported limit fails with
///   [`FailReason::InsufficientCapacity`]: at enqueue when the limit is known, else when an
///   answer reports it (its own 429 included: it is not retried).
/// - The request count still follows the binding rule ([`crate::headers`], "Several
///   budgets") over the dimensions the request's costs do *not* name.
///
/// **Shared mode:** each process keeps to its part of every budget, the limit and what the
/// server reports divided by the live process count the store last gave (an estimate within
/// the limit is charged at most that part). Exact for processes whose demand is alike; one
/// process alone is held to its part while others are counted live.
///
/// What this guarantees: a dimension is never charged past what its reports leave, so a
/// server that counts each request at no more than its charge never refuses one for that
/// dimension; an actual cost above every ratio settled before the request was sent can still
/// overrun the last of a window (the property in `core/tests/costs.rs` checks both).
///
/// Predictions ([`Limiter::predict`], the deadline, `max_wait` and `defer_after` checks) count
/// the charges queued ahead: what the current window has left, then the whole limit per window
/// of the longest reset reported; for a continuously refilling dimension, the time its rate
/// takes to refill what they and the request need beyond what it holds now.
///
/// [`RateLimitInfo::dimensions`]: crate::RateLimitInfo::dimensions
/// [`Request::costs`]: crate::Request::costs
/// [`BodyHints::usage`]: crate::BodyHints::usage
/// [`headers::settled_cost`]: crate::headers::settled_cost
/// [`FailReason::InsufficientCapacity`]: crate::FailReason::InsufficientCapacity
/// [`Limiter::predict`]: crate::Limiter::predict
#[derive(Debug, Clone)]
pub(super) struct Budget {
    name: Box<str>,
    /// The dimension's capacity, as the latest answer reported it.
    limit: Option<u64>,
    /// The lowest `remaining` reported by an answer sent since the local reset.
    reported: Option<u64>,
    /// When the dimension is whole again: the latest end an answer of this window reported.
    reset_at: Option<Nanos>,
    /// Counts local resets: answers to requests sent before the last one say nothing of the
    /// current window.
    epoch: u64,
    /// Charged since the local reset (settled to the actual cost once an answer says it).
    spent: u64,
    /// In flight at the local reset and not answered since: they may land in the new window.
    carried: u64,
    /// Charges of the requests in flight.
    in_flight: u64,
    /// The longest time to the reset an answer reported: the window's length, as far as known.
    longest_reset: Nanos,
    /// The end of the window before the local reset, as it was known then.
    rolled_at: Option<Nanos>,
    /// Shared mode: how many processes share the budget (the store's live count); this one
    /// keeps to its part of it. 1 otherwise.
    share: u64,
    /// The budget refills continuously (see [`Refill`]); `None`: a window.
    refill: Option<Refill>,
    /// Every cost settled so far (an answer's actual cost, or the charge an answer kept), all
    /// told: a charge notes it at its send, so that its answer knows what settled since.
    settled: u64,
}

/// A continuously refilling budget's state (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Refill {
    /// The time the budget takes from empty to full: the least upper bound the answers gave.
    pub(super) period: Option<Nanos>,
    /// The greatest lower bound of the period the answers gave, and the least upper bound with
    /// a tolerance for resets told coarsely ([`Refill::TOLERANCE`]): a server whose reports
    /// no one period explains (a window that says `reset` but does not refill) makes them
    /// cross, and the budget is a window from then on.
    pub(super) period_low: Nanos,
    pub(super) period_high: Option<Nanos>,
    /// The first `limit - remaining` a bound was drawn from, and whether a second, different
    /// one agreed: a rate is trusted only once two reports of different depths agree (or the
    /// answers state it, Shopify's restore rate).
    pub(super) first_missing: Option<u64>,
    pub(super) confirmed: bool,
    /// The reports disagreed: read as a window.
    pub(super) window: bool,
    /// What this process may still take, as of `at`, in-flight charges aside: `None` before a
    /// report.
    pub(super) level: Option<f64>,
    pub(super) at: Nanos,
}

impl Refill {
    /// The share of a reset a server may have rounded away, for the consistency check.
    pub(super) const TOLERANCE: f64 = 0.02;

    /// Learns from a report of `missing = limit - remaining` (as reported) and the time to
    /// full `reset`, known to within `error` either way beyond the millisecond headers round
    /// to: bounds on the period, and whether they still agree.
    fn learn(&mut self, limit: u64, missing: u64, reset: Nanos, error: Nanos) {
        if reset == 0 || missing == 0 {
            return;
        }
        let (lim, reset_f) = (limit as f64, reset as f64);
        let slack = reset_f * Self::TOLERANCE + (MILLISECOND + error) as f64;
        // The true missing part lies in (missing - 1, missing]: a level is reported rounded down.
        let low = ((reset_f - slack).max(0.0) * lim / (missing + 1) as f64) as Nanos;
        self.period_low = self.period_low.max(low);
        if missing >= 2 {
            let high = (reset_f + slack) * lim / (missing - 1) as f64;
            let high = if high >= Nanos::MAX as f64 { Nanos::MAX } else { high.ceil() as Nanos };
            self.period_high = Some(self.period_high.map_or(high, |h| h.min(high)));
            // For the rate: the reset is at most a millisecond short (headers round it up),
            // and `error` more.
            let p = (u128::from(reset.saturating_add(MILLISECOND + error)) * u128::from(limit)).div_ceil(u128::from(missing - 1));
            let p = Nanos::try_from(p).unwrap_or(Nanos::MAX);
            self.period = Some(self.period.map_or(p, |old| old.min(p)));
            match self.first_missing {
                None => self.first_missing = Some(missing),
                Some(first) if first != missing => self.confirmed = true,
                Some(_) => {}
            }
        }
        if self.period_high.is_some_and(|h| self.period_low > h) {
            self.window = true;
        }
    }

    /// The period the rate is drawn from, once trusted.
    fn trusted_period(&self) -> Option<Nanos> {
        if self.window || !self.confirmed {
            return None;
        }
        self.period.filter(|&p| p > 0)
    }
}

/// A millionth of a unit: a level this close to a charge covers it (the level is carried in
/// floating point; a wait computed to the nanosecond may land a rounding short).
const SLACK: f64 = 1e-6;

/// What an answer says of a continuously refilling dimension beside its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RefillReport {
    /// The time one unit takes to come back, when the answer states it (Shopify).
    pub(super) interval: Option<Nanos>,
    /// The reset was a time of day, read against a clock of this resolution when the answer
    /// arrived (Anthropic): it is short by as much as the request's round trip (the server
    /// decided before), and off by the clock's resolution. `None`: a duration from the
    /// server's decision.
    pub(super) absolute: Option<Nanos>,
}

/// Whether a dimension refills continuously, as its provider documents it: OpenAI's and
/// Anthropic's budgets (requests and tokens per minute, a token bucket whose reset is the time
/// until it is full), and any budget reported with a restore rate (Shopify). Azure OpenAI
/// reports neither a limit nor a reset to learn a rate from; every other profile says windows.
pub(super) fn refills(profile: Option<HeaderProfile>, d: &Dimension) -> bool {
    d.refill_interval.is_some() || matches!(profile, Some(HeaderProfile::OpenAi | HeaderProfile::Anthropic))
}

/// Whether the engine counts a profile's requests as a cost dimension (`requests`, one per
/// request) beside the tokens, rather than through the bucket's window: the providers whose
/// request budget refills continuously (OpenAI, Anthropic).
pub(super) fn counts_requests(profile: HeaderProfile) -> bool {
    matches!(profile, HeaderProfile::OpenAi | HeaderProfile::Anthropic)
}

/// The request count's dimension, which every request costs one of.
pub(super) const REQUESTS: &str = "requests";

/// What one send charged one budget.
#[derive(Debug, Clone)]
pub(super) struct Charge {
    pub(super) name: Box<str>,
    /// The caller's estimate.
    pub(super) estimate: u64,
    /// What was charged: the estimate times the dimension's [`Ratio::margin`], at most this
    /// process's part of the limit.
    pub(super) charged: u64,
    /// The budget's epoch at the send.
    epoch: u64,
    /// When it was sent.
    sent_at: Nanos,
    /// The budget's settled costs at the send ([`Budget::settled`]).
    settled: u64,
}

/// Why a request cannot go now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Blocked {
    /// Until this time (a dimension's reset).
    Until(Nanos),
    /// Until an answer tells more (charges in flight, no reset known).
    UntilResponse,
}

impl Budget {
    /// The dimension's name.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// The dimension's capacity, as the latest answer reported it.
    pub(super) fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Shared mode: `share` processes share the budget now; whether that changed.
    pub(super) fn set_share(&mut self, share: u64) -> bool {
        let changed = self.share != share;
        self.share = share;
        changed
    }

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
            rolled_at: None,
            share: 1,
            refill: None,
            settled: 0,
        }
    }

    /// The refill rate of this process's part, per nanosecond, once the period is known.
    fn rate(&self) -> Option<f64> {
        let period = self.refill?.trusted_period()?;
        Some(self.own_limit()? as f64 / period as f64)
    }

    /// The continuous model's view at `now`, once it has a rate and a level: what may be taken
    /// (in-flight charges aside), and the rate.
    fn level_at(&self, now: Nanos) -> Option<(f64, f64)> {
        let (rate, r) = (self.rate()?, self.refill?);
        let level = r.level?;
        let cap = self.own_limit()? as f64;
        Some(((level + rate * now.saturating_sub(r.at) as f64).min(cap), rate))
    }

    /// Begins a new local window once the reported reset has passed.
    pub(super) fn roll(&mut self, now: Nanos) {
        if self.reset_at.is_some_and(|t| t <= now) {
            self.rolled_at = self.reset_at.take();
            self.reported = None;
            self.epoch += 1;
            self.spent = 0;
            self.carried = self.in_flight;
        }
    }

    /// This process's part of the limit (the whole limit but in shared mode).
    fn own_limit(&self) -> Option<u64> {
        self.limit.map(|l| (l / self.share.max(1)).max(1))
    }

    /// What may still be charged; `None`: nothing known (no limit, no report). In shared mode,
    /// this process's part of what the server reports, and of the limit.
    fn room(&self) -> Option<u64> {
        let by_count = self.own_limit().map(|l| l.saturating_sub(self.carried).saturating_sub(self.spent));
        let reported = self.reported.map(|r| r / self.share.max(1));
        match (reported, by_count) {
            (Some(r), Some(c)) => Some(r.saturating_sub(self.in_flight).min(c)),
            (Some(r), None) => Some(r.saturating_sub(self.in_flight)),
            (None, c) => c,
        }
    }

    /// Whether `charge` may go at `now`, or until when it waits.
    fn admits(&self, now: Nanos, charge: u64) -> Result<(), Blocked> {
        if let Some((level, rate)) = self.level_at(now) {
            let room = level - self.in_flight as f64;
            if room + SLACK >= charge as f64 {
                return Ok(());
            }
            let most = self.own_limit().unwrap_or(0) as f64 - self.in_flight as f64;
            if most + SLACK < charge as f64 && self.in_flight > 0 {
                // Not even a full budget holds it beside what is in flight: an answer first.
                return Err(Blocked::UntilResponse);
            }
            let wait = ((charge as f64 - room) / rate).ceil().max(1.0);
            return Err(Blocked::Until(now.saturating_add(if wait >= u64::MAX as f64 { u64::MAX } else { wait as u64 })));
        }
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

    /// Charges a send of `estimate` at `margin`, at `now`.
    pub(super) fn charge(&mut self, now: Nanos, estimate: u64, margin: f64) -> Charge {
        let charged = self.charge_for(estimate, margin);
        self.spent = self.spent.saturating_add(charged);
        self.in_flight = self.in_flight.saturating_add(charged);
        Charge { name: self.name.clone(), estimate, charged, epoch: self.epoch, sent_at: now, settled: self.settled }
    }

    fn charge_for(&self, estimate: u64, margin: f64) -> u64 {
        let charged = (estimate as f64 * margin).ceil();
        let charged = if charged >= u64::MAX as f64 { u64::MAX } else { (charged as u64).max(estimate) };
        // An estimate within the limit is charged at most this process's part of it, so that
        // it can go once a window is whole.
        match (self.limit, self.own_limit()) {
            (Some(l), Some(own)) if estimate <= l => charged.min(own),
            _ => charged,
        }
    }

    /// The answer to `charge` came back at `now`. `report`: the dimension's `(limit,
    /// remaining, reset_after)` in it; `actual`: what the request cost, if the answer says;
    /// `refund`: the request was not counted (refused, or never sent). `refill`: the report
    /// says the dimension refills continuously (see [`refills`]), and how to read it.
    pub(super) fn settle(
        &mut self,
        now: Nanos,
        charge: &Charge,
        report: Option<(Option<u64>, Option<u64>, Option<Nanos>)>,
        actual: Option<u64>,
        refund: bool,
        refill: Option<RefillReport>,
    ) {
        self.in_flight = self.in_flight.saturating_sub(charge.charged);
        let cost = if refund { 0 } else { actual.unwrap_or(charge.charged) };
        self.settle_refill(now, charge, report, cost, refill);
        let reset_after = report.and_then(|(_, _, ra)| ra);
        let reset_at = reset_after.map(|ra| now.saturating_add(ra));
        let fresh = if charge.epoch == self.epoch {
            self.spent = self.spent.saturating_sub(charge.charged).saturating_add(cost);
            true
        } else {
            // Sent before the local reset: it was in flight then (`carried`), and no longer is.
            // Which window counted it, its answer's reset tells: one that ends about a window
            // after the old window's end is the new one, which it then spent. Without a
            // reset to tell by, it stays spent (it may have been counted in the new window).
            self.carried = self.carried.saturating_sub(charge.charged);
            let half = self.longest_reset.max(reset_after.unwrap_or(0)) / 2;
            let in_new = match (reset_at, self.rolled_at) {
                (Some(at), Some(old_end)) => at > old_end.saturating_add(half),
                _ => !refund,
            };
            if in_new {
                self.spent = self.spent.saturating_add(cost);
            }
            in_new && reset_at.is_some()
        };
        let Some((limit, remaining, reset_after)) = report else { return };
        if let Some(l) = limit.filter(|&l| l > 0) {
            self.limit = Some(l);
        }
        if let Some(ra) = reset_after {
            self.longest_reset = self.longest_reset.max(ra);
        }
        if !fresh {
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
    /// The continuous model's part of [`Budget::settle`] (see the module docs): learns the
    /// period from the report, carries the level forward to `now` less this request's `cost`,
    /// caps it by the report and raises it to what the report proves is left.
    fn settle_refill(
        &mut self,
        now: Nanos,
        charge: &Charge,
        report: Option<(Option<u64>, Option<u64>, Option<Nanos>)>,
        cost: u64,
        refill: Option<RefillReport>,
    ) {
        let settled_since = self.settled.saturating_sub(charge.settled);
        self.settled = self.settled.saturating_add(cost);
        if let Some(RefillReport { interval, absolute }) = refill {
            let error = absolute.map_or(0, |resolution| now.saturating_sub(charge.sent_at).saturating_add(resolution));
            let r = self.refill.get_or_insert_with(Refill::default);
            let limit = report.and_then(|(l, _, _)| l).filter(|&l| l > 0).or(self.limit);
            if let Some(limit) = limit {
                if let Some(i) = interval {
                    // The answers state the rate (a unit every `i`, rounded up to a
                    // millisecond: a bound, trusted at once); their resets bound it closer.
                    let p = i.saturating_mul(limit);
                    r.period = Some(r.period.map_or(p, |old| old.min(p)));
                    r.confirmed = true;
                }
                if let Some((_, Some(remaining), Some(reset))) = report {
                    r.learn(limit, limit.saturating_sub(remaining), reset, error);
                }
            }
        }
        let Some(r) = self.refill else { return };
        let rate = self.rate().unwrap_or(0.0);
        let share = self.share.max(1) as f64;
        let cap = self.own_limit().map_or(f64::MAX, |l| l as f64);
        // Carried forward: what refilled since, capped, less this request's cost.
        let mut level = r.level.map(|l| (l + rate * now.saturating_sub(r.at) as f64).min(cap) - cost as f64);
        if let Some((_, Some(remaining), _)) = report {
            let reported = remaining as f64 / share;
            // No more than the report left plus what refilled since the request left (the
            // server decided after that); no less than it left less what settled since (which
            // it may not have counted).
            let most = (reported + rate * now.saturating_sub(charge.sent_at) as f64).min(cap);
            let least = reported - settled_since as f64;
            level = Some(level.map_or(least, |l| l.min(most).max(least)));
        }
        self.refill = Some(Refill { level, at: now, ..r });
    }
}

/// A budget as a snapshot keeps it (see [`crate::snapshot::LearnedBudget`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Kept {
    pub(super) limit: Option<u64>,
    /// The refill period, once trusted.
    pub(super) period: Option<Nanos>,
    /// What this process may still take at the snapshot, less what is in flight (which may
    /// still land), rounded down: a continuous budget's with a level only.
    pub(super) left: Option<u64>,
}

impl Budget {
    /// What a snapshot at `now` keeps of it.
    pub(super) fn keep(&self, now: Nanos) -> Kept {
        let period = self.refill.and_then(|r| r.trusted_period());
        let left = self.level_at(now).map(|(level, _)| (level - self.in_flight as f64).max(0.0) as u64);
        Kept { limit: self.limit, period, left }
    }

    /// A budget restored from a snapshot: `elapsed` after it was taken, at `now`, with the
    /// process's `share`. A continuous budget's level is what was left plus what refilled
    /// since (capped at the limit); a window's count is not kept (it is stale within the
    /// window, and the first answer tells).
    pub(super) fn restored(name: &str, kept: Kept, elapsed: Nanos, now: Nanos, share: u64) -> Budget {
        let mut b = Budget::new(name);
        b.limit = kept.limit.filter(|&l| l > 0);
        b.share = share;
        if let Some(period) = kept.period.filter(|&p| p > 0) {
            b.refill = Some(Refill { period: Some(period), confirmed: true, at: now, ..Refill::default() });
            if let (Some(left), Some(rate), Some(cap)) = (kept.left, b.rate(), b.own_limit()) {
                b.refill = b.refill.map(|r| Refill { level: Some((left as f64 + rate * elapsed as f64).min(cap as f64)), ..r });
            }
        }
        b
    }
}

/// Where the requests queued ahead leave a budget, for predictions: how many windows after the
/// current one they reach into, and what the last of them has left; for a continuous budget,
/// what they need beyond what it holds now, and its rate.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pack {
    windows: u64,
    room: u64,
    need: u64,
    /// The refill rate per nanosecond, for a continuous budget; 0 for a window.
    rate: f64,
}

impl Budget {
    /// The budget as the next request finds it, for [`Budget::pack_add`]: `None` when nothing
    /// is known to hold anything (no limit and no report).
    pub(super) fn pack(&self, now: Nanos) -> Option<Pack> {
        if let Some((level, rate)) = self.level_at(now) {
            let room = (level - self.in_flight as f64 + SLACK).max(0.0) as u64;
            return Some(Pack { windows: 0, room, need: 0, rate });
        }
        let room = match self.reset_at {
            Some(t) if t > now => self.room()?,
            // Its reset passed: the next evaluation starts a new window.
            Some(_) => self.own_limit()?.saturating_sub(self.in_flight),
            None => self.room()?,
        };
        Some(Pack { windows: 0, room, need: 0, rate: 0.0 })
    }

    /// Queues `charge` in `pack`: in the window it reaches, or the next (the queue keeps its
    /// order, so a charge that does not fit waits for a window with room).
    pub(super) fn pack_add(&self, pack: &mut Pack, charge: u64) {
        if pack.rate > 0.0 {
            // FIFO: each goes once the level covers it and everything ahead of it.
            pack.need = pack.need.saturating_add(charge);
            return;
        }
        if charge > pack.room
            && let Some(limit) = self.own_limit()
        {
            pack.windows += 1;
            pack.room = limit;
        }
        pack.room = pack.room.saturating_sub(charge);
    }

    /// When a request whose charge `pack` ends with may go: `None` in the current window.
    pub(super) fn pack_time(&self, now: Nanos, pack: &Pack) -> Option<Nanos> {
        if pack.rate > 0.0 {
            if pack.need <= pack.room {
                return None;
            }
            let wait = ((pack.need - pack.room) as f64 / pack.rate).ceil();
            return Some(now.saturating_add(if wait >= u64::MAX as f64 { u64::MAX } else { wait as u64 }));
        }
        if pack.windows == 0 {
            return None;
        }
        let first = self.reset_at.map_or(now, |t| t.max(now));
        Some(first.saturating_add(self.longest_reset.saturating_mul(pack.windows - 1)))
    }

    /// What `estimate` is charged at `margin` in this budget.
    pub(super) fn charge_of(&self, estimate: u64, margin: f64) -> u64 {
        self.charge_for(estimate, margin)
    }
}

/// A request's costs: its estimates, and what its send in flight charged. Held apart (most
/// requests have none) so that a request without costs pays one pointer for them.
#[derive(Debug, Default)]
pub(super) struct ReqCosts {
    pub(super) estimates: Box<[(Box<str>, u64)]>,
    pub(super) charges: Vec<Charge>,
}

/// The budget named `name` in `budgets`, made (with this process's `share`) if there is none.
pub(super) fn budget_mut<'b>(budgets: &'b mut Vec<Budget>, name: &str, share: u64) -> &'b mut Budget {
    let i = match budgets.iter().position(|b| &*b.name == name) {
        Some(i) => i,
        None => {
            let mut b = Budget::new(name);
            b.share = share;
            budgets.push(b);
            budgets.len() - 1
        }
    };
    &mut budgets[i]
}

/// Why `costs` can never go through `budgets`: an estimate above a dimension's reported limit.
pub(super) fn never_fits<N: AsRef<str>>(budgets: &[Budget], costs: &[(N, u64)]) -> Option<FailReason> {
    costs.iter().find_map(|(name, estimate)| {
        let b = budgets.iter().find(|b| &*b.name == name.as_ref())?;
        let limit = b.limit.filter(|&l| *estimate > l)?;
        Some(FailReason::InsufficientCapacity { dimension: name.as_ref().to_string(), cost: *estimate, limit })
    })
}

/// Whether `costs` (with their margins) may go at `now` through `budgets` (which
/// [`never_fits`] has let through).
pub(super) fn gate<'c>(
    now: Nanos,
    budgets: &[Budget],
    costs: impl Iterator<Item = (&'c str, u64)>,
    margin: impl Fn(&str) -> f64,
) -> Result<(), Blocked> {
    let mut wait: Option<Blocked> = None;
    for (name, estimate) in costs {
        let Some(b) = budgets.iter().find(|b| &*b.name == name) else { continue };
        if let Err(blocked) = b.admits(now, b.charge_for(estimate, margin(name))) {
            wait = Some(match (wait, blocked) {
                (Some(Blocked::Until(a)), Blocked::Until(b)) => Blocked::Until(a.max(b)),
                (Some(Blocked::UntilResponse), _) | (_, Blocked::UntilResponse) => Blocked::UntilResponse,
                (_, b) => b,
            });
        }
    }
    wait.map_or(Ok(()), Err)
}

/// Per cost dimension, the recent ratios of actual to estimated cost ([`Ratio`]): the margin
/// each estimate of the dimension is charged at. At most [`Margins::DIMENSIONS`] dimensions
/// (names come from the caller's costs, a few per request; a bound all the same).
#[derive(Debug, Clone, Default)]
pub(super) struct Margins {
    ratios: Vec<(Box<str>, Ratio)>,
}

impl Margins {
    /// The most dimensions it learns ratios for; further ones are charged at the prior.
    pub(super) const DIMENSIONS: usize = 64;

    /// The margin estimates in dimension `name` are charged at: 1 for the request count
    /// ([`REQUESTS`], which is exact), the prior before any ratio of the dimension settled.
    pub(super) fn of(&self, name: &str) -> f64 {
        if name == REQUESTS {
            return 1.0;
        }
        self.ratios.iter().find(|(n, _)| &**n == name).map_or(Ratio::PRIOR, |(_, r)| r.margin())
    }

    /// A cost settled in dimension `name`: `actual` for an estimate of `estimate`.
    pub(super) fn learn(&mut self, name: &str, estimate: u64, actual: u64) {
        let i = match self.ratios.iter().position(|(n, _)| &**n == name) {
            Some(i) => i,
            None if self.ratios.len() < Self::DIMENSIONS => {
                self.ratios.push((name.into(), Ratio::default()));
                self.ratios.len() - 1
            }
            None => return,
        };
        self.ratios[i].1.learn(estimate, actual);
    }

    /// A snapshot's ratios of dimension `name`, unless this one has its own (newer) already.
    pub(super) fn restore(&mut self, name: &str, ratio: Ratio) {
        if !self.ratios.iter().any(|(n, _)| &**n == name) && self.ratios.len() < Self::DIMENSIONS {
            self.ratios.push((name.into(), ratio));
        }
    }

    /// Each dimension with its ratios, in the order first settled.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &Ratio)> {
        self.ratios.iter().map(|(n, r)| (&**n, r))
    }
}

/// The ratios of actual to estimated cost settled in one dimension, the last
/// [`Ratio::RECENT`] of them: the margin each estimate is charged at comes from them. Only the
/// recent ones, so that one wild estimate (or a caller who fixed its estimator) stops counting
/// after a while.
#[derive(Debug, Clone, Default)]
pub(super) struct Ratio {
    recent: std::collections::VecDeque<f64>,
    /// Settled so far, all told.
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
            if self.recent.len() == Self::RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back(r);
            self.samples = self.samples.saturating_add(1);
        }
    }

    /// How many recent ratios the margin is drawn from.
    pub(super) const RECENT: usize = 64;

    /// The factor estimates are charged at: the worst recent ratio, widened by the recent
    /// ratios' spread over their number `n` (the worst of `n` draws falls short of the true
    /// worst by about that much), never below 1 (an estimate that errs high is the caller's own
    /// margin) and at most [`Ratio::MAX`]. Exact estimates keep it at 1.
    ///
    /// Until [`Ratio::LEARNED`] answers have settled it is at least a prior that starts at
    /// [`Ratio::PRIOR`] and falls linearly to 1: the first answers of a window come back
    /// together, and the sends they free go out together, before most of them say how far the
    /// estimates err.
    pub(super) fn margin(&self) -> f64 {
        let learned = self.samples.min(Self::LEARNED);
        let prior = 1.0 + (Self::PRIOR - 1.0) * f64::from(Self::LEARNED - learned) / f64::from(Self::LEARNED);
        let (Some(worst), Some(best)) = (
            self.recent.iter().copied().reduce(f64::max),
            self.recent.iter().copied().reduce(f64::min),
        ) else {
            return prior;
        };
        let n = self.recent.len() as f64;
        (worst + (worst - best) / n).clamp(prior, Self::MAX)
    }

    /// The recent ratios, oldest first, and how many settled all told (for a snapshot).
    pub(super) fn kept(&self) -> (Vec<f64>, u32) {
        (self.recent.iter().copied().collect(), self.samples)
    }

    /// A ratio restored from a snapshot: the last [`Ratio::RECENT`] of `recent` (finite, >= 0),
    /// `samples` settled all told.
    pub(super) fn restored(recent: &[f64], samples: u32) -> Ratio {
        let recent: std::collections::VecDeque<f64> =
            recent.iter().rev().take(Self::RECENT).rev().copied().filter(|r| r.is_finite() && *r >= 0.0).collect();
        let samples = samples.max(u32::try_from(recent.len()).unwrap_or(u32::MAX));
        Ratio { recent, samples }
    }

    /// The margin before any answer settled: estimates twice too low.
    pub(super) const PRIOR: f64 = 2.0;

    /// How many settled answers it takes for the prior to fall to 1.
    pub(super) const LEARNED: u32 = 8;

    /// The widest margin: an estimate 16 times too low is not an estimate.
    pub(super) const MAX: f64 = 16.0;
}

#[cfg(test)]
mod tests {
    use super::{Blocked, Budget, Charge, Margins, REQUESTS, Ratio, gate, never_fits};
    use crate::types::FailReason;

    #[test]
    fn room_is_the_lowest_report_less_what_is_in_flight() {
        let mut b = Budget::new("tokens");
        let c1 = b.charge(0, 100, 1.0);
        let c2 = b.charge(0, 100, 1.0);
        assert_eq!(b.room(), None);
        b.settle(0, &c1, Some((Some(1000), Some(850), Some(60))), Some(150), false, None);
        // 850 reported, c2 (100) still out.
        assert_eq!(b.room(), Some(750));
        b.settle(0, &c2, Some((Some(1000), Some(900), Some(60))), Some(50), false, None);
        assert_eq!(b.room(), Some(800), "the lowest report wins; spent 200 of 1000 by count");
        assert_eq!(gate(0, &[b.clone()], [("tokens", 801)].into_iter(), |_| 1.0), Err(Blocked::Until(60)));
        assert_eq!(gate(0, &[b.clone()], [("tokens", 800)].into_iter(), |_| 1.0), Ok(()));
        assert!(matches!(
            never_fits(std::slice::from_ref(&b), &[("tokens", 1001)]),
            Some(FailReason::InsufficientCapacity { limit: 1000, cost: 1001, .. })
        ));
        assert_eq!(never_fits(std::slice::from_ref(&b), &[("tokens", 1000)]), None);
        let at = |charges: &[u64]| {
            let mut p = b.pack(0).unwrap();
            for &c in charges {
                b.pack_add(&mut p, c);
            }
            b.pack_time(0, &p)
        };
        assert_eq!(at(&[800]), None);
        assert_eq!(at(&[801]), Some(60));
        // 700 now; 600 and 400 in the next window (the reset at 60); 600 more in the one after.
        assert_eq!(at(&[700, 600, 400]), Some(60));
        assert_eq!(at(&[700, 600, 400, 600]), Some(120));
        b.roll(60);
        assert_eq!(b.room(), Some(1000));
    }

    #[test]
    fn in_flight_at_a_reset_counts_against_the_new_window() {
        let mut b = Budget::new("tokens");
        let c1 = b.charge(0, 100, 1.0);
        b.settle(0, &c1, Some((Some(1000), Some(0), Some(10))), Some(100), false, None);
        let c2 = b.charge(0, 0, 1.0);
        b.roll(10);
        assert_eq!(b.room(), Some(1000));
        let c3 = b.charge(0, 300, 2.0);
        assert_eq!(c3.charged, 600);
        assert_eq!(b.room(), Some(400));
        // A stale answer does not lower the new window's report.
        b.settle(10, &c2, Some((Some(1000), Some(0), Some(1))), None, false, None);
        assert_eq!(b.room(), Some(400));
        b.settle(10, &c3, Some((Some(1000), Some(700), Some(20))), Some(300), false, None);
        assert_eq!(b.room(), Some(700));
    }

    #[test]
    fn an_answer_from_before_the_reset_leaves_the_window_that_counted_it() {
        let mut b = Budget::new("tokens");
        let a = b.charge(0, 1000, 1.0);
        b.settle(0, &a, Some((Some(10_000), Some(9000), Some(6_000))), Some(1000), false, None);
        // Four sent at 5 s, in flight when the window ends at 6 s (2 s answers).
        let late: Vec<Charge> = (0..4).map(|_| b.charge(0, 1000, 1.0)).collect();
        b.roll(6_000);
        assert_eq!(b.room(), Some(6000), "what was in flight may land in the new window");
        let c = b.charge(0, 1000, 1.0);
        // Three were counted in the old window (their reset was 1 s away when the server
        // answered; 8 s as received), one in the new one (ends at 12 s).
        for charge in &late[..3] {
            b.settle(7_000, charge, Some((Some(10_000), Some(5000), Some(1_000))), Some(1000), false, None);
        }
        b.settle(7_000, &late[3], Some((Some(10_000), Some(9000), Some(5_000))), Some(1000), false, None);
        assert_eq!(b.room(), Some(8000), "the new window counted two: c (in flight) and late[3]");
        b.settle(7_000, &c, Some((Some(10_000), Some(8000), Some(5_000))), Some(1000), false, None);
        assert_eq!(b.room(), Some(8000));
    }

    #[test]
    fn in_shared_mode_a_process_keeps_to_its_part() {
        let mut b = Budget::new("tokens");
        b.share = 4;
        let c = b.charge(0, 100, 1.0);
        b.settle(0, &c, Some((Some(10_000), Some(8000), Some(60))), Some(100), false, None);
        // A quarter of the 8000 left, and of the limit less what it spent.
        assert_eq!(b.room(), Some(2000));
        assert_eq!(gate(0, std::slice::from_ref(&b), [("tokens", 2001)].into_iter(), |_| 1.0), Err(Blocked::Until(60)));
        // An estimate above its part but within the limit is charged its part: it goes once
        // a window is whole.
        assert_eq!(b.charge_of(9000, 1.0), 2500);
        b.roll(60);
        assert_eq!(b.room(), Some(2500));
    }

    #[test]
    fn a_refused_request_gives_its_charge_back() {
        let mut b = Budget::new("tokens");
        b.limit = Some(1000);
        let c = b.charge(0, 400, 1.0);
        assert_eq!(b.room(), Some(600));
        b.settle(0, &c, None, None, true, None);
        assert_eq!(b.room(), Some(1000));
    }

    #[test]
    fn the_margin_is_the_worst_recent_ratio_widened() {
        let mut r = Ratio::default();
        assert_eq!(r.margin(), Ratio::PRIOR);
        r.learn(100, 50);
        assert_eq!(r.margin(), 1.875, "the prior falls with each answer settled");
        r.learn(100, 150);
        // Worst 1.5, spread 1.0 over 2.
        assert_eq!(r.margin(), 2.0);
        for _ in 0..60 {
            r.learn(100, 100);
        }
        // 62 ratios: worst 1.5, spread 1.0.
        assert!((r.margin() - (1.5 + 1.0 / 62.0)).abs() < 1e-9);
        r.learn(1, 1000);
        assert_eq!(r.margin(), Ratio::MAX);
        // The wild one is forgotten after 64 more.
        for _ in 0..Ratio::RECENT {
            r.learn(100, 110);
        }
        assert!((r.margin() - 1.1).abs() < 1e-9);
        let mut exact = Ratio::default();
        for _ in 0..Ratio::LEARNED {
            exact.learn(100, 100);
        }
        assert_eq!(exact.margin(), 1.0);
    }

    #[test]
    fn margins_start_at_the_prior_and_exact_estimates_bring_them_to_one() {
        let mut m = Margins::default();
        assert_eq!(m.of(REQUESTS), 1.0, "the request count is exact");
        assert_eq!(m.of("tokens"), Ratio::PRIOR);
        for _ in 0..Ratio::LEARNED {
            m.learn("tokens", 100, 100);
        }
        assert_eq!(m.of("tokens"), 1.0);
        assert_eq!(m.of("points"), Ratio::PRIOR, "each dimension learns its own");
        // An estimate half the actual cost: charged at twice (and its spread) from then on.
        m.learn("tokens", 100, 200);
        assert!(m.of("tokens") >= 2.0);
        assert_eq!(m.iter().map(|(n, _)| n).collect::<Vec<_>>(), ["tokens"]);
    }

    #[test]
    fn margins_keep_a_bounded_number_of_dimensions_and_prefer_their_own_to_a_snapshot() {
        let mut m = Margins::default();
        for i in 0..Margins::DIMENSIONS + 5 {
            m.learn(&format!("d{i}"), 10, 30);
        }
        assert_eq!(m.iter().count(), Margins::DIMENSIONS);
        assert_eq!(m.of(&format!("d{}", Margins::DIMENSIONS)), Ratio::PRIOR, "past the bound: the prior");
        let before = m.of("d0");
        m.restore("d0", Ratio::restored(&[1.0; 8], 8));
        assert_eq!(m.of("d0"), before, "its own ratios are newer than a snapshot's");
        let mut fresh = Margins::default();
        fresh.restore("tokens", Ratio::restored(&[1.0; 8], 8));
        assert_eq!(fresh.of("tokens"), 1.0);
    }

    #[test]
    fn a_budget_tells_when_its_share_changes() {
        let mut b = Budget::new("tokens");
        assert_eq!(b.name(), "tokens");
        assert_eq!(b.limit(), None);
        assert!(b.set_share(3));
        assert!(!b.set_share(3));
        assert!(b.set_share(1));
    }
}
