//! A [`reqwest_middleware`] middleware (feature `reqwest`): every request of a
//! `ClientWithMiddleware` goes through a [`RateLimiter`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ratelane::Config;
//! use ratelane_tokio::{RateLimiter, middleware::RateLimitMiddleware};
//!
//! let limiter = RateLimiter::new(Config::default())?;
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(RateLimitMiddleware::new(limiter.clone()))
//!     .build();
//! let answer = client
//!     .post("https://discord.com/api/v10/channels/123/messages")
//!     .header("authorization", "Bot ...")
//!     .send()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Per-request [`Options`] (identity, deadline, priority...) go in the request's extensions:
//! `client.get(url).with_extension(Options { priority: 1, ..Options::default() })`.
//!
//! A refusal (`max_wait_exceeded`, `closed`, ...) is a `reqwest_middleware::Error::Middleware`
//! whose `anyhow::Error` holds a [`MiddlewareError`] (`err.downcast_ref::<MiddlewareError>()`,
//! then `.code()`). A request whose body cannot be cloned (a stream) is sent at most once: if
//! the limiter wants it re-sent (a 429), the middleware answers with the error
//! [`NotReplayable`] instead.

use http::Extensions;
use http_body_util::BodyExt;
use ratelane::{BodyHints, Failure};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use crate::driver::{Options, RateLimiter};
use crate::error::Error;
use crate::reply::{Reply, TransportError, body_hints};
use crate::written::WrittenBody;

/// What a refusal of the middleware holds (inside `reqwest_middleware::Error::Middleware`).
pub type MiddlewareError = Error<reqwest_middleware::Error>;

/// The middleware: `ClientBuilder::new(client).with(RateLimitMiddleware::new(limiter))`.
#[derive(Debug, Clone)]
pub struct RateLimitMiddleware {
    limiter: RateLimiter,
    options: Options,
}

impl RateLimitMiddleware {
    /// Limits every request with `limiter`.
    pub fn new(limiter: RateLimiter) -> Self {
        RateLimitMiddleware { limiter, options: Options::default() }
    }

    /// Options for every request that carries none in its extensions (an identity, a
    /// `timeout`...).
    pub fn with_options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// The limiter.
    pub fn limiter(&self) -> &RateLimiter {
        &self.limiter
    }
}

/// The limiter wanted a request sent again whose body could not be cloned (a stream).
#[derive(Debug)]
pub struct NotReplayable;

impl std::fmt::Display for NotReplayable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request must be sent again but its body cannot be cloned")
    }
}

impl std::error::Error for NotReplayable {}

#[async_trait::async_trait]
impl Middleware for RateLimitMiddleware {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let options = extensions.get::<Options>().cloned().unwrap_or_else(|| self.options.clone());
        let method = req.method().as_str().to_owned();
        let url = req.url().as_str().to_owned();
        let mut original = Some(req);
        let shared: &Extensions = extensions;
        let result = self
            .limiter
            .run_attempts(&method, &url, &options, |report| {
                let mut attempt = match original.as_ref().and_then(Request::try_clone) {
                    Some(copy) => Some(copy),
                    None => original.take(),
                };
                // The body reports the attempt written when reqwest starts sending it.
                if let Some(req) = attempt.as_mut()
                    && let Some(body) = req.body_mut().take()
                {
                    *req.body_mut() = Some(reqwest::Body::wrap(WrittenBody::new(body, report)));
                }
                let next = next.clone();
                let mut ext = shared.clone();
                async move {
                    let Some(attempt) = attempt else {
                        return Err(reqwest_middleware::Error::middleware(NotReplayable));
                    };
                    next.run(attempt, &mut ext).await
                }
            })
            .await;
        match result {
            Ok(response) => Ok(response),
            Err(Error::Send(e)) => Err(e),
            Err(e) => Err(reqwest_middleware::Error::Middleware(anyhow::Error::new(e))),
        }
    }
}

impl Reply for Response {
    fn status(&self) -> u16 {
        self.status().as_u16()
    }

    fn headers(&self) -> Vec<(String, String)> {
        headers_of(self.headers())
    }

    async fn read_hints(self) -> (Self, BodyHints) {
        let response: http::Response<reqwest::Body> = self.into();
        let (parts, body) = response.into_parts();
        // A body cut short says nothing (the answer is a 429 the limiter handles either way).
        let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
        let hints = body_hints(&bytes);
        (Response::from(http::Response::from_parts(parts, bytes)), hints)
    }
}

/// Header pairs in order (values that are not visible ASCII are skipped).
pub fn headers_of(headers: &http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_owned(), v.to_owned())))
        .collect()
}

impl TransportError for reqwest::Error {
    fn failure(&self) -> Option<Failure> {
        if self.is_builder() || self.is_redirect() || self.is_status() || self.is_decode() {
            None
        } else if self.is_connect() {
            Some(Failure::NotSent)
        } else {
            Some(Failure::MaybeSent)
        }
    }
}

impl TransportError for reqwest_middleware::Error {
    fn failure(&self) -> Option<Failure> {
        match self {
            reqwest_middleware::Error::Reqwest(e) => e.failure(),
            reqwest_middleware::Error::Middleware(_) => None,
        }
    }
}
