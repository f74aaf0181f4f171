//! Hand-built log images for the recovery tests, and the reference result a
//! replay must produce, computed independently of `plan_replay`.

use super::{LogScanner, Replay, ReplayError, ReplayReport, ScanError, ScannedLog};
use crate::config::LogLayout;
use crate::driver::mem::MemDevices;
use crate::format::segment::{PartFlags, PartPlace};
use crate::format::{seal, set_revoke, set_slot_lba, LogSuperblock, SegmentLayout, LBA_NONE, UNIT_BYTES};
use crate::io::{DeviceRole, HeapAllocator};

pub const BLOCK_SIZE: u32 = 4096;
pub const INSTANCE_ID: u64 = 0x4848_4300_0000_00AA;
pub const BACKING_BLOCKS: u64 = 24;

/// Segments of 8 blocks: one header block and 7 data slots.
pub fn layout(segments_count: u32) -> LogLayout {
    let segment = SegmentLayout::new(8 * BLOCK_SIZE, BLOCK_SIZE).unwrap();
    LogLayout { segment, segments_count, segments_offset_bytes: 2 * UNIT_BYTES as u64 }
}

/// Distinct contents for every (lba, version), so a wrong or stale block shows.
pub fn block_data(lba: u64, version: u64) -> Vec<u8> {
    let fill = lba.wrapping_mul(31).wrapping_add(version.wrapping_mul(7)).wrapping_add(1) as u8;
    let mut data = vec![fill; BLOCK_SIZE as usize];
    data[..8].copy_from_slice(&lba.to_le_bytes());
    data[8..16].copy_from_slice(&version.to_le_bytes());
    data
}

#[derive(Clone, Debug)]
pub struct SegmentSpec {
    pub sequence: u64,
    /// The engine run that wrote the part (1 unless a test says otherwise).
    pub run: u32,
    pub barrier: bool,
    /// (lba, version) per slot; `LBA_NONE` marks a hole.
    pub entries: Vec<(u64, u64)>,
    pub revokes: Vec<u64>,
    /// Blocks left unwritten after the part (`write_parts`; not after the
    /// part that ends its segment).
    pub gap_blocks: u32,
    /// The head the part records (0: none, as a part of version 5 reads).
    pub head_sequence: u64,
}

pub struct LogImage {
    pub layout: LogLayout,
    pub mirrors: Vec<Vec<u8>>,
}

impl LogImage {
    pub fn new(layout: LogLayout, mirrors_count: usize) -> LogImage {
        let len = layout.segment_offset(layout.segments_count) as usize;
        LogImage { layout, mirrors: vec![vec![0; len]; mirrors_count] }
    }

    pub fn superblock(&self, write_seq: u64, head_segment: u32, head_sequence: u64, mirror: usize) -> LogSuperblock {
        LogSuperblock {
            instance_id: INSTANCE_ID,
            write_seq,
            block_size: BLOCK_SIZE,
            segment_bytes: self.layout.segment.segment_bytes,
            segments_count: self.layout.segments_count,
            head_segment,
            head_sequence,
            mirrors_count: self.mirrors.len() as u8,
            mirror_index: mirror as u8,
            backing_blocks: BACKING_BLOCKS,
            in_sync_mask: LogSuperblock::all_mirrors_mask(self.mirrors.len() as u8),
            run: 1,
            replayed: false,
            previous_instance: 0,
        }
    }

    pub fn write_superblock_unit(&mut self, mirror: usize, unit: usize, superblock: &LogSuperblock) {
        superblock.encode(&mut self.mirrors[mirror][unit * UNIT_BYTES..]);
    }

    pub fn write_superblock(&mut self, write_seq: u64, head_segment: u32, head_sequence: u64) {
        for mirror in 0..self.mirrors.len() {
            let superblock = self.superblock(write_seq, head_segment, head_sequence, mirror);
            self.write_superblock_unit(mirror, (write_seq % 2) as usize, &superblock);
        }
    }

    /// A segment of one part (part 0, ending the segment).
    pub fn encode_segment(&self, segment_index: u32, spec: &SegmentSpec, instance_id: u64) -> Vec<u8> {
        self.encode_part(segment_index, 0, 0, spec, true, instance_id)
    }

    pub fn encode_part(
        &self,
        segment_index: u32,
        part: u32,
        first_block: u32,
        spec: &SegmentSpec,
        segment_end: bool,
        instance_id: u64,
    ) -> Vec<u8> {
        let layout = &self.layout.segment;
        let mut buf = vec![0xC3; layout.segment_bytes as usize];
        for (slot, &(lba, version)) in spec.entries.iter().enumerate() {
            set_slot_lba(layout, &mut buf, slot as u32, lba);
            let start = layout.slot_offset(slot as u32);
            buf[start..start + BLOCK_SIZE as usize].copy_from_slice(&block_data(lba, version));
        }
        for (index, &lba) in spec.revokes.iter().enumerate() {
            set_revoke(layout, &mut buf, index as u32, lba);
        }
        let (slots_used, revokes_count) = (spec.entries.len() as u32, spec.revokes.len() as u32);
        let place = PartPlace { instance_id, segment_index, sequence: spec.sequence, part, first_block, run: spec.run };
        let gap_blocks = if segment_end { 0 } else { spec.gap_blocks };
        let flags = PartFlags { barrier: spec.barrier, segment_end, gap_blocks, head_sequence: spec.head_sequence };
        let len = seal(layout, &mut buf, &place, flags, slots_used, revokes_count);
        buf.truncate(len);
        buf
    }

    /// Writes the parts `specs` (all of `segment_index`, in order) on every
    /// mirror, each after the one before and its gap; the last ends the
    /// segment if `segment_end`.
    pub fn write_parts(&mut self, segment_index: u32, specs: &[SegmentSpec], segment_end: bool) {
        let mut first_block = 0;
        for (part, spec) in specs.iter().enumerate() {
            let end = segment_end && part + 1 == specs.len();
            let bytes = self.encode_part(segment_index, part as u32, first_block, spec, end, INSTANCE_ID);
            let offset = self.layout.segment_offset(segment_index) as usize + first_block as usize * BLOCK_SIZE as usize;
            for mirror in &mut self.mirrors {
                mirror[offset..offset + bytes.len()].copy_from_slice(&bytes);
            }
            first_block += (bytes.len() / BLOCK_SIZE as usize) as u32 + spec.gap_blocks;
        }
    }

    pub fn write_segment_on(&mut self, mirror: usize, segment_index: u32, spec: &SegmentSpec) {
        let bytes = self.encode_segment(segment_index, spec, INSTANCE_ID);
        let offset = self.layout.segment_offset(segment_index) as usize;
        self.mirrors[mirror][offset..offset + bytes.len()].copy_from_slice(&bytes);
    }

    pub fn write_segment(&mut self, segment_index: u32, spec: &SegmentSpec) {
        for mirror in 0..self.mirrors.len() {
            self.write_segment_on(mirror, segment_index, spec);
        }
    }

    /// Flips one byte inside the segment's sealed range (header or data).
    pub fn corrupt_segment(&mut self, mirror: usize, segment_index: u32, byte: usize) {
        let offset = self.layout.segment_offset(segment_index) as usize;
        self.mirrors[mirror][offset + byte] ^= 0x10;
    }

    pub fn into_devices(self) -> MemDevices {
        let mut devices = MemDevices::new();
        for (mirror, bytes) in self.mirrors.into_iter().enumerate() {
            devices.insert(DeviceRole::Log(mirror as u8), bytes);
        }
        devices.insert(DeviceRole::Backing, vec![0; (BACKING_BLOCKS * BLOCK_SIZE as u64) as usize]);
        devices
    }
}

pub fn spec(sequence: u64, barrier: bool, entries: &[(u64, u64)], revokes: &[u64]) -> SegmentSpec {
    SegmentSpec { sequence, run: 1, barrier, entries: entries.to_vec(), revokes: revokes.to_vec(), gap_blocks: 0, head_sequence: 0 }
}

/// Backing contents after replaying the valid run `run`: for each LBA the
/// newest entry up to the last barrier, unless a later segment (up to the
/// barrier) revokes it; untouched blocks stay zero.
pub fn expected_backing(run: &[SegmentSpec]) -> Vec<u8> {
    let mut backing = vec![0u8; (BACKING_BLOCKS * BLOCK_SIZE as u64) as usize];
    let Some(last_barrier) = run.iter().rposition(|segment| segment.barrier) else { return backing };
    let replayed = &run[..=last_barrier];
    for lba in 0..BACKING_BLOCKS {
        let newest = replayed.iter().enumerate().rev().find_map(|(position, segment)| {
            segment
                .entries
                .iter()
                .rev()
                .find(|(entry_lba, _)| *entry_lba == lba)
                .map(|&(_, version)| (position, version))
        });
        let Some((position, version)) = newest else { continue };
        if replayed[position + 1..].iter().any(|later| later.revokes.contains(&lba)) {
            continue;
        }
        let start = (lba * BLOCK_SIZE as u64) as usize;
        backing[start..start + BLOCK_SIZE as usize].copy_from_slice(&block_data(lba, version));
    }
    backing
}

/// The furthest head a part sealed after `run` could truthfully record:
/// every segment before it holds no entry that is the newest, unrevoked
/// one of its LBA at the run's last barrier (0 without a barrier).
pub fn truthful_head(run: &[SegmentSpec]) -> u64 {
    let Some(last_barrier) = run.iter().rposition(|segment| segment.barrier) else { return 0 };
    let replayed = &run[..=last_barrier];
    let live_sequences = (0..BACKING_BLOCKS).filter_map(|lba| {
        let position = replayed.iter().rposition(|segment| segment.entries.iter().any(|(entry_lba, _)| *entry_lba == lba))?;
        let revoked = replayed[position + 1..].iter().any(|later| later.revokes.contains(&lba));
        (!revoked).then_some(replayed[position].sequence)
    });
    live_sequences.min().unwrap_or(replayed[last_barrier].sequence)
}

pub fn scan(devices: &mut MemDevices, layout: LogLayout, mirrors: &[u8]) -> Result<ScannedLog, ScanError> {
    run_scanner(devices, LogScanner::new(layout, mirrors.to_vec(), &mut HeapAllocator))
}

/// Runs a scanner made (and told) by the caller to its end.
pub fn run_scanner(devices: &mut MemDevices, mut scanner: LogScanner) -> Result<ScannedLog, ScanError> {
    devices.pump(&mut scanner).unwrap();
    assert!(scanner.is_done(), "the scanner stopped issuing commands before it finished");
    scanner.take_result().unwrap()
}

pub fn replay(
    devices: &mut MemDevices,
    layout: LogLayout,
    scanned: ScannedLog,
    mirrors: &[u8],
    backing_has_flush: bool,
) -> Result<ReplayReport, ReplayError> {
    let mut replay = Replay::new(layout, scanned, mirrors.to_vec(), backing_has_flush, &mut HeapAllocator);
    devices.pump(&mut replay).unwrap();
    assert!(replay.is_done(), "the replay stopped issuing commands before it finished");
    replay.result().unwrap().clone()
}

/// A hole in a segment spec's entry list.
pub const HOLE: (u64, u64) = (LBA_NONE, 0);
