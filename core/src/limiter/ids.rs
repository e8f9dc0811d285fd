//! A queue's lists of request ids (`Queue::pending`, `Queue::in_flight`): one id held in the
//! list itself, more in a deque on the heap.
//!
//! Most buckets see one request at a time: with a `VecDeque` each kept a buffer from its first
//! request on (96 bytes of every idle bucket with the allocator's headers), and each request
//! read and wrote that buffer (a cache miss among thousands of buckets). Written here rather
//! than taken from a crate: the small-vector crates hold a `Vec`, whose removal at the front
//! is linear, and a queue of 100,000 drains from its front.

use std::collections::VecDeque;

use crate::types::RequestId;

/// A list of request ids, in order.
#[derive(Debug, Clone, Default)]
pub(super) enum Ids {
    #[default]
    Empty,
    One(RequestId),
    /// Two or more when made; back to `Empty` when emptied. Boxed so that the list is 16
    /// bytes, not 40: the deque's header is paid only by the lists that need it.
    #[allow(clippy::box_collection)]
    Many(Box<VecDeque<RequestId>>),
}

impl Ids {
    pub(super) fn len(&self) -> usize {
        match self {
            Ids::Empty => 0,
            Ids::One(_) => 1,
            Ids::Many(ids) => ids.len(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids in order.
    pub(super) fn iter(&self) -> std::iter::Chain<std::slice::Iter<'_, RequestId>, std::slice::Iter<'_, RequestId>> {
        let (a, b): (&[RequestId], &[RequestId]) = match self {
            Ids::Empty => (&[], &[]),
            Ids::One(id) => (std::slice::from_ref(id), &[]),
            Ids::Many(ids) => ids.as_slices(),
        };
        a.iter().chain(b)
    }

    /// Frees an emptied deque.
    fn tidy(&mut self) {
        if matches!(self, Ids::Many(ids) if ids.is_empty()) {
            *self = Ids::Empty;
        }
    }

    pub(super) fn push_back(&mut self, id: RequestId) {
        match self {
            Ids::Empty => *self = Ids::One(id),
            Ids::One(first) => *self = Ids::Many(Box::new(VecDeque::from([*first, id]))),
            Ids::Many(ids) => ids.push_back(id),
        }
    }

    /// Inserts `id` at `index` (at most `len()`).
    pub(super) fn insert(&mut self, index: usize, id: RequestId) {
        match self {
            Ids::Empty => *self = Ids::One(id),
            Ids::One(first) => {
                let mut ids = VecDeque::from([*first]);
                ids.insert(index, id);
                *self = Ids::Many(Box::new(ids));
            }
            Ids::Many(ids) => ids.insert(index, id),
        }
    }

    /// Removes the id at `index`, keeping the order.
    pub(super) fn remove(&mut self, index: usize) -> Option<RequestId> {
        let removed = match self {
            Ids::Empty => None,
            Ids::One(id) => (index == 0).then_some(*id),
            Ids::Many(ids) => ids.remove(index),
        };
        match self {
            Ids::One(_) if removed.is_some() => *self = Ids::Empty,
            _ => self.tidy(),
        }
        removed
    }

    /// Removes the id at `index`, replacing it with the last one (`Vec::swap_remove`).
    pub(super) fn swap_remove(&mut self, index: usize) -> Option<RequestId> {
        let removed = match self {
            Ids::Many(ids) => ids.swap_remove_back(index),
            _ => return self.remove(index),
        };
        self.tidy();
        removed
    }

    /// The position of the first id for which `before` is false, in a list partitioned by it.
    pub(super) fn partition_point(&self, before: impl Fn(&RequestId) -> bool) -> usize {
        match self {
            Ids::Many(ids) => ids.partition_point(before),
            _ => self.iter().take_while(|id| before(id)).count(),
        }
    }

    /// Takes every id out, in order.
    pub(super) fn take_all(&mut self) -> Vec<RequestId> {
        match std::mem::take(self) {
            Ids::Empty => Vec::new(),
            Ids::One(id) => vec![id],
            Ids::Many(ids) => Vec::from(*ids),
        }
    }
}

impl From<Vec<RequestId>> for Ids {
    fn from(ids: Vec<RequestId>) -> Self {
        match ids.as_slice() {
            [] => Ids::Empty,
            [id] => Ids::One(*id),
            _ => Ids::Many(Box::new(ids.into())),
        }
    }
}

impl Extend<RequestId> for Ids {
    fn extend<I: IntoIterator<Item = RequestId>>(&mut self, ids: I) {
        for id in ids {
            self.push_back(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::Ids;

    #[derive(Debug, Clone)]
    enum Op {
        Push(u64),
        Insert(usize, u64),
        Remove(usize),
        SwapRemove(usize),
        TakeAll,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<u64>().prop_map(Op::Push),
            1 => (0..6usize, any::<u64>()).prop_map(|(i, id)| Op::Insert(i, id)),
            3 => (0..6usize).prop_map(Op::Remove),
            2 => (0..6usize).prop_map(Op::SwapRemove),
            1 => Just(Op::TakeAll),
        ]
    }

    proptest! {
        /// Every operation does what it does on a `VecDeque`, and an emptied list holds no
        /// buffer.
        #[test]
        fn ids_behave_as_a_deque(ops in prop::collection::vec(op(), 0..40)) {
            let (mut ids, mut model) = (Ids::default(), VecDeque::<u64>::new());
            for op in ops {
                match op {
                    Op::Push(id) => {
                        ids.push_back(id);
                        model.push_back(id);
                    }
                    Op::Insert(i, id) => {
                        let i = i.min(model.len());
                        ids.insert(i, id);
                        model.insert(i, id);
                    }
                    Op::Remove(i) => prop_assert_eq!(ids.remove(i), model.remove(i)),
                    Op::SwapRemove(i) => prop_assert_eq!(ids.swap_remove(i), model.swap_remove_back(i)),
                    Op::TakeAll => prop_assert_eq!(ids.take_all(), model.drain(..).collect::<Vec<_>>()),
                }
                prop_assert_eq!(ids.len(), model.len());
                prop_assert!(ids.iter().eq(model.iter()));
                prop_assert!(ids.iter().rev().eq(model.iter().rev()));
                // (A list the limiter searches is in id order.)
                let mut sorted: Vec<u64> = model.iter().copied().collect();
                sorted.sort_unstable();
                let cut = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
                let in_order = Ids::from(sorted.clone());
                prop_assert_eq!(in_order.partition_point(|&id| id < cut), sorted.partition_point(|&id| id < cut));
                prop_assert!(!matches!(&ids, Ids::Many(d) if d.is_empty()));
                prop_assert!(Ids::from(model.iter().copied().collect::<Vec<_>>()).iter().eq(ids.clone().iter()));
            }
        }
    }
}
