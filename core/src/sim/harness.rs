//! The harness: drives a [`Limiter`] against a [`Server`] in virtual time.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fmt;

use crate::rng::SplitMix64;
use super::server::{
    Arrival, BucketSpec, Server, ServerOutcome, ServerResponse, WindowKind, max_in_window,
};
use crate::limiter::Limiter;
use crate::shared::{Reservation, ReservationAnswer, SharedStore, SharedUpdate};
use crate::types::{
    Disposition, FailReason, Failure, HeaderProfile, MILLISECOND, Nanos, Observation, Output,
    Request, RequestId, SECOND,
};

/// One-way network latency: `base`, plus a uniform jitter in `0..=jitter`, plus (with
/// probability `spike_chance`) a uniform extra delay in `0..=spike`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// The minimum.
    pub base: Nanos,
    /// Uniform jitter on top of `base`.
    pub jitter: Nanos,
    /// Probability of a latency spike.
    pub spike_chance: f64,
    /// The largest spike.
    pub spike: Nanos,
}

impl Latency {
    /// No latency at all.
    pub const ZERO: Latency = Latency {
        base: 0,
        jitter: 0,
        spike_chance: 0.0,
        spike: 0,
    };

    /// A constant latency.
    pub fn fixed(base: Nanos) -> Self {
        Latency {
            base,
            ..Latency::ZERO
        }
    }

    /// `base` plus a uniform jitter in `0..=jitter`.
    pub fn jittered(base: Nanos, jitter: Nanos) -> Self {
        Latency {
            base,
            jitter,
            ..Latency::ZERO
        }
    }

    /// Adds spikes: with probability `chance`, up to `spike` more.
    pub fn with_spikes(mut self, chance: f64, spike: Nanos) -> Self {
        self.spike_chance = chance;
        self.spike = spike;
        self
    }

    /// The largest latency this can produce.
    pub fn max(&self) -> Nanos {
        self.base
            + self.jitter
            + if self.spike_chance > 0.0 {
                self.spike
            } else {
                0
            }
    }

    /// Draws one latency.
    pub fn sample(&self, rng: &mut SplitMix64) -> Nanos {
        let mut d = self.base + rng.between(0, self.jitter);
        if rng.chance(self.spike_chance) {
            d += rng.between(0, self.spike);
        }
        d
    }
}

/// The network and the bounds of a [`Simulation`].
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Seed of every network draw (latency, drops).
    pub seed: u64,
    /// Client -> server latency (when a request arrives after its `Send`). Jitter here
    /// reorders arrivals.
    pub uplink: Latency,
    /// Server -> client latency. Jitter and spikes here reorder responses.
    pub downlink: Latency,
    /// The runtime's delay between a `Send` and the request leaving (a busy event loop, a
    /// connection being opened), drawn per send before the uplink. Default: none.
    pub dispatch: Latency,
    /// Opening a connection: a send that finds no idle connection in its process's pool (one
    /// connection per request in flight, kept open once answered, as HTTP/1.1 clients with
    /// keep-alive do) leaves this much later. The first burst pays it, later ones reuse the
    /// connections. Default: 0.
    pub connect: Nanos,
    /// A busy runtime that writes requests one after another (an event loop that makes each
    /// request in turn): a send leaves no sooner than this long after the process's previous
    /// send left, so a burst of `n` sends is written over `n` times this, the last ones long
    /// after their `Send` (added to [`SimConfig::dispatch`]). Default: 0 (sends leave in
    /// parallel).
    pub serial: Nanos,
    /// The driver gives the limiter no request's body keys ([`Request::body_keys`]), as
    /// `run(method, path, send)` does without options, while the server still reads each
    /// body (a hidden sub-limit then has no class the limiter could know). Default: false.
    pub hide_body_keys: bool,
    /// Whether the driver reports when a request left ([`crate::Limiter::handle_written`]),
    /// once its dispatch delay is over. Default: it does (nothing to report without a delay).
    pub report_written: bool,
    /// Probability that a sent request's connection fails.
    pub drop_chance: f64,
    /// Of the failures, the share reported as [`Failure::MaybeSent`] (the rest are
    /// [`Failure::NotSent`], reported after the uplink latency, never reaching the server).
    pub maybe_sent_share: f64,
    /// Probability that a [`Failure::MaybeSent`] request did reach the server (and counted
    /// there); its response is lost either way. The failure is reported after a round trip.
    pub maybe_sent_arrives: f64,
    /// The most events processed by one run.
    pub max_steps: u64,
    /// Virtual time at which a run stops.
    pub max_time: Nanos,
    /// Pass the client's wall clock ([`crate::Response::wall_clock_ms`]) with responses.
    pub wall_clock: bool,
    /// The answers tell the server's clock, as Discord's do (`X-RateLimit-Reset` beside
    /// `X-RateLimit-Reset-After`); `false` leaves `X-RateLimit-Reset` out of every answer.
    pub server_clock: bool,
    /// The client's wall clock minus the server's, in ms (clock skew).
    pub clock_skew_ms: i64,
    /// Keep a human-readable trace of every step in the report (slow; for debugging).
    pub trace: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            uplink: Latency::jittered(20 * MILLISECOND, 10 * MILLISECOND),
            downlink: Latency::jittered(20 * MILLISECOND, 10 * MILLISECOND),
            dispatch: Latency::ZERO,
            connect: 0,
            serial: 0,
            hide_body_keys: false,
            report_written: true,
            drop_chance: 0.0,
            maybe_sent_share: 0.5,
            maybe_sent_arrives: 0.5,
            max_steps: 10_000_000,
            max_time: 24 * 3600 * SECOND,
            wall_clock: true,
            server_clock: true,
            clock_skew_ms: 0,
            trace: false,
        }
    }
}

impl SimConfig {
    /// Sets the seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets both latencies.
    pub fn latency(mut self, uplink: Latency, downlink: Latency) -> Self {
        self.uplink = uplink;
        self.downlink = downlink;
        self
    }

    /// Sets the runtime's dispatch delay, and whether the driver reports when each request
    /// left.
    pub fn dispatch(mut self, lag: Latency, reported: bool) -> Self {
        self.dispatch = lag;
        self.report_written = reported;
        self
    }

    /// Sets the time a busy runtime takes to write each request (see [`SimConfig::serial`]).
    pub fn serial(mut self, each: Nanos) -> Self {
        self.serial = each;
        self
    }

    /// Sets the time to open a connection (see [`SimConfig::connect`]).
    pub fn connect(mut self, connect: Nanos) -> Self {
        self.connect = connect;
        self
    }

    /// Sets the connection-failure probability.
    pub fn drops(mut self, chance: f64) -> Self {
        self.drop_chance = chance;
        self
    }

    /// Sets the virtual time limit.
    pub fn max_time(mut self, max_time: Nanos) -> Self {
        self.max_time = max_time;
        self
    }

    /// Turns the trace on.
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }
}

/// The network between the processes of a [`Simulation::cluster`] and their shared
/// [`MemoryStore`](crate::shared::MemoryStore) (see [`Simulation::with_store`]), and the store's outages.
///
/// Each process talks to the store over one connection, in order (as the shared-mode docs ask
/// of drivers): a reservation or a write reaches the store after `uplink`, but never before the
/// process's previous message; an answer comes back after `downlink`, never before the previous
/// answer. When an answer would come later than `timeout` after its reservation, or the store is
/// in an outage when the reservation arrives, the driver answers
/// [`ReservationAnswer::Unavailable`] at `timeout` (a late answer is dropped, as a driver would;
/// the store may still have granted it). A write ([`Output::Share`]) is lost during an outage.
/// An outage added with [`StoreLink::restart`] also empties the store: it comes back without
/// anything it knew (Redis killed and started again without persistence).
#[derive(Debug, Clone, PartialEq)]
pub struct StoreLink {
    /// Process -> store latency.
    pub uplink: Latency,
    /// Store -> process latency.
    pub downlink: Latency,
    /// The driver's timeout for an answer.
    pub timeout: Nanos,
    /// Intervals `[start, end)` (virtual time) during which the store is down.
    pub outages: Vec<(Nanos, Nanos)>,
    /// Times at which the store loses everything it holds (see [`StoreLink::restart`]).
    pub wipes: Vec<Nanos>,
}

impl Default for StoreLink {
    fn default() -> Self {
        StoreLink {
            uplink: Latency::jittered(MILLISECOND, MILLISECOND),
            downlink: Latency::jittered(MILLISECOND, MILLISECOND),
            timeout: 250 * MILLISECOND,
            outages: Vec::new(),
            wipes: Vec::new(),
        }
    }
}

impl StoreLink {
    /// Sets both latencies.
    pub fn latency(mut self, uplink: Latency, downlink: Latency) -> Self {
        self.uplink = uplink;
        self.downlink = downlink;
        self
    }

    /// Adds an outage from `start` to `end`.
    pub fn outage(mut self, start: Nanos, end: Nanos) -> Self {
        self.outages.push((start, end));
        self
    }

    /// Adds an outage from `start` to `end` after which the store is empty: a restart without
    /// persistence. It forgets every grant, lease, bucket and hold it had, and the processes'
    /// reports recorded before it no longer count as shared knowledge.
    pub fn restart(mut self, start: Nanos, end: Nanos) -> Self {
        self.outages.push((start, end));
        self.wipes.push(start);
        self.wipes.sort_unstable();
        self
    }

    /// Whether the store is down at `t`.
    pub fn is_down(&self, t: Nanos) -> bool {
        self.outages.iter().any(|&(a, b)| a <= t && t < b)
    }
}

/// What the network does with one send, when a test scripts it with
/// [`Simulation::script_send`] instead of leaving it to [`SimConfig::drop_chance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// The request arrives after the uplink latency; its response comes back.
    Deliver,
    /// The connection fails before the request is written: [`Failure::NotSent`] after the
    /// uplink latency; the server never sees it.
    NotSent,
    /// The connection drops after the request may have been written: [`Failure::MaybeSent`]
    /// after a round trip. With `arrives`, the server did get (and count) it.
    MaybeSent {
        /// Whether the request reached the server.
        arrives: bool,
    },
}

impl Fate {
    /// The fate a binding's caller names: `"deliver"`, `"not_sent"`, `"maybe_sent_arrived"`
    /// or `"maybe_sent_lost"`.
    pub fn from_name(name: &str) -> Option<Fate> {
        match name {
            "deliver" => Some(Fate::Deliver),
            "not_sent" => Some(Fate::NotSent),
            "maybe_sent_arrived" => Some(Fate::MaybeSent { arrives: true }),
            "maybe_sent_lost" => Some(Fate::MaybeSent { arrives: false }),
            _ => None,
        }
    }
}

/// A handle on a request scheduled with [`Simulation::enqueue_at`] (its index in
/// [`Report::requests`]); the [`RequestId`] exists only once the limiter has taken it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub usize);

/// How a request ended, recorded exactly once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// [`crate::Limiter::handle_response`] returned [`Disposition::Complete`] for a response
    /// with this status.
    Completed(u16),
    /// The limiter emitted [`Output::Fail`].
    Failed(FailReason),
    /// [`crate::Limiter::cancel`] succeeded.
    Cancelled,
    /// [`crate::Limiter::enqueue`] returned an error with this code.
    Rejected(&'static str),
}

impl Outcome {
    /// `Completed(s)` with `s` in 200..300.
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Completed(s) if (200..300).contains(s))
    }

    /// The failure code of a `Failed`, the error code of a `Rejected`.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Outcome::Failed(r) => Some(r.code()),
            Outcome::Rejected(c) => Some(c),
            _ => None,
        }
    }
}

/// One [`Output::Send`] of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct SendRecord {
    /// When it was sent.
    pub at: Nanos,
    /// Global order of sends and enqueues (ties within one instant).
    pub seq: u64,
    /// Whether the limiter had already been given a response with bucket headers for the same
    /// (identity, route, major) when it sent this: a limit it knew. In a cluster with a store,
    /// also when the store had recorded such a response of another process (shared knowledge;
    /// a report lost while the store was down shares nothing).
    pub informed: bool,
    /// The index of its arrival in [`Report::server_log`], if it reached the server.
    pub arrival: Option<usize>,
    /// The status it was answered with, if a response was delivered.
    pub status: Option<u16>,
    /// When its response was handed to the limiter, if it was (not dropped).
    pub answered_at: Option<Nanos>,
    /// The transport failure reported for it, if any.
    pub failure: Option<Failure>,
    /// Sent after [`crate::Limiter::close`].
    pub after_close: bool,
}

/// Everything the simulation recorded about one scheduled request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    /// The process (limiter) it was given to: always 0 outside [`Simulation::cluster`].
    pub process: usize,
    /// The request.
    pub request: Request,
    /// Its route key, as the limiter derives it.
    pub route: String,
    /// Its major parameter.
    pub major: String,
    /// When the test scheduled it.
    pub scheduled_at: Nanos,
    /// When the limiter took it (if it did).
    pub enqueued_at: Option<Nanos>,
    /// Global order of sends and enqueues.
    pub enqueue_seq: u64,
    /// Its id, once enqueued.
    pub id: Option<RequestId>,
    /// How it ended.
    pub outcome: Option<Outcome>,
    /// When it ended.
    pub finished_at: Option<Nanos>,
    /// Every send.
    pub sends: Vec<SendRecord>,
    /// When the test asked to cancel it.
    pub cancel_at: Option<Nanos>,
    /// Shared mode: how many reservations it made, and the answers it got (in order).
    pub reservations: Vec<ReservationAnswer>,
    in_flight: Option<usize>,
    /// A reservation whose answer has not been delivered yet (its number).
    reserving: Option<usize>,
    expect_fail: bool,
}

impl RequestRecord {
    /// The first send, if any.
    pub fn first_send(&self) -> Option<&SendRecord> {
        self.sends.first()
    }
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Every request ended and no network event is pending (a limiter timer may be).
    Finished,
    /// Nothing left to happen, but some requests never ended: the limiter lost them.
    Stalled,
    /// The next event lies beyond the time limit.
    MaxTime,
    /// The step limit was reached.
    MaxSteps,
}

/// A broken driver contract: the limiter emitted something a correct engine never emits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimError {
    /// Virtual time of the violation.
    pub at: Nanos,
    /// What happened.
    pub message: String,
    /// The last trace lines, if tracing was on.
    pub trace: Vec<String>,
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at t={}: {}", fmt_t(self.at), self.message)?;
        for line in &self.trace {
            write!(f, "\n  {line}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SimError {}

/// `1.234567s`.
pub(crate) fn fmt_t(ns: Nanos) -> String {
    format!("{}.{:06}s", ns / SECOND, (ns % SECOND) / 1000)
}

/// The result of a run.
#[derive(Debug, Clone)]
pub struct Report {
    /// One record per scheduled request, indexed by [`Ticket`].
    pub requests: Vec<RequestRecord>,
    /// Every arrival at the server.
    pub server_log: Vec<Arrival>,
    /// Every observation, with its time.
    pub observations: Vec<(Nanos, Observation)>,
    /// Why the run stopped.
    pub stop: StopReason,
    /// Virtual time at the end.
    pub now: Nanos,
    /// Events processed.
    pub steps: u64,
    /// The server's global limit.
    pub global: Option<BucketSpec>,
    /// The trace, if it was on.
    pub trace: Vec<String>,
}

impl Report {
    /// The record of `ticket`.
    pub fn record(&self, ticket: Ticket) -> &RequestRecord {
        &self.requests[ticket.0]
    }

    /// The outcome of `ticket`.
    pub fn outcome(&self, ticket: Ticket) -> Option<&Outcome> {
        self.requests[ticket.0].outcome.as_ref()
    }

    /// True when every request completed with a 2xx.
    pub fn all_succeeded(&self) -> bool {
        self.requests
            .iter()
            .all(|r| r.outcome.as_ref().is_some_and(Outcome::is_success))
    }

    /// Requests that completed with a 2xx.
    pub fn succeeded(&self) -> usize {
        self.requests
            .iter()
            .filter(|r| r.outcome.as_ref().is_some_and(Outcome::is_success))
            .count()
    }

    /// Requests whose outcome has the failure (or rejection) code `code`.
    pub fn failed_with(&self, code: &str) -> usize {
        self.requests
            .iter()
            .filter(|r| r.outcome.as_ref().and_then(Outcome::code) == Some(code))
            .count()
    }

    /// Requests that were cancelled.
    pub fn cancelled(&self) -> usize {
        self.requests
            .iter()
            .filter(|r| r.outcome == Some(Outcome::Cancelled))
            .count()
    }

    /// Requests without an outcome.
    pub fn unfinished(&self) -> Vec<Ticket> {
        (0..self.requests.len())
            .filter(|&i| self.requests[i].outcome.is_none())
            .map(Ticket)
            .collect()
    }

    /// Arrivals that got a 429 of any kind.
    pub fn count_429(&self) -> usize {
        self.server_log
            .iter()
            .filter(|a| a.outcome.is_429())
            .count()
    }

    /// Arrivals that got `outcome`.
    pub fn count(&self, outcome: ServerOutcome) -> usize {
        self.server_log
            .iter()
            .filter(|a| a.outcome == outcome)
            .count()
    }

    /// Every `Send` the limiter emitted.
    pub fn total_sends(&self) -> usize {
        self.requests.iter().map(|r| r.sends.len()).sum()
    }

    /// Shared mode: every `Reserve` the limiters emitted.
    pub fn total_reservations(&self) -> usize {
        self.requests.iter().map(|r| r.reservations.len()).sum()
    }

    /// From the first enqueue to the last outcome.
    pub fn makespan(&self) -> Nanos {
        let start = self
            .requests
            .iter()
            .filter_map(|r| r.enqueued_at)
            .min()
            .unwrap_or(0);
        let end = self
            .requests
            .iter()
            .filter_map(|r| r.finished_at)
            .max()
            .unwrap_or(start);
        end.saturating_sub(start)
    }

    /// Requests sent (at any attempt) after their deadline.
    pub fn deadline_violations(&self) -> Vec<Ticket> {
        (0..self.requests.len())
            .filter(|&i| {
                let r = &self.requests[i];
                r.request
                    .deadline
                    .is_some_and(|d| r.sends.iter().any(|s| s.at > d))
            })
            .map(Ticket)
            .collect()
    }

    /// Requests sent after the limiter was closed.
    pub fn sends_after_close(&self) -> Vec<Ticket> {
        (0..self.requests.len())
            .filter(|&i| self.requests[i].sends.iter().any(|s| s.after_close))
            .map(Ticket)
            .collect()
    }

    /// Bucket 429s the limiter could have avoided: indices into [`Report::server_log`] of
    /// [`ServerOutcome::BucketLimited`] arrivals such that this arrival and every arrival
    /// counted in the same server window of that bucket were informed sends (see
    /// [`SendRecord::informed`]). A bucket's window is the server's: the fixed window the
    /// arrival fell in, or the sliding window ending at it.
    pub fn known_limit_violations(&self) -> Vec<usize> {
        let mut informed_arrival: HashMap<usize, bool> = HashMap::new();
        for r in &self.requests {
            for s in &r.sends {
                if let Some(i) = s.arrival {
                    informed_arrival.insert(i, s.informed);
                }
            }
        }
        let informed = |i: usize| informed_arrival.get(&i).copied().unwrap_or(false);
        let mut out = Vec::new();
        for (i, a) in self.server_log.iter().enumerate() {
            if a.outcome != ServerOutcome::BucketLimited || !informed(i) {
                continue;
            }
            let Some(spec) = a.bucket_spec else { continue };
            let all_informed = self.server_log[..i]
                .iter()
                .enumerate()
                .filter(|(_, b)| {
                    b.counted_in_bucket
                        && b.identity == a.identity
                        && b.bucket == a.bucket
                        && b.major == a.major
                        && match spec.kind {
                            WindowKind::Fixed => b.bucket_window == a.bucket_window,
                            WindowKind::Sliding | WindowKind::Refill => b.at + spec.window > a.at,
                        }
                })
                .all(|(j, _)| informed(j));
            if all_informed {
                out.push(i);
            }
        }
        out
    }

    /// The most arrivals of `identity` counted against its global limit in any window of
    /// the global limit's length (0 when the server has no global limit).
    pub fn max_global_in_window(&self, identity: &str) -> usize {
        let Some(g) = self.global else { return 0 };
        let times: Vec<Nanos> = self
            .server_log
            .iter()
            .filter(|a| a.counted_global && a.identity == identity)
            .map(|a| a.at)
            .collect();
        max_in_window(&times, g.window)
    }

    /// Pairs `(earlier, later)` of requests of the same process with the same identity, route,
    /// major parameter and priority, both completed, where the later-enqueued one was first sent
    /// before the earlier one. Empty when the limiter is FIFO per bucket. (Across processes of a
    /// cluster there is no order to keep.)
    pub fn fifo_violations(&self) -> Vec<(Ticket, Ticket)> {
        let mut groups: HashMap<(usize, &str, &str, &str, i32), Vec<usize>> = HashMap::new();
        for (i, r) in self.requests.iter().enumerate() {
            if matches!(r.outcome, Some(Outcome::Completed(_))) && !r.sends.is_empty() {
                groups
                    .entry((
                        r.process,
                        r.request.identity.as_str(),
                        r.route.as_str(),
                        r.major.as_str(),
                        r.request.priority,
                    ))
                    .or_default()
                    .push(i);
            }
        }
        let mut out = Vec::new();
        for members in groups.values_mut() {
            members.sort_by_key(|&i| self.requests[i].enqueue_seq);
            for w in 0..members.len() {
                for v in w + 1..members.len() {
                    let (a, b) = (&self.requests[members[w]], &self.requests[members[v]]);
                    if b.sends[0].seq < a.sends[0].seq {
                        out.push((Ticket(members[w]), Ticket(members[v])));
                    }
                }
            }
        }
        out.sort();
        out
    }
}

#[derive(Debug)]
enum Event {
    Enqueue(usize),
    Cancel(usize),
    Close(usize),
    Arrive {
        ticket: usize,
        send: usize,
        lost: bool,
    },
    Respond {
        ticket: usize,
        send: usize,
        response: ServerResponse,
    },
    Fail {
        ticket: usize,
        send: usize,
        failure: Failure,
    },
    Timeout {
        process: usize,
        generation: u64,
    },
    /// The request left (its dispatch delay is over): the driver reports it.
    Written {
        ticket: usize,
        send: usize,
    },
    /// A reservation reaches the store; with `answer_after`, its answer reaches the process
    /// that much later.
    StoreReserve {
        ticket: usize,
        number: usize,
        reservation: Reservation,
        /// The driver's timeout (`None`: it already gave up on this one).
        deadline: Option<Nanos>,
    },
    /// The answer to reservation `number` of `ticket` reaches its process.
    Answer {
        ticket: usize,
        number: usize,
        answer: ReservationAnswer,
    },
    /// A write reaches the store.
    StoreRecord {
        process: usize,
        update: SharedUpdate,
    },
}

#[derive(Debug)]
struct Scheduled {
    at: Nanos,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Appends a trace line when tracing is on (the arguments are only formatted then).
macro_rules! note {
    ($sim:ident, $($arg:tt)*) => {
        if $sim.config.trace {
            let line = format!($($arg)*);
            $sim.push_trace(line);
        }
    };
}

/// The most outputs one drain may produce before the harness calls it a livelock.
const MAX_DRAIN: usize = 1_000_000;
/// The most timeouts at one instant before the harness calls it a livelock.
const MAX_TIMEOUTS_AT_INSTANT: u64 = 100_000;

/// Drives a [`Limiter`] against a [`Server`] in virtual time, exactly as a driver would:
/// after every input it drains [`Limiter::poll_output`] until `WaitUntil`/`Idle`; a
/// `Send(id)` reaches the server after the uplink latency and its response comes back after
/// the downlink latency; `WaitUntil(t)` sets the (single) timer; time jumps straight to the
/// next event.
///
/// It checks the contract as it goes and returns a [`SimError`] when the limiter breaks it:
/// an output naming an unknown id, a second outcome for a request, a `Send` for a request
/// already in flight or finished, [`Disposition::Failed`] without a matching `Fail`, an
/// error for a request the driver knows is live, a drain that never ends.
///
/// **Several processes.** [`Simulation::cluster`] runs several limiters (processes) against
/// the one server, each with its own driver loop and timer; [`Simulation::with_store`] gives
/// them a shared [`MemoryStore`](crate::shared::MemoryStore) reached over a [`StoreLink`], for limiters in shared mode
/// ([`crate::shared`]): each `Reserve` goes to the store and its answer comes back to
/// [`Limiter::handle_reservation`]; each `Share` is written to the store. The checks then also
/// cover reservations: a `Reserve` only for a queued request, at most one outstanding per
/// request, no `Send` while one is outstanding, and a late answer for a request that ended is
/// accepted (ignored) by the limiter. Knowledge of a bucket ([`SendRecord::informed`]) counts
/// across processes once the store has recorded it: they share it through the store.
#[derive(Debug)]
pub struct Simulation {
    limiters: Vec<Limiter>,
    store: Option<Box<dyn SharedStore>>,
    link: StoreLink,
    server: Server,
    config: SimConfig,
    rng: SplitMix64,
    now: Nanos,
    seq: u64,
    events: BinaryHeap<Reverse<Scheduled>>,
    pending_other: usize,
    records: Vec<RequestRecord>,
    by_id: HashMap<(usize, RequestId), usize>,
    timer_generation: Vec<u64>,
    /// (process, identity, route, major) whose bucket headers the process has seen.
    informed: HashSet<(usize, String, String, String)>,
    /// (identity, route, major) whose bucket report the store has recorded.
    store_informed: HashSet<(String, String, String)>,
    observations: Vec<(Nanos, Observation)>,
    trace: Vec<String>,
    steps: u64,
    timeouts_at_instant: Vec<(Nanos, u64)>,
    closed: Vec<bool>,
    scripted: HashMap<(usize, usize), Fate>,
    /// Per process: when its last message reaches the store, and its last answer comes back
    /// (one ordered connection each).
    store_up: Vec<Nanos>,
    /// Idle connections per process (see [`SimConfig::connect`]).
    idle_connections: Vec<usize>,
    /// Per process: when its last send left (see [`SimConfig::serial`]).
    last_left: Vec<Nanos>,
    store_down: Vec<Nanos>,
    /// How many of `link.wipes` have been applied to the store.
    wipes_done: usize,
}

impl Simulation {
    /// A simulation of `limiter` against `server` over the network `config`.
    pub fn new(limiter: Limiter, server: Server, config: SimConfig) -> Self {
        Simulation::cluster(vec![limiter], server, config)
    }

    /// A simulation of several processes, one limiter each, against the one `server` (they
    /// share its limits, as processes using one token do). Without
    /// [`Simulation::with_store`] nothing coordinates them.
    ///
    /// # Panics
    /// If `limiters` is empty.
    pub fn cluster(limiters: Vec<Limiter>, server: Server, config: SimConfig) -> Self {
        assert!(!limiters.is_empty(), "a simulation needs at least one limiter");
        let rng = SplitMix64::new(config.seed);
        let n = limiters.len();
        Simulation {
            limiters,
            store: None,
            link: StoreLink::default(),
            server,
            config,
            rng,
            now: 0,
            seq: 0,
            events: BinaryHeap::new(),
            pending_other: 0,
            records: Vec::new(),
            by_id: HashMap::new(),
            timer_generation: vec![0; n],
            informed: HashSet::new(),
            store_informed: HashSet::new(),
            observations: Vec::new(),
            trace: Vec::new(),
            steps: 0,
            timeouts_at_instant: vec![(0, 0); n],
            closed: vec![false; n],
            scripted: HashMap::new(),
            store_up: vec![0; n],
            idle_connections: vec![0; n],
            last_left: vec![0; n],
            store_down: vec![0; n],
            wipes_done: 0,
        }
    }

    /// Gives the processes a shared store reached over `link` (for limiters in shared mode):
    /// a [`MemoryStore`](crate::shared::MemoryStore), or any [`SharedStore`]. Process `i` calls the store as client
    /// `"p{i}"`, at the simulation's virtual time.
    pub fn with_store(mut self, store: impl SharedStore + 'static, link: StoreLink) -> Self {
        self.store = Some(Box::new(store));
        self.link = link;
        self
    }

    /// The limiter (of process 0).
    pub fn limiter(&self) -> &Limiter {
        &self.limiters[0]
    }

    /// The limiter of process `process`.
    pub fn limiter_of(&self, process: usize) -> &Limiter {
        &self.limiters[process]
    }

    /// The shared store, if there is one.
    pub fn store(&self) -> Option<&dyn SharedStore> {
        self.store.as_deref()
    }

    /// The server.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    fn schedule(&mut self, at: Nanos, event: Event) {
        if !matches!(event, Event::Timeout { .. }) {
            self.pending_other += 1;
        }
        self.seq += 1;
        self.events.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            event,
        }));
    }

    /// Schedules `request` to be enqueued at `at` (by process 0).
    pub fn enqueue_at(&mut self, at: Nanos, request: Request) -> Ticket {
        self.enqueue_on(0, at, request)
    }

    /// Schedules `request` to be enqueued at `at` by process `process`.
    ///
    /// # Panics
    /// If there is no such process.
    pub fn enqueue_on(&mut self, process: usize, at: Nanos, request: Request) -> Ticket {
        let route = super::server::route_of(self.limiters[process].config().profile, &request);
        let ticket = self.records.len();
        self.records.push(RequestRecord {
            process,
            request,
            route: route.key,
            major: route.major,
            scheduled_at: at,
            enqueued_at: None,
            enqueue_seq: 0,
            id: None,
            outcome: None,
            finished_at: None,
            sends: Vec::new(),
            cancel_at: None,
            reservations: Vec::new(),
            in_flight: None,
            reserving: None,
            expect_fail: false,
        });
        self.schedule(at, Event::Enqueue(ticket));
        Ticket(ticket)
    }

    /// Schedules a cancellation of `ticket` at `at` (ignored if the request has not been
    /// enqueued by then or has already ended).
    ///
    /// # Panics
    /// If `ticket` was not returned by [`Simulation::enqueue_at`] of this simulation.
    pub fn cancel_at(&mut self, at: Nanos, ticket: Ticket) {
        self.records[ticket.0].cancel_at = Some(at);
        self.schedule(at, Event::Cancel(ticket.0));
    }

    /// Decides what the network does with send number `attempt` (0 for the first) of
    /// `ticket`, overriding the random drops of [`SimConfig::drop_chance`].
    pub fn script_send(&mut self, ticket: Ticket, attempt: usize, fate: Fate) {
        self.scripted.insert((ticket.0, attempt), fate);
    }

    /// Schedules [`Limiter::close`] at `at` (of every process).
    pub fn close_at(&mut self, at: Nanos) {
        for process in 0..self.limiters.len() {
            self.schedule(at, Event::Close(process));
        }
    }

    /// Schedules [`Limiter::close`] of process `process` at `at`.
    pub fn close_process_at(&mut self, process: usize, at: Nanos) {
        self.schedule(at, Event::Close(process));
    }

    /// Runs until everything ended, or a limit is reached.
    ///
    /// # Errors
    /// A [`SimError`] when the limiter breaks the driver contract.
    pub fn run(&mut self) -> Result<Report, SimError> {
        self.run_until(Nanos::MAX)
    }

    /// Runs until virtual time `until` (or [`SimConfig::max_time`], whichever is first),
    /// or until everything ended. Events scheduled later stay scheduled.
    ///
    /// # Errors
    /// A [`SimError`] when the limiter breaks the driver contract.
    pub fn run_until(&mut self, until: Nanos) -> Result<Report, SimError> {
        let limit = until.min(self.config.max_time);
        let mut steps_this_run = 0;
        let stop = loop {
            if self.pending_other == 0 && self.records.iter().all(|r| r.outcome.is_some()) {
                break StopReason::Finished;
            }
            let Some(Reverse(next)) = self.events.peek() else {
                break StopReason::Stalled;
            };
            if next.at > limit {
                break StopReason::MaxTime;
            }
            if steps_this_run >= self.config.max_steps {
                break StopReason::MaxSteps;
            }
            let Some(Reverse(Scheduled { at, event, .. })) = self.events.pop() else {
                break StopReason::Stalled;
            };
            steps_this_run += 1;
            self.steps += 1;
            self.now = self.now.max(at);
            if !matches!(event, Event::Timeout { .. }) {
                self.pending_other -= 1;
            }
            self.process(event)?;
        };
        Ok(self.report(stop))
    }

    /// The report as of now (what [`Simulation::run`] returns).
    pub fn report(&self, stop: StopReason) -> Report {
        Report {
            requests: self.records.clone(),
            server_log: self.server.log().to_vec(),
            observations: self.observations.clone(),
            stop,
            now: self.now,
            steps: self.steps,
            global: self.server.config().global,
            trace: self.trace.clone(),
        }
    }

    fn err(&self, message: String) -> SimError {
        let start = self.trace.len().saturating_sub(60);
        SimError {
            at: self.now,
            message,
            trace: self.trace[start..].to_vec(),
        }
    }

    fn push_trace(&mut self, line: String) {
        self.trace.push(format!("t={} {line}", fmt_t(self.now)));
    }

    fn id_of(&self, ticket: usize) -> RequestId {
        self.records[ticket].id.unwrap_or(u64::MAX)
    }

    /// `"[p1] "` in a cluster, nothing for a single process (so traces read as before).
    fn tag(&self, process: usize) -> String {
        if self.limiters.len() > 1 { format!("[p{process}] ") } else { String::new() }
    }

    fn process(&mut self, event: Event) -> Result<(), SimError> {
        let now = self.now;
        match event {
            Event::Enqueue(t) => {
                let p = self.records[t].process;
                let mut request = self.records[t].request.clone();
                if self.config.hide_body_keys {
                    request.body_keys.clear();
                }
                self.seq += 1;
                self.records[t].enqueue_seq = self.seq;
                match self.limiters[p].enqueue(now, request) {
                    Ok(id) => {
                        if let Some(&other) = self.by_id.get(&(p, id)) {
                            return Err(self.err(format!(
                                "enqueue returned id {id} for ticket {t}, already issued for ticket {other}"
                            )));
                        }
                        self.by_id.insert((p, id), t);
                        self.records[t].id = Some(id);
                        self.records[t].enqueued_at = Some(now);
                        note!(
                            self,
                            "{}enqueue ticket {t} -> id {id} ({} {:?} {}prio {})",
                            self.tag(p),
                            self.records[t].route,
                            self.records[t].major,
                            if self.records[t].request.identity.is_empty() {
                                String::new()
                            } else {
                                format!("as {} ", self.records[t].request.identity)
                            },
                            self.records[t].request.priority
                        );
                    }
                    Err(e) => {
                        note!(self, "{}enqueue ticket {t} rejected: {e}", self.tag(p));
                        self.records[t].enqueued_at = Some(now);
                        self.set_outcome(t, Outcome::Rejected(e.code()))?;
                    }
                }
                self.drain(p)
            }
            Event::Written { ticket, send } => {
                let p = self.records[ticket].process;
                if self.records[ticket].in_flight != Some(send) || self.records[ticket].outcome.is_some() {
                    return Ok(());
                }
                let id = self.id_of(ticket);
                note!(self, "{}written id {id} #{send}", self.tag(p));
                if let Err(e) = self.limiters[p].handle_written(now, id) {
                    return Err(self.err(format!("handle_written({id}) failed: {e}")));
                }
                self.drain(p)
            }
            Event::Cancel(t) => {
                let p = self.records[t].process;
                let Some(id) = self.records[t].id else {
                    note!(self, "{}cancel ticket {t}: not enqueued, ignored", self.tag(p));
                    return Ok(());
                };
                if self.records[t].outcome.is_some() {
                    note!(self, "{}cancel id {id}: already ended, ignored", self.tag(p));
                    return Ok(());
                }
                match self.limiters[p].cancel(now, id) {
                    Ok(()) => {
                        note!(self, "{}cancel id {id}: ok", self.tag(p));
                        self.set_outcome(t, Outcome::Cancelled)?;
                    }
                    Err(e) => {
                        return Err(self.err(format!("cancel of live request {id} failed: {e}")));
                    }
                }
                self.drain(p)
            }
            Event::Close(p) => {
                note!(self, "{}close", self.tag(p));
                self.closed[p] = true;
                self.limiters[p].close(now);
                self.drain(p)
            }
            Event::Arrive { ticket, send, lost } => {
                let id = self.id_of(ticket);
                let response = self.server.handle(now, id, &self.records[ticket].request);
                let index = self.server.log().len() - 1;
                self.records[ticket].sends[send].arrival = Some(index);
                note!(
                    self,
                    "{}arrive id {id} #{send}: {} {:?}{}",
                    self.tag(self.records[ticket].process),
                    response.status,
                    self.server.log()[index].outcome,
                    if lost { " (response lost)" } else { "" }
                );
                if lost {
                    self.server.mark_response_lost(index);
                } else {
                    let at = now + self.config.downlink.sample(&mut self.rng);
                    self.schedule(
                        at,
                        Event::Respond {
                            ticket,
                            send,
                            response,
                        },
                    );
                }
                Ok(())
            }
            Event::Respond {
                ticket,
                send,
                response,
            } => {
                self.idle_connections[self.records[ticket].process] += 1;
                self.deliver_response(ticket, send, &response)
            }
            Event::Fail {
                ticket,
                send,
                failure,
            } => {
                self.idle_connections[self.records[ticket].process] += 1;
                self.deliver_failure(ticket, send, failure)
            }
            Event::Timeout { process: p, generation } => {
                if generation != self.timer_generation[p] {
                    return Ok(());
                }
                if self.timeouts_at_instant[p].0 == now {
                    self.timeouts_at_instant[p].1 += 1;
                    if self.timeouts_at_instant[p].1 > MAX_TIMEOUTS_AT_INSTANT {
                        return Err(self.err(format!(
                            "livelock: {MAX_TIMEOUTS_AT_INSTANT} timeouts at the same instant \
                             (WaitUntil never moves forward)"
                        )));
                    }
                } else {
                    self.timeouts_at_instant[p] = (now, 1);
                }
                note!(self, "{}timeout", self.tag(p));
                self.limiters[p].handle_timeout(now);
                self.drain(p)
            }
            Event::StoreReserve {
                ticket,
                number,
                reservation,
                deadline,
            } => {
                let p = self.records[ticket].process;
                let client = format!("p{p}");
                self.apply_wipes(now);
                let Some(store) = self.store.as_mut() else {
                    return Err(self.err("internal: a reservation without a store".into()));
                };
                let answer = store.reserve(now, &client, &reservation);
                let back = (now + self.link.downlink.sample(&mut self.rng)).max(self.store_down[p]);
                self.store_down[p] = back;
                let in_time = deadline.is_some_and(|d| back <= d);
                note!(
                    self,
                    "{}store: reservation {number} of id {} -> {answer:?}{}",
                    self.tag(p),
                    reservation.id,
                    if in_time { "" } else { " (too late for the driver)" }
                );
                if in_time {
                    self.schedule(back, Event::Answer { ticket, number, answer });
                } else if let Some(d) = deadline {
                    let answer = ReservationAnswer::Unavailable;
                    self.schedule(d, Event::Answer { ticket, number, answer });
                }
                Ok(())
            }
            Event::Answer {
                ticket,
                number,
                answer,
            } => self.deliver_answer(ticket, number, answer),
            Event::StoreRecord { process: p, update } => {
                if self.link.is_down(now) {
                    note!(self, "{}store down: write lost: {update:?}", self.tag(p));
                    return Ok(());
                }
                let client = format!("p{p}");
                self.apply_wipes(now);
                if let Some(store) = self.store.as_mut() {
                    store.record(now, &client, &update);
                }
                if let SharedUpdate::Bucket { identity, route, major, bucket: Some(_), limit, remaining, reset_after, .. } =
                    &update
                    && (limit.is_some() || remaining.is_some() || reset_after.is_some())
                {
                    self.store_informed.insert((identity.clone(), route.clone(), major.clone()));
                }
                note!(self, "{}store: recorded {update:?}", self.tag(p));
                Ok(())
            }
        }
    }

    /// Empties the store for each restart ([`StoreLink::restart`]) that began by `now`: it
    /// forgets what it knew, and so does the shared knowledge the checks use.
    fn apply_wipes(&mut self, now: Nanos) {
        while self.link.wipes.get(self.wipes_done).is_some_and(|&t| t <= now) {
            self.wipes_done += 1;
            if let Some(store) = self.store.as_mut() {
                store.clear();
            }
            self.store_informed.clear();
            note!(self, "store restarted: it is empty");
        }
    }

    fn deliver_answer(
        &mut self,
        ticket: usize,
        number: usize,
        answer: ReservationAnswer,
    ) -> Result<(), SimError> {
        let now = self.now;
        let p = self.records[ticket].process;
        let id = self.id_of(ticket);
        if self.records[ticket].reserving != Some(number) {
            return Err(self.err(format!(
                "internal: answer to reservation {number} of id {id}, which is not outstanding"
            )));
        }
        self.records[ticket].reserving = None;
        self.records[ticket].reservations.push(answer);
        let ended = self.records[ticket].outcome.is_some();
        let result = self.limiters[p].handle_reservation(now, id, answer);
        note!(
            self,
            "{}answer id {id} reservation {number}: {answer:?} -> {result:?}{}",
            self.tag(p),
            if ended { " (request already ended)" } else { "" }
        );
        if let Err(e) = result {
            return Err(self.err(format!(
                "handle_reservation for id {id} (reserving; ended: {ended}) failed: {e}"
            )));
        }
        self.drain(p)
    }

    fn deliver_response(
        &mut self,
        ticket: usize,
        send: usize,
        response: &ServerResponse,
    ) -> Result<(), SimError> {
        let now = self.now;
        let id = self.id_of(ticket);
        self.records[ticket].sends[send].status = Some(response.status);
        if self.records[ticket].outcome.is_some() {
            // Cancelled (or failed) while in flight: the driver no longer waits for it.
            note!(
                self,
                "response {} for id {id} dropped: request already ended",
                response.status
            );
            if let Some(index) = self.records[ticket].sends[send].arrival {
                self.server.mark_response_lost(index);
            }
            return Ok(());
        }
        if self.records[ticket].in_flight != Some(send) {
            return Err(self.err(format!(
                "internal: response for id {id} send #{send} not in flight"
            )));
        }
        self.records[ticket].in_flight = None;
        self.records[ticket].sends[send].answered_at = Some(now);
        let dialect = self.server.config().dialect;
        let informed = if dialect == HeaderProfile::Discord {
            response.header("X-RateLimit-Bucket").is_some()
        } else {
            response.with_response(None, |r| crate::headers::parse(dialect, r).remaining.is_some())
        };
        if informed {
            let r = &self.records[ticket];
            self.informed.insert((
                r.process,
                r.request.identity.clone(),
                r.route.clone(),
                r.major.clone(),
            ));
        }
        let wall = self.wall_clock_ms();
        let p = self.records[ticket].process;
        let limiter = &mut self.limiters[p];
        let result = if self.config.server_clock {
            response.with_response(wall, |r| limiter.handle_response(now, id, r))
        } else {
            let mut blind = response.clone();
            blind.headers.retain(|(name, _)| !name.eq_ignore_ascii_case("X-RateLimit-Reset"));
            blind.with_response(wall, |r| limiter.handle_response(now, id, r))
        };
        note!(self, "{}deliver id {id}: {} -> {result:?}", self.tag(p), response.status);
        match result {
            Ok(Disposition::Complete) => {
                self.set_outcome(ticket, Outcome::Completed(response.status))?
            }
            Ok(Disposition::Retry) => {}
            Ok(Disposition::Failed) => self.records[ticket].expect_fail = true,
            Err(e) => {
                return Err(self.err(format!("handle_response for in-flight id {id} failed: {e}")));
            }
        }
        self.drain(self.records[ticket].process)?;
        self.check_expected_fail(ticket)
    }

    fn deliver_failure(
        &mut self,
        ticket: usize,
        send: usize,
        failure: Failure,
    ) -> Result<(), SimError> {
        let now = self.now;
        let id = self.id_of(ticket);
        self.records[ticket].sends[send].failure = Some(failure);
        if self.records[ticket].outcome.is_some() {
            note!(
                self,
                "failure {failure:?} for id {id} dropped: request already ended"
            );
            return Ok(());
        }
        if self.records[ticket].in_flight != Some(send) {
            return Err(self.err(format!(
                "internal: failure for id {id} send #{send} not in flight"
            )));
        }
        self.records[ticket].in_flight = None;
        let p = self.records[ticket].process;
        let result = self.limiters[p].handle_failure(now, id, failure);
        note!(self, "{}failure id {id}: {failure:?} -> {result:?}", self.tag(p));
        match result {
            Ok(Disposition::Complete) => {
                return Err(self.err(format!(
                    "handle_failure({failure:?}) for id {id} returned Complete"
                )));
            }
            Ok(Disposition::Retry) => {}
            Ok(Disposition::Failed) => self.records[ticket].expect_fail = true,
            Err(e) => {
                return Err(self.err(format!("handle_failure for in-flight id {id} failed: {e}")));
            }
        }
        self.drain(self.records[ticket].process)?;
        self.check_expected_fail(ticket)
    }

    fn check_expected_fail(&mut self, ticket: usize) -> Result<(), SimError> {
        let r = &self.records[ticket];
        if r.expect_fail && !matches!(r.outcome, Some(Outcome::Failed(_))) {
            let id = self.id_of(ticket);
            return Err(self.err(format!(
                "Disposition::Failed for id {id} but no Output::Fail in the drain"
            )));
        }
        self.records[ticket].expect_fail = false;
        Ok(())
    }

    fn wall_clock_ms(&self) -> Option<u64> {
        self.config.wall_clock.then(|| {
            let server_ms = self.server.config().wall_epoch_ms + self.now / MILLISECOND;
            server_ms.saturating_add_signed(self.config.clock_skew_ms)
        })
    }

    fn set_outcome(&mut self, ticket: usize, outcome: Outcome) -> Result<(), SimError> {
        if let Some(previous) = &self.records[ticket].outcome {
            let id = self.id_of(ticket);
            return Err(self.err(format!(
                "request {id} (ticket {ticket}) got a second outcome {outcome:?} after {previous:?}"
            )));
        }
        self.records[ticket].outcome = Some(outcome);
        self.records[ticket].finished_at = Some(self.now);
        Ok(())
    }

    fn drain(&mut self, p: usize) -> Result<(), SimError> {
        for _ in 0..MAX_DRAIN {
            match self.limiters[p].poll_output() {
                Output::Send(id) => self.on_send(p, id)?,
                Output::Fail(id, reason) => {
                    let Some(&t) = self.by_id.get(&(p, id)) else {
                        return Err(self.err(format!(
                            "Output::Fail({id}, {reason:?}) names an unknown id"
                        )));
                    };
                    note!(self, "{}fail id {id}: {reason:?}", self.tag(p));
                    if self.records[t].in_flight.is_some() {
                        note!(
                            self,
                            "(id {id} failed while in flight; its answer will be dropped)"
                        );
                        self.records[t].in_flight = None;
                    }
                    self.set_outcome(t, Outcome::Failed(reason))?;
                }
                Output::Observe(o) => {
                    note!(self, "{}observe {o:?}", self.tag(p));
                    self.observations.push((self.now, o));
                }
                Output::Reserve(reservation) => self.on_reserve(p, reservation)?,
                Output::Share(update) => {
                    if self.store.is_none() {
                        return Err(self.err(format!(
                            "Output::Share({update:?}) from a limiter without a store"
                        )));
                    }
                    let at = (self.now + self.link.uplink.sample(&mut self.rng)).max(self.store_up[p]);
                    self.store_up[p] = at;
                    note!(self, "{}share {update:?}", self.tag(p));
                    self.schedule(at, Event::StoreRecord { process: p, update });
                }
                Output::WaitUntil(t) => {
                    self.timer_generation[p] += 1;
                    let generation = self.timer_generation[p];
                    let at = t.max(self.now);
                    note!(self, "{}wait until {}", self.tag(p), fmt_t(t));
                    self.schedule(at, Event::Timeout { process: p, generation });
                    return Ok(());
                }
                Output::Idle => {
                    self.timer_generation[p] += 1;
                    note!(self, "{}idle", self.tag(p));
                    return Ok(());
                }
            }
        }
        Err(self.err(format!(
            "poll_output produced {MAX_DRAIN} outputs without WaitUntil/Idle"
        )))
    }

    fn on_reserve(&mut self, p: usize, reservation: Reservation) -> Result<(), SimError> {
        let now = self.now;
        let id = reservation.id;
        let Some(&t) = self.by_id.get(&(p, id)) else {
            return Err(self.err(format!("Output::Reserve({id}) names an unknown id")));
        };
        if self.store.is_none() {
            return Err(self.err(format!("Output::Reserve({id}) from a limiter without a store")));
        }
        if let Some(o) = &self.records[t].outcome {
            return Err(self.err(format!(
                "Output::Reserve({id}) for a request that already ended: {o:?}"
            )));
        }
        if self.records[t].in_flight.is_some() {
            return Err(self.err(format!("Output::Reserve({id}) while it is in flight")));
        }
        if self.records[t].reserving.is_some() {
            return Err(self.err(format!(
                "Output::Reserve({id}) while its previous reservation is outstanding"
            )));
        }
        let number = self.records[t].reservations.len();
        self.records[t].reserving = Some(number);
        let arrives = (now + self.link.uplink.sample(&mut self.rng)).max(self.store_up[p]);
        self.store_up[p] = arrives;
        let deadline = now + self.link.timeout;
        let reachable = !self.link.is_down(arrives) && arrives <= deadline;
        note!(self, "{}reserve id {id} #{number}", self.tag(p));
        if !self.link.is_down(arrives) {
            let deadline = reachable.then_some(deadline);
            self.schedule(arrives, Event::StoreReserve { ticket: t, number, reservation, deadline });
        }
        if !reachable {
            let answer = ReservationAnswer::Unavailable;
            self.schedule(deadline, Event::Answer { ticket: t, number, answer });
        }
        Ok(())
    }

    fn on_send(&mut self, p: usize, id: RequestId) -> Result<(), SimError> {
        let now = self.now;
        let Some(&t) = self.by_id.get(&(p, id)) else {
            return Err(self.err(format!("Output::Send({id}) names an unknown id")));
        };
        if self.records[t].reserving.is_some() {
            return Err(self.err(format!(
                "Output::Send({id}) while its reservation is outstanding"
            )));
        }
        if let Some(o) = &self.records[t].outcome {
            return Err(self.err(format!(
                "Output::Send({id}) for a request that already ended: {o:?}"
            )));
        }
        if self.records[t].in_flight.is_some() {
            return Err(self.err(format!("Output::Send({id}) while it is already in flight")));
        }
        let r = &self.records[t];
        let key = (r.request.identity.clone(), r.route.clone(), r.major.clone());
        let informed = self.store_informed.contains(&key)
            || self.informed.contains(&(p, key.0, key.1, key.2));
        self.seq += 1;
        let send = self.records[t].sends.len();
        self.records[t].sends.push(SendRecord {
            at: now,
            seq: self.seq,
            informed,
            arrival: None,
            status: None,
            answered_at: None,
            failure: None,
            after_close: self.closed[p],
        });
        self.records[t].in_flight = Some(send);
        // No draw without a dispatch delay, so the other draws stay where they were.
        let mut lag = if self.config.dispatch == Latency::ZERO {
            0
        } else {
            self.config.dispatch.sample(&mut self.rng)
        };
        if self.config.connect > 0 {
            if self.idle_connections[p] > 0 {
                self.idle_connections[p] -= 1;
            } else {
                lag += self.config.connect;
            }
        }
        if self.config.serial > 0 {
            // Written in turn: after the process's previous send left.
            let leaves = (now + lag).max(self.last_left[p] + self.config.serial);
            self.last_left[p] = leaves;
            lag = leaves - now;
        }
        let left = now;
        let now = now + lag;
        let up = self.config.uplink.sample(&mut self.rng);
        let fate = match self.scripted.get(&(t, send)) {
            Some(&fate) => fate,
            None if self.rng.chance(self.config.drop_chance) => {
                if self.rng.chance(self.config.maybe_sent_share) {
                    Fate::MaybeSent {
                        arrives: self.rng.chance(self.config.maybe_sent_arrives),
                    }
                } else {
                    Fate::NotSent
                }
            }
            None => Fate::Deliver,
        };
        // A request whose connection failed before sending never left: nothing to report.
        if lag > 0 && self.config.report_written && fate != Fate::NotSent {
            self.schedule(left + lag, Event::Written { ticket: t, send });
        }
        match fate {
            Fate::Deliver => {
                self.schedule(
                    now + up,
                    Event::Arrive {
                        ticket: t,
                        send,
                        lost: false,
                    },
                );
                note!(self, "{}send id {id} #{send}", self.tag(p));
            }
            Fate::NotSent => {
                self.schedule(
                    now + up,
                    Event::Fail {
                        ticket: t,
                        send,
                        failure: Failure::NotSent,
                    },
                );
                note!(
                    self,
                    "{}send id {id} #{send} (connection will fail: not sent)",
                    self.tag(p)
                );
            }
            Fate::MaybeSent { arrives } => {
                let down = self.config.downlink.sample(&mut self.rng);
                if arrives {
                    self.schedule(
                        now + up,
                        Event::Arrive {
                            ticket: t,
                            send,
                            lost: true,
                        },
                    );
                }
                self.schedule(
                    now + up + down,
                    Event::Fail {
                        ticket: t,
                        send,
                        failure: Failure::MaybeSent,
                    },
                );
                note!(
                    self,
                    "{}send id {id} #{send} (connection will drop: maybe sent, arrives: {arrives})",
                    self.tag(p)
                );
            }
        }
        Ok(())
    }
}
