//! Log device superblock: geometry and head position. Two copies (units 0 and 1);
//! writers alternate and readers take the valid copy with the higher `write_seq`.

use super::FormatError;

pub const LOG_SUPERBLOCK_COPIES: u64 = 2;

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
}

impl LogSuperblock {
    pub fn encode(&self, out: &mut [u8]) {
        let _ = out;
        todo!("format helper")
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let _ = bytes;
        todo!("format helper")
    }
}
