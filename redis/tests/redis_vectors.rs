//! Replays every case of `tests/vectors/server_*.json` against Redis, through the scripts,
//! and compares each step with the file's `expect`, as every binding will.
//!
//! Times come from the file (`at_ms`) through the scripts' `now_ns` argument, so virtual time
//! runs much faster than real time; keys get a minimum TTL of a minute so that none expires
//! in real time in the middle of a case (the scripts treat a state that has emptied in
//! virtual time as empty, which is what the file expects).
//!
//! What applies to Redis and what does not:
//!
//! - Every decision field, `retry_after_s`, both header lists, `Scheduled` and `released` are
//!   compared with `expect` exactly.
//! - `store_len` and `untracked` are counters of the in-memory `Store` (its lazy sweep and its
//!   `max_keys` bound); Redis has neither. What they stand for is asserted instead: after each
//!   step the step's key exists in Redis exactly when the core's store holds it, that is,
//!   when the key's state is not empty (the scripts delete a key the moment it is empty).
//! - `max_keys`: a step the in-memory store answered from a state it could not store (its
//!   `untracked` counter grew) is answered by Redis, which has no such bound, like a store with
//!   room. That step is compared with an unbounded in-memory store instead of `expect`. Every
//!   step is also compared with that unbounded store.

mod support;

use std::path::PathBuf;

use ratelane::server::{
    Decision, FixedWindow, FixedWindowStore, Gcra, GcraStore, InsufficientCapacity, LeakyBucket,
    LeakyBucketStore, LegacyLimit, Scheduled, Store,
};
use ratelane::{MILLISECOND, Nanos};
use ratelane_redis::{Error, RedisFixedWindow, RedisGcra, RedisLeakyBucket};
use serde_json::{Value, json};

/// Keys of the unbounded in-memory stores that shadow Redis.
const UNBOUNDED: usize = 1 << 20;
/// No key expires in real time during a replay.
const MIN_TTL_MS: u64 = 60_000;

fn ms(v: &Value, field: &str) -> Option<Nanos> {
    v.get(field).and_then(Value::as_u64).map(|ms| ms * MILLISECOND)
}

fn count(v: &Value, field: &str) -> u32 {
    let n = v.get(field).and_then(Value::as_u64).unwrap_or_else(|| panic!("{field} in {v}"));
    u32::try_from(n).expect("a u32")
}

fn gcra_from(config: &Value) -> Result<Gcra, ratelane::Error> {
    match config.get("quota") {
        Some(_) => Gcra::per_window(count(config, "quota"), ms(config, "window_ms").unwrap()),
        None => Gcra::new(ms(config, "interval_ms").unwrap(), count(config, "burst")),
    }
}

fn leaky_from(config: &Value) -> Result<LeakyBucket, ratelane::Error> {
    match config.get("legacy") {
        Some(legacy) => LeakyBucket::from_legacy(LegacyLimit {
            max: legacy.get("max").and_then(Value::as_u64).map(|n| n as u32),
            duration: ms(legacy, "duration_ms"),
            min_interval: ms(legacy, "min_interval_ms"),
        }),
        None => {
            let bucket = LeakyBucket::new(
                count(config, "size"),
                ms(config, "drip_rate_ms").unwrap(),
                count(config, "drip_size"),
            )?;
            match ms(config, "min_interval_ms") {
                Some(min_interval) => bucket.with_min_interval(min_interval),
                None => Ok(bucket),
            }
        }
    }
}

fn fixed_from(config: &Value) -> Result<FixedWindow, ratelane::Error> {
    FixedWindow::new(count(config, "quota"), ms(config, "window_ms").unwrap())
}

// The outcome of a step, in the file's layout (the headers rendered by the core's `Decision`).

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

fn insufficient(e: &InsufficientCapacity) -> Value {
    json!({ "error": InsufficientCapacity::CODE, "requested": e.requested, "capacity": e.capacity })
}

/// A Redis error that the file expects as an outcome, or a failed test.
fn expected_error(e: Error) -> Value {
    match e {
        Error::InsufficientCapacity(e) => insufficient(&e),
        Error::InvalidConfig(_) | Error::InvalidRequest(_) => json!({ "error": e.code() }),
        other => panic!("Redis failed: {other} ({})", other.code()),
    }
}

/// One step against Redis and against the unbounded in-memory store.
struct Step {
    redis: Value,
    memory: Value,
    /// Whether the in-memory store holds the key after the step.
    memory_holds_key: bool,
    /// Whether the key exists in Redis after the step.
    redis_holds_key: bool,
}

/// Runs a case's steps on Redis (keys under `prefix`) and on an unbounded store, or returns
/// the config's error code.
fn run(
    algorithm: &str,
    case: &Value,
    con: &mut redis::Connection,
    prefix: &str,
) -> Result<Vec<Step>, String> {
    let config = &case["config"];
    let policy = config["policy"].as_str().expect("policy");
    let steps = case["steps"].as_array().expect("steps");
    let code = |e: ratelane::Error| e.code().to_string();
    let at = |step: &Value| ms(step, "at_ms").expect("at_ms");
    let key = |step: &Value| step["key"].as_str().expect("key").to_string();
    let op = |step: &Value| step["op"].as_str().expect("op").to_string();
    let mut out = Vec::new();
    match algorithm {
        "gcra" => {
            let gcra = gcra_from(config).map_err(code)?;
            let limiter = RedisGcra::new(gcra).expect("in range").with_min_ttl_ms(MIN_TTL_MS);
            let mut store: GcraStore = Store::new(gcra, UNBOUNDED).unwrap();
            for step in steps {
                assert_eq!(op(step), "check");
                let (k, now) = (key(step), at(step));
                let redis_key = format!("{prefix}{k}");
                let (redis, memory) = match step.get("n").and_then(Value::as_u64) {
                    None => (
                        limiter.check_at(con, &redis_key, now).map(|d| decision(&d, policy)),
                        match store.check(&k, now) {
                            Ok(d) => decision(&d, policy),
                            Err(e) => json!({ "error": e.code() }),
                        },
                    ),
                    Some(n) => (
                        limiter
                            .check_n_at(con, &redis_key, n as u32, now)
                            .map(|d| decision(&d, policy)),
                        match store.check_n(&k, now, n as u32) {
                            Ok(Ok(d)) => decision(&d, policy),
                            Ok(Err(e)) => insufficient(&e),
                            Err(e) => json!({ "error": e.code() }),
                        },
                    ),
                };
                let redis = redis.unwrap_or_else(expected_error);
                out.push(Step {
                    redis,
                    memory,
                    memory_holds_key: store.state(&k).is_some(),
                    redis_holds_key: support::exists(con, &redis_key),
                });
            }
        }
        "leaky_bucket" => {
            let bucket = leaky_from(config).map_err(code)?;
            let limiter =
                RedisLeakyBucket::new(bucket).expect("in range").with_min_ttl_ms(MIN_TTL_MS);
            let mut store: LeakyBucketStore = Store::new(bucket, UNBOUNDED).unwrap();
            for step in steps {
                assert_eq!(op(step), "check");
                let (k, now) = (key(step), at(step));
                let redis_key = format!("{prefix}{k}");
                let (redis, memory) = match step.get("factor").and_then(Value::as_f64) {
                    None => (
                        limiter.check_at(con, &redis_key, now).map(|d| decision(&d, policy)),
                        decision(&store.check(&k, now), policy),
                    ),
                    Some(f) => (
                        limiter
                            .check_scaled_at(con, &redis_key, f, now)
                            .map(|d| decision(&d, policy)),
                        match store.check_scaled(&k, now, f) {
                            Ok(d) => decision(&d, policy),
                            Err(e) => json!({ "error": e.code() }),
                        },
                    ),
                };
                let redis = redis.unwrap_or_else(expected_error);
                out.push(Step {
                    redis,
                    memory,
                    memory_holds_key: store.state(&k).is_some(),
                    redis_holds_key: support::exists(con, &redis_key),
                });
            }
        }
        "fixed_window" => {
            let window = fixed_from(config).map_err(code)?;
            let limiter =
                RedisFixedWindow::new(window).expect("in range").with_min_ttl_ms(MIN_TTL_MS);
            let mut store: FixedWindowStore = Store::new(window, UNBOUNDED).unwrap();
            for step in steps {
                let (k, now) = (key(step), at(step));
                let redis_key = format!("{prefix}{k}");
                let (redis, memory) = match op(step).as_str() {
                    "check" => (
                        limiter.check_at(con, &redis_key, now).map(|d| decision(&d, policy)),
                        decision(&store.check(&k, now), policy),
                    ),
                    "schedule" => (
                        limiter.schedule_at(con, &redis_key, now).map(|s| scheduled(&s)),
                        match store.schedule(&k, now) {
                            Ok(s) => scheduled(&s),
                            Err(e) => json!({ "error": e.code() }),
                        },
                    ),
                    "release" => (
                        limiter.release_at(con, &redis_key, now).map(|r| json!({ "released": r })),
                        json!({ "released": store.release(&k, now) }),
                    ),
                    other => panic!("unknown op {other}"),
                };
                let redis = redis.unwrap_or_else(expected_error);
                out.push(Step {
                    redis,
                    memory,
                    memory_holds_key: store.state(&k).is_some(),
                    redis_holds_key: support::exists(con, &redis_key),
                });
            }
        }
        other => panic!("unknown algorithm {other}"),
    }
    Ok(out)
}

/// `expect` without the in-memory store's counters.
fn without_store_counters(expect: &Value) -> Value {
    let mut expect = expect.clone();
    if let Some(fields) = expect.as_object_mut() {
        fields.remove("store_len");
        fields.remove("untracked");
    }
    expect
}

fn replay(algorithm: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../tests/vectors/server_{algorithm}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: Value = serde_json::from_str(&text).expect("vectors are JSON");
    assert_eq!(file["algorithm"], algorithm);
    let mut con = support::connection();
    let (mut cases, mut steps_run, mut against_memory) = (0, 0, 0);
    for (index, case) in file["cases"].as_array().expect("cases").iter().enumerate() {
        let name = &case["name"];
        let prefix = support::unique_prefix(&mut con, &format!("vectors:{algorithm}:{index}"));
        let outcomes = run(algorithm, case, &mut con, &prefix);
        cases += 1;
        if let Some(code) = case.get("expect_error") {
            assert_eq!(outcomes.err().as_deref(), code.as_str(), "case {name}");
            continue;
        }
        let outcomes = outcomes.unwrap_or_else(|code| panic!("case {name}: config error {code}"));
        let steps = case["steps"].as_array().expect("steps");
        assert_eq!(outcomes.len(), steps.len(), "case {name}");
        let mut untracked = 0;
        for (i, (step, outcome)) in steps.iter().zip(&outcomes).enumerate() {
            let expect = &step["expect"];
            let context = format!("{algorithm} case {name}, step {i}: {step}");
            assert_eq!(outcome.redis, outcome.memory, "Redis vs unbounded store, {context}");
            let grew = expect["untracked"].as_u64().expect("untracked") > untracked;
            untracked = expect["untracked"].as_u64().unwrap();
            if grew {
                // Answered from a state the bounded store could not keep: see the module docs.
                against_memory += 1;
            } else {
                assert_eq!(outcome.redis, without_store_counters(expect), "{context}");
            }
            assert_eq!(
                outcome.redis_holds_key, outcome.memory_holds_key,
                "the key exists in Redis exactly when its state is not empty, {context}"
            );
            steps_run += 1;
        }
    }
    assert!(steps_run > 20, "{} holds only {steps_run} steps", path.display());
    println!(
        "{algorithm}: {cases} cases, {steps_run} steps replayed against Redis \
         ({against_memory} compared with an unbounded store, see the module docs)"
    );
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn gcra_vectors_replay_in_redis() {
    replay("gcra");
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn leaky_bucket_vectors_replay_in_redis() {
    replay("leaky_bucket");
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn fixed_window_vectors_replay_in_redis() {
    replay("fixed_window");
}
