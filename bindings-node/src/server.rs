//! Server-side limiters (`ratelane::server`): one native [`ServerLimit`] (GCRA, leaky bucket or
//! fixed window, with its Redis script's `ARGV` and the reading of its reply) and one native
//! [`ServerStore`] over it, as the core's `Limit` and `LimitStore`. The user-facing classes
//! (`GcraStore`, `LeakyBucketStore`, `FixedWindowStore`, `js/CONTRACT.md`) are written once in
//! `js/server_objects.js` over these two, which also checks the arguments' JS types, and the
//! Redis-backed ones in `redis_limiters.js`. Ranges, ops and answers are
//! `ratelane_js_common::server`'s, shared with the wasm core; the addon evaluates no JavaScript.

use std::borrow::Cow;

use napi::bindgen_prelude::{Array, BigInt, Either, Either3, Unknown};
use napi::{Env, Status};
use napi_derive::napi;
use ratelane::server::script::{self, ReplyError, ReplyItem, ScriptReply};
use ratelane::server::{InsufficientCapacity, Limit, LimitStore};
use ratelane_js_common::server::{self as common, Refusal};

use crate::{JsError, Result, core_error, invalid_argument, js_error, whole};

/// `maxKeys` when not given, as in the Python binding.
const DEFAULT_MAX_KEYS: usize = 100_000;

/// `insufficient_capacity`, with the weight asked for and the burst, thrown as the pending
/// exception (napi-rs rethrows a pending exception instead of the returned error).
fn insufficient_capacity(env: &Env, e: InsufficientCapacity) -> JsError {
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

/// A decision's headers (`ratelane_js_common::server::headers`): `X-RateLimit-*` when
/// `policy` is `null`, else the IETF ones; for the decision objects' methods.
#[napi(skip_typescript)]
pub fn render_headers(policy: Option<String>, fields: Vec<f64>) -> Result<String> {
    common::headers(policy.as_deref(), &fields).map_err(invalid_argument)
}

// ------------------------------------------------------------------------------ limit

/// A server-side limit (`ratelane::server::Limit`): the core's validated config of one
/// algorithm, and its Redis script.
#[napi]
#[derive(Debug)]
pub struct ServerLimit {
    inner: Limit,
}

#[napi]
impl ServerLimit {
    /// The limit `kind` names (`gcra`, `gcraPerWindow`, `leakyBucket`, `legacy`,
    /// `fixedWindow`) from its numbers (`ratelane_js_common::server::limit`). Throws
    /// `invalid_config`, or `invalid_argument` for a number out of range.
    #[napi(constructor)]
    pub fn new(kind: String, a: Option<f64>, b: Option<f64>, c: Option<f64>, d: Option<f64>) -> Result<Self> {
        match common::limit(&kind, [a, b, c, d]) {
            Ok(inner) => Ok(ServerLimit { inner }),
            Err(Refusal::Argument(message)) => Err(invalid_argument(message)),
            Err(Refusal::Core(e)) => Err(core_error(e)),
        }
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
    /// `check_scaled`) at `nowNs` (a number, or decimal text up to 2^64 - 1; absent: Redis's
    /// clock). Throws
    /// `insufficient_capacity` for a weight above the burst, and what the store would throw
    /// (`invalid_request`, `invalid_config`): nothing needs sending.
    #[napi(ts_args_type = "name: string, nowNs: number | string | null, minTtlMs: number, arg?: number | null")]
    pub fn argv(&self, env: Env, name: String, now_ns: Option<Either<f64, String>>, min_ttl_ms: f64, arg: Option<f64>) -> Result<Vec<String>> {
        let op = common::op(&name, arg).map_err(invalid_argument)?;
        let now = match now_ns {
            None => None,
            Some(Either::A(n)) => Some(whole(n, "nowNs")?),
            Some(Either::B(text)) => Some(common::now_text(&text).map_err(invalid_argument)?),
        };
        let argv = self.inner.argv(op, now, whole(min_ttl_ms, "minTtlMs")?).map_err(core_error)?;
        Ok(argv.map_err(|e| insufficient_capacity(&env, e))?.iter().map(ToString::to_string).collect())
    }

    /// The script's reply (an array) to op `name`: a decision's numbers for a check, a
    /// [`RedisScheduled`] for `schedule`, a boolean for `release`. Throws
    /// `insufficient_capacity` for GCRA's `insufficient_capacity` reply, `redis_bad_reply` for
    /// any other shape.
    #[napi(ts_args_type = "name: string, reply: unknown", ts_return_type = "number[] | RedisScheduled | boolean")]
    pub fn read_reply(&self, env: Env, name: String, reply: ReplyArg<'_>) -> Result<Either3<Vec<f64>, RedisScheduled, bool>> {
        // `check_n` and `check_scaled` are read as a check: their reply is a check's.
        let op = common::op(&name, Some(1.0)).map_err(invalid_argument)?;
        let array = match reply {
            Either::A(array) => array,
            Either::B(other) => {
                let what = other.get_type().map_or_else(|_| "unknown".to_string(), |t| format!("{t:?}"));
                return Err(bad(ReplyError::not_an_array(&format!("a value of type {what}"))));
            }
        };
        // Its length first: a reply longer than any script's is refused before an element is
        // converted (a million elements cost nothing to refuse).
        script::check_reply_len(array.len() as usize).map_err(bad)?;
        let mut values = Vec::with_capacity(array.len() as usize);
        for i in 0..array.len() {
            match array.get::<Item<'_>>(i) {
                Ok(Some(value)) => values.push(value),
                Ok(None) | Err(_) => return Err(bad(ReplyError::not_an_array("an array whose elements cannot be read"))),
            }
        }
        let items: Vec<ReplyItem<'_>> = values.iter().map(item).collect();
        Ok(match self.inner.read_reply(op, &items).map_err(bad)? {
            ScriptReply::Decision(d, _) => Either3::A(common::decision_numbers(&d)),
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
    #[napi(constructor)]
    pub fn new(limit: &ServerLimit, max_keys: Option<f64>) -> Result<Self> {
        let max_keys = match max_keys {
            Some(v) => usize::try_from(whole(v, "maxKeys")?).unwrap_or(usize::MAX),
            None => DEFAULT_MAX_KEYS,
        };
        Ok(ServerStore { inner: LimitStore::new(limit.inner, max_keys).map_err(core_error)? })
    }

    /// Runs op `name` (`arg`: the weight of `check_n`, the factor of `check_scaled`) for `key`
    /// at `nowNs`: the answer's numbers (`ratelane_js_common::server`). Throws
    /// `insufficient_capacity` (with `requested` and `capacity`) for a weight above the burst,
    /// and the core's errors; nothing is counted then.
    #[napi]
    pub fn apply(&mut self, env: Env, name: String, key: String, now_ns: f64, arg: Option<f64>) -> Result<Vec<f64>> {
        let (now, op) = (whole(now_ns, "nowNs")?, common::op(&name, arg).map_err(invalid_argument)?);
        let answer = self.inner.apply(key.as_str(), now, op).map_err(core_error)?;
        common::answer_numbers(answer).map_err(|e| insufficient_capacity(&env, e))
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

/// The most elements a script's reply may hold (`ratelane::server::script::MAX_REPLY_LEN`):
/// a longer one is refused before it is read.
#[napi]
pub const MAX_REPLY_LEN: u32 = script::MAX_REPLY_LEN as u32;

fn bad(e: ReplyError) -> JsError {
    js_error("redis_bad_reply", e.into_message())
}

/// One item of a reply as node-redis gives it: a number (a Redis integer), a string (a bulk
/// string; the JS module turns `Buffer`s into strings first), or anything else.
type Item<'a> = Either3<f64, String, Unknown<'a>>;

type ReplyArg<'a> = Either<Array<'a>, Unknown<'a>>;

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

