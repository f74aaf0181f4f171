//! A node whose cache is gone: its bdev goes at once, and the node stays
//! as a record of the log's replay onto the backing bdev (recover.rs acts
//! on it).

use super::super::node::{Core, Phase};
use super::super::recovery::Recovery;
use crate::config::Policy;
use crate::io::DeviceRole;
use crate::recovery::{RecoveryProgress, RecoveryStage};

impl Core {
    /// The cache is gone: nothing may be served from it, so the bdev goes
    /// now; the node stays, as a record of the replay (if the policy has a
    /// log to replay) that the operator reads and acts on.
    pub(super) fn keep_record(&mut self) {
        let policy = self.policy();
        if policy.uses_log() && self.engine.is_some() {
            self.start_recovery();
        } else if policy.is_write_back() && policy != Policy::WriteBackFlush {
            let error = format!("cache lost under policy {policy}: dirty data is gone");
            log::error!("{}: {error}", self.params.name);
            self.recovery_progress = Some(RecoveryProgress::without_log(Some(error)));
            self.phase = Phase::RecoveryFailed;
        } else {
            // wt and passthrough keep nothing dirty; wb-flush writes every
            // flushed block back before the flush completes.
            log::warn!("{}: cache lost under policy {policy}: every flushed write is on the backing bdev", self.params.name);
            self.recovery_progress = Some(RecoveryProgress::without_log(None));
            self.phase = Phase::Recovered;
        }
        self.unregister();
    }

    // ---- cache loss: replay the log onto the backing device ----

    /// Starts the scan and replay of the surviving log mirrors (again, for
    /// a retry); without any, the record says the data is lost.
    pub(in crate::ffi) fn start_recovery(&mut self) {
        let layout = *self.engine.as_ref().expect("engine").log_layout();
        let mirrors: Vec<u8> =
            (0..self.config.mirrors_count).filter(|&i| !self.bases.get(DeviceRole::Log(i)).removed).collect();
        if mirrors.is_empty() {
            let error = "cache and every log mirror lost; dirty data cannot be recovered".to_string();
            log::error!("{}: {error}", self.params.name);
            self.recovery_progress = Some(RecoveryProgress::without_log(Some(error)));
            self.phase = Phase::RecoveryFailed;
            return;
        }
        log::warn!("{}: cache lost; replaying the log ({} mirrors) onto backing bdev {}", self.params.name, mirrors.len(), self.params.backing);
        self.recovery = Some(Recovery::new(layout, mirrors, self.config.backing_has_flush, self.config.instance_id));
        self.phase = Phase::Recovering;
    }

    pub(in crate::ffi) fn advance_recovery(&mut self) {
        if self.takeover.is_some() {
            return self.advance_takeover();
        }
        let Some(recovery) = self.recovery.as_mut() else { return };
        let Some(progress) = recovery.finished(&self.params.name, &self.params.backing) else { return };
        self.recovery = None;
        let replayed = progress.stage == RecoveryStage::Done;
        self.recovery_progress = Some(progress);
        // A bdev_hhc_delete before the loss still ends the node.
        self.phase = match (self.bdev.node_ends(), replayed) {
            (true, _) => Phase::Done,
            (false, true) => Phase::Recovered,
            (false, false) => Phase::RecoveryFailed,
        };
        if self.phase == Phase::Done {
            self.unregister();
        }
    }

    /// The recovery's progress: the running one's, else how the last ended.
    pub(in crate::ffi) fn recovery_now(&self) -> Option<RecoveryProgress> {
        self.recovery.as_ref().map(Recovery::progress).or_else(|| self.recovery_progress.clone())
    }
}
