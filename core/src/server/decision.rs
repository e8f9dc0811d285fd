//! The answer every server-side check gives, and the response headers rendered from it.

use crate::types::{Nanos, SECOND};

/// What a check decided for one key at one `now`, with everything a response needs.
///
/// All durations are relative to the `now` of the check, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Decision {
    /// True when the request was admitted (and counted); false when it is blocked (and was
    /// not counted).
    pub allowed: bool,
    /// The quota of the policy: the GCRA burst, the (scaled) bucket size, the requests per
    /// fixed window.
    pub limit: u32,
    /// Requests that could be admitted right now, one after another, after this decision.
    /// Zero whenever a single request would be blocked.
    pub remaining: u32,
    /// Until the next request is allowed: for a blocked decision, until this same request
    /// would be admitted; for an allowed one, until one more request would be (zero when
    /// `remaining > 0`). Never zero when blocked.
    pub reset_after: Nanos,
    /// Until the key is back to empty (the full quota available again); zero when it already is.
    pub clear_after: Nanos,
    /// Until `remaining` next grows, or `None` when nothing is used (the quota is full).
    /// Always `Some` and non-zero when `remaining == 0`.
    pub replenish_after: Option<Nanos>,
    /// The time a full quota takes to come back: GCRA `burst × interval`, the time a full
    /// bucket takes to drain, the fixed window's length. Used for the IETF policy's `w`.
    pub window: Nanos,
}

/// Whole seconds in `duration`, rounded up: never earlier than the true time.
pub(crate) fn ceil_secs(duration: Nanos) -> u64 {
    duration.div_ceil(SECOND)
}

impl Decision {
    /// The `Retry-After` value in whole seconds (rounded up, at least 1) when the request is
    /// blocked, `None` when it is allowed.
    pub fn retry_after_secs(&self) -> Option<u64> {
        (!self.allowed).then(|| ceil_secs(self.reset_after).max(1))
    }

    /// The headers as Sharkey (the Misskey fork) defines them, in this order:
    ///
    /// - `X-RateLimit-Remaining`: [`remaining`](Self::remaining), whole requests.
    /// - `X-RateLimit-Clear`: seconds until the key is back to empty
    ///   ([`clear_after`](Self::clear_after)), rounded up.
    /// - `X-RateLimit-Reset`, only when blocked: seconds until the request would be allowed
    ///   ([`reset_after`](Self::reset_after)), rounded up, at least 1.
    /// - `Retry-After`, only when blocked: the same value as `X-RateLimit-Reset`.
    ///
    /// Sharkey itself writes `Clear` and `Reset` with three decimals; these are whole seconds
    /// rounded up, which no client can read as "earlier than allowed".
    pub fn x_ratelimit_headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            ("X-RateLimit-Remaining", self.remaining.to_string()),
            ("X-RateLimit-Clear", ceil_secs(self.clear_after).to_string()),
        ];
        if let Some(retry) = self.retry_after_secs() {
            headers.push(("X-RateLimit-Reset", retry.to_string()));
            headers.push(("Retry-After", retry.to_string()));
        }
        headers
    }

    /// The IETF fields (draft-ietf-httpapi-ratelimit-headers -08 to -10) for the policy named
    /// `policy`, in this order:
    ///
    /// - `RateLimit-Policy: "policy";q=<limit>;w=<window>`, with `w` in seconds rounded up
    ///   (at least 1). Rounding `w` up describes a slower rate than the real one, so a client
    ///   that follows the policy is never refused for it.
    /// - `RateLimit: "policy";r=<remaining>;t=<seconds>`. `t` is the draft's "time until
    ///   additional quota is made available": [`replenish_after`](Self::replenish_after), the
    ///   time until `remaining` grows, rounded up. It is left out when nothing is used (no quota
    ///   will be added), and it is at least 1 when `r=0`, so `r=0` never comes with `t=0`. On a
    ///   block with `r=0` it equals `Retry-After`.
    /// - `Retry-After`, only when blocked, as in [`retry_after_secs`](Self::retry_after_secs)
    ///   (never earlier than `t`, as the draft asks). If you also send
    ///   [`x_ratelimit_headers`](Self::x_ratelimit_headers), send `Retry-After` once.
    ///
    /// The policy name becomes a structured-field string: `"` and `\` are escaped and
    /// characters outside printable ASCII are dropped.
    pub fn ietf_headers(&self, policy: &str) -> Vec<(&'static str, String)> {
        let name = sf_string(policy);
        let window = ceil_secs(self.window).max(1);
        let mut limit = format!("{name};r={}", self.remaining);
        if let Some(replenish) = self.replenish_after {
            limit.push_str(&format!(";t={}", ceil_secs(replenish).max(1)));
        }
        let mut headers = vec![
            ("RateLimit-Policy", format!("{name};q={};w={window}", self.limit)),
            ("RateLimit", limit),
        ];
        if let Some(retry) = self.retry_after_secs() {
            headers.push(("Retry-After", retry.to_string()));
        }
        headers
    }
}

/// `value` as an RFC 9651 sf-string: quoted, `"` and `\` escaped, only printable ASCII kept.
fn sf_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars().filter(|c| matches!(c, ' '..='~')) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked() -> Decision {
        Decision {
            allowed: false,
            limit: 10,
            remaining: 0,
            reset_after: 1_000_000_001,
            clear_after: 9 * SECOND + 1,
            replenish_after: Some(1_000_000_001),
            window: 10 * SECOND,
        }
    }

    #[test]
    fn rounding_is_up_at_full_precision() {
        assert_eq!(ceil_secs(0), 0);
        assert_eq!(ceil_secs(1), 1);
        assert_eq!(ceil_secs(SECOND), 1);
        assert_eq!(ceil_secs(SECOND + 1), 2);
        assert_eq!(ceil_secs(u64::MAX), u64::MAX / SECOND + 1);
    }

    #[test]
    fn blocked_decision_renders_reset_and_retry_after() {
        let d = blocked();
        assert_eq!(
            d.x_ratelimit_headers(),
            vec![
                ("X-RateLimit-Remaining", "0".to_string()),
                ("X-RateLimit-Clear", "10".to_string()),
                ("X-RateLimit-Reset", "2".to_string()),
                ("Retry-After", "2".to_string()),
            ]
        );
        assert_eq!(
            d.ietf_headers("per-user"),
            vec![
                ("RateLimit-Policy", "\"per-user\";q=10;w=10".to_string()),
                ("RateLimit", "\"per-user\";r=0;t=2".to_string()),
                ("Retry-After", "2".to_string()),
            ]
        );
    }

    #[test]
    fn allowed_full_quota_has_no_t_and_no_retry_after() {
        let d = Decision {
            allowed: true,
            remaining: 10,
            reset_after: 0,
            clear_after: 0,
            replenish_after: None,
            window: 300 * 1_000_000,
            ..blocked()
        };
        assert_eq!(d.retry_after_secs(), None);
        assert_eq!(d.x_ratelimit_headers().len(), 2);
        assert_eq!(
            d.ietf_headers("p"),
            vec![
                ("RateLimit-Policy", "\"p\";q=10;w=1".to_string()),
                ("RateLimit", "\"p\";r=10".to_string()),
            ]
        );
    }

    #[test]
    fn policy_names_are_escaped() {
        assert_eq!(sf_string("a\"b\\c\u{e9}\n"), "\"a\\\"b\\\\c\"");
    }
}
