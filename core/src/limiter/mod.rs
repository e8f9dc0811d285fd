//! The client-side engine: [`Limiter`].
//!
//! # Call order
//!
//! The limiter is a state machine. Its methods sort into three groups:
//!
//! * **inputs** (`&mut self`, take `now`): [`Limiter::enqueue`], [`Limiter::handle_written`],
//!   [`Limiter::handle_response`], [`Limiter::handle_failure`], [`Limiter::cancel`],
//!   [`Limiter::handle_timeout`], [`Limiter::close`], [`Limiter::restore`], and in shared mode
//!   [`Limiter::handle_reservation`];
//! * **outputs**: [`Limiter::poll_output`];
//! * **getters** (`&self`): [`Limiter::predict`], [`Limiter::queued`], [`Limiter::in_flight`],
//!   [`Limiter::reserving`], [`Limiter::invalid_requests`], [`Limiter::buckets`],
//!   [`Limiter::is_closed`], [`Limiter::config`], [`Limiter::snapshot`].
//!
//! Besides these, [`Limiter::new`] makes one. (`core/tests/limiter_doc.rs` keeps these lists
//! and the public methods alike.)
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
//!   its *charge*. A dimension comes back in one of two ways, chosen by the profile and
//!   learned from the answers (`costs`' module docs say how):
//!   - *a window* (Discord, GitHub, IETF policies, Azure OpenAI): room is the lowest
//!     `remaining` any answer of the dimension's current window reported, less the charges
//!     still in flight; before such a report, the limit less what was charged since the window
//!     began locally and what was in flight then. Otherwise the head waits for the dimension's
//!     reset (the latest end an answer of the window reported), or for an answer when no reset
//!     is known;
//!   - *continuous refill* (OpenAI's and Anthropic's requests and tokens, Shopify GraphQL's
//!     points): the budget refills at `limit / period`, the period learned from the answers
//!     (each reset is the time until the budget is full; two reports of different depths must
//!     agree on a period, or the answer states its restore rate; reports no one period explains
//!     make the dimension a window). Room at `t` is a level carried from answer to answer —
//!     what refilled since, capped at the limit, less every cost settled since — raised to what
//!     a report proves is left (its `remaining` less what settled after its request was sent)
//!     and capped by what it allows (its `remaining` plus what refilled since its request was
//!     sent), less the charges in flight. The head waits until what it lacks has refilled, not
//!     for the reset.
//!
//!   The queue stays in order behind the head. A dimension no answer reported yet does not
//!   hold anything (the first answers tell). Under the OpenAI and Anthropic profiles every
//!   request also costs one `requests` (its request budget refills continuously too); a
//!   request whose costs name a dimension leaves the request count to that budget, and the
//!   bucket sees only the dimensions it does not name.
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
//! of the longest reset reported; for a continuously refilling dimension, the time its rate
//! takes to refill what they and the request need beyond what it holds now.

use std::cmp::Reverse;
use std::collections::{BTreeSet, VecDeque};

use crate::config::Config;
use crate::error::Error;
use crate::headers;
use crate::rng::SplitMix64;
use crate::shared::{OnUnavailable, Reservation, ReservationAnswer, SharedScope, SharedUpdate};
use crate::types::*;

mod bucket;
mod contact;
mod costs;
mod global;
mod host;
mod ids;
mod latency;
mod learning;
mod outage;
mod predict;
mod queues;
mod routes;
mod shared;
mod snapshot;
mod timelog;
mod timers;

use bucket::{Bucket, Gate, Ghost};
use contact::Contacts;
use costs::{Blocked, Pack, Ratio, ReqCosts};
use global::{Identities, RoundTrips};
use ids::Ids;
use host::{EdgeBan, InvalidBudget};
use latency::{Recent, widen};
use predict::{Limit, Place, effective_deadline, limit_reason};
use queues::{Queue, Queues, Slot};
use learning::{backoff, refusal_scope};
use outage::share_of;
use shared::{Names, Store, has_reserving};
use routes::{BucketId, QueueKey, Routes, is_idempotent_method};
use timers::{Timer, Timers};

/// When a request is expected to be sent (see [`Limiter::predict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prediction {
    /// Expected monotonic send time (`now` if it could go at once).
    pub send_at: Nanos,
}

/// The engine's maps: hashbrown (std's own map, with lookups by a borrowed key,
/// `routes::KeyRef`) and foldhash with a fixed seed, so that runs replay alike. Keys come from
/// the caller and the server's bucket ids; a hostile server could at worst slow one limiter
/// down by colliding keys, never corrupt it.
type HashMap<K, V> = hashbrown::HashMap<K, V, foldhash::fast::FixedState>;

/// Index of a queue in the slab.
type Qid = u32;
/// A slot's generation: the count of queues its slot held before this one (wrapping). A timer
/// or an idle listing names a queue by its slot and generation, so a later queue in the same
/// slot is not taken for it. 32 bits, not a 64-bit count of every queue made: a listing would
/// have to outlive 2^32 queues made and forgotten in that one slot to be mistaken, and even
/// then a queue's wake-up also matches its instant, and an idle queue is forgotten only once it
/// is itself expired. Half the bytes in every queue, idle listing and timer.
type Uid = u32;
/// Index of an identity.
type Iid = u32;
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
    /// What each request of a queue's `in_flight` list took: how it was sent, or its
    /// reservation. Apart from [`Req`], which a queued request holds without it.
    taken: HashMap<RequestId, ReqState>,
    queues: Queues,
    /// What routes map to which buckets, and the queue keys they take.
    routes: Routes,
    /// The identities (tokens) requests were enqueued under, each with its global window.
    identities: Identities,
    /// Round trips, and the global margin and send lead learned from them.
    trips: RoundTrips,
    /// Queues whose head may be sendable as far as its bucket is concerned.
    ready: BTreeSet<ReadyKey>,
    /// Queues to re-evaluate.
    dirty: Vec<Qid>,
    timers: Timers,
    outputs: VecDeque<Output>,
    /// The invalid responses within `invalid_request_window` (see `host`).
    invalid: InvalidBudget,
    /// Requests sent and not answered, all identities.
    in_flight_total: usize,
    /// Shared mode: requests whose reservation is outstanding.
    reserving_total: usize,
    /// Shared mode: the store's health, outages and margins, and the reservations it owes.
    store: Store,
    /// First contact: the probes of unknown routes in flight, per major parameter.
    contacts: Contacts,
    /// No request goes out before its end (a Cloudflare-style ban).
    edge: EdgeBan,
    /// Per cost dimension: the recent ratios of actual to estimated cost (see `costs`).
    ratios: Vec<(Box<str>, Ratio)>,
    /// Cost budgets a snapshot restored, by queue (identity, bucket or route, learned, major),
    /// each waiting for its queue to open.
    restored_budgets: Vec<((String, String, bool, String), costs::Budget)>,
    /// The retry jitter's generator ([`Config::jitter_seed`]).
    rng: SplitMix64,
    closed: bool,
    /// The last answer's headers as parsed, kept for the next answer to parse into.
    answer: RateLimitInfo,
}

#[derive(Debug)]
struct Req {
    /// Its route key, shared with the other requests of the route ([`routes::RouteKeys`]).
    route_key: routes::Name,
    // Its major parameter and identity are its queue's (`Queue::key`): not kept here.
    /// The effective deadline: the request's own, or `enqueued + max_wait`, or
    /// `enqueued + defer_after`, whichever is first.
    deadline: Option<Nanos>,
    /// Which budget `deadline` came from (selects the failure reason).
    limit: Limit,
    enqueued_at: Nanos,
    priority: i32,
    /// Whether re-sending it is harmless ([`Req::IDEMPOTENT`]), whether it is exempt from the
    /// global limit ([`Req::EXEMPT`]), and whether it may have reached the server
    /// ([`Req::MAYBE_REACHED`]): one byte (the three as `bool`s took a `Req` from 80 to 88).
    flags: u8,
    qid: Qid,
    /// Where it is; what a sent or reserving request took is in [`Limiter::taken`] (a queued
    /// request, the common case, carries none of it).
    state: Phase,
    /// Not sent before this (retry backoff).
    not_before: Nanos,
    sends: u32,
    rate_limit_retries: u32,
    error_retries: u32,
    /// Its sub-limit class's key and its costs; `None` for a request without either that
    /// charged nothing (most requests).
    rare: Option<Box<Rare>>,
}

/// What few requests have, held apart so that the others pay one pointer for it.
#[derive(Debug, Default)]
struct Rare {
    /// `"{route_key} #{class}"` when the request has a sub-limit class: the key a sub-limit
    /// 429 of this request holds (and, in shared mode, the route it reserves under).
    sub_key: Option<Box<str>>,
    /// Its estimated costs ([`Request::costs`]) and what its send in flight charged its
    /// queue's budgets.
    costs: ReqCosts,
    /// A deferral's ([`Limit::Defer`]) own deadline, later than its deferral budget.
    own_deadline: Option<Nanos>,
}

/// Where a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Queued,
    /// Its response or failure is being handled: neither queued nor in flight.
    Answered,
    /// Shared mode: it holds its slot while the store decides ([`ReqState::Reserving`]).
    Reserving,
    /// Sent ([`ReqState::InFlight`]).
    InFlight,
}

/// What a request of a queue's `in_flight` list took ([`Limiter::taken`]); `Req::state` is
/// its [`Phase`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReqState {
    /// Not sent or reserved yet (it has just taken its slot), or answered.
    Answered,
    /// Shared mode: it holds its slot (as if in flight) while the store decides.
    Reserving {
        /// When the reservation was emitted.
        since: Nanos,
        /// The store's outage step (`Store::step`) when it was emitted: an
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

impl ReqState {
    fn phase(&self) -> Phase {
        match self {
            ReqState::Answered => Phase::Answered,
            ReqState::Reserving { .. } => Phase::Reserving,
            ReqState::InFlight(_) => Phase::InFlight,
        }
    }
}

impl Req {
    const IDEMPOTENT: u8 = 1;
    const EXEMPT: u8 = 2;
    /// A transport failure after which it may have reached the server happened to one of its
    /// attempts: if its retries run out, it ends in `maybe_sent`, not `network_error`.
    const MAYBE_REACHED: u8 = 4;

    fn idempotent(&self) -> bool {
        self.flags & Req::IDEMPOTENT != 0
    }

    fn exempt(&self) -> bool {
        self.flags & Req::EXEMPT != 0
    }

    fn maybe_reached(&self) -> bool {
        self.flags & Req::MAYBE_REACHED != 0
    }

    /// Its estimated costs ([`Request::costs`]).
    fn costs(&self) -> &[(Box<str>, u64)] {
        self.rare.as_ref().map_or(&[], |r| &r.costs.estimates)
    }

    /// A deferral's own deadline ([`Rare::own_deadline`]).
    fn own_deadline(&self) -> Option<Nanos> {
        self.rare.as_ref().and_then(|r| r.own_deadline)
    }

    /// The key of its sub-limit class, if it has one.
    fn sub_key(&self) -> Option<&str> {
        self.rare.as_ref().and_then(|r| r.sub_key.as_deref())
    }

    /// Whether a sub-limit hold on `key` holds this request: a hold on its route holds every
    /// request of the route, a hold on its class only the requests of that class.
    fn held_by(&self, key: &str) -> bool {
        *key == *self.route_key || self.sub_key() == Some(key)
    }

    /// The route this request reserves and shares under in shared mode, and the key its
    /// sub-limit 429 holds: its class's key when it has a sub-limit class, else its route.
    fn shared_route(&self) -> &str {
        self.sub_key().unwrap_or(&self.route_key)
    }
}

impl Limiter {
    /// A limiter with `config`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when a setting is out of range.
    pub fn new(config: Config) -> Result<Self, Error> {
        config.validate()?;
        let rng = SplitMix64::new(config.jitter_seed ^ 0x9E37_79B9_7F4A_7C15);
        let margin = config.global_margin_max / 2;
        let prior = crate::prior::Prior::new(config.profile, &config.route_groups).map_err(Error::InvalidConfig)?;
        Ok(Limiter {
            config,
            now: 0,
            next_id: 1,
            requests: HashMap::default(),
            taken: HashMap::default(),
            queues: Queues::default(),
            routes: Routes::new(prior),
            identities: Identities::default(),
            trips: RoundTrips::new(margin),
            ready: BTreeSet::new(),
            dirty: Vec::new(),
            timers: Timers::default(),
            outputs: VecDeque::new(),
            invalid: InvalidBudget::default(),
            in_flight_total: 0,
            reserving_total: 0,
            store: Store::default(),
            contacts: Contacts::default(),
            edge: EdgeBan::default(),
            ratios: Vec::new(),
            restored_budgets: Vec::new(),
            rng,
            closed: false,
            answer: RateLimitInfo::default(),
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
        self.invalid.used_at(now) as u32
    }

    /// Buckets (queues) currently held in memory.
    pub fn buckets(&self) -> usize {
        self.queues.len()
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
    pub fn enqueue(&mut self, now: Nanos, mut request: Request) -> Result<RequestId, Error> {
        let now = self.advance(now);
        if self.closed {
            return Err(Error::Closed);
        }
        self.validate_request(&request)?;
        if costs::counts_requests(self.config.profile) {
            // Its request budget refills continuously: counted as a cost (see "Costs").
            request.costs.push((costs::REQUESTS.to_string(), 1));
        }
        let (major, route_exempt) = routes::route_of(self.config.profile, &request, &mut self.routes.scratch);
        let route_key = self.routes.keys.intern(&self.routes.scratch);
        let iid = self.identities.intern(&request.identity);
        let id = self.next_id;
        self.next_id += 1;

        if self.identities[iid].is_unauthorized() {
            self.outputs.push_back(Output::Fail(id, FailReason::Unauthorized));
            self.pump(now);
            return Ok(id);
        }

        let exempt = request.global_exempt.unwrap_or(route_exempt);
        let sub_key = self.sub_key(&request, &route_key);
        let qid = match self.find_queue(iid, &route_key, &major) {
            Ok(qid) => qid,
            Err(key) => self.open_queue(key),
        };
        let defer_after = request.defer_after.or(self.config.defer_after);
        let (deadline, limit) =
            effective_deadline(now, request.deadline, self.config.max_wait, defer_after);

        let predicted = match deadline {
            Some(_) => {
                let place = Place::last(self.queue(qid), &route_key, sub_key.as_deref(), exempt);
                self.predict_send(now, qid, &place, &request.costs)
            }
            None => now,
        };
        // Its deadline (or `max_wait`, or `defer_after`) passes before it could go, or a cost
        // budget could never hold it: it fails at once, and its queue may go idle again.
        let early = match deadline {
            Some(d) if predicted > d => Some(limit_reason(limit, request.deadline, now, d, Some(predicted), now)),
            _ => costs::never_fits(self.queue(qid).rare.budgets(), &request.costs),
        };
        if let Some(reason) = early {
            self.outputs.push_back(Output::Fail(id, reason));
            self.note_idle(qid);
            self.pump(now);
            return Ok(id);
        }

        // A deferral keeps the request's own deadline, to tell `deferred` from
        // `deadline_exceeded` when it fails; the other budgets' deadline is the own one.
        let own_deadline = if limit == Limit::Defer { request.deadline } else { None };
        self.requests.insert(
            id,
            Req {
                route_key,
                deadline,
                limit,
                enqueued_at: now,
                priority: request.priority,
                flags: if request.idempotent.unwrap_or_else(|| is_idempotent_method(&request.method)) { Req::IDEMPOTENT } else { 0 }
                    | if exempt { Req::EXEMPT } else { 0 },
                qid,
                state: Phase::Queued,
                not_before: 0,
                sends: 0,
                rate_limit_retries: 0,
                error_retries: 0,
                rare: (sub_key.is_some() || !request.costs.is_empty() || own_deadline.is_some()).then(|| {
                    let estimates = request.costs.into_iter().map(|(n, c)| (n.into_boxed_str(), c)).collect();
                    Box::new(Rare { sub_key, costs: ReqCosts { estimates, charges: Vec::new() }, own_deadline })
                }),
            },
        );
        if !exempt {
            self.identities[iid].enqueued();
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
        let Some(&ReqState::InFlight(Flight { sent_at, global_at, left_at, .. })) = self.taken(id) else {
            return Ok(());
        };
        if left_at != sent_at || now <= sent_at {
            return Ok(());
        }
        let iid = self.iid(id);
        if let Some(old) = global_at {
            self.written_global(iid, old, now);
            self.identities[iid].send_log().restamp(old, now);
        }
        if let Some(ReqState::InFlight(Flight { global_at, left_at, .. })) = self.taken_mut(id) {
            *global_at = global_at.map(|_| now);
            *left_at = now;
        }
        Ok(())
    }

    /// A response arrived for the sent request `id`. Returns what the driver should do with it.
    ///
    /// Of the body hints ([`Response::body`]), an answer whose status the profile does not
    /// read ([`HeaderProfile::reads_body`](crate::HeaderProfile::reads_body)) gives only
    /// `usage` (what a request with costs was charged).
    ///
    /// # Errors
    /// [`Error::UnknownRequest`] or [`Error::InvalidState`] if `id` is not in flight.
    pub fn handle_response(
        &mut self,
        now: Nanos,
        id: RequestId,
        response: &Response<'_>,
    ) -> Result<Disposition, Error> {
        let usage_only;
        let response = if response.body.only_usage() || self.config.profile.reads_body(response.status) {
            response
        } else {
            let body = BodyHints { usage: response.body.usage.clone(), ..BodyHints::default() };
            usage_only = Response { body, ..response.clone() };
            &usage_only
        };
        let now = self.advance(now);
        let mut sent_at = self.take_in_flight(id)?;
        // Parsed into the answer before's record: its bucket id's text and dimensions reused.
        let mut info = std::mem::take(&mut self.answer);
        headers::parse_into(self.config.profile, response, &mut info);
        bound_answer(&self.config, &mut info);
        {
            let costs = self.requests[&id].costs();
            // A request that names no costs of its own (only the request count, where that is
            // a budget: `costs::counts_requests`) keeps the engine's view of every budget.
            let names_its_own = costs.iter().any(|(n, _)| &**n != costs::REQUESTS);
            if names_its_own {
                // The engine's request count sees the budgets the request's costs do not
                // cover: those it names have their own gates.
                let rest: Vec<Dimension> =
                    info.dimensions.iter().filter(|d| !costs.iter().any(|(n, _)| **n == *d.name)).cloned().collect();
                let requests_limit = info.limit;
                (info.limit, info.remaining, info.reset_after) = headers::binding_view(&rest);
                if !rest.is_empty() && info.limit.is_none() {
                    // The request count is a cost of its own (it refills continuously): the
                    // view over the rest still counts requests against the requests' limit.
                    info.limit = requests_limit;
                }
            }
        }
        let (answer_lead, arrived_by) = self.learn_trip(now, sent_at, info.server_time_ms);
        if let Some(at) = sent_at.global_at
            && sent_at.left_at == sent_at.sent_at
        {
            // Unwritten: it counted against the global window until now, and counts until a
            // window after it reached the server.
            let iid = self.iid(id);
            self.arrived_global(iid, at, arrived_by);
        }

        let sent_in = self.requests[&id].qid;
        {
            // An answer from before the last local reset may have been counted in the new
            // window, after its lowest report or before any (a request sent later may have
            // arrived first and reported a window without it): keep its slot until the next
            // reset.
            let b = &self.queue(sent_in).bucket;
            if sent_at.window_epoch < b.epoch() {
                self.add_ghost(sent_in, id, Some(now));
            }
        }
        // Learn the bucket first: the request may move to another queue.
        let (qid, stale_bucket) = self.learn_bucket(id, info.bucket.as_deref(), sent_at);
        if qid != sent_in {
            // Like the requests in flight that moved with it, it belongs to its new queue's
            // current window (window epochs are per queue).
            sent_at.window_epoch = self.queue(qid).bucket.epoch();
        }
        // An answer that refused the request for a rate limit is a 429 to the engine, whatever
        // its status: the profile recognises them (GitHub's 403 with `retry-after`, Shopify's
        // throttled 200; `RateLimitInfo::throttled`), and they wait and retry like a 429
        // instead of completing (or counting as an invalid 403).
        let status = if info.throttled { 429 } else { response.status };
        if (200..300).contains(&status) {
            self.edge.strikes = 0;
        }
        let lowered = self.settle_costs(id, Some((now, &info, response)), status == 429);
        if !stale_bucket {
            self.apply_headers(now, id, qid, sent_at, &info, status, answer_lead);
        }
        if self.config.shared.is_some() {
            let update = self.bucket_report(id, qid, &info);
            self.outputs.push_back(Output::Share(update));
        }

        let disposition = match status {
            429 => match costs::never_fits(self.queue(qid).rare.budgets(), self.requests[&id].costs()) {
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
                    let iid = self.iid(id);
                    self.mark_unauthorized(iid);
                }
                Disposition::Complete
            }
            403 => {
                self.record_invalid(now, id);
                Disposition::Complete
            }
            500..=599 if self.req(id).idempotent() => self.retry_after_error(now, id, false),
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
        self.answer = info;
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
                self.unwritten_left(now, id, flight);
                self.settle_costs(id, None, false);
                self.add_ghost(qid, id, None);
                self.req_mut(id).flags |= Req::MAYBE_REACHED;
                if self.req(id).idempotent() {
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
            Phase::Queued => self.unqueue(id),
            Phase::InFlight => {
                let flight = self.take_in_flight(id)?;
                self.unwritten_left(now, id, flight);
                // It may have reached the server: it keeps its slot until the window resets.
                self.settle_costs(id, None, false);
                self.add_ghost(qid, id, None);
                if self.config.shared.is_some() {
                    let update = self.release(id, true);
                    self.outputs.push_back(Output::Share(update));
                }
            }
            Phase::Reserving => self.abandon_reservation(id),
            Phase::Answered => return Err(Error::UnknownRequest(id)),
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
        if let Some(orphan) = self.store.orphans.remove(&id) {
            match answer {
                ReservationAnswer::Granted { .. } => {
                    self.store_answered(now, processes, orphan.asked_since);
                    let Names { identity, route, major, bucket } = orphan.names;
                    let (reached, window) = (false, None);
                    let update = SharedUpdate::Release { id, identity, route, major, bucket, reached, window };
                    self.outputs.push_back(Output::Share(update));
                }
                ReservationAnswer::Denied { .. } => self.store_answered(now, processes, orphan.asked_since),
                ReservationAnswer::Unavailable => self.store_unavailable(now, id, orphan.step),
            }
            self.pump(now);
            return Ok(());
        }
        let req = self.requests.get(&id).ok_or(Error::UnknownRequest(id))?;
        let (qid, iid) = (req.qid, self.iid_of(req));
        let (Phase::Reserving, Some(&ReqState::Reserving {
            since,
            step,
            window_seq,
            window_epoch,
            global_at,
            leased,
            reported,
            asked_since,
        })) = (req.state, self.taken(id))
        else {
            return Err(Error::InvalidState { id, expected: "reserving" });
        };
        let flight = Flight { sent_at: since, window_seq, window_epoch, global_at, left_at: since, alone: false, probe: false };
        self.reserving_total -= 1;
        self.set_state(id, ReqState::Answered);
        if answer != ReservationAnswer::Unavailable {
            // A driver's timeout is not a round trip: an outage must not widen the margin.
            self.store.learn_round_trip(now.saturating_sub(since));
            if let Some(mark) = reported {
                // The store counted what this identity sent without it.
                self.identities[iid].send_log().counted(mark);
            }
        }
        let lease = if let ReservationAnswer::Granted { leased, .. } = answer { leased } else { 0 };
        self.lease_answered(now, iid, id, lease);
        match answer {
            ReservationAnswer::Granted { store_time, .. } => {
                self.store_answered(now, processes, asked_since);
                if let Some(store_at) = store_time {
                    self.store.learn_delay(now, store_at);
                }
                self.grant(now, qid, id, flight);
            }
            ReservationAnswer::Denied { retry_after, scope, .. } => {
                self.store_answered(now, processes, asked_since);
                self.unspend_lease(now, iid, leased);
                self.unreserve(qid, id, flight);
                let wait = self.config.bound_wait(retry_after).max(MILLISECOND);
                self.hold(now, id, qid, scope, wait, leased);
            }
            ReservationAnswer::Unavailable => {
                // Back in line either way: fail-closed waits for the store, fail-open sends it
                // without a reservation as soon as this process's share of the limits allows
                // (at once if it does), like every other request during the outage.
                self.store_unavailable(now, id, step);
                if self.store.down {
                    self.store.outage_wait = self.store.outage_wait.max(now.saturating_sub(since));
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
        self.fail_queued(|_, _| true, FailReason::Closed);
        self.pump(now);
    }

    /// The next output. Call until it returns [`Output::WaitUntil`] or [`Output::Idle`].
    #[must_use]
    pub fn poll_output(&mut self) -> Output {
        debug_assert_eq!(self.taken.len(), self.in_flight_total + self.reserving_total, "a request's slot kept twice or lost");
        if let Some(out) = self.outputs.pop_front() {
            return out;
        }
        match self.next_timer() {
            Some(t) => Output::WaitUntil(t),
            None => Output::Idle,
        }
    }

    /// Predicts when `request` would be sent if it were enqueued at `now`, from what the
    /// limiter knows (an unknown bucket is assumed open). Callers use it to show an ETA or to
    /// shed load; [`Limiter::enqueue`] uses the same prediction for deadlines and `max_wait`.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for a malformed method or path, [`Error::Closed`] after
    /// [`Limiter::close`] (a closed limiter sends nothing: no time would be true).
    pub fn predict(&self, now: Nanos, request: &Request) -> Result<Prediction, Error> {
        if self.closed {
            return Err(Error::Closed);
        }
        let now = now.max(self.now);
        self.validate_request(request)?;
        let mut route_key = String::new();
        let (major, route_exempt) = routes::route_of(self.config.profile, request, &mut route_key);
        let exempt = request.global_exempt.unwrap_or(route_exempt);
        let sub_key = self.sub_key(request, &route_key);
        let Some(iid) = self.identities.find(&request.identity) else {
            return Ok(Prediction { send_at: now.max(self.host_hold()) });
        };
        let send_at = match self.find_queue(iid, &route_key, &major).ok() {
            Some(qid) => {
                let place = Place::last(self.queue(qid), &route_key, sub_key.as_deref(), exempt);
                if costs::counts_requests(self.config.profile) {
                    let mut with_requests = request.costs.clone();
                    with_requests.push((costs::REQUESTS.to_string(), 1));
                    self.predict_send(now, qid, &place, &with_requests)
                } else {
                    self.predict_send(now, qid, &place, &request.costs)
                }
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

    fn req(&self, id: RequestId) -> &Req {
        &self.requests[&id]
    }

    fn req_mut(&mut self, id: RequestId) -> &mut Req {
        self.requests.get_mut(&id).expect("live request")
    }

    /// The identity request `id` was enqueued under: its queue's.
    fn iid(&self, id: RequestId) -> Iid {
        self.iid_of(self.req(id))
    }

    fn iid_of(&self, r: &Req) -> Iid {
        self.queue(r.qid).key.identity
    }

    /// What request `id` took, when it is in its queue's `in_flight` list.
    fn taken(&self, id: RequestId) -> Option<&ReqState> {
        self.taken.get(&id)
    }

    fn taken_mut(&mut self, id: RequestId) -> Option<&mut ReqState> {
        self.taken.get_mut(&id)
    }

    /// Sets request `id`'s state: its phase, and what it took when it is in its queue's
    /// `in_flight` list (sent or reserving; `Answered` keeps its entry there until it leaves).
    fn set_state(&mut self, id: RequestId, state: ReqState) {
        self.req_mut(id).state = state.phase();
        match state {
            ReqState::Answered => {
                if let Some(taken) = self.taken.get_mut(&id) {
                    *taken = state;
                }
            }
            _ => {
                self.taken.insert(id, state);
            }
        }
    }

    fn mark_dirty(&mut self, qid: Qid) {
        self.dirty.push(qid);
    }

    /// Takes `id` out of the in-flight set, returning how it was sent.
    fn take_in_flight(&mut self, id: RequestId) -> Result<Flight, Error> {
        let req = self.requests.get(&id).ok_or(Error::UnknownRequest(id))?;
        let not_in_flight = Error::InvalidState { id, expected: "in flight" };
        if req.state != Phase::InFlight {
            return Err(not_in_flight);
        }
        let q = self.queue_mut(req.qid);
        if let Some(pos) = q.in_flight.iter().position(|&p| p == id) {
            q.in_flight.swap_remove(pos);
        }
        let Some(ReqState::InFlight(flight)) = self.taken.remove(&id) else {
            return Err(not_in_flight);
        };
        self.in_flight_total -= 1;
        let qid = self.req(id).qid;
        self.req_mut(id).state = Phase::Answered;
        self.contact_done(qid, flight.probe);
        Ok(flight)
    }

    /// Request `id`, sent as `flight`, leaves flight without an answer (cancelled, or failed
    /// after it may have reached the server): an unwritten request's global entry is counted
    /// from now, as if it had just left, rather than held for an answer that will not come.
    fn unwritten_left(&mut self, now: Nanos, id: RequestId, flight: Flight) {
        if let Some(at) = flight.global_at
            && flight.left_at == flight.sent_at
        {
            let iid = self.iid(id);
            self.written_global(iid, at, now);
        }
    }

    /// Forgets a request that reached its outcome.
    fn finish(&mut self, id: RequestId) {
        debug_assert!(!self.taken.contains_key(&id), "request {id} ended holding its slot");
        if let Some(req) = self.requests.remove(&id) {
            self.note_idle(req.qid);
        }
    }

    fn fail(&mut self, id: RequestId, reason: FailReason) {
        self.outputs.push_back(Output::Fail(id, reason));
        self.finish(id);
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
        let lead = self.trips.lead();
        q.bucket.refresh(now, lead, q.in_flight.len());
        for budget in q.rare.budgets_mut() {
            budget.roll(now);
        }
        // A global pause of this queue's identity or a host-wide hold: the queued requests that
        // cannot go before their deadline fail now, not when it passes.
        let (iid, checked) = (q.key.identity, q.checked_wait);
        let held = self.host_hold().max(self.identities[iid].paused_until());
        if held > now && held > checked {
            self.queue_mut(qid).checked_wait = held;
            self.fail_hopeless(now, qid);
            if self.queue(qid).pending.is_empty() {
                return;
            }
        }
        let q = self.queues[qid].as_mut().expect("live queue");
        if self.store.down && has_reserving(&q.in_flight, &self.taken) {
            // The store is down and this queue's probe is out: what follows it waits for its
            // answer rather than overtake it on local limits.
            return;
        }
        // First contact (see `contact`): the probes of unknown routes in flight on this
        // major parameter may have taken a slot of this learned bucket; a probe of this queue
        // waits for every learned bucket of its major parameter to have one.
        let charge = self.probe_charge(qid) as usize;
        let q = self.queues[qid].as_mut().expect("live queue");
        let mut bucket_wait = q.bucket.gate(q.in_flight.len() + charge, now, lead, share);
        if matches!(bucket_wait, Gate::Open) && q.in_flight.is_empty() && self.is_probe(qid) {
            bucket_wait = self.probe_gate(now, qid);
        }
        let q = self.queues[qid].as_mut().expect("live queue");
        let mut wait = match bucket_wait {
            Gate::Open => None,
            Gate::Until(t) => Some(t),
            Gate::UntilResponse => {
                return;
            }
        };
        let shared_until = q.rare.shared_until();
        if shared_until > now {
            wait = Some(wait.map_or(shared_until, |w| w.max(shared_until)));
        }
        if wait.is_none() {
            // Find the first request not held by its own backoff or a sub-limit.
            q.rare.expire(now);
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
                if let Some(reason) = costs::never_fits(q.rare.budgets(), r.costs()) {
                    self.unqueue(id);
                    self.fail(id, reason);
                    self.mark_dirty(qid);
                    return;
                }
                let ratios = &self.ratios;
                let margin = |name: &str| costs::margin_of(ratios, name);
                match costs::gate(now, q.rare.budgets(), r.costs().iter().map(|(n, c)| (&**n, *c)), margin) {
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
                    q.slot = Slot::ready(key);
                    self.ready.insert(key);
                    return;
                }
                None => wait = earliest,
            }
        }
        if let Some(t) = wait {
            let uid = q.uid;
            if q.wake_at() != Some(t) {
                q.set_wake_at(Some(t));
                self.timers.arm(t, Timer::Queue(qid, uid));
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
            let predicted = self.predict_behind(now, qid, &Place::of(r, position), &ahead, r.costs());
            if predicted > deadline {
                doomed.push((id, limit_reason(r.limit, r.own_deadline(), r.enqueued_at, deadline, Some(predicted), now)));
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
            if self.edge.until > now {
                break;
            }
            let host = match self.invalid_gate(now) {
                Gate::Open => self.store_gate(now),
                closed => closed,
            };
            match host {
                Gate::Open => {}
                Gate::Until(t) => {
                    self.arm_gate(t);
                    break;
                }
                Gate::UntilResponse => break,
            }
            let qid = key.2;
            let Slot::Ready { head: id, .. } = self.queue(qid).slot else {
                self.ready.remove(&key);
                continue;
            };
            if self.store.down && has_reserving(&self.queue(qid).in_flight, &self.taken) {
                // Became ready before the store went down; now it waits for the queue's probe
                // (the answer re-evaluates the queue).
                self.ready.remove(&key);
                self.queue_mut(qid).slot = Slot::None;
                continue;
            }
            let (exempt, iid) = {
                let r = &self.requests[&id];
                (r.exempt(), self.iid_of(r))
            };
            if !exempt && self.waits_for_lease(now, iid) {
                // The identity's lease request is out: its answer says how many may go (the
                // answer marks the identity ready again; no timer).
                self.block_on_identity(key, iid);
                continue;
            }
            let wait = if exempt { None } else { self.global_wait(now, iid) };
            if wait.is_none()
                && !exempt
                && self.identities[iid].first_blocked().is_some_and(|blocked| blocked < key)
            {
                // Someone ahead (higher priority, or older) waits for this identity's global
                // budget, which has room now (its wake-up was computed with a wider margin):
                // it gets the token, not this head.
                self.mark_identity_ready(iid);
                continue;
            }
            if let Some(t) = wait {
                self.block_on_identity(key, iid);
                if t != Nanos::MAX {
                    self.wake_identity_at(iid, t);
                }
                continue;
            }
            self.ready.remove(&key);
            let lead = self.trips.lead();
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
        if self.edge.until > now && !self.ready.is_empty() {
            self.arm_gate(self.edge.until);
        }
        sent
    }

    /// Moves the ready head `key.1` of queue `key.2` to its identity's `blocked` set, to wait
    /// for the identity's global budget.
    fn block_on_identity(&mut self, key: ReadyKey, iid: Iid) {
        self.ready.remove(&key);
        self.queue_mut(key.2).slot = Slot::blocked(key);
        self.identities[iid].block(key);
    }

    /// Applies an answer's bucket headers to the bucket of `qid` ([`Bucket::report`]), then
    /// what the bucket asks of the limiter: a ghost of the answered request, the sends still
    /// out for a window found to slide, a window length for the other queues of the hash.
    /// `answer_lead`: how much before the window end it reports the next request may go (see
    /// [`latency::Uplinks::lead`]).
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
        let report = self.queue_mut(qid).bucket.report(
            now,
            info,
            status,
            (flight.sent_at, flight.left_at),
            (flight.window_seq, flight.window_epoch),
            answer_lead,
            max_wait,
        );
        if report.unreported() {
            self.add_ghost(qid, id, Some(now));
        }
        if report.began_sliding() {
            // Seed the send log with what is still out there and this request.
            let q = self.queue(qid);
            let sends: Vec<Nanos> = q
                .in_flight
                .iter()
                .filter_map(|id| match self.taken.get(id) {
                    Some(ReqState::InFlight(Flight { sent_at, .. })) => Some(*sent_at),
                    _ => None,
                })
                .chain([flight.sent_at])
                .collect();
            self.queue_mut(qid).bucket.seed_sliding_log(sends);
        }
        if let (Some(period), BucketId::Hash(hash)) = (report.learned_period(), self.queue(qid).key.bucket())
            && (self.routes.hash_periods.len() < self.config.max_routes || self.routes.hash_periods.contains_key(&**hash))
            && self.routes.hash_periods.get(&**hash).is_none_or(|&known| known < period)
        {
            // A longer window for this hash: every queue of it (other major parameters) that
            // has not seen one of its own answered takes it, rather than an estimate that may
            // have been drawn from a window another queue's request opened.
            let hash = hash.clone();
            self.routes.hash_periods.insert(hash.to_string(), period);
            for q in self.queues.iter_mut().flatten() {
                if q.key.bucket() == BucketId::Hash(&hash) {
                    q.bucket.lengthen_period(period);
                }
            }
        }
    }

    /// Whether the entry `(t, timer)` still stands for a wake-up its owner wants, for every
    /// timer but the gates' (which [`Timers`] knows itself): the one rule for firing it and for
    /// reporting it as the next `WaitUntil`. Over the fields it reads, so that the heap can be
    /// asked while they are borrowed.
    fn timer_live<'a>(
        queues: &'a Queues,
        identities: &'a Identities,
        requests: &'a HashMap<RequestId, Req>,
        store: &'a Store,
    ) -> impl Fn(Nanos, Timer) -> bool + 'a {
        move |t, timer| match timer {
            Timer::Queue(qid, uid) => {
                queues.get(qid).and_then(Option::as_ref).is_some_and(|q| q.uid == uid && q.wake_at() == Some(t))
            }
            Timer::Identity(iid) => identities[iid].wake_at() == Some(t),
            // Armed just after the deadline: sending at it is allowed.
            Timer::Deadline(id) => requests
                .get(&id)
                .is_some_and(|r| r.state == Phase::Queued && r.deadline.map(|d| d.saturating_add(1)) == Some(t)),
            Timer::Gate => false, // the heap's own
            Timer::Recovery => store.recovery.is_some_and(|r| r.until == t),
        }
    }

    /// Fires the live timers due by `now`, in time order.
    fn fire_timers(&mut self, now: Nanos) {
        while let Some((t, timer)) =
            self.timers.pop_due(now, Self::timer_live(&self.queues, &self.identities, &self.requests, &self.store))
        {
            match timer {
                Timer::Queue(qid, _) => {
                    self.queue_mut(qid).set_wake_at(None);
                    self.dirty.push(qid);
                }
                Timer::Identity(iid) => {
                    self.identities[iid].clear_wake();
                    self.mark_identity_ready(iid);
                }
                Timer::Deadline(id) => {
                    let req = &self.requests[&id];
                    let Some(deadline) = req.deadline else { continue };
                    let (limit, enqueued_at, own_deadline) = (req.limit, req.enqueued_at, req.own_deadline());
                    // A deferral carries when it could go now: still queued past its budget
                    // (waiting on an answer, say), it is handed back with a fresh prediction.
                    let predicted = match limit {
                        Limit::Defer => Some(self.predict_queued(t, id)),
                        Limit::Deadline | Limit::MaxWait => None,
                    };
                    let reason = limit_reason(limit, own_deadline, enqueued_at, deadline, predicted, t);
                    self.unqueue(id);
                    self.fail(id, reason);
                }
                Timer::Gate => {}
                Timer::Recovery => self.end_recovery(),
            }
        }
    }

    /// The time of the next live timer, dropping the stale ones ahead of it.
    fn next_timer(&mut self) -> Option<Nanos> {
        self.timers.next_live(Self::timer_live(&self.queues, &self.identities, &self.requests, &self.store))
    }

    /// Fails `id` once time passes its deadline `d` (a send at `d` itself is still allowed).
    fn arm_deadline(&mut self, id: RequestId, d: Nanos) {
        self.timers.arm(d.saturating_add(1), Timer::Deadline(id));
    }

    /// Wakes the host-wide gates at `t`.
    fn arm_gate(&mut self, t: Nanos) {
        self.timers.arm_gate(t);
    }

    /// Wakes the identity's queues waiting on its global budget at `t`.
    fn wake_identity_at(&mut self, iid: Iid, t: Nanos) {
        if self.identities[iid].set_wake(t) {
            self.timers.arm(t, Timer::Identity(iid));
        }
    }

    /// The margin the global window is widened by at `now` ([`RoundTrips::margin_at`]).
    fn global_margin_at(&self, now: Nanos) -> Nanos {
        self.trips.margin_at(now, self.config.global_window)
    }

    /// How long an entry of an identity's global log counts at `now`: the global window and
    /// its margin.
    fn global_span(&self, now: Nanos) -> Nanos {
        self.config.global_window.saturating_add(self.global_margin_at(now))
    }

    /// Learns from the round trip of the request sent as `flight` and answered at `now` (the
    /// answer telling the server's clock, `server_time_ms`, or not). Returns how much before
    /// the window end it reports the next request may go (see [`Uplinks::lead`]), and the
    /// latest instant the request can have reached the server ([`Downlinks::arrived_by`]; the
    /// answer's own instant where the server does not tell its clock).
    fn learn_trip(&mut self, now: Nanos, flight: Flight, server_time_ms: Option<u64>) -> (Nanos, Nanos) {
        let (window, max) = (self.config.global_window, self.config.global_margin_max);
        self.trips.learn_trip(now, (flight.sent_at, flight.left_at), flight.alone, server_time_ms, window, max)
    }

    /// Moves one entry of the identity's global log from `old` to `new`, keeping the log in
    /// time order, where it is: an unwritten request's entry stays one (a reservation granted:
    /// it is sent now), a written one is counted from `new`.
    fn restamp_global(&mut self, iid: Iid, old: Nanos, new: Nanos) {
        self.identities[iid].restamp(old, new);
    }

    /// The transport reported that the request whose entry is at `old` left at `new`: from
    /// now on it is counted from then, with the learned margin ([`RoundTrips::margin_at`]),
    /// not held until its answer.
    fn written_global(&mut self, iid: Iid, old: Nanos, new: Nanos) {
        let ident = &mut self.identities[iid];
        ident.written(old, new);
        if ident.blocked_len() > 0 {
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
    fn arrived_global(&mut self, iid: Iid, at: Nanos, arrived_by: Nanos) {
        let ident = &mut self.identities[iid];
        if !ident.arrived(at, arrived_by.saturating_add(self.config.global_window)) {
            return; // a written request: it is counted from its report
        }
        if ident.blocked_len() > 0 {
            self.mark_identity_ready(iid);
        }
    }

    /// Removes one entry at `at` from the identity's global log.
    fn drop_global_entry(&mut self, iid: Iid, at: Nanos) {
        self.identities[iid].drop_entry(at);
    }

    /// Moves every queue waiting on an identity's global budget back to `ready`.
    fn mark_identity_ready(&mut self, iid: Iid) {
        let blocked = self.identities[iid].take_blocked();
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
    fn global_limit_of(&self, now: Nanos, iid: Iid) -> u32 {
        if self.config.global_limit > 0 {
            return self.config.global_limit;
        }
        self.identities[iid].learned_limit(now)
    }

    /// When the identity's global budget has room again, or `None` if it has room now;
    /// `Nanos::MAX` when only an answer to one of its unwritten requests can make room (the
    /// answer marks the identity ready).
    fn global_wait(&mut self, now: Nanos, iid: Iid) -> Option<Nanos> {
        if let Some(t) = self.outage_global_hold(now) {
            return Some(t);
        }
        let limit = share_of(self.global_limit_of(now, iid), self.outage_share()) as usize;
        let span = self.global_span(now);
        self.identities[iid].wait(now, span, limit)
    }

    /// A lower bound on when the identity's global budget lets one more request through, with
    /// `extra` requests of the same identity ahead of it.
    fn global_estimate(&self, now: Nanos, iid: Iid, extra: usize) -> Nanos {
        let ident = &self.identities[iid];
        let mut t = now.max(ident.paused_until());
        let limit = share_of(self.global_limit_of(now, iid), self.outage_share()) as usize;
        if limit == 0 {
            return t;
        }
        let span = self.global_span(now);
        // Every entry's end, in order; an unwritten request's taken a window and the margin
        // after its send (an estimate: it ends a window after its arrival, which its answer
        // will tell).
        let ends = ident.ends_after(now, span);
        let recent = ends.len();
        let ahead = recent + ident.queued().max(extra);
        if ahead >= limit {
            // The earliest the window can next open, then one more window per `limit` ahead.
            let first = if recent >= limit { ends[recent - limit] } else { now };
            let windows = (ahead / limit) as u64 - 1;
            t = t.max(first.saturating_add(span.saturating_mul(windows)));
        }
        t
    }

    /// Sends request `id` (the head of `qid`), or in shared mode reserves it at the store.
    fn send(&mut self, now: Nanos, qid: Qid, id: RequestId) {
        let flight = self.occupy(now, qid, id);
        if self.config.shared.is_some() && self.should_reserve(now) {
            self.reserve(now, id, flight);
            return;
        }
        if self.config.shared.is_some() && flight.global_at.is_some() {
            // Fail-open while the store is down: a send the store never sees.
            let (iid, keep) = (self.iid(id), self.report_horizon());
            self.identities[iid].send_log().unrecorded(now, keep);
        }
        self.sent(now, id, flight);
    }

    /// Request `id`, holding the slot `flight` took, is sent at `now` (`send`, or a
    /// reservation's `grant`): it is in flight from now, and the driver is told.
    // Inlined into both callers: a call took 30 instructions more per request life (callgrind).
    #[inline(always)]
    fn sent(&mut self, now: Nanos, id: RequestId, flight: Flight) {
        let qid = self.req(id).qid;
        let probe = self.is_probe(qid);
        self.contact_sent(qid, probe);
        let flight = Flight { sent_at: now, left_at: now, alone: self.in_flight_total == 0, probe, ..flight };
        let r = self.req_mut(id);
        r.state = Phase::InFlight;
        r.sends += 1;
        self.taken.insert(id, ReqState::InFlight(flight));
        self.in_flight_total += 1;
        self.outputs.push_back(Output::Send(id));
    }

    /// Takes the request's global token and bucket slot, and moves it from its queue's pending
    /// list to its in-flight list. Returns how it was taken.
    fn occupy(&mut self, now: Nanos, qid: Qid, id: RequestId) -> Flight {
        let (exempt, iid) = {
            let r = &self.requests[&id];
            (r.exempt(), self.iid_of(r))
        };
        let global_at = (!exempt && self.config.global_limit > 0).then(|| {
            // Unwritten until the transport reports it left (`handle_written`).
            self.identities[iid].log_unwritten(now);
            now
        });
        if !exempt && self.config.global_limit == 0 {
            // Only to learn a token-wide limit from a refusal (see `LearnedCap`).
            let span = self.global_span(now);
            self.identities[iid].log_send(now, span);
        }
        if !exempt {
            self.identities[iid].dequeued();
        }
        self.charge_costs(now, qid, id);
        let q = self.queue_mut(qid);
        if let Some(pos) = q.pending.iter().position(|&p| p == id) {
            q.pending.remove(pos);
        }
        // What it took is recorded when it is sent or reserved (`taken`).
        q.in_flight.push_back(id);
        q.last_active = now;
        let (window_seq, window_epoch) = q.bucket.take_slot(now);
        Flight { sent_at: now, window_seq, window_epoch, global_at, left_at: now, alone: false, probe: false }
    }

}

/// Every wait an answer sets (its reset, `Retry-After`, window, each budget's reset and refill
/// interval) within the one bound on waits from outside ([`Config::bound_wait`]), before
/// anything reads them: the holds, the predictions and the observations all see the clamped
/// waits.
fn bound_answer(config: &Config, info: &mut RateLimitInfo) {
    let bound = |wait: &mut Option<Nanos>| {
        if let Some(w) = wait {
            *w = config.bound_wait(*w);
        }
    };
    bound(&mut info.reset_after);
    bound(&mut info.retry_after);
    bound(&mut info.window);
    for d in &mut info.dimensions {
        bound(&mut d.reset_after);
        bound(&mut d.refill_interval);
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
    /// It was sent as a probe: the first request of a route whose bucket was unknown (see
    /// `contact`).
    probe: bool,
}


#[cfg(test)]
mod tests {
    /// A queued request costs its `Req`, its key in the request map and its id in its queue
    /// (the criterion `memory` group measures the whole; issue 16 bounds it at 128 B): what
    /// few requests have is boxed ([`super::Rare`]), what a sent one took is apart
    /// ([`super::Limiter::taken`]). A field more here shows first in this test.
    #[test]
    fn a_request_record_stays_within_80_bytes() {
        assert!(size_of::<super::Req>() <= 80, "Req is {} B", size_of::<super::Req>());
    }

    /// An idle learned bucket costs its `Queue`, its idle listing, its entry in the queue index
    /// and its share of its identity's send log (the criterion `memory` group measures the
    /// whole; issue 16 bounds it at 256 B): what few queues need is boxed ([`super::queues::Rare`],
    /// the bucket's own `rare`). A field more here shows first in this test.
    #[test]
    fn a_queue_stays_within_224_bytes() {
        let size = size_of::<super::queues::Queue>();
        assert!(size <= 224, "Queue is {size} B");
    }

    /// After `close` nothing will be sent, so no send time is true: `predict` says so as
    /// `enqueue` does, rather than answering "now".
    #[test]
    fn predict_after_close_is_the_closed_error() {
        let mut l = super::Limiter::new(crate::Config::default()).unwrap();
        let request = crate::Request::new("GET", "/users/@me");
        assert!(l.predict(0, &request).is_ok());
        l.close(0);
        assert_eq!(l.predict(0, &request).unwrap_err().code(), "limiter_closed");
    }
}
