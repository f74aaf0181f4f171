//! A single-head HDD with its write cache off, serving commands in arrival
//! order. Cost = command overhead + seek (square-root curve between
//! track-to-track and full stroke) + rotational wait + transfer. The platter
//! angle is tracked in time, and a byte offset maps to an angle at the media
//! rate, so a sequential command queued behind the previous one streams on
//! without delay, while one that arrives after the head has passed its
//! sector — a synchronous commit — waits for the platter to come round.

use super::params::HddParams;
use super::{ms, transfer_ns, us, DeviceModel};
use crate::io::{IoKind, Nanos};

pub struct Hdd {
    params: HddParams,
    rotation_ns: Nanos,
    /// Bytes under the head in one rotation at the media rate.
    track_bytes: u64,
    capacity_bytes: u64,
    busy_until: Nanos,
    /// Byte offset right after the last transferred byte.
    head_offset_bytes: u64,
    commands_count: u64,
    /// Time spent positioning and transferring, over all commands.
    busy_ns: Nanos,
}

impl Hdd {
    pub fn new(params: &HddParams) -> Hdd {
        let rotation_ns = (60e9 / params.rpm).round() as Nanos;
        Hdd {
            params: params.clone(),
            rotation_ns,
            track_bytes: ((params.transfer_mb_s * 1e6 * rotation_ns as f64 / 1e9) as u64).max(4096),
            capacity_bytes: (params.capacity_gb * 1e9) as u64,
            busy_until: 0,
            head_offset_bytes: 0,
            commands_count: 0,
            busy_ns: 0,
        }
    }

    pub fn commands_count(&self) -> u64 {
        self.commands_count
    }

    pub fn busy_ns(&self) -> Nanos {
        self.busy_ns
    }

    fn seek_ns(&self, target_offset_bytes: u64) -> Nanos {
        let distance = target_offset_bytes.abs_diff(self.head_offset_bytes);
        if distance < self.track_bytes {
            return 0;
        }
        let fraction = (distance as f64 / self.capacity_bytes as f64).min(1.0);
        let (near, far) = (self.params.seek_track_to_track_ms, self.params.seek_full_stroke_ms);
        ms(near + (far - near) * fraction.sqrt())
    }

    /// Wait from `at` until the sector at `offset_bytes` is under the head.
    fn rotational_wait_ns(&self, at: Nanos, offset_bytes: u64) -> Nanos {
        let sector_phase = (offset_bytes % self.track_bytes) * self.rotation_ns / self.track_bytes;
        let head_phase = at % self.rotation_ns;
        (sector_phase + self.rotation_ns - head_phase) % self.rotation_ns
    }

    /// When the command starting at `start` reaches its first sector.
    fn positioned_at(&self, start: Nanos, offset_bytes: u64) -> Nanos {
        let streaming = start == self.busy_until && offset_bytes == self.head_offset_bytes;
        if streaming {
            return start;
        }
        let moved = start + us(self.params.command_overhead_us) + self.seek_ns(offset_bytes);
        moved + self.rotational_wait_ns(moved, offset_bytes)
    }
}

impl DeviceModel for Hdd {
    fn submit(&mut self, now: Nanos, kind: IoKind, offset_bytes: u64, len_bytes: u64) -> Nanos {
        self.commands_count += 1;
        let start = now.max(self.busy_until);
        if kind == IoKind::Flush {
            // The write cache is off: completed writes are on the platter.
            self.busy_until = start + us(self.params.command_overhead_us);
            self.busy_ns += self.busy_until - start;
            return self.busy_until;
        }
        let done = self.positioned_at(start, offset_bytes) + transfer_ns(len_bytes, self.params.transfer_mb_s);
        self.busy_ns += done - start;
        self.busy_until = done;
        self.head_offset_bytes = offset_bytes + len_bytes;
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "tools")]
    use crate::simcore::prng::Prng;

    fn hdd() -> Hdd {
        Hdd::new(&HddParams::default())
    }

    #[test]
    fn queued_sequential_appends_stream_at_media_rate() {
        let mut disk = hdd();
        let segment = 1 << 20;
        let first = disk.submit(0, IoKind::Write, 0, segment);
        let last = (1..64).map(|i| disk.submit(0, IoKind::Write, i * segment, segment)).max().unwrap();
        let mb_s = 63.0 * segment as f64 / ((last - first) as f64 / 1e9) / 1e6;
        assert!((mb_s - 125.0).abs() < 1.0, "{mb_s}");
    }

    #[cfg(feature = "tools")]
    #[test]
    fn random_io_costs_about_ten_ms_and_far_more_than_sequential() {
        let mut disk = hdd();
        let mut rng = Prng::new(3);
        let mut now = 0;
        let random_count = 2_000;
        for _ in 0..random_count {
            let offset = rng.below(disk.capacity_bytes / 4096) * 4096;
            now = disk.submit(now, IoKind::Read, offset, 4096);
        }
        let random_ms = now as f64 / 1e6 / random_count as f64;
        assert!((9.0..16.0).contains(&random_ms), "{random_ms}");
        let mut disk = hdd();
        let sequential_done = (0..random_count).map(|i| disk.submit(0, IoKind::Write, i * 4096, 4096)).max().unwrap();
        assert!(sequential_done * 50 < now, "{sequential_done} vs {now}");
    }

    #[test]
    fn synchronous_append_waits_for_rotation() {
        let mut disk = hdd();
        let first = disk.submit(0, IoKind::Write, 0, 4096);
        // Issued a little later, the next sector has already passed the head.
        let issued = first + 100_000;
        let second = disk.submit(issued, IoKind::Write, 4096, 4096) - issued;
        assert!(second > disk.rotation_ns / 2, "{second}");
        assert!(second <= disk.rotation_ns + us(100.0), "{second}");
    }
}
