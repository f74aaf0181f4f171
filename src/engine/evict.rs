//! Eviction: clean blocks are given up ahead of need, so that writes and
//! fills find free blocks (committed ones are freed by the commit that
//! invalidates their entries, commit.rs).

use super::Engine;

/// Eviction refills the free blocks to this many low watermarks at a time.
const EVICTION_BATCH_WATERMARKS: u32 = 4;

/// Most background passes a dry eviction scan skips (`EvictionBackoff`).
const EVICTION_SKIP_MAX: u32 = 64;

/// Eviction scans that found nothing to evict back off. While no clean
/// block may be evicted (written-back blocks wait for the commit that
/// records them clean, say), each scan visits its whole budget (5,120
/// blocks) for nothing; run after every input, that took the engine's
/// whole CPU, and the commit that would free blocks crawled through it
/// (steady_writes, `wb` over four times the cache: 18 ms of writes at 3-12
/// ms latency as the cache first filled). After a dry scan the next 1, 2,
/// 4 ... up to `EVICTION_SKIP_MAX` passes skip eviction; a scan that finds
/// a block ends the back-off. Writes waiting with no free block left never
/// skip: then the scan is what lets them go on.
#[derive(Default)]
struct EvictionBackoff {
    skip_left: u32,
    streak: u32,
}

/// Eviction's own state: the back-off, and the blocks a scan evicted
/// whose entries a commit must invalidate (reused).
pub(super) struct Eviction {
    backoff: EvictionBackoff,
    scratch: Vec<u32>,
}

impl Eviction {
    pub fn new() -> Self {
        Eviction { backoff: EvictionBackoff::default(), scratch: Vec::with_capacity(256) }
    }
}

/// Under this many free blocks a commit starts to free the evicted ones,
/// and eviction refills them (`Engine::keep_free_blocks`).
pub(super) fn free_blocks_low_watermark(blocks_count: u32) -> u32 {
    (blocks_count / 64).max(8)
}

impl Engine {
    pub(super) fn free_blocks_low_watermark(&self) -> u32 {
        free_blocks_low_watermark(self.cache.blocks_count())
    }

    /// The free blocks eviction refills to once they fall under the low
    /// watermark (`keep_free_blocks`).
    pub(super) fn eviction_target(&self) -> u32 {
        EVICTION_BATCH_WATERMARKS * self.free_blocks_low_watermark()
    }

    /// Evicts ahead so writes and fills find free blocks, several low
    /// watermarks' worth at a time: each commit round that frees them
    /// encodes every page they touch, so it pays to free many per round.
    ///
    /// Blocks already evicted and awaiting the commit that frees them count
    /// as coming: without them, a cache whose few clean blocks were all on
    /// their way scanned its whole eviction budget on every input until the
    /// commit landed (83 % of the CPU with `wb@100` and writes beyond the
    /// cache, the SPDK bench's 17 k IOPS).
    pub(super) fn keep_free_blocks(&mut self) {
        let low = self.free_blocks_low_watermark();
        let coming = self.cache.free_count() + self.cache.evicting_count();
        if coming >= low {
            return;
        }
        let starved = self.cache.free_count() == 0 && !self.waiting.is_empty();
        let backoff = &mut self.eviction.backoff;
        if backoff.skip_left > 0 && !starved {
            backoff.skip_left -= 1;
            return;
        }
        let evicted = self.evict_blocks(self.eviction_target() - coming);
        let backoff = &mut self.eviction.backoff;
        if evicted > 0 || starved {
            backoff.streak = 0;
        } else {
            backoff.streak = (2 * backoff.streak).clamp(1, EVICTION_SKIP_MAX);
            backoff.skip_left = backoff.streak;
        }
    }

    /// Evicts up to `wanted` clean blocks and returns how many; committed
    /// ones are freed by the commit that invalidates their entries.
    pub(super) fn evict_blocks(&mut self, wanted: u32) -> u32 {
        let mut pending = std::mem::take(&mut self.eviction.scratch);
        let (freed, visited) = self.cache.evict(wanted, &mut pending);
        let evicted = freed + pending.len() as u32;
        self.stats.evictions += evicted as u64;
        self.stats.blocks_visited += visited as u64;
        for &block in &pending {
            self.commit.mark_block(block);
        }
        pending.clear();
        self.eviction.scratch = pending;
        evicted
    }
}
