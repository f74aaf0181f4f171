//! The crash test with a real process: a workload runs the target over
//! image files and logs every write submission, acknowledgement and flush to
//! a side file before or after it happens (as the oracle needs); `kill -9`
//! ends it at a random moment; the verifier replays the side file into the
//! oracle, restarts the target over the same files and checks every block.
//!
//! The file I/O is synchronous and in the page cache, so this tests what a
//! process crash leaves behind (the engine's memory gone mid-way through its
//! protocols); power loss is the simulator's business.

use super::oracle::{Oracle, Violation};
use super::pattern::{decode_block, fill_block, Found, WriteId};
use crate::config::{Config, Policy};
use crate::engine::{EngineState, StartMode};
use crate::io::{DeviceIo, DeviceRole, IoBuffer, IoKind, IoStatus, Machine, Nanos, Request, RequestId, RequestKind};
use crate::simcore::prng::Prng;
use crate::simcore::TargetFactory;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

const SIDE_LOG: &str = "acknowledged.log";
const OUTSTANDING_MAX: usize = 8;

/// The fixed geometry of the crash test (small, so verification is quick).
pub fn process_config(policy: Policy) -> Config {
    Config {
        policy,
        cache_device_bytes: 132 * 4096,
        log_device_bytes: 8192 + 64 * 64 * 1024,
        mirrors_count: 2,
        backing_device_bytes: 512 * 4096,
        segment_bytes: 64 * 1024,
        idle_after_ns: 5_000_000,
        superblock_interval_ns: 50_000_000,
        ..Config::default()
    }
}

struct FileDevices {
    cache: File,
    mirrors: Vec<File>,
    backing: File,
}

impl FileDevices {
    fn open(dir: &Path, config: &Config, create: bool) -> Result<FileDevices, String> {
        let open = |name: String, bytes: u64| -> Result<File, String> {
            let path = dir.join(name);
            let file = OpenOptions::new().read(true).write(true).create(create).open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if create {
                file.set_len(bytes).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            Ok(file)
        };
        Ok(FileDevices {
            cache: open("cache.img".into(), config.cache_device_bytes)?,
            mirrors: (0..config.mirrors_count).map(|i| open(format!("log{i}.img"), config.log_device_bytes)).collect::<Result<_, _>>()?,
            backing: open("backing.img".into(), config.backing_device_bytes)?,
        })
    }

    fn file(&self, role: DeviceRole) -> Option<&File> {
        match role {
            DeviceRole::Cache => Some(&self.cache),
            DeviceRole::Log(i) => self.mirrors.get(i as usize),
            DeviceRole::Backing => Some(&self.backing),
        }
    }
}

/// One target over image files, pumped synchronously in real time.
struct FileRun {
    target: Box<dyn Machine>,
    devices: FileDevices,
    requests: BTreeMap<RequestId, (Request, Vec<u8>)>,
    started: Instant,
}

impl FileRun {
    fn now(&self) -> Nanos {
        self.started.elapsed().as_nanos() as Nanos
    }

    fn start<F: TargetFactory>(factory: &F, config: &Config, dir: &Path, start: StartMode) -> Result<FileRun, String> {
        let devices = FileDevices::open(dir, config, start == StartMode::Format)?;
        let target = Box::new(factory.start(config, start, 0)?);
        let mut run = FileRun { target, devices, requests: BTreeMap::new(), started: Instant::now() };
        while *run.target.state() == EngineState::Starting {
            run.pump(&mut |_, _| Ok(()))?;
        }
        match run.target.state() {
            EngineState::Ready => Ok(run),
            other => Err(format!("{start:?} ended in {other:?}")),
        }
    }

    fn submit(&mut self, request: Request, data: Vec<u8>) {
        let now = self.now();
        let payload: Option<&dyn crate::io::RequestData> = if request.kind == RequestKind::Write { Some(&data) } else { None };
        self.target.handle_request(now, request, payload);
        self.requests.insert(request.id, (request, data));
    }

    /// Carries out pending commands and timers; hands each finished request
    /// (with its buffer and success) to `done`.
    fn pump(&mut self, done: &mut dyn FnMut((Request, Vec<u8>), bool) -> Result<(), String>) -> Result<(), String> {
        let now = self.now();
        if self.target.poll_timeout().is_some_and(|t| t <= now) {
            self.target.handle_timer(now);
        }
        while let Some(io) = self.target.poll_io() {
            let status = self.perform(&io)?;
            let now = self.now();
            self.target.handle_io_completion(now, io.id, status);
        }
        while let Some(completion) = self.target.poll_completion() {
            let finished = self.requests.remove(&completion.id).ok_or_else(|| format!("completion of unknown request {}", completion.id))?;
            done(finished, completion.result.is_ok())?;
        }
        Ok(())
    }

    fn perform(&mut self, io: &DeviceIo) -> Result<IoStatus, String> {
        let file = self.devices.file(io.device).ok_or_else(|| format!("command for absent device {}", io.device))?;
        if io.kind == IoKind::Flush {
            return Ok(if file.sync_data().is_ok() { IoStatus::Ok } else { IoStatus::Error });
        }
        let file = file.try_clone().map_err(|e| e.to_string())?;
        let bytes = self.buffer(io)?;
        let result = match io.kind {
            IoKind::Write => file.write_all_at(bytes, io.offset_bytes),
            _ => file.read_exact_at(bytes, io.offset_bytes),
        };
        Ok(if result.is_ok() { IoStatus::Ok } else { IoStatus::Error })
    }

    fn buffer(&mut self, io: &DeviceIo) -> Result<&mut [u8], String> {
        let (memory, offset_bytes) = match io.buffer {
            IoBuffer::Request { request, offset_bytes } => {
                (&mut self.requests.get_mut(&request).ok_or_else(|| format!("buffer of request {request}, not outstanding"))?.1[..], offset_bytes)
            }
            IoBuffer::Engine { region, offset_bytes } => (self.target.io_memory_mut(region), offset_bytes as u64),
            IoBuffer::None => return Err("data command without a buffer".into()),
        };
        let range = offset_bytes as usize..(offset_bytes + io.len_bytes) as usize;
        memory.get_mut(range).ok_or_else(|| format!("command outside its buffer: {io:?}"))
    }
}

/// Appends events to the side file with one `write(2)` each: a `kill -9`
/// cannot lose what the kernel already has.
struct SideLog(File);

impl SideLog {
    fn record(&mut self, line: &str) -> Result<(), String> {
        self.0.write_all(format!("{line}\n").as_bytes()).map_err(|e| format!("side log: {e}"))
    }
}

/// Runs a random workload over fresh image files in `dir` until killed (or
/// `ops` requests). Returns a violation message if a running read was wrong.
pub fn run_workload<F: TargetFactory>(factory: &F, dir: &Path, policy: Policy, seed: u64, ops: u64) -> Result<(), String> {
    let config = process_config(policy);
    let blocks_count = config.backing_blocks();
    let mut side = SideLog(File::create(dir.join(SIDE_LOG)).map_err(|e| e.to_string())?);
    let mut run = FileRun::start(factory, &config, dir, StartMode::Format)?;
    let mut oracle = Oracle::new(blocks_count);
    let mut prng = Prng::new(seed);
    let mut read_ticks: BTreeMap<RequestId, u64> = BTreeMap::new();
    let mut next_id: RequestId = 1;
    for _ in 0..ops {
        while run.requests.len() >= OUTSTANDING_MAX {
            run.pump(&mut |finished, ok| finish(&mut oracle, &mut side, &mut read_ticks, finished, ok))?;
        }
        let request = next_request(&mut prng, &mut next_id, blocks_count);
        let data = prepare(&mut oracle, &mut side, &mut read_ticks, &request)?;
        run.submit(request, data);
        run.pump(&mut |finished, ok| finish(&mut oracle, &mut side, &mut read_ticks, finished, ok))?;
    }
    Ok(())
}

fn next_request(prng: &mut Prng, next_id: &mut RequestId, blocks_count: u64) -> Request {
    let id = *next_id;
    *next_id += 1;
    let blocks = prng.between(1, 4) as u32;
    let lba = if prng.percent(60) { prng.below(16) } else { prng.below(blocks_count - blocks as u64 + 1) };
    let kind = match prng.below(100) {
        0..=9 => RequestKind::Flush,
        10..=59 => RequestKind::Write,
        _ => RequestKind::Read,
    };
    let (lba, blocks) = if kind == RequestKind::Flush { (0, 0) } else { (lba, blocks) };
    Request { id, kind, lba, blocks_count: blocks }
}

/// Registers a request with the oracle and the side file before the target sees it.
fn prepare(oracle: &mut Oracle, side: &mut SideLog, read_ticks: &mut BTreeMap<RequestId, u64>, request: &Request) -> Result<Vec<u8>, String> {
    let block_bytes = 4096usize;
    match request.kind {
        RequestKind::Write => {
            let write = oracle.submit_write(request.lba, request.blocks_count);
            side.record(&format!("W {write} {} {}", request.lba, request.blocks_count))?;
            let mut data = vec![0u8; request.blocks_count as usize * block_bytes];
            for (i, block) in data.chunks_exact_mut(block_bytes).enumerate() {
                fill_block(request.lba + i as u64, write, block);
            }
            Ok(data)
        }
        RequestKind::Read => {
            read_ticks.insert(request.id, oracle.submit_read());
            Ok(vec![0xEE; request.blocks_count as usize * block_bytes])
        }
        RequestKind::Flush => {
            oracle.submit_flush(request.id);
            side.record(&format!("F {}", request.id))?;
            Ok(Vec::new())
        }
    }
}

fn finish(oracle: &mut Oracle, side: &mut SideLog, read_ticks: &mut BTreeMap<RequestId, u64>, finished: (Request, Vec<u8>), ok: bool) -> Result<(), String> {
    let (request, data) = finished;
    match request.kind {
        RequestKind::Write => {
            let write = first_write_id(&data);
            oracle.complete_write(write, ok);
            side.record(&format!("A {write} {}", ok as u8))
        }
        RequestKind::Flush => {
            oracle.complete_flush(request.id, ok);
            side.record(&format!("D {} {}", request.id, ok as u8))?;
            side.0.sync_data().map_err(|e| format!("side log: {e}"))
        }
        RequestKind::Read => {
            let tick = read_ticks.remove(&request.id).expect("read without a tick");
            oracle.end_read(tick);
            if !ok {
                return Ok(());
            }
            for (i, block) in data.chunks_exact(4096).enumerate() {
                let lba = request.lba + i as u64;
                oracle.check_read(lba, decode_block(lba, block), tick).map_err(|v| v.to_string())?;
            }
            Ok(())
        }
    }
}

/// A write request's id, read back from its own data.
fn first_write_id(data: &[u8]) -> WriteId {
    u64::from_le_bytes(data[16..24].try_into().unwrap())
}

/// Rebuilds the oracle from the side file of a killed workload.
fn replay_side_log(path: &Path, blocks_count: u64) -> Result<Oracle, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut oracle = Oracle::new(blocks_count);
    let lines: Vec<&str> = text.lines().collect();
    // The last line may be cut short by the kill (it never is with one small
    // write(2), but a partial line must not be misread as a full one).
    let complete = if text.ends_with('\n') { lines.len() } else { lines.len().saturating_sub(1) };
    for line in &lines[..complete] {
        replay_line(&mut oracle, line).ok_or_else(|| format!("malformed side log line '{line}'"))?;
    }
    oracle.crash();
    Ok(oracle)
}

fn replay_line(oracle: &mut Oracle, line: &str) -> Option<()> {
    let fields: Vec<u64> = line.split(' ').skip(1).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    match (line.split(' ').next()?, fields.as_slice()) {
        ("W", [write, lba, blocks]) => {
            if oracle.submit_write(*lba, *blocks as u32) != *write {
                return None;
            }
        }
        ("A", [write, ok]) => oracle.complete_write(*write, *ok == 1),
        ("F", [id]) => oracle.submit_flush(*id),
        ("D", [id, ok]) => oracle.complete_flush(*id, *ok == 1),
        _ => return None,
    }
    Some(())
}

/// Restarts the target over the files of a killed workload and checks
/// every block against the side file; returns how many blocks were checked.
pub fn verify<F: TargetFactory>(factory: &F, dir: &Path, policy: Policy) -> Result<u64, Violation> {
    let config = process_config(policy);
    let blocks_count = config.backing_blocks();
    let failure = |found: String| Violation { invariant: "2 (durability)", lba: None, expected: "a restart".into(), found, context: "process crash test".into() };
    let oracle = replay_side_log(&side_log_path(dir), blocks_count).map_err(failure)?;
    let mut run = FileRun::start(factory, &config, dir, StartMode::Open).map_err(failure)?;
    for lba in 0..blocks_count {
        let request = Request { id: lba + 1, kind: RequestKind::Read, lba, blocks_count: 1 };
        run.submit(request, vec![0xEE; 4096]);
        let mut result: Option<(Vec<u8>, bool)> = None;
        while result.is_none() {
            run.pump(&mut |(_, data), ok| {
                result = Some((data, ok));
                Ok(())
            })
            .map_err(failure)?;
        }
        let (data, ok) = result.unwrap();
        let found = if ok { decode_block(lba, &data) } else { Found::Garbage };
        oracle.check_recovered(lba, found, "restart after kill -9")?;
    }
    Ok(blocks_count)
}

pub fn side_log_path(dir: &Path) -> PathBuf {
    dir.join(SIDE_LOG)
}
