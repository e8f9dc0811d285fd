//! The workloads: what a bot submits at once, and the file each client reads
//! (`bench/realtime/CLIENTS.md`).

use std::collections::BTreeMap;

use ratelane::Nanos;
use ratelane::sim::SplitMix64;
use serde::Serialize;
use serde_json::{Value, json};

/// What a request does (informative; the clients see it as `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `POST /channels/{channel_id}/messages`.
    Message,
    /// A reaction route (add, remove, list).
    Reaction,
    /// A channel edit that is not a rename.
    Edit,
    /// A channel edit of `name` or `topic` (the hidden sub-limit).
    Rename,
    /// `PUT /channels/{channel_id}/pins/{message_id}`.
    Pin,
    /// An interaction callback (no auth, exempt from the global limit).
    Interaction,
    /// A route without rate-limit headers.
    Plain,
    /// `PATCH /channels/{channel_id}/messages/{message_id}` (the delete's bucket).
    MessageEdit,
    /// `DELETE /channels/{channel_id}/messages/{message_id}`.
    MessageDelete,
    /// `GET /channels/{channel_id}/messages` or `.../messages/{message_id}` (one bucket).
    Read,
    /// `POST /channels/{channel_id}/typing`.
    Typing,
}

/// One request of a workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Req {
    /// Its identity; the URL carries it as `?rid=`.
    pub rid: u64,
    /// HTTP method.
    pub method: &'static str,
    /// The path template with `{name}` placeholders.
    pub route: &'static str,
    /// The placeholders' values (emoji unencoded).
    pub params: BTreeMap<&'static str, String>,
    /// The concrete path (emoji URL-encoded), without `/api/v10`.
    pub path: String,
    /// The JSON body, if any.
    pub json: Option<Value>,
    /// Whether it carries the bot's token.
    pub auth: bool,
    /// What it does.
    pub kind: Kind,
}

/// A named list of requests, all submitted at once.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Short name (the file name and the table's key).
    pub name: &'static str,
    /// One line for the Scoreboard.
    pub title: &'static str,
    /// In submission order.
    pub requests: Vec<Req>,
}

/// The file a client reads.
#[derive(Debug, Serialize)]
pub struct WorkloadFile<'a> {
    /// The workload's name.
    pub workload: &'a str,
    /// `http://127.0.0.1:PORT/api/v10`.
    pub base_url: &'a str,
    /// The bot token.
    pub token: &'a str,
    /// The bot's global limit ...
    pub global_limit: u32,
    /// ... per this many seconds.
    pub global_window_s: f64,
    /// How long the client waits before it reports what has not finished.
    pub deadline_s: f64,
    /// The requests.
    pub requests: &'a [Req],
    /// Connections the client opens in its set-up, with log-ins (`GET /users/@me`, outside the
    /// accounting), as a bot that has been running has them open (`--warm`; ratelane's clients
    /// only). Left out when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub warm_connections: usize,
    /// ratelane's clients also pass each JSON body's keys (`--precise`; the precise path for a
    /// hidden sub-limit). Left out when false: the README's `run(method, path, send)`.
    #[serde(skip_serializing_if = "is_false")]
    pub precise: bool,
    /// What the reference client follows, for `reference-py` (the same algorithm on Python's
    /// aiohttp, the floor of a Python client): left out in shared mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferencePlan<'a>>,
}

/// The reference's schedule as the workload file carries it (see `http::reference`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ReferencePlan<'a> {
    /// Each request's planned offset from the start, ns, in the order of `requests`.
    pub plan_ns: &'a [Nanos],
    /// Per request, `(index of an earlier request, window ns)`: it goes no sooner than that
    /// window after the earlier one's arrival.
    pub waits: &'a [Vec<(usize, Nanos)>],
    /// The round trip the imitation adds: an answer's time less it is the arrival.
    pub rtt_ns: Nanos,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The bot token every client uses.
pub const TOKEN: &str = "bench-token-1";

fn channel(n: u64) -> String {
    (200_000_000_000_000_000 + n).to_string()
}

fn message_id(n: u64) -> String {
    (300_000_000_000_000_000 + n).to_string()
}

fn fill(route: &str, params: &BTreeMap<&'static str, String>) -> String {
    let mut path = route.to_string();
    for (name, value) in params {
        let value = if *name == "emoji" {
            value.replace(':', "%3A")
        } else {
            value.clone()
        };
        path = path.replace(&format!("{{{name}}}"), &value);
    }
    path
}

/// Builds requests, numbering them in order.
#[derive(Debug, Default)]
struct Builder {
    requests: Vec<Req>,
}

impl Builder {
    fn push(
        &mut self,
        method: &'static str,
        route: &'static str,
        params: &[(&'static str, String)],
        json: Option<Value>,
        kind: Kind,
    ) {
        let params: BTreeMap<_, _> = params.iter().cloned().collect();
        let rid = self.requests.len() as u64;
        self.requests.push(Req {
            rid,
            method,
            route,
            path: fill(route, &params),
            params,
            json,
            auth: kind != Kind::Interaction,
            kind,
        });
    }

    fn message(&mut self, ch: u64) {
        let n = self.requests.len();
        self.push(
            "POST",
            "/channels/{channel_id}/messages",
            &[("channel_id", channel(ch))],
            Some(json!({ "content": format!("message {n}") })),
            Kind::Message,
        );
    }

    fn reaction(&mut self, method: &'static str, n: u64) {
        let route = if method == "GET" {
            "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}"
        } else {
            "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me"
        };
        let emoji = format!("r{n}:{}", 500_000_000_000_000_000 + n);
        self.push(
            method,
            route,
            &[
                ("channel_id", channel(1)),
                ("message_id", message_id(1)),
                ("emoji", emoji),
            ],
            None,
            Kind::Reaction,
        );
    }

    fn edit(&mut self, ch: u64, body: Value) {
        let kind = if body.get("name").is_some() || body.get("topic").is_some() {
            Kind::Rename
        } else {
            Kind::Edit
        };
        self.push(
            "PATCH",
            "/channels/{channel_id}",
            &[("channel_id", channel(ch))],
            Some(body),
            kind,
        );
    }

    fn pin(&mut self, ch: u64, msg: u64) {
        self.push(
            "PUT",
            "/channels/{channel_id}/pins/{message_id}",
            &[("channel_id", channel(ch)), ("message_id", message_id(msg))],
            None,
            Kind::Pin,
        );
    }

    fn interaction(&mut self, n: u64) {
        self.push(
            "POST",
            "/interactions/{interaction_id}/{interaction_token}/callback",
            &[
                ("interaction_id", (400_000_000_000_000_000 + n).to_string()),
                ("interaction_token", format!("aW50ZXJhY3Rpb24{n}")),
            ],
            Some(json!({ "type": 4, "data": { "content": "pong" } })),
            Kind::Interaction,
        );
    }

    fn plain(&mut self) {
        self.push("GET", "/voice/regions", &[], None, Kind::Plain);
    }

    /// A request to message `msg` of channel `ch`: edit (`PATCH`), delete, or read (`GET`).
    fn on_message(&mut self, method: &'static str, ch: u64, msg: u64) {
        let (json, kind) = match method {
            "PATCH" => (Some(json!({ "content": format!("edited {msg}") })), Kind::MessageEdit),
            "DELETE" => (None, Kind::MessageDelete),
            _ => (None, Kind::Read),
        };
        self.push(
            method,
            "/channels/{channel_id}/messages/{message_id}",
            &[("channel_id", channel(ch)), ("message_id", message_id(msg))],
            json,
            kind,
        );
    }

    /// Reading channel `ch`'s last messages.
    fn history(&mut self, ch: u64) {
        self.push("GET", "/channels/{channel_id}/messages", &[("channel_id", channel(ch))], None, Kind::Read);
    }

    fn typing(&mut self, ch: u64) {
        self.push("POST", "/channels/{channel_id}/typing", &[("channel_id", channel(ch))], None, Kind::Typing);
    }

    /// A reaction route on message `msg` of channel `ch`: add or remove the bot's (`PUT`,
    /// `DELETE`), list who reacted (`GET`), or remove them all (`DELETE_ALL`).
    fn reaction_on(&mut self, method: &'static str, ch: u64, msg: u64, n: u64) {
        let emoji = format!("r{n}:{}", 500_000_000_000_000_000 + n);
        let mut params = vec![("channel_id", channel(ch)), ("message_id", message_id(msg))];
        let (method, route) = match method {
            "DELETE_ALL" => ("DELETE", "/channels/{channel_id}/messages/{message_id}/reactions"),
            "GET" => ("GET", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}"),
            m => (m, "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me"),
        };
        if !route.ends_with("/reactions") {
            params.push(("emoji", emoji));
        }
        self.push(method, route, &params, None, Kind::Reaction);
    }

    fn done(self, name: &'static str, title: &'static str) -> Workload {
        Workload {
            name,
            title,
            requests: self.requests,
        }
    }
}

/// Shuffles `items` with a fixed seed (the same order on every run and every machine).
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut rng = SplitMix64::new(seed);
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// 30 messages to one channel: a deep queue on one bucket.
pub fn deep_queue() -> Workload {
    let mut b = Builder::default();
    for _ in 0..30 {
        b.message(1);
    }
    b.done("deep_queue", "30 messages to one channel")
}

/// 60 messages to one channel: one bucket, twelve windows (with sliding windows, a deep queue
/// whose slots come back one by one; also the shared-mode runs' bucket case).
pub fn one_channel() -> Workload {
    let mut b = Builder::default();
    for _ in 0..60 {
        b.message(1);
    }
    b.done("one_channel", "60 messages to one channel")
}

/// 100 channels x 6 messages: the global limit binds over many buckets.
pub fn many_channels() -> Workload {
    let mut b = Builder::default();
    for ch in 0..100 {
        for _ in 0..6 {
            b.message(ch);
        }
    }
    b.done("many_channels", "100 channels x 6 messages (global binds)")
}

/// 40 reactions on one message: a 1-per-window bucket.
pub fn reactions() -> Workload {
    let mut b = Builder::default();
    for n in 0..40 {
        b.reaction("PUT", n);
    }
    b.done("reactions", "40 reactions, 1 per window")
}

/// 101 requests in a fixed random order: three reaction routes on one hash the client has not
/// seen yet (10 each), 40 messages over 8 channels, 21 requests to a route without rate-limit
/// headers, 10 interaction callbacks.
pub fn mixed() -> Workload {
    let mut b = Builder::default();
    for n in 0..10 {
        b.reaction("PUT", n);
        b.reaction("DELETE", n);
        b.reaction("GET", n);
    }
    for ch in 0..8 {
        for _ in 0..5 {
            b.message(ch);
        }
    }
    for _ in 0..21 {
        b.plain();
    }
    for n in 0..10 {
        b.interaction(n);
    }
    let mut requests = b.requests;
    shuffle(&mut requests, 0x5c0e_b0a2d);
    for (rid, r) in requests.iter_mut().enumerate() {
        r.rid = rid as u64;
    }
    Workload {
        name: "mixed",
        title: "101 mixed requests: 3 reaction routes on one unseen hash, header-less and exempt routes",
        requests,
    }
}

/// 20 edits of two channels, alternating; the first channel's first three are renames (two
/// `name`, one `topic`): the third meets the hidden sub-limit while the other seven edits of
/// that channel could go at once.
pub fn sub_limit() -> Workload {
    let mut b = Builder::default();
    for i in 0..10 {
        let body = match i {
            0 | 2 => json!({ "name": format!("name-{i}") }),
            1 => json!({ "topic": format!("topic {i}") }),
            _ => json!({ "nsfw": i % 2 == 0 }),
        };
        b.edit(1, body);
        b.edit(2, json!({ "nsfw": i % 2 == 0 }));
    }
    b.done(
        "sub_limit",
        "20 channel edits, 3 renames meet a hidden sub-limit",
    )
}

/// 2,000 messages over 400 channels (5 each): the global limit binds for seconds.
pub fn global_cap() -> Workload {
    let mut b = Builder::default();
    for ch in 0..400 {
        for _ in 0..5 {
            b.message(ch);
        }
    }
    b.done(
        "global_cap",
        "2,000 messages over 400 channels at the global cap",
    )
}

/// 12 pins in one channel and 5 in another: the shared per-resource limit (3 per window) is
/// below the bot's bucket (5 per window).
pub fn shared_pins() -> Workload {
    let mut b = Builder::default();
    for m in 0..12 {
        b.pin(1, m);
    }
    for m in 0..5 {
        b.pin(2, 100 + m);
    }
    b.done(
        "shared_pins",
        "12 + 5 pins, shared-scope limit 3 per window below the bucket's 5",
    )
}

/// 300 messages over 60 channels and 200 interaction callbacks, interleaved (3 messages, 2
/// callbacks, ...): the callbacks must not wait for the saturated global limit.
pub fn interactions() -> Workload {
    let mut b = Builder::default();
    for i in 0..100 {
        for k in 0..3 {
            b.message((i * 3 + k) % 60);
        }
        b.interaction(2 * i);
        b.interaction(2 * i + 1);
    }
    b.done(
        "interactions",
        "200 interaction callbacks while 300 messages saturate the global limit",
    )
}

/// 96 requests over twelve routes, in a fixed random order, all unknown to the client: message
/// edits and deletes share one bucket (5 per window) and reads of a channel's messages and of one
/// message another, neither in any client's prior; four reaction routes on one hash (1 per
/// window); messages, typing, a route without headers, interaction callbacks. Three channels:
/// the first's 15 edits and deletes bind (three windows).
pub fn first_contact() -> Workload {
    let mut b = Builder::default();
    // Channel 1: 10 deletes and 5 edits (one bucket: three windows), 8 messages, 3 reads of
    // the channel and 3 of one message (one bucket), 10 reactions on one message (add, remove,
    // list, remove all), 2 typing.
    for m in 0..10 {
        b.on_message("DELETE", 1, m);
    }
    for m in 0..5 {
        b.on_message("PATCH", 1, 100 + m);
    }
    for _ in 0..8 {
        b.message(1);
    }
    for m in 0..3 {
        b.history(1);
        b.on_message("GET", 1, 200 + m);
    }
    for n in 0..4 {
        b.reaction_on("PUT", 1, 1, n);
        b.reaction_on("DELETE", 1, 1, n);
    }
    b.reaction_on("GET", 1, 1, 0);
    b.reaction_on("DELETE_ALL", 1, 1, 0);
    for _ in 0..2 {
        b.typing(1);
    }
    // Channel 2: 6 deletes and 4 edits, 8 messages, 3 reads, the reactions of one message
    // removed; channel 3: 5 deletes, 5 edits, 5 messages.
    for m in 0..6 {
        b.on_message("DELETE", 2, 300 + m);
    }
    for m in 0..4 {
        b.on_message("PATCH", 2, 400 + m);
    }
    for _ in 0..8 {
        b.message(2);
    }
    for _ in 0..3 {
        b.history(2);
    }
    b.reaction_on("DELETE_ALL", 2, 2, 0);
    for m in 0..5 {
        b.on_message("DELETE", 3, 500 + m);
        b.on_message("PATCH", 3, 600 + m);
        b.message(3);
    }
    for _ in 0..10 {
        b.plain();
    }
    for n in 0..8 {
        b.interaction(n);
    }
    let mut requests = b.requests;
    shuffle(&mut requests, 0xf1c5_7c0a);
    for (rid, r) in requests.iter_mut().enumerate() {
        r.rid = rid as u64;
    }
    Workload {
        name: "first_contact",
        title: "96 requests over twelve unknown routes, some sharing buckets",
        requests,
    }
}

/// Every workload, in the Scoreboard's order.
pub fn all() -> Vec<Workload> {
    vec![
        deep_queue(),
        many_channels(),
        reactions(),
        mixed(),
        sub_limit(),
        global_cap(),
        shared_pins(),
        interactions(),
        first_contact(),
        one_channel(),
    ]
}
