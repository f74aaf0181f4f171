//! Opening log devices (or image files) for the tools. The newest valid
//! superblock decides the geometry; command-line geometry is only a fallback.

use hhc::config::LogLayout;
use hhc::format::{LogSuperblock, LOG_SUPERBLOCK_COPIES, UNIT_BYTES};
use hhc::recovery::{log_layout, newest_superblock};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub struct LogFile {
    pub path: PathBuf,
    pub file: File,
    pub len_bytes: u64,
    /// The unit holding the newest valid superblock copy, and that copy.
    pub newest: Option<(u64, LogSuperblock)>,
}

impl LogFile {
    pub fn open(path: &Path, writable: bool) -> Result<LogFile, String> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| format!("cannot open log {}: {e}", path.display()))?;
        // Seeking also sizes block devices, whose metadata length is 0.
        let len_bytes = file.seek(SeekFrom::End(0)).map_err(|e| format!("cannot size log {}: {e}", path.display()))?;
        let units: Vec<Vec<u8>> = (0..LOG_SUPERBLOCK_COPIES).map(|unit| read_unit(&file, unit)).collect();
        let newest = newest_superblock(units.iter().map(Vec::as_slice)).map(|(unit, sb)| (unit as u64, sb));
        Ok(LogFile { path: path.to_path_buf(), file, len_bytes, newest })
    }

    /// The device must hold every segment the layout describes.
    pub fn check_len(&self, layout: &LogLayout) -> Result<(), String> {
        let needed_bytes = layout.segment_offset(layout.segments_count);
        if self.len_bytes < needed_bytes {
            return Err(format!(
                "log {} has {} bytes but its superblock describes {} segments needing {needed_bytes} bytes",
                self.path.display(),
                self.len_bytes,
                layout.segments_count
            ));
        }
        Ok(())
    }
}

/// An unreadable or short unit reads as empty, which no decoder accepts.
fn read_unit(file: &File, unit: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; UNIT_BYTES];
    match file.read_exact_at(&mut bytes, unit * UNIT_BYTES as u64) {
        Ok(()) => bytes,
        Err(_) => Vec::new(),
    }
}

/// Geometry shared by every log that has a valid superblock, from the newest one.
pub fn common_layout(logs: &[LogFile]) -> Result<(LogSuperblock, LogLayout), String> {
    let with_superblock: Vec<(&LogFile, &LogSuperblock)> =
        logs.iter().filter_map(|log| log.newest.as_ref().map(|(_, sb)| (log, sb))).collect();
    let (_, newest) = with_superblock
        .iter()
        .max_by_key(|(_, sb)| sb.write_seq)
        .ok_or_else(|| "no valid log superblock in any log file".to_string())?;
    let geometry = |sb: &LogSuperblock| (sb.block_size, sb.segment_bytes, sb.segments_count);
    for (log, sb) in &with_superblock {
        if geometry(sb) != geometry(newest) {
            return Err(format!(
                "mismatched geometry: {} has (block size, segment bytes, segments) = {:?}, the newest superblock has {:?}",
                log.path.display(),
                geometry(sb),
                geometry(newest)
            ));
        }
    }
    let layout = log_layout(newest).map_err(|e| format!("log superblock geometry: {e}"))?;
    Ok(((*newest).clone(), layout))
}
