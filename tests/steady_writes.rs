//! Sustained random writes on RAM-speed devices, in virtual time: `hhc`
//! must keep up with `wb` (docs/design.md §6.4: within 10 %) once the dirty
//! threshold is reached and the log has wrapped several times, and no write
//! may wait long when a resource runs short (back-pressure, not cliffs).
//!
//! The setting of the SPDK measurement that found the problem: backing
//! 256 MiB (65,536 LBAs), cache 512 MiB, one log mirror of 512 MiB, 4 KiB
//! blocks, 1 MiB segments, defaults otherwise; bdevperf `-q 128 -o 4096 -w
//! randwrite`. Every device completes every command 2 µs after it was
//! issued, with unlimited parallelism (as SPDK's malloc bdev nearly does).
//!
//! The engine thread is one CPU: each call into the engine costs virtual
//! time (a fixed model, below), so throughput is bounded by the engine's
//! work per request as it is under SPDK, and is deterministic. The model
//! puts `wb` near the 260 K IOPS measured under SPDK.
//!
//! `cargo test --release --test steady_writes -- --nocapture` prints one
//! line per virtual second for each policy.

use hhc::config::{Config, Policy};
use hhc::engine::{Engine, EngineState, StartMode, Stats};
use hhc::io::{DeviceIo, DeviceRole, HeapAllocator, IoBuffer, IoKind, IoStatus, Nanos, Request, RequestKind};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const BS: u64 = 4096;
const DEVICE_LATENCY_NS: Nanos = 2_000;
const QUEUE_DEPTH: usize = 128;
const SECOND_NS: Nanos = 1_000_000_000;

// CPU cost model of the engine thread (bdevperf + bdev layer + engine).
/// A new request: the bdev layer and the engine's request path.
const REQUEST_NS: Nanos = 3_000;
/// One device command issued (bdev submit) or completed (callback).
const DEVICE_IO_NS: Nanos = 300;
/// One 4 KiB copy into a log buffer, with its share of the checksum.
const LOG_COPY_NS: Nanos = 270;
/// A timer call with nothing to do.
const TIMER_NS: Nanos = 200;
/// One cache block visited by a background scan or a commit's encoding
/// (`Stats::blocks_visited`): the engine work that does not scale with
/// requests, which a model charging only per request would miss. The
/// relog scan that visited the whole cache on every call cost about 6 ns a
/// block on the development machine (host time over visits).
const BLOCK_VISIT_NS: Nanos = 5;

fn config(policy: Policy) -> Config {
    Config {
        policy,
        backing_device_bytes: 256 << 20,
        cache_device_bytes: 512 << 20,
        log_device_bytes: 512 << 20,
        mirrors_count: 1,
        block_size: BS as u32,
        segment_bytes: 1 << 20,
        ..Config::default()
    }
}

/// Random writes over four times the cache (the SPDK bench's `BACK_MB=1024
/// CACHE_MB=256`): eviction and write-back both run all the time, and with
/// `threshold_percent` 100 write-back waits for clean blocks to run short.
fn beyond_the_cache(policy: Policy, threshold_percent: u8) -> Config {
    Config {
        backing_device_bytes: 1 << 30,
        cache_device_bytes: 256 << 20,
        log_device_bytes: 256 << 20,
        dirty_threshold_percent: threshold_percent,
        ..config(policy)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A device command completes (index into `in_flight`).
    IoDone(usize),
    /// Client slot submits its next request.
    Submit(usize),
}

/// One virtual second of the run.
#[derive(Clone, Debug, Default)]
struct Second {
    writes: u64,
    flushes: u64,
    latency_ns_max: Nanos,
    latency_ns_sum: u64,
    stats: Stats,
    /// Deltas over the second.
    writebacks: u64,
    revokes: u64,
    reclaimed: u64,
    superblock_writes: u64,
    segments_written: u64,
    log_copied: u64,
    log_from_cache: u64,
    visits: u64,
    /// Most request blocks waiting at once during the second.
    waiting_max: u64,
    timers: u64,
    /// Host time spent in the second (not part of the model: a hint of
    /// engine work the model does not charge).
    wall_ms: u64,
}

/// The engine's counters the CPU model charges.
#[derive(Clone, Copy, Default)]
struct Work {
    copies: u64,
    visits: u64,
}

impl Work {
    fn of(engine: &Engine) -> Work {
        let stats = engine.stats();
        Work { copies: stats.log_blocks_copied, visits: stats.blocks_visited }
    }
}

struct Client {
    buffer: Vec<u8>,
    submitted_at: Nanos,
    kind: RequestKind,
}

struct Run {
    engine: Engine,
    cache: Vec<u8>,
    log: Vec<u8>,
    backing: Vec<u8>,
    events: BinaryHeap<Reverse<(Nanos, u64, Event)>>,
    sequence: u64,
    in_flight: Vec<Option<DeviceIo>>,
    in_flight_free: Vec<usize>,
    clients: Vec<Client>,
    /// The engine thread is busy until then.
    cpu_free_at: Nanos,
    rng: u64,
    writes_issued: u64,
    requests_issued: u64,
    flush_every: u64,
    seconds: Vec<Second>,
    last_stats: Stats,
    timers: u64,
    latency_ns_max: Nanos,
    wall_at_last_sample: std::time::Instant,
    cpu: std::collections::BTreeMap<&'static str, u64>,
    call_kind: &'static str,
    label: String,
}

impl Run {
    fn new(config: Config, flush_every: u64) -> Run {
        let engine = Engine::new(config.clone(), StartMode::Format, &mut HeapAllocator, 0).expect("valid config");
        let clients = (0..QUEUE_DEPTH)
            .map(|_| Client { buffer: vec![0; BS as usize], submitted_at: 0, kind: RequestKind::Write })
            .collect();
        Run {
            engine,
            cache: vec![0; config.cache_device_bytes as usize],
            log: vec![0; config.log_device_bytes as usize],
            backing: vec![0; config.backing_device_bytes as usize],
            events: BinaryHeap::new(),
            sequence: 0,
            in_flight: Vec::new(),
            in_flight_free: Vec::new(),
            clients,
            cpu_free_at: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
            writes_issued: 0,
            requests_issued: 0,
            flush_every,
            seconds: Vec::new(),
            last_stats: Stats::default(),
            timers: 0,
            latency_ns_max: 0,
            wall_at_last_sample: std::time::Instant::now(),
            cpu: Default::default(),
            call_kind: "start",
            label: String::new(),
        }
    }

    fn random(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn schedule(&mut self, at: Nanos, event: Event) {
        self.sequence += 1;
        self.events.push(Reverse((at, self.sequence, event)));
    }

    /// Takes the engine's outputs after a call that started at `start` and
    /// cost `base` ns plus its device commands and log copies.
    fn after_call(&mut self, start: Nanos, base: Nanos, before: Work) {
        let mut ios = Vec::new();
        while let Some(io) = self.engine.poll_io() {
            ios.push(io);
        }
        let work = Work::of(&self.engine);
        let waiting = self.engine.stats().waiting_blocks;
        let second = self.second_mut(start);
        second.waiting_max = second.waiting_max.max(waiting);
        let copies = work.copies - before.copies;
        let visits = work.visits - before.visits;
        if visits > 100_000 && std::env::var("HHC_STEADY_CPU").is_ok() {
            println!("   long call at {} us: {} visits after {}", start / 1000, visits, self.call_kind);
        }
        *self.cpu.entry(self.call_kind).or_default() += base;
        *self.cpu.entry("copies").or_default() += copies * LOG_COPY_NS;
        *self.cpu.entry("visits").or_default() += visits * BLOCK_VISIT_NS;
        for io in &ios {
            *self.cpu.entry(io_kind(io)).or_default() += DEVICE_IO_NS;
        }
        let done_at = start + base + ios.len() as u64 * DEVICE_IO_NS + copies * LOG_COPY_NS + visits * BLOCK_VISIT_NS;
        self.cpu_free_at = done_at;
        for io in ios {
            let slot = self.in_flight_free.pop().unwrap_or_else(|| {
                self.in_flight.push(None);
                self.in_flight.len() - 1
            });
            self.in_flight[slot] = Some(io);
            self.schedule(done_at + DEVICE_LATENCY_NS, Event::IoDone(slot));
        }
        while let Some(completion) = self.engine.poll_completion() {
            assert_eq!(completion.result, Ok(()), "request {} failed", completion.id);
            let slot = completion.id as usize;
            let latency = done_at - self.clients[slot].submitted_at;
            let kind = self.clients[slot].kind;
            let second = self.second_mut(done_at);
            match kind {
                RequestKind::Write => {
                    second.writes += 1;
                    second.latency_ns_sum += latency;
                    second.latency_ns_max = second.latency_ns_max.max(latency);
                }
                _ => second.flushes += 1,
            }
            self.latency_ns_max = self.latency_ns_max.max(latency);
            if latency > 3_000_000 && std::env::var("HHC_STEADY_CPU").is_ok() {
                println!("   slow {kind:?} of slot {slot}: submitted {} us, done {} us", self.clients[slot].submitted_at / 1000, done_at / 1000);
            }
            self.schedule(done_at, Event::Submit(slot));
        }
    }

    fn second_mut(&mut self, at: Nanos) -> &mut Second {
        let index = (at / SECOND_NS) as usize;
        while self.seconds.len() <= index {
            self.seconds.push(Second::default());
        }
        &mut self.seconds[index]
    }

    fn execute(&mut self, io: &DeviceIo) {
        let device = match io.device {
            DeviceRole::Cache => &mut self.cache,
            DeviceRole::Log(_) => &mut self.log,
            DeviceRole::Backing => &mut self.backing,
        };
        if io.kind == IoKind::Flush {
            return;
        }
        let range = io.offset_bytes as usize..(io.offset_bytes + io.len_bytes) as usize;
        let memory: &mut [u8] = match io.buffer {
            IoBuffer::None => return,
            IoBuffer::Request { request, offset_bytes } => {
                let start = offset_bytes as usize;
                &mut self.clients[request as usize].buffer[start..start + io.len_bytes as usize]
            }
            IoBuffer::Engine { region, offset_bytes } => {
                let start = offset_bytes as usize;
                &mut self.engine.io_memory_mut(region)[start..start + io.len_bytes as usize]
            }
        };
        match io.kind {
            IoKind::Read => memory.copy_from_slice(&device[range]),
            IoKind::Write => device[range].copy_from_slice(memory),
            IoKind::Flush => {}
        }
    }

    fn submit(&mut self, now: Nanos, slot: usize) {
        let blocks = self.engine.blocks_count();
        self.requests_issued += 1;
        let flush = self.flush_every > 0 && self.requests_issued.is_multiple_of(self.flush_every + 1);
        let before = Work::of(&self.engine);
        let client = &mut self.clients[slot];
        client.submitted_at = now;
        if flush {
            client.kind = RequestKind::Flush;
            let request = Request { id: slot as u64, kind: RequestKind::Flush, lba: 0, blocks_count: 0 };
            self.engine.handle_request(now, request, None);
        } else {
            self.writes_issued += 1;
            let lba = self.random() % blocks;
            let client = &mut self.clients[slot];
            client.kind = RequestKind::Write;
            client.buffer[..8].copy_from_slice(&lba.to_le_bytes());
            client.buffer[8..16].copy_from_slice(&self.writes_issued.to_le_bytes());
            let request = Request { id: slot as u64, kind: RequestKind::Write, lba, blocks_count: 1 };
            let data = std::mem::take(&mut client.buffer);
            self.engine.handle_request(now, request, Some(&data));
            self.clients[slot].buffer = data;
        }
        self.call_kind = "request";
        self.after_call(now, REQUEST_NS, before);
    }

    /// Formats, then runs the workload for `seconds` of virtual time.
    fn run(&mut self, seconds: u64) {
        self.after_call(0, 0, Work::default());
        while *self.engine.state() != EngineState::Ready {
            self.step(Nanos::MAX);
        }
        let start = self.cpu_free_at;
        for slot in 0..QUEUE_DEPTH {
            self.schedule(start, Event::Submit(slot));
        }
        let end = start + seconds * SECOND_NS;
        let mut next_sample = SECOND_NS * (start / SECOND_NS + 1);
        while self.cpu_free_at < end {
            let at = self.events.peek().map_or(Nanos::MAX, |Reverse((at, _, _))| *at);
            while next_sample <= at.min(end) {
                self.sample(next_sample);
                next_sample += SECOND_NS;
            }
            self.step(end);
        }
        while next_sample <= end {
            self.sample(next_sample);
            next_sample += SECOND_NS;
        }
    }

    /// Handles the next event (or a timer due before it).
    fn step(&mut self, end: Nanos) {
        let at = self.events.peek().map_or(Nanos::MAX, |Reverse((at, _, _))| *at);
        let timer = self.engine.poll_timeout();
        if let Some(due) = timer.filter(|&due| due <= at && due < end) {
            let now = due.max(self.cpu_free_at);
            let before = Work::of(&self.engine);
            self.engine.handle_timer(now);
            self.call_kind = "timer";
            self.timers += 1;
            self.after_call(now, TIMER_NS, before);
            return;
        }
        let Some(Reverse((at, _, event))) = self.events.pop() else {
            panic!("nothing left to run: {}", self.engine.describe_pending());
        };
        let now = at.max(self.cpu_free_at);
        match event {
            Event::IoDone(slot) => {
                let io = self.in_flight[slot].take().expect("completion of an idle slot");
                self.in_flight_free.push(slot);
                self.execute(&io);
                let before = Work::of(&self.engine);
                self.call_kind = io_kind(&io);
                self.engine.handle_io_completion(now, io.id, IoStatus::Ok);
                self.after_call(now, DEVICE_IO_NS, before);
            }
            Event::Submit(slot) => self.submit(now, slot),
        }
    }

    /// Records the engine's counters at the end of the second before `at`.
    fn sample(&mut self, at: Nanos) {
        let stats = self.engine.stats();
        let last = std::mem::replace(&mut self.last_stats, stats.clone());
        let timers = std::mem::take(&mut self.timers);
        let second = self.second_mut(at - 1);
        second.writebacks = stats.writebacks - last.writebacks;
        second.revokes = stats.revokes - last.revokes;
        second.reclaimed = stats.log_segments_reclaimed - last.log_segments_reclaimed;
        second.superblock_writes = stats.superblock_writes - last.superblock_writes;
        second.segments_written = stats.log_segments_written - last.log_segments_written;
        second.log_copied = stats.log_blocks_copied - last.log_blocks_copied;
        second.log_from_cache = stats.log_blocks_from_cache - last.log_blocks_from_cache;
        second.visits = stats.blocks_visited - last.blocks_visited;
        second.timers = timers;
        second.stats = stats;
        let wall = std::mem::replace(&mut self.wall_at_last_sample, std::time::Instant::now());
        let second = self.second_mut(at - 1);
        second.wall_ms = wall.elapsed().as_millis() as u64;
        let index = ((at - 1) / SECOND_NS) as usize;
        if std::env::var("HHC_STEADY").is_ok() {
            println!("{} {}", self.label, line(index, &self.seconds[index]));
        }
        if std::env::var("HHC_STEADY_CPU").is_ok() {
            println!("   cpu ms {:?}", self.cpu.iter().map(|(k, v)| (k, v / 1_000_000)).collect::<Vec<_>>());
        }
        self.cpu.clear();
    }
}

struct Outcome {
    label: String,
    seconds: Vec<Second>,
    latency_ns_max: Nanos,
}

impl Outcome {
    /// Writes per second over the seconds from `from` on (the steady state).
    fn sustained(&self, from: usize) -> f64 {
        let tail = &self.seconds[from..];
        tail.iter().map(|s| s.writes).sum::<u64>() as f64 / tail.len() as f64
    }

    fn print(&self) {
        println!("{}", self.label);
        println!("{HEADER}");
        for (i, s) in self.seconds.iter().enumerate() {
            println!("{}", line(i, s));
        }
        println!("  max request latency {} us", self.latency_ns_max / 1000);
    }
}

const HEADER: &str =
    "  s   writes lat_avg_us lat_max_us writebacks  dirty   free segs reclaim revokes sb_wr segs_wr  copied relogged unlogged timers waiting  visits_k wall_ms";

fn line(i: usize, s: &Second) -> String {
    let avg = s.latency_ns_sum.checked_div(s.writes).map_or(0, |ns| ns / 1000);
    format!(
        "{i:>3} {:>8} {:>10} {:>10} {:>10} {:>6} {:>6} {:>4} {:>7} {:>7} {:>5} {:>7} {:>7} {:>8} {:>8} {:>6} {:>7} {:>9} {:>7}",
        s.writes,
        avg,
        s.latency_ns_max / 1000,
        s.writebacks,
        s.stats.dirty_blocks,
        s.stats.free_blocks,
        s.stats.log_segments_in_use,
        s.reclaimed,
        s.revokes,
        s.superblock_writes,
        s.segments_written,
        s.log_copied,
        s.log_from_cache,
        s.stats.unlogged_dirty_blocks,
        s.timers,
        s.waiting_max,
        s.visits / 1000,
        s.wall_ms,
    )
}

fn io_kind(io: &DeviceIo) -> &'static str {
    match (io.device, io.kind) {
        (DeviceRole::Cache, IoKind::Read) => "cache-read",
        (DeviceRole::Cache, IoKind::Write) => "cache-write",
        (DeviceRole::Cache, IoKind::Flush) => "cache-flush",
        (DeviceRole::Log(_), IoKind::Read) => "log-read",
        (DeviceRole::Log(_), IoKind::Write) => "log-write",
        (DeviceRole::Log(_), IoKind::Flush) => "log-flush",
        (DeviceRole::Backing, IoKind::Read) => "backing-read",
        (DeviceRole::Backing, IoKind::Write) => "backing-write",
        (DeviceRole::Backing, IoKind::Flush) => "backing-flush",
    }
}

fn run(policy: Policy, flush_every: u64, seconds: u64) -> Outcome {
    run_with(config(policy), flush_every, seconds)
}

fn run_with(config: Config, flush_every: u64, seconds: u64) -> Outcome {
    let duration = seconds;
    let label = format!("{}@{} backing {} MiB", config.policy, config.dirty_threshold_percent, config.backing_device_bytes >> 20);
    let mut run = Run::new(config, flush_every);
    run.label = match flush_every {
        0 => label,
        n => format!("{label}+flush/{n}"),
    };
    run.run(seconds);
    let mut seconds = run.seconds;
    seconds.truncate(seconds.len().min(duration as usize));
    let outcome = Outcome { label: run.label, seconds, latency_ns_max: run.latency_ns_max };
    outcome.print();
    outcome
}

/// Virtual seconds per run, and the first one counted as steady state:
/// the dirty threshold is reached within the first second and the log has
/// wrapped several times by the second; the first periodic metadata commit
/// (at 5 s, `superblock_interval_ns`) makes most later writes wait for a
/// commit before they may be written back, which changes the steady state
/// of every write-back policy, so it is measured after that.
const SECONDS: u64 = 11;
const STEADY_FROM: usize = 6;
/// No request may wait longer than this (virtual time): back-pressure, not
/// cliffs. Requests take about 0.3 ms at queue depth 128.
const LATENCY_NS_MAX: Nanos = 5_000_000;

/// `HHC_STEADY=policy[@threshold][,flush_every[,seconds]]`: one run,
/// printed second by second as it goes, for diagnosis (`HHC_STEADY_CPU=1`
/// adds where the modelled CPU time went, and calls and requests that took
/// long; `HHC_STEADY_BEYOND=1` writes over four times the cache,
/// `beyond_the_cache`).
#[test]
fn one_run_from_the_environment() {
    let Ok(spec) = std::env::var("HHC_STEADY") else { return };
    let mut parts = spec.split(',');
    let mut policy_spec = parts.next().unwrap().split('@');
    let policy: Policy = policy_spec.next().unwrap().parse().unwrap();
    let threshold = policy_spec.next().map_or(Config::default().dirty_threshold_percent, |p| p.parse().unwrap());
    let flush_every = parts.next().map_or(0, |p| p.parse().unwrap());
    let seconds = parts.next().map_or(SECONDS, |p| p.parse().unwrap());
    let config = match std::env::var("HHC_STEADY_BEYOND") {
        Ok(_) => beyond_the_cache(policy, threshold),
        Err(_) => Config { dirty_threshold_percent: threshold, ..config(policy) },
    };
    run_with(config, flush_every, seconds);
}

fn assert_no_cliff(outcome: &Outcome) {
    let rate = outcome.sustained(STEADY_FROM);
    for (i, second) in outcome.seconds.iter().enumerate().skip(1) {
        assert!(second.writes as f64 >= 0.8 * rate, "{}: second {i} completed {} writes (sustained {rate:.0}/s)", outcome.label, second.writes);
    }
    assert!(
        outcome.latency_ns_max <= LATENCY_NS_MAX,
        "{}: a request took {} us",
        outcome.label,
        outcome.latency_ns_max / 1000
    );
}

#[test]
fn hhc_keeps_up_with_wb_on_sustained_random_writes() {
    let wb = run(Policy::WriteBack, 0, SECONDS);
    let hhc = run(Policy::Hhc, 0, SECONDS);
    let (wb_rate, hhc_rate) = (wb.sustained(STEADY_FROM), hhc.sustained(STEADY_FROM));
    println!("sustained writes/s: wb {wb_rate:.0}, hhc {hhc_rate:.0} (ratio {:.3})", hhc_rate / wb_rate);
    assert_no_cliff(&wb);
    assert_no_cliff(&hhc);
    assert!(hhc_rate >= 0.9 * wb_rate, "hhc {hhc_rate:.0} writes/s vs wb {wb_rate:.0}");
}

/// Random writes over four times the cache, so that eviction runs on
/// nearly every write: with the threshold at 100 % (write-back only once
/// clean blocks run short, OCF's default behaviour) the cache is nearly all
/// dirty, and eviction must find its few clean blocks without visiting the
/// dirty ones (`CacheIndex::evict`: 46.7 M visits a second, 160 K writes/s,
/// before it kept a set of the clean blocks; 16.5 M and 204 K after). Nor
/// may the moment the cache first fills stall the writes (12 ms while every
/// eviction scan found nothing until the first commit, before the scans
/// backed off).
#[test]
fn wb_at_100_percent_keeps_up_with_writes_beyond_the_cache() {
    let wb = run_with(beyond_the_cache(Policy::WriteBack, 30), 0, SECONDS);
    let full = run_with(beyond_the_cache(Policy::WriteBack, 100), 0, SECONDS);
    let (wb_rate, full_rate) = (wb.sustained(STEADY_FROM), full.sustained(STEADY_FROM));
    println!("sustained writes/s beyond the cache: wb@30 {wb_rate:.0}, wb@100 {full_rate:.0} (ratio {:.3})", full_rate / wb_rate);
    assert_no_cliff(&wb);
    assert_no_cliff(&full);
    assert!(full_rate >= 0.85 * wb_rate, "wb@100 {full_rate:.0} writes/s vs wb@30 {wb_rate:.0}");
}

/// A flush every 64 writes: each one seals a barrier segment holding a
/// fraction of a segment's slots, so the log fills several times faster
/// and leans on write-back and reclamation (docs/engine.md, Limits).
#[test]
fn hhc_with_a_flush_every_64_writes() {
    let wb = run(Policy::WriteBack, 64, SECONDS);
    let hhc = run(Policy::Hhc, 64, SECONDS);
    let (wb_rate, hhc_rate) = (wb.sustained(STEADY_FROM), hhc.sustained(STEADY_FROM));
    println!("sustained writes/s with flushes: wb {wb_rate:.0}, hhc {hhc_rate:.0} (ratio {:.3})", hhc_rate / wb_rate);
    assert_no_cliff(&wb);
    assert_no_cliff(&hhc);
    assert!(hhc_rate >= 0.8 * wb_rate, "hhc {hhc_rate:.0} writes/s vs wb {wb_rate:.0}");
}
