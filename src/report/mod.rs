//! Findings and run results ([`model`]), and every way they are written out: the console
//! ([`console`]) and JUnit XML ([`junit`]).

pub mod console;
pub mod junit;
pub mod model;
mod text;

pub use console::{scenario_line, summary};
pub use junit::to_junit_xml;
pub use model::{
    Counts, Expectation, Finding, RpcLatency, RunReport, ScenarioResult, Severity, SuiteResult,
};
