//! Turns point results into what a person reads: one table per experiment,
//! SVG charts, JSON, and the targets (ratios measured in one run against
//! the paper's bounds).

use super::experiments::{PointResult, Settings, FIG6_CACHE_GB, FIG7_THREADS, STEADY};
use super::report::{markdown_table, svg_bar_panels, svg_lines};
use crate::json::Json;
use crate::config::Policy;
use crate::engine::MemoryReport;

/// The paper's names for the policies (Fig. 5 legend).
pub fn paper_name(policy: Policy) -> &'static str {
    match policy {
        Policy::Passthrough => "Raw",
        Policy::WriteThrough => "WT",
        Policy::WriteBack => "WB",
        Policy::WriteBackFlush => "WB-Flush",
        Policy::WriteBackOrdered => "WB-Ordered",
        Policy::Hhc => "HHC",
    }
}

fn us(ns: f64) -> String {
    format!("{:.0}", ns / 1e3)
}

/// A cache size in GB as the tables show it: at most two decimals (a size
/// given in MiB, stated before scaling, is rarely a round number of GB).
pub fn gb_label(gb: f64) -> String {
    let text = format!("{gb:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn row(result: &PointResult) -> Vec<String> {
    let point = &result.point;
    let mut cells = vec![
        point.workload.name().to_string(),
        gb_label(point.cache_gb),
        point.threads.to_string(),
        paper_name(point.policy).to_string(),
    ];
    match &result.figures {
        Ok(f) => cells.extend([
            format!("{:.0}", f.iops()),
            us(f.request_latency.mean_ns()),
            us(f.request_latency.percentile_ns(0.99) as f64),
            us(f.flush_latency.percentile_ns(0.5) as f64),
            us(f.flush_latency.percentile_ns(0.99) as f64),
            format!("{:.1}", f.log_mb_s()),
            format!("{:.1}", 100.0 * f.dirty_fraction()),
            format!("{:.1}", f.writeback_mb_s()),
            format!("{:.1}", f.log_wraps()),
        ]),
        Err(message) => cells.push(format!("FAILED: {message}")),
    }
    cells
}

pub const TABLE_HEADERS: [&str; 13] = [
    "workload",
    "cache GB",
    "threads",
    "policy",
    "IOPS",
    "lat mean us",
    "lat p99 us",
    "flush p50 us",
    "flush p99 us",
    "log MB/s",
    "dirty %",
    "write-back MB/s",
    "log wraps",
];

pub fn table(results: &[PointResult]) -> String {
    markdown_table(&TABLE_HEADERS, &results.iter().map(row).collect::<Vec<_>>())
}

fn iops_of(results: &[PointResult], matches: impl Fn(&PointResult) -> bool, policy: Policy) -> f64 {
    results.iter().find(|r| r.point.policy == policy && matches(r)).map(PointResult::iops).unwrap_or(f64::NAN)
}

fn policies_in(results: &[PointResult]) -> Vec<Policy> {
    let mut policies: Vec<Policy> = Vec::new();
    for result in results {
        if !policies.contains(&result.point.policy) {
            policies.push(result.point.policy);
        }
    }
    policies
}

pub fn fig5_svg(results: &[PointResult], settings: &Settings) -> String {
    let policies = policies_in(results);
    let names: Vec<String> = policies.iter().map(|p| paper_name(*p).to_string()).collect();
    let panels: Vec<(String, Vec<f64>)> = ["websearch", "fileserver", "varmail"]
        .iter()
        .map(|w| (w.to_string(), policies.iter().map(|&p| iops_of(results, |r| r.point.workload.name() == *w, p)).collect()))
        .collect();
    let title = format!("Fig. 5: IOPS per policy, {:.1} GB cache (scale {})", 4.0 * settings.scale, settings.scale);
    svg_bar_panels(&title, "IOPS", &names, &panels)
}

fn line_series(results: &[PointResult], xs: &[f64], x_of: impl Fn(&PointResult) -> f64) -> Vec<(String, Vec<f64>)> {
    policies_in(results)
        .into_iter()
        .map(|p| (paper_name(p).to_string(), xs.iter().map(|x| iops_of(results, |r| x_of(r) == *x, p)).collect()))
        .collect()
}

pub fn fig6_svg(results: &[PointResult], settings: &Settings) -> String {
    let series = line_series(results, &FIG6_CACHE_GB, |r| r.point.cache_gb);
    let title = format!("Fig. 6: fileserver IOPS vs cache size (scale {})", settings.scale);
    svg_lines(&title, "cache size, GB (before scaling)", "IOPS", &FIG6_CACHE_GB, &series)
}

pub fn fig7_svg(results: &[PointResult], settings: &Settings) -> String {
    let xs: Vec<f64> = FIG7_THREADS.iter().map(|&t| t as f64).collect();
    let series = line_series(results, &xs, |r| r.point.threads as f64);
    let title = format!("Fig. 7: varmail IOPS vs threads (scale {})", settings.scale);
    svg_lines(&title, "threads", "IOPS", &xs, &series)
}

pub fn memory_table(memory: &MemoryReport) -> String {
    let rows = vec![
        vec!["index bytes per cache block".into(), format!("{:.1}", memory.cache_index_bytes_per_block()), "~20".into()],
        vec!["log bytes per live log entry".into(), format!("{:.1}", memory.log_bytes_per_live_entry()), "~10".into()],
        vec!["bookkeeping / cache capacity %".into(), format!("{:.3}", memory.percent_of_cache()), "0.56".into()],
        vec!["cache blocks".into(), memory.cache_blocks.to_string(), "".into()],
        vec!["live log entries at the end".into(), memory.log_live_entries.to_string(), "".into()],
        vec!["I/O buffers (log segments, staging), MiB".into(), format!("{:.1}", memory.io_buffer_bytes as f64 / 1048576.0), "".into()],
    ];
    markdown_table(&["§3.5 memory", "measured", "paper"], &rows)
}

/// One target: a ratio measured in this run against its goal.
#[derive(Clone, Debug)]
pub struct TargetCheck {
    /// The experiment of the points compared; the paper's targets are those
    /// of Figs. 5-7, the steady-state experiment holds the same bounds.
    pub experiment: &'static str,
    pub name: String,
    pub ratio: f64,
    pub goal: f64,
}

impl TargetCheck {
    pub fn met(&self) -> bool {
        self.ratio >= self.goal
    }

    /// One of the paper's figures (not the steady-state experiment).
    pub fn is_paper_target(&self) -> bool {
        self.experiment != STEADY
    }
}

/// Groups of points that differ only in policy (one bar group or x value).
fn groups(results: &[PointResult]) -> Vec<Vec<&PointResult>> {
    let mut groups: Vec<Vec<&PointResult>> = Vec::new();
    for result in results {
        let key = |r: &PointResult| (r.point.experiment, r.point.workload.name(), r.point.cache_gb.to_bits(), r.point.threads);
        match groups.iter_mut().find(|g| key(g[0]) == key(result)) {
            Some(group) => group.push(result),
            None => groups.push(vec![result]),
        }
    }
    groups
}

/// HHC within 10 % of WB everywhere; fileserver and varmail at or above the
/// paper's lower bounds against WT and WB-Flush (§3.2-3.4).
pub fn targets(results: &[PointResult]) -> Vec<TargetCheck> {
    let mut checks = Vec::new();
    for group in groups(results) {
        let iops = |policy| group.iter().find(|r| r.point.policy == policy).map(|r| r.iops()).unwrap_or(f64::NAN);
        let point = &group[0].point;
        let label = format!("{} {} {}GB {}thr", point.experiment, point.workload.name(), gb_label(point.cache_gb), point.threads);
        let hhc = iops(Policy::Hhc);
        let mut check = |against: Policy, goal: f64| {
            let ratio = hhc / iops(against);
            if ratio.is_finite() {
                checks.push(TargetCheck { experiment: point.experiment, name: format!("{label}: HHC/{}", paper_name(against)), ratio, goal });
            }
        };
        check(Policy::WriteBack, 0.9);
        match point.workload.name() {
            "fileserver" => {
                check(Policy::WriteThrough, 1.754);
                check(Policy::WriteBackFlush, 1.482);
            }
            "varmail" => {
                check(Policy::WriteThrough, 3.7);
                check(Policy::WriteBackFlush, 5.5);
            }
            _ => {}
        }
    }
    checks
}

pub fn targets_table(checks: &[TargetCheck]) -> String {
    let rows: Vec<Vec<String>> = checks
        .iter()
        .map(|c| {
            let verdict = if c.met() { "met".to_string() } else { format!("MISSED by {:.0} %", 100.0 * (1.0 - c.ratio / c.goal)) };
            vec![c.name.clone(), format!("{:.2}", c.ratio), format!(">= {:.2}", c.goal), verdict]
        })
        .collect();
    markdown_table(&["target", "measured", "goal", "verdict"], &rows)
}

fn figures_json(result: &PointResult) -> Json {
    let point = &result.point;
    let mut fields = vec![
        ("experiment".to_string(), Json::text(point.experiment)),
        ("workload".to_string(), Json::text(point.workload.name())),
        ("policy".to_string(), Json::text(point.policy.name())),
        ("cache_gb".to_string(), Json::Number(point.cache_gb)),
        ("threads".to_string(), Json::Number(point.threads as f64)),
    ];
    match &result.figures {
        Ok(f) => fields.extend([
            ("iops".to_string(), Json::Number(f.iops())),
            ("reads".to_string(), Json::Number(f.reads_count as f64)),
            ("writes".to_string(), Json::Number(f.writes_count as f64)),
            ("latency_us_mean".to_string(), Json::Number(f.request_latency.mean_ns() / 1e3)),
            ("latency_us_p99".to_string(), Json::Number(f.request_latency.percentile_ns(0.99) as f64 / 1e3)),
            ("flushes".to_string(), Json::Number(f.flush_latency.count() as f64)),
            ("flush_us_p50".to_string(), Json::Number(f.flush_latency.percentile_ns(0.5) as f64 / 1e3)),
            ("flush_us_p99".to_string(), Json::Number(f.flush_latency.percentile_ns(0.99) as f64 / 1e3)),
            ("fsync_us_p50".to_string(), Json::Number(f.fsync_latency.percentile_ns(0.5) as f64 / 1e3)),
            ("log_mb_s".to_string(), Json::Number(f.log_mb_s())),
            ("dirty_fraction".to_string(), Json::Number(f.dirty_fraction())),
            ("writeback_mb_s".to_string(), Json::Number(f.writeback_mb_s())),
            ("log_wraps".to_string(), Json::Number(f.log_wraps())),
            ("measured_s".to_string(), Json::Number(f.measured_s)),
            ("prefill_s".to_string(), Json::Number(f.prefill_s)),
        ]),
        Err(message) => fields.push(("error".to_string(), Json::text(message.clone()))),
    }
    if let (Some(m), "memory") = (&result.memory, point.experiment) {
        fields.push(("memory_bytes_per_cache_block".to_string(), Json::Number(m.cache_index_bytes_per_block())));
        fields.push(("memory_log_bytes_per_live_entry".to_string(), Json::Number(m.log_bytes_per_live_entry())));
        fields.push(("memory_percent_of_cache".to_string(), Json::Number(m.percent_of_cache())));
    }
    Json::object(fields)
}

pub fn results_json(results: &[PointResult], checks: &[TargetCheck], settings: &Settings) -> Json {
    Json::object([
        ("scale", Json::Number(settings.scale)),
        ("settle_s", Json::Number(settings.settle_s)),
        ("measure_s", Json::Number(settings.measure_s)),
        ("steady_settle_s", Json::Number(settings.steady_settle_s)),
        ("steady_measure_s", Json::Number(settings.steady_measure_s)),
        ("seed", Json::Number(settings.seed as f64)),
        ("points", Json::Array(results.iter().map(figures_json).collect())),
        (
            "targets",
            Json::Array(
                checks
                    .iter()
                    .map(|c| {
                        Json::object([
                            ("experiment", Json::text(c.experiment)),
                            ("name", Json::text(c.name.clone())),
                            ("ratio", Json::Number(c.ratio)),
                            ("goal", Json::Number(c.goal)),
                            ("met", Json::Text(c.met().to_string())),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timed::experiments::{fig5_points, Settings};
    use crate::timed::runner::RunFigures;

    fn with_iops(point: crate::timed::experiments::Point, reads: u64) -> PointResult {
        let figures = RunFigures { measured_s: 1.0, reads_count: reads, ..RunFigures::default() };
        PointResult { point, figures: Ok(figures), memory: None, wall_s: 0.0 }
    }

    #[test]
    fn the_table_shows_how_often_the_log_wrapped() {
        let settings = Settings::default();
        let point = crate::timed::experiments::steady_points(&settings).pop().unwrap();
        let counters = vec![("log_segments_written", 100), ("log_segments_total", 40)];
        let figures = RunFigures { measured_s: 1.0, target_counters: counters, ..RunFigures::default() };
        assert_eq!(figures.log_wraps(), 2.5);
        let result = PointResult { point, figures: Ok(figures), memory: None, wall_s: 0.0 };
        let text = table(&[result]);
        let header = text.lines().next().unwrap();
        assert!(header.trim_end_matches(['|', ' ']).ends_with("log wraps"), "{header}");
        assert!(text.lines().nth(2).unwrap().trim_end_matches(['|', ' ']).ends_with("2.5"), "{text}");
    }

    #[test]
    fn targets_compare_hhc_with_the_paper_bounds() {
        let settings = Settings::default();
        let iops_by_policy = |p: Policy| match p {
            Policy::Passthrough => 100,
            Policy::WriteThrough => 200,
            Policy::WriteBack => 1000,
            Policy::WriteBackFlush => 100,
            Policy::WriteBackOrdered => 900,
            Policy::Hhc => 950,
        };
        let results: Vec<PointResult> =
            fig5_points(&settings).into_iter().map(|p| { let n = iops_by_policy(p.policy); with_iops(p, n) }).collect();
        let checks = targets(&results);
        // websearch: vs WB only; fileserver and varmail: vs WB, WT, WB-Flush.
        assert_eq!(checks.len(), 1 + 3 + 3);
        let varmail_wt = checks.iter().find(|c| c.name.contains("varmail") && c.name.ends_with("HHC/WT")).unwrap();
        assert!(varmail_wt.met() && (varmail_wt.ratio - 4.75).abs() < 1e-9);
        let hhc_vs_wb = checks.iter().find(|c| c.name.contains("fileserver") && c.name.ends_with("HHC/WB")).unwrap();
        assert!(hhc_vs_wb.met());
        assert!(checks.iter().all(TargetCheck::is_paper_target));
        let steady_settings = Settings::default();
        let steady: Vec<PointResult> = crate::timed::experiments::steady_points(&steady_settings)
            .into_iter()
            .map(|p| { let n = iops_by_policy(p.policy); with_iops(p, n) })
            .collect();
        let steady_checks = targets(&steady);
        // fileserver and varmail: vs WB, WT, WB-Flush, none of them the paper's.
        assert_eq!(steady_checks.len(), 3 + 3);
        assert!(steady_checks.iter().all(|c| !c.is_paper_target() && c.name.starts_with("steady ")));
        let table = targets_table(&[TargetCheck { experiment: "fig5", name: "x".into(), ratio: 0.45, goal: 0.9 }]);
        assert!(table.contains("MISSED by 50 %"), "{table}");
    }
}
