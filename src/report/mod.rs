//! Findings and run results ([`model`]), and every way they are written out.

pub mod compare;
pub mod html;
pub mod model;

pub use model::{
    Counts, Expectation, Finding, RpcLatency, RunReport, ScenarioResult, Severity, SuiteResult,
};
