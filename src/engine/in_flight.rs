//! The LBAs with a backing write in flight: two backing writes of one LBA
//! must never race (the older could land last). Two kinds share the set, so
//! that either finds the other's: write-backs, from the start of their
//! cache reads until their backing FLUSH generation completes, and the
//! backing writes of write-through, passthrough and cutoff requests. Each
//! kind is counted against a bound of its own, and the set is allocated for
//! both at creation. Write-back waits for room (`writeback_room`), so a
//! slow backing FLUSH holds it back instead of growing the set.

use super::lba_hash::LbaSet;

pub(super) struct LbasInFlight {
    set: LbaSet,
    /// Of `set`, the LBAs of requests' backing writes.
    through: u32,
    /// Write-back LBAs, held to it by `writeback_room`. They are never more
    /// than the cache's blocks either: each has its own pinned block.
    writeback_max: u32,
    /// A request's backing write covers its own blocks: at most
    /// `request_blocks_max`, the blocks of every live request.
    through_max: u32,
}

impl LbasInFlight {
    pub fn new(writeback_max: u32, through_max: u32, blocks_count: u32) -> Self {
        let capacity = writeback_max.min(blocks_count) as usize + through_max as usize;
        LbasInFlight { set: LbaSet::with_capacity_and_hasher(capacity, Default::default()), through: 0, writeback_max, through_max }
    }

    pub fn contains(&self, lba: u32) -> bool {
        self.set.contains(&lba)
    }

    fn writeback_count(&self) -> u32 {
        self.set.len() as u32 - self.through
    }

    /// Whether a write-back run of up to `blocks` may start.
    pub fn writeback_room(&self, blocks: u32) -> bool {
        self.writeback_count() + blocks <= self.writeback_max
    }

    /// A write-back of `lba` starts; none is in flight.
    pub fn insert_writeback(&mut self, lba: u32) {
        let inserted = self.set.insert(lba);
        assert!(inserted, "two backing writes of lba {lba} in flight");
        assert!(self.writeback_count() <= self.writeback_max, "lba {lba}: more LBAs written back at once than {}", self.writeback_max);
    }

    pub fn remove_writeback(&mut self, lba: u32) {
        let removed = self.set.remove(&lba);
        assert!(removed, "write-back of lba {lba} ended while not in flight");
    }

    /// A request's backing write of `lbas` starts; none is in flight.
    pub fn insert_through(&mut self, lbas: impl Iterator<Item = u32>) {
        for lba in lbas {
            let inserted = self.set.insert(lba);
            assert!(inserted, "a backing write of lba {lba} started while another is in flight");
            self.through += 1;
        }
        assert!(self.through <= self.through_max, "{} LBAs of requests' backing writes in flight, over {}", self.through, self.through_max);
    }

    pub fn remove_through(&mut self, lbas: impl Iterator<Item = u32>) {
        for lba in lbas {
            let removed = self.set.remove(&lba);
            assert!(removed, "a backing write of lba {lba} ended while not in flight");
            self.through -= 1;
        }
    }
}
