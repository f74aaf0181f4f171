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

use super::Engine;
use crate::cache::{flag, BlockState, Through};
use crate::config::Policy;
use std::collections::BTreeMap;

#[derive(Default)]
pub(super) struct Ordered {
    pub epoch_now: u32,
    /// Epoch of each block's data (allocated when the policy is in use).
    epoch_of: Vec<u32>,
    /// Dirty blocks per epoch, mapped and retained.
    dirty_per_epoch: BTreeMap<u32, u32>,
    /// Superseded blocks kept for their epoch's write-back.
    pub retained: Vec<u32>,
}

impl Ordered {
    pub fn oldest_epoch(&self) -> Option<u32> {
        self.dirty_per_epoch.keys().next().copied()
    }

    fn count(&mut self, epoch: u32, delta: i64) {
        let count = self.dirty_per_epoch.entry(epoch).or_insert(0);
        *count = (*count as i64 + delta) as u32;
        if *count == 0 {
            self.dirty_per_epoch.remove(&epoch);
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.epoch_of.capacity() * 4 + self.retained.capacity() * 4
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
        for waiting in self.waiting.iter_mut().filter(|w| w.write && w.back) {
            waiting.epoch = now;
            dirty += 1;
        }
        if dirty > 0 {
            self.ordered.dirty_per_epoch.insert(now, dirty);
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
                && !self.writeback.lbas_in_flight.contains(&self.cache.lba(b))
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
