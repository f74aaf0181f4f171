//! In-memory asynchronous driver for the engine: devices are byte vectors,
//! commands complete in a seeded random order, request buffers are held here.
//! Used by the engine tests; small enough to read in one sitting.

use crate::config::Config;
use crate::engine::{Engine, EngineState, StartMode};
use crate::io::{
    DeviceIo, DeviceRole, HeapAllocator, IoBuffer, IoKind, IoStatus, Nanos, Request, RequestError, RequestId,
    RequestKind,
};
use std::collections::{BTreeMap, HashMap};

pub struct Harness {
    pub engine: Engine,
    pub config: Config,
    pub devices: BTreeMap<DeviceRole, Vec<u8>>,
    in_flight: Vec<DeviceIo>,
    buffers: HashMap<RequestId, Vec<u8>>,
    results: HashMap<RequestId, (Result<(), RequestError>, Vec<u8>)>,
    failing: BTreeMap<DeviceRole, IoStatus>,
    /// Roles whose commands are held back (a slow or hung device).
    stalled: Vec<DeviceRole>,
    pub now: Nanos,
    rng: u64,
    next_request: RequestId,
    /// Device commands completed, per role and kind.
    pub io_counts: BTreeMap<(DeviceRole, &'static str), u64>,
    /// Backing-device writes completed: (offset, length) in bytes.
    pub backing_writes: Vec<(u64, u64)>,
}

fn kind_name(kind: IoKind) -> &'static str {
    match kind {
        IoKind::Read => "read",
        IoKind::Write => "write",
        IoKind::Flush => "flush",
    }
}

impl Harness {
    /// Fresh devices sized from `config`, formatted.
    pub fn format(config: Config, seed: u64) -> Harness {
        let mut devices = BTreeMap::new();
        devices.insert(DeviceRole::Cache, vec![0; config.cache_device_bytes as usize]);
        devices.insert(DeviceRole::Backing, vec![0; config.backing_device_bytes as usize]);
        for mirror in 0..config.mirrors_count {
            devices.insert(DeviceRole::Log(mirror), vec![0; config.log_device_bytes as usize]);
        }
        Harness::start(config, devices, StartMode::Format, seed)
    }

    /// An engine over existing device contents, run until it has started.
    pub fn start(config: Config, devices: BTreeMap<DeviceRole, Vec<u8>>, mode: StartMode, seed: u64) -> Harness {
        let mut harness = Harness::open(config, devices, mode, seed);
        harness.run_until_quiet();
        harness
    }

    /// An engine over existing device contents that has not run yet (faults
    /// can be set for its startup).
    pub fn open(config: Config, devices: BTreeMap<DeviceRole, Vec<u8>>, mode: StartMode, seed: u64) -> Harness {
        let engine = Engine::new(config.clone(), mode, &mut HeapAllocator, 0).expect("valid config");
        Harness {
            engine,
            config,
            devices,
            in_flight: Vec::new(),
            buffers: HashMap::new(),
            results: HashMap::new(),
            failing: BTreeMap::new(),
            stalled: Vec::new(),
            now: 0,
            rng: seed | 1,
            next_request: 1,
            io_counts: BTreeMap::new(),
            backing_writes: Vec::new(),
        }
    }

    /// Power loss: in-flight commands are dropped; a new engine opens the devices.
    pub fn power_cycle(self, seed: u64) -> Harness {
        Harness::start(self.config, self.devices, StartMode::Open, seed)
    }

    pub fn state(&self) -> &EngineState {
        self.engine.state()
    }

    fn random(&mut self) -> u64 {
        // xorshift64*: deterministic per seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Makes every later command to `role` end with `status` (Ok clears it).
    pub fn set_failing(&mut self, role: DeviceRole, status: IoStatus) {
        if status == IoStatus::Ok {
            self.failing.remove(&role);
        } else {
            self.failing.insert(role, status);
        }
    }

    /// Holds back (or releases) every command to `role`.
    pub fn set_stalled(&mut self, role: DeviceRole, stalled: bool) {
        self.stalled.retain(|&r| r != role);
        if stalled {
            self.stalled.push(role);
        }
    }

    /// Replaces a device (e.g. a new, empty log mirror).
    pub fn replace_device(&mut self, role: DeviceRole, contents: Vec<u8>) {
        self.devices.insert(role, contents);
        self.failing.remove(&role);
    }

    pub fn submit(&mut self, kind: RequestKind, lba: u64, blocks_count: u32, data: Option<Vec<u8>>) -> RequestId {
        let id = self.next_request;
        self.next_request += 1;
        let bs = self.config.block_size as usize;
        let buffer = data.unwrap_or_else(|| vec![0; blocks_count as usize * bs]);
        self.buffers.insert(id, buffer);
        let request = Request { id, kind, lba, blocks_count };
        let data = (kind == RequestKind::Write).then(|| self.buffers.remove(&id).unwrap());
        match &data {
            Some(bytes) => self.engine.handle_request(self.now, request, Some(bytes)),
            None => self.engine.handle_request(self.now, request, None),
        }
        if let Some(bytes) = data {
            self.buffers.insert(id, bytes);
        }
        self.collect();
        id
    }

    pub fn write(&mut self, lba: u64, data: Vec<u8>) -> RequestId {
        let blocks = (data.len() / self.config.block_size as usize) as u32;
        self.submit(RequestKind::Write, lba, blocks, Some(data))
    }

    pub fn read(&mut self, lba: u64, blocks_count: u32) -> RequestId {
        self.submit(RequestKind::Read, lba, blocks_count, None)
    }

    pub fn flush(&mut self) -> RequestId {
        self.submit(RequestKind::Flush, 0, 0, None)
    }

    /// The result and buffer of a finished request.
    pub fn take_result(&mut self, id: RequestId) -> Option<(Result<(), RequestError>, Vec<u8>)> {
        self.results.remove(&id)
    }

    pub fn is_done(&self, id: RequestId) -> bool {
        self.results.contains_key(&id)
    }

    fn collect(&mut self) {
        while let Some(io) = self.engine.poll_io() {
            self.in_flight.push(io);
        }
        while let Some(done) = self.engine.poll_completion() {
            let buffer = self.buffers.remove(&done.id).unwrap_or_default();
            self.results.insert(done.id, (done.result, buffer));
        }
    }

    /// Completes one in-flight command (random pick); false if none.
    pub fn step(&mut self) -> bool {
        self.collect();
        let runnable: Vec<usize> =
            (0..self.in_flight.len()).filter(|&i| !self.stalled.contains(&self.in_flight[i].device)).collect();
        if runnable.is_empty() {
            return false;
        }
        let pick = runnable[(self.random() % runnable.len() as u64) as usize];
        let io = self.in_flight.swap_remove(pick);
        self.now += 10_000;
        let status = self.execute(&io);
        *self.io_counts.entry((io.device, kind_name(io.kind))).or_default() += 1;
        if io.device == DeviceRole::Backing && io.kind == IoKind::Write {
            self.backing_writes.push((io.offset_bytes, io.len_bytes));
        }
        self.engine.handle_io_completion(self.now, io.id, status);
        self.collect();
        true
    }

    fn execute(&mut self, io: &DeviceIo) -> IoStatus {
        if let Some(&status) = self.failing.get(&io.device) {
            return status;
        }
        let Some(device) = self.devices.get_mut(&io.device) else { return IoStatus::DeviceLost };
        let range = io.offset_bytes as usize..(io.offset_bytes + io.len_bytes) as usize;
        assert!(range.end <= device.len(), "{io:?} beyond device of {} bytes", device.len());
        let memory: &mut [u8] = match io.buffer {
            IoBuffer::None => return IoStatus::Ok,
            IoBuffer::Request { request, offset_bytes } => {
                let buffer = self.buffers.get_mut(&request).expect("request buffer of a finished request");
                &mut buffer[offset_bytes as usize..offset_bytes as usize + io.len_bytes as usize]
            }
            IoBuffer::Engine { region, offset_bytes } => {
                let memory = self.engine.io_memory_mut(region);
                &mut memory[offset_bytes as usize..offset_bytes as usize + io.len_bytes as usize]
            }
        };
        match io.kind {
            IoKind::Read => memory.copy_from_slice(&device[range]),
            IoKind::Write => device[range].copy_from_slice(memory),
            IoKind::Flush => {}
        }
        IoStatus::Ok
    }

    /// Runs commands until none is in flight, firing timers as the engine asks.
    pub fn run_until_quiet(&mut self) {
        for _ in 0..10_000_000 {
            if self.step() {
                continue;
            }
            match self.engine.poll_timeout() {
                Some(at) => {
                    self.now = self.now.max(at);
                    self.engine.handle_timer(self.now);
                    self.collect();
                    if self.runnable_count() == 0 && self.engine.poll_timeout().is_some() && self.idle_enough() {
                        return;
                    }
                }
                None => return,
            }
        }
        panic!("engine did not quiesce");
    }

    /// Background work can go on forever (e.g. nothing left to do but a
    /// timer); stop once timers fire without producing I/O for a while.
    fn idle_enough(&mut self) -> bool {
        for _ in 0..50 {
            let Some(at) = self.engine.poll_timeout() else { return true };
            self.now = self.now.max(at);
            self.engine.handle_timer(self.now);
            self.collect();
            if self.runnable_count() > 0 {
                return false;
            }
        }
        true
    }

    fn runnable_count(&self) -> usize {
        self.in_flight.iter().filter(|io| !self.stalled.contains(&io.device)).count()
    }

    /// Lets the engine see a device disappear (and fails its later commands).
    pub fn remove_device(&mut self, role: DeviceRole) {
        self.failing.insert(role, IoStatus::DeviceLost);
        self.engine.handle_device_removed(self.now, role);
        self.collect();
    }

    pub fn attach_mirror(&mut self, mirror: u8) {
        let bytes = self.config.log_device_bytes as usize;
        self.replace_device(DeviceRole::Log(mirror), vec![0; bytes]);
        self.engine.handle_mirror_attached(self.now, mirror);
        self.collect();
    }

    /// Runs until `id` completes; returns its result and buffer.
    pub fn wait(&mut self, id: RequestId) -> (Result<(), RequestError>, Vec<u8>) {
        self.run_until_done(id);
        self.take_result(id).expect("completed")
    }

    /// Runs until `id` completes, leaving its result to `take_result`.
    pub fn run_until_done(&mut self, id: RequestId) {
        for _ in 0..1_000_000 {
            if self.results.contains_key(&id) {
                return;
            }
            if !self.step() {
                let at = self.engine.poll_timeout().unwrap_or(self.now + 1_000_000);
                self.now = self.now.max(at);
                self.engine.handle_timer(self.now);
                self.collect();
                if self.runnable_count() == 0 && self.engine.poll_timeout().is_none() && !self.results.contains_key(&id) {
                    panic!("request {id} can never complete: {}", self.engine.describe_pending());
                }
            }
        }
        panic!("request {id} did not complete: {}", self.engine.describe_pending());
    }

    /// Lets time pass so background work (write-back, commits) runs.
    pub fn idle_for(&mut self, duration: Nanos) {
        let until = self.now + duration;
        while self.now < until {
            if !self.step() {
                let at = self.engine.poll_timeout().unwrap_or(until).min(until).max(self.now + 1);
                self.now = at;
                self.engine.handle_timer(self.now);
                self.collect();
            }
        }
    }

    pub fn in_flight_count(&self) -> usize {
        self.in_flight.len()
    }
}
