//! Caller-facing errors: misuse of the API (unknown ids, invalid configuration).
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
    /// A request description is malformed (empty method, path not starting with `/`, ...).
    InvalidRequest(String),
    /// The limiter was closed; it takes no new requests.
    Closed,
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
        }
    }

    /// Every code [`Error::code`] can return, for bindings that build one exception class per code.
    pub const ALL_CODES: &'static [&'static str] = &[
        "unknown_request",
        "invalid_state",
        "invalid_config",
        "invalid_request",
        "limiter_closed",
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
        }
    }
}

impl std::error::Error for Error {}
