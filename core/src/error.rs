//! Caller-facing errors: misuse of the API (unknown ids, invalid configuration, a snapshot
//! that cannot be restored).
//!
//! A server's bad input never becomes an [`Error`]; it is tolerated and, at
//! worst, ignored. Every error carries a stable machine-readable [`Error::code`]
//! that each binding reuses verbatim.

use core::fmt;

/// What the caller did wrong. Stable codes come from [`Error::code`].
///
/// Exhaustive for the same reason as [`crate::FailReason`]: bindings map every error to an
/// exception class without a wildcard arm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The request id is not known to this limiter (never issued, or already finished).
    UnknownRequest(u64),
    /// The request exists but is not in a state where this input makes sense
    /// (for example a response for a request that was never sent).
    InvalidState {
        /// The request id.
        id: u64,
        /// What was expected.
        expected: &'static str,
    },
    /// A configuration value is out of range.
    InvalidConfig(String),
    /// A request description is malformed (empty method, path not starting with `/`, ...),
    /// or a server-side call asks for a time past the end of the `u64` clock (a GCRA check
    /// later than [`Gcra::last_instant`](crate::server::Gcra::last_instant), a fixed-window
    /// job that would be released after `u64::MAX`); nothing is counted.
    InvalidRequest(String),
    /// The limiter was closed; it takes no new requests.
    Closed,
    /// [`crate::Limiter::restore`] was called on a limiter that holds requests (queued, in
    /// flight or reserving): a snapshot is restored before the first request, or when the
    /// limiter is idle.
    Busy {
        /// Requests the limiter holds.
        requests: usize,
    },
    /// The document is not a ratelane snapshot (not a JSON object, no or another `format`), or
    /// it was taken by a limiter of another header profile.
    SnapshotForeign(String),
    /// The snapshot's format version is newer than this build reads.
    SnapshotVersion {
        /// The document's version.
        found: u64,
        /// The newest version this build reads ([`crate::snapshot::SNAPSHOT_VERSION`]).
        supported: u32,
    },
    /// A ratelane snapshot of a version this build reads, with malformed content (a missing
    /// field, a wrong type, a value out of range).
    SnapshotMalformed(String),
}

impl Error {
    /// A stable, machine-readable code, identical in every binding.
    pub fn code(&self) -> &'static str {
        match self {
            Error::UnknownRequest(_) => "unknown_request",
            Error::InvalidState { .. } => "invalid_state",
            Error::InvalidConfig(_) => "invalid_config",
            Error::InvalidRequest(_) => "invalid_request",
            Error::Closed => "limiter_closed",
            Error::Busy { .. } => "limiter_busy",
            Error::SnapshotForeign(_) => "snapshot_foreign",
            Error::SnapshotVersion { .. } => "snapshot_version",
            Error::SnapshotMalformed(_) => "snapshot_malformed",
        }
    }

    /// Every code [`Error::code`] can return, for bindings that build one exception class per code.
    pub const ALL_CODES: &'static [&'static str] = &[
        "unknown_request",
        "invalid_state",
        "invalid_config",
        "invalid_request",
        "limiter_closed",
        "limiter_busy",
        "snapshot_foreign",
        "snapshot_version",
        "snapshot_malformed",
    ];
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownRequest(id) => write!(f, "unknown request id {id}"),
            Error::InvalidState { id, expected } => {
                write!(f, "request {id} is not {expected}")
            }
            Error::InvalidConfig(msg) => write!(f, "invalid configuration: {msg}"),
            Error::InvalidRequest(msg) => write!(f, "invalid request: {msg}"),
            Error::Closed => write!(f, "the limiter is closed and accepts no new requests"),
            Error::Busy { requests } => write!(
                f,
                "the limiter holds {requests} request(s); restore a snapshot before the first request or when it is idle"
            ),
            Error::SnapshotForeign(msg) => write!(f, "not a ratelane snapshot: {msg}"),
            Error::SnapshotVersion { found, supported } => write!(
                f,
                "snapshot format version {found} is newer than this ratelane reads (up to {supported}); upgrade ratelane or discard the snapshot"
            ),
            Error::SnapshotMalformed(msg) => write!(f, "malformed snapshot: {msg}"),
        }
    }
}

impl std::error::Error for Error {}
