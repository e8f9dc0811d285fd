//! The client-side engine. (Implementation in progress; API fixed.)

use crate::config::Config;
use crate::error::Error;
use crate::types::*;

/// The sans-IO client-side rate limiter.
#[derive(Debug)]
pub struct Limiter {
    config: Config,
}

/// When a request is expected to be sent (see [`Limiter::predict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prediction {
    /// Expected monotonic send time (`now` if it could go at once).
    pub send_at: Nanos,
}

impl Limiter {
    /// A limiter with `config` (validated).
    pub fn new(config: Config) -> Result<Self, Error> {
        config.validate()?;
        Ok(Limiter { config })
    }
    /// The configuration.
    pub fn config(&self) -> &Config { &self.config }
    /// Queues a request.
    pub fn enqueue(&mut self, now: Nanos, request: Request) -> Result<RequestId, Error> { let _ = (now, request); todo!() }
    /// A response arrived for a sent request.
    pub fn handle_response(&mut self, now: Nanos, id: RequestId, response: &Response<'_>) -> Result<Disposition, Error> { let _ = (now, id, response); todo!() }
    /// The transport failed for a sent request.
    pub fn handle_failure(&mut self, now: Nanos, id: RequestId, failure: Failure) -> Result<Disposition, Error> { let _ = (now, id, failure); todo!() }
    /// The caller gave up on a request (queued or in flight).
    pub fn cancel(&mut self, now: Nanos, id: RequestId) -> Result<(), Error> { let _ = (now, id); todo!() }
    /// Time passed.
    pub fn handle_timeout(&mut self, now: Nanos) { let _ = now; todo!() }
    /// Fails everything queued with `Closed`.
    pub fn close(&mut self, now: Nanos) { let _ = now; todo!() }
    /// Next output.
    #[must_use]
    pub fn poll_output(&mut self) -> Output { todo!() }
    /// Predicts when `request` would be sent if enqueued now.
    pub fn predict(&self, now: Nanos, request: &Request) -> Result<Prediction, Error> { let _ = (now, request); todo!() }
    /// Requests queued (not yet sent).
    pub fn queued(&self) -> usize { todo!() }
    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> usize { todo!() }
}
