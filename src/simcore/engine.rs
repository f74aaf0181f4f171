//! The real engine (and the real cache-loss recovery) as the simulators'
//! target. The engine is a `Machine` itself (`src/engine/machine.rs`): the
//! simulators drive it with no adapter in between.

use super::target::{CacheLossRecovery, TargetFactory};
use crate::config::Config;
use crate::engine::{Engine, MemoryReport, StartMode};
use crate::io::HeapAllocator;
use crate::recovery::LogRecovery;

pub struct EngineFactory;

impl TargetFactory for EngineFactory {
    type Target = Engine;

    fn start(&self, config: &Config, mode: StartMode, now: u64) -> Result<Engine, String> {
        Engine::new(config.clone(), mode, &mut HeapAllocator, now).map_err(|e| e.to_string())
    }

    fn cache_loss_recovery(&self, config: &Config) -> Result<Box<dyn CacheLossRecovery>, String> {
        let (_, layout) = config.validate().map_err(|e| e.to_string())?;
        let mirrors: Vec<u8> = (0..config.mirrors_count).collect();
        let recovery = LogRecovery::new(layout, mirrors, config.backing_has_flush, Box::new(HeapAllocator));
        Ok(Box::new(recovery.expect_instance(config.instance_id)))
    }

    fn memory_report(&self, engine: &Engine) -> MemoryReport {
        engine.memory_report()
    }
}

impl CacheLossRecovery for LogRecovery {
    fn outcome(&mut self) -> Option<Result<(), String>> {
        self.result().map(|result| result.map(|_| ()).map_err(|error| error.to_string()))
    }

    fn corruptions_detected(&self) -> u64 {
        self.corrupt_copies_detected()
    }
}
