//! The owner record of a cache device: opaque bytes that the program which
//! formatted the device keeps there to find its other devices again (the
//! SPDK module: its create parameters, which examine reads). Two copies, in
//! units 1 and 2 of the cache device; a writer puts a new copy in the unit
//! that does not hold the newest valid one, with a higher `write_seq`, so a
//! torn write leaves the previous record readable. Readers take the valid
//! copy of their instance with the higher `write_seq` (`newest`).

use super::codec::{check_crc, check_magic_and_version, check_zero, get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, store_crc};
use super::{FormatError, FORMAT_VERSION, UNIT_BYTES};

pub const OWNER_RECORD_MAGIC: u32 = 0x4848_434F; // "HHCO"

/// Copies of the owner record, one unit each.
pub const OWNER_RECORD_COPIES: usize = 2;

// Byte offsets inside the unit; docs/format.md has the same table.
const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 4;
const OFF_OWNER_LEN: usize = 6;
const OFF_LEN: usize = 8;
const OFF_CRC: usize = 12;
const OFF_INSTANCE_ID: usize = 16;
const OFF_WRITE_SEQ: usize = 24;
const OFF_RESERVED: usize = 32;
const OFF_OWNER: usize = 64;

/// Largest owner record: the rest of the unit.
pub const OWNER_BYTES_MAX: usize = UNIT_BYTES - OFF_OWNER;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerRecord {
    /// The cache instance this copy belongs to: a copy of another instance
    /// (left by an earlier format) is not this cache's record.
    pub instance_id: u64,
    /// +1 per record written; the valid copy with the higher value wins.
    pub write_seq: u64,
    /// At most `OWNER_BYTES_MAX` bytes, opaque to this crate.
    pub owner: Vec<u8>,
}

impl OwnerRecord {
    /// Writes exactly `UNIT_BYTES` into `out[..UNIT_BYTES]`. The owner bytes
    /// must fit (`OWNER_BYTES_MAX`).
    pub fn encode(&self, out: &mut [u8]) {
        assert!(self.owner.len() <= OWNER_BYTES_MAX, "owner record of {} bytes", self.owner.len());
        let unit = &mut out[..UNIT_BYTES];
        unit.fill(0);
        put_u32(unit, OFF_MAGIC, OWNER_RECORD_MAGIC);
        put_u16(unit, OFF_VERSION, FORMAT_VERSION);
        put_u16(unit, OFF_OWNER_LEN, self.owner.len() as u16);
        put_u32(unit, OFF_LEN, UNIT_BYTES as u32);
        put_u64(unit, OFF_INSTANCE_ID, self.instance_id);
        put_u64(unit, OFF_WRITE_SEQ, self.write_seq);
        unit[OFF_OWNER..OFF_OWNER + self.owner.len()].copy_from_slice(&self.owner);
        store_crc(unit, OFF_CRC);
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let unit = bytes.get(..UNIT_BYTES).ok_or(FormatError::Truncated)?;
        check_magic_and_version(unit, OWNER_RECORD_MAGIC, FORMAT_VERSION)?;
        if get_u32(unit, OFF_LEN) != UNIT_BYTES as u32 {
            return Err(FormatError::BadLength);
        }
        check_crc(unit, OFF_CRC)?;
        check_zero(&unit[OFF_RESERVED..OFF_OWNER], "reserved")?;
        let owner_len = get_u16(unit, OFF_OWNER_LEN) as usize;
        if owner_len > OWNER_BYTES_MAX {
            return Err(FormatError::BadField("owner_len"));
        }
        check_zero(&unit[OFF_OWNER + owner_len..], "padding")?;
        Ok(OwnerRecord {
            instance_id: get_u64(unit, OFF_INSTANCE_ID),
            write_seq: get_u64(unit, OFF_WRITE_SEQ),
            owner: unit[OFF_OWNER..OFF_OWNER + owner_len].to_vec(),
        })
    }

    /// The newest valid copy of instance `instance_id` among `units` (the
    /// copies in unit order; fewer bytes than a unit count as no copy), with
    /// its position.
    pub fn newest(units: &[u8], instance_id: u64) -> Option<(usize, OwnerRecord)> {
        let mut newest: Option<(usize, OwnerRecord)> = None;
        for (position, unit) in units.chunks(UNIT_BYTES).take(OWNER_RECORD_COPIES).enumerate() {
            let Ok(record) = OwnerRecord::decode(unit) else { continue };
            if record.instance_id != instance_id {
                continue;
            }
            if newest.as_ref().is_none_or(|(_, best)| record.write_seq > best.write_seq) {
                newest = Some((position, record));
            }
        }
        newest
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec::test_support::flip_bit;
    use super::*;
    use proptest::prelude::*;

    fn sample() -> OwnerRecord {
        OwnerRecord { instance_id: 0x1122_3344_5566_7788, write_seq: 7, owner: b"hhc-spdk-create 1\nname=hhc0\n".to_vec() }
    }

    fn encoded(record: &OwnerRecord) -> Vec<u8> {
        let mut unit = vec![0xAAu8; UNIT_BYTES];
        record.encode(&mut unit);
        unit
    }

    /// Rewrites one u16 field and fixes the checksum, to reach field checks.
    fn with_u16(record: &OwnerRecord, offset: usize, value: u16) -> Vec<u8> {
        let mut unit = encoded(record);
        put_u16(&mut unit, offset, value);
        store_crc(&mut unit, OFF_CRC);
        unit
    }

    #[test]
    fn round_trip_and_zero_padding() {
        let unit = encoded(&sample());
        assert_eq!(OwnerRecord::decode(&unit), Ok(sample()));
        assert!(unit[OFF_OWNER + sample().owner.len()..].iter().all(|&b| b == 0));
        let full = OwnerRecord { owner: vec![b'x'; OWNER_BYTES_MAX], ..sample() };
        assert_eq!(OwnerRecord::decode(&encoded(&full)), Ok(full));
        let empty = OwnerRecord { owner: Vec::new(), ..sample() };
        assert_eq!(OwnerRecord::decode(&encoded(&empty)), Ok(empty));
    }

    #[test]
    fn rejects_each_error() {
        let record = sample();
        let unit = encoded(&record);
        assert_eq!(OwnerRecord::decode(&unit[..UNIT_BYTES - 1]), Err(FormatError::Truncated));
        assert_eq!(OwnerRecord::decode(&vec![0u8; UNIT_BYTES]), Err(FormatError::BadMagic));
        assert_eq!(OwnerRecord::decode(&with_u16(&record, OFF_VERSION, 1)), Err(FormatError::UnsupportedVersion(1)));
        let mut long = encoded(&record);
        put_u32(&mut long, OFF_LEN, 4095);
        store_crc(&mut long, OFF_CRC);
        assert_eq!(OwnerRecord::decode(&long), Err(FormatError::BadLength));
        let mut flipped = unit.clone();
        flipped[OFF_OWNER + 3] ^= 1;
        assert_eq!(OwnerRecord::decode(&flipped), Err(FormatError::ChecksumMismatch));
        let too_long = with_u16(&record, OFF_OWNER_LEN, OWNER_BYTES_MAX as u16 + 1);
        assert_eq!(OwnerRecord::decode(&too_long), Err(FormatError::BadField("owner_len")));
        // A length shorter than the bytes written leaves non-zero padding.
        let short = with_u16(&record, OFF_OWNER_LEN, 4);
        assert_eq!(OwnerRecord::decode(&short), Err(FormatError::BadField("padding")));
        let reserved = with_u16(&record, OFF_RESERVED, 1);
        assert_eq!(OwnerRecord::decode(&reserved), Err(FormatError::BadField("reserved")));
    }

    fn copies(a: Option<&OwnerRecord>, b: Option<&OwnerRecord>) -> Vec<u8> {
        let mut units = vec![0u8; 2 * UNIT_BYTES];
        for (i, record) in [a, b].into_iter().enumerate() {
            if let Some(record) = record {
                record.encode(&mut units[i * UNIT_BYTES..]);
            }
        }
        units
    }

    #[test]
    fn newest_takes_the_higher_valid_copy_of_the_instance() {
        let old = sample();
        let new = OwnerRecord { write_seq: 8, owner: b"new".to_vec(), ..sample() };
        assert_eq!(OwnerRecord::newest(&copies(Some(&old), Some(&new)), old.instance_id), Some((1, new.clone())));
        assert_eq!(OwnerRecord::newest(&copies(Some(&new), Some(&old)), old.instance_id), Some((0, new.clone())));
        // The new copy torn: the old one is read.
        let mut torn = copies(Some(&old), Some(&new));
        torn[UNIT_BYTES + OFF_OWNER] ^= 0xFF;
        assert_eq!(OwnerRecord::newest(&torn, old.instance_id), Some((0, old.clone())));
        // Another instance's copy, however new, is not ours.
        let foreign = OwnerRecord { instance_id: 5, write_seq: 100, ..sample() };
        assert_eq!(OwnerRecord::newest(&copies(Some(&old), Some(&foreign)), old.instance_id), Some((0, old.clone())));
        assert_eq!(OwnerRecord::newest(&copies(None, None), old.instance_id), None);
        assert_eq!(OwnerRecord::newest(&copies(Some(&old), None)[..UNIT_BYTES + 10], old.instance_id), Some((0, old)));
        assert_eq!(OwnerRecord::newest(&[], 1), None);
    }

    fn arb_record() -> impl Strategy<Value = OwnerRecord> {
        (any::<u64>(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..=OWNER_BYTES_MAX))
            .prop_map(|(instance_id, write_seq, owner)| OwnerRecord { instance_id, write_seq, owner })
    }

    proptest! {
        #[test]
        fn prop_round_trip(record in arb_record()) {
            prop_assert_eq!(OwnerRecord::decode(&encoded(&record)), Ok(record));
        }

        #[test]
        fn prop_bit_flip_rejected(record in arb_record(), bit in 0..UNIT_BYTES * 8) {
            let mut unit = encoded(&record);
            flip_bit(&mut unit, bit);
            prop_assert!(OwnerRecord::decode(&unit).is_err());
        }

        #[test]
        fn prop_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..UNIT_BYTES + 8)) {
            let _ = OwnerRecord::decode(&bytes);
            let _ = OwnerRecord::newest(&bytes, 1);
        }

        #[test]
        fn prop_garbage_with_magic_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), UNIT_BYTES)) {
            put_u32(&mut bytes, OFF_MAGIC, OWNER_RECORD_MAGIC);
            put_u16(&mut bytes, OFF_VERSION, FORMAT_VERSION);
            put_u32(&mut bytes, OFF_LEN, UNIT_BYTES as u32);
            store_crc(&mut bytes, OFF_CRC);
            if let Ok(record) = OwnerRecord::decode(&bytes) {
                prop_assert_eq!(OwnerRecord::decode(&encoded(&record)), Ok(record));
            }
        }

        /// A write of a new copy torn anywhere (any prefix of its bytes
        /// landed over the unit it replaces) leaves the old or the new record.
        #[test]
        fn prop_torn_rewrite_leaves_old_or_new(old in arb_record(), owner in proptest::collection::vec(any::<u8>(), 0..64), cut in 0..=UNIT_BYTES, older_in_b in any::<bool>()) {
            let old = OwnerRecord { write_seq: old.write_seq % (u64::MAX - 2) + 1, ..old };
            let older = OwnerRecord { write_seq: old.write_seq - 1, ..old.clone() };
            let new = OwnerRecord { write_seq: old.write_seq + 1, owner, ..old.clone() };
            // The new copy goes to the unit not holding the newest one.
            let (mut units, target) = if older_in_b { (copies(Some(&old), Some(&older)), 1) } else { (copies(Some(&older), Some(&old)), 0) };
            let mut unit = vec![0u8; UNIT_BYTES];
            new.encode(&mut unit);
            units[target * UNIT_BYTES..target * UNIT_BYTES + cut].copy_from_slice(&unit[..cut]);
            let found = OwnerRecord::newest(&units, old.instance_id).map(|(_, r)| r);
            prop_assert!(found == Some(old.clone()) || found == Some(new.clone()), "{:?}", found);
        }
    }
}
