//! Self-describing block contents. Every block the workload writes carries,
//! in each 512-byte sector, its LBA, the id of the write and the sector
//! index, followed by filler derived from them. A block read back can thus be
//! named exactly: a known write of this block, another block's data (foreign),
//! a mix of sectors (torn) or bytes nobody wrote (garbage). Write id 0 is the
//! all-zero content of a fresh device.

use crate::simcore::prng::splitmix64;

pub const SECTOR_BYTES: usize = 512;
const SECTOR_MAGIC: u32 = 0x5448_4348; // "HCHT"
const SECTOR_HEADER_BYTES: usize = 24;

/// Identifies one write request; 0 = the initial (all-zero) content.
pub type WriteId = u64;

/// What a block read back turned out to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Intact content of write `WriteId` to the expected block.
    Value(WriteId),
    /// Intact content written to another block.
    Foreign { lba: u64, write: WriteId },
    /// Sectors of different writes (or zero sectors) mixed.
    Torn,
    /// Bytes no write produced (corruption, a wrong buffer).
    Garbage,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Found::Value(0) => write!(f, "initial zeroes"),
            Found::Value(w) => write!(f, "write #{w}"),
            Found::Foreign { lba, write } => write!(f, "foreign data (write #{write} of block {lba})"),
            Found::Torn => write!(f, "torn block (sectors of different writes)"),
            Found::Garbage => write!(f, "garbage (bytes nobody wrote)"),
        }
    }
}

/// Fills `out` (a whole number of sectors) with the content of `write` to `lba`.
pub fn fill_block(lba: u64, write: WriteId, out: &mut [u8]) {
    assert_eq!(out.len() % SECTOR_BYTES, 0, "block is not whole sectors");
    for (index, sector) in out.chunks_exact_mut(SECTOR_BYTES).enumerate() {
        fill_sector(lba, write, index as u32, sector);
    }
}

fn fill_sector(lba: u64, write: WriteId, index: u32, sector: &mut [u8]) {
    if write == 0 {
        sector.fill(0);
        return;
    }
    sector[0..4].copy_from_slice(&SECTOR_MAGIC.to_le_bytes());
    sector[4..8].copy_from_slice(&index.to_le_bytes());
    sector[8..16].copy_from_slice(&lba.to_le_bytes());
    sector[16..24].copy_from_slice(&write.to_le_bytes());
    let mut state = lba.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ write.rotate_left(17) ^ index as u64;
    for word in sector[SECTOR_HEADER_BYTES..].chunks_exact_mut(8) {
        word.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
}

/// Names the content of a block read from `lba`.
pub fn decode_block(lba: u64, bytes: &[u8]) -> Found {
    let mut first: Option<(u64, WriteId)> = None;
    let mut scratch = [0u8; SECTOR_BYTES];
    for (index, sector) in bytes.chunks_exact(SECTOR_BYTES).enumerate() {
        let Some(owner) = sector_owner(sector) else { return Found::Garbage };
        fill_sector(owner.0, owner.1, index as u32, &mut scratch);
        if scratch[..] != sector[..] {
            return Found::Garbage;
        }
        match first {
            None => first = Some(owner),
            Some(prev) if prev != owner => return Found::Torn,
            Some(_) => {}
        }
    }
    match first {
        Some((_, 0)) => Found::Value(0),
        Some((owner_lba, write)) if owner_lba == lba => Found::Value(write),
        Some((owner_lba, write)) => Found::Foreign { lba: owner_lba, write },
        None => Found::Garbage,
    }
}

/// Which (lba, write) a sector claims to belong to; zero sectors belong to
/// write 0 of any block.
fn sector_owner(sector: &[u8]) -> Option<(u64, WriteId)> {
    if sector.iter().all(|b| *b == 0) {
        return Some((0, 0));
    }
    let magic = u32::from_le_bytes(sector[0..4].try_into().unwrap());
    if magic != SECTOR_MAGIC {
        return None;
    }
    let lba = u64::from_le_bytes(sector[8..16].try_into().unwrap());
    let write = u64::from_le_bytes(sector[16..24].try_into().unwrap());
    Some((lba, write))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(lba: u64, write: WriteId) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        fill_block(lba, write, &mut b);
        b
    }

    #[test]
    fn intact_blocks_decode_to_their_write() {
        assert_eq!(decode_block(5, &block(5, 9)), Found::Value(9));
        assert_eq!(decode_block(5, &vec![0u8; 4096]), Found::Value(0));
    }

    #[test]
    fn foreign_torn_and_flipped_blocks_are_recognised() {
        assert_eq!(decode_block(5, &block(6, 9)), Found::Foreign { lba: 6, write: 9 });
        let mut torn = block(5, 9);
        torn[SECTOR_BYTES * 3..SECTOR_BYTES * 4].copy_from_slice(&block(5, 10)[SECTOR_BYTES * 3..SECTOR_BYTES * 4]);
        assert_eq!(decode_block(5, &torn), Found::Torn);
        let mut half_zero = block(5, 9);
        half_zero[2048..].fill(0);
        assert_eq!(decode_block(5, &half_zero), Found::Torn);
        let mut flipped = block(5, 9);
        flipped[1000] ^= 0x10;
        assert_eq!(decode_block(5, &flipped), Found::Garbage);
    }
}
