//! The `hhc_rs_*` functions the C shim calls, and the registry of nodes.
//! Each turns raw pointers from C back into the Rust objects they came from.

use super::logger;
use super::node::{Base, BaseCtx, Channel, Node, Phase, Submission, CHANNEL_IN_FLIGHT_MAX};
use super::params::{BaseFacts, CreateParams};
use super::sys;
use crate::config::ConfigError;
use crate::io::{DeviceRole, RequestKind};
use crossbeam_queue::ArrayQueue;
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Mutex;

/// JSON-RPC "invalid params".
const JSONRPC_INVALID_PARAMS: i32 = -32602;

/// Every live node, as addresses (nodes are boxed and never move).
static NODES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn nodes() -> Vec<&'static Node> {
    let addresses = NODES.lock().expect("node registry").clone();
    // SAFETY: a node stays registered until forget_node, which runs on the
    // node's owner thread before it is freed (later, by message).
    addresses.into_iter().map(|a| unsafe { &*(a as *const Node) }).collect()
}

pub fn reply_error(rpc: *mut sys::hhc_glue_rpc, code: i32, message: &str) {
    let message = CString::new(message.replace('\0', " ")).expect("NUL bytes were replaced");
    // SAFETY: rpc is a pending request answered exactly once, here.
    unsafe { sys::hhc_glue_rpc_reply_error(rpc, code, message.as_ptr()) }
}

fn reply_raw(rpc: *mut sys::hhc_glue_rpc, text: &str) {
    // SAFETY: as in reply_error; text outlives the call.
    unsafe { sys::hhc_glue_rpc_reply_raw(rpc, text.as_ptr().cast(), text.len()) }
}

/// Copies a C string; NULL becomes None.
fn text(ptr: *const c_char) -> Option<String> {
    // SAFETY: C passes NULL or a NUL-terminated string valid for this call.
    (!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned())
}

fn given(value: u32) -> Option<u32> {
    (value != sys::HHC_GLUE_UNSET).then_some(value)
}

fn decode_params(raw: &sys::hhc_glue_create_params) -> Result<CreateParams, ConfigError> {
    let logs_count = raw.logs_count.min(raw.logs.len());
    CreateParams::new(
        text(raw.name).unwrap_or_default(),
        text(raw.backing).unwrap_or_default(),
        text(raw.cache).unwrap_or_default(),
        raw.logs[..logs_count].iter().map(|&l| text(l).unwrap_or_default()).collect(),
        text(raw.policy).as_deref(),
        given(raw.block_size),
        given(raw.segment_size),
        given(raw.buffer_count),
        given(raw.dirty_threshold),
    )
}

/// Whether a bdev of this name exists; a name no bdev can have does not.
fn bdev_exists(name: &str) -> bool {
    let Ok(name) = CString::new(name) else { return false };
    // SAFETY: valid C string for the call.
    unsafe { sys::hhc_glue_bdev_exists(name.as_ptr()) }
}

#[no_mangle]
pub extern "C" fn hhc_rs_create(raw: *const sys::hhc_glue_create_params, rpc: *mut sys::hhc_glue_rpc) {
    logger::install();
    // SAFETY: C passes a decoded parameter block valid for this call.
    let raw = unsafe { &*raw };
    let params = match decode_params(raw) {
        Ok(params) => params,
        Err(error) => return reply_error(rpc, JSONRPC_INVALID_PARAMS, &error.0),
    };
    if let Some(node) = nodes().into_iter().find(|n| n.try_core().is_some_and(|c| c.params.name == params.name)) {
        return create_existing(node, &params, rpc);
    }
    if bdev_exists(&params.name) {
        return reply_error(rpc, -libc::EEXIST, &format!("name: a bdev named '{}' already exists", params.name));
    }
    forget_pending(&params.name);
    match open_node(params) {
        Ok(node) => start_node(node, rpc),
        Err((code, message)) => reply_error(rpc, code, &message),
    }
}

/// A create call for an HHC bdev that exists already (examine assembled it,
/// or a config is loaded twice): the same devices make it a success, answered
/// once the bdev is registered; anything else is a name clash.
fn create_existing(node: &Node, params: &CreateParams, rpc: *mut sys::hhc_glue_rpc) {
    let mut core = node.core();
    let (a, b) = (&core.params, params);
    if (&a.backing, &a.cache, &a.logs, a.policy) != (&b.backing, &b.cache, &b.logs, b.policy) {
        drop(core);
        return reply_error(rpc, -libc::EEXIST, &format!("name: an HHC bdev named '{}' already exists with other devices", params.name));
    }
    match core.phase {
        Phase::Running => {
            drop(core);
            log::info!("{}: exists already with these devices", params.name);
            reply_raw(rpc, &super::json::string(&params.name));
        }
        Phase::Probing | Phase::Starting if core.rpc.is_null() => core.rpc = rpc,
        _ => {
            drop(core);
            reply_error(rpc, -libc::EBUSY, &format!("name: HHC bdev '{}' is being created or deleted", params.name));
        }
    }
}

// ---- examine: assembling an HHC bdev from its cache device ----

/// Create parameters found in the superblocks of examined cache bdevs whose
/// other devices have not all arrived yet.
static PENDING: Mutex<Vec<CreateParams>> = Mutex::new(Vec::new());

fn forget_pending(name: &str) {
    PENDING.lock().expect("pending examine records").retain(|p| p.name != name);
}

/// Unit 0 of a newly registered bdev: if it is an HHC cache device whose
/// superblock records how it was created, the bdev is assembled as soon as
/// its backing and log bdevs are all there.
#[no_mangle]
pub extern "C" fn hhc_rs_examine_disk(name: *const c_char, unit: *const u8, len: usize) {
    logger::install();
    let Some(name) = text(name) else { return };
    // SAFETY: C passes the buffer it read unit 0 into, valid for this call.
    let unit = unsafe { std::slice::from_raw_parts(unit, len) };
    let Ok(superblock) = crate::format::CacheSuperblock::decode(unit) else { return };
    let mut params = match CreateParams::from_owner_record(&superblock.owner) {
        Ok(Some(params)) => params,
        Ok(None) => {
            log::info!("examine: bdev {name} holds an HHC cache (instance {:#x}) without create parameters; use bdev_hhc_create", superblock.instance_id);
            return;
        }
        Err(error) => {
            log::warn!("examine: bdev {name} holds an HHC cache (instance {:#x}) whose {error}; not assembled, bdev left unclaimed; use bdev_hhc_create", superblock.instance_id);
            return;
        }
    };
    params.cache = name.clone();
    if nodes().into_iter().any(|n| n.try_core().is_none_or(|c| c.params.name == params.name)) {
        return;
    }
    log::info!(
        "examine: bdev {name} is the cache of HHC bdev '{}' (backing {}, logs {}); assembling it once they are all present",
        params.name,
        params.backing,
        params.logs.join(",")
    );
    let mut pending = PENDING.lock().expect("pending examine records");
    pending.retain(|p| p.name != params.name);
    pending.push(params);
    drop(pending);
    assemble_ready();
}

/// A bdev arrived: it may be the last device a recorded HHC bdev waits for.
#[no_mangle]
pub extern "C" fn hhc_rs_examine_config(name: *const c_char) {
    let Some(name) = text(name) else { return };
    let wanted = PENDING.lock().expect("pending examine records").iter().any(|p| p.backing == name || p.logs.contains(&name));
    if wanted {
        assemble_ready();
    }
}

fn assemble_ready() {
    let ready: Vec<CreateParams> = {
        let mut pending = PENDING.lock().expect("pending examine records");
        let (ready, waiting) = pending.drain(..).partition(|p: &CreateParams| {
            bdev_exists(&p.backing) && bdev_exists(&p.cache) && p.logs.iter().all(|l| bdev_exists(l))
        });
        *pending = waiting;
        ready
    };
    for params in ready {
        if bdev_exists(&params.name) {
            log::warn!("examine: a bdev named '{}' exists already; HHC bdev not assembled", params.name);
            continue;
        }
        let name = params.name.clone();
        match open_node(params) {
            Ok(node) => {
                log::info!("examine: assembling HHC bdev '{name}'");
                start_node(node, std::ptr::null_mut());
            }
            Err((_, message)) => log::warn!("examine: cannot assemble HHC bdev '{name}': {message}"),
        }
    }
}

/// Opens and claims every base bdev, checks them against the parameters and
/// gets the owner thread's channels. On error everything is closed again.
fn open_node(params: CreateParams) -> Result<Box<Node>, (i32, String)> {
    let mut roles = vec![(DeviceRole::Backing, params.backing.clone()), (DeviceRole::Cache, params.cache.clone())];
    roles.extend(params.logs.iter().enumerate().map(|(i, l)| (DeviceRole::Log(i as u8), l.clone())));
    let node = Node::new(params.clone(), Default::default());
    let node_ptr: *const Node = &*node;
    let mut bases: Vec<Base> = Vec::with_capacity(roles.len());
    let result = (|| {
        for (role, name) in roles {
            bases.push(open_base(node_ptr, role, name)?);
        }
        let facts: Vec<BaseFacts> = bases.iter().map(|b| facts(&b.info)).collect();
        let config = params.config(facts[0], facts[1], &facts[2..]).map_err(|e| (JSONRPC_INVALID_PARAMS, e.0))?;
        for base in &bases {
            // SAFETY: base.glue was just opened on this (the owner) thread.
            let rc = unsafe { sys::hhc_glue_base_get_channel(base.glue) };
            if rc != 0 {
                return Err((rc, format!("cannot get an I/O channel for bdev '{}'", base.name)));
            }
        }
        Ok(config)
    })();
    match result {
        Ok(config) => {
            let mut core = node.core();
            core.set_config(config);
            for base in bases {
                core.add_base(base);
            }
            drop(core);
            Ok(node)
        }
        Err(error) => {
            for base in bases {
                // SAFETY: each was opened above and is closed once; no I/O ran.
                unsafe { sys::hhc_glue_base_close(base.glue) };
            }
            Err(error)
        }
    }
}

fn open_base(node: *const Node, role: DeviceRole, name: String) -> Result<Base, (i32, String)> {
    let ctx = Box::new(BaseCtx { node, role });
    let Ok(c_name) = CString::new(name.clone()) else {
        return Err((JSONRPC_INVALID_PARAMS, format!("bdev name {name:?} holds a NUL")));
    };
    let mut glue = std::ptr::null_mut();
    // SAFETY: valid C string; ctx stays boxed (stable address) inside Base
    // for as long as C may call back with it; glue is an out pointer.
    let rc = unsafe { sys::hhc_glue_base_open(c_name.as_ptr(), &*ctx as *const BaseCtx as *mut c_void, &mut glue) };
    let what = match role {
        DeviceRole::Log(_) => "logs".to_string(),
        other => other.to_string(),
    };
    match rc {
        0 => {}
        rc if rc == -libc::ENODEV => return Err((rc, format!("{what}: no bdev named '{name}'"))),
        rc if rc == -libc::EPERM || rc == -libc::EEXIST => {
            return Err((rc, format!("{what}: bdev '{name}' is already claimed by another module")))
        }
        rc => return Err((rc, format!("{what}: cannot open bdev '{name}': errno {}", -rc))),
    }
    let mut info = sys::hhc_glue_base_info {
        block_size: 0,
        blocks_count: 0,
        required_alignment_log2: 0,
        supports_flush: false,
        volatile_write_cache: false,
    };
    // SAFETY: glue is open; info is a valid out structure.
    unsafe { sys::hhc_glue_base_get_info(glue, &mut info) };
    Ok(Base::new(name, glue, ctx, info))
}

fn facts(info: &sys::hhc_glue_base_info) -> BaseFacts {
    BaseFacts { block_size: info.block_size, blocks_count: info.blocks_count, supports_flush: info.supports_flush }
}

fn start_node(node: Box<Node>, rpc: *mut sys::hhc_glue_rpc) {
    let node = Box::into_raw(node);
    NODES.lock().expect("node registry").push(node as usize);
    // SAFETY: node was just leaked; it is freed only by free_node.
    let node = unsafe { &*node };
    // SAFETY: node_poll gets the node pointer back, valid until the poller
    // is stopped in finish_destruct (before the node is freed).
    let poller = unsafe { sys::hhc_glue_poller_start(Some(node_poll), node as *const Node as *mut c_void, 0) };
    let mut core = node.core();
    core.poller = poller;
    core.rpc = rpc;
    core.start_probe();
    drop(core);
    node.run();
}

unsafe extern "C" fn node_poll(arg: *mut c_void) -> c_int {
    // SAFETY: arg is a live node (see start_node).
    let node = unsafe { &*(arg as *const Node) };
    node.poll() as c_int
}

/// Drops a finished node from the registry, ends the bdev's destruct and
/// frees the node from a message, once no caller up the stack uses it.
pub fn forget_node(node: *const Node, glue: *mut sys::hhc_glue_node) {
    NODES.lock().expect("node registry").retain(|&a| a != node as usize);
    if !glue.is_null() {
        // SAFETY: glue is our registered bdev in its destruct; called once.
        unsafe { sys::hhc_glue_node_destruct_done(glue) };
    }
    // SAFETY: sends to the calling (owner) thread; free_node gets the node.
    let rc = unsafe { sys::hhc_glue_thread_send(sys::hhc_glue_thread_current(), Some(free_node), node as *mut c_void) };
    if rc != 0 {
        log::error!("cannot send the message that frees an HHC node (errno {}); leaking it", -rc);
    }
}

unsafe extern "C" fn free_node(arg: *mut c_void) {
    // SAFETY: arg came from Box::into_raw in start_node, and forget_node
    // (its only sender) runs once per node.
    drop(unsafe { Box::from_raw(arg as *mut Node) });
}

#[no_mangle]
pub extern "C" fn hhc_rs_get_bdevs(name: *const c_char, rpc: *mut sys::hhc_glue_rpc) {
    let wanted = text(name);
    let infos: Vec<String> = nodes()
        .into_iter()
        .filter_map(|node| node.try_core().map(|core| (core.params.name.clone(), core.info_json())))
        .filter(|(n, _)| wanted.as_ref().is_none_or(|w| w == n))
        .map(|(_, info)| info)
        .collect();
    match wanted {
        Some(w) if infos.is_empty() => reply_error(rpc, -libc::ENODEV, &format!("no HHC bdev named '{w}'")),
        _ => reply_raw(rpc, &super::json::array(infos)),
    }
}

#[no_mangle]
pub extern "C" fn hhc_rs_module_fini() {
    let left = NODES.lock().expect("node registry").len();
    if left > 0 {
        log::warn!("module fini with {left} HHC bdevs still alive");
    }
}

fn base_ctx<'a>(rs_base: *mut c_void) -> (&'a BaseCtx, &'a Node) {
    // SAFETY: rs_base is the BaseCtx given to hhc_glue_base_open, alive
    // until the base is closed, after which C never calls back with it; its
    // node outlives its bases.
    unsafe {
        let ctx = &*(rs_base as *const BaseCtx);
        (ctx, &*ctx.node)
    }
}

#[no_mangle]
pub extern "C" fn hhc_rs_base_io_done(rs_base: *mut c_void, tag: u64, status: c_int) {
    let (ctx, node) = base_ctx(rs_base);
    node.base_done(ctx.role, tag, status);
}

#[no_mangle]
pub extern "C" fn hhc_rs_base_removed(rs_base: *mut c_void) {
    let (ctx, node) = base_ctx(rs_base);
    node.base_removed(ctx.role);
}

#[no_mangle]
pub extern "C" fn hhc_rs_node_submit(
    rs_node: *mut c_void,
    rs_channel: *mut c_void,
    io: *mut sys::hhc_glue_io,
    kind: sys::hhc_glue_io_kind,
    lba: u64,
    blocks_count: u64,
) {
    // SAFETY: the channel context belongs to the calling thread and lives
    // while its requests are outstanding.
    let channel = unsafe { &*(rs_channel as *const Channel) };
    let kind = match kind {
        sys::hhc_glue_io_kind::HHC_GLUE_IO_READ => RequestKind::Read,
        sys::hhc_glue_io_kind::HHC_GLUE_IO_WRITE => RequestKind::Write,
        sys::hhc_glue_io_kind::HHC_GLUE_IO_FLUSH => RequestKind::Flush,
    };
    let submission = Submission { io, channel, kind, lba, blocks_count };
    // Back-pressure: the bdev layer retries -ENOMEM requests later.
    if channel.in_flight.get() >= CHANNEL_IN_FLIGHT_MAX || channel.shared.submissions.push(submission).is_err() {
        // SAFETY: io is the request being submitted on this thread.
        unsafe { sys::hhc_glue_io_complete(io, -libc::ENOMEM) };
        return;
    }
    channel.in_flight.set(channel.in_flight.get() + 1);
    if channel.on_owner {
        // SAFETY: on the owner thread the node is alive while bdev I/O flows.
        unsafe { &*(rs_node as *const Node) }.run();
    }
}

#[no_mangle]
pub extern "C" fn hhc_rs_node_destruct(rs_node: *mut c_void) -> c_int {
    // Destruct may be called from inside our own unregister call; continue
    // from a message so the node is never borrowed twice.
    // SAFETY: rs_node is alive until free_node; destruct_msg gets it back.
    let rc = unsafe { sys::hhc_glue_thread_send(sys::hhc_glue_thread_current(), Some(destruct_msg), rs_node) };
    assert_eq!(rc, 0, "cannot send the destruct message");
    1
}

unsafe extern "C" fn destruct_msg(arg: *mut c_void) {
    // SAFETY: see hhc_rs_node_destruct.
    let node = unsafe { &*(arg as *const Node) };
    node.core().begin_destruct();
    node.run();
}

fn write_json(json: *mut sys::hhc_glue_json, name: Option<&CStr>, text: &str) {
    let name = name.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: json is the writer C handed us for this call; text outlives it.
    unsafe { sys::hhc_glue_json_write_raw(json, name, text.as_ptr().cast(), text.len()) }
}

#[no_mangle]
pub extern "C" fn hhc_rs_node_dump_info(rs_node: *mut c_void, json: *mut sys::hhc_glue_json) {
    // SAFETY: the bdev (and so its node) is registered during this call.
    let node = unsafe { &*(rs_node as *const Node) };
    let info = node.try_core().map_or_else(|| "{\"state\":\"busy\"}".to_string(), |core| core.info_json());
    write_json(json, Some(c"hhc"), &info);
}

#[no_mangle]
pub extern "C" fn hhc_rs_node_write_config(rs_node: *mut c_void, json: *mut sys::hhc_glue_json) {
    // SAFETY: as in hhc_rs_node_dump_info.
    let node = unsafe { &*(rs_node as *const Node) };
    if let Some(core) = node.try_core() {
        write_json(json, None, &core.config_json());
    }
}

#[no_mangle]
pub extern "C" fn hhc_rs_channel_create(rs_node: *mut c_void) -> *mut c_void {
    // SAFETY: called while the bdev is registered, so the node is alive.
    let node = unsafe { &*(rs_node as *const Node) };
    // SAFETY: asks SPDK for the calling thread.
    let on_owner = unsafe { sys::hhc_glue_thread_current() } == node.owner;
    let channel = Box::new(Channel {
        shared: node.shared.clone(),
        on_owner,
        in_flight: Cell::new(0),
        completions: ArrayQueue::new(CHANNEL_IN_FLIGHT_MAX as usize),
    });
    Box::into_raw(channel).cast()
}

#[no_mangle]
pub extern "C" fn hhc_rs_channel_destroy(rs_channel: *mut c_void) {
    // SAFETY: rs_channel came from hhc_rs_channel_create and is destroyed once.
    let channel = unsafe { Box::from_raw(rs_channel as *mut Channel) };
    assert_eq!(channel.in_flight.get(), 0, "channel destroyed with requests in flight");
}

#[no_mangle]
pub extern "C" fn hhc_rs_channel_poll(rs_channel: *mut c_void) -> c_int {
    // SAFETY: the poller runs on the channel's thread while the channel lives.
    let channel = unsafe { &*(rs_channel as *const Channel) };
    let mut completed = 0;
    while let Some(finished) = channel.completions.pop() {
        channel.in_flight.set(channel.in_flight.get() - 1);
        // SAFETY: the request was submitted on this thread and is completed once.
        unsafe { sys::hhc_glue_io_complete(finished.io, finished.status) };
        completed += 1;
    }
    completed
}
