//! Replay after the loss of the cache device: copy every block that is live
//! at the last barrier from the log to the backing device, flush the backing
//! device, then re-initialise the log so the replayed segments are never
//! replayed again.
//!
//! The log is re-initialised only after the backing device holds the data
//! durably (docs/design.md §2, invariant 4): until then the log stays the only
//! copy and a failed replay can simply be run again.
//!
//! (Its last 280 lines are tests.)

use super::scan::ScannedLog;
use crate::config::LogLayout;
use crate::format::{LogSuperblock, LBA_NONE, UNIT_BYTES};
use crate::io::{DeviceIo, DeviceRole, IoAllocator, IoBuffer, IoId, IoKind, IoMachine, IoRegion, IoStatus, Nanos};
use std::collections::{HashMap, VecDeque};
use std::fmt;

/// Runs being copied at once; with `REPLAY_RUN_BYTES`, bounds the staging
/// memory.
pub const REPLAY_PARALLELISM: usize = 16;
/// A run is live blocks of one segment within this many bytes (at least a
/// block), read from the log in one command that takes what lies between
/// them too (part headers, superseded slots), and what lies between the
/// previous run's read and it (a segment's header block), and written back
/// in one command per stretch of adjacent LBAs in adjacent slots. On a
/// rotating log a skipped block costs a revolution, far more than reading
/// it: runs of adjacent slots alone read a log of many small parts at ~24 MiB/s.
pub const REPLAY_RUN_BYTES: usize = 128 << 10;
/// Tries per backing write or flush before a replay gives up.
pub const BACKING_ATTEMPTS: u32 = 8;

const REGION_STAGING: u32 = 0;
const REGION_SUPERBLOCKS: u32 = 1;

/// A block to replay: where its newest live copy sits in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveBlock {
    pub lba: u64,
    pub segment_index: u32,
    /// Block of the segment holding the data (after its part's header).
    pub slot: u32,
    pub sequence: u64,
    /// The mirror whose copy of the part the scan found valid.
    pub mirror: u8,
}

/// What a replay will do, computed from the scan alone (also the dry run).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayPlan {
    /// In log order, so the log mirrors are read sequentially.
    pub blocks: Vec<LiveBlock>,
    /// The first sequence replayed: the newest head a part recorded (0:
    /// none recorded, every part from the superblock's head on).
    pub start_sequence: u64,
    /// Parts from `start_sequence` up to and including the last barrier.
    pub segments_replayed: u64,
    /// Parts before `start_sequence`: passed by the engine, left out.
    pub segments_before_head: u64,
    /// Parts after the last barrier, dropped as never covered by a flush.
    pub segments_after_barrier: u64,
    /// Revoke records in those parts.
    pub revokes_applied: u64,
    /// Sequence of the segment holding the last replayed (barrier) part.
    pub last_sequence: Option<u64>,
}

/// Final state per LBA over the parts the replay takes (`ReplaySpan`).
/// Within a part the revokes come first — they cancel entries of earlier
/// parts only — then the slots, later slots replacing earlier ones.
pub fn plan_replay(scanned: &ScannedLog) -> ReplayPlan {
    let span = ReplaySpan::of(scanned);
    let replayed = &scanned.segments[span.first..span.end];
    let mut live: HashMap<u64, LiveBlock> = HashMap::new();
    let mut revokes_applied = 0;
    let header_blocks = scanned.superblock.segment_layout().map_or(1, |layout| layout.header_blocks);
    for segment in replayed {
        for lba in &segment.revokes {
            live.remove(lba);
            revokes_applied += 1;
        }
        for (slot, &lba) in segment.lbas.iter().enumerate() {
            if lba == LBA_NONE {
                continue;
            }
            let block = LiveBlock {
                lba,
                segment_index: segment.segment_index,
                slot: segment.first_block + header_blocks + slot as u32,
                sequence: segment.sequence,
                mirror: segment.mirror,
            };
            live.insert(lba, block);
        }
    }
    let mut blocks: Vec<LiveBlock> = live.into_values().collect();
    blocks.sort_by_key(|block| (block.sequence, block.slot));
    ReplayPlan {
        blocks,
        start_sequence: span.start_sequence,
        segments_replayed: replayed.len() as u64,
        segments_before_head: span.first as u64,
        segments_after_barrier: (scanned.segments.len() - span.end) as u64,
        revokes_applied,
        last_sequence: replayed.last().map(|segment| segment.sequence),
    }
}

/// The parts of a scanned run a replay takes, `segments[first..end]`: from
/// the newest head a part recorded up to and including the last barrier.
/// The engine that sealed that part had passed every segment before it
/// (each entry there revoked, or superseded by one at or before a barrier
/// durable by then, which the run holds); parts after the barrier were
/// never covered by a flush.
pub(super) struct ReplaySpan {
    pub start_sequence: u64,
    pub first: usize,
    pub end: usize,
}

impl ReplaySpan {
    pub fn of(scanned: &ScannedLog) -> ReplaySpan {
        let start_sequence = recorded_head(scanned);
        let end = scanned.last_barrier.map_or(0, |last| last + 1);
        // The run is in log order, so the parts before the head come first.
        let first = scanned.segments[..end].partition_point(|segment| segment.sequence < start_sequence);
        ReplaySpan { start_sequence, first, end }
    }
}

/// The newest head the parts of the run recorded as they were sealed (0:
/// none recorded, as in a log of version 5).
pub fn recorded_head(scanned: &ScannedLog) -> u64 {
    scanned.segments.iter().map(|segment| segment.head_sequence).max().unwrap_or(0)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayReport {
    /// The instance that wrote the log (a takeover names it in the log it
    /// formats next: `LogSuperblock::previous_instance`).
    pub instance_id: u64,
    pub blocks_replayed: u64,
    pub segments_replayed: u64,
    pub revokes_applied: u64,
    /// Sequence of the last replayed (barrier) segment; None if there was none.
    pub last_sequence: Option<u64>,
    /// Valid segments after the last barrier, dropped as never covered by a flush.
    pub segments_after_barrier: u64,
    /// Valid segments before the newest head a part recorded, left out:
    /// the engine had passed them (`ReplayPlan::start_sequence`).
    pub segments_before_head: u64,
    /// Blocks read again from another mirror.
    pub read_retries: u64,
    /// Backing writes and flushes tried again after a transient error.
    pub write_retries: u64,
    pub new_head_segment: u32,
    pub new_head_sequence: u64,
    pub new_write_seq: u64,
    /// Mirrors whose new superblock was written; the others failed.
    pub mirrors_reinitialised: u32,
    /// Mirrors the newest superblock did not count in sync: nothing was
    /// read from them (`ScannedLog::stale_mirrors`).
    pub stale_mirrors: Vec<u8>,
    /// No in-sync mirror was at hand: what was replayed came from stale
    /// mirrors and may lack writes made after they fell behind.
    pub in_sync_unavailable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplayError {
    /// The log names a block beyond the backing device it was made for.
    LbaOutOfRange {
        lba: u64,
        backing_blocks: u64,
    },
    /// No mirror could return this block.
    LogUnreadable {
        lba: u64,
    },
    BackingWrite {
        lba: u64,
    },
    BackingFlush,
    /// The backing device has the data, but no mirror took the new
    /// superblock; replaying again is harmless.
    Reinit,
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::LbaOutOfRange { lba, backing_blocks } => {
                write!(f, "log entry for block {lba} beyond the backing device of {backing_blocks} blocks")
            }
            ReplayError::LogUnreadable { lba } => write!(f, "block {lba} could not be read from any log mirror"),
            ReplayError::BackingWrite { lba } => write!(f, "writing block {lba} to the backing device failed"),
            ReplayError::BackingFlush => write!(f, "flushing the backing device failed"),
            ReplayError::Reinit => write!(f, "no log mirror accepted the new superblock"),
        }
    }
}

impl std::error::Error for ReplayError {}

#[derive(Clone, Copy, Debug)]
enum Pending {
    /// Blocks `first..first + count` of the plan, a run.
    LogRead { staging_slot: usize, first: usize, count: usize, attempt: usize },
    /// Blocks `first + skip..first + skip + count`: adjacent LBAs of a run.
    BackingWrite { staging_slot: usize, first: usize, skip: usize, count: usize, attempt: u32 },
    Flush,
    SuperblockWrite,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Copying,
    Flushing,
    Reinitialising,
    Done,
}

pub struct Replay {
    layout: LogLayout,
    mirrors: Vec<u8>,
    /// Mirrors no block is read from: the scan found them stale.
    stale_mirrors: Vec<u8>,
    backing_has_flush: bool,
    superblock: LogSuperblock,
    superblock_units: Vec<Option<u64>>,
    plan: ReplayPlan,
    report: ReplayReport,
    next_block: usize,
    /// Blocks a run (a staging slot) holds at most.
    run_blocks: usize,
    staging: Box<dyn IoRegion>,
    free_staging_slots: Vec<usize>,
    /// Backing writes of each staging slot's run still in flight.
    writes_left: Vec<usize>,
    /// Blocks each staging slot's read takes before its run's first live
    /// block: the gap after the read before it.
    leads: Vec<u32>,
    /// Where the last read issued ended: (mirror, device byte offset).
    last_read_end: Option<(u8, u64)>,
    superblock_memory: Box<dyn IoRegion>,
    queued: VecDeque<(DeviceIo, Pending)>,
    in_flight: HashMap<IoId, Pending>,
    next_io_id: IoId,
    phase: Phase,
    flush_attempts: u32,
    failure: Option<ReplayError>,
    result: Option<Result<ReplayReport, ReplayError>>,
}

impl Replay {
    /// `mirrors` are the log mirror indices to read from and re-initialise.
    pub fn new(
        layout: LogLayout,
        scanned: ScannedLog,
        mirrors: Vec<u8>,
        backing_has_flush: bool,
        alloc: &mut dyn IoAllocator,
    ) -> Replay {
        let plan = plan_replay(&scanned);
        let report = initial_report(&layout, &scanned, &plan);
        let block_size = layout.segment.block_size as usize;
        let run_blocks = (REPLAY_RUN_BYTES / block_size).max(1);
        let mut replay = Replay {
            staging: alloc.alloc(REPLAY_PARALLELISM * run_blocks * block_size),
            run_blocks,
            writes_left: vec![0; REPLAY_PARALLELISM],
            leads: vec![0; REPLAY_PARALLELISM],
            last_read_end: None,
            superblock_memory: alloc.alloc(mirrors.len().max(1) * UNIT_BYTES),
            free_staging_slots: (0..REPLAY_PARALLELISM).rev().collect(),
            layout,
            mirrors,
            stale_mirrors: if scanned.in_sync_unavailable { Vec::new() } else { scanned.stale_mirrors },
            backing_has_flush,
            superblock: scanned.superblock,
            superblock_units: scanned.superblock_units,
            plan,
            report,
            next_block: 0,
            queued: VecDeque::new(),
            in_flight: HashMap::new(),
            next_io_id: 0,
            phase: Phase::Copying,
            flush_attempts: 0,
            failure: None,
            result: None,
        };
        if let Some(lba) = replay.plan.blocks.iter().map(|b| b.lba).find(|&lba| lba >= replay.superblock.backing_blocks)
        {
            replay.fail(ReplayError::LbaOutOfRange { lba, backing_blocks: replay.superblock.backing_blocks });
        }
        replay.advance();
        replay
    }

    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    pub fn result(&self) -> Option<&Result<ReplayReport, ReplayError>> {
        self.result.as_ref()
    }

    pub fn plan(&self) -> &ReplayPlan {
        &self.plan
    }

    /// Blocks written to the backing device so far (for progress reports).
    pub fn blocks_replayed(&self) -> u64 {
        self.report.blocks_replayed
    }

    pub fn blocks_total(&self) -> u64 {
        self.plan.blocks.len() as u64
    }

    /// The report so far: the plan's counts, blocks replayed up to now.
    pub fn report(&self) -> &ReplayReport {
        &self.report
    }

    fn queue(
        &mut self,
        device: DeviceRole,
        kind: IoKind,
        offset_bytes: u64,
        len_bytes: u64,
        buffer: IoBuffer,
        pending: Pending,
    ) {
        let io = DeviceIo { id: self.next_io_id, device, kind, offset_bytes, len_bytes, buffer };
        self.next_io_id += 1;
        self.queued.push_back((io, pending));
    }

    /// Where plan block `first + skip` of the run in `staging_slot` sits:
    /// as far from the slot's start as its log slot from the read's first.
    fn staging_buffer(&self, staging_slot: usize, first: usize, skip: usize) -> IoBuffer {
        let from_first = self.plan.blocks[first + skip].slot - self.plan.blocks[first].slot;
        let blocks_in = (self.leads[staging_slot] + from_first) as usize;
        let offset_bytes = ((staging_slot * self.run_blocks + blocks_in) * self.layout.segment.block_size as usize) as u32;
        IoBuffer::Engine { region: REGION_STAGING, offset_bytes }
    }

    /// Device offset of `block`'s slot on any mirror.
    fn log_offset(&self, block: &LiveBlock) -> u64 {
        self.layout.segment_offset(block.segment_index) + block.slot as u64 * self.layout.segment.block_size as u64
    }

    /// Blocks between the last read and the run starting at `head`, when the
    /// run is read from the same mirror a little after it (at most half a
    /// run): its read starts where that one ended, so the disk streams on.
    fn lead_for(&self, head: &LiveBlock) -> u32 {
        let Some((mirror, end)) = self.last_read_end else { return 0 };
        let block_size = self.layout.segment.block_size as u64;
        let gap_blocks = self.log_offset(head).checked_sub(end).map_or(u64::MAX, |gap| gap / block_size);
        if mirror == head.mirror && gap_blocks <= self.run_blocks as u64 / 2 {
            gap_blocks as u32
        } else {
            0
        }
    }

    /// Plan blocks of the run starting at plan block `first`, its read
    /// taking `lead` blocks before it: those after it in the plan's log
    /// order in the same segment, read from the same mirror, that fit in
    /// `run_blocks` with the lead.
    fn run_len(&self, first: usize, lead: u32) -> usize {
        let blocks = &self.plan.blocks;
        let head = blocks[first];
        let follows = |b: &LiveBlock| {
            (b.segment_index, b.sequence, b.mirror) == (head.segment_index, head.sequence, head.mirror)
                && b.slot + lead < head.slot + self.run_blocks as u32
        };
        1 + blocks[first + 1..].iter().take_while(|b| follows(b)).count()
    }

    /// Log blocks a run's read covers: from its first slot to its last.
    fn run_span(&self, first: usize, count: usize) -> u64 {
        (self.plan.blocks[first + count - 1].slot - self.plan.blocks[first].slot) as u64 + 1
    }

    /// The mirror to read `block` from on attempt `attempt`: the one the scan
    /// found valid first, then the others in order.
    fn mirror_for_attempt(&self, block: &LiveBlock, attempt: usize) -> Option<u8> {
        // Never a stale mirror: its block at that place may be another lap's.
        let others = self.mirrors.iter().copied().filter(|&m| m != block.mirror && !self.stale_mirrors.contains(&m));
        std::iter::once(block.mirror).chain(others).nth(attempt)
    }

    fn queue_log_read(&mut self, staging_slot: usize, first: usize, count: usize, attempt: usize) -> bool {
        let live = self.plan.blocks[first];
        let Some(mirror) = self.mirror_for_attempt(&live, attempt) else { return false };
        let block_size = self.layout.segment.block_size as u64;
        let lead_bytes = self.leads[staging_slot] as u64 * block_size;
        let offset_bytes = self.log_offset(&live) - lead_bytes;
        let buffer = IoBuffer::Engine { region: REGION_STAGING, offset_bytes: self.staging_slot_offset(staging_slot) };
        let pending = Pending::LogRead { staging_slot, first, count, attempt };
        let len_bytes = lead_bytes + self.run_span(first, count) * block_size;
        self.last_read_end = Some((mirror, offset_bytes + len_bytes));
        self.queue(DeviceRole::Log(mirror), IoKind::Read, offset_bytes, len_bytes, buffer, pending);
        true
    }

    fn staging_slot_offset(&self, staging_slot: usize) -> u32 {
        (staging_slot * self.run_blocks * self.layout.segment.block_size as usize) as u32
    }

    /// The run read into `staging_slot`, one write per stretch of adjacent
    /// LBAs in adjacent slots.
    fn queue_backing_writes(&mut self, staging_slot: usize, first: usize, count: usize) {
        let mut skip = 0;
        while skip < count {
            let start = self.plan.blocks[first + skip];
            let adjacent = |n: usize| {
                let block = &self.plan.blocks[first + skip + n];
                block.lba == start.lba + n as u64 && block.slot == start.slot + n as u32
            };
            let stretch = (1..count - skip).find(|&n| !adjacent(n)).unwrap_or(count - skip);
            self.writes_left[staging_slot] += 1;
            self.queue_backing_write(staging_slot, first, skip, stretch, 0);
            skip += stretch;
        }
    }

    fn queue_backing_write(&mut self, staging_slot: usize, first: usize, skip: usize, count: usize, attempt: u32) {
        let block_size = self.layout.segment.block_size as u64;
        let offset_bytes = self.plan.blocks[first + skip].lba * block_size;
        let buffer = self.staging_buffer(staging_slot, first, skip);
        let pending = Pending::BackingWrite { staging_slot, first, skip, count, attempt };
        self.queue(DeviceRole::Backing, IoKind::Write, offset_bytes, count as u64 * block_size, buffer, pending);
    }

    /// Stops issuing work; the error is reported once nothing is in flight.
    fn fail(&mut self, error: ReplayError) {
        self.queued.clear();
        self.failure.get_or_insert(error);
    }

    fn handle_log_read(&mut self, staging_slot: usize, first: usize, count: usize, attempt: usize, status: IoStatus) {
        if status == IoStatus::Ok {
            return self.queue_backing_writes(staging_slot, first, count);
        }
        if self.queue_log_read(staging_slot, first, count, attempt + 1) {
            self.report.read_retries += count as u64;
            return;
        }
        self.free_staging_slots.push(staging_slot);
        self.fail(ReplayError::LogUnreadable { lba: self.plan.blocks[first].lba });
    }

    /// A transient backing error is retried a few times (the data is still
    /// in the staging slot); a persistent one fails the replay. The slot is
    /// free once every write of its run is done.
    fn handle_backing_write(&mut self, staging_slot: usize, first: usize, skip: usize, count: usize, attempt: u32, status: IoStatus) {
        if status == IoStatus::Error && attempt + 1 < BACKING_ATTEMPTS && self.failure.is_none() {
            self.report.write_retries += 1;
            return self.queue_backing_write(staging_slot, first, skip, count, attempt + 1);
        }
        self.writes_left[staging_slot] -= 1;
        if self.writes_left[staging_slot] == 0 {
            self.free_staging_slots.push(staging_slot);
        }
        if status == IoStatus::Ok {
            self.report.blocks_replayed += count as u64;
        } else {
            self.fail(ReplayError::BackingWrite { lba: self.plan.blocks[first + skip].lba });
        }
    }

    /// Moves to the next phase when the current one has drained.
    fn advance(&mut self) {
        if self.phase == Phase::Done || !self.in_flight.is_empty() || !self.queued.is_empty() {
            return self.start_copies();
        }
        if let Some(error) = self.failure.clone() {
            return self.finish(Err(error));
        }
        match self.phase {
            Phase::Copying if self.next_block < self.plan.blocks.len() => self.start_copies(),
            Phase::Copying if self.backing_has_flush => self.start_flush(),
            Phase::Copying | Phase::Flushing => self.start_reinit(),
            Phase::Reinitialising if self.report.mirrors_reinitialised == 0 => self.finish(Err(ReplayError::Reinit)),
            Phase::Reinitialising => self.finish(Ok(self.report.clone())),
            Phase::Done => {}
        }
    }

    /// Fills every free staging slot with the next run's log read.
    fn start_copies(&mut self) {
        while self.phase == Phase::Copying && self.failure.is_none() && self.next_block < self.plan.blocks.len() {
            let Some(staging_slot) = self.free_staging_slots.pop() else { return };
            let lead = self.lead_for(&self.plan.blocks[self.next_block]);
            self.leads[staging_slot] = lead;
            let count = self.run_len(self.next_block, lead);
            let started = self.queue_log_read(staging_slot, self.next_block, count, 0);
            assert!(started, "attempt 0 always has the scanned mirror");
            self.next_block += count;
        }
    }

    fn start_flush(&mut self) {
        self.phase = Phase::Flushing;
        self.queue(DeviceRole::Backing, IoKind::Flush, 0, 0, IoBuffer::None, Pending::Flush);
    }

    /// Writes the new superblock on every mirror, into the unit that does not
    /// hold the mirror's newest copy, so a torn write leaves that copy intact.
    fn start_reinit(&mut self) {
        self.phase = Phase::Reinitialising;
        for position in 0..self.mirrors.len() {
            let mirror = self.mirrors[position];
            let superblock = self.new_superblock(mirror);
            let unit_memory = &mut self.superblock_memory.as_mut_slice()[position * UNIT_BYTES..][..UNIT_BYTES];
            superblock.encode(unit_memory);
            let newest_unit = self.superblock_units.get(position).copied().flatten();
            let unit = newest_unit.map_or(superblock.write_seq % 2, |newest| 1 - newest);
            let buffer = IoBuffer::Engine { region: REGION_SUPERBLOCKS, offset_bytes: (position * UNIT_BYTES) as u32 };
            let offset_bytes = unit * UNIT_BYTES as u64;
            self.queue(
                DeviceRole::Log(mirror),
                IoKind::Write,
                offset_bytes,
                UNIT_BYTES as u64,
                buffer,
                Pending::SuperblockWrite,
            );
        }
    }

    fn new_superblock(&self, mirror: u8) -> LogSuperblock {
        LogSuperblock {
            write_seq: self.report.new_write_seq,
            head_segment: self.report.new_head_segment,
            head_sequence: self.report.new_head_sequence,
            mirrors_count: self.superblock.mirrors_count.max(mirror.saturating_add(1)),
            mirror_index: mirror,
            // The new log is empty: every mirror that takes this superblock
            // holds all of it.
            in_sync_mask: self.mirrors.iter().filter(|&&m| m < crate::format::LOG_MIRRORS_MAX).fold(0, |mask, &m| mask | 1 << m),
            // What the cache of this instance holds is older than the
            // backing device now: it must not start warm (the fence of
            // docs/format.md, "A replayed log").
            replayed: true,
            ..self.superblock.clone()
        }
    }

    fn finish(&mut self, result: Result<ReplayReport, ReplayError>) {
        self.phase = Phase::Done;
        self.result = Some(result);
    }
}

/// Report fields known before any I/O: the plan's counts and the new head.
fn initial_report(layout: &LogLayout, scanned: &ScannedLog, plan: &ReplayPlan) -> ReplayReport {
    let superblock = &scanned.superblock;
    // The head moves past every scanned segment, replayed or not, so that
    // none of them is ever replayed again.
    let (new_head_segment, new_head_sequence) = match scanned.segments.last() {
        Some(last) => ((last.segment_index + 1) % layout.segments_count, last.sequence + 1),
        None => (superblock.head_segment, superblock.head_sequence),
    };
    ReplayReport {
        instance_id: superblock.instance_id,
        blocks_replayed: 0,
        segments_replayed: plan.segments_replayed,
        revokes_applied: plan.revokes_applied,
        last_sequence: plan.last_sequence,
        segments_after_barrier: plan.segments_after_barrier,
        segments_before_head: plan.segments_before_head,
        read_retries: 0,
        write_retries: 0,
        new_head_segment,
        new_head_sequence,
        new_write_seq: superblock.write_seq + 1,
        mirrors_reinitialised: 0,
        stale_mirrors: scanned.stale_mirrors.clone(),
        in_sync_unavailable: scanned.in_sync_unavailable,
    }
}

impl IoMachine for Replay {
    fn poll_io(&mut self) -> Option<DeviceIo> {
        let (io, pending) = self.queued.pop_front()?;
        self.in_flight.insert(io.id, pending);
        Some(io)
    }

    fn handle_io_completion(&mut self, _now: Nanos, id: IoId, status: IoStatus) {
        let pending = self.in_flight.remove(&id).expect("completion for an unknown command");
        match pending {
            Pending::LogRead { staging_slot, first, count, attempt } => {
                self.handle_log_read(staging_slot, first, count, attempt, status)
            }
            Pending::BackingWrite { staging_slot, first, skip, count, attempt } => {
                self.handle_backing_write(staging_slot, first, skip, count, attempt, status)
            }
            Pending::Flush if status == IoStatus::Error && self.flush_attempts + 1 < BACKING_ATTEMPTS => {
                self.flush_attempts += 1;
                self.report.write_retries += 1;
                self.queue(DeviceRole::Backing, IoKind::Flush, 0, 0, IoBuffer::None, Pending::Flush);
            }
            Pending::Flush if status != IoStatus::Ok => self.fail(ReplayError::BackingFlush),
            Pending::Flush => {}
            Pending::SuperblockWrite if status == IoStatus::Ok => self.report.mirrors_reinitialised += 1,
            Pending::SuperblockWrite => {}
        }
        self.advance();
    }

    fn io_memory_mut(&mut self, region: u32) -> &mut [u8] {
        match region {
            REGION_STAGING => self.staging.as_mut_slice(),
            REGION_SUPERBLOCKS => self.superblock_memory.as_mut_slice(),
            _ => panic!("replay has no region {region}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_log::*;
    use super::*;
    use crate::driver::mem::{IoRecord, MemDevices};
    use proptest::prelude::*;

    const MIRRORS: [u8; 2] = [0, 1];

    fn backing(devices: &MemDevices) -> Vec<u8> {
        devices.device(DeviceRole::Backing).unwrap().to_vec()
    }

    fn recover(devices: &mut MemDevices, segments_count: u32) -> Result<ReplayReport, ReplayError> {
        let scanned = scan(devices, layout(segments_count), &MIRRORS).unwrap();
        replay(devices, layout(segments_count), scanned, &MIRRORS, true)
    }

    /// Overwrites, holes, revokes of earlier and of same-segment entries, and
    /// a barrier-less tail.
    fn mixed_run() -> Vec<SegmentSpec> {
        vec![
            spec(20, false, &[(1, 1), (2, 1), (3, 1), (1, 2)], &[]),
            spec(21, true, &[(4, 1), HOLE, (5, 1)], &[2, 6]),
            // Revokes 4 (earlier segment) and 7 (written in this very segment:
            // the revoke comes first, so the new entry stays live).
            spec(22, false, &[(7, 1), (3, 2)], &[4, 7]),
            spec(23, true, &[(8, 1)], &[]),
            // Past the last barrier: never covered by a flush.
            spec(24, false, &[(1, 3), (9, 1)], &[8]),
        ]
    }

    fn image_with(run: &[SegmentSpec], head_segment: u32, segments_count: u32) -> LogImage {
        let mut image = LogImage::new(layout(segments_count), MIRRORS.len());
        image.write_superblock(7, head_segment, run[0].sequence);
        for (position, segment) in run.iter().enumerate() {
            image.write_segment((head_segment + position as u32) % segments_count, segment);
        }
        image
    }

    #[test]
    fn replays_the_live_blocks_of_a_mixed_log() {
        let run = mixed_run();
        let mut devices = image_with(&run, 3, 6).into_devices();
        let report = recover(&mut devices, 6).unwrap();
        assert_eq!(backing(&devices), expected_backing(&run));
        // Live at the barrier: 1v2, 3v2, 5, 7, 8.
        assert_eq!(report.blocks_replayed, 5);
        assert_eq!((report.segments_replayed, report.segments_after_barrier), (4, 1));
        assert_eq!((report.revokes_applied, report.last_sequence), (4, Some(23)));
        assert_eq!((report.new_head_segment, report.new_head_sequence, report.new_write_seq), (2, 25, 8));
        assert_eq!(report.mirrors_reinitialised, 2);
    }

    /// A part recording a head past the run's first segment (its engine had
    /// passed it: both entries superseded before a barrier) starts the
    /// replay there, behind a superblock that still names that segment.
    #[test]
    fn starts_at_the_newest_head_a_part_recorded() {
        let run = vec![
            spec(30, false, &[(1, 1), (2, 1)], &[]),
            SegmentSpec { head_sequence: 30, ..spec(31, true, &[(1, 2), (2, 2)], &[]) },
            SegmentSpec { head_sequence: 31, ..spec(32, true, &[(3, 1)], &[]) },
        ];
        let mut devices = image_with(&run, 1, 6).into_devices();
        let scanned = scan(&mut devices, layout(6), &MIRRORS).unwrap();
        assert_eq!(scanned.superblock.head_sequence, 30);
        let plan = plan_replay(&scanned);
        assert_eq!((plan.start_sequence, plan.segments_replayed, plan.blocks.len()), (31, 2, 3));
        assert!(plan.blocks.iter().all(|block| block.sequence >= 31));
        let report = replay(&mut devices, layout(6), scanned, &MIRRORS, true).unwrap();
        assert_eq!((report.blocks_replayed, report.segments_replayed, report.segments_before_head), (3, 2, 1));
        assert_eq!(report.segments_after_barrier, 0);
        assert_eq!(backing(&devices), expected_backing(&run));
    }

    #[test]
    fn reinitialised_log_replays_nothing_again() {
        let run = mixed_run();
        let mut devices = image_with(&run, 3, 6).into_devices();
        recover(&mut devices, 6).unwrap();
        let rescanned = scan(&mut devices, layout(6), &MIRRORS).unwrap();
        assert!(rescanned.segments.is_empty());
        assert_eq!((rescanned.superblock.write_seq, rescanned.superblock.head_segment), (8, 2));
        // write_seq 7 lived in unit 1, so the new copy went to unit 0 and both stay valid.
        assert_eq!(rescanned.superblock_units, vec![Some(0), Some(0)]);
        let log = devices.device(DeviceRole::Log(1)).unwrap();
        assert_eq!(LogSuperblock::decode(&log[UNIT_BYTES..]).unwrap().write_seq, 7);
        assert_eq!(LogSuperblock::decode(log).unwrap().mirror_index, 1);
        devices.device_mut(DeviceRole::Backing).unwrap().fill(0);
        let again = replay(&mut devices, layout(6), rescanned, &MIRRORS, true).unwrap();
        assert_eq!(again.blocks_replayed, 0);
        assert!(backing(&devices).iter().all(|&b| b == 0));
    }

    #[test]
    fn flushes_the_backing_device_before_touching_the_log() {
        let mut devices = image_with(&mixed_run(), 0, 6).into_devices();
        let scanned = scan(&mut devices, layout(6), &MIRRORS).unwrap();
        let history_start = devices.history().len();
        replay(&mut devices, layout(6), scanned, &MIRRORS, true).unwrap();
        let history: Vec<IoRecord> = devices.history()[history_start..].to_vec();
        let is = |record: &IoRecord, device: DeviceRole, kind: IoKind| record.device == device && record.kind == kind;
        let flush = history.iter().position(|r| is(r, DeviceRole::Backing, IoKind::Flush)).unwrap();
        let last_backing_write = history.iter().rposition(|r| is(r, DeviceRole::Backing, IoKind::Write)).unwrap();
        let first_log_write = history.iter().position(|r| r.kind == IoKind::Write && r.device != DeviceRole::Backing);
        assert!(last_backing_write < flush && flush < first_log_write.unwrap());
        assert_eq!(history.iter().filter(|r| r.kind == IoKind::Flush).count(), 1);
    }

    #[test]
    fn without_backing_flush_no_flush_is_issued() {
        let mut devices = image_with(&mixed_run(), 0, 6).into_devices();
        let scanned = scan(&mut devices, layout(6), &MIRRORS).unwrap();
        replay(&mut devices, layout(6), scanned, &MIRRORS, false).unwrap();
        assert!(devices.history().iter().all(|r| r.kind != IoKind::Flush));
        assert_eq!(backing(&devices), expected_backing(&mixed_run()));
    }

    #[test]
    fn a_log_without_barrier_replays_nothing_but_is_reinitialised() {
        let run = vec![spec(5, false, &[(1, 1)], &[]), spec(6, false, &[(2, 1)], &[])];
        let mut devices = image_with(&run, 0, 6).into_devices();
        let report = recover(&mut devices, 6).unwrap();
        assert_eq!((report.blocks_replayed, report.segments_replayed, report.last_sequence), (0, 0, None));
        assert_eq!((report.new_head_segment, report.new_head_sequence), (2, 7));
        assert!(backing(&devices).iter().all(|&b| b == 0));
        assert!(scan(&mut devices, layout(6), &MIRRORS).unwrap().segments.is_empty());
    }

    #[test]
    fn a_backing_write_error_fails_and_leaves_the_log_alone() {
        let mut devices = image_with(&mixed_run(), 0, 6).into_devices();
        let logs_before: Vec<Vec<u8>> =
            MIRRORS.iter().map(|&m| devices.device(DeviceRole::Log(m)).unwrap().to_vec()).collect();
        devices.set_failing(DeviceRole::Backing, true);
        assert!(matches!(recover(&mut devices, 6), Err(ReplayError::BackingWrite { .. })));
        for (&mirror, before) in MIRRORS.iter().zip(&logs_before) {
            assert_eq!(devices.device(DeviceRole::Log(mirror)).unwrap(), &before[..]);
        }
        // The log still holds everything: a later attempt succeeds.
        devices.set_failing(DeviceRole::Backing, false);
        recover(&mut devices, 6).unwrap();
        assert_eq!(backing(&devices), expected_backing(&mixed_run()));
    }

    #[test]
    fn unreadable_blocks_come_from_the_other_mirror() {
        let mut devices = image_with(&mixed_run(), 0, 6).into_devices();
        let scanned = scan(&mut devices, layout(6), &MIRRORS).unwrap();
        devices.set_failing(DeviceRole::Log(0), true);
        let report = replay(&mut devices, layout(6), scanned, &MIRRORS, true).unwrap();
        assert_eq!(backing(&devices), expected_backing(&mixed_run()));
        assert_eq!(report.read_retries, 5);
        assert_eq!(report.mirrors_reinitialised, 1);
    }

    /// Mirror 1 is stale (the newest superblock, on mirror 0, leaves it
    /// out) and holds other data where mirror 0's part has its blocks: a
    /// block mirror 0 cannot return must not be taken from it.
    #[test]
    fn unreadable_blocks_never_come_from_a_stale_mirror() {
        let devices = || {
            let mut image = LogImage::new(layout(6), 2);
            image.write_superblock(3, 0, 100);
            let newest = LogSuperblock { in_sync_mask: 0b01, ..image.superblock(4, 0, 100, 0) };
            image.write_superblock_unit(0, 0, &newest);
            image.write_segment_on(0, 0, &spec(100, true, &[(2, 2)], &[]));
            image.write_segment_on(1, 0, &spec(100, true, &[(2, 9)], &[]));
            image.into_devices()
        };
        let mut readable = devices();
        let scanned = scan(&mut readable, layout(6), &MIRRORS).unwrap();
        assert_eq!(scanned.stale_mirrors, vec![1]);
        let mut devices = devices();
        let report = replay(&mut readable, layout(6), scanned.clone(), &MIRRORS, true).unwrap();
        assert_eq!(report.stale_mirrors, vec![1]);
        assert_eq!(backing(&readable), expected_backing(&[spec(100, true, &[(2, 2)], &[])]));
        devices.set_failing(DeviceRole::Log(0), true);
        let result = replay(&mut devices, layout(6), scanned, &MIRRORS, true);
        assert!(matches!(result, Err(ReplayError::LogUnreadable { lba: 2 })), "{result:?}");
    }

    #[test]
    fn fails_when_no_mirror_can_return_a_block_or_take_the_superblock() {
        let mut devices = image_with(&mixed_run(), 0, 6).into_devices();
        let scanned = scan(&mut devices, layout(6), &MIRRORS).unwrap();
        devices.set_failing(DeviceRole::Log(0), true);
        devices.set_failing(DeviceRole::Log(1), true);
        let result = replay(&mut devices, layout(6), scanned.clone(), &MIRRORS, true);
        assert!(matches!(result, Err(ReplayError::LogUnreadable { .. })));
        let no_barrier = ScannedLog { last_barrier: None, ..scanned };
        assert_eq!(replay(&mut devices, layout(6), no_barrier, &MIRRORS, true), Err(ReplayError::Reinit));
    }

    #[test]
    fn fails_on_a_flush_error() {
        struct FlushFails(MemDevices);
        impl crate::driver::SyncDevices for FlushFails {
            fn execute(&mut self, io: &DeviceIo, data: &mut [u8]) -> IoStatus {
                if io.kind == IoKind::Flush {
                    return IoStatus::Error;
                }
                self.0.execute(io, data)
            }
        }
        let mut devices = image_with(&mixed_run(), 0, 6).into_devices();
        let scanned = scan(&mut devices, layout(6), &MIRRORS).unwrap();
        let mut replay = Replay::new(layout(6), scanned, MIRRORS.to_vec(), true, &mut crate::io::HeapAllocator);
        let mut devices = FlushFails(devices);
        crate::driver::pump(&mut devices, &mut replay).unwrap();
        assert_eq!(replay.result(), Some(&Err(ReplayError::BackingFlush)));
        assert!(devices.0.history().iter().all(|r| r.kind != IoKind::Write || r.device == DeviceRole::Backing));
    }

    #[test]
    fn rejects_blocks_beyond_the_backing_device() {
        let run = vec![spec(1, true, &[(1, 1), (BACKING_BLOCKS, 1)], &[])];
        let mut devices = image_with(&run, 0, 6).into_devices();
        let expected = ReplayError::LbaOutOfRange { lba: BACKING_BLOCKS, backing_blocks: BACKING_BLOCKS };
        assert_eq!(recover(&mut devices, 6), Err(expected));
        assert!(backing(&devices).iter().all(|&b| b == 0));
    }

    #[test]
    fn more_blocks_than_staging_slots() {
        // 21 distinct blocks: more than REPLAY_PARALLELISM staging slots.
        let run: Vec<SegmentSpec> = (0..3u64)
            .map(|s| {
                let entries: Vec<(u64, u64)> = (0..7).map(|slot| ((s * 7 + slot) % BACKING_BLOCKS, s)).collect();
                spec(100 + s, s == 2, &entries, &[])
            })
            .collect();
        let mut devices = image_with(&run, 0, 6).into_devices();
        let report = recover(&mut devices, 6).unwrap();
        assert_eq!(report.blocks_replayed, 21);
        assert_eq!(backing(&devices), expected_backing(&run));
    }

    /// The live blocks of a segment are one log read, what lies between
    /// them (and between the read before and them) read too and left
    /// unwritten; each stretch of adjacent LBAs in adjacent slots is one
    /// backing write. A superseded entry or a hole ends a write, not the read.
    #[test]
    fn adjacent_blocks_are_read_and_written_in_runs() {
        let run = vec![
            spec(100, false, &[(1, 1), (2, 1), (3, 1), (8, 1), (9, 1), (4, 1), (6, 1)], &[]),
            spec(101, true, &[(14, 1), HOLE, (15, 1), (4, 2)], &[]),
        ];
        let mut devices = image_with(&run, 0, 6).into_devices();
        let scanned = scan(&mut devices, layout(6), &MIRRORS).unwrap();
        let history_start = devices.history().len();
        let report = replay(&mut devices, layout(6), scanned, &MIRRORS, true).unwrap();
        assert_eq!(backing(&devices), expected_backing(&run));
        assert_eq!(report.blocks_replayed, 9);
        let blocks = |kind, device| -> Vec<u64> {
            let records = devices.history()[history_start..].iter().filter(|r: &&IoRecord| r.kind == kind && r.device == device);
            records.map(|r| r.len_bytes / BLOCK_SIZE as u64).collect()
        };
        // Part 100: slots 0-6 (4, superseded by part 101, read and left);
        // part 101, in the next segment: from where that read ended, its
        // header block, then 14, the hole, 15 and 4.
        assert_eq!(blocks(IoKind::Read, DeviceRole::Log(0)), vec![7, 1 + 4]);
        let mut writes = blocks(IoKind::Write, DeviceRole::Backing);
        writes.sort();
        assert_eq!(writes, vec![1, 1, 1, 1, 2, 3], "1-3, 8-9, 6, 14, 15, 4");
    }

    /// A run reads at most `REPLAY_RUN_BYTES` (32 blocks here), and each
    /// block lands in the backing from its place in that read.
    #[test]
    fn a_run_ends_at_its_byte_limit_and_places_its_blocks_by_slot() {
        let segment = crate::format::SegmentLayout::new(64 * BLOCK_SIZE, BLOCK_SIZE).unwrap();
        let big = LogLayout { segment, segments_count: 4, segments_offset_bytes: 2 * UNIT_BYTES as u64 };
        assert_eq!(REPLAY_RUN_BYTES / BLOCK_SIZE as usize, 32);
        // Slots 0-23: LBAs 0-23; 24-35 holes; 36-43: LBAs 0-7 again. Live:
        // 8-23 in slots 8-23, 0-7 in slots 36-43.
        let mut entries: Vec<(u64, u64)> = (0..24).map(|lba| (lba, 1)).collect();
        entries.extend(std::iter::repeat_n(HOLE, 12));
        entries.extend((0..8).map(|lba| (lba, 2)));
        let run = vec![spec(100, true, &entries, &[])];
        let mut image = LogImage::new(big, MIRRORS.len());
        image.write_superblock(7, 0, 100);
        image.write_segment(0, &run[0]);
        let mut devices = image.into_devices();
        let scanned = scan(&mut devices, big, &MIRRORS).unwrap();
        let history_start = devices.history().len();
        let report = replay(&mut devices, big, scanned, &MIRRORS, true).unwrap();
        assert_eq!(report.blocks_replayed, 24);
        assert_eq!(backing(&devices), expected_backing(&run));
        let lengths = |kind, device| -> Vec<u64> {
            let records = devices.history()[history_start..].iter().filter(|r: &&IoRecord| r.kind == kind && r.device == device);
            records.map(|r| r.len_bytes / BLOCK_SIZE as u64).collect()
        };
        // Slots 8-39 (LBAs 8-23, the holes, LBAs 0-3), then slots 40-43.
        assert_eq!(lengths(IoKind::Read, DeviceRole::Log(0)), vec![32, 4]);
        let mut writes = lengths(IoKind::Write, DeviceRole::Backing);
        writes.sort();
        assert_eq!(writes, vec![4, 4, 16]);
    }

    fn arb_spec() -> impl Strategy<Value = SegmentSpec> {
        let entry = prop_oneof![4 => (0..16u64, 0..4u64), 1 => Just(HOLE)];
        let gap = prop_oneof![2 => Just(0u32), 1 => 1u32..4];
        (proptest::collection::vec(entry, 0..=7), proptest::collection::vec(0..16u64, 0..4), any::<bool>(), gap).prop_map(
            |(entries, revokes, barrier, gap_blocks)| SegmentSpec { sequence: 0, run: 1, barrier, entries, revokes, gap_blocks, head_sequence: 0 },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Random runs packed as parts, some with a gap after them: as many
        /// parts per segment as fit (or fewer, where `ends` says so); the
        /// replay must match the reference over the same run, in part order.
        #[test]
        fn prop_packed_parts_replay_matches_reference(
            mut run in proptest::collection::vec(arb_spec(), 1..12),
            ends in proptest::collection::vec(any::<bool>(), 12),
        ) {
            let mut image = LogImage::new(layout(16), MIRRORS.len());
            let segment = image.layout.segment;
            let (mut index, mut sequence, mut parts) = (0u32, 1000u64, Vec::new());
            let mut first_block = 0;
            image.write_superblock(7, 0, sequence);
            let run_len = run.len();
            for (i, spec) in run.iter_mut().enumerate() {
                let blocks = segment.header_blocks + spec.entries.len() as u32;
                if first_block + blocks > segment.blocks() {
                    image.write_parts(index, &parts, true);
                    (index, sequence, parts, first_block) = (index + 1, sequence + 1, Vec::new(), 0);
                }
                spec.sequence = sequence;
                first_block += blocks;
                let end = ends[i] || !segment.has_room_for_part(first_block);
                if end || !segment.has_room_for_part(first_block + spec.gap_blocks) {
                    spec.gap_blocks = 0;
                }
                first_block += spec.gap_blocks;
                parts.push(spec.clone());
                let last = i + 1 == run_len;
                if end || last {
                    image.write_parts(index, &parts, end);
                    if !last {
                        (index, sequence, parts, first_block) = (index + 1, sequence + 1, Vec::new(), 0);
                    }
                }
            }
            let mut devices = image.into_devices();
            let scanned = scan(&mut devices, layout(16), &MIRRORS).unwrap();
            prop_assert_eq!(scanned.segments.len(), run.len());
            replay(&mut devices, layout(16), scanned, &MIRRORS, true).unwrap();
            prop_assert_eq!(backing(&devices), expected_backing(&run));
        }

        /// Random logs over two mirrors with random single-copy corruption
        /// and an optional segment torn on both mirrors: the backing device
        /// must end up as the reference says, for the run before the tear.
        #[test]
        fn prop_replay_matches_reference(
            mut run in proptest::collection::vec(arb_spec(), 1..8),
            head_segment in 0u32..8,
            corruptions in proptest::collection::vec((0usize..8, 0usize..2, 0usize..(8 * 4096)), 0..4),
            torn_at in proptest::option::of(0usize..8),
        ) {
            for (position, segment) in run.iter_mut().enumerate() {
                segment.sequence = 1000 + position as u64;
            }
            // Each part records the head its run so far allows (a replay
            // starts at the newest one found): the result must not change.
            for position in 0..run.len() {
                run[position].head_sequence = truthful_head(&run[..=position]);
            }
            let mut image = image_with(&run, head_segment, 8);
            let index_of = |position: usize| (head_segment + position as u32) % 8;
            let torn = torn_at.filter(|&t| t < run.len());
            for &(position, mirror, byte) in &corruptions {
                // Not in the torn segment: corrupt_segment flips a bit, and a
                // second flip of the tear's byte would mend that copy.
                if torn == Some(position % run.len()) {
                    continue;
                }
                let sealed = image.layout.segment.sealed_bytes(run[position % run.len()].entries.len() as u32);
                // Corrupt one mirror only: the other keeps a good copy.
                let mirror = if corruptions.iter().any(|c| c.0 % run.len() == position % run.len() && c.1 != mirror) { 0 } else { mirror };
                image.corrupt_segment(mirror, index_of(position % run.len()), byte % sealed);
            }
            let valid_len = match torn {
                Some(torn) => {
                    image.corrupt_segment(0, index_of(torn), 13);
                    image.corrupt_segment(1, index_of(torn), 13);
                    torn
                }
                None => run.len(),
            };
            let mut devices = image.into_devices();
            let scanned = scan(&mut devices, layout(8), &MIRRORS).unwrap();
            prop_assert_eq!(scanned.segments.len(), valid_len);
            let report = replay(&mut devices, layout(8), scanned, &MIRRORS, true).unwrap();
            prop_assert_eq!(backing(&devices), expected_backing(&run[..valid_len]));
            let live = expected_backing(&run[..valid_len]).chunks(BLOCK_SIZE as usize).filter(|b| b.iter().any(|&x| x != 0)).count();
            prop_assert_eq!(report.blocks_replayed, live as u64);
            prop_assert!(scan(&mut devices, layout(8), &MIRRORS).unwrap().segments.is_empty());
        }
    }
}
