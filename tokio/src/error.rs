//! The driver's errors: the core's failure reasons and misuse errors, with their stable codes.

use std::fmt;
use std::time::Duration;

use ratelane::FailReason;
use tokio::time::Instant;

/// Why [`RateLimiter::run`](crate::RateLimiter::run) gave no answer. `E` is the error type of
/// the caller's `send`.
///
/// [`Error::code`] is the core's stable code: a [`FailReason::code`] for
/// [`Error::Rejected`], an [`ratelane::Error::code`] for [`Error::Usage`] (`limiter_closed`
/// after [`close`](crate::RateLimiter::close), `invalid_request` for a malformed method or
/// path), and `send_error` for [`Error::Send`].
#[derive(Debug)]
pub enum Error<E = std::convert::Infallible> {
    /// The limiter ended the request without an answer it hands on: its predicted wait was
    /// above `max_wait`, its deadline, `defer_after`; its retries ran out; the limiter was
    /// closed while it was queued; ... ([`Rejection`]).
    Rejected(Rejection<E>),
    /// The caller's misuse, or a closed limiter: the request was never queued.
    Usage(ratelane::Error),
    /// `send` failed with an error that is not a transport failure
    /// ([`TransportError::failure`](crate::TransportError::failure) gave `None`); the request
    /// was cancelled in the limiter.
    Send(E),
}

impl<E> Error<E> {
    /// The stable code (see the type's documentation).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Rejected(r) => r.reason.code(),
            Error::Usage(e) => e.code(),
            Error::Send(_) => "send_error",
        }
    }

    /// The rejection, for [`Error::Rejected`].
    pub fn rejection(&self) -> Option<&Rejection<E>> {
        match self {
            Error::Rejected(r) => Some(r),
            _ => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rejected(r) => r.fmt(f),
            Error::Usage(e) => e.fmt(f),
            Error::Send(e) => write!(f, "send failed: {e}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Rejected(r) => r.source.as_ref().map(|e| e as &(dyn std::error::Error + 'static)),
            Error::Usage(e) => Some(e),
            Error::Send(e) => Some(e),
        }
    }
}

/// A request the limiter ended with a [`FailReason`], with the reason's times on the tokio
/// clock.
#[derive(Debug)]
pub struct Rejection<E = std::convert::Infallible> {
    /// The core's reason (its times are nanoseconds of the driver's clock, from
    /// [`RateLimiter::epoch`](crate::RateLimiter::epoch)).
    pub reason: FailReason,
    /// The transport error of the last attempt, for `maybe_sent` and `network_error`.
    pub source: Option<E>,
    pub(crate) epoch: Instant,
}

impl<E> Rejection<E> {
    /// The rejection of a request the core failed with `reason`, its times counted from
    /// `epoch` (the limiter's [`epoch`](crate::RateLimiter::epoch)).
    pub fn new(reason: FailReason, epoch: Instant) -> Self {
        Rejection { reason, source: None, epoch }
    }

    /// The stable code ([`FailReason::code`]).
    pub fn code(&self) -> &'static str {
        self.reason.code()
    }

    /// `max_wait_exceeded`: the predicted wait.
    pub fn predicted_wait(&self) -> Option<Duration> {
        match self.reason {
            FailReason::MaxWaitExceeded { predicted_wait } => Some(Duration::from_nanos(predicted_wait)),
            _ => None,
        }
    }

    /// When the limiter predicts the request could go: `deferred`'s time to enqueue it again,
    /// `deadline_exceeded`'s predicted send time (when it could predict one), and
    /// `max_wait_exceeded`'s end of the predicted wait... as an instant.
    pub fn retry_at(&self) -> Option<Instant> {
        let at = match self.reason {
            FailReason::Deferred { retry_at } => retry_at,
            FailReason::DeadlineExceeded { predicted_send_at: Some(t) } => t,
            _ => return None,
        };
        Some(self.epoch + Duration::from_nanos(at))
    }
}

impl<E> fmt::Display for Rejection<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.reason, self.reason.code())
    }
}
