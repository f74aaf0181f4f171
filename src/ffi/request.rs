//! The request path: bdev I/Os from every thread's channel, queued to the
//! node, kept in a table while the engine works on them and completed back
//! on their own thread. The thread that submits a request enters the node
//! to run it (owner.rs, `NodeCell`); the device commands that use a
//! request's buffers go out on its thread's lane (its own channels to the
//! backing and cache bdevs) and complete there, so a request that finds the
//! node free runs to completion on its own thread, as in `bdev_passthru`.
//! The rest of the engine's commands go out on the owner's channels. A
//! RESET is not the engine's: it completes, successfully, once every request
//! submitted before it is done.

use super::errno::{self, Refusal};
use super::iov::sub_range;
use super::bypass::{Bypass, ChannelBypass};
use super::base::Timing;
use super::io_tag::IoTag;
use super::channels::ResetDrain;
use super::owner::Thread;
use crate::histogram::Histogram;
use super::sys;
use crate::io::{DeviceIo, RequestCompletion, RequestKind};
use crate::slab::Slab;
use crossbeam_queue::ArrayQueue;
use libc::iovec;
use crate::queue::Rewind;
use std::cell::{Cell, UnsafeCell};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

/// Requests of the owner thread's own channel queued while its loop runs.
pub const SUBMISSIONS_MAX: usize = 4096;
/// Requests in flight per channel; also the size of its completion queue, so
/// pushing a completion can never fail.
pub const CHANNEL_IN_FLIGHT_MAX: u32 = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitKind {
    Engine(RequestKind),
    Reset,
}

impl SubmitKind {
    pub fn from_glue(kind: sys::hhc_glue_io_kind) -> SubmitKind {
        match kind {
            sys::hhc_glue_io_kind::HHC_GLUE_IO_READ => SubmitKind::Engine(RequestKind::Read),
            sys::hhc_glue_io_kind::HHC_GLUE_IO_WRITE => SubmitKind::Engine(RequestKind::Write),
            sys::hhc_glue_io_kind::HHC_GLUE_IO_FLUSH => SubmitKind::Engine(RequestKind::Flush),
            sys::hhc_glue_io_kind::HHC_GLUE_IO_RESET => SubmitKind::Reset,
        }
    }
}

/// A request on its way to the owner thread.
pub struct Submission {
    pub io: *mut sys::hhc_glue_io,
    pub channel: *const Channel,
    /// Its buffers (none for FLUSH and RESET), as the bdev layer keeps them
    /// until it completes: taken along from the submission, where C reads
    /// them from a bdev_io still in the CPU cache.
    pub iovs: RequestIovs,
    pub kind: SubmitKind,
    pub lba: u64,
    pub blocks_count: u64,
}

/// An outstanding request's iovec array, as C handed it in.
#[derive(Clone, Copy)]
pub struct RequestIovs {
    iovs: *const iovec,
    count: u32,
}

impl RequestIovs {
    pub fn new(iovs: *const iovec, count: i32) -> RequestIovs {
        match u32::try_from(count) {
            Ok(count) if !iovs.is_null() => RequestIovs { iovs, count },
            _ => RequestIovs { iovs: std::ptr::null(), count: 0 },
        }
    }

    /// The buffers.
    ///
    /// # Safety
    /// The request is outstanding; the slice must not be used after it completes.
    pub unsafe fn get<'a>(self) -> &'a [iovec] {
        if self.count == 0 {
            return &[];
        }
        // SAFETY: the bdev layer keeps a request's iovec array valid until it
        // completes, which the caller promises is later.
        unsafe { std::slice::from_raw_parts(self.iovs, self.count as usize) }
    }
}

// SAFETY: the pointers are only dereferenced on the owner thread (the I/O's
// iovecs, which the bdev layer keeps valid until completion) or used to push
// into the channel's lock-free completion queue.
unsafe impl Send for Submission {}

/// A finished request on its way back to the submitting thread.
pub struct Finished {
    io: *mut sys::hhc_glue_io,
    status: i32,
}

// SAFETY: only handed to hhc_glue_io_complete on the submitting thread.
unsafe impl Send for Finished {}

/// A lane's device command came back: its tag, status and timing.
pub struct LaneDone {
    pub tag: IoTag,
    pub status: i32,
    pub timing: Timing,
}

/// The part of a node other threads touch without entering it.
pub struct Shared {
    /// Commands a request thread left for the owner's channels; sized once
    /// the engine's bound on device commands is known.
    pub for_owner: OnceLock<ArrayQueue<DeviceIo>>,
    pub bypass: Bypass,
}

impl Shared {
    pub fn new() -> Arc<Shared> {
        Arc::new(Shared { for_owner: OnceLock::new(), bypass: Bypass::default() })
    }

    /// Sizes the queue for the owner for `count` device commands, once.
    pub fn size_commands(&self, count: usize) {
        let _ = self.for_owner.set(ArrayQueue::new(count));
    }

    /// Leaves a command for the owner's channels.
    pub fn push_for_owner(&self, io: DeviceIo) {
        let queue = self.for_owner.get().expect("a queue for the owner with an engine");
        assert!(queue.push(io).is_ok(), "commands for the owner exceed the engine's bound");
    }

    pub fn pop_for_owner(&self) -> Option<DeviceIo> {
        self.for_owner.get().and_then(ArrayQueue::pop)
    }
}

/// A FIFO that one thread touches (a channel's): each method holds the
/// queue only for its own push or pop and calls out to nothing, so no
/// borrow can overlap another and none needs counting.
struct ThreadQueue<T>(UnsafeCell<VecDeque<T>>);

impl<T> ThreadQueue<T> {
    fn with_capacity(capacity: usize) -> ThreadQueue<T> {
        ThreadQueue(UnsafeCell::new(VecDeque::with_capacity(capacity)))
    }

    fn push(&self, item: T) {
        // SAFETY: one thread, and no other reference lives across this call.
        unsafe { &mut *self.0.get() }.push_back(item);
    }

    fn pop(&self) -> Option<T> {
        // SAFETY: as in push.
        unsafe { &mut *self.0.get() }.pop_front_rewound()
    }

    fn is_empty(&self) -> bool {
        // SAFETY: as in push.
        unsafe { &*self.0.get() }.is_empty()
    }
}

/// Per-thread channel state of one HHC bdev. A channel off the owner
/// thread queues its requests and its lane's completions here, on its own
/// thread, and its poller runs them in the node once a pass, as a batch
/// (whose cache lookups are prefetched together).
pub struct Channel {
    shared: Arc<Shared>,
    /// The node: entered only while the channel holds requests, which
    /// keep the bdev registered and so the node alive.
    pub node: *const c_void,
    pub thread: Thread,
    pub on_owner: bool,
    /// This thread's channels to the backing and cache bdevs (null: none,
    /// every command goes out on the owner's).
    pub lane: *mut sys::hhc_glue_lane,
    /// Requests of this channel not completed yet; touched on its thread only.
    in_flight: Cell<u32>,
    completions: ArrayQueue<Finished>,
    /// Requests waiting for the poller (its thread only).
    queued: ThreadQueue<Submission>,
    /// Lane commands back, waiting for the poller (its thread only).
    lane_done: ThreadQueue<LaneDone>,
    /// Its requests the node finished while this thread was inside,
    /// completed once it has left (its thread only).
    finished_here: ThreadQueue<Finished>,
    /// Requests sent past the engine (bypass.rs).
    pub bypass: ChannelBypass,
}

impl Channel {
    /// The calling thread's channel of `node`, owned by `owner`, with the
    /// lane C made for it (unused on the owner thread, whose commands go
    /// out on the owner's channels anyway).
    pub fn new(node: *const c_void, shared: Arc<Shared>, owner: Thread, lane: *mut sys::hhc_glue_lane) -> Box<Channel> {
        let thread = Thread::current();
        let on_owner = thread == owner;
        let bypass = ChannelBypass::new(&shared.bypass, on_owner);
        Box::new(Channel {
            bypass,
            shared,
            node,
            thread,
            on_owner,
            lane: if on_owner { std::ptr::null_mut() } else { lane },
            in_flight: Cell::new(0),
            completions: ArrayQueue::new(CHANNEL_IN_FLIGHT_MAX as usize),
            queued: ThreadQueue::with_capacity(CHANNEL_IN_FLIGHT_MAX as usize),
            lane_done: ThreadQueue::with_capacity(sys::HHC_GLUE_LANE_COMMANDS as usize),
            finished_here: ThreadQueue::with_capacity(CHANNEL_IN_FLIGHT_MAX as usize),
        })
    }

    /// Queues a request of this (non-owner) thread for its poller; Err:
    /// the bdev layer retries it later (back-pressure).
    pub fn submit(&self, submission: Submission) -> Result<(), Refusal> {
        if self.in_flight.get() >= CHANNEL_IN_FLIGHT_MAX {
            return Err(Refusal::Full);
        }
        self.queued.push(submission);
        self.in_flight.set(self.in_flight.get() + 1);
        Ok(())
    }

    pub fn pop_queued(&self) -> Option<Submission> {
        self.queued.pop()
    }

    /// A lane command came back (bounded by the lane's contexts).
    pub fn push_lane_done(&self, done: LaneDone) {
        self.lane_done.push(done);
    }

    pub fn pop_lane_done(&self) -> Option<LaneDone> {
        self.lane_done.pop()
    }

    /// Work for the node that this channel's poller holds.
    pub fn has_work(&self) -> bool {
        !self.queued.is_empty() || !self.lane_done.is_empty()
    }

    /// Counts in a request that `queue` takes (on the owner thread, no
    /// atomics); Err when the channel or the queue is full.
    pub fn submit_local(&self, submission: Submission, queue: &mut VecDeque<Submission>) -> Result<(), Refusal> {
        if self.in_flight.get() >= CHANNEL_IN_FLIGHT_MAX || queue.len() >= SUBMISSIONS_MAX {
            return Err(Refusal::Full);
        }
        queue.push_back(submission);
        self.in_flight.set(self.in_flight.get() + 1);
        Ok(())
    }

    /// After this (non-owner) thread has left the node: starts the lane
    /// commands it took there and completes the requests it finished there,
    /// so that these copies and callbacks run outside the node and another
    /// thread may enter meanwhile.
    pub fn after_leaving_node(&self) -> usize {
        if !self.lane.is_null() {
            // SAFETY: the lane is this thread's and lives as long as the channel.
            unsafe { sys::hhc_glue_lane_start(self.lane) };
        }
        self.complete_all(|| self.finished_here.pop())
    }

    /// Completes what other threads finished for this channel.
    pub fn poll_completions(&self) -> usize {
        self.complete_all(|| self.completions.pop())
    }

    /// Completes, on this channel's thread, each request `next` hands out.
    fn complete_all(&self, mut next: impl FnMut() -> Option<Finished>) -> usize {
        let mut completed = 0;
        while let Some(finished) = next() {
            self.in_flight.set(self.in_flight.get() - 1);
            // SAFETY: the request was submitted on this thread and is completed once.
            unsafe { sys::hhc_glue_io_complete(finished.io, finished.status) };
            completed += 1;
        }
        completed
    }

    pub fn idle(&self) -> bool {
        self.in_flight.get() == 0 && self.bypass.idle()
    }

    pub fn shared(&self) -> &Shared {
        &self.shared
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.bypass.retire(&self.shared.bypass);
    }
}

/// Completes a request on its own thread: through the channel's queue
/// when `current` (the calling thread) is another, once the thread has
/// left the node when it is a request thread, else directly.
///
/// # Safety
/// `io` is outstanding and was submitted on `channel`, which is alive (the
/// bdev layer destroys a channel only after its I/O completed); the caller
/// is inside the node.
pub unsafe fn finish_request(io: *mut sys::hhc_glue_io, channel: *const Channel, status: i32, current: Thread) {
    // SAFETY: see the function's contract.
    let channel = unsafe { &*channel };
    if channel.thread == current && !channel.on_owner {
        channel.finished_here.push(Finished { io, status });
        return;
    }
    if channel.thread == current {
        channel.in_flight.set(channel.in_flight.get() - 1);
        // SAFETY: io is outstanding and we are on its submitting thread.
        unsafe { sys::hhc_glue_io_complete(io, status) };
        return;
    }
    let pushed = channel.completions.push(Finished { io, status });
    assert!(pushed.is_ok(), "completion queue sized for CHANNEL_IN_FLIGHT_MAX overflowed");
}

struct RequestSlot {
    io: *mut sys::hhc_glue_io,
    iovs: RequestIovs,
    channel: *const Channel,
    /// Device commands still using this request's buffer.
    device_ios: u32,
    /// Set once the engine completed the request.
    status: Option<i32>,
    /// A flush: when the owner thread took it.
    flush_started_ns: Option<u64>,
}

/// The requests the engine holds, by key (the engine's request id), and the
/// RESETs waiting for them.
pub struct Requests {
    slots: Slab<RequestSlot>,
    /// RESETs waiting for the table to drain.
    resets: Vec<Submission>,
    /// ... and for the requests out past the engine (channels.rs).
    pub reset_drain: ResetDrain,
    /// From the node taking a flush to the engine completing it.
    pub flush_latency: Histogram,
    /// The thread inside the node now (set at every entry).
    pub current: Thread,
}

impl Requests {
    /// A table sized for `capacity` requests (the engine's `requests_max`):
    /// it grows past that only by requests the engine has completed (or
    /// sent back as busy) whose buffers a device command still uses.
    pub fn with_capacity(capacity: usize) -> Requests {
        Requests {
            slots: Slab::with_capacity(capacity),
            resets: Vec::new(),
            reset_drain: ResetDrain::None,
            flush_latency: Histogram::default(),
            current: Thread::current(),
        }
    }

    /// The channel request `key` came from.
    pub fn channel_of(&self, key: u32) -> &Channel {
        // SAFETY: a live request's channel is alive (it is destroyed only
        // after its requests completed).
        unsafe { &*self.slots.get(key).expect("live request slot").channel }
    }

    /// A new request, taken at `now`; its key is the engine request id.
    pub fn insert(&mut self, submission: &Submission, now: u64) -> u32 {
        let is_flush = submission.kind == SubmitKind::Engine(RequestKind::Flush);
        self.slots.insert(RequestSlot {
            io: submission.io,
            iovs: submission.iovs,
            channel: submission.channel,
            device_ios: 0,
            status: None,
            flush_started_ns: is_flush.then_some(now),
        })
    }

    fn slot(&mut self, key: u32) -> &mut RequestSlot {
        self.slots.get_mut(key).expect("live request slot")
    }

    /// The buffers of request `key` from `offset_bytes` on, lent to a device
    /// command until `release`.
    pub fn lend(&mut self, key: u32, offset_bytes: u64, len_bytes: u64, out: &mut Vec<iovec>) -> bool {
        let slot = self.slot(key);
        // SAFETY: the request is live (not completed), so its io is outstanding;
        // out is used for the device command, which ends before the request does.
        let complete = sub_range(unsafe { slot.iovs.get() }, offset_bytes, len_bytes, out);
        slot.device_ios += 1;
        complete
    }

    /// A device command returned request `key`'s buffer.
    pub fn release(&mut self, key: u32) {
        let slot = self.slot(key);
        slot.device_ios -= 1;
        if slot.device_ios == 0 && slot.status.is_some() {
            self.deliver(key);
        }
    }

    /// The engine completed a request at `now`: it goes back once no device
    /// command uses its buffer any more.
    pub fn completed(&mut self, completion: RequestCompletion, now: u64) {
        let key = completion.id as u32;
        let slot = self.slot(key);
        slot.status = Some(errno::request_status(completion.result));
        let (flush_started_ns, device_ios) = (slot.flush_started_ns, slot.device_ios);
        if let Some(started) = flush_started_ns {
            self.flush_latency.record(now.saturating_sub(started));
        }
        if device_ios == 0 {
            self.deliver(key);
        }
    }

    fn deliver(&mut self, key: u32) {
        let slot = self.slots.remove(key).expect("live request slot");
        // SAFETY: the slot held an outstanding request of a live channel; it
        // is completed once (the slot is gone) on the owner thread.
        unsafe { finish_request(slot.io, slot.channel, slot.status.expect("completed request"), self.current) };
        self.finish_resets();
    }

    /// A RESET: completes once no request is left in the table. The bdev
    /// layer aborts new I/O while a reset is in progress, so the table
    /// drains; the engine's own work (write-back, the log) goes on.
    pub fn reset(&mut self, submission: Submission) {
        self.resets.push(submission);
        self.finish_resets();
    }

    /// The channels have no request out past the engine.
    pub fn release_resets(&mut self) {
        self.reset_drain = ResetDrain::None;
        self.finish_resets();
    }

    /// Requests the engine holds now.
    pub fn live(&self) -> usize {
        self.slots.len()
    }

    fn finish_resets(&mut self) {
        if !self.slots.is_empty() || self.reset_drain != ResetDrain::None {
            return;
        }
        for reset in std::mem::take(&mut self.resets) {
            // SAFETY: the RESET is outstanding on a live channel and completed once.
            unsafe { finish_request(reset.io, reset.channel, 0, self.current) };
        }
    }
}
