//! The real engine (and the real cache-loss recovery) as a simulator target.

use super::target::{CacheLossRecovery, Readiness, StartKind, Target, TargetFactory};
use crate::config::{Config, Policy};
use crate::engine::{Engine, EngineState, StartMode};
use crate::io::{DeviceIo, DeviceRole, HeapAllocator, IoId, IoStatus, Nanos, Request, RequestCompletion, RequestData};

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

    fn cache_loss_recovery(&self, config: &Config, now: Nanos) -> Result<Box<dyn CacheLossRecovery>, String> {
        let _ = (config, now);
        Err("recovery not merged yet".into())
    }
}
