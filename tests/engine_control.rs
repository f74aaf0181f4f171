//! Operator controls of the engine (engine/control.rs): `flush_all` writes
//! back every block dirty when it was called and keeps the cache warm; a
//! policy switch shows its target until it is complete.

mod common;

use common::*;
use hhc::config::Policy;
use hhc::driver::harness::Harness;
use hhc::engine::{ControlError, MirrorState, StartMode};

/// A workload whose dirty blocks background write-back leaves alone while
/// requests arrive (threshold 100 %).
fn dirty_workload(policy: Policy, seed: u64) -> Workload {
    let mut config = config(policy, seed);
    config.dirty_threshold_percent = 100;
    let mut workload = Workload::new(Harness::format(config, seed), seed, LBAS);
    workload.run(400, 8);
    workload.drain();
    workload
}

/// Completes device commands (timers only when none is left) until the
/// flush_all is done; its remaining count never grows.
fn run_flush_all(workload: &mut Workload) {
    let mut remaining = workload.harness.engine.flush_all_progress().blocks_remaining;
    for _ in 0..1_000_000 {
        let progress = workload.harness.engine.flush_all_progress();
        assert!(progress.blocks_remaining <= remaining, "remaining grew: {progress:?}");
        remaining = progress.blocks_remaining;
        if !progress.in_progress {
            return;
        }
        if !workload.harness.step() {
            workload.harness.idle_for(1_000_000);
        }
    }
    panic!("flush_all did not finish: {:?}", workload.harness.engine.flush_all_progress());
}

#[test]
fn flush_all_writes_back_every_dirty_block_and_keeps_the_cache_warm() {
    for policy in [Policy::WriteBack, Policy::Hhc, Policy::WriteBackOrdered] {
        for seed in seeds(2) {
            let mut workload = dirty_workload(policy, seed);
            let before = workload.harness.engine.stats();
            assert!(before.dirty_blocks > 0, "{policy}: nothing dirty to flush: {before:?}");
            let now = workload.harness.now;
            let started = workload.harness.engine.flush_all(now).unwrap();
            assert!(started.in_progress, "{policy}: {started:?}");
            assert_eq!(started.blocks_remaining, before.dirty_blocks, "{policy}: one queued write-back per dirty block");
            // A second call while one runs changes nothing.
            let again = workload.harness.engine.flush_all(now).unwrap();
            assert_eq!(again.blocks_remaining, started.blocks_remaining);
            run_flush_all(&mut workload);
            let after = workload.harness.engine.stats();
            let progress = workload.harness.engine.flush_all_progress();
            assert_eq!((progress.completed, progress.errors), (1, 0), "{policy}: {progress:?}");
            assert_eq!(after.dirty_blocks, 0, "{policy} seed {seed}: dirty blocks left: {after:?}");
            // Warm: no block left the cache (superseded copies, and
            // wb-ordered's retained ones, may be freed).
            assert_eq!(after.evictions, before.evictions, "{policy}: the cache must stay warm");
            // The data is all there, cached and on the backing device.
            workload.run(200, 8);
            workload.drain();
            let mut restarted =
                Harness::start(workload.harness.config.clone(), workload.harness.devices.clone(), StartMode::Open, seed);
            let blocks = read_all(&mut restarted, LBAS);
            workload.check_recovered(&format!("{policy} seed {seed} after flush_all"), |lba| blocks[lba as usize].clone());
        }
    }
}

#[test]
fn flush_all_with_nothing_dirty_is_done_at_once() {
    let mut workload = dirty_workload(Policy::WriteThrough, 1);
    let now = workload.harness.now;
    let progress = workload.harness.engine.flush_all(now).unwrap();
    assert!(!progress.in_progress && progress.completed == 1, "{progress:?}");
    workload.harness.engine.shutdown(now);
    assert_eq!(workload.harness.engine.flush_all(now), Err(ControlError::NotReady));
}

#[test]
fn a_switch_to_write_through_shows_its_target_until_nothing_is_dirty() {
    let mut workload = dirty_workload(Policy::Hhc, 2);
    assert_eq!(workload.harness.engine.mirror_states(), vec![MirrorState::Healthy; 2]);
    let now = workload.harness.now;
    workload.harness.engine.set_policy(now, Policy::WriteThrough).unwrap();
    assert_eq!(workload.harness.engine.policy_target(), Some(Policy::WriteThrough));
    assert_eq!(workload.harness.engine.policy(), Policy::Hhc, "hhc stays until every dirty block is back");
    workload.harness.idle_for(200_000_000);
    assert_eq!(workload.harness.engine.policy_target(), None);
    assert_eq!(workload.harness.engine.policy(), Policy::WriteThrough);
    assert_eq!(workload.harness.engine.stats().dirty_blocks, 0);
}

#[test]
fn a_replaced_mirror_is_syncing_until_the_log_head_passes_its_start() {
    let mut workload = dirty_workload(Policy::Hhc, 3);
    workload.harness.remove_device(hhc::io::DeviceRole::Log(1));
    workload.run(50, 4);
    workload.drain();
    assert_eq!(workload.harness.engine.mirror_states()[1], MirrorState::Failed);
    workload.harness.attach_mirror(1);
    let state = workload.harness.engine.mirror_states()[1];
    assert!(matches!(state, MirrorState::Syncing { segments_behind } if segments_behind > 0), "{state:?}");
    assert_eq!(MirrorState::Syncing { segments_behind: 1 }.name(), "syncing");
}
