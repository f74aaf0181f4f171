//! The life of a node: open its bases, probe the cache bdev (new or warm),
//! start the engine, register the bdev, serve; then stop cleanly for
//! destruct, or fail and unregister (teardown.rs). A node that served and
//! lost its cache unregisters its bdev at once and stays as a record
//! (record.rs, recover.rs) while the log is replayed onto the backing bdev
//! and after. Messages about a node go to its owner thread. This room
//! starts a node (takeover.rs: after replaying another host's log); its
//! other two children end one; none imports from here.

mod record;
pub(super) mod takeover;
mod teardown;

pub use teardown::destruct;

use super::base::{Bases, COMMANDS_BESIDE_ENGINE};
use super::errno::{self, Error};
use super::memory::DmaAllocator;
use super::node::{Core, Node, Phase};
use super::owner::{now_ns, Thread};
use super::params::CreateParams;
use super::registry;
use super::rpc::Rpc;
use super::sys;
use crate::engine::{Engine, EngineState, StartMode};
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
    let direct = params.is_direct();
    let node = Node::new(params.clone());
    let address = &*node as *const Node as *const c_void;
    let mut bases = Bases::open(address, &roles)?;
    let facts: Vec<_> = bases.all().iter().map(|b| b.facts()).collect();
    let config = if direct { params.direct_config(facts[0]) } else { params.config(facts[0], facts[1], &facts[2..]) };
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
    let warnings = size_warnings(&params, &facts);
    for warning in &warnings {
        log::warn!("{}: {warning}", params.name);
    }
    node.core
        .enter(|core| {
            core.config = config;
            core.bases = bases;
            core.warnings = warnings;
        })
        .expect("a new node is not entered");
    Ok(node)
}

/// What is allowed but likely a mistake in the sizes of the bases (shown
/// in the log and in `warnings` of `bdev_hhc_get_bdevs` and `get_stats`).
fn size_warnings(params: &CreateParams, facts: &[super::params::BaseFacts]) -> Vec<String> {
    let mut warnings = Vec::new();
    if let [backing, cache, ..] = facts {
        if !params.is_direct() && cache.bytes() > backing.bytes() {
            let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
            warnings.push(format!(
                "cache bdev {} ({:.1} MiB) is larger than backing bdev {} ({:.1} MiB): the cache can never hold more than the backing bdev, {:.1} MiB of it stay unused",
                params.cache,
                mib(cache.bytes()),
                params.backing,
                mib(backing.bytes()),
                mib(cache.bytes() - backing.bytes())
            ));
        }
    }
    warnings
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
        let Phase::Probing { format_anyway } = self.phase else {
            self.probe = None;
            return;
        };
        if status != IoStatus::Ok {
            return self.fail(Error::Failed(format!("reading unit 0 of cache bdev '{}' failed", self.params.cache)));
        }
        let mut region = self.probe.take().expect("probe buffer");
        let mode = match CacheSuperblock::decode(region.as_mut_slice()) {
            Ok(superblock) if self.params.takeover => {
                return self.fail(Error::InvalidParams(format!(
                    "takeover: cache bdev '{}' holds an HHC cache (instance {:#x}); a takeover formats its cache: \
                     give an unused bdev, or wipe this one first (bdev_hhc_forget -c {} --force)",
                    self.params.cache, superblock.instance_id, self.params.cache
                )));
            }
            Ok(superblock) if !format_anyway => {
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
                if !format_anyway && region.as_mut_slice().starts_with(&CACHE_SUPERBLOCK_MAGIC.to_le_bytes()) =>
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
                if self.params.takeover {
                    return self.start_takeover();
                }
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
            // A takeover's replay drains first: its buffers go with it.
            (Phase::Failed, _) if self.engine_ios == 0 && self.probe.is_none() && self.recovery.is_none() => {
                self.after_failure_drained()
            }
            _ => {}
        }
        // Not while the app thread registers its bdev: that bdev points here.
        if self.phase == Phase::Done && self.bdev.node_may_end() && !self.channels_updating() {
            self.finish_destruct();
        }
    }

    /// Registers the bdev: at once on the app thread, the only one that
    /// may; from an owner thread of its own, through a message there and
    /// one back (`registered`). Meanwhile the node serves what reaches it
    /// (other modules examine a bdev as it registers).
    fn register(&mut self) {
        if self.bdev.is_registering() {
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
        self.bdev.start_registering();
        let raw = Box::into_raw(Box::new(registration));
        // SAFETY: register_msg takes back the box; the node stays alive
        // while its bdev is registering (advance_phase never frees it then).
        if let Err(rc) = unsafe { app.send(register_msg, raw.cast()) } {
            // SAFETY: the message was not queued; the box is still ours.
            drop(unsafe { Box::from_raw(raw) });
            let error = Error::from_rc(rc, format!("cannot reach the app thread to register bdev '{}'", self.params.name));
            self.registered(Err(error));
        }
    }

    /// Whether requests are served: running, or with the bdev being
    /// registered (the engine is ready then).
    pub(super) fn serving(&self) -> bool {
        self.phase == Phase::Running || self.bdev.is_registering()
    }

    /// How registering the bdev went.
    fn registered(&mut self, result: Result<*mut sys::hhc_glue_node, Error>) {
        let error = match result {
            Ok(glue) if self.phase == Phase::Starting => {
                self.bdev.registered(glue);
                self.phase = Phase::Running;
                let blocks_count = self.blocks_count();
                log::info!("{}: registered ({} policy, {} blocks of {} bytes, owner thread {})", self.params.name, self.config.policy, blocks_count, self.config.block_size, self.owner.describe());
                self.start_wanted_policy();
                self.keep_saved_options();
                self.start_wanted_options();
                self.sync_owner_record();
                self.publish();
                let reply = self.created_answer();
                return self.reply(Ok(&reply));
            }
            Ok(glue) => {
                // The node failed while its bdev was being registered (and
                // answered the create call then): the bdev goes again, and
                // its destruct ends the node.
                self.bdev.withdraw(glue);
                // SAFETY: glue is our bdev, just registered; destruct follows.
                unsafe { sys::hhc_glue_node_unregister(glue) };
                return;
            }
            Err(_) if self.phase != Phase::Starting => return self.bdev.release(),
            Err(error) => error,
        };
        // The engine formatted/opened the devices already; stop it cleanly
        // so the cache stays consistent, then report.
        self.failure = Some(error.message().to_string());
        self.reply(Err(&error));
        self.bdev.release();
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
