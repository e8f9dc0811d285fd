//! Server-side limiters (`ratelane::server`): one [`ServerLimit`] (GCRA, leaky bucket or fixed
//! window) and one [`ServerStore`] over it, as the core's `Limit` and `LimitStore`, the same two
//! the napi package exports. The user-facing classes (`GcraStore`, `LeakyBucketStore`,
//! `FixedWindowStore`, `js/CONTRACT.md`) are written once in `js/server_objects.js` over these
//! two; the package entries (entries/) build them with `createServerObjects(render, wasm)`.
//!
//! Answers cross positionally: a decision as `[allowed, limit, remaining, resetAfterNs,
//! clearAfterNs, replenishAfterNs, windowNs, retryAfterS]`, a booking as `[runNow,
//! releaseAtNs, waiting]`, a release as a boolean; `js/server_objects.js` shapes them, and its
//! decisions render their headers with the two renderers below (the core's).

use js_sys::{Array, Object, Reflect};
use ratelane::server::{
    Answer, Decision, FixedWindow, Gcra, InsufficientCapacity, LeakyBucket, LegacyLimit, Limit, LimitStore, Op,
};
use wasm_bindgen::prelude::*;

use crate::{core_error, invalid_argument, js_error, number_arg, set, type_of, whole};

/// `maxKeys` when not given, as in the Python binding.
const DEFAULT_MAX_KEYS: usize = 100_000;

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

// ------------------------------------------------------------------------------ answers

fn optional(value: Option<u64>) -> JsValue {
    value.map_or(JsValue::NULL, |v| JsValue::from_f64(v as f64))
}

/// A decision as it crosses: `[allowed, limit, remaining, resetAfterNs, clearAfterNs,
/// replenishAfterNs, windowNs, retryAfterS]`.
fn fields(d: &Decision) -> JsValue {
    let out = Array::new_with_length(8);
    out.set(0, JsValue::from_bool(d.allowed));
    out.set(1, JsValue::from(d.limit));
    out.set(2, JsValue::from(d.remaining));
    out.set(3, JsValue::from_f64(d.reset_after as f64));
    out.set(4, JsValue::from_f64(d.clear_after as f64));
    out.set(5, optional(d.replenish_after));
    out.set(6, JsValue::from_f64(d.window as f64));
    out.set(7, optional(d.retry_after_secs()));
    out.into()
}

/// The core's op named `name`, with its weight (`check_n`) or factor (`check_scaled`).
fn op(name: &JsValue, arg: &JsValue) -> Result<Op, JsValue> {
    let name = name.as_string().unwrap_or_default();
    Ok(match name.as_str() {
        "check" => Op::Check,
        "check_n" => Op::CheckN(count("n", arg)?),
        "check_scaled" => Op::CheckScaled(arg.as_f64().ok_or_else(|| {
            invalid_argument(&format!("factor must be a number, got {}", type_of(arg)))
        })?),
        "schedule" => Op::Schedule,
        "release" => Op::Release,
        _ => return Err(invalid_argument(&format!("no op {name:?}"))),
    })
}

// ------------------------------------------------------------------------------ limit

/// A server-side limit (`ratelane::server::Limit`): the core's validated config of one
/// algorithm.
#[wasm_bindgen]
#[derive(Debug)]
pub struct ServerLimit {
    inner: Limit,
}

fn limit(config: Result<impl Into<Limit>, ratelane::Error>) -> Result<ServerLimit, JsValue> {
    config.map(|c| ServerLimit { inner: c.into() }).map_err(core_error)
}

#[wasm_bindgen]
impl ServerLimit {
    /// One request per `intervalNs`, `burst` back to back; `options` may only hold `maxKeys`
    /// (the store's). Throws `invalid_config`.
    pub fn gcra(
        #[wasm_bindgen(js_name = intervalNs, unchecked_param_type = "number")] interval_ns: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] burst: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "StoreOptions | null")] options: JsValue,
    ) -> Result<ServerLimit, JsValue> {
        self::options("options", &options, &["maxKeys"])?;
        limit(Gcra::new(number_arg("intervalNs", &interval_ns)?, count("burst", &burst)?))
    }

    /// `quota` requests per `windowNs`, all of them allowed back to back.
    #[wasm_bindgen(js_name = gcraPerWindow)]
    pub fn gcra_per_window(
        #[wasm_bindgen(unchecked_param_type = "number")] quota: JsValue,
        #[wasm_bindgen(js_name = windowNs, unchecked_param_type = "number")] window_ns: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "StoreOptions | null")] options: JsValue,
    ) -> Result<ServerLimit, JsValue> {
        self::options("options", &options, &["maxKeys"])?;
        limit(Gcra::per_window(count("quota", &quota)?, number_arg("windowNs", &window_ns)?))
    }

    /// A bucket of `size` dripping `options.dripSize` (default 1) every `dripRateNs`, with
    /// `options.minIntervalNs`.
    #[wasm_bindgen(js_name = leakyBucket)]
    pub fn leaky_bucket(
        #[wasm_bindgen(unchecked_param_type = "number")] size: JsValue,
        #[wasm_bindgen(js_name = dripRateNs, unchecked_param_type = "number")] drip_rate_ns: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "LeakyBucketOptions | null")] options: JsValue,
    ) -> Result<ServerLimit, JsValue> {
        let options = self::options("options", &options, &["dripSize", "minIntervalNs", "maxKeys"])?;
        let options = options.as_ref();
        let (size, drip_rate) = (count("size", &size)?, number_arg("dripRateNs", &drip_rate_ns)?);
        let drip_size = count_option(options, "dripSize")?.unwrap_or(1);
        let min_interval = ns_option(options, "minIntervalNs")?;
        let bucket = LeakyBucket::new(size, drip_rate, drip_size);
        limit(bucket.and_then(|b| min_interval.map_or(Ok(b), |m| b.with_min_interval(m))))
    }

    /// From a legacy Misskey/Sharkey limit `{ max, durationNs, minIntervalNs }`, translated by
    /// the core.
    pub fn legacy(
        #[wasm_bindgen(unchecked_param_type = "LegacyLimit")] limit: JsValue,
    ) -> Result<ServerLimit, JsValue> {
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
        self::limit(LeakyBucket::from_legacy(legacy))
    }

    /// `quota` per fixed window of `windowNs`.
    #[wasm_bindgen(js_name = fixedWindow)]
    pub fn fixed_window(
        #[wasm_bindgen(unchecked_param_type = "number")] quota: JsValue,
        #[wasm_bindgen(js_name = windowNs, unchecked_param_type = "number")] window_ns: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "StoreOptions | null")] options: JsValue,
    ) -> Result<ServerLimit, JsValue> {
        self::options("options", &options, &["maxKeys"])?;
        limit(FixedWindow::new(count("quota", &quota)?, number_arg("windowNs", &window_ns)?))
    }
}

// ------------------------------------------------------------------------------ store

/// A keyed store over a [`ServerLimit`] (`ratelane::server::LimitStore`).
#[wasm_bindgen]
#[derive(Debug)]
pub struct ServerStore {
    inner: LimitStore,
}

#[wasm_bindgen]
impl ServerStore {
    /// A store for `limit` keeping at most `maxKeys` keys (default 100000). Throws
    /// `invalid_config`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        limit: &ServerLimit,
        #[wasm_bindgen(js_name = maxKeys, unchecked_optional_param_type = "number | null")] max_keys: JsValue,
    ) -> Result<ServerStore, JsValue> {
        let max_keys = if max_keys.is_undefined() || max_keys.is_null() {
            DEFAULT_MAX_KEYS
        } else {
            let v = max_keys.as_f64().ok_or_else(|| {
                invalid_argument(&format!("maxKeys must be a number, got {}", type_of(&max_keys)))
            })?;
            usize::try_from(whole("maxKeys", v).map_err(|m| invalid_argument(&m))?).unwrap_or(usize::MAX)
        };
        Ok(ServerStore { inner: LimitStore::new(limit.inner, max_keys).map_err(core_error)? })
    }

    /// Runs op `name` (`arg`: the weight of `check_n`, the factor of `check_scaled`) for `key`
    /// at `nowNs`: a decision, a booking or a release. Throws `insufficient_capacity` (with
    /// `requested` and `capacity`) for a weight above the burst, and the core's errors; nothing
    /// is counted then.
    #[wasm_bindgen(unchecked_return_type = "[boolean, number, number, number, number, number | null, number, number | null] | [boolean, number, number] | boolean")]
    pub fn apply(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] key: JsValue,
        #[wasm_bindgen(js_name = nowNs, unchecked_param_type = "number")] now_ns: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] arg: JsValue,
    ) -> Result<JsValue, JsValue> {
        let (key, now, op) = (key_arg(&key)?, number_arg("nowNs", &now_ns)?, op(&name, &arg)?);
        Ok(match self.inner.apply(key.as_str(), now, op).map_err(core_error)? {
            Answer::Decision(d) => fields(&d),
            Answer::InsufficientCapacity(e) => return Err(insufficient_capacity(e)),
            Answer::Scheduled(s) => Array::of3(
                &JsValue::from_bool(s.run_now),
                &JsValue::from_f64(s.release_at as f64),
                &JsValue::from_f64(s.waiting as f64),
            )
            .into(),
            Answer::Released(released) => JsValue::from_bool(released),
        })
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
