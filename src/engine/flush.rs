//! Flush semantics per policy. A flush covers every write acknowledged before
//! it was submitted (docs/design.md §2).
//!
//! - passthrough: FLUSH the backing device.
//! - wt: FLUSH the backing device and commit the cache metadata.
//! - wb, wb-ordered: commit the cache metadata (cache FLUSH, pages, FLUSH).
//! - wb-flush: write back every dirty block, FLUSH the backing device, commit.
//! - hhc: every dirty block is in a durable log segment at or before a barrier
//!   segment on every healthy mirror, and the cache metadata is committed. It
//!   cleans nothing. With no healthy mirror it falls back to wb-flush.

use super::writeback_queue::{Pass, Passes};
use super::{Engine, FailKind, FailReason, Op};
use crate::config::{Mutation, Policy};
use crate::io::{DeviceRole, IoBuffer, IoKind, IoStatus, RequestError};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum LogStage {
    #[default]
    None,
    /// Waiting until no dirty block is missing from the log.
    WaitLogged,
    /// Waiting for the barrier segment to be sealed.
    WaitBarrierSeal,
    /// Waiting until the barrier part at this point is durable.
    WaitDurable(crate::hdd_log::LogPoint),
}

pub(super) struct FlushState {
    pub request: u32,
    pub commit_target: Option<u64>,
    pub log: LogStage,
    /// The write-backs it waits for are those of every pass up to this one
    /// (writeback_queue.rs); None if it waits for none.
    pub writeback_pass: Option<Pass>,
    pub backing_flush_wanted: bool,
    pub backing_flush_ticket: Option<u64>,
    pub error: Option<RequestError>,
    /// Once its write-backs are durable, this flush retires the log `hhc`
    /// left behind (`LogWork::retiring`)...
    pub retire_log: bool,
    /// ...and completes only when the restarted log's superblock (this head)
    /// is on the mirrors.
    pub log_restart_head: Option<u64>,
}

impl FlushState {
    /// Its backing-device FLUSH, if it wants one, has completed.
    fn backing_done(&self, backing: &BackingFlusher) -> bool {
        !self.backing_flush_wanted || self.backing_flush_ticket.is_some_and(|t| backing.completed >= t)
    }

    fn new(request: u32) -> Self {
        FlushState {
            request,
            commit_target: None,
            log: LogStage::None,
            writeback_pass: None,
            backing_flush_wanted: false,
            backing_flush_ticket: None,
            error: None,
            retire_log: false,
            log_restart_head: None,
        }
    }
}

/// The flushes under way: their own state, and what they conclude from
/// what the other rooms report (`Durable`). The engine starts them,
/// moves their waits along (`Engine::progress_flush`: it queues write-backs,
/// asks for barriers and backing FLUSHes) and completes their requests.
pub(super) struct Flushes {
    /// One per flush request: sized for `requests_max` at creation.
    running: Vec<FlushState>,
}

/// What deciding that a flush is done reads of the other rooms.
pub(super) struct Durable<'a> {
    pub commit_completed: u64,
    pub backing: &'a BackingFlusher,
    pub passes: &'a Passes,
    /// The head of the newest log superblock on the mirrors.
    pub superblock_durable_head: u64,
}

impl Flushes {
    pub fn with_capacity(requests_max: usize) -> Self {
        Flushes { running: Vec::with_capacity(requests_max) }
    }

    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    pub fn len(&self) -> usize {
        self.running.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &FlushState> {
        self.running.iter()
    }

    fn push(&mut self, flush: FlushState) {
        // Sized for requests_max: the request path never allocates.
        debug_assert!(self.running.len() < self.running.capacity(), "flush of request {} past requests_max", flush.request);
        self.running.push(flush);
    }

    /// The newest flush (the one just started).
    pub fn newest_mut(&mut self) -> Option<&mut FlushState> {
        self.running.last_mut()
    }

    /// Every flush, taken by an engine that failed: their requests fail.
    pub fn take_all(&mut self) -> Vec<FlushState> {
        std::mem::take(&mut self.running)
    }

    /// The passes flushes wait for.
    pub fn waiter_passes(&self) -> impl Iterator<Item = Pass> + '_ {
        self.running.iter().filter_map(|f| f.writeback_pass)
    }

    /// A write-back the flushes waiting for `pass` counted on failed.
    pub fn fail_waiters_of(&mut self, pass: Pass) {
        for flush in self.running.iter_mut().filter(|f| f.writeback_pass == Some(pass)) {
            flush.error = Some(RequestError::Io);
        }
    }

    /// Every wait for a barrier seal now waits for this part (None: the
    /// log holds nothing a barrier must cover).
    pub fn barrier_sealed(&mut self, point: Option<crate::hdd_log::LogPoint>) {
        for flush in &mut self.running {
            barrier_sealed(&mut flush.log, point);
        }
    }

    /// Whether flush `i` is done; a failed backing FLUSH it waited for
    /// becomes its error.
    fn finished(&mut self, i: usize, durable: &Durable<'_>) -> bool {
        let flush = &mut self.running[i];
        let commit_done = flush.commit_target.is_none_or(|t| durable.commit_completed >= t);
        let backing_done = flush.backing_done(durable.backing);
        let log_restarted = !flush.retire_log && flush.log_restart_head.is_none_or(|h| durable.superblock_durable_head >= h);
        let finished = commit_done
            && backing_done
            && log_restarted
            && flush.log == LogStage::None
            && durable.passes.done_through(flush.writeback_pass);
        if finished && flush.backing_flush_ticket.is_some_and(|t| durable.backing.failed_for(t)) {
            flush.error = Some(RequestError::Io);
        }
        finished
    }
}

/// A wait for a barrier seal now waits for this part.
fn barrier_sealed(stage: &mut LogStage, point: Option<crate::hdd_log::LogPoint>) {
    if *stage == LogStage::WaitBarrierSeal {
        *stage = point.map_or(LogStage::None, LogStage::WaitDurable);
    }
}

/// Generations of backing-device FLUSH: a waiter needs one issued after it
/// registered.
#[derive(Default)]
pub(super) struct BackingFlusher {
    pub issued: u64,
    pub completed: u64,
    pub wanted: u64,
    pub in_flight: bool,
    /// The last generation that failed (its waiters see an error).
    pub failed: u64,
    /// The generation a completed write-through (or passthrough) write needs
    /// to be durable: any flush must wait for it, whatever the policy is now.
    pub through_writes_need: u64,
}

impl Engine {
    pub(super) fn start_flush(&mut self, key: u32) {
        self.stats.flushes += 1;
        self.ordered_flush();
        self.request_mut(key).pending += 1;
        let mut flush = FlushState::new(key);
        match self.config.policy {
            Policy::Passthrough => flush.backing_flush_wanted = true,
            // Dirty blocks in write-through are copies whose backing write is
            // in flight, or blocks found dirty after a crash: all written back.
            Policy::WriteThrough => self.flush_by_writeback(&mut flush),
            Policy::WriteBack | Policy::WriteBackOrdered => flush.commit_target = Some(self.commit.request()),
            Policy::WriteBackFlush => self.flush_by_writeback(&mut flush),
            Policy::Hhc if self.mutation() == Mutation::FlushSkipsLog => flush.commit_target = Some(self.commit.request()),
            Policy::Hhc if self.log_flushable() => {
                flush.log = LogStage::WaitLogged;
                flush.commit_target = Some(self.commit.request());
            }
            Policy::Hhc => {
                self.stats.flush_fallbacks += 1;
                self.flush_by_writeback(&mut flush);
            }
        }
        if self.policy_target.is_some() && !flush.backing_flush_wanted && flush.writeback_pass.is_none() {
            // While draining to wt/passthrough, writes went through: make them durable too.
            flush.backing_flush_wanted = true;
        }
        if self.writeback.backing.through_writes_unflushed() {
            // Writes went through before a switch to a policy whose flush
            // leaves the backing device alone: they are acknowledged, but
            // may still sit in its volatile cache.
            flush.backing_flush_wanted = true;
        }
        if self.log_work.restarted_head > self.log_work.superblock_durable_head {
            // The log was restarted (retired) but its new superblock is not
            // on the mirrors yet: a replay would still follow the old log
            // over what this flush makes durable on the backing device.
            flush.log_restart_head = Some(self.log_work.restarted_head);
        }
        if self.log_work.retiring && !flush.retire_log {
            // The log `hhc` left could still be replayed over what reached
            // the backing device since (passthrough and write-through writes
            // carry no revoke): no flush completes before it is retired,
            // which takes everything dirty written back first.
            if flush.writeback_pass.is_none() && self.cache.dirty_count() > 0 {
                self.flush_by_writeback(&mut flush);
            }
            flush.backing_flush_wanted = true;
            flush.retire_log = true;
        }
        self.flushes.push(flush);
    }

    /// `hhc` is being left: flushes still running under its semantics can no
    /// longer count on the log (written-back blocks turn clean with revokes
    /// no barrier will cover), so they finish the way a flush started now
    /// would: everything dirty written back, the backing device flushed, the
    /// old log retired.
    pub(super) fn flushes_leave_log(&mut self) {
        for i in 0..self.flushes.len() {
            if self.flushes.running[i].retire_log {
                continue;
            }
            let pass = self.enqueue_all_dirty_again(self.flushes.running[i].writeback_pass);
            let flush = &mut self.flushes.running[i];
            flush.log = LogStage::None;
            flush.writeback_pass = Some(pass);
            flush.backing_flush_wanted = true;
            flush.retire_log = true;
        }
    }

    /// Whether an `hhc` flush can count on the log: a mirror is in sync,
    /// or the log started over on an attached one and is taking every
    /// dirty block in. Falling back to write-back there would let a block
    /// written back under a flush count, while the new log still held an
    /// older entry of it that the mirror's sync then made replayable
    /// (torture seed 500900).
    pub(super) fn log_flushable(&self) -> bool {
        self.log_active() && (self.log.has_healthy_mirror() || self.log_work.new_log_sync != LogStage::None)
    }

    /// wb-flush semantics: write back every dirty block, then FLUSH the backing device.
    fn flush_by_writeback(&mut self, flush: &mut FlushState) {
        flush.writeback_pass = Some(self.enqueue_all_dirty_for_waiter());
        flush.backing_flush_wanted = true;
        flush.commit_target = Some(self.commit.request());
        flush.retire_log = self.log_work.retiring;
    }

    pub(super) fn progress_flushes(&mut self) {
        let mut i = 0;
        while i < self.flushes.len() {
            self.progress_flush(i);
            let durable = Durable {
                commit_completed: self.commit.completed(),
                backing: &self.writeback.backing,
                passes: &self.writeback.passes,
                superblock_durable_head: self.log_work.superblock_durable_head,
            };
            if self.flushes.finished(i, &durable) {
                let flush = self.flushes.running.swap_remove(i);
                self.sub_done(flush.request, 1, flush.error);
            } else {
                i += 1;
            }
        }
    }

    /// Moves flush `i`'s waits along: falls back to writing back when the
    /// log is lost, advances its log stage, asks for its backing FLUSH
    /// once its write-backs are done, and retires the log `hhc` left.
    fn progress_flush(&mut self, i: usize) {
        let log_usable = self.log_flushable();
        let flush = &mut self.flushes.running[i];
        if flush.log != LogStage::None && !log_usable {
            // Every mirror is gone: fall back to writing back.
            flush.log = LogStage::None;
            self.stats.flush_fallbacks += 1;
            let pass = flush.writeback_pass;
            let pass = self.enqueue_all_dirty_again(pass);
            let flush = &mut self.flushes.running[i];
            flush.writeback_pass = Some(pass);
            flush.backing_flush_wanted = true;
            return;
        }
        let stage = flush.log;
        self.flushes.running[i].log = self.advance_log_stage(stage);
        let writebacks_done = self.writeback.passes.done_through(self.flushes.running[i].writeback_pass);
        let flush = &mut self.flushes.running[i];
        if flush.backing_flush_wanted && writebacks_done && flush.backing_flush_ticket.is_none() {
            flush.backing_flush_ticket = Some(self.writeback.backing.request(self.config.backing_has_flush));
        }
        let flush = &self.flushes.running[i];
        let backing = &self.writeback.backing;
        let backing_done = flush.backing_done(backing);
        if flush.retire_log && writebacks_done && backing_done {
            // Every block dirty when the flush started is durable on the
            // backing device now (unless a write-back failed): the old log
            // holds nothing it still needs, and must not outlive the flush,
            // or a replay could take back what was written back since.
            let failed = flush.error.is_some() || flush.backing_flush_ticket.is_some_and(|t| backing.failed_for(t));
            self.flushes.running[i].retire_log = false;
            if !failed {
                if self.log_work.retiring {
                    self.restart_log_for_switch(self.config.policy);
                } else if self.log_flushable() {
                    // `hhc` took the retiring log up again before this flush
                    // could retire it: the log stays, and its last durable
                    // barrier may still hold entries older than what this
                    // flush wrote back. The revokes of those write-backs sit
                    // in later segments (or the open buffer), so the flush
                    // completes only once a barrier after them is durable,
                    // as an `hhc` flush would.
                    self.flushes.running[i].log = LogStage::WaitLogged;
                }
                self.flushes.running[i].log_restart_head = Some(self.log_work.restarted_head);
            }
        }
    }

    /// One step of a wait for the log to hold every dirty block durably (a
    /// flush's, or a new log's before its mirror counts): every dirty block
    /// logged, then a barrier sealed after them, then that barrier durable.
    pub(super) fn advance_log_stage(&mut self, stage: LogStage) -> LogStage {
        match stage {
            LogStage::WaitLogged if self.cache.unlogged_dirty_count() == 0 => {
                if self.log.barrier_covers_all() {
                    self.log.last_sealed_point().map_or(LogStage::None, LogStage::WaitDurable)
                } else {
                    self.log_work.barrier_wanted = true;
                    LogStage::WaitBarrierSeal
                }
            }
            LogStage::WaitDurable(point) if self.log.durable_barrier.is_some_and(|d| d >= point) => LogStage::None,
            other => other,
        }
    }

    /// Every wait for a barrier seal now waits for this part (None: the
    /// log holds nothing a barrier must cover).
    pub(super) fn barrier_sealed(&mut self, point: Option<crate::hdd_log::LogPoint>) {
        self.flushes.barrier_sealed(point);
        barrier_sealed(&mut self.log_work.new_log_sync, point);
    }

    // ---- backing-device FLUSH ----

    pub(super) fn issue_backing_flush(&mut self) {
        let flusher = &mut self.writeback.backing;
        if flusher.in_flight || flusher.wanted <= flusher.issued {
            return;
        }
        flusher.issued += 1;
        flusher.in_flight = true;
        self.submit(Op::FlushBacking, DeviceRole::Backing, IoKind::Flush, 0, 0, IoBuffer::None);
    }

    pub(super) fn backing_flush_done(&mut self, status: IoStatus) {
        let flusher = &mut self.writeback.backing;
        assert!(flusher.in_flight && flusher.issued > flusher.completed, "backing FLUSH done with none in flight");
        flusher.in_flight = false;
        let through_unflushed = flusher.through_writes_unflushed();
        flusher.completed = flusher.issued;
        if status != IoStatus::Ok {
            flusher.failed = flusher.issued;
            if through_unflushed {
                // A failed FLUSH made nothing durable: completed write-through
                // and passthrough writes still need a later generation, or a
                // fill would trust the backing device's copy (the volatile
                // one, lost with the power) and a flush would skip the
                // FLUSH they need (torture seed 25557, passthrough).
                flusher.through_writes_need = flusher.issued + 1;
            }
        }
        if status == IoStatus::DeviceLost {
            self.fail(FailReason::new(FailKind::DeviceLost, "backing device lost"));
            return;
        }
        self.finish_durable_writebacks();
    }
}

impl BackingFlusher {
    /// Whether the generation `ticket` waited for failed. Ticket 0 (no
    /// FLUSH needed) never fails.
    pub fn failed_for(&self, ticket: u64) -> bool {
        ticket > 0 && self.failed >= ticket
    }

    /// A write to the backing device completed outside write-back: a flush
    /// needs a generation issued after now.
    pub fn note_through_write(&mut self, has_flush: bool) {
        if has_flush {
            self.through_writes_need = self.issued + 1;
        }
    }

    /// Whether a completed write-through or passthrough write may not be
    /// durable on the backing device yet.
    pub fn through_writes_unflushed(&self) -> bool {
        self.through_writes_need > self.completed
    }

    /// Registers a waiter; returns the generation it needs. Without FLUSH
    /// support a completed write is durable, so no generation is needed.
    pub fn request(&mut self, has_flush: bool) -> u64 {
        if !has_flush {
            return self.completed;
        }
        let ticket = self.issued + 1;
        self.wanted = self.wanted.max(ticket);
        ticket
    }
}
