//! Log scan: find the newest superblock on any mirror, then follow the parts
//! of the segments from the head, each where the one before says the next
//! starts, until no mirror holds the next one.
//!
//! Parts are followed in memory: whole segments are read ahead of the scan
//! from the mirror it reads (`scan_windows`), so a log on an HDD streams.
//! Where a segment's read fails, its parts are read one at a time, header
//! first, as a single bad block must not hide the parts around it.
//!
//! (Its last 200 lines are tests.)

use super::scan_windows::{SegmentWindows, WindowState};
use crate::config::LogLayout;
use crate::format::{sealed_len, LogSuperblock, SegmentHeader, LOG_SUPERBLOCK_COPIES, UNIT_BYTES};
use crate::io::{DeviceIo, DeviceRole, IoAllocator, IoBuffer, IoId, IoKind, IoMachine, IoRegion, IoStatus, Nanos};
use std::collections::VecDeque;
use std::fmt;

const REGION_SUPERBLOCKS: u32 = 0;
const REGION_WINDOWS: u32 = 1;

/// One valid part of the run that starts at the log head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannedSegment {
    pub segment_index: u32,
    pub sequence: u64,
    pub part: u32,
    /// Block of the segment where the part starts.
    pub first_block: u32,
    pub barrier: bool,
    pub segment_end: bool,
    /// Blocks left unwritten after the part: the next one starts after them.
    pub gap_blocks: u32,
    /// The log's head the part recorded as it was sealed (0: none recorded).
    pub head_sequence: u64,
    pub lbas: Vec<u64>,
    pub revokes: Vec<u64>,
    /// The mirror whose copy was valid (the first one tried that was).
    pub mirror: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannedLog {
    /// The newest valid superblock over every mirror.
    pub superblock: LogSuperblock,
    /// For each scanned mirror (in the order given to the scanner), the unit
    /// (0 or 1) holding its newest valid superblock copy, if any.
    pub superblock_units: Vec<Option<u64>>,
    /// The parts, in log order.
    pub segments: Vec<ScannedSegment>,
    /// Index into `segments` of the last part with the barrier flag.
    pub last_barrier: Option<usize>,
    /// Copies that were invalid where another mirror's copy was valid.
    pub corrupt_copies_detected: u64,
    /// Reads that failed; the scan went on with the other mirrors.
    pub io_errors: u64,
    /// Mirrors with a valid superblock that the newest superblock does not
    /// count in sync (`LogSuperblock::in_sync_mask`): they missed parts, so
    /// the scan read no part from them (unless `in_sync_unavailable`).
    pub stale_mirrors: Vec<u8>,
    /// No mirror the newest superblock counts in sync could be read: the
    /// scan fell back to the stale ones, and what it found may lack parts.
    pub in_sync_unavailable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanError {
    NoMirrors,
    /// No superblock copy could be read from any mirror.
    SuperblocksUnreadable,
    NoValidSuperblock,
    /// Two mirrors belong to different HHC instances.
    InstanceMismatch {
        expected: u64,
        found: u64,
        mirror: u8,
    },
    /// The expected instance's log was replayed onto the backing device
    /// and started over (the superblock's `replayed` flag): the cache that
    /// expected it is stale.
    Replayed {
        mirror: u8,
    },
    /// A mirror holds the log of instance `by`, which took the expected
    /// instance's log over (`LogSuperblock::previous_instance`): the cache
    /// that expected it is stale.
    TakenOver {
        mirror: u8,
        by: u64,
    },
    /// The superblock disagrees with the layout the scanner was given.
    GeometryMismatch(String),
    /// Every mirror failed to read the segment at this position, so the log
    /// may continue beyond it and nothing can be concluded.
    SegmentUnreadable {
        segment_index: u32,
    },
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScanError::NoMirrors => write!(f, "no log mirror given"),
            ScanError::SuperblocksUnreadable => write!(f, "no log superblock copy could be read"),
            ScanError::NoValidSuperblock => write!(f, "no valid log superblock on any mirror"),
            ScanError::InstanceMismatch { expected, found, mirror } => {
                write!(f, "log mirror {mirror} belongs to instance {found:#x}, expected {expected:#x}")
            }
            ScanError::Replayed { mirror } => write!(
                f,
                "log mirror {mirror} says this log was replayed onto the backing device and started over: the cache is stale"
            ),
            ScanError::TakenOver { mirror, by } => write!(
                f,
                "log mirror {mirror} holds the log of instance {by:#x}, which took this one over (its log was replayed onto the backing device): the cache is stale"
            ),
            ScanError::GeometryMismatch(what) => write!(f, "log geometry mismatch: {what}"),
            ScanError::SegmentUnreadable { segment_index } => {
                write!(f, "segment {segment_index} could not be read from any mirror")
            }
        }
    }
}

impl std::error::Error for ScanError {}

#[derive(Clone, Copy, Debug)]
enum Pending {
    SuperblockCopy(usize),
    /// A whole segment into this window.
    Window(usize),
    /// The current part's first block, into its place in this window.
    PartFirstBlock(usize),
    /// The rest of the current part (all its checksum covers), into the
    /// same window.
    PartRest(usize),
}

/// Where the part scan stands: which part, which mirror is being tried.
struct SegmentScan {
    superblock: LogSuperblock,
    superblock_units: Vec<Option<u64>>,
    /// Segments passed since the head (the ring holds `segments_count`).
    position: u32,
    /// The part expected next in the current segment, and its first block.
    part: u32,
    first_block: u32,
    /// The run of the last part accepted: the next must be of it or later.
    run: u32,
    /// By position: whether parts are read from that mirror (in sync).
    readable: Vec<bool>,
    stale_mirrors: Vec<u8>,
    in_sync_unavailable: bool,
    attempt: usize,
    invalid_copies_here: u64,
    segments: Vec<ScannedSegment>,
    corrupt_copies_detected: u64,
    io_errors: u64,
}

enum Phase {
    Superblocks { statuses: Vec<Option<IoStatus>> },
    Segments(SegmentScan),
    Done,
}

pub struct LogScanner {
    layout: LogLayout,
    mirrors: Vec<u8>,
    /// Mirrors that reported `DeviceLost` or belong to another instance;
    /// never asked again.
    lost: Vec<bool>,
    /// The instance the log must belong to, when the caller knows it (the
    /// cache superblock says): a mirror of another one is left out.
    expected_instance: Option<u64>,
    superblock_memory: Box<dyn IoRegion>,
    windows: SegmentWindows,
    /// A read of the current part alone is in flight: the scan waits for
    /// it, whatever other reads complete.
    part_read_in_flight: bool,
    queued: VecDeque<(DeviceIo, Pending)>,
    in_flight: Vec<(IoId, Pending)>,
    next_io_id: IoId,
    phase: Phase,
    result: Option<Result<ScannedLog, ScanError>>,
}

impl LogScanner {
    /// `mirrors` are the log mirror indices (`DeviceRole::Log(i)`) to read, in
    /// order of preference.
    pub fn new(layout: LogLayout, mirrors: Vec<u8>, alloc: &mut dyn IoAllocator) -> LogScanner {
        let copies_count = mirrors.len() * LOG_SUPERBLOCK_COPIES as usize;
        let mut scanner = LogScanner {
            layout,
            lost: vec![false; mirrors.len()],
            expected_instance: None,
            superblock_memory: alloc.alloc(copies_count.max(1) * UNIT_BYTES),
            windows: SegmentWindows::new(layout.segment.segment_bytes as usize, alloc),
            part_read_in_flight: false,
            mirrors,
            queued: VecDeque::new(),
            in_flight: Vec::new(),
            next_io_id: 0,
            phase: Phase::Superblocks { statuses: vec![None; copies_count] },
            result: None,
        };
        if scanner.mirrors.is_empty() {
            scanner.finish(Err(ScanError::NoMirrors));
        }
        for copy in 0..copies_count {
            scanner.queue_superblock_read(copy);
        }
        scanner
    }

    /// The log belongs to instance `id`: a mirror whose superblock names
    /// another (an old disk put back, a mirror of a log formatted since) is
    /// left out of the scan instead of failing it; only if no mirror belongs
    /// to `id` does the scan fail (`InstanceMismatch`). Without it, mirrors
    /// of two instances fail the scan. A mirror of `id` whose log was
    /// replayed fails it (`Replayed`), and so does one of an instance that
    /// took `id`'s log over (`TakenOver`): the caller holds that instance's
    /// cache, which is stale. Call before the first completion.
    pub fn expect_instance(&mut self, id: u64) {
        self.expected_instance = Some(id);
    }

    pub fn is_done(&self) -> bool {
        self.result.is_some() && self.in_flight.is_empty()
    }

    pub fn result(&self) -> Option<&Result<ScannedLog, ScanError>> {
        self.result.as_ref().filter(|_| self.is_done())
    }

    /// Parts of the run accepted so far (progress while it scans).
    pub fn parts_scanned(&self) -> u64 {
        match (&self.phase, &self.result) {
            (Phase::Segments(scan), _) => scan.segments.len() as u64,
            (_, Some(Ok(scanned))) => scanned.segments.len() as u64,
            _ => 0,
        }
    }

    /// Moves the result out once the scan is done.
    pub fn take_result(&mut self) -> Option<Result<ScannedLog, ScanError>> {
        if self.is_done() {
            self.result.take()
        } else {
            None
        }
    }

    fn queue_read(
        &mut self,
        mirror_position: usize,
        offset_bytes: u64,
        len_bytes: usize,
        buffer: IoBuffer,
        pending: Pending,
    ) {
        let io = DeviceIo {
            id: self.next_io_id,
            device: DeviceRole::Log(self.mirrors[mirror_position]),
            kind: IoKind::Read,
            offset_bytes,
            len_bytes: len_bytes as u64,
            buffer,
        };
        self.next_io_id += 1;
        self.queued.push_back((io, pending));
    }

    /// Copy `copy` is unit `copy % 2` of mirror `copy / 2`.
    fn queue_superblock_read(&mut self, copy: usize) {
        let copies = LOG_SUPERBLOCK_COPIES as usize;
        let unit_offset = (copy % copies * UNIT_BYTES) as u64;
        let buffer = IoBuffer::Engine { region: REGION_SUPERBLOCKS, offset_bytes: (copy * UNIT_BYTES) as u32 };
        self.queue_read(copy / copies, unit_offset, UNIT_BYTES, buffer, Pending::SuperblockCopy(copy));
    }

    fn finish(&mut self, result: Result<ScannedLog, ScanError>) {
        self.queued.clear();
        self.phase = Phase::Done;
        self.result = Some(result);
    }

    fn handle_superblock_read(&mut self, copy: usize, status: IoStatus) {
        let Phase::Superblocks { statuses } = &mut self.phase else { return };
        statuses[copy] = Some(status);
        if statuses.iter().any(Option::is_none) {
            return;
        }
        let statuses: Vec<IoStatus> = statuses.iter().flatten().copied().collect();
        for (copy, status) in statuses.iter().enumerate() {
            if *status == IoStatus::DeviceLost {
                self.lost[copy / LOG_SUPERBLOCK_COPIES as usize] = true;
            }
        }
        match self.choose_superblock(&statuses) {
            Ok(scan) => self.start_segments(scan),
            Err(error) => self.finish(Err(error)),
        }
    }

    fn choose_superblock(&mut self, statuses: &[IoStatus]) -> Result<SegmentScan, ScanError> {
        if statuses.iter().all(|s| *s != IoStatus::Ok) {
            return Err(ScanError::SuperblocksUnreadable);
        }
        let copies = LOG_SUPERBLOCK_COPIES as usize;
        let memory = self.superblock_memory.as_mut_slice();
        let mut newest: Option<LogSuperblock> = None;
        let mut foreign: Option<ScanError> = None;
        let mut superblock_units = vec![None; self.mirrors.len()];
        // The index each mirror's own superblock gives it: what the in-sync
        // mask counts, whatever slot it was given here (a takeover or `hhc
        // recover` may read the log's mirror 1 as its only one).
        let mut recorded_index: Vec<u8> = self.mirrors.clone();
        for (position, units) in superblock_units.iter_mut().enumerate() {
            let readable = (0..copies).filter(|unit| statuses[position * copies + unit] == IoStatus::Ok);
            let unit_bytes =
                readable.map(|unit| (unit, &memory[(position * copies + unit) * UNIT_BYTES..][..UNIT_BYTES]));
            let (unit_list, bytes): (Vec<usize>, Vec<&[u8]>) = unit_bytes.unzip();
            let Some((chosen, superblock)) = super::newest_superblock(bytes) else { continue };
            if let Some(expected) = self.expected_instance.filter(|&id| id != superblock.instance_id) {
                if superblock.previous_instance == expected {
                    let mirror = self.mirrors[position];
                    return Err(ScanError::TakenOver { mirror, by: superblock.instance_id });
                }
                foreign.get_or_insert(ScanError::InstanceMismatch {
                    expected,
                    found: superblock.instance_id,
                    mirror: self.mirrors[position],
                });
                self.lost[position] = true;
                continue;
            }
            if self.expected_instance.is_some() && superblock.replayed {
                return Err(ScanError::Replayed { mirror: self.mirrors[position] });
            }
            *units = Some(unit_list[chosen] as u64);
            recorded_index[position] = superblock.mirror_index;
            if let Some(best) = &newest {
                if best.instance_id != superblock.instance_id {
                    let mirror = self.mirrors[position];
                    return Err(ScanError::InstanceMismatch {
                        expected: best.instance_id,
                        found: superblock.instance_id,
                        mirror,
                    });
                }
            }
            if newest.as_ref().is_none_or(|best| superblock.write_seq > best.write_seq) {
                newest = Some(superblock);
            }
        }
        let Some(superblock) = newest else {
            return Err(foreign.unwrap_or(ScanError::NoValidSuperblock));
        };
        self.check_geometry(&superblock)?;
        // Parts are read only from the mirrors the newest superblock counts
        // in sync: a stale one has holes and may hold older parts where the
        // others have newer ones. With none of them readable, the stale ones
        // are all there is.
        let in_sync: Vec<bool> = recorded_index.iter().map(|&m| superblock.in_sync(m)).collect();
        let stale_mirrors =
            (0..self.mirrors.len()).filter(|&p| superblock_units[p].is_some() && !in_sync[p]).map(|p| self.mirrors[p]).collect();
        let in_sync_unavailable = (0..self.mirrors.len()).all(|p| !in_sync[p] || self.lost[p]);
        let readable = if in_sync_unavailable { vec![true; self.mirrors.len()] } else { in_sync };
        Ok(SegmentScan {
            superblock,
            readable,
            stale_mirrors,
            in_sync_unavailable,
            superblock_units,
            position: 0,
            part: 0,
            first_block: 0,
            run: 0,
            attempt: 0,
            invalid_copies_here: 0,
            segments: Vec::new(),
            corrupt_copies_detected: 0,
            io_errors: statuses.iter().filter(|s| **s != IoStatus::Ok).count() as u64,
        })
    }

    fn check_geometry(&self, superblock: &LogSuperblock) -> Result<(), ScanError> {
        let layout = &self.layout;
        let found = (superblock.block_size, superblock.segment_bytes, superblock.segments_count);
        let expected = (layout.segment.block_size, layout.segment.segment_bytes, layout.segments_count);
        if found != expected {
            return Err(ScanError::GeometryMismatch(format!(
                "superblock says (block size, segment bytes, segments) = {found:?}, layout has {expected:?}"
            )));
        }
        Ok(())
    }

    fn start_segments(&mut self, scan: SegmentScan) {
        self.phase = Phase::Segments(scan);
        self.scan_parts();
    }

    fn scan_mut(&mut self) -> &mut SegmentScan {
        match &mut self.phase {
            Phase::Segments(scan) => scan,
            _ => unreachable!("segment completion outside the segment phase"),
        }
    }

    fn scan_ref(&self) -> &SegmentScan {
        match &self.phase {
            Phase::Segments(scan) => scan,
            _ => unreachable!("segment completion outside the segment phase"),
        }
    }

    /// Follows the run from the part it stands at, in memory as far as the
    /// segments are read, until it must wait for a read or the run ends.
    fn scan_parts(&mut self) {
        while !self.part_read_in_flight {
            let Phase::Segments(scan) = &mut self.phase else { return };
            let lost = &self.lost;
            let Some(attempt) = (scan.attempt..self.mirrors.len()).find(|&a| !lost[a] && scan.readable[a]) else {
                return self.end_of_run();
            };
            scan.attempt = attempt;
            let position = scan.position;
            self.read_ahead(attempt, position);
            // No window free yet: one frees when its read completes.
            let Some(window) = self.windows.find(attempt, position) else { return };
            match self.windows.get(window).state {
                WindowState::Loading => return,
                WindowState::Loaded => self.judge_part(window),
                WindowState::Failed(status) => {
                    // Counted once; its parts are then read one at a time.
                    self.scan_mut().io_errors += 1;
                    debug_assert_ne!(status, IoStatus::Ok);
                    self.windows.set_state(window, WindowState::PartByPart);
                    return self.read_part_first_block(window);
                }
                WindowState::PartByPart => return self.read_part_first_block(window),
            }
        }
    }

    /// Reads `position` (and the positions after it, as windows allow) from
    /// mirror `attempt`, whole segments, in order.
    fn read_ahead(&mut self, attempt: usize, position: u32) {
        self.windows.release_behind(position);
        if self.windows.find(attempt, position).is_none() && !self.windows.has_free() {
            self.windows.evict_furthest();
        }
        let last = (position as usize + self.windows.count()).min(self.layout.segments_count as usize) as u32;
        for ahead in position..last {
            if self.windows.find(attempt, ahead).is_some() {
                continue;
            }
            let Some(window) = self.windows.take(attempt, ahead) else { return };
            let offset = self.layout.segment_offset(self.segment_at(ahead));
            let buffer = IoBuffer::Engine { region: REGION_WINDOWS, offset_bytes: self.windows.offset_bytes(window) as u32 };
            let len = self.layout.segment.segment_bytes as usize;
            self.queue_read(attempt, offset, len, buffer, Pending::Window(window));
        }
    }

    /// Segment index `position` segments after the head.
    fn segment_at(&self, position: u32) -> u32 {
        let superblock = &self.scan_ref().superblock;
        ((superblock.head_segment as u64 + position as u64) % self.layout.segments_count as u64) as u32
    }

    fn handle_window_read(&mut self, window: usize, status: IoStatus) {
        if status == IoStatus::DeviceLost {
            self.lost[self.windows.get(window).mirror_position] = true;
        }
        let state = if status == IoStatus::Ok { WindowState::Loaded } else { WindowState::Failed(status) };
        self.windows.set_state(window, state);
        self.scan_parts();
    }

    /// Judges the current part from the segment in `window`.
    fn judge_part(&mut self, window: usize) {
        let block_size = self.layout.segment.block_size as usize;
        let start = self.scan_ref().first_block as usize * block_size;
        let layout = self.layout.segment;
        let from_part = &self.windows.segment(window)[start..];
        let header = match sealed_len(&layout, &from_part[..block_size]) {
            Ok(total_len) if total_len <= from_part.len() => SegmentHeader::decode(&layout, &from_part[..total_len]).ok(),
            _ => None,
        };
        match header.filter(|header| self.in_place(header)) {
            Some(header) => self.accept(header),
            None => self.copy_failed(IoStatus::Ok),
        }
    }

    /// A copy counts only if it sits where the run expects it.
    fn in_place(&self, header: &SegmentHeader) -> bool {
        let scan = self.scan_ref();
        let (index, sequence) = position_target(&self.layout, scan);
        let place = (scan.superblock.instance_id, index, sequence, scan.part, scan.first_block);
        // A part of an earlier run after one of a later run was left by a
        // run that crashed (it landed past a hole); one of a later run than
        // the superblock names was never written by this log.
        let runs = scan.run..=scan.superblock.run;
        (header.instance_id, header.segment_index, header.sequence, header.part, header.first_block) == place
            && runs.contains(&header.run)
    }

    /// The current part's first block from mirror `scan.attempt`, into its
    /// place in `window` (whose whole-segment read failed).
    fn read_part_first_block(&mut self, window: usize) {
        let block_size = self.layout.segment.block_size as usize;
        let scan = self.scan_ref();
        let in_segment = scan.first_block as usize * block_size;
        let (attempt, offset) = (scan.attempt, part_offset(&self.layout, scan));
        let offset_bytes = (self.windows.offset_bytes(window) + in_segment) as u32;
        let buffer = IoBuffer::Engine { region: REGION_WINDOWS, offset_bytes };
        self.part_read_in_flight = true;
        self.queue_read(attempt, offset, block_size, buffer, Pending::PartFirstBlock(window));
    }

    fn handle_part_first_block(&mut self, window: usize, status: IoStatus) {
        self.part_read_in_flight = false;
        if status != IoStatus::Ok {
            self.copy_failed(status);
            return self.scan_parts();
        }
        let block_size = self.layout.segment.block_size as usize;
        let scan = self.scan_ref();
        let in_segment = scan.first_block as usize * block_size;
        let room = self.layout.segment.segment_bytes as usize - in_segment;
        let (attempt, offset) = (scan.attempt, part_offset(&self.layout, scan));
        let first_block = &self.windows.segment(window)[in_segment..in_segment + block_size];
        match sealed_len(&self.layout.segment, first_block) {
            Ok(total_len) if total_len > block_size && total_len <= room => {
                let offset_bytes = (self.windows.offset_bytes(window) + in_segment + block_size) as u32;
                let buffer = IoBuffer::Engine { region: REGION_WINDOWS, offset_bytes };
                self.part_read_in_flight = true;
                let rest = Pending::PartRest(window);
                self.queue_read(attempt, offset + block_size as u64, total_len - block_size, buffer, rest);
            }
            Ok(_) => {
                self.judge_part(window);
                self.scan_parts();
            }
            Err(_) => {
                self.copy_failed(IoStatus::Ok);
                self.scan_parts();
            }
        }
    }

    fn handle_part_rest(&mut self, window: usize, status: IoStatus) {
        self.part_read_in_flight = false;
        if status == IoStatus::Ok {
            self.judge_part(window);
        } else {
            self.copy_failed(status);
        }
        self.scan_parts();
    }

    /// Mirror `scan.attempt` has no valid copy of the current part (`Ok`:
    /// it read, but the copy is invalid); the next mirror is tried.
    fn copy_failed(&mut self, status: IoStatus) {
        let scan = self.scan_mut();
        let attempt = scan.attempt;
        match status {
            IoStatus::Ok => scan.invalid_copies_here += 1,
            IoStatus::Error => scan.io_errors += 1,
            IoStatus::DeviceLost => {
                scan.io_errors += 1;
                self.lost[attempt] = true;
            }
        }
        self.scan_mut().attempt += 1;
    }

    fn accept(&mut self, header: SegmentHeader) {
        let segments_count = self.layout.segments_count;
        let mirror = self.mirrors[self.scan_ref().attempt];
        let next_block = header.next_block(&self.layout.segment);
        let scan = self.scan_mut();
        let segment_end = header.segment_end;
        scan.run = header.run;
        scan.segments.push(ScannedSegment {
            segment_index: header.segment_index,
            sequence: header.sequence,
            part: header.part,
            first_block: header.first_block,
            barrier: header.barrier,
            segment_end,
            gap_blocks: header.gap_blocks,
            head_sequence: header.head_sequence,
            lbas: header.lbas,
            revokes: header.revokes,
            mirror,
        });
        scan.corrupt_copies_detected += scan.invalid_copies_here;
        scan.invalid_copies_here = 0;
        scan.attempt = 0;
        if segment_end {
            scan.position += 1;
            scan.part = 0;
            scan.first_block = 0;
        } else {
            scan.part += 1;
            scan.first_block = next_block;
        }
        // The ring holds segments_count segments; a longer run would be a lap.
        if scan.position == segments_count {
            self.end_of_run();
        }
    }

    /// No mirror holds the next segment: the run ends here, unless no mirror
    /// could even be read, in which case the end is unknown.
    fn end_of_run(&mut self) {
        let Phase::Segments(scan) = std::mem::replace(&mut self.phase, Phase::Done) else {
            unreachable!("end of run outside the segment phase")
        };
        let ended_in_the_ring = scan.position == self.layout.segments_count;
        if !ended_in_the_ring && scan.invalid_copies_here == 0 {
            let (segment_index, _) = position_target(&self.layout, &scan);
            return self.finish(Err(ScanError::SegmentUnreadable { segment_index }));
        }
        let last_barrier = scan.segments.iter().rposition(|segment| segment.barrier);
        self.finish(Ok(ScannedLog {
            superblock: scan.superblock,
            superblock_units: scan.superblock_units,
            segments: scan.segments,
            last_barrier,
            corrupt_copies_detected: scan.corrupt_copies_detected,
            io_errors: scan.io_errors,
            stale_mirrors: scan.stale_mirrors,
            in_sync_unavailable: scan.in_sync_unavailable,
        }));
    }
}

/// Segment index and expected sequence at the scan's current position.
fn position_target(layout: &LogLayout, scan: &SegmentScan) -> (u32, u64) {
    let index = (scan.superblock.head_segment as u64 + scan.position as u64) % layout.segments_count as u64;
    (index as u32, scan.superblock.head_sequence.wrapping_add(scan.position as u64))
}

/// Device offset of the part expected next.
fn part_offset(layout: &LogLayout, scan: &SegmentScan) -> u64 {
    let (index, _) = position_target(layout, scan);
    layout.segment_offset(index) + scan.first_block as u64 * layout.segment.block_size as u64
}

impl IoMachine for LogScanner {
    fn poll_io(&mut self) -> Option<DeviceIo> {
        let (io, pending) = self.queued.pop_front()?;
        self.in_flight.push((io.id, pending));
        Some(io)
    }

    fn handle_io_completion(&mut self, _now: Nanos, id: IoId, status: IoStatus) {
        let position = self.in_flight.iter().position(|(pending_id, _)| *pending_id == id);
        let (_, pending) = self.in_flight.swap_remove(position.expect("completion for an unknown command"));
        if self.result.is_some() {
            return;
        }
        match pending {
            Pending::SuperblockCopy(copy) => self.handle_superblock_read(copy, status),
            Pending::Window(window) => self.handle_window_read(window, status),
            Pending::PartFirstBlock(window) => self.handle_part_first_block(window, status),
            Pending::PartRest(window) => self.handle_part_rest(window, status),
        }
    }

    fn io_memory_mut(&mut self, region: u32) -> &mut [u8] {
        match region {
            REGION_SUPERBLOCKS => self.superblock_memory.as_mut_slice(),
            REGION_WINDOWS => self.windows.memory_mut(),
            _ => panic!("log scanner has no region {region}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_log::*;
    use super::*;
    use crate::io::HeapAllocator;

    fn sequences(scanned: &ScannedLog) -> Vec<(u32, u64)> {
        scanned.segments.iter().map(|s| (s.segment_index, s.sequence)).collect()
    }

    #[test]
    fn follows_sequences_around_the_ring_and_stops_at_a_stale_segment() {
        let mut image = LogImage::new(layout(6), 1);
        image.write_superblock(3, 4, 100);
        image.write_segment(4, &spec(100, false, &[(1, 1)], &[]));
        image.write_segment(5, &spec(101, true, &[(2, 1), HOLE], &[7]));
        image.write_segment(0, &spec(102, true, &[(3, 1)], &[]));
        image.write_segment(1, &spec(103, false, &[(4, 1)], &[]));
        // Left from the previous lap of the ring.
        image.write_segment(2, &spec(98, true, &[(5, 1)], &[]));
        let mut devices = image.into_devices();
        let scanned = scan(&mut devices, layout(6), &[0]).unwrap();
        assert_eq!(sequences(&scanned), vec![(4, 100), (5, 101), (0, 102), (1, 103)]);
        assert_eq!(scanned.last_barrier, Some(2));
        assert_eq!(scanned.segments[1].lbas, vec![2, crate::format::LBA_NONE]);
        assert_eq!(scanned.segments[1].revokes, vec![7]);
        assert_eq!((scanned.corrupt_copies_detected, scanned.io_errors), (0, 0));
        assert_eq!(scanned.superblock_units, vec![Some(1)]);
    }

    /// Mirror 1 fell out of sync after part 100: the newest superblock
    /// (on mirror 0) no longer counts it. Where it holds a valid-looking
    /// part of its own (left by a crashed run), the scan must still take
    /// mirror 0's, even with mirror 1 preferred.
    fn image_with_a_stale_mirror() -> LogImage {
        let mut image = LogImage::new(layout(6), 2);
        image.write_superblock(3, 0, 100);
        let newest = LogSuperblock { in_sync_mask: 0b01, ..image.superblock(4, 0, 100, 0) };
        image.write_superblock_unit(0, 0, &newest);
        image.write_segment(0, &spec(100, true, &[(1, 1)], &[]));
        image.write_segment_on(0, 1, &spec(101, true, &[(2, 2)], &[]));
        image.write_segment_on(1, 1, &spec(101, true, &[(3, 9)], &[]));
        image.write_segment_on(0, 2, &spec(102, true, &[(4, 2)], &[]));
        image
    }

    #[test]
    fn reads_parts_only_from_mirrors_the_newest_superblock_counts_in_sync() {
        let mut devices = image_with_a_stale_mirror().into_devices();
        let scanned = scan(&mut devices, layout(6), &[1, 0]).unwrap();
        assert_eq!(sequences(&scanned), vec![(0, 100), (1, 101), (2, 102)]);
        assert!(scanned.segments.iter().all(|s| s.mirror == 0), "{scanned:?}");
        assert_eq!(scanned.segments[1].lbas, vec![2]);
        assert_eq!(scanned.stale_mirrors, vec![1]);
        assert!(!scanned.in_sync_unavailable);
        assert_eq!(scanned.superblock.in_sync_mask, 0b01);
        // Its parts are never even read.
        assert!(devices.history().iter().all(|io| io.device != DeviceRole::Log(1) || io.offset_bytes < 8192));
    }

    #[test]
    fn with_no_mirror_in_sync_at_hand_the_stale_ones_are_scanned_and_said_to_be() {
        let mut image = image_with_a_stale_mirror();
        // Mirror 1 got the superblock that left it out while it re-synced.
        let newest = LogSuperblock { in_sync_mask: 0b01, ..image.superblock(4, 0, 100, 1) };
        image.write_superblock_unit(1, 0, &newest);
        let mut devices = image.into_devices();
        let scanned = scan(&mut devices, layout(6), &[1]).unwrap();
        assert!(scanned.in_sync_unavailable);
        assert_eq!(scanned.stale_mirrors, vec![1]);
        assert_eq!(sequences(&scanned), vec![(0, 100), (1, 101)]);
        assert_eq!(scanned.segments[1].lbas, vec![3]);
    }

    /// A mirror read in another slot than the one it had (a takeover of
    /// the log's mirror 1 reads it as its only log, slot 0) is judged by
    /// the index its own superblock gives it: stale here, though the mask
    /// counts slot 0 in sync.
    #[test]
    fn a_mirror_in_another_slot_is_judged_by_its_own_index() {
        let mut image = image_with_a_stale_mirror();
        let newest = LogSuperblock { in_sync_mask: 0b01, ..image.superblock(4, 0, 100, 1) };
        image.write_superblock_unit(1, 0, &newest);
        let mut devices = crate::driver::mem::MemDevices::new();
        devices.insert(DeviceRole::Log(0), image.mirrors[1].clone());
        let scanned = scan(&mut devices, layout(6), &[0]).unwrap();
        assert!(scanned.in_sync_unavailable, "{scanned:?}");
        assert_eq!(scanned.stale_mirrors, vec![0]);
        // In sync by its own index, it is not.
        let in_sync = LogSuperblock { in_sync_mask: 0b10, ..newest };
        devices.device_mut(DeviceRole::Log(0)).unwrap()[..UNIT_BYTES].fill(0);
        in_sync.encode(&mut devices.device_mut(DeviceRole::Log(0)).unwrap()[..UNIT_BYTES]);
        let scanned = scan(&mut devices, layout(6), &[0]).unwrap();
        assert!(!scanned.in_sync_unavailable && scanned.stale_mirrors.is_empty(), "{scanned:?}");
    }

    #[test]
    fn follows_parts_within_a_segment_then_into_the_next() {
        let mut image = LogImage::new(layout(6), 1);
        image.write_superblock(1, 2, 40);
        // Segment 2: three parts (a barrier after one block, revokes only,
        // then two blocks ending the segment); segment 3: two parts, open.
        image.write_parts(2, &[spec(40, true, &[(1, 1)], &[]), spec(40, false, &[], &[1]), spec(40, true, &[(2, 1), (3, 1)], &[])], true);
        image.write_parts(3, &[spec(41, true, &[(4, 1)], &[]), spec(41, false, &[(5, 1)], &[])], false);
        // A part of segment 3 from an earlier run, where no part of this run
        // says one starts (after a part that ended nothing): never reached.
        let stale = image.encode_part(3, 3, 6, &spec(41, true, &[(6, 1)], &[]), true, INSTANCE_ID);
        let offset = image.layout.segment_offset(3) as usize + 6 * BLOCK_SIZE as usize;
        image.mirrors[0][offset..offset + stale.len()].copy_from_slice(&stale);
        let mut devices = image.into_devices();
        let scanned = scan(&mut devices, layout(6), &[0]).unwrap();
        let places: Vec<(u64, u32, u32, bool)> =
            scanned.segments.iter().map(|s| (s.sequence, s.part, s.first_block, s.segment_end)).collect();
        assert_eq!(places, vec![(40, 0, 0, false), (40, 1, 2, false), (40, 2, 3, true), (41, 0, 0, false), (41, 1, 2, false)]);
        assert_eq!(scanned.last_barrier, Some(3));
        assert_eq!(scanned.segments[1].revokes, vec![1]);
    }

    #[test]
    fn follows_a_gap_after_a_part() {
        let mut image = LogImage::new(layout(6), 1);
        image.write_superblock(1, 2, 40);
        // Segment 2: a barrier of one block, then 3 blocks skipped, then a
        // barrier ending the segment; a part where no gap was said to be is
        // left out.
        let gapped = SegmentSpec { gap_blocks: 3, ..spec(40, true, &[(1, 1)], &[]) };
        image.write_parts(2, &[gapped, spec(40, true, &[(2, 1)], &[])], true);
        let stray = image.encode_part(2, 1, 2, &spec(40, true, &[(3, 1)], &[]), true, INSTANCE_ID);
        let offset = image.layout.segment_offset(2) as usize + 2 * BLOCK_SIZE as usize;
        image.mirrors[0][offset..offset + stray.len()].copy_from_slice(&stray);
        image.write_parts(3, &[spec(41, true, &[(4, 1)], &[])], true);
        let mut devices = image.into_devices();
        let scanned = scan(&mut devices, layout(6), &[0]).unwrap();
        let places: Vec<(u64, u32, u32, u32, Vec<u64>)> =
            scanned.segments.iter().map(|s| (s.sequence, s.part, s.first_block, s.gap_blocks, s.lbas.clone())).collect();
        assert_eq!(places, vec![(40, 0, 0, 3, vec![1]), (40, 1, 5, 0, vec![2]), (41, 0, 0, 0, vec![4])]);
    }

    #[test]
    fn never_goes_from_a_later_run_to_an_earlier_one() {
        let mut image = LogImage::new(layout(6), 1);
        let mut superblock = image.superblock(3, 0, 10, 0);
        superblock.run = 2;
        image.write_superblock_unit(0, 1, &superblock);
        // Run 1 wrote segments 10 and 11; 11 was lost, 12 landed (left past
        // the hole). Run 2 restarted, ended 10 and wrote 11 anew: run 1's 12
        // must not extend the log, nor may a part claiming run 3 start it.
        image.write_parts(0, &[spec(10, true, &[(1, 1)], &[]), SegmentSpec { run: 2, ..spec(10, false, &[], &[]) }], true);
        image.write_parts(1, &[SegmentSpec { run: 2, ..spec(11, true, &[(2, 2)], &[]) }], true);
        image.write_parts(2, &[spec(12, true, &[(3, 1)], &[])], true);
        let mut devices = image.into_devices();
        let scanned = scan(&mut devices, layout(6), &[0]).unwrap();
        assert_eq!(sequences(&scanned), vec![(0, 10), (0, 10), (1, 11)]);
        let mut image = LogImage::new(layout(6), 1);
        image.write_superblock_unit(0, 1, &superblock);
        image.write_parts(0, &[SegmentSpec { run: 3, ..spec(10, true, &[(1, 1)], &[]) }], true);
        let mut devices = image.into_devices();
        assert!(scan(&mut devices, layout(6), &[0]).unwrap().segments.is_empty());
    }

    #[test]
    fn a_part_out_of_place_ends_the_run() {
        let mut image = LogImage::new(layout(6), 1);
        image.write_superblock(1, 0, 10);
        image.write_parts(0, &[spec(10, true, &[(1, 1)], &[])], false);
        // Right segment and sequence, but the part claims another place.
        let wrong = image.encode_part(0, 2, 2, &spec(10, true, &[(2, 1)], &[]), true, INSTANCE_ID);
        let offset = image.layout.segment_offset(0) as usize + 2 * BLOCK_SIZE as usize;
        image.mirrors[0][offset..offset + wrong.len()].copy_from_slice(&wrong);
        let mut devices = image.into_devices();
        let scanned = scan(&mut devices, layout(6), &[0]).unwrap();
        assert_eq!(scanned.segments.len(), 1);
    }

    #[test]
    fn takes_the_newest_superblock_over_units_and_mirrors() {
        let mut image = LogImage::new(layout(6), 2);
        let old = image.superblock(3, 0, 1, 0);
        let newer = image.superblock(4, 1, 2, 0);
        let newest = image.superblock(5, 2, 3, 1);
        image.write_superblock_unit(0, 0, &old);
        image.write_superblock_unit(0, 1, &newer);
        image.write_superblock_unit(1, 0, &newest);
        image.write_segment(2, &spec(3, true, &[(1, 1)], &[]));
        let mut devices = image.into_devices();
        let scanned = scan(&mut devices, layout(6), &[0, 1]).unwrap();
        assert_eq!(scanned.superblock, newest);
        assert_eq!(scanned.superblock_units, vec![Some(1), Some(0)]);
        assert_eq!(sequences(&scanned), vec![(2, 3)]);
    }

    #[test]
    fn falls_back_to_another_mirror_on_a_corrupt_copy() {
        let mut image = LogImage::new(layout(6), 2);
        image.write_superblock(1, 0, 10);
        for index in 0..3 {
            image.write_segment(index, &spec(10 + index as u64, true, &[(index as u64, 1)], &[]));
        }
        image.corrupt_segment(0, 1, 5000);
        // A torn tail: the next segment is damaged on both mirrors.
        image.write_segment(3, &spec(13, true, &[(9, 1)], &[]));
        image.corrupt_segment(0, 3, 20);
        image.corrupt_segment(1, 3, 20);
        let mut devices = image.into_devices();
        let scanned = scan(&mut devices, layout(6), &[0, 1]).unwrap();
        assert_eq!(sequences(&scanned), vec![(0, 10), (1, 11), (2, 12)]);
        let mirrors: Vec<u8> = scanned.segments.iter().map(|s| s.mirror).collect();
        assert_eq!(mirrors, vec![0, 1, 0]);
        assert_eq!(scanned.corrupt_copies_detected, 1);
    }

    /// A log of several parts a segment, the head in the middle of the ring.
    fn image_of_packed_parts() -> LogImage {
        let mut image = LogImage::new(layout(6), 2);
        image.write_superblock(1, 4, 20);
        for (position, index) in [4, 5, 0, 1].into_iter().enumerate() {
            let sequence = 20 + position as u64;
            let first = spec(sequence, false, &[(position as u64, 1), (9, position as u64)], &[]);
            image.write_parts(index, &[first, spec(sequence, true, &[(10 + position as u64, 1)], &[])], true);
        }
        image
    }

    fn expected_places(scanned: &ScannedLog) -> Vec<(u32, u64, u32)> {
        scanned.segments.iter().map(|s| (s.segment_index, s.sequence, s.part)).collect()
    }

    /// Carries out `io`, issued by `scanner` (commands the test holds back
    /// until it has seen what was issued at once).
    fn execute(devices: &mut crate::driver::mem::MemDevices, scanner: &mut LogScanner, io: &DeviceIo) {
        let IoBuffer::Engine { region, offset_bytes } = io.buffer else { unreachable!("scanner reads into its memory") };
        let memory = &mut scanner.io_memory_mut(region)[offset_bytes as usize..][..io.len_bytes as usize];
        let status = crate::driver::SyncDevices::execute(devices, io, memory);
        scanner.handle_io_completion(0, io.id, status);
    }

    /// Once the superblocks are read, the scan reads whole segments of the
    /// preferred mirror ahead of itself, in ring order from the head, all
    /// at once, and follows every part from them: no other read.
    #[test]
    fn reads_whole_segments_ahead_and_follows_the_parts_in_memory() {
        let mut devices = image_of_packed_parts().into_devices();
        let mut scanner = LogScanner::new(layout(6), vec![0, 1], &mut HeapAllocator);
        for _ in 0..4 {
            assert!(crate::driver::step(&mut devices, &mut scanner, 0).unwrap());
        }
        let segment_bytes = layout(6).segment.segment_bytes as u64;
        let mut issued = Vec::new();
        while let Some(io) = scanner.poll_io() {
            issued.push(io);
        }
        let places: Vec<(DeviceRole, u64, u64)> = issued.iter().map(|io| (io.device, io.offset_bytes, io.len_bytes)).collect();
        let whole = |index: u32| (DeviceRole::Log(0), layout(6).segment_offset(index), segment_bytes);
        assert_eq!(places, [4, 5, 0, 1, 2, 3].map(whole).to_vec(), "the whole ring is 6 segments");
        for io in issued {
            execute(&mut devices, &mut scanner, &io);
        }
        // Where the run ends (segment 2 was never written), mirror 1's copy
        // is read too: whole segments again.
        let mut later = Vec::new();
        while let Some(io) = scanner.poll_io() {
            later.push((io.device, io.offset_bytes, io.len_bytes));
            execute(&mut devices, &mut scanner, &io);
        }
        let on_mirror_1 = |index: u32| (DeviceRole::Log(1), layout(6).segment_offset(index), segment_bytes);
        assert_eq!(later, vec![on_mirror_1(2)]);
        let scanned = scanner.take_result().unwrap().unwrap();
        let mut expected = Vec::new();
        for (position, index) in [4u32, 5, 0, 1].into_iter().enumerate() {
            expected.extend([(index, 20 + position as u64, 0), (index, 20 + position as u64, 1)]);
        }
        assert_eq!(expected_places(&scanned), expected);
        assert_eq!(scanned.last_barrier, Some(7));
        assert_eq!((scanned.corrupt_copies_detected, scanned.io_errors), (0, 0));
    }

    /// A bad block anywhere in a segment fails its whole read; the parts
    /// of that segment are then read one at a time from the same mirror,
    /// and only a part that cannot be read itself goes to the other one.
    #[test]
    fn a_segment_that_fails_whole_is_read_part_by_part() {
        struct WholeSegmentsFail(crate::driver::mem::MemDevices, u64);
        impl crate::driver::SyncDevices for WholeSegmentsFail {
            fn execute(&mut self, io: &DeviceIo, data: &mut [u8]) -> IoStatus {
                if io.device == DeviceRole::Log(0) && io.len_bytes == self.1 {
                    return IoStatus::Error;
                }
                self.0.execute(io, data)
            }
        }
        let segment_bytes = layout(6).segment.segment_bytes as u64;
        let mut devices = WholeSegmentsFail(image_of_packed_parts().into_devices(), segment_bytes);
        let mut scanner = LogScanner::new(layout(6), vec![0, 1], &mut HeapAllocator);
        crate::driver::pump(&mut devices, &mut scanner).unwrap();
        let scanned = scanner.take_result().unwrap().unwrap();
        assert_eq!(expected_places(&scanned).len(), 8);
        assert!(scanned.segments.iter().all(|s| s.mirror == 0), "{scanned:?}");
        // One error a segment of the run and one for the segment after it.
        assert_eq!(scanned.io_errors, 5);
        // After the superblocks: per part its first block, then the rest of
        // it (header and data: what its checksum covers); then the first
        // block where the run ends, and the other mirror's segment there.
        let reads: Vec<(DeviceRole, u64)> = devices.0.history()[4..].iter().map(|r| (r.device, r.len_bytes)).collect();
        let part = [(DeviceRole::Log(0), BLOCK_SIZE as u64), (DeviceRole::Log(0), 2 * BLOCK_SIZE as u64)];
        let single = [(DeviceRole::Log(0), BLOCK_SIZE as u64), (DeviceRole::Log(0), BLOCK_SIZE as u64)];
        let mut expected = [part, single].concat().repeat(4);
        expected.extend([(DeviceRole::Log(0), BLOCK_SIZE as u64), (DeviceRole::Log(1), segment_bytes)]);
        assert_eq!(reads, expected);
    }

    #[test]
    fn rejects_misplaced_and_foreign_segments() {
        let mut image = LogImage::new(layout(6), 1);
        image.write_superblock(1, 0, 10);
        image.write_segment(0, &spec(10, true, &[(1, 1)], &[]));
        // Right sequence, wrong place (a misdirected write) ...
        let misplaced = image.encode_segment(2, &spec(11, true, &[(2, 1)], &[]), INSTANCE_ID);
        let offset = image.layout.segment_offset(1) as usize;
        image.mirrors[0][offset..offset + misplaced.len()].copy_from_slice(&misplaced);
        let mut devices = image.into_devices();
        assert_eq!(sequences(&scan(&mut devices, layout(6), &[0]).unwrap()), vec![(0, 10)]);

        // ... or another instance's segment.
        let mut image = LogImage::new(layout(6), 1);
        image.write_superblock(1, 0, 10);
        image.write_segment(0, &spec(10, true, &[(1, 1)], &[]));
        let foreign = image.encode_segment(1, &spec(11, true, &[(2, 1)], &[]), INSTANCE_ID + 1);
        image.mirrors[0][offset..offset + foreign.len()].copy_from_slice(&foreign);
        let mut devices = image.into_devices();
        assert_eq!(sequences(&scan(&mut devices, layout(6), &[0]).unwrap()), vec![(0, 10)]);
    }

    #[test]
    fn never_scans_more_than_the_ring() {
        let mut image = LogImage::new(layout(4), 1);
        image.write_superblock(1, 2, 50);
        for position in 0..4u32 {
            image.write_segment((2 + position) % 4, &spec(50 + position as u64, position == 3, &[(1, 1)], &[]));
        }
        let mut devices = image.into_devices();
        let scanned = scan(&mut devices, layout(4), &[0]).unwrap();
        assert_eq!(sequences(&scanned), vec![(2, 50), (3, 51), (0, 52), (1, 53)]);
        assert_eq!(scanned.last_barrier, Some(3));
    }

    #[test]
    fn a_failing_mirror_is_skipped() {
        let mut image = LogImage::new(layout(6), 2);
        image.write_superblock(1, 0, 10);
        image.write_segment(0, &spec(10, true, &[(1, 1)], &[]));
        let mut devices = image.into_devices();
        devices.set_failing(DeviceRole::Log(0), true);
        let scanned = scan(&mut devices, layout(6), &[0, 1]).unwrap();
        assert_eq!(sequences(&scanned), vec![(0, 10)]);
        assert_eq!(scanned.segments[0].mirror, 1);
        assert!(scanned.io_errors >= 3, "two superblock reads and at least one segment read failed");
        assert_eq!(scanned.corrupt_copies_detected, 0);
    }

    #[test]
    fn reports_each_error() {
        let mut image = LogImage::new(layout(6), 2);
        image.write_superblock(1, 0, 10);
        image.write_segment(0, &spec(10, true, &[(1, 1)], &[]));
        let mut devices = image.into_devices();

        assert_eq!(scan(&mut devices, layout(6), &[]), Err(ScanError::NoMirrors));
        assert!(matches!(scan(&mut devices, layout(7), &[0]), Err(ScanError::GeometryMismatch(_))));

        devices.set_failing(DeviceRole::Log(0), true);
        assert_eq!(scan(&mut devices, layout(6), &[0]), Err(ScanError::SuperblocksUnreadable));
        devices.set_failing(DeviceRole::Log(0), false);

        // Readable superblocks, then every mirror fails on the first segment.
        let mut scanner = LogScanner::new(layout(6), vec![0, 1], &mut HeapAllocator);
        for _ in 0..4 {
            assert!(crate::driver::step(&mut devices, &mut scanner, 0).unwrap());
        }
        devices.set_failing(DeviceRole::Log(0), true);
        devices.set_failing(DeviceRole::Log(1), true);
        devices.pump(&mut scanner).unwrap();
        assert_eq!(scanner.result(), Some(&Err(ScanError::SegmentUnreadable { segment_index: 0 })));
        devices.set_failing(DeviceRole::Log(0), false);
        devices.set_failing(DeviceRole::Log(1), false);

        let other = LogSuperblock { instance_id: 99, write_seq: 2, ..devices_superblock(&devices, 1) };
        other.encode(&mut devices.device_mut(DeviceRole::Log(1)).unwrap()[..UNIT_BYTES]);
        let mismatch = scan(&mut devices, layout(6), &[0, 1]);
        assert_eq!(mismatch, Err(ScanError::InstanceMismatch { expected: INSTANCE_ID, found: 99, mirror: 1 }));

        // Told the instance, the scan leaves the other one's mirror out.
        let mut scanner = LogScanner::new(layout(6), vec![0, 1], &mut HeapAllocator);
        scanner.expect_instance(INSTANCE_ID);
        let scanned = run_scanner(&mut devices, scanner).expect("mirror 0 alone");
        assert_eq!(scanned.superblock_units[1], None, "mirror 1 left out");
        assert!(scanned.segments.iter().all(|s| s.mirror == 0));
        let mut scanner = LogScanner::new(layout(6), vec![1], &mut HeapAllocator);
        scanner.expect_instance(INSTANCE_ID);
        assert_eq!(run_scanner(&mut devices, scanner), Err(ScanError::InstanceMismatch { expected: INSTANCE_ID, found: 99, mirror: 1 }));

        // A mirror of the instance whose log was replayed: the cache that
        // expects it is stale, whatever the other mirror holds. A scan that
        // is told no instance (`hhc recover`, `hhc log inspect`) reads it.
        let replayed = LogSuperblock { replayed: true, write_seq: 3, mirror_index: 1, ..devices_superblock(&devices, 0) };
        replayed.encode(&mut devices.device_mut(DeviceRole::Log(1)).unwrap()[..UNIT_BYTES]);
        let mut scanner = LogScanner::new(layout(6), vec![0, 1], &mut HeapAllocator);
        scanner.expect_instance(INSTANCE_ID);
        assert_eq!(run_scanner(&mut devices, scanner), Err(ScanError::Replayed { mirror: 1 }));
        assert!(scan(&mut devices, layout(6), &[1]).is_ok());

        // A mirror formatted by the instance that took this log over.
        let successor = LogSuperblock { instance_id: 77, previous_instance: INSTANCE_ID, write_seq: 4, replayed: false, ..replayed };
        successor.encode(&mut devices.device_mut(DeviceRole::Log(1)).unwrap()[..UNIT_BYTES]);
        let mut scanner = LogScanner::new(layout(6), vec![0, 1], &mut HeapAllocator);
        scanner.expect_instance(INSTANCE_ID);
        assert_eq!(run_scanner(&mut devices, scanner), Err(ScanError::TakenOver { mirror: 1, by: 77 }));
        // The successor's own warm start reads it.
        let mut scanner = LogScanner::new(layout(6), vec![1], &mut HeapAllocator);
        scanner.expect_instance(77);
        assert!(run_scanner(&mut devices, scanner).is_ok());

        for mirror in [0, 1] {
            devices.device_mut(DeviceRole::Log(mirror)).unwrap()[..2 * UNIT_BYTES].fill(0);
        }
        assert_eq!(scan(&mut devices, layout(6), &[0, 1]), Err(ScanError::NoValidSuperblock));
    }

    fn devices_superblock(devices: &crate::driver::mem::MemDevices, mirror: u8) -> LogSuperblock {
        let bytes = devices.device(DeviceRole::Log(mirror)).unwrap();
        super::super::newest_superblock([&bytes[..UNIT_BYTES], &bytes[UNIT_BYTES..2 * UNIT_BYTES]]).unwrap().1
    }
}
