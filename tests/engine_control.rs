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

/// `set_options` changes every option at once or, naming the bad one,
/// none; the stats show what is in force; write-back then follows the new
/// dirty threshold.
#[test]
fn set_options_is_all_or_nothing_and_takes_effect() {
    use hhc::config::{CutoffPolicy, Options};
    let mut workload = dirty_workload(Policy::WriteBack, 3);
    let engine = &mut workload.harness.engine;
    let before = engine.config().options();
    let good = Options {
        dirty_threshold_percent: 1,
        writeback_parallelism: 2,
        idle_after_ns: 1_000_000,
        seq_cutoff_policy: CutoffPolicy::Always,
        seq_cutoff_threshold_bytes: 1 << 20,
    };
    let bad = [
        (Options { dirty_threshold_percent: 0, ..good }, "dirty_threshold 0"),
        (Options { dirty_threshold_percent: 101, ..good }, "dirty_threshold 101"),
        (Options { writeback_parallelism: 0, ..good }, "writeback_parallelism 0"),
        (Options { writeback_parallelism: 9, ..good }, "writeback_parallelism 9 exceeds 8"),
        (Options { idle_after_ns: 0, ..good }, "idle_after 0"),
        (Options { seq_cutoff_threshold_bytes: 4096, ..good }, "seq_cutoff_threshold 4096"),
        (Options { seq_cutoff_threshold_bytes: 5 << 30, ..good }, "seq_cutoff_threshold 5368709120"),
    ];
    for (options, expected) in bad {
        let error = engine.set_options(0, options).expect_err(expected).message;
        assert!(error.contains(expected), "{error:?} should mention {expected:?}");
        assert_eq!(engine.config().options(), before, "a refused change changed something");
    }
    assert!("sometimes".parse::<CutoffPolicy>().unwrap_err().message.contains("unknown seq_cutoff_policy 'sometimes'"));
    let dirty = engine.stats().dirty_blocks;
    assert!(dirty > 10, "the workload left {dirty} dirty blocks");
    engine.set_options(0, good).unwrap();
    assert_eq!(engine.config().options(), good);
    let stats = engine.stats();
    assert_eq!((stats.seq_cutoff_policy, stats.seq_cutoff_threshold_bytes), (2, 1 << 20));
    assert_eq!((stats.dirty_threshold_percent, stats.writeback_parallelism), (1, 2));
    // Over the 1 % threshold while requests keep arriving: write-back runs.
    let writebacks = stats.writebacks;
    for lba in 0..200 {
        workload.write_and_wait(lba % 50);
    }
    let stats = workload.harness.engine.stats();
    assert!(stats.writebacks > writebacks + 50, "write-back did not follow the new threshold: {stats:?}");
}

/// Which copy (0 or 1) of the owner record on the cache device holds
/// `record` as the newest of `instance_id`.
fn owner_copy_of(harness: &Harness, record: &[u8]) -> usize {
    let cache = &harness.devices[&hhc::io::DeviceRole::Cache];
    let units = &cache[BS..3 * BS];
    let (copy, found) = hhc::format::OwnerRecord::newest(units, harness.config.instance_id).expect("a valid copy");
    assert_eq!(found.owner, record, "the newest copy");
    copy
}

/// The owner record (what the SPDK module's examine assembles a bdev
/// from) is written at format and rewritten on request, each time to the
/// copy that does not hold the newest one: a crash before the rewrite
/// lands, or one that tears it, leaves the previous record; a warm start
/// finds the newest valid one.
#[test]
fn the_owner_record_is_rewritten_beside_the_newest_and_a_torn_rewrite_leaves_the_old() {
    let config = hhc::config::Config { owner_record: b"created".to_vec(), ..config(Policy::Hhc, 21) };
    let mut workload = Workload::new(Harness::format(config, 21), 21, LBAS);
    workload.run(100, 4);
    assert_eq!(workload.harness.engine.owner_record(), b"created");
    assert!(workload.harness.engine.owner_record_durable());
    let created_in = owner_copy_of(&workload.harness, b"created");

    // Asked for, not yet written: a power loss keeps the old record.
    let now = workload.harness.now;
    assert_eq!(workload.harness.engine.set_owner_record(now, b"attached hdd2".to_vec()), Ok(()));
    assert_eq!(workload.harness.engine.owner_record(), b"attached hdd2");
    assert!(!workload.harness.engine.owner_record_durable());
    let mut harness = workload.harness.power_cycle(22);
    assert_eq!(harness.engine.owner_record(), b"created");

    // Written: to the other copy, and found after a restart.
    let now = harness.now;
    harness.engine.set_owner_record(now, b"attached hdd2".to_vec()).unwrap();
    harness.run_until_quiet();
    assert!(harness.engine.owner_record_durable());
    let rewritten_in = owner_copy_of(&harness, b"attached hdd2");
    assert_ne!(rewritten_in, created_in, "the rewrite goes beside the newest copy");
    let mut harness = harness.power_cycle(23);
    assert_eq!(harness.engine.owner_record(), b"attached hdd2");

    // The next rewrite torn (its copy garbage): the one before stays.
    let now = harness.now;
    harness.engine.set_owner_record(now, b"detached hdd0".to_vec()).unwrap();
    harness.run_until_quiet();
    let torn_in = owner_copy_of(&harness, b"detached hdd0");
    assert_eq!(torn_in, created_in);
    let cache = harness.devices.get_mut(&hhc::io::DeviceRole::Cache).unwrap();
    cache[(1 + torn_in) * BS + 2000..(2 + torn_in) * BS].fill(0x5A);
    let mut harness = harness.power_cycle(24);
    assert_eq!(harness.engine.owner_record(), b"attached hdd2");
    // The same record asked for again is written again, over the torn copy.
    let now = harness.now;
    harness.engine.set_owner_record(now, b"detached hdd0".to_vec()).unwrap();
    harness.run_until_quiet();
    assert_eq!(owner_copy_of(&harness, b"detached hdd0"), torn_in);
    assert_eq!(harness.power_cycle(25).engine.owner_record(), b"detached hdd0");
}

/// A failed write of the owner record leaves the previous one readable;
/// asking for the same record again writes it once the device works.
#[test]
fn a_failed_owner_record_write_keeps_the_previous_and_is_tried_again_when_asked() {
    let config = hhc::config::Config { owner_record: b"one".to_vec(), ..config(Policy::WriteBack, 26) };
    let mut harness = Harness::format(config, 26);
    let cache = hhc::io::DeviceRole::Cache;
    harness.set_failing(cache, hhc::io::IoStatus::Error);
    let now = harness.now;
    harness.engine.set_owner_record(now, b"two".to_vec()).unwrap();
    for _ in 0..10 {
        harness.step();
    }
    harness.set_failing(cache, hhc::io::IoStatus::Ok);
    harness.run_until_quiet();
    assert!(!harness.engine.owner_record_durable(), "not tried again on its own");
    owner_copy_of(&harness, b"one");
    let now = harness.now;
    harness.engine.set_owner_record(now, b"two".to_vec()).unwrap();
    harness.run_until_quiet();
    assert!(harness.engine.owner_record_durable());
    owner_copy_of(&harness, b"two");
    let too_long = vec![b'x'; hhc::format::OWNER_BYTES_MAX + 1];
    let now = harness.now;
    assert_eq!(
        harness.engine.set_owner_record(now, too_long),
        Err(ControlError::OwnerRecordTooLong { len: hhc::format::OWNER_BYTES_MAX + 1 })
    );
}

/// A log mirror slot without a device (a detached mirror's, kept so the
/// others keep their indexes) is never read or written, at format or at a
/// warm start; the engine logs on the other mirror, and a mirror attached
/// in that slot later re-syncs as any attached one.
#[test]
fn an_absent_mirror_slot_is_never_touched_and_takes_an_attached_mirror() {
    let seed = 27;
    let config = hhc::config::Config { mirrors_absent: 0b10, ..config(Policy::Hhc, seed) };
    let log1 = hhc::io::DeviceRole::Log(1);
    let mut devices = std::collections::BTreeMap::new();
    devices.insert(hhc::io::DeviceRole::Cache, vec![0; config.cache_device_bytes as usize]);
    devices.insert(hhc::io::DeviceRole::Backing, vec![0; config.backing_device_bytes as usize]);
    devices.insert(hhc::io::DeviceRole::Log(0), vec![0; config.log_device_bytes as usize]);
    let harness = Harness::start(config, devices, StartMode::Format, seed);
    assert_eq!(harness.engine.mirror_states(), vec![MirrorState::Healthy, MirrorState::Failed]);
    let mut workload = Workload::new(harness, seed, LBAS);
    workload.run(300, 8);
    workload.drain();
    assert!(workload.flush_and_wait());
    let untouched = |harness: &Harness| harness.io_counts.keys().all(|(role, _)| *role != log1);
    assert!(untouched(&workload.harness), "{:?}", workload.harness.io_counts);
    assert_eq!(workload.harness.engine.stats().mirror_failures, 0, "absent from the start is no failure");
    let mut harness = workload.harness.power_cycle(seed + 1);
    assert_eq!(*harness.state(), hhc::engine::EngineState::Ready);
    assert!(untouched(&harness), "{:?}", harness.io_counts);
    assert_eq!(harness.engine.mirror_states(), vec![MirrorState::Healthy, MirrorState::Failed]);
    harness.attach_mirror(1);
    assert!(matches!(harness.engine.mirror_states()[1], MirrorState::Syncing { .. }));
    // Writes and flushes only: this model knows nothing written before the restart.
    let mut workload = Workload::new(harness, seed, LBAS);
    for round in 0..20 {
        for lba in 0..64 {
            assert!(workload.write_and_wait(round * 64 + lba));
        }
        assert!(workload.flush_and_wait());
        if workload.harness.engine.mirror_states()[1] == MirrorState::Healthy {
            break;
        }
    }
    assert_eq!(workload.harness.engine.mirror_states(), vec![MirrorState::Healthy, MirrorState::Healthy]);
}

/// Blocks a warm start over a copy of `harness`'s devices, now, would hold
/// in its cache (under write-back, which serves them).
fn blocks_after_power_cycle(harness: &Harness, seed: u64) -> u64 {
    let mut config = harness.config.clone();
    config.policy = Policy::WriteBack;
    let restarted = Harness::start(config, harness.devices.clone(), StartMode::Open, seed);
    let stats = restarted.engine.stats();
    stats.cache_blocks - stats.free_blocks
}

/// `passes_through` (a driver may then send requests past the engine,
/// straight to the backing device) holds only once nothing the engine
/// holds, in memory or durably, could be read over such a write: stepped
/// through a switch from write-back to passthrough, the first moment it
/// holds a power cycle finds an empty cache. The moment the switch itself
/// is complete, before the emptied metadata is durable, a power cycle would
/// still find blocks: a driver going by the policy alone would be wrong.
#[test]
fn passes_through_only_once_the_emptied_cache_is_durable() {
    let mut workload = dirty_workload(Policy::WriteBack, 5);
    assert!(!workload.harness.engine.passes_through(), "blocks are cached");
    assert!(blocks_after_power_cycle(&workload.harness, 5) > 0);
    let now = workload.harness.now;
    workload.harness.engine.set_policy(now, Policy::Passthrough).unwrap();
    let mut blocks_when_switched = None;
    for _ in 0..1_000_000 {
        let engine = &workload.harness.engine;
        if engine.passes_through() {
            break;
        }
        if engine.policy_target().is_none() && blocks_when_switched.is_none() {
            blocks_when_switched = Some(blocks_after_power_cycle(&workload.harness, 6));
        }
        if !workload.harness.step() {
            workload.harness.idle_for(1_000_000);
        }
    }
    assert!(workload.harness.engine.passes_through(), "never passes through: {:?}", workload.harness.engine.stats());
    assert_eq!(blocks_after_power_cycle(&workload.harness, 7), 0, "a power cycle finds cached blocks");
    assert!(blocks_when_switched.is_some_and(|b| b > 0), "the switch was complete with its drop durable already: {blocks_when_switched:?}");
    // Leaving passthrough: a write-back policy caches again.
    let now = workload.harness.now;
    workload.harness.engine.set_policy(now, Policy::WriteBack).unwrap();
    assert!(!workload.harness.engine.passes_through());
}
