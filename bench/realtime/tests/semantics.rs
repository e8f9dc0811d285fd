//! The Scoreboard's instrument, checked without a clock: what the imitation answers, what it
//! counts, and the bound (exact on every workload: a schedule reaches it, and the imitation
//! accepts that schedule without a single 429).

use ratelane::sim::SplitMix64;
use ratelane::sim::{ServerOutcome, WindowKind};
use ratelane::{MILLISECOND, Nanos, SECOND};
use ratelane_realtime::imitation::{Imitation, Incoming};
use ratelane_realtime::limits::{
    self, HASH_MESSAGE_EDIT, Limits, ROUTE_HISTORY, ROUTE_MESSAGE, ROUTE_MESSAGE_DELETE, ROUTE_MESSAGE_EDIT, ROUTE_MESSAGE_GET,
    ROUTE_REACT_DELETE_ALL, ROUTE_REACT_PUT,
};
use ratelane_realtime::schedule::{Resource, bound, chains, resources, schedule};
use ratelane_realtime::score::{ClientReport, RunFigures, WorkloadRuns, table};
use ratelane_realtime::workload::{self, Kind, Req, TOKEN, Workload};

const AUTH: &str = "Bot bench-token-1";
const CH: &str = "200000000000000001";

fn get<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn send(imitation: &mut Imitation, at: Nanos, method: &str, target: &str, body: &str) -> u16 {
    let answer = imitation.handle(
        at,
        &Incoming {
            method,
            target,
            authorization: Some(AUTH),
            body: body.as_bytes(),
        },
    );
    if let Some(key) = &answer.in_flight {
        imitation.answered(key);
    }
    answer.status
}

fn body(req: &Req) -> Vec<u8> {
    req.json
        .as_ref()
        .map(|v| v.to_string().into_bytes())
        .unwrap_or_default()
}

/// Replays `workload` arriving at `arrivals` (by index) through a fresh imitation, in time
/// order; returns it.
fn replay(limits: &Limits, workload: &Workload, arrivals: &[Nanos]) -> Imitation {
    let mut imitation = Imitation::new(limits, 1_700_000_000_000);
    let mut order: Vec<usize> = (0..arrivals.len()).collect();
    order.sort_by_key(|&i| (arrivals[i], i));
    let auth = format!("Bot {TOKEN}");
    for i in order {
        let req = &workload.requests[i];
        let target = format!("/api/v10{}?rid={}", req.path, req.rid);
        let body = body(req);
        imitation.handle(
            arrivals[i],
            &Incoming {
                method: req.method,
                target: &target,
                authorization: req.auth.then_some(auth.as_str()),
                body: &body,
            },
        );
    }
    imitation
}

fn both_kinds() -> [Limits; 2] {
    [
        Limits::scoreboard(),
        Limits::discord(0.2, 250, 20 * MILLISECOND, WindowKind::Sliding),
    ]
}

#[test]
fn every_workload_route_is_known_and_rids_are_unique() {
    let limits = Limits::scoreboard();
    for w in workload::all() {
        let mut imitation = Imitation::new(&limits, 0);
        for (i, req) in w.requests.iter().enumerate() {
            assert_eq!(req.rid, i as u64, "{}: rids number the requests", w.name);
            let target = format!("/api/v10{}?rid={}", req.path, req.rid);
            let body = body(req);
            let answer = imitation.handle(
                0,
                &Incoming {
                    method: req.method,
                    target: &target,
                    authorization: req.auth.then_some(AUTH),
                    body: &body,
                },
            );
            assert_ne!(
                answer.status, 404,
                "{}: {} {}",
                w.name, req.method, req.path
            );
        }
        assert_eq!(imitation.tally().unknown, 0);
        assert_eq!(imitation.tally().without_rid, 0);
    }
}

#[test]
fn the_bound_is_reached_by_a_schedule_the_imitation_accepts_whole() {
    for limits in both_kinds() {
        for w in workload::all() {
            let b = bound(&limits, &w);
            let arrivals = schedule(&limits, &w);
            let last = arrivals.iter().copied().max().unwrap_or(0);
            assert_eq!(
                last, b.last_arrival,
                "{} ({:?}): the greedy schedule meets the bound exactly",
                w.name, limits.message.kind
            );
            assert_eq!(
                b.makespan,
                limits.latency_request + last + limits.latency_response
            );
            let imitation = replay(&limits, &w, &arrivals);
            let t = imitation.tally();
            assert_eq!(t.arrivals, w.requests.len());
            assert_eq!(
                t.global_429 + t.bucket_429 + t.sub_429 + t.shared_429 + t.banned_429,
                0,
                "{}: the bound's schedule is within every limit: {t:?}",
                w.name
            );
            assert!(w.requests.iter().all(|r| t.accepted(r.rid)));
            assert_eq!(t.duplicates(), 0);
        }
    }
}

#[test]
fn no_schedule_beats_the_bound_on_its_binding_limit() {
    // Move the binding limit's last arrival 1 ns earlier: the imitation rejects something.
    let limits = Limits::scoreboard();
    for w in workload::all() {
        let b = bound(&limits, &w);
        let Some(binding) = b.binding.clone() else {
            continue;
        };
        let mut arrivals = schedule(&limits, &w);
        let last = w
            .requests
            .iter()
            .enumerate()
            .filter(|(_, r)| resources(&limits, r).iter().any(|(res, _)| *res == binding))
            .map(|(i, _)| i)
            .max_by_key(|&i| (arrivals[i], i))
            .expect("the binding limit has requests");
        assert_eq!(arrivals[last], b.last_arrival, "{}", w.name);
        arrivals[last] -= 1;
        let imitation = replay(&limits, &w, &arrivals);
        let t = imitation.tally();
        assert!(
            t.global_429 + t.bucket_429 + t.sub_429 + t.shared_429 > 0,
            "{}: one arrival earlier than the bound must break a limit ({binding:?})",
            w.name
        );
    }
}

#[test]
fn the_bounds_of_the_scoreboard_workloads() {
    let limits = Limits::scoreboard();
    let s = |w: Workload| bound(&limits, &w).last_arrival;
    // 30 messages, 5 per 1 s window: 5 more windows after the first.
    assert_eq!(s(workload::deep_queue()), 5 * SECOND);
    // 600 requests, 250 per second: 2 more windows.
    assert_eq!(s(workload::many_channels()), 2 * SECOND);
    // 40 reactions, 1 per 50 ms.
    assert_eq!(s(workload::reactions()), 39 * 50 * MILLISECOND);
    // 30 requests on the shared reaction hash.
    assert_eq!(s(workload::mixed()), 29 * 50 * MILLISECOND);
    // Three renames, 2 per 3 s: the third waits one sub-limit window.
    assert_eq!(s(workload::sub_limit()), 3 * SECOND);
    // 2,000 at 250 per second.
    assert_eq!(s(workload::global_cap()), 7 * SECOND);
    // 12 pins at 3 per shared window of 1 s.
    assert_eq!(s(workload::shared_pins()), 3 * SECOND);
    // 300 messages at 250 per second; the callbacks are exempt.
    assert_eq!(s(workload::interactions()), SECOND);
    let b = bound(&limits, &workload::shared_pins());
    assert!(matches!(b.binding, Some(Resource::Shared(..))));
    assert_eq!(b.makespan, 3 * SECOND + 20 * MILLISECOND);
    // The first channel's 15 edits and deletes, one bucket of 5 per 1 s window.
    let b = bound(&limits, &workload::first_contact());
    assert_eq!(b.last_arrival, 2 * SECOND);
    assert!(matches!(&b.binding, Some(Resource::Bucket(_, hash, _)) if hash == HASH_MESSAGE_EDIT));
    // 60 messages, 5 per 1 s window: 11 more windows.
    assert_eq!(s(workload::one_channel()), 11 * SECOND);
}

#[test]
fn first_contact_has_twelve_routes_and_three_shared_hashes() {
    let w = workload::first_contact();
    assert_eq!(w.requests.len(), 96);
    let routes: std::collections::BTreeSet<String> =
        w.requests.iter().map(|r| ratelane::route::route_for(ratelane::HeaderProfile::Discord, r.method, &r.path).key).collect();
    assert_eq!(routes.len(), 12, "{routes:?}");
    // Edits and deletes, and a channel's and one message's reads, share a hash each: a client
    // learns it only from their answers.
    let config = Limits::scoreboard().server_config(0);
    let hash = |route: &str| config.routes[route].bucket.clone();
    assert_eq!(hash(ROUTE_MESSAGE_EDIT), hash(ROUTE_MESSAGE_DELETE));
    assert_eq!(hash(ROUTE_HISTORY), hash(ROUTE_MESSAGE_GET));
    assert_eq!(hash(ROUTE_REACT_DELETE_ALL), hash(ROUTE_REACT_PUT));
    assert_ne!(hash(ROUTE_MESSAGE_DELETE), hash(ROUTE_MESSAGE));
}

#[test]
fn the_reference_rule_holds_every_limit_whatever_the_delays() {
    // Each arrival as late as the chains allow plus a random delay (0 to 20 ms): the imitation
    // never answers 429. With no delay, the chains meet the plan.
    for limits in both_kinds() {
        for w in workload::all() {
            let plan = schedule(&limits, &w);
            let waits = chains(&limits, &w, &plan);
            let mut order: Vec<usize> = (0..plan.len()).collect();
            order.sort_by_key(|&i| (plan[i], i));
            let mut rng = SplitMix64::new(w.requests.len() as u64);
            for jitter in [0, 20 * MILLISECOND] {
                let mut at = vec![0; plan.len()];
                for &i in &order {
                    let ready = waits[i].iter().map(|&(j, window)| at[j] + window).max();
                    let base = ready
                        .unwrap_or(0)
                        .max(if jitter == 0 { plan[i] } else { 0 });
                    at[i] = base + if jitter == 0 { 0 } else { rng.below(jitter) };
                }
                if jitter == 0 {
                    assert_eq!(at, plan, "{}: the chains meet the plan", w.name);
                }
                let t = replay(&limits, &w, &at).tally().clone();
                assert_eq!(
                    t.global_429 + t.bucket_429 + t.sub_429 + t.shared_429,
                    0,
                    "{} ({:?}, jitter {jitter}): {t:?}",
                    w.name,
                    limits.message.kind
                );
            }
        }
    }
}

#[test]
fn renames_meet_the_hidden_sub_limit_and_other_edits_do_not() {
    let limits = Limits::scoreboard();
    let mut imitation = Imitation::new(&limits, 0);
    let target = format!("/api/v10/channels/{CH}?rid=1");
    assert_eq!(
        send(&mut imitation, 0, "PATCH", &target, r#"{"name":"a"}"#),
        200
    );
    assert_eq!(
        send(&mut imitation, 1, "PATCH", &target, r#"{"topic":"b"}"#),
        200
    );
    // The third rename: a 429 while the bucket still has room.
    let answer = imitation.handle(
        2,
        &Incoming {
            method: "PATCH",
            target: &target,
            authorization: Some(AUTH),
            body: br#"{"name":"c"}"#,
        },
    );
    assert_eq!(answer.status, 429);
    assert_eq!(get(&answer.headers, "X-RateLimit-Remaining"), Some("3"));
    assert_eq!(get(&answer.headers, "X-RateLimit-Scope"), Some("user"));
    assert_eq!(
        get(&answer.headers, "X-RateLimit-Bucket"),
        Some(limits::HASH_EDIT)
    );
    assert_eq!(get(&answer.headers, "Retry-After"), Some("3"));
    // An edit of something else goes through, on the same bucket.
    let ok = imitation.handle(
        3,
        &Incoming {
            method: "PATCH",
            target: &target,
            authorization: Some(AUTH),
            body: br#"{"nsfw":true}"#,
        },
    );
    assert_eq!(ok.status, 200);
    assert_eq!(get(&ok.headers, "X-RateLimit-Remaining"), Some("2"));
    assert_eq!(imitation.tally().sub_429, 1);
    assert_eq!(imitation.tally().invalid, 1);
    let log = imitation.server().log();
    assert_eq!(log[2].outcome, ServerOutcome::SubLimited);
    assert_eq!(log[3].route, limits::ROUTE_EDIT);
}

#[test]
fn the_shared_limit_answers_shared_and_is_not_invalid() {
    let limits = Limits::scoreboard();
    let mut imitation = Imitation::new(&limits, 0);
    let target = format!("/api/v10/channels/{CH}/pins/300000000000000001?rid=0");
    for i in 0..3 {
        assert_eq!(send(&mut imitation, i, "PUT", &target, ""), 200);
    }
    let answer = imitation.handle(
        3,
        &Incoming {
            method: "PUT",
            target: &target,
            authorization: Some(AUTH),
            body: b"",
        },
    );
    assert_eq!(answer.status, 429);
    assert_eq!(get(&answer.headers, "X-RateLimit-Scope"), Some("shared"));
    // The bot's own bucket still has a slot left: 5 - 4.
    assert_eq!(get(&answer.headers, "X-RateLimit-Remaining"), Some("1"));
    assert!(answer.body.contains("The resource is being rate limited."));
    assert_eq!(imitation.tally().shared_429, 1);
    assert_eq!(imitation.tally().invalid, 0);
}

#[test]
fn the_global_limit_counts_arrivals_and_spares_interaction_callbacks() {
    let limits = Limits::discord(0.2, 3, 20 * MILLISECOND, WindowKind::Fixed);
    let mut imitation = Imitation::new(&limits, 0);
    for ch in 0..3 {
        let target = format!("/api/v10/channels/20000000000000000{ch}/messages?rid={ch}");
        assert_eq!(send(&mut imitation, ch, "POST", &target, "{}"), 200);
    }
    let target = "/api/v10/channels/200000000000000009/messages?rid=3";
    let answer = imitation.handle(
        10,
        &Incoming {
            method: "POST",
            target,
            authorization: Some(AUTH),
            body: b"{}",
        },
    );
    assert_eq!(answer.status, 429);
    assert_eq!(get(&answer.headers, "X-RateLimit-Global"), Some("true"));
    assert_eq!(get(&answer.headers, "X-RateLimit-Scope"), Some("global"));
    assert_eq!(get(&answer.headers, "X-RateLimit-Bucket"), None);
    assert!(answer.body.contains("\"global\": true"));
    // A header-less route counts against the global limit too ...
    assert_eq!(
        send(
            &mut imitation,
            11,
            "GET",
            "/api/v10/voice/regions?rid=4",
            ""
        ),
        429
    );
    // ... an interaction callback (no auth) does not, and has no rate-limit headers.
    let callback = imitation.handle(
        12,
        &Incoming {
            method: "POST",
            target: "/api/v10/interactions/400000000000000001/aW50ZXJh/callback?rid=5",
            authorization: None,
            body: br#"{"type":4}"#,
        },
    );
    assert_eq!(callback.status, 200);
    assert!(
        callback
            .headers
            .iter()
            .all(|(k, _)| !k.starts_with("X-RateLimit"))
    );
    // A new window opens at the first arrival after the last one closed.
    assert_eq!(
        send(
            &mut imitation,
            SECOND,
            "GET",
            "/api/v10/voice/regions?rid=6",
            ""
        ),
        200
    );
    let t = imitation.tally();
    assert_eq!((t.global_429, t.invalid, t.arrivals), (2, 2, 7));
}

#[test]
fn reactions_share_one_hash_across_three_routes() {
    let limits = Limits::scoreboard();
    let mut imitation = Imitation::new(&limits, 0);
    let base = format!("/api/v10/channels/{CH}/messages/300000000000000001/reactions");
    assert_eq!(
        send(
            &mut imitation,
            0,
            "PUT",
            &format!("{base}/a%3A5/@me?rid=0"),
            ""
        ),
        200
    );
    assert_eq!(
        send(
            &mut imitation,
            1,
            "DELETE",
            &format!("{base}/b/@me?rid=1"),
            ""
        ),
        429
    );
    assert_eq!(
        send(&mut imitation, 2, "GET", &format!("{base}/c?rid=2"), ""),
        429
    );
    assert_eq!(
        send(
            &mut imitation,
            50 * MILLISECOND,
            "GET",
            &format!("{base}/c?rid=2"),
            ""
        ),
        200
    );
    let t = imitation.tally();
    assert_eq!(t.bucket_429, 2);
    assert_eq!(t.per_rid.get(&2), Some(&(2, 1)));
}

#[test]
fn accounting_duplicates_in_flight_unknown_routes_and_log_ins() {
    let limits = Limits::scoreboard();
    let mut imitation = Imitation::new(&limits, 0);
    let target = format!("/api/v10/channels/{CH}/messages?rid=9");
    // Two requests in flight to one bucket at once, then the same rid accepted twice.
    let a = imitation.handle(
        0,
        &Incoming {
            method: "POST",
            target: &target,
            authorization: Some(AUTH),
            body: b"{}",
        },
    );
    let b = imitation.handle(
        1,
        &Incoming {
            method: "POST",
            target: &target,
            authorization: Some(AUTH),
            body: b"{}",
        },
    );
    imitation.answered(a.in_flight.as_ref().expect("a bucket"));
    imitation.answered(b.in_flight.as_ref().expect("a bucket"));
    assert_eq!(imitation.tally().duplicates(), 1);
    assert_eq!(imitation.tally().peak_in_flight(), 2);
    assert_eq!(
        imitation.tally().max_in_flight.get(limits::HASH_MESSAGE),
        Some(&2)
    );
    assert_eq!(
        send(&mut imitation, 2, "GET", "/api/v10/nothing/here", ""),
        404
    );
    assert_eq!(imitation.tally().unknown, 1);
    // A log-in is answered with the bot user and kept out of the accounting.
    let me = imitation.handle(
        3,
        &Incoming {
            method: "GET",
            target: "/api/v10/users/@me",
            authorization: Some(AUTH),
            body: b"",
        },
    );
    assert_eq!(me.status, 200);
    assert!(me.body.contains("\"bot\":true"));
    assert_eq!(imitation.tally().arrivals, 2);
}

#[test]
fn a_ban_answers_html_without_rate_limit_headers() {
    let mut limits = Limits::scoreboard();
    limits.invalid_limit = 2;
    let mut imitation = Imitation::new(&limits, 0);
    let base = format!("/api/v10/channels/{CH}/messages/300000000000000001/reactions/x/@me");
    for i in 0..4 {
        send(&mut imitation, i, "PUT", &format!("{base}?rid={i}"), "");
    }
    // Two 429s made the budget; the third invalid request started a ban.
    let answer = imitation.handle(
        10,
        &Incoming {
            method: "PUT",
            target: &format!("{base}?rid=4"),
            authorization: Some(AUTH),
            body: b"",
        },
    );
    assert_eq!(answer.status, 429);
    assert!(answer.body.contains("Error 1015"));
    assert!(get(&answer.headers, "Content-Type").is_some_and(|c| c.starts_with("text/html")));
    assert!(
        answer
            .headers
            .iter()
            .all(|(k, _)| !k.starts_with("X-RateLimit"))
    );
    assert_eq!(imitation.tally().banned_429, 1);
}

#[test]
fn figures_of_a_report() {
    let w = workload::reactions();
    let mut results: Vec<_> = w
        .requests
        .iter()
        .map(|r| ratelane_realtime::score::Outcome {
            rid: r.rid,
            t: Some(1.0 + r.rid as f64 / 100.0),
            status: Some(200),
            error: None,
        })
        .collect();
    results[3].error = Some("RateLimitError".into());
    results[3].status = Some(429);
    results[5].t = None;
    results[5].error = Some("unfinished".into());
    let report = ClientReport {
        client: "x".into(),
        library: String::new(),
        setup_s: 0.0,
        t0_unix_s: None,
        results,
        store: None,
        loop_lag_ms: None,
    };
    let f = RunFigures::new(&w, 1.0, Ok(&report), Default::default());
    assert_eq!((f.failed, f.lost), (1, 1));
    // Something never finished: no utilisation.
    assert_eq!(f.utilisation, None);
    assert!(f.makespan.is_some_and(|m| (m - 1.39).abs() < 1e-9));
    // A run with failed requests is marked in the table: finishing early by giving up is not
    // utilisation.
    let mut failing = f.clone();
    failing.utilisation = Some(1.2);
    let mut runs = WorkloadRuns::default();
    runs.add("x", failing.clone(), failing);
    assert!(table(&w, &runs).contains("| x | 1.20* | 1.00* |"));
    let f = RunFigures::new(&w, 1.0, Err("crashed".into()), Default::default());
    assert_eq!(f.lost, 40);
    assert_eq!(f.problem.as_deref(), Some("crashed"));
    assert!(w.requests.iter().all(|r| r.kind == Kind::Reaction));
}

#[test]
fn the_workload_file_names_warm_connections_only_when_asked() {
    let w = workload::deep_queue();
    let file = |warm| {
        let spec = workload::WorkloadFile {
            workload: w.name,
            base_url: "http://127.0.0.1:1/api/v10",
            token: TOKEN,
            global_limit: 50,
            global_window_s: 1.0,
            deadline_s: 8.0,
            requests: &w.requests,
            warm_connections: warm,
            precise: false,
            reference: None,
        };
        serde_json::to_value(&spec).expect("a workload serializes")
    };
    // Cold (the default): the field is left out, so files read the same as before `--warm`.
    assert!(file(0).get("warm_connections").is_none());
    assert_eq!(file(300)["warm_connections"], 300);
}
