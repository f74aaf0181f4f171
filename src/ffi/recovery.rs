//! After the cache bdev was lost: scan the log mirrors, then replay the log
//! onto the backing bdev, through the node's bases. The machine is the one
//! the simulator and `hhc recover` run (`recovery::LogRecovery`); this room
//! only drives it.

use super::base::{Bases, TAG_RECOVERY};
use super::iov::region_iovec;
use super::memory::DmaAllocator;
use super::owner::now_ns;
use crate::config::LogLayout;
use crate::io::{IoBuffer, IoId, IoMachine, IoStatus};
use crate::recovery::{LogRecovery, Recovered};

pub struct Recovery(LogRecovery);

impl Recovery {
    pub fn new(layout: LogLayout, mirrors: Vec<u8>, backing_has_flush: bool) -> Recovery {
        Recovery(LogRecovery::new(layout, mirrors, backing_has_flush, Box::new(DmaAllocator)))
    }

    /// Starts the machine's device commands; true if there were any.
    pub fn pump(&mut self, bases: &mut Bases) -> bool {
        let machine = &mut self.0;
        let mut progressed = false;
        while let Some(io) = machine.poll_io() {
            progressed = true;
            let iovs = match io.buffer {
                IoBuffer::Engine { region, offset_bytes } => {
                    vec![region_iovec(machine.io_memory_mut(region), offset_bytes as u64, io.len_bytes)]
                }
                _ => Vec::new(),
            };
            if let Err(status) = bases.submit(io.device, io.kind, io.offset_bytes, io.len_bytes, &iovs, TAG_RECOVERY | io.id) {
                machine.handle_io_completion(now_ns(), io.id, status);
            }
        }
        progressed
    }

    pub fn io_done(&mut self, id: IoId, status: IoStatus) {
        self.0.handle_io_completion(now_ns(), id, status);
    }

    /// Itself while it runs; None once the replay is done or a step failed
    /// (both logged, under `name`).
    pub fn advance(mut self, name: &str, backing: &str) -> Option<Recovery> {
        match self.0.result() {
            None => return Some(self),
            Some(Ok(Recovered::Replayed(report))) => log::warn!(
                "{name}: replayed {} blocks from {} log parts onto {backing}; the HHC bdev goes away",
                report.blocks_replayed,
                report.segments_replayed
            ),
            Some(Ok(Recovered::Scanned(_))) => log::error!("{name}: the recovery stopped after its scan"),
            Some(Err(error)) => log::error!("{name}: {error}"),
        }
        None
    }
}
