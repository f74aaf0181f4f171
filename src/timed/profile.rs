//! Device parameters of the timed simulator. Every value can be overridden
//! from a profile file of `key = value` lines (`#` starts a comment); the
//! defaults describe the paper's testbed (§3.1) and are documented with their
//! sources in docs/simulate.md. `hhc simulate --print-profile` writes this
//! file with the defaults filled in.

use std::fmt::Write as _;

pub use crate::models::params::{BackingParams, HddParams, SsdParams};

/// The engine parameters the simulator chooses (Config fields); every
/// point of a run uses them. Defaults and reasons: docs/simulate.md.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineParams {
    pub dirty_threshold_percent: f64,
    pub writeback_parallelism: f64,
    pub idle_after_ms: f64,
    pub segment_kib: f64,
    /// `Config::barrier_gap_bytes` in KiB (0: never a gap).
    pub barrier_gap_kib: f64,
    pub log_buffers_count: f64,
    /// Log device size of Figs. 5-7, memory and custom, not scaled: large
    /// enough that the log never wraps in a run (the paper's 1 TB HDD).
    pub log_mib: f64,
    /// Log device size of the steady-state experiment before scaling
    /// (multiplied by `--scale` like the cache), small enough to wrap.
    pub steady_log_mib: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub ssd: SsdParams,
    pub log_hdd: HddParams,
    pub backing: BackingParams,
    pub engine: EngineParams,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            ssd: SsdParams::default(),
            log_hdd: HddParams::default(),
            backing: BackingParams::default(),
            engine: EngineParams {
                dirty_threshold_percent: 30.0,
                writeback_parallelism: 32.0,
                idle_after_ms: 50.0,
                segment_kib: 1024.0,
                barrier_gap_kib: (crate::config::BARRIER_GAP_BYTES_DEFAULT >> 10) as f64,
                log_buffers_count: 0.0,
                log_mib: 16384.0,
                steady_log_mib: 4096.0,
            },
        }
    }
}

/// `entries` with `<prefix>.` before each key.
fn prefixed<'a>(prefix: &str, entries: Vec<(String, &'a mut f64)>) -> impl Iterator<Item = (String, &'a mut f64)> + 'a {
    let prefix = prefix.to_string();
    entries.into_iter().map(move |(key, value)| (format!("{prefix}.{key}"), value))
}

impl Profile {
    /// Every parameter with its key, in file order.
    fn entries(&mut self) -> Vec<(String, &mut f64)> {
        let mut entries: Vec<(String, &mut f64)> = prefixed("ssd", self.ssd.entries()).collect();
        entries.extend(prefixed("log_hdd", self.log_hdd.entries()));
        entries.extend(prefixed("backing", self.backing.entries()));
        let engine = &mut self.engine;
        entries.extend([
            ("engine.dirty_threshold_percent".to_string(), &mut engine.dirty_threshold_percent),
            ("engine.writeback_parallelism".to_string(), &mut engine.writeback_parallelism),
            ("engine.idle_after_ms".to_string(), &mut engine.idle_after_ms),
            ("engine.segment_kib".to_string(), &mut engine.segment_kib),
            ("engine.barrier_gap_kib".to_string(), &mut engine.barrier_gap_kib),
            ("engine.log_buffers_count".to_string(), &mut engine.log_buffers_count),
            ("engine.log_mib".to_string(), &mut engine.log_mib),
            ("engine.steady_log_mib".to_string(), &mut engine.steady_log_mib),
        ]);
        entries
    }

    /// Applies the `key = value` lines of a profile file over `self`.
    pub fn apply_text(&mut self, text: &str) -> Result<(), String> {
        for (line_index, raw_line) in text.lines().enumerate() {
            let line = raw_line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let line_number = line_index + 1;
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("line {line_number}: expected 'key = value', got '{line}'"))?;
            let (key, value) = (key.trim(), value.trim());
            let value: f64 = value
                .parse()
                .map_err(|_| format!("line {line_number}: '{value}' is not a number"))?;
            if !value.is_finite() || value < 0.0 {
                return Err(format!("line {line_number}: {key} must be a finite number >= 0"));
            }
            let mut entries = self.entries();
            let slot = entries
                .iter_mut()
                .find(|(name, _)| name == key)
                .ok_or_else(|| format!("line {line_number}: unknown parameter '{key}'"))?;
            *slot.1 = value;
        }
        self.validate()
    }

    /// Rejects values that would make a model divide by zero or loop.
    pub fn validate(&self) -> Result<(), String> {
        self.ssd.validate("ssd.")?;
        self.log_hdd.validate("log_hdd.")?;
        self.backing.validate("backing.")?;
        let e = &self.engine;
        let whole = [
            ("engine.dirty_threshold_percent", e.dirty_threshold_percent, 1.0, 100.0),
            ("engine.writeback_parallelism", e.writeback_parallelism, 1.0, 4096.0),
            ("engine.segment_kib", e.segment_kib, 64.0, 65536.0),
            ("engine.barrier_gap_kib", e.barrier_gap_kib, 0.0, 65536.0),
            ("engine.log_buffers_count", e.log_buffers_count, 0.0, 1024.0),
            ("engine.log_mib", e.log_mib, 1.0, 1048576.0),
            ("engine.steady_log_mib", e.steady_log_mib, 1.0, 1048576.0),
        ];
        if let Some((name, value, low, high)) = whole.iter().find(|(_, v, low, high)| v.fract() != 0.0 || v < low || v > high) {
            return Err(format!("{name} = {value} must be a whole number in {low}..={high}"));
        }
        if e.barrier_gap_kib % 4.0 != 0.0 {
            return Err(format!("engine.barrier_gap_kib = {} must be a multiple of the 4 KiB block", e.barrier_gap_kib));
        }
        Ok(())
    }

    pub fn load(path: &std::path::Path) -> Result<Profile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read profile {}: {e}", path.display()))?;
        let mut profile = Profile::default();
        profile.apply_text(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(profile)
    }

    /// The profile as a file `apply_text` reads back.
    pub fn to_text(&self) -> String {
        let mut copy = self.clone();
        let mut text = String::from("# HHC timed simulator device profile; sources in docs/simulate.md\n");
        for (key, value) in copy.entries() {
            let _ = writeln!(text, "{key} = {value}");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_and_overrides_apply() {
        let mut profile = Profile::default();
        profile.apply_text("ssd.read_latency_us = 120 # slower\n\nbacking.disk.rpm=5400").unwrap();
        assert_eq!(profile.ssd.read_latency_us, 120.0);
        assert_eq!(profile.backing.disk.rpm, 5400.0);
        assert_eq!(profile.log_hdd.rpm, 7200.0);
        let mut reread = Profile::default();
        reread.apply_text(&profile.to_text()).unwrap();
        assert_eq!(reread, profile);
    }

    #[test]
    fn bad_lines_name_the_problem() {
        let mut profile = Profile::default();
        assert!(profile.apply_text("ssd.nope = 1").unwrap_err().contains("unknown parameter"));
        assert!(profile.apply_text("ssd.channels").unwrap_err().contains("line 1"));
        assert!(profile.apply_text("ssd.channels = x").unwrap_err().contains("not a number"));
        assert!(profile.apply_text("backing.disks = 2").unwrap_err().contains("RAID5"));
        assert!(profile.apply_text("ssd.read_mb_s = 0").unwrap_err().contains("greater than 0"));
    }
}
