//! Write-back runs and the backing device's stripe (`Config::
//! backing_stripe_bytes`): runs of adjacent dirty blocks never cross a
//! stripe boundary, and a stripe whose blocks are all dirty goes back in
//! one full-stripe write (no read-modify-write on a RAID5).

mod common;

use common::*;
use hhc::config::Policy;
use hhc::driver::harness::Harness;

const BS: u64 = 4096;
const STRIPE_BLOCKS: u64 = 16;

/// Backing writes (first block, blocks) of writing LBAs 10..50 back.
fn writeback_of_a_dirty_range(stripe_bytes: u32) -> Vec<(u64, u64)> {
    let mut config = config(Policy::WriteBack, 1);
    config.dirty_threshold_percent = 100;
    config.backing_stripe_bytes = stripe_bytes;
    let mut harness = Harness::format(config, 1);
    let (first, count) = (10u64, 40u32);
    let data = (first..first + count as u64).flat_map(|lba| block_data(lba, 1)).collect();
    let id = harness.submit(hhc::io::RequestKind::Write, first, count, Some(data));
    // Write-back starts on its own once the device is idle; flush_all
    // finishes whatever it left.
    harness.run_until_quiet();
    assert!(harness.take_result(id).is_some_and(|(result, _)| result.is_ok()));
    let now = harness.now;
    harness.engine.flush_all(now).expect("flush_all starts");
    for _ in 0..1_000_000 {
        if !harness.engine.flush_all_progress().in_progress {
            break;
        }
        if !harness.step() {
            harness.idle_for(1_000_000);
        }
    }
    assert!(!harness.engine.flush_all_progress().in_progress);
    let mut writes: Vec<(u64, u64)> = harness.backing_writes.iter().map(|&(offset, len)| (offset / BS, len / BS)).collect();
    writes.sort();
    let covered: u64 = writes.iter().map(|&(_, blocks)| blocks).sum();
    assert_eq!(covered, count as u64, "{writes:?}");
    writes
}

fn crosses_a_stripe(&(first, blocks): &(u64, u64)) -> bool {
    first / STRIPE_BLOCKS != (first + blocks - 1) / STRIPE_BLOCKS
}

#[test]
fn runs_stay_inside_stripes_and_whole_stripes_go_back_in_one_write() {
    let writes = writeback_of_a_dirty_range((STRIPE_BLOCKS * BS) as u32);
    assert!(!writes.iter().any(crosses_a_stripe), "{writes:?}");
    // Blocks 16..32 and 32..48 are whole stripes, all dirty.
    assert!(writes.contains(&(16, 16)) && writes.contains(&(32, 16)), "{writes:?}");
}

#[test]
fn without_a_stripe_runs_cross_boundaries_so_the_check_above_can_fail() {
    let writes = writeback_of_a_dirty_range(0);
    assert!(writes.iter().any(crosses_a_stripe), "{writes:?}");
}

#[test]
fn a_stripe_that_is_not_a_whole_number_of_blocks_is_refused() {
    let mut config = config(Policy::WriteBack, 1);
    config.backing_stripe_bytes = 6144;
    assert!(config.validate().unwrap_err().message.contains("backing_stripe 6144 bytes must be a multiple of block_size"));
    config.backing_stripe_bytes = 2 << 20;
    assert!(config.validate().unwrap_err().message.contains("backing_stripe 2097152 bytes"));
}
