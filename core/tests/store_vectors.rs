//! Shared vectors for the shared-mode store: `tests/vectors/store_*.json`.
//!
//! Each scenario is a script of store operations (`reserve`, `record`) at store times, run
//! through the reference model `ratelane::shared::MemoryStore`; the answers and the number of
//! live keys after each step are recorded. A Redis script implementing the contract of
//! `ratelane::shared` must give the same answers and hold the same number of keys (`DBSIZE` of
//! the namespace). Two tests, as for the client vectors: `store_vectors_are_fresh` (set
//! `RATELANE_BLESS=1` to rewrite) and `store_vectors_replay` (reads the files alone).
//!
//! Times are whole milliseconds (in nanoseconds), so a script working in microseconds from
//! `TIME` computes exactly the same waits.

#![allow(clippy::identity_op)] // scenario times read better as `1 * S`


use ratelane::shared::{MemoryStore, Reservation, SharedConfig, SharedScope, SharedUpdate};
use serde_json::{Value, json};

#[path = "support/shared_json.rs"]
mod shared_json;
#[path = "support/vector_files.rs"]
mod vector_files;
use vector_files::{check_fresh, pretty, vectors_dir};
use shared_json::{answer_json, reservation_from, reservation_json, update_from, update_json};

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;


fn config_json(c: &SharedConfig) -> Value {
    json!({"lease_ns": c.lease, "pioneer_poll_ns": c.pioneer_poll, "state_ttl_ns": c.state_ttl})
}

fn config_from(v: &Value) -> SharedConfig {
    let mut c = SharedConfig::default();
    c.lease = v["lease_ns"].as_u64().expect("lease_ns");
    c.pioneer_poll = v["pioneer_poll_ns"].as_u64().expect("pioneer_poll_ns");
    c.state_ttl = v["state_ttl_ns"].as_u64().expect("state_ttl_ns");
    c
}

/// Runs the steps' inputs; returns them with `answer` (for `reserve`) and `keys` filled in.
fn run_steps(config: &SharedConfig, steps: &[Value]) -> Vec<Value> {
    let mut store = MemoryStore::new(config);
    steps
        .iter()
        .map(|step| {
            let at = step["at_ns"].as_u64().expect("at_ns");
            let client = step["client"].as_str().expect("client");
            let mut s = step.clone();
            match step["op"].as_str().expect("op") {
                "reserve" => {
                    let answer = store.reserve(at, client, &reservation_from(&step["reservation"]));
                    s["answer"] = answer_json(&answer);
                }
                "record" => store.record(at, client, &update_from(&step["update"])),
                other => panic!("unknown op {other}"),
            }
            s["keys"] = json!(store.keys(at));
            s
        })
        .collect()
}

struct Script {
    steps: Vec<Value>,
}

impl Script {
    fn new() -> Self {
        Script { steps: Vec::new() }
    }
    fn reserve(mut self, at: u64, client: &str, r: Reservation) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "reserve", "client": client, "reservation": reservation_json(&r)}));
        self
    }
    fn record(mut self, at: u64, client: &str, u: SharedUpdate) -> Self {
        self.steps.push(json!({"at_ns": at, "op": "record", "client": client, "update": update_json(&u)}));
        self
    }
}

/// A reservation of request `id` on `route` / `major` by identity "bot", with a global limit of
/// 50 per 1.1 s (1 s + a 100 ms margin) and no invalid-request budget.
fn res(id: u64, route: &str, major: &str) -> Reservation {
    Reservation {
        id,
        identity: "bot".into(),
        route: route.into(),
        major: major.into(),
        bucket: None,
        counts_global: true,
        global_limit: 50,
        global_want: 1,
        global_window: 1_100 * MS,
        margin: 100 * MS,
        invalid_limit: 0,
        invalid_window: 0,
        ..Reservation::default()
    }
}

const MSG: &str = "POST /channels/:id/messages";

#[allow(clippy::too_many_arguments)]
fn report(id: u64, route: &str, major: &str, bucket: Option<&str>, limit: Option<u32>, remaining: Option<u32>, reset_after: Option<u64>, window: Option<u64>) -> SharedUpdate {
    SharedUpdate::Bucket {
        id,
        identity: "bot".into(),
        route: route.into(),
        major: major.into(),
        bucket: bucket.map(str::to_string),
        unlimited: false,
        limit,
        remaining,
        reset_after,
        window,
    }
}

fn release(id: u64, route: &str, major: &str, bucket: Option<&str>, reached: bool) -> SharedUpdate {
    SharedUpdate::Release {
        id,
        identity: "bot".into(),
        route: route.into(),
        major: major.into(),
        bucket: bucket.map(str::to_string),
        reached,
        window: None,
    }
}

fn hold(scope: SharedScope, route: &str, major: &str, bucket: Option<&str>, retry_after: u64) -> SharedUpdate {
    SharedUpdate::Hold {
        scope,
        identity: "bot".into(),
        route: route.into(),
        major: major.into(),
        bucket: bucket.map(str::to_string),
        retry_after,
    }
}

struct Case {
    file: &'static str,
    comment: &'static str,
    config: SharedConfig,
    script: Script,
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    let with_bucket = |mut r: Reservation, h: &str| {
        r.bucket = Some(h.into());
        r
    };

    v.push(Case {
        file: "buckets",
        comment: "Buckets: the first request of an unknown route takes the pioneer lock and another client's waits \
                  (pioneer, the poll interval); the pioneer's report creates the bucket and maps the route, so the \
                  other client's request finds it; grants count down `remaining`; a stale report (a grant carried \
                  into the next window) changes nothing but keeps its grant counting as a ghost, one window past \
                  its grant; \
                  an exhausted bucket denies until its reset; the window that follows is started by the store with \
                  unanswered grants carried; a grant that was never sent comes back (release, not reached); a 5xx \
                  answer leaves a ghost that keeps counting one window past its grant.",
        config: SharedConfig::default(),
        script: Script::new()
            .reserve(0, "a", res(1, MSG, "1"))
            .reserve(1 * MS, "b", res(1, MSG, "1"))
            .record(100 * MS, "a", report(1, MSG, "1", Some("h"), Some(3), Some(2), Some(2_000 * MS), Some(2_100 * MS)))
            .reserve(110 * MS, "b", res(1, MSG, "1"))
            .reserve(111 * MS, "b", res(2, MSG, "1"))
            .reserve(112 * MS, "a", with_bucket(res(2, MSG, "1"), "h"))
            .record(200 * MS, "b", report(1, MSG, "1", Some("h"), Some(3), Some(1), Some(1_900 * MS), None))
            .reserve(2_100 * MS, "a", with_bucket(res(2, MSG, "1"), "h"))
            .record(2_150 * MS, "b", report(2, MSG, "1", Some("h"), Some(3), Some(0), Some(1_850 * MS), None))
            .record(2_200 * MS, "a", report(2, MSG, "1", Some("h"), Some(3), Some(2), Some(2_000 * MS), None))
            .reserve(2_300 * MS, "c", with_bucket(res(7, MSG, "1"), "h"))
            .record(2_301 * MS, "c", release(7, MSG, "1", Some("h"), false))
            .reserve(2_302 * MS, "c", with_bucket(res(8, MSG, "1"), "h"))
            .record(2_400 * MS, "c", report(8, MSG, "1", Some("h"), None, None, None, None))
            .reserve(4_200 * MS, "a", with_bucket(res(3, MSG, "1"), "h"))
            .reserve(4_201 * MS, "a", with_bucket(res(4, MSG, "1"), "h"))
            .reserve(4_202 * MS, "a", with_bucket(res(5, MSG, "1"), "h"))
            .reserve(4_203 * MS, "b", res(3, MSG, "2")),
    });

    v.push(Case {
        file: "ghost_window",
        comment: "A ghost follows what its bucket learns later: the first report (seen late in its window) gives a \
                  600 ms window; a 5xx leaves a ghost that would end 600 ms after its grant; a later report says \
                  the window is 2 s (and 1 left, the 5xx not yet counted there): the ghost now counts until its \
                  grant plus 2 s, so a reservation after the old end is still denied, until the window's reset; \
                  the ghost is carried into the next window.",
        config: SharedConfig::default(),
        script: Script::new()
            .reserve(0, "a", res(1, MSG, "1"))
            .record(100 * MS, "a", report(1, MSG, "1", Some("h"), Some(3), Some(2), Some(500 * MS), Some(600 * MS)))
            .reserve(110 * MS, "b", with_bucket(res(1, MSG, "1"), "h"))
            .reserve(111 * MS, "b", with_bucket(res(2, MSG, "1"), "h"))
            .record(150 * MS, "b", report(1, MSG, "1", Some("h"), None, None, None, None))
            .record(160 * MS, "b", report(2, MSG, "1", Some("h"), Some(3), Some(1), Some(1_900 * MS), Some(2_000 * MS)))
            .reserve(800 * MS, "c", with_bucket(res(1, MSG, "1"), "h"))
            .reserve(2_100 * MS, "c", with_bucket(res(1, MSG, "1"), "h")),
    });

    v.push(Case {
        file: "hash_window",
        comment: "One hash, one window for all its majors: major 1 reports a 2 s window; major 2 is first seen \
                  through an answer late in its window (500 ms left, estimated 600 ms), and takes the hash's 2 s \
                  window instead; its next grant, answered by a 5xx, counts as a ghost for 2 s (not 600 ms), so a \
                  reservation 700 ms later is still denied, and one after the 2 s window is granted.",
        config: SharedConfig::default(),
        script: Script::new()
            .reserve(0, "a", res(1, MSG, "1"))
            .record(100 * MS, "a", report(1, MSG, "1", Some("h"), Some(1), Some(0), Some(2_000 * MS), Some(2_000 * MS)))
            .reserve(200 * MS, "b", with_bucket(res(1, MSG, "2"), "h"))
            .record(300 * MS, "b", report(1, MSG, "2", Some("h"), Some(1), Some(0), Some(500 * MS), Some(600 * MS)))
            .reserve(900 * MS, "b", with_bucket(res(2, MSG, "2"), "h"))
            .record(950 * MS, "b", report(2, MSG, "2", Some("h"), None, None, None, None))
            .reserve(1_600 * MS, "b", with_bucket(res(3, MSG, "2"), "h"))
            .reserve(3_000 * MS, "b", with_bucket(res(3, MSG, "2"), "h")),
    });

    let global = |id: u64, major: &str| {
        let mut r = res(id, "GET /guilds/:id", major);
        r.global_limit = 2;
        r.global_window = 1_000 * MS;
        r
    };
    let unlimited = |id: u64, major: &str| SharedUpdate::Bucket {
        id,
        identity: "bot".into(),
        route: "GET /guilds/:id".into(),
        major: major.into(),
        bucket: None,
        unlimited: true,
        limit: None,
        remaining: None,
        reset_after: None,
        window: None,
    };
    v.push(Case {
        file: "global",
        comment: "The global limit: 2 grants per 1 s window (as passed by the reservation) across clients; the third \
                  is denied until the oldest leaves the window; a request that does not count (exempt) still goes; a \
                  grant that was never sent gives its place back; a global 429 shared as a hold pauses the identity.",
        config: SharedConfig::default(),
        script: Script::new()
            .reserve(0, "a", global(1, "1"))
            .record(50 * MS, "a", unlimited(1, "1"))
            .reserve(60 * MS, "b", global(1, "2"))
            .reserve(70 * MS, "a", global(2, "3"))
            .reserve(80 * MS, "a", {
                let mut r = global(3, "4");
                r.counts_global = false;
                r
            })
            .record(90 * MS, "b", release(1, "GET /guilds/:id", "2", None, false))
            .reserve(100 * MS, "a", global(2, "3"))
            .reserve(1_000 * MS, "b", global(4, "5"))
            .record(1_100 * MS, "b", hold(SharedScope::Global, "GET /guilds/:id", "5", None, 5 * S))
            .reserve(1_200 * MS, "a", global(5, "6"))
            .reserve(1_300 * MS, "a", {
                let mut r = global(6, "7");
                r.counts_global = false;
                r
            }),
    });

    let lease = |id: u64, major: &str, want: u32| {
        let mut r = res(id, "GET /guilds/:id", major);
        r.global_limit = 5;
        r.global_window = 1_000 * MS;
        r.global_want = want;
        r
    };
    v.push(Case {
        file: "global_lease",
        comment: "Global leases: 5 grants per 1 s window; a reservation asking for 3 tokens takes \
                  its own and leases 2 more (answer `leased`), each counted in the window like a \
                  grant and listed as a's (key gl); one asking for 4 when 2 are left takes what \
                  there is (1 leased); the next is denied until the oldest leaves the window; \
                  spending a leased token (global_want 0) skips the full window and moves the token \
                  to now; releasing a grant that was never sent gives back its own token, not the \
                  lease; a client without a lease asking with global_want 0 is checked against the \
                  window; a leased token that left the window unspent is not found, and that \
                  reservation takes the window's room like any other; the next lease takes what the \
                  window has room for.",
        config: SharedConfig::default(),
        script: Script::new()
            .reserve(0, "a", lease(1, "1", 3))
            .reserve(10 * MS, "b", lease(1, "2", 4))
            .reserve(20 * MS, "a", lease(2, "3", 2))
            .reserve(30 * MS, "a", lease(3, "4", 0))
            .record(40 * MS, "a", release(1, "GET /guilds/:id", "1", None, false))
            .reserve(50 * MS, "b", lease(2, "5", 3))
            .reserve(60 * MS, "b", lease(3, "6", 1))
            .reserve(70 * MS, "c", lease(1, "9", 0))
            .reserve(1_000 * MS, "a", lease(4, "7", 0))
            .reserve(1_010 * MS, "a", lease(5, "8", 9)),
    });

    let budget = |id: u64, major: &str| {
        let mut r = res(id, "GET /guilds/:id", major);
        r.invalid_limit = 2;
        r.invalid_window = 10 * S;
        r
    };
    v.push(Case {
        file: "holds",
        comment: "Holds and the invalid-request budget: two invalid responses reach the budget (2 per 10 s) and \
                  reservations are denied until the oldest leaves the window; an edge hold (Cloudflare ban) denies \
                  everything; a route hold (sub-limit) denies that route and major parameter only; a bucket hold \
                  (shared-resource 429) denies the bucket.",
        config: SharedConfig::default(),
        script: Script::new()
            .record(0, "a", SharedUpdate::Invalid { id: 1, window: 10 * S })
            .reserve(100 * MS, "a", budget(2, "1"))
            .record(200 * MS, "b", SharedUpdate::Invalid { id: 1, window: 10 * S })
            .reserve(300 * MS, "a", budget(3, "2"))
            .reserve(400 * MS, "a", res(3, "GET /guilds/:id", "2"))
            .record(10_000 * MS, "a", hold(SharedScope::Edge, "GET /guilds/:id", "2", None, 60 * S))
            .reserve(10_100 * MS, "a", budget(4, "3"))
            .reserve(70_000 * MS, "a", budget(4, "3"))
            .record(70_100 * MS, "a", report(4, "PATCH /channels/:id", "9", Some("rename"), Some(2), Some(1), Some(600 * S), None))
            .record(70_200 * MS, "a", hold(SharedScope::Route, "PATCH /channels/:id", "9", Some("rename"), 300 * S))
            .reserve(70_300 * MS, "b", res(1, "PATCH /channels/:id", "9"))
            .reserve(70_400 * MS, "b", res(2, "PATCH /channels/:id", "8"))
            .record(70_500 * MS, "b", report(2, MSG, "8", Some("msg"), Some(5), Some(4), Some(5 * S), None))
            .record(70_600 * MS, "b", hold(SharedScope::Bucket, MSG, "8", Some("msg"), 1_337 * S))
            .reserve(70_700 * MS, "a", res(5, MSG, "8"))
            .reserve(70_800 * MS, "a", res(6, MSG, "7")),
    });

    v.push(Case {
        file: "reported",
        comment: "What a bucket still allows is its lowest report in the window minus the unanswered grants, \
                  recomputed as answers come in: x's report (remaining 2) already counts y, which arrived first but \
                  is not answered yet, so for a moment only 1 more is allowed; once y's report is in, 2 are.",
        config: SharedConfig::default(),
        script: Script::new()
            .reserve(0, "a", with_bucket(res(1, MSG, "5"), "h"))
            .record(100 * MS, "a", report(1, MSG, "5", Some("h"), Some(5), Some(4), Some(5 * S), Some(5 * S)))
            .reserve(110 * MS, "b", with_bucket(res(1, MSG, "5"), "h"))
            .reserve(111 * MS, "a", with_bucket(res(2, MSG, "5"), "h"))
            .record(200 * MS, "a", report(2, MSG, "5", Some("h"), Some(5), Some(2), Some(4_900 * MS), None))
            .record(210 * MS, "b", report(1, MSG, "5", Some("h"), Some(5), Some(3), Some(4_900 * MS), None))
            .reserve(300 * MS, "a", with_bucket(res(3, MSG, "5"), "h"))
            .reserve(301 * MS, "a", with_bucket(res(4, MSG, "5"), "h"))
            .reserve(302 * MS, "a", with_bucket(res(5, MSG, "5"), "h")),
    });

    v.push(Case {
        file: "later_window",
        comment: "An answer can show that its bucket's window is over at the server before the store's reset: b's \
                  second request was granted at 1.001 s, before the window a's reports end at 1.1 s, but its \
                  window ends 1 s after it left, so at least at 2.001 s: it reached the server after every \
                  request those reports came from, in the next window. Its report (remaining 2 of 3) starts a new \
                  window instead of joining the old one (whose lowest report, 1, held the next window to a \
                  single grant until 2.09 s): a's requests 3 and 4 are granted, 5 is denied.",
        config: SharedConfig::default(),
        script: Script::new()
            .reserve(0, "a", with_bucket(res(1, MSG, "5"), "h"))
            .record(100 * MS, "a", report(1, MSG, "5", Some("h"), Some(3), Some(2), Some(1 * S), Some(1 * S)))
            .reserve(1_000 * MS, "a", with_bucket(res(2, MSG, "5"), "h"))
            .reserve(1_001 * MS, "b", with_bucket(res(2, MSG, "5"), "h"))
            .record(1_050 * MS, "a", report(2, MSG, "5", Some("h"), Some(3), Some(1), Some(50 * MS), None))
            .record(1_090 * MS, "b", report(2, MSG, "5", Some("h"), Some(3), Some(2), Some(1 * S), None))
            .reserve(1_095 * MS, "a", with_bucket(res(3, MSG, "5"), "h"))
            .reserve(1_096 * MS, "a", with_bucket(res(4, MSG, "5"), "h"))
            .reserve(1_097 * MS, "a", with_bucket(res(5, MSG, "5"), "h")),
    });

    const EDIT: &str = "PATCH /channels/:id";
    v.push(Case {
        file: "pioneers",
        comment: "One pioneer per route and major, whether or not the prober knows the route's bucket: b knows \
                  bucket h from earlier but the store has no state for it, and a (which does not know it) is \
                  probing the route, so b waits; c, knowing bucket k without state, takes both the bucket's and \
                  the route's lock, so d (route unknown to it) and e (another route of bucket k) wait; c's \
                  release (never sent) frees both.",
        config: SharedConfig::default(),
        script: Script::new()
            .reserve(0, "a", res(1, MSG, "1"))
            .reserve(1 * MS, "b", with_bucket(res(1, MSG, "1"), "h"))
            .record(100 * MS, "a", report(1, MSG, "1", Some("h"), Some(5), Some(4), Some(2 * S), Some(2 * S)))
            .reserve(110 * MS, "b", with_bucket(res(1, MSG, "1"), "h"))
            .reserve(200 * MS, "c", with_bucket(res(1, EDIT, "2"), "k"))
            .reserve(201 * MS, "d", res(1, EDIT, "2"))
            .reserve(202 * MS, "e", with_bucket(res(1, "PATCH /channels/:id/topic", "2"), "k"))
            .record(250 * MS, "c", release(1, EDIT, "2", Some("k"), false))
            .reserve(260 * MS, "d", res(1, EDIT, "2")),
    });

    let mut short = SharedConfig::default();
    short.lease = 1 * S;
    short.pioneer_poll = 100 * MS;
    short.state_ttl = 5 * S;
    v.push(Case {
        file: "expiry",
        comment: "Expiry with lease 1 s and state_ttl 5 s: a pioneer whose client vanished holds the lock for the \
                  lease only (the poll answer shrinks to the lock's remaining time); bucket state and route mappings \
                  expire state_ttl after their reset / last write, and the route is probed by a pioneer again.",
        config: short,
        script: Script::new()
            .reserve(0, "a", res(1, MSG, "1"))
            .reserve(950 * MS, "b", res(1, MSG, "1"))
            .reserve(1_000 * MS, "b", res(1, MSG, "1"))
            .record(1_100 * MS, "b", report(1, MSG, "1", Some("h"), Some(5), Some(4), Some(2 * S), Some(2 * S)))
            .reserve(1_200 * MS, "c", res(1, MSG, "1"))
            .record(1_300 * MS, "c", report(1, MSG, "1", Some("h"), Some(5), Some(3), Some(1_800 * MS), None))
            .reserve(6_000 * MS, "c", res(2, MSG, "1"))
            .reserve(8_200 * MS, "c", res(3, MSG, "1"))
            .reserve(8_300 * MS, "a", res(2, MSG, "1")),
    });

    let mut short = SharedConfig::default();
    short.lease = 1 * S;
    let outage = |id: u64, since: Option<u64>, reporting: bool, unrecorded: &[u64], granted: &[u64]| {
        let mut r = res(id, "GET /guilds/:id", "1");
        r.global_limit = 5;
        r.global_window = 1_000 * MS;
        r.processes_since = since;
        r.reporting = reporting;
        r.unrecorded = unrecorded.to_vec();
        r.granted = granted.to_vec();
        r
    };
    v.push(Case {
        file: "outage_report",
        comment: "After an outage (5 grants per 1 s window; the route has no bucket): a's reservation reports two                   sends made without the store (unrecorded_ns: how long before now) and the store counts them                   at those times on its own clock, so b is denied until the oldest entry leaves the window; a                   report sent again (its answer was lost) replaces the first and counts once; the granted                   sends of a client the store does not know (not among its live processes: it lost its                   state) count, those of a client it knows are ignored (it has them); a reservation                   `reporting` does not refresh its client among the live processes, and `processes_since_ns`                   counts only the clients that reserved (not reporting) within that long.",
        config: SharedConfig::default(),
        script: Script::new()
            .record(0, "a", unlimited(0, "1"))
            .reserve(0, "a", outage(1, None, false, &[], &[]))
            .reserve(100 * MS, "b", outage(1, None, false, &[], &[]))
            .reserve(500 * MS, "a", outage(2, Some(400 * MS), true, &[300 * MS, 200 * MS], &[]))
            .reserve(510 * MS, "b", outage(2, None, false, &[], &[]))
            .reserve(520 * MS, "a", outage(3, Some(420 * MS), true, &[320 * MS, 220 * MS], &[]))
            .reserve(1_000 * MS, "b", outage(3, None, false, &[], &[]))
            .reserve(1_050 * MS, "c", outage(1, Some(1_000 * MS), true, &[50 * MS], &[850 * MS]))
            .reserve(1_060 * MS, "a", outage(4, Some(1_000 * MS), true, &[], &[560 * MS]))
            .reserve(1_070 * MS, "c", outage(2, Some(1_000 * MS), false, &[], &[]))
            .reserve(1_200 * MS, "a", outage(5, Some(1_200 * MS), false, &[], &[])),
    });

    v.push(Case {
        file: "processes",
        comment: "Live processes (lease 1 s): every answer, granted or denied, carries how many clients reserved \
                  within the last lease, the caller included (the `procs` key: one member per client, its latest \
                  reserve). A record does not count; a client that has not reserved for a lease drops out of the \
                  count, and the key expires a lease after the last reserve.",
        config: short,
        script: Script::new()
            .reserve(0, "a", res(1, "GET /users/@me", ""))
            .reserve(100 * MS, "b", res(1, "GET /users/@me", ""))
            .reserve(200 * MS, "c", res(1, "GET /users/@me", ""))
            .reserve(300 * MS, "a", res(2, "GET /gateway", ""))
            .record(500 * MS, "d", report(1, "GET /users/@me", "", Some("me"), Some(5), Some(4), Some(1 * S), Some(1 * S)))
            .reserve(1_150 * MS, "a", res(3, "GET /users/@me", ""))
            .reserve(1_350 * MS, "a", res(4, "GET /users/@me", ""))
            .reserve(3_000 * MS, "b", res(2, "GET /users/@me", "")),
    });
    v
}

fn render(case: &Case) -> Value {
    json!({
        "_comment": case.comment,
        "kind": "store",
        "config": config_json(&case.config),
        "steps": run_steps(&case.config, &case.script.steps),
    })
}

#[test]
fn store_vectors_are_fresh() {
    let cases = cases();
    let files = cases.iter().map(|case| (case.file, pretty(&render(case)))).collect();
    check_fresh("store_", files, "store vector", "store_vectors");
}

#[test]
fn store_vectors_replay() {
    let mut count = 0;
    for entry in std::fs::read_dir(vectors_dir()).expect("tests/vectors") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("store_") && name.ends_with(".json")) {
            continue;
        }
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(file["kind"], "store", "{name}");
        let config = config_from(&file["config"]);
        let expected = file["steps"].as_array().expect("steps");
        let inputs: Vec<Value> = expected
            .iter()
            .map(|s| {
                let mut s = s.clone();
                let o = s.as_object_mut().unwrap();
                o.remove("answer");
                o.remove("keys");
                s
            })
            .collect();
        for (i, (a, e)) in run_steps(&config, &inputs).iter().zip(expected).enumerate() {
            assert_eq!(a, e, "{name}: step {i} differs");
        }
        count += 1;
    }
    assert!(count > 0, "no store vectors found");
}
