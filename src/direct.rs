//! Requests straight to the backing device, no cache: what an HHC bdev
//! serves once its cache device was lost, the log replayed, and the
//! operator brought it back as a passthrough (`bdev_hhc_recover`). Sans-IO
//! like the engine: requests in, one backing command per request out (its
//! buffer lent from the request), completions out.

use crate::queue::Rewind;
use crate::io::{DeviceIo, DeviceRole, IoBuffer, IoId, IoKind, IoStatus, Request, RequestCompletion, RequestError, RequestId, RequestKind};
use std::collections::{HashMap, VecDeque};

pub struct Direct {
    block_size: u32,
    blocks_count: u64,
    /// Backing command -> the request it serves.
    in_flight: HashMap<IoId, RequestId>,
    io_out: VecDeque<DeviceIo>,
    completions_out: VecDeque<RequestCompletion>,
    next_io_id: IoId,
}

impl Direct {
    /// `requests_max` bounds the requests in flight (the driver's table).
    pub fn new(block_size: u32, blocks_count: u64, requests_max: usize) -> Direct {
        assert!(block_size > 0, "block size 0");
        Direct {
            block_size,
            blocks_count,
            in_flight: HashMap::with_capacity(requests_max),
            io_out: VecDeque::with_capacity(requests_max),
            completions_out: VecDeque::with_capacity(requests_max),
            next_io_id: 0,
        }
    }

    pub fn blocks_count(&self) -> u64 {
        self.blocks_count
    }

    pub fn handle_request(&mut self, request: Request) {
        let (kind, offset_bytes, len_bytes, buffer) = match request.kind {
            RequestKind::Flush => (IoKind::Flush, 0, 0, IoBuffer::None),
            kind => {
                let end = request.lba.checked_add(request.blocks_count as u64);
                if end.is_none_or(|end| end > self.blocks_count) || request.blocks_count == 0 {
                    return self.completions_out.push_back(RequestCompletion { id: request.id, result: Err(RequestError::OutOfRange) });
                }
                let bs = self.block_size as u64;
                let io_kind = if kind == RequestKind::Read { IoKind::Read } else { IoKind::Write };
                (io_kind, request.lba * bs, request.blocks_count as u64 * bs, IoBuffer::Request { request: request.id, offset_bytes: 0 })
            }
        };
        // Ids stay below 2^32, as the SPDK driver's tags need.
        let id = self.next_io_id;
        self.next_io_id = (self.next_io_id + 1) & u32::MAX as u64;
        let previous = self.in_flight.insert(id, request.id);
        assert!(previous.is_none(), "2^32 backing commands in flight");
        self.io_out.push_back(DeviceIo { id, device: DeviceRole::Backing, kind, offset_bytes, len_bytes, buffer });
    }

    pub fn handle_io_completion(&mut self, id: IoId, status: IoStatus) {
        let request = self.in_flight.remove(&id).expect("completion of an unknown backing command");
        let result = if status == IoStatus::Ok { Ok(()) } else { Err(RequestError::Io) };
        self.completions_out.push_back(RequestCompletion { id: request, result });
    }

    pub fn poll_io(&mut self) -> Option<DeviceIo> {
        self.io_out.pop_front_rewound()
    }

    pub fn poll_completion(&mut self) -> Option<RequestCompletion> {
        self.completions_out.pop_front_rewound()
    }

    /// Backing commands not completed yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: RequestId, kind: RequestKind, lba: u64, blocks_count: u32) -> Request {
        Request { id, kind, lba, blocks_count }
    }

    #[test]
    fn each_request_is_one_backing_command_on_its_own_buffer() {
        let mut direct = Direct::new(4096, 100, 8);
        direct.handle_request(request(7, RequestKind::Write, 10, 3));
        direct.handle_request(request(8, RequestKind::Read, 99, 1));
        direct.handle_request(request(9, RequestKind::Flush, 0, 0));
        let write = direct.poll_io().unwrap();
        assert_eq!((write.device, write.kind, write.offset_bytes, write.len_bytes), (DeviceRole::Backing, IoKind::Write, 40960, 12288));
        assert_eq!(write.buffer, IoBuffer::Request { request: 7, offset_bytes: 0 });
        let read = direct.poll_io().unwrap();
        assert_eq!((read.kind, read.offset_bytes, read.len_bytes), (IoKind::Read, 99 * 4096, 4096));
        let flush = direct.poll_io().unwrap();
        assert_eq!((flush.kind, flush.buffer), (IoKind::Flush, IoBuffer::None));
        assert!(direct.poll_io().is_none() && direct.poll_completion().is_none());
        // Completions in any order, each for its own request; errors reach the caller.
        direct.handle_io_completion(flush.id, IoStatus::Ok);
        direct.handle_io_completion(write.id, IoStatus::Error);
        direct.handle_io_completion(read.id, IoStatus::DeviceLost);
        let done: Vec<_> = std::iter::from_fn(|| direct.poll_completion()).map(|c| (c.id, c.result)).collect();
        assert_eq!(done, vec![(9, Ok(())), (7, Err(RequestError::Io)), (8, Err(RequestError::Io))]);
        assert_eq!(direct.in_flight(), 0);
    }

    #[test]
    fn requests_outside_the_backing_device_are_refused() {
        let mut direct = Direct::new(4096, 100, 8);
        direct.handle_request(request(1, RequestKind::Read, 99, 2));
        direct.handle_request(request(2, RequestKind::Write, u64::MAX, 1));
        direct.handle_request(request(3, RequestKind::Write, 5, 0));
        assert!(direct.poll_io().is_none(), "nothing reaches the device");
        let done: Vec<_> = std::iter::from_fn(|| direct.poll_completion()).map(|c| (c.id, c.result)).collect();
        assert_eq!(done, vec![(1, Err(RequestError::OutOfRange)), (2, Err(RequestError::OutOfRange)), (3, Err(RequestError::OutOfRange))]);
    }
}
