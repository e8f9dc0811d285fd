//! Bindings turn every failure reason, caller error and observation into a class of their
//! own with a `match` that has no wildcard arm, so that a new variant in the core breaks
//! their build. This file is such a match, compiled as a separate crate as a binding is: if
//! one of these enums becomes `#[non_exhaustive]` again, it stops compiling.

use ratelane::{Error, FailReason, Observation, RateLimitScope};

fn fail_class(reason: &FailReason) -> &'static str {
    match reason {
        FailReason::DeadlineExceeded { .. } => "DeadlineExceeded",
        FailReason::MaxWaitExceeded { .. } => "MaxWaitExceeded",
        FailReason::Deferred { .. } => "Deferred",
        FailReason::RetriesExhausted { .. } => "RetriesExhausted",
        FailReason::MaybeSent => "MaybeSent",
        FailReason::NetworkError { .. } => "NetworkError",
        FailReason::Unauthorized => "Unauthorized",
        FailReason::Closed => "Closed",
        FailReason::InsufficientCapacity { .. } => "InsufficientCapacity",
    }
}

fn error_class(error: &Error) -> &'static str {
    match error {
        Error::UnknownRequest(_) => "UnknownRequest",
        Error::InvalidState { .. } => "InvalidState",
        Error::InvalidConfig(_) => "InvalidConfig",
        Error::InvalidRequest(_) => "InvalidRequest",
        Error::Closed => "LimiterClosed",
        Error::Busy { .. } => "LimiterBusy",
        Error::SnapshotForeign(_) => "SnapshotForeign",
        Error::SnapshotVersion { .. } => "SnapshotVersion",
        Error::SnapshotMalformed(_) => "SnapshotMalformed",
    }
}

fn observation_name(observation: &Observation) -> &'static str {
    match observation {
        Observation::RateLimited { .. } => "rate_limited",
        Observation::BucketLearned { .. } => "bucket_learned",
        Observation::InvalidRequestWarning { .. } => "invalid_request_warning",
        Observation::StoreUnavailable { .. } => "store_unavailable",
        Observation::StoreRecovered => "store_recovered",
    }
}

#[test]
fn every_fail_reason_is_matched_and_listed() {
    let all = [
        FailReason::DeadlineExceeded { predicted_send_at: None },
        FailReason::MaxWaitExceeded { predicted_wait: 1 },
        FailReason::Deferred { retry_at: 1 },
        FailReason::RetriesExhausted { attempts: 4 },
        FailReason::MaybeSent,
        FailReason::NetworkError { attempts: 4 },
        FailReason::Unauthorized,
        FailReason::Closed,
        FailReason::InsufficientCapacity { dimension: "tokens".into(), cost: 2, limit: 1 },
    ];
    let codes: Vec<&str> = all.iter().map(FailReason::code).collect();
    assert_eq!(codes, FailReason::ALL_CODES);
    let classes: std::collections::BTreeSet<&str> = all.iter().map(fail_class).collect();
    assert_eq!(classes.len(), all.len());
}

#[test]
fn every_error_is_matched_and_listed() {
    let all = [
        Error::UnknownRequest(1),
        Error::InvalidState { id: 1, expected: "in flight" },
        Error::InvalidConfig(String::new()),
        Error::InvalidRequest(String::new()),
        Error::Closed,
        Error::Busy { requests: 1 },
        Error::SnapshotForeign(String::new()),
        Error::SnapshotVersion { found: 2, supported: 1 },
        Error::SnapshotMalformed(String::new()),
    ];
    let codes: Vec<&str> = all.iter().map(Error::code).collect();
    assert_eq!(codes, Error::ALL_CODES);
    let classes: std::collections::BTreeSet<&str> = all.iter().map(error_class).collect();
    assert_eq!(classes.len(), all.len());
}

#[test]
fn every_observation_is_matched() {
    let all = [
        Observation::RateLimited { id: 1, scope: RateLimitScope::Bucket, retry_after: 1 },
        Observation::BucketLearned { route: String::new(), bucket: String::new() },
        Observation::InvalidRequestWarning { count: 1, limit: 2 },
        Observation::StoreUnavailable { id: 1, retry_at: 2 },
        Observation::StoreRecovered,
    ];
    let names: std::collections::BTreeSet<&str> = all.iter().map(observation_name).collect();
    assert_eq!(names.len(), all.len());
}
