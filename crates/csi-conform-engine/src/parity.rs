//! Parity with csi-sanity: the inventory of its checks (`suites/parity.yaml`, built in) joined
//! with the `parity:` lists of the loaded scenarios, for `csi-conform list --parity`; and
//! csi-sanity's own spec texts (`suites/csi-sanity-specs.txt`), which `--focus`/`--skip`
//! match so that a csi-sanity `--ginkgo.focus` selects the scenarios covering those specs
//! (read from `suite/sanity.rs`, next to the matching that uses them).

use std::{collections::BTreeMap, fmt::Write as _};

use serde::Deserialize;

use crate::suite::Suite;

/// The inventory, embedded at build time.
pub const INVENTORY: &str = include_str!("../../../suites/parity.yaml");

pub use crate::suite::sanity::{SPEC_TEXTS, spec_text};

/// One csi-sanity check.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Its number in `csi-sanity-cases.txt`.
    pub case: u32,
    /// The Describe path.
    pub area: String,
    /// What it checks.
    pub check: String,
    /// What csi-sanity expects.
    pub expected: String,
    /// `active` or `pending` upstream.
    pub upstream: String,
}

/// The inventory joined with the scenarios that cover each case.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    /// Each case with the ids of the scenarios that cover it.
    pub cases: Vec<(Case, Vec<String>)>,
    /// Scenarios that claim a case number the inventory does not have.
    pub unknown: Vec<(String, u32)>,
}

/// Why the inventory could not be read.
#[derive(Debug, thiserror::Error)]
#[error("suites/parity.yaml: {0}")]
pub struct InventoryError(String);

/// Reads the built-in inventory.
pub fn inventory() -> Result<Vec<Case>, InventoryError> {
    let cases: Vec<Case> = serde_yaml::from_str(INVENTORY).map_err(|e| InventoryError(e.to_string()))?;
    let mut seen = std::collections::BTreeSet::new();
    for c in &cases {
        if !seen.insert(c.case) {
            return Err(InventoryError(format!("case {} is listed twice", c.case)));
        }
    }
    Ok(cases)
}

/// Joins the inventory with `suites`.
pub fn coverage(suites: &[Suite]) -> Result<Coverage, InventoryError> {
    let cases = inventory()?;
    let mut covering: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut unknown = Vec::new();
    for scenario in suites.iter().flat_map(|s| s.scenarios()) {
        for &n in scenario.parity() {
            if cases.iter().any(|c| c.case == n) {
                covering.entry(n).or_default().push(scenario.id().to_owned());
            } else {
                unknown.push((scenario.id().to_owned(), n));
            }
        }
    }
    Ok(Coverage {
        cases: cases.into_iter().map(|c| {
            let ids = covering.remove(&c.case).unwrap_or_default();
            (c, ids)
        }).collect(),
        unknown,
    })
}

impl Coverage {
    /// Cases no scenario covers.
    pub fn uncovered(&self) -> Vec<&Case> {
        self.cases.iter().filter(|(_, ids)| ids.is_empty()).map(|(c, _)| c).collect()
    }

    /// The table `list --parity` prints: each case, what it checks, and its scenarios; then
    /// the uncovered cases and any unknown claims.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (case, ids) in &self.cases {
            let pending = if case.upstream == "pending" { " [pending upstream]" } else { "" };
            let _ = writeln!(out, "{:>3}  {} :: {} -> {}{pending}", case.case, case.area, case.check, case.expected);
            if ids.is_empty() {
                out.push_str("     NOT COVERED\n");
            }
            for id in ids {
                let _ = writeln!(out, "     {id}");
            }
        }
        let uncovered = self.uncovered();
        let _ = writeln!(
            out,
            "\n{} of {} csi-sanity checks covered{}",
            self.cases.len() - uncovered.len(),
            self.cases.len(),
            if uncovered.is_empty() { String::new() } else {
                format!("; not covered: {}", uncovered.iter().map(|c| c.case.to_string()).collect::<Vec<_>>().join(", "))
            }
        );
        for (id, n) in &self.unknown {
            let _ = writeln!(out, "{id} claims csi-sanity case {n}, which the inventory does not have");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_csi_sanity_case_is_covered_by_a_builtin_scenario() {
        let coverage = coverage(&crate::suite::builtin()).unwrap();
        assert_eq!(coverage.cases.len(), 96, "the inventory lists csi-sanity's 96 specs");
        assert!(coverage.uncovered().is_empty(), "{}", coverage.render());
        assert!(coverage.unknown.is_empty(), "{:?}", coverage.unknown);
        assert_eq!(coverage.cases.iter().map(|(c, _)| c.case).collect::<Vec<_>>(), (1..=96).collect::<Vec<_>>());
    }

    #[test]
    fn every_case_has_its_csi_sanity_spec_text() {
        for case in inventory().unwrap() {
            let text = spec_text(case.case).unwrap_or_else(|| panic!("case {} has no spec text", case.case));
            assert!(text.contains(" should ") || text.contains(" check "), "{}: {text}", case.case);
        }
        assert_eq!(spec_text(68), Some("Node Service NodeGetInfo should return appropriate values"));
        assert_eq!(spec_text(97), None);
    }
}
