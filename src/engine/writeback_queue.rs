//! What write-back is asked for beside its background work: the LBAs that
//! flushes, `flush_all` and policy switches want written back, and those
//! reclamation wants written back, each queued once (lba_queue.rs); and the
//! passes by which flushes know when theirs are done.
//!
//! A pass queues every dirty block for one waiter (a wb-flush flush, a
//! flush that falls back to writing back, `flush_all`). An LBA already
//! queued is not queued again, or every concurrent flush would queue every
//! dirty block once more (flushes x dirty blocks entries): the pass counts
//! on the entry there, which is tried after the pass began, as its own
//! would have been. Passes are numbered in order, and each entry counts for
//! the pass that queued it (or that found it queued for nobody, by a switch
//! or a write-through), so a waiter's write-backs are done once every pass
//! up to its own is resolved. A write-back that fails is an error for the
//! first waiter it counted for; the waiters after it still need the block,
//! so it is queued again for the next of them, as their own entry would
//! have been tried again.
//!
//! A pass needs, of each LBA it queued, a value at least as new as the
//! newest acknowledged when it began durable on the backing device: a
//! newer value covers the older. So a run that writes back a queued LBA's
//! current block (started from a neighbour's entry, or a background one)
//! takes the entry's pass over, and a pass that finds an LBA's newest
//! acknowledged value being written back counts on that write-back
//! (`Writeback::in_flight_passes`, one pass each, as an entry). A hot
//! LBA's entry left queued found its LBA in flight whenever it was tried,
//! while the next run over it started from a neighbour's entry: a flush
//! waited more than 10 s while its block was written back again and again
//! (torture seed 1759, wb-flush). A pass that queued an LBA being written
//! back waited for one more write-back after it, of a newer value, which a
//! block rewritten faster than the commits that let it go back may never
//! get (tests/flush_writeback.rs).

use super::writeback::WritebackInFlight;
use super::Engine;
use crate::cache::{flag, serial_newer, BlockState};
use std::collections::VecDeque;
use std::fmt;
use std::num::NonZeroU64;

/// A waiter's pass: passes are numbered from 1 in the order they begin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Pass(NonZeroU64);

impl fmt::Display for Pass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What a queued LBA's write-back counts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Queued {
    /// No waiter: a policy switch's entry, or a write-through's.
    ForNobody,
    /// The waiters of this pass and of every later one.
    For(Pass),
    /// A run took its pass over (`take_queued_pass`): the entry only waits
    /// to be popped and dropped.
    Taken,
}

impl Queued {
    fn of(pass: Option<Pass>) -> Self {
        pass.map_or(Queued::ForNobody, Queued::For)
    }
}

/// The passes whose entries are not all resolved.
pub(super) struct Passes {
    /// (pass, entries not resolved), oldest first; none at the front with
    /// no entries left. Each pass here is a live waiter's: entries are added
    /// only to a new pass or to a waiter's own (a flush that queues again
    /// keeps its pass, `enqueue_all_dirty_again`), and a waiter ends only
    /// once every pass up to its own has left. So at most one per waiter.
    open: VecDeque<(Pass, u32)>,
    /// Passes begun so far.
    begun: u64,
    waiters_max: usize,
}

impl Passes {
    pub fn with_capacity(waiters_max: usize) -> Self {
        Passes { open: VecDeque::with_capacity(waiters_max), begun: 0, waiters_max }
    }

    fn begin(&mut self) -> Pass {
        self.begun += 1;
        Pass(NonZeroU64::new(self.begun).expect("a pass count past zero"))
    }

    fn add(&mut self, pass: Pass, entries: u32) {
        debug_assert!(pass.0.get() <= self.begun, "entries for pass {pass}, not begun");
        let at = self.open.partition_point(|&(p, _)| p < pass);
        match self.open.get_mut(at) {
            Some((p, count)) if *p == pass => *count += entries,
            _ => {
                assert!(self.open.len() < self.waiters_max, "pass {pass}: more passes open than waiters ({})", self.waiters_max);
                self.open.insert(at, (pass, entries))
            }
        }
    }

    fn resolve(&mut self, pass: Pass) {
        let at = self.open.partition_point(|&(p, _)| p < pass);
        let count = match self.open.get_mut(at) {
            Some((p, count)) if *p == pass && *count > 0 => count,
            _ => panic!("an entry of pass {pass} resolved with none left"),
        };
        *count -= 1;
        while self.open.front().is_some_and(|&(_, count)| count == 0) {
            self.open.pop_front();
        }
    }

    /// Whether every entry of the passes up to `pass` is resolved (a
    /// waiter with no pass waits for none).
    pub fn done_through(&self, pass: Option<Pass>) -> bool {
        pass.is_none_or(|pass| self.open.front().is_none_or(|&(p, _)| p > pass))
    }

    /// Entries not resolved of the passes up to `pass`.
    pub fn remaining_through(&self, pass: Pass) -> u64 {
        self.open.iter().take_while(|&&(p, _)| p <= pass).map(|&(_, count)| count as u64).sum()
    }

    /// (pass, entries not resolved), oldest first.
    pub fn open(&self) -> impl Iterator<Item = (Pass, u32)> + '_ {
        self.open.iter().copied().filter(|&(_, count)| count > 0)
    }
}

impl Engine {
    fn holds_dirty(&self, lba: u32) -> bool {
        holds_dirty(&self.cache, lba)
    }

    /// Queues every dirty block for write-back, for a new pass; returns
    /// the pass, which the waiter's write-backs are done with
    /// (`Passes::done_through`).
    pub(super) fn enqueue_all_dirty_for_waiter(&mut self) -> Pass {
        let pass = self.writeback.passes.begin();
        self.enqueue_all_dirty_for(Some(pass));
        pass
    }

    /// Queues every dirty block for write-back, for no waiter.
    pub(super) fn enqueue_all_dirty_for_nobody(&mut self) {
        self.enqueue_all_dirty_for(None);
    }

    fn enqueue_all_dirty_for(&mut self, pass: Option<Pass>) {
        let mut next = self.cache.next_dirty(0);
        while let Some(block) = next {
            self.stats.blocks_visited += 1;
            if self.cache.state(block) == BlockState::Mapped {
                self.queue_writeback(self.cache.lba(block), pass);
            }
            next = self.cache.next_dirty(block + 1);
        }
    }

    /// Queues every dirty block again for a waiter that already waits for
    /// `pass` (a flush whose log was lost, or that `hhc` left), counting
    /// them for that same pass: a new pass would leave the old one open
    /// beside it, one more per re-queueing. Waiters after `pass` then wait
    /// for these blocks too, which only delays them.
    pub(super) fn enqueue_all_dirty_again(&mut self, pass: Option<Pass>) -> Pass {
        let Some(pass) = pass else { return self.enqueue_all_dirty_for_waiter() };
        self.enqueue_all_dirty_for(Some(pass));
        pass
    }

    /// Queues `lba` (dirty) for write-back, counting for `pass` unless it
    /// is queued for that pass or an earlier one already, or its newest
    /// acknowledged value is being written back for one.
    pub(super) fn queue_writeback(&mut self, lba: u32, pass: Option<Pass>) {
        debug_assert!(self.holds_dirty(lba), "lba {lba} queued for write-back with nothing dirty");
        if pass.is_some_and(|pass| self.count_on_writeback_in_flight(lba, pass)) {
            return;
        }
        let passes = &mut self.writeback.passes;
        if let Some(queued) = self.writeback.queue.get_mut(lba) {
            match (*queued, pass) {
                (Queued::Taken, _) => {
                    // The run that took it started before this pass.
                    *queued = Queued::of(pass);
                    if let Some(pass) = pass {
                        passes.add(pass, 1);
                    }
                }
                (Queued::ForNobody, Some(pass)) => {
                    *queued = Queued::For(pass);
                    passes.add(pass, 1);
                }
                (Queued::For(later), Some(pass)) if later > pass => {
                    *queued = Queued::For(pass);
                    passes.resolve(later);
                    passes.add(pass, 1);
                }
                _ => {}
            }
            return;
        }
        if self.writeback.queue.is_full() {
            self.drop_clean_writeback_entries();
        }
        self.writeback.queue.push_back(lba, Queued::of(pass));
        if let Some(pass) = pass {
            self.writeback.passes.add(pass, 1);
        }
    }

    /// Whether `pass` counts on the write-back in flight of `lba`, as on a
    /// queued entry: it does if that write-back holds a value at least as
    /// new as the newest acknowledged.
    fn count_on_writeback_in_flight(&mut self, lba: u32, pass: Pass) -> bool {
        let Some(&WritebackInFlight { block, pass: counted }) = self.writeback.in_flight_passes.get(&lba) else { return false };
        if !newest_acknowledged(&self.cache, lba, block) {
            return false;
        }
        if counted.is_none_or(|counted| counted > pass) {
            self.writeback.in_flight_passes.insert(lba, WritebackInFlight { block, pass: Some(pass) });
            if let Some(counted) = counted {
                self.writeback.passes.resolve(counted);
            }
            self.writeback.passes.add(pass, 1);
        }
        true
    }

    /// A run is about to write back `lba`'s current block: it takes over
    /// the pass of the LBA's queued entry (None if none), which is then
    /// dropped when popped. An entry for no pass (a policy switch's) has no
    /// waiter to hand over, and stays as it was.
    pub(super) fn take_queued_pass(&mut self, lba: u32) -> Option<Pass> {
        let queued = self.writeback.queue.get_mut(lba)?;
        let Queued::For(pass) = *queued else { return None };
        *queued = Queued::Taken;
        Some(pass)
    }

    /// Entries whose LBA holds no dirty data any more resolve as they would
    /// when popped (`start_writeback`): what is left are distinct dirty LBAs.
    fn drop_clean_writeback_entries(&mut self) {
        let (cache, passes) = (&self.cache, &mut self.writeback.passes);
        self.writeback.queue.retain(|lba| holds_dirty(cache, lba), |queued| {
            if let Queued::For(pass) = queued {
                passes.resolve(pass);
            }
        });
        self.finish_flush_all_if_done();
    }


    /// The write-back of `lba` counted for `pass` finished (or failed).
    pub(super) fn writeback_resolved(&mut self, pass: Option<Pass>, lba: u32, ok: bool) {
        let Some(pass) = pass else { return };
        if !ok {
            self.writeback_failed_for(pass, lba);
        }
        self.writeback.passes.resolve(pass);
        self.finish_flush_all_if_done();
    }

    /// The waiters still counting on a write-back of `pass` are those at or
    /// after it: the first takes the error, the next gets `lba` queued again.
    fn writeback_failed_for(&mut self, pass: Pass, lba: u32) {
        let waiters = || self.flushes.waiter_passes().chain(self.flush_all_pass());
        let Some(first) = waiters().filter(|&w| w >= pass).min() else { return };
        let next = waiters().filter(|&w| w > first).min();
        self.flushes.fail_waiters_of(first);
        self.flush_all_failed_for(first);
        if let Some(next) = next.filter(|_| self.holds_dirty(lba)) {
            self.queue_writeback(lba, Some(next));
        }
    }
}

impl super::writeback::Writeback {
    /// Queues `lba` (dirty) for reclamation's write-back.
    pub(super) fn queue_reclaim(&mut self, cache: &crate::cache::CacheIndex, lba: u32) {
        debug_assert!(holds_dirty(cache, lba), "lba {lba} queued for reclamation with nothing dirty");
        if self.reclaim_queue.is_full() {
            self.reclaim_queue.retain(|lba| holds_dirty(cache, lba), |()| {});
        }
        self.reclaim_queue.push_back(lba, ());
    }
}

fn holds_dirty(cache: &crate::cache::CacheIndex, lba: u32) -> bool {
    cache.lookup(lba).is_some_and(|block| cache.has(block, flag::DIRTY))
}

/// Whether `block` of `lba` holds a value at least as new as the newest
/// acknowledged: it is the current block, or every newer one is still
/// being written. A newer block whose write completed stays in the LBA's
/// map until an even newer one completes or, committed, until a commit
/// invalidates it after a newer one is durable (`CacheIndex::supersede`),
/// so it would be found.
fn newest_acknowledged(cache: &crate::cache::CacheIndex, lba: u32, block: u32) -> bool {
    let newer = |other: u32| other != block && serial_newer(cache.version(other), cache.version(block));
    let busy_if_newer = |other: u32| !newer(other) || cache.has(other, flag::BUSY);
    cache.lookup(lba).is_some_and(busy_if_newer) && cache.superseded_of(lba).all(busy_if_newer)
}
