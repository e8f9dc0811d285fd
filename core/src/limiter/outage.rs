//! Shared mode: the store's health as this process sees it ([`Store`]: down, its outage
//! steps and backoff, the recovery after it, the live process count and the margins learned
//! from its answers), what a process keeps so that the store can catch up after an outage
//! ([`SendLog`]), and how long it keeps to its share of the limits ([`Recovery`],
//! [`share_of`]). See [`crate::shared`], "Through an outage".

use crate::types::Nanos;

use super::backoff;
use super::latency::{Recent, widen};
use super::timelog::TimeLog;

/// One identity's sends of its global budget that a store may not count, kept for one global
/// window (the longest one any process passes to the store).
#[derive(Debug, Default)]
pub(super) struct SendLog {
    /// Sends made without a reservation (fail-open while the store was down): no store ever
    /// counted them.
    unrecorded: TimeLog,
    /// Sends the store granted: a store that lost its state (restarted without persistence)
    /// no longer counts them.
    granted: TimeLog,
    /// The store may lack them: each reservation of the identity carries them until the store
    /// answers (grants or denies) one that did, and no send without a reservation followed it.
    pending: bool,
    /// Sends without a reservation so far (a report is complete if none followed it).
    unrecorded_total: u64,
}

impl SendLog {
    /// A send without a reservation at `now` (the store must be told); the log keeps `keep`
    /// of sends.
    pub(super) fn unrecorded(&mut self, now: Nanos, keep: Nanos) {
        self.unrecorded.record(now, keep);
        self.unrecorded_total += 1;
        self.pending = true;
    }

    /// A granted send at `now`; the log keeps `keep` of sends.
    pub(super) fn granted(&mut self, now: Nanos, keep: Nanos) {
        self.granted.record(now, keep);
    }

    /// The send logged at `old` left at `new` (the transport's report): later, never earlier.
    pub(super) fn restamp(&mut self, old: Nanos, new: Nanos) {
        if !self.unrecorded.restamp(old, new) {
            self.granted.restamp(old, new);
        }
    }

    /// The store may have missed what this log holds (an outage began).
    pub(super) fn mark_pending(&mut self) {
        self.pending = true;
    }

    /// What a report made now covers: pass it to [`SendLog::counted`].
    pub(super) fn mark(&self) -> u64 {
        self.unrecorded_total
    }

    /// The store counted the report made at `mark` (it answered a reservation that carried
    /// it): nothing is pending any more, unless a send without a reservation followed it (a
    /// fail-open process keeps sending while its probe is out).
    pub(super) fn counted(&mut self, mark: u64) {
        if mark == self.unrecorded_total {
            self.pending = false;
        }
    }

    /// Whether the next reservation carries the log: the store may lack some of it, and some
    /// of it is still within `keep` of `now` (an empty log has nothing to tell).
    pub(super) fn is_pending(&mut self, now: Nanos, keep: Nanos) -> bool {
        if self.pending {
            self.unrecorded.prune(now, keep);
            self.granted.prune(now, keep);
            self.pending = !(self.unrecorded.is_empty() && self.granted.is_empty());
        }
        self.pending
    }

    /// How long before `now` each send within `keep` was made, oldest first: (unrecorded,
    /// granted).
    pub(super) fn ages(&mut self, now: Nanos, keep: Nanos) -> (Vec<Nanos>, Vec<Nanos>) {
        self.unrecorded.prune(now, keep);
        self.granted.prune(now, keep);
        let ages = |log: &TimeLog| log.iter().map(|t| now.saturating_sub(t)).collect();
        (ages(&self.unrecorded), ages(&self.granted))
    }
}

/// Shared mode: what this process knows of the store: whether it is down and since when,
/// the outage's steps and the recovery after it, its live process count, and the margins
/// learned from its answers. (The reservations it still owes an answer for are the limiter's
/// `orphans`.)
#[derive(Debug)]
pub(super) struct Store {
    /// The store failed to answer; no reservation before `retry_at`, then
    /// one probe at a time.
    down: bool,
    retry_at: Nanos,
    /// Consecutive failures counted in the current outage (one per outage step, not one per
    /// reservation that was outstanding when the store went away).
    failures: u32,
    /// Failures counted since the limiter started (wrapping): a reservation emitted before the
    /// last one was counted fails with the same cause, so its `Unavailable` is not counted again.
    step: u32,
    /// How many live processes the store counted in its last answer (1 until it
    /// says). While the store is down, a fail-open process runs on this share of the limits.
    /// Kept as it was from the outage until its recovery ends.
    processes: u32,
    /// When the store was last marked down (the outage began for this process).
    down_since: Nanos,
    /// When the store last answered (granted or denied) a reservation.
    last_answer: Nanos,
    /// The longest a reservation waited for `Unavailable` in the current outage
    /// (the driver's timeout, when the store hung).
    outage_wait: Nanos,
    /// After an outage, until every process is back (see [`Recovery`]).
    recovery: Option<Recovery>,
    /// Round trips of recent reservations, for the margin passed to the store
    /// until the store's own clock is known ([`Store::learn_delay`]).
    reservation_latencies: Recent<Nanos>,
    reservation_margin: Nanos,
    /// For recent grants that told the store's clock, when the core handled the
    /// grant (this process's clock) less the store's clock at the grant: the delay from the
    /// store's count to the grant's handling, up to one constant (the clocks' offset).
    delays: Recent<i64>,
    delay_extremes: Option<(i64, i64)>,
    /// 1.5x the spread of `delays`, once 16 are in.
    margin: Option<Nanos>,
}

impl Default for Store {
    fn default() -> Self {
        Store {
            down: false,
            retry_at: 0,
            failures: 0,
            step: 0,
            processes: 1,
            down_since: 0,
            last_answer: 0,
            outage_wait: 0,
            recovery: None,
            reservation_latencies: Recent::default(),
            reservation_margin: 0,
            delays: Recent::default(),
            delay_extremes: None,
            margin: None,
        }
    }
}

impl Store {
    /// Whether the store is down (it failed to answer, and has not answered since).
    pub(super) fn is_down(&self) -> bool {
        self.down
    }

    /// While down: no reservation before then, then one probe at a time.
    pub(super) fn retry_at(&self) -> Nanos {
        self.retry_at
    }

    /// The outage step now: a reservation carries the step it was emitted in
    /// ([`Store::failed`]).
    pub(super) fn step(&self) -> u32 {
        self.step
    }

    /// The live processes the store counted in its last answer (1 until it says; kept from an
    /// outage until its recovery ends).
    pub(super) fn processes(&self) -> u32 {
        self.processes
    }

    /// When this process last marked the store down.
    pub(super) fn down_since(&self) -> Nanos {
        self.down_since
    }

    /// When the store last answered a reservation.
    pub(super) fn last_answer(&self) -> Nanos {
        self.last_answer
    }

    /// The longest a reservation waited for `Unavailable` in the current outage.
    pub(super) fn outage_wait(&self) -> Nanos {
        self.outage_wait
    }

    /// The recovery after an outage, while it lasts.
    pub(super) fn recovery(&self) -> Option<Recovery> {
        self.recovery
    }

    /// A reservation emitted at `since` was answered `Unavailable` at `now`: while the store
    /// is down, the longest such wait is the driver's timeout.
    pub(super) fn waited(&mut self, since: Nanos, now: Nanos) {
        if self.down {
            self.outage_wait = self.outage_wait.max(now.saturating_sub(since));
        }
    }

    /// The store did not answer a reservation emitted in outage step `step`, at `now`. One
    /// failure per step: the first marks the store down (or, for the probe, doubles the
    /// pause: `backoff(retry_base, failures)`, at most `retry_max`) and starts a new step;
    /// the others were out when it went away and change nothing (`None`). Returns whether it
    /// was down already.
    pub(super) fn failed(&mut self, now: Nanos, step: u32, (retry_base, retry_max): (Nanos, Nanos)) -> Option<bool> {
        if step != self.step {
            return None;
        }
        self.step = self.step.wrapping_add(1);
        self.failures = self.failures.saturating_add(1);
        self.retry_at = now.saturating_add(backoff(retry_base, self.failures, retry_max));
        let was_down = self.down;
        self.down = true;
        if !was_down {
            self.down_since = now;
            self.outage_wait = 0;
        }
        Some(was_down)
    }

    /// The store answered (granted or denied) a reservation: an outage ends. Returns whether
    /// it was down. (Then [`Store::heard`].)
    pub(super) fn back_up(&mut self) -> bool {
        let was_down = self.down;
        if was_down {
            self.down = false;
            self.failures = 0;
        }
        was_down
    }

    /// The store answered at `now` (see [`Store::last_answer`]).
    pub(super) fn heard(&mut self, now: Nanos) {
        self.last_answer = now;
    }

    /// The store counted `n` live processes (`0`, bad input, reads as 1). Kept as it was from
    /// an outage until its recovery ends: returns whether it was taken.
    pub(super) fn count_processes(&mut self, n: u32) -> bool {
        if self.recovery.is_some() {
            return false;
        }
        self.processes = n.max(1);
        true
    }

    /// Whether `n` processes back since the outage are every process the store counted before
    /// it (the recovery may end).
    pub(super) fn all_back(&self, n: u32) -> bool {
        self.recovery.is_some_and(|r| n >= r.processes)
    }

    /// After an outage, this process keeps to its share until `until` at the latest (see
    /// [`Recovery`]); alone (one process counted), or with `until` not after `now`, there is
    /// none. Returns whether a recovery began.
    pub(super) fn recover_until(&mut self, now: Nanos, until: Nanos) -> bool {
        if self.processes <= 1 || until <= now {
            self.recovery = None;
            return false;
        }
        self.recovery = Some(Recovery { processes: self.processes, until });
        true
    }

    /// The recovery ends: the whole limits apply again.
    pub(super) fn end_recovery(&mut self) {
        self.recovery = None;
    }

    /// The live processes whose limits this process shares now (see
    /// [`Limiter::outage_share`](super::Limiter::outage_share)): the store's count while it is down or recovering, else 1.
    pub(super) fn share(&self) -> u32 {
        if self.down || self.recovery.is_some() { self.processes } else { 1 }
    }

    /// The store's part of the margin passed to it (see [`Limiter::shared_margin`](super::Limiter::shared_margin)): the
    /// spread of the delays from its count to a grant's handling, or of reservation round
    /// trips until 16 grants told its clock.
    pub(super) fn own_margin(&self) -> Nanos {
        self.margin.unwrap_or(self.reservation_margin)
    }

    /// Like [`RoundTrips::learn`](super::global::RoundTrips::learn), for reservation round trips: 1.5x their spread once 16
    /// samples are in (the floor is already in the global margin).
    pub(super) fn learn_round_trip(&mut self, latency: Nanos) {
        if self.reservation_latencies.push(latency, latency, false) {
            self.reservation_margin = self.reservation_latencies.spread_margin();
        }
    }

    /// A grant that told the store's clock (`store_at`) reached the core at `now`: the delay
    /// from the store's count to the grant's handling (the answer's way back and the time it
    /// waited for the process, on a busy event loop most of it), up to the clocks' offset.
    /// Its spread is what the store must widen the global window by for this part of `d` in
    /// the bound of [`crate::shared`] ("Leases"); unlike a reservation's round trip it leaves
    /// out the wait before the store counted (the driver's queue, the store's other callers),
    /// which moves the count itself and does not bunch arrivals. 1.5x the spread once 16 are
    /// in, as for the global margin. The store's clock may be the wall clock: a step widens
    /// the spread (a larger margin, never a smaller one) until the samples from before it have
    /// left the last [`Recent::KEEP`].
    pub(super) fn learn_delay(&mut self, now: Nanos, store_at: Nanos) {
        let Ok(delay) = i64::try_from(i128::from(now) - i128::from(store_at)) else {
            return;
        };
        let widens = widen(&mut self.delay_extremes, delay);
        if self.delays.push(delay, 0, widens) {
            self.margin = Some(self.delays.spread_margin());
        }
    }
}

/// After a store outage, until every process the store counted before it has reserved again
/// (so has reported what it sent while the store could not count it), or until `until`: this
/// process keeps to its share of the limits, as while the store was down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Recovery {
    /// The live processes the store counted before the outage: the share, and how many must
    /// be back.
    processes: u32,
    /// It ends then at the latest.
    until: Nanos,
}

impl Recovery {
    /// It ends then at the latest.
    pub(super) fn until(&self) -> Nanos {
        self.until
    }
}

/// This process's part of `limit` when `share` processes split it (a fail-open store outage
/// in shared mode): `limit / share`, rounded down so that the parts add up to at most the
/// limit, but at least 1 so that every process keeps going (more than the limit together only
/// when the limit is below the process count). `0` (no limit) stays 0.
pub(super) fn share_of(limit: u32, share: u32) -> u32 {
    if share > 1 && limit > 0 { (limit / share).max(1) } else { limit }
}

#[cfg(test)]
mod tests {
    use super::{SendLog, Store, share_of};
    use crate::types::{MILLISECOND, SECOND};

    const RETRY: (u64, u64) = (100 * MILLISECOND, 5 * SECOND);

    #[test]
    fn one_failure_per_outage_step_and_the_probe_doubles_the_pause() {
        let mut store = Store::default();
        assert!(!store.is_down());
        let step = store.step();
        assert_eq!(store.failed(SECOND, step, RETRY), Some(false), "it was up");
        assert!(store.is_down());
        assert_eq!(store.retry_at(), SECOND + 100 * MILLISECOND);
        assert_eq!(store.down_since(), SECOND);
        // The other reservations out when it went away fail alike: the same failure.
        assert_eq!(store.failed(SECOND + 1, step, RETRY), None);
        assert_eq!(store.retry_at(), SECOND + 100 * MILLISECOND);
        // The probe (emitted in the new step) fails too: twice the pause, same outage.
        assert_eq!(store.failed(2 * SECOND, store.step(), RETRY), Some(true));
        assert_eq!(store.retry_at(), 2 * SECOND + 200 * MILLISECOND);
        assert_eq!(store.down_since(), SECOND, "the outage began at the first failure");
    }

    #[test]
    fn an_answer_ends_the_outage_and_resets_the_backoff() {
        let mut store = Store::default();
        store.failed(SECOND, store.step(), RETRY);
        store.waited(SECOND - 300 * MILLISECOND, SECOND);
        assert_eq!(store.outage_wait(), 300 * MILLISECOND, "the driver's timeout");
        assert!(store.back_up());
        assert!(!store.back_up(), "up already");
        store.heard(3 * SECOND);
        assert_eq!(store.last_answer(), 3 * SECOND);
        store.waited(0, 4 * SECOND);
        assert_eq!(store.outage_wait(), 300 * MILLISECOND, "not counted while up");
        // A new outage starts its backoff over.
        store.failed(5 * SECOND, store.step(), RETRY);
        assert_eq!(store.retry_at(), 5 * SECOND + 100 * MILLISECOND);
        assert_eq!(store.outage_wait(), 0);
    }

    #[test]
    fn the_share_holds_through_the_outage_and_its_recovery() {
        let mut store = Store::default();
        assert!(store.count_processes(0));
        assert_eq!(store.processes(), 1, "bad input reads as alone");
        assert!(store.count_processes(4));
        assert_eq!(store.share(), 1, "up: the store decides, no share");
        store.failed(SECOND, store.step(), RETRY);
        assert_eq!(store.share(), 4, "down: this process keeps to its quarter");
        assert!(store.back_up());
        assert!(store.recover_until(2 * SECOND, 10 * SECOND));
        assert_eq!(store.share(), 4, "recovering: still its quarter");
        assert!(!store.count_processes(2), "the count from before the outage is kept");
        assert!(!store.all_back(3));
        assert!(store.all_back(4));
        store.end_recovery();
        assert_eq!(store.share(), 1);
        assert!(store.count_processes(2));
    }

    #[test]
    fn alone_or_already_over_there_is_no_recovery() {
        let mut store = Store::default();
        assert!(!store.recover_until(0, SECOND), "one process: nothing to recover");
        store.count_processes(3);
        assert!(!store.recover_until(SECOND, SECOND), "ends at once");
        assert!(store.recovery().is_none());
        assert!(store.recover_until(SECOND, 2 * SECOND));
        assert_eq!(store.recovery().map(|r| r.until()), Some(2 * SECOND));
    }

    #[test]
    fn the_store_margin_comes_from_the_reservations_until_its_clock_is_known() {
        let mut store = Store::default();
        assert_eq!(store.own_margin(), 0);
        for i in 0..16u64 {
            store.learn_round_trip((10 + i) * MILLISECOND);
        }
        let from_trips = store.own_margin();
        assert!(from_trips > 0, "16 round trips spread 15 ms");
        for i in 0..16u64 {
            store.learn_delay(SECOND + i * SECOND, i * SECOND);
        }
        assert_eq!(store.own_margin(), 0, "every grant's delay alike: no spread");
    }

    #[test]
    fn shares_round_down_but_keep_one() {
        assert_eq!(share_of(10, 1), 10);
        assert_eq!(share_of(10, 3), 3);
        assert_eq!(share_of(2, 5), 1);
        assert_eq!(share_of(0, 5), 0, "no limit stays none");
    }

    #[test]
    fn a_send_log_is_pending_until_the_store_counts_a_complete_report() {
        let mut log = SendLog::default();
        assert!(!log.is_pending(0, SECOND), "an empty log has nothing to tell");
        log.unrecorded(10, SECOND);
        let mark = log.mark();
        log.granted(20, SECOND);
        assert!(log.is_pending(30, SECOND));
        assert_eq!(log.ages(30, SECOND), (vec![20], vec![10]));
        log.unrecorded(40, SECOND);
        log.counted(mark);
        assert!(log.is_pending(50, SECOND), "a send without a reservation followed the report");
        log.counted(log.mark());
        assert!(!log.is_pending(50, SECOND));
        // An outage: the store may have lost it all again, while it is within the span.
        log.mark_pending();
        assert!(log.is_pending(50, SECOND));
        assert!(!log.is_pending(2 * SECOND, SECOND), "all of it is over: nothing to tell");
    }
}
