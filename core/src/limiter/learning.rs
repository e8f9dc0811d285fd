//! What the limiter learns from answers: routes mapped to buckets and the queues that move
//! with them, 429s by scope, costs settled, the invalid-request budget, and the latencies the
//! margins come from. A bucket's window from its headers is `bucket.rs`'s
//! (`Limiter::apply_headers`).

use super::*;

impl Limiter {
    /// Maps the request's route to `bucket` and moves its queue when the mapping is new or
    /// changed. Returns the queue the request now belongs to, and whether the answer's bucket
    /// is older news than the route's (its headers then describe another bucket than the
    /// queue's). `flight`: how the answered request was sent.
    pub(super) fn learn_bucket(&mut self, id: RequestId, bucket: Option<&str>, flight: Flight) -> (Qid, bool) {
        let qid = self.req(id).qid;
        let Some(hash) = bucket else { return (qid, false) };
        if matches!(self.queue(qid).key.bucket(), BucketId::Hash(h) if **h == *hash) {
            return (qid, false); // the common case: nothing new, nothing to allocate
        }
        let (iid, route_key, major) = {
            let r = self.req(id);
            (self.iid_of(r), r.route_key.to_string(), self.queue(qid).key.major.clone())
        };
        let previous = self.routes.buckets.get(&route_key).cloned();
        // The route's own copy of the id when it is the same, so that its queues share one.
        let name = previous.clone().filter(|old| **old == *hash).unwrap_or_else(|| hash.into());
        let target_key = QueueKey::new(iid, BucketId::Hash(name.clone()), major);
        if previous.as_deref().is_some_and(|old| old != hash)
            && self.routes.taught_at.get(&route_key).is_some_and(|&t| flight.sent_at <= t)
        {
            // A late answer to a request sent before (or with) the one that taught the route's
            // current bucket (the server changed it meanwhile): it describes the bucket it was
            // counted in, not the route's. The route keeps its mapping and the request its
            // queue (a retry goes where the route goes now); its bucket headers are not taken.
            return (qid, true);
        }
        if previous.is_none() {
            self.routes.remember(route_key.clone(), name, self.config.max_routes);
        } else {
            self.routes.note_hash(&name, self.config.max_routes);
            self.routes.buckets.insert(route_key.clone(), name);
        }
        if previous.as_deref() != Some(hash) {
            self.routes.taught_at.insert(route_key.clone(), flight.sent_at);
            self.outputs.push_back(Output::Observe(Observation::BucketLearned {
                route: route_key.clone(),
                bucket: hash.to_string(),
            }));
        }
        if previous.is_none() {
            self.adopt_for_group(&route_key, hash);
        }
        // An unknown route's queue becomes the bucket's queue, state and all. A learned
        // bucket's queue whose route the server moved to another bucket stays where it is,
        // with its state: it counts what the old bucket counted, for every route still in it
        // (other routes of that hash, or requests that were counted there). Only this route's
        // requests move.
        let from_route_queue = matches!(self.queue(qid).key.bucket(), BucketId::Route(_));
        if let Some(old) = previous.filter(|old| &**old != hash) {
            self.routes.renamed.insert(route_key.clone(), old);
        }
        let target = match self.queues.find(&target_key) {
            None if from_route_queue => {
                // Rename: the route's queue becomes the bucket's queue, state and all.
                let old_key = self.queues.rekey(qid, target_key);
                self.routes.queue_closed(&old_key);
                qid
            }
            _ => {
                let target = self.queue_for(target_key);
                if !from_route_queue {
                    self.forget_slot(qid, flight);
                    // Until the new bucket shows its own window, the old one's length is the
                    // best estimate there is (Discord keeps a route's limit when it renames its
                    // bucket): far better than one guessed from a 429 or a 5xx.
                    let old_period = self.queue(qid).bucket.period();
                    self.queue_mut(target).bucket.assume_period(old_period);
                }
                self.move_route(qid, target, if from_route_queue { None } else { Some(&route_key) });
                // The answered request is in neither list that moved; it follows its route.
                self.req_mut(id).qid = target;
                target
            }
        };
        self.adopt_hash_period(target);
        (target, false)
    }

    /// The answered request was counted in another bucket than the one of queue `qid`, where
    /// it took a slot: that bucket did not count it, so the slot (and the window it opened, if
    /// it was the window's only send) is given back. Its global token stays spent.
    pub(super) fn forget_slot(&mut self, qid: Qid, flight: Flight) {
        self.give_back_slot(qid, flight);
        self.undo_window_start(qid, flight);
    }

    /// A queue that just took a learned bucket id (renamed from an unknown route's queue, or
    /// given that queue's state) starts from the longest window learned for the hash, like a
    /// queue created for it (see `hash_periods`).
    pub(super) fn adopt_hash_period(&mut self, qid: Qid) {
        let BucketId::Hash(hash) = self.queue(qid).key.bucket() else { return };
        let Some(&period) = self.routes.hash_periods.get(&**hash) else { return };
        self.queue_mut(qid).bucket.lengthen_period(period);
    }

    /// The first bucket learned for a route of a prior group is the group's: its routes not
    /// learned yet map to it too, so the group keeps one queue (see [`crate::prior`]).
    pub(super) fn adopt_for_group(&mut self, route_key: &str, hash: &str) {
        let group = self.routes.prior.group(route_key);
        if group.is_empty() {
            return;
        }
        let adopt: Vec<String> =
            group.iter().filter(|r| *r != route_key && !self.routes.buckets.contains_key(*r)).cloned().collect();
        let name: routes::Name = hash.into();
        for route in adopt {
            self.routes.remember(route.clone(), name.clone(), self.config.max_routes);
            self.outputs.push_back(Output::Observe(Observation::BucketLearned { route, bucket: hash.to_string() }));
        }
    }

    /// Moves the requests of `route` (all of them when `None`) from queue `from` to `to`,
    /// merging the pending lists by enqueue order.
    pub(super) fn move_route(&mut self, from: Qid, to: Qid, route: Option<&str>) {
        if from == to {
            return;
        }
        self.clear_slot(from);
        self.clear_slot(to);
        let moves = |r: &Req| route.is_none_or(|k| *r.route_key == *k);
        let src = self.queue_mut(from);
        let pending = src.pending.take_all();
        let in_flight = src.in_flight.take_all();
        let split = |ids: Vec<RequestId>| -> (Vec<RequestId>, Vec<RequestId>) {
            ids.into_iter().partition(|id| moves(&self.requests[id]))
        };
        let (moved_pending, kept_pending) = split(pending);
        let (moved_flight, kept_flight) = split(in_flight);
        let src = self.queue_mut(from);
        src.pending = kept_pending.into();
        src.in_flight = kept_flight.into();
        // Ghosts follow their route: they may have been counted by the bucket it moves to.
        let moved_ghosts = src.bucket.take_ghosts(route);
        self.queue_mut(to).bucket.add_ghosts(moved_ghosts);
        for &id in moved_pending.iter().chain(moved_flight.iter()) {
            self.req_mut(id).qid = to;
        }
        // Merge by enqueue order.
        let mut merged = self.queue_mut(to).pending.take_all();
        merged.extend(moved_pending);
        merged.sort_unstable();
        let dst = self.queue_mut(to);
        dst.pending = merged.into();
        dst.in_flight.extend(moved_flight);
        if route.is_none() {
            // The whole unknown-route queue joins a bucket that already has state: its
            // sends count against that bucket.
            let src_bucket = std::mem::take(&mut self.queue_mut(from).bucket);
            let dst = self.queue_mut(to);
            if !dst.bucket.is_known() {
                dst.bucket = src_bucket;
            }
        }
        // Requests in flight now belong to the destination's current window (window epochs
        // are per bucket, so the old numbers mean nothing there).
        let epoch = self.queue(to).bucket.epoch();
        let in_flight: Vec<RequestId> = self.queue(to).in_flight.iter().copied().collect();
        for id in in_flight {
            if let Some(ReqState::InFlight(Flight { window_epoch, .. }) | ReqState::Reserving { window_epoch, .. }) =
                self.taken.get_mut(&id)
            {
                *window_epoch = epoch;
            }
        }
        self.mark_dirty(from);
        self.mark_dirty(to);
        self.note_idle(from);
    }

    pub(super) fn on_rate_limited(
        &mut self,
        now: Nanos,
        id: RequestId,
        qid: Qid,
        info: &RateLimitInfo,
        response: &Response<'_>,
        flight: Flight,
    ) -> Disposition {
        let scope = refusal_scope(info, response);
        let hint = info.retry_after.or(if info.remaining == Some(0) { info.reset_after } else { None });
        // At least the shortest wait after a 429, at most the one bound on waits from outside.
        let clamp = |w: Nanos, c: &Config| c.bound_wait(w.max(c.min_rate_limit_wait));
        let wait = match scope {
            RateLimitScope::Edge => {
                let backoff = self.edge.strike(self.config.edge_backoff_base, self.config.edge_backoff_max);
                clamp(hint.unwrap_or(backoff), &self.config)
            }
            _ => clamp(hint.unwrap_or(self.config.backoff_base), &self.config),
        };
        let until = now.saturating_add(wait);
        let (iid, hold_key) = {
            let r = self.req(id);
            (self.iid_of(r), r.shared_route().to_string())
        };
        // Whether a sub-limit refusal holds its key (the request's class, or a route whose
        // requests met it twice; in shared mode, at once: the other processes cannot watch for
        // the second), shared with the other processes; else it holds the refused request alone
        // (see below).
        let shares_hold = scope != RateLimitScope::SubLimit
            || self.req(id).sub_key().is_some()
            || self.config.shared.is_some()
            || self.queue(qid).rare.suspected(&hold_key, now);
        match scope {
            RateLimitScope::Global => {
                let window = self.config.global_window;
                let span = self.global_span(now);
                // A refusal whose hold spans many global windows (GitHub's minute) tells of a
                // limit over a longer time than the sends of one window can measure.
                let learn = self.config.global_limit == 0 && wait <= window.saturating_mul(2);
                self.hold_identity(iid, until);
                if learn {
                    // What the API admitted of the sends within one global window before
                    // this refusal: those sends less the refusals among them.
                    self.identities[iid].learn_cap(now, span, window);
                }
            }
            RateLimitScope::Shared => {
                let q = self.queue_mut(qid);
                q.hold_shared(until);
                // The resource admitted what this window sent less what it refused: stay at
                // that many per window, for ten windows after the hold (then probe again).
                q.bucket.refuse_shared(flight.window_epoch, until);
            }
            RateLimitScope::Edge => self.hold_host(until),
            RateLimitScope::SubLimit if shares_hold => self.queue_mut(qid).hold_sub_limit(hold_key, until),
            RateLimitScope::SubLimit => {
                // A hidden sub-limit met by a request of no class (its body's keys not given):
                // it may limit only some of the route's requests (renames among the channel's
                // edits). This one waits (and is retried) on its own; the route's others go on
                // until one of them meets it too (`suspected`), which holds the route.
                self.queue_mut(qid).rare.suspect(hold_key, until);
                let r = self.req_mut(id);
                r.not_before = r.not_before.max(until);
            }
            // A queue whose limits are budgets (an LLM API's requests and tokens) and whose
            // bucket no answer described: the refusal is a budget's, which `settle_costs` has
            // read. The queue waits out the server's wait; its bucket learns no limit from it
            // (a limit of 1 would send one request per window from then on, for good: no
            // header of such an API ever reports the bucket).
            RateLimitScope::Bucket if self.queue(qid).bucket.limit() == 0 && !self.queue(qid).rare.budgets().is_empty() => {
                self.queue_mut(qid).hold_shared(until);
            }
            RateLimitScope::Bucket => {
                self.queue_mut(qid).bucket.hold(until);
            }
        }
        if scope != RateLimitScope::Shared {
            self.record_invalid(now, id);
        }
        if self.config.shared.is_some() && shares_hold {
            // Every process must hold what this 429 says is exhausted.
            let shared_scope = match scope {
                RateLimitScope::Global => SharedScope::Global,
                RateLimitScope::Shared | RateLimitScope::Bucket => SharedScope::Bucket,
                RateLimitScope::SubLimit => SharedScope::Route,
                RateLimitScope::Edge => SharedScope::Edge,
            };
            let update = self.hold_update(id, qid, shared_scope, wait);
            self.outputs.push_back(Output::Share(update));
        }
        self.outputs.push_back(Output::Observe(Observation::RateLimited {
            id,
            scope,
            retry_after: wait,
        }));
        let max_retries = self.config.max_rate_limit_retries;
        let req = self.req_mut(id);
        req.rate_limit_retries += 1;
        if req.rate_limit_retries > max_retries {
            let attempts = req.sends;
            self.fail(id, FailReason::RetriesExhausted { attempts });
            return Disposition::Failed;
        }
        self.requeue(id)
    }

    /// Puts a request that will be re-sent back at its place in its queue.
    pub(super) fn requeue(&mut self, id: RequestId) -> Disposition {
        if self.closed {
            self.fail(id, FailReason::Closed);
            return Disposition::Failed;
        }
        let (qid, exempt, iid) = {
            let r = self.req(id);
            (r.qid, r.exempt(), self.iid_of(r))
        };
        // Pending lists are in enqueue (= id) order.
        let pos = self.queue(qid).pending.partition_point(|&p| p < id);
        self.queue_mut(qid).pending.insert(pos, id);
        self.req_mut(id).state = Phase::Queued;
        if !exempt {
            self.identities[iid].enqueued();
        }
        if let Some(d) = self.req(id).deadline {
            self.arm_deadline(id, d);
        }
        self.clear_slot(qid);
        self.mark_dirty(qid);
        Disposition::Retry
    }

    /// A 5xx (for an idempotent request) or a transport failure: back off and re-send, or give up.
    pub(super) fn retry_after_error(&mut self, now: Nanos, id: RequestId, transport: bool) -> Disposition {
        let max = self.config.max_error_retries;
        let req = self.req_mut(id);
        req.error_retries += 1;
        if req.error_retries > max {
            if transport {
                // `network_error` promises the request never reached the server; an attempt
                // that may have reached it makes the outcome `maybe_sent`.
                let reason = if req.maybe_reached() {
                    FailReason::MaybeSent
                } else {
                    FailReason::NetworkError { attempts: req.sends }
                };
                self.fail(id, reason);
                return Disposition::Failed;
            }
            return Disposition::Complete;
        }
        let n = req.error_retries;
        let backoff = backoff(self.config.backoff_base, n, self.config.backoff_max);
        let jitter = self.rng.next_u64() % (backoff / 2 + 1);
        let until = now.saturating_add(backoff / 2 + jitter);
        self.req_mut(id).not_before = until;
        self.requeue(id)
    }

    /// Charges the costs of request `id`, about to leave queue `qid`, to the queue's budgets
    /// (creating one per dimension it names). A request without costs in a queue that has
    /// budgets charges them nothing, so that its answer's report still counts.
    pub(super) fn charge_costs(&mut self, now: Nanos, qid: Qid, id: RequestId) {
        if self.req(id).costs().is_empty() && self.queue(qid).rare.budgets().is_empty() {
            return;
        }
        let mut rare = self.req_mut(id).rare.take().unwrap_or_default();
        let cost = &mut rare.costs;
        let share = self.cost_share();
        let margins: Vec<f64> = cost.estimates.iter().map(|(name, _)| self.margin(name)).collect();
        let q = self.queues[qid].as_mut().expect("live queue");
        let mut charges = Vec::new();
        for ((name, estimate), margin) in cost.estimates.iter().zip(margins) {
            charges.push(costs::budget_mut(q.rare.budget_list(), name, share).charge(now, *estimate, margin));
        }
        for b in q.rare.budgets_mut().iter_mut().filter(|b| !cost.estimates.iter().any(|(n, _)| *n == b.name)) {
            // Every request costs one request, whatever it names.
            let one = u64::from(&*b.name == costs::REQUESTS);
            charges.push(b.charge(now, one, 1.0));
        }
        cost.charges = charges;
        self.req_mut(id).rare = Some(rare);
    }

    /// Request `id` left flight: its charges go back to its queue's budgets. `answer`, when it
    /// was answered: the time, the answer's reports (each budget takes its dimension's) and
    /// body (the actual costs: [`headers::settled_cost`]). `refund`: it was never counted
    /// (refused with a 429, or never sent).
    /// Returns whether a budget's limit was learned or lowered.
    pub(super) fn settle_costs(&mut self, id: RequestId, answer: Option<(Nanos, &RateLimitInfo, &Response<'_>)>, refund: bool) -> bool {
        let max_wait = self.config.max_server_wait;
        let r = self.requests.get_mut(&id).expect("live request");
        let qid = r.qid;
        let Some(cost) = r.rare.as_mut().map(|r| &mut r.costs).filter(|c| !c.charges.is_empty()) else {
            return false;
        };
        let mut lowered = false;
        let charges = std::mem::take(&mut cost.charges);
        let share = self.cost_share();
        let q = self.queues[qid].as_mut().expect("live queue");
        for charge in &charges {
            // Made anew when its route moved to another queue meanwhile: that queue keeps the
            // budget now.
            let budget = costs::budget_mut(q.rare.budget_list(), &charge.name, share);
            let (report, actual, refill) = match answer {
                Some((_, info, response)) => {
                    let dimension = info.dimensions.iter().find(|d| *d.name == *charge.name);
                    let report = dimension.map(|d| (d.limit, d.remaining, d.reset_after.map(|ra| ra.min(max_wait))));
                    let refill = dimension.filter(|d| costs::refills(info.profile, d)).map(|d| costs::RefillReport {
                        interval: d.refill_interval,
                        // Anthropic's resets are times, read on this answer's clock: the
                        // driver's (to the ms), else the `Date` header's (whole seconds).
                        absolute: (info.profile == Some(HeaderProfile::Anthropic))
                            .then_some(if response.wall_clock_ms.is_some() { MILLISECOND } else { SECOND }),
                    });
                    (report, if refund { None } else { headers::settled_cost(&response.body, &charge.name) }, refill)
                }
                None => (None, None, None),
            };
            if let Some(actual) = actual {
                let known = self.ratios.iter().position(|(n, _)| *n == charge.name);
                let i = match known {
                    Some(i) => Some(i),
                    // Names come from the caller's costs, at most a few per request; a bound
                    // all the same.
                    None if self.ratios.len() < 64 => {
                        self.ratios.push((charge.name.clone(), Ratio::default()));
                        Some(self.ratios.len() - 1)
                    }
                    None => None,
                };
                if let Some(i) = i {
                    self.ratios[i].1.learn(charge.estimate, actual);
                }
            }
            let before = budget.limit;
            budget.settle(answer.map_or(self.now, |(now, _, _)| now), charge, report, actual, refund, refill);
            lowered |= budget.limit.is_some_and(|l| before.is_none_or(|b| l < b));
        }
        lowered
    }

    /// Fails the requests queued in `qid` whose estimates a limit it learned now rules out.
    pub(super) fn fail_never_fitting(&mut self, qid: Qid) {
        let doomed: Vec<(RequestId, FailReason)> = self
            .queue(qid)
            .pending
            .iter()
            .filter(|id| !self.requests[*id].costs().is_empty())
            .filter_map(|id| costs::never_fits(self.queue(qid).rare.budgets(), self.requests[id].costs()).map(|reason| (*id, reason)))
            .collect();
        for (id, reason) in doomed {
            self.unqueue(id);
            self.fail(id, reason);
        }
    }

    /// Gives back the global token and bucket slot of a request that never left.
    pub(super) fn refund(&mut self, qid: Qid, id: RequestId, flight: Flight) {
        let _ = self.settle_costs(id, None, true);
        let iid = self.iid(id);
        if let Some(at) = flight.global_at {
            self.drop_global_entry(iid, at);
            self.mark_identity_ready(iid);
        }
        self.give_back_slot(qid, flight);
    }

    /// Gives back the bucket slot `flight` took in queue `qid`, if it was taken in the
    /// bucket's current window.
    pub(super) fn give_back_slot(&mut self, qid: Qid, flight: Flight) {
        self.queue_mut(qid).bucket.give_back(flight.sent_at, flight.window_epoch);
    }

    /// Counts request `id` (which left the in-flight set) against queue `qid`'s window until
    /// the window resets or a report counts it (see [`Ghost`]): the server may have counted
    /// it without the client knowing. `answered_at`: when its answer came back, `None` when
    /// it may still be on its way.
    pub(super) fn add_ghost(&mut self, qid: Qid, id: RequestId, answered_at: Option<Nanos>) {
        let route = self.requests[&id].route_key.clone();
        self.queue_mut(qid).bucket.add_ghost(Ghost::new(route, answered_at));
    }

    pub(super) fn record_invalid(&mut self, now: Nanos, id: RequestId) {
        if self.config.invalid_request_limit == 0 {
            return;
        }
        if self.config.shared.is_some() {
            let window = self.config.invalid_request_window;
            self.outputs.push_back(Output::Share(SharedUpdate::Invalid { id, window }));
        }
        self.expire_invalid(now);
        self.invalid.record(now.saturating_add(self.config.invalid_request_window));
        self.warn_invalid_budget();
    }

    /// Emits the invalid-request warning once the budget used reaches `invalid_request_warn_at`
    /// (once, until the count falls below half of it again).
    pub(crate) fn warn_invalid_budget(&mut self) {
        if let Some(count) = self.invalid.warning(self.config.invalid_request_warn_at) {
            self.outputs.push_back(Output::Observe(Observation::InvalidRequestWarning {
                count,
                limit: self.config.invalid_request_limit,
            }));
        }
    }

    pub(super) fn expire_invalid(&mut self, now: Nanos) {
        self.invalid.expire(now, self.config.invalid_request_warn_at);
    }

    pub(super) fn mark_unauthorized(&mut self, iid: Iid) {
        self.identities[iid].mark_unauthorized();
        self.fail_queued(|_, of| of == iid, FailReason::Unauthorized);
    }

    /// The invalid-request budget's gate: closed while the invalid responses in the window and
    /// the requests that may yet be (in flight or reserving) reach `invalid_request_stop_at`.
    pub(super) fn invalid_gate(&mut self, now: Nanos) -> Gate {
        if self.config.invalid_request_limit == 0 {
            return Gate::Open;
        }
        self.expire_invalid(now);
        self.invalid.gate(self.in_flight_total + self.reserving_total, self.config.invalid_request_stop_at)
    }

    /// Fails every queued (or reserving: never sent either) request that `which` selects (from
    /// the request and its identity), in enqueue order.
    pub(super) fn fail_queued(&mut self, which: impl Fn(&Req, Iid) -> bool, reason: FailReason) {
        let mut queued: Vec<RequestId> = self
            .requests
            .iter()
            .filter(|(_, r)| {
                matches!(r.state, Phase::Queued | Phase::Reserving) && which(r, self.iid_of(r))
            })
            .map(|(id, _)| *id)
            .collect();
        queued.sort_unstable();
        for id in queued {
            if self.req(id).state == Phase::Reserving {
                self.abandon_reservation(id);
            } else {
                self.unqueue(id);
            }
            self.fail(id, reason.clone());
        }
    }


    /// A hold of the whole host (an edge ban, or the store's for invalid requests) until
    /// `until`: the queued requests it makes hopeless fail at once.
    pub(super) fn hold_host(&mut self, until: Nanos) {
        self.edge.hold(until);
        self.recheck_queues(None);
    }

    /// A global hold of identity `iid` until `until`: its queues wake then, and the queued
    /// requests it makes hopeless fail at once.
    pub(super) fn hold_identity(&mut self, iid: Iid, until: Nanos) {
        self.identities[iid].pause(until);
        self.wake_identity_at(iid, until);
        self.recheck_queues(Some(iid));
    }
}

/// The pause before the `attempt`th retry (from 1): `base`, doubled for each attempt before
/// it (at most 30 times), at most `max`.
pub(super) fn backoff(base: Nanos, attempt: u32, max: Nanos) -> Nanos {
    base.saturating_mul(1u64 << attempt.saturating_sub(1).min(30)).min(max)
}

/// What a 429 refused by: the token (global), a shared resource, the edge (no rate-limit
/// headers), a hidden limit below the bucket's (the bucket had room), or the bucket.
pub(super) fn refusal_scope(info: &RateLimitInfo, response: &Response<'_>) -> RateLimitScope {
    if info.scope == Some(Scope::Global) || response.body.global == Some(true) {
        RateLimitScope::Global
    } else if info.scope == Some(Scope::Shared) {
        RateLimitScope::Shared
    } else if !info.has_rate_limit_headers {
        RateLimitScope::Edge
    } else if info.remaining.is_some_and(|r| r > 0) {
        RateLimitScope::SubLimit
    } else {
        RateLimitScope::Bucket
    }
}
