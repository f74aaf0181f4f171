//! LBA -> cache blocks: open addressing with linear probing. A slot holds
//! a block and its LBA (8 bytes), so a probe compares LBAs in the slots'
//! own cache lines and a removal finds the homes of the entries it shifts
//! back there too: neither reads the block table. (Slots of block numbers
//! alone, 4 bytes, read each probed block's LBA back from the block table:
//! at the table's load of 0.8 a lookup of an LBA not held passes 13 slots
//! on average, each a cache miss, and writes beyond the cache spent 15 %
//! of the engine thread there.) The eight LBAs of an aligned group share
//! a hashed base and take consecutive homes from it, so write-back's look
//! at a block's neighbours reads the same cache line. An LBA may hold
//! several blocks (its current one and older ones whose durable entries
//! are still valid); every block is held at most once, so the table never
//! fills.

pub const NO_BLOCK: u32 = u32::MAX;

/// LBAs whose homes are consecutive slots.
const GROUP_LBAS: u32 = 8;

/// Where the map reads a block's LBA back from (to check what it is given).
pub trait LbaOf {
    fn lba_of(&self, block: u32) -> u32;
}

impl LbaOf for [u32] {
    fn lba_of(&self, block: u32) -> u32 {
        self[block as usize]
    }
}

#[derive(Clone, Copy)]
struct Slot {
    lba: u32,
    /// `NO_BLOCK`: empty.
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
        self.slots.len() * std::mem::size_of::<Slot>()
    }

    /// Blocks held, counted slot by slot: for `CacheIndex::check_counts`.
    pub fn held_count(&self) -> u32 {
        self.slots.iter().filter(|slot| slot.block != NO_BLOCK).count() as u32
    }

    fn home(&self, lba: u32) -> usize {
        // Fibonacci hashing spreads the groups; fast-range maps to the table.
        let len = self.slots.len() as u64;
        let hashed = ((lba / GROUP_LBAS) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        let home = ((hashed * len) >> 32) + (lba % GROUP_LBAS) as u64;
        // At most 7 past the end (the table has more than 8 slots).
        (if home >= len { home - len } else { home }) as usize
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

    /// The block held for `lba` that `wanted` accepts.
    pub fn find(&self, lba: u32, wanted: impl Fn(u32) -> bool) -> Option<u32> {
        self.blocks_of(lba).find(|&block| wanted(block))
    }

    /// Every block held for `lba`: they all sit between its home slot and
    /// the next empty one.
    pub fn blocks_of(&self, lba: u32) -> impl Iterator<Item = u32> + '_ {
        let mut slot = self.home(lba);
        std::iter::from_fn(move || loop {
            let held = self.slots[slot];
            if held.block == NO_BLOCK {
                return None;
            }
            slot = self.next(slot);
            if held.lba == lba {
                return Some(held.block);
            }
        })
    }

    /// Adds `block` for `lba` (which `lba_of[block]` already holds); an LBA
    /// may hold several blocks, and a block is held at most once.
    pub fn insert<L: LbaOf + ?Sized>(&mut self, lba: u32, block: u32, lba_of: &L) {
        debug_assert_eq!(lba_of.lba_of(block), lba);
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
            let current = self.slots[slot].block;
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
            let held = self.slots[probe];
            if held.block == NO_BLOCK {
                break;
            }
            let home = self.home(held.lba);
            // Move the entry back if its home is not cyclically in (hole, probe].
            let stays = if hole <= probe { hole < home && home <= probe } else { hole < home || home <= probe };
            if !stays {
                self.slots[hole] = held;
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

    /// 400 LBAs with one home slot, one chain through inserts and removals
    /// in a scrambled order, against a model.
    #[test]
    fn one_long_chain_behaves_like_a_multimap() {
        let blocks = 1000u32;
        let mut map = LbaMap::new(blocks);
        let home = map.home(0);
        let lbas: Vec<u32> = (0u32..).filter(|&lba| map.home(lba) == home).take(400).collect();
        let mut lba_of = vec![u32::MAX; blocks as usize];
        let mut model: HashMap<u32, BTreeSet<u32>> = HashMap::new();
        let check = |map: &LbaMap, model: &HashMap<u32, BTreeSet<u32>>| {
            for &lba in &lbas {
                let found: BTreeSet<u32> = map.blocks_of(lba).collect();
                assert_eq!(found, model.get(&lba).cloned().unwrap_or_default(), "LBA {lba}");
            }
        };
        // Two blocks for every other LBA.
        let mut block = 0;
        for (i, &lba) in lbas.iter().enumerate() {
            for _ in 0..1 + (i % 2) {
                lba_of[block as usize] = lba;
                map.insert(lba, block, lba_of.as_slice());
                model.entry(lba).or_default().insert(block);
                block += 1;
            }
        }
        check(&map, &model);
        let mut order: Vec<u32> = (0..block).collect();
        let count = order.len();
        for i in 0..count {
            order.swap(i, (i * 7919 + 13) % count);
        }
        for (n, &gone) in order.iter().enumerate() {
            let lba = lba_of[gone as usize];
            map.remove(lba, gone);
            model.get_mut(&lba).unwrap().remove(&gone);
            if n % 25 == 0 {
                check(&map, &model);
            }
        }
        check(&map, &model);
        assert!(map.slots.iter().all(|s| s.block == NO_BLOCK));
    }

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
                    map.remove(lba, block);
                    held.remove(&block);
                    lba_of[block as usize] = u32::MAX;
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
