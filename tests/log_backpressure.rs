//! Back-pressure when the log runs short of space (engine/throttle.rs):
//! writes slow down as free log space falls below the low mark, none waits
//! longer than the bound, and nothing written is lost for it.

mod common;

use common::*;
use hhc::config::Policy;
use hhc::driver::harness::Harness;
use hhc::engine::Timer;
use hhc::io::{DeviceRole, Nanos};
use std::collections::HashMap;

const MS: Nanos = 1_000_000;

/// One write of `lba`, run to completion; its latency in virtual time.
fn timed_write(harness: &mut Harness, lba: u64, write: u64) -> Nanos {
    timed_write_counting(harness, lba, write, &mut HashMap::new())
}

/// `timed_write`, counting the timers that fired while it waited.
fn timed_write_counting(harness: &mut Harness, lba: u64, write: u64, fired: &mut HashMap<Timer, u32>) -> Nanos {
    let started = harness.now;
    let id = harness.write(lba, block_data(lba, write));
    for _ in 0..1_000_000 {
        if harness.is_done(id) {
            let (result, _) = harness.take_result(id).unwrap();
            assert!(result.is_ok(), "write of lba {lba}: {result:?}");
            return harness.now - started;
        }
        if !harness.step() {
            let (timer, at) = harness.engine.next_timer().expect("a waiting write has a timer");
            *fired.entry(timer).or_default() += 1;
            let at = at.max(harness.now + 1);
            harness.now = at;
            harness.engine.handle_timer(at);
        }
    }
    panic!("write of lba {lba} never completed");
}

#[test]
fn writes_slow_down_as_the_log_runs_short_and_none_waits_past_the_bound() {
    let mut config = config(Policy::Hhc, 1);
    // A log of 16 segments of 15 slots; a cache that never runs out of
    // blocks; no write-back for the threshold's sake.
    config.cache_device_bytes = 16 << 20;
    config.log_device_bytes = 1 << 20;
    config.dirty_threshold_percent = 100;
    let mut harness = Harness::format(config, 1);
    // Nothing can be written back, so the log frees nothing.
    harness.set_stalled(DeviceRole::Backing, true);
    assert_eq!(harness.engine.stats().log_shortage_percent, 0, "an empty log is not short");
    let mut fired = HashMap::new();
    let latencies: Vec<Nanos> = (0..300).map(|lba| timed_write_counting(&mut harness, lba, 1, &mut fired)).collect();
    let stats = harness.engine.stats();
    assert!(stats.writes_throttled > 0, "{stats:?}");
    // Throttled writes came in on the admission timer, not on the tick.
    assert!(fired.get(&Timer::ThrottleAdmit).is_some_and(|&n| n > 0), "timers fired: {fired:?}");
    // The stats say why writes slowed: the log is short of space.
    assert!((1..=100).contains(&stats.log_shortage_percent), "{stats:?}");
    let early = latencies[..50].iter().max().unwrap();
    let late: Nanos = latencies[250..].iter().sum::<Nanos>() / 50;
    assert!(*early < MS, "writes into a log with room waited {early} ns");
    assert!(late > 5 * MS, "writes into a full log were not slowed: {late} ns on average: {stats:?}");
    let worst = latencies.iter().max().unwrap();
    assert!(*worst <= 21 * MS, "a write waited {worst} ns for admission");
    // Once the backing device takes writes again, every block is there.
    harness.set_stalled(DeviceRole::Backing, false);
    let flush = harness.flush();
    harness.run_until_done(flush);
    let all = read_all(&mut harness, 300);
    for (lba, block) in all.iter().enumerate() {
        assert_eq!(decode_block(lba as u64, block), Some(1), "lba {lba}");
    }
}

/// Cold blocks (written once, never written back) come round to the head on
/// every pass of the log, in segments that are all live once compacted. The
/// cleaner moves them however live their segment is: with the backing device
/// stalled, a cleaner that wrote them back instead would hold the head, and
/// every write behind it, for as long as the backing device stays stalled.
#[test]
fn fully_live_segments_are_moved_not_written_back() {
    let mut config = config(Policy::Hhc, 1);
    // A log of 64 segments of 15 slots; a cache that never runs out of
    // blocks; no write-back for the threshold's sake.
    config.cache_device_bytes = 16 << 20;
    config.log_device_bytes = 4 << 20;
    config.dirty_threshold_percent = 100;
    let mut harness = Harness::format(config, 1);
    harness.set_stalled(DeviceRole::Backing, true);
    const COLD: u64 = 200;
    const HOT: u64 = 100;
    const ROUNDS: u64 = 40;
    for lba in 0..COLD {
        timed_write(&mut harness, lba, 1);
    }
    let mut latencies = Vec::new();
    for round in 0..ROUNDS {
        for lba in COLD..COLD + HOT {
            latencies.push(timed_write(&mut harness, lba, round + 1));
        }
    }
    let stats = harness.engine.stats();
    assert!(stats.log_wraps >= 3, "the log wrapped {} times: {stats:?}", stats.log_wraps);
    assert!(stats.log_blocks_relogged >= 2 * COLD, "cold blocks moved {} times in all", stats.log_blocks_relogged);
    assert_eq!(stats.writebacks, 0, "{stats:?}");
    // Every write goes at the pace the log frees space, none waits for the
    // stalled backing device: the head kept moving.
    let mean = latencies.iter().sum::<Nanos>() / latencies.len() as Nanos;
    assert!(mean < 5 * MS, "writes waited {mean} ns on average behind the head");
    harness.set_stalled(DeviceRole::Backing, false);
    let flush = harness.flush();
    harness.run_until_done(flush);
    let all = read_all(&mut harness, COLD + HOT);
    for (lba, block) in all.iter().enumerate() {
        let expected = if (lba as u64) < COLD { 1 } else { ROUNDS };
        assert_eq!(decode_block(lba as u64, block), Some(expected), "lba {lba}");
    }
}
