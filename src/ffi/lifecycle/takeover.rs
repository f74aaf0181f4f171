//! `bdev_hhc_create` with `takeover`: the volume's log, written by a host
//! that is gone, is replayed from the log bdevs given onto the backing bdev
//! before this node formats its cache and those log bdevs and serves
//! (docs/operations.md, "The whole host is lost"). The new log names the
//! instance it took over, so that the old host, back with its cache,
//! refuses to start warm (docs/format.md, "A replayed log").

use super::super::errno::Error;
use super::super::json::JsonObject;
use super::super::memory::DmaAllocator;
use super::super::node::{Core, Phase};
use super::super::owner::now_ns;
use super::super::recovery::{replayed_summary, Recovery};
use crate::engine::{Engine, StartMode};
use crate::recovery::{RecoveryStage, ReplayReport};

/// A takeover under way, then what it replayed (for the create call's answer).
pub struct Takeover {
    started_ns: u64,
    /// Milliseconds the scan took, once it is done.
    scan_ms: Option<u64>,
    replayed: Option<(ReplayReport, u64)>,
}

impl Core {
    /// The probe found the cache bdev unused: replay the log first (the
    /// node stays `Probing`, as a create call not yet answered).
    pub(in crate::ffi) fn start_takeover(&mut self) {
        let mirrors: Vec<u8> = (0..self.config.mirrors_count).collect();
        log::warn!(
            "{}: taking over: replaying the log on {} onto backing bdev {}",
            self.params.name,
            self.params.logs.join(","),
            self.params.backing
        );
        self.recovery = Some(Recovery::takeover(mirrors, self.config.backing_has_flush));
        self.takeover = Some(Takeover { started_ns: now_ns(), scan_ms: None, replayed: None });
    }

    /// Once the replay is done: format over the same devices, naming the
    /// instance taken over; a failed replay formats nothing.
    pub(in crate::ffi) fn advance_takeover(&mut self) {
        let Some(recovery) = self.recovery.as_mut() else { return };
        let takeover = self.takeover.as_mut().expect("a takeover under way");
        let progress = recovery.progress();
        let scanned = matches!(progress.stage, RecoveryStage::Replaying | RecoveryStage::Done);
        if takeover.scan_ms.is_none() && scanned {
            let scan_ms = now_ns().saturating_sub(takeover.started_ns) / 1_000_000;
            takeover.scan_ms = Some(scan_ms);
            log::warn!(
                "{}: takeover: scanned {} log parts in {scan_ms} ms; replaying {} blocks",
                self.params.name,
                progress.parts_scanned,
                progress.blocks_total
            );
        }
        let Some(outcome) = recovery.outcome() else { return };
        self.recovery_progress = Some(recovery.progress());
        self.recovery = None;
        if !matches!(self.phase, Phase::Probing { .. }) {
            // The create failed meanwhile (a bdev removed): its replay is
            // drained now, and nothing more is done.
            return;
        }
        let report = match outcome {
            Ok(report) => report,
            Err(error) => {
                return self.fail(Error::Failed(format!(
                    "takeover: {error}; nothing was formatted and the log is as it was: repair the cause and take over again"
                )))
            }
        };
        let takeover = self.takeover.as_mut().expect("a takeover under way");
        let elapsed_ms = now_ns().saturating_sub(takeover.started_ns) / 1_000_000;
        log::warn!(
            "{}: took over instance {:#x}: {} in {elapsed_ms} ms; formatting cache bdev {} (instance {:#x})",
            self.params.name,
            report.instance_id,
            replayed_summary(&report, &self.params.backing),
            self.params.cache,
            self.config.instance_id
        );
        self.config.previous_instance = report.instance_id;
        takeover.replayed = Some((report, elapsed_ms));
        self.params.takeover = false;
        match Engine::new(self.config.clone(), StartMode::Format, &mut DmaAllocator, now_ns()) {
            Ok(engine) => {
                self.engine = Some(engine);
                self.phase = Phase::Starting;
            }
            Err(error) => self.fail(error.into()),
        }
    }

    /// The create call's answer: the name, or for a takeover the name and
    /// what it replayed.
    pub(in crate::ffi) fn created_answer(&mut self) -> String {
        let Some(Takeover { scan_ms, replayed: Some((report, elapsed_ms)), .. }) = self.takeover.take() else {
            return super::super::json::string(&self.params.name);
        };
        let scan_ms = scan_ms.unwrap_or(elapsed_ms);
        JsonObject::new()
            .string("name", &self.params.name)
            .string("taken_over_instance", &format!("{:#x}", report.instance_id))
            .number("blocks_replayed", report.blocks_replayed)
            .number("parts_replayed", report.segments_replayed)
            .number("parts_before_head", report.segments_before_head)
            .number("parts_after_barrier", report.segments_after_barrier)
            .raw("last_barrier_sequence", &report.last_sequence.map_or_else(|| "null".to_string(), |s| s.to_string()))
            .number("scan_ms", scan_ms)
            .number("replay_ms", elapsed_ms.saturating_sub(scan_ms))
            .finish()
    }
}
