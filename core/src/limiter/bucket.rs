//! A bucket's window as the limiter knows it: its limit, remaining and reset from the
//! headers, the sends of the local window and the ghosts it may hold, the sliding log, a
//! shared-scope cap, and the gate a queue's head passes ([`Bucket::gate`]); and the header
//! report that updates it (`Limiter::apply_headers`).

use super::*;
use super::timelog::TimeLog;

/// Whether a gate lets the next request go (a bucket's, the invalid-request budget's, the
/// store's in an outage).
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
    pub(super) known: bool,
    /// A success came back without rate-limit headers: only the global limit applies.
    pub(super) unlimited: bool,
    pub(super) limit: u32,
    /// [`Bucket::reported`], when [`Bucket::HAS_REPORTED`] is set in `has`.
    reported_value: u32,
    /// [`Bucket::reset_at`], when [`Bucket::HAS_RESET_AT`] is set in `has`.
    reset_at_value: Nanos,
    /// Which of the optional values are set: an `Option` of each would add a tag beside it
    /// (8 bytes beside a `u64`, which has no spare value for `None`), in every bucket.
    has: u8,
    /// `reset_at` is an estimate from the window length, not yet confirmed by a response.
    pub(super) reset_provisional: bool,
    /// When the next window's requests may go by the answers' own trips: the latest of each
    /// reporting answer's end less its lead ([`Uplinks::lead`]); `reset_at` itself where no
    /// answer had one. Meaningful only while `reset_at` is set and not provisional.
    pub(super) reset_ready: Nanos,
    /// Counts local resets; responses to requests sent before the last one are stale.
    pub(super) epoch: u64,
    pub(super) sends_in_window: u32,
    /// Requests still in flight at the last local reset (they may land in the new window).
    pub(super) carried: u32,
    /// The server's window appears to slide: slots come back one by one.
    pub(super) sliding: bool,
    /// [`Bucket::period`], when [`Bucket::HAS_PERIOD`] is set in `has`.
    period_value: Nanos,
    /// The longest `reset_after` any answer gave: a fallback window estimate.
    pub(super) longest_reset: Nanos,
    /// When the last request of this bucket was sent.
    pub(super) last_send: Nanos,
    /// [`Bucket::window_first_send`], when [`Bucket::HAS_FIRST_SEND`] is set in `has`.
    first_send_value: Nanos,
    /// An upper bound on the window length: a reported window end minus the first send of
    /// the local window (that send arrived at or after the server's window start).
    pub(super) window_upper: Nanos,
    /// What few buckets need: ghosts, a sliding log, a shared-scope cap. `None` until one is
    /// needed, so that the many buckets that never need them pay one pointer.
    pub(super) rare: Option<Box<BucketRare>>,
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

                pub(super) fn $set(&mut self, value: Option<$t>) {
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
pub(super) struct BucketRare {
    /// Requests the current window may hold that no report may count (cancelled in flight,
    /// failed after maybe reaching the server, answered without a count, or answered from
    /// before the local reset): they count as in flight until the window resets, or until a
    /// report proves them counted (see [`Ghost`]).
    pub(super) ghosts: Vec<Ghost>,
    /// Send times, kept while `sliding` (at most `limit`, capped).
    pub(super) send_log: TimeLog,
    /// A shared-scope limit below the bucket's, learned from `shared` 429s: how many requests a
    /// window may send (the fewest a window got through: what it sent less what the resource
    /// refused), and until when that is remembered.
    pub(super) shared_cap: Option<(u32, Nanos)>,
    /// Shared-scope 429s of the local window `epoch`: (epoch, count).
    pub(super) shared_refused: (u64, u32),
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
    pub(super) fn rare_mut(&mut self) -> &mut BucketRare {
        self.rare.get_or_insert_default()
    }

    /// Its ghosts ([`BucketRare::ghosts`]).
    pub(super) fn ghosts(&self) -> &[Ghost] {
        self.rare.as_ref().map_or(&[], |r| &r.ghosts)
    }

    /// Its sliding log ([`BucketRare::send_log`]).
    pub(super) fn send_log(&self) -> &TimeLog {
        self.rare.as_ref().map_or(&NO_SEND_LOG, |r| &r.send_log)
    }

    /// Its shared-scope cap ([`BucketRare::shared_cap`]).
    pub(super) fn shared_cap(&self) -> Option<(u32, Nanos)> {
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
    pub(super) fn window_floor(&self) -> Nanos {
        let estimate = self.window_estimate();
        if self.longest_reset > 0 { self.longest_reset.min(estimate) } else { estimate }
    }

    /// How much before `reset_at` the next window's requests may go and still reach the server
    /// after the window's end: `lead` ([`RoundTrips::lead`]) when a response reported the end
    /// (`reset_at` is then the end plus that answer's trip back), 0 for an end estimated from
    /// the window length.
    pub(super) fn lead(&self, lead: Nanos) -> Nanos {
        if self.reset_provisional { 0 } else { lead }
    }

    /// When the next window's requests may go: `reset_at` less the link's lead
    /// ([`RoundTrips::lead`]), or the answers' own `reset_ready` where that is earlier (each
    /// rule alone keeps the next request after the window's end).
    pub(super) fn ready_at(&self, lead: Nanos) -> Option<Nanos> {
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
    pub(super) fn effective_limit(&self, share: u32) -> u32 {
        share_of(self.shared_cap().map_or(self.limit, |(cap, _)| self.limit.min(cap)), share)
    }

    /// Requests counted as in flight for this bucket.
    pub(super) fn outstanding(&self, in_flight: usize) -> u32 {
        (in_flight as u32).saturating_add(self.ghosts().len() as u32)
    }

    /// How many more requests the window allows, given `in_flight` answers outstanding and
    /// this process's `share` of the limits. With a share (or a shared-scope cap), what the
    /// server reports is an upper bound only: this process's own sends in the window count
    /// against its part of the limit.
    pub(super) fn available(&self, in_flight: usize, share: u32) -> u32 {
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
}

/// A request a bucket's window may hold without any report counting it (see
/// [`Bucket::ghosts`]).
#[derive(Debug, Clone)]
pub(super) struct Ghost {
    /// Its route (a ghost follows its route if that moves to another bucket).
    pub(super) route: super::routes::Name,
    /// When its answer came back, if one did: it reached the server before that, so the
    /// report of a request that left afterwards counts it (or its window is over). `None` for
    /// a request cancelled in flight or failed after maybe reaching the server: it may still
    /// be on its way, behind requests sent later.
    pub(super) answered_at: Option<Nanos>,
}

impl Limiter {
    /// Applies an answer's bucket headers to the bucket of `qid`. `answer_lead`: how much
    /// before the window end it reports the next request may go (see [`Uplinks::lead`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply_headers(
        &mut self,
        now: Nanos,
        id: RequestId,
        qid: Qid,
        flight: Flight,
        info: &RateLimitInfo,
        status: u16,
        answer_lead: Nanos,
    ) {
        let max_wait = self.config.max_server_wait;
        let has_bucket_info =
            info.limit.is_some() || info.remaining.is_some() || info.reset_after.is_some();
        let mut detected_sliding = false;
        let mut learned_period = None;
        let b = &self.queue(qid).bucket;
        if info.remaining.is_none() && b.known && !b.unlimited && flight.window_epoch == b.epoch {
            // An answer that reports nothing (a 5xx, a header-less 429) may still have been
            // counted by the server: it keeps its slot until the window resets.
            self.add_ghost(qid, id, Some(now));
            let b = &mut self.queue_mut(qid).bucket;
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
        let q = self.queue_mut(qid);
        let b = &mut q.bucket;
        if !has_bucket_info {
            // 2xx without headers: the route has only the global limit (until headers appear).
            if (200..300).contains(&status) && !b.known {
                b.known = true;
                b.unlimited = true;
            }
            return;
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
        if flight.window_epoch < b.epoch && !fresh {
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
            return;
        }
        if let (200..=299, Some(reset_after)) = (status, info.reset_after)
            && info.remaining.is_some_and(|r| r.saturating_add(1) >= b.limit)
        {
            // First request of a window: its reset is the window length (an upper bound).
            let length = reset_after.saturating_add(now.saturating_sub(flight.sent_at));
            let period = b.period().map_or(length, |p| p.max(length)).min(max_wait);
            b.set_period(Some(period));
            learned_period = Some(period);
        }
        let first_of_window = fresh || b.reported().is_none();
        if let Some(rem) = info.remaining {
            // Evidence of a sliding window: the server counts more requests in this window
            // than were sent since the window was reset locally.
            if !fresh
                && !b.sliding
                && b.epoch > 0
                && flight.window_epoch == b.epoch
                && rem.saturating_add(flight.window_seq).saturating_add(b.carried) < b.limit
                && b.limit <= SLIDING_LOG_CAP
            {
                b.sliding = true;
                detected_sliding = true;
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
            let left = flight.left_at;
            if let Some(rare) = &mut b.rare {
                rare.ghosts.retain(|g| g.answered_at.is_none_or(|a| a > left));
            }
        }
        if detected_sliding {
            // Seed the send log with what is still out there and this request.
            let log: TimeLog = self
                .queue(qid)
                .in_flight
                .iter()
                .filter_map(|id| match self.taken.get(id) {
                    Some(ReqState::InFlight(Flight { sent_at, .. })) => Some(*sent_at),
                    _ => None,
                })
                .chain([flight.sent_at])
                .collect();
            self.queue_mut(qid).bucket.rare_mut().send_log = log;
        }
        let b = &mut self.queue_mut(qid).bucket;
        if let Some(reset_after) = info.reset_after {
            let reset_after = reset_after.min(max_wait);
            if (200..300).contains(&status) {
                b.longest_reset = b.longest_reset.max(reset_after);
            }
            let at = now.saturating_add(reset_after);
            if flight.window_epoch == b.epoch
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
        if let (Some(period), BucketId::Hash(hash)) = (learned_period, self.queue(qid).key.bucket())
            && (self.routes.hash_periods.len() < self.config.max_routes || self.routes.hash_periods.contains_key(&**hash))
            && self.routes.hash_periods.get(&**hash).is_none_or(|&known| known < period)
        {
            // A longer window for this hash: every queue of it (other major parameters) that
            // has not seen one of its own answered takes it, rather than an estimate that may
            // have been drawn from a window another queue's request opened.
            let hash = hash.clone();
            self.routes.hash_periods.insert(hash.to_string(), period);
            for q in self.queues.iter_mut().flatten() {
                if q.key.bucket() == BucketId::Hash(&hash) && q.bucket.period().is_none_or(|p| p < period) {
                    q.bucket.set_period(Some(period));
                }
            }
        }
    }
}
