//! After the cache bdev was lost: scan the log mirrors, then replay the log
//! onto the backing bdev, through the node's bases. The machine is the one
//! the simulator and `hhc recover` run (`recovery::LogRecovery`); this room
//! only drives it, and says how far it got (`progress_json`).

use super::base::Bases;
use super::io_tag::IoTag;
use super::iov::region_iovec;
use super::json::JsonObject;
use super::memory::DmaAllocator;
use super::owner::now_ns;
use crate::config::LogLayout;
use crate::io::{IoBuffer, IoId, IoMachine, IoStatus};
use crate::recovery::{LogRecovery, Recovered, RecoveryProgress, ReplayReport};

pub struct Recovery(LogRecovery);

impl Recovery {
    /// The log of instance `instance_id` (the cache superblock's): a mirror
    /// of another instance is left out of the replay.
    pub fn new(layout: LogLayout, mirrors: Vec<u8>, backing_has_flush: bool, instance_id: u64) -> Recovery {
        Recovery(LogRecovery::new(layout, mirrors, backing_has_flush, Box::new(DmaAllocator)).expect_instance(instance_id))
    }

    /// A takeover's: the log of another host, whatever instance wrote it,
    /// its layout read from the mirrors' superblocks.
    pub fn takeover(mirrors: Vec<u8>, backing_has_flush: bool) -> Recovery {
        Recovery(LogRecovery::from_log(mirrors, backing_has_flush, Box::new(DmaAllocator)))
    }

    /// None while it runs; then what it replayed, or why it failed.
    pub fn outcome(&mut self) -> Option<Result<ReplayReport, String>> {
        match self.0.result()? {
            Ok(Recovered::Replayed(report)) => Some(Ok(report.clone())),
            Ok(Recovered::Scanned(_)) => Some(Err("the recovery stopped after its scan".to_string())),
            Err(error) => Some(Err(error.to_string())),
        }
    }

    /// Starts the machine's device commands; true if there were any.
    pub fn pump(&mut self, bases: &mut Bases) -> bool {
        let machine = &mut self.0;
        let mut progressed = false;
        while let Some(io) = machine.poll_io() {
            progressed = true;
            let iovs = match io.buffer {
                IoBuffer::Engine { region, offset_bytes } => {
                    vec![region_iovec(machine.io_memory_mut(region), offset_bytes as u64, io.len_bytes)]
                }
                _ => Vec::new(),
            };
            if let Err(status) = bases.submit(io.device, io.kind, io.offset_bytes, io.len_bytes, &iovs, IoTag::Recovery(io.id)) {
                machine.handle_io_completion(now_ns(), io.id, status);
            }
        }
        progressed
    }

    pub fn io_done(&mut self, id: IoId, status: IoStatus) {
        self.0.handle_io_completion(now_ns(), id, status);
    }

    pub fn progress(&self) -> RecoveryProgress {
        self.0.progress()
    }

    /// None while it runs; then how it ended (logged, under `name`).
    pub fn finished(&mut self, name: &str, backing: &str) -> Option<RecoveryProgress> {
        match self.outcome()? {
            Ok(report) => log::warn!("{name}: {}; waiting for bdev_hhc_recover", replayed_summary(&report, backing)),
            Err(error) => log::error!("{name}: {error}"),
        }
        Some(self.0.progress())
    }
}

/// "replayed N blocks from M log parts onto BACKING (last barrier sequence S)".
pub fn replayed_summary(report: &ReplayReport, backing: &str) -> String {
    format!(
        "replayed {} blocks from {} log parts onto {backing} (last barrier sequence {})",
        report.blocks_replayed,
        report.segments_replayed,
        report.last_sequence.map_or_else(|| "none".to_string(), |s| s.to_string())
    )
}

/// The `recovery` object of `bdev_hhc_get_stats` and `bdev_hhc_get_bdevs`.
pub fn progress_json(progress: &RecoveryProgress) -> String {
    let object = JsonObject::new()
        .string("stage", progress.stage.name())
        .number("parts_scanned", progress.parts_scanned)
        .number("parts_replayed", progress.parts_replayed)
        .number("parts_before_head", progress.parts_before_head)
        .number("parts_after_barrier", progress.parts_after_barrier)
        .number("blocks_total", progress.blocks_total)
        .number("blocks_replayed", progress.blocks_replayed)
        .number("corrupt_copies_detected", progress.corrupt_copies_detected);
    let object = match progress.last_barrier_sequence {
        Some(sequence) => object.number("last_barrier_sequence", sequence),
        None => object.raw("last_barrier_sequence", "null"),
    };
    match &progress.error {
        Some(error) => object.string("error", error),
        None => object.raw("error", "null"),
    }
    .finish()
}
