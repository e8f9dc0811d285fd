//! Shared mode ([`crate::shared`]) in the limiter: reservations and their answers, global
//! leases, store health per outage and the share of the limits while the store is down, and
//! the reports the store is written.

use super::*;

/// What the store knows a request by: its identity's name, the route it reserves and shares
/// under ([`Req::shared_route`]), its major parameter, and its bucket's hash where known.
#[derive(Debug)]
pub(super) struct Names {
    pub(super) identity: String,
    pub(super) route: String,
    pub(super) major: String,
    pub(super) bucket: Option<String>,
}

/// What a late grant for a request that already ended must release at the store.
#[derive(Debug)]
pub(super) struct Orphan {
    /// The outage step its reservation was emitted in.
    pub(super) step: u32,
    /// Its reservation asked for the processes back since the outage.
    pub(super) asked_since: bool,
    /// What the store knows its reservation by.
    pub(super) names: Names,
}

/// Whether any of a queue's `in_flight` list is reserving (shared mode). A request that has
/// just taken its slot and is not sent or reserved yet has no entry in `taken`: not reserving.
pub(super) fn has_reserving(in_flight: &Ids, taken: &HashMap<RequestId, ReqState>) -> bool {
    in_flight.iter().any(|id| matches!(taken.get(id), Some(ReqState::Reserving { .. })))
}

impl Limiter {
    /// Whether shared mode is on and a store outage is met the way `how` says
    /// ([`SharedConfig::on_unavailable`](crate::shared::SharedConfig::on_unavailable)).
    pub(super) fn fails(&self, how: OnUnavailable) -> bool {
        self.config.shared.as_ref().is_some_and(|s| s.on_unavailable == how)
    }

    /// Whether the next send goes through the store: always, unless the store is down; then
    /// only one probe at a time once the pause has passed.
    pub(super) fn should_reserve(&self, now: Nanos) -> bool {
        !self.store.is_down() || (now >= self.store.retry_at() && self.reserving_total == 0)
    }

    /// Fail-closed while the store is down: nothing goes until the pause has passed, and then
    /// only the probe until it is answered.
    pub(super) fn store_gate(&self, now: Nanos) -> Gate {
        let fail_closed = self.fails(OnUnavailable::FailClosed);
        if !fail_closed || !self.store.is_down() {
            Gate::Open
        } else if self.reserving_total > 0 {
            Gate::UntilResponse
        } else if now < self.store.retry_at() {
            Gate::Until(self.store.retry_at())
        } else {
            Gate::Open
        }
    }

    /// No request of any identity goes before this (an edge ban, a shared hold, a fail-closed
    /// store outage).
    pub(super) fn host_hold(&self) -> Nanos {
        let mut t = self.edge.until();
        if self.store.is_down() && self.fails(OnUnavailable::FailClosed) {
            t = t.max(self.store.retry_at());
        }
        t
    }

    /// The bucket hash of queue `qid`, if learned.
    pub(super) fn queue_hash(&self, qid: Qid) -> Option<String> {
        match self.queue(qid).key.bucket() {
            BucketId::Hash(h) => Some(h.to_string()),
            BucketId::Route(_) => None,
        }
    }

    /// What the store knows request `id` of queue `qid` by; `bucket` where the caller knows
    /// it better than the queue (an answer's own), else the queue's hash.
    pub(super) fn names(&self, id: RequestId, qid: Qid, bucket: Option<String>) -> Names {
        let r = self.req(id);
        Names {
            identity: self.identities[self.iid_of(r)].name().to_string(),
            route: r.shared_route().to_string(),
            major: self.queue(r.qid).key.major.to_string(),
            bucket: bucket.or_else(|| self.queue_hash(qid)),
        }
    }

    /// The latency margin passed to the store: the global margin (the spread of HTTP round
    /// trips, or of uplinks, from when each request left) plus the spread of the delays from
    /// the store's count of a token to the core's handling of its grant
    /// ([`Store::learn_delay`]; the spread of reservation round trips until 16 grants
    /// told the store's clock), capped like the global margin. Not the runtime's delay between
    /// a `Send` and the request leaving (see [`crate::shared`], "Leases").
    pub(super) fn shared_margin(&self, now: Nanos) -> Nanos {
        self.global_margin_at(now).saturating_add(self.store.own_margin()).min(self.config.global_margin_max)
    }

    /// Whether global leases are on (shared mode, `SharedConfig::global_lease`, a global limit).
    pub(super) fn lease_on(&self) -> bool {
        self.config.global_limit > 0 && self.config.shared.as_ref().is_some_and(|s| s.global_lease)
    }

    /// Whether the identity's requests wait for its lease request's answer: leases on, the
    /// store up, no token left, and a lease asked for.
    pub(super) fn waits_for_lease(&self, now: Nanos, iid: Iid) -> bool {
        self.lease_on() && !self.store.is_down() && self.identities[iid].lease().awaits_answer(now)
    }

    /// Shared mode: how the reservation of `id` (of identity `iid`) takes its global token.
    /// Returns whether it counts globally at the store, how many tokens it asks for (`0`:
    /// it spends one leased earlier), and whether it spends one.
    pub(super) fn global_ask(&mut self, now: Nanos, iid: Iid, id: RequestId, counts_global: bool) -> (bool, u32, bool) {
        if !counts_global {
            return (false, 1, false);
        }
        if !self.lease_on() || self.store.is_down() {
            return (true, 1, false);
        }
        if self.identities[iid].lease_mut().try_spend(now) {
            return (true, 0, true);
        }
        let want = self.lease_want(iid);
        self.identities[iid].lease_mut().ask(id, want);
        (true, want, false)
    }

    /// How many global tokens a lease request asks for: this request's, one per other head of
    /// the identity that is ready or waits for the global budget, at most what the local
    /// window has room for and this process's share of the limit (the limit divided by the
    /// live processes the store counted).
    pub(super) fn lease_want(&self, iid: Iid) -> u32 {
        let ident = &self.identities[iid];
        let heads = self
            .ready
            .iter()
            .filter(|key| self.queues.get(key.2).and_then(Option::as_ref).is_some_and(|q| q.key.identity == iid))
            .count()
            + ident.blocked_len();
        let limit = self.config.global_limit;
        // The request asking is in the window already.
        let room = (limit as usize).saturating_sub(ident.entries()) + 1;
        let share = limit.div_ceil(self.store.processes().max(1)).max(1) as usize;
        (1 + heads).min(room).min(share).max(1) as u32
    }

    /// The answer to request `id`'s reservation arrived (or it ended without one): if it asked
    /// for the identity's lease, the lease is what the store granted (`leased`), kept for half
    /// a global window, and the identity's waiting requests go again.
    pub(super) fn lease_answered(&mut self, now: Nanos, iid: Iid, id: RequestId, leased: u32) {
        let validity = self.config.global_window / 2;
        if self.identities[iid].lease_mut().answered(now, id, leased, validity) {
            self.mark_identity_ready(iid);
        }
    }

    /// A reservation that spent a leased token was not sent: the token is still good while the
    /// identity's lease is current (its own lease's, or a later one it joined).
    pub(super) fn unspend_lease(&mut self, now: Nanos, iid: Iid, leased: bool) {
        let ident = &mut self.identities[iid];
        // Its requests held by the full window may spend it.
        if leased && ident.lease_mut().unspend(now) && ident.is_full(now) {
            self.mark_identity_ready(iid);
        }
    }

    pub(super) fn reservation(&self, now: Nanos, id: RequestId, counts_global: bool) -> Reservation {
        let Names { identity, route, major, bucket } = self.names(id, self.req(id).qid, None);
        let margin = self.shared_margin(now);
        let c = &self.config;
        Reservation {
            id,
            identity,
            route,
            major,
            bucket,
            counts_global,
            global_limit: c.global_limit,
            global_want: 1,
            global_window: c.global_window.saturating_add(margin),
            margin,
            invalid_limit: if c.invalid_request_limit > 0 { c.invalid_request_stop_at } else { 0 },
            invalid_window: c.invalid_request_window,
            processes_since: None,
            reporting: false,
            unrecorded: Vec::new(),
            granted: Vec::new(),
        }
    }

    /// The store granted reserving request `id`: send it now, as of now.
    pub(super) fn grant(&mut self, now: Nanos, qid: Qid, id: RequestId, flight: Flight) {
        let r = self.req(id);
        if let Some(deadline) = r.deadline
            && now > deadline
        {
            // Too late: the slot goes back, the store's grant is released. (A deferral's
            // retry time is now: the store would have let it go.)
            let reason = match r.limit {
                Limit::MaxWait => FailReason::MaxWaitExceeded { predicted_wait: now - r.enqueued_at },
                limit => limit_reason(limit, r.own_deadline(), r.enqueued_at, deadline, None, now),
            };
            self.leave_in_flight_list(qid, id);
            self.refund(qid, id, flight);
            let update = self.release(id, false);
            self.outputs.push_back(Output::Share(update));
            self.fail(id, reason);
            return;
        }
        if self.overtakes(now, qid, id) {
            // An earlier request of this queue went back to wait (denied, or not yet reserved
            // again): sending this one now would break FIFO. It goes back behind it, and the
            // store takes its grant back.
            let update = self.release(id, false);
            self.outputs.push_back(Output::Share(update));
            self.unreserve(qid, id, flight);
            return;
        }
        let iid = self.iid_of(r);
        // The send happens now, not when the reservation left: re-stamp the global token and
        // the sliding log so the local windows count from the real send.
        let global_at = flight.global_at.map(|old| {
            self.restamp_global(iid, old, now);
            now
        });
        if global_at.is_some() {
            let keep = self.report_horizon();
            self.identities[iid].send_log().granted(now, keep);
        }
        let q = self.queue_mut(qid);
        q.last_active = now;
        q.bucket.restamp_send(flight.sent_at, flight.window_epoch, now);
        self.sent(now, id, Flight { global_at, ..flight });
    }

    /// Whether sending `id` now would overtake an earlier request of its queue that is waiting
    /// only for its turn (not for its own backoff, nor for a sub-limit of another route), or
    /// whose own reservation (made again after a denial) is still outstanding.
    pub(super) fn overtakes(&self, now: Nanos, qid: Qid, id: RequestId) -> bool {
        let q = self.queue(qid);
        // An earlier request held by a sub-limit that does not hold `id` (another route, or
        // another class of it) is not waiting for its turn.
        let me = &self.requests[&id];
        let waiting = q.pending.iter().take_while(|&&p| p < id).any(|p| {
            let r = &self.requests[p];
            let held_apart = q.rare.sub_limits().iter().any(|(k, t)| *t > now && r.held_by(k) && !me.held_by(k));
            r.not_before <= now && !held_apart
        });
        waiting
            || q.in_flight.iter().any(|p| *p < id && matches!(self.taken.get(p), Some(ReqState::Reserving { .. })))
    }

    /// Removes `id` from its queue's in-flight list (which also holds reserving requests).
    pub(super) fn leave_in_flight_list(&mut self, qid: Qid, id: RequestId) {
        let q = self.queue_mut(qid);
        if let Some(pos) = q.in_flight.iter().position(|&p| p == id) {
            q.in_flight.swap_remove(pos);
        }
        self.taken.remove(&id);
        // A probe of its major parameter may wait for this bucket's slot (see `contact`).
        self.contact_done(qid, false);
    }

    /// A reservation that will not be sent now (denied, or the store is unavailable and the
    /// policy is fail-closed): the slot and the global token go back, and the request goes back
    /// to its place in its queue. It was never sent, so no retry is counted.
    pub(super) fn unreserve(&mut self, qid: Qid, id: RequestId, flight: Flight) {
        self.leave_in_flight_list(qid, id);
        self.refund(qid, id, flight);
        self.undo_window_start(qid, flight);
        self.requeue(id);
    }

    /// A reservation that was not sent: if it opened the local window, the window's first send
    /// is the earliest of the others still out in it, or none (with no other, its provisional
    /// end goes too): a send that did not happen must not skew the window-length estimates.
    pub(super) fn undo_window_start(&mut self, qid: Qid, flight: Flight) {
        let q = self.queue(qid);
        let epoch = q.bucket.epoch();
        if flight.window_epoch != epoch || q.bucket.window_first_send() != Some(flight.sent_at) {
            return;
        }
        let first = q
            .in_flight
            .iter()
            .filter_map(|id| match self.taken.get(id) {
                Some(
                    &ReqState::InFlight(Flight { sent_at: t, window_epoch, .. })
                    | &ReqState::Reserving { since: t, window_epoch, .. },
                ) if window_epoch == epoch => Some(t),
                _ => None,
            })
            .min();
        self.queue_mut(qid).bucket.undo_first_send(first);
    }

    /// A reserving request ends before its answer (cancelled, closed, failed): the slot and the
    /// global token go back, and the late answer will be ignored.
    pub(super) fn abandon_reservation(&mut self, id: RequestId) {
        let r = self.req(id);
        let (qid, iid) = (r.qid, self.iid_of(r));
        let (Phase::Reserving, Some(&ReqState::Reserving { since, step, window_seq, window_epoch, global_at, leased, asked_since, .. })) =
            (r.state, self.taken(id))
        else {
            return;
        };
        let orphan = Orphan { step, asked_since, names: self.names(id, qid, None) };
        self.reserving_total -= 1;
        self.set_state(id, ReqState::Answered);
        self.leave_in_flight_list(qid, id);
        let flight = Flight { sent_at: since, window_seq, window_epoch, global_at, left_at: since, alone: false, probe: false };
        self.refund(qid, id, flight);
        self.undo_window_start(qid, flight);
        self.orphans.insert(id, orphan);
        // A lease it asked for is not waited for any more (its tokens, if granted, lapse).
        self.lease_answered(since, iid, id, 0);
        // Its leased token goes back to its lease (spending checks the time, so a lapsed one
        // is never used).
        self.unspend_lease(since, iid, leased);
        self.mark_dirty(qid);
    }

    /// Holds what a denial says is exhausted until `now + wait`. `leased`: the denied
    /// reservation spent a leased token.
    pub(super) fn hold(&mut self, now: Nanos, id: RequestId, qid: Qid, scope: SharedScope, wait: Nanos, leased: bool) {
        let until = now.saturating_add(wait);
        match scope {
            SharedScope::Edge | SharedScope::Invalid => self.hold_host(until),
            SharedScope::Global => {
                let iid = self.iid(id);
                let ident = &mut self.identities[iid];
                if !leased && ident.lease().is_current(now) {
                    // It asked the window for tokens and the window is full, but this process
                    // holds a current lease (tokens in hand, or coming back from reservations
                    // denied for other reasons): the requests that spend one still go.
                    // (Pausing the identity here left a whole lease unspent, counted at the
                    // store to the end of its window: with 4 processes on 100 new channels, a
                    // window sent 133 of its 250.)
                    let until = ident.fill(until);
                    self.wake_identity_at(iid, until);
                } else {
                    // The store's global hold (a spent token is denied only for that), or no
                    // lease: the whole identity waits.
                    self.hold_identity(iid, until);
                }
            }
            SharedScope::Route => {
                let key = self.req(id).shared_route().to_string();
                self.queue_mut(qid).hold_sub_limit(key, until);
            }
            SharedScope::Bucket | SharedScope::Pioneer => self.queue_mut(qid).hold_shared(until),
        }
    }

    /// The store answered (granted or denied) a reservation: an outage ends, and a recovery
    /// begins; `processes` is its count of processes, back since the outage began when the
    /// reservation asked (`asked_since`).
    pub(super) fn store_answered(&mut self, now: Nanos, processes: Option<u32>, asked_since: bool) {
        if self.store.back_up() {
            self.outputs.push_back(Output::Observe(Observation::StoreRecovered));
            // (The recovery's length counts from the last answer before this one.)
            self.begin_recovery(now);
            // The share may change, and a fail-open hold ends: everything decides again.
            self.share_changed();
        }
        self.store.heard(now);
        match processes {
            // Every process counted before the outage has reserved since it began, not
            // reporting, so it told the store what it sent meanwhile: the store decides alone
            // again.
            Some(n) if asked_since && self.store.all_back(n) => self.end_recovery(),
            Some(_) if asked_since => {}
            // Bad input (0) reads as this process alone; a huge count leaves at least one
            // request per window (see `share_of`). The count before an outage is kept until its
            // recovery ends.
            Some(n) if self.store.recovery().is_none() => {
                self.store.count_processes(n);
                self.share_budgets();
            }
            _ => {}
        }
    }

    /// Shared mode: each process keeps to its part of every cost budget, the store's live
    /// process count (see the [`Limiter`] docs, "Costs").
    pub(super) fn cost_share(&self) -> u64 {
        if self.config.shared.is_some() { u64::from(self.store.processes().max(1)) } else { 1 }
    }

    /// The live process count changed: every budget takes the new share.
    pub(super) fn share_budgets(&mut self) {
        let share = self.cost_share();
        let mut changed = Vec::new();
        for (qid, q) in (0..).zip(self.queues.iter_mut()) {
            let Some(q) = q else { continue };
            for b in q.rare.budgets_mut() {
                if b.set_share(share) {
                    changed.push(qid);
                }
            }
        }
        for qid in changed {
            self.mark_dirty(qid);
        }
    }

    /// The outage is over: until every process the store counted before it is back, or until
    /// nothing it may not know of can still be in a server's global window, this process keeps
    /// to its share of the limits (see [`crate::shared`], "Through an outage").
    ///
    /// Fail-open: another process may still be sending on its share without the store until
    /// its next probe. Its probe pause doubles from `retry_base`, so it is at most the time
    /// since its first failure plus `retry_base` (and at most `retry_max`); that failure came
    /// after the store was last seen up (this process's last answer before the outage), and
    /// each of its failed probes waited at most the driver's timeout (taken as the longest any
    /// of this process's waited in this outage: one store, one setting). So it is back at the
    /// latest `pause + 2 x wait` after now, and what it sent leaves the window one window later.
    /// Fail-closed: nobody sent without the store, but a store that lost its state lacks the
    /// grants made before the outage, for one global window after it began.
    pub(super) fn begin_recovery(&mut self, now: Nanos) {
        let Some(shared) = &self.config.shared else { return };
        let span = self.report_horizon();
        let until = match shared.on_unavailable {
            OnUnavailable::FailOpen => {
                let wait = self.store.outage_wait();
                let down_for = now.saturating_sub(self.store.last_answer());
                let pause = down_for.saturating_add(shared.retry_base).saturating_add(wait).min(shared.retry_max);
                now.saturating_add(pause).saturating_add(wait.saturating_mul(2)).saturating_add(span)
            }
            OnUnavailable::FailClosed => self.store.down_since().saturating_add(span),
        };
        if self.store.recover_until(now, until) {
            self.timers.arm(until, Timer::Recovery);
        }
    }

    /// The recovery after an outage ends: the whole limits apply again.
    pub(super) fn end_recovery(&mut self) {
        let share = self.outage_share();
        self.store.end_recovery();
        if self.outage_share() != share {
            self.share_changed();
        }
    }

    /// Fail-open, in the first global window of an outage: no send goes without a reservation
    /// against the global limit until the store's last grants have left every window, that
    /// is one global window (the longest a reservation passes) after the outage began. Before
    /// that, this process's share is not its own to use: the store may have granted the whole
    /// window, unevenly, to the other processes (one with 28 of 50, another with none, which
    /// then sent its share of 25 at once: 53 in the server's window). A probe still goes when
    /// the pause has passed (the store decides it); the hold ends with the outage. Returns
    /// when to look again, or `None` when nothing holds.
    pub(super) fn outage_global_hold(&self, now: Nanos) -> Option<Nanos> {
        let fail_open = self.fails(OnUnavailable::FailOpen);
        let end = self.store.down_since().saturating_add(self.report_horizon());
        if !fail_open
            || !self.store.is_down()
            || self.store.processes() <= 1
            || self.config.global_limit == 0
            || now >= end
            || self.should_reserve(now)
        {
            return None;
        }
        // The next probe (its answer wakes the identity again while one is out).
        Some(if now < self.store.retry_at() { self.store.retry_at().min(end) } else { end })
    }

    /// How far back a process reports its sends after an outage: the longest global window a
    /// reservation passes (the window plus the largest margin).
    pub(super) fn report_horizon(&self) -> Nanos {
        self.config.global_window.saturating_add(self.config.global_margin_max)
    }

    /// The live processes the store last counted, whose limits this process shares while the
    /// store is down and during the recovery after an outage (1 otherwise: the store decides).
    /// Fail-open sends on it without the store; fail-closed sends only its probes while the
    /// store is down, and a probe answered by a store that lost its state must not take the
    /// room of another process's grants it lost (they are in that process's share).
    pub(super) fn outage_share(&self) -> u32 {
        self.store.share()
    }

    /// The limits changed (a fail-open outage began or ended with several processes): every
    /// queue decides again, and the ones waiting for a global budget recheck it.
    pub(super) fn share_changed(&mut self) {
        self.recheck_queues(None);
        for iid in 0..Iid::try_from(self.identities.len()).unwrap_or(Iid::MAX) {
            self.mark_identity_ready(iid);
        }
    }

    /// The store did not answer the reservation of request `id`, emitted in outage step
    /// `step`. One failure per outage step: the first such answer marks the store down (or,
    /// for the probe, doubles the pause) and starts a new step; the answers to reservations
    /// that were already outstanding then are the same failure and change nothing (with N
    /// reservations out when the store goes away, the first pause is `retry_base`, not
    /// `retry_base * 2^(N-1)`).
    pub(super) fn store_unavailable(&mut self, now: Nanos, id: RequestId, step: u32) {
        let Some(shared) = &self.config.shared else { return };
        let share = self.outage_share();
        let Some(was_down) = self.store.failed(now, step, (shared.retry_base, shared.retry_max)) else {
            return;
        };
        if !was_down {
            // The store may lose what it knew (a restart without persistence): each identity's
            // next reservation tells it what this process sent.
            if self.config.global_limit > 0 {
                for ident in self.identities.iter_mut() {
                    ident.send_log().mark_pending();
                }
            }
        }
        if self.outage_share() != share {
            self.share_changed();
        }
        self.outputs.push_back(Output::Observe(Observation::StoreUnavailable {
            id,
            retry_at: self.store.retry_at(),
        }));
    }

    /// What request `id`'s response says about its bucket, for the store.
    pub(super) fn bucket_report(&self, id: RequestId, qid: Qid, info: &RateLimitInfo) -> SharedUpdate {
        let b = &self.queue(qid).bucket;
        // The engine's own estimate, an upper bound as far as it knows (the learned length,
        // else the longest reset or first-send-to-reset span seen, else 1 s): the store uses it
        // to start windows and to keep header-less answers counting, and must be no less
        // cautious than one process.
        let window = b.report_window();
        let Names { identity, route, major, bucket } = self.names(id, qid, info.bucket.clone());
        SharedUpdate::Bucket {
            id,
            identity,
            route,
            major,
            bucket,
            unlimited: b.is_known() && b.is_unlimited() && info.bucket.is_none(),
            limit: info.limit.filter(|&l| l > 0),
            remaining: info.remaining,
            reset_after: info.reset_after.map(|ra| ra.min(self.config.max_server_wait)),
            window,
        }
    }

    /// A granted request `id` will not be answered.
    pub(super) fn release(&self, id: RequestId, reached: bool) -> SharedUpdate {
        let qid = self.req(id).qid;
        let Names { identity, route, major, bucket } = self.names(id, qid, None);
        let window = self.queue(qid).bucket.report_window();
        SharedUpdate::Release { id, identity, route, major, bucket, reached, window }
    }

    pub(super) fn hold_update(&self, id: RequestId, qid: Qid, scope: SharedScope, wait: Nanos) -> SharedUpdate {
        let Names { identity, route, major, bucket } = self.names(id, qid, None);
        SharedUpdate::Hold { scope, identity, route, major, bucket, retry_after: wait }
    }

    /// Reserves request `id` at the store (shared mode): it holds the slot and global token
    /// `flight` took while the store decides ([`ReqState::Reserving`]).
    pub(super) fn reserve(&mut self, now: Nanos, id: RequestId, flight: Flight) {
        let iid = self.iid(id);
        let (counts_global, global_want, leased) = self.global_ask(now, iid, id, flight.global_at.is_some());
        let mut reservation = self.reservation(now, id, counts_global);
        reservation.global_want = global_want;
        // After an outage: how many processes are back, and what the store may not count.
        let asked_since = self.store.is_down() || self.store.recovery().is_some();
        if asked_since {
            reservation.processes_since = Some(now.saturating_sub(self.store.down_since()));
        }
        let keep = self.report_horizon();
        let log = self.identities[iid].send_log();
        let reported = log.is_pending(now, keep).then(|| log.mark());
        if reported.is_some() {
            (reservation.unrecorded, reservation.granted) = log.ages(now, keep);
        }
        // Not back until no identity has anything left to report, nor may send without
        // the store (fail-open goes on sending while its probe is out).
        let fail_open = self.fails(OnUnavailable::FailOpen);
        reservation.reporting = (self.store.is_down() && fail_open)
            || self.identities.iter_mut().any(|ident| ident.send_log().is_pending(now, keep));
        self.set_state(id, ReqState::Reserving {
            since: now,
            step: self.store.step(),
            window_seq: flight.window_seq,
            window_epoch: flight.window_epoch,
            global_at: flight.global_at,
            leased,
            reported,
            asked_since,
        });
        self.reserving_total += 1;
        self.outputs.push_back(Output::Reserve(reservation));
    }
}
