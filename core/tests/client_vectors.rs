//! Shared vectors for the client-side engine: `tests/vectors/client_*.json`.

//!
//! Each scenario below is a script of timed inputs. Running it through the reference
//! implementation fills in the exact outputs; the result is the vector file that every binding
//! replays. Two tests:
//!
//! * `vectors_are_fresh`: regenerates every file in memory and fails if a checked-in file
//!   differs (set `RATELANE_BLESS=1` to rewrite them after an intended behaviour change);
//! * `vectors_replay`: reads the checked-in files alone (config, inputs, expected outputs) and
//!   replays them, the way the Python, Node and wasm bindings do.
//!
//! The format is documented in `tests/vectors/README.md`.
#![allow(clippy::identity_op)] // scenario times read better as `1 * S`


use ratelane::shared::{OnUnavailable, SharedConfig};
use ratelane::{
    BodyHints, Config, Disposition, Failure, HeaderProfile, Limiter, Observation, Output, QueryCost,
    Request, Response,
};
use ratelane::snapshot::Snapshot;
use serde_json::{Value, json};

#[path = "support/shared_json.rs"]
mod shared_json;
#[path = "support/vector_files.rs"]
mod vector_files;
use vector_files::{check_fresh, pretty, vectors_dir};

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;


// ---------------------------------------------------------------- config <-> JSON

fn profile_name(p: HeaderProfile) -> &'static str {
    p.as_str()
}

fn profile_from(name: &str) -> HeaderProfile {
    HeaderProfile::from_name(name).unwrap_or_else(|| panic!("unknown profile {name}"))
}

/// The body hints of a `response` step: `retry_after`, `global`, `cost` (an object of
/// `requested`, `actual`, `maximum_available`, `currently_available`, `restore_rate`, each
/// optional) and `errors` (strings), each optional.
fn body_from(body: &Value) -> BodyHints {
    let cost = body.get("cost").filter(|c| c.is_object()).map(|c| {
        let f = |k: &str| c.get(k).and_then(Value::as_f64);
        QueryCost {
            requested: f("requested"),
            actual: f("actual"),
            maximum_available: f("maximum_available"),
            currently_available: f("currently_available"),
            restore_rate: f("restore_rate"),
        }
    });
    BodyHints {
        retry_after: body.get("retry_after").and_then(Value::as_f64),
        global: body.get("global").and_then(Value::as_bool),
        cost,
        errors: body
            .get("errors")
            .and_then(Value::as_array)
            .map(|es| es.iter().map(|e| e.as_str().expect("errors are strings").to_string()).collect())
            .unwrap_or_default(),
        usage: body
            .get("usage")
            .and_then(Value::as_object)
            .map(|u| u.iter().map(|(k, v)| (k.clone(), v.as_f64().expect("usage values are numbers"))).collect())
            .unwrap_or_default(),
    }
}

fn config_json(c: &Config) -> Value {
    let mut v = json!({
        "profile": profile_name(c.profile),
        "global_limit": c.global_limit,
        "global_window_ns": c.global_window,
        "global_margin_max_ns": c.global_margin_max,
        "max_wait_ns": c.max_wait,
        "max_rate_limit_retries": c.max_rate_limit_retries,
        "max_error_retries": c.max_error_retries,
        "backoff_base_ns": c.backoff_base,
        "backoff_max_ns": c.backoff_max,
        "min_rate_limit_wait_ns": c.min_rate_limit_wait,
        "max_server_wait_ns": c.max_server_wait,
        "invalid_request_limit": c.invalid_request_limit,
        "invalid_request_window_ns": c.invalid_request_window,
        "invalid_request_stop_at": c.invalid_request_stop_at,
        "invalid_request_warn_at": c.invalid_request_warn_at,
        "edge_backoff_base_ns": c.edge_backoff_base,
        "edge_backoff_max_ns": c.edge_backoff_max,
        "stop_on_unauthorized": c.stop_on_unauthorized,
        "jitter_seed": c.jitter_seed,
        "max_routes": c.max_routes,
        "bucket_idle_ttl_ns": c.bucket_idle_ttl,
    });
    // defer_after appears only when set, so the files of the other scenarios keep their form.
    if let Some(d) = c.defer_after {
        v["defer_after_ns"] = json!(d);
    }
    // Route groups appear only when they differ from the profile's (as in `ratelane::json`).
    if c.route_groups != Config::for_profile(c.profile).route_groups {
        v["route_groups"] = json!(c.route_groups);
    }
    // Shared mode only appears when it is on, so the files of the other scenarios keep their form.
    if let Some(sh) = &c.shared {
        v["shared"] = json!({
            "on_unavailable": sh.on_unavailable.as_str(),
            "retry_base_ns": sh.retry_base,
            "retry_max_ns": sh.retry_max,
            "lease_ns": sh.lease,
            "pioneer_poll_ns": sh.pioneer_poll,
            "state_ttl_ns": sh.state_ttl,
            "global_lease": sh.global_lease,
        });
    }
    v
}

fn shared_from(v: &Value) -> Option<SharedConfig> {
    if v.is_null() {
        return None;
    }
    let u = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("config.shared.{k} missing"));
    let mut sh = SharedConfig::default();
    sh.on_unavailable = match v["on_unavailable"].as_str().expect("on_unavailable") {
        "fail_open" => OnUnavailable::FailOpen,
        "fail_closed" => OnUnavailable::FailClosed,
        other => panic!("unknown on_unavailable {other}"),
    };
    sh.retry_base = u("retry_base_ns");
    sh.retry_max = u("retry_max_ns");
    sh.lease = u("lease_ns");
    sh.pioneer_poll = u("pioneer_poll_ns");
    sh.state_ttl = u("state_ttl_ns");
    sh.global_lease = v["global_lease"].as_bool().unwrap_or(true);
    Some(sh)
}

fn config_from(v: &Value) -> Config {
    let u = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("config.{k} missing"));
    let mut c = Config::for_profile(profile_from(v["profile"].as_str().expect("profile")));
    if let Some(groups) = v.get("route_groups") {
        c.route_groups = serde_json::from_value(groups.clone()).expect("route_groups: lists of route keys");
    }
    c.global_limit = u("global_limit") as u32;
    c.global_window = u("global_window_ns");
    c.global_margin_max = u("global_margin_max_ns");
    c.max_wait = v["max_wait_ns"].as_u64();
    c.defer_after = v.get("defer_after_ns").and_then(Value::as_u64);
    c.max_rate_limit_retries = u("max_rate_limit_retries") as u32;
    c.max_error_retries = u("max_error_retries") as u32;
    c.backoff_base = u("backoff_base_ns");
    c.backoff_max = u("backoff_max_ns");
    c.min_rate_limit_wait = u("min_rate_limit_wait_ns");
    c.max_server_wait = u("max_server_wait_ns");
    c.invalid_request_limit = u("invalid_request_limit") as u32;
    c.invalid_request_window = u("invalid_request_window_ns");
    c.invalid_request_stop_at = u("invalid_request_stop_at") as u32;
    c.invalid_request_warn_at = u("invalid_request_warn_at") as u32;
    c.edge_backoff_base = u("edge_backoff_base_ns");
    c.edge_backoff_max = u("edge_backoff_max_ns");
    c.stop_on_unauthorized = v["stop_on_unauthorized"].as_bool().expect("stop_on_unauthorized");
    c.jitter_seed = u("jitter_seed");
    c.max_routes = u("max_routes") as usize;
    c.bucket_idle_ttl = u("bucket_idle_ttl_ns");
    c.shared = shared_from(v.get("shared").unwrap_or(&Value::Null));
    c
}

// ---------------------------------------------------------------- running a script

fn request_from(v: &Value) -> Request {
    let mut r = Request::new(
        v["method"].as_str().expect("method"),
        v["path"].as_str().expect("path"),
    );
    if let Some(m) = v.get("major").and_then(Value::as_str) {
        r.major = Some(m.to_string());
    }
    if let Some(i) = v.get("identity").and_then(Value::as_str) {
        r.identity = i.to_string();
    }
    r.deadline = v.get("deadline_ns").and_then(Value::as_u64);
    r.defer_after = v.get("defer_after_ns").and_then(Value::as_u64);
    r.priority = v.get("priority").and_then(Value::as_i64).unwrap_or(0) as i32;
    r.idempotent = v.get("idempotent").and_then(Value::as_bool);
    r.global_exempt = v.get("global_exempt").and_then(Value::as_bool);
    r.sub_limit = v.get("sub_limit").and_then(Value::as_str).map(str::to_string);
    if let Some(keys) = v.get("body_keys").and_then(Value::as_array) {
        r.body_keys = keys.iter().map(|k| k.as_str().expect("body_keys are strings").to_string()).collect();
    }
    r.model = v.get("model").and_then(Value::as_str).map(str::to_string);
    if let Some(costs) = v.get("costs").and_then(Value::as_object) {
        r.costs = costs.iter().map(|(k, c)| (k.clone(), c.as_u64().expect("costs are whole numbers"))).collect();
    }
    r
}

fn output_json(o: &Output) -> Value {
    match o {
        Output::Send(id) => json!({"send": id}),
        Output::Fail(id, reason) => {
            let mut v = json!({"fail": id, "code": reason.code()});
            match reason {
                ratelane::FailReason::DeadlineExceeded { predicted_send_at } => {
                    v["predicted_send_at_ns"] = json!(predicted_send_at)
                }
                ratelane::FailReason::MaxWaitExceeded { predicted_wait } => {
                    v["predicted_wait_ns"] = json!(predicted_wait)
                }
                ratelane::FailReason::Deferred { retry_at } => v["retry_at_ns"] = json!(retry_at),
                ratelane::FailReason::InsufficientCapacity { dimension, cost, limit } => {
                    v["dimension"] = json!(dimension);
                    v["cost"] = json!(cost);
                    v["limit"] = json!(limit);
                }
                ratelane::FailReason::RetriesExhausted { attempts }
                | ratelane::FailReason::NetworkError { attempts } => {
                    v["attempts"] = json!(attempts)
                }
                _ => {}
            }
            v
        }
        Output::Observe(Observation::RateLimited { id, scope, retry_after }) => json!({
            "observe": "rate_limited", "id": id, "scope": scope.as_str(), "retry_after_ns": retry_after
        }),
        Output::Observe(Observation::BucketLearned { route, bucket }) => json!({
            "observe": "bucket_learned", "route": route, "bucket": bucket
        }),
        Output::Observe(Observation::InvalidRequestWarning { count, limit }) => json!({
            "observe": "invalid_request_warning", "count": count, "limit": limit
        }),
        Output::Observe(Observation::StoreUnavailable { id, retry_at }) => json!({
            "observe": "store_unavailable", "id": id, "retry_at_ns": retry_at
        }),
        Output::Observe(Observation::StoreRecovered) => json!({"observe": "store_recovered"}),
        Output::Reserve(r) => {
            // The reservation's own form, its `id` named `reserve`.
            let mut v = shared_json::reservation_json(r);
            let fields = v.as_object_mut().expect("an object");
            let id = fields.remove("id").expect("id");
            let mut out = serde_json::Map::from_iter([("reserve".to_string(), id)]);
            out.extend(std::mem::take(fields));
            Value::Object(out)
        }
        Output::Share(u) => shared_json::update_json(u),
        Output::WaitUntil(t) => json!({"wait_until_ns": t}),
        Output::Idle => json!({"idle": true}),
    }
}

fn drain(l: &mut Limiter) -> Vec<Value> {
    let mut out = Vec::new();
    for _ in 0..100_000 {
        let o = l.poll_output();
        let end = matches!(o, Output::WaitUntil(_) | Output::Idle);
        out.push(output_json(&o));
        if end {
            return out;
        }
    }
    panic!("poll_output never drained");
}

fn disposition_name(d: Disposition) -> &'static str {
    match d {
        Disposition::Complete => "complete",
        Disposition::Retry => "retry",
        Disposition::Failed => "failed",
    }
}

/// Runs one scenario's steps; returns the steps with `result` and `outputs` filled in.
///
/// `snapshot` is a getter (nothing drained); `restart` replaces the limiter with a new one of
/// the same config (a restarted process); `restore` reads the step's `snapshot` (any JSON
/// value, given as its text) and restores it.
fn run_steps(config: &Config, steps: &[Value]) -> Vec<Value> {
    let mut l = Limiter::new(config.clone()).expect("valid config");
    let mut done = Vec::new();
    let mut last_snapshot: Option<Value> = None;
    for step in steps {
        let mut step = step.clone();
        if step["snapshot"] == json!(LAST_SNAPSHOT) {
            step["snapshot"] = last_snapshot.clone().expect("a snapshot step before the restore");
        }
        let step = &step;
        let at = step["at_ns"].as_u64().expect("at_ns");
        let op = step["op"].as_str().expect("op");
        let result: Value = match op {
            "enqueue" => match l.enqueue(at, request_from(&step["request"])) {
                Ok(id) => json!({"id": id}),
                Err(e) => json!({"error": e.code()}),
            },
            "response" => {
                let owned: Vec<(String, String)> = step["headers"]
                    .as_array()
                    .map(|hs| {
                        hs.iter()
                            .map(|h| {
                                (h[0].as_str().unwrap().to_string(), h[1].as_str().unwrap().to_string())
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let headers: Vec<(&str, &str)> =
                    owned.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
                let body = step.get("body").cloned().unwrap_or(Value::Null);
                let response = Response {
                    status: step["status"].as_u64().expect("status") as u16,
                    headers: &headers,
                    body: body_from(&body),
                    wall_clock_ms: step.get("wall_clock_ms").and_then(Value::as_u64),
                };
                match l.handle_response(at, step["id"].as_u64().expect("id"), &response) {
                    Ok(d) => json!({"disposition": disposition_name(d)}),
                    Err(e) => json!({"error": e.code()}),
                }
            }
            "failure" => {
                let failure = match step["failure"].as_str().expect("failure") {
                    "not_sent" => Failure::NotSent,
                    "maybe_sent" => Failure::MaybeSent,
                    other => panic!("unknown failure {other}"),
                };
                match l.handle_failure(at, step["id"].as_u64().expect("id"), failure) {
                    Ok(d) => json!({"disposition": disposition_name(d)}),
                    Err(e) => json!({"error": e.code()}),
                }
            }
            "written" => match l.handle_written(at, step["id"].as_u64().expect("id")) {
                Ok(()) => json!({"ok": true}),
                Err(e) => json!({"error": e.code()}),
            },
            "cancel" => match l.cancel(at, step["id"].as_u64().expect("id")) {
                Ok(()) => json!({"ok": true}),
                Err(e) => json!({"error": e.code()}),
            },
            "timeout" => {
                l.handle_timeout(at);
                json!({"ok": true})
            }
            "close" => {
                l.close(at);
                json!({"ok": true})
            }
            "predict" => match l.predict(at, &request_from(&step["request"])) {
                Ok(p) => json!({"send_at_ns": p.send_at}),
                Err(e) => json!({"error": e.code()}),
            },
            "reservation" => match l.handle_reservation(at, step["id"].as_u64().expect("id"), shared_json::answer_from(step)) {
                Ok(()) => json!({"ok": true}),
                Err(e) => json!({"error": e.code()}),
            },
            "snapshot" => {
                let wall = step["wall_clock_ms"].as_u64().expect("wall_clock_ms");
                let text = l.snapshot(at, wall).to_json();
                let snapshot: Value = serde_json::from_str(&text).expect("snapshot JSON");
                last_snapshot = Some(snapshot.clone());
                json!({"snapshot": snapshot})
            }
            "restart" => {
                l = Limiter::new(config.clone()).expect("valid config");
                json!({"ok": true})
            }
            "restore" => {
                let wall = step["wall_clock_ms"].as_u64().expect("wall_clock_ms");
                let text = step["snapshot"].to_string();
                match Snapshot::from_json(&text).and_then(|snap| l.restore(at, wall, &snap)) {
                    Ok(()) => json!({"ok": true}),
                    Err(e) => json!({"error": e.code()}),
                }
            }
            other => panic!("unknown op {other}"),
        };
        let mut s = step.clone();
        s["result"] = result;
        let getter = op == "predict" || op == "snapshot";
        s["outputs"] = Value::Array(if getter { Vec::new() } else { drain(&mut l) });
        s["queued"] = json!(l.queued());
        s["in_flight"] = json!(l.in_flight());
        if config.shared.is_some() {
            s["reserving"] = json!(l.reserving());
        }
        done.push(s);
    }
    done
}

// ---------------------------------------------------------------- scenario building

/// Stands for "the last snapshot taken" in a script's `restore` step until the script runs.
const LAST_SNAPSHOT: &str = "<the last snapshot>";

struct Script {
    steps: Vec<Value>,
}

impl Script {
    fn new() -> Self {
        Script { steps: Vec::new() }
    }
    fn enqueue(mut self, at: u64, method: &str, path: &str) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "enqueue", "request": {"method": method, "path": path}}));
        self
    }
    fn enqueue_with(mut self, at: u64, request: Value) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "enqueue", "request": request}));
        self
    }
    fn respond(mut self, at: u64, id: u64, status: u16, headers: &[(&str, &str)]) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "response", "id": id, "status": status, "headers": headers}));
        self
    }
    fn respond_body(mut self, at: u64, id: u64, status: u16, headers: &[(&str, &str)], body: Value) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "response", "id": id, "status": status, "headers": headers, "body": body}));
        self
    }
    fn respond_wall(mut self, at: u64, id: u64, status: u16, headers: &[(&str, &str)], wall_ms: u64) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "response", "id": id, "status": status, "headers": headers, "wall_clock_ms": wall_ms}));
        self
    }
    fn respond_body_wall(mut self, at: u64, id: u64, status: u16, headers: &[(&str, &str)], body: Value, wall_ms: u64) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "response", "id": id, "status": status, "headers": headers, "body": body, "wall_clock_ms": wall_ms}));
        self
    }
    fn fail(mut self, at: u64, id: u64, failure: &str) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "failure", "id": id, "failure": failure}));
        self
    }
    fn written(mut self, at: u64, id: u64) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "written", "id": id}));
        self
    }
    fn cancel(mut self, at: u64, id: u64) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "cancel", "id": id}));
        self
    }
    fn timeout(mut self, at: u64) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "timeout"}));
        self
    }
    fn close(mut self, at: u64) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "close"}));
        self
    }
    fn predict(mut self, at: u64, method: &str, path: &str) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "predict", "request": {"method": method, "path": path}}));
        self
    }
    fn predict_with(mut self, at: u64, request: Value) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "predict", "request": request}));
        self
    }
    fn snapshot(mut self, at: u64, wall_ms: u64) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "snapshot", "wall_clock_ms": wall_ms}));
        self
    }
    fn restart(mut self, at: u64) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "restart"}));
        self
    }
    /// Restores `snapshot`, or (when it is `None`) what the script's last `snapshot` step
    /// returns, filled in when the script runs (see [`render`]).
    fn restore(mut self, at: u64, wall_ms: u64, snapshot: Option<Value>) -> Self {
        let snapshot = snapshot.unwrap_or(Value::String(LAST_SNAPSHOT.to_string()));
        self.steps.push(json!({"at_ns": at, "op": "restore", "wall_clock_ms": wall_ms, "snapshot": snapshot}));
        self
    }
    fn granted(mut self, at: u64, id: u64) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "reservation", "id": id, "answer": "granted"}));
        self
    }
    /// A grant with the store's live-process count.
    fn granted_processes(mut self, at: u64, id: u64, processes: u32) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "reservation", "id": id, "answer": "granted", "processes": processes}));
        self
    }
    /// A grant with a global lease of `leased` tokens beyond the request's own.
    fn granted_leased(mut self, at: u64, id: u64, leased: u32) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "reservation", "id": id, "answer": "granted", "processes": 1, "leased": leased}));
        self
    }
    /// A grant that says the store's clock (`store_time_ns`, whole microseconds).
    fn granted_at_store(mut self, at: u64, id: u64, store_time: u64) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "reservation", "id": id, "answer": "granted", "processes": 1,
            "store_time_ns": store_time}));
        self
    }
    fn unavailable(mut self, at: u64, id: u64) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "reservation", "id": id, "answer": "unavailable"}));
        self
    }
    fn denied(mut self, at: u64, id: u64, retry_after: u64, scope: &str) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "reservation", "id": id, "answer": "denied",
            "retry_after_ns": retry_after, "scope": scope}));
        self
    }
}

/// Discord bucket headers for a success.
fn discord(limit: u32, remaining: u32, reset_after: &str, bucket: &str) -> Vec<(String, String)> {
    vec![
        ("X-RateLimit-Limit".into(), limit.to_string()),
        ("X-RateLimit-Remaining".into(), remaining.to_string()),
        ("X-RateLimit-Reset-After".into(), reset_after.into()),
        ("X-RateLimit-Bucket".into(), bucket.into()),
    ]
}

fn refs(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect()
}

struct Case {
    file: &'static str,
    comment: &'static str,
    config: Config,
    script: Script,
}

fn discord_config() -> Config {
    Config::default()
}

fn cases() -> Vec<Case> {
    include!("support/client_cases.rs")
}

fn render(case: &Case) -> Value {
    let steps = run_steps(&case.config, &case.script.steps);
    json!({
        "_comment": case.comment,
        "kind": "client",
        "config": config_json(&case.config),
        "steps": steps,
    })
}

#[test]
fn vectors_are_fresh() {
    let cases = cases();
    let files = cases.iter().map(|case| (case.file, pretty(&render(case)))).collect();
    check_fresh("client_", files, "vector", "client_vectors");
}

#[test]
fn vectors_replay() {
    let mut count = 0;
    for entry in std::fs::read_dir(vectors_dir()).expect("tests/vectors") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("client_") && name.ends_with(".json")) {
            continue;
        }
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(file["_comment"].as_str().is_some_and(|c| !c.is_empty()), "{name}: _comment");
        let config = config_from(&file["config"]);
        let expected = file["steps"].as_array().expect("steps");
        let inputs: Vec<Value> = expected
            .iter()
            .map(|s| {
                let mut s = s.clone();
                let o = s.as_object_mut().unwrap();
                o.remove("result");
                o.remove("outputs");
                o.remove("queued");
                o.remove("in_flight");
                o.remove("reserving");
                s
            })
            .collect();
        let actual = run_steps(&config, &inputs);
        for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
            assert_eq!(a, e, "{name}: step {i} differs");
        }
        count += 1;
    }
    assert!(count > 0, "no client vectors found");
}
