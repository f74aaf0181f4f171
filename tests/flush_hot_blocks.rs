//! A wb-flush flush completes soon once what it covers is on the backing
//! device, while its blocks are rewritten: a newer value covers the older
//! (engine/writeback_queue.rs). Adjacent hot blocks are rewritten all the
//! time, so the runs that write them back start from one another's queued
//! entries, and a flush often arrives while its blocks' write-backs are in
//! flight. The engine once kept a hot block's entry waiting for a run of
//! its own, which a neighbour's always beat, or, after the write-back in
//! flight at its arrival, for that of a value newer than the one it
//! covers: flushes waited hundreds of backing FLUSHes with their values
//! on the backing device (torture seed 1759, wb-flush: over 10 s).

mod common;

use common::*;
use hhc::config::Policy;
use hhc::driver::harness::Harness;
use hhc::io::{DeviceRole, RequestId};
use std::collections::BTreeMap;

/// Adjacent hot LBAs: one write-back run covers them all.
const HOT: std::ops::Range<u64> = 8..13;
const STEPS: u32 = 10_000;
/// Backing FLUSHes a flush may still take once the backing device holds
/// its values: one in flight then, one after them, and its own.
const FLUSHES_AFTER_COVERED_MAX: u64 = 3;

struct Flush {
    id: RequestId,
    /// The write each LBA held, acknowledged, when the flush was submitted.
    needs: BTreeMap<u64, u64>,
    /// Backing FLUSHes completed when the backing device first held them all.
    covered_at: Option<u64>,
}

struct Run {
    harness: Harness,
    rng: u64,
    next_write: u64,
    /// Writes in flight: (request, lba, write), one per LBA at a time.
    writes: Vec<(RequestId, u64, u64)>,
    acked: BTreeMap<u64, u64>,
    flushes: Vec<Flush>,
    completed: u32,
    /// The most backing FLUSHes a flush took once covered.
    slowest: u64,
}

impl Run {
    fn new(seed: u64) -> Run {
        let mut config = config(Policy::WriteBackFlush, seed);
        // Only flushes write back.
        config.dirty_threshold_percent = 100;
        config.idle_after_ns = u64::MAX / 4;
        config.writeback_parallelism = 2;
        let harness = Harness::format(config, seed);
        Run { harness, rng: seed * 2 + 1, next_write: 1, writes: Vec::new(), acked: BTreeMap::new(), flushes: Vec::new(), completed: 0, slowest: 0 }
    }

    fn random(&mut self, bound: u64) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % bound
    }

    fn backing_flushes(&self) -> u64 {
        self.harness.io_counts.get(&(DeviceRole::Backing, "flush")).copied().unwrap_or(0)
    }

    fn backing_holds(&self, lba: u64) -> u64 {
        let at = lba as usize * BS;
        decode_block(lba, &self.harness.devices[&DeviceRole::Backing][at..at + BS]).expect("a whole block on the backing device")
    }

    fn write(&mut self) {
        let lba = if self.random(4) > 0 { HOT.start + self.random(HOT.end - HOT.start) } else { 100 + self.random(200) };
        if self.writes.iter().any(|&(_, l, _)| l == lba) {
            return;
        }
        let write = self.next_write;
        self.next_write += 1;
        let id = self.harness.write(lba, block_data(lba, write));
        self.writes.push((id, lba, write));
    }

    fn step(&mut self, seed: u64) {
        self.harness.step();
        let mut writes = std::mem::take(&mut self.writes);
        writes.retain(|&(id, lba, write)| {
            let Some((result, _)) = self.harness.take_result(id) else { return true };
            assert!(result.is_ok(), "seed {seed}: write {write} failed");
            self.acked.insert(lba, write);
            false
        });
        self.writes = writes;
        let backing_flushes = self.backing_flushes();
        let mut flushes = std::mem::take(&mut self.flushes);
        for flush in flushes.iter_mut().filter(|f| f.covered_at.is_none()) {
            if flush.needs.iter().all(|(&lba, &write)| self.backing_holds(lba) >= write) {
                flush.covered_at = Some(backing_flushes);
            }
        }
        flushes.retain(|flush| {
            let Some((result, _)) = self.harness.take_result(flush.id) else { return true };
            assert!(result.is_ok(), "seed {seed}: flush {} failed", flush.id);
            let covered_at = flush.covered_at.unwrap_or_else(|| panic!("seed {seed}: flush {} completed before the backing device held {:?}", flush.id, flush.needs));
            self.slowest = self.slowest.max(backing_flushes - covered_at);
            self.completed += 1;
            false
        });
        for flush in &flushes {
            if let Some(covered_at) = flush.covered_at {
                self.slowest = self.slowest.max(backing_flushes - covered_at);
            }
        }
        self.flushes = flushes;
    }
}

fn hot_rewrites(seed: u64) -> Run {
    let mut run = Run::new(seed);
    let mut flush_wanted = false;
    for _ in 0..STEPS {
        flush_wanted |= run.flushes.len() < 3 && run.random(40) == 0;
        if !flush_wanted && run.writes.len() < 4 {
            run.write();
        }
        // A flush arrives with no write in flight, so what it covers is
        // each block's current value (with a write in flight it waits for
        // that write's value too, docs/engine.md, "Limits").
        if flush_wanted && run.writes.is_empty() {
            flush_wanted = false;
            let id = run.harness.flush();
            run.flushes.push(Flush { id, needs: run.acked.clone(), covered_at: None });
        }
        run.step(seed);
    }
    run
}

#[test]
fn a_flush_completes_soon_once_the_backing_device_holds_what_it_covers() {
    for seed in seeds(8) {
        let run = hot_rewrites(seed);
        assert!(run.completed >= 10, "seed {seed}: only {} flushes completed", run.completed);
        assert!(
            run.slowest <= FLUSHES_AFTER_COVERED_MAX,
            "seed {seed}: a flush waited {} backing FLUSHes with its values on the backing device",
            run.slowest
        );
    }
}
