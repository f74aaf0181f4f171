//! A slow backing FLUSH holds write-back back: a written-back block turns
//! clean only once a backing FLUSH after its write completes, and keeps its
//! LBA among those in flight until then (engine/in_flight.rs). The engine
//! holds at most 4 runs per staging extent so; beyond, write-back waits
//! for the FLUSH, and so do writes that need the blocks it frees — none
//! fails. The harness stalls whole devices, so this test drives the engine
//! itself and holds back only the backing device's FLUSH.

mod common;

use common::{block_data, config, BS};
use hhc::config::Policy;
use hhc::engine::{Engine, EngineState, StartMode};
use hhc::io::{DeviceIo, DeviceRole, HeapAllocator, IoBuffer, IoKind, IoStatus, Request, RequestId, RequestKind};
use std::collections::{BTreeMap, VecDeque};

const PARALLELISM: u32 = 2;
/// Runs of one block (the stripe is one block), 4 runs per extent.
const HELD_MAX: u64 = 4 * PARALLELISM as u64;

struct Rig {
    engine: Engine,
    devices: BTreeMap<DeviceRole, Vec<u8>>,
    queue: VecDeque<DeviceIo>,
    /// Backing FLUSHes held back, with the backing writes started when each
    /// was issued: those are durable once it completes.
    flushes: VecDeque<(DeviceIo, u64)>,
    hold_flushes: bool,
    now: u64,
    writes: BTreeMap<RequestId, (u64, Vec<u8>)>,
    results: BTreeMap<RequestId, bool>,
    backing_writes_started: u64,
    backing_writes_durable: u64,
    held_most: u64,
}

impl Rig {
    fn new() -> Rig {
        let mut config = config(Policy::WriteBack, 7);
        config.writeback_parallelism = PARALLELISM;
        config.backing_stripe_bytes = BS as u32;
        config.dirty_threshold_percent = 100;
        config.idle_after_ns = u64::MAX / 4;
        let mut devices = BTreeMap::new();
        devices.insert(DeviceRole::Cache, vec![0; config.cache_device_bytes as usize]);
        devices.insert(DeviceRole::Backing, vec![0; config.backing_device_bytes as usize]);
        for mirror in 0..config.mirrors_count {
            devices.insert(DeviceRole::Log(mirror), vec![0; config.log_device_bytes as usize]);
        }
        let engine = Engine::new(config, StartMode::Format, &mut HeapAllocator, 0).expect("valid config");
        let mut rig = Rig {
            engine,
            devices,
            queue: VecDeque::new(),
            flushes: VecDeque::new(),
            hold_flushes: false,
            now: 0,
            writes: BTreeMap::new(),
            results: BTreeMap::new(),
            backing_writes_started: 0,
            backing_writes_durable: 0,
            held_most: 0,
        };
        rig.run();
        assert_eq!(*rig.engine.state(), EngineState::Ready);
        rig
    }

    fn collect(&mut self) {
        while let Some(io) = self.engine.poll_io() {
            if io.device == DeviceRole::Backing && io.kind == IoKind::Write {
                self.backing_writes_started += 1;
            }
            if io.device == DeviceRole::Backing && io.kind == IoKind::Flush {
                self.flushes.push_back((io, self.backing_writes_started));
            } else {
                self.queue.push_back(io);
            }
        }
        while let Some(done) = self.engine.poll_completion() {
            self.results.insert(done.id, done.result.is_ok());
        }
        let held = self.backing_writes_started - self.backing_writes_durable;
        self.held_most = self.held_most.max(held);
        assert!(held <= HELD_MAX, "{held} backing writes not yet made durable by a FLUSH, over {HELD_MAX}");
    }

    fn execute(&mut self, io: &DeviceIo) {
        let range = io.offset_bytes as usize..(io.offset_bytes + io.len_bytes) as usize;
        let memory: &mut [u8] = match io.buffer {
            IoBuffer::None => &mut [],
            IoBuffer::Request { request, offset_bytes } => {
                let (_, data) = self.writes.get_mut(&request).expect("only writes here");
                &mut data[offset_bytes as usize..offset_bytes as usize + io.len_bytes as usize]
            }
            IoBuffer::Engine { region, offset_bytes } => {
                &mut self.engine.io_memory_mut(region)[offset_bytes as usize..offset_bytes as usize + io.len_bytes as usize]
            }
        };
        let device = self.devices.get_mut(&io.device).expect("a device of the config");
        match io.kind {
            IoKind::Read => memory.copy_from_slice(&device[range]),
            IoKind::Write => device[range].copy_from_slice(memory),
            IoKind::Flush => {}
        }
    }

    fn complete(&mut self, io: DeviceIo) {
        self.execute(&io);
        self.now += 10_000;
        self.engine.handle_io_completion(self.now, io.id, IoStatus::Ok);
        self.collect();
    }

    /// Runs every command but held FLUSHes (and timers) until nothing is left.
    fn run(&mut self) {
        for _ in 0..1_000_000 {
            self.collect();
            if let Some(io) = self.queue.pop_front() {
                self.complete(io);
            } else if !self.hold_flushes && !self.flushes.is_empty() {
                self.release_flush();
            } else if let Some(at) = self.engine.poll_timeout().filter(|&at| at <= self.now + 1_000_000_000) {
                self.now = self.now.max(at);
                self.engine.handle_timer(self.now);
            } else {
                return;
            }
        }
        panic!("the engine did not settle");
    }

    fn release_flush(&mut self) {
        let (io, writes_before) = self.flushes.pop_front().expect("a held FLUSH");
        self.complete(io);
        self.backing_writes_durable = self.backing_writes_durable.max(writes_before);
    }

    fn write(&mut self, lba: u64, data: Vec<u8>) -> RequestId {
        let id = 1 + self.writes.len() as RequestId;
        self.writes.insert(id, (lba, data));
        let request = Request { id, kind: RequestKind::Write, lba, blocks_count: 1 };
        let data = &self.writes[&id].1;
        let data: &dyn hhc::io::RequestData = data;
        self.engine.handle_request(self.now, request, Some(data));
        self.collect();
        id
    }
}

#[test]
fn a_held_backing_flush_holds_write_back_and_writes_wait_without_failing() {
    let mut rig = Rig::new();
    rig.hold_flushes = true;
    // More blocks than the cache holds: the last writes need blocks that
    // only write-back frees.
    let lbas = rig.engine.stats().cache_blocks + 64;
    for lba in 0..lbas {
        rig.write(lba, block_data(lba, 1));
        rig.run();
    }
    // Write-back went as far as its bound lets it, and writes wait.
    assert_eq!(rig.held_most, HELD_MAX, "write-back stopped short of its bound");
    let waiting = rig.writes.keys().filter(|id| !rig.results.contains_key(id)).count();
    assert!(waiting > 0, "no write waited for write-back");
    assert!(rig.results.values().all(|&ok| ok), "a write failed while write-back waited");
    // The FLUSHes come through: every write completes.
    rig.hold_flushes = false;
    rig.run();
    assert_eq!(rig.results.len(), lbas as usize);
    assert!(rig.results.values().all(|&ok| ok), "a write failed");
    let now = rig.now;
    rig.engine.flush_all(now).expect("flush_all starts");
    rig.run();
    for lba in 0..lbas {
        let at = lba as usize * BS;
        assert_eq!(rig.devices[&DeviceRole::Backing][at..at + BS], block_data(lba, 1)[..], "lba {lba} on the backing device");
    }
}
