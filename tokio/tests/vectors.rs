//! Replays every `tests/vectors/client_*.json` through this crate's side of the boundary, the
//! way the Python and Node packages replay them through theirs: each request is built from
//! the driver's `Options` (deadlines as tokio instants, `defer_after` as a duration), each
//! answer's body is rendered as the JSON a server sends and read back by the driver's
//! `body_hints` (through `Reply::read_hints`), and each `Fail` becomes the driver's
//! `Rejection` (its code, predicted wait and retry instant). The outputs, results and counts
//! must be exactly the recorded ones.

use std::path::PathBuf;
use std::time::Duration;

use ratelane::shared::ReservationAnswer;
use ratelane::snapshot::Snapshot;
use ratelane::{BodyHints, Failure, FailReason, Limiter, Observation, Output, QueryCost, Response};
use ratelane_tokio::{Buffered, Options, Rejection, Reply};
use serde_json::{Value, json};
use tokio::time::Instant;

#[path = "../../core/tests/support/shared_json.rs"]
mod shared_json;

fn vectors() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("tests/vectors")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("client_") && n.ends_with(".json")))
        .collect();
    files.sort();
    files
}

/// A vector's request as the driver's `Options`.
fn options(r: &Value, epoch: Instant) -> Options {
    let s = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
    Options {
        major: s("major"),
        identity: s("identity"),
        deadline: r.get("deadline_ns").and_then(Value::as_u64).map(|ns| epoch + Duration::from_nanos(ns)),
        timeout: None,
        defer_after: r.get("defer_after_ns").and_then(Value::as_u64).map(Duration::from_nanos),
        priority: r.get("priority").and_then(Value::as_i64).unwrap_or(0) as i32,
        idempotent: r.get("idempotent").and_then(Value::as_bool),
        global_exempt: r.get("global_exempt").and_then(Value::as_bool),
        sub_limit: s("sub_limit"),
        body_keys: r
            .get("body_keys")
            .and_then(Value::as_array)
            .map(|k| k.iter().map(|v| v.as_str().unwrap().to_string()).collect())
            .unwrap_or_default(),
        costs: r
            .get("costs")
            .and_then(Value::as_object)
            .map(|c| c.iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect())
            .unwrap_or_default(),
        model: s("model"),
    }
}

/// The hints a step gives, as the core takes them.
fn hints(body: &Value) -> BodyHints {
    let cost = body.get("cost").filter(|c| c.is_object()).map(|c| {
        let f = |k: &str| c.get(k).and_then(Value::as_f64);
        QueryCost {
            requested: f("requested"),
            actual: f("actual"),
            maximum_available: f("maximum_available"),
            currently_available: f("currently_available"),
            restore_rate: f("restore_rate"),
        }
    });
    BodyHints {
        retry_after: body.get("retry_after").and_then(Value::as_f64),
        global: body.get("global").and_then(Value::as_bool),
        cost,
        errors: body
            .get("errors")
            .and_then(Value::as_array)
            .map(|e| e.iter().map(|v| v.as_str().unwrap().to_string()).collect())
            .unwrap_or_default(),
        usage: body
            .get("usage")
            .and_then(Value::as_object)
            .map(|u| u.iter().filter_map(|(k, v)| v.as_f64().map(|x| (k.clone(), x))).collect())
            .unwrap_or_default(),
    }
}

/// The JSON body a server would send that says `h` in the places `body_hints` reads.
fn render(h: &BodyHints) -> Vec<u8> {
    let mut body = serde_json::Map::new();
    if let Some(r) = h.retry_after {
        body.insert("retry_after".into(), json!(r));
    }
    if let Some(g) = h.global {
        body.insert("global".into(), json!(g));
    }
    if let Some(c) = h.cost {
        body.insert(
            "extensions".into(),
            json!({"cost": {"requestedQueryCost": c.requested, "actualQueryCost": c.actual, "throttleStatus": {
                "maximumAvailable": c.maximum_available, "currentlyAvailable": c.currently_available,
                "restoreRate": c.restore_rate}}}),
        );
    }
    if !h.errors.is_empty() {
        body.insert("errors".into(), Value::Array(h.errors.iter().map(|e| json!({"message": e})).collect()));
    }
    if !h.usage.is_empty() {
        body.insert("usage".into(), Value::Object(h.usage.iter().map(|(k, v)| (k.clone(), json!(v))).collect()));
    }
    Value::Object(body).to_string().into_bytes()
}

/// An output in the vectors' form; a `Fail` goes through the driver's `Rejection` first.
fn output_json(o: &Output, epoch: Instant) -> Value {
    match o {
        Output::Send(id) => json!({"send": id}),
        Output::Fail(id, reason) => {
            let rejection: Rejection = Rejection::new(reason.clone(), epoch);
            let mut v = json!({"fail": id, "code": rejection.code()});
            match reason {
                FailReason::DeadlineExceeded { predicted_send_at } => {
                    let at = rejection.retry_at().map(|t| t.duration_since(epoch).as_nanos() as u64);
                    assert_eq!(at, *predicted_send_at);
                    v["predicted_send_at_ns"] = json!(at);
                }
                FailReason::MaxWaitExceeded { .. } => {
                    v["predicted_wait_ns"] = json!(rejection.predicted_wait().unwrap().as_nanos() as u64)
                }
                FailReason::Deferred { .. } => {
                    v["retry_at_ns"] = json!(rejection.retry_at().unwrap().duration_since(epoch).as_nanos() as u64)
                }
                FailReason::InsufficientCapacity { dimension, cost, limit } => {
                    v["dimension"] = json!(dimension);
                    v["cost"] = json!(cost);
                    v["limit"] = json!(limit);
                }
                FailReason::RetriesExhausted { attempts } | FailReason::NetworkError { attempts } => {
                    v["attempts"] = json!(attempts)
                }
                _ => {}
            }
            v
        }
        Output::Observe(Observation::RateLimited { id, scope, retry_after }) => {
            json!({"observe": "rate_limited", "id": id, "scope": scope.as_str(), "retry_after_ns": retry_after})
        }
        Output::Observe(Observation::BucketLearned { route, bucket }) => {
            json!({"observe": "bucket_learned", "route": route, "bucket": bucket})
        }
        Output::Observe(Observation::InvalidRequestWarning { count, limit }) => {
            json!({"observe": "invalid_request_warning", "count": count, "limit": limit})
        }
        Output::Observe(Observation::StoreUnavailable { id, retry_at }) => {
            json!({"observe": "store_unavailable", "id": id, "retry_at_ns": retry_at})
        }
        Output::Observe(Observation::StoreRecovered) => json!({"observe": "store_recovered"}),
        Output::Reserve(r) => {
            let mut v = shared_json::reservation_json(r);
            let fields = v.as_object_mut().unwrap();
            let id = fields.remove("id").unwrap();
            let mut out = serde_json::Map::from_iter([("reserve".to_string(), id)]);
            out.extend(std::mem::take(fields));
            Value::Object(out)
        }
        Output::Share(u) => shared_json::update_json(u),
        Output::WaitUntil(t) => json!({"wait_until_ns": t}),
        Output::Idle => json!({"idle": true}),
    }
}

fn drain(l: &mut Limiter, epoch: Instant) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let o = l.poll_output();
        let end = matches!(o, Output::WaitUntil(_) | Output::Idle);
        out.push(output_json(&o, epoch));
        if end {
            return out;
        }
    }
}

fn code<T>(r: Result<T, ratelane::Error>, ok: impl FnOnce(T) -> Value) -> Value {
    match r {
        Ok(v) => ok(v),
        Err(e) => json!({"error": e.code()}),
    }
}

async fn replay(vector: &Value) -> usize {
    let config = ratelane::json::config_from_json(&vector["config"].to_string()).expect("the vector's config");
    let shared = config.shared.is_some();
    let epoch = Instant::now();
    let mut l = Limiter::new(config.clone()).unwrap();
    let mut bodies = 0;
    for (i, step) in vector["steps"].as_array().unwrap().iter().enumerate() {
        let at = step["at_ns"].as_u64().unwrap();
        let op = step["op"].as_str().unwrap();
        let id = || step["id"].as_u64().unwrap();
        let result = match op {
            "enqueue" | "predict" => {
                let r = &step["request"];
                let request = options(r, epoch).request(r["method"].as_str().unwrap(), r["path"].as_str().unwrap(), epoch, at);
                if op == "enqueue" {
                    code(l.enqueue(at, request), |id| json!({"id": id}))
                } else {
                    code(l.predict(at, &request), |p| json!({"send_at_ns": p.send_at}))
                }
            }
            "response" => {
                let headers: Vec<(String, String)> = step["headers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| (h[0].as_str().unwrap().to_string(), h[1].as_str().unwrap().to_string()))
                    .collect();
                let expected = step.get("body").map(hints).unwrap_or_default();
                let status = step["status"].as_u64().unwrap() as u16;
                let reply = Buffered { status, headers, body: render(&expected) };
                let (reply, read) = reply.read_hints().await;
                assert_eq!(read, expected, "step {i}: the body read back says what the step says");
                bodies += usize::from(step.get("body").is_some());
                let headers = reply.headers();
                let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let response = Response {
                    status: reply.status(),
                    headers: &refs,
                    body: read,
                    wall_clock_ms: step.get("wall_clock_ms").and_then(Value::as_u64),
                };
                code(l.handle_response(at, id(), &response), |d| json!({"disposition": disposition(d)}))
            }
            "failure" => {
                let failure = Failure::from_name(step["failure"].as_str().unwrap()).unwrap();
                code(l.handle_failure(at, id(), failure), |d| json!({"disposition": disposition(d)}))
            }
            "written" => code(l.handle_written(at, id()), |()| json!({"ok": true})),
            "cancel" => code(l.cancel(at, id()), |()| json!({"ok": true})),
            "timeout" => {
                l.handle_timeout(at);
                json!({"ok": true})
            }
            "close" => {
                l.close(at);
                json!({"ok": true})
            }
            "reservation" => {
                let answer: ReservationAnswer = shared_json::answer_from(step);
                code(l.handle_reservation(at, id(), answer), |()| json!({"ok": true}))
            }
            "snapshot" => {
                let text = l.snapshot(at, step["wall_clock_ms"].as_u64().unwrap()).to_json();
                json!({"snapshot": serde_json::from_str::<Value>(&text).unwrap()})
            }
            "restart" => {
                l = Limiter::new(config.clone()).unwrap();
                json!({"ok": true})
            }
            "restore" => {
                let wall = step["wall_clock_ms"].as_u64().unwrap();
                code(Snapshot::from_json(&step["snapshot"].to_string()).and_then(|s| l.restore(at, wall, &s)), |()| {
                    json!({"ok": true})
                })
            }
            other => panic!("unknown op {other}"),
        };
        assert_eq!(result, step["result"], "step {i} ({op}): result");
        let outputs = if op == "predict" || op == "snapshot" { Vec::new() } else { drain(&mut l, epoch) };
        assert_eq!(Value::Array(outputs), step["outputs"], "step {i} ({op}): outputs");
        assert_eq!(json!(l.queued()), step["queued"], "step {i}: queued");
        assert_eq!(json!(l.in_flight()), step["in_flight"], "step {i}: in_flight");
        if shared {
            assert_eq!(json!(l.reserving()), step["reserving"], "step {i}: reserving");
        }
    }
    bodies
}

fn disposition(d: ratelane::Disposition) -> &'static str {
    match d {
        ratelane::Disposition::Complete => "complete",
        ratelane::Disposition::Retry => "retry",
        ratelane::Disposition::Failed => "failed",
    }
}

#[tokio::test]
async fn every_client_vector_replays_through_the_driver_side() {
    let files = vectors();
    assert!(files.len() > 20, "{files:?}");
    let mut bodies = 0;
    for path in &files {
        let vector: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        eprintln!("replaying {}", path.display());
        bodies += Box::pin(replay(&vector)).await;
    }
    assert!(bodies > 5, "the body reader is exercised ({bodies} bodies)");
}
