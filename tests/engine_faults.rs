//! The engine under faults it promises to survive: log mirrors failing and
//! being replaced, an exhausted buffer pool, a log that runs full, policy
//! switches, and device errors (docs/design.md §2, invariants 2, 3 and 5).

mod common;

use common::*;
use hhc::config::{Config, Policy};
use hhc::driver::harness::Harness;
use hhc::engine::{EngineState, MirrorState, StartMode};
use hhc::format::{LogSuperblock, UNIT_BYTES};
use hhc::io::{DeviceRole, IoStatus};
use std::collections::BTreeMap;

fn hhc_workload(config: Config, seed: u64) -> Workload {
    Workload::new(Harness::format(config, seed), seed, LBAS)
}

/// Cache device lost: replay the log, then check the backing device alone.
fn check_cache_loss(workload: &Workload, what: &str) {
    let mut devices = workload.harness.devices.clone();
    devices.remove(&DeviceRole::Cache);
    recover_from_log(&mut devices, &workload.harness.config);
    let backing = &devices[&DeviceRole::Backing];
    workload.check_recovered(what, |lba| backing[lba as usize * BS..(lba as usize + 1) * BS].to_vec());
}

#[test]
fn losing_one_mirror_keeps_the_log_on_the_other() {
    for seed in seeds(3) {
        let mut workload = hhc_workload(config(Policy::Hhc, seed), seed);
        workload.run(300, 8);
        workload.harness.remove_device(DeviceRole::Log(0));
        workload.run(600, 8);
        workload.drain();
        let stats = workload.harness.engine.stats();
        assert_eq!(stats.healthy_mirrors, 1);
        assert_eq!(stats.flush_fallbacks, 0, "one mirror left: flushes still use the log");
        workload.harness.devices.remove(&DeviceRole::Log(0));
        check_cache_loss(&workload, &format!("seed {seed}, mirror 0 lost"));
    }
}

#[test]
fn with_every_mirror_lost_flushes_fall_back_to_writing_back() {
    for seed in seeds(3) {
        let mut workload = hhc_workload(config(Policy::Hhc, seed), seed);
        workload.run(300, 8);
        workload.harness.remove_device(DeviceRole::Log(0));
        workload.harness.remove_device(DeviceRole::Log(1));
        workload.run(600, 8);
        workload.drain();
        assert!(workload.harness.engine.stats().flush_fallbacks > 0);
        // No log left: the backing device alone must hold every flushed write.
        let backing = &workload.harness.devices[&DeviceRole::Backing];
        workload.check_recovered(&format!("seed {seed}, all mirrors lost"), |lba| {
            backing[lba as usize * BS..(lba as usize + 1) * BS].to_vec()
        });
    }
}

#[test]
fn an_attached_mirror_is_resynced_and_carries_the_log_again() {
    for seed in seeds(3) {
        let mut workload = hhc_workload(config(Policy::Hhc, seed), seed);
        workload.run(300, 8);
        workload.harness.remove_device(DeviceRole::Log(0));
        workload.harness.remove_device(DeviceRole::Log(1));
        workload.run(200, 8);
        workload.harness.attach_mirror(0);
        workload.run(600, 8);
        workload.drain();
        let fallbacks = workload.harness.engine.stats().flush_fallbacks;
        workload.run(300, 8);
        workload.drain();
        let stats = workload.harness.engine.stats();
        assert_eq!(stats.healthy_mirrors, 1, "{stats:?}");
        assert_eq!(stats.flush_fallbacks, fallbacks, "after re-sync flushes use the log again");
        // Only the new mirror remains: it alone must allow recovery.
        workload.harness.devices.remove(&DeviceRole::Log(1));
        check_cache_loss(&workload, &format!("seed {seed}, re-synced mirror"));
    }
}

/// The engine's claim, checked: a replay from any mirror it calls healthy,
/// alone, holds every flushed write.
fn check_healthy_mirrors_alone(workload: &Workload, what: &str) -> usize {
    let states = workload.harness.engine.mirror_states();
    let healthy: Vec<u8> = (0..states.len() as u8).filter(|&m| states[m as usize] == MirrorState::Healthy).collect();
    for &mirror in &healthy {
        let mut devices = workload.harness.devices.clone();
        devices.remove(&DeviceRole::Cache);
        devices.retain(|role, _| !matches!(role, DeviceRole::Log(m) if *m != mirror));
        recover_from_log(&mut devices, &workload.harness.config);
        let backing = &devices[&DeviceRole::Backing];
        workload.check_recovered(&format!("{what}: replay from mirror {mirror} alone"), |lba| {
            backing[lba as usize * BS..(lba as usize + 1) * BS].to_vec()
        });
    }
    healthy.len()
}

/// A mirror attached with no mirror in sync left starts the log over, and
/// counts once every dirty block is durable in the new log: from the moment
/// it is called healthy, a replay from it alone holds every flushed write
/// (torture seed 500805: called healthy once the new log's superblock was
/// durable, before blocks flushed under the old log were logged again).
#[test]
fn a_mirror_the_log_starts_over_on_counts_once_the_new_log_holds_every_dirty_block() {
    for seed in seeds(3) {
        let config = Config { dirty_threshold_percent: 90, idle_after_ns: 10_000_000_000, ..config(Policy::Hhc, seed) };
        let mut workload = hhc_workload(config, seed);
        workload.run(300, 8);
        workload.drain();
        assert!(workload.flush_and_wait());
        let dirty = workload.harness.engine.stats().dirty_blocks;
        assert!(dirty > 0, "seed {seed}: nothing dirty, nothing to log again");
        workload.harness.remove_device(DeviceRole::Log(0));
        workload.harness.remove_device(DeviceRole::Log(1));
        workload.harness.attach_mirror(0);
        let mut steps = 0;
        while workload.harness.engine.mirror_states()[0] != MirrorState::Healthy {
            workload.harness.idle_for(10_000);
            steps += 1;
            assert!(steps < 100_000, "seed {seed}: the attached mirror never counts");
        }
        workload.harness.devices.remove(&DeviceRole::Log(1));
        let healthy = check_healthy_mirrors_alone(&workload, &format!("seed {seed}, {dirty} dirty at the attach"));
        assert_eq!(healthy, 1);
    }
}

/// A log mirror that stops answering (its commands neither complete nor
/// fail: a peer host frozen with its connection up) counts as failed after
/// `mirror_timeout_ns`; flushes go on with the other mirror, the late
/// completions of its commands are dropped, and a replay from the other
/// mirror alone holds every flushed write.
#[test]
fn a_mirror_that_stops_answering_counts_as_failed_after_the_timeout() {
    for seed in seeds(3) {
        let config = Config { mirror_timeout_ns: 1_000_000_000, ..config(Policy::Hhc, seed) };
        let mut workload = hhc_workload(config, seed);
        workload.run(200, 8);
        workload.harness.set_stalled(DeviceRole::Log(1), true);
        workload.run(100, 8);
        assert_eq!(workload.harness.engine.mirror_states()[1], MirrorState::Healthy, "seed {seed}: failed before the timeout");
        workload.harness.idle_for(1_500_000_000);
        assert_eq!(workload.harness.engine.mirror_states()[1], MirrorState::Failed, "seed {seed}: not failed after the timeout");
        workload.run(300, 8);
        workload.drain();
        let stats = workload.harness.engine.stats();
        assert_eq!((stats.healthy_mirrors, stats.flush_fallbacks), (1, 0), "seed {seed}: flushes go on with mirror 0");
        workload.harness.set_stalled(DeviceRole::Log(1), false);
        workload.harness.idle_for(100_000_000);
        workload.harness.devices.remove(&DeviceRole::Log(1));
        check_cache_loss(&workload, &format!("seed {seed}, mirror 1 stopped answering"));
    }
}

/// Runs a restarted engine until it is ready, without the timers a quiet
/// harness would fire (a superblock written when idle hides what the start
/// left on the mirrors).
fn open_until_ready(config: Config, devices: std::collections::BTreeMap<DeviceRole, Vec<u8>>, seed: u64) -> Harness {
    let mut harness = Harness::open(config, devices, StartMode::Open, seed);
    while *harness.state() == EngineState::Starting {
        if !harness.step() {
            let at = harness.engine.poll_timeout().expect("a start that waits for nothing");
            harness.now = harness.now.max(at);
            harness.engine.handle_timer(harness.now);
            harness.step();
        }
    }
    harness
}

/// Flushed writes mirror 0 missed after it was removed: more parts than a
/// start-up repairs.
const PARTS_MISSED: u64 = hhc::hdd_log::PARTS_IN_FLIGHT_MAX as u64 + 100;

/// An `hhc` instance over two mirrors whose mirror 0 was removed after a
/// cold block was written (it keeps the head before the hole), then missed
/// `PARTS_MISSED` flushed writes.
fn mirror_0_left_behind(seed: u64) -> (Config, Workload) {
    let config = Config {
        cache_device_bytes: 4 << 20,
        log_device_bytes: 16 << 20,
        dirty_threshold_percent: 90,
        idle_after_ns: 10_000_000_000,
        superblock_interval_ns: 10_000_000_000,
        ..config(Policy::Hhc, seed)
    };
    let mut workload = hhc_workload(config.clone(), seed);
    assert!(workload.write_and_wait(LBAS - 1) && workload.flush_and_wait());
    workload.harness.remove_device(DeviceRole::Log(0));
    for lba in 0..PARTS_MISSED {
        assert!(workload.write_and_wait(lba) && workload.flush_and_wait());
    }
    (config, workload)
}

/// A mirror that missed more parts than a restart repairs (it was removed;
/// it is back at the next start, as a flaky disk after a reboot or a saved
/// configuration naming a detached mirror would bring it) is not in sync:
/// the engine must not call it healthy until a replay from it alone holds
/// every flushed write. A cold block written first keeps the head before
/// its hole.
#[test]
fn a_mirror_back_at_a_restart_after_missing_writes_counts_only_once_resynced() {
    for seed in seeds(2) {
        let (config, mut workload) = mirror_0_left_behind(seed);
        let parts = PARTS_MISSED;
        assert_eq!(workload.harness.engine.stats().healthy_mirrors, 1);
        // Power cycle; mirror 0 is found again with what it held.
        let devices = workload.harness.devices.clone();
        workload.harness = open_until_ready(config.clone(), devices, seed);
        assert_eq!(*workload.harness.state(), EngineState::Ready);
        let what = format!("seed {seed}, mirror 0 back after {parts} parts");
        check_healthy_mirrors_alone(&workload, &what);
        let states = workload.harness.engine.mirror_states();
        assert!(matches!(states[0], MirrorState::Syncing { .. }), "{what}: the stale mirror is {states:?}");
        assert_eq!(workload.harness.engine.stats().stale_mirrors_resynced, 1);
        // It re-syncs as an attached mirror does, and then carries the log.
        for round in 0.. {
            assert!(round < 200, "{what}: mirror 0 never re-synced: {:?}", workload.harness.engine.mirror_states());
            workload.run(50, 8);
            workload.drain();
            workload.harness.idle_for(100_000_000);
            if workload.harness.engine.mirror_states()[0] == MirrorState::Healthy {
                break;
            }
        }
        assert_eq!(check_healthy_mirrors_alone(&workload, &what), 2);
    }
}

/// The same stale mirror with the in-sync one gone at the next start: the
/// cache device still holds every dirty block, so the start must leave the
/// stale mirror holding the whole log again — whether its own superblock
/// still counts it in sync (the newer one that did not is on the missing
/// mirror) or it was re-syncing when the power went and knows it is not
/// (the log then starts over on it).
#[test]
fn a_stale_mirror_alone_at_a_start_is_made_whole_from_the_cache() {
    for seed in seeds(2) {
        for resyncing in [false, true] {
            let what = format!("seed {seed}, stale mirror alone (re-syncing: {resyncing})");
            let (config, mut workload) = mirror_0_left_behind(seed);
            let mut devices = workload.harness.devices.clone();
            if resyncing {
                workload.harness = open_until_ready(config.clone(), devices, seed);
                let states = workload.harness.engine.mirror_states();
                assert!(matches!(states[0], MirrorState::Syncing { .. }), "{what}: {states:?}");
                assert!(workload.write_and_wait(3) && workload.flush_and_wait());
                devices = workload.harness.devices.clone();
            }
            devices.remove(&DeviceRole::Log(1));
            workload.harness = open_until_ready(config.clone(), devices, seed);
            assert_eq!(*workload.harness.state(), EngineState::Ready, "{what}");
            let stats = workload.harness.engine.stats();
            assert_eq!(stats.stale_mirrors_resynced, resyncing as u64, "{what}");
            assert_eq!(check_healthy_mirrors_alone(&workload, &what), 1, "{what}: {:?}", workload.harness.engine.mirror_states());
            let values = read_all(&mut workload.harness, LBAS);
            workload.check_recovered(&format!("{what}: read through the cache"), |lba| values[lba as usize].clone());
            workload.run(300, 8);
            workload.drain();
            assert_eq!(check_healthy_mirrors_alone(&workload, &what), 1);
        }
    }
}

/// A stale mirror still re-syncing when the in-sync one fails: flushes
/// fall back to writing back, and complete with their revokes under no
/// barrier, so the syncing mirror must never count healthy on that log
/// (torture seed 131131, passthrough): it is dropped too, and flushed
/// writes are on the backing device.
#[test]
fn the_last_in_sync_mirror_failing_while_another_resyncs_drops_that_one_too() {
    for seed in seeds(2) {
        let what = format!("seed {seed}, in-sync mirror lost while the stale one re-syncs");
        let (config, mut workload) = mirror_0_left_behind(seed);
        let devices = workload.harness.devices.clone();
        workload.harness = open_until_ready(config.clone(), devices, seed);
        assert!(matches!(workload.harness.engine.mirror_states()[0], MirrorState::Syncing { .. }), "{what}");
        workload.harness.remove_device(DeviceRole::Log(1));
        assert_eq!(workload.harness.engine.mirror_states()[0], MirrorState::Failed, "{what}");
        workload.run(400, 8);
        workload.drain();
        assert!(workload.flush_and_wait(), "{what}");
        assert!(workload.harness.engine.stats().flush_fallbacks > 0, "{what}");
        let backing = &workload.harness.devices[&DeviceRole::Backing];
        workload.check_recovered(&what, |lba| backing[lba as usize * BS..(lba as usize + 1) * BS].to_vec());
        // Attached again, the log starts over on it and carries it again.
        workload.harness.attach_mirror(0);
        workload.run(300, 8);
        workload.drain();
        assert!(workload.flush_and_wait(), "{what}");
        assert_eq!(workload.harness.engine.mirror_states()[0], MirrorState::Healthy, "{what}");
    }
}

/// The newest valid log superblock on a mirror image.
fn newest_log_superblock(device: &[u8]) -> hhc::format::LogSuperblock {
    let units = [&device[..4096], &device[4096..8192]];
    let valid = units.iter().filter_map(|unit| hhc::format::LogSuperblock::decode(unit).ok());
    valid.max_by_key(|sb| sb.write_seq).expect("a valid superblock")
}

/// When a mirror fails, no new part is sealed until a superblock that no
/// longer counts it in sync is durable on the others; if that superblock
/// cannot be written, the mirror that refused it fails too and nothing
/// waits for it.
#[test]
fn a_failed_mirror_leaves_the_in_sync_mask_before_any_new_part() {
    for seed in seeds(3) {
        let config = config(Policy::Hhc, seed);
        let mut workload = hhc_workload(config.clone(), seed);
        workload.run(100, 8);
        workload.drain();
        assert_eq!(newest_log_superblock(&workload.harness.devices[&DeviceRole::Log(1)]).in_sync_mask, 0b11);
        workload.harness.remove_device(DeviceRole::Log(0));
        workload.harness.set_stalled(DeviceRole::Log(1), true);
        let parts = workload.harness.engine.stats().log_parts_written;
        let write = workload.harness.write(5, block_data(5, 1_000_000));
        let flush = workload.harness.flush();
        while workload.harness.step() {}
        assert!(!workload.harness.is_done(flush), "seed {seed}: the flush needs a part on mirror 1");
        assert_eq!(workload.harness.engine.stats().log_parts_written, parts, "seed {seed}: a part sealed before the mask superblock");
        workload.harness.set_stalled(DeviceRole::Log(1), false);
        workload.harness.run_until_done(flush);
        assert!(workload.harness.take_result(write).is_some_and(|(r, _)| r.is_ok()));
        assert!(workload.harness.take_result(flush).is_some_and(|(r, _)| r.is_ok()));
        assert!(workload.harness.engine.stats().log_parts_written > parts);
        assert_eq!(newest_log_superblock(&workload.harness.devices[&DeviceRole::Log(1)]).in_sync_mask, 0b10, "seed {seed}");

        // The other mirror refuses the next superblock: it fails as well and
        // flushes fall back to writing back; nothing wedges.
        let mut workload = hhc_workload(config.clone(), seed);
        workload.run(100, 8);
        workload.drain();
        workload.harness.set_failing(DeviceRole::Log(1), IoStatus::Error);
        workload.harness.remove_device(DeviceRole::Log(0));
        workload.run(200, 8);
        workload.drain();
        assert!(workload.flush_and_wait(), "seed {seed}: a flush with no mirror left");
        assert_eq!(workload.harness.engine.stats().healthy_mirrors, 0);
        let backing = &workload.harness.devices[&DeviceRole::Backing];
        workload.check_recovered(&format!("seed {seed}, both mirrors lost"), |lba| backing[lba as usize * BS..(lba as usize + 1) * BS].to_vec());
    }
}

/// A crash while the superblock that leaves a failed mirror out is being
/// written: the mirror (present again at the start) may still count in
/// sync, but then it lacks at most the parts in flight when it failed,
/// which the start copies to it. Whatever the moment of the crash, a
/// replay from any mirror the restarted engine calls healthy holds every
/// flushed write.
#[test]
fn a_crash_during_the_mask_superblock_leaves_every_healthy_mirror_whole() {
    for seed in seeds(4) {
        for cut in [0, 1, 2, 4, 8, 16, 32] {
            let config = config(Policy::Hhc, seed);
            let mut workload = hhc_workload(config.clone(), seed);
            workload.run(200, 8);
            workload.harness.remove_device(DeviceRole::Log(0));
            for _ in 0..cut {
                workload.harness.step();
            }
            workload.reap();
            let devices = workload.harness.devices.clone();
            workload.harness = open_until_ready(config.clone(), devices, seed);
            workload.pending.clear();
            let what = format!("seed {seed}, crash {cut} commands after mirror 0 failed");
            assert_eq!(*workload.harness.state(), EngineState::Ready, "{what}");
            check_healthy_mirrors_alone(&workload, &what);
            let values = read_all(&mut workload.harness, LBAS);
            workload.check_recovered(&format!("{what}: read through the cache"), |lba| values[lba as usize].clone());
        }
    }
}

#[test]
fn writes_go_on_when_the_buffer_pool_is_exhausted_and_are_logged_later() {
    for seed in seeds(3) {
        let mut workload = hhc_workload(config(Policy::Hhc, seed), seed);
        workload.run(100, 8);
        workload.drain();
        // Mirrors hang: every buffer fills and stays in flight.
        workload.harness.set_stalled(DeviceRole::Log(0), true);
        workload.harness.set_stalled(DeviceRole::Log(1), true);
        for i in 0..200 {
            let lba = (seed * 7 + i) % LBAS;
            assert!(workload.write_and_wait(lba), "writes must not wait for the log");
        }
        let stats = workload.harness.engine.stats();
        assert!(stats.unlogged_dirty_blocks > 0, "the pool should have run out: {stats:?}");
        workload.harness.set_stalled(DeviceRole::Log(0), false);
        workload.harness.set_stalled(DeviceRole::Log(1), false);
        workload.run(400, 8);
        workload.drain();
        assert!(workload.harness.engine.stats().log_blocks_from_cache > 0);
        check_cache_loss(&workload, &format!("seed {seed}, pool exhausted"));
    }
}

#[test]
fn a_small_log_is_reclaimed_while_writes_and_flushes_go_on() {
    for seed in seeds(3) {
        let mut config = config(Policy::Hhc, seed);
        // 16 segments of 15 slots: far less than the cache's dirty blocks.
        config.log_device_bytes = (16 << 16) + 8192;
        config.dirty_threshold_percent = 60;
        let mut workload = hhc_workload(config, seed);
        workload.run(3000, 8);
        workload.drain();
        let stats = workload.harness.engine.stats();
        assert!(stats.log_segments_written > 2 * stats.log_segments_total, "the log must have wrapped: {stats:?}");
        assert!(stats.superblock_writes > 1);
        check_cache_loss(&workload, &format!("seed {seed}, small log"));
    }
}

#[test]
fn switching_policies_at_run_time_keeps_every_flushed_write() {
    let plan = [Policy::WriteBack, Policy::WriteBackOrdered, Policy::Hhc, Policy::WriteThrough, Policy::WriteBackFlush, Policy::Hhc];
    for seed in seeds(3) {
        let mut workload = hhc_workload(config(Policy::Hhc, seed), seed);
        for policy in plan {
            workload.run(300, 8);
            let now = workload.harness.now;
            workload.harness.engine.set_policy(now, policy).unwrap();
            workload.run(300, 8);
            workload.drain();
            workload.harness.idle_for(100_000_000);
            assert_eq!(workload.harness.engine.policy(), policy);
            if !policy.is_write_back() {
                assert_eq!(workload.harness.engine.stats().dirty_blocks, 0, "{policy}: dirty data left");
            }
        }
        // The final policy is hhc: losing the cache must lose nothing flushed.
        check_cache_loss(&workload, &format!("seed {seed}, after policy switches"));
    }
}

#[test]
fn backing_errors_reach_the_caller_and_never_cost_dirty_data() {
    for policy in [Policy::WriteBackFlush, Policy::Hhc, Policy::WriteThrough] {
        let mut workload = hhc_workload(config(policy, 3), 3);
        workload.run(400, 8);
        workload.drain();
        workload.harness.set_failing(DeviceRole::Backing, IoStatus::Error);
        workload.run(400, 8);
        workload.drain();
        workload.harness.set_failing(DeviceRole::Backing, IoStatus::Ok);
        let stats = workload.harness.engine.stats();
        if policy != Policy::Hhc {
            assert!(workload.errors_seen > 0, "{policy}: errors must reach the caller");
        }
        assert!(stats.writeback_errors > 0 || policy == Policy::WriteThrough, "{policy}: {stats:?}");
        // Once the backing device works again, everything drains and a
        // warm restart still finds every flushed write.
        workload.run(300, 8);
        workload.drain();
        let mut restarted = Harness::start(
            workload.harness.config.clone(),
            workload.harness.devices.clone(),
            hhc::engine::StartMode::Open,
            3,
        );
        let blocks = read_all(&mut restarted, LBAS);
        workload.check_recovered(&format!("{policy} after backing errors"), |lba| blocks[lba as usize].clone());
    }
}

#[test]
fn losing_the_cache_device_under_load_fails_every_request_once_and_the_log_recovers() {
    for seed in seeds(3) {
        let mut workload = hhc_workload(config(Policy::Hhc, seed), seed);
        workload.run(500, 8);
        while workload.pending.len() < 8 {
            workload.submit_one();
        }
        workload.harness.step();
        workload.harness.remove_device(DeviceRole::Cache);
        workload.drain();
        assert!(matches!(workload.harness.state(), hhc::engine::EngineState::Failed(_)));
        assert!(workload.errors_seen > 0, "requests in flight must fail");
        // New requests are refused at once.
        let id = workload.harness.read(0, 1);
        assert_eq!(workload.harness.wait(id).0, Err(hhc::io::RequestError::NotReady));
        check_cache_loss(&workload, &format!("seed {seed}, cache lost under load"));
    }
}

/// A backing device that keeps failing during a warm restart: the restart's
/// own flush is tried again a bounded number of times, then the engine stops
/// with a clear reason instead of serving what a cache loss could take back;
/// once the device works again, a restart finds every flushed write.
#[test]
fn a_warm_restart_whose_flush_keeps_failing_stops_and_loses_nothing() {
    let policy = Policy::WriteBackFlush;
    let mut workload = hhc_workload(config(policy, 5), 5);
    workload.run(300, 8);
    workload.drain();
    for lba in 0..8 {
        assert!(workload.write_and_wait(lba));
    }
    assert!(workload.harness.engine.stats().dirty_blocks > 0, "the restart must have something to write back");
    let config = workload.harness.config.clone();
    let mut restarted = Harness::open(config.clone(), workload.harness.devices.clone(), StartMode::Open, 5);
    restarted.set_failing(DeviceRole::Backing, IoStatus::Error);
    restarted.run_until_quiet();
    match restarted.state() {
        EngineState::Failed(reason) => {
            assert_eq!(reason.kind, hhc::engine::FailKind::DeviceError);
            assert!(reason.detail.contains("after a warm restart failed 16 times"), "{reason}");
        }
        other => panic!("a restart whose flush keeps failing must stop, not {other:?}"),
    }
    let mut again = Harness::start(config, restarted.devices.clone(), StartMode::Open, 5);
    assert_eq!(again.state(), &EngineState::Ready);
    let blocks = read_all(&mut again, LBAS);
    workload.check_recovered(&format!("{policy} after a failed restart"), |lba| blocks[lba as usize].clone());
}

#[test]
fn requests_beyond_the_engines_capacity_come_back_busy_and_lose_nothing() {
    for policy in [Policy::Hhc, Policy::WriteBack, Policy::WriteThrough] {
        let config = Config { requests_max: 4, request_blocks_max: 6, ..common::config(policy, 7) };
        let mut harness = Harness::format(config, 7);
        // Stall the cache device so that requests stay in the engine.
        harness.set_stalled(DeviceRole::Cache, true);
        harness.set_stalled(DeviceRole::Backing, true);
        let held: Vec<_> = (0..4).map(|i| harness.write(i, block_data(i, 1))).collect();
        let busy_count = harness.write(10, block_data(10, 1));
        let too_many_blocks = harness.submit(hhc::io::RequestKind::Read, 20, 3, None);
        let too_long = harness.submit(hhc::io::RequestKind::Read, 30, 7, None);
        assert_eq!(harness.take_result(busy_count).map(|r| r.0), Some(Err(hhc::io::RequestError::Busy)), "{policy}");
        assert_eq!(harness.take_result(too_many_blocks).map(|r| r.0), Some(Err(hhc::io::RequestError::Busy)), "{policy}");
        assert_eq!(harness.take_result(too_long).map(|r| r.0), Some(Err(hhc::io::RequestError::OutOfRange)), "{policy}");
        harness.set_stalled(DeviceRole::Cache, false);
        harness.set_stalled(DeviceRole::Backing, false);
        for id in held {
            assert_eq!(harness.wait(id).0, Ok(()), "{policy}");
        }
        // A flush naming the whole device (as SPDK's do) holds no blocks:
        // it is admitted whatever the block limit.
        let whole = harness.submit(hhc::io::RequestKind::Flush, 0, 2048, None);
        assert_eq!(harness.wait(whole).0, Ok(()), "{policy}");
        // Sent again, the busy write goes through; every write reads back.
        let retried = harness.write(10, block_data(10, 2));
        assert_eq!(harness.wait(retried).0, Ok(()), "{policy}");
        let flush = harness.flush();
        assert_eq!(harness.wait(flush).0, Ok(()), "{policy}");
        for lba in [0u64, 1, 2, 3, 10] {
            let read = harness.read(lba, 1);
            let (result, data) = harness.wait(read);
            assert_eq!(result, Ok(()), "{policy}");
            let expected = if lba == 10 { 2 } else { 1 };
            assert_eq!(decode_block(lba, &data), Some(expected), "{policy}: lba {lba}");
        }
        assert_eq!(harness.engine.stats().requests_busy, 2, "{policy}");
    }
}

/// A warm restart whose log holds no part (the bdev never ran `hhc`, or
/// its switch away from it finished) has no log to retire: it serves its
/// dirty blocks at once and writes none of them back first. Over a slow
/// backing device, writing a whole dirty cache back kept the confirming
/// create waiting for minutes. A log that does hold parts is retired
/// first, as before (the torture sweeps' policy switches and power losses).
#[test]
fn a_warm_restart_with_an_empty_log_writes_nothing_back_before_it_serves() {
    // (A wb-flush restart flush writes every dirty block back: its policy.)
    for policy in [Policy::WriteBack, Policy::WriteBackOrdered] {
        let mut config = config(policy, 40);
        config.dirty_threshold_percent = 100;
        let mut harness = Harness::format(config, 40);
        for lba in 0..64 {
            let id = harness.write(lba, block_data(lba, lba + 1));
            assert!(harness.wait(id).0.is_ok());
        }
        let id = harness.flush();
        assert!(harness.wait(id).0.is_ok());
        let dirty = harness.engine.stats().dirty_blocks;
        assert!(dirty > 0, "{policy}: dirty blocks before the power loss");
        // Device commands only: timers would let idle write-back start.
        let mut harness = Harness::open(harness.config.clone(), harness.devices.clone(), StartMode::Open, 41);
        while harness.step() {}
        assert_eq!(*harness.state(), EngineState::Ready, "{policy}: the restart flush is done");
        let stats = harness.engine.stats();
        assert_eq!(stats.writebacks, 0, "{policy}: nothing written back by the restart");
        assert_eq!(stats.dirty_blocks, dirty, "{policy}: every dirty block kept");
    }
}

/// A write over a block whose fill (a read miss's copy into the cache) is
/// in flight supersedes it; the fill then fails, before or after the
/// write's own cache write completed. The fill's block must leave every
/// set it was in (a freed block kept in the superseded set, or dropped
/// twice, failed the block-state checks).
#[test]
fn a_fill_failing_after_a_write_superseded_it_leaves_the_index_consistent() {
    let mut orders = [0u32; 2];
    for seed in 0..24 {
        let mut h = Harness::format(config(Policy::WriteBack, seed), seed);
        h.run_until_quiet();
        h.set_stalled(DeviceRole::Cache, true);
        let read = h.read(5, 1);
        while h.step() {}
        assert_eq!(h.in_flight_count(), 1, "seed {seed}: only the fill is left");
        let write = h.write(5, block_data(5, 1));
        while h.step() {}
        assert_eq!(h.in_flight_count(), 2, "seed {seed}: the fill and the write");
        h.set_stalled(DeviceRole::Cache, false);
        h.step();
        let write_first = h.is_done(write);
        orders[usize::from(write_first)] += 1;
        h.set_failing(DeviceRole::Cache, IoStatus::Error);
        h.step();
        h.set_failing(DeviceRole::Cache, IoStatus::Ok);
        h.run_until_quiet();
        assert!(h.is_done(read) && h.is_done(write), "seed {seed}: requests left");
        hhc::io::Machine::check_counts(&h.engine).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    assert!(orders.iter().all(|&n| n > 0), "both orders reached: {orders:?}");
}

/// Blocks 0..TAKEOVER_BLOCKS written (version 1) and flushed, held dirty;
/// then the host is gone.
const TAKEOVER_BLOCKS: u64 = 32;

/// The old host's devices when it was lost, and the same after a takeover
/// replayed mirror 1 alone (the peer's) onto the backing device.
fn lost_then_replayed_from_mirror_1(config: &Config) -> (BTreeMap<DeviceRole, Vec<u8>>, BTreeMap<DeviceRole, Vec<u8>>) {
    let mut host = Harness::format(config.clone(), 12);
    for lba in 0..TAKEOVER_BLOCKS {
        let id = host.write(lba, block_data(lba, 1));
        assert!(host.wait(id).0.is_ok());
    }
    let id = host.flush();
    assert!(host.wait(id).0.is_ok());
    assert!(host.engine.stats().dirty_blocks > 0, "the old host must hold dirty blocks");
    let at_loss = host.devices.clone();
    let mut taken = at_loss.clone();
    taken.remove(&DeviceRole::Cache);
    taken.remove(&DeviceRole::Log(0));
    recover_from_log(&mut taken, config);
    let backing = &taken[&DeviceRole::Backing];
    for lba in 0..TAKEOVER_BLOCKS {
        assert_eq!(decode_block(lba, &backing[lba as usize * BS..][..BS]), Some(1), "lba {lba} replayed");
    }
    (at_loss, taken)
}

/// The old host back with its cache and its own mirror 0; mirror 1 and the
/// backing device as `now` has them.
fn returned(at_loss: &BTreeMap<DeviceRole, Vec<u8>>, now: &BTreeMap<DeviceRole, Vec<u8>>) -> BTreeMap<DeviceRole, Vec<u8>> {
    let mut devices = at_loss.clone();
    for role in [DeviceRole::Log(1), DeviceRole::Backing] {
        devices.insert(role, now[&role].clone());
    }
    devices
}

fn refused_warm_start(config: &Config, devices: BTreeMap<DeviceRole, Vec<u8>>, why: &str) {
    let backing = devices[&DeviceRole::Backing].clone();
    let mut back = Harness::open(config.clone(), devices, StartMode::Open, 13);
    back.run_until_quiet();
    match back.state() {
        EngineState::Failed(reason) => assert!(reason.detail.contains(why), "{reason}"),
        other => panic!("a warm start over a log taken over must refuse, not {other:?}"),
    }
    assert!(back.devices[&DeviceRole::Backing] == backing, "the refused start wrote nothing to the backing device");
}

/// A takeover (docs/format.md, "A replayed log"): the host is gone; another
/// host replays the log from the mirror it holds (mirror 1) onto the
/// backing device and writes on. When the old host comes back with its
/// cache and its own mirror, its warm start must refuse: serving or writing
/// back its dirty blocks would put older data over the new owner's. The
/// check can fail: with the replayed flag cleared, the same return starts
/// and serves the older blocks.
#[test]
fn a_cache_whose_log_was_replayed_elsewhere_refuses_to_start_warm() {
    let mut config = config(Policy::Hhc, 12);
    config.dirty_threshold_percent = 100;
    let (at_loss, mut taken) = lost_then_replayed_from_mirror_1(&config);
    // The new owner writes the backing device directly.
    let backing = taken.get_mut(&DeviceRole::Backing).unwrap();
    for lba in 0..TAKEOVER_BLOCKS as usize {
        backing[lba * BS..][..BS].copy_from_slice(&block_data(lba as u64, 2));
    }
    refused_warm_start(&config, returned(&at_loss, &taken), "was replayed onto the backing device");

    // The same return with the flag cleared on mirror 1.
    let log1 = taken.get_mut(&DeviceRole::Log(1)).unwrap();
    for unit in log1.chunks_mut(UNIT_BYTES).take(2) {
        if let Ok(superblock) = LogSuperblock::decode(unit) {
            LogSuperblock { replayed: false, ..superblock }.encode(unit);
        }
    }
    let mut back = Harness::open(config, returned(&at_loss, &taken), StartMode::Open, 13);
    back.run_until_quiet();
    assert_eq!(back.state(), &EngineState::Ready, "unfenced, the old host starts");
    let stale = (0..TAKEOVER_BLOCKS).filter(|&lba| {
        let read = back.read(lba, 1);
        decode_block(lba, &back.wait(read).1) == Some(1)
    });
    assert!(stale.count() > 0, "unfenced, the old host serves blocks older than the new owner's");
}

/// A takeover that then formats its own instance over the replayed mirror
/// (what `bdev_hhc_create` with `takeover` does) names the instance it took
/// over in every superblock it writes, across its own warm restarts; the
/// old host coming back still refuses. Without the name the old host would
/// leave that mirror out as another instance's and start from its own.
#[test]
fn a_takeover_formatting_the_replayed_mirror_still_fences_the_old_host() {
    let mut config = config(Policy::Hhc, 12);
    config.dirty_threshold_percent = 100;
    let (at_loss, taken) = lost_then_replayed_from_mirror_1(&config);
    let successor_config = |previous_instance| Config { instance_id: 0x77, previous_instance, ..config.clone() };
    for previous_instance in [config.instance_id, 0] {
        let mut devices = taken.clone();
        devices.insert(DeviceRole::Cache, vec![0; config.cache_device_bytes as usize]);
        devices.insert(DeviceRole::Log(0), vec![0; config.log_device_bytes as usize]);
        let mut owner = Harness::start(successor_config(previous_instance), devices, StartMode::Format, 14);
        for lba in 0..TAKEOVER_BLOCKS {
            let id = owner.write(lba, block_data(lba, 2));
            assert!(owner.wait(id).0.is_ok());
        }
        let id = owner.flush();
        assert!(owner.wait(id).0.is_ok());
        // Its own warm restart keeps the name.
        let mut owner = Harness::start(successor_config(0), owner.devices.clone(), StartMode::Open, 15);
        assert_eq!(owner.state(), &EngineState::Ready);
        owner.run_until_quiet();
        let log1 = &owner.devices[&DeviceRole::Log(1)];
        let superblock = hhc::recovery::newest_superblock([&log1[..UNIT_BYTES], &log1[UNIT_BYTES..2 * UNIT_BYTES]]).unwrap().1;
        assert_eq!((superblock.instance_id, superblock.previous_instance), (0x77, previous_instance));
        let back = returned(&at_loss, &owner.devices);
        if previous_instance != 0 {
            refused_warm_start(&config, back, "which took this one over");
        } else {
            let mut back = Harness::open(config.clone(), back, StartMode::Open, 13);
            back.run_until_quiet();
            assert_eq!(back.state(), &EngineState::Ready, "unnamed, the old host starts from its own mirror");
        }
    }
}
