//! How many write-backs may be in flight while requests arrive: as many as
//! the backing device takes without making the requests that need it (read
//! misses) wait behind them — found from what that device completes, not
//! from constants for one class of device.
//!
//! The rule follows Linux's write-back throttling (blk-wbt): read latency is
//! the signal. A read miss that took more than twice the fastest recent
//! one, while write-backs were in flight, halves the depth; one that did not
//! adds one; and a stretch of write-backs with no read miss at all doubles
//! it, so a write-only workload soon runs at full depth. On a RAID of HDDs
//! a read queued behind even a few small writes takes several times its
//! own service time, and the depth settles near one; on RAM or flash the
//! latency of a read hardly depends on what else is queued, and write-back
//! keeps its full depth. Idle time, flushes and a cache with no free block
//! are not paced (writeback.rs).

use crate::io::Nanos;

/// Read misses after which the oldest half of the latency baseline is
/// forgotten: the baseline is the fastest read of the last one or two such
/// windows, so it follows a device that became slower (or faster).
const BASELINE_WINDOW_READS: u32 = 256;

/// A read counts as held up when it took more than this many times the
/// baseline.
const HELD_UP_FACTOR: u64 = 2;

/// Write-backs completed with no read miss in between after which the
/// depth doubles (at least this many, or the depth itself).
const QUIET_WRITEBACKS: u32 = 64;

pub(super) struct WritebackPacer {
    full: u32,
    depth: u32,
    baseline_now: Nanos,
    baseline_before: Nanos,
    window_reads: u32,
    writebacks_since_read: u32,
    /// A halving happened and no write-back has completed since: reads
    /// queued together behind the same write-backs halve once, not each.
    halved_since_writeback: bool,
    halvings: u64,
}

impl WritebackPacer {
    pub fn new(full: u32) -> Self {
        let full = full.max(1);
        WritebackPacer {
            full,
            depth: full,
            baseline_now: Nanos::MAX,
            baseline_before: Nanos::MAX,
            window_reads: 0,
            writebacks_since_read: 0,
            halved_since_writeback: false,
            halvings: 0,
        }
    }

    /// A new maximum depth (an operator's `writeback_parallelism`).
    pub fn set_full(&mut self, full: u32) {
        self.full = full.max(1);
        self.depth = self.depth.min(self.full);
    }

    /// Write-backs allowed in flight while requests arrive.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Times the depth was halved since the start (a counter for the stats).
    pub fn halvings(&self) -> u64 {
        self.halvings
    }

    fn baseline(&self) -> Nanos {
        self.baseline_now.min(self.baseline_before)
    }

    /// A read miss on the backing device completed after `latency`, with
    /// `writebacks_in_flight` write-backs in flight.
    pub fn read_miss_done(&mut self, latency: Nanos, writebacks_in_flight: u32) {
        self.writebacks_since_read = 0;
        let held_up = self.baseline() != Nanos::MAX && latency > self.baseline().saturating_mul(HELD_UP_FACTOR);
        self.baseline_now = self.baseline_now.min(latency);
        self.window_reads += 1;
        if self.window_reads == BASELINE_WINDOW_READS {
            self.baseline_before = self.baseline_now;
            self.baseline_now = Nanos::MAX;
            self.window_reads = 0;
        }
        if held_up && writebacks_in_flight > 0 {
            if !self.halved_since_writeback {
                self.depth = (self.depth / 2).max(1);
                self.halved_since_writeback = true;
                self.halvings += 1;
            }
        } else if !held_up {
            self.depth = (self.depth + 1).min(self.full);
        }
    }

    /// A write-back's backing write completed.
    pub fn writeback_done(&mut self) {
        self.halved_since_writeback = false;
        self.writebacks_since_read += 1;
        if self.writebacks_since_read >= QUIET_WRITEBACKS.max(self.depth) {
            self.writebacks_since_read = 0;
            self.depth = self.depth.saturating_mul(2).min(self.full);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_held_up_behind_write_backs_bring_the_depth_down_to_one() {
        let mut pacer = WritebackPacer::new(64);
        pacer.read_miss_done(8_000_000, 0);
        for _ in 0..10 {
            pacer.read_miss_done(40_000_000, 5);
            pacer.writeback_done();
        }
        assert_eq!(pacer.depth(), 1);
        assert!(pacer.halvings() >= 6);
    }

    #[test]
    fn reads_that_are_not_held_up_keep_or_restore_the_depth() {
        let mut pacer = WritebackPacer::new(64);
        for _ in 0..1000 {
            // RAM-like: latency varies a little whatever is in flight.
            pacer.read_miss_done(3_000 + pacer.depth() as u64 * 10, pacer.depth());
            pacer.writeback_done();
        }
        assert_eq!(pacer.depth(), 64);
    }

    #[test]
    fn a_burst_of_held_up_reads_halves_once_per_write_back() {
        let mut pacer = WritebackPacer::new(64);
        pacer.read_miss_done(1_000, 0);
        for _ in 0..20 {
            pacer.read_miss_done(50_000, 8);
        }
        assert_eq!(pacer.depth(), 32);
        pacer.writeback_done();
        pacer.read_miss_done(50_000, 8);
        assert_eq!(pacer.depth(), 16);
    }

    #[test]
    fn write_backs_with_no_read_miss_double_the_depth_back_to_full() {
        let mut pacer = WritebackPacer::new(64);
        pacer.read_miss_done(1_000, 0);
        for _ in 0..10 {
            pacer.read_miss_done(50_000, 8);
            pacer.writeback_done();
        }
        assert_eq!(pacer.depth(), 1);
        for _ in 0..(QUIET_WRITEBACKS * 7) {
            pacer.writeback_done();
        }
        assert_eq!(pacer.depth(), 64);
    }

    #[test]
    fn held_up_reads_with_nothing_in_flight_do_not_lower_the_depth() {
        let mut pacer = WritebackPacer::new(16);
        pacer.read_miss_done(1_000, 0);
        for _ in 0..50 {
            pacer.read_miss_done(90_000, 0);
        }
        assert_eq!(pacer.depth(), 16);
    }

    #[test]
    fn the_baseline_follows_a_device_that_became_slower() {
        let mut pacer = WritebackPacer::new(64);
        pacer.read_miss_done(1_000, 0);
        // The device is now ten times slower, reads all alike: after at
        // most two baseline windows they no longer count as held up.
        for _ in 0..(2 * BASELINE_WINDOW_READS) {
            pacer.read_miss_done(10_000, 4);
            pacer.writeback_done();
        }
        let depth = pacer.depth();
        for _ in 0..100 {
            pacer.read_miss_done(10_000, 4);
        }
        assert_eq!(pacer.depth(), (depth + 100).min(64));
    }
}
