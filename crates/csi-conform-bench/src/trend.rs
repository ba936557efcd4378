//! Whether a soak metric keeps growing: a Theil–Sen slope (the median of every pairwise
//! slope, untroubled by outliers) for how much, and a Mann–Kendall test for whether the rise
//! is a trend rather than noise. A leak or drift is claimed only when both say so and the
//! growth passes a relative and an absolute threshold; the first quarter of the samples
//! (warm-up: allocator arenas, connection set-up) is not judged.

use serde::{Deserialize, Serialize};

/// The Mann–Kendall z a rise must reach (one-sided p < 0.001).
pub const MIN_Z: f64 = 3.09;
/// The fewest samples (after warm-up) a verdict is given on.
pub const MIN_SAMPLES: usize = 8;
/// The share of samples left out as warm-up.
pub const WARM_UP: f64 = 0.25;

/// How much growth of a metric over the judged samples is a finding.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    /// Growth (fitted end minus fitted start) at least this much...
    pub absolute: f64,
    /// ...and at least this share of the fitted start.
    pub relative: f64,
    /// `leak` or `drift`.
    pub kind: &'static str,
}

/// One metric's trend over a soak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trend {
    /// The metric (`rss_kib`, `fds`, `mounts`, `volumes`, `lifecycle_p50_ms`).
    pub metric: String,
    /// Samples judged (after warm-up).
    pub samples: usize,
    /// Theil–Sen slope, units per minute.
    pub slope_per_minute: f64,
    /// The fitted value at the first judged sample.
    pub fitted_start: f64,
    /// The fitted value at the last.
    pub fitted_end: f64,
    /// Mann–Kendall z (positive: rising).
    pub mk_z: f64,
    /// The finding, when it is a leak or a drift; None when steady (or too few samples).
    pub finding: Option<String>,
    /// Why no verdict, when there is none for want of samples.
    pub note: Option<String>,
}

/// The median of `values` (which it sorts); 0 for none.
fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 }
}

/// Theil–Sen: the median pairwise slope, and the median intercept for it.
pub fn theil_sen(points: &[(f64, f64)]) -> (f64, f64) {
    let mut slopes = Vec::with_capacity(points.len() * points.len() / 2);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            if b.0 != a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    let slope = median(&mut slopes);
    let mut intercepts: Vec<f64> = points.iter().map(|(x, y)| y - slope * x).collect();
    (slope, median(&mut intercepts))
}

/// Mann–Kendall's z of `ys` in order (no tie correction: ties only make it more cautious).
pub fn mann_kendall_z(ys: &[f64]) -> f64 {
    let n = ys.len() as f64;
    let mut s = 0i64;
    for (i, a) in ys.iter().enumerate() {
        for b in &ys[i + 1..] {
            s += match b.total_cmp(a) {
                std::cmp::Ordering::Greater => 1,
                std::cmp::Ordering::Less => -1,
                std::cmp::Ordering::Equal => 0,
            };
        }
    }
    let var = n * (n - 1.0) * (2.0 * n + 5.0) / 18.0;
    if var <= 0.0 {
        return 0.0;
    }
    match s {
        0 => 0.0,
        s if s > 0 => (s as f64 - 1.0) / var.sqrt(),
        s => (s as f64 + 1.0) / var.sqrt(),
    }
}

/// Judges `metric` over `points` (seconds, value), leaving out the warm-up.
pub fn judge(metric: &str, points: &[(f64, f64)], limit: Limit) -> Trend {
    let skip = (points.len() as f64 * WARM_UP).floor() as usize;
    let judged = &points[skip.min(points.len())..];
    let mut trend = Trend {
        metric: metric.to_owned(),
        samples: judged.len(),
        slope_per_minute: 0.0,
        fitted_start: 0.0,
        fitted_end: 0.0,
        mk_z: 0.0,
        finding: None,
        note: None,
    };
    if judged.len() < MIN_SAMPLES {
        trend.note = Some(format!("{} samples after warm-up, {MIN_SAMPLES} needed for a verdict", judged.len()));
        return trend;
    }
    let (slope, intercept) = theil_sen(judged);
    let (x0, x1) = (judged[0].0, judged[judged.len() - 1].0);
    trend.slope_per_minute = slope * 60.0;
    trend.fitted_start = intercept + slope * x0;
    trend.fitted_end = intercept + slope * x1;
    trend.mk_z = mann_kendall_z(&judged.iter().map(|p| p.1).collect::<Vec<_>>());
    let growth = trend.fitted_end - trend.fitted_start;
    let relative = if trend.fitted_start.abs() > f64::EPSILON { growth / trend.fitted_start.abs() } else { f64::INFINITY };
    if trend.mk_z >= MIN_Z && growth >= limit.absolute && relative >= limit.relative {
        trend.finding = Some(format!(
            "{}: {metric} keeps growing, {:.1} per minute ({:.1} -> {:.1} fitted over {:.0} s, +{:.0}%, Mann-Kendall z {:.1})",
            limit.kind,
            trend.slope_per_minute,
            trend.fitted_start,
            trend.fitted_end,
            x1 - x0,
            relative.min(99.99) * 100.0,
            trend.mk_z
        ));
    }
    trend
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Limit = Limit { absolute: 10.0, relative: 0.1, kind: "leak" };

    #[test]
    fn a_steady_rise_is_a_finding_and_noise_or_a_plateau_is_not() {
        let rising: Vec<(f64, f64)> = (0..40).map(|i| (i as f64, 100.0 + i as f64 * 2.0 + (i % 3) as f64)).collect();
        let t = judge("fds", &rising, LIMIT);
        assert!(t.finding.is_some(), "{t:?}");
        assert!((t.slope_per_minute - 120.0).abs() < 10.0, "{t:?}");
        // Noise around a level, with one outlier.
        let noisy: Vec<(f64, f64)> =
            (0..40).map(|i| (i as f64, if i == 30 { 500.0 } else { 100.0 + [0.0, 3.0, -2.0, 1.0][i % 4] })).collect();
        assert_eq!(judge("fds", &noisy, LIMIT).finding, None);
        // Growth during warm-up, then flat.
        let plateau: Vec<(f64, f64)> = (0..40).map(|i| (i as f64, if i < 8 { 50.0 + i as f64 * 10.0 } else { 130.0 })).collect();
        assert_eq!(judge("rss_kib", &plateau, LIMIT).finding, None);
        // A rise too small to matter is no finding, however steady.
        let small: Vec<(f64, f64)> = (0..40).map(|i| (i as f64, 1000.0 + i as f64 * 0.1)).collect();
        assert_eq!(judge("rss_kib", &small, LIMIT).finding, None);
        let few: Vec<(f64, f64)> = (0..5).map(|i| (i as f64, i as f64 * 100.0)).collect();
        assert!(judge("fds", &few, LIMIT).note.is_some());
    }
}
