//! One simulated block device: byte contents, a bounded number of commands
//! in service at once with latencies drawn from the seed, an optional
//! volatile write cache, death, transient errors and silent corruption.
//!
//! Durability model: a completed write sits in the volatile cache (if the
//! device has one) until a FLUSH submitted after its completion completes.
//! Power loss keeps, drops or tears (per 512-byte sector) every volatile and
//! every in-flight write, independently; this is the freedom a real disk has.

use super::pattern::SECTOR_BYTES;
use crate::simcore::prng::Prng;
use crate::io::{DeviceIo, DeviceRole, IoId, IoKind, IoStatus, Nanos};
use std::collections::BTreeMap;
use std::ops::Range;

/// Silent corruption of writes that the device reports as successful.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SilentFaults {
    /// The write is not applied at all.
    pub lost_ppm: u32,
    /// The write lands at another (4 KiB aligned) offset of the device.
    pub misdirected_ppm: u32,
    /// Only a random subset of the sectors is applied.
    pub torn_ppm: u32,
    /// One bit of the written data is flipped.
    pub bit_flip_ppm: u32,
}

impl SilentFaults {
    pub fn any(&self) -> bool {
        self.lost_ppm + self.misdirected_ppm + self.torn_ppm + self.bit_flip_ppm > 0
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSpec {
    pub size_bytes: u64,
    /// Commands in service at once; further commands queue.
    pub parallelism: u32,
    pub latency_ns_min: Nanos,
    pub latency_ns_max: Nanos,
    /// Occasional very slow commands (a RAID rebuilding, an HDD seeking far).
    pub spike_ppm: u32,
    pub spike_ns: Nanos,
    pub volatile_cache: bool,
    /// Power loss tears writes at 512-byte sectors below this offset and at
    /// `atomic_unit_bytes` above it. Data blocks overwritten in place cannot
    /// be protected by any engine unless the device writes a block
    /// atomically (NVMe AWUPF, a RAID's block size); metadata and log
    /// structures are designed for torn sectors, so they get them.
    pub torn_sectors_below_bytes: u64,
    pub atomic_unit_bytes: u64,
    /// Transient `IoStatus::Error` per command.
    pub error_ppm: u32,
    pub silent: SilentFaults,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceStats {
    pub errors_injected: u64,
    pub corruptions_injected: u64,
    /// Corrupted ranges that some later read covered (the reader had to cope).
    pub corruptions_read_back: u64,
}

struct VolatileWrite {
    seq: u64,
    offset_bytes: u64,
    data: Vec<u8>,
}

struct Corruption {
    range: Range<u64>,
    read_back: bool,
}

pub struct SimDevice {
    pub role: DeviceRole,
    spec: DeviceSpec,
    durable: Vec<u8>,
    volatile: Vec<VolatileWrite>,
    next_seq: u64,
    /// Volatile writes with a lower seq are covered by this in-flight flush.
    flush_marks: BTreeMap<IoId, u64>,
    slot_free_at: Vec<Nanos>,
    /// Nothing completes before this (`hang_until`).
    hung_until: Nanos,
    dead: bool,
    corruptions: Vec<Corruption>,
    prng: Prng,
    pub stats: DeviceStats,
}

impl SimDevice {
    pub fn new(role: DeviceRole, spec: DeviceSpec, prng: Prng) -> SimDevice {
        assert!(spec.parallelism > 0 && spec.latency_ns_min <= spec.latency_ns_max);
        assert!(spec.atomic_unit_bytes >= SECTOR_BYTES as u64 && spec.atomic_unit_bytes.is_power_of_two());
        SimDevice {
            role,
            durable: vec![0; spec.size_bytes as usize],
            slot_free_at: vec![0; spec.parallelism as usize],
            hung_until: 0,
            spec,
            volatile: Vec::new(),
            next_seq: 0,
            flush_marks: BTreeMap::new(),
            dead: false,
            corruptions: Vec::new(),
            prng,
            stats: DeviceStats::default(),
        }
    }

    pub fn spec(&self) -> &DeviceSpec {
        &self.spec
    }

    pub fn is_dead(&self) -> bool {
        self.dead
    }

    pub fn kill(&mut self) {
        self.dead = true;
    }

    /// Answers nothing until `until`, neither completing nor failing a
    /// command (a peer host frozen with its connection up): the commands
    /// in flight and those submitted meanwhile complete after it.
    pub fn hang_until(&mut self, until: Nanos) {
        self.hung_until = until;
    }

    pub fn hung_until(&self) -> Nanos {
        self.hung_until
    }

    /// The same hardware found again (a flaky disk back after a reboot): alive,
    /// with the bytes it held when it died and nothing written since.
    pub fn revive(&mut self) {
        self.volatile.clear();
        self.flush_marks.clear();
        self.dead = false;
    }

    /// New hardware in the same slot: empty, alive, same behaviour.
    pub fn replace(&mut self) {
        self.durable.fill(0);
        self.volatile.clear();
        self.flush_marks.clear();
        self.corruptions.clear();
        self.hung_until = 0;
        self.dead = false;
    }

    /// Accepts a command and returns when it completes, or why the command is
    /// malformed (an engine contract violation).
    pub fn submit(&mut self, now: Nanos, io: &DeviceIo) -> Result<Nanos, String> {
        self.check_bounds(io)?;
        if self.dead {
            return Ok(now + 1_000);
        }
        if io.kind == IoKind::Flush {
            self.flush_marks.insert(io.id, self.next_seq);
        }
        let slot = (0..self.slot_free_at.len()).min_by_key(|i| self.slot_free_at[*i]).unwrap();
        let start = self.slot_free_at[slot].max(now).max(self.hung_until);
        let done = start + self.draw_latency_ns();
        self.slot_free_at[slot] = done;
        Ok(done)
    }

    fn check_bounds(&self, io: &DeviceIo) -> Result<(), String> {
        if io.kind == IoKind::Flush {
            return Ok(());
        }
        let end = io.offset_bytes.checked_add(io.len_bytes);
        if io.len_bytes == 0 || end.is_none_or(|end| end > self.spec.size_bytes) {
            return Err(format!(
                "{} command {:?} at byte {} length {} outside the device of {} bytes",
                self.role, io.kind, io.offset_bytes, io.len_bytes, self.spec.size_bytes
            ));
        }
        if !io.offset_bytes.is_multiple_of(SECTOR_BYTES as u64) || !io.len_bytes.is_multiple_of(SECTOR_BYTES as u64) {
            return Err(format!("{} command at byte {} length {} is not sector aligned", self.role, io.offset_bytes, io.len_bytes));
        }
        Ok(())
    }

    fn draw_latency_ns(&mut self) -> Nanos {
        let base = self.prng.between(self.spec.latency_ns_min, self.spec.latency_ns_max);
        if self.spec.spike_ppm > 0 && self.prng.ppm(self.spec.spike_ppm) {
            base + self.spec.spike_ns
        } else {
            base
        }
    }

    /// Status of a command at its completion time (death, transient error).
    fn completion_status(&mut self) -> IoStatus {
        if self.dead {
            IoStatus::DeviceLost
        } else if self.spec.error_ppm > 0 && self.prng.ppm(self.spec.error_ppm) {
            self.stats.errors_injected += 1;
            IoStatus::Error
        } else {
            IoStatus::Ok
        }
    }

    pub fn complete_write(&mut self, offset_bytes: u64, data: &[u8]) -> IoStatus {
        let status = self.completion_status();
        if status == IoStatus::Ok {
            self.apply_write_with_silent_faults(offset_bytes, data);
        }
        status
    }

    pub fn complete_read(&mut self, offset_bytes: u64, out: &mut [u8]) -> IoStatus {
        let status = self.completion_status();
        if status == IoStatus::Ok {
            self.read_current(offset_bytes, out);
            self.note_read_back(offset_bytes..offset_bytes + out.len() as u64);
        }
        status
    }

    pub fn complete_flush(&mut self, id: IoId) -> IoStatus {
        let mark = self.flush_marks.remove(&id);
        let status = self.completion_status();
        if status == IoStatus::Ok {
            self.persist_volatile_before(mark.unwrap_or(0));
        }
        status
    }

    /// The bytes a reader sees now: durable contents overlaid with completed
    /// volatile writes in completion order.
    pub fn read_current(&self, offset_bytes: u64, out: &mut [u8]) {
        let range = offset_bytes..offset_bytes + out.len() as u64;
        out.copy_from_slice(&self.durable[range.start as usize..range.end as usize]);
        for write in &self.volatile {
            overlay(&range, out, write.offset_bytes, &write.data);
        }
    }

    fn persist_volatile_before(&mut self, seq_end: u64) {
        let (persisted, kept): (Vec<_>, Vec<_>) = self.volatile.drain(..).partition(|w| w.seq < seq_end);
        for write in persisted {
            self.write_durable(write.offset_bytes, &write.data);
        }
        self.volatile = kept;
    }

    fn apply_write_with_silent_faults(&mut self, offset_bytes: u64, data: &[u8]) {
        let silent = self.spec.silent;
        let intended = offset_bytes..offset_bytes + data.len() as u64;
        if silent.any() {
            if self.prng.ppm(silent.lost_ppm) {
                return self.record_corruption(intended);
            }
            if self.prng.ppm(silent.misdirected_ppm) {
                let target = self.misdirect_target(data.len() as u64);
                self.record_corruption(intended);
                self.record_corruption(target..target + data.len() as u64);
                return self.apply_write(target, data.to_vec());
            }
            if self.prng.ppm(silent.torn_ppm) {
                let mut torn = Vec::new();
                self.read_current_into(&intended, &mut torn);
                self.tear_into(data, &mut torn);
                self.record_corruption(intended);
                return self.apply_write(offset_bytes, torn);
            }
            if self.prng.ppm(silent.bit_flip_ppm) {
                let mut flipped = data.to_vec();
                let bit = self.prng.below(data.len() as u64 * 8);
                flipped[(bit / 8) as usize] ^= 1 << (bit % 8);
                self.record_corruption(intended);
                return self.apply_write(offset_bytes, flipped);
            }
        }
        self.forget_corruptions_within(&intended);
        self.apply_write(offset_bytes, data.to_vec());
    }

    fn misdirect_target(&mut self, len_bytes: u64) -> u64 {
        let units = (self.spec.size_bytes - len_bytes) / 4096;
        self.prng.below(units + 1) * 4096
    }

    fn read_current_into(&self, range: &Range<u64>, out: &mut Vec<u8>) {
        out.resize((range.end - range.start) as usize, 0);
        self.read_current(range.start, out);
    }

    /// Copies a random subset of `new`'s sectors over `old` (silent tears
    /// ignore atomicity: the device misbehaves).
    fn tear_into(&mut self, new: &[u8], old: &mut [u8]) {
        for (dst, src) in old.chunks_exact_mut(SECTOR_BYTES).zip(new.chunks_exact(SECTOR_BYTES)) {
            if self.prng.percent(50) {
                dst.copy_from_slice(src);
            }
        }
    }

    /// Power-loss tear: a random subset of the write's atomic units lands.
    fn tear_at_power_loss(&mut self, offset_bytes: u64, new: &[u8], old: &mut [u8]) {
        let mut done = 0usize;
        while done < new.len() {
            let at = offset_bytes + done as u64;
            let unit = if at < self.spec.torn_sectors_below_bytes { SECTOR_BYTES as u64 } else { self.spec.atomic_unit_bytes };
            let end = (at - at % unit + unit - offset_bytes).min(new.len() as u64) as usize;
            if self.prng.percent(50) {
                old[done..end].copy_from_slice(&new[done..end]);
            }
            done = end;
        }
    }

    fn apply_write(&mut self, offset_bytes: u64, data: Vec<u8>) {
        if self.spec.volatile_cache {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.volatile.push(VolatileWrite { seq, offset_bytes, data });
        } else {
            self.write_durable(offset_bytes, &data);
        }
    }

    fn write_durable(&mut self, offset_bytes: u64, data: &[u8]) {
        let start = offset_bytes as usize;
        self.durable[start..start + data.len()].copy_from_slice(data);
    }

    fn record_corruption(&mut self, range: Range<u64>) {
        self.stats.corruptions_injected += 1;
        self.corruptions.push(Corruption { range, read_back: false });
    }

    fn forget_corruptions_within(&mut self, written: &Range<u64>) {
        self.corruptions.retain(|c| !(written.start <= c.range.start && c.range.end <= written.end));
    }

    fn note_read_back(&mut self, read: Range<u64>) {
        for c in self.corruptions.iter_mut().filter(|c| !c.read_back) {
            if c.range.start < read.end && read.start < c.range.end {
                c.read_back = true;
                self.stats.corruptions_read_back += 1;
            }
        }
    }

    /// Power loss: every volatile write, then every write still in flight
    /// (in submission order), is independently kept, dropped or torn.
    pub fn power_loss(&mut self, in_flight_writes: Vec<(u64, Vec<u8>)>) {
        let volatile: Vec<(u64, Vec<u8>)> = self.volatile.drain(..).map(|w| (w.offset_bytes, w.data)).collect();
        for (offset_bytes, data) in volatile.into_iter().chain(in_flight_writes) {
            self.settle_write_at_power_loss(offset_bytes, &data);
        }
        self.flush_marks.clear();
        self.slot_free_at.fill(0);
    }

    fn settle_write_at_power_loss(&mut self, offset_bytes: u64, data: &[u8]) {
        match self.prng.below(5) {
            0 | 1 => {}
            2 | 3 => self.write_durable(offset_bytes, data),
            _ => {
                let start = offset_bytes as usize;
                let mut old = self.durable[start..start + data.len()].to_vec();
                self.tear_at_power_loss(offset_bytes, data, &mut old);
                self.write_durable(offset_bytes, &old);
            }
        }
    }
}

fn overlay(range: &Range<u64>, out: &mut [u8], offset_bytes: u64, data: &[u8]) {
    let start = range.start.max(offset_bytes);
    let end = range.end.min(offset_bytes + data.len() as u64);
    if start >= end {
        return;
    }
    let dst = (start - range.start) as usize..(end - range.start) as usize;
    let src = (start - offset_bytes) as usize..(end - offset_bytes) as usize;
    out[dst].copy_from_slice(&data[src]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::IoBuffer;

    fn spec(volatile_cache: bool) -> DeviceSpec {
        DeviceSpec {
            size_bytes: 64 * 1024,
            parallelism: 2,
            latency_ns_min: 10,
            latency_ns_max: 100,
            spike_ppm: 0,
            spike_ns: 0,
            volatile_cache,
            torn_sectors_below_bytes: u64::MAX,
            atomic_unit_bytes: SECTOR_BYTES as u64,
            error_ppm: 0,
            silent: SilentFaults::default(),
        }
    }

    fn flush_io(id: IoId) -> DeviceIo {
        DeviceIo { id, device: DeviceRole::Cache, kind: IoKind::Flush, offset_bytes: 0, len_bytes: 0, buffer: IoBuffer::None }
    }

    #[test]
    fn completed_writes_are_readable_and_flush_makes_them_survive_power_loss() {
        let mut dev = SimDevice::new(DeviceRole::Cache, spec(true), Prng::new(3));
        assert_eq!(dev.complete_write(4096, &[7u8; 4096]), IoStatus::Ok);
        dev.submit(0, &flush_io(1)).unwrap();
        assert_eq!(dev.complete_write(8192, &[9u8; 4096]), IoStatus::Ok);
        assert_eq!(dev.complete_flush(1), IoStatus::Ok);
        let mut out = [0u8; 4096];
        dev.read_current(8192, &mut out);
        assert_eq!(out, [9u8; 4096], "a completed write is readable before it is durable");
        // The write completed after the flush was submitted may or may not survive.
        for _ in 0..8 {
            dev.power_loss(Vec::new());
            dev.read_current(4096, &mut out);
            assert_eq!(out, [7u8; 4096]);
        }
    }

    #[test]
    fn power_loss_drops_keeps_or_tears_unflushed_writes() {
        let mut outcomes = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let mut dev = SimDevice::new(DeviceRole::Backing, spec(true), Prng::new(seed));
            dev.complete_write(0, &[1u8; 4096]);
            dev.power_loss(Vec::new());
            let mut out = [0u8; 4096];
            dev.read_current(0, &mut out);
            let new_sectors = out.chunks(SECTOR_BYTES).filter(|s| s[0] == 1).count();
            outcomes.insert(match new_sectors { 0 => "dropped", 8 => "kept", _ => "torn" });
        }
        assert_eq!(outcomes.len(), 3, "saw only {outcomes:?}");
    }

    #[test]
    fn dead_device_fails_everything_and_bounds_are_checked() {
        let mut dev = SimDevice::new(DeviceRole::Log(0), spec(false), Prng::new(1));
        let bad = DeviceIo { id: 1, device: DeviceRole::Log(0), kind: IoKind::Write, offset_bytes: 60 * 1024, len_bytes: 8192, buffer: IoBuffer::None };
        assert!(dev.submit(0, &bad).is_err());
        dev.kill();
        assert_eq!(dev.complete_write(0, &[1u8; 512]), IoStatus::DeviceLost);
    }
}
