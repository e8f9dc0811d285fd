// JSON forms of the shared-mode values, as the vector files hold them (included by
// client_vectors.rs and store_vectors.rs). They are the forms the `serde` feature derives.

use ratelane::shared::{Reservation, ReservationAnswer, SharedScope, SharedUpdate};
use serde_json::{Value, json};

#[allow(dead_code)]
pub fn reservation_json(r: &Reservation) -> Value {
    let mut v = json!({
        "id": r.id, "identity": r.identity, "route": r.route, "major": r.major,
        "bucket": r.bucket, "counts_global": r.counts_global, "global_limit": r.global_limit,
        "global_want": r.global_want, "global_window_ns": r.global_window, "margin_ns": r.margin,
        "invalid_limit": r.invalid_limit, "invalid_window_ns": r.invalid_window,
    });
    // After a store outage only (absent otherwise, as in files of an earlier version).
    if let Some(since) = r.processes_since {
        v["processes_since_ns"] = json!(since);
    }
    if r.reporting {
        v["reporting"] = json!(true);
    }
    if !r.unrecorded.is_empty() {
        v["unrecorded_ns"] = json!(r.unrecorded);
    }
    if !r.granted.is_empty() {
        v["granted_ns"] = json!(r.granted);
    }
    v
}

fn s(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_else(|| panic!("{k}: a string")).to_string()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k}: an integer"))
}

fn opt_s(v: &Value, k: &str) -> Option<String> {
    v[k].as_str().map(str::to_string)
}

#[allow(dead_code)]
pub fn reservation_from(v: &Value) -> Reservation {
    Reservation {
        id: u(v, "id"),
        identity: s(v, "identity"),
        route: s(v, "route"),
        major: s(v, "major"),
        bucket: opt_s(v, "bucket"),
        counts_global: v["counts_global"].as_bool().expect("counts_global"),
        global_limit: u(v, "global_limit") as u32,
        // Absent from files of an earlier version: one token.
        global_want: v["global_want"].as_u64().map_or(1, |n| n as u32),
        global_window: u(v, "global_window_ns"),
        margin: u(v, "margin_ns"),
        invalid_limit: u(v, "invalid_limit") as u32,
        invalid_window: u(v, "invalid_window_ns"),
        // After a store outage only; absent from files of an earlier version.
        processes_since: v["processes_since_ns"].as_u64(),
        reporting: v["reporting"].as_bool().unwrap_or(false),
        unrecorded: ages(v, "unrecorded_ns"),
        granted: ages(v, "granted_ns"),
    }
}

fn ages(v: &Value, k: &str) -> Vec<u64> {
    v[k].as_array().map_or_else(Vec::new, |a| a.iter().map(|n| n.as_u64().expect("an age in ns")).collect())
}

#[allow(dead_code)]
pub fn update_json(u: &SharedUpdate) -> Value {
    match u {
        SharedUpdate::Bucket { id, identity, route, major, bucket, unlimited, limit, remaining, reset_after, window } => {
            json!({
                "share": "bucket", "id": id, "identity": identity, "route": route, "major": major,
                "bucket": bucket, "unlimited": unlimited, "limit": limit, "remaining": remaining,
                "reset_after_ns": reset_after, "window_ns": window,
            })
        }
        SharedUpdate::Release { id, identity, route, major, bucket, reached, window } => json!({
            "share": "release", "id": id, "identity": identity, "route": route, "major": major,
            "bucket": bucket, "reached": reached, "window_ns": window,
        }),
        SharedUpdate::Hold { scope, identity, route, major, bucket, retry_after } => json!({
            "share": "hold", "scope": scope.as_str(), "identity": identity, "route": route,
            "major": major, "bucket": bucket, "retry_after_ns": retry_after,
        }),
        SharedUpdate::Invalid { id, window } => json!({"share": "invalid", "id": id, "window_ns": window}),
    }
}

#[allow(dead_code)]
pub fn update_from(v: &Value) -> SharedUpdate {
    match v["share"].as_str().expect("share") {
        "bucket" => SharedUpdate::Bucket {
            id: u(v, "id"),
            identity: s(v, "identity"),
            route: s(v, "route"),
            major: s(v, "major"),
            bucket: opt_s(v, "bucket"),
            unlimited: v["unlimited"].as_bool().expect("unlimited"),
            limit: v["limit"].as_u64().map(|n| n as u32),
            remaining: v["remaining"].as_u64().map(|n| n as u32),
            reset_after: v["reset_after_ns"].as_u64(),
            window: v["window_ns"].as_u64(),
        },
        "release" => SharedUpdate::Release {
            id: u(v, "id"),
            identity: s(v, "identity"),
            route: s(v, "route"),
            major: s(v, "major"),
            bucket: opt_s(v, "bucket"),
            reached: v["reached"].as_bool().expect("reached"),
            window: v["window_ns"].as_u64(),
        },
        "hold" => SharedUpdate::Hold {
            scope: SharedScope::from_name(&s(v, "scope")).expect("scope"),
            identity: s(v, "identity"),
            route: s(v, "route"),
            major: s(v, "major"),
            bucket: opt_s(v, "bucket"),
            retry_after: u(v, "retry_after_ns"),
        },
        "invalid" => SharedUpdate::Invalid { id: u(v, "id"), window: u(v, "window_ns") },
        other => panic!("unknown update {other}"),
    }
}

#[allow(dead_code)]
pub fn answer_json(a: &ReservationAnswer) -> Value {
    let mut v = match a {
        ReservationAnswer::Granted { .. } => json!({"answer": "granted"}),
        ReservationAnswer::Denied { retry_after, scope, .. } => {
            json!({"answer": "denied", "retry_after_ns": retry_after, "scope": scope.as_str()})
        }
        ReservationAnswer::Unavailable => json!({"answer": "unavailable"}),
    };
    if let Some(n) = a.processes() {
        v["processes"] = json!(n);
    }
    if let ReservationAnswer::Granted { leased, store_time, .. } = a {
        if *leased > 0 {
            v["leased"] = json!(leased);
        }
        if let Some(t) = store_time {
            v["store_time_ns"] = json!(t);
        }
    }
    v
}

/// An answer as the vector files hold it: a `reservation` step of a client file (`answer` a
/// string, the other fields beside it) or an `answer` object of a store file. `processes` is
/// optional in both.
#[allow(dead_code)]
pub fn answer_from(v: &Value) -> ReservationAnswer {
    let processes = v["processes"].as_u64().map(|n| n as u32);
    match v["answer"].as_str().expect("answer") {
        "granted" => ReservationAnswer::Granted {
            processes,
            leased: v["leased"].as_u64().map_or(0, |n| n as u32),
            store_time: v["store_time_ns"].as_u64(),
        },
        "unavailable" => ReservationAnswer::Unavailable,
        "denied" => ReservationAnswer::Denied {
            retry_after: u(v, "retry_after_ns"),
            scope: SharedScope::from_name(&s(v, "scope")).expect("known scope"),
            processes,
        },
        other => panic!("unknown answer {other}"),
    }
}
