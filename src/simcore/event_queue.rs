//! The simulators' clock: a min-heap of events ordered by (time, insertion
//! sequence). The sequence number makes simultaneous events pop in the order
//! they were scheduled, which keeps runs deterministic.

use crate::io::Nanos;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    next_seq: u64,
}

struct Entry<E> {
    at: Nanos,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue { heap: BinaryHeap::new(), next_seq: 0 }
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn schedule(&mut self, at: Nanos, event: E) {
        self.heap.push(Reverse(Entry { at, seq: self.next_seq, event }));
        self.next_seq += 1;
    }

    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.heap.pop().map(|Reverse(entry)| (entry.at, entry.event))
    }

    /// The next event and its time, left in the queue.
    pub fn peek(&self) -> Option<(Nanos, &E)> {
        self.heap.peek().map(|Reverse(entry)| (entry.at, &entry.event))
    }

    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse(entry)| entry.at)
    }

    /// Keeps only the events `keep` accepts; the order of those left is
    /// unchanged.
    pub fn retain(&mut self, mut keep: impl FnMut(&E) -> bool) {
        self.heap.retain(|Reverse(entry)| keep(&entry.event));
    }

    /// Every event queued, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &E> {
        self.heap.iter().map(|Reverse(entry)| &entry.event)
    }

    pub fn clear(&mut self) {
        self.heap.clear();
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_time_then_by_insertion_order() {
        let mut queue = EventQueue::new();
        queue.schedule(30, "late");
        queue.schedule(10, "first");
        queue.schedule(10, "second");
        queue.schedule(20, "middle");
        let order: Vec<_> = std::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(order, vec![(10, "first"), (10, "second"), (20, "middle"), (30, "late")]);
    }

    #[test]
    fn retain_keeps_the_order_of_what_is_left() {
        let mut queue = EventQueue::new();
        for (at, event) in [(20, 1), (10, 2), (10, 3), (20, 4), (5, 5)] {
            queue.schedule(at, event);
        }
        queue.retain(|event| event % 2 == 1);
        let order: Vec<_> = std::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(order, vec![(5, 5), (10, 3), (20, 1)]);
    }
}
