//! Request blocks that could not start (no free cache block, a busy block,
//! a write-through behind a backing write of the same block): they wait in
//! arrival order and are retried after every input.

use crate::queue::Rewind;
use super::requests::{Waiting, Waits, WriteMode};
use super::Engine;

/// Blocks a write-through that could not start spans: later write-throughs
/// overlapping them wait behind it.
#[derive(Clone, Copy, Debug)]
pub(super) struct BlockRange {
    pub first: u64,
    pub count: u32,
}

impl Engine {
    /// A write-through that has to wait keeps its place: later writes of any
    /// of its blocks wait behind it. Otherwise a stream of writes to one hot
    /// block starves a longer request that needs all of its blocks free of
    /// backing writes at once (torture seed 2085, passthrough).
    pub(super) fn waiting_through_overlaps(&self, lba: u64, count: u32) -> bool {
        self.waiting.iter().any(|w| {
            matches!(w.what, Waits::Through)
                && self.requests.get(w.request).is_some_and(|r| r.lba < lba + count as u64 && lba < r.lba + r.blocks_count as u64)
        })
    }

    /// Whether a write-back block write waiting in the queue is of one of
    /// these LBAs.
    pub(super) fn waiting_back_overlaps(&self, lba: u64, count: u32) -> bool {
        self.waiting.iter().any(|w| {
            let Waits::BackWrite { block_in_request, .. } = w.what else { return false };
            self.requests.get(w.request).is_some_and(|r| (lba..lba + count as u64).contains(&(r.lba + block_in_request as u64)))
        })
    }

    /// Starts waiting blocks that can start now, in arrival order.
    pub(super) fn retry_waiting(&mut self) {
        // Each entry is a distinct block of a live request, or a live
        // write-through request as a whole: the queue's capacity.
        debug_assert!(
            self.waiting.len() <= (self.request_blocks_live + self.requests.len() as u32) as usize,
            "{} waiting entries for {} live requests of {} blocks",
            self.waiting.len(),
            self.requests.len(),
            self.request_blocks_live
        );
        self.through_blocked.clear();
        let mut remaining = self.waiting.len();
        while remaining > 0 {
            remaining -= 1;
            let Some(waiting) = self.waiting.pop_front_rewound() else { break };
            // A waiting entry holds a share of its request's `pending`, so
            // the request outlives it.
            assert!(self.requests.get(waiting.request).is_some(), "a waiting entry of request {}, completed", waiting.request);
            debug_assert!(
                waiting.what.block_in_request().is_none_or(|block| block < self.request(waiting.request).blocks_count),
                "waiting entry {waiting:?} outside its request"
            );
            let write = match waiting.what {
                Waits::BackWrite { block_in_request, epoch, held } => Some((block_in_request, epoch, held, true)),
                Waits::ThroughCopy { block_in_request } => Some((block_in_request, 0, None, false)),
                Waits::Read { .. } | Waits::Through => None,
            };
            let started = if matches!(waiting.what, Waits::Through) && self.write_mode() == WriteMode::Back {
                self.restart_write_as_back(waiting.request);
                true
            } else if matches!(waiting.what, Waits::Through) {
                let (lba, count) = self.request_range(waiting.request);
                let behind = self.through_blocked.iter().any(|blocked| blocked.first < lba + count as u64 && lba < blocked.first + blocked.count as u64);
                let started = !behind && self.try_start_write_through(waiting.request);
                if !started {
                    debug_assert!(self.through_blocked.len() < self.config.requests_max as usize, "more blocked write-throughs than requests");
                    self.through_blocked.push(BlockRange { first: lba, count });
                }
                started
            } else if let Some((block_in_request, epoch, held_at, back)) = write {
                // Writes keep their order: stop at the first one that cannot start.
                let held = std::mem::take(&mut self.held);
                let offset = block_in_request as u64 * self.config.block_size as u64;
                let started = held.with_block(held_at, offset, |data| {
                    self.try_start_block_write(waiting.request, block_in_request, data, epoch, back)
                });
                self.held = held;
                if started {
                    if let Some(slot) = held_at {
                        self.held.release(slot);
                    }
                } else {
                    self.waiting.push_front(waiting);
                    self.requeue_reads_behind(remaining);
                    return;
                }
                started
            } else {
                let Waits::Read { block_in_request } = waiting.what else { unreachable!("every write is matched above") };
                self.try_start_block_read(waiting.request, block_in_request)
            };
            if !started {
                self.waiting.push_back(waiting);
            }
        }
    }

    /// A write-through that waited until the policy switched to write-back
    /// becomes a write-back write: going through now, it could land on the
    /// backing device before its copy's entry is committed, behind a clean
    /// entry of a newer write that a restart under write-back trusts.
    pub(super) fn restart_write_as_back(&mut self, key: u32) {
        let count = self.request(key).blocks_count;
        // Its whole-request entry held one share of `pending`, released
        // below once each block holds its own.
        debug_assert!(count > 0 && self.request(key).pending > 0, "request {key} restarted as write-back with nothing pending");
        self.request_mut(key).pending += count;
        for i in 0..count {
            let epoch = self.ordered_reserve();
            if !self.try_start_block_write(key, i, None, epoch, true) {
                self.waiting.push_back(Waiting { request: key, what: Waits::BackWrite { block_in_request: i, epoch, held: None } });
            }
        }
        self.sub_done(key, 1, None);
    }

    /// Lets reads queued behind a stuck write start if they can.
    pub(super) fn requeue_reads_behind(&mut self, count: usize) {
        // The stuck write is at the front; `count` entries were behind it.
        debug_assert!(count < self.waiting.len(), "{count} entries behind the stuck write, of {}", self.waiting.len());
        for _ in 0..count {
            let Some(waiting) = self.waiting.remove(1) else { return };
            let started = match waiting.what {
                Waits::Read { block_in_request } => self.try_start_block_read(waiting.request, block_in_request),
                _ => false,
            };
            if !started {
                self.waiting.push_back(waiting);
            }
        }
    }
}
