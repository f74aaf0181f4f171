//! How large a log keeps `hhc` near `wb`: the rule `hhc size` applies and
//! docs/tuning.md states.
//!
//! A log entry stays live until its block is written back or written again.
//! Write-back turns the dirty data over in `dirty / write-back rate`
//! seconds, and the log's head comes round every `log / write rate`
//! seconds. When the head comes round sooner than write-back gets through
//! the dirty data, it finds live entries and the log must move them (a cache
//! read and a log slot each, u/(1-u) per block written at live fraction u)
//! or wait for write-back: writes are throttled to what the head frees. So
//! the log should hold at least one turnover's worth of writes:
//!
//!   log >= write rate x dirty / write-back rate   (and never under dirty)
//!
//! plus the eighth the engine keeps free ahead of the head (its low mark).
//! The simulator's log-size sweep bears it out: varmail needs about 2.4x the
//! cache by the rule and runs at 1.15x `wb` with 2x; fileserver needs about
//! 7.7x and runs at 0.79x `wb` with 4x and 1.00x with 10x.
//!
//! Every block written goes to every log mirror, so each log disk must also
//! take the write rate sequentially: past about 85 % of its bandwidth the
//! log disk, not its size, is what caps `hhc` (fileserver at 10x kept the
//! model's 125 MB/s HDD 89 % busy).

/// What an operator knows of the load and the devices.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    pub cache_bytes: f64,
    /// Block writes into the cache, sustained (bytes/s).
    pub write_bytes_s: f64,
    /// What the backing device takes from write-back under that load (bytes/s).
    pub writeback_bytes_s: f64,
    /// The share of the cache that is dirty in steady state.
    pub dirty_fraction: f64,
    /// One log disk's sequential write rate (bytes/s).
    pub log_disk_bytes_s: f64,
}

/// The share of a log the engine keeps free ahead of its head: its low mark
/// (engine/log_io.rs, `log_low_free_segments`) is an eighth.
pub const LOG_HEADROOM_FRACTION: f64 = 1.0 / 8.0;

/// The share of a log disk's sequential rate the log can use for long:
/// parts, their headers and FLUSHes, and a revolution now and then.
pub const LOG_DISK_USABLE_FRACTION: f64 = 0.85;

/// The dirty share a cache settles at when write-back falls behind the
/// writes (fileserver in the simulator: 58-63 % for `wb` and `hhc`).
pub const DIRTY_FRACTION_BEHIND: f64 = 0.6;

impl Load {
    /// The dirty share to assume when none was measured: the dirty
    /// threshold while write-back keeps up, else what a cache settles at.
    pub fn default_dirty_fraction(write_bytes_s: f64, writeback_bytes_s: f64, threshold_percent: f64) -> f64 {
        if write_bytes_s <= writeback_bytes_s {
            threshold_percent / 100.0
        } else {
            DIRTY_FRACTION_BEHIND.max(threshold_percent / 100.0)
        }
    }

    pub fn dirty_bytes(&self) -> f64 {
        self.cache_bytes * self.dirty_fraction
    }

    /// Seconds write-back takes to write the dirty data back once.
    pub fn turnover_s(&self) -> f64 {
        self.dirty_bytes() / self.writeback_bytes_s
    }

    /// The smallest log that holds a turnover's worth of writes, and the
    /// dirty data itself, with the engine's headroom on top.
    pub fn log_bytes_needed(&self) -> f64 {
        let held = (self.write_bytes_s * self.turnover_s()).max(self.dirty_bytes());
        held / (1.0 - LOG_HEADROOM_FRACTION)
    }

    /// Seconds a log of `log_bytes` takes to come round at this write rate
    /// (its headroom left out).
    pub fn lap_s(&self, log_bytes: f64) -> f64 {
        log_bytes * (1.0 - LOG_HEADROOM_FRACTION) / self.write_bytes_s
    }

    /// Whether one log disk carries the writes with room to spare.
    pub fn log_disk_keeps_up(&self) -> bool {
        self.write_bytes_s <= self.log_disk_bytes_s * LOG_DISK_USABLE_FRACTION
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1e6;

    /// The simulator's steady state at scale 0.01 (41 MiB cache), from its
    /// counters: fileserver writes 105 MB/s at wb's pace and writes back
    /// 8.6 MB/s with 25.8 MB dirty; varmail 27 MB/s, 10 MB/s, 36 MB.
    fn fileserver() -> Load {
        Load { cache_bytes: 43.0 * MB, write_bytes_s: 105.0 * MB, writeback_bytes_s: 8.6 * MB, dirty_fraction: 0.6, log_disk_bytes_s: 125.0 * MB }
    }

    fn varmail() -> Load {
        Load { cache_bytes: 43.0 * MB, write_bytes_s: 27.0 * MB, writeback_bytes_s: 10.0 * MB, dirty_fraction: 0.84, log_disk_bytes_s: 125.0 * MB }
    }

    #[test]
    fn the_rule_asks_for_the_log_sizes_the_sweep_found_enough() {
        // Varmail ran at 1.15x wb with a log 2x the cache and 0.40x with 1x;
        // fileserver at 1.00x with 10x and 0.79x with 4x.
        let varmail_x = varmail().log_bytes_needed() / varmail().cache_bytes;
        assert!((1.0..=3.0).contains(&varmail_x), "{varmail_x}");
        let fileserver_x = fileserver().log_bytes_needed() / fileserver().cache_bytes;
        assert!((4.0..=10.0).contains(&fileserver_x), "{fileserver_x}");
    }

    #[test]
    fn a_log_never_holds_less_than_the_dirty_data() {
        let slow = Load { write_bytes_s: 1.0 * MB, ..varmail() };
        assert!(slow.log_bytes_needed() >= slow.dirty_bytes());
    }

    #[test]
    fn the_needed_log_grows_with_the_write_rate_and_shrinks_with_write_back() {
        let base = fileserver();
        let faster = Load { write_bytes_s: 2.0 * base.write_bytes_s, ..base };
        let better_backing = Load { writeback_bytes_s: 2.0 * base.writeback_bytes_s, ..base };
        assert!(faster.log_bytes_needed() > base.log_bytes_needed());
        assert!(better_backing.log_bytes_needed() < base.log_bytes_needed());
    }

    #[test]
    fn a_write_stream_near_the_log_disks_rate_is_flagged() {
        assert!(varmail().log_disk_keeps_up());
        let faster = Load { write_bytes_s: 110.0 * MB, ..fileserver() };
        assert!(fileserver().log_disk_keeps_up(), "105 of 125 MB/s is 84 %");
        assert!(!faster.log_disk_keeps_up(), "110 of 125 MB/s is past 85 %");
    }

    #[test]
    fn the_dirty_share_defaults_to_the_threshold_only_while_write_back_keeps_up() {
        assert_eq!(Load::default_dirty_fraction(5.0, 10.0, 30.0), 0.3);
        assert_eq!(Load::default_dirty_fraction(50.0, 10.0, 30.0), DIRTY_FRACTION_BEHIND);
        assert_eq!(Load::default_dirty_fraction(50.0, 10.0, 80.0), 0.8);
    }
}
