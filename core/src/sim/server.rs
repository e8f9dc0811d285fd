//! A model of Discord's REST rate limiting, as seen from the client (protocols.md §1), which
//! can also answer in the other providers' headers ([`ServerConfig::dialect`]).

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::rng::SplitMix64;
use crate::route::{Route, route_for, sub_limit_class};
use crate::types::{BodyHints, HeaderProfile, MILLISECOND, Nanos, QueryCost, Request, Response, SECOND};

/// How a limit counts requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WindowKind {
    /// Discord's shape: a window opens at the first arrival after the previous one closed and
    /// lasts `window`; at most `limit` arrivals are accepted in it. `X-RateLimit-Reset-After` is
    /// the time left in the window.
    #[default]
    Fixed,
    /// At most `limit` arrivals in any `window` ending now (a sliding log).
    /// `X-RateLimit-Reset-After` is the time until the window is empty again (the newest
    /// counted arrival plus `window`); a 429's `retry_after` is the time until one slot frees.
    Sliding,
    /// A bucket that holds `limit` and refills continuously, `limit` per `window` (a token
    /// bucket: OpenAI's and Anthropic's requests and tokens per minute, Shopify GraphQL's
    /// points): an arrival is accepted when what is left covers it, and takes it. The reset
    /// the headers give is the time until the bucket is full again; `remaining` is what is left,
    /// rounded down.
    Refill,
}

/// A limit: `limit` arrivals per `window`, counted on arrival time at the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BucketSpec {
    /// Requests accepted per window.
    pub limit: u32,
    /// The window's length.
    pub window: Nanos,
    /// Fixed or sliding.
    pub kind: WindowKind,
}

impl BucketSpec {
    /// `limit` per `window`, fixed window (Discord's shape).
    pub fn fixed(limit: u32, window: Nanos) -> Self {
        BucketSpec {
            limit,
            window,
            kind: WindowKind::Fixed,
        }
    }

    /// `limit` per `window`, sliding window.
    pub fn sliding(limit: u32, window: Nanos) -> Self {
        BucketSpec {
            limit,
            window,
            kind: WindowKind::Sliding,
        }
    }

    /// A bucket of `limit` refilling continuously at `limit` per `window`.
    pub fn refill(limit: u32, window: Nanos) -> Self {
        BucketSpec {
            limit,
            window,
            kind: WindowKind::Refill,
        }
    }
}

/// A continuously refilling bucket's level, exact in integers: its deficit (what is missing
/// to full) in units of 1 / `window` of a unit, as of `at`. Refilling for `dt` takes
/// `capacity * dt` off it.
#[derive(Debug, Clone, Copy, Default)]
struct Level {
    debt: u128,
    at: Nanos,
}

impl Level {
    fn refresh(&mut self, capacity: u64, now: Nanos) {
        if now > self.at {
            self.debt = self.debt.saturating_sub(u128::from(capacity) * u128::from(now - self.at));
            self.at = now;
        }
    }

    /// Units missing to full, rounded up.
    fn used(&self, window: Nanos) -> u64 {
        u64::try_from(self.debt.div_ceil(u128::from(window.max(1)))).unwrap_or(u64::MAX)
    }

    fn fits(&self, capacity: u64, window: Nanos, cost: u64) -> bool {
        self.debt + u128::from(cost) * u128::from(window) <= u128::from(capacity) * u128::from(window)
    }

    fn take(&mut self, window: Nanos, cost: u64) {
        self.debt += u128::from(cost) * u128::from(window);
    }

    /// When it is full again.
    fn full_at(&self, capacity: u64, now: Nanos) -> Nanos {
        let wait = self.debt.div_ceil(u128::from(capacity.max(1)));
        now.saturating_add(u64::try_from(wait).unwrap_or(u64::MAX))
    }

    /// When `cost` fits (`now` if it does; a cost above `capacity` never does: when full).
    fn fits_at(&self, capacity: u64, window: Nanos, cost: u64, now: Nanos) -> Nanos {
        if cost > capacity {
            return self.full_at(capacity, now);
        }
        let allowed = u128::from(capacity - cost) * u128::from(window);
        let wait = self.debt.saturating_sub(allowed).div_ceil(u128::from(capacity.max(1)));
        now.saturating_add(u64::try_from(wait).unwrap_or(u64::MAX))
    }
}

/// How the server treats one route (`METHOD /template`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteSpec {
    /// The bucket hash this route counts against (per identity and major parameter). `None`:
    /// no per-route limit, and no rate-limit headers on its responses.
    pub bucket: Option<String>,
    /// Not counted against, nor limited by, the identity's global limit (interaction
    /// callbacks, webhook-token routes).
    pub global_exempt: bool,
    /// A hidden sub-limit of this route and major parameter (per identity): when it is
    /// exceeded the server answers 429 (scope `user`) while the bucket still shows
    /// `X-RateLimit-Remaining` > 0. Rejected requests do not consume a bucket slot.
    pub sub_limit: Option<BucketSpec>,
    /// When set, the sub-limit applies only to requests of this class, as the server tells it
    /// from the request's body ([`crate::route::sub_limit_class`] of its
    /// [`Request::body_keys`], whatever class the client claims); the route's other requests
    /// only use the bucket. `None`: every request of the route.
    pub sub_limit_class: Option<String>,
    /// A per-resource limit shared by every identity (route and major parameter): when it
    /// is exceeded the server answers 429 with `X-RateLimit-Scope: shared`, a `Retry-After`
    /// until the resource's window ends, and the bucket headers (the request did consume a
    /// bucket slot). Does not count as an invalid request.
    pub shared_limit: Option<BucketSpec>,
    /// The status of an accepted request (default 200). 401 and 403 count as invalid
    /// requests.
    pub status: Option<u16>,
}

impl RouteSpec {
    /// A route counted against bucket `hash`.
    pub fn bucket(hash: impl Into<String>) -> Self {
        RouteSpec {
            bucket: Some(hash.into()),
            ..RouteSpec::default()
        }
    }

    /// A route with no per-route limit and no rate-limit headers (only the global limit).
    pub fn unlimited() -> Self {
        RouteSpec::default()
    }

    /// Exempts the route from the global limit.
    pub fn exempt(mut self) -> Self {
        self.global_exempt = true;
        self
    }

    /// Adds a hidden sub-limit (see [`RouteSpec::sub_limit`]).
    pub fn with_sub_limit(mut self, spec: BucketSpec) -> Self {
        self.sub_limit = Some(spec);
        self
    }

    /// Adds a hidden sub-limit for the requests of one class only (see
    /// [`RouteSpec::sub_limit_class`]).
    pub fn with_sub_limit_for(mut self, class: impl Into<String>, spec: BucketSpec) -> Self {
        self.sub_limit = Some(spec);
        self.sub_limit_class = Some(class.into());
        self
    }

    /// Adds a shared per-resource limit (see [`RouteSpec::shared_limit`]).
    pub fn with_shared_limit(mut self, spec: BucketSpec) -> Self {
        self.shared_limit = Some(spec);
        self
    }

    /// Sets the status of accepted requests (e.g. 403 for a route the bot may not use).
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }
}

/// From `at` on, `route` counts against bucket `bucket` (Discord changing a route's hash).
/// If `bucket` has no entry in [`ServerConfig::buckets`], it gets the spec of the route's
/// previous bucket, with fresh state: a rename.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remap {
    /// When the change takes effect (server time).
    pub at: Nanos,
    /// The route key (`METHOD /template`).
    pub route: String,
    /// The new bucket hash; `None` makes the route unlimited.
    pub bucket: Option<String>,
}

/// Everything the server model enforces. Build it with [`ServerConfig::discord`] and the
/// builder methods.
///
/// Route keys are `METHOD /template` exactly as the limiter derives them: for a
/// [`Request::with_route`] request, the upper-cased method, a space and the template; for a
/// [`Request::new`] request, [`crate::route::route_for`] under [`ServerConfig::profile`].
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// How concrete paths become route keys (see [`crate::route::route_for`]).
    pub profile: HeaderProfile,
    /// Bucket hash -> limit. State is kept per (identity, hash, major parameter).
    pub buckets: BTreeMap<String, BucketSpec>,
    /// Route key -> how the route is limited.
    pub routes: BTreeMap<String, RouteSpec>,
    /// Routes missing from [`ServerConfig::routes`] get a bucket of their own with this
    /// limit (hash `auto-` + a hash of the route key); `None`: they are unlimited and
    /// send no rate-limit headers.
    pub default_bucket: Option<BucketSpec>,
    /// The global limit per identity, counted on arrival; `None` turns it off.
    /// Requests rejected by the global limit are not counted; every other arrival on a
    /// non-exempt route is (including 429s from buckets and 5xx).
    pub global: Option<BucketSpec>,
    /// Invalid requests (401, 403, non-shared 429) tolerated per `invalid_window`
    /// from this client (one IP) before a ban. `0` turns bans off.
    pub invalid_limit: u32,
    /// The window of the invalid-request counter (sliding).
    pub invalid_window: Nanos,
    /// How long a ban lasts: every request gets a Cloudflare-style 429 with no rate-limit
    /// headers and an HTML body.
    pub ban_duration: Nanos,
    /// Probability that an accepted request is answered with a 5xx with no rate-limit
    /// headers (it still counts against its limits).
    pub error_rate: f64,
    /// Bucket changes over time.
    pub remaps: Vec<Remap>,
    /// Identities whose token is rejected with 401.
    pub unauthorized: Vec<String>,
    /// The server's wall clock at time 0, in ms since the Unix epoch (for `X-RateLimit-Reset`
    /// and `Date`).
    pub wall_epoch_ms: u64,
    /// Seed of the 5xx draws.
    pub seed: u64,
    /// Whose headers the server answers with (default [`HeaderProfile::Discord`]): the same
    /// limits, told in that provider's form (see [`Server`], "Dialects").
    pub dialect: HeaderProfile,
    /// A token budget beside each bucket (per identity, bucket and major parameter): every
    /// accepted request costs [`TokenSpec::cost`] tokens. `None`: requests only.
    pub tokens: Option<TokenSpec>,
    /// A leaky bucket per identity that every non-exempt request fills (Shopify's REST Admin
    /// API), checked after the global limit. `None`: none.
    pub leaky: Option<LeakySpec>,
}

/// A token budget: [`TokenSpec::limit`] admits `limit.limit` requests' worth of tokens per
/// `limit.window`, each request costing `cost` tokens (headers show tokens: `limit.limit *
/// cost` in all), unless it says its own cost ([`Server::handle_costing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenSpec {
    /// Tokens each request costs.
    pub cost: u64,
    /// The budget, in requests' worth of tokens.
    pub limit: BucketSpec,
}

impl TokenSpec {
    /// The budget in tokens: `limit.limit * cost`.
    pub fn total(&self) -> u64 {
        u64::from(self.limit.limit).saturating_mul(self.cost)
    }
}

/// A leaky bucket: holds `size` requests, one leaks out every `leak_interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakySpec {
    /// The bucket's size.
    pub size: u32,
    /// How long one request takes to leak out.
    pub leak_interval: Nanos,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig::discord()
    }
}

impl ServerConfig {
    /// Discord's defaults: global 50/s per identity (fixed window on arrival), invalid
    /// requests 10,000 per 10 minutes then a one-hour ban, no routes (add them), unlisted
    /// routes unlimited, no 5xx.
    pub fn discord() -> Self {
        ServerConfig {
            profile: HeaderProfile::Discord,
            buckets: BTreeMap::new(),
            routes: BTreeMap::new(),
            default_bucket: None,
            global: Some(BucketSpec::fixed(50, SECOND)),
            invalid_limit: 10_000,
            invalid_window: 600 * SECOND,
            ban_duration: 3600 * SECOND,
            error_rate: 0.0,
            remaps: Vec::new(),
            unauthorized: Vec::new(),
            wall_epoch_ms: 1_700_000_000_000,
            seed: 0x5151_5151,
            dialect: HeaderProfile::Discord,
            tokens: None,
            leaky: None,
        }
    }

    /// Answers in `dialect`'s headers (see [`ServerConfig::dialect`]).
    pub fn dialect(mut self, dialect: HeaderProfile) -> Self {
        self.dialect = dialect;
        self
    }

    /// Adds a token budget (see [`ServerConfig::tokens`]).
    pub fn tokens(mut self, cost: u64, limit: BucketSpec) -> Self {
        self.tokens = Some(TokenSpec { cost, limit });
        self
    }

    /// Adds a leaky bucket per identity (see [`ServerConfig::leaky`]).
    pub fn leaky(mut self, size: u32, leak_interval: Nanos) -> Self {
        self.leaky = Some(LeakySpec { size, leak_interval });
        self
    }

    /// Adds (or replaces) bucket `hash`.
    pub fn bucket(mut self, hash: impl Into<String>, spec: BucketSpec) -> Self {
        self.buckets.insert(hash.into(), spec);
        self
    }

    /// Adds (or replaces) route `key` (`METHOD /template`).
    pub fn route(mut self, key: impl Into<String>, spec: RouteSpec) -> Self {
        self.routes.insert(key.into(), spec);
        self
    }

    /// Gives unlisted routes a bucket of their own (see [`ServerConfig::default_bucket`]).
    pub fn default_bucket(mut self, spec: BucketSpec) -> Self {
        self.default_bucket = Some(spec);
        self
    }

    /// Sets the global limit per identity (`None`: off).
    pub fn global(mut self, spec: Option<BucketSpec>) -> Self {
        self.global = spec;
        self
    }

    /// Sets the invalid-request budget and the ban that follows exceeding it.
    pub fn invalid_requests(mut self, limit: u32, window: Nanos, ban: Nanos) -> Self {
        self.invalid_limit = limit;
        self.invalid_window = window;
        self.ban_duration = ban;
        self
    }

    /// Sets the probability of a 5xx on accepted requests.
    pub fn error_rate(mut self, p: f64) -> Self {
        self.error_rate = p;
        self
    }

    /// From `at` on, `route` counts against `bucket` (see [`Remap`]).
    pub fn remap(mut self, at: Nanos, route: impl Into<String>, bucket: Option<&str>) -> Self {
        self.remaps.push(Remap {
            at,
            route: route.into(),
            bucket: bucket.map(str::to_string),
        });
        self
    }

    /// Rejects `identity`'s token with 401.
    pub fn unauthorized(mut self, identity: impl Into<String>) -> Self {
        self.unauthorized.push(identity.into());
        self
    }

    /// Sets the seed of the 5xx draws.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
}

/// What the server did with one arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerOutcome {
    /// Accepted: 2xx, or the route's configured status (401/403/404...).
    Accepted,
    /// 429: the bucket (identity, hash, major) was exhausted. Scope `user`.
    BucketLimited,
    /// 429: a hidden sub-limit of the route and major was exhausted; the bucket had room.
    SubLimited,
    /// 429 with scope `shared`: the resource's shared limit was exhausted.
    SharedLimited,
    /// 429: the identity's global limit was exhausted.
    GlobalLimited,
    /// 429 from the edge during a ban: no rate-limit headers, an HTML body.
    Banned,
    /// 401: the identity's token is rejected.
    Unauthorized,
    /// A 5xx with no rate-limit headers.
    ServerError,
}

impl ServerOutcome {
    /// True for every outcome answered with 429.
    pub fn is_429(self) -> bool {
        matches!(
            self,
            ServerOutcome::BucketLimited
                | ServerOutcome::SubLimited
                | ServerOutcome::SharedLimited
                | ServerOutcome::GlobalLimited
                | ServerOutcome::Banned
        )
    }
}

/// One request that reached the server.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// Arrival time (server side).
    pub at: Nanos,
    /// The caller's tag (the simulation passes the request id).
    pub tag: u64,
    /// The request's identity.
    pub identity: String,
    /// The route key.
    pub route: String,
    /// The major parameter.
    pub major: String,
    /// The bucket hash the route counted against at that time, if any.
    pub bucket: Option<String>,
    /// The bucket's limit, if any.
    pub bucket_spec: Option<BucketSpec>,
    /// For a fixed-window bucket, the start of the window this arrival fell in (if it was
    /// counted, or rejected by the bucket).
    pub bucket_window: Option<Nanos>,
    /// Whether it consumed a bucket slot.
    pub counted_in_bucket: bool,
    /// Whether it counted against the identity's global limit.
    pub counted_global: bool,
    /// What the server did.
    pub outcome: ServerOutcome,
    /// The status returned.
    pub status: u16,
    /// The limiter never saw the response: the connection dropped after the request arrived,
    /// or the request was cancelled while in flight (set by the simulation).
    pub response_lost: bool,
    /// The tokens it cost, or asked for when refused (a token budget only; else 0).
    pub tokens: u64,
    /// It was refused because the token budget had less left than it cost.
    pub tokens_limited: bool,
}

/// A response as the server produced it: owned headers, body hints and the body text.
/// Build the borrowed [`Response`] view with [`ServerResponse::with_response`].
#[derive(Debug, Clone, PartialEq)]
pub struct ServerResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers, in order.
    pub headers: Vec<(String, String)>,
    /// What a driver would parse from the body (Discord 429 JSON: `retry_after`, `global`).
    pub body: BodyHints,
    /// The body text (JSON or HTML).
    pub body_text: String,
}

impl ServerResponse {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The headers as borrowed pairs, the shape [`Response::headers`] takes.
    pub fn header_pairs(&self) -> Vec<(&str, &str)> {
        self.headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// Builds the borrowed [`Response`] (with `wall_clock_ms`) and passes it to `f`.
    ///
    /// ```
    /// # use ratelane::sim::ServerResponse;
    /// # use ratelane::BodyHints;
    /// let owned = ServerResponse {
    ///     status: 200,
    ///     headers: vec![("X-RateLimit-Remaining".into(), "4".into())],
    ///     body: BodyHints::default(),
    ///     body_text: String::new(),
    /// };
    /// let remaining = owned.with_response(None, |r| r.headers[0].1.to_string());
    /// assert_eq!(remaining, "4");
    /// ```
    pub fn with_response<R>(
        &self,
        wall_clock_ms: Option<u64>,
        f: impl FnOnce(&Response<'_>) -> R,
    ) -> R {
        let pairs = self.header_pairs();
        let response = Response {
            status: self.status,
            headers: &pairs,
            body: self.body.clone(),
            wall_clock_ms,
        };
        f(&response)
    }
}

/// The route of `request` as the limiter derives it: `METHOD template` and the explicit
/// major for [`Request::with_route`] requests, [`route_for`] otherwise (with the request's
/// model as the major parameter where the profile limits per model,
/// [`crate::route::limits_per_model`]).
pub fn route_of(profile: HeaderProfile, request: &Request) -> Route {
    let method = request.method.to_ascii_uppercase();
    match &request.major {
        Some(major) => Route {
            key: format!("{method} {}", request.path),
            major: major.clone(),
            global_exempt: request.global_exempt.unwrap_or(false),
        },
        None => {
            let mut route = route_for(profile, &method, &request.path);
            if let Some(model) = request.model.as_ref().filter(|_| crate::route::limits_per_model(profile)) {
                route.major.clone_from(model);
            }
            route
        }
    }
}

/// The largest number of `times` in any half-open window `[t, t + window)`.
///
/// ```
/// use ratelane::sim::max_in_window;
/// assert_eq!(max_in_window(&[0, 5, 10, 11], 10), 3);
/// assert_eq!(max_in_window(&[], 10), 0);
/// ```
pub fn max_in_window(times: &[Nanos], window: Nanos) -> usize {
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..sorted.len() {
        while sorted[hi] - sorted[lo] >= window {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

#[derive(Debug, Clone, Default)]
struct Counter {
    start: Nanos,
    count: u32,
    times: VecDeque<Nanos>,
    /// [`WindowKind::Refill`]: the bucket's level.
    level: Level,
}

impl Counter {
    fn refresh(&mut self, spec: &BucketSpec, now: Nanos) {
        match spec.kind {
            WindowKind::Refill => self.level.refresh(u64::from(spec.limit), now),
            WindowKind::Fixed => {
                if self.count > 0 && now >= self.start.saturating_add(spec.window) {
                    self.count = 0;
                }
            }
            WindowKind::Sliding => {
                while let Some(&t) = self.times.front() {
                    if t.saturating_add(spec.window) <= now {
                        self.times.pop_front();
                    } else {
                        break;
                    }
                }
            }
        }
    }

    fn used(&self, spec: &BucketSpec) -> u32 {
        match spec.kind {
            WindowKind::Fixed => self.count,
            WindowKind::Sliding => u32::try_from(self.times.len()).unwrap_or(u32::MAX),
            WindowKind::Refill => u32::try_from(self.level.used(spec.window)).unwrap_or(u32::MAX),
        }
    }

    fn full(&self, spec: &BucketSpec) -> bool {
        match spec.kind {
            WindowKind::Refill => !self.level.fits(u64::from(spec.limit), spec.window, 1),
            _ => self.used(spec) >= spec.limit,
        }
    }

    fn remaining(&self, spec: &BucketSpec) -> u32 {
        spec.limit.saturating_sub(self.used(spec))
    }

    fn record(&mut self, spec: &BucketSpec, now: Nanos) {
        match spec.kind {
            WindowKind::Fixed => {
                if self.count == 0 {
                    self.start = now;
                }
                self.count += 1;
            }
            WindowKind::Sliding => self.times.push_back(now),
            WindowKind::Refill => self.level.take(spec.window, 1),
        }
    }

    /// When every counted arrival has left the window (a refilling bucket: when it is full).
    fn reset_at(&self, spec: &BucketSpec, now: Nanos) -> Nanos {
        match spec.kind {
            WindowKind::Refill => self.level.full_at(u64::from(spec.limit), now),
            WindowKind::Fixed if self.count > 0 => self.start.saturating_add(spec.window),
            WindowKind::Sliding => match self.times.back() {
                Some(&t) => t.saturating_add(spec.window),
                None => now.saturating_add(spec.window),
            },
            WindowKind::Fixed => now.saturating_add(spec.window),
        }
    }

    /// When one more arrival would be accepted.
    fn free_at(&self, spec: &BucketSpec, now: Nanos) -> Nanos {
        if !self.full(spec) {
            return now;
        }
        if spec.limit == 0 {
            return now.saturating_add(spec.window);
        }
        match spec.kind {
            WindowKind::Refill => self.level.fits_at(u64::from(spec.limit), spec.window, 1, now),
            WindowKind::Fixed => self.start.saturating_add(spec.window),
            WindowKind::Sliding => {
                let i = (self.used(spec) - spec.limit) as usize;
                self.times[i].saturating_add(spec.window)
            }
        }
    }

    fn window_start(&self, spec: &BucketSpec) -> Option<Nanos> {
        (spec.kind == WindowKind::Fixed && self.count > 0).then_some(self.start)
    }
}

/// A token budget's counter: like [`Counter`], but each arrival weighs its own cost.
#[derive(Debug, Clone, Default)]
struct TokenCounter {
    start: Nanos,
    /// Arrivals in the window: when, and what each cost.
    entries: VecDeque<(Nanos, u64)>,
    /// [`WindowKind::Refill`]: the bucket's level (`entries` stays empty).
    level: Level,
    /// [`WindowKind::Refill`]: the budget's total and window, as of the last refresh.
    refill: Option<(u64, Nanos)>,
}

impl TokenCounter {
    fn refresh(&mut self, spec: &BucketSpec, total: u64, now: Nanos) {
        match spec.kind {
            WindowKind::Refill => {
                self.refill = Some((total, spec.window));
                self.level.refresh(total, now);
            }
            WindowKind::Fixed => {
                if !self.entries.is_empty() && now >= self.start.saturating_add(spec.window) {
                    self.entries.clear();
                }
            }
            WindowKind::Sliding => {
                while self.entries.front().is_some_and(|&(t, _)| t.saturating_add(spec.window) <= now) {
                    self.entries.pop_front();
                }
            }
        }
    }

    fn used(&self) -> u64 {
        match self.refill {
            Some((_, window)) => self.level.used(window),
            None => self.entries.iter().fold(0u64, |a, &(_, c)| a.saturating_add(c)),
        }
    }

    fn fits(&self, total: u64, cost: u64) -> bool {
        match self.refill {
            Some((_, window)) => self.level.fits(total, window, cost),
            None => self.used().saturating_add(cost) <= total,
        }
    }

    fn record(&mut self, now: Nanos, cost: u64) {
        if let Some((_, window)) = self.refill {
            self.level.take(window, cost);
            return;
        }
        if self.entries.is_empty() {
            self.start = now;
        }
        self.entries.push_back((now, cost));
    }

    /// When every counted arrival has left the window (a refilling budget: when it is full).
    fn reset_at(&self, spec: &BucketSpec, now: Nanos) -> Nanos {
        if let Some((total, _)) = self.refill {
            return self.level.full_at(total, now);
        }
        match (spec.kind, self.entries.back()) {
            (_, None) => now.saturating_add(spec.window),
            (WindowKind::Fixed, Some(_)) => self.start.saturating_add(spec.window),
            (WindowKind::Sliding | WindowKind::Refill, Some(&(t, _))) => t.saturating_add(spec.window),
        }
    }

    /// When an arrival costing `cost` would be accepted (`now` if it would now; a cost above
    /// `total` never is: then the window's end).
    fn free_at(&self, spec: &BucketSpec, total: u64, cost: u64, now: Nanos) -> Nanos {
        if self.fits(total, cost) {
            return now;
        }
        if spec.kind == WindowKind::Refill {
            return self.level.fits_at(total, spec.window, cost, now);
        }
        if cost > total || self.entries.is_empty() {
            // Never accepted: say the window's length, as for any other refusal.
            return self.reset_at(spec, now);
        }
        match spec.kind {
            WindowKind::Fixed => self.start.saturating_add(spec.window),
            WindowKind::Refill => self.reset_at(spec, now),
            WindowKind::Sliding => {
                let mut used = self.used();
                for &(t, c) in &self.entries {
                    used = used.saturating_sub(c);
                    if used.saturating_add(cost) <= total {
                        return t.saturating_add(spec.window);
                    }
                }
                self.reset_at(spec, now)
            }
        }
    }
}

/// Seconds with three decimals, rounded up to the millisecond (so a client is never early).
fn secs3(ns: Nanos) -> String {
    let ms = ns.div_ceil(MILLISECOND);
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

fn secs_f64(ns: Nanos) -> f64 {
    ns.div_ceil(MILLISECOND) as f64 / 1000.0
}

/// A duration as OpenAI writes its resets (`6m0s`, `1.5s`, `20ms`), rounded up to the
/// millisecond.
fn go_duration(ns: Nanos) -> String {
    let ms = ns.div_ceil(MILLISECOND);
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (mins, secs, frac) = (ms / 60_000, ms / 1000 % 60, ms % 1000);
    let secs = if frac == 0 { format!("{secs}s") } else { format!("{secs}.{frac:03}s") };
    if mins > 0 { format!("{mins}m{secs}") } else { secs }
}

/// Why the server refuses a request (how each dialect says it differs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// The route's bucket is spent.
    Bucket,
    /// The token budget is spent.
    Tokens,
    /// A hidden sub-limit.
    SubLimit,
    /// A shared resource.
    Shared,
    /// The identity's global limit.
    Global,
    /// The identity's leaky bucket is full.
    Leaky,
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) for `ms` since the Unix epoch.
pub(crate) fn http_date(ms: u64) -> String {
    crate::headers::httpdate::format_imf_fixdate(ms / 1000)
}

fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The Discord server model. Feed it arrivals in time order with [`Server::handle`]; it
/// answers as Discord would and logs every arrival.
///
/// # Dialects
///
/// With [`ServerConfig::dialect`] the same limits are told as another provider tells them
/// (the forms the provider packs of [`crate::headers`] read):
///
/// - IETF: `RateLimit-Policy: "{hash}";q=..;w=..` and `RateLimit: "{hash}";r=..;t=..`,
///   refusals 429 with `Retry-After`;
/// - GitHub: `x-ratelimit-limit/remaining/used/reset/resource` (the hash is the resource);
///   every refusal is a 403: a spent bucket or token budget with `remaining: 0` and "API
///   rate limit exceeded", the global limit (and sub-limits, shared limits, a full leaky
///   bucket) as a secondary limit with `retry-after` and its message in the body hints;
/// - OpenAI: `x-ratelimit-{limit,remaining,reset}-requests` (and `-tokens`), Go-style
///   durations; refusals 429 with `retry-after` and `retry-after-ms`;
/// - Azure OpenAI: `x-ratelimit-remaining-requests` (and `-tokens`) only, `x-ms-region`;
///   refusals with `retry-after`, `retry-after-ms`, `x-ms-retry-after-ms`;
/// - Anthropic: `anthropic-ratelimit-requests-*` (and `tokens-*`), RFC 3339 resets on the
///   server's wall clock; refusals with `retry-after`;
/// - Shopify: `X-Shopify-Shop-Api-Call-Limit: used/size` (of the leaky bucket, or of the
///   route's bucket); refusals 429 with `Retry-After` in seconds with decimals. With a token
///   budget ([`ServerConfig::tokens`]) it is Shopify's GraphQL API instead: the budget is the
///   points, reported in the body's `extensions.cost` (requested and actual cost, maximum and
///   currently available, restore rate: the budget per window, per second), a query the points
///   do not cover answered 200 with a `THROTTLED` error, and no REST header.
///
/// The providers whose budgets refill continuously (OpenAI's and Anthropic's requests and
/// tokens, Shopify GraphQL's points) are told that way with [`WindowKind::Refill`] limits
/// ([`BucketSpec::refill`]): the reset each header gives is then the time until the budget is
/// full again, as those providers document it.
///
/// ```
/// use ratelane::sim::{BucketSpec, RouteSpec, Server, ServerConfig, ServerOutcome};
/// use ratelane::{Request, SECOND};
///
/// let mut server = Server::new(
///     ServerConfig::discord()
///         .bucket("abcd1234", BucketSpec::fixed(2, 5 * SECOND))
///         .route("POST /channels/:id/messages", RouteSpec::bucket("abcd1234")),
/// );
/// let req = Request::with_route("POST", "/channels/:id/messages", "1");
/// assert_eq!(server.handle(0, 0, &req).header("x-ratelimit-remaining"), Some("1"));
/// assert_eq!(server.handle(1, 1, &req).status, 200);
/// let third = server.handle(2, 2, &req);
/// assert_eq!(third.status, 429);
/// assert_eq!(third.header("Retry-After"), Some("5"));
/// assert_eq!(server.log()[2].outcome, ServerOutcome::BucketLimited);
/// // Another channel has its own bucket.
/// let other = Request::with_route("POST", "/channels/:id/messages", "2");
/// assert_eq!(server.handle(3, 3, &other).status, 200);
/// ```
#[derive(Debug)]
pub struct Server {
    config: ServerConfig,
    rng: SplitMix64,
    buckets: HashMap<(String, String, String), Counter>,
    sub: HashMap<(String, String, String), Counter>,
    shared: HashMap<(String, String), Counter>,
    global: HashMap<String, Counter>,
    tokens: HashMap<(String, String, String), TokenCounter>,
    /// Per identity: when its leaky bucket is empty (the theoretical arrival time).
    leaky: HashMap<String, Nanos>,
    invalid: VecDeque<Nanos>,
    banned_until: Option<Nanos>,
    bans: u32,
    last: Nanos,
    log: Vec<Arrival>,
}

impl Server {
    /// A server enforcing `config`.
    ///
    /// # Panics
    /// If a route or remap names a bucket hash missing from [`ServerConfig::buckets`]
    /// (remaps may name a new hash only for a route that had a bucket), or a limit has a
    /// zero window.
    pub fn new(config: ServerConfig) -> Self {
        for (key, route) in &config.routes {
            if let Some(hash) = &route.bucket {
                assert!(
                    config.buckets.contains_key(hash),
                    "route {key:?} names unknown bucket {hash:?}"
                );
            }
            for spec in [route.sub_limit, route.shared_limit].into_iter().flatten() {
                assert!(
                    spec.window > 0,
                    "route {key:?} has a limit with a zero window"
                );
            }
        }
        for (hash, spec) in &config.buckets {
            assert!(spec.window > 0, "bucket {hash:?} has a zero window");
        }
        if let Some(g) = config.global {
            assert!(g.window > 0, "the global limit has a zero window");
        }
        if let Some(t) = config.tokens {
            assert!(t.limit.window > 0, "the token budget has a zero window");
        }
        if let Some(l) = config.leaky {
            assert!(l.size > 0 && l.leak_interval > 0, "the leaky bucket is empty or never leaks");
        }
        let rng = SplitMix64::new(config.seed);
        Server {
            config,
            rng,
            buckets: HashMap::new(),
            sub: HashMap::new(),
            shared: HashMap::new(),
            global: HashMap::new(),
            tokens: HashMap::new(),
            leaky: HashMap::new(),
            invalid: VecDeque::new(),
            banned_until: None,
            bans: 0,
            last: 0,
            log: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Every arrival so far, in arrival order.
    pub fn log(&self) -> &[Arrival] {
        &self.log
    }

    /// Marks arrival `index` of the log as never seen by the client (see
    /// [`Arrival::response_lost`]).
    pub fn mark_response_lost(&mut self, index: usize) {
        if let Some(a) = self.log.get_mut(index) {
            a.response_lost = true;
        }
    }

    /// How many arrivals got `outcome`.
    pub fn count(&self, outcome: ServerOutcome) -> usize {
        self.log.iter().filter(|a| a.outcome == outcome).count()
    }

    /// How many arrivals got a 429 of any kind.
    pub fn count_429(&self) -> usize {
        self.log.iter().filter(|a| a.outcome.is_429()).count()
    }

    /// How many bans the client earned.
    pub fn bans(&self) -> u32 {
        self.bans
    }

    /// The end of the current (or last) ban.
    pub fn banned_until(&self) -> Option<Nanos> {
        self.banned_until
    }

    /// The route of `request` as the server (and the limiter) sees it.
    pub fn route_of(&self, request: &Request) -> Route {
        route_of(self.config.profile, request)
    }

    /// The bucket `route` counts against at time `now`, with its spec.
    pub fn bucket_for(&self, route: &str, now: Nanos) -> Option<(String, BucketSpec)> {
        let mut current: Option<(String, BucketSpec)> = match self.config.routes.get(route) {
            Some(spec) => spec
                .bucket
                .as_ref()
                .map(|h| (h.clone(), self.config.buckets[h])),
            None => self
                .config
                .default_bucket
                .map(|b| (format!("auto-{:016x}", fnv1a(route)), b)),
        };
        let mut remaps: Vec<&Remap> = self
            .config
            .remaps
            .iter()
            .filter(|r| r.route == route && r.at <= now)
            .collect();
        remaps.sort_by_key(|r| r.at);
        for r in remaps {
            current = match &r.bucket {
                None => None,
                Some(h) => match self.config.buckets.get(h) {
                    Some(spec) => Some((h.clone(), *spec)),
                    None => current.map(|(_, spec)| (h.clone(), spec)),
                },
            };
        }
        current
    }

    fn route_spec(&self, route: &str) -> RouteSpec {
        self.config.routes.get(route).cloned().unwrap_or_default()
    }

    fn note_invalid(&mut self, now: Nanos) {
        if self.config.invalid_limit == 0 {
            return;
        }
        self.invalid.push_back(now);
        if self.invalid.len() > self.config.invalid_limit as usize {
            self.banned_until = Some(now.saturating_add(self.config.ban_duration));
            self.bans += 1;
            self.invalid.clear();
        }
    }

    /// How many invalid requests the server counts against the client at `now`.
    pub fn invalid_count(&self, now: Nanos) -> usize {
        self.invalid
            .iter()
            .filter(|&&t| t.saturating_add(self.config.invalid_window) > now)
            .count()
    }

    fn base_headers(&self, now: Nanos, content_type: &str) -> Vec<(String, String)> {
        vec![
            (
                "Date".into(),
                http_date(self.config.wall_epoch_ms + now / MILLISECOND),
            ),
            ("Content-Type".into(), content_type.into()),
        ]
    }

    fn bucket_headers(
        &self,
        headers: &mut Vec<(String, String)>,
        hash: &str,
        spec: &BucketSpec,
        counter: &Counter,
        now: Nanos,
    ) {
        let reset_at = counter.reset_at(spec, now);
        let reset_ms = self.config.wall_epoch_ms + reset_at.div_ceil(MILLISECOND);
        let reset_in = reset_at.saturating_sub(now);
        let (limit, remaining) = (spec.limit, counter.remaining(spec));
        let mut h = |name: &str, value: String| headers.push((name.into(), value));
        match self.config.dialect {
            HeaderProfile::Ietf => {
                h("RateLimit-Policy", format!("\"{hash}\";q={limit};w={}", spec.window.div_ceil(SECOND).max(1)));
                h("RateLimit", format!("\"{hash}\";r={remaining};t={}", reset_in.div_ceil(SECOND)));
            }
            HeaderProfile::GitHub => {
                h("x-ratelimit-limit", limit.to_string());
                h("x-ratelimit-remaining", remaining.to_string());
                h("x-ratelimit-used", (limit - remaining).to_string());
                h("x-ratelimit-reset", reset_ms.div_ceil(1000).to_string());
                h("x-ratelimit-resource", hash.to_string());
            }
            HeaderProfile::OpenAi => {
                h("x-ratelimit-limit-requests", limit.to_string());
                h("x-ratelimit-remaining-requests", remaining.to_string());
                h("x-ratelimit-reset-requests", go_duration(reset_in));
            }
            HeaderProfile::AzureOpenAi => {
                // Azure sends what is left, not when it comes back.
                h("x-ratelimit-remaining-requests", remaining.to_string());
                h("x-ms-region", "Simulated".into());
            }
            HeaderProfile::Anthropic => {
                h("anthropic-ratelimit-requests-limit", limit.to_string());
                h("anthropic-ratelimit-requests-remaining", remaining.to_string());
                h("anthropic-ratelimit-requests-reset", crate::headers::httpdate::format_rfc3339_ms(reset_ms));
            }
            // GraphQL (a token budget: points) reports in the body, not in this REST header.
            HeaderProfile::Shopify if self.config.tokens.is_some() => {}
            HeaderProfile::Shopify => {
                h("X-Shopify-Shop-Api-Call-Limit", format!("{}/{limit}", limit - remaining));
            }
            _ => {
                h("X-RateLimit-Limit", limit.to_string());
                h("X-RateLimit-Remaining", remaining.to_string());
                h("X-RateLimit-Reset", format!("{}.{:03}", reset_ms / 1000, reset_ms % 1000));
                h("X-RateLimit-Reset-After", secs3(reset_in));
                h("X-RateLimit-Bucket", hash.to_string());
            }
        }
    }

    /// The token budget of `key` in the dialect's headers (OpenAI, Azure OpenAI, Anthropic).
    fn token_headers(&self, headers: &mut Vec<(String, String)>, key: &(String, String, String), now: Nanos) {
        let Some(t) = self.config.tokens else { return };
        let mut counter = self.tokens.get(key).cloned().unwrap_or_default();
        counter.refresh(&t.limit, t.total(), now);
        let reset_at = counter.reset_at(&t.limit, now);
        let limit = t.total();
        let remaining = limit.saturating_sub(counter.used());
        let mut h = |name: &str, value: String| headers.push((name.into(), value));
        match self.config.dialect {
            HeaderProfile::OpenAi => {
                h("x-ratelimit-limit-tokens", limit.to_string());
                h("x-ratelimit-remaining-tokens", remaining.to_string());
                h("x-ratelimit-reset-tokens", go_duration(reset_at.saturating_sub(now)));
            }
            HeaderProfile::AzureOpenAi => h("x-ratelimit-remaining-tokens", remaining.to_string()),
            HeaderProfile::Anthropic => {
                let reset_ms = self.config.wall_epoch_ms + reset_at.div_ceil(MILLISECOND);
                h("anthropic-ratelimit-tokens-limit", limit.to_string());
                h("anthropic-ratelimit-tokens-remaining", remaining.to_string());
                h("anthropic-ratelimit-tokens-reset", crate::headers::httpdate::format_rfc3339_ms(reset_ms));
            }
            _ => {}
        }
    }

    /// Shopify GraphQL's `extensions.cost` for a query of `requested` points on the token
    /// budget of `key` (its points): `actual` when it ran, else it was throttled (the body's
    /// `THROTTLED` error). The restore rate is the budget per its window, per second.
    fn graphql_cost(&self, key: &(String, String, String), requested: u64, actual: Option<u64>) -> (BodyHints, String) {
        let Some(t) = self.config.tokens else { return (BodyHints::default(), "{}".into()) };
        let mut counter = self.tokens.get(key).cloned().unwrap_or_default();
        counter.refresh(&t.limit, t.total(), self.last);
        let (max, available) = (t.total(), t.total().saturating_sub(counter.used()));
        let rate = t.total() as f64 / (t.limit.window as f64 / SECOND as f64);
        let cost = QueryCost {
            requested: Some(requested as f64),
            actual: actual.map(|a| a as f64),
            maximum_available: Some(max as f64),
            currently_available: Some(available as f64),
            restore_rate: Some(rate),
        };
        let actual_text = actual.map_or("null".to_string(), |a| a.to_string());
        let status = format!(
            "\"throttleStatus\": {{\"maximumAvailable\": {max}, \"currentlyAvailable\": {available}, \"restoreRate\": {rate}}}"
        );
        let cost_text = format!("{{\"requestedQueryCost\": {requested}, \"actualQueryCost\": {actual_text}, {status}}}");
        let (errors, text) = match actual {
            Some(_) => (Vec::new(), format!("{{\"data\": {{}}, \"extensions\": {{\"cost\": {cost_text}}}}}")),
            None => (
                vec!["THROTTLED".to_string()],
                format!("{{\"errors\": [{{\"message\": \"Throttled\", \"extensions\": {{\"code\": \"THROTTLED\"}}}}], \"extensions\": {{\"cost\": {cost_text}}}}}"),
            ),
        };
        (BodyHints { cost: Some(cost), errors, ..BodyHints::default() }, text)
    }

    /// A refusal in the dialect's form: status, body hints and body text. `retry` is the time
    /// until the refused request would be accepted.
    fn refuse(&self, headers: &mut Vec<(String, String)>, why: Refusal, retry: Nanos) -> (u16, BodyHints, String) {
        let secs = retry.div_ceil(SECOND).max(1).to_string();
        let ms = retry.div_ceil(MILLISECOND).to_string();
        let mut h = |name: &str, value: String| headers.push((name.into(), value));
        match self.config.dialect {
            HeaderProfile::GitHub => {
                // GitHub refuses with 403: the primary limit says `remaining: 0` (already in
                // the headers), a secondary limit gives `retry-after` and says so in the body.
                let message = if matches!(why, Refusal::Bucket | Refusal::Tokens) {
                    "API rate limit exceeded (simulated)."
                } else {
                    h("retry-after", secs);
                    "You have exceeded a secondary rate limit (simulated)."
                };
                let body = BodyHints { errors: vec![message.into()], ..BodyHints::default() };
                (403, body, format!("{{\"message\": \"{message}\"}}"))
            }
            HeaderProfile::OpenAi => {
                h("retry-after", secs);
                h("retry-after-ms", ms);
                let kind = if matches!(why, Refusal::Tokens) { "tokens" } else { "requests" };
                let text = format!("{{\"error\": {{\"type\": \"{kind}\", \"code\": \"rate_limit_exceeded\"}}}}");
                (429, BodyHints::default(), text)
            }
            HeaderProfile::AzureOpenAi => {
                h("retry-after", secs);
                h("retry-after-ms", ms.clone());
                h("x-ms-retry-after-ms", ms);
                (429, BodyHints::default(), "{\"error\": {\"code\": \"429\"}}".into())
            }
            HeaderProfile::Shopify => {
                h("Retry-After", secs3(retry));
                (429, BodyHints::default(), "{\"errors\": \"Exceeded 2 calls per second for api client.\"}".into())
            }
            HeaderProfile::Ietf | HeaderProfile::Anthropic | HeaderProfile::RetryAfterOnly => {
                h("Retry-After", secs);
                (429, BodyHints::default(), "{}".into())
            }
            _ => {
                let (scope, global) = match why {
                    Refusal::Global => ("global", true),
                    Refusal::Shared => ("shared", false),
                    _ => ("user", false),
                };
                let (body, text) = Self::too_many(headers, scope, retry, global);
                (429, body, text)
            }
        }
    }

    fn too_many(
        headers: &mut Vec<(String, String)>,
        scope: &str,
        retry: Nanos,
        global: bool,
    ) -> (BodyHints, String) {
        headers.push((
            "Retry-After".into(),
            retry.div_ceil(SECOND).max(1).to_string(),
        ));
        if global {
            headers.push(("X-RateLimit-Global".into(), "true".into()));
        }
        headers.push(("X-RateLimit-Scope".into(), scope.into()));
        let message = if scope == "shared" {
            "The resource is being rate limited."
        } else {
            "You are being rate limited."
        };
        let body = BodyHints {
            retry_after: Some(secs_f64(retry)),
            global: Some(global),
            ..BodyHints::default()
        };
        let text = format!(
            "{{\"message\": \"{message}\", \"retry_after\": {}, \"global\": {global}}}",
            secs3(retry)
        );
        (body, text)
    }

    /// Answers `request` arriving at `at` (server time; a time earlier than the previous
    /// arrival is taken as the previous one) and logs it under `tag`.
    pub fn handle(&mut self, at: Nanos, tag: u64, request: &Request) -> ServerResponse {
        self.handle_costing(at, tag, request, None)
    }

    /// [`Server::handle`] for a request that costs `tokens` of the token budget
    /// ([`ServerConfig::tokens`]) instead of [`TokenSpec::cost`]: what the request really
    /// costs, which its client only estimates. It is refused when the budget's window has less
    /// left; accepted, its answer's body reports the cost (`usage`: OpenAI's `total_tokens`,
    /// Anthropic's `input_tokens` and `output_tokens`).
    pub fn handle_costing(&mut self, at: Nanos, tag: u64, request: &Request, tokens: Option<u64>) -> ServerResponse {
        let now = at.max(self.last);
        self.last = now;
        let route = self.route_of(request);
        let mut spec = self.route_spec(&route.key);
        if let Some(class) = &spec.sub_limit_class
            && sub_limit_class(self.config.profile, &route.key, &request.body_keys) != Some(class.as_str())
        {
            spec.sub_limit = None;
        }
        let bucket = self.bucket_for(&route.key, now);
        let identity = request.identity.clone();
        let mut arrival = Arrival {
            at: now,
            tag,
            identity: identity.clone(),
            route: route.key.clone(),
            major: route.major.clone(),
            bucket: bucket.as_ref().map(|b| b.0.clone()),
            bucket_spec: bucket.as_ref().map(|b| b.1),
            bucket_window: None,
            counted_in_bucket: false,
            counted_global: false,
            outcome: ServerOutcome::Accepted,
            status: 200,
            response_lost: false,
            tokens: tokens.or(self.config.tokens.map(|t| t.cost)).unwrap_or(0),
            tokens_limited: false,
        };
        let response = self.decide(now, &identity, &route, &spec, bucket, &mut arrival);
        arrival.status = response.status;
        self.log.push(arrival);
        response
    }

    fn decide(
        &mut self,
        now: Nanos,
        identity: &str,
        route: &Route,
        spec: &RouteSpec,
        bucket: Option<(String, BucketSpec)>,
        arrival: &mut Arrival,
    ) -> ServerResponse {
        let json = "application/json";
        // 1. A ban answers everything from the edge.
        if let Some(until) = self.banned_until
            && now < until
        {
            arrival.outcome = ServerOutcome::Banned;
            return ServerResponse {
                status: 429,
                headers: self.base_headers(now, "text/html; charset=UTF-8"),
                body: BodyHints::default(),
                body_text: "<!DOCTYPE html><html><head><title>Access denied | discord.com used \
                            Cloudflare to restrict access</title></head><body><h1>Error 1015</h1>\
                            <p>You are being rate limited.</p></body></html>"
                    .into(),
            };
        }
        let window = self.config.invalid_window;
        while let Some(&t) = self.invalid.front() {
            if t.saturating_add(window) <= now {
                self.invalid.pop_front();
            } else {
                break;
            }
        }
        // 2. A rejected token.
        if self.config.unauthorized.iter().any(|u| u == identity) {
            arrival.outcome = ServerOutcome::Unauthorized;
            self.note_invalid(now);
            return ServerResponse {
                status: 401,
                headers: self.base_headers(now, json),
                body: BodyHints::default(),
                body_text: "{\"message\": \"401: Unauthorized\", \"code\": 0}".into(),
            };
        }
        // 3. The global limit.
        if let Some(gspec) = self.config.global
            && !spec.global_exempt
        {
            let counter = self.global.entry(identity.to_string()).or_default();
            counter.refresh(&gspec, now);
            if counter.full(&gspec) {
                let retry = counter.free_at(&gspec, now) - now;
                arrival.outcome = ServerOutcome::GlobalLimited;
                let mut headers = self.base_headers(now, json);
                let (status, body, body_text) = self.refuse(&mut headers, Refusal::Global, retry);
                self.note_invalid(now);
                return ServerResponse {
                    status,
                    headers,
                    body,
                    body_text,
                };
            }
            counter.record(&gspec, now);
            arrival.counted_global = true;
        }
        // 3b. The identity's leaky bucket (Shopify REST): full when it holds `size`.
        let leaky = self.config.leaky.filter(|_| !spec.global_exempt);
        if let Some(l) = leaky {
            let tat = self.leaky.get(identity).copied().unwrap_or(0).max(now);
            let room = u64::from(l.size - 1).saturating_mul(l.leak_interval);
            if tat - now > room {
                arrival.outcome = ServerOutcome::BucketLimited;
                let mut headers = self.base_headers(now, json);
                headers.push(("X-Shopify-Shop-Api-Call-Limit".into(), format!("{0}/{0}", l.size)));
                let (status, body, body_text) = self.refuse(&mut headers, Refusal::Leaky, tat - now - room);
                self.note_invalid(now);
                return ServerResponse { status, headers, body, body_text };
            }
        }
        // 4. The bucket.
        let bkey = bucket
            .as_ref()
            .map(|(h, _)| (identity.to_string(), h.clone(), route.major.clone()));
        if let (Some((hash, bspec)), Some(key)) = (&bucket, &bkey) {
            let counter = self.buckets.entry(key.clone()).or_default();
            counter.refresh(bspec, now);
            arrival.bucket_window = counter.window_start(bspec);
            if counter.full(bspec) {
                let retry = counter.free_at(bspec, now) - now;
                let counter = counter.clone();
                arrival.outcome = ServerOutcome::BucketLimited;
                let mut headers = self.base_headers(now, json);
                self.bucket_headers(&mut headers, hash, bspec, &counter, now);
                self.token_headers(&mut headers, key, now);
                let (status, body, body_text) = self.refuse(&mut headers, Refusal::Bucket, retry);
                self.note_invalid(now);
                return ServerResponse {
                    status,
                    headers,
                    body,
                    body_text,
                };
            }
        }
        // 4b. The token budget beside the bucket.
        if let (Some(t), Some((hash, bspec)), Some(key)) = (self.config.tokens, &bucket, &bkey) {
            let counter = self.tokens.entry(key.clone()).or_default();
            counter.refresh(&t.limit, t.total(), now);
            if !counter.fits(t.total(), arrival.tokens) {
                let retry = counter.free_at(&t.limit, t.total(), arrival.tokens, now) - now;
                arrival.outcome = ServerOutcome::BucketLimited;
                arrival.tokens_limited = true;
                let mut headers = self.base_headers(now, json);
                let c = self.buckets[key].clone();
                self.bucket_headers(&mut headers, hash, bspec, &c, now);
                self.token_headers(&mut headers, key, now);
                if self.config.dialect == HeaderProfile::Shopify {
                    // Shopify GraphQL: a throttled query is a 200 whose body says so.
                    let (body, body_text) = self.graphql_cost(key, arrival.tokens, None);
                    return ServerResponse { status: 200, headers, body, body_text };
                }
                let (status, body, body_text) = self.refuse(&mut headers, Refusal::Tokens, retry);
                self.note_invalid(now);
                return ServerResponse { status, headers, body, body_text };
            }
        }
        // 5. A hidden sub-limit: the bucket still has room, and is not consumed.
        let skey = (identity.to_string(), route.key.clone(), route.major.clone());
        if let Some(sspec) = spec.sub_limit {
            let counter = self.sub.entry(skey.clone()).or_default();
            counter.refresh(&sspec, now);
            if counter.full(&sspec) {
                let retry = counter.free_at(&sspec, now) - now;
                arrival.outcome = ServerOutcome::SubLimited;
                let mut headers = self.base_headers(now, json);
                if let (Some((hash, bspec)), Some(key)) = (&bucket, &bkey) {
                    let c = self.buckets[key].clone();
                    self.bucket_headers(&mut headers, hash, bspec, &c, now);
                    self.token_headers(&mut headers, key, now);
                }
                let (status, body, body_text) = self.refuse(&mut headers, Refusal::SubLimit, retry);
                self.note_invalid(now);
                return ServerResponse {
                    status,
                    headers,
                    body,
                    body_text,
                };
            }
        }
        // 6. Consume the bucket slot (and the tokens, and a place in the leaky bucket).
        if let (Some((_, bspec)), Some(key)) = (&bucket, &bkey) {
            let counter = self.buckets.get_mut(key).expect("created above");
            counter.record(bspec, now);
            arrival.bucket_window = counter.window_start(bspec);
            arrival.counted_in_bucket = true;
            if self.config.tokens.is_some() {
                self.tokens.get_mut(key).expect("created above").record(now, arrival.tokens);
            }
        }
        let mut headers = self.base_headers(now, json);
        if let (Some((hash, bspec)), Some(key)) = (&bucket, &bkey) {
            let c = self.buckets[key].clone();
            self.bucket_headers(&mut headers, hash, bspec, &c, now);
            self.token_headers(&mut headers, key, now);
        }
        if let Some(l) = leaky {
            let tat = self.leaky.get(identity).copied().unwrap_or(0).max(now) + l.leak_interval;
            self.leaky.insert(identity.to_string(), tat);
            let used = (tat - now).div_ceil(l.leak_interval);
            headers.push(("X-Shopify-Shop-Api-Call-Limit".into(), format!("{used}/{}", l.size)));
        }
        // 7. The shared resource.
        if let Some(shspec) = spec.shared_limit {
            let counter = self
                .shared
                .entry((route.key.clone(), route.major.clone()))
                .or_default();
            counter.refresh(&shspec, now);
            if counter.full(&shspec) {
                let retry = counter.free_at(&shspec, now) - now;
                arrival.outcome = ServerOutcome::SharedLimited;
                let (status, body, body_text) = self.refuse(&mut headers, Refusal::Shared, retry);
                return ServerResponse {
                    status,
                    headers,
                    body,
                    body_text,
                };
            }
            counter.record(&shspec, now);
        }
        if let Some(sspec) = spec.sub_limit {
            self.sub
                .get_mut(&skey)
                .expect("created above")
                .record(&sspec, now);
        }
        // 8. The backend may fail.
        if self.rng.chance(self.config.error_rate) {
            const STATUSES: [u16; 4] = [500, 502, 503, 504];
            let status = STATUSES[self.rng.below(4) as usize];
            arrival.outcome = ServerOutcome::ServerError;
            return ServerResponse {
                status,
                headers: self.base_headers(now, "text/html"),
                body: BodyHints::default(),
                body_text: format!("<html><body><h1>{status} Server Error</h1></body></html>"),
            };
        }
        // 9. Accepted.
        let status = spec.status.unwrap_or(200);
        if status == 401 || status == 403 {
            self.note_invalid(now);
        }
        let (body, body_text) = match (self.config.tokens.is_some() && arrival.counted_in_bucket, self.config.dialect) {
            // What the request cost, in the body (`BodyHints::usage`), as the API reports it.
            (true, HeaderProfile::Anthropic) => {
                let (input, output) = (arrival.tokens - arrival.tokens / 3, arrival.tokens / 3);
                let usage = vec![("input_tokens".into(), input as f64), ("output_tokens".into(), output as f64)];
                let text = format!("{{\"usage\": {{\"input_tokens\": {input}, \"output_tokens\": {output}}}}}");
                (BodyHints { usage, ..BodyHints::default() }, text)
            }
            (true, HeaderProfile::OpenAi | HeaderProfile::AzureOpenAi) => {
                let total = arrival.tokens;
                let usage = vec![("total_tokens".into(), total as f64)];
                (BodyHints { usage, ..BodyHints::default() }, format!("{{\"usage\": {{\"total_tokens\": {total}}}}}"))
            }
            (true, HeaderProfile::Shopify) => match &bkey {
                Some(key) => self.graphql_cost(key, arrival.tokens, Some(arrival.tokens)),
                None => (BodyHints::default(), "{}".into()),
            },
            _ => (BodyHints::default(), "{}".into()),
        };
        ServerResponse { status, headers, body, body_text }
    }
}
