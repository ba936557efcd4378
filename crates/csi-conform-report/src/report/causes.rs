//! Root causes: failed and errored scenarios whose headline finding is the same failing call,
//! answered with the same code and a message of the same pattern (ids, numbers, paths and
//! quoted values aside), grouped as one cause, so that "NodeStageVolume answered UNKNOWN: 30
//! scenarios" leads a report instead of thirty look-alike entries. Shared by the console
//! summary, the HTML page and the job summary.

use std::sync::LazyLock;

use regex::Regex;

use super::{
    model::{Finding, RunReport, ScenarioResult, Severity},
    text,
};

/// One cause shared by several failed or errored scenarios.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause<'a> {
    /// What the scenarios have in common, in one line: `NodeStageVolume answered UNKNOWN`,
    /// or the headline message where no call is involved.
    pub title: String,
    /// The plugin's message of the first member (the others match its pattern), if any.
    pub plugin_message: Option<String>,
    /// The scenarios, in report order, with their headline findings.
    pub members: Vec<(&'a ScenarioResult, &'a Finding)>,
}

/// The fewest scenarios that make a cause worth a heading of its own.
pub const MIN_MEMBERS: usize = 2;

/// Digits, hex ids, quoted values and absolute paths: what varies between instances of one
/// message.
static VARYING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"'[^']*'|"[^"]*"|`[^`]*`|(?:/[^\s/,;:)]+)+/?|\b[0-9a-fA-F-]*[0-9][0-9a-fA-F-]*\b"#)
        .expect("a valid pattern")
});

/// The pattern of a message: its varying parts replaced by `_`.
pub fn pattern(message: &str) -> String {
    VARYING.replace_all(&text::one_line(message), "_").into_owned()
}

/// The grouping key of a headline finding: the call, the code it answered (or the finding's
/// kind when it names none) and the pattern of the plugin's message (or of our own message
/// when the plugin gave none).
fn key(f: &Finding) -> (Option<&str>, String, String) {
    let answered = f.got.as_deref().filter(|_| f.rpc.is_some()).unwrap_or(&f.kind).to_owned();
    let message = f.plugin_message.as_deref().filter(|m| !m.trim().is_empty()).unwrap_or(&f.message);
    (f.rpc.as_deref(), answered, pattern(message))
}

/// The causes shared by at least [`MIN_MEMBERS`] failed or errored scenarios (expected
/// failures left out), largest first, then in report order.
pub fn causes(report: &RunReport) -> Vec<Cause<'_>> {
    // Keyed by (RPC, code, message).
    type Key<'a> = (Option<&'a str>, String, String);
    let mut groups: Vec<(Key<'_>, Cause<'_>)> = Vec::new();
    for s in report.suites.iter().flat_map(|s| &s.scenarios) {
        if s.expectation.is_some() || s.outcome < Severity::Fail {
            continue;
        }
        let Some(f) = text::headline(s) else { continue };
        let k = key(f);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, cause)) => cause.members.push((s, f)),
            None => {
                let title = match (&f.rpc, &f.got) {
                    (Some(rpc), Some(got)) => format!("{} answered {}", text::one_line(rpc), text::one_line(got)),
                    _ => text::finding_line(f),
                };
                let plugin_message = f.plugin_message.as_deref().map(text::one_line).filter(|m| !m.is_empty());
                groups.push((k, Cause { title, plugin_message, members: vec![(s, f)] }));
            }
        }
    }
    let mut causes: Vec<Cause<'_>> =
        groups.into_iter().map(|(_, c)| c).filter(|c| c.members.len() >= MIN_MEMBERS).collect();
    causes.sort_by_key(|c| std::cmp::Reverse(c.members.len()));
    causes
}

impl Cause<'_> {
    /// `NodeStageVolume answered UNKNOWN: 30 scenarios`.
    pub fn heading(&self) -> String {
        format!("{}: {} scenarios", self.title, self.members.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_ignore_ids_numbers_paths_and_quoted_values() {
        assert_eq!(
            pattern("cannot attach vol-0a1b2c3d4e to /var/lib/kubelet/x/staging: KeyError: 'target_portal'"),
            pattern("cannot attach vol-99ffee0011 to /tmp/other/dir: KeyError: 'target_portal2'"),
        );
        assert_ne!(pattern("volume busy"), pattern("volume not found"));
        assert_eq!(pattern("took 12 ms"), "took _ ms");
    }
}
