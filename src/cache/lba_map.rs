//! LBA -> cache block map: open addressing with linear probing. Slots hold
//! only block numbers; the key is read back from the block table, so a slot
//! costs 4 bytes.

pub const NO_BLOCK: u32 = u32::MAX;

/// Where the map reads a block's LBA back from.
pub trait LbaOf {
    fn lba_of(&self, block: u32) -> u32;
}

impl LbaOf for [u32] {
    fn lba_of(&self, block: u32) -> u32 {
        self[block as usize]
    }
}

pub struct LbaMap {
    slots: Box<[u32]>,
}

impl LbaMap {
    /// Sized for `blocks_count` entries at a load of at most 0.8.
    pub fn new(blocks_count: u32) -> Self {
        let capacity = (blocks_count as usize * 5 / 4).max(8) + 1;
        LbaMap { slots: vec![NO_BLOCK; capacity].into_boxed_slice() }
    }

    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * 4
    }

    fn home(&self, lba: u32) -> usize {
        // Fibonacci hashing spreads sequential LBAs; fast-range maps to the table.
        let hashed = (lba as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        ((hashed * self.slots.len() as u64) >> 32) as usize
    }

    fn next(&self, slot: usize) -> usize {
        if slot + 1 == self.slots.len() {
            0
        } else {
            slot + 1
        }
    }

    pub fn get<L: LbaOf + ?Sized>(&self, lba: u32, lba_of: &L) -> Option<u32> {
        let mut slot = self.home(lba);
        loop {
            let block = self.slots[slot];
            if block == NO_BLOCK {
                return None;
            }
            if lba_of.lba_of(block) == lba {
                return Some(block);
            }
            slot = self.next(slot);
        }
    }

    /// Maps `lba` (which `lba_of[block]` already holds) to `block`, replacing
    /// any previous block of that LBA.
    pub fn insert<L: LbaOf + ?Sized>(&mut self, lba: u32, block: u32, lba_of: &L) {
        debug_assert_eq!(lba_of.lba_of(block), lba);
        let mut slot = self.home(lba);
        loop {
            let current = self.slots[slot];
            if current == NO_BLOCK || lba_of.lba_of(current) == lba {
                self.slots[slot] = block;
                return;
            }
            slot = self.next(slot);
        }
    }

    /// Removes `lba`; backward-shift deletion keeps probe chains intact.
    pub fn remove<L: LbaOf + ?Sized>(&mut self, lba: u32, lba_of: &L) {
        let mut slot = self.home(lba);
        loop {
            let current = self.slots[slot];
            if current == NO_BLOCK {
                return;
            }
            if lba_of.lba_of(current) == lba {
                break;
            }
            slot = self.next(slot);
        }
        let mut hole = slot;
        let mut probe = self.next(hole);
        loop {
            let block = self.slots[probe];
            if block == NO_BLOCK {
                break;
            }
            let home = self.home(lba_of.lba_of(block));
            // Move the entry back if its home is not cyclically in (hole, probe].
            let stays = if hole <= probe { hole < home && home <= probe } else { hole < home || home <= probe };
            if !stays {
                self.slots[hole] = block;
                hole = probe;
            }
            probe = self.next(probe);
        }
        self.slots[hole] = NO_BLOCK;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        #[test]
        fn behaves_like_a_hash_map(ops in proptest::collection::vec((0u32..64, any::<bool>()), 1..400)) {
            let blocks = 48u32;
            let mut lba_of = vec![u32::MAX; blocks as usize];
            let mut free: Vec<u32> = (0..blocks).rev().collect();
            let mut map = LbaMap::new(blocks);
            let mut model: HashMap<u32, u32> = HashMap::new();
            for (lba, insert) in ops {
                if insert && !model.contains_key(&lba) {
                    if let Some(block) = free.pop() {
                        lba_of[block as usize] = lba;
                        map.insert(lba, block, lba_of.as_slice());
                        model.insert(lba, block);
                    }
                } else if let Some(block) = model.remove(&lba) {
                    map.remove(lba, lba_of.as_slice());
                    lba_of[block as usize] = u32::MAX;
                    free.push(block);
                }
                for probe in 0..64 {
                    prop_assert_eq!(map.get(probe, lba_of.as_slice()), model.get(&probe).copied());
                }
            }
        }
    }
}
