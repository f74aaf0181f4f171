//! The sans-IO boundary of the engine: what goes in (requests, device
//! completions, time) and what comes out (device commands, request
//! completions). Every driver — SPDK, the simulators, the file driver — speaks
//! only these types.

use crate::config::{ConfigError, Policy};
use crate::engine::{EngineState, Stats};
use std::fmt;

/// Virtual or real time in nanoseconds since an arbitrary origin. The engine
/// never reads a clock; drivers pass `now` into every `handle_*` call.
pub type Nanos = u64;

/// Identifies a bdev request; chosen by the driver, echoed in the completion.
pub type RequestId = u64;

/// Identifies a device command; chosen by the engine, echoed back by the driver.
pub type IoId = u64;

/// The three device roles of docs/design.md §1.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceRole {
    /// The SSD holding the cache (superblock, metadata area, data area).
    Cache,
    /// Log mirror `i` (an HDD); all mirrors share one layout.
    Log(u8),
    /// The remote RAID behind the cache.
    Backing,
}

impl fmt::Display for DeviceRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceRole::Cache => write!(f, "cache"),
            DeviceRole::Log(i) => write!(f, "log{i}"),
            DeviceRole::Backing => write!(f, "backing"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoKind {
    Read,
    Write,
    /// Make every completed write durable. Drivers of devices without a
    /// volatile cache (or without FLUSH support) complete it at once.
    Flush,
}

/// Where the bytes of a device command live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoBuffer {
    /// Flush: no data.
    None,
    /// The data buffer of a bdev request, at a byte offset into it. The
    /// request stays outstanding until every command that uses its buffer has
    /// completed.
    Request { request: RequestId, offset_bytes: u64 },
    /// Engine-owned I/O memory (log segment buffers, write-back staging,
    /// metadata pages), resolved with `Engine::io_memory_mut`.
    Engine { region: u32, offset_bytes: u32 },
}

/// A command for one device. `offset_bytes` and `len_bytes` are multiples of
/// the device role's alignment (the cache block size for cache and backing
/// data, 4 KiB for metadata and log headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceIo {
    pub id: IoId,
    pub device: DeviceRole,
    pub kind: IoKind,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    pub buffer: IoBuffer,
}

/// How a device command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoStatus {
    Ok,
    /// The command failed; the device may work again later.
    Error,
    /// The device is gone (hot-removed, dead); no further command will succeed.
    DeviceLost,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    Read,
    Write,
    Flush,
}

/// A bdev request in units of cache blocks (the HHC bdev's block size is the
/// cache block size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub id: RequestId,
    pub kind: RequestKind,
    pub lba: u64,
    pub blocks_count: u32,
}

/// Read access to a write request's data, given to the engine for the one
/// copy it makes (into a log segment buffer) while it handles the write.
pub trait RequestData {
    /// Copies `dst.len()` bytes starting at `offset_bytes` of the request
    /// buffer into `dst`.
    fn copy_to(&self, offset_bytes: u64, dst: &mut [u8]);
}

impl RequestData for [u8] {
    fn copy_to(&self, offset_bytes: u64, dst: &mut [u8]) {
        let start = offset_bytes as usize;
        dst.copy_from_slice(&self[start..start + dst.len()]);
    }
}

impl RequestData for Vec<u8> {
    fn copy_to(&self, offset_bytes: u64, dst: &mut [u8]) {
        self.as_slice().copy_to(offset_bytes, dst)
    }
}

/// Why a request failed, as reported to the bdev layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// A device returned an error; no dirty data was dropped.
    Io,
    /// The request lies (partly) outside the bdev.
    OutOfRange,
    /// The engine is stopping or failed and accepts no new work.
    NotReady,
    /// The engine holds as many requests (or blocks) as it was sized for
    /// (`Config::requests_max`): send it again once others complete.
    Busy,
}


#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestCompletion {
    pub id: RequestId,
    pub result: Result<(), RequestError>,
}

/// Anything that emits device commands and takes their completions: the
/// engine, the log scanner, the replay. Drivers pump it until it is done.
pub trait IoMachine {
    fn poll_io(&mut self) -> Option<DeviceIo>;
    fn handle_io_completion(&mut self, now: Nanos, id: IoId, status: IoStatus);
    /// The whole engine-owned memory region `region` (see `IoBuffer::Engine`).
    fn io_memory_mut(&mut self, region: u32) -> &mut [u8];
}

/// A cache engine as every driver runs it: the engine itself
/// (`src/engine/machine.rs`) and the simulators' toy target
/// (`src/simcore/toy.rs`). The SPDK module, both simulators, the test harness
/// and the benchmarks drive it through these calls; docs/engine.md, "The
/// driver contract", says in which order and what must be drained.
///
/// Inputs are `handle_*` (and `set_policy`, `shutdown`), each taking the
/// current time; outputs are `poll_*`, drained after every input. Nothing
/// here blocks, reads a clock or performs I/O.
pub trait Machine: IoMachine {
    /// `Starting` until the start-up I/O is done, then `Ready`; `Stopping`
    /// and `Stopped` after `shutdown`; `Failed` when it cannot go on.
    fn state(&self) -> &EngineState;
    /// A bdev request. `data` is a write's buffer (for the one copy the
    /// engine makes while the call runs); `None` for reads and flushes.
    fn handle_request(&mut self, now: Nanos, request: Request, data: Option<&dyn RequestData>);
    /// Time has reached what `poll_timeout` asked for (earlier calls are harmless).
    fn handle_timer(&mut self, now: Nanos);
    /// A device was hot-removed or died.
    fn handle_device_removed(&mut self, now: Nanos, role: DeviceRole);
    /// A fresh log mirror was attached in slot `mirror` (whose device was
    /// removed before, with none of its commands still in flight).
    fn handle_mirror_attached(&mut self, now: Nanos, mirror: u8);
    /// Switches the write policy at run time.
    fn set_policy(&mut self, now: Nanos, policy: Policy) -> Result<(), ConfigError>;
    /// Changes the options an operator tunes online (a target that has
    /// none ignores them).
    fn set_options(&mut self, _now: Nanos, _options: crate::config::Options) -> Result<(), ConfigError> {
        Ok(())
    }
    /// Clean stop: no new requests; `Stopped` once everything is durable.
    fn shutdown(&mut self, now: Nanos);
    /// The requests and completions handed in until `end_batch` form one
    /// batch: a machine may defer what it does after each input to the
    /// batch's end (the engine's background work). Default: no batching.
    fn begin_batch(&mut self) {}
    /// Ends the batch; whatever was deferred runs now.
    fn end_batch(&mut self, _now: Nanos) {}
    /// The next finished bdev request.
    fn poll_completion(&mut self) -> Option<RequestCompletion>;
    /// When `handle_timer` is wanted next, if at all. A driver re-reads it
    /// after every input.
    fn poll_timeout(&self) -> Option<Nanos>;
    /// Counters and gauges (all zero for a target that keeps none).
    fn stats(&self) -> Stats;
    /// How the machine sees each log mirror now (`Healthy` is its claim that
    /// a replay from that mirror alone holds every flushed write); None for a
    /// target that keeps no mirror states.
    fn log_mirror_states(&self) -> Option<Vec<crate::engine::MirrorState>> {
        None
    }
    /// What the machine waits for and what it holds of `lba`, in words
    /// (printed when a request stalls).
    fn describe_stall(&self, _lba: u64) -> String {
        String::new()
    }
    /// The machine's kept counts against what they count, for the torture
    /// simulator between phases (may visit every block); Ok for a target
    /// that keeps none.
    fn check_counts(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Provides engine-owned I/O memory. Under SPDK it returns DMA-safe buffers;
/// elsewhere plain heap memory. Regions are allocated once, at creation.
pub trait IoAllocator {
    fn alloc(&mut self, len_bytes: usize) -> Box<dyn IoRegion>;
}

pub trait IoRegion: Send {
    fn as_mut_slice(&mut self) -> &mut [u8];
}

impl IoRegion for Vec<u8> {
    fn as_mut_slice(&mut self) -> &mut [u8] {
        self
    }
}

/// Heap memory for drivers without DMA constraints.
pub struct HeapAllocator;

impl IoAllocator for HeapAllocator {
    fn alloc(&mut self, len_bytes: usize) -> Box<dyn IoRegion> {
        Box::new(vec![0u8; len_bytes])
    }
}
