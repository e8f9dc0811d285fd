//! The exact lower bound of a workload's makespan, and a schedule that reaches it.
//!
//! Every request submitted at time 0 must *arrive* at the server within its limits. A limit of
//! `L` arrivals per window `W` (fixed windows opening at an arrival, or sliding) admits `n`
//! arrivals no faster than `(ceil(n / L) - 1) * W` from the first to the last: each of the
//! `ceil(n / L)` windows opens at least `W` after the previous one. So no client finishes
//! before
//!
//! ```text
//! bound = latency_request + max over every limit r (ceil(n_r / L_r) - 1) * W_r + latency_response
//! ```
//!
//! where the limits are the token's global limit, each bucket (hash, major parameter), each
//! hidden sub-limit and each shared resource, and `n_r` counts the workload's requests under
//! `r`. [`schedule`] builds the arrivals of a client that knows every limit (greedily, the
//! request whose limit has the most work left first); the tests check that it meets the bound
//! exactly on every workload, so the bound is the optimum, not just a floor.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use ratelane::Nanos;
use ratelane::sim::{BucketSpec, ServerConfig, WindowKind};

use crate::imitation::{Imitation, Incoming};
use crate::limits::Limits;
use crate::workload::{Req, TOKEN, Workload};

/// A limit a request counts against, named as the server keys it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// The token's global limit.
    Global(String),
    /// A bucket: identity, hash, major parameter.
    Bucket(String, String, String),
    /// A hidden sub-limit: identity, route key, major parameter.
    Sub(String, String, String),
    /// A shared resource: route key, major parameter.
    Shared(String, String),
}

/// The limits `req` counts against at the imitation enforcing `limits`.
pub fn resources(limits: &Limits, req: &Req) -> Vec<(Resource, BucketSpec)> {
    resources_in(&limits.server_config(0), req)
}

/// [`resources`] under an already built server configuration (one per workload, not one per
/// request).
fn resources_in(config: &ServerConfig, req: &Req) -> Vec<(Resource, BucketSpec)> {
    let body = req
        .json
        .as_ref()
        .map(|v| v.to_string().into_bytes())
        .unwrap_or_default();
    let target = format!("/api/v10{}", req.path);
    let authorization = format!("Bot {TOKEN}");
    let incoming = Incoming {
        method: req.method,
        target: &target,
        authorization: req.auth.then_some(authorization.as_str()),
        body: &body,
    };
    let (request, key) = Imitation::classify(&incoming);
    let route = ratelane::sim::route_of(config.profile, &request);
    let Some(spec) = config.routes.get(&key) else {
        return Vec::new();
    };
    let id = request.identity.clone();
    let mut out = Vec::new();
    if let Some(global) = config.global
        && !spec.global_exempt
    {
        out.push((Resource::Global(id.clone()), global));
    }
    if let Some(hash) = &spec.bucket {
        out.push((
            Resource::Bucket(id.clone(), hash.clone(), route.major.clone()),
            config.buckets[hash],
        ));
    }
    if let Some(sub) = spec.sub_limit {
        out.push((
            Resource::Sub(id.clone(), key.clone(), route.major.clone()),
            sub,
        ));
    }
    if let Some(shared) = spec.shared_limit {
        out.push((Resource::Shared(key.clone(), route.major.clone()), shared));
    }
    out
}

/// The bound of one workload, and the limit that sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    /// The earliest possible last arrival, counted from the first possible arrival.
    pub last_arrival: Nanos,
    /// The earliest possible completion of the whole workload, counted from submission:
    /// `latency_request + last_arrival + latency_response`.
    pub makespan: Nanos,
    /// The limit that sets it (`None` when no limit binds).
    pub binding: Option<Resource>,
}

/// The exact lower bound of `workload`'s makespan under `limits` (see the module docs).
pub fn bound(limits: &Limits, workload: &Workload) -> Bound {
    let mut counts: HashMap<Resource, (u64, BucketSpec)> = HashMap::new();
    let config = limits.server_config(0);
    for req in &workload.requests {
        for (r, spec) in resources_in(&config, req) {
            counts.entry(r).or_insert((0, spec)).0 += 1;
        }
    }
    let mut best: (Nanos, Option<Resource>) = (0, None);
    let mut sorted: Vec<_> = counts.into_iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (r, (n, spec)) in sorted {
        let limit = u64::from(spec.limit.max(1));
        let span = (n.div_ceil(limit) - 1) * spec.window;
        if span > best.0 {
            best = (span, Some(r));
        }
    }
    Bound {
        last_arrival: best.0,
        makespan: limits.latency_request + best.0 + limits.latency_response,
        binding: best.1,
    }
}

/// Arrivals admitted by one limit, as the server counts them.
#[derive(Debug, Clone, Default)]
struct Window {
    start: Nanos,
    count: u32,
    times: VecDeque<Nanos>,
    /// A refilling bucket's deficit, in units of 1 / `window` of a request, as of `at` (the
    /// server model's exact arithmetic).
    debt: u128,
    at: Nanos,
}

impl Window {
    /// The earliest time `>= t` at which one more arrival is admitted (every recorded arrival
    /// is at or before `t`).
    fn free_at(&self, spec: &BucketSpec, t: Nanos) -> Nanos {
        match spec.kind {
            WindowKind::Fixed => {
                if self.count == 0 || t >= self.start + spec.window || self.count < spec.limit {
                    t
                } else {
                    self.start + spec.window
                }
            }
            WindowKind::Sliding => {
                let limit = spec.limit as usize;
                let live = self.times.iter().filter(|&&a| a + spec.window > t).count();
                if live < limit {
                    t
                } else {
                    self.times[self.times.len() - limit] + spec.window
                }
            }
            WindowKind::Refill => {
                let (limit, window) = (u128::from(spec.limit), u128::from(spec.window));
                let over = (self.debt_at(spec, t) + window).saturating_sub(limit * window);
                t + Nanos::try_from(over.div_ceil(limit.max(1))).unwrap_or(Nanos::MAX)
            }
        }
    }

    /// A refilling bucket's deficit at `t`.
    fn debt_at(&self, spec: &BucketSpec, t: Nanos) -> u128 {
        self.debt.saturating_sub(u128::from(spec.limit) * u128::from(t.saturating_sub(self.at)))
    }

    fn record(&mut self, spec: &BucketSpec, t: Nanos) {
        match spec.kind {
            WindowKind::Fixed => {
                if self.count == 0 || t >= self.start + spec.window {
                    self.start = t;
                    self.count = 0;
                }
                self.count += 1;
            }
            WindowKind::Sliding => self.times.push_back(t),
            WindowKind::Refill => {
                self.debt = self.debt_at(spec, t) + u128::from(spec.window);
                self.at = t;
            }
        }
    }
}

/// The arrival time of each request (by index in `workload.requests`), counted from the first
/// possible arrival, for a client that knows every limit: the optimum (the tests check that
/// its last arrival is the bound).
pub fn schedule(limits: &Limits, workload: &Workload) -> Vec<Nanos> {
    let config = limits.server_config(0);
    let needs: Vec<Vec<(Resource, BucketSpec)>> = workload
        .requests
        .iter()
        .map(|r| resources_in(&config, r))
        .collect();
    let mut left: HashMap<Resource, u64> = HashMap::new();
    for need in &needs {
        for (r, _) in need {
            *left.entry(r.clone()).or_default() += 1;
        }
    }
    let mut windows: HashMap<Resource, Window> = HashMap::new();
    let mut at = vec![0; needs.len()];
    let mut pending: Vec<usize> = (0..needs.len()).collect();
    let mut done = vec![false; needs.len()];
    let mut now: Nanos = 0;
    let free_at = |windows: &HashMap<Resource, Window>, i: usize, t: Nanos| -> Nanos {
        let mut t = t;
        loop {
            let next = needs[i]
                .iter()
                .map(|(r, spec)| windows.get(r).map_or(t, |w| w.free_at(spec, t)))
                .max()
                .unwrap_or(t);
            if next == t {
                return t;
            }
            t = next;
        }
    };
    while !pending.is_empty() {
        // Admit at `now`, most urgent first: the request whose limit needs the longest to
        // drain what is left. Urgency only falls as requests are admitted, so a heap with lazy
        // re-ranking pops exactly the most urgent one each time.
        let urgency = |left: &HashMap<Resource, u64>, i: usize| -> Nanos {
            needs[i]
                .iter()
                .map(|(r, spec)| left[r].div_ceil(u64::from(spec.limit.max(1))) * spec.window)
                .max()
                .unwrap_or(0)
        };
        let mut ready: BinaryHeap<(Nanos, Reverse<usize>)> = pending
            .iter()
            .filter(|&&i| free_at(&windows, i, now) == now)
            .map(|&i| (urgency(&left, i), Reverse(i)))
            .collect();
        while let Some((u, Reverse(i))) = ready.pop() {
            let current = urgency(&left, i);
            if current < u {
                ready.push((current, Reverse(i)));
                continue;
            }
            if free_at(&windows, i, now) != now {
                continue;
            }
            at[i] = now;
            done[i] = true;
            for (r, spec) in &needs[i] {
                windows.entry(r.clone()).or_default().record(spec, now);
                *left.get_mut(r).expect("counted") -= 1;
            }
        }
        pending.retain(|&i| !done[i]);
        if let Some(next) = pending.iter().map(|&i| free_at(&windows, i, now)).min() {
            now = next;
        }
    }
    at
}

/// What each request must wait for in real time, whatever the delays: for every limit of `L`
/// per `W` it counts against, the request `L` places earlier under that limit (in the order of
/// `plan`, then index) must have arrived `W` before it. `(earlier request, W)` pairs, by index.
///
/// Arrivals that keep these gaps never exceed a limit, sliding or fixed (a fixed window
/// holding `L + 1` arrivals would put two of them `L` places apart less than `W` apart), and
/// with no delay they meet the plan. The reference client sends each request once the
/// requests it waits for have been answered (their arrival is then known to within the
/// response's jitter), so the server's own delays cannot push it over a limit.
pub fn chains(limits: &Limits, workload: &Workload, plan: &[Nanos]) -> Vec<Vec<(usize, Nanos)>> {
    let mut under: HashMap<Resource, (BucketSpec, Vec<usize>)> = HashMap::new();
    let config = limits.server_config(0);
    for (i, req) in workload.requests.iter().enumerate() {
        for (r, spec) in resources_in(&config, req) {
            under.entry(r).or_insert((spec, Vec::new())).1.push(i);
        }
    }
    let mut waits = vec![Vec::new(); workload.requests.len()];
    for (spec, mut members) in under.into_values() {
        members.sort_by_key(|&i| (plan[i], i));
        let limit = spec.limit.max(1) as usize;
        for q in limit..members.len() {
            waits[members[q]].push((members[q - limit], spec.window));
        }
    }
    waits
}
