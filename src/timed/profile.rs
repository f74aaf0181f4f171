//! Device parameters of the timed simulator. Every value can be overridden
//! from a profile file of `key = value` lines (`#` starts a comment); the
//! defaults describe the paper's testbed (§3.1) and are documented with their
//! sources in docs/simulate.md. `hhc simulate --print-profile` writes this
//! file with the defaults filled in.

use std::fmt::Write as _;

/// A SATA SSD of the paper's era (120 GB, 8-channel controller).
#[derive(Clone, Debug, PartialEq)]
pub struct SsdParams {
    pub read_latency_us: f64,
    pub write_latency_us: f64,
    /// Flash channels that serve independent commands in parallel.
    pub channels: f64,
    pub read_mb_s: f64,
    pub write_mb_s: f64,
    /// Extra read service time while writes are in flight, as a fraction of
    /// the read latency at full write load (program/erase blocks the die).
    pub read_during_write_slowdown: f64,
    /// Cost of a FLUSH after the writes before it are done (volatile DRAM buffer).
    pub flush_us: f64,
}

/// A 7200 rpm SATA HDD (1 TB class), one head, write cache off.
#[derive(Clone, Debug, PartialEq)]
pub struct HddParams {
    pub rpm: f64,
    pub seek_track_to_track_ms: f64,
    pub seek_full_stroke_ms: f64,
    pub transfer_mb_s: f64,
    pub capacity_gb: f64,
    /// Controller time per command when the disk was idle or has to seek.
    pub command_overhead_us: f64,
}

/// Software RAID5 (Linux MD) of HDDs exported over 1 Gb Ethernet iSCSI.
#[derive(Clone, Debug, PartialEq)]
pub struct BackingParams {
    pub disks: f64,
    pub chunk_kib: f64,
    /// iSCSI payload bandwidth of the link, per direction.
    pub link_mb_s: f64,
    /// Round trip plus target processing, per request.
    pub request_latency_us: f64,
    /// Extra cost of SYNCHRONIZE CACHE at the target (member disk flushes).
    pub flush_us: f64,
    pub disk: HddParams,
}

/// The engine parameters the simulator chooses (Config fields); every
/// point of a run uses them. Defaults and reasons: docs/simulate.md.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineParams {
    pub dirty_threshold_percent: f64,
    pub writeback_parallelism: f64,
    pub idle_after_ms: f64,
    pub segment_kib: f64,
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

fn sata_7200rpm_1tb() -> HddParams {
    HddParams {
        rpm: 7200.0,
        seek_track_to_track_ms: 0.8,
        seek_full_stroke_ms: 15.0,
        transfer_mb_s: 125.0,
        capacity_gb: 1000.0,
        command_overhead_us: 50.0,
    }
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            ssd: SsdParams {
                read_latency_us: 80.0,
                write_latency_us: 50.0,
                channels: 4.0,
                read_mb_s: 540.0,
                write_mb_s: 480.0,
                read_during_write_slowdown: 0.5,
                flush_us: 300.0,
            },
            log_hdd: sata_7200rpm_1tb(),
            backing: BackingParams {
                disks: 5.0,
                chunk_kib: 64.0,
                link_mb_s: 112.0,
                request_latency_us: 200.0,
                flush_us: 500.0,
                disk: sata_7200rpm_1tb(),
            },
            engine: EngineParams {
                dirty_threshold_percent: 30.0,
                writeback_parallelism: 32.0,
                idle_after_ms: 50.0,
                segment_kib: 1024.0,
                log_buffers_count: 0.0,
                log_mib: 16384.0,
                steady_log_mib: 4096.0,
            },
        }
    }
}

fn hdd_entries<'a>(prefix: &'static str, hdd: &'a mut HddParams) -> Vec<(String, &'a mut f64)> {
    vec![
        (format!("{prefix}.rpm"), &mut hdd.rpm),
        (format!("{prefix}.seek_track_to_track_ms"), &mut hdd.seek_track_to_track_ms),
        (format!("{prefix}.seek_full_stroke_ms"), &mut hdd.seek_full_stroke_ms),
        (format!("{prefix}.transfer_mb_s"), &mut hdd.transfer_mb_s),
        (format!("{prefix}.capacity_gb"), &mut hdd.capacity_gb),
        (format!("{prefix}.command_overhead_us"), &mut hdd.command_overhead_us),
    ]
}

impl Profile {
    /// Every parameter with its key, in file order.
    fn entries(&mut self) -> Vec<(String, &mut f64)> {
        let ssd = &mut self.ssd;
        let mut entries = vec![
            ("ssd.read_latency_us".to_string(), &mut ssd.read_latency_us),
            ("ssd.write_latency_us".to_string(), &mut ssd.write_latency_us),
            ("ssd.channels".to_string(), &mut ssd.channels),
            ("ssd.read_mb_s".to_string(), &mut ssd.read_mb_s),
            ("ssd.write_mb_s".to_string(), &mut ssd.write_mb_s),
            ("ssd.read_during_write_slowdown".to_string(), &mut ssd.read_during_write_slowdown),
            ("ssd.flush_us".to_string(), &mut ssd.flush_us),
        ];
        entries.extend(hdd_entries("log_hdd", &mut self.log_hdd));
        let backing = &mut self.backing;
        entries.extend([
            ("backing.disks".to_string(), &mut backing.disks),
            ("backing.chunk_kib".to_string(), &mut backing.chunk_kib),
            ("backing.link_mb_s".to_string(), &mut backing.link_mb_s),
            ("backing.request_latency_us".to_string(), &mut backing.request_latency_us),
            ("backing.flush_us".to_string(), &mut backing.flush_us),
        ]);
        entries.extend(hdd_entries("backing.disk", &mut backing.disk));
        let engine = &mut self.engine;
        entries.extend([
            ("engine.dirty_threshold_percent".to_string(), &mut engine.dirty_threshold_percent),
            ("engine.writeback_parallelism".to_string(), &mut engine.writeback_parallelism),
            ("engine.idle_after_ms".to_string(), &mut engine.idle_after_ms),
            ("engine.segment_kib".to_string(), &mut engine.segment_kib),
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
        let positive = [
            ("ssd.channels", self.ssd.channels),
            ("ssd.read_mb_s", self.ssd.read_mb_s),
            ("ssd.write_mb_s", self.ssd.write_mb_s),
            ("log_hdd.rpm", self.log_hdd.rpm),
            ("log_hdd.transfer_mb_s", self.log_hdd.transfer_mb_s),
            ("log_hdd.capacity_gb", self.log_hdd.capacity_gb),
            ("backing.chunk_kib", self.backing.chunk_kib),
            ("backing.link_mb_s", self.backing.link_mb_s),
            ("backing.disk.rpm", self.backing.disk.rpm),
            ("backing.disk.transfer_mb_s", self.backing.disk.transfer_mb_s),
            ("backing.disk.capacity_gb", self.backing.disk.capacity_gb),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value <= 0.0) {
            return Err(format!("{name} must be greater than 0"));
        }
        if self.backing.disks < 3.0 || self.backing.disks.fract() != 0.0 {
            return Err("backing.disks must be a whole number >= 3 (RAID5)".into());
        }
        if self.ssd.channels.fract() != 0.0 {
            return Err("ssd.channels must be a whole number".into());
        }
        let chunk_bytes = self.backing.chunk_kib * 1024.0;
        if chunk_bytes % 4096.0 != 0.0 {
            return Err("backing.chunk_kib must be a multiple of 4".into());
        }
        let e = &self.engine;
        let whole = [
            ("engine.dirty_threshold_percent", e.dirty_threshold_percent, 1.0, 100.0),
            ("engine.writeback_parallelism", e.writeback_parallelism, 1.0, 4096.0),
            ("engine.segment_kib", e.segment_kib, 64.0, 65536.0),
            ("engine.log_buffers_count", e.log_buffers_count, 0.0, 1024.0),
            ("engine.log_mib", e.log_mib, 1.0, 1048576.0),
            ("engine.steady_log_mib", e.steady_log_mib, 1.0, 1048576.0),
        ];
        if let Some((name, value, low, high)) = whole.iter().find(|(_, v, low, high)| v.fract() != 0.0 || v < low || v > high) {
            return Err(format!("{name} = {value} must be a whole number in {low}..={high}"));
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
