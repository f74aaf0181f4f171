//! Policy switches at run time: leaving write-back for `wt` or
//! `passthrough` writes back every dirty block first; leaving `hhc` retires
//! its log (docs/engine.md, "Policy switches").

use super::Engine;
use crate::cache::BlockState;
use crate::config::Policy;

impl Engine {
    pub(super) fn begin_policy_switch(&mut self, policy: Policy) {
        let from = self.config.policy;
        self.writeback.switch_commit = None;
        if from == policy {
            self.policy_target = None;
            if policy.uses_log() {
                // A switch away from `hhc` called off: its log, kept
                // consistent by revokes while retiring, is used again.
                self.log_work.retiring = false;
            }
            return;
        }
        if from == Policy::WriteBackOrdered {
            self.ordered_stop();
        }
        if policy.uses_log() && self.log_work.retiring {
            // The log `hhc` left is still consistent (revoked while retiring)
            // and may hold the only durable copy of dirty blocks: used again.
            self.log_work.retiring = false;
        } else if policy.uses_log() {
            self.restart_log_for_switch(policy);
        } else if from.uses_log() {
            // Flushed dirty blocks may be durable only in the log: it stays
            // until a flush has written them back (`retire_log`).
            self.log_work.retiring = true;
            self.flushes_leave_log();
        }
        if from.is_write_back() && !policy.is_write_back() || policy == Policy::Passthrough {
            self.policy_target = Some(policy);
            self.enqueue_all_dirty_for_nobody();
        } else {
            self.config.policy = policy;
            self.policy_target = None;
            if policy == Policy::WriteBackOrdered {
                self.ordered_start();
            }
        }
        // A policy that logs writes into a live log, never a retiring one.
        assert!(!(policy.uses_log() && self.log_work.retiring), "switched to {policy:?} with its log still retiring");
        assert!(
            self.policy_target.map_or(self.config.policy == policy, |target| target == policy && self.config.policy == from),
            "a switch from {from:?} to {policy:?} left policy {:?}, target {:?}",
            self.config.policy,
            self.policy_target
        );
    }

    /// A switch to wt or passthrough completes once nothing is dirty.
    pub(super) fn progress_policy_switch(&mut self) {
        let Some(target) = self.policy_target else { return };
        assert_ne!(target, self.config.policy, "a switch in progress to the policy already in force");
        if self.cache.dirty_count() > 0 {
            self.writeback.switch_commit = None;
            if self.writeback.queue.is_empty() && self.writeback.in_flight() == 0 {
                self.enqueue_all_dirty_for_nobody();
            }
            return;
        }
        // A warm restart under the new policy writes back every block the
        // metadata records dirty, which must not overwrite what later
        // write-through writes put on the backing device.
        let commit = match self.writeback.switch_commit {
            Some(commit) => commit,
            None => *self.writeback.switch_commit.insert(self.commit.request()),
        };
        if self.commit.completed() < commit {
            return;
        }
        if target == Policy::Passthrough {
            // Passthrough never updates the cache: drop every clean copy.
            let lbas: Vec<u32> = (0..self.cache.blocks_count())
                .filter(|&b| self.cache.state(b) == BlockState::Mapped)
                .map(|b| self.cache.lba(b))
                .collect();
            // Every copy is tried, even after one that cannot go yet.
            let kept = lbas.into_iter().filter(|&lba| !self.cache.invalidate_clean(lba)).count();
            let all_dropped = kept == 0;
            self.commit.mark_all();
            self.commit.request();
            if !all_dropped {
                return;
            }
        }
        // The policy changes only with nothing dirty, durably so.
        assert!(self.cache.dirty_count() == 0 && self.commit.completed() >= commit, "switch to {target:?} completed with dirty data");
        self.config.policy = target;
        self.policy_target = None;
        self.writeback.switch_commit = None;
    }
}
