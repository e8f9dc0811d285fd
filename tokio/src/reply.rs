//! What the driver reads from an answer (its status, headers and, where the profile reads it,
//! its body, which the core parses) and from a transport error (whether the request may have
//! reached the server).

use std::future::Future;

use ratelane::Failure;

/// An HTTP answer as the driver reads it: implemented for `reqwest::Response` (feature
/// `reqwest`), `http::Response<bytes::Bytes>`-like buffered answers ([`Buffered`]), and
/// anything a caller wraps.
pub trait Reply: Sized + Send {
    /// The HTTP status code.
    fn status(&self) -> u16;

    /// The headers, in the order received, repeated names included (values that are not
    /// visible ASCII are skipped).
    fn headers(&self) -> Vec<(String, String)>;

    /// Reads the body (the driver calls it only when the profile reads this status's body, a
    /// Discord 429 above all, or for a request with costs) and returns the answer whole again,
    /// its body buffered, beside the body's bytes, which the core reads
    /// ([`ratelane::BodyHints::from_json`]). A body that cannot be read whole is empty.
    fn read_body(self) -> impl Future<Output = (Self, Vec<u8>)> + Send;
}

/// A transport error as the driver classifies it: `Some(Failure::NotSent)` when the request
/// certainly did not reach the server (the connection was refused), `Some(Failure::MaybeSent)`
/// when it may have (reset, timeout after writing), `None` when the error is not a transport
/// failure at all (the request is then cancelled in the limiter and the error returned as
/// [`crate::Error::Send`]).
pub trait TransportError {
    /// How the request failed, as far as the error tells.
    fn failure(&self) -> Option<Failure>;
}

impl TransportError for std::io::Error {
    fn failure(&self) -> Option<Failure> {
        use std::io::ErrorKind::*;
        Some(match self.kind() {
            ConnectionRefused | AddrNotAvailable | NotFound => Failure::NotSent,
            _ => Failure::MaybeSent,
        })
    }
}

impl TransportError for std::convert::Infallible {
    fn failure(&self) -> Option<Failure> {
        match *self {}
    }
}

/// A buffered answer: status, headers and body, for tests and for callers whose client hands
/// the whole answer over at once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Buffered {
    /// HTTP status.
    pub status: u16,
    /// Headers in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply for Buffered {
    fn status(&self) -> u16 {
        self.status
    }

    fn headers(&self) -> Vec<(String, String)> {
        self.headers.clone()
    }

    async fn read_body(self) -> (Self, Vec<u8>) {
        let body = self.body.clone();
        (self, body)
    }
}
