//! A bounded map from keys to states that can be swept a few entries at a time.
//!
//! `std`'s `HashMap` has no cursor, so an incremental sweep cannot resume where it stopped.
//! Here the entries live in a dense `Vec` (the sweep walks it with a cursor, removal is a
//! `swap_remove`) and a `HashMap<u32, u32>` maps each key's 32-bit hash (SipHash with a random
//! key, as `std` uses, so hostile keys cannot force collisions, folded to 32 bits) to the
//! first entry with that hash. Entries whose hashes collide are chained through `Entry::next`
//! and told apart by comparing keys. Each key is stored once; the hash is kept in the entry
//! (where it fills padding) so that removing an entry never hashes a key again.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};

/// "No entry" in `Entry::next`.
const NONE: u32 = u32::MAX;
/// Entries the amortised cleanup inspects on every update. Two, not one: an update adds at
/// most one entry, so with `k` inspections per update a full pass over `len` entries takes
/// `len / k` updates, during which at most `len / k` entries are added; expired entries then
/// never make up more than about `1 / (k − 1)` of the map. With `k = 1` that bound is gone.
const SWEEP_PER_UPDATE: usize = 2;
/// Entries inspected, at most, to make room for a new key when the map is full.
const SWEEP_WHEN_FULL: usize = 64;
/// The largest `max_keys` (entry indices are `u32`, and `NONE` is reserved).
pub(crate) const MAX_KEYS: usize = (u32::MAX - 1) as usize;

/// Hashes the index's keys, which are already SipHash values: a multiplication spreads them
/// over all 64 bits (the table picks buckets with the low bits and tags with the high ones).
#[derive(Debug, Default, Clone, Copy)]
struct Spread(u64);

impl Spread {
    fn mix(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl Hasher for Spread {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&b| self.mix(u64::from(b)));
    }
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }
}

#[derive(Debug, Clone)]
struct Entry<K, S> {
    key: K,
    state: S,
    /// The key's 32-bit hash, the index's key.
    hash: u32,
    /// The next entry whose key has the same hash, or `NONE`.
    next: u32,
}

/// Keys to states, at most `max_keys` of them. States for which `is_idle` holds are dropped.
#[derive(Debug, Clone)]
pub(crate) struct Slots<K, S> {
    index: HashMap<u32, u32, BuildHasherDefault<Spread>>,
    entries: Vec<Entry<K, S>>,
    hasher: RandomState,
    /// Where the amortised cleanup resumes.
    cursor: usize,
    max_keys: usize,
    untracked: u64,
}

impl<K: Hash + Eq, S: Default> Slots<K, S> {
    /// An empty map for at most `max_keys` keys (`1..=MAX_KEYS`, checked by the caller).
    pub(crate) fn new(max_keys: usize) -> Self {
        Slots {
            index: HashMap::default(),
            entries: Vec::new(),
            hasher: RandomState::new(),
            cursor: 0,
            max_keys,
            untracked: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn max_keys(&self) -> usize {
        self.max_keys
    }

    pub(crate) fn untracked(&self) -> u64 {
        self.untracked
    }

    /// The state of `key`, if it is stored.
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<&S>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let at = self.find(self.hash(key), key)?;
        Some(&self.entries[at].state)
    }

    /// Runs `f` on the state of `key` (a default state when the key is absent) and stores the
    /// result unless `is_idle` holds for it. Inspects [`SWEEP_PER_UPDATE`] other entries first.
    ///
    /// A new key that finds the map full gets room from an idle entry if a bounded scan finds
    /// one; otherwise `f` still runs on a default state, which is not stored, and the
    /// `untracked` counter grows.
    pub(crate) fn update<Q, R>(
        &mut self,
        key: &Q,
        is_idle: impl Fn(&S) -> bool,
        f: impl FnOnce(&mut S) -> R,
    ) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.sweep(SWEEP_PER_UPDATE, &is_idle);
        let hash = self.hash(key);
        if let Some(at) = self.find(hash, key) {
            let result = f(&mut self.entries[at].state);
            if is_idle(&self.entries[at].state) {
                self.remove(at);
            }
            return result;
        }
        let mut state = S::default();
        let result = f(&mut state);
        if !is_idle(&state) {
            if self.entries.len() >= self.max_keys {
                self.sweep(SWEEP_WHEN_FULL, &is_idle);
            }
            if self.entries.len() < self.max_keys {
                self.insert(hash, key.to_owned(), state);
            } else {
                self.untracked += 1;
            }
        }
        result
    }

    /// Inspects up to `budget` entries from the cursor and removes the idle ones.
    fn sweep(&mut self, budget: usize, is_idle: &impl Fn(&S) -> bool) {
        for _ in 0..budget {
            if self.entries.is_empty() {
                return;
            }
            if self.cursor >= self.entries.len() {
                self.cursor = 0;
            }
            if is_idle(&self.entries[self.cursor].state) {
                // The last entry moves into the cursor's place; it is inspected next.
                self.remove(self.cursor);
            } else {
                self.cursor += 1;
            }
        }
    }

    fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u32 {
        let hash = self.hasher.hash_one(key);
        (hash ^ (hash >> 32)) as u32
    }

    fn find<Q>(&self, hash: u32, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let mut at = *self.index.get(&hash)?;
        loop {
            let entry = &self.entries[at as usize];
            if entry.key.borrow() == key {
                return Some(at as usize);
            }
            if entry.next == NONE {
                return None;
            }
            at = entry.next;
        }
    }

    fn insert(&mut self, hash: u32, key: K, state: S) {
        let at = u32::try_from(self.entries.len()).expect("len < max_keys <= MAX_KEYS");
        let next = self.index.insert(hash, at).unwrap_or(NONE);
        self.entries.push(Entry { key, state, hash, next });
    }

    fn remove(&mut self, at: usize) {
        let Entry { hash, next, .. } = self.entries[at];
        self.repoint(hash, at as u32, next);
        let last = self.entries.len() - 1;
        self.entries.swap_remove(at);
        if at != last {
            self.repoint(self.entries[at].hash, last as u32, at as u32);
        }
        // Give memory back once most entries are gone (amortised: the next shrink needs the
        // map to halve again).
        if self.entries.capacity() > 64 && self.entries.len() * 4 <= self.entries.capacity() {
            self.entries.shrink_to(self.entries.len() * 2);
            self.index.shrink_to(self.entries.len() * 2);
        }
    }

    /// Makes the link that points at entry `from` (in the chain of `hash`) point at `to`.
    fn repoint(&mut self, hash: u32, from: u32, to: u32) {
        let head = self.index.get_mut(&hash).expect("every entry is indexed");
        if *head == from {
            if to == NONE {
                self.index.remove(&hash);
            } else {
                *head = to;
            }
            return;
        }
        let mut at = *head as usize;
        while self.entries[at].next != from {
            at = self.entries[at].next as usize;
        }
        self.entries[at].next = to;
    }

    /// Checks the index against the entries (tests only).
    #[cfg(test)]
    fn assert_consistent(&self) {
        let mut reached = 0;
        for (&hash, &head) in &self.index {
            let mut at = head;
            while at != NONE {
                let entry = &self.entries[at as usize];
                assert_eq!((self.hash(&entry.key), entry.hash), (hash, hash));
                reached += 1;
                at = entry.next;
            }
        }
        assert_eq!(reached, self.entries.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key whose hash is chosen by the test, to force 64-bit collisions.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Colliding(u8, u32);

    impl Hash for Colliding {
        fn hash<H: Hasher>(&self, state: &mut H) {
            self.0.hash(state);
        }
    }

    /// Adds `delta` to the counter of `key`; counters at 0 are idle.
    fn add<K: Hash + Eq + Clone>(slots: &mut Slots<K, u32>, key: &K, delta: i64) -> u32 {
        slots.update(
            key,
            |&n| n == 0,
            |n| {
                *n = (i64::from(*n) + delta).max(0) as u32;
                *n
            },
        )
    }

    #[test]
    fn colliding_keys_are_kept_apart_and_removed_cleanly() {
        let mut slots = Slots::new(100);
        let keys: Vec<_> = (0..20).map(|i| Colliding(i % 3, u32::from(i))).collect();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(add(&mut slots, k, i as i64 + 1), i as u32 + 1);
            slots.assert_consistent();
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(slots.get(k), Some(&(i as u32 + 1)));
        }
        // Empty every other key: each is removed at once, and the others keep their values.
        for (i, k) in keys.iter().enumerate().step_by(2) {
            assert_eq!(add(&mut slots, k, -(i as i64) - 1), 0);
            slots.assert_consistent();
        }
        assert_eq!(slots.len(), 10);
        for (i, k) in keys.iter().enumerate() {
            let expected = (i % 2 == 1).then_some(i as u32 + 1);
            assert_eq!(slots.get(k).copied(), expected);
        }
    }

    #[test]
    fn sweep_removes_idle_entries_a_few_at_a_time() {
        let mut slots: Slots<String, u32> = Slots::new(1000);
        for i in 0..100 {
            add(&mut slots, &format!("k{i}"), 1);
        }
        assert_eq!(slots.len(), 100);
        // Everything is idle from now on; each update inspects two entries.
        let mut updates = 0;
        while slots.len() > 1 {
            slots.update("other", |_| true, |_| ());
            updates += 1;
            slots.assert_consistent();
        }
        assert!(updates <= 60, "took {updates} updates");
    }

    #[test]
    fn full_map_evicts_idle_entries_then_stops_tracking() {
        let mut slots: Slots<String, u32> = Slots::new(3);
        for k in ["a", "b", "c"] {
            add(&mut slots, &k.to_string(), 1);
        }
        // Live keys only: a new key is answered but not stored.
        assert_eq!(add(&mut slots, &"d".to_string(), 5), 5);
        assert_eq!((slots.len(), slots.untracked()), (3, 1));
        assert_eq!(slots.get("d"), None);
        // Once the others are idle (here: every value but 7), the new key finds room.
        assert_eq!(
            slots.update(
                "e",
                |&n| n != 7,
                |n| {
                    *n = 7;
                    *n
                }
            ),
            7
        );
        assert_eq!(slots.get("e"), Some(&7));
        assert_eq!(slots.untracked(), 1);
        slots.assert_consistent();
    }
}
