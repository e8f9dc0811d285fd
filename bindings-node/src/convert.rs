//! Pure conversions of core values, kept apart from napi so `cargo test` checks them.

use ratelane::{FailReason, Nanos};

/// The fields of a [`FailReason`] that a `fail` output carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailView {
    /// The stable code.
    pub code: &'static str,
    /// `deadline_exceeded`: `Some(prediction)`, where the prediction itself may be unknown.
    pub predicted_send_at: Option<Option<Nanos>>,
    /// `max_wait_exceeded`: the predicted wait.
    pub predicted_wait: Option<Nanos>,
    /// `retries_exhausted`, `network_error`: how many times it was tried.
    pub attempts: Option<u32>,
}

/// What a `fail` output says about `reason`.
///
/// `FailReason` is `#[non_exhaustive]` and lives in another crate, so Rust requires a
/// wildcard arm here. It keeps the core's own code (so the driver's load-time check against
/// `FAIL_CODES` names it) and carries no extra fields; the test below fails as soon as the
/// core has a code this match does not list, so the binding is updated with it.
pub fn fail_view(reason: &FailReason) -> FailView {
    let mut view = FailView {
        code: reason.code(),
        predicted_send_at: None,
        predicted_wait: None,
        attempts: None,
    };
    match reason {
        FailReason::DeadlineExceeded { predicted_send_at } => {
            view.predicted_send_at = Some(*predicted_send_at);
        }
        FailReason::MaxWaitExceeded { predicted_wait } => view.predicted_wait = Some(*predicted_wait),
        FailReason::RetriesExhausted { attempts } | FailReason::NetworkError { attempts } => {
            view.attempts = Some(*attempts);
        }
        FailReason::MaybeSent | FailReason::Unauthorized | FailReason::Closed => {}
        _ => {}
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One value of every variant `fail_view` matches explicitly.
    fn every_reason() -> Vec<FailReason> {
        vec![
            FailReason::DeadlineExceeded { predicted_send_at: Some(7) },
            FailReason::MaxWaitExceeded { predicted_wait: 9 },
            FailReason::RetriesExhausted { attempts: 4 },
            FailReason::MaybeSent,
            FailReason::NetworkError { attempts: 2 },
            FailReason::Unauthorized,
            FailReason::Closed,
        ]
    }

    #[test]
    fn every_core_fail_code_is_matched_explicitly() {
        let mut codes: Vec<&str> = every_reason().iter().map(|r| fail_view(r).code).collect();
        codes.sort_unstable();
        let mut all = FailReason::ALL_CODES.to_vec();
        all.sort_unstable();
        assert_eq!(codes, all, "a new FailReason: add it to fail_view and to every_reason");
    }

    #[test]
    fn fields_follow_the_variant() {
        let deadline = fail_view(&FailReason::DeadlineExceeded { predicted_send_at: None });
        assert_eq!(deadline.predicted_send_at, Some(None));
        assert_eq!(fail_view(&FailReason::MaxWaitExceeded { predicted_wait: 9 }).predicted_wait, Some(9));
        assert_eq!(fail_view(&FailReason::NetworkError { attempts: 2 }).attempts, Some(2));
        assert_eq!(fail_view(&FailReason::Closed).attempts, None);
    }
}
