//! Read and write paths: hits, misses and fills, copy-on-write block writes,
//! and requests waiting for a block (the writes that go to the backing
//! device with the request: through.rs).

use super::{Engine, EngineState, FailKind, FailReason, Op};
use crate::cache::{flag, BlockState, Through};
use crate::config::{Mutation, Policy};
use crate::io::{DeviceRole, IoBuffer, IoKind, IoStatus, Request, RequestData, RequestError, RequestId, RequestKind};

/// Whose request it is: the driver's, completed to it by the driver's id,
/// or the engine's own flush after a warm restart (startup.rs), which
/// completes to the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RequestOwner {
    Driver(RequestId),
    RestartFlush,
}

pub(super) struct RequestState {
    pub owner: RequestOwner,
    pub lba: u64,
    pub blocks_count: u32,
    /// Sub-operations (per block, per backing run, per flush stage) outstanding.
    pub pending: u32,
    pub error: Option<RequestError>,
    /// A read or write of a stream the sequential cutoff sends past the
    /// cache (cutoff.rs).
    pub cut_off: bool,
}

/// The read misses of one LBA in flight, and whether a write of it may
/// have raced them: a miss read may then return older data, which its fill
/// must not put in the cache.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct MissesInFlight {
    pub reads: u32,
    pub raced: bool,
}

/// A block of a request, or a write-through request as a whole, that
/// could not start yet (waiting.rs).
#[derive(Clone, Copy, Debug)]
pub(super) struct Waiting {
    pub request: u32,
    pub what: Waits,
}

/// What a waiting entry starts. A write is write-back or write-through as
/// decided when its request started, whatever the policy is when it does.
#[derive(Clone, Copy, Debug)]
pub(super) enum Waits {
    /// A block of a read.
    Read { block_in_request: u32 },
    /// A block of a write-back write: dirty in the cache. `epoch`: the flush
    /// epoch it was submitted in (wb-ordered); `held`: where its data is
    /// held for the log copy (held.rs), if it is.
    BackWrite { block_in_request: u32, epoch: u32, held: Option<u32> },
    /// A block's cache copy of a write-through write.
    ThroughCopy { block_in_request: u32 },
    /// A write-through write as a whole.
    Through,
}

impl Waits {
    /// The block of the request it waits for; None for a whole request.
    pub fn block_in_request(self) -> Option<u32> {
        match self {
            Waits::Read { block_in_request } | Waits::BackWrite { block_in_request, .. } | Waits::ThroughCopy { block_in_request } => {
                Some(block_in_request)
            }
            Waits::Through => None,
        }
    }
}

/// How writes behave right now (a switch away from write-back writes
/// through while the dirty data drains).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WriteMode {
    Passthrough,
    Through,
    Back,
}

impl Engine {
    pub(super) fn start_request(&mut self, request: Request, data: Option<&dyn RequestData>) {
        if self.state != EngineState::Ready {
            self.complete_request(RequestOwner::Driver(request.id), Err(RequestError::NotReady));
            return;
        }
        let end = request.lba.checked_add(request.blocks_count as u64);
        let io = request.kind != RequestKind::Flush;
        let too_long = request.blocks_count > self.config.request_blocks_max;
        if io && (request.blocks_count == 0 || too_long || end.is_none_or(|end| end > self.blocks_count())) {
            self.stats.request_errors += 1;
            self.complete_request(RequestOwner::Driver(request.id), Err(RequestError::OutOfRange));
            return;
        }
        // A flush names a range (the whole bdev, from SPDK) but holds no
        // per-block state: it counts no blocks.
        let blocks_count = if io { request.blocks_count } else { 0 };
        let full = self.requests.len() >= self.config.requests_max as usize
            || self.request_blocks_live + blocks_count > self.config.request_blocks_max;
        if full {
            self.stats.requests_busy += 1;
            self.complete_request(RequestOwner::Driver(request.id), Err(RequestError::Busy));
            return;
        }
        self.request_blocks_live += blocks_count;
        let write = request.kind == RequestKind::Write;
        let cut_off = io && self.config.policy.uses_cache() && self.cut_off(request.lba, blocks_count, write);
        let key = self.requests.insert(RequestState {
            owner: RequestOwner::Driver(request.id),
            lba: request.lba,
            blocks_count,
            pending: 1, // held until the request is fully dispatched
            error: None,
            cut_off,
        });
        match request.kind {
            RequestKind::Read => self.start_read(key),
            RequestKind::Write => self.start_write(key, data),
            RequestKind::Flush => self.start_flush(key),
        }
        self.sub_done(key, 1, None);
    }

    pub(super) fn write_mode(&self) -> WriteMode {
        match (self.config.policy, self.policy_target) {
            (Policy::Passthrough, _) => WriteMode::Passthrough,
            (_, Some(Policy::Passthrough | Policy::WriteThrough)) | (Policy::WriteThrough, _) => WriteMode::Through,
            _ => WriteMode::Back,
        }
    }

    /// One sub-operation of `key` finished; completes the request when none remain.
    pub(super) fn sub_done(&mut self, key: u32, count: u32, error: Option<RequestError>) {
        let request = self.requests.get_mut(key).expect("sub-operation of unknown request");
        assert!(request.pending >= count, "request {:?} completed too often", request.owner);
        request.pending -= count;
        if error.is_some() && request.error.is_none() {
            request.error = error;
        }
        if request.pending > 0 {
            return;
        }
        let request = self.requests.remove(key).expect("request vanished");
        assert!(self.request_blocks_live >= request.blocks_count, "request blocks accounted twice");
        self.request_blocks_live -= request.blocks_count;
        if request.error.is_some() {
            self.stats.request_errors += 1;
        }
        self.complete_request(request.owner, request.error.map_or(Ok(()), Err));
    }

    /// Request `key`, which must be live: a completion or a waiting entry
    /// for a request already completed is an engine bug.
    pub(super) fn request(&self, key: u32) -> &RequestState {
        self.requests.get(key).unwrap_or_else(|| panic!("request {key} is not live"))
    }

    pub(super) fn request_mut(&mut self, key: u32) -> &mut RequestState {
        self.requests.get_mut(key).unwrap_or_else(|| panic!("request {key} is not live"))
    }

    /// A request's first LBA and block count.
    pub(super) fn request_range(&self, key: u32) -> (u64, u32) {
        let r = self.request(key);
        (r.lba, r.blocks_count)
    }

    pub(super) fn request_buffer(&self, key: u32, block_in_request: u32) -> IoBuffer {
        let RequestOwner::Driver(id) = self.request(key).owner else {
            panic!("the engine's own flush has no buffer");
        };
        IoBuffer::Request { request: id, offset_bytes: block_in_request as u64 * self.config.block_size as u64 }
    }

    // ---- reads ----

    fn start_read(&mut self, key: u32) {
        self.stats.reads += 1;
        let (lba, count) = self.request_range(key);
        if !self.config.policy.uses_cache() {
            // One backing read; like every backing read it stands for its blocks.
            self.request_mut(key).pending += count;
            self.submit_backing_read(key, lba, count, 0);
            return;
        }
        self.request_mut(key).pending += count;
        // Its hits are served from the cache; its misses fill nothing.
        self.stats.cutoff_reads += u64::from(self.request(key).cut_off);
        let mut run: Option<(u64, u32, u32)> = None; // (first lba, blocks, first index) of misses
        for i in 0..count {
            let block_lba = lba + i as u64;
            match self.cache.lookup(block_lba as u32) {
                None => {
                    self.note_miss_started(block_lba as u32);
                    run = match run {
                        Some((first, n, first_i)) if first + n as u64 == block_lba => Some((first, n + 1, first_i)),
                        other => {
                            if let Some((first, n, first_i)) = other {
                                self.submit_backing_read(key, first, n, first_i);
                            }
                            Some((block_lba, 1, i))
                        }
                    }
                }
                Some(_) => {
                    if !self.try_start_block_read(key, i) {
                        self.waiting.push_back(Waiting { request: key, what: Waits::Read { block_in_request: i } });
                    }
                }
            }
        }
        if let Some((first, n, first_i)) = run {
            self.submit_backing_read(key, first, n, first_i);
        }
    }

    /// Starts one block of a read; false if it must wait (block being written).
    pub(super) fn try_start_block_read(&mut self, key: u32, i: u32) -> bool {
        let lba = self.request(key).lba + i as u64;
        match self.cache.lookup(lba as u32) {
            Some(block) if self.cache.has(block, flag::BUSY) => false,
            Some(block) => {
                self.stats.read_hits += 1;
                self.cache.pin(block);
                self.cache.set(block, flag::REFERENCED);
                let source = if self.mutation() == Mutation::ReadWrongBlock {
                    (block + 1) % self.cache.blocks_count()
                } else {
                    block
                };
                let offset = self.cache_layout.block_offset(source as u64);
                let buffer = self.request_buffer(key, i);
                let bs = self.config.block_size as u64;
                self.submit(Op::ReadCache { request: key, block, block_in_request: i }, DeviceRole::Cache, IoKind::Read, offset, bs, buffer);
                true
            }
            None => {
                self.note_miss_started(lba as u32);
                self.submit_backing_read(key, lba, 1, i);
                true
            }
        }
    }

    fn note_miss_started(&mut self, lba: u32) {
        self.stats.read_misses += 1;
        // A backing write of the block in flight may land after this read.
        let racing = self.writeback.lbas_in_flight.contains(lba);
        let entry = self.misses.entry(lba).or_default();
        entry.reads += 1;
        entry.raced |= racing;
        assert!(self.misses.len() <= self.request_blocks_live as usize, "lba {lba}: more LBAs missing than request blocks live");
    }

    /// Returns whether the fill of a finished miss may insert the block.
    fn note_miss_finished(&mut self, lba: u32) -> bool {
        let Some(entry) = self.misses.get_mut(&lba) else { return false };
        entry.reads -= 1;
        let fresh = !entry.raced;
        if entry.reads == 0 {
            self.misses.remove(&lba);
        }
        fresh
    }

    /// A write of `lba` started: a miss read of it in flight may return
    /// the older data.
    pub(super) fn misses_raced(&mut self, lba: u32) {
        if let Some(entry) = self.misses.get_mut(&lba) {
            entry.raced = true;
        }
    }

    fn submit_backing_read(&mut self, key: u32, lba: u64, blocks_count: u32, first_block_in_request: u32) {
        let bs = self.config.block_size as u64;
        let buffer = self.request_buffer(key, first_block_in_request);
        let op = Op::ReadBacking { request: key, lba, blocks_count, first_block_in_request, issued_at: self.now };
        self.submit(op, DeviceRole::Backing, IoKind::Read, lba * bs, blocks_count as u64 * bs, buffer);
    }

    pub(super) fn read_cache_done(&mut self, key: u32, block: u32, i: u32, status: IoStatus) {
        let clean = self.cache.state(block) == BlockState::Mapped && !self.cache.has(block, flag::DIRTY);
        self.cache.unpin(block);
        match status {
            IoStatus::Ok => self.sub_done(key, 1, None),
            IoStatus::DeviceLost => self.lost_during(key, "cache device lost"),
            IoStatus::Error if clean => {
                // The backing device holds the same data: serve it from there.
                let lba = self.request(key).lba + i as u64;
                self.submit_backing_read(key, lba, 1, i);
            }
            IoStatus::Error => self.sub_done(key, 1, Some(RequestError::Io)),
        }
    }

    pub(super) fn read_backing_done(&mut self, key: u32, lba: u64, blocks_count: u32, first: u32, status: IoStatus) {
        if !self.config.policy.uses_cache() {
            for n in 0..blocks_count {
                self.note_miss_finished((lba + n as u64) as u32);
            }
            self.sub_done(key, blocks_count, (status != IoStatus::Ok).then_some(RequestError::Io));
            return;
        }
        let fills_allowed =
            status == IoStatus::Ok && self.write_mode() != WriteMode::Passthrough && !self.request(key).cut_off;
        if fills_allowed && self.cache.free_count() < blocks_count {
            // A miss that finds no free block makes room by evicting clean
            // blocks, as a write does, rather than leaving the data uncached.
            self.evict_blocks(blocks_count - self.cache.free_count());
        }
        let mut done = 0;
        for n in 0..blocks_count {
            let block_lba = (lba + n as u64) as u32;
            let fresh = self.note_miss_finished(block_lba);
            let fill = fills_allowed && fresh && self.cache.lookup(block_lba).is_none() && self.cache.free_count() > 0;
            if !fill {
                done += 1;
                continue;
            }
            let block = self.cache.map_new_block(block_lba, false).expect("free block vanished");
            if self.write_mode() != WriteMode::Back || self.writeback.backing.through_writes_unflushed() {
                // A write-through may land on the backing device before this
                // copy's entry, or the backing device may lose this data with
                // the power: the backing device stays authoritative.
                self.cache.set_through(block, Through::Copy);
            }
            self.stats.fills += 1;
            let offset = self.cache_layout.block_offset(block as u64);
            let buffer = self.request_buffer(key, first + n);
            let bs = self.config.block_size as u64;
            self.submit(Op::FillCache { request: key, block }, DeviceRole::Cache, IoKind::Write, offset, bs, buffer);
        }
        let error = (status != IoStatus::Ok).then_some(RequestError::Io);
        if done > 0 {
            self.sub_done(key, done, error);
        }
    }

    pub(super) fn fill_done(&mut self, key: u32, block: u32, status: IoStatus) {
        match status {
            IoStatus::Ok => {
                self.cache.clear(block, flag::BUSY);
                if !self.cache.free_if_dropped(block) {
                    self.commit.mark_block(block);
                    if !self.config.policy.uses_cache() && self.cache.state(block) == BlockState::Mapped {
                        // Switched to passthrough meanwhile: no copy may stay.
                        self.cache.discard(block);
                    }
                }
            }
            IoStatus::Error if self.cache.state(block) == BlockState::Mapped => self.cache.unmap_failed_block(block, None),
            IoStatus::Error => {
                // A write superseded it meanwhile (and may have dropped it):
                // never durable (busy), it goes as a predecessor does.
                self.cache.release_predecessor(block);
                self.cache.clear(block, flag::BUSY);
                self.cache.free_if_dropped(block);
            }
            IoStatus::DeviceLost => return self.lost_during(key, "cache device lost"),
        }
        // The request's data came from the backing device; the fill is a side effect.
        self.sub_done(key, 1, None);
    }

    // ---- writes ----

    fn start_write(&mut self, key: u32, data: Option<&dyn RequestData>) {
        self.stats.writes += 1;
        let count = self.request(key).blocks_count;
        if self.request(key).cut_off && self.write_mode() != WriteMode::Passthrough {
            if self.try_bypass_write(key) {
                self.stats.cutoff_writes += 1;
                return;
            }
            self.stats.cutoff_writes_cached += 1;
        }
        if self.write_mode() != WriteMode::Back {
            self.request_mut(key).pending += 1;
            let (lba, _) = self.request_range(key);
            // Ordering: a write-back block write still waiting for a free
            // block (queued before a switch away from write-back) is older
            // than this write but not in the cache yet, so
            // `try_start_write_through` cannot see it. Going through first,
            // this write would be overwritten on the backing device by that
            // block's later write-back, while its own copy, mapped after it,
            // waits forever for a settle that the write-back in flight
            // defers (torture seed 16115, wb-flush: a flush stuck behind an
            // unlogged write-through copy). It waits in the queue behind it.
            if self.waiting_through_overlaps(lba, count)
                || self.waiting_back_overlaps(lba, count)
                || !self.try_start_write_through(key)
            {
                self.waiting.push_back(Waiting { request: key, what: Waits::Through });
            }
            return;
        }
        self.request_mut(key).pending += count;
        for i in 0..count {
            let epoch = self.ordered_reserve();
            if !self.waiting.is_empty() || !self.try_start_block_write(key, i, data, epoch, true) {
                let offset = i as u64 * self.config.block_size as u64;
                let held = match data {
                    Some(data) if self.log_active() => self.held.hold(data, offset),
                    _ => None,
                };
                if held.is_none() && self.log_active() {
                    self.stats.writes_waited_unheld += 1;
                }
                self.waiting.push_back(Waiting { request: key, what: Waits::BackWrite { block_in_request: i, epoch, held } });
            }
        }
    }

    /// Writes one block into a fresh cache block (copy-on-write) and, for
    /// `hhc`, copies it into the log. False if no free block is available.
    pub(super) fn try_start_block_write(&mut self, key: u32, i: u32, data: Option<&dyn RequestData>, epoch: u32, back: bool) -> bool {
        let lba = (self.request(key).lba + i as u64) as u32;
        if back && self.write_waits_for_writeback(lba) {
            return false;
        }
        let logged = back && self.log_active();
        let mut shortage = 0.0;
        if logged {
            let Some(now_short) = self.log_write_shortage() else { return false };
            if data.is_some() && self.log_copy_must_wait() {
                return false;
            }
            shortage = now_short;
        }
        if self.cache.free_count() == 0 {
            self.evict_blocks(8);
        }
        // A write-through copy is dirty too until its backing write completes.
        let dirty = true;
        let previous = self.cache.lookup(lba);
        let previous_dirty = previous.is_some_and(|p| self.cache.has(p, flag::DIRTY));
        let Some(block) = self.cache.map_new_block(lba, dirty) else { return false };
        if back {
            self.ordered_written(block, previous, previous_dirty, epoch);
        } else {
            self.cache.set_through(block, Through::Pending);
        }
        self.misses_raced(lba);
        if logged {
            self.log_write_admitted(shortage);
            let offset = i as u64 * self.config.block_size as u64;
            self.log_copy(block, lba, data.map(|d| (d, offset)));
        } else {
            self.cache.set_logged(block, false);
        }
        let offset = self.cache_layout.block_offset(block as u64);
        let buffer = self.request_buffer(key, i);
        let bs = self.config.block_size as u64;
        self.submit(Op::WriteCache { request: key, block, previous }, DeviceRole::Cache, IoKind::Write, offset, bs, buffer);
        true
    }

    pub(super) fn write_cache_done(&mut self, key: u32, block: u32, previous: Option<u32>, status: IoStatus) {
        match status {
            IoStatus::Ok => {
                // `previous` is a block number taken when this write started:
                // if this block was superseded and dropped meanwhile, its
                // predecessor may have been freed and reused for another
                // write, which must not be released in its place (torture
                // seed 7392, wb: a flushed value lost at the next restart).
                let (lba, version) = (self.cache.lba(block), self.cache.version(block));
                let previous = previous.filter(|&old| {
                    self.cache.lba(old) == lba && crate::cache::serial_newer(version, self.cache.version(old))
                });
                self.cache.clear(block, flag::BUSY);
                if !self.cache.free_if_dropped(block) {
                    self.commit.mark_block(block);
                    self.through_copy_settled(block);
                }
                if let Some(old) = previous {
                    self.cache.release_predecessor(old);
                }
                self.sub_done(key, 1, None);
            }
            IoStatus::Error => {
                if self.cache.state(block) == BlockState::Mapped {
                    self.cache.unmap_failed_block(block, previous);
                    self.ordered_write_failed(block, previous);
                    if let Some(old) = previous.filter(|&p| self.cache.state(p) == BlockState::Mapped) {
                        // Its log entry was replaced by this write's: log it again.
                        self.cache.set_logged(old, false);
                    }
                } else {
                    self.cache.clear(block, flag::BUSY);
                    self.cache.free_if_dropped(block);
                }
                self.sub_done(key, 1, Some(RequestError::Io));
            }
            IoStatus::DeviceLost => self.lost_during(key, "cache device lost"),
        }
    }

    /// A device of one of `key`'s commands is gone: the engine fails, and
    /// that command's share of the request is accounted for.
    fn lost_during(&mut self, key: u32, reason: &str) {
        self.fail(FailReason::new(FailKind::DeviceLost, reason));
        self.sub_done(key, 1, Some(RequestError::NotReady));
    }
}
