//! Predictions, and the budgets they are checked against (a request's deadline, `max_wait`,
//! `defer_after`): when a request at a given place in its queue is expected to be sent, from
//! the host-wide holds, its queue's sub-limits, bucket and cost budgets, and its identity's
//! global budget. [`Limiter::predict`], the deadline, `max_wait` and `defer_after` checks all
//! ask [`Limiter::predict_send`] or [`Limiter::predict_behind`].

use super::*;

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
    fn held_by(&self, key: &str) -> bool {
        key == self.route_key || Some(key) == self.sub_key
    }
}

impl Limiter {
    /// When a request at `place` in queue `qid`, costing `costs`, is expected to be sent, the
    /// charges of the requests ahead of it counted.
    pub(super) fn predict_send<N: AsRef<str>>(
        &self,
        now: Nanos,
        qid: Qid,
        place: &Place<'_>,
        costs: &[(N, u64)],
    ) -> Nanos {
        let ahead = self.charges_ahead(now, qid, place.position);
        self.predict_behind(now, qid, place, &ahead, costs)
    }

    /// [`Limiter::predict_send`] with the charges ahead already packed (`ahead`, see
    /// [`Limiter::charges_ahead`]).
    pub(super) fn predict_behind<N: AsRef<str>>(
        &self,
        now: Nanos,
        qid: Qid,
        place: &Place<'_>,
        ahead: &[Option<Pack>],
        costs: &[(N, u64)],
    ) -> Nanos {
        let t = self.predict_position(now, qid, place).max(place.not_before);
        self.cost_wait(now, qid, ahead, costs).map_or(t, |c| t.max(c))
    }

    /// The predicted send time of the queued request `id` at its place in its queue, never
    /// before its own backoff ends.
    pub(super) fn predict_queued(&self, now: Nanos, id: RequestId) -> Nanos {
        let r = &self.requests[&id];
        let q = self.queue(r.qid);
        let position = q.pending.iter().position(|&p| p == id).unwrap_or(q.pending.len());
        self.predict_send(now, r.qid, &Place::of(r, position), r.costs())
    }

    /// When the request at `place` in queue `qid` is expected to be sent, its costs aside.
    fn predict_position(&self, now: Nanos, qid: Qid, place: &Place<'_>) -> Nanos {
        let position = place.position;
        let q = self.queue(qid);
        let mut t = now.max(self.host_hold()).max(q.rare.shared_until());
        // A sub-limit holds this route (and major parameter), or this class of it, whatever
        // the bucket says.
        for &(ref k, until) in q.rare.sub_limits() {
            if place.held_by(k) {
                t = t.max(until);
            }
        }
        if self.config.invalid_request_limit > 0
            && let Some(first_end) = self.invalid.full_until(self.config.invalid_request_stop_at)
        {
            t = t.max(first_end);
        }
        let bucket = (self.trips.lead(), self.outage_share());
        if let Some(at) = q.bucket.send_time(now, position, q.in_flight.len(), bucket, self.config.global_window) {
            t = t.max(at);
        }
        if !place.exempt {
            t = t.max(self.global_estimate(now, q.key.identity, position));
        }
        t
    }

    /// The margin estimates in dimension `name` are charged at (see `costs`).
    pub(super) fn margin(&self, name: &str) -> f64 {
        costs::margin_of(&self.ratios, name)
    }

    /// Queues what `costs` would be charged in `packs` (one per budget of queue `qid`, made on
    /// first use; see [`costs::Pack`]).
    pub(super) fn add_charges<N: AsRef<str>>(&self, now: Nanos, qid: Qid, costs: &[(N, u64)], packs: &mut Vec<Option<Pack>>) {
        let budgets = self.queue(qid).rare.budgets();
        if budgets.is_empty() || costs.is_empty() {
            return;
        }
        if packs.len() != budgets.len() {
            *packs = budgets.iter().map(|b| b.pack(now)).collect();
        }
        for (b, pack) in budgets.iter().zip(packs.iter_mut()) {
            if let (Some((_, estimate)), Some(pack)) = (costs.iter().find(|(n, _)| n.as_ref() == &*b.name), pack) {
                b.pack_add(pack, b.charge_of(*estimate, self.margin(&b.name)));
            }
        }
    }

    /// The first `position` requests queued in `qid`, packed into its budgets.
    pub(super) fn charges_ahead(&self, now: Nanos, qid: Qid, position: usize) -> Vec<Option<Pack>> {
        let mut packs = Vec::new();
        if !self.queue(qid).rare.budgets().is_empty() {
            for id in self.queue(qid).pending.iter().take(position) {
                self.add_charges(now, qid, self.requests[id].costs(), &mut packs);
            }
        }
        packs
    }

    /// When a request costing `own`, behind the requests packed in `ahead`, can go as far as
    /// the budgets of `qid` tell: `None` when they do not hold it.
    pub(super) fn cost_wait<N: AsRef<str>>(&self, now: Nanos, qid: Qid, ahead: &[Option<Pack>], own: &[(N, u64)]) -> Option<Nanos> {
        let mut packs = ahead.to_vec();
        self.add_charges(now, qid, own, &mut packs);
        let budgets = self.queue(qid).rare.budgets();
        let mut wait: Option<Nanos> = None;
        for (b, pack) in budgets.iter().zip(&packs) {
            if !own.iter().any(|(n, _)| n.as_ref() == &*b.name) {
                continue;
            }
            if let Some(t) = pack.as_ref().and_then(|p| b.pack_time(now, p)) {
                wait = Some(wait.map_or(t, |w| w.max(t)));
            }
        }
        wait
    }
}
