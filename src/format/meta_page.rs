//! Cache metadata pages: one 16-byte entry per cache block, 4 KiB pages, two
//! slots (A/B) per page so that a torn page write leaves the previous version.

use super::FormatError;

pub const META_PAGE_HEADER_BYTES: usize = 32;
pub const META_ENTRY_BYTES: usize = 16;
pub const META_ENTRIES_PER_PAGE: usize = (super::UNIT_BYTES - META_PAGE_HEADER_BYTES) / META_ENTRY_BYTES;

/// The durable state of one cache block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaEntry {
    /// Backing LBA (in cache blocks) whose data the block holds; `LBA_NONE` = free.
    pub lba: u64,
    /// Commit epoch in which this mapping was made; on restart the highest
    /// epoch wins when two blocks claim the same LBA.
    pub epoch: u32,
    pub dirty: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaPageHeader {
    pub instance_id: u64,
    pub page_index: u32,
    /// +1 per write of this page; selects the newer of the two slots.
    pub page_seq: u64,
    pub entries_count: u16,
}

impl MetaPageHeader {
    /// Encodes header + entries into `out[..UNIT_BYTES]`, zero-filling the rest,
    /// with the checksum over the whole unit.
    pub fn encode(&self, entries: &mut dyn Iterator<Item = MetaEntry>, out: &mut [u8]) {
        let _ = (entries, out);
        todo!("format helper")
    }

    /// Validates and decodes a page; `entries` receives the decoded entries.
    pub fn decode(bytes: &[u8], entries: &mut Vec<MetaEntry>) -> Result<Self, FormatError> {
        let _ = (bytes, entries);
        todo!("format helper")
    }
}
