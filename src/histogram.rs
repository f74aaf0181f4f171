//! Latency histogram with logarithmic buckets: exact below 64 ns, then 32
//! buckets per power of two, so any percentile is within ~3 % of the true
//! value while the histogram stays a fixed 15 KiB however many samples it
//! takes (a run records millions of request latencies). The timed
//! simulator's latencies and the SPDK module's flush and device command
//! latencies use it; `SharedHistogram` is one that a thread records into
//! while another reads it.

use crate::io::Nanos;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const EXACT_BELOW: u64 = 64;
const SUB_BUCKET_BITS: u32 = 5;
const SUB_BUCKETS: usize = 1 << SUB_BUCKET_BITS;
const BUCKETS: usize = EXACT_BELOW as usize + (64 - 6) * SUB_BUCKETS;

#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    samples_count: u64,
    sum_ns: u128,
    max_ns: Nanos,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Histogram({} samples, mean {:.0} ns, max {} ns)", self.samples_count, self.mean_ns(), self.max_ns)
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: Box::new([0; BUCKETS]), samples_count: 0, sum_ns: 0, max_ns: 0 }
    }
}

fn bucket_of(value: u64) -> usize {
    if value < EXACT_BELOW {
        return value as usize;
    }
    let exponent = 63 - value.leading_zeros();
    let sub = (value >> (exponent - SUB_BUCKET_BITS)) as usize & (SUB_BUCKETS - 1);
    EXACT_BELOW as usize + (exponent as usize - 6) * SUB_BUCKETS + sub
}

/// The middle of a bucket's value range.
fn bucket_value(index: usize) -> u64 {
    if index < EXACT_BELOW as usize {
        return index as u64;
    }
    let exponent = (index - EXACT_BELOW as usize) / SUB_BUCKETS + 6;
    let sub = ((index - EXACT_BELOW as usize) % SUB_BUCKETS) as u64;
    let shift = exponent as u32 - SUB_BUCKET_BITS;
    let lower = (SUB_BUCKETS as u64 + sub) << shift;
    lower + (1u64 << shift) / 2
}

impl Histogram {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn record(&mut self, value_ns: Nanos) {
        self.counts[bucket_of(value_ns)] += 1;
        self.samples_count += 1;
        self.sum_ns += value_ns as u128;
        self.max_ns = self.max_ns.max(value_ns);
    }

    pub fn clear(&mut self) {
        *self = Histogram::default();
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine += theirs;
        }
        self.samples_count += other.samples_count;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    pub fn count(&self) -> u64 {
        self.samples_count
    }

    pub fn mean_ns(&self) -> f64 {
        if self.samples_count == 0 {
            return 0.0;
        }
        self.sum_ns as f64 / self.samples_count as f64
    }

    pub fn max_ns(&self) -> Nanos {
        self.max_ns
    }

    /// The value below which a fraction `quantile` (0..=1) of the samples
    /// lie; 0 for an empty histogram.
    pub fn percentile_ns(&self, quantile: f64) -> Nanos {
        if self.samples_count == 0 {
            return 0;
        }
        let rank = ((quantile * self.samples_count as f64).ceil() as u64).clamp(1, self.samples_count);
        let mut seen = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return bucket_value(index).min(self.max_ns);
            }
        }
        self.max_ns
    }
}

/// A histogram that one thread records into while others read it: its
/// writer loads and stores (relaxed), no locked instruction, so that the
/// data path of an SPDK channel stays as cheap as a plain counter's; a
/// reader adds what it sees to a `Histogram`. Only the writer clears it.
pub struct SharedHistogram {
    counts: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
}

impl Default for SharedHistogram {
    fn default() -> Self {
        let counts = (0..BUCKETS).map(|_| AtomicU64::new(0)).collect();
        SharedHistogram { counts, sum_ns: AtomicU64::new(0), max_ns: AtomicU64::new(0) }
    }
}

/// Adds `by` to a counter only its writer changes.
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}

impl SharedHistogram {
    /// By its writer only.
    pub fn record(&self, value_ns: Nanos) {
        bump(&self.counts[bucket_of(value_ns)], 1);
        bump(&self.sum_ns, value_ns);
        if value_ns > self.max_ns.load(Relaxed) {
            self.max_ns.store(value_ns, Relaxed);
        }
    }

    /// By its writer only.
    pub fn clear(&self) {
        self.counts.iter().chain([&self.sum_ns, &self.max_ns]).for_each(|c| c.store(0, Relaxed));
    }

    /// Adds the samples seen now to `into` (a sample recorded meanwhile
    /// may show in its bucket and not yet in the sum).
    pub fn add_to(&self, into: &mut Histogram) {
        for (mine, theirs) in into.counts.iter_mut().zip(self.counts.iter()) {
            let count = theirs.load(Relaxed);
            *mine += count;
            into.samples_count += count;
        }
        into.sum_ns += self.sum_ns.load(Relaxed) as u128;
        into.max_ns = into.max_ns.max(self.max_ns.load(Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_within_bucket_precision() {
        let mut histogram = Histogram::new();
        for value in 1..=100_000u64 {
            histogram.record(value * 1_000);
        }
        for (quantile, exact) in [(0.5, 50_000_000.0), (0.99, 99_000_000.0), (0.01, 1_000_000.0)] {
            let measured = histogram.percentile_ns(quantile) as f64;
            assert!((measured - exact).abs() / exact < 0.035, "q{quantile}: {measured} vs {exact}");
        }
        assert!((histogram.mean_ns() - 50_000_500.0).abs() < 1.0);
        assert_eq!(histogram.max_ns(), 100_000_000);
    }

    #[test]
    fn bucket_boundaries_are_monotonic() {
        let mut previous = 0;
        for value in (0..1u64 << 20).step_by(97).chain([u64::MAX / 2, u64::MAX]) {
            let bucket = bucket_of(value);
            assert!(bucket >= previous && bucket < BUCKETS);
            previous = bucket;
        }
    }

    #[test]
    fn merge_adds_samples() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        a.record(10);
        b.record(1_000_000);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert_eq!(a.percentile_ns(1.0), b.percentile_ns(1.0));
        assert_eq!(Histogram::new().percentile_ns(0.5), 0);
    }

    #[test]
    fn a_shared_histogram_reads_as_the_same_samples_recorded_plainly() {
        let (shared, mut plain) = (SharedHistogram::default(), Histogram::new());
        for value in [5, 700, 2_000_000, 2_100_000, 9_000_000] {
            shared.record(value);
            plain.record(value);
        }
        let mut read = Histogram::new();
        read.record(1);
        shared.add_to(&mut read);
        assert_eq!(read.count(), 6);
        assert_eq!(read.max_ns(), 9_000_000);
        for quantile in [0.5, 0.99] {
            let mut expected = plain.clone();
            expected.record(1);
            assert_eq!(read.percentile_ns(quantile), expected.percentile_ns(quantile));
        }
        shared.clear();
        let mut empty = Histogram::new();
        shared.add_to(&mut empty);
        assert_eq!((empty.count(), empty.max_ns(), empty.mean_ns()), (0, 0, 0.0));
    }
}
