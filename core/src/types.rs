//! The values that cross the core's boundary: requests and responses in,
//! outputs and observations out.

/// A monotonic timestamp or a duration, in nanoseconds. The epoch is the
/// driver's choice (typically "when the driver started"); the core only ever
/// compares and subtracts these values.
pub type Nanos = u64;

/// One millisecond in [`Nanos`].
pub const MILLISECOND: Nanos = 1_000_000;
/// One second in [`Nanos`].
pub const SECOND: Nanos = 1_000_000_000;

/// Identifies one enqueued request. Issued by [`crate::Limiter::enqueue`].
pub type RequestId = u64;

/// Which family of rate-limit headers the server speaks: a *profile* (or *pack*) is the one
/// grammar [`crate::headers::parse`] reads an answer with. Selected by name in the JSON config
/// and every binding (`"profile": "openai"`), see [`HeaderProfile::NAMES`]; what each reads is
/// in the [`crate::headers`] docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum HeaderProfile {
    /// Discord API v8+: `X-RateLimit-*` with `Reset-After` in seconds, `X-RateLimit-Bucket`,
    /// `X-RateLimit-Scope`, `X-RateLimit-Global`, and `retry_after`/`global` in 429 bodies.
    #[default]
    Discord,
    /// IETF `RateLimit` / `RateLimit-Policy` (drafts -07 to -11) and the older
    /// `RateLimit-Limit` / `RateLimit-Remaining` / `RateLimit-Reset` form.
    Ietf,
    /// GitHub's REST and GraphQL APIs: `x-ratelimit-limit/remaining/used/reset/resource`, with
    /// `reset` in epoch seconds; secondary limits as a 403 or 429 with `retry-after`, or with
    /// `x-ratelimit-remaining: 0`, or a body that says so.
    #[cfg_attr(feature = "serde", serde(rename = "github"))]
    GitHub,
    /// Only `Retry-After` (seconds or an HTTP date) is read.
    RetryAfterOnly,
    /// OpenAI: `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` with Go-style durations
    /// (`6m0s`, `1.5s`, `20ms`), and `retry-after-ms`.
    #[cfg_attr(feature = "serde", serde(rename = "openai"))]
    OpenAi,
    /// Anthropic: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
    /// remaining,reset}` with RFC 3339 resets.
    Anthropic,
    /// Azure OpenAI: OpenAI's `x-ratelimit-*` names (resets as durations or bare seconds),
    /// `x-ms-retry-after-ms` and `retry-after-ms`.
    #[cfg_attr(feature = "serde", serde(rename = "azure_openai"))]
    AzureOpenAi,
    /// Shopify: the REST leaky bucket `X-Shopify-Shop-Api-Call-Limit: 32/40`, and the GraphQL
    /// cost in the body (`extensions.cost`, through [`BodyHints::cost`]).
    Shopify,
    /// Recognises the provider from each answer's headers (and body hints) and reads it with
    /// that profile; see [`crate::headers::detect`] for what it recognises, in which order.
    Auto,
}

impl HeaderProfile {
    /// Every profile, in the order of [`HeaderProfile::NAMES`].
    pub const ALL: &'static [HeaderProfile] = &[
        HeaderProfile::Discord,
        HeaderProfile::Ietf,
        HeaderProfile::GitHub,
        HeaderProfile::RetryAfterOnly,
        HeaderProfile::OpenAi,
        HeaderProfile::Anthropic,
        HeaderProfile::AzureOpenAi,
        HeaderProfile::Shopify,
        HeaderProfile::Auto,
    ];

    /// Every profile's stable name, as the JSON config and the bindings spell it.
    pub const NAMES: &'static [&'static str] = &[
        "discord",
        "ietf",
        "github",
        "retry_after_only",
        "openai",
        "anthropic",
        "azure_openai",
        "shopify",
        "auto",
    ];

    /// The stable name (`"openai"`, `"azure_openai"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            HeaderProfile::Discord => "discord",
            HeaderProfile::Ietf => "ietf",
            HeaderProfile::GitHub => "github",
            HeaderProfile::RetryAfterOnly => "retry_after_only",
            HeaderProfile::OpenAi => "openai",
            HeaderProfile::Anthropic => "anthropic",
            HeaderProfile::AzureOpenAi => "azure_openai",
            HeaderProfile::Shopify => "shopify",
            HeaderProfile::Auto => "auto",
        }
    }

    /// The profile of a stable name, or `None` (names are exact: lowercase, as in
    /// [`HeaderProfile::NAMES`]).
    pub fn from_name(name: &str) -> Option<HeaderProfile> {
        HeaderProfile::ALL.iter().copied().find(|p| p.as_str() == name)
    }

    /// Whether a driver should read the body of an answer with this `status` and pass what it
    /// finds as [`BodyHints`]: Discord's 429 JSON, GitHub's 403/429 messages, Shopify's
    /// GraphQL cost (in every answer), and under [`HeaderProfile::Auto`] every answer (it may
    /// be any of them). Reading a body the profile ignores costs time and nothing else.
    pub fn reads_body(self, status: u16) -> bool {
        match self {
            HeaderProfile::Shopify | HeaderProfile::Auto => true,
            HeaderProfile::GitHub => status == 403 || status == 429,
            _ => status == 429,
        }
    }
}

/// The scope of a 429: Discord's `X-RateLimit-Scope`, or what a provider's answer implies
/// (GitHub's secondary limits hold the whole token: [`Scope::Global`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Scope {
    /// The per-route limit of this token (also used for unknown scope values: the strictest reading).
    User,
    /// The token's global limit.
    Global,
    /// A per-resource limit shared with others; does not count as an invalid request.
    Shared,
}

impl Scope {
    /// The stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Global => "global",
            Scope::Shared => "shared",
        }
    }
}

/// Fields a driver may have parsed from a response body.
///
/// Bodies are parsed by the driver (it owns the bytes); pass only what parsed cleanly, when
/// [`HeaderProfile::reads_body`] says the profile reads the body of that status. Non-finite or
/// negative numbers are ignored by the core. The extraction is the same for every profile
/// (the core decides what a field means):
///
/// - `retry_after` and `global`: the top-level JSON numbers/booleans of those names (Discord);
/// - `cost`: the object at `extensions.cost` (Shopify's GraphQL query cost);
/// - `errors`: short strings that say what went wrong, from fixed places, in this order: the
///   top-level `message`; `error.type` and `error.code` (OpenAI, Anthropic); the top-level
///   `errorCode`; the `errorCode` of each element of a top-level array (Salesforce); `errors`
///   itself when it is a string (Shopify REST); and of each element of an `errors` array
///   (GraphQL), its `type`, `extensions.code` and `message`. Only strings are taken; at most
///   [`BodyHints::MAX_ERRORS`] of them, each cut to [`BodyHints::MAX_ERROR_LEN`] bytes (on a
///   character boundary).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BodyHints {
    /// `retry_after` in seconds (Discord v8+: a float).
    pub retry_after: Option<f64>,
    /// `global`.
    pub global: Option<bool>,
    /// A GraphQL query cost (`extensions.cost`), if the body has one.
    pub cost: Option<QueryCost>,
    /// Error codes and messages from the fixed places listed above, in document order.
    pub errors: Vec<String>,
    /// What the request actually cost, by name: the numeric fields of the body's top-level
    /// `usage` object (OpenAI `prompt_tokens`, `completion_tokens`, `total_tokens`; Anthropic
    /// `input_tokens`, `output_tokens`), and any cost the caller read itself, named after the
    /// dimension it settles (`tokens`). At most [`BodyHints::MAX_USAGE`] entries; finite
    /// numbers of 0 or more only. The engine settles a request's estimated costs
    /// ([`Request::costs`]) with them: see [`crate::headers::settled_cost`].
    pub usage: Vec<(String, f64)>,
}

impl BodyHints {
    /// The most `errors` a driver passes.
    pub const MAX_ERRORS: usize = 16;
    /// The longest error string a driver passes, in bytes.
    pub const MAX_ERROR_LEN: usize = 256;
    /// The most `usage` entries a driver passes.
    pub const MAX_USAGE: usize = 16;
}

/// A GraphQL query's cost as Shopify reports it in `extensions.cost` (every field optional:
/// pass what is a finite number; `actualQueryCost` is `null` on a throttled query).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QueryCost {
    /// `requestedQueryCost`: the points the query asked for (its maximum).
    pub requested: Option<f64>,
    /// `actualQueryCost`: the points it used (`None` when it was not run).
    pub actual: Option<f64>,
    /// `throttleStatus.maximumAvailable`: the bucket's size in points.
    pub maximum_available: Option<f64>,
    /// `throttleStatus.currentlyAvailable`: points available after this query.
    pub currently_available: Option<f64>,
    /// `throttleStatus.restoreRate`: points restored per second.
    pub restore_rate: Option<f64>,
}

/// A response as the driver received it.
#[derive(Debug, Clone)]
pub struct Response<'a> {
    /// HTTP status code.
    pub status: u16,
    /// Header name/value pairs, in the order received. Names are matched case-insensitively;
    /// repeated names are all read.
    pub headers: &'a [(&'a str, &'a str)],
    /// Body fields the driver parsed, if any.
    pub body: BodyHints,
    /// The wall clock at receipt, in milliseconds since the Unix epoch, if the driver has one.
    /// Used only to read absolute times (`X-RateLimit-Reset`, GitHub's epoch reset,
    /// `Retry-After` dates); when absent the response's `Date` header is used as "now"
    /// for those, and without either absolute times are ignored.
    pub wall_clock_ms: Option<u64>,
}

impl<'a> Response<'a> {
    /// A response with a status and headers, no body hints and no wall clock.
    pub fn new(status: u16, headers: &'a [(&'a str, &'a str)]) -> Self {
        Response { status, headers, body: BodyHints::default(), wall_clock_ms: None }
    }
}

impl Response<'_> {
    /// The statuses a driver passes on: HTTP's three digits, `100..=999`.
    pub const STATUSES: core::ops::RangeInclusive<u16> = 100..=999;

    /// The status a driver read from its HTTP client's response (a host language's number),
    /// checked once, the same way in every binding: an integer in [`Response::STATUSES`], or
    /// `None` for anything else (NaN, an infinity, a fraction, a negative or huge number). A
    /// driver ends the request of a response without a valid status with an
    /// `invalid_argument` error instead of answering the limiter (nothing else is held: the
    /// request leaves the limiter as cancelled in flight).
    pub fn status_of(value: f64) -> Option<u16> {
        // `as` saturates (NaN reads 0): the range and the round trip refuse what is not exact.
        let status = value as u16;
        (Self::STATUSES.contains(&status) && f64::from(status) == value).then_some(status)
    }
}

/// What one response says about rate limits, whatever the header profile.
/// Produced by [`crate::headers::parse`]; every field is optional because
/// servers may send any subset, or nonsense.
///
/// `limit`, `remaining` and `reset_after` are the engine's view: one budget counted in
/// requests. Where an answer reports several budgets (requests and tokens), they are derived
/// from [`RateLimitInfo::dimensions`] by the binding rule of [`crate::headers`] ("Several
/// budgets"), and every budget stays in `dimensions` as reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateLimitInfo {
    /// The bucket's capacity.
    pub limit: Option<u32>,
    /// Requests left in the current window.
    pub remaining: Option<u32>,
    /// Time from receipt until the window resets (relative; absolute resets are converted).
    pub reset_after: Option<Nanos>,
    /// The server's window length, when a policy states it (IETF `w`).
    pub window: Option<Nanos>,
    /// The bucket identifier (Discord `X-RateLimit-Bucket`, GitHub `x-ratelimit-resource`,
    /// IETF policy name, Shopify `rest` / `graphql`).
    pub bucket: Option<String>,
    /// How long to wait before retrying (`Retry-After`, `retry-after-ms`, body `retry_after`;
    /// the larger wins).
    pub retry_after: Option<Nanos>,
    /// The 429's scope, if given (`X-RateLimit-Global` or body `global` imply
    /// [`Scope::Global`]; so does a GitHub secondary limit).
    pub scope: Option<Scope>,
    /// True when any rate-limit field of the profile was present (even if malformed): a header
    /// of its family, or a body field it reads (Shopify's query cost, a throttling error).
    /// A 429 without any is treated as an edge (Cloudflare-style) ban.
    pub has_rate_limit_headers: bool,
    /// The server's wall clock when it answered, in epoch milliseconds, where the headers
    /// tell it (Discord: `X-RateLimit-Reset` less `X-RateLimit-Reset-After`, both valid;
    /// within a millisecond). The limiter learns the spread of uplink delays from it.
    pub server_time_ms: Option<u64>,
    /// The answer refused the request for a rate limit, whatever its status: every 429, a
    /// GitHub 403 with `retry-after`, `x-ratelimit-remaining: 0` or a secondary-limit message,
    /// a 200 whose body says it was throttled (Shopify `THROTTLED`, GitHub `RATE_LIMITED`).
    /// The engine treats such an answer as a 429.
    pub throttled: bool,
    /// Every budget the answer reports, in its own unit, as reported (see [`Dimension`]);
    /// empty when it reports none.
    pub dimensions: Vec<Dimension>,
    /// The profile the answer was read with: the configured one, or under
    /// [`HeaderProfile::Auto`] the one detected (`None` when nothing was recognised).
    pub profile: Option<HeaderProfile>,
}

/// What a [`Dimension`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unit {
    /// Requests: the engine's own unit.
    Requests,
    /// Tokens of a language model (OpenAI `tokens`; Anthropic `tokens`, `input-tokens`,
    /// `output-tokens`).
    Tokens,
    /// Cost points (GitHub GraphQL, Shopify GraphQL).
    Points,
    /// Content bytes (IETF `qu="content-bytes"`).
    Bytes,
    /// Concurrent requests (IETF `qu="concurrent-requests"`).
    Concurrent,
    /// A unit the profile does not know (an IETF `qu` of another name, an OpenAI suffix).
    Other,
}

impl Unit {
    /// The stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Requests => "requests",
            Unit::Tokens => "tokens",
            Unit::Points => "points",
            Unit::Bytes => "bytes",
            Unit::Concurrent => "concurrent",
            Unit::Other => "other",
        }
    }
}

/// One budget an answer reports (a rate-limit *dimension*): how much of it is left and when it
/// is whole again, in its own unit. The parser only reports; what a request costs in it is
/// the caller's estimate ([`Request::costs`]), which the engine gates and settles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dimension {
    /// The provider's name for it, lowercase with `_` for `-`: `requests`, `tokens`,
    /// `input_tokens`, `output_tokens` (OpenAI, Anthropic), `points` (GitHub GraphQL, Shopify
    /// GraphQL), `calls` (Shopify REST), an IETF policy name.
    pub name: String,
    /// What it counts.
    pub unit: Unit,
    /// Its capacity.
    pub limit: Option<u64>,
    /// What is left now.
    pub remaining: Option<u64>,
    /// Time from receipt until it is whole again (OpenAI and Anthropic: "fully replenished";
    /// a window's end elsewhere).
    pub reset_after: Option<Nanos>,
    /// For a budget that refills continuously (Shopify's leaky bucket and restore rate): the
    /// time one unit takes to come back, rounded up.
    pub refill_interval: Option<Nanos>,
}

impl Dimension {
    /// A dimension with a name and a unit, nothing reported yet.
    pub fn new(name: impl Into<String>, unit: Unit) -> Self {
        Dimension { name: name.into(), unit, limit: None, remaining: None, reset_after: None, refill_interval: None }
    }

    /// Whether any value was reported.
    pub fn is_reported(&self) -> bool {
        self.limit.is_some() || self.remaining.is_some() || self.reset_after.is_some()
    }
}

/// Why a request ended without being answered. Stable codes come from [`FailReason::code`].
///
/// Deliberately exhaustive (not `#[non_exhaustive]`): bindings map every reason to an
/// exception class with a `match` that has no wildcard arm, so a new reason breaks their
/// build instead of reaching users as a generic error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "code", rename_all = "snake_case"))]
pub enum FailReason {
    /// The request's deadline would pass (or passed) before it could be sent.
    DeadlineExceeded {
        /// When the core predicted it could be sent (monotonic), if it could predict.
        predicted_send_at: Option<Nanos>,
    },
    /// The predicted wait is longer than the configured `max_wait`.
    MaxWaitExceeded {
        /// The predicted wait before sending.
        predicted_wait: Nanos,
    },
    /// The request's `defer_after` budget ([`Request::defer_after`], [`crate::Config::defer_after`])
    /// is shorter than its predicted wait: instead of waiting, it hands the request back to the
    /// caller (a job queue reschedules it for `retry_at`). Decided at enqueue, and again while it
    /// is queued when new knowledge (a 429, a global pause) pushes its predicted send time past
    /// `enqueued + defer_after`, or when it is still queued once that time passes.
    Deferred {
        /// When the core predicts it could be sent (monotonic, on the caller's clock): the time
        /// to enqueue it again. Never earlier than the moment it failed.
        retry_at: Nanos,
    },
    /// The request kept getting 429s; the configured number of retries is used up.
    RetriesExhausted {
        /// How many times it was sent.
        attempts: u32,
    },
    /// The transport failed after the request may have reached the server, and it was not
    /// re-sent: it is not idempotent (nor was re-sending allowed), or it is and its retries
    /// are used up (an attempt may have been processed).
    MaybeSent,
    /// The transport failed before the request reached the server too many times: no attempt
    /// reached it.
    NetworkError {
        /// How many times it was tried.
        attempts: u32,
    },
    /// The token was rejected (401) earlier; requests for it are not sent again.
    Unauthorized,
    /// The limiter was closed while the request was queued.
    Closed,
    /// The request's estimated cost in a dimension ([`Request::costs`]) is more than that
    /// dimension's whole limit as the server reported it: it could never be sent. Decided at
    /// enqueue when the limit is known, else as soon as an answer reports it.
    InsufficientCapacity {
        /// The dimension (`tokens`, ...).
        dimension: String,
        /// The request's estimated cost in it.
        cost: u64,
        /// The dimension's limit.
        limit: u64,
    },
}

impl FailReason {
    /// A stable, machine-readable code, identical in every binding.
    pub fn code(&self) -> &'static str {
        match self {
            FailReason::DeadlineExceeded { .. } => "deadline_exceeded",
            FailReason::MaxWaitExceeded { .. } => "max_wait_exceeded",
            FailReason::Deferred { .. } => "deferred",
            FailReason::RetriesExhausted { .. } => "retries_exhausted",
            FailReason::MaybeSent => "maybe_sent",
            FailReason::NetworkError { .. } => "network_error",
            FailReason::Unauthorized => "unauthorized",
            FailReason::Closed => "closed",
            FailReason::InsufficientCapacity { .. } => "insufficient_capacity",
        }
    }

    /// Every code [`FailReason::code`] can return.
    pub const ALL_CODES: &'static [&'static str] = &[
        "deadline_exceeded",
        "max_wait_exceeded",
        "deferred",
        "retries_exhausted",
        "maybe_sent",
        "network_error",
        "unauthorized",
        "closed",
        "insufficient_capacity",
    ];
}

impl core::fmt::Display for FailReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FailReason::DeadlineExceeded { predicted_send_at: Some(t) } => {
                write!(f, "deadline exceeded: the request could not be sent before t={t}ns")
            }
            FailReason::DeadlineExceeded { predicted_send_at: None } => {
                write!(f, "deadline exceeded before the request could be sent")
            }
            FailReason::MaxWaitExceeded { predicted_wait } => write!(
                f,
                "the predicted wait of {:.3}s exceeds max_wait",
                *predicted_wait as f64 / SECOND as f64
            ),
            FailReason::Deferred { retry_at } => {
                write!(f, "deferred: the predicted wait exceeds defer_after; retry at t={retry_at}ns")
            }
            FailReason::RetriesExhausted { attempts } => {
                write!(f, "still rate limited after {attempts} attempts")
            }
            FailReason::MaybeSent => write!(
                f,
                "the connection failed after the request may have reached the server, \
                 and it was not re-sent (not idempotent, or out of retries)"
            ),
            FailReason::NetworkError { attempts } => {
                write!(f, "the request failed to reach the server {attempts} times")
            }
            FailReason::Unauthorized => {
                write!(f, "the token was rejected with 401; its requests are no longer sent")
            }
            FailReason::Closed => write!(f, "the limiter was closed before the request was sent"),
            FailReason::InsufficientCapacity { dimension, cost, limit } => write!(
                f,
                "insufficient capacity: the request costs {cost} {dimension}, more than the limit of {limit}"
            ),
        }
    }
}

/// How a transport failure happened, as far as the driver knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The request certainly did not reach the server (connect failed, DNS failed,
    /// aborted before writing). Its global token and bucket slot are given back.
    NotSent,
    /// The request may have reached the server (reset mid-response, timeout after writing).
    MaybeSent,
}

impl Failure {
    /// The failure a binding's caller names: `"not_sent"` or `"maybe_sent"`.
    pub fn from_name(name: &str) -> Option<Failure> {
        match name {
            "not_sent" => Some(Failure::NotSent),
            "maybe_sent" => Some(Failure::MaybeSent),
            _ => None,
        }
    }
}

/// What the core tells the driver after a response (the return value of
/// [`crate::Limiter::handle_response`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Terminal: hand this response to the caller.
    Complete,
    /// Not terminal: the core will emit [`Output::Send`] for the same id again later.
    Retry,
    /// Terminal: an [`Output::Fail`] for this id is queued.
    Failed,
}

/// Something worth a metric or a log line. Emitted as [`Output::Observe`].
///
/// Exhaustive for the same reason as [`FailReason`]: bindings convert every observation.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "type", rename_all = "snake_case"))]
pub enum Observation {
    /// A 429 was received.
    RateLimited {
        /// The request that got it.
        id: RequestId,
        /// The scope: Discord's, or inferred.
        scope: RateLimitScope,
        /// How long the core will hold the affected requests.
        retry_after: Nanos,
    },
    /// A route was mapped to a bucket (or re-mapped when the server changed its hash).
    BucketLearned {
        /// `METHOD /route/template`.
        route: String,
        /// The bucket identifier.
        bucket: String,
    },
    /// The invalid-request count (401/403/non-shared 429 over the last window) crossed the
    /// warning threshold.
    InvalidRequestWarning {
        /// Invalid requests in the current window.
        count: u32,
        /// The configured budget.
        limit: u32,
    },
    /// Shared mode: the store could not answer the reservation of request `id`. Until
    /// `retry_at` no reservation is made (fail-open: requests go on under local limits;
    /// fail-closed: they wait); then one reservation probes the store. Emitted once per outage
    /// step: not for the other reservations that were outstanding when the store went away.
    StoreUnavailable {
        /// The request whose reservation failed.
        id: RequestId,
        /// When the store is asked again (monotonic).
        retry_at: Nanos,
    },
    /// Shared mode: the store answered again after being unavailable.
    StoreRecovered,
}

/// The scope of a 429 as the core classified it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum RateLimitScope {
    /// The route's bucket was exhausted.
    Bucket,
    /// The token's global limit.
    Global,
    /// A shared resource limit (not the caller's fault).
    Shared,
    /// A hidden sub-limit of the route and major parameter (the bucket still had room).
    SubLimit,
    /// A 429 without rate-limit headers (Cloudflare-style): the whole host is held.
    Edge,
}

impl RateLimitScope {
    /// The stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            RateLimitScope::Bucket => "bucket",
            RateLimitScope::Global => "global",
            RateLimitScope::Shared => "shared",
            RateLimitScope::SubLimit => "sub_limit",
            RateLimitScope::Edge => "edge",
        }
    }
}

/// One output of the core. Drain with [`crate::Limiter::poll_output`] after every input,
/// until it returns [`Output::WaitUntil`] or [`Output::Idle`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Output {
    /// Send this request now.
    Send(RequestId),
    /// This request ended without being answered.
    Fail(RequestId, FailReason),
    /// A metric or log event.
    Observe(Observation),
    /// Shared mode ([`crate::shared`]): ask the store whether this request may be sent, then
    /// answer with [`crate::Limiter::handle_reservation`].
    Reserve(Reservation),
    /// Shared mode ([`crate::shared`]): write this to the store, fire-and-forget, in order.
    Share(SharedUpdate),
    /// Drained. Call [`crate::Limiter::handle_timeout`] at this monotonic time (or earlier:
    /// an early call is harmless).
    WaitUntil(Nanos),
    /// Drained, and nothing is waiting on time.
    Idle,
}

/// A request to be rate limited, as given to [`crate::Limiter::enqueue`].
///
/// Build it with [`Request::new`] (method and concrete path; the route template and
/// major parameter are derived by the limiter's header profile) or
/// [`Request::with_route`] (route template and major parameter given explicitly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// HTTP method, e.g. `"POST"`. Case-insensitive.
    pub method: String,
    /// The concrete path (`/channels/123/messages`), or the route template when
    /// [`Request::major`] is set.
    pub path: String,
    /// When set, `path` is already a route template and this is its major parameter
    /// (e.g. the channel id); no path parsing happens.
    pub major: Option<String>,
    /// Who sends it: a key for the token (never the token itself; a hash or the bot id).
    /// Each identity has its own global limit and buckets.
    pub identity: String,
    /// Fail with [`FailReason::DeadlineExceeded`] rather than send after this monotonic time.
    pub deadline: Option<Nanos>,
    /// Fail at once with [`FailReason::Deferred`] (carrying the predicted send time) rather
    /// than wait longer than this after enqueue. `None`: [`crate::Config::defer_after`].
    /// Replaces `max_wait` for this request (the shorter of the two is the budget, and
    /// exceeding it defers); the request's own `deadline` still wins when the predicted send
    /// time is past it (`deadline_exceeded`: retrying later would be no use).
    pub defer_after: Option<Nanos>,
    /// Higher goes first when several requests compete for the global limit. Default 0.
    pub priority: i32,
    /// Whether re-sending is harmless. `None`: decided by method (GET, HEAD, OPTIONS, PUT,
    /// DELETE are idempotent).
    pub idempotent: Option<bool>,
    /// Whether the route is exempt from the global limit. `None`: decided by the profile
    /// (Discord: interaction callbacks and webhook-token routes).
    pub global_exempt: Option<bool>,
    /// The request's sub-limit class: a kind of request that the server limits apart from the
    /// rest of its route (Discord: editing a channel's name or topic). A sub-limit 429 of a
    /// request with a class holds only that class on its route and major parameter; one without
    /// a class holds the whole route. `None`: derived by the profile from
    /// [`Request::body_keys`] ([`crate::route::sub_limit_class`]).
    pub sub_limit: Option<String>,
    /// The top-level keys of the request's JSON body, when the caller has the body: the
    /// profile derives the sub-limit class from them. Empty: no body, or not known.
    pub body_keys: Vec<String>,
    /// The request's estimated cost in budgets other than the request count, by dimension
    /// name as the answers report it (`tokens`, `input_tokens`, `points`...; see
    /// [`Dimension::name`]): it is sent only when every dimension it names has room for it,
    /// and its answer settles the estimate to the actual cost ([`BodyHints::usage`]). At most
    /// [`crate::headers::MAX_DIMENSIONS`] entries, each name 1 to 32 bytes of `[a-z0-9_]`,
    /// not `requests` (every request costs one of those), no name twice. Empty: it costs one
    /// request and nothing else is known. See the [`crate::Limiter`] docs, "Costs".
    pub costs: Vec<(String, u64)>,
    /// The LLM model the request asks for (an OpenAI or Anthropic body's `model`;
    /// `ratelane::llm::read_request`, feature `json`, reads it). Under the profiles whose provider limits per
    /// model ([`HeaderProfile::OpenAi`], [`HeaderProfile::AzureOpenAi`],
    /// [`HeaderProfile::Anthropic`], and [`HeaderProfile::Auto`], which cannot tell before the
    /// first answer) it is the request's major parameter when [`Request::major`] is not set, so
    /// two models never share a queue and its budgets; other profiles ignore it. At most 256
    /// bytes. `None`: every model of a route shares one queue.
    pub model: Option<String>,
}

impl Request {
    /// A request for `method` on the concrete `path`, for the default identity.
    pub fn new(method: impl Into<String>, path: impl Into<String>) -> Self {
        Request {
            method: method.into(),
            path: path.into(),
            major: None,
            identity: String::new(),
            deadline: None,
            defer_after: None,
            priority: 0,
            idempotent: None,
            global_exempt: None,
            sub_limit: None,
            body_keys: Vec::new(),
            costs: Vec::new(),
            model: None,
        }
    }

    /// A request on an explicit route template with its major parameter.
    pub fn with_route(
        method: impl Into<String>,
        template: impl Into<String>,
        major: impl Into<String>,
    ) -> Self {
        let mut r = Request::new(method, template);
        r.major = Some(major.into());
        r
    }

    /// Sets the identity (a key for the token).
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// Sets the deadline (monotonic).
    pub fn deadline(mut self, deadline: Nanos) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Sets the `defer_after` budget (see [`Request::defer_after`]).
    pub fn defer_after(mut self, defer_after: Nanos) -> Self {
        self.defer_after = Some(defer_after);
        self
    }

    /// Sets the priority (higher first).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Declares whether the request may be re-sent after it may have reached the server.
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = Some(idempotent);
        self
    }

    /// Declares whether the request is exempt from the global limit.
    pub fn global_exempt(mut self, exempt: bool) -> Self {
        self.global_exempt = Some(exempt);
        self
    }

    /// Sets the sub-limit class (see [`Request::sub_limit`]).
    pub fn sub_limit(mut self, class: impl Into<String>) -> Self {
        self.sub_limit = Some(class.into());
        self
    }

    /// Adds an estimated cost of `amount` in dimension `name` (see [`Request::costs`]).
    pub fn cost(mut self, name: impl Into<String>, amount: u64) -> Self {
        self.costs.push((name.into(), amount));
        self
    }

    /// Gives the top-level keys of the JSON body, from which the profile derives the
    /// sub-limit class (see [`Request::body_keys`]).
    pub fn body_keys<K: Into<String>>(mut self, keys: impl IntoIterator<Item = K>) -> Self {
        self.body_keys = keys.into_iter().map(Into::into).collect();
        self
    }
}

// The boundary values of shared mode ([`crate::shared`]): what the core asks of the store and
// what the store answers, as every binding passes them.

/// What the store must decide before request `id` may be sent (emitted as
/// [`Output::Reserve`]). Every duration is relative; the store uses
/// its own clock. See the [module documentation](crate::shared) for what the store does with it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Reservation {
    /// The request. Answer with [`Limiter::handle_reservation`](crate::Limiter::handle_reservation).
    pub id: RequestId,
    /// The request's identity (a key for the token).
    pub identity: String,
    /// The route key, `METHOD /template`.
    pub route: String,
    /// The major parameter (channel, guild, webhook id + token), or `""`.
    pub major: String,
    /// The bucket hash this process has learned for the route, if any.
    pub bucket: Option<String>,
    /// Whether the request counts against the identity's global limit (not exempt).
    pub counts_global: bool,
    /// Global grants allowed per `global_window` (`0`: no global limit).
    pub global_limit: u32,
    /// How many global tokens this process asks for with this reservation, its own included:
    /// the store grants as many as the window has room for, and leases the ones beyond this
    /// request's to the process ([`ReservationAnswer::Granted::leased`]). `1`: no lease. `0`:
    /// spend a token leased to this process earlier (moved to now; without one still counted,
    /// a token of its own like `1`). Only meaningful with `counts_global`.
    #[cfg_attr(feature = "serde", serde(default = "one"))]
    pub global_want: u32,
    /// The global window, already widened by this process's latency margin.
    #[cfg_attr(feature = "serde", serde(rename = "global_window_ns"))]
    pub global_window: Nanos,
    /// This process's latency margin, added to a bucket window the store starts on its own.
    #[cfg_attr(feature = "serde", serde(rename = "margin_ns"))]
    pub margin: Nanos,
    /// Stop granting when this many invalid responses were recorded within `invalid_window`
    /// (`0`: no budget).
    pub invalid_limit: u32,
    /// The invalid-request window.
    #[cfg_attr(feature = "serde", serde(rename = "invalid_window_ns"))]
    pub invalid_window: Nanos,
    /// Only while this process recovers from a store outage: count in the answer's
    /// `processes` only the processes that reserved within this long (the time since this
    /// process's outage began), so that it knows when every process is back (see "After an
    /// outage"). `None`: the live processes, as usual.
    #[cfg_attr(feature = "serde", serde(rename = "processes_since_ns", default, skip_serializing_if = "Option::is_none"))]
    pub processes_since: Option<Nanos>,
    /// Only after a store outage: this process still has sends the store may not count (of
    /// this identity or another), so it is not *back* yet: the store does not refresh its
    /// entry among the live processes (`procs`), and other processes' `processes_since` counts
    /// do not count it until it reserves without this flag.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "std::ops::Not::not"))]
    pub reporting: bool,
    /// Only after a store outage, until the store has answered one reservation that carried
    /// them: how long ago (at this reservation) this process made the identity's sends that
    /// counted against its global limit **without** a reservation (fail-open while the store
    /// was down), within the longest global window. The store never counted them; it counts
    /// them now, as of those times on its own clock (see "Through an outage").
    #[cfg_attr(feature = "serde", serde(rename = "unrecorded_ns", default, skip_serializing_if = "Vec::is_empty"))]
    pub unrecorded: Vec<Nanos>,
    /// Like `unrecorded`, for the sends the store granted: a store that does not know this
    /// process (it lost its state: a restart without persistence) counts them; one that knows
    /// it has them already and ignores these.
    #[cfg_attr(feature = "serde", serde(rename = "granted_ns", default, skip_serializing_if = "Vec::is_empty"))]
    pub granted: Vec<Nanos>,
}

/// Empty strings, no global limit, one token asked for, no report: a base for
/// `Reservation { .., ..Reservation::default() }`.
impl Default for Reservation {
    fn default() -> Self {
        Reservation {
            id: 0,
            identity: String::new(),
            route: String::new(),
            major: String::new(),
            bucket: None,
            counts_global: false,
            global_limit: 0,
            global_want: 1,
            global_window: 0,
            margin: 0,
            invalid_limit: 0,
            invalid_window: 0,
            processes_since: None,
            reporting: false,
            unrecorded: Vec::new(),
            granted: Vec::new(),
        }
    }
}

#[cfg(feature = "serde")]
fn one() -> u32 {
    1
}

#[cfg(feature = "serde")]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The store's answer to a [`Reservation`], passed to
/// [`Limiter::handle_reservation`](crate::Limiter::handle_reservation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "answer", rename_all = "snake_case"))]
pub enum ReservationAnswer {
    /// Send it now.
    Granted {
        /// How many processes the store counts as live, this one included (see the store
        /// contract's `procs` key; with [`Reservation::processes_since`], those that reserved
        /// within that time); `None` when the store did not say. A fail-open process runs on
        /// its share of the limits (divided by the last count it saw) while the store is down.
        #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
        processes: Option<u32>,
        /// Global tokens leased to this process beyond this request's own (the reservation's
        /// `global_want` less one, or fewer when the window had less room): the store has
        /// counted them already, and the process's next `leased` reservations of this identity
        /// spend them (`global_want: 0`). `0` from a store that does not lease.
        #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "is_zero"))]
        leased: u32,
        /// The store's clock when it granted, the time it counted the request's global token
        /// from (ns, on any epoch: only differences between its answers are used), or `None`
        /// when it did not say.
        /// With it the process learns how unevenly its grants reach it after the store counts
        /// them, and passes that spread in its margin (see "Leases"); without it, the spread
        /// of its reservations' round trips, which also holds the time a reservation waited
        /// before the store saw it.
        #[cfg_attr(feature = "serde", serde(default, rename = "store_time_ns", skip_serializing_if = "Option::is_none"))]
        store_time: Option<Nanos>,
    },
    /// Not now: `scope` is exhausted for `retry_after`.
    Denied {
        /// How long to hold what `scope` names (at least 1 ms is applied).
        #[cfg_attr(feature = "serde", serde(rename = "retry_after_ns"))]
        retry_after: Nanos,
        /// What is exhausted.
        scope: SharedScope,
        /// As for `Granted`.
        #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
        processes: Option<u32>,
    },
    /// The store could not answer (down, or too slow): see [`OnUnavailable`](crate::shared::OnUnavailable).
    Unavailable,
}

impl ReservationAnswer {
    /// `Granted` without a process count (a store that does not count processes).
    pub const GRANTED: ReservationAnswer = ReservationAnswer::Granted { processes: None, leased: 0, store_time: None };

    /// The live-process count the store gave with this answer, if any.
    pub fn processes(&self) -> Option<u32> {
        match *self {
            ReservationAnswer::Granted { processes, .. } | ReservationAnswer::Denied { processes, .. } => processes,
            ReservationAnswer::Unavailable => None,
        }
    }
}

/// The part of the limits a denial or a hold concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum SharedScope {
    /// Everything (a Cloudflare-style ban on the shared egress). Holds every request.
    Edge,
    /// The shared invalid-request budget is used up. Holds every request.
    Invalid,
    /// The identity's global limit (window full, or paused by a global 429). Holds the
    /// identity's non-exempt requests.
    Global,
    /// A route and major parameter (a hidden sub-limit). Holds that route in its queue.
    Route,
    /// A bucket and major parameter (exhausted, or a shared-resource 429). Holds the queue.
    Bucket,
    /// Another process's pioneer is learning this bucket. Holds the queue.
    Pioneer,
}

impl SharedScope {
    /// The stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            SharedScope::Edge => "edge",
            SharedScope::Invalid => "invalid",
            SharedScope::Global => "global",
            SharedScope::Route => "route",
            SharedScope::Bucket => "bucket",
            SharedScope::Pioneer => "pioneer",
        }
    }

    /// The scope named `name` ([`SharedScope::as_str`]).
    pub fn from_name(name: &str) -> Option<SharedScope> {
        Some(match name {
            "edge" => SharedScope::Edge,
            "invalid" => SharedScope::Invalid,
            "global" => SharedScope::Global,
            "route" => SharedScope::Route,
            "bucket" => SharedScope::Bucket,
            "pioneer" => SharedScope::Pioneer,
            _ => return None,
        })
    }
}

/// What the store must record (emitted as [`Output::Share`]); the driver
/// writes it fire-and-forget. See the [module documentation](crate::shared) for what the store does with
/// each.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "share", rename_all = "snake_case"))]
pub enum SharedUpdate {
    /// A response arrived for request `id`, sent in shared mode: what it says about its bucket
    /// (every field optional). It also ends the request's grant (pioneer lock, unanswered grant).
    Bucket {
        /// The request.
        id: RequestId,
        /// Its identity.
        identity: String,
        /// Its route key.
        route: String,
        /// Its major parameter.
        major: String,
        /// The bucket hash, from the response or as this process knows it.
        bucket: Option<String>,
        /// The route turned out to have no rate-limit headers (only the global limit applies).
        unlimited: bool,
        /// The bucket's limit.
        limit: Option<u32>,
        /// What the server said remains in the current window (0 after a bucket 429).
        remaining: Option<u32>,
        /// Time from the response until the window resets (or the 429's wait, if longer).
        #[cfg_attr(feature = "serde", serde(rename = "reset_after_ns"))]
        reset_after: Option<Nanos>,
        /// The window length as this process estimates it.
        #[cfg_attr(feature = "serde", serde(rename = "window_ns"))]
        window: Option<Nanos>,
    },
    /// Request `id` was granted but will not be answered: cancelled or failed before it was
    /// sent (`reached: false`), or after it may have reached the server (`reached: true`).
    Release {
        /// The request.
        id: RequestId,
        /// Its identity.
        identity: String,
        /// Its route key.
        route: String,
        /// Its major parameter.
        major: String,
        /// The bucket hash as this process knows it.
        bucket: Option<String>,
        /// Whether it may have reached the server (its grant then keeps counting).
        reached: bool,
        /// The bucket's window length as this process estimates it (as in `Bucket`).
        #[cfg_attr(feature = "serde", serde(rename = "window_ns"))]
        window: Option<Nanos>,
    },
    /// Everyone must hold `scope` for `retry_after` (a 429 told so): `global` (a global 429),
    /// `route` (a sub-limit), `bucket` (a shared-resource 429) or `edge` (a 429 without
    /// rate-limit headers).
    Hold {
        /// What to hold.
        scope: SharedScope,
        /// The identity whose limit it is.
        identity: String,
        /// The route key of the request that got the 429.
        route: String,
        /// Its major parameter.
        major: String,
        /// The bucket hash as this process knows it.
        bucket: Option<String>,
        /// How long.
        #[cfg_attr(feature = "serde", serde(rename = "retry_after_ns"))]
        retry_after: Nanos,
    },
    /// Request `id` got an invalid response (401, 403 or a non-shared 429): it counts against
    /// the shared invalid-request budget for `window`.
    Invalid {
        /// The request.
        id: RequestId,
        /// The invalid-request window.
        #[cfg_attr(feature = "serde", serde(rename = "window_ns"))]
        window: Nanos,
    },
}

impl SharedUpdate {
    /// The variant's name in the store's wire format (and its serde tag): `bucket`,
    /// `release`, `hold` or `invalid`.
    pub fn kind(&self) -> &'static str {
        match self {
            SharedUpdate::Bucket { .. } => "bucket",
            SharedUpdate::Release { .. } => "release",
            SharedUpdate::Hold { .. } => "hold",
            SharedUpdate::Invalid { .. } => "invalid",
        }
    }
}
