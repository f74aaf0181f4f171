//! SATA SSD: a fixed per-command media latency served by a few parallel flash
//! channels, a host link that caps bandwidth, and reads that slow down while
//! writes are programming. A FLUSH waits for the writes before it.

use super::params::SsdParams;
use super::{transfer_ns, us, DeviceModel};
use crate::io::{IoKind, Nanos};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub struct Ssd {
    params: SsdParams,
    channel_free_at: Vec<Nanos>,
    link_free_at: Nanos,
    /// Completion times of writes that may still be in flight.
    writes_in_flight: BinaryHeap<Reverse<Nanos>>,
    last_write_done_at: Nanos,
}

impl Ssd {
    pub fn new(params: &SsdParams) -> Ssd {
        Ssd {
            params: params.clone(),
            channel_free_at: vec![0; params.channels.max(1.0) as usize],
            link_free_at: 0,
            writes_in_flight: BinaryHeap::new(),
            last_write_done_at: 0,
        }
    }

    fn media_latency_ns(&mut self, now: Nanos, kind: IoKind) -> Nanos {
        while self.writes_in_flight.peek().is_some_and(|Reverse(done)| *done <= now) {
            self.writes_in_flight.pop();
        }
        match kind {
            IoKind::Write => us(self.params.write_latency_us),
            _ => {
                let write_load = (self.writes_in_flight.len() as f64 / self.channel_free_at.len() as f64).min(1.0);
                us(self.params.read_latency_us * (1.0 + self.params.read_during_write_slowdown * write_load))
            }
        }
    }

    fn data_command(&mut self, now: Nanos, kind: IoKind, len_bytes: u64) -> Nanos {
        let latency_ns = self.media_latency_ns(now, kind);
        let channel = (0..self.channel_free_at.len()).min_by_key(|&c| self.channel_free_at[c]).unwrap_or(0);
        let media_done = self.channel_free_at[channel].max(now) + latency_ns;
        self.channel_free_at[channel] = media_done;
        let mb_s = if kind == IoKind::Write { self.params.write_mb_s } else { self.params.read_mb_s };
        let link_done = self.link_free_at.max(now) + transfer_ns(len_bytes, mb_s);
        self.link_free_at = link_done;
        let done = media_done.max(link_done);
        if kind == IoKind::Write {
            self.writes_in_flight.push(Reverse(done));
            self.last_write_done_at = self.last_write_done_at.max(done);
        }
        done
    }
}

impl DeviceModel for Ssd {
    fn submit(&mut self, now: Nanos, kind: IoKind, _offset_bytes: u64, len_bytes: u64) -> Nanos {
        match kind {
            IoKind::Flush => self.last_write_done_at.max(now) + us(self.params.flush_us),
            IoKind::Read | IoKind::Write => self.data_command(now, kind, len_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssd() -> Ssd {
        Ssd::new(&SsdParams::default())
    }

    #[test]
    fn qd1_latency_and_parallel_iops_are_sata_class() {
        let mut device = ssd();
        let qd1_us = device.submit(0, IoKind::Read, 0, 4096) as f64 / 1e3;
        assert!((50.0..100.0).contains(&qd1_us), "{qd1_us}");
        // 10 000 reads all queued at once: throughput is channels / latency.
        let mut device = ssd();
        let last = (0..10_000).map(|i| device.submit(0, IoKind::Read, i * 4096, 4096)).max().unwrap();
        let iops = 10_000.0 / (last as f64 / 1e9);
        assert!((20_000.0..100_000.0).contains(&iops), "{iops}");
    }

    #[test]
    fn link_caps_sequential_bandwidth() {
        let mut device = ssd();
        let chunk = 1 << 20;
        let last = (0..100).map(|i| device.submit(0, IoKind::Read, i * chunk, chunk)).max().unwrap();
        let mb_s = 100.0 * chunk as f64 / (last as f64 / 1e9) / 1e6;
        assert!((mb_s - 540.0).abs() < 10.0, "{mb_s}");
    }

    #[test]
    fn reads_slow_down_under_writes_and_flush_waits_for_writes() {
        let mut idle = ssd();
        let read_alone = idle.submit(0, IoKind::Read, 0, 4096);
        let mut busy = ssd();
        // Two of four channels program writes; the read gets a free channel
        // but still shares the dies with the writes.
        let write_done = (0..2).map(|i| busy.submit(0, IoKind::Write, i * 4096, 4096)).max().unwrap();
        let read_busy = busy.submit(0, IoKind::Read, 1 << 20, 4096);
        assert!(read_busy > read_alone, "{read_busy} vs {read_alone}");
        assert!(busy.submit(0, IoKind::Flush, 0, 0) > write_done);
    }
}
