//! A hand-written SVG of a run's timeline: throughput (records/s) on top, request latency
//! percentiles (p50, p99, max; log scale) below. Runs are laid end to end on one time axis, each
//! endpoint in its own colour, so a `--vs` run shows its alternation.

use std::fmt::Write as _;

use crate::report::NamedRun;

const WIDTH: f64 = 960.0;
const PANEL_HEIGHT: f64 = 260.0;
const MARGIN_LEFT: f64 = 80.0;
const MARGIN_RIGHT: f64 = 160.0;
const MARGIN_TOP: f64 = 40.0;
const GAP: f64 = 60.0;
const COLOURS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];

/// One polyline: points (x seconds, y value).
struct Series {
    colour: &'static str,
    dash: &'static str,
    points: Vec<(f64, f64)>,
}

/// The SVG document for `runs` (`names` fixes the colour order).
pub fn timeline_svg(title: &str, runs: &[NamedRun], names: &[String]) -> String {
    let colour_of = |name: &str| {
        let index = names.iter().position(|n| n == name).unwrap_or(0);
        COLOURS[index % COLOURS.len()]
    };
    let mut throughput = Vec::new();
    let mut latency = Vec::new();
    let mut offset = 0.0;
    let mut boundaries = Vec::new();
    for run in runs {
        let colour = colour_of(&run.name);
        let timeline = &run.result.timeline;
        let point = |f: &dyn Fn(&crate::producer::TimelinePoint) -> f64| {
            timeline
                .iter()
                // A final sliver of an interval would plot a meaningless rate.
                .filter(|p| p.span_s >= 0.2)
                .map(|p| (offset + p.at_s, f(p)))
                .collect::<Vec<_>>()
        };
        throughput.push(Series {
            colour,
            dash: "",
            points: point(&|p| p.records as f64 / p.span_s.max(1e-9)),
        });
        for (dash, pick) in [
            (
                "",
                (|p: &crate::producer::TimelinePoint| p.latency.p50_us) as fn(&_) -> f64,
            ),
            ("6,3", |p| p.latency.p99_us),
            ("2,3", |p| p.latency.max_us),
        ] {
            latency.push(Series {
                colour,
                dash,
                points: point(&|p| pick(p) / 1000.0)
                    .into_iter()
                    .filter(|(_, y)| *y > 0.0)
                    .collect(),
            });
        }
        offset += timeline.last().map_or(0.0, |p| p.at_s);
        boundaries.push(offset);
    }
    let x_max = offset.max(1.0);
    let mut svg = String::new();
    let height = MARGIN_TOP + 2.0 * PANEL_HEIGHT + GAP + 50.0;
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{MARGIN_LEFT}" y="22" font-size="15">{}</text>"#,
        escape(title)
    );
    panel(
        &mut svg,
        MARGIN_TOP,
        "records/s",
        &throughput,
        x_max,
        false,
        &boundaries,
    );
    panel(
        &mut svg,
        MARGIN_TOP + PANEL_HEIGHT + GAP,
        "request latency ms (solid p50, dashed p99, dotted max)",
        &latency,
        x_max,
        true,
        &boundaries,
    );
    // Legend: one entry per endpoint.
    for (i, name) in names.iter().enumerate() {
        let y = MARGIN_TOP + 20.0 + 18.0 * i as f64;
        let x = WIDTH - MARGIN_RIGHT + 15.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            x + 20.0,
            colour_of(name),
            x + 26.0,
            y + 4.0,
            escape(name)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">seconds (runs end to end)</text>"#,
        MARGIN_LEFT + plot_width() / 2.0,
        height - 10.0
    );
    svg.push_str("</svg>\n");
    svg
}

fn plot_width() -> f64 {
    WIDTH - MARGIN_LEFT - MARGIN_RIGHT
}

fn panel(
    svg: &mut String,
    top: f64,
    label: &str,
    series: &[Series],
    x_max: f64,
    log: bool,
    boundaries: &[f64],
) {
    let values = series.iter().flat_map(|s| s.points.iter().map(|(_, y)| *y));
    let y_max = values.clone().fold(0.0f64, f64::max);
    let y_min_positive = values.filter(|y| *y > 0.0).fold(f64::INFINITY, f64::min);
    // Linear panels start at zero; log panels span whole decades around the data.
    let (low, high) = if log {
        let low = if y_min_positive.is_finite() {
            y_min_positive.log10().floor()
        } else {
            -2.0
        };
        let high = if y_max > 0.0 { y_max.log10().ceil() } else { 1.0 };
        (low, high.max(low + 1.0))
    } else {
        (0.0, if y_max > 0.0 { y_max * 1.1 } else { 1.0 })
    };
    let to_y = |value: f64| {
        let v = if log { value.max(1e-12).log10() } else { value };
        top + PANEL_HEIGHT - (v - low) / (high - low) * PANEL_HEIGHT
    };
    let to_x = |seconds: f64| MARGIN_LEFT + seconds / x_max * plot_width();
    let _ = writeln!(
        svg,
        r##"<rect x="{MARGIN_LEFT}" y="{top}" width="{}" height="{PANEL_HEIGHT}" fill="none" stroke="#888"/>"##,
        plot_width()
    );
    let _ = writeln!(
        svg,
        r#"<text x="{MARGIN_LEFT}" y="{}">{}</text>"#,
        top - 6.0,
        escape(label)
    );
    // Horizontal grid: 5 steps linear, one per decade on log.
    let ticks: Vec<f64> = if log {
        (low as i32..=high as i32).map(|e| 10f64.powi(e)).collect()
    } else {
        (0..=5).map(|i| high * i as f64 / 5.0).collect()
    };
    for tick in ticks {
        let y = to_y(tick);
        let _ = writeln!(
            svg,
            r##"<line x1="{MARGIN_LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            MARGIN_LEFT + plot_width(),
            MARGIN_LEFT - 6.0,
            y + 4.0,
            tick_label(tick)
        );
    }
    for boundary in boundaries {
        let x = to_x(*boundary);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{}" stroke="#ccc" stroke-dasharray="3,3"/>"##,
            top + PANEL_HEIGHT
        );
    }
    for s in series.iter().filter(|s| !s.points.is_empty()) {
        let mut path = String::new();
        for (x, y) in &s.points {
            let _ = write!(path, "{:.1},{:.1} ", to_x(*x), to_y(*y));
        }
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.5" stroke-dasharray="{}" points="{}"/>"#,
            s.colour,
            s.dash,
            path.trim_end()
        );
    }
}

fn tick_label(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if value >= 1e3 {
        format!("{:.0}k", value / 1e3)
    } else if value >= 1.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::fake_run;

    #[test]
    fn svg_has_a_line_per_series_and_escapes_the_title() {
        let runs = vec![
            fake_run("kafluss", 0, 3000, 3, 800),
            fake_run("sink", 0, 9000, 3, 90),
        ];
        let names = vec!["kafluss".to_owned(), "sink".to_owned()];
        let svg = timeline_svg("a <b> & c", &runs, &names);
        assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a &lt;b&gt; &amp; c"));
        // Per run: one throughput line and three latency lines (p50, p99, max).
        assert_eq!(svg.matches("<polyline").count(), 8);
        assert!(svg.contains(COLOURS[0]) && svg.contains(COLOURS[1]));
    }
}
