//! A FIFO of distinct LBAs, each with a small value, sized at creation: the
//! LBAs flushes and policy switches want written back (with the flush pass
//! waiting for each, writeback_queue.rs) and those reclamation wants written
//! back. An LBA already queued is not queued again. An entry whose LBA
//! holds no dirty data any more only waits to be popped and dropped, so its
//! owner drops such entries when the queue is full (`retain`): what is left
//! are distinct LBAs with dirty blocks, at most one per cache block, which
//! is the capacity.

use super::lba_hash::LbaTable;
use crate::queue::Rewind;
use std::collections::VecDeque;

pub(super) struct LbaQueue<V> {
    order: VecDeque<u32>,
    values: LbaTable<V>,
    capacity: usize,
}

impl<V: Copy> LbaQueue<V> {
    pub fn with_capacity(capacity: usize) -> Self {
        LbaQueue {
            order: VecDeque::with_capacity(capacity),
            values: LbaTable::with_capacity_and_hasher(capacity, Default::default()),
            capacity,
        }
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.order.len() >= self.capacity
    }

    pub fn get_mut(&mut self, lba: u32) -> Option<&mut V> {
        self.values.get_mut(&lba)
    }

    /// Queues `lba` at the back; false, and nothing changes, if it is
    /// queued already.
    pub fn push_back(&mut self, lba: u32, value: V) -> bool {
        if self.values.contains_key(&lba) {
            return false;
        }
        assert!(self.order.len() < self.capacity, "lba {lba} queued with all {} entries taken", self.capacity);
        self.values.insert(lba, value);
        self.order.push_back(lba);
        debug_assert_eq!(self.order.len(), self.values.len(), "the queue and its values disagree");
        true
    }

    pub fn pop_front(&mut self) -> Option<(u32, V)> {
        let lba = self.order.pop_front_rewound()?;
        let value = self.values.remove(&lba).unwrap_or_else(|| panic!("lba {lba} queued without its value"));
        Some((lba, value))
    }

    /// Keeps the entries `keep` accepts, in their order; hands the others'
    /// values to `dropped`.
    pub fn retain(&mut self, mut keep: impl FnMut(u32) -> bool, mut dropped: impl FnMut(V)) {
        let values = &mut self.values;
        self.order.retain(|&lba| {
            let kept = keep(lba);
            if !kept {
                dropped(values.remove(&lba).unwrap_or_else(|| panic!("lba {lba} queued without its value")));
            }
            kept
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lba_once_in_arrival_order_with_its_value() {
        let mut queue = LbaQueue::with_capacity(4);
        assert!(queue.push_back(7, 'a'));
        assert!(queue.push_back(3, 'b'));
        assert!(!queue.push_back(7, 'c'), "7 is queued already");
        *queue.get_mut(3).unwrap() = 'd';
        assert!(queue.push_back(9, 'e'));
        assert_eq!(queue.pop_front(), Some((7, 'a')));
        assert!(queue.push_back(7, 'f'), "popped, 7 may be queued again");
        let order: Vec<_> = std::iter::from_fn(|| queue.pop_front()).collect();
        assert_eq!(order, [(3, 'd'), (9, 'e'), (7, 'f')]);
        assert!(queue.is_empty());
    }

    #[test]
    fn retain_drops_in_place_and_makes_room() {
        let mut queue = LbaQueue::with_capacity(3);
        for lba in [1, 2, 3] {
            queue.push_back(lba, lba * 10);
        }
        assert!(queue.is_full());
        let mut dropped = Vec::new();
        queue.retain(|lba| lba != 2, |value| dropped.push(value));
        assert_eq!(dropped, [20]);
        assert!(!queue.is_full() && queue.push_back(2, 21));
        let order: Vec<_> = std::iter::from_fn(|| queue.pop_front()).collect();
        assert_eq!(order, [(1, 10), (3, 30), (2, 21)]);
    }

    #[test]
    #[should_panic(expected = "all 2 entries taken")]
    fn a_push_past_the_capacity_is_a_bug() {
        let mut queue = LbaQueue::with_capacity(2);
        for lba in 0..3 {
            queue.push_back(lba, ());
        }
    }
}
