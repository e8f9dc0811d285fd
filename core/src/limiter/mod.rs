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
//! [`Request::costs`] (`tokens: 1200`), an estimate. A queue's head goes only when every
//! dimension it names has room for its *charge*: the estimate times a margin learned from the
//! actual costs its answers report ([`BodyHints::usage`]). The answer gives the charge back
//! and settles the actual cost; a request whose estimate is above a dimension's reported limit
//! fails with [`FailReason::InsufficientCapacity`]; predictions ([`Limiter::predict`], the
//! deadline, `max_wait` and `defer_after` checks) count the charges queued ahead. The rules in
//! full (a window or continuous refill per dimension, the margin, settling, shared mode's
//! part, and what is guaranteed) are documented on the engine's cost budget type (`Budget` in
//! `core/src/limiter/costs.rs`), and with figures in `docs/llm-budgets.md`.

use std::cmp::Reverse;
use std::collections::{BTreeSet, VecDeque};

use crate::config::Config;
use crate::error::Error;
use crate::headers;
use crate::rng::SplitMix64;
use crate::shared::{OnUnavailable, Reservation, ReservationAnswer, SharedScope, SharedUpdate};
use crate::types::*;

// The layout (issue 43; `core/tests/module_graph.rs` keeps it): each sub-state is a type with
// private fields and the methods that own its rules, in a file of its own that knows nothing
// of `Limiter` and carries its own unit tests: a bucket's window (`bucket`), an identity's
// global window, lease and learned cap and the round trips (`global`), the store's health
// (`outage`), the cost budgets and margins (`costs`), the host-wide gates (`host`), the timer
// heap (`timers`), the time logs (`timelog`). What crosses sub-states is `Limiter`'s and lives
// here, in `shared` (shared mode) and in `snapshot`; no two of the other files name each other.
mod bucket;
mod contact;
mod costs;
mod global;
mod host;
mod ids;
mod latency;
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
use costs::{Blocked, Margins, Pack, Ratio, ReqCosts};
use global::{Identities, RoundTrips};
use ids::Ids;
use host::{EdgeBan, InvalidBudget};
use predict::{Limit, Place, effective_deadline, limit_reason};
use queues::{Listed, Queue, Queues, Slot};
use outage::{Store, share_of};
use shared::{Names, Orphan, has_reserving};
use routes::{BucketId, KeyRef, Major, MajorRef, QueueKey, Routes, is_idempotent_method, valid_method};
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
    /// Shared mode: requests that ended while their reservation was outstanding, with what a
    /// late grant must release at the store.
    orphans: HashMap<RequestId, Orphan>,
    /// First contact: the probes of unknown routes in flight, per major parameter.
    contacts: Contacts,
    /// No request goes out before its end (a Cloudflare-style ban).
    edge: EdgeBan,
    /// Per cost dimension: the margin estimates are charged at (see `costs`).
    margins: Margins,
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
            orphans: HashMap::default(),
            contacts: Contacts::default(),
            edge: EdgeBan::default(),
            margins: Margins::default(),
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
        let (major, route_exempt, route_key) = self.routes.key_of(self.config.profile, &request);
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
            self.edge.clear_strikes();
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
        if let Some(orphan) = self.orphans.remove(&id) {
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
                if self.store.is_down() {
                    self.store.waited(since, now);
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
        if self.store.is_down() && has_reserving(&q.in_flight, &self.taken) {
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
                let margins = &self.margins;
                let margin = |name: &str| margins.of(name);
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
            if self.edge.until() > now {
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
            let (exempt, iid) = {
                let r = &self.requests[&id];
                (r.exempt(), self.iid_of(r))
            };
            if self.store.is_down() && has_reserving(&self.queue(qid).in_flight, &self.taken) {
                // Became ready before the store went down; now it waits for the queue's probe
                // (the answer re-evaluates the queue). The next queue waiting for the
                // identity's budget goes in its place (see `mark_identity_ready`).
                self.ready.remove(&key);
                self.queue_mut(qid).slot = Slot::None;
                self.mark_identity_ready(iid);
                continue;
            }
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
            if !exempt {
                // The next queue waiting for the identity's budget, if any, tries it now.
                self.mark_identity_ready(iid);
            }
            // The queue's next head may go too: evaluate it right away.
            self.evaluate(now, qid);
        }
        if self.edge.until() > now && !self.ready.is_empty() {
            self.arm_gate(self.edge.until());
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
            && self.routes.lengthens_hash_period(hash, period, self.config.max_routes)
        {
            // A longer window for this hash: every queue of it (other major parameters) that
            // has not seen one of its own answered takes it, rather than an estimate that may
            // have been drawn from a window another queue's request opened.
            let hash = hash.clone();
            self.routes.lengthen_hash_period(&hash, period, self.config.max_routes);
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
            Timer::Recovery => store.recovery().is_some_and(|r| r.until() == t),
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

    /// Moves the first queue waiting on an identity's global budget (in priority order, then
    /// age) back to `ready`; dispatching it moves the next one when it goes (or when its
    /// place in `ready` is dropped unsent), so the queues go back one by one while the budget
    /// has room, and the first that finds none waits again with the identity's wake-up.
    /// Moving them all at once cost every answer at the global cap a pass over every waiting
    /// queue: 33 µs an answer with 400 channels waiting, 800 µs with 4,000.
    fn mark_identity_ready(&mut self, iid: Iid) {
        while let Some(key) = self.identities[iid].pop_blocked() {
            let qid = key.2;
            if let Some(Some(q)) = self.queues.get_mut(qid)
                && q.slot == Slot::blocked(key)
            {
                q.slot = Slot::ready(key);
                self.ready.insert(key);
                return;
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


// Routes: the queue a request waits in, from what was learned of its route (`routes`' module doc).
impl Limiter {
    /// The queue a request of `route_key` (major parameter `major`) of identity `iid` waits
    /// in now, if it exists; else the key of the queue to make for it.
    fn find_queue(&self, iid: Iid, route_key: &str, major: &str) -> Result<Qid, QueueKey> {
        let major = MajorRef::of(major);
        let found = |key: KeyRef<'_>| self.queues.find(&key);
        // Before its bucket is known a route waits in its own queue, or in its prior group's.
        let unlearned = self.routes.prior().unlearned_key(route_key);
        let route_queue = KeyRef { identity: iid, learned: false, bucket: unlearned, major };
        let Some(hash) = self.routes.bucket_of(route_key) else {
            return found(route_queue)
                .ok_or_else(|| QueueKey::new(iid, BucketId::Route(unlearned.into()), major.to_owned()));
        };
        // A route queue still waiting for its pioneer keeps taking the route's requests until
        // the pioneer's answer merges it into the bucket's queue: two queues never probe one
        // bucket at once. (Looked up only while such queues exist for this route.)
        if self.routes.has_route_queue(unlearned)
            && let Some(qid) = found(route_queue)
        {
            let q = self.queue(qid);
            if !q.pending.is_empty() || !q.in_flight.is_empty() {
                return Ok(qid);
            }
        }
        let key = KeyRef { identity: iid, learned: true, bucket: hash, major };
        if let Some(qid) = found(key) {
            return Ok(qid);
        }
        // A renamed route's requests keep going to the old bucket's queue while it lives.
        if let Some(old) = self.routes.renamed_from(route_key)
            && let Some(qid) = found(KeyRef { bucket: old, ..key })
        {
            return Ok(qid);
        }
        Err(QueueKey::new(iid, BucketId::Hash(hash.clone()), major.to_owned()))
    }

    /// The live queue of identity `iid`'s bucket `hash` for major parameter `major`.
    fn learned_queue(&self, iid: Iid, hash: &str, major: &Major) -> Option<Qid> {
        self.queues.find(&KeyRef { identity: iid, learned: true, bucket: hash, major: major.as_ref() })
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

    /// Checks `request`'s method, path, sub-limit class and costs.
    fn validate_request(&self, request: &Request) -> Result<(), Error> {
        // Checked as given: upper-casing (done where the route key is written) keeps a token a
        // token.
        let method = request.method.as_str();
        if !valid_method(method) {
            return Err(Error::InvalidRequest(format!(
                "method {:?} is not an HTTP method token",
                request.method
            )));
        }
        // A concrete path may be given as the whole URL (`https://discord.com/api/v10/...`,
        // as the drivers' docs show): the route drops the scheme and host.
        let absolute = request.major.is_none()
            && ["https://", "http://"].iter().any(|scheme| {
                // By bytes: a path that is not ASCII may have no char boundary there.
                let path = request.path.as_bytes();
                path.len() > scheme.len() && path[..scheme.len()].eq_ignore_ascii_case(scheme.as_bytes())
            });
        if !request.path.starts_with('/') && !absolute {
            // Named by its route, not its text: a webhook's or an interaction's path holds its
            // token, which no message may carry (`crate::route`, "Secrets").
            let route = crate::route::route_for(self.config.profile, &request.method, &request.path);
            return Err(Error::InvalidRequest(format!(
                "the path of route {:?} must start with '/' or be an http(s) URL (ids and tokens elided)",
                route.key
            )));
        }
        if request.path.len() > 8192 || request.identity.len() > 1024 {
            return Err(Error::InvalidRequest("path or identity is too long".into()));
        }
        if request.model.as_ref().is_some_and(|m| m.is_empty() || m.len() > 256) {
            return Err(Error::InvalidRequest("model must be 1 to 256 bytes (or unset)".into()));
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
        Ok(())
    }
}

// The queues: made, found, evaluated idle and forgotten (`queues`' module doc).
impl Limiter {
    /// The live queue of `key`, made if there is none.
    fn queue_for(&mut self, key: QueueKey) -> Qid {
        match self.queues.find(&key) {
            Some(qid) => qid,
            None => self.open_queue(key),
        }
    }

    /// Makes the queue of `key`, which no live queue has (what `find_queue` answered).
    fn open_queue(&mut self, key: QueueKey) -> Qid {
        let period = match key.bucket() {
            BucketId::Hash(hash) => self.routes.hash_period(hash),
            BucketId::Route(_) => None,
        };
        self.routes.queue_opened(&key);
        let mut budgets = Vec::new();
        if !self.restored_budgets.is_empty() {
            let (learned, name) = match key.bucket() {
                BucketId::Route(name) => (false, name),
                BucketId::Hash(name) => (true, name),
            };
            let (identity, major) = (self.identities[key.identity].name(), key.major.to_string());
            let mut i = 0;
            while i < self.restored_budgets.len() {
                let (k, _) = &self.restored_budgets[i];
                if k.0 == *identity && *k.1 == **name && k.2 == learned && k.3 == major {
                    budgets.push(self.restored_budgets.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
        }
        let mut rare = queues::Rare::default();
        if !budgets.is_empty() {
            *rare.budget_list() = budgets;
        }
        self.queues.insert(|uid| Queue::new(key, uid, Bucket::with_period(period), rare))
    }

    fn queue(&self, qid: Qid) -> &Queue {
        self.queues[qid].as_ref().expect("live queue")
    }

    fn queue_mut(&mut self, qid: Qid) -> &mut Queue {
        self.queues[qid].as_mut().expect("live queue")
    }

    /// Removes a queued request from its queue.
    fn unqueue(&mut self, id: RequestId) {
        let (qid, exempt, iid) = {
            let r = self.req(id);
            (r.qid, r.exempt(), self.iid_of(r))
        };
        let q = self.queue_mut(qid);
        if let Some(pos) = q.pending.iter().position(|&p| p == id) {
            q.pending.remove(pos);
        }
        if let Slot::Ready { head, .. } | Slot::Blocked { head, .. } = q.slot
            && head == id
        {
            self.clear_slot(qid);
        }
        if !exempt {
            self.identities[iid].dequeued();
        }
        self.mark_dirty(qid);
    }

    /// Notes that queue `qid` was active now, and lists it for eviction once it is empty.
    fn note_idle(&mut self, qid: Qid) {
        let now = self.now;
        let q = self.queue_mut(qid);
        q.last_active = now;
        if q.pending.is_empty() && q.in_flight.is_empty() && !q.idle_listed {
            q.idle_listed = true;
            let uid = q.uid;
            self.queues.list_idle(qid, uid);
        }
    }

    /// Takes queue `qid`'s head out of `ready` or its identity's `blocked`, wherever it sits.
    fn clear_slot(&mut self, qid: Qid) {
        let q = self.queues[qid].as_mut().expect("live queue");
        match std::mem::replace(&mut q.slot, Slot::None) {
            Slot::None => {}
            Slot::Ready { priority, head } => {
                let iid = q.key.identity;
                self.ready.remove(&(Reverse(priority), head, qid));
                // It may have been the one queue moved back from the identity's waiting ones:
                // the next goes back in its place (see `mark_identity_ready`).
                if self.identities[iid].blocked_len() > 0 {
                    self.mark_identity_ready(iid);
                }
            }
            Slot::Blocked { priority, head } => {
                let iid = q.key.identity;
                self.identities[iid].unblock(&(Reverse(priority), head, qid));
            }
        }
    }

    /// Forgets up to `budget` idle queues whose window has passed and that have been idle for
    /// `bucket_idle_ttl`. Amortised: called on every input, no sweeper.
    fn evict_idle(&mut self, now: Nanos, budget: usize) {
        // Candidates are in the order they went idle, so the head expires first: look at it
        // without taking it, and stop at the first one that is not due.
        for _ in 0..budget {
            let qid = match self.queues.next_idle() {
                None => return,
                Some(Listed::Stale) => {
                    self.queues.drop_idle();
                    continue;
                }
                Some(Listed::Live(qid)) => qid,
            };
            let q = self.queue_mut(qid);
            if !q.pending.is_empty() || !q.in_flight.is_empty() {
                q.idle_listed = false;
                self.queues.drop_idle();
                continue;
            }
            let sub_limits = q.rare.sub_limits().iter().map(|(_, t)| *t).max().unwrap_or(0);
            let quiet_since =
                q.bucket.reset_at().unwrap_or(0).max(q.rare.shared_until()).max(sub_limits).max(q.last_active);
            let expires = quiet_since.saturating_add(self.config.bucket_idle_ttl);
            if expires > now {
                return;
            }
            self.queues.drop_idle();
            self.clear_slot(qid);
            let q = self.queues.remove(qid);
            self.routes.queue_closed(&q.key);
        }
    }

    /// Marks for re-evaluation every queue of `identity` (every queue with `None`), so that a
    /// pause that just started fails at once the queued requests it makes hopeless.
    fn recheck_queues(&mut self, identity: Option<Iid>) {
        for (qid, q) in (0..).zip(self.queues.iter()) {
            if let Some(q) = q
                && !q.pending.is_empty()
                && identity.is_none_or(|iid| q.key.identity == iid)
            {
                self.dirty.push(qid);
            }
        }
    }
}

// First contact: a probe of an unknown route and the learned buckets of its major parameter
// (the rules are `contact`'s module doc).
impl Limiter {
    /// Whether queue `qid`'s next send is a probe: its route's bucket is unknown.
    fn is_probe(&self, qid: Qid) -> bool {
        let q = self.queue(qid);
        matches!(q.key.bucket(), BucketId::Route(_)) && !q.bucket.is_known()
    }

    fn contact_key_of(&self, qid: Qid) -> u64 {
        let key = &self.queue(qid).key;
        routes::contact_key(key.identity, &key.major)
    }

    /// The probes in flight on queue `qid`'s identity and major parameter; `qid` joins the
    /// queues evaluated again when that changes.
    fn probes_on(&mut self, qid: Qid) -> u32 {
        let key = self.contact_key_of(qid);
        self.contacts.probes_on(key, qid)
    }

    /// The charge the probes in flight put on queue `qid`, a learned bucket (0 for an unknown
    /// route's queue, or when no probe is out).
    fn probe_charge(&mut self, qid: Qid) -> u32 {
        if self.contacts.is_empty() || matches!(self.queue(qid).key.bucket(), BucketId::Route(_)) {
            return 0;
        }
        self.probes_on(qid)
    }

    /// The gate a probe of queue `qid` (an unknown route's, nothing in flight) passes beside
    /// its own: every learned bucket of its identity and major parameter has a free slot with
    /// the probes already in flight and this one counted in it. `Until` the latest reset of a
    /// spent one; `UntilResponse` while one waits for an answer (a learned bucket's pioneer on
    /// this major parameter, say).
    fn probe_gate(&mut self, now: Nanos, qid: Qid) -> Gate {
        let (iid, major) = {
            let key = &self.queue(qid).key;
            (key.identity, key.major.clone())
        };
        // A member of its major parameter's entry (made if there is none): another queue's
        // send there, a probe's above all, evaluates it again before it goes.
        let key = routes::contact_key(iid, &major);
        let probes = self.contacts.join(key, qid);
        let (lead, share) = (self.trips.lead(), self.outage_share());
        let mut until = None;
        let mut waits = false;
        let others: Vec<Qid> = self.routes.hashes().filter_map(|hash| self.learned_queue(iid, hash, &major)).collect();
        for other in others {
            // Brought up to now first, as its own evaluation would (a window over is rolled).
            let q = self.queue_mut(other);
            let in_flight = q.in_flight.len();
            q.bucket.refresh(now, lead, in_flight);
            // The bucket's own slots: a shared-scope limit learned below them is its resource's
            // (a channel's pins), which another route sharing the bucket does not count against.
            let gate = q.bucket.own_gate(in_flight + probes as usize, now, lead, share);
            match gate {
                Gate::Open => {}
                Gate::Until(t) => until = Some(until.map_or(t, |u: Nanos| u.max(t))),
                Gate::UntilResponse => waits = true,
            }
        }
        if waits {
            Gate::UntilResponse
        } else {
            until.map_or(Gate::Open, Gate::Until)
        }
    }

    /// Queue `qid` sends now (`probe`: an unknown route's first request): the probe counts in
    /// flight on its major parameter, and the other queues there are evaluated again (one that
    /// was ready may no longer have room).
    fn contact_sent(&mut self, qid: Qid, probe: bool) {
        if !probe && self.contacts.is_empty() {
            return;
        }
        let key = self.contact_key_of(qid);
        let Some(members) = self.contacts.sent(key, probe) else { return };
        self.touch(qid, members, key);
        if probe {
            // Every learned bucket of the major parameter now carries the probe's charge,
            // the ones already ready to send included.
            let (iid, major) = {
                let key = &self.queue(qid).key;
                (key.identity, key.major.clone())
            };
            let learned: Vec<Qid> =
                self.routes.hashes().filter_map(|hash| self.learned_queue(iid, hash, &major)).collect();
            for other in learned {
                self.clear_slot(other);
                self.mark_dirty(other);
            }
        }
    }

    /// A request of queue `qid` left flight (answered, failed, cancelled; `probe`: it was
    /// sent as a probe): its charge goes, and the queues of its major parameter are evaluated
    /// again. Call before the answer moves the request to another queue.
    fn contact_done(&mut self, qid: Qid, probe: bool) {
        if self.contacts.is_empty() {
            return;
        }
        let key = self.contact_key_of(qid);
        // With no probe left nothing charges the buckets any more: the entry goes, and a
        // queue that still waits registers again.
        let Some(members) = self.contacts.done(key, probe) else { return };
        self.touch(qid, members, key);
    }

    /// Evaluates `members` (but `qid`) again, taking them out of `ready` first; they stay the
    /// members of `key`'s entry, if it still exists.
    fn touch(&mut self, qid: Qid, members: Vec<Qid>, key: u64) {
        for &m in &members {
            if m != qid && self.queues.get(m).is_some_and(Option::is_some) {
                self.clear_slot(m);
                self.mark_dirty(m);
            }
        }
        self.contacts.rejoin(key, members);
    }
}

// What the limiter learns from answers: routes mapped to buckets and the queues that move
// with them, 429s by scope, costs settled, the invalid-request budget, and the latencies the
// margins come from (was `learning.rs`).
impl Limiter {
    /// Maps the request's route to `bucket` and moves its queue when the mapping is new or
    /// changed. Returns the queue the request now belongs to, and whether the answer's bucket
    /// is older news than the route's (its headers then describe another bucket than the
    /// queue's). `flight`: how the answered request was sent.
    fn learn_bucket(&mut self, id: RequestId, bucket: Option<&str>, flight: Flight) -> (Qid, bool) {
        let qid = self.req(id).qid;
        let Some(hash) = bucket else { return (qid, false) };
        if matches!(self.queue(qid).key.bucket(), BucketId::Hash(h) if **h == *hash) {
            return (qid, false); // the common case: nothing new, nothing to allocate
        }
        let (iid, route_key, major) = {
            let r = self.req(id);
            (self.iid_of(r), r.route_key.to_string(), self.queue(qid).key.major.clone())
        };
        let previous = self.routes.bucket_of(&route_key).cloned();
        // The route's own copy of the id when it is the same, so that its queues share one.
        let name = previous.clone().filter(|old| **old == *hash).unwrap_or_else(|| hash.into());
        let target_key = QueueKey::new(iid, BucketId::Hash(name.clone()), major);
        if previous.as_deref().is_some_and(|old| old != hash)
            && self.routes.taught_after(&route_key, flight.sent_at)
        {
            // A late answer to a request sent before (or with) the one that taught the route's
            // current bucket (the server changed it meanwhile): it describes the bucket it was
            // counted in, not the route's. The route keeps its mapping and the request its
            // queue (a retry goes where the route goes now); its bucket headers are not taken.
            return (qid, true);
        }
        self.routes.map(route_key.clone(), name, self.config.max_routes);
        if previous.as_deref() != Some(hash) {
            self.routes.taught(route_key.clone(), flight.sent_at);
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
        let from_route_queue = matches!(self.queue(qid).key.bucket(), BucketId::Route(_));
        if let Some(old) = previous.filter(|old| &**old != hash) {
            self.routes.rename(route_key.clone(), old);
        }
        let target = match self.queues.find(&target_key) {
            None if from_route_queue => {
                // Rename: the route's queue becomes the bucket's queue, state and all.
                let old_key = self.queues.rekey(qid, target_key);
                self.routes.queue_closed(&old_key);
                qid
            }
            _ => {
                let target = self.queue_for(target_key);
                if !from_route_queue {
                    self.forget_slot(qid, flight);
                    // Until the new bucket shows its own window, the old one's length is the
                    // best estimate there is (Discord keeps a route's limit when it renames its
                    // bucket): far better than one guessed from a 429 or a 5xx.
                    let old_period = self.queue(qid).bucket.period();
                    self.queue_mut(target).bucket.assume_period(old_period);
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
        let BucketId::Hash(hash) = self.queue(qid).key.bucket() else { return };
        let Some(period) = self.routes.hash_period(hash) else { return };
        self.queue_mut(qid).bucket.lengthen_period(period);
    }

    /// The first bucket learned for a route of a prior group is the group's: its routes not
    /// learned yet map to it too, so the group keeps one queue (see [`crate::prior`]).
    fn adopt_for_group(&mut self, route_key: &str, hash: &str) {
        let group = self.routes.prior().group(route_key);
        if group.is_empty() {
            return;
        }
        let adopt: Vec<String> =
            group.iter().filter(|r| *r != route_key && !self.routes.knows(r)).cloned().collect();
        let name: routes::Name = hash.into();
        for route in adopt {
            self.routes.remember(route.clone(), name.clone(), self.config.max_routes);
            self.outputs.push_back(Output::Observe(Observation::BucketLearned { route, bucket: hash.to_string() }));
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
        let moves = |r: &Req| route.is_none_or(|k| *r.route_key == *k);
        let src = self.queue_mut(from);
        let pending = src.pending.take_all();
        let in_flight = src.in_flight.take_all();
        let split = |ids: Vec<RequestId>| -> (Vec<RequestId>, Vec<RequestId>) {
            ids.into_iter().partition(|id| moves(&self.requests[id]))
        };
        let (moved_pending, kept_pending) = split(pending);
        let (moved_flight, kept_flight) = split(in_flight);
        let src = self.queue_mut(from);
        src.pending = kept_pending.into();
        src.in_flight = kept_flight.into();
        // Ghosts follow their route: they may have been counted by the bucket it moves to.
        let moved_ghosts = src.bucket.take_ghosts(route);
        self.queue_mut(to).bucket.add_ghosts(moved_ghosts);
        for &id in moved_pending.iter().chain(moved_flight.iter()) {
            self.req_mut(id).qid = to;
        }
        // Merge by enqueue order.
        let mut merged = self.queue_mut(to).pending.take_all();
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
            if !dst.bucket.is_known() {
                dst.bucket = src_bucket;
            }
        }
        // Requests in flight now belong to the destination's current window (window epochs
        // are per bucket, so the old numbers mean nothing there).
        let epoch = self.queue(to).bucket.epoch();
        let in_flight: Vec<RequestId> = self.queue(to).in_flight.iter().copied().collect();
        for id in in_flight {
            if let Some(ReqState::InFlight(Flight { window_epoch, .. }) | ReqState::Reserving { window_epoch, .. }) =
                self.taken.get_mut(&id)
            {
                *window_epoch = epoch;
            }
        }
        self.mark_dirty(from);
        self.mark_dirty(to);
        self.note_idle(from);
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
        // At least the shortest wait after a 429, at most the one bound on waits from outside.
        let clamp = |w: Nanos, c: &Config| c.bound_wait(w.max(c.min_rate_limit_wait));
        let wait = match scope {
            RateLimitScope::Edge => {
                let backoff = self.edge.strike(self.config.edge_backoff_base, self.config.edge_backoff_max);
                clamp(hint.unwrap_or(backoff), &self.config)
            }
            _ => clamp(hint.unwrap_or(self.config.backoff_base), &self.config),
        };
        let until = now.saturating_add(wait);
        let (iid, hold_key) = {
            let r = self.req(id);
            (self.iid_of(r), r.shared_route().to_string())
        };
        // Whether a sub-limit refusal holds its key (the request's class, or a route whose
        // requests met it twice; in shared mode, at once: the other processes cannot watch for
        // the second), shared with the other processes; else it holds the refused request alone
        // (see below).
        let shares_hold = scope != RateLimitScope::SubLimit
            || self.req(id).sub_key().is_some()
            || self.config.shared.is_some()
            || self.queue(qid).rare.suspected(&hold_key, now);
        match scope {
            RateLimitScope::Global => {
                let window = self.config.global_window;
                let span = self.global_span(now);
                // A refusal whose hold spans many global windows (GitHub's minute) tells of a
                // limit over a longer time than the sends of one window can measure.
                let learn = self.config.global_limit == 0 && wait <= window.saturating_mul(2);
                self.hold_identity(iid, until);
                if learn {
                    // What the API admitted of the sends within one global window before
                    // this refusal: those sends less the refusals among them.
                    self.identities[iid].learn_cap(now, span, window);
                }
            }
            RateLimitScope::Shared => {
                let q = self.queue_mut(qid);
                q.hold_shared(until);
                // The resource admitted what this window sent less what it refused: stay at
                // that many per window, for ten windows after the hold (then probe again).
                q.bucket.refuse_shared(flight.window_epoch, until);
            }
            RateLimitScope::Edge => self.hold_host(until),
            RateLimitScope::SubLimit if shares_hold => self.queue_mut(qid).hold_sub_limit(hold_key, until),
            RateLimitScope::SubLimit => {
                // A hidden sub-limit met by a request of no class (its body's keys not given):
                // it may limit only some of the route's requests (renames among the channel's
                // edits). This one waits (and is retried) on its own; the route's others go on
                // until one of them meets it too (`suspected`), which holds the route.
                self.queue_mut(qid).rare.suspect(hold_key, until);
                let r = self.req_mut(id);
                r.not_before = r.not_before.max(until);
            }
            // A queue whose limits are budgets (an LLM API's requests and tokens) and whose
            // bucket no answer described: the refusal is a budget's, which `settle_costs` has
            // read. The queue waits out the server's wait; its bucket learns no limit from it
            // (a limit of 1 would send one request per window from then on, for good: no
            // header of such an API ever reports the bucket).
            RateLimitScope::Bucket if self.queue(qid).bucket.limit() == 0 && !self.queue(qid).rare.budgets().is_empty() => {
                self.queue_mut(qid).hold_shared(until);
            }
            RateLimitScope::Bucket => {
                self.queue_mut(qid).bucket.hold(until);
            }
        }
        if scope != RateLimitScope::Shared {
            self.record_invalid(now, id);
        }
        if self.config.shared.is_some() && shares_hold {
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
            (r.qid, r.exempt(), self.iid_of(r))
        };
        // Pending lists are in enqueue (= id) order.
        let pos = self.queue(qid).pending.partition_point(|&p| p < id);
        self.queue_mut(qid).pending.insert(pos, id);
        self.req_mut(id).state = Phase::Queued;
        if !exempt {
            self.identities[iid].enqueued();
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
                let reason = if req.maybe_reached() {
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
        let backoff = backoff(self.config.backoff_base, n, self.config.backoff_max);
        let jitter = self.rng.next_u64() % (backoff / 2 + 1);
        let until = now.saturating_add(backoff / 2 + jitter);
        self.req_mut(id).not_before = until;
        self.requeue(id)
    }

    /// Charges the costs of request `id`, about to leave queue `qid`, to the queue's budgets
    /// (creating one per dimension it names). A request without costs in a queue that has
    /// budgets charges them nothing, so that its answer's report still counts.
    fn charge_costs(&mut self, now: Nanos, qid: Qid, id: RequestId) {
        if self.req(id).costs().is_empty() && self.queue(qid).rare.budgets().is_empty() {
            return;
        }
        let mut rare = self.req_mut(id).rare.take().unwrap_or_default();
        let cost = &mut rare.costs;
        let share = self.cost_share();
        let margins: Vec<f64> = cost.estimates.iter().map(|(name, _)| self.margin(name)).collect();
        let q = self.queues[qid].as_mut().expect("live queue");
        let mut charges = Vec::new();
        for ((name, estimate), margin) in cost.estimates.iter().zip(margins) {
            charges.push(costs::budget_mut(q.rare.budget_list(), name, share).charge(now, *estimate, margin));
        }
        for b in q.rare.budgets_mut().iter_mut().filter(|b| !cost.estimates.iter().any(|(n, _)| **n == *b.name())) {
            // Every request costs one request, whatever it names.
            let one = u64::from(b.name() == costs::REQUESTS);
            charges.push(b.charge(now, one, 1.0));
        }
        cost.charges = charges;
        self.req_mut(id).rare = Some(rare);
    }

    /// Request `id` left flight: its charges go back to its queue's budgets. `answer`, when it
    /// was answered: the time, the answer's reports (each budget takes its dimension's) and
    /// body (the actual costs: [`headers::settled_cost`]). `refund`: it was never counted
    /// (refused with a 429, or never sent).
    /// Returns whether a budget's limit was learned or lowered.
    fn settle_costs(&mut self, id: RequestId, answer: Option<(Nanos, &RateLimitInfo, &Response<'_>)>, refund: bool) -> bool {
        let max_wait = self.config.max_server_wait;
        let r = self.requests.get_mut(&id).expect("live request");
        let qid = r.qid;
        let Some(cost) = r.rare.as_mut().map(|r| &mut r.costs).filter(|c| !c.charges.is_empty()) else {
            return false;
        };
        let mut lowered = false;
        let charges = std::mem::take(&mut cost.charges);
        let share = self.cost_share();
        let q = self.queues[qid].as_mut().expect("live queue");
        for charge in &charges {
            // Made anew when its route moved to another queue meanwhile: that queue keeps the
            // budget now.
            let budget = costs::budget_mut(q.rare.budget_list(), &charge.name, share);
            let (report, actual, refill) = match answer {
                Some((_, info, response)) => {
                    let dimension = info.dimensions.iter().find(|d| *d.name == *charge.name);
                    let report = dimension.map(|d| (d.limit, d.remaining, d.reset_after.map(|ra| ra.min(max_wait))));
                    let refill = dimension.filter(|d| costs::refills(info.profile, d)).map(|d| costs::RefillReport {
                        interval: d.refill_interval,
                        // Anthropic's resets are times, read on this answer's clock: the
                        // driver's (to the ms), else the `Date` header's (whole seconds).
                        absolute: (info.profile == Some(HeaderProfile::Anthropic))
                            .then_some(if response.wall_clock_ms.is_some() { MILLISECOND } else { SECOND }),
                    });
                    (report, if refund { None } else { headers::settled_cost(&response.body, &charge.name) }, refill)
                }
                None => (None, None, None),
            };
            if let Some(actual) = actual {
                self.margins.learn(&charge.name, charge.estimate, actual);
            }
            let before = budget.limit();
            budget.settle(answer.map_or(self.now, |(now, _, _)| now), charge, report, actual, refund, refill);
            lowered |= budget.limit().is_some_and(|l| before.is_none_or(|b| l < b));
        }
        lowered
    }

    /// Fails the requests queued in `qid` whose estimates a limit it learned now rules out.
    fn fail_never_fitting(&mut self, qid: Qid) {
        let doomed: Vec<(RequestId, FailReason)> = self
            .queue(qid)
            .pending
            .iter()
            .filter(|id| !self.requests[*id].costs().is_empty())
            .filter_map(|id| costs::never_fits(self.queue(qid).rare.budgets(), self.requests[id].costs()).map(|reason| (*id, reason)))
            .collect();
        for (id, reason) in doomed {
            self.unqueue(id);
            self.fail(id, reason);
        }
    }

    /// Gives back the global token and bucket slot of a request that never left.
    fn refund(&mut self, qid: Qid, id: RequestId, flight: Flight) {
        let _ = self.settle_costs(id, None, true);
        let iid = self.iid(id);
        if let Some(at) = flight.global_at {
            self.drop_global_entry(iid, at);
            self.mark_identity_ready(iid);
        }
        self.give_back_slot(qid, flight);
    }

    /// Gives back the bucket slot `flight` took in queue `qid`, if it was taken in the
    /// bucket's current window.
    fn give_back_slot(&mut self, qid: Qid, flight: Flight) {
        self.queue_mut(qid).bucket.give_back(flight.sent_at, flight.window_epoch);
    }

    /// Counts request `id` (which left the in-flight set) against queue `qid`'s window until
    /// the window resets or a report counts it (see [`Ghost`]): the server may have counted
    /// it without the client knowing. `answered_at`: when its answer came back, `None` when
    /// it may still be on its way.
    fn add_ghost(&mut self, qid: Qid, id: RequestId, answered_at: Option<Nanos>) {
        let route = self.requests[&id].route_key.clone();
        self.queue_mut(qid).bucket.add_ghost(Ghost::new(route, answered_at));
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
        self.invalid.record(now.saturating_add(self.config.invalid_request_window));
        self.warn_invalid_budget();
    }

    /// Emits the invalid-request warning once the budget used reaches `invalid_request_warn_at`
    /// (once, until the count falls below half of it again).
    pub(crate) fn warn_invalid_budget(&mut self) {
        if let Some(count) = self.invalid.warning(self.config.invalid_request_warn_at) {
            self.outputs.push_back(Output::Observe(Observation::InvalidRequestWarning {
                count,
                limit: self.config.invalid_request_limit,
            }));
        }
    }

    fn expire_invalid(&mut self, now: Nanos) {
        self.invalid.expire(now, self.config.invalid_request_warn_at);
    }

    fn mark_unauthorized(&mut self, iid: Iid) {
        self.identities[iid].mark_unauthorized();
        self.fail_queued(|_, of| of == iid, FailReason::Unauthorized);
    }

    /// The invalid-request budget's gate: closed while the invalid responses in the window and
    /// the requests that may yet be (in flight or reserving) reach `invalid_request_stop_at`.
    fn invalid_gate(&mut self, now: Nanos) -> Gate {
        if self.config.invalid_request_limit == 0 {
            return Gate::Open;
        }
        self.expire_invalid(now);
        self.invalid.gate(self.in_flight_total + self.reserving_total, self.config.invalid_request_stop_at)
    }

    /// Fails every queued (or reserving: never sent either) request that `which` selects (from
    /// the request and its identity), in enqueue order.
    fn fail_queued(&mut self, which: impl Fn(&Req, Iid) -> bool, reason: FailReason) {
        let mut queued: Vec<RequestId> = self
            .requests
            .iter()
            .filter(|(_, r)| {
                matches!(r.state, Phase::Queued | Phase::Reserving) && which(r, self.iid_of(r))
            })
            .map(|(id, _)| *id)
            .collect();
        queued.sort_unstable();
        for id in queued {
            if self.req(id).state == Phase::Reserving {
                self.abandon_reservation(id);
            } else {
                self.unqueue(id);
            }
            self.fail(id, reason.clone());
        }
    }


    /// A hold of the whole host (an edge ban, or the store's for invalid requests) until
    /// `until`: the queued requests it makes hopeless fail at once.
    fn hold_host(&mut self, until: Nanos) {
        self.edge.hold(until);
        self.recheck_queues(None);
    }

    /// A global hold of identity `iid` until `until`: its queues wake then, and the queued
    /// requests it makes hopeless fail at once.
    fn hold_identity(&mut self, iid: Iid, until: Nanos) {
        self.identities[iid].pause(until);
        self.wake_identity_at(iid, until);
        self.recheck_queues(Some(iid));
    }
}

// Predictions: when a request is expected to be sent (`predict`'s module doc).
impl Limiter {
    /// When a request at `place` in queue `qid`, costing `costs`, is expected to be sent, the
    /// charges of the requests ahead of it counted.
    fn predict_send<N: AsRef<str>>(
        &self,
        now: Nanos,
        qid: Qid,
        place: &Place<'_>,
        costs: &[(N, u64)],
    ) -> Nanos {
        let ahead = self.charges_ahead(now, qid, place.position);
        self.predict_behind(now, qid, place, &ahead, costs)
    }

    /// [`Limiter::predict_send`] with the charges ahead already packed (`ahead`, see
    /// [`Limiter::charges_ahead`]).
    fn predict_behind<N: AsRef<str>>(
        &self,
        now: Nanos,
        qid: Qid,
        place: &Place<'_>,
        ahead: &[Option<Pack>],
        costs: &[(N, u64)],
    ) -> Nanos {
        let t = self.predict_position(now, qid, place).max(place.not_before);
        self.cost_wait(now, qid, ahead, costs).map_or(t, |c| t.max(c))
    }

    /// The predicted send time of the queued request `id` at its place in its queue, never
    /// before its own backoff ends.
    fn predict_queued(&self, now: Nanos, id: RequestId) -> Nanos {
        let r = &self.requests[&id];
        let q = self.queue(r.qid);
        let position = q.pending.iter().position(|&p| p == id).unwrap_or(q.pending.len());
        self.predict_send(now, r.qid, &Place::of(r, position), r.costs())
    }

    /// When the request at `place` in queue `qid` is expected to be sent, its costs aside.
    fn predict_position(&self, now: Nanos, qid: Qid, place: &Place<'_>) -> Nanos {
        let position = place.position;
        let q = self.queue(qid);
        let mut t = now.max(self.host_hold()).max(q.rare.shared_until());
        // A sub-limit holds this route (and major parameter), or this class of it, whatever
        // the bucket says.
        for &(ref k, until) in q.rare.sub_limits() {
            if place.held_by(k) {
                t = t.max(until);
            }
        }
        if self.config.invalid_request_limit > 0
            && let Some(first_end) = self.invalid.full_until(self.config.invalid_request_stop_at)
        {
            t = t.max(first_end);
        }
        let bucket = (self.trips.lead(), self.outage_share());
        if let Some(at) = q.bucket.send_time(now, position, q.in_flight.len(), bucket, self.config.global_window) {
            t = t.max(at);
        }
        if !place.exempt {
            t = t.max(self.global_estimate(now, q.key.identity, position));
        }
        t
    }

    /// The margin estimates in dimension `name` are charged at (see `costs`).
    fn margin(&self, name: &str) -> f64 {
        self.margins.of(name)
    }

    /// Queues what `costs` would be charged in `packs` (one per budget of queue `qid`, made on
    /// first use; see [`costs::Pack`]).
    fn add_charges<N: AsRef<str>>(&self, now: Nanos, qid: Qid, costs: &[(N, u64)], packs: &mut Vec<Option<Pack>>) {
        let budgets = self.queue(qid).rare.budgets();
        if budgets.is_empty() || costs.is_empty() {
            return;
        }
        if packs.len() != budgets.len() {
            *packs = budgets.iter().map(|b| b.pack(now)).collect();
        }
        for (b, pack) in budgets.iter().zip(packs.iter_mut()) {
            if let (Some((_, estimate)), Some(pack)) = (costs.iter().find(|(n, _)| n.as_ref() == b.name()), pack) {
                b.pack_add(pack, b.charge_of(*estimate, self.margin(b.name())));
            }
        }
    }

    /// The first `position` requests queued in `qid`, packed into its budgets.
    fn charges_ahead(&self, now: Nanos, qid: Qid, position: usize) -> Vec<Option<Pack>> {
        let mut packs = Vec::new();
        if !self.queue(qid).rare.budgets().is_empty() {
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
        let budgets = self.queue(qid).rare.budgets();
        let mut wait: Option<Nanos> = None;
        for (b, pack) in budgets.iter().zip(&packs) {
            if !own.iter().any(|(n, _)| n.as_ref() == b.name()) {
                continue;
            }
            if let Some(t) = pack.as_ref().and_then(|p| b.pack_time(now, p)) {
                wait = Some(wait.map_or(t, |w| w.max(t)));
            }
        }
        wait
    }
}

/// The pause before the `attempt`th retry (from 1): `base`, doubled for each attempt before
/// it (at most 30 times), at most `max`.
fn backoff(base: Nanos, attempt: u32, max: Nanos) -> Nanos {
    base.saturating_mul(1u64 << attempt.saturating_sub(1).min(30)).min(max)
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
