//! `wb-ordered` (Koller et al., FAST'13): write-back in flush-epoch order, so
//! the backing device always holds the state at some flush plus part of the
//! epoch after it — a barrier-consistent prefix.
//!
//! A write belongs to the epoch in which it was submitted; every flush starts
//! a new epoch. Only blocks of the oldest epoch with dirty data are written
//! back, and an epoch's blocks turn clean only after the backing FLUSH that
//! makes them durable, so no block of epoch e+1 reaches the backing device
//! before all of epoch e is durable there. A dirty block overwritten in a
//! later epoch keeps its data (it stays pinned) until its own epoch is
//! written back; overwritten within its epoch it is simply replaced.
//!
//! Epochs live in memory only: after a warm restart the dirty blocks found
//! form one epoch.

use super::requests::Waits;
use super::Engine;
use crate::cache::{flag, BlockState, Through};
use crate::config::Policy;
use std::collections::VecDeque;

#[derive(Default)]
pub(super) struct Ordered {
    pub epoch_now: u32,
    /// Epoch of each block's data (allocated when the policy is in use).
    epoch_of: Vec<u32>,
    /// Dirty blocks per epoch, mapped and retained.
    dirty_per_epoch: EpochCounts,
    /// Superseded blocks kept for their epoch's write-back.
    pub retained: Vec<u32>,
}

/// A count per epoch from the oldest one with a count to the newest:
/// epochs are consecutive, so a ring of counts replaces a map, and it keeps
/// its capacity (no allocation once it has spanned its widest range).
#[derive(Default)]
struct EpochCounts {
    /// Epoch of `counts[0]`; the first and last counts are never zero.
    first: u32,
    counts: VecDeque<u32>,
}

impl EpochCounts {
    fn oldest(&self) -> Option<u32> {
        (!self.counts.is_empty()).then_some(self.first)
    }

    fn add(&mut self, epoch: u32, delta: i64) {
        if self.counts.is_empty() {
            self.first = epoch;
        }
        // Serial arithmetic: epochs wrap.
        while (epoch.wrapping_sub(self.first) as i32) < 0 {
            self.counts.push_front(0);
            self.first = self.first.wrapping_sub(1);
        }
        let index = epoch.wrapping_sub(self.first) as usize;
        if index >= self.counts.len() {
            self.counts.resize(index + 1, 0);
        }
        let count = &mut self.counts[index];
        *count = u32::try_from(*count as i64 + delta).expect("epoch count out of range");
        while self.counts.front() == Some(&0) {
            self.counts.pop_front();
            self.first = self.first.wrapping_add(1);
        }
        while self.counts.back() == Some(&0) {
            self.counts.pop_back();
        }
    }

    fn clear(&mut self) {
        self.counts.clear();
    }

    fn memory_bytes(&self) -> usize {
        self.counts.capacity() * 4
    }
}

impl Ordered {
    pub fn oldest_epoch(&self) -> Option<u32> {
        self.dirty_per_epoch.oldest()
    }

    fn count(&mut self, epoch: u32, delta: i64) {
        self.dirty_per_epoch.add(epoch, delta);
    }

    pub fn memory_bytes(&self) -> usize {
        self.epoch_of.capacity() * 4 + self.retained.capacity() * 4 + self.dirty_per_epoch.memory_bytes()
    }
}

impl Engine {
    fn ordered_active(&self) -> bool {
        self.config.policy == Policy::WriteBackOrdered && self.policy_target.is_none()
    }

    /// Entering wb-ordered: every dirty block, and every write-back block
    /// write still waiting for a free block, joins the current epoch. A
    /// write-through copy in flight is not counted: it turns clean when its
    /// own backing write completes, never through write-back.
    pub(super) fn ordered_start(&mut self) {
        let blocks = self.cache.blocks_count();
        let now = self.ordered.epoch_now;
        self.ordered.epoch_of = vec![now; blocks as usize];
        self.ordered.dirty_per_epoch.clear();
        self.ordered.retained.clear();
        let mut dirty = (0..blocks)
            .filter(|&b| self.cache.state(b) == BlockState::Mapped && self.cache.has(b, flag::DIRTY))
            .filter(|&b| self.cache.through(b) == Through::None)
            .count() as u32;
        for waiting in self.waiting.iter_mut() {
            if let Waits::BackWrite { epoch, .. } = &mut waiting.what {
                *epoch = now;
                dirty += 1;
            }
        }
        if dirty > 0 {
            self.ordered.count(now, dirty as i64);
        }
    }

    /// Leaving wb-ordered: retained blocks are no longer needed.
    pub(super) fn ordered_stop(&mut self) {
        for block in std::mem::take(&mut self.ordered.retained) {
            self.cache.unpin(block);
        }
        self.ordered = Ordered { epoch_now: self.ordered.epoch_now, ..Ordered::default() };
    }

    /// A flush: later writes belong to a new epoch.
    pub(super) fn ordered_flush(&mut self) {
        if self.ordered_active() {
            self.ordered.epoch_now += 1;
        }
    }

    /// A block write is submitted: it counts in the current epoch from now
    /// on, even while it waits for a free block, so that its epoch is not
    /// taken for written back before it is. Returns that epoch.
    pub(super) fn ordered_reserve(&mut self) -> u32 {
        let now = self.ordered.epoch_now;
        if self.ordered_active() {
            self.ordered.count(now, 1);
        }
        now
    }

    /// `block` now holds a dirty write of `epoch` for its LBA; `previous` was
    /// the LBA's block before, dirty or not (`previous_dirty`).
    pub(super) fn ordered_written(&mut self, block: u32, previous: Option<u32>, previous_dirty: bool, epoch: u32) {
        if !self.ordered_active() {
            return;
        }
        self.ordered.epoch_of[block as usize] = epoch;
        let Some(previous) = previous.filter(|_| previous_dirty) else { return };
        let previous_epoch = self.ordered.epoch_of[previous as usize];
        if previous_epoch == epoch {
            self.ordered.count(epoch, -1);
        } else {
            self.cache.pin(previous);
            self.ordered.retained.push(previous);
        }
    }

    /// The write into `block` failed and `previous` is current again.
    pub(super) fn ordered_write_failed(&mut self, block: u32, previous: Option<u32>) {
        if !self.ordered_active() {
            return;
        }
        let now = self.ordered.epoch_of[block as usize];
        self.ordered.count(now, -1);
        let Some(previous) = previous.filter(|&p| self.cache.state(p) == BlockState::Mapped) else { return };
        if !self.cache.has(previous, flag::DIRTY) {
            return;
        }
        if let Some(position) = self.ordered.retained.iter().position(|&b| b == previous) {
            self.ordered.retained.swap_remove(position);
            self.cache.unpin(previous);
        } else {
            self.ordered.count(self.ordered.epoch_of[previous as usize], 1);
        }
    }

    /// Whether `block` may be written back now (always, outside wb-ordered).
    pub(super) fn ordered_may_write_back(&self, block: u32) -> bool {
        !self.ordered_active() || self.ordered.oldest_epoch() == Some(self.ordered.epoch_of[block as usize])
    }

    /// `block`'s epoch bookkeeping, in words (diagnostics).
    pub(super) fn ordered_describe(&self, block: u32) -> String {
        if !self.ordered_active() {
            return String::new();
        }
        let retained = if self.ordered.retained.contains(&block) { " retained" } else { "" };
        format!(" epoch {} (oldest {:?}){retained}", self.ordered.epoch_of[block as usize], self.ordered.oldest_epoch())
    }

    /// A retained block of the oldest epoch waiting for write-back (not one
    /// whose own data write is still in flight: it would be read too early).
    ///
    /// Nor one whose LBA has a backing write in flight (`lbas_in_flight`, as
    /// for every write-back): that write may be of an older block of the
    /// LBA, started while it was current, and two backing writes of one LBA
    /// may land in either order. The older one landing last took the backing
    /// device back past a flushed write once the LBA was clean (seed 9270).
    pub(super) fn ordered_next_retained(&self) -> Option<u32> {
        let oldest = self.ordered.oldest_epoch()?;
        self.ordered.retained.iter().copied().find(|&b| {
            self.ordered.epoch_of[b as usize] == oldest
                && self.cache.pins(b) == 1
                && !self.cache.has(b, flag::BUSY)
                && !self.writeback.lbas_in_flight.contains(self.cache.lba(b))
        })
    }

    /// `block`'s data is durable on the backing device.
    pub(super) fn ordered_written_back(&mut self, block: u32, cleaned: bool) {
        if !self.ordered_active() {
            return;
        }
        let epoch = self.ordered.epoch_of[block as usize];
        if let Some(position) = self.ordered.retained.iter().position(|&b| b == block) {
            self.ordered.retained.swap_remove(position);
            self.cache.unpin(block);
            self.ordered.count(epoch, -1);
        } else if cleaned {
            self.ordered.count(epoch, -1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EpochCounts;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Same oldest epoch as a map of non-zero counts, across a wrap.
        #[test]
        fn epoch_counts_behave_like_a_map(start in any::<u32>(), ops in proptest::collection::vec((0u32..12, any::<bool>()), 1..200)) {
            let mut counts = EpochCounts::default();
            let mut model: BTreeMap<u32, u32> = BTreeMap::new();
            for (offset, up) in ops {
                if !up && !model.contains_key(&offset) {
                    continue;
                }
                counts.add(start.wrapping_add(offset), if up { 1 } else { -1 });
                let count = model.entry(offset).or_insert(0);
                *count = if up { *count + 1 } else { *count - 1 };
                if *count == 0 {
                    model.remove(&offset);
                }
                prop_assert_eq!(counts.oldest(), model.keys().next().map(|&k| start.wrapping_add(k)));
            }
        }
    }
}
