//! What an operator steers and watches while the engine serves: a write-back
//! of every dirty block that keeps the cache warm (`flush_all`), where a
//! policy switch stands, and each log mirror's health.

use super::writeback_queue::Pass;
use super::{Engine, EngineState};
use crate::config::Policy;
use crate::io::Nanos;
use crate::hdd_log::MirrorHealth;

/// A `flush_all` under way: it waits for the write-backs of every pass up
/// to its own (writeback_queue.rs).
#[derive(Clone, Copy, Debug)]
pub(super) struct FlushAll {
    pass: Pass,
}

/// Progress of `flush_all`, for the stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushAllProgress {
    pub in_progress: bool,
    /// Queued blocks the running one waits for, not written back yet.
    pub blocks_remaining: u64,
    /// Runs finished since the engine started, and blocks whose write-back
    /// failed in them (they stay dirty).
    pub completed: u64,
    pub errors: u64,
}

/// A log mirror as the engine sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorState {
    Healthy,
    /// Re-syncing after it was attached: it counts for durability once the
    /// durable log head has passed this many more segments.
    Syncing { segments_behind: u64 },
    Failed,
}

impl MirrorState {
    pub fn name(self) -> &'static str {
        match self {
            MirrorState::Healthy => "healthy",
            MirrorState::Syncing { .. } => "syncing",
            MirrorState::Failed => "failed",
        }
    }
}

/// Why a control request was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlError {
    /// The engine is not serving (starting, stopping, failed).
    NotReady,
    /// An owner record longer than `format::OWNER_BYTES_MAX`.
    OwnerRecordTooLong { len: usize },
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::NotReady => write!(f, "the engine is not serving"),
            ControlError::OwnerRecordTooLong { len } => {
                write!(f, "an owner record of {len} bytes; at most {}", crate::format::OWNER_BYTES_MAX)
            }
        }
    }
}

impl Engine {
    /// Writes back every block dirty now, keeping it cached (clean); the
    /// stats show the progress. Dirty blocks written meanwhile are left to
    /// background write-back. A call while one runs changes nothing.
    pub fn flush_all(&mut self, now: Nanos) -> Result<FlushAllProgress, ControlError> {
        if *self.state() != EngineState::Ready {
            return Err(ControlError::NotReady);
        }
        self.now = now;
        if self.flush_all.is_none() {
            let pass = self.enqueue_all_dirty_for_waiter();
            self.flush_all = Some(FlushAll { pass });
            self.finish_flush_all_if_done();
            self.run_background();
        }
        Ok(self.flush_all_progress())
    }

    pub fn flush_all_progress(&self) -> FlushAllProgress {
        FlushAllProgress {
            in_progress: self.flush_all.is_some(),
            blocks_remaining: self.flush_all.map_or(0, |f| self.writeback.passes.remaining_through(f.pass)),
            completed: self.flush_all_completed,
            errors: self.flush_all_errors,
        }
    }

    /// The pass of the running one, a waiter for write-backs.
    pub(super) fn flush_all_pass(&self) -> Option<Pass> {
        self.flush_all.map(|f| f.pass)
    }

    /// A write-back failed, and the running one (if its pass is `pass`)
    /// takes the error.
    pub(super) fn flush_all_failed_for(&mut self, pass: Pass) {
        self.flush_all_errors += u64::from(self.flush_all_pass() == Some(pass));
    }

    pub(super) fn finish_flush_all_if_done(&mut self) {
        if self.flush_all.is_some_and(|f| self.writeback.passes.done_through(Some(f.pass))) {
            self.flush_all = None;
            self.flush_all_completed += 1;
        }
    }

    /// The policy a switch in progress leads to (it writes back every dirty
    /// block first); None once the switch is complete.
    pub fn policy_target(&self) -> Option<Policy> {
        self.policy_target
    }

    /// Whether a request may go to the backing device without the engine,
    /// as in `bdev_passthru` (a driver may then send it past the engine,
    /// and must stop doing so, and wait for those in flight, before it
    /// switches the policy): the `passthrough` policy with its switch
    /// complete, no block in the cache and that durable (no metadata
    /// commit wanted or running), nothing written back or in flight, and no
    /// retiring log that a restart could act on. Then nothing the engine
    /// holds, now or after a restart, can be read over such a write.
    pub fn passes_through(&self) -> bool {
        self.state == EngineState::Ready
            && self.restart_flush.is_none()
            && self.config.policy == Policy::Passthrough
            && self.policy_target.is_none()
            && self.cache.free_count() == self.cache.blocks_count()
            && !self.commit.wanted()
            && self.commit.is_idle()
            && self.writeback.in_flight() == 0
            && self.writeback.queue.is_empty()
            && !self.log_work.retiring
    }

    /// Each log mirror, in order.
    pub fn mirror_states(&self) -> Vec<MirrorState> {
        let head = self.log_work.superblock_durable_head;
        self.log
            .mirrors
            .iter()
            .map(|health| match *health {
                MirrorHealth::Healthy => MirrorState::Healthy,
                MirrorHealth::Failed => MirrorState::Failed,
                MirrorHealth::Syncing { from_sequence } => {
                    MirrorState::Syncing { segments_behind: from_sequence.saturating_sub(head) }
                }
            })
            .collect()
    }
}
