//! The engine as the `Machine` every driver runs (`crate::io`): each trait
//! call is the engine's own method of the same name, so a driver generic over
//! `Machine` and one holding an `Engine` run exactly the same code.

use super::{Engine, EngineState, Stats};
use crate::config::{ConfigError, Policy};
use crate::io::{DeviceIo, DeviceRole, IoId, IoMachine, IoStatus, Machine, Nanos, Request, RequestCompletion, RequestData};

impl IoMachine for Engine {
    fn poll_io(&mut self) -> Option<DeviceIo> {
        Engine::poll_io(self)
    }
    fn handle_io_completion(&mut self, now: Nanos, id: IoId, status: IoStatus) {
        Engine::handle_io_completion(self, now, id, status)
    }
    fn io_memory_mut(&mut self, region: u32) -> &mut [u8] {
        Engine::io_memory_mut(self, region)
    }
}

impl Machine for Engine {
    fn state(&self) -> &EngineState {
        Engine::state(self)
    }
    fn handle_request(&mut self, now: Nanos, request: Request, data: Option<&dyn RequestData>) {
        Engine::handle_request(self, now, request, data)
    }
    fn handle_timer(&mut self, now: Nanos) {
        Engine::handle_timer(self, now)
    }
    fn handle_device_removed(&mut self, now: Nanos, role: DeviceRole) {
        Engine::handle_device_removed(self, now, role)
    }
    fn handle_mirror_attached(&mut self, now: Nanos, mirror: u8) {
        Engine::handle_mirror_attached(self, now, mirror)
    }
    fn set_policy(&mut self, now: Nanos, policy: Policy) -> Result<(), ConfigError> {
        Engine::set_policy(self, now, policy)
    }
    fn set_options(&mut self, now: Nanos, options: crate::config::Options) -> Result<(), ConfigError> {
        Engine::set_options(self, now, options)
    }
    fn shutdown(&mut self, now: Nanos) {
        Engine::shutdown(self, now)
    }
    fn begin_batch(&mut self) {
        Engine::begin_batch(self)
    }
    fn end_batch(&mut self, now: Nanos) {
        Engine::end_batch(self, now)
    }
    fn poll_completion(&mut self) -> Option<RequestCompletion> {
        Engine::poll_completion(self)
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        Engine::poll_timeout(self)
    }
    fn stats(&self) -> Stats {
        Engine::stats(self)
    }
    fn log_mirror_states(&self) -> Option<Vec<crate::engine::MirrorState>> {
        Some(Engine::mirror_states(self))
    }

    fn check_counts(&self) -> Result<(), String> {
        self.cache.check_counts()
    }
    fn describe_stall(&self, lba: u64) -> String {
        format!("{}\n{}\n{}", self.describe_pending(), self.describe_lba(lba), self.describe_blocks())
    }
}
