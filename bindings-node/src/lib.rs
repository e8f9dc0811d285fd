//! Node binding of ratelane (napi-rs): the core surface described in `js/CONTRACT.md`.
//!
//! This crate converts and maps errors, nothing else; every rate-limit decision is the core's.
//! The Promise driver (`RateLimiter`, the error classes, events) is JavaScript, written once in
//! `js/driver.js` for this package and the wasm one, on top of what this crate exports:
//!
//! * [`Limiter`]: `ratelane::Limiter` as the positional surface of `js/CONTRACT.md` (times and
//!   ids are JS numbers, requests and answers as arguments, outputs as numbers, a rare output as
//!   the core's serde form in JSON text); the object API (`limiter.enqueue({ ... })`, outputs
//!   as objects) is `js/driver.js`'s, over this;
//! * [`SimServer`] and [`Simulation`]: `ratelane::sim`, requests positional likewise;
//! * `FAIL_CODES` and `ERROR_CODES`: the core's stable codes, so the driver can check at load
//!   time that it maps each to an error class;
//! * `ServerLimit` and `ServerStore`: the server-side limiters of `ratelane::server` (module
//!   `server`), under the classes of `js/server_objects.js`.
//!
//! Caller misuse throws a JS `Error` whose `code` is the core's stable code
//! ([`ratelane::Error::code`]), or `invalid_argument` for a JS value of the wrong type or range.

use std::collections::BTreeMap;

use napi::bindgen_prelude::{Either, Either3, Float64ArraySlice, Null, Object, Uint8Array, Unknown};
use napi::ValueType;
use napi_derive::napi;
use ratelane::sim::{Server, SimError};
use ratelane::{BodyHints, FailReason, HeaderProfile, Output, Request, Response};

mod server;

// napi registers its exports itself; re-exported so that a `cargo test` build, which has no
// registration, does not count the renderers as dead code.
pub use server::{FIXED_WINDOW_LUA, GCRA_LUA, LEAKY_BUCKET_LUA, MAX_REPLY_LEN, RedisScheduled, render_headers};

use ratelane_js_common::{self as common, RequestParts};

/// A JS error with a stable `code`.
type JsError = napi::Error<String>;
type Result<T> = std::result::Result<T, JsError>;

fn js_error(code: &str, message: impl Into<String>) -> JsError {
    napi::Error::new(code.to_string(), message.into())
}

fn invalid_argument(message: impl Into<String>) -> JsError {
    js_error("invalid_argument", message)
}

/// The core's misuse error, with its stable code and its `Display` text.
fn core_error(e: ratelane::Error) -> JsError {
    js_error(e.code(), e.to_string())
}

/// A non-negative integer (nanoseconds, ids, tickets) from a JS number ([`common::whole`]).
fn whole(value: f64, what: &str) -> Result<u64> {
    common::whole(value, what).map_err(invalid_argument)
}

/// A number argument that napi has not type-checked (so a wrong type maps to our code).
type NumArg<'a> = Either<f64, Unknown<'a>>;

fn whole_arg(value: NumArg<'_>, what: &str) -> Result<u64> {
    match value {
        Either::A(v) => whole(v, what),
        Either::B(_) => Err(invalid_argument(format!("{what} must be a number"))),
    }
}

/// A request id or a ticket ([`common::id`]): a whole number, never truncated into another's.
fn id_arg(value: NumArg<'_>, what: &str) -> Result<u64> {
    match value {
        Either::A(v) => common::id(v, what).map_err(invalid_argument),
        Either::B(_) => Err(invalid_argument(format!("{what} must be a number"))),
    }
}

fn to_js_number(value: u64) -> f64 {
    value as f64
}

/// A string argument that napi has not type-checked (so a wrong type maps to our code).
type StrArg<'a> = Either<String, Unknown<'a>>;

/// A boolean argument that napi has not type-checked.
type BoolArg<'a> = Either<bool, Unknown<'a>>;

/// An optional positional argument: `undefined` and `null` are `None`, a value of another type
/// `invalid_argument` naming `what`.
fn opt_arg<T>(value: Option<Either<T, Unknown<'_>>>, what: &str, kind: &str) -> Result<Option<T>> {
    match value {
        None => Ok(None),
        Some(Either::A(v)) => Ok(Some(v)),
        Some(Either::B(other)) if is_absent(&other) => Ok(None),
        Some(Either::B(_)) => Err(invalid_argument(format!("{what} must be {kind}"))),
    }
}

fn opt_number(value: Option<NumArg<'_>>, what: &str) -> Result<Option<f64>> {
    opt_arg(value, what, "a number")
}

fn opt_string(value: Option<StrArg<'_>>, what: &str) -> Result<Option<String>> {
    opt_arg(value, what, "a string")
}

fn opt_bool(value: Option<BoolArg<'_>>, what: &str) -> Result<Option<bool>> {
    opt_arg(value, what, "a boolean")
}

fn string_arg(value: StrArg<'_>, what: &str) -> Result<String> {
    match value {
        Either::A(s) => Ok(s),
        Either::B(_) => Err(invalid_argument(format!("{what} must be a string"))),
    }
}

fn status_arg(status: NumArg<'_>) -> Result<u16> {
    match status {
        Either::A(v) => common::status(v).map_err(invalid_argument),
        Either::B(_) => Err(invalid_argument("status must be a number")),
    }
}

/// Whether `value` is `undefined` or `null` (an absent optional argument).
fn is_absent(value: &Unknown<'_>) -> bool {
    matches!(value.get_type(), Ok(ValueType::Undefined | ValueType::Null))
}

/// A `RequestSpec` field by field, in the contract's order, as `requestParts` in `js/driver.js`
/// lays it out: `method`, `path`, `identity`, `major`, `deadlineNs`, `deferAfterNs`,
/// `priority`, `idempotent`, `globalExempt`, `subLimit`, `bodyKeys`, `costNames`,
/// `costAmounts`, `model` (`enqueueParts` takes them as arguments, the rarer calls as one
/// array).
type Parts<'a> = (
    StrArg<'a>,
    StrArg<'a>,
    Option<StrArg<'a>>,
    Option<StrArg<'a>>,
    Option<NumArg<'a>>,
    Option<NumArg<'a>>,
    Option<NumArg<'a>>,
    Option<BoolArg<'a>>,
    Option<BoolArg<'a>>,
    Option<StrArg<'a>>,
    Option<Vec<String>>,
    Option<Vec<String>>,
    Option<Vec<f64>>,
    Option<StrArg<'a>>,
);

/// A core [`Request`] from its parts.
fn request(parts: Parts<'_>) -> Result<Request> {
    let (method, path, identity, major, deadline_ns, defer_after_ns, priority, idempotent, global_exempt, sub_limit, body_keys, cost_names, cost_values, model) = parts;
    RequestParts {
        method: string_arg(method, "request.method")?,
        path: string_arg(path, "request.path")?,
        identity: opt_string(identity, "request.identity")?,
        major: opt_string(major, "request.major")?,
        deadline_ns: opt_number(deadline_ns, "request.deadlineNs")?,
        defer_after_ns: opt_number(defer_after_ns, "request.deferAfterNs")?,
        priority: opt_number(priority, "request.priority")?,
        idempotent: opt_bool(idempotent, "request.idempotent")?,
        global_exempt: opt_bool(global_exempt, "request.globalExempt")?,
        sub_limit: opt_string(sub_limit, "request.subLimit")?,
        body_keys,
        cost_names,
        cost_values,
        model: opt_string(model, "request.model")?,
    }
    .request()
    .map_err(invalid_argument)
}

fn json_arg(value: Option<String>) -> String {
    value.unwrap_or_else(|| "{}".to_string())
}

// ------------------------------------------------------------------------------ Limiter

/// The sans-IO client-side engine: `ratelane::Limiter` one to one. After every input, drain
/// `pollOutput()` (or call `drain()`) until it returns `wait_until` or `idle`.
#[napi]
#[derive(Debug)]
pub struct Limiter {
    inner: ratelane::Limiter,
    /// An output `drainPacked` met but cannot carry, handed out first by the next poll.
    held: Option<Output>,
}

#[napi]
impl Limiter {
    /// A limiter from the core's JSON configuration (`{}` or omitted: Discord defaults).
    /// Throws `invalid_config`.
    #[napi(constructor)]
    pub fn new(config_json: Option<String>) -> Result<Self> {
        let config = ratelane::json::config_from_json(&json_arg(config_json)).map_err(core_error)?;
        let inner = ratelane::Limiter::new(config).map_err(core_error)?;
        Ok(Limiter { inner, held: None })
    }

    /// The transport failed for the sent request `id`: `'not_sent'` when it certainly did not
    /// reach the server, `'maybe_sent'` otherwise.
    #[napi(
        ts_args_type = "nowNs: number, id: number, failure: 'not_sent' | 'maybe_sent'",
        ts_return_type = "'complete' | 'retry' | 'failed'"
    )]
    pub fn handle_failure(&mut self, now_ns: NumArg<'_>, id: NumArg<'_>, failure: StrArg<'_>) -> Result<&'static str> {
        let now = whole_arg(now_ns, "nowNs")?;
        let id = id_arg(id, "id")?;
        let failure = common::failure(&string_arg(failure, "failure")?).map_err(invalid_argument)?;
        let disposition = self.inner.handle_failure(now, id, failure).map_err(core_error)?;
        Ok(common::disposition_name(disposition))
    }

    /// The transport wrote the sent request `id` to the network at `nowNs` (later than its
    /// `send` output): the global window counts it from then. Optional; a report for a
    /// request no longer in flight is ignored. Throws `unknown_request` for an id never issued.
    #[napi(ts_args_type = "nowNs: number, id: number")]
    pub fn handle_written(&mut self, now_ns: NumArg<'_>, id: NumArg<'_>) -> Result<()> {
        let now = whole_arg(now_ns, "nowNs")?;
        let id = id_arg(id, "id")?;
        self.inner.handle_written(now, id).map_err(core_error)
    }

    /// The caller gave up on `id` (queued or in flight). Throws `unknown_request`.
    #[napi(ts_args_type = "nowNs: number, id: number")]
    pub fn cancel(&mut self, now_ns: NumArg<'_>, id: NumArg<'_>) -> Result<()> {
        let now = whole_arg(now_ns, "nowNs")?;
        let id = id_arg(id, "id")?;
        self.inner.cancel(now, id).map_err(core_error)
    }

    /// Shared mode: requests waiting for their reservation's answer.
    #[napi(getter)]
    pub fn reserving(&self) -> u32 {
        saturate(self.inner.reserving())
    }

    /// Time passed. Harmless when called early or twice.
    #[napi(ts_args_type = "nowNs: number")]
    pub fn handle_timeout(&mut self, now_ns: NumArg<'_>) -> Result<()> {
        self.inner.handle_timeout(whole_arg(now_ns, "nowNs")?);
        Ok(())
    }

    /// Fails every queued request with `closed` and refuses new ones.
    #[napi(ts_args_type = "nowNs: number")]
    pub fn close(&mut self, now_ns: NumArg<'_>) -> Result<()> {
        self.inner.close(whole_arg(now_ns, "nowNs")?);
        Ok(())
    }

    /// `enqueue` with the `RequestSpec`'s fields as arguments, in the contract's order (costs as
    /// names and amounts): the positional surface the driver uses. Throws `invalid_request`,
    /// `limiter_closed`, or `invalid_argument` for a value of the wrong type or range.
    #[napi(ts_args_type = "nowNs: number, method: string, path: string, identity?: string | null, major?: string | null, deadlineNs?: number | null, deferAfterNs?: number | null, priority?: number | null, idempotent?: boolean | null, globalExempt?: boolean | null, subLimit?: string | null, bodyKeys?: string[] | null, costNames?: string[] | null, costAmounts?: number[] | null, model?: string | null")]
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue_parts(
        &mut self,
        now_ns: NumArg<'_>,
        method: StrArg<'_>,
        path: StrArg<'_>,
        identity: Option<StrArg<'_>>,
        major: Option<StrArg<'_>>,
        deadline_ns: Option<NumArg<'_>>,
        defer_after_ns: Option<NumArg<'_>>,
        priority: Option<NumArg<'_>>,
        idempotent: Option<BoolArg<'_>>,
        global_exempt: Option<BoolArg<'_>>,
        sub_limit: Option<StrArg<'_>>,
        body_keys: Option<Vec<String>>,
        cost_names: Option<Vec<String>>,
        cost_amounts: Option<Vec<f64>>,
        model: Option<StrArg<'_>>,
    ) -> Result<f64> {
        let now = whole_arg(now_ns, "nowNs")?;
        let request = request((
            method, path, identity, major, deadline_ns, defer_after_ns, priority, idempotent, global_exempt, sub_limit,
            body_keys, cost_names, cost_amounts, model,
        ))?;
        let id = self.inner.enqueue(now, request).map_err(core_error)?;
        Ok(to_js_number(id))
    }

    /// `handleResponse` with the `ResponseSpec`'s fields as arguments: the headers as one
    /// string, names and values on alternate lines (`""` for none), or as a flat list `[name,
    /// value, ...]` when a name or value holds a line break; the body hints' `cost` as its five
    /// numbers in the contract's order, `usage` as names and numbers. The positional surface
    /// the driver uses.
    #[napi(
        ts_args_type = "nowNs: number, id: number, status: number, headers: string | string[], wallClockMs?: number | null, retryAfter?: number | null, global?: boolean | null, cost?: Array<number | null> | null, errors?: string[] | null, usageNames?: string[] | null, usageValues?: number[] | null",
        ts_return_type = "'complete' | 'retry' | 'failed'"
    )]
    #[allow(clippy::too_many_arguments)]
    pub fn respond(
        &mut self,
        now_ns: NumArg<'_>,
        id: NumArg<'_>,
        status: NumArg<'_>,
        headers: Either3<String, Vec<String>, Unknown<'_>>,
        wall_clock_ms: Option<NumArg<'_>>,
        retry_after: Option<NumArg<'_>>,
        global: Option<BoolArg<'_>>,
        cost: Option<Vec<Option<f64>>>,
        errors: Option<Vec<String>>,
        usage_names: Option<Vec<String>>,
        usage_values: Option<Vec<f64>>,
    ) -> Result<&'static str> {
        let retry_after = opt_number(retry_after, "response.body.retryAfter")?;
        let global = opt_bool(global, "response.body.global")?;
        let body = common::body(retry_after, global, cost.as_deref(), errors, usage_names, usage_values)
            .map_err(invalid_argument)?;
        self.answer(now_ns, id, status, &headers, wall_clock_ms, body)
    }

    /// `respond` and `respondBody` alike, once the body's hints are read: the other arguments
    /// checked and converted, then `handle_response`.
    fn answer(
        &mut self,
        now_ns: NumArg<'_>,
        id: NumArg<'_>,
        status: NumArg<'_>,
        headers: &Either3<String, Vec<String>, Unknown<'_>>,
        wall_clock_ms: Option<NumArg<'_>>,
        body: BodyHints,
    ) -> Result<&'static str> {
        let now = whole_arg(now_ns, "nowNs")?;
        let id = id_arg(id, "id")?;
        let status = status_arg(status)?;
        let pairs = match headers {
            Either3::A(lines) => common::header_lines(lines),
            Either3::B(list) => common::header_list(list),
            Either3::C(_) => None,
        }
        .ok_or_else(|| invalid_argument("headers must hold names and values on alternate lines"))?;
        let wall_clock_ms = opt_number(wall_clock_ms, "response.wallClockMs")?
            .map(|ms| whole(ms, "response.wallClockMs"))
            .transpose()?;
        let response = Response { status, headers: &pairs, body, wall_clock_ms };
        let disposition = self.inner.handle_response(now, id, &response).map_err(core_error)?;
        Ok(common::disposition_name(disposition))
    }

    /// `handleResponse` with the answer's body as it came, JSON text or bytes: the core reads
    /// it (`ratelane::BodyHints::from_json`, the one body reader of every driver). Headers as
    /// `respond` takes them.
    #[napi(
        ts_args_type = "nowNs: number, id: number, status: number, headers: string | string[], wallClockMs: number | null | undefined, body: string | Uint8Array",
        ts_return_type = "'complete' | 'retry' | 'failed'"
    )]
    pub fn respond_body(
        &mut self,
        now_ns: NumArg<'_>,
        id: NumArg<'_>,
        status: NumArg<'_>,
        headers: Either3<String, Vec<String>, Unknown<'_>>,
        wall_clock_ms: Option<NumArg<'_>>,
        body: Either3<String, Uint8Array, Unknown<'_>>,
    ) -> Result<&'static str> {
        let body = match &body {
            Either3::A(text) => BodyHints::from_json(text.as_bytes()),
            Either3::B(bytes) => BodyHints::from_json(bytes),
            Either3::C(_) => return Err(invalid_argument("response.bodyText must be a string or a Uint8Array")),
        };
        self.answer(now_ns, id, status, &headers, wall_clock_ms, body)
    }

    /// `handleReservation` with the `ReservationAnswer`'s fields as arguments: the positional
    /// surface the driver uses.
    #[napi(ts_args_type = "nowNs: number, id: number, answer: 'granted' | 'denied' | 'unavailable', processes?: number | null, leased?: number | null, storeTimeUs?: number | null, retryAfterNs?: number | null, scope?: string | null")]
    #[allow(clippy::too_many_arguments)]
    pub fn answer_reservation(
        &mut self,
        now_ns: NumArg<'_>,
        id: NumArg<'_>,
        answer: StrArg<'_>,
        processes: Option<NumArg<'_>>,
        leased: Option<NumArg<'_>>,
        store_time_us: Option<NumArg<'_>>,
        retry_after_ns: Option<NumArg<'_>>,
        scope: Option<StrArg<'_>>,
    ) -> Result<()> {
        let now = whole_arg(now_ns, "nowNs")?;
        let id = id_arg(id, "id")?;
        let answer = common::answer(
            &string_arg(answer, "answer.answer")?,
            opt_number(processes, "answer.processes")?,
            opt_number(leased, "answer.leased")?,
            opt_number(store_time_us, "answer.storeTimeUs")?,
            opt_number(retry_after_ns, "answer.retryAfterNs")?,
            opt_string(scope, "answer.scope")?.as_deref(),
        )
        .map_err(invalid_argument)?;
        self.inner.handle_reservation(now, id, answer).map_err(core_error)
    }

    /// `drain()` as numbers, two per output: `[kind, value, ...]` with kind 0 `send` (value:
    /// the id), 1 `wait_until` (its time), 2 `idle` (0), or 3: the next output is held, take it
    /// with `takeHeld()` (or `drain()` / `pollOutput()` start with it) and drain again. Ends
    /// with a 1, 2 or 3 pair, or after the first pair with `one` (`pollOutput`). No object is built.
    #[napi(ts_args_type = "one?: boolean | null", ts_return_type = "number[]")]
    pub fn drain_packed(&mut self, one: Option<bool>) -> Vec<f64> {
        common::drain_packed(one == Some(true), &mut self.held, || self.inner.poll_output())
    }

    /// `drainPacked` written into `buf` instead of a new list: returns how many numbers it
    /// wrote. When `buf` fills before a pair of kind 1, 2 or 3 the last pair is a `send`:
    /// call again. The driver's drain: an array built by N-API element by element cost more
    /// than the engine's work on an answer (`BENCHMARKS.md`, "Node package").
    #[napi(ts_args_type = "buf: Float64Array, one?: boolean | null")]
    #[allow(unsafe_code)]
    pub fn drain_into(&mut self, mut buf: Float64ArraySlice<'_>, one: Option<bool>) -> Result<u32> {
        // SAFETY: the slice is the typed array's own memory, borrowed for this call only. No
        // JavaScript runs while the call lasts (the thread is in it), so nothing else reads or
        // writes the array meanwhile; napi-rs marks the access `unsafe` for that reason alone.
        let out = unsafe { buf.as_mut() };
        if out.len() < 2 {
            return Err(invalid_argument(format!("buf must hold at least 2 numbers, got {}", out.len())));
        }
        Ok(saturate(common::fill(out, one == Some(true), &mut self.held, || self.inner.poll_output())))
    }

    /// The output `drainPacked` held, as JSON text: `{"output": <the core's serde form>,
    /// "message": <a failure's text>}`; `null` when none is held.
    #[napi]
    pub fn take_held(&mut self) -> Option<String> {
        self.held.take().map(|output| common::held_json(&output))
    }

    /// When the request (`parts`: the `RequestSpec` fields in one array, in `enqueueParts`'s
    /// order) would be sent if it were enqueued at `nowNs` (ns). Throws `invalid_request`.
    #[napi(ts_args_type = "nowNs: number, parts: RequestParts")]
    pub fn predict_parts(
        &self,
        now_ns: NumArg<'_>,
        parts: Parts<'_>,
    ) -> Result<f64> {
        let now = whole_arg(now_ns, "nowNs")?;
        let request = request(parts)?;
        let prediction = self.inner.predict(now, &request).map_err(core_error)?;
        Ok(to_js_number(prediction.send_at))
    }

    /// Requests queued and not yet sent.
    #[napi(getter)]
    pub fn queued(&self) -> u32 {
        saturate(self.inner.queued())
    }

    /// Requests sent and not yet answered.
    #[napi(getter)]
    pub fn in_flight(&self) -> u32 {
        saturate(self.inner.in_flight())
    }

    /// The invalid-request budget used at `nowNs`: the 401/403/non-shared 429 answers counted
    /// within the window (`Limiter::invalid_requests`). A read: changes nothing.
    #[napi(ts_args_type = "nowNs: number")]
    pub fn invalid_requests(&self, now_ns: NumArg<'_>) -> Result<u32> {
        Ok(self.inner.invalid_requests(whole_arg(now_ns, "nowNs")?))
    }

    /// Buckets (queues) held in memory.
    #[napi(getter)]
    pub fn buckets(&self) -> u32 {
        saturate(self.inner.buckets())
    }

    /// Whether `close` was called.
    #[napi(getter)]
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Whether the profile reads the body of an answer with this status: pass its hints
    /// (`response.body`) then (`HeaderProfile::reads_body`: Discord's 429 JSON, GitHub's 403s,
    /// Shopify's and Auto's every answer). Throws `invalid_argument` for a status the core
    /// does not take (`ratelane::Response::status_of`: an integer in 100..=999), so that the
    /// driver checks `send`'s status with this one call.
    #[napi(ts_args_type = "status: number")]
    pub fn reads_body(&self, status: NumArg<'_>) -> Result<bool> {
        let status = status_arg(status)?;
        Ok(self.inner.config().profile.reads_body(status))
    }

    /// The configuration in the core's JSON form (every key).
    #[napi]
    pub fn config_json(&self) -> String {
        ratelane::json::config_to_json(self.inner.config())
    }

    /// What the limiter learned, as the core's snapshot JSON text (format
    /// `ratelane.snapshot`): `wallClockMs` is the wall clock at `nowNs` (`Date.now()`). A getter.
    #[napi(ts_args_type = "nowNs: number, wallClockMs: number")]
    pub fn snapshot(&self, now_ns: NumArg<'_>, wall_clock_ms: NumArg<'_>) -> Result<String> {
        let now = whole_arg(now_ns, "nowNs")?;
        let wall = whole_arg(wall_clock_ms, "wallClockMs")?;
        Ok(self.inner.snapshot(now, wall).to_json())
    }

    /// Restores a snapshot's JSON text (an input: drain afterwards). Throws
    /// `snapshot_foreign`, `snapshot_version`, `snapshot_malformed`, `limiter_busy`,
    /// `limiter_closed`, or `invalid_argument` when `snapshot` is not a string.
    #[napi(ts_args_type = "nowNs: number, wallClockMs: number, snapshot: string")]
    pub fn restore(&mut self, now_ns: NumArg<'_>, wall_clock_ms: NumArg<'_>, snapshot: Either<String, Unknown<'_>>) -> Result<()> {
        let now = whole_arg(now_ns, "nowNs")?;
        let wall = whole_arg(wall_clock_ms, "wallClockMs")?;
        let Either::A(text) = snapshot else {
            return Err(invalid_argument("snapshot must be the JSON text snapshot() returned"));
        };
        ratelane::snapshot::Snapshot::from_json(&text)
            .and_then(|s| self.inner.restore(now, wall, &s))
            .map_err(core_error)
    }
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

// ------------------------------------------------------------------------------ simulator

/// A response of the simulated Discord server.
#[napi(object, object_from_js = false)]
#[derive(Debug)]
pub struct SimResponse {
    pub status: u32,
    #[napi(ts_type = "Array<[string, string]>")]
    pub headers: Vec<Vec<String>>,
    pub body: SimBody,
    pub body_text: String,
}

/// What a driver would parse from a simulated body: a 429's `retry_after` and `global`, and
/// an accepted answer's `usage` under a token budget (the server config's `tokens`).
#[napi(object, object_from_js = false)]
#[derive(Debug)]
pub struct SimBody {
    pub retry_after: Either<f64, Null>,
    pub global: Either<bool, Null>,
    /// What the request cost (`total_tokens`, or `input_tokens` and `output_tokens`); only set
    /// on accepted answers of a server with a token budget.
    pub usage: Option<BTreeMap<String, f64>>,
}

/// A model of Discord's REST rate limiting (`ratelane::sim::Server`).
#[napi]
#[derive(Debug)]
pub struct SimServer {
    inner: Server,
    next_tag: u64,
}

#[napi]
impl SimServer {
    /// A server from the simulator's JSON settings (`{}` or omitted: Discord's defaults).
    /// Throws `invalid_config`.
    #[napi(constructor)]
    pub fn new(server_config_json: Option<String>) -> Result<Self> {
        let config = ratelane::json::server_config_from_json(&json_arg(server_config_json))
            .map_err(core_error)?;
        Ok(SimServer { inner: Server::new(config), next_tag: 0 })
    }

    /// Answers the request (`parts`: the `RequestSpec` fields in one array, in
    /// `Limiter.enqueueParts`'s order) arriving at `nowNs`. `tokens`: what the request really
    /// costs of the server's token budget (`Server::handle_costing`; its client only estimates
    /// it); `null`: the config's `tokens.cost`.
    #[napi(ts_args_type = "nowNs: number, tokens: number | null | undefined, parts: RequestParts")]
    pub fn handle_parts(
        &mut self,
        now_ns: NumArg<'_>,
        tokens: Option<NumArg<'_>>,
        parts: Parts<'_>,
    ) -> Result<SimResponse> {
        let now = whole_arg(now_ns, "nowNs")?;
        let tokens = match opt_number(tokens, "tokens")? {
            Some(v) if v.fract() != 0.0 => {
                return Err(invalid_argument(format!("tokens must be a whole number, got {v}")));
            }
            v => v.map(|v| whole(v, "tokens")).transpose()?,
        };
        let request = request(parts)?;
        self.next_tag += 1;
        let r = self.inner.handle_costing(now, self.next_tag, &request, tokens);
        let usage = (!r.body.usage.is_empty()).then(|| r.body.usage.into_iter().collect());
        Ok(SimResponse {
            status: u32::from(r.status),
            headers: r.headers.into_iter().map(|(k, v)| vec![k, v]).collect(),
            body: SimBody {
                retry_after: r.body.retry_after.map_or(Either::B(Null), Either::A),
                global: r.body.global.map_or(Either::B(Null), Either::A),
                usage,
            },
            body_text: r.body_text,
        })
    }

    /// How many 429s the server has answered.
    #[napi(js_name = "count429")]
    pub fn count_429(&self) -> u32 {
        saturate(self.inner.count_429())
    }
}

/// A limiter driven against a [`SimServer`] in virtual time (`ratelane::sim::Simulation`).
#[napi]
#[derive(Debug)]
pub struct Simulation {
    inner: ratelane::sim::Simulation,
    tickets: usize,
}

#[napi]
impl Simulation {
    /// Limiter config, server config and network settings, each as the core's JSON text.
    /// Throws `invalid_config`.
    #[napi(constructor)]
    pub fn new(
        config_json: Option<String>,
        server_config_json: Option<String>,
        sim_config_json: Option<String>,
    ) -> Result<Self> {
        let config = ratelane::json::config_from_json(&json_arg(config_json)).map_err(core_error)?;
        let server = ratelane::json::server_config_from_json(&json_arg(server_config_json))
            .map_err(core_error)?;
        let sim = ratelane::json::sim_config_from_json(&json_arg(sim_config_json)).map_err(core_error)?;
        let limiter = ratelane::Limiter::new(config).map_err(core_error)?;
        Ok(Simulation {
            inner: ratelane::sim::Simulation::new(limiter, Server::new(server), sim),
            tickets: 0,
        })
    }

    /// Schedules the request (`parts`: the `RequestSpec` fields in one array, in
    /// `Limiter.enqueueParts`'s order) to be enqueued at `atNs`; returns its ticket.
    #[napi(ts_args_type = "atNs: number, parts: RequestParts")]
    pub fn enqueue_at_parts(
        &mut self,
        at_ns: NumArg<'_>,
        parts: Parts<'_>,
    ) -> Result<f64> {
        let at = whole_arg(at_ns, "atNs")?;
        let request = request(parts)?;
        let ticket = self.inner.enqueue_at(at, request);
        self.tickets = self.tickets.max(ticket.0 + 1);
        Ok(ticket.0 as f64)
    }

    /// Schedules a cancellation of `ticket` at `atNs`.
    #[napi(ts_args_type = "atNs: number, ticket: number")]
    pub fn cancel_at(&mut self, at_ns: NumArg<'_>, ticket: NumArg<'_>) -> Result<()> {
        let at = whole_arg(at_ns, "atNs")?;
        let ticket = id_arg(ticket, "ticket")? as usize;
        if ticket >= self.tickets {
            return Err(invalid_argument(format!("unknown ticket {ticket}")));
        }
        self.inner.cancel_at(at, ratelane::sim::Ticket(ticket));
        Ok(())
    }

    /// Schedules `close` at `atNs`.
    #[napi(ts_args_type = "atNs: number")]
    pub fn close_at(&mut self, at_ns: NumArg<'_>) -> Result<()> {
        self.inner.close_at(whole_arg(at_ns, "atNs")?);
        Ok(())
    }

    /// Runs until everything ended (or a limit); returns the report
    /// (`ratelane::json::report_to_json`). Throws `simulation_contract` when the limiter broke
    /// the driver contract.
    #[napi(ts_return_type = "SimReport")]
    pub fn run(&mut self) -> Result<serde_json::Value> {
        let report = self.inner.run().map_err(|e: SimError| js_error("simulation_contract", e.to_string()))?;
        serde_json::from_str(&ratelane::json::report_to_json(&report))
            .map_err(|e| js_error("simulation_contract", format!("report: {e}")))
    }
}

// ------------------------------------------------------------------------------ LLM bodies

/// What `readLlmRequest` read from an LLM API request body.
#[napi(object)]
#[derive(Debug)]
pub struct LlmRequest {
    /// The body's `model`, or null.
    #[napi(ts_type = "string | null")]
    pub model: Either<String, Null>,
    /// The estimated tokens: the prompt's characters / 4 (rounded up) plus the completion
    /// budget the body asks for (`ratelane::llm`).
    pub tokens: f64,
}

/// The model and estimated tokens of an OpenAI (chat completions, completions, responses,
/// embeddings) or Anthropic (messages) request body, text or bytes (`ratelane::llm::read_request`);
/// null for a body that is not such JSON. Throws `invalid_argument` for another type.
#[napi(ts_args_type = "body: string | Uint8Array", ts_return_type = "LlmRequest | null")]
pub fn read_llm_request(body: Either3<String, Uint8Array, Unknown<'_>>) -> Result<Option<LlmRequest>> {
    let read = |bytes: &[u8]| {
        ratelane::llm::read_request(bytes).map(|r| LlmRequest {
            model: r.model.map_or(Either::B(Null), Either::A),
            tokens: to_js_number(r.tokens),
        })
    };
    match &body {
        Either3::A(text) => Ok(read(text.as_bytes())),
        Either3::B(bytes) => Ok(read(bytes)),
        Either3::C(_) => Err(invalid_argument("body must be a string or a Uint8Array")),
    }
}

// ------------------------------------------------------------------------------ constants

/// `FAIL_CODES` and `ERROR_CODES` on the module (`ratelane::FailReason::ALL_CODES`,
/// `ratelane::Error::ALL_CODES`), `PROFILES` (`ratelane::HeaderProfile::NAMES`), `SETTINGS`,
/// the core's settings table (`ratelane::json::SETTINGS`: `[key, kind]` pairs), from which the
/// driver names its options, and `BODY_LIMITS` (how much of a body the driver reads).
#[napi(module_exports)]
pub fn module_exports(mut exports: Object) -> napi::Result<()> {
    exports.set("FAIL_CODES", FailReason::ALL_CODES.to_vec())?;
    exports.set("ERROR_CODES", ratelane::Error::ALL_CODES.to_vec())?;
    exports.set("PROFILES", HeaderProfile::NAMES.to_vec())?;
    let settings: Vec<Vec<&str>> = ratelane::json::SETTINGS.iter().map(|(key, kind)| vec![*key, kind.as_str()]).collect();
    exports.set("SETTINGS", settings)?;
    // How much of a body the driver reads: `BodyHints::MAX_BODY`, and `MAX_USAGE_BODY` for a
    // request with costs.
    exports.set("BODY_LIMITS", vec![BodyHints::MAX_BODY as u32, BodyHints::MAX_USAGE_BODY as u32])?;
    Ok(())
}
