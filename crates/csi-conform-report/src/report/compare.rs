//! What changed between two runs (`csi-conform report --compare OLD.json NEW.json`): new
//! failures, fixed scenarios, coverage lost and gained (scenarios that went to or from a
//! skip), scenarios that appeared or went away, and RPCs whose latency moved, for nightly
//! jobs that want to know what is different today.

use std::{collections::BTreeMap, fmt::Write as _};

use super::model::{RunReport, ScenarioResult, Severity};

/// A change of one scenario's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeChange {
    /// The scenario id.
    pub id: String,
    /// The outcome in the old run.
    pub before: Severity,
    /// The outcome in the new run.
    pub after: Severity,
    /// The new run's first finding, for context.
    pub reason: Option<String>,
}

/// A move in one RPC's median latency.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyMove {
    /// The RPC.
    pub rpc: String,
    /// Old median, seconds.
    pub before: f64,
    /// New median, seconds.
    pub after: f64,
}

impl LatencyMove {
    /// New median over old median.
    pub fn ratio(&self) -> f64 {
        if self.before > 0.0 { self.after / self.before } else { f64::INFINITY }
    }
}

/// Everything that differs between two runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Comparison {
    /// Worse than before (e.g. pass → fail).
    pub regressions: Vec<OutcomeChange>,
    /// Better than before (e.g. fail → pass).
    pub fixes: Vec<OutcomeChange>,
    /// Coverage lost: scenarios that ran (any outcome) before and are skipped now.
    pub coverage_lost: Vec<OutcomeChange>,
    /// Coverage gained: scenarios skipped before that now run and do not fail.
    pub coverage_gained: Vec<OutcomeChange>,
    /// Decided before, inconclusive now (the harness could not decide): neither a new failure
    /// nor a fix.
    pub undecided: Vec<OutcomeChange>,
    /// Inconclusive before, decided now without failing.
    pub decided: Vec<OutcomeChange>,
    /// Scenarios only in the new run.
    pub added: Vec<String>,
    /// Scenarios only in the old run.
    pub removed: Vec<String>,
    /// RPCs whose median latency changed by more than the threshold and the floor.
    pub latency: Vec<LatencyMove>,
}

/// How much an RPC's median must move (as a ratio either way) to be reported.
pub const LATENCY_THRESHOLD: f64 = 1.5;

/// How much an RPC's median must move in absolute terms (seconds) to be reported, whatever
/// the ratio: sub-millisecond medians jitter by several times from run to run.
pub const LATENCY_FLOOR: f64 = 0.005;

fn by_id(report: &RunReport) -> BTreeMap<&str, &ScenarioResult> {
    report.suites.iter().flat_map(|s| &s.scenarios).map(|s| (s.id.as_str(), s)).collect()
}

/// Compares two runs. Outcomes are ordered pass < skip < warn < fail < error; a move up is a
/// regression, a move down a fix. A move to a skip is lost coverage (the check no longer
/// runs, whatever it gave before) and a move from a skip gained coverage, unless the scenario
/// now fails, which is a new failure. A latency move counts when the median changed by
/// [`LATENCY_THRESHOLD`] either way *and* by at least [`LATENCY_FLOOR`].
pub fn compare(old: &RunReport, new: &RunReport) -> Comparison {
    let before = by_id(old);
    let after = by_id(new);
    let mut out = Comparison::default();
    for (id, now) in &after {
        let Some(then) = before.get(id) else {
            out.added.push((*id).to_owned());
            continue;
        };
        if then.outcome == now.outcome {
            continue;
        }
        let reason = match now.outcome {
            Severity::Skip => Some(super::text::skip_reason(now)),
            Severity::Inconclusive => super::text::outcome_reason(now),
            _ => now.findings.iter().find(|f| f.severity >= Severity::Warn).map(|f| f.message.clone()),
        };
        let change = OutcomeChange { id: (*id).to_owned(), before: then.outcome, after: now.outcome, reason };
        match (then.outcome, now.outcome) {
            (_, Severity::Skip) => out.coverage_lost.push(change),
            (Severity::Skip, after) if after < Severity::Fail => out.coverage_gained.push(change),
            (_, Severity::Inconclusive) => out.undecided.push(change),
            (Severity::Inconclusive, after) if after < Severity::Fail => out.decided.push(change),
            (before, after) if after > before => out.regressions.push(change),
            _ => out.fixes.push(change),
        }
    }
    out.removed = before.keys().filter(|id| !after.contains_key(*id)).map(|id| (*id).to_owned()).collect();
    for (rpc, now) in &new.rpc_latency {
        if let Some(then) = old.rpc_latency.get(rpc) {
            let m = LatencyMove { rpc: rpc.clone(), before: then.median, after: now.median };
            let r = m.ratio();
            let large = r >= LATENCY_THRESHOLD || r <= 1.0 / LATENCY_THRESHOLD;
            if large && (m.after - m.before).abs() >= LATENCY_FLOOR {
                out.latency.push(m);
            }
        }
    }
    out
}

impl Comparison {
    /// Whether the new run is worse in any scenario.
    pub fn has_regressions(&self) -> bool {
        !self.regressions.is_empty()
    }

    /// A readable summary, one line per change; "no changes" when nothing moved.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let section = |out: &mut String, title: &str, changes: &[OutcomeChange]| {
            if changes.is_empty() {
                return;
            }
            let _ = writeln!(out, "{title} ({}):", changes.len());
            for c in changes {
                let _ = write!(out, "  {}  {} -> {}", c.id, c.before, c.after);
                if let Some(reason) = &c.reason {
                    let _ = write!(out, "  ({reason})");
                }
                out.push('\n');
            }
        };
        section(&mut out, "new failures", &self.regressions);
        section(&mut out, "fixed", &self.fixes);
        section(&mut out, "coverage lost (now skipped)", &self.coverage_lost);
        section(&mut out, "coverage gained (no longer skipped)", &self.coverage_gained);
        section(&mut out, "undecided (now inconclusive)", &self.undecided);
        section(&mut out, "decided (no longer inconclusive)", &self.decided);
        for (title, ids) in [("new scenarios", &self.added), ("scenarios gone", &self.removed)] {
            if !ids.is_empty() {
                let _ = writeln!(out, "{title} ({}):", ids.len());
                ids.iter().for_each(|id| {
                    let _ = writeln!(out, "  {id}");
                });
            }
        }
        if !self.latency.is_empty() {
            let _ = writeln!(
                out,
                "latency moves (median, more than {LATENCY_THRESHOLD}x and {:.0}ms):",
                LATENCY_FLOOR * 1e3
            );
            for m in &self.latency {
                let _ = writeln!(
                    out,
                    "  {:<32} {:>9.3}ms -> {:>9.3}ms  ({:.2}x)",
                    m.rpc,
                    m.before * 1e3,
                    m.after * 1e3,
                    m.ratio()
                );
            }
        }
        if out.is_empty() {
            out.push_str("no changes\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::report::model::{Finding, RpcLatency, SuiteResult};

    fn scenario(id: &str, outcome: Severity) -> ScenarioResult {
        ScenarioResult {
            id: id.into(),
            title: id.into(),
            requirements: Vec::new(),
            tags: vec![],
            parity: vec![],
            outcome,
            skip_reason: None,
            findings: if outcome >= Severity::Warn {
                vec![Finding::new(outcome, "unexpected-code", format!("{id} went wrong"))]
            } else {
                vec![]
            },
            duration: Duration::ZERO,
            expectation: None,
            rpcs: 0,
            exercised: Vec::new(),
        }
    }

    fn run(scenarios: Vec<ScenarioResult>, median: f64) -> RunReport {
        RunReport {
            tool_version: "0".into(),
            plugin_name: "p".into(),
            plugin_version: "1".into(),
            endpoints: vec![],
            capabilities: vec![],
            seed: 1,
            strict: false,
            started_at: "2026-01-01T00:00:00Z".into(),
            duration: Duration::ZERO,
            suites: vec![SuiteResult { id: "s".into(), title: "s".into(), source: "t".into(), scenarios }],
            rpc_latency: [(
                "CreateVolume".to_owned(),
                RpcLatency { calls: 1, errors: 0, min: median, median, max: median },
            )]
            .into(),
            interrupted: None,
            mounts: Vec::new(),
            sizes: None,
            spec: None,
            orchestrators: Vec::new(),
            settled: None,
            opt_in_coverage: Default::default(),
        }
    }

    #[test]
    fn finds_regressions_fixes_additions_removals_and_latency_moves() {
        let old = run(
            vec![scenario("a", Severity::Pass), scenario("b", Severity::Fail), scenario("gone", Severity::Pass)],
            0.001,
        );
        let new = run(
            vec![scenario("a", Severity::Fail), scenario("b", Severity::Pass), scenario("new", Severity::Pass)],
            0.009,
        );
        let c = compare(&old, &new);
        assert!(c.has_regressions());
        assert_eq!(c.render(), "new failures (1):\n  a  pass -> fail  (a went wrong)\nfixed (1):\n  b  fail -> pass\nnew scenarios (1):\n  new\nscenarios gone (1):\n  gone\nlatency moves (median, more than 1.5x and 5ms):\n  CreateVolume                         1.000ms ->     9.000ms  (9.00x)\n");
        let same = compare(&old, &old);
        assert_eq!(same.render(), "no changes\n");
    }

    #[test]
    fn skips_are_coverage_changes_and_a_skip_that_now_fails_is_a_new_failure() {
        let mut skipped = scenario("lost", Severity::Skip);
        skipped.skip_reason = Some("needs controller:EXPAND_VOLUME, not advertised".into());
        let old = run(
            vec![scenario("lost", Severity::Pass), scenario("gained", Severity::Skip), scenario("now-fails", Severity::Skip), scenario("failed", Severity::Fail)],
            0.001,
        );
        let new = run(
            vec![skipped, scenario("gained", Severity::Pass), scenario("now-fails", Severity::Fail), scenario("failed", Severity::Skip)],
            0.001,
        );
        let c = compare(&old, &new);
        let ids = |v: &[OutcomeChange]| v.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&c.coverage_lost), ["failed", "lost"]);
        assert_eq!(ids(&c.coverage_gained), ["gained"]);
        assert_eq!(ids(&c.regressions), ["now-fails"]);
        assert!(c.fixes.is_empty(), "a failure that is now skipped is not fixed: {:?}", c.fixes);
        let text = c.render();
        assert!(text.contains("coverage lost (now skipped) (2):\n  failed  fail -> skip  (skipped)\n  lost  pass -> skip  (needs controller:EXPAND_VOLUME, not advertised)\n"), "{text}");
        assert!(text.contains("coverage gained (no longer skipped) (1):\n  gained  skip -> pass\n"), "{text}");
    }

    #[test]
    fn inconclusive_is_neither_a_new_failure_nor_a_fix() {
        let mut undecided = scenario("was-failing", Severity::Inconclusive);
        undecided.findings = vec![Finding::inconclusive("witnesses", "the witnesses disagree")];
        let old = run(
            vec![scenario("was-failing", Severity::Fail), scenario("was-passing", Severity::Pass), scenario("back", Severity::Inconclusive), scenario("worse", Severity::Inconclusive)],
            0.001,
        );
        let new = run(
            vec![undecided, scenario("was-passing", Severity::Inconclusive), scenario("back", Severity::Pass), scenario("worse", Severity::Fail)],
            0.001,
        );
        let c = compare(&old, &new);
        let ids = |v: &[OutcomeChange]| v.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&c.undecided), ["was-failing", "was-passing"]);
        assert_eq!(ids(&c.decided), ["back"]);
        assert_eq!(ids(&c.regressions), ["worse"], "a pass that is now inconclusive is no new failure");
        assert!(c.fixes.is_empty(), "a failure that is now inconclusive is not fixed: {:?}", c.fixes);
        let text = c.render();
        assert!(text.contains("undecided (now inconclusive) (2):\n  was-failing  fail -> inconclusive  (the witnesses disagree)\n"), "{text}");
        assert!(text.contains("decided (no longer inconclusive) (1):\n  back  inconclusive -> pass\n"), "{text}");
    }

    #[test]
    fn latency_moves_need_both_the_ratio_and_the_floor() {
        let moved = |before: f64, after: f64| !compare(&run(vec![], before), &run(vec![], after)).latency.is_empty();
        assert!(!moved(0.0002, 0.0009), "sub-millisecond jitter of 4.5x is no move");
        assert!(!moved(0.100, 0.120), "20 ms on 100 ms is under 1.5x");
        assert!(moved(0.002, 0.008), "6 ms and 4x");
        assert!(moved(0.020, 0.005), "faster counts too");
        assert!(!moved(0.004, 0.0085), "4.5 ms is under the floor");
    }
}
