//! [`WrittenBody`]: a request body that reports its attempt written when the client first
//! reads it (feature `reqwest`).

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};

use crate::driver::Attempt;

/// Wraps a request body: when the HTTP client reads its first frame (hyper does once it has
/// written the request's headers), it calls [`Attempt::written`]. Its size hint is the inner
/// body's, so `Content-Length` is unchanged. A body that is empty from the start is never read
/// and reports nothing (the limiter then counts the request from its `Send`).
#[derive(Debug)]
pub struct WrittenBody<B> {
    inner: B,
    attempt: Option<Attempt>,
}

impl<B> WrittenBody<B> {
    /// `inner`, reporting to `attempt`.
    pub fn new(inner: B, attempt: Attempt) -> Self {
        WrittenBody { inner, attempt: Some(attempt) }
    }
}

impl<B: Body + Unpin> Body for WrittenBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Some(attempt) = self.attempt.take() {
            attempt.written();
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
