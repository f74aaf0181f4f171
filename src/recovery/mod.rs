//! Recovery after the loss of the cache device (docs/design.md §3.6): scan the log
//! mirrors from the head (`scan`), replay every block live at the last barrier
//! onto the backing device and re-initialise the log (`replay`). Both are
//! sans-IO machines; any driver can run them, and `log_recovery` runs one
//! after the other as a single machine (the torture simulator, `hhc recover`).

pub mod log_recovery;
pub mod replay;
pub mod scan;
mod scan_windows;
pub mod superblock_probe;

#[cfg(test)]
mod test_log;

pub use log_recovery::{LogRecovery, Recovered, RecoveryError, RecoveryProgress, RecoveryStage};
pub use replay::{plan_replay, recorded_head, LiveBlock, Replay, ReplayError, ReplayPlan, ReplayReport};
pub use scan::{LogScanner, ScanError, ScannedLog, ScannedSegment};

use crate::config::LogLayout;
use crate::format::{FormatError, LogSuperblock, UNIT_BYTES};

/// The log layout a superblock describes. Must agree with `Config::validate`:
/// segments start at the first block boundary after the two superblock units.
pub fn log_layout(superblock: &LogSuperblock) -> Result<LogLayout, FormatError> {
    let segment = superblock.segment_layout()?;
    let block_size = superblock.block_size as u64;
    let segments_offset_bytes = (2 * UNIT_BYTES as u64).div_ceil(block_size) * block_size;
    Ok(LogLayout { segment, segments_count: superblock.segments_count, segments_offset_bytes })
}

/// Picks the valid copy with the highest `write_seq` among superblock units;
/// returns its position in `units` too. Ties go to the first.
pub fn newest_superblock<'a>(units: impl IntoIterator<Item = &'a [u8]>) -> Option<(usize, LogSuperblock)> {
    let mut newest: Option<(usize, LogSuperblock)> = None;
    for (position, unit) in units.into_iter().enumerate() {
        let Ok(superblock) = LogSuperblock::decode(unit) else { continue };
        if newest.as_ref().is_none_or(|(_, best)| superblock.write_seq > best.write_seq) {
            newest = Some((position, superblock));
        }
    }
    newest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn layout_matches_config_validate() {
        for (block_size, segment_bytes) in [(4096, 1 << 20), (16384, 1 << 20), (65536, 4 << 20)] {
            let config = Config { block_size, segment_bytes, log_device_bytes: 64 << 20, ..Config::default() };
            let (_, expected) = config.validate().unwrap();
            let superblock = LogSuperblock {
                instance_id: 1,
                write_seq: 1,
                block_size,
                segment_bytes,
                segments_count: expected.segments_count,
                head_segment: 0,
                head_sequence: 1,
                mirrors_count: 1,
                mirror_index: 0,
                backing_blocks: 100,
                in_sync_mask: 1,
                run: 1,
                replayed: false,
                previous_instance: 0,
            };
            assert_eq!(log_layout(&superblock), Ok(expected));
        }
    }

    #[test]
    fn newest_superblock_skips_invalid_copies() {
        let superblock = |write_seq| LogSuperblock {
            instance_id: 1,
            write_seq,
            block_size: 4096,
            segment_bytes: 1 << 20,
            segments_count: 4,
            head_segment: 0,
            head_sequence: 1,
            mirrors_count: 1,
            mirror_index: 0,
            backing_blocks: 100,
            in_sync_mask: 1,
            run: 1,
            replayed: false,
            previous_instance: 0,
        };
        let mut units = vec![vec![0u8; UNIT_BYTES]; 3];
        superblock(5).encode(&mut units[0]);
        superblock(9).encode(&mut units[1]);
        superblock(7).encode(&mut units[2]);
        assert_eq!(newest_superblock(units.iter().map(Vec::as_slice)), Some((1, superblock(9))));
        units[1][100] ^= 1;
        assert_eq!(newest_superblock(units.iter().map(Vec::as_slice)), Some((2, superblock(7))));
        assert_eq!(newest_superblock([&[0u8; 10][..]]), None);
    }
}
