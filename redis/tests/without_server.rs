//! What the Rust side does with any reply, checked against a fake connection that answers
//! from a script: the commands sent, the `NOSCRIPT` fallback, and every error mapping. No
//! Redis needed; these run in every `cargo test --workspace`.

use std::collections::VecDeque;

use ratelane::server::{FixedWindow, Gcra, LeakyBucket};
use ratelane::{MILLISECOND, SECOND};
use ratelane_redis::{Error, MAX_WINDOW, RedisFixedWindow, RedisGcra, RedisLeakyBucket};
use redis::{ConnectionLike, RedisResult, Value};

/// Answers each command with the next canned reply (RESP bytes, or an I/O error) and keeps
/// the commands it was sent.
struct Fake {
    replies: VecDeque<Result<&'static [u8], std::io::ErrorKind>>,
    sent: Vec<Vec<String>>,
}

impl Fake {
    fn new(replies: impl IntoIterator<Item = Result<&'static [u8], std::io::ErrorKind>>) -> Fake {
        Fake { replies: replies.into_iter().collect(), sent: Vec::new() }
    }

    fn answering(replies: impl IntoIterator<Item = &'static [u8]>) -> Fake {
        Fake::new(replies.into_iter().map(Ok))
    }
}

/// The arguments of a packed command (`*N\r\n$len\r\narg\r\n...`).
fn unpack(cmd: &[u8]) -> Vec<String> {
    match redis::parse_redis_value(cmd).expect("a packed command parses as RESP") {
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::BulkString(b) => String::from_utf8(b).expect("utf-8"),
                other => panic!("not a bulk string: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

impl ConnectionLike for Fake {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.sent.push(unpack(cmd));
        match self.replies.pop_front().expect("a reply for every command") {
            Ok(resp) => redis::parse_redis_value(resp),
            Err(kind) => Err(std::io::Error::new(kind, "fake").into()),
        }
    }

    fn req_packed_commands(&mut self, _: &[u8], _: usize, _: usize) -> RedisResult<Vec<Value>> {
        unreachable!("the limiters never pipeline")
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        true
    }

    fn is_open(&self) -> bool {
        true
    }
}

const DECISION: &[u8] =
    b"*9\r\n$8\r\ndecision\r\n:1\r\n:3\r\n:2\r\n:0\r\n:100\r\n:100\r\n:300\r\n$3\r\n123\r\n";

fn gcra() -> RedisGcra {
    RedisGcra::new(Gcra::new(100, 3).unwrap()).unwrap()
}

#[test]
fn a_check_is_one_evalsha_with_the_documented_arguments() {
    let mut con = Fake::answering([DECISION]);
    let d = gcra().with_min_ttl_ms(7).check_n_at(&mut con, "user:1", 2, 5_000).unwrap();
    assert_eq!((d.allowed, d.limit, d.remaining, d.clear_after), (true, 3, 2, 100));
    let (sha, _, _) = ratelane_redis::script_shas();
    // EVALSHA sha numkeys KEYS[1] interval_ns burst n now_ns min_ttl_ms
    assert_eq!(con.sent, [["EVALSHA", sha, "1", "user:1", "100", "3", "2", "5000", "7"]]);
    // Redis's clock: now_ns is the empty string.
    let mut con = Fake::answering([DECISION]);
    gcra().check(&mut con, "user:1").unwrap();
    assert_eq!(con.sent[0][4..], ["100", "3", "1", "", "0"]);
}

#[test]
fn the_other_scripts_get_their_documented_arguments() {
    let (_, leaky_sha, fixed_sha) = ratelane_redis::script_shas();
    let bucket = LeakyBucket::new(10, SECOND, 2).unwrap().with_min_interval(SECOND / 2).unwrap();
    let leaky = RedisLeakyBucket::new(bucket).unwrap();
    let mut con = Fake::answering([DECISION]);
    leaky.check_scaled_at(&mut con, "k", 0.5, 42).unwrap();
    // size (scaled) drip_rate_ns drip_size min_interval_ns now_ns min_ttl_ms
    assert_eq!(
        con.sent,
        [["EVALSHA", leaky_sha, "1", "k", "5", "1000000000", "2", "500000000", "42", "0"]]
    );
    let fixed = RedisFixedWindow::new(FixedWindow::new(4, SECOND).unwrap()).unwrap();
    let mut con = Fake::answering([
        b"*2\r\n$8\r\nreleased\r\n:1\r\n".as_slice(),
        b"*5\r\n$9\r\nscheduled\r\n:0\r\n$10\r\n2000000000\r\n:1\r\n$10\r\n1000000000\r\n",
    ]);
    assert!(fixed.release(&mut con, "g").unwrap());
    let (scheduled, now) = fixed.schedule(&mut con, "g").unwrap();
    assert_eq!(
        (scheduled.run_now, scheduled.release_at, scheduled.waiting),
        (false, 2 * SECOND, 1)
    );
    assert_eq!(now, SECOND);
    // op quota window_ns now_ns min_ttl_ms
    assert_eq!(
        con.sent[0],
        ["EVALSHA", fixed_sha, "1", "g", "release", "4", "1000000000", "", "0"]
    );
    assert_eq!(con.sent[1][4], "schedule");
}

#[test]
fn noscript_falls_back_to_eval_with_the_script_text() {
    let mut con = Fake::answering([b"-NOSCRIPT No matching script.\r\n".as_slice(), DECISION]);
    assert!(gcra().check(&mut con, "k").unwrap().allowed);
    assert_eq!(con.sent.len(), 2);
    assert_eq!(con.sent[1][..2], ["EVAL", ratelane_redis::GCRA_LUA]);
    assert_eq!(con.sent[0][2..], con.sent[1][2..]);
}

#[test]
fn failures_map_to_stable_codes() {
    let cases: [(Result<&'static [u8], std::io::ErrorKind>, &str); 10] = [
        (Err(std::io::ErrorKind::ConnectionReset), "redis_connection"),
        (Err(std::io::ErrorKind::TimedOut), "redis_connection"),
        (Ok(b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"), "redis_server"),
        (Ok(b"-READONLY You can't write against a read only replica.\r\n"), "redis_server"),
        (Ok(b"-RATELANE_STATE the key does not hold a GCRA state\r\n"), "redis_bad_state"),
        (
            Ok(b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            "redis_bad_state",
        ),
        (Ok(b"-RATELANE_RANGE too far\r\n"), "out_of_range"),
        (Ok(b"-RATELANE_CLOCK past the end of the u64 clock\r\n"), "invalid_request"),
        (Ok(b"+OK\r\n"), "redis_bad_reply"),
        (Ok(b"*2\r\n$8\r\ndecision\r\n:1\r\n"), "redis_bad_reply"),
    ];
    for (reply, code) in cases {
        let mut con = Fake::new([reply]);
        let e = gcra().check(&mut con, "k").unwrap_err();
        assert_eq!(e.code(), code, "{reply:?}: {e}");
        assert!(Error::ALL_CODES.contains(&e.code()));
    }
}

#[test]
fn errors_decided_locally_send_nothing() {
    let mut con = Fake::answering([]);
    let e = gcra().check_n(&mut con, "k", 4).unwrap_err();
    assert!(matches!(e, Error::InsufficientCapacity(c) if c.requested == 4 && c.capacity == 3));
    assert_eq!(e.code(), "insufficient_capacity");
    // A `now` past the GCRA's last instant, as the in-memory store refuses it.
    let last = gcra().gcra().last_instant();
    assert!(gcra().check_n_at(&mut con, "k", 0, last + 1).is_err());
    for now in [last + 1, u64::MAX] {
        let e = gcra().check_at(&mut con, "k", now).unwrap_err();
        assert!(matches!(e, Error::InvalidRequest(_)), "{e:?}");
        assert_eq!(e.code(), "invalid_request");
    }
    let leaky = RedisLeakyBucket::new(LeakyBucket::new(10, SECOND, 1).unwrap()).unwrap();
    for factor in [0.0, 1.5, f64::NAN] {
        assert_eq!(leaky.check_scaled(&mut con, "k", factor).unwrap_err().code(), "invalid_config");
    }
    assert!(con.sent.is_empty());
}

#[test]
fn windows_beyond_the_exact_range_are_refused() {
    assert_eq!(
        RedisGcra::new(Gcra::new(MAX_WINDOW / 4, 5).unwrap()).unwrap_err().code(),
        "invalid_config"
    );
    assert!(RedisGcra::new(Gcra::new(MAX_WINDOW / 4, 4).unwrap()).is_ok());
    let drain_too_slow = LeakyBucket::new(3, MAX_WINDOW / 2, 1).unwrap();
    assert_eq!(RedisLeakyBucket::new(drain_too_slow).unwrap_err().code(), "invalid_config");
    let spacing_too_long =
        LeakyBucket::new(3, MILLISECOND, 1).unwrap().with_min_interval(MAX_WINDOW + 1).unwrap();
    assert_eq!(RedisLeakyBucket::new(spacing_too_long).unwrap_err().code(), "invalid_config");
    let window = FixedWindow::new(1, MAX_WINDOW + 1).unwrap();
    assert_eq!(RedisFixedWindow::new(window).unwrap_err().code(), "invalid_config");
    assert!(RedisFixedWindow::new(FixedWindow::new(1, MAX_WINDOW).unwrap()).is_ok());
}

/// Replies no script gives, as redis-rs parses them off the wire: a million elements, ten
/// thousand levels. The reader refuses them as bad replies by their length or their kind,
/// without walking them (issue 44); redis-rs's own parser bounds the nesting.
#[test]
fn huge_and_deep_replies_are_bad_replies() {
    let mut wide = b"*1000000\r\n".to_vec();
    wide.extend(b":1\r\n".repeat(1_000_000));
    let mut deep = b"*1\r\n".repeat(10_000);
    deep.extend(b":1\r\n");
    let mut nested = b"*2\r\n$8\r\nreleased\r\n".to_vec();
    nested.extend(&deep);
    for reply in [wide, deep, nested] {
        let reply: &'static [u8] = Box::leak(reply.into_boxed_slice());
        let mut con = Fake::answering([reply]);
        match gcra().check(&mut con, "k") {
            Err(e) => {
                // By our length check, or redis-rs's own bound on nesting (a parse error).
                assert_eq!(e.code(), "redis_bad_reply", "{e}");
                assert!(e.to_string().len() < 400, "{} bytes", e.to_string().len());
            }
            Ok(d) => panic!("read as a decision: {d:?}"),
        }
    }
}
