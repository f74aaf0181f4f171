//! Learning a log's layout from its mirrors: a takeover replays a log this
//! host never wrote, so nothing but the log itself says its geometry. Reads
//! both superblock copies of every mirror (units 0 and 1, wherever the
//! segments start) and takes the newest valid copy; the scan that follows
//! reads them again and applies every other rule.

use super::{log_layout, newest_superblock, ScanError};
use crate::config::LogLayout;
use crate::format::{LogSuperblock, LOG_SUPERBLOCK_COPIES, UNIT_BYTES};
use crate::io::{DeviceIo, DeviceRole, IoAllocator, IoBuffer, IoId, IoKind, IoMachine, IoRegion, IoStatus, Nanos};
use std::collections::VecDeque;

const REGION: u32 = 0;

pub struct SuperblockProbe {
    mirrors: Vec<u8>,
    memory: Box<dyn IoRegion>,
    queued: VecDeque<DeviceIo>,
    /// Per copy (mirror position × 2 + unit), once read.
    statuses: Vec<Option<IoStatus>>,
    result: Option<Result<LogLayout, ScanError>>,
}

impl SuperblockProbe {
    /// `mirrors` are log mirror indices (`DeviceRole::Log(i)`).
    pub fn new(mirrors: Vec<u8>, alloc: &mut dyn IoAllocator) -> SuperblockProbe {
        let copies = LOG_SUPERBLOCK_COPIES as usize;
        let copies_count = mirrors.len() * copies;
        let queued = (0..copies_count)
            .map(|copy| DeviceIo {
                id: copy as IoId,
                device: DeviceRole::Log(mirrors[copy / copies]),
                kind: IoKind::Read,
                offset_bytes: (copy % copies * UNIT_BYTES) as u64,
                len_bytes: UNIT_BYTES as u64,
                buffer: IoBuffer::Engine { region: REGION, offset_bytes: (copy * UNIT_BYTES) as u32 },
            })
            .collect();
        let result = mirrors.is_empty().then_some(Err(ScanError::NoMirrors));
        SuperblockProbe {
            memory: alloc.alloc(copies_count.max(1) * UNIT_BYTES),
            mirrors,
            queued,
            statuses: vec![None; copies_count],
            result,
        }
    }

    /// The layout the newest valid superblock over every mirror describes,
    /// once every read is back.
    pub fn take_result(&mut self) -> Option<Result<LogLayout, ScanError>> {
        self.result.take()
    }

    fn choose(&mut self) -> Result<LogLayout, ScanError> {
        if self.statuses.iter().all(|s| *s != Some(IoStatus::Ok)) {
            return Err(ScanError::SuperblocksUnreadable);
        }
        let copies = LOG_SUPERBLOCK_COPIES as usize;
        let memory = self.memory.as_mut_slice();
        let mut newest: Option<LogSuperblock> = None;
        for position in 0..self.mirrors.len() {
            let readable = (0..copies).filter(|unit| self.statuses[position * copies + unit] == Some(IoStatus::Ok));
            let units = readable.map(|unit| &memory[(position * copies + unit) * UNIT_BYTES..][..UNIT_BYTES]);
            let Some((_, superblock)) = newest_superblock(units) else { continue };
            if newest.as_ref().is_none_or(|best| superblock.write_seq > best.write_seq) {
                newest = Some(superblock);
            }
        }
        let superblock = newest.ok_or(ScanError::NoValidSuperblock)?;
        log_layout(&superblock).map_err(|e| ScanError::GeometryMismatch(format!("the newest superblock: {e}")))
    }
}

impl IoMachine for SuperblockProbe {
    fn poll_io(&mut self) -> Option<DeviceIo> {
        self.queued.pop_front()
    }

    fn handle_io_completion(&mut self, _now: Nanos, id: IoId, status: IoStatus) {
        self.statuses[id as usize] = Some(status);
        if self.statuses.iter().all(Option::is_some) {
            self.result = Some(self.choose());
        }
    }

    fn io_memory_mut(&mut self, region: u32) -> &mut [u8] {
        debug_assert_eq!(region, REGION);
        self.memory.as_mut_slice()
    }
}
