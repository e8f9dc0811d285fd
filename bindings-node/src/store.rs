//! The shared store's script (`redis/scripts/shared_store.lua`) for `ratelane/redis`'s
//! `RedisStore` (`js/redis_store.js`): each call's `ARGV` and the reading of a reservation's
//! answer are the core's (`ratelane::shared::wire`), as for `ratelane-redis` and the Python
//! binding. This module only reads the JS objects (the `reserve` outputs' reservations and the
//! `share` outputs' updates, or any object of their shape) into the core's values, and a
//! reply's JS values into the core's `ReplyItem`s. The I/O (queue, `EVALSHA`, `NOSCRIPT`) is
//! the JavaScript module's.

use napi::bindgen_prelude::{Either, Object, Unknown};
use napi_derive::napi;

use ratelane::server::script::{ReplyError, ReplyItem};
use ratelane::shared::wire::{self, StoreOp, StoreSettings};
use ratelane::shared::{Reservation, ReservationAnswer, SharedScope, SharedUpdate};

use crate::redis_scripts::{Item, bad, item};
use crate::{Result, core_error, invalid_argument, opt, required, whole};

/// A duration or an id of an operation: a safe whole number.
fn ns(obj: &Object, key: &str, what: &str) -> Result<u64> {
    let value: f64 = required(obj, key, &format!("{what}.{key} (a number)"))?;
    whole(value, &format!("{what}.{key}"))
}

/// An optional one (absent, `undefined` and `null` are none).
fn opt_ns(obj: &Object, key: &str, what: &str) -> Result<Option<u64>> {
    let value: Option<f64> = opt(obj, key, &format!("{what}.{key} (a number)"))?;
    value.map(|v| whole(v, &format!("{what}.{key}"))).transpose()
}

fn text(obj: &Object, key: &str, what: &str) -> Result<String> {
    required(obj, key, &format!("{what}.{key} (a string)"))
}

fn opt_text(obj: &Object, key: &str, what: &str) -> Result<Option<String>> {
    opt(obj, key, &format!("{what}.{key} (a string)"))
}

fn flag(obj: &Object, key: &str, what: &str) -> Result<bool> {
    Ok(opt(obj, key, &format!("{what}.{key} (a boolean)"))?.unwrap_or(false))
}

/// A count (`limit`, `remaining`, `globalLimit`...): a whole number up to `u32::MAX`.
fn opt_count(obj: &Object, key: &str, what: &str) -> Result<Option<u32>> {
    opt_ns(obj, key, what)?
        .map(|n| u32::try_from(n).map_err(|_| invalid_argument(format!("{what}.{key} must be at most {}", u32::MAX))))
        .transpose()
}

fn count(obj: &Object, key: &str, what: &str) -> Result<u32> {
    opt_count(obj, key, what)?.ok_or_else(|| invalid_argument(format!("{what}.{key} (a number) is required")))
}

/// Ages (ns) of an outage report: an array of numbers, absent as none.
fn ages(obj: &Object, key: &str, what: &str) -> Result<Vec<u64>> {
    let values: Option<Vec<f64>> = opt(obj, key, &format!("{what}.{key} (an array of numbers)"))?;
    values.unwrap_or_default().into_iter().map(|v| whole(v, &format!("{what}.{key}[]"))).collect()
}

fn reservation(r: &Object) -> Result<Reservation> {
    let what = "reservation";
    Ok(Reservation {
        id: ns(r, "id", what)?,
        identity: text(r, "identity", what)?,
        route: text(r, "route", what)?,
        major: text(r, "major", what)?,
        bucket: opt_text(r, "bucket", what)?,
        counts_global: flag(r, "countsGlobal", what)?,
        global_limit: count(r, "globalLimit", what)?,
        global_window: ns(r, "globalWindowNs", what)?,
        margin: ns(r, "marginNs", what)?,
        invalid_limit: count(r, "invalidLimit", what)?,
        invalid_window: ns(r, "invalidWindowNs", what)?,
        // Absent from a reservation object of an earlier version: one token, no outage.
        global_want: opt_count(r, "globalWant", what)?.unwrap_or(1),
        processes_since: opt_ns(r, "processesSinceNs", what)?,
        reporting: flag(r, "reporting", what)?,
        unrecorded: ages(r, "unrecordedNs", what)?,
        granted: ages(r, "grantedNs", what)?,
    })
}

fn update(u: &Object, kind: &str) -> Result<SharedUpdate> {
    let what = "update";
    Ok(match kind {
        "bucket" => SharedUpdate::Bucket {
            id: ns(u, "id", what)?,
            identity: text(u, "identity", what)?,
            route: text(u, "route", what)?,
            major: text(u, "major", what)?,
            bucket: opt_text(u, "bucket", what)?,
            unlimited: flag(u, "unlimited", what)?,
            limit: opt_count(u, "limit", what)?,
            remaining: opt_count(u, "remaining", what)?,
            reset_after: opt_ns(u, "resetAfterNs", what)?,
            window: opt_ns(u, "windowNs", what)?,
        },
        "release" => SharedUpdate::Release {
            id: ns(u, "id", what)?,
            identity: text(u, "identity", what)?,
            route: text(u, "route", what)?,
            major: text(u, "major", what)?,
            bucket: opt_text(u, "bucket", what)?,
            reached: flag(u, "reached", what)?,
            window: opt_ns(u, "windowNs", what)?,
        },
        "hold" => {
            let name = text(u, "scope", what)?;
            let scope = SharedScope::from_name(&name)
                .ok_or_else(|| invalid_argument(format!("update.scope: unknown scope {name:?}")))?;
            SharedUpdate::Hold {
                scope,
                identity: text(u, "identity", what)?,
                route: text(u, "route", what)?,
                major: text(u, "major", what)?,
                bucket: opt_text(u, "bucket", what)?,
                retry_after: ns(u, "retryAfterNs", what)?,
            }
        }
        "invalid" => SharedUpdate::Invalid { id: ns(u, "id", what)?, window: ns(u, "windowNs", what)? },
        other => {
            return Err(invalid_argument(format!(
                "not a shared-mode update: kind must be 'bucket', 'release', 'hold' or 'invalid', got {other:?}"
            )));
        }
    })
}

/// An operation read from its object: an update has a `kind`, a reservation none.
enum Op {
    Reserve(Reservation),
    Record(SharedUpdate),
}

impl Op {
    fn read(obj: &Object) -> Result<Op> {
        match opt_text(obj, "kind", "update")? {
            Some(kind) => Ok(Op::Record(update(obj, &kind)?)),
            None => Ok(Op::Reserve(reservation(obj)?)),
        }
    }

    fn as_store_op(&self) -> StoreOp<'_> {
        match self {
            Op::Reserve(r) => StoreOp::Reserve(r),
            Op::Record(u) => StoreOp::Record(u),
        }
    }
}

/// One operation encoded by the core, as the store queues it: `name` (`'reserve'` or
/// `'record'`) and its own arguments (a single call's `ARGV[7]` and on).
#[napi(object)]
#[derive(Debug)]
pub struct StoreOpText {
    pub name: String,
    pub args: Vec<String>,
}

/// Encodes one operation when it is queued: a reservation (a `reserve` output's
/// `reservation`) or an update (a `share` output's `update`, which has a `kind`). Throws
/// `invalid_argument` for an object of another shape.
#[napi(ts_args_type = "op: JsReservation | JsSharedUpdate")]
pub fn store_op(op: Object<'_>) -> Result<StoreOpText> {
    let op = Op::read(&op)?;
    let op = op.as_store_op();
    Ok(StoreOpText { name: op.name().to_string(), args: op.args() })
}

/// The `ARGV` of one script call for `ops` in order, written by the core: a single call's for
/// one operation, a `batch` call's for several (one round trip; each runs as its own call
/// would). `client` is this process's name in the store; the durations are the core's
/// validated `SharedConfig` (`lease_ns`, `pioneer_poll_ns`, `state_ttl_ns`).
#[napi]
pub fn store_argv(
    client: String,
    lease_ns: f64,
    pioneer_poll_ns: f64,
    state_ttl_ns: f64,
    ops: Vec<StoreOpText>,
) -> Result<Vec<String>> {
    let settings = StoreSettings {
        lease: whole(lease_ns, "leaseNs")?,
        pioneer_poll: whole(pioneer_poll_ns, "pioneerPollNs")?,
        state_ttl: whole(state_ttl_ns, "stateTtlNs")?,
    };
    let ops: Vec<(String, Vec<String>)> = ops.into_iter().map(|op| (op.name, op.args)).collect();
    wire::encoded_argv(None, &client, &settings, &ops).map_err(core_error)
}

/// A reservation's answer as the driver gives it to `handleReservation`: `answer`, and only
/// the fields the reply had (`processes`, `leased`, `storeTimeUs` for a grant; `retryAfterNs`,
/// `scope` and `processes` for a denial).
#[napi(object, object_from_js = false)]
#[derive(Debug)]
pub struct StoreAnswer {
    /// `'granted'` or `'denied'`.
    pub answer: String,
    pub processes: Option<u32>,
    pub leased: Option<u32>,
    /// The store's clock when it granted, in microseconds (exact in a JS number).
    pub store_time_us: Option<f64>,
    pub retry_after_ns: Option<f64>,
    pub scope: Option<String>,
}

/// The script's reply to a reservation, read by the core. Throws `redis_bad_reply` for any
/// other reply.
#[napi(ts_args_type = "reply: unknown")]
pub fn store_answer(reply: Either<Vec<Item<'_>>, Unknown<'_>>) -> Result<StoreAnswer> {
    let values = match reply {
        Either::A(values) => values,
        Either::B(other) => {
            let what = other.get_type().map_or_else(|_| "unknown".to_string(), |t| format!("{t:?}"));
            return Err(bad(ReplyError::not_an_array(&format!("a value of type {what}"))));
        }
    };
    let items: Vec<ReplyItem<'_>> = values.iter().map(item).collect();
    let none = StoreAnswer {
        answer: String::new(),
        processes: None,
        leased: None,
        store_time_us: None,
        retry_after_ns: None,
        scope: None,
    };
    Ok(match wire::parse_reserve_answer(&items).map_err(bad)? {
        ReservationAnswer::Granted { processes, leased, store_time } => StoreAnswer {
            answer: "granted".into(),
            processes,
            leased: (values.len() > 2).then_some(leased),
            store_time_us: store_time.map(|ns| (ns / 1_000) as f64),
            ..none
        },
        ReservationAnswer::Denied { retry_after, scope, processes } => StoreAnswer {
            answer: "denied".into(),
            processes,
            retry_after_ns: Some(retry_after as f64),
            scope: Some(scope.as_str().into()),
            ..none
        },
        // The script never answers this (the core reads no such reply).
        ReservationAnswer::Unavailable => StoreAnswer { answer: "unavailable".into(), ..none },
    })
}
