//! A bucket's window as the limiter knows it: its limit, remaining and reset from the
//! headers, the sends of the local window and the ghosts it may hold, the sliding log, a
//! shared-scope cap, and the gate a queue's head passes ([`Bucket::gate`]).

use super::*;

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
    /// The lowest `remaining` the server reported in the current window (`None` until a
    /// response from this window arrives). What may still be sent is this minus what is in
    /// flight: the lowest report is the server's latest state, and anything it did not count
    /// yet is either still in flight or came back with a lower report.
    pub(super) reported: Option<u32>,
    /// Requests the current window may hold that no report may count (cancelled in flight,
    /// failed after maybe reaching the server, answered without a count, or answered from
    /// before the local reset): they count as in flight until the window resets, or until a
    /// report proves them counted (see [`Ghost`]).
    pub(super) ghosts: Vec<Ghost>,
    /// End of the current window as the client sees it; `None` after a local reset until the
    /// next response tells (or a provisional end from the learned window length).
    pub(super) reset_at: Option<Nanos>,
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
    /// Window length, learned from the first answer of a window (an upper bound).
    pub(super) period: Option<Nanos>,
    /// The longest `reset_after` any answer gave: a fallback window estimate.
    pub(super) longest_reset: Nanos,
    /// When the last request of this bucket was sent.
    pub(super) last_send: Nanos,
    /// When the first request since the last local reset was sent.
    pub(super) window_first_send: Option<Nanos>,
    /// An upper bound on the window length: a reported window end minus the first send of
    /// the local window (that send arrived at or after the server's window start).
    pub(super) window_upper: Nanos,
    /// Send times, kept while `sliding` (at most `limit`, capped).
    pub(super) send_log: VecDeque<Nanos>,
    /// A shared-scope limit below the bucket's, learned from `shared` 429s: how many requests a
    /// window may send (the fewest a window got through: what it sent less what the resource
    /// refused), and until when that is remembered.
    pub(super) shared_cap: Option<(u32, Nanos)>,
    /// Shared-scope 429s of the local window `epoch`: (epoch, count).
    pub(super) shared_refused: (u64, u32),
}

pub(super) const SLIDING_LOG_CAP: u32 = 4096;

impl Bucket {
    /// The window length as well as it is known (1 s when nothing is known).
    pub(super) fn window_estimate(&self) -> Nanos {
        self.period.unwrap_or_else(|| {
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
        let reset = self.reset_at?;
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
            self.reset_at = None;
            self.epoch += 1;
            self.sends_in_window = 0;
            self.carried = self.outstanding(in_flight);
            self.ghosts.clear();
            self.reported = None;
            self.reset_provisional = false;
            self.window_first_send = None;
        }
    }

    /// The bucket's limit, or the shared-scope limit learned below it; of that, this
    /// process's `share` (see [`share_of`]: 1 but in a fail-open store outage).
    pub(super) fn effective_limit(&self, share: u32) -> u32 {
        share_of(self.shared_cap.map_or(self.limit, |(cap, _)| self.limit.min(cap)), share)
    }

    /// Requests counted as in flight for this bucket.
    pub(super) fn outstanding(&self, in_flight: usize) -> u32 {
        (in_flight as u32).saturating_add(self.ghosts.len() as u32)
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
        match self.reported {
            Some(r) if self.shared_cap.is_some() || share > 1 => r.saturating_sub(outstanding).min(local),
            Some(r) => r.saturating_sub(outstanding),
            None => local,
        }
    }

    /// Brings the window up to `now` before its gate is asked: a shared-scope cap whose time
    /// is over is dropped, the window rolls if due ([`Bucket::roll_if_due`]), and the sliding
    /// log keeps only the sends still within a window.
    pub(super) fn refresh(&mut self, now: Nanos, lead: Nanos, in_flight: usize) {
        if self.shared_cap.is_some_and(|(_, until)| until <= now) {
            self.shared_cap = None;
        }
        self.roll_if_due(now, lead, in_flight);
        if self.known
            && !self.unlimited
            && self.sliding
            && let Some(period) = self.period
        {
            while self.send_log.front().is_some_and(|&t| t.saturating_add(period) <= now) {
                self.send_log.pop_front();
            }
        }
    }

    /// A request of the bucket is sent at `now`: it takes a slot of the window (and opens it,
    /// with an end estimated from the window length until an answer tells). Returns its place
    /// in the window and the window's epoch.
    pub(super) fn take_slot(&mut self, now: Nanos) -> (u32, u64) {
        self.sends_in_window = self.sends_in_window.saturating_add(1);
        self.last_send = now;
        if self.window_first_send.is_none() {
            self.window_first_send = Some(now);
        }
        if self.known && !self.unlimited && self.reset_at.is_none() && self.sends_in_window == 1 {
            // A new window opens with this send; until a response says when it ends, assume
            // the learned window length, so lost answers never leave the bucket without a reset.
            self.reset_at = Some(now.saturating_add(self.window_estimate()));
            self.reset_provisional = true;
        }
        if self.sliding {
            self.send_log.push_back(now);
            while self.send_log.len() > SLIDING_LOG_CAP as usize {
                self.send_log.pop_front();
            }
        }
        (self.sends_in_window, self.epoch)
    }

    /// Gives back the slot a request sent at `sent_at` in window `epoch` took, if that is the
    /// current window (the server never counted the request).
    pub(super) fn give_back(&mut self, sent_at: Nanos, epoch: u64) {
        if epoch == self.epoch && self.known && !self.unlimited {
            self.sends_in_window = self.sends_in_window.saturating_sub(1);
            if let Some(pos) = self.send_log.iter().rposition(|&t| t == sent_at) {
                self.send_log.remove(pos);
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
            self.period.unwrap_or_else(|| next_reset.map_or(fallback, |r| r.saturating_sub(now).max(1)));
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
            && let Some(period) = b.period
            && sliding_limit > 0
            && b.send_log.len() >= sliding_limit
        {
            let oldest = b.send_log[b.send_log.len() - sliding_limit];
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
    pub(super) route: String,
    /// When its answer came back, if one did: it reached the server before that, so the
    /// report of a request that left afterwards counts it (or its window is over). `None` for
    /// a request cancelled in flight or failed after maybe reaching the server: it may still
    /// be on its way, behind requests sent later.
    pub(super) answered_at: Option<Nanos>,
}
