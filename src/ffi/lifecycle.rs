//! The life of a node: open its bases, probe the cache bdev (new or warm),
//! start the engine, register the bdev, serve; then stop cleanly for
//! destruct, or fail and unregister. A node that served and lost its cache
//! unregisters its bdev at once and stays as a record (recover.rs) while
//! the log is replayed onto the backing bdev and after. Messages about a
//! node go to its owner thread.

use super::base::{Bases, COMMANDS_BESIDE_ENGINE};
use super::errno::{self, Error};
use super::memory::DmaAllocator;
use super::node::{Core, Node, Phase};
use super::owner::{now_ns, Thread};
use super::params::CreateParams;
use super::recovery::Recovery;
use super::registry;
use super::rpc::Rpc;
use super::{json, sys};
use crate::config::Policy;
use crate::engine::{Engine, EngineState, StartMode};
use crate::recovery::{RecoveryProgress, RecoveryStage};
use crate::format::{CacheSuperblock, FormatError, CACHE_SUPERBLOCK_MAGIC, FORMAT_VERSION, UNIT_BYTES};
use crate::io::{DeviceRole, IoAllocator, IoStatus};
use std::ffi::{c_int, c_void, CString};

/// Opens and claims every base bdev, checks them against the parameters and
/// gets the owner thread's channels. On error everything is closed again.
pub fn open_node(params: CreateParams) -> Result<Box<Node>, Error> {
    let mut roles = vec![(DeviceRole::Backing, params.backing.clone())];
    if !params.is_direct() {
        roles.push((DeviceRole::Cache, params.cache.clone()));
    }
    roles.extend(params.logs.iter().enumerate().map(|(i, l)| (DeviceRole::Log(i as u8), l.clone())));
    let node = Node::new(params);
    let address = &*node as *const Node as *const c_void;
    let mut bases = Bases::open(address, &roles)?;
    let facts: Vec<_> = bases.all().iter().map(|b| b.facts()).collect();
    let direct = node.params.is_direct();
    let config = if direct { node.params.direct_config(facts[0]) } else { node.params.config(facts[0], facts[1], &facts[2..]) };
    let sized = config.map_err(Error::from).and_then(|config| {
        // Without a cache, one backing command per request (start_request
        // keeps them under requests_max).
        let commands = if direct { config.requests_max as usize } else { Engine::device_commands_max(&config)? };
        bases.use_pool(commands + COMMANDS_BESIDE_ENGINE)?;
        node.shared.size_commands(commands + COMMANDS_BESIDE_ENGINE);
        Ok(config)
    });
    let config = match sized {
        Ok(config) => config,
        Err(error) => {
            bases.close_all();
            return Err(error);
        }
    };
    node.core
        .enter(|core| {
            core.config = config;
            core.bases = bases;
        })
        .expect("a new node is not entered");
    Ok(node)
}

/// Creates HHC bdev `params.name` on its owner thread: the module's thread
/// for `params.cpumask`, else the calling one. `rpc` (None: examine, which
/// only logs) is answered from there once the bdev is registered or
/// creating it failed.
pub fn launch(params: CreateParams, rpc: Option<Rpc>) {
    let owner = match params.cpumask.as_deref().map(Thread::for_cpumask).transpose() {
        Ok(owner) => owner.unwrap_or_else(Thread::current),
        Err(error) => return launch_failed(&params.name, rpc, &error),
    };
    if owner == Thread::current() {
        return open_and_start(params, rpc);
    }
    let name = params.name.clone();
    let raw = Box::into_raw(Box::new((params, rpc)));
    // SAFETY: launch_msg takes back the box; owner threads outlive the module.
    if let Err(rc) = unsafe { owner.send(launch_msg, raw.cast()) } {
        // SAFETY: the message was not queued; the box is still ours.
        let (_, rpc) = *unsafe { Box::from_raw(raw) };
        let error = Error::from_rc(rc, format!("cannot reach owner thread {}: {}", owner.describe(), errno::describe(rc)));
        launch_failed(&name, rpc, &error);
    }
}

unsafe extern "C" fn launch_msg(arg: *mut c_void) {
    // SAFETY: arg is the box launch sent, delivered once.
    let (params, rpc) = *unsafe { Box::from_raw(arg as *mut (CreateParams, Option<Rpc>)) };
    open_and_start(params, rpc);
}

fn open_and_start(params: CreateParams, rpc: Option<Rpc>) {
    // Another create of the same name may have started meanwhile.
    if registry::contains(&params.name) {
        let error = Error::Exists(format!("name: an HHC bdev named '{}' already exists", params.name));
        return launch_failed(&params.name, rpc, &error);
    }
    let name = params.name.clone();
    match open_node(params) {
        Ok(node) => start_node(node, rpc),
        Err(error) => launch_failed(&name, rpc, &error),
    }
}

fn launch_failed(name: &str, rpc: Option<Rpc>, error: &Error) {
    match rpc {
        Some(rpc) => rpc.reply_error(error),
        None => log::warn!("examine: cannot assemble HHC bdev '{name}': {}", error.message()),
    }
}

/// Registers the node, starts its poller and probes the cache bdev; `rpc`
/// is answered once the bdev is registered or creating it failed. On the
/// node's owner thread.
pub fn start_node(node: Box<Node>, rpc: Option<Rpc>) {
    let node: &'static Node = Box::leak(node);
    registry::add(node);
    // SAFETY: node_poll gets the node back, alive until the poller is
    // stopped in finish_destruct (before the node is freed).
    let poller = unsafe { sys::hhc_glue_poller_start(Some(node_poll), node as *const Node as *mut c_void, 0) };
    node.core
        .enter(|core| {
            core.poller = poller;
            core.rpc = rpc;
            core.start_probe();
        })
        .expect("a node starts outside its own loop");
    node.run();
}

unsafe extern "C" fn node_poll(arg: *mut c_void) -> c_int {
    // SAFETY: arg is a live node (see start_node); pollers run on the owner.
    let node = unsafe { &*(arg as *const Node) };
    node.poll() as c_int
}

/// The bdev's destruct, on whichever thread unregistered it: continues on
/// the owner thread, from a message, so the node is never entered twice.
///
/// # Safety
/// `node` is a registered node; the bdev layer calls destruct once.
pub unsafe fn destruct(node: *const Node) {
    // SAFETY: the node lives until free_node, which only finish_destruct
    // sends, after this message ran.
    let owner = unsafe { &*node }.core.owner();
    // SAFETY: destruct_msg gets the node back on its owner thread.
    let sent = unsafe { owner.send(destruct_msg, node as *mut c_void) };
    assert!(sent.is_ok(), "cannot send the destruct message to the owner thread");
}

unsafe extern "C" fn destruct_msg(arg: *mut c_void) {
    // SAFETY: see destruct.
    let node = unsafe { &*(arg as *const Node) };
    assert!(node.core.on_owner_thread(), "destruct message off the owner thread");
    node.core.enter(Core::begin_destruct).expect("messages run outside the node");
    node.run();
}

/// What registering a node's bdev takes, carried to the app thread and
/// back with the result.
struct Registration {
    name: CString,
    block_size: u32,
    blocks_count: u64,
    alignment_log2: u32,
    max_rw_blocks: u32,
    instance_id: u64,
    node: *const Node,
    owner: Thread,
    result: Option<Result<*mut sys::hhc_glue_node, Error>>,
}

impl Registration {
    /// On the app thread.
    fn run(&self) -> Result<*mut sys::hhc_glue_node, Error> {
        let mut glue = std::ptr::null_mut();
        // SAFETY: name is a valid C string; the node outlives the bdev (it is
        // freed only after hhc_glue_node_destruct_done, and not while it is
        // registering); glue is an out pointer.
        let rc = unsafe {
            sys::hhc_glue_node_register(
                self.name.as_ptr(),
                self.block_size,
                self.blocks_count,
                self.alignment_log2,
                self.max_rw_blocks,
                self.instance_id,
                self.node as *mut c_void,
                &mut glue,
            )
        };
        match rc {
            0 => Ok(glue),
            rc => Err(Error::from_rc(
                rc,
                format!("cannot register bdev '{}': spdk_bdev_register failed: {}", self.name.to_string_lossy(), errno::describe(rc)),
            )),
        }
    }
}

unsafe extern "C" fn register_msg(arg: *mut c_void) {
    // SAFETY: arg is the box Core::register sent, delivered once.
    let mut registration = unsafe { Box::from_raw(arg as *mut Registration) };
    registration.result = Some(registration.run());
    let owner = registration.owner;
    let raw = Box::into_raw(registration);
    // SAFETY: registered_msg takes back the box on the owner thread.
    if let Err(rc) = unsafe { owner.send(registered_msg, raw.cast()) } {
        log::error!("cannot answer the owner thread of an HHC bdev being registered ({}); it stays starting", errno::describe(rc));
    }
}

unsafe extern "C" fn registered_msg(arg: *mut c_void) {
    // SAFETY: arg is the box register_msg sent, delivered once.
    let registration = unsafe { Box::from_raw(arg as *mut Registration) };
    // SAFETY: the node does not go while it is registering (advance_phase).
    let node = unsafe { &*registration.node };
    let result = registration.result.expect("registered");
    node.core.enter(|core| core.registered(result)).expect("messages run outside the node");
    node.run();
}

unsafe extern "C" fn free_node(arg: *mut c_void) {
    // SAFETY: arg came from Box::leak in start_node, and finish_destruct
    // (its only sender) runs once per node.
    let node = unsafe { Box::from_raw(arg as *mut Node) };
    assert!(node.core.on_owner_thread(), "free message off the owner thread");
    drop(node);
}

impl Core {
    pub(super) fn start_probe(&mut self) {
        if self.params.is_direct() {
            let blocks_count = self.config.backing_device_bytes / self.config.block_size as u64;
            let requests_max = self.config.requests_max as usize;
            self.direct = Some(crate::direct::Direct::new(self.config.block_size, blocks_count, requests_max));
            self.phase = Phase::Starting;
            return;
        }
        let mut region = DmaAllocator.alloc(UNIT_BYTES);
        let iov = super::iov::region_iovec(region.as_mut_slice(), 0, UNIT_BYTES as u64);
        self.probe = Some(region);
        if let Err(status) = self.submit_probe(iov, UNIT_BYTES as u64) {
            self.fail(Error::Failed(format!("cannot read the cache bdev's superblock ({status:?})")));
        }
    }

    pub(super) fn probe_done(&mut self, status: IoStatus) {
        if self.phase != Phase::Probing {
            self.probe = None;
            return;
        }
        if status != IoStatus::Ok {
            return self.fail(Error::Failed(format!("reading unit 0 of cache bdev '{}' failed", self.params.cache)));
        }
        let mut region = self.probe.take().expect("probe buffer");
        let mode = match CacheSuperblock::decode(region.as_mut_slice()) {
            Ok(superblock) if !self.force_format => {
                if superblock.block_size != self.config.block_size {
                    return self.fail(Error::InvalidParams(format!(
                        "block_size {}: cache bdev '{}' holds an HHC cache with block size {}",
                        self.config.block_size, self.params.cache, superblock.block_size
                    )));
                }
                log::info!("{}: warm start from cache bdev {} (instance {:#x})", self.params.name, self.params.cache, superblock.instance_id);
                self.config.instance_id = superblock.instance_id;
                StartMode::Open
            }
            Err(FormatError::UnsupportedVersion(version))
                if !self.force_format && region.as_mut_slice().starts_with(&CACHE_SUPERBLOCK_MAGIC.to_le_bytes()) =>
            {
                // Formatting over it would drop what it holds dirty.
                return self.fail(Error::InvalidParams(format!(
                    "cache: bdev '{}' holds an HHC cache of format version {version}; this build reads version {FORMAT_VERSION}: \
                     write its dirty blocks back with the build that made it (bdev_hhc_flush_all), or zero its first unit to format it anew",
                    self.params.cache
                )));
            }
            _ => {
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
            Err(error) => self.fail(error.into()),
        }
    }

    /// Moves between phases once the engine or the recovery says so.
    pub(super) fn advance_phase(&mut self) {
        let state = self.engine.as_ref().map(|e| e.state().clone());
        match (self.phase, state) {
            (Phase::Starting, Some(EngineState::Ready)) => self.register(),
            (Phase::Starting, None) if self.direct.is_some() => self.register(),
            (Phase::Starting | Phase::Running | Phase::Stopping, Some(EngineState::Failed(reason))) => {
                self.fail(Error::from(&reason))
            }
            (Phase::Stopping, Some(EngineState::Stopped)) => {
                log::info!("{}: stopped cleanly", self.params.name);
                self.phase = Phase::Done;
            }
            (Phase::Failed, _) if self.engine_ios == 0 && self.probe.is_none() => self.after_failure_drained(),
            _ => {}
        }
        // Not while the app thread registers its bdev: that bdev points here.
        if self.phase == Phase::Done && self.destructing && !self.registering && !self.channels_updating() {
            self.finish_destruct();
        }
    }

    /// Registers the bdev: at once on the app thread, the only one that
    /// may; from an owner thread of its own, through a message there and
    /// one back (`registered`). Meanwhile the node serves what reaches it
    /// (other modules examine a bdev as it registers).
    fn register(&mut self) {
        if self.registering {
            return;
        }
        let registration = match CString::new(self.params.name.as_str()) {
            Ok(name) => self.registration(name),
            Err(_) => return self.registered(Err(Error::InvalidParams(format!("name {:?} holds a NUL", self.params.name)))),
        };
        let app = Thread::app();
        if app == self.owner {
            let result = registration.run();
            return self.registered(result);
        }
        self.registering = true;
        let raw = Box::into_raw(Box::new(registration));
        // SAFETY: register_msg takes back the box; the node stays alive
        // while `registering` (advance_phase never frees it then).
        if let Err(rc) = unsafe { app.send(register_msg, raw.cast()) } {
            // SAFETY: the message was not queued; the box is still ours.
            drop(unsafe { Box::from_raw(raw) });
            self.registering = false;
            let error = Error::from_rc(rc, format!("cannot reach the app thread to register bdev '{}'", self.params.name));
            self.registered(Err(error));
        }
    }

    /// Whether requests are served: running, or with the bdev being
    /// registered (the engine is ready then).
    pub(super) fn serving(&self) -> bool {
        self.phase == Phase::Running || self.registering
    }

    /// How registering the bdev went.
    fn registered(&mut self, result: Result<*mut sys::hhc_glue_node, Error>) {
        self.registering = false;
        let error = match result {
            Ok(glue) if self.phase == Phase::Starting => {
                self.glue = glue;
                self.phase = Phase::Running;
                self.served = true;
                let blocks_count = self.blocks_count();
                log::info!("{}: registered ({} policy, {} blocks of {} bytes, owner thread {})", self.params.name, self.config.policy, blocks_count, self.config.block_size, self.owner.describe());
                self.start_wanted_policy();
                self.start_wanted_options();
                self.sync_owner_record();
                self.publish();
                let reply = json::string(&self.params.name);
                return self.reply(Ok(&reply));
            }
            Ok(glue) => {
                // The node failed while its bdev was being registered (and
                // answered the create call then): the bdev goes again, and
                // its destruct ends the node.
                self.glue = glue;
                self.destructing = false;
                self.unregister_sent = true;
                // SAFETY: glue is our bdev, just registered; destruct follows.
                unsafe { sys::hhc_glue_node_unregister(glue) };
                return;
            }
            Err(_) if self.phase != Phase::Starting => return,
            Err(error) => error,
        };
        // The engine formatted/opened the devices already; stop it cleanly
        // so the cache stays consistent, then report.
        self.failure = Some(error.message().to_string());
        self.reply(Err(&error));
        self.destructing = true;
        match self.engine.as_mut() {
            Some(engine) => {
                engine.shutdown(now_ns());
                self.phase = Phase::Stopping;
            }
            None => self.phase = Phase::Done,
        }
    }

    fn blocks_count(&self) -> u64 {
        match &self.direct {
            Some(direct) => direct.blocks_count(),
            None => self.engine.as_ref().map_or(0, Engine::blocks_count),
        }
    }

    /// Reads and writes longer than this are split by the bdev layer: 1 MiB,
    /// within what one engine request may span.
    fn max_rw_blocks(&self) -> u32 {
        ((1u32 << 20) / self.config.block_size).clamp(1, self.config.request_blocks_max)
    }

    fn registration(&self, name: CString) -> Registration {
        Registration {
            name,
            block_size: self.config.block_size,
            blocks_count: self.blocks_count(),
            alignment_log2: self.bases.all().iter().map(|b| b.info.required_alignment_log2).max().unwrap_or(0),
            max_rw_blocks: self.max_rw_blocks(),
            instance_id: self.config.instance_id,
            node: self.node,
            owner: self.owner,
            result: None,
        }
    }

    /// The node fails with `error` (its kind answers a create RPC still
    /// waiting).
    pub(super) fn fail(&mut self, error: Error) {
        if matches!(self.phase, Phase::Failed | Phase::Done) || self.phase.is_record() {
            return;
        }
        let reason = error.message().to_string();
        log::error!("{}: {reason}", self.params.name);
        let creating = matches!(self.phase, Phase::Probing | Phase::Starting);
        if creating {
            self.reply(Err(&error.with_message(format!("cannot create '{}': {reason}", self.params.name))));
            self.destructing = true;
        }
        self.failure = Some(reason);
        self.phase = Phase::Failed;
    }

    fn after_failure_drained(&mut self) {
        if self.cache_lost && self.served && !self.destructing {
            return self.keep_record();
        }
        let recoverable = self.cache_lost && self.policy().uses_log() && self.engine.is_some();
        if recoverable {
            self.start_recovery();
            if self.phase == Phase::Recovering {
                return;
            }
        }
        let policy = self.policy();
        if self.cache_lost && policy.is_write_back() && !policy.uses_log() {
            log::error!("{}: cache lost under policy {policy}: dirty data is gone", self.params.name);
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

    /// The cache is gone: nothing may be served from it, so the bdev goes
    /// now; the node stays, as a record of the replay (if the policy has a
    /// log to replay) that the operator reads and acts on.
    fn keep_record(&mut self) {
        let policy = self.policy();
        if policy.uses_log() && self.engine.is_some() {
            self.start_recovery();
        } else if policy.is_write_back() && policy != Policy::WriteBackFlush {
            let error = format!("cache lost under policy {policy}: dirty data is gone");
            log::error!("{}: {error}", self.params.name);
            self.recovery_progress = Some(RecoveryProgress::without_log(Some(error)));
            self.phase = Phase::RecoveryFailed;
        } else {
            // wt and passthrough keep nothing dirty; wb-flush writes every
            // flushed block back before the flush completes.
            log::warn!("{}: cache lost under policy {policy}: every flushed write is on the backing bdev", self.params.name);
            self.recovery_progress = Some(RecoveryProgress::without_log(None));
            self.phase = Phase::Recovered;
        }
        self.unregister();
    }

    /// The bdev's destruct, on the owner thread.
    pub(super) fn begin_destruct(&mut self) {
        self.destructing = true;
        if self.channels_updating() {
            // Ending the destruct unregisters the io_device, which SPDK
            // refuses while an iteration over its channels runs.
            self.destruct_waits = true;
            return;
        }
        match self.phase {
            Phase::Running if self.direct.is_some() => {
                self.phase = Phase::Done;
                self.finish_destruct();
            }
            phase if phase.is_record() => self.bdev_gone(),
            Phase::Running => {
                self.engine.as_mut().expect("engine").shutdown(now_ns());
                self.phase = Phase::Stopping;
            }
            Phase::Done => self.finish_destruct(),
            _ => {}
        }
    }

    /// A record's bdev finished unregistering; the node stays.
    fn bdev_gone(&mut self) {
        // SAFETY: glue is our registered bdev in its destruct; called once.
        unsafe { sys::hhc_glue_node_destruct_done(self.glue) };
        self.glue = std::ptr::null_mut();
        self.destructing = false;
        log::info!("{}: bdev unregistered; its record stays until bdev_hhc_recover or bdev_hhc_delete", self.params.name);
    }

    /// Closes everything, drops the node from the registry, ends the bdev's
    /// destruct and frees the node from a message to its owner thread, once
    /// no caller up the stack uses it.
    pub(super) fn finish_destruct(&mut self) {
        self.bases.close_all();
        if !self.poller.is_null() {
            // SAFETY: the poller was started for this node and is stopped once.
            unsafe { sys::hhc_glue_poller_stop(self.poller) };
            self.poller = std::ptr::null_mut();
        }
        registry::remove(self.node);
        if !self.glue.is_null() {
            // SAFETY: glue is our registered bdev in its destruct; called once.
            unsafe { sys::hhc_glue_node_destruct_done(self.glue) };
            self.glue = std::ptr::null_mut();
        }
        self.destructing = false;
        // SAFETY: free_node gets the node, which nothing uses after this
        // message: it is out of the registry, its poller stopped, its bdev gone.
        if let Err(rc) = unsafe { self.owner.send(free_node, self.node as *mut c_void) } {
            log::error!("cannot send the message that frees an HHC node ({}); leaking it", errno::describe(rc));
        }
    }

    // ---- cache loss: replay the log onto the backing device ----

    /// Starts the scan and replay of the surviving log mirrors (again, for
    /// a retry); without any, the record says the data is lost.
    pub(super) fn start_recovery(&mut self) {
        let layout = *self.engine.as_ref().expect("engine").log_layout();
        let mirrors: Vec<u8> =
            (0..self.config.mirrors_count).filter(|&i| !self.bases.get(DeviceRole::Log(i)).removed).collect();
        if mirrors.is_empty() {
            let error = "cache and every log mirror lost; dirty data cannot be recovered".to_string();
            log::error!("{}: {error}", self.params.name);
            self.recovery_progress = Some(RecoveryProgress::without_log(Some(error)));
            self.phase = Phase::RecoveryFailed;
            return;
        }
        log::warn!("{}: cache lost; replaying the log ({} mirrors) onto backing bdev {}", self.params.name, mirrors.len(), self.params.backing);
        self.recovery = Some(Recovery::new(layout, mirrors, self.config.backing_has_flush, self.config.instance_id));
        self.phase = Phase::Recovering;
    }

    pub(super) fn advance_recovery(&mut self) {
        let Some(recovery) = self.recovery.as_mut() else { return };
        let Some(progress) = recovery.finished(&self.params.name, &self.params.backing) else { return };
        self.recovery = None;
        let replayed = progress.stage == RecoveryStage::Done;
        self.recovery_progress = Some(progress);
        // A bdev_hhc_delete before the loss still ends the node.
        self.phase = match (self.destructing, replayed) {
            (true, _) => Phase::Done,
            (false, true) => Phase::Recovered,
            (false, false) => Phase::RecoveryFailed,
        };
        if self.phase == Phase::Done {
            self.unregister();
        }
    }

    /// The recovery's progress: the running one's, else how the last ended.
    pub(super) fn recovery_now(&self) -> Option<RecoveryProgress> {
        self.recovery.as_ref().map(Recovery::progress).or_else(|| self.recovery_progress.clone())
    }

    /// Answers the pending create call, if it has not been answered yet.
    fn reply(&mut self, result: Result<&str, &Error>) {
        if let Some(rpc) = self.rpc.take() {
            rpc.reply(result);
        }
    }
}

fn random_instance_id() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most bytes.len() bytes into bytes.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    let random = if got == bytes.len() as isize { u64::from_le_bytes(bytes) } else { now_ns() };
    random | 1
}
