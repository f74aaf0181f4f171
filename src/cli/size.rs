//! `hhc size`: how large a log keeps `hhc` near `wb` for a given load
//! (the rule and its evidence: src/sizing.rs, docs/tuning.md).

use super::CliResult;
use hhc::sizing::{Load, LOG_DISK_USABLE_FRACTION};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Cache device size, MiB.
    #[arg(long)]
    cache_mib: f64,
    /// Block writes into the cache, sustained, MB/s (`hhc stats`: blocks
    /// copied to the log per second x block size, or the host's own rate).
    #[arg(long)]
    write_mb_s: f64,
    /// What the backing device takes from write-back under that load, MB/s
    /// (`hhc stats`: write-back per second while dirty data stays high).
    #[arg(long)]
    writeback_mb_s: f64,
    /// Dirty share of the cache in steady state, percent (default: the
    /// dirty threshold while write-back keeps up with the writes, else 60,
    /// where a cache that falls behind settles).
    #[arg(long)]
    dirty_percent: Option<f64>,
    /// The bdev's dirty threshold, percent.
    #[arg(long, default_value_t = 30.0)]
    dirty_threshold: f64,
    /// One log disk's sequential write rate, MB/s.
    #[arg(long, default_value_t = 125.0)]
    log_disk_mb_s: f64,
    /// A log size to judge, MiB (default: only the recommendation).
    #[arg(long)]
    log_mib: Option<f64>,
}

const MB: f64 = 1e6;
const MIB: f64 = 1024.0 * 1024.0;

pub fn run(args: Args) -> CliResult {
    let positive = [("--cache-mib", args.cache_mib), ("--write-mb-s", args.write_mb_s), ("--writeback-mb-s", args.writeback_mb_s), ("--log-disk-mb-s", args.log_disk_mb_s)];
    if let Some((name, _)) = positive.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
        return Err(format!("{name} must be a number above 0"));
    }
    if let Some(p) = args.dirty_percent.filter(|p| !(*p > 0.0 && *p <= 100.0)) {
        return Err(format!("--dirty-percent {p} must be in (0, 100]"));
    }
    if args.log_mib.is_some_and(|l| !(l.is_finite() && l > 0.0)) {
        return Err("--log-mib must be a number above 0".into());
    }
    let dirty_fraction = args.dirty_percent.map_or_else(
        || Load::default_dirty_fraction(args.write_mb_s, args.writeback_mb_s, args.dirty_threshold),
        |p| p / 100.0,
    );
    let load = Load {
        cache_bytes: args.cache_mib * MIB,
        write_bytes_s: args.write_mb_s * MB,
        writeback_bytes_s: args.writeback_mb_s * MB,
        dirty_fraction,
        log_disk_bytes_s: args.log_disk_mb_s * MB,
    };
    let needed = load.log_bytes_needed();
    println!("dirty data          {:.0} MiB ({:.0} % of the cache)", load.dirty_bytes() / MIB, 100.0 * dirty_fraction);
    println!("write-back turnover {:.1} s (dirty data / write-back rate)", load.turnover_s());
    println!(
        "log needed          {:.0} MiB, {:.1}x the cache: it holds {:.1} s of writes, one turnover, plus the eighth kept free",
        (needed / MIB).ceil(),
        needed / load.cache_bytes,
        load.turnover_s()
    );
    let mut verdict_ok = true;
    if let Some(log_mib) = args.log_mib {
        let lap = load.lap_s(log_mib * MIB);
        let enough = log_mib * MIB >= needed;
        verdict_ok &= enough;
        println!(
            "{:<20}comes round in {lap:.1} s: {}",
            format!("log of {log_mib:.0} MiB"),
            if enough {
                "enough; write-back empties its head before it comes round".to_string()
            } else {
                format!("too small; its head finds live entries, which cost a cache read and a log slot each, and writes are paced to what it frees (make it {:.0} MiB)", (needed / MIB).ceil())
            }
        );
    }
    if load.log_disk_keeps_up() {
        println!(
            "log disk            {:.0} of {:.0} MB/s ({:.0} %): keeps up",
            args.write_mb_s,
            args.log_disk_mb_s,
            100.0 * args.write_mb_s / args.log_disk_mb_s
        );
    } else {
        verdict_ok = false;
        println!(
            "log disk            {:.0} of {:.0} MB/s ({:.0} %): past {:.0} %, so one log disk caps hhc's writes whatever the log's size; every mirror takes every write, so a faster disk (or a RAID0 under each mirror) is what helps",
            args.write_mb_s,
            args.log_disk_mb_s,
            100.0 * args.write_mb_s / args.log_disk_mb_s,
            100.0 * LOG_DISK_USABLE_FRACTION
        );
    }
    Ok(if verdict_ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
