//! Gaps after barrier parts on a rotating log (docs/engine.md, "Barrier
//! gaps"; figures in docs/results.md).
//!
//! Parts are packed back to back. A host that has one barrier out at a time
//! (a journal commits one transaction after the other) sends the next FLUSH
//! only after the previous barrier part was written, its flush completed
//! and the next commit's blocks were written; by then the head of a
//! rotating log has passed the block right after that part, and the next
//! part waits almost a whole revolution (8.3 ms at 7,200 rpm) for it. A gap
//! of `Config::barrier_gap_bytes` left unwritten after a barrier part puts
//! the next part where the head arrives a little after the host comes back.
//!
//! A gap costs its log space on every barrier, and the engine reads no
//! clock and knows no geometry, so it decides from what it sees of the
//! barrier parts that directly follow a barrier part (in the same segment):
//! - how long they take from sealing to durable, packed (no gap before
//!   them) and after a gap, each smoothed;
//! - how soon after its predecessor became durable each was sealed (the
//!   host's turnaround).
//!
//! A gap is left only when packed parts wait at least `GAP_WORTH_NS` (a RAM
//! or SSD log writes a part far faster, so it never pays for a gap), the
//! host comes back sooner than a packed part waits (barriers that come
//! seldom find the head anywhere, and a gap saves nothing on average), and
//! parts after a gap have not been seen to wait nearly as long as packed
//! ones (a turnaround longer than the gap covers). One decision in
//! `GAP_PROBE_EVERY` goes the other way, so that both waits stay measured
//! as the device or the host changes.

use crate::io::Nanos;
use crate::hdd_log::LogPoint;

/// Least smoothed wait of a packed barrier part for which a gap is tried:
/// far above a RAM or SSD log's write of a part (tens of microseconds),
/// below what a missed sector costs on a rotating disk (a 15,000 rpm disk
/// turns in 4 ms, a 7,200 rpm one in 8.3 ms).
pub(super) const GAP_WORTH_NS: Nanos = 2_000_000;

/// Every this many decisions one goes against the estimates (a packed
/// barrier part while gaps help, a gap while they do not): a revolution
/// more for 1 barrier in 32, or one gap's log space.
pub(super) const GAP_PROBE_EVERY: u32 = 32;

#[derive(Clone, Copy, Debug)]
struct Sealed {
    point: LogPoint,
    barrier: bool,
    gap_blocks: u32,
}

#[derive(Clone, Copy, Debug)]
struct Timed {
    point: LogPoint,
    sealed_at: Nanos,
    /// Whether it directly followed a barrier part, and after a gap or not.
    after_barrier: Option<bool>,
}

#[derive(Debug, Default)]
pub(super) struct BarrierGaps {
    /// Smoothed sealing-to-durable time of barrier parts right after a
    /// barrier part: packed, and after a gap.
    packed_wait_ns: Option<Nanos>,
    gapped_wait_ns: Option<Nanos>,
    /// Smoothed time from a barrier part being durable to the next barrier
    /// part right after it being sealed (0 if it came before).
    turnaround_ns: Option<Nanos>,
    last_sealed: Option<Sealed>,
    /// The barrier part being timed (one at a time), and the last one timed
    /// to durable, with when.
    timed: Option<Timed>,
    last_durable: Option<(LogPoint, Nanos)>,
    decisions: u32,
}

impl BarrierGaps {
    /// The blocks to leave after the barrier part being sealed now, at most
    /// `gap_blocks` (the configured gap).
    pub(super) fn gap_after_barrier(&mut self, gap_blocks: u32) -> u32 {
        let (Some(packed), Some(turnaround)) = (self.packed_wait_ns, self.turnaround_ns) else { return 0 };
        if gap_blocks == 0 || packed < GAP_WORTH_NS || turnaround >= packed {
            return 0;
        }
        self.decisions = self.decisions.wrapping_add(1);
        let helps = self.gapped_wait_ns.is_none_or(|gapped| gapped.saturating_mul(4) < packed.saturating_mul(3));
        let probe = self.decisions.is_multiple_of(GAP_PROBE_EVERY);
        if helps != probe {
            gap_blocks
        } else {
            0
        }
    }

    /// A part was sealed at `now` (its point, barrier flag and the gap left
    /// after it).
    pub(super) fn sealed(&mut self, now: Nanos, point: LogPoint, barrier: bool, gap_blocks: u32) {
        let previous = self.last_sealed.replace(Sealed { point, barrier, gap_blocks });
        if !barrier {
            return;
        }
        // Right after a barrier part in the same segment: the case a gap is for.
        let after = previous.filter(|p| p.barrier && p.point + 1 == point);
        if let Some(previous) = after {
            let turnaround = match (self.last_durable, self.timed) {
                (Some((durable, at)), _) if durable == previous.point => Some(now.saturating_sub(at)),
                (_, Some(timed)) if timed.point == previous.point => Some(0),
                _ => None,
            };
            if let Some(turnaround) = turnaround {
                self.turnaround_ns = Some(smooth(self.turnaround_ns, turnaround));
            }
        }
        if self.timed.is_none() {
            self.timed = Some(Timed { point, sealed_at: now, after_barrier: after.map(|p| p.gap_blocks > 0) });
        }
    }

    /// The log's durable barrier is now `durable` (at `now`).
    pub(super) fn durable(&mut self, now: Nanos, durable: Option<LogPoint>) {
        let Some(timed) = self.timed.filter(|t| durable.is_some_and(|d| d >= t.point)) else { return };
        self.timed = None;
        let wait = now.saturating_sub(timed.sealed_at);
        match timed.after_barrier {
            Some(true) => self.gapped_wait_ns = Some(smooth(self.gapped_wait_ns, wait)),
            Some(false) => self.packed_wait_ns = Some(smooth(self.packed_wait_ns, wait)),
            None => {}
        }
        self.last_durable = Some((timed.point, now));
    }

    /// The smoothed waits (packed, after a gap) and turnaround the choice
    /// goes by, for the stats: None until measured.
    pub(super) fn estimates_ns(&self) -> [Option<Nanos>; 3] {
        [self.packed_wait_ns, self.gapped_wait_ns, self.turnaround_ns]
    }

    /// The log started over: its parts so far say nothing of the next ones'
    /// places (the waits and the turnaround still hold).
    pub(super) fn forget_parts(&mut self) {
        self.last_sealed = None;
        self.timed = None;
        self.last_durable = None;
    }
}

/// An exponentially weighted mean, a quarter for the newest sample.
fn smooth(mean: Option<Nanos>, sample: Nanos) -> Nanos {
    mean.map_or(sample, |mean| mean - mean / 4 + sample / 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hdd_log::log_point;

    const MS: Nanos = 1_000_000;

    /// Barrier parts one after another in one segment, each durable `wait`
    /// after it is sealed, the next sealed `turnaround` after that; returns
    /// the gaps chosen.
    fn run(gaps: &mut BarrierGaps, count: u32, wait: impl Fn(bool) -> Nanos, turnaround: Nanos) -> Vec<u32> {
        let mut now = 0;
        let mut chosen = Vec::new();
        for part in 0..count {
            let point = log_point(7, part);
            let gap = gaps.gap_after_barrier(32);
            let after_gap = chosen.last().is_some_and(|&g| g > 0);
            gaps.sealed(now, point, true, gap);
            chosen.push(gap);
            now += wait(after_gap);
            gaps.durable(now, Some(point));
            now += turnaround;
        }
        chosen
    }

    #[test]
    fn a_fast_log_never_gets_a_gap() {
        let mut gaps = BarrierGaps::default();
        let chosen = run(&mut gaps, 200, |_| 50_000, 300_000);
        assert!(chosen.iter().all(|&g| g == 0), "{chosen:?}");
    }

    #[test]
    fn a_rotating_log_with_a_quick_host_gets_gaps_and_probes_the_packed_wait() {
        let mut gaps = BarrierGaps::default();
        // Packed: most of a revolution; after a gap: a fraction of one.
        let chosen = run(&mut gaps, 200, |after_gap| if after_gap { MS } else { 8 * MS }, MS / 2);
        let packed = chosen[10..].iter().filter(|&&g| g == 0).count();
        assert!(chosen[2..].iter().filter(|&&g| g == 32).count() > 150, "{chosen:?}");
        assert!((4..=8).contains(&packed), "one in {GAP_PROBE_EVERY} packed: {packed} of 190");
    }

    /// The stats show the estimates the choice went by.
    #[test]
    fn the_estimates_are_the_waits_and_the_turnaround_seen() {
        let mut gaps = BarrierGaps::default();
        assert_eq!(gaps.estimates_ns(), [None, None, None]);
        run(&mut gaps, 200, |after_gap| if after_gap { MS } else { 8 * MS }, MS / 2);
        let [packed, gapped, turnaround] = gaps.estimates_ns().map(Option::unwrap);
        // Smoothed: the last probe moved the packed wait only part of the way.
        assert!((4 * MS..=8 * MS).contains(&packed) && (MS..2 * MS).contains(&gapped), "{packed} {gapped}");
        assert_eq!(turnaround, MS / 2);
    }

    #[test]
    fn gaps_stop_where_they_do_not_shorten_the_wait() {
        let mut gaps = BarrierGaps::default();
        // The host takes longer than the gap covers: the part after a gap
        // waits as long as a packed one.
        let chosen = run(&mut gaps, 200, |_| 7 * MS, MS / 2);
        let gapped = chosen[20..].iter().filter(|&&g| g > 0).count();
        assert!((4..=8).contains(&gapped), "only probes: {gapped} of 180");
    }

    #[test]
    fn barriers_that_come_seldom_get_no_gap() {
        let mut gaps = BarrierGaps::default();
        let chosen = run(&mut gaps, 200, |_| 5 * MS, 50 * MS);
        assert!(chosen.iter().all(|&g| g == 0), "{chosen:?}");
    }

    #[test]
    fn only_a_barrier_part_right_after_a_barrier_part_is_measured() {
        let mut gaps = BarrierGaps::default();
        // Part 0 of the next segment, and a part after a non-barrier part.
        gaps.sealed(0, log_point(7, 3), true, 0);
        gaps.durable(MS, Some(log_point(7, 3)));
        gaps.sealed(2 * MS, log_point(8, 0), true, 0);
        gaps.durable(10 * MS, Some(log_point(8, 0)));
        gaps.sealed(11 * MS, log_point(8, 1), false, 0);
        gaps.sealed(11 * MS, log_point(8, 2), true, 0);
        gaps.durable(20 * MS, Some(log_point(8, 2)));
        assert_eq!((gaps.packed_wait_ns, gaps.gapped_wait_ns, gaps.turnaround_ns), (None, None, None));
        assert_eq!(gaps.gap_after_barrier(32), 0);
    }
}
