//! LBAs a write-back pass (a flush's, `flush_all`'s) cannot start: the
//! LBA's current block waits for a commit (`waits_for_commit`), and by the
//! time that commit completes a newer write has made another block current,
//! which waits for the next one. Rewritten faster than commits complete (a
//! hot block under slow metadata writes), the LBA would hold its pass, and
//! the flush waiting on it, forever (torture seed 567,380, wb-flush: a flush
//! outstanding 10 s under latency spikes). Once two commits have completed
//! while a pass waited on such an LBA, new writes of it wait until its
//! write-back starts: the next commit then records its current block.

use super::lba_hash::LbaTable;
use super::Engine;
use crate::cache::flag;

/// Commits completed while a pass waited on an LBA before its writes wait.
const COMMITS_BEFORE_HOLD: u64 = 2;

#[derive(Default)]
pub(super) struct StarvedLbas {
    /// At most one per dirty block.
    waits: LbaTable<Starved>,
}

/// An LBA a pass found waiting for a commit.
#[derive(Clone, Copy, Debug)]
struct Starved {
    /// Commits completed when a pass first found it so.
    since: u64,
    /// Its new writes wait for its write-back to start.
    held: bool,
}

impl StarvedLbas {
    pub fn with_capacity(capacity: usize) -> Self {
        StarvedLbas { waits: LbaTable::with_capacity_and_hasher(capacity, Default::default()) }
    }
}

impl Engine {
    /// A pass found `lba`'s current block waiting for a commit.
    pub(super) fn pass_waits_for_commit(&mut self, lba: u32) {
        let completed = self.commit.completed();
        let starved = self.starved.waits.entry(lba).or_insert(Starved { since: completed, held: false });
        if !starved.held && completed >= starved.since + COMMITS_BEFORE_HOLD {
            starved.held = true;
            self.stats.writeback_starved_lbas += 1;
        }
    }

    /// `lba`'s write-back started, or nothing of it is dirty any more.
    pub(super) fn starvation_over(&mut self, lba: u32) {
        if !self.starved.waits.is_empty() {
            self.starved.waits.remove(&lba);
        }
    }

    /// Whether a new write of `lba` waits for its write-back to start.
    /// Waits that no pass needs any more (it failed, or ended otherwise),
    /// or of an LBA left clean by a path that did not end them (a write
    /// failed, the block discarded), let writes go.
    pub(super) fn write_waits_for_writeback(&mut self, lba: u32) -> bool {
        if self.starved.waits.is_empty() {
            return false;
        }
        if self.writeback.passes.open().next().is_none() {
            self.starved.waits.clear();
            return false;
        }
        if !self.starved.waits.get(&lba).is_some_and(|starved| starved.held) {
            return false;
        }
        let dirty = self.cache.lookup(lba).is_some_and(|b| self.cache.has(b, flag::DIRTY));
        if !dirty {
            self.starved.waits.remove(&lba);
        }
        dirty
    }
}
