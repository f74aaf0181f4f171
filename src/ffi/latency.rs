//! What each base bdev's commands cost: latency histograms by kind (read,
//! write, flush) of the device commands a node sends it, from their start to
//! their completion, for `devices` in `bdev_hhc_get_stats`. No SPDK here.

use super::json::JsonObject;
use super::report::latency_json;
use crate::histogram::{Histogram, SharedHistogram};
use crate::io::{IoKind, RequestKind};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The kinds in their order here and their keys in the stats.
const KEYS: [&str; 3] = ["read_latency_us", "write_latency_us", "flush_latency_us"];

fn index(kind: IoKind) -> usize {
    match kind {
        IoKind::Read => 0,
        IoKind::Write => 1,
        IoKind::Flush => 2,
    }
}

/// A request sent to the backing bdev as it is (bypass.rs) is a device
/// command of the same kind.
fn request_index(kind: RequestKind) -> usize {
    match kind {
        RequestKind::Read => 0,
        RequestKind::Write => 1,
        RequestKind::Flush => 2,
    }
}

/// One device's command latencies, by kind.
#[derive(Clone, Default)]
pub struct DeviceLatency([Histogram; 3]);

impl DeviceLatency {
    pub fn record(&mut self, kind: IoKind, latency_ns: u64) {
        self.0[index(kind)].record(latency_ns);
    }

    pub fn clear(&mut self) {
        self.0.iter_mut().for_each(Histogram::clear);
    }

    pub fn merge(&mut self, other: &DeviceLatency) {
        self.0
            .iter_mut()
            .zip(&other.0)
            .for_each(|(mine, theirs)| mine.merge(theirs));
    }

    pub fn get(&self, kind: IoKind) -> &Histogram {
        &self.0[index(kind)]
    }

    /// `read_latency_us`, `write_latency_us` and, for a device that takes
    /// flushes (`flushes`), `flush_latency_us`, each `{count, p50, p99,
    /// max}` in microseconds.
    pub fn add_to(&self, object: JsonObject, flushes: bool) -> JsonObject {
        let kinds = if flushes { 3 } else { 2 };
        KEYS.iter()
            .zip(&self.0)
            .take(kinds)
            .fold(object, |object, (key, histogram)| {
                object.raw(key, &latency_json(histogram))
            })
    }
}

/// A channel's latencies of the requests it sends to the backing bdev as
/// they are: recorded on its thread, read by the node's owner. A stats
/// reset cannot clear what another thread writes: it starts a new epoch,
/// the channel clears its histograms at its next request, and until then
/// a reader of the new epoch leaves them out.
#[derive(Default)]
pub struct SharedLatency {
    by_kind: [SharedHistogram; 3],
    /// The stats epoch the histograms count from.
    epoch: AtomicU64,
}

impl SharedLatency {
    /// By the channel's thread only: a request took `latency_ns` in stats
    /// epoch `epoch`.
    pub fn record(&self, epoch: u64, kind: RequestKind, latency_ns: u64) {
        if self.epoch.load(Relaxed) != epoch {
            self.by_kind.iter().for_each(SharedHistogram::clear);
            self.epoch.store(epoch, Relaxed);
        }
        self.by_kind[request_index(kind)].record(latency_ns);
    }

    /// Adds what was recorded in stats epoch `epoch` to `into`.
    pub fn add_to(&self, epoch: u64, into: &mut DeviceLatency) {
        if self.epoch.load(Relaxed) == epoch {
            self.by_kind
                .iter()
                .zip(into.0.iter_mut())
                .for_each(|(shared, histogram)| shared.add_to(histogram));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(latency: &DeviceLatency, flushes: bool) -> serde_json::Value {
        serde_json::from_str(&latency.add_to(JsonObject::new(), flushes).finish()).unwrap()
    }

    #[test]
    fn each_kind_has_its_own_histogram_in_microseconds() {
        let mut latency = DeviceLatency::default();
        for _ in 0..10 {
            latency.record(IoKind::Write, 2_000_000);
        }
        latency.record(IoKind::Flush, 30_000);
        let report = json(&latency, true);
        assert_eq!(report["read_latency_us"]["count"], 0);
        let write = &report["write_latency_us"];
        assert_eq!(
            (write["count"].as_u64(), write["p50"].as_u64()),
            (Some(10), Some(2000))
        );
        let flush = &report["flush_latency_us"];
        assert_eq!(
            (flush["count"].as_u64(), flush["max"].as_u64()),
            (Some(1), Some(30))
        );
        let without_flushes = json(&latency, false);
        assert!(
            without_flushes.get("flush_latency_us").is_none()
                && without_flushes.get("write_latency_us").is_some()
        );
        latency.clear();
        assert_eq!(commands(&latency), 0);
    }

    fn commands(latency: &DeviceLatency) -> u64 {
        [IoKind::Read, IoKind::Write, IoKind::Flush]
            .iter()
            .map(|&k| latency.get(k).count())
            .sum()
    }

    #[test]
    fn requests_sent_past_the_engine_add_to_the_backings_commands() {
        let mut backing = DeviceLatency::default();
        backing.record(IoKind::Write, 1_000_000);
        let channel = SharedLatency::default();
        channel.record(0, RequestKind::Write, 3_000_000);
        channel.record(0, RequestKind::Read, 500_000);
        let mut from_channels = DeviceLatency::default();
        channel.add_to(0, &mut from_channels);
        backing.merge(&from_channels);
        assert_eq!(
            (
                backing.get(IoKind::Write).count(),
                backing.get(IoKind::Write).max_ns()
            ),
            (2, 3_000_000)
        );
        assert_eq!(backing.get(IoKind::Read).count(), 1);
    }

    #[test]
    fn a_reset_leaves_out_a_channels_samples_until_it_clears_them_itself() {
        let channel = SharedLatency::default();
        channel.record(0, RequestKind::Write, 3_000_000);
        let read = |epoch| {
            let mut latency = DeviceLatency::default();
            channel.add_to(epoch, &mut latency);
            latency
        };
        // The owner reset the stats: epoch 1.
        assert_eq!(commands(&read(1)), 0);
        channel.record(1, RequestKind::Flush, 40_000);
        let after = read(1);
        assert_eq!((commands(&after), after.get(IoKind::Flush).count()), (1, 1));
        assert_eq!(commands(&read(0)), 0, "the samples of epoch 0 are gone");
    }
}
