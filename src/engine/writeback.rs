//! Background write-back: keeps dirty blocks under the threshold (harder when
//! idle or when the log runs out of room, gentler under load), serves flushes
//! and policy switches that need everything written back, and turns blocks
//! clean — with a revoke in the log — only once the backing write is durable
//! (DESIGN.md §2, invariant 4).

use super::flush::BackingFlusher;
use super::{Engine, Op};
use crate::cache::{flag, BlockState, LOC_NONE};
use crate::config::{Mutation, Policy};
use crate::io::{DeviceRole, IoBuffer, IoKind, IoStatus};
use std::collections::{HashSet, VecDeque};

pub(super) struct Writeback {
    /// LBAs that must be written back (flushes, policy switches), with the
    /// tag of the flush waiting for them.
    pub queue: VecDeque<(u32, Option<u32>)>,
    staging_free: Vec<u32>,
    staging_tag: Vec<Option<u32>>,
    /// Write-backs whose backing write completed, waiting for a backing FLUSH
    /// generation: (block, ticket, tag).
    awaiting_flush: VecDeque<(u32, u64, Option<u32>)>,
    /// Blocks written back whose revoke could not be recorded yet.
    pub revoke_wait: VecDeque<u32>,
    hand: u32,
    /// LBAs with a write-back in flight: two backing writes of one LBA must
    /// never race (the older could land last).
    pub lbas_in_flight: HashSet<u32>,
    pub backing: BackingFlusher,
    pub flush_tag_counter: u32,
}

impl Writeback {
    pub fn new(parallelism: u32) -> Self {
        Writeback {
            queue: VecDeque::with_capacity(1024),
            staging_free: (0..parallelism).rev().collect(),
            staging_tag: vec![None; parallelism as usize],
            awaiting_flush: VecDeque::with_capacity(parallelism as usize * 4),
            revoke_wait: VecDeque::with_capacity(64),
            hand: 0,
            lbas_in_flight: HashSet::with_capacity(parallelism as usize * 2),
            backing: BackingFlusher::default(),
            flush_tag_counter: 0,
        }
    }

    pub fn in_flight(&self) -> u32 {
        (self.staging_tag.len() - self.staging_free.len()) as u32
    }
}

impl Engine {
    /// Queues every dirty block for write-back; returns how many.
    pub(super) fn enqueue_all_dirty(&mut self, tag: Option<u32>) -> u32 {
        let mut count = 0;
        for block in 0..self.cache.blocks_count() {
            if self.cache.state(block) == BlockState::Mapped && self.cache.has(block, flag::DIRTY) {
                self.writeback.queue.push_back((self.cache.lba(block), tag));
                count += 1;
            }
        }
        count
    }

    fn writeback_parallelism_wanted(&self) -> u32 {
        let full = self.config.writeback_parallelism;
        if !self.writeback.queue.is_empty() || self.policy_target.is_some() {
            return full;
        }
        if !self.config.policy.is_write_back() || self.cache.dirty_count() == 0 {
            return 0;
        }
        let threshold = self.cache.blocks_count() as u64 * self.config.dirty_threshold_percent as u64 / 100;
        let over = self.cache.dirty_count() as u64 > threshold;
        let log_tight = self.log_active() && self.log_space_low();
        match (self.is_idle(), over || log_tight) {
            (true, _) => full,
            (false, true) => (full / 2).max(1),
            (false, false) => 0,
        }
    }

    pub(super) fn schedule_writeback(&mut self) {
        self.issue_backing_flush();
        let wanted = self.writeback_parallelism_wanted();
        // Bounded: queued items whose block is busy go back to the queue.
        let mut attempts = self.writeback.queue.len() + wanted as usize;
        while attempts > 0 && self.writeback.in_flight() < wanted && !self.writeback.staging_free.is_empty() {
            attempts -= 1;
            let next = match self.writeback.queue.pop_front() {
                Some(item) => Some(item),
                None => self.next_background_candidate().map(|lba| (lba, None)),
            };
            let Some((lba, tag)) = next else { break };
            self.start_writeback(lba, tag);
        }
        self.issue_backing_flush();
    }

    /// Next dirty idle block in CLOCK order (bounded scan).
    fn next_background_candidate(&mut self) -> Option<u32> {
        let n = self.cache.blocks_count();
        for _ in 0..n.min(4096) {
            let block = self.writeback.hand;
            self.writeback.hand = (block + 1) % n;
            let idle = !self.cache.has(block, flag::BUSY)
                && self.cache.pins(block) == 0
                && !self.writeback.lbas_in_flight.contains(&self.cache.lba(block));
            if self.cache.state(block) == BlockState::Mapped && self.cache.has(block, flag::DIRTY) && idle {
                return Some(self.cache.lba(block));
            }
        }
        None
    }

    /// Starts writing back `lba`'s current block, or puts it back in the
    /// queue if the block is busy.
    fn start_writeback(&mut self, lba: u32, tag: Option<u32>) {
        let Some(block) = self.cache.lookup(lba).filter(|&b| self.cache.has(b, flag::DIRTY)) else {
            // Already clean (or gone): nothing older than its current value is dirty.
            if let Some(tag) = tag {
                self.flush_writeback_done(tag, true);
            }
            return;
        };
        if self.cache.has(block, flag::BUSY) || self.cache.pins(block) > 0 || self.writeback.lbas_in_flight.contains(&lba) {
            // Being written or already being written back: try again later.
            self.writeback.queue.push_back((lba, tag));
            return;
        }
        let staging = self.writeback.staging_free.pop().expect("no staging slot");
        self.writeback.staging_tag[staging as usize] = tag;
        self.writeback.lbas_in_flight.insert(lba);
        self.cache.pin(block);
        let bs = self.config.block_size as u64;
        let offset = self.cache_layout.block_offset(block as u64);
        let buffer = IoBuffer::Engine { region: self.regions.staging, offset_bytes: staging * bs as u32 };
        self.submit(Op::WritebackRead { block, staging }, DeviceRole::Cache, IoKind::Read, offset, bs, buffer);
    }

    fn release_staging(&mut self, staging: u32) -> Option<u32> {
        self.writeback.staging_free.push(staging);
        self.writeback.staging_tag[staging as usize].take()
    }

    /// A write-back attempt failed: the block stays dirty; a waiting flush
    /// learns of the error.
    fn writeback_failed(&mut self, block: u32, staging: u32) {
        self.stats.writeback_errors += 1;
        self.writeback.lbas_in_flight.remove(&self.cache.lba(block));
        self.cache.unpin(block);
        if let Some(tag) = self.release_staging(staging) {
            self.flush_writeback_done(tag, false);
        }
    }

    pub(super) fn writeback_read_done(&mut self, block: u32, staging: u32, status: IoStatus) {
        match status {
            IoStatus::Ok => {
                let bs = self.config.block_size as u64;
                let lba = self.cache.lba(block) as u64;
                let buffer = IoBuffer::Engine { region: self.regions.staging, offset_bytes: staging * bs as u32 };
                let op = Op::WritebackWrite { block, staging };
                self.submit(op, DeviceRole::Backing, IoKind::Write, lba * bs, bs, buffer);
            }
            IoStatus::Error => self.writeback_failed(block, staging),
            IoStatus::DeviceLost => self.fail("cache device lost".into()),
        }
    }

    pub(super) fn writeback_write_done(&mut self, block: u32, staging: u32, status: IoStatus) {
        if status != IoStatus::Ok {
            self.writeback_failed(block, staging);
            return;
        }
        let tag = self.release_staging(staging);
        self.stats.writebacks += 1;
        if self.mutation() == Mutation::RevokeBeforeBackingFlush {
            self.finish_writeback(block, tag);
            return;
        }
        let ticket = self.writeback.backing.request(self.config.backing_has_flush);
        self.writeback.awaiting_flush.push_back((block, ticket, tag));
        if !self.config.backing_has_flush {
            self.finish_durable_writebacks();
        }
    }

    /// Write-backs whose backing FLUSH generation completed become clean.
    pub(super) fn finish_durable_writebacks(&mut self) {
        while let Some(&(block, ticket, tag)) = self.writeback.awaiting_flush.front() {
            if self.writeback.backing.completed < ticket {
                break;
            }
            self.writeback.awaiting_flush.pop_front();
            if self.writeback.backing.failed >= ticket {
                self.stats.writeback_errors += 1;
                self.writeback.lbas_in_flight.remove(&self.cache.lba(block));
                self.cache.unpin(block);
                if let Some(tag) = tag {
                    self.flush_writeback_done(tag, false);
                }
                continue;
            }
            self.finish_writeback(block, tag);
        }
    }

    /// The backing device durably holds `block`'s data.
    fn finish_writeback(&mut self, block: u32, tag: Option<u32>) {
        let current = self.cache.state(block) == BlockState::Mapped && self.cache.has(block, flag::DIRTY);
        self.writeback.lbas_in_flight.remove(&self.cache.lba(block));
        self.cache.unpin(block);
        if current && !self.clean_block(block) {
            self.writeback.revoke_wait.push_back(block);
        }
        if let Some(tag) = tag {
            self.flush_writeback_done(tag, true);
        }
    }

    /// Marks a written-back block clean, revoking its log entries first.
    /// False if the revoke cannot be recorded now (no log buffer).
    fn clean_block(&mut self, block: u32) -> bool {
        if self.log_active() && self.cache.log_loc(block) != LOC_NONE && !self.revoke(block) {
            return false;
        }
        self.cache.mark_clean(block);
        self.commit.mark_block(block);
        true
    }

    pub(super) fn apply_pending_revokes(&mut self) {
        while let Some(&(lba, loc)) = self.startup_revokes.last() {
            if !self.log_active() {
                break;
            }
            let Some(buffer) = self.open_buffer_with_revoke_room() else { return };
            let region = self.log.buffers[buffer].region;
            self.log.kill(loc, None);
            self.log.record_revoke(self.regions.all[region as usize].as_mut_slice(), lba);
            self.stats.revokes += 1;
            self.startup_revokes.pop();
        }
        while let Some(&block) = self.writeback.revoke_wait.front() {
            let current = self.cache.state(block) == BlockState::Mapped && self.cache.has(block, flag::DIRTY);
            if current && !self.cache.has(block, flag::BUSY) && !self.clean_block(block) {
                return;
            }
            self.writeback.revoke_wait.pop_front();
        }
    }

    // ---- policy switches ----

    pub(super) fn begin_policy_switch(&mut self, policy: Policy) {
        let from = self.config.policy;
        if from == policy {
            self.policy_target = None;
            return;
        }
        if from.uses_log() || policy.uses_log() {
            self.restart_log_for_switch(policy);
        }
        if from.is_write_back() && !policy.is_write_back() || policy == Policy::Passthrough {
            self.policy_target = Some(policy);
            self.enqueue_all_dirty(None);
        } else {
            self.config.policy = policy;
            self.policy_target = None;
        }
    }

    /// A switch to wt or passthrough completes once nothing is dirty.
    pub(super) fn progress_policy_switch(&mut self) {
        let Some(target) = self.policy_target else { return };
        if self.cache.dirty_count() > 0 {
            if self.writeback.queue.is_empty() && self.writeback.in_flight() == 0 {
                self.enqueue_all_dirty(None);
            }
            return;
        }
        if target == Policy::Passthrough {
            // Passthrough never updates the cache: drop every clean copy.
            let lbas: Vec<u32> = (0..self.cache.blocks_count())
                .filter(|&b| self.cache.state(b) == BlockState::Mapped)
                .map(|b| self.cache.lba(b))
                .collect();
            let all_dropped = lbas.into_iter().fold(true, |ok, lba| self.cache.invalidate_clean(lba) && ok);
            self.commit.mark_all();
            self.commit.request();
            if !all_dropped {
                return;
            }
        }
        self.config.policy = target;
        self.policy_target = None;
    }
}
