//! What the simulators run: a `Machine` (`crate::io`) built by a factory, so
//! that both simulators and the torture oracle can be proven on a tiny
//! reference target (`toy`) as well as on the real engine (`engine`).

use crate::config::Config;
use crate::engine::{MemoryReport, StartMode};
use crate::io::{IoMachine, Machine, Nanos};

/// Builds the machine under test for one configuration, and the recovery
/// that follows the loss of its cache device.
pub trait TargetFactory: Sync {
    type Target: Machine + 'static;
    /// A machine over devices that hold a fresh backing device (`Format`) or
    /// whatever an earlier instance left (`Open`).
    fn start(&self, config: &Config, mode: StartMode, now: Nanos) -> Result<Self::Target, String>;
    /// The "cache device lost" recovery: scan the log mirrors, replay onto
    /// the backing device, re-initialise the log.
    fn cache_loss_recovery(&self, config: &Config) -> Result<Box<dyn CacheLossRecovery>, String>;
    /// The §3.5 memory figures of a target after its run.
    fn memory_report(&self, target: &Self::Target) -> MemoryReport;
}

/// A running cache-loss recovery, as the torture simulator pumps it.
pub trait CacheLossRecovery: IoMachine {
    /// `None` while running; the result once finished.
    fn outcome(&mut self) -> Option<Result<(), String>>;
    /// Log copies the recovery found corrupt (and worked around).
    fn corruptions_detected(&self) -> u64;
}
