//! GitHub Actions workflow commands for a run: one `::error` / `::warning` line per failed,
//! errored or warned finding, so that each shows up as an annotation on the workflow run,
//! titled with the scenario and the CSI requirement it breaks; one `::notice` per undecided
//! (inconclusive) finding, which breaks nothing.

use super::{
    console::rerun_command,
    model::{Expectation, RunReport, Severity},
    text,
};

/// Whether annotations are printed: only under GitHub Actions (`GITHUB_ACTIONS=true`, which
/// the runner sets) and not turned off with `--no-annotations`.
pub fn enabled(github_actions: Option<&str>, disabled: bool) -> bool {
    !disabled && github_actions == Some("true")
}

/// Escapes a workflow command's message (GitHub's rules: `%`, CR and LF).
fn data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a workflow command's property value (the message's rules plus `:` and `,`).
fn property(text: &str) -> String {
    data(text).replace(':', "%3A").replace(',', "%2C")
}

/// The annotation lines of a run, in report order. Expected failures (listed in
/// `--expect-failures`) get none; an unexpected pass is an error.
pub fn annotations(report: &RunReport) -> Vec<String> {
    let mut lines = Vec::new();
    for s in report.suites.iter().flat_map(|s| &s.scenarios) {
        // What a finding breaks, else what its scenario names: each annotation names the
        // requirements of its own finding, and a warning its own level.
        let title_of = |named: &[super::model::RequirementRef]| {
            let requirements: Vec<&str> = named.iter().map(|r| r.id.as_str()).collect();
            if requirements.is_empty() {
                text::one_line(&s.id)
            } else {
                format!("{} breaks {}", text::one_line(&s.id), requirements.join(" "))
            }
        };
        let tail_of = |named: &[super::model::RequirementRef]| {
            let mut t = String::new();
            let links: Vec<&str> = named.iter().map(|r| r.link.as_str()).filter(|l| !l.is_empty()).collect();
            if !links.is_empty() {
                t.push_str(&format!("\nspec: {}", links.join(" ")));
            }
            t.push_str(&format!("\nrerun: {}", rerun_command(report, &s.id, None)));
            t
        };
        match &s.expectation {
            Some(Expectation::ExpectedFailure { .. }) => continue,
            Some(Expectation::UnexpectedPass { reason }) => {
                let blamed = s.blamed();
                let named = if blamed.is_empty() { &s.requirements } else { &blamed };
                let message = format!(
                    "listed in --expect-failures ({}) but passed: remove it from the list{}",
                    text::one_line(reason),
                    tail_of(named)
                );
                lines.push(format!("::error title={}::{}", property(&title_of(named)), data(&message)));
                continue;
            }
            None => {}
        }
        for f in s.findings.iter().filter(|f| f.severity >= Severity::Warn) {
            let named = f.blames(s);
            let (command, level) = if f.severity == Severity::Warn {
                ("warning", format!(" [{}]", text::warning_level(s, f)))
            } else {
                ("error", String::new())
            };
            let mut message = format!("{}{level}: {}", f.kind, text::one_line(&f.message));
            if let Some(e) = &f.expected {
                message.push_str(&format!("\nexpected: {}", text::one_line(e)));
            }
            if let Some(g) = &f.got {
                message.push_str(&format!("\nanswered: {}", text::one_line(g)));
            }
            if let Some(p) = &f.plugin_message {
                message.push_str(&format!("\nplugin message: {}", text::one_line(p)));
            }
            message.push_str(&tail_of(&named));
            lines.push(format!("::{command} title={}::{}", property(&title_of(&named)), data(&message)));
        }
        for f in s.findings.iter().filter(|f| f.severity == Severity::Inconclusive) {
            let title = format!("{} inconclusive", text::one_line(&s.id));
            let message = format!("{}: {}{}", f.kind, text::one_line(&f.message), tail_of(&f.blames(s)));
            lines.push(format!("::notice title={}::{}", property(&title), data(&message)));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_under_github_actions_and_not_when_turned_off() {
        assert!(enabled(Some("true"), false));
        assert!(!enabled(Some("true"), true));
        assert!(!enabled(None, false));
        assert!(!enabled(Some("false"), false));
    }

    #[test]
    fn commands_escape_what_github_would_misread() {
        assert_eq!(data("50% a\nb\r"), "50%25 a%0Ab%0D");
        assert_eq!(property("a: b, c"), "a%3A b%2C c");
    }
}
