//! The limiter's wake-ups: one heap of `(time, timer)` entries, re-armed freely and never
//! removed; an entry whose owner has moved on since (a queue re-armed, a request sent, a gate
//! reopened) is stale. [`Limiter::timer_live`] is the one rule that tells, for firing and for
//! the `WaitUntil` the driver is given alike.

use super::*;

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

    /// The earliest entry, live or not.
    fn peek(&self) -> Option<(Nanos, Timer)> {
        self.heap.peek().map(|&Reverse(entry)| entry)
    }

    fn pop(&mut self) {
        self.heap.pop();
    }
}

impl Limiter {
    /// Whether the entry `(t, timer)` still stands for a wake-up its owner wants: the one rule
    /// for firing it and for reporting it as the next `WaitUntil`.
    fn timer_live(&self, t: Nanos, timer: Timer) -> bool {
        match timer {
            Timer::Queue(qid, uid) => {
                self.queues.get(qid).and_then(Option::as_ref).is_some_and(|q| q.uid == uid && q.wake_at() == Some(t))
            }
            Timer::Identity(iid) => self.identities[iid].wake_at == Some(t),
            // Armed just after the deadline: sending at it is allowed.
            Timer::Deadline(id) => self.requests.get(&id).is_some_and(|r| {
                r.state == Phase::Queued && r.deadline.map(|d| d.saturating_add(1)) == Some(t)
            }),
            Timer::Gate => self.timers.gate == Some(t),
            Timer::Recovery => self.store.recovery.is_some_and(|r| r.until == t),
        }
    }

    /// Fires the live timers due by `now`, in time order.
    pub(super) fn fire_timers(&mut self, now: Nanos) {
        while let Some((t, timer)) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            if !self.timer_live(t, timer) {
                continue;
            }
            match timer {
                Timer::Queue(qid, _) => {
                    self.queue_mut(qid).set_wake_at(None);
                    self.dirty.push(qid);
                }
                Timer::Identity(iid) => {
                    self.identities[iid].wake_at = None;
                    self.mark_identity_ready(iid);
                }
                Timer::Deadline(id) => {
                    let req = &self.requests[&id];
                    let Some(deadline) = req.deadline else { continue };
                    let (limit, enqueued_at, own_deadline) = (req.limit, req.enqueued_at, req.own_deadline());
                    // A deferral carries when it could go now: still queued past its budget
                    // (waiting on an answer, say), it is handed back with a fresh prediction.
                    let predicted = match limit {
                        Limit::Defer => Some(self.predict_queued(t, id)),
                        Limit::Deadline | Limit::MaxWait => None,
                    };
                    let reason = limit_reason(limit, own_deadline, enqueued_at, deadline, predicted, t);
                    self.unqueue(id);
                    self.fail(id, reason);
                }
                Timer::Gate => self.timers.gate = None,
                Timer::Recovery => self.end_recovery(),
            }
        }
    }

    /// The time of the next live timer, dropping the stale ones ahead of it.
    pub(super) fn next_timer(&mut self) -> Option<Nanos> {
        while let Some((t, timer)) = self.timers.peek() {
            if self.timer_live(t, timer) {
                return Some(t);
            }
            self.timers.pop();
        }
        None
    }

    /// Fails `id` once time passes its deadline `d` (a send at `d` itself is still allowed).
    pub(super) fn arm_deadline(&mut self, id: RequestId, d: Nanos) {
        self.timers.arm(d.saturating_add(1), Timer::Deadline(id));
    }

    /// Wakes the host-wide gates at `t`.
    pub(super) fn arm_gate(&mut self, t: Nanos) {
        if self.timers.gate != Some(t) {
            self.timers.gate = Some(t);
            self.timers.arm(t, Timer::Gate);
        }
    }

    /// Wakes the identity's queues waiting on its global budget at `t`.
    pub(super) fn wake_identity_at(&mut self, iid: Iid, t: Nanos) {
        let ident = &mut self.identities[iid];
        if ident.wake_at.is_none_or(|w| w != t) {
            ident.wake_at = Some(t);
            self.timers.arm(t, Timer::Identity(iid));
        }
    }
}
