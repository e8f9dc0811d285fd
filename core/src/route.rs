//! Turning a concrete path into a route key and a major parameter.
//!
//! Filled in by the header-parsing work; see `route_for`.

use crate::types::HeaderProfile;

/// Where a request belongs before its bucket is known.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    /// `METHOD /template`, e.g. `POST /channels/:id/messages`. Requests with equal keys are
    /// assumed to share a bucket until the server says otherwise.
    pub key: String,
    /// The major parameter (channel id, guild id, `webhook_id/token`), or `""`.
    pub major: String,
    /// Whether the profile exempts this route from the global limit.
    pub global_exempt: bool,
}

/// Derives the route of `method path` under `profile`.
pub fn route_for(profile: HeaderProfile, method: &str, path: &str) -> Route {
    let _ = profile;
    Route { key: format!("{} {}", method.to_ascii_uppercase(), path), major: String::new(), global_exempt: false }
}
