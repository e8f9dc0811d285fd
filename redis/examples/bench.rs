//! Checks per second and round trips per check: the Lua leaky bucket (`RedisLeakyBucket`,
//! one `EVALSHA`) against a naive multi-command implementation of the same leaky bucket on
//! the same Redis, same workload, one run.
//!
//! The naive one is the usual optimistic transaction, with the core's own `LeakyBucket::check`
//! as the algorithm, so both answer alike:
//!
//! 1. `WATCH key`
//! 2. `TIME` + `GET key` (one pipeline)
//! 3. `MULTI` + `SET key state PX ttl` (or `DEL`) + `EXEC` (one pipeline), from the top again
//!    when `EXEC` aborts because another client wrote the key.
//!
//! The state has the script's layout, so the commands inside the script (`TIME`, `GET`,
//! `SET`) are the naive one's minus the transaction.
//!
//! That is 3 round trips per check without contention. Both read Redis's clock.
//!
//! ```bash
//! redis-server --bind 127.0.0.1 --port 16379 --save '' --appendonly no --daemonize yes
//! RATELANE_REDIS_URL=redis://127.0.0.1:16379/ cargo run -p ratelane-redis --release --example bench
//! redis-cli -p 16379 shutdown nosave
//! ```
//!
//! Optional: `BENCH_CHECKS` (checks per client, default 10000); `BENCH_DELAY_US` (default 0):
//! every connection goes through a proxy in this process that delays each chunk of bytes by
//! that many microseconds each way, as a network between the clients and Redis would (the
//! measured round trip is printed), so that the ratio can be read for a LAN as well as for
//! loopback.
#![allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time

#[path = "../tests/support/counting.rs"]
mod counting;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use counting::CountingConnection;
use ratelane::server::{BucketLevel, Decision, LeakyBucket, LeakyBucketState};
use ratelane::{MILLISECOND, SECOND};
use ratelane_redis::RedisLeakyBucket;
use redis::{ConnectionLike, Value};

/// The naive leaky bucket: WATCH, read, decide in the client, write in MULTI/EXEC. The state
/// has the script's layout ("level last_drip spacing_level spacing_last_drip").
fn naive_check(
    con: &mut dyn ConnectionLike,
    bucket: &LeakyBucket,
    key: &str,
    retries: &mut u64,
) -> redis::RedisResult<Decision> {
    loop {
        redis::cmd("WATCH").arg(key).exec(con)?;
        let ((secs, micros), stored): ((u64, u64), Option<String>) =
            redis::pipe().cmd("TIME").cmd("GET").arg(key).query(con)?;
        let now = secs * SECOND + micros * 1000;
        let fields: Vec<u64> = stored
            .as_deref()
            .unwrap_or("0 0 0 0")
            .split(' ')
            .map(|f| f.parse().expect("a state written by this benchmark"))
            .collect();
        let mut state = LeakyBucketState {
            main: BucketLevel { level: fields[0], last_drip: fields[1] },
            spacing: BucketLevel { level: fields[2], last_drip: fields[3] },
        };
        let decision = bucket.check(&mut state, now);
        let mut tx = redis::pipe();
        tx.atomic();
        if decision.clear_after == 0 {
            tx.cmd("DEL").arg(key);
        } else {
            let (main, spacing) = (state.main, state.spacing);
            let value = format!(
                "{} {} {} {}",
                main.level, main.last_drip, spacing.level, spacing.last_drip
            );
            tx.cmd("SET")
                .arg(key)
                .arg(value)
                .arg("PX")
                .arg(decision.clear_after.div_ceil(MILLISECOND));
        }
        match tx.query::<Value>(con)? {
            Value::Nil => *retries += 1, // another client wrote the key: start again
            _ => return Ok(decision),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Implementation {
    Lua,
    Naive,
}

struct Run {
    elapsed: Duration,
    checks: u64,
    allowed: u64,
    round_trips: u64,
    retries: u64,
    commands: BTreeMap<String, u64>,
    /// CPU time of Redis's main thread, in seconds.
    redis_cpu: f64,
}

/// CPU time Redis's main thread has used so far (`INFO cpu`), in seconds.
fn redis_cpu(con: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query(con).expect("INFO");
    info.lines()
        .filter_map(|line| {
            let value = line
                .strip_prefix("used_cpu_user_main_thread:")
                .or_else(|| line.strip_prefix("used_cpu_sys_main_thread:"))?;
            value.trim().parse::<f64>().ok()
        })
        .sum()
}

/// `INFO commandstats` as command -> calls.
fn command_calls(con: &mut redis::Connection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).expect("INFO");
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((name.to_string(), calls.parse().ok()?))
        })
        .collect()
}

fn run(
    client: &redis::Client,
    which: Implementation,
    clients: usize,
    keys: usize,
    checks_per_client: u64,
    tag: &str,
) -> Run {
    let bucket = LeakyBucket::new(100, 10 * MILLISECOND, 1).expect("bucket");
    let lua = RedisLeakyBucket::new(bucket).expect("in range");
    let mut admin = client.get_connection().expect("connect");
    let prefix = format!("ratelane-bench:{tag}:{which:?}:{clients}:{keys}:");
    // Load the script before timing (a fresh server answers NOSCRIPT once).
    lua.check(&mut admin, &format!("{prefix}warm-up")).expect("warm-up");
    let before = command_calls(&mut admin);
    let cpu_before = redis_cpu(&mut admin);
    let start = Instant::now();
    let results: Vec<(u64, u64, u64)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|c| {
                let prefix = prefix.as_str();
                scope.spawn(move || {
                    let mut con =
                        CountingConnection::new(client.get_connection().expect("connect"));
                    let (mut allowed, mut retries) = (0, 0);
                    for i in 0..checks_per_client {
                        let key = format!("{prefix}{}", (c as u64 * 7919 + i) % keys as u64);
                        let decision = match which {
                            Implementation::Lua => lua.check(&mut con, &key).expect("Lua check"),
                            Implementation::Naive => {
                                naive_check(&mut con, &bucket, &key, &mut retries).expect("naive")
                            }
                        };
                        allowed += u64::from(decision.allowed);
                    }
                    (allowed, con.round_trips, retries)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("worker")).collect()
    });
    let elapsed = start.elapsed();
    let redis_cpu = redis_cpu(&mut admin) - cpu_before;
    let after = command_calls(&mut admin);
    let mut commands: BTreeMap<String, u64> = after
        .iter()
        .map(|(name, calls)| (name.clone(), calls - before.get(name).copied().unwrap_or(0)))
        .filter(|&(_, calls)| calls > 0)
        .collect();
    // The INFO calls that read `before` and the CPU time show up in `after`.
    if let Some(info) = commands.get_mut("info") {
        *info = info.saturating_sub(3);
    }
    commands.retain(|_, calls| *calls > 0);
    Run {
        elapsed,
        checks: checks_per_client * clients as u64,
        allowed: results.iter().map(|r| r.0).sum(),
        round_trips: results.iter().map(|r| r.1).sum(),
        retries: results.iter().map(|r| r.2).sum(),
        commands,
        redis_cpu,
    }
}

/// Copies `from` to `to`, each chunk `delay` after it was read, in order.
fn delayed_copy(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            if tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    });
    std::thread::spawn(move || {
        for (due, chunk) in rx {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

/// A proxy on 127.0.0.1 (a free port) to `upstream`, delaying each direction by `delay`;
/// returns its address. Its threads live as long as the benchmark.
fn delaying_proxy(upstream: String, delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
    let addr = listener.local_addr().expect("proxy address").to_string();
    std::thread::spawn(move || {
        for inbound in listener.incoming() {
            let Ok(inbound) = inbound else { continue };
            let outbound = TcpStream::connect(&upstream).expect("connect to Redis");
            for s in [&inbound, &outbound] {
                s.set_nodelay(true).expect("TCP_NODELAY");
            }
            let (i2, o2) = (inbound.try_clone().expect("clone"), outbound.try_clone().expect("clone"));
            delayed_copy(inbound, outbound, delay);
            delayed_copy(o2, i2, delay);
        }
    });
    addr
}

fn main() {
    let mut url = std::env::var("RATELANE_REDIS_URL")
        .expect("set RATELANE_REDIS_URL, e.g. redis://127.0.0.1:16379/ (see the doc comment)");
    let checks: u64 =
        std::env::var("BENCH_CHECKS").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let delay_us: u64 =
        std::env::var("BENCH_DELAY_US").ok().and_then(|n| n.parse().ok()).unwrap_or(0);
    if delay_us > 0 {
        let info = redis::Client::open(url.as_str()).expect("a valid URL").get_connection_info().clone();
        let upstream = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
            other => panic!("BENCH_DELAY_US needs a TCP URL, not {other:?}"),
        };
        let proxy = delaying_proxy(upstream, Duration::from_micros(delay_us));
        url = format!("redis://{proxy}/");
    }
    let client = redis::Client::open(url.as_str()).expect("a valid URL");
    let mut admin = client.get_connection().expect("connect");
    let version: String = redis::cmd("INFO").arg("server").query(&mut admin).expect("INFO");
    let version = version.lines().find_map(|l| l.strip_prefix("redis_version:")).unwrap_or("?");
    let tag = format!("{}", std::process::id());
    let pings = 200;
    let start = Instant::now();
    for _ in 0..pings {
        let _: String = redis::cmd("PING").query(&mut admin).expect("PING");
    }
    let rtt = start.elapsed() / pings;
    println!(
        "Redis {version} at {url}; added delay {delay_us} µs each way; PING round trip {:.0} µs; \
         leaky bucket size 100, one drip per 10 ms; {checks} checks per client\n",
        rtt.as_secs_f64() * 1e6
    );
    println!(
        "| workload | implementation | checks/s | round trips / check | Redis CPU / check | Redis commands / check | WATCH retries | allowed |"
    );
    println!("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |");
    for (clients, keys) in [(1, 1000), (4, 1000), (4, 1)] {
        let mut rates = Vec::new();
        for which in [Implementation::Lua, Implementation::Naive] {
            let r = run(&client, which, clients, keys, checks, &tag);
            let rate = r.checks as f64 / r.elapsed.as_secs_f64();
            rates.push(rate);
            let per_check = |n: u64| n as f64 / r.checks as f64;
            let commands: Vec<String> = r
                .commands
                .iter()
                .map(|(name, calls)| format!("{name} {:.2}", per_check(*calls)))
                .collect();
            println!(
                "| {clients} client(s), {keys} key(s) | {} | {rate:.0} | {:.2} | {:.1} µs | {} | {} | {} of {} |",
                match which {
                    Implementation::Lua => "Lua script (`RedisLeakyBucket`)",
                    Implementation::Naive => "naive WATCH/MULTI/EXEC",
                },
                per_check(r.round_trips),
                r.redis_cpu * 1e6 / r.checks as f64,
                commands.join(", "),
                r.retries,
                r.allowed,
                r.checks,
            );
        }
        println!("|  | **Lua / naive** | **{:.2}x** |  |  |  |  |  |", rates[0] / rates[1]);
    }
}
