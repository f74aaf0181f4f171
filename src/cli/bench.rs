//! `hhc bench`: engine CPU per request and memory per cache block.

use hhc::json::Object;
use super::CliResult;
use hhc::bench::{run, BenchConfig};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Cache size in GiB for the memory figures (the paper's is 4).
    #[arg(long, default_value_t = 4)]
    cache_gib: u64,
    /// Timed operations per figure.
    #[arg(long, default_value_t = 200_000)]
    operations: u64,
    /// Dirty share of the cache when memory is measured, in percent.
    #[arg(long, default_value_t = 30)]
    dirty_percent: u8,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

pub fn run_cli(args: Args) -> CliResult {
    if args.cache_gib == 0 || args.operations == 0 || !(1..=100).contains(&args.dirty_percent) {
        return Err("--cache-gib and --operations must be positive, --dirty-percent 1..100".into());
    }
    let report = run(&BenchConfig {
        cache_bytes: args.cache_gib << 30,
        operations: args.operations,
        dirty_percent: args.dirty_percent,
    });
    let m = &report.memory;
    let per_block = m.index_bytes_per_block();
    let per_live = if m.log_live_entries > 0 { m.log_bookkeeping_bytes as f64 / m.log_live_entries as f64 } else { 0.0 };
    let capacity_share = (m.cache_index_bytes + m.log_bookkeeping_bytes + m.commit_bookkeeping_bytes) as f64
        / (report.cache_blocks * 4096) as f64
        * 100.0;
    if args.json {
        let o = Object::default()
            .field("cache_blocks", report.cache_blocks)
            .field("dirty_blocks", report.dirty_blocks)
            .field("read_hit_ns", report.read_hit_ns.round() as u64)
            .field("hhc_write_ns", report.hhc_write_ns.round() as u64)
            .field("wb_write_ns", report.wb_write_ns.round() as u64)
            .field("flush_ns", report.flush_ns.round() as u64)
            .field("copy_4k_ns", report.copy_4k_ns.round() as u64)
            .field("crc32_4k_ns", report.crc_4k_ns.round() as u64)
            .field("index_bytes_per_block_x100", (per_block * 100.0).round() as u64)
            .field("cache_index_bytes", m.cache_index_bytes)
            .field("log_bookkeeping_bytes", m.log_bookkeeping_bytes)
            .field("commit_bookkeeping_bytes", m.commit_bookkeeping_bytes)
            .field("log_live_entries", m.log_live_entries)
            .field("io_buffer_bytes", m.io_buffer_bytes);
        println!("{o}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("engine CPU per 4 KiB request (every device command completes at once)");
    println!("  read hit        {:>8.0} ns   ({:.2}x a 4 KiB copy)", report.read_hit_ns, report.read_hit_ns / report.copy_4k_ns);
    println!("  write, hhc      {:>8.0} ns   ({:.2}x wb: the log copy and its checksum)", report.hhc_write_ns, report.hhc_write_ns / report.wb_write_ns);
    println!("  write, wb       {:>8.0} ns", report.wb_write_ns);
    println!("  flush, hhc      {:>8.0} ns   (8 dirty blocks: barrier segment + metadata commit)", report.flush_ns);
    println!("  baseline: 4 KiB copy {:.0} ns, 4 KiB CRC-32 {:.0} ns", report.copy_4k_ns, report.crc_4k_ns);
    println!();
    println!("engine memory, {} GiB cache ({} blocks, {} dirty)", args.cache_gib, report.cache_blocks, report.dirty_blocks);
    println!("  cache index     {:>12} B", m.cache_index_bytes);
    println!("  log bookkeeping {:>12} B   ({} live entries; their location is a field of the block table)", m.log_bookkeeping_bytes, m.log_live_entries);
    println!("  commit state    {:>12} B", m.commit_bookkeeping_bytes);
    println!("  per cache block {:>12.1} B   (paper: ~20 B + ~10 B per live log entry)", per_block);
    println!("  per live entry  {:>12.1} B   of log bookkeeping", per_live);
    println!("  share of cache capacity {:.3} % (paper: 0.56 %)", capacity_share);
    println!("  I/O buffers     {:>12} B   (log segments, write-back staging, metadata pages; fixed)", m.io_buffer_bytes);
    Ok(ExitCode::SUCCESS)
}
