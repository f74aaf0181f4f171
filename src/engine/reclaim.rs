//! Active reclamation when the log runs short: the live entries of the
//! oldest segments are moved to the tail (logged again from the cache device
//! by log_io.rs) or their blocks written back, so that the head can pass
//! them (docs/engine.md, "The log").

use super::{Engine, EngineState};
use crate::cache::flag;
use super::log_io::Move;
use crate::hdd_log::{OpenFor, SlotLba};

/// Segments reclamation works ahead of the head before a barrier.
const RECLAIM_WINDOW_SEGMENTS: u64 = 8;
/// A log more live than this share (9/10) has its head written back, not
/// moved: moving frees space only by compacting it into dead space, and a
/// log with next to none would move the same blocks round and round
/// (a stalled backing device, say, that writes nothing back). So does a
/// segment as live as that when the log is not short of space.
const LIVE_MAX_NUM: u64 = 9;
const LIVE_MAX_DEN: u64 = 10;

/// Free segments below which reclamation stops working ahead of the head
/// and lets a barrier release what it moved first: one more segment's
/// moves can fill the open part and the next, and past the re-logging
/// reserve (`OpenFor::Relog`) a segment has to be written back, which
/// holds the head, and every paced write, for the backing device.
const AHEAD_FREE_MIN: u64 = OpenFor::Relog.min_free() + 2;

impl Engine {
    /// Active reclamation when the log runs short (or is idle and half
    /// full): the live entries of the oldest segments are logged again from
    /// the cache device (compacting them), or — when re-logging has no room
    /// or would gain nothing (`reclaim_segment`) — their blocks are written
    /// back (passive reclamation); either way the head can then advance.
    pub(super) fn reclaim_log_space(&mut self) {
        if !self.log_revocable() {
            return;
        }
        // A retiring log needs room for its revokes, but gets no new entries.
        self.log.advance_head();
        // A stop with no request left waits for no log space: moves would
        // only keep device commands in flight, and the stop waits for those.
        let stopping = self.state == EngineState::Stopping && self.requests.is_empty();
        if !self.log_active() || stopping {
            return;
        }
        let half_full = self.log.segments_in_use() * 2 > self.log_layout.segments_count as u64;
        let wanted = self.log_space_low() || (self.is_idle() && half_full);
        if !wanted || !self.log_work.relog_queue.is_empty() {
            return;
        }
        let head = self.log.head_sequence;
        self.log_work.reclaim_cursor = self.log_work.reclaim_cursor.max(head);
        while self.log_work.reclaim_cursor < self.log.durable_prefix_sequence {
            if self.log_work.reclaim_cursor >= head + RECLAIM_WINDOW_SEGMENTS {
                // Let a barrier release what was re-logged before going further.
                self.log_work.barrier_after_relog = true;
                return;
            }
            let sequence = self.log_work.reclaim_cursor;
            let live = self.log.live_count(sequence) > 0;
            if live && sequence > head && self.log.segments_free() < AHEAD_FREE_MIN {
                self.log_work.barrier_after_relog = true;
                return;
            }
            if live {
                self.reclaim_segment(sequence);
                return;
            }
            self.log_work.reclaim_cursor += 1;
        }
        if self.log.open_buffer.is_some() || self.log.segments_free() > 0 {
            // Dead segments superseded after the last barrier: a barrier frees them.
            self.log_work.barrier_after_relog = true;
        }
    }

    /// Moves the live entries of segment `sequence` (found in memory,
    /// `LogManager::segment_slot_lbas`): each dirty block still logged
    /// there is re-logged from the cache device or, when the log has no
    /// room to re-log or next to no dead space to compact into, written
    /// back. However live the segment itself: moving it costs a cache read
    /// and a log slot per block, a few milliseconds for the segment, where
    /// writing it back holds the head for the backing device (on an HDD
    /// RAID, a fully live segment took seconds).
    fn reclaim_segment(&mut self, sequence: u64) {
        // One segment's moves at a time: the queue is sized for one.
        assert!(self.log_work.relog_queue.is_empty(), "segment {sequence} reclaimed with moves still queued");
        assert!(
            (self.log.head_sequence..self.log.durable_prefix_sequence).contains(&sequence),
            "segment {sequence} reclaimed outside the durable log [{}, {})",
            self.log.head_sequence,
            self.log.durable_prefix_sequence
        );
        self.stats.log_segments_reclaimed += 1;
        self.stats.log_reclaim_live_entries += self.log.live_count(sequence) as u64;
        let slots = self.log.slots();
        let in_use_slots = self.log.segments_in_use() * slots as u64;
        let log_mostly_live = self.log.live_entries * LIVE_MAX_DEN > in_use_slots * LIVE_MAX_NUM;
        // Idle, a mostly live segment is written back (at full depth, as
        // idle write-back goes): moved, it would come round again as it is,
        // and an idle log would be moved round and round.
        let segment_mostly_live = self.log.live_count(sequence) as u64 * LIVE_MAX_DEN > slots as u64 * LIVE_MAX_NUM;
        let idle_pass = !self.log_space_low();
        let write_back_instead = log_mostly_live || (idle_pass && segment_mostly_live);
        let relog = !write_back_instead && self.log.segments_free() >= OpenFor::Relog.min_free();
        let mut entries = std::mem::take(&mut self.log_work.reclaim_entries);
        entries.clear();
        entries.extend(self.log.segment_slot_lbas(sequence));
        for &SlotLba { loc, lba } in &entries {
            let Some(block) = self.cache.lookup(lba) else { continue };
            if !self.cache.has(block, flag::DIRTY) || self.cache.log_loc(block) != loc {
                continue;
            }
            if relog {
                self.log_work.relog_queue.push_back(Move { block, from: loc });
            } else {
                self.queue_reclaim_writeback(lba);
            }
        }
        assert!(self.log_work.relog_queue.len() <= slots as usize, "more moves queued than segment {sequence} has slots");
        self.log_work.reclaim_entries = entries;
        self.log_work.reclaim_cursor = sequence + 1;
        self.log_work.barrier_after_relog = true;
    }
}
