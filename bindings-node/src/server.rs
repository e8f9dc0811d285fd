//! Server-side limiters (`ratelane::server`): one native [`ServerLimit`] (GCRA, leaky bucket or
//! fixed window, with its Redis script's `ARGV` and the reading of its reply) and one native
//! [`ServerStore`] over it, as the core's `Limit` and `LimitStore`. The user-facing classes
//! (`GcraStore`, `LeakyBucketStore`, `FixedWindowStore`, `js/CONTRACT.md`) are written once in
//! `js/server_objects.js` over these two, and the Redis-backed ones in `redis_limiters.js`.
//!
//! Answers cross positionally: a decision as `[allowed, limit, remaining, resetAfterNs,
//! clearAfterNs, replenishAfterNs, windowNs, retryAfterS]`, a booking as `[runNow,
//! releaseAtNs, waiting]`, a release as a boolean; `js/server_objects.js` shapes them, and its
//! decisions render their headers with the two renderers below (the core's). The addon
//! evaluates no JavaScript.

use std::borrow::Cow;

use napi::bindgen_prelude::{BigInt, Either, Either3, Object, Unknown};
use napi::{Env, Status};
use napi_derive::napi;
use ratelane::server::script::{ReplyError, ReplyItem, ScriptReply};
use ratelane::server::{
    Answer, Decision, FixedWindow, Gcra, InsufficientCapacity, LeakyBucket, LegacyLimit, Limit, LimitStore, Op,
};

use crate::{JsError, NumArg, Result, core_error, invalid_argument, js_error, whole, whole_arg};

/// `maxKeys` when not given, as in the Python binding.
const DEFAULT_MAX_KEYS: usize = 100_000;

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

/// `Decision::x_ratelimit_headers` for the decision objects' method (`js/server_objects.js`).
#[napi(js_name = "renderXRateLimitHeaders", skip_typescript)]
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

/// `Decision::ietf_headers` for the decision objects' method (`js/server_objects.js`).
#[napi(skip_typescript)]
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

// ------------------------------------------------------------------------------ answers

/// A decision as it crosses: `[allowed, limit, remaining, resetAfterNs, clearAfterNs,
/// replenishAfterNs, windowNs, retryAfterS]`.
type Fields = (bool, u32, u32, f64, f64, Option<f64>, f64, Option<f64>);

/// A store's answer as it crosses: a decision, a booking `[runNow, releaseAtNs, waiting]`, or
/// whether a delayed job was released.
type Answered = Either3<Fields, (bool, f64, f64), bool>;

fn fields(d: &Decision) -> Fields {
    (
        d.allowed,
        d.limit,
        d.remaining,
        d.reset_after as f64,
        d.clear_after as f64,
        d.replenish_after.map(|t| t as f64),
        d.window as f64,
        d.retry_after_secs().map(|s| s as f64),
    )
}

/// The core's op named `name`, with its weight (`check_n`) or factor (`check_scaled`).
fn op(name: Either<String, Unknown<'_>>, arg: Option<NumArg<'_>>) -> Result<Op> {
    let name = match name {
        Either::A(name) => name,
        Either::B(_) => String::new(),
    };
    Ok(match (name.as_str(), arg) {
        ("check", _) => Op::Check,
        ("check_n", Some(n)) => Op::CheckN(count(n, "n")?),
        ("check_scaled", Some(Either::A(factor))) => Op::CheckScaled(factor),
        ("check_scaled", _) => return Err(invalid_argument("factor must be a number")),
        ("schedule", _) => Op::Schedule,
        ("release", _) => Op::Release,
        _ => return Err(invalid_argument(format!("no op {name:?} (with its argument)"))),
    })
}

// ------------------------------------------------------------------------------ limit

/// A server-side limit (`ratelane::server::Limit`): the core's validated config of one
/// algorithm, and its Redis script.
#[napi]
#[derive(Debug)]
pub struct ServerLimit {
    inner: Limit,
}

fn limit(config: std::result::Result<impl Into<Limit>, ratelane::Error>) -> Result<ServerLimit> {
    config.map(|c| ServerLimit { inner: c.into() }).map_err(core_error)
}

#[napi]
impl ServerLimit {
    /// One request per `intervalNs`, `burst` back to back; `options` may only hold `maxKeys`
    /// (the store's). Throws `invalid_config`.
    #[napi(factory, ts_args_type = "intervalNs: number, burst: number, options?: StoreOptions | null")]
    pub fn gcra(interval_ns: NumArg<'_>, burst: NumArg<'_>, options: OptionsArg<'_>) -> Result<Self> {
        self::options(options, &["maxKeys"])?;
        limit(Gcra::new(whole_arg(interval_ns, "intervalNs")?, count(burst, "burst")?))
    }

    /// `quota` requests per `windowNs`, all of them allowed back to back.
    #[napi(factory, ts_args_type = "quota: number, windowNs: number, options?: StoreOptions | null")]
    pub fn gcra_per_window(quota: NumArg<'_>, window_ns: NumArg<'_>, options: OptionsArg<'_>) -> Result<Self> {
        self::options(options, &["maxKeys"])?;
        limit(Gcra::per_window(count(quota, "quota")?, whole_arg(window_ns, "windowNs")?))
    }

    /// A bucket of `size` dripping `options.dripSize` (default 1) every `dripRateNs`, with
    /// `options.minIntervalNs`.
    #[napi(factory, ts_args_type = "size: number, dripRateNs: number, options?: LeakyBucketOptions | null")]
    pub fn leaky_bucket(size: NumArg<'_>, drip_rate_ns: NumArg<'_>, options: OptionsArg<'_>) -> Result<Self> {
        let options = self::options(options, &["dripSize", "minIntervalNs", "maxKeys"])?;
        let options = options.as_ref();
        let (size, drip_rate) = (count(size, "size")?, whole_arg(drip_rate_ns, "dripRateNs")?);
        let drip_size = count_option(options, "dripSize")?.unwrap_or(1);
        let min_interval = ns_option(options, "minIntervalNs")?;
        let bucket = LeakyBucket::new(size, drip_rate, drip_size);
        limit(bucket.and_then(|b| min_interval.map_or(Ok(b), |m| b.with_min_interval(m))))
    }

    /// From a legacy Misskey/Sharkey limit `{ max, durationNs, minIntervalNs }`, translated by
    /// the core.
    #[napi(factory, ts_args_type = "limit: LegacyLimit")]
    pub fn legacy(limit: OptionsArg<'_>) -> Result<Self> {
        if limit.is_none() {
            return Err(invalid_argument("limit must be an object"));
        }
        let options = options(limit, &["max", "durationNs", "minIntervalNs", "maxKeys"])?;
        let options = options.as_ref();
        let legacy = LegacyLimit {
            max: count_option(options, "max")?,
            duration: ns_option(options, "durationNs")?,
            min_interval: ns_option(options, "minIntervalNs")?,
        };
        self::limit(LeakyBucket::from_legacy(legacy))
    }

    /// `quota` per fixed window of `windowNs`.
    #[napi(factory, ts_args_type = "quota: number, windowNs: number, options?: StoreOptions | null")]
    pub fn fixed_window(quota: NumArg<'_>, window_ns: NumArg<'_>, options: OptionsArg<'_>) -> Result<Self> {
        self::options(options, &["maxKeys"])?;
        limit(FixedWindow::new(count(quota, "quota")?, whole_arg(window_ns, "windowNs")?))
    }

    /// The config's parameters as `[name, value]` pairs (`interval_ns`, `burst`, `window_ns`...;
    /// `null` when not set).
    #[napi(getter)]
    pub fn params(&self) -> Vec<(&'static str, Option<f64>)> {
        self.inner.params().into_iter().map(|(name, value)| (name, value.map(|v| v as f64))).collect()
    }

    /// The script's file stem in `redis/scripts/`: `gcra`, `leaky_bucket` or `fixed_window`.
    #[napi(getter)]
    pub fn script(&self) -> &'static str {
        self.inner.script()
    }

    /// Throws `invalid_config` when the script cannot evaluate this limit exactly (a window
    /// above 2^52 ns).
    #[napi]
    pub fn check_script(&self) -> Result<()> {
        self.inner.check_script().map_err(core_error)
    }

    /// The script's `ARGV` for op `name` (`arg`: the weight of `check_n`, the factor of
    /// `check_scaled`). Throws `insufficient_capacity` for a weight above the burst, and what
    /// the store would throw (`invalid_request`, `invalid_config`): nothing needs sending.
    #[napi(ts_args_type = "name: string, nowNs?: number | string | null, minTtlMs?: number | null, arg?: number | null")]
    pub fn argv(
        &self,
        env: Env,
        name: Either<String, Unknown<'_>>,
        now_ns: NowArg<'_>,
        min_ttl_ms: Option<NumArg<'_>>,
        arg: Option<NumArg<'_>>,
    ) -> Result<Vec<String>> {
        let (op, now) = (op(name, arg)?, now_arg(now_ns)?);
        let argv = self.inner.argv(op, now, min_ttl_arg(min_ttl_ms)?).map_err(core_error)?;
        Ok(argv.map_err(|e| insufficient_capacity(&env, e))?.iter().map(ToString::to_string).collect())
    }

    /// The script's reply (an array) to op `name`: a decision for a check, a [`RedisScheduled`]
    /// for `schedule`, a boolean for `release`. Throws `insufficient_capacity` for GCRA's
    /// `insufficient_capacity` reply, `redis_bad_reply` for any other shape.
    #[napi(ts_args_type = "name: string, reply: unknown", ts_return_type = "[boolean, number, number, number, number, number | null, number, number | null] | RedisScheduled | boolean")]
    pub fn read_reply(
        &self,
        env: Env,
        name: Either<String, Unknown<'_>>,
        reply: ReplyArg<'_>,
    ) -> Result<Either3<Fields, RedisScheduled, bool>> {
        let op = match op(name, None) {
            Err(_) => Op::Check, // `check_n` and `check_scaled` without their argument: a check's reply
            Ok(op) => op,
        };
        let values = match reply {
            Either::A(values) => values,
            Either::B(other) => {
                let what = other.get_type().map_or_else(|_| "unknown".to_string(), |t| format!("{t:?}"));
                return Err(bad(ReplyError::not_an_array(&format!("a value of type {what}"))));
            }
        };
        let items: Vec<ReplyItem<'_>> = values.iter().map(item).collect();
        Ok(match self.inner.read_reply(op, &items).map_err(bad)? {
            ScriptReply::Decision(d, _) => Either3::A(fields(&d)),
            ScriptReply::InsufficientCapacity(e) => return Err(insufficient_capacity(&env, e)),
            ScriptReply::Scheduled(s, now) => Either3::B(RedisScheduled {
                run_now: s.run_now,
                release_at_ns: BigInt::from(s.release_at),
                waiting: s.waiting as f64,
                now_ns: BigInt::from(now),
                delay_ns: s.release_at.saturating_sub(now) as f64,
            }),
            ScriptReply::Released(released) => Either3::C(released),
        })
    }
}

// ------------------------------------------------------------------------------ store

/// A keyed store over a [`ServerLimit`] (`ratelane::server::LimitStore`).
#[napi]
#[derive(Debug)]
pub struct ServerStore {
    inner: LimitStore,
}

#[napi]
impl ServerStore {
    /// A store for `limit` keeping at most `maxKeys` keys (default 100000). Throws
    /// `invalid_config`.
    #[napi(constructor, ts_args_type = "limit: ServerLimit, maxKeys?: number | null")]
    pub fn new(limit: &ServerLimit, max_keys: Option<Either<f64, Unknown<'_>>>) -> Result<Self> {
        let max_keys = match max_keys {
            Some(Either::A(v)) => usize::try_from(whole(v, "maxKeys")?).unwrap_or(usize::MAX),
            Some(Either::B(u)) if !matches!(u.get_type(), Ok(napi::ValueType::Undefined | napi::ValueType::Null)) => {
                return Err(invalid_argument("maxKeys must be a number"));
            }
            _ => DEFAULT_MAX_KEYS,
        };
        Ok(ServerStore { inner: LimitStore::new(limit.inner, max_keys).map_err(core_error)? })
    }

    /// Runs op `name` (`arg`: the weight of `check_n`, the factor of `check_scaled`) for `key`
    /// at `nowNs`: a decision, a booking or a release. Throws `insufficient_capacity` (with
    /// `requested` and `capacity`) for a weight above the burst, and the core's errors; nothing
    /// is counted then.
    #[napi(
        ts_args_type = "name: string, key: string, nowNs: number, arg?: number",
        ts_return_type = "[boolean, number, number, number, number, number | null, number, number | null] | [boolean, number, number] | boolean"
    )]
    pub fn apply(
        &mut self,
        env: Env,
        name: Either<String, Unknown<'_>>,
        key: Either<String, Unknown<'_>>,
        now_ns: NumArg<'_>,
        arg: Option<NumArg<'_>>,
    ) -> Result<Answered> {
        let (key, now, op) = (key_arg(key)?, whole_arg(now_ns, "nowNs")?, op(name, arg)?);
        Ok(match self.inner.apply(key.as_str(), now, op).map_err(core_error)? {
            Answer::Decision(d) => Either3::A(fields(&d)),
            Answer::InsufficientCapacity(e) => return Err(insufficient_capacity(&env, e)),
            Answer::Scheduled(s) => Either3::B((s.run_now, s.release_at as f64, s.waiting as f64)),
            Answer::Released(released) => Either3::C(released),
        })
    }

    /// Keys currently stored.
    #[napi(getter)]
    pub fn len(&self) -> u32 {
        u32::try_from(self.inner.len()).unwrap_or(u32::MAX)
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

// ------------------------------------------------------------------------------ Redis

/// The texts of the scripts, embedded at build time from the one source in `redis/scripts/`
/// (the package is built inside the repository; a packed tarball ships the built addon).
#[napi]
pub const GCRA_LUA: &str = include_str!("../../redis/scripts/gcra.lua");
/// `redis/scripts/leaky_bucket.lua`, embedded at build time.
#[napi]
pub const LEAKY_BUCKET_LUA: &str = include_str!("../../redis/scripts/leaky_bucket.lua");
/// `redis/scripts/fixed_window.lua`, embedded at build time.
#[napi]
pub const FIXED_WINDOW_LUA: &str = include_str!("../../redis/scripts/fixed_window.lua");

/// `nowNs` as a script argument: `""` (Redis's clock) when absent; a number (a safe integer
/// `>= 0`) or a decimal string of at most 20 digits within u64 (the JS module passes a
/// `BigInt` as its decimal text).
fn now_arg(now_ns: Option<Either3<f64, String, Unknown<'_>>>) -> Result<Option<u64>> {
    match now_ns {
        None => Ok(None),
        Some(Either3::A(n)) => Ok(Some(whole(n, "nowNs")?)),
        Some(Either3::B(text)) => {
            if !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit())
                && let Ok(n) = text.parse::<u64>()
            {
                return Ok(Some(n));
            }
            Err(invalid_argument(format!("nowNs must be an integer in 0..2^64, got {text:?}")))
        }
        Some(Either3::C(u)) => match u.get_type() {
            Ok(napi::ValueType::Undefined | napi::ValueType::Null) => Ok(None),
            _ => Err(invalid_argument("nowNs must be a number or a BigInt")),
        },
    }
}

/// `minTtlMs` (the core clamps it to `MAX_WINDOW`, as `ratelane_redis`'s `with_min_ttl_ms`).
fn min_ttl_arg(min_ttl_ms: Option<NumArg<'_>>) -> Result<u64> {
    min_ttl_ms.map_or(Ok(0), |v| whole_arg(v, "minTtlMs"))
}

type NowArg<'a> = Option<Either3<f64, String, Unknown<'a>>>;

fn bad(e: ReplyError) -> JsError {
    js_error("redis_bad_reply", e.into_message())
}

/// One item of a reply as node-redis gives it: a number (a Redis integer), a string (a bulk
/// string; the JS module turns `Buffer`s into strings first), or anything else.
type Item<'a> = Either3<f64, String, Unknown<'a>>;

type ReplyArg<'a> = Either<Vec<Item<'a>>, Unknown<'a>>;

/// The largest magnitude up to which every integer is a distinct `f64`, 2^53.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// One item in the core's terms: a Redis integer is a JS number without a fractional part, at
/// most 2^53 in magnitude (beyond, node-redis may have rounded it; the scripts never answer
/// more than 2^53); `null` / `undefined` are nil.
fn item<'r>(item: &'r Item<'_>) -> ReplyItem<'r> {
    match item {
        Either3::A(n) if n.fract() == 0.0 && n.abs() <= EXACT => ReplyItem::Int(*n as i64),
        Either3::A(n) => ReplyItem::Other(Cow::Owned(n.to_string())),
        Either3::B(s) => ReplyItem::Text(Cow::Borrowed(s)),
        Either3::C(u) => match u.get_type() {
            Ok(napi::ValueType::Null | napi::ValueType::Undefined) => ReplyItem::Nil,
            Ok(t) => ReplyItem::Other(Cow::Owned(format!("a value of type {t:?}"))),
            Err(_) => ReplyItem::Other(Cow::Borrowed("a value of unknown type")),
        },
    }
}

/// A booking in Redis (`fixed_window.lua schedule`). Absolute times are `BigInt`s: with
/// Redis's clock they are Unix nanoseconds, beyond a `Number`'s exact integers.
#[napi(object, object_from_js = false)]
#[derive(Debug)]
pub struct RedisScheduled {
    /// The job may start now (`releaseAtNs` is then `nowNs`).
    pub run_now: bool,
    /// When the job may start, on the script's clock.
    pub release_at_ns: BigInt,
    /// Jobs waiting ahead of and including this one (0 when it runs now).
    pub waiting: f64,
    /// The clock the script used: Redis's `TIME` in Unix nanoseconds, or the `nowNs` given.
    pub now_ns: BigInt,
    /// `releaseAtNs - nowNs` (0 if not after), a `Number`: how long to wait, whatever the
    /// local clock says.
    pub delay_ns: f64,
}

