//! The bdev fn table's data-path entry points, the per-thread channels and
//! the base bdev callbacks: each turns raw pointers from C back into the
//! Rust objects they came from and hands over to the node.

use super::base::BaseCtx;
use super::lifecycle;
use super::node::Node;
use super::registry;
use super::request::{Channel, SubmitKind, Submission};
use super::sys;
use std::ffi::{c_int, c_void};

/// # Safety
/// `rs_base` is the BaseCtx given to hhc_glue_base_open, alive until the
/// base is closed, after which C never calls back with it; its node
/// outlives its bases.
unsafe fn base_ctx<'a>(rs_base: *mut c_void) -> (&'a BaseCtx, &'a Node) {
    // SAFETY: the function's contract.
    unsafe {
        let ctx = &*(rs_base as *const BaseCtx);
        (ctx, &*(ctx.node as *const Node))
    }
}

/// # Safety
/// See `base_ctx`; called on the owner thread (base channels are its).
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_base_io_done(rs_base: *mut c_void, tag: u64, status: c_int) {
    // SAFETY: the function's contract.
    let (ctx, node) = unsafe { base_ctx(rs_base) };
    node.base_done(ctx.role, tag, status);
}

/// # Safety
/// See `base_ctx`; called on the owner thread (the thread that opened it).
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_base_removed(rs_base: *mut c_void) {
    // SAFETY: the function's contract.
    let (ctx, node) = unsafe { base_ctx(rs_base) };
    node.base_removed(ctx.role);
}

/// # Safety
/// `rs_node` is a registered node, `rs_channel` the calling thread's channel
/// of it and `io` a bdev I/O submitted on that channel.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_node_submit(
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
    let submission = Submission { io, channel, kind: SubmitKind::from_glue(kind), lba, blocks_count };
    let result = if channel.on_owner {
        // SAFETY: the node is alive while bdev I/O flows.
        unsafe { &*(rs_node as *const Node) }.submit_on_owner(channel, submission)
    } else {
        channel.submit(submission)
    };
    if let Err(refusal) = result {
        // SAFETY: io is the request being submitted on this thread.
        unsafe { sys::hhc_glue_io_complete(io, refusal.status()) };
    }
}

/// Returns 1: the destruct finishes later, on the owner thread.
///
/// # Safety
/// `rs_node` is a registered node; the bdev layer destructs it once.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_node_destruct(rs_node: *mut c_void) -> c_int {
    // SAFETY: the function's contract.
    unsafe { lifecycle::destruct(rs_node as *const Node) };
    1
}

/// # Safety
/// `rs_node` is a registered node.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_channel_create(rs_node: *mut c_void) -> *mut c_void {
    // SAFETY: called while the bdev is registered, so the node is alive.
    let node = unsafe { &*(rs_node as *const Node) };
    Box::into_raw(Box::new(Channel::new(node.shared.clone(), node.core.owner()))).cast()
}

/// # Safety
/// `rs_channel` came from hhc_rs_channel_create and is destroyed once.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_channel_destroy(rs_channel: *mut c_void) {
    // SAFETY: the function's contract.
    let channel = unsafe { Box::from_raw(rs_channel as *mut Channel) };
    assert!(channel.idle(), "channel destroyed with requests in flight");
}

/// # Safety
/// `rs_channel` is a live channel of the calling thread.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_channel_poll(rs_channel: *mut c_void) -> c_int {
    // SAFETY: the poller runs on the channel's thread while the channel lives.
    let channel = unsafe { &*(rs_channel as *const Channel) };
    channel.poll() as c_int
}

#[no_mangle]
pub extern "C" fn hhc_rs_module_fini() {
    super::recover::drop_records();
    let left = registry::count();
    if left > 0 {
        log::warn!("module fini with {left} HHC bdevs still alive");
    }
}
