//! Durable cache metadata: a commit writes the metadata pages whose blocks
//! changed.
//!
//! Write ordering (why a warm restart never returns stale or foreign data):
//! 1. Data is only ever written into a block whose durable entry is invalid
//!    (copy-on-write; a reused block was invalidated by an earlier commit).
//! 2. A commit first encodes the pages — a new mapping only for a block
//!    whose data write has completed — then FLUSHes the cache device, so
//!    that data is durable before any page that points to it is written.
//! 3. The pages go to the older of each page's two slots, so a torn page
//!    write leaves the previous version; every change inside one commit is
//!    independent of the others (see `cache::CacheIndex::desired_entry`), so
//!    any subset of pages landing is a consistent state.
//! 4. A second FLUSH makes the pages durable; only then do the commit's
//!    effects count: mappings become `COMMITTED`, invalidated blocks free.
//! 5. A superseded block is invalidated only in a commit that starts after
//!    its LBA's newer mapping is durable, and on restart the newer version
//!    wins (32-bit serial numbers), so an LBA never goes back in time.

use super::{Engine, FailKind, FailReason, Op, META_POOL_PAGES};
use crate::config::Mutation;
use crate::format::{MetaEntry, MetaPageHeader, LBA_NONE, META_ENTRIES_PER_PAGE, UNIT_BYTES};
use crate::io::{DeviceRole, IoBuffer, IoKind, IoStatus, Nanos};
use std::collections::VecDeque;

/// A commit covers every page dirty when it started, in rounds of at most
/// `META_POOL_PAGES` pages (each round: encode, FLUSH, write, FLUSH,
/// apply). Its queues are the `Commit`'s own, sized at creation and reused.
struct InFlight {
    writes_pending: u32,
    failed: bool,
    step: RoundStep,
}

/// Where the running round is. Encoding and applying go
/// `Config::commit_step_pages` pages at a time, one step per call into the
/// engine (the next input's, or a timer's 20 us later), so requests are
/// served between the steps; back to back while a flush waits
/// (`take_commit_step`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum RoundStep {
    /// `round[..n]` are encoded; the FLUSH that makes their data durable
    /// comes after the last.
    Encoding(usize),
    /// FLUSH, page writes, FLUSH in flight.
    Writing,
    /// The round is durable; `round[..n]` are applied to the cache index.
    Applying(usize),
}

pub(super) struct Commit {
    page_dirty: Vec<bool>,
    dirty_pages: VecDeque<u32>,
    /// Sequence of the newest durable version of each page.
    pub page_seq: Vec<u64>,
    in_flight: Option<InFlight>,
    /// The running commit's pages of later rounds.
    remaining: VecDeque<u32>,
    /// The running round's page index per pool slot.
    round: Vec<u32>,
    /// One page's entries while it is encoded.
    entries: Vec<MetaEntry>,
    started: u64,
    completed: u64,
    wanted: u64,
    last_commit_at: Nanos,
}

fn page_of(block: u32) -> u32 {
    block / META_ENTRIES_PER_PAGE as u32
}

impl Commit {
    pub fn new(pages_count: u32) -> Self {
        Commit {
            page_dirty: vec![false; pages_count as usize],
            dirty_pages: VecDeque::with_capacity(pages_count as usize),
            page_seq: vec![0; pages_count as usize],
            in_flight: None,
            remaining: VecDeque::with_capacity(pages_count as usize),
            round: Vec::with_capacity(META_POOL_PAGES as usize),
            entries: Vec::with_capacity(META_ENTRIES_PER_PAGE),
            started: 0,
            completed: 0,
            wanted: 0,
            last_commit_at: 0,
        }
    }

    pub fn mark_block(&mut self, block: u32) {
        self.mark_page(page_of(block));
    }

    /// The next commit writes `block`'s page already.
    pub fn block_marked(&self, block: u32) -> bool {
        self.page_dirty[page_of(block) as usize]
    }

    pub fn mark_page(&mut self, page: u32) {
        if !self.page_dirty[page as usize] {
            self.page_dirty[page as usize] = true;
            self.dirty_pages.push_back(page);
        }
    }

    pub fn mark_all(&mut self) {
        for page in 0..self.page_dirty.len() as u32 {
            self.mark_page(page);
        }
    }

    /// Asks for a commit that starts from now; returns its number.
    pub fn request(&mut self) -> u64 {
        let target = self.started + 1;
        self.wanted = self.wanted.max(target);
        target
    }

    pub fn completed(&self) -> u64 {
        self.completed
    }

    pub fn wanted(&self) -> bool {
        self.wanted > self.started || !self.dirty_pages.is_empty()
    }

    pub fn is_idle(&self) -> bool {
        self.in_flight.is_none()
    }

    /// The running round has pages to encode or apply (`continue_round`).
    pub fn has_step_due(&self) -> bool {
        self.in_flight.as_ref().is_some_and(|f| f.step != RoundStep::Writing)
    }

    pub fn has_dirty_pages(&self) -> bool {
        !self.dirty_pages.is_empty()
    }

    pub fn memory_bytes(&self) -> usize {
        self.page_dirty.len() * (1 + 4 + 8 + 4)
            + self.round.capacity() * 4
            + self.entries.capacity() * std::mem::size_of::<MetaEntry>()
    }
}

impl Engine {
    /// Starts a commit when one is wanted: by a flush, by evictions and
    /// superseded blocks waiting to be freed, or periodically. Its first
    /// step is taken at once, even after another commit's last in the same
    /// call (`take_commit_step`): deferred, it cost the timed simulator's
    /// varmail with a FLUSH per append 3 % of its IOPS.
    pub(super) fn maybe_commit(&mut self) {
        if !self.commit.is_idle() || !self.config.policy.uses_cache() && self.policy_target.is_none() && !self.commit.has_dirty_pages() {
            return;
        }
        let requested = self.commit.wanted > self.commit.started;
        let low_free = self.cache.free_count() < self.free_blocks_low_watermark();
        let periodic = self.commit.has_dirty_pages()
            && (self.is_idle() || self.now.saturating_sub(self.commit.last_commit_at) >= self.config.superblock_interval_ns);
        if requested || (low_free && self.commit.has_dirty_pages()) || periodic {
            self.start_commit();
            self.take_commit_step();
        }
    }

    fn start_commit(&mut self) {
        self.commit.started += 1;
        self.commit.last_commit_at = self.now;
        let commit = &mut self.commit;
        debug_assert!(commit.remaining.is_empty());
        std::mem::swap(&mut commit.remaining, &mut commit.dirty_pages);
        for &page in &commit.remaining {
            commit.page_dirty[page as usize] = false;
        }
        commit.in_flight = Some(InFlight { writes_pending: 0, failed: false, step: RoundStep::Encoding(0) });
        self.start_commit_round();
    }

    fn start_commit_round(&mut self) {
        let commit = &mut self.commit;
        debug_assert!(commit.in_flight.is_some(), "no commit");
        commit.round.clear();
        while commit.round.len() < META_POOL_PAGES as usize {
            let Some(page) = commit.remaining.pop_front() else { break };
            commit.round.push(page);
        }
        if commit.round.is_empty() {
            self.commit.in_flight = None;
            self.commit.completed = self.commit.started;
            self.stats.commits += 1;
            return;
        }
        // Its first step comes with the next call into the engine (or with
        // this one's `maybe_commit`, for a commit's first round).
        self.set_round_step(RoundStep::Encoding(0));
    }

    /// The running round's next step, if it has one due: first in the
    /// background work, so that what follows sees the blocks a completed
    /// commit freed and the flushes waiting for it complete in the same
    /// call. Besides a new commit's first (`maybe_commit`), one step per
    /// call into the engine, unless a flush is in progress: flushes wait
    /// for commits, so then the steps run back to back (with a FLUSH after
    /// every write, `hhc` lost a sixth of its IOPS to steps in turn).
    pub(super) fn take_commit_step(&mut self) {
        while self.commit.has_step_due() {
            self.continue_round();
            if self.flushes.is_empty() {
                break;
            }
        }
    }

    fn set_round_step(&mut self, step: RoundStep) {
        self.commit.in_flight.as_mut().expect("no commit").step = step;
    }

    /// The running round's next step: encodes or applies its next
    /// `commit_step_pages` pages, and moves on after the last.
    #[inline(never)]
    fn continue_round(&mut self) {
        let pages = self.commit.round.len();
        let step_pages = self.config.commit_step_pages as usize;
        match self.commit.in_flight.as_ref().expect("no commit").step {
            RoundStep::Encoding(first) => {
                let end = (first + step_pages).min(pages);
                for slot in first..end {
                    self.encode_page(self.commit.round[slot], slot as u32);
                }
                if end < pages {
                    return self.set_round_step(RoundStep::Encoding(end));
                }
                self.set_round_step(RoundStep::Writing);
                // Every mapping encoded is of data written before the step
                // that encoded it: the FLUSH after the last step covers all.
                if self.mutation() == Mutation::CommitBeforeData {
                    self.write_commit_pages();
                } else {
                    self.submit(Op::CommitFlush { second: false }, DeviceRole::Cache, IoKind::Flush, 0, 0, IoBuffer::None);
                }
            }
            RoundStep::Applying(first) => {
                let end = (first + step_pages).min(pages);
                for slot in first..end {
                    let page = self.commit.round[slot];
                    self.commit.page_seq[page as usize] += 1;
                    // Invalidated blocks leave the map: their slots, far
                    // from the page, are loaded together first.
                    for block in self.page_blocks(page) {
                        self.cache.prefetch_invalidated_slot(block);
                    }
                    for block in self.page_blocks(page) {
                        self.cache.note_committed(block);
                    }
                }
                if end < pages {
                    return self.set_round_step(RoundStep::Applying(end));
                }
                self.finish_commit_round();
            }
            RoundStep::Writing => {}
        }
    }

    fn page_blocks(&self, page: u32) -> std::ops::Range<u32> {
        let first = page * META_ENTRIES_PER_PAGE as u32;
        first..(first + META_ENTRIES_PER_PAGE as u32).min(self.cache.blocks_count())
    }

    fn encode_page(&mut self, page: u32, pool_slot: u32) {
        let unwritten = self.mutation() == Mutation::CommitBeforeData;
        let blocks = self.page_blocks(page);
        self.stats.blocks_visited += blocks.len() as u64;
        let mut entries = std::mem::take(&mut self.commit.entries);
        entries.clear();
        for block in blocks.clone() {
            let desired = self.cache.encode_entry(block, unwritten);
            entries.push(match desired {
                Some(e) => MetaEntry { lba: e.lba as u64, epoch: e.version, dirty: e.dirty, through: e.through },
                None => MetaEntry { lba: LBA_NONE, epoch: 0, dirty: false, through: false },
            });
        }
        let header = MetaPageHeader {
            instance_id: self.config.instance_id,
            page_index: page,
            page_seq: self.commit.page_seq[page as usize] + 1,
            entries_count: entries.len() as u16,
        };
        let region = self.regions.meta_pool;
        let start = pool_slot as usize * UNIT_BYTES;
        header.encode(&mut entries.drain(..), &mut self.region(region)[start..start + UNIT_BYTES]);
        self.commit.entries = entries;
    }

    fn write_commit_pages(&mut self) {
        let pages = self.commit.round.len();
        for slot in 0..pages {
            let page = self.commit.round[slot];
            let seq = self.commit.page_seq[page as usize] + 1;
            let offset = self.cache_layout.meta_page_offset(page, seq % 2 == 1);
            let buffer = IoBuffer::Engine { region: self.regions.meta_pool, offset_bytes: (slot * UNIT_BYTES) as u32 };
            let op = Op::MetaWrite { pool_slot: slot as u32 };
            self.submit(op, DeviceRole::Cache, IoKind::Write, offset, UNIT_BYTES as u64, buffer);
        }
        self.commit.in_flight.as_mut().expect("no commit").writes_pending = pages as u32;
        self.stats.meta_pages_written += pages as u64;
    }

    pub(super) fn commit_flush_done(&mut self, second: bool, status: IoStatus) {
        match status {
            IoStatus::DeviceLost => self.fail(FailReason::new(FailKind::DeviceLost, "cache device lost")),
            IoStatus::Error => self.abort_commit(),
            IoStatus::Ok if !second => self.write_commit_pages(),
            // The background work after this completion takes the first step.
            IoStatus::Ok => self.set_round_step(RoundStep::Applying(0)),
        }
    }

    pub(super) fn meta_write_done(&mut self, _pool_slot: u32, status: IoStatus) {
        if status == IoStatus::DeviceLost {
            return self.fail(FailReason::new(FailKind::DeviceLost, "cache device lost"));
        }
        let in_flight = self.commit.in_flight.as_mut().expect("page write without commit");
        assert!(in_flight.writes_pending > 0, "metadata page write done with none pending");
        in_flight.writes_pending -= 1;
        in_flight.failed |= status != IoStatus::Ok;
        if in_flight.writes_pending > 0 {
            return;
        }
        if in_flight.failed {
            self.abort_commit();
        } else {
            self.submit(Op::CommitFlush { second: true }, DeviceRole::Cache, IoKind::Flush, 0, 0, IoBuffer::None);
        }
    }

    /// Every page of the round is applied.
    fn finish_commit_round(&mut self) {
        // Superseded blocks whose newer mapping is now durable can be
        // invalidated. One whose page the next commit writes anyway needs
        // no successor lookup (a map slot and an entry far away): under
        // steady writes that is nearly every page.
        for block in self.cache.superseded_blocks() {
            self.stats.blocks_visited += 1;
            if !self.commit.block_marked(block) && self.cache.desired_entry(block, false).is_none() {
                self.commit.mark_block(block);
            }
        }
        self.start_commit_round();
    }

    /// A page write or flush failed. Whether a page landed is unknown, so the
    /// pending flags stay (they are the cautious reading both ways) and the
    /// pages are written again, with the same sequence and slot, next time.
    fn abort_commit(&mut self) {
        let commit = &mut self.commit;
        commit.in_flight.take().expect("no commit");
        let (mut round, mut remaining) = (std::mem::take(&mut commit.round), std::mem::take(&mut commit.remaining));
        for page in round.drain(..).chain(remaining.drain(..)) {
            commit.mark_page(page);
        }
        (commit.round, commit.remaining) = (round, remaining);
        self.commit.wanted = self.commit.wanted.max(self.commit.started + 1);
    }
}
