//! The bypass: requests sent as they are to the backing bdev from their
//! own thread's lane, as `bdev_passthru` does, while the engine has nothing
//! to add (`Engine::passes_through`, or a passthrough without a cache).
//!
//! Each channel holds its own route (or none) and counts its own requests
//! out, so the data path takes no lock and no locked instruction (one
//! right after a RAM bdev's 4 KiB copy waits for the copy's stores to
//! drain). The owner changes what the channels hold with one
//! `spdk_for_each_channel` at a time (`Core::update_channels`): each
//! channel takes the node's route on its own thread, and lets its lane
//! give back its channel to a removed bdev; when its route is taken away
//! it answers only once its bypassed requests are back. So when the
//! iteration completes on the owner, no request is out past the engine and
//! none can start: only then does the engine cache again.
//!
//! Each channel times its requests too (the backing bdev's latencies in
//! the stats), from the stats epoch its node's last reset started
//! (latency.rs, `SharedLatency`).

use super::latency::{DeviceLatency, SharedLatency};
use super::sys;
use crate::io::RequestKind;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where bypassed requests go: the backing bdev, at byte offsets.
#[derive(Clone, Copy)]
pub struct Route {
    backing: *mut sys::hhc_glue_base,
    block_size: u64,
}

impl Route {
    pub fn new(backing: *mut sys::hhc_glue_base, block_size: u32) -> Route {
        Route { backing, block_size: block_size as u64 }
    }
}

/// Lane slots: one per bdev a lane has a channel to.
pub const LANE_SLOTS: usize = sys::HHC_GLUE_LANE_SLOTS as usize;

// SAFETY: the pointer is only handed to C on a channel's thread while the
// backing base is open (the owner takes the routes away before it closes).
unsafe impl Send for Route {}

/// Requests bypassed, by kind, their errors and latencies; written only by
/// the channel's own thread (a load and a store, no locked instruction),
/// read by the owner for the stats.
#[derive(Default)]
pub struct Counters {
    counts: [AtomicU64; 4],
    latency: SharedLatency,
}

const ERRORS: usize = 3;

fn kind_index(kind: RequestKind) -> usize {
    match kind {
        RequestKind::Read => 0,
        RequestKind::Write => 1,
        RequestKind::Flush => 2,
    }
}

impl Counters {
    fn bump(&self, index: usize) {
        let counter = &self.counts[index];
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    fn get(&self, index: usize) -> u64 {
        self.counts[index].load(Ordering::Relaxed)
    }
}

/// What every channel should hold.
#[derive(Clone, Copy, Default)]
struct Wanted {
    route: Option<Route>,
    /// Lane slots whose bdev was removed: their channels go back.
    dropped: [bool; LANE_SLOTS],
    /// Each channel answers only once its bypassed requests are back, route
    /// or not (a RESET waits for them).
    drain: bool,
}

/// The node's side: what channels take, and every channel's counters.
#[derive(Default)]
pub struct Bypass {
    wanted: Mutex<Wanted>,
    channels: Mutex<Vec<Arc<Counters>>>,
    /// What channels now gone counted.
    retired: [AtomicU64; 4],
    /// Stats resets so far: the epoch the channels' latencies count from.
    epoch: AtomicU64,
    /// The latencies of channels now gone, since the last reset.
    retired_latency: Mutex<DeviceLatency>,
}

impl Bypass {
    fn wanted(&self) -> Wanted {
        *self.wanted.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What channels take at the owner's next iteration over them (and new
    /// channels from now on).
    pub fn set_wanted(&self, route: Option<Route>, dropped: [bool; LANE_SLOTS], drain: bool) {
        *self.wanted.lock().unwrap_or_else(|p| p.into_inner()) = Wanted { route, dropped, drain };
    }

    fn sum(&self, index: usize) -> u64 {
        let channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        self.retired[index].load(Ordering::Relaxed) + channels.iter().map(|c| c.get(index)).sum::<u64>()
    }

    /// Requests of `kind` bypassed so far.
    pub fn count(&self, kind: RequestKind) -> u64 {
        self.sum(kind_index(kind))
    }

    /// Bypassed requests the backing bdev failed.
    pub fn errors(&self) -> u64 {
        self.sum(ERRORS)
    }

    /// The latencies of the requests bypassed since the last reset.
    pub fn latency(&self) -> DeviceLatency {
        let mut latency = self.retired_latency.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let epoch = self.epoch.load(Ordering::Relaxed);
        let channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        channels.iter().for_each(|c| c.latency.add_to(epoch, &mut latency));
        latency
    }

    /// The stats were reset: the latencies start again from none.
    pub fn reset_latency(&self) {
        let mut retired = self.retired_latency.lock().unwrap_or_else(|p| p.into_inner());
        self.epoch.fetch_add(1, Ordering::Relaxed);
        retired.clear();
    }
}

/// A channel's side (its thread only, but the counters).
pub struct ChannelBypass {
    on_owner: bool,
    route: Cell<Option<Route>>,
    /// Bypassed requests not back yet.
    out: Cell<u32>,
    /// The route change waiting for `out` to reach 0 (an SPDK channel
    /// iterator), or null.
    waiter: Cell<*mut c_void>,
    counters: Arc<Counters>,
}

impl ChannelBypass {
    /// A new channel takes the node's route (never on the owner thread,
    /// whose requests always go through the engine).
    pub fn new(bypass: &Bypass, on_owner: bool) -> ChannelBypass {
        let counters = Arc::new(Counters::default());
        bypass.channels.lock().unwrap_or_else(|p| p.into_inner()).push(counters.clone());
        ChannelBypass {
            on_owner,
            route: Cell::new(if on_owner { None } else { bypass.wanted().route }),
            out: Cell::new(0),
            waiter: Cell::new(std::ptr::null_mut()),
            counters,
        }
    }

    pub fn idle(&self) -> bool {
        self.out.get() == 0
    }

    /// The channel is going: its counts join the retired ones.
    pub fn retire(&self, bypass: &Bypass) {
        let mut channels = bypass.channels.lock().unwrap_or_else(|p| p.into_inner());
        channels.retain(|c| !Arc::ptr_eq(c, &self.counters));
        for (index, total) in bypass.retired.iter().enumerate() {
            total.fetch_add(self.counters.get(index), Ordering::Relaxed);
        }
        let epoch = bypass.epoch.load(Ordering::Relaxed);
        self.counters.latency.add_to(epoch, &mut bypass.retired_latency.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Sends request `io` (of `blocks_count` blocks at `lba`) straight to
    /// the backing bdev if this channel has a route; false: it takes the
    /// engine's path.
    pub fn try_send(&self, lane: *mut sys::hhc_glue_lane, io: *mut sys::hhc_glue_io, kind: RequestKind, lba: u64, blocks_count: u64) -> bool {
        let Some(route) = self.route.get() else { return false };
        if lane.is_null() {
            return false;
        }
        let glue_kind = match kind {
            RequestKind::Read => sys::hhc_glue_io_kind::HHC_GLUE_IO_READ,
            RequestKind::Write => sys::hhc_glue_io_kind::HHC_GLUE_IO_WRITE,
            RequestKind::Flush => sys::hhc_glue_io_kind::HHC_GLUE_IO_FLUSH,
        };
        // SAFETY: the lane is this thread's; the route's backing base is
        // open while a channel holds the route or has a request out on it;
        // io is outstanding on this thread.
        let rc = unsafe {
            sys::hhc_glue_lane_bypass(
                lane,
                route.backing,
                io,
                glue_kind,
                lba * route.block_size,
                blocks_count * route.block_size,
            )
        };
        match rc {
            0 => {
                self.out.set(self.out.get() + 1);
                true
            }
            rc if rc == -libc::EAGAIN => false,
            rc => {
                // 1: a FLUSH the backing bdev does not support, nothing to
                // wait for; else the errno.
                let status = if rc == 1 { 0 } else { rc };
                if rc == 1 {
                    self.counters.bump(kind_index(kind));
                }
                // SAFETY: io was submitted on this thread and is completed once, here.
                unsafe { sys::hhc_glue_io_complete(io, status) };
                true
            }
        }
    }

    /// A bypassed request came back from the backing bdev of the node
    /// whose `bypass` this is, after `latency_ns`.
    ///
    /// # Safety
    /// `io` was sent by `try_send` on this channel and is completed once, here.
    pub unsafe fn done(&self, bypass: &Bypass, io: *mut sys::hhc_glue_io, kind: RequestKind, status: i32, latency_ns: u64) {
        self.counters.bump(kind_index(kind));
        self.counters.latency.record(bypass.epoch.load(Ordering::Relaxed), kind, latency_ns);
        if status != 0 {
            self.counters.bump(ERRORS);
        }
        self.out.set(self.out.get() - 1);
        // SAFETY: the function's contract.
        unsafe { sys::hhc_glue_io_complete(io, status) };
        self.answer_if_drained();
    }

    /// Takes what the node wants now (`iter`: the owner's iteration over
    /// the channels): its route, and the lane's channels to removed bdevs
    /// given back. True: answered; false: the route was taken away (or a
    /// drain asked for) with requests out, the answer follows when the last
    /// is back.
    pub fn update(&self, bypass: &Bypass, lane: *mut sys::hhc_glue_lane, iter: *mut c_void) -> bool {
        debug_assert!(self.waiter.get().is_null(), "one update at a time");
        let wanted = bypass.wanted();
        self.route.set(wanted.route.filter(|_| !self.on_owner));
        for (slot, _) in wanted.dropped.iter().enumerate().filter(|(_, &dropped)| dropped && !lane.is_null()) {
            // SAFETY: the lane is this channel's, on its thread.
            unsafe { sys::hhc_glue_lane_drop(lane, slot as u32) };
        }
        if (self.route.get().is_none() || wanted.drain) && self.out.get() > 0 {
            self.waiter.set(iter);
            return false;
        }
        true
    }

    fn answer_if_drained(&self) {
        let waiter = self.waiter.get();
        if self.out.get() == 0 && !waiter.is_null() {
            self.waiter.set(std::ptr::null_mut());
            // SAFETY: waiter is the owner's iteration, paused at this channel.
            unsafe { sys::hhc_glue_channels_answer(waiter) };
        }
    }
}
