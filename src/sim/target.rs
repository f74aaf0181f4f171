//! What the simulator drives: the engine under test, behind a trait so that
//! the simulator and its oracle can be proven on a tiny reference target
//! (`toy`) as well as on the real engine (`engine_target`).

use crate::config::{Config, Policy};
use crate::io::{DeviceIo, DeviceRole, IoId, IoMachine, IoStatus, Nanos, Request, RequestCompletion, RequestData};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartKind {
    /// Fresh cache and log over an existing backing device.
    Format,
    /// Warm restart over whatever the devices hold.
    Open,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Starting,
    Ready,
    Stopping,
    Stopped,
    Failed(String),
}

/// The sans-IO engine surface (`src/engine/mod.rs`).
pub trait Target {
    fn readiness(&self) -> Readiness;
    fn handle_request(&mut self, now: Nanos, request: Request, data: Option<&dyn RequestData>);
    fn handle_io_completion(&mut self, now: Nanos, id: IoId, status: IoStatus);
    fn handle_timer(&mut self, now: Nanos);
    fn handle_device_removed(&mut self, now: Nanos, role: DeviceRole);
    fn set_policy(&mut self, now: Nanos, policy: Policy);
    fn shutdown(&mut self, now: Nanos);
    fn poll_io(&mut self) -> Option<DeviceIo>;
    fn poll_completion(&mut self) -> Option<RequestCompletion>;
    fn next_timer(&self) -> Option<Nanos>;
    fn io_memory_mut(&mut self, region: u32) -> &mut [u8];
    /// What the target waits for and what it holds of `lba`, in words (the
    /// trace prints it when a request stalls).
    fn describe_stall(&self, _lba: u64) -> String {
        String::new()
    }
}

/// The "cache device lost" recovery: scan the log mirrors, replay onto the
/// backing device, re-initialise the log.
pub trait CacheLossRecovery: IoMachine {
    /// `None` while running; the result once finished.
    fn outcome(&mut self, now: Nanos) -> Option<Result<(), String>>;
    /// Log copies the recovery found corrupt (and worked around).
    fn corruptions_detected(&self) -> u64;
}

/// Builds targets and recoveries for one configuration.
pub trait TargetFactory {
    fn start(&self, config: &Config, start: StartKind, now: Nanos) -> Result<Box<dyn Target>, String>;
    fn cache_loss_recovery(&self, config: &Config, now: Nanos) -> Result<Box<dyn CacheLossRecovery>, String>;
}
