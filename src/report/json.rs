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
pub const FORMAT_VERSION: u32 = 1;

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
        _ => Ok(serde_json::from_str(json)?),
    }
}
