//! A stand-in target for the simulator's own tests: the paper's Raw
//! configuration (every request goes straight to the backing device).

use super::experiments::{MemoryFigures, TargetFactory};
use super::runner::{KeptAreas, SimTarget};
use crate::config::Config;
use crate::io::{DeviceIo, DeviceRole, IoBuffer, IoId, IoKind, IoStatus, Nanos, Request, RequestCompletion, RequestData, RequestKind};
use std::collections::VecDeque;

/// The paper's Raw configuration as a minimal target: every request goes
/// straight to the backing device. Lets the runner be checked on its own.
pub struct Passthrough {
    ios: VecDeque<DeviceIo>,
    completions: VecDeque<RequestCompletion>,
    memory: Vec<u8>,
}

impl Passthrough {
    pub fn new() -> Passthrough {
        Passthrough { ios: VecDeque::new(), completions: VecDeque::new(), memory: vec![0; 4096] }
    }
}

impl SimTarget for Passthrough {
    fn handle_request(&mut self, _now: Nanos, request: Request, _data: Option<&dyn RequestData>) {
        let kind = match request.kind {
            RequestKind::Read => IoKind::Read,
            RequestKind::Write => IoKind::Write,
            RequestKind::Flush => IoKind::Flush,
        };
        self.ios.push_back(DeviceIo {
            id: request.id,
            device: DeviceRole::Backing,
            kind,
            offset_bytes: request.lba * 4096,
            len_bytes: request.blocks_count as u64 * 4096,
            buffer: IoBuffer::Request { request: request.id, offset_bytes: 0 },
        });
    }
    fn handle_io_completion(&mut self, _now: Nanos, id: IoId, status: IoStatus) {
        assert_eq!(status, IoStatus::Ok);
        self.completions.push_back(RequestCompletion { id, result: Ok(()) });
    }
    fn handle_timer(&mut self, _now: Nanos) {}
    fn poll_io(&mut self) -> Option<DeviceIo> {
        self.ios.pop_front()
    }
    fn poll_completion(&mut self) -> Option<RequestCompletion> {
        self.completions.pop_front()
    }
    fn next_timer(&self) -> Option<Nanos> {
        None
    }
    fn io_memory_mut(&mut self, _region: u32) -> &mut [u8] {
        &mut self.memory
    }
    fn is_ready(&self) -> bool {
        true
    }
    fn dirty_and_total_blocks(&self) -> (u64, u64) {
        (0, 1)
    }
}


pub struct PassthroughFactory;

impl TargetFactory for PassthroughFactory {
    type Target = Passthrough;
    fn build(&self, _config: &Config) -> Result<(Passthrough, KeptAreas), String> {
        Ok((Passthrough::new(), KeptAreas { cache_below_bytes: 0, log_below_bytes: 0 }))
    }
    fn memory(&self, _target: &Passthrough) -> MemoryFigures {
        MemoryFigures::default()
    }
}
