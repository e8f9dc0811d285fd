//! The virtual-time run shared by `costs.rs` (token windows) and `refill.rs` (budgets that
//! refill): a limiter and the simulator's server, requests with estimated costs whose actual
//! cost only the server knows, one-way latencies and the server's processing time, and the
//! *surprises* (a request sent with an actual cost above every ratio of actual to estimate among
//! the last 64 settled before its send: no margin can know of it).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use ratelane::sim::{Server, ServerConfig, ServerResponse, SplitMix64};
use ratelane::{Disposition, Limiter, MILLISECOND, Nanos, Output, Request};

/// How requests travel: one-way latency `base` plus up to `jitter`; the server answers half to
/// one and a half times `processing` after it counted a request (an LLM's generation).
pub struct Link {
    pub base: Nanos,
    pub jitter: Nanos,
    pub processing: Nanos,
}

/// What happened to the requests.
#[derive(Debug, Default)]
pub struct Ended {
    pub completed: usize,
    pub insufficient: usize,
    pub other_failures: Vec<String>,
    /// Per server arrival tag (a send attempt): whether it was a surprise.
    pub surprise_by_tag: HashMap<u64, bool>,
}

/// `(actual, estimate)` per request: actual uniform in `1..=max_cost.min(budget)`, the estimate
/// the actual times a factor uniform in `[low, high]`, rounded (at least 1); with `oversized`,
/// every 17th from the 6th estimates more than the whole `budget`.
pub fn work(rng: &mut SplitMix64, requests: usize, max_cost: u64, budget: u64, (low, high): (f64, f64), oversized: bool) -> Vec<(u64, u64)> {
    (0..requests)
        .map(|i| {
            let actual = rng.between(1, max_cost.min(budget));
            let f = low + (high - low) * rng.unit();
            let estimate = if oversized && i % 17 == 5 { budget + 1 + rng.below(budget) } else { ((actual as f64) * f).round().max(1.0) as u64 };
            (actual, estimate)
        })
        .collect()
}

enum Event {
    Enqueue(usize),
    Arrive(u64),
    Deliver(u64, Box<ServerResponse>),
    Wake,
}

/// Enqueues request `i` (built by `request` from its estimate) at `enqueued[i]`, runs until
/// every request ended, and checks that each ended exactly once. The server is asked with
/// `arriving` and the request's actual cost. `wall_clock`: answers carry the server's wall
/// clock to the millisecond (Anthropic's resets are times of day). `budget`: the token limit
/// (an `insufficient_capacity` failure must be an estimate above it).
#[allow(clippy::too_many_arguments)]
pub fn drive(
    limiter: &mut Limiter,
    server: &mut Server,
    rng: &mut SplitMix64,
    link: &Link,
    work: &[(u64, u64)],
    enqueued: &[Nanos],
    request: impl Fn(u64) -> Request,
    arriving: &Request,
    wall_clock: bool,
    budget: u64,
) -> Ended {
    let mut events: BinaryHeap<Reverse<(Nanos, u64)>> = BinaryHeap::new();
    let mut payload: HashMap<u64, Event> = HashMap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BinaryHeap<Reverse<(Nanos, u64)>>, payload: &mut HashMap<u64, Event>, at: Nanos, e: Event| {
        seq += 1;
        events.push(Reverse((at, seq)));
        payload.insert(seq, e);
    };
    for (i, &at) in enqueued.iter().enumerate() {
        push(&mut events, &mut payload, at, Event::Enqueue(i));
    }
    let wall_epoch = ServerConfig::discord().wall_epoch_ms;
    let mut out = Ended::default();
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut ended: HashMap<u64, bool> = HashMap::new();
    // The ratios settled lately (the engine draws its margin from the last 64).
    let mut settled: VecDeque<f64> = VecDeque::new();
    let mut next_tag = 0u64;
    let mut wake: Option<Nanos> = None;
    let mut steps = 0;
    while let Some(Reverse((now, key))) = events.pop() {
        steps += 1;
        assert!(steps < 2_000_000, "the run never ends");
        match payload.remove(&key).expect("an event") {
            Event::Enqueue(i) => {
                let id = limiter.enqueue(now, request(work[i].1)).expect("a valid request");
                index.insert(id, i);
            }
            Event::Arrive(tag) => {
                let id = tag >> 20;
                let (actual, _) = work[index[&id]];
                let answer = server.handle_costing(now, tag, arriving, Some(actual));
                let back = link.base + rng.below(link.jitter + 1) + link.processing / 2 + rng.below(link.processing + 1);
                push(&mut events, &mut payload, now + back, Event::Deliver(id, Box::new(answer)));
            }
            Event::Deliver(id, answer) => {
                // A 200 that is a refusal (Shopify's THROTTLED) settles nothing.
                if answer.status == 200 && answer.body.errors.is_empty() {
                    let (actual, estimate) = work[index[&id]];
                    if settled.len() == 64 {
                        settled.pop_front();
                    }
                    settled.push_back(actual as f64 / estimate as f64);
                }
                let wall = wall_clock.then(|| wall_epoch + now / MILLISECOND);
                let d = answer.with_response(wall, |r| limiter.handle_response(now, id, r)).expect("in flight");
                if d == Disposition::Complete {
                    assert!(ended.insert(id, true).is_none(), "request {id} ended twice");
                    out.completed += 1;
                }
            }
            Event::Wake => {
                if wake == Some(now) {
                    wake = None;
                    limiter.handle_timeout(now);
                }
            }
        }
        loop {
            match limiter.poll_output() {
                Output::Send(id) => {
                    let (actual, estimate) = work[index[&id]];
                    next_tag += 1;
                    let tag = (id << 20) | (next_tag & 0xF_FFFF);
                    let worst = settled.iter().copied().fold(1.0, f64::max);
                    out.surprise_by_tag.insert(tag, actual as f64 / estimate as f64 > worst);
                    let up = link.base + rng.below(link.jitter + 1);
                    push(&mut events, &mut payload, now + up, Event::Arrive(tag));
                }
                Output::Fail(id, reason) => {
                    assert!(ended.insert(id, false).is_none(), "request {id} ended twice");
                    if reason.code() == "insufficient_capacity" {
                        out.insufficient += 1;
                        assert!(work[index[&id]].1 > budget, "{id} failed insufficient_capacity within the limit");
                    } else {
                        out.other_failures.push(format!("{id}: {reason}"));
                    }
                }
                Output::WaitUntil(t) => {
                    if wake != Some(t) {
                        wake = Some(t);
                        push(&mut events, &mut payload, t, Event::Wake);
                    }
                    break;
                }
                Output::Idle => break,
                Output::Observe(_) => {}
                other => panic!("unexpected output {other:?}"),
            }
        }
    }
    assert_eq!(ended.len(), work.len(), "every request ends");
    assert_eq!(limiter.queued() + limiter.in_flight(), 0);
    out
}
