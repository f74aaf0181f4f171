//! One HHC bdev: the engine, its base bdevs, the request table and the life
//! cycle (probe the cache device -> start the engine -> register the bdev ->
//! serve -> shut down, or fail -> recover the log onto the backing device ->
//! unregister). Everything here runs on the owner thread except the queues
//! in `Shared` and `Channel`.

use super::iov::{sub_range, IovecData};
use super::json::{self, JsonObject};
use super::memory::DmaAllocator;
use super::params::CreateParams;
use super::sys;
use crate::config::{Config, LogLayout};
use crate::engine::{Engine, EngineState, StartMode};
use crate::format::{CacheSuperblock, UNIT_BYTES};
use crate::io::{
    DeviceIo, DeviceRole, IoAllocator, IoBuffer, IoId, IoKind, IoMachine, IoRegion, IoStatus, Request,
    RequestCompletion, RequestKind,
};
use crate::recovery::{LogScanner, Replay};
use crossbeam_queue::ArrayQueue;
use libc::iovec;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// Requests queued towards the owner thread, per HHC bdev.
const SUBMISSIONS_MAX: usize = 4096;
/// Requests in flight per channel; also the size of its completion queue, so
/// pushing a completion can never fail.
pub const CHANNEL_IN_FLIGHT_MAX: u32 = 1024;
/// Tag bits: engine I/O ids are u32; the request slot (+1) that lent its
/// buffer sits above them; recovery machines and the probe have own bits.
const TAG_RECOVERY: u64 = 1 << 63;
const TAG_PROBE: u64 = 1 << 62;

/// A request on its way to the owner thread.
pub struct Submission {
    pub io: *mut sys::hhc_glue_io,
    pub channel: *const Channel,
    pub kind: RequestKind,
    pub lba: u64,
    pub blocks_count: u64,
}

// SAFETY: the pointers are only dereferenced on the owner thread (the I/O's
// iovecs, which the bdev layer keeps valid until completion) or used to push
// into the channel's lock-free completion queue.
unsafe impl Send for Submission {}

/// A finished request on its way back to the submitting thread.
pub struct Finished {
    pub io: *mut sys::hhc_glue_io,
    pub status: i32,
}

// SAFETY: only handed to hhc_glue_io_complete on the submitting thread.
unsafe impl Send for Finished {}

/// The part of a node other threads touch.
pub struct Shared {
    pub submissions: ArrayQueue<Submission>,
}

/// Per-thread channel state of one HHC bdev.
pub struct Channel {
    pub shared: Arc<Shared>,
    pub on_owner: bool,
    /// Requests of this channel not completed yet; touched on its thread only.
    pub in_flight: Cell<u32>,
    pub completions: ArrayQueue<Finished>,
}

enum Input {
    BaseDone { role: DeviceRole, tag: u64, status: i32 },
    BaseRemoved(DeviceRole),
}

/// What a base bdev callback needs to find its node.
pub struct BaseCtx {
    pub node: *const Node,
    pub role: DeviceRole,
}

pub struct Base {
    pub name: String,
    pub glue: *mut sys::hhc_glue_base,
    /// C calls back with a pointer to this; it must live as long as the base.
    _ctx: Box<BaseCtx>,
    pub info: sys::hhc_glue_base_info,
    outstanding: u32,
    removed: bool,
    closed: bool,
}

impl Base {
    pub fn new(name: String, glue: *mut sys::hhc_glue_base, ctx: Box<BaseCtx>, info: sys::hhc_glue_base_info) -> Base {
        Base { name, glue, _ctx: ctx, info, outstanding: 0, removed: false, closed: false }
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            // SAFETY: glue is an open base; after this call C never names it again.
            unsafe { sys::hhc_glue_base_close(self.glue) }
        }
    }

    fn health(&self) -> &'static str {
        match (self.removed, self.closed) {
            (true, _) => "removed",
            (false, true) => "closed",
            (false, false) => "ok",
        }
    }
}

struct RequestSlot {
    io: *mut sys::hhc_glue_io,
    channel: *const Channel,
    /// Device commands still using this request's buffer.
    device_ios: u32,
    /// Set once the engine completed the request.
    status: Option<i32>,
}

#[derive(Default)]
struct RequestTable {
    slots: Vec<Option<RequestSlot>>,
    free: Vec<u32>,
}

impl RequestTable {
    fn insert(&mut self, slot: RequestSlot) -> u32 {
        match self.free.pop() {
            Some(key) => {
                self.slots[key as usize] = Some(slot);
                key
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn get_mut(&mut self, key: u32) -> &mut RequestSlot {
        self.slots[key as usize].as_mut().expect("live request slot")
    }

    fn remove(&mut self, key: u32) -> RequestSlot {
        self.free.push(key);
        self.slots[key as usize].take().expect("live request slot")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Reading unit 0 of the cache bdev to tell a new cache from a warm one.
    Probing,
    Starting,
    Running,
    /// Clean shutdown for destruct.
    Stopping,
    /// The engine failed; waiting for its device commands to drain.
    Failed,
    /// The cache device is gone: replaying the log onto the backing device.
    Recovering,
    Done,
}

enum Recovery {
    Scan(LogScanner, LogLayout, Vec<u8>),
    Replay(Replay),
}

pub struct Node {
    pub shared: Arc<Shared>,
    /// The owner SPDK thread (opaque, compared only).
    pub owner: *const c_void,
    core: RefCell<Core>,
    inbox: RefCell<VecDeque<Input>>,
}

pub struct Core {
    /// The node this core belongs to (stable: nodes are boxed).
    node: *const Node,
    pub params: CreateParams,
    pub phase: Phase,
    config: Config,
    engine: Option<Engine>,
    /// Backing, cache, then the log mirrors in order.
    bases: Vec<Base>,
    requests: RequestTable,
    pub glue: *mut sys::hhc_glue_node,
    pub poller: *mut sys::hhc_glue_poller,
    pub rpc: *mut sys::hhc_glue_rpc,
    probe: Option<Box<dyn IoRegion>>,
    recovery: Option<Recovery>,
    /// Device commands of the engine in flight (completions of a failed
    /// engine are dropped, but recovery waits for them).
    engine_ios: u32,
    /// Completions made up on the owner thread (no such base, submit error).
    immediate: VecDeque<(IoId, IoStatus)>,
    iov_scratch: Vec<iovec>,
    cache_lost: bool,
    unregister_sent: bool,
    destructing: bool,
    pub failure: Option<String>,
}

fn role_index(role: DeviceRole) -> usize {
    match role {
        DeviceRole::Backing => 0,
        DeviceRole::Cache => 1,
        DeviceRole::Log(i) => 2 + i as usize,
    }
}

fn now_ns() -> u64 {
    // SAFETY: reads the TSC through SPDK; no arguments.
    unsafe { sys::hhc_glue_now_ns() }
}

impl Node {
    pub fn new(params: CreateParams, config: Config) -> Box<Node> {
        let shared = Arc::new(Shared { submissions: ArrayQueue::new(SUBMISSIONS_MAX) });
        let core = Core {
            params,
            phase: Phase::Probing,
            config,
            engine: None,
            bases: Vec::with_capacity(2 + sys::HHC_GLUE_MAX_LOGS as usize),
            node: std::ptr::null(),
            requests: RequestTable::default(),
            glue: std::ptr::null_mut(),
            poller: std::ptr::null_mut(),
            rpc: std::ptr::null_mut(),
            probe: None,
            recovery: None,
            engine_ios: 0,
            immediate: VecDeque::with_capacity(64),
            iov_scratch: Vec::with_capacity(16),
            cache_lost: false,
            unregister_sent: false,
            destructing: false,
            failure: None,
        };
        // SAFETY: asks SPDK for the calling thread; no arguments.
        let owner = unsafe { sys::hhc_glue_thread_current() };
        let node = Box::new(Node { shared, owner, core: RefCell::new(core), inbox: RefCell::new(VecDeque::with_capacity(256)) });
        node.core.borrow_mut().node = &*node;
        node
    }

    pub fn core(&self) -> std::cell::RefMut<'_, Core> {
        self.core.borrow_mut()
    }

    pub fn try_core(&self) -> Option<std::cell::Ref<'_, Core>> {
        self.core.try_borrow().ok()
    }

    pub fn base_done(&self, role: DeviceRole, tag: u64, status: i32) {
        self.inbox.borrow_mut().push_back(Input::BaseDone { role, tag, status });
        self.run();
    }

    pub fn base_removed(&self, role: DeviceRole) {
        self.inbox.borrow_mut().push_back(Input::BaseRemoved(role));
        self.run();
    }

    /// Does all pending work unless a caller up the stack already is (a
    /// completion we hand to the bdev layer may submit a new request at
    /// once); that caller's loop then picks the new work up.
    pub fn run(&self) -> bool {
        let Ok(mut core) = self.core.try_borrow_mut() else { return false };
        let mut busy = false;
        loop {
            let input = self.inbox.borrow_mut().pop_front();
            let progressed = match input {
                Some(input) => {
                    core.handle_input(input);
                    true
                }
                None => core.take_submissions(&self.shared),
            };
            let pumped = core.pump();
            if !progressed && !pumped {
                break;
            }
            busy = true;
        }
        core.advance_phase();
        busy
    }

    /// The owner thread's poller: timers plus whatever is queued.
    pub fn poll(&self) -> bool {
        if let Ok(mut core) = self.core.try_borrow_mut() {
            core.fire_timer();
        }
        self.run()
    }
}

impl Core {
    pub fn set_config(&mut self, config: Config) {
        self.config = config;
    }

    pub fn add_base(&mut self, base: Base) {
        self.bases.push(base);
    }

    fn handle_input(&mut self, input: Input) {
        match input {
            Input::BaseDone { role, tag, status } => self.device_io_done(role, tag, status),
            Input::BaseRemoved(role) => self.device_removed(role),
        }
    }

    fn take_submissions(&mut self, shared: &Shared) -> bool {
        let mut any = false;
        while let Some(submission) = shared.submissions.pop() {
            any = true;
            self.start_request(submission);
        }
        any
    }

    fn fire_timer(&mut self) {
        let Some(engine) = self.engine.as_mut() else { return };
        // Starting too: a warm restart finishes with a flush of its own.
        if !matches!(self.phase, Phase::Starting | Phase::Running | Phase::Stopping) {
            return;
        }
        let now = now_ns();
        if engine.next_timer().is_some_and(|at| at <= now) {
            engine.handle_timer(now);
        }
    }

    // ---- requests ----

    fn start_request(&mut self, submission: Submission) {
        let ready = self.phase == Phase::Running && self.engine.as_ref().is_some_and(|e| *e.state() == EngineState::Ready);
        let Ok(blocks_count) = u32::try_from(submission.blocks_count) else {
            return finish_request(submission.io, submission.channel, -libc::EINVAL);
        };
        if !ready {
            return finish_request(submission.io, submission.channel, -libc::ENODEV);
        }
        let key = self.requests.insert(RequestSlot {
            io: submission.io,
            channel: submission.channel,
            device_ios: 0,
            status: None,
        });
        let request = Request { id: key as u64, kind: submission.kind, lba: submission.lba, blocks_count };
        let engine = self.engine.as_mut().expect("running engine");
        if submission.kind == RequestKind::Write {
            let iovs = request_iovs(submission.io);
            engine.handle_request(now_ns(), request, Some(&IovecData { iovs }));
        } else {
            engine.handle_request(now_ns(), request, None);
        }
    }

    fn request_done(&mut self, completion: RequestCompletion) {
        let key = completion.id as u32;
        let status = completion.result.map_or_else(|e| e.errno(), |()| 0);
        let slot = self.requests.get_mut(key);
        slot.status = Some(status);
        if slot.device_ios == 0 {
            self.deliver(key);
        }
    }

    fn deliver(&mut self, key: u32) {
        let slot = self.requests.remove(key);
        finish_request(slot.io, slot.channel, slot.status.expect("completed request"));
    }

    // ---- engine output ----

    fn pump(&mut self) -> bool {
        let mut any = false;
        loop {
            let mut progressed = false;
            while let Some((id, status)) = self.immediate.pop_front() {
                progressed = true;
                self.engine_io_done(id, status);
            }
            while let Some(io) = self.engine.as_mut().and_then(Engine::poll_io) {
                progressed = true;
                self.submit_engine_io(io);
            }
            while let Some(completion) = self.engine.as_mut().and_then(Engine::poll_completion) {
                progressed = true;
                self.request_done(completion);
            }
            progressed |= self.pump_recovery();
            if !progressed {
                return any;
            }
            any = true;
        }
    }

    fn submit_engine_io(&mut self, io: DeviceIo) {
        assert!(io.id <= u32::MAX as u64, "engine I/O id {} exceeds 32 bits", io.id);
        self.iov_scratch.clear();
        let mut scratch = std::mem::take(&mut self.iov_scratch);
        let lender = match io.buffer {
            IoBuffer::None => None,
            IoBuffer::Engine { region, offset_bytes } => {
                let memory = self.engine.as_mut().expect("engine").io_memory_mut(region);
                scratch.push(region_iovec(memory, offset_bytes as u64, io.len_bytes));
                None
            }
            IoBuffer::Request { request, offset_bytes } => {
                let key = request as u32;
                let slot = self.requests.get_mut(key);
                let complete = sub_range(request_iovs(slot.io), offset_bytes, io.len_bytes, &mut scratch);
                assert!(complete, "{io:?} reaches past its request's buffer");
                slot.device_ios += 1;
                Some(key)
            }
        };
        let tag = io.id | lender.map_or(0, |key| (key as u64 + 1) << 32);
        self.engine_ios += 1;
        if let Err(status) = self.submit_base(io.device, io.kind, io.offset_bytes, io.len_bytes, &scratch, tag) {
            self.engine_ios -= 1;
            self.release_lender(tag);
            self.immediate.push_back((io.id, status));
        }
        self.iov_scratch = scratch;
    }

    /// Starts one I/O on a base bdev; Err carries the status to report
    /// instead when it cannot start.
    fn submit_base(
        &mut self,
        role: DeviceRole,
        kind: IoKind,
        offset_bytes: u64,
        len_bytes: u64,
        iovs: &[iovec],
        tag: u64,
    ) -> Result<(), IoStatus> {
        let Some(base) = self.bases.get_mut(role_index(role)) else { return Err(IoStatus::DeviceLost) };
        if base.removed || base.closed {
            return Err(IoStatus::DeviceLost);
        }
        if kind == IoKind::Flush && !base.info.supports_flush {
            // Without FLUSH a completed write is durable (io.rs, IoKind::Flush).
            return Err(IoStatus::Ok);
        }
        let glue_kind = match kind {
            IoKind::Read => sys::hhc_glue_io_kind::HHC_GLUE_IO_READ,
            IoKind::Write => sys::hhc_glue_io_kind::HHC_GLUE_IO_WRITE,
            IoKind::Flush => sys::hhc_glue_io_kind::HHC_GLUE_IO_FLUSH,
        };
        // SAFETY: base.glue is open (not closed); iovs point into engine
        // memory or an outstanding request's buffers, both valid until this
        // I/O completes; C copies the iovec array itself.
        let rc = unsafe {
            sys::hhc_glue_base_submit(base.glue, glue_kind, offset_bytes, len_bytes, iovs.as_ptr(), iovs.len() as i32, tag)
        };
        if rc != 0 {
            log::error!("{}: cannot start {kind:?} on {role} bdev {}: errno {}", self.params.name, base.name, -rc);
            return Err(IoStatus::Error);
        }
        base.outstanding += 1;
        Ok(())
    }

    fn release_lender(&mut self, tag: u64) {
        let lender = (tag & !(TAG_RECOVERY | TAG_PROBE)) >> 32;
        if lender == 0 {
            return;
        }
        let key = (lender - 1) as u32;
        let slot = self.requests.get_mut(key);
        slot.device_ios -= 1;
        if slot.device_ios == 0 && slot.status.is_some() {
            self.deliver(key);
        }
    }

    fn device_io_done(&mut self, role: DeviceRole, tag: u64, status: i32) {
        let base = &mut self.bases[role_index(role)];
        base.outstanding -= 1;
        let io_status = match (status, base.removed) {
            (0, _) => IoStatus::Ok,
            (_, true) => IoStatus::DeviceLost,
            (_, false) => IoStatus::Error,
        };
        if base.removed && base.outstanding == 0 {
            base.close();
        }
        if tag & TAG_PROBE != 0 {
            return self.probe_done(io_status);
        }
        if tag & TAG_RECOVERY != 0 {
            return self.recovery_io_done(tag & !TAG_RECOVERY, io_status);
        }
        self.engine_ios -= 1;
        self.release_lender(tag);
        self.engine_io_done(tag & u32::MAX as u64, io_status);
    }

    fn engine_io_done(&mut self, id: IoId, status: IoStatus) {
        let Some(engine) = self.engine.as_mut() else { return };
        // A failed engine forgot its operations; their completions go nowhere.
        if !matches!(engine.state(), EngineState::Failed(_)) {
            engine.handle_io_completion(now_ns(), id, status);
        }
    }

    fn device_removed(&mut self, role: DeviceRole) {
        let name = self.params.name.clone();
        let base = &mut self.bases[role_index(role)];
        log::warn!("{name}: {role} bdev {} was removed", base.name);
        base.removed = true;
        if base.outstanding == 0 {
            base.close();
        }
        self.cache_lost |= role == DeviceRole::Cache;
        match self.phase {
            Phase::Probing => self.fail(format!("{role} bdev removed during creation")),
            Phase::Starting | Phase::Running | Phase::Stopping => {
                let engine = self.engine.as_mut().expect("engine");
                engine.handle_device_removed(now_ns(), role);
            }
            Phase::Failed | Phase::Recovering | Phase::Done => {}
        }
    }

    // ---- life cycle ----

    pub fn start_probe(&mut self) {
        let mut region = DmaAllocator.alloc(UNIT_BYTES);
        let iov = region_iovec(region.as_mut_slice(), 0, UNIT_BYTES as u64);
        self.probe = Some(region);
        if let Err(status) = self.submit_base(DeviceRole::Cache, IoKind::Read, 0, UNIT_BYTES as u64, &[iov], TAG_PROBE) {
            self.fail(format!("cannot read the cache bdev's superblock ({status:?})"));
        }
    }

    fn probe_done(&mut self, status: IoStatus) {
        if self.phase != Phase::Probing {
            self.probe = None;
            return;
        }
        if status != IoStatus::Ok {
            return self.fail(format!("reading unit 0 of cache bdev '{}' failed", self.params.cache));
        }
        let mut region = self.probe.take().expect("probe buffer");
        let mode = match CacheSuperblock::decode(region.as_mut_slice()) {
            Ok(superblock) => {
                if superblock.block_size != self.config.block_size {
                    return self.fail(format!(
                        "block_size {}: cache bdev '{}' holds an HHC cache with block size {}",
                        self.config.block_size, self.params.cache, superblock.block_size
                    ));
                }
                log::info!("{}: warm start from cache bdev {} (instance {:#x})", self.params.name, self.params.cache, superblock.instance_id);
                self.config.instance_id = superblock.instance_id;
                StartMode::Open
            }
            Err(_) => {
                self.config.instance_id = random_instance_id();
                log::info!("{}: formatting cache bdev {} (instance {:#x})", self.params.name, self.params.cache, self.config.instance_id);
                StartMode::Format
            }
        };
        match Engine::new(self.config.clone(), mode, &mut DmaAllocator, now_ns()) {
            Ok(engine) => {
                self.engine = Some(engine);
                self.phase = Phase::Starting;
            }
            Err(error) => self.fail(error.0),
        }
    }

    /// Moves between phases once the engine or the recovery says so.
    fn advance_phase(&mut self) {
        let state = self.engine.as_ref().map(|e| e.state().clone());
        match (self.phase, state) {
            (Phase::Starting, Some(EngineState::Ready)) => self.register(),
            (Phase::Starting | Phase::Running | Phase::Stopping, Some(EngineState::Failed(reason))) => {
                self.fail(reason)
            }
            (Phase::Stopping, Some(EngineState::Stopped)) => {
                log::info!("{}: stopped cleanly", self.params.name);
                self.phase = Phase::Done;
            }
            (Phase::Failed, _) if self.engine_ios == 0 && self.probe.is_none() => self.after_failure_drained(),
            _ => {}
        }
        if self.phase == Phase::Done && self.destructing {
            self.finish_destruct();
        }
    }

    fn register(&mut self) {
        let Ok(name) = CString::new(self.params.name.clone()) else {
            return self.fail(format!("name {:?} holds a NUL", self.params.name));
        };
        let alignment_log2 = self.bases.iter().map(|b| b.info.required_alignment_log2).max().unwrap_or(0);
        let blocks_count = self.engine.as_ref().expect("engine").blocks_count();
        let mut glue = std::ptr::null_mut();
        let node = self.node as *mut c_void;
        // SAFETY: name is a valid C string; node outlives the bdev (it is
        // freed only after hhc_glue_node_destruct_done); glue is an out pointer.
        let rc = unsafe {
            sys::hhc_glue_node_register(
                name.as_ptr(),
                self.config.block_size,
                blocks_count,
                alignment_log2,
                self.config.instance_id,
                node,
                &mut glue,
            )
        };
        if rc != 0 {
            // The engine formatted/opened the devices already; stop it
            // cleanly so the cache stays consistent, then report.
            self.failure = Some(format!("spdk_bdev_register failed: errno {}", -rc));
            self.reply_error(-rc, &format!("cannot register bdev '{}': errno {}", self.params.name, -rc));
            self.engine.as_mut().expect("engine").shutdown(now_ns());
            self.phase = Phase::Stopping;
            self.destructing = true;
            return;
        }
        self.glue = glue;
        self.phase = Phase::Running;
        log::info!("{}: registered ({} policy, {} blocks of {} bytes)", self.params.name, self.config.policy, blocks_count, self.config.block_size);
        let reply = json::string(&self.params.name);
        self.reply_raw(&reply);
    }

    fn fail(&mut self, reason: String) {
        if matches!(self.phase, Phase::Failed | Phase::Recovering | Phase::Done) {
            return;
        }
        log::error!("{}: {reason}", self.params.name);
        self.failure = Some(reason.clone());
        let creating = matches!(self.phase, Phase::Probing | Phase::Starting);
        if creating {
            self.reply_error(-libc::EIO, &format!("cannot create '{}': {reason}", self.params.name));
            self.destructing = true;
        }
        self.phase = Phase::Failed;
    }

    fn after_failure_drained(&mut self) {
        let recoverable = self.cache_lost && self.config.policy.uses_log() && self.engine.is_some();
        if recoverable && self.start_recovery() {
            return;
        }
        if self.cache_lost && self.config.policy.is_write_back() && !self.config.policy.uses_log() {
            log::error!("{}: cache lost under policy {}: dirty data is gone", self.params.name, self.config.policy);
        }
        self.phase = Phase::Done;
        self.unregister();
    }

    fn unregister(&mut self) {
        if self.glue.is_null() || self.unregister_sent || self.destructing {
            self.destructing |= self.glue.is_null();
            return;
        }
        self.unregister_sent = true;
        // SAFETY: glue is the registered bdev; destruct follows asynchronously.
        unsafe { sys::hhc_glue_node_unregister(self.glue) }
    }

    /// Called from the bdev's destruct.
    pub fn begin_destruct(&mut self) {
        self.destructing = true;
        match self.phase {
            Phase::Running => {
                self.engine.as_mut().expect("engine").shutdown(now_ns());
                self.phase = Phase::Stopping;
            }
            Phase::Done => self.finish_destruct(),
            _ => {}
        }
    }

    /// Closes everything; C finishes closing a base once its last I/O is
    /// back and never calls us about it again.
    fn finish_destruct(&mut self) {
        for base in &mut self.bases {
            base.close();
        }
        if !self.poller.is_null() {
            // SAFETY: the poller was started for this node and is stopped once.
            unsafe { sys::hhc_glue_poller_stop(self.poller) };
            self.poller = std::ptr::null_mut();
        }
        super::entry::forget_node(self.node, self.glue);
        self.glue = std::ptr::null_mut();
        self.destructing = false;
    }

    // ---- cache loss: replay the log onto the backing device ----

    fn start_recovery(&mut self) -> bool {
        let layout = *self.engine.as_ref().expect("engine").log_layout();
        let mirrors: Vec<u8> =
            (0..self.config.mirrors_count).filter(|&i| !self.bases[role_index(DeviceRole::Log(i))].removed).collect();
        if mirrors.is_empty() {
            log::error!("{}: cache and every log mirror lost; dirty data cannot be recovered", self.params.name);
            return false;
        }
        log::warn!("{}: cache lost; replaying the log ({} mirrors) onto backing bdev {}", self.params.name, mirrors.len(), self.params.backing);
        let scanner = LogScanner::new(layout, mirrors.clone(), &mut DmaAllocator);
        self.recovery = Some(Recovery::Scan(scanner, layout, mirrors));
        self.phase = Phase::Recovering;
        true
    }

    fn pump_recovery(&mut self) -> bool {
        let Some(mut recovery) = self.recovery.take() else { return false };
        let mut progressed = false;
        let machine: &mut dyn IoMachine = match &mut recovery {
            Recovery::Scan(scanner, ..) => scanner,
            Recovery::Replay(replay) => replay,
        };
        while let Some(io) = machine.poll_io() {
            progressed = true;
            let iovs = match io.buffer {
                IoBuffer::Engine { region, offset_bytes } => {
                    vec![region_iovec(machine.io_memory_mut(region), offset_bytes as u64, io.len_bytes)]
                }
                _ => Vec::new(),
            };
            if let Err(status) = self.submit_base(io.device, io.kind, io.offset_bytes, io.len_bytes, &iovs, TAG_RECOVERY | io.id) {
                machine.handle_io_completion(now_ns(), io.id, status);
            }
        }
        self.recovery = self.advance_recovery(recovery);
        progressed
    }

    fn advance_recovery(&mut self, recovery: Recovery) -> Option<Recovery> {
        match recovery {
            Recovery::Scan(mut scanner, layout, mirrors) if scanner.is_done() => match scanner.take_result() {
                Some(Ok(scanned)) => {
                    let has_flush = self.config.backing_has_flush;
                    Some(Recovery::Replay(Replay::new(layout, scanned, mirrors, has_flush, &mut DmaAllocator)))
                }
                other => {
                    log::error!("{}: log scan failed: {:?}", self.params.name, other.map(|r| r.err()));
                    self.recovery_finished();
                    None
                }
            },
            Recovery::Replay(replay) if replay.is_done() => {
                match replay.result() {
                    Some(Ok(report)) => log::warn!(
                        "{}: replayed {} blocks from {} log parts onto {}; the HHC bdev goes away",
                        self.params.name, report.blocks_replayed, report.segments_replayed, self.params.backing
                    ),
                    other => log::error!("{}: replay failed: {:?}", self.params.name, other),
                }
                self.recovery_finished();
                None
            }
            unfinished => Some(unfinished),
        }
    }

    fn recovery_io_done(&mut self, id: IoId, status: IoStatus) {
        let Some(mut recovery) = self.recovery.take() else { return };
        match &mut recovery {
            Recovery::Scan(scanner, ..) => scanner.handle_io_completion(now_ns(), id, status),
            Recovery::Replay(replay) => replay.handle_io_completion(now_ns(), id, status),
        }
        self.recovery = Some(recovery);
    }

    fn recovery_finished(&mut self) {
        self.phase = Phase::Done;
        self.unregister();
    }

    // ---- replies and reports ----

    fn reply_raw(&mut self, text: &str) {
        if let Some(rpc) = self.take_rpc() {
            // SAFETY: rpc is the pending request, answered exactly once here.
            unsafe { sys::hhc_glue_rpc_reply_raw(rpc, text.as_ptr().cast(), text.len()) }
        }
    }

    fn reply_error(&mut self, code: i32, message: &str) {
        if let Some(rpc) = self.take_rpc() {
            super::entry::reply_error(rpc, code, message);
        }
    }

    /// The pending create request, if it has not been answered yet.
    fn take_rpc(&mut self) -> Option<*mut sys::hhc_glue_rpc> {
        let rpc = std::mem::replace(&mut self.rpc, std::ptr::null_mut());
        (!rpc.is_null()).then_some(rpc)
    }

    pub fn info_json(&self) -> String {
        let base = |b: &Base| JsonObject::new().string("name", &b.name).string("health", b.health()).finish();
        let mut object = JsonObject::new()
            .string("name", &self.params.name)
            .string("policy", self.config.policy.name())
            .string("state", &format!("{:?}", self.phase).to_lowercase())
            .number("block_size", self.config.block_size as u64)
            .raw("backing", &base(&self.bases[0]))
            .raw("cache", &base(&self.bases[1]))
            .raw("logs", &json::array(self.bases[2..].iter().map(base)));
        if let Some(reason) = &self.failure {
            object = object.string("failure", reason);
        }
        if let Some(engine) = &self.engine {
            let s = engine.stats();
            let stats = JsonObject::new()
                .number("reads", s.reads)
                .number("writes", s.writes)
                .number("flushes", s.flushes)
                .number("read_hits", s.read_hits)
                .number("read_misses", s.read_misses)
                .number("writebacks", s.writebacks)
                .number("dirty_blocks", s.dirty_blocks)
                .number("free_blocks", s.free_blocks)
                .number("cache_blocks", s.cache_blocks)
                .number("revokes", s.revokes)
                .number("log_segments_written", s.log_segments_written)
                .number("log_parts_written", s.log_parts_written)
                .number("log_bytes_written", s.log_bytes_written)
                .number("log_reclaim_reads", s.log_reclaim_reads)
                .number("log_segments_in_use", s.log_segments_in_use)
                .number("log_segments_total", s.log_segments_total)
                .number("log_wraps", s.log_wraps)
                .number("unlogged_dirty_blocks", s.unlogged_dirty_blocks)
                .number("healthy_mirrors", s.healthy_mirrors)
                .number("device_errors", s.device_errors)
                .finish();
            object = object.raw("stats", &stats);
        }
        object.finish()
    }

    pub fn config_json(&self) -> String {
        JsonObject::new().string("method", "bdev_hhc_create").raw("params", &self.params.to_json()).finish()
    }
}

fn random_instance_id() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most bytes.len() bytes into bytes.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    let random = if got == bytes.len() as isize { u64::from_le_bytes(bytes) } else { now_ns() };
    random | 1
}

fn region_iovec(memory: &mut [u8], offset_bytes: u64, len_bytes: u64) -> iovec {
    let range = offset_bytes as usize..(offset_bytes + len_bytes) as usize;
    let bytes = &mut memory[range];
    iovec { iov_base: bytes.as_mut_ptr().cast(), iov_len: bytes.len() }
}

/// The buffers of an outstanding request.
fn request_iovs<'a>(io: *mut sys::hhc_glue_io) -> &'a [iovec] {
    let mut count = 0;
    // SAFETY: io is outstanding, so the bdev layer keeps its iovec array
    // valid until we complete it, which happens after every use of the slice.
    unsafe {
        let iovs = sys::hhc_glue_io_iovs(io, &mut count);
        if iovs.is_null() || count <= 0 {
            return &[];
        }
        std::slice::from_raw_parts(iovs, count as usize)
    }
}

/// Completes a request on its own thread: directly on the owner thread,
/// else through the channel's queue.
pub fn finish_request(io: *mut sys::hhc_glue_io, channel: *const Channel, status: i32) {
    // SAFETY: a channel outlives its outstanding requests (the bdev layer
    // destroys a channel only after its I/O completed).
    let channel = unsafe { &*channel };
    if channel.on_owner {
        channel.in_flight.set(channel.in_flight.get() - 1);
        // SAFETY: io is outstanding and we are on its submitting thread.
        unsafe { sys::hhc_glue_io_complete(io, status) };
        return;
    }
    let pushed = channel.completions.push(Finished { io, status });
    assert!(pushed.is_ok(), "completion queue sized for CHANNEL_IN_FLIGHT_MAX overflowed");
}
