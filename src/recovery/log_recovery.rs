//! The whole cache-loss recovery as one sans-IO machine: `LogScanner`, then
//! `Replay` over what it found. The torture simulator and `hhc recover` run
//! it; the SPDK module can run it the same way:
//!
//! 1. `LogRecovery::new(layout, mirrors, backing_has_flush, Box::new(DmaAllocator))`
//!    (`scan_only` for a dry run that stops after the scan; `from_log` for a
//!    log whose layout only its superblocks tell, read first). Every buffer is
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
//! `blocks_replayed()` / `blocks_total()` give progress, `progress()` all of
//! it (what an operator is shown, also after a failure), and
//! `corrupt_copies_detected()` what the scan skipped. Dropping the machine
//! with commands in flight is allowed only once the driver will not touch
//! their buffers again (the regions are freed with it).

use super::superblock_probe::SuperblockProbe;
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

/// Where a recovery is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryStage {
    Scanning,
    Replaying,
    Done,
    Failed,
}

impl RecoveryStage {
    pub fn name(self) -> &'static str {
        match self {
            RecoveryStage::Scanning => "scanning",
            RecoveryStage::Replaying => "replaying",
            RecoveryStage::Done => "done",
            RecoveryStage::Failed => "failed",
        }
    }
}

/// A recovery's progress: while it runs, and as it stood when it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryProgress {
    pub stage: RecoveryStage,
    /// Valid log parts found from the head so far.
    pub parts_scanned: u64,
    /// Parts from the newest head a part recorded up to and including the
    /// last barrier (known once scanned).
    pub parts_replayed: u64,
    /// Parts before that head, left out: the engine had passed them.
    pub parts_before_head: u64,
    /// Valid parts after the last barrier: never covered by a flush, dropped.
    pub parts_after_barrier: u64,
    /// Blocks live at the last barrier, to be written to the backing device.
    pub blocks_total: u64,
    pub blocks_replayed: u64,
    /// Sequence of the segment holding the last barrier; None if none was found.
    pub last_barrier_sequence: Option<u64>,
    pub corrupt_copies_detected: u64,
    /// Why it failed.
    pub error: Option<String>,
}

enum Stage {
    /// Reading the superblocks for the layout (`from_log`).
    Probe(Box<SuperblockProbe>),
    Scan(Box<LogScanner>),
    Replay(Box<Replay>),
    Done(Result<Recovered, RecoveryError>),
}

pub struct LogRecovery {
    /// Known from the start, or once `Stage::Probe` read it.
    layout: Option<LogLayout>,
    mirrors: Vec<u8>,
    backing_has_flush: bool,
    scan_only: bool,
    alloc: Box<dyn IoAllocator>,
    stage: Stage,
    corrupt_copies_detected: u64,
    /// The progress when the last stage ended (a failure keeps it).
    last_progress: RecoveryProgress,
}

impl LogRecovery {
    /// Scans `mirrors` (log mirror indices, in order of preference), replays
    /// onto the backing device, re-initialises the log. Without
    /// `backing_has_flush` the backing device is taken as write-through.
    pub fn new(layout: LogLayout, mirrors: Vec<u8>, backing_has_flush: bool, alloc: Box<dyn IoAllocator>) -> LogRecovery {
        LogRecovery::build(layout, mirrors, backing_has_flush, false, alloc)
    }

    /// As `new`, for a log whose layout only its superblocks tell (a
    /// takeover: the log of another host): reads them first.
    pub fn from_log(mirrors: Vec<u8>, backing_has_flush: bool, mut alloc: Box<dyn IoAllocator>) -> LogRecovery {
        let probe = SuperblockProbe::new(mirrors.clone(), alloc.as_mut());
        LogRecovery {
            layout: None,
            mirrors,
            backing_has_flush,
            scan_only: false,
            alloc,
            stage: Stage::Probe(Box::new(probe)),
            corrupt_copies_detected: 0,
            last_progress: RecoveryProgress::start(),
        }
    }

    /// Scans only (a dry run): finishes with `Recovered::Scanned`.
    pub fn scan_only(layout: LogLayout, mirrors: Vec<u8>, alloc: Box<dyn IoAllocator>) -> LogRecovery {
        LogRecovery::build(layout, mirrors, false, true, alloc)
    }

    fn build(layout: LogLayout, mirrors: Vec<u8>, backing_has_flush: bool, scan_only: bool, mut alloc: Box<dyn IoAllocator>) -> LogRecovery {
        let scanner = LogScanner::new(layout, mirrors.clone(), alloc.as_mut());
        LogRecovery { layout: Some(layout), mirrors, backing_has_flush, scan_only, alloc, stage: Stage::Scan(Box::new(scanner)), corrupt_copies_detected: 0, last_progress: RecoveryProgress::start() }
    }

    /// The log belongs to instance `id` (`LogScanner::expect_instance`): a
    /// mirror of another instance is left out. Call before the first
    /// completion.
    pub fn expect_instance(mut self, id: u64) -> LogRecovery {
        if let Stage::Scan(scanner) = &mut self.stage {
            scanner.expect_instance(id);
        }
        self
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

    /// Everything an operator is shown about the recovery.
    pub fn progress(&self) -> RecoveryProgress {
        let last = &self.last_progress;
        let corrupt_copies_detected = self.corrupt_copies_detected;
        match &self.stage {
            Stage::Probe(_) => RecoveryProgress::start(),
            Stage::Scan(scanner) => RecoveryProgress { parts_scanned: scanner.parts_scanned(), ..RecoveryProgress::start() },
            Stage::Replay(replay) => {
                let report = replay.report();
                RecoveryProgress {
                    stage: RecoveryStage::Replaying,
                    blocks_total: replay.blocks_total(),
                    blocks_replayed: report.blocks_replayed,
                    corrupt_copies_detected,
                    ..last.clone()
                }
            }
            Stage::Done(Ok(Recovered::Replayed(report))) => RecoveryProgress {
                stage: RecoveryStage::Done,
                blocks_total: report.blocks_replayed,
                blocks_replayed: report.blocks_replayed,
                corrupt_copies_detected,
                ..last.clone()
            },
            Stage::Done(Ok(Recovered::Scanned(_))) => {
                RecoveryProgress { stage: RecoveryStage::Done, corrupt_copies_detected, ..last.clone() }
            }
            Stage::Done(Err(error)) => RecoveryProgress {
                stage: RecoveryStage::Failed,
                corrupt_copies_detected,
                error: Some(error.to_string()),
                ..last.clone()
            },
        }
    }

    /// Moves on to the next stage once the current one is finished.
    fn advance(&mut self) {
        // What the ending stage knew, for progress() after it.
        if let Stage::Replay(replay) = &self.stage {
            self.last_progress.blocks_total = replay.blocks_total();
            self.last_progress.blocks_replayed = replay.blocks_replayed();
        }
        let next = match &mut self.stage {
            Stage::Probe(probe) => match probe.take_result() {
                None => return,
                Some(Err(error)) => Stage::Done(Err(RecoveryError::Scan(error))),
                Some(Ok(layout)) => {
                    self.layout = Some(layout);
                    Stage::Scan(Box::new(LogScanner::new(layout, self.mirrors.clone(), self.alloc.as_mut())))
                }
            },
            Stage::Scan(scanner) => match scanner.take_result() {
                None => return,
                Some(Err(error)) => Stage::Done(Err(RecoveryError::Scan(error))),
                Some(Ok(scanned)) => {
                    self.corrupt_copies_detected += scanned.corrupt_copies_detected;
                    self.last_progress = RecoveryProgress::scanned(&scanned);
                    if self.scan_only {
                        Stage::Done(Ok(Recovered::Scanned(scanned)))
                    } else {
                        let mirrors = self.mirrors.clone();
                        let layout = self.layout.expect("the layout is known before the scan");
                        let replay = Replay::new(layout, scanned, mirrors, self.backing_has_flush, self.alloc.as_mut());
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
            Stage::Probe(probe) => Some(probe.as_mut()),
            Stage::Scan(scanner) => Some(scanner.as_mut()),
            Stage::Replay(replay) => Some(replay.as_mut()),
            Stage::Done(_) => None,
        }
    }
}

impl RecoveryProgress {
    /// Nothing had to be replayed (the policy kept no dirty data the
    /// backing device lacks), or nothing could be: `error` says why.
    pub fn without_log(error: Option<String>) -> RecoveryProgress {
        let stage = if error.is_some() { RecoveryStage::Failed } else { RecoveryStage::Done };
        RecoveryProgress { stage, error, ..RecoveryProgress::start() }
    }

    fn start() -> RecoveryProgress {
        RecoveryProgress {
            stage: RecoveryStage::Scanning,
            parts_scanned: 0,
            parts_replayed: 0,
            parts_before_head: 0,
            parts_after_barrier: 0,
            blocks_total: 0,
            blocks_replayed: 0,
            last_barrier_sequence: None,
            corrupt_copies_detected: 0,
            error: None,
        }
    }

    /// What the scan found: the parts the replay will use and the barrier.
    fn scanned(scanned: &ScannedLog) -> RecoveryProgress {
        let span = super::replay::ReplaySpan::of(scanned);
        let parts_scanned = scanned.segments.len();
        RecoveryProgress {
            parts_scanned: parts_scanned as u64,
            parts_replayed: (span.end - span.first) as u64,
            parts_before_head: span.first as u64,
            parts_after_barrier: (parts_scanned - span.end) as u64,
            last_barrier_sequence: scanned.last_barrier.map(|last| scanned.segments[last].sequence),
            ..RecoveryProgress::start()
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
    use crate::driver::SyncDevices;
    use crate::format::UNIT_BYTES;
    use crate::io::{DeviceRole, HeapAllocator, IoBuffer, IoKind};
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
        let progress = recovery.progress();
        assert_eq!(progress.stage, RecoveryStage::Done);
        assert_eq!((progress.parts_scanned, progress.parts_replayed, progress.parts_after_barrier), (3, 2, 1));
        assert_eq!((progress.blocks_total, progress.blocks_replayed), (3, 3));
        assert_eq!((progress.last_barrier_sequence, progress.error), (Some(21), None));
    }

    /// A takeover's recovery learns the layout from the superblocks and
    /// ends as one told the layout does; with one mirror left (the peer's)
    /// too, and with none holding a superblock it fails the scan.
    #[test]
    fn a_recovery_from_the_log_alone_reads_the_layout_from_its_superblocks() {
        let run = run();
        for mirrors in [vec![0, 1], vec![1]] {
            let mut devices = devices(&run);
            let mut recovery = LogRecovery::from_log(mirrors.clone(), true, Box::new(HeapAllocator));
            assert_eq!(recovery.progress().stage, RecoveryStage::Scanning);
            let Ok(Recovered::Replayed(report)) = finish(&mut devices, &mut recovery) else { panic!("{mirrors:?}: not replayed") };
            assert_eq!(devices.device(DeviceRole::Backing).unwrap(), &expected_backing(&run)[..], "{mirrors:?}");
            assert_eq!((report.blocks_replayed, report.segments_replayed, report.segments_after_barrier), (3, 2, 1));
        }
        let mut devices = devices(&run);
        for mirror in MIRRORS {
            devices.device_mut(DeviceRole::Log(mirror)).unwrap()[..2 * UNIT_BYTES].fill(0);
        }
        let mut recovery = LogRecovery::from_log(MIRRORS.to_vec(), true, Box::new(HeapAllocator));
        let error = finish(&mut devices, &mut recovery).unwrap_err();
        assert_eq!(error, RecoveryError::Scan(ScanError::NoValidSuperblock));
        assert!(devices.device(DeviceRole::Backing).unwrap().iter().all(|&b| b == 0), "nothing written");
        let mut recovery = LogRecovery::from_log(Vec::new(), true, Box::new(HeapAllocator));
        assert_eq!(finish(&mut devices, &mut recovery).unwrap_err(), RecoveryError::Scan(ScanError::NoMirrors));
    }

    #[test]
    fn progress_moves_through_the_stages() {
        let run = run();
        let mut devices = devices(&run);
        let mut recovery = LogRecovery::new(layout(6), MIRRORS.to_vec(), true, Box::new(HeapAllocator));
        assert_eq!(recovery.progress().stage, RecoveryStage::Scanning);
        let mut seen = vec![recovery.progress()];
        // One command at a time, so every step's progress is seen.
        while let Some(io) = recovery.poll_io() {
            let status = match io.buffer {
                IoBuffer::Engine { region, offset_bytes } => {
                    let memory = &mut recovery.io_memory_mut(region)[offset_bytes as usize..][..io.len_bytes as usize];
                    devices.execute(&io, memory)
                }
                _ => devices.execute(&io, &mut []),
            };
            recovery.handle_io_completion(0, io.id, status);
            seen.push(recovery.progress());
        }
        let stages: Vec<RecoveryStage> = seen.iter().map(|p| p.stage).collect();
        assert!(stages.windows(2).all(|w| w[0] as u8 <= w[1] as u8), "stages go forward: {stages:?}");
        assert!(stages.contains(&RecoveryStage::Replaying), "{stages:?}");
        let replaying: Vec<&RecoveryProgress> = seen.iter().filter(|p| p.stage == RecoveryStage::Replaying).collect();
        assert!(replaying.iter().all(|p| p.blocks_total == 3 && p.last_barrier_sequence == Some(21)), "{replaying:?}");
        assert!(replaying.windows(2).all(|w| w[0].blocks_replayed <= w[1].blocks_replayed));
        assert!(seen.iter().filter(|p| p.stage == RecoveryStage::Scanning).all(|p| p.parts_scanned <= 3));
        assert_eq!(seen.last().unwrap().stage, RecoveryStage::Done);
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
        // What was found stays visible after the failure.
        let progress = recovery.progress();
        assert_eq!((progress.stage, progress.last_barrier_sequence, progress.blocks_total), (RecoveryStage::Failed, Some(21), 3));
        assert_eq!(progress.blocks_replayed, 0);
        assert_eq!(progress.error, Some(error.to_string()));
    }
}
