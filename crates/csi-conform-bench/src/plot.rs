//! The bench's charts as SVG text (plotters' SVG backend), inlined in the HTML report so they
//! show without any script: latency percentiles per RPC and throughput against concurrency,
//! and the soak's series over time with their fitted trend.

use plotters::prelude::*;

use super::model::{BenchReport, Soak};

/// One named line of points.
pub struct Series {
    /// Its legend.
    pub name: String,
    /// (x, y) points, x rising.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed-looking (thin) rather than solid: fitted lines and ideals.
    pub thin: bool,
}

/// Axis bounds holding every point, with some room above.
fn bounds(series: &[Series]) -> (std::ops::Range<f64>, std::ops::Range<f64>) {
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= 0.0 {
        y1 = 1.0;
    }
    (x0..x1, 0.0..y1 * 1.1)
}

/// A line chart as an SVG document; an error of the drawing is written as the chart's text.
pub fn line_chart(title: &str, x_desc: &str, y_desc: &str, series: &[Series]) -> String {
    let mut svg = String::new();
    let drawn = draw(&mut svg, title, x_desc, y_desc, series);
    if let Err(e) = drawn {
        tracing::warn!("chart {title:?} could not be drawn: {e}");
    }
    svg
}

fn draw(svg: &mut String, title: &str, x_desc: &str, y_desc: &str, series: &[Series]) -> Result<(), Box<dyn std::error::Error>> {
    let legend_width = if series.len() > 1 { 200 } else { 0 };
    let root = SVGBackend::with_string(svg, (640 + legend_width, 360)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(640);
    let (xs, ys) = bounds(series);
    // No more x labels than whole numbers in the range: labels are printed as whole numbers
    // (concurrency levels, seconds), so a 1..2 axis must not read "1 1 1 1 1 2 2 2".
    let x_labels = ((xs.end - xs.start).floor() as usize + 1).clamp(2, 10);
    let mut chart = ChartBuilder::on(&plot)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(xs, ys)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(x_labels)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let style = if s.thin { color.stroke_width(1) } else { color.stroke_width(2) };
        chart.draw_series(LineSeries::new(s.points.iter().copied(), style))?;
        if legend_width > 0 {
            // The legend beside the plot, never over its lines.
            let y = 40 + 18 * i as i32;
            legend.draw(&PathElement::new(vec![(4, y), (24, y)], style))?;
            legend.draw(&Text::new(s.name.clone(), (30, y - 6), ("sans-serif", 12)))?;
        }
    }
    root.present()?;
    Ok(())
}

/// The ramp's charts: p99 and p50 per RPC against concurrency, and throughput against
/// concurrency beside the linear ideal from level 1. None without levels.
pub fn ramp_charts(report: &BenchReport) -> Vec<(String, String)> {
    if report.levels.is_empty() {
        return Vec::new();
    }
    let mut charts = Vec::new();
    for (pct, pick) in [("p99", (|p: &super::stats::Percentiles| p.p99_ms) as fn(&_) -> f64), ("p50", |p| p.p50_ms)] {
        let series: Vec<Series> = report
            .lifecycle_rpcs
            .iter()
            .map(|rpc| Series {
                name: rpc.clone(),
                points: report.levels.iter().filter_map(|l| Some((l.concurrency as f64, pick(l.rpcs.get(rpc)?)))).collect(),
                thin: false,
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        let title = format!("{pct} latency per RPC");
        charts.push((title.clone(), line_chart(&title, "concurrency", &format!("{pct} ms"), &series)));
    }
    let first = &report.levels[0];
    let per_worker = first.lifecycles_per_second / first.concurrency.max(1) as f64;
    let throughput = vec![
        Series {
            name: "lifecycles/s".into(),
            points: report.levels.iter().map(|l| (l.concurrency as f64, l.lifecycles_per_second)).collect(),
            thin: false,
        },
        Series {
            name: "linear from concurrency 1".into(),
            points: report.levels.iter().map(|l| (l.concurrency as f64, per_worker * l.concurrency as f64)).collect(),
            thin: true,
        },
    ];
    charts.push(("throughput".into(), line_chart("throughput against concurrency", "concurrency", "lifecycles/s", &throughput)));
    charts
}

/// The soak's charts: one per sampled metric, with the Theil–Sen fit over the judged samples.
pub fn soak_charts(soak: &Soak) -> Vec<(String, String)> {
    let mut charts = Vec::new();
    for trend in &soak.trends {
        let points: Vec<(f64, f64)> =
            soak.samples.iter().filter_map(|s| Some((s.at_seconds, super::soak::value(s, &trend.metric)?))).collect();
        let mut series = vec![Series { name: trend.metric.clone(), points: points.clone(), thin: false }];
        if trend.note.is_none() && !points.is_empty() {
            let skip = points.len() - trend.samples;
            let (x0, x1) = (points[skip].0, points[points.len() - 1].0);
            series.push(Series { name: "trend".into(), points: vec![(x0, trend.fitted_start), (x1, trend.fitted_end)], thin: true });
        }
        let title = match &trend.finding {
            Some(_) => format!("{} (keeps growing)", trend.metric),
            None => trend.metric.clone(),
        };
        charts.push((trend.metric.clone(), line_chart(&title, "seconds", &trend.metric, &series)));
    }
    charts
}
