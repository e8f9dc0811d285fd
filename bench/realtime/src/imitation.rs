//! What the imitation does with one HTTP request, without the HTTP: it names the request the
//! way Discord does (route, major parameter, token, the hidden rename class), lets
//! [`ratelane::sim::Server`] decide, and keeps the accounting of the run.

use std::collections::{BTreeMap, HashMap};

use ratelane::route::route_for;
use ratelane::sim::{Server, ServerOutcome};
use ratelane::{HeaderProfile, Nanos, Request};

use crate::limits::{Limits, ROUTE_EDIT, ROUTE_ME, ROUTE_RENAME};

/// One request as it reached the socket.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    /// The HTTP method.
    pub method: &'a str,
    /// The request target: path and query (`/api/v10/channels/1/messages?rid=7`).
    pub target: &'a str,
    /// The `Authorization` header, if any.
    pub authorization: Option<&'a str>,
    /// The body.
    pub body: &'a [u8],
}

/// The answer, and what the server must report back when it has been written.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
    /// The bucket (hash and major parameter) the request occupies until it is answered: pass
    /// it back to [`Imitation::answered`].
    pub in_flight: Option<(String, String)>,
}

/// What a run did at the server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Requests that reached the server model (unknown routes and log-ins excluded).
    pub arrivals: usize,
    /// 429s by scope: the global limit.
    pub global_429: usize,
    /// 429s by scope: a bucket (`user`).
    pub bucket_429: usize,
    /// 429s by scope: a hidden sub-limit (`user`, with the bucket not exhausted).
    pub sub_429: usize,
    /// 429s by scope: a shared resource (`shared`).
    pub shared_429: usize,
    /// HTML 429s from the edge during a ban.
    pub banned_429: usize,
    /// Requests the server counts as invalid (401, 403, non-shared 429).
    pub invalid: usize,
    /// Requests to routes the imitation does not know (404).
    pub unknown: usize,
    /// Requests without a `rid` query parameter (other than log-ins).
    pub without_rid: usize,
    /// Per `rid`: how many arrivals, and how many of them were accepted (2xx).
    pub per_rid: BTreeMap<u64, (u32, u32)>,
    /// Per bucket hash: the most requests in flight at once to one (hash, major) pair.
    pub max_in_flight: BTreeMap<String, u32>,
}

impl Tally {
    /// Requests accepted more than once (a request the client re-sent after it had been
    /// processed).
    pub fn duplicates(&self) -> u32 {
        self.per_rid
            .values()
            .map(|&(_, ok)| ok.saturating_sub(1))
            .sum()
    }

    /// Whether `rid` was accepted at least once.
    pub fn accepted(&self, rid: u64) -> bool {
        self.per_rid.get(&rid).is_some_and(|&(_, ok)| ok > 0)
    }

    /// The most requests in flight to one bucket, over every bucket.
    pub fn peak_in_flight(&self) -> u32 {
        self.max_in_flight.values().copied().max().unwrap_or(0)
    }
}

/// The Discord imitation's state for one run.
#[derive(Debug)]
pub struct Imitation {
    server: Server,
    rids: Vec<Option<u64>>,
    tally: Tally,
    in_flight: HashMap<(String, String), u32>,
}

/// The value of `name` in a query string.
fn query_value<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Whether a channel edit's JSON body changes what the hidden sub-limit guards.
fn renames(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|o| o.contains_key("name") || o.contains_key("topic"))
        })
        .unwrap_or(false)
}

fn json_answer(status: u16, body: &str) -> Answer {
    Answer {
        status,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: body.into(),
        in_flight: None,
    }
}

/// The bot user a library's log-in reads.
const ME: &str = r#"{"id":"100000000000000000","username":"bench","discriminator":"0","global_name":"bench","avatar":null,"bot":true,"flags":0,"mfa_enabled":false,"locale":"en-US","verified":true,"email":null,"premium_type":0,"public_flags":0}"#;

impl Imitation {
    /// A fresh server enforcing `limits`; `wall_epoch_ms` is the wall clock at time 0.
    pub fn new(limits: &Limits, wall_epoch_ms: u64) -> Self {
        Imitation {
            server: Server::new(limits.server_config(wall_epoch_ms)),
            rids: Vec::new(),
            tally: Tally::default(),
            in_flight: HashMap::new(),
        }
    }

    /// The request the server model sees for `incoming`, with its route key.
    pub fn classify(incoming: &Incoming<'_>) -> (Request, String) {
        let path = incoming.target.split('?').next().unwrap_or("");
        let method = incoming.method.to_ascii_uppercase();
        let route = route_for(HeaderProfile::Discord, &method, path);
        let identity = incoming
            .authorization
            .map(|a| a.strip_prefix("Bot ").unwrap_or(a).to_string())
            .unwrap_or_default();
        if route.key == ROUTE_EDIT && renames(incoming.body) {
            let template = ROUTE_RENAME.split_once(' ').map_or("", |(_, t)| t);
            let request = Request::with_route(method, template, route.major).identity(identity);
            return (request, ROUTE_RENAME.to_string());
        }
        (Request::new(method, path).identity(identity), route.key)
    }

    /// Answers `incoming`, counted as arriving at `at` (server time, non-decreasing).
    pub fn handle(&mut self, at: Nanos, incoming: &Incoming<'_>) -> Answer {
        let (request, key) = Self::classify(incoming);
        if !self.server.config().routes.contains_key(&key) {
            self.tally.unknown += 1;
            return json_answer(404, r#"{"message": "404: Not Found", "code": 0}"#);
        }
        let rid = incoming
            .target
            .split_once('?')
            .and_then(|(_, q)| query_value(q, "rid"))
            .and_then(|v| v.parse::<u64>().ok());
        if key == ROUTE_ME && rid.is_none() {
            return json_answer(200, ME);
        }
        let index = self.server.log().len();
        let response = self.server.handle(at, index as u64, &request);
        let arrival = &self.server.log()[index];
        self.rids.push(rid);
        let tally = &mut self.tally;
        tally.arrivals += 1;
        match arrival.outcome {
            ServerOutcome::GlobalLimited => tally.global_429 += 1,
            ServerOutcome::BucketLimited => tally.bucket_429 += 1,
            ServerOutcome::SubLimited => tally.sub_429 += 1,
            ServerOutcome::SharedLimited => tally.shared_429 += 1,
            ServerOutcome::Banned => tally.banned_429 += 1,
            ServerOutcome::Accepted | ServerOutcome::Unauthorized | ServerOutcome::ServerError => {}
        }
        let invalid = matches!(arrival.status, 401 | 403)
            || (arrival.status == 429 && arrival.outcome != ServerOutcome::SharedLimited);
        tally.invalid += usize::from(invalid);
        match rid {
            Some(rid) => {
                let entry = tally.per_rid.entry(rid).or_default();
                entry.0 += 1;
                entry.1 += u32::from((200..300).contains(&arrival.status));
            }
            None => tally.without_rid += 1,
        }
        let in_flight = arrival
            .bucket
            .clone()
            .map(|hash| (hash, arrival.major.clone()));
        if let Some(key) = &in_flight {
            let now = self.in_flight.entry(key.clone()).or_default();
            *now += 1;
            let peak = tally.max_in_flight.entry(key.0.clone()).or_default();
            *peak = (*peak).max(*now);
        }
        let body = if key == ROUTE_ME {
            ME.to_string()
        } else {
            response.body_text
        };
        Answer {
            status: response.status,
            headers: response.headers,
            body,
            in_flight,
        }
    }

    /// The answer that occupied `in_flight` has been written.
    pub fn answered(&mut self, in_flight: &(String, String)) {
        if let Some(n) = self.in_flight.get_mut(in_flight) {
            *n = n.saturating_sub(1);
        }
    }

    /// The accounting so far.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// The `rid` of each arrival, in arrival order (beside [`Server::log`]).
    pub fn rids(&self) -> &[Option<u64>] {
        &self.rids
    }

    /// The server model (its log has every arrival).
    pub fn server(&self) -> &Server {
        &self.server
    }
}
