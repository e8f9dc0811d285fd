//! Shared mode after a store outage: what a process keeps so that the store can catch up
//! ([`SendLog`]), and how long it keeps to its share of the limits ([`Recovery`]). See
//! [`crate::shared`], "Through an outage".

use crate::types::Nanos;

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

/// After a store outage, until every process the store counted before it has reserved again
/// (so has reported what it sent while the store could not count it), or until `until`: this
/// process keeps to its share of the limits, as while the store was down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Recovery {
    /// The live processes the store counted before the outage: the share, and how many must
    /// be back.
    pub(super) processes: u32,
    /// It ends then at the latest.
    pub(super) until: Nanos,
}

/// This process's part of `limit` when `share` processes split it (a fail-open store outage
/// in shared mode): `limit / share`, rounded down so that the parts add up to at most the
/// limit, but at least 1 so that every process keeps going (more than the limit together only
/// when the limit is below the process count). `0` (no limit) stays 0.
pub(super) fn share_of(limit: u32, share: u32) -> u32 {
    if share > 1 && limit > 0 { (limit / share).max(1) } else { limit }
}
