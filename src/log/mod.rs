//! The HDD log's bookkeeping: segment ring (head, tail, durable head in the
//! superblock), per-segment live counts, the pool of segment buffers, the
//! open buffer's LBA and revoke tables, durability of the segment prefix and
//! of the last barrier, mirror health. No I/O here; the engine issues it.
//!
//! Log locations (`loc`) are `segment_index * slots + slot`; segment index is
//! `sequence % segments_count`, so a sequence number names its place too.
//!
//! Head rule (why the head may pass a segment): every entry in it is dead,
//! i.e. revoked (its value is durable on the backing device) or superseded by
//! an entry in a segment at or before the last durable barrier, which a
//! recovery that stops at that barrier replays.

use crate::config::LogLayout;
use crate::format::{segment, LBA_NONE};

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
    pub fn min_free(self) -> u64 {
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
    Writing,
    Durable,
}

#[derive(Clone, Copy, Debug)]
struct SegmentInfo {
    sequence: u64,
    live_count: u32,
    /// Highest sequence of a segment holding an entry that superseded one here.
    superseded_by_max: u64,
    state: SegmentState,
    barrier: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferState {
    Free,
    Open,
    /// Sealed; mirror writes (and flushes) outstanding.
    Writing,
    /// Left open by a log restart while cache reads into it were in flight;
    /// free once they land.
    Draining,
}

#[derive(Clone, Copy, Debug)]
pub struct LogBuffer {
    pub region: u32,
    pub state: BufferState,
    pub sequence: u64,
    pub slots_used: u32,
    pub revokes_count: u32,
    /// Cache-device reads filling slots of this buffer.
    pub slot_reads_in_flight: u32,
    /// Mirror writes and flushes outstanding after sealing.
    pub mirror_ops_pending: u32,
    pub barrier: bool,
    pub sealed_len_bytes: u64,
    /// What this buffer may take (it was opened with that much free space).
    pub accepts: OpenFor,
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
    /// Every segment with a lower sequence is durable on the healthy mirrors.
    pub durable_prefix_sequence: u64,
    /// Highest barrier segment within the durable prefix.
    pub durable_barrier_sequence: Option<u64>,
    pub mirrors: Vec<MirrorHealth>,
    pub superblock_write_seq: u64,
    pub live_entries: u64,
    /// (sequence, barrier) of the most recently sealed segment.
    last_sealed: Option<(u64, bool)>,
}

impl LogManager {
    pub fn new(layout: LogLayout, instance_id: u64, buffer_regions: Vec<u32>, mirrors_count: u8, first_sequence: u64) -> Self {
        let blank = SegmentInfo { sequence: 0, live_count: 0, superseded_by_max: 0, state: SegmentState::Free, barrier: false };
        let buffers = buffer_regions
            .into_iter()
            .map(|region| LogBuffer {
                region,
                state: BufferState::Free,
                sequence: 0,
                slots_used: 0,
                revokes_count: 0,
                slot_reads_in_flight: 0,
                mirror_ops_pending: 0,
                barrier: false,
                sealed_len_bytes: 0,
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
            durable_barrier_sequence: None,
            mirrors: vec![MirrorHealth::Healthy; mirrors_count as usize],
            superblock_write_seq: 0,
            live_entries: 0,
            last_sealed: None,
        }
    }

    pub fn slots(&self) -> u32 {
        self.layout.segment.slots
    }

    pub fn segment_index(&self, sequence: u64) -> u32 {
        (sequence % self.layout.segments_count as u64) as u32
    }

    pub fn loc(&self, sequence: u64, slot: u32) -> u32 {
        self.segment_index(sequence) * self.slots() + slot
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

    pub fn mirrors_count(&self) -> u8 {
        self.mirrors.len() as u8
    }

    pub fn has_healthy_mirror(&self) -> bool {
        self.healthy_mirrors().next().is_some()
    }

    pub fn segments_in_use(&self) -> u64 {
        self.tail_sequence - self.durable_head_sequence
    }

    /// Whether new segments should carry the barrier flag regardless: in a
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
        let index = self.segment_index(sequence) as usize;
        debug_assert!(self.segments[index].state == SegmentState::Free || self.segments[index].live_count == 0);
        self.segments[index] =
            SegmentInfo { sequence, live_count: 0, superseded_by_max: 0, state: SegmentState::Open, barrier: false };
        let b = &mut self.buffers[buffer];
        b.state = BufferState::Open;
        b.sequence = sequence;
        b.slots_used = 0;
        b.revokes_count = 0;
        b.slot_reads_in_flight = 0;
        b.barrier = false;
        b.accepts = OpenFor::allowed(free);
        self.open_buffer = Some(buffer);
        Some(buffer)
    }

    pub fn open_is_full(&self) -> bool {
        self.open_buffer.is_some_and(|b| self.buffers[b].slots_used == self.slots())
    }

    pub fn open_revokes_full(&self) -> bool {
        self.open_buffer.is_some_and(|b| self.buffers[b].revokes_count == self.layout.segment.revokes_capacity)
    }

    /// The open buffer's slot holding `loc`, if `loc` lies in it.
    pub fn open_slot_of(&self, loc: u32) -> Option<u32> {
        let buffer = &self.buffers[self.open_buffer?];
        (loc != crate::cache::LOC_NONE && self.loc_segment(loc) == self.segment_index(buffer.sequence))
            .then(|| loc % self.slots())
    }

    /// Appends an entry for `lba` to the open buffer (which must have room);
    /// the caller fills the slot's data. Returns (loc, byte offset of the slot
    /// in the buffer). `previous` is the LBA's older live entry, now superseded.
    pub fn append(&mut self, mem: &mut [u8], lba: u64, previous: u32) -> (u32, usize) {
        let buffer = self.open_buffer.expect("append without open buffer");
        let b = &mut self.buffers[buffer];
        assert!(b.slots_used < self.layout.segment.slots, "append to a full buffer");
        let slot = b.slots_used;
        b.slots_used += 1;
        let sequence = b.sequence;
        segment::set_slot_lba(&self.layout.segment, mem, slot, lba);
        let loc = self.loc(sequence, slot);
        let index = self.segment_index(sequence) as usize;
        self.segments[index].live_count += 1;
        self.live_entries += 1;
        self.kill(previous, Some(sequence));
        (loc, self.layout.segment.slot_offset(slot))
    }

    /// An entry stops being live: superseded by an entry in segment
    /// `superseded_in`, or revoked (`None`).
    pub fn kill(&mut self, loc: u32, superseded_in: Option<u64>) {
        if loc == crate::cache::LOC_NONE {
            return;
        }
        let index = self.loc_segment(loc) as usize;
        let info = &mut self.segments[index];
        assert!(info.live_count > 0, "live count underflow at loc {loc}");
        info.live_count -= 1;
        self.live_entries -= 1;
        if let Some(sequence) = superseded_in {
            info.superseded_by_max = info.superseded_by_max.max(sequence);
        }
    }

    /// Drops an entry still in the open buffer (its slot becomes a hole).
    pub fn drop_in_open(&mut self, mem: &mut [u8], slot: u32) {
        segment::set_slot_lba(&self.layout.segment, mem, slot, LBA_NONE);
    }

    /// Records a revoke in the open buffer (which must have room).
    pub fn record_revoke(&mut self, mem: &mut [u8], lba: u64) {
        let buffer = self.open_buffer.expect("revoke without open buffer");
        let b = &mut self.buffers[buffer];
        assert!(b.revokes_count < self.layout.segment.revokes_capacity);
        segment::set_revoke(&self.layout.segment, mem, b.revokes_count, lba);
        b.revokes_count += 1;
    }

    pub fn open_is_empty(&self) -> bool {
        self.open_buffer.is_none_or(|b| self.buffers[b].slots_used == 0 && self.buffers[b].revokes_count == 0)
    }

    /// Whether the most recently sealed segment is a barrier and nothing has
    /// been added since, so that a flush needs no new barrier segment.
    pub fn barrier_covers_all(&self) -> bool {
        self.open_is_empty() && self.last_sealed.is_none_or(|(_, barrier)| barrier)
    }

    /// Sequence of the most recently sealed segment.
    pub fn last_sealed_sequence(&self) -> Option<u64> {
        self.last_sealed.map(|(sequence, _)| sequence)
    }

    /// Seals the open buffer; returns (buffer, segment index, bytes to write).
    pub fn seal(&mut self, mem: &mut [u8], barrier: bool) -> (usize, u32, u64) {
        let buffer = self.open_buffer.take().expect("seal without open buffer");
        let b = &mut self.buffers[buffer];
        assert_eq!(b.slot_reads_in_flight, 0, "sealing a buffer with slot reads in flight");
        let index = (b.sequence % self.layout.segments_count as u64) as u32;
        let len = segment::seal(
            &self.layout.segment,
            mem,
            self.instance_id,
            index,
            b.sequence,
            barrier,
            b.slots_used,
            b.revokes_count,
        ) as u64;
        b.state = BufferState::Writing;
        b.barrier = barrier;
        b.sealed_len_bytes = len;
        b.mirror_ops_pending = 0;
        self.last_sealed = Some((b.sequence, barrier));
        let info = &mut self.segments[index as usize];
        info.state = SegmentState::Writing;
        info.barrier = barrier;
        (buffer, index, len)
    }

    /// Whether `buffer` belongs to the log as it is now (not to one that a
    /// restart of the log has discarded).
    pub fn is_current(&self, buffer: usize) -> bool {
        self.buffers[buffer].sequence >= self.head_sequence.min(self.durable_head_sequence)
            && self.buffers[buffer].state != BufferState::Draining
    }

    /// All mirror writes of a sealed buffer finished: the segment is durable.
    pub fn segment_durable(&mut self, buffer: usize) {
        let current = self.is_current(buffer);
        let b = &mut self.buffers[buffer];
        b.state = BufferState::Free;
        if !current {
            return;
        }
        let index = (b.sequence % self.layout.segments_count as u64) as usize;
        self.segments[index].state = SegmentState::Durable;
        while self.durable_prefix_sequence < self.tail_sequence {
            let info = &self.segments[self.segment_index(self.durable_prefix_sequence) as usize];
            if info.state != SegmentState::Durable || info.sequence != self.durable_prefix_sequence {
                break;
            }
            if info.barrier {
                self.durable_barrier_sequence = Some(self.durable_prefix_sequence);
            }
            self.durable_prefix_sequence += 1;
        }
    }

    /// Advances the in-memory head over dead, durable segments.
    pub fn advance_head(&mut self) -> u64 {
        let mut advanced = 0;
        let barrier = self.durable_barrier_sequence;
        while self.head_sequence < self.durable_prefix_sequence {
            let info = &self.segments[self.segment_index(self.head_sequence) as usize];
            let supersession_durable = info.superseded_by_max == 0 || barrier.is_some_and(|b| info.superseded_by_max <= b);
            if info.live_count > 0 || !supersession_durable {
                break;
            }
            self.head_sequence += 1;
            advanced += 1;
        }
        advanced
    }

    /// The superblock now on the mirrors records `head_sequence`.
    pub fn superblock_durable(&mut self, head_sequence: u64) {
        for seq in self.durable_head_sequence..head_sequence {
            let index = self.segment_index(seq) as usize;
            if self.segments[index].sequence == seq {
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
    /// superblock, then the scanned run of (sequence, barrier) from it.
    pub fn restore_ring(&mut self, head: u64, segments: &[(u64, bool)]) {
        self.reinitialise(head);
        for &(sequence, barrier) in segments {
            let index = self.segment_index(sequence) as usize;
            self.segments[index] =
                SegmentInfo { sequence, live_count: 0, superseded_by_max: 0, state: SegmentState::Durable, barrier };
            if barrier {
                self.durable_barrier_sequence = Some(sequence);
            }
            self.last_sealed = Some((sequence, barrier));
        }
        self.tail_sequence = segments.last().map_or(head, |&(sequence, _)| sequence + 1);
        self.durable_prefix_sequence = self.tail_sequence;
    }

    pub fn restore_entry(&mut self, loc: u32) {
        let index = self.loc_segment(loc) as usize;
        self.segments[index].live_count += 1;
        self.live_entries += 1;
    }

    pub fn note_superseded(&mut self, loc: u32, by_sequence: u64) {
        let index = self.loc_segment(loc) as usize;
        let info = &mut self.segments[index];
        info.superseded_by_max = info.superseded_by_max.max(by_sequence);
    }

    /// Forgets everything (all mirrors lost, or a fresh log) and restarts
    /// the ring at `first_sequence`.
    pub fn reinitialise(&mut self, first_sequence: u64) {
        for info in &mut self.segments {
            *info = SegmentInfo { sequence: 0, live_count: 0, superseded_by_max: 0, state: SegmentState::Free, barrier: false };
        }
        for b in &mut self.buffers {
            if b.state == BufferState::Open {
                b.state = if b.slot_reads_in_flight > 0 { BufferState::Draining } else { BufferState::Free };
            }
        }
        self.open_buffer = None;
        self.head_sequence = first_sequence;
        self.durable_head_sequence = first_sequence;
        self.tail_sequence = first_sequence;
        self.durable_prefix_sequence = first_sequence;
        self.durable_barrier_sequence = None;
        self.live_entries = 0;
        self.last_sealed = None;
    }

    pub fn describe(&self) -> String {
        let open = self.open_buffer.map(|b| {
            let b = &self.buffers[b];
            (b.sequence, b.slots_used, b.revokes_count, b.slot_reads_in_flight)
        });
        format!(
            "log head {} durable head {} tail {} durable prefix {} barrier {:?} free {} open {:?} buffers {:?} mirrors {:?} live {} head live {:?}",
            self.head_sequence,
            self.durable_head_sequence,
            self.tail_sequence,
            self.durable_prefix_sequence,
            self.durable_barrier_sequence,
            self.segments_free(),
            open,
            self.buffers.iter().map(|b| b.state).collect::<Vec<_>>(),
            self.mirrors,
            self.live_entries,
            self.head_live_count().map(|(seq, live)| (seq, live, self.segments[self.segment_index(seq) as usize].superseded_by_max)),
        )
    }

    pub fn memory_bytes(&self) -> usize {
        self.segments.len() * std::mem::size_of::<SegmentInfo>() + self.buffers.len() * std::mem::size_of::<LogBuffer>()
    }
}
