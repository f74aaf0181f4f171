//! Sequential cutoff: a long sequential stream bypasses the cache, as with
//! bcache's `sequential_cutoff` and OCF's seq-cutoff. A stream is a run of
//! requests in one direction each starting where the previous one ended;
//! the last `STREAMS` streams are tracked (least recently continued one
//! replaced), so a few interleaved sequential readers and writers are each
//! seen. A request is cut off once its stream, itself included, holds
//! `seq_cutoff_threshold_bytes` — under `always` whenever, under `full` only
//! while the cache is full. 4 KiB random I/O never is: a stream restarts at
//! every request that does not continue one, and the threshold is at least
//! 64 KiB.
//!
//! What a cut-off request does:
//! - A read is served as always (hits from the cache), but its misses are
//!   not filled: the stream evicts nothing.
//! - A write goes to the backing device alone, as a passthrough write does,
//!   and the LBAs' clean copies are dropped — but only when that is safe at
//!   once (`Engine::bypass_is_safe`); otherwise it is written through the
//!   cache as usual. Safe means, for every LBA of the request: no dirty
//!   block (the cache holds data the backing device lacks: a bypass would be
//!   overwritten by its later write-back, bcache's rule too), no log entry
//!   a replay after a cache loss could still apply (a live entry, a revoke
//!   owed, a warm restart's revoke still queued: replayed after the bypass,
//!   it would put an older value back over a flushed one), no waiting
//!   request of the block (order), and a clean copy that can be dropped
//!   now (not pinned by a read, not being committed). The write-through
//!   path's own rules then apply as for any passthrough write: a committed
//!   clean entry is first rewritten as a write-through copy (a restart
//!   would trust it over the backing device) and no backing write of the
//!   block is in flight. Falling back to the cache is always correct; the
//!   bypass only saves cache space and writes.
//! - Not under `wb-ordered`, whose backing device must always hold a flush
//!   prefix: a write straight to it would jump the epochs written back.

use super::Engine;
use crate::config::CutoffPolicy;

/// Streams tracked at once (OCF tracks 128 per core; a few interleaved
/// streams are what one bdev sees).
const STREAMS: usize = 16;

#[derive(Clone, Copy, Debug, Default)]
struct Stream {
    /// The LBA a request continuing the stream starts at.
    lba_next: u64,
    bytes: u64,
    write: bool,
    /// `SequentialCutoff::clock` when last continued (LRU replacement).
    used_at: u64,
}

#[derive(Clone, Debug, Default)]
pub(super) struct SequentialCutoff {
    streams: [Stream; STREAMS],
    clock: u64,
}

impl SequentialCutoff {
    /// Counts a request into its stream; returns the stream's bytes with it.
    fn observe(&mut self, lba: u64, blocks_count: u32, write: bool, block_size: u32) -> u64 {
        self.clock += 1;
        let bytes = blocks_count as u64 * block_size as u64;
        let found = self.streams.iter().position(|s| s.bytes > 0 && s.write == write && s.lba_next == lba);
        let index = found.unwrap_or_else(|| {
            let oldest = self.streams.iter().enumerate().min_by_key(|(_, s)| s.used_at).map(|(i, _)| i);
            let index = oldest.expect("at least one stream");
            self.streams[index] = Stream { lba_next: lba, bytes: 0, write, used_at: 0 };
            index
        });
        let stream = &mut self.streams[index];
        stream.lba_next = lba + blocks_count as u64;
        stream.bytes = stream.bytes.saturating_add(bytes);
        stream.used_at = self.clock;
        stream.bytes
    }
}

impl Engine {
    /// Whether a read or write of these blocks belongs to a stream the
    /// cutoff sends past the cache. Every read and write counts into the
    /// streams, cut off or not.
    pub(super) fn cut_off(&mut self, lba: u64, blocks_count: u32, write: bool) -> bool {
        let policy = self.config.seq_cutoff_policy;
        if policy == CutoffPolicy::Never {
            return false;
        }
        let stream_bytes = self.cutoff.observe(lba, blocks_count, write, self.config.block_size);
        if stream_bytes < self.config.seq_cutoff_threshold_bytes {
            return false;
        }
        policy == CutoffPolicy::Always || self.cache_is_full()
    }

    /// The cache has no room left but what eviction keeps free
    /// (`keep_free_blocks` holds the free blocks between the low watermark
    /// and the eviction target once the cache has filled).
    fn cache_is_full(&self) -> bool {
        self.cache.free_count() <= self.eviction_target()
    }

    /// Whether a cut-off write of these blocks may go to the backing device
    /// alone (the module comment says why each condition is needed).
    pub(super) fn bypass_is_safe(&self, lba: u64, blocks_count: u32) -> bool {
        if self.config.policy == crate::config::Policy::WriteBackOrdered || !self.startup_revokes.is_empty() {
            return false;
        }
        if self.waiting_through_overlaps(lba, blocks_count) || self.waiting_back_overlaps(lba, blocks_count) {
            return false;
        }
        (lba..lba + blocks_count as u64).all(|l| {
            let l = l as u32;
            self.writeback.revokes.debt(l).is_none() && self.cache.lookup(l).is_none_or(|b| self.cache.may_drop_clean(b))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_grows_only_by_requests_that_continue_it() {
        let mut cutoff = SequentialCutoff::default();
        assert_eq!(cutoff.observe(100, 4, true, 4096), 16384);
        assert_eq!(cutoff.observe(104, 4, true, 4096), 32768);
        // The same LBA read: another direction, another stream.
        assert_eq!(cutoff.observe(108, 4, false, 4096), 16384);
        assert_eq!(cutoff.observe(108, 1, true, 4096), 36864);
        // A request elsewhere starts its own stream; the first goes on.
        assert_eq!(cutoff.observe(5000, 1, true, 4096), 4096);
        assert_eq!(cutoff.observe(109, 1, true, 4096), 40960);
    }

    #[test]
    fn the_least_recently_continued_stream_is_replaced() {
        let mut cutoff = SequentialCutoff::default();
        cutoff.observe(0, 1, true, 4096);
        for i in 1..STREAMS as u64 {
            cutoff.observe(i * 1000, 1, true, 4096);
        }
        cutoff.observe(1, 1, true, 4096); // stream 0 continued: now the newest
        cutoff.observe(999_999, 1, true, 4096); // replaces the one at 1000
        assert_eq!(cutoff.observe(2, 1, true, 4096), 3 * 4096, "stream 0 was kept");
        assert_eq!(cutoff.observe(1001, 1, true, 4096), 4096, "the oldest stream was replaced");
    }

    #[test]
    fn random_single_blocks_never_reach_the_smallest_threshold() {
        let mut cutoff = SequentialCutoff::default();
        let mut x: u64 = 7;
        let mut most = 0;
        for _ in 0..100_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            most = most.max(cutoff.observe((x >> 33) % (1 << 20), 1, x & 1 == 0, 4096));
        }
        assert!(most < crate::config::SEQ_CUTOFF_THRESHOLD_MIN, "a random stream reached {most} bytes");
    }
}
