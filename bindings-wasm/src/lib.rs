//! ratelane for WebAssembly: the JavaScript core surface of `js/CONTRACT.md` through
//! wasm-bindgen, for browsers, edge runtimes, Deno, Bun and Node.
//!
//! This crate only converts. Times and ids arrive as JS numbers (integer nanoseconds, checked
//! and truncated exactly as the contract says), requests, responses and answers field by field
//! as arguments (the positional surface of `js/CONTRACT.md`; its checks are
//! `ratelane-js-common`'s, shared with the napi core), settings as JSON text read by
//! [`ratelane::json`] (so every binding accepts the same keys and reports the same errors), and
//! outputs leave as numbers, a rare one as the core's serde form in JSON text. The object API
//! (`limiter.enqueue({ ... })`, outputs as objects) is `js/driver.js`'s, over this. Caller misuse throws
//! a JS `Error` whose `code` is the core's stable [`ratelane::Error::code`], or
//! `invalid_argument` for a value of the wrong JS type or range.
//!
//! The server-side limiters of `ratelane::server` (`GcraStore`, `LeakyBucketStore`,
//! `FixedWindowStore`) are in the `server` module.
//!
//! Cargo features pick the classes a module exports: `client` ([`Limiter`]), `sim`
//! ([`SimServer`], [`Simulation`]), `server` (the `server` module). `bindings-wasm/build.sh`
//! builds one module per feature, so the client module a browser downloads holds neither the
//! simulator nor the server-side limiters (what the linker keeps is what the exports reach);
//! the host build has all three.
//!
//! The module never reads a clock (the driver passes `performance.now()`), and imports nothing
//! but the glue wasm-bindgen generates: it needs no Node API.

// A module built with one feature leaves the helpers only the others use unused; the default
// build (all three, the one clippy checks) still reports dead code.
#![cfg_attr(not(all(feature = "client", feature = "sim", feature = "server")), allow(dead_code, unused_imports))]

use js_sys::{Array, Object, Reflect};
use ratelane::sim::{Server, Ticket};
use ratelane::{BodyHints, FailReason, Output, Request, Response, json};
use wasm_bindgen::prelude::*;
use ratelane_js_common::{self as common, RequestParts};

#[cfg(feature = "server")]
mod server;

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &str = r#"
// The contract's types (js/CONTRACT.md) are written once, in js/core.d.ts, which build.sh
// copies beside this file; the Node package uses the same file.
import type {
  Disposition, FailCode, LlmRequest, RequestParts, SimReport, SimResponseSpec, TransportFailure,
} from './core.js';
"#;

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

/// A time or id argument: a JS number (not a BigInt, not a numeric string).
fn number_arg(what: &str, value: &JsValue) -> Result<u64, JsValue> {
    match value.as_f64() {
        Some(v) => common::whole(v, what).map_err(|m| invalid_argument(&m)),
        None => Err(invalid_argument(&format!(
            "{what} must be a number, got {}",
            type_of(value)
        ))),
    }
}

/// A request id or a ticket ([`common::id`]): a whole number, never truncated into another's.
fn id_arg(what: &str, value: &JsValue) -> Result<u64, JsValue> {
    match value.as_f64() {
        Some(v) => common::id(v, what).map_err(|m| invalid_argument(&m)),
        None => Err(invalid_argument(&format!("{what} must be a number, got {}", type_of(value)))),
    }
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

/// A core [`Request`] from the `RequestSpec` fields in the contract's order, as `requestParts`
/// in `js/driver.js` lays them out: `method`, `path`, `identity`, `major`, `deadlineNs`,
/// `deferAfterNs`, `priority`, `idempotent`, `globalExempt`, `subLimit`, `bodyKeys`,
/// `costNames`, `costAmounts`, `model` (`enqueueParts` takes them as arguments, the rarer calls
/// as one array, [`request_array`]).
fn request_parts(args: [&JsValue; 14]) -> Result<Request, JsValue> {
    let [method, path, identity, major, deadline_ns, defer_after_ns, priority, idempotent, global_exempt, sub_limit, body_keys, cost_names, cost_amounts, model] = args;
    RequestParts {
        method: string_arg("request.method", method)?,
        path: string_arg("request.path", path)?,
        identity: opt_string("request.identity", identity)?,
        major: opt_string("request.major", major)?,
        deadline_ns: opt_number("request.deadlineNs", deadline_ns)?,
        defer_after_ns: opt_number("request.deferAfterNs", defer_after_ns)?,
        priority: opt_number("request.priority", priority)?,
        idempotent: opt_bool("request.idempotent", idempotent)?,
        global_exempt: opt_bool("request.globalExempt", global_exempt)?,
        sub_limit: opt_string("request.subLimit", sub_limit)?,
        body_keys: opt_strings("request.bodyKeys", body_keys)?,
        cost_names: opt_strings("request.costs", cost_names)?,
        cost_values: opt_numbers("request.costs", cost_amounts)?,
        model: opt_string("request.model", model)?,
    }
    .request()
    .map_err(|m| invalid_argument(&m))
}

/// A core [`Request`] from the parts in one array (`predictParts`, `SimServer.handleParts`,
/// `Simulation.enqueueAtParts`).
fn request_array(parts: &Array) -> Result<Request, JsValue> {
    let values: [JsValue; 14] = std::array::from_fn(|i| parts.get(i as u32));
    request_parts(values.each_ref())
}

// ------------------------------------------------------------------------------ outputs

fn set(target: &JsValue, key: &str, value: impl Into<JsValue>) {
    // Defining a property on a plain object or an Error cannot fail.
    let _ = Reflect::set(target, &JsValue::from_str(key), &value.into());
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
#[cfg(feature = "client")]
#[wasm_bindgen]
#[derive(Debug)]
pub struct Limiter {
    inner: ratelane::Limiter,
    /// An output `drainPacked` met but cannot carry, handed out first by the next poll.
    held: Option<Output>,
}

#[cfg(feature = "client")]
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
        let id = id_arg("id", &id)?;
        let failure = common::failure(&string_arg("failure", &failure)?).map_err(|m| invalid_argument(&m))?;
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
        let id = id_arg("id", &id)?;
        self.inner.handle_written(now, id).map_err(core_error)
    }

    /// The caller gave up on `id`; cancellation is its outcome. Throws `unknown_request`.
    pub fn cancel(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] id: JsValue,
    ) -> Result<(), JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let id = id_arg("id", &id)?;
        self.inner.cancel(now, id).map_err(core_error)
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
        #[wasm_bindgen(unchecked_optional_param_type = "string | null")] model: JsValue,
    ) -> Result<f64, JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let request = request_parts([
            &method, &path, &identity, &major, &deadline_ns, &defer_after_ns, &priority, &idempotent, &global_exempt,
            &sub_limit, &body_keys, &cost_names, &cost_amounts, &model,
        ])?;
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
        self.answer(&now_ns, &id, &status, &headers, &wall_clock_ms, || {
            let cost = if absent(&cost) {
                None
            } else {
                let list =
                    cost.dyn_into::<Array>().map_err(|_| invalid_argument("response.body.cost must be an array"))?;
                Some(list.iter().map(|v| v.as_f64()).collect::<Vec<_>>())
            };
            common::body(
                opt_number("response.body.retryAfter", &retry_after)?,
                opt_bool("response.body.global", &global)?,
                cost.as_deref(),
                opt_strings("response.body.errors", &errors)?,
                opt_strings("response.body.usage", &usage_names)?,
                opt_numbers("response.body.usage", &usage_values)?,
            )
            .map_err(|m| invalid_argument(&m))
        })
    }

    /// `handleResponse` with the answer's body as it came, JSON text or bytes: the core reads
    /// it (`ratelane::BodyHints::from_json`, the one body reader of every driver). Headers as
    /// `respond` takes them. Throws `unknown_request`, `invalid_state`.
    #[wasm_bindgen(js_name = respondBody, unchecked_return_type = "Disposition")]
    pub fn respond_body(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] status: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string | string[]")] headers: JsValue,
        #[wasm_bindgen(js_name = wallClockMs, unchecked_param_type = "number | null | undefined")] wall_clock_ms: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string | Uint8Array")] body: JsValue,
    ) -> Result<JsValue, JsValue> {
        self.answer(&now_ns, &id, &status, &headers, &wall_clock_ms, || match body.as_string() {
            Some(text) => Ok(BodyHints::from_json(text.as_bytes())),
            None => match body.dyn_ref::<js_sys::Uint8Array>() {
                Some(bytes) => Ok(BodyHints::from_json(&bytes.to_vec())),
                None => Err(invalid_argument(&format!(
                    "response.bodyText must be a string or a Uint8Array, got {}",
                    type_of(&body)
                ))),
            },
        })
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
        let id = id_arg("id", &id)?;
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
    /// with a 1, 2 or 3 pair, or after the first pair with `one` (`pollOutput`). No object is built.
    #[wasm_bindgen(js_name = drainPacked)]
    pub fn drain_packed(&mut self, #[wasm_bindgen(unchecked_optional_param_type = "boolean | null")] one: JsValue) -> Vec<f64> {
        common::drain_packed(one.as_bool() == Some(true), &mut self.held, || self.inner.poll_output())
    }

    /// `drainPacked` written into `buf` (a `Float64Array`): returns how many numbers it
    /// wrote. When `buf` fills before a pair of kind 1, 2 or 3 the last pair is a `send`: call
    /// again. (The Node addon's cheaper drain; here the array is copied in and out.)
    #[wasm_bindgen(js_name = drainInto)]
    pub fn drain_into(
        &mut self,
        buf: &mut [f64],
        #[wasm_bindgen(unchecked_optional_param_type = "boolean | null")] one: JsValue,
    ) -> Result<usize, JsValue> {
        if buf.len() < 2 {
            return Err(invalid_argument(&format!("buf must hold at least 2 numbers, got {}", buf.len())));
        }
        Ok(common::fill(buf, one.as_bool() == Some(true), &mut self.held, || self.inner.poll_output()))
    }

    /// The output `drainPacked` held, as JSON text: `{"output": <the core's serde form>,
    /// "message": <a failure's text>}`; `undefined` when none is held.
    #[wasm_bindgen(js_name = takeHeld)]
    pub fn take_held(&mut self) -> Option<String> {
        self.held.take().map(|output| common::held_json(&output))
    }

    /// When the request (`parts`: the `RequestSpec` fields in one array, in `enqueueParts`'s
    /// order) would be sent if enqueued at `nowNs` (ns). Throws `invalid_request`.
    #[wasm_bindgen(js_name = predictParts)]
    pub fn predict_parts(
        &self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "RequestParts")] parts: Array,
    ) -> Result<f64, JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let request = request_array(&parts)?;
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
    /// Shopify's and Auto's every answer). Throws `invalid_argument` for a status the core
    /// does not take (`ratelane::Response::status_of`), so that the driver checks `send`'s
    /// status with this one call.
    #[wasm_bindgen(js_name = readsBody)]
    pub fn reads_body(&self, #[wasm_bindgen(unchecked_param_type = "number")] status: JsValue) -> Result<bool, JsValue> {
        let status = match status.as_f64() {
            Some(v) => common::status(v).map_err(|m| invalid_argument(&m))?,
            None => return Err(invalid_argument(&format!("status must be a number, got {}", type_of(&status)))),
        };
        Ok(self.inner.config().profile.reads_body(status))
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

#[cfg(feature = "client")]
impl Limiter {
    /// `respond` and `respondBody` alike: the arguments checked and converted in the order the
    /// contract names them (`body` reads the body's hints after the headers), then
    /// `handle_response`.
    fn answer(
        &mut self,
        now_ns: &JsValue,
        id: &JsValue,
        status: &JsValue,
        headers: &JsValue,
        wall_clock_ms: &JsValue,
        body: impl FnOnce() -> Result<BodyHints, JsValue>,
    ) -> Result<JsValue, JsValue> {
        let now = number_arg("nowNs", now_ns)?;
        let id = id_arg("id", id)?;
        let status = match status.as_f64() {
            Some(v) => common::status(v).map_err(|m| invalid_argument(&m))?,
            None => return Err(invalid_argument(&format!("status must be a number, got {}", type_of(status)))),
        };
        let headers = HeaderText::read(headers)?;
        let pairs = headers.pairs()?;
        let body = body()?;
        let wall_clock_ms = if absent(wall_clock_ms) { None } else { Some(number_arg("wallClockMs", wall_clock_ms)?) };
        let response = Response { status, headers: &pairs, body, wall_clock_ms };
        let d = self.inner.handle_response(now, id, &response).map_err(core_error)?;
        Ok(disposition(d))
    }
}

// ------------------------------------------------------------------------------ simulator

/// A model of Discord's REST rate limiting (`ratelane::sim::Server`), to answer a driver's
/// requests in tests and demos.
#[cfg(feature = "sim")]
#[wasm_bindgen]
#[derive(Debug)]
pub struct SimServer {
    inner: Server,
    next_tag: u64,
}

#[cfg(feature = "sim")]
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

    /// Answers the request (`parts`: the `RequestSpec` fields in one array, in
    /// `Limiter.enqueueParts`'s order) arriving at `nowNs`. `tokens`: what the request really
    /// costs of the server's token budget (`Server::handle_costing`; its client only estimates
    /// it); `null`: the config's `tokens.cost`.
    #[wasm_bindgen(js_name = handleParts, unchecked_return_type = "SimResponseSpec")]
    pub fn handle_parts(
        &mut self,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | null | undefined")] tokens: JsValue,
        #[wasm_bindgen(unchecked_param_type = "RequestParts")] parts: Array,
    ) -> Result<JsValue, JsValue> {
        let now = number_arg("nowNs", &now_ns)?;
        let request = request_array(&parts)?;
        let tokens = match opt_number("tokens", &tokens)? {
            Some(v) if v.fract() != 0.0 => {
                return Err(invalid_argument(&format!("tokens must be a whole number, got {v}")));
            }
            _ if absent(&tokens) => None,
            _ => Some(number_arg("tokens", &tokens)?),
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
#[cfg(feature = "sim")]
#[wasm_bindgen]
#[derive(Debug)]
pub struct Simulation {
    inner: ratelane::sim::Simulation,
    tickets: usize,
}

#[cfg(feature = "sim")]
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

    /// Schedules the request (`parts`: the `RequestSpec` fields in one array, in
    /// `Limiter.enqueueParts`'s order) to be enqueued at `atNs`; returns its ticket.
    #[wasm_bindgen(js_name = enqueueAtParts)]
    pub fn enqueue_at_parts(
        &mut self,
        #[wasm_bindgen(js_name = atNs, unchecked_param_type = "number")] at_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "RequestParts")] parts: Array,
    ) -> Result<usize, JsValue> {
        let at = number_arg("atNs", &at_ns)?;
        let request = request_array(&parts)?;
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
        let ticket = id_arg("ticket", &ticket)?;
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

// ------------------------------------------------------------------------------ LLM bodies

/// The model and estimated tokens of an OpenAI (chat completions, completions, responses,
/// embeddings) or Anthropic (messages) request body, a string or a `Uint8Array`
/// (`ratelane::llm::read_request`): `{ model, tokens }` (`model` null when the body names
/// none), or null for a body that is not such JSON. Throws `invalid_argument` for another type.
#[cfg(feature = "client")]
#[wasm_bindgen(js_name = readLlmRequest, unchecked_return_type = "LlmRequest | null")]
pub fn read_llm_request(#[wasm_bindgen(unchecked_param_type = "string | Uint8Array")] body: JsValue) -> Result<JsValue, JsValue> {
    let read = match body.as_string() {
        Some(text) => ratelane::llm::read_request(text.as_bytes()),
        None => match body.dyn_ref::<js_sys::Uint8Array>() {
            Some(bytes) => ratelane::llm::read_request(&bytes.to_vec()),
            None => return Err(invalid_argument(&format!("body must be a string or a Uint8Array, got {}", type_of(&body)))),
        },
    };
    Ok(match read {
        Some(r) => {
            let out: JsValue = Object::new().into();
            set(&out, "model", r.model.map_or(JsValue::NULL, |m| JsValue::from_str(&m)));
            set(&out, "tokens", r.tokens as f64);
            out
        }
        None => JsValue::NULL,
    })
}

// ------------------------------------------------------------------------------ headers

/// A response's headers as `respond` takes them: one string, names and values on alternate
/// lines, or a flat list `[name, value, ...]` when a name or value holds a line break.
#[cfg(feature = "client")]
enum HeaderText {
    Lines(String),
    List(Vec<String>),
}

#[cfg(feature = "client")]
impl HeaderText {
    fn read(headers: &JsValue) -> Result<HeaderText, JsValue> {
        if let Some(lines) = headers.as_string() {
            return Ok(HeaderText::Lines(lines));
        }
        opt_strings("headers", headers)?
            .map(HeaderText::List)
            .ok_or_else(|| invalid_argument("headers must hold names and values on alternate lines"))
    }

    fn pairs(&self) -> Result<Vec<(&str, &str)>, JsValue> {
        match self {
            HeaderText::Lines(lines) => common::header_lines(lines),
            HeaderText::List(list) => common::header_list(list),
        }
        .ok_or_else(|| invalid_argument("headers must hold names and values on alternate lines"))
    }
}

// ------------------------------------------------------------------------------ codes

/// Every failure code (`FailReason::ALL_CODES`). The packages export it as `FAIL_CODES`.
#[cfg(any(feature = "client", feature = "sim"))]
#[wasm_bindgen(js_name = failCodes, unchecked_return_type = "FailCode[]")]
pub fn fail_codes() -> Vec<String> {
    FailReason::ALL_CODES
        .iter()
        .map(|c| (*c).to_owned())
        .collect()
}

// The client's tables (the profiles' names, the settings table, the body limits) are not in
// the client module: build.sh reads them from the simulator's module (the same core, the same
// build) and writes them beside the client's entries as constants (codes.js, tables.cjs,
// tables.js), so the module a browser bot downloads carries none of them.

/// The header profiles' names (`HeaderProfile::NAMES`). The packages export them as `PROFILES`
/// (build.sh writes them out at build time).
#[cfg(feature = "sim")]
#[wasm_bindgen]
pub fn profiles() -> Vec<String> {
    ratelane::HeaderProfile::NAMES.iter().map(|c| (*c).to_owned()).collect()
}

/// The core's settings table (`ratelane::json::SETTINGS`): `[key, kind]` pairs, from which the
/// driver names its options. The packages export it as `SETTINGS` (written out by build.sh).
#[cfg(feature = "sim")]
#[wasm_bindgen(unchecked_return_type = "Array<[string, string]>")]
pub fn settings() -> Array {
    json::SETTINGS
        .iter()
        .map(|(key, kind)| Array::of2(&JsValue::from_str(key), &JsValue::from_str(kind.as_str())))
        .collect()
}

/// How much of a body the driver reads: `[BodyHints::MAX_BODY, BodyHints::MAX_USAGE_BODY]`
/// (the second for a request with costs). The packages export it as `BODY_LIMITS` (written out
/// by build.sh).
#[cfg(feature = "sim")]
#[wasm_bindgen(js_name = bodyLimits)]
pub fn body_limits() -> Vec<u32> {
    vec![ratelane::BodyHints::MAX_BODY as u32, ratelane::BodyHints::MAX_USAGE_BODY as u32]
}

/// Every caller-error code of the core (`Error::ALL_CODES`). The packages export it as
/// `ERROR_CODES`.
#[cfg(any(feature = "client", feature = "sim"))]
#[wasm_bindgen(js_name = errorCodes)]
pub fn error_codes() -> Vec<String> {
    ratelane::Error::ALL_CODES
        .iter()
        .map(|c| (*c).to_owned())
        .collect()
}
