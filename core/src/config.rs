//! Limiter configuration.

use crate::error::Error;
use crate::shared::SharedConfig;
use crate::types::{HeaderProfile, MILLISECOND, Nanos, SECOND};

/// Settings for a [`crate::Limiter`]. `Config::default()` is right for a Discord bot.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// The header family the server speaks.
    pub profile: HeaderProfile,
    /// Requests per `global_window` per identity, enforced before sending (Discord: 50 per
    /// second). `0` turns the configured global limit off; the engine then learns one from
    /// refusals of the whole token (GitHub's secondary limits) that hold it for at most two
    /// `global_window`s: what the token had admitted in the last `global_window`, for ten
    /// windows after the hold.
    pub global_limit: u32,
    /// The global limit's window.
    pub global_window: Nanos,
    /// The most the global limiter adds to its window to absorb uneven latency. The margin
    /// it uses is learned from observed latency spread and never exceeds this.
    pub global_margin_max: Nanos,
    /// A request whose predicted wait exceeds this fails at once with
    /// [`crate::FailReason::MaxWaitExceeded`]. `None`: wait as long as it takes.
    pub max_wait: Option<Nanos>,
    /// The default [`crate::Request::defer_after`]: a request whose predicted wait exceeds
    /// this fails at once with [`crate::FailReason::Deferred`] (with the predicted send time,
    /// for a job queue to reschedule it), instead of waiting. `None`: no deferral.
    pub defer_after: Option<Nanos>,
    /// How many times a request is re-sent after a 429.
    pub max_rate_limit_retries: u32,
    /// How many times a request is re-sent after a 5xx or a transport failure.
    pub max_error_retries: u32,
    /// First backoff after a 5xx or transport failure; doubles each time, with jitter.
    pub backoff_base: Nanos,
    /// The longest backoff after a 5xx or transport failure.
    pub backoff_max: Nanos,
    /// The shortest wait after any 429, however small the server's hint.
    pub min_rate_limit_wait: Nanos,
    /// The one bound on every wait the engine takes from outside itself, whatever its source:
    /// a 429's `Retry-After` or body `retry_after`, a response's reset, the shared store's
    /// denial ([`ReservationAnswer::Denied`](crate::shared::ReservationAnswer::Denied)'s
    /// `retry_after`), and a restored snapshot's pauses and window lengths. A longer wait is
    /// clamped to this (see [`Config::bound_wait`]): a request then waits at most this long
    /// for it, and `max_wait`, deadlines and `predict` count the clamped wait. Default one
    /// hour.
    pub max_server_wait: Nanos,
    /// Invalid requests (401, 403, non-shared 429) allowed per `invalid_request_window`
    /// (Discord: 10,000 per 10 minutes). `0` turns the budget off.
    pub invalid_request_limit: u32,
    /// The invalid-request window.
    pub invalid_request_window: Nanos,
    /// Stop sending when invalid requests plus requests in flight reach this many
    /// (a margin below `invalid_request_limit`).
    pub invalid_request_stop_at: u32,
    /// Emit [`crate::Observation::InvalidRequestWarning`] when the count reaches this.
    pub invalid_request_warn_at: u32,
    /// First hold after a 429 with no rate-limit headers (Cloudflare-style); doubles on each
    /// consecutive one.
    pub edge_backoff_base: Nanos,
    /// The longest such hold.
    pub edge_backoff_max: Nanos,
    /// After a 401, fail every request of that identity with [`crate::FailReason::Unauthorized`].
    pub stop_on_unauthorized: bool,
    /// Seed for the backoff jitter, so runs are reproducible.
    pub jitter_seed: u64,
    /// The most route -> bucket mappings kept (oldest-learned dropped first).
    pub max_routes: usize,
    /// How long an idle, fully reset bucket is kept before it is forgotten.
    pub bucket_idle_ttl: Nanos,
    /// Shared mode: several processes share this token's limits through a store (see
    /// [`crate::shared`]). `None` (the default): this limiter alone decides.
    pub shared: Option<SharedConfig>,
    /// Routes known to share one bucket before any answer says so: a prior, replaceable and
    /// removable. Each inner list is one group of route keys, written as
    /// [`crate::route::route_for`] derives them (`PUT /channels/:id/messages/:id/reactions/:reaction`)
    /// or as concrete paths, which become keys the same way. The routes of a group share one
    /// queue, and so one pioneer, per major parameter until the server names their bucket;
    /// then every route of the group not learned yet adopts that bucket. A wrong group costs
    /// only waiting: an answer naming another bucket moves its route out. See
    /// [`crate::prior`]. Default: [`crate::prior::discord_route_groups`] for the Discord
    /// profile, none for the others; an empty list turns the prior off.
    pub route_groups: Vec<Vec<String>>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            profile: HeaderProfile::Discord,
            global_limit: 50,
            global_window: SECOND,
            global_margin_max: 250 * MILLISECOND,
            max_wait: None,
            defer_after: None,
            max_rate_limit_retries: 3,
            max_error_retries: 3,
            backoff_base: 500 * MILLISECOND,
            backoff_max: 30 * SECOND,
            min_rate_limit_wait: 50 * MILLISECOND,
            max_server_wait: 3600 * SECOND,
            invalid_request_limit: 10_000,
            invalid_request_window: 600 * SECOND,
            invalid_request_stop_at: 9_000,
            invalid_request_warn_at: 5_000,
            edge_backoff_base: 60 * SECOND,
            edge_backoff_max: 3600 * SECOND,
            stop_on_unauthorized: true,
            jitter_seed: 0x5EED_u64,
            max_routes: 100_000,
            bucket_idle_ttl: 300 * SECOND,
            shared: None,
            route_groups: crate::prior::discord_route_groups(),
        }
    }
}

impl Config {
    /// The default configuration for a header profile. Every profile but
    /// [`HeaderProfile::Discord`] (the provider packs and [`HeaderProfile::Auto`] included)
    /// drops Discord's facts: no global limit, no invalid-request budget, no route groups;
    /// their limits come from the answers.
    pub fn for_profile(profile: HeaderProfile) -> Self {
        let mut c = Config { profile, ..Config::default() };
        if profile != HeaderProfile::Discord {
            // Discord's global limit and invalid-request budget are Discord facts.
            c.global_limit = 0;
            c.invalid_request_limit = 0;
            // So are its route groups.
            c.route_groups = Vec::new();
        }
        c
    }

    /// `wait` within the engine's bound on waits from outside ([`Config::max_server_wait`]):
    /// every wait a server, the store or a snapshot sets passes here.
    pub fn bound_wait(&self, wait: Nanos) -> Nanos {
        wait.min(self.max_server_wait)
    }

    /// Checks every value; [`crate::Limiter::new`] calls this.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: &str| Err(Error::InvalidConfig(m.to_string()));
        if self.global_limit > 0 && self.global_window == 0 {
            return bad("global_window must be > 0 when global_limit is set");
        }
        if self.global_limit > 100_000 {
            return bad("global_limit must be at most 100000");
        }
        if self.global_margin_max > self.global_window {
            return bad("global_margin_max must not exceed global_window");
        }
        if self.backoff_base == 0 || self.backoff_max < self.backoff_base {
            return bad("backoff_base must be > 0 and backoff_max >= backoff_base");
        }
        if self.invalid_request_limit > 0 {
            if self.invalid_request_window == 0 {
                return bad("invalid_request_window must be > 0 when invalid_request_limit is set");
            }
            if self.invalid_request_stop_at == 0 || self.invalid_request_stop_at > self.invalid_request_limit {
                return bad("invalid_request_stop_at must be in 1..=invalid_request_limit");
            }
            if self.invalid_request_limit > 1_000_000 {
                return bad("invalid_request_limit must be at most 1000000");
            }
        }
        if self.edge_backoff_base == 0 || self.edge_backoff_max < self.edge_backoff_base {
            return bad("edge_backoff_base must be > 0 and edge_backoff_max >= edge_backoff_base");
        }
        if self.max_server_wait == 0 {
            return bad("max_server_wait must be > 0");
        }
        if self.min_rate_limit_wait > self.max_server_wait {
            return bad("min_rate_limit_wait must not exceed max_server_wait");
        }
        if self.max_routes == 0 {
            return bad("max_routes must be > 0");
        }
        if let Some(shared) = &self.shared {
            shared.validate().or_else(bad)?;
        }
        crate::prior::Prior::new(self.profile, &self.route_groups).map_err(Error::InvalidConfig)?;
        Ok(())
    }
}
