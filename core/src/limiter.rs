//! The client-side engine: [`Limiter`].
//!
//! # Call order
//!
//! The limiter is a state machine. Its methods sort into three groups:
//!
//! * **inputs** (`&mut self`, take `now`): [`Limiter::enqueue`], [`Limiter::handle_response`],
//!   [`Limiter::handle_failure`], [`Limiter::cancel`], [`Limiter::handle_timeout`],
//!   [`Limiter::close`], [`Limiter::restore`], and in shared mode [`Limiter::handle_reservation`];
//! * **outputs**: [`Limiter::poll_output`];
//! * **getters** (`&self`): [`Limiter::predict`], [`Limiter::queued`], [`Limiter::in_flight`],
//!   [`Limiter::reserving`], [`Limiter::buckets`], [`Limiter::config`], [`Limiter::snapshot`].
//!
//! **The drain invariant:** after every input, call [`Limiter::poll_output`] until it returns
//! [`Output::WaitUntil`] or [`Output::Idle`]. Then wait for the next input (a response, a new
//! request) or until the `WaitUntil` time, whichever comes first, and call
//! [`Limiter::handle_timeout`] at that time. Calling `handle_timeout` early or twice is harmless.
//!
//! `now` is any monotonic clock in nanoseconds, with an epoch of the driver's choice; it must
//! never go backwards (a smaller `now` than before is treated as the previous one).
//!
//! A request's life: [`Limiter::enqueue`] → [`Output::Send`] → [`Limiter::handle_response`] (or
//! [`Limiter::handle_failure`]) → [`Disposition::Complete`], with `Send` again after a
//! [`Disposition::Retry`]; or an [`Output::Fail`]; or the caller's [`Limiter::cancel`].
//!
//! **Shared mode** ([`Config::shared`], see [`crate::shared`]) adds one step before each send:
//! the engine emits [`Output::Reserve`] instead of `Send`, the driver asks the store and calls
//! [`Limiter::handle_reservation`] with the answer, and `Send` comes out of that call (or the
//! request waits and is reserved again). It also emits [`Output::Share`]: updates the driver
//! writes to the store, in order, without waiting. A driver loop handles the two extra outputs
//! like this:
//!
//! ```text
//! Output::Reserve(r) => spawn { answer = store.reserve(client, r) or Unavailable on timeout;
//!                               limiter.handle_reservation(now, r.id, answer); drain }
//! Output::Share(u)   => store.record(client, u)   // same connection, in order, fire-and-forget
//! ```
//!
//! # Costs
//!
//! Every request costs one request of its bucket. APIs that limit more than requests (LLM
//! APIs' tokens per minute, GraphQL points) report those budgets as further dimensions
//! ([`RateLimitInfo::dimensions`]); a request names what it will cost in them with
//! [`Request::costs`] (`tokens: 1200`), an estimate. Then, per queue (route and major
//! parameter, or learned bucket) and dimension:
//!
//! - **The gate.** The queue's head is sent only when every dimension it names has room for
//!   its *charge*: the lowest `remaining` any answer of the dimension's current window
//!   reported, less the charges still in flight; before such a report, the limit less what
//!   was charged since the window began locally and what was in flight then. Otherwise it
//!   waits for the dimension's reset (the latest end an answer of the window reported), or for
//!   an answer when no reset is known. The queue stays in order behind it. A dimension no
//!   answer reported yet does not hold anything (the first answers tell).
//! - **The charge** is the estimate times the dimension's margin: the worst ratio of actual to
//!   estimated cost settled so far, widened by the ratios' spread over their number (the worst
//!   of `n` draws falls short of the true worst by about that much), between 1 and 16 (an
//!   estimate that errs high stays the caller's own margin; exact estimates are charged as
//!   they are), and never above the limit for an estimate within it. Only the last 64 ratios
//!   count, so one wild estimate is forgotten. Before any answer settles it is at least 2, and
//!   that floor falls linearly to 1 over the first 8 answers: the first answers come back
//!   together and free a burst of sends before most of them say how far the estimates err.
//! - **Settling.** The answer gives the charge back. Its body's actual cost
//!   ([`BodyHints::usage`], read by [`headers::settled_cost`]) teaches the margin and replaces
//!   the charge in what the window spent; its reports lower the dimension's `remaining`. A 429
//!   (or a send that never left) gives the charge back whole; an answer that does not say
//!   keeps the charge spent.
//! - **Never fits.** A request whose estimate is above a dimension's reported limit fails with
//!   [`FailReason::InsufficientCapacity`]: at enqueue when the limit is known, else when an
//!   answer reports it (its own 429 included: it is not retried).
//! - The request count still follows the binding rule ([`crate::headers`], "Several
//!   budgets") over the dimensions the request's costs do *not* name.
//!
//! **Shared mode:** each process keeps to its part of every budget, the limit and what the
//! server reports divided by the live process count the store last gave (an estimate within
//! the limit is charged at most that part). Exact for processes whose demand is alike; one
//! process alone is held to its part while others are counted live.
//!
//! What this guarantees: a dimension is never charged past what its reports leave, so a
//! server that counts each request at no more than its charge never refuses one for that
//! dimension; an actual cost above every ratio settled before the request was sent can still
//! overrun the last of a window (the property in `core/tests/costs.rs` checks both).
//!
//! Predictions ([`Limiter::predict`], the deadline, `max_wait` and `defer_after` checks) count
//! the charges queued ahead: what the current window has left, then the whole limit per window
//! of the longest reset reported. Not covered yet: snapshots do not carry the budgets.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use crate::config::Config;
use crate::error::Error;
use crate::headers;
use crate::route::{Route, route_for};
use crate::shared::{OnUnavailable, Reservation, ReservationAnswer, SharedScope, SharedUpdate};
use crate::types::*;

mod costs;
mod outage;
mod state;

use costs::{Blocked, Budgets, Pack, Ratio, ReqCosts};
use outage::{Recovery, SendLog};

/// When a request is expected to be sent (see [`Limiter::predict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prediction {
    /// Expected monotonic send time (`now` if it could go at once).
    pub send_at: Nanos,
}

/// A fast, non-cryptographic hasher (the Fx hash used by rustc) for the engine's maps. Keys
/// come from the caller and the server's bucket ids; a hostile server could at worst slow one
/// limiter down by colliding keys, never corrupt it.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Index of a queue in the slab.
type Qid = usize;
/// Index of an identity.
type Iid = usize;
/// Order of a queue head among eligible heads: higher priority first, then older first.
type ReadyKey = (Reverse<i32>, u64, Qid);

/// The sans-IO client-side rate limiter. See the [module documentation](self) for the call
/// order, and the crate documentation for a complete driver loop.
#[derive(Debug)]
pub struct Limiter {
    config: Config,
    now: Nanos,
    /// Ids are issued in enqueue order, so comparing ids compares enqueue order.
    next_id: RequestId,
    requests: HashMap<RequestId, Req>,
    queue_index: HashMap<QueueKey, Qid>,
    queues: Vec<Option<Queue>>,
    free_queues: Vec<Qid>,
    next_queue_uid: u64,
    /// `METHOD /template` -> bucket id, learned from responses.
    routes: HashMap<String, String>,
    /// Route -> how many queues keyed by that (not yet learned) route exist.
    route_queues: HashMap<String, u32>,
    /// Route -> the bucket id it had before the server changed it: until that old bucket's
    /// queue learns the new id itself, the route's requests keep going to it.
    renamed: HashMap<String, String>,
    /// Route -> when the request whose answer taught its current bucket id was sent: an answer
    /// to a request sent before that is older news, and cannot change the mapping back.
    route_taught_at: HashMap<String, Nanos>,
    /// Learning order of `routes`, for the size bound.
    route_order: VecDeque<String>,
    /// Bucket hash -> the longest window length learned for it under any major parameter:
    /// a new queue of that hash starts with it (Discord's hash names one limit and window for
    /// every channel), so a window it never saw answered is not estimated shorter than it is.
    /// At most `max_routes` entries.
    hash_periods: HashMap<String, Nanos>,
    /// Route groups known before any answer ([`Config::route_groups`]).
    prior: crate::prior::Prior,
    identity_index: HashMap<String, Iid>,
    identities: Vec<Identity>,
    /// Queues whose head may be sendable as far as its bucket is concerned.
    ready: BTreeSet<ReadyKey>,
    /// Queues to re-evaluate.
    dirty: Vec<Qid>,
    timers: BinaryHeap<Reverse<(Nanos, Timer)>>,
    outputs: VecDeque<Output>,
    /// When each invalid response (401/403/non-shared 429) within the window leaves it: its
    /// arrival plus `invalid_request_window`. (Kept as ends, not arrivals, so a restored
    /// response older than the monotonic clock's epoch is exact: see [`Limiter::restore`].)
    invalid_ends: VecDeque<Nanos>,
    invalid_warned: bool,
    /// Requests sent and not answered, all identities.
    in_flight_total: usize,
    /// Shared mode: requests whose reservation is outstanding.
    reserving_total: usize,
    /// Shared mode: requests that ended while their reservation was outstanding, with what a
    /// late grant must release at the store.
    orphans: HashMap<RequestId, Orphan>,
    /// Shared mode: the store failed to answer; no reservation before `store_retry_at`, then
    /// one probe at a time.
    store_down: bool,
    store_retry_at: Nanos,
    /// Consecutive failures counted in the current outage (one per outage step, not one per
    /// reservation that was outstanding when the store went away).
    store_failures: u32,
    /// Failures counted since the limiter started (wrapping): a reservation emitted before the
    /// last one was counted fails with the same cause, so its `Unavailable` is not counted again.
    store_step: u32,
    /// Shared mode: how many live processes the store counted in its last answer (1 until it
    /// says). While the store is down, a fail-open process runs on this share of the limits.
    /// Kept as it was from the outage until its recovery ends.
    store_processes: u32,
    /// Shared mode: when the store was last marked down (the outage began for this process).
    store_down_since: Nanos,
    /// Shared mode: when the store last answered (granted or denied) a reservation.
    store_last_answer: Nanos,
    /// Shared mode: the longest a reservation waited for `Unavailable` in the current outage
    /// (the driver's timeout, when the store hung).
    outage_wait: Nanos,
    /// Shared mode: after an outage, until every process is back (see [`Recovery`]).
    recovery: Option<Recovery>,
    /// Shared mode: round trips of recent reservations, for the margin passed to the store
    /// until the store's own clock is known ([`Limiter::learn_store_delay`]).
    reservation_latencies: Recent<Nanos>,
    reservation_margin: Nanos,
    /// Shared mode: for recent grants that told the store's clock, when the core handled the
    /// grant (this process's clock) less the store's clock at the grant: the delay from the
    /// store's count to the grant's handling, up to one constant (the clocks' offset).
    store_delays: Recent<i64>,
    store_delay_extremes: Option<(i64, i64)>,
    /// 1.5x the spread of `store_delays`, once 16 are in.
    store_margin: Option<Nanos>,
    /// No request goes out before this (a Cloudflare-style ban).
    edge_until: Nanos,
    edge_strikes: u32,
    /// The registered wake-up for the host-wide gates.
    gate_wake: Option<Nanos>,
    /// Round trips of recent responses: from the send (for the lead) and from when the
    /// request left (for the global margin; the same unless the driver reports writes).
    latencies: Recent<(Nanos, Nanos)>,
    /// Uplink delays up to a constant, where the server tells its clock (see [`Uplinks`]).
    uplinks: Uplinks,
    /// The first global window's floor on the global margin (see
    /// [`Limiter::global_margin_at`]).
    first_window: Option<FirstWindow>,
    global_margin: Nanos,
    /// How much earlier than a window end it saw (an answer's arrival plus its reset-after) a
    /// request may be sent and still reach the server after that end: a lower bound on the
    /// fastest round trip (see [`Limiter::learn_latency`]). 0 until 16 round trips are in.
    send_lead: Nanos,
    /// Per cost dimension: the recent ratios of actual to estimated cost (see `costs`).
    ratios: Vec<(Box<str>, Ratio)>,
    rng: u64,
    /// Queues that went empty, checked a few at a time for eviction.
    idle_candidates: VecDeque<(Qid, u64)>,
    closed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum BucketId {
    /// Not learned yet: the route and its major parameter.
    Route(String),
    /// Learned: the server's bucket id.
    Hash(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct QueueKey {
    identity: Iid,
    bucket: BucketId,
    major: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// Re-evaluate a queue (bucket reset, retry backoff, sub-limit end). Carries the queue uid.
    Queue(Qid, u64),
    /// An identity's global window has room again, or its global pause ends.
    Identity(Iid),
    /// A request's deadline.
    Deadline(RequestId),
    /// The edge ban or the invalid-request budget lets requests through again.
    Gate,
    /// Shared mode: the recovery after a store outage ends at the latest.
    Recovery,
}

#[derive(Debug)]
struct Req {
    route_key: String,
    /// `"{route_key} #{class}"` when the request has a sub-limit class: the key a sub-limit
    /// 429 of this request holds (and, in shared mode, the route it reserves under).
    sub_key: Option<Box<str>>,
    major: String,
    identity: Iid,
    /// The effective deadline: the request's own, or `enqueued + max_wait`, or
    /// `enqueued + defer_after`, whichever is first.
    deadline: Option<Nanos>,
    /// Which budget `deadline` came from (selects the failure reason).
    limit: Limit,
    enqueued_at: Nanos,
    priority: i32,
    idempotent: bool,
    exempt: bool,
    qid: Qid,
    state: ReqState,
    /// Not sent before this (retry backoff).
    not_before: Nanos,
    sends: u32,
    rate_limit_retries: u32,
    error_retries: u32,
    /// A transport failure after which it may have reached the server happened to one of its
    /// attempts: if its retries run out, it ends in `maybe_sent`, not `network_error`.
    maybe_reached: bool,
    /// Its estimated costs ([`Request::costs`]) and what its send in flight charged its queue's
    /// budgets; `None` for a request without costs that charged nothing.
    cost: Option<Box<ReqCosts>>,
}

/// The budget a request's effective deadline comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    /// The request's own deadline (or none at all).
    Deadline,
    /// `enqueued + max_wait`.
    MaxWait,
    /// `enqueued + min(defer_after, max_wait)`; the request's own deadline, later, if any.
    Defer { own_deadline: Option<Nanos> },
}

/// The request's effective deadline and the budget it comes from: its own deadline,
/// `now + max_wait`, or, when it has a `defer_after` (its own or the config's), `now +
/// min(defer_after, max_wait)` as a deferral budget. The earliest wins; on a tie the
/// request's own deadline (a send past it is no use, so `deadline_exceeded` is the honest
/// answer, not `deferred`).
fn effective_deadline(
    now: Nanos,
    own: Option<Nanos>,
    max_wait: Option<Nanos>,
    defer_after: Option<Nanos>,
) -> (Option<Nanos>, Limit) {
    let relative = match (defer_after, max_wait) {
        (Some(d), Some(m)) => Some((now.saturating_add(d.min(m)), Limit::Defer { own_deadline: own })),
        (Some(d), None) => Some((now.saturating_add(d), Limit::Defer { own_deadline: own })),
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
/// request's own deadline fails as `deadline_exceeded` (a retry then is no use).
fn limit_reason(limit: Limit, enqueued_at: Nanos, deadline: Nanos, predicted: Option<Nanos>, now: Nanos) -> FailReason {
    match limit {
        Limit::Deadline => FailReason::DeadlineExceeded { predicted_send_at: predicted },
        Limit::MaxWait => FailReason::MaxWaitExceeded {
            predicted_wait: predicted.unwrap_or(deadline).saturating_sub(enqueued_at),
        },
        Limit::Defer { own_deadline } => {
            let retry_at = predicted.unwrap_or(now).max(now);
            match own_deadline {
                Some(d) if retry_at > d => FailReason::DeadlineExceeded { predicted_send_at: Some(retry_at) },
                _ => FailReason::Deferred { retry_at },
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReqState {
    Queued,
    /// Its response or failure is being handled: neither queued nor in flight.
    Answered,
    /// Shared mode: it holds its slot (as if in flight) while the store decides.
    Reserving {
        /// When the reservation was emitted.
        since: Nanos,
        /// The store's outage step (`Limiter::store_step`) when it was emitted: an
        /// `Unavailable` answer counts as a new failure only if no failure was counted since.
        step: u32,
        window_seq: u32,
        window_epoch: u64,
        global_at: Option<Nanos>,
        /// It spends a leased global token (its reservation does not ask the store's window).
        leased: bool,
        /// It carried the identity's [`SendLog`] (after an outage), as of this mark.
        reported: Option<u64>,
        /// It asked for the processes back since the outage (`processes_since`).
        asked_since: bool,
    },
    InFlight {
        sent_at: Nanos,
        /// Sends of this bucket since its last local reset, this one included.
        window_seq: u32,
        /// Whether it was sent after the bucket's last local reset.
        window_epoch: u64,
        /// Its entry in the identity's global log, if it counts against the global limit: the
        /// send, or the transport's later report that it left.
        global_at: Option<Nanos>,
        /// When it left: `sent_at`, or the transport's later report
        /// ([`Limiter::handle_written`]).
        left_at: Nanos,
        /// Nothing else of this limiter was in flight when it was sent: its trip met no
        /// queue of this process's own making (see [`Uplinks`]).
        alone: bool,
    },
}

#[derive(Debug)]
struct Queue {
    key: QueueKey,
    uid: u64,
    pending: VecDeque<RequestId>,
    in_flight: Vec<RequestId>,
    bucket: Bucket,
    /// Sub-limit holds of this queue until a time: a route key (holds the whole route) or a
    /// request's `sub_key` (holds that class of the route).
    sub_limits: Vec<(String, Nanos)>,
    /// A shared-scope 429 holds the whole resource until then.
    shared_until: Nanos,
    /// The registered wake-up, if any.
    wake_at: Option<Nanos>,
    /// Where the queue's head sits: in `ready`, or in its identity's `blocked`.
    slot: Slot,
    /// Last send or answer, for idle eviction.
    last_active: Nanos,
    /// Whether the queue sits in `idle_candidates`.
    idle_listed: bool,
    /// The latest wait for which the pending requests were checked against their deadlines.
    checked_wait: Nanos,
    /// One budget per cost dimension its requests named (see `costs`).
    budgets: Budgets,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    None,
    Ready(ReadyKey, RequestId),
    Blocked(ReadyKey, RequestId),
}

#[derive(Debug, Default)]
struct Bucket {
    /// Headers have been seen (or the route proved to have none).
    known: bool,
    /// A success came back without rate-limit headers: only the global limit applies.
    unlimited: bool,
    limit: u32,
    /// The lowest `remaining` the server reported in the current window (`None` until a
    /// response from this window arrives). What may still be sent is this minus what is in
    /// flight: the lowest report is the server's latest state, and anything it did not count
    /// yet is either still in flight or came back with a lower report.
    reported: Option<u32>,
    /// Requests the current window may hold that no report may count (cancelled in flight,
    /// failed after maybe reaching the server, answered without a count, or answered from
    /// before the local reset): they count as in flight until the window resets, or until a
    /// report proves them counted (see [`Ghost`]).
    ghosts: Vec<Ghost>,
    /// End of the current window as the client sees it; `None` after a local reset until the
    /// next response tells (or a provisional end from the learned window length).
    reset_at: Option<Nanos>,
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
    /// Window length, learned from the first answer of a window (an upper bound).
    period: Option<Nanos>,
    /// The longest `reset_after` any answer gave: a fallback window estimate.
    longest_reset: Nanos,
    /// When the last request of this bucket was sent.
    last_send: Nanos,
    /// When the first request since the last local reset was sent.
    window_first_send: Option<Nanos>,
    /// An upper bound on the window length: a reported window end minus the first send of
    /// the local window (that send arrived at or after the server's window start).
    window_upper: Nanos,
    /// Send times, kept while `sliding` (at most `limit`, capped).
    send_log: VecDeque<Nanos>,
    /// A shared-scope limit below the bucket's, learned from `shared` 429s: how many requests a
    /// window may send (the fewest a window got through: what it sent less what the resource
    /// refused), and until when that is remembered.
    shared_cap: Option<(u32, Nanos)>,
    /// Shared-scope 429s of the local window `epoch`: (epoch, count).
    shared_refused: (u64, u32),
}

const SLIDING_LOG_CAP: u32 = 4096;

impl Req {
    /// Its estimated costs ([`Request::costs`]).
    fn costs(&self) -> &[(Box<str>, u64)] {
        self.cost.as_ref().map_or(&[], |c| &c.estimates)
    }

    /// Whether a sub-limit hold on `key` holds this request: a hold on its route holds every
    /// request of the route, a hold on its class only the requests of that class.
    fn held_by(&self, key: &str) -> bool {
        key == self.route_key || self.sub_key.as_deref() == Some(key)
    }

    /// The route this request reserves and shares under in shared mode, and the key its
    /// sub-limit 429 holds: its class's key when it has a sub-limit class, else its route.
    fn shared_route(&self) -> &str {
        self.sub_key.as_deref().unwrap_or(&self.route_key)
    }
}

impl Queue {
    /// Until when a sub-limit holds `r` (see [`Req::held_by`]).
    fn sub_limit_until(&self, r: &Req) -> Option<Nanos> {
        self.sub_limits.iter().filter(|(k, _)| r.held_by(k)).map(|&(_, t)| t).max()
    }

    /// Holds sub-limit key `key` (a route or a class of it) until `until`, or longer if it
    /// already is.
    fn hold_sub_limit(&mut self, key: String, until: Nanos) {
        match self.sub_limits.iter_mut().find(|(k, _)| *k == key) {
            Some((_, t)) => *t = (*t).max(until),
            None => self.sub_limits.push((key, until)),
        }
    }
}

impl Bucket {
    /// The window length as well as it is known (1 s when nothing is known).
    fn window_estimate(&self) -> Nanos {
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
    fn window_floor(&self) -> Nanos {
        let estimate = self.window_estimate();
        if self.longest_reset > 0 { self.longest_reset.min(estimate) } else { estimate }
    }

    /// How much before `reset_at` the next window's requests may go and still reach the server
    /// after the window's end: `lead` ([`Limiter::send_lead`]) when a response reported the end
    /// (`reset_at` is then the end plus that answer's trip back), 0 for an end estimated from
    /// the window length.
    fn lead(&self, lead: Nanos) -> Nanos {
        if self.reset_provisional { 0 } else { lead }
    }

    /// When the next window's requests may go: `reset_at` less the link's lead
    /// ([`Limiter::send_lead`]), or the answers' own `reset_ready` where that is earlier (each
    /// rule alone keeps the next request after the window's end).
    fn ready_at(&self, lead: Nanos) -> Option<Nanos> {
        let reset = self.reset_at?;
        let by_link = reset.saturating_sub(self.lead(lead));
        Some(if self.reset_provisional { by_link } else { by_link.min(self.reset_ready) })
    }

    /// Starts the next window locally once the current one's requests may go
    /// ([`Bucket::ready_at`]): what is in flight (and the ghosts) is carried into it.
    fn roll_if_due(&mut self, now: Nanos, lead: Nanos, in_flight: usize) {
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
    fn effective_limit(&self, share: u32) -> u32 {
        share_of(self.shared_cap.map_or(self.limit, |(cap, _)| self.limit.min(cap)), share)
    }

    /// Requests counted as in flight for this bucket.
    fn outstanding(&self, in_flight: usize) -> u32 {
        (in_flight as u32).saturating_add(self.ghosts.len() as u32)
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
        match self.reported {
            Some(r) if self.shared_cap.is_some() || share > 1 => r.saturating_sub(outstanding).min(local),
            Some(r) => r.saturating_sub(outstanding),
            None => local,
        }
    }
}

/// A request a bucket's window may hold without any report counting it (see
/// [`Bucket::ghosts`]).
#[derive(Debug, Clone)]
struct Ghost {
    /// Its route (a ghost follows its route if that moves to another bucket).
    route: String,
    /// When its answer came back, if one did: it reached the server before that, so the
    /// report of a request that left afterwards counts it (or its window is over). `None` for
    /// a request cancelled in flight or failed after maybe reaching the server: it may still
    /// be on its way, behind requests sent later.
    answered_at: Option<Nanos>,
}

/// What a late grant for a request that already ended must release at the store.
#[derive(Debug)]
struct Orphan {
    /// The outage step its reservation was emitted in.
    step: u32,
    /// Its reservation asked for the processes back since the outage.
    asked_since: bool,
    identity: String,
    route: String,
    major: String,
    bucket: Option<String>,
}

#[derive(Debug)]
struct Identity {
    /// The caller's key for the token.
    name: String,
    /// Send times of non-exempt requests within the global window (+ margin). Without a
    /// configured global limit, kept for [`LearnedCap`] (never refunded: a little cautious).
    sends: VecDeque<Nanos>,
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
struct Lease {
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
    fn has_tokens(&self, now: Nanos) -> bool {
        self.tokens > 0 && now < self.until
    }
}

enum Gate {
    Open,
    /// Closed until a known time.
    Until(Nanos),
    /// Closed until some response arrives.
    UntilResponse,
}

/// What a 429 refused by: the token (global), a shared resource, the edge (no rate-limit
/// headers), a hidden limit below the bucket's (the bucket had room), or the bucket.
fn refusal_scope(info: &RateLimitInfo, response: &Response<'_>) -> RateLimitScope {
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

fn is_idempotent_method(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS" | "PUT" | "DELETE" | "TRACE")
}

fn valid_method(method: &str) -> bool {
    !method.is_empty()
        && method.len() <= 32
        && method.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl Limiter {
    /// A limiter with `config`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when a setting is out of range.
    pub fn new(config: Config) -> Result<Self, Error> {
        config.validate()?;
        let rng = config.jitter_seed ^ 0x9E37_79B9_7F4A_7C15;
        let margin = config.global_margin_max / 2;
        let prior = crate::prior::Prior::new(config.profile, &config.route_groups).map_err(Error::InvalidConfig)?;
        Ok(Limiter {
            config,
            now: 0,
            next_id: 1,
            requests: HashMap::default(),
            queue_index: HashMap::default(),
            queues: Vec::new(),
            free_queues: Vec::new(),
            next_queue_uid: 0,
            routes: HashMap::default(),
            renamed: HashMap::default(),
            route_taught_at: HashMap::default(),
            route_queues: HashMap::default(),
            route_order: VecDeque::new(),
            hash_periods: HashMap::default(),
            prior,
            identity_index: HashMap::default(),
            identities: Vec::new(),
            ready: BTreeSet::new(),
            dirty: Vec::new(),
            timers: BinaryHeap::new(),
            outputs: VecDeque::new(),
            invalid_ends: VecDeque::new(),
            invalid_warned: false,
            in_flight_total: 0,
            reserving_total: 0,
            orphans: HashMap::default(),
            store_down: false,
            store_retry_at: 0,
            store_failures: 0,
            store_step: 0,
            store_processes: 1,
            store_down_since: 0,
            store_last_answer: 0,
            outage_wait: 0,
            recovery: None,
            reservation_latencies: Recent::default(),
            reservation_margin: 0,
            store_delays: Recent::default(),
            store_delay_extremes: None,
            store_margin: None,
            edge_until: 0,
            edge_strikes: 0,
            gate_wake: None,
            latencies: Recent::default(),
            uplinks: Uplinks::default(),
            first_window: None,
            global_margin: margin,
            send_lead: 0,
            ratios: Vec::new(),
            rng,
            idle_candidates: VecDeque::new(),
            closed: false,
        })
    }

    /// The configuration this limiter runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Requests queued and not yet sent (reserving ones excluded).
    pub fn queued(&self) -> usize {
        self.requests.len() - self.in_flight_total - self.reserving_total
    }

    /// Shared mode: requests whose reservation is outstanding at the store.
    pub fn reserving(&self) -> usize {
        self.reserving_total
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight_total
    }

    /// The invalid-request budget used at `now`: the invalid responses (401, 403 and
    /// non-shared 429s, as the limiter counted them) whose window (`invalid_request_window`)
    /// has not ended by `now`, restored ones included. Requests in flight, which the budget's
    /// gate also counts as possibly invalid, are not included. Always 0 when the budget is
    /// off (`invalid_request_limit` = 0). A read: `now` changes nothing.
    pub fn invalid_requests(&self, now: Nanos) -> u32 {
        let expired = self.invalid_ends.partition_point(|&end| end <= now);
        (self.invalid_ends.len() - expired) as u32
    }

    /// Buckets (queues) currently held in memory.
    pub fn buckets(&self) -> usize {
        self.queue_index.len()
    }

    /// Whether [`Limiter::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    // ------------------------------------------------------------------ inputs

    /// Queues `request` and returns its id. The request ends in exactly one outcome: sent and
    /// answered ([`Disposition::Complete`] from [`Limiter::handle_response`]), an
    /// [`Output::Fail`], or the caller's [`Limiter::cancel`].
    ///
    /// A request whose predicted wait exceeds its deadline or `max_wait` fails at once (the
    /// [`Output::Fail`] carries the prediction); one whose predicted wait exceeds its
    /// `defer_after` ([`Request::defer_after`], else [`Config::defer_after`]) fails at once
    /// with [`FailReason::Deferred`] and the predicted send time, unless that time is past its
    /// own deadline ([`FailReason::DeadlineExceeded`] then).
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for a malformed method or path, [`Error::Closed`] after
    /// [`Limiter::close`].
    pub fn enqueue(&mut self, now: Nanos, request: Request) -> Result<RequestId, Error> {
        let now = self.advance(now);
        if self.closed {
            return Err(Error::Closed);
        }
        let route = self.validate_request(&request)?;
        let method = request.method.to_ascii_uppercase();
        let iid = self.identity(&request.identity);
        let id = self.next_id;
        self.next_id += 1;

        if self.identities[iid].unauthorized {
            self.outputs.push_back(Output::Fail(id, FailReason::Unauthorized));
            self.pump(now);
            return Ok(id);
        }

        let exempt = request.global_exempt.unwrap_or(route.global_exempt);
        let sub_key = self.sub_key(&request, &route.key);
        let key = self.queue_key_for(iid, &route.key, &route.major);
        let qid = self.queue_for(key);
        let defer_after = request.defer_after.or(self.config.defer_after);
        let (deadline, limit) =
            effective_deadline(now, request.deadline, self.config.max_wait, defer_after);

        let predicted = match deadline {
            Some(_) => {
                let position = self.queue(qid).pending.len();
                let t = self.predict_position(now, qid, &route.key, sub_key.as_deref(), position, exempt);
                let ahead = self.charges_ahead(now, qid, position);
                self.cost_wait(now, qid, &ahead, &request.costs).map_or(t, |c| t.max(c))
            }
            None => now,
        };
        if let Some(d) = deadline
            && predicted > d
        {
            let reason = limit_reason(limit, now, d, Some(predicted), now);
            self.outputs.push_back(Output::Fail(id, reason));
            self.note_idle(qid);
            self.pump(now);
            return Ok(id);
        }
        if let Some(reason) = costs::never_fits(self.queue(qid).budgets.get(), &request.costs) {
            self.outputs.push_back(Output::Fail(id, reason));
            self.note_idle(qid);
            self.pump(now);
            return Ok(id);
        }

        self.requests.insert(
            id,
            Req {
                route_key: route.key,
                sub_key,
                major: route.major,
                identity: iid,
                deadline,
                limit,
                enqueued_at: now,
                priority: request.priority,
                idempotent: request.idempotent.unwrap_or_else(|| is_idempotent_method(&method)),
                exempt,
                qid,
                state: ReqState::Queued,
                not_before: 0,
                sends: 0,
                rate_limit_retries: 0,
                error_retries: 0,
                maybe_reached: false,
                cost: (!request.costs.is_empty()).then(|| {
                    let estimates = request.costs.into_iter().map(|(n, c)| (n.into_boxed_str(), c)).collect();
                    Box::new(ReqCosts { estimates, charges: Vec::new() })
                }),
            },
        );
        if !exempt {
            self.identities[iid].queued += 1;
        }
        self.queue_mut(qid).pending.push_back(id);
        if let Some(d) = deadline {
            self.arm_deadline(id, d);
        }
        self.mark_dirty(qid);
        self.pump(now);
        Ok(id)
    }

    /// The transport reports that the sent request `id` left at `now`: its current attempt was
    /// written to the network (on a busy runtime, or when a connection had to be opened first,
    /// well after the [`Output::Send`]). The identity's global window then counts the request
    /// from `now`, so a batch written late does not let the next batch reach the server inside
    /// the same window; and the round trip the global margin is learned from starts here, so
    /// the margin measures the network, not the runtime's delay.
    ///
    /// Report when the request's bytes are handed to the socket, not before: only the first
    /// report counts, and one made early (from a hook that runs before the write, as aiohttp's
    /// headers hook does for a request whose body a later task writes) counts the request from
    /// before it left, so the next window may reach the server inside this one.
    ///
    /// Optional: a driver that cannot tell when a request left never calls it, and the
    /// limiter counts from the `Send`. A report for a request that is no longer in flight
    /// (answered, cancelled, or sent again since) or that comes after an earlier report of the
    /// same attempt is ignored, so a driver may report from a transport hook without
    /// tracking the request's state. Emits no output.
    ///
    /// # Errors
    /// [`Error::UnknownRequest`] if `id` was never issued.
    pub fn handle_written(&mut self, now: Nanos, id: RequestId) -> Result<(), Error> {
        let now = self.advance(now);
        if id == 0 || id >= self.next_id {
            return Err(Error::UnknownRequest(id));
        }
        let Some(req) = self.requests.get(&id) else {
            return Ok(());
        };
        let ReqState::InFlight { sent_at, global_at, left_at, .. } = req.state else {
            return Ok(());
        };
        if left_at != sent_at || now <= sent_at {
            return Ok(());
        }
        let iid = req.identity;
        if let Some(old) = global_at {
            self.restamp_global(iid, old, now);
            self.identities[iid].send_log.restamp(old, now);
        }
        if let ReqState::InFlight { global_at, left_at, .. } = &mut self.req_mut(id).state {
            *global_at = global_at.map(|_| now);
            *left_at = now;
        }
        Ok(())
    }

    /// A response arrived for the sent request `id`. Returns what the driver should do with it.
    ///
    /// # Errors
    /// [`Error::UnknownRequest`] or [`Error::InvalidState`] if `id` is not in flight.
    pub fn handle_response(
        &mut self,
        now: Nanos,
        id: RequestId,
        response: &Response<'_>,
    ) -> Result<Disposition, Error> {
        let now = self.advance(now);
        let mut sent_at = self.take_in_flight(id)?;
        let mut info = headers::parse(self.config.profile, response);
        {
            let costs = self.requests[&id].costs();
            if !costs.is_empty() {
                // The engine's request count sees the budgets the request's costs do not
                // cover: those it names have their own gates.
                let rest: Vec<Dimension> =
                    info.dimensions.iter().filter(|d| !costs.iter().any(|(n, _)| **n == *d.name)).cloned().collect();
                (info.limit, info.remaining, info.reset_after) = headers::binding_view(&rest);
            }
        }
        let round_trip = now.saturating_sub(sent_at.left_at);
        let mut answer_lead = 0;
        let mut uplink_widens = false;
        if let Some(server_ms) = info.server_time_ms {
            // The server's clock at its answer less this process's monotonic clock when the
            // request left: its uplink (and the server's time to stamp the answer) up to a
            // constant. Monotonic, not the wall clock: exact to the nanosecond here, and never
            // stepped.
            let offset = i128::from(server_ms) * i128::from(MILLISECOND) - i128::from(sent_at.left_at);
            if let Ok(offset) = i64::try_from(offset) {
                uplink_widens = self.uplinks.push(offset, round_trip, sent_at.alone);
                answer_lead = self.uplinks.lead(offset, round_trip);
            }
        }
        self.learn_latency(
            now.saturating_sub(sent_at.sent_at),
            now.saturating_sub(sent_at.left_at),
            sent_at.left_at,
            uplink_widens,
        );

        let sent_in = self.requests[&id].qid;
        {
            // An answer from before the last local reset may have been counted in the new
            // window, after its lowest report or before any (a request sent later may have
            // arrived first and reported a window without it): keep its slot until the next
            // reset.
            let b = &self.queue(sent_in).bucket;
            if sent_at.window_epoch < b.epoch {
                self.add_ghost(sent_in, id, Some(now));
            }
        }
        // Learn the bucket first: the request may move to another queue.
        let (qid, stale_bucket) = self.learn_bucket(id, info.bucket.as_deref(), sent_at);
        if qid != sent_in {
            // Like the requests in flight that moved with it, it belongs to its new queue's
            // current window (window epochs are per queue).
            sent_at.window_epoch = self.queue(qid).bucket.epoch;
        }
        // An answer that refused the request for a rate limit is a 429 to the engine, whatever
        // its status: the profile recognises them (GitHub's 403 with `retry-after`, Shopify's
        // throttled 200; `RateLimitInfo::throttled`), and they wait and retry like a 429
        // instead of completing (or counting as an invalid 403).
        let status = if info.throttled { 429 } else { response.status };
        if (200..300).contains(&status) {
            self.edge_strikes = 0;
        }
        let lowered = self.settle_costs(id, Some((now, &info, &response.body)), status == 429);
        if !stale_bucket {
            self.apply_headers(now, id, qid, sent_at, &info, status, answer_lead);
        }
        if self.config.shared.is_some() {
            let update = self.bucket_report(id, qid, &info);
            self.outputs.push_back(Output::Share(update));
        }

        let disposition = match status {
            429 => match costs::never_fits(self.queue(qid).budgets.get(), self.requests[&id].costs()) {
                // The 429 reported a limit its estimate exceeds (an oversized first request,
                // say): the request itself is why, so nothing else is held, and a retry is no use.
                Some(reason) => {
                    let scope = refusal_scope(&info, response);
                    let retry_after = info.retry_after.unwrap_or(0);
                    self.outputs.push_back(Output::Observe(Observation::RateLimited { id, scope, retry_after }));
                    self.fail(id, reason);
                    Disposition::Failed
                }
                None => self.on_rate_limited(now, id, qid, &info, response, sent_at),
            },
            401 => {
                self.record_invalid(now, id);
                if self.config.stop_on_unauthorized {
                    let iid = self.req(id).identity;
                    self.mark_unauthorized(iid);
                }
                Disposition::Complete
            }
            403 => {
                self.record_invalid(now, id);
                Disposition::Complete
            }
            500..=599 if self.req(id).idempotent => self.retry_after_error(now, id, false),
            _ => Disposition::Complete,
        };
        if disposition == Disposition::Complete {
            self.finish(id);
        }
        if lowered {
            self.fail_never_fitting(qid);
        }
        self.mark_dirty(qid);
        self.pump(now);
        Ok(disposition)
    }

    /// The transport failed for the sent request `id`.
    ///
    /// With [`Failure::NotSent`] the request's global token and bucket slot are given back and
    /// it is re-sent after a backoff (bounded by `max_error_retries`). With
    /// [`Failure::MaybeSent`] it is re-sent only if it is idempotent; otherwise it fails with
    /// [`FailReason::MaybeSent`].
    ///
    /// # Errors
    /// [`Error::UnknownRequest`] or [`Error::InvalidState`] if `id` is not in flight.
    pub fn handle_failure(
        &mut self,
        now: Nanos,
        id: RequestId,
        failure: Failure,
    ) -> Result<Disposition, Error> {
        let now = self.advance(now);
        let flight = self.take_in_flight(id)?;
        let qid = self.req(id).qid;
        if self.config.shared.is_some() {
            let update = self.release(id, failure == Failure::MaybeSent);
            self.outputs.push_back(Output::Share(update));
        }
        let disposition = match failure {
            Failure::NotSent => {
                self.refund(qid, id, flight);
                self.retry_after_error(now, id, true)
            }
            Failure::MaybeSent => {
                self.settle_costs(id, None, false);
                self.add_ghost(qid, id, None);
                self.req_mut(id).maybe_reached = true;
                if self.req(id).idempotent {
                    self.retry_after_error(now, id, true)
                } else {
                    self.fail(id, FailReason::MaybeSent);
                    Disposition::Failed
                }
            }
        };
        self.mark_dirty(qid);
        self.pump(now);
        Ok(disposition)
    }

    /// The caller gave up on `id`. A queued request leaves the queue (it consumed nothing);
    /// an in-flight one stops being waited for, and what it consumed stays consumed, since it
    /// may have reached the server. No output is emitted for it: cancellation is its outcome.
    ///
    /// In shared mode a reserving request (its reservation outstanding) ends at once and gives
    /// back its local slot; the late answer to its reservation is ignored by
    /// [`Limiter::handle_reservation`]. An in-flight one emits a [`SharedUpdate::Release`].
    ///
    /// # Errors
    /// [`Error::UnknownRequest`] if `id` is not queued or in flight.
    pub fn cancel(&mut self, now: Nanos, id: RequestId) -> Result<(), Error> {
        let now = self.advance(now);
        let req = self.requests.get(&id).ok_or(Error::UnknownRequest(id))?;
        let qid = req.qid;
        match req.state {
            ReqState::Queued => self.unqueue(id),
            ReqState::InFlight { .. } => {
                self.take_in_flight(id)?;
                // It may have reached the server: it keeps its slot until the window resets.
                self.settle_costs(id, None, false);
                self.add_ghost(qid, id, None);
                if self.config.shared.is_some() {
                    let update = self.release(id, true);
                    self.outputs.push_back(Output::Share(update));
                }
            }
            ReqState::Reserving { .. } => self.abandon_reservation(id),
            ReqState::Answered => return Err(Error::UnknownRequest(id)),
        }
        self.finish(id);
        self.mark_dirty(qid);
        self.pump(now);
        Ok(())
    }

    /// Shared mode: the store answered the reservation of request `id` (an
    /// [`Output::Reserve`] emitted earlier). `Granted` emits `Output::Send(id)` now (or fails the
    /// request if its deadline passed meanwhile); `Denied` puts it back in its queue and holds
    /// what the store said is exhausted; `Unavailable` follows
    /// [`SharedConfig::on_unavailable`](crate::shared::SharedConfig::on_unavailable). See
    /// [`crate::shared`] for the whole protocol.
    ///
    /// The answer for a request that ended while its reservation was outstanding (cancelled,
    /// closed, failed) is ignored: `Ok(())`, no outcome, and a [`SharedUpdate::Release`] for a
    /// `Granted` one.
    ///
    /// # Errors
    /// [`Error::UnknownRequest`] if `id` was never issued or already ended otherwise;
    /// [`Error::InvalidState`] if it is not reserving (queued, in flight, or answered twice).
    pub fn handle_reservation(
        &mut self,
        now: Nanos,
        id: RequestId,
        answer: ReservationAnswer,
    ) -> Result<(), Error> {
        let now = self.advance(now);
        let processes = answer.processes();
        if let Some(orphan) = self.orphans.remove(&id) {
            match answer {
                ReservationAnswer::Granted { .. } => {
                    self.store_answered(now, processes, orphan.asked_since);
                    self.outputs.push_back(Output::Share(SharedUpdate::Release {
                        id,
                        identity: orphan.identity,
                        route: orphan.route,
                        major: orphan.major,
                        bucket: orphan.bucket,
                        reached: false,
                        window: None,
                    }));
                }
                ReservationAnswer::Denied { .. } => self.store_answered(now, processes, orphan.asked_since),
                ReservationAnswer::Unavailable => self.store_unavailable(now, id, orphan.step),
            }
            self.pump(now);
            return Ok(());
        }
        let req = self.requests.get(&id).ok_or(Error::UnknownRequest(id))?;
        let ReqState::Reserving {
            since,
            step,
            window_seq,
            window_epoch,
            global_at,
            leased,
            reported,
            asked_since,
        } = req.state
        else {
            return Err(Error::InvalidState { id, expected: "reserving" });
        };
        let (qid, iid) = (req.qid, req.identity);
        let flight = Flight { sent_at: since, window_seq, window_epoch, global_at, left_at: since, alone: false };
        self.reserving_total -= 1;
        self.req_mut(id).state = ReqState::Answered;
        if answer != ReservationAnswer::Unavailable {
            // A driver's timeout is not a round trip: an outage must not widen the margin.
            self.learn_reservation_latency(now.saturating_sub(since));
            if let Some(mark) = reported {
                // The store counted what this identity sent without it.
                self.identities[iid].send_log.counted(mark);
            }
        }
        let lease = if let ReservationAnswer::Granted { leased, .. } = answer { leased } else { 0 };
        self.lease_answered(now, iid, id, lease);
        match answer {
            ReservationAnswer::Granted { store_time, .. } => {
                self.store_answered(now, processes, asked_since);
                if let Some(store_at) = store_time {
                    self.learn_store_delay(now, store_at);
                }
                self.grant(now, qid, id, flight);
            }
            ReservationAnswer::Denied { retry_after, scope, .. } => {
                self.store_answered(now, processes, asked_since);
                self.unspend_lease(now, iid, leased);
                self.unreserve(qid, id, flight);
                self.hold(now, id, qid, scope, retry_after.max(MILLISECOND), leased);
            }
            ReservationAnswer::Unavailable => {
                // Back in line either way: fail-closed waits for the store, fail-open sends it
                // without a reservation as soon as this process's share of the limits allows
                // (at once if it does), like every other request during the outage.
                self.store_unavailable(now, id, step);
                if self.store_down {
                    self.outage_wait = self.outage_wait.max(now.saturating_sub(since));
                }
                self.unspend_lease(now, iid, leased);
                self.unreserve(qid, id, flight);
            }
        }
        self.mark_dirty(qid);
        self.pump(now);
        Ok(())
    }

    /// Time passed: fires due deadlines, resets and retries. Harmless when called early or twice.
    pub fn handle_timeout(&mut self, now: Nanos) {
        let now = self.advance(now);
        self.pump(now);
    }

    /// Closes the limiter: every queued request fails with [`FailReason::Closed`], in the order
    /// they were enqueued, and [`Limiter::enqueue`] refuses new ones. Requests in flight still
    /// take their responses, but are not re-sent. In shared mode, reserving requests fail with
    /// the queued ones (they were never sent); their late answers are ignored.
    pub fn close(&mut self, now: Nanos) {
        let now = self.advance(now);
        self.closed = true;
        self.fail_queued(|_| true, FailReason::Closed);
        self.pump(now);
    }

    /// The next output. Call until it returns [`Output::WaitUntil`] or [`Output::Idle`].
    #[must_use]
    pub fn poll_output(&mut self) -> Output {
        if let Some(out) = self.outputs.pop_front() {
            return out;
        }
        self.discard_stale_timers();
        match self.timers.peek() {
            Some(Reverse((t, _))) => Output::WaitUntil(*t),
            None => Output::Idle,
        }
    }

    /// Predicts when `request` would be sent if it were enqueued at `now`, from what the
    /// limiter knows (an unknown bucket is assumed open). Callers use it to show an ETA or to
    /// shed load; [`Limiter::enqueue`] uses the same prediction for deadlines and `max_wait`.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for a malformed method or path.
    pub fn predict(&self, now: Nanos, request: &Request) -> Result<Prediction, Error> {
        let now = now.max(self.now);
        let route = self.validate_request(request)?;
        let exempt = request.global_exempt.unwrap_or(route.global_exempt);
        let sub_key = self.sub_key(request, &route.key);
        let Some(&iid) = self.identity_index.get(&request.identity) else {
            return Ok(Prediction { send_at: now.max(self.host_hold()) });
        };
        let key = self.queue_key_for(iid, &route.key, &route.major);
        let send_at = match self.queue_index.get(&key) {
            Some(&qid) => {
                let position = self.queue(qid).pending.len();
                let t = self.predict_position(now, qid, &route.key, sub_key.as_deref(), position, exempt);
                let ahead = self.charges_ahead(now, qid, position);
                self.cost_wait(now, qid, &ahead, &request.costs).map_or(t, |c| t.max(c))
            }
            None => {
                let mut t = now.max(self.host_hold());
                if !exempt {
                    t = t.max(self.global_estimate(now, iid, 0));
                }
                t
            }
        };
        Ok(Prediction { send_at })
    }

    // ------------------------------------------------------------------ helpers: bookkeeping

    fn advance(&mut self, now: Nanos) -> Nanos {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    /// The sub-limit key of `request` on route `route_key`: `"{route_key} #{class}"` when it
    /// has a class, its own or the one the profile derives from its body's keys.
    fn sub_key(&self, request: &Request, route_key: &str) -> Option<Box<str>> {
        let class = match &request.sub_limit {
            Some(class) => class.as_str(),
            None if request.body_keys.is_empty() => return None,
            None => crate::route::sub_limit_class(self.config.profile, route_key, &request.body_keys)?,
        };
        Some(format!("{route_key} #{class}").into_boxed_str())
    }

    fn validate_request(&self, request: &Request) -> Result<Route, Error> {
        let method = request.method.to_ascii_uppercase();
        if !valid_method(&method) {
            return Err(Error::InvalidRequest(format!(
                "method {:?} is not an HTTP method token",
                request.method
            )));
        }
        // A concrete path may be given as the whole URL (`https://discord.com/api/v10/...`,
        // as the drivers' docs show): the route drops the scheme and host.
        let absolute = request.major.is_none()
            && ["https://", "http://"].iter().any(|scheme| {
                request.path.len() > scheme.len()
                    && request.path[..scheme.len()].eq_ignore_ascii_case(scheme)
            });
        if !request.path.starts_with('/') && !absolute {
            return Err(Error::InvalidRequest(format!(
                "path {:?} must start with '/' or be an http(s) URL",
                request.path
            )));
        }
        if request.path.len() > 8192 || request.identity.len() > 1024 {
            return Err(Error::InvalidRequest("path or identity is too long".into()));
        }
        if let Some(class) = &request.sub_limit
            && (class.is_empty() || class.len() > 256)
        {
            return Err(Error::InvalidRequest(format!(
                "sub_limit {class:?} must be a class name of 1 to 256 bytes (or unset)"
            )));
        }
        if request.costs.len() > headers::MAX_DIMENSIONS {
            return Err(Error::InvalidRequest(format!(
                "costs names {} dimensions; at most {} are allowed",
                request.costs.len(),
                headers::MAX_DIMENSIONS
            )));
        }
        for (i, (name, _)) in request.costs.iter().enumerate() {
            if !headers::valid_cost_name(name) {
                return Err(Error::InvalidRequest(format!(
                    "cost dimension {name:?} must be 1 to 32 bytes of [a-z0-9_] and not \"requests\" \
                     (every request costs one request)"
                )));
            }
            if request.costs[..i].iter().any(|(n, _)| n == name) {
                return Err(Error::InvalidRequest(format!("cost dimension {name:?} is given twice")));
            }
        }
        Ok(match &request.major {
            Some(major) => Route {
                key: format!("{method} {}", request.path),
                major: major.clone(),
                global_exempt: false,
            },
            None => route_for(self.config.profile, &method, &request.path),
        })
    }

    fn identity(&mut self, name: &str) -> Iid {
        if let Some(&iid) = self.identity_index.get(name) {
            return iid;
        }
        let iid = self.identities.len();
        self.identities.push(Identity {
            name: name.to_string(),
            sends: VecDeque::new(),
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
        self.identity_index.insert(name.to_string(), iid);
        iid
    }

    fn queue_key_for(&self, iid: Iid, route_key: &str, major: &str) -> QueueKey {
        // Before its bucket is known a route waits in its own queue, or in its prior group's.
        let unlearned = self.prior.unlearned_key(route_key);
        let route_queue = || QueueKey {
            identity: iid,
            bucket: BucketId::Route(unlearned.to_string()),
            major: major.to_string(),
        };
        let Some(hash) = self.routes.get(route_key) else { return route_queue() };
        // A route queue still waiting for its pioneer keeps taking the route's requests until
        // the pioneer's answer merges it into the bucket's queue: two queues never probe one
        // bucket at once. (Looked up only while such queues exist for this route.)
        if self.route_queues.get(unlearned).is_some_and(|&n| n > 0) {
            let key = route_queue();
            if let Some(&qid) = self.queue_index.get(&key) {
                let q = self.queue(qid);
                if !q.pending.is_empty() || !q.in_flight.is_empty() {
                    return key;
                }
            }
        }
        let key = QueueKey { identity: iid, bucket: BucketId::Hash(hash.clone()), major: major.to_string() };
        if !self.renamed.is_empty()
            && !self.queue_index.contains_key(&key)
            && let Some(old) = self.renamed.get(route_key)
        {
            let old_key = QueueKey { identity: iid, bucket: BucketId::Hash(old.clone()), major: major.to_string() };
            if self.queue_index.contains_key(&old_key) {
                return old_key;
            }
        }
        key
    }

    /// Bookkeeping for `route_queues` when a queue keyed by an unknown route goes away.
    fn forget_route_queue(&mut self, key: &QueueKey) {
        if let BucketId::Route(route) = &key.bucket
            && let Some(n) = self.route_queues.get_mut(route)
        {
            *n -= 1;
            if *n == 0 {
                self.route_queues.remove(route);
            }
        }
    }

    fn queue_for(&mut self, key: QueueKey) -> Qid {
        if let Some(&qid) = self.queue_index.get(&key) {
            return qid;
        }
        let uid = self.next_queue_uid;
        self.next_queue_uid += 1;
        let period = match &key.bucket {
            BucketId::Hash(hash) => self.hash_periods.get(hash).copied(),
            BucketId::Route(_) => None,
        };
        let queue = Queue {
            key: key.clone(),
            uid,
            pending: VecDeque::new(),
            in_flight: Vec::new(),
            bucket: Bucket {
                period,
                ..Bucket::default()
            },
            sub_limits: Vec::new(),
            shared_until: 0,
            wake_at: None,
            slot: Slot::None,
            last_active: 0,
            idle_listed: false,
            checked_wait: 0,
            budgets: Budgets::default(),
        };
        let qid = match self.free_queues.pop() {
            Some(qid) => {
                self.queues[qid] = Some(queue);
                qid
            }
            None => {
                self.queues.push(Some(queue));
                self.queues.len() - 1
            }
        };
        if let BucketId::Route(route) = &key.bucket {
            *self.route_queues.entry(route.clone()).or_insert(0) += 1;
        }
        self.queue_index.insert(key, qid);
        qid
    }

    fn queue(&self, qid: Qid) -> &Queue {
        self.queues[qid].as_ref().expect("live queue")
    }

    fn queue_mut(&mut self, qid: Qid) -> &mut Queue {
        self.queues[qid].as_mut().expect("live queue")
    }

    fn req(&self, id: RequestId) -> &Req {
        &self.requests[&id]
    }

    fn req_mut(&mut self, id: RequestId) -> &mut Req {
        self.requests.get_mut(&id).expect("live request")
    }

    fn mark_dirty(&mut self, qid: Qid) {
        self.dirty.push(qid);
    }

    /// Removes a queued request from its queue.
    fn unqueue(&mut self, id: RequestId) {
        let (qid, exempt, iid) = {
            let r = self.req(id);
            (r.qid, r.exempt, r.identity)
        };
        let q = self.queue_mut(qid);
        if let Some(pos) = q.pending.iter().position(|&p| p == id) {
            q.pending.remove(pos);
        }
        if let Slot::Ready(_, head) | Slot::Blocked(_, head) = q.slot
            && head == id
        {
            self.clear_slot(qid);
        }
        if !exempt {
            self.identities[iid].queued -= 1;
        }
        self.mark_dirty(qid);
    }

    /// Moves one entry of the identity's global log from `old` to `new`, keeping the log in
    /// time order.
    fn restamp_global(&mut self, iid: Iid, old: Nanos, new: Nanos) {
        self.drop_global_entry(iid, old);
        let sends = &mut self.identities[iid].sends;
        let pos = sends.partition_point(|&t| t <= new);
        sends.insert(pos, new);
    }

    /// Removes one entry at `at` from the identity's global log.
    fn drop_global_entry(&mut self, iid: Iid, at: Nanos) {
        let sends = &mut self.identities[iid].sends;
        if let Some(pos) = sends.iter().rposition(|&t| t == at) {
            sends.remove(pos);
        }
    }

    /// Takes `id` out of the in-flight set, returning how it was sent.
    fn take_in_flight(&mut self, id: RequestId) -> Result<Flight, Error> {
        let req = self.requests.get(&id).ok_or(Error::UnknownRequest(id))?;
        let ReqState::InFlight { sent_at, window_seq, window_epoch, global_at, left_at, alone } = req.state
        else {
            return Err(Error::InvalidState { id, expected: "in flight" });
        };
        let qid = req.qid;
        let q = self.queue_mut(qid);
        if let Some(pos) = q.in_flight.iter().position(|&p| p == id) {
            q.in_flight.swap_remove(pos);
        }
        self.in_flight_total -= 1;
        self.req_mut(id).state = ReqState::Answered;
        Ok(Flight { sent_at, window_seq, window_epoch, global_at, left_at, alone })
    }

    /// Forgets a request that reached its outcome.
    fn finish(&mut self, id: RequestId) {
        if let Some(req) = self.requests.remove(&id) {
            self.note_idle(req.qid);
        }
    }

    fn fail(&mut self, id: RequestId, reason: FailReason) {
        self.outputs.push_back(Output::Fail(id, reason));
        self.finish(id);
    }

    fn note_idle(&mut self, qid: Qid) {
        let now = self.now;
        let q = self.queue_mut(qid);
        q.last_active = now;
        if q.pending.is_empty() && q.in_flight.is_empty() && !q.idle_listed {
            q.idle_listed = true;
            let uid = q.uid;
            self.idle_candidates.push_back((qid, uid));
        }
    }

    // ------------------------------------------------------------------ shared mode

    /// Whether the next send goes through the store: always, unless the store is down; then
    /// only one probe at a time once the pause has passed.
    fn should_reserve(&self, now: Nanos) -> bool {
        !self.store_down || (now >= self.store_retry_at && self.reserving_total == 0)
    }

    /// Fail-closed while the store is down: nothing goes until the pause has passed, and then
    /// only the probe until it is answered.
    fn store_gate(&self, now: Nanos) -> Gate {
        let fail_closed = self
            .config
            .shared
            .as_ref()
            .is_some_and(|s| s.on_unavailable == OnUnavailable::FailClosed);
        if !fail_closed || !self.store_down {
            Gate::Open
        } else if self.reserving_total > 0 {
            Gate::UntilResponse
        } else if now < self.store_retry_at {
            Gate::Until(self.store_retry_at)
        } else {
            Gate::Open
        }
    }

    /// No request of any identity goes before this (an edge ban, a shared hold, a fail-closed
    /// store outage).
    fn host_hold(&self) -> Nanos {
        let mut t = self.edge_until;
        if self.store_down
            && self
                .config
                .shared
                .as_ref()
                .is_some_and(|s| s.on_unavailable == OnUnavailable::FailClosed)
        {
            t = t.max(self.store_retry_at);
        }
        t
    }

    /// The bucket hash of queue `qid`, if learned.
    fn queue_hash(&self, qid: Qid) -> Option<String> {
        match &self.queue(qid).key.bucket {
            BucketId::Hash(h) => Some(h.clone()),
            BucketId::Route(_) => None,
        }
    }

    /// The margin the global window is widened by at `now`: the learned one
    /// ([`Limiter::learn_latency`]), and while entries of the first global window may still be
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
    fn global_margin_at(&self, now: Nanos) -> Nanos {
        let window = self.config.global_window;
        match self.first_window {
            Some(first) => {
                let floor = first.fastest.saturating_add(5 * MILLISECOND).min(window);
                let until = first.start.saturating_add(window).saturating_add(floor.saturating_mul(2));
                if now < until { self.global_margin.max(floor) } else { self.global_margin }
            }
            None => self.global_margin,
        }
    }

    /// The latency margin passed to the store: the global margin (the spread of HTTP round
    /// trips, or of uplinks, from when each request left) plus the spread of the delays from
    /// the store's count of a token to the core's handling of its grant
    /// ([`Limiter::learn_store_delay`]; the spread of reservation round trips until 16 grants
    /// told the store's clock), capped like the global margin. Not the runtime's delay between
    /// a `Send` and the request leaving (see [`crate::shared`], "Leases").
    fn shared_margin(&self, now: Nanos) -> Nanos {
        let store = self.store_margin.unwrap_or(self.reservation_margin);
        self.global_margin_at(now).saturating_add(store).min(self.config.global_margin_max)
    }

    /// Whether global leases are on (shared mode, `SharedConfig::global_lease`, a global limit).
    fn lease_on(&self) -> bool {
        self.config.global_limit > 0 && self.config.shared.as_ref().is_some_and(|s| s.global_lease)
    }

    /// Whether the identity's requests wait for its lease request's answer: leases on, the
    /// store up, no token left, and a lease asked for.
    fn waits_for_lease(&self, now: Nanos, iid: Iid) -> bool {
        let lease = &self.identities[iid].lease;
        self.lease_on()
            && !self.store_down
            && lease.asking.is_some()
            && !lease.has_tokens(now)
    }

    /// Shared mode: how the reservation of `id` (of identity `iid`) takes its global token.
    /// Returns whether it counts globally at the store, how many tokens it asks for (`0`:
    /// it spends one leased earlier), and whether it spends one.
    fn global_ask(&mut self, now: Nanos, iid: Iid, id: RequestId, counts_global: bool) -> (bool, u32, bool) {
        if !counts_global {
            return (false, 1, false);
        }
        if !self.lease_on() || self.store_down {
            return (true, 1, false);
        }
        let lease = &mut self.identities[iid].lease;
        if lease.has_tokens(now) {
            lease.tokens -= 1;
            return (true, 0, true);
        }
        lease.tokens = 0;
        let want = self.lease_want(iid);
        let lease = &mut self.identities[iid].lease;
        lease.asking = Some(id);
        lease.asked = want;
        (true, want, false)
    }

    /// How many global tokens a lease request asks for: this request's, one per other head of
    /// the identity that is ready or waits for the global budget, at most what the local
    /// window has room for and this process's share of the limit (the limit divided by the
    /// live processes the store counted).
    fn lease_want(&self, iid: Iid) -> u32 {
        let ident = &self.identities[iid];
        let heads = self
            .ready
            .iter()
            .filter(|key| self.queues.get(key.2).and_then(Option::as_ref).is_some_and(|q| q.key.identity == iid))
            .count()
            + ident.blocked.len();
        let limit = self.config.global_limit;
        // The request asking is in the window already.
        let room = (limit as usize).saturating_sub(ident.sends.len()) + 1;
        let share = limit.div_ceil(self.store_processes.max(1)).max(1) as usize;
        (1 + heads).min(room).min(share).max(1) as u32
    }

    /// The answer to request `id`'s reservation arrived (or it ended without one): if it asked
    /// for the identity's lease, the lease is what the store granted (`leased`), kept for half
    /// a global window, and the identity's waiting requests go again.
    fn lease_answered(&mut self, now: Nanos, iid: Iid, id: RequestId, leased: u32) {
        let validity = self.config.global_window / 2;
        let lease = &mut self.identities[iid].lease;
        if lease.asking != Some(id) {
            return;
        }
        lease.asking = None;
        let leased = leased.min(lease.asked.saturating_sub(1));
        if leased > 0 {
            // The tokens left of a current lease join the new one: they are the store's as much
            // as the new ones (it counts each a whole window; spending one a little later at
            // worst meets the window check). Replacing them dropped the ones still out with
            // reservations that came back denied for another reason, unspent but counted.
            if !lease.has_tokens(now) {
                lease.tokens = 0;
            }
            lease.tokens = lease.tokens.saturating_add(leased);
            lease.until = now.saturating_add(validity);
        }
        self.mark_identity_ready(iid);
    }

    /// A reservation that spent a leased token was not sent: the token is still good while the
    /// identity's lease is current (its own lease's, or a later one it joined).
    fn unspend_lease(&mut self, now: Nanos, iid: Iid, leased: bool) {
        let ident = &mut self.identities[iid];
        if leased && now < ident.lease.until {
            ident.lease.tokens += 1;
            if ident.full_until > now {
                // Its requests held by the full window may spend it.
                self.mark_identity_ready(iid);
            }
        }
    }

    fn reservation(&self, now: Nanos, id: RequestId, counts_global: bool) -> Reservation {
        let r = self.req(id);
        let margin = self.shared_margin(now);
        let c = &self.config;
        Reservation {
            id,
            identity: self.identities[r.identity].name.clone(),
            route: r.shared_route().to_string(),
            major: r.major.clone(),
            bucket: self.queue_hash(r.qid),
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

    /// Like [`Limiter::learn_latency`], for reservation round trips: 1.5x their spread once 16
    /// samples are in (the floor is already in the global margin).
    fn learn_reservation_latency(&mut self, latency: Nanos) {
        if self.reservation_latencies.push(latency, latency, false) {
            self.reservation_margin = self.reservation_latencies.spread_margin();
        }
    }

    /// A grant that told the store's clock (`store_at`) reached the core at `now`: the delay
    /// from the store's count to the grant's handling (the answer's way back and the time it
    /// waited for the process, on a busy event loop most of it), up to the clocks' offset.
    /// Its spread is what the store must widen the global window by for this part of `d` in
    /// the bound of [`crate::shared`] ("Leases"); unlike a reservation's round trip it leaves
    /// out the wait before the store counted (the driver's queue, the store's other callers),
    /// which moves the count itself and does not bunch arrivals. 1.5x the spread once 16 are
    /// in, as for the global margin. The store's clock may be the wall clock: a step widens
    /// the spread (a larger margin, never a smaller one) until the samples from before it have
    /// left the last [`Recent::KEEP`].
    fn learn_store_delay(&mut self, now: Nanos, store_at: Nanos) {
        let Ok(delay) = i64::try_from(i128::from(now) - i128::from(store_at)) else {
            return;
        };
        let widens = widen(&mut self.store_delay_extremes, delay);
        if self.store_delays.push(delay, 0, widens) {
            self.store_margin = Some(self.store_delays.spread_margin());
        }
    }

    /// The store granted reserving request `id`: send it now, as of now.
    fn grant(&mut self, now: Nanos, qid: Qid, id: RequestId, flight: Flight) {
        let r = self.req(id);
        if let Some(deadline) = r.deadline
            && now > deadline
        {
            // Too late: the slot goes back, the store's grant is released. (A deferral's
            // retry time is now: the store would have let it go.)
            let reason = match r.limit {
                Limit::MaxWait => FailReason::MaxWaitExceeded { predicted_wait: now - r.enqueued_at },
                limit => limit_reason(limit, r.enqueued_at, deadline, None, now),
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
        let iid = r.identity;
        // The send happens now, not when the reservation left: re-stamp the global token and
        // the sliding log so the local windows count from the real send.
        let global_at = flight.global_at.map(|old| {
            self.restamp_global(iid, old, now);
            now
        });
        if global_at.is_some() {
            let keep = self.report_horizon();
            self.identities[iid].send_log.granted(now, keep);
        }
        let q = self.queue_mut(qid);
        q.last_active = now;
        let b = &mut q.bucket;
        b.last_send = now;
        if b.window_first_send == Some(flight.sent_at) {
            b.window_first_send = Some(now);
        }
        if b.sliding && flight.window_epoch == b.epoch {
            if let Some(pos) = b.send_log.iter().rposition(|&t| t == flight.sent_at) {
                b.send_log.remove(pos);
            }
            b.send_log.push_back(now);
        }
        let alone = self.in_flight_total == 0;
        let r = self.req_mut(id);
        r.state = ReqState::InFlight {
            sent_at: now,
            window_seq: flight.window_seq,
            window_epoch: flight.window_epoch,
            global_at,
            left_at: now,
            alone,
        };
        r.sends += 1;
        self.in_flight_total += 1;
        self.outputs.push_back(Output::Send(id));
    }

    /// Whether sending `id` now would overtake an earlier request of its queue that is waiting
    /// only for its turn (not for its own backoff, nor for a sub-limit of another route), or
    /// whose own reservation (made again after a denial) is still outstanding.
    fn overtakes(&self, now: Nanos, qid: Qid, id: RequestId) -> bool {
        let q = self.queue(qid);
        // An earlier request held by a sub-limit that does not hold `id` (another route, or
        // another class of it) is not waiting for its turn.
        let me = &self.requests[&id];
        let waiting = q.pending.iter().take_while(|&&p| p < id).any(|p| {
            let r = &self.requests[p];
            let held_apart = q.sub_limits.iter().any(|(k, t)| *t > now && r.held_by(k) && !me.held_by(k));
            r.not_before <= now && !held_apart
        });
        waiting
            || q.in_flight.iter().any(|p| {
                *p < id && matches!(self.requests[p].state, ReqState::Reserving { .. })
            })
    }

    /// Removes `id` from its queue's in-flight list (which also holds reserving requests).
    fn leave_in_flight_list(&mut self, qid: Qid, id: RequestId) {
        let q = self.queue_mut(qid);
        if let Some(pos) = q.in_flight.iter().position(|&p| p == id) {
            q.in_flight.swap_remove(pos);
        }
    }

    /// A reservation that will not be sent now (denied, or the store is unavailable and the
    /// policy is fail-closed): the slot and the global token go back, and the request goes back
    /// to its place in its queue. It was never sent, so no retry is counted.
    fn unreserve(&mut self, qid: Qid, id: RequestId, flight: Flight) {
        self.leave_in_flight_list(qid, id);
        self.refund(qid, id, flight);
        self.undo_window_start(qid, flight);
        self.requeue(id);
    }

    /// A reservation that was not sent: if it opened the local window, the window's first send
    /// is the earliest of the others still out in it, or none (with no other, its provisional
    /// end goes too): a send that did not happen must not skew the window-length estimates.
    fn undo_window_start(&mut self, qid: Qid, flight: Flight) {
        let q = self.queue(qid);
        let epoch = q.bucket.epoch;
        if flight.window_epoch != epoch || q.bucket.window_first_send != Some(flight.sent_at) {
            return;
        }
        let first = q
            .in_flight
            .iter()
            .filter_map(|id| match self.requests[id].state {
                ReqState::InFlight { sent_at: t, window_epoch, .. }
                | ReqState::Reserving { since: t, window_epoch, .. }
                    if window_epoch == epoch =>
                {
                    Some(t)
                }
                _ => None,
            })
            .min();
        let b = &mut self.queue_mut(qid).bucket;
        b.window_first_send = first;
        if first.is_none() && b.reset_provisional {
            b.reset_at = None;
            b.reset_provisional = false;
        }
    }

    /// A reserving request ends before its answer (cancelled, closed, failed): the slot and the
    /// global token go back, and the late answer will be ignored.
    fn abandon_reservation(&mut self, id: RequestId) {
        let r = self.req(id);
        let ReqState::Reserving { since, step, window_seq, window_epoch, global_at, leased, asked_since, .. } = r.state
        else {
            return;
        };
        let (qid, iid) = (r.qid, r.identity);
        let orphan = Orphan {
            step,
            asked_since,
            identity: self.identities[r.identity].name.clone(),
            route: r.shared_route().to_string(),
            major: r.major.clone(),
            bucket: self.queue_hash(qid),
        };
        self.reserving_total -= 1;
        self.req_mut(id).state = ReqState::Answered;
        self.leave_in_flight_list(qid, id);
        let flight = Flight { sent_at: since, window_seq, window_epoch, global_at, left_at: since, alone: false };
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
    fn hold(&mut self, now: Nanos, id: RequestId, qid: Qid, scope: SharedScope, wait: Nanos, leased: bool) {
        let until = now.saturating_add(wait);
        match scope {
            SharedScope::Edge | SharedScope::Invalid => {
                self.edge_until = self.edge_until.max(until);
                self.recheck_queues(None);
            }
            SharedScope::Global => {
                let iid = self.req(id).identity;
                let ident = &mut self.identities[iid];
                if !leased && ident.lease.until > now {
                    // It asked the window for tokens and the window is full, but this process
                    // holds a current lease (tokens in hand, or coming back from reservations
                    // denied for other reasons): the requests that spend one still go.
                    // (Pausing the identity here left a whole lease unspent, counted at the
                    // store to the end of its window: with 4 processes on 100 new channels, a
                    // window sent 133 of its 250.)
                    ident.full_until = ident.full_until.max(until);
                    let until = ident.full_until;
                    self.wake_identity_at(iid, until);
                } else {
                    // The store's global hold (a spent token is denied only for that), or no
                    // lease: the whole identity waits.
                    ident.paused_until = ident.paused_until.max(until);
                    self.wake_identity_at(iid, until);
                    self.recheck_queues(Some(iid));
                }
            }
            SharedScope::Route => {
                let key = self.req(id).shared_route().to_string();
                self.queue_mut(qid).hold_sub_limit(key, until);
            }
            SharedScope::Bucket | SharedScope::Pioneer => {
                let q = self.queue_mut(qid);
                q.shared_until = q.shared_until.max(until);
            }
        }
    }

    /// The store answered (granted or denied) a reservation: an outage ends, and a recovery
    /// begins; `processes` is its count of processes, back since the outage began when the
    /// reservation asked (`asked_since`).
    fn store_answered(&mut self, now: Nanos, processes: Option<u32>, asked_since: bool) {
        if self.store_down {
            self.store_down = false;
            self.store_failures = 0;
            self.outputs.push_back(Output::Observe(Observation::StoreRecovered));
            self.begin_recovery(now);
            // The share may change, and a fail-open hold ends: everything decides again.
            self.share_changed();
        }
        self.store_last_answer = now;
        match processes {
            // Every process counted before the outage has reserved since it began, not
            // reporting, so it told the store what it sent meanwhile: the store decides alone
            // again.
            Some(n) if asked_since && self.recovery.is_some_and(|r| n >= r.processes) => self.end_recovery(),
            Some(_) if asked_since => {}
            // Bad input (0) reads as this process alone; a huge count leaves at least one
            // request per window (see `share_of`). The count before an outage is kept until its
            // recovery ends.
            Some(n) if self.recovery.is_none() => {
                self.store_processes = n.max(1);
                self.share_budgets();
            }
            _ => {}
        }
    }

    /// Shared mode: each process keeps to its part of every cost budget, the store's live
    /// process count (see the [`Limiter`] docs, "Costs").
    fn cost_share(&self) -> u64 {
        if self.config.shared.is_some() { u64::from(self.store_processes.max(1)) } else { 1 }
    }

    /// The live process count changed: every budget takes the new share.
    fn share_budgets(&mut self) {
        let share = self.cost_share();
        let mut changed = Vec::new();
        for (qid, q) in self.queues.iter_mut().enumerate() {
            let Some(q) = q else { continue };
            for b in q.budgets.get_mut() {
                if b.share != share {
                    b.share = share;
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
    fn begin_recovery(&mut self, now: Nanos) {
        let Some(shared) = &self.config.shared else { return };
        let span = self.report_horizon();
        let until = match shared.on_unavailable {
            OnUnavailable::FailOpen => {
                let wait = self.outage_wait;
                let down_for = now.saturating_sub(self.store_last_answer);
                let pause = down_for.saturating_add(shared.retry_base).saturating_add(wait).min(shared.retry_max);
                now.saturating_add(pause).saturating_add(wait.saturating_mul(2)).saturating_add(span)
            }
            OnUnavailable::FailClosed => self.store_down_since.saturating_add(span),
        };
        if self.store_processes <= 1 || until <= now {
            self.recovery = None;
            return;
        }
        self.recovery = Some(Recovery { processes: self.store_processes, until });
        self.timers.push(Reverse((until, Timer::Recovery)));
    }

    /// The recovery after an outage ends: the whole limits apply again.
    fn end_recovery(&mut self) {
        let share = self.outage_share();
        self.recovery = None;
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
    fn outage_global_hold(&self, now: Nanos) -> Option<Nanos> {
        let fail_open = self
            .config
            .shared
            .as_ref()
            .is_some_and(|s| s.on_unavailable == OnUnavailable::FailOpen);
        let end = self.store_down_since.saturating_add(self.report_horizon());
        if !fail_open
            || !self.store_down
            || self.store_processes <= 1
            || self.config.global_limit == 0
            || now >= end
            || self.should_reserve(now)
        {
            return None;
        }
        // The next probe (its answer wakes the identity again while one is out).
        Some(if now < self.store_retry_at { self.store_retry_at.min(end) } else { end })
    }

    /// How far back a process reports its sends after an outage: the longest global window a
    /// reservation passes (the window plus the largest margin).
    fn report_horizon(&self) -> Nanos {
        self.config.global_window.saturating_add(self.config.global_margin_max)
    }

    /// The live processes the store last counted, whose limits this process shares while the
    /// store is down and during the recovery after an outage (1 otherwise: the store decides).
    /// Fail-open sends on it without the store; fail-closed sends only its probes while the
    /// store is down, and a probe answered by a store that lost its state must not take the
    /// room of another process's grants it lost (they are in that process's share).
    fn outage_share(&self) -> u32 {
        if self.store_down || self.recovery.is_some() { self.store_processes } else { 1 }
    }

    /// The limits changed (a fail-open outage began or ended with several processes): every
    /// queue decides again, and the ones waiting for a global budget recheck it.
    fn share_changed(&mut self) {
        self.recheck_queues(None);
        for iid in 0..self.identities.len() {
            self.mark_identity_ready(iid);
        }
    }

    /// The store did not answer the reservation of request `id`, emitted in outage step
    /// `step`. One failure per outage step: the first such answer marks the store down (or,
    /// for the probe, doubles the pause) and starts a new step; the answers to reservations
    /// that were already outstanding then are the same failure and change nothing (with N
    /// reservations out when the store goes away, the first pause is `retry_base`, not
    /// `retry_base * 2^(N-1)`).
    fn store_unavailable(&mut self, now: Nanos, id: RequestId, step: u32) {
        let Some(shared) = &self.config.shared else { return };
        if step != self.store_step {
            return;
        }
        self.store_step = self.store_step.wrapping_add(1);
        self.store_failures = self.store_failures.saturating_add(1);
        let pause = shared
            .retry_base
            .saturating_mul(1u64 << (self.store_failures - 1).min(30))
            .min(shared.retry_max);
        self.store_retry_at = now.saturating_add(pause);
        let was_down = self.store_down;
        let share = self.outage_share();
        self.store_down = true;
        if !was_down {
            // The store may lose what it knew (a restart without persistence): each identity's
            // next reservation tells it what this process sent.
            self.store_down_since = now;
            self.outage_wait = 0;
            if self.config.global_limit > 0 {
                for ident in &mut self.identities {
                    ident.send_log.mark_pending();
                }
            }
        }
        if self.outage_share() != share {
            self.share_changed();
        }
        self.outputs.push_back(Output::Observe(Observation::StoreUnavailable {
            id,
            retry_at: self.store_retry_at,
        }));
    }

    /// What request `id`'s response says about its bucket, for the store.
    fn bucket_report(&self, id: RequestId, qid: Qid, info: &RateLimitInfo) -> SharedUpdate {
        let r = self.req(id);
        let b = &self.queue(qid).bucket;
        // The engine's own estimate, an upper bound as far as it knows (the learned length,
        // else the longest reset or first-send-to-reset span seen, else 1 s): the store uses it
        // to start windows and to keep header-less answers counting, and must be no less
        // cautious than one process.
        let window = (b.known && !b.unlimited).then(|| b.window_estimate());
        SharedUpdate::Bucket {
            id,
            identity: self.identities[r.identity].name.clone(),
            route: r.shared_route().to_string(),
            major: r.major.clone(),
            bucket: info.bucket.clone().or_else(|| self.queue_hash(qid)),
            unlimited: b.known && b.unlimited && info.bucket.is_none(),
            limit: info.limit.filter(|&l| l > 0),
            remaining: info.remaining,
            reset_after: info.reset_after.map(|ra| ra.min(self.config.max_server_wait)),
            window,
        }
    }

    /// A granted request `id` will not be answered.
    fn release(&self, id: RequestId, reached: bool) -> SharedUpdate {
        let r = self.req(id);
        let b = &self.queue(r.qid).bucket;
        SharedUpdate::Release {
            id,
            identity: self.identities[r.identity].name.clone(),
            route: r.shared_route().to_string(),
            major: r.major.clone(),
            bucket: self.queue_hash(r.qid),
            reached,
            window: (b.known && !b.unlimited).then(|| b.window_estimate()),
        }
    }

    fn hold_update(&self, id: RequestId, qid: Qid, scope: SharedScope, wait: Nanos) -> SharedUpdate {
        let r = self.req(id);
        SharedUpdate::Hold {
            scope,
            identity: self.identities[r.identity].name.clone(),
            route: r.shared_route().to_string(),
            major: r.major.clone(),
            bucket: self.queue_hash(qid),
            retry_after: wait,
        }
    }

    // ------------------------------------------------------------------ learning

    /// Maps the request's route to `bucket` and moves its queue when the mapping is new or
    /// changed. Returns the queue the request now belongs to, and whether the answer's bucket
    /// is older news than the route's (its headers then describe another bucket than the
    /// queue's). `flight`: how the answered request was sent.
    fn learn_bucket(&mut self, id: RequestId, bucket: Option<&str>, flight: Flight) -> (Qid, bool) {
        let qid = self.req(id).qid;
        let Some(hash) = bucket else { return (qid, false) };
        if matches!(&self.queue(qid).key.bucket, BucketId::Hash(h) if h == hash) {
            return (qid, false); // the common case: nothing new, nothing to allocate
        }
        let (iid, route_key, major) = {
            let r = self.req(id);
            (r.identity, r.route_key.clone(), r.major.clone())
        };
        let target_bucket = BucketId::Hash(hash.to_string());
        let target_key = QueueKey { identity: iid, bucket: target_bucket, major };
        let previous = self.routes.get(&route_key).cloned();
        if previous.as_deref().is_some_and(|old| old != hash)
            && self.route_taught_at.get(&route_key).is_some_and(|&t| flight.sent_at <= t)
        {
            // A late answer to a request sent before (or with) the one that taught the route's
            // current bucket (the server changed it meanwhile): it describes the bucket it was
            // counted in, not the route's. The route keeps its mapping and the request its
            // queue (a retry goes where the route goes now); its bucket headers are not taken.
            return (qid, true);
        }
        if previous.is_none() {
            self.remember_route(route_key.clone(), hash);
        } else {
            self.routes.insert(route_key.clone(), hash.to_string());
        }
        if previous.as_deref() != Some(hash) {
            self.route_taught_at.insert(route_key.clone(), flight.sent_at);
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
        let from_route_queue = matches!(self.queue(qid).key.bucket, BucketId::Route(_));
        if let Some(old) = previous.filter(|old| old != hash) {
            self.renamed.insert(route_key.clone(), old);
        }
        let target = match self.queue_index.get(&target_key).copied() {
            None if from_route_queue => {
                // Rename: the route's queue becomes the bucket's queue, state and all.
                let old_key = self.queue(qid).key.clone();
                self.queue_index.remove(&old_key);
                self.forget_route_queue(&old_key);
                self.queue_index.insert(target_key.clone(), qid);
                self.queue_mut(qid).key = target_key;
                qid
            }
            _ => {
                let target = self.queue_for(target_key);
                if !from_route_queue {
                    self.forget_slot(qid, flight);
                    // Until the new bucket shows its own window, the old one's length is the
                    // best estimate there is (Discord keeps a route's limit when it renames its
                    // bucket): far better than one guessed from a 429 or a 5xx.
                    let old_period = self.queue(qid).bucket.period;
                    let b = &mut self.queue_mut(target).bucket;
                    if b.period.is_none() {
                        b.period = old_period;
                    }
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
    fn forget_slot(&mut self, qid: Qid, flight: Flight) {
        self.give_back_slot(qid, flight);
        self.undo_window_start(qid, flight);
    }

    /// A queue that just took a learned bucket id (renamed from an unknown route's queue, or
    /// given that queue's state) starts from the longest window learned for the hash, like a
    /// queue created for it (see `hash_periods`).
    fn adopt_hash_period(&mut self, qid: Qid) {
        let BucketId::Hash(hash) = &self.queue(qid).key.bucket else { return };
        let Some(&period) = self.hash_periods.get(hash) else { return };
        let b = &mut self.queue_mut(qid).bucket;
        if b.period.is_none_or(|p| p < period) {
            b.period = Some(period);
        }
    }

    /// The first bucket learned for a route of a prior group is the group's: its routes not
    /// learned yet map to it too, so the group keeps one queue (see [`crate::prior`]).
    fn adopt_for_group(&mut self, route_key: &str, hash: &str) {
        let group = self.prior.group(route_key);
        if group.is_empty() {
            return;
        }
        let adopt: Vec<String> =
            group.iter().filter(|r| *r != route_key && !self.routes.contains_key(*r)).cloned().collect();
        for route in adopt {
            self.remember_route(route.clone(), hash);
            self.outputs.push_back(Output::Observe(Observation::BucketLearned { route, bucket: hash.to_string() }));
        }
    }

    /// Maps a route with no mapping yet to `hash`, within the `max_routes` bound (the oldest
    /// learned go first).
    pub(crate) fn remember_route(&mut self, route: String, hash: &str) {
        self.routes.insert(route.clone(), hash.to_string());
        self.route_order.push_back(route);
        while self.routes.len() > self.config.max_routes {
            match self.route_order.pop_front() {
                Some(old) => {
                    self.routes.remove(&old);
                    self.renamed.remove(&old);
                    self.route_taught_at.remove(&old);
                }
                None => break,
            }
        }
    }

    /// Moves the requests of `route` (all of them when `None`) from queue `from` to `to`,
    /// merging the pending lists by enqueue order.
    fn move_route(&mut self, from: Qid, to: Qid, route: Option<&str>) {
        if from == to {
            return;
        }
        self.clear_slot(from);
        self.clear_slot(to);
        let moves = |r: &Req| route.is_none_or(|k| r.route_key == k);
        let src = self.queue_mut(from);
        let pending: Vec<RequestId> = src.pending.drain(..).collect();
        let in_flight: Vec<RequestId> = src.in_flight.drain(..).collect();
        let (mut moved_pending, mut kept_pending) = (Vec::new(), VecDeque::new());
        for id in pending {
            if moves(&self.requests[&id]) {
                moved_pending.push(id);
            } else {
                kept_pending.push_back(id);
            }
        }
        let (mut moved_flight, mut kept_flight) = (Vec::new(), Vec::new());
        for id in in_flight {
            if moves(&self.requests[&id]) {
                moved_flight.push(id);
            } else {
                kept_flight.push(id);
            }
        }
        let src = self.queue_mut(from);
        src.pending = kept_pending;
        src.in_flight = kept_flight;
        // Ghosts follow their route: they may have been counted by the bucket it moves to.
        let (moved_ghosts, kept_ghosts): (Vec<Ghost>, Vec<Ghost>) = std::mem::take(&mut src.bucket.ghosts)
            .into_iter()
            .partition(|g| route.is_none_or(|k| g.route == *k));
        src.bucket.ghosts = kept_ghosts;
        self.queue_mut(to).bucket.ghosts.extend(moved_ghosts);
        for &id in moved_pending.iter().chain(moved_flight.iter()) {
            self.req_mut(id).qid = to;
        }
        // Merge by enqueue order.
        let mut merged: Vec<RequestId> = self.queue_mut(to).pending.drain(..).collect();
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
            if !dst.bucket.known {
                dst.bucket = src_bucket;
            }
        }
        // Requests in flight now belong to the destination's current window (window epochs
        // are per bucket, so the old numbers mean nothing there).
        let epoch = self.queue(to).bucket.epoch;
        for id in self.queue(to).in_flight.clone() {
            if let ReqState::InFlight { window_epoch, .. } | ReqState::Reserving { window_epoch, .. } =
                &mut self.req_mut(id).state
            {
                *window_epoch = epoch;
            }
        }
        self.mark_dirty(from);
        self.mark_dirty(to);
        self.note_idle(from);
    }

    /// Applies an answer's bucket headers to the bucket of `qid`. `answer_lead`: how much
    /// before the window end it reports the next request may go (see [`Uplinks::lead`]).
    #[allow(clippy::too_many_arguments)]
    fn apply_headers(
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
                if b.reset_at.is_some_and(|r| r < at) {
                    b.reset_at = Some(at);
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
                if b.reset_at.is_none_or(|r| r < at) {
                    b.reset_at = Some(at);
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
            let period = b.period.map_or(length, |p| p.max(length)).min(max_wait);
            b.period = Some(period);
            learned_period = Some(period);
        }
        let first_of_window = fresh || b.reported.is_none();
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
            b.reported = Some(match b.reported {
                Some(old) if !fresh => old.min(rem),
                _ => rem,
            });
            // A ghost answered before this request left reached the server first: this report
            // counts it if they share a window (and the lowest report is at most this one), or
            // its window is over. Counting it again held a window's last slot until the next
            // reset (a bucket whose requests straddled a local reset, on the Scoreboard's
            // `many_channels`: a whole window late). When it left: the transport's report
            // where there is one (a burst is written well after its `Send`s), else the `Send`.
            let left = flight.left_at;
            b.ghosts.retain(|g| g.answered_at.is_none_or(|a| a > left));
        }
        if detected_sliding {
            // Seed the send log with what is still out there and this request.
            let mut log: Vec<Nanos> = self
                .queue(qid)
                .in_flight
                .iter()
                .filter_map(|id| match self.requests[id].state {
                    ReqState::InFlight { sent_at, .. } => Some(sent_at),
                    _ => None,
                })
                .collect();
            log.push(flight.sent_at);
            log.sort_unstable();
            self.queue_mut(qid).bucket.send_log = log.into();
        }
        let b = &mut self.queue_mut(qid).bucket;
        if let Some(reset_after) = info.reset_after {
            let reset_after = reset_after.min(max_wait);
            if (200..300).contains(&status) {
                b.longest_reset = b.longest_reset.max(reset_after);
            }
            let at = now.saturating_add(reset_after);
            if flight.window_epoch == b.epoch
                && let Some(first) = b.window_first_send
            {
                b.window_upper = b.window_upper.max(at.saturating_sub(first).min(max_wait));
            }
            // Each answer's end is met `answer_lead` early; the window ends when the latest of
            // them does (a later end reported through a faster trip back may still be the
            // one to wait for).
            let ready = at.saturating_sub(answer_lead);
            (b.reset_at, b.reset_ready) = match b.reset_at {
                Some(old) if !first_of_window && !b.reset_provisional => (Some(old.max(at)), b.reset_ready.max(ready)),
                _ => (Some(at), ready),
            };
            b.reset_provisional = false;
        }
        if let (Some(period), BucketId::Hash(hash)) = (learned_period, &self.queue(qid).key.bucket)
            && (self.hash_periods.len() < self.config.max_routes || self.hash_periods.contains_key(hash))
            && self.hash_periods.get(hash).is_none_or(|&known| known < period)
        {
            // A longer window for this hash: every queue of it (other major parameters) that
            // has not seen one of its own answered takes it, rather than an estimate that may
            // have been drawn from a window another queue's request opened.
            let id = BucketId::Hash(hash.clone());
            self.hash_periods.insert(hash.clone(), period);
            for q in self.queues.iter_mut().flatten() {
                if q.key.bucket == id && q.bucket.period.is_none_or(|p| p < period) {
                    q.bucket.period = Some(period);
                }
            }
        }
    }

    fn on_rate_limited(
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
        let clamp = |w: Nanos, c: &Config| w.clamp(c.min_rate_limit_wait, c.max_server_wait);
        let wait = match scope {
            RateLimitScope::Edge => {
                self.edge_strikes = self.edge_strikes.saturating_add(1);
                let backoff = self
                    .config
                    .edge_backoff_base
                    .saturating_mul(1u64 << (self.edge_strikes - 1).min(20))
                    .min(self.config.edge_backoff_max);
                clamp(hint.unwrap_or(backoff), &self.config)
            }
            _ => clamp(hint.unwrap_or(self.config.backoff_base), &self.config),
        };
        let until = now.saturating_add(wait);
        let (iid, hold_key) = {
            let r = self.req(id);
            (r.identity, r.shared_route().to_string())
        };
        match scope {
            RateLimitScope::Global => {
                let window = self.config.global_window;
                let span = window.saturating_add(self.global_margin_at(now));
                // A refusal whose hold spans many global windows (GitHub's minute) tells of a
                // limit over a longer time than the sends of one window can measure.
                let learn = self.config.global_limit == 0 && wait <= window.saturating_mul(2);
                let ident = &mut self.identities[iid];
                ident.paused_until = ident.paused_until.max(until);
                if learn {
                    // What the API admitted of the sends within one global window before
                    // this refusal: those sends less the refusals among them.
                    let l = &mut ident.learned;
                    l.refused = match l.refused {
                        (first, n) if first.saturating_add(span) > now => (first, n + 1),
                        _ => (now, 1),
                    };
                    let sent = ident.sends.iter().filter(|&&t| t.saturating_add(span) > now).count();
                    let admitted = (sent as u32).saturating_sub(l.refused.1).max(1);
                    l.limit = if l.until > now { l.limit.min(admitted) } else { admitted };
                    l.until = ident.paused_until.saturating_add(window.saturating_mul(10));
                }
                self.wake_identity_at(iid, until);
                self.recheck_queues(Some(iid));
            }
            RateLimitScope::Shared => {
                let q = self.queue_mut(qid);
                q.shared_until = q.shared_until.max(until);
                // The resource admitted what this window sent less what it refused: stay at
                // that many per window, for ten windows after the hold (then probe again).
                let b = &mut q.bucket;
                if flight.window_epoch == b.epoch {
                    b.shared_refused = match b.shared_refused {
                        (epoch, n) if epoch == b.epoch => (epoch, n + 1),
                        _ => (b.epoch, 1),
                    };
                    let admitted = b.sends_in_window.saturating_sub(b.shared_refused.1).max(1);
                    let cap = b.shared_cap.map_or(admitted, |(c, _)| c.min(admitted));
                    let remember = until.saturating_add(b.window_estimate().saturating_mul(10));
                    b.shared_cap = Some((cap, remember));
                }
            }
            RateLimitScope::Edge => {
                self.edge_until = self.edge_until.max(until);
                self.recheck_queues(None);
            }
            RateLimitScope::SubLimit => self.queue_mut(qid).hold_sub_limit(hold_key, until),
            RateLimitScope::Bucket => {
                let b = &mut self.queue_mut(qid).bucket;
                b.known = true;
                b.unlimited = false;
                b.reported = Some(0);
                b.reset_ready = match b.reset_at {
                    Some(_) if !b.reset_provisional => b.reset_ready.max(until),
                    other => other.map_or(until, |r| r.max(until)),
                };
                b.reset_provisional = false;
                if b.limit == 0 {
                    b.limit = 1;
                }
                b.reset_at = Some(b.reset_at.map_or(until, |r| r.max(until)));
            }
        }
        if scope != RateLimitScope::Shared {
            self.record_invalid(now, id);
        }
        if self.config.shared.is_some() {
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
    fn requeue(&mut self, id: RequestId) -> Disposition {
        if self.closed {
            self.fail(id, FailReason::Closed);
            return Disposition::Failed;
        }
        let (qid, exempt, iid) = {
            let r = self.req(id);
            (r.qid, r.exempt, r.identity)
        };
        // Pending lists are in enqueue (= id) order.
        let pos = self.queue(qid).pending.partition_point(|&p| p < id);
        self.queue_mut(qid).pending.insert(pos, id);
        self.req_mut(id).state = ReqState::Queued;
        if !exempt {
            self.identities[iid].queued += 1;
        }
        if let Some(d) = self.req(id).deadline {
            self.arm_deadline(id, d);
        }
        self.clear_slot(qid);
        self.mark_dirty(qid);
        Disposition::Retry
    }

    /// A 5xx (for an idempotent request) or a transport failure: back off and re-send, or give up.
    fn retry_after_error(&mut self, now: Nanos, id: RequestId, transport: bool) -> Disposition {
        let max = self.config.max_error_retries;
        let req = self.req_mut(id);
        req.error_retries += 1;
        if req.error_retries > max {
            if transport {
                // `network_error` promises the request never reached the server; an attempt
                // that may have reached it makes the outcome `maybe_sent`.
                let reason = if req.maybe_reached {
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
        let backoff = self
            .config
            .backoff_base
            .saturating_mul(1u64 << (n - 1).min(30))
            .min(self.config.backoff_max);
        let jitter = self.next_random() % (backoff / 2 + 1);
        let until = now.saturating_add(backoff / 2 + jitter);
        self.req_mut(id).not_before = until;
        self.requeue(id)
    }

    fn next_random(&mut self) -> u64 {
        // splitmix64: small, fast, and reproducible from the configured seed.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Charges the costs of request `id`, about to leave queue `qid`, to the queue's budgets
    /// (creating one per dimension it names). A request without costs in a queue that has
    /// budgets charges them nothing, so that its answer's report still counts.
    fn charge_costs(&mut self, qid: Qid, id: RequestId) {
        if self.req(id).cost.is_none() && self.queue(qid).budgets.get().is_empty() {
            return;
        }
        let mut cost = self.req_mut(id).cost.take().unwrap_or_default();
        let share = self.cost_share();
        let margins: Vec<f64> = cost.estimates.iter().map(|(name, _)| self.margin(name)).collect();
        let q = self.queues[qid].as_mut().expect("live queue");
        let mut charges = Vec::new();
        for ((name, estimate), margin) in cost.estimates.iter().zip(margins) {
            charges.push(costs::budget_mut(q.budgets.vec_mut(), name, share).charge(*estimate, margin));
        }
        for b in q.budgets.get_mut().iter_mut().filter(|b| !cost.estimates.iter().any(|(n, _)| *n == b.name)) {
            charges.push(b.charge(0, 1.0));
        }
        cost.charges = charges;
        self.req_mut(id).cost = Some(cost);
    }

    /// Request `id` left flight: its charges go back to its queue's budgets. `answer`, when it
    /// was answered: the time, the answer's reports (each budget takes its dimension's) and
    /// body (the actual costs: [`headers::settled_cost`]). `refund`: it was never counted
    /// (refused with a 429, or never sent).
    /// Returns whether a budget's limit was learned or lowered.
    fn settle_costs(&mut self, id: RequestId, answer: Option<(Nanos, &RateLimitInfo, &BodyHints)>, refund: bool) -> bool {
        let max_wait = self.config.max_server_wait;
        let r = self.requests.get_mut(&id).expect("live request");
        let qid = r.qid;
        let Some(cost) = r.cost.as_mut().filter(|c| !c.charges.is_empty()) else {
            return false;
        };
        let mut lowered = false;
        let charges = std::mem::take(&mut cost.charges);
        let share = self.cost_share();
        let q = self.queues[qid].as_mut().expect("live queue");
        for charge in &charges {
            // Made anew when its route moved to another queue meanwhile: that queue keeps the
            // budget now.
            let budget = costs::budget_mut(q.budgets.vec_mut(), &charge.name, share);
            let (report, actual) = match answer {
                Some((_, info, body)) => {
                    let report = info
                        .dimensions
                        .iter()
                        .find(|d| *d.name == *charge.name)
                        .map(|d| (d.limit, d.remaining, d.reset_after.map(|ra| ra.min(max_wait))));
                    (report, if refund { None } else { headers::settled_cost(body, &charge.name) })
                }
                None => (None, None),
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
            budget.settle(answer.map_or(self.now, |(now, _, _)| now), charge, report, actual, refund);
            lowered |= budget.limit.is_some_and(|l| before.is_none_or(|b| l < b));
        }
        lowered
    }

    /// Fails the requests queued in `qid` whose estimates a limit it learned now rules out.
    fn fail_never_fitting(&mut self, qid: Qid) {
        let doomed: Vec<(RequestId, FailReason)> = self
            .queue(qid)
            .pending
            .iter()
            .filter(|id| !self.requests[id].costs().is_empty())
            .filter_map(|id| costs::never_fits(self.queue(qid).budgets.get(), self.requests[id].costs()).map(|reason| (*id, reason)))
            .collect();
        for (id, reason) in doomed {
            self.unqueue(id);
            self.fail(id, reason);
        }
    }

    /// Gives back the global token and bucket slot of a request that never left.
    fn refund(&mut self, qid: Qid, id: RequestId, flight: Flight) {
        let _ = self.settle_costs(id, None, true);
        let iid = self.req(id).identity;
        if let Some(at) = flight.global_at {
            self.drop_global_entry(iid, at);
            self.mark_identity_ready(iid);
        }
        self.give_back_slot(qid, flight);
    }

    /// Gives back the bucket slot `flight` took in queue `qid`, if it was taken in the
    /// bucket's current window.
    fn give_back_slot(&mut self, qid: Qid, flight: Flight) {
        let b = &mut self.queue_mut(qid).bucket;
        if flight.window_epoch == b.epoch && b.known && !b.unlimited {
            b.sends_in_window = b.sends_in_window.saturating_sub(1);
            if let Some(pos) = b.send_log.iter().rposition(|&t| t == flight.sent_at) {
                b.send_log.remove(pos);
            }
        }
    }

    /// Counts request `id` (which left the in-flight set) against queue `qid`'s window until
    /// the window resets or a report counts it (see [`Ghost`]): the server may have counted
    /// it without the client knowing. `answered_at`: when its answer came back, `None` when
    /// it may still be on its way.
    fn add_ghost(&mut self, qid: Qid, id: RequestId, answered_at: Option<Nanos>) {
        let route = self.requests[&id].route_key.clone();
        self.queue_mut(qid).bucket.ghosts.push(Ghost { route, answered_at });
    }

    fn record_invalid(&mut self, now: Nanos, id: RequestId) {
        if self.config.invalid_request_limit == 0 {
            return;
        }
        if self.config.shared.is_some() {
            let window = self.config.invalid_request_window;
            self.outputs.push_back(Output::Share(SharedUpdate::Invalid { id, window }));
        }
        self.expire_invalid(now);
        self.invalid_ends.push_back(now.saturating_add(self.config.invalid_request_window));
        self.warn_invalid_budget();
    }

    /// Emits the invalid-request warning once the budget used reaches `invalid_request_warn_at`
    /// (once, until the count falls below half of it again).
    pub(crate) fn warn_invalid_budget(&mut self) {
        let count = self.invalid_ends.len() as u32;
        if count >= self.config.invalid_request_warn_at && !self.invalid_warned {
            self.invalid_warned = true;
            self.outputs.push_back(Output::Observe(Observation::InvalidRequestWarning {
                count,
                limit: self.config.invalid_request_limit,
            }));
        }
    }

    fn expire_invalid(&mut self, now: Nanos) {
        while self.invalid_ends.front().is_some_and(|&end| end <= now) {
            self.invalid_ends.pop_front();
        }
        if (self.invalid_ends.len() as u32) < self.config.invalid_request_warn_at / 2 {
            self.invalid_warned = false;
        }
    }

    fn mark_unauthorized(&mut self, iid: Iid) {
        self.identities[iid].unauthorized = true;
        self.fail_queued(|r| r.identity == iid, FailReason::Unauthorized);
    }

    /// Fails every queued (or reserving: never sent either) request that `which` selects, in
    /// enqueue order.
    fn fail_queued(&mut self, which: impl Fn(&Req) -> bool, reason: FailReason) {
        let mut queued: Vec<RequestId> = self
            .requests
            .iter()
            .filter(|(_, r)| {
                matches!(r.state, ReqState::Queued | ReqState::Reserving { .. }) && which(r)
            })
            .map(|(id, _)| *id)
            .collect();
        queued.sort_unstable();
        for id in queued {
            if matches!(self.req(id).state, ReqState::Reserving { .. }) {
                self.abandon_reservation(id);
            } else {
                self.unqueue(id);
            }
            self.fail(id, reason.clone());
        }
    }

    /// Widens the global window by the spread of observed round trips, counted from when each
    /// request left (see [`Limiter::handle_written`]): arrivals at the server are at most that
    /// much more bunched than the global log's entries. A sample's range underestimates the
    /// true range, so the margin is 1.5x the observed spread plus a 5 ms floor, capped by
    /// `global_margin_max`; until 16 samples are in, it stays at half the cap, and until they
    /// span a global window it also covers the fastest round trip (and beyond the cap, for the
    /// first window's entries: [`Limiter::global_margin_at`]).
    ///
    /// `from_send` counts from the [`Output::Send`] (the lead below), `from_left` from the
    /// transport's report that the request left (the same when the driver does not report).
    fn learn_latency(&mut self, from_send: Nanos, from_left: Nanos, left_at: Nanos, uplink_widens: bool) {
        let window = self.config.global_window;
        let first = self.first_window.get_or_insert(FirstWindow { start: left_at, fastest: from_left });
        let first_left = first.start;
        if left_at < first_left.saturating_add(window) {
            first.fastest = first.fastest.min(from_left);
        }
        // Recomputed at once also when an uplink falls outside all seen before (see [`Recent`]).
        if self.latencies.push((from_send, from_left), from_left, uplink_widens) {
            let mut sorted: Vec<Nanos> = self.latencies.iter().map(|&(_, left)| left).collect();
            sorted.sort_unstable();
            let (fastest, spread) = (sorted[0], sorted[sorted.len() - 1] - sorted[0]);
            let mut margin = spread.saturating_add(spread / 2).saturating_add(5 * MILLISECOND);
            // Where the server tells its clock, the uplinks' own spread: a round trip also
            // holds the server's time to answer and the client's delay in reading the answer
            // (on a busy event loop, most of it), which do not bunch arrivals. Each uplink
            // sample is within about 2 ms (two headers, each to the millisecond). Never above
            // the round trips' margin.
            if let Some((lo, hi)) = self.uplinks.range() {
                let spread = hi.abs_diff(lo);
                let allowance = spread.saturating_add(spread / 2).saturating_add(8 * MILLISECOND);
                margin = margin.min(allowance);
            }
            // Until the samples span a whole global window they may all come from one first
            // burst: the margin also covers the fastest of them (see
            // [`Limiter::global_margin_at`], which holds that uncapped for the first window's
            // entries).
            if left_at.saturating_sub(first_left) < window {
                margin = margin.max(fastest.saturating_add(5 * MILLISECOND));
            }
            self.global_margin = margin.min(self.config.global_margin_max);
            sorted.clear();
            sorted.extend(self.latencies.iter().map(|&(send, _)| send));
            sorted.sort_unstable();
            let at = |q: usize| sorted[(sorted.len() - 1) * q / 100];
            let (min, high) = (at(0), at(90));
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
            self.send_lead = if jitter.saturating_mul(10) <= min {
                min.saturating_sub(2 * jitter).saturating_sub(3 * MILLISECOND)
            } else {
                0
            };
        }
    }

    // ------------------------------------------------------------------ scheduling

    /// Fires timers, re-evaluates changed queues, sends what may be sent, evicts idle state.
    fn pump(&mut self, now: Nanos) {
        self.fire_timers(now);
        loop {
            while let Some(qid) = self.dirty.pop() {
                if self.queues.get(qid).is_some_and(Option::is_some) {
                    self.evaluate(now, qid);
                }
            }
            if !self.dispatch(now) {
                break;
            }
        }
        self.evict_idle(now, 2);
    }

    fn fire_timers(&mut self, now: Nanos) {
        while let Some(&Reverse((t, timer))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            match timer {
                Timer::Queue(qid, uid) => {
                    if let Some(Some(q)) = self.queues.get_mut(qid)
                        && q.uid == uid
                        && q.wake_at == Some(t)
                    {
                        q.wake_at = None;
                        self.dirty.push(qid);
                    }
                }
                Timer::Identity(iid) => {
                    if self.identities[iid].wake_at == Some(t) {
                        self.identities[iid].wake_at = None;
                        self.mark_identity_ready(iid);
                    }
                }
                Timer::Deadline(id) => {
                    let Some(req) = self.requests.get(&id) else { continue };
                    // The timer is armed just after the deadline: sending at it is allowed.
                    let Some(deadline) = req.deadline.filter(|&d| d.saturating_add(1) == t) else {
                        continue;
                    };
                    if req.state != ReqState::Queued {
                        continue;
                    }
                    let (limit, enqueued_at) = (req.limit, req.enqueued_at);
                    // A deferral carries when it could go now: still queued past its budget
                    // (waiting on an answer, say), it is handed back with a fresh prediction.
                    let predicted = match limit {
                        Limit::Defer { .. } => Some(self.predict_queued(t, id)),
                        Limit::Deadline | Limit::MaxWait => None,
                    };
                    let reason = limit_reason(limit, enqueued_at, deadline, predicted, t);
                    self.unqueue(id);
                    self.fail(id, reason);
                }
                Timer::Gate => {
                    if self.gate_wake == Some(t) {
                        self.gate_wake = None;
                    }
                }
                Timer::Recovery => {
                    if self.recovery.is_some_and(|r| r.until <= t) {
                        self.end_recovery();
                    }
                }
            }
        }
    }

    /// Marks for re-evaluation every queue of `identity` (every queue with `None`), so that a
    /// pause that just started fails at once the queued requests it makes hopeless.
    fn recheck_queues(&mut self, identity: Option<Iid>) {
        for (qid, q) in self.queues.iter().enumerate() {
            if let Some(q) = q
                && !q.pending.is_empty()
                && identity.is_none_or(|iid| q.key.identity == iid)
            {
                self.dirty.push(qid);
            }
        }
    }

    /// Moves every queue waiting on an identity's global budget back to `ready`.
    fn mark_identity_ready(&mut self, iid: Iid) {
        let blocked = std::mem::take(&mut self.identities[iid].blocked);
        for key in blocked {
            let qid = key.2;
            if let Some(Some(q)) = self.queues.get_mut(qid)
                && let Slot::Blocked(k, head) = q.slot
                && k == key
            {
                q.slot = Slot::Ready(key, head);
                self.ready.insert(key);
            }
        }
    }

    fn clear_slot(&mut self, qid: Qid) {
        let q = self.queues[qid].as_mut().expect("live queue");
        match std::mem::replace(&mut q.slot, Slot::None) {
            Slot::None => {}
            Slot::Ready(key, _) => {
                self.ready.remove(&key);
            }
            Slot::Blocked(key, _) => {
                let iid = q.key.identity;
                self.identities[iid].blocked.remove(&key);
            }
        }
    }

    /// Decides whether queue `qid`'s head may go as far as its bucket is concerned, and files
    /// the queue in `ready` or arms its wake-up.
    fn evaluate(&mut self, now: Nanos, qid: Qid) {
        self.clear_slot(qid);
        let share = self.outage_share();
        let q = self.queues[qid].as_mut().expect("live queue");
        if q.pending.is_empty() {
            return;
        }
        // Refresh the bucket window.
        let lead = self.send_lead;
        let b = &mut q.bucket;
        if b.shared_cap.is_some_and(|(_, until)| until <= now) {
            b.shared_cap = None;
        }
        for budget in q.budgets.get_mut() {
            budget.roll(now);
        }
        b.roll_if_due(now, lead, q.in_flight.len());
        if b.known
            && !b.unlimited
            && b.sliding
            && let Some(period) = b.period
        {
            while b.send_log.front().is_some_and(|&t| t.saturating_add(period) <= now) {
                b.send_log.pop_front();
            }
        }
        // A global pause of this queue's identity or a host-wide hold: the queued requests that
        // cannot go before their deadline fail now, not when it passes.
        let (iid, checked) = (q.key.identity, q.checked_wait);
        let held = self.host_hold().max(self.identities[iid].paused_until);
        if held > now && held > checked {
            self.queue_mut(qid).checked_wait = held;
            self.fail_hopeless(now, qid);
            if self.queue(qid).pending.is_empty() {
                return;
            }
        }
        let q = self.queues[qid].as_mut().expect("live queue");
        if self.store_down && has_reserving(&q.in_flight, &self.requests) {
            // The store is down and this queue's probe is out: what follows it waits for its
            // answer rather than overtake it on local limits.
            return;
        }
        let bucket_wait = bucket_gate(&q.bucket, q.in_flight.len(), now, lead, share);
        let mut wait = match bucket_wait {
            Gate::Open => None,
            Gate::Until(t) => Some(t),
            Gate::UntilResponse => {
                return;
            }
        };
        if q.shared_until > now {
            wait = Some(wait.map_or(q.shared_until, |w| w.max(q.shared_until)));
        }
        if wait.is_none() {
            // Find the first request not held by its own backoff or a sub-limit.
            q.sub_limits.retain(|(_, t)| *t > now);
            let mut earliest: Option<Nanos> = None;
            let mut head = None;
            for (scanned, &id) in q.pending.iter().enumerate() {
                if scanned >= 256 {
                    break;
                }
                let r = &self.requests[&id];
                let mut hold = r.not_before;
                if let Some(t) = q.sub_limit_until(r) {
                    hold = hold.max(t);
                }
                if hold <= now {
                    head = Some(id);
                    break;
                }
                earliest = Some(earliest.map_or(hold, |e| e.min(hold)));
            }
            if let Some(id) = head
                && !self.requests[&id].costs().is_empty()
            {
                let r = &self.requests[&id];
                if let Some(reason) = costs::never_fits(q.budgets.get(), r.costs()) {
                    self.unqueue(id);
                    self.fail(id, reason);
                    self.mark_dirty(qid);
                    return;
                }
                let ratios = &self.ratios;
                let margin = |name: &str| ratios.iter().find(|(n, _)| &**n == name).map_or(Ratio::PRIOR, |(_, r)| r.margin());
                match costs::gate(q.budgets.get(), r.costs().iter().map(|(n, c)| (&**n, *c)), margin) {
                    Ok(()) => {}
                    Err(Blocked::Until(t)) => {
                        head = None;
                        earliest = Some(earliest.map_or(t, |e| e.min(t)));
                    }
                    Err(Blocked::UntilResponse) => return,
                }
            }
            match head {
                Some(id) => {
                    let r = &self.requests[&id];
                    let key = (Reverse(r.priority), id, qid);
                    q.slot = Slot::Ready(key, id);
                    self.ready.insert(key);
                    return;
                }
                None => wait = earliest,
            }
        }
        if let Some(t) = wait {
            let uid = q.uid;
            if q.wake_at != Some(t) {
                q.wake_at = Some(t);
                self.timers.push(Reverse((t, Timer::Queue(qid, uid))));
            }
            if t > q.checked_wait {
                q.checked_wait = t;
                self.fail_hopeless(now, qid);
            }
        }
    }

    /// Fails at once the queued requests of `qid` whose deadline falls before their predicted
    /// send time.
    fn fail_hopeless(&mut self, now: Nanos, qid: Qid) {
        let pending: Vec<RequestId> = self.queue(qid).pending.iter().copied().collect();
        let mut position = 0;
        let mut doomed = Vec::new();
        let mut ahead = Vec::new();
        for id in pending {
            let r = &self.requests[&id];
            let Some(deadline) = r.deadline else {
                position += 1;
                self.add_charges(now, qid, r.costs(), &mut ahead);
                continue;
            };
            let mut predicted = self
                .predict_position(now, qid, &r.route_key, r.sub_key.as_deref(), position, r.exempt)
                .max(r.not_before);
            if let Some(t) = self.cost_wait(now, qid, &ahead, r.costs()) {
                predicted = predicted.max(t);
            }
            if predicted > deadline {
                doomed.push((id, limit_reason(r.limit, r.enqueued_at, deadline, Some(predicted), now)));
            } else {
                position += 1;
                self.add_charges(now, qid, r.costs(), &mut ahead);
            }
        }
        for (id, reason) in doomed {
            self.unqueue(id);
            self.fail(id, reason);
        }
    }

    /// Sends ready heads in priority order while the gates allow. Returns whether anything was
    /// sent (queues then need re-evaluation).
    fn dispatch(&mut self, now: Nanos) -> bool {
        let mut sent = false;
        while let Some(&key) = self.ready.first() {
            // Host-wide gates.
            if self.edge_until > now {
                break;
            }
            match self.invalid_gate(now) {
                Gate::Open => {}
                Gate::Until(t) => {
                    self.arm_gate(t);
                    break;
                }
                Gate::UntilResponse => break,
            }
            match self.store_gate(now) {
                Gate::Open => {}
                Gate::Until(t) => {
                    self.arm_gate(t);
                    break;
                }
                Gate::UntilResponse => break,
            }
            let qid = key.2;
            let Slot::Ready(_, id) = self.queue(qid).slot else {
                self.ready.remove(&key);
                continue;
            };
            if self.store_down && has_reserving(&self.queue(qid).in_flight, &self.requests) {
                // Became ready before the store went down; now it waits for the queue's probe
                // (the answer re-evaluates the queue).
                self.ready.remove(&key);
                self.queue_mut(qid).slot = Slot::None;
                continue;
            }
            let (exempt, iid) = {
                let r = &self.requests[&id];
                (r.exempt, r.identity)
            };
            if !exempt && self.waits_for_lease(now, iid) {
                // The identity's lease request is out: its answer says how many may go (the
                // answer marks the identity ready again; no timer).
                self.ready.remove(&key);
                self.queue_mut(qid).slot = Slot::Blocked(key, id);
                self.identities[iid].blocked.insert(key);
                continue;
            }
            let wait = if exempt { None } else { self.global_wait(now, iid) };
            if wait.is_none()
                && !exempt
                && self.identities[iid].blocked.first().is_some_and(|blocked| *blocked < key)
            {
                // Someone ahead (higher priority, or older) waits for this identity's global
                // budget, which has room now (its wake-up was computed with a wider margin):
                // it gets the token, not this head.
                self.mark_identity_ready(iid);
                continue;
            }
            if let Some(t) = wait {
                self.ready.remove(&key);
                self.queue_mut(qid).slot = Slot::Blocked(key, id);
                self.identities[iid].blocked.insert(key);
                self.wake_identity_at(iid, t);
                continue;
            }
            self.ready.remove(&key);
            let lead = self.send_lead;
            let q = self.queue_mut(qid);
            q.slot = Slot::None;
            // A head that waited for the global budget goes without being evaluated again
            // (its bucket only opened further meanwhile), but its window may have reset: a
            // request sent after the reset belongs to the next window, not to one whose answers
            // would then describe the old window (and keep it as a ghost).
            let in_flight = q.in_flight.len();
            q.bucket.roll_if_due(now, lead, in_flight);
            self.send(now, qid, id);
            sent = true;
            // The queue's next head may go too: evaluate it right away.
            self.evaluate(now, qid);
        }
        if self.edge_until > now && !self.ready.is_empty() {
            self.arm_gate(self.edge_until);
        }
        sent
    }

    /// Sends request `id` (the head of `qid`), or in shared mode reserves it at the store.
    fn send(&mut self, now: Nanos, qid: Qid, id: RequestId) {
        let flight = self.occupy(now, qid, id);
        if self.config.shared.is_some() && self.should_reserve(now) {
            let iid = self.req(id).identity;
            let (counts_global, global_want, leased) = self.global_ask(now, iid, id, flight.global_at.is_some());
            let mut reservation = self.reservation(now, id, counts_global);
            reservation.global_want = global_want;
            // After an outage: how many processes are back, and what the store may not count.
            let asked_since = self.store_down || self.recovery.is_some();
            if asked_since {
                reservation.processes_since = Some(now.saturating_sub(self.store_down_since));
            }
            let keep = self.report_horizon();
            let log = &mut self.identities[iid].send_log;
            let reported = log.is_pending(now, keep).then(|| log.mark());
            if reported.is_some() {
                (reservation.unrecorded, reservation.granted) = log.ages(now, keep);
            }
            // Not back until no identity has anything left to report, nor may send without
            // the store (fail-open goes on sending while its probe is out).
            let fail_open = self.config.shared.as_ref().is_some_and(|s| s.on_unavailable == OnUnavailable::FailOpen);
            reservation.reporting = (self.store_down && fail_open)
                || self.identities.iter_mut().any(|ident| ident.send_log.is_pending(now, keep));
            self.req_mut(id).state = ReqState::Reserving {
                since: now,
                step: self.store_step,
                window_seq: flight.window_seq,
                window_epoch: flight.window_epoch,
                global_at: flight.global_at,
                leased,
                reported,
                asked_since,
            };
            self.reserving_total += 1;
            self.outputs.push_back(Output::Reserve(reservation));
            return;
        }
        if self.config.shared.is_some() && flight.global_at.is_some() {
            // Fail-open while the store is down: a send the store never sees.
            let (iid, keep) = (self.req(id).identity, self.report_horizon());
            self.identities[iid].send_log.unrecorded(now, keep);
        }
        let state = ReqState::InFlight {
            sent_at: now,
            window_seq: flight.window_seq,
            window_epoch: flight.window_epoch,
            global_at: flight.global_at,
            left_at: now,
            alone: self.in_flight_total == 0,
        };
        let r = self.req_mut(id);
        r.state = state;
        r.sends += 1;
        self.in_flight_total += 1;
        self.outputs.push_back(Output::Send(id));
    }

    /// Takes the request's global token and bucket slot, and moves it from its queue's pending
    /// list to its in-flight list. Returns how it was taken.
    fn occupy(&mut self, now: Nanos, qid: Qid, id: RequestId) -> Flight {
        let (exempt, iid) = {
            let r = &self.requests[&id];
            (r.exempt, r.identity)
        };
        let global_at = (!exempt && self.config.global_limit > 0).then(|| {
            self.identities[iid].sends.push_back(now);
            now
        });
        if !exempt && self.config.global_limit == 0 {
            // Only to learn a token-wide limit from a refusal (see `LearnedCap`).
            let span = self.config.global_window.saturating_add(self.global_margin_at(now));
            let sends = &mut self.identities[iid].sends;
            while sends.front().is_some_and(|&t| t.saturating_add(span) <= now) {
                sends.pop_front();
            }
            sends.push_back(now);
        }
        if !exempt {
            self.identities[iid].queued -= 1;
        }
        self.charge_costs(qid, id);
        let q = self.queue_mut(qid);
        if let Some(pos) = q.pending.iter().position(|&p| p == id) {
            q.pending.remove(pos);
        }
        q.in_flight.push(id);
        q.last_active = now;
        let b = &mut q.bucket;
        b.sends_in_window = b.sends_in_window.saturating_add(1);
        b.last_send = now;
        if b.window_first_send.is_none() {
            b.window_first_send = Some(now);
        }
        if b.known && !b.unlimited && b.reset_at.is_none() && b.sends_in_window == 1 {
            // A new window opens with this send; until a response says when it ends, assume
            // the learned window length, so lost answers never leave the bucket without a reset.
            b.reset_at = Some(now.saturating_add(b.window_estimate()));
            b.reset_provisional = true;
        }
        if b.sliding {
            b.send_log.push_back(now);
            while b.send_log.len() > SLIDING_LOG_CAP as usize {
                b.send_log.pop_front();
            }
        }
        Flight { sent_at: now, window_seq: b.sends_in_window, window_epoch: b.epoch, global_at, left_at: now, alone: false }
    }

    /// The predicted send time of the queued request `id` at its place in its queue, never
    /// before its own backoff ends.
    fn predict_queued(&self, now: Nanos, id: RequestId) -> Nanos {
        let r = &self.requests[&id];
        let q = self.queue(r.qid);
        let position = q.pending.iter().position(|&p| p == id).unwrap_or(q.pending.len());
        let t = self
            .predict_position(now, r.qid, &r.route_key, r.sub_key.as_deref(), position, r.exempt)
            .max(r.not_before);
        let ahead = self.charges_ahead(now, r.qid, position);
        self.cost_wait(now, r.qid, &ahead, r.costs()).map_or(t, |c| t.max(c))
    }

    /// The margin estimates in dimension `name` are charged at (see `costs`).
    fn margin(&self, name: &str) -> f64 {
        self.ratios.iter().find(|(n, _)| &**n == name).map_or(Ratio::PRIOR, |(_, r)| r.margin())
    }

    /// Queues what `costs` would be charged in `packs` (one per budget of queue `qid`, made on
    /// first use; see [`costs::Pack`]).
    fn add_charges<N: AsRef<str>>(&self, now: Nanos, qid: Qid, costs: &[(N, u64)], packs: &mut Vec<Option<Pack>>) {
        let budgets = self.queue(qid).budgets.get();
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
    fn charges_ahead(&self, now: Nanos, qid: Qid, position: usize) -> Vec<Option<Pack>> {
        let mut packs = Vec::new();
        if !self.queue(qid).budgets.get().is_empty() {
            for id in self.queue(qid).pending.iter().take(position) {
                self.add_charges(now, qid, self.requests[id].costs(), &mut packs);
            }
        }
        packs
    }

    /// When a request costing `own`, behind the requests packed in `ahead`, can go as far as
    /// the budgets of `qid` tell: `None` when they do not hold it.
    fn cost_wait<N: AsRef<str>>(&self, now: Nanos, qid: Qid, ahead: &[Option<Pack>], own: &[(N, u64)]) -> Option<Nanos> {
        let mut packs = ahead.to_vec();
        self.add_charges(now, qid, own, &mut packs);
        let budgets = self.queue(qid).budgets.get();
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

    /// Fails `id` once time passes its deadline `d` (a send at `d` itself is still allowed).
    fn arm_deadline(&mut self, id: RequestId, d: Nanos) {
        self.timers.push(Reverse((d.saturating_add(1), Timer::Deadline(id))));
    }

    fn arm_gate(&mut self, t: Nanos) {
        if self.gate_wake != Some(t) {
            self.gate_wake = Some(t);
            self.timers.push(Reverse((t, Timer::Gate)));
        }
    }

    fn wake_identity_at(&mut self, iid: Iid, t: Nanos) {
        let ident = &mut self.identities[iid];
        if ident.wake_at.is_none_or(|w| w != t) {
            ident.wake_at = Some(t);
            self.timers.push(Reverse((t, Timer::Identity(iid))));
        }
    }

    /// The identity's global limit per global window: the configured one, else a limit learned
    /// from refusals while it lasts ([`LearnedCap`]), else `0` (none).
    fn global_limit_of(&self, now: Nanos, iid: Iid) -> u32 {
        if self.config.global_limit > 0 {
            return self.config.global_limit;
        }
        let learned = &self.identities[iid].learned;
        if learned.until > now { learned.limit } else { 0 }
    }

    /// When the identity's global budget has room again, or `None` if it has room now.
    fn global_wait(&mut self, now: Nanos, iid: Iid) -> Option<Nanos> {
        if let Some(t) = self.outage_global_hold(now) {
            return Some(t);
        }
        let limit = share_of(self.global_limit_of(now, iid), self.outage_share()) as usize;
        let span = self.config.global_window.saturating_add(self.global_margin_at(now));
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
        while ident.sends.front().is_some_and(|&t| t.saturating_add(span) <= now) {
            ident.sends.pop_front();
        }
        if ident.sends.len() < limit {
            return None;
        }
        // The send that must leave the window before another may enter.
        let oldest = ident.sends[ident.sends.len() - limit];
        Some(oldest.saturating_add(span))
    }

    fn invalid_gate(&mut self, now: Nanos) -> Gate {
        if self.config.invalid_request_limit == 0 {
            return Gate::Open;
        }
        self.expire_invalid(now);
        let used = self.invalid_ends.len() + self.in_flight_total + self.reserving_total;
        if used < self.config.invalid_request_stop_at as usize {
            return Gate::Open;
        }
        match self.invalid_ends.front() {
            Some(&end) if self.invalid_ends.len() >= self.config.invalid_request_stop_at as usize => {
                Gate::Until(end)
            }
            _ => Gate::UntilResponse,
        }
    }

    // ------------------------------------------------------------------ prediction

    /// When the request of route `route_key` (and sub-limit key `sub_key`) at `position` in
    /// queue `qid` is expected to be sent.
    fn predict_position(
        &self,
        now: Nanos,
        qid: Qid,
        route_key: &str,
        sub_key: Option<&str>,
        position: usize,
        exempt: bool,
    ) -> Nanos {
        let q = self.queue(qid);
        let mut t = now.max(self.host_hold()).max(q.shared_until);
        // A sub-limit holds this route (and major parameter), or this class of it, whatever
        // the bucket says.
        for &(ref k, until) in &q.sub_limits {
            if k == route_key || Some(k.as_str()) == sub_key {
                t = t.max(until);
            }
        }
        if self.config.invalid_request_limit > 0
            && self.invalid_ends.len() >= self.config.invalid_request_stop_at as usize
            && let Some(&first_end) = self.invalid_ends.front()
        {
            t = t.max(first_end);
        }
        let b = &q.bucket;
        if b.known && !b.unlimited && b.limit > 0 {
            let share = self.outage_share();
            let limit = b.effective_limit(share).max(1) as usize;
            let reset = b.ready_at(self.send_lead);
            let (available, next_reset) = match reset {
                Some(r) if r > now => (b.available(q.in_flight.len(), share) as usize, Some(r)),
                _ => (limit.saturating_sub(q.in_flight.len()), None),
            };
            if position >= available {
                let period = b.period.unwrap_or_else(|| {
                    next_reset.map_or(self.config.global_window, |r| r.saturating_sub(now).max(1))
                });
                let first_reset = next_reset.unwrap_or_else(|| now.saturating_add(period));
                let windows = ((position - available) / limit) as u64;
                t = t.max(first_reset.saturating_add(period.saturating_mul(windows)));
            }
        }
        if !exempt {
            t = t.max(self.global_estimate(now, q.key.identity, position));
        }
        t
    }

    /// A lower bound on when the identity's global budget lets one more request through, with
    /// `extra` requests of the same identity ahead of it.
    fn global_estimate(&self, now: Nanos, iid: Iid, extra: usize) -> Nanos {
        let ident = &self.identities[iid];
        let mut t = now.max(ident.paused_until);
        let limit = share_of(self.global_limit_of(now, iid), self.outage_share()) as usize;
        if limit == 0 {
            return t;
        }
        let span = self.config.global_window.saturating_add(self.global_margin_at(now));
        // `sends` is in send order, so the recent ones are a suffix.
        let old = ident.sends.iter().take_while(|&&s| s.saturating_add(span) <= now).count();
        let recent = ident.sends.len() - old;
        let ahead = recent + ident.queued.max(extra);
        if ahead >= limit {
            // The earliest the window can next open, then one more window per `limit` ahead.
            let first = if recent >= limit {
                ident.sends[ident.sends.len() - limit].saturating_add(span)
            } else {
                now
            };
            let windows = (ahead / limit) as u64 - 1;
            t = t.max(first.saturating_add(span.saturating_mul(windows)));
        }
        t
    }

    // ------------------------------------------------------------------ cleanup

    fn discard_stale_timers(&mut self) {
        while let Some(&Reverse((t, timer))) = self.timers.peek() {
            let live = match timer {
                Timer::Queue(qid, uid) => self
                    .queues
                    .get(qid)
                    .and_then(Option::as_ref)
                    .is_some_and(|q| q.uid == uid && q.wake_at == Some(t)),
                Timer::Identity(iid) => self.identities[iid].wake_at == Some(t),
                Timer::Deadline(id) => self
                    .requests
                    .get(&id)
                    .is_some_and(|r| {
                        r.state == ReqState::Queued && r.deadline.map(|d| d.saturating_add(1)) == Some(t)
                    }),
                Timer::Gate => self.gate_wake == Some(t),
                Timer::Recovery => self.recovery.is_some_and(|r| r.until == t),
            };
            if live {
                break;
            }
            self.timers.pop();
        }
    }

    /// Forgets up to `budget` idle queues whose window has passed and that have been idle for
    /// `bucket_idle_ttl`. Amortised: called on every input, no sweeper.
    fn evict_idle(&mut self, now: Nanos, budget: usize) {
        // Candidates are in the order they went idle, so the head expires first: look at it
        // without taking it, and stop at the first one that is not due.
        for _ in 0..budget {
            let Some(&(qid, uid)) = self.idle_candidates.front() else { return };
            let Some(Some(q)) = self.queues.get_mut(qid) else {
                self.idle_candidates.pop_front();
                continue;
            };
            if q.uid != uid {
                self.idle_candidates.pop_front();
                continue;
            }
            if !q.pending.is_empty() || !q.in_flight.is_empty() {
                q.idle_listed = false;
                self.idle_candidates.pop_front();
                continue;
            }
            let sub_limits = q.sub_limits.iter().map(|(_, t)| *t).max().unwrap_or(0);
            let quiet_since =
                q.bucket.reset_at.unwrap_or(0).max(q.shared_until).max(sub_limits).max(q.last_active);
            let expires = quiet_since.saturating_add(self.config.bucket_idle_ttl);
            if expires > now {
                return;
            }
            self.idle_candidates.pop_front();
            let key = q.key.clone();
            self.clear_slot(qid);
            self.queue_index.remove(&key);
            self.forget_route_queue(&key);
            self.queues[qid] = None;
            self.free_queues.push(qid);
        }
    }
}

/// How a request was sent, returned when it leaves the in-flight set.
#[derive(Debug, Clone, Copy)]
struct Flight {
    sent_at: Nanos,
    window_seq: u32,
    window_epoch: u64,
    /// Its entry in the identity's global log, if it counts against the global limit.
    global_at: Option<Nanos>,
    /// When it left (the send, or the transport's later report).
    left_at: Nanos,
    /// Sent while nothing else was in flight.
    alone: bool,
}

/// The server's clock against this process's, where the answers tell it (Discord's
/// `X-RateLimit-Reset` less `X-RateLimit-Reset-After`, to the millisecond): each sample is the
/// server's clock at its answer less the monotonic instant the request left, that is the
/// request's uplink (and the server's time to stamp its answer) up to one constant. Their
/// spread is the bunching the global margin must absorb; each one tells how late its own
/// answer was read, which times the next window ([`Uplinks::lead`]). Both take the server to
/// count a request when it stamps its answer's headers.
#[derive(Debug, Default)]
struct Uplinks {
    /// The last [`Uplinks::KEEP`] samples, oldest first, each with its round trip (from when
    /// the request left).
    samples: VecDeque<(i64, Nanos)>,
    seen: u64,
    /// Samples among `samples` of requests sent alone.
    alone: u32,
    /// Whether each of `samples` was sent alone (to keep `alone` as samples leave).
    alone_flags: VecDeque<bool>,
    /// The fastest sample and the allowance for the next request's uplink, once the samples
    /// can bound it (see [`Uplinks::lead`]).
    bound: Option<(i64, Nanos)>,
    /// The fastest and slowest sample ever seen.
    extremes: Option<(i64, i64)>,
    /// How many samples the bound's spread was taken from.
    bound_samples: usize,
}

impl Uplinks {
    const KEEP: usize = 256;
    /// Samples before an answer lead: a few are not a distribution.
    const LEAD_MIN: usize = 8;
    /// ... of which sent alone: see [`Uplinks::lead`].
    const LEAD_MIN_ALONE: u32 = 2;
    /// Samples in the fastest three quarters that can vouch for a steady uplink when the nine
    /// tenths cannot (see [`Uplinks::take`]): where the allowance's weight reaches 1x.
    const DENSE: usize = 32;
    /// Two readings of the server's clock differ by up to this from the truth between them
    /// (each is two headers rounded to the millisecond).
    const READING: Nanos = 2 * MILLISECOND;

    /// Takes a sample; whether it falls outside all samples seen before.
    fn push(&mut self, offset: i64, round_trip: Nanos, alone: bool) -> bool {
        let widens = widen(&mut self.extremes, offset);
        self.take(offset, round_trip, alone);
        widens
    }

    fn take(&mut self, offset: i64, round_trip: Nanos, alone: bool) {
        self.samples.push_back((offset, round_trip));
        self.alone_flags.push_back(alone);
        self.alone += u32::from(alone);
        if self.samples.len() > Self::KEEP {
            self.samples.pop_front();
            if self.alone_flags.pop_front() == Some(true) {
                self.alone -= 1;
            }
        }
        self.seen = self.seen.wrapping_add(1);
        let n = self.samples.len();
        if n < Self::LEAD_MIN || self.alone < Self::LEAD_MIN_ALONE {
            self.bound = None;
            return;
        }
        // The bound moves slowly: recomputed at every sample while it counts few, then every
        // 16th (the scan is up to 256 long); a new fastest sample is taken at once.
        if self.bound.is_some() && self.bound_samples >= 32 && !self.seen.is_multiple_of(16) {
            if let Some((lo, _)) = &mut self.bound {
                *lo = (*lo).min(offset);
            }
            return;
        }
        let all = self.sorted_offsets(false);
        let lo = all.first().copied().unwrap_or(0);
        let fastest_trip = self.samples.iter().map(|&(_, trip)| trip).min().unwrap_or(0);
        // Only on a steady uplink: the spread of the fastest nine tenths within a tenth of the
        // fastest round trip. The fastest sample bounds the next uplink only as well as the
        // samples show the distribution: a few samples bunched at its top (uplinks of 1 to 13
        // ms, thirteen samples all between 8 and 13: found with a fresh seed, kept in the
        // regression file) say nothing of the uplinks far below them, and a request timed from
        // them arrives early.
        let steady = |(spread, _): (Nanos, usize)| spread.saturating_mul(10) <= fastest_trip;
        let nine_tenths = spread_at(&all, lo, 9, 10);
        let mut spread = nine_tenths;
        // The request a lead times is sent after a wait, alone: where all samples look
        // unsteady, the samples of requests sent alone may still show a steady uplink once
        // there are enough of them, and then they decide (a burst's uplinks are spread by the
        // client's own writes: one of 71 requests kept the Python and fetch drivers without a
        // lead for the whole of the Scoreboard's `mixed`). The fastest of all samples stays
        // the reference, the more cautious one.
        if !steady(spread) && self.alone as usize >= Self::LEAD_MIN {
            spread = spread_at(&self.sorted_offsets(true), lo, 9, 10);
        }
        // A slow cluster at the top (the first burst, queued at a server or a client still
        // busy starting: 6 of the Node driver's first 46 samples on the Scoreboard's `mixed`,
        // 5-6 ms above the 40 others, which lay within 1.2 ms) leaves the nine tenths unsteady
        // while the uplinks at the bottom are well known. Then the fastest three quarters
        // decide, if they are at least [`Uplinks::DENSE`] samples and steady; the allowance
        // still takes the nine tenths' spread, the cautious one.
        if !steady(spread) {
            let (dense, counted) = spread_at(&all, lo, 3, 4);
            if counted * 3 / 4 < Self::DENSE || !steady((dense, counted)) {
                self.bound = None;
                return;
            }
            spread = nine_tenths;
        }
        let (spread, counted) = spread;
        self.bound_samples = counted;
        // The next request's uplink may be faster than the fastest seen; by how much, the
        // spread of the fastest nine tenths tells, the less surely the fewer they are: 4x that
        // spread at 8 samples, 2x at 16, 1x at 32, 0.5x from 64 on (counting the samples the
        // spread was taken from).
        let weighted = spread.saturating_mul(32) / counted.min(64) as u64;
        self.bound = Some((lo, Self::READING.saturating_add(weighted)));
    }

    /// The samples' offsets (only those of requests sent alone, if `alone`), fastest first.
    fn sorted_offsets(&self, alone: bool) -> Vec<i64> {
        let mut sorted: Vec<i64> = self
            .samples
            .iter()
            .zip(&self.alone_flags)
            .filter(|&(_, &was_alone)| was_alone || !alone)
            .map(|(&(offset, _), _)| offset)
            .collect();
        sorted.sort_unstable();
        sorted
    }

    /// The fastest and the slowest sample, once 16 are in (for the global margin).
    fn range(&self) -> Option<(i64, i64)> {
        if self.samples.len() < 16 {
            return None;
        }
        Some(self.samples.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &(u, _)| (lo.min(u), hi.max(u))))
    }

    /// How much before the window end it reports (its arrival plus its reset-after) the
    /// answer with sample `offset`, read `round_trip` after its request left, lets the next
    /// request go: that round trip less its uplink's excess over the fastest is the time from
    /// the server's answer until it was read, plus the fastest uplink; less the allowance for
    /// the next request's uplink. 0 until [`Uplinks::LEAD_MIN`] samples are in, of which
    /// [`Uplinks::LEAD_MIN_ALONE`] from requests sent alone (the trips of a burst share
    /// delays, connections opening, the server's accept queue, that make all its uplinks look
    /// alike and slow, and a request sent later on a quiet link is faster than all of them),
    /// and 0 while the uplinks are unsteady (see [`Uplinks::push`]).
    fn lead(&self, offset: i64, round_trip: Nanos) -> Nanos {
        match self.bound {
            Some((lo, allowance)) => {
                let excess = u64::try_from(offset.saturating_sub(lo)).unwrap_or(0);
                round_trip.saturating_sub(excess).saturating_sub(allowance)
            }
            None => 0,
        }
    }
}

/// How far the fastest `num / den` of `sorted` (offsets, fastest first) reach above `lo`, and
/// how many offsets that counted.
fn spread_at(sorted: &[i64], lo: i64, num: usize, den: usize) -> (Nanos, usize) {
    let n = sorted.len();
    (sorted.get(n.saturating_sub(1) * num / den).map_or(0, |q| q.abs_diff(lo)), n)
}

/// The first global window, for [`Limiter::global_margin_at`]: when the first answered request
/// left, and the fastest round trip (from when it left) of the requests that left within a
/// global window of it.
#[derive(Debug, Clone, Copy)]
struct FirstWindow {
    start: Nanos,
    fastest: Nanos,
}

/// This process's part of `limit` when `share` processes split it (a fail-open store outage
/// in shared mode): `limit / share`, rounded down so that the parts add up to at most the
/// limit, but at least 1 so that every process keeps going (more than the limit together only
/// when the limit is below the process count). `0` (no limit) stays 0.
fn share_of(limit: u32, share: u32) -> u32 {
    if share > 1 && limit > 0 { (limit / share).max(1) } else { limit }
}

/// The last [`Recent::KEEP`] samples of a latency, for estimates recomputed every 16th sample
/// (they move slowly, and a scan is up to 256 long) and at once when a sample falls outside all
/// seen before: a global margin from 16 bunched round trips held for 16 more let a request 0.2
/// ms inside a global window when a slower and a faster one followed (a random seed, in
/// `properties.proptest-regressions`).
#[derive(Debug, Default)]
struct Recent<T> {
    items: VecDeque<T>,
    seen: u64,
    /// The fastest and slowest latency ever seen.
    extremes: Option<(Nanos, Nanos)>,
}

impl<T> Recent<T> {
    const KEEP: usize = 256;

    /// Takes `item`, whose latency is `latency`; whether the estimates are due: 16 samples are
    /// in, and this is the 16th since the last, or `latency` (or, as the caller says, another
    /// measure: `widened`) falls outside all seen before.
    fn push(&mut self, item: T, latency: Nanos, widened: bool) -> bool {
        let widens = widen(&mut self.extremes, latency) | widened;
        self.items.push_back(item);
        if self.items.len() > Self::KEEP {
            self.items.pop_front();
        }
        self.seen = self.seen.wrapping_add(1);
        self.items.len() >= 16 && (widens || self.seen.is_multiple_of(16))
    }

    fn iter(&self) -> std::collections::vec_deque::Iter<'_, T> {
        self.items.iter()
    }
}

impl<T: Copy + Into<i128>> Recent<T> {
    /// 1.5x the spread of the items (a sample's range underestimates the true range), for a
    /// margin passed to the store.
    fn spread_margin(&self) -> Nanos {
        let (lo, hi) = self.items.iter().fold((i128::MAX, i128::MIN), |(lo, hi), &t| {
            let t: i128 = t.into();
            (lo.min(t), hi.max(t))
        });
        let spread = if lo <= hi { u64::try_from(hi - lo).unwrap_or(u64::MAX) } else { 0 };
        spread.saturating_add(spread / 2)
    }
}

/// Widens `extremes` to take `sample`; whether it had to (a sample outside all before).
fn widen<T: Ord + Copy>(extremes: &mut Option<(T, T)>, sample: T) -> bool {
    match extremes {
        Some((lo, hi)) if (*lo..=*hi).contains(&sample) => false,
        Some((lo, hi)) => {
            (*lo, *hi) = ((*lo).min(sample), (*hi).max(sample));
            true
        }
        None => {
            *extremes = Some((sample, sample));
            true
        }
    }
}

/// Whether any of `ids` is reserving (shared mode).
fn has_reserving(ids: &[RequestId], requests: &HashMap<RequestId, Req>) -> bool {
    ids.iter().any(|id| matches!(requests[id].state, ReqState::Reserving { .. }))
}

/// Whether a bucket lets one more request go now.
fn bucket_gate(b: &Bucket, in_flight: usize, now: Nanos, lead: Nanos, share: u32) -> Gate {
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

