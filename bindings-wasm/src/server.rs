//! Server-side limiters (`ratelane::server`): keyed GCRA, leaky-bucket and fixed-window stores,
//! as `js/CONTRACT.md` ("Server-side limiters") describes them.
//!
//! Every decision leaves as the object that `js/server_objects.js` shapes, the same file
//! the napi package uses, so both cores answer with one shape. The package entries (entries/)
//! call `createServerObjects` with the two renderers exported here and register the result with
//! [`install_server_objects`] once the module is instantiated; the headers of a decision are
//! therefore rendered here, by the core, from the decision's fields.

use std::cell::RefCell;

use js_sys::{Object, Reflect};
use ratelane::server::{
    Decision, FixedWindow, Gcra, InsufficientCapacity, LeakyBucket, LegacyLimit, Scheduled, Store,
};
use wasm_bindgen::prelude::*;

use crate::{core_error, invalid_argument, js_error, number_arg, set, type_of, whole};

/// `maxKeys` when not given, as in the Python binding.
const DEFAULT_MAX_KEYS: usize = 100_000;

#[wasm_bindgen]
extern "C" {
    /// What `createServerObjects` (js/server_objects.js) returns: the makers of the answers.
    #[derive(Debug)]
    pub type ServerObjects;

    #[wasm_bindgen(method)]
    #[allow(clippy::too_many_arguments)]
    fn decision(
        this: &ServerObjects,
        allowed: bool,
        limit: u32,
        remaining: u32,
        reset_after_ns: f64,
        clear_after_ns: f64,
        replenish_after_ns: JsValue,
        window_ns: f64,
        retry_after_s: JsValue,
    ) -> JsValue;

    #[wasm_bindgen(method)]
    fn scheduled(this: &ServerObjects, run_now: bool, release_at_ns: f64, waiting: f64) -> JsValue;
}

thread_local! {
    static SERVER_OBJECTS: RefCell<Option<ServerObjects>> = const { RefCell::new(None) };
}

/// Registers the makers from `createServerObjects` (called by the package entries).
#[wasm_bindgen(js_name = installServerObjects, skip_typescript)]
pub fn install_server_objects(objects: ServerObjects) {
    SERVER_OBJECTS.with(|o| *o.borrow_mut() = Some(objects));
}

fn with_objects(f: impl FnOnce(&ServerObjects) -> JsValue) -> Result<JsValue, JsValue> {
    SERVER_OBJECTS.with(|o| match &*o.borrow() {
        Some(objects) => Ok(f(objects)),
        None => Err(js_error(
            "invalid_state",
            "ratelane-wasm: load the module through the package (core.cjs or core.js), which installs the server objects",
        )),
    })
}

fn optional(value: Option<u64>) -> JsValue {
    value.map_or(JsValue::NULL, |v| JsValue::from_f64(v as f64))
}

/// A core decision as the contract's object.
fn decision_object(d: &Decision) -> Result<JsValue, JsValue> {
    with_objects(|objects| {
        objects.decision(
            d.allowed,
            d.limit,
            d.remaining,
            d.reset_after as f64,
            d.clear_after as f64,
            optional(d.replenish_after),
            d.window as f64,
            optional(d.retry_after_secs()),
        )
    })
}

fn scheduled_object(s: &Scheduled) -> Result<JsValue, JsValue> {
    with_objects(|objects| objects.scheduled(s.run_now, s.release_at as f64, s.waiting as f64))
}

// ------------------------------------------------------------------------------ arguments

/// A count (`burst`, `quota`, `size`, `n`...): an integer in the u32 range. Zero passes, so
/// that the core's own `invalid_config` message reports it.
fn count(what: &str, value: &JsValue) -> Result<u32, JsValue> {
    match value.as_f64() {
        Some(v) if v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&v) => Ok(v as u32),
        Some(v) => Err(invalid_argument(&format!(
            "{what} must be an integer in 0..=4294967295, got {v}"
        ))),
        None => Err(invalid_argument(&format!(
            "{what} must be a number, got {}",
            type_of(value)
        ))),
    }
}

fn key_arg(value: &JsValue) -> Result<String, JsValue> {
    value.as_string().ok_or_else(|| {
        invalid_argument(&format!("key must be a string, got {}", type_of(value)))
    })
}

/// An options object (or `undefined`/`null`) whose keys are all in `known`.
fn options(what: &str, value: &JsValue, known: &[&str]) -> Result<Option<Object>, JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    let Some(object) = value.dyn_ref::<Object>().filter(|_| value.is_object()) else {
        return Err(invalid_argument(&format!(
            "{what} must be an object, got {}",
            type_of(value)
        )));
    };
    for key in Object::keys(object).iter() {
        let key = key.as_string().unwrap_or_default();
        if !known.contains(&key.as_str()) {
            return Err(invalid_argument(&format!(
                "unknown option \"{key}\"; expected one of: {}",
                known.join(", ")
            )));
        }
    }
    Ok(Some(object.clone()))
}

/// An optional numeric option: absent, `undefined` and `null` are `None`.
fn number_option(options: Option<&Object>, key: &str) -> Result<Option<f64>, JsValue> {
    let Some(options) = options else {
        return Ok(None);
    };
    let value = Reflect::get(options, &JsValue::from_str(key))?;
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    value.as_f64().map(Some).ok_or_else(|| {
        invalid_argument(&format!("{key} must be a number, got {}", type_of(&value)))
    })
}

fn count_option(options: Option<&Object>, key: &str) -> Result<Option<u32>, JsValue> {
    number_option(options, key)?
        .map(|v| count(key, &JsValue::from_f64(v)))
        .transpose()
}

fn ns_option(options: Option<&Object>, key: &str) -> Result<Option<u64>, JsValue> {
    number_option(options, key)?
        .map(|v| whole(key, v).map_err(|m| invalid_argument(&m)))
        .transpose()
}

fn max_keys(options: Option<&Object>) -> Result<usize, JsValue> {
    Ok(match number_option(options, "maxKeys")? {
        None => DEFAULT_MAX_KEYS,
        Some(v) => usize::try_from(whole("maxKeys", v).map_err(|m| invalid_argument(&m))?)
            .unwrap_or(usize::MAX),
    })
}

fn store<A: ratelane::server::Algorithm>(
    algorithm: Result<A, ratelane::Error>,
    max_keys: usize,
) -> Result<Store<A>, JsValue> {
    algorithm
        .and_then(|a| Store::new(a, max_keys))
        .map_err(core_error)
}

/// `insufficient_capacity`, with the weight asked for and the burst.
fn insufficient_capacity(e: InsufficientCapacity) -> JsValue {
    let error = js_error(InsufficientCapacity::CODE, &e.to_string());
    set(&error, "requested", e.requested);
    set(&error, "capacity", e.capacity);
    error
}

// ------------------------------------------------------------------------------ renderers

/// A core [`Decision`] from the fields of a decision object.
fn decision_from_fields(
    allowed: &JsValue,
    limit: &JsValue,
    remaining: &JsValue,
    reset_after_ns: &JsValue,
    clear_after_ns: &JsValue,
    replenish_after_ns: &JsValue,
    window_ns: &JsValue,
) -> Result<Decision, JsValue> {
    let allowed = allowed
        .as_bool()
        .ok_or_else(|| invalid_argument("decision.allowed must be a boolean"))?;
    let replenish_after = if replenish_after_ns.is_null() || replenish_after_ns.is_undefined() {
        None
    } else {
        Some(number_arg("decision.replenishAfterNs", replenish_after_ns)?)
    };
    Ok(Decision {
        allowed,
        limit: count("decision.limit", limit)?,
        remaining: count("decision.remaining", remaining)?,
        reset_after: number_arg("decision.resetAfterNs", reset_after_ns)?,
        clear_after: number_arg("decision.clearAfterNs", clear_after_ns)?,
        replenish_after,
        window: number_arg("decision.windowNs", window_ns)?,
    })
}

/// The headers as `js/server_objects.js` takes them: name and value on alternate lines.
fn lines(headers: Vec<(&'static str, String)>) -> String {
    let mut out = String::with_capacity(96);
    for (name, value) in headers {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(name);
        out.push('\n');
        out.push_str(&value);
    }
    out
}

/// `Decision::x_ratelimit_headers`, for the decision objects' method.
#[wasm_bindgen(js_name = renderXRateLimitHeaders, skip_typescript)]
pub fn render_x_ratelimit_headers(
    allowed: JsValue,
    limit: JsValue,
    remaining: JsValue,
    reset_after_ns: JsValue,
    clear_after_ns: JsValue,
    replenish_after_ns: JsValue,
    window_ns: JsValue,
) -> Result<String, JsValue> {
    let d = decision_from_fields(
        &allowed,
        &limit,
        &remaining,
        &reset_after_ns,
        &clear_after_ns,
        &replenish_after_ns,
        &window_ns,
    )?;
    Ok(lines(d.x_ratelimit_headers()))
}

/// `Decision::ietf_headers`, for the decision objects' method.
#[wasm_bindgen(js_name = renderIetfHeaders, skip_typescript)]
#[allow(clippy::too_many_arguments)]
pub fn render_ietf_headers(
    allowed: JsValue,
    limit: JsValue,
    remaining: JsValue,
    reset_after_ns: JsValue,
    clear_after_ns: JsValue,
    replenish_after_ns: JsValue,
    window_ns: JsValue,
    policy: JsValue,
) -> Result<String, JsValue> {
    let d = decision_from_fields(
        &allowed,
        &limit,
        &remaining,
        &reset_after_ns,
        &clear_after_ns,
        &replenish_after_ns,
        &window_ns,
    )?;
    let policy = policy.as_string().ok_or_else(|| {
        invalid_argument(&format!("policy must be a string, got {}", type_of(&policy)))
    })?;
    Ok(lines(d.ietf_headers(&policy)))
}

// ------------------------------------------------------------------------------ stores

/// GCRA per key (`ratelane::server::GcraStore`): one request per `intervalNs`, `burst` back to
/// back. The fast default.
#[wasm_bindgen]
#[derive(Debug)]
pub struct GcraStore {
    inner: ratelane::server::GcraStore,
}

#[wasm_bindgen]
impl GcraStore {
    /// One request per `intervalNs`, up to `burst` back to back; `options.maxKeys` (default
    /// 100000) bounds the keys kept. Throws `invalid_config`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(js_name = intervalNs, unchecked_param_type = "number")] interval_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] burst: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "StoreOptions | null")] options: JsValue,
    ) -> Result<GcraStore, JsValue> {
        let options = self::options("options", &options, &["maxKeys"])?;
        let gcra = Gcra::new(number_arg("intervalNs", &interval_ns)?, count("burst", &burst)?);
        Ok(GcraStore {
            inner: store(gcra, max_keys(options.as_ref())?)?,
        })
    }

    /// `quota` requests per `windowNs`, all of them allowed back to back. Throws
    /// `invalid_config`.
    #[wasm_bindgen(js_name = perWindow)]
    pub fn per_window(
        #[wasm_bindgen(unchecked_param_type = "number")] quota: JsValue,
        #[wasm_bindgen(js_name = windowNs, unchecked_param_type = "number")] window_ns: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "StoreOptions | null")] options: JsValue,
    ) -> Result<GcraStore, JsValue> {
        let options = self::options("options", &options, &["maxKeys"])?;
        let gcra = Gcra::per_window(count("quota", &quota)?, number_arg("windowNs", &window_ns)?);
        Ok(GcraStore {
            inner: store(gcra, max_keys(options.as_ref())?)?,
        })
    }

    /// Checks one request for `key` at `nowNs`, and counts it if admitted.
    #[wasm_bindgen(unchecked_return_type = "ServerDecision")]
    pub fn check(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: JsValue,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
    ) -> Result<JsValue, JsValue> {
        let (key, now) = (key_arg(&key)?, number_arg("nowNs", &now_ns)?);
        // `invalid_request` (a `now` past the last instant) needs nowNs near 2^64: out of reach
        // of a JS number, but mapped all the same.
        decision_object(&self.inner.check(key.as_str(), now).map_err(core_error)?)
    }

    /// Checks a request of weight `n`. Throws `insufficient_capacity` (with `requested` and
    /// `capacity`) when `n` exceeds the burst: such a request can never be admitted, and
    /// nothing is counted.
    #[wasm_bindgen(js_name = checkN, unchecked_return_type = "ServerDecision")]
    pub fn check_n(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: JsValue,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] n: JsValue,
    ) -> Result<JsValue, JsValue> {
        let (key, now, n) = (key_arg(&key)?, number_arg("nowNs", &now_ns)?, count("n", &n)?);
        match self.inner.check_n(key.as_str(), now, n).map_err(core_error)? {
            Ok(d) => decision_object(&d),
            Err(e) => Err(insufficient_capacity(e)),
        }
    }

    /// Keys currently stored.
    #[wasm_bindgen(getter)]
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// New keys answered without being stored because the store was full of live keys.
    #[wasm_bindgen(getter)]
    pub fn untracked(&self) -> f64 {
        self.inner.untracked() as f64
    }

    /// The bound on stored keys.
    #[wasm_bindgen(getter = maxKeys)]
    pub fn max_keys(&self) -> f64 {
        self.inner.max_keys() as f64
    }
}

/// A leaky bucket per key (`ratelane::server::LeakyBucketStore`, Sharkey's): `size` requests,
/// `dripSize` of them draining every `dripRateNs`, optionally at most one per `minIntervalNs`.
#[wasm_bindgen]
#[derive(Debug)]
pub struct LeakyBucketStore {
    inner: ratelane::server::LeakyBucketStore,
}

#[wasm_bindgen]
impl LeakyBucketStore {
    /// A bucket of `size` dripping `options.dripSize` (default 1) every `dripRateNs`, with
    /// `options.minIntervalNs` and `options.maxKeys`. Throws `invalid_config`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number")] size: JsValue,
        #[wasm_bindgen(js_name = dripRateNs, unchecked_param_type = "number")] drip_rate_ns: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "LeakyBucketOptions | null")] options: JsValue,
    ) -> Result<LeakyBucketStore, JsValue> {
        let options = self::options("options", &options, &["dripSize", "minIntervalNs", "maxKeys"])?;
        let options = options.as_ref();
        let (size, drip_rate) = (count("size", &size)?, number_arg("dripRateNs", &drip_rate_ns)?);
        let drip_size = count_option(options, "dripSize")?.unwrap_or(1);
        let min_interval = ns_option(options, "minIntervalNs")?;
        let bucket = LeakyBucket::new(size, drip_rate, drip_size).and_then(|b| match min_interval {
            Some(m) => b.with_min_interval(m),
            None => Ok(b),
        });
        Ok(LeakyBucketStore {
            inner: store(bucket, max_keys(options)?)?,
        })
    }

    /// From a legacy Misskey/Sharkey limit `{ max, durationNs, minIntervalNs }` (plus
    /// `maxKeys`). Throws `invalid_config`.
    #[wasm_bindgen(js_name = fromLegacy)]
    pub fn from_legacy(
        #[wasm_bindgen(unchecked_param_type = "LegacyLimit")] limit: JsValue,
    ) -> Result<LeakyBucketStore, JsValue> {
        if limit.is_undefined() || limit.is_null() {
            return Err(invalid_argument("limit must be an object"));
        }
        let limit = options("limit", &limit, &["max", "durationNs", "minIntervalNs", "maxKeys"])?;
        let limit = limit.as_ref();
        let legacy = LegacyLimit {
            max: count_option(limit, "max")?,
            duration: ns_option(limit, "durationNs")?,
            min_interval: ns_option(limit, "minIntervalNs")?,
        };
        Ok(LeakyBucketStore {
            inner: store(LeakyBucket::from_legacy(legacy), max_keys(limit)?)?,
        })
    }

    /// Checks one request for `key` at `nowNs`.
    #[wasm_bindgen(unchecked_return_type = "ServerDecision")]
    pub fn check(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: JsValue,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
    ) -> Result<JsValue, JsValue> {
        let (key, now) = (key_arg(&key)?, number_arg("nowNs", &now_ns)?);
        decision_object(&self.inner.check(key.as_str(), now))
    }

    /// Checks one request with the bucket scaled by `factor` in (0, 1] for this subject.
    /// Throws `invalid_config` for another factor (nothing is counted).
    #[wasm_bindgen(js_name = checkScaled, unchecked_return_type = "ServerDecision")]
    pub fn check_scaled(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: JsValue,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] factor: JsValue,
    ) -> Result<JsValue, JsValue> {
        let (key, now) = (key_arg(&key)?, number_arg("nowNs", &now_ns)?);
        let factor = factor.as_f64().ok_or_else(|| {
            invalid_argument(&format!("factor must be a number, got {}", type_of(&factor)))
        })?;
        let d = self
            .inner
            .check_scaled(key.as_str(), now, factor)
            .map_err(core_error)?;
        decision_object(&d)
    }

    /// Keys currently stored.
    #[wasm_bindgen(getter)]
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// New keys answered without being stored because the store was full of live keys.
    #[wasm_bindgen(getter)]
    pub fn untracked(&self) -> f64 {
        self.inner.untracked() as f64
    }

    /// The bound on stored keys.
    #[wasm_bindgen(getter = maxKeys)]
    pub fn max_keys(&self) -> f64 {
        self.inner.max_keys() as f64
    }
}

/// A fixed window per key (`ratelane::server::FixedWindowStore`): `quota` per `windowNs`, with
/// a release-time estimate for delayed jobs.
#[wasm_bindgen]
#[derive(Debug)]
pub struct FixedWindowStore {
    inner: ratelane::server::FixedWindowStore,
}

#[wasm_bindgen]
impl FixedWindowStore {
    /// `quota` requests per window of `windowNs`, the window opening with a key's first
    /// request. Throws `invalid_config`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number")] quota: JsValue,
        #[wasm_bindgen(js_name = windowNs, unchecked_param_type = "number")] window_ns: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "StoreOptions | null")] options: JsValue,
    ) -> Result<FixedWindowStore, JsValue> {
        let options = self::options("options", &options, &["maxKeys"])?;
        let window = FixedWindow::new(count("quota", &quota)?, number_arg("windowNs", &window_ns)?);
        Ok(FixedWindowStore {
            inner: store(window, max_keys(options.as_ref())?)?,
        })
    }

    /// Checks one request for `key` at `nowNs`.
    #[wasm_bindgen(unchecked_return_type = "ServerDecision")]
    pub fn check(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: JsValue,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
    ) -> Result<JsValue, JsValue> {
        let (key, now) = (key_arg(&key)?, number_arg("nowNs", &now_ns)?);
        decision_object(&self.inner.check(key.as_str(), now))
    }

    /// Books a slot for one job of group `key`: it runs now, or at `releaseAtNs`.
    #[wasm_bindgen(unchecked_return_type = "Scheduled")]
    pub fn schedule(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: JsValue,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
    ) -> Result<JsValue, JsValue> {
        let (key, now) = (key_arg(&key)?, number_arg("nowNs", &now_ns)?);
        scheduled_object(&self.inner.schedule(key.as_str(), now).map_err(core_error)?)
    }

    /// Records that one delayed job of `key` was released (or dropped); false if none waits.
    pub fn release(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: JsValue,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
    ) -> Result<bool, JsValue> {
        let (key, now) = (key_arg(&key)?, number_arg("nowNs", &now_ns)?);
        Ok(self.inner.release(key.as_str(), now))
    }

    /// Keys currently stored.
    #[wasm_bindgen(getter)]
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// New keys answered without being stored because the store was full of live keys.
    #[wasm_bindgen(getter)]
    pub fn untracked(&self) -> f64 {
        self.inner.untracked() as f64
    }

    /// The bound on stored keys.
    #[wasm_bindgen(getter = maxKeys)]
    pub fn max_keys(&self) -> f64 {
        self.inner.max_keys() as f64
    }
}
