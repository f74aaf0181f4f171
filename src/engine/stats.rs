//! Counters and the memory report, and how the engine fills them in.

use super::{writeback, Engine, META_POOL_PAGES};
use crate::format::UNIT_BYTES;

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
    /// Log blocks left unwritten after barrier parts, so that the next part
    /// lands ahead of a rotating log's head (engine/gap.rs).
    pub log_gap_blocks: u64,
    pub log_bytes_written: u64,
    /// Segments whose live entries reclamation moved (re-logged or
    /// written back) so that the head could pass them.
    pub log_segments_reclaimed: u64,
    /// Live entries those segments held when reclamation took them: over
    /// the data slots the log was given (`log_blocks_copied` +
    /// `log_blocks_from_cache`), the live fraction u of what was cleaned (a
    /// segment found dead costs nothing).
    pub log_reclaim_live_entries: u64,
    /// Entries reclamation moved to the log's tail (read back from the
    /// cache device; also counted in `log_blocks_from_cache`): the cleaning
    /// cost that LFS puts at u/(1-u), against the write blocks the log took
    /// (`log_blocks_copied` + `log_blocks_from_cache` - `log_blocks_relogged`:
    /// blocks that missed their copy are logged from the cache device).
    pub log_blocks_relogged: u64,
    /// Block writes that waited (for a free cache block) with the pool that
    /// holds their data for the log copy full (engine/held.rs): each is
    /// logged later from the cache device instead.
    pub writes_waited_unheld: u64,
    /// Write blocks admitted at the log's back-pressure rate, while the log
    /// was short of space (engine/throttle.rs).
    pub writes_throttled: u64,
    /// LBAs whose new writes waited for a flush's write-back of them: the
    /// LBA was rewritten faster than commits completed (engine/starved.rs).
    pub writeback_starved_lbas: u64,
    pub superblock_writes: u64,
    pub commits: u64,
    pub meta_pages_written: u64,
    pub evictions: u64,
    pub device_errors: u64,
    pub request_errors: u64,
    /// Requests sent back because the engine held as many as it was sized
    /// for (`Config::requests_max`, `request_blocks_max`).
    pub requests_busy: u64,
    pub flush_fallbacks: u64,
    pub mirror_failures: u64,
    /// Mirrors a warm start found stale (present, but outside the newest
    /// log superblock's in-sync mask) and re-synced.
    pub stale_mirrors_resynced: u64,
    /// Cache blocks visited by background scans, eviction and commit
    /// encoding: engine work that grows with the cache rather than with
    /// requests (drivers that model CPU time charge it).
    pub blocks_visited: u64,
    /// Requests of streams the sequential cutoff sent past the cache: reads
    /// whose misses were not filled, writes that went to the backing device
    /// alone, and cut-off writes that went through the cache all the same
    /// because a block of theirs was dirty, logged or busy (engine/cutoff.rs).
    pub cutoff_reads: u64,
    pub cutoff_writes: u64,
    pub cutoff_writes_cached: u64,
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
    /// Log blocks freed per second (smoothed), the rate writes are
    /// admitted at while the log is short of space.
    pub log_freed_blocks_per_s: u64,
    /// How short of free segments the log is, percent: 0 above its low
    /// mark, 100 at (or past) the reserve new writes may not take. Above 0 block
    /// writes are paced to what the log frees (throttle.rs): held there
    /// under a steady load, the log is too small for it (`hhc size`).
    pub log_shortage_percent: u64,
    /// The options in force (`Engine::set_options`): the sequential cutoff's
    /// threshold and policy (`CutoffPolicy::code`: 0 never, 1 full, 2
    /// always), the dirty threshold and the write-back depth's maximum.
    pub seq_cutoff_threshold_bytes: u64,
    pub seq_cutoff_policy: u64,
    pub dirty_threshold_percent: u64,
    pub writeback_parallelism: u64,
    /// What the barrier-gap choice (engine/gap.rs) goes by, smoothed, in
    /// microseconds (0 until measured): a barrier part's wait from sealed to
    /// durable right after a packed barrier part and right after a gap, and
    /// the host's turnaround from a barrier part durable to the next sealed.
    pub gap_packed_wait_us: u64,
    pub gap_gapped_wait_us: u64,
    pub gap_turnaround_us: u64,
}

impl Stats {
    /// The running totals by name (`log_wraps` among them: it only grows):
    /// with `gauges`, the one list of names every report uses (the CLI, the
    /// timed simulator, the SPDK info JSON).
    pub fn counters(&self) -> [(&'static str, u64); 37] {
        [
            ("reads", self.reads),
            ("writes", self.writes),
            ("flushes", self.flushes),
            ("read_hits", self.read_hits),
            ("read_misses", self.read_misses),
            ("fills", self.fills),
            ("writebacks", self.writebacks),
            ("writeback_errors", self.writeback_errors),
            ("revokes", self.revokes),
            ("log_blocks_copied", self.log_blocks_copied),
            ("log_blocks_from_cache", self.log_blocks_from_cache),
            ("log_segments_written", self.log_segments_written),
            ("log_parts_written", self.log_parts_written),
            ("log_gap_blocks", self.log_gap_blocks),
            ("log_bytes_written", self.log_bytes_written),
            ("log_segments_reclaimed", self.log_segments_reclaimed),
            ("log_reclaim_live_entries", self.log_reclaim_live_entries),
            ("log_blocks_relogged", self.log_blocks_relogged),
            ("writes_waited_unheld", self.writes_waited_unheld),
            ("writes_throttled", self.writes_throttled),
            ("writeback_starved_lbas", self.writeback_starved_lbas),
            ("superblock_writes", self.superblock_writes),
            ("commits", self.commits),
            ("meta_pages_written", self.meta_pages_written),
            ("evictions", self.evictions),
            ("device_errors", self.device_errors),
            ("request_errors", self.request_errors),
            ("requests_busy", self.requests_busy),
            ("flush_fallbacks", self.flush_fallbacks),
            ("mirror_failures", self.mirror_failures),
            ("stale_mirrors_resynced", self.stale_mirrors_resynced),
            ("blocks_visited", self.blocks_visited),
            ("log_wraps", self.log_wraps),
            ("writeback_depth_halvings", self.writeback_depth_halvings),
            ("cutoff_reads", self.cutoff_reads),
            ("cutoff_writes", self.cutoff_writes),
            ("cutoff_writes_cached", self.cutoff_writes_cached),
        ]
    }

    /// The gauges (values now, not running totals) by name.
    pub fn gauges(&self) -> [(&'static str, u64); 19] {
        [
            ("dirty_blocks", self.dirty_blocks),
            ("unlogged_dirty_blocks", self.unlogged_dirty_blocks),
            ("free_blocks", self.free_blocks),
            ("cache_blocks", self.cache_blocks),
            ("log_segments_in_use", self.log_segments_in_use),
            ("log_segments_total", self.log_segments_total),
            ("log_live_entries", self.log_live_entries),
            ("healthy_mirrors", self.healthy_mirrors),
            ("waiting_blocks", self.waiting_blocks),
            ("writeback_depth", self.writeback_depth),
            ("log_freed_blocks_per_s", self.log_freed_blocks_per_s),
            ("log_shortage_percent", self.log_shortage_percent),
            ("seq_cutoff_threshold_bytes", self.seq_cutoff_threshold_bytes),
            ("seq_cutoff_policy", self.seq_cutoff_policy),
            ("dirty_threshold_percent", self.dirty_threshold_percent),
            ("writeback_parallelism", self.writeback_parallelism),
            ("gap_packed_wait_us", self.gap_packed_wait_us),
            ("gap_gapped_wait_us", self.gap_gapped_wait_us),
            ("gap_turnaround_us", self.gap_turnaround_us),
        ]
    }

    /// Every field by name: the counters, then the gauges.
    pub fn fields(&self) -> impl Iterator<Item = (&'static str, u64)> {
        self.counters().into_iter().chain(self.gauges())
    }
}

/// Engine memory, measured from its structures (docs/design.md §6.5: the
/// paper's figure is ~20 B per cache block + ~10 B per live log entry).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// Every bookkeeping byte (index, log, commit) per cache block.
    pub fn index_bytes_per_block(&self) -> f64 {
        self.bookkeeping_bytes() as f64 / self.cache_blocks.max(1) as f64
    }

    /// The cache index alone per cache block (the paper's ~20 B).
    pub fn cache_index_bytes_per_block(&self) -> f64 {
        self.cache_index_bytes as f64 / self.cache_blocks.max(1) as f64
    }

    /// Bookkeeping the log adds per live entry (segments, buffers).
    pub fn log_bytes_per_live_entry(&self) -> f64 {
        self.log_bookkeeping_bytes as f64 / self.log_live_entries.max(1) as f64
    }

    /// Bookkeeping as a share of the cache capacity, in percent (4 KiB blocks).
    pub fn percent_of_cache(&self) -> f64 {
        100.0 * self.bookkeeping_bytes() as f64 / (self.cache_blocks.max(1) * 4096) as f64
    }

    fn bookkeeping_bytes(&self) -> u64 {
        self.cache_index_bytes + self.log_bookkeeping_bytes + self.commit_bookkeeping_bytes
    }
}

impl Engine {
    pub fn stats(&self) -> Stats {
        let mut stats = self.stats.clone();
        stats.dirty_blocks = self.cache.dirty_count() as u64;
        stats.unlogged_dirty_blocks = self.cache.unlogged_dirty_count() as u64;
        stats.free_blocks = self.cache.free_count() as u64;
        stats.cache_blocks = self.cache.blocks_count() as u64;
        stats.log_segments_in_use = self.log.segments_in_use();
        stats.log_segments_total = self.log_layout.segments_count as u64;
        stats.log_segments_written = self.log.segments_opened;
        stats.log_wraps = self.log.segments_opened / stats.log_segments_total.max(1);
        stats.log_live_entries = self.log.live_entries;
        stats.healthy_mirrors = self.log.healthy_mirrors().count() as u64;
        stats.waiting_blocks = self.waiting.len() as u64;
        stats.writeback_depth = self.writeback.pacer.depth() as u64;
        stats.log_freed_blocks_per_s = self.throttle.freed_per_s() as u64;
        stats.log_shortage_percent = if self.log_active() { (100.0 * self.log_shortage().min(1.0)).round() as u64 } else { 0 };
        stats.writeback_depth_halvings = self.writeback.pacer.halvings();
        stats.seq_cutoff_threshold_bytes = self.config.seq_cutoff_threshold_bytes;
        stats.seq_cutoff_policy = self.config.seq_cutoff_policy.code();
        stats.dirty_threshold_percent = self.config.dirty_threshold_percent as u64;
        stats.writeback_parallelism = self.config.writeback_parallelism as u64;
        let [packed, gapped, turnaround] = self.log_work.gaps.estimates_ns().map(|ns| ns.unwrap_or(0) / 1000);
        (stats.gap_packed_wait_us, stats.gap_gapped_wait_us, stats.gap_turnaround_us) = (packed, gapped, turnaround);
        stats
    }

    pub fn memory_report(&self) -> MemoryReport {
        MemoryReport {
            cache_blocks: self.cache.blocks_count() as u64,
            cache_index_bytes: self.cache.memory_bytes() as u64,
            log_live_entries: self.log.live_entries,
            log_bookkeeping_bytes: self.log.memory_bytes() as u64,
            commit_bookkeeping_bytes: (self.commit.memory_bytes() + self.ordered.memory_bytes()) as u64,
            io_buffer_bytes: self.io_buffer_bytes(),
        }
    }

    fn io_buffer_bytes(&self) -> u64 {
        let c = &self.config;
        let log = if c.mirrors_count > 0 { (c.log_buffers_count as u64 + 1) * c.segment_bytes as u64 } else { 0 };
        log + self.writeback.extents_count() as u64 * writeback::run_bytes(c) as u64 + (META_POOL_PAGES as u64 + 2) * UNIT_BYTES as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_named_once_and_reports_its_own_value() {
        // Distinct values per field through the names: a name paired with
        // the wrong field, or a field left out, shows as a mismatch.
        let mut stats = Stats::default();
        let names: Vec<&str> = stats.fields().map(|(name, _)| name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a name twice: {names:?}");
        let debug = format!("{stats:?}");
        assert_eq!(debug.matches(": 0").count(), names.len(), "fields() misses a field of {debug}");
        stats.reads = 3;
        stats.waiting_blocks = 5;
        stats.log_wraps = 7;
        let value = |name| stats.fields().find(|(n, _)| *n == name).unwrap().1;
        assert_eq!((value("reads"), value("waiting_blocks"), value("log_wraps")), (3, 5, 7));
        assert!(stats.gauges().iter().any(|(n, _)| *n == "dirty_blocks"));
        assert!(!stats.counters().iter().any(|(n, _)| *n == "dirty_blocks"));
    }
}
