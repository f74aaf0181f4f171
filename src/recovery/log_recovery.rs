//! The whole cache-loss recovery as one sans-IO machine: `LogScanner`, then
//! `Replay` over what it found. The torture simulator and `hhc recover` run
//! it; the SPDK module can run it the same way:
//!
//! 1. `LogRecovery::new(layout, mirrors, backing_has_flush, Box::new(DmaAllocator))`
//!    (`scan_only` for a dry run that stops after the scan). Every buffer is
//!    allocated through that allocator: the scanner's at creation, the
//!    replay's when the scan is done.
//! 2. Drain `poll_io()` until it returns `None`, submitting each command to
//!    the base bdev of its `DeviceRole` (`Log(i)` or `Backing`), with the
//!    bytes of `IoBuffer::Engine { region, offset_bytes }` taken from
//!    `io_memory_mut(region)`. Commands may be in flight together and may
//!    complete in any order.
//! 3. On each base completion call `handle_io_completion(now, id, status)`,
//!    then go back to 2: a completion can release further commands (the scan
//!    turning into the replay happens inside these calls).
//! 4. After each completion, `result()` says whether it is finished: `None`
//!    while running; `Some(Ok(Recovered::Replayed(report)))` once every live
//!    block is on the backing device (flushed) and the log is re-initialised;
//!    `Some(Err(_))` when it cannot finish. A finished recovery emits nothing.
//!
//! `blocks_replayed()` / `blocks_total()` give progress, and
//! `corrupt_copies_detected()` what the scan skipped. Dropping the machine
//! with commands in flight is allowed only once the driver will not touch
//! their buffers again (the regions are freed with it).

use super::{LogScanner, Replay, ReplayError, ReplayReport, ScanError, ScannedLog};
use crate::config::LogLayout;
use crate::io::{DeviceIo, IoAllocator, IoId, IoMachine, IoStatus, Nanos};
use std::fmt;

/// Why a recovery did not finish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecoveryError {
    Scan(ScanError),
    Replay(ReplayError),
}

impl fmt::Display for RecoveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecoveryError::Scan(error) => write!(f, "log scan failed: {error}"),
            RecoveryError::Replay(error) => write!(f, "replay failed: {error}"),
        }
    }
}

impl std::error::Error for RecoveryError {}

/// What a finished recovery did.
#[derive(Clone, Debug)]
pub enum Recovered {
    /// `scan_only`: the log as found; nothing was written.
    Scanned(ScannedLog),
    /// Every live block replayed and the log re-initialised.
    Replayed(ReplayReport),
}

enum Stage {
    Scan(Box<LogScanner>),
    Replay(Box<Replay>),
    Done(Result<Recovered, RecoveryError>),
}

pub struct LogRecovery {
    layout: LogLayout,
    mirrors: Vec<u8>,
    backing_has_flush: bool,
    scan_only: bool,
    alloc: Box<dyn IoAllocator>,
    stage: Stage,
    corrupt_copies_detected: u64,
}

impl LogRecovery {
    /// Scans `mirrors` (log mirror indices, in order of preference), replays
    /// onto the backing device, re-initialises the log. Without
    /// `backing_has_flush` the backing device is taken as write-through.
    pub fn new(layout: LogLayout, mirrors: Vec<u8>, backing_has_flush: bool, alloc: Box<dyn IoAllocator>) -> LogRecovery {
        LogRecovery::build(layout, mirrors, backing_has_flush, false, alloc)
    }

    /// Scans only (a dry run): finishes with `Recovered::Scanned`.
    pub fn scan_only(layout: LogLayout, mirrors: Vec<u8>, alloc: Box<dyn IoAllocator>) -> LogRecovery {
        LogRecovery::build(layout, mirrors, false, true, alloc)
    }

    fn build(layout: LogLayout, mirrors: Vec<u8>, backing_has_flush: bool, scan_only: bool, mut alloc: Box<dyn IoAllocator>) -> LogRecovery {
        let scanner = LogScanner::new(layout, mirrors.clone(), alloc.as_mut());
        LogRecovery { layout, mirrors, backing_has_flush, scan_only, alloc, stage: Stage::Scan(Box::new(scanner)), corrupt_copies_detected: 0 }
    }

    /// `None` while running; then the outcome, which stays.
    pub fn result(&mut self) -> Option<Result<&Recovered, &RecoveryError>> {
        self.advance();
        match &self.stage {
            Stage::Done(result) => Some(result.as_ref()),
            _ => None,
        }
    }

    /// Log copies the scan found corrupt (and read from another mirror).
    pub fn corrupt_copies_detected(&self) -> u64 {
        self.corrupt_copies_detected
    }

    /// Blocks written to the backing device so far.
    pub fn blocks_replayed(&self) -> u64 {
        match &self.stage {
            Stage::Replay(replay) => replay.blocks_replayed(),
            Stage::Done(Ok(Recovered::Replayed(report))) => report.blocks_replayed,
            _ => 0,
        }
    }

    /// Blocks the replay will write (0 until the scan is done).
    pub fn blocks_total(&self) -> u64 {
        match &self.stage {
            Stage::Replay(replay) => replay.blocks_total(),
            Stage::Done(Ok(Recovered::Replayed(report))) => report.blocks_replayed,
            _ => 0,
        }
    }

    /// Moves on to the next stage once the current one is finished.
    fn advance(&mut self) {
        let next = match &mut self.stage {
            Stage::Scan(scanner) => match scanner.take_result() {
                None => return,
                Some(Err(error)) => Stage::Done(Err(RecoveryError::Scan(error))),
                Some(Ok(scanned)) => {
                    self.corrupt_copies_detected += scanned.corrupt_copies_detected;
                    if self.scan_only {
                        Stage::Done(Ok(Recovered::Scanned(scanned)))
                    } else {
                        let mirrors = self.mirrors.clone();
                        let replay = Replay::new(self.layout, scanned, mirrors, self.backing_has_flush, self.alloc.as_mut());
                        Stage::Replay(Box::new(replay))
                    }
                }
            },
            Stage::Replay(replay) => match replay.result() {
                None => return,
                Some(Ok(report)) => Stage::Done(Ok(Recovered::Replayed(report.clone()))),
                Some(Err(error)) => Stage::Done(Err(RecoveryError::Replay(error.clone()))),
            },
            Stage::Done(_) => return,
        };
        self.stage = next;
    }

    fn machine(&mut self) -> Option<&mut dyn IoMachine> {
        match &mut self.stage {
            Stage::Scan(scanner) => Some(scanner.as_mut()),
            Stage::Replay(replay) => Some(replay.as_mut()),
            Stage::Done(_) => None,
        }
    }
}

impl IoMachine for LogRecovery {
    fn poll_io(&mut self) -> Option<DeviceIo> {
        self.advance();
        self.machine()?.poll_io()
    }

    fn handle_io_completion(&mut self, now: Nanos, id: IoId, status: IoStatus) {
        self.machine().expect("completion after the recovery finished").handle_io_completion(now, id, status);
        self.advance();
    }

    fn io_memory_mut(&mut self, region: u32) -> &mut [u8] {
        self.machine().expect("memory asked after the recovery finished").io_memory_mut(region)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::mem::MemDevices;
    use crate::io::{DeviceRole, HeapAllocator, IoKind};
    use crate::recovery::test_log::{expected_backing, layout, scan, spec, LogImage, SegmentSpec};

    const MIRRORS: [u8; 2] = [0, 1];

    /// A barrier, then a part past it that no flush covered.
    fn run() -> Vec<SegmentSpec> {
        vec![spec(20, false, &[(1, 1), (2, 1)], &[]), spec(21, true, &[(3, 1), (1, 2)], &[]), spec(22, false, &[(2, 2)], &[])]
    }

    fn devices(run: &[SegmentSpec]) -> MemDevices {
        let mut image = LogImage::new(layout(6), MIRRORS.len());
        image.write_superblock(7, 0, run[0].sequence);
        for (index, segment) in run.iter().enumerate() {
            image.write_segment(index as u32, segment);
        }
        image.into_devices()
    }

    fn finish(devices: &mut MemDevices, recovery: &mut LogRecovery) -> Result<Recovered, RecoveryError> {
        devices.pump(recovery).unwrap();
        assert!(recovery.poll_io().is_none(), "a finished recovery emits nothing");
        recovery.result().expect("finished once it emits nothing").cloned().map_err(Clone::clone)
    }

    #[test]
    fn scans_then_replays_what_the_last_barrier_covers() {
        let run = run();
        let mut devices = devices(&run);
        let mut recovery = LogRecovery::new(layout(6), MIRRORS.to_vec(), true, Box::new(HeapAllocator));
        let Ok(Recovered::Replayed(report)) = finish(&mut devices, &mut recovery) else { panic!("not replayed") };
        assert_eq!(devices.device(DeviceRole::Backing).unwrap(), &expected_backing(&run)[..]);
        assert_eq!((report.blocks_replayed, report.segments_replayed, report.segments_after_barrier), (3, 2, 1));
        assert_eq!((recovery.blocks_replayed(), recovery.blocks_total()), (3, 3));
        assert_eq!(recovery.corrupt_copies_detected(), 0);
    }

    #[test]
    fn a_dry_run_scans_as_the_scanner_does_and_writes_nothing() {
        let mut devices = devices(&run());
        let expected = scan(&mut devices, layout(6), &MIRRORS).unwrap();
        let history_start = devices.history().len();
        let mut recovery = LogRecovery::scan_only(layout(6), MIRRORS.to_vec(), Box::new(HeapAllocator));
        let Ok(Recovered::Scanned(scanned)) = finish(&mut devices, &mut recovery) else { panic!("not scanned") };
        assert_eq!(scanned, expected);
        assert!(devices.history()[history_start..].iter().all(|io| io.kind == IoKind::Read));
        assert_eq!(recovery.blocks_total(), 0);
    }

    #[test]
    fn failures_name_the_stage_that_failed() {
        let mut recovery = LogRecovery::new(layout(6), Vec::new(), true, Box::new(HeapAllocator));
        let error = finish(&mut MemDevices::new(), &mut recovery).unwrap_err();
        assert!(matches!(error, RecoveryError::Scan(ScanError::NoMirrors)), "{error:?}");
        assert!(error.to_string().starts_with("log scan failed: "), "{error}");

        let mut devices = devices(&run());
        devices.set_failing(DeviceRole::Backing, true);
        let mut recovery = LogRecovery::new(layout(6), MIRRORS.to_vec(), true, Box::new(HeapAllocator));
        let error = finish(&mut devices, &mut recovery).unwrap_err();
        assert!(matches!(error, RecoveryError::Replay(_)), "{error:?}");
        assert!(error.to_string().starts_with("replay failed: "), "{error}");
    }
}
