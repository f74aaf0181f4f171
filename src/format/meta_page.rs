//! Cache metadata pages: one 16-byte entry per cache block, 4 KiB pages, two
//! slots (A/B) per page so that a torn page write leaves the previous version.

use super::codec::{
    check_crc, check_magic_and_version, get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, store_crc,
};
use super::{FormatError, FORMAT_VERSION, UNIT_BYTES};

pub const META_PAGE_HEADER_BYTES: usize = 32;
pub const META_ENTRY_BYTES: usize = 16;
pub const META_ENTRIES_PER_PAGE: usize = (super::UNIT_BYTES - META_PAGE_HEADER_BYTES) / META_ENTRY_BYTES;

pub const META_PAGE_MAGIC: u32 = 0x4848_434D; // "HHCM"

// Header byte offsets; docs/format.md has the same table.
const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 4;
const OFF_ENTRIES_COUNT: usize = 6;
const OFF_INSTANCE_ID: usize = 8;
const OFF_PAGE_INDEX: usize = 16;
const OFF_PAGE_SEQ: usize = 20;
const OFF_CRC: usize = 28;

// Entry byte offsets, relative to the entry.
const ENTRY_OFF_LBA: usize = 0;
const ENTRY_OFF_EPOCH: usize = 8;
const ENTRY_OFF_FLAGS: usize = 12;
const ENTRY_OFF_RESERVED: usize = 13;

const FLAG_DIRTY: u8 = 1;
const FLAG_THROUGH: u8 = 2;

/// The durable state of one cache block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaEntry {
    /// Backing LBA (in cache blocks) whose data the block holds; `LBA_NONE` = free.
    pub lba: u64,
    /// Commit epoch in which this mapping was made; on restart the highest
    /// epoch wins when two blocks claim the same LBA.
    pub epoch: u32,
    pub dirty: bool,
    /// A write-through copy (or a fill made while writes went through or
    /// were not flushed): after a crash it may be older than the backing
    /// device, or newer than what it durably holds, unlike write-back data.
    pub through: bool,
}

impl MetaEntry {
    fn encode(&self, out: &mut [u8]) {
        put_u64(out, ENTRY_OFF_LBA, self.lba);
        put_u32(out, ENTRY_OFF_EPOCH, self.epoch);
        out[ENTRY_OFF_FLAGS] = if self.dirty { FLAG_DIRTY } else { 0 } | if self.through { FLAG_THROUGH } else { 0 };
        out[ENTRY_OFF_RESERVED..META_ENTRY_BYTES].fill(0);
    }

    fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let flags = bytes[ENTRY_OFF_FLAGS];
        if flags & !(FLAG_DIRTY | FLAG_THROUGH) != 0 {
            return Err(FormatError::BadField("entry flags"));
        }
        if bytes[ENTRY_OFF_RESERVED..META_ENTRY_BYTES].iter().any(|&b| b != 0) {
            return Err(FormatError::BadField("entry reserved"));
        }
        Ok(MetaEntry {
            lba: get_u64(bytes, ENTRY_OFF_LBA),
            epoch: get_u32(bytes, ENTRY_OFF_EPOCH),
            dirty: flags & FLAG_DIRTY != 0,
            through: flags & FLAG_THROUGH != 0,
        })
    }
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
    ///
    /// Takes exactly `self.entries_count` entries from `entries`, so one
    /// iterator over every cache block can be cut into consecutive pages.
    /// Panics (a programming error) if `entries_count` exceeds
    /// `META_ENTRIES_PER_PAGE` or the iterator runs short.
    pub fn encode(&self, entries: &mut dyn Iterator<Item = MetaEntry>, out: &mut [u8]) {
        let count = self.entries_count as usize;
        assert!(count <= META_ENTRIES_PER_PAGE, "meta page holds at most {META_ENTRIES_PER_PAGE} entries, got {count}");
        let unit = &mut out[..UNIT_BYTES];
        unit.fill(0);
        put_u32(unit, OFF_MAGIC, META_PAGE_MAGIC);
        put_u16(unit, OFF_VERSION, FORMAT_VERSION);
        put_u16(unit, OFF_ENTRIES_COUNT, self.entries_count);
        put_u64(unit, OFF_INSTANCE_ID, self.instance_id);
        put_u32(unit, OFF_PAGE_INDEX, self.page_index);
        put_u64(unit, OFF_PAGE_SEQ, self.page_seq);
        for index in 0..count {
            let entry = entries.next().expect("entry iterator shorter than entries_count");
            entry.encode(&mut unit[entry_offset(index)..entry_offset(index + 1)]);
        }
        store_crc(unit, OFF_CRC);
    }

    /// Validates and decodes a page; `entries` receives the decoded entries.
    pub fn decode(bytes: &[u8], entries: &mut Vec<MetaEntry>) -> Result<Self, FormatError> {
        entries.clear();
        let unit = bytes.get(..UNIT_BYTES).ok_or(FormatError::Truncated)?;
        check_magic_and_version(unit, META_PAGE_MAGIC, FORMAT_VERSION)?;
        let entries_count = get_u16(unit, OFF_ENTRIES_COUNT);
        if entries_count as usize > META_ENTRIES_PER_PAGE {
            return Err(FormatError::BadLength);
        }
        check_crc(unit, OFF_CRC)?;
        // Decode into a local first so a bad entry leaves `entries` empty.
        let mut decoded = Vec::with_capacity(entries_count as usize);
        for index in 0..entries_count as usize {
            decoded.push(MetaEntry::decode(&unit[entry_offset(index)..entry_offset(index + 1)])?);
        }
        *entries = decoded;
        Ok(MetaPageHeader {
            instance_id: get_u64(unit, OFF_INSTANCE_ID),
            page_index: get_u32(unit, OFF_PAGE_INDEX),
            page_seq: get_u64(unit, OFF_PAGE_SEQ),
            entries_count,
        })
    }
}

fn entry_offset(index: usize) -> usize {
    META_PAGE_HEADER_BYTES + index * META_ENTRY_BYTES
}

#[cfg(test)]
mod tests {
    use super::super::codec::test_support::flip_bit;
    use super::super::LBA_NONE;
    use super::*;
    use proptest::prelude::*;

    fn header(entries_count: u16) -> MetaPageHeader {
        MetaPageHeader { instance_id: 7, page_index: 3, page_seq: 99, entries_count }
    }

    fn entries(count: usize) -> Vec<MetaEntry> {
        (0..count as u64)
            .map(|i| MetaEntry {
                lba: if i % 5 == 4 { LBA_NONE } else { i * 1000 },
                epoch: i as u32,
                dirty: i % 2 == 0,
                through: i % 3 == 0,
            })
            .collect()
    }

    fn encoded(header: &MetaPageHeader, list: &[MetaEntry]) -> Vec<u8> {
        let mut unit = vec![0xFFu8; UNIT_BYTES];
        header.encode(&mut list.iter().copied(), &mut unit);
        unit
    }

    #[test]
    fn round_trip_full_and_empty_pages() {
        for count in [0, 1, META_ENTRIES_PER_PAGE] {
            let list = entries(count);
            let unit = encoded(&header(count as u16), &list);
            let mut out = vec![MetaEntry { lba: 1, epoch: 1, dirty: true, through: false }];
            assert_eq!(MetaPageHeader::decode(&unit, &mut out), Ok(header(count as u16)));
            assert_eq!(out, list);
        }
    }

    #[test]
    fn entry_bytes_are_as_documented() {
        let entry = MetaEntry { lba: 0x0102_0304_0506_0708, epoch: 0x0A0B_0C0D, dirty: true, through: true };
        let unit = encoded(&header(1), &[entry]);
        assert_eq!(&unit[32..48], &[8, 7, 6, 5, 4, 3, 2, 1, 0x0D, 0x0C, 0x0B, 0x0A, 3, 0, 0, 0]);
        assert!(unit[48..].iter().all(|&b| b == 0));
    }

    #[test]
    fn one_iterator_fills_consecutive_pages() {
        let list = entries(300);
        let mut iter = list.iter().copied();
        let mut first = vec![0u8; UNIT_BYTES];
        let mut second = vec![0u8; UNIT_BYTES];
        header(254).encode(&mut iter, &mut first);
        header(46).encode(&mut iter, &mut second);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        MetaPageHeader::decode(&first, &mut a).unwrap();
        MetaPageHeader::decode(&second, &mut b).unwrap();
        a.extend(b);
        assert_eq!(a, list);
    }

    #[test]
    #[should_panic(expected = "shorter than entries_count")]
    fn encode_panics_on_short_iterator() {
        encoded(&header(3), &entries(2));
    }

    #[test]
    fn rejects_each_error() {
        let unit = encoded(&header(2), &entries(2));
        let mut out = Vec::new();
        assert_eq!(MetaPageHeader::decode(&unit[..4095], &mut out), Err(FormatError::Truncated));
        let mut bad = unit.clone();
        put_u32(&mut bad, OFF_MAGIC, 0);
        assert_eq!(MetaPageHeader::decode(&bad, &mut out), Err(FormatError::BadMagic));
        let mut bad = unit.clone();
        put_u16(&mut bad, OFF_VERSION, 3);
        assert_eq!(MetaPageHeader::decode(&bad, &mut out), Err(FormatError::UnsupportedVersion(3)));
        let mut bad = unit.clone();
        put_u16(&mut bad, OFF_ENTRIES_COUNT, META_ENTRIES_PER_PAGE as u16 + 1);
        store_crc(&mut bad, OFF_CRC);
        assert_eq!(MetaPageHeader::decode(&bad, &mut out), Err(FormatError::BadLength));
        let mut bad = unit.clone();
        bad[4095] = 1;
        assert_eq!(MetaPageHeader::decode(&bad, &mut out), Err(FormatError::ChecksumMismatch));
        let mut bad = unit.clone();
        bad[32 + 16 + ENTRY_OFF_FLAGS] = 4;
        store_crc(&mut bad, OFF_CRC);
        assert_eq!(MetaPageHeader::decode(&bad, &mut out), Err(FormatError::BadField("entry flags")));
        let mut bad = unit;
        bad[32 + ENTRY_OFF_RESERVED + 2] = 1;
        store_crc(&mut bad, OFF_CRC);
        assert_eq!(MetaPageHeader::decode(&bad, &mut out), Err(FormatError::BadField("entry reserved")));
        assert!(out.is_empty(), "a rejected page must not leave entries behind");
    }

    fn arb_entries() -> impl Strategy<Value = Vec<MetaEntry>> {
        let entry =
            (any::<u64>(), any::<u32>(), any::<bool>(), any::<bool>())
                .prop_map(|(lba, epoch, dirty, through)| MetaEntry { lba, epoch, dirty, through });
        proptest::collection::vec(entry, 0..=META_ENTRIES_PER_PAGE)
    }

    proptest! {
        #[test]
        fn prop_round_trip(list in arb_entries(), id in any::<u64>(), page in any::<u32>(), seq in any::<u64>()) {
            let header = MetaPageHeader { instance_id: id, page_index: page, page_seq: seq, entries_count: list.len() as u16 };
            let mut out = Vec::new();
            prop_assert_eq!(MetaPageHeader::decode(&encoded(&header, &list), &mut out), Ok(header));
            prop_assert_eq!(out, list);
        }

        #[test]
        fn prop_bit_flip_rejected(list in arb_entries(), bit in 0..UNIT_BYTES * 8) {
            let mut unit = encoded(&header(list.len() as u16), &list);
            flip_bit(&mut unit, bit);
            let mut out = Vec::new();
            prop_assert!(MetaPageHeader::decode(&unit, &mut out).is_err());
            prop_assert!(out.is_empty());
        }

        #[test]
        fn prop_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..UNIT_BYTES + 8)) {
            let mut out = Vec::new();
            let _ = MetaPageHeader::decode(&bytes, &mut out);
            prop_assert!(out.len() <= META_ENTRIES_PER_PAGE);
        }

        #[test]
        fn prop_checksummed_garbage_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), UNIT_BYTES)) {
            put_u32(&mut bytes, OFF_MAGIC, META_PAGE_MAGIC);
            put_u16(&mut bytes, OFF_VERSION, FORMAT_VERSION);
            store_crc(&mut bytes, OFF_CRC);
            let mut out = Vec::new();
            if let Ok(header) = MetaPageHeader::decode(&bytes, &mut out) {
                prop_assert_eq!(out.len(), header.entries_count as usize);
            }
        }
    }
}
