//! What the two simulators share: the factory trait of the machine under
//! test (`target`), the real engine as that machine (`engine`), a minimal
//! reference machine (`toy`), the one PRNG (`prng`) and the one event queue
//! (`event_queue`). `hhc torture` (`src/sim/`) and `hhc simulate`
//! (`src/timed/`) differ in their devices, workloads and what they measure,
//! not in how they drive the engine.

pub mod engine;
pub mod event_queue;
pub mod prng;
pub mod target;
pub mod toy;

pub use engine::EngineFactory;
pub use target::{CacheLossRecovery, TargetFactory};
