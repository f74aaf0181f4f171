//! `hhc recover`: replay the log onto the backing device after the cache
//! device was lost, then re-initialise the log.

use hhc::json::Object;
use super::log_files::{common_layout, LogFile};
use super::CliResult;
use hhc::config::LogLayout;
use hhc::driver::file::FileDevices;
use hhc::driver::step;
use hhc::format::LogSuperblock;
use hhc::io::{DeviceRole, HeapAllocator};
use hhc::recovery::{plan_replay, LogRecovery, Recovered, ReplayPlan, ReplayReport, ScannedLog};
use std::path::PathBuf;
use std::process::ExitCode;

/// A progress line goes to stderr every this many replayed blocks.
const PROGRESS_EVERY_BLOCKS: u64 = 1000;

#[derive(clap::Args)]
pub struct Args {
    /// Log mirrors (devices or image files), comma-separated; mirror i is the i-th.
    #[arg(long, value_delimiter = ',', required = true)]
    log: Vec<PathBuf>,
    /// The backing device (or image file) to replay onto.
    #[arg(long)]
    backing: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Scan and plan only; write nothing.
    #[arg(long)]
    dry_run: bool,
}

pub fn run(args: Args) -> CliResult {
    let writable = !args.dry_run;
    let logs: Vec<LogFile> = args.log.iter().map(|path| LogFile::open(path, writable)).collect::<Result<_, _>>()?;
    if logs.len() > u8::MAX as usize {
        return Err(format!("at most {} log mirrors", u8::MAX));
    }
    let (superblock, layout) = common_layout(&logs)?;
    for log in &logs {
        log.check_len(&layout)?;
    }
    let mut devices = open_devices(&args, &logs, &superblock)?;
    let mirrors: Vec<u8> = (0..logs.len() as u8).collect();
    match recover(&mut devices, layout, mirrors, args.dry_run)? {
        Recovered::Scanned(scanned) => print_plan(&args, &scanned, &plan_replay(&scanned)),
        Recovered::Replayed(report) => print_report(&args, &report),
    }
    Ok(ExitCode::SUCCESS)
}

fn open_devices(args: &Args, logs: &[LogFile], superblock: &LogSuperblock) -> Result<FileDevices, String> {
    let mut devices = FileDevices::new();
    for (mirror, log) in logs.iter().enumerate() {
        let file = log.file.try_clone().map_err(|e| format!("{}: {e}", log.path.display()))?;
        devices.insert(DeviceRole::Log(mirror as u8), file);
    }
    let backing = &args.backing;
    devices
        .open(DeviceRole::Backing, backing, !args.dry_run)
        .map_err(|e| format!("cannot open backing {}: {e}", backing.display()))?;
    let backing_bytes = devices.len_bytes(DeviceRole::Backing).map_err(|e| format!("{}: {e}", backing.display()))?;
    let needed_bytes = superblock.backing_blocks * superblock.block_size as u64;
    if backing_bytes < needed_bytes {
        return Err(format!(
            "backing {} has {backing_bytes} bytes but the log was made for {} blocks of {} bytes ({needed_bytes} bytes)",
            backing.display(),
            superblock.backing_blocks,
            superblock.block_size
        ));
    }
    Ok(devices)
}

/// Runs the scan (and, unless `dry_run`, the replay) over `devices`.
fn recover(devices: &mut FileDevices, layout: LogLayout, mirrors: Vec<u8>, dry_run: bool) -> Result<Recovered, String> {
    let mut recovery = if dry_run {
        LogRecovery::scan_only(layout, mirrors, Box::new(HeapAllocator))
    } else {
        LogRecovery::new(layout, mirrors, true, Box::new(HeapAllocator))
    };
    let mut reported = 0;
    while step(devices, &mut recovery, 0).map_err(|e| e.to_string())? {
        let done = recovery.blocks_replayed();
        if done >= reported + PROGRESS_EVERY_BLOCKS {
            eprintln!("replayed {done} of {} blocks", recovery.blocks_total());
            reported = done;
        }
    }
    match recovery.result() {
        Some(Ok(recovered)) => Ok(recovered.clone()),
        Some(Err(error)) => Err(format!("{error}{}", device_error(devices))),
        None => Err("the log recovery did not finish".into()),
    }
}

fn device_error(devices: &FileDevices) -> String {
    devices.last_error().map(|(role, error)| format!(" (last device error on {role}: {error})")).unwrap_or_default()
}

fn print_plan(args: &Args, scanned: &ScannedLog, plan: &ReplayPlan) {
    if args.json {
        let summary = Object::new()
            .field("dry_run", true)
            .field("blocks_to_replay", plan.blocks.len() as u64)
            .field("segments_replayed", plan.segments_replayed)
            .field("segments_after_barrier", plan.segments_after_barrier)
            .field("segments_before_head", plan.segments_before_head)
            .field("revokes_applied", plan.revokes_applied)
            .field("last_sequence", plan.last_sequence)
            .field("corrupt_copies_detected", scanned.corrupt_copies_detected)
            .field("stale_mirrors", scanned.stale_mirrors.clone())
            .field("in_sync_unavailable", scanned.in_sync_unavailable);
        println!("{summary}");
        return;
    }
    println!("dry run: nothing written");
    println!(
        "would replay {} blocks from {} segments ({} revokes applied), last sequence {}",
        plan.blocks.len(),
        plan.segments_replayed,
        plan.revokes_applied,
        plan.last_sequence.map_or("none".to_string(), |s| s.to_string())
    );
    if plan.segments_before_head > 0 {
        println!("would leave out {} segments before the newest recorded head (sequence {})", plan.segments_before_head, plan.start_sequence);
    }
    println!("corrupt copies detected: {}", scanned.corrupt_copies_detected);
    print_stale(&scanned.stale_mirrors, scanned.in_sync_unavailable);
}

/// A stale mirror (outside the newest superblock's in-sync mask) was not
/// read; with no in-sync mirror at hand the stale ones were all there was.
fn print_stale(stale_mirrors: &[u8], in_sync_unavailable: bool) {
    if in_sync_unavailable {
        eprintln!(
            "warning: no log mirror in sync could be read; the log came from stale mirrors {stale_mirrors:?}, which may lack flushed writes made after they fell behind"
        );
    } else if !stale_mirrors.is_empty() {
        println!("stale mirrors (not in sync, not read): {stale_mirrors:?}");
    }
}

fn print_report(args: &Args, report: &ReplayReport) {
    if args.json {
        let summary = Object::new()
            .field("blocks_replayed", report.blocks_replayed)
            .field("segments_replayed", report.segments_replayed)
            .field("segments_after_barrier", report.segments_after_barrier)
            .field("segments_before_head", report.segments_before_head)
            .field("revokes_applied", report.revokes_applied)
            .field("last_sequence", report.last_sequence)
            .field("read_retries", report.read_retries)
            .field("new_head_segment", report.new_head_segment)
            .field("new_head_sequence", report.new_head_sequence)
            .field("new_write_seq", report.new_write_seq)
            .field("mirrors_reinitialised", report.mirrors_reinitialised)
            .field("stale_mirrors", report.stale_mirrors.clone())
            .field("in_sync_unavailable", report.in_sync_unavailable);
        println!("{summary}");
        return;
    }
    println!(
        "replayed {} blocks from {} segments ({} revokes applied), last sequence {}",
        report.blocks_replayed,
        report.segments_replayed,
        report.revokes_applied,
        report.last_sequence.map_or("none".to_string(), |s| s.to_string())
    );
    println!("dropped {} segments after the last barrier", report.segments_after_barrier);
    if report.segments_before_head > 0 {
        println!("left out {} segments before the newest head a part recorded", report.segments_before_head);
    }
    println!(
        "log re-initialised on {} mirrors: head segment {} sequence {} (superblock write_seq {})",
        report.mirrors_reinitialised, report.new_head_segment, report.new_head_sequence, report.new_write_seq
    );
    print_stale(&report.stale_mirrors, report.in_sync_unavailable);
}
