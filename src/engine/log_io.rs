//! The engine's side of the HDD log: copying writes into the open buffer,
//! logging dirty blocks that missed the log (pool exhausted, warm restart,
//! re-sync, reclamation) from the cache device, sealing and writing segments
//! to every mirror, revokes, and mirror failure and attachment (the log
//! superblock: log_superblock.rs; what reclamation moves: reclaim.rs).

use super::{Engine, FailKind, FailReason, Op};
use crate::cache::{flag, BlockState, Through, LOC_NONE};
use crate::io::{DeviceRole, IoBuffer, IoKind, IoStatus, Nanos, RequestData};
use super::reclaim::Move;
use crate::hdd_log::{LogPoint, MirrorHealth, OpenFor};
use crate::config::Policy;

/// The fewest free segments the log counts as enough: the write reserve
/// (`OpenFor::Write`), one segment for the writes that come while
/// reclamation reads the live blocks of the head segment, and one for
/// those blocks. Every segment held free beyond what cleaning needs is
/// one the head comes round to sooner, with more of its entries still
/// live: a floor of twice the buffers plus two held 12 of the 40 segments
/// of a log the cache's size free (fileserver in the simulator: 70 % of
/// what the head passed was live and had to be moved).
const LOW_FREE_MIN: u64 = OpenFor::Write.min_free() + 2;

#[derive(Default)]
pub(super) struct LogWork {
    /// A flush (or reclamation) wants the open buffer sealed as a barrier.
    pub barrier_wanted: bool,
    /// Reclamation re-logged live head entries; a barrier makes that count.
    pub barrier_after_relog: bool,
    /// `hhc` was left (or the instance started under another policy): the
    /// log on the mirrors may hold the only durable copy of dirty blocks, so
    /// it stays, revoked as blocks are written back, until a flush has
    /// written everything back (`retire_log`) or `hhc` takes it up again.
    pub retiring: bool,
    /// Head of the latest restart of the log, and of the newest superblock
    /// known to be on the mirrors: a flush that retired the log waits until
    /// the restart is durable.
    pub restarted_head: u64,
    pub superblock_durable_head: u64,
    scan_hand: u32,
    pub superblock_ops_pending: u32,
    pub superblock_head: u64,
    /// In-sync masks (`LogSuperblock::in_sync_mask`) of the superblocks
    /// written: of the newest encoded, of the newest write that completed,
    /// and of every write still in flight (any of which may be the newest
    /// on a mirror after a crash).
    pub superblock_mask_issued: u16,
    pub superblock_mask_durable: u16,
    pub superblock_mask_in_flight: u16,
    pub last_superblock_at: Nanos,
    /// Whether to leave a gap after a barrier part (gap.rs).
    pub(super) gaps: super::gap::BarrierGaps,
    /// A log started over on an attached mirror holds none of the dirty
    /// blocks at first: its mirror counts once each is logged there,
    /// durably (a flush's wait, flush.rs), as well as the new log's
    /// superblock (torture seed 500805: called healthy with a block
    /// flushed before the attach still missing from it; the cache lost).
    pub(super) new_log_sync: super::flush::LogStage,
}

impl Engine {
    /// Whether writes are mirrored into the log now.
    pub(super) fn log_active(&self) -> bool {
        self.config.policy == Policy::Hhc
            && self.policy_target.is_none()
            && self.log.writable_mirrors().next().is_some()
    }

    /// Whether written-back blocks revoke their log entries: while `hhc`
    /// logs, and while its log is retiring, so that it stays one a replay
    /// (or a return to `hhc`) may use.
    pub(super) fn log_revocable(&self) -> bool {
        self.log_active() || self.log_work.retiring && self.log.writable_mirrors().next().is_some()
    }

    pub(super) fn log_space_low(&self) -> bool {
        self.log.segments_free() < self.log_low_free_segments()
    }

    /// Free segments under which the log counts as short of space
    /// (reclamation, barriers, superblock writes). An eighth of the log:
    /// background write-back starts emptying the head segments an eighth
    /// earlier (writeback.rs), so a quarter held back would only shrink the
    /// log every write goes through. At least `LOW_FREE_MIN`.
    pub(super) fn log_low_free_segments(&self) -> u64 {
        let total = self.log_layout.segments_count as u64;
        (total / 8).max(LOW_FREE_MIN)
    }

    /// Opens a buffer with a free slot for `purpose` (sealing a full one);
    /// None if the pool or the log has no room for it.
    fn open_buffer_with_slot(&mut self, purpose: OpenFor) -> Option<usize> {
        if self.log.open_buffer.is_some() {
            // A buffer from the reserve stays open for what it may take.
            self.log.open(purpose)?;
            if self.log.open_is_full() {
                if !self.open_part_sealable() {
                    return None;
                }
                self.seal_and_write(false);
            }
        }
        self.log.open(purpose)
    }

    pub(super) fn open_buffer_with_revoke_room(&mut self) -> Option<usize> {
        if self.log.open_revokes_full() {
            if !self.open_part_sealable() {
                return None;
            }
            self.seal_and_write(false);
        }
        self.log.open(OpenFor::Revoke)
    }

    /// Whether the open part may be sealed now: no cache read still fills
    /// one of its slots, the pool of part writes has room, and no
    /// superblock that may be the newest on disk counts a mirror in sync
    /// that no longer receives parts.
    fn open_part_sealable(&self) -> bool {
        self.log.open_buffer.is_some_and(|b| self.log.buffers[b].slot_reads_in_flight == 0)
            && self.log.can_seal()
            && !self.superblock_claims_lost_mirror()
    }

    /// A mirror left the in-sync set (failed, removed, detached) while a
    /// superblock that counts it may be the newest on the mirrors. Parts
    /// written now would be missing on it, and a warm start reading that
    /// superblock would count it in sync; only the newest
    /// `PARTS_IN_FLIGHT_MAX` parts are repaired then. So no part is sealed
    /// until a superblock without it is durable (`maybe_write_superblock`
    /// writes one at once); parts already sealed complete as before. With
    /// no writable mirror nothing is written and nothing waits.
    pub(super) fn superblock_claims_lost_mirror(&self) -> bool {
        let claimed = self.log_work.superblock_mask_durable | self.log_work.superblock_mask_in_flight;
        claimed & !self.log.in_sync_mask() != 0 && self.log.writable_mirrors().next().is_some()
    }

    /// Whether a write's log copy must wait rather than go without one: the
    /// open part is full while cache reads still fill some of its slots
    /// (blocks logged again from the cache device). They land within a
    /// cache command, while a block written without its copy costs a cache
    /// read and a slot later, and its flush waits for both; those reads
    /// fill the next part again, so under a steady write stream skipping
    /// the copy fed itself (fileserver with a log 4x the cache: 2.9 blocks
    /// read back per block copied). A pool with no buffer free, or a log
    /// out of free segments, is no wait of this kind: mirror writes may
    /// hang, and there the writes go on unlogged (the throttle sets their
    /// pace, throttle.rs).
    pub(super) fn log_copy_must_wait(&mut self) -> bool {
        if self.open_buffer_with_slot(OpenFor::Write).is_some() {
            return false;
        }
        self.log.open_buffer.is_some_and(|open| {
            let b = &self.log.buffers[open];
            b.accepts >= OpenFor::Write && b.slot_reads_in_flight > 0 && self.log.open_is_full()
        })
    }

    /// The one data copy of the write path: the block's data into the log.
    /// `data` is None when the request data is no longer at hand (the write
    /// waited); the block is then logged later from the cache device.
    pub(super) fn log_copy(&mut self, block: u32, lba: u32, data: Option<(&dyn RequestData, u64)>) {
        debug_assert!(
            self.cache.state(block) == BlockState::Mapped && self.cache.lba(block) == lba && self.cache.has(block, flag::DIRTY),
            "log copy of block {block} that is not lba {lba}'s dirty block"
        );
        let Some((data, offset)) = data else {
            self.cache.set_logged(block, false);
            return;
        };
        let bs = self.config.block_size as usize;
        let previous = self.cache.log_loc(block);
        if let Some(slot) = self.log.open_slot_of(previous) {
            let buffer = self.log.open_buffer.unwrap();
            if self.log.buffers[buffer].slot_reads_in_flight == 0 {
                // Still buffered: update in place.
                let start = self.log.open_slot_offset(slot);
                let region = self.log.buffers[buffer].region;
                data.copy_to(offset, &mut self.region(region)[start..start + bs]);
                self.cache.set_logged(block, true);
                self.stats.log_blocks_copied += 1;
                return;
            }
        }
        let Some(buffer) = self.open_buffer_with_slot(OpenFor::Write) else {
            self.cache.set_logged(block, false);
            return;
        };
        let region = self.log.buffers[buffer].region;
        let memory = self.regions.all[region as usize].as_mut_slice();
        let (loc, start) = self.log.append(memory, lba as u64, previous);
        data.copy_to(offset, &mut memory[start..start + bs]);
        self.cache.set_log_loc(block, loc);
        self.cache.set_logged(block, true);
        self.stats.log_blocks_copied += 1;
        if self.log.open_is_full() && self.open_part_sealable() {
            self.seal_and_write(false);
        }
    }

    /// Logs dirty blocks whose value is not in the log, then moves the
    /// entries reclamation queued, by reading the blocks from the cache
    /// device straight into slots of the open part.
    pub(super) fn log_unlogged_blocks(&mut self) {
        if !self.log_active() {
            return;
        }
        if self.relog_may_start() {
            self.log_missing_blocks();
        }
        self.relog_queued_blocks();
    }

    fn log_missing_blocks(&mut self) {
        if self.cache.unlogged_dirty_count() == 0 {
            return;
        }
        // Only the blocks missing from the log are visited (a set of them),
        // each at most once per call.
        let n = self.cache.blocks_count();
        let mut visits = self.cache.unlogged_dirty_count();
        while visits > 0 {
            visits -= 1;
            self.stats.blocks_visited += 1;
            let Some(block) = self.cache.next_unlogged_dirty(self.log_work.scan_hand) else { return };
            self.log_work.scan_hand = (block + 1) % n;
            let candidate = self.cache.state(block) == BlockState::Mapped
                && self.cache.has(block, flag::DIRTY)
                && !self.cache.has(block, flag::LOGGED | flag::BUSY)
                && self.cache.pins(block) == 0
                // A write-through copy goes to the backing device itself; an
                // entry of it could be replayed over a later write there.
                && self.cache.through(block) == Through::None;
            if !candidate {
                continue;
            }
            if !self.read_into_log(block, LOC_NONE) {
                return;
            }
        }
    }

    /// Moves the entries reclamation queued: each block still dirty and
    /// logged at the same place is read into the open part.
    fn relog_queued_blocks(&mut self) {
        while let Some(Move { block, from }) = self.reclaimer.next_move() {
            let still_there = self.cache.state(block) == BlockState::Mapped
                && self.cache.has(block, flag::DIRTY | flag::LOGGED)
                && self.cache.log_loc(block) == from;
            if !still_there {
                self.reclaimer.move_done();
                continue;
            }
            if self.cache.has(block, flag::BUSY) {
                // A write into it is in flight: try again after the others.
                // A pin is no reason to wait: it holds the block's data as
                // it is (a read hit, or a write-back, which may take the
                // backing device's time while the head waits behind it; a
                // move that a write-back overtakes is dropped as it lands).
                self.reclaimer.move_later();
                return;
            }
            if !self.read_into_log(block, from) {
                return;
            }
            self.reclaimer.move_done();
        }
    }

    /// Reads `block` from the cache device into a new slot of the open part;
    /// false if no part can take it now.
    fn read_into_log(&mut self, block: u32, relog_from: u32) -> bool {
        debug_assert!(
            self.cache.state(block) == BlockState::Mapped && self.cache.has(block, flag::DIRTY) && !self.cache.has(block, flag::BUSY),
            "block {block} read into the log while busy or clean"
        );
        let Some(buffer) = self.open_buffer_with_slot(OpenFor::Relog) else { return false };
        let region = self.log.buffers[buffer].region;
        let memory = self.regions.all[region as usize].as_mut_slice();
        let (loc, start) = self.log.append(memory, self.cache.lba(block) as u64, LOC_NONE);
        self.log.buffers[buffer].slot_reads_in_flight += 1;
        debug_assert!(self.log.buffers[buffer].slot_reads_in_flight <= self.log.slots(), "more slot reads than slots in buffer {buffer}");
        self.cache.pin(block);
        let bs = self.config.block_size as u64;
        let offset = self.cache_layout.block_offset(block as u64);
        let target = IoBuffer::Engine { region, offset_bytes: start as u32 };
        let op = Op::LogSlotRead { block, buffer: buffer as u32, loc, relog_from };
        self.submit(op, DeviceRole::Cache, IoKind::Read, offset, bs, target);
        true
    }

    /// Whether reclamation has moves queued or reads of them in flight.
    fn relog_pending(&self) -> bool {
        self.reclaimer.moves_queued() || self.log.open_buffer.is_some_and(|b| self.log.buffers[b].slot_reads_in_flight > 0)
    }

    pub(super) fn log_slot_read_done(&mut self, block: u32, buffer: u32, loc: u32, relog_from: u32, status: IoStatus) {
        debug_assert!(loc != LOC_NONE && loc != relog_from, "slot read of block {block} into loc {loc} from {relog_from}");
        let current = self.log.is_current(buffer as usize);
        self.log.slot_read_done(buffer as usize);
        if !current {
            // The log restarted meanwhile: this slot belongs to nothing.
            self.cache.unpin(block);
            return;
        }
        // The part cannot have been sealed while the read filled it.
        debug_assert_eq!(self.log.open_buffer, Some(buffer as usize));
        let point = self.log.open_point().expect("the read's part is open");
        // The block still holds the value read: still current and dirty, and
        // either still missing from the log or still logged where it was
        // when reclamation queued it.
        let placed = if relog_from == LOC_NONE {
            !self.cache.has(block, flag::LOGGED)
        } else {
            self.cache.has(block, flag::LOGGED) && self.cache.log_loc(block) == relog_from
        };
        let adopt = status == IoStatus::Ok
            && self.cache.state(block) == BlockState::Mapped
            && self.cache.has(block, flag::DIRTY)
            && placed;
        if adopt {
            let previous = self.cache.log_loc(block);
            let region = self.log.buffers[buffer as usize].region;
            let memory = self.regions.all[region as usize].as_mut_slice();
            self.log.supersede(memory, previous, point);
            self.cache.set_log_loc(block, loc);
            self.cache.set_logged(block, true);
            self.stats.log_blocks_from_cache += 1;
            if relog_from != LOC_NONE {
                self.stats.log_blocks_relogged += 1;
            }
        } else {
            // Superseded, cleaned or unreadable meanwhile: leave a hole.
            self.log.kill(loc, Some(point));
            let slot = self.log.open_slot_of(loc).expect("the read's slot is in the open part");
            let region = self.log.buffers[buffer as usize].region;
            let memory = self.regions.all[region as usize].as_mut_slice();
            self.log.drop_in_open(memory, slot);
        }
        self.cache.unpin(block);
        if status == IoStatus::DeviceLost {
            self.fail(FailReason::new(FailKind::DeviceLost, "cache device lost"));
        }
    }

    /// Drops `block`'s log entries: in place if still buffered, and with a
    /// revoke record for the copies already on the mirrors. False if no
    /// buffer can take the revoke now.
    pub(super) fn revoke(&mut self, block: u32) -> bool {
        debug_assert!(self.cache.state(block) == BlockState::Mapped, "revoke of block {block}, which maps no LBA");
        let Some(buffer) = self.open_buffer_with_revoke_room() else { return false };
        let loc = self.cache.log_loc(block);
        let region = self.log.buffers[buffer].region;
        let memory = self.regions.all[region as usize].as_mut_slice();
        if let Some(slot) = self.log.open_slot_of(loc) {
            self.log.drop_in_open(memory, slot);
        }
        self.log.kill(loc, None);
        let lba = self.cache.lba(block);
        self.log.record_revoke(memory, lba as u64);
        // The record covers every older entry of the LBA.
        self.writeback.revokes.paid(lba);
        self.stats.revokes += 1;
        true
    }

    /// Seals the open buffer when it is full, its revoke table is full, or a
    /// barrier is wanted.
    pub(super) fn maybe_seal(&mut self) {
        if !self.log_revocable() {
            self.log_work.barrier_wanted = false;
            return;
        }
        if self.log_work.barrier_after_relog && self.cache.unlogged_dirty_count() == 0 && !self.relog_pending() {
            self.log_work.barrier_after_relog = false;
            self.log_work.barrier_wanted |= self.log.head_waits_for_barrier();
        }
        if self.log_work.barrier_wanted && self.log.barrier_covers_all() {
            // Nothing since the last barrier: it serves; no segment is spent.
            self.log_work.barrier_wanted = false;
            let last = self.log.last_sealed_point();
            self.barrier_sealed(last);
            return;
        }
        let Some(buffer) = self.log.open_buffer.or_else(|| self.log_work.barrier_wanted.then(|| self.log.open(OpenFor::Revoke)).flatten())
        else {
            return;
        };
        if self.log.buffers[buffer].slot_reads_in_flight > 0 || !self.log.can_seal() || self.superblock_claims_lost_mirror() {
            return;
        }
        if self.log_work.barrier_wanted {
            self.log_work.barrier_wanted = false;
            let sequence = self.seal_and_write(true);
            self.barrier_sealed(Some(sequence));
        } else if self.log.open_is_full() || self.log.open_revokes_full() {
            self.seal_and_write(false);
        }
    }

    /// Seals the open part and writes it to every writable mirror, right
    /// after the parts before it: a barrier costs its header block and the
    /// blocks it carries, not a whole segment. After a barrier part, a gap
    /// may be left on a rotating log (gap.rs), unless log space is short.
    fn seal_and_write(&mut self, barrier: bool) -> LogPoint {
        let barrier = barrier || self.log.tight();
        let gap_blocks = if barrier && !self.log_space_low() {
            self.log_work.gaps.gap_after_barrier(self.config.barrier_gap_bytes / self.config.block_size)
        } else {
            0
        };
        let buffer = self.log.open_buffer.expect("no open buffer");
        let region = self.log.buffers[buffer].region;
        let memory = self.regions.all[region as usize].as_mut_slice();
        let sealed = self.log.seal(memory, barrier, gap_blocks);
        self.log_work.gaps.sealed(self.now, sealed.point, barrier, sealed.skipped_blocks);
        let offset = self.log_layout.segment_offset(sealed.segment_index) + sealed.offset_bytes;
        let writable = self.log.writable_mirrors().count();
        self.stats.log_parts_written += 1;
        self.stats.log_gap_blocks += sealed.skipped_blocks as u64;
        self.stats.log_bytes_written += sealed.len_bytes * writable as u64;
        for mirror in 0..self.log.mirrors_count() {
            if !self.log.mirror_writable(mirror) {
                continue;
            }
            self.log.part_op_started(buffer, sealed.write);
            let op = Op::SegmentWrite { buffer: buffer as u32, write: sealed.write, mirror };
            let target = IoBuffer::Engine { region, offset_bytes: sealed.offset_bytes as u32 };
            self.submit(op, DeviceRole::Log(mirror), IoKind::Write, offset, sealed.len_bytes, target);
        }
        if writable == 0 && self.log.settle_durable() {
            self.log.advance_head();
            self.log_work.gaps.durable(self.now, self.log.durable_barrier);
        }
        sealed.point
    }

    /// A part's command names a buffer of the pool and a mirror there is.
    fn assert_part_op(&self, buffer: u32, mirror: u8) {
        assert!(
            (buffer as usize) < self.log.buffers.len() && mirror < self.log.mirrors_count(),
            "part command done for buffer {buffer}, mirror {mirror}: no such buffer or mirror"
        );
    }

    pub(super) fn segment_write_done(&mut self, buffer: u32, write: u32, mirror: u8, status: IoStatus) {
        self.assert_part_op(buffer, mirror);
        if status == IoStatus::Ok {
            // Every part is flushed out of the drive's cache on its own: a
            // barrier's FLUSH would not cover an earlier part whose write
            // completes after that FLUSH was sent.
            let op = Op::SegmentFlush { buffer, write, mirror };
            self.submit(op, DeviceRole::Log(mirror), IoKind::Flush, 0, 0, IoBuffer::None);
            return;
        }
        self.segment_flush_done(buffer, write, mirror, status);
    }

    pub(super) fn segment_flush_done(&mut self, buffer: u32, write: u32, mirror: u8, status: IoStatus) {
        self.assert_part_op(buffer, mirror);
        if status != IoStatus::Ok {
            self.mirror_failed(mirror);
        }
        if self.log.part_op_done(buffer as usize, write) {
            self.log.advance_head();
            self.log_work.gaps.durable(self.now, self.log.durable_barrier);
        }
    }

    pub(super) fn mirror_failed(&mut self, mirror: u8) {
        let health = &mut self.log.mirrors[mirror as usize];
        if *health == MirrorHealth::Failed {
            return;
        }
        log::warn!("hhc: log mirror {mirror} failed");
        *health = MirrorHealth::Failed;
        self.stats.mirror_failures += 1;
        // A syncing mirror lacks the log before it joined. With no healthy
        // mirror, flushes fall back to writing back and complete with their
        // revokes under no barrier; a syncing mirror counted healthy later
        // would let a replay take older entries back over what they wrote
        // back (torture seed 131131, passthrough). So it fails too, and
        // takes the log up again only when it is attached again (the log
        // then starts over on it).
        if !self.log.has_healthy_mirror() {
            for other in 0..self.log.mirrors_count() {
                if matches!(self.log.mirrors[other as usize], MirrorHealth::Syncing { .. }) {
                    log::warn!("hhc: log mirror {other} was still syncing and no mirror in sync is left; it is dropped too");
                    self.log.mirrors[other as usize] = MirrorHealth::Failed;
                    self.stats.mirror_failures += 1;
                }
            }
        }
    }

    /// A fresh mirror joins and syncs: every dirty block is logged again,
    /// and the mirror counts once every live entry lies in segments written
    /// to it. With no healthy mirror left the log starts over on it, and it
    /// counts once every dirty block and the new log's superblock are
    /// durable there.
    pub(super) fn attach_mirror(&mut self, mirror: u8) {
        if self.join_mirror(mirror) {
            self.write_superblock(self.log.head_sequence, true);
        }
    }

    /// `attach_mirror` but for the superblock, which the caller writes:
    /// false if there is no such mirror.
    pub(super) fn join_mirror(&mut self, mirror: u8) -> bool {
        if mirror as usize >= self.log.mirrors.len() {
            return false;
        }
        let new_log = !self.log.has_healthy_mirror();
        let from_sequence = if new_log {
            let first = self.log.tail_sequence + self.log_layout.segments_count as u64;
            self.start_new_log(first);
            self.log_work.new_log_sync = super::flush::LogStage::WaitLogged;
            // Flushes count on the new log now (`log_flushable`), and a
            // replay needs its superblock: they wait for it too.
            self.log_work.restarted_head = first;
            first
        } else {
            self.log.tail_sequence + 1
        };
        // A mirror that starts a new log syncs too: a replay needs that
        // log's superblock and every dirty block in it, so the mirror
        // counts (and flushes rely on it) only once both are durable
        // (`new_log_sync`; torture seed 482121: called healthy at once, the
        // cache lost before the superblock landed, the scan found none).
        let syncs = self.mutation() != crate::config::Mutation::AttachedMirrorHealthy;
        self.log.mirrors[mirror as usize] = if syncs {
            MirrorHealth::Syncing { from_sequence }
        } else {
            MirrorHealth::Healthy
        };
        self.relog_all_dirty();
        // Seal what is open so the next segment (from_sequence) starts fresh.
        if self.log.open_buffer.is_some() {
            self.log_work.barrier_wanted = true;
        }
        true
    }

    /// Forgets the log (nothing in it will be replayed) and starts a new one
    /// at `first`: revokes owed to old entries go with it, and so do the
    /// blocks' places in it, which name nothing in the new log (kept, a
    /// block re-logged or revoked there would take a live entry off the new
    /// log's counts, and the head could pass an entry still live).
    fn start_new_log(&mut self, first: u64) {
        // Sequences name segments' places and a scan tells logs apart by
        // them: a new log starts past every sequence the old one used.
        assert!(first > self.log.tail_sequence, "new log at sequence {first}, not past the tail {}", self.log.tail_sequence);
        self.log.reinitialise(first);
        self.log_work.gaps.forget_parts();
        self.reclaimer.forget_moves();
        self.log_work.new_log_sync = super::flush::LogStage::None;
        self.writeback.revokes.clear();
        self.startup_revokes.clear();
        for block in 0..self.cache.blocks_count() {
            if self.cache.state(block) == BlockState::Mapped {
                self.cache.set_log_loc(block, LOC_NONE);
            }
        }
    }

    /// Marks every dirty block as missing from the log.
    pub(super) fn relog_all_dirty(&mut self) {
        for block in 0..self.cache.blocks_count() {
            if self.cache.state(block) == BlockState::Mapped && self.cache.has(block, flag::DIRTY) {
                self.cache.set_logged(block, false);
            }
        }
    }

    /// Entering `hhc` with no log kept from before, or retiring the log left
    /// behind by it: the old log must never be replayed over data written
    /// back without revokes, so it is emptied first.
    pub(super) fn restart_log_for_switch(&mut self, _to: Policy) {
        self.log_work.retiring = false;
        if self.config.mirrors_count == 0 || self.log.writable_mirrors().next().is_none() {
            return;
        }
        let first = self.log.tail_sequence + self.log_layout.segments_count as u64;
        self.start_new_log(first);
        assert!(first > self.log_work.restarted_head, "log restarted at {first}, not after its last restart");
        self.log_work.restarted_head = first;
        for block in 0..self.cache.blocks_count() {
            if self.cache.state(block) == BlockState::Mapped {
                self.cache.set_logged(block, false);
            }
        }
        self.write_superblock(first, true);
    }
}
