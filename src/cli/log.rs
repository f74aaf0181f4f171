//! `hhc log inspect`: what a log device holds and what a replay would do.

use hhc::json::Object;
use super::log_files::{common_layout, LogFile};
use super::CliResult;
use hhc::config::LogLayout;
use hhc::driver::file::FileDevices;
use hhc::format::{segment::decode_parts, LogSuperblock, SegmentHeader, SegmentLayout};
use hhc::io::{DeviceRole, HeapAllocator};
use hhc::recovery::{plan_replay, recorded_head, LogScanner, ScannedLog};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Print the superblock, the valid run of parts from the head and the live blocks.
    Inspect(InspectArgs),
}

#[derive(clap::Args)]
struct InspectArgs {
    /// Log device or image file.
    #[arg(long)]
    log: PathBuf,
    /// Block size in bytes, used only when no superblock copy is valid.
    #[arg(long)]
    block_size: Option<u32>,
    /// Segment size in bytes, used only when no superblock copy is valid.
    #[arg(long)]
    segment_size: Option<u32>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> CliResult {
    match args.command {
        Command::Inspect(args) => inspect(args),
    }
}

fn inspect(args: InspectArgs) -> CliResult {
    let log = LogFile::open(&args.log, false)?;
    let Some((unit, _)) = log.newest.clone() else {
        return inspect_without_superblock(&args, &log);
    };
    let (superblock, layout) = common_layout(std::slice::from_ref(&log))?;
    warn_on_flag_mismatch(&args, &superblock);
    if let Err(message) = log.check_len(&layout) {
        eprintln!("hhc: warning: {message}");
    }
    let scanned = scan(&log, layout)?;
    let summary = summarize(unit, &layout, &scanned);
    if args.json {
        println!("{summary}");
    } else {
        print_text(unit, &layout, &scanned);
    }
    Ok(ExitCode::SUCCESS)
}

fn warn_on_flag_mismatch(args: &InspectArgs, superblock: &LogSuperblock) {
    let flags = [
        ("--block-size", args.block_size, superblock.block_size),
        ("--segment-size", args.segment_size, superblock.segment_bytes),
    ];
    for (flag, given, stored) in flags {
        if given.is_some_and(|given| given != stored) {
            eprintln!("hhc: warning: {flag} {} ignored, the superblock says {stored}", given.unwrap_or_default());
        }
    }
}

fn scan(log: &LogFile, layout: LogLayout) -> Result<ScannedLog, String> {
    let mut devices = FileDevices::new();
    let file = log.file.try_clone().map_err(|e| format!("{}: {e}", log.path.display()))?;
    devices.insert(DeviceRole::Log(0), file);
    let mut scanner = LogScanner::new(layout, vec![0], &mut HeapAllocator);
    devices.pump(&mut scanner).map_err(|e| e.to_string())?;
    match scanner.take_result() {
        Some(Ok(scanned)) => Ok(scanned),
        Some(Err(error)) => Err(format!("scanning {}: {error}", log.path.display())),
        None => Err("log scan did not finish".into()),
    }
}

fn superblock_json(sb: &LogSuperblock) -> Object {
    Object::new()
        .field("instance_id", sb.instance_id)
        .field("write_seq", sb.write_seq)
        .field("block_size", sb.block_size)
        .field("segment_bytes", sb.segment_bytes)
        .field("segments_count", sb.segments_count)
        .field("head_segment", sb.head_segment)
        .field("head_sequence", sb.head_sequence)
        .field("mirrors_count", sb.mirrors_count)
        .field("mirror_index", sb.mirror_index)
        .field("backing_blocks", sb.backing_blocks)
        .field("replayed", sb.replayed)
}

fn segment_layout_json(layout: &SegmentLayout) -> Object {
    Object::new()
        .field("header_blocks", layout.header_blocks)
        .field("slots", layout.slots)
        .field("revokes_capacity", layout.revokes_capacity)
}

fn summarize(unit: u64, layout: &LogLayout, scanned: &ScannedLog) -> Object {
    let plan = plan_replay(scanned);
    let segments = &scanned.segments;
    let last_barrier_sequence = scanned.last_barrier.map(|i| segments[i].sequence);
    Object::new()
        .field("superblock", superblock_json(&scanned.superblock))
        .field("superblock_unit", unit)
        .field("segment_layout", segment_layout_json(&layout.segment))
        .field("segments_count", layout.segments_count)
        .field("valid_segments", segments_spanned(scanned))
        .field("valid_parts", segments.len() as u64)
        .field("first_sequence", segments.first().map(|s| s.sequence))
        .field("last_sequence", segments.last().map(|s| s.sequence))
        .field("barriers_count", segments.iter().filter(|s| s.barrier).count() as u64)
        .field("last_barrier_sequence", last_barrier_sequence)
        .field("gapped_parts", segments.iter().filter(|s| s.gap_blocks > 0).count() as u64)
        .field("gap_blocks", segments.iter().map(|s| s.gap_blocks as u64).sum::<u64>())
        .field("recorded_head_sequence", Some(recorded_head(scanned)).filter(|&head| head > 0))
        .field("live_blocks", plan.blocks.len() as u64)
        .field("revokes_applied", plan.revokes_applied)
        .field("corrupt_copies_detected", scanned.corrupt_copies_detected)
        .field("io_errors", scanned.io_errors)
}

/// Segments the valid run of parts reaches into.
fn segments_spanned(scanned: &ScannedLog) -> u64 {
    let parts = &scanned.segments;
    parts.windows(2).filter(|pair| pair[0].sequence != pair[1].sequence).count() as u64 + !parts.is_empty() as u64
}

fn print_text(unit: u64, layout: &LogLayout, scanned: &ScannedLog) {
    let sb = &scanned.superblock;
    let segments = &scanned.segments;
    let plan = plan_replay(scanned);
    println!("superblock (unit {unit}): instance_id {:#018x} write_seq {}", sb.instance_id, sb.write_seq);
    println!("  block_size {} segment_bytes {} segments_count {}", sb.block_size, sb.segment_bytes, sb.segments_count);
    println!("  head_segment {} head_sequence {}", sb.head_segment, sb.head_sequence);
    println!(
        "  mirrors_count {} mirror_index {} backing_blocks {}",
        sb.mirrors_count, sb.mirror_index, sb.backing_blocks
    );
    if sb.replayed {
        println!("  replayed: this log was replayed onto the backing device; the cache that wrote it is stale");
    }
    let segment = &layout.segment;
    println!(
        "segment layout: {} header blocks per part, {} slots, {} revokes per part",
        segment.header_blocks, segment.slots, segment.revokes_capacity
    );
    match (segments.first(), segments.last()) {
        (Some(first), Some(last)) => println!(
            "valid run: {} parts in {} segments, sequences {}..={}",
            segments.len(),
            segments_spanned(scanned),
            first.sequence,
            last.sequence
        ),
        _ => println!("valid run: 0 parts"),
    }
    let head = recorded_head(scanned);
    if head > 0 {
        println!("head recorded by the run's newest part: sequence {head} (a replay starts there)");
    }
    let barriers_count = segments.iter().filter(|s| s.barrier).count();
    match scanned.last_barrier {
        Some(i) => println!("barriers: {barriers_count}, last barrier sequence {}", segments[i].sequence),
        None => println!("barriers: 0"),
    }
    let gapped: Vec<u64> = segments.iter().filter(|s| s.gap_blocks > 0).map(|s| s.gap_blocks as u64).collect();
    if !gapped.is_empty() {
        println!("gaps: {} parts left {} blocks unwritten after them", gapped.len(), gapped.iter().sum::<u64>());
    }
    println!("live blocks at last barrier: {} ({} revokes applied)", plan.blocks.len(), plan.revokes_applied);
    println!("corrupt copies detected: {}", scanned.corrupt_copies_detected);
    if scanned.io_errors > 0 {
        println!("read errors: {}", scanned.io_errors);
    }
}

/// Without a superblock there is no head: list every position holding a
/// segment whose parts decode with the geometry given on the command line.
fn inspect_without_superblock(args: &InspectArgs, log: &LogFile) -> CliResult {
    let (Some(block_size), Some(segment_size)) = (args.block_size, args.segment_size) else {
        return Err(format!(
            "no valid superblock in {}; pass --block-size and --segment-size to scan its segments anyway",
            log.path.display()
        ));
    };
    let segment = SegmentLayout::new(segment_size, block_size)
        .map_err(|e| format!("--segment-size {segment_size} with --block-size {block_size}: {e}"))?;
    let segments_offset_bytes = (2 * hhc::format::UNIT_BYTES as u64).div_ceil(block_size as u64) * block_size as u64;
    let segments_count = (log.len_bytes.saturating_sub(segments_offset_bytes) / segment_size as u64) as u32;
    let layout = LogLayout { segment, segments_count, segments_offset_bytes };
    let found: Vec<(u32, SegmentHeader)> =
        (0..segments_count).flat_map(|index| read_parts(log, &layout, index).into_iter().map(move |h| (index, h))).collect();
    let sequences = || found.iter().map(|(_, header)| header.sequence);
    if args.json {
        let summary = Object::new()
            .field("superblock", None::<u64>)
            .field("segments_count", segments_count)
            .field("valid_parts", found.len() as u64)
            .field("first_sequence", sequences().min())
            .field("last_sequence", sequences().max())
            .field("barriers_count", found.iter().filter(|(_, h)| h.barrier).count() as u64);
        println!("{summary}");
    } else {
        println!("no valid superblock; {segments_count} segment positions with the given geometry");
        for (index, header) in &found {
            println!(
                "segment {index} part {} (block {}): sequence {} head {} barrier {} slots {} revokes {} gap {} instance_id {:#018x}",
                header.part,
                header.first_block,
                header.sequence,
                header.head_sequence,
                header.barrier,
                header.lbas.len(),
                header.revokes.len(),
                header.gap_blocks,
                header.instance_id
            );
        }
        println!("valid parts: {}", found.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// The parts of segment `index` that follow each other from part 0, of
/// whatever instance and sequence part 0 names.
fn read_parts(log: &LogFile, layout: &LogLayout, index: u32) -> Vec<SegmentHeader> {
    let mut bytes = vec![0u8; layout.segment.segment_bytes as usize];
    if log.file.read_exact_at(&mut bytes, layout.segment_offset(index)).is_err() {
        return Vec::new();
    }
    let block = layout.segment.block_size as usize;
    let Ok(len) = hhc::format::sealed_len(&layout.segment, &bytes[..block]) else { return Vec::new() };
    let Ok(first) = SegmentHeader::decode(&layout.segment, &bytes[..len]) else { return Vec::new() };
    let mut parts = Vec::new();
    decode_parts(&layout.segment, &bytes, first.instance_id, first.sequence, |part| parts.push(part.clone()));
    parts
}
