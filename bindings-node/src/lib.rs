//! Node binding of ratelane (napi-rs): the core surface described in `js/CONTRACT.md`.
//!
//! This crate converts and maps errors, nothing else; every rate-limit decision is the core's.
//! The Promise driver (`RateLimiter`, the error classes, events) is JavaScript, written once in
//! `js/driver.js` for this package and the wasm one, on top of what this crate exports:
//!
//! * [`Limiter`]: `ratelane::Limiter` one to one (times and ids are JS numbers, outputs plain
//!   objects);
//! * [`SimServer`] and [`Simulation`]: `ratelane::sim`;
//! * `FAIL_CODES` and `ERROR_CODES`: the core's stable codes, so the driver can check at load
//!   time that it maps each to an error class;
//! * `ServerLimit` and `ServerStore`: the server-side limiters of `ratelane::server` (module
//!   `server`), under the classes of `js/server_objects.js`.
//!
//! Caller misuse throws a JS `Error` whose `code` is the core's stable code
//! ([`ratelane::Error::code`]), or `invalid_argument` for a JS value of the wrong type or range.

use std::collections::BTreeMap;

use napi::bindgen_prelude::{Either, Null, Object, Unknown};
use napi::{JsValue, ValueType};
use napi_derive::napi;
use ratelane::sim::{Server, SimError};
use ratelane::{BodyHints, Disposition, FailReason, Failure, Observation, Output, Request, Response};

mod convert;
mod server;

// napi registers its exports itself; re-exported so that a `cargo test` build, which has no
// registration, does not count the renderers as dead code.
pub use server::{FIXED_WINDOW_LUA, GCRA_LUA, LEAKY_BUCKET_LUA, RedisScheduled, render_ietf_headers, render_x_ratelimit_headers};
mod shared;

use convert::{FailView, fail_view};

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

/// A napi conversion failure (wrong JS type) on `what`.
fn wrong_type(what: &str) -> impl FnOnce(napi::Error) -> JsError + '_ {
    move |e| invalid_argument(format!("{what}: {}", e.reason))
}

/// The largest integer a JS number holds exactly.
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// A non-negative integer (nanoseconds, ids, tickets) from a JS number: finite, `>= 0`,
/// `<= Number.MAX_SAFE_INTEGER`; a fractional part is dropped.
fn whole(value: f64, what: &str) -> Result<u64> {
    if value.is_finite() && (0.0..=MAX_SAFE).contains(&value) {
        Ok(value as u64)
    } else {
        Err(invalid_argument(format!(
            "{what} must be a finite number in 0..=Number.MAX_SAFE_INTEGER, got {value}"
        )))
    }
}

/// A number argument that napi has not type-checked (so a wrong type maps to our code).
type NumArg<'a> = Either<f64, Unknown<'a>>;

fn whole_arg(value: NumArg<'_>, what: &str) -> Result<u64> {
    match value {
        Either::A(v) => whole(v, what),
        Either::B(_) => Err(invalid_argument(format!("{what} must be a number"))),
    }
}

fn to_js_number(value: u64) -> f64 {
    value as f64
}

/// An optional property of a JS object: absent, `undefined` and `null` are `None`.
fn opt<T: napi::bindgen_prelude::FromNapiValue>(obj: &Object, key: &str, what: &str) -> Result<Option<T>> {
    let value: Option<Option<T>> = obj.get(key).map_err(wrong_type(what))?;
    Ok(value.flatten())
}

fn required<T: napi::bindgen_prelude::FromNapiValue>(obj: &Object, key: &str, what: &str) -> Result<T> {
    opt(obj, key, what)?.ok_or_else(|| invalid_argument(format!("{what} is required")))
}

/// A string argument that napi has not type-checked (so a wrong type maps to our code).
type StrArg<'a> = Either<String, Unknown<'a>>;

fn string_arg(value: StrArg<'_>, what: &str) -> Result<String> {
    match value {
        Either::A(s) => Ok(s),
        Either::B(_) => Err(invalid_argument(format!("{what} must be a string"))),
    }
}

/// A status code: an integer in 100..=999.
fn status_value(status: f64) -> Result<u16> {
    if status.fract() != 0.0 || !(100.0..=999.0).contains(&status) {
        return Err(invalid_argument(format!(
            "response.status must be an integer in 100..=999, got {status}"
        )));
    }
    Ok(status as u16)
}

fn status_arg(status: NumArg<'_>) -> Result<u16> {
    match status {
        Either::A(v) => status_value(v),
        Either::B(_) => Err(invalid_argument("status must be a number")),
    }
}

fn object_arg<'a>(value: Either<Object<'a>, Unknown<'a>>, what: &str) -> Result<Object<'a>> {
    match value {
        Either::A(o) => Ok(o),
        Either::B(_) => Err(invalid_argument(format!("{what} must be an object"))),
    }
}

/// A `RequestSpec` (see `js/CONTRACT.md`) as a core [`Request`].
fn request_from(obj: &Object) -> Result<Request> {
    let method: String = required(obj, "method", "request.method (a string)")?;
    let path: String = required(obj, "path", "request.path (a string)")?;
    let mut request = Request::new(method, path);
    request.major = opt(obj, "major", "request.major (a string)")?;
    if let Some(identity) = opt::<String>(obj, "identity", "request.identity (a string)")? {
        request.identity = identity;
    }
    if let Some(deadline) = opt::<f64>(obj, "deadlineNs", "request.deadlineNs (a number)")? {
        request.deadline = Some(whole(deadline, "request.deadlineNs")?);
    }
    if let Some(defer) = opt::<f64>(obj, "deferAfterNs", "request.deferAfterNs (a number)")? {
        request.defer_after = Some(whole(defer, "request.deferAfterNs")?);
    }
    if let Some(priority) = opt::<f64>(obj, "priority", "request.priority (a number)")? {
        if priority.fract() != 0.0 || !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&priority) {
            return Err(invalid_argument(format!(
                "request.priority must be an integer in the i32 range, got {priority}"
            )));
        }
        request.priority = priority as i32;
    }
    request.idempotent = opt(obj, "idempotent", "request.idempotent (a boolean)")?;
    request.global_exempt = opt(obj, "globalExempt", "request.globalExempt (a boolean)")?;
    request.sub_limit = opt(obj, "subLimit", "request.subLimit (a string)")?;
    if let Some(keys) = opt::<Vec<String>>(obj, "bodyKeys", "request.bodyKeys (an array of strings)")? {
        request.body_keys = keys;
    }
    request.costs = costs_from(obj)?;
    Ok(request)
}

/// How a JS value's type reads in a message.
fn type_name(value_type: ValueType) -> &'static str {
    match value_type {
        ValueType::Undefined => "undefined",
        ValueType::Null => "null",
        ValueType::Boolean => "a boolean",
        ValueType::Number => "a number",
        ValueType::String => "a string",
        ValueType::Symbol => "a symbol",
        ValueType::Function => "a function",
        ValueType::BigInt => "a bigint",
        _ => "an object",
    }
}

/// Whether `value` is `undefined` or `null` (an absent optional field).
fn is_absent(value: &Unknown<'_>) -> bool {
    matches!(value.get_type(), Ok(ValueType::Undefined | ValueType::Null))
}

/// `request.costs`: an object of dimension name to estimated cost, a whole number (`{ tokens:
/// 1200 }`), in the object's key order; absent, `undefined` or `null`: none. A wrong type, a
/// fraction, a negative or unsafe number is `invalid_argument`; the names themselves are the
/// core's to check (`invalid_request`). An entry that is `undefined` or `null` is left out.
fn costs_from(obj: &Object) -> Result<Vec<(String, u64)>> {
    const SHAPE: &str = "request.costs must be an object of dimension names to whole numbers (e.g. { tokens: 1200 })";
    let value: Option<Either<Object, Unknown>> = obj.get("costs").map_err(wrong_type("request.costs"))?;
    let costs = match value {
        None => return Ok(Vec::new()),
        Some(Either::A(costs)) => {
            if costs.is_array().map_err(wrong_type("request.costs"))? {
                return Err(invalid_argument(format!("{SHAPE}, got an array")));
            }
            costs
        }
        Some(Either::B(other)) if is_absent(&other) => return Ok(Vec::new()),
        Some(Either::B(other)) => {
            let got = other.get_type().map_or("an unknown value", type_name);
            return Err(invalid_argument(format!("{SHAPE}, got {got}")));
        }
    };
    let names = Object::keys(&costs).map_err(wrong_type("request.costs"))?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let value: Option<Either<f64, Unknown>> = costs.get(&name).map_err(wrong_type("request.costs"))?;
        let amount = match value {
            None => continue,
            Some(Either::A(v)) => v,
            Some(Either::B(other)) if is_absent(&other) => continue,
            Some(Either::B(other)) => {
                let got = other.get_type().map_or("an unknown value", type_name);
                return Err(invalid_argument(format!(
                    "request.costs.{name} must be a whole number >= 0 (the estimated cost), got {got}"
                )));
            }
        };
        if !(amount.is_finite() && amount.fract() == 0.0 && (0.0..=MAX_SAFE).contains(&amount)) {
            return Err(invalid_argument(format!(
                "request.costs.{name} must be a whole number in 0..=Number.MAX_SAFE_INTEGER (the estimated cost), got {amount}"
            )));
        }
        out.push((name, amount as u64));
    }
    Ok(out)
}

/// `response.body.usage`: the numeric fields of the body's `usage` object. It must be an
/// object; its values are what a server sent, so an entry that is not a number is left out
/// rather than refused, and the first `BodyHints::MAX_USAGE` numbers are passed as they are
/// (the core reads only finite ones >= 0).
fn usage_from(usage: &Object) -> Result<Vec<(String, f64)>> {
    let what = "response.body.usage (an object of numbers)";
    let mut out = Vec::new();
    for name in Object::keys(usage).map_err(wrong_type(what))? {
        if out.len() == BodyHints::MAX_USAGE {
            break;
        }
        let value: Option<Either<f64, Unknown>> = usage.get(&name).map_err(wrong_type(what))?;
        if let Some(Either::A(v)) = value {
            out.push((name, v));
        }
    }
    Ok(out)
}

fn request_arg(value: Either<Object<'_>, Unknown<'_>>) -> Result<Request> {
    request_from(&object_arg(value, "request")?)
}

/// A `ResponseSpec`'s parts, owned.
struct OwnedResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: BodyHints,
    wall_clock_ms: Option<u64>,
}

fn response_from(obj: &Object) -> Result<OwnedResponse> {
    let status = status_value(required(obj, "status", "response.status (a number)")?)?;
    let headers: Vec<Vec<String>> = opt(obj, "headers", "response.headers (an array of [name, value])")?
        .unwrap_or_default();
    let mut pairs = Vec::with_capacity(headers.len());
    for pair in headers {
        let [name, value]: [String; 2] = pair.try_into().map_err(|_| {
            invalid_argument("response.headers must be an array of [name, value] pairs")
        })?;
        pairs.push((name, value));
    }
    let mut body = BodyHints::default();
    if let Some(hints) = opt::<Object>(obj, "body", "response.body (an object)")? {
        body.retry_after = opt(&hints, "retryAfter", "response.body.retryAfter (a number)")?;
        body.global = opt(&hints, "global", "response.body.global (a boolean)")?;
        if let Some(cost) = opt::<Object>(&hints, "cost", "response.body.cost (an object)")? {
            let n = |key: &str| opt::<f64>(&cost, key, &format!("response.body.cost.{key} (a number)"));
            body.cost = Some(ratelane::QueryCost {
                requested: n("requested")?,
                actual: n("actual")?,
                maximum_available: n("maximumAvailable")?,
                currently_available: n("currentlyAvailable")?,
                restore_rate: n("restoreRate")?,
            });
        }
        body.errors = opt(&hints, "errors", "response.body.errors (an array of strings)")?.unwrap_or_default();
        let usage: Option<Either<Object, Unknown>> =
            hints.get("usage").map_err(wrong_type("response.body.usage (an object of numbers)"))?;
        match usage {
            None => {}
            Some(Either::A(usage)) => body.usage = usage_from(&usage)?,
            Some(Either::B(other)) if is_absent(&other) => {}
            Some(Either::B(other)) => {
                let got = other.get_type().map_or("an unknown value", type_name);
                return Err(invalid_argument(format!("response.body.usage must be an object of numbers, got {got}")));
            }
        }
    }
    let wall_clock_ms = opt::<f64>(obj, "wallClockMs", "response.wallClockMs (a number)")?
        .map(|ms| whole(ms, "response.wallClockMs"))
        .transpose()?;
    Ok(OwnedResponse { status, headers: pairs, body, wall_clock_ms })
}

fn disposition_name(d: Disposition) -> &'static str {
    match d {
        Disposition::Complete => "complete",
        Disposition::Retry => "retry",
        Disposition::Failed => "failed",
    }
}

/// One output as a plain JS object (`js/CONTRACT.md`, `Output`). Absent fields are not set.
#[napi(object, object_from_js = false)]
#[derive(Debug)]
pub struct JsOutput {
    #[napi(js_name = "type")]
    pub kind: String,
    pub id: Option<f64>,
    pub code: Option<String>,
    pub message: Option<String>,
    pub predicted_send_at_ns: Option<Either<f64, Null>>,
    pub predicted_wait_ns: Option<f64>,
    pub attempts: Option<u32>,
    pub scope: Option<String>,
    pub retry_after_ns: Option<f64>,
    pub route: Option<String>,
    pub bucket: Option<String>,
    pub count: Option<u32>,
    /// `invalid_request_warning`: the budget; `fail` with code `insufficient_capacity`: the
    /// dimension's limit.
    pub limit: Option<f64>,
    pub at_ns: Option<f64>,
    /// `reserve` (shared mode).
    pub reservation: Option<shared::JsReservation>,
    /// `share` (shared mode).
    pub update: Option<shared::JsSharedUpdate>,
    /// `store_unavailable` (shared mode); `fail` with code `deferred`: when to enqueue it again.
    pub retry_at_ns: Option<f64>,
    /// `fail` with code `insufficient_capacity`: the dimension (`tokens`...).
    pub dimension: Option<String>,
    /// `fail` with code `insufficient_capacity`: the request's estimated cost in it.
    pub cost: Option<f64>,
}

impl JsOutput {
    fn of(kind: &str) -> Self {
        JsOutput {
            kind: kind.to_string(),
            id: None,
            code: None,
            message: None,
            predicted_send_at_ns: None,
            predicted_wait_ns: None,
            attempts: None,
            scope: None,
            retry_after_ns: None,
            route: None,
            bucket: None,
            count: None,
            limit: None,
            at_ns: None,
            reservation: None,
            update: None,
            retry_at_ns: None,
            dimension: None,
            cost: None,
        }
    }
}

fn output_to_js(output: Output) -> JsOutput {
    match output {
        Output::Send(id) => JsOutput { id: Some(to_js_number(id)), ..JsOutput::of("send") },
        Output::Fail(id, reason) => fail_to_js(id, &reason),
        Output::Observe(observation) => observation_to_js(observation),
        Output::Reserve(reservation) => shared::reserve_to_js(reservation),
        Output::Share(update) => shared::share_to_js(update),
        Output::WaitUntil(t) => JsOutput { at_ns: Some(to_js_number(t)), ..JsOutput::of("wait_until") },
        Output::Idle => JsOutput::of("idle"),
    }
}

fn fail_to_js(id: u64, reason: &FailReason) -> JsOutput {
    let FailView { code, predicted_send_at, predicted_wait, retry_at, attempts, capacity } = fail_view(reason);
    let (dimension, cost, limit) = match capacity {
        Some((dimension, cost, limit)) => (Some(dimension), Some(to_js_number(cost)), Some(to_js_number(limit))),
        None => (None, None, None),
    };
    JsOutput {
        id: Some(to_js_number(id)),
        code: Some(code.to_string()),
        message: Some(reason.to_string()),
        predicted_send_at_ns: predicted_send_at
            .map(|t| t.map_or(Either::B(Null), |t| Either::A(to_js_number(t)))),
        predicted_wait_ns: predicted_wait.map(to_js_number),
        retry_at_ns: retry_at.map(to_js_number),
        attempts,
        dimension,
        cost,
        limit,
        ..JsOutput::of("fail")
    }
}

fn observation_to_js(observation: Observation) -> JsOutput {
    match observation {
        Observation::RateLimited { id, scope, retry_after } => JsOutput {
            id: Some(to_js_number(id)),
            scope: Some(scope.as_str().to_string()),
            retry_after_ns: Some(to_js_number(retry_after)),
            ..JsOutput::of("rate_limited")
        },
        Observation::BucketLearned { route, bucket } => JsOutput {
            route: Some(route),
            bucket: Some(bucket),
            ..JsOutput::of("bucket_learned")
        },
        Observation::InvalidRequestWarning { count, limit } => JsOutput {
            count: Some(count),
            limit: Some(f64::from(limit)),
            ..JsOutput::of("invalid_request_warning")
        },
        Observation::StoreUnavailable { id, retry_at } => shared::store_unavailable_to_js(id, retry_at),
        Observation::StoreRecovered => JsOutput::of("store_recovered"),
        // `Observation` is exhaustive: a new observation breaks this build until it is
        // converted here.
    }
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

    /// Queues a request and returns its id. Throws `invalid_request` or `limiter_closed`.
    #[napi(ts_args_type = "nowNs: number, request: RequestSpec")]
    pub fn enqueue(&mut self, now_ns: NumArg<'_>, request: Either<Object<'_>, Unknown<'_>>) -> Result<f64> {
        let now = whole_arg(now_ns, "nowNs")?;
        let request = request_arg(request)?;
        let id = self.inner.enqueue(now, request).map_err(core_error)?;
        Ok(to_js_number(id))
    }

    /// A response arrived for the sent request `id`.
    #[napi(
        ts_args_type = "nowNs: number, id: number, response: ResponseSpec",
        ts_return_type = "'complete' | 'retry' | 'failed'"
    )]
    pub fn handle_response(
        &mut self,
        now_ns: NumArg<'_>,
        id: NumArg<'_>,
        response: Either<Object<'_>, Unknown<'_>>,
    ) -> Result<&'static str> {
        let now = whole_arg(now_ns, "nowNs")?;
        let id = whole_arg(id, "id")?;
        let owned = response_from(&object_arg(response, "response")?)?;
        let pairs: Vec<(&str, &str)> =
            owned.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let response = Response {
            status: owned.status,
            headers: &pairs,
            body: owned.body,
            wall_clock_ms: owned.wall_clock_ms,
        };
        let disposition = self.inner.handle_response(now, id, &response).map_err(core_error)?;
        Ok(disposition_name(disposition))
    }

    /// The transport failed for the sent request `id`: `'not_sent'` when it certainly did not
    /// reach the server, `'maybe_sent'` otherwise.
    #[napi(
        ts_args_type = "nowNs: number, id: number, failure: 'not_sent' | 'maybe_sent'",
        ts_return_type = "'complete' | 'retry' | 'failed'"
    )]
    pub fn handle_failure(&mut self, now_ns: NumArg<'_>, id: NumArg<'_>, failure: Either<String, Unknown<'_>>) -> Result<&'static str> {
        let now = whole_arg(now_ns, "nowNs")?;
        let id = whole_arg(id, "id")?;
        let failure = match &failure {
            Either::A(s) if s == "not_sent" => Failure::NotSent,
            Either::A(s) if s == "maybe_sent" => Failure::MaybeSent,
            _ => return Err(invalid_argument("failure must be 'not_sent' or 'maybe_sent'")),
        };
        let disposition = self.inner.handle_failure(now, id, failure).map_err(core_error)?;
        Ok(disposition_name(disposition))
    }

    /// The transport wrote the sent request `id` to the network at `nowNs` (later than its
    /// `send` output): the global window counts it from then. Optional; a report for a
    /// request no longer in flight is ignored. Throws `unknown_request` for an id never issued.
    #[napi(ts_args_type = "nowNs: number, id: number")]
    pub fn handle_written(&mut self, now_ns: NumArg<'_>, id: NumArg<'_>) -> Result<()> {
        let now = whole_arg(now_ns, "nowNs")?;
        let id = whole_arg(id, "id")?;
        self.inner.handle_written(now, id).map_err(core_error)
    }

    /// The caller gave up on `id` (queued or in flight). Throws `unknown_request`.
    #[napi(ts_args_type = "nowNs: number, id: number")]
    pub fn cancel(&mut self, now_ns: NumArg<'_>, id: NumArg<'_>) -> Result<()> {
        let now = whole_arg(now_ns, "nowNs")?;
        let id = whole_arg(id, "id")?;
        self.inner.cancel(now, id).map_err(core_error)
    }

    /// Shared mode: the store's answer to the `reserve` output of request `id`
    /// (`{answer: 'granted'}`, `{answer: 'denied', retryAfterNs, scope}` or
    /// `{answer: 'unavailable'}`; `processes`, the store's live-process count, may come with
    /// the first two). Throws `unknown_request`, `invalid_state`.
    #[napi(ts_args_type = "nowNs: number, id: number, answer: ReservationAnswer")]
    pub fn handle_reservation(
        &mut self,
        now_ns: NumArg<'_>,
        id: NumArg<'_>,
        answer: Either<Object<'_>, Unknown<'_>>,
    ) -> Result<()> {
        let now = whole_arg(now_ns, "nowNs")?;
        let id = whole_arg(id, "id")?;
        let answer = shared::answer_from(&object_arg(answer, "answer")?)?;
        self.inner.handle_reservation(now, id, answer).map_err(core_error)
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

    /// The next output; call until it returns `wait_until` or `idle`.
    #[napi(ts_return_type = "Output")]
    pub fn poll_output(&mut self) -> JsOutput {
        output_to_js(self.next_output())
    }

    /// Every output up to and including the `wait_until` or `idle` that ends the drain.
    #[napi(ts_return_type = "Output[]")]
    pub fn drain(&mut self) -> Vec<JsOutput> {
        let mut outputs = Vec::new();
        loop {
            let output = self.next_output();
            let last = matches!(output, Output::WaitUntil(_) | Output::Idle);
            outputs.push(output_to_js(output));
            if last {
                return outputs;
            }
        }
    }

    /// `enqueue(nowNs, { method, path, identity })` without an object to read: the fast path
    /// for a request with no other field. Throws `invalid_request` or `limiter_closed`.
    #[napi(ts_args_type = "nowNs: number, method: string, path: string, identity?: string | null")]
    pub fn enqueue_simple(
        &mut self,
        now_ns: NumArg<'_>,
        method: StrArg<'_>,
        path: StrArg<'_>,
        identity: Option<StrArg<'_>>,
    ) -> Result<f64> {
        let now = whole_arg(now_ns, "nowNs")?;
        let mut request = Request::new(string_arg(method, "method")?, string_arg(path, "path")?);
        if let Some(identity) = identity {
            request.identity = string_arg(identity, "identity")?;
        }
        let id = self.inner.enqueue(now, request).map_err(core_error)?;
        Ok(to_js_number(id))
    }

    /// `handleResponse` with positional fields and the headers as one string, names and values
    /// on alternate lines, `""` for none: the fast path.
    #[napi(
        ts_args_type = "nowNs: number, id: number, status: number, headerLines: string, wallClockMs?: number | null, retryAfter?: number | null, global?: boolean | null",
        ts_return_type = "'complete' | 'retry' | 'failed'"
    )]
    #[allow(clippy::too_many_arguments)]
    pub fn handle_response_flat(
        &mut self,
        now_ns: NumArg<'_>,
        id: NumArg<'_>,
        status: NumArg<'_>,
        header_lines: StrArg<'_>,
        wall_clock_ms: Option<NumArg<'_>>,
        retry_after: Option<NumArg<'_>>,
        global: Option<Either<bool, Unknown<'_>>>,
    ) -> Result<&'static str> {
        let now = whole_arg(now_ns, "nowNs")?;
        let id = whole_arg(id, "id")?;
        let status = status_arg(status)?;
        let lines = string_arg(header_lines, "headerLines")?;
        let pairs = convert::header_lines(&lines).ok_or_else(|| {
            invalid_argument("headerLines must hold names and values on alternate lines")
        })?;
        let body = BodyHints {
            retry_after: retry_after
                .map(|v| match v {
                    Either::A(v) => Ok(v),
                    Either::B(_) => Err(invalid_argument("retryAfter must be a number")),
                })
                .transpose()?,
            global: global
                .map(|v| match v {
                    Either::A(v) => Ok(v),
                    Either::B(_) => Err(invalid_argument("global must be a boolean")),
                })
                .transpose()?,
            ..BodyHints::default()
        };
        let wall_clock_ms = wall_clock_ms.map(|v| whole_arg(v, "wallClockMs")).transpose()?;
        let response = Response { status, headers: &pairs, body, wall_clock_ms };
        let disposition = self.inner.handle_response(now, id, &response).map_err(core_error)?;
        Ok(disposition_name(disposition))
    }

    /// `drain()` as numbers, two per output: `[kind, value, ...]` with kind 0 `send` (value:
    /// the id), 1 `wait_until` (its time), 2 `idle` (0), or 3: the next output needs its
    /// object, so call `drain()` (or `pollOutput()`), which starts with it. Ends with a 1, 2
    /// or 3 pair. The fast path: no object is built for the common outputs.
    #[napi(ts_return_type = "number[]")]
    pub fn drain_packed(&mut self) -> Vec<f64> {
        let mut packed = Vec::with_capacity(4);
        loop {
            let output = self.next_output();
            match convert::pack(&output) {
                Some((kind, value)) => {
                    packed.push(kind);
                    packed.push(value);
                    if matches!(output, Output::WaitUntil(_) | Output::Idle) {
                        return packed;
                    }
                }
                None => {
                    self.held = Some(output);
                    packed.push(convert::PACKED_OBJECT);
                    packed.push(0.0);
                    return packed;
                }
            }
        }
    }

    /// When `request` would be sent if it were enqueued at `nowNs` (ns). Throws
    /// `invalid_request`.
    #[napi(ts_args_type = "nowNs: number, request: RequestSpec")]
    pub fn predict(&self, now_ns: NumArg<'_>, request: Either<Object<'_>, Unknown<'_>>) -> Result<f64> {
        let now = whole_arg(now_ns, "nowNs")?;
        let request = request_arg(request)?;
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
    /// Shopify's and Auto's every answer).
    #[napi(ts_args_type = "status: number")]
    pub fn reads_body(&self, status: NumArg<'_>) -> Result<bool> {
        let status = whole_arg(status, "status")?;
        Ok(u16::try_from(status).is_ok_and(|s| self.inner.config().profile.reads_body(s)))
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

impl Limiter {
    /// The held output (see `drain_packed`), else the core's next one.
    fn next_output(&mut self) -> Output {
        self.held.take().unwrap_or_else(|| self.inner.poll_output())
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

    /// Answers `request` arriving at `nowNs`. `tokens`: what the request really costs of the
    /// server's token budget (`Server::handle_costing`; its client only estimates it);
    /// omitted: the config's `tokens.cost`.
    #[napi(ts_args_type = "nowNs: number, request: RequestSpec, tokens?: number | null")]
    pub fn handle(
        &mut self,
        now_ns: NumArg<'_>,
        request: Either<Object<'_>, Unknown<'_>>,
        tokens: Option<NumArg<'_>>,
    ) -> Result<SimResponse> {
        let now = whole_arg(now_ns, "nowNs")?;
        let request = request_arg(request)?;
        let tokens = match tokens {
            None => None,
            Some(Either::B(other)) if is_absent(&other) => None,
            Some(Either::A(v)) if v.fract() != 0.0 => {
                return Err(invalid_argument(format!("tokens must be a whole number, got {v}")));
            }
            Some(v) => Some(whole_arg(v, "tokens")?),
        };
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

    /// Schedules `request` to be enqueued at `atNs`; returns its ticket.
    #[napi(ts_args_type = "atNs: number, request: RequestSpec")]
    pub fn enqueue_at(&mut self, at_ns: NumArg<'_>, request: Either<Object<'_>, Unknown<'_>>) -> Result<f64> {
        let at = whole_arg(at_ns, "atNs")?;
        let request = request_arg(request)?;
        let ticket = self.inner.enqueue_at(at, request);
        self.tickets = self.tickets.max(ticket.0 + 1);
        Ok(ticket.0 as f64)
    }

    /// Schedules a cancellation of `ticket` at `atNs`.
    #[napi(ts_args_type = "atNs: number, ticket: number")]
    pub fn cancel_at(&mut self, at_ns: NumArg<'_>, ticket: NumArg<'_>) -> Result<()> {
        let at = whole_arg(at_ns, "atNs")?;
        let ticket = whole_arg(ticket, "ticket")? as usize;
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

// ------------------------------------------------------------------------------ constants

/// `FAIL_CODES` and `ERROR_CODES` on the module (`ratelane::FailReason::ALL_CODES`,
/// `ratelane::Error::ALL_CODES`).
#[napi(module_exports)]
pub fn module_exports(mut exports: Object) -> napi::Result<()> {
    exports.set("FAIL_CODES", FailReason::ALL_CODES.to_vec())?;
    exports.set("ERROR_CODES", ratelane::Error::ALL_CODES.to_vec())?;
    Ok(())
}
