//! The offline tools on log images built with the format functions: inspect
//! reports the run, recover puts the live blocks on the backing file.

use hhc::format::segment::{PartFlags, PartPlace};
use hhc::format::{seal, set_revoke, set_slot_lba, LogSuperblock, SegmentLayout, UNIT_BYTES};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BLOCK_SIZE: u32 = 4096;
const SEGMENT_BYTES: u32 = 8 * BLOCK_SIZE;
const SEGMENTS_COUNT: u32 = 6;
const BACKING_BLOCKS: u64 = 32;
const SEGMENTS_OFFSET_BYTES: u64 = 2 * UNIT_BYTES as u64;

fn block_data(lba: u64, version: u8) -> Vec<u8> {
    let mut data = vec![version; BLOCK_SIZE as usize];
    data[..8].copy_from_slice(&lba.to_le_bytes());
    data
}

/// (sequence, barrier, entries (lba, version), revokes)
type Segment = (u64, bool, Vec<(u64, u8)>, Vec<u64>);

fn image(segment_bytes: u32, segments: &[Segment]) -> Vec<u8> {
    let layout = SegmentLayout::new(segment_bytes, BLOCK_SIZE).unwrap();
    let mut log = vec![0u8; (SEGMENTS_OFFSET_BYTES + SEGMENTS_COUNT as u64 * segment_bytes as u64) as usize];
    let superblock = LogSuperblock {
        instance_id: 0xABCD,
        write_seq: 1,
        block_size: BLOCK_SIZE,
        segment_bytes,
        segments_count: SEGMENTS_COUNT,
        head_segment: 0,
        head_sequence: 10,
        mirrors_count: 2,
        mirror_index: 0,
        backing_blocks: BACKING_BLOCKS,
        in_sync_mask: 0b11,
        run: 1,
        replayed: false,
        previous_instance: 0,
    };
    superblock.encode(&mut log[UNIT_BYTES..]);
    for (index, (sequence, barrier, entries, revokes)) in segments.iter().enumerate() {
        let mut buf = vec![0u8; segment_bytes as usize];
        for (slot, &(lba, version)) in entries.iter().enumerate() {
            set_slot_lba(&layout, &mut buf, slot as u32, lba);
            let start = layout.slot_offset(slot as u32);
            buf[start..start + BLOCK_SIZE as usize].copy_from_slice(&block_data(lba, version));
        }
        for (i, &lba) in revokes.iter().enumerate() {
            set_revoke(&layout, &mut buf, i as u32, lba);
        }
        let place = PartPlace {
            instance_id: 0xABCD,
            segment_index: index as u32,
            sequence: *sequence,
            part: 0,
            first_block: 0,
            run: 1,
        };
        // Every segment holds a block the replay needs: the head stays at the first.
        let flags = PartFlags { barrier: *barrier, segment_end: true, gap_blocks: 0, head_sequence: segments[0].0 };
        let len = seal(&layout, &mut buf, &place, flags, entries.len() as u32, revokes.len() as u32);
        let offset = (SEGMENTS_OFFSET_BYTES + index as u64 * segment_bytes as u64) as usize;
        log[offset..offset + len].copy_from_slice(&buf[..len]);
    }
    log
}

/// Block 1 overwritten, block 2 revoked, block 9 only after the last barrier.
fn segments() -> Vec<Segment> {
    vec![
        (10, false, vec![(1, 1), (2, 1), (3, 1)], vec![]),
        (11, true, vec![(1, 2), (4, 1)], vec![2]),
        (12, false, vec![(9, 1)], vec![]),
    ]
}

fn expected_backing() -> Vec<u8> {
    let mut backing = vec![0u8; (BACKING_BLOCKS * BLOCK_SIZE as u64) as usize];
    for (lba, version) in [(1u64, 2u8), (3, 1), (4, 1)] {
        let start = (lba * BLOCK_SIZE as u64) as usize;
        backing[start..start + BLOCK_SIZE as usize].copy_from_slice(&block_data(lba, version));
    }
    backing
}

fn hhc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hhc")).args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "hhc failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

struct Files {
    _dir: tempfile::TempDir,
    log0: PathBuf,
    log1: PathBuf,
    backing: PathBuf,
}

fn files() -> Files {
    let dir = tempfile::tempdir().unwrap();
    let (log0, log1, backing) = (dir.path().join("log0"), dir.path().join("log1"), dir.path().join("backing"));
    let log = image(SEGMENT_BYTES, &segments());
    std::fs::write(&log0, &log).unwrap();
    // Mirror 1 has a corrupt copy of the second segment; mirror 0's is good.
    let mut corrupt = log;
    corrupt[(SEGMENTS_OFFSET_BYTES + SEGMENT_BYTES as u64 + 5000) as usize] ^= 1;
    std::fs::write(&log1, &corrupt).unwrap();
    std::fs::write(&backing, vec![0u8; (BACKING_BLOCKS * BLOCK_SIZE as u64) as usize]).unwrap();
    Files { _dir: dir, log0, log1, backing }
}

#[test]
fn inspect_reports_the_run_and_live_blocks() {
    let files = files();
    let json = stdout(&hhc(&["log", "inspect", "--log", path_str(&files.log0), "--json"]));
    for expected in [
        "\"valid_segments\":3",
        "\"first_sequence\":10",
        "\"last_sequence\":12",
        "\"barriers_count\":1",
        "\"last_barrier_sequence\":11",
        "\"live_blocks\":3",
        "\"revokes_applied\":1",
        "\"corrupt_copies_detected\":0",
        "\"write_seq\":1",
        "\"recorded_head_sequence\":10",
    ] {
        assert!(json.contains(expected), "{expected} missing from {json}");
    }
    assert_eq!(json.trim().lines().count(), 1);
    let text = stdout(&hhc(&["log", "inspect", "--log", path_str(&files.log1)]));
    assert!(text.contains("valid run: 1 parts in 1 segments, sequences 10..=10"), "{text}");
    assert!(text.contains("live blocks at last barrier: 0"), "{text}");
    assert!(text.contains("head recorded by the run's newest part: sequence 10"), "{text}");
}

/// `image` of one segment, 10, rewritten as two parts with 3 blocks left
/// unwritten between them: a barrier with block 1 (version 1), then after
/// the gap a barrier with block 1 (version 2) and block 3.
fn gapped_image() -> Vec<u8> {
    let layout = SegmentLayout::new(SEGMENT_BYTES, BLOCK_SIZE).unwrap();
    let mut log = image(SEGMENT_BYTES, &[]);
    let place = PartPlace { instance_id: 0xABCD, segment_index: 0, sequence: 10, part: 0, first_block: 0, run: 1 };
    let parts = [
        (place, vec![(1, 1)], PartFlags { barrier: true, segment_end: false, gap_blocks: 3, head_sequence: 10 }),
        (PartPlace { part: 1, first_block: 5, ..place }, vec![(1, 2), (3, 1)], PartFlags { barrier: true, segment_end: true, gap_blocks: 0, head_sequence: 10 }),
    ];
    for (place, entries, flags) in parts {
        let mut buf = vec![0u8; (SEGMENT_BYTES - place.first_block * BLOCK_SIZE) as usize];
        for (slot, &(lba, version)) in entries.iter().enumerate() {
            set_slot_lba(&layout, &mut buf, slot as u32, lba);
            let start = layout.slot_offset(slot as u32);
            buf[start..start + BLOCK_SIZE as usize].copy_from_slice(&block_data(lba, version));
        }
        let len = seal(&layout, &mut buf, &place, flags, entries.len() as u32, 0);
        let offset = (SEGMENTS_OFFSET_BYTES + (place.first_block * BLOCK_SIZE) as u64) as usize;
        log[offset..offset + len].copy_from_slice(&buf[..len]);
    }
    log
}

#[test]
fn inspect_and_recover_follow_a_gap_between_parts() {
    let files = files();
    std::fs::write(&files.log0, gapped_image()).unwrap();
    let json = stdout(&hhc(&["log", "inspect", "--log", path_str(&files.log0), "--json"]));
    for expected in ["\"valid_parts\":2", "\"barriers_count\":2", "\"gapped_parts\":1", "\"gap_blocks\":3", "\"live_blocks\":2"] {
        assert!(json.contains(expected), "{expected} missing from {json}");
    }
    let text = stdout(&hhc(&["log", "inspect", "--log", path_str(&files.log0)]));
    assert!(text.contains("gaps: 1 parts left 3 blocks unwritten after them"), "{text}");
    let json = stdout(&hhc(&["recover", "--log", path_str(&files.log0), "--backing", path_str(&files.backing), "--json"]));
    assert!(json.contains("\"blocks_replayed\":2"), "{json}");
    let backing = std::fs::read(&files.backing).unwrap();
    let block = |lba: usize| &backing[lba * BLOCK_SIZE as usize..(lba + 1) * BLOCK_SIZE as usize];
    assert_eq!((block(1), block(3)), (&block_data(1, 2)[..], &block_data(3, 1)[..]));
}

#[test]
fn inspect_without_superblock_needs_and_uses_geometry_flags() {
    let files = files();
    let mut log = std::fs::read(&files.log0).unwrap();
    log[..2 * UNIT_BYTES].fill(0);
    std::fs::write(&files.log0, &log).unwrap();
    let refused = hhc(&["log", "inspect", "--log", path_str(&files.log0)]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--block-size"));
    let args = ["log", "inspect", "--log", path_str(&files.log0), "--block-size", "4096", "--segment-size", "32768"];
    let text = stdout(&hhc(&args));
    assert!(text.contains("valid parts: 3"), "{text}");
}

#[test]
fn recover_replays_onto_the_backing_file_once() {
    let files = files();
    let logs = format!("{},{}", path_str(&files.log1), path_str(&files.log0));
    let dry = stdout(&hhc(&["recover", "--log", &logs, "--backing", path_str(&files.backing), "--dry-run"]));
    assert!(dry.contains("would replay 3 blocks"), "{dry}");
    assert!(std::fs::read(&files.backing).unwrap().iter().all(|&b| b == 0), "a dry run wrote");

    let json = stdout(&hhc(&["recover", "--log", &logs, "--backing", path_str(&files.backing), "--json"]));
    assert!(json.contains("\"blocks_replayed\":3") && json.contains("\"mirrors_reinitialised\":2"), "{json}");
    assert!(json.contains("\"new_head_segment\":3") && json.contains("\"new_head_sequence\":13"), "{json}");
    assert_eq!(std::fs::read(&files.backing).unwrap(), expected_backing());

    // The log was re-initialised past the replayed segments.
    let after = stdout(&hhc(&["log", "inspect", "--log", path_str(&files.log0), "--json"]));
    assert!(after.contains("\"valid_segments\":0") && after.contains("\"write_seq\":2"), "{after}");
    // It says it was replayed: the cache that wrote it must not start warm.
    assert!(after.contains("\"replayed\":true"), "{after}");
    let text = stdout(&hhc(&["log", "inspect", "--log", path_str(&files.log0)]));
    assert!(text.contains("replayed: this log was replayed onto the backing device"), "{text}");
}

#[test]
fn recover_refuses_missing_files_and_mismatched_geometry() {
    let files = files();
    let missing = files.log0.with_file_name("nope");
    let output = hhc(&["recover", "--log", path_str(&missing), "--backing", path_str(&files.backing)]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("nope"));

    std::fs::write(&files.log1, image(2 * SEGMENT_BYTES, &[])).unwrap();
    let logs = format!("{},{}", path_str(&files.log0), path_str(&files.log1));
    let output = hhc(&["recover", "--log", &logs, "--backing", path_str(&files.backing)]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("mismatched geometry"));

    std::fs::write(&files.backing, [0u8; 4096]).unwrap();
    let output = hhc(&["recover", "--log", path_str(&files.log0), "--backing", path_str(&files.backing)]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("was made for 32 blocks"));
    assert!(
        std::fs::read(&files.log0).unwrap() == image(SEGMENT_BYTES, &segments()),
        "a refused recover wrote the log"
    );
}
