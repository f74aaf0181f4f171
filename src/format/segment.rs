//! Log segments and their parts. A segment is a fixed-size place on the log
//! device (the unit of space: the ring, the head, reclamation); it is written
//! in *parts*, packed back to back from its first block. A part is a header
//! (fixed header, LBA table, revoke table; `header_blocks` blocks) followed by
//! the data slots it holds, one cache block each. A barrier seals the open
//! part, not the segment, so log space follows the bytes written rather than
//! the number of barriers (docs/format.md says why this design).
//!
//! (About half of the file is its tests: the decoders against garbage.)

use super::codec::{
    check_block_size, check_crc, check_magic_and_versions, check_zero, get_u16, get_u32, get_u64, put_u16, put_u32,
    put_u64, store_crc,
};
use super::{FormatError, LBA_NONE, LOG_FORMAT_VERSION, LOG_FORMAT_VERSIONS_READ};

pub const SEGMENT_FIXED_HEADER_BYTES: usize = 80;

pub const SEGMENT_MAGIC: u32 = 0x4848_4347; // "HHCG"

/// Largest segment; bounds every allocation a reader makes from a header.
pub const SEGMENT_MAX_BYTES: u32 = 64 << 20;

const MIN_BLOCKS_PER_SEGMENT: u32 = 4;
const TABLE_ENTRY_BYTES: usize = 8;
const FLAG_BARRIER: u16 = 1;
const FLAG_SEGMENT_END: u16 = 2;

// Fixed header byte offsets; docs/format.md has the same table.
const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 4;
const OFF_FLAGS: usize = 6;
const OFF_TOTAL_LEN: usize = 8;
const OFF_CRC: usize = 12;
const OFF_INSTANCE_ID: usize = 16;
const OFF_SEQUENCE: usize = 24;
const OFF_SEGMENT_INDEX: usize = 32;
const OFF_HEADER_BLOCKS: usize = 36;
const OFF_SLOTS_USED: usize = 40;
const OFF_REVOKES_COUNT: usize = 44;
const OFF_BLOCK_SIZE: usize = 48;
const OFF_SEGMENT_BYTES: usize = 52;
const OFF_PART: usize = 56;
const OFF_FIRST_BLOCK: usize = 60;
const OFF_RUN: usize = 64;
const OFF_GAP_BLOCKS: usize = 68;
/// The log's head when the part was sealed (version 6; reserved, zero, before).
const OFF_HEAD_SEQUENCE: usize = 72;
/// The first log format version whose parts record the head.
const HEAD_SEQUENCE_SINCE: u16 = 6;

/// Geometry of one segment, derived from (segment size, block size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentLayout {
    pub block_size: u32,
    pub segment_bytes: u32,
    /// Header blocks of every part.
    pub header_blocks: u32,
    /// Data slots of a part that fills the whole segment (the LBA table's size).
    pub slots: u32,
    pub revokes_capacity: u32,
}

impl SegmentLayout {
    pub fn new(segment_bytes: u32, block_size: u32) -> Result<Self, FormatError> {
        check_block_size(block_size)?;
        if !segment_bytes.is_multiple_of(block_size) || segment_bytes > SEGMENT_MAX_BYTES {
            return Err(FormatError::BadLength);
        }
        let blocks = segment_bytes / block_size;
        if blocks < MIN_BLOCKS_PER_SEGMENT {
            return Err(FormatError::BadLength);
        }
        // The smallest header that fits the LBA table plus room for revoking a
        // quarter of a segment's worth of blocks; header blocks cost data slots.
        let header_blocks = (1..blocks)
            .find(|&h| header_need_bytes(blocks - h) <= h as u64 * block_size as u64)
            .ok_or(FormatError::BadLength)?;
        let slots = blocks - header_blocks;
        let table_bytes = (header_blocks as u64 * block_size as u64) - revoke_table_offset_for(slots) as u64;
        Ok(SegmentLayout {
            block_size,
            segment_bytes,
            header_blocks,
            slots,
            revokes_capacity: (table_bytes / TABLE_ENTRY_BYTES as u64) as u32,
        })
    }

    /// Blocks of the whole segment.
    pub fn blocks(&self) -> u32 {
        self.segment_bytes / self.block_size
    }

    pub fn header_bytes(&self) -> usize {
        (self.header_blocks * self.block_size) as usize
    }

    /// Offset of data slot `slot` from the start of its part.
    pub fn slot_offset(&self, slot: u32) -> usize {
        self.header_bytes() + (slot * self.block_size) as usize
    }

    /// Bytes a sealed part with `slots_used` data slots occupies.
    pub fn sealed_bytes(&self, slots_used: u32) -> usize {
        self.slot_offset(slots_used)
    }

    /// Data slots a part starting at block `first_block` may hold.
    pub fn part_slots(&self, first_block: u32) -> u32 {
        self.blocks().saturating_sub(first_block + self.header_blocks)
    }

    /// Whether another part (its header and at least one data slot) fits
    /// from block `next_block` on. When it does not, the part before ends
    /// the segment and the log goes on in the next one.
    pub fn has_room_for_part(&self, next_block: u32) -> bool {
        (next_block as u64 + self.header_blocks as u64) < self.blocks() as u64
    }

    fn lba_entry_offset(&self, slot: u32) -> usize {
        SEGMENT_FIXED_HEADER_BYTES + slot as usize * TABLE_ENTRY_BYTES
    }

    fn revoke_entry_offset(&self, index: u32) -> usize {
        revoke_table_offset_for(self.slots) + index as usize * TABLE_ENTRY_BYTES
    }
}

fn header_need_bytes(slots: u32) -> u64 {
    SEGMENT_FIXED_HEADER_BYTES as u64 + 8 * slots as u64 + 8 * (slots as u64).div_ceil(4)
}

fn revoke_table_offset_for(slots: u32) -> usize {
    SEGMENT_FIXED_HEADER_BYTES + slots as usize * TABLE_ENTRY_BYTES
}

/// Where a part belongs: which log, which segment (place and sequence), which
/// part of it, starting at which block. A reader checks every field against
/// the place it read the part from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartPlace {
    pub instance_id: u64,
    pub segment_index: u32,
    pub sequence: u64,
    /// 0 for the segment's first part, +1 for each part after it.
    pub part: u32,
    /// Block of the segment where the part starts (0 for part 0).
    pub first_block: u32,
    /// The engine run (+1 per warm restart, recorded in the log superblock
    /// before the run writes any part) that wrote the part: a scan never
    /// goes from a part of one run to a part of an earlier one.
    pub run: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub instance_id: u64,
    pub segment_index: u32,
    pub sequence: u64,
    pub part: u32,
    pub first_block: u32,
    pub run: u32,
    pub barrier: bool,
    /// The last part of its segment: the next part is the next segment's first.
    pub segment_end: bool,
    /// Blocks left unwritten after the part: the next part of the segment
    /// starts that much further on (0 with `segment_end`).
    pub gap_blocks: u32,
    /// The log's head when the part was sealed: no segment before it held
    /// an entry a recovery needs. 0 in a part of version 5 or older.
    pub head_sequence: u64,
    /// Backing LBA of each used slot; `LBA_NONE` for a slot dropped in place.
    pub lbas: Vec<u64>,
    pub revokes: Vec<u64>,
}

impl SegmentHeader {
    /// Block where the part after this one starts (in this segment unless
    /// `segment_end`).
    pub fn next_block(&self, layout: &SegmentLayout) -> u32 {
        self.first_block + layout.header_blocks + self.lbas.len() as u32 + self.gap_blocks
    }
}

/// Writing side: the engine fills the LBA/revoke tables of the open part (in
/// a buffer starting at the part's first block) as it appends, then seals.
pub fn set_slot_lba(layout: &SegmentLayout, buf: &mut [u8], slot: u32, lba: u64) {
    assert!(slot < layout.slots, "slot {slot} out of {} slots", layout.slots);
    put_u64(buf, layout.lba_entry_offset(slot), lba);
}

pub fn set_revoke(layout: &SegmentLayout, buf: &mut [u8], index: u32, lba: u64) {
    assert!(index < layout.revokes_capacity, "revoke {index} out of {} entries", layout.revokes_capacity);
    put_u64(buf, layout.revoke_entry_offset(index), lba);
}

/// How a part is sealed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PartFlags {
    /// The last part of a barrier: a recovery replays up to the last one.
    pub barrier: bool,
    pub segment_end: bool,
    /// Blocks skipped after the part, before the next one (0 with
    /// `segment_end`): on a rotating log, the next barrier's part then
    /// starts where the head will be when it comes, not where the head has
    /// just been (docs/format.md).
    pub gap_blocks: u32,
    /// The log's head (a segment sequence) as the part is sealed; at most
    /// the part's own sequence.
    pub head_sequence: u64,
}

/// Writes the fixed header and the checksum (over the header blocks and the
/// first `slots_used` data slots) of the part that starts at `buf[0]`;
/// returns the bytes to write (header + used slots).
pub fn seal(
    layout: &SegmentLayout,
    buf: &mut [u8],
    place: &PartPlace,
    flags: PartFlags,
    slots_used: u32,
    revokes_count: u32,
) -> usize {
    assert!(slots_used <= layout.part_slots(place.first_block), "slots_used {slots_used} past the segment's end");
    assert!(revokes_count <= layout.revokes_capacity, "revokes_count {revokes_count} > {}", layout.revokes_capacity);
    let next_block = place.first_block + layout.header_blocks + slots_used;
    assert!(!flags.segment_end || flags.gap_blocks == 0, "a gap after the segment's last part");
    assert!(flags.head_sequence <= place.sequence, "head {} past the part's segment {}", flags.head_sequence, place.sequence);
    assert!(
        flags.segment_end || layout.has_room_for_part(next_block.saturating_add(flags.gap_blocks)),
        "a part leaving no room must end its segment"
    );
    let total_len = layout.sealed_bytes(slots_used);
    let sealed = &mut buf[..total_len];
    // A reused buffer still holds an earlier part's tables; clearing the
    // unused tails makes the sealed bytes depend only on this part.
    sealed[layout.lba_entry_offset(slots_used)..layout.lba_entry_offset(layout.slots)].fill(0);
    sealed[layout.revoke_entry_offset(revokes_count)..layout.header_bytes()].fill(0);
    sealed[..SEGMENT_FIXED_HEADER_BYTES].fill(0);
    let bits = if flags.barrier { FLAG_BARRIER } else { 0 } | if flags.segment_end { FLAG_SEGMENT_END } else { 0 };
    put_u32(sealed, OFF_MAGIC, SEGMENT_MAGIC);
    put_u16(sealed, OFF_VERSION, LOG_FORMAT_VERSION);
    put_u16(sealed, OFF_FLAGS, bits);
    put_u32(sealed, OFF_TOTAL_LEN, total_len as u32);
    put_u64(sealed, OFF_INSTANCE_ID, place.instance_id);
    put_u64(sealed, OFF_SEQUENCE, place.sequence);
    put_u32(sealed, OFF_SEGMENT_INDEX, place.segment_index);
    put_u32(sealed, OFF_HEADER_BLOCKS, layout.header_blocks);
    put_u32(sealed, OFF_SLOTS_USED, slots_used);
    put_u32(sealed, OFF_REVOKES_COUNT, revokes_count);
    put_u32(sealed, OFF_BLOCK_SIZE, layout.block_size);
    put_u32(sealed, OFF_SEGMENT_BYTES, layout.segment_bytes);
    put_u32(sealed, OFF_PART, place.part);
    put_u32(sealed, OFF_FIRST_BLOCK, place.first_block);
    put_u32(sealed, OFF_RUN, place.run);
    put_u32(sealed, OFF_GAP_BLOCKS, flags.gap_blocks);
    put_u64(sealed, OFF_HEAD_SEQUENCE, flags.head_sequence);
    store_crc(sealed, OFF_CRC);
    total_len
}

/// Length (header + used slots) a sealed part claims, read from its first
/// block alone, so that a reader can fetch the rest.
pub fn sealed_len(layout: &SegmentLayout, first_block: &[u8]) -> Result<usize, FormatError> {
    FixedHeader::parse(layout, first_block).map(|fixed| fixed.total_len)
}

/// The fixed header fields that can be checked without the checksum.
struct FixedHeader {
    total_len: usize,
    slots_used: u32,
    revokes_count: u32,
    flags: PartFlags,
}

impl FixedHeader {
    fn parse(layout: &SegmentLayout, bytes: &[u8]) -> Result<Self, FormatError> {
        let fixed = bytes.get(..SEGMENT_FIXED_HEADER_BYTES).ok_or(FormatError::Truncated)?;
        check_magic_and_versions(fixed, SEGMENT_MAGIC, LOG_FORMAT_VERSIONS_READ)?;
        let bits = get_u16(fixed, OFF_FLAGS);
        if bits & !(FLAG_BARRIER | FLAG_SEGMENT_END) != 0 {
            return Err(FormatError::BadField("flags"));
        }
        let gap_blocks = get_u32(fixed, OFF_GAP_BLOCKS);
        // Older versions wrote zeroes here (a reserved field).
        if get_u16(fixed, OFF_VERSION) < HEAD_SEQUENCE_SINCE {
            check_zero(&fixed[OFF_HEAD_SEQUENCE..], "reserved")?;
        }
        let head_sequence = get_u64(fixed, OFF_HEAD_SEQUENCE);
        if head_sequence > get_u64(fixed, OFF_SEQUENCE) {
            return Err(FormatError::BadField("head_sequence"));
        }
        let flags = PartFlags {
            barrier: bits & FLAG_BARRIER != 0,
            segment_end: bits & FLAG_SEGMENT_END != 0,
            gap_blocks,
            head_sequence,
        };
        check_geometry(layout, fixed)?;
        let part = get_u32(fixed, OFF_PART);
        let first_block = get_u32(fixed, OFF_FIRST_BLOCK);
        // Every part takes at least its header block, so part <= first_block.
        if first_block >= layout.blocks() || (part == 0) != (first_block == 0) || part > first_block {
            return Err(FormatError::BadField("part place"));
        }
        let slots_used = get_u32(fixed, OFF_SLOTS_USED);
        let revokes_count = get_u32(fixed, OFF_REVOKES_COUNT);
        if slots_used > layout.part_slots(first_block) || revokes_count > layout.revokes_capacity {
            return Err(FormatError::BadLength);
        }
        let next_block = first_block + layout.header_blocks + slots_used;
        if flags.segment_end && gap_blocks != 0 {
            return Err(FormatError::BadField("gap_blocks"));
        }
        // (u64: a garbage gap must not wrap round to a place that fits.)
        if !flags.segment_end && !layout.has_room_for_part(next_block.saturating_add(gap_blocks)) {
            return Err(FormatError::BadField(if gap_blocks == 0 { "segment end" } else { "gap_blocks" }));
        }
        let total_len = get_u32(fixed, OFF_TOTAL_LEN) as usize;
        if total_len != layout.sealed_bytes(slots_used) {
            return Err(FormatError::BadLength);
        }
        Ok(FixedHeader { total_len, slots_used, revokes_count, flags })
    }
}

/// A segment written with another geometry cannot be read with this one.
fn check_geometry(layout: &SegmentLayout, fixed: &[u8]) -> Result<(), FormatError> {
    if get_u32(fixed, OFF_BLOCK_SIZE) != layout.block_size || get_u32(fixed, OFF_SEGMENT_BYTES) != layout.segment_bytes
    {
        return Err(FormatError::BadField("geometry"));
    }
    if get_u32(fixed, OFF_HEADER_BLOCKS) != layout.header_blocks {
        return Err(FormatError::BadField("header_blocks"));
    }
    Ok(())
}

impl SegmentHeader {
    /// Validates a whole sealed part (header + used slots, as `sealed_len` says).
    pub fn decode(layout: &SegmentLayout, bytes: &[u8]) -> Result<Self, FormatError> {
        let fixed = FixedHeader::parse(layout, bytes)?;
        let sealed = bytes.get(..fixed.total_len).ok_or(FormatError::Truncated)?;
        check_crc(sealed, OFF_CRC)?;
        check_unused_tables_zero(layout, sealed, &fixed)?;
        let lbas = read_table(sealed, layout.lba_entry_offset(0), fixed.slots_used);
        let revokes = read_table(sealed, layout.revoke_entry_offset(0), fixed.revokes_count);
        if revokes.contains(&LBA_NONE) {
            return Err(FormatError::BadField("revoke lba"));
        }
        Ok(SegmentHeader {
            instance_id: get_u64(sealed, OFF_INSTANCE_ID),
            segment_index: get_u32(sealed, OFF_SEGMENT_INDEX),
            sequence: get_u64(sealed, OFF_SEQUENCE),
            part: get_u32(sealed, OFF_PART),
            first_block: get_u32(sealed, OFF_FIRST_BLOCK),
            run: get_u32(sealed, OFF_RUN),
            barrier: fixed.flags.barrier,
            segment_end: fixed.flags.segment_end,
            gap_blocks: fixed.flags.gap_blocks,
            head_sequence: fixed.flags.head_sequence,
            lbas,
            revokes,
        })
    }
}

/// The parts of one segment read whole (as reclamation reads it), in order
/// from part 0, as long as each decodes, sits where its predecessor says the
/// next one starts and belongs to `sequence`; stops after the segment's end.
pub fn decode_parts(
    layout: &SegmentLayout,
    segment: &[u8],
    instance_id: u64,
    sequence: u64,
    mut visit: impl FnMut(&SegmentHeader),
) {
    let (mut part, mut first_block) = (0u32, 0u32);
    loop {
        let start = first_block as usize * layout.block_size as usize;
        let Some(bytes) = segment.get(start..) else { return };
        let Ok(header) = sealed_len(layout, bytes).and_then(|len| SegmentHeader::decode(layout, &bytes[..len.min(bytes.len())]))
        else {
            return;
        };
        let expected = (instance_id, sequence, part, first_block);
        if (header.instance_id, header.sequence, header.part, header.first_block) != expected {
            return;
        }
        visit(&header);
        if header.segment_end {
            return;
        }
        first_block = header.next_block(layout);
        part += 1;
    }
}

fn check_unused_tables_zero(layout: &SegmentLayout, sealed: &[u8], fixed: &FixedHeader) -> Result<(), FormatError> {
    let unused_lbas = layout.lba_entry_offset(fixed.slots_used)..layout.lba_entry_offset(layout.slots);
    check_zero(&sealed[unused_lbas], "unused lba entry")?;
    let unused_revokes = layout.revoke_entry_offset(fixed.revokes_count)..layout.header_bytes();
    check_zero(&sealed[unused_revokes], "unused revoke entry")
}

/// `count` is bounded by the layout, so the allocation is too.
fn read_table(sealed: &[u8], offset: usize, count: u32) -> Vec<u64> {
    (0..count as usize).map(|i| get_u64(sealed, offset + i * TABLE_ENTRY_BYTES)).collect()
}

#[cfg(test)]
mod tests {
    use super::super::codec::test_support::flip_bit;
    use super::*;
    use proptest::prelude::*;

    const BS: u32 = 4096;

    fn small_layout() -> SegmentLayout {
        SegmentLayout::new(8 * BS, BS).unwrap()
    }

    const PLACE: PartPlace = PartPlace { instance_id: 77, segment_index: 5, sequence: 1000, part: 0, first_block: 0, run: 3 };

    /// The head recorded by the test parts: behind `PLACE.sequence`.
    const HEAD: u64 = 990;

    fn flags(barrier: bool) -> PartFlags {
        PartFlags { barrier, segment_end: true, gap_blocks: 0, head_sequence: HEAD }
    }

    /// A sealed part 0 (ending its segment) whose data slot `i` is filled with byte `i + 1`.
    fn build(layout: &SegmentLayout, lbas: &[u64], revokes: &[u64], barrier: bool, fill: u8) -> (Vec<u8>, usize) {
        let mut buf = vec![fill; layout.segment_bytes as usize];
        for (slot, &lba) in lbas.iter().enumerate() {
            set_slot_lba(layout, &mut buf, slot as u32, lba);
            let start = layout.slot_offset(slot as u32);
            buf[start..start + layout.block_size as usize].fill(slot as u8 + 1);
        }
        for (index, &lba) in revokes.iter().enumerate() {
            set_revoke(layout, &mut buf, index as u32, lba);
        }
        let len = seal(layout, &mut buf, &PLACE, flags(barrier), lbas.len() as u32, revokes.len() as u32);
        (buf, len)
    }

    #[test]
    fn layout_geometry() {
        let one_mib = SegmentLayout::new(1 << 20, BS).unwrap();
        assert_eq!((one_mib.header_blocks, one_mib.slots, one_mib.revokes_capacity), (1, 255, 247));
        let max = SegmentLayout::new(SEGMENT_MAX_BYTES, BS).unwrap();
        assert_eq!((max.header_blocks, max.slots, max.revokes_capacity), (40, 16344, 4126));
        let big_blocks = SegmentLayout::new(4 * 65536, 65536).unwrap();
        assert_eq!((big_blocks.header_blocks, big_blocks.slots), (1, 3));
    }

    #[test]
    fn layout_rejects_bad_geometry() {
        assert_eq!(SegmentLayout::new(1 << 20, 2048), Err(FormatError::BadField("block_size")));
        assert_eq!(SegmentLayout::new(1 << 20, 3 * 4096), Err(FormatError::BadField("block_size")));
        assert_eq!(SegmentLayout::new(1 << 20, 1 << 17), Err(FormatError::BadField("block_size")));
        assert_eq!(SegmentLayout::new(3 * BS, BS), Err(FormatError::BadLength));
        assert_eq!(SegmentLayout::new(4 * BS + 512, BS), Err(FormatError::BadLength));
        assert_eq!(SegmentLayout::new(SEGMENT_MAX_BYTES + BS, BS), Err(FormatError::BadLength));
    }

    #[test]
    fn round_trip_with_holes_revokes_and_barrier() {
        let layout = small_layout();
        let lbas = [10, LBA_NONE, 12];
        let (buf, len) = build(&layout, &lbas, &[3, 4], true, 0);
        assert_eq!(len, layout.header_bytes() + 3 * BS as usize);
        assert_eq!(sealed_len(&layout, &buf[..BS as usize]), Ok(len));
        let header = SegmentHeader::decode(&layout, &buf[..len]).unwrap();
        let expected = SegmentHeader {
            instance_id: 77,
            segment_index: 5,
            sequence: 1000,
            part: 0,
            first_block: 0,
            run: 3,
            barrier: true,
            segment_end: true,
            gap_blocks: 0,
            head_sequence: HEAD,
            lbas: lbas.to_vec(),
            revokes: vec![3, 4],
        };
        assert_eq!(header, expected);
    }

    #[test]
    fn parts_pack_back_to_back_and_are_read_in_order() {
        let layout = small_layout();
        let mut segment = vec![0u8; layout.segment_bytes as usize];
        let mut place = PartPlace { part: 0, first_block: 0, ..PLACE };
        // Part 0: one slot, a barrier; part 1: revokes only; part 2: two slots, the end.
        let parts: [(&[u64], &[u64], PartFlags); 3] = [
            (&[40], &[], PartFlags { barrier: true, segment_end: false, gap_blocks: 0, head_sequence: HEAD }),
            (&[], &[40], PartFlags { barrier: false, segment_end: false, gap_blocks: 0, head_sequence: HEAD }),
            (&[41, 42], &[], PartFlags { barrier: true, segment_end: true, gap_blocks: 0, head_sequence: HEAD }),
        ];
        for (lbas, revokes, flags) in parts {
            let start = place.first_block as usize * BS as usize;
            let buf = &mut segment[start..];
            for (slot, &lba) in lbas.iter().enumerate() {
                set_slot_lba(&layout, buf, slot as u32, lba);
            }
            for (index, &lba) in revokes.iter().enumerate() {
                set_revoke(&layout, buf, index as u32, lba);
            }
            let len = seal(&layout, buf, &place, flags, lbas.len() as u32, revokes.len() as u32);
            assert_eq!(len, layout.sealed_bytes(lbas.len() as u32));
            place.first_block += (len / BS as usize) as u32;
            place.part += 1;
        }
        assert_eq!(place.first_block, 6, "parts take header + slots, no more");
        let mut seen = Vec::new();
        decode_parts(&layout, &segment, 77, 1000, |h| seen.push((h.part, h.first_block, h.lbas.clone(), h.barrier)));
        assert_eq!(seen, vec![(0, 0, vec![40], true), (1, 2, vec![], false), (2, 3, vec![41, 42], true)]);
        // Another segment's sequence, or a part misplaced, ends the walk.
        let mut count = 0;
        decode_parts(&layout, &segment, 77, 1001, |_| count += 1);
        assert_eq!(count, 0);
        let mut moved = segment.clone();
        moved.copy_within(2 * BS as usize..3 * BS as usize, 4 * BS as usize);
        moved[2 * BS as usize..3 * BS as usize].fill(0);
        decode_parts(&layout, &moved, 77, 1000, |_| count += 1);
        assert_eq!(count, 1);
    }

    #[test]
    #[should_panic(expected = "must end its segment")]
    fn a_part_leaving_no_room_must_end_the_segment() {
        let layout = small_layout();
        let mut buf = vec![0u8; layout.segment_bytes as usize];
        seal(&layout, &mut buf, &PLACE, PartFlags { barrier: true, segment_end: false, gap_blocks: 0, head_sequence: HEAD }, 6, 0);
    }

    #[test]
    fn a_gap_moves_the_next_part_and_is_followed() {
        let layout = SegmentLayout::new(16 * BS, BS).unwrap();
        let mut segment = vec![0u8; layout.segment_bytes as usize];
        // Part 0 (a barrier, one slot) leaves 5 blocks unwritten; part 1
        // starts after them and ends the segment.
        let first = PartPlace { part: 0, first_block: 0, ..PLACE };
        set_slot_lba(&layout, &mut segment, 0, 40);
        let gapped = PartFlags { barrier: true, segment_end: false, gap_blocks: 5, head_sequence: HEAD };
        let len = seal(&layout, &mut segment, &first, gapped, 1, 0);
        let header = SegmentHeader::decode(&layout, &segment[..len]).unwrap();
        assert_eq!((header.gap_blocks, header.next_block(&layout)), (5, 7));
        assert_eq!(get_u32(&segment, OFF_GAP_BLOCKS), 5, "the gap at offset 68");
        let second = PartPlace { part: 1, first_block: 7, ..PLACE };
        let start = 7 * BS as usize;
        set_slot_lba(&layout, &mut segment[start..], 0, 41);
        seal(&layout, &mut segment[start..], &second, PartFlags { barrier: true, segment_end: true, gap_blocks: 0, head_sequence: HEAD }, 1, 0);
        let mut seen = Vec::new();
        decode_parts(&layout, &segment, 77, 1000, |h| seen.push((h.part, h.first_block, h.gap_blocks, h.lbas.clone())));
        assert_eq!(seen, vec![(0, 0, 5, vec![40]), (1, 7, 0, vec![41])]);
        // Without the gap the walk looks for part 1 right after part 0 and stops there.
        let mut packed = segment.clone();
        put_u32(&mut packed, OFF_GAP_BLOCKS, 0);
        store_crc(&mut packed[..len], OFF_CRC);
        let mut count = 0;
        decode_parts(&layout, &packed, 77, 1000, |_| count += 1);
        assert_eq!(count, 1);
    }

    #[test]
    #[should_panic(expected = "must end its segment")]
    fn a_gap_must_leave_room_for_a_part() {
        let layout = small_layout();
        let mut buf = vec![0u8; layout.segment_bytes as usize];
        // A header and a slot, then 5 blocks skipped, leave 1 of 8: no room
        // for a header and a slot (with 4 skipped there would be).
        seal(&layout, &mut buf, &PLACE, PartFlags { barrier: true, segment_end: false, gap_blocks: 5, head_sequence: HEAD }, 1, 0);
    }

    #[test]
    fn version_3_parts_are_refused() {
        let layout = small_layout();
        let (mut buf, len) = build(&layout, &[1], &[], true, 0);
        put_u16(&mut buf, OFF_VERSION, 3);
        store_crc(&mut buf[..len], OFF_CRC);
        assert_eq!(sealed_len(&layout, &buf), Err(FormatError::UnsupportedVersion(3)));
        assert_eq!(SegmentHeader::decode(&layout, &buf), Err(FormatError::UnsupportedVersion(3)));
    }

    #[test]
    fn empty_segment_is_header_only() {
        let layout = small_layout();
        let (buf, len) = build(&layout, &[], &[9], false, 0);
        assert_eq!(len, layout.header_bytes());
        let header = SegmentHeader::decode(&layout, &buf).unwrap();
        assert!(header.lbas.is_empty() && !header.barrier);
        assert_eq!(header.revokes, vec![9]);
    }

    #[test]
    fn reused_buffer_seals_like_a_fresh_one() {
        let layout = small_layout();
        let (mut reused, _) = build(&layout, &[1, 2, 3, 4, 5], &[6, 7, 8], false, 0xEE);
        let (fresh, len) = build(&layout, &[1, 2], &[6], false, 0);
        for (slot, lba) in [(0u32, 1u64), (1, 2)] {
            set_slot_lba(&layout, &mut reused, slot, lba);
        }
        assert_eq!(seal(&layout, &mut reused, &PLACE, flags(false), 2, 1), len);
        assert_eq!(reused[..len], fresh[..len]);
    }

    #[test]
    #[should_panic(expected = "out of")]
    fn set_slot_lba_past_the_table_panics() {
        let layout = small_layout();
        set_slot_lba(&layout, &mut vec![0; layout.segment_bytes as usize], layout.slots, 1);
    }

    /// Rewrites a u32 header field and re-seals the checksum over `len` bytes.
    fn patched(buf: &[u8], len: usize, offset: usize, value: u32) -> Vec<u8> {
        let mut copy = buf.to_vec();
        put_u32(&mut copy, offset, value);
        store_crc(&mut copy[..len], OFF_CRC);
        copy
    }

    #[test]
    fn sealed_len_rejects_each_error() {
        let layout = small_layout();
        let (buf, len) = build(&layout, &[1, 2], &[], true, 0);
        let check = |bytes: &[u8]| sealed_len(&layout, bytes);
        assert_eq!(check(&buf[..63]), Err(FormatError::Truncated));
        assert_eq!(check(&patched(&buf, len, OFF_MAGIC, 1)), Err(FormatError::BadMagic));
        let mut version = buf.clone();
        put_u16(&mut version, OFF_VERSION, 1);
        assert_eq!(check(&version), Err(FormatError::UnsupportedVersion(1)));
        let mut bad_flags = buf.clone();
        put_u16(&mut bad_flags, OFF_FLAGS, 4);
        assert_eq!(check(&bad_flags), Err(FormatError::BadField("flags")));
        assert_eq!(check(&patched(&buf, len, OFF_PART, 1)), Err(FormatError::BadField("part place")));
        assert_eq!(check(&patched(&buf, len, OFF_FIRST_BLOCK, 1)), Err(FormatError::BadField("part place")));
        assert_eq!(check(&patched(&buf, len, OFF_FIRST_BLOCK, 8)), Err(FormatError::BadField("part place")));
        // Two slots of an 8-block segment leave room for another part: it may go on.
        let mut going_on = buf.clone();
        put_u16(&mut going_on, OFF_FLAGS, FLAG_BARRIER);
        store_crc(&mut going_on[..len], OFF_CRC);
        assert_eq!(check(&going_on), Ok(len));
        // Six of eight leave none: the part must end its segment.
        let (full, full_len) = build(&layout, &[1, 2, 3, 4, 5, 6], &[], false, 0);
        let mut not_ended = full.clone();
        put_u16(&mut not_ended, OFF_FLAGS, 0);
        store_crc(&mut not_ended[..full_len], OFF_CRC);
        assert_eq!(check(&not_ended), Err(FormatError::BadField("segment end")));
        // A head past the part's own segment: no engine seals that.
        assert_eq!(check(&patched(&buf, len, OFF_HEAD_SEQUENCE, 1001)), Err(FormatError::BadField("head_sequence")));
        assert_eq!(check(&patched(&buf, len, OFF_HEAD_SEQUENCE + 4, 1)), Err(FormatError::BadField("head_sequence")));
        assert_eq!(check(&patched(&buf, len, OFF_HEAD_SEQUENCE, 1000)), Ok(len));
        // A gap after the segment's last part means nothing.
        assert_eq!(check(&patched(&buf, len, OFF_GAP_BLOCKS, 1)), Err(FormatError::BadField("gap_blocks")));
        // Two slots end at block 3: a gap of 3 leaves a header and a slot, 4 does not.
        assert_eq!(check(&patched(&going_on, len, OFF_GAP_BLOCKS, 3)), Ok(len));
        assert_eq!(check(&patched(&going_on, len, OFF_GAP_BLOCKS, 4)), Err(FormatError::BadField("gap_blocks")));
        assert_eq!(check(&patched(&going_on, len, OFF_GAP_BLOCKS, u32::MAX)), Err(FormatError::BadField("gap_blocks")));
        assert_eq!(check(&patched(&buf, len, OFF_BLOCK_SIZE, 8192)), Err(FormatError::BadField("geometry")));
        assert_eq!(check(&patched(&buf, len, OFF_SEGMENT_BYTES, 1 << 20)), Err(FormatError::BadField("geometry")));
        assert_eq!(check(&patched(&buf, len, OFF_HEADER_BLOCKS, 2)), Err(FormatError::BadField("header_blocks")));
        assert_eq!(check(&patched(&buf, len, OFF_SLOTS_USED, layout.slots + 1)), Err(FormatError::BadLength));
        let too_many_revokes = patched(&buf, len, OFF_REVOKES_COUNT, layout.revokes_capacity + 1);
        assert_eq!(check(&too_many_revokes), Err(FormatError::BadLength));
        assert_eq!(check(&patched(&buf, len, OFF_SLOTS_USED, 3)), Err(FormatError::BadLength));
        assert_eq!(check(&patched(&buf, len, OFF_TOTAL_LEN, u32::MAX)), Err(FormatError::BadLength));
    }

    #[test]
    fn records_the_head_and_reads_a_version_5_part_as_recording_none() {
        let layout = small_layout();
        let (buf, len) = build(&layout, &[1, 2], &[], true, 0);
        assert_eq!(SegmentHeader::decode(&layout, &buf[..len]).unwrap().head_sequence, HEAD);
        // Version 5 had a reserved field there, written as zeroes.
        let mut older = buf.clone();
        put_u16(&mut older, OFF_VERSION, HEAD_SEQUENCE_SINCE - 1);
        put_u64(&mut older, OFF_HEAD_SEQUENCE, 0);
        store_crc(&mut older[..len], OFF_CRC);
        assert_eq!(SegmentHeader::decode(&layout, &older[..len]).unwrap().head_sequence, 0);
        let reserved_set = patched(&older, len, OFF_HEAD_SEQUENCE, 1);
        assert_eq!(sealed_len(&layout, &reserved_set), Err(FormatError::BadField("reserved")));
    }

    #[test]
    #[should_panic(expected = "past the part's segment")]
    fn sealing_a_head_past_the_part_panics() {
        let layout = small_layout();
        let flags = PartFlags { head_sequence: PLACE.sequence + 1, ..flags(false) };
        seal(&layout, &mut vec![0; layout.segment_bytes as usize], &PLACE, flags, 0, 0);
    }

    #[test]
    fn decode_rejects_each_error() {
        let layout = small_layout();
        let (buf, len) = build(&layout, &[1, 2], &[5], true, 0);
        assert_eq!(SegmentHeader::decode(&layout, &buf[..len - 1]), Err(FormatError::Truncated));
        let mut data_flip = buf.clone();
        data_flip[len - 1] ^= 0x80;
        assert_eq!(SegmentHeader::decode(&layout, &data_flip), Err(FormatError::ChecksumMismatch));
        let stale_lba = patched(&buf, len, SEGMENT_FIXED_HEADER_BYTES + 2 * 8, 9);
        assert_eq!(SegmentHeader::decode(&layout, &stale_lba), Err(FormatError::BadField("unused lba entry")));
        let stale_revoke = patched(&buf, len, layout.revoke_entry_offset(1), 9);
        assert_eq!(SegmentHeader::decode(&layout, &stale_revoke), Err(FormatError::BadField("unused revoke entry")));
        let mut none_revoke = buf.clone();
        put_u64(&mut none_revoke, layout.revoke_entry_offset(0), LBA_NONE);
        store_crc(&mut none_revoke[..len], OFF_CRC);
        assert_eq!(SegmentHeader::decode(&layout, &none_revoke), Err(FormatError::BadField("revoke lba")));
        // Bytes past the sealed length belong to nobody and are ignored.
        let mut tail = buf;
        tail[len..].fill(0xAB);
        assert!(SegmentHeader::decode(&layout, &tail).is_ok());
    }

    fn arb_layout() -> impl Strategy<Value = SegmentLayout> {
        (12u32..=16, 4u32..24).prop_map(|(shift, blocks)| SegmentLayout::new(blocks << shift, 1 << shift).unwrap())
    }

    fn arb_segment() -> impl Strategy<Value = (SegmentLayout, Vec<u64>, Vec<u64>, bool)> {
        arb_layout().prop_flat_map(|layout| {
            let lbas = proptest::collection::vec(any::<u64>(), 0..=layout.slots as usize);
            let revokes = proptest::collection::vec(0..LBA_NONE, 0..=layout.revokes_capacity.min(64) as usize);
            (Just(layout), lbas, revokes, any::<bool>())
        })
    }

    proptest! {
        #[test]
        fn prop_layout_is_minimal_and_fits(shift in 12u32..=16, blocks in 4u32..2048) {
            let block_size = 1u32 << shift;
            prop_assume!(blocks as u64 * block_size as u64 <= SEGMENT_MAX_BYTES as u64);
            let layout = SegmentLayout::new(blocks * block_size, block_size).unwrap();
            let h = layout.header_blocks;
            prop_assert_eq!(layout.slots, blocks - h);
            prop_assert!(header_need_bytes(layout.slots) <= layout.header_bytes() as u64);
            prop_assert!(h == 1 || header_need_bytes(blocks - h + 1) > (h as u64 - 1) * block_size as u64);
            prop_assert!(layout.revokes_capacity as u64 >= (layout.slots as u64).div_ceil(4));
            prop_assert!(layout.revoke_entry_offset(layout.revokes_capacity) <= layout.header_bytes());
        }

        #[test]
        fn prop_round_trip((layout, lbas, revokes, barrier) in arb_segment()) {
            let (buf, len) = build(&layout, &lbas, &revokes, barrier, 0x5A);
            prop_assert_eq!(sealed_len(&layout, &buf), Ok(len));
            let header = SegmentHeader::decode(&layout, &buf[..len]).unwrap();
            prop_assert_eq!(header.lbas, lbas);
            prop_assert_eq!(header.revokes, revokes);
            prop_assert_eq!(header.barrier, barrier);
            prop_assert_eq!(header.head_sequence, HEAD);
        }

        #[test]
        fn prop_bit_flip_rejected((layout, lbas, revokes, barrier) in arb_segment(), bit in any::<prop::sample::Index>()) {
            let (mut buf, len) = build(&layout, &lbas, &revokes, barrier, 0);
            flip_bit(&mut buf[..len], bit.index(len * 8));
            prop_assert!(SegmentHeader::decode(&layout, &buf).is_err());
        }

        #[test]
        fn prop_garbage_never_panics(layout in arb_layout(), bytes in proptest::collection::vec(any::<u8>(), 0..3 * 4096)) {
            if let Ok(len) = sealed_len(&layout, &bytes) {
                prop_assert!(len <= layout.segment_bytes as usize);
            }
            let _ = SegmentHeader::decode(&layout, &bytes);
        }

        #[test]
        fn prop_gap_round_trip(
            layout in arb_layout(),
            used in 0u32..24,
            gap in 0u32..24,
            barrier in any::<bool>(),
            head in 0..=PLACE.sequence,
        ) {
            let used = used.min(layout.slots);
            let fits = layout.has_room_for_part(layout.header_blocks + used + gap);
            let flags = PartFlags { barrier, segment_end: !fits, gap_blocks: if fits { gap } else { 0 }, head_sequence: head };
            let mut buf = vec![0u8; layout.segment_bytes as usize];
            for slot in 0..used {
                set_slot_lba(&layout, &mut buf, slot, slot as u64);
            }
            let len = seal(&layout, &mut buf, &PLACE, flags, used, 0);
            let header = SegmentHeader::decode(&layout, &buf[..len]).unwrap();
            prop_assert_eq!(header.gap_blocks, flags.gap_blocks);
            prop_assert_eq!(header.head_sequence, head);
            prop_assert_eq!(header.next_block(&layout), layout.header_blocks + used + flags.gap_blocks);
            prop_assert!(header.segment_end || layout.has_room_for_part(header.next_block(&layout)));
        }

        #[test]
        fn prop_plausible_header_garbage_never_panics(
            layout in arb_layout(),
            fields in proptest::collection::vec(any::<u8>(), SEGMENT_FIXED_HEADER_BYTES),
            slots_used in 0u32..30,
            revokes_count in 0u32..600,
            (gap_blocks, first_block, part, plausible) in (prop_oneof![0u32..40, any::<u32>()], 0u32..24, 0u32..24, any::<bool>()),
        ) {
            let mut buf = vec![0u8; layout.segment_bytes as usize];
            buf[..SEGMENT_FIXED_HEADER_BYTES].copy_from_slice(&fields);
            if plausible {
                // Past the flags, reserved bytes and place checks, so that
                // the gap, room and length checks see garbage too.
                let bits = get_u16(&buf, OFF_FLAGS) & (FLAG_BARRIER | FLAG_SEGMENT_END);
                put_u16(&mut buf, OFF_FLAGS, bits);
                buf[OFF_HEAD_SEQUENCE..SEGMENT_FIXED_HEADER_BYTES].fill(0);
                let first_block = first_block % layout.blocks();
                put_u32(&mut buf, OFF_FIRST_BLOCK, first_block);
                put_u32(&mut buf, OFF_PART, if first_block == 0 { 0 } else { 1 + part % first_block });
                put_u32(&mut buf, OFF_GAP_BLOCKS, gap_blocks);
            }
            put_u32(&mut buf, OFF_MAGIC, SEGMENT_MAGIC);
            put_u16(&mut buf, OFF_VERSION, LOG_FORMAT_VERSION);
            put_u32(&mut buf, OFF_BLOCK_SIZE, layout.block_size);
            put_u32(&mut buf, OFF_SEGMENT_BYTES, layout.segment_bytes);
            put_u32(&mut buf, OFF_HEADER_BLOCKS, layout.header_blocks);
            put_u32(&mut buf, OFF_SLOTS_USED, slots_used);
            put_u32(&mut buf, OFF_REVOKES_COUNT, revokes_count);
            let claimed = layout.sealed_bytes(slots_used.min(layout.slots));
            put_u32(&mut buf, OFF_TOTAL_LEN, claimed as u32);
            store_crc(&mut buf[..claimed], OFF_CRC);
            if let Ok(header) = SegmentHeader::decode(&layout, &buf) {
                prop_assert_eq!(header.lbas.len() as u32, slots_used);
                prop_assert_eq!(header.revokes.len() as u32, revokes_count);
                prop_assert!(header.segment_end || layout.has_room_for_part(header.next_block(&layout)));
            }
            let mut parts = 0;
            decode_parts(&layout, &buf, get_u64(&buf, OFF_INSTANCE_ID), get_u64(&buf, OFF_SEQUENCE), |_| parts += 1);
            prop_assert!(parts <= layout.blocks());
        }
    }
}
