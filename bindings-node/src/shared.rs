//! Shared mode (`ratelane::shared`): the `reserve`, `share` and `store_unavailable` outputs and
//! the answer `handleReservation` takes (`js/CONTRACT.md`, "Shared mode"). Conversions only.

use napi::bindgen_prelude::{Either, Null, Object};
use napi_derive::napi;
use ratelane::shared::{Reservation, ReservationAnswer, SharedScope, SharedUpdate};

use crate::{JsOutput, Result, invalid_argument, opt, required, to_js_number, whole};

/// `ratelane::shared::Reservation` as a plain JS object.
#[napi(object, object_from_js = false)]
#[derive(Debug)]
pub struct JsReservation {
    pub id: f64,
    pub identity: String,
    pub route: String,
    pub major: String,
    pub bucket: Either<String, Null>,
    pub counts_global: bool,
    pub global_limit: u32,
    pub global_want: u32,
    pub global_window_ns: f64,
    pub margin_ns: f64,
    pub invalid_limit: u32,
    pub invalid_window_ns: f64,
    /// After a store outage: count the processes back within this long (else null).
    pub processes_since_ns: Either<f64, Null>,
    /// After a store outage: this process still has sends to report.
    pub reporting: bool,
    /// After a store outage: ages of the sends made without a reservation.
    pub unrecorded_ns: Vec<f64>,
    /// After a store outage: ages of the sends the store granted.
    pub granted_ns: Vec<f64>,
}

/// `ratelane::shared::SharedUpdate` as a plain JS object: `kind` names the variant and only
/// that variant's fields are set (`null` where the core has `None`).
#[napi(object, object_from_js = false)]
#[derive(Debug)]
pub struct JsSharedUpdate {
    /// `'bucket'`, `'release'`, `'hold'` or `'invalid'`.
    pub kind: String,
    pub id: Option<f64>,
    pub identity: Option<String>,
    pub route: Option<String>,
    pub major: Option<String>,
    pub bucket: Option<Either<String, Null>>,
    pub unlimited: Option<bool>,
    pub limit: Option<Either<u32, Null>>,
    pub remaining: Option<Either<u32, Null>>,
    pub reset_after_ns: Option<Either<f64, Null>>,
    pub window_ns: Option<Either<f64, Null>>,
    pub reached: Option<bool>,
    pub scope: Option<String>,
    pub retry_after_ns: Option<f64>,
}

impl JsSharedUpdate {
    fn of(kind: &str) -> Self {
        JsSharedUpdate {
            kind: kind.to_string(),
            id: None,
            identity: None,
            route: None,
            major: None,
            bucket: None,
            unlimited: None,
            limit: None,
            remaining: None,
            reset_after_ns: None,
            window_ns: None,
            reached: None,
            scope: None,
            retry_after_ns: None,
        }
    }
}

fn nullable<T>(value: Option<T>) -> Either<T, Null> {
    value.map_or(Either::B(Null), Either::A)
}

fn nullable_ns(value: Option<u64>) -> Either<f64, Null> {
    nullable(value.map(to_js_number))
}

/// `{type: 'reserve', id, reservation}`.
pub fn reserve_to_js(r: Reservation) -> JsOutput {
    let id = to_js_number(r.id);
    let reservation = JsReservation {
        id,
        identity: r.identity,
        route: r.route,
        major: r.major,
        bucket: nullable(r.bucket),
        counts_global: r.counts_global,
        global_limit: r.global_limit,
        global_want: r.global_want,
        global_window_ns: to_js_number(r.global_window),
        margin_ns: to_js_number(r.margin),
        invalid_limit: r.invalid_limit,
        invalid_window_ns: to_js_number(r.invalid_window),
        processes_since_ns: nullable_ns(r.processes_since),
        reporting: r.reporting,
        unrecorded_ns: r.unrecorded.into_iter().map(to_js_number).collect(),
        granted_ns: r.granted.into_iter().map(to_js_number).collect(),
    };
    JsOutput { id: Some(id), reservation: Some(reservation), ..JsOutput::of("reserve") }
}

/// `{type: 'share', update}`.
pub fn share_to_js(update: SharedUpdate) -> JsOutput {
    let update = match update {
        SharedUpdate::Bucket {
            id,
            identity,
            route,
            major,
            bucket,
            unlimited,
            limit,
            remaining,
            reset_after,
            window,
        } => JsSharedUpdate {
            id: Some(to_js_number(id)),
            identity: Some(identity),
            route: Some(route),
            major: Some(major),
            bucket: Some(nullable(bucket)),
            unlimited: Some(unlimited),
            limit: Some(nullable(limit)),
            remaining: Some(nullable(remaining)),
            reset_after_ns: Some(nullable_ns(reset_after)),
            window_ns: Some(nullable_ns(window)),
            ..JsSharedUpdate::of("bucket")
        },
        SharedUpdate::Release { id, identity, route, major, bucket, reached, window } => JsSharedUpdate {
            id: Some(to_js_number(id)),
            identity: Some(identity),
            route: Some(route),
            major: Some(major),
            bucket: Some(nullable(bucket)),
            reached: Some(reached),
            window_ns: Some(nullable_ns(window)),
            ..JsSharedUpdate::of("release")
        },
        SharedUpdate::Hold { scope, identity, route, major, bucket, retry_after } => JsSharedUpdate {
            scope: Some(scope.as_str().to_string()),
            identity: Some(identity),
            route: Some(route),
            major: Some(major),
            bucket: Some(nullable(bucket)),
            retry_after_ns: Some(to_js_number(retry_after)),
            ..JsSharedUpdate::of("hold")
        },
        SharedUpdate::Invalid { id, window } => JsSharedUpdate {
            id: Some(to_js_number(id)),
            window_ns: Some(Either::A(to_js_number(window))),
            ..JsSharedUpdate::of("invalid")
        },
    };
    JsOutput { update: Some(update), ..JsOutput::of("share") }
}

/// `{type: 'store_unavailable', id, retryAtNs}`.
pub fn store_unavailable_to_js(id: u64, retry_at: u64) -> JsOutput {
    JsOutput {
        id: Some(to_js_number(id)),
        retry_at_ns: Some(to_js_number(retry_at)),
        ..JsOutput::of("store_unavailable")
    }
}

/// The optional `processes` of an answer: a whole number >= 0 (above `u32::MAX` it reads as
/// `u32::MAX`: the core tolerates any count).
fn processes(obj: &Object) -> Result<Option<u32>> {
    count(obj, "processes")
}

/// An optional count of an answer (`processes`, `leased`): a whole number >= 0 (above
/// `u32::MAX` it reads as `u32::MAX`).
fn count(obj: &Object, name: &str) -> Result<Option<u32>> {
    let value: Option<f64> = opt(obj, name, &format!("answer.{name} (a number)"))?;
    match value {
        None => Ok(None),
        Some(n) => Ok(Some(u32::try_from(whole(n, &format!("answer.{name}"))?).unwrap_or(u32::MAX))),
    }
}

/// A `ReservationAnswer` of the contract as the core's.
pub fn answer_from(obj: &Object) -> Result<ReservationAnswer> {
    let answer: String = required(obj, "answer", "answer.answer (a string)")?;
    match answer.as_str() {
        "granted" => {
            // The store's clock in microseconds (exact in a JS number, where Unix nanoseconds
            // are not).
            let store_us: Option<f64> = opt(obj, "storeTimeUs", "answer.storeTimeUs (a number)")?;
            let store_time = match store_us {
                None => None,
                Some(us) => Some(whole(us, "answer.storeTimeUs")?.saturating_mul(1_000)),
            };
            Ok(ReservationAnswer::Granted {
                processes: processes(obj)?,
                leased: count(obj, "leased")?.unwrap_or(0),
                store_time,
            })
        }
        "unavailable" => Ok(ReservationAnswer::Unavailable),
        "denied" => {
            let retry: f64 = required(obj, "retryAfterNs", "answer.retryAfterNs (a number)")?;
            let retry_after = whole(retry, "answer.retryAfterNs")?;
            let scope: String = required(obj, "scope", "answer.scope (a string)")?;
            let scope = SharedScope::from_name(&scope).ok_or_else(|| {
                invalid_argument(format!(
                    "answer.scope must be 'edge', 'invalid', 'global', 'route', 'bucket' or 'pioneer', got {scope:?}"
                ))
            })?;
            Ok(ReservationAnswer::Denied { retry_after, scope, processes: processes(obj)? })
        }
        other => Err(invalid_argument(format!(
            "answer.answer must be 'granted', 'denied' or 'unavailable', got {other:?}"
        ))),
    }
}

