//! Written-back blocks turn clean only with their log entries revoked (a
//! revoke record in the log, or the durable head past the entry): a replay
//! must never take a block back over what the backing device holds since.
//! The blocks still waiting for that, and the revokes owed for entries
//! dropped without one, are kept here (`RevokeWaits`).

use super::lba_hash::LbaTable;
use super::Engine;
use crate::cache::{flag, BlockState, LOC_NONE};
use crate::hdd_log::OpenFor;
use std::collections::VecDeque;

/// A log entry a warm restart found whose block is clean by now: it is
/// revoked once the log can take it.
#[derive(Clone, Copy, Debug)]
pub(super) struct StartupRevoke {
    pub lba: u64,
    pub loc: u32,
}

/// What written-back blocks still owe the log before they turn clean.
pub(super) struct RevokeWaits {
    /// Written-back blocks whose revoke found no room in the log: their
    /// entries are dropped from the index (so segments can empty out) and
    /// they turn clean once the durable head has passed the segment of the
    /// dropped entry, or a revoke could be recorded after all. Pinned
    /// meanwhile by their write-back, and a pinned block is not written back
    /// again (`writeback_ready`, `ordered_next_retained`): distinct blocks,
    /// at most one entry per cache block.
    waiting: VecDeque<(u32, u64)>,
    /// LBAs with log entries dropped from the index without a revoke record:
    /// the sequence of the newest such entry. Until a revoke for the LBA is
    /// recorded or the durable head passes that sequence, a replay would
    /// apply the entry, so the LBA may not turn clean without a revoke. A
    /// debt the head has passed is dead, but is dropped only when its LBA is
    /// looked at again, or when the table is full (`owe`).
    ///
    /// Live debts here are at most one per cache block: each has a block of
    /// its LBA that stands for it. At first the written-back block, which
    /// waits pinned and current until its revoke is recorded (the debt goes)
    /// or the head passes it (the debt is dead); overwritten meanwhile, the
    /// LBA's new dirty block, which turns clean only through `clean_block`
    /// (where the debt is paid, or owed again with a new waiting block): a
    /// write-through waits behind it (`holds_unwritten_data`), the cutoff
    /// never bypasses a debt, and nothing else drops a dirty block. So `owe`
    /// asserts the bound once the dead debts are gone.
    debts: LbaTable<u64>,
    /// Debts of entries a warm restart found for clean blocks and dropped
    /// for want of log space (`drop_startup_revokes`): clean blocks may be
    /// evicted, so nothing in the cache stands for these. Allocated once,
    /// for the start-up revokes dropped, and only shrinks.
    startup_debts: LbaTable<u64>,
    startup_debts_max: usize,
    blocks_count: u32,
}

impl RevokeWaits {
    pub fn new(blocks_count: u32) -> Self {
        RevokeWaits {
            waiting: VecDeque::with_capacity(blocks_count as usize),
            debts: LbaTable::with_capacity_and_hasher(blocks_count as usize, Default::default()),
            startup_debts: LbaTable::default(),
            startup_debts_max: 0,
            blocks_count,
        }
    }

    /// `block` (pinned) waits for its revoke; `sequence` is its LBA's debt.
    pub fn wait(&mut self, block: u32, sequence: u64) {
        assert!(self.waiting.len() < self.blocks_count as usize, "block {block}: more blocks waiting for a revoke than cache blocks");
        self.waiting.push_back((block, sequence));
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    fn next_waiting(&mut self) -> Option<(u32, u64)> {
        self.waiting.pop_front()
    }

    /// A written-back block of `lba`, whose entry at `sequence` left the
    /// index without a revoke record, waits for one. A full table first
    /// drops the debts the durable head has passed: they are owed no more,
    /// as `Engine::needs_revoke` finds too.
    pub fn owe(&mut self, lba: u32, sequence: u64, durable_head: u64) {
        if self.debts.len() >= self.blocks_count as usize && !self.debts.contains_key(&lba) {
            self.debts.retain(|_, &mut owed| owed >= durable_head);
        }
        let debt = self.debts.entry(lba).or_insert(sequence);
        *debt = (*debt).max(sequence);
        assert!(self.debts.len() <= self.blocks_count as usize, "lba {lba}: more live revoke debts than cache blocks");
    }

    /// Room for the debts of `count` start-up revokes, dropped next.
    fn reserve_startup(&mut self, count: usize) {
        assert!(self.startup_debts.is_empty(), "start-up revokes dropped twice");
        self.startup_debts = LbaTable::with_capacity_and_hasher(count, Default::default());
        self.startup_debts_max = count;
    }

    /// A start-up revoke of `lba` at `sequence` is dropped.
    fn owe_startup(&mut self, lba: u32, sequence: u64) {
        let debt = self.startup_debts.entry(lba).or_insert(sequence);
        *debt = (*debt).max(sequence);
        assert!(self.startup_debts.len() <= self.startup_debts_max, "lba {lba}: more start-up debts than start-up revokes");
    }

    /// The newest entry of `lba` dropped without a revoke, if any is owed.
    pub fn debt(&self, lba: u32) -> Option<u64> {
        let (owed, startup) = (self.debts.get(&lba).copied(), self.startup_debts.get(&lba).copied());
        owed.max(startup)
    }

    /// Forgets `lba`'s debts of entries before `sequence_end`: the durable
    /// head has passed them.
    fn forgive_before(&mut self, lba: u32, sequence_end: u64) {
        for table in [&mut self.debts, &mut self.startup_debts] {
            if table.get(&lba).is_some_and(|&owed| owed < sequence_end) {
                table.remove(&lba);
            }
        }
    }

    /// A revoke of `lba` is recorded: it covers every older entry.
    pub fn paid(&mut self, lba: u32) {
        self.debts.remove(&lba);
        self.startup_debts.remove(&lba);
    }

    /// The log they were owed to is gone.
    pub fn clear(&mut self) {
        self.debts.clear();
        self.startup_debts.clear();
    }
}

impl Engine {
    /// Marks a written-back block clean, revoking its log entries first.
    /// False if the revoke cannot be recorded now (no log buffer).
    pub(super) fn clean_block(&mut self, block: u32) -> bool {
        debug_assert!(
            self.cache.state(block) == BlockState::Mapped && self.cache.has(block, flag::DIRTY),
            "block {block} cleaned while not a dirty mapped block"
        );
        if self.log_revocable() && self.needs_revoke(block) && !self.revoke(block) {
            return false;
        }
        self.cache.mark_clean(block);
        self.commit.mark_block(block);
        true
    }

    /// Whether turning `block` clean needs a revoke record: it has a live log
    /// entry, or older entries of its LBA that no revoke covers may still be
    /// replayed.
    fn needs_revoke(&mut self, block: u32) -> bool {
        let lba = self.cache.lba(block);
        let durable_head = self.log.durable_head_sequence;
        self.writeback.revokes.forgive_before(lba, durable_head);
        self.cache.log_loc(block) != LOC_NONE || self.writeback.revokes.debt(lba).is_some()
    }

    /// A log found full at a warm restart has no room for the revokes of its
    /// entries whose blocks are clean, and those entries keep the head from
    /// ever freeing a segment: they are dropped from the index instead, with
    /// debts, as write-backs do when their revoke finds no room.
    fn drop_startup_revokes(&mut self) {
        self.writeback.revokes.reserve_startup(self.startup_revokes.len());
        while let Some(StartupRevoke { lba, loc }) = self.startup_revokes.pop() {
            assert!(loc != LOC_NONE, "a start-up revoke of lba {lba} without a log entry");
            let sequence = self.log.loc_sequence(loc);
            self.log.kill(loc, None);
            if let Ok(lba) = u32::try_from(lba) {
                self.writeback.revokes.owe_startup(lba, sequence);
            }
        }
    }

    /// Revokes that found no log buffer before; blocks stay pinned meanwhile.
    pub(super) fn apply_pending_revokes(&mut self) {
        while let Some(&StartupRevoke { lba, loc }) = self.startup_revokes.last() {
            if !self.log_revocable() {
                break;
            }
            let Some(buffer) = self.open_buffer_with_revoke_room() else {
                if self.log.segments_free() < OpenFor::Revoke.min_free() {
                    self.drop_startup_revokes();
                }
                break;
            };
            let region = self.log.buffers[buffer].region;
            self.log.kill(loc, None);
            self.log.record_revoke(self.regions.all[region as usize].as_mut_slice(), lba);
            self.stats.revokes += 1;
            self.startup_revokes.pop();
        }
        for _ in 0..self.writeback.revokes.waiting() {
            let Some((block, sequence)) = self.writeback.revokes.next_waiting() else { break };
            let current = self.cache.state(block) == BlockState::Mapped && self.cache.has(block, flag::DIRTY);
            // Its write-back's pin keeps it from being written back, evicted
            // or read into the log again meanwhile, so its entry stays dropped.
            debug_assert!(self.cache.pins(block) > 0, "block {block} waits for a revoke unpinned");
            debug_assert!(
                !current || self.cache.log_loc(block) == LOC_NONE && !self.cache.has(block, flag::LOGGED),
                "block {block} waits for a revoke but is in the log again"
            );
            let passed = self.log.durable_head_sequence > sequence;
            if passed {
                self.writeback.revokes.forgive_before(self.cache.lba(block), sequence + 1);
            }
            // Its entry is out of the index: only a revoke record or the head
            // passing it keeps a replay from using it. A log no longer written
            // (every mirror failed; restarted) is never replayed, as
            // `clean_block` assumes too: waiting for it would never end.
            let revoke_needed = current && !passed && self.log_revocable();
            if revoke_needed && !self.revoke(block) {
                self.writeback.revokes.wait(block, sequence);
                continue;
            }
            if current {
                self.cache.mark_clean(block);
                self.commit.mark_block(block);
            }
            self.cache.unpin(block);
        }
    }
}
