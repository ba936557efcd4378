//! The scenario suite engine: suites are YAML data (see `suites/README.md`), loaded strictly
//! with `file:line:column` errors, requests built through the compiled CSI descriptor, run
//! concurrently against a plugin with every created resource torn down, into a
//! [`RunReport`](crate::report::RunReport).
//!
//! The engine is in layers; a file imports only from its own layer or a lower one, through
//! the module that defines a name (the table and its test are in the engine's `src/layout.rs`):
//!
//! | layer | files | what it owns |
//! |---|---|---|
//! | 1 values | `vars`, `error`, `pool`, `existing`, `bounds`, `sanity`, `inspect`, `resources`, `request`, `deleted`, `answer` | values and their types, load errors, the plugin's pools, existing volumes, the bounds of generated capabilities as written, csi-sanity's spec texts, path and mount inspection (data markers and write probes are csi-client's `marker`), tracked resources, requests built from YAML, how a deleted object is looked up again, a plugin's answer and the findings about one call |
//! | 2 vocabulary | `catalog` | argument kinds, [`CheckSpec`] / [`PropertySpec`] (name, docs, args, outputs, RPCs, pools held, demand and cost, as data) and the [`Catalog`] the loader reads |
//! | 3 model | `model`, `assert`, `profile` | the typed suite (a check step points at a [`CheckSpec`]), assertions over values, the csi-sanity profile |
//! | 4 settings and scheduler | `settings`, `paths`, `builtin_vars`, `budget`, `budget/`, `verifier`, `patience`, `inflight` | the run's settings, its paths, the built-in variables, the budgets and each scenario's demand (the sum of its steps' and its checks' specs, never a check's name), the look-ups after deletes and the run-wide delete verifier, the bounds of waits without a spec deadline, the run's own calls in flight per volume |
//! | 5 loading | `load`, `load/` | YAML to the model, given a [`Catalog`] (so it never imports the checks); above the settings because it checks `${...}` against the built-in variables' types |
//! | 6 context | `ctx`, `ctx/` | [`ScenarioCtx`], the only `impl ScenarioCtx`: variables, calls (`ctx/send`: its stages), findings, teardown |
//! | 7 checks | `checks/` (one file per named check, a folder for `lifecycle`), `builtin` | the named checks and properties in one registry table ([`Registry`] implements [`Catalog`]), the built-in suites |
//! | 8 engine | `property`, `steps`, `probe`, `run` | property cases and shrinking, step execution, what the run learns of the plugin before its scenarios (smallest volume size, deleted ids), the runner |
//!
//! Adding a named check is one new file under `checks/` and one line in its registry (see the
//! `checks` module doc and "Writing a named check" in `suites/README.md`).

mod answer;
mod assert;
mod budget;
pub(crate) mod bounds;
mod builtin;
mod builtin_vars;
mod catalog;
mod checks;
mod deleted;
mod error;
mod existing;
mod inflight;
#[cfg(test)]
mod golden;
mod inspect;
mod instances;
pub use csi_client::marker;
mod mounted;
mod ctx;
mod load;
mod model;
mod probe;
mod property;
mod request;
pub(crate) mod sanity;
mod resources;
mod paths;
mod patience;
mod pool;
mod profile;
mod run;
mod settings;
mod steps;
mod vars;
mod verifier;
mod witness;

pub use budget::{BudgetConfig, DEFAULT_CONTENTION_TIMEOUT};
pub use patience::{DEFAULT_READY_TIMEOUT, DEFAULT_SETTLE_TIME};
pub use builtin::{BUILTIN, OPT_IN, builtin, load_file, load_str, opt_in_suite, orchestrator_suites};
pub use model::ORCHESTRATOR_ONLY;
pub use builtin_vars::NAME_MAX;
pub use catalog::{ArgKind, ArgSpec, Catalog, CheckArgs, CheckDemand, CheckSpec, CheckUse, PropertySpec};
pub use checks::{CheckDef, CheckFuture, Registry, checks};
pub use checks::properties::{CaseFuture, CaseInput, CaseOutcome, PropertyDef, properties};
pub use existing::{CAPABILITY_KEYS, ExistingCapability, ExistingVolume, PROTECTED_RPCS, parse_mode};
pub use inspect::{
    DEFAULT_CHECK_PATH_TIMEOUT, Inspector, MountCheck, MountTableError, NodeAgent, NodeStat, NodeTable, PathCommand, PathCommandError,
    PathKind, WriteProbe,
    probe_write, socket_peer,
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
pub use settings::{RunFacts, AccessType, DEFAULT_CLEANUP_TIMEOUT, DEFAULT_DELETE_GRACE, DEFAULT_PROPERTY_CASES, DEFAULT_PROPERTY_TIME, GIB, Plugin, Progress, Reconnect, RunConfig, StressSize, Waits};
pub use vars::{FieldPath, Seg, Val, Vars, did_you_mean};
pub use crate::yaml::Pos;
