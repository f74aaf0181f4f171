//! `hhc simulate`: the paper's experiments (§3) in virtual time with the real
//! engine over device models. With no arguments it runs Figs. 5-7 and the
//! §3.5 memory table and writes tables, SVG charts and JSON to out/simulate.

use super::CliResult;
use hhc::config::Policy;
use hhc::simcore::EngineFactory;
use hhc::timed::experiments::{self, PaperMemory, PointResult, Settings};
use hhc::timed::figures;
use hhc::timed::log_sweep;
use hhc::timed::profile::Profile;
use hhc::timed::workloads::WorkloadKind;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// all, fig5, fig6, fig7, memory, steady, log-sweep (not in all: hhc at logs of 1-10x the cache) or custom (the job given by --job).
    #[arg(long, default_value = "all")]
    experiment: String,
    /// Device profile (`key = value` lines) overriding the defaults.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Print the device profile in effect and exit.
    #[arg(long)]
    print_profile: bool,
    /// Print the figures as JSON instead of tables.
    #[arg(long)]
    json: bool,
    #[arg(long, default_value = "out/simulate")]
    out_dir: PathBuf,
    /// Measured virtual seconds per point.
    #[arg(long, default_value_t = 10.0)]
    duration_s: f64,
    /// Virtual seconds of workload before measuring (dirty data settles).
    #[arg(long, default_value_t = 8.0)]
    settle_s: f64,
    /// Measured virtual seconds per point of the steady-state experiment.
    #[arg(long, default_value_t = 20.0)]
    steady_duration_s: f64,
    /// Virtual seconds of workload before measuring a steady-state point
    /// (the log fills and wraps meanwhile).
    #[arg(long, default_value_t = 8.0)]
    steady_settle_s: f64,
    /// Shrinks cache sizes and working sets together (1 = the paper's sizes).
    #[arg(long, default_value_t = 0.01)]
    scale: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Points simulated in parallel (default: all cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// The custom job: a personality (websearch, fileserver, varmail) or a
    /// block job, e.g. read=70,size_kib=16,threads=8,flush_every=4,working_set_mib=1024,random=1
    #[arg(long)]
    job: Option<String>,
    /// Threads of the custom job (default: the personality's, or the job's).
    #[arg(long)]
    threads: Option<usize>,
    /// Cache device size in MiB, instead of the paper's 4 GB times --scale.
    #[arg(long)]
    cache_mib: Option<u64>,
    /// Log device size in MiB, instead of the profile's.
    #[arg(long)]
    log_mib: Option<u64>,
    /// What an fsync is: `journal` (ext4's group commit, the paper's hosts)
    /// or `flush` (a bare FLUSH by the thread, as fio replaying `hhc trace`).
    #[arg(long, default_value = "journal")]
    fsync: String,
    /// Comma-separated policies (passthrough, wt, wb, wb-flush, wb-ordered, hhc).
    #[arg(long)]
    policies: Option<String>,
    /// Also print each point's engine counters (over the measured window),
    /// write-back run size and backing-disk utilisation.
    #[arg(long)]
    verbose: bool,
}

fn settings(args: &Args) -> Result<Settings, String> {
    let mut settings = Settings::default();
    if let Some(path) = &args.profile {
        settings.profile = Profile::load(path)?;
    }
    if !(args.scale > 0.0 && args.scale <= 4.0) {
        return Err(format!("--scale {} must be in (0, 4]", args.scale));
    }
    if !(args.duration_s > 0.0 && args.settle_s >= 0.0 && args.steady_duration_s > 0.0 && args.steady_settle_s >= 0.0) {
        return Err("--duration-s and --steady-duration-s must be > 0, --settle-s and --steady-settle-s >= 0".into());
    }
    settings.scale = args.scale;
    settings.measure_s = args.duration_s;
    settings.settle_s = args.settle_s;
    settings.steady_measure_s = args.steady_duration_s;
    settings.steady_settle_s = args.steady_settle_s;
    settings.seed = args.seed;
    if let Some(jobs) = args.jobs {
        settings.jobs = jobs.max(1);
    }
    settings.threads = args.threads;
    if args.threads.is_some_and(|t| !(1..=1024).contains(&t)) {
        return Err("--threads must be from 1 to 1024".into());
    }
    settings.cache_bytes = args.cache_mib.map(|mib| mib << 20);
    settings.log_bytes = args.log_mib.map(|mib| mib << 20);
    settings.fsync_as_flush = match args.fsync.as_str() {
        "journal" => false,
        "flush" => true,
        other => return Err(format!("--fsync {other}: expected journal or flush")),
    };
    if let Some(list) = &args.policies {
        settings.policies = list.split(',').map(|p| p.trim().parse::<Policy>().map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    }
    Ok(settings)
}

const EXPERIMENTS: [&str; 5] = ["fig5", "fig6", "fig7", "memory", experiments::STEADY];

fn chosen(args: &Args) -> Result<Vec<&'static str>, String> {
    match args.experiment.as_str() {
        "all" => Ok(EXPERIMENTS.to_vec()),
        "custom" => Ok(vec!["custom"]),
        log_sweep::LOG_SWEEP => Ok(vec![log_sweep::LOG_SWEEP]),
        name => EXPERIMENTS
            .iter()
            .find(|e| **e == name)
            .map(|e| vec![*e])
            .ok_or_else(|| format!("unknown experiment '{name}' (all, fig5, fig6, fig7, memory, steady, log-sweep, custom)")),
    }
}

fn points(experiment: &str, args: &Args, settings: &Settings) -> Result<Vec<experiments::Point>, String> {
    Ok(match experiment {
        "fig5" => experiments::fig5_points(settings),
        "fig6" => experiments::fig6_points(settings),
        "fig7" => experiments::fig7_points(settings),
        "memory" => experiments::memory_points(),
        experiments::STEADY => experiments::steady_points(settings),
        log_sweep::LOG_SWEEP => log_sweep::log_sweep_points(settings),
        _ => {
            let workload = WorkloadKind::parse(args.job.as_deref().unwrap_or(""))?;
            experiments::custom_points(settings, workload)
        }
    })
}

fn write_file(dir: &Path, name: &str, contents: &str) -> Result<(), String> {
    let path = dir.join(name);
    std::fs::write(&path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// §3.5 at the paper's 4 GB cache, from the memory point's run.
fn paper_memory(results: &[PointResult], settings: &Settings) -> Option<Result<PaperMemory, String>> {
    let measured = results.iter().find(|r| r.point.experiment == "memory")?.memory.as_ref()?;
    Some(experiments::memory_at_paper_size(settings, measured))
}

/// The Markdown section of one experiment, and its chart if it has one.
fn render(experiment: &str, results: &[PointResult], settings: &Settings, memory: Option<&Result<PaperMemory, String>>) -> (String, Option<String>) {
    if experiment == log_sweep::LOG_SWEEP {
        return (format!("## {experiment}\n\n{}", log_sweep::table(results)), Some(log_sweep::svg(results, settings)));
    }
    let mut text = format!("## {experiment}\n\n{}\n", figures::table(results));
    match memory {
        Some(Ok(memory)) if experiment == "memory" => text.push_str(&format!("\n{}\n", figures::memory_table(memory))),
        Some(Err(message)) if experiment == "memory" => text.push_str(&format!("\nno §3.5 table: {message}\n")),
        _ => {}
    }
    let svg = match experiment {
        "fig5" => Some(figures::fig5_svg(results, settings)),
        "fig6" => Some(figures::fig6_svg(results, settings)),
        "fig7" => Some(figures::fig7_svg(results, settings)),
        _ => None,
    };
    (text, svg)
}

pub fn run(args: Args) -> CliResult {
    let settings = settings(&args)?;
    if args.print_profile {
        print!("{}", settings.profile.to_text());
        return Ok(ExitCode::SUCCESS);
    }
    let experiments_chosen = chosen(&args)?;
    std::fs::create_dir_all(&args.out_dir).map_err(|e| format!("cannot create {}: {e}", args.out_dir.display()))?;
    let started = Instant::now();
    let mut all_results = Vec::new();
    let mut memory = None;
    let mut markdown = format!(
        "# hhc simulate\n\nscale {} (cache sizes and working sets x{}), {} s settle + {} s measured virtual time per point ({} s + {} s in the steady-state experiment), seed {}\n\n",
        settings.scale, settings.scale, settings.settle_s, settings.measure_s, settings.steady_settle_s, settings.steady_measure_s, settings.seed
    );
    for experiment in experiments_chosen {
        let points = points(experiment, &args, &settings)?;
        let progress = |r: &PointResult| {
            let status = match &r.figures {
                Ok(f) if args.verbose => format!(
                    "{:.0} IOPS, dirty {:.0} %, write-back {:.1} MB/s in runs of {:.0} KiB, backing disks {:.0} % busy, log disk {:.0} % busy, log wrapped {:.1} times\n    {}\n    backing: {}",
                    f.iops(),
                    100.0 * f.dirty_fraction(),
                    f.writeback_mb_s(),
                    f.writeback_run_kib(),
                    100.0 * f.backing_disk_busy_fraction,
                    100.0 * f.log_disk_busy_fraction,
                    f.log_wraps(),
                    f.target_counters.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(" "),
                    f.backing_summary()
                ),
                Ok(f) => format!("{:.0} IOPS", f.iops()),
                Err(e) => format!("FAILED: {e}"),
            };
            eprintln!(
                "[{:>6.1} s, point {:.1} s] {} {} {} GB {} threads {}: {status}",
                started.elapsed().as_secs_f64(),
                r.wall_s,
                r.point.experiment,
                r.point.workload.name(),
                figures::gb_label(r.point.cache_gb),
                r.point.threads,
                r.point.policy
            );
        };
        let results = experiments::run_points(&EngineFactory, &points, &settings, &progress);
        if experiment == "memory" {
            memory = paper_memory(&results, &settings);
        }
        let (text, svg) = render(experiment, &results, &settings, memory.as_ref());
        if let Some(svg) = svg {
            write_file(&args.out_dir, &format!("{experiment}.svg"), &svg)?;
        }
        markdown.push_str(&text);
        all_results.extend(results);
    }
    // The sweep's own table holds its checks: its hhc points differ by log
    // size, which the paper's bounds do not name.
    let checked: Vec<PointResult> = all_results.iter().filter(|r| r.point.experiment != log_sweep::LOG_SWEEP).cloned().collect();
    let checks = figures::targets(&checked);
    let (paper, steady): (Vec<_>, Vec<_>) = checks.iter().cloned().partition(|c| c.is_paper_target());
    if !paper.is_empty() {
        markdown.push_str(&format!("\n## targets\n\n{}", figures::targets_table(&paper)));
    }
    if !steady.is_empty() {
        markdown.push_str(&format!("\n## steady-state checks (the paper's bounds, log wrapping)\n\n{}", figures::targets_table(&steady)));
    }
    let json = figures::results_json(&all_results, &checks, &settings, memory.as_ref().and_then(|m| m.as_ref().ok())).encode();
    write_file(&args.out_dir, "results.md", &markdown)?;
    write_file(&args.out_dir, "results.json", &json)?;
    if args.json {
        println!("{json}");
    } else {
        print!("{markdown}");
        println!("\nwrote {} (results.md, results.json, fig*.svg) in {:.0} s", args.out_dir.display(), started.elapsed().as_secs_f64());
    }
    let failed = all_results.iter().any(|r| r.figures.is_err());
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
