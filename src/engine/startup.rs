//! Bringing an instance up: `Format` writes a fresh cache superblock, empty
//! metadata (both slots) and log superblocks; `Open` (warm restart) loads the
//! metadata, scans the log to rebuild its state, ends the last scanned
//! segment on the mirrors and invalidates the segments just past it, where
//! parts of the previous run may have landed out of order — a later scan
//! must never chain into them.
//!
//! Over 600 lines because the start-up is one state machine (format, load,
//! scan, repair, tail, restart flush) whose phases share its state.

use super::{Engine, EngineState, FailKind, FailReason, Op, StartMode, META_POOL_PAGES};
use crate::cache::{flag, BlockState, DurableEntry, Through};
use crate::format::{
    CacheSuperblock, MetaEntry, MetaPageHeader, OwnerRecord, CACHE_HEADER_UNITS, CACHE_OWNER_RECORD_UNIT, LBA_NONE,
    META_ENTRIES_PER_PAGE, UNIT_BYTES,
};
use crate::io::{DeviceIo, DeviceRole, IoBuffer, IoId, IoKind, IoMachine, IoStatus, HeapAllocator};
use crate::recovery::{LogScanner, ScanError, ScannedLog};
use std::collections::HashMap;

/// Scanner regions are exposed to drivers above this number.
const SCANNER_REGION_BASE: u32 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    FormatCache { next_page: u32 },
    FormatFlush,
    FormatLog,
    FormatLogFlush,
    ReadSuperblock,
    ReadPages { first_page: u32 },
    ScanLog,
    /// Copying the newest segments from the mirror whose copy was valid to
    /// every other healthy mirror (read, then write).
    RepairRead,
    RepairWrite,
    CleanTail,
    CleanTailFlush,
}

/// Sealed parts that follow each other on one mirror, to copy from it to
/// every other healthy mirror.
#[derive(Clone, Copy, Debug)]
struct PartCopy {
    sequence: u64,
    first_block: u32,
    /// The mirror holding the valid copy.
    source: u8,
    bytes: u64,
}

pub(super) struct Startup {
    phase: Phase,
    pending: u32,
    failed: Option<FailReason>,
    scanner: Option<LogScanner>,
    /// Engine I/O id -> scanner I/O id.
    scanner_ids: HashMap<IoId, IoId>,
    /// Parts to copy to every healthy mirror.
    repair: Vec<PartCopy>,
    /// The last scanned part, where it did not end its segment: (sequence,
    /// its part number, the block after it). The restart writes an empty
    /// part there that ends the segment, so that a later scan goes on into
    /// the segment the log continues in.
    close_segment: Option<(u64, u32, u32)>,
}

impl Startup {
    pub fn io_memory_mut(&mut self, region: u32) -> Option<&mut [u8]> {
        let scanner = self.scanner.as_mut()?;
        (region >= SCANNER_REGION_BASE).then(|| scanner.io_memory_mut(region - SCANNER_REGION_BASE))
    }
}

impl Engine {
    pub(super) fn begin_startup(&mut self, mode: StartMode) {
        let phase = match mode {
            StartMode::Format => Phase::FormatCache { next_page: 0 },
            StartMode::Open => Phase::ReadSuperblock,
        };
        self.startup = Some(Startup {
            phase,
            pending: 0,
            failed: None,
            scanner: None,
            scanner_ids: HashMap::new(),
            repair: Vec::new(),
            close_segment: None,
        });
        self.enter_phase(phase);
    }

    fn set_phase(&mut self, phase: Phase) {
        self.startup.as_mut().unwrap().phase = phase;
        self.enter_phase(phase);
    }

    fn startup_submit(&mut self, device: DeviceRole, kind: IoKind, offset: u64, len: u64, buffer: IoBuffer) {
        self.startup.as_mut().unwrap().pending += 1;
        self.submit(Op::Startup, device, kind, offset, len, buffer);
    }

    fn enter_phase(&mut self, phase: Phase) {
        match phase {
            Phase::FormatCache { next_page } => self.format_cache(next_page),
            Phase::FormatFlush => self.startup_submit(DeviceRole::Cache, IoKind::Flush, 0, 0, IoBuffer::None),
            Phase::FormatLog => self.format_log(),
            Phase::FormatLogFlush | Phase::CleanTailFlush => self.flush_mirrors(),
            Phase::ReadSuperblock => {
                // The superblock and the owner record's copies, units 0..3.
                let buffer = IoBuffer::Engine { region: self.regions.meta_pool, offset_bytes: 0 };
                let len = CACHE_HEADER_UNITS * UNIT_BYTES as u64;
                self.startup_submit(DeviceRole::Cache, IoKind::Read, 0, len, buffer);
            }
            Phase::ReadPages { first_page } => self.read_pages(first_page),
            Phase::ScanLog => self.start_scan(),
            Phase::CleanTail => self.clean_tail(),
            Phase::RepairRead => self.repair_read(),
            Phase::RepairWrite => self.repair_write(),
        }
        if self.startup.as_ref().is_some_and(|s| s.pending == 0 && s.scanner.is_none()) {
            self.phase_done();
        }
    }

    pub(super) fn startup_io_done(&mut self, id: IoId, status: IoStatus) {
        let Some(startup) = self.startup.as_mut() else { return };
        if let Some(scanner_id) = startup.scanner_ids.remove(&id) {
            let now = self.now;
            startup.scanner.as_mut().unwrap().handle_io_completion(now, scanner_id, status);
            self.pump_scanner();
            return;
        }
        assert!(startup.pending > 0, "start-up command done with none pending");
        startup.pending -= 1;
        if status != IoStatus::Ok && startup.failed.is_none() {
            startup.failed = Some(FailReason::new(FailKind::DeviceError, format!("device error during {:?}", startup.phase)));
        }
        if startup.pending == 0 {
            self.phase_done();
        }
    }

    fn phase_done(&mut self) {
        let startup = self.startup.as_ref().unwrap();
        if let Some(reason) = startup.failed.clone() {
            self.startup = None;
            self.state = EngineState::Failed(reason);
            return;
        }
        let next = match startup.phase {
            Phase::FormatCache { next_page } if next_page < self.cache_layout.meta_pages_count => {
                Phase::FormatCache { next_page }
            }
            Phase::FormatCache { .. } => Phase::FormatFlush,
            Phase::FormatFlush if self.config.mirrors_count > 0 => Phase::FormatLog,
            Phase::FormatLog => Phase::FormatLogFlush,
            Phase::CleanTail => Phase::CleanTailFlush,
            Phase::FormatFlush | Phase::FormatLogFlush | Phase::CleanTailFlush => return self.startup_finished(),
            Phase::ReadSuperblock => match self.check_superblock() {
                Ok(()) => Phase::ReadPages { first_page: 0 },
                Err(reason) => {
                    self.startup = None;
                    self.state = EngineState::Failed(FailReason::new(FailKind::Format, reason));
                    return;
                }
            },
            Phase::ReadPages { first_page } => {
                let next_page = self.load_pages(first_page);
                if next_page < self.cache_layout.meta_pages_count {
                    Phase::ReadPages { first_page: next_page }
                } else {
                    self.cache.rebuild_free_list();
                    if self.config.mirrors_count > 0 {
                        Phase::ScanLog
                    } else {
                        return self.startup_finished();
                    }
                }
            }
            Phase::ScanLog | Phase::RepairWrite => {
                let startup = self.startup.as_mut().unwrap();
                if startup.phase == Phase::RepairWrite {
                    startup.repair.pop();
                }
                if startup.repair.is_empty() {
                    Phase::CleanTail
                } else {
                    Phase::RepairRead
                }
            }
            Phase::RepairRead => Phase::RepairWrite,
        };
        self.set_phase(next);
    }

    fn startup_finished(&mut self) {
        let warm = self.startup.as_ref().is_some_and(|s| matches!(s.phase, Phase::CleanTailFlush | Phase::ReadPages { .. }));
        self.startup = None;
        self.state = EngineState::Ready;
        if self.config.policy == crate::config::Policy::WriteBackOrdered {
            self.ordered_start();
        }
        // Superseded blocks restored from disk are invalidated by the first commit.
        for block in self.cache.superseded_blocks() {
            self.commit.mark_block(block);
        }
        // What the start-up wrote to the mirrors is durable (flushed).
        self.superblock_masks_settled();
        if warm {
            // The log may hold what an earlier `hhc` run logged; only a flush
            // that wrote everything back may drop it. A log with no part
            // past its head has nothing a replay would take: retiring it
            // would write the whole dirty cache back before serving.
            let log_holds_parts = self.log.tail_sequence > self.log.head_sequence;
            self.log_work.retiring =
                self.config.policy != crate::config::Policy::Hhc && self.config.mirrors_count > 0 && log_holds_parts;
            self.drop_copies_after_crash();
            self.resync_stale_mirrors();
            if self.config.mirrors_count > 0 && self.log.writable_mirrors().next().is_some() {
                // The scan took the newest superblock over every mirror, but
                // a power loss during a superblock write (a log restarted at
                // a switch to `hhc`) can leave an older one, with an older
                // head, on another mirror: what is logged from now on follows
                // the newest head, and a replay from that mirror alone would
                // start at its head and miss it all (torture seed 33306,
                // wb-flush). So the head is written to every mirror again,
                // and the restart flush completes only once it is durable
                // (`log_restart_head`).
                let head = self.log.head_sequence;
                self.write_superblock(head, true);
                self.log_work.restarted_head = head;
                self.log_work.superblock_durable_head = 0;
            }
            self.start_restart_flush();
        }
    }

    /// A mirror present at the start but outside the newest superblock's
    /// in-sync mask stopped receiving parts during an earlier run (it
    /// failed, was removed or detached) and has holes where the others have
    /// parts. It was kept out of the start-up (no part read from it, no
    /// repair to it, nothing written to it); now it joins as an attached
    /// mirror does: syncing, every dirty block logged again, healthy once
    /// every live entry lies in segments written to it. With no in-sync
    /// mirror left the log starts over on it.
    fn resync_stale_mirrors(&mut self) {
        for mirror in std::mem::take(&mut self.stale_mirrors_at_start) {
            log::warn!("hhc: log mirror {mirror} is stale (it missed log writes of an earlier run); re-syncing it");
            self.stats.stale_mirrors_resynced += 1;
            if self.mutation() == crate::config::Mutation::StaleMirrorHealthy {
                self.log.mirrors[mirror as usize] = crate::hdd_log::MirrorHealth::Healthy;
                continue;
            }
            self.join_mirror(mirror);
        }
    }

    /// Write-through (and passthrough) send writes to the backing device
    /// directly, which holds every acknowledged write: a write in flight at
    /// the crash may have landed there but not in the cache (an older clean
    /// copy), or in the cache but not there (a write-through copy, possibly
    /// older than what the backing device has), so neither is trusted after
    /// a crash. Other dirty blocks are write-back data of a policy whose
    /// switch away did not finish: they are written back first, as that
    /// switch would have. Whatever the policy now, copies whose entries say
    /// write-through (made while writes went through) are not trusted
    /// either: the backing device may have lost their data with the power,
    /// or a later write-through may have landed there before its own copy's
    /// entry. Older entries of a dropped copy go with it, or a later restart
    /// would find them.
    fn drop_copies_after_crash(&mut self) {
        let write_back = self.config.policy.is_write_back();
        let mut dirty = 0;
        for block in 0..self.cache.blocks_count() {
            let through = self.cache.through(block) != Through::None;
            self.cache.set_through(block, Through::None);
            if self.cache.state(block) != BlockState::Mapped || write_back && !through {
                continue;
            }
            if self.cache.has(block, flag::DIRTY) && !through {
                dirty += 1;
            } else {
                self.cache.discard(block);
                self.commit.mark_block(block);
            }
        }
        let commit = &mut self.commit;
        self.cache.discard_orphaned_superseded(|block| commit.mark_block(block));
        if dirty > 0 {
            self.policy_target = Some(self.config.policy);
            self.config.policy = crate::config::Policy::WriteBackFlush;
            self.enqueue_all_dirty_for_nobody();
        }
    }

    /// A warm restart serves the state it found; that state is made as
    /// durable as a flush makes it (for `hhc`: every dirty block logged
    /// again) before the engine reports `Ready`, so that what a reader sees
    /// after the restart survives a later loss of the cache device too. A
    /// failed one is started again (`Engine::complete_request`).
    pub(super) fn start_restart_flush(&mut self) {
        let key = self.requests.insert(super::requests::RequestState {
            owner: super::requests::RequestOwner::RestartFlush,
            lba: 0,
            blocks_count: 0,
            pending: 1,
            error: None,
            cut_off: false,
        });
        // A flush started again after a failure keeps the count.
        self.restart_flush.get_or_insert(0);
        self.start_flush(key);
        // Copies dropped above must stay dropped if the power fails again:
        // a passthrough flush alone would not commit their entries.
        if self.commit.has_dirty_pages() {
            let flush = self.flushes.newest_mut().expect("restart flush");
            flush.commit_target = flush.commit_target.or(Some(self.commit.request()));
        }
        self.sub_done(key, 1, None);
    }

    // ---- format ----

    fn format_cache(&mut self, first_page: u32) {
        if first_page == 0 {
            let superblock = CacheSuperblock {
                instance_id: self.config.instance_id,
                block_size: self.config.block_size,
                blocks_count: self.cache_layout.blocks_count,
                meta_pages_count: self.cache_layout.meta_pages_count,
                backing_blocks: self.config.backing_blocks(),
            };
            let region = self.regions.superblock;
            superblock.encode(&mut self.region(region)[..UNIT_BYTES]);
            let buffer = IoBuffer::Engine { region, offset_bytes: 0 };
            self.startup_submit(DeviceRole::Cache, IoKind::Write, 0, UNIT_BYTES as u64, buffer);
            self.format_owner_record();
        }
        // Both slots of each page: sequence 0 in slot A, 1 in slot B.
        let pages_per_round = META_POOL_PAGES / 2;
        let end = (first_page + pages_per_round).min(self.cache_layout.meta_pages_count);
        for page in first_page..end {
            let entries_count = self.page_entries(page);
            for seq in 0..2u64 {
                let slot = ((page - first_page) * 2 + seq as u32) as usize;
                let header = MetaPageHeader { instance_id: self.config.instance_id, page_index: page, page_seq: seq, entries_count };
                let empty = MetaEntry { lba: LBA_NONE, epoch: 0, dirty: false, through: false };
                let region = self.regions.meta_pool;
                let memory = &mut self.region(region)[slot * UNIT_BYTES..(slot + 1) * UNIT_BYTES];
                header.encode(&mut std::iter::repeat_n(empty, entries_count as usize), memory);
                let offset = self.cache_layout.meta_page_offset(page, seq == 1);
                let buffer = IoBuffer::Engine { region, offset_bytes: (slot * UNIT_BYTES) as u32 };
                self.startup_submit(DeviceRole::Cache, IoKind::Write, offset, UNIT_BYTES as u64, buffer);
            }
            self.commit.page_seq[page as usize] = 1;
        }
        self.startup.as_mut().unwrap().phase = Phase::FormatCache { next_page: end };
    }

    /// Both copies of the owner record: write_seq 1 in copy 0, 0 in copy 1,
    /// so that no copy of an earlier instance is left, and either copy
    /// alone holds the record.
    fn format_owner_record(&mut self) {
        let region = self.regions.owner;
        for (copy, &unit) in CACHE_OWNER_RECORD_UNIT.iter().enumerate() {
            let record = OwnerRecord {
                instance_id: self.config.instance_id,
                write_seq: 1 - copy as u64,
                owner: self.config.owner_record.clone(),
            };
            let offset_bytes = copy * UNIT_BYTES;
            record.encode(&mut self.region(region)[offset_bytes..offset_bytes + UNIT_BYTES]);
            let buffer = IoBuffer::Engine { region, offset_bytes: offset_bytes as u32 };
            self.startup_submit(DeviceRole::Cache, IoKind::Write, unit * UNIT_BYTES as u64, UNIT_BYTES as u64, buffer);
        }
        self.owner_records = super::owner_record::OwnerRecords::formatted(self.config.owner_record.clone());
    }

    fn page_entries(&self, page: u32) -> u16 {
        let first = page as u64 * META_ENTRIES_PER_PAGE as u64;
        (self.cache_layout.blocks_count - first).min(META_ENTRIES_PER_PAGE as u64) as u16
    }

    /// Both superblock copies on every mirror, so no copy of an earlier
    /// instance is left to be mistaken for ours (an absent mirror's slot
    /// has no device to write).
    fn format_log(&mut self) {
        let head = self.log.head_sequence;
        let mirrors: Vec<u8> = self.log.writable_mirrors().collect();
        for _ in 0..2 {
            self.log.superblock_write_seq += 1;
            let write_seq = self.log.superblock_write_seq;
            for &mirror in &mirrors {
                let (offset, buffer) = self.encode_superblock(mirror, write_seq, head);
                self.startup_submit(DeviceRole::Log(mirror), IoKind::Write, offset, UNIT_BYTES as u64, buffer);
            }
        }
    }

    fn flush_mirrors(&mut self) {
        let mirrors: Vec<u8> = self.log.writable_mirrors().collect();
        for mirror in mirrors {
            self.startup_submit(DeviceRole::Log(mirror), IoKind::Flush, 0, 0, IoBuffer::None);
        }
    }

    // ---- open ----

    fn check_superblock(&mut self) -> Result<(), String> {
        let region = self.regions.meta_pool;
        let superblock = CacheSuperblock::decode(&self.region(region)[..UNIT_BYTES])
            .map_err(|e| format!("cache superblock: {e}"))?;
        let owner_units = &self.region(region)[UNIT_BYTES..CACHE_HEADER_UNITS as usize * UNIT_BYTES];
        self.owner_records = super::owner_record::OwnerRecords::found(owner_units, superblock.instance_id);
        let expected = (
            self.config.instance_id,
            self.config.block_size,
            self.cache_layout.blocks_count,
            self.cache_layout.meta_pages_count,
        );
        let found = (superblock.instance_id, superblock.block_size, superblock.blocks_count, superblock.meta_pages_count);
        if expected != found {
            return Err(format!(
                "cache superblock (instance {:#x}, block size {}, {} blocks) does not match the configuration (instance {:#x}, block size {}, {} blocks)",
                found.0, found.1, found.2, expected.0, expected.1, expected.2
            ));
        }
        Ok(())
    }

    fn read_pages(&mut self, first_page: u32) {
        let end = (first_page + META_POOL_PAGES / 2).min(self.cache_layout.meta_pages_count);
        for page in first_page..end {
            for slot_b in [false, true] {
                let slot = ((page - first_page) * 2 + slot_b as u32) as usize;
                let offset = self.cache_layout.meta_page_offset(page, slot_b);
                let buffer = IoBuffer::Engine { region: self.regions.meta_pool, offset_bytes: (slot * UNIT_BYTES) as u32 };
                self.startup_submit(DeviceRole::Cache, IoKind::Read, offset, UNIT_BYTES as u64, buffer);
            }
        }
    }

    /// Restores the entries of the pages read; returns the next page to read.
    fn load_pages(&mut self, first_page: u32) -> u32 {
        let end = (first_page + META_POOL_PAGES / 2).min(self.cache_layout.meta_pages_count);
        let mut entries = Vec::with_capacity(META_ENTRIES_PER_PAGE);
        let mut newest = Vec::with_capacity(META_ENTRIES_PER_PAGE);
        for page in first_page..end {
            let mut best: Option<u64> = None;
            for slot_b in [false, true] {
                let slot = ((page - first_page) * 2 + slot_b as u32) as usize;
                let region = self.regions.meta_pool;
                let bytes = &self.region(region)[slot * UNIT_BYTES..(slot + 1) * UNIT_BYTES];
                let Ok(header) = MetaPageHeader::decode(bytes, &mut entries) else { continue };
                let valid = header.instance_id == self.config.instance_id
                    && header.page_index == page
                    && header.entries_count == self.page_entries(page);
                if valid && best.is_none_or(|seq| header.page_seq > seq) {
                    best = Some(header.page_seq);
                    std::mem::swap(&mut newest, &mut entries);
                }
            }
            let Some(seq) = best else {
                log::warn!("hhc: metadata page {page} unreadable in both slots; its blocks are dropped");
                self.commit.mark_page(page);
                continue;
            };
            self.commit.page_seq[page as usize] = seq;
            let first_block = page * META_ENTRIES_PER_PAGE as u32;
            for (i, entry) in newest.iter().enumerate() {
                if entry.lba == LBA_NONE || entry.lba >= self.config.backing_blocks() {
                    continue;
                }
                let durable =
                    DurableEntry { lba: entry.lba as u32, version: entry.epoch, dirty: entry.dirty, through: entry.through };
                self.cache.restore(first_block + i as u32, durable);
            }
        }
        end
    }

    fn start_scan(&mut self) {
        // Every mirror but those absent from the start.
        let mirrors: Vec<u8> = self.log.writable_mirrors().collect();
        let mut scanner = LogScanner::new(self.log_layout, mirrors, &mut HeapAllocator);
        // A mirror of another instance is not part of this log (the cache
        // superblock, read first, says which instance this is).
        scanner.expect_instance(self.config.instance_id);
        self.startup.as_mut().unwrap().scanner = Some(scanner);
        self.pump_scanner();
    }

    /// Moves the scanner's commands into the engine's output, renaming ids
    /// and regions; rebuilds the log once the scan is done.
    fn pump_scanner(&mut self) {
        let startup = self.startup.as_mut().unwrap();
        let scanner = startup.scanner.as_mut().unwrap();
        let mut commands: Vec<DeviceIo> = Vec::new();
        while let Some(io) = scanner.poll_io() {
            commands.push(io);
        }
        if commands.is_empty() && scanner.is_done() {
            let result = scanner.take_result().expect("scan finished without result");
            startup.scanner = None;
            match result {
                Ok(scanned) => self.rebuild_log(scanned),
                // Someone replayed this log onto the backing device (a
                // takeover, `hhc recover`): writing back what this cache
                // holds would put older data over newer.
                Err(error @ (ScanError::Replayed { .. } | ScanError::TakenOver { .. })) => {
                    let detail = format!(
                        "{error}; refusing a warm start over it (its dirty blocks are older than the backing device): \
                         wipe the cache before using it again"
                    );
                    log::error!("hhc: {detail}");
                    startup.failed = Some(FailReason::new(FailKind::Format, detail));
                }
                Err(error) => {
                    log::warn!("hhc: log scan failed ({error:?}); the log mirrors are treated as failed");
                    for mirror in 0..self.config.mirrors_count {
                        self.mirror_failed(mirror);
                    }
                }
            }
            if self.startup.as_ref().unwrap().pending == 0 {
                self.phase_done();
            }
            return;
        }
        for mut io in commands {
            if let IoBuffer::Engine { region, offset_bytes } = io.buffer {
                io.buffer = IoBuffer::Engine { region: region + SCANNER_REGION_BASE, offset_bytes };
            }
            let scanner_id = io.id;
            let id = self.commands.submit(Op::Startup, io, None);
            self.startup.as_mut().unwrap().scanner_ids.insert(id, scanner_id);
        }
    }

    /// Log state from a scan: ring position, live entries of dirty blocks,
    /// revokes owed for entries of blocks that are clean by now.
    fn rebuild_log(&mut self, scanned: ScannedLog) {
        self.log.superblock_write_seq = scanned.superblock.write_seq;
        // In the order the scan was given its mirrors (start_scan).
        let scanned_mirrors: Vec<u8> = self.log.writable_mirrors().collect();
        for (&mirror, unit) in scanned_mirrors.iter().zip(&scanned.superblock_units) {
            if unit.is_none() {
                self.mirror_failed(mirror);
            }
        }
        // Stale mirrors take no part in the start-up (`resync_stale_mirrors`).
        for &mirror in &scanned.stale_mirrors {
            self.log.mirrors[mirror as usize] = crate::hdd_log::MirrorHealth::Failed;
            self.stale_mirrors_at_start.push(mirror);
        }
        let head = scanned.superblock.head_sequence;
        // This run's parts must be told from the previous run's (see
        // `clean_tail`, which records the number before any part is written).
        self.log.run = scanned.superblock.run.wrapping_add(1).max(1);
        // A log formatted by a takeover says so for its whole life.
        self.log.previous_instance = scanned.superblock.previous_instance;
        let parts: Vec<(u64, u32, bool)> = scanned.segments.iter().map(|s| (s.sequence, s.part, s.barrier)).collect();
        self.log.restore_ring(head, &parts);
        if scanned.in_sync_unavailable {
            // Every mirror the newest superblock counts in sync is gone: the
            // parts found are a stale mirror's and may lack any part since
            // it fell behind. The cache device holds every dirty block, so
            // nothing of the scan is used; the log starts over on the stale
            // mirrors once the start-up is done, past every sequence seen.
            log::warn!("hhc: no log mirror in sync is present; the log starts over on the stale ones");
            for mirror in 0..self.config.mirrors_count {
                if self.log.mirror_writable(mirror) {
                    self.log.mirrors[mirror as usize] = crate::hdd_log::MirrorHealth::Failed;
                    self.stale_mirrors_at_start.push(mirror);
                }
            }
            self.stale_mirrors_at_start.sort_unstable();
            self.stale_mirrors_at_start.dedup();
            return;
        }
        let header_blocks = self.log_layout.segment.header_blocks;
        let mut live: HashMap<u64, u32> = HashMap::new();
        for part in &scanned.segments {
            for lba in &part.revokes {
                live.remove(lba);
            }
            let data_first = part.first_block + header_blocks;
            for (slot, &lba) in part.lbas.iter().enumerate() {
                if lba == LBA_NONE {
                    continue;
                }
                let loc = self.log.loc(part.sequence, data_first + slot as u32);
                if let Some(previous) = live.insert(lba, loc) {
                    self.log.note_superseded(previous, crate::hdd_log::log_point(part.sequence, part.part));
                }
            }
        }
        if let Some(last) = scanned.segments.last().filter(|last| !last.segment_end) {
            // Where a later scan looks for the part after it: past its gap.
            let next_block = last.first_block + header_blocks + last.lbas.len() as u32 + last.gap_blocks;
            self.startup.as_mut().unwrap().close_segment = Some((last.sequence, last.part + 1, next_block));
        }
        let mut entries: Vec<(u64, u32)> = live.into_iter().collect();
        entries.sort_unstable();
        // Live entries hold distinct places of the scanned ring: at most the
        // log's blocks, and the start-up revokes are some of them.
        let log_blocks = self.log_layout.segments_count as u64 * self.log_layout.segment.blocks() as u64;
        assert!(entries.len() as u64 <= log_blocks, "{} live log entries in a log of {log_blocks} blocks", entries.len());
        assert!(self.startup_revokes.is_empty(), "start-up revokes gathered twice");
        self.startup_revokes.reserve_exact(entries.len());
        for (lba, loc) in entries {
            self.log.restore_entry(loc, lba);
            let block = (lba < u32::MAX as u64).then(|| self.cache.lookup(lba as u32)).flatten();
            // A write-through copy is dropped at the end of the restart
            // (`drop_copies_after_crash`) and the restart serves the backing
            // device's value. An entry of its LBA (here a write-back write
            // logged after a switch to `hhc`, newer than the copy but never
            // committed) must be revoked in the restart flush's barrier,
            // before the engine serves that value: replayed after a later
            // cache loss, it would take the block back over it (torture seed
            // 9651, wt).
            match block {
                Some(block) if self.cache.has(block, flag::DIRTY) && self.cache.through(block) == Through::None => {
                    self.cache.set_log_loc(block, loc)
                }
                _ => self.startup_revokes.push(super::revokes::StartupRevoke { lba, loc }),
            }
        }
        debug_assert!(self.cache.superseded_blocks().all(|b| self.cache.state(b) == BlockState::Superseded));
        self.plan_log_repair(&scanned);
    }

    /// The scan trusts a part if any mirror's copy is valid. A power loss
    /// can leave the newest parts (those that were in flight) on one mirror
    /// only: the log then goes on after them, and a mirror lacking one has a
    /// hole there at which a later replay from it alone would stop (torture
    /// seed 2002, hhc). So they are copied to every healthy mirror before the
    /// restart completes.
    ///
    /// The source need not stay healthy: a mirror whose parts the scan read
    /// is failed in `rebuild_log` if neither of its superblock copies is
    /// valid, and the parts taken from it must still reach the mirrors that
    /// stay (torture seed 474880, hhc).
    fn plan_log_repair(&mut self, scanned: &ScannedLog) {
        let healthy: Vec<u8> = self.log.healthy_mirrors().collect();
        let newest = crate::hdd_log::PARTS_IN_FLIGHT_MAX;
        let from = scanned.segments.len().saturating_sub(newest);
        let layout = self.log_layout.segment;
        let repair = &mut self.startup.as_mut().unwrap().repair;
        for part in &scanned.segments[from..] {
            if healthy.iter().all(|&m| m == part.mirror) {
                continue;
            }
            let bytes = layout.sealed_bytes(part.lbas.len() as u32) as u64;
            // Parts that follow each other on the same mirror go as one copy.
            if let Some(last) = repair.last_mut() {
                let end_block = last.first_block as u64 + last.bytes / layout.block_size as u64;
                if (last.sequence, last.source, end_block) == (part.sequence, part.mirror, part.first_block as u64) {
                    last.bytes += bytes;
                    continue;
                }
            }
            repair.push(PartCopy { sequence: part.sequence, first_block: part.first_block, source: part.mirror, bytes });
        }
    }

    fn part_device_offset(&self, sequence: u64, first_block: u32) -> u64 {
        let block_size = self.log_layout.segment.block_size as u64;
        self.log_layout.segment_offset(self.log.segment_index(sequence)) + first_block as u64 * block_size
    }

    fn repair_read(&mut self) {
        let PartCopy { sequence, first_block, source, bytes } = *self.startup.as_ref().unwrap().repair.last().expect("repair planned");
        let offset = self.part_device_offset(sequence, first_block);
        let buffer = IoBuffer::Engine { region: self.regions.log_scratch, offset_bytes: 0 };
        self.startup_submit(DeviceRole::Log(source), IoKind::Read, offset, bytes, buffer);
    }

    fn repair_write(&mut self) {
        let PartCopy { sequence, first_block, source, bytes } = *self.startup.as_ref().unwrap().repair.last().expect("repair planned");
        let offset = self.part_device_offset(sequence, first_block);
        let mirrors: Vec<u8> = self.log.healthy_mirrors().filter(|&m| m != source).collect();
        for mirror in mirrors {
            let buffer = IoBuffer::Engine { region: self.regions.log_scratch, offset_bytes: 0 };
            self.startup_submit(DeviceRole::Log(mirror), IoKind::Write, offset, bytes, buffer);
        }
    }

    /// Keeps the previous run's parts past the scanned end out of every
    /// later scan. Parts of that run may have landed there out of order,
    /// after a hole (a torn write, or one lost although it completed, in
    /// which case the run went on well past it), and would sit where a
    /// later scan expects the restarted log's next parts. So, on every
    /// healthy mirror, before the engine writes any part:
    /// - the superblock records this run's number, which every part of the
    ///   run carries, and a scan never goes from a part of a later run to
    ///   one of an earlier run;
    /// - the last scanned segment is ended with an empty part (the log goes
    ///   on in the next segment);
    /// - the first block of the next free segments is zeroed, so that the
    ///   scan stops there until this run writes them.
    ///
    /// Only free positions: in a log with fewer free segments than buffers
    /// the next positions wrap onto the oldest live segments, which a replay
    /// after a cache loss still needs.
    fn clean_tail(&mut self) {
        if !self.log.has_healthy_mirror() {
            return;
        }
        let mirrors: Vec<u8> = self.log.healthy_mirrors().collect();
        self.log.superblock_write_seq += 1;
        let (write_seq, head) = (self.log.superblock_write_seq, self.log.head_sequence);
        for &mirror in &mirrors {
            let (offset, buffer) = self.encode_superblock(mirror, write_seq, head);
            self.startup_submit(DeviceRole::Log(mirror), IoKind::Write, offset, UNIT_BYTES as u64, buffer);
        }
        if let Some((sequence, part, first_block)) = self.startup.as_mut().unwrap().close_segment.take() {
            let layout = self.log_layout.segment;
            let place = crate::format::segment::PartPlace {
                instance_id: self.config.instance_id,
                segment_index: self.log.segment_index(sequence),
                sequence,
                part,
                first_block,
                run: self.log.run,
            };
            let head_sequence = self.log.head_sequence;
            let flags = crate::format::segment::PartFlags { barrier: false, segment_end: true, gap_blocks: 0, head_sequence };
            let region = self.log.buffers[0].region;
            let len = crate::format::seal(&layout, self.region(region), &place, flags, 0, 0) as u64;
            let offset = self.part_device_offset(sequence, first_block);
            for &mirror in &mirrors {
                let buffer = IoBuffer::Engine { region, offset_bytes: 0 };
                self.startup_submit(DeviceRole::Log(mirror), IoKind::Write, offset, len, buffer);
            }
        }
        let region = self.regions.log_scratch;
        let block_size = self.log_layout.segment.block_size as u64;
        self.region(region)[..block_size as usize].fill(0);
        let tail = self.log.tail_sequence;
        let positions = (self.config.log_buffers_count as u64).min(self.log.segments_free());
        for sequence in tail..tail + positions {
            let offset = self.log_layout.segment_offset(self.log.segment_index(sequence));
            for &mirror in &mirrors {
                let buffer = IoBuffer::Engine { region, offset_bytes: 0 };
                self.startup_submit(DeviceRole::Log(mirror), IoKind::Write, offset, block_size, buffer);
            }
        }
    }
}
