//! Cache device superblock: identity and geometry, at byte 0 of the cache
//! device. Written once, at format; the owner record, which changes, lives
//! in units of its own (owner_record.rs).

use super::codec::{
    check_block_size, check_crc, check_magic_and_version, check_zero, get_u32, get_u64, put_u16, put_u32,
    put_u64, store_crc,
};
use super::{FormatError, FORMAT_VERSION, META_ENTRIES_PER_PAGE, UNIT_BYTES};

pub const CACHE_SUPERBLOCK_MAGIC: u32 = 0x4848_4353; // "HHCS"

// Byte offsets inside the unit; docs/format.md has the same table.
const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 4;
const OFF_RESERVED: usize = 6;
const OFF_LEN: usize = 8;
const OFF_CRC: usize = 12;
const OFF_INSTANCE_ID: usize = 16;
const OFF_BLOCK_SIZE: usize = 24;
const OFF_META_PAGES: usize = 28;
const OFF_BLOCKS_COUNT: usize = 32;
const OFF_BACKING_BLOCKS: usize = 40;
/// Version 1 kept the owner record here (a u16 length at 48, the bytes
/// from 64); version 2 leaves the rest of the unit zero.
const OFF_PADDING: usize = 48;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheSuperblock {
    /// Random identity chosen at format; the log superblock and every segment
    /// carry the same value so that a log is never replayed into a foreign cache.
    pub instance_id: u64,
    pub block_size: u32,
    /// Blocks in the data area.
    pub blocks_count: u64,
    /// Metadata pages per slot (the area holds two slots A/B of this many pages).
    pub meta_pages_count: u32,
    /// Backing device size in cache blocks at format time.
    pub backing_blocks: u64,
}

impl CacheSuperblock {
    /// Writes exactly `UNIT_BYTES` into `out[..UNIT_BYTES]`.
    pub fn encode(&self, out: &mut [u8]) {
        let unit = &mut out[..UNIT_BYTES];
        unit.fill(0);
        put_u32(unit, OFF_MAGIC, CACHE_SUPERBLOCK_MAGIC);
        put_u16(unit, OFF_VERSION, FORMAT_VERSION);
        put_u32(unit, OFF_LEN, UNIT_BYTES as u32);
        put_u64(unit, OFF_INSTANCE_ID, self.instance_id);
        put_u32(unit, OFF_BLOCK_SIZE, self.block_size);
        put_u32(unit, OFF_META_PAGES, self.meta_pages_count);
        put_u64(unit, OFF_BLOCKS_COUNT, self.blocks_count);
        put_u64(unit, OFF_BACKING_BLOCKS, self.backing_blocks);
        store_crc(unit, OFF_CRC);
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let unit = bytes.get(..UNIT_BYTES).ok_or(FormatError::Truncated)?;
        check_magic_and_version(unit, CACHE_SUPERBLOCK_MAGIC, FORMAT_VERSION)?;
        if get_u32(unit, OFF_LEN) != UNIT_BYTES as u32 {
            return Err(FormatError::BadLength);
        }
        check_crc(unit, OFF_CRC)?;
        check_zero(&unit[OFF_RESERVED..OFF_LEN], "reserved")?;
        check_zero(&unit[OFF_PADDING..], "padding")?;
        let superblock = CacheSuperblock {
            instance_id: get_u64(unit, OFF_INSTANCE_ID),
            block_size: get_u32(unit, OFF_BLOCK_SIZE),
            blocks_count: get_u64(unit, OFF_BLOCKS_COUNT),
            meta_pages_count: get_u32(unit, OFF_META_PAGES),
            backing_blocks: get_u64(unit, OFF_BACKING_BLOCKS),
        };
        superblock.check_fields()?;
        Ok(superblock)
    }

    fn check_fields(&self) -> Result<(), FormatError> {
        check_block_size(self.block_size)?;
        if self.blocks_count == 0 {
            return Err(FormatError::BadField("blocks_count"));
        }
        // CacheLayout gives every data block exactly one entry per slot.
        if self.meta_pages_count as u64 != self.blocks_count.div_ceil(META_ENTRIES_PER_PAGE as u64) {
            return Err(FormatError::BadField("meta_pages_count"));
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

    fn sample() -> CacheSuperblock {
        CacheSuperblock {
            instance_id: 0x1122_3344_5566_7788,
            block_size: 8192,
            blocks_count: 1000,
            meta_pages_count: 1000u64.div_ceil(META_ENTRIES_PER_PAGE as u64) as u32,
            backing_blocks: 1 << 20,
        }
    }

    fn encoded(sb: &CacheSuperblock) -> Vec<u8> {
        let mut unit = vec![0xAAu8; UNIT_BYTES];
        sb.encode(&mut unit);
        unit
    }

    /// Rewrites one u32 field and fixes the checksum, to reach field checks.
    fn with_u32(sb: &CacheSuperblock, offset: usize, value: u32) -> Vec<u8> {
        let mut unit = encoded(sb);
        put_u32(&mut unit, offset, value);
        store_crc(&mut unit, OFF_CRC);
        unit
    }

    #[test]
    fn round_trip_and_zero_padding() {
        let unit = encoded(&sample());
        assert_eq!(CacheSuperblock::decode(&unit), Ok(sample()));
        assert!(unit[48..].iter().all(|&b| b == 0));
        assert_eq!(get_u32(&unit, 0), CACHE_SUPERBLOCK_MAGIC);
    }

    #[test]
    fn rejects_each_error() {
        let sb = sample();
        let unit = encoded(&sb);
        assert_eq!(CacheSuperblock::decode(&unit[..UNIT_BYTES - 1]), Err(FormatError::Truncated));
        assert_eq!(CacheSuperblock::decode(&with_u32(&sb, OFF_MAGIC, 7)), Err(FormatError::BadMagic));
        let mut v3 = encoded(&sb);
        put_u16(&mut v3, OFF_VERSION, 3);
        store_crc(&mut v3, OFF_CRC);
        assert_eq!(CacheSuperblock::decode(&v3), Err(FormatError::UnsupportedVersion(3)));
        assert_eq!(CacheSuperblock::decode(&with_u32(&sb, OFF_LEN, 4095)), Err(FormatError::BadLength));
        let mut flipped = unit.clone();
        flipped[100] ^= 1;
        assert_eq!(CacheSuperblock::decode(&flipped), Err(FormatError::ChecksumMismatch));
        let bad_bs = with_u32(&sb, OFF_BLOCK_SIZE, 12288);
        assert_eq!(CacheSuperblock::decode(&bad_bs), Err(FormatError::BadField("block_size")));
        let bad_pages = with_u32(&sb, OFF_META_PAGES, 1);
        assert_eq!(CacheSuperblock::decode(&bad_pages), Err(FormatError::BadField("meta_pages_count")));
        let mut reserved = encoded(&sb);
        put_u16(&mut reserved, OFF_RESERVED, 1);
        store_crc(&mut reserved, OFF_CRC);
        assert_eq!(CacheSuperblock::decode(&reserved), Err(FormatError::BadField("reserved")));
    }

    /// A version 1 superblock (owner record inside it) is refused as such:
    /// its device has another layout (docs/format.md).
    #[test]
    fn version_1_and_its_owner_bytes_are_refused() {
        let mut v1 = encoded(&sample());
        put_u16(&mut v1, OFF_VERSION, 1);
        store_crc(&mut v1, OFF_CRC);
        assert_eq!(CacheSuperblock::decode(&v1), Err(FormatError::UnsupportedVersion(1)));
        let mut owner_bytes = encoded(&sample());
        put_u16(&mut owner_bytes, OFF_PADDING, 9);
        owner_bytes[64..73].copy_from_slice(b"name=hhc0");
        store_crc(&mut owner_bytes, OFF_CRC);
        assert_eq!(CacheSuperblock::decode(&owner_bytes), Err(FormatError::BadField("padding")));
    }

    #[test]
    fn rejects_zero_counts() {
        let empty = CacheSuperblock { blocks_count: 0, meta_pages_count: 0, ..sample() };
        assert_eq!(CacheSuperblock::decode(&encoded(&empty)), Err(FormatError::BadField("blocks_count")));
        let no_backing = CacheSuperblock { backing_blocks: 0, ..sample() };
        assert_eq!(CacheSuperblock::decode(&encoded(&no_backing)), Err(FormatError::BadField("backing_blocks")));
    }

    fn arb_superblock() -> impl Strategy<Value = CacheSuperblock> {
        (any::<u64>(), 12u32..=16, 1u64..(1 << 38), 1u64..u64::MAX).prop_map(|(id, shift, blocks, backing)| {
            CacheSuperblock {
                instance_id: id,
                block_size: 1 << shift,
                blocks_count: blocks,
                meta_pages_count: blocks.div_ceil(META_ENTRIES_PER_PAGE as u64) as u32,
                backing_blocks: backing,
            }
        })
    }

    proptest! {
        #[test]
        fn prop_round_trip(sb in arb_superblock()) {
            prop_assert_eq!(CacheSuperblock::decode(&encoded(&sb)), Ok(sb));
        }

        #[test]
        fn prop_bit_flip_rejected(sb in arb_superblock(), bit in 0..UNIT_BYTES * 8) {
            let mut unit = encoded(&sb);
            flip_bit(&mut unit, bit);
            prop_assert!(CacheSuperblock::decode(&unit).is_err());
        }

        #[test]
        fn prop_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..UNIT_BYTES + 8)) {
            let _ = CacheSuperblock::decode(&bytes);
        }

        #[test]
        fn prop_garbage_with_magic_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), UNIT_BYTES)) {
            put_u32(&mut bytes, OFF_MAGIC, CACHE_SUPERBLOCK_MAGIC);
            put_u16(&mut bytes, OFF_VERSION, FORMAT_VERSION);
            put_u32(&mut bytes, OFF_LEN, UNIT_BYTES as u32);
            store_crc(&mut bytes, OFF_CRC);
            if let Ok(sb) = CacheSuperblock::decode(&bytes) {
                prop_assert_eq!(CacheSuperblock::decode(&encoded(&sb)), Ok(sb));
            }
        }
    }
}
