//! Shared by the engine tests: a reference model of acknowledged writes and
//! completed flushes (docs/design.md §2), a workload that drives the engine
//! through the in-memory harness and checks every read, and recovery helpers.
#![allow(dead_code)]

use hhc::config::{Config, Policy};
use hhc::driver::harness::Harness;
use hhc::driver::{pump, SyncDevices};
use hhc::io::{DeviceIo, DeviceRole, HeapAllocator, IoKind, IoStatus, RequestId};
use hhc::recovery::{LogScanner, Replay};
use std::collections::BTreeMap;

pub const BS: usize = 4096;

pub fn config(policy: Policy, seed: u64) -> Config {
    Config {
        policy,
        cache_device_bytes: 2 << 20, // ~480 blocks
        log_device_bytes: 4 << 20,
        backing_device_bytes: 8 << 20, // 2048 blocks
        segment_bytes: 64 << 10,
        log_buffers_count: 3,
        mirrors_count: 2,
        writeback_parallelism: 8,
        idle_after_ns: 5_000_000,
        superblock_interval_ns: 50_000_000,
        // Two metadata pages: every commit round takes two steps, with
        // requests and completions between them (engine/commit.rs).
        commit_step_pages: 1,
        instance_id: 0x1000 + seed,
        ..Config::default()
    }
}

/// Block contents name the LBA and the write: foreign or torn data shows.
pub fn block_data(lba: u64, write: u64) -> Vec<u8> {
    let mut data = vec![(write % 251) as u8; BS];
    data[..8].copy_from_slice(&lba.to_le_bytes());
    data[8..16].copy_from_slice(&write.to_le_bytes());
    data
}

/// Which write a block holds (0 = never written), or None if it is garbage.
pub fn decode_block(lba: u64, data: &[u8]) -> Option<u64> {
    if data.iter().all(|&b| b == 0) {
        return Some(0);
    }
    let write = u64::from_le_bytes(data[8..16].try_into().unwrap());
    (data == block_data(lba, write).as_slice()).then_some(write)
}

#[derive(Clone, Copy, Debug)]
pub struct WriteRecord {
    lba: u64,
    submitted_at: u64,
    acked_at: Option<u64>,
}

/// Reference model on a logical clock of submissions and completions.
#[derive(Default)]
pub struct Model {
    clock: u64,
    writes: BTreeMap<u64, WriteRecord>,
    /// (submitted_at, completed_at) of completed flushes.
    pub flushes: Vec<(u64, u64)>,
    /// Submission time of every flush, completed or not.
    pub flushes_submitted: Vec<u64>,
}

impl Model {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Latest write to `lba` acknowledged before `time` (0 = initial zeros).
    fn last_acked_before(&self, lba: u64, time: u64) -> (u64, u64) {
        self.writes
            .iter()
            .filter(|(_, w)| w.lba == lba && w.acked_at.is_some_and(|a| a < time))
            .max_by_key(|(_, w)| w.acked_at)
            .map_or((0, 0), |(&id, w)| (id, w.submitted_at))
    }

    /// Allowed: the covered write itself, or any write to the block not
    /// acknowledged before the covered one was submitted.
    fn allowed(&self, lba: u64, found: u64, since: u64, until: u64) -> bool {
        let (covered, covered_submitted) = self.last_acked_before(lba, since);
        if found == covered {
            return true;
        }
        match self.writes.get(&found) {
            Some(w) if w.lba == lba && w.submitted_at < until => w.acked_at.is_none_or(|a| a > covered_submitted),
            _ => false,
        }
    }

    /// The flush epoch of a write: how many flushes were submitted before it.
    pub fn epoch(&self, write: u64) -> usize {
        let at = self.writes[&write].submitted_at;
        self.flushes_submitted.partition_point(|&f| f < at)
    }

    /// Whether `values` (block -> write found, 0 = never written) is the
    /// state at some flush plus part of the epoch after it.
    pub fn is_flush_prefix(&self, values: &[u64]) -> bool {
        let mut epochs_of: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (&id, w) in &self.writes {
            epochs_of.entry(w.lba).or_default().push(self.epoch(id));
        }
        let found_epochs: Vec<Option<usize>> = values.iter().map(|&v| (v != 0).then(|| self.epoch(v))).collect();
        // Cut c: epochs before c complete, epoch c in part (c = 0: nothing complete).
        (0..=self.flushes_submitted.len()).any(|cut| {
            values.iter().enumerate().all(|(lba, _)| {
                let last_before = epochs_of.get(&(lba as u64)).and_then(|e| e.iter().copied().filter(|&e| e < cut).max());
                match found_epochs[lba] {
                    None => last_before.is_none(),
                    Some(epoch) => epoch == cut || Some(epoch) == last_before,
                }
            })
        })
    }

    /// For a failed `is_flush_prefix`: the cut that fits most blocks, and the
    /// blocks that do not fit it (block, write found, its epoch, the block's epochs).
    pub fn explain_prefix(&self, values: &[u64]) -> String {
        let mut best = (0, usize::MAX, String::new());
        for cut in 0..=self.flushes_submitted.len() {
            let mut misfits = String::new();
            let mut count = 0;
            for (lba, &found) in values.iter().enumerate() {
                let epochs: Vec<usize> = self.writes.iter().filter(|(_, w)| w.lba == lba as u64).map(|(&id, _)| self.epoch(id)).collect();
                let last_before = epochs.iter().copied().filter(|&e| e < cut).max();
                let fits = match found {
                    0 => last_before.is_none(),
                    v => self.epoch(v) == cut || Some(self.epoch(v)) == last_before,
                };
                if !fits {
                    count += 1;
                    if count <= 4 {
                        misfits += &format!(" [block {lba}: write {found} epoch {:?}, block epochs {epochs:?}]", (found != 0).then(|| self.epoch(found)));
                    }
                }
            }
            if count < best.1 {
                best = (cut, count, misfits);
            }
        }
        format!("best cut {} leaves {} blocks out:{}", best.0, best.1, best.2)
    }

    pub fn last_flush_submitted(&self) -> u64 {
        self.flushes.iter().map(|&(submitted, _)| submitted).max().unwrap_or(0)
    }
}

pub enum Pending {
    Write(u64),
    Read { lba: u64, blocks: u32, submitted_at: u64 },
    Flush { submitted_at: u64 },
}

pub struct Workload {
    pub harness: Harness,
    pub model: Model,
    pub pending: BTreeMap<RequestId, Pending>,
    rng: u64,
    next_write: u64,
    lbas: u64,
    pub errors_seen: u64,
    /// Share of reads and writes (percent) that continue a sequential
    /// stream, one for reads and one for writes (the sequential cutoff).
    pub sequential_percent: u64,
    sequential_next: [u64; 2],
}

impl Workload {
    pub fn new(harness: Harness, seed: u64, lbas: u64) -> Workload {
        Workload {
            harness,
            model: Model::default(),
            pending: BTreeMap::new(),
            rng: seed * 2 + 1,
            next_write: 1,
            lbas,
            errors_seen: 0,
            sequential_percent: 0,
            sequential_next: [0, lbas / 2],
        }
    }

    fn random(&mut self, bound: u64) -> u64 {
        self.rng = self.rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.rng >> 33) % bound
    }

    fn lba(&mut self) -> u64 {
        // Hot set: half the traffic on 1/16 of the blocks.
        if self.random(2) == 0 {
            self.random(self.lbas / 16)
        } else {
            self.random(self.lbas)
        }
    }

    /// A request's first block and length: random, or (drawn only when
    /// streams are on, so other tests draw as before) the next of a stream.
    fn extent(&mut self, write: bool, longest: u64) -> (u64, u32) {
        if self.sequential_percent > 0 && self.random(100) < self.sequential_percent {
            let blocks = 1 + self.random(8);
            let next = &mut self.sequential_next[write as usize];
            if *next + blocks > self.lbas {
                *next = 0;
            }
            let lba = *next;
            *next += blocks;
            return (lba, blocks as u32);
        }
        let lba = self.lba();
        (lba, 1 + self.random(longest).min(self.lbas - lba - 1) as u32)
    }

    pub fn submit_one(&mut self) {
        match self.random(10) {
            0..=4 => {
                let (lba, blocks) = self.extent(true, 3);
                let mut data = Vec::new();
                let at = self.model.tick();
                let first = self.next_write;
                for i in 0..blocks as u64 {
                    let write = self.next_write;
                    self.next_write += 1;
                    data.extend(block_data(lba + i, write));
                    self.model.writes.insert(write, WriteRecord { lba: lba + i, submitted_at: at, acked_at: None });
                }
                let id = self.harness.write(lba, data);
                self.pending.insert(id, Pending::Write(first));
            }
            5..=8 => {
                let (lba, blocks) = self.extent(false, 4);
                let submitted_at = self.model.tick();
                let id = self.harness.read(lba, blocks);
                self.pending.insert(id, Pending::Read { lba, blocks, submitted_at });
            }
            _ => {
                let submitted_at = self.model.tick();
                self.model.flushes_submitted.push(submitted_at);
                let id = self.harness.flush();
                self.pending.insert(id, Pending::Flush { submitted_at });
            }
        }
    }

    /// Checks every finished request against the model.
    pub fn reap(&mut self) {
        let ids: Vec<RequestId> = self.pending.keys().copied().filter(|id| self.harness.is_done(*id)).collect();
        for id in ids {
            let (result, buffer) = self.harness.take_result(id).unwrap();
            let now = self.model.tick();
            match self.pending.remove(&id).unwrap() {
                Pending::Write(first) => {
                    if result.is_err() {
                        self.errors_seen += 1;
                        continue;
                    }
                    let mut write = first;
                    while self.model.writes.get(&write).is_some_and(|w| w.acked_at.is_none() && w.submitted_at == self.model.writes[&first].submitted_at) {
                        self.model.writes.get_mut(&write).unwrap().acked_at = Some(now);
                        write += 1;
                    }
                }
                Pending::Read { lba, blocks, submitted_at } => {
                    if result.is_err() {
                        self.errors_seen += 1;
                        continue;
                    }
                    for i in 0..blocks as u64 {
                        let data = &buffer[i as usize * BS..(i as usize + 1) * BS];
                        let found = decode_block(lba + i, data)
                            .unwrap_or_else(|| panic!("invariant 1: block {} holds foreign or torn data", lba + i));
                        assert!(
                            self.model.allowed(lba + i, found, submitted_at, now),
                            "invariant 1: block {} read write {found}, last acknowledged before the read was {:?}",
                            lba + i,
                            self.model.last_acked_before(lba + i, submitted_at)
                        );
                    }
                }
                Pending::Flush { submitted_at } => match result {
                    Ok(()) => self.model.flushes.push((submitted_at, now)),
                    Err(_) => self.errors_seen += 1,
                },
            }
        }
    }

    pub fn run(&mut self, operations: u32, concurrency: usize) {
        for _ in 0..operations {
            while self.pending.len() < concurrency {
                self.submit_one();
            }
            for _ in 0..1 + self.random(4) {
                self.harness.step();
            }
            if self.random(50) == 0 {
                self.harness.idle_for(20_000_000);
            }
            self.reap();
        }
    }

    /// One recorded single-block write, run to completion; returns whether it succeeded.
    pub fn write_and_wait(&mut self, lba: u64) -> bool {
        let at = self.model.tick();
        let write = self.next_write;
        self.next_write += 1;
        self.model.writes.insert(write, WriteRecord { lba, submitted_at: at, acked_at: None });
        let id = self.harness.write(lba, block_data(lba, write));
        self.pending.insert(id, Pending::Write(write));
        self.harness.run_until_done(id);
        let errors = self.errors_seen;
        self.reap();
        self.errors_seen == errors
    }

    /// One recorded flush, run to completion; returns whether it succeeded.
    pub fn flush_and_wait(&mut self) -> bool {
        let submitted_at = self.model.tick();
        self.model.flushes_submitted.push(submitted_at);
        let id = self.harness.flush();
        self.pending.insert(id, Pending::Flush { submitted_at });
        self.harness.run_until_done(id);
        let errors = self.errors_seen;
        self.reap();
        self.errors_seen == errors
    }

    pub fn drain(&mut self) {
        while let Some(&id) = self.pending.keys().next() {
            self.harness.run_until_done(id);
            self.reap();
        }
    }

    /// After a crash (or cache loss), checks the block values found on
    /// `read_block` against the last completed flush (invariants 2 and 3).
    pub fn check_recovered(&self, what: &str, mut read_block: impl FnMut(u64) -> Vec<u8>) {
        let flush_at = self.model.last_flush_submitted();
        for lba in 0..self.lbas {
            let data = read_block(lba);
            let found = decode_block(lba, &data)
                .unwrap_or_else(|| panic!("{what}: block {lba} holds foreign or torn data"));
            assert!(
                self.model.allowed(lba, found, flush_at, u64::MAX),
                "{what}: block {lba} holds write {found}; the last flush covered {:?}",
                self.model.last_acked_before(lba, flush_at)
            );
        }
    }
}

/// Reads every block through a (restarted) engine.
pub fn read_all(harness: &mut Harness, lbas: u64) -> Vec<Vec<u8>> {
    (0..lbas)
        .map(|lba| {
            let id = harness.read(lba, 1);
            let (result, data) = harness.wait(id);
            result.unwrap_or_else(|e| panic!("read of block {lba} after restart failed: {e:?}"));
            data
        })
        .collect()
}

pub const LBAS: u64 = 1024;

/// Seeds per policy; `HHC_ENGINE_SEEDS` runs more.
pub fn seeds(default: u64) -> std::ops::RangeInclusive<u64> {
    let count = std::env::var("HHC_ENGINE_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default);
    1..=count
}

pub fn run_workload(policy: Policy, seed: u64, operations: u32) -> Workload {
    let harness = Harness::format(config(policy, seed), seed);
    let mut workload = Workload::new(harness, seed, LBAS);
    workload.run(operations, 8);
    workload
}

/// Replays the log onto the backing device as `hhc recover` does.
pub fn recover_from_log(devices: &mut BTreeMap<DeviceRole, Vec<u8>>, config: &Config) {
    struct Devices<'a>(&'a mut BTreeMap<DeviceRole, Vec<u8>>);
    impl SyncDevices for Devices<'_> {
        fn execute(&mut self, io: &DeviceIo, data: &mut [u8]) -> IoStatus {
            let Some(device) = self.0.get_mut(&io.device) else { return IoStatus::DeviceLost };
            let range = io.offset_bytes as usize..(io.offset_bytes + io.len_bytes) as usize;
            match io.kind {
                IoKind::Read => data.copy_from_slice(&device[range]),
                IoKind::Write => device[range].copy_from_slice(data),
                IoKind::Flush => {}
            }
            IoStatus::Ok
        }
    }
    let (_, layout) = config.validate().unwrap();
    let mirrors: Vec<u8> = (0..config.mirrors_count).collect();
    let mut scanner = LogScanner::new(layout, mirrors.clone(), &mut HeapAllocator);
    pump(&mut Devices(devices), &mut scanner).unwrap();
    let scanned = scanner.take_result().unwrap().expect("log scan");
    let mut replay = Replay::new(layout, scanned, mirrors, true, &mut HeapAllocator);
    pump(&mut Devices(devices), &mut replay).unwrap();
    replay.result().unwrap().as_ref().expect("replay");
}

