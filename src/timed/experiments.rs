//! The paper's experiments (§3) as lists of simulation points: Fig. 5
//! (policies x workloads, 4 GB cache), Fig. 6 (fileserver, cache 1-3 GB),
//! Fig. 7 (varmail, 2-32 threads), §3.5 (engine memory), plus a user job.
//! Points are independent, so they run on several OS threads; each point is
//! deterministic, so the figures do not depend on the thread count.

use super::profile::Profile;
use super::runner::{KeptAreas, RunFigures, RunSpec, Simulation};
use super::workloads::{Workload, WorkloadKind};
use crate::config::{Config, Policy};
use crate::engine::{MemoryReport, StartMode};
use crate::simcore::TargetFactory;
use crate::io::Nanos;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

#[derive(Clone, Debug)]
pub struct Settings {
    /// Shrinks cache sizes and working sets together (1.0 = the paper's).
    pub scale: f64,
    pub settle_s: f64,
    pub measure_s: f64,
    /// The steady-state experiment's own windows: it settles until the log
    /// has filled and wrapped, and measures long enough to wrap it again.
    pub steady_settle_s: f64,
    pub steady_measure_s: f64,
    pub seed: u64,
    pub profile: Profile,
    pub jobs: usize,
    pub policies: Vec<Policy>,
    /// The custom experiment's thread count (default: the workload's).
    pub threads: Option<usize>,
    /// Device sizes that replace the scaled paper's (a rig's real devices).
    pub cache_bytes: Option<u64>,
    pub log_bytes: Option<u64>,
    /// No ext4 journal: a thread's fsync is a bare FLUSH of its own, as when
    /// fio replays the workload's trace (`hhc trace`) against a block device.
    pub fsync_as_flush: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            scale: 1.0,
            settle_s: 10.0,
            measure_s: 30.0,
            steady_settle_s: 10.0,
            steady_measure_s: 30.0,
            seed: 1,
            profile: Profile::default(),
            jobs: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            policies: Policy::ALL.to_vec(),
            threads: None,
            cache_bytes: None,
            log_bytes: None,
            fsync_as_flush: false,
        }
    }
}

impl Settings {
    /// (settle, measured) virtual seconds of a point.
    pub fn windows_s(&self, point: &Point) -> (f64, f64) {
        if point.experiment == STEADY || point.experiment == super::log_sweep::LOG_SWEEP {
            (self.steady_settle_s, self.steady_measure_s)
        } else {
            (self.settle_s, self.measure_s)
        }
    }
}

pub const GB: u64 = 1_000_000_000;
pub const FIG6_CACHE_GB: [f64; 3] = [1.0, 2.0, 3.0];
pub const FIG7_THREADS: [usize; 5] = [2, 4, 8, 16, 32];

#[derive(Clone, Debug)]
pub struct Point {
    pub experiment: &'static str,
    pub workload: WorkloadKind,
    pub policy: Policy,
    /// Cache size before scaling, as the paper states it.
    pub cache_gb: f64,
    pub threads: usize,
    /// The log device as a multiple of the cache device (the log-size
    /// sweep); 0: the profile's log size.
    pub log_per_cache: f64,
}

#[derive(Clone, Debug)]
pub struct PointResult {
    pub point: Point,
    pub figures: Result<RunFigures, String>,
    pub memory: Option<MemoryReport>,
    /// Wall-clock seconds the point took to simulate (for the progress
    /// lines only: the figures never depend on it).
    pub wall_s: f64,
}

impl PointResult {
    pub fn iops(&self) -> f64 {
        self.figures.as_ref().map(RunFigures::iops).unwrap_or(f64::NAN)
    }
}

fn grid(experiment: &'static str, workloads: &[(WorkloadKind, f64, usize)], policies: &[Policy]) -> Vec<Point> {
    workloads
        .iter()
        .flat_map(|(workload, cache_gb, threads)| {
            policies.iter().map(move |&policy| Point {
                experiment,
                workload: workload.clone(),
                policy,
                cache_gb: *cache_gb,
                threads: *threads,
                log_per_cache: 0.0,
            })
        })
        .collect()
}

pub fn fig5_points(settings: &Settings) -> Vec<Point> {
    let workloads: Vec<_> = [WorkloadKind::Websearch, WorkloadKind::Fileserver, WorkloadKind::Varmail]
        .into_iter()
        .map(|w| {
            let threads = w.default_threads();
            (w, 4.0, threads)
        })
        .collect();
    grid("fig5", &workloads, &settings.policies)
}

pub fn fig6_points(settings: &Settings) -> Vec<Point> {
    let threads = WorkloadKind::Fileserver.default_threads();
    let workloads: Vec<_> = FIG6_CACHE_GB.iter().map(|&gb| (WorkloadKind::Fileserver, gb, threads)).collect();
    grid("fig6", &workloads, &settings.policies)
}

pub fn fig7_points(settings: &Settings) -> Vec<Point> {
    let workloads: Vec<_> = FIG7_THREADS.iter().map(|&t| (WorkloadKind::Varmail, 4.0, t)).collect();
    grid("fig7", &workloads, &settings.policies)
}

/// The steady-state experiment (docs/design.md §6.1): the write-heavy and the
/// flush-heavy workload at the paper's 4 GB cache, every policy, with a log
/// of `engine.steady_log_mib` scaled like the cache, so that HHC's log wraps
/// many times before and during the measured window.
pub fn steady_points(settings: &Settings) -> Vec<Point> {
    let workloads: Vec<_> = [WorkloadKind::Fileserver, WorkloadKind::Varmail]
        .into_iter()
        .map(|w| {
            let threads = w.default_threads();
            (w, 4.0, threads)
        })
        .collect();
    grid(STEADY, &workloads, &settings.policies)
}

pub const STEADY: &str = "steady";

pub(super) fn grid_of(experiment: &'static str, workloads: &[(WorkloadKind, f64, usize)], policies: &[Policy]) -> Vec<Point> {
    grid(experiment, workloads, policies)
}

/// §3.5: HHC under varmail, whose many small dirty blocks keep the log full
/// of live entries.
pub fn memory_points() -> Vec<Point> {
    grid("memory", &[(WorkloadKind::Varmail, 4.0, 16)], &[Policy::Hhc])
}

/// §3.5's engine memory at the paper's 4 GB cache, whatever the scale the
/// memory point ran at: at a small scale the fixed costs (the unscaled log's
/// bookkeeping above all) dominate every per-block figure.
#[derive(Clone, Debug)]
pub struct PaperMemory {
    /// The engine of the memory point at the paper's size (see `memory_at_paper_size`).
    pub report: MemoryReport,
    /// The memory point's own engine at the end of its run, at `scale`.
    pub measured: MemoryReport,
    pub scale: f64,
    pub cache_bytes: u64,
    pub log_bytes: u64,
    /// Bookkeeping bytes the run's engine grew by while it ran (work lists
    /// sized by use, not by the devices), added to the formatted engine's.
    pub grown_bytes: u64,
}

impl PaperMemory {
    /// Live log entries per cache block at the end of the run.
    pub fn live_share(&self) -> f64 {
        self.measured.log_live_entries as f64 / self.measured.cache_blocks.max(1) as f64
    }
}

/// The memory point's engine at the paper's 4 GB cache, computed from
/// structure sizes without running the workload at that size: an engine
/// formatted with the memory point's configuration at scale 1 (every
/// structure sized by its cache and log) reports its `MemoryReport`; to it
/// are added the bytes the measured run's engine grew by beyond a freshly
/// formatted engine of its own configuration, and the live log entries are
/// the run's per cache block times the 4 GB cache's blocks (a live entry
/// costs no memory of its own: its location is a field of the block table).
pub fn memory_at_paper_size(settings: &Settings, measured: &MemoryReport) -> Result<PaperMemory, String> {
    let point = &memory_points()[0];
    let formatted = |settings: &Settings| -> Result<(MemoryReport, Config), String> {
        let workload = Workload::new(point.workload.clone(), point.threads, settings.scale, settings.seed);
        let config = engine_config(point, settings, workload.address_space_blocks());
        config.validate().map_err(|e| format!("memory at {} GB: {e:?}", config.cache_device_bytes as f64 / GB as f64))?;
        let report = crate::bench::NullDriver::new(config.clone()).engine.memory_report();
        Ok((report, config))
    };
    let (fresh, _) = formatted(settings)?;
    let paper_settings = Settings { scale: 1.0, cache_bytes: None, ..settings.clone() };
    let (paper, config) = formatted(&paper_settings)?;
    let grown = |now: u64, at_start: u64| now.saturating_sub(at_start);
    let (index, log, commit, buffers) = (
        grown(measured.cache_index_bytes, fresh.cache_index_bytes),
        grown(measured.log_bookkeeping_bytes, fresh.log_bookkeeping_bytes),
        grown(measured.commit_bookkeeping_bytes, fresh.commit_bookkeeping_bytes),
        grown(measured.io_buffer_bytes, fresh.io_buffer_bytes),
    );
    let live_share = measured.log_live_entries as f64 / measured.cache_blocks.max(1) as f64;
    let report = MemoryReport {
        cache_blocks: paper.cache_blocks,
        cache_index_bytes: paper.cache_index_bytes + index,
        log_live_entries: ((live_share * paper.cache_blocks as f64).round() as u64).min(paper.cache_blocks),
        log_bookkeeping_bytes: paper.log_bookkeeping_bytes + log,
        commit_bookkeeping_bytes: paper.commit_bookkeeping_bytes + commit,
        io_buffer_bytes: paper.io_buffer_bytes + buffers,
    };
    Ok(PaperMemory {
        report,
        measured: measured.clone(),
        scale: settings.scale,
        cache_bytes: config.cache_device_bytes,
        log_bytes: config.log_device_bytes,
        grown_bytes: index + log + commit,
    })
}

pub fn custom_points(settings: &Settings, workload: WorkloadKind) -> Vec<Point> {
    let threads = settings.threads.unwrap_or_else(|| workload.default_threads());
    // A given cache size, stated like the paper's sizes (before scaling).
    let cache_gb = settings.cache_bytes.map_or(4.0, |bytes| bytes as f64 / GB as f64 / settings.scale);
    grid("custom", &[(workload, cache_gb, threads)], &settings.policies)
}

/// The engine configuration of a point: the paper's devices, scaled.
pub fn engine_config(point: &Point, settings: &Settings, address_space_blocks: u64) -> Config {
    let cache_bytes = settings.cache_bytes.unwrap_or((point.cache_gb * settings.scale * GB as f64) as u64);
    // Room for the file set plus the journal and log areas, in whole MiB.
    let backing_bytes = (address_space_blocks * 4096).div_ceil(1 << 20) * (1 << 20) + (64 << 20);
    let engine = &settings.profile.engine;
    let log_mib = if point.experiment == STEADY { engine.steady_log_mib * settings.scale } else { engine.log_mib };
    Config {
        policy: point.policy,
        dirty_threshold_percent: engine.dirty_threshold_percent as u8,
        writeback_parallelism: engine.writeback_parallelism as u32,
        backing_stripe_bytes: backing_stripe_bytes(&settings.profile.backing),
        idle_after_ns: (engine.idle_after_ms * 1e6) as Nanos,
        segment_bytes: (engine.segment_kib * 1024.0) as u32,
        barrier_gap_bytes: (engine.barrier_gap_kib * 1024.0) as u32,
        log_buffers_count: engine.log_buffers_count as u32,
        cache_device_bytes: cache_bytes,
        // The engine refuses a log too small for its buffers.
        log_device_bytes: if point.log_per_cache > 0.0 {
            (cache_bytes as f64 * point.log_per_cache) as u64 + 2 * crate::format::UNIT_BYTES as u64
        } else {
            settings.log_bytes.unwrap_or((log_mib * (1u64 << 20) as f64) as u64)
        },
        backing_device_bytes: backing_bytes,
        // Every thread's largest request (a custom job's up to 1 MiB) and
        // the journal's at once: the simulated host has no retry on Busy.
        request_blocks_max: Config::default().request_blocks_max.max(point.threads as u32 * 256 + 1024),
        ..Config::default()
    }
}

/// The RAID5's data bytes per stripe, as an operator gives them to the
/// engine; 0 (no alignment) beyond what the engine aligns to.
fn backing_stripe_bytes(backing: &crate::models::params::BackingParams) -> u32 {
    let stripe = (backing.disks - 1.0) * backing.chunk_kib * 1024.0;
    if stripe >= 1.0 && stripe <= crate::config::BACKING_STRIPE_BYTES_MAX as f64 {
        stripe as u32
    } else {
        0
    }
}

fn secs(seconds: f64) -> Nanos {
    (seconds * 1e9) as Nanos
}

pub fn run_point<F: TargetFactory>(factory: &F, point: &Point, settings: &Settings) -> PointResult {
    let started = std::time::Instant::now();
    let mut workload = Workload::new(point.workload.clone(), point.threads, settings.scale, settings.seed);
    if settings.fsync_as_flush {
        workload = workload.with_fsync_as_flush();
    }
    let config = engine_config(point, settings, workload.address_space_blocks());
    let (settle_s, measure_s) = settings.windows_s(point);
    let spec = RunSpec {
        threads: point.threads,
        prefill: point.policy.uses_cache(),
        settle_ns: secs(settle_s),
        measure_ns: secs(measure_s),
        dirty_sample_interval_ns: 100_000_000,
    };
    // A fresh machine for every point: no state carries over.
    let outcome = factory.start(&config, StartMode::Format, 0).and_then(|target| {
        let mut simulation = Simulation::new(target, &settings.profile, KeptAreas::of(&config), workload);
        let figures = simulation.run(&spec)?;
        Ok((figures, factory.memory_report(simulation.target())))
    });
    let wall_s = started.elapsed().as_secs_f64();
    match outcome {
        Ok((figures, memory)) => PointResult { point: point.clone(), figures: Ok(figures), memory: Some(memory), wall_s },
        Err(message) => PointResult {
            point: point.clone(),
            figures: Err(format!("{} {} {}: {message}", point.experiment, point.workload.name(), point.policy)),
            memory: None,
            wall_s,
        },
    }
}

/// Runs every point on `settings.jobs` OS threads; results keep the order
/// of `points`. `progress` is told about each finished point.
pub fn run_points<F: TargetFactory>(
    factory: &F,
    points: &[Point],
    settings: &Settings,
    progress: &(dyn Fn(&PointResult) + Sync),
) -> Vec<PointResult> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<PointResult>>> = Mutex::new(vec![None; points.len()]);
    std::thread::scope(|scope| {
        for _ in 0..settings.jobs.clamp(1, points.len().max(1)) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(point) = points.get(index) else { break };
                let result = run_point(factory, point, settings);
                progress(&result);
                results.lock().expect("a worker panicked")[index] = Some(result);
            });
        }
    });
    results.into_inner().expect("a worker panicked").into_iter().map(|r| r.expect("every point ran")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simcore::toy::{ToyDefect, ToyFactory};
    use crate::simcore::EngineFactory;

    const RAW: ToyFactory = ToyFactory(ToyDefect::None);

    fn tiny_settings(jobs: usize) -> Settings {
        Settings { scale: 0.005, settle_s: 0.5, measure_s: 3.0, jobs, policies: vec![Policy::Passthrough], ..Settings::default() }
    }

    #[test]
    fn figures_do_not_depend_on_parallelism() {
        let points = fig7_points(&tiny_settings(1));
        let key = |results: Vec<PointResult>| -> Vec<(u64, u64)> {
            results.iter().map(|r| r.figures.as_ref().map(|f| (f.reads_count, f.request_latency.percentile_ns(0.99))).unwrap()).collect()
        };
        let serial = key(run_points(&RAW, &points, &tiny_settings(1), &|_| {}));
        let parallel = key(run_points(&RAW, &points, &tiny_settings(3), &|_| {}));
        assert_eq!(serial.len(), FIG7_THREADS.len());
        assert_eq!(serial, parallel);
    }

    #[test]
    fn engine_config_scales_the_cache_and_covers_the_address_space() {
        let settings = Settings { scale: 0.25, ..Settings::default() };
        let point = &fig6_points(&settings)[0];
        let config = engine_config(point, &settings, 1 << 20);
        assert_eq!(config.cache_device_bytes, GB / 4);
        assert!(config.backing_device_bytes >= (1 << 20) * 4096);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn only_the_steady_state_log_is_scaled_like_the_cache() {
        let mib = 1u64 << 20;
        for scale in [0.01, 0.1] {
            let settings = Settings { scale, ..Settings::default() };
            let engine = &settings.profile.engine;
            let steady = &steady_points(&settings)[0];
            let fig5 = &fig5_points(&settings)[0];
            let steady_log = engine_config(steady, &settings, 1 << 20).log_device_bytes;
            assert_eq!(steady_log, (engine.steady_log_mib * scale * mib as f64) as u64, "scale {scale}");
            assert_eq!(engine_config(fig5, &settings, 1 << 20).log_device_bytes, engine.log_mib as u64 * mib);
            // A few times the dirty threshold's worth of the cache: it must wrap.
            let cache = engine_config(steady, &settings, 1 << 20).cache_device_bytes;
            let dirty_capacity = cache as f64 * engine.dirty_threshold_percent / 100.0;
            assert!((2.0..8.0).contains(&(steady_log as f64 / dirty_capacity)), "{steady_log} vs {dirty_capacity}");
        }
        let settings = Settings { steady_settle_s: 7.0, steady_measure_s: 9.0, ..Settings::default() };
        assert_eq!(settings.windows_s(&steady_points(&settings)[0]), (7.0, 9.0));
        assert_eq!(settings.windows_s(&fig7_points(&settings)[0]), (settings.settle_s, settings.measure_s));
    }

    #[test]
    fn tiny_varmail_run_produces_figures_and_hhc_flushes_faster_than_wb_flush() {
        let settings = Settings {
            scale: 0.005,
            settle_s: 1.0,
            measure_s: 4.0,
            jobs: 2,
            policies: vec![Policy::WriteBackFlush, Policy::Hhc],
            ..Settings::default()
        };
        let points: Vec<_> = fig7_points(&settings).into_iter().filter(|p| p.threads == 16).collect();
        let results = run_points(&EngineFactory, &points, &settings, &|_| {});
        let flush_p50 = |policy| {
            let result = results.iter().find(|r| r.point.policy == policy).unwrap();
            let figures = result.figures.as_ref().unwrap();
            assert!(figures.iops() > 0.0 && figures.flush_latency.count() > 0, "{policy}: {figures:?}");
            figures.flush_latency.percentile_ns(0.5)
        };
        let (hhc, wb_flush) = (flush_p50(Policy::Hhc), flush_p50(Policy::WriteBackFlush));
        assert!(hhc < wb_flush, "HHC flush p50 {hhc} ns vs WB-Flush {wb_flush} ns");
    }

    /// §3.5 at the paper's 4 GB cache whatever the scale: the small run's
    /// fixed costs (its unscaled log's bookkeeping) no longer dominate.
    #[test]
    fn the_memory_table_is_computed_for_the_papers_cache_at_any_scale() {
        let at = |scale: f64| {
            let settings = Settings { scale, settle_s: 0.5, measure_s: 1.0, jobs: 1, ..Settings::default() };
            let results = run_points(&EngineFactory, &memory_points(), &settings, &|_| {});
            let measured = results[0].memory.clone().expect("the memory point reports its memory");
            memory_at_paper_size(&settings, &measured).unwrap()
        };
        let (small, smaller) = (at(0.01), at(0.005));
        for memory in [&small, &smaller] {
            let (paper, run) = (&memory.report, &memory.measured);
            assert_eq!(memory.cache_bytes, 4 * GB);
            assert!(paper.cache_blocks > 950_000 && paper.cache_blocks * 4096 <= 4 * GB, "{paper:?}");
            assert!(run.cache_blocks < 10_000 && run.log_live_entries > 0, "{run:?}");
            // The same share of the cache live as at the end of the run.
            let share = paper.log_live_entries as f64 / paper.cache_blocks as f64;
            assert!((share - memory.live_share()).abs() < 1e-5, "{share} vs {}", memory.live_share());
            // Fixed costs spread over a real cache: the paper's order of
            // magnitude (0.56 %), where the small run reads tens of percent.
            assert!(paper.percent_of_cache() < 2.0 && run.percent_of_cache() > 10.0, "{paper:?} vs {run:?}");
            assert!(paper.log_bytes_per_live_entry() < 100.0 && run.log_bytes_per_live_entry() > 1000.0);
        }
        // The structures at 4 GB do not depend on the scale the run had.
        assert_eq!((small.report.cache_blocks, small.log_bytes), (smaller.report.cache_blocks, smaller.log_bytes));
        let (a, b) = (small.report.percent_of_cache(), smaller.report.percent_of_cache());
        assert!((a - b).abs() < 0.05, "{a} % at scale 0.01, {b} % at 0.005");
    }

    #[test]
    fn the_steady_state_log_wraps_in_the_measured_window_and_the_figures_log_does_not() {
        let settings = Settings {
            scale: 0.005,
            settle_s: 2.0,
            measure_s: 10.0,
            steady_settle_s: 2.0,
            steady_measure_s: 10.0,
            jobs: 2,
            policies: vec![Policy::Hhc],
            ..Settings::default()
        };
        let varmail = |points: Vec<crate::timed::experiments::Point>| points.into_iter().find(|p| p.workload.name() == "varmail").unwrap();
        let points = vec![varmail(steady_points(&settings)), varmail(fig5_points(&settings))];
        let results = run_points(&EngineFactory, &points, &settings, &|_| {});
        let figures: Vec<_> = results.iter().map(|r| r.figures.as_ref().unwrap()).collect();
        let (steady, fig5) = (figures[0], figures[1]);
        assert!(steady.log_wraps() > 1.0, "steady: {:?}", steady.target_counters);
        assert!(steady.counter("log_wraps") >= 1);
        assert!(fig5.log_wraps() < 0.05 && fig5.counter("log_wraps") == 0, "fig5: {:?}", fig5.target_counters);
        assert!(steady.log_mb_s() > 0.0 && fig5.log_mb_s() > 0.0);
    }
}
