//! The server-side limiters' Redis scripts (`redis/scripts/gcra.lua`, `leaky_bucket.lua`,
//! `fixed_window.lua`) for `ratelane/redis` (`bindings-node/redis_limiters.js`): each class
//! holds the core's validated configuration and builds one script call's `ARGV`; the
//! `script*` functions read the scripts' replies back into the core's `Decision` /
//! `Scheduled`, so a decision is the same object as the in-memory stores' and its headers are
//! rendered by the core. The I/O (`EVALSHA`, `EVAL` on `NOSCRIPT`) is the JavaScript module's.
//!
//! The layouts are the contract in `redis/README.md`, the same that `ratelane-redis`
//! (`redis/src/reply.rs`) and the Python binding (`bindings-python/src/python/scripts.rs`)
//! read; any other shape throws `redis_bad_reply`, never a panic.

use napi::Env;
use napi::bindgen_prelude::{BigInt, Either, Either3, Object, Unknown};
use napi_derive::napi;
use ratelane::Error;
use ratelane::server::{
    Decision, FixedWindow, Gcra, InsufficientCapacity, LeakyBucket, LegacyLimit, Scheduled,
};

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

/// The longest window the scripts evaluate exactly, 2^52 ns (`ratelane_redis::MAX_WINDOW`):
/// Lua numbers are doubles and the scripts add up to two windows.
const MAX_WINDOW: u64 = 1 << 52;

/// `ratelane_redis`'s check of a configured window, with its message.
fn require_window(what: &str, window: u64) -> Result<()> {
    if window <= MAX_WINDOW {
        return Ok(());
    }
    Err(core_error(Error::InvalidConfig(format!(
        "{what} ({window} ns) is longer than the Redis scripts evaluate exactly ({MAX_WINDOW} ns)"
    ))))
}

/// `nowNs` as a script argument: `""` (Redis's clock) when absent; a number (a safe integer
/// `>= 0`) or a decimal string of at most 20 digits within u64 (the JS module passes a
/// `BigInt` as its decimal text).
fn now_arg(now_ns: Option<Either3<f64, String, Unknown<'_>>>) -> Result<String> {
    match now_ns {
        None => Ok(String::new()),
        Some(Either3::A(n)) => Ok(whole(n, "nowNs")?.to_string()),
        Some(Either3::B(text)) => {
            if !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit())
                && let Ok(n) = text.parse::<u64>()
            {
                return Ok(n.to_string());
            }
            Err(invalid_argument(format!("nowNs must be an integer in 0..2^64, got {text:?}")))
        }
        Some(Either3::C(u)) => match u.get_type() {
            Ok(napi::ValueType::Undefined | napi::ValueType::Null) => Ok(String::new()),
            _ => Err(invalid_argument("nowNs must be a number or a BigInt")),
        },
    }
}

/// `minTtlMs`, clamped to [`MAX_WINDOW`] as `ratelane_redis`'s `with_min_ttl_ms` does.
fn min_ttl_arg(min_ttl_ms: Option<NumArg<'_>>) -> Result<String> {
    Ok(match min_ttl_ms {
        None => 0,
        Some(v) => whole_arg(v, "minTtlMs")?.min(MAX_WINDOW),
    }
    .to_string())
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
        require_window("burst × interval", gcra.window())?;
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
    /// `requested` and `capacity`) when `n` exceeds the burst: nothing needs sending.
    #[napi(ts_args_type = "n: number, nowNs?: number | string | null, minTtlMs?: number | null")]
    pub fn argv(&self, env: Env, n: NumArg<'_>, now_ns: NowArg<'_>, min_ttl_ms: Option<NumArg<'_>>) -> Result<Vec<String>> {
        let n = count(n, "n")?;
        let burst = self.gcra.burst();
        if n > burst {
            return Err(insufficient_capacity(&env, InsufficientCapacity { requested: n, capacity: burst }));
        }
        Ok(vec![
            self.gcra.interval().to_string(),
            burst.to_string(),
            n.to_string(),
            now_arg(now_ns)?,
            min_ttl_arg(min_ttl_ms)?,
        ])
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
        require_window("the time a full bucket takes to drain", bucket.window())?;
        if let Some(min_interval) = bucket.min_interval() {
            require_window("min_interval", min_interval)?;
        }
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
        Ok(vec![
            bucket.size().to_string(),
            bucket.drip_rate().to_string(),
            bucket.drip_size().to_string(),
            bucket.min_interval().unwrap_or(0).to_string(),
            now_arg(now_ns)?,
            min_ttl_arg(min_ttl_ms)?,
        ])
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
        require_window("window", window.window())?;
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
            Either::A(op) if matches!(op.as_str(), "check" | "schedule" | "release") => op,
            _ => return Err(invalid_argument("op must be 'check', 'schedule' or 'release'")),
        };
        Ok(vec![
            op,
            self.window.quota().to_string(),
            self.window.window().to_string(),
            now_arg(now_ns)?,
            min_ttl_arg(min_ttl_ms)?,
        ])
    }
}

// ------------------------------------------------------------------------------ replies

/// What a script answered (as `ratelane_redis`'s `reply::Reply`).
enum Reply {
    Decision(Decision),
    InsufficientCapacity(InsufficientCapacity),
    Scheduled(Scheduled, u64),
    Released(bool),
}

fn bad(message: String) -> JsError {
    js_error("redis_bad_reply", message)
}

/// One item of a reply as node-redis gives it: a number (a Redis integer), a string (a bulk
/// string; the JS module turns `Buffer`s into strings first), or anything else.
type Item<'a> = Either3<f64, String, Unknown<'a>>;

fn describe(item: &Item<'_>) -> String {
    match item {
        Either3::A(n) => n.to_string(),
        Either3::B(s) => format!("{s:?}"),
        Either3::C(u) => match u.get_type() {
            Ok(t) => format!("a value of type {t:?}"),
            Err(_) => "a value of unknown type".to_string(),
        },
    }
}

/// A reply's fields after the tag, read one at a time.
struct Fields<'r, 'a> {
    tag: &'r str,
    items: std::slice::Iter<'r, Item<'a>>,
}

impl<'r, 'a> Fields<'r, 'a> {
    fn next(&mut self, name: &str) -> Result<&'r Item<'a>> {
        self.items.next().ok_or_else(|| bad(format!("{}: {name} missing", self.tag)))
    }

    /// A Redis integer: a JS number without a fractional part, at most 2^53 in magnitude
    /// (beyond, node-redis may have rounded it; the scripts never answer more than 2^53).
    fn int(&mut self, name: &str) -> Result<i64> {
        let tag = self.tag;
        match self.next(name)? {
            Either3::A(n) if n.fract() == 0.0 && n.abs() <= EXACT => Ok(*n as i64),
            other => Err(bad(format!("{tag}: {name} is not an integer: {}", describe(other)))),
        }
    }

    fn flag(&mut self, name: &str) -> Result<bool> {
        match self.int(name)? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(bad(format!("{}: {name} is {n}, not 0 or 1", self.tag))),
        }
    }

    fn u32(&mut self, name: &str) -> Result<u32> {
        let n = self.int(name)?;
        u32::try_from(n).map_err(|_| bad(format!("{}: {name} = {n} is out of range", self.tag)))
    }

    fn u64(&mut self, name: &str) -> Result<u64> {
        let n = self.int(name)?;
        u64::try_from(n).map_err(|_| bad(format!("{}: {name} = {n} is negative", self.tag)))
    }

    /// A duration, or `-1` for "none".
    fn optional_u64(&mut self, name: &str) -> Result<Option<u64>> {
        match self.int(name)? {
            -1 => Ok(None),
            n => u64::try_from(n)
                .map(Some)
                .map_err(|_| bad(format!("{}: {name} = {n} is negative", self.tag))),
        }
    }

    /// A decimal string of nanoseconds (absolute times do not fit in a Lua number).
    fn decimal(&mut self, name: &str) -> Result<u64> {
        let tag = self.tag;
        let item = self.next(name)?;
        match item {
            Either3::B(t) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => t.parse().ok(),
            _ => None,
        }
        .ok_or_else(|| bad(format!("{tag}: {name} is not a decimal integer: {}", describe(item))))
    }

    fn end(mut self) -> Result<()> {
        match self.items.next() {
            None => Ok(()),
            Some(extra) => Err(bad(format!("{}: unexpected extra field {}", self.tag, describe(extra)))),
        }
    }
}

/// Reads any of the scripts' replies.
fn parse(reply: Either<Vec<Item<'_>>, Unknown<'_>>) -> Result<Reply> {
    let items = match reply {
        Either::A(items) => items,
        Either::B(other) => {
            let what = other.get_type().map_or_else(|_| "unknown".to_string(), |t| format!("{t:?}"));
            return Err(bad(format!("expected an array, got a value of type {what}")));
        }
    };
    let Some((first, rest)) = items.split_first() else {
        return Err(bad("expected a tag first, got an empty array".to_string()));
    };
    let Either3::B(tag) = first else {
        return Err(bad(format!("expected a tag first, got {}", describe(first))));
    };
    let mut f = Fields { tag, items: rest.iter() };
    let parsed = match tag.as_str() {
        "decision" => {
            let decision = Decision {
                allowed: f.flag("allowed")?,
                limit: f.u32("limit")?,
                remaining: f.u32("remaining")?,
                reset_after: f.u64("reset_after_ns")?,
                clear_after: f.u64("clear_after_ns")?,
                replenish_after: f.optional_u64("replenish_after_ns")?,
                window: f.u64("window_ns")?,
            };
            f.decimal("now_ns")?;
            Reply::Decision(decision)
        }
        "insufficient_capacity" => Reply::InsufficientCapacity(InsufficientCapacity {
            requested: f.u32("requested")?,
            capacity: f.u32("capacity")?,
        }),
        "scheduled" => {
            let scheduled = Scheduled {
                run_now: f.flag("run_now")?,
                release_at: f.decimal("release_at_ns")?,
                waiting: f.u64("waiting")?,
            };
            Reply::Scheduled(scheduled, f.decimal("now_ns")?)
        }
        "released" => Reply::Released(f.flag("released")?),
        other => return Err(bad(format!("unknown tag {other:?}"))),
    };
    f.end()?;
    Ok(parsed)
}

fn kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Decision(_) => "a decision",
        Reply::InsufficientCapacity(_) => "insufficient_capacity",
        Reply::Scheduled(..) => "a booking",
        Reply::Released(_) => "a release",
    }
}

/// The largest magnitude up to which every integer is a distinct `f64`, 2^53.
const EXACT: f64 = 9_007_199_254_740_992.0;

type ReplyArg<'a> = Either<Vec<Item<'a>>, Unknown<'a>>;

/// A check's reply (`gcra.lua`, `leaky_bucket.lua`, `fixed_window.lua check`) as the same
/// decision object the in-memory stores answer with. Throws `insufficient_capacity` for GCRA's
/// `insufficient_capacity` reply, `redis_bad_reply` for anything else.
#[napi(ts_args_type = "reply: unknown", ts_return_type = "ServerDecision")]
pub fn script_decision(env: Env, reply: ReplyArg<'_>) -> Result<Object<'static>> {
    match parse(reply)? {
        Reply::Decision(d) => decision_object(&env, &d),
        Reply::InsufficientCapacity(e) => Err(insufficient_capacity(&env, e)),
        other => Err(bad(format!("expected a decision, got {}", kind(&other)))),
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
    match parse(reply)? {
        Reply::Scheduled(s, now) => {
            Ok(RedisScheduled {
                run_now: s.run_now,
                release_at_ns: BigInt::from(s.release_at),
                waiting: s.waiting as f64,
                now_ns: BigInt::from(now),
                delay_ns: s.release_at.saturating_sub(now) as f64,
            })
        }
        other => Err(bad(format!("expected a booking, got {}", kind(&other)))),
    }
}

/// `fixed_window.lua release`'s reply: whether a delayed job was waiting.
#[napi(ts_args_type = "reply: unknown")]
pub fn script_released(reply: ReplyArg<'_>) -> Result<bool> {
    match parse(reply)? {
        Reply::Released(released) => Ok(released),
        other => Err(bad(format!("expected a release, got {}", kind(&other)))),
    }
}
