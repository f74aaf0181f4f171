//! A small SVG line-plot writer with a log-scale y axis. Hand-written: the tool needs one kind of
//! chart, and a plotting crate would pull in font and raster dependencies for it.

use std::fmt::Write;

use crate::svg::escape;

#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    /// (x, y) points, drawn in order; points with y <= 0 cannot be placed on a log axis and are
    /// skipped.
    pub points: Vec<(f64, f64)>,
    pub color: &'static str,
    pub dashed: bool,
}

#[derive(Clone, Debug)]
pub struct LogPlot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 90.0;
const TOP: f64 = 50.0;
/// Room on the right for the legend.
const RIGHT: f64 = 270.0;
const BOTTOM: f64 = 60.0;
const TICKS_MAX: usize = 14;

/// Maps data to pixels: x linear, y by decades.
struct Frame {
    x_min: f64,
    x_max: f64,
    decade_min: i32,
    decade_max: i32,
}

impl Frame {
    fn fit(series: &[Series]) -> Frame {
        let points = || {
            series
                .iter()
                .flat_map(|s| s.points.iter())
                .filter(plottable)
        };
        let x_min = points().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let x_max = points().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let y_min = points().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let y_max = points().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
        if x_min > x_max {
            // Nothing to draw: an empty frame with sensible axes.
            return Frame {
                x_min: 0.0,
                x_max: 1.0,
                decade_min: 0,
                decade_max: 1,
            };
        }
        let (x_min, x_max) = if x_min == x_max {
            (x_min - 1.0, x_max + 1.0)
        } else {
            (x_min, x_max)
        };
        let decade_min = y_min.log10().floor() as i32;
        let decade_max = (y_max.log10().ceil() as i32).max(decade_min + 1);
        Frame {
            x_min,
            x_max,
            decade_min,
            decade_max,
        }
    }

    fn x_pixel(&self, x: f64) -> f64 {
        LEFT + (x - self.x_min) / (self.x_max - self.x_min) * (WIDTH - LEFT - RIGHT)
    }

    fn y_pixel(&self, y: f64) -> f64 {
        let span = f64::from(self.decade_max - self.decade_min);
        let fraction = (y.log10() - f64::from(self.decade_min)) / span;
        HEIGHT - BOTTOM - fraction * (HEIGHT - TOP - BOTTOM)
    }
}

fn plottable(point: &&(f64, f64)) -> bool {
    point.0.is_finite() && point.1.is_finite() && point.1 > 0.0
}

impl LogPlot {
    pub fn to_svg(&self) -> String {
        let frame = Frame::fit(&self.series);
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
        self.write_titles(&mut svg);
        write_y_axis(&mut svg, &frame);
        write_x_axis(&mut svg, &frame);
        for series in &self.series {
            write_series(&mut svg, &frame, series);
        }
        self.write_legend(&mut svg);
        svg.push_str("</svg>\n");
        svg
    }

    fn write_titles(&self, svg: &mut String) {
        let center_x = (LEFT + WIDTH - RIGHT) / 2.0;
        let center_y = (TOP + HEIGHT - BOTTOM) / 2.0;
        let _ = writeln!(
            svg,
            r#"<text x="{center_x}" y="{}" text-anchor="middle" font-size="15">{}</text>"#,
            TOP - 20.0,
            escape(&self.title)
        );
        let _ = writeln!(
            svg,
            r#"<text x="{center_x}" y="{}" text-anchor="middle">{}</text>"#,
            HEIGHT - 15.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            svg,
            r#"<text x="20" y="{center_y}" text-anchor="middle" transform="rotate(-90 20 {center_y})">{}</text>"#,
            escape(&self.y_label)
        );
    }

    fn write_legend(&self, svg: &mut String) {
        let x = WIDTH - RIGHT + 20.0;
        for (index, series) in self.series.iter().enumerate() {
            let y = TOP + 10.0 + 20.0 * index as f64;
            let _ = writeln!(
                svg,
                r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="2"{}/>"#,
                x + 30.0,
                series.color,
                dash_attribute(series.dashed)
            );
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{}">{}</text>"#,
                x + 38.0,
                y + 4.0,
                escape(&series.label)
            );
        }
    }
}

fn write_y_axis(svg: &mut String, frame: &Frame) {
    let decades = (frame.decade_max - frame.decade_min) as usize;
    let step = decades.div_ceil(TICKS_MAX).max(1);
    for decade in (frame.decade_min..=frame.decade_max).step_by(step) {
        let y = frame.y_pixel(10f64.powi(decade));
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/>"##,
            WIDTH - RIGHT
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{:.1}" text-anchor="end">10<tspan dy="-6" font-size="9">{decade}</tspan></text>"#,
            LEFT - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        svg,
        r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{}" stroke="black"/>"#,
        HEIGHT - BOTTOM
    );
}

fn write_x_axis(svg: &mut String, frame: &Frame) {
    let first = frame.x_min.ceil() as i64;
    let last = frame.x_max.floor() as i64;
    let count = (last - first + 1).max(1) as usize;
    let step = count.div_ceil(TICKS_MAX).max(1);
    let axis_y = HEIGHT - BOTTOM;
    for x in (first..=last).step_by(step) {
        let pixel = frame.x_pixel(x as f64);
        let _ = writeln!(
            svg,
            r#"<line x1="{pixel:.1}" y1="{axis_y}" x2="{pixel:.1}" y2="{}" stroke="black"/>"#,
            axis_y + 5.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{pixel:.1}" y="{}" text-anchor="middle">{x}</text>"#,
            axis_y + 18.0
        );
    }
    let _ = writeln!(
        svg,
        r#"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="black"/>"#,
        WIDTH - RIGHT
    );
}

fn write_series(svg: &mut String, frame: &Frame, series: &Series) {
    let points: Vec<String> = series
        .points
        .iter()
        .filter(plottable)
        .map(|&(x, y)| format!("{:.1},{:.1}", frame.x_pixel(x), frame.y_pixel(y)))
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline fill="none" stroke="{}" stroke-width="2"{} points="{}"/>"#,
        series.color,
        dash_attribute(series.dashed),
        points.join(" ")
    );
}

fn dash_attribute(dashed: bool) -> &'static str {
    if dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plot() -> LogPlot {
        LogPlot {
            title: "A & B".into(),
            x_label: "disks".into(),
            y_label: "MTTDL (years)".into(),
            series: vec![
                Series {
                    label: "falls".into(),
                    points: vec![(3.0, 2e7), (4.0, 1e6), (5.0, 3e3)],
                    color: "red",
                    dashed: false,
                },
                Series {
                    label: "flat <1>".into(),
                    points: vec![(3.0, 5e4), (5.0, 5e4), (6.0, 0.0)],
                    color: "blue",
                    dashed: true,
                },
            ],
        }
    }

    #[test]
    fn y_axis_spans_whole_decades_around_the_data() {
        let frame = Frame::fit(&plot().series);
        assert_eq!((frame.decade_min, frame.decade_max), (3, 8));
        assert_eq!((frame.x_min, frame.x_max), (3.0, 5.0));
        // Larger values are drawn higher, decades evenly spaced.
        let (y3, y4, y5) = (frame.y_pixel(1e3), frame.y_pixel(1e4), frame.y_pixel(1e5));
        assert!(y3 > y4 && y4 > y5);
        assert!(((y3 - y4) - (y4 - y5)).abs() < 1e-9);
        assert!((frame.y_pixel(1e3) - (HEIGHT - BOTTOM)).abs() < 1e-9);
        assert!((frame.y_pixel(1e8) - TOP).abs() < 1e-9);
    }

    #[test]
    fn svg_has_one_polyline_per_series_legend_and_ticks() {
        let svg = plot().to_svg();
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(
            svg.matches("stroke-dasharray").count(),
            2,
            "dashed series and its legend"
        );
        for decade in 3..=8 {
            assert!(svg.contains(&format!(r#"font-size="9">{decade}</tspan>"#)));
        }
        assert!(svg.contains("A &amp; B") && svg.contains("flat &lt;1&gt;"));
        // The point with y = 0 is dropped rather than drawn at -infinity.
        assert!(!svg.contains("inf") && !svg.contains("NaN"));
    }
}
