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

mod bucket;
mod costs;
mod latency;
mod learning;
mod outage;
mod shared;
mod state;

use bucket::{Bucket, Ghost, SLIDING_LOG_CAP, bucket_gate};
use costs::{Blocked, Budgets, Pack, Ratio, ReqCosts};
use latency::{FirstWindow, Recent, Uplinks, widen};
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
    /// Sent: how ([`Flight`]).
    InFlight(Flight),
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
        let ReqState::InFlight(Flight { sent_at, global_at, left_at, .. }) = req.state else {
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
        if let ReqState::InFlight(Flight { global_at, left_at, .. }) = &mut self.req_mut(id).state {
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
            ReqState::InFlight(_) => {
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
        let ReqState::InFlight(flight) = req.state else {
            return Err(Error::InvalidState { id, expected: "in flight" });
        };
        let qid = req.qid;
        let q = self.queue_mut(qid);
        if let Some(pos) = q.in_flight.iter().position(|&p| p == id) {
            q.in_flight.swap_remove(pos);
        }
        self.in_flight_total -= 1;
        self.req_mut(id).state = ReqState::Answered;
        Ok(flight)
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
        let state = ReqState::InFlight(Flight {
            sent_at: now,
            left_at: now,
            alone: self.in_flight_total == 0,
            ..flight
        });
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

/// How an in-flight request was sent ([`ReqState::InFlight`]), returned when it leaves the
/// in-flight set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flight {
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
}

/// This process's part of `limit` when `share` processes split it (a fail-open store outage
/// in shared mode): `limit / share`, rounded down so that the parts add up to at most the
/// limit, but at least 1 so that every process keeps going (more than the limit together only
/// when the limit is below the process count). `0` (no limit) stays 0.
fn share_of(limit: u32, share: u32) -> u32 {
    if share > 1 && limit > 0 { (limit / share).max(1) } else { limit }
}

/// Whether any of `ids` is reserving (shared mode).
fn has_reserving(ids: &[RequestId], requests: &HashMap<RequestId, Req>) -> bool {
    ids.iter().any(|id| matches!(requests[id].state, ReqState::Reserving { .. }))
}

