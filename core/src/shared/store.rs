//! [`MemoryStore`]: the reference model of the shared store (see the module documentation of
//! [`crate::shared`] for the contract it implements, key by key).

use std::collections::{HashMap, VecDeque};

use super::{Reservation, ReservationAnswer, SharedConfig, SharedScope, SharedUpdate};
use crate::types::{MILLISECOND, Nanos, SECOND};

/// How far apart two reported window ends may be for one end: each reset comes rounded to the
/// millisecond.
const REPORT_ROUNDING: Nanos = 2 * MILLISECOND;

/// A value with an expiry time, like a Redis key with a TTL: absent from `expires_at` on.
#[derive(Debug, Clone)]
struct Expiring<T> {
    value: T,
    expires_at: Nanos,
}

/// A keyed map of expiring values.
#[derive(Debug, Clone)]
struct Keys<K, T> {
    map: HashMap<K, Expiring<T>>,
}

impl<K: std::hash::Hash + Eq + Clone, T> Keys<K, T> {
    fn new() -> Self {
        Keys { map: HashMap::new() }
    }

    fn get(&self, now: Nanos, key: &K) -> Option<&T> {
        self.map.get(key).filter(|e| e.expires_at > now).map(|e| &e.value)
    }

    fn get_mut(&mut self, now: Nanos, key: &K) -> Option<&mut T> {
        match self.map.get_mut(key) {
            Some(e) if e.expires_at > now => Some(&mut e.value),
            _ => None,
        }
    }

    fn set(&mut self, key: K, value: T, expires_at: Nanos) {
        self.map.insert(key, Expiring { value, expires_at });
    }

    fn expire_at(&mut self, key: &K, expires_at: Nanos) {
        if let Some(e) = self.map.get_mut(key) {
            e.expires_at = expires_at;
        }
    }

    fn remove(&mut self, key: &K) {
        self.map.remove(key);
    }

    fn purge(&mut self, now: Nanos) {
        self.map.retain(|_, e| e.expires_at > now);
    }

    fn len(&self, now: Nanos) -> usize {
        self.map.values().filter(|e| e.expires_at > now).count()
    }
}

/// `(identity, route)`.
type RouteKey = (String, String);
/// `(identity, route or hash, major)`.
type Triple = (String, String, String);

/// The `b|` hash of one bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BucketState {
    limit: u32,
    /// Grants still allowed in this window, counted down from its start (used until a report
    /// of this window arrives).
    remaining: u32,
    /// The lowest `remaining` a report of this window gave (`None` after a roll until one
    /// arrives). What may still be granted is this minus the unanswered grants: the lowest
    /// report is the server's latest state, and what it did not count is unanswered or came
    /// back with a lower report (the engine's own rule).
    reported: Option<u32>,
    reset_at: Nanos,
    window: Nanos,
    window_start: Nanos,
    provisional: bool,
    /// A report of this window gave a `remaining` without a reset: its window's end is
    /// unknown, so no later report can be shown to have reached the server after it.
    untimed: bool,
    margin: Nanos,
}

impl BucketState {
    /// Starts a new window at `now`. `carried`: grants still unanswered (they may land in the
    /// new window).
    fn roll(&mut self, now: Nanos, carried: usize) {
        self.window_start = now;
        self.remaining = self.limit.saturating_sub(carried.min(u32::MAX as usize) as u32);
        self.reported = None;
        self.reset_at = now.saturating_add(self.window).saturating_add(self.margin);
        self.provisional = true;
        self.untimed = false;
    }
}

/// What step 5/6 of `reserve` decided the grant takes.
enum Take {
    Nothing,
    Slot(Triple),
    RouteLock(Triple),
    /// The bucket's lock and the route's (the bucket key, the route key).
    BucketLock(Triple, Triple),
}

/// The reference model of the shared store: what the Redis script does, in memory, for tests
/// and for single-machine setups where several limiters live in one process.
///
/// `now` is the store's clock (monotonic, nanoseconds; a smaller value than before is taken as
/// the previous one). `client` identifies the calling process (see the [module
/// documentation](super)).
///
/// ```
/// use ratelane::shared::{MemoryStore, Reservation, ReservationAnswer, SharedConfig, SharedScope};
/// use ratelane::SECOND;
///
/// let mut store = MemoryStore::new(&SharedConfig::default());
/// let reservation = |id| Reservation {
///     id,
///     identity: "bot".into(),
///     route: "GET /guilds/:id".into(),
///     major: "1".into(),
///     bucket: None,
///     counts_global: true,
///     global_limit: 2,
///     global_window: SECOND,
///     global_want: 1,
///     margin: 0,
///     invalid_limit: 0,
///     invalid_window: 0,
///     ..Reservation::default()
/// };
/// // The first request of an unknown route takes the pioneer lock ...
/// assert_eq!(store.reserve(0, "a", &reservation(1)), ReservationAnswer::Granted { processes: Some(1), leased: 0, store_time: Some(0) });
/// // ... so another process's request for it waits for the pioneer's answer.
/// assert!(matches!(
///     store.reserve(0, "b", &reservation(1)),
///     ReservationAnswer::Denied { scope: SharedScope::Pioneer, .. }
/// ));
/// ```
#[derive(Debug, Clone)]
pub struct MemoryStore {
    lease: Nanos,
    pioneer_poll: Nanos,
    state_ttl: Nanos,
    now: Nanos,
    ops: u64,
    /// Live processes: each client's latest `reserve` (the `procs` sorted set).
    procs: Keys<(), HashMap<String, Nanos>>,
    edge: Keys<(), Nanos>,
    invalid: Keys<(), VecDeque<Nanos>>,
    /// Grant times and members (`client:id`) per identity.
    global: Keys<String, VecDeque<(Nanos, String)>>,
    /// Global tokens leased to a client and not yet spent, per identity and client, oldest
    /// first (the `gl` sorted set).
    leases: Keys<(String, String), VecDeque<String>>,
    paused: Keys<String, Nanos>,
    routes: Keys<RouteKey, String>,
    buckets: Keys<Triple, BucketState>,
    /// The longest window reported for a bucket hash under any major (the `bw` key): a hash
    /// has one window for all its majors, and a bucket first seen under one major (its window
    /// underestimated from a first answer late in it) takes it from the others.
    hash_windows: Keys<(String, String), Nanos>,
    /// Unanswered grants of a bucket: member and the time it stops counting (the score of the
    /// `bp` sorted set): `grant + lease`, or for a ghost `grant + window + margin`.
    pending: Keys<Triple, Vec<(String, Nanos)>>,
    route_locks: Keys<Triple, String>,
    bucket_locks: Keys<Triple, String>,
    route_holds: Keys<Triple, Nanos>,
    bucket_holds: Keys<Triple, Nanos>,
}

impl MemoryStore {
    /// An empty store with the store-wide settings of `config` (`lease`, `pioneer_poll`,
    /// `state_ttl`).
    pub fn new(config: &SharedConfig) -> Self {
        MemoryStore {
            lease: config.lease.max(1),
            pioneer_poll: config.pioneer_poll.max(1),
            state_ttl: config.state_ttl.max(1),
            now: 0,
            ops: 0,
            procs: Keys::new(),
            edge: Keys::new(),
            invalid: Keys::new(),
            global: Keys::new(),
            leases: Keys::new(),
            paused: Keys::new(),
            routes: Keys::new(),
            buckets: Keys::new(),
            hash_windows: Keys::new(),
            pending: Keys::new(),
            route_locks: Keys::new(),
            bucket_locks: Keys::new(),
            route_holds: Keys::new(),
            bucket_holds: Keys::new(),
        }
    }

    /// Forgets every key, keeping the settings and the clock: a store restarted without
    /// persistence (Redis killed and started again empty).
    pub fn clear(&mut self) {
        let (now, ops) = (self.now, self.ops);
        *self = MemoryStore {
            lease: self.lease,
            pioneer_poll: self.pioneer_poll,
            state_ttl: self.state_ttl,
            ..MemoryStore::new(&SharedConfig::default())
        };
        self.now = now;
        self.ops = ops;
    }

    /// How many keys are live at `now` (what `DBSIZE` would count in the namespace), for tests
    /// of expiry.
    pub fn keys(&self, now: Nanos) -> usize {
        let now = now.max(self.now);
        self.procs.len(now)
            + self.edge.len(now)
            + self.invalid.len(now)
            + self.global.len(now)
            + self.leases.len(now)
            + self.paused.len(now)
            + self.routes.len(now)
            + self.buckets.len(now)
            + self.hash_windows.len(now)
            + self.pending.len(now)
            + self.route_locks.len(now)
            + self.bucket_locks.len(now)
            + self.route_holds.len(now)
            + self.bucket_holds.len(now)
    }

    fn advance(&mut self, now: Nanos) -> Nanos {
        self.now = self.now.max(now);
        self.ops += 1;
        if self.ops.is_multiple_of(256) {
            // Like Redis's active expiry: expired keys are dropped from memory now and then
            // (they are already invisible to every read).
            let now = self.now;
            self.procs.purge(now);
            self.edge.purge(now);
            self.invalid.purge(now);
            self.global.purge(now);
            self.leases.purge(now);
            self.paused.purge(now);
            self.routes.purge(now);
            self.buckets.purge(now);
            self.hash_windows.purge(now);
            self.pending.purge(now);
            self.route_locks.purge(now);
            self.bucket_locks.purge(now);
            self.route_holds.purge(now);
            self.bucket_holds.purge(now);
        }
        self.now
    }

    /// Unanswered grants of a bucket after dropping those older than the lease.
    fn live_pending(&mut self, now: Nanos, key: &Triple) -> usize {
        match self.pending.get_mut(now, key) {
            Some(p) => {
                p.retain(|&(_, until)| until > now);
                p.len()
            }
            None => 0,
        }
    }

    /// The bucket hash for a route: the learned mapping, else what the caller knows.
    fn hash_for(&self, now: Nanos, identity: &str, route: &str, known: Option<&str>) -> Option<String> {
        match self.routes.get(now, &(identity.to_string(), route.to_string())) {
            Some(h) => Some(h.clone()),
            None => known.map(str::to_string),
        }
    }

    /// When the pioneer lock `key` is held by another member than `member`: the time to ask
    /// again (the poll interval, or the lock's end if sooner).
    fn lock_held(&self, now: Nanos, locks: &Keys<Triple, String>, key: &Triple, member: &str) -> Option<Nanos> {
        match locks.get(now, key) {
            Some(holder) if holder != member => Some(now.saturating_add(self.pioneer_poll).min(locks.map[key].expires_at)),
            _ => None,
        }
    }

    /// Decides reservation `r` of process `client` atomically (see the contract's `reserve`).
    pub fn reserve(&mut self, now: Nanos, client: &str, r: &Reservation) -> ReservationAnswer {
        let answer = self.reserve_inner(now, client, r);
        self.drop_empty();
        answer
    }

    /// Records `update` from process `client` atomically (see the contract's `record`).
    pub fn record(&mut self, now: Nanos, client: &str, update: &SharedUpdate) {
        self.record_inner(now, client, update);
        self.drop_empty();
    }

    /// Like Redis, a sorted set whose last member went is no key at all.
    fn drop_empty(&mut self) {
        self.procs.map.retain(|_, e| !e.value.is_empty());
        self.invalid.map.retain(|_, e| !e.value.is_empty());
        self.global.map.retain(|_, e| !e.value.is_empty());
        self.leases.map.retain(|_, e| !e.value.is_empty());
        self.pending.map.retain(|_, e| !e.value.is_empty());
    }

    /// The oldest token leased to `client` for `identity` that still counts in the window
    /// (`global_window`), dropping the ones that no longer do.
    fn live_lease_token(&mut self, now: Nanos, identity: &str, client: &str, global_window: Nanos) -> Option<String> {
        let key = (identity.to_string(), client.to_string());
        let counted: Vec<String> = match self.global.get(now, &identity.to_string()) {
            Some(log) => log
                .iter()
                .filter(|(t, _)| t.saturating_add(global_window) > now)
                .map(|(_, m)| m.clone())
                .collect(),
            None => Vec::new(),
        };
        let tokens = self.leases.get_mut(now, &key)?;
        while let Some(token) = tokens.front() {
            if counted.contains(token) {
                return Some(token.clone());
            }
            tokens.pop_front();
        }
        None
    }

    /// Whether `client` reserved within the last `lease` (it is in `procs`): the store then
    /// has every grant it made to that process in the global window.
    fn knows(&self, now: Nanos, client: &str) -> bool {
        let lease = self.lease;
        self.procs.get(now, &()).and_then(|seen| seen.get(client)).is_some_and(|&t| t.saturating_add(lease) > now)
    }

    /// Counts `client` as live at `now` (unless it is still `reporting`); returns how many
    /// processes are (`procs`), or with `since`, how many reserved within that long.
    fn touch_process(&mut self, now: Nanos, client: &str, since: Option<Nanos>, reporting: bool) -> u32 {
        let lease = self.lease;
        let expires = now.saturating_add(lease);
        match self.procs.get_mut(now, &()) {
            Some(seen) => {
                seen.retain(|_, &mut t| t.saturating_add(lease) > now);
                if !reporting {
                    seen.insert(client.to_string(), now);
                    self.procs.expire_at(&(), expires);
                }
            }
            None if !reporting => self.procs.set((), HashMap::from([(client.to_string(), now)]), expires),
            None => {}
        }
        let n = match (self.procs.get(now, &()), since) {
            (Some(seen), Some(since)) => seen.values().filter(|&&t| t.saturating_add(since) >= now).count(),
            (Some(seen), None) => seen.len(),
            (None, _) => 0,
        };
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// What `client` reports it sent of `identity`'s global budget that the store may not
    /// count (`ages`: how long before now): its earlier report of this kind (`tag`: `u` for
    /// unrecorded, `g` for granted) is replaced by this one, one `g` member per send, named
    /// `client "!" tag k` (k from 1) with score now - age. A report sent again (its answer was
    /// lost, or two reservations carried it) so counts once.
    fn count_report(&mut self, now: Nanos, client: &str, identity: &str, global_window: Nanos, tag: &str, ages: &[Nanos]) {
        if ages.is_empty() {
            return;
        }
        let prefix = format!("{client}!{tag}");
        let ours =
            |m: &str| m.strip_prefix(prefix.as_str()).is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()));
        let key = identity.to_string();
        let expires = now.saturating_add(global_window);
        if self.global.get(now, &key).is_none() {
            self.global.set(key.clone(), VecDeque::new(), expires);
        }
        let e = self.global.map.get_mut(&key).expect("live");
        e.expires_at = e.expires_at.max(expires);
        let log = &mut e.value;
        log.retain(|(_, m)| !ours(m));
        for (k, &age) in ages.iter().enumerate() {
            let at = now.saturating_sub(age);
            let pos = log.partition_point(|&(t, _)| t <= at);
            log.insert(pos, (at, format!("{prefix}{}", k + 1)));
        }
    }

    fn reserve_inner(&mut self, now: Nanos, client: &str, r: &Reservation) -> ReservationAnswer {
        let now = self.advance(now);
        let member = format!("{client}:{}", r.id);
        // 0. live processes, reported with every answer; the sends the process reports the
        // store may not count (after an outage), whatever the answer
        let known = self.knows(now, client);
        let processes = Some(self.touch_process(now, client, r.processes_since, r.reporting));
        if r.global_limit > 0 {
            self.count_report(now, client, &r.identity, r.global_window, "u", &r.unrecorded);
            if !known {
                self.count_report(now, client, &r.identity, r.global_window, "g", &r.granted);
            }
        }
        let deny = |until: Nanos, scope: SharedScope| ReservationAnswer::Denied {
            retry_after: until - now,
            scope,
            processes,
        };

        // 1. edge
        if let Some(&until) = self.edge.get(now, &())
            && until > now
        {
            return deny(until, SharedScope::Edge);
        }
        // 2. invalid budget
        if r.invalid_limit > 0
            && let Some(log) = self.invalid.get_mut(now, &())
        {
            while log.front().is_some_and(|&t| t.saturating_add(r.invalid_window) <= now) {
                log.pop_front();
            }
            let n = log.len();
            let limit = r.invalid_limit as usize;
            if n >= limit {
                return deny(log[n - limit].saturating_add(r.invalid_window), SharedScope::Invalid);
            }
        }
        // 3. global
        let mut room = r.global_limit as usize;
        let mut spend = None;
        if r.counts_global {
            if let Some(&until) = self.paused.get(now, &r.identity)
                && until > now
            {
                return deny(until, SharedScope::Global);
            }
            if r.global_want == 0 && r.global_limit > 0 {
                spend = self.live_lease_token(now, &r.identity, client, r.global_window);
            }
            if r.global_limit > 0
                && spend.is_none()
                && let Some(log) = self.global.get_mut(now, &r.identity)
            {
                let keep = r.global_window.saturating_mul(2);
                while log.front().is_some_and(|(t, _)| t.saturating_add(keep) <= now) {
                    log.pop_front();
                }
                let old = log.iter().take_while(|(t, _)| t.saturating_add(r.global_window) <= now).count();
                let n = log.len() - old;
                let limit = r.global_limit as usize;
                if n >= limit {
                    return deny(log[old + n - limit].0.saturating_add(r.global_window), SharedScope::Global);
                }
                room = limit - n;
            }
        }
        // 4. route hold
        let triple_route: Triple = (r.identity.clone(), r.route.clone(), r.major.clone());
        if let Some(&until) = self.route_holds.get(now, &triple_route)
            && until > now
        {
            return deny(until, SharedScope::Route);
        }
        // 5. bucket, 6. pioneer lock
        let take = match self.hash_for(now, &r.identity, &r.route, r.bucket.as_deref()) {
            Some(h) if h.is_empty() => Take::Nothing,
            Some(h) => {
                let key: Triple = (r.identity.clone(), h, r.major.clone());
                if let Some(&until) = self.bucket_holds.get(now, &key)
                    && until > now
                {
                    return deny(until, SharedScope::Bucket);
                }
                if let Some(b) = self.buckets.get_mut(now, &key) {
                    if now >= b.reset_at {
                        b.margin = r.margin;
                    }
                    self.roll_if_due(now, &key);
                    let unanswered = self.live_pending(now, &key);
                    let b = self.buckets.get(now, &key).expect("checked above");
                    let available = match b.reported {
                        Some(r) => r.saturating_sub(unanswered.min(u32::MAX as usize) as u32),
                        None => b.remaining,
                    };
                    if available == 0 {
                        return deny(b.reset_at.max(now + 1), SharedScope::Bucket);
                    }
                    Take::Slot(key)
                } else {
                    // A known bucket without state: one pioneer per bucket and major, and also
                    // per route and major, since another process may be probing this route
                    // without knowing its bucket (it holds the route lock).
                    if let Some(until) = self.lock_held(now, &self.bucket_locks, &key, &member) {
                        return deny(until, SharedScope::Pioneer);
                    }
                    if let Some(until) = self.lock_held(now, &self.route_locks, &triple_route, &member) {
                        return deny(until, SharedScope::Pioneer);
                    }
                    Take::BucketLock(key, triple_route)
                }
            }
            None => {
                if let Some(until) = self.lock_held(now, &self.route_locks, &triple_route, &member) {
                    return deny(until, SharedScope::Pioneer);
                }
                Take::RouteLock(triple_route)
            }
        };
        // 7. commit
        let mut leased = 0;
        if let Some(token) = spend {
            // A leased token is spent: it counts from now, like a grant of this moment.
            let lease_key = (r.identity.clone(), client.to_string());
            if let Some(tokens) = self.leases.get_mut(now, &lease_key) {
                tokens.pop_front();
            }
            let expires = now.saturating_add(r.global_window);
            if let Some(log) = self.global.get_mut(now, &r.identity) {
                if let Some(pos) = log.iter().position(|(_, m)| *m == token) {
                    log.remove(pos);
                }
                log.push_back((now, token));
                self.global.expire_at(&r.identity, expires);
            }
        } else if r.counts_global && r.global_limit > 0 {
            let expires = now.saturating_add(r.global_window);
            // This request's token, and the lease: as many more as it asks for and the window
            // has room for, each its own entry (`member "+" i ":" now`, never matched by a
            // release), listed as this client's until spent.
            leased = (r.global_want.max(1) as usize).min(room.max(1)) - 1;
            let entries = std::iter::once((now, member.clone()))
                .chain((1..=leased).map(|i| (now, format!("{member}+{i}:{now}"))));
            match self.global.get_mut(now, &r.identity) {
                Some(log) => {
                    log.extend(entries);
                    self.global.expire_at(&r.identity, expires);
                }
                None => self.global.set(r.identity.clone(), entries.collect(), expires),
            }
            if leased > 0 {
                let lease_key = (r.identity.clone(), client.to_string());
                let names = (1..=leased).map(|i| format!("{member}+{i}:{now}"));
                match self.leases.get_mut(now, &lease_key) {
                    Some(tokens) => {
                        tokens.extend(names);
                        self.leases.expire_at(&lease_key, expires);
                    }
                    None => self.leases.set(lease_key, names.collect(), expires),
                }
            }
        }
        let lease_end = now.saturating_add(self.lease);
        match take {
            Take::Nothing => {}
            Take::Slot(key) => {
                let b = self.buckets.get_mut(now, &key).expect("checked above");
                b.remaining = b.remaining.saturating_sub(1);
                let expires = b.reset_at.saturating_add(self.state_ttl);
                self.buckets.expire_at(&key, expires);
                match self.pending.get_mut(now, &key) {
                    Some(p) => {
                        p.retain(|(m, _)| *m != member);
                        p.push((member, lease_end));
                        let e = self.pending.map.get_mut(&key).expect("live");
                        e.expires_at = e.expires_at.max(lease_end);
                    }
                    None => self.pending.set(key, vec![(member, lease_end)], lease_end),
                }
            }
            Take::RouteLock(key) => self.route_locks.set(key, member, lease_end),
            Take::BucketLock(key, route_key) => {
                self.route_locks.set(route_key, member.clone(), lease_end);
                self.bucket_locks.set(key, member, lease_end);
            }
        }
        ReservationAnswer::Granted { processes, leased: leased as u32, store_time: Some(now) }
    }

    fn record_inner(&mut self, now: Nanos, client: &str, update: &SharedUpdate) {
        let now = self.advance(now);
        match update {
            SharedUpdate::Bucket {
                id,
                identity,
                route,
                major,
                bucket,
                unlimited,
                limit,
                remaining,
                reset_after,
                window,
            } => {
                let member = format!("{client}:{id}");
                let hash = bucket.clone().or_else(|| {
                    self.hash_for(now, identity, route, None).filter(|h| !h.is_empty())
                });
                // 1. the route's mapping
                let route_key = (identity.clone(), route.clone());
                if let Some(h) = bucket {
                    self.routes.set(route_key, h.clone(), now.saturating_add(self.state_ttl));
                } else if *unlimited {
                    self.routes.set(route_key, String::new(), now.saturating_add(self.state_ttl));
                }
                // 2. a window that has ended rolls first, counting this request as still
                // unanswered: it reached the server, maybe in the window that follows. So does
                // a window this answer shows to be over at the server.
                let mut later = false;
                if let Some(h) = &hash {
                    let key: Triple = (identity.clone(), h.clone(), major.clone());
                    later = remaining.is_some()
                        && reset_after.is_some_and(|ra| self.reports_a_later_window(now, &key, &member, ra));
                    if later {
                        self.roll_now(now, &key);
                    } else {
                        self.roll_if_due(now, &key);
                    }
                }
                // 3. locks, the unanswered grant: answered, or, for an answer that says nothing
                // about the bucket (a 5xx), a ghost.
                let informative = limit.is_some() || remaining.is_some() || reset_after.is_some();
                let granted_at =
                    self.release(now, &member, identity, route, major, hash.as_deref(), !informative, *window);
                let Some(h) = hash else { return };
                let hash_key = (identity.clone(), h.clone());
                let hash_window = self.hash_windows.get(now, &hash_key).copied().unwrap_or(0);
                if !informative {
                    // 4. the hash's window first: the ghost counts for as long
                    let key: Triple = (identity.clone(), h.clone(), major.clone());
                    if let Some(b) = self.buckets.get_mut(now, &key) {
                        b.window = b.window.max(hash_window);
                    }
                    self.ghost(now, &member, identity, major, &h);
                    self.extend_ghosts(now, &(identity.clone(), h, major.clone()));
                    return;
                }
                let key: Triple = (identity.clone(), h, major.clone());
                let pending = self.live_pending(now, &key);
                let t_r = reset_after.map(|ra| now.saturating_add(ra));
                match self.buckets.get_mut(now, &key) {
                    None => {
                        // 5. a new bucket
                        let limit = limit.or(remaining.map(|r| r.saturating_add(1))).unwrap_or(1).max(1);
                        let rem = remaining.unwrap_or(limit - 1).saturating_sub(pending.min(u32::MAX as usize) as u32);
                        let mut w = window.unwrap_or(0).max(reset_after.unwrap_or(0)).max(hash_window);
                        if w == 0 {
                            w = SECOND;
                        }
                        let state = BucketState {
                            limit,
                            remaining: rem,
                            reported: *remaining,
                            reset_at: t_r.unwrap_or_else(|| now.saturating_add(w)),
                            window: w,
                            window_start: now,
                            provisional: t_r.is_none(),
                            untimed: remaining.is_some() && t_r.is_none(),
                            margin: 0,
                        };
                        let expires = state.reset_at.saturating_add(self.state_ttl);
                        self.buckets.set(key.clone(), state, expires);
                    }
                    Some(b) => {
                        // 6. merge into the current window (rolled in step 2)
                        if let Some(l) = limit {
                            b.limit = (*l).max(1);
                        }
                        b.window = b.window.max(window.unwrap_or(0)).max(hash_window);
                        // (The answer that rolled the window in step 2 is its first.)
                        let carried = granted_at.filter(|&g| g < b.window_start && !later);
                        let stale = carried.is_some() || t_r.is_some_and(|t| t <= b.window_start);
                        if !stale {
                            if let Some(rem) = remaining {
                                b.reported = Some(b.reported.map_or(*rem, |r| r.min(*rem)));
                                b.untimed |= reset_after.is_none();
                            }
                            if let (Some(t), Some(ra)) = (t_r, reset_after) {
                                b.window = b.window.max(*ra);
                                b.reset_at = if b.provisional { t } else { b.reset_at.max(t) };
                                b.provisional = false;
                            }
                        }
                        // 7. expiry
                        let expires = b.reset_at.saturating_add(self.state_ttl);
                        let span = b.window.saturating_add(b.margin);
                        self.buckets.expire_at(&key, expires);
                        // 8. a grant carried over from the previous window may have been
                        // counted in this one, after its lowest report or before any (a later
                        // grant may have arrived first and reported a window without it): its
                        // report is read as the old window's, and it keeps counting as a ghost
                        // (one window plus margin after its grant, like a 5xx's).
                        if let Some(g) = carried {
                            self.carry_ghost(now, &member, &key, g, g.saturating_add(span));
                        }
                    }
                }
                // 9. the hash's window is the longest of its majors'
                if let Some(w) = self.buckets.get(now, &key).map(|b| b.window) {
                    self.hash_windows.set(hash_key, w.max(hash_window), now.saturating_add(self.state_ttl));
                }
                // 10. what the bucket knows now holds its ghosts too
                self.extend_ghosts(now, &key);
            }
            SharedUpdate::Release { id, identity, route, major, bucket, reached, window } => {
                let member = format!("{client}:{id}");
                let hash = bucket.clone().or_else(|| {
                    self.hash_for(now, identity, route, None).filter(|h| !h.is_empty())
                });
                if *reached && let Some(h) = &hash {
                    self.roll_if_due(now, &(identity.clone(), h.clone(), major.clone()));
                }
                let granted_at =
                    self.release(now, &member, identity, route, major, hash.as_deref(), *reached, *window);
                if !*reached {
                    self.give_back(now, &member, identity, major, hash.as_deref(), granted_at);
                } else if let Some(h) = hash {
                    self.ghost(now, &member, identity, major, &h);
                    self.extend_ghosts(now, &(identity.clone(), h, major.clone()));
                }
            }
            SharedUpdate::Hold { scope, identity, route, major, bucket, retry_after } => {
                let until = now.saturating_add(*retry_after);
                let later = |old: Option<&Nanos>| old.map_or(until, |&o| o.max(until));
                match scope {
                    SharedScope::Edge => {
                        let t = later(self.edge.get(now, &()));
                        self.edge.set((), t, t);
                    }
                    SharedScope::Global => {
                        let t = later(self.paused.get(now, identity));
                        self.paused.set(identity.clone(), t, t);
                    }
                    SharedScope::Route | SharedScope::Bucket => {
                        let hash = bucket.clone().or_else(|| {
                            self.hash_for(now, identity, route, None).filter(|h| !h.is_empty())
                        });
                        match (scope, hash) {
                            (SharedScope::Bucket, Some(h)) => {
                                let key = (identity.clone(), h, major.clone());
                                let t = later(self.bucket_holds.get(now, &key));
                                self.bucket_holds.set(key, t, t);
                            }
                            _ => {
                                let key = (identity.clone(), route.clone(), major.clone());
                                let t = later(self.route_holds.get(now, &key));
                                self.route_holds.set(key, t, t);
                            }
                        }
                    }
                    SharedScope::Invalid | SharedScope::Pioneer => {}
                }
            }
            SharedUpdate::Invalid { window, .. } => {
                let expires = now.saturating_add(*window);
                match self.invalid.get_mut(now, &()) {
                    Some(log) => {
                        log.push_back(now);
                        self.invalid.expire_at(&(), expires);
                    }
                    None => self.invalid.set((), VecDeque::from([now]), expires),
                }
            }
        }
    }

    /// Starts a new window for bucket `key` if its window has ended, counting the live
    /// unanswered grants as carried.
    fn roll_if_due(&mut self, now: Nanos, key: &Triple) {
        if self.buckets.get(now, key).is_none_or(|b| now < b.reset_at) {
            return;
        }
        self.roll_now(now, key);
    }

    /// Whether an answer to `member`'s unanswered grant of bucket `key`, reporting a reset
    /// `reset_after` away, shows the bucket's current window over at the server. Its request
    /// left after its grant, so its window ends at least `reset_after` after the grant; if that
    /// is later than every end this window was told (a window not `provisional` was told one
    /// with each report, unless `untimed`), it arrived after all their requests: in a later
    /// window (of a sliding one, after the oldest counted request expired). A request granted
    /// near a window's end and written late lands in the next one; merged into the old window,
    /// its report kept the old window's lowest count until the new window's end (a seed of 100
    /// channels over 4 processes: a whole window late).
    fn reports_a_later_window(&self, now: Nanos, key: &Triple, member: &str, reset_after: Nanos) -> bool {
        let Some(b) = self.buckets.get(now, key) else { return false };
        if b.provisional || b.untimed {
            return false;
        }
        let Some((_, until)) = self.pending.get(now, key).and_then(|p| live_grant(p, member, now)) else {
            return false;
        };
        let granted = until.saturating_sub(self.lease);
        granted.saturating_add(reset_after) > b.reset_at.saturating_add(REPORT_ROUNDING)
    }

    /// Starts a new window for bucket `key` now, counting the live unanswered grants as
    /// carried.
    fn roll_now(&mut self, now: Nanos, key: &Triple) {
        let carried = self.live_pending(now, key);
        let Some(b) = self.buckets.get_mut(now, key) else { return };
        b.roll(now, carried);
        let expires = b.reset_at.saturating_add(self.state_ttl);
        self.buckets.expire_at(key, expires);
    }

    /// A grant that may have been counted by the server without telling (a 5xx, a dropped
    /// connection): it keeps counting as unanswered until one window (plus margin) after it was
    /// granted, which covers a sliding window too. It is renamed `member "~" grant time`, so a
    /// later grant of the same request cannot replace it.
    fn ghost(&mut self, now: Nanos, member: &str, identity: &str, major: &str, hash: &str) {
        let key: Triple = (identity.to_string(), hash.to_string(), major.to_string());
        let Some(span) = self.buckets.get(now, &key).map(|b| b.window.saturating_add(b.margin)) else {
            return;
        };
        let lease = self.lease;
        let Some(p) = self.pending.get_mut(now, &key) else { return };
        let Some((pos, until)) = live_grant(p, member, now) else { return };
        p.remove(pos);
        let granted = until.saturating_sub(lease);
        let until = granted.saturating_add(span);
        if until > now {
            p.push((format!("{member}~{granted}"), until));
        }
        if let Some(e) = self.pending.map.get_mut(&key) {
            e.expires_at = e.expires_at.max(until);
        }
    }

    /// What bucket `key` learned later (a longer window, a later reset) holds its ghosts too:
    /// each counts until one window plus margin after its grant as the bucket knows them now,
    /// and one granted in the current window at least until that window's reset. (A ghost's
    /// end was fixed when it was made, with the window known then: a first report seen late
    /// in its window underestimates it, and the ghost stopped counting while the server still
    /// counted its request.)
    fn extend_ghosts(&mut self, now: Nanos, key: &Triple) {
        let Some(b) = self.buckets.get(now, key) else { return };
        let (span, start, reset_at) = (b.window.saturating_add(b.margin), b.window_start, b.reset_at);
        let Some(p) = self.pending.get_mut(now, key) else { return };
        let mut latest = 0;
        for (member, until) in p.iter_mut() {
            if *until <= now {
                continue;
            }
            let Some(granted) = member.rsplit_once('~').and_then(|(_, g)| g.parse::<Nanos>().ok()) else {
                continue;
            };
            let mut end = granted.saturating_add(span);
            if granted >= start {
                end = end.max(reset_at);
            }
            if end > *until {
                *until = end;
                latest = latest.max(end);
            }
        }
        if let Some(e) = self.pending.map.get_mut(key) {
            e.expires_at = e.expires_at.max(latest);
        }
    }

    /// Keeps an answered grant of `key`, granted at `granted` (before its window started),
    /// counting as a ghost until `until`, named as [`MemoryStore::ghost`] names one.
    fn carry_ghost(&mut self, now: Nanos, member: &str, key: &Triple, granted: Nanos, until: Nanos) {
        if until <= now {
            return;
        }
        let entry = (format!("{member}~{granted}"), until);
        match self.pending.get_mut(now, key) {
            Some(p) => {
                p.push(entry);
                let e = self.pending.map.get_mut(key).expect("live");
                e.expires_at = e.expires_at.max(until);
            }
            None => self.pending.set(key.clone(), vec![entry], until),
        }
    }

    /// A grant that was never sent: its global entry goes (the newest of `member`'s), and its
    /// bucket slot comes back if its window is still the current one.
    fn give_back(
        &mut self,
        now: Nanos,
        member: &str,
        identity: &str,
        major: &str,
        hash: Option<&str>,
        granted_at: Option<Nanos>,
    ) {
        if let Some(log) = self.global.get_mut(now, &identity.to_string())
            && let Some(pos) = log.iter().rposition(|(_, m)| m == member)
        {
            log.remove(pos);
        }
        if let (Some(h), Some(g)) = (hash, granted_at) {
            let key: Triple = (identity.to_string(), h.to_string(), major.to_string());
            if let Some(b) = self.buckets.get_mut(now, &key)
                && g >= b.window_start
                && now < b.reset_at
            {
                b.remaining = (b.remaining + 1).min(b.limit);
            }
        }
    }

    /// Deletes the pioneer locks `member` holds and, unless `reached`, its unanswered grant.
    /// Returns the grant time of that unanswered grant, if there was one.
    ///
    /// (The bucket slot and the global entry of a grant that was never sent are given back by
    /// [`MemoryStore::give_back`], for `Release` only.)
    #[allow(clippy::too_many_arguments)]
    fn release(
        &mut self,
        now: Nanos,
        member: &str,
        identity: &str,
        route: &str,
        major: &str,
        hash: Option<&str>,
        reached: bool,
        window: Option<Nanos>,
    ) -> Option<Nanos> {
        let route_key: Triple = (identity.to_string(), route.to_string(), major.to_string());
        if self.route_locks.get(now, &route_key).is_some_and(|m| m == member) {
            self.route_locks.remove(&route_key);
        }
        let h = hash?;
        let key: Triple = (identity.to_string(), h.to_string(), major.to_string());
        if self.bucket_locks.get(now, &key).is_some_and(|m| m == member) {
            match window {
                // The pioneer of a known bucket without state may have been counted: its lock
                // stays, as a ghost no grant can match, for up to two windows (the request may
                // still arrive after now), within the lease.
                Some(w) if reached && self.buckets.get(now, &key).is_none() => {
                    let e = self.bucket_locks.map.get_mut(&key).expect("live lock");
                    e.value = format!("{member}~");
                    e.expires_at = e.expires_at.min(now.saturating_add(w.saturating_mul(2)));
                }
                _ => self.bucket_locks.remove(&key),
            }
        }
        if reached {
            return None;
        }
        let lease = self.lease;
        let p = self.pending.get_mut(now, &key)?;
        let (pos, until) = live_grant(p, member, now)?;
        p.remove(pos);
        Some(until.saturating_sub(lease))
    }
}

/// `member`'s live unanswered grant in a bucket's pending list: where it is, and until when it
/// counts (its grant time plus the lease).
fn live_grant(pending: &[(String, Nanos)], member: &str, now: Nanos) -> Option<(usize, Nanos)> {
    pending.iter().position(|(m, until)| m == member && *until > now).map(|pos| (pos, pending[pos].1))
}
