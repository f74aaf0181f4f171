//! The bdev fn table's data-path entry points, the per-thread channels and
//! the base bdev callbacks: each turns raw pointers from C back into the
//! Rust objects they came from and hands over to the node.

use super::base::{BaseCtx, Timing};
use super::io_tag::IoTag;
use super::lifecycle;
use super::node::{Core, Node};
use super::registry;
use super::request::{Channel, LaneDone, RequestIovs, SubmitKind, Submission};
use super::sys;
use libc::iovec;
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
pub unsafe extern "C" fn hhc_rs_base_io_done(rs_base: *mut c_void, tag: u64, status: c_int, kind: sys::hhc_glue_io_kind, latency_ns: u64) {
    // SAFETY: the function's contract.
    let (ctx, node) = unsafe { base_ctx(rs_base) };
    node.base_done(ctx.role, IoTag::unpack(tag), status, Timing { kind, latency_ns });
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
/// of it and `io` a bdev I/O submitted on that channel, whose buffers are
/// `iovs` (NULL for FLUSH and RESET) until it completes.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_node_submit(
    rs_node: *mut c_void,
    rs_channel: *mut c_void,
    io: *mut sys::hhc_glue_io,
    kind: sys::hhc_glue_io_kind,
    lba: u64,
    blocks_count: u64,
    iovs: *const iovec,
    iovs_count: c_int,
) {
    // SAFETY: the channel context belongs to the calling thread and lives
    // while its requests are outstanding.
    let channel = unsafe { &*(rs_channel as *const Channel) };
    let iovs = RequestIovs::new(iovs, iovs_count);
    let submission = Submission { io, channel, iovs, kind: SubmitKind::from_glue(kind), lba, blocks_count };
    let result = if channel.on_owner {
        // SAFETY: the node is alive while bdev I/O flows.
        unsafe { &*(rs_node as *const Node) }.submit_on_owner(channel, submission)
    } else if bypassed(channel, &submission) {
        Ok(())
    } else {
        // Run by the channel's poller in its next pass, with the others.
        channel.submit(submission)
    };
    if let Err(refusal) = result {
        // SAFETY: io is the request being submitted on this thread.
        unsafe { sys::hhc_glue_io_complete(io, refusal.status()) };
    }
}

/// Sends a request straight to the backing bdev if its channel has a route
/// (bypass.rs); a RESET never goes there.
fn bypassed(channel: &Channel, submission: &Submission) -> bool {
    match submission.kind {
        SubmitKind::Engine(kind) => channel.bypass.try_send(channel.lane, submission.io, kind, submission.lba, submission.blocks_count),
        SubmitKind::Reset => false,
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
/// `rs_node` is a registered node; `lane` is null or the calling thread's
/// lane for this channel, alive as long as it.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_channel_create(rs_node: *mut c_void, lane: *mut sys::hhc_glue_lane) -> *mut c_void {
    // SAFETY: called while the bdev is registered, so the node is alive.
    let node = unsafe { &*(rs_node as *const Node) };
    Box::into_raw(Channel::new(rs_node, node.shared.clone(), node.core.owner(), lane)).cast()
}

/// # Safety
/// `rs_channel` is a live channel of the calling thread, whose lane started
/// the command with this tag.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_lane_io_done(rs_channel: *mut c_void, tag: u64, status: c_int, kind: sys::hhc_glue_io_kind, latency_ns: u64) {
    // SAFETY: a lane command uses a request's buffer, so the request and
    // its channel are alive until the node has seen it back.
    let channel = unsafe { &*(rs_channel as *const Channel) };
    channel.push_lane_done(LaneDone { tag: IoTag::unpack(tag), status, timing: Timing { kind, latency_ns } });
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
    let completed = channel.poll_completions();
    // SAFETY: a channel that holds work holds requests, so its bdev is
    // registered and its node alive.
    let ran = channel.has_work() && unsafe { &*(channel.node as *const Node) }.run_channel(channel);
    let finished = channel.after_leaving_node();
    (completed + finished) as c_int + c_int::from(ran)
}

/// # Safety
/// `rs_channel` is the live channel of the calling thread on which `io`
/// was bypassed (`Channel::try_bypass`).
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_bypass_done(
    rs_channel: *mut c_void,
    io: *mut sys::hhc_glue_io,
    kind: sys::hhc_glue_io_kind,
    status: c_int,
    latency_ns: u64,
) {
    // SAFETY: the function's contract.
    let channel = unsafe { &*(rs_channel as *const Channel) };
    let SubmitKind::Engine(kind) = SubmitKind::from_glue(kind) else { unreachable!("a RESET is never bypassed") };
    // SAFETY: the function's contract.
    unsafe { channel.bypass.done(&channel.shared().bypass, io, kind, status, latency_ns) };
}

/// Returns 1 when answered now, 0 when the channel answers later through
/// hhc_glue_channels_answer (requests of it are out past the engine).
///
/// # Safety
/// `rs_channel` is a live channel of the calling thread; `iter` the owner's
/// iteration over the channels, paused here.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_channel_update(rs_channel: *mut c_void, iter: *mut c_void) -> c_int {
    // SAFETY: the function's contract.
    let channel = unsafe { &*(rs_channel as *const Channel) };
    c_int::from(channel.bypass.update(&channel.shared().bypass, channel.lane, iter))
}

/// # Safety
/// `rs_node` is a node whose owner (the calling thread) started the
/// iteration over its channels, which keeps the node alive.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_node_channels_updated(rs_node: *mut c_void) {
    // SAFETY: the function's contract.
    let node = unsafe { &*(rs_node as *const Node) };
    node.core.enter(Core::channels_updated).expect("messages run outside the node");
    node.run();
}

#[no_mangle]
pub extern "C" fn hhc_rs_module_fini() {
    super::recover::drop_records();
    let left = registry::count();
    if left > 0 {
        log::warn!("module fini with {left} HHC bdevs still alive");
    }
}
