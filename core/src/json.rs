//! JSON forms of the settings and reports, for bindings and tools (feature `json`).
//!
//! The Python, Node and browser packages build their [`Config`], the simulator's
//! [`ServerConfig`] and [`SimConfig`] from JSON text with these functions, so every language
//! accepts exactly the same keys, applies the same defaults and reports the same errors. The
//! shape is the one `tests/vectors/*.json` uses: `snake_case` keys, durations as integer
//! nanoseconds with an `_ns` suffix.
//!
//! * Missing keys take their defaults ([`Config::for_profile`] of the given `profile`,
//!   [`ServerConfig::discord`], [`SimConfig::default`]).
//! * Unknown keys, wrong types and out-of-range values are [`Error::InvalidConfig`], whose
//!   message names the key (`unknown key "globl_limit"; expected one of: ...`).
//!
//! ```
//! # fn main() -> Result<(), ratelane::Error> {
//! let config = ratelane::json::config_from_json(r#"{"global_limit": 40, "max_wait_ns": 30000000000}"#)?;
//! assert_eq!(config.global_limit, 40);
//! assert_eq!(config.max_wait, Some(30 * ratelane::SECOND));
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::Config;
use crate::error::Error;
use crate::shared::{OnUnavailable, SharedConfig};
use crate::sim::{
    BucketSpec, Latency, Outcome, Remap, Report, RouteSpec, ServerConfig, SimConfig, StopReason,
    WindowKind,
};
use crate::types::{HeaderProfile, Nanos};

fn invalid(e: serde_json::Error) -> Error {
    Error::InvalidConfig(e.to_string())
}

// ------------------------------------------------------------------------------ Config

/// Distinguishes a key given as `null` (`Some(None)`) from an absent one (`None`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// The JSON object in `text`, or an error saying what it is instead.
fn object(text: &str) -> Result<serde_json::Map<String, Value>, Error> {
    match serde_json::from_str(text).map_err(invalid)? {
        Value::Object(map) => Ok(map),
        other => Err(Error::InvalidConfig(format!("expected a JSON object, got {other}"))),
    }
}

/// `value` as a `T`, or an error naming `key`.
fn field<T: serde::de::DeserializeOwned>(key: &str, value: Value) -> Result<T, Error> {
    serde_json::from_value(value).map_err(|e| Error::InvalidConfig(format!("{key}: {e}")))
}

/// Builds and validates a [`Config`] from a JSON object (see the [module](self) docs).
/// `profile` is one of [`HeaderProfile::NAMES`] (`"discord"`, `"ietf"`, `"github"`,
/// `"retry_after_only"`, `"openai"`, `"anthropic"`, `"azure_openai"`, `"shopify"`, `"auto"`);
/// another name is [`Error::InvalidConfig`] naming it and listing these.
/// Absent keys keep the defaults of the object's `profile` (Discord when absent);
/// `max_wait_ns` and `defer_after_ns` may be `null` (no limit, no deferral). `shared` turns shared mode on: an object with
/// optional `on_unavailable` (`"fail_open"` | `"fail_closed"`), `retry_base_ns`, `retry_max_ns`,
/// `lease_ns`, `pioneer_poll_ns`, `state_ttl_ns`, `global_lease` (a bool; absent keys:
/// [`SharedConfig::default`]), or
/// `null` (off, the default). `route_groups` replaces the profile's prior route groups
/// ([`Config::route_groups`]): a list of lists of route keys (`"METHOD /template"`), `[]` for none.
///
/// # Errors
/// [`Error::InvalidConfig`] for malformed JSON, unknown keys, wrong types or values that
/// [`Config::validate`] rejects; the message names the key.
pub fn config_from_json(text: &str) -> Result<Config, Error> {
    let mut map = object(text)?;
    let profile = match map.remove("profile") {
        Some(v) => field("profile", v)?,
        None => HeaderProfile::default(),
    };
    let mut c = Config::for_profile(profile);
    if let Some(v) = map.remove("shared") {
        c.shared = shared_from_json(v)?;
    }
    macro_rules! fields {
        ($($key:literal => $field:ident),* $(,)?) => {
            const KEYS: &[&str] = &["profile", "shared", $($key),*];
            for (key, value) in map {
                match key.as_str() {
                    $($key => c.$field = field($key, value)?,)*
                    _ => {
                        return Err(Error::InvalidConfig(format!(
                            "unknown key {key:?}; expected one of: {}",
                            KEYS.join(", ")
                        )))
                    }
                }
            }
        };
    }
    fields!(
        "global_limit" => global_limit,
        "global_window_ns" => global_window,
        "global_margin_max_ns" => global_margin_max,
        "max_wait_ns" => max_wait,
        "defer_after_ns" => defer_after,
        "max_rate_limit_retries" => max_rate_limit_retries,
        "max_error_retries" => max_error_retries,
        "backoff_base_ns" => backoff_base,
        "backoff_max_ns" => backoff_max,
        "min_rate_limit_wait_ns" => min_rate_limit_wait,
        "max_server_wait_ns" => max_server_wait,
        "invalid_request_limit" => invalid_request_limit,
        "invalid_request_window_ns" => invalid_request_window,
        "invalid_request_stop_at" => invalid_request_stop_at,
        "invalid_request_warn_at" => invalid_request_warn_at,
        "edge_backoff_base_ns" => edge_backoff_base,
        "edge_backoff_max_ns" => edge_backoff_max,
        "stop_on_unauthorized" => stop_on_unauthorized,
        "jitter_seed" => jitter_seed,
        "max_routes" => max_routes,
        "bucket_idle_ttl_ns" => bucket_idle_ttl,
        "route_groups" => route_groups,
    );
    c.validate()?;
    Ok(c)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SharedJson {
    on_unavailable: Option<OnUnavailable>,
    retry_base_ns: Option<Nanos>,
    retry_max_ns: Option<Nanos>,
    lease_ns: Option<Nanos>,
    pioneer_poll_ns: Option<Nanos>,
    state_ttl_ns: Option<Nanos>,
    global_lease: Option<bool>,
}

fn shared_from_json(v: Value) -> Result<Option<SharedConfig>, Error> {
    let Some(s) = field::<Option<SharedJson>>("shared", v)? else { return Ok(None) };
    let mut c = SharedConfig::default();
    if let Some(p) = s.on_unavailable {
        c.on_unavailable = p;
    }
    if let Some(v) = s.retry_base_ns {
        c.retry_base = v;
    }
    if let Some(v) = s.retry_max_ns {
        c.retry_max = v;
    }
    if let Some(v) = s.lease_ns {
        c.lease = v;
    }
    if let Some(v) = s.pioneer_poll_ns {
        c.pioneer_poll = v;
    }
    if let Some(v) = s.state_ttl_ns {
        c.state_ttl = v;
    }
    if let Some(v) = s.global_lease {
        c.global_lease = v;
    }
    Ok(Some(c))
}

/// Every field of `config` as a JSON object, in the form [`config_from_json`] reads. `shared`
/// appears only when shared mode is on, `defer_after_ns` only when set, `route_groups` only when they differ from the
/// profile's default.
pub fn config_to_json(config: &Config) -> String {
    let mut v = json!({
        "profile": config.profile,
        "global_limit": config.global_limit,
        "global_window_ns": config.global_window,
        "global_margin_max_ns": config.global_margin_max,
        "max_wait_ns": config.max_wait,
        "max_rate_limit_retries": config.max_rate_limit_retries,
        "max_error_retries": config.max_error_retries,
        "backoff_base_ns": config.backoff_base,
        "backoff_max_ns": config.backoff_max,
        "min_rate_limit_wait_ns": config.min_rate_limit_wait,
        "max_server_wait_ns": config.max_server_wait,
        "invalid_request_limit": config.invalid_request_limit,
        "invalid_request_window_ns": config.invalid_request_window,
        "invalid_request_stop_at": config.invalid_request_stop_at,
        "invalid_request_warn_at": config.invalid_request_warn_at,
        "edge_backoff_base_ns": config.edge_backoff_base,
        "edge_backoff_max_ns": config.edge_backoff_max,
        "stop_on_unauthorized": config.stop_on_unauthorized,
        "jitter_seed": config.jitter_seed,
        "max_routes": config.max_routes,
        "bucket_idle_ttl_ns": config.bucket_idle_ttl,
    });
    // Like `shared`, the route groups appear only when they are not the profile's own, so
    // the form of a default configuration stays the same.
    if let Some(d) = config.defer_after {
        v["defer_after_ns"] = json!(d);
    }
    if config.route_groups != Config::for_profile(config.profile).route_groups {
        v["route_groups"] = json!(config.route_groups);
    }
    if let Some(sh) = &config.shared {
        v["shared"] = json!({
            "on_unavailable": sh.on_unavailable,
            "retry_base_ns": sh.retry_base,
            "retry_max_ns": sh.retry_max,
            "lease_ns": sh.lease,
            "pioneer_poll_ns": sh.pioneer_poll,
            "state_ttl_ns": sh.state_ttl,
            "global_lease": sh.global_lease,
        });
    }
    v.to_string()
}

// ------------------------------------------------------------------------------ simulator

#[derive(Deserialize, Serialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct BucketJson {
    limit: u32,
    window_ns: Nanos,
    #[serde(default)]
    kind: KindJson,
}

#[derive(Deserialize, Serialize, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum KindJson {
    #[default]
    Fixed,
    Sliding,
    Refill,
}

impl BucketJson {
    fn spec(self) -> Result<BucketSpec, Error> {
        if self.limit == 0 || self.window_ns == 0 {
            return Err(Error::InvalidConfig(
                "a bucket needs limit >= 1 and window_ns >= 1".to_string(),
            ));
        }
        let kind = match self.kind {
            KindJson::Fixed => WindowKind::Fixed,
            KindJson::Sliding => WindowKind::Sliding,
            KindJson::Refill => WindowKind::Refill,
        };
        Ok(BucketSpec { limit: self.limit, window: self.window_ns, kind })
    }

    fn of(spec: BucketSpec) -> Self {
        let kind = match spec.kind {
            WindowKind::Fixed => KindJson::Fixed,
            WindowKind::Sliding => KindJson::Sliding,
            WindowKind::Refill => KindJson::Refill,
        };
        BucketJson { limit: spec.limit, window_ns: spec.window, kind }
    }
}

fn spec(b: Option<BucketJson>) -> Result<Option<BucketSpec>, Error> {
    b.map(BucketJson::spec).transpose()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteJson {
    bucket: Option<String>,
    #[serde(default)]
    global_exempt: bool,
    sub_limit: Option<BucketJson>,
    sub_limit_class: Option<String>,
    shared_limit: Option<BucketJson>,
    status: Option<u16>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemapJson {
    at_ns: Nanos,
    route: String,
    bucket: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ServerJson {
    profile: Option<HeaderProfile>,
    dialect: Option<HeaderProfile>,
    #[serde(default)]
    buckets: BTreeMap<String, BucketJson>,
    #[serde(default)]
    routes: BTreeMap<String, RouteJson>,
    default_bucket: Option<BucketJson>,
    #[serde(default, deserialize_with = "present")]
    global: Option<Option<BucketJson>>,
    invalid_limit: Option<u32>,
    invalid_window_ns: Option<Nanos>,
    ban_duration_ns: Option<Nanos>,
    error_rate: Option<f64>,
    #[serde(default)]
    remaps: Vec<RemapJson>,
    #[serde(default)]
    unauthorized: Vec<String>,
    wall_epoch_ms: Option<u64>,
    seed: Option<u64>,
    tokens: Option<TokensJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensJson {
    /// Tokens a request costs when it does not say (`Server::handle_costing`).
    cost: u64,
    /// The budget, in requests' worth of tokens (`limit * cost` tokens per window).
    limit: u32,
    window_ns: Nanos,
    #[serde(default)]
    kind: KindJson,
}

fn probability(name: &str, p: f64) -> Result<f64, Error> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(Error::InvalidConfig(format!("{name} must be a probability in 0..=1, got {p}")))
    }
}

/// Builds the simulator's [`ServerConfig`] from a JSON object.
///
/// Keys: `profile`, `dialect` (whose headers it answers with, a profile name; default
/// `"discord"`), `buckets` (`{hash: {limit, window_ns, kind: "fixed"|"sliding"|"refill"}}`),
/// `routes` (`{"METHOD /template": {bucket, global_exempt, sub_limit, sub_limit_class,
/// shared_limit, status}}`), `default_bucket`, `global` (a bucket, or `null` for none; absent: Discord's
/// 50/s), `invalid_limit`, `invalid_window_ns`, `ban_duration_ns`, `error_rate`, `remaps`
/// (`[{at_ns, route, bucket}]`), `unauthorized` (identities), `wall_epoch_ms`, `seed`, `tokens`
/// (a token budget beside each bucket, [`ServerConfig::tokens`]: `{cost, limit, window_ns,
/// kind}`, `cost` tokens per request unless it says its own, `limit * cost` per window).
/// Absent keys keep [`ServerConfig::discord`]'s values.
///
/// # Errors
/// [`Error::InvalidConfig`] for malformed JSON, unknown keys or out-of-range values.
pub fn server_config_from_json(text: &str) -> Result<ServerConfig, Error> {
    let s: ServerJson = serde_json::from_str(text).map_err(invalid)?;
    let mut c = ServerConfig::discord();
    if let Some(p) = s.profile {
        c.profile = p;
    }
    if let Some(d) = s.dialect {
        c.dialect = d;
    }
    for (hash, b) in s.buckets {
        c.buckets.insert(hash, b.spec()?);
    }
    for (key, r) in s.routes {
        if let Some(hash) = &r.bucket
            && !c.buckets.contains_key(hash)
        {
            return Err(Error::InvalidConfig(format!(
                "route {key:?} names bucket {hash:?}, which is not in buckets"
            )));
        }
        let route = RouteSpec {
            bucket: r.bucket,
            global_exempt: r.global_exempt,
            sub_limit: spec(r.sub_limit)?,
            sub_limit_class: r.sub_limit_class,
            shared_limit: spec(r.shared_limit)?,
            status: r.status,
        };
        c.routes.insert(key, route);
    }
    c.default_bucket = spec(s.default_bucket)?;
    if let Some(global) = s.global {
        c.global = spec(global)?;
    }
    if let Some(v) = s.invalid_limit {
        c.invalid_limit = v;
    }
    if let Some(v) = s.invalid_window_ns {
        c.invalid_window = v;
    }
    if let Some(v) = s.ban_duration_ns {
        c.ban_duration = v;
    }
    if c.invalid_limit > 0 && (c.invalid_window == 0 || c.ban_duration == 0) {
        return Err(Error::InvalidConfig(
            "invalid_window_ns and ban_duration_ns must be > 0 when invalid_limit is set".into(),
        ));
    }
    if let Some(p) = s.error_rate {
        c.error_rate = probability("error_rate", p)?;
    }
    c.remaps = s
        .remaps
        .into_iter()
        .map(|r| Remap { at: r.at_ns, route: r.route, bucket: r.bucket })
        .collect();
    c.unauthorized = s.unauthorized;
    if let Some(v) = s.wall_epoch_ms {
        c.wall_epoch_ms = v;
    }
    if let Some(v) = s.seed {
        c.seed = v;
    }
    if let Some(t) = s.tokens {
        if t.cost == 0 || t.limit == 0 || t.window_ns == 0 {
            return Err(Error::InvalidConfig("tokens needs cost, limit and window_ns above 0".into()));
        }
        let limit = BucketJson { limit: t.limit, window_ns: t.window_ns, kind: t.kind }.spec()?;
        c.tokens = Some(crate::sim::TokenSpec { cost: t.cost, limit });
    }
    Ok(c)
}

#[derive(Deserialize, Clone, Copy, Default)]
#[serde(deny_unknown_fields)]
struct LatencyJson {
    #[serde(default)]
    base_ns: Nanos,
    #[serde(default)]
    jitter_ns: Nanos,
    #[serde(default)]
    spike_chance: f64,
    #[serde(default)]
    spike_ns: Nanos,
}

impl LatencyJson {
    fn latency(self, name: &str) -> Result<Latency, Error> {
        Ok(Latency {
            base: self.base_ns,
            jitter: self.jitter_ns,
            spike_chance: probability(&format!("{name}.spike_chance"), self.spike_chance)?,
            spike: self.spike_ns,
        })
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SimJson {
    seed: Option<u64>,
    uplink: Option<LatencyJson>,
    downlink: Option<LatencyJson>,
    drop_chance: Option<f64>,
    maybe_sent_share: Option<f64>,
    maybe_sent_arrives: Option<f64>,
    max_steps: Option<u64>,
    max_time_ns: Option<Nanos>,
    wall_clock: Option<bool>,
    clock_skew_ms: Option<i64>,
    trace: Option<bool>,
}

/// Builds the simulation's network settings, [`SimConfig`], from a JSON object.
///
/// Keys: `seed`, `uplink` and `downlink` (`{base_ns, jitter_ns, spike_chance, spike_ns}`),
/// `drop_chance`, `maybe_sent_share`, `maybe_sent_arrives`, `max_steps`, `max_time_ns`,
/// `wall_clock`, `clock_skew_ms`, `trace`. Absent keys keep [`SimConfig::default`]'s values.
///
/// # Errors
/// [`Error::InvalidConfig`] for malformed JSON, unknown keys or out-of-range values.
pub fn sim_config_from_json(text: &str) -> Result<SimConfig, Error> {
    let s: SimJson = serde_json::from_str(text).map_err(invalid)?;
    let mut c = SimConfig::default();
    if let Some(v) = s.seed {
        c.seed = v;
    }
    if let Some(v) = s.uplink {
        c.uplink = v.latency("uplink")?;
    }
    if let Some(v) = s.downlink {
        c.downlink = v.latency("downlink")?;
    }
    if let Some(p) = s.drop_chance {
        c.drop_chance = probability("drop_chance", p)?;
    }
    if let Some(p) = s.maybe_sent_share {
        c.maybe_sent_share = probability("maybe_sent_share", p)?;
    }
    if let Some(p) = s.maybe_sent_arrives {
        c.maybe_sent_arrives = probability("maybe_sent_arrives", p)?;
    }
    if let Some(v) = s.max_steps {
        c.max_steps = v;
    }
    if let Some(v) = s.max_time_ns {
        c.max_time = v;
    }
    if let Some(v) = s.wall_clock {
        c.wall_clock = v;
    }
    if let Some(v) = s.clock_skew_ms {
        c.clock_skew_ms = v;
    }
    if let Some(v) = s.trace {
        c.trace = v;
    }
    Ok(c)
}

fn stop_name(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Finished => "finished",
        StopReason::Stalled => "stalled",
        StopReason::MaxTime => "max_time",
        StopReason::MaxSteps => "max_steps",
    }
}

fn outcome_json(outcome: Option<&Outcome>) -> Value {
    match outcome {
        None => Value::Null,
        Some(Outcome::Completed(status)) => json!({"kind": "completed", "status": status}),
        Some(Outcome::Failed(reason)) => json!({"kind": "failed", "code": reason.code()}),
        Some(Outcome::Cancelled) => json!({"kind": "cancelled"}),
        Some(Outcome::Rejected(code)) => json!({"kind": "rejected", "code": code}),
    }
}

/// A simulation [`Report`] as a JSON object, for bindings:
///
/// * `stop` (`"finished"`, `"stalled"`, `"max_time"`, `"max_steps"`), `now_ns`, `steps`;
/// * totals: `succeeded`, `cancelled`, `failed` (`{code: count}`), `unfinished`,
///   `count_429`, `total_sends`, `makespan_ns`;
/// * invariant checks: `known_limit_violations`, `fifo_violations`, `deadline_violations`,
///   `sends_after_close` (counts; all 0 for a correct limiter), `max_global_in_window`
///   (`{identity: count}`) and `global_limit` (the server's, or `null`);
/// * `requests`: per ticket, `{outcome, sends: [at_ns...], enqueued_at_ns, finished_at_ns}`
///   where `outcome` is `{kind: "completed", status}`, `{kind: "failed", code}`,
///   `{kind: "cancelled"}`, `{kind: "rejected", code}` or `null`;
/// * `trace`: the trace lines, if tracing was on.
pub fn report_to_json(report: &Report) -> String {
    let mut failed = BTreeMap::<&str, usize>::new();
    for r in &report.requests {
        if let Some(Outcome::Failed(reason)) = &r.outcome {
            *failed.entry(reason.code()).or_default() += 1;
        }
    }
    let mut identities: Vec<&str> =
        report.requests.iter().map(|r| r.request.identity.as_str()).collect();
    identities.sort_unstable();
    identities.dedup();
    let max_global: BTreeMap<&str, usize> =
        identities.into_iter().map(|i| (i, report.max_global_in_window(i))).collect();
    let requests: Vec<Value> = report
        .requests
        .iter()
        .map(|r| {
            json!({
                "outcome": outcome_json(r.outcome.as_ref()),
                "sends": r.sends.iter().map(|s| s.at).collect::<Vec<_>>(),
                "enqueued_at_ns": r.enqueued_at,
                "finished_at_ns": r.finished_at,
            })
        })
        .collect();
    json!({
        "stop": stop_name(report.stop),
        "now_ns": report.now,
        "steps": report.steps,
        "succeeded": report.succeeded(),
        "cancelled": report.cancelled(),
        "failed": failed,
        "unfinished": report.unfinished().len(),
        "count_429": report.count_429(),
        "total_sends": report.total_sends(),
        "makespan_ns": report.makespan(),
        "known_limit_violations": report.known_limit_violations().len(),
        "fifo_violations": report.fifo_violations().len(),
        "deadline_violations": report.deadline_violations().len(),
        "sends_after_close": report.sends_after_close().len(),
        "max_global_in_window": max_global,
        "global_limit": report.global.map(BucketJson::of),
        "requests": requests,
        "trace": report.trace,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SECOND;

    #[test]
    fn empty_object_is_the_profile_default() {
        assert_eq!(config_from_json("{}").unwrap(), Config::default());
        assert_eq!(
            config_from_json(r#"{"profile": "github"}"#).unwrap(),
            Config::for_profile(HeaderProfile::GitHub)
        );
    }

    #[test]
    fn every_field_round_trips() {
        let mut c = Config::for_profile(HeaderProfile::Ietf);
        c.max_wait = Some(7 * SECOND);
        c.defer_after = Some(3 * SECOND);
        c.jitter_seed = 99;
        c.global_limit = 10;
        c.invalid_request_limit = 100;
        c.invalid_request_stop_at = 90;
        let back = config_from_json(&config_to_json(&c)).unwrap();
        assert_eq!(back, c);
        // An explicit null clears max_wait.
        let cleared = config_from_json(r#"{"max_wait_ns": null}"#).unwrap();
        assert_eq!(cleared.max_wait, None);
        let deferring = config_from_json(r#"{"defer_after_ns": 2000000000}"#).unwrap();
        assert_eq!(deferring.defer_after, Some(2 * SECOND));
        assert_eq!(config_from_json(r#"{"defer_after_ns": null}"#).unwrap().defer_after, None);
        assert_eq!(Config::default().defer_after, None);
        assert!(!config_to_json(&Config::default()).contains("defer_after"));
        // Shared mode round-trips too; absent keys take SharedConfig's defaults.
        c.shared = Some(SharedConfig::with_policy(OnUnavailable::FailClosed));
        assert_eq!(config_from_json(&config_to_json(&c)).unwrap(), c);
        let on = config_from_json(r#"{"shared": {"lease_ns": 60000000000}}"#).unwrap();
        assert_eq!(on.shared.as_ref().map(|s| s.lease), Some(60 * SECOND));
        assert_eq!(on.shared.unwrap().on_unavailable, OnUnavailable::FailOpen);
        assert_eq!(config_from_json(r#"{"shared": null}"#).unwrap().shared, None);
        // Route groups: the profile's by default (and then not written), replaced or removed.
        assert_eq!(config_from_json("{}").unwrap().route_groups, crate::prior::discord_route_groups());
        assert!(!config_to_json(&Config::default()).contains("route_groups"));
        let none = config_from_json(r#"{"route_groups": []}"#).unwrap();
        assert!(none.route_groups.is_empty());
        assert_eq!(config_from_json(&config_to_json(&none)).unwrap(), none);
        let mine = config_from_json(r#"{"route_groups": [["GET /a", "POST /a"]]}"#).unwrap();
        assert_eq!(mine.route_groups, vec![vec!["GET /a".to_string(), "POST /a".to_string()]]);
        assert_eq!(config_from_json(&config_to_json(&mine)).unwrap(), mine);
    }

    #[test]
    fn every_vector_config_parses_to_itself() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if !name.starts_with("client_") || !name.ends_with(".json") {
                continue;
            }
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let text = v["config"].to_string();
            let c = config_from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            let again: Value = serde_json::from_str(&config_to_json(&c)).unwrap();
            assert_eq!(again, v["config"], "{name}");
            seen += 1;
        }
        assert!(seen > 28);
    }

    #[test]
    fn every_profile_by_name() {
        for &name in HeaderProfile::NAMES {
            let c = config_from_json(&format!(r#"{{"profile": "{name}"}}"#)).unwrap();
            assert_eq!(c, Config::for_profile(HeaderProfile::from_name(name).unwrap()));
            let again: Value = serde_json::from_str(&config_to_json(&c)).unwrap();
            assert_eq!(again["profile"], json!(name));
        }
        // An unknown name lists the known ones.
        let e = config_from_json(r#"{"profile": "OpenAI"}"#).unwrap_err();
        assert_eq!(e.code(), "invalid_config");
        for &name in HeaderProfile::NAMES {
            assert!(e.to_string().contains(name), "{e}");
        }
        let server = server_config_from_json(r#"{"dialect": "github"}"#).unwrap();
        assert_eq!(server.dialect, HeaderProfile::GitHub);
        assert!(server_config_from_json(r#"{"dialect": "slack"}"#).is_err());
        let tokens = server_config_from_json(r#"{"tokens": {"cost": 100, "limit": 50, "window_ns": 60000000000}}"#)
            .unwrap()
            .tokens
            .unwrap();
        assert_eq!((tokens.cost, tokens.total(), tokens.limit.window), (100, 5000, 60 * SECOND));
        let err = server_config_from_json(r#"{"tokens": {"cost": 0, "limit": 50, "window_ns": 1}}"#).unwrap_err();
        assert!(err.to_string().contains("tokens needs cost"), "{err}");
    }

    #[test]
    fn mistakes_are_invalid_config_naming_the_key() {
        for (text, needle) in [
            (r#"{"globl_limit": 1}"#, "globl_limit"),
            (r#"{"global_limit": -1}"#, "global_limit"),
            (r#"{"global_limit": "50"}"#, "global_limit"),
            (r#"{"max_wait_ns": 1.5}"#, "max_wait_ns"),
            (r#"{"defer_after_ns": -1}"#, "defer_after_ns"),
            (r#"{"defer_after_ns": "2s"}"#, "defer_after_ns"),
            (r#"{"profile": "slack"}"#, "slack"),
            (r#"{"backoff_base_ns": 0}"#, "backoff_base"),
            (r#"{"shared": {"lease": 1}}"#, "lease"),
            (r#"{"shared": {"on_unavailable": "maybe"}}"#, "maybe"),
            (r#"{"shared": {"pioneer_poll_ns": 0}}"#, "pioneer_poll"),
            (r#"{"route_groups": [["GET /a"]]}"#, "route_groups[0]"),
            (r#"{"route_groups": [["GET /a", "nonsense"]]}"#, "nonsense"),
            (r#"{"route_groups": ["GET /a"]}"#, "route_groups"),
            ("[1]", "expected a JSON object"),
            ("{", "EOF"),
        ] {
            let e = config_from_json(text).unwrap_err();
            assert_eq!(e.code(), "invalid_config", "{text}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn server_and_sim_configs() {
        let s = server_config_from_json(
            r#"{"buckets": {"h": {"limit": 5, "window_ns": 5000000000}},
                "routes": {"POST /channels/:id/messages": {"bucket": "h"}},
                "global": null, "error_rate": 0.1}"#,
        )
        .unwrap();
        assert_eq!(s.buckets["h"], BucketSpec::fixed(5, 5 * SECOND));
        assert_eq!(s.routes["POST /channels/:id/messages"], RouteSpec::bucket("h"));
        assert_eq!(s.global, None);
        assert_eq!(server_config_from_json("{}").unwrap(), ServerConfig::discord());
        assert!(server_config_from_json(r#"{"error_rate": 2}"#).is_err());
        let e = server_config_from_json(r#"{"routes": {"GET /x": {"bucket": "nope"}}}"#).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        assert!(server_config_from_json(r#"{"buckets": {"h": {"limit": 0, "window_ns": 1}}}"#).is_err());

        let n = sim_config_from_json(r#"{"seed": 7, "uplink": {"base_ns": 5}, "drop_chance": 0.5}"#)
            .unwrap();
        assert_eq!(n.seed, 7);
        assert_eq!(n.uplink, Latency::fixed(5));
        assert_eq!(n.drop_chance, 0.5);
        assert_eq!(sim_config_from_json("{}").unwrap(), SimConfig::default());
        assert!(sim_config_from_json(r#"{"seed": 1, "latency": 3}"#).is_err());
    }

    #[test]
    fn report_summarises_a_run() {
        use crate::sim::{Server, Simulation};
        use crate::{Limiter, Request};
        let server = server_config_from_json(
            r#"{"buckets": {"h": {"limit": 2, "window_ns": 1000000000}},
                "routes": {"POST /channels/:id/messages": {"bucket": "h"}}}"#,
        )
        .unwrap();
        let mut sim = Simulation::new(
            Limiter::new(Config::default()).unwrap(),
            Server::new(server),
            SimConfig::default(),
        );
        for _ in 0..5 {
            sim.enqueue_at(0, Request::with_route("POST", "/channels/:id/messages", "1"));
        }
        let report: Value = serde_json::from_str(&report_to_json(&sim.run().unwrap())).unwrap();
        assert_eq!(report["stop"], "finished");
        assert_eq!(report["succeeded"], 5);
        assert_eq!(report["count_429"], 0);
        assert_eq!(report["requests"].as_array().unwrap().len(), 5);
        assert_eq!(report["requests"][0]["outcome"]["kind"], "completed");
        assert_eq!(report["global_limit"]["limit"], 50);
    }
}
