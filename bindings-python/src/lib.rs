//! The Python binding of ratelane: the native module `ratelane._core`.
//!
//! This crate only converts values and maps errors; the rate-limit logic is the core's
//! (`ratelane`). The public Python API (`ratelane.Limiter`, the asyncio driver
//! `ratelane.RateLimiter`, the exceptions and the adapters) is pure Python in
//! `python/ratelane/`, beside the native module.
//!
//! The pyo3 module is behind the `python` feature, which maturin turns on
//! (`pyproject.toml`), so `cargo test --workspace` builds and tests this crate without a
//! Python interpreter. The class mapping below is outside the feature on purpose: its
//! `match`es have no wildcard arm, so a new failure reason or error in the core breaks every
//! build of this crate, with or without Python.

use ratelane::{Error, FailReason};

/// The Python exception class (in `ratelane._errors`) for a request that ended with `reason`.
pub fn fail_class_name(reason: &FailReason) -> &'static str {
    match reason {
        FailReason::DeadlineExceeded { .. } => "DeadlineExceededError",
        FailReason::MaxWaitExceeded { .. } => "MaxWaitExceededError",
        FailReason::Deferred { .. } => "DeferredError",
        FailReason::RetriesExhausted { .. } => "RetriesExhaustedError",
        FailReason::MaybeSent => "MaybeSentError",
        FailReason::NetworkError { .. } => "NetworkError",
        FailReason::Unauthorized => "UnauthorizedError",
        FailReason::Closed => "ClosedError",
        // The same class as the server-side limiters' weight above the burst: one code, one
        // meaning (a request heavier than a whole budget can never go).
        FailReason::InsufficientCapacity { .. } => "InsufficientCapacityError",
    }
}

/// The Python exception class (in `ratelane._errors`) for a caller error.
pub fn error_class_name(error: &Error) -> &'static str {
    match error {
        Error::UnknownRequest(_) => "UnknownRequestError",
        Error::InvalidState { .. } => "InvalidStateError",
        Error::InvalidConfig(_) => "InvalidConfigError",
        Error::InvalidRequest(_) => "InvalidRequestError",
        Error::Closed => "LimiterClosedError",
        Error::Busy { .. } => "LimiterBusyError",
        Error::SnapshotForeign(_) => "SnapshotForeignError",
        Error::SnapshotVersion { .. } => "SnapshotVersionError",
        Error::SnapshotMalformed(_) => "SnapshotMalformedError",
    }
}

#[cfg(feature = "python")]
mod python;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_class_per_fail_code() {
        let all = [
            FailReason::DeadlineExceeded { predicted_send_at: None },
            FailReason::MaxWaitExceeded { predicted_wait: 0 },
            FailReason::Deferred { retry_at: 0 },
            FailReason::RetriesExhausted { attempts: 1 },
            FailReason::MaybeSent,
            FailReason::NetworkError { attempts: 1 },
            FailReason::Unauthorized,
            FailReason::Closed,
            FailReason::InsufficientCapacity { dimension: "tokens".into(), cost: 2, limit: 1 },
        ];
        let codes: Vec<&str> = all.iter().map(FailReason::code).collect();
        assert_eq!(codes, FailReason::ALL_CODES, "list every reason above");
        let mut names: Vec<&str> = all.iter().map(fail_class_name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }

    #[test]
    fn one_class_per_error_code() {
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
        assert_eq!(codes, Error::ALL_CODES, "list every error above");
        let mut names: Vec<&str> = all.iter().map(error_class_name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }
}
