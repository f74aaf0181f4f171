//! Latency histogram with logarithmic buckets: exact below 64 ns, then 32
//! buckets per power of two, so any percentile is within ~3 % of the true
//! value while the histogram stays a fixed 15 KiB however many samples it
//! takes (a run records millions of request latencies). The timed
//! simulator's latencies and the SPDK module's flush latency both use it.

use crate::io::Nanos;

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
}
