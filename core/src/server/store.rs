//! The keyed store shared by the three algorithms.

use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;

use super::slots::{MAX_KEYS, Slots};
use crate::error::Error;
use crate::types::Nanos;

/// An algorithm whose per-key state a [`Store`] keeps: [`Gcra`](super::Gcra),
/// [`LeakyBucket`](super::LeakyBucket), [`FixedWindow`](super::FixedWindow), or any of the
/// three picked at run time, [`Limit`](super::Limit).
pub trait Algorithm: private::Sealed {
    /// The state of one key. `Default` is the empty state, the state of a key never seen.
    type State: Default + Clone + fmt::Debug;

    /// Whether `state` is back to empty at `now`: from `now` on it decides exactly like
    /// `Self::State::default()`, so a store may drop it without anyone noticing.
    fn is_idle(&self, state: &Self::State, now: Nanos) -> bool;
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::super::Gcra {}
    impl Sealed for super::super::LeakyBucket {}
    impl Sealed for super::super::FixedWindow {}
    impl Sealed for super::super::Limit {}
}

/// Per-key state of one [`Algorithm`], in bounded memory and without a sweeper thread.
///
/// Use it through its aliases [`GcraStore`](super::GcraStore),
/// [`LeakyBucketStore`](super::LeakyBucketStore) and
/// [`FixedWindowStore`](super::FixedWindowStore); their checks are documented there.
///
/// # Expiry
///
/// A key is dropped as soon as its state is empty again ([`Algorithm::is_idle`]): at once when
/// a check leaves it empty, when a check finds it empty, and by an amortised cleanup in which
/// every check inspects two more entries (so each entry is revisited at least every `len / 2`
/// checks). Dropping an empty state never changes a later answer.
///
/// # When `max_keys` is reached
///
/// A new key first looks for room: up to 64 more entries are inspected and the empty ones
/// dropped. If none is empty, the new key is still answered, from an empty state, but **not
/// stored** (it is "untracked": its next check starts from empty again), and
/// [`untracked`](Self::untracked) grows so that it can be reported. Keys already stored keep
/// their exact limits, memory never grows past `max_keys` entries, and a flood of new keys
/// cannot lock out everyone else. Pick `max_keys` well above the number of keys active within
/// one window; a growing `untracked` count means it is too small or the server is under a
/// key-spraying attack (which per-key limits cannot stop anyway: add a global limit).
///
/// Memory: each stored key costs `size_of::<K>() + size_of::<A::State>() + 8` bytes in a
/// dense vector (rounded up to alignment: 40 bytes for a `String` key and a GCRA state),
/// 8 bytes plus one control byte in the hash index (both up to twice that after growth), plus
/// the key's own heap allocation.
#[derive(Debug, Clone)]
pub struct Store<A: Algorithm, K = String> {
    pub(crate) algorithm: A,
    pub(crate) slots: Slots<K, A::State>,
}

impl<A: Algorithm, K: Hash + Eq> Store<A, K> {
    /// An empty store for `algorithm` that keeps at most `max_keys` keys.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `max_keys` is 0 or above `u32::MAX - 1`.
    pub fn new(algorithm: A, max_keys: usize) -> Result<Self, Error> {
        super::require((1..=MAX_KEYS).contains(&max_keys), || {
            format!("max_keys must be between 1 and {MAX_KEYS}, got {max_keys}")
        })?;
        Ok(Store { algorithm, slots: Slots::new(max_keys) })
    }

    /// The algorithm and its configuration.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// Keys currently stored (expired ones may linger until the cleanup reaches them).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when no key is stored.
    pub fn is_empty(&self) -> bool {
        self.slots.len() == 0
    }

    /// The bound given to [`new`](Self::new).
    pub fn max_keys(&self) -> usize {
        self.slots.max_keys()
    }

    /// How many times a new key was answered without being stored because the store was full
    /// of live keys.
    pub fn untracked(&self) -> u64 {
        self.slots.untracked()
    }

    /// The stored state of `key`, if any (`None` means empty).
    pub fn state<Q>(&self, key: &Q) -> Option<&A::State>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.slots.get(key)
    }

    /// Runs `f` with the algorithm and the state of `key` at `now`; the store's only way in.
    pub(crate) fn update<Q, R>(
        &mut self,
        key: &Q,
        now: Nanos,
        f: impl FnOnce(&A, &mut A::State) -> R,
    ) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let algorithm = &self.algorithm;
        self.slots.update(key, |state| algorithm.is_idle(state, now), |state| f(algorithm, state))
    }
}
