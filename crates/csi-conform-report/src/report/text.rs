//! Text hygiene shared by every writer: model text (plugin messages above all) may hold
//! newlines, terminal escapes or bytes XML cannot carry, so it is made visible and safe here
//! before any writer prints it.

use std::fmt::Write as _;

use super::model::{Finding, ScenarioResult, Severity};

/// Whether `c` must never reach an output verbatim: C0/C1 control characters (the ANSI escape
/// among them), the bidirectional-override controls that can make text read differently from
/// what it is, and the two non-characters XML 1.0 forbids.
fn is_hazard(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        || matches!(c, '\u{FFFE}' | '\u{FFFF}')
}

/// Appends `c`, or its visible `\u{..}` spelling when it is a hazard.
fn push_visible(out: &mut String, c: char) {
    if is_hazard(c) {
        // Writing to a String cannot fail.
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    } else {
        out.push(c);
    }
}

/// `text` escaped for XML and HTML (element content and attribute values alike): the five
/// markup characters become entities, newlines and tabs stay, and every other hazard is
/// spelled out as `\u{..}`.
pub(crate) fn escape_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c => push_visible(&mut out, c),
        }
    }
    out
}

/// `text` on one line: every run of whitespace (newlines and tabs included) becomes one space,
/// the ends are trimmed, and any other control character is spelled out as `\u{..}`. The
/// result holds no control character at all.
pub(crate) fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        word.chars().for_each(|c| push_visible(&mut out, c));
    }
    out
}

/// `text` as a block: line ends normalised to `\n`, tabs kept, trailing whitespace trimmed, and
/// every other control character spelled out as `\u{..}`. Continuation lines are indented by
/// `indent` so that a multi-line value stays inside the item it belongs to.
pub(crate) fn block(text: &str, indent: &str) -> String {
    let normalised = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(normalised.len());
    for (i, line) in normalised.trim_end().lines().enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(indent);
        }
        for c in line.trim_end().chars() {
            if c == '\t' { out.push(c) } else { push_visible(&mut out, c) }
        }
    }
    out
}

/// The finding that explains a scenario's outcome: the first one as bad as the outcome itself.
pub(crate) fn headline(scenario: &ScenarioResult) -> Option<&Finding> {
    scenario.findings.iter().find(|f| f.severity == scenario.outcome)
}

/// Why a skipped scenario was skipped, on one line.
pub(crate) fn skip_reason(scenario: &ScenarioResult) -> String {
    let reason = scenario
        .skip_reason
        .as_deref()
        .or_else(|| headline(scenario).map(|f| f.message.as_str()))
        .map(one_line)
        .unwrap_or_default();
    if reason.is_empty() { "skipped".to_owned() } else { reason }
}

/// A finding on one line: its message, or its kind (or severity) when the message is blank, so
/// that no reader is ever shown an empty reason.
pub(crate) fn finding_line(finding: &Finding) -> String {
    let line = [&finding.message, &finding.kind]
        .into_iter()
        .map(|t| one_line(t))
        .find(|t| !t.is_empty())
        .unwrap_or_else(|| finding.severity.to_string());
    // On a run of several nodes, which one it happened on.
    let line = match &finding.node {
        Some(node) => format!("{line} (on {node})"),
        None => line,
    };
    match evidence_line(finding) {
        Some(evidence) => format!("{line} [evidence: {evidence}]"),
        None => line,
    }
}

/// The evidence a finding's verdict rests on, on one line (`ListVolumes(v) at 1.234s: does
/// not list it; ...`), if it has any.
pub(crate) fn evidence_line(finding: &Finding) -> Option<String> {
    (!finding.evidence.is_empty())
        .then(|| finding.evidence.iter().map(|e| one_line(&e.to_string())).collect::<Vec<_>>().join("; "))
}

/// The one-line reason for a scenario's outcome: the skip reason, or the headline finding's
/// message for a failure, warning or error; `None` for a plain pass.
pub(crate) fn outcome_reason(scenario: &ScenarioResult) -> Option<String> {
    match scenario.outcome {
        Severity::Pass => None,
        Severity::Skip => Some(skip_reason(scenario)),
        _ => Some(headline(scenario).map_or_else(|| scenario.outcome.to_string(), finding_line)),
    }
}

/// The level of a warning, as reports show it beside the word WARN, from the requirements the
/// warning itself breaks (its own, else its scenario's: see [`Finding::blames`]), so that a
/// SHOULD about a message's length is never shown as a MUST because its scenario also checks
/// one: `tolerated deviation from MUST` when one of them is a MUST the engine chose to warn on
/// (an unconfirmed ValidateVolumeCapabilities, say), else `SHOULD` or `MAY`, and `tolerated
/// deviation` when none is named at all.
pub(crate) fn warning_level(scenario: &ScenarioResult, finding: &Finding) -> &'static str {
    let blamed = finding.blames(scenario);
    let levels: Vec<String> = blamed.iter().map(|r| r.level.trim().to_ascii_uppercase()).collect();
    if levels.iter().any(|l| l == "MUST") {
        "tolerated deviation from MUST"
    } else if levels.iter().any(|l| l == "SHOULD") {
        "SHOULD"
    } else if levels.iter().any(|l| l == "MAY") {
        "MAY"
    } else {
        "tolerated deviation"
    }
}

/// A finding that only informs: behaviour the spec permits (a MAY, an error check order it
/// leaves open, a choice it leaves to the plugin) that a reader may still want to know of. A
/// note is a passing finding: it never changes an outcome.
pub(crate) fn is_note(finding: &Finding) -> bool {
    finding.severity == Severity::Pass && finding.kind == NOTE_KIND
}

/// The kind of a [`is_note`] finding.
pub const NOTE_KIND: &str = "note";

/// A duration in seconds with millisecond precision, the form JUnit and the console both use.
pub(crate) fn seconds(d: std::time::Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_collapses_whitespace_and_spells_out_controls() {
        assert_eq!(one_line("  a\n\tb \r\n c  "), "a b c");
        assert_eq!(one_line("red \u{1b}[31mX\u{7}"), "red \\u{1b}[31mX\\u{7}");
        assert_eq!(one_line("evil\u{202E}txt"), "evil\\u{202e}txt");
        assert!(!one_line("\u{0}\u{1f}\u{85}\u{9f}").chars().any(char::is_control));
    }

    fn requirement(id: &str, level: &str) -> super::super::model::RequirementRef {
        super::super::model::RequirementRef { id: id.into(), level: level.into(), summary: String::new(), link: String::new() }
    }

    fn scenario_naming(requirements: Vec<super::super::model::RequirementRef>) -> ScenarioResult {
        ScenarioResult {
            id: "s".into(),
            title: "s".into(),
            requirements,
            tags: Vec::new(),
            parity: Vec::new(),
            outcome: Severity::Warn,
            skip_reason: None,
            findings: Vec::new(),
            duration: std::time::Duration::ZERO,
            expectation: None,
            rpcs: 0,
            exercised: Vec::new(),
        }
    }

    /// A warning's level is its own requirement's, not the strongest its scenario names: a
    /// SHOULD warned in a scenario that also checks a MUST is a SHOULD.
    #[test]
    fn a_warning_is_labelled_by_its_own_requirement_first() {
        let s = scenario_naming(vec![requirement("A.must", "MUST"), requirement("B.should", "SHOULD")]);
        let mut own = Finding::new(Severity::Warn, "k", "m");
        own.requirements = vec!["B.should".into()];
        assert_eq!(warning_level(&s, &own), "SHOULD");
        own.requirements = vec!["A.must".into()];
        assert_eq!(warning_level(&s, &own), "tolerated deviation from MUST");
        // Naming none, it falls back on its scenario's.
        let bare = Finding::new(Severity::Warn, "k", "m");
        assert_eq!(warning_level(&s, &bare), "tolerated deviation from MUST");
        let may = scenario_naming(vec![requirement("C.may", "MAY")]);
        assert_eq!(warning_level(&may, &bare), "MAY");
        assert_eq!(warning_level(&scenario_naming(Vec::new()), &bare), "tolerated deviation");
    }

    /// A failure that names no requirement of its own names its scenario's about its RPC, and
    /// never a MAY or a SHOULD.
    #[test]
    fn a_failure_falls_back_on_the_scenarios_musts_about_its_rpc() {
        let s = scenario_naming(vec![
            requirement("NodeStageVolume.path", "MUST"),
            requirement("NodePublishVolume.path", "MUST"),
            requirement("General.optional", "MAY"),
        ]);
        let mut f = Finding::new(Severity::Fail, "k", "m");
        f.rpc = Some("NodeStageVolume".into());
        let ids = |f: &Finding| f.blames(&s).into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(&f), ["NodeStageVolume.path"]);
        f.rpc = Some("DeleteVolume".into());
        assert_eq!(ids(&f), ["NodeStageVolume.path", "NodePublishVolume.path"]);
        let may = scenario_naming(vec![requirement("General.optional", "MAY")]);
        assert!(f.blames(&may).is_empty());
        // A warning may still name it.
        f.severity = Severity::Warn;
        assert_eq!(f.blames(&may).len(), 1);
    }

    #[test]
    fn block_keeps_lines_and_tabs_and_indents_continuations() {
        assert_eq!(block("a\r\nb\rc\t1\n", "  "), "a\n  b\n  c\t1");
        assert_eq!(block("x\u{0}y\u{FFFF}", ""), "x\\u{0}y\\u{ffff}");
    }
}
