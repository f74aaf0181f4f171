//! Back-pressure on writes when the log runs short of space (docs/design.md
//! §6.3: back-pressure, not cliffs). Without it, writes go on at full speed until
//! the log's write reserve is reached, then go unlogged, and the next flush
//! waits for every unlogged block to be logged or written back — seconds on
//! an HDD RAID. With it, once free log space falls below the low mark, new
//! write-back writes are admitted at the rate the log frees space, scaled by
//! how short it is, after Linux's `balance_dirty_pages` (a task's rate limit
//! is the device's measured write-back bandwidth times a position ratio that
//! falls as dirty pages pass their set point):
//!
//! - shortage `s` = 0 at the low mark, 1 at the write reserve;
//! - admitted blocks/s = freed blocks/s (net of the blocks moved to the
//!   tail) x 4(1 - s), at least 1/16 of it, so
//!   free space settles three quarters of the way down when writes outrun
//!   reclamation (a slope of 2, settling halfway, left fileserver's flush
//!   p99 at 388 ms in the simulator's steady state, against 48 ms);
//! - admissions are never more than `DELAY_MAX_NS` apart: where the log
//!   frees nothing (a failing backing device, say) writes still go on, one
//!   block per 20 ms at the slowest (and unlogged past the reserve, as
//!   before the throttle existed), instead of hanging.

use super::Engine;
use crate::io::Nanos;
use crate::hdd_log::OpenFor;

/// Longest gap between two admissions.
pub(super) const DELAY_MAX_NS: Nanos = 20_000_000;

/// Freed-space rate measurements: a window closes once it has seen
/// `WINDOW_BLOCKS` freed or lasted `WINDOW_NS_MAX` (the log frees whole
/// segments, so shorter windows would read mostly 0 and now and then a
/// segment's worth), and at the earliest after `WINDOW_NS_MIN`.
const WINDOW_NS_MIN: Nanos = 10_000_000;
const WINDOW_NS_MAX: Nanos = 1_000_000_000;
const WINDOW_BLOCKS: u64 = 4096;

/// Admission as a share of the freed rate falls linearly with the
/// shortage, from this at the low mark to 0 at the reserve: the rates meet
/// at shortage 1 - 1/slope, where free space settles when writes outrun
/// reclamation.
const RATE_SHARE_SLOPE: f64 = 4.0;

/// The slowest admission, as a share of the freed rate (at the reserve).
const RATE_SHARE_MIN: f64 = 1.0 / 16.0;

#[derive(Debug, Default)]
pub(super) struct LogThrottle {
    /// Log blocks freed per second, smoothed over windows.
    freed_per_s: f64,
    window_start_ns: Nanos,
    /// Blocks freed (cumulative, as the caller counts them) at the window's start.
    window_freed_start: u64,
    /// The earliest time the next throttled block may start.
    next_admit_ns: Nanos,
}

impl LogThrottle {
    /// Takes the cumulative count of log blocks freed; call on every input.
    pub fn observe(&mut self, now: Nanos, freed_total: u64) {
        if self.window_start_ns == 0 || freed_total < self.window_freed_start {
            self.window_start_ns = now.max(1);
            self.window_freed_start = freed_total;
            return;
        }
        let elapsed = now.saturating_sub(self.window_start_ns);
        let freed = freed_total - self.window_freed_start;
        if elapsed < WINDOW_NS_MIN || (freed < WINDOW_BLOCKS && elapsed < WINDOW_NS_MAX) {
            return;
        }
        let sample = freed as f64 * 1e9 / elapsed as f64;
        self.freed_per_s = if self.freed_per_s == 0.0 { sample } else { 0.75 * self.freed_per_s + 0.25 * sample };
        self.window_start_ns = now;
        self.window_freed_start = freed_total;
    }

    /// Whether a write block may start now, given the shortage (0: none, 1:
    /// at the reserve); if so, it is counted against the admitted rate.
    pub fn admit(&mut self, now: Nanos, shortage: f64) -> bool {
        if shortage <= 0.0 {
            self.next_admit_ns = 0;
            return true;
        }
        if self.next_admit_ns > now {
            return false;
        }
        let share = (RATE_SHARE_SLOPE * (1.0 - shortage.min(1.0))).max(RATE_SHARE_MIN);
        let rate = self.freed_per_s * share;
        // No measured rate (nothing freed yet): the bound on waiting decides.
        let interval = if rate > 0.0 { (1e9 / rate) as Nanos } else { DELAY_MAX_NS };
        let start = if self.next_admit_ns == 0 { now } else { self.next_admit_ns.max(now.saturating_sub(interval)) };
        self.next_admit_ns = (start + interval).min(now + DELAY_MAX_NS);
        true
    }

    /// When a write refused now may start: for the driver's timer.
    pub fn next_admit_ns(&self) -> Option<Nanos> {
        (self.next_admit_ns != 0).then_some(self.next_admit_ns)
    }

    pub fn freed_per_s(&self) -> f64 {
        self.freed_per_s
    }
}

impl Engine {
    /// How short of space the log is for new writes (the log active): 0
    /// above the low mark, 1 at the write reserve.
    pub(super) fn log_shortage(&self) -> f64 {
        let low = self.log_low_free_segments();
        let reserve = OpenFor::Write.min_free();
        let free = self.log.segments_free();
        if free >= low || low <= reserve {
            return 0.0;
        }
        (low - free) as f64 / (low - reserve) as f64
    }

    /// Feeds the throttle the log space freed so far; on every input. The
    /// head in memory, not the durable one: that one moves only with a
    /// superblock write, in bursts.
    pub(super) fn observe_log_space(&mut self) {
        // Net of the slots blocks read back from the cache take (moves and
        // blocks that missed the log): a head that advances only because
        // its live blocks were moved to the tail frees nothing for writes.
        let freed = (self.log.head_sequence * self.log.slots() as u64).saturating_sub(self.stats.log_blocks_from_cache);
        self.throttle.observe(self.now, freed);
    }

    /// The log's shortage if a logged block write may start now, None if
    /// the throttle holds it back (`try_start_block_write` asks before
    /// taking a block and hands the shortage to `log_write_admitted`).
    pub(super) fn log_write_shortage(&self) -> Option<f64> {
        let shortage = self.log_shortage();
        let admissible = shortage <= 0.0 || self.throttle.next_admit_ns().is_none_or(|at| at <= self.now);
        admissible.then_some(shortage)
    }

    pub(super) fn log_write_admitted(&mut self, shortage: f64) {
        let admitted = self.throttle.admit(self.now, shortage);
        debug_assert!(admitted, "a write started that the throttle held back");
        if shortage > 0.0 {
            self.stats.writes_throttled += 1;
        }
    }

    /// When a write held back by the throttle may start, if one is.
    pub(super) fn throttle_timeout(&self) -> Option<Nanos> {
        self.throttle.next_admit_ns().filter(|&at| at > self.now && !self.waiting.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    /// A throttle that has seen `per_s` blocks freed per second for a while.
    fn measured(per_s: u64) -> (LogThrottle, Nanos) {
        let mut t = LogThrottle::default();
        let mut now = MS;
        t.observe(now, 0);
        for _ in 0..20 {
            now += WINDOW_NS_MAX;
            t.observe(now, per_s * (now - MS) / 1_000_000_000);
        }
        (t, now)
    }

    /// Blocks admitted over one second when a writer asks every `step`.
    fn admitted_in_a_second(t: &mut LogThrottle, mut now: Nanos, shortage: f64, step: Nanos) -> u64 {
        let end = now + 1_000 * MS;
        let mut admitted = 0;
        while now < end {
            if t.admit(now, shortage) {
                admitted += 1;
            }
            now += step;
        }
        admitted
    }

    #[test]
    fn no_shortage_admits_everything() {
        let (mut t, now) = measured(1_000);
        assert_eq!(admitted_in_a_second(&mut t, now, 0.0, 10_000), 100_000);
    }

    #[test]
    fn the_admitted_rate_falls_with_the_shortage() {
        let mut rates = Vec::new();
        for shortage in [0.1, 0.5, 0.9, 1.0] {
            let (mut t, now) = measured(10_000);
            rates.push(admitted_in_a_second(&mut t, now, shortage, 1_000));
        }
        // slope x (1 - s) x 10,000/s, at least 1/16 of it.
        let expected = [0.9, 0.5, 0.1, 0.0].map(|left: f64| (RATE_SHARE_SLOPE * left).max(RATE_SHARE_MIN) * 10_000.0);
        for (rate, expected) in rates.iter().zip(expected) {
            assert!((*rate as f64 - expected).abs() < expected * 0.02, "{rates:?}");
        }
        assert!(rates.windows(2).all(|w| w[0] > w[1]), "{rates:?}");
    }

    #[test]
    fn nothing_freed_still_admits_one_block_per_longest_wait() {
        let mut t = LogThrottle::default();
        let admitted = admitted_in_a_second(&mut t, MS, 1.0, 100_000);
        assert_eq!(admitted, 1_000 * MS / DELAY_MAX_NS);
    }

    #[test]
    fn the_rate_follows_what_the_log_frees() {
        let (slow, _) = measured(1_000);
        let (fast, _) = measured(100_000);
        assert!((slow.freed_per_s() - 1_000.0).abs() < 50.0, "{}", slow.freed_per_s());
        assert!((fast.freed_per_s() - 100_000.0).abs() < 5_000.0, "{}", fast.freed_per_s());
    }

    #[test]
    fn a_wait_never_exceeds_the_bound() {
        let (mut t, mut now) = measured(10);
        for _ in 0..100 {
            assert!(t.admit(now, 1.0) || t.next_admit_ns().unwrap() <= now + DELAY_MAX_NS);
            now += MS;
        }
    }
}
