//! The backing device: Linux MD RAID5 (left-symmetric, no write cache) of
//! HDDs, reached through iSCSI over one Gigabit Ethernet link. Writes cross
//! the link host->target, reads target->host, each direction serialised at
//! the link rate; every request pays a round trip. A write that covers a
//! whole stripe writes data and parity; a small write does read-modify-write
//! (read old data and parity, then write both: 4 disk I/Os); a write covering
//! most of a stripe reads the rest of it instead (reconstruct-write).
//! `link_mb_s = 0` and `request_latency_us = 0` leave the disks alone (no
//! link): the device-model bdev under a real iSCSI target uses that.

use super::params::BackingParams;
use super::{hdd::Hdd, transfer_ns, us, DeviceModel};
use crate::io::{IoKind, Nanos};

pub struct Raid5Iscsi {
    params: BackingParams,
    disks: Vec<Hdd>,
    chunk_bytes: u64,
    /// Host-to-target direction (write data) is free from this time on.
    tx_free_at: Nanos,
    /// Target-to-host direction (read data).
    rx_free_at: Nanos,
}

/// One disk command of a stripe operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DiskIo {
    disk: usize,
    offset_bytes: u64,
    len_bytes: u64,
}

/// Byte range [start, end) inside one chunk.
type ChunkRange = (u64, u64);

impl Raid5Iscsi {
    pub fn new(params: &BackingParams) -> Raid5Iscsi {
        Raid5Iscsi {
            params: params.clone(),
            disks: (0..params.disks as usize).map(|_| Hdd::new(&params.disk)).collect(),
            chunk_bytes: (params.chunk_kib * 1024.0) as u64,
            tx_free_at: 0,
            rx_free_at: 0,
        }
    }

    /// Disk commands issued so far, over all member disks.
    pub fn disk_commands_count(&self) -> u64 {
        self.disks.iter().map(Hdd::commands_count).sum()
    }

    pub fn disks_count(&self) -> usize {
        self.disks.len()
    }

    /// Busy time summed over the member disks.
    pub fn disk_busy_ns(&self) -> Nanos {
        self.disks.iter().map(Hdd::busy_ns).sum()
    }

    /// Time on the link for `len_bytes` in one direction (0 without a link).
    fn link_ns(&self, len_bytes: u64) -> Nanos {
        if self.params.link_mb_s == 0.0 {
            0
        } else {
            transfer_ns(len_bytes, self.params.link_mb_s)
        }
    }

    fn data_disks(&self) -> u64 {
        self.disks.len() as u64 - 1
    }

    /// Data bytes per stripe (parity left out).
    pub fn stripe_data_bytes(&self) -> u64 {
        self.data_disks() * self.chunk_bytes
    }

    fn parity_disk(&self, stripe: u64) -> usize {
        let n = self.disks.len() as u64;
        (n - 1 - stripe % n) as usize
    }

    fn data_disk(&self, stripe: u64, chunk_index: u64) -> usize {
        (self.parity_disk(stripe) + 1 + chunk_index as usize) % self.disks.len()
    }

    /// The part of [offset, offset+len) inside each data chunk of `stripe`.
    fn chunk_ranges(&self, stripe: u64, offset_bytes: u64, len_bytes: u64) -> Vec<Option<ChunkRange>> {
        let stripe_start = stripe * self.stripe_data_bytes();
        (0..self.data_disks())
            .map(|chunk_index| {
                let chunk_start = stripe_start + chunk_index * self.chunk_bytes;
                let start = offset_bytes.max(chunk_start);
                let end = (offset_bytes + len_bytes).min(chunk_start + self.chunk_bytes);
                (start < end).then(|| (start - chunk_start, end - chunk_start))
            })
            .collect()
    }

    fn stripes(&self, offset_bytes: u64, len_bytes: u64) -> std::ops::Range<u64> {
        let stripe_data = self.stripe_data_bytes();
        offset_bytes / stripe_data..(offset_bytes + len_bytes).div_ceil(stripe_data)
    }

    fn disk_io(&self, stripe: u64, disk: usize, (start, end): ChunkRange) -> DiskIo {
        DiskIo { disk, offset_bytes: stripe * self.chunk_bytes + start, len_bytes: end - start }
    }

    /// The (reads, writes) one stripe needs for a write of `ranges`.
    fn stripe_write_plan(&self, stripe: u64, ranges: &[Option<ChunkRange>]) -> (Vec<DiskIo>, Vec<DiskIo>) {
        let touched: Vec<(usize, ChunkRange)> =
            ranges.iter().enumerate().filter_map(|(i, range)| range.map(|r| (i, r))).collect();
        let span = (
            touched.iter().map(|(_, r)| r.0).min().unwrap_or(0),
            touched.iter().map(|(_, r)| r.1).max().unwrap_or(0),
        );
        let parity = self.disk_io(stripe, self.parity_disk(stripe), span);
        let mut writes: Vec<DiskIo> =
            touched.iter().map(|&(i, r)| self.disk_io(stripe, self.data_disk(stripe, i as u64), r)).collect();
        writes.push(parity);
        let full_stripe = touched.len() as u64 == self.data_disks()
            && touched.iter().all(|(_, r)| *r == (0, self.chunk_bytes));
        let reads = if full_stripe {
            Vec::new()
        } else if (touched.len() as u64) * 2 <= self.data_disks() {
            // Read-modify-write: old data of the touched chunks plus old parity.
            let mut reads: Vec<DiskIo> = writes[..touched.len()].to_vec();
            reads.push(parity);
            reads
        } else {
            // Reconstruct-write: read the untouched chunks over the same span.
            (0..self.data_disks())
                .filter(|&i| ranges[i as usize].is_none())
                .map(|i| self.disk_io(stripe, self.data_disk(stripe, i), span))
                .collect()
        };
        (reads, writes)
    }

    fn submit_all(&mut self, at: Nanos, kind: IoKind, ios: &[DiskIo]) -> Nanos {
        ios.iter()
            .map(|io| self.disks[io.disk].submit(at, kind, io.offset_bytes, io.len_bytes))
            .max()
            .unwrap_or(at)
    }

    fn write(&mut self, now: Nanos, offset_bytes: u64, len_bytes: u64) -> Nanos {
        let half_trip = us(self.params.request_latency_us / 2.0);
        self.tx_free_at = self.tx_free_at.max(now) + self.link_ns(len_bytes);
        let arrived = self.tx_free_at + half_trip;
        let mut done = arrived;
        for stripe in self.stripes(offset_bytes, len_bytes) {
            let ranges = self.chunk_ranges(stripe, offset_bytes, len_bytes);
            let (reads, writes) = self.stripe_write_plan(stripe, &ranges);
            let read_done = self.submit_all(arrived, IoKind::Read, &reads);
            done = done.max(self.submit_all(read_done, IoKind::Write, &writes));
        }
        done + half_trip
    }

    fn read(&mut self, now: Nanos, offset_bytes: u64, len_bytes: u64) -> Nanos {
        let half_trip = us(self.params.request_latency_us / 2.0);
        let arrived = now + half_trip;
        let mut data_ready = arrived;
        for stripe in self.stripes(offset_bytes, len_bytes) {
            let ranges = self.chunk_ranges(stripe, offset_bytes, len_bytes);
            let reads: Vec<DiskIo> = ranges
                .iter()
                .enumerate()
                .filter_map(|(i, range)| range.map(|r| self.disk_io(stripe, self.data_disk(stripe, i as u64), r)))
                .collect();
            data_ready = data_ready.max(self.submit_all(arrived, IoKind::Read, &reads));
        }
        self.rx_free_at = self.rx_free_at.max(data_ready) + self.link_ns(len_bytes);
        self.rx_free_at + half_trip
    }
}

impl DeviceModel for Raid5Iscsi {
    fn submit(&mut self, now: Nanos, kind: IoKind, offset_bytes: u64, len_bytes: u64) -> Nanos {
        match kind {
            IoKind::Read => self.read(now, offset_bytes, len_bytes),
            IoKind::Write => self.write(now, offset_bytes, len_bytes),
            // Writes complete only once on the platters (no target cache), so
            // a flush costs the round trip and the member disks' flush commands.
            IoKind::Flush => now + us(self.params.request_latency_us + self.params.flush_us),
        }
    }

    fn member_commands_count(&self) -> Option<u64> {
        Some(self.disk_commands_count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raid() -> Raid5Iscsi {
        Raid5Iscsi::new(&BackingParams::default())
    }

    #[test]
    fn small_write_is_read_modify_write_of_four_disk_ios() {
        let mut array = raid();
        let done = array.submit(0, IoKind::Write, 8192, 4096);
        assert_eq!(array.disk_commands_count(), 4);
        // Two reads, then writes that wait for the platter to come round.
        assert!(done > 15_000_000, "{done}");
    }

    #[test]
    fn full_stripe_write_needs_no_reads_and_big_writes_reconstruct() {
        let mut array = raid();
        let stripe_bytes = array.stripe_data_bytes();
        array.submit(0, IoKind::Write, stripe_bytes, stripe_bytes);
        assert_eq!(array.disk_commands_count(), 5);
        let mut array = raid();
        // Three of four chunks: read the fourth, write three plus parity.
        array.submit(0, IoKind::Write, 0, 3 * array.chunk_bytes);
        assert_eq!(array.disk_commands_count(), 1 + 4);
    }

    #[test]
    fn link_bandwidth_caps_sequential_throughput() {
        let mut array = raid();
        let stripe_bytes = array.stripe_data_bytes();
        let count = 200;
        let done = (0..count).map(|i| array.submit(0, IoKind::Write, i * stripe_bytes, stripe_bytes)).max().unwrap();
        let mb_s = (count * stripe_bytes) as f64 / (done as f64 / 1e9) / 1e6;
        assert!(mb_s <= 112.0 && mb_s > 90.0, "{mb_s}");
        let mut array = raid();
        let done = (0..count).map(|i| array.submit(0, IoKind::Read, i * stripe_bytes, stripe_bytes)).max().unwrap();
        let mb_s = (count * stripe_bytes) as f64 / (done as f64 / 1e9) / 1e6;
        assert!(mb_s <= 112.0 && mb_s > 90.0, "{mb_s}");
    }

    #[test]
    fn without_the_link_disks_alone_set_the_pace() {
        let params = BackingParams { link_mb_s: 0.0, request_latency_us: 0.0, ..BackingParams::default() };
        let mut array = Raid5Iscsi::new(&params);
        let stripe_bytes = array.stripe_data_bytes();
        let count = 200;
        let done = (0..count).map(|i| array.submit(0, IoKind::Write, i * stripe_bytes, stripe_bytes)).max().unwrap();
        let mb_s = (count * stripe_bytes) as f64 / (done as f64 / 1e9) / 1e6;
        // Four data disks streaming at 125 MB/s each.
        assert!(mb_s > 400.0 && mb_s <= 500.0, "{mb_s}");
        assert_eq!(array.submit(1_000, IoKind::Flush, 0, 0), 1_000 + us(500.0));
    }

    /// Mean charge of sequential 16 KiB appends (read-modify-writes), each
    /// submitted `gap_ns(i)` after the previous one completed.
    fn append_charge_ms(gap_ns: impl Fn(u64) -> Nanos) -> f64 {
        let params = BackingParams { link_mb_s: 0.0, request_latency_us: 0.0, ..BackingParams::default() };
        let mut array = Raid5Iscsi::new(&params);
        let (count, mut now, mut charged) = (64, 0, 0);
        for i in 0..count {
            let done = array.submit(now, IoKind::Write, (1 << 30) + i * 16384, 16384);
            charged += done - now;
            now = done + gap_ns(i);
        }
        charged as f64 / 1e6 / count as f64
    }

    #[test]
    fn an_append_that_comes_back_at_once_waits_a_revolution_more_than_one_at_a_random_phase() {
        // Back 1.2 ms later (the simulator's WT websearch: ten cache hits
        // between appends), the sector just passed: the old data and parity
        // are read most of a revolution later, written a revolution after that.
        let soon = append_charge_ms(|_| 1_200_000);
        assert!(soon > 15.0 && soon < 17.5, "{soon}");
        // Back at any phase of the 8.33 ms revolution (the rig's host, 5-20 ms
        // later): half a revolution to read on average, one to write.
        let spread = append_charge_ms(|i| 5_000_000 + (i * 1_303_000) % 8_333_333);
        assert!(spread > 11.5 && spread < 14.0, "{spread}");
    }

    #[test]
    fn flush_costs_a_round_trip() {
        let mut array = raid();
        assert_eq!(array.submit(1_000, IoKind::Flush, 0, 0), 1_000 + us(700.0));
    }
}
