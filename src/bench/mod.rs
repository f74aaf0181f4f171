//! Engine micro-benchmarks: CPU per request in the engine alone (every
//! device command completes at once, no data moves) and the engine's memory
//! per cache block. Figures, not assertions; baselines from the same run
//! (a 4 KiB copy and a 4 KiB CRC-32) give them a scale.

use crate::config::{Config, Policy};
mod null_driver;

pub use null_driver::NullDriver;

use crate::engine::MemoryReport;
use crate::io::RequestKind;
use std::hint::black_box;
use std::time::Instant;

pub struct BenchConfig {
    pub cache_bytes: u64,
    pub operations: u64,
    pub dirty_percent: u8,
}

#[derive(Clone, Debug)]
pub struct BenchReport {
    pub cache_blocks: u64,
    pub read_hit_ns: f64,
    pub hhc_write_ns: f64,
    pub wb_write_ns: f64,
    pub flush_ns: f64,
    pub copy_4k_ns: f64,
    pub crc_4k_ns: f64,
    pub memory: MemoryReport,
    pub dirty_blocks: u64,
}

/// An engine configuration for `policy` over a cache of `cache_bytes`, with
/// no timers: time does not pass in the benchmark.
pub fn config(policy: Policy, cache_bytes: u64) -> Config {
    Config {
        policy,
        cache_device_bytes: cache_bytes,
        log_device_bytes: 4 * cache_bytes,
        backing_device_bytes: 16 * cache_bytes,
        idle_after_ns: u64::MAX,
        superblock_interval_ns: u64::MAX,
        ..Config::default()
    }
}

fn time_per_op(operations: u64, mut op: impl FnMut(u64)) -> f64 {
    let start = Instant::now();
    for i in 0..operations {
        op(i);
    }
    start.elapsed().as_nanos() as f64 / operations as f64
}

fn writes(policy: Policy, bench: &BenchConfig) -> (NullDriver, f64) {
    let mut driver = NullDriver::new(config(policy, bench.cache_bytes));
    let data = vec![0x5au8; 4096];
    let blocks = driver.engine.cache_layout().blocks_count;
    let dirty_target = blocks * bench.dirty_percent as u64 / 100;
    let count = bench.operations.max(dirty_target);
    let ns = time_per_op(count, |i| driver.request(i, RequestKind::Write, i % dirty_target.max(1), Some(&data)));
    (driver, ns)
}

pub fn run(bench: &BenchConfig) -> BenchReport {
    let (mut hhc, hhc_write_ns) = writes(Policy::Hhc, bench);
    let (_, wb_write_ns) = writes(Policy::WriteBack, bench);
    let blocks = hhc.engine.cache_layout().blocks_count;
    let dirty = (blocks * bench.dirty_percent as u64 / 100).max(1);
    let memory = hhc.engine.memory_report();
    let dirty_blocks = hhc.engine.stats().dirty_blocks;
    let base = 1u64 << 40;
    let read_hit_ns = time_per_op(bench.operations, |i| hhc.request(base + i, RequestKind::Read, i % dirty, None));
    let data = vec![0x33u8; 4096];
    let flushes = (bench.operations / 64).max(16);
    let mut flush_total_ns = 0.0;
    for i in 0..flushes {
        // Dirty a few blocks, then time the flush alone.
        for j in 0..8 {
            hhc.request(2 * base + i * 8 + j, RequestKind::Write, (i * 8 + j) % dirty, Some(&data));
        }
        flush_total_ns += time_per_op(1, |_| hhc.request(3 * base + i, RequestKind::Flush, 0, None));
    }
    let (copy_4k_ns, crc_4k_ns) = baselines();
    BenchReport {
        cache_blocks: blocks,
        read_hit_ns,
        hhc_write_ns,
        wb_write_ns,
        flush_ns: flush_total_ns / flushes as f64,
        copy_4k_ns,
        crc_4k_ns,
        memory,
        dirty_blocks,
    }
}

fn baselines() -> (f64, f64) {
    let source = vec![0x11u8; 4096];
    let mut target = vec![0u8; 4096];
    let copy = time_per_op(200_000, |i| {
        target[0] = i as u8;
        target.copy_from_slice(black_box(&source));
        black_box(&target);
    });
    let crc = time_per_op(200_000, |_| {
        black_box(crc32fast::hash(black_box(&source)));
    });
    (copy, crc)
}
