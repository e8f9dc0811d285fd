//! Server-side limiters (`ratelane::server`): keyed GCRA, leaky-bucket and fixed-window stores,
//! as `js/CONTRACT.md` ("Server-side limiters") describes them.
//!
//! Every decision leaves as the object that `js/server_objects.js` shapes, the same file
//! the wasm package uses, so both cores answer with one shape. That file is evaluated once per
//! Node environment (`install`, from the module's init) and handed the two renderers below, so
//! the headers of a decision are rendered here, by the core, from the decision's fields.

use std::cell::RefCell;
use std::mem::ManuallyDrop;

use napi::bindgen_prelude::{Either, FnArgs, Function, FunctionRef, JsObjectValue, Object, Unknown};
use napi::{Env, Status};
use napi_derive::napi;
use ratelane::server::{
    Decision, FixedWindow, Gcra, InsufficientCapacity, LeakyBucket, LegacyLimit, Scheduled, Store,
};

use crate::{NumArg, Result, core_error, invalid_argument, js_error, whole, whole_arg};

/// The shared JavaScript that shapes the answers (`createServerObjects`).
const SERVER_OBJECTS_JS: &str = include_str!("../../js/server_objects.js");

/// `maxKeys` when not given, as in the Python binding.
const DEFAULT_MAX_KEYS: usize = 100_000;

type DecisionArgs = FnArgs<(bool, u32, u32, f64, f64, Option<f64>, f64, Option<f64>)>;
type ScheduledArgs = FnArgs<(bool, f64, f64)>;

/// The two makers of `js/server_objects.js` for one Node environment.
struct Makers {
    /// The `napi_env` they belong to (a worker thread has its own).
    env: usize,
    // Never dropped: the environment frees its references when it is torn down, and deleting
    // one from a thread-local destructor after that would touch a dead environment.
    decision: ManuallyDrop<FunctionRef<DecisionArgs, Object<'static>>>,
    scheduled: ManuallyDrop<FunctionRef<ScheduledArgs, Object<'static>>>,
}

thread_local! {
    static MAKERS: RefCell<Option<Makers>> = const { RefCell::new(None) };
}

fn env_key(env: &Env) -> usize {
    env.raw() as usize
}

/// Evaluates `js/server_objects.js` for this environment with the renderers exported by this
/// module, then removes the renderers from the exports (they are not part of the contract).
pub fn install(env: &Env, exports: &mut Object) -> napi::Result<()> {
    let render = Object::new(env)?;
    let mut render = render;
    for name in ["xRateLimitHeaders", "ietfHeaders"] {
        let exported = format!("__render_{name}");
        let function: Unknown = exports.get_named_property(&exported)?;
        render.set(name, function)?;
        exports.delete_named_property(&exported)?;
    }
    let factory: Function<Object, Object> = env.run_script(format!(
        "(() => {{\n{SERVER_OBJECTS_JS}\nreturn createServerObjects\n}})()"
    ))?;
    let objects = factory.call(render)?;
    let decision: Function<DecisionArgs, Object<'static>> = objects.get_named_property("decision")?;
    let scheduled: Function<ScheduledArgs, Object<'static>> = objects.get_named_property("scheduled")?;
    let makers = Makers {
        env: env_key(env),
        decision: ManuallyDrop::new(decision.create_ref()?),
        scheduled: ManuallyDrop::new(scheduled.create_ref()?),
    };
    MAKERS.with(|m| *m.borrow_mut() = Some(makers));
    Ok(())
}

fn with_makers<T>(env: &Env, f: impl FnOnce(&Makers) -> napi::Result<T>) -> Result<T> {
    MAKERS
        .with(|m| match &*m.borrow() {
            Some(makers) if makers.env == env_key(env) => f(makers),
            _ => Err(napi::Error::new(Status::GenericFailure, "ratelane: the server objects are not installed in this environment".to_string())),
        })
        .map_err(|e| js_error("invalid_state", e.reason))
}

/// A core decision as the contract's object.
pub(crate) fn decision_object(env: &Env, d: &Decision) -> Result<Object<'static>> {
    with_makers(env, |makers| {
        let args = (
            d.allowed,
            d.limit,
            d.remaining,
            d.reset_after as f64,
            d.clear_after as f64,
            d.replenish_after.map(|t| t as f64),
            d.window as f64,
            d.retry_after_secs().map(|s| s as f64),
        );
        makers.decision.borrow_back(env)?.call(args.into())
    })
}

fn scheduled_object(env: &Env, s: &Scheduled) -> Result<Object<'static>> {
    with_makers(env, |makers| {
        makers.scheduled.borrow_back(env)?.call((s.run_now, s.release_at as f64, s.waiting as f64).into())
    })
}

// ------------------------------------------------------------------------------ arguments

/// A count (`burst`, `quota`, `size`, `n`...): an integer in the u32 range. Zero passes, so
/// that the core's own `invalid_config` message reports it.
pub(crate) fn count(value: NumArg<'_>, what: &str) -> Result<u32> {
    match value {
        Either::A(v) if v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&v) => Ok(v as u32),
        Either::A(v) => Err(invalid_argument(format!("{what} must be an integer in 0..=4294967295, got {v}"))),
        Either::B(_) => Err(invalid_argument(format!("{what} must be a number"))),
    }
}

fn key_arg(key: Either<String, Unknown<'_>>) -> Result<String> {
    match key {
        Either::A(k) => Ok(k),
        Either::B(_) => Err(invalid_argument("key must be a string")),
    }
}

pub(crate) type OptionsArg<'a> = Option<Either<Object<'a>, Unknown<'a>>>;

/// An options object (or `undefined`/`null`) whose keys are all in `known`.
pub(crate) fn options<'a>(value: OptionsArg<'a>, known: &[&str]) -> Result<Option<Object<'a>>> {
    let options = match value {
        None => return Ok(None),
        Some(Either::A(o)) => o,
        Some(Either::B(_)) => return Err(invalid_argument("options must be an object")),
    };
    let keys = Object::keys(&options).map_err(|e| invalid_argument(format!("options: {}", e.reason)))?;
    if let Some(unknown) = keys.iter().find(|k| !known.contains(&k.as_str())) {
        return Err(invalid_argument(format!(
            "unknown option \"{unknown}\"; expected one of: {}",
            known.join(", ")
        )));
    }
    Ok(Some(options))
}

/// An optional numeric option: absent, `undefined` and `null` are `None`.
fn number_option(options: Option<&Object>, key: &str) -> Result<Option<f64>> {
    let Some(options) = options else { return Ok(None) };
    let value: Option<Either<f64, Unknown>> = options
        .get(key)
        .map_err(|e| invalid_argument(format!("{key}: {}", e.reason)))?;
    match value {
        None => Ok(None),
        Some(Either::A(v)) => Ok(Some(v)),
        Some(Either::B(u)) => match u.get_type() {
            Ok(napi::ValueType::Undefined | napi::ValueType::Null) => Ok(None),
            _ => Err(invalid_argument(format!("{key} must be a number"))),
        },
    }
}

pub(crate) fn count_option(options: Option<&Object>, key: &str) -> Result<Option<u32>> {
    number_option(options, key)?.map(|v| count(Either::A(v), key)).transpose()
}

pub(crate) fn ns_option(options: Option<&Object>, key: &str) -> Result<Option<u64>> {
    number_option(options, key)?.map(|v| whole(v, key)).transpose()
}

fn max_keys(options: Option<&Object>) -> Result<usize> {
    Ok(match number_option(options, "maxKeys")? {
        None => DEFAULT_MAX_KEYS,
        Some(v) => usize::try_from(whole(v, "maxKeys")?).unwrap_or(usize::MAX),
    })
}

fn store<A: ratelane::server::Algorithm>(
    algorithm: std::result::Result<A, ratelane::Error>,
    max_keys: usize,
) -> Result<Store<A>> {
    algorithm.and_then(|a| Store::new(a, max_keys)).map_err(core_error)
}

/// `insufficient_capacity`, with the weight asked for and the burst, thrown as the pending
/// exception (napi-rs rethrows a pending exception instead of the returned error).
pub(crate) fn insufficient_capacity(env: &Env, e: InsufficientCapacity) -> crate::JsError {
    let thrown = env.create_error(napi::Error::new(Status::GenericFailure, e.to_string())).and_then(|mut error| {
        error.set("code", InsufficientCapacity::CODE)?;
        error.set("requested", e.requested)?;
        error.set("capacity", e.capacity)?;
        env.throw(error)
    });
    match thrown {
        Ok(()) => js_error(InsufficientCapacity::CODE, e.to_string()),
        Err(failure) => js_error(InsufficientCapacity::CODE, format!("{e} ({})", failure.reason)),
    }
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

// ------------------------------------------------------------------------------ renderers

/// A core [`Decision`] from the fields of a decision object.
#[allow(clippy::too_many_arguments)]
fn decision_from_fields(
    allowed: Either<bool, Unknown<'_>>,
    limit: NumArg<'_>,
    remaining: NumArg<'_>,
    reset_after_ns: NumArg<'_>,
    clear_after_ns: NumArg<'_>,
    replenish_after_ns: Option<NumArg<'_>>,
    window_ns: NumArg<'_>,
) -> Result<Decision> {
    let Either::A(allowed) = allowed else {
        return Err(invalid_argument("decision.allowed must be a boolean"));
    };
    Ok(Decision {
        allowed,
        limit: count(limit, "decision.limit")?,
        remaining: count(remaining, "decision.remaining")?,
        reset_after: whole_arg(reset_after_ns, "decision.resetAfterNs")?,
        clear_after: whole_arg(clear_after_ns, "decision.clearAfterNs")?,
        replenish_after: replenish_after_ns
            .map(|v| whole_arg(v, "decision.replenishAfterNs"))
            .transpose()?,
        window: whole_arg(window_ns, "decision.windowNs")?,
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

/// `Decision::x_ratelimit_headers` for the decision objects' method (removed from the exports
/// by [`install`]).
#[napi(js_name = "__render_xRateLimitHeaders", skip_typescript)]
#[allow(clippy::too_many_arguments)]
pub fn render_x_ratelimit_headers(
    allowed: Either<bool, Unknown<'_>>,
    limit: NumArg<'_>,
    remaining: NumArg<'_>,
    reset_after_ns: NumArg<'_>,
    clear_after_ns: NumArg<'_>,
    replenish_after_ns: Option<NumArg<'_>>,
    window_ns: NumArg<'_>,
) -> Result<String> {
    let d = decision_from_fields(allowed, limit, remaining, reset_after_ns, clear_after_ns, replenish_after_ns, window_ns)?;
    Ok(lines(d.x_ratelimit_headers()))
}

/// `Decision::ietf_headers` for the decision objects' method (removed from the exports by
/// [`install`]).
#[napi(js_name = "__render_ietfHeaders", skip_typescript)]
#[allow(clippy::too_many_arguments)]
pub fn render_ietf_headers(
    allowed: Either<bool, Unknown<'_>>,
    limit: NumArg<'_>,
    remaining: NumArg<'_>,
    reset_after_ns: NumArg<'_>,
    clear_after_ns: NumArg<'_>,
    replenish_after_ns: Option<NumArg<'_>>,
    window_ns: NumArg<'_>,
    policy: Either<String, Unknown<'_>>,
) -> Result<String> {
    let d = decision_from_fields(allowed, limit, remaining, reset_after_ns, clear_after_ns, replenish_after_ns, window_ns)?;
    let Either::A(policy) = policy else {
        return Err(invalid_argument("policy must be a string"));
    };
    Ok(lines(d.ietf_headers(&policy)))
}

// ------------------------------------------------------------------------------ stores

/// GCRA per key (`ratelane::server::GcraStore`): one request per `intervalNs`, `burst` back to
/// back. The fast default.
#[napi]
#[derive(Debug)]
pub struct GcraStore {
    inner: ratelane::server::GcraStore,
}

#[napi]
impl GcraStore {
    /// One request per `intervalNs`, up to `burst` back to back; `options.maxKeys` (default
    /// 100000) bounds the keys kept. Throws `invalid_config`.
    #[napi(constructor, ts_args_type = "intervalNs: number, burst: number, options?: StoreOptions | null")]
    pub fn new(interval_ns: NumArg<'_>, burst: NumArg<'_>, options: OptionsArg<'_>) -> Result<Self> {
        let options = self::options(options, &["maxKeys"])?;
        let gcra = Gcra::new(whole_arg(interval_ns, "intervalNs")?, count(burst, "burst")?);
        Ok(GcraStore { inner: store(gcra, max_keys(options.as_ref())?)? })
    }

    /// `quota` requests per `windowNs`, all of them allowed back to back. Throws
    /// `invalid_config`.
    #[napi(factory, ts_args_type = "quota: number, windowNs: number, options?: StoreOptions | null")]
    pub fn per_window(quota: NumArg<'_>, window_ns: NumArg<'_>, options: OptionsArg<'_>) -> Result<Self> {
        let options = self::options(options, &["maxKeys"])?;
        let gcra = Gcra::per_window(count(quota, "quota")?, whole_arg(window_ns, "windowNs")?);
        Ok(GcraStore { inner: store(gcra, max_keys(options.as_ref())?)? })
    }

    /// Checks one request for `key` at `nowNs`, and counts it if admitted.
    #[napi(ts_args_type = "key: string, nowNs: number", ts_return_type = "ServerDecision")]
    pub fn check(&mut self, env: Env, key: Either<String, Unknown<'_>>, now_ns: NumArg<'_>) -> Result<Object<'static>> {
        let (key, now) = (key_arg(key)?, whole_arg(now_ns, "nowNs")?);
        // `invalid_request` (a `now` past the last instant) needs nowNs near 2^64: out of reach
        // of a JS number, but mapped all the same.
        decision_object(&env, &self.inner.check(key.as_str(), now).map_err(core_error)?)
    }

    /// Checks a request of weight `n`. Throws `insufficient_capacity` (with `requested` and
    /// `capacity`) when `n` exceeds the burst: such a request can never be admitted, and
    /// nothing is counted.
    #[napi(ts_args_type = "key: string, nowNs: number, n: number", ts_return_type = "ServerDecision")]
    pub fn check_n(
        &mut self,
        env: Env,
        key: Either<String, Unknown<'_>>,
        now_ns: NumArg<'_>,
        n: NumArg<'_>,
    ) -> Result<Object<'static>> {
        let (key, now, n) = (key_arg(key)?, whole_arg(now_ns, "nowNs")?, count(n, "n")?);
        match self.inner.check_n(key.as_str(), now, n).map_err(core_error)? {
            Ok(d) => decision_object(&env, &d),
            Err(e) => Err(insufficient_capacity(&env, e)),
        }
    }

    /// Keys currently stored.
    #[napi(getter)]
    pub fn len(&self) -> u32 {
        saturate(self.inner.len())
    }

    /// New keys answered without being stored because the store was full of live keys.
    #[napi(getter)]
    pub fn untracked(&self) -> f64 {
        self.inner.untracked() as f64
    }

    /// The bound on stored keys.
    #[napi(getter)]
    pub fn max_keys(&self) -> f64 {
        self.inner.max_keys() as f64
    }
}

/// A leaky bucket per key (`ratelane::server::LeakyBucketStore`, Sharkey's): `size` requests,
/// `dripSize` of them draining every `dripRateNs`, optionally at most one per `minIntervalNs`.
#[napi]
#[derive(Debug)]
pub struct LeakyBucketStore {
    inner: ratelane::server::LeakyBucketStore,
}

#[napi]
impl LeakyBucketStore {
    /// A bucket of `size` dripping `options.dripSize` (default 1) every `dripRateNs`, with
    /// `options.minIntervalNs` and `options.maxKeys`. Throws `invalid_config`.
    #[napi(constructor, ts_args_type = "size: number, dripRateNs: number, options?: LeakyBucketOptions | null")]
    pub fn new(size: NumArg<'_>, drip_rate_ns: NumArg<'_>, options: OptionsArg<'_>) -> Result<Self> {
        let options = self::options(options, &["dripSize", "minIntervalNs", "maxKeys"])?;
        let options = options.as_ref();
        let (size, drip_rate) = (count(size, "size")?, whole_arg(drip_rate_ns, "dripRateNs")?);
        let drip_size = count_option(options, "dripSize")?.unwrap_or(1);
        let min_interval = ns_option(options, "minIntervalNs")?;
        let bucket = LeakyBucket::new(size, drip_rate, drip_size).and_then(|b| match min_interval {
            Some(m) => b.with_min_interval(m),
            None => Ok(b),
        });
        Ok(LeakyBucketStore { inner: store(bucket, max_keys(options)?)? })
    }

    /// From a legacy Misskey/Sharkey limit `{ max, durationNs, minIntervalNs }` (plus
    /// `maxKeys`). Throws `invalid_config`.
    #[napi(factory, ts_args_type = "limit: LegacyLimit")]
    pub fn from_legacy(limit: OptionsArg<'_>) -> Result<Self> {
        if limit.is_none() {
            return Err(invalid_argument("limit must be an object"));
        }
        let limit = options(limit, &["max", "durationNs", "minIntervalNs", "maxKeys"])?;
        let limit = limit.as_ref();
        let legacy = LegacyLimit {
            max: count_option(limit, "max")?,
            duration: ns_option(limit, "durationNs")?,
            min_interval: ns_option(limit, "minIntervalNs")?,
        };
        Ok(LeakyBucketStore { inner: store(LeakyBucket::from_legacy(legacy), max_keys(limit)?)? })
    }

    /// Checks one request for `key` at `nowNs`.
    #[napi(ts_args_type = "key: string, nowNs: number", ts_return_type = "ServerDecision")]
    pub fn check(&mut self, env: Env, key: Either<String, Unknown<'_>>, now_ns: NumArg<'_>) -> Result<Object<'static>> {
        let (key, now) = (key_arg(key)?, whole_arg(now_ns, "nowNs")?);
        decision_object(&env, &self.inner.check(key.as_str(), now))
    }

    /// Checks one request with the bucket scaled by `factor` in (0, 1] for this subject.
    /// Throws `invalid_config` for another factor (nothing is counted).
    #[napi(ts_args_type = "key: string, nowNs: number, factor: number", ts_return_type = "ServerDecision")]
    pub fn check_scaled(
        &mut self,
        env: Env,
        key: Either<String, Unknown<'_>>,
        now_ns: NumArg<'_>,
        factor: NumArg<'_>,
    ) -> Result<Object<'static>> {
        let (key, now) = (key_arg(key)?, whole_arg(now_ns, "nowNs")?);
        let Either::A(factor) = factor else {
            return Err(invalid_argument("factor must be a number"));
        };
        let d = self.inner.check_scaled(key.as_str(), now, factor).map_err(core_error)?;
        decision_object(&env, &d)
    }

    /// Keys currently stored.
    #[napi(getter)]
    pub fn len(&self) -> u32 {
        saturate(self.inner.len())
    }

    /// New keys answered without being stored because the store was full of live keys.
    #[napi(getter)]
    pub fn untracked(&self) -> f64 {
        self.inner.untracked() as f64
    }

    /// The bound on stored keys.
    #[napi(getter)]
    pub fn max_keys(&self) -> f64 {
        self.inner.max_keys() as f64
    }
}

/// A fixed window per key (`ratelane::server::FixedWindowStore`): `quota` per `windowNs`, with
/// a release-time estimate for delayed jobs.
#[napi]
#[derive(Debug)]
pub struct FixedWindowStore {
    inner: ratelane::server::FixedWindowStore,
}

#[napi]
impl FixedWindowStore {
    /// `quota` requests per window of `windowNs`, the window opening with a key's first
    /// request. Throws `invalid_config`.
    #[napi(constructor, ts_args_type = "quota: number, windowNs: number, options?: StoreOptions | null")]
    pub fn new(quota: NumArg<'_>, window_ns: NumArg<'_>, options: OptionsArg<'_>) -> Result<Self> {
        let options = self::options(options, &["maxKeys"])?;
        let window = FixedWindow::new(count(quota, "quota")?, whole_arg(window_ns, "windowNs")?);
        Ok(FixedWindowStore { inner: store(window, max_keys(options.as_ref())?)? })
    }

    /// Checks one request for `key` at `nowNs`.
    #[napi(ts_args_type = "key: string, nowNs: number", ts_return_type = "ServerDecision")]
    pub fn check(&mut self, env: Env, key: Either<String, Unknown<'_>>, now_ns: NumArg<'_>) -> Result<Object<'static>> {
        let (key, now) = (key_arg(key)?, whole_arg(now_ns, "nowNs")?);
        decision_object(&env, &self.inner.check(key.as_str(), now))
    }

    /// Books a slot for one job of group `key`: it runs now, or at `releaseAtNs`.
    #[napi(ts_args_type = "key: string, nowNs: number", ts_return_type = "Scheduled")]
    pub fn schedule(&mut self, env: Env, key: Either<String, Unknown<'_>>, now_ns: NumArg<'_>) -> Result<Object<'static>> {
        let (key, now) = (key_arg(key)?, whole_arg(now_ns, "nowNs")?);
        scheduled_object(&env, &self.inner.schedule(key.as_str(), now).map_err(core_error)?)
    }

    /// Records that one delayed job of `key` was released (or dropped); false if none waits.
    #[napi(ts_args_type = "key: string, nowNs: number")]
    pub fn release(&mut self, key: Either<String, Unknown<'_>>, now_ns: NumArg<'_>) -> Result<bool> {
        let (key, now) = (key_arg(key)?, whole_arg(now_ns, "nowNs")?);
        Ok(self.inner.release(key.as_str(), now))
    }

    /// Keys currently stored.
    #[napi(getter)]
    pub fn len(&self) -> u32 {
        saturate(self.inner.len())
    }

    /// New keys answered without being stored because the store was full of live keys.
    #[napi(getter)]
    pub fn untracked(&self) -> f64 {
        self.inner.untracked() as f64
    }

    /// The bound on stored keys.
    #[napi(getter)]
    pub fn max_keys(&self) -> f64 {
        self.inner.max_keys() as f64
    }
}
