//! One seed: the target and the simulated devices pumped in virtual time,
//! faults fired from the plan, every read checked by the oracle, every
//! recovery verified block by block. Restarts and recoveries are in
//! `runner/recover.rs`, device commands and their buffers in
//! `runner/memory.rs`, the requests and their checks in `runner/requests.rs`.

use super::device::SimDevice;
use super::faults::{Fault, FaultKinds, FaultPlan};
use super::oracle::{Oracle, Tick, Violation};
use super::pattern::WriteId;
use super::workload::Workload;
use super::Figures;
use crate::config::{Config, Mutation, Policy};
use crate::engine::{EngineState, StartMode};
use crate::io::{DeviceIo, DeviceRole, IoId, IoMachine, Machine, Nanos, Request, RequestId, RequestKind};
use crate::simcore::event_queue::EventQueue;
use crate::simcore::prng::Prng;
use crate::simcore::TargetFactory;
use std::collections::{BTreeMap, VecDeque};

mod memory;
mod recover;
mod requests;

use memory::{contract, describe_io, perform, TargetMemory};

/// Everything that determines a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunSpec {
    pub seed: u64,
    pub ops: u64,
    pub policy: Policy,
    pub mutation: Mutation,
    /// Requests and completions that reach the target as one batch at most
    /// (`Machine::begin_batch`), as a poller pass hands them to the engine
    /// under SPDK; 1: each on its own.
    pub input_batch: u32,
}

#[derive(Clone, Debug)]
pub struct SeedOutcome {
    pub spec: RunSpec,
    /// The fault kinds this seed switched on.
    pub kinds: FaultKinds,
    pub figures: Figures,
    pub violation: Option<Violation>,
}

/// Requests outstanding against one engine instance at most this long
/// (virtual). A hang never completes, so any bound catches it; 5 s proved too
/// tight: with latency spikes and backing errors piling up behind a long
/// write-back queue, a flush took 5–10 s while making progress (4 seeds in
/// 18,000 long ones; each completes under a 60 s bound).
const STALL_LIMIT_NS: Nanos = 10_000_000_000;
/// Start and shutdown must finish within this much virtual time.
const PHASE_LIMIT_NS: Nanos = 10_000_000_000;
/// Handler calls without virtual time advancing: the target spins.
const SPIN_LIMIT: u32 = 1_000_000;
const VERIFY_CHUNK_BLOCKS: u32 = 8;
const VERIFY_READS_OUTSTANDING: usize = 8;
const VERIFY_RETRIES: u32 = 50;
/// Bytes a read buffer holds before the target fills it: never a valid block.
const READ_POISON: u8 = 0xEE;

pub fn run_seed<F: TargetFactory>(factory: &F, spec: RunSpec) -> SeedOutcome {
    CURRENT_SEED.with(|current| current.set(Some(spec)));
    let mut sim = Sim::new(factory, spec);
    // An assertion in the target is a finding like any other (where panics
    // unwind; with panic=abort the hook of `announce_panics` names the seed).
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.run()));
    let violation = match result {
        Ok(result) => result.err(),
        Err(panic) => Some(Violation {
            invariant: "assertion (the target panicked)",
            lba: None,
            expected: "no panic".into(),
            found: panic_message(panic.as_ref()),
            context: format!("at {} ns", sim.now),
        }),
    };
    CURRENT_SEED.with(|current| current.set(None));
    sim.retire_target();
    let mut figures = sim.figures;
    figures.seeds = 1;
    figures.violations = violation.is_some() as u64;
    figures.corruptions_injected = sim.devices.all().map(|d| d.stats.corruptions_injected).sum();
    if violation.is_none() {
        figures.corruptions_read_back = sim.devices.all().map(|d| d.stats.corruptions_read_back).sum();
    }
    SeedOutcome { spec, kinds: sim.plan.kinds, figures, violation }
}

thread_local! {
    static CURRENT_SEED: std::cell::Cell<Option<RunSpec>> = const { std::cell::Cell::new(None) };
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(message), _) => message.to_string(),
        (_, Some(message)) => message.clone(),
        _ => "a panic without a message".into(),
    }
}

/// Makes a panic (an engine assertion) print the seed that caused it and how
/// to rerun it, even where panics abort the process.
pub fn announce_panics() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(spec) = CURRENT_SEED.with(|current| current.get()) {
            eprintln!("seed {}: the target panicked; reproduce: {}", spec.seed, super::reproduce_command(&spec));
        }
        default_hook(info);
    }));
}

struct Devices {
    cache: SimDevice,
    mirrors: Vec<SimDevice>,
    backing: SimDevice,
}

impl Devices {
    fn get(&mut self, role: DeviceRole) -> Option<&mut SimDevice> {
        match role {
            DeviceRole::Cache => Some(&mut self.cache),
            DeviceRole::Log(i) => self.mirrors.get_mut(i as usize),
            DeviceRole::Backing => Some(&mut self.backing),
        }
    }

    fn all(&self) -> impl Iterator<Item = &SimDevice> {
        std::iter::once(&self.cache).chain(self.mirrors.iter()).chain(std::iter::once(&self.backing))
    }

    fn any_failure(&self) -> bool {
        self.all().any(|d| d.is_dead() || d.stats.errors_injected > 0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Requester(usize),
    PeriodicFlush,
    /// Reads of the verification pass after a recovery.
    Verifier,
}

struct Outstanding {
    request: Request,
    submitted_at: Nanos,
    data: Vec<u8>,
    origin: Origin,
    write: Option<WriteId>,
    read_tick: Tick,
}

/// What reaches the target as a request or a completion (a batch's inputs).
fn batchable(event: &Event) -> bool {
    matches!(event, Event::IoDone(_) | Event::Wake(_))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    IoDone(IoId),
    Wake(usize),
    PeriodicFlush,
    Fault(Fault),
    /// The host notices the dead cache device and goes down for recovery.
    CacheLossStop,
    /// Ends an idle period; nothing happens.
    IdleEnd,
}


struct Sim<'f, F: TargetFactory> {
    factory: &'f F,
    spec: RunSpec,
    plan: FaultPlan,
    prng: Prng,
    now: Nanos,
    devices: Devices,
    target: Option<F::Target>,
    events: EventQueue<Event>,
    in_flight: BTreeMap<IoId, DeviceIo>,
    requests: BTreeMap<RequestId, Outstanding>,
    finished: BTreeMap<RequestId, (RequestKind, Nanos)>,
    tracing: bool,
    next_request: RequestId,
    wake_pending: Vec<bool>,
    oracle: Oracle,
    workload: Workload,
    ops_submitted: u64,
    next_fault: usize,
    /// Faults that came due while recovering; fired once the target runs again.
    deferred_faults: Vec<Fault>,
    policy: Policy,
    log_ever_used: bool,
    /// Requests come from the workload only while the target is running.
    recovering: bool,
    /// A failure beyond the design ended the seed early.
    ended: bool,
    /// Verification: chunks still to read (first block, failed attempts).
    verify_queue: VecDeque<(u64, u32)>,
    verify_context: String,
    verify_attempts: BTreeMap<u64, u32>,
    /// Per mirror: it came back (`Fault::MirrorReturns`) or was attached
    /// online (`Fault::MirrorAttached`) and has not been replaced since.
    rejoined: Vec<bool>,
    /// Per mirror: it rejoined and the target's latest report does not
    /// call it healthy, so it is no good copy.
    rejoined_unconfirmed: Vec<bool>,
    /// Per mirror: it stopped answering (`Fault::MirrorHangs`) and, once it
    /// answers again, the target does not call it healthy: it may have
    /// missed writes, so it is no good copy.
    hung: Vec<bool>,
    /// Per mirror: the target called it failed while the device was alive
    /// (it stopped waiting for it: `Config::mirror_timeout_ns`), so it may
    /// have missed writes and is no good copy until formatted again.
    given_up: Vec<bool>,
    figures: Figures,
}

impl<'f, F: TargetFactory> Sim<'f, F> {
    fn new(factory: &'f F, spec: RunSpec) -> Sim<'f, F> {
        let plan = FaultPlan::draw(spec.seed, spec.ops, spec.policy, spec.mutation);
        let mut prng = Prng::new(spec.seed);
        let devices = Devices {
            cache: SimDevice::new(DeviceRole::Cache, plan.cache.clone(), prng.fork()),
            mirrors: (0..plan.mirrors.len()).map(|i| SimDevice::new(DeviceRole::Log(i as u8), plan.mirrors[i].clone(), prng.fork())).collect(),
            backing: SimDevice::new(DeviceRole::Backing, plan.backing.clone(), prng.fork()),
        };
        let blocks_count = plan.config.backing_blocks();
        let workload = Workload::new(plan.workload.clone(), blocks_count, prng.fork());
        Sim {
            factory,
            spec,
            prng,
            now: 0,
            devices,
            target: None,
            events: EventQueue::new(),
            in_flight: BTreeMap::new(),
            requests: BTreeMap::new(),
            finished: BTreeMap::new(),
            tracing: std::env::var_os("HHC_SIM_TRACE").is_some(),
            next_request: 1,
            wake_pending: vec![false; workload.requesters_count()],
            oracle: Oracle::new(blocks_count),
            workload,
            ops_submitted: 0,
            next_fault: 0,
            deferred_faults: Vec::new(),
            policy: spec.policy,
            log_ever_used: spec.policy.uses_log(),
            recovering: false,
            ended: false,
            verify_queue: VecDeque::new(),
            verify_context: String::new(),
            verify_attempts: BTreeMap::new(),
            rejoined: vec![false; plan.mirrors.len()],
            rejoined_unconfirmed: vec![false; plan.mirrors.len()],
            hung: vec![false; plan.mirrors.len()],
            given_up: vec![false; plan.mirrors.len()],
            figures: Figures::default(),
            plan,
        }
    }

    fn config(&self) -> Config {
        Config { policy: self.policy, ..self.plan.config.clone() }
    }

    fn run(&mut self) -> Result<(), Violation> {
        self.trace(|| format!("plan {:?}\nconfig {:?}\nworkload {:?}", self.plan.kinds, self.plan.config, self.plan.workload));
        self.start_target(StartMode::Format)?;
        self.resume_workload();
        self.run_until(|sim| sim.ended || (sim.ops_submitted >= sim.spec.ops && sim.requests.is_empty()))?;
        if self.ended {
            return Ok(());
        }
        self.check_counts("after the workload")?;
        let idle_ns = self.prng.between(0, 2_000_000_000);
        self.idle_for_ns(idle_ns)?;
        if self.ended {
            return Ok(());
        }
        self.check_counts("after the idle time")?;
        self.final_restart()
    }

    /// Ends the run with a clean shutdown or a power loss, then checks what
    /// a restart finds.
    fn final_restart(&mut self) -> Result<(), Violation> {
        if self.prng.percent(50) {
            self.recover_after_power_loss("recovery after the final power loss")
        } else if self.devices.cache.is_dead() {
            // The cache died within its grace period before the end and the
            // host has not noticed yet (its CacheLossStop is still pending):
            // it goes down for the cache loss, as the power-loss branch does
            // (`recover_after_power_loss`); an engine without its cache
            // device cannot stop cleanly.
            self.recover_after_cache_loss()
        } else {
            self.shutdown_cleanly()?;
            self.recover_after_power_loss("restart after a clean shutdown")
        }
    }

    /// The running target's kept counts agree with its blocks (those that
    /// decide eviction and write-back: no request sees a drift until the
    /// cache stalls).
    fn check_counts(&self, phase: &str) -> Result<(), Violation> {
        match self.target.as_ref().map(|target| target.check_counts()) {
            Some(Err(found)) => Err(self.violation("engine counts", None, "counts that match the blocks", &found, phase)),
            _ => Ok(()),
        }
    }

    fn shutdown_cleanly(&mut self) -> Result<(), Violation> {
        let now = self.now;
        self.target_mut().shutdown(now);
        self.recovering = true;
        let stopped = |sim: &Self| matches!(sim.target.as_ref().unwrap().state(), EngineState::Stopped | EngineState::Failed(_));
        self.run_until_within(stopped, PHASE_LIMIT_NS, "a clean shutdown")?;
        match self.target.as_ref().unwrap().state() {
            EngineState::Failed(reason) => Err(self.violation("5 (errors)", None, "a clean stop", &format!("shutdown failed: {reason}"), "shutdown")),
            _ => Ok(()),
        }
    }

    /// Set `HHC_SIM_TRACE=1` to follow a seed's requests and faults on stderr.
    fn trace(&self, message: impl FnOnce() -> String) {
        if self.tracing {
            eprintln!("[{} ns] {}", self.now, message());
        }
    }

    /// The running target is dropped: its counters join the figures.
    fn retire_target(&mut self) {
        if let Some(target) = self.target.take() {
            let stats = target.stats();
            self.figures.cutoff_writes += stats.cutoff_writes;
            self.figures.log_gap_blocks += stats.log_gap_blocks;
        }
    }

    fn target_mut(&mut self) -> &mut F::Target {
        self.target.as_mut().expect("no target running")
    }

    fn violation(&self, invariant: &'static str, lba: Option<u64>, expected: &str, found: &str, context: &str) -> Violation {
        Violation { invariant, lba, expected: expected.into(), found: found.into(), context: format!("{context}, at {} ns", self.now) }
    }

    fn push_event(&mut self, at: Nanos, event: Event) {
        self.events.schedule(at, event);
    }

    // ---- the pump ---------------------------------------------------------

    /// Pumps target, devices and workload until `done` or a violation.
    fn run_until(&mut self, done: impl Fn(&Self) -> bool) -> Result<(), Violation> {
        self.run_until_within(done, Nanos::MAX, "")
    }

    /// `run_until` for a phase that must end within `limit_ns` of virtual
    /// time even with no request outstanding (start, shutdown).
    fn run_until_within(&mut self, done: impl Fn(&Self) -> bool, limit_ns: Nanos, phase: &str) -> Result<(), Violation> {
        let mut spins = 0u32;
        let deadline = self.now.saturating_add(limit_ns);
        loop {
            self.drain_target()?;
            self.confirm_rejoined_mirrors();
            self.note_mirrors_given_up();
            if done(self) {
                return Ok(());
            }
            let before = self.now;
            self.step()?;
            spins = if self.now == before { spins + 1 } else { 0 };
            if spins > SPIN_LIMIT {
                return Err(self.violation("5 (errors)", None, "progress in virtual time", "the target spins without advancing", "liveness"));
            }
            if self.requests.values().any(|out| out.submitted_at + STALL_LIMIT_NS < self.now) {
                return Err(self.stalled());
            }
            if self.now > deadline {
                let found = format!("{phase} still unfinished after {} s of virtual time", limit_ns / 1_000_000_000);
                return Err(self.violation("5 (errors)", None, &format!("{phase} to finish"), &found, "liveness"));
            }
        }
    }

    fn stalled(&self) -> Violation {
        let (id, out) = self.requests.iter().min_by_key(|(_, out)| out.submitted_at).unwrap();
        let found = format!("{:?} request {id} (lba {}, {} blocks) outstanding for {} s of virtual time", out.request.kind, out.request.lba, out.request.blocks_count, STALL_LIMIT_NS / 1_000_000_000);
        if let Some(target) = self.target.as_ref() {
            self.trace(|| format!("stalled: {}", target.describe_stall(out.request.lba)));
        }
        self.violation("5 (errors)", Some(out.request.lba), "every request completes (with an error if need be)", &found, "liveness")
    }

    /// Runs the earliest event or target timer.
    fn step(&mut self) -> Result<(), Violation> {
        let timer = self.target.as_ref().and_then(|t| t.poll_timeout());
        let event_at = self.events.peek_time();
        match (timer, event_at) {
            (Some(t), e) if e.is_none_or(|e| t <= e) => {
                // A timer in the past runs now.
                self.now = self.now.max(t);
                let now = self.now;
                self.target_mut().handle_timer(now);
                Ok(())
            }
            (_, _) if !self.events.is_empty() => {
                let (at, event) = self.events.pop().unwrap();
                self.now = self.now.max(at);
                if self.spec.input_batch > 1 && batchable(&event) && self.target.is_some() {
                    return self.dispatch_batch(event);
                }
                self.dispatch(event)
            }
            _ if self.requests.is_empty() => {
                Err(self.violation("5 (errors)", None, "a finished phase", "nothing scheduled and nothing outstanding", "liveness"))
            }
            _ => Err(self.stalled()),
        }
    }

    /// `first` and the requests and completions after it, up to the spec's
    /// batch size, as one batch: none past another kind of event or a timer
    /// due first (the engine's timer runs outside a pass's batch).
    fn dispatch_batch(&mut self, first: Event) -> Result<(), Violation> {
        self.target_mut().begin_batch();
        let mut result = self.dispatch(first);
        let mut count = 1;
        while result.is_ok() && count < self.spec.input_batch {
            let Some((at, next)) = self.events.peek() else { break };
            let timer_first = self.target.as_ref().and_then(|t| t.poll_timeout()).is_some_and(|t| t <= at);
            if !batchable(next) || timer_first {
                break;
            }
            let (at, event) = self.events.pop().unwrap();
            self.now = self.now.max(at);
            result = self.dispatch(event);
            count += 1;
            self.figures.batched_inputs += 1;
        }
        let now = self.now;
        if let Some(target) = self.target.as_mut() {
            target.end_batch(now);
        }
        result
    }

    fn dispatch(&mut self, event: Event) -> Result<(), Violation> {
        match event {
            Event::IoDone(id) => self.complete_io(id),
            Event::Wake(requester) => self.wake(requester),
            Event::PeriodicFlush => self.periodic_flush(),
            Event::Fault(fault) if self.recovering => {
                self.deferred_faults.push(fault);
                Ok(())
            }
            Event::Fault(fault) => self.fire(fault),
            Event::CacheLossStop => self.recover_after_cache_loss(),
            Event::IdleEnd => Ok(()),
        }
    }

    /// Moves the target's outputs into the device queues and the oracle.
    fn drain_target(&mut self) -> Result<(), Violation> {
        loop {
            let Some(target) = self.target.as_mut() else { return Ok(()) };
            if let Some(io) = target.poll_io() {
                self.schedule_io(io)?;
            } else if let Some(completion) = target.poll_completion() {
                self.on_completion(completion)?;
            } else {
                return Ok(());
            }
        }
    }

    fn schedule_io(&mut self, io: DeviceIo) -> Result<(), Violation> {
        let device = self.devices.get(io.device).ok_or_else(|| contract(format!("command for absent device {}", io.device), self.now))?;
        let done_at = device.submit(self.now, &io).map_err(|e| contract(e, self.now))?;
        if self.in_flight.insert(io.id, io).is_some() {
            return Err(contract(format!("I/O id {} reused while in flight", io.id), self.now));
        }
        self.push_event(done_at, Event::IoDone(io.id));
        Ok(())
    }

    fn complete_io(&mut self, id: IoId) -> Result<(), Violation> {
        let device = self.in_flight.get(&id).expect("completion of an unknown command").device;
        let hung_until = self.devices.get(device).map_or(0, |d| d.hung_until());
        if hung_until > self.now {
            // A hung device completes nothing before its hang ends.
            self.push_event(hung_until, Event::IoDone(id));
            return Ok(());
        }
        let io = self.in_flight.remove(&id).expect("completion of an unknown command");
        let target = self.target.as_mut().expect("I/O without a target");
        let mut memory = TargetMemory { target, requests: &mut self.requests, finished: &self.finished };
        let status = perform(&mut self.devices, &io, &mut memory).map_err(|e| contract(format!("{e} ({})", describe_io(&io)), self.now))?;
        let now = self.now;
        self.target_mut().handle_io_completion(now, id, status);
        Ok(())
    }

    /// A rejoined mirror is a good copy while the running target calls it
    /// healthy: then a replay from it alone must hold every flushed write
    /// (a target that reports no states never confirms one). The claim can
    /// be withdrawn: a restart may find the mirror stale again (the
    /// superblock counting it in sync was not yet durable) and the target
    /// drops it if the last in-sync mirror then fails; a cache loss after
    /// that is beyond the design (torture seed 473125, hhc).
    fn confirm_rejoined_mirrors(&mut self) {
        if !self.rejoined.contains(&true) {
            return;
        }
        let Some(target) = self.target.as_ref().filter(|t| *t.state() == EngineState::Ready) else { return };
        let Some(states) = target.log_mirror_states() else { return };
        for (mirror, state) in states.iter().enumerate() {
            if self.rejoined.get(mirror) != Some(&true) {
                continue;
            }
            let unconfirmed = *state != crate::engine::MirrorState::Healthy;
            if self.rejoined_unconfirmed[mirror] != unconfirmed {
                self.rejoined_unconfirmed[mirror] = unconfirmed;
                let now = self.now;
                if self.tracing {
                    eprintln!("[{now} ns] rejoined mirror {mirror} reported {}", state.name());
                }
            }
        }
    }

    /// A live mirror the serving target calls failed was given up on. Only
    /// in seeds with `mirror-hangs`, whose short mirror timeout gives up on
    /// live mirrors: elsewhere the oracle keeps the checks it always had.
    fn note_mirrors_given_up(&mut self) {
        if !self.plan.kinds.mirror_hangs {
            return;
        }
        let Some(target) = self.target.as_ref().filter(|t| *t.state() == EngineState::Ready) else { return };
        let Some(states) = target.log_mirror_states() else { return };
        for (mirror, state) in states.iter().enumerate() {
            if *state == crate::engine::MirrorState::Failed && !self.devices.mirrors[mirror].is_dead() && !self.given_up[mirror] {
                self.given_up[mirror] = true;
                if self.tracing {
                    eprintln!("[{} ns] mirror {mirror} given up on by the target while alive", self.now);
                }
            }
        }
    }

    // ---- faults -----------------------------------------------------------

    fn hang_mirror(&mut self, mirror: u8, for_ns: Nanos) {
        let device = &mut self.devices.mirrors[mirror as usize];
        if device.is_dead() {
            return;
        }
        let until = self.now + for_ns;
        device.hang_until(until);
        self.hung[mirror as usize] = true;
        self.figures.mirror_hangs += 1;
        self.push_event(until, Event::Fault(Fault::MirrorThaws(mirror)));
    }

    /// A mirror answers again: a good copy only if the serving target still
    /// calls it healthy (it never gave up on it, so it missed nothing).
    fn thaw_mirror(&mut self, mirror: u8) {
        let healthy = self.target.as_ref().filter(|t| *t.state() == EngineState::Ready).and_then(|t| t.log_mirror_states())
            .is_some_and(|states| states.get(mirror as usize) == Some(&crate::engine::MirrorState::Healthy));
        self.hung[mirror as usize] = !healthy;
    }

    /// A fresh device in mirror slot `mirror`, attached to the running
    /// target as an operator would: only into a slot whose device is gone,
    /// and only once none of the old device's commands is in flight (the
    /// SPDK module refuses the attach until the removed bdev drained).
    fn attach_fresh_mirror(&mut self, mirror: u8) {
        let now = self.now;
        let serving = self.target.as_ref().is_some_and(|t| *t.state() == EngineState::Ready);
        if !serving || !self.devices.mirrors[mirror as usize].is_dead() {
            return;
        }
        if self.in_flight.values().any(|io| io.device == DeviceRole::Log(mirror)) {
            self.push_event(now + 100_000, Event::Fault(Fault::MirrorAttached(mirror)));
            return;
        }
        self.devices.mirrors[mirror as usize].replace();
        self.hung[mirror as usize] = false;
        self.given_up[mirror as usize] = false;
        self.rejoined[mirror as usize] = true;
        self.rejoined_unconfirmed[mirror as usize] = true;
        self.figures.mirror_attaches += 1;
        self.trace(|| format!("fresh mirror {mirror} attached"));
        self.target_mut().handle_mirror_attached(now, mirror);
    }

    fn fire(&mut self, fault: Fault) -> Result<(), Violation> {
        let now = self.now;
        self.trace(|| format!("fault {fault:?}"));
        match fault {
            Fault::PowerLoss => self.recover_after_power_loss("recovery after power loss"),
            Fault::MirrorReturns(mirror) => self.recover_with_mirror_back(mirror),
            Fault::MirrorAttached(mirror) => {
                self.attach_fresh_mirror(mirror);
                Ok(())
            }
            Fault::MirrorHangs(mirror, for_ns) => {
                self.hang_mirror(mirror, for_ns);
                Ok(())
            }
            Fault::MirrorThaws(mirror) => {
                self.thaw_mirror(mirror);
                Ok(())
            }
            Fault::CacheDeath => {
                self.devices.cache.kill();
                self.figures.device_deaths += 1;
                self.target_mut().handle_device_removed(now, DeviceRole::Cache);
                let grace = self.prng.between(0, 5_000_000);
                self.push_event(now + grace, Event::CacheLossStop);
                Ok(())
            }
            Fault::MirrorDeath(mirror) => {
                if !self.devices.mirrors[mirror as usize].is_dead() {
                    self.devices.mirrors[mirror as usize].kill();
                    self.figures.device_deaths += 1;
                    self.target_mut().handle_device_removed(now, DeviceRole::Log(mirror));
                }
                Ok(())
            }
            Fault::SwitchPolicy(policy) => {
                self.policy = policy;
                self.log_ever_used |= policy.uses_log();
                self.figures.policy_switches += 1;
                // The simulator only switches to policies its configuration supports.
                self.target_mut().set_policy(now, policy).expect("policy switch refused");
                Ok(())
            }
            Fault::SetOptions(options) => {
                self.figures.options_changes += 1;
                self.target_mut().set_options(now, options).expect("options refused");
                Ok(())
            }
        }
    }
}
