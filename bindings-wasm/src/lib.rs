//! ratelane for WebAssembly: the JavaScript core surface of `js/CONTRACT.md` through
//! wasm-bindgen, for browsers, edge runtimes, Deno, Bun and Node.
//!
//! This crate only converts. Times and ids arrive as JS numbers (integer nanoseconds, checked
//! and truncated exactly as the contract says), requests and responses as plain JS objects,
//! settings as JSON text read by [`ratelane::json`] (so every binding accepts the same keys
//! and reports the same errors), and outputs leave as plain JS objects. Caller misuse throws
//! a JS `Error` whose `code` is the core's stable [`ratelane::Error::code`], or
//! `invalid_argument` for a value of the wrong JS type or range.
//!
//! The server-side limiters of `ratelane::server` (`GcraStore`, `LeakyBucketStore`,
//! `FixedWindowStore`) are in the `server` module.
//!
//! The module never reads a clock (the driver passes `performance.now()`), and imports nothing
//! but the glue wasm-bindgen generates: it needs no Node API.

use js_sys::{Array, Object, Reflect};
use ratelane::sim::{Server, Ticket};
use ratelane::{BodyHints, FailReason, Failure, Observation, Output, Request, Response, json};
use serde::{Deserialize, Deserializer};
use wasm_bindgen::prelude::*;
use ratelane_js_common::{self as common, RequestParts};

mod server;
mod shared;

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &str = r#"
// The contract's types (js/CONTRACT.md) are written once, in js/core.d.ts, which build.sh
// copies beside this file; the Node package uses the same file.
import type {
  Disposition, FailCode, LeakyBucketOptions, LegacyLimit, Output, RequestSpec,
  ReservationAnswer, ResponseSpec, Scheduled, ServerDecision, SimReport, SimResponseSpec,
  StoreOptions, TransportFailure,
} from './core.js';
"#;

/// `Number.MAX_SAFE_INTEGER`: the largest time or id a JS number carries exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

// ------------------------------------------------------------------------------ errors

/// A JS `Error` carrying a stable `code` property.
fn js_error(code: &str, message: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    set(&error, "code", code);
    error.into()
}

fn core_error(e: ratelane::Error) -> JsValue {
    js_error(e.code(), &e.to_string())
}

fn invalid_argument(message: &str) -> JsValue {
    js_error("invalid_argument", message)
}

fn type_of(value: &JsValue) -> String {
    if value.is_null() {
        "null".into()
    } else {
        value.js_typeof().as_string().unwrap_or_default()
    }
}

// ------------------------------------------------------------------------------ numbers

/// `value` as a whole number of the contract's range: finite, `>= 0`, `<= MAX_SAFE_INTEGER`,
/// fractional part dropped. Every such value converts to `u64` exactly.
fn whole(what: &str, value: f64) -> Result<u64, String> {
    if value.is_finite() && (0.0..=MAX_SAFE_INTEGER).contains(&value) {
        Ok(value.trunc() as u64)
    } else {
        Err(format!(
            "{what} must be a finite number >= 0 and <= Number.MAX_SAFE_INTEGER, got {value}"
        ))
    }
}

/// A time or id argument: a JS number (not a BigInt, not a numeric string).
fn number_arg(what: &str, value: &JsValue) -> Result<u64, JsValue> {
    match value.as_f64() {
        Some(v) => whole(what, v).map_err(|m| invalid_argument(&m)),
        None => Err(invalid_argument(&format!(
            "{what} must be a number, got {}",
            type_of(value)
        ))),
    }
}

/// A `u64` leaving for JS: exact up to `MAX_SAFE_INTEGER`, which every time the core emits
/// stays under while the driver's clock does.
fn num(v: u64) -> JsValue {
    JsValue::from_f64(v as f64)
}

/// Settings JSON text; `undefined` or `null` means `"{}"` (every default).
fn settings_arg(what: &str, value: &JsValue) -> Result<String, JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok("{}".into());
    }
    value.as_string().ok_or_else(|| {
        invalid_argument(&format!(
            "{what} must be JSON text (a string), got {}",
            type_of(value)
        ))
    })
}

// ------------------------------------------------------------------------------ inputs

fn deadline_ns<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<f64>::deserialize(d)?
        .map(|v| whole("deadlineNs", v).map_err(serde::de::Error::custom))
        .transpose()
}

fn defer_after_ns<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<f64>::deserialize(d)?
        .map(|v| whole("deferAfterNs", v).map_err(serde::de::Error::custom))
        .transpose()
}

fn wall_clock_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<f64>::deserialize(d)?
        .map(|v| whole("wallClockMs", v).map_err(serde::de::Error::custom))
        .transpose()
}

/// `RequestSpec` of the contract. Keys not listed are ignored, as JS options objects go.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestSpec {
    method: String,
    path: String,
    #[serde(default)]
    major: Option<String>,
    #[serde(default)]
    identity: Option<String>,
    #[serde(default, deserialize_with = "deadline_ns")]
    deadline_ns: Option<u64>,
    #[serde(default, deserialize_with = "defer_after_ns")]
    defer_after_ns: Option<u64>,
    #[serde(default)]
    priority: Option<i32>,
    #[serde(default)]
    idempotent: Option<bool>,
    #[serde(default)]
    global_exempt: Option<bool>,
    #[serde(default)]
    sub_limit: Option<String>,
    #[serde(default)]
    body_keys: Option<Vec<String>>,
}

/// `value` deserialized from a JS object; `what` names the argument in the error.
fn object_arg<T: serde::de::DeserializeOwned>(what: &str, value: JsValue) -> Result<T, JsValue> {
    if !value.is_object() {
        return Err(invalid_argument(&format!(
            "{what} must be an object, got {}",
            type_of(&value)
        )));
    }
    serde_wasm_bindgen::from_value(value).map_err(|e| {
        // serde-wasm-bindgen's error is a JS Error; keep its message, not "Error: ...".
        let error = JsValue::from(e);
        let message = error
            .dyn_ref::<js_sys::Error>()
            .map_or_else(|| format!("{error:?}"), |e| String::from(e.message()));
        invalid_argument(&format!("{what}: {message}"))
    })
}

/// `request.costs`: an object of dimension name to estimated cost, a whole number (`{ tokens:
/// 1200 }`), in the object's key order; absent, `undefined` or `null`: none. A wrong type, a
/// fraction, a negative or unsafe number is `invalid_argument`; the names themselves are the
/// core's to check (`invalid_request`). An entry that is `undefined` or `null` is left out.
fn costs_arg(request: &JsValue) -> Result<Vec<(String, u64)>, JsValue> {
    let costs = Reflect::get(request, &JsValue::from_str("costs")).unwrap_or(JsValue::UNDEFINED);
    if costs.is_undefined() || costs.is_null() {
        return Ok(Vec::new());
    }
    if !costs.is_object() || Array::is_array(&costs) || costs.is_function() {
        let got = if Array::is_array(&costs) { "array".to_string() } else { type_of(&costs) };
        return Err(invalid_argument(&format!(
            "request.costs must be an object of dimension names to whole numbers (e.g. {{ tokens: 1200 }}), got {got}"
        )));
    }
    let mut out = Vec::new();
    for entry in Object::entries(costs.unchecked_ref::<Object>()).iter() {
        let pair: Array = entry.unchecked_into();
        let name = pair.get(0).as_string().unwrap_or_default();
        let value = pair.get(1);
        if value.is_undefined() || value.is_null() {
            continue;
        }
        let Some(amount) = value.as_f64() else {
            return Err(invalid_argument(&format!(
                "request.costs.{name} must be a whole number >= 0 (the estimated cost), got {}",
                type_of(&value)
            )));
        };
        if !(amount.is_finite() && amount.fract() == 0.0 && (0.0..=MAX_SAFE_INTEGER).contains(&amount)) {
            return Err(invalid_argument(&format!(
                "request.costs.{name} must be a whole number in 0..=Number.MAX_SAFE_INTEGER (the estimated cost), got {amount}"
            )));
        }
        out.push((name, amount as u64));
    }
    Ok(out)
}

fn request_arg(value: JsValue) -> Result<Request, JsValue> {
    let costs = if value.is_object() { costs_arg(&value)? } else { Vec::new() };
    let spec: RequestSpec = object_arg("request", value)?;
    Ok(Request {
        method: spec.method,
        path: spec.path,
        major: spec.major,
        identity: spec.identity.unwrap_or_default(),
        deadline: spec.deadline_ns,
        defer_after: spec.defer_after_ns,
        priority: spec.priority.unwrap_or(0),
        idempotent: spec.idempotent,
        global_exempt: spec.global_exempt,
        sub_limit: spec.sub_limit,
        body_keys: spec.body_keys.unwrap_or_default(),
        costs,
    })
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct BodySpec {
    #[serde(default)]
    retry_after: Option<f64>,
    #[serde(default)]
    global: Option<bool>,
    #[serde(default)]
    cost: Option<CostSpec>,
    #[serde(default)]
    errors: Option<Vec<String>>,
    /// The body's `usage` object, read apart (`usage_arg`): what a server sent.
    #[serde(skip)]
    usage: Vec<(String, f64)>,
}

/// `QueryCost` of the contract (Shopify's `extensions.cost`).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CostSpec {
    #[serde(default)]
    requested: Option<f64>,
    #[serde(default)]
    actual: Option<f64>,
    #[serde(default)]
    maximum_available: Option<f64>,
    #[serde(default)]
    currently_available: Option<f64>,
    #[serde(default)]
    restore_rate: Option<f64>,
}

impl BodySpec {
    fn hints(self) -> BodyHints {
        BodyHints {
            retry_after: self.retry_after,
            global: self.global,
            cost: self.cost.map(|c| ratelane::QueryCost {
                requested: c.requested,
                actual: c.actual,
                maximum_available: c.maximum_available,
                currently_available: c.currently_available,
                restore_rate: c.restore_rate,
            }),
            errors: self.errors.unwrap_or_default(),
            usage: self.usage,
        }
    }
}

/// `response.body.usage`: the numeric fields of the body's `usage` object. It must be an
/// object; its values are what a server sent, so an entry that is not a number is left out
/// rather than refused, and the first `BodyHints::MAX_USAGE` numbers are passed as they are
/// (the core reads only finite ones >= 0).
fn usage_arg(response: &JsValue) -> Result<Vec<(String, f64)>, JsValue> {
    let body = Reflect::get(response, &JsValue::from_str("body")).unwrap_or(JsValue::UNDEFINED);
    if !body.is_object() {
        return Ok(Vec::new());
    }
    let usage = Reflect::get(&body, &JsValue::from_str("usage")).unwrap_or(JsValue::UNDEFINED);
    if usage.is_undefined() || usage.is_null() {
        return Ok(Vec::new());
    }
    if !usage.is_object() {
        return Err(invalid_argument(&format!(
            "response.body.usage must be an object of numbers, got {}",
            type_of(&usage)
        )));
    }
    let mut out = Vec::new();
    for entry in Object::entries(usage.unchecked_ref::<Object>()).iter() {
        if out.len() == BodyHints::MAX_USAGE {
            break;
        }
        let pair: Array = entry.unchecked_into();
        if let (Some(name), Some(v)) = (pair.get(0).as_string(), pair.get(1).as_f64()) {
            out.push((name, v));
        }
    }
    Ok(out)
}

/// `ResponseSpec` of the contract.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponseSpec {
    status: u16,
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: Option<BodySpec>,
    #[serde(default, deserialize_with = "wall_clock_ms")]
    wall_clock_ms: Option<u64>,
}

fn failure_arg(value: &JsValue) -> Result<Failure, JsValue> {
    match value.as_string().as_deref() {
        Some("not_sent") => Ok(Failure::NotSent),
        Some("maybe_sent") => Ok(Failure::MaybeSent),
        _ => Err(invalid_argument(&format!(
            "failure must be 'not_sent' or 'maybe_sent', got {}",
            value
                .as_string()
                .map_or_else(|| type_of(value), |s| format!("{s:?}"))
        ))),
    }
}

// ------------------------------------------------------------------------------ outputs

fn set(target: &JsValue, key: &str, value: impl Into<JsValue>) {
    // Defining a property on a plain object or an Error cannot fail.
    let _ = Reflect::set(target, &JsValue::from_str(key), &value.into());
}

fn fail_object(o: &Object, id: u64, reason: &FailReason) {
    set(o, "type", "fail");
    set(o, "id", num(id));
    set(o, "code", reason.code());
    set(o, "message", reason.to_string());
    match reason {
        FailReason::DeadlineExceeded { predicted_send_at } => {
            set(
                o,
                "predictedSendAtNs",
                predicted_send_at.map_or(JsValue::NULL, num),
            );
        }
        FailReason::MaxWaitExceeded { predicted_wait } => {
            set(o, "predictedWaitNs", num(*predicted_wait))
        }
        FailReason::Deferred { retry_at } => set(o, "retryAtNs", num(*retry_at)),
        FailReason::InsufficientCapacity { dimension, cost, limit } => {
            set(o, "dimension", dimension.as_str());
            set(o, "cost", num(*cost));
            set(o, "limit", num(*limit));
        }
        FailReason::RetriesExhausted { attempts } | FailReason::NetworkError { attempts } => {
            set(o, "attempts", *attempts);
        }
        // Exhaustive, like the match above: a new reason must be placed in one of the arms.
        FailReason::MaybeSent | FailReason::Unauthorized | FailReason::Closed => {}
    }
}

fn observation_object(o: &Object, observation: &Observation) {
    match observation {
        Observation::RateLimited {
            id,
            scope,
            retry_after,
        } => {
            set(o, "type", "rate_limited");
            set(o, "id", num(*id));
            set(o, "scope", scope.as_str());
            set(o, "retryAfterNs", num(*retry_after));
        }
        Observation::BucketLearned { route, bucket } => {
            set(o, "type", "bucket_learned");
            set(o, "route", route.as_str());
            set(o, "bucket", bucket.as_str());
        }
        Observation::InvalidRequestWarning { count, limit } => {
            set(o, "type", "invalid_request_warning");
            set(o, "count", *count);
            set(o, "limit", *limit);
        }
        // `Observation` is exhaustive (js/CONTRACT.md, "Precisions"): a new observation
        // breaks this build until it is converted here.
        Observation::StoreUnavailable { id, retry_at } => {
            shared::store_unavailable_object(o, *id, *retry_at)
        }
        Observation::StoreRecovered => set(o, "type", "store_recovered"),
    }
}

fn output_object(output: &Output) -> JsValue {
    let o = Object::new();
    match output {
        Output::Send(id) => {
            set(&o, "type", "send");
            set(&o, "id", num(*id));
        }
        Output::Fail(id, reason) => fail_object(&o, *id, reason),
        Output::Observe(observation) => observation_object(&o, observation),
        Output::Reserve(reservation) => shared::reserve_object(&o, reservation),
        Output::Share(update) => shared::share_object(&o, update),
        Output::WaitUntil(t) => {
            set(&o, "type", "wait_until");
            set(&o, "atNs", num(*t));
        }
        Output::Idle => set(&o, "type", "idle"),
    }
    o.into()
}

fn disposition(d: ratelane::Disposition) -> JsValue {
    JsValue::from_str(match d {
        ratelane::Disposition::Complete => "complete",
        ratelane::Disposition::Retry => "retry",
        ratelane::Disposition::Failed => "failed",
    })
}

fn pairs(headers: &[(String, String)]) -> Array {
    headers
        .iter()
        .map(|(k, v)| Array::of2(&JsValue::from_str(k), &JsValue::from_str(v)))
        .collect()
}

// ------------------------------------------------------------------------------ Limiter

/// The sans-IO client-side engine, one to one with `ratelane::Limiter`.
///
/// Drain invariant: after every input (`enqueue`, `handleResponse`, `handleFailure`, `cancel`,
/// `handleTimeout`, `close`) call `drain()` (or `pollOutput()` until it returns `wait_until`
/// or `idle`). Times are integer nanoseconds as JS numbers, from an epoch of your choice.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Limiter {
    inner: ratelane::Limiter,
    /// An output `drainPacked` met but cannot carry, handed out first by the next poll.
    held: Option<Output>,
}

#[wasm_bindgen]
impl Limiter {
    /// A limiter configured by JSON text (`ratelane::json::config_from_json`; omitted: `"{}"`,
    /// Discord's defaults). Throws `invalid_config`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(js_name = configJson, unchecked_optional_param_type = "string | null")]
        config_json: JsValue,
    ) -> Result<Limiter, JsValue> {
        let text = settings_arg("configJson", &config_json)?;
        let config = json::config_from_json(&text).map_err(core_error)?;
        let inner = ratelane::Limiter::new(config).map_err(core_error)?;
        Ok(Limiter { inner, held: None })
    }

    /// Queues a request and returns its id. Throws `invalid_request`, `limiter_closed`.
    pub fn enqueue(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "RequestSpec")] request: JsValue,
    ) -> Result<f64, JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let request = request_arg(request)?;
        let id = self.inner.enqueue(now, request).map_err(core_error)?;
        Ok(id as f64)
    }

    /// A response arrived for the sent request `id`. Throws `unknown_request`, `invalid_state`.
    #[wasm_bindgen(js_name = handleResponse, unchecked_return_type = "Disposition")]
    pub fn handle_response(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "ResponseSpec")] response: JsValue,
    ) -> Result<JsValue, JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let id = number_arg("id", &id)?;
        let usage = if response.is_object() { usage_arg(&response)? } else { Vec::new() };
        let mut spec: ResponseSpec = object_arg("response", response)?;
        if !usage.is_empty() {
            spec.body.get_or_insert_with(BodySpec::default).usage = usage;
        }
        if !(100..=999).contains(&spec.status) {
            return Err(invalid_argument(&format!(
                "response.status must be an integer in 100..=999, got {}",
                spec.status
            )));
        }
        let headers: Vec<(&str, &str)> = spec
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let response = Response {
            status: spec.status,
            headers: &headers,
            body: spec.body.unwrap_or_default().hints(),
            wall_clock_ms: spec.wall_clock_ms,
        };
        let d = self
            .inner
            .handle_response(now, id, &response)
            .map_err(core_error)?;
        Ok(disposition(d))
    }

    /// The transport failed for the sent request `id` (`'not_sent'` or `'maybe_sent'`).
    /// Throws `unknown_request`, `invalid_state`.
    #[wasm_bindgen(js_name = handleFailure, unchecked_return_type = "Disposition")]
    pub fn handle_failure(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "TransportFailure")] failure: JsValue,
    ) -> Result<JsValue, JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let id = number_arg("id", &id)?;
        let failure = failure_arg(&failure)?;
        let d = self
            .inner
            .handle_failure(now, id, failure)
            .map_err(core_error)?;
        Ok(disposition(d))
    }

    /// The transport wrote the sent request `id` to the network at `nowNs` (later than its
    /// `send` output): the global window counts it from then. Optional; a report for a
    /// request no longer in flight is ignored. Throws `unknown_request` for an id never issued.
    #[wasm_bindgen(js_name = handleWritten)]
    pub fn handle_written(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] id: JsValue,
    ) -> Result<(), JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let id = number_arg("id", &id)?;
        self.inner.handle_written(now, id).map_err(core_error)
    }

    /// The caller gave up on `id`; cancellation is its outcome. Throws `unknown_request`.
    pub fn cancel(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] id: JsValue,
    ) -> Result<(), JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let id = number_arg("id", &id)?;
        self.inner.cancel(now, id).map_err(core_error)
    }

    /// Shared mode: the store's answer to the `reserve` output of request `id`. Throws
    /// `unknown_request`, `invalid_state`.
    #[wasm_bindgen(js_name = handleReservation)]
    pub fn handle_reservation(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "ReservationAnswer")] answer: JsValue,
    ) -> Result<(), JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let id = number_arg("id", &id)?;
        let answer = shared::answer_arg(answer)?;
        self.inner.handle_reservation(now, id, answer).map_err(core_error)
    }

    /// Shared mode: requests waiting for their reservation's answer.
    #[wasm_bindgen(getter)]
    pub fn reserving(&self) -> usize {
        self.inner.reserving()
    }

    /// Time passed. Harmless when called early or twice.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
    ) -> Result<(), JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        self.inner.handle_timeout(now);
        Ok(())
    }

    /// Fails every queued request with `closed` and refuses new ones.
    pub fn close(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
    ) -> Result<(), JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        self.inner.close(now);
        Ok(())
    }

    /// The next output.
    #[wasm_bindgen(js_name = pollOutput, unchecked_return_type = "Output")]
    pub fn poll_output(&mut self) -> JsValue {
        output_object(&self.next_output())
    }

    /// Every output up to and including the `wait_until` or `idle` that ends the drain.
    #[wasm_bindgen(unchecked_return_type = "Output[]")]
    pub fn drain(&mut self) -> Array {
        let list = Array::new();
        loop {
            let output = self.next_output();
            list.push(&output_object(&output));
            if matches!(output, Output::WaitUntil(_) | Output::Idle) {
                return list;
            }
        }
    }

    /// `enqueue` with the `RequestSpec`'s fields as arguments, in the contract's order (costs as
    /// names and amounts): the positional surface the driver uses. Throws `invalid_request`,
    /// `limiter_closed`, or `invalid_argument` for a value of the wrong type or range.
    #[wasm_bindgen(js_name = enqueueParts)]
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue_parts(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] method: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] path: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "string | null")] identity: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "string | null")] major: JsValue,
        #[wasm_bindgen(js_name = deadlineNs, unchecked_optional_param_type = "number | null")] deadline_ns: JsValue,
        #[wasm_bindgen(js_name = deferAfterNs, unchecked_optional_param_type = "number | null")] defer_after_ns: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] priority: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean | null")] idempotent: JsValue,
        #[wasm_bindgen(js_name = globalExempt, unchecked_optional_param_type = "boolean | null")] global_exempt: JsValue,
        #[wasm_bindgen(js_name = subLimit, unchecked_optional_param_type = "string | null")] sub_limit: JsValue,
        #[wasm_bindgen(js_name = bodyKeys, unchecked_optional_param_type = "string[] | null")] body_keys: JsValue,
        #[wasm_bindgen(js_name = costNames, unchecked_optional_param_type = "string[] | null")] cost_names: JsValue,
        #[wasm_bindgen(js_name = costAmounts, unchecked_optional_param_type = "number[] | null")] cost_amounts: JsValue,
    ) -> Result<f64, JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let request = RequestParts {
            method: string_arg("request.method", &method)?,
            path: string_arg("request.path", &path)?,
            identity: opt_string("request.identity", &identity)?,
            major: opt_string("request.major", &major)?,
            deadline_ns: opt_number("request.deadlineNs", &deadline_ns)?,
            defer_after_ns: opt_number("request.deferAfterNs", &defer_after_ns)?,
            priority: opt_number("request.priority", &priority)?,
            idempotent: opt_bool("request.idempotent", &idempotent)?,
            global_exempt: opt_bool("request.globalExempt", &global_exempt)?,
            sub_limit: opt_string("request.subLimit", &sub_limit)?,
            body_keys: opt_strings("request.bodyKeys", &body_keys)?,
            cost_names: opt_strings("request.costs", &cost_names)?,
            cost_values: opt_numbers("request.costs", &cost_amounts)?,
        }
        .request()
        .map_err(|m| invalid_argument(&m))?;
        let id = self.inner.enqueue(now, request).map_err(core_error)?;
        Ok(id as f64)
    }

    /// `handleResponse` with the `ResponseSpec`'s fields as arguments: the headers as one
    /// string, names and values on alternate lines (`""` for none), or as a flat list `[name,
    /// value, ...]` when a name or value holds a line break; the body hints' `cost` as its five
    /// numbers in the contract's order, `usage` as names and numbers. The positional surface
    /// the driver uses. Throws `unknown_request`, `invalid_state`.
    #[wasm_bindgen(unchecked_return_type = "Disposition")]
    #[allow(clippy::too_many_arguments)]
    pub fn respond(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] status: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string | string[]")] headers: JsValue,
        #[wasm_bindgen(js_name = wallClockMs, unchecked_optional_param_type = "number | null")] wall_clock_ms: JsValue,
        #[wasm_bindgen(js_name = retryAfter, unchecked_optional_param_type = "number | null")] retry_after: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean | null")] global: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Array<number | null> | null")] cost: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "string[] | null")] errors: JsValue,
        #[wasm_bindgen(js_name = usageNames, unchecked_optional_param_type = "string[] | null")] usage_names: JsValue,
        #[wasm_bindgen(js_name = usageValues, unchecked_optional_param_type = "number[] | null")] usage_values: JsValue,
    ) -> Result<JsValue, JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let id = number_arg("id", &id)?;
        let status = match status.as_f64() {
            Some(v) => common::status(v).map_err(|m| invalid_argument(&m))?,
            None => return Err(invalid_argument(&format!("status must be a number, got {}", type_of(&status)))),
        };
        let lines = headers.as_string();
        let list = if lines.is_none() { opt_strings("headers", &headers)? } else { None };
        let pairs = match (&lines, &list) {
            (Some(lines), _) => common::header_lines(lines),
            (None, Some(list)) => common::header_list(list),
            (None, None) => None,
        }
        .ok_or_else(|| invalid_argument("headers must hold names and values on alternate lines"))?;
        let cost = if absent(&cost) {
            None
        } else {
            let list = Array::try_from(cost).map_err(|_| invalid_argument("response.body.cost must be an array"))?;
            Some(list.iter().map(|v| v.as_f64()).collect::<Vec<_>>())
        };
        let body = common::body(
            opt_number("response.body.retryAfter", &retry_after)?,
            opt_bool("response.body.global", &global)?,
            cost.as_deref(),
            opt_strings("response.body.errors", &errors)?,
            opt_strings("response.body.usage", &usage_names)?,
            opt_numbers("response.body.usage", &usage_values)?,
        )
        .map_err(|m| invalid_argument(&m))?;
        let wall_clock_ms = if absent(&wall_clock_ms) { None } else { Some(number_arg("wallClockMs", &wall_clock_ms)?) };
        let response = Response { status, headers: &pairs, body, wall_clock_ms };
        let d = self.inner.handle_response(now, id, &response).map_err(core_error)?;
        Ok(disposition(d))
    }

    /// `handleReservation` with the `ReservationAnswer`'s fields as arguments: the positional
    /// surface the driver uses.
    #[wasm_bindgen(js_name = answerReservation)]
    #[allow(clippy::too_many_arguments)]
    pub fn answer_reservation(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "'granted' | 'denied' | 'unavailable'")] answer: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] processes: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] leased: JsValue,
        #[wasm_bindgen(js_name = storeTimeUs, unchecked_optional_param_type = "number | null")] store_time_us: JsValue,
        #[wasm_bindgen(js_name = retryAfterNs, unchecked_optional_param_type = "number | null")] retry_after_ns: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "string | null")] scope: JsValue,
    ) -> Result<(), JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let id = number_arg("id", &id)?;
        let answer = common::answer(
            &string_arg("answer.answer", &answer)?,
            opt_number("answer.processes", &processes)?,
            opt_number("answer.leased", &leased)?,
            opt_number("answer.storeTimeUs", &store_time_us)?,
            opt_number("answer.retryAfterNs", &retry_after_ns)?,
            opt_string("answer.scope", &scope)?.as_deref(),
        )
        .map_err(|m| invalid_argument(&m))?;
        self.inner.handle_reservation(now, id, answer).map_err(core_error)
    }

    /// `drain()` as numbers, two per output: `[kind, value, ...]` with kind 0 `send` (value:
    /// the id), 1 `wait_until` (its time), 2 `idle` (0), or 3: the next output is held, take it
    /// with `takeHeld()` (or `drain()` / `pollOutput()` start with it) and drain again. Ends
    /// with a 1, 2 or 3 pair. No object is built.
    #[wasm_bindgen(js_name = drainPacked)]
    pub fn drain_packed(&mut self) -> Vec<f64> {
        let mut packed = Vec::with_capacity(4);
        loop {
            let output = self.next_output();
            let Some((kind, value)) = common::pack(&output) else {
                self.held = Some(output);
                packed.extend([common::HELD, 0.0]);
                return packed;
            };
            packed.extend([kind, value]);
            if kind != 0.0 {
                return packed;
            }
        }
    }

    /// The output `drainPacked` held, as JSON text: `{"output": <the core's serde form>,
    /// "message": <a failure's text>}`; `undefined` when none is held.
    #[wasm_bindgen(js_name = takeHeld)]
    pub fn take_held(&mut self) -> Option<String> {
        self.held.take().map(|output| common::held_json(&output))
    }

    /// When `request` would be sent if enqueued at `nowNs` (ns). Throws `invalid_request`.
    pub fn predict(
        &self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "RequestSpec")] request: JsValue,
    ) -> Result<f64, JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let request = request_arg(request)?;
        let prediction = self.inner.predict(now, &request).map_err(core_error)?;
        Ok(prediction.send_at as f64)
    }

    /// Requests queued and not yet sent.
    #[wasm_bindgen(getter)]
    pub fn queued(&self) -> usize {
        self.inner.queued()
    }

    /// Requests sent and not yet answered.
    #[wasm_bindgen(getter = inFlight)]
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    /// The invalid-request budget used at `nowNs`: the 401/403/non-shared 429 answers counted
    /// within the window (`Limiter::invalid_requests`). A read: changes nothing.
    #[wasm_bindgen(js_name = invalidRequests)]
    pub fn invalid_requests(
        &self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
    ) -> Result<u32, JsValue> {
        Ok(self.inner.invalid_requests(number_arg("nowNs", &now_ns)?))
    }

    /// Buckets (queues) held in memory.
    #[wasm_bindgen(getter)]
    pub fn buckets(&self) -> usize {
        self.inner.buckets()
    }

    /// Whether `close` was called.
    #[wasm_bindgen(getter = isClosed)]
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Whether the profile reads the body of an answer with this status: pass its hints
    /// (`response.body`) then (`HeaderProfile::reads_body`: Discord's 429 JSON, GitHub's 403s,
    /// Shopify's and Auto's every answer).
    #[wasm_bindgen(js_name = readsBody)]
    pub fn reads_body(&self, #[wasm_bindgen(unchecked_param_type = "number")] status: JsValue) -> Result<bool, JsValue> {
        let status = number_arg("status", &status)?;
        Ok(u16::try_from(status).is_ok_and(|s| self.inner.config().profile.reads_body(s)))
    }

    /// The configuration in use, as JSON text (`ratelane::json::config_to_json`).
    #[wasm_bindgen(js_name = configJson)]
    pub fn config_json(&self) -> String {
        json::config_to_json(self.inner.config())
    }

    /// What the limiter learned, as the core's snapshot JSON text (format
    /// `ratelane.snapshot`): `wallClockMs` is the wall clock at `nowNs` (`Date.now()`). A getter.
    pub fn snapshot(
        &self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(js_name = wallClockMs, unchecked_param_type = "number")] wall_clock_ms: JsValue,
    ) -> Result<String, JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let wall = number_arg("wallClockMs", &wall_clock_ms)?;
        Ok(self.inner.snapshot(now, wall).to_json())
    }

    /// Restores a snapshot's JSON text (an input: drain afterwards). Throws
    /// `snapshot_foreign`, `snapshot_version`, `snapshot_malformed`, `limiter_busy`,
    /// `limiter_closed`, or `invalid_argument` when `snapshot` is not a string.
    pub fn restore(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(js_name = wallClockMs, unchecked_param_type = "number")] wall_clock_ms: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] snapshot: JsValue,
    ) -> Result<(), JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let wall = number_arg("wallClockMs", &wall_clock_ms)?;
        let Some(text) = snapshot.as_string() else {
            return Err(invalid_argument(&format!(
                "snapshot must be the JSON text snapshot() returned, got {}",
                type_of(&snapshot)
            )));
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

fn absent(value: &JsValue) -> bool {
    value.is_undefined() || value.is_null()
}

/// An optional positional argument: `undefined` and `null` are `None`, a value of another type
/// `invalid_argument` naming `what`.
fn opt_arg<T>(what: &str, value: &JsValue, kind: &str, read: impl FnOnce(&JsValue) -> Option<T>) -> Result<Option<T>, JsValue> {
    if absent(value) {
        return Ok(None);
    }
    read(value)
        .map(Some)
        .ok_or_else(|| invalid_argument(&format!("{what} must be {kind}, got {}", type_of(value))))
}

fn opt_number(what: &str, value: &JsValue) -> Result<Option<f64>, JsValue> {
    opt_arg(what, value, "a number", JsValue::as_f64)
}

fn opt_string(what: &str, value: &JsValue) -> Result<Option<String>, JsValue> {
    opt_arg(what, value, "a string", JsValue::as_string)
}

fn opt_bool(what: &str, value: &JsValue) -> Result<Option<bool>, JsValue> {
    opt_arg(what, value, "a boolean", JsValue::as_bool)
}

fn opt_strings(what: &str, value: &JsValue) -> Result<Option<Vec<String>>, JsValue> {
    opt_arg(what, value, "an array of strings", |v| {
        v.dyn_ref::<Array>()?.iter().map(|s| s.as_string()).collect()
    })
}

fn opt_numbers(what: &str, value: &JsValue) -> Result<Option<Vec<f64>>, JsValue> {
    opt_arg(what, value, "an array of numbers", |v| {
        v.dyn_ref::<Array>()?.iter().map(|n| n.as_f64()).collect()
    })
}

fn string_arg(what: &str, value: &JsValue) -> Result<String, JsValue> {
    value.as_string().ok_or_else(|| {
        invalid_argument(&format!("{what} must be a string, got {}", type_of(value)))
    })
}

// ------------------------------------------------------------------------------ simulator

/// A model of Discord's REST rate limiting (`ratelane::sim::Server`), to answer a driver's
/// requests in tests and demos.
#[wasm_bindgen]
#[derive(Debug)]
pub struct SimServer {
    inner: Server,
    next_tag: u64,
}

#[wasm_bindgen]
impl SimServer {
    /// A server configured by JSON text (`ratelane::json::server_config_from_json`; omitted:
    /// Discord's defaults). Throws `invalid_config`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(js_name = serverConfigJson, unchecked_optional_param_type = "string | null")]
        server_config_json: JsValue,
    ) -> Result<SimServer, JsValue> {
        let text = settings_arg("serverConfigJson", &server_config_json)?;
        let config = json::server_config_from_json(&text).map_err(core_error)?;
        Ok(SimServer {
            inner: Server::new(config),
            next_tag: 0,
        })
    }

    /// Answers `request` arriving at `nowNs`. `tokens`: what the request really costs of the
    /// server's token budget (`Server::handle_costing`; its client only estimates it);
    /// omitted: the config's `tokens.cost`.
    #[wasm_bindgen(unchecked_return_type = "SimResponseSpec")]
    pub fn handle(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "RequestSpec")] request: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | null")] tokens: JsValue,
    ) -> Result<JsValue, JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let request = request_arg(request)?;
        let tokens = if tokens.is_undefined() || tokens.is_null() {
            None
        } else {
            match tokens.as_f64() {
                Some(v) if v.fract() != 0.0 => {
                    return Err(invalid_argument(&format!("tokens must be a whole number, got {v}")));
                }
                _ => Some(number_arg("tokens", &tokens)?),
            }
        };
        self.next_tag += 1;
        let answer = self.inner.handle_costing(now, self.next_tag, &request, tokens);
        let o = Object::new();
        set(&o, "status", answer.status);
        set(&o, "headers", pairs(&answer.headers));
        let body = Object::new();
        set(
            &body,
            "retryAfter",
            answer
                .body
                .retry_after
                .map_or(JsValue::NULL, JsValue::from_f64),
        );
        set(
            &body,
            "global",
            answer.body.global.map_or(JsValue::NULL, JsValue::from_bool),
        );
        if !answer.body.usage.is_empty() {
            let usage = Object::new();
            for (name, value) in &answer.body.usage {
                set(&usage, name, JsValue::from_f64(*value));
            }
            set(&body, "usage", usage);
        }
        set(&o, "body", body);
        set(&o, "bodyText", answer.body_text);
        Ok(o.into())
    }

    /// How many 429s the server has answered.
    #[wasm_bindgen(js_name = count429)]
    pub fn count_429(&self) -> usize {
        self.inner.count_429()
    }
}

/// A limiter driven against a [`SimServer`] in virtual time (`ratelane::sim::Simulation`).
#[wasm_bindgen]
#[derive(Debug)]
pub struct Simulation {
    inner: ratelane::sim::Simulation,
    tickets: usize,
}

#[wasm_bindgen]
impl Simulation {
    /// A simulation from three JSON texts: the limiter's config, the server's and the
    /// network's (omitted: defaults). Throws `invalid_config`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(js_name = configJson, unchecked_optional_param_type = "string | null")]
        config_json: JsValue,
        #[wasm_bindgen(js_name = serverConfigJson, unchecked_optional_param_type = "string | null")]
        server_config_json: JsValue,
        #[wasm_bindgen(js_name = simConfigJson, unchecked_optional_param_type = "string | null")]
        sim_config_json: JsValue,
    ) -> Result<Simulation, JsValue> {
        let config = json::config_from_json(&settings_arg("configJson", &config_json)?)
            .map_err(core_error)?;
        let server =
            json::server_config_from_json(&settings_arg("serverConfigJson", &server_config_json)?)
                .map_err(core_error)?;
        let sim = json::sim_config_from_json(&settings_arg("simConfigJson", &sim_config_json)?)
            .map_err(core_error)?;
        let limiter = ratelane::Limiter::new(config).map_err(core_error)?;
        let inner = ratelane::sim::Simulation::new(limiter, Server::new(server), sim);
        Ok(Simulation { inner, tickets: 0 })
    }

    /// Schedules `request` to be enqueued at `atNs`; returns its ticket.
    #[wasm_bindgen(js_name = enqueueAt)]
    pub fn enqueue_at(
        &mut self,
        #[wasm_bindgen(js_name = atNs, unchecked_param_type = "number")] at_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "RequestSpec")] request: JsValue,
    ) -> Result<usize, JsValue> {
        let at = number_arg("atNs", &at_ns)?;
        let request = request_arg(request)?;
        let Ticket(ticket) = self.inner.enqueue_at(at, request);
        self.tickets = self.tickets.max(ticket + 1);
        Ok(ticket)
    }

    /// Schedules a cancellation of `ticket` at `atNs`. Throws `invalid_argument` for a ticket
    /// this simulation did not issue.
    #[wasm_bindgen(js_name = cancelAt)]
    pub fn cancel_at(
        &mut self,
        #[wasm_bindgen(js_name = atNs, unchecked_param_type = "number")] at_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] ticket: JsValue,
    ) -> Result<(), JsValue> {
        let at = number_arg("atNs", &at_ns)?;
        let ticket = number_arg("ticket", &ticket)?;
        match usize::try_from(ticket) {
            Ok(t) if t < self.tickets => {
                self.inner.cancel_at(at, Ticket(t));
                Ok(())
            }
            _ => Err(invalid_argument(&format!(
                "ticket {ticket} was not issued by this simulation"
            ))),
        }
    }

    /// Schedules `close` at `atNs`.
    #[wasm_bindgen(js_name = closeAt)]
    pub fn close_at(
        &mut self,
        #[wasm_bindgen(js_name = atNs, unchecked_param_type = "number")] at_ns: JsValue,
    ) -> Result<(), JsValue> {
        let at = number_arg("atNs", &at_ns)?;
        self.inner.close_at(at);
        Ok(())
    }

    /// Runs until everything ended or a limit is reached; returns the report
    /// (`ratelane::json::report_to_json`, parsed). Throws `simulation_contract` when the
    /// limiter broke the driver contract.
    #[wasm_bindgen(unchecked_return_type = "SimReport")]
    pub fn run(&mut self) -> Result<JsValue, JsValue> {
        let report = self
            .inner
            .run()
            .map_err(|e| js_error("simulation_contract", &e.to_string()))?;
        js_sys::JSON::parse(&json::report_to_json(&report))
    }
}

// ------------------------------------------------------------------------------ codes

/// Every failure code (`FailReason::ALL_CODES`). The packages export it as `FAIL_CODES`.
#[wasm_bindgen(js_name = failCodes, unchecked_return_type = "FailCode[]")]
pub fn fail_codes() -> Vec<String> {
    FailReason::ALL_CODES
        .iter()
        .map(|c| (*c).to_owned())
        .collect()
}

/// Every caller-error code of the core (`Error::ALL_CODES`). The packages export it as
/// `ERROR_CODES`.
#[wasm_bindgen(js_name = errorCodes)]
pub fn error_codes() -> Vec<String> {
    ratelane::Error::ALL_CODES
        .iter()
        .map(|c| (*c).to_owned())
        .collect()
}
