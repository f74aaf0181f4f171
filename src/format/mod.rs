//! On-disk formats. Little-endian, explicit encode/decode, every structure
//! carries magic + version + length + CRC-32/IEEE (crc32fast). Decoders return
//! `FormatError` for any byte string and never panic. See docs/format.md.

mod cache_superblock;
mod codec;
mod log_superblock;
mod meta_page;
mod owner_record;
pub mod segment;

pub use cache_superblock::{CacheSuperblock, CACHE_SUPERBLOCK_MAGIC};
pub use owner_record::{OwnerRecord, OWNER_BYTES_MAX, OWNER_RECORD_COPIES, OWNER_RECORD_MAGIC};
pub use log_superblock::{LogSuperblock, LOG_SUPERBLOCK_COPIES, LOG_SUPERBLOCK_MAGIC};
pub use meta_page::{
    MetaEntry, MetaPageHeader, META_ENTRIES_PER_PAGE, META_ENTRY_BYTES, META_PAGE_HEADER_BYTES, META_PAGE_MAGIC,
};
pub use segment::{
    seal, sealed_len, set_revoke, set_slot_lba, SegmentHeader, SegmentLayout, SEGMENT_FIXED_HEADER_BYTES,
    SEGMENT_MAGIC, SEGMENT_MAX_BYTES,
};

/// Version of the cache device's structures (superblock, owner record,
/// metadata pages). Version 1 kept the owner record inside the superblock
/// and had the metadata from unit 1; version 2 keeps two copies of it in
/// units 1 and 2 (so it can be rewritten safely) and the metadata from
/// unit 3. Decoders reject every other value.
pub const FORMAT_VERSION: u16 = 2;

/// Unit of the cache device holding copy `i` of the owner record.
pub const CACHE_OWNER_RECORD_UNIT: [u64; OWNER_RECORD_COPIES] = [1, 2];
/// The units before the metadata: the superblock and the owner records.
pub const CACHE_HEADER_UNITS: u64 = 1 + OWNER_RECORD_COPIES as u64;

/// Version of the log's structures (superblock, segment parts). Version 1
/// had one fixed-size segment per write; version 2 packs variable-length
/// parts into each segment (docs/format.md); version 3 records in the
/// superblock which mirrors were in sync when it was written; version 4
/// lets a part leave blocks unwritten after it (`gap_blocks`, the reserved
/// field at offset 68 before), which a reader of version 3 would not
/// follow; version 5 gives the superblock flags, the first saying that the
/// log was replayed onto the backing device and the cache that wrote it is
/// stale; version 6 has every part record the log's head as it was sealed
/// (`head_sequence`, the reserved field at offset 72 before). A version-4
/// log reads as one never replayed (the superblock's flag bytes are zero
/// there), a part of version 4 or 5 as one recording no head (0); decoders
/// reject every other value.
pub const LOG_FORMAT_VERSION: u16 = 6;

/// The log format versions this build reads.
pub const LOG_FORMAT_VERSIONS_READ: std::ops::RangeInclusive<u16> = 4..=LOG_FORMAT_VERSION;

/// Log mirrors at most: the superblock's in-sync mask has a bit per mirror.
pub const LOG_MIRRORS_MAX: u8 = 16;

/// Every superblock and metadata page is one 4 KiB unit.
pub const UNIT_BYTES: usize = 4096;

/// Marks an unused LBA slot (metadata entry, segment slot dropped in place).
pub const LBA_NONE: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// Fewer bytes than the structure needs.
    Truncated,
    BadMagic,
    UnsupportedVersion(u16),
    /// A length or count field is out of its bounds.
    BadLength,
    ChecksumMismatch,
    /// A field holds a value no encoder writes (e.g. block size not a power of two).
    BadField(&'static str),
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::Truncated => write!(f, "truncated structure"),
            FormatError::BadMagic => write!(f, "bad magic"),
            FormatError::UnsupportedVersion(v) => write!(f, "unsupported format version {v}"),
            FormatError::BadLength => write!(f, "length or count out of bounds"),
            FormatError::ChecksumMismatch => write!(f, "checksum mismatch"),
            FormatError::BadField(name) => write!(f, "invalid field {name}"),
        }
    }
}

impl std::error::Error for FormatError {}
