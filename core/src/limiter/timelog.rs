//! One rule written once: a log of instants in time order, each of which counts for a `span`
//! after it (an entry at `t` is within the span at `now` while `t + span > now`). The global
//! window's send log, a sliding bucket's send log, the sends a store may not count after an
//! outage and the invalid-request budget are each one (the last two with their own spans; the
//! budget keeps ends, so its span is 0).
//!
//! A leaf: it names nothing of the limiter.

use std::collections::VecDeque;

use crate::types::Nanos;

/// Instants in time order (equal ones in the order they came).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct TimeLog(VecDeque<Nanos>);

impl TimeLog {
    /// An empty log.
    pub(super) const fn new() -> Self {
        TimeLog(VecDeque::new())
    }

    /// Whether the entry at `t` is over at `now`, counted for `span`.
    fn over(t: Nanos, now: Nanos, span: Nanos) -> bool {
        t.saturating_add(span) <= now
    }

    /// Drops the entries over at `now` (each counted for `span`).
    pub(super) fn prune(&mut self, now: Nanos, span: Nanos) {
        while self.0.front().is_some_and(|&t| Self::over(t, now, span)) {
            self.0.pop_front();
        }
    }

    /// How many entries are within `span` of `now` (a read: the ones over are counted out,
    /// not dropped).
    pub(super) fn within(&self, now: Nanos, span: Nanos) -> usize {
        self.0.len() - self.0.partition_point(|&t| Self::over(t, now, span))
    }

    /// Adds `t`, after the entries equal to it (at the end when it is the latest).
    pub(super) fn insert(&mut self, t: Nanos) {
        if self.0.back().is_none_or(|&last| last <= t) {
            self.0.push_back(t);
        } else {
            let at = self.0.partition_point(|&x| x <= t);
            self.0.insert(at, t);
        }
    }

    /// Drops what is over at `now` (each counted for `span`), then adds `now`.
    pub(super) fn record(&mut self, now: Nanos, span: Nanos) {
        self.prune(now, span);
        self.insert(now);
    }

    /// Removes one entry equal to `t` (the last such); whether there was one.
    pub(super) fn take(&mut self, t: Nanos) -> bool {
        match self.0.iter().rposition(|&x| x == t) {
            Some(at) => {
                self.0.remove(at);
                true
            }
            None => false,
        }
    }

    /// Moves one entry from `old` to `new`, keeping the order; whether there was one at `old`.
    pub(super) fn restamp(&mut self, old: Nanos, new: Nanos) -> bool {
        let found = self.take(old);
        if found {
            self.insert(new);
        }
        found
    }

    /// Keeps only the latest `cap` entries.
    pub(super) fn keep_latest(&mut self, cap: usize) {
        while self.0.len() > cap {
            self.0.pop_front();
        }
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `i`th entry, oldest first.
    pub(super) fn get(&self, i: usize) -> Option<Nanos> {
        self.0.get(i).copied()
    }

    /// The oldest entry.
    pub(super) fn first(&self) -> Option<Nanos> {
        self.0.front().copied()
    }

    /// The entries, oldest first.
    pub(super) fn iter(&self) -> impl ExactSizeIterator<Item = Nanos> + '_ {
        self.0.iter().copied()
    }
}

impl FromIterator<Nanos> for TimeLog {
    /// A log of `instants`, put in time order.
    fn from_iter<I: IntoIterator<Item = Nanos>>(instants: I) -> Self {
        let mut log: Vec<Nanos> = instants.into_iter().collect();
        log.sort_unstable();
        TimeLog(log.into())
    }
}

#[cfg(test)]
mod tests {
    use super::TimeLog;

    fn log(instants: &[u64]) -> TimeLog {
        instants.iter().copied().collect()
    }

    fn all(l: &TimeLog) -> Vec<u64> {
        l.iter().collect()
    }

    #[test]
    fn an_entry_counts_for_its_span_and_not_at_its_end() {
        let mut l = log(&[10, 20, 30]);
        assert_eq!(l.within(29, 10), 2, "10 ended at 20; 20 ends at 30");
        assert_eq!(l.within(30, 10), 1, "20's span is over at 30 itself");
        l.prune(30, 10);
        assert_eq!(all(&l), [30]);
        // A span of 0: the entries are ends, over once reached.
        let mut ends = log(&[5, 7]);
        ends.prune(5, 0);
        assert_eq!(all(&ends), [7]);
    }

    #[test]
    fn within_reads_without_dropping() {
        let l = log(&[1, 2, 3]);
        assert_eq!(l.within(100, 10), 0);
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn insert_keeps_time_order_and_equal_entries_in_arrival_order() {
        let mut l = log(&[10, 30]);
        l.insert(20);
        l.insert(30);
        l.insert(40);
        l.insert(0);
        assert_eq!(all(&l), [0, 10, 20, 30, 30, 40]);
        assert_eq!(l.first(), Some(0));
        assert_eq!(l.get(2), Some(20));
    }

    #[test]
    fn record_prunes_then_adds_now() {
        let mut l = log(&[1, 5, 9]);
        l.record(12, 5);
        assert_eq!(all(&l), [9, 12], "1 and 5 are over at 12 with a span of 5");
    }

    #[test]
    fn take_and_restamp_move_one_entry() {
        let mut l = log(&[1, 4, 4, 8]);
        assert!(l.take(4));
        assert_eq!(all(&l), [1, 4, 8]);
        assert!(!l.take(5), "no entry at 5");
        assert!(l.restamp(1, 6));
        assert_eq!(all(&l), [4, 6, 8]);
        assert!(!l.restamp(2, 3));
        assert_eq!(all(&l), [4, 6, 8], "nothing moved from where nothing was");
    }

    #[test]
    fn keep_latest_drops_the_oldest() {
        let mut l = log(&[1, 2, 3, 4]);
        l.keep_latest(2);
        assert_eq!(all(&l), [3, 4]);
        l.keep_latest(10);
        assert_eq!(l.len(), 2);
        assert!(!l.is_empty());
    }

    #[test]
    fn far_ends_saturate_rather_than_wrap() {
        let mut l = log(&[u64::MAX - 1]);
        l.prune(u64::MAX - 1, u64::MAX);
        assert_eq!(l.len(), 1, "t + span saturates at the end of time, which is not reached");
    }
}
