//! The scenario suite engine: suites are YAML data (see `suites/README.md`), loaded strictly
//! with `file:line:column` errors, requests built through the compiled CSI descriptor, run
//! concurrently against a plugin with every created resource torn down, into a
//! [`RunReport`](crate::report::RunReport).

mod assert;
mod builtin;
mod builtin_vars;
mod checks;
mod load;
mod model;
mod request;
mod resources;
mod run;
mod vars;

pub use builtin::{BUILTIN, builtin};
pub use builtin_vars::{AccessType, NAME_MAX};
pub use checks::{ArgKind, ArgSpec, CheckArgs, CheckDef, CheckFuture, CheckOutcome, checks};
pub use load::{
    LoadError, LoadErrors, OPTIONS, check_unique, load_file, load_str, secret_key,
};
pub use model::{
    Action, AssertStep, Assertion, Call, CheckStep, Cmp, Condition, Expect, ExpectCodes, Location, Poll, Repeat,
    Requires, Save, Scenario, SecretsMode, SkipOn, Step, Subject, Suite, Test,
};
pub use request::{RequestTemplate, build_request, parse_request};
pub use resources::{Resource, ResourceObserver, Sending, Tracked, Tracker, set_secrets};
pub use run::{DEFAULT_CLEANUP_TIMEOUT, GIB, Plugin, Reconnect, Response, RunConfig, ScenarioCtx, run, run_until};
pub use vars::{FieldPath, Seg, Val, Vars};
pub use crate::yaml::Pos;
