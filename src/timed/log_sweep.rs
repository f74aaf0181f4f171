//! The log-size sweep: fileserver (write-heavy) and varmail (flush-heavy)
//! at the paper's 4 GB cache, `hhc` with a log of 1, 2, 4 and 10 times the
//! cache, next to every other policy (whose figures do not depend on the
//! log), in the steady-state windows so that the log wraps while measured.
//! Its table gives, per log size, `hhc` against `wb`, `wb-flush` and `wt`
//! and what the log's cleaning cost: the live fraction u of what the head
//! passed, the blocks moved per block written next to LFS's u/(1-u), and
//! how busy the log HDD was. It is what the sizing rule (`hhc size`) is
//! checked against.

use super::experiments::{grid_of, Point, PointResult, Settings};
use super::report::{markdown_table, svg_lines};
use super::runner::RunFigures;
use super::workloads::WorkloadKind;
use crate::config::Policy;

pub const LOG_SWEEP: &str = "log-sweep";

/// Log sizes, as multiples of the cache device.
pub const LOG_PER_CACHE: [f64; 4] = [1.0, 2.0, 4.0, 10.0];

const WORKLOADS: [WorkloadKind; 2] = [WorkloadKind::Fileserver, WorkloadKind::Varmail];

pub fn log_sweep_points(settings: &Settings) -> Vec<Point> {
    let mut points = Vec::new();
    for workload in WORKLOADS {
        let at = [(workload.clone(), 4.0, workload.default_threads())];
        let others: Vec<Policy> = settings.policies.iter().copied().filter(|&p| p != Policy::Hhc).collect();
        points.extend(grid_of(LOG_SWEEP, &at, &others));
        if settings.policies.contains(&Policy::Hhc) {
            for log_per_cache in LOG_PER_CACHE {
                points.extend(grid_of(LOG_SWEEP, &at, &[Policy::Hhc]).into_iter().map(|p| Point { log_per_cache, ..p }));
            }
        }
    }
    points
}

/// What a point of the sweep cost the log, from the engine's counters over
/// the measured window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cleaning {
    /// Live entries found in the segments reclamation took, over the data
    /// slots the log was given.
    pub live_fraction: f64,
    /// Entries reclamation moved per block written: per write block the
    /// log took, whether copied on the write path or read back from the
    /// cache device after it missed its copy (the pool of log buffers was
    /// busy, say). Both sides count data slots, as u does.
    pub moved_per_written: f64,
}

impl Cleaning {
    pub fn of(figures: &RunFigures) -> Cleaning {
        // Every data slot the log took, copied on the write path or read
        // from the cache device; in steady state the head passes as many.
        // (Header blocks and barrier gaps hold no entry to move.)
        let slots = figures.counter("log_blocks_copied") + figures.counter("log_blocks_from_cache");
        let live_fraction = figures.counter("log_reclaim_live_entries") as f64 / slots.max(1) as f64;
        let moved = figures.counter("log_blocks_relogged");
        let written = slots.saturating_sub(moved);
        let moved_per_written = moved as f64 / written.max(1) as f64;
        Cleaning { live_fraction, moved_per_written }
    }

    /// LFS's cost of cleaning at this live fraction: u/(1-u) blocks moved
    /// per block written.
    pub fn lfs_cost(&self) -> f64 {
        self.live_fraction / (1.0 - self.live_fraction).max(1e-9)
    }
}

fn iops(results: &[PointResult], workload: &str, policy: Policy) -> f64 {
    results
        .iter()
        .find(|r| r.point.workload.name() == workload && r.point.policy == policy)
        .map(PointResult::iops)
        .unwrap_or(f64::NAN)
}

fn hhc_at<'a>(results: &'a [PointResult], workload: &str, log_per_cache: f64) -> Option<&'a PointResult> {
    results.iter().find(|r| r.point.workload.name() == workload && r.point.policy == Policy::Hhc && r.point.log_per_cache == log_per_cache)
}

const HEADERS: [&str; 12] = [
    "workload",
    "log / cache",
    "hhc IOPS",
    "hhc / wb",
    "hhc / wb-flush",
    "hhc / wt",
    "log wraps",
    "u (live, cleaned)",
    "moved / written",
    "u/(1-u)",
    "log disk busy %",
    "writes throttled",
];

pub fn table(results: &[PointResult]) -> String {
    let mut rows = Vec::new();
    for workload in WORKLOADS.map(|w| w.name()) {
        let (wb, wb_flush, wt) = (iops(results, workload, Policy::WriteBack), iops(results, workload, Policy::WriteBackFlush), iops(results, workload, Policy::WriteThrough));
        for log_per_cache in LOG_PER_CACHE {
            let Some(result) = hhc_at(results, workload, log_per_cache) else { continue };
            let mut row = vec![workload.to_string(), format!("{log_per_cache}x")];
            match &result.figures {
                Ok(f) => {
                    let cleaning = Cleaning::of(f);
                    let hhc = f.iops();
                    row.extend([
                        format!("{hhc:.0}"),
                        format!("{:.2}", hhc / wb),
                        format!("{:.2}", hhc / wb_flush),
                        format!("{:.2}", hhc / wt),
                        format!("{:.1}", f.log_wraps()),
                        format!("{:.3}", cleaning.live_fraction),
                        format!("{:.3}", cleaning.moved_per_written),
                        format!("{:.3}", cleaning.lfs_cost()),
                        format!("{:.0}", 100.0 * f.log_disk_busy_fraction),
                        f.counter("writes_throttled").to_string(),
                    ]);
                }
                Err(message) => row.push(format!("FAILED: {message}")),
            }
            rows.push(row);
        }
    }
    let others: Vec<String> = WORKLOADS
        .map(|w| w.name())
        .iter()
        .map(|w| {
            let policies = [Policy::Passthrough, Policy::WriteThrough, Policy::WriteBack, Policy::WriteBackFlush, Policy::WriteBackOrdered];
            let listed: Vec<String> = policies.iter().map(|&p| format!("{} {:.0}", super::figures::paper_name(p), iops(results, w, p))).collect();
            format!("{w}: {}", listed.join(", "))
        })
        .collect();
    format!(
        "{}\nThe other policies do not use the log (IOPS): {}.\n",
        markdown_table(&HEADERS, &rows),
        others.join("; ")
    )
}

/// `hhc` against `wb` and `wb-flush` by log size, one line per workload.
pub fn svg(results: &[PointResult], settings: &Settings) -> String {
    let mut series = Vec::new();
    for workload in WORKLOADS.map(|w| w.name()) {
        for (name, policy) in [("wb", Policy::WriteBack), ("wb-flush", Policy::WriteBackFlush)] {
            let base = iops(results, workload, policy);
            let values = LOG_PER_CACHE.iter().map(|&l| hhc_at(results, workload, l).map_or(f64::NAN, |r| r.iops() / base)).collect();
            series.push((format!("{workload}: hhc / {name}"), values));
        }
    }
    let title = format!("hhc against wb and wb-flush by log size (steady state, scale {})", settings.scale);
    svg_lines(&title, "log size / cache size", "IOPS ratio", &LOG_PER_CACHE, &series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hhc_runs_at_every_log_size_and_the_others_once() {
        let settings = Settings::default();
        let points = log_sweep_points(&settings);
        for workload in WORKLOADS.map(|w| w.name()) {
            let hhc: Vec<f64> = points.iter().filter(|p| p.workload.name() == workload && p.policy == Policy::Hhc).map(|p| p.log_per_cache).collect();
            assert_eq!(hhc, LOG_PER_CACHE.to_vec());
            let others = points.iter().filter(|p| p.workload.name() == workload && p.policy != Policy::Hhc).count();
            assert_eq!(others, Policy::ALL.len() - 1);
        }
    }

    /// fileserver at a log the cache's size: about half the write blocks
    /// missed their copy (the pool of log buffers was busy) and were read
    /// back from the cache device. They are written blocks, as the copied
    /// ones are: counted against copies alone, moves looked twice as dear
    /// as the live fraction says.
    #[test]
    fn moves_count_against_every_write_block_the_log_took() {
        let counters = [
            ("log_blocks_copied", 69_122),
            ("log_blocks_from_cache", 362_574),
            ("log_blocks_relogged", 301_999),
            ("log_reclaim_live_entries", 304_809),
        ];
        let figures = RunFigures { target_counters: counters.to_vec(), ..RunFigures::default() };
        let cleaning = Cleaning::of(&figures);
        assert!((cleaning.live_fraction - 0.706).abs() < 0.001, "{cleaning:?}");
        assert!((cleaning.moved_per_written - 2.328).abs() < 0.001, "{cleaning:?}");
        assert!((cleaning.moved_per_written / cleaning.lfs_cost() - 1.0).abs() < 0.05, "{cleaning:?}");
    }

    #[test]
    fn a_log_per_cache_sizes_the_log_device_from_the_cache() {
        let settings = Settings { scale: 0.01, ..Settings::default() };
        let point = log_sweep_points(&settings).into_iter().find(|p| p.policy == Policy::Hhc && p.log_per_cache == 4.0).unwrap();
        let config = super::super::experiments::engine_config(&point, &settings, 1 << 20);
        let (_, log) = config.validate().unwrap();
        let segments_expected = config.cache_device_bytes * 4 / config.segment_bytes as u64;
        assert_eq!(log.segments_count as u64, segments_expected);
    }
}
