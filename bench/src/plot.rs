//! A hand-written SVG of a run's timeline: throughput (records/s) on top, request latency
//! percentiles (p50, p99, max; log scale) below. Runs are laid end to end on one time axis, each
//! endpoint in its own colour, so a `--vs` run shows its alternation. Both panels carry axis
//! titles with units (`<text class="axis-title">`) and labelled ticks on both axes. Every
//! request slower than the run's slow threshold is a circle (`<circle class="slow">`) in the
//! latency panel at its send time and latency, and every second in which the machine reported
//! steal time is a grey band behind it (`<rect class="steal">`, darker for more), so a tail can
//! be lined up with the time a hypervisor took.

use std::fmt::Write as _;

use crate::report::NamedRun;

const WIDTH: f64 = 960.0;
const PANEL_HEIGHT: f64 = 260.0;
const MARGIN_LEFT: f64 = 100.0;
const MARGIN_RIGHT: f64 = 160.0;
const MARGIN_TOP: f64 = 56.0;
/// Between the panels: the first panel's x tick labels and axis title, the second's caption.
const GAP: f64 = 90.0;
/// Below the second panel: its x tick labels and axis title.
const MARGIN_BOTTOM: f64 = 50.0;
const COLOURS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];

/// The x axis title of both panels.
pub const X_AXIS_TITLE: &str = "time since start (s)";
/// The y axis title of the throughput panel.
pub const THROUGHPUT_AXIS_TITLE: &str = "throughput (records/s)";
/// The y axis title of the latency panel.
pub const LATENCY_AXIS_TITLE: &str = "request latency (ms)";

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
    let mut slow = Vec::new();
    let mut bands = Vec::new();
    for run in runs {
        let colour = colour_of(&run.name);
        slow.extend(
            run.result
                .slow_requests
                .iter()
                .map(|request| (offset + request.sent_at_s, request.latency_ms, colour)),
        );
        let timeline = &run.result.timeline;
        bands.extend(timeline.iter().filter_map(|p| {
            let steal = p.steal_ms.filter(|steal| *steal > 0.0)?;
            Some((
                offset + p.at_s - p.span_s,
                offset + p.at_s,
                band_opacity(steal, p.span_s),
            ))
        }));
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
                (|l: &crate::histogram::LatencySummary| l.p50_us) as fn(&_) -> f64,
            ),
            ("6,3", |l| l.p99_us),
            ("2,3", |l| l.max_us),
        ] {
            // A second without answers has no latency to plot.
            latency.push(Series {
                colour,
                dash,
                points: point(&|p| p.latency.as_ref().map_or(0.0, |l| pick(l) / 1000.0))
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
    let height = MARGIN_TOP + 2.0 * PANEL_HEIGHT + GAP + MARGIN_BOTTOM;
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
        &Panel {
            top: MARGIN_TOP,
            caption: "Throughput (runs end to end; dashed verticals separate the runs)",
            y_title: THROUGHPUT_AXIS_TITLE,
            log: false,
        },
        &throughput,
        &[],
        &[],
        x_max,
        &boundaries,
    );
    panel(
        &mut svg,
        &Panel {
            top: MARGIN_TOP + PANEL_HEIGHT + GAP,
            caption: "Request latency per second: solid p50, dashed p99, dotted max, circles slow requests, grey seconds with steal time (log scale)",
            y_title: LATENCY_AXIS_TITLE,
            log: true,
        },
        &latency,
        &slow,
        &bands,
        x_max,
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
    svg.push_str("</svg>\n");
    svg
}

fn plot_width() -> f64 {
    WIDTH - MARGIN_LEFT - MARGIN_RIGHT
}

/// Where a panel goes and what its axes say.
struct Panel {
    top: f64,
    caption: &'static str,
    y_title: &'static str,
    log: bool,
}

/// A slow request's mark: (x seconds, y value, colour).
type Mark = (f64, f64, &'static str);

/// A second with steal time: (from seconds, to seconds, opacity).
type Band = (f64, f64, f64);

/// The opacity of a band whose second lost `steal_ms` CPU milliseconds in `span_s` seconds: the
/// share of one CPU's time taken, scaled into 0.1 (a 10 ms tick) to 0.6 (a whole CPU or more).
fn band_opacity(steal_ms: f64, span_s: f64) -> f64 {
    let share = steal_ms / (span_s.max(1e-9) * 1000.0);
    (0.1 + share * 0.5).min(0.6)
}

fn panel(
    svg: &mut String,
    layout: &Panel,
    series: &[Series],
    marks: &[Mark],
    bands: &[Band],
    x_max: f64,
    boundaries: &[f64],
) {
    let Panel {
        top,
        caption,
        y_title,
        log,
    } = *layout;
    let values = series
        .iter()
        .flat_map(|s| s.points.iter().map(|(_, y)| *y))
        .chain(marks.iter().map(|(_, y, _)| *y));
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
    let bottom = top + PANEL_HEIGHT;
    let _ = writeln!(
        svg,
        r##"<rect x="{MARGIN_LEFT}" y="{top}" width="{}" height="{PANEL_HEIGHT}" fill="none" stroke="#888"/>"##,
        plot_width()
    );
    let _ = writeln!(
        svg,
        r#"<text x="{MARGIN_LEFT}" y="{}">{}</text>"#,
        top - 8.0,
        escape(caption)
    );
    for (from, to, opacity) in bands {
        let _ = writeln!(
            svg,
            r##"<rect class="steal" x="{:.1}" y="{top}" width="{:.1}" height="{PANEL_HEIGHT}" fill="#999" fill-opacity="{opacity:.2}"/>"##,
            to_x(*from),
            (to_x(*to) - to_x(*from)).max(0.5),
        );
    }
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
            r##"<line x1="{MARGIN_LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#eee"/><text class="y-tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            MARGIN_LEFT + plot_width(),
            MARGIN_LEFT - 6.0,
            y + 4.0,
            tick_label(tick)
        );
    }
    // Vertical ticks: seconds at a 1-2-5 step, at most about ten.
    let step = x_step(x_max);
    let decimals = if step < 1.0 { 1 } else { 0 };
    for i in 0..=((x_max / step + 1e-9).floor() as u32) {
        let tick = f64::from(i) * step;
        let x = to_x(tick);
        let label = format!("{tick:.decimals$}");
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{bottom}" x2="{x:.1}" y2="{}" stroke="#888"/><text class="x-tick" x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 4.0,
            bottom + 17.0,
            label
        );
    }
    let _ = writeln!(
        svg,
        r#"<text class="axis-title" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
        MARGIN_LEFT + plot_width() / 2.0,
        bottom + 36.0,
        escape(X_AXIS_TITLE)
    );
    let (title_x, title_y) = (22.0, top + PANEL_HEIGHT / 2.0);
    let _ = writeln!(
        svg,
        r#"<text class="axis-title" x="{title_x}" y="{title_y}" transform="rotate(-90 {title_x} {title_y})" text-anchor="middle">{}</text>"#,
        escape(y_title)
    );
    for boundary in boundaries {
        let x = to_x(*boundary);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{bottom}" stroke="#ccc" stroke-dasharray="3,3"/>"##,
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
    for (x, y, colour) in marks {
        let _ = writeln!(
            svg,
            r#"<circle class="slow" cx="{:.1}" cy="{:.1}" r="3" fill="none" stroke="{colour}"/>"#,
            to_x(*x),
            to_y(*y)
        );
    }
}

/// A tick step of 1, 2 or 5 times a power of ten giving at most ten intervals over `span`.
fn x_step(span: f64) -> f64 {
    let rough = (span / 10.0).max(1e-3);
    let magnitude = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * magnitude)
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

    #[test]
    fn slow_requests_are_circles_at_their_send_time() {
        let mut kafluss = fake_run("kafluss", 0, 3000, 3, 800);
        kafluss.result.slow_requests = vec![
            crate::SlowRequest {
                sent_at_s: 1.5,
                latency_ms: 213.0,
                connection: 0,
                records: 500,
            },
            crate::SlowRequest {
                sent_at_s: 2.5,
                latency_ms: 80.0,
                connection: 1,
                records: 500,
            },
        ];
        let runs = vec![kafluss, fake_run("sink", 0, 9000, 3, 90)];
        let names = vec!["kafluss".to_owned(), "sink".to_owned()];
        let svg = timeline_svg("t", &runs, &names);
        assert_eq!(
            svg.matches(r#"<circle class="slow""#).count(),
            2,
            "one mark per slow request"
        );
        // The latency axis reaches the slowest request (a decade above 213 ms).
        assert!(svg.contains(">1k</text>"), "{svg}");
    }

    #[test]
    fn seconds_with_steal_are_grey_bands_behind_the_latency() {
        // Two runs of 3 s end to end; the first lost 40 ms in its second second, the second
        // lost nothing (fake runs report 0 every second).
        let mut kafluss = fake_run("kafluss", 0, 3000, 3, 800);
        kafluss.result.timeline[1].steal_ms = Some(40.0);
        let runs = vec![kafluss, fake_run("sink", 0, 9000, 3, 90)];
        let names = vec!["kafluss".to_owned(), "sink".to_owned()];
        let svg = timeline_svg("t", &runs, &names);
        assert_eq!(svg.matches(r#"<rect class="steal""#).count(), 1, "{svg}");
        // From 1 s to 2 s of the 6 s axis.
        let from = MARGIN_LEFT + plot_width() / 6.0;
        let width = plot_width() / 6.0;
        assert!(
            svg.contains(&format!(
                r#"<rect class="steal" x="{from:.1}" y="{}" width="{width:.1}""#,
                MARGIN_TOP + PANEL_HEIGHT + GAP
            )),
            "{svg}"
        );
        assert!((band_opacity(40.0, 1.0) - 0.12).abs() < 1e-9);
        assert_eq!(band_opacity(2000.0, 1.0), 0.6);
        let quiet = timeline_svg("t", &[fake_run("a", 0, 100, 2, 10)], &["a".to_owned()]);
        assert!(!quiet.contains("class=\"steal\""));
    }

    /// The texts of the elements `<text class="CLASS" ...>TEXT</text>`, in document order.
    fn texts_of_class(svg: &str, class: &str) -> Vec<String> {
        let opening = format!(r#"<text class="{class}""#);
        svg.match_indices(&opening)
            .map(|(at, _)| {
                let rest = &svg[at..];
                let start = rest.find('>').expect("element closes its tag") + 1;
                let end = rest.find("</text>").expect("text element ends");
                rest[start..end].to_owned()
            })
            .collect()
    }

    #[test]
    fn both_panels_label_their_axes_and_seconds() {
        // Two runs of 3 s end to end: 6 s on the x axis, a tick every second from 0.
        let runs = vec![
            fake_run("kafluss", 0, 3000, 3, 800),
            fake_run("sink", 0, 9000, 3, 90),
        ];
        let names = vec!["kafluss".to_owned(), "sink".to_owned()];
        let svg = timeline_svg("t", &runs, &names);
        assert_eq!(
            texts_of_class(&svg, "axis-title"),
            [
                X_AXIS_TITLE,
                THROUGHPUT_AXIS_TITLE,
                X_AXIS_TITLE,
                LATENCY_AXIS_TITLE
            ]
        );
        let seconds: Vec<String> = (0..=6).map(|s| s.to_string()).collect();
        let both_panels: Vec<String> = seconds.iter().chain(&seconds).cloned().collect();
        assert_eq!(texts_of_class(&svg, "x-tick"), both_panels);
        assert_eq!(svg.matches("rotate(-90 ").count(), 2, "y titles run upwards");
    }

    #[test]
    fn x_steps_are_one_two_five_and_at_most_ten_intervals() {
        for (span, step) in [
            (1.0, 0.1),
            (6.0, 1.0),
            (16.0, 2.0),
            (40.0, 5.0),
            (95.0, 10.0),
            (400.0, 50.0),
        ] {
            assert_eq!(x_step(span), step, "span {span}");
            assert!(span / x_step(span) <= 10.0 + 1e-9);
        }
    }
}
