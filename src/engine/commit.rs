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

use super::commands::DeviceCommands;
use super::{Engine, FailKind, FailReason, Op, Stats, META_POOL_PAGES};
use crate::cache::CacheIndex;
use crate::config::{CacheLayout, Config, Mutation};
use crate::format::{MetaEntry, MetaPageHeader, LBA_NONE, META_ENTRIES_PER_PAGE, UNIT_BYTES};
use crate::io::{DeviceIo, DeviceRole, IoBuffer, IoKind, IoStatus, Nanos};
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

/// The commit room: which pages are dirty, the running commit and its
/// rounds, and the commit numbers flushes wait for. Its steps are handed
/// what they use of the rest of the engine (`CommitDeps`); the engine
/// decides when a commit starts and when steps run (`maybe_commit`,
/// `take_commit_step`) and fails itself when the cache device is lost.
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

    fn start(&mut self, now: Nanos, deps: &mut CommitDeps<'_>) {
        self.started += 1;
        self.last_commit_at = now;
        debug_assert!(self.remaining.is_empty(), "a commit started with pages of the last one left");
        std::mem::swap(&mut self.remaining, &mut self.dirty_pages);
        for &page in &self.remaining {
            self.page_dirty[page as usize] = false;
        }
        self.in_flight = Some(InFlight { writes_pending: 0, failed: false, step: RoundStep::Encoding(0) });
        self.start_round(deps);
    }

    fn start_round(&mut self, deps: &mut CommitDeps<'_>) {
        debug_assert!(self.in_flight.is_some(), "no commit");
        self.round.clear();
        while self.round.len() < META_POOL_PAGES as usize {
            let Some(page) = self.remaining.pop_front() else { break };
            self.round.push(page);
        }
        if self.round.is_empty() {
            self.in_flight = None;
            self.completed = self.started;
            deps.stats.commits += 1;
            return;
        }
        // Its first step comes with the next call into the engine (or with
        // this one's `maybe_commit`, for a commit's first round).
        self.set_round_step(RoundStep::Encoding(0));
    }

    fn set_round_step(&mut self, step: RoundStep) {
        self.in_flight.as_mut().expect("no commit").step = step;
    }

    /// The running round's next step: encodes or applies its next
    /// `commit_step_pages` pages, and moves on after the last.
    #[inline(never)]
    fn continue_round(&mut self, deps: &mut CommitDeps<'_>) {
        let pages = self.round.len();
        let step_pages = deps.config.commit_step_pages as usize;
        match self.in_flight.as_ref().expect("no commit").step {
            RoundStep::Encoding(first) => {
                let end = (first + step_pages).min(pages);
                for slot in first..end {
                    self.encode_page(self.round[slot], slot as u32, deps);
                }
                if end < pages {
                    return self.set_round_step(RoundStep::Encoding(end));
                }
                self.set_round_step(RoundStep::Writing);
                // Every mapping encoded is of data written before the step
                // that encoded it: the FLUSH after the last step covers all.
                if deps.mutation == Mutation::CommitBeforeData {
                    self.write_pages(deps);
                } else {
                    deps.submit(Op::CommitFlush { second: false }, IoKind::Flush, 0, 0, IoBuffer::None);
                }
            }
            RoundStep::Applying(first) => {
                let end = (first + step_pages).min(pages);
                for slot in first..end {
                    let page = self.round[slot];
                    self.page_seq[page as usize] += 1;
                    // Invalidated blocks leave the map: their slots, far
                    // from the page, are loaded together first.
                    for block in page_blocks(deps.cache, page) {
                        deps.cache.prefetch_invalidated_slot(block);
                    }
                    for block in page_blocks(deps.cache, page) {
                        deps.cache.note_committed(block);
                    }
                }
                if end < pages {
                    return self.set_round_step(RoundStep::Applying(end));
                }
                self.finish_round(deps);
            }
            RoundStep::Writing => {}
        }
    }

    fn encode_page(&mut self, page: u32, pool_slot: u32, deps: &mut CommitDeps<'_>) {
        let unwritten = deps.mutation == Mutation::CommitBeforeData;
        let blocks = page_blocks(deps.cache, page);
        deps.stats.blocks_visited += blocks.len() as u64;
        let entries = &mut self.entries;
        entries.clear();
        for block in blocks.clone() {
            let desired = deps.cache.encode_entry(block, unwritten);
            entries.push(match desired {
                Some(e) => MetaEntry { lba: e.lba as u64, epoch: e.version, dirty: e.dirty, through: e.through },
                None => MetaEntry { lba: LBA_NONE, epoch: 0, dirty: false, through: false },
            });
        }
        let header = MetaPageHeader {
            instance_id: deps.config.instance_id,
            page_index: page,
            page_seq: self.page_seq[page as usize] + 1,
            entries_count: entries.len() as u16,
        };
        let start = pool_slot as usize * UNIT_BYTES;
        header.encode(&mut entries.drain(..), &mut deps.meta_pool[start..start + UNIT_BYTES]);
    }

    fn write_pages(&mut self, deps: &mut CommitDeps<'_>) {
        let pages = self.round.len();
        for slot in 0..pages {
            let page = self.round[slot];
            let seq = self.page_seq[page as usize] + 1;
            let offset = deps.layout.meta_page_offset(page, seq % 2 == 1);
            let buffer = IoBuffer::Engine { region: deps.meta_pool_region, offset_bytes: (slot * UNIT_BYTES) as u32 };
            deps.submit(Op::MetaWrite { pool_slot: slot as u32 }, IoKind::Write, offset, UNIT_BYTES as u64, buffer);
        }
        self.in_flight.as_mut().expect("no commit").writes_pending = pages as u32;
        deps.stats.meta_pages_written += pages as u64;
    }

    /// One of the round's two FLUSHes completed.
    fn flush_done(&mut self, second: bool, status: IoStatus, deps: &mut CommitDeps<'_>) -> Result<(), CacheLost> {
        match status {
            IoStatus::DeviceLost => return Err(CacheLost),
            IoStatus::Error => self.abort(),
            IoStatus::Ok if !second => self.write_pages(deps),
            // The background work after this completion takes the first step.
            IoStatus::Ok => self.set_round_step(RoundStep::Applying(0)),
        }
        Ok(())
    }

    /// One of the round's page writes completed.
    fn page_write_done(&mut self, status: IoStatus, deps: &mut CommitDeps<'_>) -> Result<(), CacheLost> {
        if status == IoStatus::DeviceLost {
            return Err(CacheLost);
        }
        let in_flight = self.in_flight.as_mut().expect("page write without commit");
        assert!(in_flight.writes_pending > 0, "metadata page write done with none pending");
        in_flight.writes_pending -= 1;
        in_flight.failed |= status != IoStatus::Ok;
        if in_flight.writes_pending > 0 {
            return Ok(());
        }
        if in_flight.failed {
            self.abort();
        } else {
            deps.submit(Op::CommitFlush { second: true }, IoKind::Flush, 0, 0, IoBuffer::None);
        }
        Ok(())
    }

    /// Every page of the round is applied.
    fn finish_round(&mut self, deps: &mut CommitDeps<'_>) {
        // Superseded blocks whose newer mapping is now durable can be
        // invalidated. One whose page the next commit writes anyway needs
        // no successor lookup (a map slot and an entry far away): under
        // steady writes that is nearly every page.
        for block in deps.cache.superseded_blocks() {
            deps.stats.blocks_visited += 1;
            if !self.block_marked(block) && deps.cache.desired_entry(block, false).is_none() {
                self.mark_block(block);
            }
        }
        self.start_round(deps);
    }

    /// A page write or flush failed. Whether a page landed is unknown, so the
    /// pending flags stay (they are the cautious reading both ways) and the
    /// pages are written again, with the same sequence and slot, next time.
    fn abort(&mut self) {
        self.in_flight.take().expect("no commit");
        let (mut round, mut remaining) = (std::mem::take(&mut self.round), std::mem::take(&mut self.remaining));
        for page in round.drain(..).chain(remaining.drain(..)) {
            self.mark_page(page);
        }
        (self.round, self.remaining) = (round, remaining);
        self.wanted = self.wanted.max(self.started + 1);
    }
}

/// The cache device was lost under a commit command.
struct CacheLost;

/// What a commit's steps use of the rest of the engine.
struct CommitDeps<'a> {
    cache: &'a mut CacheIndex,
    /// Where their device commands go.
    commands: &'a mut DeviceCommands,
    /// The metadata pool they encode pages into, and its region.
    meta_pool: &'a mut [u8],
    meta_pool_region: u32,
    layout: &'a CacheLayout,
    config: &'a Config,
    mutation: Mutation,
    stats: &'a mut Stats,
}

impl CommitDeps<'_> {
    fn submit(&mut self, op: Op, kind: IoKind, offset_bytes: u64, len_bytes: u64, buffer: IoBuffer) {
        let io = DeviceIo { id: 0, device: DeviceRole::Cache, kind, offset_bytes, len_bytes, buffer };
        // Cache commands are not timed (only log mirrors', mirror_timeout.rs).
        self.commands.submit(op, io, None);
    }
}

fn page_blocks(cache: &CacheIndex, page: u32) -> std::ops::Range<u32> {
    let first = page * META_ENTRIES_PER_PAGE as u32;
    first..(first + META_ENTRIES_PER_PAGE as u32).min(cache.blocks_count())
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
            let now = self.now;
            let (commit, mut deps) = self.commit_room();
            commit.start(now, &mut deps);
            self.take_commit_step();
        }
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
            let (commit, mut deps) = self.commit_room();
            commit.continue_round(&mut deps);
            if self.flushes.is_empty() {
                break;
            }
        }
    }

    pub(super) fn commit_flush_done(&mut self, second: bool, status: IoStatus) {
        let (commit, mut deps) = self.commit_room();
        if commit.flush_done(second, status, &mut deps).is_err() {
            self.fail(FailReason::new(FailKind::DeviceLost, "cache device lost"));
        }
    }

    pub(super) fn meta_write_done(&mut self, _pool_slot: u32, status: IoStatus) {
        let (commit, mut deps) = self.commit_room();
        if commit.page_write_done(status, &mut deps).is_err() {
            self.fail(FailReason::new(FailKind::DeviceLost, "cache device lost"));
        }
    }

    /// The commit room and what its steps are handed.
    fn commit_room(&mut self) -> (&mut Commit, CommitDeps<'_>) {
        let mutation = self.mutation();
        let meta_pool_region = self.regions.meta_pool;
        let deps = CommitDeps {
            cache: &mut self.cache,
            commands: &mut self.commands,
            meta_pool: self.regions.all[meta_pool_region as usize].as_mut_slice(),
            meta_pool_region,
            layout: &self.cache_layout,
            config: &self.config,
            mutation,
            stats: &mut self.stats,
        };
        (&mut self.commit, deps)
    }
}
