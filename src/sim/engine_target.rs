//! The real engine (and the real cache-loss recovery) as a simulator target.

use super::target::{CacheLossRecovery, Readiness, StartKind, Target, TargetFactory};
use crate::config::{Config, LogLayout, Policy};
use crate::engine::{Engine, EngineState, StartMode};
use crate::io::{DeviceIo, DeviceRole, HeapAllocator, IoId, IoMachine, IoStatus, Nanos, Request, RequestCompletion, RequestData};
use crate::recovery::{LogScanner, Replay};

impl Target for Engine {
    fn readiness(&self) -> Readiness {
        match self.state() {
            EngineState::Starting => Readiness::Starting,
            EngineState::Ready => Readiness::Ready,
            EngineState::Stopping => Readiness::Stopping,
            EngineState::Stopped => Readiness::Stopped,
            EngineState::Failed(reason) => Readiness::Failed(reason.clone()),
        }
    }

    fn handle_request(&mut self, now: Nanos, request: Request, data: Option<&dyn RequestData>) {
        Engine::handle_request(self, now, request, data)
    }

    fn handle_io_completion(&mut self, now: Nanos, id: IoId, status: IoStatus) {
        Engine::handle_io_completion(self, now, id, status)
    }

    fn handle_timer(&mut self, now: Nanos) {
        Engine::handle_timer(self, now)
    }

    fn handle_device_removed(&mut self, now: Nanos, role: DeviceRole) {
        Engine::handle_device_removed(self, now, role)
    }

    fn describe_stall(&self, lba: u64) -> String {
        format!("{}\n{}\n{}", self.describe_pending(), self.describe_lba(lba), self.describe_blocks())
    }

    fn set_policy(&mut self, now: Nanos, policy: Policy) {
        // The simulator only switches to policies its configuration supports.
        Engine::set_policy(self, now, policy).expect("policy switch refused")
    }

    fn shutdown(&mut self, now: Nanos) {
        Engine::shutdown(self, now)
    }

    fn poll_io(&mut self) -> Option<DeviceIo> {
        Engine::poll_io(self)
    }

    fn poll_completion(&mut self) -> Option<RequestCompletion> {
        Engine::poll_completion(self)
    }

    fn next_timer(&self) -> Option<Nanos> {
        Engine::next_timer(self)
    }

    fn io_memory_mut(&mut self, region: u32) -> &mut [u8] {
        Engine::io_memory_mut(self, region)
    }
}

pub struct EngineFactory;

impl TargetFactory for EngineFactory {
    fn start(&self, config: &Config, start: StartKind, now: Nanos) -> Result<Box<dyn Target>, String> {
        let mode = match start {
            StartKind::Format => StartMode::Format,
            StartKind::Open => StartMode::Open,
        };
        Engine::new(config.clone(), mode, &mut HeapAllocator, now).map(|e| Box::new(e) as Box<dyn Target>).map_err(|e| e.to_string())
    }

    fn cache_loss_recovery(&self, config: &Config, _now: Nanos) -> Result<Box<dyn CacheLossRecovery>, String> {
        let (_, layout) = config.validate().map_err(|e| e.to_string())?;
        let mirrors: Vec<u8> = (0..config.mirrors_count).collect();
        let scanner = LogScanner::new(layout, mirrors.clone(), &mut HeapAllocator);
        Ok(Box::new(LogRecovery { layout, mirrors, backing_has_flush: config.backing_has_flush, stage: Stage::Scan(Box::new(scanner)), corrupt_copies_detected: 0 }))
    }
}

enum Stage {
    Scan(Box<LogScanner>),
    Replay(Box<Replay>),
    Done(Result<(), String>),
}

/// `recovery::LogScanner` then `recovery::Replay`, as one machine.
pub struct LogRecovery {
    layout: LogLayout,
    mirrors: Vec<u8>,
    backing_has_flush: bool,
    stage: Stage,
    corrupt_copies_detected: u64,
}

impl LogRecovery {
    /// Moves on to the next stage once the current one is finished.
    fn advance(&mut self) {
        let next = match &mut self.stage {
            Stage::Scan(scanner) => match scanner.take_result() {
                None => return,
                Some(Err(error)) => Stage::Done(Err(format!("log scan failed: {error}"))),
                Some(Ok(scanned)) => {
                    self.corrupt_copies_detected += scanned.corrupt_copies_detected;
                    let replay = Replay::new(self.layout, scanned, self.mirrors.clone(), self.backing_has_flush, &mut HeapAllocator);
                    Stage::Replay(Box::new(replay))
                }
            },
            Stage::Replay(replay) => match replay.result() {
                None => return,
                Some(Ok(_)) => Stage::Done(Ok(())),
                Some(Err(error)) => Stage::Done(Err(format!("replay failed: {error}"))),
            },
            Stage::Done(_) => return,
        };
        self.stage = next;
    }

    fn machine(&mut self) -> Option<&mut dyn IoMachine> {
        match &mut self.stage {
            Stage::Scan(scanner) => Some(scanner.as_mut()),
            Stage::Replay(replay) => Some(replay.as_mut()),
            Stage::Done(_) => None,
        }
    }
}

impl IoMachine for LogRecovery {
    fn poll_io(&mut self) -> Option<DeviceIo> {
        self.advance();
        self.machine()?.poll_io()
    }

    fn handle_io_completion(&mut self, now: Nanos, id: IoId, status: IoStatus) {
        self.machine().expect("completion after the recovery finished").handle_io_completion(now, id, status);
        self.advance();
    }

    fn io_memory_mut(&mut self, region: u32) -> &mut [u8] {
        self.machine().expect("memory asked after the recovery finished").io_memory_mut(region)
    }
}

impl CacheLossRecovery for LogRecovery {
    fn outcome(&mut self, _now: Nanos) -> Option<Result<(), String>> {
        self.advance();
        match &self.stage {
            Stage::Done(result) => Some(result.clone()),
            _ => None,
        }
    }

    fn corruptions_detected(&self) -> u64 {
        self.corrupt_copies_detected
    }
}
