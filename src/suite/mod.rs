//! The scenario suite engine: suites are YAML data (see `suites/README.md`), loaded strictly
//! with `file:line:column` errors, requests built through the compiled CSI descriptor, run
//! concurrently against a plugin with every created resource torn down, into a
//! [`RunReport`](crate::report::RunReport).

mod assert;
mod budget;
mod builtin;
mod builtin_vars;
mod catalog;
mod checks;
mod error;
mod existing;
#[cfg(test)]
mod golden;
mod inspect;
#[cfg(test)]
mod layout;
mod marker;
mod ctx;
mod load;
mod model;
mod property;
mod request;
mod resources;
mod paths;
mod pool;
mod profile;
mod run;
mod settings;
mod steps;
mod vars;

pub use budget::{BudgetConfig, DEFAULT_CONTENTION_TIMEOUT};
pub use builtin::{BUILTIN, builtin, load_file, load_str};
pub use builtin_vars::NAME_MAX;
pub use catalog::{ArgKind, ArgSpec, Catalog, CheckArgs, CheckDemand, CheckSpec, CheckUse, PropertySpec};
pub use checks::{CheckDef, CheckFuture, Registry, checks};
pub use checks::properties::{CaseFuture, CaseInput, CaseOutcome, PropertyDef, properties};
pub use existing::{CAPABILITY_KEYS, ExistingCapability, ExistingVolume, PROTECTED_RPCS, parse_mode};
pub use inspect::{
    DEFAULT_CHECK_PATH_TIMEOUT, Inspector, MountCheck, MountTableError, PathCommand, PathCommandError, PathKind, socket_peer,
};
pub use checks::lifecycle::{MountOptions, NO_EXISTING_VOLUME, RESTART_TIMEOUT, forwarded_context};
pub use marker::MARKER_FILE;
pub use error::{LoadError, LoadErrors};
pub use load::{OPTIONS, check_unique, load_file_in, load_str_in};
pub use crate::secrets::secret_key;
pub use model::{
    Action, AssertStep, Assertion, Call, CheckStep, Cmp, Condition, Expect, ExpectCodes, Location, Poll, Pool, PropertyStep,
    Repeat, Requires, Save, Scenario, SecretsMode, SkipOn, Step, Subject, Suite, Test, takes_node_path,
};
pub use property::{case_seed, show_set};
pub use request::{RequestTemplate, build_request, parse_request};
pub use paths::{DEFAULT_PATH_CMD_TIMEOUT, PathError, PathSettings};
pub use profile::{CSI_SANITY_NOWHERE, Profile};
pub use resources::{Resource, ResourceObserver, Sending, Tracked, Tracker, set_secrets};
pub use ctx::{CheckOutcome, Response, ScenarioCtx};
pub use run::{run, run_until};
pub use settings::{AccessType, DEFAULT_CLEANUP_TIMEOUT, DEFAULT_PROPERTY_TIME, GIB, Plugin, Progress, Reconnect, RunConfig};
pub use vars::{FieldPath, Seg, Val, Vars, did_you_mean};
pub use crate::yaml::Pos;
