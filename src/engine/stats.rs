//! Counters and the memory report.

/// Running counters; gauges are filled in by `Engine::stats`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub read_hits: u64,
    pub read_misses: u64,
    pub fills: u64,
    pub writebacks: u64,
    pub writeback_errors: u64,
    pub revokes: u64,
    pub log_blocks_copied: u64,
    pub log_blocks_from_cache: u64,
    /// Segments the log has moved into (a segment holds many parts).
    pub log_segments_written: u64,
    /// Parts sealed and written: one per barrier, or per filled segment.
    pub log_parts_written: u64,
    pub log_bytes_written: u64,
    /// Segments whose live entries reclamation moved (re-logged or
    /// written back) so that the head could pass them.
    pub log_segments_reclaimed: u64,
    /// Block writes that waited (for a free cache block) with the pool that
    /// holds their data for the log copy full (engine/held.rs): each is
    /// logged later from the cache device instead.
    pub writes_waited_unheld: u64,
    pub superblock_writes: u64,
    pub commits: u64,
    pub meta_pages_written: u64,
    pub evictions: u64,
    pub device_errors: u64,
    pub request_errors: u64,
    pub flush_fallbacks: u64,
    pub mirror_failures: u64,
    /// Cache blocks visited by background scans and commit encoding: engine
    /// work that grows with the cache rather than with requests (drivers
    /// that model CPU time charge it).
    pub blocks_visited: u64,
    // gauges
    pub dirty_blocks: u64,
    pub unlogged_dirty_blocks: u64,
    pub free_blocks: u64,
    pub cache_blocks: u64,
    pub log_segments_in_use: u64,
    pub log_segments_total: u64,
    /// Times the log has gone all the way round its segments.
    pub log_wraps: u64,
    pub log_live_entries: u64,
    pub healthy_mirrors: u64,
    /// Request blocks waiting to start (a free block, a busy block, a
    /// write-through's backing write): back-pressure shows here first.
    pub waiting_blocks: u64,
    /// Write-backs allowed in flight while requests arrive, and how often
    /// read misses held up behind write-backs halved it (engine/pacing.rs).
    pub writeback_depth: u64,
    pub writeback_depth_halvings: u64,
}

/// Engine memory, measured from its structures (DESIGN.md §1: the paper's
/// figure is ~20 B per cache block + ~10 B per live log entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryReport {
    pub cache_blocks: u64,
    /// Block table, LBA map, superseded-block set.
    pub cache_index_bytes: u64,
    pub log_live_entries: u64,
    /// Per-segment and per-buffer bookkeeping (live entries cost nothing
    /// extra: their location is a field of the cache block).
    pub log_bookkeeping_bytes: u64,
    pub commit_bookkeeping_bytes: u64,
    /// Log segment buffers, write-back staging, metadata page pool.
    pub io_buffer_bytes: u64,
}

impl MemoryReport {
    pub fn index_bytes_per_block(&self) -> f64 {
        (self.cache_index_bytes + self.log_bookkeeping_bytes + self.commit_bookkeeping_bytes) as f64
            / self.cache_blocks.max(1) as f64
    }
}
