//! Predictions, and the budgets they are checked against (a request's deadline, `max_wait`,
//! `defer_after`): when a request at a given place in its queue is expected to be sent, from
//! the host-wide holds, its queue's sub-limits, bucket and cost budgets, and its identity's
//! global budget. [`Limiter::predict`], the deadline, `max_wait` and `defer_after` checks all
//! ask [`Limiter::predict_send`] or [`Limiter::predict_behind`].

use crate::types::{FailReason, Nanos};

use super::Req;
use super::queues::Queue;

/// The budget a request's effective deadline comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    /// The request's own deadline (or none at all).
    Deadline,
    /// `enqueued + max_wait`.
    MaxWait,
    /// `enqueued + min(defer_after, max_wait)` (the request's own deadline, later, if any, is
    /// its `own_deadline`).
    Defer,
}

/// The request's effective deadline and the budget it comes from: its own deadline,
/// `now + max_wait`, or, when it has a `defer_after` (its own or the config's), `now +
/// min(defer_after, max_wait)` as a deferral budget. The earliest wins; on a tie the
/// request's own deadline (a send past it is no use, so `deadline_exceeded` is the honest
/// answer, not `deferred`).
pub(super) fn effective_deadline(
    now: Nanos,
    own: Option<Nanos>,
    max_wait: Option<Nanos>,
    defer_after: Option<Nanos>,
) -> (Option<Nanos>, Limit) {
    let relative = match (defer_after, max_wait) {
        (Some(d), Some(m)) => Some((now.saturating_add(d.min(m)), Limit::Defer)),
        (Some(d), None) => Some((now.saturating_add(d), Limit::Defer)),
        (None, Some(m)) => Some((now.saturating_add(m), Limit::MaxWait)),
        (None, None) => None,
    };
    match (own, relative) {
        (Some(d), Some((r, limit))) if r < d => (Some(r), limit),
        (Some(d), _) => (Some(d), Limit::Deadline),
        (None, Some((r, limit))) => (Some(r), limit),
        (None, None) => (None, Limit::Deadline),
    }
}

/// Why a request with budget `limit` fails: `predicted` is its predicted send time, if
/// known, and `now` the moment it fails. A deferral whose predicted send time is past the
/// request's own deadline (`own_deadline`) fails as `deadline_exceeded` (a retry then is no use).
pub(super) fn limit_reason(
    limit: Limit,
    own_deadline: Option<Nanos>,
    enqueued_at: Nanos,
    deadline: Nanos,
    predicted: Option<Nanos>,
    now: Nanos,
) -> FailReason {
    match limit {
        Limit::Deadline => FailReason::DeadlineExceeded { predicted_send_at: predicted },
        Limit::MaxWait => FailReason::MaxWaitExceeded {
            predicted_wait: predicted.unwrap_or(deadline).saturating_sub(enqueued_at),
        },
        Limit::Defer => {
            let retry_at = predicted.unwrap_or(now).max(now);
            match own_deadline {
                Some(d) if retry_at > d => FailReason::DeadlineExceeded { predicted_send_at: Some(retry_at) },
                _ => FailReason::Deferred { retry_at },
            }
        }
    }
}

/// A request's place in its queue, as a prediction sees it.
pub(super) struct Place<'a> {
    pub(super) route_key: &'a str,
    /// Its sub-limit key ([`Req::sub_key`]).
    pub(super) sub_key: Option<&'a str>,
    pub(super) exempt: bool,
    /// How many requests of its queue are ahead of it.
    pub(super) position: usize,
    /// Not before this (its retry backoff).
    pub(super) not_before: Nanos,
}

impl<'a> Place<'a> {
    /// The place of the queued request `r`, `position` requests behind its queue's head.
    pub(super) fn of(r: &'a Req, position: usize) -> Self {
        let (route_key, sub_key) = (&r.route_key, r.sub_key());
        Place { route_key, sub_key, exempt: r.exempt(), position, not_before: r.not_before }
    }

    /// The place a new request would take: behind every request queued in `q`.
    pub(super) fn last(q: &Queue, route_key: &'a str, sub_key: Option<&'a str>, exempt: bool) -> Self {
        Place { route_key, sub_key, exempt, position: q.pending.len(), not_before: 0 }
    }

    /// Whether a sub-limit hold on `key` holds it (see [`Req::held_by`]).
    pub(super) fn held_by(&self, key: &str) -> bool {
        key == self.route_key || Some(key) == self.sub_key
    }
}
