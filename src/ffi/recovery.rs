//! After the cache bdev was lost: scan the log mirrors, then replay the log
//! onto the backing bdev, through the node's bases. The machines are the
//! offline tool's (`crate::recovery`); this room only drives them.

use super::base::{Bases, TAG_RECOVERY};
use super::iov::region_iovec;
use super::memory::DmaAllocator;
use super::owner::now_ns;
use crate::config::LogLayout;
use crate::io::{IoBuffer, IoId, IoMachine, IoStatus};
use crate::recovery::{LogScanner, Replay};

pub enum Recovery {
    Scan { scanner: LogScanner, layout: LogLayout, mirrors: Vec<u8>, backing_has_flush: bool },
    Replay(Replay),
}

impl Recovery {
    pub fn new(layout: LogLayout, mirrors: Vec<u8>, backing_has_flush: bool) -> Recovery {
        let scanner = LogScanner::new(layout, mirrors.clone(), &mut DmaAllocator);
        Recovery::Scan { scanner, layout, mirrors, backing_has_flush }
    }

    fn machine(&mut self) -> &mut dyn IoMachine {
        match self {
            Recovery::Scan { scanner, .. } => scanner,
            Recovery::Replay(replay) => replay,
        }
    }

    /// Starts the machine's device commands; true if there were any.
    pub fn pump(&mut self, bases: &mut Bases) -> bool {
        let machine = self.machine();
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
        self.machine().handle_io_completion(now_ns(), id, status);
    }

    /// The next step: the replay once the scan is done, None once the
    /// replay is done or a step failed (both logged, under `name`).
    pub fn advance(self, name: &str, backing: &str) -> Option<Recovery> {
        match self {
            Recovery::Scan { mut scanner, layout, mirrors, backing_has_flush } if scanner.is_done() => {
                match scanner.take_result() {
                    Some(Ok(scanned)) => {
                        Some(Recovery::Replay(Replay::new(layout, scanned, mirrors, backing_has_flush, &mut DmaAllocator)))
                    }
                    other => {
                        log::error!("{name}: log scan failed: {:?}", other.map(|r| r.err()));
                        None
                    }
                }
            }
            Recovery::Replay(replay) if replay.is_done() => {
                match replay.result() {
                    Some(Ok(report)) => log::warn!(
                        "{name}: replayed {} blocks from {} log parts onto {backing}; the HHC bdev goes away",
                        report.blocks_replayed,
                        report.segments_replayed
                    ),
                    other => log::error!("{name}: replay failed: {:?}", other),
                }
                None
            }
            unfinished => Some(unfinished),
        }
    }
}
