//! LBA -> cache blocks: open addressing with linear probing. Slots hold
//! only block numbers; the key is read back from the block table, so a slot
//! costs 4 bytes. An LBA may hold several blocks (its current one and older
//! ones whose durable entries are still valid); every block is held at most
//! once, so the table never fills.

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

    /// Starts loading `lba`'s home slot into the CPU cache.
    #[inline]
    pub fn prefetch(&self, lba: u32) {
        prefetch_address(&self.slots[self.home(lba)]);
    }

    /// The block in `lba`'s home slot, whichever LBA it is of: the block a
    /// lookup most likely reads first.
    #[inline]
    pub fn likely_block(&self, lba: u32) -> Option<u32> {
        let block = self.slots[self.home(lba)];
        (block != NO_BLOCK).then_some(block)
    }

    /// The block held for `lba` that `wanted` accepts.
    pub fn find<L: LbaOf + ?Sized>(&self, lba: u32, lba_of: &L, wanted: impl Fn(u32) -> bool) -> Option<u32> {
        self.blocks_of(lba, lba_of).find(|&block| wanted(block))
    }

    /// Every block held for `lba`: they all sit between its home slot and
    /// the next empty one.
    pub fn blocks_of<'a, L: LbaOf + ?Sized>(&'a self, lba: u32, lba_of: &'a L) -> impl Iterator<Item = u32> + 'a {
        let mut slot = self.home(lba);
        std::iter::from_fn(move || loop {
            let block = self.slots[slot];
            if block == NO_BLOCK {
                return None;
            }
            slot = self.next(slot);
            if lba_of.lba_of(block) == lba {
                return Some(block);
            }
        })
    }

    /// Adds `block` for `lba` (which `lba_of[block]` already holds); an LBA
    /// may hold several blocks, and a block is held at most once.
    pub fn insert<L: LbaOf + ?Sized>(&mut self, lba: u32, block: u32, lba_of: &L) {
        debug_assert_eq!(lba_of.lba_of(block), lba);
        let mut slot = self.home(lba);
        while self.slots[slot] != NO_BLOCK {
            debug_assert_ne!(self.slots[slot], block, "block {block} held twice");
            slot = self.next(slot);
        }
        self.slots[slot] = block;
    }

    /// Removes `block` (held for `lba`); backward-shift deletion keeps probe
    /// chains intact.
    pub fn remove<L: LbaOf + ?Sized>(&mut self, lba: u32, block: u32, lba_of: &L) {
        let mut slot = self.home(lba);
        loop {
            let current = self.slots[slot];
            if current == NO_BLOCK {
                debug_assert!(false, "block {block} of LBA {lba} not held");
                return;
            }
            if current == block {
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

/// A hint to the CPU to load the cache line of `value`; never faults and
/// changes nothing a program can observe but time.
#[inline]
pub fn prefetch_address<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing into the program and cannot fault;
    // the pointer comes from a reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch(value as *const T as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeSet, HashMap};

    proptest! {
        #[test]
        fn behaves_like_a_multimap(ops in proptest::collection::vec((0u32..24, any::<bool>()), 1..400)) {
            let blocks = 48u32;
            let mut lba_of = vec![u32::MAX; blocks as usize];
            let mut free: Vec<u32> = (0..blocks).rev().collect();
            let mut map = LbaMap::new(blocks);
            let mut model: HashMap<u32, BTreeSet<u32>> = HashMap::new();
            for (lba, insert) in ops {
                let held = model.entry(lba).or_default();
                if insert {
                    if let Some(block) = free.pop() {
                        lba_of[block as usize] = lba;
                        map.insert(lba, block, lba_of.as_slice());
                        held.insert(block);
                    }
                } else if let Some(&block) = held.iter().nth(lba as usize % 3).or(held.first()) {
                    map.remove(lba, block, lba_of.as_slice());
                    held.remove(&block);
                    lba_of[block as usize] = u32::MAX;
                    free.push(block);
                }
                for probe in 0..24 {
                    let found: BTreeSet<u32> = map.blocks_of(probe, lba_of.as_slice()).collect();
                    prop_assert_eq!(found, model.get(&probe).cloned().unwrap_or_default());
                    let newest = model.get(&probe).and_then(|held| held.last().copied());
                    let highest = newest.and_then(|n| map.find(probe, lba_of.as_slice(), |b| b == n));
                    prop_assert_eq!(highest, newest);
                }
            }
        }
    }
}
