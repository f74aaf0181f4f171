//! The numbers behind `bdev_hhc_get_stats`, with no SPDK in them: the
//! engine's stats as (name, value) fields — the one list of them in the
//! module — which of them are gauges, flush latency as JSON, and the counters' baseline (reset) and rate window.

use super::json::JsonObject;
use crate::config::Policy;
use crate::engine::{MirrorState, Stats};
use crate::histogram::Histogram;

/// Whether writes covered by a completed flush survive the loss of the
/// cache bdev now (`protection` in `bdev_hhc_get_bdevs` and
/// `bdev_hhc_get_stats`): `state` is `protected`, `reduced` (protected, with
/// fewer healthy log mirrors than slots), `degraded` (policy `hhc` with no
/// healthy log mirror left: not protected until one is attached and synced)
/// or `unprotected` (by policy: `wb`, `wb-ordered`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protection {
    pub cache_loss_protected: bool,
    pub state: &'static str,
    pub reason: String,
}

impl Protection {
    /// Of a bdev running `policy` with these log mirrors; `has_cache` false
    /// for a passthrough without a cache bdev.
    pub fn of(policy: Policy, has_cache: bool, mirrors: &[MirrorState]) -> Protection {
        let of = |protected: bool, state, reason: String| Protection { cache_loss_protected: protected, state, reason };
        if !has_cache {
            return of(true, "protected", "no cache bdev: every write goes to the backing bdev".to_string());
        }
        match policy {
            Policy::Passthrough | Policy::WriteThrough => {
                of(true, "protected", format!("policy {policy}: every write is on the backing bdev when it completes"))
            }
            Policy::WriteBackFlush => of(true, "protected", "policy wb-flush: a flush writes every dirty block back".to_string()),
            Policy::WriteBack | Policy::WriteBackOrdered => of(
                false,
                "unprotected",
                format!("policy {policy}: flushed writes not yet written back are on the cache bdev alone (hhc logs them to HDDs)"),
            ),
            Policy::Hhc => {
                let healthy = mirrors.iter().filter(|m| **m == MirrorState::Healthy).count();
                let syncing = mirrors.iter().filter(|m| matches!(m, MirrorState::Syncing { .. })).count();
                let total = mirrors.len();
                let syncing_text = if syncing > 0 { format!(", {syncing} syncing") } else { String::new() };
                if healthy == 0 {
                    of(false, "degraded", format!(
                        "no healthy log mirror (0 of {total}{syncing_text}): flushed writes not yet written back are on the cache bdev alone and are lost with it; attach a log mirror (bdev_hhc_attach_log) and let it sync, or switch to wb-flush or wt"
                    ))
                } else if healthy < total {
                    of(true, "reduced", format!("{healthy} of {total} log mirrors healthy{syncing_text}: losing {healthy} more leaves flushed writes unprotected"))
                } else {
                    of(true, "protected", format!("{healthy} of {total} log mirrors healthy"))
                }
            }
        }
    }

    pub fn json(&self) -> String {
        JsonObject::new()
            .boolean("cache_loss_protected", self.cache_loss_protected)
            .string("state", self.state)
            .string("reason", &self.reason)
            .finish()
    }
}

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

    /// Counter `name`'s count since the last reset, of its raw total `value`.
    pub fn since_reset(&self, name: &str, value: u64) -> u64 {
        value.saturating_sub(value_of(&self.at_reset, name))
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
            counters = counters.number(name, self.since_reset(name, value));
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
    fn protection_follows_the_policy_and_the_healthy_log_mirrors() {
        use MirrorState::{Failed, Healthy, Syncing};
        let state = |policy, cache, mirrors: &[MirrorState]| {
            let p = Protection::of(policy, cache, mirrors);
            (p.cache_loss_protected, p.state)
        };
        assert_eq!(state(Policy::Hhc, true, &[Healthy, Healthy]), (true, "protected"));
        assert_eq!(state(Policy::Hhc, true, &[Healthy, Failed]), (true, "reduced"));
        assert_eq!(state(Policy::Hhc, true, &[Failed]), (false, "degraded"));
        assert_eq!(state(Policy::Hhc, true, &[Failed, Syncing { segments_behind: 3 }]), (false, "degraded"));
        assert_eq!(state(Policy::WriteBack, true, &[Healthy]), (false, "unprotected"));
        assert_eq!(state(Policy::WriteBackOrdered, true, &[]), (false, "unprotected"));
        assert_eq!(state(Policy::WriteBackFlush, true, &[]), (true, "protected"));
        assert_eq!(state(Policy::WriteThrough, true, &[]), (true, "protected"));
        assert_eq!(state(Policy::Passthrough, false, &[]), (true, "protected"));
        let degraded = Protection::of(Policy::Hhc, true, &[Failed]);
        let json: serde_json::Value = serde_json::from_str(&degraded.json()).unwrap();
        assert_eq!((json["cache_loss_protected"].as_bool(), json["state"].as_str()), (Some(false), Some("degraded")));
        assert!(json["reason"].as_str().unwrap().contains("bdev_hhc_attach_log"), "{json}");
    }

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
        assert_eq!((b.since_reset("reads", 171), b.since_reset("never_reset", 4)), (21, 4));
    }
}
