//! `--expect-failures FILE`: a YAML map of scenario id to the reason it is known to fail, and
//! how a run's results are marked with it.
//!
//! ```yaml
//! controller.create-volume.max-name-length: names over 63 bytes are refused (issue 41)
//! node.publish.readonly-twice: not idempotent yet
//! ```
//!
//! A listed scenario that fails is reported as an expected failure and does not fail the run;
//! one that passes is an unexpected pass, which does, so the list cannot silently go stale.

use std::{
    fmt,
    path::{Path, PathBuf},
};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::model::{Expectation, RunReport, ScenarioResult, Severity};

/// Why an expect-failures file could not be used. Displays as `file:line:column: what`.
#[derive(Debug, thiserror::Error)]
pub enum ExpectError {
    /// The file could not be read.
    #[error("{}: cannot read the expect-failures file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The file is not a map of scenario id to a non-empty reason.
    #[error("{}{}: {message}", path.display(), location.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Line and column (1-based), when known.
        location: Option<(usize, usize)>,
        /// What is wrong, e.g. `duplicate id x.y (first listed on line 2)`.
        message: String,
    },
}

/// The scenarios a run expects to fail, each with its reason, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpectedFailures {
    entries: Vec<(String, String)>,
}

/// The entries read so far, with the line each id was on when it can be told (for duplicate
/// messages).
struct Entries(Vec<(String, String, Option<usize>)>);

/// Reads a map key: a scenario id that is not a duplicate. Rejecting inside the visitor lets
/// serde_yaml attach the key's own position to the error.
struct IdSeed<'a>(&'a Entries);

impl<'de> DeserializeSeed<'de> for IdSeed<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for IdSeed<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scenario id")
    }

    fn visit_str<E: de::Error>(self, id: &str) -> Result<String, E> {
        if id.trim().is_empty() {
            return Err(E::custom("empty scenario id"));
        }
        match self.0.0.iter().find(|(seen, _, _)| seen == id) {
            Some((_, _, Some(line))) => {
                Err(E::custom(format!("duplicate id {id} (first listed on line {line})")))
            }
            Some((_, _, None)) => Err(E::custom(format!("duplicate id {id}"))),
            None => Ok(id.to_owned()),
        }
    }
}

/// Reads a map value: a non-empty string reason.
struct ReasonVisitor;

impl<'de> Visitor<'de> for ReasonVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-empty reason (a string)")
    }

    fn visit_str<E: de::Error>(self, reason: &str) -> Result<String, E> {
        if reason.trim().is_empty() { Err(E::custom("empty reason")) } else { Ok(reason.to_owned()) }
    }

    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        Err(E::custom("empty reason"))
    }

    fn visit_none<E: de::Error>(self) -> Result<String, E> {
        self.visit_unit()
    }
}

/// A reason, read through [`ReasonVisitor`] inside the deserializer (for its position).
struct ReasonSeed;

impl<'de> DeserializeSeed<'de> for ReasonSeed {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(ReasonVisitor)
    }
}

/// The whole document: a map (or nothing at all, for a list with no entries left).
struct DocumentVisitor<'a> {
    text: &'a str,
}

impl<'de> Visitor<'de> for DocumentVisitor<'_> {
    type Value = Entries;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of scenario id to the reason it is expected to fail")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Entries, E> {
        Ok(Entries(Vec::new()))
    }

    fn visit_none<E: de::Error>(self) -> Result<Entries, E> {
        self.visit_unit()
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
        let mut entries = Entries(Vec::new());
        while let Some(id) = map.next_key_seed(IdSeed(&entries))? {
            let reason = map.next_value_seed(ReasonSeed)?;
            let line = line_of_key(self.text, &id);
            entries.0.push((id, reason, line));
        }
        Ok(entries)
    }
}

/// The 1-based line where `id` first appears as a block-style key (plain or simply quoted),
/// for the duplicate message; `None` when it cannot be told (flow style, escapes).
fn line_of_key(text: &str, id: &str) -> Option<usize> {
    let spellings = [id.to_owned(), format!("'{id}'"), format!("\"{id}\"")];
    let is_key = |line: &str| {
        spellings.iter().any(|k| {
            line.trim_start().strip_prefix(k.as_str()).is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
    };
    text.lines().position(is_key).map(|i| i + 1)
}

impl ExpectedFailures {
    /// Reads and checks an expect-failures file.
    pub fn load(path: &Path) -> Result<Self, ExpectError> {
        let text = crate::yaml::read_source(path).map_err(|e| match e {
            crate::yaml::SourceError::Io(source) => ExpectError::Read { path: path.to_owned(), source },
            other => ExpectError::Invalid {
                path: path.to_owned(),
                location: other.pos().map(|p| (p.line, p.col)),
                message: other.to_string(),
            },
        })?;
        Self::parse_str(&text, path)
    }

    /// Parses the text of an expect-failures file; `path` names it in errors.
    pub fn parse_str(text: &str, path: &Path) -> Result<Self, ExpectError> {
        Self::parse(text).map_err(|(location, message)| ExpectError::Invalid {
            path: path.to_owned(),
            location,
            message,
        })
    }

    /// Parses the text of an expect-failures file; errors carry (line, column) when known.
    fn parse(text: &str) -> Result<Self, (Option<(usize, usize)>, String)> {
        // Nesting and size bounded first, in one linear pass (serde_yaml alone takes
        // quadratic time to refuse deep nesting).
        crate::yaml::check_limits(text).map_err(|e| (Some((e.pos.line, e.pos.col)), e.message))?;
        let deserializer = serde_yaml::Deserializer::from_str(text);
        let entries = deserializer.deserialize_any(DocumentVisitor { text }).map_err(|e| {
            let location = e.location().map(|l| (l.line(), l.column()));
            let mut message = e.to_string();
            if let Some((line, column)) = location {
                // serde_yaml appends the position; it is shown in front instead.
                let suffix = format!(" at line {line} column {column}");
                if let Some(stripped) = message.strip_suffix(&suffix) {
                    message = stripped.to_owned();
                }
            }
            (location, message)
        })?;
        Ok(ExpectedFailures { entries: entries.0.into_iter().map(|(id, reason, _)| (id, reason)).collect() })
    }

    /// The listed scenario ids and their reasons, in file order.
    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }

    /// Marks the run's results: a listed scenario that failed or errored (or, under `strict`,
    /// warned) becomes an [`Expectation::ExpectedFailure`]; one that passed or only warned an
    /// [`Expectation::UnexpectedPass`]; a skipped or inconclusive one is left alone, as is every
    /// scenario not listed. Returns the listed ids the run did not have, in file order.
    pub fn apply(&self, report: &mut RunReport) -> Vec<String> {
        let strict = report.strict;
        let mut found = vec![false; self.entries.len()];
        for scenario in report.suites.iter_mut().flat_map(|s| &mut s.scenarios) {
            if let Some(i) = self.mark(scenario, strict) {
                found[i] = true;
            }
        }
        self.entries.iter().zip(found).filter(|(_, f)| !f).map(|((id, _), _)| id.clone()).collect()
    }

    /// Marks one result as [`apply`](Self::apply) does (the live console uses it on each
    /// result as it comes). Returns the entry's index when the scenario is listed.
    pub fn mark(&self, scenario: &mut ScenarioResult, strict: bool) -> Option<usize> {
        let i = self.entries.iter().position(|(id, _)| *id == scenario.id)?;
        let reason = self.entries[i].1.clone();
        scenario.expectation = match scenario.outcome {
            // Undecided is neither the listed failure nor a pass: left alone, as a skip is.
            Severity::Skip | Severity::Inconclusive => return Some(i),
            Severity::Fail | Severity::Error => Some(Expectation::ExpectedFailure { reason }),
            Severity::Warn if strict => Some(Expectation::ExpectedFailure { reason }),
            Severity::Pass | Severity::Warn => Some(Expectation::UnexpectedPass { reason }),
        };
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(text: &str) -> (Option<(usize, usize)>, String) {
        ExpectedFailures::parse(text).unwrap_err()
    }

    #[test]
    fn reads_a_map_in_file_order_and_an_empty_file_as_no_entries() {
        let list = ExpectedFailures::parse("# known\nb.x: one\na.y: 'two: quoted'\n").unwrap();
        assert_eq!(list.entries(), [("b.x".into(), "one".into()), ("a.y".into(), "two: quoted".into())]);
        assert!(ExpectedFailures::parse("").unwrap().entries().is_empty());
        assert!(ExpectedFailures::parse("# all fixed\n").unwrap().entries().is_empty());
    }

    #[test]
    fn errors_point_at_the_offending_line() {
        assert_eq!(error_of("a.b: x\nc.d: ''\n"), (Some((2, 6)), "c.d: empty reason".into()));
        assert_eq!(error_of("a.b: x\nc.d:\n").0.map(|l| l.0), Some(2));
        assert_eq!(error_of("a.b: x\nc.d: # see issue 4\n").1, "c.d: empty reason");
        assert_eq!(error_of("a.b: x\n'': y\n"), (Some((2, 1)), "empty scenario id".into()));
        assert_eq!(
            error_of("a.b: x\n\nc.d: y\na.b: z\n"),
            (Some((4, 1)), "duplicate id a.b (first listed on line 1)".into())
        );
        let (location, message) = error_of("- a.b\n- c.d\n");
        assert_eq!(location.map(|l| l.0), Some(1));
        assert!(message.contains("expected a map of scenario id"), "{message}");
        let (location, message) = error_of("a.b: x\nc.d: [1]\n");
        assert_eq!(location, Some((2, 6)));
        assert!(message.contains("expected a non-empty reason"), "{message}");
    }
}
