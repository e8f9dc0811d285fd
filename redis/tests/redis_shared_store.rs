//! `scripts/shared_store.lua` (the shared-mode store, [`RedisStore`]) against a real Redis:
//!
//! * every `tests/vectors/store_*.json` replayed through the script: the same answers and the
//!   same number of live keys as the reference model (`MemoryStore`) recorded;
//! * Redis against `MemoryStore` on random sequences of operations from three clients
//!   (bounded: 24 sequences of at most 60 steps, or `PROPTEST_CASES`);
//! * the core's multi-process simulation (several limiters, one simulated Discord, a store
//!   reached with latency and outages) driven against Redis instead of `MemoryStore`;
//! * with Redis's own clock: keys carry TTLs and disappear by themselves; one round trip per
//!   call; argument errors are `redis_server` errors that change nothing.
//!
//! Replays use a virtual clock (`reserve_at`/`record_at`): the script then keeps expiry times in
//! its `~expiry` index instead of real TTLs, and a key counts as live while its time there is
//! later than now.

mod support;

use std::cell::RefCell;
use std::path::PathBuf;

use proptest::prelude::*;
use proptest::test_runner::{Config as PropConfig, TestRunner};
use ratelane::shared::{
    MemoryStore, OnUnavailable, Reservation, ReservationAnswer, SharedConfig, SharedScope, SharedStore,
    SharedUpdate,
};
use ratelane::sim::{
    BucketSpec, Report, RouteSpec, Server, ServerConfig, ServerOutcome, SimConfig, Simulation, StopReason,
    StoreLink,
};
use ratelane::{Config, Limiter, MILLISECOND, Nanos, Observation, Request, SECOND};
use ratelane_redis::{RedisStore, StoreOp, StoreReply};
use serde_json::Value;

#[path = "../../core/tests/support/shared_json.rs"]
mod shared_json;
use shared_json::{answer_json, reservation_from, update_from};

const MS: Nanos = MILLISECOND;

fn vectors() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/vectors")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("store_") && n.ends_with(".json")))
        .collect();
    files.sort();
    files
}

fn config_from(v: &Value) -> SharedConfig {
    let mut c = SharedConfig::default();
    c.lease = v["lease_ns"].as_u64().expect("lease_ns");
    c.pioneer_poll = v["pioneer_poll_ns"].as_u64().expect("pioneer_poll_ns");
    c.state_ttl = v["state_ttl_ns"].as_u64().expect("state_ttl_ns");
    c
}

/// `pattern` with glob metacharacters escaped (for `SCAN MATCH`).
fn glob_escape(s: &str) -> String {
    s.chars().flat_map(|c| if "*?[]\\".contains(c) { vec!['\\', c] } else { vec![c] }).collect()
}

/// The namespace's live keys at virtual time `now` (ns): every key under `prefix` but the
/// script's expiry index, whose expiry in that index is later than now (microseconds).
fn live_keys(con: &mut redis::Connection, prefix: &str, now: Nanos) -> usize {
    let index = format!("{prefix}~expiry");
    let mut cursor: u64 = 0;
    let mut keys = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{}*", glob_escape(prefix)))
            .arg("COUNT")
            .arg(1000)
            .query(con)
            .expect("SCAN");
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    keys.sort();
    keys.dedup();
    let now_us = now / 1000;
    keys.iter()
        .filter(|k| **k != index)
        .filter(|k| {
            let score: Option<f64> = redis::cmd("ZSCORE").arg(&index).arg(k.as_str()).query(con).expect("ZSCORE");
            // A key without an expiry in virtual mode would be a script bug: count it.
            score.is_none_or(|s| s > now_us as f64)
        })
        .count()
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn store_vectors_replay_in_redis() {
    let files = vectors();
    assert!(files.len() >= 5, "found {}", files.len());
    let mut con = support::connection();
    let mut steps_run = 0;
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let vector: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        assert_eq!(vector["kind"], "store");
        let prefix = format!("{{{}}}", support::unique_prefix(&mut con, "store-vectors"));
        let store = RedisStore::new(prefix.clone(), &config_from(&vector["config"])).expect("store");
        for (i, step) in vector["steps"].as_array().expect("steps").iter().enumerate() {
            let at = step["at_ns"].as_u64().expect("at_ns");
            let client = step["client"].as_str().expect("client");
            let where_ = format!("{name} step {i} ({} at {at} ns)", step["op"]);
            match step["op"].as_str().expect("op") {
                "reserve" => {
                    let answer = store
                        .reserve_at(&mut con, at, client, &reservation_from(&step["reservation"]))
                        .unwrap_or_else(|e| panic!("{where_}: {e}"));
                    assert_eq!(answer_json(&answer), step["answer"], "{where_}: answer");
                }
                "record" => store
                    .record_at(&mut con, at, client, &update_from(&step["update"]))
                    .unwrap_or_else(|e| panic!("{where_}: {e}")),
                other => panic!("{where_}: unknown op {other}"),
            }
            let keys = step["keys"].as_u64().expect("keys") as usize;
            assert_eq!(live_keys(&mut con, &prefix, at), keys, "{where_}: live keys");
            steps_run += 1;
        }
    }
    println!("{steps_run} store vector steps replayed in Redis");
}

// ---------------------------------------------------------------------------------------------
// Redis against MemoryStore on random sequences
// ---------------------------------------------------------------------------------------------

const CASES: u32 = 24;

#[derive(Debug, Clone)]
enum Op {
    Reserve(Reservation),
    Record(SharedUpdate),
}

#[derive(Debug, Clone)]
struct Step {
    /// Time since the previous step, whole microseconds (the script's resolution).
    advance: Nanos,
    client: usize,
    op: Op,
}

const CLIENTS: [&str; 3] = ["a", "b", "c"];
const ROUTES: [&str; 2] = ["POST /channels/:id/messages", "GET /guilds/:id"];
const MAJORS: [&str; 2] = ["1", "2"];
const HASHES: [&str; 2] = ["h1", "h2"];

fn us(range: std::ops::Range<u64>) -> impl Strategy<Value = Nanos> {
    range.prop_map(|v| v * 1000)
}

fn opt_hash() -> BoxedStrategy<Option<String>> {
    prop_oneof![Just(None), (0..HASHES.len()).prop_map(|i| Some(HASHES[i].to_string()))].boxed()
}

fn reservation() -> impl Strategy<Value = Reservation> {
    (
        (1..6u64, 0..ROUTES.len(), 0..MAJORS.len(), opt_hash()),
        (prop::bool::weighted(0.8), 0..4u32, us(100_000..1_500_000), us(0..100_000)),
        (0..4u32, us(500_000..5_000_000), prop_oneof![3 => Just(1u32), 1 => 0..6u32]),
        // After an outage: the count since, reporting, and the reports (ages in whole us).
        (opt(us(0..3_000_000)), prop::bool::weighted(0.2), ages(), ages()),
    )
        .prop_map(|((id, route, major, bucket), (counts_global, global_limit, global_window, margin), (il, iw, global_want), (since, reporting, unrecorded, granted))| {
            Reservation {
                id,
                identity: "bot".into(),
                route: ROUTES[route].into(),
                major: MAJORS[major].into(),
                bucket,
                counts_global,
                global_limit,
                global_want,
                global_window,
                margin,
                invalid_limit: il,
                invalid_window: iw,
                processes_since: since,
                reporting,
                unrecorded,
                granted,
            }
        })
}

/// Ages of a report after an outage: mostly none.
fn ages() -> BoxedStrategy<Vec<Nanos>> {
    prop_oneof![3 => Just(Vec::new()), 1 => prop::collection::vec(us(0..2_500_000), 1..5)].boxed()
}

fn opt<T: std::fmt::Debug + Clone + 'static>(s: impl Strategy<Value = T> + 'static) -> BoxedStrategy<Option<T>> {
    prop_oneof![1 => Just(None), 3 => s.prop_map(Some)].boxed()
}

fn update() -> impl Strategy<Value = SharedUpdate> {
    let place = (1..6u64, 0..ROUTES.len(), 0..MAJORS.len(), opt_hash());
    prop_oneof![
        4 => (place.clone(), prop::bool::weighted(0.1), opt(1..6u32), opt(0..5u32), opt(us(0..3_000_000)), opt(us(0..3_000_000)))
            .prop_map(|((id, r, m, bucket), unlimited, limit, remaining, reset_after, window)| SharedUpdate::Bucket {
                id,
                identity: "bot".into(),
                route: ROUTES[r].into(),
                major: MAJORS[m].into(),
                bucket,
                unlimited,
                limit,
                remaining,
                reset_after,
                window,
            }),
        2 => (place.clone(), any::<bool>(), opt(us(0..3_000_000))).prop_map(|((id, r, m, bucket), reached, window)| {
            SharedUpdate::Release {
                id,
                identity: "bot".into(),
                route: ROUTES[r].into(),
                major: MAJORS[m].into(),
                bucket,
                reached,
                window,
            }
        }),
        1 => (place, 0..6usize, us(0..2_000_000)).prop_map(|((_, r, m, bucket), scope, retry_after)| {
            let scopes = [SharedScope::Edge, SharedScope::Global, SharedScope::Route, SharedScope::Bucket,
                          SharedScope::Invalid, SharedScope::Pioneer];
            SharedUpdate::Hold {
                scope: scopes[scope],
                identity: "bot".into(),
                route: ROUTES[r].into(),
                major: MAJORS[m].into(),
                bucket,
                retry_after,
            }
        }),
        1 => (1..6u64, us(0..3_000_000)).prop_map(|(id, window)| SharedUpdate::Invalid { id, window }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop_oneof![Just(0u64), us(0..1_000), us(0..300_000), us(0..3_000_000)],
        0..CLIENTS.len(),
        prop_oneof![3 => reservation().prop_map(Op::Reserve), 2 => update().prop_map(Op::Record)],
    )
        .prop_map(|(advance, client, op)| Step { advance, client, op })
}

fn store_config() -> impl Strategy<Value = SharedConfig> {
    (us(200_000..3_000_000), us(1_000..200_000), us(500_000..6_000_000)).prop_map(|(lease, poll, ttl)| {
        let mut c = SharedConfig::default();
        c.lease = lease;
        c.pioneer_poll = poll.min(lease);
        c.state_ttl = ttl;
        c
    })
}

/// A property runner of `PROPTEST_CASES` cases (default [`CASES`]).
fn runner() -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(CASES);
    TestRunner::new(PropConfig { cases, ..PropConfig::default() })
}

/// A batch's items as the store takes them.
fn store_ops(ops: &[Op]) -> Vec<StoreOp<'_>> {
    ops.iter()
        .map(|op| match op {
            Op::Reserve(r) => StoreOp::Reserve(r),
            Op::Record(u) => StoreOp::Record(u),
        })
        .collect()
}

/// Random batches of up to `max - 1` operations, three reservations to two records.
fn batch(max: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(prop_oneof![3 => reservation().prop_map(Op::Reserve), 2 => update().prop_map(Op::Record)], 1..max)
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn redis_store_equals_memory_store_on_random_sequences() {
    let con = RefCell::new(support::connection());
    let mut runner = runner();
    let epochs = [0u64, 1_732_364_823_000_000_000];
    runner
        .run(
            &(store_config(), 0..epochs.len(), prop::collection::vec(step(), 1..60)),
            |(config, epoch, steps)| {
                let mut con = con.borrow_mut();
                let prefix = format!("{{{}}}", support::unique_prefix(&mut con, "store-props"));
                let redis_store = RedisStore::new(prefix.clone(), &config).expect("store");
                let mut memory = MemoryStore::new(&config);
                let mut now = epochs[epoch];
                for (i, s) in steps.iter().enumerate() {
                    now += s.advance;
                    let client = CLIENTS[s.client];
                    match &s.op {
                        Op::Reserve(r) => {
                            let got = redis_store.reserve_at(&mut con, now, client, r).expect("reserve");
                            let want = memory.reserve(now, client, r);
                            prop_assert_eq!(got, want, "step {}: {:?}", i, s);
                        }
                        Op::Record(u) => {
                            redis_store.record_at(&mut con, now, client, u).expect("record");
                            memory.record(now, client, u);
                        }
                    }
                    prop_assert_eq!(live_keys(&mut con, &prefix, now), memory.keys(now), "keys after step {}: {:?}", i, s);
                }
                Ok(())
            },
        )
        .unwrap();
}

/// A batch is one script call: on random batches from three clients, every item answers what
/// the model answers to the same operations one at a time at that moment, and the state after
/// is the same (live keys).
#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn redis_batches_equal_memory_store_one_operation_at_a_time() {
    let con = RefCell::new(support::connection());
    let mut runner = runner();
    let calls = prop::collection::vec((prop_oneof![Just(0u64), us(0..300_000), us(0..3_000_000)], 0..CLIENTS.len(), batch(12)), 1..20);
    runner
        .run(&(store_config(), calls), |(config, calls)| {
            let mut con = con.borrow_mut();
            let prefix = format!("{{{}}}", support::unique_prefix(&mut con, "store-batch"));
            let redis_store = RedisStore::new(prefix.clone(), &config).expect("store");
            let mut memory = MemoryStore::new(&config);
            let mut now = 1_732_364_823_000_000_000u64;
            for (i, (advance, client, ops)) in calls.iter().enumerate() {
                now += advance;
                let client = CLIENTS[*client];
                let items = store_ops(ops);
                let got = redis_store.batch_at(&mut con, now, client, &items).expect("batch");
                prop_assert_eq!(got.len(), ops.len());
                for (j, (op, got)) in ops.iter().zip(got).enumerate() {
                    let got = got.expect("every item is well-formed");
                    match op {
                        Op::Reserve(r) => {
                            let want = memory.reserve(now, client, r);
                            prop_assert_eq!(got, StoreReply::Answer(want), "call {} item {}: {:?}", i, j, op);
                        }
                        Op::Record(u) => {
                            memory.record(now, client, u);
                            prop_assert_eq!(got, StoreReply::Recorded, "call {} item {}: {:?}", i, j, op);
                        }
                    }
                }
                prop_assert_eq!(live_keys(&mut con, &prefix, now), memory.keys(now), "keys after call {}", i);
            }
            Ok(())
        })
        .unwrap();
}

/// With Redis's clock the script sets real TTLs, and within one call it skips an expiry it has
/// already set: on random batches (every kind of operation, keys emptied and made again within
/// one call) no key is ever left without a TTL, which would live for ever.
#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn with_redis_clock_random_batches_leave_no_key_without_a_ttl() {
    let con = RefCell::new(support::connection());
    let mut runner = runner();
    let calls = prop::collection::vec((0..CLIENTS.len(), batch(16)), 1..12);
    runner
        .run(&(store_config(), calls), |(config, calls)| {
            let mut con = con.borrow_mut();
            let prefix = format!("{{{}}}", support::unique_prefix(&mut con, "store-ttl-props"));
            let redis_store = RedisStore::new(prefix.clone(), &config).expect("store");
            for (i, (client, ops)) in calls.iter().enumerate() {
                let items = store_ops(ops);
                let got = redis_store.batch(&mut *con, CLIENTS[*client], &items).expect("batch");
                prop_assert_eq!(got.len(), ops.len());
                let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{}*", glob_escape(&prefix))).query(&mut *con).unwrap();
                for key in &keys {
                    // -2: expired between KEYS and PTTL; -1: no TTL.
                    let ttl = support::pttl(&mut con, key);
                    prop_assert!(ttl != -1, "after call {}: {} has no TTL", i, key);
                }
            }
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// The multi-process simulation against Redis
// ---------------------------------------------------------------------------------------------

/// The simulator's processes reach Redis through this: each call at the simulation's virtual
/// time. A Redis error fails the test (the simulated outages are the link's, not Redis's).
struct InRedis {
    store: RedisStore,
    con: redis::Connection,
    calls: u64,
}

impl std::fmt::Debug for InRedis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InRedis({:?}, {} calls)", self.store.prefix(), self.calls)
    }
}

impl SharedStore for InRedis {
    fn reserve(&mut self, now: Nanos, client: &str, reservation: &Reservation) -> ReservationAnswer {
        self.calls += 1;
        self.store.reserve_at(&mut self.con, now, client, reservation).expect("reserve in Redis")
    }
    fn record(&mut self, now: Nanos, client: &str, update: &SharedUpdate) {
        self.calls += 1;
        self.store.record_at(&mut self.con, now, client, update).expect("record in Redis")
    }
    /// A restart without persistence: every key of the namespace goes (its expiry index too).
    fn clear(&mut self) {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*", glob_escape(self.store.prefix())))
            .query(&mut self.con)
            .expect("KEYS");
        if !keys.is_empty() {
            let _: () = redis::cmd("DEL").arg(&keys).query(&mut self.con).expect("DEL");
        }
    }
}

fn shared_config(policy: OnUnavailable) -> Config {
    let mut c = Config::default();
    c.shared = Some(SharedConfig::with_policy(policy));
    c
}

/// `n` processes in shared mode over one Redis namespace.
fn cluster(n: usize, config: Config, server: ServerConfig, seed: u64, link: StoreLink) -> Simulation {
    let mut con = support::connection();
    let prefix = format!("{{{}}}", support::unique_prefix(&mut con, "sim"));
    let store = RedisStore::new(prefix, config.shared.as_ref().expect("shared mode")).expect("store");
    let limiters = (0..n).map(|_| Limiter::new(config.clone()).expect("valid config")).collect();
    Simulation::cluster(limiters, Server::new(server), SimConfig::default().seed(seed))
        .with_store(InRedis { store, con, calls: 0 }, link)
}

fn run(sim: &mut Simulation) -> Report {
    sim.run().unwrap_or_else(|e| panic!("the engine broke the driver contract: {e}"))
}

fn one_bucket(limit: u32, window: Nanos) -> ServerConfig {
    ServerConfig::discord()
        .bucket("h", BucketSpec::fixed(limit, window))
        .route("POST /channels/:id/messages", RouteSpec::bucket("h"))
}

fn msg(channel: &str) -> Request {
    Request::with_route("POST", "/channels/:id/messages", channel)
}

fn distinct(i: usize) -> Request {
    Request::with_route("GET", format!("/g{i}"), format!("{i}"))
}

/// What shared mode promises while the store is up (or down, fail-closed).
fn check_limits(report: &Report, global: usize) {
    assert_eq!(report.stop, StopReason::Finished, "unfinished: {:?}", report.unfinished());
    assert!(report.known_limit_violations().is_empty(), "429s on known buckets");
    assert_eq!(report.count(ServerOutcome::GlobalLimited), 0, "global 429s");
    assert!(report.max_global_in_window("") <= global, "{} in one global window", report.max_global_in_window(""));
    assert!(report.deadline_violations().is_empty());
    assert!(report.fifo_violations().is_empty());
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn simulated_processes_share_a_bucket_through_redis() {
    for n in [2, 3] {
        let mut sim = cluster(n, shared_config(OnUnavailable::FailOpen), one_bucket(5, 5 * SECOND), 3, StoreLink::default());
        for i in 0..40 {
            sim.enqueue_on(i % n, 0, msg("1"));
        }
        let report = run(&mut sim);
        check_limits(&report, 50);
        assert!(report.all_succeeded());
        assert_eq!(report.count_429(), 0, "{n} processes");
        println!("{n} processes, bucket 5/5s, 40 requests through Redis: {} ms, 0 429s", report.makespan() / MS);
    }
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn simulated_pioneers_probe_one_at_a_time_through_redis() {
    let mut sim = cluster(4, shared_config(OnUnavailable::FailOpen), one_bucket(1, 2 * SECOND), 11, StoreLink::default());
    for p in 0..4 {
        for _ in 0..2 {
            sim.enqueue_on(p, 0, msg("7"));
        }
    }
    let report = run(&mut sim);
    check_limits(&report, 50);
    assert_eq!(report.count_429(), 0);
    assert!(report.all_succeeded());
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn simulated_processes_share_the_global_limit_through_redis() {
    let mut sim = cluster(4, shared_config(OnUnavailable::FailOpen), ServerConfig::discord(), 9, StoreLink::default());
    for i in 0..200 {
        sim.enqueue_on(i % 4, 0, distinct(i));
    }
    let report = run(&mut sim);
    check_limits(&report, 50);
    assert!(report.all_succeeded());
    println!(
        "4 processes, global 50/s, 200 requests through Redis: {} ms, at most {} in a window",
        report.makespan() / MS,
        report.max_global_in_window("")
    );
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn simulated_outage_fail_closed_holds_and_recovers_with_redis() {
    let (start, end) = (2 * SECOND, 6 * SECOND);
    let mut sim = cluster(
        3,
        shared_config(OnUnavailable::FailClosed),
        one_bucket(5, SECOND),
        14,
        StoreLink::default().outage(start, end),
    );
    for i in 0..90 {
        sim.enqueue_on(i % 3, (i as u64) * 100 * MS, msg(&format!("{}", i % 4)));
    }
    let report = run(&mut sim);
    check_limits(&report, 50);
    assert!(report.all_succeeded(), "every request completes after the outage");
    let count = |f: &dyn Fn(&Observation) -> bool| report.observations.iter().filter(|(_, o)| f(o)).count();
    assert!(count(&|o| matches!(o, Observation::StoreUnavailable { .. })) >= 3);
    assert!(count(&|o| matches!(o, Observation::StoreRecovered)) >= 3);
}

/// Redis restarted without persistence (the namespace emptied) while four fail-open processes
/// send at the global cap: they tell the script what it lost and what they sent without it,
/// and keep to their shares until all are back: no global 429 (the core's
/// `tests/store_restart.rs`, against the model, has the same with more seeds).
#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn simulated_restart_fail_open_reports_to_an_empty_redis() {
    let (start, end) = (2 * SECOND, 3 * SECOND);
    let mut sim = cluster(
        4,
        shared_config(OnUnavailable::FailOpen),
        ServerConfig::discord(),
        21,
        StoreLink::default().restart(start, end),
    );
    for i in 0..400 {
        sim.enqueue_on(i % 4, (i as u64 / 100) * 500 * MS, distinct(i));
    }
    let report = run(&mut sim);
    check_limits(&report, 50);
    assert!(report.all_succeeded(), "every request completes");
    let count = |f: &dyn Fn(&Observation) -> bool| report.observations.iter().filter(|(_, o)| f(o)).count();
    assert!(count(&|o| matches!(o, Observation::StoreRecovered)) >= 4, "every process saw the outage");
}

// ---------------------------------------------------------------------------------------------
// Redis's clock: TTLs, round trips, errors
// ---------------------------------------------------------------------------------------------

fn reservation_for(id: u64, bucket: Option<&str>) -> Reservation {
    Reservation {
        id,
        identity: "bot".into(),
        route: "POST /channels/:id/messages".into(),
        major: "1".into(),
        bucket: bucket.map(str::to_string),
        counts_global: true,
        global_limit: 50,
        global_want: 1,
        global_window: 1_100 * MS,
        margin: 100 * MS,
        invalid_limit: 9_000,
        invalid_window: 600 * SECOND,
        ..Reservation::default()
    }
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn with_redis_clock_every_key_has_a_ttl_and_one_call_is_one_round_trip() {
    let mut con = support::connection();
    let prefix = format!("{{{}}}", support::unique_prefix(&mut con, "store-ttl"));
    let store = RedisStore::new(prefix.clone(), &SharedConfig::default()).expect("store");
    let mut counted = support::counting::CountingConnection::new(support::connection());
    // A pioneer, its report, a second grant, a hold, an invalid response: every key kind.
    assert_granted_by_redis_clock(store.reserve(&mut counted, "a", &reservation_for(1, None)).unwrap(), 1);
    let report = SharedUpdate::Bucket {
        id: 1,
        identity: "bot".into(),
        route: "POST /channels/:id/messages".into(),
        major: "1".into(),
        bucket: Some("h".into()),
        unlimited: false,
        limit: Some(5),
        remaining: Some(4),
        reset_after: Some(2 * SECOND),
        window: Some(2 * SECOND),
    };
    store.record(&mut counted, "a", &report).unwrap();
    assert_granted_by_redis_clock(store.reserve(&mut counted, "b", &reservation_for(1, None)).unwrap(), 2);
    let hold = SharedUpdate::Hold {
        scope: SharedScope::Route,
        identity: "bot".into(),
        route: "PATCH /channels/:id".into(),
        major: "9".into(),
        bucket: None,
        retry_after: 3 * SECOND,
    };
    store.record(&mut counted, "b", &hold).unwrap();
    store.record(&mut counted, "b", &SharedUpdate::Invalid { id: 2, window: 10 * SECOND }).unwrap();
    // The first call may load the script (NOSCRIPT, then EVAL): at most one extra trip.
    assert!(counted.round_trips <= 6, "{} round trips for 5 calls", counted.round_trips);
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{}*", glob_escape(&prefix))).query(&mut con).unwrap();
    assert!(keys.len() >= 6, "{keys:?}");
    for key in &keys {
        let ttl = support::pttl(&mut con, key);
        assert!(ttl > 0, "{key} has no TTL ({ttl})");
        assert!(ttl <= 610_000 + 30_000, "{key}: {ttl} ms");
    }
    assert!(!keys.iter().any(|k| k.ends_with("~expiry")), "no virtual-clock index with Redis's clock");
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
#[allow(clippy::disallowed_methods)] // a real-clock expiry needs some milliseconds to pass
fn with_redis_clock_short_lived_keys_expire_by_themselves() {
    let mut con = support::connection();
    let prefix = format!("{{{}}}", support::unique_prefix(&mut con, "store-expire"));
    let mut config = SharedConfig::default();
    config.lease = 50 * MS;
    config.pioneer_poll = 10 * MS;
    let store = RedisStore::new(prefix.clone(), &config).expect("store");
    let mut r = reservation_for(1, None);
    r.global_window = 50 * MS;
    assert_granted_by_redis_clock(store.reserve(&mut con, "a", &r).unwrap(), 1);
    let count = |con: &mut redis::Connection| -> usize {
        let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{}*", glob_escape(&prefix))).query(con).unwrap();
        keys.len()
    };
    assert_eq!(count(&mut con), 3, "the pioneer lock, the global entry and the live processes");
    // Bounded wait (not a timed assertion: the keys must be gone after their TTLs, however
    // long the wait took).
    for _ in 0..100 {
        if count(&mut con) == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(count(&mut con), 0, "the lease and the global window ended: nothing left");
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn bad_arguments_are_server_errors_and_change_nothing() {
    let mut con = support::connection();
    let prefix = format!("{{{}}}", support::unique_prefix(&mut con, "store-args"));
    let sha = ratelane_redis::shared_store_sha();
    // Load the script first so EVALSHA finds it.
    let _: String = redis::cmd("SCRIPT").arg("LOAD").arg(ratelane_redis::SHARED_STORE_LUA).query(&mut con).unwrap();
    for args in [
        vec!["nope"],
        vec!["reserve", "x"],
        vec!["reserve", "", "", "1", "1", "1"],
        vec!["reserve", "", "a", "1", "1", "1", "1", "bot", "GET /", "", "h", "1", "1", "1", "1", "1", "1"],
        vec!["record", "", "a", "1", "1", "1", "mystery"],
    ] {
        let result: redis::RedisResult<Value2> = redis::cmd("EVALSHA").arg(sha).arg(1).arg(&prefix).arg(&args).query(&mut con);
        let e = result.expect_err("a bad argument is an error reply");
        assert_eq!(e.code(), Some("RATELANE_ARG"), "{args:?}: {e}");
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{}*", glob_escape(&prefix))).query(&mut con).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    // In a batch, a refused item answers in its place and the others still run.
    let store = RedisStore::new(prefix.clone(), &SharedConfig::default()).unwrap();
    let good = reservation_for(1, None);
    let mut batch = store.batch_args(None, "a", &[StoreOp::Reserve(&good)]);
    batch.extend(["2", "record", "mystery"].map(String::from));
    batch.extend(store.batch_args(None, "a", &[StoreOp::Reserve(&reservation_for(2, None))]).split_off(6));
    let replies: Vec<Value2> = redis::cmd("EVALSHA").arg(sha).arg(1).arg(&prefix).arg(&batch).query(&mut con).unwrap();
    assert_eq!(replies.len(), 3, "{replies:?}");
    let text = |v: &Value2| match v {
        Value2::Array(parts) => match &parts[0] {
            Value2::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        },
        other => format!("{other:?}"),
    };
    assert_eq!(text(&replies[0]), "granted");
    assert_eq!(text(&replies[1]), "error");
    // The second reservation waits for the first one's pioneer lock: the script ran it.
    assert_eq!(text(&replies[2]), "denied");
    // A batch whose item count does not add up is refused as a whole.
    for tail in [vec!["5", "reserve"], vec!["0"], vec!["x", "reserve"]] {
        let mut args = vec!["batch", "", "a", "1", "1", "1"];
        args.extend(tail);
        let result: redis::RedisResult<Value2> = redis::cmd("EVALSHA").arg(sha).arg(1).arg(&prefix).arg(&args).query(&mut con);
        assert_eq!(result.expect_err("refused").code(), Some("RATELANE_ARG"), "{args:?}");
    }
    redis::cmd("DEL").arg(format!("{prefix}procs")).exec(&mut con).unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{}*", glob_escape(&prefix))).query(&mut con).unwrap();
    for key in &keys {
        redis::cmd("DEL").arg(key).exec(&mut con).unwrap();
    }
    // Through the crate, an error reply maps to redis_server.
    let store = RedisStore::new(prefix, &SharedConfig::default()).unwrap();
    let e = store.reserve(&mut con, "", &reservation_for(1, None)).unwrap_err();
    assert_eq!(e.code(), "invalid_config");
}

type Value2 = redis::Value;

/// A grant with the script's clock being Redis's (`TIME`): `processes` live processes, no
/// lease, and the store's time at most a minute before Redis's `TIME` now.
fn assert_granted_by_redis_clock(answer: ReservationAnswer, processes: u32) {
    let ReservationAnswer::Granted { processes: Some(p), leased: 0, store_time: Some(t) } = answer else {
        panic!("not a grant with the store's clock: {answer:?}");
    };
    assert_eq!(p, processes);
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut support::connection()).unwrap();
    let redis_now = (s * 1_000_000 + us) * 1_000;
    assert!(t <= redis_now && redis_now - t < 60 * SECOND, "the store's clock {t} ns, Redis's TIME now {redis_now} ns");
}
