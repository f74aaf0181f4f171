//! The engine against a reference model (docs/design.md §2): every policy under
//! mixed concurrent reads, writes and flushes, then power loss (warm restart)
//! and, for the policies that promise it, loss of the cache device.

mod common;

use common::*;
use hhc::config::{CutoffPolicy, Mutation, Policy, SEQ_CUTOFF_THRESHOLD_MIN};
use hhc::engine::StartMode;
use hhc::driver::harness::Harness;
use hhc::io::DeviceRole;

#[test]
fn reads_return_the_last_acknowledged_write_for_every_policy() {
    for policy in Policy::ALL {
        for seed in seeds(3) {
            let mut workload = run_workload(policy, seed, 1500);
            workload.drain();
            assert_eq!(workload.errors_seen, 0, "{policy}: unexpected errors");
            let stats = workload.harness.engine.stats();
            assert!(stats.reads > 0 && stats.writes > 0 && stats.flushes > 0);
            if policy.uses_cache() {
                assert!(stats.read_hits > 0, "{policy}: no read hit at all: {stats:?}");
            }
        }
    }
}

#[test]
fn warm_restart_after_power_loss_keeps_every_flushed_write() {
    for policy in Policy::ALL {
        for seed in seeds(4) {
            let workload = run_workload(policy, seed, 1200);
            // Power loss: whatever is in flight is dropped.
            let mut harness = Harness::start(
                workload.harness.config.clone(),
                workload.harness.devices.clone(),
                hhc::engine::StartMode::Open,
                seed,
            );
            assert_eq!(harness.state(), &hhc::engine::EngineState::Ready, "{policy} seed {seed}");
            let blocks = read_all(&mut harness, LBAS);
            let what = format!("{policy} seed {seed} warm restart");
            let described: Vec<String> = (0..LBAS).map(|lba| harness.engine.describe_lba(lba)).collect();
            let before: Vec<String> = (0..LBAS).map(|lba| workload.harness.engine.describe_lba(lba)).collect();
            let check = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                workload.check_recovered(&what, |lba| blocks[lba as usize].clone())
            }));
            if let Err(panic) = check {
                let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
                let lba: usize = message.split("block ").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).unwrap_or(0);
                panic!("{message}\n  before the crash: {}\n  after the restart: {}", before[lba], described[lba]);
            }
        }
    }
}

#[test]
fn losing_the_cache_device_keeps_every_flushed_write_on_the_backing_device() {
    for policy in Policy::ALL.into_iter().filter(|p| p.survives_cache_loss()) {
        for seed in seeds(4) {
            let workload = run_workload(policy, seed, 1200);
            let mut devices = workload.harness.devices.clone();
            devices.remove(&DeviceRole::Cache);
            if policy == Policy::Hhc {
                recover_from_log(&mut devices, &workload.harness.config);
            }
            let backing = &devices[&DeviceRole::Backing];
            workload.check_recovered(&format!("{policy} seed {seed} cache loss"), |lba| {
                backing[lba as usize * BS..(lba as usize + 1) * BS].to_vec()
            });
        }
    }
}

/// Sequential streams cut off at 64 KiB under every policy: reads stay
/// right, and so does what a warm restart and a cache loss find.
#[test]
fn the_sequential_cutoff_keeps_every_invariant() {
    for policy in Policy::ALL {
        let mut cut_off = 0;
        for seed in seeds(3) {
            let mut config = config(policy, seed);
            config.seq_cutoff_policy = CutoffPolicy::Always;
            config.seq_cutoff_threshold_bytes = SEQ_CUTOFF_THRESHOLD_MIN;
            let mut workload = Workload::new(Harness::format(config.clone(), seed), seed, LBAS);
            workload.sequential_percent = 60;
            workload.run(1500, 8);
            let stats = workload.harness.engine.stats();
            cut_off += stats.cutoff_writes;
            assert_eq!(workload.errors_seen, 0, "{policy}: unexpected errors");
            let mut restarted = Harness::start(config.clone(), workload.harness.devices.clone(), StartMode::Open, seed);
            let blocks = read_all(&mut restarted, LBAS);
            workload.check_recovered(&format!("{policy} seed {seed} cutoff, warm restart"), |lba| blocks[lba as usize].clone());
            if policy.survives_cache_loss() {
                let mut devices = workload.harness.devices.clone();
                devices.remove(&DeviceRole::Cache);
                if policy == Policy::Hhc {
                    recover_from_log(&mut devices, &config);
                }
                let backing = &devices[&DeviceRole::Backing];
                workload.check_recovered(&format!("{policy} seed {seed} cutoff, cache loss"), |lba| {
                    backing[lba as usize * BS..(lba as usize + 1) * BS].to_vec()
                });
            }
        }
        // The cutoff must have sent writes past the cache (or the test
        // proves nothing), except where it never does.
        let expected = !matches!(policy, Policy::Passthrough | Policy::WriteBackOrdered);
        assert_eq!(cut_off > 0, expected, "{policy}: {cut_off} writes cut off");
    }
}

/// Cut-off writes leave no stale copy behind: blocks read into the cache
/// (their entries committed by a flush), then overwritten by a long
/// sequential stream that runs on into blocks never cached, read back new.
#[test]
fn a_cut_off_write_leaves_no_stale_copy() {
    for policy in [Policy::WriteBack, Policy::Hhc, Policy::WriteThrough, Policy::WriteBackFlush] {
        let mut config = config(policy, 1);
        config.seq_cutoff_policy = CutoffPolicy::Always;
        config.seq_cutoff_threshold_bytes = SEQ_CUTOFF_THRESHOLD_MIN;
        let mut harness = Harness::format(config, 1);
        let (cached, blocks) = (64u64, 256u64);
        let read = harness.read(0, cached as u32);
        assert!(harness.wait(read).0.is_ok());
        let flush = harness.flush();
        assert!(harness.wait(flush).0.is_ok());
        for lba in (0..blocks).step_by(4) {
            let data: Vec<u8> = (lba..lba + 4).flat_map(|l| block_data(l, 1000 + l)).collect();
            let id = harness.write(lba, data);
            assert!(harness.wait(id).0.is_ok());
        }
        let stats = harness.engine.stats();
        assert!(stats.cutoff_writes > 0, "{policy}: no write was cut off: {stats:?}");
        for lba in 0..blocks {
            let id = harness.read(lba, 1);
            let (result, data) = harness.wait(id);
            assert!(result.is_ok());
            assert_eq!(decode_block(lba, &data), Some(1000 + lba), "{policy}: block {lba} read stale data");
        }
    }
}

#[test]
fn hhc_flush_waits_for_the_log_not_the_backing_device() {
    let mut workload = run_workload(Policy::Hhc, 9, 400);
    workload.drain();
    let before = workload.harness.io_counts.get(&(DeviceRole::Backing, "flush")).copied().unwrap_or(0);
    // Below the dirty threshold and never idle: a flush must not write back.
    let id = workload.harness.write(5, block_data(5, 999_999));
    workload.harness.run_until_done(id);
    let flush = workload.harness.flush();
    workload.harness.run_until_done(flush);
    assert!(workload.harness.take_result(flush).unwrap().0.is_ok());
    let after = workload.harness.io_counts.get(&(DeviceRole::Backing, "flush")).copied().unwrap_or(0);
    assert!(after - before <= 1, "the flush should not have waited on backing flushes");
    assert_eq!(workload.harness.engine.stats().unlogged_dirty_blocks, 0);
}

#[test]
fn the_oracle_catches_a_flush_that_skips_the_log() {
    // Mutation check: with the broken flush, cache loss must lose flushed data.
    let mut caught = false;
    for seed in 1..=10 {
        let mut config = config(Policy::Hhc, seed);
        config.mutation = Mutation::FlushSkipsLog;
        let harness = Harness::format(config.clone(), seed);
        let mut workload = Workload::new(harness, seed, LBAS);
        workload.run(800, 8);
        let mut devices = workload.harness.devices.clone();
        devices.remove(&DeviceRole::Cache);
        recover_from_log(&mut devices, &config);
        let backing = devices[&DeviceRole::Backing].clone();
        let check = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            workload.check_recovered("mutant", |lba| backing[lba as usize * BS..(lba as usize + 1) * BS].to_vec())
        }));
        if check.is_err() {
            caught = true;
            break;
        }
    }
    assert!(caught, "the model did not notice a flush that ignores the log");
}

/// Runs a workload in chunks and checks after each whether the backing
/// device holds a flush prefix; returns false at the first chunk where not.
fn backing_stays_a_flush_prefix(policy: Policy, seed: u64) -> bool {
    let harness = Harness::format(config(policy, seed), seed);
    let mut workload = Workload::new(harness, seed, LBAS);
    for _ in 0..15 {
        workload.run(100, 8);
        let values = backing_values(&workload);
        if !workload.model.is_flush_prefix(&values) {
            eprintln!("{policy} seed {seed}: {}", workload.model.explain_prefix(&values));
            return false;
        }
    }
    assert!(workload.harness.engine.stats().writebacks > 0, "nothing was written back");
    true
}

#[test]
fn wb_ordered_keeps_a_flush_prefix_on_the_backing_device() {
    for seed in seeds(4) {
        assert!(backing_stays_a_flush_prefix(Policy::WriteBackOrdered, seed), "seed {seed}: no flush prefix on the backing device");
    }
}

#[test]
fn the_prefix_check_catches_unordered_write_back() {
    // Plain wb writes back in any order: the same check must notice.
    let caught = seeds(10).any(|seed| !backing_stays_a_flush_prefix(Policy::WriteBack, seed));
    assert!(caught, "the prefix check never failed on unordered write-back");
}

fn backing_values(workload: &Workload) -> Vec<u64> {
    let backing = &workload.harness.devices[&DeviceRole::Backing];
    (0..LBAS)
        .map(|lba| {
            let data = &backing[lba as usize * BS..(lba as usize + 1) * BS];
            decode_block(lba, data).unwrap_or_else(|| panic!("block {lba} holds foreign or torn data"))
        })
        .collect()
}
