//! The limiter's wake-ups: one heap of `(time, timer)` entries, re-armed freely and never
//! removed; an entry whose owner has moved on since (a queue re-armed, a request sent, a gate
//! reopened) is stale. One liveness rule tells, for firing ([`Timers::pop_due`]) and for the
//! `WaitUntil` the driver is given ([`Timers::next_live`]) alike: the heap's own for the
//! host-wide gates' wake-up, and for every other timer the rule its caller passes (the
//! limiter's `timer_live`, which reads the owners).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::types::{Nanos, RequestId};

use super::{Iid, Qid, Uid};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Timer {
    /// Re-evaluate a queue (bucket reset, retry backoff, sub-limit end). Carries the queue uid.
    Queue(Qid, Uid),
    /// An identity's global window has room again, or its global pause ends.
    Identity(Iid),
    /// A request's deadline.
    Deadline(RequestId),
    /// The edge ban or the invalid-request budget lets requests through again.
    Gate,
    /// Shared mode: the recovery after a store outage ends at the latest.
    Recovery,
}

/// The heap of wake-ups, earliest first, and the registered wake-up of the host-wide gates.
#[derive(Debug, Default)]
pub(super) struct Timers {
    heap: BinaryHeap<Reverse<(Nanos, Timer)>>,
    /// The registered wake-up for the host-wide gates.
    gate: Option<Nanos>,
}

impl Timers {
    /// Wakes `timer` at `t` (an entry of its own: an earlier one for it goes stale).
    pub(super) fn arm(&mut self, t: Nanos, timer: Timer) {
        self.heap.push(Reverse((t, timer)));
    }

    /// Wakes the host-wide gates at `t` (once for each new time: the entry of an earlier one
    /// goes stale).
    pub(super) fn arm_gate(&mut self, t: Nanos) {
        if self.gate != Some(t) {
            self.gate = Some(t);
            self.arm(t, Timer::Gate);
        }
    }

    /// Whether the entry `(t, timer)` stands: the gates' by their registered wake-up, every
    /// other by `live`.
    fn is_live(&self, t: Nanos, timer: Timer, live: &impl Fn(Nanos, Timer) -> bool) -> bool {
        match timer {
            Timer::Gate => self.gate == Some(t),
            _ => live(t, timer),
        }
    }

    /// The earliest entry, live or not.
    fn peek(&self) -> Option<(Nanos, Timer)> {
        self.heap.peek().map(|&Reverse(entry)| entry)
    }

    /// The time of the next live entry, dropping the stale ones ahead of it.
    pub(super) fn next_live(&mut self, live: impl Fn(Nanos, Timer) -> bool) -> Option<Nanos> {
        while let Some((t, timer)) = self.peek() {
            if self.is_live(t, timer, &live) {
                return Some(t);
            }
            self.heap.pop();
        }
        None
    }

    /// Takes the earliest live entry due by `now` (the stale ones ahead of it dropped), in
    /// time order; the gates' entry unregisters their wake-up.
    pub(super) fn pop_due(&mut self, now: Nanos, live: impl Fn(Nanos, Timer) -> bool) -> Option<(Nanos, Timer)> {
        while let Some((t, timer)) = self.peek() {
            if t > now {
                return None;
            }
            self.heap.pop();
            if self.is_live(t, timer, &live) {
                if timer == Timer::Gate {
                    self.gate = None;
                }
                return Some((t, timer));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{Timer, Timers};

    #[test]
    fn due_entries_come_in_time_order_and_later_ones_wait() {
        let mut timers = Timers::default();
        timers.arm(30, Timer::Deadline(3));
        timers.arm(10, Timer::Deadline(1));
        timers.arm(20, Timer::Recovery);
        let all = |_, _| true;
        assert_eq!(timers.pop_due(25, all), Some((10, Timer::Deadline(1))));
        assert_eq!(timers.pop_due(25, all), Some((20, Timer::Recovery)));
        assert_eq!(timers.pop_due(25, all), None, "30 is not due at 25");
        assert_eq!(timers.next_live(all), Some(30));
    }

    #[test]
    fn stale_entries_are_dropped_for_firing_and_for_the_next_wake_up_alike() {
        let mut timers = Timers::default();
        timers.arm(10, Timer::Identity(0));
        timers.arm(20, Timer::Identity(1));
        // Identity 0 has moved on (re-armed elsewhere or woken already).
        let live = |_, timer| timer != Timer::Identity(0);
        assert_eq!(timers.next_live(live), Some(20));
        assert_eq!(timers.pop_due(100, live), Some((20, Timer::Identity(1))));
        assert_eq!(timers.next_live(live), None);
    }

    #[test]
    fn the_gates_wake_up_is_registered_once_and_its_stale_entries_ignored() {
        let mut timers = Timers::default();
        let none = |_, _| false;
        timers.arm_gate(50);
        timers.arm_gate(50);
        assert_eq!(timers.heap.len(), 1, "the same wake-up is armed once");
        timers.arm_gate(40);
        // The entry at 50 is stale: the gates wake at 40 now.
        assert_eq!(timers.next_live(none), Some(40));
        assert_eq!(timers.pop_due(45, none), Some((40, Timer::Gate)));
        assert_eq!(timers.gate, None, "fired: the gates have no wake-up registered");
        assert_eq!(timers.pop_due(100, none), None, "50 was stale");
        assert!(timers.heap.is_empty());
    }

    #[test]
    fn an_entry_due_exactly_now_fires() {
        let mut timers = Timers::default();
        timers.arm(7, Timer::Queue(2, 9));
        assert_eq!(timers.pop_due(6, |_, _| true), None);
        assert_eq!(timers.pop_due(7, |_, _| true), Some((7, Timer::Queue(2, 9))));
    }
}

