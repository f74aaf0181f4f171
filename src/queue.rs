//! FIFO queues sized for their worst case that stay in the CPU cache.
//!
//! A `VecDeque` allocated for every entry it may ever hold (the engine's
//! queue of device commands is sized for ~28 K, 1.3 MiB) but nearly empty in
//! steady state walks its whole buffer as its head advances: every few
//! entries a cache line that was last touched a buffer's length ago.
//! Rewinding to the start of the buffer whenever the queue drains keeps it
//! on the same few lines. (Order is unchanged: the simulators' output is
//! byte-identical with and without it.)

use std::collections::VecDeque;

pub trait Rewind<T> {
    /// `pop_front`, then back to the start of the buffer if that emptied it.
    fn pop_front_rewound(&mut self) -> Option<T>;
}

impl<T> Rewind<T> for VecDeque<T> {
    #[inline]
    fn pop_front_rewound(&mut self) -> Option<T> {
        let item = self.pop_front();
        if self.is_empty() {
            // On an empty deque `clear` only resets the head to 0.
            self.clear();
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_kept_and_head_back_at_the_start_once_empty() {
        let mut queue = VecDeque::with_capacity(8);
        queue.push_back(0u32);
        let start = queue.as_slices().0.as_ptr();
        assert_eq!(queue.pop_front_rewound(), Some(0));
        for round in 1..100u32 {
            queue.push_back(round);
            queue.push_back(round + 1000);
            assert_eq!(queue.as_slices().0.as_ptr(), start, "round {round} starts at the buffer's first slot");
            assert_eq!(queue.pop_front_rewound(), Some(round));
            assert_eq!(queue.pop_front_rewound(), Some(round + 1000));
            assert_eq!(queue.pop_front_rewound(), None);
        }
    }
}
