//! Behaviour that only a real Redis shows: key expiry, atomicity under concurrent clients,
//! the `NOSCRIPT` fallback and round trips, and errors the server gives.

mod support;

use ratelane::server::{FixedWindow, Gcra, LeakyBucket};
use ratelane::{MILLISECOND, Nanos, SECOND};
use ratelane_redis::{
    FIXED_WINDOW_LUA, GCRA_LUA, LEAKY_BUCKET_LUA, MAX_WINDOW, RedisFixedWindow, RedisGcra,
    RedisLeakyBucket,
};
use redis::Value;
use support::counting::CountingConnection;

/// A realistic `now`: Unix nanoseconds, not a whole number of seconds or microseconds.
const T0: Nanos = 1_732_364_823_123_456_789;

/// Runs `script` on `key` and reads the key's PTTL in one transaction, so no time passes
/// between the two (and the contract is exercised as a binding would: raw `EVAL`).
fn eval_then_pttl(
    con: &mut redis::Connection,
    script: &str,
    key: &str,
    args: &[String],
) -> (Vec<Value>, i64) {
    let (reply, pttl): (Value, i64) = redis::pipe()
        .atomic()
        .cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg(key)
        .arg(args)
        .cmd("PTTL")
        .arg(key)
        .query(con)
        .expect("EVAL and PTTL");
    match reply {
        Value::Array(items) => (items, pttl),
        other => panic!("not an array: {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// `clear_after_ns` of a decision reply.
fn clear_after(reply: &[Value]) -> i64 {
    assert_eq!(reply[0], Value::BulkString(b"decision".to_vec()));
    int(&reply[5])
}

fn ceil_ms(ns: i64) -> i64 {
    (ns + 999_999) / 1_000_000
}

/// A TTL the script set to `ms`, read back by `PTTL` in the same transaction: Redis counts it
/// down on its own millisecond clock, which can tick between the script and the read (seen
/// once: 1,234 for 1,235), so it reads `ms` or one less.
fn assert_ttl(pttl: i64, ms: i64) {
    assert!(pttl == ms || pttl == ms - 1, "PTTL {pttl}, set to {ms} ms");
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn gcra_ttl_is_the_time_until_empty_and_an_empty_key_is_deleted() {
    let mut con = support::connection();
    let key = support::unique_prefix(&mut con, "ttl-gcra") + "k";
    let interval: i64 = 1_234_567_891; // not a whole number of milliseconds
    let args = |n: u32, now: Nanos| {
        vec![interval.to_string(), "3".into(), n.to_string(), now.to_string(), String::new()]
    };
    let (reply, pttl) = eval_then_pttl(&mut con, GCRA_LUA, &key, &args(1, T0));
    assert_eq!(clear_after(&reply), interval);
    assert_ttl(pttl, ceil_ms(interval));
    let (reply, pttl) = eval_then_pttl(&mut con, GCRA_LUA, &key, &args(2, T0 + 1));
    assert_eq!(clear_after(&reply), 3 * interval - 1);
    assert_ttl(pttl, ceil_ms(3 * interval - 1));
    // A blocked check changes nothing, the TTL included.
    let (reply, pttl_after_block) = eval_then_pttl(&mut con, GCRA_LUA, &key, &args(1, T0 + 2));
    assert_eq!(int(&reply[1]), 0);
    assert!(pttl_after_block <= pttl && pttl_after_block > 0);
    // Once the TAT is reached the state is empty: a peek deletes the key.
    let limiter = RedisGcra::new(Gcra::new(interval as Nanos, 3).unwrap()).unwrap();
    let d = limiter.check_n_at(&mut con, &key, 0, T0 + 3 * interval as Nanos).unwrap();
    assert_eq!((d.allowed, d.remaining, d.clear_after), (true, 3, 0));
    assert!(!support::exists(&mut con, &key));
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn leaky_bucket_ttl_is_the_time_until_both_buckets_are_empty() {
    let mut con = support::connection();
    let key = support::unique_prefix(&mut con, "ttl-leaky") + "k";
    // size 2, one drip per second, and at least 5 s between requests.
    let args = |now: Nanos| {
        let rate = SECOND.to_string();
        vec!["2".into(), rate, "1".into(), (5 * SECOND).to_string(), now.to_string()]
    };
    let (reply, pttl) = eval_then_pttl(&mut con, LEAKY_BUCKET_LUA, &key, &args(T0));
    assert_eq!(clear_after(&reply), 5_000_000_000);
    assert_ttl(pttl, 5000);
    let (reply, pttl) = eval_then_pttl(&mut con, LEAKY_BUCKET_LUA, &key, &args(T0 + 5 * SECOND));
    assert_eq!(int(&reply[1]), 1);
    assert_eq!(clear_after(&reply), 5_000_000_000);
    assert_ttl(pttl, 5000);
    // Without the minimum interval the main bucket decides: level 2 drains in 2 s - 300 ms.
    let key = key + ":plain";
    let limiter = RedisLeakyBucket::new(LeakyBucket::new(2, SECOND, 1).unwrap()).unwrap();
    limiter.check_at(&mut con, &key, T0).unwrap();
    let args =
        |now: Nanos| vec!["2".into(), SECOND.to_string(), "1".into(), "0".into(), now.to_string()];
    let (reply, pttl) =
        eval_then_pttl(&mut con, LEAKY_BUCKET_LUA, &key, &args(T0 + 300 * MILLISECOND));
    assert_eq!(clear_after(&reply), 1_700_000_000);
    assert_ttl(pttl, 1700);
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn fixed_window_ttl_covers_booked_windows_and_waiting_jobs() {
    let mut con = support::connection();
    let key = support::unique_prefix(&mut con, "ttl-fixed") + "g";
    let args = |op: &str, now: Nanos| {
        vec![op.into(), "1".into(), SECOND.to_string(), now.to_string(), String::new()]
    };
    let (_, pttl) = eval_then_pttl(&mut con, FIXED_WINDOW_LUA, &key, &args("schedule", T0));
    assert_ttl(pttl, 1000);
    // A delayed job: its window ends in 2 s, and one more window is kept until it is released.
    let (reply, pttl) = eval_then_pttl(&mut con, FIXED_WINDOW_LUA, &key, &args("schedule", T0));
    assert_eq!(reply[1], Value::Int(0));
    assert_eq!(reply[2], Value::BulkString((T0 + SECOND).to_string().into_bytes()));
    assert_ttl(pttl, 3000);
    let (reply, pttl) =
        eval_then_pttl(&mut con, FIXED_WINDOW_LUA, &key, &args("release", T0 + SECOND));
    assert_eq!(reply[1], Value::Int(1));
    assert_ttl(pttl, 1000);
    // Every window over and no job waiting: the group is idle and the key is gone.
    let limiter = RedisFixedWindow::new(FixedWindow::new(1, SECOND).unwrap()).unwrap();
    assert!(limiter.schedule_at(&mut con, &key, T0 + 2 * SECOND).unwrap().run_now);
    let delayed = limiter.schedule_at(&mut con, &key, T0 + 2 * SECOND).unwrap();
    assert_eq!((delayed.run_now, delayed.release_at), (false, T0 + 3 * SECOND));
    assert!(support::exists(&mut con, &key));
    assert!(limiter.release_at(&mut con, &key, T0 + 4 * SECOND).unwrap());
    assert!(!support::exists(&mut con, &key));
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
#[allow(clippy::disallowed_methods)] // a real-clock expiry needs a few milliseconds to pass
fn keys_expire_on_redis_clock_once_empty() {
    let mut con = support::connection();
    let prefix = support::unique_prefix(&mut con, "expiry");
    let window = 3 * MILLISECOND;
    let gcra = RedisGcra::new(Gcra::new(window, 1).unwrap()).unwrap();
    let leaky = RedisLeakyBucket::new(LeakyBucket::new(1, window, 1).unwrap()).unwrap();
    let fixed = RedisFixedWindow::new(FixedWindow::new(1, window).unwrap()).unwrap();
    let keys = [format!("{prefix}gcra"), format!("{prefix}leaky"), format!("{prefix}fixed")];
    assert!(gcra.check(&mut con, &keys[0]).unwrap().allowed);
    assert!(leaky.check(&mut con, &keys[1]).unwrap().allowed);
    assert!(fixed.check(&mut con, &keys[2]).unwrap().allowed);
    for key in &keys {
        // At most 3 ms left (-2 if it already expired); never a key without expiry (-1).
        let pttl = support::pttl(&mut con, key);
        assert!(pttl != -1 && pttl <= 3, "{key}: PTTL {pttl}");
    }
    std::thread::sleep(std::time::Duration::from_millis(10));
    for key in &keys {
        assert!(!support::exists(&mut con, key), "{key} outlived its state");
    }
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn concurrent_clients_never_exceed_the_gcra_bound() {
    const THREADS: usize = 4;
    const CHECKS: usize = 500;
    let mut con = support::connection();
    let key = support::unique_prefix(&mut con, "concurrency") + "hot";
    let (interval, burst) = (2 * MILLISECOND, 5);
    let limiter = RedisGcra::new(Gcra::new(interval, burst).unwrap()).unwrap();
    let redis_now = |con: &mut redis::Connection| -> Nanos {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(con).expect("TIME");
        secs * SECOND + micros * 1000
    };
    let start = redis_now(&mut con);
    let allowed: Vec<usize> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let key = key.as_str();
                scope.spawn(move || {
                    let mut con = support::connection();
                    let mut allowed = 0;
                    for _ in 0..CHECKS {
                        let d = limiter.check(&mut con, key).expect("check");
                        assert!(d.remaining < burst || !d.allowed);
                        assert!(d.clear_after <= limiter.gcra().window());
                        allowed += usize::from(d.allowed);
                    }
                    allowed
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("worker")).collect()
    });
    let end = redis_now(&mut con);
    let total: usize = allowed.iter().sum();
    // In any span L, GCRA admits at most burst + L / interval requests, counted on Redis's
    // clock, which every check read.
    let bound = burst as usize + ((end - start) / interval) as usize;
    println!(
        "{THREADS} x {CHECKS} checks in {} ms (Redis clock): {total} allowed, bound {bound}, per thread {allowed:?}",
        (end - start) / MILLISECOND
    );
    assert!(total <= bound, "{total} allowed, more than {bound}");
    // A blocked check means the burst was used: at least `burst` were admitted.
    assert!(total >= burst as usize);
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn one_round_trip_per_check_and_noscript_falls_back_to_eval() {
    let mut con = CountingConnection::new(support::connection());
    let key = support::unique_prefix(&mut con.inner, "round-trips") + "k";
    let limiter = RedisGcra::new(Gcra::new(SECOND, 100).unwrap()).unwrap();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut con.inner).expect("SCRIPT FLUSH");
    // EVALSHA answered NOSCRIPT, then EVAL (unless a test running beside this one has loaded
    // the script again in between).
    let before = con.round_trips;
    assert!(limiter.check(&mut con, &key).unwrap().allowed);
    assert!((1..=2).contains(&(con.round_trips - before)));
    let (gcra_sha, _, _) = ratelane_redis::script_shas();
    let cached: Vec<bool> =
        redis::cmd("SCRIPT").arg("EXISTS").arg(gcra_sha).query(&mut con.inner).unwrap();
    assert_eq!(cached, [true]);
    let before = con.round_trips;
    for _ in 0..50 {
        limiter.check(&mut con, &key).unwrap();
    }
    assert_eq!(con.round_trips - before, 50);
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn a_key_holding_something_else_is_a_bad_state_error() {
    let mut con = support::connection();
    let prefix = support::unique_prefix(&mut con, "bad-state");
    let gcra = RedisGcra::new(Gcra::new(SECOND, 2).unwrap()).unwrap();
    let leaky = RedisLeakyBucket::new(LeakyBucket::new(2, SECOND, 1).unwrap()).unwrap();
    let fixed = RedisFixedWindow::new(FixedWindow::new(2, SECOND).unwrap()).unwrap();
    let text = format!("{prefix}text");
    let list = format!("{prefix}list");
    let hash = format!("{prefix}hash");
    let _: () = redis::cmd("SET").arg(&text).arg("hello").query(&mut con).unwrap();
    let _: () = redis::cmd("RPUSH").arg(&list).arg("x").query(&mut con).unwrap();
    let _: () = redis::cmd("HSET").arg(&hash).arg("booked").arg("many").query(&mut con).unwrap();
    let errors = [
        gcra.check(&mut con, &text).unwrap_err(),
        gcra.check(&mut con, &list).unwrap_err(),
        gcra.check(&mut con, &hash).unwrap_err(),
        leaky.check(&mut con, &text).unwrap_err(),
        leaky.check(&mut con, &hash).unwrap_err(),
        fixed.check(&mut con, &list).unwrap_err(),
        fixed.check(&mut con, &hash).unwrap_err(),
    ];
    for (i, e) in errors.iter().enumerate() {
        assert_eq!(e.code(), "redis_bad_state", "case {i}: {e}");
    }
    // A leaky-bucket state is not a fixed-window state, and the other way round.
    let bucket = format!("{prefix}bucket");
    leaky.check(&mut con, &bucket).unwrap();
    assert_eq!(fixed.check(&mut con, &bucket).unwrap_err().code(), "redis_bad_state");
    let group = format!("{prefix}group");
    fixed.check(&mut con, &group).unwrap();
    assert_eq!(leaky.check(&mut con, &group).unwrap_err().code(), "redis_bad_state");
    // Nothing was overwritten.
    let value: String = redis::cmd("GET").arg(&text).query(&mut con).unwrap();
    assert_eq!(value, "hello");
    let fields: Vec<String> = redis::cmd("HKEYS").arg(&hash).query(&mut con).unwrap();
    assert_eq!(fields, ["booked"]);
}

/// A key of the algorithm's own shape holding a count no check writes (2^53 and more, beyond
/// Lua's exact integers; a leaky-bucket level above 2^32 - 1) failed every check with a script
/// error (`redis_server`) and stayed as it was. Now the check that meets it is a bad state,
/// the key is reset, and the next check starts from an empty key (issue 44).
#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn a_count_out_of_range_is_a_bad_state_once_and_the_key_is_reset() {
    let mut con = support::connection();
    let prefix = support::unique_prefix(&mut con, "out-of-range");
    let leaky = RedisLeakyBucket::new(LeakyBucket::new(2, SECOND, 1).unwrap()).unwrap();
    let fixed = RedisFixedWindow::new(FixedWindow::new(2, SECOND).unwrap()).unwrap();
    let cases: [(&str, &str, bool); 5] = [
        ("leaky-level", "99999999999999999999 1700000000000000000 0 0", true),
        ("leaky-2^53", "9007199254740993 1700000000000000000 0 0", true),
        ("leaky-spacing", "1 1700000000000000000 4294967296 1700000000000000000", true),
        ("fixed-booked", "1700000000000000000 9007199254740992 0", false),
        ("fixed-waiting", "1700000000000000000 1 99999999999999999999", false),
    ];
    for (name, value, is_leaky) in cases {
        let key = format!("{prefix}{name}");
        let _: () = redis::cmd("SET").arg(&key).arg(value).query(&mut con).unwrap();
        let first = if is_leaky { leaky.check(&mut con, &key).map(|_| ()) } else { fixed.check(&mut con, &key).map(|_| ()) };
        let e = first.unwrap_err();
        assert_eq!(e.code(), "redis_bad_state", "{name}: {e}");
        assert!(!support::exists(&mut con, &key), "{name}: the key was reset");
        let next = if is_leaky { leaky.check(&mut con, &key).map(|d| d.allowed) } else { fixed.check(&mut con, &key).map(|d| d.allowed) };
        assert!(next.unwrap(), "{name}: the next check starts from an empty key");
    }
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn scheduling_beyond_the_exact_range_is_refused_and_books_nothing() {
    let mut con = support::connection();
    let key = support::unique_prefix(&mut con, "range") + "g";
    let limiter = RedisFixedWindow::new(FixedWindow::new(1, MAX_WINDOW / 2).unwrap()).unwrap();
    assert!(limiter.schedule_at(&mut con, &key, T0).unwrap().run_now);
    let second = limiter.schedule_at(&mut con, &key, T0).unwrap();
    assert_eq!((second.run_now, second.release_at), (false, T0 + MAX_WINDOW / 2));
    for _ in 0..2 {
        let e = limiter.schedule_at(&mut con, &key, T0).unwrap_err();
        assert_eq!(e.code(), "out_of_range", "{e}");
    }
    // Only the two bookings count.
    assert!(limiter.release_at(&mut con, &key, T0).unwrap());
    assert!(!limiter.release_at(&mut con, &key, T0).unwrap());
}

/// `EVAL script 1 key args...`: the script's own answer, without a host's checks.
fn eval(con: &mut redis::Connection, script: &str, key: &str, args: &[String]) -> redis::RedisResult<Value> {
    redis::cmd("EVAL").arg(script).arg(1).arg(key).arg(args).query::<Value>(con)
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn the_scripts_refuse_what_the_core_refuses_at_the_end_of_the_clock() {
    let mut con = support::connection();
    let prefix = support::unique_prefix(&mut con, "clock");
    let end = u64::MAX;
    let strings = |args: &[u64]| args.iter().map(u64::to_string).collect::<Vec<_>>();

    // GCRA: the last instant is taken (and the TAT reaches exactly 2^64 - 1); one nanosecond
    // later is RATELANE_CLOCK, as the core's Gcra::check_n refuses it, and nothing is written.
    let gcra = Gcra::new(SECOND, 3).unwrap();
    let key = format!("{prefix}gcra");
    let last = gcra.last_instant();
    for _ in 0..3 {
        eval(&mut con, GCRA_LUA, &key, &strings(&[SECOND, 3, 1, last])).unwrap();
    }
    let tat: String = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
    assert_eq!(tat, end.to_string());
    for now in [last + 1, end] {
        let e = eval(&mut con, GCRA_LUA, &key, &strings(&[SECOND, 3, 0, now])).unwrap_err();
        assert_eq!(e.code(), Some("RATELANE_CLOCK"), "{e}");
    }
    let tat_after: String = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
    assert_eq!(tat_after, tat);

    // Fixed window, 2 per second, 2 s before the end: three windows start within the clock,
    // the next job is refused with RATELANE_CLOCK and books nothing; checks still answer.
    let key = format!("{prefix}fixed");
    let now = end - 2 * SECOND;
    let mut releases = Vec::new();
    for _ in 0..6 {
        let args = ["schedule".to_string(), "2".into(), SECOND.to_string(), now.to_string()];
        let Value::Array(reply) = eval(&mut con, FIXED_WINDOW_LUA, &key, &args).unwrap() else {
            panic!("not an array")
        };
        let Value::BulkString(at) = &reply[2] else { panic!("release_at") };
        releases.push(String::from_utf8(at.clone()).unwrap());
    }
    let expected = [now, now, end - SECOND, end - SECOND, end, end].map(|t| t.to_string());
    assert_eq!(releases, expected);
    let state: String = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
    let args = ["schedule".to_string(), "2".into(), SECOND.to_string(), now.to_string()];
    let e = eval(&mut con, FIXED_WINDOW_LUA, &key, &args).unwrap_err();
    assert_eq!(e.code(), Some("RATELANE_CLOCK"), "{e}");
    let state_after: String = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
    assert_eq!(state_after, state);

    // Through the crate, the same code as the in-memory store's.
    let limiter = RedisFixedWindow::new(FixedWindow::new(2, SECOND).unwrap()).unwrap();
    assert_eq!(limiter.schedule_at(&mut con, &key, now).unwrap_err().code(), "invalid_request");
    let d = limiter.check_at(&mut con, &format!("{prefix}check"), end).unwrap();
    assert!(d.allowed);

    // A now_ns past 2^64 - 1 is not a time the core takes: a bad argument for every script.
    let beyond = "18446744073709551616".to_string();
    let cases: [(&str, Vec<String>); 3] = [
        (GCRA_LUA, vec!["1".into(), "1".into(), "1".into(), beyond.clone()]),
        (LEAKY_BUCKET_LUA, vec!["1".into(), "1".into(), "1".into(), "0".into(), beyond.clone()]),
        (FIXED_WINDOW_LUA, vec!["check".into(), "1".into(), "1".into(), beyond]),
    ];
    for (script, args) in cases {
        let e = eval(&mut con, script, &format!("{prefix}beyond"), &args).unwrap_err();
        assert_eq!(e.code(), Some("RATELANE_ARG"), "{e}");
    }
}

#[test]
#[ignore = "needs Redis: run scripts/tests.d/40-redis.sh"]
fn scripts_refuse_bad_arguments_with_ratelane_arg() {
    let mut con = support::connection();
    let key = support::unique_prefix(&mut con, "bad-args") + "k";
    let cases: [(&str, &[&str]); 8] = [
        (GCRA_LUA, &["0", "1", "1"]),
        (GCRA_LUA, &["1000", "x", "1"]),
        (GCRA_LUA, &["4503599627370496", "2", "1"]), // interval * burst = 2^53
        (GCRA_LUA, &["1000", "1", "1", "-5"]),
        (LEAKY_BUCKET_LUA, &["1", "1000", "0", "0"]),
        (LEAKY_BUCKET_LUA, &["1", "1000", "1"]),
        (FIXED_WINDOW_LUA, &["peek", "1", "1000"]),
        (FIXED_WINDOW_LUA, &["check", "1", "1000", "1.5"]),
    ];
    for (i, (script, args)) in cases.iter().enumerate() {
        let e = redis::cmd("EVAL")
            .arg(*script)
            .arg(1)
            .arg(&key)
            .arg(*args)
            .query::<Value>(&mut con)
            .expect_err("refused");
        assert_eq!(e.code(), Some("RATELANE_ARG"), "case {i}: {e}");
    }
    assert!(!support::exists(&mut con, &key));
}
