//! The log superblock: which segment the head is in, written to every
//! writable mirror (rarely: when space is short, periodically, when idle),
//! in two alternating copies so that a torn write leaves the other.

use super::flush::LogStage;
use super::{Engine, Op};
use crate::format::{LogSuperblock, UNIT_BYTES};
use crate::io::{DeviceRole, IoBuffer, IoKind, IoStatus};
use crate::hdd_log::{MirrorHealth, OpenFor};

impl Engine {
    pub(super) fn maybe_write_superblock(&mut self) {
        if self.config.mirrors_count == 0 || self.log_work.superblock_ops_pending > 0 {
            return;
        }
        let behind = self.log.head_sequence > self.log.durable_head_sequence;
        let periodic = self.now.saturating_sub(self.log_work.last_superblock_at) >= self.config.superblock_interval_ns;
        let syncing = self.log.mirrors.iter().any(|m| matches!(m, MirrorHealth::Syncing { .. }));
        // The in-sync set changed: a mirror left it (sealing waits for this
        // superblock, `superblock_claims_lost_mirror`) or joined it.
        let mask_changed = self.log_work.superblock_mask_issued != self.log.in_sync_mask()
            && self.log.writable_mirrors().next().is_some();
        if mask_changed || behind && (self.short_of_passed_segments() || periodic || self.is_idle() || syncing) {
            self.write_superblock(self.log.head_sequence, false);
        }
    }

    /// Whether the log is short of space and a superblock would free
    /// enough of what the head has passed. Each one costs a mirror two
    /// positionings (to the superblock and back to the tail), about a
    /// segment's transfer on an HDD; written whenever the head moved, one
    /// went every two to four segments and took a quarter of the log HDD's
    /// time (fileserver, a log the cache's size, in the simulator). So one
    /// waits until the head has passed as many segments as the buffers may
    /// be writing at once, but no more than lie between the low mark and
    /// the re-logging reserve (waiting for more, it came only once the log
    /// was down to that reserve: 2-3 % fewer IOPS at a log twice the
    /// cache), or until the log is down to the revoke reserve, where
    /// reclamation can move nothing more until space comes back.
    fn short_of_passed_segments(&self) -> bool {
        let passed = self.log.head_sequence - self.log.durable_head_sequence;
        let band = self.log_low_free_segments().saturating_sub(OpenFor::Relog.min_free());
        let enough = passed >= (self.config.log_buffers_count as u64).min(band).max(1);
        self.log_space_low() && (enough || self.log.segments_free() < OpenFor::Relog.min_free())
    }

    /// Writes the superblock (recording `head`) to every writable mirror;
    /// `both_copies` for a fresh or restarted log.
    pub(super) fn write_superblock(&mut self, head: u64, both_copies: bool) {
        if self.log_work.superblock_ops_pending > 0 && !both_copies {
            return;
        }
        let copies: u64 = if both_copies { 2 } else { 1 };
        for _ in 0..copies {
            self.log.superblock_write_seq += 1;
            let write_seq = self.log.superblock_write_seq;
            for mirror in 0..self.log.mirrors_count() {
                if !self.log.mirror_writable(mirror) {
                    continue;
                }
                let (offset, buffer) = self.encode_superblock(mirror, write_seq, head);
                self.log_work.superblock_ops_pending += 1;
                let op = Op::SuperblockWrite { mirror };
                self.submit(op, DeviceRole::Log(mirror), IoKind::Write, offset, UNIT_BYTES as u64, buffer);
            }
        }
        self.stats.superblock_writes += 1;
        self.log_work.superblock_head = head;
        self.log_work.last_superblock_at = self.now;
    }

    /// Encodes mirror `mirror`'s superblock for `write_seq`; returns the
    /// device offset of the copy it goes to and the buffer holding it.
    pub(super) fn encode_superblock(&mut self, mirror: u8, write_seq: u64, head: u64) -> (u64, IoBuffer) {
        let copy = write_seq % 2;
        let superblock = LogSuperblock {
            instance_id: self.config.instance_id,
            write_seq,
            block_size: self.config.block_size,
            segment_bytes: self.config.segment_bytes,
            segments_count: self.log_layout.segments_count,
            head_segment: self.log.segment_index(head),
            head_sequence: head,
            mirrors_count: self.config.mirrors_count,
            mirror_index: mirror,
            backing_blocks: self.config.backing_blocks(),
            in_sync_mask: self.log.in_sync_mask(),
            run: self.log.run,
            // A running instance's log is its own, never one replayed.
            replayed: false,
            previous_instance: self.log.previous_instance,
        };
        self.log_work.superblock_mask_issued = superblock.in_sync_mask;
        self.log_work.superblock_mask_in_flight |= superblock.in_sync_mask;
        let unit = mirror as usize * 2 + copy as usize;
        let region = self.regions.superblock;
        superblock.encode(&mut self.region(region)[unit * UNIT_BYTES..(unit + 1) * UNIT_BYTES]);
        (copy * UNIT_BYTES as u64, IoBuffer::Engine { region, offset_bytes: (unit * UNIT_BYTES) as u32 })
    }

    /// Every superblock write issued has completed: the newest encoded one
    /// is what the mirrors hold.
    pub(super) fn superblock_masks_settled(&mut self) {
        self.log_work.superblock_mask_durable = self.log_work.superblock_mask_issued;
        self.log_work.superblock_mask_in_flight = 0;
    }

    pub(super) fn superblock_write_done(&mut self, mirror: u8, status: IoStatus) {
        if status == IoStatus::Ok {
            self.submit(Op::SuperblockFlush { mirror }, DeviceRole::Log(mirror), IoKind::Flush, 0, 0, IoBuffer::None);
            return;
        }
        self.superblock_flush_done(mirror, status);
    }

    pub(super) fn superblock_flush_done(&mut self, mirror: u8, status: IoStatus) {
        if status != IoStatus::Ok {
            self.mirror_failed(mirror);
        }
        assert!(self.log_work.superblock_ops_pending > 0, "superblock write done with none pending");
        self.log_work.superblock_ops_pending -= 1;
        if self.log_work.superblock_ops_pending > 0 {
            return;
        }
        let head = self.log_work.superblock_head;
        self.superblock_masks_settled();
        self.log.superblock_durable(head);
        self.log_work.superblock_durable_head = head;
        self.promote_synced_mirrors();
    }

    /// Advances a new log's sync (`LogWork::new_log_sync`); a mirror it
    /// held back may count now. Where nothing is logged (another policy,
    /// or one being switched to) no flush counts on the log, and the
    /// mirror counts by the superblock alone.
    pub(super) fn progress_new_log_sync(&mut self) {
        let stage = self.log_work.new_log_sync;
        if stage == LogStage::None {
            return;
        }
        self.log_work.new_log_sync = if self.log_active() { self.advance_log_stage(stage) } else { LogStage::None };
        self.promote_synced_mirrors();
    }

    /// A syncing mirror counts once the durable superblock's head has
    /// reached the segment it was written from, and, on a new log, every
    /// dirty block is durable in it.
    fn promote_synced_mirrors(&mut self) {
        if self.log_work.new_log_sync != LogStage::None {
            return;
        }
        let head = self.log_work.superblock_durable_head;
        for health in &mut self.log.mirrors {
            if let MirrorHealth::Syncing { from_sequence } = *health {
                if head >= from_sequence {
                    *health = MirrorHealth::Healthy;
                }
            }
        }
    }
}
