//! The job summary: a run as GitHub-flavoured Markdown, for `$GITHUB_STEP_SUMMARY` (the page
//! a GitHub Actions run opens on) or any file (`run --job-summary FILE`). The verdict and the
//! counts first, then the root causes shared by several failures, every failure and error
//! with the requirement it breaks and the command that reruns it alone, one line per warning
//! with its level, and where the reports are.
//!
//! Text from the model goes through the shared hygiene and is escaped for Markdown and HTML
//! both (a plugin's message cannot add a link, a heading or a table column); commands are in
//! `<code>` elements. GitHub takes at most 1 MiB per step, so long lists are cut with a line
//! that says how many were left out.

use std::fmt::Write as _;

use super::{
    causes,
    console::rerun_command,
    model::{Expectation, RunReport, ScenarioResult, Severity},
    text,
};

/// The most failures (and, separately, warnings) listed one by one.
pub const MAX_LISTED: usize = 200;

/// Text for Markdown: HTML-escaped (so no tag or entity passes), on one line, with the
/// characters Markdown reads as markup backslash-escaped.
fn md(text: &str) -> String {
    let mut out = String::new();
    for c in text::one_line(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c if "\\`*_[]{}()#+-!|~".contains(c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// A command or id in a `<code>` element (HTML-escaped; Markdown does not look inside).
fn code(text: &str) -> String {
    format!("<code>{}</code>", text::escape_markup(&text::one_line(text)).replace('|', "&#124;"))
}

/// The requirements a scenario checks, as links with their levels.
fn requirements(s: &ScenarioResult) -> String {
    s.requirements
        .iter()
        .map(|r| format!("[{}]({}) {}", md(&r.id), r.link.replace(' ', "%20").replace(')', "%29"), md(&r.level)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The job summary of `report`. `base` is the run's own command line for the rerun commands
/// (see [`super::summary_with_command`]); `files` are the report files, `(what, path)`.
pub fn job_summary(report: &RunReport, base: Option<&str>, files: &[(&str, &std::path::Path)]) -> String {
    let mut out = String::new();
    let c = report.counts();
    let verdict = if report.failed() { "❌ FAILED" } else { "✅ PASSED" };
    let _ = writeln!(out, "## csi-conform: {verdict}\n");
    let _ = write!(
        out,
        "Plugin **{}** {} at {} · csi-conform {} · {} scenarios in {}s · seed {}",
        md(&report.plugin_name),
        md(&report.plugin_version),
        report.endpoints.iter().map(|e| code(e)).collect::<Vec<_>>().join(", "),
        md(&report.tool_version),
        c.total(),
        text::seconds(report.duration),
        report.seed,
    );
    if report.strict {
        out.push_str(" · strict (warnings fail)");
    }
    out.push_str("\n\n");
    if let Some(why) = &report.interrupted {
        let _ = writeln!(out, "**Interrupted:** {}\n", md(why));
    }
    if c.inconclusive == 0 {
        let _ = writeln!(
            out,
            "| passed | failed | warned | skipped | errored |\n|---:|---:|---:|---:|---:|\n| {} | {} | {} | {} | {} |\n",
            c.pass, c.fail, c.warn, c.skip, c.error
        );
    } else {
        let _ = writeln!(
            out,
            "| passed | failed | warned | skipped | errored | inconclusive |\n|---:|---:|---:|---:|---:|---:|\n| {} | {} | {} | {} | {} | {} |\n",
            c.pass, c.fail, c.warn, c.skip, c.error, c.inconclusive
        );
    }

    let causes = causes::causes(report);
    if !causes.is_empty() {
        out.push_str("### Root causes\n\n");
        for cause in &causes {
            let _ = write!(out, "- **{}**", md(&cause.heading()));
            if let Some(m) = &cause.plugin_message {
                let _ = write!(out, " (plugin message: {})", md(m));
            }
            let ids: Vec<String> = cause.members.iter().map(|(s, _)| code(&s.id)).collect();
            let _ = writeln!(out, "\n  <details><summary>the scenarios</summary>{}</details>", ids.join(" "));
        }
        out.push('\n');
    }

    let scenarios: Vec<&ScenarioResult> = report.suites.iter().flat_map(|s| &s.scenarios).collect();
    let failing: Vec<&&ScenarioResult> = scenarios
        .iter()
        .filter(|s| match &s.expectation {
            Some(Expectation::UnexpectedPass { .. }) => true,
            Some(Expectation::ExpectedFailure { .. }) => false,
            None => s.outcome >= Severity::Fail || (report.strict && s.outcome == Severity::Warn),
        })
        .collect();
    if !failing.is_empty() {
        let _ = writeln!(out, "### Failures ({})\n", failing.len());
        for s in failing.iter().take(MAX_LISTED) {
            let reason = match &s.expectation {
                Some(Expectation::UnexpectedPass { reason }) => {
                    format!("listed in --expect-failures ({}) but passed: remove it from the list", text::one_line(reason))
                }
                _ => text::outcome_reason(s).unwrap_or_default(),
            };
            let _ = writeln!(out, "- **{}** {}: {}", s.outcome.as_str().to_uppercase(), code(&s.id), md(&reason));
            if !s.requirements.is_empty() {
                let _ = writeln!(out, "  - requirement: {}", requirements(s));
            }
            let _ = writeln!(out, "  - rerun: {}", code(&rerun_command(report, &s.id, base)));
        }
        if failing.len() > MAX_LISTED {
            let _ = writeln!(out, "- … and {} more: see the reports", failing.len() - MAX_LISTED);
        }
        out.push('\n');
    }

    let warnings: Vec<(&ScenarioResult, &super::model::Finding)> = scenarios
        .iter()
        .filter(|s| s.expectation.is_none() && s.outcome == Severity::Warn)
        .flat_map(|s| s.findings.iter().filter(|f| f.severity == Severity::Warn).map(move |f| (*s, f)))
        .collect();
    if !warnings.is_empty() {
        let _ = writeln!(out, "### Warnings ({})\n", warnings.len());
        for (s, f) in warnings.iter().take(MAX_LISTED) {
            let _ = writeln!(out, "- {} \\[{}\\]: {}", code(&s.id), md(text::warning_level(s, f)), md(&text::finding_line(f)));
        }
        if warnings.len() > MAX_LISTED {
            let _ = writeln!(out, "- … and {} more: see the reports", warnings.len() - MAX_LISTED);
        }
        out.push('\n');
    }

    let undecided: Vec<&&ScenarioResult> =
        scenarios.iter().filter(|s| s.expectation.is_none() && s.outcome == Severity::Inconclusive).collect();
    if !undecided.is_empty() {
        let _ = writeln!(out, "### Inconclusive ({}: the harness could not decide; not failing the run)\n", undecided.len());
        for s in undecided.iter().take(MAX_LISTED) {
            let _ = writeln!(out, "- {}: {}", code(&s.id), md(&text::outcome_reason(s).unwrap_or_default()));
        }
        if undecided.len() > MAX_LISTED {
            let _ = writeln!(out, "- … and {} more: see the reports", undecided.len() - MAX_LISTED);
        }
        out.push('\n');
    }

    let expected: Vec<&&ScenarioResult> =
        scenarios.iter().filter(|s| matches!(s.expectation, Some(Expectation::ExpectedFailure { .. }))).collect();
    if !expected.is_empty() {
        let ids: Vec<String> = expected.iter().map(|s| code(&s.id)).collect();
        let _ = writeln!(out, "Expected failures (--expect-failures, not failing the run): {}\n", ids.join(" "));
    }
    if !files.is_empty() {
        let named: Vec<String> = files.iter().map(|(what, p)| format!("{what} {}", code(&p.display().to_string()))).collect();
        let _ = writeln!(out, "Reports: {}", named.join(", "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_text_cannot_become_markup() {
        assert_eq!(md("a *b* [x](http://e) <img> |c|"), "a \\*b\\* \\[x\\]\\(http://e\\) &lt;img&gt; \\|c\\|");
        assert_eq!(code("a|b <c>"), "<code>a&#124;b &lt;c&gt;</code>");
    }
}
