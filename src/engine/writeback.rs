//! Background write-back: keeps dirty blocks under the threshold and, under
//! `hhc`, the segments near the log head empty (writing back the blocks
//! whose entries are oldest first), at the depth the backing device takes
//! (pacing.rs) while requests arrive and not at all when neither needs it;
//! serves flushes and policy switches that need everything written back
//! (switch.rs), and turns blocks clean — with a revoke in the log
//! (revokes.rs) — only once the backing write is durable (docs/design.md §2,
//! invariant 4).

use super::evict::free_blocks_low_watermark;
use super::flush::BackingFlusher;
use super::pacing::WritebackPacer;
use super::{Engine, EngineState, FailKind, FailReason, Op};
use crate::cache::{flag, BlockState, Through, LOC_NONE};
use crate::config::Mutation;
use crate::io::{DeviceRole, IoBuffer, IoKind, IoStatus, Nanos};
use super::in_flight::LbasInFlight;
use super::lba_hash::LbaTable;
use super::lba_queue::LbaQueue;
use super::revokes::RevokeWaits;
use super::writeback_queue::{Pass, Passes, Queued};
use std::collections::VecDeque;

/// Largest write-back run where the backing device declares no stripe:
/// adjacent dirty blocks go to the backing device in one write (a RAID5
/// behind it prefers few large writes to many small ones).
const RUN_BYTES_MAX: u32 = 128 << 10;

/// Largest write-back run of an engine of `config`: one stripe of a striped
/// backing device (runs are aligned to its stripes: a run that covers a
/// whole stripe is a full-stripe write, with no read-modify-write), else
/// `RUN_BYTES_MAX`.
pub(super) fn run_bytes(config: &crate::config::Config) -> u32 {
    match config.backing_stripe_bytes {
        0 => RUN_BYTES_MAX.max(config.block_size),
        stripe => stripe,
    }
}

/// Write-back LBAs held at once (`LbasInFlight`), in runs per staging
/// extent: the runs being written and three times as many written and
/// waiting for the backing FLUSH that lets them turn clean. With a slow
/// FLUSH write-back then waits; with no bound it grew to 2.3 times the runs
/// in flight in torture, and to the whole cache in principle.
const RUNS_HELD_PER_EXTENT: u32 = 4;

/// Blocks the write-back scan visits looking for one whose log entry lies
/// in the old window before it settles for a young one, and the visits
/// under which finding one counts as easy (the window then narrows): old
/// candidates end up between 1 in 8 and 1 in 32 of the blocks visited,
/// which keeps the scan cheap.
const OLD_VISITS_MAX: u32 = 32;
const OLD_VISITS_PLENTY: u32 = 8;

/// New dirty blocks after which a write-back scan that found nothing is
/// worth making again (`writeback_scan_dry`).
const DRY_SCAN_DIRTY_CHANGE: u32 = 8;

/// One write-back in flight: a run of adjacent LBAs read from their cache
/// blocks into one staging extent, then written to the backing device at once.
struct Extent {
    lba_first: u32,
    blocks: Vec<u32>,
    reads_pending: u32,
    failed: bool,
}

/// A write-back in flight of an LBA: the block written back and the pass
/// it counts for (None if none).
#[derive(Clone, Copy, Debug)]
pub(super) struct WritebackInFlight {
    pub block: u32,
    pub pass: Option<Pass>,
}

/// What a background scan that found nothing depends on: commits
/// completed, blocks written back, dirty blocks, and when.
#[derive(Clone, Copy, Debug)]
struct ScanState {
    commits: u64,
    writebacks: u64,
    dirty: u32,
    at: Nanos,
}

/// Whether old log entries are live, as of a head and tail.
#[derive(Clone, Copy, Debug)]
struct OldLive {
    head: u64,
    tail: u64,
    live: bool,
}

pub(super) struct Writeback {
    /// LBAs that must be written back (flushes, policy switches), each
    /// once, with the pass counting on it (writeback_queue.rs): at most one
    /// per cache block.
    pub queue: LbaQueue<Queued>,
    pub passes: Passes,
    /// LBAs reclamation wants written back (their entries hold up the log's
    /// head): background work, at the paced depth like the rest. Each once,
    /// so at most one per cache block: queued again for a later segment
    /// while still waiting, an LBA went in twice (1.6 entries per cache
    /// block in torture).
    pub reclaim_queue: LbaQueue<()>,
    extents: Vec<Extent>,
    extents_free: Vec<u32>,
    pub run_blocks_max: u32,
    /// Blocks per backing stripe; 0 if the backing device has none. A run
    /// never crosses a stripe boundary.
    stripe_blocks: u32,
    /// Write-backs whose backing write completed, waiting for a backing FLUSH
    /// generation: (block, ticket). Each block stays pinned, its LBA in
    /// `lbas_in_flight`, until its entry leaves: no more entries than
    /// write-back LBAs in flight, nor than cache blocks (`awaiting_max`).
    awaiting_flush: VecDeque<(u32, u64)>,
    awaiting_max: u32,
    /// Written-back blocks waiting for their revoke, and revokes owed.
    pub revokes: RevokeWaits,
    hand: u32,
    /// Segments from the log head whose entries' blocks background
    /// write-back prefers (`next_background_candidate`), adapted to how
    /// many such blocks the scan finds.
    old_window: u64,
    /// `old_log_entries_live` as of (head, tail).
    old_live_cached: Option<OldLive>,
    /// The last background scan found no block to write back, as of
    /// `Engine::writeback_scan_state`.
    dry: Option<ScanState>,
    /// LBAs with a backing write in flight (in_flight.rs).
    pub lbas_in_flight: LbasInFlight,
    /// Each write-back LBA of `lbas_in_flight`: the block written back and
    /// the pass that write-back counts for (None if none), which a
    /// pass that finds the block still current counts on too
    /// (writeback_queue.rs). As many as `awaiting_flush` may hold.
    pub in_flight_passes: LbaTable<WritebackInFlight>,
    pub backing: BackingFlusher,
    /// Depth while requests arrive (pacing.rs).
    pub pacer: WritebackPacer,
    /// Write-back keeps up with the writes (at the pacer's depth) from this
    /// many dirty blocks on (`over_from`).
    over_from: u32,
    /// The commit a switch to wt or passthrough waits for once nothing is
    /// dirty: until then the metadata may still record blocks dirty.
    pub switch_commit: Option<u64>,
    /// The commit that must complete before a write-through write starts:
    /// it rewrites committed entries of clean copies as write-through copies
    /// (`Engine::distrust_clean_entries`).
    pub through_gate: u64,
}

impl Writeback {
    pub fn new(config: &crate::config::Config, blocks_count: u32) -> Self {
        // A pass per flush and one for `flush_all` (writeback_queue.rs).
        let waiters_max = config.requests_max as usize + 1;
        let parallelism = config.writeback_parallelism;
        let run_blocks_max = run_bytes(config) / config.block_size;
        let stripe_blocks = config.backing_stripe_bytes / config.block_size;
        let writeback_lbas_max = RUNS_HELD_PER_EXTENT * parallelism * run_blocks_max;
        let awaiting_max = writeback_lbas_max.min(blocks_count);
        let extent = || Extent {
            lba_first: 0,
            blocks: Vec::with_capacity(run_blocks_max as usize),
            reads_pending: 0,
            failed: false,
        };
        Writeback {
            queue: LbaQueue::with_capacity(blocks_count as usize),
            passes: Passes::with_capacity(waiters_max),
            reclaim_queue: LbaQueue::with_capacity(blocks_count as usize),
            extents: (0..parallelism).map(|_| extent()).collect(),
            extents_free: (0..parallelism).rev().collect(),
            run_blocks_max,
            stripe_blocks,
            awaiting_flush: VecDeque::with_capacity(awaiting_max as usize),
            awaiting_max,
            revokes: RevokeWaits::new(blocks_count),
            hand: 0,
            old_window: 1,
            old_live_cached: None,
            dry: None,
            lbas_in_flight: LbasInFlight::new(writeback_lbas_max, config.request_blocks_max, blocks_count),
            in_flight_passes: LbaTable::with_capacity_and_hasher(awaiting_max as usize, Default::default()),
            backing: BackingFlusher::default(),
            pacer: WritebackPacer::new(parallelism),
            over_from: over_from(blocks_count, config.dirty_threshold_percent),
            switch_commit: None,
            through_gate: 0,
        }
    }

    /// Whether `lba` is the first of a backing stripe (never, without stripes).
    fn stripe_starts_at(&self, lba: u32) -> bool {
        self.stripe_blocks != 0 && lba.is_multiple_of(self.stripe_blocks)
    }

    /// The dirty threshold changed (`Engine::set_options`).
    pub fn set_threshold(&mut self, blocks_count: u32, dirty_threshold_percent: u8) {
        self.over_from = over_from(blocks_count, dirty_threshold_percent);
    }

    /// Write-backs the staging pool holds at once: the parallelism the
    /// engine was created with.
    pub fn extents_count(&self) -> u32 {
        self.extents.len() as u32
    }

    pub fn in_flight(&self) -> u32 {
        (self.extents.len() - self.extents_free.len()) as u32
    }

    fn await_backing_flush(&mut self, block: u32, ticket: u64) {
        assert!(self.awaiting_flush.len() < self.awaiting_max as usize, "block {block}: more write-backs awaiting a FLUSH than {}", self.awaiting_max);
        self.awaiting_flush.push_back((block, ticket));
    }
}

/// The dirty blocks from which write-back keeps up with the writes: more
/// than the threshold's share of the cache, or so many that fewer than
/// twice the free-block low watermark are left clean. Eviction keeps free
/// blocks from clean ones (`keep_free_blocks`); with a threshold near 100 %
/// and writes beyond the cache, dirty blocks left too few, and each write
/// waited for a write-back, its commit and its flush whenever the free
/// blocks ran out (wb@100, 1 GiB of random writes over a 256 MiB cache:
/// 17 k IOPS, p99 32 ms, against 177 k at 30 %). Computed once: it is
/// looked at after every input.
fn over_from(blocks_count: u32, dirty_threshold_percent: u8) -> u32 {
    let over_threshold = (blocks_count as u64 * dirty_threshold_percent as u64 / 100) as u32 + 1;
    let clean_short = (blocks_count + 1).saturating_sub(2 * free_blocks_low_watermark(blocks_count));
    over_threshold.min(clean_short)
}

impl Engine {
    fn writeback_parallelism_wanted(&mut self) -> u32 {
        let full = self.config.writeback_parallelism;
        // A clean stop leaves dirty blocks dirty (the restart is warm): no
        // new write-back once no request is left that waits for one, or the
        // stop would wait for the whole cache once idle write-back started.
        if self.state == EngineState::Stopping && self.requests.is_empty() {
            return 0;
        }
        if !self.writeback.queue.is_empty() || self.policy_target.is_some() {
            return full;
        }
        if self.cache.write_back_dirty_count() == 0 {
            return 0;
        }
        if !self.config.policy.is_write_back() {
            // Left over from a crash or a switch (not write-through copies:
            // their own backing writes make them clean).
            return full;
        }
        // Writes waiting for a block that only write-back can free (dirty
        // blocks, and wb-ordered's retained ones, which the threshold does
        // not count) must not wait for the device to go idle.
        let starved = self.cache.free_count() == 0 && !self.waiting.is_empty();
        let over = starved || self.cache.dirty_count() >= self.writeback.over_from;
        let log_tight = self.log_active() && self.old_log_entries_live();
        // Requests still outstanding (slow backing reads, say) mean the
        // device is busy even when none arrived lately: idle-speed write-back
        // would only make them slower, and the next ones arrive later still.
        let idle = self.is_idle() && self.requests.is_empty();
        // Over the threshold (or with live entries near the log head) it has
        // to keep up with what arrives, at the depth the backing device takes
        // without holding up read misses (pacing.rs): full on RAM or flash,
        // near one on a RAID of HDDs, where reclamation (sequential on the
        // log) then does more of the work of emptying the log's head. With
        // no free block left, writes wait for write-back: full depth.
        // Blocks reclamation chose to write back hold up the log's head,
        // and with it every logged write (throttle.rs): full depth too.
        let reclaiming = !self.writeback.reclaim_queue.is_empty();
        if idle || starved || reclaiming {
            full
        } else if over || log_tight {
            self.writeback.pacer.depth().min(full)
        } else {
            0
        }
    }

    /// The log is within an eighth of running short of space (where
    /// reclamation starts, `log_space_low`) and its oldest eighth still
    /// holds live entries: write-back (of the blocks whose entries lie near
    /// the head, `next_background_candidate`) empties those segments before
    /// reclamation has to read and re-log them. Dead segments need no
    /// write-back, only a barrier (for superseded entries), which
    /// reclamation writes. Evaluated again when the head or the tail moves.
    fn old_log_entries_live(&mut self) -> bool {
        let (head, tail) = (self.log.head_sequence, self.log.tail_sequence);
        if let Some(OldLive { head: at_head, tail: at_tail, live }) = self.writeback.old_live_cached {
            if (at_head, at_tail) == (head, tail) {
                return live;
            }
        }
        let in_use = tail - head;
        let total = self.log_layout.segments_count as u64;
        let filling = self.log.segments_free() < self.log_low_free_segments() + total / 8;
        let old_end = (head + (in_use / 8).max(1)).min(tail);
        let live = filling && (head..old_end).any(|sequence| self.log.live_count(sequence) > 0);
        self.writeback.old_live_cached = Some(OldLive { head, tail, live });
        live
    }

    pub(super) fn schedule_writeback(&mut self) {
        self.issue_backing_flush();
        let wanted = self.writeback_parallelism_wanted();
        // Bounded: queued items whose block is busy go back to the queue.
        let mut attempts = self.writeback.queue.len() + self.writeback.reclaim_queue.len() + wanted as usize;
        // Each queued item is tried once per call, then background candidates
        // get their turn: a queued block that cannot start yet (pinned while
        // its revoke waits, say) must not starve the others.
        let mut queued = self.writeback.queue.len();
        let mut reclaim_queued = self.writeback.reclaim_queue.len();
        while attempts > 0
            && self.writeback.in_flight() < wanted
            && !self.writeback.extents_free.is_empty()
            && self.writeback.lbas_in_flight.writeback_room(self.writeback.run_blocks_max)
        {
            attempts -= 1;
            if let Some(block) = self.ordered_next_retained() {
                // As for current blocks: a retained block not yet recorded goes
                // to the backing device only after a commit, or a restart would
                // trust an older entry over what the backing device then holds
                // (seed 7001).
                if !self.held_for_commit(block) {
                    self.start_writeback_run(block, (None, 0), false);
                    continue;
                }
            }
            let from_queue = if queued > 0 { self.writeback.queue.pop_front() } else { None };
            queued = queued.saturating_sub(1);
            if let Some((lba, entry)) = from_queue {
                let pass = match entry {
                    Queued::Taken => continue,
                    Queued::ForNobody => None,
                    Queued::For(pass) => Some(pass),
                };
                if !self.start_writeback(lba, pass) {
                    // Busy, or not committed yet: try again later.
                    self.writeback.queue.push_back(lba, entry);
                }
                continue;
            }
            let from_reclaim = if reclaim_queued > 0 { self.writeback.reclaim_queue.pop_front() } else { None };
            reclaim_queued = reclaim_queued.saturating_sub(1);
            if let Some((lba, ())) = from_reclaim {
                if !self.start_writeback(lba, None) {
                    self.writeback.reclaim_queue.push_back(lba, ());
                }
                continue;
            }
            let Some(lba) = self.next_background_candidate() else { break };
            self.start_writeback(lba, None);
        }
        self.issue_backing_flush();
    }

    /// Next dirty idle block in CLOCK order (bounded scan; the cheap tests
    /// first, as most blocks fail them). While `hhc` logs, a block whose
    /// log entry lies near the head goes first (`old_window`): its revoke
    /// empties the segments the head must pass next, so the log frees space
    /// without reclamation reading and re-logging them; and the blocks
    /// written last (young entries) are the likeliest to be overwritten
    /// again, which would make their write-back wasted work.
    fn next_background_candidate(&mut self) -> Option<u32> {
        if self.cache.write_back_dirty_count() == 0 || self.writeback_scan_dry() {
            return None;
        }
        let old_before = self.log_active().then(|| {
            let (head, tail) = (self.log.head_sequence, self.log.tail_sequence);
            let in_use = (tail - head).max(1);
            self.writeback.old_window = self.writeback.old_window.clamp(1, in_use);
            head + self.writeback.old_window
        });
        let n = self.cache.blocks_count();
        let mut young = None;
        let mut held = false;
        for visits in 1..=n.min(4096) {
            self.stats.blocks_visited += 1;
            let block = self.writeback.hand;
            self.writeback.hand = if block + 1 == n { 0 } else { block + 1 };
            let candidate = self.cache.state(block) == BlockState::Mapped
                && self.cache.flags_bits(block) & (flag::DIRTY | flag::BUSY) == flag::DIRTY
                && self.cache.pins(block) == 0
                && self.cache.through(block) == Through::None
                && self.ordered_may_write_back(block)
                && !self.writeback.lbas_in_flight.contains(self.cache.lba(block));
            // A block waiting for a commit is passed over; only when nothing
            // else can go is a commit asked for. Asking for one for every such
            // block keeps commits running back to back, each encoding every
            // changed metadata page, while most dirty blocks need none.
            if candidate && self.waits_for_commit(block) {
                held = true;
            } else if candidate {
                let Some(before) = old_before else { return Some(self.cache.lba(block)) };
                let loc = self.cache.log_loc(block);
                if loc != LOC_NONE && self.log.loc_sequence(loc) < before {
                    if visits < OLD_VISITS_PLENTY {
                        // Old ones are plentiful: aim closer to the head.
                        self.writeback.old_window -= self.writeback.old_window / 8;
                    }
                    return Some(self.cache.lba(block));
                }
                young = young.or(Some(block));
            }
            if young.is_some() && visits >= OLD_VISITS_MAX {
                break;
            }
        }
        // Old ones are scarce: take a young one (dirty blocks must stay under
        // the threshold) and look further from the head next time.
        if young.is_some() {
            self.writeback.old_window = self.writeback.old_window.saturating_mul(2);
        } else {
            if held {
                self.commit.request();
            }
            self.writeback.dry = Some(self.writeback_scan_state());
        }
        young.map(|block| self.cache.lba(block))
    }

    /// What a scan that found nothing depends on.
    fn writeback_scan_state(&self) -> ScanState {
        ScanState { commits: self.commit.completed(), writebacks: self.stats.writebacks, dirty: self.cache.dirty_count(), at: self.now }
    }

    /// Whether the last scan found nothing and nothing that could change
    /// that has happened since: a commit (blocks waiting for one), a
    /// write-back (blocks it pinned), new dirty blocks, or a timer tick.
    /// Scanning 4096 blocks on every input meanwhile would cost more than
    /// the requests themselves (seconds of CPU per second at 100 K inputs/s).
    fn writeback_scan_dry(&mut self) -> bool {
        let Some(then) = self.writeback.dry else { return false };
        let now = self.writeback_scan_state();
        let changed = now.commits != then.commits
            || now.writebacks != then.writebacks
            || now.dirty.abs_diff(then.dirty) >= DRY_SCAN_DIRTY_CHANGE
            || now.at.saturating_sub(then.at) >= self.tick_ns();
        if changed {
            self.writeback.dry = None;
        }
        !changed
    }

    /// A dirty block that may be written back now.
    fn writeback_ready(&self, lba: u32) -> Option<u32> {
        let block = self.cache.lookup(lba)?;
        let ready = self.cache.has(block, flag::DIRTY)
            && !self.cache.has(block, flag::BUSY)
            && self.cache.pins(block) == 0
            && !self.writeback.lbas_in_flight.contains(lba)
            && !self.waits_for_commit(block)
            && self.ordered_may_write_back(block);
        ready.then_some(block)
    }

    /// A block whose mapping is not durable yet while an older durable entry
    /// of its LBA is: a restart would pick that older entry (clean: it would
    /// claim to match a backing device that now holds newer data; dirty: its
    /// restart write-back would take the backing device back in time), so
    /// the block is written back only after a commit records it.
    fn waits_for_commit(&self, block: u32) -> bool {
        !self.cache.has(block, flag::COMMITTED) && self.cache.has_superseded_entries(self.cache.lba(block))
    }

    /// `waits_for_commit`, asking for that commit when it does.
    fn held_for_commit(&mut self, block: u32) -> bool {
        let held = self.waits_for_commit(block);
        if held {
            self.commit.request();
        }
        held
    }

    /// Starts writing back `lba`'s current block, with the dirty blocks that
    /// follow it (and, in its stripe, the ready ones just before it), for
    /// `pass`; false if the block cannot go yet (busy, or waiting for a
    /// commit), for the caller to try again later.
    fn start_writeback(&mut self, lba: u32, pass: Option<Pass>) -> bool {
        let dirty = self.cache.lookup(lba).is_some_and(|b| self.cache.has(b, flag::DIRTY));
        if !dirty {
            // Already clean (or gone): nothing older than its current value is dirty.
            self.starvation_over(lba);
            self.writeback_resolved(pass, lba, true);
            return true;
        }
        let Some(mut block) = self.writeback_ready(lba) else {
            if let Some(current) = self.cache.lookup(lba) {
                if self.held_for_commit(current) && pass.is_some() {
                    self.pass_waits_for_commit(lba);
                }
            }
            return false;
        };
        // Start the run at the first of the ready blocks just before this
        // one, in its stripe.
        let mut first = lba;
        while first > 0 && lba - first < self.writeback.run_blocks_max - 1 && !self.writeback.stripe_starts_at(first) {
            let Some(previous) = self.writeback_ready(first - 1) else { break };
            first -= 1;
            block = previous;
        }
        self.start_writeback_run(block, (pass, lba), true);
        true
    }

    /// Writes back `first` (a current block, or a block retained for its
    /// epoch) and, if `extend`, the ready dirty blocks of the LBAs after it;
    /// `counted` is the (pass, LBA) of the queued entry that started it.
    fn start_writeback_run(&mut self, first: u32, counted: (Option<Pass>, u32), extend: bool) {
        let lba = self.cache.lba(first);
        let extent = self.writeback.extents_free.pop().expect("no free extent");
        let last_lba = (self.blocks_count() - 1).min(u32::MAX as u64 - 1) as u32;
        let mut blocks = std::mem::take(&mut self.writeback.extents[extent as usize].blocks);
        blocks.clear();
        blocks.push(first);
        self.begin_writeback(first, counted);
        let mut next = lba;
        while extend && next < last_lba && blocks.len() < self.writeback.run_blocks_max as usize {
            next += 1;
            if self.writeback.stripe_starts_at(next) {
                break;
            }
            let Some(block) = self.writeback_ready(next) else { break };
            blocks.push(block);
            self.begin_writeback(block, counted);
        }
        let bs = self.config.block_size as u64;
        let base = extent * self.writeback.run_blocks_max * bs as u32;
        for (index, &block) in blocks.iter().enumerate() {
            let offset = self.cache_layout.block_offset(block as u64);
            let buffer = IoBuffer::Engine { region: self.regions.staging, offset_bytes: base + index as u32 * bs as u32 };
            self.submit(Op::WritebackRead { extent }, DeviceRole::Cache, IoKind::Read, offset, bs, buffer);
        }
        let e = &mut self.writeback.extents[extent as usize];
        e.reads_pending = blocks.len() as u32;
        e.blocks = blocks;
        e.lba_first = lba;
        e.failed = false;
    }

    /// `block` joins a run started by the entry `counted` (pass, LBA): it
    /// is pinned and its LBA in flight, and its write-back counts for the
    /// entry's pass or, if it is another current block, for the pass of
    /// its LBA's queued entry, which the run takes over. Left queued, that
    /// entry found its LBA in flight whenever it was tried, while a hot
    /// block's runs kept starting from a neighbour's entry (torture seed
    /// 1759, wb-flush).
    fn begin_writeback(&mut self, block: u32, (pass, lba): (Option<Pass>, u32)) {
        let block_lba = self.cache.lba(block);
        let pass = if block_lba == lba && pass.is_some() {
            pass
        } else if self.cache.lookup(block_lba) == Some(block) {
            self.take_queued_pass(block_lba)
        } else {
            // A block retained for its epoch: not the value a pass waits for.
            None
        };
        self.cache.pin(block);
        if self.cache.lookup(block_lba) == Some(block) {
            self.starvation_over(block_lba);
        }
        self.writeback.lbas_in_flight.insert_writeback(block_lba);
        self.writeback.in_flight_passes.insert(block_lba, WritebackInFlight { block, pass });
    }

    /// `block`'s write-back ended (done or failed): its LBA leaves those in
    /// flight. Returns the pass it counted for.
    fn end_writeback(&mut self, block: u32) -> Option<Pass> {
        let lba = self.cache.lba(block);
        self.writeback.lbas_in_flight.remove_writeback(lba);
        match self.writeback.in_flight_passes.remove(&lba) {
            Some(in_flight) if in_flight.block == block => in_flight.pass,
            other => panic!("write-back of block {block} (lba {lba}) ended, in flight: {other:?}"),
        }
    }

    /// Frees an extent; its blocks stay dirty. A waiting flush learns of the error.
    fn writeback_failed(&mut self, extent: u32) {
        self.stats.writeback_errors += 1;
        let blocks = std::mem::take(&mut self.writeback.extents[extent as usize].blocks);
        for &block in &blocks {
            let lba = self.cache.lba(block);
            let pass = self.end_writeback(block);
            self.cache.unpin(block);
            self.writeback_resolved(pass, lba, false);
        }
        self.writeback.extents[extent as usize].blocks = blocks;
        self.writeback.extents_free.push(extent);
    }

    pub(super) fn writeback_read_done(&mut self, extent: u32, status: IoStatus) {
        if status == IoStatus::DeviceLost {
            return self.fail(FailReason::new(FailKind::DeviceLost, "cache device lost"));
        }
        let e = &mut self.writeback.extents[extent as usize];
        assert!(e.reads_pending > 0, "write-back read done for extent {extent} with none pending");
        e.reads_pending -= 1;
        e.failed |= status != IoStatus::Ok;
        if e.reads_pending > 0 {
            return;
        }
        if e.failed {
            return self.writeback_failed(extent);
        }
        let bs = self.config.block_size as u64;
        let len = e.blocks.len() as u64 * bs;
        let lba = e.lba_first as u64;
        let base = extent * self.writeback.run_blocks_max * bs as u32;
        let buffer = IoBuffer::Engine { region: self.regions.staging, offset_bytes: base };
        self.submit(Op::WritebackWrite { extent }, DeviceRole::Backing, IoKind::Write, lba * bs, len, buffer);
    }

    pub(super) fn writeback_write_done(&mut self, extent: u32, status: IoStatus) {
        if status != IoStatus::Ok {
            return self.writeback_failed(extent);
        }
        self.writeback.pacer.writeback_done();
        let blocks = std::mem::take(&mut self.writeback.extents[extent as usize].blocks);
        self.writeback.extents_free.push(extent);
        self.stats.writebacks += blocks.len() as u64;
        for &block in &blocks {
            if self.mutation() == Mutation::RevokeBeforeBackingFlush {
                self.finish_writeback(block);
                continue;
            }
            let ticket = self.writeback.backing.request(self.config.backing_has_flush);
            self.writeback.await_backing_flush(block, ticket);
        }
        self.writeback.extents[extent as usize].blocks = blocks;
        if !self.config.backing_has_flush {
            self.finish_durable_writebacks();
        }
    }

    /// Write-backs whose backing FLUSH generation completed become clean.
    pub(super) fn finish_durable_writebacks(&mut self) {
        while let Some(&(block, ticket)) = self.writeback.awaiting_flush.front() {
            if self.writeback.backing.completed < ticket {
                break;
            }
            self.writeback.awaiting_flush.pop_front();
            if self.writeback.backing.failed_for(ticket) {
                self.stats.writeback_errors += 1;
                let lba = self.cache.lba(block);
                let pass = self.end_writeback(block);
                self.cache.unpin(block);
                self.writeback_resolved(pass, lba, false);
                continue;
            }
            self.finish_writeback(block);
        }
    }

    /// The backing device durably holds `block`'s data.
    fn finish_writeback(&mut self, block: u32) {
        let current = self.cache.state(block) == BlockState::Mapped && self.cache.has(block, flag::DIRTY);
        let lba = self.cache.lba(block);
        let pass = self.end_writeback(block);
        self.ordered_written_back(block, current);
        if current && !self.clean_block(block) {
            // Stays pinned while it waits, so it is not written back again.
            let loc = self.cache.log_loc(block);
            if loc != LOC_NONE {
                let sequence = self.log.loc_sequence(loc);
                if let (Some(slot), Some(buffer)) = (self.log.open_slot_of(loc), self.log.open_buffer) {
                    let region = self.log.buffers[buffer].region;
                    self.log.drop_in_open(self.regions.all[region as usize].as_mut_slice(), slot);
                }
                self.log.kill(loc, None);
                self.cache.set_log_loc(block, LOC_NONE);
                self.writeback.revokes.owe(lba, sequence, self.log.durable_head_sequence);
            }
            self.cache.set_logged(block, false);
            let sequence = self.writeback.revokes.debt(lba).unwrap_or(0);
            self.writeback.revokes.wait(block, sequence);
        } else {
            self.cache.unpin(block);
        }
        self.writeback_resolved(pass, lba, true);
    }
}

#[cfg(test)]
mod tests {
    use super::{free_blocks_low_watermark, over_from};

    /// `over_from` is the two tests it replaces, at every dirty count.
    #[test]
    fn over_from_is_over_the_threshold_or_short_of_clean_blocks() {
        for blocks in [1u32, 7, 8, 15, 16, 17, 100, 511, 512, 513, 4096, 65_536, 262_144] {
            for percent in [1u8, 29, 30, 50, 97, 99, 100] {
                let from = over_from(blocks, percent);
                // Both ends of a large cache, and around the limit.
                let ends = (0..=blocks.min(2500)).chain(blocks.saturating_sub(2500)..=blocks);
                for dirty in ends.chain(from.saturating_sub(3)..=(from + 3).min(blocks)) {
                    let over_threshold = dirty as u64 > blocks as u64 * percent as u64 / 100;
                    let clean_short = blocks - dirty < 2 * free_blocks_low_watermark(blocks);
                    assert_eq!(dirty >= from, over_threshold || clean_short, "{blocks} blocks, {percent} %, {dirty} dirty");
                }
            }
        }
    }
}
