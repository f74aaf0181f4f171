//! A driver that completes every device command at once and moves no data:
//! the engine's own work is all that is left to measure.

use crate::config::Config;
use crate::engine::{Engine, EngineState, StartMode};
use crate::io::{HeapAllocator, IoStatus, Nanos, Request, RequestKind};

pub struct NullDriver {
    pub engine: Engine,
    now: Nanos,
    pending: Vec<u64>,
    completing: Vec<u64>,
}

impl NullDriver {
    pub fn new(config: Config) -> NullDriver {
        let engine = Engine::new(config, StartMode::Format, &mut HeapAllocator, 0).expect("benchmark config");
        let mut driver =
            NullDriver { engine, now: 0, pending: Vec::with_capacity(4096), completing: Vec::with_capacity(4096) };
        driver.pump();
        assert_eq!(driver.engine.state(), &EngineState::Ready);
        driver
    }

    fn pump(&mut self) {
        loop {
            while let Some(io) = self.engine.poll_io() {
                self.pending.push(io.id);
            }
            while self.engine.poll_completion().is_some() {}
            if self.pending.is_empty() {
                return;
            }
            std::mem::swap(&mut self.pending, &mut self.completing);
            for id in self.completing.drain(..) {
                self.engine.handle_io_completion(self.now, id, IoStatus::Ok);
            }
        }
    }

    /// Submits one request and runs the engine until nothing is left to do.
    pub fn request(&mut self, id: u64, kind: RequestKind, lba: u64, data: Option<&Vec<u8>>) {
        let request = Request { id, kind, lba, blocks_count: if kind == RequestKind::Flush { 0 } else { 1 } };
        self.engine.handle_request(self.now, request, data.map(|d| d as &dyn crate::io::RequestData));
        self.pump();
    }
}

