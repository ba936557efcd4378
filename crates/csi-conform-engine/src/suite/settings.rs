//! What a run is given besides the suites: the plugin under test ([`Plugin`]), the run's
//! settings ([`RunConfig`], [`Reconnect`]), progress reporting and their defaults. Knows
//! nothing of the runner, so checks and variables may read it.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    path::PathBuf,
    sync::Arc,
    time::Duration,
};

use regex::Regex;

use super::{
    existing::ExistingVolume,
    budget::{self, BudgetConfig},
    inspect::{MountCheck, NodeAgent, PathCommand},
    model::*,
    paths::PathSettings,
    profile::Profile,
    resources::ResourceObserver,
};
use crate::{
    capability::strategy::Bounds, client::Connection, fingerprint::Fingerprint, scrub::Scrubber,
};

/// The plugin under test: its connections and what it said about itself.
#[derive(Debug, Clone)]
pub struct Plugin {
    /// The controller endpoint (also used for Identity, GroupController and
    /// SnapshotMetadata RPCs), if one was given.
    pub controller: Option<Connection>,
    /// The node endpoints, in the order given (`node: 1` is the second).
    pub nodes: Vec<Connection>,
    /// The fingerprint taken before the run.
    pub fingerprint: Fingerprint,
}

/// Everything about a run that is not the plugin or the suites.
#[derive(Clone)]
pub struct RunConfig {
    /// Scenarios run at once (at least 1).
    pub jobs: usize,
    /// `--idempotency-count`: how often `repeat: idempotency` calls.
    pub idempotency_count: u32,
    /// `--access-type`.
    pub access_type: AccessType,
    /// `--test-volume-size`, bytes.
    pub volume_size: i64,
    /// `--test-volume-expand-size`; `None` means volume_size + 1 GiB.
    pub expand_size: Option<i64>,
    /// `--nonexistent-volume-id`: the id NOT_FOUND scenarios send for a volume that does not
    /// exist (none: the id of a volume this run created and deleted, see [`RunFacts`]).
    pub nonexistent_volume_id: Option<String>,
    /// `--nonexistent-snapshot-id`: the same for a snapshot.
    pub nonexistent_snapshot_id: Option<String>,
    /// `--test-volume-parameters`.
    pub parameters: BTreeMap<String, String>,
    /// `--test-volume-mutable-parameters`.
    pub mutable_parameters: BTreeMap<String, String>,
    /// `--test-snapshot-parameters`.
    pub snapshot_parameters: BTreeMap<String, String>,
    /// The secrets file: csi-sanity key (`CreateVolumeSecret`) → map.
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
    /// `--profile`: which scenarios run at all, and what csi-sanity-mapped ones send.
    pub profile: Profile,
    /// Only scenarios whose id, title or a tag matches one of these (all when empty).
    pub focus: Vec<Regex>,
    /// Leaves out scenarios whose id, title or a tag matches one of these.
    pub skip: Vec<Regex>,
    /// Enabled opt-ins (`attach_limit`).
    pub options: BTreeSet<String>,
    /// Where per-scenario directories are made (created; our directories are removed after).
    pub work_dir: PathBuf,
    /// csi-sanity's mount and staging directories and path commands.
    pub paths: PathSettings,
    /// Whether warnings fail the run.
    pub strict: bool,
    /// The seed: recorded in the report, the source of every property step's generated
    /// cases and of data markers; never of names (each run has a fresh run id).
    pub seed: u64,
    /// `--property-cases`: how many generated cases each `property` step checks (0 skips
    /// the scenarios that have one).
    pub property_cases: u32,
    /// `--property-bounds`: what generated capabilities may contain (a step's `bounds:`
    /// replaces parts of it).
    pub property_bounds: Bounds,
    /// `--property-time`: how long a property step whose cases create volumes may generate
    /// new cases (zero: no limit but `property_cases`).
    pub property_time: Duration,
    /// `--max-live-volumes`, `--max-live-bytes`, `--contention-timeout`.
    pub budgets: BudgetConfig,
    /// `--delete-grace`: how long a volume or snapshot a delete answered OK for may still be
    /// found or listed (a backend finishing the delete in the background) before that is a
    /// failure; it is looked up again within this time, never longer.
    pub delete_grace: Duration,
    /// `--ready-timeout`: the bound of every wait for readiness (a snapshot's `ready_to_use`,
    /// a `poll:` step's condition); none: each `poll:` step's own `timeout`, and
    /// [`DEFAULT_READY_TIMEOUT`](super::patience::DEFAULT_READY_TIMEOUT) elsewhere. When it
    /// runs out the step is inconclusive: the spec sets readiness no deadline.
    pub ready_timeout: Option<Duration>,
    /// `--settle-time`: the least time an effect on the node the plugin answered OK for (an
    /// expansion becoming visible) is looked for again before it is judged; longer when the
    /// plugin answers slowly (see [`super::patience::settle`]).
    pub settle_time: Duration,
    /// The command that started this run, without `--seed`, `--focus` and `--skip`: the
    /// start of the replay command a property failure prints (`csi-conform run` if unset).
    pub replay_command: Option<String>,
    /// The longest the whole run may take; scenarios not started by then are not run.
    pub timeout: Option<Duration>,
    /// After a stop (a signal, the run timeout), how long the scenarios in flight may take to
    /// finish their step and tear down; then they are abandoned, and what they created stays
    /// in the journal for `csi-conform cleanup`.
    pub cleanup_timeout: Duration,
    /// How an endpoint whose connection was lost is tried again.
    pub reconnect: Reconnect,
    /// Hides sensitive values in free text: the secrets' values are added at the start, and
    /// the values of sensitive fields of every request and response as they pass; findings
    /// are scrubbed with it (share it with the log writer to scrub logs too).
    pub scrubber: Scrubber,
    /// The csi-conform version, for the report.
    pub tool_version: String,
    /// Hears of every resource created and released.
    pub observer: Option<Arc<dyn ResourceObserver>>,
    /// `--check-path-cmd`: how the paths of remote node endpoints are inspected (none: they
    /// are not, and the checks say so).
    pub check_path_cmd: Option<PathCommand>,
    /// `--node-agents`: the agent playing node 0, 1, ... (none: the node endpoints' paths are
    /// inspected from here, or through --check-path-cmd).
    pub node_agents: Vec<Arc<dyn NodeAgent>>,
    /// `--mount-check`: whether node mounts are verified (where the node plugin's mount
    /// namespace can be found) or never.
    pub mount_check: MountCheck,
    /// `--allow-restart-cmd`: the shell command that restarts a node plugin (enables the
    /// `restart` opt-in).
    pub restart_cmd: Option<String>,
    /// `--restart-controller-cmd`: the shell command that restarts the controller plugin
    /// (enables the `restart_controller` opt-in).
    pub restart_controller_cmd: Option<String>,
    /// The plugin the run started itself (the bundled reference plugin), which it restarts
    /// in-process where no restart command is given ([`RunConfig::restart_in_process`]).
    pub in_process_restart: Option<Arc<dyn Restarter>>,
    /// Hears of scenarios starting and finishing (the console's progress display).
    pub progress: Option<Arc<dyn Progress>>,
    /// `--existing-volume` and the settings file's `existing-volumes`: volumes the run did
    /// not create. The `existing` suite stages and publishes them; no RPC that deletes,
    /// resizes, modifies or snapshots one is ever sent.
    pub existing_volumes: Vec<ExistingVolume>,
    /// `--existing-volume-writable`: the run may write to the existing volumes (without it,
    /// nothing is ever written to them, not even a write probe).
    pub existing_writable: bool,
    /// `--orchestrator`: for each, the scenarios with an orchestrated check run once more as
    /// `<id>@<orchestrator>`, following its call pattern, and the report gets its
    /// compatibility matrix. Empty: neither.
    pub orchestrators: Vec<crate::orchestrator::Profile>,
    /// `--orchestrator-only`: a scenario that has orchestrator instances runs only as them
    /// (the matrix without the spec verdicts of the same lifecycles); the others run as usual.
    pub orchestrator_only: bool,
    /// `--stress-workers`, `--stress-volumes`, `--stress-calls`: how big the opt-in `stress`
    /// and `disruption` suites are (each bounded again by the run's budgets when it runs).
    pub stress: StressSize,
}

/// What [`Restarter`] answers: done (the new server listens), or why not.
pub type Restarting<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + 'a>>;

/// Restarts a plugin the run started itself (the bundled reference plugin, served in-process
/// when no endpoint is given), as a process restart would: its server stopped and started
/// again on the same socket and state directory, so that what it kept in memory is lost
/// while its state on disk and the kernel's mounts stay.
pub trait Restarter: Send + Sync + fmt::Debug {
    /// Restarts the plugin serving node endpoint `index` (node 0 first); returns once the
    /// new one listens.
    fn restart_node(&self, index: usize) -> Restarting<'_>;
    /// Restarts the plugin serving the controller endpoint; returns once the new one listens.
    fn restart_controller(&self) -> Restarting<'_>;
}

impl RunConfig {
    /// Lets the run restart the plugin itself with `restarter` where no restart command is
    /// given: enables the disruption suite's node and controller restarts (the opt-ins
    /// `restart_node` and `restart_controller`). Not the `lifecycle` suite's restart between
    /// stage and publish (`restart`), which stays with `--allow-restart-cmd`, so that the
    /// default run of the bundled plugin is the same with or without it.
    pub fn restart_in_process(&mut self, restarter: Arc<dyn Restarter>) {
        self.in_process_restart = Some(restarter);
        self.options.insert("restart_node".to_owned());
        self.options.insert("restart_controller".to_owned());
    }
}

/// The size of the `stress` suite's scenarios. The defaults finish in seconds against the
/// reference plugin; each scenario still takes no more than the run's budgets allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StressSize {
    /// Workers running lifecycles at once.
    pub workers: u32,
    /// Volumes the workers take through their lifecycles, in all; also how many volumes are
    /// published to one node at once.
    pub volumes: u32,
    /// How many copies of one call are sent at once (the same CreateVolume, the same
    /// NodeStageVolume).
    pub calls: u32,
}

impl Default for StressSize {
    fn default() -> Self {
        StressSize { workers: 4, volumes: 8, calls: 4 }
    }
}

pub use crate::report::progress::Progress;

/// One GiB.
pub const GIB: i64 = 1 << 30;

/// The default [`RunConfig::property_cases`]: enough that each property step tries every
/// access mode with both access types, in some generated set, for all but about 1 run seed in
/// 1,000 (the default bounds: 7 modes x 2 types, 1 to 3 capabilities a set; a test in
/// `suite::property` counts it). A deep run asks for more (`--property-cases 256`,
/// proptest's own default and this one's before issue 19).
pub const DEFAULT_PROPERTY_CASES: u32 = 64;

/// The default [`RunConfig::property_time`].
pub const DEFAULT_PROPERTY_TIME: Duration = Duration::from_secs(20);

/// The default `--settle-time` (see [`super::patience`], which waits it).
pub const DEFAULT_SETTLE_TIME: Duration = Duration::from_millis(250);

/// The default [`RunConfig::delete_grace`].
pub const DEFAULT_DELETE_GRACE: Duration = Duration::from_secs(2);

/// The default [`RunConfig::cleanup_timeout`].
pub const DEFAULT_CLEANUP_TIMEOUT: Duration = Duration::from_secs(120);

/// How the engine tries an endpoint again after losing the connection to it: one Probe at
/// once, then up to `attempts` more, waiting `first_wait`, then twice as long each time. An
/// endpoint that never answers is given up for the rest of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    /// Probes after the first (0: give up as soon as one Probe fails).
    pub attempts: u32,
    /// The wait before the first of them; it doubles each time.
    pub first_wait: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect { attempts: 3, first_wait: Duration::from_millis(500) }
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            jobs: 8,
            idempotency_count: 10,
            access_type: AccessType::Mount,
            volume_size: 10 * GIB,
            expand_size: None,
            nonexistent_volume_id: None,
            nonexistent_snapshot_id: None,
            parameters: BTreeMap::new(),
            mutable_parameters: Profile::Full.default_mutable_parameters(),
            snapshot_parameters: BTreeMap::new(),
            secrets: BTreeMap::new(),
            profile: Profile::Full,
            focus: Vec::new(),
            skip: Vec::new(),
            options: BTreeSet::new(),
            work_dir: std::env::temp_dir().join("csi-conform"),
            paths: PathSettings::default(),
            strict: false,
            seed: 0,
            property_cases: DEFAULT_PROPERTY_CASES,
            property_bounds: Bounds::default(),
            property_time: DEFAULT_PROPERTY_TIME,
            budgets: BudgetConfig::default(),
            delete_grace: DEFAULT_DELETE_GRACE,
            ready_timeout: None,
            settle_time: DEFAULT_SETTLE_TIME,
            replay_command: None,
            timeout: None,
            cleanup_timeout: DEFAULT_CLEANUP_TIMEOUT,
            reconnect: Reconnect::default(),
            scrubber: Scrubber::new(),
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            observer: None,
            check_path_cmd: None,
            node_agents: Vec::new(),
            mount_check: MountCheck::Auto,
            restart_cmd: None,
            restart_controller_cmd: None,
            in_process_restart: None,
            progress: None,
            existing_volumes: Vec::new(),
            existing_writable: false,
            orchestrators: Vec::new(),
            orchestrator_only: false,
            stress: StressSize::default(),
        }
    }
}

/// The narrow view of [`RunConfig`] that waits read (see [`super::patience`]): how long the
/// run waits for what the spec lets a plugin finish later.
#[derive(Debug, Clone, Copy)]
pub struct Waits {
    /// `--ready-timeout` (see [`RunConfig::ready_timeout`]).
    pub ready_timeout: Option<Duration>,
    /// `--settle-time` (see [`RunConfig::settle_time`]).
    pub settle_time: Duration,
    /// `--delete-grace` (see [`RunConfig::delete_grace`]).
    pub delete_grace: Duration,
}

/// The secrets file (csi-sanity key, `CreateVolumeSecret`, → values), shared: views that
/// fill requests' `secrets` hold it. Its `Debug` shows the keys only.
#[derive(Clone, Default)]
pub struct Secrets(Arc<BTreeMap<String, BTreeMap<String, String>>>);

impl Secrets {
    /// The values for `key` (none: the file has no such key).
    pub fn get(&self, key: &str) -> Option<&BTreeMap<String, String>> {
        self.0.get(key)
    }

    /// Whether the file has values for `key` (perhaps an empty map).
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Whether the run was given no secrets at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// The ids the run sends for objects that do not exist (`--nonexistent-volume-id`,
/// `--nonexistent-snapshot-id`; none: ids of the run's own choosing): what
/// [`Witnesses::credible`](super::witness::Witnesses::credible) asks about.
#[derive(Debug, Clone, Default)]
pub struct NonexistentIds {
    /// `--nonexistent-volume-id`.
    pub volume: Option<String>,
    /// `--nonexistent-snapshot-id`.
    pub snapshot: Option<String>,
}

/// The narrow view of [`RunConfig`] that the look-ups after a delete read (see
/// [`super::verifier`]): how long a deleted object may still show, the secrets look-ups and
/// listings carry, and the ids that test whether a look-up may be believed.
#[derive(Debug, Clone)]
pub struct DeleteLookups {
    /// `--delete-grace` (see [`RunConfig::delete_grace`]).
    pub delete_grace: Duration,
    /// The secrets file.
    pub secrets: Secrets,
    /// The ids of objects that do not exist.
    pub nonexistent: NonexistentIds,
}

/// The narrow view of [`RunConfig`] that finding where node endpoints' paths and mounts are
/// reads (see `ctx::node_inspector`): the node agents, `--check-path-cmd`, `--mount-check`.
#[derive(Debug, Clone)]
pub struct NodeAccess {
    /// `--node-agents`: the agent playing node 0, 1, ... (see [`RunConfig::node_agents`]).
    pub agents: Arc<[Arc<dyn NodeAgent>]>,
    /// `--check-path-cmd` (see [`RunConfig::check_path_cmd`]).
    pub check_path_cmd: Option<PathCommand>,
    /// `--mount-check` (see [`RunConfig::mount_check`]).
    pub mount_check: MountCheck,
}

/// The narrow view of [`RunConfig`] that building requests reads: what the run's
/// CreateVolume and CreateSnapshot requests carry (parameters, access type, sizes) and the
/// secrets file that fills their `secrets`.
#[derive(Debug, Clone)]
pub struct Requests {
    /// `--access-type`.
    pub access_type: AccessType,
    /// `--test-volume-size`, bytes.
    pub volume_size: i64,
    /// The expansion target ([`RunConfig::expand_size`]).
    pub expand_size: i64,
    /// `--test-volume-parameters`.
    pub parameters: Arc<BTreeMap<String, String>>,
    /// `--test-volume-mutable-parameters`.
    pub mutable_parameters: Arc<BTreeMap<String, String>>,
    /// `--test-snapshot-parameters`.
    pub snapshot_parameters: Arc<BTreeMap<String, String>>,
    /// The secrets file.
    pub secrets: Secrets,
}

/// The narrow view of [`RunConfig`] that keeps the run from harming what is not its own and
/// from leaking secrets: the volumes it did not create, whether it may write to them, and
/// the scrubber of sensitive values.
#[derive(Debug, Clone)]
pub struct Safety {
    /// `--existing-volume` (see [`RunConfig::existing_volumes`]).
    pub existing_volumes: Arc<[ExistingVolume]>,
    /// `--existing-volume-writable`.
    pub existing_writable: bool,
    /// Hides sensitive values in free text (see [`RunConfig::scrubber`]; shared).
    pub scrubber: Scrubber,
}

/// The narrow view of [`RunConfig`] that restarting a plugin reads: the commands that do it
/// (none: that restart is not run, and the checks that need it skip).
#[derive(Debug, Clone, Default)]
pub struct Restarts {
    /// `--allow-restart-cmd`: restarts a node plugin.
    pub node: Option<String>,
    /// `--restart-controller-cmd`: restarts the controller plugin.
    pub controller: Option<String>,
    /// The run's own restart of the bundled plugin it started, where no command is given.
    pub in_process: Option<Arc<dyn Restarter>>,
}

impl RunConfig {
    /// The commands that restart the plugin.
    pub fn restarts(&self) -> Restarts {
        Restarts {
            node: self.restart_cmd.clone(),
            controller: self.restart_controller_cmd.clone(),
            in_process: self.in_process_restart.clone(),
        }
    }

    /// What building requests reads of the run's settings (`secrets`: from
    /// [`RunConfig::secrets`], built once).
    pub fn requests(&self, secrets: Secrets) -> Requests {
        Requests {
            access_type: self.access_type,
            volume_size: self.volume_size,
            expand_size: self.expand_size(),
            parameters: Arc::new(self.parameters.clone()),
            mutable_parameters: Arc::new(self.mutable_parameters.clone()),
            snapshot_parameters: Arc::new(self.snapshot_parameters.clone()),
            secrets,
        }
    }

    /// What keeps the run off what is not its own and its secrets out of the report.
    pub fn safety(&self) -> Safety {
        Safety {
            existing_volumes: self.existing_volumes.iter().cloned().collect(),
            existing_writable: self.existing_writable,
            scrubber: self.scrubber.clone(),
        }
    }

    /// How node endpoints' paths and mounts are reached.
    pub fn node_access(&self) -> NodeAccess {
        NodeAccess {
            agents: self.node_agents.iter().cloned().collect(),
            check_path_cmd: self.check_path_cmd.clone(),
            mount_check: self.mount_check,
        }
    }

    /// What waits read of the run's settings.
    pub fn waits(&self) -> Waits {
        Waits { ready_timeout: self.ready_timeout, settle_time: self.settle_time, delete_grace: self.delete_grace }
    }

    /// The secrets file, to share among the views that carry it (a copy: build it once).
    pub fn secrets(&self) -> Secrets {
        Secrets(Arc::new(self.secrets.clone()))
    }

    /// The ids the run sends for objects that do not exist.
    pub fn nonexistent_ids(&self) -> NonexistentIds {
        NonexistentIds { volume: self.nonexistent_volume_id.clone(), snapshot: self.nonexistent_snapshot_id.clone() }
    }

    /// What the look-ups after a delete read of the run's settings (`secrets`: from
    /// [`RunConfig::secrets`], built once).
    pub fn delete_lookups(&self, secrets: Secrets) -> DeleteLookups {
        DeleteLookups { delete_grace: self.delete_grace, secrets, nonexistent: self.nonexistent_ids() }
    }

    /// The expansion target: `expand_size`, or volume_size + 1 GiB.
    pub fn expand_size(&self) -> i64 {
        self.expand_size.unwrap_or(self.volume_size.saturating_add(GIB))
    }

    /// The sizes scenario budgets depend on (`facts`: what the run learned of the plugin).
    pub(crate) fn sizing(&self, facts: &RunFacts) -> budget::Sizing {
        budget::Sizing {
            volume_size: self.volume_size,
            small_size: facts.small_size(self),
            expand_size: self.expand_size(),
            small_expand_size: facts.small_expand_size(self),
            idempotency_count: self.idempotency_count,
            property_cases: self.property_cases,
            jobs: self.jobs,
        }
    }

    /// Whether a scenario is in the profile and passes the focus and skip filters, which match
    /// its id, title, tags, and csi-sanity's spec text of every case it covers (so that a
    /// csi-sanity `--ginkgo.focus='Node Service'` selects the scenarios that cover those specs).
    pub fn selects(&self, scenario: &Scenario) -> bool {
        if !self.profile.includes(scenario) {
            return false;
        }
        let texts = || {
            std::iter::once(scenario.id())
                .chain(std::iter::once(scenario.title()))
                .chain(scenario.tags().iter().map(String::as_str))
                .chain(scenario.parity().iter().filter_map(|&case| super::sanity::spec_text(case)))
        };
        let focused = self.focus.is_empty() || self.focus.iter().any(|re| texts().any(|t| re.is_match(t)));
        focused && !self.skip.iter().any(|re| texts().any(|t| re.is_match(t)))
    }
}

/// Shows everything but secret values (only the secrets file's keys).
impl fmt::Debug for RunConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunConfig")
            .field("jobs", &self.jobs)
            .field("idempotency_count", &self.idempotency_count)
            .field("access_type", &self.access_type)
            .field("volume_size", &self.volume_size)
            .field("expand_size", &self.expand_size)
            .field("nonexistent_volume_id", &self.nonexistent_volume_id)
            .field("nonexistent_snapshot_id", &self.nonexistent_snapshot_id)
            .field("parameters", &self.parameters)
            .field("mutable_parameters", &self.mutable_parameters)
            .field("snapshot_parameters", &self.snapshot_parameters)
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .field("profile", &self.profile)
            .field("focus", &self.focus)
            .field("skip", &self.skip)
            .field("options", &self.options)
            .field("work_dir", &self.work_dir)
            .field("paths", &self.paths)
            .field("strict", &self.strict)
            .field("seed", &self.seed)
            .field("property_cases", &self.property_cases)
            .field("property_bounds", &self.property_bounds)
            .field("property_time", &self.property_time)
            .field("budgets", &self.budgets)
            .field("replay_command", &self.replay_command)
            .field("timeout", &self.timeout)
            .field("cleanup_timeout", &self.cleanup_timeout)
            .field("delete_grace", &self.delete_grace)
            .field("ready_timeout", &self.ready_timeout)
            .field("settle_time", &self.settle_time)
            .field("reconnect", &self.reconnect)
            .field("scrubber", &self.scrubber)
            .field("tool_version", &self.tool_version)
            .field("observer", &self.observer.is_some())
            .field("check_path_cmd", &self.check_path_cmd)
            .field("node_agents", &self.node_agents)
            .field("mount_check", &self.mount_check)
            .field("restart_cmd", &self.restart_cmd)
            .field("restart_controller_cmd", &self.restart_controller_cmd)
            .field("in_process_restart", &self.in_process_restart)
            .field("stress", &self.stress)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// What a run learns from the plugin before its scenarios start (the engine's `probe.rs`
/// finds it out once per run): the size of the volumes of scenarios that do not test sizes,
/// and ids of objects of each kind that existed in this run and were deleted, so that
/// NOT_FOUND scenarios send ids in the plugin's own format.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFacts {
    /// The smallest volume the plugin serves, in bytes, and how it was found (none: the test
    /// volume size, nothing was learned).
    pub small: Option<(i64, String)>,
    /// A volume id this run created and deleted.
    pub gone_volume_id: Option<String>,
    /// A snapshot id this run created and deleted.
    pub gone_snapshot_id: Option<String>,
    /// A group snapshot id this run created and deleted.
    pub gone_group_snapshot_id: Option<String>,
}

impl RunFacts {
    /// The size of volumes whose size does not matter (`${small_volume_size}`): the smallest
    /// the plugin serves, or the test volume size when that is not known.
    pub fn small_size(&self, config: &RunConfig) -> i64 {
        self.small.as_ref().map_or(config.volume_size, |(bytes, _)| *bytes)
    }

    /// Why [`small_size`](RunFacts::small_size) is what it is, for the report.
    pub fn small_why(&self) -> &str {
        self.small.as_ref().map_or("the test volume size (--test-volume-size): the plugin creates no volumes", |(_, why)| why)
    }

    /// The target of expansions that start from the small size (`${small_expand_size}`):
    /// twice it, so that the growth is as plain as with the test sizes.
    pub fn small_expand_size(&self, config: &RunConfig) -> i64 {
        match &self.small {
            Some((bytes, _)) => bytes.saturating_mul(2),
            None => config.expand_size(),
        }
    }
}

/// `--access-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccessType {
    /// A filesystem (`mount: {}`).
    #[default]
    Mount,
    /// A raw block device (`block: {}`).
    Block,
}

impl AccessType {
    /// `mount` or `block`.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessType::Mount => "mount",
            AccessType::Block => "block",
        }
    }
}

impl std::str::FromStr for AccessType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mount" => Ok(AccessType::Mount),
            "block" => Ok(AccessType::Block),
            other => Err(format!("unknown access type {other:?}; expected mount or block")),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    //! Fingerprints for unit tests.
    use std::collections::BTreeSet;

    use crate::{
        client::Endpoint,
        fingerprint::{Fingerprint, NodeInfo, PluginCapabilities, PluginInfo},
    };

    /// A fingerprint with `nodes` node endpoints and no capabilities.
    pub(crate) fn fingerprint(nodes: usize) -> Fingerprint {
        let endpoint = Endpoint::Unix("/tmp/x.sock".into());
        Fingerprint {
            plugin: PluginInfo {
                endpoint: endpoint.clone(),
                name: "p".into(),
                vendor_version: "1".into(),
                manifest: Default::default(),
            },
            capabilities: PluginCapabilities::default(),
            controller: None,
            group_controller: None,
            spec: crate::version::Assumed::infer(&[]),
            nodes: (0..nodes)
                .map(|i| NodeInfo {
                    endpoint: endpoint.clone(),
                    plugin_name: "p".into(),
                    capabilities: BTreeSet::new(),
                    node_id: format!("node-{i}"),
                    max_volumes_per_node: 0,
                    topology: None,
                })
                .collect(),
            notes: Vec::new(),
        }
    }
}
