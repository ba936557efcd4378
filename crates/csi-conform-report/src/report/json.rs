//! The JSON report: the whole [`RunReport`] as pretty JSON, with a format version and the
//! outcome counts up front, and the way back ([`from_json`]) for `report --compare`.
//!
//! Keys come in the model's declaration order (`format_version`, `counts`, then the report's
//! own fields), maps in key order, so the same report always gives the same text. Durations
//! are seconds with microsecond precision; a report read back equals the one written down to
//! that precision.

use serde::{Deserialize, Serialize};

use super::model::{Counts, RunReport};

/// The version of the JSON layout written by [`to_json`]. A reader refuses a newer one rather
/// than misread it.
/// Version 2 counts `step` from 1, as the other reports do; version 1 counted it from 0 and is
/// still read.
pub const FORMAT_VERSION: u32 = 2;

/// Why a JSON report could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Not JSON, or not a csi-conform report.
    #[error("not a csi-conform JSON report: {0}")]
    Parse(#[from] serde_json::Error),
    /// Written by a newer csi-conform.
    #[error("JSON report format version {found} is newer than this csi-conform reads ({FORMAT_VERSION})")]
    UnsupportedVersion {
        /// The version the file declares.
        found: u32,
    },
}

/// What is written: the report with its version and counts in front.
#[derive(Serialize)]
struct Envelope<'a> {
    format_version: u32,
    counts: Counts,
    #[serde(flatten)]
    report: &'a RunReport,
}

/// Just the version, read ahead of the report.
#[derive(Deserialize)]
struct Version {
    #[serde(default)]
    format_version: Option<u32>,
}

/// The report as pretty, stably ordered JSON (with a trailing newline).
pub fn to_json(report: &RunReport) -> String {
    let envelope = Envelope { format_version: FORMAT_VERSION, counts: report.counts(), report };
    let mut out = serde_json::to_string_pretty(&envelope)
        // Every field of the model serialises: no maps with non-string keys, no failing impls.
        .expect("a RunReport always serialises to JSON");
    out.push('\n');
    out
}

/// Reads a report written by [`to_json`]. The `counts` are derived data and are not read back.
pub fn from_json(json: &str) -> Result<RunReport, JsonError> {
    let Version { format_version } = serde_json::from_str(json)?;
    match format_version {
        Some(found) if found > FORMAT_VERSION => Err(JsonError::UnsupportedVersion { found }),
        Some(2..) => Ok(serde_json::from_str(json)?),
        // Version 1 (or none): steps were counted from 0.
        _ => {
            let mut value: serde_json::Value = serde_json::from_str(json)?;
            count_steps_from_one(&mut value);
            Ok(serde_json::from_value(value)?)
        }
    }
}

/// Adds one to every finding's `step` of a version 1 report.
fn count_steps_from_one(value: &mut serde_json::Value) {
    let findings = value
        .get_mut("suites")
        .and_then(|s| s.as_array_mut())
        .into_iter()
        .flatten()
        .filter_map(|suite| suite.get_mut("scenarios").and_then(|s| s.as_array_mut()))
        .flatten()
        .filter_map(|scenario| scenario.get_mut("findings").and_then(|f| f.as_array_mut()))
        .flatten();
    for finding in findings {
        if let Some(step) = finding.get_mut("step").and_then(|s| s.as_u64()) {
            finding["step"] = serde_json::Value::from(step + 1);
        }
    }
}
