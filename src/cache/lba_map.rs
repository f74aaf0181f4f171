//! LBA -> cache blocks: open addressing with linear probing. A slot holds
//! the LBA beside the block number (8 bytes), so a probe compares keys in
//! the table itself: a lookup touches one or two cache lines of the table,
//! not the block table entry of every block on its probe chain (at a load
//! of 0.8 that chain averages three slots, each a cache miss on a large
//! cache when the key had to be read back from the block). An LBA may hold
//! several blocks (its current one and older ones whose durable entries are
//! still valid); every block is held at most once, so the table never fills.

pub const NO_BLOCK: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Slot {
    lba: u32,
    block: u32,
}

const EMPTY: Slot = Slot { lba: 0, block: NO_BLOCK };

pub struct LbaMap {
    slots: Box<[Slot]>,
}

impl LbaMap {
    /// Sized for `blocks_count` entries at a load of at most 0.8.
    pub fn new(blocks_count: u32) -> Self {
        let capacity = (blocks_count as usize * 5 / 4).max(8) + 1;
        LbaMap { slots: vec![EMPTY; capacity].into_boxed_slice() }
    }

    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
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

    /// Starts loading `lba`'s home slot into the CPU cache, for a lookup
    /// soon after (a driver does it when a request arrives).
    #[inline]
    pub fn prefetch(&self, lba: u32) {
        prefetch_address(&self.slots[self.home(lba)]);
    }

    /// The first block in `lba`'s home slot if it holds `lba` (without
    /// following the probe chain): what a lookup will most likely find.
    #[inline]
    pub fn likely_block(&self, lba: u32) -> Option<u32> {
        let slot = self.slots[self.home(lba)];
        (slot.block != NO_BLOCK && slot.lba == lba).then_some(slot.block)
    }

    /// The block held for `lba` that `wanted` accepts.
    pub fn find(&self, lba: u32, wanted: impl Fn(u32) -> bool) -> Option<u32> {
        self.blocks_of(lba).find(|&block| wanted(block))
    }

    /// Every block held for `lba`: they all sit between its home slot and
    /// the next empty one.
    pub fn blocks_of(&self, lba: u32) -> impl Iterator<Item = u32> + '_ {
        let mut slot = self.home(lba);
        std::iter::from_fn(move || loop {
            let entry = self.slots[slot];
            if entry.block == NO_BLOCK {
                return None;
            }
            slot = self.next(slot);
            if entry.lba == lba {
                return Some(entry.block);
            }
        })
    }

    /// Adds `block` for `lba`; an LBA may hold several blocks, and a block
    /// is held at most once.
    pub fn insert(&mut self, lba: u32, block: u32) {
        debug_assert_ne!(block, NO_BLOCK);
        let mut slot = self.home(lba);
        while self.slots[slot].block != NO_BLOCK {
            debug_assert_ne!(self.slots[slot].block, block, "block {block} held twice");
            slot = self.next(slot);
        }
        self.slots[slot] = Slot { lba, block };
    }

    /// Removes `block` (held for `lba`); backward-shift deletion keeps probe
    /// chains intact.
    pub fn remove(&mut self, lba: u32, block: u32) {
        let mut slot = self.home(lba);
        loop {
            let current = self.slots[slot];
            if current.block == NO_BLOCK {
                debug_assert!(false, "block {block} of LBA {lba} not held");
                return;
            }
            if current.block == block {
                debug_assert_eq!(current.lba, lba, "block {block} held for another LBA");
                break;
            }
            slot = self.next(slot);
        }
        let mut hole = slot;
        let mut probe = self.next(hole);
        loop {
            let entry = self.slots[probe];
            if entry.block == NO_BLOCK {
                break;
            }
            let home = self.home(entry.lba);
            // Move the entry back if its home is not cyclically in (hole, probe].
            let stays = if hole <= probe { hole < home && home <= probe } else { hole < home || home <= probe };
            if !stays {
                self.slots[hole] = entry;
                hole = probe;
            }
            probe = self.next(probe);
        }
        self.slots[hole] = EMPTY;
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
            let mut free: Vec<u32> = (0..blocks).rev().collect();
            let mut map = LbaMap::new(blocks);
            let mut model: HashMap<u32, BTreeSet<u32>> = HashMap::new();
            for (lba, insert) in ops {
                let held = model.entry(lba).or_default();
                if insert {
                    if let Some(block) = free.pop() {
                        map.insert(lba, block);
                        held.insert(block);
                    }
                } else if let Some(&block) = held.iter().nth(lba as usize % 3).or(held.first()) {
                    map.remove(lba, block);
                    held.remove(&block);
                    free.push(block);
                }
                for probe in 0..24 {
                    let found: BTreeSet<u32> = map.blocks_of(probe).collect();
                    prop_assert_eq!(found, model.get(&probe).cloned().unwrap_or_default());
                    let newest = model.get(&probe).and_then(|held| held.last().copied());
                    let highest = newest.and_then(|n| map.find(probe, |b| b == n));
                    prop_assert_eq!(highest, newest);
                }
            }
        }
    }
}
