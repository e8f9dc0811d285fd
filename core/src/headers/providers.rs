//! The provider packs: OpenAI, Azure OpenAI, Anthropic and Shopify, the binding rule that
//! turns several budgets into the engine's one, and the detection behind
//! [`HeaderProfile::Auto`](crate::HeaderProfile::Auto). The module docs of
//! [`crate::headers`] say what each reads; the fixtures in `core/tests/headers_fixtures.rs`
//! name the documentation each one imitates.

use crate::types::{
    BodyHints, Dimension, HeaderProfile, MILLISECOND, Nanos, QueryCost, RateLimitInfo, Response, SECOND, Unit,
};

use super::num::{Decimal, ms_to_wait, parse_decimal, parse_duration, trim_ows};
use super::{Ctx, MAX_DURATION, httpdate};

/// The most dimensions one answer may report; further names are ignored.
pub const MAX_DIMENSIONS: usize = 8;
/// The longest dimension name accepted, in bytes.
const MAX_NAME_LEN: usize = 32;

/// Azure OpenAI counts requests over a short evaluation window ("typically 1 or 10 seconds",
/// Azure OpenAI quotas documentation) and its `x-ratelimit-remaining-requests` follows the
/// 10-second count (RPM / 6). When an answer gives no reset for requests, the window is taken
/// to end this long after the answer: the longest documented evaluation period.
pub const AZURE_REQUESTS_WINDOW: Nanos = 10 * SECOND;
/// Azure OpenAI's token budget is per minute (TPM): without a reset, it is whole again at the
/// latest a minute after the answer.
pub const AZURE_TOKENS_WINDOW: Nanos = 60 * SECOND;
/// Shopify's REST Admin API leaks 2 calls per second on the standard plan, faster on others
/// (4/s Advanced, 20/s Plus); the header does not say which, so the slowest is assumed: one
/// call leaves the bucket every 500 ms.
pub const SHOPIFY_REST_LEAK_INTERVAL: Nanos = 500 * MILLISECOND;
/// What GitHub says to wait after a secondary limit that names no time: "at least one minute".
pub const GITHUB_SECONDARY_WAIT: Nanos = 60 * SECOND;

// ---------------------------------------------------------------------------------------
// Small readers

/// A count from a legacy number, rounded down (saturating at `u64::MAX`).
fn count64(d: Decimal) -> u64 {
    d.int
}

fn to_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// A dimension name from a header suffix: ASCII-lowercased, `-` as `_`, at most
/// [`MAX_NAME_LEN`] bytes of `[a-z0-9_]`; it must name requests or tokens (so a Discord
/// `X-RateLimit-Reset-After` read under the OpenAI profile is not a dimension "after").
fn dimension_name(suffix: &str) -> Option<(String, Unit)> {
    if suffix.is_empty() || suffix.len() > MAX_NAME_LEN {
        return None;
    }
    let mut name = String::with_capacity(suffix.len());
    for c in suffix.chars() {
        match c {
            'a'..='z' | '0'..='9' | '_' => name.push(c),
            'A'..='Z' => name.push(c.to_ascii_lowercase()),
            '-' => name.push('_'),
            _ => return None,
        }
    }
    let unit = if name == "requests" {
        Unit::Requests
    } else if name.contains("tokens") {
        Unit::Tokens
    } else if name.contains("requests") {
        Unit::Requests
    } else {
        return None;
    };
    Some((name, unit))
}

/// Which value of a dimension a header carries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Limit,
    Remaining,
    Reset,
}

/// Collects dimension values header by header, the most conservative of repeated or
/// comma-joined values winning (least limit and remaining, latest reset).
#[derive(Default)]
struct Dims {
    dims: Vec<Dimension>,
}

impl Dims {
    fn entry(&mut self, name: String, unit: Unit) -> Option<&mut Dimension> {
        if let Some(i) = self.dims.iter().position(|d| d.name == name) {
            return self.dims.get_mut(i);
        }
        if self.dims.len() >= MAX_DIMENSIONS {
            return None;
        }
        self.dims.push(Dimension::new(name, unit));
        self.dims.last_mut()
    }

    /// Records every comma-separated part of `value` for `field` of dimension `name`;
    /// `reset` reads one part as a wait from now.
    fn record(
        &mut self,
        name: String,
        unit: Unit,
        field: Field,
        value: &str,
        reset: &dyn Fn(&str) -> Option<Nanos>,
    ) {
        let Some(d) = self.entry(name, unit) else {
            return;
        };
        for part in value.split(',') {
            match field {
                Field::Limit => {
                    if let Some(v) = parse_decimal(part).map(count64) {
                        d.limit = Some(d.limit.map_or(v, |old| old.min(v)));
                    }
                }
                Field::Remaining => {
                    if let Some(v) = parse_decimal(part).map(count64) {
                        d.remaining = Some(d.remaining.map_or(v, |old| old.min(v)));
                    }
                }
                Field::Reset => {
                    if let Some(v) = reset(part) {
                        d.reset_after = Some(d.reset_after.map_or(v, |old| old.max(v)));
                    }
                }
            }
        }
    }

    /// The dimensions that reported anything, in order of first appearance.
    fn finish(self) -> Vec<Dimension> {
        self.dims.into_iter().filter(Dimension::is_reported).collect()
    }
}

// ---------------------------------------------------------------------------------------
// The binding rule

/// The engine's one budget from several: see "Several budgets" in the [`crate::headers`]
/// docs. Returns `(limit, remaining, reset_after)`.
pub fn binding_view(dims: &[Dimension]) -> (Option<u32>, Option<u32>, Option<Nanos>) {
    // The dimension that binds among `candidates`: the least remaining, then the longest reset.
    fn binding<'d>(candidates: impl Iterator<Item = &'d Dimension>) -> Option<&'d Dimension> {
        let mut best: Option<&Dimension> = None;
        for d in candidates.filter(|d| d.remaining.is_some()) {
            let better = best.is_none_or(|b| {
                d.remaining < b.remaining || (d.remaining == b.remaining && d.reset_after > b.reset_after)
            });
            if better {
                best = Some(d);
            }
        }
        best
    }
    let requests_dims = || dims.iter().filter(|d| d.unit == Unit::Requests);
    let requests = binding(requests_dims()).or_else(|| requests_dims().next());
    let limit = requests.and_then(|d| d.limit).map(to_u32);
    let Some(bind) = binding(dims.iter()) else {
        // Nothing says what is left: only the requests budget's reset means anything.
        return (limit, None, requests.and_then(|d| d.reset_after));
    };
    let requests_reset = requests.and_then(|d| d.reset_after);
    let reset = match (bind.reset_after, requests_reset) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    (limit, bind.remaining.map(to_u32), reset)
}

fn apply_view(info: &mut RateLimitInfo) {
    let (limit, remaining, reset_after) = binding_view(&info.dimensions);
    info.limit = limit;
    info.remaining = remaining;
    info.reset_after = reset_after;
}

// ---------------------------------------------------------------------------------------
// OpenAI and Azure OpenAI

/// `x-ratelimit-{limit,remaining,reset}-{name}`: the field and the dimension name.
fn openai_header(name: &str) -> Option<(Field, String, Unit)> {
    const PREFIX: &str = "x-ratelimit-";
    let rest = name.get(..PREFIX.len()).filter(|p| p.eq_ignore_ascii_case(PREFIX))?;
    let rest = &name[rest.len()..];
    for (field, f) in [("limit-", Field::Limit), ("remaining-", Field::Remaining), ("reset-", Field::Reset)] {
        if let Some(suffix) = rest.get(..field.len()).filter(|p| p.eq_ignore_ascii_case(field)) {
            let (dim, unit) = dimension_name(&rest[suffix.len()..])?;
            return Some((f, dim, unit));
        }
    }
    None
}

/// Whether `name` is an OpenAI-style dimension header.
pub(crate) fn is_openai_header(name: &str) -> bool {
    openai_header(name).is_some()
}

pub(super) fn openai(ctx: &Ctx<'_, '_>, info: &mut RateLimitInfo, azure: bool) {
    let mut dims = Dims::default();
    for (name, value) in ctx.resp.headers {
        if let Some((field, dim, unit)) = openai_header(name) {
            info.has_rate_limit_headers = true;
            dims.record(dim, unit, field, value, &parse_duration);
        }
    }
    // The millisecond retry headers are these providers' own: a 429 with only them comes from
    // the API's limiter, not from an edge.
    info.has_rate_limit_headers |= ctx.has_any(&["retry-after-ms", "x-ms-retry-after-ms"]);
    if ctx.cached {
        return;
    }
    info.dimensions = dims.finish();
    if azure {
        for d in &mut info.dimensions {
            if d.reset_after.is_none() && d.remaining.is_some() {
                d.reset_after = Some(match d.unit {
                    Unit::Requests => AZURE_REQUESTS_WINDOW,
                    _ => AZURE_TOKENS_WINDOW,
                });
            }
        }
    }
    apply_view(info);
}

// ---------------------------------------------------------------------------------------
// Anthropic

/// `anthropic-ratelimit-{name}-{limit,remaining,reset}`.
fn anthropic_header(name: &str) -> Option<(Field, String, Unit)> {
    const PREFIX: &str = "anthropic-ratelimit-";
    let head = name.get(..PREFIX.len()).filter(|p| p.eq_ignore_ascii_case(PREFIX))?;
    let rest = &name[head.len()..];
    let (dim, field) = rest.rsplit_once('-')?;
    let field = if field.eq_ignore_ascii_case("limit") {
        Field::Limit
    } else if field.eq_ignore_ascii_case("remaining") {
        Field::Remaining
    } else if field.eq_ignore_ascii_case("reset") {
        Field::Reset
    } else {
        return None;
    };
    let (dim, unit) = dimension_name(dim)?;
    Some((field, dim, unit))
}

/// Whether `name` starts with Anthropic's rate-limit prefix.
pub(crate) fn is_anthropic_header(name: &str) -> bool {
    name.get(..20).is_some_and(|p| p.eq_ignore_ascii_case("anthropic-ratelimit-"))
}

pub(super) fn anthropic(ctx: &Ctx<'_, '_>, info: &mut RateLimitInfo) {
    let now = ctx.now_ms;
    let reset = |part: &str| -> Option<Nanos> {
        let at = httpdate::parse_rfc3339_ms(part)?;
        let now = i128::from(now?);
        let delay = (i128::from(at) - now).max(0);
        Some(ms_to_wait(u64::try_from(delay).unwrap_or(u64::MAX)))
    };
    let mut dims = Dims::default();
    for (name, value) in ctx.resp.headers {
        if is_anthropic_header(name) {
            info.has_rate_limit_headers = true;
        }
        if let Some((field, dim, unit)) = anthropic_header(name) {
            dims.record(dim, unit, field, value, &reset);
        }
    }
    if ctx.cached {
        return;
    }
    info.dimensions = dims.finish();
    apply_view(info);
}

// ---------------------------------------------------------------------------------------
// Shopify

/// `X-Shopify-Shop-Api-Call-Limit`.
pub(crate) const SHOPIFY_CALL_LIMIT: &str = "x-shopify-shop-api-call-limit";

/// One `used/size` value (integers, `size` > 0).
fn call_limit(part: &str) -> Option<(u64, u64)> {
    let (used, size) = part.split_once('/')?;
    let (used, size) = (parse_decimal(used)?, parse_decimal(size)?);
    if used.frac_ns != 0 || used.frac_rest || size.frac_ns != 0 || size.frac_rest || size.int == 0 {
        return None;
    }
    Some((used.int, size.int))
}

/// A finite, non-negative number.
fn sane(v: Option<f64>) -> Option<f64> {
    v.filter(|v| v.is_finite() && *v >= 0.0)
}

/// `points / rate` seconds as a wait, rounded up to the millisecond, clamped.
fn points_wait(points: f64, rate: f64) -> Nanos {
    let secs = points / rate;
    if !secs.is_finite() || secs >= (MAX_DURATION / SECOND) as f64 {
        return MAX_DURATION;
    }
    let ns = (secs.max(0.0) * SECOND as f64).ceil() as u64;
    super::num::ceil_ms(ns).min(MAX_DURATION)
}

pub(super) fn shopify(ctx: &Ctx<'_, '_>, info: &mut RateLimitInfo) {
    let throttled = ctx.resp.body.errors.iter().any(|e| trim_ows(e).eq_ignore_ascii_case("THROTTLED"));
    let cost = ctx.resp.body.cost;
    let rest_header = ctx.has_any(&[SHOPIFY_CALL_LIMIT]);
    info.has_rate_limit_headers = rest_header || cost.is_some() || throttled;
    info.throttled |= throttled;
    if let Some(c) = cost {
        let mut graphql = RateLimitInfo::default();
        shopify_graphql(&mut graphql, c, throttled);
        info.retry_after = info.retry_after.max(graphql.retry_after);
        if !ctx.cached {
            info.limit = graphql.limit;
            info.remaining = graphql.remaining;
            info.reset_after = graphql.reset_after;
            info.bucket = graphql.bucket;
            info.dimensions = graphql.dimensions;
        }
    }
    if ctx.cached {
        return;
    }
    // REST: the fullest reading of the bucket, if several.
    let left = |(used, size): (u64, u64)| size.saturating_sub(used);
    let mut best: Option<(u64, u64)> = None;
    for part in ctx.lines(SHOPIFY_CALL_LIMIT).flat_map(|v| v.split(',')) {
        if let Some(v) = call_limit(part)
            && best.is_none_or(|b| left(v) < left(b) || (left(v) == left(b) && v.0 > b.0))
        {
            best = Some(v);
        }
    }
    if let Some((used, size)) = best {
        // A leaky bucket is whole (empty) once every call in it has leaked out.
        let drained = SHOPIFY_REST_LEAK_INTERVAL.saturating_mul(used).min(MAX_DURATION);
        let mut d = Dimension::new("calls", Unit::Requests);
        d.limit = Some(size);
        d.remaining = Some(left((used, size)));
        d.reset_after = Some(drained);
        d.refill_interval = Some(SHOPIFY_REST_LEAK_INTERVAL);
        info.dimensions.push(d);
        info.bucket = Some("rest".into());
        info.limit = Some(to_u32(size));
        info.remaining = Some(to_u32(left((used, size))));
        info.reset_after = Some(drained);
    }
}

/// Shopify's GraphQL cost: a `points` dimension as reported, and the engine's view in
/// queries like this one (see "Shopify" in the [`crate::headers`] docs).
fn shopify_graphql(info: &mut RateLimitInfo, c: QueryCost, throttled: bool) {
    let max = sane(c.maximum_available);
    let available = sane(c.currently_available);
    let rate = sane(c.restore_rate).filter(|r| *r > 0.0);
    let requested = sane(c.requested);
    let actual = sane(c.actual);
    let mut d = Dimension::new("points", Unit::Points);
    d.limit = max.map(|m| m as u64);
    d.remaining = available.map(|a| a as u64);
    if let Some(rate) = rate {
        d.refill_interval = Some(points_wait(1.0, rate));
        if let (Some(max), Some(available)) = (max, available) {
            d.reset_after = Some(points_wait((max - available).max(0.0), rate));
        }
    }
    // The next query is assumed to cost what this one asked for (at least one point).
    let per_query = requested.unwrap_or(0.0).max(actual.unwrap_or(0.0)).max(1.0);
    if throttled {
        // Wait until this query's cost is back.
        if let (Some(rate), Some(requested)) = (rate, requested) {
            let missing = (requested - available.unwrap_or(0.0)).max(0.0);
            info.retry_after = info.retry_after.max(Some(points_wait(missing, rate)));
        }
    }
    if d.is_reported() {
        info.bucket = Some("graphql".into());
        info.limit = d.limit.map(|m| to_u32(((m as f64) / per_query).floor().max(1.0) as u64));
        info.remaining = available.map(|a| to_u32((a / per_query).floor() as u64));
        info.reset_after = d.reset_after;
        info.dimensions.push(d);
    }
}

// ---------------------------------------------------------------------------------------
// Detection

/// Discord's own names: nobody else sends them.
const DISCORD_MARKERS: &[&str] = &[
    "x-ratelimit-bucket",
    "x-ratelimit-reset-after",
    "x-ratelimit-scope",
    "x-ratelimit-global",
];
const GITHUB_MARKERS: &[&str] = &["x-ratelimit-resource", "x-ratelimit-used", "x-github-request-id"];

/// The provider an answer comes from, as far as its headers (and body hints) tell; `None` when
/// nothing is recognised. First match wins:
///
/// 1. [`HeaderProfile::Anthropic`]: a header named `anthropic-ratelimit-*`;
/// 2. [`HeaderProfile::AzureOpenAi`]: `x-ms-retry-after-ms`, or an OpenAI-style dimension
///    header (`x-ratelimit-remaining-requests`...) beside a header named `x-ms-*` or
///    `apim-request-id`;
/// 3. [`HeaderProfile::OpenAi`]: an OpenAI-style dimension header, or `retry-after-ms`;
/// 4. [`HeaderProfile::Shopify`]: `X-Shopify-Shop-Api-Call-Limit`, any `x-shopify-*` header, a
///    GraphQL cost in the body, or a `THROTTLED` error in it;
/// 5. [`HeaderProfile::Discord`]: `X-RateLimit-Bucket`, `-Reset-After`, `-Scope` or `-Global`;
/// 6. [`HeaderProfile::GitHub`]: `x-ratelimit-resource`, `x-ratelimit-used` or
///    `x-github-request-id`;
/// 7. [`HeaderProfile::Ietf`]: `RateLimit`, `RateLimit-Policy` or `RateLimit-Limit`,
///    `-Remaining`, `-Reset`.
///
/// Anything else is read for `Retry-After` (and `retry-after-ms`) alone, except plain
/// `X-RateLimit-Limit/Remaining/Reset`, which [`crate::headers::parse`] reads with the
/// generic rule of its docs.
pub fn detect(response: &Response<'_>) -> Option<HeaderProfile> {
    let headers = response.headers;
    let any = |f: &dyn Fn(&str) -> bool| headers.iter().any(|(n, _)| f(n));
    let named = |names: &[&str]| any(&|n| names.iter().any(|m| n.eq_ignore_ascii_case(m)));
    let prefixed = |p: &str| any(&|n| n.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p)));
    if any(&is_anthropic_header) {
        return Some(HeaderProfile::Anthropic);
    }
    let openai_dims = any(&is_openai_header);
    if named(&["x-ms-retry-after-ms"]) || (openai_dims && (prefixed("x-ms-") || named(&["apim-request-id"]))) {
        return Some(HeaderProfile::AzureOpenAi);
    }
    if openai_dims || named(&["retry-after-ms"]) {
        return Some(HeaderProfile::OpenAi);
    }
    let body = &response.body;
    if prefixed("x-shopify-")
        || body.cost.is_some()
        || body.errors.iter().any(|e| trim_ows(e).eq_ignore_ascii_case("THROTTLED"))
    {
        return Some(HeaderProfile::Shopify);
    }
    if named(DISCORD_MARKERS) {
        return Some(HeaderProfile::Discord);
    }
    if named(GITHUB_MARKERS) {
        return Some(HeaderProfile::GitHub);
    }
    if named(super::IETF_FAMILY) {
        return Some(HeaderProfile::Ietf);
    }
    None
}

/// Epoch seconds from 2001 on; a smaller `X-RateLimit-Reset` is a delay in seconds.
const EPOCH_FLOOR_SECS: u64 = 1_000_000_000;

/// Plain `X-RateLimit-Limit`, `-Remaining`, `-Reset` from an unrecognised server, under
/// [`HeaderProfile::Auto`]: counts as GitHub reads them; a reset of 10^9 or more is epoch
/// seconds (needs the wall clock), a smaller one seconds from now (a delay read as an epoch
/// would be in the past, an epoch read as a delay decades away: both wrong, so the magnitude
/// decides).
pub(super) fn generic(ctx: &Ctx<'_, '_>, info: &mut RateLimitInfo) {
    const FAMILY: &[&str] = &["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"];
    info.has_rate_limit_headers = ctx.has_any(FAMILY);
    if ctx.cached || !info.has_rate_limit_headers {
        return;
    }
    info.limit = ctx.min_count("x-ratelimit-limit", false);
    info.remaining = ctx.min_count("x-ratelimit-remaining", false);
    let mut reset: Option<Nanos> = None;
    for d in ctx.numbers("x-ratelimit-reset", false) {
        let wait = if d.int >= EPOCH_FLOOR_SECS {
            let Some(now) = ctx.now_ms else { continue };
            ms_to_wait(d.to_epoch_ms_ceil().saturating_sub(now))
        } else {
            d.to_wait()
        };
        reset = reset.max(Some(wait));
    }
    info.reset_after = reset;
    let mut d = Dimension::new("requests", Unit::Requests);
    d.limit = info.limit.map(u64::from);
    d.remaining = info.remaining.map(u64::from);
    d.reset_after = info.reset_after;
    if d.is_reported() {
        info.dimensions.push(d);
    }
}

// ---------------------------------------------------------------------------------------
// Settling costs

/// What a request actually cost in dimension `dimension`, from what the driver read of its
/// answer's body ([`BodyHints::usage`], [`BodyHints::cost`]), rounded up to a whole unit:
///
/// - an entry named after the dimension itself (`tokens: 812`: the caller's own reading);
/// - `tokens`: `total_tokens` (OpenAI), else `input_tokens + output_tokens` (Anthropic), else
///   `prompt_tokens + completion_tokens`;
/// - `input_tokens`: `input_tokens`, else `prompt_tokens`; `output_tokens`: `output_tokens`,
///   else `completion_tokens`;
/// - `points`: a GraphQL query's `actualQueryCost` ([`QueryCost::actual`](crate::QueryCost)).
///
/// `None` when the body does not say (a 429, a streamed answer, another API): the estimate
/// then stands. Entries that are negative, not finite or above 2^53 are ignored.
pub fn settled_cost(body: &BodyHints, dimension: &str) -> Option<u64> {
    let get = |name: &str| {
        body.usage
            .iter()
            .take(BodyHints::MAX_USAGE)
            .find(|(n, _)| n == name)
            .map(|&(_, v)| v)
            .filter(|v| v.is_finite() && *v >= 0.0 && *v <= 9_007_199_254_740_992.0)
            .map(|v| v.ceil() as u64)
    };
    let sum = |a: &str, b: &str| match (get(a), get(b)) {
        (Some(x), Some(y)) => Some(x.saturating_add(y)),
        _ => None,
    };
    if let Some(v) = get(dimension) {
        return Some(v);
    }
    match dimension {
        "tokens" => get("total_tokens")
            .or_else(|| sum("input_tokens", "output_tokens"))
            .or_else(|| sum("prompt_tokens", "completion_tokens")),
        "input_tokens" => get("prompt_tokens"),
        "output_tokens" => get("completion_tokens"),
        "points" => body
            .cost
            .and_then(|c| c.actual)
            .filter(|v| v.is_finite() && *v >= 0.0 && *v <= 9_007_199_254_740_992.0)
            .map(|v| v.ceil() as u64),
        _ => None,
    }
}

/// Whether `name` may name a cost dimension ([`crate::Request::costs`]): 1 to 32 bytes of
/// `[a-z0-9_]`, the form [`Dimension::name`] has, and not `requests`.
pub fn valid_cost_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name != "requests"
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}
