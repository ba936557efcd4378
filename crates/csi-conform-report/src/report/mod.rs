//! Findings and run results ([`model`]), and every way they are written out: the console
//! ([`console`]), root causes shared by several failures ([`causes`]), JUnit XML ([`junit`]), JSON ([`json`]), HTML ([`html`]), the GitHub job summary in Markdown ([`markdown`]), report files
//! ([`write`](mod@write)), the `--expect-failures` list that marks known failures
//! ([`expect`]), and the comparison of two runs ([`compare`]).

pub mod annotations;
pub mod causes;
pub mod compare;
pub mod console;
pub mod expect;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod matrix;
pub mod model;
pub mod progress;
mod text;
pub mod write;

pub use console::{scenario_line, shell_word, summary, summary_with_command};
pub use expect::{ExpectError, ExpectedFailures};
pub use json::{FORMAT_VERSION, JsonError, from_json, to_json};
pub use junit::to_junit_xml;
pub use text::NOTE_KIND;
pub use model::{SpecEvidence, SpecJudged, BehaviourResult, OrchestratorResult, 
    Counts, Evidence, Expectation, Finding, FindingNode, MountSite, RequirementRef, RpcLatency, RunReport, ScenarioResult, Severity, SuiteResult,
    Settled, VolumeSizes,
};
pub use write::{ReportError, write_atomically, write_reports};
