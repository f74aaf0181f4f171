//! wb-flush semantics with flushes in flight together: the write-back queue
//! holds each LBA once, so a flush that finds a dirty block queued already
//! counts on that entry instead of queueing its own (engine/
//! writeback_queue.rs). Each flush must still complete only after every
//! block dirty at its arrival is on the backing device, with a backing FLUSH
//! after it — whether its entries were its own or an earlier flush's, and
//! when a write-back it counted on failed.
//!
//! And it completes soon once the backing device holds what it covers,
//! however often its blocks are rewritten: a newer value covers the older.
//! With adjacent hot blocks rewritten all the time, the runs that write
//! them back start from one another's entries, and a flush often arrives
//! while its blocks' write-backs are in flight. The engine once kept a hot
//! block's entry waiting for a run of its own, which a neighbour's always
//! beat, or, after the write-back in flight at its arrival, for one of a
//! value newer than the one it covers: flushes waited for hundreds of
//! backing FLUSHes with their values on the backing device (torture seed
//! 1759, wb-flush: over 10 s).

mod common;

use common::*;
use hhc::config::Policy;
use hhc::driver::harness::Harness;
use hhc::io::{DeviceRole, IoStatus, RequestId};
use std::collections::BTreeMap;

const LBAS: u64 = 96;
/// Adjacent hot LBAs: one write-back run covers them all.
const HOT: std::ops::Range<u64> = 8..13;
/// Backing FLUSHes a flush may still take once the backing device holds
/// its values: one in flight then, one after them, and its own.
const FLUSHES_AFTER_COVERED_MAX: u64 = 3;

struct Flush {
    id: RequestId,
    /// The write each LBA held, acknowledged, when the flush was submitted.
    needs: BTreeMap<u64, u64>,
    backing_flushes_before: u64,
    /// Backing FLUSHes completed when the backing device first held `needs`.
    covered_at: Option<u64>,
}

struct Run {
    harness: Harness,
    rng: u64,
    next_write: u64,
    /// Writes in flight: (request, lba, write); one per LBA at a time, so
    /// an LBA's writes are acknowledged in the order of their numbers.
    writes: Vec<(RequestId, u64, u64)>,
    acked: BTreeMap<u64, u64>,
    flushes: Vec<Flush>,
    completed_ok: u32,
    waited_on_others: u32,
    /// Three writes in four go to `HOT`.
    hot: bool,
    /// The most backing FLUSHes a flush took once the backing device held
    /// its values.
    slowest: u64,
}

impl Run {
    fn new(seed: u64, hot: bool) -> Run {
        let mut config = config(Policy::WriteBackFlush, seed);
        // Only flushes write back: no background write-back to hide a flush
        // that completes too early.
        config.dirty_threshold_percent = 100;
        config.idle_after_ns = u64::MAX / 4;
        // Few write-backs of one block at a time: most of a flush's blocks
        // are still queued when the next flush arrives.
        config.writeback_parallelism = 2;
        if !hot {
            config.backing_stripe_bytes = BS as u32;
        }
        let harness = Harness::format(config, seed);
        let acked = BTreeMap::new();
        Run { harness, rng: seed | 1, next_write: 1, writes: Vec::new(), acked, flushes: Vec::new(), completed_ok: 0, waited_on_others: 0, hot, slowest: 0 }
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

    fn write(&mut self) {
        let lba = if self.hot && self.random(4) > 0 { HOT.start + self.random(HOT.end - HOT.start) } else { self.random(LBAS) };
        if self.writes.iter().any(|&(_, l, _)| l == lba) {
            return;
        }
        let write = self.next_write;
        self.next_write += 1;
        let id = self.harness.write(lba, block_data(lba, write));
        self.writes.push((id, lba, write));
    }

    fn flush(&mut self) {
        // Blocks queued for an earlier flush still in flight: this one
        // counts on their entries.
        self.waited_on_others += u32::from(!self.flushes.is_empty() && !self.acked.is_empty());
        let backing_flushes_before = self.backing_flushes();
        let id = self.harness.flush();
        self.flushes.push(Flush { id, needs: self.acked.clone(), backing_flushes_before, covered_at: None });
    }

    fn backing_holds(&self, lba: u64) -> u64 {
        let start = lba as usize * BS;
        decode_block(lba, &self.harness.devices[&DeviceRole::Backing][start..start + BS]).expect("a whole block on the backing device")
    }

    /// Takes what completed and checks each flush that completed without error.
    fn reap(&mut self, what: &str) {
        let mut writes = std::mem::take(&mut self.writes);
        writes.retain(|&(id, lba, write)| {
            let Some((result, _)) = self.harness.take_result(id) else { return true };
            if result.is_ok() {
                self.acked.insert(lba, write);
            }
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
            if result.is_err() {
                return false;
            }
            self.completed_ok += 1;
            assert!(self.backing_flushes() > flush.backing_flushes_before, "{what}: flush {} completed with no backing FLUSH after it", flush.id);
            for (&lba, &write) in &flush.needs {
                let held = self.backing_holds(lba);
                assert!(held >= write, "{what}: flush {} completed while lba {lba} holds write {held} on the backing device, not {write}", flush.id);
            }
            self.slowest = self.slowest.max(backing_flushes - flush.covered_at.expect("covered, as checked above"));
            false
        });
        for covered_at in flushes.iter().filter_map(|flush| flush.covered_at) {
            self.slowest = self.slowest.max(backing_flushes - covered_at);
        }
        self.flushes = flushes;
    }

    fn steps(&mut self, count: u64, what: &str) {
        for _ in 0..count {
            self.harness.step();
            self.reap(what);
        }
    }
}

fn concurrent_flushes(seed: u64, fail_backing: bool) -> Run {
    let mut run = Run::new(seed, false);
    for round in 0..60 {
        let what = format!("seed {seed} round {round}");
        for _ in 0..run.random(8) + 1 {
            run.write();
        }
        // A backing device that holds write-backs back keeps earlier
        // flushes' entries queued when the next flush arrives.
        let stalled = run.random(3) == 0;
        run.harness.set_stalled(DeviceRole::Backing, stalled);
        if fail_backing && run.random(8) == 0 {
            run.harness.set_failing(DeviceRole::Backing, IoStatus::Error);
        }
        let steps = run.random(24);
        run.steps(steps, &what);
        run.harness.set_failing(DeviceRole::Backing, IoStatus::Ok);
        if run.random(2) == 0 {
            run.flush();
        }
        let steps = run.random(24);
        run.steps(steps, &what);
    }
    run.harness.set_stalled(DeviceRole::Backing, false);
    run.harness.set_failing(DeviceRole::Backing, IoStatus::Ok);
    while let Some(id) = run.flushes.first().map(|flush| flush.id) {
        run.harness.run_until_done(id);
        run.reap(&format!("seed {seed}, draining"));
    }
    run
}

#[test]
fn concurrent_flushes_each_wait_for_every_block_dirty_at_their_arrival() {
    for seed in seeds(16) {
        let run = concurrent_flushes(seed, false);
        // The check above ran: flushes completed, many while another was in
        // flight with its blocks queued.
        assert!(run.completed_ok >= 10 && run.waited_on_others >= 5, "seed {seed}: {} flushes, {} behind another", run.completed_ok, run.waited_on_others);
    }
}

#[test]
fn a_failed_write_back_fails_a_flush_or_is_tried_again_for_the_next() {
    for seed in seeds(16) {
        let run = concurrent_flushes(seed, true);
        assert!(run.completed_ok >= 5, "seed {seed}: only {} flushes completed without error", run.completed_ok);
    }
}

/// Up to four writes and three flushes in flight, the writes mostly to
/// `HOT`, only flushes writing back.
fn hot_rewrites(seed: u64) -> Run {
    let mut run = Run::new(seed, true);
    let mut flush_wanted = false;
    for _ in 0..10_000 {
        flush_wanted |= run.flushes.len() < 3 && run.random(40) == 0;
        if !flush_wanted && run.writes.len() < 4 {
            run.write();
        }
        // A flush arrives with no write in flight, so that what it covers
        // is each block's current value (with a write under way it waits
        // for that write's value too: docs/engine.md, "Limits").
        if flush_wanted && run.writes.is_empty() {
            flush_wanted = false;
            run.flush();
        }
        run.steps(1, &format!("seed {seed}"));
    }
    run
}

#[test]
fn a_flush_completes_soon_once_the_backing_device_holds_its_hot_blocks() {
    for seed in seeds(8) {
        let run = hot_rewrites(seed);
        assert!(run.completed_ok >= 10, "seed {seed}: only {} flushes completed", run.completed_ok);
        assert!(
            run.slowest <= FLUSHES_AFTER_COVERED_MAX,
            "seed {seed}: a flush waited for {} backing FLUSHes with its values on the backing device",
            run.slowest
        );
    }
}

/// Passes with entries not resolved, from the engine's pending report.
fn passes_open(harness: &Harness) -> usize {
    let report = harness.engine.describe_pending();
    let list = report.split("passes open: [").nth(1).and_then(|rest| rest.split(']').next()).expect("passes in the report");
    list.matches('(').count()
}

/// A flush that queues its blocks again (every mirror lost, then `hhc`
/// left) keeps its pass: every open pass is a waiting flush's, so they
/// stay one per waiter (the engine asserts requests_max + 1). A new pass
/// per queueing left the old one open beside it while its write-backs,
/// stalled here, were in flight.
#[test]
fn flushes_queueing_again_keep_one_pass_each() {
    let mut config = config(Policy::Hhc, 3);
    config.dirty_threshold_percent = 100;
    config.idle_after_ns = u64::MAX / 4;
    // Runs of one block: several write-backs in flight at once.
    config.backing_stripe_bytes = BS as u32;
    let mut harness = Harness::format(config, 3);
    for lba in 0..40 {
        let id = harness.write(lba, block_data(lba, 1));
        harness.run_until_done(id);
    }
    // The flushes wait for the log, then for write-backs held at the backing device.
    for role in [DeviceRole::Backing, DeviceRole::Log(0), DeviceRole::Log(1)] {
        harness.set_stalled(role, true);
    }
    let flushes: Vec<RequestId> = (0..3).map(|_| harness.flush()).collect();
    for mirror in 0..2 {
        harness.remove_device(DeviceRole::Log(mirror));
        harness.set_stalled(DeviceRole::Log(mirror), false);
    }
    while harness.step() {
        assert!(passes_open(&harness) <= flushes.len());
    }
    assert_eq!(harness.engine.stats().flush_fallbacks, 3, "every flush fell back to writing back");
    let now = harness.now;
    harness.engine.set_policy(now, Policy::WriteBackFlush).expect("switch to wb-flush");
    assert!(passes_open(&harness) <= 1, "passes open beside the flushes' one: {}", harness.engine.describe_pending());
    harness.set_stalled(DeviceRole::Backing, false);
    for &id in &flushes {
        harness.run_until_done(id);
        let (result, _) = harness.take_result(id).expect("done");
        assert!(result.is_ok(), "flush {id}: {result:?}");
    }
    for lba in 0..40u64 {
        let at = lba as usize * BS;
        let held = decode_block(lba, &harness.devices[&DeviceRole::Backing][at..at + BS]);
        assert_eq!(held, Some(1), "lba {lba} on the backing device after the flushes");
    }
}

/// A wb-flush FLUSH finds the dirty blocks to write back from the set of
/// them, not by visiting every cache block: with a 512 MiB cache, the
/// visit of all 131,072 blocks took about 150 us a flush, which bounded a
/// FLUSH after every write (fio `fsync=1` under SPDK) near 7 k a second.
#[test]
fn a_flush_visits_the_dirty_blocks_not_the_whole_cache() {
    let config = hhc::config::Config {
        policy: Policy::WriteBackFlush,
        cache_device_bytes: 64 << 20,
        backing_device_bytes: 64 << 20,
        mirrors_count: 0,
        log_device_bytes: 0,
        ..hhc::config::Config::default()
    };
    let blocks = config.cache_device_bytes / BS as u64;
    let mut harness = Harness::format(config, 4);
    for round in 1..=20u64 {
        for lba in [3 * round, 1_000 + round, 9_000 + 7 * round] {
            let id = harness.write(lba, block_data(lba, round));
            harness.run_until_done(id);
        }
        let visited = harness.engine.stats().blocks_visited;
        let id = harness.flush();
        harness.run_until_done(id);
        harness.take_result(id).expect("done").0.expect("flush");
        let per_flush = harness.engine.stats().blocks_visited - visited;
        // Before the set: 20,734 a flush (16,384 for the flush's own walk).
        // Left: the background scan's walk for a candidate, up to 4,096
        // blocks whatever their state, and the commit's page (254).
        assert!(per_flush < blocks / 2, "flush {round} visited {per_flush} blocks of {blocks} to write back 3");
    }
}
