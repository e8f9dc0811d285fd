//! The server-side limiters' Redis scripts (`redis/scripts/gcra.lua`, `leaky_bucket.lua`,
//! `fixed_window.lua`) for `ratelane/redis` (`bindings-node/redis_limiters.js`): each class
//! holds the core's validated configuration and builds one script call's `ARGV`; the
//! `script*` functions read the scripts' replies back into the core's `Decision` /
//! `Scheduled`, so a decision is the same object as the in-memory stores' and its headers are
//! rendered by the core. The I/O (`EVALSHA`, `EVAL` on `NOSCRIPT`) is the JavaScript module's.
//!
//! The layouts (the contract in `redis/README.md`) are the core's, `ratelane::server::script`,
//! as for `ratelane-redis` and the Python binding: this module only turns JS values into the
//! core's `ReplyItem`s; any other shape throws `redis_bad_reply`, never a panic.

use napi::Env;
use napi::bindgen_prelude::{BigInt, Either, Either3, Object, Unknown};
use napi_derive::napi;
use std::borrow::Cow;

use ratelane::Error;
use ratelane::server::script::{
    self, FixedWindowOp, ReplyError, ReplyItem, ScriptArg, ScriptReply, check_fixed_window, check_gcra,
    check_leaky_bucket, fixed_window_argv, gcra_argv, leaky_bucket_argv,
};
use ratelane::server::{FixedWindow, Gcra, LeakyBucket, LegacyLimit};

use crate::server::{OptionsArg, count, count_option, decision_object, insufficient_capacity, ns_option, options};
use crate::{JsError, NumArg, Result, core_error, invalid_argument, js_error, whole, whole_arg};

/// The texts of the scripts, embedded at build time from the one source in `redis/scripts/`
/// (the package is built inside the repository, as `js/server_objects.js` is embedded by
/// `server.rs`; a packed tarball ships the built addon).
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

/// `ARGV` as the strings the JS module sends.
fn strings(args: &[ScriptArg]) -> Vec<String> {
    args.iter().map(ToString::to_string).collect()
}

type NowArg<'a> = Option<Either3<f64, String, Unknown<'a>>>;

// ------------------------------------------------------------------------------ GCRA

/// `redis/scripts/gcra.lua` for one `Gcra` limit (what `RedisGcra` sends).
#[napi]
#[derive(Debug)]
pub struct GcraScript {
    gcra: Gcra,
}

impl GcraScript {
    fn checked(gcra: std::result::Result<Gcra, Error>) -> Result<Self> {
        let gcra = gcra.map_err(core_error)?;
        check_gcra(&gcra).map_err(core_error)?;
        Ok(GcraScript { gcra })
    }
}

#[napi]
impl GcraScript {
    /// One request per `intervalNs`, `burst` back to back. Throws `invalid_config` (the core's
    /// messages, or a window above 2^52 ns).
    #[napi(constructor, ts_args_type = "intervalNs: number, burst: number")]
    pub fn new(interval_ns: NumArg<'_>, burst: NumArg<'_>) -> Result<Self> {
        Self::checked(Gcra::new(whole_arg(interval_ns, "intervalNs")?, count(burst, "burst")?))
    }

    /// `quota` requests per `windowNs`, all allowed back to back.
    #[napi(factory, ts_args_type = "quota: number, windowNs: number")]
    pub fn per_window(quota: NumArg<'_>, window_ns: NumArg<'_>) -> Result<Self> {
        Self::checked(Gcra::per_window(count(quota, "quota")?, whole_arg(window_ns, "windowNs")?))
    }

    /// Nanoseconds between two requests at the sustained rate.
    #[napi(getter)]
    pub fn interval_ns(&self) -> f64 {
        self.gcra.interval() as f64
    }

    /// Requests admitted back to back on an empty key.
    #[napi(getter)]
    pub fn burst(&self) -> u32 {
        self.gcra.burst()
    }

    /// `burst × intervalNs`.
    #[napi(getter)]
    pub fn window_ns(&self) -> f64 {
        self.gcra.window() as f64
    }

    /// `ARGV` for a request of weight `n` (`0` peeks). Throws `insufficient_capacity` (with
    /// `requested` and `capacity`) when `n` exceeds the burst, and `invalid_request` when
    /// `nowNs` is later than 2^64 - 1 - `windowNs` (as `GcraStore.check` does): nothing needs
    /// sending.
    #[napi(ts_args_type = "n: number, nowNs?: number | string | null, minTtlMs?: number | null")]
    pub fn argv(&self, env: Env, n: NumArg<'_>, now_ns: NowArg<'_>, min_ttl_ms: Option<NumArg<'_>>) -> Result<Vec<String>> {
        let n = count(n, "n")?;
        let argv = gcra_argv(&self.gcra, n, now_arg(now_ns)?, min_ttl_arg(min_ttl_ms)?)
            .map_err(core_error)?
            .map_err(|e| insufficient_capacity(&env, e))?;
        Ok(strings(&argv))
    }
}

// ------------------------------------------------------------------------------ leaky bucket

/// `redis/scripts/leaky_bucket.lua` for one `LeakyBucket` (what `RedisLeakyBucket` sends).
#[napi]
#[derive(Debug)]
pub struct LeakyBucketScript {
    bucket: LeakyBucket,
}

impl LeakyBucketScript {
    fn checked(bucket: std::result::Result<LeakyBucket, Error>) -> Result<Self> {
        let bucket = bucket.map_err(core_error)?;
        check_leaky_bucket(&bucket).map_err(core_error)?;
        Ok(LeakyBucketScript { bucket })
    }
}

#[napi]
impl LeakyBucketScript {
    /// A bucket of `size` dripping `options.dripSize` (default 1) every `dripRateNs`, with
    /// `options.minIntervalNs`. Throws `invalid_config`.
    #[napi(constructor, ts_args_type = "size: number, dripRateNs: number, options?: { dripSize?: number | null; minIntervalNs?: number | null } | null")]
    pub fn new(size: NumArg<'_>, drip_rate_ns: NumArg<'_>, options: OptionsArg<'_>) -> Result<Self> {
        let options = self::options(options, &["dripSize", "minIntervalNs"])?;
        let options = options.as_ref();
        let (size, drip_rate) = (count(size, "size")?, whole_arg(drip_rate_ns, "dripRateNs")?);
        let drip_size = count_option(options, "dripSize")?.unwrap_or(1);
        let min_interval = ns_option(options, "minIntervalNs")?;
        Self::checked(LeakyBucket::new(size, drip_rate, drip_size).and_then(|b| match min_interval {
            Some(m) => b.with_min_interval(m),
            None => Ok(b),
        }))
    }

    /// From a legacy Misskey/Sharkey limit `{ max, durationNs, minIntervalNs }`, translated by
    /// the core. Throws `invalid_config`.
    #[napi(factory, ts_args_type = "limit: { max?: number | null; durationNs?: number | null; minIntervalNs?: number | null }")]
    pub fn from_legacy(limit: OptionsArg<'_>) -> Result<Self> {
        if limit.is_none() {
            return Err(invalid_argument("limit must be an object"));
        }
        let limit = options(limit, &["max", "durationNs", "minIntervalNs"])?;
        let limit = limit.as_ref();
        let legacy = LegacyLimit {
            max: count_option(limit, "max")?,
            duration: ns_option(limit, "durationNs")?,
            min_interval: ns_option(limit, "minIntervalNs")?,
        };
        Self::checked(LeakyBucket::from_legacy(legacy))
    }

    /// Requests the bucket holds.
    #[napi(getter)]
    pub fn size(&self) -> u32 {
        self.bucket.size()
    }

    /// Nanoseconds between two drips.
    #[napi(getter)]
    pub fn drip_rate_ns(&self) -> f64 {
        self.bucket.drip_rate() as f64
    }

    /// Requests drained per drip.
    #[napi(getter)]
    pub fn drip_size(&self) -> u32 {
        self.bucket.drip_size()
    }

    /// At most one request per this many nanoseconds, or `null`.
    #[napi(getter)]
    pub fn min_interval_ns(&self) -> Option<f64> {
        self.bucket.min_interval().map(|m| m as f64)
    }

    /// The time a full bucket takes to drain.
    #[napi(getter)]
    pub fn window_ns(&self) -> f64 {
        self.bucket.window() as f64
    }

    /// `ARGV` for one check; with `factor` (in (0, 1]) the bucket is scaled by the core for
    /// this subject (`invalid_config` otherwise, nothing to send).
    #[napi(ts_args_type = "factor?: number | null, nowNs?: number | string | null, minTtlMs?: number | null")]
    pub fn argv(
        &self,
        factor: Option<Either<f64, Unknown<'_>>>,
        now_ns: NowArg<'_>,
        min_ttl_ms: Option<NumArg<'_>>,
    ) -> Result<Vec<String>> {
        let bucket = match factor {
            None => self.bucket,
            Some(Either::A(f)) => self.bucket.scaled(f).map_err(core_error)?,
            Some(Either::B(u)) => match u.get_type() {
                Ok(napi::ValueType::Undefined | napi::ValueType::Null) => self.bucket,
                _ => return Err(invalid_argument("factor must be a number")),
            },
        };
        Ok(strings(&leaky_bucket_argv(&bucket, now_arg(now_ns)?, min_ttl_arg(min_ttl_ms)?)))
    }
}

// ------------------------------------------------------------------------------ fixed window

/// `redis/scripts/fixed_window.lua` for one `FixedWindow` (what `RedisFixedWindow` sends).
#[napi]
#[derive(Debug)]
pub struct FixedWindowScript {
    window: FixedWindow,
}

#[napi]
impl FixedWindowScript {
    /// `quota` per window of `windowNs`. Throws `invalid_config`.
    #[napi(constructor, ts_args_type = "quota: number, windowNs: number")]
    pub fn new(quota: NumArg<'_>, window_ns: NumArg<'_>) -> Result<Self> {
        let window = FixedWindow::new(count(quota, "quota")?, whole_arg(window_ns, "windowNs")?).map_err(core_error)?;
        check_fixed_window(&window).map_err(core_error)?;
        Ok(FixedWindowScript { window })
    }

    /// Requests per window.
    #[napi(getter)]
    pub fn quota(&self) -> u32 {
        self.window.quota()
    }

    /// The window's length.
    #[napi(getter)]
    pub fn window_ns(&self) -> f64 {
        self.window.window() as f64
    }

    /// `ARGV` for `op`: `'check'`, `'schedule'` or `'release'`.
    #[napi(ts_args_type = "op: 'check' | 'schedule' | 'release', nowNs?: number | string | null, minTtlMs?: number | null")]
    pub fn argv(&self, op: Either<String, Unknown<'_>>, now_ns: NowArg<'_>, min_ttl_ms: Option<NumArg<'_>>) -> Result<Vec<String>> {
        let op = match op {
            Either::A(op) => FixedWindowOp::from_name(&op),
            Either::B(_) => None,
        };
        let Some(op) = op else {
            return Err(invalid_argument("op must be 'check', 'schedule' or 'release'"));
        };
        Ok(strings(&fixed_window_argv(&self.window, op, now_arg(now_ns)?, min_ttl_arg(min_ttl_ms)?)))
    }
}

// ------------------------------------------------------------------------------ replies

fn bad(e: ReplyError) -> JsError {
    js_error("redis_bad_reply", e.into_message())
}

/// One item of a reply as node-redis gives it: a number (a Redis integer), a string (a bulk
/// string; the JS module turns `Buffer`s into strings first), or anything else.
type Item<'a> = Either3<f64, String, Unknown<'a>>;

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

/// Reads any of the scripts' replies (an array) with the core's grammar.
fn parse(reply: ReplyArg<'_>) -> Result<ScriptReply> {
    let values = match reply {
        Either::A(values) => values,
        Either::B(other) => {
            let what = other.get_type().map_or_else(|_| "unknown".to_string(), |t| format!("{t:?}"));
            return Err(bad(ReplyError::not_an_array(&format!("a value of type {what}"))));
        }
    };
    let items: Vec<ReplyItem<'_>> = values.iter().map(item).collect();
    script::parse_reply(&items).map_err(bad)
}

type ReplyArg<'a> = Either<Vec<Item<'a>>, Unknown<'a>>;

/// A check's reply (`gcra.lua`, `leaky_bucket.lua`, `fixed_window.lua check`) as the same
/// decision object the in-memory stores answer with. Throws `insufficient_capacity` for GCRA's
/// `insufficient_capacity` reply, `redis_bad_reply` for anything else.
#[napi(ts_args_type = "reply: unknown", ts_return_type = "ServerDecision")]
pub fn script_decision(env: Env, reply: ReplyArg<'_>) -> Result<Object<'static>> {
    match parse(reply)?.into_decision().map_err(bad)? {
        Ok(d) => decision_object(&env, &d),
        Err(e) => Err(insufficient_capacity(&env, e)),
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

/// `fixed_window.lua schedule`'s reply as a [`RedisScheduled`].
#[napi(ts_args_type = "reply: unknown")]
pub fn script_scheduled(reply: ReplyArg<'_>) -> Result<RedisScheduled> {
    let (s, now) = parse(reply)?.into_scheduled().map_err(bad)?;
    Ok(RedisScheduled {
        run_now: s.run_now,
        release_at_ns: BigInt::from(s.release_at),
        waiting: s.waiting as f64,
        now_ns: BigInt::from(now),
        delay_ns: s.release_at.saturating_sub(now) as f64,
    })
}

/// `fixed_window.lua release`'s reply: whether a delayed job was waiting.
#[napi(ts_args_type = "reply: unknown")]
pub fn script_released(reply: ReplyArg<'_>) -> Result<bool> {
    parse(reply)?.into_released().map_err(bad)
}
