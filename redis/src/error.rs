//! What can go wrong around a check in Redis, each with a stable machine-readable code.

use std::fmt;

use ratelane::server::InsufficientCapacity;

/// Why a Redis-backed check gave no answer. Stable codes come from [`Error::code`].
///
/// Only [`InsufficientCapacity`](Error::InsufficientCapacity) is an answer about the request
/// itself (it can never be admitted); every other variant means the limiter could not decide,
/// and the caller chooses to fail open (admit) or closed (refuse). Nothing is counted when an
/// error is returned, except that a [`Connection`](Error::Connection) error after the command
/// was sent leaves it unknown whether Redis ran the script.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot be evaluated by the scripts (a window longer than
    /// [`MAX_WINDOW`](crate::MAX_WINDOW)), or the core rejected it (e.g. a factor outside
    /// `(0, 1]`). Nothing was sent to Redis.
    InvalidConfig(String),
    /// A weight larger than the burst: the request can never be admitted, whatever the wait.
    /// Decided by the script (or, for GCRA, before any round trip); nothing was counted.
    InsufficientCapacity(InsufficientCapacity),
    /// A call the in-memory store refuses too: a GCRA check whose `now` is later than
    /// [`Gcra::last_instant`](ratelane::server::Gcra::last_instant) (decided before any round
    /// trip), or a scheduled job that would be released after `u64::MAX` ns (the script's
    /// `RATELANE_CLOCK`). Nothing was counted.
    InvalidRequest(String),
    /// Redis could not be reached or the connection failed (I/O error, timeout, connection
    /// refused or dropped, authentication).
    Connection(redis::RedisError),
    /// Redis answered with an error: out of memory, read-only replica, cluster redirection,
    /// script errors, a script argument the script refused (`RATELANE_ARG`: the Lua file on
    /// the server side is another version than the one this crate builds arguments for).
    Server(redis::RedisError),
    /// The key holds something that is not this algorithm's state (`RATELANE_STATE` from the
    /// script, or Redis's `WRONGTYPE`): two limiters, or another program, share a key name.
    BadState(String),
    /// A scheduled job's window would end more than [`MAX_WINDOW`](crate::MAX_WINDOW) from now
    /// (`RATELANE_RANGE`); nothing was booked.
    OutOfRange(String),
    /// Redis answered, but not with the layout the scripts document.
    BadReply(String),
}

impl Error {
    /// A stable, machine-readable code, identical in every binding.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidConfig(_) => "invalid_config",
            Error::InsufficientCapacity(_) => InsufficientCapacity::CODE,
            Error::InvalidRequest(_) => "invalid_request",
            Error::Connection(_) => "redis_connection",
            Error::Server(_) => "redis_server",
            Error::BadState(_) => "redis_bad_state",
            Error::OutOfRange(_) => "out_of_range",
            Error::BadReply(_) => "redis_bad_reply",
        }
    }

    /// Every code [`Error::code`] can return.
    pub const ALL_CODES: &'static [&'static str] = &[
        "invalid_config",
        "insufficient_capacity",
        "invalid_request",
        "redis_connection",
        "redis_server",
        "redis_bad_state",
        "out_of_range",
        "redis_bad_reply",
    ];

    /// Sorts a failed command's error by blame.
    pub(crate) fn from_redis(error: redis::RedisError) -> Error {
        let server_code = error.code().map(str::to_owned);
        match server_code.as_deref() {
            Some("RATELANE_STATE" | "WRONGTYPE") => Error::BadState(describe(&error)),
            Some("RATELANE_RANGE") => Error::OutOfRange(describe(&error)),
            Some("RATELANE_CLOCK") => Error::InvalidRequest(describe(&error)),
            Some(_) => Error::Server(error),
            None if error.is_io_error()
                || error.is_timeout()
                || error.is_connection_dropped()
                || error.is_connection_refusal()
                || error.kind() == redis::ErrorKind::AuthenticationFailed =>
            {
                Error::Connection(error)
            }
            None if error.kind() == redis::ErrorKind::Parse => Error::BadReply(error.to_string()),
            None => Error::Server(error),
        }
    }
}

/// A server error as `CODE detail`.
fn describe(error: &redis::RedisError) -> String {
    match (error.code(), error.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => error.to_string(),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidConfig(msg) => write!(f, "invalid configuration: {msg}"),
            Error::InsufficientCapacity(e) => e.fmt(f),
            Error::InvalidRequest(msg) => write!(f, "invalid request: {msg}"),
            Error::Connection(e) => write!(f, "Redis connection failed: {e}"),
            Error::Server(e) => write!(f, "Redis answered with an error: {e}"),
            Error::BadState(msg) => write!(f, "the key does not hold this limiter's state: {msg}"),
            Error::OutOfRange(msg) => write!(f, "out of the scripts' range: {msg}"),
            Error::BadReply(msg) => write!(f, "unexpected reply from Redis: {msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Connection(e) | Error::Server(e) => Some(e),
            Error::InsufficientCapacity(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ratelane::Error> for Error {
    fn from(error: ratelane::Error) -> Error {
        match error {
            ratelane::Error::InvalidRequest(msg) => Error::InvalidRequest(msg),
            other => Error::InvalidConfig(other.to_string()),
        }
    }
}
