//! `hhc trace`: a workload of the timed simulator as fio iologs, one per
//! thread, so that fio replays against a real bdev the very op streams that
//! `hhc simulate --experiment custom --job NAME --fsync flush` simulates
//! (same workload, threads, scale and seed). An fsync becomes a `sync`
//! (a bare FLUSH): a block device under fio has no ext4 journal.

use super::CliResult;
use hhc::json::{Json, Object};
use hhc::timed::workloads::{Op, Workload, WorkloadKind};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const BLOCK_BYTES: u64 = 4096;

#[derive(clap::Args)]
pub struct Args {
    /// A personality (websearch, fileserver, varmail) or a block job, as
    /// `hhc simulate --job` takes it.
    #[arg(long)]
    workload: String,
    /// Threads (default: the workload's).
    #[arg(long)]
    threads: Option<usize>,
    /// Shrinks the file set like `hhc simulate --scale`.
    #[arg(long, default_value_t = 0.01)]
    scale: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Requests (reads, writes, syncs) written per thread.
    #[arg(long, default_value_t = 20_000)]
    ops_per_thread: u64,
    /// The file name in the iologs (fio's `replay_redirect` overrides it).
    #[arg(long, default_value = "hhc0")]
    filename: String,
    #[arg(long)]
    out_dir: PathBuf,
}

/// Every thread's iolog of its first `ops` requests. The threads draw their
/// requests in turn, as concurrent threads roughly do: they share the file
/// set (appends move file ends), so the order shapes the offsets a little.
fn iologs(workload: &mut Workload, threads: usize, ops: u64, filename: &str) -> Vec<String> {
    let mut texts = vec![format!("fio version 2 iolog\n{filename} add\n{filename} open\n"); threads];
    for _ in 0..ops {
        for (thread, text) in texts.iter_mut().enumerate() {
            let (action, lba, blocks) = match workload.next_op(thread) {
                Op::Read { lba, blocks } => ("read", lba, blocks),
                Op::Write { lba, blocks } => ("write", lba, blocks),
                Op::Fsync | Op::Flush => ("sync", 0, 0),
            };
            let _ = writeln!(text, "{filename} {action} {} {}", lba * BLOCK_BYTES, blocks as u64 * BLOCK_BYTES);
        }
    }
    texts.iter_mut().for_each(|text| *text += &format!("{filename} close\n"));
    texts
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

pub fn run(args: Args) -> CliResult {
    let kind = WorkloadKind::parse(&args.workload)?;
    if !(args.scale > 0.0 && args.scale <= 4.0) {
        return Err(format!("--scale {} must be in (0, 4]", args.scale));
    }
    let threads = args.threads.unwrap_or_else(|| kind.default_threads());
    if !(1..=1024).contains(&threads) || args.ops_per_thread == 0 {
        return Err("--threads must be from 1 to 1024 and --ops-per-thread above 0".into());
    }
    if args.filename.is_empty() || args.filename.contains(char::is_whitespace) {
        return Err("--filename must be one word".into());
    }
    std::fs::create_dir_all(&args.out_dir).map_err(|e| format!("cannot create {}: {e}", args.out_dir.display()))?;
    let mut workload = Workload::new(kind.clone(), threads, args.scale, args.seed).with_fsync_as_flush();
    let mut files = Vec::new();
    for (thread, text) in iologs(&mut workload, threads, args.ops_per_thread, &args.filename).iter().enumerate() {
        let name = format!("thread-{thread:03}.iolog");
        write(&args.out_dir.join(&name), text)?;
        files.push(Json::text(name));
    }
    let (area_lba, area_blocks) = workload.file_area();
    let summary = Object::new()
        .field("workload", kind.name())
        .field("threads", threads as u64)
        .field("seed", args.seed)
        .field("scale", Json::Number(args.scale))
        .field("ops_per_thread", args.ops_per_thread)
        .field("block_bytes", BLOCK_BYTES)
        .field("address_space_bytes", workload.address_space_blocks() * BLOCK_BYTES)
        .field("file_area_offset_bytes", area_lba * BLOCK_BYTES)
        .field("file_area_bytes", area_blocks * BLOCK_BYTES)
        .field("iologs", Json::Array(files));
    let summary = Json::Object(summary).encode();
    write(&args.out_dir.join("trace.json"), &(summary.clone() + "\n"))?;
    println!("{summary}");
    Ok(ExitCode::SUCCESS)
}
