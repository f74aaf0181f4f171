//! Writes that reach the backing device with the request: write-through
//! (a clean copy stays in the cache), passthrough and the sequential
//! cutoff's bypass (none stays), and what keeps a restart from serving an
//! older copy over them.

use super::requests::{Waiting, Waits, WriteMode};
use super::{Engine, Op};
use crate::cache::{flag, BlockState, Through};
use crate::io::{DeviceRole, IoKind, IoStatus, RequestError};

impl Engine {
    /// A write the sequential cutoff sends past the cache: one backing
    /// write, as in passthrough, if that is safe now (cutoff.rs); false,
    /// with nothing started, if it must go through the cache instead.
    pub(super) fn try_bypass_write(&mut self, key: u32) -> bool {
        let (lba, count) = self.request_range(key);
        if !self.bypass_is_safe(lba, count) {
            return false;
        }
        self.request_mut(key).pending += 1;
        let started = self.try_start_backing_write(key, true);
        if !started {
            self.request_mut(key).pending -= 1;
        }
        started
    }

    /// Write-through and passthrough: one backing write for the request (and
    /// for write-through, a clean copy of each block in the cache). False if
    /// a backing write of one of its blocks is in flight: two backing writes
    /// of one block must never race, or the older could land last.
    pub(super) fn try_start_write_through(&mut self, key: u32) -> bool {
        let passthrough = self.write_mode() == WriteMode::Passthrough;
        self.try_start_backing_write(key, passthrough)
    }

    /// `try_start_write_through`; `passthrough` leaves no copy in the cache
    /// (and drops the clean ones).
    fn try_start_backing_write(&mut self, key: u32, passthrough: bool) -> bool {
        let (lba, count) = self.request_range(key);
        let lbas = (lba..lba + count as u64).map(|l| l as u32);
        if lbas.clone().any(|l| self.writeback.lbas_in_flight.contains(l)) {
            return false;
        }
        // A dirty write-back block of one of them (a switch is draining, or
        // was called off) goes to the backing device first: written back
        // after this write, it would overwrite it with older data.
        if let Some(l) = lbas.clone().find(|&l| self.holds_unwritten_data(l)) {
            self.queue_writeback(l, None);
            return false;
        }
        // Ordering: this backing write may become durable before any commit
        // of its own copy's entry. Until then a restart acts on the entries
        // already durable for its blocks: a clean one without the
        // write-through flag is served over the backing device (under a
        // write-back policy), a dirty one is written back over it. So every
        // such entry (a block filled, or written and written back, before a
        // switch away from write-back) is first committed again as a
        // write-through copy, or invalidated, before the write starts.
        // Otherwise a crash brings the older value back: the restart serves
        // it and a later eviction turns the block to this write (torture
        // seeds 15455, 19379, 29801, hhc), or its write-back overwrites this
        // flushed write (seed 17608, hhc).
        let mut untrusted = true;
        for l in lbas.clone() {
            untrusted &= self.distrust_clean_entries(l);
        }
        if !untrusted || self.commit.completed() < self.writeback.through_gate {
            return false;
        }
        // Reads are served from the cache unless the policy is passthrough:
        // a copy that cannot be dropped now would be read over this write.
        let reads_cached = self.write_mode() != WriteMode::Passthrough;
        if passthrough && reads_cached && !lbas.clone().all(|l| self.cache.lookup(l).is_none_or(|b| self.cache.may_drop_clean(b))) {
            return false;
        }
        self.writeback.lbas_in_flight.insert_through(lbas.clone());
        for l in lbas.clone() {
            self.misses_raced(l);
        }
        let bs = self.config.block_size as u64;
        let buffer = self.request_buffer(key, 0);
        let op = Op::WriteBacking { request: key, lba, blocks_count: count };
        self.submit(op, DeviceRole::Backing, IoKind::Write, lba * bs, count as u64 * bs, buffer);
        if passthrough {
            for l in lbas {
                let copy = self.cache.lookup(l);
                let dropped = self.cache.invalidate_clean(l);
                assert!(dropped || !reads_cached, "a cut-off write left LBA {l}'s cached copy behind");
                if let Some(b) = copy.filter(|&b| reads_cached && self.cache.state(b) == BlockState::Evicting) {
                    // Committed: the next commit invalidates its entry.
                    self.commit.mark_block(b);
                }
            }
            return true;
        }
        self.request_mut(key).pending += count;
        for i in 0..count {
            if !self.try_start_block_write(key, i, None, 0, false) {
                self.waiting.push_back(Waiting { request: key, what: Waits::ThroughCopy { block_in_request: i } });
            }
        }
        true
    }

    /// Marks `lba`'s current block a write-through copy, so that no later
    /// commit writes an entry a restart trusts; a committed one is written
    /// again before write-through writes go on (`through_gate`). False while
    /// an older block of `lba` keeps a valid entry without that flag: a
    /// restart would find it once the current one is gone.
    fn distrust_clean_entries(&mut self, lba: u32) -> bool {
        if let Some(block) = self.cache.lookup(lba) {
            if self.cache.through(block) == Through::None {
                self.cache.set_through(block, Through::Copy);
                self.commit.mark_block(block);
                if self.cache.has(block, flag::COMMITTED | flag::COMMIT_PENDING) {
                    self.writeback.through_gate = self.commit.request();
                }
            }
        }
        let stale = self.cache.superseded_of(lba).find(|&b| {
            self.cache.has(b, flag::COMMITTED | flag::COMMIT_PENDING) && self.cache.through(b) == Through::None
        });
        match stale {
            Some(block) => {
                self.commit.mark_block(block);
                self.commit.request();
                false
            }
            None => true,
        }
    }

    /// Whether `lba`'s current block is dirty data the backing device still
    /// lacks (not a write-through copy, whose backing write is its own).
    fn holds_unwritten_data(&self, lba: u32) -> bool {
        self.cache.lookup(lba).is_some_and(|b| self.cache.has(b, flag::DIRTY) && self.cache.through(b) == Through::None)
    }

    /// A write-through copy turns clean once both its cache and its backing
    /// writes have completed.
    pub(super) fn through_copy_settled(&mut self, block: u32) {
        let lba = self.cache.lba(block);
        let idle = self.cache.state(block) == BlockState::Mapped
            && !self.cache.has(block, flag::BUSY)
            && !self.writeback.lbas_in_flight.contains(lba);
        if !idle {
            return;
        }
        match self.cache.through(block) {
            Through::None | Through::Copy => {}
            Through::Pending if !self.config.policy.uses_cache() => {
                // Switched to passthrough meanwhile: no copy may stay.
                self.cache.discard(block);
                self.commit.mark_block(block);
            }
            Through::Pending => {
                // Clean, but the backing write may not be durable yet: a
                // restart must not trust this copy over the backing device.
                self.cache.set_through(block, Through::Copy);
                self.cache.mark_clean(block);
                self.commit.mark_block(block);
            }
            // The write failed: its data must not reach the backing device later.
            Through::Failed => {
                self.cache.discard(block);
                self.commit.mark_block(block);
            }
        }
    }

    pub(super) fn write_backing_done(&mut self, key: u32, lba: u64, blocks_count: u32, status: IoStatus) {
        self.writeback.backing.note_through_write(self.config.backing_has_flush);
        self.writeback.lbas_in_flight.remove_through((lba..lba + blocks_count as u64).map(|l| l as u32));
        for l in lba..lba + blocks_count as u64 {
            if let Some(block) = self.cache.lookup(l as u32) {
                if status != IoStatus::Ok && self.cache.through(block) == Through::Pending {
                    self.cache.set_through(block, Through::Failed);
                }
                self.through_copy_settled(block);
            }
        }
        let error = (status != IoStatus::Ok).then_some(RequestError::Io);
        self.sub_done(key, 1, error);
    }
}
