//! The global window: the identities requests are enqueued under (each with its log of
//! sends, pause, learned cap and lease), when an identity's budget has room, and the round
//! trips its margin and the bucket windows' send lead are learned from.

use std::collections::BTreeSet;

use crate::types::{MILLISECOND, Nanos, RequestId};

use super::latency::{Downlinks, Recent, Uplinks, spread_margin};
use super::outage::SendLog;
use super::timelog::TimeLog;
use super::{HashMap, Iid, ReadyKey};

/// The identities by name, indexed by [`Iid`] (never removed: an identity is a token).
#[derive(Debug, Default)]
pub(super) struct Identities {
    by_name: HashMap<String, Iid>,
    list: Vec<Identity>,
    /// The identity named `""` (the default), kept apart from `by_name`: finding an empty
    /// name there ends in a `memcmp` of two empty strings at a dangling address, which glibc's
    /// AVX-512 `memcmp` reads with a masked load that faults and takes a microcode assist
    /// (measured: 7 % of a request's whole life at 10,000 buckets).
    unnamed: Option<Iid>,
}

impl Identities {
    /// The identity named `name`, if a request was ever enqueued under it.
    pub(super) fn find(&self, name: &str) -> Option<Iid> {
        if name.is_empty() {
            return self.unnamed;
        }
        self.by_name.get(name).copied()
    }

    /// The identity named `name`, made on first use.
    pub(super) fn intern(&mut self, name: &str) -> Iid {
        if let Some(iid) = self.find(name) {
            return iid;
        }
        // Each identity holds hundreds of bytes: 2^32 of them would not fit in memory.
        let iid = Iid::try_from(self.list.len()).expect("fewer than 2^32 identities");
        self.list.push(Identity::new(name));
        if name.is_empty() {
            self.unnamed = Some(iid);
        } else {
            self.by_name.insert(name.to_string(), iid);
        }
        iid
    }

    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    pub(super) fn iter(&self) -> std::slice::Iter<'_, Identity> {
        self.list.iter()
    }

    pub(super) fn iter_mut(&mut self) -> std::slice::IterMut<'_, Identity> {
        self.list.iter_mut()
    }
}

impl std::ops::Index<Iid> for Identities {
    type Output = Identity;
    fn index(&self, iid: Iid) -> &Identity {
        &self.list[iid as usize]
    }
}

impl std::ops::IndexMut<Iid> for Identities {
    fn index_mut(&mut self, iid: Iid) -> &mut Identity {
        &mut self.list[iid as usize]
    }
}

#[derive(Debug)]
pub(super) struct Identity {
    /// The caller's key for the token.
    name: String,
    /// Send times of non-exempt requests within the global window (+ margin): with a
    /// global limit, the requests whose transport reported when they left
    /// ([`Limiter::handle_written`]), each counted from then. Without a configured global
    /// limit, every send, kept for [`LearnedCap`] (never refunded: a little cautious).
    sends: TimeLog,
    /// With a global limit: the send times of requests in flight whose leaving no transport
    /// reported. Each may still be on its way (a busy runtime can write a request hundreds of
    /// milliseconds after its `Send`, later than any margin allows for), so each counts
    /// against the window until its answer, however long that takes.
    unwritten: TimeLog,
    /// With a global limit: when the entries of requests answered while unwritten leave the
    /// window, in order: a window after the latest instant each can have reached the server
    /// (its answer's [`Downlinks::arrived_by`]).
    arrived: TimeLog,
    paused_until: Nanos,
    /// Shared mode: the store's global window has no room for a new token until then (a
    /// `global` denial of a reservation that asked for tokens while this process held a
    /// current lease). Unlike `paused_until` it holds only requests that cannot spend a
    /// leased token: one that can skips the store's window check.
    full_until: Nanos,
    /// Without a configured global limit: the token-wide limit learned from refusals.
    learned: LearnedCap,
    /// Queues whose head waits for this identity's global budget.
    blocked: BTreeSet<ReadyKey>,
    wake_at: Option<Nanos>,
    unauthorized: bool,
    /// Non-exempt requests queued, for predictions.
    queued: usize,
    /// Shared mode: the global lease (see [`crate::shared`], "Leases").
    lease: Lease,
    /// Shared mode: the sends a store may not count, for after an outage.
    send_log: SendLog,
}

/// A token-wide limit learned from refusals of scope global where no global limit is
/// configured (GitHub's secondary limits, say) and the refusal holds the token for at most two
/// global windows (a longer hold is of a limit over a longer time than one window's sends
/// measure; the hold alone then paces the token): the API admitted what the identity sent
/// within one global window before the refusal, less the refusals in it; the identity stays at
/// that many per global window until ten global windows after the refusal's hold ends (then it
/// probes again), as a shared-scope limit is learned for its resource.
#[derive(Debug, Clone, Copy, Default)]
struct LearnedCap {
    /// The cap per global window, while `until` is ahead; `0`: none.
    limit: u32,
    until: Nanos,
    /// The refusals counted against the sends of the window they fell in: the first one's
    /// time, and how many.
    refused: (Nanos, u32),
}

/// Shared mode: global tokens the store leased to this process for one identity.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Lease {
    /// Tokens left: each lets one reservation spend a leased token (`global_want: 0`) instead
    /// of asking the store's window.
    tokens: u32,
    /// The tokens are kept until then (half a global window after the latest lease's answer:
    /// what was left of a current lease joins the next one; the store counts each token a
    /// whole window, so one spent later still finds its token there, or is checked against
    /// the window like any other).
    until: Nanos,
    /// The request whose reservation asks for a lease now: the identity's other requests wait
    /// for its answer instead of each asking.
    asking: Option<RequestId>,
    /// How many tokens it asked for (its own included): a store that leases more is not
    /// believed.
    asked: u32,
}

impl Lease {
    /// Whether a token is left that may still be spent at `now`.
    pub(super) fn has_tokens(&self, now: Nanos) -> bool {
        self.tokens > 0 && now < self.until
    }

    /// Whether the lease is current at `now` (tokens spent under it are still the store's).
    pub(super) fn is_current(&self, now: Nanos) -> bool {
        now < self.until
    }

    /// Whether the identity's requests wait for the answer to a lease request: one is out and
    /// no token is left.
    pub(super) fn awaits_answer(&self, now: Nanos) -> bool {
        self.asking.is_some() && !self.has_tokens(now)
    }

    /// Spends a token if one is left at `now`; else the lapsed ones are dropped and `false`
    /// (the request asks the store).
    pub(super) fn try_spend(&mut self, now: Nanos) -> bool {
        if self.has_tokens(now) {
            self.tokens -= 1;
            return true;
        }
        self.tokens = 0;
        false
    }

    /// Request `id`'s reservation asks for `want` tokens (its own included).
    pub(super) fn ask(&mut self, id: RequestId, want: u32) {
        self.asking = Some(id);
        self.asked = want;
    }

    /// The answer to request `id`'s reservation leased `leased` tokens at `now`: if it was the
    /// lease request, the lease holds what the store granted (no more than asked for, less the
    /// asking request's own), what was left of a current lease joining it, for `validity`.
    /// Returns whether it was the lease request.
    pub(super) fn answered(&mut self, now: Nanos, id: RequestId, leased: u32, validity: Nanos) -> bool {
        if self.asking != Some(id) {
            return false;
        }
        self.asking = None;
        let leased = leased.min(self.asked.saturating_sub(1));
        if leased > 0 {
            // The tokens left of a current lease join the new one: they are the store's as much
            // as the new ones (it counts each a whole window; spending one a little later at
            // worst meets the window check). Replacing them dropped the ones still out with
            // reservations that came back denied for another reason, unspent but counted.
            if !self.has_tokens(now) {
                self.tokens = 0;
            }
            self.tokens = self.tokens.saturating_add(leased);
            self.until = now.saturating_add(validity);
        }
        true
    }

    /// A spent token was not used (its reservation was not sent): it is good again while the
    /// lease is current at `now`. Returns whether it was taken back.
    pub(super) fn unspend(&mut self, now: Nanos) -> bool {
        if self.is_current(now) {
            self.tokens += 1;
            return true;
        }
        false
    }
}

/// The first global window, for [`RoundTrips::margin_at`]: when the first answered request
/// left, and the fastest round trip (from when it left) of the requests that left within a
/// global window of it.
#[derive(Debug, Clone, Copy)]
struct FirstWindow {
    start: Nanos,
    fastest: Nanos,
}

/// Round trips of recent responses, and what is learned from them: the margin the global
/// window is widened by, and the lead a bucket's next window may go by.
#[derive(Debug)]
pub(super) struct RoundTrips {
    /// Round trips of recent responses: from the send (for the lead) and from when the
    /// request left (for the global margin; the same unless the driver reports writes).
    samples: Recent<(Nanos, Nanos)>,
    /// Uplink delays up to a constant, where the server tells its clock (see [`Uplinks`]).
    uplinks: Uplinks,
    /// The way back of answers, where the server tells its clock (see [`Downlinks`]).
    downlinks: Downlinks,
    /// The first global window's floor on the global margin (see
    /// [`RoundTrips::margin_at`]).
    first_window: Option<FirstWindow>,
    /// The learned margin (see [`RoundTrips::learn`]); half `global_margin_max` until then.
    margin: Nanos,
    /// How much earlier than a window end it saw (an answer's arrival plus its reset-after) a
    /// request may be sent and still reach the server after that end: a lower bound on the
    /// fastest round trip (see [`RoundTrips::learn`]). 0 until 16 round trips are in.
    lead: Nanos,
}

impl RoundTrips {
    /// How much before a window end it saw a bucket's next request may go (see
    /// [`RoundTrips::learn`]).
    pub(super) fn lead(&self) -> Nanos {
        self.lead
    }

    /// Learns from the round trip of a request sent at `sent_at` that left at `left_at` (alone
    /// in flight or not) and was answered at `now`, the answer telling the server's clock
    /// (`server_time_ms`) or not; `window` and `margin_max` are the global window's. Returns
    /// how much before the window end it reports the next request may go (see
    /// [`Uplinks::lead`]), and the latest instant the request can have reached the server
    /// ([`Downlinks::arrived_by`]; the answer's own instant where the server does not tell
    /// its clock).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn learn_trip(
        &mut self,
        now: Nanos,
        (sent_at, left_at): (Nanos, Nanos),
        alone: bool,
        server_time_ms: Option<u64>,
        window: Nanos,
        margin_max: Nanos,
    ) -> (Nanos, Nanos) {
        let round_trip = now.saturating_sub(left_at);
        let mut answer_lead = 0;
        let mut uplink_widens = false;
        let mut arrived_by = now;
        if let Some(server_ms) = server_time_ms {
            // The server's clock at its answer less this process's monotonic clock when the
            // request left: its uplink (and the server's time to stamp the answer) up to a
            // constant. Monotonic, not the wall clock: exact to the nanosecond here, and never
            // stepped.
            let server = i128::from(server_ms) * i128::from(MILLISECOND);
            if let Ok(offset) = i64::try_from(server - i128::from(left_at)) {
                uplink_widens = self.uplinks.push(offset, round_trip, alone);
                answer_lead = self.uplinks.lead(offset, round_trip);
            }
            if let Ok(server) = i64::try_from(server) {
                arrived_by = self.downlinks.arrived_by(server, now);
            }
        }
        let trip = (now.saturating_sub(sent_at), now.saturating_sub(left_at), left_at);
        self.learn(window, margin_max, trip, uplink_widens);
        (answer_lead, arrived_by)
    }

    /// Before any round trip: the margin at `margin` (half `global_margin_max`), no lead.
    pub(super) fn new(margin: Nanos) -> Self {
        RoundTrips {
            samples: Recent::default(),
            uplinks: Uplinks::default(),
            downlinks: Downlinks::default(),
            first_window: None,
            margin,
            lead: 0,
        }
    }

    /// The margin the global window is widened by at `now`: the learned one
    /// ([`RoundTrips::learn`]), and while entries of the first global window may still be
    /// in the log, at least the first window's floor. The requests of a first burst may all
    /// have waited alike (connections opening, the server's accept queue, a runtime writing
    /// them late and not reporting it): a delay common to all of them, which no spread shows
    /// and which the next burst, on open connections, does not have. It is part of each of
    /// their round trips, so the fastest round trip of a request that left within a window of
    /// the first answered one, plus 5 ms, covers it. Not capped by `global_margin_max` (only by
    /// the window): a first burst that took 300 ms to reach the server holds its window that
    /// long, or the next burst meets it there. It holds while an entry of the first floor's
    /// worth of the window may be in the log (until a window and twice the floor after the
    /// first answered request left): the replacement of a later entry arrives after the first
    /// server window ends anyway, the common delay being less than the floor.
    pub(super) fn margin_at(&self, now: Nanos, window: Nanos) -> Nanos {
        match self.first_window {
            Some(first) => {
                let floor = first.fastest.saturating_add(5 * MILLISECOND).min(window);
                let until = first.start.saturating_add(window).saturating_add(floor.saturating_mul(2));
                if now < until { self.margin.max(floor) } else { self.margin }
            }
            None => self.margin,
        }
    }

    /// Widens the global window by the spread of observed round trips, counted from when each
    /// request left (see [`Limiter::handle_written`]): arrivals at the server are at most that
    /// much more bunched than the global log's entries. A sample's range underestimates the
    /// true range, so the margin is 1.5x the observed spread plus a 5 ms floor, capped by
    /// `global_margin_max`; until 16 samples are in, it stays at half the cap, and until they
    /// span a global window it also covers the fastest round trip (and beyond the cap, for the
    /// first window's entries: [`RoundTrips::margin_at`]).
    ///
    /// `from_send` counts from the [`Output::Send`] (the lead below), `from_left` from the
    /// transport's report that the request left (the same when the driver does not report).
    pub(super) fn learn(
        &mut self,
        window: Nanos,
        margin_max: Nanos,
        (from_send, from_left, left_at): (Nanos, Nanos, Nanos),
        uplink_widens: bool,
    ) {
        let first = self.first_window.get_or_insert(FirstWindow { start: left_at, fastest: from_left });
        let first_left = first.start;
        if left_at < first_left.saturating_add(window) {
            first.fastest = first.fastest.min(from_left);
        }
        // Recomputed at once also when an uplink falls outside all seen before (see [`Recent`]).
        if self.samples.push((from_send, from_left), from_left, uplink_widens) {
            // The extremes and one quantile: a fold and a selection, not a sort (up to 256
            // samples, every 16th answer).
            let (fastest, slowest) =
                self.samples.iter().fold((Nanos::MAX, 0), |(lo, hi), &(_, left)| (lo.min(left), hi.max(left)));
            let mut margin = spread_margin(fastest, slowest).saturating_add(5 * MILLISECOND);
            // Where the server tells its clock, the uplinks' own spread: a round trip also
            // holds the server's time to answer and the client's delay in reading the answer
            // (on a busy event loop, most of it), which do not bunch arrivals. Each uplink
            // sample is within about 2 ms (two headers, each to the millisecond). Never above
            // the round trips' margin.
            if let Some((lo, hi)) = self.uplinks.range() {
                let allowance = spread_margin(lo, hi).saturating_add(8 * MILLISECOND);
                margin = margin.min(allowance);
            }
            // Until the samples span a whole global window they may all come from one first
            // burst: the margin also covers the fastest of them (see
            // [`RoundTrips::margin_at`], which holds that uncapped for the first window's
            // entries).
            if left_at.saturating_sub(first_left) < window {
                margin = margin.max(fastest.saturating_add(5 * MILLISECOND));
            }
            self.margin = margin.min(margin_max);
            let mut sends: Vec<Nanos> = self.samples.iter().map(|&(send, _)| send).collect();
            let min = sends.iter().copied().min().unwrap_or(0);
            let rank = (sends.len() - 1) * 90 / 100;
            let high = *sends.select_nth_unstable(rank).1;
            // The answer that reported a window's end came back one trip after it, and a request
            // sent now reaches the server one trip later: together at least the fastest round
            // trip there is, which the fastest seen approaches only where round trips are
            // steady. So the lead is the fastest seen less twice the spread of the fastest nine
            // tenths, and only on a steady link (that spread within a tenth of the fastest);
            // elsewhere 0, and the next window waits for the reset the answer reported.
            // Less 3 ms more: the fastest round trip is not the sum of the fastest parts (one
            // real-time run took a reaction 0.2 ms inside the window it waited for with a
            // sub-millisecond spread).
            let jitter = high - min;
            self.lead = if jitter.saturating_mul(10) <= min {
                min.saturating_sub(2 * jitter).saturating_sub(3 * MILLISECOND)
            } else {
                0
            };
        }
    }
}

impl Identity {
    /// The identity named `name`, before any request of it.
    fn new(name: &str) -> Self {
        Identity {
            name: name.to_string(),
            sends: TimeLog::default(),
            unwritten: TimeLog::default(),
            arrived: TimeLog::default(),
            paused_until: 0,
            full_until: 0,
            learned: LearnedCap::default(),
            blocked: BTreeSet::new(),
            wake_at: None,
            unauthorized: false,
            queued: 0,
            lease: Lease::default(),
            send_log: SendLog::default(),
        }
    }

    /// The caller's key for the token.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// A request of the identity counted against its global limit is sent at `now`, its
    /// leaving not reported yet ([`Identity::written`] or [`Identity::arrived`] tells).
    pub(super) fn log_unwritten(&mut self, now: Nanos) {
        self.unwritten.insert(now);
    }

    /// Without a configured global limit: a send at `now`, kept for `span` to learn a
    /// token-wide limit from a refusal ([`Identity::learn_cap`]).
    pub(super) fn log_send(&mut self, now: Nanos, span: Nanos) {
        self.sends.record(now, span);
    }

    /// Moves one entry of the global log from `old` to `new`, keeping the log in time order,
    /// where it is: an unwritten request's entry stays one (a reservation granted: it is sent
    /// now), a written one is counted from `new`.
    pub(super) fn restamp(&mut self, old: Nanos, new: Nanos) {
        let log = if self.unwritten.take(old) {
            &mut self.unwritten
        } else {
            self.sends.take(old);
            &mut self.sends
        };
        log.insert(new);
    }

    /// The transport reported that the request whose entry is at `old` left at `new`: from
    /// now on it is counted from then, not held until its answer.
    pub(super) fn written(&mut self, old: Nanos, new: Nanos) {
        if !self.unwritten.take(old) {
            self.sends.take(old);
        }
        self.sends.insert(new);
    }

    /// The request whose entry is at `at` (its send) was answered while unwritten: its entry
    /// leaves the window at `end` (a global window after the latest instant it can have
    /// reached the server). Returns whether it was unwritten (a written request is counted
    /// from its report).
    pub(super) fn arrived(&mut self, at: Nanos, end: Nanos) -> bool {
        if !self.unwritten.take(at) {
            return false;
        }
        self.arrived.insert(end);
        true
    }

    /// Removes one entry at `at` from the global log.
    pub(super) fn drop_entry(&mut self, at: Nanos) {
        if !self.unwritten.take(at) {
            self.sends.take(at);
        }
    }

    /// How many entries the global log holds (over or not).
    pub(super) fn entries(&self) -> usize {
        self.sends.len() + self.unwritten.len() + self.arrived.len()
    }

    /// Every entry's end after `now`, in order; an unwritten request's taken `span` after its
    /// send (an estimate: it ends a window after its arrival, which its answer will tell).
    pub(super) fn ends_after(&self, now: Nanos, span: Nanos) -> Vec<Nanos> {
        let mut ends: Vec<Nanos> = self
            .sends
            .iter()
            .map(|s| s.saturating_add(span))
            .chain(self.unwritten.iter().map(|s| s.saturating_add(span)))
            .chain(self.arrived.iter())
            .filter(|&end| end > now)
            .collect();
        if !self.unwritten.is_empty() || !self.arrived.is_empty() {
            ends.sort_unstable();
        }
        ends
    }

    /// When the identity's global budget has room again with `limit` per window, or `None` if
    /// it has room now; `Nanos::MAX` when only an answer to one of its unwritten requests can
    /// make room. `lease`: whether a leased token may be spent (it skips the store's full
    /// window).
    pub(super) fn wait(&mut self, now: Nanos, span: Nanos, limit: usize) -> Option<Nanos> {
        if self.paused_until > now {
            return Some(self.paused_until);
        }
        if self.full_until > now && !self.lease.has_tokens(now) {
            return Some(self.full_until);
        }
        if limit == 0 {
            return None;
        }
        let count = self.window(now, span);
        if count < limit {
            return None;
        }
        // The entry that must leave the window before another may enter (`Nanos::MAX` when
        // only an answer can make room: an unwritten request's; the answer marks the identity
        // ready).
        Some(self.end_of(count - limit, span))
    }

    /// Held until then (a global 429, a restored pause): never shortened.
    pub(super) fn paused_until(&self) -> Nanos {
        self.paused_until
    }

    /// Holds the identity until `until` at least.
    pub(super) fn pause(&mut self, until: Nanos) {
        self.paused_until = self.paused_until.max(until);
    }

    /// Shared mode: the store's global window has no room for a new token until `until` at
    /// least. Returns until when it has none.
    pub(super) fn fill(&mut self, until: Nanos) -> Nanos {
        self.full_until = self.full_until.max(until);
        self.full_until
    }

    /// Whether the store's global window is full at `now` (see [`Identity::fill`]).
    pub(super) fn is_full(&self, now: Nanos) -> bool {
        self.full_until > now
    }

    /// Without a configured global limit: a global refusal at `now` whose hold ends at
    /// `paused_until` teaches a token-wide limit ([`LearnedCap`]): the sends within `span` (a
    /// global window and its margin) before it, less the refusals among them, per `window`.
    pub(super) fn learn_cap(&mut self, now: Nanos, span: Nanos, window: Nanos) {
        let l = &mut self.learned;
        l.refused = match l.refused {
            (first, n) if first.saturating_add(span) > now => (first, n + 1),
            _ => (now, 1),
        };
        let sent = self.sends.within(now, span);
        let admitted = (sent as u32).saturating_sub(l.refused.1).max(1);
        l.limit = if l.until > now { l.limit.min(admitted) } else { admitted };
        l.until = self.paused_until.saturating_add(window.saturating_mul(10));
    }

    /// The token-wide limit learned from refusals at `now`, `0` when none holds.
    pub(super) fn learned_limit(&self, now: Nanos) -> u32 {
        if self.learned.until > now { self.learned.limit } else { 0 }
    }

    /// The head `key` waits for the identity's global budget.
    pub(super) fn block(&mut self, key: ReadyKey) {
        self.blocked.insert(key);
    }

    /// The head `key` no longer waits for the identity's global budget.
    pub(super) fn unblock(&mut self, key: &ReadyKey) {
        self.blocked.remove(key);
    }

    /// The first head waiting for the identity's global budget (highest priority, then
    /// oldest), taken out.
    pub(super) fn pop_blocked(&mut self) -> Option<ReadyKey> {
        self.blocked.pop_first()
    }

    /// The first waiting head (highest priority, then oldest).
    pub(super) fn first_blocked(&self) -> Option<ReadyKey> {
        self.blocked.first().copied()
    }

    /// How many heads wait for the identity's global budget.
    pub(super) fn blocked_len(&self) -> usize {
        self.blocked.len()
    }

    /// The wake-up armed for the waiting heads.
    pub(super) fn wake_at(&self) -> Option<Nanos> {
        self.wake_at
    }

    /// Arms the waiting heads' wake-up at `t`; whether that is new (a timer must be armed).
    pub(super) fn set_wake(&mut self, t: Nanos) -> bool {
        if self.wake_at == Some(t) {
            return false;
        }
        self.wake_at = Some(t);
        true
    }

    /// The wake-up fired.
    pub(super) fn clear_wake(&mut self) {
        self.wake_at = None;
    }

    /// Whether a 401 stopped the identity (`stop_on_unauthorized`).
    pub(super) fn is_unauthorized(&self) -> bool {
        self.unauthorized
    }

    pub(super) fn mark_unauthorized(&mut self) {
        self.unauthorized = true;
    }

    /// Requests of the identity queued that count against its global limit.
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    pub(super) fn enqueued(&mut self) {
        self.queued += 1;
    }

    pub(super) fn dequeued(&mut self) {
        self.queued -= 1;
    }

    /// Shared mode: the global lease.
    pub(super) fn lease(&self) -> &Lease {
        &self.lease
    }

    pub(super) fn lease_mut(&mut self) -> &mut Lease {
        &mut self.lease
    }

    /// Shared mode: the sends a store may not count, for after an outage.
    pub(super) fn send_log(&mut self) -> &mut SendLog {
        &mut self.send_log
    }

    /// The entries of the global window at `now`, the ones over by then dropped: each written
    /// request's counted for `span` after it left, each unwritten one's until its answer, each
    /// answered unwritten one's until its own end.
    fn window(&mut self, now: Nanos, span: Nanos) -> usize {
        self.sends.prune(now, span);
        // Ends, not starts: each is over once reached.
        self.arrived.prune(now, 0);
        self.sends.len() + self.unwritten.len() + self.arrived.len()
    }

    /// The end of the window's `k`th entry (from 0) in the order they end (see
    /// [`Identity::window`]), or `Nanos::MAX` when that is an unwritten request's.
    fn end_of(&self, k: usize, span: Nanos) -> Nanos {
        let (mut sends, mut arrived) = (0, 0);
        for _ in 0..k {
            let a = self.sends.get(sends).map_or(Nanos::MAX, |t| t.saturating_add(span));
            let b = self.arrived.get(arrived).unwrap_or(Nanos::MAX);
            if a == Nanos::MAX && b == Nanos::MAX {
                return Nanos::MAX;
            }
            if a <= b {
                sends += 1;
            } else {
                arrived += 1;
            }
        }
        let a = self.sends.get(sends).map_or(Nanos::MAX, |t| t.saturating_add(span));
        let b = self.arrived.get(arrived).unwrap_or(Nanos::MAX);
        a.min(b)
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;

    use super::{Identities, Identity, Lease, RoundTrips};
    use crate::types::{MILLISECOND, Nanos, SECOND};

    const SPAN: Nanos = SECOND;

    #[test]
    fn identities_are_interned_once_and_the_default_kept_apart() {
        let mut ids = Identities::default();
        let a = ids.intern("a");
        let unnamed = ids.intern("");
        assert_eq!(ids.intern("a"), a);
        assert_eq!(ids.find(""), Some(unnamed));
        assert_eq!(ids.find("b"), None);
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[a].name(), "a");
    }

    #[test]
    fn the_global_window_counts_written_sends_for_a_span_and_unwritten_ones_until_answered() {
        let mut ident = Identity::new("t");
        ident.log_unwritten(0);
        ident.log_unwritten(10);
        // Limit 2: full, and only an answer can tell when an unwritten entry ends.
        assert_eq!(ident.wait(30, SPAN, 2), Some(Nanos::MAX));
        assert_eq!(ident.wait(30, SPAN, 3), None);
        // The transport reports the second left at 20: it ends a span after that.
        ident.written(10, 20);
        assert_eq!(ident.wait(30, SPAN, 2), Some(20 + SPAN));
        // The first is answered: it reached the server by 40 at the latest, so it ends a
        // window after that.
        assert!(ident.arrived(0, 40 + SPAN));
        assert!(!ident.arrived(20, 50), "a written entry is counted from its report, not its answer");
        assert_eq!(ident.wait(30, SPAN, 2), Some(20 + SPAN));
        assert_eq!(ident.wait(20 + SPAN, SPAN, 2), None, "the written entry's span is over");
        assert_eq!(ident.entries(), 1);
        assert_eq!(ident.ends_after(0, SPAN), [40 + SPAN]);
    }

    #[test]
    fn a_restamped_entry_stays_unwritten_or_written_as_it_was() {
        let mut ident = Identity::new("t");
        ident.log_unwritten(5);
        ident.restamp(5, 8);
        assert!(ident.arrived(8, 100), "still unwritten, at its new time");
        let mut ident = Identity::new("t");
        ident.log_unwritten(5);
        ident.written(5, 6);
        ident.restamp(6, 9);
        assert_eq!(ident.ends_after(0, SPAN), [9 + SPAN]);
        ident.drop_entry(9);
        assert_eq!(ident.entries(), 0);
    }

    #[test]
    fn pauses_and_full_windows_hold_and_never_shorten() {
        let mut ident = Identity::new("t");
        ident.pause(100);
        ident.pause(50);
        assert_eq!(ident.paused_until(), 100);
        assert_eq!(ident.wait(10, SPAN, 0), Some(100), "a pause holds even without a limit");
        assert_eq!(ident.fill(200), 200);
        assert_eq!(ident.fill(150), 200);
        assert_eq!(ident.wait(120, SPAN, 0), Some(200), "the store's window is full");
        assert!(ident.is_full(199) && !ident.is_full(200));
    }

    #[test]
    fn a_leased_token_skips_the_full_store_window() {
        let mut ident = Identity::new("t");
        ident.fill(1000);
        ident.lease_mut().ask(7, 3);
        assert!(ident.lease().awaits_answer(0));
        assert!(ident.lease_mut().answered(0, 7, 5, 500), "its own lease request");
        assert!(!ident.lease().awaits_answer(0));
        assert_eq!(ident.wait(10, SPAN, 0), None, "two tokens in hand: the full window does not hold");
        assert!(ident.lease_mut().try_spend(10));
        assert!(ident.lease_mut().try_spend(10));
        assert!(!ident.lease_mut().try_spend(10), "the lease held 2: 5 granted is more than asked");
        assert_eq!(ident.wait(10, SPAN, 0), Some(1000));
        assert!(ident.lease_mut().unspend(10));
        assert!(ident.lease_mut().try_spend(10));
        assert!(!ident.lease_mut().unspend(500), "a lapsed lease takes nothing back");
    }

    #[test]
    fn a_lease_answer_for_another_request_changes_nothing() {
        let mut lease = Lease::default();
        lease.ask(1, 4);
        assert!(!lease.answered(0, 2, 4, 100));
        assert!(lease.awaits_answer(0));
        assert!(lease.answered(0, 1, 0, 100), "granted none");
        assert!(!lease.has_tokens(0));
        assert!(!lease.is_current(0));
    }

    #[test]
    fn a_cap_is_learned_from_what_a_window_admitted_before_a_refusal() {
        let mut ident = Identity::new("t");
        for t in [0, 100, 200, 300, 400] {
            ident.log_send(t * MILLISECOND, SPAN);
        }
        ident.pause(2 * SECOND);
        let now = 500 * MILLISECOND;
        ident.learn_cap(now, SPAN, SECOND);
        assert_eq!(ident.learned_limit(now), 4, "5 sent within the span, 1 refused");
        ident.learn_cap(now, SPAN, SECOND);
        assert_eq!(ident.learned_limit(now), 3, "a second refusal in the same window");
        // Held for ten windows after the pause ends, then probed again.
        assert_eq!(ident.learned_limit(12 * SECOND - 1), 3);
        assert_eq!(ident.learned_limit(12 * SECOND), 0);
    }

    #[test]
    fn waiting_heads_leave_in_priority_order_and_wake_ups_are_armed_once() {
        let mut ident = Identity::new("t");
        ident.block((Reverse(0), 5, 1));
        ident.block((Reverse(1), 9, 2));
        assert_eq!(ident.first_blocked(), Some((Reverse(1), 9, 2)), "higher priority first");
        ident.unblock(&(Reverse(1), 9, 2));
        ident.block((Reverse(0), 7, 3));
        assert_eq!(ident.blocked_len(), 2);
        assert_eq!(ident.pop_blocked(), Some((Reverse(0), 5, 1)), "then the oldest");
        assert_eq!(ident.pop_blocked(), Some((Reverse(0), 7, 3)));
        assert_eq!(ident.pop_blocked(), None);
        assert_eq!(ident.blocked_len(), 0);
        assert!(ident.set_wake(10));
        assert!(!ident.set_wake(10), "already armed for 10");
        ident.clear_wake();
        assert_eq!(ident.wake_at(), None);
        ident.enqueued();
        ident.enqueued();
        ident.dequeued();
        assert_eq!(ident.queued(), 1);
        assert!(!ident.is_unauthorized());
        ident.mark_unauthorized();
        assert!(ident.is_unauthorized());
    }

    #[test]
    fn steady_round_trips_give_a_lead_and_the_first_window_a_floor() {
        let mut trips = RoundTrips::new(25 * MILLISECOND);
        assert_eq!(trips.margin_at(0, SECOND), 25 * MILLISECOND);
        assert_eq!(trips.lead(), 0);
        let trip = 100 * MILLISECOND;
        for i in 0..16u64 {
            let sent = i * MILLISECOND;
            let (answer_lead, arrived_by) = trips.learn_trip(sent + trip, (sent, sent), false, None, SECOND, 50 * MILLISECOND);
            assert_eq!((answer_lead, arrived_by), (0, sent + trip), "no server clock: no lead, arrived by the answer");
        }
        // 16 steady trips of 100 ms: the lead is the fastest less 3 ms.
        assert_eq!(trips.lead(), 97 * MILLISECOND);
        // The first window's entries keep a floor of the fastest trip plus 5 ms, beyond the
        // 50 ms cap.
        assert_eq!(trips.margin_at(100 * MILLISECOND, SECOND), 105 * MILLISECOND);
        assert_eq!(trips.margin_at(10 * SECOND, SECOND), 50 * MILLISECOND, "later, the capped margin");
    }
}
