//! Log device superblock: geometry and head position. Two copies (units 0 and 1);
//! writers alternate and readers take the valid copy with the higher `write_seq`.

use super::codec::{
    check_crc, check_magic_and_versions, check_zero, get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, put_u8, store_crc,
};
use super::{FormatError, SegmentLayout, LOG_FORMAT_VERSION, LOG_FORMAT_VERSIONS_READ, LOG_MIRRORS_MAX, UNIT_BYTES};

pub const LOG_SUPERBLOCK_COPIES: u64 = 2;

pub const LOG_SUPERBLOCK_MAGIC: u32 = 0x4848_434C; // "HHCL"

// Byte offsets inside the unit; docs/format.md has the same table.
const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 4;
const OFF_RESERVED: usize = 6;
const OFF_LEN: usize = 8;
const OFF_CRC: usize = 12;
const OFF_INSTANCE_ID: usize = 16;
const OFF_WRITE_SEQ: usize = 24;
const OFF_BLOCK_SIZE: usize = 32;
const OFF_SEGMENT_BYTES: usize = 36;
const OFF_SEGMENTS_COUNT: usize = 40;
const OFF_HEAD_SEGMENT: usize = 44;
const OFF_HEAD_SEQUENCE: usize = 48;
const OFF_BACKING_BLOCKS: usize = 56;
const OFF_MIRRORS_COUNT: usize = 64;
const OFF_MIRROR_INDEX: usize = 65;
const OFF_IN_SYNC_MASK: usize = 66;
const OFF_RUN: usize = 68;
const OFF_FLAGS: usize = 72;
const OFF_RESERVED_FLAGS: usize = 76;
const OFF_PREVIOUS_INSTANCE: usize = 80;
const OFF_END: usize = 88;

/// Flag bit: the log was replayed onto the backing device (`hhc recover`,
/// a cache-loss recovery, a takeover) and re-initialised; the cache of this
/// instance is stale and must not start warm (version 5).
const FLAG_REPLAYED: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSuperblock {
    pub instance_id: u64,
    /// +1 per superblock write; selects the newer copy.
    pub write_seq: u64,
    pub block_size: u32,
    pub segment_bytes: u32,
    pub segments_count: u32,
    /// Segment index where recovery starts scanning.
    pub head_segment: u32,
    /// Sequence number expected at `head_segment`.
    pub head_sequence: u64,
    pub mirrors_count: u8,
    pub mirror_index: u8,
    pub backing_blocks: u64,
    /// Bit i: mirror i was in sync (healthy: holding every part of the log
    /// from the head on) when this superblock was written. A mirror outside
    /// the newest superblock's mask is stale: it missed parts, and neither a
    /// scan nor a repair may rely on it.
    pub in_sync_mask: u16,
    /// The engine run that wrote it: +1 per warm restart, written before
    /// the run writes any part (every part carries its run).
    pub run: u32,
    /// The log was replayed onto the backing device and started over
    /// empty: whatever the cache of this instance still holds is older
    /// than the backing device, and a warm start over it is refused.
    pub replayed: bool,
    /// The instance whose log this one took over (a takeover replayed it,
    /// then formatted this log over the same mirrors); 0: none. A warm start
    /// of that instance finding it refuses, as for `replayed` (version 5).
    pub previous_instance: u64,
}

impl LogSuperblock {
    /// Writes exactly `UNIT_BYTES` into `out[..UNIT_BYTES]`.
    pub fn encode(&self, out: &mut [u8]) {
        let unit = &mut out[..UNIT_BYTES];
        unit.fill(0);
        put_u32(unit, OFF_MAGIC, LOG_SUPERBLOCK_MAGIC);
        put_u16(unit, OFF_VERSION, LOG_FORMAT_VERSION);
        put_u32(unit, OFF_LEN, UNIT_BYTES as u32);
        put_u64(unit, OFF_INSTANCE_ID, self.instance_id);
        put_u64(unit, OFF_WRITE_SEQ, self.write_seq);
        put_u32(unit, OFF_BLOCK_SIZE, self.block_size);
        put_u32(unit, OFF_SEGMENT_BYTES, self.segment_bytes);
        put_u32(unit, OFF_SEGMENTS_COUNT, self.segments_count);
        put_u32(unit, OFF_HEAD_SEGMENT, self.head_segment);
        put_u64(unit, OFF_HEAD_SEQUENCE, self.head_sequence);
        put_u64(unit, OFF_BACKING_BLOCKS, self.backing_blocks);
        put_u8(unit, OFF_MIRRORS_COUNT, self.mirrors_count);
        put_u8(unit, OFF_MIRROR_INDEX, self.mirror_index);
        put_u16(unit, OFF_IN_SYNC_MASK, self.in_sync_mask);
        put_u32(unit, OFF_RUN, self.run);
        put_u32(unit, OFF_FLAGS, if self.replayed { FLAG_REPLAYED } else { 0 });
        put_u64(unit, OFF_PREVIOUS_INSTANCE, self.previous_instance);
        store_crc(unit, OFF_CRC);
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let unit = bytes.get(..UNIT_BYTES).ok_or(FormatError::Truncated)?;
        check_magic_and_versions(unit, LOG_SUPERBLOCK_MAGIC, LOG_FORMAT_VERSIONS_READ)?;
        if get_u32(unit, OFF_LEN) != UNIT_BYTES as u32 {
            return Err(FormatError::BadLength);
        }
        check_crc(unit, OFF_CRC)?;
        check_zero(&unit[OFF_RESERVED..OFF_LEN], "reserved")?;
        // Version 4 wrote zeroes here.
        let flags = get_u32(unit, OFF_FLAGS);
        if flags & !FLAG_REPLAYED != 0 {
            return Err(FormatError::BadField("flags"));
        }
        check_zero(&unit[OFF_RESERVED_FLAGS..OFF_PREVIOUS_INSTANCE], "reserved")?;
        check_zero(&unit[OFF_END..], "padding")?;
        let superblock = LogSuperblock {
            instance_id: get_u64(unit, OFF_INSTANCE_ID),
            write_seq: get_u64(unit, OFF_WRITE_SEQ),
            block_size: get_u32(unit, OFF_BLOCK_SIZE),
            segment_bytes: get_u32(unit, OFF_SEGMENT_BYTES),
            segments_count: get_u32(unit, OFF_SEGMENTS_COUNT),
            head_segment: get_u32(unit, OFF_HEAD_SEGMENT),
            head_sequence: get_u64(unit, OFF_HEAD_SEQUENCE),
            mirrors_count: unit[OFF_MIRRORS_COUNT],
            mirror_index: unit[OFF_MIRROR_INDEX],
            backing_blocks: get_u64(unit, OFF_BACKING_BLOCKS),
            in_sync_mask: get_u16(unit, OFF_IN_SYNC_MASK),
            run: get_u32(unit, OFF_RUN),
            replayed: flags & FLAG_REPLAYED != 0,
            previous_instance: get_u64(unit, OFF_PREVIOUS_INSTANCE),
        };
        superblock.check_fields()?;
        Ok(superblock)
    }

    /// Whether the superblock counts mirror `mirror` in sync.
    pub fn in_sync(&self, mirror: u8) -> bool {
        mirror < LOG_MIRRORS_MAX && self.in_sync_mask >> mirror & 1 == 1
    }

    /// The mask of every mirror of `mirrors_count`.
    pub fn all_mirrors_mask(mirrors_count: u8) -> u16 {
        ((1u32 << mirrors_count.min(LOG_MIRRORS_MAX)) - 1) as u16
    }

    /// The segment geometry this superblock describes (valid for any decoded superblock).
    pub fn segment_layout(&self) -> Result<SegmentLayout, FormatError> {
        SegmentLayout::new(self.segment_bytes, self.block_size)
    }

    fn check_fields(&self) -> Result<(), FormatError> {
        self.segment_layout()?;
        if self.segments_count == 0 {
            return Err(FormatError::BadField("segments_count"));
        }
        if self.head_segment >= self.segments_count {
            return Err(FormatError::BadField("head_segment"));
        }
        if self.mirrors_count == 0 || self.mirror_index >= self.mirrors_count {
            return Err(FormatError::BadField("mirror_index"));
        }
        if self.mirrors_count > LOG_MIRRORS_MAX {
            return Err(FormatError::BadField("mirrors_count"));
        }
        if (self.in_sync_mask as u32) >> self.mirrors_count != 0 {
            return Err(FormatError::BadField("in_sync_mask"));
        }
        if self.backing_blocks == 0 {
            return Err(FormatError::BadField("backing_blocks"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec::test_support::flip_bit;
    use super::*;
    use proptest::prelude::*;

    fn sample() -> LogSuperblock {
        LogSuperblock {
            instance_id: 0xDEAD_BEEF_0000_0001,
            write_seq: 42,
            block_size: 4096,
            segment_bytes: 1 << 20,
            segments_count: 100,
            head_segment: 99,
            head_sequence: 1234,
            mirrors_count: 2,
            mirror_index: 1,
            backing_blocks: 1 << 18,
            in_sync_mask: 0b10,
            run: 1,
            replayed: false,
            previous_instance: 0,
        }
    }

    fn encoded(sb: &LogSuperblock) -> Vec<u8> {
        let mut unit = vec![0x55u8; UNIT_BYTES + 10];
        sb.encode(&mut unit);
        unit
    }

    fn rejected_with(sb: LogSuperblock) -> FormatError {
        LogSuperblock::decode(&encoded(&sb)).unwrap_err()
    }

    #[test]
    fn round_trip_leaves_bytes_after_unit_alone() {
        let unit = encoded(&sample());
        assert_eq!(LogSuperblock::decode(&unit), Ok(sample()));
        assert_eq!(unit[66..68], [0b10, 0], "the in-sync mask at offset 66");
        assert!(unit[72..UNIT_BYTES].iter().all(|&b| b == 0));
        assert_eq!(&unit[UNIT_BYTES..], &[0x55u8; 10]);
        let replayed = LogSuperblock { replayed: true, previous_instance: 0x0102_0304_0506_0708, ..sample() };
        let unit = encoded(&replayed);
        assert_eq!(unit[72..76], [1, 0, 0, 0], "the replayed flag at offset 72");
        assert_eq!(unit[80..88], [8, 7, 6, 5, 4, 3, 2, 1], "the previous instance at offset 80");
        assert_eq!(LogSuperblock::decode(&unit), Ok(replayed));
    }

    #[test]
    fn reads_version_4_as_never_replayed_and_rejects_unknown_flags() {
        let mut v4 = encoded(&sample());
        put_u16(&mut v4, OFF_VERSION, 4);
        store_crc(&mut v4[..UNIT_BYTES], OFF_CRC);
        assert_eq!(LogSuperblock::decode(&v4), Ok(sample()));
        let mut unknown = encoded(&sample());
        put_u32(&mut unknown, OFF_FLAGS, 2);
        store_crc(&mut unknown[..UNIT_BYTES], OFF_CRC);
        assert_eq!(LogSuperblock::decode(&unknown), Err(FormatError::BadField("flags")));
        let mut padding = encoded(&sample());
        padding[4000] = 1;
        store_crc(&mut padding[..UNIT_BYTES], OFF_CRC);
        assert_eq!(LogSuperblock::decode(&padding), Err(FormatError::BadField("padding")));
    }

    #[test]
    fn rejects_framing_errors() {
        let unit = encoded(&sample());
        assert_eq!(LogSuperblock::decode(&unit[..100]), Err(FormatError::Truncated));
        assert_eq!(LogSuperblock::decode(&[]), Err(FormatError::Truncated));
        let mut wrong_magic = unit.clone();
        put_u32(&mut wrong_magic, OFF_MAGIC, super::super::CACHE_SUPERBLOCK_MAGIC);
        assert_eq!(LogSuperblock::decode(&wrong_magic), Err(FormatError::BadMagic));
        let mut v0 = unit.clone();
        put_u16(&mut v0, OFF_VERSION, 0);
        assert_eq!(LogSuperblock::decode(&v0), Err(FormatError::UnsupportedVersion(0)));
        let mut long = unit.clone();
        put_u32(&mut long, OFF_LEN, 8192);
        assert_eq!(LogSuperblock::decode(&long), Err(FormatError::BadLength));
        let mut torn = unit.clone();
        torn[4000] = 1;
        assert_eq!(LogSuperblock::decode(&torn), Err(FormatError::ChecksumMismatch));
        let mut reserved = unit;
        put_u16(&mut reserved, OFF_RESERVED, 9);
        store_crc(&mut reserved[..UNIT_BYTES], OFF_CRC);
        assert_eq!(LogSuperblock::decode(&reserved), Err(FormatError::BadField("reserved")));
    }

    #[test]
    fn rejects_impossible_fields() {
        assert_eq!(rejected_with(LogSuperblock { block_size: 2048, ..sample() }), FormatError::BadField("block_size"));
        assert!(matches!(rejected_with(LogSuperblock { segment_bytes: 4096 * 3, ..sample() }), FormatError::BadLength));
        assert_eq!(
            rejected_with(LogSuperblock { segments_count: 0, head_segment: 0, ..sample() }),
            FormatError::BadField("segments_count")
        );
        assert_eq!(
            rejected_with(LogSuperblock { head_segment: 100, ..sample() }),
            FormatError::BadField("head_segment")
        );
        assert_eq!(rejected_with(LogSuperblock { mirror_index: 2, ..sample() }), FormatError::BadField("mirror_index"));
        assert_eq!(
            rejected_with(LogSuperblock { mirrors_count: 0, mirror_index: 0, ..sample() }),
            FormatError::BadField("mirror_index")
        );
        assert_eq!(
            rejected_with(LogSuperblock { backing_blocks: 0, ..sample() }),
            FormatError::BadField("backing_blocks")
        );
        assert_eq!(rejected_with(LogSuperblock { in_sync_mask: 0b100, ..sample() }), FormatError::BadField("in_sync_mask"));
        assert_eq!(
            rejected_with(LogSuperblock { mirrors_count: 17, mirror_index: 0, in_sync_mask: 1, ..sample() }),
            FormatError::BadField("mirrors_count")
        );
    }

    #[test]
    fn in_sync_mask_names_mirrors() {
        let sb = LogSuperblock { mirrors_count: 3, mirror_index: 2, in_sync_mask: 0b101, ..sample() };
        assert_eq!(LogSuperblock::decode(&encoded(&sb)), Ok(sb.clone()));
        assert!(sb.in_sync(0) && !sb.in_sync(1) && sb.in_sync(2) && !sb.in_sync(3) && !sb.in_sync(200));
        assert_eq!(LogSuperblock::all_mirrors_mask(3), 0b111);
        assert_eq!(LogSuperblock::all_mirrors_mask(16), u16::MAX);
        // No mirror in sync is a valid state (every healthy mirror failed
        // while another was still syncing).
        let none = LogSuperblock { in_sync_mask: 0, ..sample() };
        assert_eq!(LogSuperblock::decode(&encoded(&none)), Ok(none));
    }

    #[test]
    fn older_superblocks_are_refused() {
        for version in [2, 3] {
            let mut unit = encoded(&sample());
            put_u16(&mut unit, OFF_VERSION, version);
            store_crc(&mut unit[..UNIT_BYTES], OFF_CRC);
            assert_eq!(LogSuperblock::decode(&unit), Err(FormatError::UnsupportedVersion(version)));
        }
    }

    fn arb_superblock() -> impl Strategy<Value = LogSuperblock> {
        (
            any::<(u64, u64, u64)>(),
            12u32..=16,
            4u32..64,
            1u32..1_000_000,
            any::<u32>(),
            1u8..=LOG_MIRRORS_MAX,
            any::<u8>(),
            (1u64..u64::MAX, any::<u16>(), any::<bool>(), any::<u64>()),
        )
            .prop_map(|((id, seq, head_seq), shift, blocks, count, head, mirrors, index, (backing, mask, replayed, previous))| {
                LogSuperblock {
                    instance_id: id,
                    write_seq: seq,
                    block_size: 1 << shift,
                    segment_bytes: blocks << shift,
                    segments_count: count,
                    head_segment: head % count,
                    head_sequence: head_seq,
                    mirrors_count: mirrors,
                    mirror_index: index % mirrors,
                    backing_blocks: backing,
                    in_sync_mask: mask & LogSuperblock::all_mirrors_mask(mirrors),
                    run: 1,
                    replayed,
                    previous_instance: previous,
                }
            })
    }

    proptest! {
        #[test]
        fn prop_round_trip(sb in arb_superblock()) {
            prop_assert_eq!(LogSuperblock::decode(&encoded(&sb)), Ok(sb));
        }

        #[test]
        fn prop_bit_flip_rejected(sb in arb_superblock(), bit in 0..UNIT_BYTES * 8) {
            let mut unit = encoded(&sb);
            flip_bit(&mut unit, bit);
            prop_assert!(LogSuperblock::decode(&unit).is_err());
        }

        #[test]
        fn prop_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..UNIT_BYTES + 8)) {
            let _ = LogSuperblock::decode(&bytes);
        }

        #[test]
        fn prop_checksummed_garbage_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), UNIT_BYTES)) {
            put_u32(&mut bytes, OFF_MAGIC, LOG_SUPERBLOCK_MAGIC);
            put_u16(&mut bytes, OFF_VERSION, LOG_FORMAT_VERSION);
            put_u32(&mut bytes, OFF_LEN, UNIT_BYTES as u32);
            store_crc(&mut bytes, OFF_CRC);
            if let Ok(sb) = LogSuperblock::decode(&bytes) {
                prop_assert_eq!(LogSuperblock::decode(&encoded(&sb)), Ok(sb));
            }
        }
    }
}
