//! Cache device superblock: identity and geometry, at byte 0 of the cache device.

use super::FormatError;

pub const CACHE_SUPERBLOCK_MAGIC: u32 = 0x4848_4353; // "HHCS"

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
        let _ = out;
        todo!("format helper")
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let _ = bytes;
        todo!("format helper")
    }
}
