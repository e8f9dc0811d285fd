//! The route table: which bucket each route was learned to share, the queue keys requests
//! wait under (an unknown route's own queue until its pioneer's answer names the bucket), and
//! the requests' routes as validated from what the caller gave.

use std::borrow::Cow;
use std::collections::VecDeque;

use crate::route::route_into;
use crate::types::{HeaderProfile, Nanos, Request};

use super::{HashMap, Iid};

/// A route key or a bucket id as queue keys hold it: the queues of one route's bucket share one
/// copy (cloned from [`Routes::buckets`]), so comparing keys reads one place in memory, and an
/// idle queue does not carry its own copy of the id.
pub(super) type Name = std::sync::Arc<str>;

/// What a queue key names its bucket by: owned (`N` = [`Name`]) to make a key, borrowed from
/// one by [`QueueKey::bucket`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BucketId<N = Name> {
    /// Not learned yet: the route and its major parameter.
    Route(N),
    /// Learned: the server's bucket id.
    Hash(N),
}

#[derive(Debug, Clone, PartialEq, Eq)]
/// Where a request waits: per identity, per bucket (or unknown route), per major parameter.
/// The bucket's [`BucketId`] is held as its name and a flag beside the identity, where a
/// `BucketId` field would take 8 bytes more for its tag in every queue.
pub(super) struct QueueKey {
    pub(super) identity: Iid,
    learned: bool,
    name: Name,
    pub(super) major: Major,
}

/// A queue's major parameter as its key holds it: a channel's, guild's or webhook's id (1 to
/// 19 digits, no leading zero) as its number, in the key itself; any other text boxed.
/// Finding a channel's queue then compares two integers instead of reading the id's text from
/// an allocation of its own (a cache miss at every lookup among thousands of queues), and a
/// queue allocates nothing for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Major {
    /// No major parameter (`""`).
    None,
    Id(u64),
    /// Boxed twice, so that the key stays as small as with a text alone (a webhook's
    /// `id/token` is the rarer major parameter).
    Text(Box<Box<str>>),
}

/// A [`Major`] borrowed from a request's route: what finding a queue compares and hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum MajorRef<'a> {
    None,
    Id(u64),
    Text(&'a str),
}

impl<'a> MajorRef<'a> {
    /// The form of `text`: each text has exactly one (an id's digits never read as text).
    pub(super) fn of(text: &'a str) -> Self {
        let b = text.as_bytes();
        if b.is_empty() {
            return MajorRef::None;
        }
        if b.len() <= 19 && b[0] != b'0' {
            // At most 19 digits: below 10^19, within u64.
            let mut id = 0u64;
            for &d in b {
                if !d.is_ascii_digit() {
                    return MajorRef::Text(text);
                }
                id = id * 10 + u64::from(d - b'0');
            }
            return MajorRef::Id(id);
        }
        MajorRef::Text(text)
    }

    pub(super) fn to_owned(self) -> Major {
        match self {
            MajorRef::None => Major::None,
            MajorRef::Id(id) => Major::Id(id),
            MajorRef::Text(text) => Major::Text(Box::new(text.into())),
        }
    }
}

impl Major {
    pub(super) fn as_ref(&self) -> MajorRef<'_> {
        match self {
            Major::None => MajorRef::None,
            Major::Id(id) => MajorRef::Id(*id),
            Major::Text(text) => MajorRef::Text(text),
        }
    }
}

/// The parameter's text, as the request gave it.
impl std::fmt::Display for Major {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Major::None => Ok(()),
            Major::Id(id) => write!(f, "{id}"),
            Major::Text(text) => f.write_str(text),
        }
    }
}

/// A [`QueueKey`] borrowed from what a request's route and the route table hold: finding a
/// queue hashes and compares this, and allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct KeyRef<'a> {
    pub(super) identity: Iid,
    /// [`BucketId::Hash`] (else [`BucketId::Route`]).
    pub(super) learned: bool,
    pub(super) bucket: &'a str,
    pub(super) major: MajorRef<'a>,
}

impl QueueKey {
    pub(super) fn new(identity: Iid, bucket: BucketId, major: Major) -> Self {
        let (learned, name) = match bucket {
            BucketId::Route(route) => (false, route),
            BucketId::Hash(hash) => (true, hash),
        };
        QueueKey { identity, learned, name, major }
    }

    pub(super) fn bucket(&self) -> BucketId<&Name> {
        if self.learned { BucketId::Hash(&self.name) } else { BucketId::Route(&self.name) }
    }

    fn as_ref(&self) -> KeyRef<'_> {
        KeyRef { identity: self.identity, learned: self.learned, bucket: &self.name, major: self.major.as_ref() }
    }
}

/// Hashed as its [`KeyRef`], so that the map finds an owned key by a borrowed one.
impl std::hash::Hash for QueueKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_ref().hash(state);
    }
}

impl hashbrown::Equivalent<QueueKey> for KeyRef<'_> {
    fn equivalent(&self, key: &QueueKey) -> bool {
        *self == key.as_ref()
    }
}

/// Routes mapped to buckets, with what keeps the mapping honest when the server changes it.
#[derive(Debug)]
pub(super) struct Routes {
    /// `METHOD /template` -> bucket id, learned from responses.
    buckets: HashMap<String, Name>,
    /// Route -> how many queues keyed by that (not yet learned) route exist.
    queues: HashMap<String, u32>,
    /// Route -> the bucket id it had before the server changed it: until that old bucket's
    /// queue learns the new id itself, the route's requests keep going to it.
    renamed: HashMap<String, Name>,
    /// Route -> when the request whose answer taught its current bucket id was sent: an answer
    /// to a request sent before that is older news, and cannot change the mapping back.
    taught_at: HashMap<String, Nanos>,
    /// Learning order of `buckets`, for the size bound.
    order: VecDeque<String>,
    /// Bucket hash -> the longest window length learned for it under any major parameter:
    /// a new queue of that hash starts with it (Discord's hash names one limit and window for
    /// every channel), so a window it never saw answered is not estimated shorter than it is.
    /// At most `max_routes` entries.
    hash_periods: HashMap<String, Nanos>,
    /// Route groups known before any answer ([`Config::route_groups`]).
    prior: crate::prior::Prior,
    /// Every bucket id a route was mapped to (at most `max_routes`): the buckets an unknown
    /// route may turn out to share (see `contact`).
    hashes: hashbrown::HashSet<Name, foldhash::fast::FixedState>,
    /// The route keys of the requests held, each once.
    keys: RouteKeys,
    /// Where a request's route key is written before [`RouteKeys::intern`] finds it.
    scratch: String,
}

/// The route keys the limiter's requests hold (`Req::route_key`), each once: a request of a
/// route it knows allocates nothing for its key, and a waiting request holds a pointer, not a
/// copy. A key no request holds any more is dropped when the set has doubled since the last
/// sweep, so the set stays within twice the keys in use.
#[derive(Debug, Default)]
pub(super) struct RouteKeys {
    keys: hashbrown::HashSet<Name, foldhash::fast::FixedState>,
    sweep_at: usize,
}

impl RouteKeys {
    /// The one copy of `key`.
    pub(super) fn intern(&mut self, key: &str) -> Name {
        if let Some(name) = self.keys.get(key) {
            return name.clone();
        }
        if self.keys.len() >= self.sweep_at {
            self.keys.retain(|name| Name::strong_count(name) > 1);
            self.sweep_at = (2 * self.keys.len()).max(64);
        }
        let name = Name::from(key);
        self.keys.insert(name.clone());
        name
    }
}

impl Routes {
    pub(super) fn new(prior: crate::prior::Prior) -> Self {
        Routes {
            buckets: HashMap::default(),
            queues: HashMap::default(),
            renamed: HashMap::default(),
            taught_at: HashMap::default(),
            order: VecDeque::new(),
            hash_periods: HashMap::default(),
            prior,
            hashes: hashbrown::HashSet::default(),
            keys: RouteKeys::default(),
            scratch: String::new(),
        }
    }

    /// Maps a route with no mapping yet to `hash`, within the `max_routes` bound (the oldest
    /// learned go first).
    pub(super) fn remember(&mut self, route: String, hash: Name, max_routes: usize) {
        self.note_hash(&hash, max_routes);
        self.buckets.insert(route.clone(), hash);
        self.order.push_back(route);
        while self.buckets.len() > max_routes {
            match self.order.pop_front() {
                Some(old) => {
                    self.buckets.remove(&old);
                    self.renamed.remove(&old);
                    self.taught_at.remove(&old);
                }
                None => break,
            }
        }
    }

    /// A request's major parameter, whether its route is exempt from the global limit, and
    /// its route key, the one copy of it ([`RouteKeys`]).
    pub(super) fn key_of<'r>(&mut self, profile: HeaderProfile, request: &'r Request) -> (Cow<'r, str>, bool, Name) {
        let (major, exempt) = route_of(profile, request, &mut self.scratch);
        (major, exempt, self.keys.intern(&self.scratch))
    }

    /// The bucket id `route` was learned to map to.
    pub(super) fn bucket_of(&self, route: &str) -> Option<&Name> {
        self.buckets.get(route)
    }

    /// Whether `route`'s bucket is known.
    pub(super) fn knows(&self, route: &str) -> bool {
        self.buckets.contains_key(route)
    }

    /// Maps `route` to `hash` (anew, or changed: see [`Routes::renamed_from`]).
    pub(super) fn map(&mut self, route: String, hash: Name, max_routes: usize) {
        if self.buckets.contains_key(&route) {
            self.note_hash(&hash, max_routes);
            self.buckets.insert(route, hash);
        } else {
            self.remember(route, hash, max_routes);
        }
    }

    /// The request whose answer taught `route` its current bucket was sent at `sent_at`.
    pub(super) fn taught(&mut self, route: String, sent_at: Nanos) {
        self.taught_at.insert(route, sent_at);
    }

    /// Whether a request of `route` sent at `sent_at` left before (or with) the one that
    /// taught its current bucket: its answer is older news.
    pub(super) fn taught_after(&self, route: &str, sent_at: Nanos) -> bool {
        self.taught_at.get(route).is_some_and(|&t| sent_at <= t)
    }

    /// The server moved `route` away from bucket `old`: its requests keep going to `old`'s
    /// queue while it lives.
    pub(super) fn rename(&mut self, route: String, old: Name) {
        self.renamed.insert(route, old);
    }

    /// The bucket `route` was moved away from, if it was.
    pub(super) fn renamed_from(&self, route: &str) -> Option<&Name> {
        if self.renamed.is_empty() {
            return None;
        }
        self.renamed.get(route)
    }

    /// Whether a queue keyed by the (unlearned) route `route` exists.
    pub(super) fn has_route_queue(&self, route: &str) -> bool {
        self.queues.get(route).is_some_and(|&n| n > 0)
    }

    /// The longest window learned for bucket `hash`.
    pub(super) fn hash_period(&self, hash: &str) -> Option<Nanos> {
        self.hash_periods.get(hash).copied()
    }

    /// A window of `period` for bucket `hash`: kept if longer than the one known, within the
    /// `max_routes` bound on hashes. Returns whether it was (the queues of the hash may take
    /// it).
    pub(super) fn lengthen_hash_period(&mut self, hash: &str, period: Nanos, max_routes: usize) -> bool {
        if !self.lengthens_hash_period(hash, period, max_routes) {
            return false;
        }
        self.hash_periods.insert(hash.to_string(), period);
        true
    }

    /// Whether [`Routes::lengthen_hash_period`] would keep `period` for `hash`.
    pub(super) fn lengthens_hash_period(&self, hash: &str, period: Nanos, max_routes: usize) -> bool {
        match self.hash_periods.get(hash) {
            Some(&known) => known < period,
            None => self.hash_periods.len() < max_routes,
        }
    }

    /// Every bucket hash with its longest window learned.
    pub(super) fn hash_periods(&self) -> impl Iterator<Item = (&str, Nanos)> {
        self.hash_periods.iter().map(|(h, &p)| (h.as_str(), p))
    }

    /// Every route learned with its bucket, in learning order.
    pub(super) fn learned(&self) -> impl Iterator<Item = (&str, &Name)> {
        self.order.iter().filter_map(|route| Some((route.as_str(), self.buckets.get(route)?)))
    }

    /// Every bucket id a route was mapped to (see `hashes`).
    pub(super) fn hashes(&self) -> impl Iterator<Item = &Name> {
        self.hashes.iter()
    }

    /// The route groups known before any answer.
    pub(super) fn prior(&self) -> &crate::prior::Prior {
        &self.prior
    }

    /// Notes that a route maps to `hash` (see [`Routes::hashes`]).
    pub(super) fn note_hash(&mut self, hash: &Name, max_routes: usize) {
        if self.hashes.len() < max_routes && !self.hashes.contains(&**hash) {
            self.hashes.insert(hash.clone());
        }
    }

    /// Bookkeeping for `queues` when a queue keyed `key` is made.
    pub(super) fn queue_opened(&mut self, key: &QueueKey) {
        if let BucketId::Route(route) = key.bucket() {
            *self.queues.entry_ref(&**route).or_insert(0) += 1;
        }
    }

    /// Bookkeeping for `queues` when a queue keyed `key` goes away (or takes a bucket's key).
    pub(super) fn queue_closed(&mut self, key: &QueueKey) {
        if let BucketId::Route(route) = key.bucket()
            && let Some(n) = self.queues.get_mut(&**route)
        {
            *n -= 1;
            if *n == 0 {
                self.queues.remove(&**route);
            }
        }
    }
}

/// The key of identity `iid`'s major parameter `major` among the first-contact entries (see
/// `contact`): a hash, so that an entry holds no copy of the parameter's text.
pub(super) fn contact_key(iid: Iid, major: &Major) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().hash_one((iid, major.as_ref()))
}

/// Whether `method` (any ASCII case) is idempotent.
pub(super) fn is_idempotent_method(method: &str) -> bool {
    ["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"].iter().any(|m| m.eq_ignore_ascii_case(method))
}

pub(super) fn valid_method(method: &str) -> bool {
    !method.is_empty()
        && method.len() <= 32
        && method.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The route of a validated `request` under `profile`: its key written into `key` (the
/// method and template, or the method and the path given with an explicit major parameter),
/// its major parameter (borrowed from the request where it can be), and whether the route is
/// exempt from the global limit.
pub(super) fn route_of<'r>(profile: HeaderProfile, request: &'r Request, key: &mut String) -> (Cow<'r, str>, bool) {
    match &request.major {
        Some(major) => {
            key.clear();
            key.push_str(&request.method);
            key.make_ascii_uppercase();
            key.push(' ');
            key.push_str(&request.path);
            (crate::route::hide_given_secret(profile, &request.path, major), false)
        }
        None => {
            let (major, exempt) = route_into(profile, &request.method, &request.path, key);
            match &request.model {
                // The provider limits per model: the model keeps them apart (`Request::model`).
                Some(model) if crate::route::limits_per_model(profile) => (Cow::Borrowed(model), exempt),
                _ => (major, exempt),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{MajorRef, Name, RouteKeys};
    use crate::types::Request;

    #[test]
    fn a_path_that_is_not_ascii_is_refused_not_a_panic() {
        // The URL check sliced the path at byte 8, inside `ള` (found by the conversions fuzzer).
        let mut l = crate::Limiter::new(crate::Config::default()).unwrap();
        for path in ["·\\🕴ള*", "ééééé", "htt€://x/y", "https:/\u{1F574}"] {
            let e = l.enqueue(0, Request::new("GET", path)).unwrap_err();
            assert_eq!(e.code(), "invalid_request", "{path:?}");
            assert_eq!(l.predict(0, &Request::new("GET", path)).unwrap_err().code(), "invalid_request");
        }
        assert!(l.enqueue(0, Request::new("GET", "HTTPS://discord.com/api/v10/users/@me")).is_ok());
    }

    #[test]
    fn a_major_parameter_has_one_form_and_gives_its_text_back() {
        let forms = [
            ("", MajorRef::None),
            ("7", MajorRef::Id(7)),
            ("872712139712913438", MajorRef::Id(872_712_139_712_913_438)),
            ("9999999999999999999", MajorRef::Id(9_999_999_999_999_999_999)),
            // Not an id's only spelling, or beyond 19 digits: text.
            ("0", MajorRef::Text("0")),
            ("0872712139712913438", MajorRef::Text("0872712139712913438")),
            ("18446744073709551616", MajorRef::Text("18446744073709551616")),
            ("12a", MajorRef::Text("12a")),
            ("+12", MajorRef::Text("+12")),
            ("1 ", MajorRef::Text("1 ")),
            ("123/tok", MajorRef::Text("123/tok")),
            ("١٢", MajorRef::Text("١٢")),
        ];
        for (text, form) in forms {
            assert_eq!(MajorRef::of(text), form, "{text:?}");
            assert_eq!(MajorRef::of(text).to_owned().to_string(), text);
            assert_eq!(MajorRef::of(text).to_owned().as_ref(), form);
        }
    }

    #[test]
    fn route_keys_are_shared_and_the_unused_ones_go() {
        let mut keys = RouteKeys::default();
        let held = keys.intern("POST /channels/:id/messages");
        assert!(Name::ptr_eq(&held, &keys.intern("POST /channels/:id/messages")), "one copy per key");
        // Ten thousand keys no request holds: the set stays within twice the keys in use
        // (and the sweep's floor), and the held key keeps its one copy.
        for i in 0..10_000 {
            keys.intern(&format!("GET /x/{i}"));
        }
        assert!(keys.keys.len() <= 2 * 64 + 1, "{} keys kept", keys.keys.len());
        assert!(Name::ptr_eq(&held, &keys.intern("POST /channels/:id/messages")));
    }
}
