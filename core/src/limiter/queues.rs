//! The queues requests wait in, one per queue key ([`QueueKey`]): a slab of them, made on a
//! key's first request and forgotten once idle past their windows; where each queue's head
//! sits (ready to go, or blocked on its identity's global budget).

use std::cmp::Reverse;
use std::collections::VecDeque;
use std::hash::BuildHasher;

use crate::types::{Nanos, RequestId};

use super::{Qid, ReadyKey, Req, Uid};
use super::bucket::Bucket;
use super::costs::Budget;
use super::ids::Ids;
use super::routes::QueueKey;

#[derive(Debug)]
pub(super) struct Queue {
    pub(super) key: QueueKey,
    /// Tells this queue from the earlier and later ones in its slot (see [`Uid`]).
    pub(super) uid: Uid,
    pub(super) pending: Ids,
    /// The requests that took a slot of its bucket: sent, or reserving at the store (what
    /// they took: `Limiter::taken`).
    pub(super) in_flight: Ids,
    pub(super) bucket: Bucket,
    /// What holds the queue apart from its bucket (a shared-scope 429, sub-limits), and one
    /// budget per cost dimension its requests named (see `costs`).
    pub(super) rare: Rare,
    /// The registered wake-up, when `waking` (`wake_at()`: an `Option` would take 16 bytes,
    /// and the flag sits beside `idle_listed` for nothing).
    wake: Nanos,
    waking: bool,
    /// Where the queue's head sits: in `ready`, or in its identity's `blocked`.
    pub(super) slot: Slot,
    /// Last send or answer, for idle eviction.
    pub(super) last_active: Nanos,
    /// Whether the queue is listed as idle (`Queues::list_idle`).
    pub(super) idle_listed: bool,
    /// The latest wait for which the pending requests were checked against their deadlines.
    pub(super) checked_wait: Nanos,
}

/// The queues' slab, in chunks of [`CHUNK`]: growing it never moves the queues (a `Vec` of a
/// million would copy half a gigabyte when it doubles) nor leaves up to half its room unused.
#[derive(Debug, Default)]
struct Slab {
    chunks: Vec<Box<[Option<Queue>]>>,
    len: usize,
}

/// Queues per chunk of the slab (about 28 KiB).
const CHUNK: usize = 64;

impl Slab {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Adds `queue` at index `len()`.
    pub(super) fn push(&mut self, queue: Option<Queue>) {
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push((0..CHUNK).map(|_| None).collect());
        }
        self.chunks[self.len / CHUNK][self.len % CHUNK] = queue;
        self.len += 1;
    }

    pub(super) fn get(&self, qid: Qid) -> Option<&Option<Queue>> {
        let i = qid as usize;
        (i < self.len).then(|| &self.chunks[i / CHUNK][i % CHUNK])
    }

    pub(super) fn get_mut(&mut self, qid: Qid) -> Option<&mut Option<Queue>> {
        let i = qid as usize;
        (i < self.len).then(|| &mut self.chunks[i / CHUNK][i % CHUNK])
    }

    /// The key of live queue `qid`.
    fn key(&self, qid: Qid) -> &QueueKey {
        &self.get(qid).and_then(Option::as_ref).expect("an indexed queue is live").key
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Option<Queue>> {
        self.chunks.iter().flat_map(|c| c.iter()).take(self.len)
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Option<Queue>> {
        self.chunks.iter_mut().flat_map(|c| c.iter_mut()).take(self.len)
    }
}

/// An idle listing (see [`Queues::next_idle`]).
pub(super) enum Listed {
    Live(Qid),
    Stale,
}

/// Every queue: the slab with its free slots, the index by key, and the queues that went idle,
/// in the order they did (checked a few at a time for eviction, see `evict_idle`).
#[derive(Debug, Default)]
pub(super) struct Queues {
    slab: Slab,
    /// The queues by key: each entry is a queue id, found by its key's hash and compared with
    /// the key its queue holds, so that a key (and its major parameter's text) is held once.
    index: hashbrown::HashTable<Qid>,
    hasher: foldhash::fast::FixedState,
    /// The free slots, each with the generation its next queue takes.
    free: Vec<(Qid, Uid)>,
    idle: VecDeque<(Qid, Uid)>,
}

impl Queues {
    /// Queues alive.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// The live queue of `key`.
    pub(super) fn find<Q>(&self, key: &Q) -> Option<Qid>
    where
        Q: std::hash::Hash + hashbrown::Equivalent<QueueKey> + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        self.index.find(hash, |&qid| key.equivalent(self.slab.key(qid))).copied()
    }

    /// Files `qid` in the index under the key its queue holds.
    fn file(&mut self, qid: Qid) {
        let (slab, hasher) = (&self.slab, &self.hasher);
        let key_hash = |&q: &Qid| hasher.hash_one(slab.key(q));
        self.index.insert_unique(key_hash(&qid), qid, key_hash);
    }

    /// Takes `qid` out of the index, where it is filed under `key`.
    fn unfile(&mut self, qid: Qid, key: &QueueKey) {
        if let Ok(entry) = self.index.find_entry(self.hasher.hash_one(key), |&q| q == qid) {
            entry.remove();
        }
    }

    /// Adds the queue `make` builds from its uid (its key no live queue has).
    pub(super) fn insert(&mut self, make: impl FnOnce(Uid) -> Queue) -> Qid {
        // A new slot's first queue is its generation 0. Each queue holds hundreds of bytes:
        // 2^32 of them would not fit in memory.
        let (qid, uid) = self.free.pop().unwrap_or_else(|| (Qid::try_from(self.slab.len()).expect("fewer than 2^32 queues"), 0));
        let queue = make(uid);
        debug_assert!(self.find(&queue.key).is_none(), "a second queue for one key");
        if qid as usize == self.slab.len() {
            self.slab.push(Some(queue));
        } else {
            self.slab[qid] = Some(queue);
        }
        self.file(qid);
        qid
    }

    /// Files queue `qid` under `key` instead of its own key, which it returns.
    pub(super) fn rekey(&mut self, qid: Qid, key: QueueKey) -> QueueKey {
        let q = self.slab[qid].as_mut().expect("live queue");
        let old = std::mem::replace(&mut q.key, key);
        self.unfile(qid, &old);
        self.file(qid);
        old
    }

    /// Forgets queue `qid`; its slot is reused.
    pub(super) fn remove(&mut self, qid: Qid) -> Queue {
        let q = self.slab[qid].take().expect("live queue");
        self.unfile(qid, &q.key);
        self.free.push((qid, q.uid.wrapping_add(1)));
        q
    }

    /// Lists queue `qid` (with its uid) as gone idle now.
    pub(super) fn list_idle(&mut self, qid: Qid, uid: Uid) {
        self.idle.push_back((qid, uid));
    }

    /// The first idle listing, without taking it: the queue it names, or [`Listed::Stale`] when
    /// that slot has been freed or reused since.
    pub(super) fn next_idle(&self) -> Option<Listed> {
        let &(qid, uid) = self.idle.front()?;
        Some(match self.get(qid) {
            Some(Some(q)) if q.uid == uid => Listed::Live(qid),
            _ => Listed::Stale,
        })
    }

    /// Drops the first idle listing.
    pub(super) fn drop_idle(&mut self) {
        self.idle.pop_front();
    }

    pub(super) fn get(&self, qid: Qid) -> Option<&Option<Queue>> {
        self.slab.get(qid)
    }

    pub(super) fn get_mut(&mut self, qid: Qid) -> Option<&mut Option<Queue>> {
        self.slab.get_mut(qid)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Option<Queue>> {
        self.slab.iter()
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Option<Queue>> {
        self.slab.iter_mut()
    }
}

impl std::ops::Index<Qid> for Slab {
    type Output = Option<Queue>;

    fn index(&self, qid: Qid) -> &Option<Queue> {
        self.get(qid).expect("queue index within the slab")
    }
}

impl std::ops::IndexMut<Qid> for Slab {
    fn index_mut(&mut self, qid: Qid) -> &mut Option<Queue> {
        self.get_mut(qid).expect("queue index within the slab")
    }
}

impl std::ops::Index<Qid> for Queues {
    type Output = Option<Queue>;

    fn index(&self, qid: Qid) -> &Option<Queue> {
        &self.slab[qid]
    }
}

impl std::ops::IndexMut<Qid> for Queues {
    fn index_mut(&mut self, qid: Qid) -> &mut Option<Queue> {
        &mut self.slab[qid]
    }
}

/// Where a queue's head sits: in `ready` or in its identity's `blocked` set, under the key
/// `(Reverse(priority), head, the queue's id)`. The queue's id is not repeated here (16 bytes,
/// not 24, in every queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    None,
    Ready { priority: i32, head: RequestId },
    Blocked { priority: i32, head: RequestId },
}

impl Slot {
    /// The slot of the head that `key` orders in `ready`.
    pub(super) fn ready((Reverse(priority), head, _): ReadyKey) -> Self {
        Slot::Ready { priority, head }
    }

    /// The slot of the head that `key` orders in its identity's `blocked` set.
    pub(super) fn blocked((Reverse(priority), head, _): ReadyKey) -> Self {
        Slot::Blocked { priority, head }
    }
}

/// What few queues need, boxed on first use: what holds the queue apart from its bucket's
/// window (a shared-scope 429, sub-limits) and its cost budgets. Every idle queue would pay 32
/// bytes for the holds and 24 for the budgets; one pointer for both, as few queues meet a hold
/// and fewer carry costs.
#[derive(Debug, Default)]
pub(super) struct Rare(Option<Box<RareInner>>);

#[derive(Debug, Default)]
struct RareInner {
    /// A shared-scope 429 holds the whole resource until then.
    shared_until: Nanos,
    /// Sub-limit holds until a time: a route key (holds the whole route) or a request's
    /// `sub_key` (holds that class of the route).
    sub_limits: Vec<(String, Nanos)>,
    /// Routes one of whose requests (of no sub-limit class) met a hidden sub-limit, until that
    /// request's own wait ends: a second refusal of the route meanwhile holds the whole route
    /// (see `Limiter::on_rate_limited`).
    suspects: Vec<(String, Nanos)>,
    /// One budget per cost dimension its requests named (see `costs`).
    budgets: Vec<Budget>,
}

impl Rare {
    /// Until when a shared-scope 429 holds the whole queue (0: never held).
    pub(super) fn shared_until(&self) -> Nanos {
        self.0.as_ref().map_or(0, |h| h.shared_until)
    }

    /// The sub-limit holds, each until a time.
    pub(super) fn sub_limits(&self) -> &[(String, Nanos)] {
        self.0.as_ref().map_or(&[], |h| h.sub_limits.as_slice())
    }

    /// Forgets the sub-limit holds (and suspicions) over by `now`.
    pub(super) fn expire(&mut self, now: Nanos) {
        if let Some(h) = &mut self.0 {
            h.sub_limits.retain(|(_, t)| *t > now);
            h.suspects.retain(|(_, t)| *t > now);
        }
    }

    /// Whether a request of route `key` met a hidden sub-limit whose wait runs past `now`.
    pub(super) fn suspected(&self, key: &str, now: Nanos) -> bool {
        self.0.as_ref().is_some_and(|h| h.suspects.iter().any(|(k, t)| k == key && *t > now))
    }

    /// A request of route `key` met a hidden sub-limit and waits until `until`.
    pub(super) fn suspect(&mut self, key: String, until: Nanos) {
        let suspects = &mut self.0.get_or_insert_default().suspects;
        match suspects.iter_mut().find(|(k, _)| *k == key) {
            Some((_, t)) => *t = (*t).max(until),
            None => suspects.push((key, until)),
        }
    }

    /// The cost budgets.
    pub(super) fn budgets(&self) -> &[Budget] {
        self.0.as_ref().map_or(&[], |h| h.budgets.as_slice())
    }

    pub(super) fn budgets_mut(&mut self) -> &mut [Budget] {
        self.0.as_mut().map_or(&mut [], |h| h.budgets.as_mut_slice())
    }

    /// The list of budgets, the box made if there is none yet.
    pub(super) fn budget_list(&mut self) -> &mut Vec<Budget> {
        &mut self.0.get_or_insert_default().budgets
    }
}

impl Queue {
    /// A queue of `key` in the slot generation `uid`, with nothing queued or in flight.
    pub(super) fn new(key: QueueKey, uid: Uid, bucket: Bucket, rare: Rare) -> Self {
        Queue {
            key,
            uid,
            pending: Ids::Empty,
            in_flight: Ids::Empty,
            bucket,
            rare,
            wake: 0,
            waking: false,
            slot: Slot::None,
            last_active: 0,
            idle_listed: false,
            checked_wait: 0,
        }
    }

    /// The registered wake-up, if any.
    pub(super) fn wake_at(&self) -> Option<Nanos> {
        self.waking.then_some(self.wake)
    }

    pub(super) fn set_wake_at(&mut self, at: Option<Nanos>) {
        (self.wake, self.waking) = (at.unwrap_or(0), at.is_some());
    }

    /// Until when a sub-limit holds `r` (see [`Req::held_by`]).
    pub(super) fn sub_limit_until(&self, r: &Req) -> Option<Nanos> {
        self.rare.sub_limits().iter().filter(|(k, _)| r.held_by(k)).map(|&(_, t)| t).max()
    }

    /// Holds the whole queue (a shared resource) until `until`, or longer if it already is.
    pub(super) fn hold_shared(&mut self, until: Nanos) {
        let h = self.rare.0.get_or_insert_default();
        h.shared_until = h.shared_until.max(until);
    }

    /// Holds sub-limit key `key` (a route or a class of it) until `until`, or longer if it
    /// already is.
    pub(super) fn hold_sub_limit(&mut self, key: String, until: Nanos) {
        let holds = &mut self.rare.0.get_or_insert_default().sub_limits;
        match holds.iter_mut().find(|(k, _)| *k == key) {
            Some((_, t)) => *t = (*t).max(until),
            None => holds.push((key, until)),
        }
    }
}
