//! The console report: one line per scenario as it finishes, and the summary at the end of a
//! run. Colour (ANSI) only when asked for; without it the text holds no control character but
//! the newlines between summary lines. Everything printed comes from the model, whose text is
//! already redacted, and passes through the same hygiene as every other writer.

use std::fmt::Write as _;

use super::{
    model::{Expectation, RunReport, ScenarioResult, Severity},
    text,
};

/// An ANSI SGR style.
#[derive(Clone, Copy)]
enum Style {
    Green,
    Red,
    Yellow,
    Cyan,
    Magenta,
    BoldRed,
    Bold,
    Dim,
}

impl Style {
    fn code(self) -> &'static str {
        match self {
            Style::Green => "32",
            Style::Red => "31",
            Style::Yellow => "33",
            Style::Cyan => "36",
            Style::Magenta => "35",
            Style::BoldRed => "1;31",
            Style::Bold => "1",
            Style::Dim => "2",
        }
    }
}

/// `text` in `style` when `color` is on, as it is otherwise.
fn paint(text: &str, style: Style, color: bool) -> String {
    if color { format!("\u{1b}[{}m{text}\u{1b}[0m", style.code()) } else { text.to_owned() }
}

/// The colour of a scenario's outcome word. An expected failure is shown in yellow (it does
/// not fail the run) and an unexpected pass in red (it does).
fn outcome_style(scenario: &ScenarioResult) -> Style {
    match (&scenario.expectation, scenario.outcome) {
        (Some(Expectation::ExpectedFailure { .. }), _) => Style::Yellow,
        (Some(Expectation::UnexpectedPass { .. }), _) => Style::Red,
        (None, Severity::Pass) => Style::Green,
        (None, Severity::Skip) => Style::Cyan,
        (None, Severity::Inconclusive) => Style::Magenta,
        (None, Severity::Warn) => Style::Yellow,
        (None, Severity::Fail) => Style::Red,
        (None, Severity::Error) => Style::BoldRed,
    }
}

/// The outcome word, upper case and padded to a common width (`ERROR` is the longest of the
/// usual ones; `INCONCLUSIVE`, rare, is left longer rather than abbreviated).
fn outcome_word(scenario: &ScenarioResult, color: bool) -> String {
    let word = format!("{:<5}", scenario.outcome.as_str().to_uppercase());
    paint(&word, outcome_style(scenario), color)
}

/// One line for a finished scenario: outcome word, full id, duration, and why (the skip reason,
/// or the first finding as bad as the outcome), with a tag for `--expect-failures` entries.
///
/// ```text
/// FAIL  controller.create-volume.no-name (0.045s): expected INVALID_ARGUMENT, got OK
/// ```
pub fn scenario_line(scenario: &ScenarioResult, color: bool) -> String {
    let mut line = format!(
        "{} {} {}",
        outcome_word(scenario, color),
        text::one_line(&scenario.id),
        paint(&format!("({}s)", text::seconds(scenario.duration)), Style::Dim, color),
    );
    if let Some(reason) = text::outcome_reason(scenario) {
        line.push_str(": ");
        line.push_str(&reason);
    }
    match &scenario.expectation {
        Some(Expectation::ExpectedFailure { .. }) => line.push_str(" [expected failure]"),
        Some(Expectation::UnexpectedPass { .. }) => line.push_str(" [unexpected pass]"),
        None => {}
    }
    line
}

/// Quotes `s` for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `s` as one shell word: as it is when it holds nothing a shell would read differently,
/// quoted otherwise.
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c));
    if plain { s.to_owned() } else { shell_quote(s) }
}

/// The `--focus` regex that matches `id` and nothing else. `-` stays as it is (it is literal
/// outside a class) so that the usual ids read as themselves: `^node\.stage-volume$`.
fn focus_pattern(id: &str) -> String {
    let escaped: String = id
        .chars()
        .map(|c| if c == '-' { c.to_string() } else { regex::escape(c.encode_utf8(&mut [0; 4])) })
        .collect();
    format!("^{escaped}$")
}

/// The command that reruns one scenario alone. `base` is the run's own command line without
/// its filters and seed (see [`summary_with_command`]); without one, `...` stands for it.
pub(crate) fn rerun_command(report: &RunReport, id: &str, base: Option<&str>) -> String {
    let focus = shell_quote(&focus_pattern(&text::one_line(id)));
    match base {
        Some(base) => format!("{} --focus {focus} --seed {}", text::one_line(base), report.seed),
        None => {
            let strict = if report.strict { " --strict" } else { "" };
            format!("csi-conform run ... --focus {focus} --seed {}{strict}", report.seed)
        }
    }
}

/// The sections of the summary, in order. Each scenario lands in at most one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Failures,
    Errors,
    Warnings,
    Inconclusive,
    ExpectedFailures,
    UnexpectedPasses,
}

impl Section {
    const ALL: [Section; 6] = [
        Section::Failures,
        Section::Errors,
        Section::Warnings,
        Section::Inconclusive,
        Section::ExpectedFailures,
        Section::UnexpectedPasses,
    ];

    fn of(scenario: &ScenarioResult) -> Option<Section> {
        match (&scenario.expectation, scenario.outcome) {
            (Some(Expectation::ExpectedFailure { .. }), _) => Some(Section::ExpectedFailures),
            (Some(Expectation::UnexpectedPass { .. }), _) => Some(Section::UnexpectedPasses),
            (None, Severity::Fail) => Some(Section::Failures),
            (None, Severity::Error) => Some(Section::Errors),
            (None, Severity::Warn) => Some(Section::Warnings),
            (None, Severity::Inconclusive) => Some(Section::Inconclusive),
            (None, Severity::Pass | Severity::Skip) => None,
        }
    }

    fn heading(self, strict: bool) -> &'static str {
        match self {
            Section::Failures => "Failures:",
            Section::Errors => "Errors (the harness could not run the check):",
            Section::Warnings if strict => "Warnings (failures under --strict):",
            Section::Warnings => "Warnings:",
            Section::Inconclusive => {
                "Inconclusive (the harness could not decide; neither passed nor failed, not even under --strict):"
            }
            Section::ExpectedFailures => {
                "Expected failures (listed in --expect-failures; they do not fail the run):"
            }
            Section::UnexpectedPasses => {
                "Unexpected passes (listed in --expect-failures but passed; remove them from the list):"
            }
        }
    }
}

/// The reason a listed scenario was listed, if it was.
fn listed_reason(scenario: &ScenarioResult) -> Option<&str> {
    match &scenario.expectation {
        Some(Expectation::ExpectedFailure { reason } | Expectation::UnexpectedPass { reason }) => {
            Some(reason)
        }
        None => None,
    }
}

/// One summary entry: the outcome word, id and one-line reason, then the rerun command.
fn entry(out: &mut String, report: &RunReport, scenario: &ScenarioResult, color: bool, base: Option<&str>) {
    let mut line = format!("  {} {}", outcome_word(scenario, color), text::one_line(&scenario.id));
    if let Some(reason) = text::outcome_reason(scenario) {
        line.push_str(": ");
        line.push_str(&reason);
    }
    if let Some(listed) = listed_reason(scenario) {
        let _ = write!(line, " (listed: {})", text::one_line(listed));
    }
    let _ = writeln!(out, "{line}");
    let _ = writeln!(out, "        rerun: {}", rerun_command(report, &scenario.id, base));
}

/// One line per warning of a warned scenario: the word WARN, the scenario, the warning's
/// level (never a bare MUST: a warning is what the spec tolerates) and its message.
fn warning_lines(out: &mut String, scenario: &ScenarioResult, color: bool) {
    for f in scenario.findings.iter().filter(|f| f.severity == Severity::Warn) {
        let level = text::warning_level(scenario, f);
        let _ = writeln!(
            out,
            "  {} {} [{level}]: {}",
            outcome_word(scenario, color),
            text::one_line(&scenario.id),
            text::finding_line(f)
        );
    }
}

/// The notes of the run, one line each: behaviour the spec permits that a reader may want to
/// know of (see [`text::is_note`]). They change no outcome and break no rule.
fn notes(out: &mut String, scenarios: &[&ScenarioResult], color: bool) {
    let notes: Vec<(&ScenarioResult, &super::model::Finding)> =
        scenarios.iter().flat_map(|s| s.findings.iter().filter(|f| text::is_note(f)).map(move |f| (*s, f))).collect();
    if notes.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{}", paint("Notes (what the spec permits; no verdict):", Style::Bold, color));
    for (s, f) in notes {
        let _ = writeln!(out, "  NOTE  {}: {}", text::one_line(&s.id), text::finding_line(f));
    }
}

/// The failures shared by several scenarios, largest first, each with its scenarios beneath.
fn root_causes(out: &mut String, report: &RunReport, color: bool) {
    let causes = super::causes::causes(report);
    if causes.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{}", paint("Root causes (one failing answer behind several scenarios):", Style::Bold, color));
    for cause in causes {
        let _ = writeln!(out, "  {}", paint(&cause.heading(), Style::Bold, color));
        if let Some(message) = &cause.plugin_message {
            let _ = writeln!(out, "    plugin message: {message}");
        }
        for (s, _) in &cause.members {
            let _ = writeln!(out, "    {} {}", outcome_word(s, color), text::one_line(&s.id));
        }
    }
}

/// The failed and errored scenarios again, grouped by the CSI requirement their findings
/// break (see [`super::model::Finding::blames`]; a scenario breaking several appears under
/// each): which rule of the spec broke, and where it is written. Warnings are not listed
/// here: a warning breaks no rule at its level.
fn by_requirement(out: &mut String, report: &RunReport, scenarios: &[&ScenarioResult], color: bool) {
    let mut groups: Vec<(super::model::RequirementRef, Vec<&ScenarioResult>)> = Vec::new();
    for s in scenarios.iter().filter(|s| s.expectation.is_none() && s.outcome >= Severity::Fail) {
        // The requirements its findings break, not every one the scenario names.
        for r in s.blamed() {
            match groups.iter_mut().find(|(g, _)| g.id == r.id) {
                Some((_, members)) => members.push(s),
                None => groups.push((r, vec![s])),
            }
        }
    }
    if groups.is_empty() {
        return;
    }
    // Reports of runs before v1.13 support were all judged by v1.12.
    let version = report.spec.as_ref().map_or("1.12", |s| s.version.as_str());
    let heading = format!("By requirement (CSI v{}):", text::one_line(version));
    let _ = writeln!(out, "\n{}", paint(&heading, Style::Bold, color));
    for (r, members) in groups {
        let _ = writeln!(out, "  {} [{}] {}", text::one_line(&r.id), text::one_line(&r.level), text::one_line(&r.link));
        for s in members {
            let _ = writeln!(out, "    {} {}", outcome_word(s, color), text::one_line(&s.id));
        }
    }
}

/// `n` and the noun, singular or plural as `n` wants.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A run time for people: seconds, and minutes too once it is a minute or more.
fn total_time(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        format!("{}s", text::seconds(d))
    } else {
        format!("{}s ({}m{:02}s)", text::seconds(d), secs / 60, secs % 60)
    }
}

/// The end-of-run summary: what was tested, counts and total time, the root causes shared by
/// several failures, every failure and error with its one-line reason and the command to
/// rerun it alone, one line per warning with its level, expected failures and unexpected
/// passes on their own, the failures by requirement, an interruption, the seed, and the
/// verdict.
pub fn summary(report: &RunReport, color: bool) -> String {
    render_summary(report, color, None)
}

/// [`summary`] with rerun commands a reader can copy and paste: `command` is the run's own
/// command line (shell-quoted) without `--focus`, `--skip` and `--seed`, which each rerun
/// command adds for its scenario.
pub fn summary_with_command(report: &RunReport, color: bool, command: &str) -> String {
    render_summary(report, color, Some(command))
}

fn render_summary(report: &RunReport, color: bool, base: Option<&str>) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "csi-conform {}: plugin {} {}",
        text::one_line(&report.tool_version),
        text::one_line(&report.plugin_name),
        text::one_line(&report.plugin_version),
    );
    if !report.endpoints.is_empty() {
        let _ = write!(out, " at {}", text::one_line(&report.endpoints.join(", ")));
    }
    out.push('\n');
    if let Some(spec) = &report.spec {
        let _ = writeln!(out, "Judged by {}", text::one_line(&spec.to_string()));
        if let Some(line) = spec.evidence_summary() {
            let _ = writeln!(out, "Version evidence: {}", text::one_line(&line));
        }
    }
    let c = report.counts();
    let _ = writeln!(
        out,
        "{} in {}: {} passed, {} failed, {} warned, {} skipped, {} errored",
        count(c.total(), "scenario", "scenarios"),
        total_time(report.duration),
        c.pass,
        c.fail,
        c.warn,
        c.skip,
        c.error,
    );
    if c.inconclusive > 0 {
        // On the counts line itself, so a reader of the line alone sees it (absent at zero,
        // as the line read before the outcome existed).
        out.pop();
        let _ = writeln!(out, ", {} inconclusive", c.inconclusive);
    }
    let scenarios: Vec<&ScenarioResult> = report.suites.iter().flat_map(|s| &s.scenarios).collect();
    let sections = Section::ALL.map(|section| {
        (section, scenarios.iter().copied().filter(|s| Section::of(s) == Some(section)).collect::<Vec<_>>())
    });
    let listed = |wanted| sections.iter().find(|(s, _)| *s == wanted).map_or(0, |(_, m)| m.len());
    let (expected, unexpected) = (listed(Section::ExpectedFailures), listed(Section::UnexpectedPasses));
    if expected + unexpected > 0 {
        let _ = writeln!(
            out,
            "--expect-failures: {}, {}",
            count(expected, "expected failure", "expected failures"),
            count(unexpected, "unexpected pass", "unexpected passes"),
        );
    }
    root_causes(&mut out, report, color);
    for (section, members) in sections.iter().filter(|(_, m)| !m.is_empty()) {
        let _ = writeln!(out, "\n{}", paint(section.heading(report.strict), Style::Bold, color));
        for scenario in members {
            if *section == Section::Warnings {
                warning_lines(&mut out, scenario, color);
            } else {
                entry(&mut out, report, scenario, color, base);
            }
        }
    }
    by_requirement(&mut out, report, &scenarios, color);
    notes(&mut out, &scenarios, color);
    super::matrix::console(&mut out, report);
    out.push('\n');
    if let Some(why) = &report.interrupted {
        let _ = writeln!(out, "{} {}", paint("Interrupted:", Style::BoldRed, color), text::one_line(why));
    }
    for site in &report.mounts {
        let _ = writeln!(out, "Mounts: {}", text::one_line(&site.to_string()));
    }
    if let Some(sizes) = &report.sizes {
        let _ = writeln!(out, "Volume sizes: {}", text::one_line(&sizes.to_string()));
    }
    if let Some(settled) = &report.settled {
        let style = if settled.left.is_empty() { Style::Bold } else { Style::BoldRed };
        let _ = writeln!(out, "{} {}", paint("In doubt at the end:", style, color), text::one_line(&settled.to_string()));
        for line in &settled.left {
            let _ = writeln!(out, "  left: {}", text::one_line(line));
        }
    }
    let _ = writeln!(
        out,
        "Seed: {} (replay with --seed {}: the same generated cases, under fresh names)",
        report.seed, report.seed
    );
    if base.is_none() && sections.iter().any(|(s, m)| *s != Section::Warnings && !m.is_empty()) {
        let _ = writeln!(out, "In the rerun commands, ... stands for this run's endpoint and suite options.");
    }
    let verdict = if report.failed() {
        paint("FAILED", Style::BoldRed, color)
    } else {
        paint("PASSED", Style::Green, color)
    };
    let _ = writeln!(out, "Result: {verdict}");
    out
}

/// The line that ends a run's output: where its reports are, as `(what, path)` pairs.
///
/// ```text
/// Reports: reports/junit.xml (JUnit), reports/report.json (JSON), reports/report.html (HTML)
/// ```
pub fn report_files_line(files: &[(&str, &std::path::Path)]) -> String {
    let named: Vec<String> =
        files.iter().map(|(what, path)| format!("{} ({what})", text::one_line(&path.display().to_string()))).collect();
    format!("Reports: {}\n", named.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rerun_focus_is_an_exact_anchored_regex_quoted_for_the_shell() {
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_word("unix:///tmp/csi.sock"), "unix:///tmp/csi.sock");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word(""), "''");
        let focus = focus_pattern("controller.create-volume");
        assert_eq!(focus, r"^controller\.create-volume$");
        let re = regex::Regex::new(&focus).unwrap();
        assert!(re.is_match("controller.create-volume"));
        assert!(!re.is_match("controllerXcreate-volume"));
        assert!(!re.is_match("controller.create-volume.twice"));
        let odd = "a+b[c]-(d)";
        assert!(regex::Regex::new(&focus_pattern(odd)).unwrap().is_match(odd));
    }

    #[test]
    fn long_runs_show_minutes_too() {
        assert_eq!(total_time(std::time::Duration::from_millis(1_500)), "1.500s");
        assert_eq!(total_time(std::time::Duration::from_millis(754_123)), "754.123s (12m34s)");
    }
}
