//! Shared by the tests that need a real Redis: the connection and unique key prefixes.
//!
//! Those tests are `#[ignore]`d so that `cargo test --workspace` without Redis lists them as
//! ignored instead of failing; `scripts/tests.d/40-redis.sh` starts a `redis-server` on
//! 127.0.0.1, exports `RATELANE_REDIS_URL` and runs them with `--include-ignored`.

#![allow(dead_code)] // each test binary uses a part

/// A new connection to the test Redis.
pub fn connection() -> redis::Connection {
    let url = std::env::var("RATELANE_REDIS_URL").unwrap_or_else(|_| {
        panic!(
            "RATELANE_REDIS_URL is not set: these tests need a Redis server \
             (scripts/tests.d/40-redis.sh starts one and sets it)"
        )
    });
    let client = redis::Client::open(url.as_str()).expect("a valid RATELANE_REDIS_URL");
    client.get_connection().unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

/// A key prefix no other test (or earlier run against the same server) uses.
pub fn unique_prefix(con: &mut redis::Connection, what: &str) -> String {
    let id: u64 =
        redis::cmd("INCR").arg("ratelane-test:next-prefix").query(con).expect("INCR works");
    format!("ratelane-test:{what}:{id}:")
}

/// Whether `key` exists.
pub fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).expect("EXISTS works") == 1
}

/// `key`'s TTL in milliseconds (-2 when absent, -1 without expiry).
pub fn pttl(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).expect("PTTL works")
}

pub mod counting;
