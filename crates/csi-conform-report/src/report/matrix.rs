//! The compatibility matrix (`--orchestrator`) in words: the console's lines, the JUnit
//! cases (one testsuite per orchestrator, one case per behaviour) and the HTML table. Renders
//! the report's [`OrchestratorResult`]s only; what a cell means is decided by the engine.

use std::fmt::Write as _;

use super::{
    model::{BehaviourResult, OrchestratorResult, RunReport, Severity},
    text,
};

/// Where a behaviour is documented.
const DOC: &str = "docs/orchestrators.md";

/// The cell's finding in one line: the first of its worst findings. A cell can be worse than
/// every finding in it (a SHOULD's warning fails the cell of an orchestrator stuck for good by
/// it), so the worst finding is looked for, not one at the cell's outcome.
pub fn first_finding(b: &BehaviourResult) -> Option<String> {
    let worst = b.findings.iter().map(|f| f.severity).max()?;
    b.findings.iter().find(|f| f.severity == worst).map(|f| text::one_line(&f.message))
}

/// The console's section: per orchestrator its counts, then each fail, warn and error cell
/// with its finding and the row it is documented in.
pub fn console(out: &mut String, report: &RunReport) {
    if report.orchestrators.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nWill it work under each orchestrator? ({DOC})");
    for o in &report.orchestrators {
        let _ = writeln!(
            out,
            "  {}: {} pass, {} fail, {} warn, {} skip{}",
            o.name,
            o.count(Severity::Pass),
            o.count(Severity::Fail),
            o.count(Severity::Warn),
            o.count(Severity::Skip),
            if o.count(Severity::Error) > 0 { format!(", {} error", o.count(Severity::Error)) } else { String::new() }
        );
        if o.count(Severity::Inconclusive) > 0 {
            out.pop();
            let _ = writeln!(out, ", {} inconclusive", o.count(Severity::Inconclusive));
        }
        for b in o.behaviours.iter().filter(|b| b.outcome >= Severity::Inconclusive && b.outcome != Severity::Skip) {
            let _ = writeln!(
                out,
                "    {:<12} {:<28} {}: {}  [{}]",
                o.name,
                b.id,
                b.outcome.as_str().to_uppercase(),
                first_finding(b).unwrap_or_default(),
                b.source
            );
        }
    }
}

/// One JUnit case of a cell: its verdict as (element, message, body), `None` when it passed.
pub fn junit_case(o: &OrchestratorResult, b: &BehaviourResult) -> Option<(&'static str, String, String)> {
    let body = || {
        let mut lines: Vec<String> = b.findings.iter().map(|f| format!("[{}] {}", f.severity, f.message)).collect();
        lines.push(format!("{} {}: {} (holds for {}; {})", o.title, b.id, b.summary, b.holds_for, b.source));
        if let Some(d) = &b.deviation {
            lines.push(format!("The orchestrator bends the spec here: {d}"));
        }
        lines.join("\n")
    };
    match b.outcome {
        Severity::Pass | Severity::Warn => None,
        Severity::Skip => Some(("skipped", b.skip_reason.clone().unwrap_or_default(), String::new())),
        Severity::Inconclusive => {
            Some(("skipped", format!("inconclusive: {}", first_finding(b).unwrap_or_default()), body()))
        }
        Severity::Fail => Some(("failure", first_finding(b).unwrap_or_default(), body())),
        Severity::Error => Some(("error", first_finding(b).unwrap_or_default(), body())),
    }
}

/// The HTML table: behaviours down, orchestrators across, each cell its outcome with the
/// finding as its title.
pub fn html(out: &mut String, report: &RunReport) {
    if report.orchestrators.is_empty() {
        return;
    }
    out.push_str("<h2 id=\"orchestrators\">Will it work under each orchestrator?</h2>\n<p class=\"legend\">Each row is a \
        behaviour of the orchestrator (docs/orchestrators.md); a cell is the worst finding of the scenarios run as that \
        orchestrator calls the plugin (<code>&lt;id&gt;@&lt;orchestrator&gt;</code>).</p>\n<table id=\"matrix\"><tr><th>behaviour</th>");
    for o in &report.orchestrators {
        let _ = write!(out, "<th>{}</th>", text::escape_markup(&o.title));
    }
    out.push_str("</tr>\n");
    let mut ids: Vec<&str> = Vec::new();
    for b in report.orchestrators.iter().flat_map(|o| &o.behaviours) {
        if !ids.contains(&b.id.as_str()) {
            ids.push(&b.id);
        }
    }
    for id in ids {
        let _ = write!(out, "<tr><td><code>{}</code></td>", text::escape_markup(id));
        for o in &report.orchestrators {
            match o.behaviours.iter().find(|b| b.id == id) {
                None => out.push_str("<td class=\"num\">—</td>"),
                Some(b) => {
                    let detail = first_finding(b).or_else(|| b.skip_reason.clone()).unwrap_or_else(|| b.summary.clone());
                    let _ = write!(
                        out,
                        "<td class=\"{sev}\" title=\"{title}\">{sev}<br/><small>{source}</small></td>",
                        sev = b.outcome,
                        title = text::escape_markup(&format!("{detail} ({})", b.holds_for)),
                        source = text::escape_markup(&b.source)
                    );
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::Finding;

    /// ember-csi 0.9.1's NOT_FOUND for a node that is gone is a warning (a SHOULD) that fails
    /// the Nomad and Kubernetes cells (both retry it for ever): the console and JUnit named
    /// no reason for those failures.
    #[test]
    fn a_cell_worse_than_its_findings_still_names_the_worst() {
        let cell = |outcome, findings: Vec<Finding>| BehaviourResult {
            id: "lost-node.controller-unpublish".into(),
            summary: String::new(),
            holds_for: String::new(),
            source: String::new(),
            deviation: None,
            outcome,
            skip_reason: None,
            findings,
            instances: Vec::new(),
        };
        let lost = || Finding::new(Severity::Warn, "lost-node", "ControllerUnpublishVolume answered NOT_FOUND");
        let stuck = cell(Severity::Fail, vec![Finding::new(Severity::Inconclusive, "k", "undecided"), lost()]);
        assert_eq!(first_finding(&stuck).as_deref(), Some("ControllerUnpublishVolume answered NOT_FOUND"));
        let o = OrchestratorResult { name: "nomad".into(), title: "Nomad".into(), release: None, behaviours: vec![stuck.clone()] };
        let (element, message, _) = junit_case(&o, &stuck).unwrap();
        assert_eq!((element, message.as_str()), ("failure", "ControllerUnpublishVolume answered NOT_FOUND"));
        // The first of the worst, as before.
        let two = cell(Severity::Fail, vec![lost(), Finding::new(Severity::Fail, "a", "first"), Finding::new(Severity::Fail, "b", "second")]);
        assert_eq!(first_finding(&two).as_deref(), Some("first"));
        assert_eq!(first_finding(&cell(Severity::Pass, Vec::new())), None);
    }
}
