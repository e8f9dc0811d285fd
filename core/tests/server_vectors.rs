//! Cross-language vectors for the server-side limiters: `tests/vectors/server_*.json`.
//!
//! The scenarios (configs and steps) are written here; their expectations come from running
//! the reference implementation. Two tests per file:
//!
//! - `*_vectors_are_fresh`: rebuilds the file from the scenarios below and fails when the
//!   checked-in one differs; `RATELANE_BLESS=1 cargo test -p ratelane --test server_vectors`
//!   rewrites it instead.
//! - `*_vectors_replay`: reads only configs and steps from the checked-in file, replays them
//!   and compares every expectation: what every binding does with the same file. (When
//!   blessing, it writes the file first.)
//!
//! File format (documented in each file's `_comment` too): times in as integer milliseconds
//! (`at_ms`, `*_ms` config fields), times out as integer nanoseconds (`*_ns`) and whole
//! seconds (`*_s`).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;

use ratelane::server::{
    Algorithm, Decision, FixedWindow, FixedWindowStore, Gcra, GcraStore, InsufficientCapacity,
    LeakyBucket, LeakyBucketStore, LegacyLimit, Scheduled, Store,
};
use ratelane::{Error, MILLISECOND, Nanos};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Reading a case: config and steps only.

fn ms(v: &Value, field: &str) -> Option<Nanos> {
    v.get(field).and_then(Value::as_u64).map(|ms| ms * MILLISECOND)
}

fn count(v: &Value, field: &str) -> u32 {
    let n =
        v.get(field).and_then(Value::as_u64).unwrap_or_else(|| panic!("{field} missing in {v}"));
    u32::try_from(n).expect("a u32")
}

fn max_keys(config: &Value) -> usize {
    config["max_keys"].as_u64().expect("max_keys") as usize
}

fn gcra_from(config: &Value) -> Result<GcraStore, Error> {
    let gcra = match config.get("quota") {
        Some(_) => {
            Gcra::per_window(count(config, "quota"), ms(config, "window_ms").expect("window_ms"))?
        }
        None => Gcra::new(ms(config, "interval_ms").expect("interval_ms"), count(config, "burst"))?,
    };
    Store::new(gcra, max_keys(config))
}

fn leaky_from(config: &Value) -> Result<LeakyBucketStore, Error> {
    let bucket = match config.get("legacy") {
        Some(legacy) => LeakyBucket::from_legacy(LegacyLimit {
            max: legacy.get("max").and_then(Value::as_u64).map(|n| n as u32),
            duration: ms(legacy, "duration_ms"),
            min_interval: ms(legacy, "min_interval_ms"),
        })?,
        None => {
            let bucket = LeakyBucket::new(
                count(config, "size"),
                ms(config, "drip_rate_ms").expect("drip_rate_ms"),
                count(config, "drip_size"),
            )?;
            match ms(config, "min_interval_ms") {
                Some(min_interval) => bucket.with_min_interval(min_interval)?,
                None => bucket,
            }
        }
    };
    Store::new(bucket, max_keys(config))
}

fn fixed_from(config: &Value) -> Result<FixedWindowStore, Error> {
    let window =
        FixedWindow::new(count(config, "quota"), ms(config, "window_ms").expect("window_ms"))?;
    Store::new(window, max_keys(config))
}

// ---------------------------------------------------------------------------------------------
// Writing an outcome.

fn headers(pairs: Vec<(&'static str, String)>) -> Value {
    pairs.into_iter().map(|(name, value)| json!([name, value])).collect()
}

fn decision(d: &Decision, policy: &str) -> Value {
    json!({
        "allowed": d.allowed,
        "limit": d.limit,
        "remaining": d.remaining,
        "reset_after_ns": d.reset_after,
        "clear_after_ns": d.clear_after,
        "replenish_after_ns": d.replenish_after,
        "window_ns": d.window,
        "retry_after_s": d.retry_after_secs(),
        "x_ratelimit_headers": headers(d.x_ratelimit_headers()),
        "ietf_headers": headers(d.ietf_headers(policy)),
    })
}

fn scheduled(s: &Scheduled) -> Value {
    json!({ "run_now": s.run_now, "release_at_ns": s.release_at, "waiting": s.waiting })
}

fn error(e: &Error) -> Value {
    json!({ "error": e.code() })
}

fn config_error(e: Error) -> String {
    e.code().to_string()
}

/// Adds the store's observable size after a step.
fn with_store<A: Algorithm>(mut outcome: Value, store: &Store<A>) -> Value {
    outcome["store_len"] = json!(store.len());
    outcome["untracked"] = json!(store.untracked());
    outcome
}

// ---------------------------------------------------------------------------------------------
// Running a case: the same code fills the expectations when generating and checks them when
// replaying.

/// The outcome of every step of `case`, from the implementation, or the code of the error
/// its config raises.
fn run(algorithm: &str, case: &Value) -> Result<Vec<Value>, String> {
    let config = &case["config"];
    let policy = config["policy"].as_str().expect("policy");
    let steps = case["steps"].as_array().expect("steps");
    let at = |step: &Value| ms(step, "at_ms").expect("at_ms");
    let key = |step: &Value| step["key"].as_str().expect("key").to_string();
    let op = |step: &Value| step["op"].as_str().expect("op").to_string();
    Ok(match algorithm {
        "gcra" => {
            let mut store = gcra_from(config).map_err(config_error)?;
            let mut run_step = |step: &Value| {
                assert_eq!(op(step), "check");
                let outcome = match step.get("n").and_then(Value::as_u64) {
                    None => match store.check(&key(step), at(step)) {
                        Ok(d) => decision(&d, policy),
                        Err(e) => error(&e),
                    },
                    Some(n) => match store.check_n(&key(step), at(step), n as u32) {
                        Ok(Ok(d)) => decision(&d, policy),
                        Ok(Err(e)) => json!({
                            "error": InsufficientCapacity::CODE,
                            "requested": e.requested,
                            "capacity": e.capacity,
                        }),
                        Err(e) => error(&e),
                    },
                };
                with_store(outcome, &store)
            };
            steps.iter().map(&mut run_step).collect()
        }
        "leaky_bucket" => {
            let mut store = leaky_from(config).map_err(config_error)?;
            let mut run_step = |step: &Value| {
                assert_eq!(op(step), "check");
                let outcome = match step.get("factor").and_then(Value::as_f64) {
                    None => decision(&store.check(&key(step), at(step)), policy),
                    Some(f) => match store.check_scaled(&key(step), at(step), f) {
                        Ok(d) => decision(&d, policy),
                        Err(e) => error(&e),
                    },
                };
                with_store(outcome, &store)
            };
            steps.iter().map(&mut run_step).collect()
        }
        "fixed_window" => {
            let mut store = fixed_from(config).map_err(config_error)?;
            let mut run_step = |step: &Value| {
                let (k, now) = (key(step), at(step));
                let outcome = match op(step).as_str() {
                    "check" => decision(&store.check(&k, now), policy),
                    "schedule" => match store.schedule(&k, now) {
                        Ok(s) => scheduled(&s),
                        Err(e) => error(&e),
                    },
                    "release" => json!({ "released": store.release(&k, now) }),
                    other => panic!("unknown op {other}"),
                };
                with_store(outcome, &store)
            };
            steps.iter().map(&mut run_step).collect()
        }
        other => panic!("unknown algorithm {other}"),
    })
}

/// `case` with its expectations filled in: `expect` on each step, or `expect_error` on the
/// case when the config is rejected.
fn fill(algorithm: &str, mut case: Value) -> Value {
    match run(algorithm, &case) {
        Err(code) => {
            case["expect_error"] = json!(code);
            case["steps"] = json!([]);
        }
        Ok(outcomes) => {
            let steps = case["steps"].as_array_mut().expect("steps");
            for (step, outcome) in steps.iter_mut().zip(outcomes) {
                step["expect"] = outcome;
            }
        }
    }
    case
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

/// A step: `op` on `key` at `at_ms`, plus extra fields.
fn step(at_ms: u64, op: &str, key: &str, extra: Value) -> Value {
    let mut s = json!({ "at_ms": at_ms, "op": op, "key": key });
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            s[k] = v;
        }
    }
    s
}

fn check(at_ms: u64, key: &str) -> Value {
    step(at_ms, "check", key, json!({}))
}

/// `check` steps on one key.
fn checks(key: &str, times_ms: &[u64]) -> Vec<Value> {
    times_ms.iter().map(|&at_ms| check(at_ms, key)).collect()
}

fn case(name: &str, config: Value, steps: Vec<Value>) -> Value {
    json!({ "name": name, "config": config, "steps": steps })
}

fn gcra_cases() -> Vec<Value> {
    let cfg = |interval_ms: u64, burst: u32, max_keys: usize| json!({ "interval_ms": interval_ms, "burst": burst, "max_keys": max_keys, "policy": "default" });
    let n = |at_ms, key, n: u32| step(at_ms, "check", key, json!({ "n": n }));
    vec![
        case(
            "burst of 3 to the boundary, then one interval",
            cfg(100, 3, 100),
            checks("a", &[0, 0, 0, 0, 99, 100, 100]),
        ),
        case(
            "refill after a burst: two intervals give two cells",
            cfg(250, 4, 100),
            checks("a", &[0, 0, 0, 0, 500, 500, 500, 1000, 3000]),
        ),
        case(
            "check_n: weights, a weight above the burst, and a peek",
            cfg(1000, 5, 100),
            vec![
                n(0, "a", 6),
                n(0, "a", 5),
                n(0, "a", 1),
                n(2000, "a", 3),
                n(2000, "a", 2),
                n(2500, "a", 0),
                n(9000, "a", 0),
            ],
        ),
        case(
            "quota per window: 3 per second",
            json!({ "quota": 3, "window_ms": 1000, "max_keys": 100, "policy": "3-per-second" }),
            checks("a", &[0, 0, 0, 0, 333, 334]),
        ),
        case(
            "sub-second window in the policy: w rounds up to 1",
            cfg(50, 2, 100),
            checks("a", &[0, 0, 0, 20]),
        ),
        case(
            "keys are independent and expire once empty",
            cfg(1000, 2, 100),
            vec![
                check(0, "a"),
                check(0, "b"),
                check(0, "c"),
                check(0, "c"),
                check(0, "c"),
                check(1500, "d"),
                check(1500, "d"),
                check(2500, "e"),
                check(2500, "e"),
                check(2500, "c"),
                check(9000, "f"),
                check(9000, "f"),
            ],
        ),
        case(
            "a full store answers new keys without storing them",
            cfg(1000, 1, 2),
            vec![
                check(0, "a"),
                check(0, "b"),
                check(0, "c"),
                check(0, "c"),
                check(500, "a"),
                check(1000, "c"),
                check(1000, "c"),
            ],
        ),
        case("zero burst is a configuration error", cfg(100, 0, 100), vec![]),
        case("zero interval is a configuration error", cfg(0, 1, 100), vec![]),
    ]
}

fn leaky_cases() -> Vec<Value> {
    let cfg = |size: u32, drip_rate_ms: u64, drip_size: u32| json!({ "size": size, "drip_rate_ms": drip_rate_ms, "drip_size": drip_size, "max_keys": 100, "policy": "bucket" });
    let legacy = |legacy: Value| json!({ "legacy": legacy, "max_keys": 100, "policy": "legacy" });
    let scaled = |at_ms, key, factor: f64| step(at_ms, "check", key, json!({ "factor": factor }));
    vec![
        case(
            "bucket of 3 dripping 1 per second",
            cfg(3, 1000, 1),
            checks("u", &[0, 0, 200, 200, 999, 1000, 1000, 5000]),
        ),
        case(
            "drip size 2 every 500 ms",
            cfg(4, 500, 2),
            checks("u", &[0, 0, 0, 0, 100, 500, 500, 500, 1999]),
        ),
        case(
            "factor shrinks the bucket of one subject",
            cfg(10, 1000, 1),
            vec![
                scaled(0, "suspect", 0.3),
                scaled(0, "suspect", 0.3),
                scaled(0, "suspect", 0.3),
                scaled(0, "suspect", 0.3),
                check(0, "normal"),
                scaled(1000, "suspect", 0.3),
            ],
        ),
        case(
            "over-filled bucket after the factor shrinks: the delay grows",
            cfg(10, 1000, 1),
            [
                checks("u", &[0; 8]),
                vec![scaled(100, "u", 0.5), scaled(3999, "u", 0.5), scaled(4000, "u", 0.5)],
            ]
            .concat(),
        ),
        case(
            "invalid factors are configuration errors and change nothing",
            cfg(2, 1000, 1),
            vec![scaled(0, "u", 0.0), scaled(0, "u", 1.5), check(0, "u")],
        ),
        case(
            "legacy max 5 per 10 s",
            legacy(json!({ "max": 5, "duration_ms": 10000 })),
            checks("u", &[0, 0, 0, 0, 0, 0, 1999, 2000, 2000]),
        ),
        case(
            "legacy max 3 per 10 s: the drip rounds up, so the third drip falls after 10 s",
            legacy(json!({ "max": 3, "duration_ms": 10000 })),
            checks("u", &[0, 0, 0, 0, 3334, 6667, 6668, 10000, 10001]),
        ),
        case(
            "legacy max 10 per 60 s with a 1 s minimum interval (two buckets)",
            legacy(json!({ "max": 10, "duration_ms": 60000, "min_interval_ms": 1000 })),
            checks("u", &[0, 500, 1000, 1999, 2000, 70000]),
        ),
        case(
            "legacy minimum interval alone",
            legacy(json!({ "min_interval_ms": 2000 })),
            checks("u", &[0, 1000, 2000, 4500]),
        ),
        case(
            "keys expire once their bucket is empty",
            cfg(2, 1000, 1),
            vec![
                check(0, "a"),
                check(0, "b"),
                check(0, "b"),
                check(1000, "c"),
                check(2000, "c"),
                check(2000, "d"),
                check(5000, "e"),
            ],
        ),
        case(
            "legacy max without duration is a configuration error",
            legacy(json!({ "max": 5 })),
            vec![],
        ),
        case("zero drip rate is a configuration error", cfg(3, 0, 1), vec![]),
    ]
}

fn fixed_cases() -> Vec<Value> {
    let cfg = |quota: u32, window_ms: u64| json!({ "quota": quota, "window_ms": window_ms, "max_keys": 100, "policy": "window" });
    let schedule = |at_ms, key| step(at_ms, "schedule", key, json!({}));
    let release = |at_ms, key| step(at_ms, "release", key, json!({}));
    vec![
        case(
            "server checks: the window opens with the first request",
            cfg(2, 10000),
            checks("ip", &[3000, 4000, 5000, 12999, 13000, 30000]),
        ),
        case(
            "10 role updates per 10 s: delay estimates for 25 waiting jobs",
            cfg(10, 10000),
            (0..35).map(|_| schedule(3000, "guild")).collect(),
        ),
        case(
            "delayed jobs released on time; newcomers queue behind them",
            cfg(2, 1000),
            vec![
                schedule(0, "g"),
                schedule(0, "g"),
                schedule(100, "g"),
                schedule(200, "g"),
                schedule(300, "g"),
                release(1000, "g"),
                release(1000, "g"),
                schedule(1000, "g"),
                check(1500, "g"),
                release(2000, "g"),
                schedule(2100, "g"),
                release(3000, "g"),
                release(3000, "g"),
            ],
        ),
        case(
            "a newcomer at the release time, before the release, does not take the slot",
            cfg(1, 1000),
            vec![
                schedule(0, "g"),
                schedule(500, "g"),
                schedule(1000, "g"),
                release(1000, "g"),
                release(2000, "g"),
                release(2000, "g"),
            ],
        ),
        case(
            "groups expire once their windows are over and their jobs released",
            cfg(1, 1000),
            vec![
                schedule(0, "a"),
                schedule(0, "a"),
                schedule(0, "b"),
                check(500, "c"),
                check(1500, "d"),
                release(1500, "a"),
                check(2500, "e"),
                check(2500, "e"),
                check(4000, "f"),
            ],
        ),
        case("zero quota is a configuration error", cfg(0, 1000), vec![]),
    ]
}

// ---------------------------------------------------------------------------------------------
// Files.

const COMMENT: &str = "Generated by core/tests/server_vectors.rs from the reference implementation; \
do not edit (RATELANE_BLESS=1 cargo test -p ratelane --test server_vectors rewrites it). Each case builds one \
keyed store from `config` (durations in integer milliseconds: *_ms) and runs `steps` in order, one store \
call per step at `at_ms` milliseconds (convert to nanoseconds: x 1,000,000). `expect` holds every output: \
decisions with durations in nanoseconds (*_ns) and whole seconds (*_s), the rendered headers as \
[name, value] pairs in order (IETF ones with `config.policy` as the policy name), and the store's \
`store_len` and `untracked` counters after the step. A case whose config is rejected has \
`expect_error` (the Error code) and no steps.";

fn vectors(algorithm: &str, ops: &str, cases: Vec<Value>) -> Value {
    json!({
        "_comment": format!("{COMMENT} Ops: {ops}"),
        "algorithm": algorithm,
        "cases": cases.into_iter().map(|c| fill(algorithm, c)).collect::<Vec<_>>(),
    })
}

fn generated(algorithm: &str) -> Value {
    match algorithm {
        "gcra" => vectors(
            "gcra",
            "check (GcraStore::check, or check_n when `n` is given; n > burst gives error \
             insufficient_capacity with requested and capacity).",
            gcra_cases(),
        ),
        "leaky_bucket" => vectors(
            "leaky_bucket",
            "check (LeakyBucketStore::check, or check_scaled when `factor` is given). Config: size, \
             drip_rate_ms, drip_size, optional min_interval_ms, or legacy {max, duration_ms, min_interval_ms}.",
            leaky_cases(),
        ),
        _ => vectors(
            "fixed_window",
            "check (FixedWindowStore::check), schedule (FixedWindowStore::schedule: run_now, \
             release_at_ns absolute, waiting), release (FixedWindowStore::release: released).",
            fixed_cases(),
        ),
    }
}

fn path(algorithm: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../tests/vectors/server_{algorithm}.json"))
}

/// Pretty enough to review: one line per step.
fn render(file: &Value) -> String {
    let mut out = String::from("{\n");
    for field in ["_comment", "algorithm"] {
        writeln!(out, "  {}: {},", json!(field), file[field]).unwrap();
    }
    out.push_str("  \"cases\": [\n");
    let cases = file["cases"].as_array().expect("cases");
    for (i, case) in cases.iter().enumerate() {
        write!(out, "    {{\"name\": {}, \"config\": {}", case["name"], case["config"]).unwrap();
        if let Some(code) = case.get("expect_error") {
            write!(out, ", \"expect_error\": {code}").unwrap();
        }
        out.push_str(", \"steps\": [");
        let steps = case["steps"].as_array().expect("steps");
        for (j, step) in steps.iter().enumerate() {
            // Inputs first, then `expect`.
            let mut inputs = step.clone();
            let expect = inputs.as_object_mut().expect("a step is an object").remove("expect");
            let inputs = inputs.to_string();
            let line = match expect {
                Some(expect) => format!("{}, \"expect\": {expect}}}", &inputs[..inputs.len() - 1]),
                None => inputs,
            };
            write!(out, "\n      {line}{}", if j + 1 < steps.len() { "," } else { "\n    " })
                .unwrap();
        }
        writeln!(out, "]}}{}", if i + 1 < cases.len() { "," } else { "" }).unwrap();
    }
    out.push_str("  ]\n}\n");
    out
}

/// Serialises the file accesses of the tests, which run on parallel threads.
static FILES: Mutex<()> = Mutex::new(());

fn blessing() -> bool {
    std::env::var("RATELANE_BLESS").as_deref() == Ok("1")
}

/// The file as the scenarios and the implementation produce it now.
fn expected_text(algorithm: &str) -> String {
    let expected = generated(algorithm);
    let text = render(&expected);
    assert_eq!(serde_json::from_str::<Value>(&text).expect("rendered JSON parses"), expected);
    text
}

fn assert_fresh(algorithm: &str) {
    let text = expected_text(algorithm);
    let path = path(algorithm);
    let _files = FILES.lock().unwrap_or_else(|e| e.into_inner());
    if blessing() {
        std::fs::write(&path, text).expect("write vectors");
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == text,
        "{} is stale or missing: the implementation or the scenarios in core/tests/server_vectors.rs \
         changed. Review the change, then run `RATELANE_BLESS=1 cargo test -p ratelane --test \
         server_vectors` to rewrite it.",
        path.display()
    );
}

/// Replays the checked-in file from its own configs and steps, as a binding would.
fn replay(algorithm: &str) {
    let path = path(algorithm);
    let text = {
        let _files = FILES.lock().unwrap_or_else(|e| e.into_inner());
        if blessing() {
            std::fs::write(&path, expected_text(algorithm)).expect("write vectors");
        }
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let file: Value = serde_json::from_str(&text).expect("vectors are JSON");
    assert_eq!(file["algorithm"], algorithm);
    let mut steps_run = 0;
    for case in file["cases"].as_array().expect("cases") {
        let name = &case["name"];
        let outcomes = run(algorithm, case);
        if let Some(code) = case.get("expect_error") {
            assert_eq!(outcomes.err().as_deref(), code.as_str(), "case {name}");
            continue;
        }
        let outcomes = outcomes.unwrap_or_else(|code| panic!("case {name}: config error {code}"));
        let steps = case["steps"].as_array().expect("steps");
        assert_eq!(outcomes.len(), steps.len(), "case {name}");
        for (i, (step, outcome)) in steps.iter().zip(&outcomes).enumerate() {
            assert_eq!(&step["expect"], outcome, "case {name}, step {i}: {step}");
            steps_run += 1;
        }
    }
    assert!(steps_run > 20, "{} holds only {steps_run} steps", path.display());
}

#[test]
fn gcra_vectors_are_fresh() {
    assert_fresh("gcra");
}

#[test]
fn gcra_vectors_replay() {
    replay("gcra");
}

#[test]
fn leaky_bucket_vectors_are_fresh() {
    assert_fresh("leaky_bucket");
}

#[test]
fn leaky_bucket_vectors_replay() {
    replay("leaky_bucket");
}

#[test]
fn fixed_window_vectors_are_fresh() {
    assert_fresh("fixed_window");
}

#[test]
fn fixed_window_vectors_replay() {
    replay("fixed_window");
}
