//! Active reclamation when the log runs short: the live entries of the
//! oldest segments are moved to the tail (logged again from the cache device
//! by log_io.rs) or their blocks written back, so that the head can pass
//! them (docs/engine.md, "The log").

use super::{Engine, EngineState};
use crate::cache::{flag, CacheIndex};
use crate::hdd_log::{LogManager, OpenFor, SlotLba};
use std::collections::VecDeque;

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

/// A dirty block moved from its log location to the tail.
#[derive(Clone, Copy, Debug)]
pub(super) struct Move {
    pub block: u32,
    pub from: u32,
}

/// Reclamation's own state: which segment it looks at next and the moves
/// it queued. Handed the log and the cache index, it decides what the head
/// needs; the engine counts, paces and starts the work.
pub(super) struct Reclaimer {
    /// Next segment to look at: several segments are compacted into the
    /// open buffer before one barrier lets the head pass them all.
    cursor: u64,
    /// The entries of the segment looked at; reused.
    entries: Vec<SlotLba>,
    /// Logged dirty blocks whose entry moves to the log's tail. They stay
    /// `Logged`: their entry is durable where it is, so a flush need not
    /// wait for the move. One segment's worth at most.
    moves: VecDeque<Move>,
}

/// Where reclamation goes from the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// This segment holds live entries to move or write back.
    Segment(u64),
    /// It moved far enough ahead: a barrier first releases what it moved.
    Barrier,
    /// Every durable segment from the head is dead.
    PassedAll,
}

impl Reclaimer {
    pub fn new(blocks_per_segment: u32) -> Self {
        Reclaimer {
            cursor: 0,
            entries: Vec::with_capacity(blocks_per_segment as usize),
            moves: VecDeque::with_capacity(blocks_per_segment as usize),
        }
    }

    /// The first segment from the head that holds live entries, within the
    /// window reclamation may work ahead of the head.
    fn next(&mut self, log: &LogManager) -> Next {
        let head = log.head_sequence;
        self.cursor = self.cursor.max(head);
        while self.cursor < log.durable_prefix_sequence {
            if self.cursor >= head + RECLAIM_WINDOW_SEGMENTS {
                return Next::Barrier;
            }
            let live = log.live_count(self.cursor) > 0;
            if live && self.cursor > head && log.segments_free() < AHEAD_FREE_MIN {
                return Next::Barrier;
            }
            if live {
                return Next::Segment(self.cursor);
            }
            self.cursor += 1;
        }
        Next::PassedAll
    }

    /// Takes segment `sequence`'s live entries (found in memory,
    /// `LogManager::segment_slot_lbas`): each dirty block still logged there
    /// is queued to move (`relog`) or its LBA handed to `write_back`.
    fn take_segment(&mut self, sequence: u64, log: &LogManager, cache: &CacheIndex, relog: bool, mut write_back: impl FnMut(u32)) {
        // One segment's moves at a time: the queue is sized for one.
        assert!(self.moves.is_empty(), "segment {sequence} reclaimed with moves still queued");
        assert!(
            (log.head_sequence..log.durable_prefix_sequence).contains(&sequence),
            "segment {sequence} reclaimed outside the durable log [{}, {})",
            log.head_sequence,
            log.durable_prefix_sequence
        );
        self.entries.clear();
        self.entries.extend(log.segment_slot_lbas(sequence));
        for &SlotLba { loc, lba } in &self.entries {
            let Some(block) = cache.lookup(lba) else { continue };
            if !cache.has(block, flag::DIRTY) || cache.log_loc(block) != loc {
                continue;
            }
            if relog {
                self.moves.push_back(Move { block, from: loc });
            } else {
                write_back(lba);
            }
        }
        assert!(self.moves.len() <= log.slots() as usize, "more moves queued than segment {sequence} has slots");
        self.cursor = sequence + 1;
    }

    pub fn moves_queued(&self) -> bool {
        !self.moves.is_empty()
    }

    pub fn next_move(&self) -> Option<Move> {
        self.moves.front().copied()
    }

    /// The next move was made, or is moot.
    pub fn move_done(&mut self) {
        self.moves.pop_front();
    }

    /// The next move cannot start yet: the others go first.
    pub fn move_later(&mut self) {
        self.moves.rotate_left(1);
    }

    /// The log started over: no entry of the old one needs moving.
    pub fn forget_moves(&mut self) {
        self.moves.clear();
    }
}

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
        if !wanted || self.reclaimer.moves_queued() {
            return;
        }
        match self.reclaimer.next(&self.log) {
            Next::Segment(sequence) => self.reclaim_segment(sequence),
            // Let a barrier release what was re-logged before going further.
            Next::Barrier => self.log_work.barrier_after_relog = true,
            // Dead segments superseded after the last barrier: a barrier frees them.
            Next::PassedAll if self.log.open_buffer.is_some() || self.log.segments_free() > 0 => {
                self.log_work.barrier_after_relog = true
            }
            Next::PassedAll => {}
        }
    }

    /// Moves the live entries of segment `sequence`: each dirty block still
    /// logged there is re-logged from the cache device or, when the log has
    /// no room to re-log or next to no dead space to compact into, written
    /// back. However live the segment itself: moving it costs a cache read
    /// and a log slot per block, a few milliseconds for the segment, where
    /// writing it back holds the head for the backing device (on an HDD
    /// RAID, a fully live segment took seconds).
    fn reclaim_segment(&mut self, sequence: u64) {
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
        let (cache, writeback) = (&self.cache, &mut self.writeback);
        self.reclaimer.take_segment(sequence, &self.log, cache, relog, |lba| writeback.queue_reclaim(cache, lba));
        self.log_work.barrier_after_relog = true;
    }
}
