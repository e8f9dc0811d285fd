//! A bucket's window as the limiter knows it: its limit, remaining and reset from the
//! headers, the sends of the local window and the ghosts it may hold, the sliding log, a
//! shared-scope cap, and the gate a queue's head passes ([`Bucket::gate`]); the header report
//! that updates it ([`Bucket::report`]), a 429's hold ([`Bucket::hold`]), a shared-scope
//! refusal's cap ([`Bucket::refuse_shared`]) and a send re-stamped when its reservation is
//! granted ([`Bucket::restamp_send`]).
//!
//! Its fields are its own: the limiter reads and changes a bucket only through these methods,
//! and the unit tests below build one without a limiter.

use std::sync::Arc;

use crate::types::{Nanos, RateLimitInfo, SECOND};

use super::outage::share_of;
use super::timelog::TimeLog;

/// Whether a gate lets the next request go (a bucket's, the invalid-request budget's, the
/// store's in an outage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gate {
    Open,
    /// Closed until a known time.
    Until(Nanos),
    /// Closed until some response arrives.
    UntilResponse,
}

#[derive(Debug, Default)]
pub(super) struct Bucket {
    /// Headers have been seen (or the route proved to have none).
    known: bool,
    /// A success came back without rate-limit headers: only the global limit applies.
    unlimited: bool,
    limit: u32,
    /// [`Bucket::reported`], when [`Bucket::HAS_REPORTED`] is set in `has`.
    reported_value: u32,
    /// [`Bucket::reset_at`], when [`Bucket::HAS_RESET_AT`] is set in `has`.
    reset_at_value: Nanos,
    /// Which of the optional values are set: an `Option` of each would add a tag beside it
    /// (8 bytes beside a `u64`, which has no spare value for `None`), in every bucket.
    has: u8,
    /// `reset_at` is an estimate from the window length, not yet confirmed by a response.
    reset_provisional: bool,
    /// When the next window's requests may go by the answers' own trips: the latest of each
    /// reporting answer's end less its lead ([`Uplinks::lead`]); `reset_at` itself where no
    /// answer had one. Meaningful only while `reset_at` is set and not provisional.
    reset_ready: Nanos,
    /// Counts local resets; responses to requests sent before the last one are stale.
    epoch: u64,
    sends_in_window: u32,
    /// Requests still in flight at the last local reset (they may land in the new window).
    carried: u32,
    /// The server's window appears to slide: slots come back one by one.
    sliding: bool,
    /// [`Bucket::period`], when [`Bucket::HAS_PERIOD`] is set in `has`.
    period_value: Nanos,
    /// The longest `reset_after` any answer gave: a fallback window estimate.
    longest_reset: Nanos,
    /// When the last request of this bucket was sent.
    last_send: Nanos,
    /// [`Bucket::window_first_send`], when [`Bucket::HAS_FIRST_SEND`] is set in `has`.
    first_send_value: Nanos,
    /// An upper bound on the window length: a reported window end minus the first send of
    /// the local window (that send arrived at or after the server's window start).
    window_upper: Nanos,
    /// What few buckets need: ghosts, a sliding log, a shared-scope cap. `None` until one is
    /// needed, so that the many buckets that never need them pay one pointer.
    rare: Option<Box<BucketRare>>,
}

/// A bucket's optional values, each a value and a bit of `has`.
macro_rules! optional {
    ($($(#[$doc:meta])* $get:ident, $set:ident: $t:ty = $value:ident, $bit:ident = $mask:expr;)*) => {
        impl Bucket {
            $(const $bit: u8 = $mask;)*
            $(
                $(#[$doc])*
                pub(super) fn $get(&self) -> Option<$t> {
                    (self.has & Self::$bit != 0).then_some(self.$value)
                }

                fn $set(&mut self, value: Option<$t>) {
                    self.$value = value.unwrap_or_default();
                    self.has = if value.is_some() { self.has | Self::$bit } else { self.has & !Self::$bit };
                }
            )*
        }
    };
}

optional! {
    /// The lowest `remaining` the server reported in the current window (`None` until a
    /// response from this window arrives). What may still be sent is this minus what is in
    /// flight: the lowest report is the server's latest state, and anything it did not count
    /// yet is either still in flight or came back with a lower report.
    reported, set_reported: u32 = reported_value, HAS_REPORTED = 1;
    /// End of the current window as the client sees it; `None` after a local reset until the
    /// next response tells (or a provisional end from the learned window length).
    reset_at, set_reset_at: Nanos = reset_at_value, HAS_RESET_AT = 2;
    /// Window length, learned from the first answer of a window (an upper bound).
    period, set_period: Nanos = period_value, HAS_PERIOD = 4;
    /// When the first request since the last local reset was sent.
    window_first_send, set_window_first_send: Nanos = first_send_value, HAS_FIRST_SEND = 8;
}

/// The parts of a [`Bucket`] few buckets need ([`Bucket::rare`]).
#[derive(Debug, Default)]
struct BucketRare {
    /// Requests the current window may hold that no report may count (cancelled in flight,
    /// failed after maybe reaching the server, answered without a count, or answered from
    /// before the local reset): they count as in flight until the window resets, or until a
    /// report proves them counted (see [`Ghost`]).
    ghosts: Vec<Ghost>,
    /// Send times, kept while `sliding` (at most `limit`, capped).
    send_log: TimeLog,
    /// A shared-scope limit below the bucket's, learned from `shared` 429s: how many requests a
    /// window may send (the fewest a window got through: what it sent less what the resource
    /// refused), and until when that is remembered.
    shared_cap: Option<(u32, Nanos)>,
    /// Shared-scope 429s of the local window `epoch`: (epoch, count).
    shared_refused: (u64, u32),
}

/// The sliding log of a bucket that has none.
static NO_SEND_LOG: TimeLog = TimeLog::new();

const SLIDING_LOG_CAP: u32 = 4096;

impl Bucket {
    /// A new bucket, knowing its window's length if learned from another of its hash.
    pub(super) fn with_period(period: Option<Nanos>) -> Self {
        let mut bucket = Bucket::default();
        bucket.set_period(period);
        bucket
    }

    /// Its rare parts, made when first needed.
    fn rare_mut(&mut self) -> &mut BucketRare {
        self.rare.get_or_insert_default()
    }

    /// Its ghosts ([`BucketRare::ghosts`]).
    fn ghosts(&self) -> &[Ghost] {
        self.rare.as_ref().map_or(&[], |r| &r.ghosts)
    }

    /// Its sliding log ([`BucketRare::send_log`]).
    fn send_log(&self) -> &TimeLog {
        self.rare.as_ref().map_or(&NO_SEND_LOG, |r| &r.send_log)
    }

    /// Its shared-scope cap ([`BucketRare::shared_cap`]).
    fn shared_cap(&self) -> Option<(u32, Nanos)> {
        self.rare.as_ref().and_then(|r| r.shared_cap)
    }

    /// The window length as well as it is known (1 s when nothing is known).
    pub(super) fn window_estimate(&self) -> Nanos {
        self.period().unwrap_or_else(|| {
            let seen = self.longest_reset.max(self.window_upper);
            if seen > 0 { seen } else { SECOND }
        })
    }

    /// The window's length as the server measures it from an arrival, as well as it is known:
    /// the longest reset a success reported (a window's first request is told the whole
    /// window, less the server's time between its arrival and its answer), at most
    /// [`Bucket::window_estimate`]. A window a request opened ends at most this long after its
    /// answer.
    fn window_floor(&self) -> Nanos {
        let estimate = self.window_estimate();
        if self.longest_reset > 0 { self.longest_reset.min(estimate) } else { estimate }
    }

    /// How much before `reset_at` the next window's requests may go and still reach the server
    /// after the window's end: `lead` ([`RoundTrips::lead`]) when a response reported the end
    /// (`reset_at` is then the end plus that answer's trip back), 0 for an end estimated from
    /// the window length.
    fn lead(&self, lead: Nanos) -> Nanos {
        if self.reset_provisional { 0 } else { lead }
    }

    /// When the next window's requests may go: `reset_at` less the link's lead
    /// ([`RoundTrips::lead`]), or the answers' own `reset_ready` where that is earlier (each
    /// rule alone keeps the next request after the window's end).
    fn ready_at(&self, lead: Nanos) -> Option<Nanos> {
        let reset = self.reset_at()?;
        let by_link = reset.saturating_sub(self.lead(lead));
        Some(if self.reset_provisional { by_link } else { by_link.min(self.reset_ready) })
    }

    /// Starts the next window locally once the current one's requests may go
    /// ([`Bucket::ready_at`]): what is in flight (and the ghosts) is carried into it.
    pub(super) fn roll_if_due(&mut self, now: Nanos, lead: Nanos, in_flight: usize) {
        if !self.known || self.unlimited {
            return;
        }
        if self.ready_at(lead).is_some_and(|ready| ready <= now) {
            self.set_reset_at(None);
            self.epoch += 1;
            self.sends_in_window = 0;
            self.carried = self.outstanding(in_flight);
            if let Some(rare) = &mut self.rare {
                rare.ghosts.clear();
            }
            self.set_reported(None);
            self.reset_provisional = false;
            self.set_window_first_send(None);
        }
    }

    /// The bucket's limit, or the shared-scope limit learned below it; of that, this
    /// process's `share` (see [`share_of`]: 1 but in a fail-open store outage).
    fn effective_limit(&self, share: u32) -> u32 {
        share_of(self.shared_cap().map_or(self.limit, |(cap, _)| self.limit.min(cap)), share)
    }

    /// Requests counted as in flight for this bucket.
    fn outstanding(&self, in_flight: usize) -> u32 {
        (in_flight as u32).saturating_add(self.ghosts().len() as u32)
    }

    /// How many more requests the window allows, given `in_flight` answers outstanding and
    /// this process's `share` of the limits. With a share (or a shared-scope cap), what the
    /// server reports is an upper bound only: this process's own sends in the window count
    /// against its part of the limit.
    fn available(&self, in_flight: usize, share: u32) -> u32 {
        let outstanding = self.outstanding(in_flight);
        let local = self
            .effective_limit(share)
            .saturating_sub(self.carried)
            .saturating_sub(self.sends_in_window);
        match self.reported() {
            Some(r) if self.shared_cap().is_some() || share > 1 => r.saturating_sub(outstanding).min(local),
            Some(r) => r.saturating_sub(outstanding),
            None => local,
        }
    }

    /// Brings the window up to `now` before its gate is asked: a shared-scope cap whose time
    /// is over is dropped, the window rolls if due ([`Bucket::roll_if_due`]), and the sliding
    /// log keeps only the sends still within a window.
    pub(super) fn refresh(&mut self, now: Nanos, lead: Nanos, in_flight: usize) {
        if let Some(rare) = &mut self.rare
            && rare.shared_cap.is_some_and(|(_, until)| until <= now)
        {
            rare.shared_cap = None;
        }
        self.roll_if_due(now, lead, in_flight);
        if self.known
            && !self.unlimited
            && self.sliding
            && let Some(period) = self.period()
            && let Some(rare) = &mut self.rare
        {
            rare.send_log.prune(now, period);
        }
    }

    /// A request of the bucket is sent at `now`: it takes a slot of the window (and opens it,
    /// with an end estimated from the window length until an answer tells). Returns its place
    /// in the window and the window's epoch.
    pub(super) fn take_slot(&mut self, now: Nanos) -> (u32, u64) {
        self.sends_in_window = self.sends_in_window.saturating_add(1);
        self.last_send = now;
        if self.window_first_send().is_none() {
            self.set_window_first_send(Some(now));
        }
        if self.known && !self.unlimited && self.reset_at().is_none() && self.sends_in_window == 1 {
            // A new window opens with this send; until a response says when it ends, assume
            // the learned window length, so lost answers never leave the bucket without a reset.
            self.set_reset_at(Some(now.saturating_add(self.window_estimate())));
            self.reset_provisional = true;
        }
        if self.sliding {
            let log = &mut self.rare_mut().send_log;
            log.insert(now);
            log.keep_latest(SLIDING_LOG_CAP as usize);
        }
        (self.sends_in_window, self.epoch)
    }

    /// Gives back the slot a request sent at `sent_at` in window `epoch` took, if that is the
    /// current window (the server never counted the request).
    pub(super) fn give_back(&mut self, sent_at: Nanos, epoch: u64) {
        if epoch == self.epoch && self.known && !self.unlimited {
            self.sends_in_window = self.sends_in_window.saturating_sub(1);
            if let Some(rare) = &mut self.rare {
                rare.send_log.take(sent_at);
            }
        }
    }

    /// The window length the bucket reports to the store: its estimate, where it has a limit.
    pub(super) fn report_window(&self) -> Option<Nanos> {
        (self.known && !self.unlimited).then(|| self.window_estimate())
    }

    /// When the request `position` places behind the bucket's next free slot can go by the
    /// bucket alone (`None`: now, or no limit known), with `in_flight` answers outstanding;
    /// `fallback` is the window length to assume when neither a length nor a reset is known.
    pub(super) fn send_time(
        &self,
        now: Nanos,
        position: usize,
        in_flight: usize,
        (lead, share): (Nanos, u32),
        fallback: Nanos,
    ) -> Option<Nanos> {
        if !self.known || self.unlimited || self.limit == 0 {
            return None;
        }
        let limit = self.effective_limit(share).max(1) as usize;
        let (available, next_reset) = match self.ready_at(lead) {
            Some(r) if r > now => (self.available(in_flight, share) as usize, Some(r)),
            _ => (limit.saturating_sub(in_flight), None),
        };
        if position < available {
            return None;
        }
        let period =
            self.period().unwrap_or_else(|| next_reset.map_or(fallback, |r| r.saturating_sub(now).max(1)));
        let first_reset = next_reset.unwrap_or_else(|| now.saturating_add(period));
        let windows = ((position - available) / limit) as u64;
        Some(first_reset.saturating_add(period.saturating_mul(windows)))
    }

    /// Whether the bucket lets one more request go now, with `in_flight` answers outstanding,
    /// the link's `lead` and this process's `share` of the limits.
    pub(super) fn gate(&self, in_flight: usize, now: Nanos, lead: Nanos, share: u32) -> Gate {
        let b = self;
        if !b.known {
            // The pioneer: one request learns the bucket, the rest wait for its headers.
            return if in_flight == 0 { Gate::Open } else { Gate::UntilResponse };
        }
        if b.unlimited {
            return Gate::Open;
        }
        // Exhausted: wait for the reset if one is known; otherwise for an answer still in flight;
        // with nothing in flight either, for one window length after the last send, then probe.
        let exhausted = || match b.ready_at(lead) {
            Some(t) => Gate::Until(t.max(now + 1)),
            None if in_flight > 0 => Gate::UntilResponse,
            None => {
                let t = b.last_send.saturating_add(b.window_estimate());
                if t > now { Gate::Until(t) } else { Gate::Open }
            }
        };
        if b.outstanding(in_flight) >= b.effective_limit(share) {
            return exhausted();
        }
        let sliding_limit = share_of(b.limit, share) as usize;
        if b.sliding
            && let Some(period) = b.period()
            && sliding_limit > 0
            && b.send_log().len() >= sliding_limit
        {
            let oldest = b.send_log().get(b.send_log().len() - sliding_limit).expect("within the log");
            return Gate::Until(oldest.saturating_add(period).max(now + 1));
        }
        if b.available(in_flight, share) > 0 {
            return Gate::Open;
        }
        exhausted()
    }

    /// [`Bucket::gate`] by the bucket's own slots alone: a shared-scope limit learned below
    /// them is its resource's (a channel's pins), which another route sharing the bucket (a
    /// first contact's probe) does not count against.
    pub(super) fn own_gate(&mut self, in_flight: usize, now: Nanos, lead: Nanos, share: u32) -> Gate {
        let cap = self.rare.as_mut().and_then(|r| r.shared_cap.take());
        let gate = self.gate(in_flight, now, lead, share);
        if let Some(rare) = &mut self.rare {
            rare.shared_cap = cap;
        }
        gate
    }

    /// Headers have been seen (or the route proved to have none).
    pub(super) fn is_known(&self) -> bool {
        self.known
    }

    /// A success came back without rate-limit headers: only the global limit applies.
    pub(super) fn is_unlimited(&self) -> bool {
        self.unlimited
    }

    /// The limit per window the headers gave (0 while none did).
    pub(super) fn limit(&self) -> u32 {
        self.limit
    }

    /// The count of local resets: a send stamped with an earlier one was sent in a window
    /// that is over here.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Takes `period` as the window's length if it knows none (a window learned elsewhere:
    /// the bucket's old id, say).
    pub(super) fn assume_period(&mut self, period: Option<Nanos>) {
        if self.period().is_none() {
            self.set_period(period);
        }
    }

    /// Takes `period` as the window's length if it is longer than the one it knows (a longer
    /// window learned for its hash by another queue).
    pub(super) fn lengthen_period(&mut self, period: Nanos) {
        if self.period().is_none_or(|p| p < period) {
            self.set_period(Some(period));
        }
    }

    /// Counts a request the window may hold without any report counting it (see [`Ghost`]).
    pub(super) fn add_ghost(&mut self, ghost: Ghost) {
        self.rare_mut().ghosts.push(ghost);
    }

    /// Takes out the ghosts of `route` (every ghost for `None`): they follow their route to
    /// another bucket.
    pub(super) fn take_ghosts(&mut self, route: Option<&str>) -> Vec<Ghost> {
        let Some(rare) = &mut self.rare else { return Vec::new() };
        let (moved, kept) = std::mem::take(&mut rare.ghosts).into_iter().partition(|g| route.is_none_or(|k| *g.route == *k));
        rare.ghosts = kept;
        moved
    }

    /// Adds ghosts taken from another bucket ([`Bucket::take_ghosts`]).
    pub(super) fn add_ghosts(&mut self, ghosts: Vec<Ghost>) {
        if !ghosts.is_empty() {
            self.rare_mut().ghosts.extend(ghosts);
        }
    }

    /// A bucket-scope 429 that holds the bucket until `until`: the window is exhausted (a
    /// report of 0 left) and ends then at the earliest, whatever was estimated before; a
    /// bucket that knew no limit takes 1.
    pub(super) fn hold(&mut self, until: Nanos) {
        self.known = true;
        self.unlimited = false;
        self.set_reported(Some(0));
        self.reset_ready = match self.reset_at() {
            Some(_) if !self.reset_provisional => self.reset_ready.max(until),
            other => other.map_or(until, |r| r.max(until)),
        };
        self.reset_provisional = false;
        if self.limit == 0 {
            self.limit = 1;
        }
        self.set_reset_at(Some(self.reset_at().map_or(until, |r| r.max(until))));
    }

    /// A shared-scope 429 of a request sent in window `epoch`, its resource held until `until`:
    /// the resource admitted what this window sent less what it refused, so the bucket stays
    /// at that many per window (the fewest any window got through) for ten windows after the
    /// hold, then probes again. A refusal from an earlier window teaches nothing.
    pub(super) fn refuse_shared(&mut self, epoch: u64, until: Nanos) {
        if epoch != self.epoch {
            return;
        }
        let (epoch, sends, remember) =
            (self.epoch, self.sends_in_window, until.saturating_add(self.window_estimate().saturating_mul(10)));
        let rare = self.rare_mut();
        rare.shared_refused = match rare.shared_refused {
            (e, n) if e == epoch => (e, n + 1),
            _ => (epoch, 1),
        };
        let admitted = sends.saturating_sub(rare.shared_refused.1).max(1);
        let cap = rare.shared_cap.map_or(admitted, |(c, _)| c.min(admitted));
        rare.shared_cap = Some((cap, remember));
    }

    /// The send made at `sent_at` in window `epoch` goes out at `now` instead (shared mode: its
    /// reservation was granted then): the window's last send, and its first if it was, are
    /// now; a sliding log counts it from now.
    pub(super) fn restamp_send(&mut self, sent_at: Nanos, epoch: u64, now: Nanos) {
        self.last_send = now;
        if self.window_first_send() == Some(sent_at) {
            self.set_window_first_send(Some(now));
        }
        if self.sliding && epoch == self.epoch {
            let log = &mut self.rare_mut().send_log;
            log.take(sent_at);
            log.insert(now);
        }
    }

    /// The window's first send did not happen (a reservation not sent): its first send is
    /// `first`, the earliest of the others still out in it, or none, and then its provisional
    /// end goes too (a send that did not happen must not skew the window-length estimates).
    pub(super) fn undo_first_send(&mut self, first: Option<Nanos>) {
        self.set_window_first_send(first);
        if first.is_none() && self.reset_provisional {
            self.set_reset_at(None);
            self.reset_provisional = false;
        }
    }

    /// Seeds the sliding log, once the window was found to slide ([`Report::began_sliding`]),
    /// with the sends still out there (the answered one included).
    pub(super) fn seed_sliding_log(&mut self, sends: impl IntoIterator<Item = Nanos>) {
        self.rare_mut().send_log = sends.into_iter().collect();
    }

    /// Reads an answer's bucket headers `info` (its `status`), for a request sent at `sent_at`
    /// that left at `left_at` (the transport's report, else `sent_at`), as the `window_seq`th
    /// send of the window `window_epoch`. `answer_lead`: how much before the window end it
    /// reports the next request may go (see [`super::latency::Uplinks::lead`]); `max_wait`
    /// bounds every wait and length it learns. Returns what the limiter must do about it
    /// beyond the bucket ([`Report`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn report(
        &mut self,
        now: Nanos,
        info: &RateLimitInfo,
        status: u16,
        (sent_at, left_at): (Nanos, Nanos),
        (window_seq, window_epoch): (u32, u64),
        answer_lead: Nanos,
        max_wait: Nanos,
    ) -> Report {
        let mut report = Report::default();
        let has_bucket_info = info.limit.is_some() || info.remaining.is_some() || info.reset_after.is_some();
        let b = self;
        if info.remaining.is_none() && b.known && !b.unlimited && window_epoch == b.epoch {
            // An answer that reports nothing (a 5xx, a header-less 429) may still have been
            // counted by the server: it keeps its slot until the window resets.
            report.unreported = true;
            if info.reset_after.is_none() && b.reset_provisional {
                // The window's end is only estimated (a window length after its first send),
                // and this request may have opened it at the server when it arrived, which can
                // be later than the trip that length was learned through allows: the window
                // ends a window after its answer at most, not before.
                let at = now.saturating_add(b.window_floor());
                if b.reset_at().is_some_and(|r| r < at) {
                    b.set_reset_at(Some(at));
                }
            }
        }
        if !has_bucket_info {
            // 2xx without headers: the route has only the global limit (until headers appear).
            if (200..300).contains(&status) && !b.known {
                b.known = true;
                b.unlimited = true;
            }
            return report;
        }
        let fresh = !b.known || b.unlimited;
        b.known = true;
        b.unlimited = false;
        if let Some(limit) = info.limit.filter(|&l| l > 0) {
            b.limit = limit;
        }
        if b.limit == 0 {
            // No limit given yet: assume what we can see.
            b.limit = info.remaining.map_or(1, |r| r.saturating_add(1)).max(1);
        }
        if window_epoch < b.epoch && !fresh {
            // Sent before the last local reset: its count describes the old window, which says
            // nothing about the current one. But a window end it reports still ahead says
            // that the server window it was counted in (and where it keeps its slot, see
            // `handle_response`) outlasts the local reset, which was premature (estimated from
            // the window length, say): the bucket's window lasts until then at least.
            if let Some(reset_after) = info.reset_after.filter(|&ra| ra > 0) {
                let at = now.saturating_add(reset_after.min(max_wait));
                if b.reset_at().is_none_or(|r| r < at) {
                    b.set_reset_at(Some(at));
                    b.reset_ready = at;
                    b.reset_provisional = false;
                } else if !b.reset_provisional {
                    b.reset_ready = b.reset_ready.max(at);
                }
            }
            return report;
        }
        if let (200..=299, Some(reset_after)) = (status, info.reset_after)
            && info.remaining.is_some_and(|r| r.saturating_add(1) >= b.limit)
        {
            // First request of a window: its reset is the window length (an upper bound).
            let length = reset_after.saturating_add(now.saturating_sub(sent_at));
            let period = b.period().map_or(length, |p| p.max(length)).min(max_wait);
            b.set_period(Some(period));
            report.period = Some(period);
        }
        let first_of_window = fresh || b.reported().is_none();
        if let Some(rem) = info.remaining {
            // Evidence of a sliding window: the server counts more requests in this window
            // than were sent since the window was reset locally.
            if !fresh
                && !b.sliding
                && b.epoch > 0
                && window_epoch == b.epoch
                && rem.saturating_add(window_seq).saturating_add(b.carried) < b.limit
                && b.limit <= SLIDING_LOG_CAP
            {
                b.sliding = true;
                report.sliding = true;
            }
            b.set_reported(Some(match b.reported() {
                Some(old) if !fresh => old.min(rem),
                _ => rem,
            }));
            // A ghost answered before this request left reached the server first: this report
            // counts it if they share a window (and the lowest report is at most this one), or
            // its window is over. Counting it again held a window's last slot until the next
            // reset (a bucket whose requests straddled a local reset, on the Scoreboard's
            // `many_channels`: a whole window late). When it left: the transport's report
            // where there is one (a burst is written well after its `Send`s), else the `Send`.
            if let Some(rare) = &mut b.rare {
                rare.ghosts.retain(|g| g.answered_at.is_none_or(|a| a > left_at));
            }
        }
        if let Some(reset_after) = info.reset_after {
            let reset_after = reset_after.min(max_wait);
            if (200..300).contains(&status) {
                b.longest_reset = b.longest_reset.max(reset_after);
            }
            let at = now.saturating_add(reset_after);
            if window_epoch == b.epoch
                && let Some(first) = b.window_first_send()
            {
                b.window_upper = b.window_upper.max(at.saturating_sub(first).min(max_wait));
            }
            // Each answer's end is met `answer_lead` early; the window ends when the latest of
            // them does (a later end reported through a faster trip back may still be the
            // one to wait for).
            let ready = at.saturating_sub(answer_lead);
            let (reset_at, reset_ready) = match b.reset_at() {
                Some(old) if !first_of_window && !b.reset_provisional => (old.max(at), b.reset_ready.max(ready)),
                _ => (at, ready),
            };
            b.set_reset_at(Some(reset_at));
            b.reset_ready = reset_ready;
            b.reset_provisional = false;
        }
        report
    }
}

/// What an answer's report ([`Bucket::report`]) asks of the limiter beyond the bucket.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(super) struct Report {
    unreported: bool,
    sliding: bool,
    period: Option<Nanos>,
}

impl Report {
    /// The answer reported no count for the current window, which may have counted it: the
    /// request becomes a ghost of the bucket ([`Bucket::add_ghost`]).
    pub(super) fn unreported(&self) -> bool {
        self.unreported
    }

    /// The answer showed the window slides: the limiter seeds its log with the sends still out
    /// ([`Bucket::seed_sliding_log`]).
    pub(super) fn began_sliding(&self) -> bool {
        self.sliding
    }

    /// The window length this answer taught (it was the first of a window), for the other
    /// queues of the bucket's hash.
    pub(super) fn learned_period(&self) -> Option<Nanos> {
        self.period
    }
}

/// A request a bucket's window may hold without any report counting it (see
/// [`Bucket::ghosts`]).
#[derive(Debug, Clone)]
pub(super) struct Ghost {
    /// Its route (a ghost follows its route if that moves to another bucket).
    route: Arc<str>,
    /// When its answer came back, if one did: it reached the server before that, so the
    /// report of a request that left afterwards counts it (or its window is over). `None` for
    /// a request cancelled in flight or failed after maybe reaching the server: it may still
    /// be on its way, behind requests sent later.
    answered_at: Option<Nanos>,
}

impl Ghost {
    /// A request of `route` the window may hold, answered at `answered_at` (`None`: it may
    /// still be on its way).
    pub(super) fn new(route: Arc<str>, answered_at: Option<Nanos>) -> Self {
        Ghost { route, answered_at }
    }
}

#[cfg(test)]
mod tests {
    use super::{Bucket, Gate, Ghost};
    use crate::types::{MILLISECOND, Nanos, RateLimitInfo, SECOND};

    const MAX_WAIT: Nanos = 3600 * SECOND;

    fn headers(limit: u32, remaining: u32, reset_after: Nanos) -> RateLimitInfo {
        RateLimitInfo {
            limit: Some(limit),
            remaining: Some(remaining),
            reset_after: Some(reset_after),
            ..RateLimitInfo::default()
        }
    }

    /// A bucket whose first request, sent at 0, came back at 10 ms with `limit`, `remaining`
    /// and a reset `reset_after` later.
    fn learned(limit: u32, remaining: u32, reset_after: Nanos) -> Bucket {
        let mut b = Bucket::default();
        let (seq, epoch) = b.take_slot(0);
        let report = b.report(10 * MILLISECOND, &headers(limit, remaining, reset_after), 200, (0, 0), (seq, epoch), 0, MAX_WAIT);
        assert!(!report.unreported());
        b
    }

    #[test]
    fn an_unknown_bucket_lets_one_pioneer_go_and_waits_for_its_answer() {
        let b = Bucket::default();
        assert_eq!(b.gate(0, 0, 0, 1), Gate::Open);
        assert_eq!(b.gate(1, 0, 0, 1), Gate::UntilResponse);
        assert!(!b.is_known());
    }

    #[test]
    fn a_report_opens_the_window_until_its_remaining_is_spent() {
        let b = learned(3, 2, SECOND);
        assert!(b.is_known() && !b.is_unlimited());
        assert_eq!(b.limit(), 3);
        let now = 20 * MILLISECOND;
        assert_eq!(b.gate(0, now, 0, 1), Gate::Open);
        assert_eq!(b.gate(1, now, 0, 1), Gate::Open, "2 left, 1 in flight");
        // Two in flight spend what the report left: closed until the reported end.
        assert_eq!(b.gate(2, now, 0, 1), Gate::Until(10 * MILLISECOND + SECOND));
        // The first answer of a window teaches its length: its reset plus its trip.
        assert_eq!(b.period(), Some(SECOND + 10 * MILLISECOND));
    }

    #[test]
    fn a_success_without_headers_makes_the_bucket_unlimited() {
        let mut b = Bucket::default();
        let slot = b.take_slot(0);
        let report = b.report(MILLISECOND, &RateLimitInfo::default(), 200, (0, 0), slot, 0, MAX_WAIT);
        assert_eq!(report.learned_period(), None);
        assert!(b.is_known() && b.is_unlimited());
        assert_eq!(b.gate(1000, MILLISECOND, 0, 1), Gate::Open);
        assert_eq!(b.report_window(), None, "nothing to report to the store");
    }

    #[test]
    fn an_answer_without_a_count_becomes_a_ghost_that_holds_its_slot() {
        let mut b = learned(2, 1, SECOND);
        let slot = b.take_slot(20 * MILLISECOND);
        let report = b.report(30 * MILLISECOND, &RateLimitInfo::default(), 503, (20 * MILLISECOND, 20 * MILLISECOND), slot, 0, MAX_WAIT);
        assert!(report.unreported(), "a 5xx may have been counted");
        b.add_ghost(Ghost::new("r".into(), Some(30 * MILLISECOND)));
        // 1 left by the report, the ghost counts as in flight: closed.
        assert!(matches!(b.gate(0, 40 * MILLISECOND, 0, 1), Gate::Until(_)));
        // A later request's report counts it: the ghost goes.
        let slot = b.take_slot(50 * MILLISECOND);
        let _ = b.report(60 * MILLISECOND, &headers(2, 0, SECOND), 200, (50 * MILLISECOND, 50 * MILLISECOND), slot, 0, MAX_WAIT);
        assert!(b.ghosts().is_empty(), "answered at 30 ms, before the reporting request left at 50 ms");
    }

    #[test]
    fn ghosts_follow_their_route() {
        let mut b = Bucket::default();
        b.add_ghost(Ghost::new("a".into(), None));
        b.add_ghost(Ghost::new("b".into(), Some(1)));
        let moved = b.take_ghosts(Some("a"));
        assert_eq!(moved.len(), 1);
        assert_eq!(b.ghosts().len(), 1);
        let mut other = Bucket::default();
        other.add_ghosts(moved);
        other.add_ghosts(Vec::new());
        assert_eq!(other.ghosts().len(), 1);
        assert_eq!(b.take_ghosts(None).len(), 1, "None takes every ghost");
        assert!(b.ghosts().is_empty());
    }

    #[test]
    fn a_bucket_429_holds_until_its_wait_and_never_shortens_a_known_end() {
        let mut b = Bucket::default();
        b.hold(5 * SECOND);
        assert!(b.is_known());
        assert_eq!(b.limit(), 1, "a limit of 1 until a report tells");
        assert_eq!(b.gate(0, SECOND, 0, 1), Gate::Until(5 * SECOND));
        let mut b = learned(5, 4, 10 * SECOND);
        b.hold(2 * SECOND);
        assert_eq!(b.reset_at(), Some(10 * SECOND + 10 * MILLISECOND), "the reported end is later");
        assert_eq!(b.gate(0, SECOND, 0, 1), Gate::Until(10 * SECOND + 10 * MILLISECOND), "exhausted (0 left)");
    }

    #[test]
    fn shared_refusals_cap_the_window_at_what_got_through() {
        let mut b = learned(10, 9, SECOND);
        for t in 1..5 {
            let _ = b.take_slot(t * MILLISECOND);
        }
        // 5 sent in this window; 2 refused with scope shared.
        b.refuse_shared(b.epoch(), 2 * SECOND);
        b.refuse_shared(b.epoch(), 2 * SECOND);
        assert_eq!(b.shared_cap().map(|(cap, _)| cap), Some(3));
        assert_eq!(b.effective_limit(1), 3);
        // A refusal of another window teaches nothing.
        b.refuse_shared(b.epoch() + 1, 2 * SECOND);
        assert_eq!(b.shared_cap().map(|(cap, _)| cap), Some(3));
        // Three in flight fill the capped window; the bucket's own slots do not see the cap.
        assert!(matches!(b.gate(3, 20 * MILLISECOND, 0, 1), Gate::Until(_)));
        assert_eq!(b.own_gate(3, 20 * MILLISECOND, 0, 1), Gate::Open);
        assert!(b.shared_cap().is_some(), "own_gate puts the cap back");
        // Remembered for ten windows after the hold, then dropped.
        let (_, until) = b.shared_cap().unwrap();
        assert_eq!(until, 2 * SECOND + 10 * b.window_estimate());
        b.refresh(until, 0, 0);
        assert_eq!(b.shared_cap(), None);
    }

    #[test]
    fn a_send_opens_a_provisional_window_that_an_undone_send_takes_back() {
        let mut b = learned(5, 4, SECOND);
        let period = b.period().unwrap();
        // The window ends; the next send opens a new one, its end estimated.
        b.roll_if_due(2 * SECOND, 0, 0);
        assert_eq!(b.reset_at(), None);
        let _ = b.take_slot(3 * SECOND);
        assert_eq!(b.reset_at(), Some(3 * SECOND + period));
        assert_eq!(b.window_first_send(), Some(3 * SECOND));
        // The send did not happen (its reservation was not granted): nothing else is out.
        b.undo_first_send(None);
        assert_eq!(b.window_first_send(), None);
        assert_eq!(b.reset_at(), None, "a provisional end of no send goes too");
    }

    #[test]
    fn a_restamped_send_moves_the_first_send_and_its_sliding_entry() {
        let mut b = Bucket::default();
        let slot = b.take_slot(0);
        let _ = b.report(MILLISECOND, &headers(4, 3, SECOND), 200, (0, 0), slot, 0, MAX_WAIT);
        b.restamp_send(0, b.epoch(), 7 * MILLISECOND);
        assert_eq!(b.window_first_send(), Some(7 * MILLISECOND));
        // A sliding bucket's log entry moves with it.
        b.sliding = true;
        b.seed_sliding_log([2, 5]);
        b.restamp_send(2, b.epoch(), 9);
        assert_eq!(b.send_log().iter().collect::<Vec<_>>(), [5, 9]);
        // From another window the log keeps its entries.
        b.restamp_send(5, b.epoch() + 1, 11);
        assert_eq!(b.send_log().iter().collect::<Vec<_>>(), [5, 9]);
    }

    #[test]
    fn a_report_counting_more_than_was_sent_finds_a_sliding_window() {
        let mut b = learned(5, 4, SECOND);
        b.roll_if_due(2 * SECOND, 0, 0);
        assert_eq!(b.epoch(), 1);
        let slot = b.take_slot(2 * SECOND);
        // One send in this window, yet the server says only 1 of 5 is left.
        let report = b.report(2 * SECOND + MILLISECOND, &headers(5, 1, SECOND), 200, (2 * SECOND, 2 * SECOND), slot, 0, MAX_WAIT);
        assert!(report.began_sliding());
    }

    #[test]
    fn a_report_from_before_the_local_reset_only_lengthens_the_window() {
        let mut b = learned(5, 4, SECOND);
        let old = b.take_slot(500 * MILLISECOND);
        b.roll_if_due(2 * SECOND, 0, 1);
        // The old window's answer, late, reports 0 left and an end 300 ms ahead.
        let now = 2 * SECOND + 100 * MILLISECOND;
        let _ = b.report(now, &headers(5, 0, 300 * MILLISECOND), 200, (500 * MILLISECOND, 500 * MILLISECOND), old, 0, MAX_WAIT);
        assert_eq!(b.reported(), None, "its count is the old window's");
        assert_eq!(b.reset_at(), Some(now + 300 * MILLISECOND), "but its server window outlasts the local reset");
    }

    #[test]
    fn a_send_given_back_frees_its_slot() {
        let mut b = learned(2, 1, SECOND);
        let (_, epoch) = b.take_slot(20 * MILLISECOND);
        assert_eq!(b.available(0, 1), 1, "the lowest report, 1, less nothing in flight");
        b.give_back(20 * MILLISECOND, epoch);
        assert_eq!(b.sends_in_window, 1, "only the first send is left");
    }

    #[test]
    fn periods_are_assumed_only_when_unknown_and_lengthened_only() {
        let mut b = Bucket::with_period(None);
        b.assume_period(Some(SECOND));
        assert_eq!(b.period(), Some(SECOND));
        b.assume_period(Some(5 * SECOND));
        assert_eq!(b.period(), Some(SECOND));
        b.lengthen_period(SECOND / 2);
        assert_eq!(b.period(), Some(SECOND));
        b.lengthen_period(2 * SECOND);
        assert_eq!(b.period(), Some(2 * SECOND));
    }
}
