//! The text report of one bdev's stats, grouped like Open CAS's
//! `casadm -P`: header, requests, blocks, write-back, log, metadata,
//! devices, their commands' latencies, flush latency, errors, the recovery
//! of a lost cache. Groups
//! print what the answer has. Counters and gauges no group names are
//! listed under "other counters" and unknown top-level keys under "other",
//! so a newer target's additions show without breaking the view.

use super::rates::Window;
use super::snapshot::Snapshot;
use serde_json::Value;
use std::collections::HashSet;
use std::fmt::Write;

/// Gauges that repeat the options in force: shown through `options`.
const OPTION_GAUGES: [&str; 4] =
    ["seq_cutoff_threshold_bytes", "seq_cutoff_policy", "dirty_threshold_percent", "writeback_parallelism"];

const LABEL_WIDTH: usize = 30;
const VALUE_WIDTH: usize = 14;
const RATE_WIDTH: usize = 14;

/// The report of `stats`; `window` gives the rate column (None: no
/// refresh interval, no column).
pub fn render(stats: &Snapshot, window: Option<&Window>) -> String {
    let mut view = View { stats, window, shown: HashSet::new(), out: String::new() };
    view.header();
    view.requests();
    view.blocks();
    view.writeback();
    view.log();
    view.metadata();
    view.devices();
    view.device_commands();
    view.flush_latency();
    view.errors();
    view.recovery();
    view.others();
    view.out
}

struct View<'a> {
    stats: &'a Snapshot,
    window: Option<&'a Window>,
    /// Counters and gauges printed so far (the rest go to "other counters").
    shown: HashSet<String>,
    out: String,
}

impl View<'_> {
    fn has_rates(&self) -> bool {
        matches!(self.window, Some(Window::Rates { .. }))
    }

    /// A group's title; over the rate column's heading if `rated` (the
    /// group has counters) and there are rates.
    fn title(&mut self, title: &str, rated: bool) {
        if rated && self.has_rates() {
            let _ = writeln!(self.out, "\n{title:<LABEL_WIDTH$}  {:>VALUE_WIDTH$}{:>RATE_WIDTH$}", "", "per second");
        } else {
            let _ = writeln!(self.out, "\n{title}");
        }
    }

    fn row(&mut self, label: &str, value: &str, rate: Option<String>) {
        let line = match rate {
            Some(rate) => format!("  {label:<LABEL_WIDTH$}{value:>VALUE_WIDTH$}{rate:>RATE_WIDTH$}"),
            None => format!("  {label:<LABEL_WIDTH$}{value:>VALUE_WIDTH$}"),
        };
        let _ = writeln!(self.out, "{}", line.trim_end());
    }

    fn text(&mut self, label: &str, text: &str) {
        let _ = writeln!(self.out, "  {label:<LABEL_WIDTH$}{text}");
    }

    fn counter(&mut self, name: &str) -> Option<u64> {
        let value = self.stats.counter(name)?;
        self.shown.insert(name.to_string());
        Some(value)
    }

    fn gauge(&mut self, name: &str) -> Option<u64> {
        let value = self.stats.gauge(name)?;
        self.shown.insert(name.to_string());
        Some(value)
    }

    /// A counter's row: its total and, with a window, its rate.
    fn counter_row(&mut self, label: &str, name: &str) {
        let Some(value) = self.counter(name) else { return };
        let rate = self.window.and_then(|w| w.rate(name)).map(rate_text);
        self.row(label, &value.to_string(), rate);
    }

    fn gauge_row(&mut self, label: &str, name: &str) {
        if let Some(value) = self.gauge(name) {
            self.row(label, &value.to_string(), None);
        }
    }

    fn header(&mut self) {
        let s = self.stats;
        let mut line = format!("{}  state {}", s.name, s.state);
        if let Some(policy) = &s.policy {
            let _ = write!(line, "  policy {policy}");
        }
        if let Some(target) = &s.policy_target {
            let _ = write!(line, " -> {target} (switching: writing back every dirty block first)");
        }
        let degraded = s.protection.as_ref().filter(|p| p.state == "degraded");
        if degraded.is_some() {
            line.push_str("  DEGRADED");
        }
        let _ = writeln!(self.out, "{line}");
        if let Some(p) = degraded {
            let _ = writeln!(self.out, "  !! DEGRADED: flushed writes are NOT protected against the loss of the cache bdev");
            let _ = writeln!(self.out, "  !! {}", p.reason);
        }
        if let Some(failure) = &s.failure {
            self.text("failure", failure);
        }
        if let Some(p) = &s.protection {
            let protected = if p.cache_loss_protected { "cache loss protected" } else { "NOT protected against a cache loss" };
            self.text("protection", &format!("{} ({protected}): {}", p.state, p.reason));
        }
        for warning in &s.warnings {
            self.text("warning", warning);
        }
        if !s.options.is_empty() {
            let options: Vec<String> = s.options.iter().map(|(k, v)| format!("{k} {}", plain(v))).collect();
            self.text("options", &options.join(", "));
            self.shown.extend(OPTION_GAUGES.iter().map(|g| g.to_string()));
        }
        if let Some(ms) = s.since_reset_ms {
            self.text("since reset", &format!("{:.1} s", ms as f64 / 1000.0));
        }
        match self.window {
            Some(Window::Rates { seconds, .. }) => self.text("rates", &format!("over the last {seconds:.1} s")),
            Some(Window::Unavailable(why)) => self.text("rates", &format!("none this time: {why}")),
            None => {}
        }
    }

    fn requests(&mut self) {
        if self.stats.counter("reads").is_none() {
            return;
        }
        self.title("requests", true);
        self.counter_row("reads", "reads");
        self.counter_row("writes", "writes");
        self.counter_row("flushes", "flushes");
        self.counter_row("read blocks hit", "read_hits");
        self.counter_row("read blocks missed", "read_misses");
        let (hits, misses) = (self.stats.counter("read_hits"), self.stats.counter("read_misses"));
        if let (Some(hits), Some(misses)) = (hits, misses) {
            let window_ratio = self.window.and_then(|w| Some((w.delta("read_hits")?, w.delta("read_misses")?)));
            let rate = window_ratio.map(|(h, m)| percent(h, h + m));
            self.row("read hit ratio", &percent(hits as f64, (hits + misses) as f64), rate);
        }
        self.counter_row("blocks filled after a miss", "fills");
        self.counter_row("blocks evicted", "evictions");
        self.counter_row("cut-off reads", "cutoff_reads");
        self.counter_row("cut-off writes", "cutoff_writes");
        self.counter_row("cut-off writes cached anyway", "cutoff_writes_cached");
        self.counter_row("requests sent back busy", "requests_busy");
        self.gauge_row("request blocks waiting now", "waiting_blocks");
    }

    fn blocks(&mut self) {
        let Some(total) = self.gauge("cache_blocks") else { return };
        self.title("cache blocks", false);
        let share = |n: u64| format!("{n} ({})", percent(n as f64, total as f64));
        let dirty = self.gauge("dirty_blocks");
        let free = self.gauge("free_blocks");
        if let Some(dirty) = dirty {
            self.row("dirty", &share(dirty), None);
        }
        if let Some(unlogged) = self.gauge("unlogged_dirty_blocks") {
            self.row("  not logged yet", &share(unlogged), None);
        }
        if let (Some(dirty), Some(free)) = (dirty, free) {
            self.row("clean", &share(total.saturating_sub(dirty + free)), None);
        }
        if let Some(free) = free {
            self.row("free", &share(free), None);
        }
        self.row("total", &total.to_string(), None);
    }

    fn writeback(&mut self) {
        let s = self.stats;
        if s.counter("writebacks").is_none() && s.flush_all_in_progress.is_none() {
            return;
        }
        self.title("write-back", true);
        self.counter_row("blocks written back", "writebacks");
        self.counter_row("log entries revoked", "revokes");
        let depth = self.gauge("writeback_depth");
        let most = self.gauge("writeback_parallelism");
        match (depth, most) {
            (Some(depth), Some(most)) => self.row("depth now", &format!("{depth} of {most}"), None),
            (Some(depth), None) => self.row("depth now", &depth.to_string(), None),
            _ => {}
        }
        self.counter_row("depth halvings", "writeback_depth_halvings");
        self.counter_row("LBAs whose writes waited for it", "writeback_starved_lbas");
        match (s.flush_all_in_progress, s.flush_all_blocks_remaining) {
            (Some(true), remaining) => {
                let remaining = remaining.map_or_else(String::new, |n| format!(", {n} blocks to go"));
                self.text("flush_all", &format!("in progress{remaining}"));
            }
            (Some(false), _) => self.text("flush_all", "none running"),
            _ => {}
        }
        self.counter_row("flush_alls completed", "flush_alls_completed");
    }

    fn log(&mut self) {
        let Some(total) = self.gauge("log_segments_total") else { return };
        self.title("log", true);
        if let Some(in_use) = self.gauge("log_segments_in_use") {
            self.row("segments in use", &format!("{in_use} of {total} ({})", percent(in_use as f64, total as f64)), None);
        }
        self.gauge_row("live entries", "log_live_entries");
        if let Some(bytes) = self.counter("log_bytes_written") {
            let rate = self.window.and_then(|w| w.rate("log_bytes_written")).map(|r| format!("{}/s", bytes_text(r)));
            self.row("bytes written", &bytes_text(bytes as f64), rate);
        }
        self.counter_row("segments written", "log_segments_written");
        self.counter_row("parts written", "log_parts_written");
        self.counter_row("  gap blocks after barriers", "log_gap_blocks");
        // What the gap choice goes by (engine/gap.rs), 0 until measured.
        self.gauge_row("  barrier wait packed us", "gap_packed_wait_us");
        self.gauge_row("  barrier wait after a gap us", "gap_gapped_wait_us");
        self.gauge_row("  host turnaround us", "gap_turnaround_us");
        self.counter_row("blocks copied", "log_blocks_copied");
        self.counter_row("  read back from the cache", "log_blocks_from_cache");
        self.counter_row("writes waited unheld", "writes_waited_unheld");
        self.counter_row("writes throttled", "writes_throttled");
        self.gauge_row("blocks freed per s", "log_freed_blocks_per_s");
        if let Some(short) = self.gauge("log_shortage_percent").filter(|&s| s > 0) {
            // Writes are paced to what the log frees: held there under a
            // steady load, the log is too small for it.
            self.row("short of space", &format!("{short} %"), Some("writes paced; see hhc size".to_string()));
        }
        self.counter_row("segments reclaimed", "log_segments_reclaimed");
        self.counter_row("  live entries found there", "log_reclaim_live_entries");
        self.counter_row("  entries moved to the tail", "log_blocks_relogged");
        self.counter_row("wraps", "log_wraps");
        self.gauge_row("healthy mirrors", "healthy_mirrors");
    }

    fn metadata(&mut self) {
        if self.stats.counter("commits").is_none() {
            return;
        }
        self.title("metadata", true);
        self.counter_row("commits", "commits");
        self.counter_row("metadata pages written", "meta_pages_written");
        self.counter_row("superblock writes", "superblock_writes");
        self.counter_row("blocks visited by scans", "blocks_visited");
    }

    fn devices(&mut self) {
        let s = self.stats;
        if s.devices.is_empty() && s.base_io_contexts.is_none() {
            return;
        }
        let _ = writeln!(self.out, "\ndevices");
        let name_width = s.devices.iter().map(|d| d.name.len()).max().unwrap_or(0).max(4);
        for d in &s.devices {
            let mut line = format!("  {:<8}{:<name_width$}  {:<8}", d.role, d.name, d.health);
            if let Some(mirror) = &d.mirror {
                let _ = write!(line, "  mirror {mirror}");
                if let Some(behind) = d.segments_behind.filter(|&n| n > 0 || mirror == "syncing") {
                    let _ = write!(line, ", {behind} segments behind");
                }
            }
            let _ = writeln!(self.out, "{}", line.trim_end());
        }
        if let Some((in_use, total)) = s.base_io_contexts {
            self.text("base I/O contexts", &format!("{in_use} in use of {total}"));
        }
    }

    /// A row per device and kind of command it took since the reset:
    /// count and latency; the device's I/O errors on its first row.
    fn device_commands(&mut self) {
        let s = self.stats;
        if s.devices.iter().all(|d| d.latency.is_empty()) {
            return;
        }
        let width = s.devices.iter().map(|d| d.role.len() + 1 + d.name.len()).max().unwrap_or(0).max(6);
        let _ = writeln!(self.out, "\ndevice commands (us)");
        let heading = format!("  {:<width$}  {:<5}{:>9}{:>9}{:>9}{:>9}{:>8}", "device", "kind", "count", "p50", "p99", "max", "errors");
        let _ = writeln!(self.out, "{heading}");
        for d in s.devices.iter().filter(|d| !d.latency.is_empty()) {
            let mut device = format!("{} {}", d.role, d.name);
            let mut errors = d.errors.map_or_else(String::new, |n| n.to_string());
            let timed: Vec<_> = d.latency.iter().filter(|(_, l)| l.count > 0).collect();
            if timed.is_empty() {
                let _ = writeln!(self.out, "  {device:<width$}  {:<5}{:>9}{:>9}{:>9}{:>9}{errors:>8}", "-", 0, "-", "-", "-");
                continue;
            }
            for (kind, l) in timed {
                let row = format!("  {device:<width$}  {kind:<5}{:>9}{:>9}{:>9}{:>9}{errors:>8}", l.count, l.p50_us, l.p99_us, l.max_us);
                let _ = writeln!(self.out, "{}", row.trim_end());
                (device, errors) = (String::new(), String::new());
            }
        }
    }

    fn flush_latency(&mut self) {
        let Some(l) = &self.stats.flush_latency else { return };
        let _ = writeln!(self.out, "\nflush latency (us)");
        let line = format!("{} flushes timed   p50 {}   p99 {}   max {}", l.count, l.p50_us, l.p99_us, l.max_us);
        let _ = writeln!(self.out, "  {line}");
    }

    fn errors(&mut self) {
        let s = self.stats;
        let device_counters: Vec<(String, String)> =
            s.devices.iter().map(|d| (format!("{} {}", d.role, d.name), format!("{}_errors", d.role))).collect();
        let engine = [
            ("device errors (engine)", "device_errors"),
            ("request errors", "request_errors"),
            ("write-back errors", "writeback_errors"),
            ("mirror failures", "mirror_failures"),
            ("stale mirrors re-synced", "stale_mirrors_resynced"),
            ("flushes fallen back", "flush_fallbacks"),
            ("flush_all errors", "flush_all_errors"),
        ];
        let any = engine.iter().any(|(_, n)| s.counter(n).is_some()) || device_counters.iter().any(|(_, n)| s.counter(n).is_some());
        if !any {
            return;
        }
        self.title("errors", true);
        for (label, name) in engine {
            self.counter_row(label, name);
        }
        for (label, name) in &device_counters {
            self.counter_row(&format!("I/O errors of {label}"), name);
        }
    }

    fn recovery(&mut self) {
        let Some(recovery) = &self.stats.recovery else { return };
        let _ = writeln!(self.out, "\nrecovery of the lost cache (replaying the log onto the backing bdev)");
        let get = |key: &str| recovery.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        let number = |key: &str| get(key).and_then(Value::as_u64);
        let mut shown = vec!["blocks_total", "blocks_replayed"];
        if let Some(stage) = get("stage") {
            self.text("stage", &plain(stage));
            shown.push("stage");
        }
        if let (Some(total), Some(done)) = (number("blocks_total"), number("blocks_replayed")) {
            self.text("blocks replayed", &format!("{done} of {total} ({})", percent(done as f64, total as f64)));
        }
        let labels = [
            ("parts_scanned", "log parts scanned"),
            ("parts_replayed", "parts replayed"),
            ("parts_before_head", "parts before the recorded head"),
            ("parts_after_barrier", "parts after the last barrier"),
            ("last_barrier_sequence", "last barrier sequence"),
            ("corrupt_copies_detected", "corrupt copies detected"),
            ("error", "error"),
        ];
        for (key, label) in labels {
            let Some(value) = get(key) else { continue };
            let text = match (key, value) {
                ("last_barrier_sequence", Value::Null) => "none found".to_string(),
                ("error", Value::Null) => "none".to_string(),
                _ => plain(value),
            };
            self.text(label, &text);
            shown.push(key);
        }
        for (key, value) in recovery.iter().filter(|(k, _)| !shown.contains(&k.as_str())) {
            self.text(key, &plain(value));
        }
    }

    /// What no group showed: counters (with their rates), gauges, and
    /// top-level keys this view does not know.
    fn others(&mut self) {
        let s = self.stats;
        let counters: Vec<&(String, u64)> = s.counters.iter().filter(|(n, _)| !self.shown.contains(n)).collect();
        let gauges: Vec<&(String, u64)> = s.gauges.iter().filter(|(n, _)| !self.shown.contains(n)).collect();
        if !counters.is_empty() || !gauges.is_empty() {
            self.title("other counters", true);
            for (name, value) in counters {
                let rate = self.window.and_then(|w| w.rate(name)).map(rate_text);
                self.row(name, &value.to_string(), rate);
            }
            for (name, value) in gauges {
                self.row(&format!("{name} (now)"), &value.to_string(), None);
            }
        }
        if !s.other.is_empty() {
            let _ = writeln!(self.out, "\nother");
            for (key, value) in &s.other {
                self.text(key, &plain(value));
            }
        }
    }
}

/// A JSON value as plain text: strings without quotes.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn percent(part: f64, whole: f64) -> String {
    if whole <= 0.0 {
        return "-".to_string();
    }
    format!("{:.1} %", 100.0 * part / whole)
}

fn rate_text(rate: f64) -> String {
    if rate >= 100.0 || rate == 0.0 {
        format!("{rate:.0}")
    } else {
        format!("{rate:.1}")
    }
}

fn bytes_text(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::super::rates::between;
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn raw(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    fn fixture(name: &str) -> Snapshot {
        Snapshot::parse(&raw(name)).unwrap()
    }

    /// The line of `report` that starts (after indentation) with the word
    /// or words `label`.
    fn line<'a>(report: &'a str, label: &str) -> &'a str {
        let labelled = |l: &str| {
            let rest = l.trim_start().strip_prefix(label);
            rest.is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
        };
        report.lines().find(|l| labelled(l)).unwrap_or_else(|| panic!("no '{label}' in\n{report}"))
    }

    #[test]
    fn every_stat_of_a_real_answer_has_a_group() {
        // The fixture holds every engine stat (else it is out of date), and
        // a new one must be placed in a group on purpose: none is left to
        // "other counters".
        let stats = fixture("get_stats_running_1.json");
        for (name, _) in hhc::engine::Stats::default().fields() {
            assert!(stats.counter(name).or(stats.gauge(name)).is_some(), "{name} is not in the fixture");
        }
        let report = render(&stats, None);
        assert!(!report.contains("other"), "{report}");
    }

    #[test]
    fn a_log_short_of_space_says_so_and_points_at_the_sizing() {
        let quiet = render(&fixture("get_stats_running_2.json"), None);
        assert!(!quiet.contains("short of space"), "{quiet}");
        let mut answer = raw("get_stats_running_2.json");
        answer["gauges"]["log_shortage_percent"] = json!(40);
        let report = render(&Snapshot::parse(&answer).unwrap(), None);
        assert!(line(&report, "short of space").contains("40 %"), "{report}");
        assert!(line(&report, "short of space").contains("hhc size"), "{report}");
    }

    #[test]
    fn a_single_report_shows_every_group_from_a_real_answer() {
        let report = render(&fixture("get_stats_running_2.json"), None);
        assert!(report.starts_with("hhc0  state running  policy hhc\n"), "{report}");
        assert!(line(&report, "options").contains("dirty_threshold 30, writeback_parallelism 64"));
        assert!(line(&report, "reads").ends_with(" 1552"));
        // 1569 hits, 11 misses.
        assert!(line(&report, "read hit ratio").ends_with("99.3 %"), "{report}");
        assert!(line(&report, "dirty").ends_with("247 (3.0 %)"));
        // 8126 - 247 - 6078 clean.
        assert!(line(&report, "clean").ends_with("1801 (22.2 %)"));
        assert!(line(&report, "segments in use").ends_with("33 of 511 (6.5 %)"));
        assert!(line(&report, "bytes written").ends_with("8.6 MiB"));
        assert!(line(&report, "depth now").ends_with("64 of 64"));
        assert!(line(&report, "flush_all").ends_with("none running"));
        assert!(line(&report, "log0").contains("hdd0") && line(&report, "log0").contains("mirror healthy"));
        assert!(line(&report, "base I/O contexts").ends_with("20 in use of 24096"));
        assert_eq!(line(&report, "128 flushes timed").trim(), "128 flushes timed   p50 2129   p99 8781   max 10611");
        assert!(line(&report, "I/O errors of cache ssd").ends_with(" 0"));
        assert!(!report.contains("per second") && !report.contains("recovery") && !report.contains("other"), "{report}");
    }

    #[test]
    fn a_refresh_shows_rates_and_the_windows_hit_ratio() {
        let (first, second) = (fixture("get_stats_running_1.json"), fixture("get_stats_running_2.json"));
        let window = between(&first, &second, Duration::from_secs(1));
        let report = render(&second, Some(&window));
        assert!(line(&report, "rates").ends_with("over the last 1.7 s"));
        assert!(line(&report, "requests").ends_with("per second"));
        assert_eq!(line(&report, "cache blocks"), "cache blocks", "gauges only: no rate heading");
        // 516 reads over 1.654 s.
        assert!(line(&report, "reads").ends_with(" 1552           312"), "{report}");
        assert!(line(&report, "blocks written back").ends_with(" 1801          1089"), "{report}");
        // 523 hits and no misses in the window.
        assert!(line(&report, "read hit ratio").ends_with("99.3 %       100.0 %"), "{report}");
        assert!(line(&report, "bytes written").ends_with("9.7 KiB/s"), "{report}");
        let reset = between(&second, &first, Duration::from_secs(1));
        let report = render(&first, Some(&reset));
        assert!(line(&report, "rates").contains("none this time: the stats were reset"));
        assert!(!report.contains("per second"));
    }

    #[test]
    fn a_switch_a_record_and_its_recovery() {
        let mut value = raw("get_stats_recovering.json");
        value["policy_target"] = json!("wt");
        let report = render(&Snapshot::parse(&value).unwrap(), None);
        assert!(report.starts_with("hhc0  state recovering  policy hhc -> wt (switching"), "{report}");
        assert!(line(&report, "failure").ends_with("cache device lost"));
        assert!(line(&report, "stage").ends_with("replaying"));
        assert!(line(&report, "blocks replayed").ends_with("16 of 1929 (0.8 %)"));
        assert!(line(&report, "last barrier sequence").ends_with("545"));
        assert!(line(&report, "parts after the last barrier").ends_with("4"));
        assert!(line(&report, "error").ends_with("none"));
        assert!(report.lines().any(|l| l.trim_start().starts_with("cache ") && l.contains("ssd") && l.contains("removed")));
    }

    #[test]
    fn a_failed_replay_names_its_error() {
        let mut value = raw("get_stats_recovering.json");
        value["state"] = json!("recovery_failed");
        value["recovery"]["stage"] = json!("failed");
        value["recovery"]["last_barrier_sequence"] = Value::Null;
        value["recovery"]["error"] = json!("every log mirror lost");
        value["recovery"]["replay_attempts"] = json!(2);
        let report = render(&Snapshot::parse(&value).unwrap(), None);
        assert!(line(&report, "last barrier sequence").ends_with("none found"));
        assert!(line(&report, "error").ends_with("every log mirror lost"));
        assert!(line(&report, "replay_attempts").ends_with("2"), "an unknown recovery key is shown: {report}");
    }

    #[test]
    fn a_degraded_bdev_says_so_at_the_top() {
        let mut answer = raw("get_stats_running_1.json");
        answer["protection"] = json!({"cache_loss_protected": false, "state": "degraded",
            "reason": "no healthy log mirror (0 of 1)"});
        let report = render(&Snapshot::parse(&answer).unwrap(), None);
        let mut lines = report.lines();
        assert!(lines.next().unwrap().ends_with("policy hhc  DEGRADED"), "{report}");
        assert_eq!(lines.next(), Some("  !! DEGRADED: flushed writes are NOT protected against the loss of the cache bdev"));
        assert_eq!(lines.next(), Some("  !! no healthy log mirror (0 of 1)"));
        assert!(line(&report, "protection").contains("degraded (NOT protected against a cache loss)"), "{report}");
        answer["protection"] = json!({"cache_loss_protected": true, "state": "protected", "reason": "1 of 1 log mirrors healthy"});
        let report = render(&Snapshot::parse(&answer).unwrap(), None);
        assert!(!report.contains("DEGRADED") && !report.contains("other"), "{report}");
        assert!(line(&report, "protection").contains("protected (cache loss protected): 1 of 1"), "{report}");
    }

    #[test]
    fn unknown_keys_go_to_other_and_missing_groups_are_left_out() {
        let mut value = raw("get_stats_running_1.json");
        value["counters"]["trims"] = json!(12);
        value["gauges"]["pinned_blocks"] = json!(3);
        value["numa_node"] = json!(1);
        let report = render(&Snapshot::parse(&value).unwrap(), None);
        assert!(line(&report, "trims").ends_with(" 12"));
        assert!(line(&report, "pinned_blocks (now)").ends_with(" 3"));
        assert!(line(&report, "numa_node").ends_with("1"));
        assert_eq!(report.matches("\nother counters\n").count(), 1, "{report}");
        // A passthrough without a cache: no engine, no groups but devices.
        let bare = json!({"name": "pt", "state": "running", "policy": "passthrough", "policy_target": null,
            "base_io_contexts": {"in_use": 0, "total": 128},
            "devices": [{"role": "backing", "name": "back", "health": "ok"}]});
        let report = render(&Snapshot::parse(&bare).unwrap(), None);
        for absent in ["requests", "cache blocks", "write-back", "log", "errors", "flush latency", "other"] {
            assert!(!report.lines().any(|l| l == absent), "{absent} in\n{report}");
        }
        assert!(line(&report, "backing").contains("back"));
    }

    /// The lines of `report`'s group titled `title`, up to the blank line.
    fn group<'a>(report: &'a str, title: &str) -> Vec<&'a str> {
        report.lines().skip_while(|l| *l != title).skip(1).take_while(|l| !l.is_empty()).collect()
    }

    #[test]
    fn each_device_shows_its_commands_by_kind_with_its_errors() {
        let report = render(&fixture("get_stats_running_2.json"), None);
        assert_eq!(
            group(&report, "device commands (us)"),
            [
                "  device            kind     count      p50      p99      max  errors",
                "  backing slowback  read         4     3440     3768     3793       0",
                "                    write       81    11927    25427    25461",
                "                    flush       16     7798    25290    25290",
                "  cache ssd         read      4108     7405   132510   132510       0",
                "                    write     2291     7798    27525    31928",
                "                    flush      263     5439    19660   119619",
                "  log0 hdd0         write      166     3899    22806    23791       0",
                "                    flush      165     4096    15859    17610",
            ]
        );
        let mut answer = raw("get_stats_running_2.json");
        answer["devices"][2]["errors"] = json!(3);
        for kind in ["read", "write", "flush"] {
            answer["devices"][2][format!("{kind}_latency_us")] = json!({"count": 0, "p50": 0, "p99": 0, "max": 0});
        }
        let report = render(&Snapshot::parse(&answer).unwrap(), None);
        let rows = group(&report, "device commands (us)");
        assert_eq!(rows.last(), Some(&"  log0 hdd0         -            0        -        -        -       3"), "{report}");
        // An answer without device latencies (an older target): no group.
        let report = render(&fixture("get_stats_running_1.json"), None);
        assert!(!report.contains("device commands"), "{report}");
    }

    #[test]
    fn figures_read_well() {
        assert_eq!(bytes_text(512.0), "512 B");
        assert_eq!(bytes_text(9060352.0), "8.6 MiB");
        assert_eq!((percent(1.0, 3.0), percent(1.0, 0.0)), ("33.3 %".to_string(), "-".to_string()));
        assert_eq!((rate_text(0.0), rate_text(2.34), rate_text(1088.4)), ("0".to_string(), "2.3".to_string(), "1088".to_string()));
    }
}
