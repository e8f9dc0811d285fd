//! Route groups known before the first answer: a prior the engine starts with.
//!
//! The engine learns that routes share a bucket from the server's bucket id
//! (`X-RateLimit-Bucket`), which arrives only with an answer. Until then every route sends its
//! own pioneer, so routes that really share a one-slot bucket meet a 429 the first time they
//! are used together. [`Config::route_groups`](crate::Config::route_groups) names such routes
//! in advance: the routes of a group share one queue (per identity and major parameter) from
//! the first request, so one pioneer probes the bucket for all of them. When an answer names
//! the bucket, every route of the group that has no bucket yet adopts it (each adoption is an
//! [`Observation::BucketLearned`](crate::Observation::BucketLearned)); from then on the
//! server's word rules, and the usual machinery applies: a route whose own answer names
//! another bucket moves to that bucket's queue, and a renamed bucket is followed.
//!
//! The prior is only a starting point, so a wrong group costs waiting, never a 429: its
//! routes take turns until the first answer. Replace it or turn it off (an empty list) in the
//! configuration; in JSON (`ratelane::json`) it is the key `route_groups`, a list of lists of
//! route keys.
//!
//! The default for the Discord profile is [`discord_route_groups`]: the reaction routes, which
//! Discord counts against one bucket whatever the method (discord.js and discord.py already
//! fold every emoji and user into one route, as [`crate::route::route_for`] does). The other routes peers hard-code are splits, not groups
//! (discord.js's and discord.py's separate bucket for deleting messages older than two weeks,
//! which needs a clock the core does not read), so they have no place here.

use crate::route::route_for;
use crate::types::HeaderProfile;

/// Discord's known route groups: the message-reaction routes (add, remove own or another
/// user's, list, remove all) share one bucket.
pub fn discord_route_groups() -> Vec<Vec<String>> {
    vec![vec![
        "PUT /channels/:id/messages/:id/reactions/:reaction".to_string(),
        "DELETE /channels/:id/messages/:id/reactions/:reaction".to_string(),
        "GET /channels/:id/messages/:id/reactions/:reaction".to_string(),
        "DELETE /channels/:id/messages/:id/reactions".to_string(),
    ]]
}

/// The most route keys all groups together may hold.
const MAX_GROUPED_ROUTES: usize = 10_000;

/// The groups of a configuration, indexed by route key.
#[derive(Debug, Clone, Default)]
pub(crate) struct Prior {
    /// Route key -> index of its group (looked up on every enqueue: foldhash, as the
    /// limiter's maps, rather than std's SipHash).
    group_of: hashbrown::HashMap<String, usize, foldhash::fast::FixedState>,
    /// The groups' route keys; the first key of a group names the queue its routes share
    /// before their bucket is known.
    groups: Vec<Vec<String>>,
}

impl Prior {
    /// Indexes `groups` (route keys or concrete paths, turned into keys under `profile`).
    ///
    /// # Errors
    /// A message naming the bad entry: not `METHOD /path`, a route in two groups, a group
    /// of fewer than two distinct routes, too many routes.
    pub(crate) fn new(profile: HeaderProfile, groups: &[Vec<String>]) -> Result<Self, String> {
        let mut prior = Prior::default();
        let mut total = 0usize;
        for (g, group) in groups.iter().enumerate() {
            let mut keys: Vec<String> = Vec::with_capacity(group.len());
            for entry in group {
                let key = route_key(profile, entry)
                    .ok_or_else(|| format!("route_groups[{g}]: {entry:?} is not \"METHOD /path\""))?;
                if keys.contains(&key) {
                    continue;
                }
                if prior.group_of.contains_key(&key) {
                    return Err(format!("route_groups[{g}]: route {key:?} is already in another group"));
                }
                prior.group_of.insert(key.clone(), prior.groups.len());
                keys.push(key);
            }
            if keys.len() < 2 {
                return Err(format!("route_groups[{g}] must name at least two different routes"));
            }
            total += keys.len();
            if total > MAX_GROUPED_ROUTES {
                return Err(format!("route_groups may hold at most {MAX_GROUPED_ROUTES} routes"));
            }
            prior.groups.push(keys);
        }
        Ok(prior)
    }

    /// The key of the queue `route` waits in before its bucket is known: its group's, or its own.
    pub(crate) fn unlearned_key<'a>(&'a self, route: &'a str) -> &'a str {
        match self.group_of.get(route) {
            Some(&g) => &self.groups[g][0],
            None => route,
        }
    }

    /// The routes grouped with `route` (itself included), or nothing.
    pub(crate) fn group(&self, route: &str) -> &[String] {
        match self.group_of.get(route) {
            Some(&g) => &self.groups[g],
            None => &[],
        }
    }
}

/// `METHOD /path` as a route key under `profile`, or `None` if it is not of that form.
fn route_key(profile: HeaderProfile, entry: &str) -> Option<String> {
    let (method, path) = entry.trim().split_once(' ')?;
    let path = path.trim();
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if method.is_empty() || method.len() > 32 || !method.bytes().all(token) {
        return None;
    }
    if !path.starts_with('/') || path.len() > 8192 || path.contains(char::is_whitespace) {
        return None;
    }
    Some(route_for(profile, method, path).key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discord_groups_are_route_keys_already() {
        for group in discord_route_groups() {
            for key in group {
                assert_eq!(route_key(HeaderProfile::Discord, &key).as_deref(), Some(key.as_str()));
            }
        }
    }

    #[test]
    fn concrete_paths_become_the_keys_the_engine_derives() {
        let groups = vec![vec![
            "put /channels/100000000000000001/messages/200000000000000001/reactions/%F0%9F%91%8D/@me".to_string(),
            "DELETE /channels/100000000000000001/messages/200000000000000001/reactions/x/300000000000000001"
                .to_string(),
        ]];
        let prior = Prior::new(HeaderProfile::Discord, &groups).unwrap();
        let put = "PUT /channels/:id/messages/:id/reactions/:reaction";
        let del = "DELETE /channels/:id/messages/:id/reactions/:reaction";
        assert_eq!(prior.unlearned_key(del), put);
        assert_eq!(prior.unlearned_key(put), put);
        assert_eq!(prior.group(del), [put.to_string(), del.to_string()]);
        assert_eq!(prior.unlearned_key("GET /users/@me"), "GET /users/@me");
        assert!(prior.group("GET /users/@me").is_empty());
    }

    #[test]
    fn bad_groups_are_named() {
        let err = |groups: Vec<Vec<&str>>| {
            let groups: Vec<Vec<String>> =
                groups.into_iter().map(|g| g.into_iter().map(str::to_string).collect()).collect();
            Prior::new(HeaderProfile::Discord, &groups).unwrap_err()
        };
        assert!(err(vec![vec!["GET /a"]]).contains("at least two"));
        assert!(err(vec![vec!["GET /a", "get /a"]]).contains("at least two"));
        assert!(err(vec![vec!["GET /a", "GET /b"], vec!["GET /b", "GET /c"]]).contains("another group"));
        assert!(err(vec![vec!["GET", "GET /b"]]).contains("METHOD /path"));
        assert!(err(vec![vec!["GET a", "GET /b"]]).contains("METHOD /path"));
        assert!(err(vec![vec!["G(T /a", "GET /b"]]).contains("METHOD /path"));
        assert!(Prior::new(HeaderProfile::Discord, &[]).is_ok());
    }
}
