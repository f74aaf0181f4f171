//! The cache index: per-block state in struct-of-arrays form, the LBA map,
//! the free list and clean-first CLOCK eviction. No I/O here; the engine
//! drives the transitions.
//!
//! Crash-consistency rules enforced by the engine through these states (see
//! `engine/commit.rs` for the write ordering):
//! - data is never written into a block whose durable metadata entry is valid
//!   (writes always go to a fresh block: copy-on-write);
//! - a block's mapping becomes durable only after its data is;
//! - a superseded block's entry is invalidated only after its LBA's newer
//!   mapping is durable, and an LBA is evicted only when no superseded entry
//!   of it is still valid on disk.
//!
//! Over 600 lines on purpose: every block-state transition lives here, so
//! that the invariants above are enforced (and asserted) in one place; the
//! legal moves are listed in `moves.rs`.

mod block_set;
mod lba_map;
mod moves;

use block_set::BlockSet;
use lba_map::{LbaMap, NO_BLOCK};

/// The LBA field of a free block (on disk a free entry says
/// `format::LBA_NONE`).
const UNMAPPED_LBA: u32 = u32::MAX;
/// Blocks the eviction hand may look at per block wanted (up to 64 wanted
/// per call; the hand resumes where it stopped).
const EVICTION_SCAN_PER_BLOCK: u32 = 64;
pub const LOC_NONE: u32 = u32::MAX;
/// Block entries of one LBA a lookup prefetch loads: its current block and
/// the superseded ones before it (rarely more than one).
const PREFETCH_BLOCKS_MAX: usize = 3;

/// Where a block is in its life cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockState {
    /// On the free list; its durable entry is invalid.
    Free = 0,
    /// The current block of its LBA.
    Mapped = 1,
    /// Replaced by a newer block of the same LBA; its durable entry may
    /// still be valid until a commit invalidates it.
    Superseded = 2,
    /// Clean and evicted; its durable entry is valid until a commit invalidates it.
    Evicting = 3,
    /// Out of use with an invalid durable entry, waiting for in-flight I/O.
    Dropped = 4,
}

pub mod flag {
    pub const DIRTY: u8 = 1 << 0;
    /// The LBA's newest submitted value is in the log (meaningful on Mapped blocks).
    pub const LOGGED: u8 = 1 << 1;
    /// The durable entry holds this block's mapping.
    pub const COMMITTED: u8 = 1 << 2;
    /// The running commit writes this block's mapping.
    pub const COMMIT_PENDING: u8 = 1 << 3;
    /// The running commit invalidates this block's entry.
    pub const INVALIDATE_PENDING: u8 = 1 << 4;
    /// A data write into this block is in flight.
    pub const BUSY: u8 = 1 << 5;
    /// CLOCK reference bit.
    pub const REFERENCED: u8 = 1 << 6;
    /// The durable entry says dirty (a committed block only turns clean).
    pub const DURABLE_DIRTY: u8 = 1 << 7;
}

/// Where a write-through copy stands with its backing write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Through {
    None,
    /// In flight: the copy is dirty until it completes.
    Pending,
    /// Failed: the copy is dropped once its own cache write completes.
    Failed,
    /// Settled: a clean copy, but the backing device, not the cache, is
    /// authoritative for its LBA (its write may not be durable there yet,
    /// and a later write-through may land there before its own copy's
    /// entry), so a warm restart drops it whatever the policy then. Its
    /// entry carries the same flag as a `Pending` copy's.
    Copy,
}

/// What a commit should write for one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurableEntry {
    pub lba: u32,
    pub version: u32,
    pub dirty: bool,
    /// A write-through copy (any `Through` state but `None`).
    pub through: bool,
}

/// The in-memory state of one cache block: 16 bytes, four to a cache line
/// (the byte-sized fields last, so that no padding creeps in).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Block {
    lba: u32,
    /// Mapped: location of the LBA's newest log entry. Free: next free block.
    log_loc: u32,
    /// Distinguishes successive blocks of one LBA on disk (serial
    /// arithmetic). 32 bits: every write makes a new version, and the two
    /// versions on disk may be as far apart as the writes between commits.
    version: u32,
    state: BlockState,
    flags: u8,
    /// Reads in flight from the block (requests, write-back, log copies).
    pins: u8,
    /// A write-through copy whose backing write has not completed yet.
    through: Through,
}

const _: () = assert!(std::mem::size_of::<Block>() == 16);

impl lba_map::LbaOf for [Block] {
    fn lba_of(&self, block: u32) -> u32 {
        self[block as usize].lba
    }
}

pub struct CacheIndex {
    /// One entry per block, together so that a lookup touches one cache line.
    blocks: Box<[Block]>,
    /// Holds every Mapped, Superseded and Evicting block under its LBA.
    map: LbaMap,
    free_head: u32,
    free_count: u32,
    /// Blocks in state Evicting.
    evicting_count: u32,
    /// Mapped blocks that are not dirty: eviction's candidates. In a mostly
    /// dirty cache the CLOCK visits only these instead of every block
    /// (`evict`).
    clean: BlockSet,
    /// Blocks marked dirty (in any state): a flush that writes everything
    /// back finds them without visiting every block
    /// (`Engine::enqueue_all_dirty_for_waiter`; 150 us a flush with a 512 MiB cache).
    dirty: BlockSet,
    /// Mapped blocks that are dirty and whose value is not in the log: the
    /// log finds what to log again without visiting every block.
    unlogged_dirty: BlockSet,
    /// Dirty write-through copies: they turn clean by their own backing
    /// writes, never by write-back.
    dirty_through_count: u32,
    /// Superseded and evicted blocks (a durable entry still valid), to find
    /// them when their successor commits. Fixed-size: nothing grows on the
    /// write path.
    superseded: BlockSet,
    clock_hand: u32,
}

impl CacheIndex {
    pub fn new(blocks_count: u32) -> Self {
        let n = blocks_count as usize;
        let free = Block {
            lba: UNMAPPED_LBA,
            log_loc: LOC_NONE,
            state: BlockState::Free,
            flags: 0,
            version: 0,
            pins: 0,
            through: Through::None,
        };
        let mut index = CacheIndex {
            blocks: vec![free; n].into_boxed_slice(),
            map: LbaMap::new(blocks_count),
            free_head: NO_BLOCK,
            free_count: 0,
            evicting_count: 0,
            clean: BlockSet::new(blocks_count),
            dirty: BlockSet::new(blocks_count),
            unlogged_dirty: BlockSet::new(blocks_count),
            dirty_through_count: 0,
            superseded: BlockSet::new(blocks_count),
            clock_hand: 0,
        };
        for block in (0..blocks_count).rev() {
            index.push_free(block);
        }
        index
    }

    pub fn blocks_count(&self) -> u32 {
        self.blocks.len() as u32
    }
    pub fn free_count(&self) -> u32 {
        self.free_count
    }
    /// Clean blocks evicted whose durable entry awaits the commit that
    /// frees them: free blocks on their way.
    pub fn evicting_count(&self) -> u32 {
        self.evicting_count
    }

    /// Every change of a block's state goes through here (it keeps
    /// `evicting_count` and `clean`), but for a free block's mapping
    /// (`map_into`); both check the move against `moves::MOVES`.
    fn set_state(&mut self, block: u32, state: BlockState) {
        let was = self.blocks[block as usize].state;
        check_move(block, was, state);
        // A block in the superseded set has a valid durable entry: it leaves
        // the set before it is current again or dropped, or the set would
        // keep it once it is reused.
        assert!(
            !matches!(state, BlockState::Mapped | BlockState::Dropped) || !self.superseded.contains(block),
            "block {block} {was:?} -> {state:?} while listed superseded"
        );
        let entry = &mut self.blocks[block as usize];
        let was_evicting = was == BlockState::Evicting;
        entry.state = state;
        let clean = state == BlockState::Mapped && entry.flags & flag::DIRTY == 0;
        self.evicting_count = self.evicting_count + u32::from(state == BlockState::Evicting) - u32::from(was_evicting);
        if clean {
            self.clean.insert(block);
        } else {
            self.clean.remove(block);
        }
    }
    pub fn dirty_count(&self) -> u32 {
        self.dirty.len()
    }

    /// Every kept count and derived set against the blocks themselves:
    /// the free list, the LBA map, and the clean, dirty, unlogged-dirty and
    /// superseded sets with their counts. The engine decides from them
    /// alone (what to evict, write back, log again, invalidate), so a drift
    /// goes unseen by the oracle until the cache stalls or a restart finds
    /// a stale entry. Visits every block and allocates: for tests and the
    /// torture runs' checks between phases, never on the request path.
    pub fn check_counts(&self) -> Result<(), String> {
        let count = |keep: &dyn Fn(u32) -> bool| (0..self.blocks_count()).filter(|&b| keep(b)).count() as u32;
        let is = |state: BlockState| move |block: u32| self.state(block) == state;
        let clean = |block: u32| self.state(block) == BlockState::Mapped && !self.has(block, flag::DIRTY);
        let dirty = |block: u32| self.has(block, flag::DIRTY);
        let unlogged_dirty = |block: u32| self.unlogged_dirty(block);
        let superseded = |block: u32| matches!(self.state(block), BlockState::Superseded | BlockState::Evicting);
        let mapped = |block: u32| !matches!(self.state(block), BlockState::Free | BlockState::Dropped);
        let dirty_through = |block: u32| dirty(block) && self.through(block) != Through::None;
        let free_listed = self.free_list_len()?;
        let counted = [
            ("free", self.free_count, count(&is(BlockState::Free))),
            ("free-listed", free_listed, count(&is(BlockState::Free))),
            ("evicting", self.evicting_count, count(&is(BlockState::Evicting))),
            ("dirty", self.dirty.len(), count(&dirty)),
            ("clean mapped", self.clean.len(), count(&clean)),
            ("unlogged dirty", self.unlogged_dirty.len(), count(&unlogged_dirty)),
            ("dirty write-through", self.dirty_through_count, count(&dirty_through)),
            ("superseded or evicting", self.superseded.len(), count(&superseded)),
            ("LBA-mapped", self.map.held_count(), count(&mapped)),
        ];
        type Member<'a> = &'a dyn Fn(u32) -> bool;
        let sets: [(&str, &BlockSet, Member); 4] =
            [("clean", &self.clean, &clean), ("dirty", &self.dirty, &dirty), ("unlogged dirty", &self.unlogged_dirty, &unlogged_dirty), ("superseded", &self.superseded, &superseded)];
        for (name, set, member) in sets {
            if let Some(block) = (0..self.blocks_count()).find(|&block| member(block) != set.contains(block)) {
                return Err(format!("block {block} {name} {} but in the {name} set {}", member(block), set.contains(block)));
            }
        }
        if let Some((name, kept, found)) = counted.iter().find(|(_, kept, found)| kept != found) {
            return Err(format!("{kept} {name} blocks counted, {found} found"));
        }
        match (0..self.blocks_count()).find_map(|block| self.block_broken(block).map(|why| (block, why))) {
            Some((block, why)) => Err(format!("block {block} ({:?}, flags {:#04x}): {why}", self.state(block), self.flags_bits(block))),
            None => Ok(()),
        }
    }

    /// The free list's length, following it from its head: an error if it
    /// holds a block that is not free or runs in a loop.
    fn free_list_len(&self) -> Result<u32, String> {
        let mut seen = 0;
        let mut block = self.free_head;
        while block != NO_BLOCK {
            if seen >= self.blocks_count() || self.state(block) != BlockState::Free {
                return Err(format!("the free list holds block {block} ({:?}) at place {seen}", self.state(block)));
            }
            seen += 1;
            block = self.blocks[block as usize].log_loc;
        }
        Ok(seen)
    }

    /// What is wrong with `block` alone, against the rules the engine relies
    /// on: a free block holds nothing; a block in the map is held once, under
    /// its LBA, and an LBA has one current block; only a current block is
    /// dirty, and a logged one is dirty with a log location.
    fn block_broken(&self, block: u32) -> Option<&'static str> {
        let b = &self.blocks[block as usize];
        let held = self.map.blocks_of(b.lba).filter(|&held| held == block).count();
        match b.state {
            BlockState::Free if b.lba != UNMAPPED_LBA || b.flags != 0 || b.pins != 0 || b.through != Through::None => {
                Some("free but holding an LBA, flags, pins or a write-through state")
            }
            BlockState::Free | BlockState::Dropped if held != 0 => Some("out of use but held in the LBA map"),
            BlockState::Free => None,
            BlockState::Dropped | BlockState::Superseded | BlockState::Evicting if b.flags & (flag::DIRTY | flag::LOGGED) != 0 => {
                Some("dirty or logged but not current")
            }
            BlockState::Dropped => None,
            _ if held != 1 => Some("not held once in the LBA map under its LBA"),
            BlockState::Mapped if self.lookup(b.lba) != Some(block) => Some("one of two current blocks of its LBA"),
            BlockState::Mapped if b.flags & flag::LOGGED != 0 && (b.flags & flag::DIRTY == 0 || b.log_loc == LOC_NONE) => {
                Some("logged but clean or without a log location")
            }
            _ => None,
        }
    }

    pub fn unlogged_dirty_count(&self) -> u32 {
        self.unlogged_dirty.len()
    }
    /// The first unlogged dirty block at or after `from`, wrapping around.
    pub fn next_unlogged_dirty(&self, from: u32) -> Option<u32> {
        self.unlogged_dirty.next_from(from).or_else(|| self.unlogged_dirty.next_from(0))
    }
    /// The first block marked dirty at or after `from` (no wrapping).
    pub fn next_dirty(&self, from: u32) -> Option<u32> {
        self.dirty.next_from(from)
    }
    /// Dirty blocks that only write-back makes clean.
    pub fn write_back_dirty_count(&self) -> u32 {
        self.dirty.len() - self.dirty_through_count
    }

    fn unlogged_dirty(&self, block: u32) -> bool {
        self.state(block) == BlockState::Mapped && self.blocks[block as usize].flags & (flag::DIRTY | flag::LOGGED) == flag::DIRTY
    }

    /// Runs a state change on `blocks` and keeps the unlogged-dirty set exact.
    fn tracked<R>(&mut self, blocks: [u32; 2], change: impl FnOnce(&mut Self) -> R) -> R {
        let before = blocks.map(|b| b != NO_BLOCK && self.unlogged_dirty(b));
        let result = change(self);
        for (b, was) in blocks.into_iter().zip(before) {
            let now = b != NO_BLOCK && self.unlogged_dirty(b);
            match (was, now) {
                (false, true) => self.unlogged_dirty.insert(b),
                (true, false) => self.unlogged_dirty.remove(b),
                _ => {}
            }
        }
        result
    }

    /// A logged block's value is in the log at its log location: what an
    /// `hhc` flush and reclamation rely on, so only a current dirty block
    /// with a location may be logged.
    pub fn set_logged(&mut self, block: u32, logged: bool) {
        assert!(
            !logged || self.state(block) == BlockState::Mapped && self.has(block, flag::DIRTY) && self.blocks[block as usize].log_loc != LOC_NONE,
            "block {block} logged while {:?}, flags {:#04x}, without a log location or clean",
            self.state(block),
            self.flags_bits(block)
        );
        self.tracked([block, NO_BLOCK], |index| {
            if logged {
                index.blocks[block as usize].flags |= flag::LOGGED;
            } else {
                index.blocks[block as usize].flags &= !flag::LOGGED;
            }
        })
    }

    /// The current block of `lba`.
    pub fn lookup(&self, lba: u32) -> Option<u32> {
        self.map.find(lba, |block| self.blocks[block as usize].state == BlockState::Mapped)
    }

    /// Starts loading what a lookup of `lba` reads first (its map slot).
    pub fn prefetch_slot(&self, lba: u32) {
        self.map.prefetch(lba);
    }

    /// Starts loading the block entries a lookup of `lba` reads (after
    /// `prefetch_slot`, when the slots are in the CPU cache): every block
    /// of the LBA up to its current one, which after a write over a
    /// committed block comes after the superseded one.
    pub fn prefetch_block(&self, lba: u32) {
        for block in self.map.blocks_of(lba).take(PREFETCH_BLOCKS_MAX) {
            lba_map::prefetch_address(&self.blocks[block as usize]);
        }
    }

    /// Starts loading the map slot that applying a commit to `block`
    /// removes (`note_committed`, when the commit invalidates it).
    pub fn prefetch_invalidated_slot(&self, block: u32) {
        if self.has(block, flag::INVALIDATE_PENDING) {
            self.map.prefetch(self.lba(block));
        }
    }

    /// Starts loading `block`'s entry (a command on it is about to complete).
    pub fn prefetch_entry(&self, block: u32) {
        if let Some(entry) = self.blocks.get(block as usize) {
            lba_map::prefetch_address(entry);
        }
    }

    pub fn lba(&self, block: u32) -> u32 {
        self.blocks[block as usize].lba
    }
    pub fn state(&self, block: u32) -> BlockState {
        self.blocks[block as usize].state
    }
    pub fn has(&self, block: u32, bits: u8) -> bool {
        self.blocks[block as usize].flags & bits != 0
    }
    /// Sets flags other than DIRTY and LOGGED (which have their own setters).
    pub fn set(&mut self, block: u32, bits: u8) {
        debug_assert_eq!(bits & (flag::DIRTY | flag::LOGGED), 0);
        self.blocks[block as usize].flags |= bits;
    }
    pub fn clear(&mut self, block: u32, bits: u8) {
        debug_assert_eq!(bits & (flag::DIRTY | flag::LOGGED), 0);
        self.blocks[block as usize].flags &= !bits;
    }
    pub fn flags_bits(&self, block: u32) -> u8 {
        self.blocks[block as usize].flags
    }
    pub fn version(&self, block: u32) -> u32 {
        self.blocks[block as usize].version
    }
    pub fn log_loc(&self, block: u32) -> u32 {
        debug_assert_eq!(self.state(block), BlockState::Mapped);
        self.blocks[block as usize].log_loc
    }
    pub fn set_log_loc(&mut self, block: u32, loc: u32) {
        assert_eq!(self.state(block), BlockState::Mapped, "log location given to block {block} not current");
        self.blocks[block as usize].log_loc = loc;
    }
    pub fn pins(&self, block: u32) -> u8 {
        self.blocks[block as usize].pins
    }

    pub fn pin(&mut self, block: u32) {
        let pins = &mut self.blocks[block as usize].pins;
        assert!(*pins < u8::MAX, "block {block} pinned too often");
        *pins += 1;
    }

    /// Returns true when the block became free.
    pub fn unpin(&mut self, block: u32) -> bool {
        let pins = &mut self.blocks[block as usize].pins;
        assert!(*pins > 0, "unpin of unpinned block {block}");
        *pins -= 1;
        self.free_if_dropped(block)
    }

    // Kept out of line: inlined, it made `free_if_dropped`'s common path
    // (the block is not dropped, after every write) 11 instructions longer.
    #[inline(never)]
    fn push_free(&mut self, block: u32) {
        let b = block as usize;
        assert!(self.blocks[b].flags & flag::DIRTY == 0, "block {block} freed dirty");
        self.set_state(b as u32, BlockState::Free);
        self.blocks[b].flags = 0;
        self.blocks[b].through = Through::None;
        self.blocks[b].lba = UNMAPPED_LBA;
        self.blocks[b].log_loc = self.free_head;
        self.free_head = block;
        self.free_count += 1;
    }

    fn pop_free(&mut self) -> Option<u32> {
        if self.free_head == NO_BLOCK {
            return None;
        }
        let block = self.free_head;
        assert!(self.free_count > 0, "free list of {block} with no free block counted");
        self.free_head = self.blocks[block as usize].log_loc;
        self.free_count -= 1;
        Some(block)
    }

    /// Frees a dropped block once nothing is in flight on it.
    pub fn free_if_dropped(&mut self, block: u32) -> bool {
        let idle = self.blocks[block as usize].pins == 0 && !self.has(block, flag::BUSY);
        if self.state(block) == BlockState::Dropped && idle {
            self.push_free(block);
            return true;
        }
        false
    }

    fn set_dirty_flag(&mut self, block: u32, dirty: bool) {
        if !self.flip_dirty_flag(block, dirty) || self.state(block) != BlockState::Mapped {
            return;
        }
        if dirty {
            self.clean.remove(block);
        } else {
            self.clean.insert(block);
        }
    }

    /// The DIRTY flag and its counts, but not `clean`; false if the flag
    /// was already so.
    #[inline]
    fn flip_dirty_flag(&mut self, block: u32, dirty: bool) -> bool {
        let was = self.has(block, flag::DIRTY);
        if was == dirty {
            return false;
        }
        let through = self.blocks[block as usize].through != Through::None;
        if dirty {
            self.blocks[block as usize].flags |= flag::DIRTY;
            self.dirty.insert(block);
            self.dirty_through_count += u32::from(through);
        } else {
            self.blocks[block as usize].flags &= !flag::DIRTY;
            self.dirty.remove(block);
            assert!(self.dirty_through_count >= u32::from(through), "dirty write-through count underflow at block {block}");
            self.dirty_through_count -= u32::from(through);
        }
        true
    }

    /// Takes a free block for `lba` and makes it the LBA's current block
    /// (busy: the caller writes its data next). The previous block, if any,
    /// is superseded; the LBA's log state moves to the new block.
    pub fn map_new_block(&mut self, lba: u32, dirty: bool) -> Option<u32> {
        let block = self.pop_free()?;
        let previous = self.lookup(lba);
        self.tracked([block, previous.unwrap_or(NO_BLOCK)], |index| index.map_into(block, lba, previous, dirty));
        Some(block)
    }

    fn map_into(&mut self, block: u32, lba: u32, previous: Option<u32>, dirty: bool) {
        let b = block as usize;
        self.blocks[b].lba = lba;
        // Free to Mapped leaves `evicting_count` as it is (`set_state` cost
        // 13 instructions a write more than this). Only Free is right here,
        // stricter than the table (Superseded to Mapped is `unmap_failed`'s).
        let was = self.blocks[b].state;
        assert!(was == BlockState::Free, "illegal block-state move: block {block} {was:?} -> Mapped off the free list");
        self.blocks[b].state = BlockState::Mapped;
        self.blocks[b].flags = flag::BUSY | flag::REFERENCED;
        self.blocks[b].log_loc = LOC_NONE;
        // The current block is the LBA's newest: its superseded blocks
        // (entries far apart) are looked at only when there is none.
        self.blocks[b].version = match previous {
            Some(old) => self.blocks[old as usize].version.wrapping_add(1),
            None => self.newest_superseded_version(lba).map_or(0, |newest| newest.wrapping_add(1)),
        };
        if let Some(old) = previous {
            self.blocks[b].log_loc = self.blocks[old as usize].log_loc;
            if self.has(old, flag::LOGGED) {
                self.blocks[b].flags |= flag::LOGGED;
            }
            self.supersede(old);
        }
        self.map.insert(lba, block, &*self.blocks);
        // A free block was in no set: it joins `clean` only if it stays clean.
        self.flip_dirty_flag(block, dirty);
        if !dirty {
            self.clean.insert(block);
        }
    }

    /// The old block stays until it can no longer be what a restart must
    /// find: an uncommitted one until its successor's write completes (it
    /// may hold the last acknowledged value), a committed one until a commit
    /// invalidates it.
    fn supersede(&mut self, old: u32) {
        let was_dirty = self.has(old, flag::DIRTY);
        // Superseded first: clearing DIRTY then leaves `clean` alone.
        self.add_superseded(old);
        self.set_dirty_flag(old, false);
        self.blocks[old as usize].flags &= !flag::LOGGED;
        self.blocks[old as usize].log_loc = LOC_NONE;
        if !self.has(old, flag::COMMITTED | flag::COMMIT_PENDING) {
            if was_dirty {
                self.blocks[old as usize].flags |= flag::DURABLE_DIRTY;
            } else {
                self.blocks[old as usize].flags &= !flag::DURABLE_DIRTY;
            }
        }
    }

    /// The write into `old`'s successor completed: an `old` that never
    /// reached the disk's metadata is no longer needed.
    pub fn release_predecessor(&mut self, old: u32) {
        let never_durable = !self.has(old, flag::COMMITTED | flag::COMMIT_PENDING | flag::INVALIDATE_PENDING);
        if self.state(old) == BlockState::Superseded && never_durable {
            self.release_superseded(old);
            self.drop_block(old);
        }
    }

    /// Undoes `map_new_block` after the data write failed: the previous block
    /// (if still superseded) becomes current again.
    pub fn unmap_failed_block(&mut self, block: u32, previous: Option<u32>) {
        self.tracked([block, previous.unwrap_or(NO_BLOCK)], |index| index.unmap_failed(block, previous))
    }

    fn unmap_failed(&mut self, block: u32, previous: Option<u32>) {
        let lba = self.lba(block);
        let loc = self.blocks[block as usize].log_loc;
        let logged = self.has(block, flag::LOGGED);
        let dirty = self.has(block, flag::DIRTY);
        self.set_dirty_flag(block, false);
        self.blocks[block as usize].flags &= !(flag::BUSY | flag::LOGGED);
        self.drop_block(block);
        let Some(old) = previous.filter(|&p| self.state(p) == BlockState::Superseded && self.lba(p) == lba) else {
            return;
        };
        self.release_superseded(old);
        self.set_state(old, BlockState::Mapped);
        self.blocks[old as usize].log_loc = loc;
        if logged {
            self.blocks[old as usize].flags |= flag::LOGGED;
        }
        self.set_dirty_flag(old, dirty || self.has(old, flag::DURABLE_DIRTY));
    }

    /// Takes a block out of the map and frees it once nothing is in flight.
    fn drop_block(&mut self, block: u32) {
        self.map.remove(self.lba(block), block);
        self.set_state(block, BlockState::Dropped);
        self.free_if_dropped(block);
    }

    fn release_superseded(&mut self, block: u32) {
        assert!(self.superseded.contains(block), "superseded block {block} not listed");
        self.superseded.remove(block);
    }

    /// Superseded and evicted blocks whose durable entry is still valid.
    pub fn superseded_blocks(&self) -> impl Iterator<Item = u32> + '_ {
        self.superseded.iter()
    }

    fn add_superseded(&mut self, block: u32) {
        self.set_state(block, BlockState::Superseded);
        self.superseded.insert(block);
    }

    /// A block leaving the LBA's current place keeps a valid durable entry
    /// until a commit invalidates it (it stays in the map under its LBA, so
    /// a new block of that LBA gets a newer version).
    fn evict_committed(&mut self, block: u32) {
        self.set_state(block, BlockState::Evicting);
        self.superseded.insert(block);
    }

    /// The newest version among the LBA's blocks with a valid durable entry
    /// other than its current one.
    fn newest_superseded_version(&self, lba: u32) -> Option<u32> {
        let mut newest = None;
        for block in self.superseded_of(lba) {
            let version = self.blocks[block as usize].version;
            if newest.is_none_or(|n| serial_newer(version, n)) {
                newest = Some(version);
            }
        }
        newest
    }

    /// Superseded blocks whose newer copy was discarded at a warm restart:
    /// their older entries must not become what a later restart finds, so
    /// each is evicted and handed to `invalidate` for the next commit.
    pub fn discard_orphaned_superseded(&mut self, mut invalidate: impl FnMut(u32)) {
        // Start-up only: the list keeps the loop off the borrowed set.
        let orphans: Vec<u32> = self
            .superseded
            .iter()
            .filter(|&block| self.state(block) == BlockState::Superseded && self.lookup(self.lba(block)).is_none())
            .collect();
        for block in orphans {
            self.set_state(block, BlockState::Evicting);
            invalidate(block);
        }
    }

    /// The superseded and evicted blocks of `lba` (a durable entry still valid).
    pub fn superseded_of(&self, lba: u32) -> impl Iterator<Item = u32> + '_ {
        self.map.blocks_of(lba).filter(|&block| self.superseded.contains(block))
    }

    pub fn has_superseded_entries(&self, lba: u32) -> bool {
        self.superseded_of(lba).next().is_some()
    }

    /// Write-through: the block stays dirty until its backing write completes,
    /// so a crash in between never leaves a clean copy the backing lacks.
    pub fn set_through(&mut self, block: u32, through: Through) {
        if self.has(block, flag::DIRTY) {
            let was = self.blocks[block as usize].through != Through::None;
            let now = through != Through::None;
            assert!(self.dirty_through_count >= u32::from(was), "dirty write-through count underflow at block {block}");
            self.dirty_through_count = self.dirty_through_count + u32::from(now) - u32::from(was);
        }
        self.blocks[block as usize].through = through;
    }

    pub fn through(&self, block: u32) -> Through {
        self.blocks[block as usize].through
    }

    /// Drops the current block of its LBA whatever its state (a write-through
    /// copy whose backing write failed): the older durable entries of the LBA,
    /// if any, stay what a restart finds.
    pub fn discard(&mut self, block: u32) {
        assert_eq!(self.state(block), BlockState::Mapped, "discard of block {block} not current");
        self.tracked([block, NO_BLOCK], |index| {
            index.set_dirty_flag(block, false);
            index.blocks[block as usize].flags &= !flag::LOGGED;
            index.blocks[block as usize].through = Through::None;
            if index.has(block, flag::COMMITTED | flag::COMMIT_PENDING) {
                index.evict_committed(block);
            } else {
                index.drop_block(block);
            }
        })
    }

    pub fn mark_clean(&mut self, block: u32) {
        self.tracked([block, NO_BLOCK], |index| {
            index.set_dirty_flag(block, false);
            index.blocks[block as usize].flags &= !flag::LOGGED;
            index.blocks[block as usize].log_loc = LOC_NONE;
        })
    }

    /// What the next commit writes for `block`; `commit_unwritten_data` is the
    /// `CommitBeforeData` mutation.
    pub fn desired_entry(&self, block: u32, commit_unwritten_data: bool) -> Option<DurableEntry> {
        self.desired_entry_given(block, commit_unwritten_data, self.superseded_by_durable(block))
    }

    /// `desired_entry`, with `successor_durable` already looked up
    /// (`superseded_by_durable`).
    fn desired_entry_given(&self, block: u32, commit_unwritten_data: bool, successor_durable: bool) -> Option<DurableEntry> {
        let entry = DurableEntry {
            lba: self.lba(block),
            version: self.version(block),
            dirty: self.has(block, flag::DIRTY),
            through: self.through(block) != Through::None,
        };
        let durable = DurableEntry { dirty: self.has(block, flag::DURABLE_DIRTY), ..entry };
        match self.state(block) {
            BlockState::Free | BlockState::Dropped => None,
            BlockState::Mapped if self.has(block, flag::COMMITTED | flag::COMMIT_PENDING) => Some(entry),
            BlockState::Mapped if self.has(block, flag::BUSY) && !commit_unwritten_data => None,
            BlockState::Mapped => Some(entry),
            BlockState::Superseded if successor_durable => None,
            BlockState::Superseded if self.has(block, flag::COMMITTED | flag::COMMIT_PENDING) => Some(durable),
            BlockState::Superseded if self.has(block, flag::BUSY) && !commit_unwritten_data => None,
            BlockState::Superseded => Some(durable),
            BlockState::Evicting => None,
        }
    }

    /// A superseded `block` whose successor (the LBA's current block) is
    /// committed: the next commit invalidates it.
    fn superseded_by_durable(&self, block: u32) -> bool {
        self.state(block) == BlockState::Superseded
            && self.lookup(self.lba(block)).is_some_and(|current| self.has(current, flag::COMMITTED))
    }

    /// What the next commit writes for `block`, recorded as encoded:
    /// `desired_entry` then `note_encoded`, looking the successor up once.
    pub fn encode_entry(&mut self, block: u32, commit_unwritten_data: bool) -> Option<DurableEntry> {
        let successor_durable = self.superseded_by_durable(block);
        let entry = self.desired_entry_given(block, commit_unwritten_data, successor_durable);
        self.note_encoded(block, entry, successor_durable);
        entry
    }

    /// Called when a commit's page encoding is taken: records what becomes
    /// durable when the commit completes.
    fn note_encoded(&mut self, block: u32, entry: Option<DurableEntry>, successor_durable: bool) {
        match (self.state(block), entry) {
            (BlockState::Mapped | BlockState::Superseded, Some(_)) if !self.has(block, flag::COMMITTED) => {
                self.set(block, flag::COMMIT_PENDING)
            }
            // A superseded block left out only because its data is not written
            // yet is still needed; it is not invalidated.
            (BlockState::Superseded, None) if successor_durable => self.set(block, flag::INVALIDATE_PENDING),
            (BlockState::Evicting, None) => self.set(block, flag::INVALIDATE_PENDING),
            _ => {}
        }
        if let Some(entry) = entry {
            if entry.dirty {
                self.set(block, flag::DURABLE_DIRTY);
            } else {
                self.clear(block, flag::DURABLE_DIRTY);
            }
        }
    }

    /// Applies a completed commit to `block`; returns true if it became free.
    pub fn note_committed(&mut self, block: u32) -> bool {
        if self.has(block, flag::COMMIT_PENDING) {
            self.clear(block, flag::COMMIT_PENDING);
            self.set(block, flag::COMMITTED);
        }
        if !self.has(block, flag::INVALIDATE_PENDING) {
            return false;
        }
        // Only a block with an older or evicted entry is ever invalidated:
        // dropping a current one would lose its LBA's value.
        assert!(
            !matches!(self.state(block), BlockState::Mapped | BlockState::Free),
            "commit invalidated block {block} while {:?}",
            self.state(block)
        );
        self.clear(block, flag::INVALIDATE_PENDING | flag::COMMITTED | flag::DURABLE_DIRTY);
        if matches!(self.state(block), BlockState::Superseded | BlockState::Evicting) {
            self.release_superseded(block);
        }
        if self.state(block) == BlockState::Dropped {
            return self.free_if_dropped(block);
        }
        self.drop_block(block);
        self.state(block) == BlockState::Free
    }

    /// Clean-first CLOCK: finds up to `wanted` clean, idle blocks and evicts
    /// them. Uncommitted ones are free at once (the first count returned);
    /// committed ones go to `awaiting_commit` until a commit invalidates them.
    /// The second count is the blocks visited.
    pub fn evict(&mut self, wanted: u32, awaiting_commit: &mut Vec<u32>) -> (u32, u32) {
        let n = self.blocks_count();
        let mut freed = 0;
        // Two sweeps of the clean blocks at most (the first clears reference
        // bits), and a bounded share of a large cache per call: a cache of
        // clean blocks busy or pinned must not cost a full sweep on every
        // request.
        let budget = (2 * self.clean.len()).min(EVICTION_SCAN_PER_BLOCK * wanted.min(64) + 1024);
        let mut visited = 0;
        while visited < budget {
            if freed + awaiting_commit.len() as u32 >= wanted {
                break;
            }
            // The hand moves over clean mapped blocks only: dirty, free and
            // superseded ones are never evicted.
            let Some(block) = self.clean.next_from(self.clock_hand).or_else(|| self.clean.next_from(0)) else {
                break;
            };
            visited += 1;
            self.clock_hand = (block + 1) % n;
            if !self.evictable(block) {
                continue;
            }
            if self.has(block, flag::REFERENCED) {
                self.clear(block, flag::REFERENCED);
                continue;
            }
            if self.has(block, flag::COMMITTED) {
                self.evict_committed(block);
                awaiting_commit.push(block);
            } else {
                self.drop_block(block);
                freed += u32::from(self.state(block) == BlockState::Free);
            }
        }
        (freed, visited)
    }

    fn evictable(&self, block: u32) -> bool {
        self.state(block) == BlockState::Mapped
            && self.blocks[block as usize].flags & (flag::DIRTY | flag::BUSY | flag::COMMIT_PENDING) == 0
            && self.pins(block) == 0
            && !self.has_superseded_entries(self.lba(block))
    }

    /// Whether `block` is a clean copy `invalidate_clean` can drop now, with
    /// no log entry (a sequential-cutoff bypass needs both).
    pub fn may_drop_clean(&self, block: u32) -> bool {
        self.evictable(block) && !self.has(block, flag::LOGGED) && self.log_loc(block) == LOC_NONE
    }

    /// Drops the cached copy of `lba` (passthrough writes); same rules as eviction.
    /// Returns false if the block cannot be dropped now.
    pub fn invalidate_clean(&mut self, lba: u32) -> bool {
        let Some(block) = self.lookup(lba) else { return true };
        if !self.evictable(block) {
            return false;
        }
        if self.has(block, flag::COMMITTED) {
            self.evict_committed(block);
        } else {
            self.drop_block(block);
        }
        true
    }

    /// Restores a block from a durable entry at warm restart; of two blocks
    /// claiming one LBA the newer version is current, the other superseded.
    pub fn restore(&mut self, block: u32, entry: DurableEntry) {
        let other = self.lookup(entry.lba).unwrap_or(NO_BLOCK);
        self.tracked([block, other], |index| index.restore_entry(block, entry))
    }

    fn restore_entry(&mut self, block: u32, entry: DurableEntry) {
        let b = block as usize;
        assert_eq!(self.blocks[b].state, BlockState::Free, "block {block} restored twice");
        self.blocks[b].lba = entry.lba;
        self.blocks[b].version = entry.version;
        self.blocks[b].flags = flag::COMMITTED | if entry.dirty { flag::DURABLE_DIRTY } else { 0 };
        self.blocks[b].log_loc = LOC_NONE;
        // Only until the restart has decided what to keep (`drop_copies_after_crash`).
        self.blocks[b].through = if entry.through { Through::Pending } else { Through::None };
        match self.lookup(entry.lba) {
            None => {
                self.set_state(b as u32, BlockState::Mapped);
                self.map.insert(entry.lba, block, &*self.blocks);
                self.set_dirty_flag(block, entry.dirty);
            }
            Some(other) if serial_newer(self.blocks[other as usize].version, entry.version) => {
                self.add_superseded(block);
                self.map.insert(entry.lba, block, &*self.blocks);
            }
            Some(other) => {
                self.set_dirty_flag(other, false);
                self.add_superseded(other);
                self.set_state(b as u32, BlockState::Mapped);
                self.map.insert(entry.lba, block, &*self.blocks);
                self.set_dirty_flag(block, entry.dirty);
            }
        }
    }

    /// After `restore` calls: every block not restored goes on the free list.
    pub fn rebuild_free_list(&mut self) {
        self.free_head = NO_BLOCK;
        self.free_count = 0;
        for block in (0..self.blocks_count()).rev() {
            if self.state(block) == BlockState::Free {
                self.push_free(block);
            }
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.blocks.len() * std::mem::size_of::<Block>()
            + self.map.memory_bytes()
            + self.superseded.memory_bytes()
            + self.unlogged_dirty.memory_bytes()
            + self.dirty.memory_bytes()
    }
}

/// Fails on a move of `block`'s state that `moves::MOVES` does not list.
#[inline]
fn check_move(block: u32, from: BlockState, to: BlockState) {
    assert!(moves::legal(from, to), "illegal block-state move: block {block} {from:?} -> {to:?}");
}

/// RFC 1982 serial-number comparison: is `a` newer than `b`? Valid while
/// the versions of one LBA on disk are less than 2^31 writes apart.
pub fn serial_newer(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < 1 << 31
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_on_write_keeps_the_previous_block_until_it_is_not_needed() {
        let mut index = CacheIndex::new(16);
        let a = index.map_new_block(7, true).unwrap();
        index.clear(a, flag::BUSY);
        index.set(a, flag::COMMITTED);
        let b = index.map_new_block(7, true).unwrap();
        assert_eq!(index.state(a), BlockState::Superseded);
        assert!(index.has_superseded_entries(7));
        assert_eq!(index.lookup(7), Some(b));
        assert_eq!(index.version(b), 1);
        let c = index.map_new_block(7, true).unwrap();
        // b was never committed, but may hold the last acknowledged value
        // until c's write completes.
        assert_eq!(index.state(b), BlockState::Superseded);
        index.clear(b, flag::BUSY);
        assert!(index.desired_entry(b, false).is_some(), "b may be what a restart must find");
        index.clear(c, flag::BUSY);
        index.release_predecessor(b);
        assert_eq!(index.state(b), BlockState::Free);
        assert_eq!(index.lookup(7), Some(c));
        assert_eq!(index.dirty_count(), 1);
    }

    #[test]
    fn superseded_entry_invalidated_only_after_successor_commits() {
        let mut index = CacheIndex::new(16);
        let a = index.map_new_block(3, true).unwrap();
        index.clear(a, flag::BUSY);
        index.set(a, flag::COMMITTED | flag::DURABLE_DIRTY);
        let b = index.map_new_block(3, true).unwrap();
        index.clear(b, flag::BUSY);
        assert!(index.desired_entry(a, false).is_some(), "old mapping must stay valid");
        index.encode_entry(b, false);
        index.note_committed(b);
        assert!(index.desired_entry(a, false).is_none());
        index.encode_entry(a, false);
        assert!(index.note_committed(a));
        assert!(!index.has_superseded_entries(3));
    }

    #[test]
    fn eviction_skips_dirty_busy_and_lbas_with_valid_superseded_entries() {
        let mut index = CacheIndex::new(16);
        for lba in 0..4 {
            let b = index.map_new_block(lba, lba == 0).unwrap();
            if lba != 1 {
                index.clear(b, flag::BUSY);
            }
        }
        let mut pending = Vec::new();
        let (freed, _) = index.evict(16, &mut pending);
        assert_eq!((freed, pending.len()), (2, 0));
        assert!(index.lookup(0).is_some() && index.lookup(1).is_some());
        assert!(index.lookup(2).is_none() && index.lookup(3).is_none());
    }

    #[test]
    fn kept_counts_follow_eviction_and_a_drift_is_caught() {
        let mut index = CacheIndex::new(16);
        for lba in 0..6 {
            let b = index.map_new_block(lba, lba < 2).unwrap();
            index.clear(b, flag::BUSY);
            index.clear(b, flag::REFERENCED);
            index.set(b, flag::COMMITTED);
        }
        let mut pending = Vec::new();
        index.evict(3, &mut pending);
        assert_eq!((pending.len(), index.evicting_count(), index.dirty_count()), (3, 3, 2));
        index.check_counts().unwrap();
        index.evicting_count -= 1;
        assert_eq!(index.check_counts(), Err("2 evicting blocks counted, 3 found".to_string()));
    }

    /// A block of `index` brought to `state` the way the engine does.
    fn block_in(index: &mut CacheIndex, state: BlockState) -> u32 {
        match state {
            BlockState::Free => index.free_head,
            BlockState::Mapped => index.map_new_block(1, true).unwrap(),
            BlockState::Superseded => {
                let old = index.map_new_block(2, true).unwrap();
                index.map_new_block(2, true).unwrap();
                old
            }
            BlockState::Evicting => {
                let block = index.map_new_block(3, false).unwrap();
                index.clear(block, flag::BUSY);
                index.set(block, flag::COMMITTED);
                assert!(index.invalidate_clean(3));
                block
            }
            BlockState::Dropped => {
                // Its data write still in flight keeps it from the free list.
                let old = index.map_new_block(4, true).unwrap();
                index.map_new_block(4, true).unwrap();
                index.release_predecessor(old);
                old
            }
        }
    }

    /// Every move of illegal class `class` (`moves::ILLEGAL`) fails the
    /// table's assertion; the last one is left to the test's `should_panic`.
    fn illegal_moves_fail(class: usize) {
        let (name, moves) = moves::ILLEGAL[class];
        let (&(last_from, last_to), others) = moves.split_last().unwrap();
        for &(from, to) in others {
            let mut index = CacheIndex::new(16);
            let block = block_in(&mut index, from);
            assert_eq!(index.state(block), from);
            let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| index.set_state(block, to)))
                .expect_err(&format!("{name}: {from:?} -> {to:?} passed"));
            let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(message.starts_with("illegal block-state move"), "{name}: {from:?} -> {to:?} failed otherwise: {message}");
        }
        let mut index = CacheIndex::new(16);
        let block = block_in(&mut index, last_from);
        assert_eq!(index.state(block), last_from);
        index.set_state(block, last_to);
    }

    #[test]
    #[should_panic(expected = "illegal block-state move: block 0 Evicting -> Free")]
    fn a_block_in_use_freed_without_being_dropped_fails() {
        illegal_moves_fail(0);
    }

    #[test]
    #[should_panic(expected = "illegal block-state move: block 0 Dropped -> Evicting")]
    fn an_evicted_or_dropped_block_brought_back_fails() {
        illegal_moves_fail(1);
    }

    #[test]
    #[should_panic(expected = "illegal block-state move: block 0 Free -> Dropped")]
    fn a_free_block_put_out_of_use_fails() {
        illegal_moves_fail(2);
    }

    #[test]
    #[should_panic(expected = "illegal block-state move: block 0 Dropped -> Dropped")]
    fn a_block_moved_to_the_state_it_is_in_fails() {
        illegal_moves_fail(3);
    }

    #[test]
    #[should_panic(expected = "illegal block-state move: block 0 Mapped -> Mapped off the free list")]
    fn a_free_list_holding_a_block_in_use_fails() {
        let mut index = CacheIndex::new(16);
        let block = index.map_new_block(1, true).unwrap();
        index.free_head = block;
        index.map_new_block(2, true);
    }

    #[test]
    #[should_panic(expected = "block 0 Superseded -> Dropped while listed superseded")]
    fn a_superseded_block_dropped_while_listed_fails() {
        let mut index = CacheIndex::new(16);
        let old = block_in(&mut index, BlockState::Superseded);
        index.drop_block(old);
    }

    #[test]
    #[should_panic(expected = "block 0 logged while Mapped")]
    fn a_block_logged_without_a_log_location_fails() {
        let mut index = CacheIndex::new(16);
        let block = index.map_new_block(1, true).unwrap();
        index.set_logged(block, true);
    }

    #[test]
    fn check_counts_reports_each_derived_set_drifting() {
        // [superseded, dirty unlogged, dirty write-through, clean]
        let fresh = || {
            let mut index = CacheIndex::new(16);
            let old = index.map_new_block(5, true).unwrap();
            index.clear(old, flag::BUSY);
            index.set(old, flag::COMMITTED);
            let current = index.map_new_block(5, true).unwrap();
            let through = index.map_new_block(6, true).unwrap();
            index.set_through(through, Through::Pending);
            let clean = index.map_new_block(7, false).unwrap();
            index.check_counts().unwrap();
            (index, [old, current, through, clean])
        };
        type Drift = fn(&mut CacheIndex, [u32; 4]);
        let drifts: [(&str, Drift); 10] = [
            ("in the clean set", |index, b| index.clean.remove(b[3])),
            ("in the dirty set", |index, b| index.dirty.remove(b[1])),
            ("in the unlogged dirty set", |index, b| index.unlogged_dirty.remove(b[1])),
            ("dirty write-through blocks counted", |index, _| index.dirty_through_count -= 1),
            ("in the superseded set", |index, b| index.superseded.remove(b[0])),
            ("free blocks counted", |index, _| index.free_count -= 1),
            ("the free list holds block", |index, b| index.free_head = b[3]),
            ("evicting blocks counted", |index, _| index.evicting_count += 1),
            ("LBA-mapped blocks counted", |index, b| index.map.remove(7, b[3])),
            ("logged but clean", |index, b| index.blocks[b[3] as usize].flags |= flag::LOGGED),
        ];
        for (expected, drift) in drifts {
            let (mut index, blocks) = fresh();
            drift(&mut index, blocks);
            let found = index.check_counts().expect_err(expected);
            assert!(found.contains(expected), "{expected}: {found}");
        }
    }

    #[test]
    fn serial_comparison_wraps() {
        assert!(serial_newer(1, 0));
        assert!(serial_newer(0, u32::MAX));
        assert!(!serial_newer(u32::MAX, 0));
        assert!(serial_newer(300, 10), "far apart versions of a hot block still compare");
        assert!(!serial_newer(5, 5));
    }
}
