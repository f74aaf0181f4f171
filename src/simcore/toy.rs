//! A minimal correct target: every request goes straight to the backing
//! device and a flush flushes it (the paper's Raw configuration). It proves
//! both simulators without the real engine: the torture oracle (a correct
//! target must pass every seed, and its deliberately broken variants must be
//! caught) and the timed runner's own figures.

use super::target::{CacheLossRecovery, TargetFactory};
use crate::config::{Config, ConfigError, Policy};
use crate::engine::{EngineState, MemoryReport, StartMode, Stats};
use crate::io::{
    DeviceIo, DeviceRole, IoBuffer, IoId, IoKind, IoMachine, IoStatus, Machine, Nanos, Request, RequestCompletion, RequestData,
    RequestError, RequestId, RequestKind,
};
use std::collections::{BTreeMap, VecDeque};

/// Stands for the shutdown's own flush among request ids (the runner starts at 1).
const SHUTDOWN_REQUEST: RequestId = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToyDefect {
    None,
    /// A flush completes without flushing the backing device.
    FlushSkipsDevice,
    /// A write is acknowledged before the device completed it.
    AckBeforeWrite,
    /// Reads return the next block.
    ReadNextBlock,
}

pub struct ToyTarget {
    block_bytes: u64,
    blocks_count: u64,
    defect: ToyDefect,
    ios: VecDeque<DeviceIo>,
    completions: VecDeque<RequestCompletion>,
    pending: BTreeMap<IoId, RequestId>,
    next_io: IoId,
    stopped: bool,
    state: EngineState,
}

impl ToyTarget {
    /// A target over a backing device of `blocks_count` blocks of `block_bytes`.
    pub fn new(block_bytes: u64, blocks_count: u64, defect: ToyDefect) -> ToyTarget {
        ToyTarget {
            block_bytes,
            blocks_count,
            defect,
            ios: VecDeque::new(),
            completions: VecDeque::new(),
            pending: BTreeMap::new(),
            next_io: 1,
            stopped: false,
            state: EngineState::Ready,
        }
    }

    /// `Stopped` once a shutdown has nothing left in flight.
    fn settle_state(&mut self) {
        if self.stopped && self.pending.is_empty() {
            self.state = EngineState::Stopped;
        }
    }

    fn issue(&mut self, request: RequestId, kind: IoKind, lba: u64, blocks_count: u32) {
        let id = self.next_io;
        self.next_io += 1;
        let (offset_bytes, len_bytes) = (lba * self.block_bytes, blocks_count as u64 * self.block_bytes);
        let buffer = if kind == IoKind::Flush { IoBuffer::None } else { IoBuffer::Request { request, offset_bytes: 0 } };
        let len_bytes = if kind == IoKind::Flush { 0 } else { len_bytes };
        self.ios.push_back(DeviceIo { id, device: DeviceRole::Backing, kind, offset_bytes, len_bytes, buffer });
        self.pending.insert(id, request);
    }

    fn complete(&mut self, id: RequestId, result: Result<(), RequestError>) {
        self.completions.push_back(RequestCompletion { id, result });
    }
}

impl Machine for ToyTarget {
    fn state(&self) -> &EngineState {
        &self.state
    }

    fn handle_request(&mut self, _now: Nanos, request: Request, _data: Option<&dyn RequestData>) {
        if request.lba + request.blocks_count as u64 > self.blocks_count {
            return self.complete(request.id, Err(RequestError::OutOfRange));
        }
        match (request.kind, self.defect) {
            (RequestKind::Flush, ToyDefect::FlushSkipsDevice) => self.complete(request.id, Ok(())),
            (RequestKind::Flush, _) => self.issue(request.id, IoKind::Flush, 0, 0),
            (RequestKind::Write, defect) => {
                self.issue(request.id, IoKind::Write, request.lba, request.blocks_count);
                if defect == ToyDefect::AckBeforeWrite {
                    let id = self.next_io - 1;
                    self.pending.remove(&id);
                    self.complete(request.id, Ok(()));
                }
            }
            (RequestKind::Read, ToyDefect::ReadNextBlock) if request.lba + (request.blocks_count as u64) < self.blocks_count => {
                self.issue(request.id, IoKind::Read, request.lba + 1, request.blocks_count)
            }
            (RequestKind::Read, _) => self.issue(request.id, IoKind::Read, request.lba, request.blocks_count),
        }
    }

    fn handle_timer(&mut self, _now: Nanos) {}

    fn handle_device_removed(&mut self, _now: Nanos, _role: DeviceRole) {}

    /// The toy keeps no log.
    fn handle_mirror_attached(&mut self, _now: Nanos, _mirror: u8) {}

    fn set_policy(&mut self, _now: Nanos, _policy: Policy) -> Result<(), ConfigError> {
        Ok(())
    }

    fn shutdown(&mut self, _now: Nanos) {
        self.stopped = true;
        if self.defect != ToyDefect::FlushSkipsDevice {
            self.issue(SHUTDOWN_REQUEST, IoKind::Flush, 0, 0);
        }
        self.settle_state();
    }

    fn poll_completion(&mut self) -> Option<RequestCompletion> {
        self.completions.pop_front()
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }

    fn stats(&self) -> Stats {
        Stats::default()
    }
}

impl IoMachine for ToyTarget {
    fn poll_io(&mut self) -> Option<DeviceIo> {
        self.ios.pop_front()
    }

    fn handle_io_completion(&mut self, _now: Nanos, id: IoId, status: IoStatus) {
        if let Some(request) = self.pending.remove(&id).filter(|r| *r != SHUTDOWN_REQUEST) {
            let result = if status == IoStatus::Ok { Ok(()) } else { Err(RequestError::Io) };
            self.complete(request, result);
        }
        self.settle_state();
    }

    fn io_memory_mut(&mut self, region: u32) -> &mut [u8] {
        panic!("the toy target owns no I/O memory (region {region})")
    }
}

/// Nothing lives only in a log, so there is nothing to replay.
struct NoRecovery;

impl IoMachine for NoRecovery {
    fn poll_io(&mut self) -> Option<DeviceIo> {
        None
    }
    fn handle_io_completion(&mut self, _now: Nanos, _id: IoId, _status: IoStatus) {}
    fn io_memory_mut(&mut self, region: u32) -> &mut [u8] {
        panic!("no I/O memory (region {region})")
    }
}

impl CacheLossRecovery for NoRecovery {
    fn outcome(&mut self) -> Option<Result<(), String>> {
        Some(Ok(()))
    }

    fn corruptions_detected(&self) -> u64 {
        0
    }
}

pub struct ToyFactory(pub ToyDefect);

impl TargetFactory for ToyFactory {
    type Target = ToyTarget;

    fn start(&self, config: &Config, _mode: StartMode, _now: Nanos) -> Result<ToyTarget, String> {
        Ok(ToyTarget::new(config.block_size as u64, config.backing_blocks(), self.0))
    }

    fn cache_loss_recovery(&self, _config: &Config) -> Result<Box<dyn CacheLossRecovery>, String> {
        Ok(Box::new(NoRecovery))
    }

    fn memory_report(&self, _target: &ToyTarget) -> MemoryReport {
        MemoryReport::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Mutation;
    use crate::sim::{run_seed, RunSpec};

    fn spec(seed: u64) -> RunSpec {
        // The toy ignores the policy, but the runner's recovery paths depend on it.
        RunSpec { seed, ops: 300, policy: Policy::ALL[seed as usize % Policy::ALL.len()], mutation: Mutation::None, input_batch: 1 }
    }

    #[test]
    fn a_correct_target_passes_every_seed() {
        for seed in 0..40 {
            let outcome = run_seed(&ToyFactory(ToyDefect::None), spec(seed));
            assert!(outcome.violation.is_none(), "seed {seed}: {}", outcome.violation.unwrap());
            assert!(outcome.figures.blocks_checked > 0);
        }
    }

    fn first_caught(defect: ToyDefect) -> Option<(u64, String)> {
        (0..40).find_map(|seed| run_seed(&ToyFactory(defect), spec(seed)).violation.map(|v| (seed, v.to_string())))
    }

    #[test]
    fn each_defect_of_the_toy_is_caught() {
        for defect in [ToyDefect::FlushSkipsDevice, ToyDefect::AckBeforeWrite, ToyDefect::ReadNextBlock] {
            let caught = first_caught(defect);
            assert!(caught.is_some(), "{defect:?} went unnoticed in 40 seeds");
            eprintln!("{defect:?}: seed {:?}", caught);
        }
    }
}
