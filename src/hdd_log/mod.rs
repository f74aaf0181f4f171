//! The HDD log's bookkeeping: segment ring (head, tail, durable head in the
//! superblock), per-segment live counts, the pool of segment buffers, the
//! open part's LBA and revoke tables, the parts being written and the
//! durability of their prefix and of the last barrier, mirror health. No I/O
//! here; the engine issues it.
//!
//! A segment is written in parts (`format::segment`): a barrier seals the
//! open part and the next part starts right after it in the same buffer, so
//! a segment holds many barriers. Space is managed by segment, durability and
//! ordering by part: a part's `LogPoint` is `sequence << 16 | part`.
//!
//! Log locations (`loc`) are `segment_index * blocks + block`, the block of
//! the segment holding the entry's data; segment index is
//! `sequence % segments_count`, so a sequence number names its place too.
//!
//! Head rule (why the head may pass a segment): every entry in it is dead,
//! i.e. revoked (its value is durable on the backing device) or superseded by
//! an entry in a part at or before the last durable barrier, which a
//! recovery that stops at that barrier replays.
//!
//! Over 600 lines on purpose: the ring, the live counts, the buffers and the
//! FIFO of part writes change together, and the head's rule above reads all
//! four.

use crate::config::LogLayout;
use crate::format::segment::{self, PartFlags, PartPlace};
use crate::format::LBA_NONE;
use std::collections::VecDeque;

/// A part's place in the log's order: `sequence << 16 | part`. Parts of one
/// segment number fewer than 2^16 (each takes at least one block, and a
/// segment has at most 16384).
pub type LogPoint = u64;

pub fn log_point(sequence: u64, part: u32) -> LogPoint {
    debug_assert!(part < 1 << 16);
    sequence << 16 | part as u64
}

/// Sealed parts whose mirror writes may be in flight at once; sealing waits
/// when this many are (the pool is sized at creation).
pub const PARTS_IN_FLIGHT_MAX: usize = 256;

/// What a buffer is opened for. The last segments of a full log are kept
/// for the work that frees space: revokes (written-back blocks) and re-logs
/// (reclamation); new writes cannot take them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpenFor {
    Revoke,
    Relog,
    Write,
}

/// Segments only revokes may take.
pub const REVOKE_RESERVE_SEGMENTS: u64 = 2;
/// Segments beyond those that only revokes and re-logs may take.
pub const RELOG_RESERVE_SEGMENTS: u64 = 2;

impl OpenFor {
    /// Free segments needed to open a new buffer for this purpose.
    pub const fn min_free(self) -> u64 {
        match self {
            OpenFor::Revoke => 1,
            OpenFor::Relog => REVOKE_RESERVE_SEGMENTS + 1,
            OpenFor::Write => REVOKE_RESERVE_SEGMENTS + RELOG_RESERVE_SEGMENTS + 1,
        }
    }

    /// The widest purpose a buffer opened with `free` segments may serve.
    fn allowed(free: u64) -> OpenFor {
        [OpenFor::Write, OpenFor::Relog, OpenFor::Revoke].into_iter().find(|p| free >= p.min_free()).unwrap_or(OpenFor::Revoke)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentState {
    Free,
    Open,
    /// Closed (its last part sealed); part writes outstanding.
    Writing,
    Durable,
}

#[derive(Clone, Copy, Debug)]
struct SegmentInfo {
    sequence: u64,
    live_count: u32,
    /// Highest point of a part holding an entry that superseded one here.
    superseded_by_max: LogPoint,
    state: SegmentState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferState {
    Free,
    Open,
    /// Its segment is closed; part writes (and flushes) outstanding.
    Writing,
    /// Left by a log restart while cache reads into it or part writes from
    /// it were in flight; free once they land.
    Draining,
}

/// A segment buffer. Bytes `[0, part_first)` belong to sealed parts (maybe
/// still being written from here); the open part starts at `part_first`.
#[derive(Clone, Copy, Debug)]
pub struct LogBuffer {
    pub region: u32,
    pub state: BufferState,
    pub sequence: u64,
    /// The open part: its number and first block.
    pub part: u32,
    pub part_first: u32,
    /// Data slots and revokes in the open part.
    pub slots_used: u32,
    pub revokes_count: u32,
    /// Cache-device reads filling slots of the open part.
    pub slot_reads_in_flight: u32,
    /// Mirror writes and flushes outstanding, of every sealed part.
    pub mirror_ops_pending: u32,
    /// What this buffer may take (it was opened with that much free space).
    pub accepts: OpenFor,
}

/// A sealed part on its way to the mirrors.
#[derive(Clone, Copy, Debug)]
struct PartWrite {
    point: LogPoint,
    barrier: bool,
    segment_end: bool,
    ops_pending: u32,
}

/// What `seal` produced: the bytes to write to every mirror.
#[derive(Clone, Copy, Debug)]
pub struct SealedPart {
    pub buffer: usize,
    /// Names the part in its write completions (`part_op_done`).
    pub write: u32,
    pub point: LogPoint,
    pub segment_index: u32,
    /// Where the part starts, in the buffer and in the segment.
    pub offset_bytes: u64,
    pub len_bytes: u64,
    /// Blocks left unwritten after the part for the gap asked for: the gap,
    /// or the rest of the segment where the gap did not fit.
    pub skipped_blocks: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorHealth {
    Healthy,
    Failed,
    /// Attached after a failure; receives new segments but counts for
    /// durability only once every live entry lies at or after `from_sequence`.
    Syncing { from_sequence: u64 },
}

pub struct LogManager {
    pub layout: LogLayout,
    pub instance_id: u64,
    segments: Vec<SegmentInfo>,
    pub buffers: Vec<LogBuffer>,
    pub open_buffer: Option<usize>,
    /// Oldest segment still needed (in memory).
    pub head_sequence: u64,
    /// Head recorded in the superblock on the mirrors.
    pub durable_head_sequence: u64,
    /// Next sequence to open.
    pub tail_sequence: u64,
    /// Every segment with a lower sequence is closed and durable on the
    /// healthy mirrors.
    pub durable_prefix_sequence: u64,
    /// Highest barrier part within the durable prefix of parts.
    pub durable_barrier: Option<LogPoint>,
    pub mirrors: Vec<MirrorHealth>,
    pub superblock_write_seq: u64,
    pub live_entries: u64,
    /// Segments opened so far (a counter for the stats).
    pub segments_opened: u64,
    /// This engine run's number, carried by every part it writes (1 at
    /// format, +1 per warm restart; see `format::segment::PartPlace::run`).
    pub run: u32,
    /// The instance this log took over, for its superblocks
    /// (`LogSuperblock::previous_instance`; 0: none).
    pub previous_instance: u64,
    /// (point, barrier) of the most recently sealed part.
    last_sealed: Option<(LogPoint, bool)>,
    /// Highest barrier part sealed, durable or still being written.
    sealed_barrier: Option<LogPoint>,
    /// Sealed parts not yet durable, in seal order; the front's write number
    /// is `writes_front`. Durability is a prefix: a part counts only once
    /// every part sealed before it does.
    writes: VecDeque<PartWrite>,
    writes_front: u32,
    /// The LBA each log block was last given (`LBA_SLOT_NONE` if none), by
    /// location: reclamation finds a segment's entries here instead of
    /// reading the segment back from a mirror (4 bytes per log block).
    slot_lbas: Vec<u32>,
    /// `Mutation::SupersededFreedEarly`: the head passes segments whose
    /// entries were superseded after the last durable barrier. Set only in
    /// builds with the `mutations` feature; read through
    /// `MUTATIONS_BUILT`, so other builds fold the check away.
    pub superseded_freed_early: bool,
    /// `Mutation::RecordedHeadTooFar`: parts record a head one segment past
    /// the log's. Read through `MUTATIONS_BUILT`, as the one above.
    pub recorded_head_too_far: bool,
}

/// `LogManager::slot_lba` of a block that holds no entry.
pub const LBA_SLOT_NONE: u32 = u32::MAX;

/// A log block's location and the LBA it was last given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotLba {
    pub loc: u32,
    pub lba: u32,
}

impl LogManager {
    /// Mirrors in `absent` (bit i: mirror i) start failed: their slots have no device.
    pub fn new(
        layout: LogLayout,
        instance_id: u64,
        buffer_regions: Vec<u32>,
        mirrors_count: u8,
        absent: u16,
        first_sequence: u64,
    ) -> Self {
        let blank = SegmentInfo { sequence: 0, live_count: 0, superseded_by_max: 0, state: SegmentState::Free };
        let buffers = buffer_regions
            .into_iter()
            .map(|region| LogBuffer {
                region,
                state: BufferState::Free,
                sequence: 0,
                part: 0,
                part_first: 0,
                slots_used: 0,
                revokes_count: 0,
                slot_reads_in_flight: 0,
                mirror_ops_pending: 0,
                accepts: OpenFor::Write,
            })
            .collect();
        LogManager {
            layout,
            instance_id,
            segments: vec![blank; layout.segments_count as usize],
            buffers,
            open_buffer: None,
            head_sequence: first_sequence,
            durable_head_sequence: first_sequence,
            tail_sequence: first_sequence,
            durable_prefix_sequence: first_sequence,
            durable_barrier: None,
            mirrors: (0..mirrors_count)
                .map(|i| if i < 16 && absent >> i & 1 == 1 { MirrorHealth::Failed } else { MirrorHealth::Healthy })
                .collect(),
            superblock_write_seq: 0,
            live_entries: 0,
            segments_opened: 0,
            run: 1,
            previous_instance: 0,
            last_sealed: None,
            sealed_barrier: None,
            writes: VecDeque::with_capacity(PARTS_IN_FLIGHT_MAX),
            writes_front: 0,
            slot_lbas: vec![LBA_SLOT_NONE; layout.segments_count as usize * layout.segment.blocks() as usize],
            superseded_freed_early: false,
            recorded_head_too_far: false,
        }
    }

    /// Blocks per segment: a location is `segment_index * slots() + block`.
    pub fn slots(&self) -> u32 {
        self.layout.segment.blocks()
    }

    pub fn segment_index(&self, sequence: u64) -> u32 {
        (sequence % self.layout.segments_count as u64) as u32
    }

    /// Location of the data in block `block` of segment `sequence`.
    pub fn loc(&self, sequence: u64, block: u32) -> u32 {
        self.segment_index(sequence) * self.slots() + block
    }

    pub fn loc_segment(&self, loc: u32) -> u32 {
        loc / self.slots()
    }

    pub fn loc_sequence(&self, loc: u32) -> u64 {
        self.segments[self.loc_segment(loc) as usize].sequence
    }

    pub fn healthy_mirrors(&self) -> impl Iterator<Item = u8> + '_ {
        self.mirrors.iter().enumerate().filter(|(_, h)| **h == MirrorHealth::Healthy).map(|(i, _)| i as u8)
    }

    /// Mirrors that receive segment writes (healthy and syncing).
    pub fn writable_mirrors(&self) -> impl Iterator<Item = u8> + '_ {
        (0..self.mirrors.len() as u8).filter(|&m| self.mirror_writable(m))
    }

    pub fn mirror_writable(&self, mirror: u8) -> bool {
        self.mirrors[mirror as usize] != MirrorHealth::Failed
    }

    /// Bit i set: mirror i is healthy (in sync), as a log superblock
    /// records it (`LogSuperblock::in_sync_mask`).
    pub fn in_sync_mask(&self) -> u16 {
        self.healthy_mirrors().filter(|&m| m < crate::format::LOG_MIRRORS_MAX).fold(0, |mask, m| mask | 1 << m)
    }

    pub fn mirrors_count(&self) -> u8 {
        self.mirrors.len() as u8
    }

    pub fn has_healthy_mirror(&self) -> bool {
        self.healthy_mirrors().next().is_some()
    }

    pub fn segments_in_use(&self) -> u64 {
        self.tail_sequence - self.durable_head_sequence
    }

    /// Whether new parts should carry the barrier flag regardless: in a
    /// nearly full log, dead segments must become passable at once.
    pub fn tight(&self) -> bool {
        self.segments_free() < OpenFor::Write.min_free() + 2
    }

    pub fn segments_free(&self) -> u64 {
        self.layout.segments_count as u64 - self.segments_in_use()
    }

    /// The open buffer, or a new one at the log tail, if it may serve
    /// `purpose`; None if no buffer or no segment is available for it.
    pub fn open(&mut self, purpose: OpenFor) -> Option<usize> {
        if let Some(open) = self.open_buffer {
            // Opened from a reserve while the log was full: once segments
            // are free again it may take what a buffer opened now could
            // (else a revoke-only buffer with nothing to revoke would stay
            // open for good and nothing could be logged).
            let widened = OpenFor::allowed(self.segments_free() + 1);
            if widened > self.buffers[open].accepts {
                self.buffers[open].accepts = widened;
            }
            return (self.buffers[open].accepts >= purpose).then_some(open);
        }
        let free = self.segments_free();
        if free < purpose.min_free() {
            return None;
        }
        let buffer = self.buffers.iter().position(|b| b.state == BufferState::Free)?;
        let sequence = self.tail_sequence;
        self.tail_sequence += 1;
        self.segments_opened += 1;
        let index = self.segment_index(sequence) as usize;
        // The head rule: a segment is reused only once nothing in it is live.
        assert!(
            self.segments[index].state == SegmentState::Free || self.segments[index].live_count == 0,
            "segment {sequence} opened over sequence {} with {} live entries",
            self.segments[index].sequence,
            self.segments[index].live_count
        );
        self.segments[index] = SegmentInfo { sequence, live_count: 0, superseded_by_max: 0, state: SegmentState::Open };
        let slots = self.slots() as usize;
        self.slot_lbas[index * slots..(index + 1) * slots].fill(LBA_SLOT_NONE);
        let b = &mut self.buffers[buffer];
        b.state = BufferState::Open;
        b.sequence = sequence;
        b.part = 0;
        b.part_first = 0;
        b.slots_used = 0;
        b.revokes_count = 0;
        b.slot_reads_in_flight = 0;
        b.accepts = OpenFor::allowed(free);
        self.open_buffer = Some(buffer);
        Some(buffer)
    }

    /// The open part has no slot left: sealing it ends the segment.
    pub fn open_is_full(&self) -> bool {
        self.open_buffer.is_some_and(|b| {
            let b = &self.buffers[b];
            b.slots_used == self.layout.segment.part_slots(b.part_first)
        })
    }

    pub fn open_revokes_full(&self) -> bool {
        self.open_buffer.is_some_and(|b| self.buffers[b].revokes_count == self.layout.segment.revokes_capacity)
    }

    /// Whether a part can be sealed now (the pool of part writes has room).
    pub fn can_seal(&self) -> bool {
        self.writes.len() < PARTS_IN_FLIGHT_MAX
    }

    /// The open part's slot holding `loc`, if `loc` lies in it (entries of
    /// sealed parts of the open segment are on their way to the mirrors).
    pub fn open_slot_of(&self, loc: u32) -> Option<u32> {
        let buffer = &self.buffers[self.open_buffer?];
        if loc == crate::cache::LOC_NONE || self.loc_segment(loc) != self.segment_index(buffer.sequence) {
            return None;
        }
        let data_first = buffer.part_first + self.layout.segment.header_blocks;
        let block = loc % self.slots();
        (block >= data_first && block < data_first + buffer.slots_used).then(|| block - data_first)
    }

    /// Byte offset, in the open buffer, of the open part's slot `slot`.
    pub fn open_slot_offset(&self, slot: u32) -> usize {
        let buffer = &self.buffers[self.open_buffer.expect("no open buffer")];
        self.part_offset(buffer.part_first) + self.layout.segment.slot_offset(slot)
    }

    fn part_offset(&self, first_block: u32) -> usize {
        first_block as usize * self.layout.segment.block_size as usize
    }

    /// The open part's bytes in `mem` (the open buffer's memory).
    fn open_part_mut<'a>(&self, mem: &'a mut [u8]) -> &'a mut [u8] {
        let buffer = &self.buffers[self.open_buffer.expect("no open part")];
        &mut mem[self.part_offset(buffer.part_first)..]
    }

    /// The open part's point (where entries appended now will be).
    pub fn open_point(&self) -> Option<LogPoint> {
        self.open_buffer.map(|b| log_point(self.buffers[b].sequence, self.buffers[b].part))
    }

    /// Appends an entry for `lba` to the open part (which must have room);
    /// the caller fills the slot's data. Returns (loc, byte offset of the slot
    /// in the buffer). `previous` is the LBA's older live entry, now superseded.
    pub fn append(&mut self, mem: &mut [u8], lba: u64, previous: u32) -> (u32, usize) {
        assert!(!self.open_is_full(), "append to a full part");
        let buffer = self.open_buffer.expect("append without open buffer");
        let slot = self.buffers[buffer].slots_used;
        segment::set_slot_lba(&self.layout.segment, self.open_part_mut(mem), slot, lba);
        let offset = self.open_slot_offset(slot);
        let b = &mut self.buffers[buffer];
        b.slots_used += 1;
        let (sequence, point) = (b.sequence, log_point(b.sequence, b.part));
        let block = b.part_first + self.layout.segment.header_blocks + slot;
        let loc = self.loc(sequence, block);
        self.slot_lbas[loc as usize] = u32::try_from(lba).unwrap_or(LBA_SLOT_NONE);
        let index = self.segment_index(sequence) as usize;
        assert_eq!(self.segments[index].state, SegmentState::Open, "append to segment {sequence} not open");
        self.segments[index].live_count += 1;
        self.live_entries += 1;
        self.supersede(mem, previous, point);
        (loc, offset)
    }

    /// The entry at `loc` is superseded by one in the open part at `by`. If
    /// it is in the open part too, its slot becomes a hole: the part's own
    /// revokes cancel only entries of earlier parts, so a replay would
    /// otherwise take the older value back (torture seed 14573).
    pub fn supersede(&mut self, mem: &mut [u8], loc: u32, by: LogPoint) {
        if let Some(slot) = self.open_slot_of(loc) {
            self.drop_in_open(mem, slot);
        }
        self.kill(loc, Some(by));
    }

    /// An entry stops being live: superseded by an entry in the part at
    /// `superseded_in`, or revoked (`None`).
    pub fn kill(&mut self, loc: u32, superseded_in: Option<LogPoint>) {
        if loc == crate::cache::LOC_NONE {
            return;
        }
        let index = self.loc_segment(loc) as usize;
        let info = &mut self.segments[index];
        assert!(info.live_count > 0, "live count underflow at loc {loc}");
        info.live_count -= 1;
        assert!(self.live_entries > 0, "live entries underflow at loc {loc}");
        self.live_entries -= 1;
        if let Some(point) = superseded_in {
            info.superseded_by_max = info.superseded_by_max.max(point);
        }
    }

    /// Drops an entry still in the open part (its slot becomes a hole).
    pub fn drop_in_open(&mut self, mem: &mut [u8], slot: u32) {
        segment::set_slot_lba(&self.layout.segment, self.open_part_mut(mem), slot, LBA_NONE);
    }

    /// Records a revoke in the open part (which must have room).
    pub fn record_revoke(&mut self, mem: &mut [u8], lba: u64) {
        let buffer = self.open_buffer.expect("revoke without open buffer");
        let index = self.buffers[buffer].revokes_count;
        assert!(index < self.layout.segment.revokes_capacity);
        segment::set_revoke(&self.layout.segment, self.open_part_mut(mem), index, lba);
        self.buffers[buffer].revokes_count += 1;
    }

    pub fn open_is_empty(&self) -> bool {
        self.open_buffer.is_none_or(|b| self.buffers[b].slots_used == 0 && self.buffers[b].revokes_count == 0)
    }

    /// Whether the most recently sealed part is a barrier and nothing has
    /// been added since, so that a flush needs no new barrier part.
    pub fn barrier_covers_all(&self) -> bool {
        self.open_is_empty() && self.last_sealed.is_none_or(|(_, barrier)| barrier)
    }

    /// Point of the most recently sealed part.
    pub fn last_sealed_point(&self) -> Option<LogPoint> {
        self.last_sealed.map(|(point, _)| point)
    }

    /// Seals the open part into its place. When no other part fits after it,
    /// it ends the segment and the buffer stops being open; otherwise the
    /// next part opens in the same buffer, `gap_blocks` after it (the part's
    /// header records them). A gap that leaves no room for another part
    /// ends the segment instead: the next segment's first part lies right
    /// after the rest of this one, which costs no more than the gap. The
    /// caller writes `len_bytes` from `offset_bytes` of the buffer to every
    /// writable mirror, counting each write and flush with `part_op_started`.
    pub fn seal(&mut self, mem: &mut [u8], barrier: bool, gap_blocks: u32) -> SealedPart {
        assert!(self.can_seal(), "sealing with {} parts in flight", self.writes.len());
        let buffer = self.open_buffer.expect("seal without open buffer");
        let layout = self.layout.segment;
        let b = self.buffers[buffer];
        assert_eq!(b.slot_reads_in_flight, 0, "sealing a part with slot reads in flight");
        let index = self.segment_index(b.sequence);
        let next_block = b.part_first + layout.header_blocks + b.slots_used;
        let segment_end = !layout.has_room_for_part(next_block.saturating_add(gap_blocks));
        let gap_blocks = if segment_end { 0 } else { gap_blocks };
        let skipped_blocks = match (segment_end, gap_blocks) {
            (false, gap) => gap,
            (true, _) if layout.has_room_for_part(next_block) => layout.blocks() - next_block,
            (true, _) => 0,
        };
        let place = PartPlace {
            instance_id: self.instance_id,
            segment_index: index,
            sequence: b.sequence,
            part: b.part,
            first_block: b.part_first,
            run: self.run,
        };
        let offset = self.part_offset(b.part_first);
        // The head a recovery may start at (docs/format.md).
        let too_far = crate::config::MUTATIONS_BUILT && self.recorded_head_too_far;
        let head_sequence = if too_far { (self.head_sequence + 1).min(b.sequence) } else { self.head_sequence };
        let flags = PartFlags { barrier, segment_end, gap_blocks, head_sequence };
        let len = segment::seal(&layout, &mut mem[offset..], &place, flags, b.slots_used, b.revokes_count) as u64;
        let point = log_point(b.sequence, b.part);
        self.last_sealed = Some((point, barrier));
        if barrier {
            self.sealed_barrier = Some(point);
        }
        let write = self.writes_front.wrapping_add(self.writes.len() as u32);
        self.writes.push_back(PartWrite { point, barrier, segment_end, ops_pending: 0 });
        let b = &mut self.buffers[buffer];
        if segment_end {
            b.state = BufferState::Writing;
            self.open_buffer = None;
            self.segments[index as usize].state = SegmentState::Writing;
        } else {
            b.part += 1;
            b.part_first = next_block + gap_blocks;
            b.slots_used = 0;
            b.revokes_count = 0;
        }
        SealedPart { buffer, write, point, segment_index: index, offset_bytes: offset as u64, len_bytes: len, skipped_blocks }
    }

    /// A mirror write or flush of part `write` of `buffer` was issued.
    pub fn part_op_started(&mut self, buffer: usize, write: u32) {
        self.buffers[buffer].mirror_ops_pending += 1;
        if let Some(part) = self.part_write_mut(write) {
            part.ops_pending += 1;
        }
    }

    fn part_write_mut(&mut self, write: u32) -> Option<&mut PartWrite> {
        let position = write.wrapping_sub(self.writes_front) as usize;
        self.writes.get_mut(position)
    }

    /// A mirror write or flush of part `write` finished (the caller has
    /// dealt with a failure). Returns whether the durable prefix grew.
    pub fn part_op_done(&mut self, buffer: usize, write: u32) -> bool {
        let b = &mut self.buffers[buffer];
        assert!(b.mirror_ops_pending > 0, "part op done with none pending");
        b.mirror_ops_pending -= 1;
        self.release_if_idle(buffer);
        if let Some(part) = self.part_write_mut(write) {
            assert!(part.ops_pending > 0, "part write {write} done twice");
            part.ops_pending -= 1;
        }
        self.settle_durable()
    }

    /// Takes every part at the front whose writes all finished as durable.
    pub fn settle_durable(&mut self) -> bool {
        let mut grew = false;
        while let Some(part) = self.writes.front().copied().filter(|p| p.ops_pending == 0) {
            self.writes.pop_front();
            self.writes_front = self.writes_front.wrapping_add(1);
            grew = true;
            if part.barrier {
                self.durable_barrier = Some(part.point);
            }
            if part.segment_end {
                let sequence = part.point >> 16;
                let index = self.segment_index(sequence) as usize;
                assert_eq!(self.segments[index].sequence, sequence, "a part of segment {sequence} ends another segment");
                self.segments[index].state = SegmentState::Durable;
                // Recovery scans the log in order: segments must become durable in order.
                assert_eq!(self.durable_prefix_sequence, sequence, "segments end in order");
                self.durable_prefix_sequence = sequence + 1;
            }
        }
        grew
    }

    fn release_if_idle(&mut self, buffer: usize) {
        let b = &mut self.buffers[buffer];
        if matches!(b.state, BufferState::Writing | BufferState::Draining) && b.mirror_ops_pending == 0 && b.slot_reads_in_flight == 0 {
            b.state = BufferState::Free;
        }
    }

    /// A cache read into a slot of `buffer` finished.
    pub fn slot_read_done(&mut self, buffer: usize) {
        assert!(self.buffers[buffer].slot_reads_in_flight > 0, "slot read done for buffer {buffer} with none in flight");
        self.buffers[buffer].slot_reads_in_flight -= 1;
        self.release_if_idle(buffer);
    }

    /// Whether `buffer` belongs to the log as it is now (not to one that a
    /// restart of the log has discarded).
    pub fn is_current(&self, buffer: usize) -> bool {
        self.buffers[buffer].state != BufferState::Draining
    }

    /// Advances the in-memory head over dead, durable segments.
    pub fn advance_head(&mut self) -> u64 {
        let mut advanced = 0;
        let barrier = self.durable_barrier;
        let freed_early = crate::config::MUTATIONS_BUILT && self.superseded_freed_early;
        while self.head_sequence < self.durable_prefix_sequence {
            let info = &self.segments[self.segment_index(self.head_sequence) as usize];
            let supersession_durable =
                freed_early || info.superseded_by_max == 0 || barrier.is_some_and(|b| info.superseded_by_max <= b);
            if info.live_count > 0 || !supersession_durable {
                break;
            }
            self.head_sequence += 1;
            advanced += 1;
        }
        advanced
    }

    /// Whether the head waits for a barrier that no sealed part provides:
    /// the first segment it cannot pass holds no live entry, but entries
    /// superseded in a part after every barrier sealed so far. A barrier
    /// sealed and still being written will release it when it lands, so
    /// another one now would only spend a header block and a device
    /// command (a cleaner that asked for one at every step sealed 1,500
    /// barrier parts a second against a host's four flushes).
    pub fn head_waits_for_barrier(&self) -> bool {
        (self.head_sequence..self.durable_prefix_sequence)
            .map(|sequence| &self.segments[self.segment_index(sequence) as usize])
            .find(|info| info.live_count > 0 || info.superseded_by_max > self.durable_barrier.unwrap_or(0))
            .is_some_and(|info| info.live_count == 0 && self.sealed_barrier.is_none_or(|b| info.superseded_by_max > b))
    }

    /// The superblock now on the mirrors records `head_sequence`.
    pub fn superblock_durable(&mut self, head_sequence: u64) {
        assert!(head_sequence <= self.head_sequence, "superblock head {head_sequence} beyond the log head {}", self.head_sequence);
        for seq in self.durable_head_sequence..head_sequence {
            let index = self.segment_index(seq) as usize;
            if self.segments[index].sequence == seq {
                // The head rule: a segment the head passed holds nothing live.
                assert_eq!(self.segments[index].live_count, 0, "segment {seq} freed with live entries");
                self.segments[index].state = SegmentState::Free;
            }
        }
        self.durable_head_sequence = self.durable_head_sequence.max(head_sequence);
    }

    pub fn live_count(&self, sequence: u64) -> u32 {
        let info = &self.segments[self.segment_index(sequence) as usize];
        if info.sequence == sequence {
            info.live_count
        } else {
            0
        }
    }

    pub fn head_live_count(&self) -> Option<(u64, u32)> {
        (self.head_sequence < self.durable_prefix_sequence).then(|| {
            let info = &self.segments[self.segment_index(self.head_sequence) as usize];
            (self.head_sequence, info.live_count)
        })
    }

    /// Rebuilds the ring after a scan at warm restart: `head` from the
    /// superblock, then the scanned run of parts (sequence, part, barrier)
    /// from it. Every scanned segment counts as closed (the restart ends the
    /// last one on the mirrors); the log goes on in the next segment.
    pub fn restore_ring(&mut self, head: u64, parts: &[(u64, u32, bool)]) {
        self.reinitialise(head);
        for &(sequence, part, barrier) in parts {
            let index = self.segment_index(sequence) as usize;
            if self.segments[index].sequence != sequence || self.segments[index].state == SegmentState::Free {
                self.segments[index] = SegmentInfo { sequence, live_count: 0, superseded_by_max: 0, state: SegmentState::Durable };
            }
            let point = log_point(sequence, part);
            if barrier {
                self.durable_barrier = Some(point);
                self.sealed_barrier = Some(point);
            }
            self.last_sealed = Some((point, barrier));
        }
        self.tail_sequence = parts.last().map_or(head, |&(sequence, _, _)| sequence + 1);
        self.durable_prefix_sequence = self.tail_sequence;
    }

    pub fn restore_entry(&mut self, loc: u32, lba: u64) {
        self.slot_lbas[loc as usize] = u32::try_from(lba).unwrap_or(LBA_SLOT_NONE);
        let index = self.loc_segment(loc) as usize;
        self.segments[index].live_count += 1;
        self.live_entries += 1;
    }

    pub fn note_superseded(&mut self, loc: u32, by: LogPoint) {
        let index = self.loc_segment(loc) as usize;
        let info = &mut self.segments[index];
        info.superseded_by_max = info.superseded_by_max.max(by);
    }

    /// Forgets everything (all mirrors lost, or a fresh log) and restarts
    /// the ring at `first_sequence`. Part writes still in flight belong to
    /// nothing any more: their completions only release their buffers.
    pub fn reinitialise(&mut self, first_sequence: u64) {
        for info in &mut self.segments {
            *info = SegmentInfo { sequence: 0, live_count: 0, superseded_by_max: 0, state: SegmentState::Free };
        }
        for b in &mut self.buffers {
            if b.state == BufferState::Open {
                b.state = if b.slot_reads_in_flight > 0 || b.mirror_ops_pending > 0 { BufferState::Draining } else { BufferState::Free };
            }
        }
        self.writes_front = self.writes_front.wrapping_add(self.writes.len() as u32);
        self.writes.clear();
        self.open_buffer = None;
        self.head_sequence = first_sequence;
        self.durable_head_sequence = first_sequence;
        self.tail_sequence = first_sequence;
        self.durable_prefix_sequence = first_sequence;
        self.durable_barrier = None;
        self.live_entries = 0;
        self.last_sealed = None;
        self.sealed_barrier = None;
    }

    pub fn describe(&self) -> String {
        let open = self.open_buffer.map(|b| {
            let b = &self.buffers[b];
            (b.sequence, b.part, b.part_first, b.slots_used, b.revokes_count, b.slot_reads_in_flight)
        });
        format!(
            "log head {} durable head {} tail {} durable prefix {} barrier {:?} free {} open {:?} parts in flight {} buffers {:?} mirrors {:?} live {} head live {:?}",
            self.head_sequence,
            self.durable_head_sequence,
            self.tail_sequence,
            self.durable_prefix_sequence,
            self.durable_barrier.map(|p| (p >> 16, p & 0xffff)),
            self.segments_free(),
            open,
            self.writes.len(),
            self.buffers.iter().map(|b| b.state).collect::<Vec<_>>(),
            self.mirrors,
            self.live_entries,
            self.head_live_count().map(|(seq, live)| (seq, live, self.segments[self.segment_index(seq) as usize].superseded_by_max)),
        )
    }

    pub fn memory_bytes(&self) -> usize {
        self.segments.len() * std::mem::size_of::<SegmentInfo>()
            + self.buffers.len() * std::mem::size_of::<LogBuffer>()
            + self.writes.capacity() * std::mem::size_of::<PartWrite>()
            + self.slot_lbas.len() * std::mem::size_of::<u32>()
    }

    /// The locations of segment `sequence`'s blocks with the LBA each was
    /// last given; an entry is live only if its block's cache entry still
    /// points at that location.
    pub fn segment_slot_lbas(&self, sequence: u64) -> impl Iterator<Item = SlotLba> + '_ {
        let first = self.loc(sequence, 0);
        let slots = &self.slot_lbas[first as usize..(first + self.slots()) as usize];
        (first..).zip(slots.iter().copied()).filter(|&(_, lba)| lba != LBA_SLOT_NONE).map(|(loc, lba)| SlotLba { loc, lba })
    }
}
