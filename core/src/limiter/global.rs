//! The global window: the identities requests are enqueued under (each with its log of
//! sends, pause, learned cap and lease), when an identity's budget has room, and the round
//! trips its margin and the bucket windows' send lead are learned from.

use super::*;
use super::latency::{Downlinks, FirstWindow, Uplinks, spread_margin};
use super::timelog::TimeLog;

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
        self.list.push(Identity {
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
        });
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
    pub(super) name: String,
    /// Send times of non-exempt requests within the global window (+ margin): with a
    /// global limit, the requests whose transport reported when they left
    /// ([`Limiter::handle_written`]), each counted from then. Without a configured global
    /// limit, every send, kept for [`LearnedCap`] (never refunded: a little cautious).
    pub(super) sends: TimeLog,
    /// With a global limit: the send times of requests in flight whose leaving no transport
    /// reported. Each may still be on its way (a busy runtime can write a request hundreds of
    /// milliseconds after its `Send`, later than any margin allows for), so each counts
    /// against the window until its answer, however long that takes.
    pub(super) unwritten: TimeLog,
    /// With a global limit: when the entries of requests answered while unwritten leave the
    /// window, in order: a window after the latest instant each can have reached the server
    /// (its answer's [`Downlinks::arrived_by`]).
    pub(super) arrived: TimeLog,
    pub(super) paused_until: Nanos,
    /// Shared mode: the store's global window has no room for a new token until then (a
    /// `global` denial of a reservation that asked for tokens while this process held a
    /// current lease). Unlike `paused_until` it holds only requests that cannot spend a
    /// leased token: one that can skips the store's window check.
    pub(super) full_until: Nanos,
    /// Without a configured global limit: the token-wide limit learned from refusals.
    pub(super) learned: LearnedCap,
    /// Queues whose head waits for this identity's global budget.
    pub(super) blocked: BTreeSet<ReadyKey>,
    pub(super) wake_at: Option<Nanos>,
    pub(super) unauthorized: bool,
    /// Non-exempt requests queued, for predictions.
    pub(super) queued: usize,
    /// Shared mode: the global lease (see [`crate::shared`], "Leases").
    pub(super) lease: Lease,
    /// Shared mode: the sends a store may not count, for after an outage.
    pub(super) send_log: SendLog,
}

/// A token-wide limit learned from refusals of scope global where no global limit is
/// configured (GitHub's secondary limits, say) and the refusal holds the token for at most two
/// global windows (a longer hold is of a limit over a longer time than one window's sends
/// measure; the hold alone then paces the token): the API admitted what the identity sent
/// within one global window before the refusal, less the refusals in it; the identity stays at
/// that many per global window until ten global windows after the refusal's hold ends (then it
/// probes again), as a shared-scope limit is learned for its resource.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct LearnedCap {
    /// The cap per global window, while `until` is ahead; `0`: none.
    pub(super) limit: u32,
    pub(super) until: Nanos,
    /// The refusals counted against the sends of the window they fell in: the first one's
    /// time, and how many.
    pub(super) refused: (Nanos, u32),
}

/// Shared mode: global tokens the store leased to this process for one identity.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Lease {
    /// Tokens left: each lets one reservation spend a leased token (`global_want: 0`) instead
    /// of asking the store's window.
    pub(super) tokens: u32,
    /// The tokens are kept until then (half a global window after the latest lease's answer:
    /// what was left of a current lease joins the next one; the store counts each token a
    /// whole window, so one spent later still finds its token there, or is checked against
    /// the window like any other).
    pub(super) until: Nanos,
    /// The request whose reservation asks for a lease now: the identity's other requests wait
    /// for its answer instead of each asking.
    pub(super) asking: Option<RequestId>,
    /// How many tokens it asked for (its own included): a store that leases more is not
    /// believed.
    pub(super) asked: u32,
}

impl Lease {
    /// Whether a token is left that may still be spent at `now`.
    pub(super) fn has_tokens(&self, now: Nanos) -> bool {
        self.tokens > 0 && now < self.until
    }
}

/// Round trips of recent responses, and what is learned from them: the margin the global
/// window is widened by, and the lead a bucket's next window may go by.
#[derive(Debug)]
pub(super) struct RoundTrips {
    /// Round trips of recent responses: from the send (for the lead) and from when the
    /// request left (for the global margin; the same unless the driver reports writes).
    samples: Recent<(Nanos, Nanos)>,
    /// Uplink delays up to a constant, where the server tells its clock (see [`Uplinks`]).
    pub(super) uplinks: Uplinks,
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
    pub(super) lead: Nanos,
}

impl RoundTrips {
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

impl Limiter {
    /// The margin the global window is widened by at `now` ([`RoundTrips::margin_at`]).
    pub(super) fn global_margin_at(&self, now: Nanos) -> Nanos {
        self.trips.margin_at(now, self.config.global_window)
    }

    /// How long an entry of an identity's global log counts at `now`: the global window and
    /// its margin.
    pub(super) fn global_span(&self, now: Nanos) -> Nanos {
        self.config.global_window.saturating_add(self.global_margin_at(now))
    }

    /// Learns from the round trip of the request sent as `flight` and answered at `now` (the
    /// answer telling the server's clock, `server_time_ms`, or not). Returns how much before
    /// the window end it reports the next request may go (see [`Uplinks::lead`]), and the
    /// latest instant the request can have reached the server ([`Downlinks::arrived_by`]; the
    /// answer's own instant where the server does not tell its clock).
    pub(super) fn learn_trip(&mut self, now: Nanos, flight: Flight, server_time_ms: Option<u64>) -> (Nanos, Nanos) {
        let round_trip = now.saturating_sub(flight.left_at);
        let mut answer_lead = 0;
        let mut uplink_widens = false;
        let mut arrived_by = now;
        if let Some(server_ms) = server_time_ms {
            // The server's clock at its answer less this process's monotonic clock when the
            // request left: its uplink (and the server's time to stamp the answer) up to a
            // constant. Monotonic, not the wall clock: exact to the nanosecond here, and never
            // stepped.
            let server = i128::from(server_ms) * i128::from(MILLISECOND);
            if let Ok(offset) = i64::try_from(server - i128::from(flight.left_at)) {
                uplink_widens = self.trips.uplinks.push(offset, round_trip, flight.alone);
                answer_lead = self.trips.uplinks.lead(offset, round_trip);
            }
            if let Ok(server) = i64::try_from(server) {
                arrived_by = self.trips.downlinks.arrived_by(server, now);
            }
        }
        self.learn_round_trip(
            now.saturating_sub(flight.sent_at),
            now.saturating_sub(flight.left_at),
            flight.left_at,
            uplink_widens,
        );
        (answer_lead, arrived_by)
    }

    /// Learns from a round trip: `from_send` counts from the [`Output::Send`], `from_left`
    /// from when the request left (at `left_at`); see [`RoundTrips::learn`].
    pub(super) fn learn_round_trip(&mut self, from_send: Nanos, from_left: Nanos, left_at: Nanos, uplink_widens: bool) {
        let (window, max) = (self.config.global_window, self.config.global_margin_max);
        self.trips.learn(window, max, (from_send, from_left, left_at), uplink_widens);
    }

    /// Moves one entry of the identity's global log from `old` to `new`, keeping the log in
    /// time order, where it is: an unwritten request's entry stays one (a reservation granted:
    /// it is sent now), a written one is counted from `new`.
    pub(super) fn restamp_global(&mut self, iid: Iid, old: Nanos, new: Nanos) {
        let ident = &mut self.identities[iid];
        let log = if ident.unwritten.take(old) {
            &mut ident.unwritten
        } else {
            ident.sends.take(old);
            &mut ident.sends
        };
        log.insert(new);
    }

    /// The transport reported that the request whose entry is at `old` left at `new`: from
    /// now on it is counted from then, with the learned margin ([`RoundTrips::margin_at`]),
    /// not held until its answer.
    pub(super) fn written_global(&mut self, iid: Iid, old: Nanos, new: Nanos) {
        let ident = &mut self.identities[iid];
        if !ident.unwritten.take(old) {
            ident.sends.take(old);
        }
        ident.sends.insert(new);
        if !ident.blocked.is_empty() {
            // Its entry now ends at a known time: the waiting queues may arm a wake-up.
            self.mark_identity_ready(iid);
        }
    }

    /// The request whose entry is at `at` (its send) was answered while unwritten, and reached
    /// the server at `arrived_by` at the latest ([`Limiter::learn_trip`]): its entry leaves
    /// the window a global window after that, whatever delayed it (a busy runtime writing it
    /// long after its send), and the identity's waiting queues go again (it ends at a known
    /// time now). Sound without any margin: a request sent after that reaches the server after
    /// it, a window after this one arrived at the latest. (A margin from the uplinks' spread
    /// would end it sooner only by assuming the next request's uplink is no faster than the
    /// fastest seen, which a first burst's common delay breaks.)
    pub(super) fn arrived_global(&mut self, iid: Iid, at: Nanos, arrived_by: Nanos) {
        let ident = &mut self.identities[iid];
        if !ident.unwritten.take(at) {
            return; // a written request: it is counted from its report
        }
        ident.arrived.insert(arrived_by.saturating_add(self.config.global_window));
        if !ident.blocked.is_empty() {
            self.mark_identity_ready(iid);
        }
    }

    /// Removes one entry at `at` from the identity's global log.
    pub(super) fn drop_global_entry(&mut self, iid: Iid, at: Nanos) {
        let ident = &mut self.identities[iid];
        if !ident.unwritten.take(at) {
            ident.sends.take(at);
        }
    }

    /// Moves every queue waiting on an identity's global budget back to `ready`.
    pub(super) fn mark_identity_ready(&mut self, iid: Iid) {
        let blocked = std::mem::take(&mut self.identities[iid].blocked);
        for key in blocked {
            let qid = key.2;
            if let Some(Some(q)) = self.queues.get_mut(qid)
                && q.slot == Slot::blocked(key)
            {
                q.slot = Slot::ready(key);
                self.ready.insert(key);
            }
        }
    }

    /// The identity's global limit per global window: the configured one, else a limit learned
    /// from refusals while it lasts ([`LearnedCap`]), else `0` (none).
    pub(super) fn global_limit_of(&self, now: Nanos, iid: Iid) -> u32 {
        if self.config.global_limit > 0 {
            return self.config.global_limit;
        }
        let learned = &self.identities[iid].learned;
        if learned.until > now { learned.limit } else { 0 }
    }

    /// When the identity's global budget has room again, or `None` if it has room now;
    /// `Nanos::MAX` when only an answer to one of its unwritten requests can make room (the
    /// answer marks the identity ready).
    pub(super) fn global_wait(&mut self, now: Nanos, iid: Iid) -> Option<Nanos> {
        if let Some(t) = self.outage_global_hold(now) {
            return Some(t);
        }
        let limit = share_of(self.global_limit_of(now, iid), self.outage_share()) as usize;
        let span = self.global_span(now);
        let ident = &mut self.identities[iid];
        if ident.paused_until > now {
            return Some(ident.paused_until);
        }
        if ident.full_until > now && !ident.lease.has_tokens(now) {
            return Some(ident.full_until);
        }
        if limit == 0 {
            return None;
        }
        let count = ident.window(now, span);
        if count < limit {
            return None;
        }
        // The entry that must leave the window before another may enter (`Nanos::MAX` when
        // only an answer can make room: an unwritten request's; the answer marks the identity
        // ready).
        Some(ident.end_of(count - limit, span))
    }

    /// A lower bound on when the identity's global budget lets one more request through, with
    /// `extra` requests of the same identity ahead of it.
    pub(super) fn global_estimate(&self, now: Nanos, iid: Iid, extra: usize) -> Nanos {
        let ident = &self.identities[iid];
        let mut t = now.max(ident.paused_until);
        let limit = share_of(self.global_limit_of(now, iid), self.outage_share()) as usize;
        if limit == 0 {
            return t;
        }
        let span = self.global_span(now);
        // Every entry's end, in order; an unwritten request's taken a window and the margin
        // after its send (an estimate: it ends a window after its arrival, which its answer
        // will tell).
        let mut ends: Vec<Nanos> = ident
            .sends
            .iter()
            .map(|s| s.saturating_add(span))
            .chain(ident.unwritten.iter().map(|s| s.saturating_add(span)))
            .chain(ident.arrived.iter())
            .filter(|&end| end > now)
            .collect();
        if !ident.unwritten.is_empty() || !ident.arrived.is_empty() {
            ends.sort_unstable();
        }
        let recent = ends.len();
        let ahead = recent + ident.queued.max(extra);
        if ahead >= limit {
            // The earliest the window can next open, then one more window per `limit` ahead.
            let first = if recent >= limit { ends[recent - limit] } else { now };
            let windows = (ahead / limit) as u64 - 1;
            t = t.max(first.saturating_add(span.saturating_mul(windows)));
        }
        t
    }
}

impl Identity {
    /// The entries of the global window at `now`, the ones over by then dropped: each written
    /// request's counted for `span` after it left, each unwritten one's until its answer, each
    /// answered unwritten one's until its own end.
    pub(super) fn window(&mut self, now: Nanos, span: Nanos) -> usize {
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
