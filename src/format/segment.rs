//! Log segments: header blocks {fixed header, LBA table, revoke table} then
//! data slots of one cache block each.

use super::FormatError;

pub const SEGMENT_FIXED_HEADER_BYTES: usize = 64;

/// Geometry of one segment, derived from (segment size, block size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentLayout {
    pub block_size: u32,
    pub segment_bytes: u32,
    pub header_blocks: u32,
    /// Data slots per segment.
    pub slots: u32,
    pub revokes_capacity: u32,
}

impl SegmentLayout {
    pub fn new(segment_bytes: u32, block_size: u32) -> Result<Self, FormatError> {
        let _ = (segment_bytes, block_size);
        todo!("format helper")
    }
    pub fn header_bytes(&self) -> usize {
        (self.header_blocks * self.block_size) as usize
    }
    pub fn slot_offset(&self, slot: u32) -> usize {
        self.header_bytes() + (slot * self.block_size) as usize
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub instance_id: u64,
    pub segment_index: u32,
    pub sequence: u64,
    pub barrier: bool,
    /// Backing LBA of each used slot; `LBA_NONE` for a slot dropped in place.
    pub lbas: Vec<u64>,
    pub revokes: Vec<u64>,
}

/// Writing side: the engine fills the LBA/revoke tables in the buffer as it
/// appends, then seals.
pub fn set_slot_lba(layout: &SegmentLayout, buf: &mut [u8], slot: u32, lba: u64) {
    let _ = (layout, buf, slot, lba);
    todo!("format helper")
}

pub fn set_revoke(layout: &SegmentLayout, buf: &mut [u8], index: u32, lba: u64) {
    let _ = (layout, buf, index, lba);
    todo!("format helper")
}

/// Writes the fixed header and the checksum (over the header blocks and the
/// first `slots_used` data slots); returns the bytes to write (header + used slots).
#[allow(clippy::too_many_arguments)]
pub fn seal(
    layout: &SegmentLayout,
    buf: &mut [u8],
    instance_id: u64,
    segment_index: u32,
    sequence: u64,
    barrier: bool,
    slots_used: u32,
    revokes_count: u32,
) -> usize {
    let _ = (layout, buf, instance_id, segment_index, sequence, barrier, slots_used, revokes_count);
    todo!("format helper")
}

/// Length (header + used slots) a sealed segment claims, read from its first
/// block alone, so that a reader can fetch the rest.
pub fn sealed_len(layout: &SegmentLayout, first_block: &[u8]) -> Result<usize, FormatError> {
    let _ = (layout, first_block);
    todo!("format helper")
}

impl SegmentHeader {
    /// Validates a whole sealed segment (header + used slots, as `sealed_len` says).
    pub fn decode(layout: &SegmentLayout, bytes: &[u8]) -> Result<Self, FormatError> {
        let _ = (layout, bytes);
        todo!("format helper")
    }
}
