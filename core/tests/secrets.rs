//! Webhook and interaction tokens never leave the engine (issue 44, defect 2): a webhook's
//! token is a credential, and an interaction's token lets anyone answer the interaction. The
//! major parameter holds `route::secret_key(token)` instead (`ratelane::route`, "Secrets"), so
//! nothing the engine emits carries the token: no output (reservations, shared updates,
//! observations, failures and their messages), no store argument (the Redis script's `ARGV`,
//! which is where its keys come from), no snapshot and no error message. The bindings pass
//! what the core emits; the MONITOR capture tests (Python `test_secrets.py`, Node
//! `secrets.test.js`) check the same against a real Redis.

use ratelane::route::{route_for, secret_key};
use ratelane::shared::wire::{self, StoreOp, StoreSettings};
use ratelane::shared::{MemoryStore, OnUnavailable, ReservationAnswer, SharedConfig};
use ratelane::{Config, Failure, HeaderProfile, Limiter, MILLISECOND, Output, Request, Response};

const WEBHOOK_TOKEN: &str = "WEBHOOKSECRETQQQ123abcXYZ-7a_Vq9";
const INTERACTION_TOKEN: &str = "aW50ZXJhY3Rpb246SECRET3MDQ4NTk3";

fn paths() -> Vec<(&'static str, String)> {
    vec![
        ("POST", format!("/api/v10/webhooks/111/{WEBHOOK_TOKEN}")),
        ("POST", format!("/api/v10/webhooks/111/{WEBHOOK_TOKEN}?wait=true")),
        ("PATCH", format!("/webhooks/111/{WEBHOOK_TOKEN}/messages/@original")),
        ("DELETE", format!("https://discord.com/api/v10/webhooks/111/{WEBHOOK_TOKEN}/messages/222")),
        ("POST", format!("/api/v10/interactions/333/{INTERACTION_TOKEN}/callback")),
    ]
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [WEBHOOK_TOKEN, INTERACTION_TOKEN] {
        assert!(!text.contains(secret), "{what} carries a token: {text}");
        // Nor a good part of it.
        assert!(!text.contains(&secret[..12]), "{what} carries part of a token: {text}");
    }
}

#[test]
fn the_route_keeps_the_tokens_hash_not_the_token() {
    for (method, path) in paths() {
        let route = route_for(HeaderProfile::Discord, method, &path);
        assert_no_secret("the route", &format!("{route:?}"));
        assert!(route.major.ends_with(&secret_key(WEBHOOK_TOKEN)) || route.major.ends_with(&secret_key(INTERACTION_TOKEN)), "{route:?}");
    }
    // Two webhooks' tokens are two buckets.
    let a = route_for(HeaderProfile::Discord, "POST", "/webhooks/1/aaaa");
    let b = route_for(HeaderProfile::Discord, "POST", "/webhooks/1/bbbb");
    assert_ne!(a.major, b.major);
}

/// Every output of a shared-mode limiter through grants, answers of every kind, a denial,
/// a transport failure, a cancellation and close, with each store operation's `ARGV`, the
/// store's own state, a snapshot and the error messages.
#[test]
fn nothing_the_engine_emits_carries_a_token() {
    let mut config = Config::default();
    config.shared = Some(SharedConfig::with_policy(OnUnavailable::FailOpen));
    let shared = config.shared.clone().unwrap();
    let settings = StoreSettings::from(&shared);
    let mut store = MemoryStore::new(&shared);
    let mut l = Limiter::new(config).unwrap();
    let mut seen = String::new();
    let mut now = 0;
    let mut in_flight = Vec::new();
    let mut denied_once = false;
    let drain = |l: &mut Limiter, now: u64, store: &mut MemoryStore, seen: &mut String, in_flight: &mut Vec<u64>| {
        let mut reservations = Vec::new();
        loop {
            let o = l.poll_output();
            seen.push_str(&format!("{o:?}\n"));
            seen.push_str(&serde_json::to_string(&o).unwrap());
            match &o {
                Output::Reserve(r) => {
                    seen.push_str(&wire::call_args(Some(now), "p1", &settings, StoreOp::Reserve(r)).join(" "));
                    reservations.push(r.clone());
                }
                Output::Share(u) => {
                    seen.push_str(&wire::call_args(Some(now), "p1", &settings, StoreOp::Record(u)).join(" "));
                    store.record(now, "p1", u);
                }
                Output::Send(id) => in_flight.push(*id),
                Output::Fail(_, reason) => seen.push_str(&reason.to_string()),
                Output::WaitUntil(_) | Output::Idle => break,
                _ => {}
            }
        }
        reservations
    };
    for round in 0..3u64 {
        for (method, path) in paths() {
            let id = l.enqueue(now, Request::new(method, path)).unwrap();
            if round == 2 && id.is_multiple_of(5) {
                l.cancel(now, id).unwrap();
            }
        }
        let mut pending = drain(&mut l, now, &mut store, &mut seen, &mut in_flight);
        while let Some(r) = pending.pop() {
            now += MILLISECOND;
            let answer = if !denied_once {
                denied_once = true;
                ReservationAnswer::Denied { retry_after: 5 * MILLISECOND, scope: ratelane::shared::SharedScope::Route, processes: Some(1) }
            } else {
                store.reserve(now, "p1", &r)
            };
            l.handle_reservation(now, r.id, answer).unwrap();
            pending.extend(drain(&mut l, now, &mut store, &mut seen, &mut in_flight));
        }
        now += 10 * MILLISECOND;
        l.handle_timeout(now);
        let mut more = drain(&mut l, now, &mut store, &mut seen, &mut in_flight);
        while let Some(r) = more.pop() {
            let answer = store.reserve(now, "p1", &r);
            l.handle_reservation(now, r.id, answer).unwrap();
            more.extend(drain(&mut l, now, &mut store, &mut seen, &mut in_flight));
        }
        for (i, id) in std::mem::take(&mut in_flight).into_iter().enumerate() {
            now += MILLISECOND;
            let bucket = [("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset-After", "1"), ("X-RateLimit-Bucket", "wh")];
            let shared_429 = [("Retry-After", "1"), ("X-RateLimit-Scope", "shared"), ("X-RateLimit-Limit", "5"), ("X-RateLimit-Remaining", "0")];
            let result = match i % 4 {
                0 => l.handle_response(now, id, &Response::new(200, &bucket)).map(|_| ()),
                1 => l.handle_response(now, id, &Response::new(429, &shared_429)).map(|_| ()),
                2 => l.handle_response(now, id, &Response::new(404, &[])).map(|_| ()),
                _ => l.handle_failure(now, id, Failure::MaybeSent).map(|_| ()),
            };
            result.unwrap();
            drain(&mut l, now, &mut store, &mut seen, &mut in_flight);
        }
        now += 2_000 * MILLISECOND;
        l.handle_timeout(now);
        drain(&mut l, now, &mut store, &mut seen, &mut in_flight);
    }
    seen.push_str(&l.snapshot(now, 1_700_000_000_000).to_json());
    seen.push_str(&format!("{store:?}"));
    seen.push_str(&format!("{l:?}"));
    l.close(now);
    drain(&mut l, now, &mut store, &mut seen, &mut in_flight);
    assert!(seen.contains(&secret_key(WEBHOOK_TOKEN)), "the webhook's key was used");
    assert_no_secret("the engine's outputs, store arguments, store, snapshot and state", &seen);

    // An error message about a malformed path names its route, not its token.
    let mut l = Limiter::new(Config::default()).unwrap();
    let e = l.enqueue(0, Request::new("POST", format!("webhooks/111/{WEBHOOK_TOKEN}"))).unwrap_err();
    assert_eq!(e.code(), "invalid_request");
    assert_no_secret("an error message", &e.to_string());
    // A caller's own major parameter for a token route is hidden too.
    let mut r = Request::new("POST", "/webhooks/:id/:token");
    r.major = Some(format!("111/{WEBHOOK_TOKEN}"));
    l.enqueue(0, r).unwrap();
    assert_no_secret("a given major parameter", &format!("{l:?}"));
}
