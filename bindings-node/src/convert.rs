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
    /// `deferred`: the predicted send time (monotonic), when to enqueue it again.
    pub retry_at: Option<Nanos>,
    /// `retries_exhausted`, `network_error`: how many times it was tried.
    pub attempts: Option<u32>,
    /// `insufficient_capacity`: the dimension, the request's estimated cost in it and the
    /// dimension's limit.
    pub capacity: Option<(String, u64, u64)>,
}

/// What a `fail` output says about `reason`.
///
/// `FailReason` is exhaustive (core commit "FailReason, Error and Observation are
/// exhaustive"), so this match has no wildcard arm: a new reason in the core breaks this
/// crate's build until it is listed here.
pub fn fail_view(reason: &FailReason) -> FailView {
    let mut view = FailView {
        code: reason.code(),
        predicted_send_at: None,
        predicted_wait: None,
        retry_at: None,
        attempts: None,
        capacity: None,
    };
    match reason {
        FailReason::DeadlineExceeded { predicted_send_at } => {
            view.predicted_send_at = Some(*predicted_send_at);
        }
        FailReason::MaxWaitExceeded { predicted_wait } => view.predicted_wait = Some(*predicted_wait),
        FailReason::Deferred { retry_at } => view.retry_at = Some(*retry_at),
        FailReason::RetriesExhausted { attempts } | FailReason::NetworkError { attempts } => {
            view.attempts = Some(*attempts);
        }
        FailReason::InsufficientCapacity { dimension, cost, limit } => {
            view.capacity = Some((dimension.clone(), *cost, *limit));
        }
        FailReason::MaybeSent | FailReason::Unauthorized | FailReason::Closed => {}
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
            FailReason::Deferred { retry_at: 11 },
            FailReason::RetriesExhausted { attempts: 4 },
            FailReason::MaybeSent,
            FailReason::NetworkError { attempts: 2 },
            FailReason::Unauthorized,
            FailReason::Closed,
            FailReason::InsufficientCapacity { dimension: "tokens".into(), cost: 5, limit: 4 },
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
        assert_eq!(fail_view(&FailReason::Deferred { retry_at: 11 }).retry_at, Some(11));
        assert_eq!(fail_view(&FailReason::Deferred { retry_at: 11 }).predicted_wait, None);
        assert_eq!(fail_view(&FailReason::NetworkError { attempts: 2 }).attempts, Some(2));
        assert_eq!(fail_view(&FailReason::Closed).attempts, None);
        let capacity = fail_view(&FailReason::InsufficientCapacity { dimension: "tokens".into(), cost: 5, limit: 4 });
        assert_eq!(capacity.capacity, Some(("tokens".to_string(), 5, 4)));
        assert_eq!(capacity.attempts, None);
        assert_eq!(fail_view(&FailReason::Closed).capacity, None);
    }
}
