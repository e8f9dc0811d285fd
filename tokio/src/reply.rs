//! What the driver reads from an answer (its status, headers and, where the profile reads it,
//! its JSON body) and from a transport error (whether the request may have reached the server).

use std::future::Future;

use ratelane::{BodyHints, Failure, QueryCost};
use serde_json::Value;

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
    /// its body buffered, beside what the body says ([`body_hints`]).
    fn read_hints(self) -> impl Future<Output = (Self, BodyHints)> + Send;
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

    async fn read_hints(self) -> (Self, BodyHints) {
        let hints = body_hints(&self.body);
        (self, hints)
    }
}

/// The largest body the driver parses for hints (a Discord 429 body is under 200 bytes).
pub const MAX_HINTS_BODY: usize = 64 * 1024;

/// What a JSON body says, from the fixed places of [`ratelane::BodyHints`]: the top-level
/// `retry_after` and `global`; `extensions.cost` (a GraphQL cost); the error strings at, in
/// order, `message`, `error.type`, `error.code`, `errorCode`, each element's `errorCode` of a
/// top-level array, `errors` when a string, and each `errors[]` element's `type`,
/// `extensions.code` and `message` (at most [`BodyHints::MAX_ERRORS`], each cut to
/// [`BodyHints::MAX_ERROR_LEN`] bytes on a character boundary); and the numbers of the top-level
/// `usage` object (at most [`BodyHints::MAX_USAGE`], finite and >= 0). A body that is not JSON,
/// or longer than [`MAX_HINTS_BODY`], says nothing.
pub fn body_hints(body: &[u8]) -> BodyHints {
    let mut hints = BodyHints::default();
    if body.len() > MAX_HINTS_BODY {
        return hints;
    }
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return hints;
    };
    let number = |v: Option<&Value>| v.and_then(Value::as_f64).filter(|x| x.is_finite());
    if let Value::Object(top) = &value {
        hints.retry_after = number(top.get("retry_after"));
        hints.global = top.get("global").and_then(Value::as_bool);
        if let Some(cost) = top.get("extensions").and_then(|e| e.get("cost")).filter(|c| c.is_object()) {
            let throttle = cost.get("throttleStatus");
            hints.cost = Some(QueryCost {
                requested: number(cost.get("requestedQueryCost")),
                actual: number(cost.get("actualQueryCost")),
                maximum_available: number(throttle.and_then(|t| t.get("maximumAvailable"))),
                currently_available: number(throttle.and_then(|t| t.get("currentlyAvailable"))),
                restore_rate: number(throttle.and_then(|t| t.get("restoreRate"))),
            });
        }
        if let Some(Value::Object(usage)) = top.get("usage") {
            hints.usage = usage
                .iter()
                .filter_map(|(k, v)| v.as_f64().filter(|x| x.is_finite() && *x >= 0.0).map(|x| (k.clone(), x)))
                .take(BodyHints::MAX_USAGE)
                .collect();
        }
    }
    hints.errors = error_strings(&value);
    hints
}

fn error_strings(value: &Value) -> Vec<String> {
    fn take<'v>(found: &mut Vec<&'v str>, v: Option<&'v Value>) {
        if let Some(s) = v.and_then(Value::as_str) {
            found.push(s);
        }
    }
    let mut found: Vec<&str> = Vec::new();
    let mut take = |v| take(&mut found, v);
    match value {
        Value::Object(top) => {
            take(top.get("message"));
            let error = top.get("error");
            take(error.and_then(|e| e.get("type")));
            take(error.and_then(|e| e.get("code")));
            take(top.get("errorCode"));
            match top.get("errors") {
                Some(Value::String(_)) => take(top.get("errors")),
                Some(Value::Array(items)) => {
                    for item in items {
                        take(item.get("type"));
                        take(item.get("extensions").and_then(|e| e.get("code")));
                        take(item.get("message"));
                    }
                }
                _ => {}
            }
        }
        Value::Array(items) => {
            for item in items {
                take(item.get("errorCode"));
            }
        }
        _ => {}
    }
    found.into_iter().take(BodyHints::MAX_ERRORS).map(cut).collect()
}

/// `s` cut to [`BodyHints::MAX_ERROR_LEN`] bytes on a character boundary.
fn cut(s: &str) -> String {
    if s.len() <= BodyHints::MAX_ERROR_LEN {
        return s.to_string();
    }
    let mut end = BodyHints::MAX_ERROR_LEN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_discord_429_body() {
        let h = body_hints(br#"{"message": "You are being rate limited.", "retry_after": 0.25, "global": true}"#);
        assert_eq!(h.retry_after, Some(0.25));
        assert_eq!(h.global, Some(true));
        assert_eq!(h.errors, vec!["You are being rate limited.".to_string()]);
    }

    #[test]
    fn bodies_that_say_nothing() {
        for body in [&b""[..], b"<html>429</html>", b"[1, 2]", b"{\"retry_after\": \"soon\"}", b"null"] {
            let h = body_hints(body);
            assert_eq!(h.retry_after, None);
            assert_eq!(h.global, None);
            assert!(h.errors.is_empty());
        }
    }

    #[test]
    fn errors_in_order_and_cut() {
        let long = "é".repeat(200);
        let body = serde_json::json!({
            "message": "m", "error": {"type": "t", "code": "c"}, "errorCode": "E",
            "errors": [{"type": "T1", "extensions": {"code": "X1"}, "message": long}],
            "usage": {"total_tokens": 12, "bad": -1, "name": "x"},
        });
        let h = body_hints(body.to_string().as_bytes());
        assert_eq!(&h.errors[..6], ["m", "t", "c", "E", "T1", "X1"].map(String::from));
        assert_eq!(h.errors[6].len(), 256);
        assert_eq!(h.usage, vec![("total_tokens".to_string(), 12.0)]);
    }
}
