//! Output writers: Markdown tables and SVG charts
//! drawn by hand (bar panels for Fig. 5, line charts for Figs. 6 and 7), so
//! the figures can be looked at in any browser without a plotting stack.

use std::fmt::Write as _;

use crate::svg::escape;

pub fn markdown_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut text = format!("| {} |\n|", headers.join(" | "));
    for _ in headers {
        text.push_str("---|");
    }
    text.push('\n');
    for row in rows {
        let _ = writeln!(text, "| {} |", row.join(" | "));
    }
    text
}

const PALETTE: [&str; 8] = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f"];

fn color(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

/// A round axis maximum and tick step (1, 2 or 5 x 10^k) for values up to `max`.
fn axis(max: f64) -> (f64, f64) {
    let max = if max > 0.0 && max.is_finite() { max } else { 1.0 };
    let raw_step = max / 5.0;
    let magnitude = 10f64.powf(raw_step.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= raw_step).unwrap_or(magnitude * 10.0);
    ((max / step).ceil() * step, step)
}

fn format_tick(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{}k", value / 1000.0)
    } else if value.fract() == 0.0 {
        format!("{value}")
    } else {
        format!("{value:.2}")
    }
}

struct Frame {
    left: f64,
    top: f64,
    height: f64,
    y_max: f64,
}

impl Frame {
    fn y(&self, value: f64) -> f64 {
        self.top + self.height * (1.0 - value / self.y_max)
    }
}

/// Y axis with grid lines and labels; returns the frame to plot into.
fn y_axis(svg: &mut String, left: f64, top: f64, width: f64, height: f64, data_max: f64, label: &str) -> Frame {
    let (y_max, step) = axis(data_max);
    let frame = Frame { left, top, height, y_max };
    let mut tick = 0.0;
    while tick <= y_max + step / 2.0 {
        let y = frame.y(tick);
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11">{}</text>"##,
            left + width,
            left - 4.0,
            y + 4.0,
            format_tick(tick)
        );
        tick += step;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" font-size="11" transform="rotate(-90 {:.1} {:.1})" text-anchor="middle">{}</text>"#,
        left - 42.0,
        top + height / 2.0,
        left - 42.0,
        top + height / 2.0,
        escape(label)
    );
    frame
}

fn svg_open(width: f64, height: f64, title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{:.1}\" y=\"20\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
        width / 2.0,
        escape(title)
    )
}

/// One bar chart per panel (each with its own y scale), side by side; bar
/// `i` of every panel has colour `i`, named in the shared legend.
pub fn svg_bar_panels(title: &str, y_label: &str, series_names: &[String], panels: &[(String, Vec<f64>)]) -> String {
    let (panel_width, panel_height) = (300.0, 260.0);
    let width = 70.0 + panels.len() as f64 * (panel_width + 70.0);
    let mut svg = svg_open(width, panel_height + 130.0, title);
    for (p, (panel_name, values)) in panels.iter().enumerate() {
        let left = 70.0 + p as f64 * (panel_width + 70.0);
        let data_max = values.iter().copied().fold(0.0, f64::max);
        let frame = y_axis(&mut svg, left, 40.0, panel_width, panel_height, data_max, y_label);
        let slot = panel_width / values.len().max(1) as f64;
        for (i, value) in values.iter().enumerate() {
            let y = frame.y(*value);
            let _ = writeln!(
                svg,
                r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {value:.0}</title></rect>"#,
                frame.left + i as f64 * slot + slot * 0.15,
                slot * 0.7,
                frame.top + frame.height - y,
                color(i),
                escape(series_names.get(i).map(String::as_str).unwrap_or(""))
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{}</text>"#,
            left + panel_width / 2.0,
            40.0 + panel_height + 20.0,
            escape(panel_name)
        );
    }
    legend(&mut svg, 70.0, width - 20.0, panel_height + 95.0, series_names);
    svg.push_str("</svg>\n");
    svg
}

/// Legend entries in rows that fit between `left` and `right`.
fn legend(svg: &mut String, left: f64, right: f64, top: f64, names: &[String]) {
    const ENTRY_WIDTH: f64 = 110.0;
    let per_row = (((right - left) / ENTRY_WIDTH).floor() as usize).max(1);
    for (i, name) in names.iter().enumerate() {
        let x = left + (i % per_row) as f64 * ENTRY_WIDTH;
        let top = top + (i / per_row) as f64 * 18.0;
        let _ = writeln!(
            svg,
            r#"<rect x="{x:.1}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="12">{}</text>"#,
            top,
            color(i),
            x + 16.0,
            top + 11.0,
            escape(name)
        );
    }
}

/// Lines over a shared x axis (e.g. threads or cache size), one per series.
pub fn svg_lines(title: &str, x_label: &str, y_label: &str, xs: &[f64], series: &[(String, Vec<f64>)]) -> String {
    let (plot_width, plot_height) = (560.0, 300.0);
    let mut svg = svg_open(plot_width + 120.0, plot_height + 160.0, title);
    let data_max = series.iter().flat_map(|(_, v)| v.iter().copied()).fold(0.0, f64::max);
    let frame = y_axis(&mut svg, 80.0, 40.0, plot_width, plot_height, data_max, y_label);
    let x_of = |i: usize| frame.left + plot_width * (i as f64 + 0.5) / xs.len().max(1) as f64;
    for (i, x) in xs.iter().enumerate() {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"#,
            x_of(i),
            frame.top + plot_height + 16.0,
            format_tick(*x)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">{}</text>"#,
        frame.left + plot_width / 2.0,
        frame.top + plot_height + 36.0,
        escape(x_label)
    );
    // Drawn last to first, so an earlier series (WB) stays on top of an equal later one.
    for (s, (name, values)) in series.iter().enumerate().rev() {
        let points: Vec<String> = values.iter().enumerate().map(|(i, v)| format!("{:.1},{:.1}", x_of(i), frame.y(*v))).collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2" stroke-dasharray="{}"><title>{}</title></polyline>"#,
            points.join(" "),
            color(s),
            // Equal series (WB and WB-Ordered often are) stay visible.
            ["none", "7,4", "2,3", "10,3,2,3"][s % 4],
            escape(name)
        );
        for point in &points {
            let (x, y) = point.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(svg, r#"<circle cx="{x}" cy="{y}" r="3" fill="{}"/>"#, color(s));
        }
    }
    let names: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    legend(&mut svg, 80.0, plot_width + 100.0, plot_height + 100.0, &names);
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_rounds_up_to_nice_steps() {
        assert_eq!(axis(97.0), (100.0, 20.0));
        assert_eq!(axis(0.0), (1.0, 0.2));
        assert_eq!(axis(4_300.0), (5_000.0, 1_000.0));
    }

    #[test]
    fn charts_are_well_formed_svg_with_every_series() {
        let names = vec!["wt".to_string(), "hhc".to_string()];
        let bars = svg_bar_panels("Fig", "IOPS", &names, &[("varmail".into(), vec![100.0, 800.0])]);
        assert!(bars.starts_with("<svg") && bars.trim_end().ends_with("</svg>"));
        assert_eq!(bars.matches("<rect x=").count(), 2 + 2, "bars plus legend keys");
        assert!(bars.contains("hhc: 800"));
        let lines = svg_lines("Fig 7", "threads", "IOPS", &[2.0, 4.0], &[("hhc".into(), vec![1.0, 2.0])]);
        assert_eq!(lines.matches("<circle").count(), 2);
        assert!(lines.contains("<polyline"));
    }

    #[test]
    fn table_has_header_separator_and_rows() {
        let table = markdown_table(&["a", "b"], &[vec!["1".into(), "2".into()]]);
        assert_eq!(table, "| a | b |\n|---|---|\n| 1 | 2 |\n");
    }
}
