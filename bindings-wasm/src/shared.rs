//! Shared mode (`ratelane::shared`): the `reserve`, `share` and `store_unavailable` outputs and
//! the answer `handleReservation` takes (`js/CONTRACT.md`, "Shared mode"). Conversions only.

use js_sys::Object;
use ratelane::shared::{Reservation, ReservationAnswer, SharedScope, SharedUpdate};
use serde::Deserialize;
use wasm_bindgen::JsValue;

use crate::{invalid_argument, num, object_arg, set, whole};

fn opt_str(value: Option<&String>) -> JsValue {
    value.map_or(JsValue::NULL, |s| JsValue::from_str(s))
}

fn opt_num(value: Option<u64>) -> JsValue {
    value.map_or(JsValue::NULL, num)
}

fn opt_u32(value: Option<u32>) -> JsValue {
    value.map_or(JsValue::NULL, JsValue::from)
}

/// Ages in nanoseconds as a JS array of numbers.
fn ages(ages: &[u64]) -> js_sys::Array {
    ages.iter().map(|&a| num(a)).collect()
}

/// `{type: 'reserve', id, reservation}`.
pub(crate) fn reserve_object(o: &Object, r: &Reservation) {
    let reservation = Object::new();
    set(&reservation, "id", num(r.id));
    set(&reservation, "identity", r.identity.as_str());
    set(&reservation, "route", r.route.as_str());
    set(&reservation, "major", r.major.as_str());
    set(&reservation, "bucket", opt_str(r.bucket.as_ref()));
    set(&reservation, "countsGlobal", r.counts_global);
    set(&reservation, "globalLimit", r.global_limit);
    set(&reservation, "globalWant", r.global_want);
    set(&reservation, "globalWindowNs", num(r.global_window));
    set(&reservation, "marginNs", num(r.margin));
    set(&reservation, "invalidLimit", r.invalid_limit);
    set(&reservation, "invalidWindowNs", num(r.invalid_window));
    set(&reservation, "processesSinceNs", opt_num(r.processes_since));
    set(&reservation, "reporting", r.reporting);
    set(&reservation, "unrecordedNs", ages(&r.unrecorded));
    set(&reservation, "grantedNs", ages(&r.granted));
    set(o, "type", "reserve");
    set(o, "id", num(r.id));
    set(o, "reservation", reservation);
}

/// `{type: 'share', update}`.
pub(crate) fn share_object(o: &Object, update: &SharedUpdate) {
    let u = Object::new();
    match update {
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
        } => {
            set(&u, "kind", "bucket");
            set(&u, "id", num(*id));
            set(&u, "identity", identity.as_str());
            set(&u, "route", route.as_str());
            set(&u, "major", major.as_str());
            set(&u, "bucket", opt_str(bucket.as_ref()));
            set(&u, "unlimited", *unlimited);
            set(&u, "limit", opt_u32(*limit));
            set(&u, "remaining", opt_u32(*remaining));
            set(&u, "resetAfterNs", opt_num(*reset_after));
            set(&u, "windowNs", opt_num(*window));
        }
        SharedUpdate::Release { id, identity, route, major, bucket, reached, window } => {
            set(&u, "kind", "release");
            set(&u, "id", num(*id));
            set(&u, "identity", identity.as_str());
            set(&u, "route", route.as_str());
            set(&u, "major", major.as_str());
            set(&u, "bucket", opt_str(bucket.as_ref()));
            set(&u, "reached", *reached);
            set(&u, "windowNs", opt_num(*window));
        }
        SharedUpdate::Hold { scope, identity, route, major, bucket, retry_after } => {
            set(&u, "kind", "hold");
            set(&u, "scope", scope.as_str());
            set(&u, "identity", identity.as_str());
            set(&u, "route", route.as_str());
            set(&u, "major", major.as_str());
            set(&u, "bucket", opt_str(bucket.as_ref()));
            set(&u, "retryAfterNs", num(*retry_after));
        }
        SharedUpdate::Invalid { id, window } => {
            set(&u, "kind", "invalid");
            set(&u, "id", num(*id));
            set(&u, "windowNs", num(*window));
        }
    }
    set(o, "type", "share");
    set(o, "update", u);
}

/// `{type: 'store_unavailable', id, retryAtNs}`.
pub(crate) fn store_unavailable_object(o: &Object, id: u64, retry_at: u64) {
    set(o, "type", "store_unavailable");
    set(o, "id", num(id));
    set(o, "retryAtNs", num(retry_at));
}

/// `ReservationAnswer` of the contract.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnswerSpec {
    answer: String,
    #[serde(default)]
    retry_after_ns: Option<f64>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    processes: Option<f64>,
    #[serde(default)]
    leased: Option<f64>,
    /// The store's clock in microseconds (exact in a JS number, where Unix nanoseconds are not).
    #[serde(default)]
    store_time_us: Option<f64>,
}

pub(crate) fn answer_arg(value: JsValue) -> Result<ReservationAnswer, JsValue> {
    let spec: AnswerSpec = object_arg("answer", value)?;
    // The store's live-process count: a whole number >= 0 (above u32::MAX it reads as
    // u32::MAX: the core tolerates any count).
    let processes = match spec.processes {
        None => None,
        Some(n) => Some(
            u32::try_from(whole("answer.processes", n).map_err(|m| invalid_argument(&m))?).unwrap_or(u32::MAX),
        ),
    };
    match spec.answer.as_str() {
        "granted" => {
            let leased = match spec.leased {
                None => 0,
                Some(n) => {
                    u32::try_from(whole("answer.leased", n).map_err(|m| invalid_argument(&m))?).unwrap_or(u32::MAX)
                }
            };
            let store_time = match spec.store_time_us {
                None => None,
                Some(us) => Some(whole("answer.storeTimeUs", us).map_err(|m| invalid_argument(&m))?.saturating_mul(1_000)),
            };
            Ok(ReservationAnswer::Granted { processes, leased, store_time })
        }
        "unavailable" => Ok(ReservationAnswer::Unavailable),
        "denied" => {
            let retry = spec
                .retry_after_ns
                .ok_or_else(|| invalid_argument("answer.retryAfterNs (a number) is required"))?;
            let retry_after = whole("answer.retryAfterNs", retry).map_err(|m| invalid_argument(&m))?;
            let name = spec.scope.unwrap_or_default();
            let scope = SharedScope::from_name(&name).ok_or_else(|| {
                invalid_argument(&format!(
                    "answer.scope must be 'edge', 'invalid', 'global', 'route', 'bucket' or 'pioneer', got {name:?}"
                ))
            })?;
            Ok(ReservationAnswer::Denied { retry_after, scope, processes })
        }
        other => Err(invalid_argument(&format!(
            "answer.answer must be 'granted', 'denied' or 'unavailable', got {other:?}"
        ))),
    }
}
