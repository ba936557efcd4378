//! Bench baselines: `report --compare OLD.json NEW.json` on two bench reports. A regression is
//! a p99 (per RPC and of whole lifecycles) or a throughput that moved past a threshold both
//! relative AND absolute, at a concurrency level both reports reached: a small move on a
//! fast RPC is noise, a large share of nothing is too.

use std::fmt::Write as _;

use super::model::BenchReport;

/// The fewest calls of an RPC (or lifecycles) at a level, in both reports, for its p99 to be
/// compared: the p99 of fewer is one slow call (a scheduler stall on a busy machine), not a
/// percentile.
pub const MIN_CALLS: u64 = 50;

/// When a move is a regression.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// p99 regressed when new >= old x this...
    pub p99_ratio: f64,
    /// ...and new - old >= this many milliseconds.
    pub p99_ms: f64,
    /// Throughput regressed when new <= old x (1 - this)...
    pub throughput_drop: f64,
    /// ...and old - new >= this many lifecycles per second.
    pub throughput_abs: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds { p99_ratio: 1.5, p99_ms: 5.0, throughput_drop: 0.25, throughput_abs: 0.5 }
    }
}

/// One figure that moved past both thresholds.
#[derive(Debug, Clone, PartialEq)]
pub struct Regression {
    /// The concurrency level.
    pub concurrency: usize,
    /// `p99 of <RPC>`, `p99 of a lifecycle` or `throughput`.
    pub what: String,
    /// The old figure.
    pub before: f64,
    /// The new figure.
    pub after: f64,
    /// `ms` or `lifecycles/s`.
    pub unit: &'static str,
}

/// What changed between two benches.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BenchComparison {
    /// Past the thresholds.
    pub regressions: Vec<Regression>,
    /// Levels only one report has, and other things a reader should know.
    pub notes: Vec<String>,
}

/// Compares `old` and `new` level by level.
pub fn compare(old: &BenchReport, new: &BenchReport, t: &Thresholds) -> BenchComparison {
    let mut out = BenchComparison::default();
    if old.settings.volume_size != new.settings.volume_size || old.lifecycle_rpcs != new.lifecycle_rpcs {
        out.notes.push("the two benches ran different lifecycles (volume size or RPCs differ): compare with care".into());
    }
    for o in &old.levels {
        let Some(n) = new.levels.iter().find(|n| n.concurrency == o.concurrency) else {
            out.notes.push(format!("concurrency {} is only in the old bench (the new one stopped: {})", o.concurrency, new.stopped));
            continue;
        };
        let c = o.concurrency;
        let p99 = |out: &mut BenchComparison, what: String, before: &super::stats::Percentiles, after: &super::stats::Percentiles| {
            if before.count < MIN_CALLS || after.count < MIN_CALLS {
                return;
            }
            if after.p99_ms >= before.p99_ms * t.p99_ratio && after.p99_ms - before.p99_ms >= t.p99_ms {
                // The p99 is one witness, and a busy machine's stalls move it alone: the median
                // must have risen too (by half the ratio) for the plugin to be blamed.
                if after.p50_ms >= before.p50_ms * (1.0 + (t.p99_ratio - 1.0) / 2.0) {
                    out.regressions.push(Regression { concurrency: c, what, before: before.p99_ms, after: after.p99_ms, unit: "ms" });
                } else {
                    out.notes.push(format!(
                        "at concurrency {c}, {what} rose {:.2} -> {:.2} ms while its median held ({:.2} -> {:.2} ms): a slower tail, or a busy machine; not blamed on the plugin (run both again on a quiet machine)",
                        before.p99_ms, after.p99_ms, before.p50_ms, after.p50_ms
                    ));
                }
            }
        };
        p99(&mut out, "p99 of a lifecycle".into(), &o.lifecycle, &n.lifecycle);
        for (rpc, before) in &o.rpcs {
            if let Some(after) = n.rpcs.get(rpc) {
                p99(&mut out, format!("p99 of {rpc}"), before, after);
            }
        }
        let (before, after) = (o.lifecycles_per_second, n.lifecycles_per_second);
        if after <= before * (1.0 - t.throughput_drop) && before - after >= t.throughput_abs {
            out.regressions.push(Regression { concurrency: c, what: "throughput".into(), before, after, unit: "lifecycles/s" });
        }
    }
    for n in &new.levels {
        if !old.levels.iter().any(|o| o.concurrency == n.concurrency) {
            out.notes.push(format!("concurrency {} is only in the new bench", n.concurrency));
        }
    }
    out
}

impl BenchComparison {
    /// The comparison as text, for the console.
    pub fn to_text(&self, t: &Thresholds) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "thresholds: p99 x{:.2} and +{:.1} ms; throughput -{:.0}% and -{:.2} lifecycles/s",
            t.p99_ratio,
            t.p99_ms,
            t.throughput_drop * 100.0,
            t.throughput_abs
        );
        if self.regressions.is_empty() {
            let _ = writeln!(s, "no regression");
        }
        for r in &self.regressions {
            let _ = writeln!(
                s,
                "REGRESSION at concurrency {}: {} {:.2} -> {:.2} {} ({:+.0}%)",
                r.concurrency,
                r.what,
                r.before,
                r.after,
                r.unit,
                (r.after / r.before.max(f64::MIN_POSITIVE) - 1.0) * 100.0
            );
        }
        for note in &self.notes {
            let _ = writeln!(s, "note: {note}");
        }
        s
    }
}

/// Reads a bench report; `None` when `json` is not one (a run report, say).
pub fn from_json(json: &str) -> Option<Result<BenchReport, String>> {
    let value: serde_json::Value = serde_json::from_str(json).ok()?;
    if value.get("format").and_then(|f| f.as_str()) != Some(super::model::FORMAT) {
        return None;
    }
    let version = value.get("format_version").and_then(serde_json::Value::as_u64).unwrap_or(0);
    if version > u64::from(super::model::FORMAT_VERSION) {
        return Some(Err(format!(
            "bench report format version {version} is newer than this csi-conform reads ({})",
            super::model::FORMAT_VERSION
        )));
    }
    Some(serde_json::from_value(value).map_err(|e| e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{model::*, stats::Percentiles};

    fn report(p99: f64, throughput: f64) -> BenchReport {
        let p = Percentiles { count: 100, p50_ms: p99 / 2.0, p90_ms: p99, p99_ms: p99, max_ms: p99, mean_ms: p99 / 2.0 };
        BenchReport {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            tool_version: "0".into(),
            started: String::new(),
            plugin_name: "p".into(),
            plugin_version: "1".into(),
            endpoints: vec![],
            settings: Settings {
                max_concurrency: 1,
                lifecycles_per_worker: 100,
                volume_size: 1,
                expand_size: 2,
                access_type: "mount".into(),
                bundled_latency_ms: None,
                bundled_quirks: vec![],
            },
            lifecycle_rpcs: vec!["CreateVolume".into()],
            process: None,
            process_note: None,
            levels: vec![Level {
                concurrency: 1,
                lifecycles: 100,
                completed: 100,
                seconds: 1.0,
                lifecycles_per_second: throughput,
                rpcs_per_second: throughput,
                lifecycle: p,
                rpcs: [("CreateVolume".to_owned(), p)].into(),
                errors: Default::default(),
                process: None,
            }],
            stopped: String::new(),
            soak: None,
            left_behind: 0,
        }
    }

    #[test]
    fn a_regression_must_pass_both_the_relative_and_the_absolute_threshold() {
        let t = Thresholds::default();
        // x3 but only +2 ms: noise on a fast RPC.
        assert!(compare(&report(1.0, 100.0), &report(3.0, 100.0), &t).regressions.is_empty());
        // +20 ms but only x1.2: a slow RPC's usual wobble.
        assert!(compare(&report(100.0, 100.0), &report(120.0, 100.0), &t).regressions.is_empty());
        let slower = compare(&report(10.0, 100.0), &report(30.0, 100.0), &t);
        assert_eq!(slower.regressions.len(), 2, "{slower:?}"); // the lifecycle and CreateVolume
        // A p99 that rose while the median held is a note, not a regression (one witness).
        let mut tail = report(30.0, 100.0);
        tail.levels[0].lifecycle.p50_ms = 5.0;
        tail.levels[0].rpcs.values_mut().for_each(|p| p.p50_ms = 5.0);
        let tail = compare(&report(10.0, 100.0), &tail, &t);
        assert!(tail.regressions.is_empty() && tail.notes.len() == 2, "{tail:?}");
        assert!(tail.to_text(&t).contains("while its median held (5.00 -> 5.00 ms)"), "{}", tail.to_text(&t));
        // The p99 of fewer than MIN_CALLS calls is not compared.
        let mut few = report(30.0, 100.0);
        few.levels[0].lifecycle.count = MIN_CALLS - 1;
        few.levels[0].rpcs.values_mut().for_each(|p| p.count = MIN_CALLS - 1);
        assert!(compare(&report(10.0, 100.0), &few, &t).regressions.is_empty());
        // Throughput: -50% of 0.6/s is -0.3/s, under the absolute threshold.
        assert!(compare(&report(1.0, 0.6), &report(1.0, 0.3), &t).regressions.is_empty());
        let fewer = compare(&report(1.0, 100.0), &report(1.0, 50.0), &t);
        assert_eq!(fewer.regressions.iter().map(|r| r.what.as_str()).collect::<Vec<_>>(), ["throughput"]);
        assert!(fewer.to_text(&t).contains("REGRESSION at concurrency 1: throughput 100.00 -> 50.00"));
    }

    #[test]
    fn bench_reports_are_told_from_run_reports_and_newer_versions_refused() {
        let json = serde_json::to_string(&report(1.0, 1.0)).unwrap();
        assert_eq!(from_json(&json).unwrap().unwrap(), report(1.0, 1.0));
        assert!(from_json(r#"{"format_version": 3, "scenarios": []}"#).is_none());
        let newer = json.replace("\"format_version\":1", "\"format_version\":99");
        assert!(from_json(&newer).unwrap().is_err());
    }
}
