//! The numbers behind `bdev_hhc_get_stats`, with no SPDK in them: the
//! engine's stats as (name, value) fields — the one list of them in the
//! module — which of them are gauges, flush latency as JSON, and the counters' baseline (reset) and rate window.

use super::json::JsonObject;
use crate::engine::Stats;
use crate::histogram::Histogram;

/// Every engine stat by name (`bdev_hhc_get_bdevs` and `bdev_hhc_get_stats`):
/// the engine's own list (`Stats::fields`).
pub fn stat_fields(s: &Stats) -> Vec<(&'static str, u64)> {
    s.fields().collect()
}

/// Whether `name` says how things are now (a reset leaves it alone); every
/// other field counts up from zero between resets.
pub fn is_gauge(name: &str) -> bool {
    Stats::default().gauges().iter().any(|&(gauge, _)| gauge == name)
}

/// A latency histogram as `{count, p50, p99, max}` in microseconds.
pub fn latency_json(histogram: &Histogram) -> String {
    let us = |ns: u64| ns / 1000;
    JsonObject::new()
        .number("count", histogram.count())
        .number("p50", us(histogram.percentile_ns(0.50)))
        .number("p99", us(histogram.percentile_ns(0.99)))
        .number("max", us(histogram.max_ns()))
        .finish()
}

/// A node's counters as of the last reset and as of the last report: the
/// report gives counters since the reset and rates since the report before
/// it (or the reset, or the node's start).
#[derive(Default)]
pub struct Baseline {
    /// Counter values at the last reset (none yet: zero).
    at_reset: Vec<(&'static str, u64)>,
    reset_at_ns: u64,
    /// Every field's value when the last report or reset was made.
    sampled: Vec<(&'static str, u64)>,
    sampled_at_ns: u64,
}

fn value_of(fields: &[(&'static str, u64)], name: &str) -> u64 {
    fields.iter().find(|(n, _)| *n == name).map_or(0, |&(_, v)| v)
}

impl Baseline {
    pub fn new(now_ns: u64) -> Baseline {
        Baseline { reset_at_ns: now_ns, sampled_at_ns: now_ns, ..Baseline::default() }
    }

    /// Counters start again from zero; gauges are untouched.
    pub fn reset(&mut self, now_ns: u64, fields: Vec<(&'static str, u64)>) {
        self.at_reset = fields.clone();
        self.reset_at_ns = now_ns;
        self.sampled = fields;
        self.sampled_at_ns = now_ns;
    }

    /// `fields` (counters and gauges, raw totals) as the report's
    /// `since_reset_ms`, `counters`, `gauges` and `rates` (per second over
    /// `window_ms`, since the previous report or reset); then this report
    /// is the start of the next window.
    pub fn report(&mut self, now_ns: u64, fields: Vec<(&'static str, u64)>, object: JsonObject) -> JsonObject {
        let window_ns = now_ns.saturating_sub(self.sampled_at_ns);
        let mut counters = JsonObject::new();
        let mut gauges = JsonObject::new();
        let mut rates = JsonObject::new().number("window_ms", window_ns / 1_000_000);
        for &(name, value) in &fields {
            if is_gauge(name) {
                gauges = gauges.number(name, value);
                continue;
            }
            counters = counters.number(name, value.saturating_sub(value_of(&self.at_reset, name)));
            let delta = value.saturating_sub(value_of(&self.sampled, name)) as u128;
            let per_s = if window_ns == 0 { 0 } else { delta * 1_000_000_000 / window_ns as u128 };
            rates = rates.number(&format!("{name}_per_s"), per_s.min(u64::MAX as u128) as u64);
        }
        let since_reset_ms = now_ns.saturating_sub(self.reset_at_ns) / 1_000_000;
        self.sampled = fields;
        self.sampled_at_ns = now_ns;
        object
            .number("since_reset_ms", since_reset_ms)
            .raw("counters", &counters.finish())
            .raw("gauges", &gauges.finish())
            .raw("rates", &rates.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_json_in_microseconds() {
        let mut h = Histogram::default();
        for us in 1..=100u64 {
            h.record(us * 1000);
        }
        let json: serde_json::Value = serde_json::from_str(&latency_json(&h)).unwrap();
        assert_eq!((json["count"].as_u64(), json["max"].as_u64()), (Some(100), Some(100)));
        let p50 = json["p50"].as_u64().unwrap();
        assert!((48..=52).contains(&p50), "p50 {p50}");
        h.clear();
        assert_eq!(h.count(), 0);
    }

    #[test]
    fn counters_restart_at_a_reset_gauges_do_not_and_rates_cover_the_window() {
        let mut b = Baseline::new(0);
        let fields = |reads, dirty| vec![("reads", reads), ("dirty_blocks", dirty)];
        let report = |b: &mut Baseline, at, f| -> serde_json::Value {
            serde_json::from_str(&b.report(at, f, JsonObject::new()).finish()).unwrap()
        };
        let r = report(&mut b, 2_000_000_000, fields(100, 7));
        assert_eq!((r["counters"]["reads"].as_u64(), r["gauges"]["dirty_blocks"].as_u64()), (Some(100), Some(7)));
        assert_eq!((r["rates"]["window_ms"].as_u64(), r["rates"]["reads_per_s"].as_u64()), (Some(2000), Some(50)));
        assert!(r["rates"].get("dirty_blocks_per_s").is_none());
        b.reset(3_000_000_000, fields(150, 9));
        let r = report(&mut b, 4_000_000_000, fields(170, 9));
        assert_eq!(r["counters"]["reads"], 20);
        assert_eq!(r["gauges"]["dirty_blocks"], 9);
        assert_eq!((r["rates"]["reads_per_s"].as_u64(), r["since_reset_ms"].as_u64()), (Some(20), Some(1000)));
    }
}
