//! One HHC bdev: the engine, its base bdevs, its requests and where it is
//! in its life. `Node` is what C holds a pointer to; its mutable state,
//! `Core`, lives in a `NodeCell` that one thread at a time enters: the
//! owner, or a thread running its own requests (request.rs). This room
//! runs the node's loop: take inputs and submissions, carry out the
//! engine's device commands, hand back completions. What touches the
//! bases' descriptors, the timers and the life cycle runs on the owner
//! only. The life cycle (lifecycle.rs), recovery (recovery.rs) and reports
//! (info.rs) are the other methods of `Core`.

use crate::queue::Rewind;
use super::channels::Channels;
use super::base::{Bases, Timing};
use super::io_tag::{EngineTag, IoTag};
use super::errno::{Error, Refusal};
use super::iov::IovecData;
use super::owner::{now_ns, Entered, NodeCell, OwnerCell, Thread};
use super::params::CreateParams;
use super::recovery::Recovery;
use super::report::Baseline;
use super::request::{finish_request, Channel, LaneDone, Requests, Shared, SubmitKind, Submission, SUBMISSIONS_MAX};
use super::rpc::Rpc;
use super::sys;
use crate::config::Config;
use crate::engine::{Engine, EngineState, PrefetchStage};
use crate::io::{DeviceRole, IoId, IoKind, IoStatus, Request, RequestKind};
use libc::iovec;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Requests started together, their lookups prefetched together.
const SUBMISSION_BATCH: usize = 32;
/// The owner publishes the node for other threads at least this often
/// (and after every operator RPC).
const PUBLISH_INTERVAL_NS: u64 = 1_000_000_000;

/// Something that happened to a base bdev, queued for the owner's loop.
enum Input {
    BaseDone { role: DeviceRole, tag: IoTag, status: i32, timing: Timing },
    BaseRemoved(DeviceRole),
}

/// The node's bdev (`bdev_state.rs`), named by its C handle.
pub(super) type Bdev = super::bdev_state::BdevState<*mut sys::hhc_glue_node>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Reading unit 0 of the cache bdev to tell a new cache from a warm
    /// one. `format_anyway`: format it even if it holds an HHC cache
    /// (bdev_hhc_recover onto a fresh cache).
    Probing { format_anyway: bool },
    Starting,
    Running,
    /// Clean shutdown for destruct.
    Stopping,
    /// The engine failed; waiting for its device commands to drain.
    Failed,
    /// The cache device is gone: replaying the log onto the backing device.
    /// From here on the bdev is unregistered and the node is a record that
    /// the operator reads and acts on (bdev_hhc_recover, bdev_hhc_delete).
    Recovering,
    /// The replay is done: every flushed write is on the backing device.
    Recovered,
    /// The replay (or the cache loss itself) left data that is not on the
    /// backing device; the error says why.
    RecoveryFailed,
    Done,
}

impl Phase {
    /// The HHC bdev lost its cache and is a record without a bdev now.
    pub fn is_record(self) -> bool {
        matches!(self, Phase::Recovering | Phase::Recovered | Phase::RecoveryFailed)
    }

    pub fn name(self) -> &'static str {
        match self {
            Phase::Probing { .. } => "probing",
            Phase::Starting => "starting",
            Phase::Running => "running",
            Phase::Stopping => "stopping",
            Phase::Failed => "failed",
            Phase::Recovering => "recovering",
            Phase::Recovered => "recovered",
            Phase::RecoveryFailed => "recovery_failed",
            Phase::Done => "done",
        }
    }
}

pub struct Node {
    /// Fixed for the node's life (any thread reads it); the rest of the
    /// create parameters change (options, log mirrors) and live in `Core`.
    pub name: String,
    pub shared: Arc<Shared>,
    pub(super) core: NodeCell<Core>,
    inbox: OwnerCell<VecDeque<Input>>,
    /// Requests of the owner thread's own channel, queued without atomics.
    local: OwnerCell<VecDeque<Submission>>,
    /// What the owner last published for other threads (`Core::publish`).
    pub published: Mutex<Published>,
}

/// A node as its owner last showed it, for the bdev layer's callbacks that
/// run on another thread and cannot wait (`dump_info_json`,
/// `write_config_json`).
pub struct Published {
    /// `bdev_hhc_get_bdevs`'s answer for the node.
    pub info: Option<String>,
    /// The create call that brings it back (`Core::saved_params`): the
    /// create call's own until the node is first published, and the last
    /// one before it became a record of a lost cache.
    pub params: CreateParams,
}

pub struct Core {
    /// The node this core belongs to (stable: nodes are boxed).
    pub(super) node: *const Node,
    /// The node's owner thread, where every message about it goes.
    pub(super) owner: Thread,
    /// The thread inside is the owner (set at every entry).
    pub(super) on_owner: bool,
    /// What the channels were told and have yet to be told (channels.rs).
    pub(super) channels: Channels,
    pub(super) params: CreateParams,
    pub(super) phase: Phase,
    pub(super) config: Config,
    pub(super) engine: Option<Engine>,
    pub(super) bases: Bases,
    pub(super) requests: Requests,
    /// The node's bdev, from its registration to its destruct.
    pub(super) bdev: Bdev,
    pub(super) poller: *mut sys::hhc_glue_poller,
    /// The create call waiting for the bdev to be registered.
    pub(super) rpc: Option<Rpc>,
    pub(super) probe: Option<Box<dyn crate::io::IoRegion>>,
    pub(super) recovery: Option<Recovery>,
    /// How the last recovery went (or goes), for the operator.
    pub(super) recovery_progress: Option<crate::recovery::RecoveryProgress>,
    /// A passthrough without a cache: requests go straight to the backing bdev.
    pub(super) direct: Option<crate::direct::Direct>,
    /// Device commands of the engine in flight (a failed engine's drain and
    /// the recovery after it wait for them).
    pub(super) engine_ios: u32,
    /// Completions made up on the owner thread (no such base, submit error).
    pub(super) immediate: VecDeque<(IoId, IoStatus)>,
    /// The clock, read once per pass of the owner's loop: what the engine
    /// and the flush latency see for everything in that pass.
    pub(super) now: u64,
    /// When the owner last published the node (`Core::publish`), ns.
    pub(super) published_at_ns: u64,
    pub(super) iov_scratch: Vec<iovec>,
    /// Submissions being started (take_submissions), kept for its capacity.
    batch: Vec<Submission>,
    /// Lane completions being handed in (take_lane_done), likewise.
    lane_batch: Vec<LaneDone>,
    pub(super) failure: Option<String>,
    /// Counters at the last stats reset and report (control.rs).
    pub(super) baseline: Baseline,
    /// A policy a create call asked for before the bdev ran (control.rs).
    pub(super) policy_on_start: Option<crate::config::Policy>,
    /// Options a create call asked for before the bdev ran (control.rs).
    pub(super) options_on_start: Option<super::params::OptionParams>,
    /// The `protection` state last seen (control.rs, note_protection).
    pub(super) protection_state: Option<&'static str>,
    /// What creating it found allowed but likely a mistake (lifecycle.rs).
    pub(super) warnings: Vec<String>,
    /// A passthrough made by `bdev_hhc_recover` mode passthrough: what the
    /// record was (its log mirrors, policy, options), for mode cache later.
    pub(super) before_passthrough: Option<CreateParams>,
    /// `bdev_hhc_create` with `takeover`: the replay, then what it did.
    pub(super) takeover: Option<super::lifecycle::takeover::Takeover>,
}

impl Node {
    /// The create call that brings the node back, as its owner last
    /// published it (for a thread that cannot enter the node).
    pub fn published_params(&self) -> CreateParams {
        self.published.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).params.clone()
    }

    /// A node owned by the calling thread; its bases and config come next
    /// (they need the node's address).
    pub fn new(params: CreateParams) -> Box<Node> {
        let name = params.name.clone();
        let published = Published { info: None, params: params.clone() };
        let core = Core {
            params,
            phase: Phase::Probing { format_anyway: false },
            config: Config::default(),
            engine: None,
            bases: Bases::default(),
            node: std::ptr::null(),
            owner: Thread::current(),
            on_owner: true,
            channels: Channels::default(),
            requests: Requests::with_capacity(Config::default().requests_max as usize),
            bdev: Bdev::Unregistered,
            poller: std::ptr::null_mut(),
            rpc: None,
            probe: None,
            recovery: None,
            recovery_progress: None,
            direct: None,
            engine_ios: 0,
            immediate: VecDeque::with_capacity(64),
            now: now_ns(),
            published_at_ns: 0,
            iov_scratch: Vec::with_capacity(16),
            batch: Vec::with_capacity(SUBMISSION_BATCH),
            lane_batch: Vec::with_capacity(SUBMISSION_BATCH),
            failure: None,
            baseline: Baseline::new(now_ns()),
            policy_on_start: None,
            options_on_start: None,
            protection_state: None,
            warnings: Vec::new(),
            before_passthrough: None,
            takeover: None,
        };
        let node = Box::new(Node {
            name,
            shared: Shared::new(),
            core: NodeCell::new(core),
            inbox: OwnerCell::new(VecDeque::with_capacity(256)),
            local: OwnerCell::new(VecDeque::with_capacity(SUBMISSIONS_MAX)),
            published: Mutex::new(published),
        });
        let address: *const Node = &*node;
        node.core.enter(|core| core.node = address).expect("a new node is not entered");
        node
    }

    pub fn base_done(&self, role: DeviceRole, tag: IoTag, status: i32, timing: Timing) {
        self.push_input(Input::BaseDone { role, tag, status, timing });
        self.run();
    }

    pub fn base_removed(&self, role: DeviceRole) {
        self.push_input(Input::BaseRemoved(role));
        self.run();
    }

    /// A request of the owner thread's channel: queued, then started at
    /// once unless the loop is already running (then it takes it next).
    pub fn submit_on_owner(&self, channel: &Channel, submission: Submission) -> Result<(), Refusal> {
        self.local.enter(|queue| channel.submit_local(submission, queue)).expect("the local queue is never entered twice")?;
        self.run();
        Ok(())
    }

    fn pop_local(&self) -> Option<Submission> {
        self.local.enter(VecDeque::pop_front_rewound).expect("the local queue is never entered twice")
    }

    fn push_input(&self, input: Input) {
        self.inbox.enter(|inbox| inbox.push_back(input)).expect("the inbox is never entered twice");
    }

    fn pop_input(&self) -> Option<Input> {
        self.inbox.enter(VecDeque::pop_front_rewound).expect("the inbox is never entered twice")
    }

    /// On the owner thread: does all pending work unless a thread is
    /// inside already, a caller up the stack (a completion we hand to the
    /// bdev layer may submit a new request at once) or a request thread.
    /// That caller's loop picks the new work up; after a request thread,
    /// the owner's poller does.
    pub fn run(&self) -> bool {
        self.core.try_run(Thread::current(), |core| self.run_core(core, None)).unwrap_or(false)
    }

    /// A channel's poller off the owner thread: runs the requests and lane
    /// completions it queued, unless a thread is inside the node (then it
    /// tries again next pass).
    pub fn run_channel(&self, channel: &Channel) -> bool {
        channel.has_work() && self.core.try_run(channel.thread, |core| self.run_core(core, Some(channel))).unwrap_or(false)
    }

    /// The loop: `channel` names the request thread inside (None: the owner).
    fn run_core(&self, core: &mut Core, channel: Option<&Channel>) -> bool {
        let mut busy = false;
        loop {
            core.now = now_ns();
            let mut progressed = false;
            core.begin_batch();
            match channel {
                None => {
                    while let Some(input) = self.pop_input() {
                        core.handle_input(input);
                        progressed = true;
                    }
                    while let Some(io) = self.shared.pop_for_owner() {
                        core.submit_engine_io(io);
                        progressed = true;
                    }
                    progressed |= core.take_submissions(|| self.pop_local());
                }
                Some(channel) => {
                    progressed |= core.take_lane_done(|| channel.pop_lane_done());
                    progressed |= core.take_submissions(|| channel.pop_queued());
                }
            }
            core.end_batch();
            progressed |= core.pump();
            if !progressed {
                break;
            }
            busy = true;
        }
        if channel.is_none() {
            // A removed backing bdev stays open while a route may name it.
            let hold_backing = !core.bypass_drained();
            core.bases.close_drained(hold_backing);
            core.advance_phase();
            core.update_channels();
        }
        busy
    }

    /// The owner thread's poller: timers plus whatever is queued.
    /// One entry for the timer, the loop and the publishing: a pass with
    /// nothing to do costs one acquire of the cell, not three.
    pub fn poll(&self) -> bool {
        self.core
            .enter(|core| {
                core.fire_timer();
                let busy = self.run_core(core, None);
                if core.now.saturating_sub(core.published_at_ns) >= PUBLISH_INTERVAL_NS {
                    core.publish();
                }
                busy
            })
            .unwrap_or(false)
    }
}

impl Entered for Core {
    fn entered(&mut self, current: Thread, on_owner: bool) {
        self.on_owner = on_owner;
        self.requests.current = current;
    }
}

impl Core {
    fn handle_input(&mut self, input: Input) {
        match input {
            Input::BaseDone { role, tag, status, timing } => self.device_io_done(role, tag, status, timing),
            Input::BaseRemoved(role) => self.device_removed(role),
        }
    }

    /// Starts the queued requests, a batch at a time: the cache lookups of
    /// a batch are prefetched in two stages first, so that each waits for
    /// memory once per batch rather than twice per request.
    fn take_submissions(&mut self, next: impl FnMut() -> Option<Submission>) -> bool {
        let prefetch = |engine: &Engine, batch: &[Submission]| {
            for stage in [PrefetchStage::First, PrefetchStage::Second] {
                for submission in batch.iter().filter(|s| s.kind != SubmitKind::Reset) {
                    engine.prefetch_lookup(submission.lba, stage);
                }
            }
        };
        self.take_in_batches(|core| &mut core.batch, next, prefetch, Core::start_request)
    }

    /// Takes what `next` hands out, up to SUBMISSION_BATCH at a time, into
    /// the scratch vector `scratch` names (kept for its capacity): the
    /// engine sees each batch of more than one through `prefetch` before
    /// `handle` takes its items.
    fn take_in_batches<T>(
        &mut self,
        scratch: fn(&mut Core) -> &mut Vec<T>,
        mut next: impl FnMut() -> Option<T>,
        prefetch: impl Fn(&Engine, &[T]),
        mut handle: impl FnMut(&mut Core, T),
    ) -> bool {
        let mut batch = std::mem::take(scratch(self));
        let mut any = false;
        loop {
            batch.extend(std::iter::from_fn(&mut next).take(SUBMISSION_BATCH));
            if batch.is_empty() {
                break;
            }
            any = true;
            if let Some(engine) = self.engine.as_ref().filter(|_| batch.len() > 1) {
                prefetch(engine, &batch);
            }
            for item in batch.drain(..) {
                handle(self, item);
            }
        }
        *scratch(self) = batch;
        any
    }

    /// The completions and requests this pass takes reach the engine as
    /// one batch (`Engine::begin_batch`).
    fn begin_batch(&mut self) {
        if let Some(engine) = self.engine.as_mut() {
            engine.begin_batch();
        }
    }

    /// Ends the pass's batch; an engine made during it was never in one.
    fn end_batch(&mut self) {
        if let Some(engine) = self.engine.as_mut() {
            engine.end_batch(self.now);
        }
    }

    /// Hands the lane's completions to the engine, a batch at a time, the
    /// cache entries they read prefetched together first (the copies of
    /// the batch's commands have pushed them out of the CPU cache).
    fn take_lane_done(&mut self, next: impl FnMut() -> Option<LaneDone>) -> bool {
        let prefetch = |engine: &Engine, batch: &[LaneDone]| {
            for done in batch {
                if let IoTag::Engine(EngineTag { id, .. }) = done.tag {
                    engine.prefetch_completion(id.into());
                }
            }
        };
        self.take_in_batches(|core| &mut core.lane_batch, next, prefetch, Core::lane_io_done)
    }

    fn fire_timer(&mut self) {
        let Some(engine) = self.engine.as_mut() else { return };
        // Starting too: a warm restart finishes with a flush of its own.
        if !matches!(self.phase, Phase::Starting | Phase::Running | Phase::Stopping) {
            return;
        }
        let now = now_ns();
        if engine.poll_timeout().is_some_and(|at| at <= now) {
            engine.handle_timer(now);
        }
    }

    fn start_request(&mut self, submission: Submission) {
        let kind = match submission.kind {
            SubmitKind::Reset => {
                log::info!("{}: reset: draining {} requests in flight", self.params.name, self.requests.live());
                if !self.bypass_drained() {
                    log::info!("{}: reset: and the requests sent straight to the backing bdev", self.params.name);
                    self.drain_bypass_for_reset();
                }
                return self.requests.reset(submission);
            }
            SubmitKind::Engine(kind) => kind,
        };
        let ready = self.serving()
            && (self.direct.is_some() || self.engine.as_ref().is_some_and(|e| *e.state() == EngineState::Ready));
        // Without a cache no engine says busy: the table's bound is kept
        // here (the base I/O contexts are sized by it).
        let direct_full = self.direct.is_some() && self.requests.live() >= self.config.requests_max as usize;
        let refusal = match u32::try_from(submission.blocks_count) {
            Err(_) => Some(Refusal::TooLong),
            Ok(_) if !ready => Some(Refusal::NotReady),
            Ok(_) if direct_full => Some(Refusal::Full),
            Ok(_) => None,
        };
        if let Some(refusal) = refusal {
            // SAFETY: the submission is outstanding on a live channel; completed once, here.
            return unsafe { finish_request(submission.io, submission.channel, refusal.status(), self.requests.current) };
        }
        let key = self.requests.insert(&submission, self.now);
        let request = Request { id: key as u64, kind, lba: submission.lba, blocks_count: submission.blocks_count as u32 };
        if let Some(direct) = self.direct.as_mut() {
            return direct.handle_request(request);
        }
        let engine = self.engine.as_mut().expect("running engine");
        if kind == RequestKind::Write {
            // SAFETY: the request is outstanding; the engine copies or lends
            // its buffers only until it completes the request.
            let iovs = unsafe { submission.iovs.get() };
            engine.handle_request(self.now, request, Some(&IovecData { iovs }));
        } else {
            engine.handle_request(self.now, request, None);
        }
    }

    /// Carries out the engine's (and recovery's) output until there is none.
    fn pump(&mut self) -> bool {
        let mut any = false;
        loop {
            while let Some((id, status)) = self.immediate.pop_front_rewound() {
                any = true;
                self.engine_io_done(id, status);
            }
            while let Some(io) = self.engine.as_mut().and_then(Engine::poll_io) {
                any = true;
                self.submit_engine_io(io);
            }
            while let Some(completion) = self.engine.as_mut().and_then(Engine::poll_completion) {
                any = true;
                self.requests.completed(completion, self.now);
            }
            while let Some(io) = self.direct.as_mut().and_then(crate::direct::Direct::poll_io) {
                any = true;
                self.submit_engine_io(io);
            }
            while let Some(completion) = self.direct.as_mut().and_then(crate::direct::Direct::poll_completion) {
                any = true;
                self.requests.completed(completion, self.now);
            }
            // Recovery runs on the owner's channels only.
            let recovered = self.on_owner && self.recovery.as_mut().is_some_and(|recovery| recovery.pump(&mut self.bases));
            any |= recovered;
            if self.on_owner {
                self.advance_recovery();
            }
            // Another pass only for what this one made: commands that could
            // not start (completed at once), recovery steps done inline. A
            // completion handed to the bdev layer changes no machine here
            // (a request it submits in turn waits in a queue).
            if self.immediate.is_empty() && !recovered {
                return any;
            }
        }
    }

    pub(super) fn node(&self) -> &Node {
        // SAFETY: the core lives inside its node.
        unsafe { &*self.node }
    }

    fn device_removed(&mut self, role: DeviceRole) {
        // Every channel's lane gives its channel to the bdev back (and the
        // routes go with the backing bdev), so the bdev's removal need not
        // wait for this bdev's channels to go (update_channels).
        self.channels.lanes_to_drop |= matches!(role, DeviceRole::Backing | DeviceRole::Cache);
        let base = self.bases.removed(role);
        log::warn!("{}: {role} bdev {} was removed", self.params.name, base.name);
        match self.phase {
            Phase::Probing { .. } => self.fail(Error::NoDevice(format!("{role} bdev removed during creation"))),
            Phase::Starting | Phase::Running | Phase::Stopping if self.direct.is_some() => {
                self.fail(Error::NoDevice(format!("{role} bdev removed")))
            }
            Phase::Starting | Phase::Running | Phase::Stopping => {
                let engine = self.engine.as_mut().expect("engine");
                engine.handle_device_removed(now_ns(), role);
            }
            Phase::Failed | Phase::Recovering | Phase::Recovered | Phase::RecoveryFailed | Phase::Done => {}
        }
    }

    /// Starts the one read of the probe (unit 0 of the cache bdev).
    pub(super) fn submit_probe(&mut self, iov: iovec, len_bytes: u64) -> Result<(), IoStatus> {
        self.bases.submit(DeviceRole::Cache, IoKind::Read, 0, len_bytes, &[iov], IoTag::Probe)
    }
}
