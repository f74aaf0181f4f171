//! The parameters of the device models and their defaults (the paper's
//! testbed, §3.1; sources in docs/simulate.md). Each parameter has a key:
//! the timed simulator's profile file names it `<section>.<key>`
//! (`ssd.read_latency_us`, `log_hdd.rpm`, `backing.disk.rpm`), the test
//! device-model bdev (docs/spdk.md) by the key alone.

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
    /// iSCSI payload bandwidth of the link, per direction; 0: no link (the
    /// disks alone, e.g. under a real iSCSI target).
    pub link_mb_s: f64,
    /// Round trip plus target processing, per request (0 with no link).
    pub request_latency_us: f64,
    /// Extra cost of SYNCHRONIZE CACHE at the target (member disk flushes).
    pub flush_us: f64,
    pub disk: HddParams,
}

/// A parameter's key (without the section prefix) and its value.
pub type Entry<'a> = (String, &'a mut f64);

impl Default for SsdParams {
    fn default() -> Self {
        SsdParams {
            read_latency_us: 80.0,
            write_latency_us: 50.0,
            channels: 4.0,
            read_mb_s: 540.0,
            write_mb_s: 480.0,
            read_during_write_slowdown: 0.5,
            flush_us: 300.0,
        }
    }
}

impl Default for HddParams {
    /// Seagate Barracuda 7200.12 1 TB class.
    fn default() -> Self {
        HddParams {
            rpm: 7200.0,
            seek_track_to_track_ms: 0.8,
            seek_full_stroke_ms: 15.0,
            transfer_mb_s: 125.0,
            capacity_gb: 1000.0,
            command_overhead_us: 50.0,
        }
    }
}

impl Default for BackingParams {
    fn default() -> Self {
        BackingParams {
            disks: 5.0,
            chunk_kib: 64.0,
            link_mb_s: 112.0,
            request_latency_us: 200.0,
            flush_us: 500.0,
            disk: HddParams::default(),
        }
    }
}

/// The first of `values` that is not greater than 0, as an error naming it.
fn require_positive(prefix: &str, values: &[(&str, f64)]) -> Result<(), String> {
    match values.iter().find(|(_, value)| *value <= 0.0) {
        Some((name, _)) => Err(format!("{prefix}{name} must be greater than 0")),
        None => Ok(()),
    }
}

impl SsdParams {
    /// Every parameter with its key, in profile-file order.
    pub fn entries(&mut self) -> Vec<Entry<'_>> {
        vec![
            ("read_latency_us".to_string(), &mut self.read_latency_us),
            ("write_latency_us".to_string(), &mut self.write_latency_us),
            ("channels".to_string(), &mut self.channels),
            ("read_mb_s".to_string(), &mut self.read_mb_s),
            ("write_mb_s".to_string(), &mut self.write_mb_s),
            ("read_during_write_slowdown".to_string(), &mut self.read_during_write_slowdown),
            ("flush_us".to_string(), &mut self.flush_us),
        ]
    }

    /// Rejects values that would make the model divide by zero; errors name
    /// the key as `<prefix><key>`.
    pub fn validate(&self, prefix: &str) -> Result<(), String> {
        require_positive(
            prefix,
            &[("channels", self.channels), ("read_mb_s", self.read_mb_s), ("write_mb_s", self.write_mb_s)],
        )?;
        if self.channels.fract() != 0.0 {
            return Err(format!("{prefix}channels must be a whole number"));
        }
        Ok(())
    }
}

impl HddParams {
    /// Every parameter with its key, in profile-file order.
    pub fn entries(&mut self) -> Vec<Entry<'_>> {
        vec![
            ("rpm".to_string(), &mut self.rpm),
            ("seek_track_to_track_ms".to_string(), &mut self.seek_track_to_track_ms),
            ("seek_full_stroke_ms".to_string(), &mut self.seek_full_stroke_ms),
            ("transfer_mb_s".to_string(), &mut self.transfer_mb_s),
            ("capacity_gb".to_string(), &mut self.capacity_gb),
            ("command_overhead_us".to_string(), &mut self.command_overhead_us),
        ]
    }

    pub fn validate(&self, prefix: &str) -> Result<(), String> {
        require_positive(
            prefix,
            &[("rpm", self.rpm), ("transfer_mb_s", self.transfer_mb_s), ("capacity_gb", self.capacity_gb)],
        )
    }
}

impl BackingParams {
    /// Every parameter with its key (the member disks' as `disk.<key>`), in
    /// profile-file order.
    pub fn entries(&mut self) -> Vec<Entry<'_>> {
        let mut entries = vec![
            ("disks".to_string(), &mut self.disks),
            ("chunk_kib".to_string(), &mut self.chunk_kib),
            ("link_mb_s".to_string(), &mut self.link_mb_s),
            ("request_latency_us".to_string(), &mut self.request_latency_us),
            ("flush_us".to_string(), &mut self.flush_us),
        ];
        entries.extend(self.disk.entries().into_iter().map(|(key, value)| (format!("disk.{key}"), value)));
        entries
    }

    pub fn validate(&self, prefix: &str) -> Result<(), String> {
        require_positive(prefix, &[("chunk_kib", self.chunk_kib)])?;
        self.disk.validate(&format!("{prefix}disk."))?;
        if self.disks < 3.0 || self.disks.fract() != 0.0 {
            return Err(format!("{prefix}disks must be a whole number >= 3 (RAID5)"));
        }
        if (self.chunk_kib * 1024.0) % 4096.0 != 0.0 {
            return Err(format!("{prefix}chunk_kib must be a multiple of 4"));
        }
        Ok(())
    }
}

/// Sets `key` among `entries` to `value`: a finite number >= 0 (validate
/// the whole parameter set afterwards).
pub fn set_entry(entries: &mut [Entry<'_>], key: &str, value: f64) -> Result<(), String> {
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{key} must be a finite number >= 0"));
    }
    let slot = entries
        .iter_mut()
        .find(|(name, _)| name == key)
        .ok_or_else(|| format!("unknown parameter '{key}'"))?;
    *slot.1 = value;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_set_and_validation_names_the_key() {
        let mut backing = BackingParams::default();
        set_entry(&mut backing.entries(), "disk.rpm", 5400.0).unwrap();
        assert_eq!(backing.disk.rpm, 5400.0);
        assert!(set_entry(&mut backing.entries(), "rpm", 1.0).unwrap_err().contains("unknown parameter 'rpm'"));
        assert!(set_entry(&mut backing.entries(), "disks", -1.0).unwrap_err().contains(">= 0"));
        backing.disks = 2.0;
        assert_eq!(backing.validate("backing.").unwrap_err(), "backing.disks must be a whole number >= 3 (RAID5)");
        let mut backing = BackingParams { link_mb_s: 0.0, request_latency_us: 0.0, ..BackingParams::default() };
        assert!(backing.validate("").is_ok(), "no link is allowed");
        backing.disk.transfer_mb_s = 0.0;
        assert_eq!(backing.validate("").unwrap_err(), "disk.transfer_mb_s must be greater than 0");
        let ssd = SsdParams { channels: 2.5, ..SsdParams::default() };
        assert_eq!(ssd.validate("ssd.").unwrap_err(), "ssd.channels must be a whole number");
    }
}
