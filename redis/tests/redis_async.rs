//! The async twins (feature `aio`) against a real Redis: the same answers as the blocking
//! calls, step for step, on a tokio `MultiplexedConnection`.
//!
//! * every `tests/vectors/store_*.json` replayed through `reserve_at_async` / `record_at_async`;
//! * each server-side limiter driven through the same steps twice, once blocking and once
//!   async, on two fresh keys: equal decisions, schedules and releases;
//! * the Redis-clock forms and the `NOSCRIPT` fallback (after `SCRIPT FLUSH`).

#![cfg(feature = "aio")]

mod support;

use std::path::PathBuf;

use ratelane::server::{FixedWindow, Gcra, LeakyBucket};
use ratelane::shared::SharedConfig;
use ratelane::{MILLISECOND, Nanos, SECOND};
use ratelane_redis::{RedisFixedWindow, RedisGcra, RedisLeakyBucket, RedisStore};
use serde_json::Value;

#[path = "../../core/tests/support/shared_json.rs"]
mod shared_json;
use shared_json::{answer_json, reservation_from, update_from};

const MS: Nanos = MILLISECOND;

async fn async_connection() -> redis::aio::MultiplexedConnection {
    let url = std::env::var("RATELANE_REDIS_URL")
        .expect("RATELANE_REDIS_URL (scripts/tests.d/40-redis.sh sets it)");
    let client = redis::Client::open(url.as_str()).expect("a valid RATELANE_REDIS_URL");
    client
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

fn store_vectors() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/vectors")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("store_") && n.ends_with(".json"))
        })
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
async fn store_vectors_replay_through_the_async_calls() {
    let mut sync = support::connection();
    let mut con = async_connection().await;
    let files = store_vectors();
    assert!(files.len() >= 6, "found {}", files.len());
    let mut steps = 0;
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let vector: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        let c = &vector["config"];
        let mut config = SharedConfig::default();
        config.lease = c["lease_ns"].as_u64().expect("lease_ns");
        config.pioneer_poll = c["pioneer_poll_ns"].as_u64().expect("pioneer_poll_ns");
        config.state_ttl = c["state_ttl_ns"].as_u64().expect("state_ttl_ns");
        let prefix = format!("{{{}}}", support::unique_prefix(&mut sync, "store-async"));
        let store = RedisStore::new(prefix, &config).expect("store");
        for (i, step) in vector["steps"].as_array().expect("steps").iter().enumerate() {
            let at = step["at_ns"].as_u64().expect("at_ns");
            let client = step["client"].as_str().expect("client");
            match step["op"].as_str().expect("op") {
                "reserve" => {
                    let r = reservation_from(&step["reservation"]);
                    let answer =
                        store.reserve_at_async(&mut con, at, client, &r).await.expect("reserve");
                    assert_eq!(answer_json(&answer), step["answer"], "{name} step {i}");
                }
                "record" => {
                    let u = update_from(&step["update"]);
                    store.record_at_async(&mut con, at, client, &u).await.expect("record");
                }
                other => panic!("{name} step {i}: unknown op {other}"),
            }
            steps += 1;
        }
    }
    println!("{steps} store vector steps replayed through the async calls");
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
async fn server_limiters_answer_the_same_blocking_and_async() {
    let mut sync = support::connection();
    let mut con = async_connection().await;
    let prefix = support::unique_prefix(&mut sync, "server-async");
    let (a, b) = (format!("{prefix}blocking"), format!("{prefix}async"));
    // Steps 37 ms apart: each limiter admits some, refuses some and refills within the run.
    let times: Vec<Nanos> = (0..40).map(|i| 1_000 * SECOND + i * 37 * MS).collect();

    let gcra =
        RedisGcra::new(Gcra::per_window(5, SECOND).unwrap()).unwrap().with_min_ttl_ms(60_000);
    let leaky = RedisLeakyBucket::new(LeakyBucket::new(4, 250 * MS, 1).unwrap())
        .unwrap()
        .with_min_ttl_ms(60_000);
    let fixed = RedisFixedWindow::new(FixedWindow::new(3, 500 * MS).unwrap())
        .unwrap()
        .with_min_ttl_ms(60_000);
    let (mut refused, mut delayed) = (0, 0);
    for (i, &now) in times.iter().enumerate() {
        let n = (i % 3) as u32; // weight 0 is a peek
        let blocking = gcra.check_n_at(&mut sync, &format!("{a}:gcra"), n, now).unwrap();
        let asynced = gcra.check_n_at_async(&mut con, &format!("{b}:gcra"), n, now).await.unwrap();
        assert_eq!(blocking, asynced, "gcra step {i}");
        refused += usize::from(!blocking.allowed);

        let factor = if i % 4 == 0 { 0.5 } else { 1.0 };
        let blocking =
            leaky.check_scaled_at(&mut sync, &format!("{a}:leaky"), factor, now).unwrap();
        let asynced = leaky
            .check_scaled_at_async(&mut con, &format!("{b}:leaky"), factor, now)
            .await
            .unwrap();
        assert_eq!(blocking, asynced, "leaky bucket step {i}");
        let blocking = leaky.check_at(&mut sync, &format!("{a}:leaky"), now).unwrap();
        let asynced = leaky.check_at_async(&mut con, &format!("{b}:leaky"), now).await.unwrap();
        assert_eq!(blocking, asynced, "leaky bucket step {i} (unscaled)");

        let blocking = fixed.check_at(&mut sync, &format!("{a}:fixed"), now).unwrap();
        let asynced = fixed.check_at_async(&mut con, &format!("{b}:fixed"), now).await.unwrap();
        assert_eq!(blocking, asynced, "fixed window check, step {i}");
        let blocking = fixed.schedule_at(&mut sync, &format!("{a}:jobs"), now).unwrap();
        let asynced = fixed.schedule_at_async(&mut con, &format!("{b}:jobs"), now).await.unwrap();
        assert_eq!(blocking, asynced, "fixed window schedule, step {i}");
        delayed += usize::from(!blocking.run_now);
        if i % 2 == 1 {
            let blocking = fixed.release_at(&mut sync, &format!("{a}:jobs"), now).unwrap();
            let asynced =
                fixed.release_at_async(&mut con, &format!("{b}:jobs"), now).await.unwrap();
            assert_eq!(blocking, asynced, "fixed window release, step {i}");
        }
    }
    assert!(
        refused > 0 && delayed > 0,
        "the steps must exercise refusals ({refused}) and delays ({delayed})"
    );
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
async fn redis_clock_forms_and_noscript_fallback() {
    let mut sync = support::connection();
    let mut con = async_connection().await;
    let prefix = support::unique_prefix(&mut sync, "clock-async");
    // A fresh server (or a failover) has no script cached: EVALSHA fails with NOSCRIPT and the
    // call falls back to EVAL, once.
    let () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut con).await.expect("SCRIPT FLUSH");

    let gcra = RedisGcra::new(Gcra::per_window(2, 10 * SECOND).unwrap()).unwrap();
    let key = format!("{prefix}gcra");
    let answers: Vec<bool> = [
        gcra.check_async(&mut con, &key).await.unwrap().allowed,
        gcra.check_n_async(&mut con, &key, 1).await.unwrap().allowed,
        gcra.check_async(&mut con, &key).await.unwrap().allowed,
    ]
    .into();
    assert_eq!(answers, [true, true, false]);
    assert_eq!(
        gcra.check_n_async(&mut con, &key, 3).await.unwrap_err().code(),
        "insufficient_capacity"
    );

    let leaky = RedisLeakyBucket::new(LeakyBucket::new(1, 10 * SECOND, 1).unwrap()).unwrap();
    let key = format!("{prefix}leaky");
    assert!(leaky.check_async(&mut con, &key).await.unwrap().allowed);
    assert!(!leaky.check_scaled_async(&mut con, &key, 1.0).await.unwrap().allowed);

    let fixed = RedisFixedWindow::new(FixedWindow::new(1, 10 * SECOND).unwrap()).unwrap();
    let key = format!("{prefix}fixed");
    assert!(fixed.check_async(&mut con, &key).await.unwrap().allowed);
    let (first, _) = fixed.schedule_async(&mut con, &format!("{key}:jobs")).await.unwrap();
    let (second, now) = fixed.schedule_async(&mut con, &format!("{key}:jobs")).await.unwrap();
    assert!(
        first.run_now && !second.run_now && second.release_at > now,
        "{first:?} {second:?} at {now}"
    );
    assert!(fixed.release_async(&mut con, &format!("{key}:jobs")).await.unwrap());

    let mut config = SharedConfig::default();
    config.lease = SECOND;
    let store = RedisStore::new(format!("{{{prefix}store}}:"), &config).unwrap();
    let vector: Value = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/store_pioneers.json"),
        )
        .expect("store_pioneers.json"),
    )
    .expect("json");
    let first = reservation_from(&vector["steps"][0]["reservation"]);
    assert_eq!(
        answer_json(&store.reserve_async(&mut con, "a", &first).await.unwrap())["answer"],
        "granted"
    );
    let other = store.reserve_async(&mut con, "b", &first).await.unwrap();
    assert_eq!(answer_json(&other)["scope"], "pioneer", "{other:?}");
    let report = update_from(&vector["steps"][2]["update"]);
    store.record_async(&mut con, "a", &report).await.unwrap();
    assert_eq!(
        answer_json(&store.reserve_async(&mut con, "b", &first).await.unwrap())["answer"],
        "granted"
    );
    assert_eq!(
        store.reserve_async(&mut con, "", &first).await.unwrap_err().code(),
        "invalid_config"
    );
}
