//! The sans-IO engine: requests, device completions and time go in; device
//! commands and request completions come out. It never blocks, never reads a
//! clock and never performs I/O.
//!
//! Files by concern: `commands` (the device commands in flight and to
//! hand out), `requests` (read/write paths), `through` (writes that
//! go to the backing device), `flush` (flush semantics per policy),
//! `writeback` (background write-back and revokes), `throttle` (writes
//! slowed while the log is short of space), `log_io` (log appends,
//! sealing, mirrors, superblock; `reclaim`: reclamation; `gap`: when to
//! leave log blocks unwritten after a barrier part), `commit` (durable cache
//! metadata), `evict` (clean blocks given up ahead of need), `startup` (format and warm restart), `stats`; docs/engine.md
//! has the full table.
//!
//! A little over 600 lines: the engine's state, its constructor, the driver
//! contract's inputs and outputs, the completion dispatch and the order of
//! the background work are read together.

mod commands;
mod commit;
mod control;
mod cutoff;
mod evict;
mod diagnostics;
mod flush;
mod gap;
mod held;
mod in_flight;
mod lba_hash;
mod lba_queue;
mod log_superblock;
mod log_io;
mod machine;
mod mirror_timeout;
mod ordered;
mod owner_record;
mod pacing;
mod reclaim;
mod requests;
mod revokes;
mod starved;
mod startup;
mod stats;
mod switch;
mod throttle;
mod through;
mod timers;
mod waiting;
mod writeback;
mod writeback_queue;

pub use control::{ControlError, FlushAllProgress, MirrorState};
pub use stats::{MemoryReport, Stats};
pub use timers::Timer;

use crate::queue::Rewind;
use crate::cache::CacheIndex;
use crate::config::{CacheLayout, Config, ConfigError, LogLayout, Mutation, Options, Policy};
use crate::format::UNIT_BYTES;
use crate::io::{
    DeviceIo, DeviceRole, IoAllocator, IoBuffer, IoId, IoKind, IoRegion, IoStatus, Nanos, Request,
    RequestCompletion, RequestData, RequestError,
};
use crate::hdd_log::LogManager;
use commit::Commit;
use requests::{RequestOwner, RequestState, Waiting};
use crate::slab::Slab;
use std::collections::VecDeque;
use lba_hash::LbaTable;
use writeback::Writeback;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartMode {
    /// New cache and log: write superblocks and empty metadata.
    Format,
    /// Warm restart: load the cache metadata and rebuild the log state.
    Open,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineState {
    Starting,
    Ready,
    /// Shutting down: no new requests; committing metadata.
    Stopping,
    Stopped,
    /// Unusable (e.g. the cache device was lost); the reason says why.
    Failed(FailReason),
}

/// Why the engine failed: the kind is what a driver reports (the SPDK
/// module's errno), the detail is for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailReason {
    pub kind: FailKind,
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailKind {
    /// The cache or the backing device is gone.
    DeviceLost,
    /// A device kept failing commands the engine cannot do without.
    DeviceError,
    /// What a device holds is not an HHC cache this engine can open.
    Format,
}

impl FailReason {
    pub fn new(kind: FailKind, detail: impl Into<String>) -> FailReason {
        FailReason { kind, detail: detail.into() }
    }
}

impl std::fmt::Display for FailReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

/// What a device command was for; decides what its completion does.
#[derive(Clone, Copy, Debug)]
enum Op {
    ReadCache { request: u32, block: u32, block_in_request: u32 },
    /// `issued_at`: when it was issued (the write-back pacer's signal).
    ReadBacking { request: u32, lba: u64, blocks_count: u32, first_block_in_request: u32, issued_at: Nanos },
    FillCache { request: u32, block: u32 },
    WriteCache { request: u32, block: u32, previous: Option<u32> },
    WriteBacking { request: u32, lba: u64, blocks_count: u32 },
    FlushBacking,
    WritebackRead { extent: u32 },
    WritebackWrite { extent: u32 },
    /// A cache block read into slot `loc` of the open part; `relog_from` is
    /// the entry it replaces when reclamation moves a logged block
    /// (`LOC_NONE` when the block was missing from the log).
    LogSlotRead { block: u32, buffer: u32, loc: u32, relog_from: u32 },
    SegmentWrite { buffer: u32, write: u32, mirror: u8 },
    SegmentFlush { buffer: u32, write: u32, mirror: u8 },
    SuperblockWrite { mirror: u8 },
    SuperblockFlush { mirror: u8 },
    CommitFlush { second: bool },
    MetaWrite { pool_slot: u32 },
    /// A copy of the owner record, then the cache flush that makes it durable.
    OwnerRecordWrite,
    OwnerRecordFlush,
    Startup,
    /// A log mirror command completed as failed when its mirror stopped
    /// answering (mirror_timeout.rs); its own completion is dropped.
    Abandoned,
}

/// Engine-owned I/O memory regions.
struct Regions {
    all: Vec<Box<dyn IoRegion>>,
    staging: u32,
    meta_pool: u32,
    superblock: u32,
    /// The owner record's two copies (owner_record.rs).
    owner: u32,
    /// A part read back or written at warm restart (repairs, the closing part).
    log_scratch: u32,
}

pub(crate) const META_POOL_PAGES: u32 = 256;

/// How soon a commit round's next step (commit.rs, `RoundStep`) runs when
/// no input comes first. Under load the inputs take the steps, one per
/// SPDK poller pass; a timer due at once as well would run the background
/// work a second time in every pass while a round lasts.
const COMMIT_STEP_DELAY_NS: Nanos = 20_000;
/// The longest timer tick of a clean stop, whatever `idle_after` is.
const STOPPING_TICK_NS: Nanos = 1_000_000;

/// Failed flushes after a warm restart before the engine gives up: backing
/// errors that last are a device to repair, not a state to serve from.
const RESTART_FLUSH_ATTEMPTS: u32 = 16;

pub struct Engine {
    config: Config,
    cache_layout: CacheLayout,
    log_layout: LogLayout,
    state: EngineState,
    regions: Regions,
    cache: CacheIndex,
    log: LogManager,
    commands: commands::DeviceCommands,
    requests: Slab<RequestState>,
    /// Blocks the live requests span (at most `Config::request_blocks_max`).
    request_blocks_live: u32,
    waiting: VecDeque<Waiting>,
    /// Data of waiting block writes, for their log copy (held.rs).
    held: held::HeldData,
    completions_out: VecDeque<RequestCompletion>,
    flushes: flush::Flushes,
    commit: Commit,
    writeback: Writeback,
    starved: starved::StarvedLbas,
    /// Back-pressure on writes while the log is short of space.
    throttle: throttle::LogThrottle,
    log_work: log_io::LogWork,
    reclaimer: reclaim::Reclaimer,
    ordered: ordered::Ordered,
    startup: Option<startup::Startup>,
    /// Policy being switched to, once dirty data has been drained.
    policy_target: Option<Policy>,
    /// The operator's write-back of every dirty block (control.rs).
    flush_all: Option<control::FlushAll>,
    flush_all_completed: u64,
    flush_all_errors: u64,
    /// In-flight miss reads per LBA.
    /// A request block starts one read, so at most one entry per live
    /// request block (`request_blocks_max`; `note_miss_started` asserts);
    /// it starts small so that its lookups, made per block, stay in the CPU
    /// cache, and keeps what it grows to.
    misses: LbaTable<requests::MissesInFlight>,
    eviction: evict::Eviction,
    /// Block ranges of write-throughs that could not start in this pass of
    /// `retry_waiting`: later write-throughs overlapping them wait behind.
    /// One per waiting request: sized for `requests_max` at creation.
    through_blocked: Vec<waiting::BlockRange>,
    /// The flush after a warm restart is running: how often it failed so
    /// far (it is started again until `RESTART_FLUSH_ATTEMPTS`).
    restart_flush: Option<u32>,
    /// Log entries found at warm restart whose blocks are clean by now,
    /// revoked once the log can take it. Gathered once, from
    /// the log scan, into a capacity of its live entries (at most the log's
    /// blocks, `rebuild_log` asserts), then only drained.
    startup_revokes: Vec<revokes::StartupRevoke>,
    /// Mirrors the warm start found stale (outside the newest superblock's
    /// in-sync mask); re-synced once the start-up is done.
    stale_mirrors_at_start: Vec<u8>,
    /// Sequential streams seen, for the cutoff (cutoff.rs).
    cutoff: cutoff::SequentialCutoff,
    /// The owner record on the cache device (owner_record.rs).
    owner_records: owner_record::OwnerRecords,
    stats: Stats,
    now: Nanos,
    last_request_at: Nanos,
    /// Requests and completions come as one batch until `end_batch`.
    batch_open: bool,
    /// The batch has deferred the background work.
    batch_deferred: bool,
}

/// The two dependent loads of a cache lookup (`Engine::prefetch_lookup`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefetchStage {
    /// The LBA map's slot.
    First,
    /// The block entry the slot names.
    Second,
}

/// Device commands an engine of `config` (its log buffers resolved) can
/// have in flight at once: every command a request block can have (a miss
/// read and its fill), plus the background's own bounded pools. The table
/// of operations is sized for it, and a driver's per-command contexts can
/// be (`Engine::device_commands_max`).
fn device_commands_max(config: &Config, log_layout: &LogLayout) -> usize {
    let buffers_count = if config.mirrors_count > 0 { config.log_buffers_count } else { 0 };
    2 * config.request_blocks_max as usize
        + config.requests_max as usize
        + config.writeback_parallelism as usize * (writeback::run_bytes(config) as usize / config.block_size as usize + 1)
        + buffers_count as usize * (log_layout.segment.blocks() as usize + 2 * config.mirrors_count as usize)
        // A mirror failed for not answering keeps its commands (a part's
        // write and flush per buffer, a superblock's) until they complete
        // (mirror_timeout.rs).
        + config.mirrors_count as usize * (2 * buffers_count as usize + 2)
        + META_POOL_PAGES as usize
        + 64
}

impl Engine {
    /// The most device commands an engine created with `config` ever has
    /// in flight, known before it is created.
    pub fn device_commands_max(config: &Config) -> Result<usize, ConfigError> {
        let (_, log_layout) = config.validate()?;
        let config = Config { log_buffers_count: config.log_buffers_for(log_layout.segments_count), ..config.clone() };
        Ok(device_commands_max(&config, &log_layout))
    }

    pub fn new(mut config: Config, start: StartMode, alloc: &mut dyn IoAllocator, now: Nanos) -> Result<Engine, ConfigError> {
        let (cache_layout, log_layout) = config.validate()?;
        config.log_buffers_count = config.log_buffers_for(log_layout.segments_count);
        note_small_log(&config, &log_layout);
        let blocks_count = u32::try_from(cache_layout.blocks_count)
            .map_err(|_| ConfigError::too_large(format!("cache of {} blocks exceeds 2^32 blocks", cache_layout.blocks_count)))?;
        let mut all: Vec<Box<dyn IoRegion>> = Vec::new();
        let mut add = |len: usize, all: &mut Vec<Box<dyn IoRegion>>| {
            all.push(alloc.alloc(len));
            (all.len() - 1) as u32
        };
        let buffers_count = if config.mirrors_count > 0 { config.log_buffers_count } else { 0 };
        let log_buffers = (0..buffers_count).map(|_| add(config.segment_bytes as usize, &mut all)).collect::<Vec<_>>();
        let staging = add(config.writeback_parallelism as usize * writeback::run_bytes(&config) as usize, &mut all);
        let meta_pool = add(META_POOL_PAGES as usize * UNIT_BYTES, &mut all);
        let superblock = add(2 * UNIT_BYTES * (config.mirrors_count as usize).max(1), &mut all);
        let owner = add(crate::format::OWNER_RECORD_COPIES * UNIT_BYTES, &mut all);
        let log_scratch = add(if config.mirrors_count > 0 { config.segment_bytes as usize } else { UNIT_BYTES }, &mut all);
        let regions = Regions { all, staging, meta_pool, superblock, owner, log_scratch };
        let first_sequence = log_layout.segments_count as u64;
        let mut log = LogManager::new(
            log_layout,
            config.instance_id,
            log_buffers,
            config.mirrors_count,
            config.mirrors_absent,
            first_sequence,
        );
        log.previous_instance = config.previous_instance;
        log.superseded_freed_early = crate::config::MUTATIONS_BUILT && config.mutation == Mutation::SupersededFreedEarly;
        log.recorded_head_too_far = crate::config::MUTATIONS_BUILT && config.mutation == Mutation::RecordedHeadTooFar;
        let mut engine = Engine {
            cache: CacheIndex::new(blocks_count),
            log,
            commands: commands::DeviceCommands::with_capacity(device_commands_max(&config, &log_layout)),
            requests: Slab::with_capacity(config.requests_max as usize),
            request_blocks_live: 0,
            waiting: VecDeque::with_capacity((config.request_blocks_max + config.requests_max) as usize),
            held: held::HeldData::new(config.block_size, config.mirrors_count > 0),
            completions_out: VecDeque::with_capacity(config.requests_max as usize + 1),
            flushes: flush::Flushes::with_capacity(config.requests_max as usize),
            commit: Commit::new(cache_layout.meta_pages_count),
            writeback: Writeback::new(&config, blocks_count),
            starved: starved::StarvedLbas::with_capacity(16),
            throttle: throttle::LogThrottle::default(),
            log_work: log_io::LogWork::default(),
            reclaimer: reclaim::Reclaimer::new(log_layout.segment.blocks()),
            ordered: ordered::Ordered::default(),
            startup: None,
            policy_target: None,
            flush_all: None,
            flush_all_completed: 0,
            flush_all_errors: 0,
            misses: LbaTable::with_capacity_and_hasher(256, Default::default()),
            eviction: evict::Eviction::new(),
            through_blocked: Vec::with_capacity(config.requests_max as usize),
            restart_flush: None,
            startup_revokes: Vec::new(),
            stale_mirrors_at_start: Vec::new(),
            cutoff: cutoff::SequentialCutoff::default(),
            owner_records: owner_record::OwnerRecords::empty(),
            stats: Stats::default(),
            state: EngineState::Starting,
            config,
            cache_layout,
            log_layout,
            regions,
            now,
            last_request_at: now,
            batch_open: false,
            batch_deferred: false,
        };
        engine.begin_startup(start);
        Ok(engine)
    }

    /// `Starting` until a warm restart's own flush is done (see `startup`).
    pub fn state(&self) -> &EngineState {
        if self.restart_flush.is_some() && self.state == EngineState::Ready {
            return &EngineState::Starting;
        }
        &self.state
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn policy(&self) -> Policy {
        self.config.policy
    }

    /// The exposed bdev size in blocks (the backing device's).
    pub fn blocks_count(&self) -> u64 {
        self.config.backing_blocks()
    }

    pub fn cache_layout(&self) -> &CacheLayout {
        &self.cache_layout
    }

    pub fn log_layout(&self) -> &LogLayout {
        &self.log_layout
    }

    /// A hint for a driver holding several requests: start loading what
    /// the lookup of `lba` reads first, then (`Second`, once the first
    /// stage had time to land) what it reads next. It changes nothing but
    /// how long the lookup waits for memory on a cache larger than the CPU's.
    pub fn prefetch_lookup(&self, lba: u64, stage: PrefetchStage) {
        let Ok(lba) = u32::try_from(lba) else { return };
        match stage {
            PrefetchStage::First => self.cache.prefetch_slot(lba),
            PrefetchStage::Second => self.cache.prefetch_block(lba),
        }
    }

    /// A hint for a driver holding several completions: start loading the
    /// cache block entry that command `id`'s completion reads first.
    pub fn prefetch_completion(&self, id: IoId) {
        if let Some(Op::ReadCache { block, .. } | Op::FillCache { block, .. } | Op::WriteCache { block, .. }) = self.commands.get(id) {
            self.cache.prefetch_entry(*block);
        }
    }

    // ---- inputs ----

    /// A bdev request. `data` is the write's buffer (for the one copy into
    /// the log); `None` for reads and flushes.
    pub fn handle_request(&mut self, now: Nanos, request: Request, data: Option<&dyn RequestData>) {
        self.now = now;
        self.last_request_at = now;
        self.start_request(request, data);
        self.run_background_unless_batched();
    }

    pub fn handle_io_completion(&mut self, now: Nanos, id: IoId, status: IoStatus) {
        self.now = now;
        let Some(op) = self.commands.complete(id) else { return };
        self.complete_op(id, op, status);
        self.run_background_unless_batched();
    }

    /// A device command's completion, where the engine's state goes on.
    fn complete_op(&mut self, id: IoId, op: Op, status: IoStatus) {
        if status != IoStatus::Ok {
            self.stats.device_errors += 1;
        }
        if matches!(self.state, EngineState::Failed(_)) {
            return self.drain_failed(op);
        }
        match op {
            Op::ReadCache { request, block, block_in_request } => self.read_cache_done(request, block, block_in_request, status),
            Op::ReadBacking { request, lba, blocks_count, first_block_in_request, issued_at } => {
                let latency = self.now.saturating_sub(issued_at);
                self.writeback.pacer.read_miss_done(latency, self.writeback.in_flight());
                self.read_backing_done(request, lba, blocks_count, first_block_in_request, status)
            }
            Op::FillCache { request, block } => self.fill_done(request, block, status),
            Op::WriteCache { request, block, previous } => self.write_cache_done(request, block, previous, status),
            Op::WriteBacking { request, lba, blocks_count } => self.write_backing_done(request, lba, blocks_count, status),
            Op::FlushBacking => self.backing_flush_done(status),
            Op::WritebackRead { extent } => self.writeback_read_done(extent, status),
            Op::WritebackWrite { extent } => self.writeback_write_done(extent, status),
            Op::LogSlotRead { block, buffer, loc, relog_from } => {
                self.log_slot_read_done(block, buffer, loc, relog_from, status)
            }
            Op::SegmentWrite { buffer, write, mirror } => self.segment_write_done(buffer, write, mirror, status),
            Op::SegmentFlush { buffer, write, mirror } => self.segment_flush_done(buffer, write, mirror, status),
            Op::SuperblockWrite { mirror } => self.superblock_write_done(mirror, status),
            Op::SuperblockFlush { mirror } => self.superblock_flush_done(mirror, status),
            Op::CommitFlush { second } => self.commit_flush_done(second, status),
            Op::MetaWrite { pool_slot } => self.meta_write_done(pool_slot, status),
            Op::OwnerRecordWrite => self.owner_record_write_done(status),
            Op::OwnerRecordFlush => self.owner_record_flush_done(status),
            Op::Startup => self.startup_io_done(id, status),
            Op::Abandoned => unreachable!("an abandoned command completes no further"),
        }
    }

    /// The requests and completions handed in until `end_batch` come as
    /// one batch (a poller pass's): the background work, which otherwise
    /// runs after each of them, runs once after the last. A driver that
    /// has several inputs at hand saves its fixed cost per input, which a
    /// read hit paid twice with nothing for it to do. Other inputs (timer,
    /// device removal, operator calls) still run it at once.
    pub fn begin_batch(&mut self) {
        self.batch_open = true;
    }

    /// Ends the batch `begin_batch` opened: the background work runs now if
    /// an input of the batch deferred it (an empty batch does nothing, as
    /// no input would have).
    pub fn end_batch(&mut self, now: Nanos) {
        self.batch_open = false;
        if std::mem::take(&mut self.batch_deferred) {
            self.now = self.now.max(now);
            self.run_background();
        }
    }

    fn run_background_unless_batched(&mut self) {
        if self.batch_open {
            self.batch_deferred = true;
        } else {
            self.run_background();
        }
    }

    /// Time passes: background write-back, logging, commits, reclamation.
    pub fn handle_timer(&mut self, now: Nanos) {
        self.note_timer_fired(now);
        self.now = now;
        self.run_background();
    }

    /// A device was hot-removed or died.
    pub fn handle_device_removed(&mut self, now: Nanos, role: DeviceRole) {
        self.now = now;
        self.device_lost(role);
        self.run_background();
    }

    /// A replacement log mirror is attached; it is formatted and re-synced.
    pub fn handle_mirror_attached(&mut self, now: Nanos, mirror: u8) {
        self.now = now;
        self.attach_mirror(mirror);
        self.run_background();
    }

    /// Switches the write policy. Leaving write-back for `wt` or
    /// `passthrough` first writes every dirty block back.
    pub fn set_policy(&mut self, now: Nanos, policy: Policy) -> Result<(), ConfigError> {
        self.now = now;
        if policy.uses_log() && self.config.mirrors_count == 0 {
            return Err(ConfigError::invalid("policy hhc needs at least one log device"));
        }
        self.begin_policy_switch(policy);
        self.run_background();
        Ok(())
    }

    /// Changes the options an operator tunes while the engine serves: all
    /// of them or, with an error naming the one at fault, none. The
    /// write-back parallelism may not exceed the one the engine was created
    /// with (its staging pool and command table are sized for it).
    pub fn set_options(&mut self, now: Nanos, options: Options) -> Result<(), ConfigError> {
        self.now = now;
        options.validate()?;
        let created = self.writeback.extents_count();
        if options.writeback_parallelism > created {
            return Err(ConfigError::invalid(format!(
                "writeback_parallelism {} exceeds {created}, the most this bdev was created for",
                options.writeback_parallelism
            )));
        }
        self.config.set_options(options);
        self.writeback.pacer.set_full(options.writeback_parallelism);
        self.writeback.set_threshold(self.cache.blocks_count(), options.dirty_threshold_percent);
        self.run_background();
        Ok(())
    }

    /// Clean stop: stop taking requests, commit metadata, then `Stopped`.
    pub fn shutdown(&mut self, now: Nanos) {
        self.now = now;
        if self.state == EngineState::Ready {
            self.state = EngineState::Stopping;
        }
        self.run_background();
    }

    // ---- outputs ----

    pub fn poll_io(&mut self) -> Option<DeviceIo> {
        self.commands.next_out()
    }

    pub fn poll_completion(&mut self) -> Option<RequestCompletion> {
        self.completions_out.pop_front_rewound()
    }

    /// When the engine wants `handle_timer` next, if at all (the earliest
    /// of its timers, engine/timers.rs).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.next_timer().map(|(_, at)| at)
    }

    pub fn io_memory_mut(&mut self, region: u32) -> &mut [u8] {
        if let Some(startup) = self.startup.as_mut() {
            if let Some(memory) = startup.io_memory_mut(region) {
                return memory;
            }
        }
        self.regions.all[region as usize].as_mut_slice()
    }

    // ---- internal plumbing ----

    fn submit(&mut self, op: Op, device: DeviceRole, kind: IoKind, offset_bytes: u64, len_bytes: u64, buffer: IoBuffer) {
        let timed = op.log_mirror().filter(|_| self.state == EngineState::Ready && self.config.mirror_timeout_ns > 0);
        let io = DeviceIo { id: 0, device, kind, offset_bytes, len_bytes, buffer };
        self.commands.submit(op, io, timed.map(|mirror| (mirror, self.now)));
    }

    fn region(&mut self, region: u32) -> &mut [u8] {
        self.regions.all[region as usize].as_mut_slice()
    }

    fn complete_request(&mut self, owner: RequestOwner, result: Result<(), RequestError>) {
        let RequestOwner::Driver(id) = owner else {
            if let Err(error) = result {
                let failures = self.restart_flush.as_mut().expect("a restart flush completed with none running");
                *failures += 1;
                let attempts = *failures;
                if attempts >= RESTART_FLUSH_ATTEMPTS {
                    return self.fail(FailReason::new(FailKind::DeviceError, format!(
                        "the flush after a warm restart failed {attempts} times (last: {error:?}); dirty data stays in the cache and the log"
                    )));
                }
                log::warn!("hhc: the flush after a warm restart failed: {error:?}; trying again");
                // What a warm restart serves counts as durable once it is
                // `Ready`, against a cache loss too. A failed flush has not
                // made it so: a retiring log stays (it is restarted only by a
                // flush that succeeds), and the revokes of blocks written back
                // meanwhile wait unsealed in its open buffer, so a replay would
                // put older logged values back over them (seed 4125). Blocks
                // whose write-back failed are still dirty: the next flush
                // writes them back again.
                if self.state == EngineState::Ready {
                    self.start_restart_flush();
                    return;
                }
            }
            self.restart_flush = None;
            return;
        };
        self.completions_out.push_back(RequestCompletion { id, result });
    }

    fn is_idle(&self) -> bool {
        self.now.saturating_sub(self.last_request_at) >= self.config.idle_after_ns
    }

    /// The deliberate defect switched on; always `None` (a constant the
    /// switches fold away on) without the `mutations` feature.
    fn mutation(&self) -> Mutation {
        if crate::config::MUTATIONS_BUILT {
            self.config.mutation
        } else {
            Mutation::None
        }
    }

    /// Background work after every input, in dependency order.
    fn run_background(&mut self) {
        if !matches!(self.state, EngineState::Ready | EngineState::Stopping) {
            return;
        }
        self.fail_unanswering_mirrors();
        self.take_commit_step();
        self.observe_log_space();
        self.retry_waiting();
        self.log_unlogged_blocks();
        self.apply_pending_revokes();
        self.progress_flushes();
        self.progress_new_log_sync();
        self.progress_policy_switch();
        self.schedule_writeback();
        self.reclaim_log_space();
        self.maybe_seal();
        self.keep_free_blocks();
        self.maybe_commit();
        self.maybe_write_superblock();
        self.progress_owner_record();
        self.progress_shutdown();
    }

    /// Whether logging blocks again from the cache device can start now:
    /// not while every unlogged dirty block is already being read into the
    /// open buffer, nor while that buffer is full and waits for such reads
    /// (it cannot be sealed before they land). Walking the unlogged blocks
    /// on every input then only finds what it found before.
    pub(super) fn relog_may_start(&self) -> bool {
        let Some(open) = self.log.open_buffer else { return true };
        let buffer = &self.log.buffers[open];
        let reads = buffer.slot_reads_in_flight;
        self.cache.unlogged_dirty_count() > reads && !(reads > 0 && self.log.open_is_full())
    }

    fn progress_shutdown(&mut self) {
        if self.state != EngineState::Stopping || !self.requests.is_empty() {
            return;
        }
        if self.commit.is_idle() && !self.commit.has_dirty_pages() && self.commands.is_idle() {
            self.state = EngineState::Stopped;
        } else if self.commit.is_idle() && self.commit.has_dirty_pages() {
            // Started now: `maybe_commit` ran earlier in this pass, and the
            // next pass may be a timer tick away (a tenth of `idle_after`).
            self.commit.request();
            self.maybe_commit();
        }
    }

    fn device_lost(&mut self, role: DeviceRole) {
        match role {
            DeviceRole::Cache => self.fail(FailReason::new(FailKind::DeviceLost, "cache device lost")),
            DeviceRole::Log(mirror) => self.mirror_failed(mirror),
            DeviceRole::Backing => self.fail(FailReason::new(FailKind::DeviceLost, "backing device lost")),
        }
    }

    /// Stops serving: every outstanding request fails; dirty data stays where
    /// it is durable (cache metadata and the log) for recovery. A request
    /// with device commands in flight into its buffer completes only when
    /// they have (`drain_failed`), so the buffer is never freed under them.
    fn fail(&mut self, reason: FailReason) {
        if matches!(self.state, EngineState::Failed(_)) {
            return;
        }
        log::error!("hhc engine stopped: {reason}");
        self.state = EngineState::Failed(reason);
        for waiting in std::mem::take(&mut self.waiting) {
            self.sub_done(waiting.request, 1, Some(RequestError::NotReady));
        }
        for flush in self.flushes.take_all() {
            self.sub_done(flush.request, 1, Some(RequestError::NotReady));
        }
    }

    /// A command completed after the engine failed: only the request it
    /// belonged to is accounted for.
    fn drain_failed(&mut self, op: Op) {
        let share = match op {
            Op::ReadCache { request, .. } | Op::FillCache { request, .. } | Op::WriteCache { request, .. } => {
                Some((request, 1))
            }
            Op::WriteBacking { request, .. } => Some((request, 1)),
            Op::ReadBacking { request, blocks_count, .. } => Some((request, blocks_count)),
            _ => None,
        };
        if let Some((request, count)) = share {
            self.sub_done(request, count, Some(RequestError::NotReady));
        }
    }
}

/// A log under twice the cache falls behind `wb` once it wraps under a
/// sustained write load (the simulator's log-size sweep: 0.18-0.40x `wb` at
/// 1x); said at every start (creation, warm open), in the log the operator
/// reads.
fn note_small_log(config: &Config, log_layout: &LogLayout) {
    let log_bytes = log_layout.segments_count as u64 * log_layout.segment.segment_bytes as u64;
    if config.policy != Policy::Hhc || config.mirrors_count == 0 || log_bytes >= 2 * config.cache_device_bytes {
        return;
    }
    log::info!(
        "the log ({} MiB a mirror) is {:.1}x the cache ({} MiB): under a sustained write load hhc falls behind wb once the log wraps; `hhc size` tells how large it should be (docs/tuning.md)",
        log_bytes >> 20,
        log_bytes as f64 / config.cache_device_bytes as f64,
        config.cache_device_bytes >> 20
    );
}
