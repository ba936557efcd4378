//! Running suites against a plugin: selection (focus/skip), gating on capabilities, node
//! count and opt-ins, concurrent scenarios (up to `jobs`; `serial` ones alone), steps with
//! their expectations, variables, repeats and polls, teardown of every tracked resource, and
//! the [`RunReport`]. Secret values never leave it: requests are summarised through the
//! redaction helpers and every finding is scrubbed of the secrets file's values.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt,
    future::Future,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use prost_reflect::{DynamicMessage, MethodDescriptor, ReflectMessage};
use regex::Regex;
use tonic::Code;

use super::{
    assert::{self, AssertError},
    budget::{self, Budget, BudgetConfig, Queue, Retried, Ticket},
    builtin_vars::{self, AccessType, ScenarioPaths},
    checks::{CheckArgs, CheckOutcome},
    inspect::{Inspector, MountCheck, PathCommand},
    paths::{PathError, PathSettings, RunPaths},
    profile::Profile,
    load::{OPTIONS, secret_key},
    model::*,
    request::build_request,
    resources::{ResourceObserver, Tracker},
    vars::{Val, Vars},
};
use crate::{
    capability::strategy::Bounds,
    client::{Connection, ErrorOrigin, RpcError},
    fingerprint::{Capability, Fingerprint},
    proto,
    report::{Finding, RpcLatency, RunReport, ScenarioResult, Severity, SuiteResult},
    scrub::Scrubber,
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
    /// The seed: recorded in the report, the source of the run id in names, and of every
    /// property step's generated cases.
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
    /// `--mount-check`: whether node mounts are verified (where the node plugin's mount
    /// namespace can be found) or never.
    pub mount_check: MountCheck,
    /// `--allow-restart-cmd`: the shell command that restarts a node plugin (enables the
    /// `restart` opt-in).
    pub restart_cmd: Option<String>,
    /// Hears of scenarios starting and finishing (the console's progress display).
    pub progress: Option<Arc<dyn Progress>>,
    /// `--existing-volume` and the settings file's `existing-volumes`: volumes the run did
    /// not create. The `existing` suite stages and publishes them; no RPC that deletes,
    /// resizes, modifies or snapshots one is ever sent.
    pub existing_volumes: Vec<super::ExistingVolume>,
    /// `--existing-volume-writable`: the run may write to the existing volumes (without it,
    /// nothing is ever written to them, not even a write probe).
    pub existing_writable: bool,
}

/// Hears of scenarios as they start and finish, for a live display. Calls come from the
/// scenarios' tasks, concurrently and in the order things happen (not suite order); they must
/// not block.
pub trait Progress: Send + Sync {
    /// The run selected `total` scenarios (called once, before any starts).
    fn begin(&self, total: usize);
    /// A scenario started.
    fn started(&self, scenario_id: &str);
    /// A scenario finished, teardown included.
    fn finished(&self, result: &ScenarioResult);
}

/// One GiB.
pub const GIB: i64 = 1 << 30;

/// The default [`RunConfig::property_time`].
pub const DEFAULT_PROPERTY_TIME: Duration = Duration::from_secs(20);

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
            property_cases: 256,
            property_bounds: Bounds::default(),
            property_time: DEFAULT_PROPERTY_TIME,
            budgets: BudgetConfig::default(),
            replay_command: None,
            timeout: None,
            cleanup_timeout: DEFAULT_CLEANUP_TIMEOUT,
            reconnect: Reconnect::default(),
            scrubber: Scrubber::new(),
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            observer: None,
            check_path_cmd: None,
            mount_check: MountCheck::Auto,
            restart_cmd: None,
            progress: None,
            existing_volumes: Vec::new(),
            existing_writable: false,
        }
    }
}

impl RunConfig {
    /// The expansion target: `expand_size`, or volume_size + 1 GiB.
    pub fn expand_size(&self) -> i64 {
        self.expand_size.unwrap_or(self.volume_size.saturating_add(GIB))
    }

    /// The sizes scenario budgets depend on.
    pub(crate) fn sizing(&self) -> budget::Sizing {
        budget::Sizing {
            volume_size: self.volume_size,
            expand_size: self.expand_size(),
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
                .chain(scenario.parity().iter().filter_map(|&case| crate::parity::spec_text(case)))
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
            .field("reconnect", &self.reconnect)
            .field("scrubber", &self.scrubber)
            .field("tool_version", &self.tool_version)
            .field("observer", &self.observer.is_some())
            .field("check_path_cmd", &self.check_path_cmd)
            .field("mount_check", &self.mount_check)
            .field("restart_cmd", &self.restart_cmd)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// State shared by every scenario of a run.
pub(crate) struct Shared {
    pub(crate) plugin: Plugin,
    pub(crate) config: RunConfig,
    suites: Vec<super::Suite>,
    run_id: String,
    /// The run's path roots, or why they could not be made (every scenario then errors).
    paths: Result<RunPaths, PathError>,
    /// Where each node endpoint's paths and mounts are, found at the start (and again after
    /// a node plugin restart).
    inspectors: Mutex<Vec<Inspector>>,
    /// The scheduler keeping the run's budgets.
    pub(crate) budget: Arc<Budget>,
    stopping: AtomicBool,
    stop_reason: Mutex<Option<String>>,
    /// Endpoints that stopped answering, with why: nothing more is sent to them.
    dead: Mutex<HashMap<String, String>>,
    /// Held while an endpoint is being tried again, so that one scenario does it at a time.
    reconnecting: tokio::sync::Mutex<()>,
}

impl Shared {
    fn scrub(&self, text: &str) -> String {
        self.config.scrubber.scrub(text).into_owned()
    }

    /// Why nothing more is sent to `endpoint`, if so.
    fn gone(&self, endpoint: &str) -> Option<String> {
        self.dead.lock().unwrap_or_else(|p| p.into_inner()).get(endpoint).cloned()
    }

    /// The connection to `conn`'s endpoint was lost: Probe it at once, then with backoff
    /// ([`RunConfig::reconnect`]); an endpoint that never answers is given up for the run.
    async fn lost(&self, conn: &Connection) {
        let endpoint = conn.endpoint().to_string();
        let _one_at_a_time = self.reconnecting.lock().await;
        if self.gone(&endpoint).is_some() {
            return;
        }
        let policy = self.config.reconnect;
        let options = conn.options();
        let per_probe = options.rpc_timeout.min(options.connect_timeout);
        let started = Instant::now();
        let mut wait = policy.first_wait;
        for attempt in 0..=policy.attempts {
            if attempt > 0 {
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
            }
            if let Ok(true) = conn.probe(per_probe).await {
                if attempt > 0 {
                    tracing::warn!(%endpoint, attempt, "the plugin answers again");
                }
                return;
            }
            tracing::warn!(%endpoint, attempt, "the plugin does not answer");
        }
        let why = format!(
            "{endpoint} stopped answering earlier in the run ({} reconnect attempts over {} failed)",
            policy.attempts,
            crate::client::human_duration(started.elapsed())
        );
        tracing::error!("{why}; nothing more is sent to it");
        self.dead.lock().unwrap_or_else(|p| p.into_inner()).insert(endpoint, why);
    }

    fn stopped(&self) -> Option<String> {
        if self.stopping.load(Ordering::SeqCst) {
            Some(self.stop_reason.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or_default())
        } else {
            None
        }
    }

    fn stop(&self, reason: String) {
        self.stop_reason.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(reason);
        self.stopping.store(true, Ordering::SeqCst);
    }
}

/// Runs suites against a plugin and returns the report. Never panics on plugin behaviour; an
/// unreachable plugin turns the affected scenarios into errors.
pub async fn run(plugin: &Plugin, suites: &[super::Suite], config: &RunConfig) -> RunReport {
    run_until(plugin, suites, config, std::future::pending()).await
}

/// Like [`run`], but stops starting scenarios when `stop` completes (a signal, say) with the
/// reason it gives; scenarios in flight end after their current step and are torn down.
pub async fn run_until(
    plugin: &Plugin,
    suites: &[super::Suite],
    config: &RunConfig,
    stop: impl Future<Output = String>,
) -> RunReport {
    let started_at =
        time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
    let started = Instant::now();
    let run_id = builtin_vars::run_id(config.seed);
    config.scrubber.add(config.secrets.values().flat_map(|m| m.values()));
    let paths = RunPaths::open(&config.paths, &config.work_dir, &run_id).await;
    let mut inspectors = Vec::new();
    for (index, conn) in plugin.nodes.iter().enumerate() {
        inspectors.push(node_inspector(index, conn, config).await);
    }
    let default_capability = builtin_vars::wire_capability(config.access_type == AccessType::Block);
    let limits = budget::Limits::read(
        plugin.controller.as_ref(),
        &plugin.fingerprint,
        &config.budgets,
        config.jobs,
        &config.parameters,
        default_capability,
    )
    .await;
    let shared = Arc::new(Shared {
        plugin: plugin.clone(),
        config: config.clone(),
        suites: suites.to_vec(),
        paths,
        inspectors: Mutex::new(inspectors),
        run_id,
        budget: Budget::new(limits, config.budgets.contention_timeout),
        stopping: AtomicBool::new(false),
        stop_reason: Mutex::new(None),
        dead: Mutex::new(HashMap::new()),
        reconnecting: tokio::sync::Mutex::new(()),
    });

    let selected: Vec<(usize, usize)> = suites
        .iter()
        .enumerate()
        .flat_map(|(si, s)| s.scenarios.iter().enumerate().map(move |(ci, c)| (si, ci, c)))
        .filter(|(_, _, c)| config.selects(c))
        .map(|(si, ci, _)| (si, ci))
        .collect();
    let mut results: Vec<Option<ScenarioResult>> = vec![None; selected.len()];
    if let Some(progress) = &config.progress {
        progress.begin(selected.len());
    }

    let timeout = config.timeout;
    let deadline = async move {
        match timeout {
            Some(t) => {
                tokio::time::sleep(t).await;
                format!("the run timeout of {} was reached", crate::client::human_duration(t))
            }
            None => std::future::pending().await,
        }
    };
    let mut stop = std::pin::pin!(async move {
        tokio::select! {
            reason = stop => reason,
            reason = deadline => reason,
        }
    });
    let mut stop_fired = false;

    let mut tasks = tokio::task::JoinSet::new();
    let mut task_index: HashMap<tokio::task::Id, usize> = HashMap::new();
    let mut queue = start_order(&shared, &selected);
    loop {
        let ticket = tokio::select! {
            ticket = shared.budget.next(&mut queue) => ticket,
            reason = &mut stop, if !stop_fired => {
                stop_fired = true;
                shared.stop(reason);
                break;
            }
        };
        let Some(ticket) = ticket else { break };
        let index = ticket.index;
        let (si, ci) = selected[index];
        let shared = shared.clone();
        let handle = tasks.spawn(async move {
            let progress = shared.config.progress.clone();
            if let Some(p) = &progress {
                p.started(&shared.suites[si].scenarios[ci].id);
            }
            let result = run_scenario(&shared, si, ci, ticket).await;
            if let Some(p) = &progress {
                p.finished(&result);
            }
            (index, result)
        });
        task_index.insert(handle.id(), index);
    }
    // After a stop, the scenarios in flight get `cleanup_timeout` to finish and tear down.
    let cleanup_timeout = config.cleanup_timeout;
    let mut cleanup_deadline = std::pin::pin!(tokio::time::sleep(Duration::MAX));
    let mut deadline_armed = false;
    let mut abandoned: Vec<usize> = Vec::new();
    loop {
        if stop_fired && !deadline_armed {
            deadline_armed = true;
            cleanup_deadline.as_mut().reset(tokio::time::Instant::now() + cleanup_timeout);
        }
        let joined = tokio::select! {
            joined = tasks.join_next_with_id() => joined,
            reason = &mut stop, if !stop_fired => {
                stop_fired = true;
                shared.stop(reason);
                continue;
            }
            () = &mut cleanup_deadline, if deadline_armed && !tasks.is_empty() => {
                tracing::error!(
                    "teardown did not finish within the cleanup timeout of {}; abandoning {} scenario(s), what they created stays in the journal",
                    crate::client::human_duration(cleanup_timeout),
                    tasks.len()
                );
                tasks.abort_all();
                continue;
            }
        };
        match joined {
            None => break,
            Some(Ok((_, (index, result)))) => results[index] = Some(result),
            Some(Err(e)) if e.is_cancelled() => abandoned.extend(task_index.get(&e.id())),
            Some(Err(e)) => tracing::error!("a scenario task ended abnormally: {e}"),
        }
    }
    if let Ok(paths) = &shared.paths {
        paths.close().await;
    }

    let interrupted = shared.stopped();
    let mut suite_results: Vec<SuiteResult> = Vec::new();
    for (index, &(si, ci)) in selected.iter().enumerate() {
        let suite = &suites[si];
        let scenario = &suite.scenarios[ci];
        let result = results[index].take().unwrap_or_else(|| {
            let mut r = blank_result(scenario);
            match &interrupted {
                Some(reason) if abandoned.contains(&index) => r.findings.push(Finding::new(
                    Severity::Error,
                    "interrupted",
                    format!(
                        "{reason}; the scenario did not finish its teardown within the cleanup timeout of {}: \
                         what it created is left in the journal for `csi-conform cleanup`",
                        crate::client::human_duration(cleanup_timeout)
                    ),
                )),
                Some(reason) => {
                    r.outcome = Severity::Skip;
                    r.skip_reason = Some(format!("not run: {reason}"));
                }
                None => r.findings.push(Finding::new(
                    Severity::Error,
                    "internal",
                    "the scenario ended abnormally (a bug in csi-conform)",
                )),
            }
            r.settle();
            r
        });
        match suite_results.last_mut() {
            Some(last) if last.id == suite.id && last.source == suite.location.origin => last.scenarios.push(result),
            _ => suite_results.push(SuiteResult {
                id: suite.id.clone(),
                title: suite.title.clone(),
                source: suite.location.origin.clone(),
                scenarios: vec![result],
            }),
        }
    }

    let fp = &plugin.fingerprint;
    let mut endpoints: Vec<String> =
        plugin.controller.iter().chain(&plugin.nodes).map(|c| c.endpoint().to_string()).collect();
    endpoints.dedup();
    let mut seen = BTreeSet::new();
    endpoints.retain(|e| seen.insert(e.clone()));
    RunReport {
        tool_version: config.tool_version.clone(),
        plugin_name: fp.plugin.name.clone(),
        plugin_version: fp.plugin.vendor_version.clone(),
        endpoints,
        capabilities: fp.advertised().iter().map(ToString::to_string).collect(),
        seed: config.seed,
        strict: config.strict,
        started_at,
        duration: started.elapsed(),
        suites: suite_results,
        rpc_latency: latency(plugin),
        interrupted,
        mounts: shared.inspectors.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|i| i.site().clone()).collect(),
    }
}

/// Where node endpoint `index`'s paths and mounts are (see [`Inspector::for_node`]).
async fn node_inspector(index: usize, conn: &Connection, config: &RunConfig) -> Inspector {
    Inspector::for_node(index, conn.endpoint(), config.check_path_cmd.as_ref(), config.mount_check).await
}

fn latency(plugin: &Plugin) -> BTreeMap<String, RpcLatency> {
    let mut connections: Vec<&Connection> = Vec::new();
    for c in plugin.controller.iter().chain(&plugin.nodes) {
        if !connections.iter().any(|k| std::ptr::eq(k.stats(), c.stats())) {
            connections.push(c);
        }
    }
    let mut merged: BTreeMap<String, (u64, u64, Vec<Duration>)> = BTreeMap::new();
    for c in connections {
        for (rpc, s) in c.stats().snapshot() {
            let e = merged.entry(rpc).or_default();
            e.0 += s.calls;
            e.1 += s.errors;
            e.2.extend(s.durations);
        }
    }
    merged
        .into_iter()
        .map(|(rpc, (calls, errors, mut d))| {
            d.sort();
            let secs = |x: Option<&Duration>| x.map_or(0.0, Duration::as_secs_f64);
            let median = secs(d.get(d.len() / 2));
            (rpc, RpcLatency { calls, errors, min: secs(d.first()), median, max: secs(d.last()) })
        })
        .collect()
}

/// The report's view of the requirements a scenario names.
pub fn requirement_refs(ids: &[String]) -> Vec<crate::report::RequirementRef> {
    let inventory = crate::spec::builtin();
    ids.iter()
        .filter_map(|id| inventory.get(id))
        .map(|r| crate::report::RequirementRef {
            id: r.id.clone(),
            level: r.level.as_str().to_owned(),
            summary: r.summary.clone(),
            link: r.link().to_owned(),
        })
        .collect()
}

fn blank_result(scenario: &Scenario) -> ScenarioResult {
    ScenarioResult {
        id: scenario.id.clone(),
        title: scenario.title.clone(),
        requirements: requirement_refs(&scenario.spec),
        tags: scenario.tags.clone(),
        parity: scenario.parity.clone(),
        outcome: Severity::Pass,
        skip_reason: None,
        findings: Vec::new(),
        duration: Duration::ZERO,
        expectation: None,
    }
}

/// The selected scenarios in the order they start, each with what it holds (see
/// [`budget::demand`]). With one job: suite order. With more: scenarios that run alone last
/// (each waits for every other to finish, so they would drain the pool again and again),
/// the others longest first (by [`budget::cost`]), so that the run does not end on one long
/// scenario. A scenario the gate skips holds nothing. Results keep suite order regardless.
fn start_order(shared: &Shared, selected: &[(usize, usize)]) -> Queue {
    let config = &shared.config;
    let fp = &shared.plugin.fingerprint;
    let sizing = config.sizing();
    let scenario = |i: usize| &shared.suites[selected[i].0].scenarios[selected[i].1];
    let demands: Vec<budget::Demand> = (0..selected.len())
        .map(|i| if gate(shared, scenario(i)).is_some() { budget::Demand::default() } else { budget::demand(scenario(i), fp, &sizing) })
        .collect();
    let mut order: Vec<usize> = (0..selected.len()).collect();
    if config.jobs > 1 {
        let costs: Vec<u64> = (0..selected.len()).map(|i| budget::cost(scenario(i), fp, &sizing)).collect();
        order.sort_by_key(|&i| (demands[i].alone, std::cmp::Reverse(costs[i])));
    }
    Queue::new(shared.budget.limits(), order.into_iter().map(|i| (i, demands[i].clone())))
}

/// Why a scenario cannot run here, if it cannot.
fn gate(shared: &Shared, scenario: &Scenario) -> Option<String> {
    let plugin = &shared.plugin;
    let fp = &plugin.fingerprint;
    let mut needed: Vec<Capability> = scenario.implied.clone();
    needed.extend(scenario.requires.capabilities.iter().copied());
    let mut missing: Vec<String> = Vec::new();
    for c in needed {
        if !fp.supports(c) && !missing.contains(&c.to_string()) {
            missing.push(c.to_string());
        }
    }
    if !missing.is_empty() {
        return Some(format!("requires {}, which the plugin does not advertise", missing.join(" and ")));
    }
    let any = &scenario.requires.any;
    if !any.is_empty() && !any.iter().any(|c| fp.supports(*c)) {
        let names: Vec<String> = any.iter().map(ToString::to_string).collect();
        return Some(format!("requires one of {}, none of which the plugin advertises", names.join(", ")));
    }
    let needs_controller = scenario.steps.iter().any(|s| match &s.action {
        Action::Call(c) => !matches!(c.method.parent_service().name(), "Node" | "Identity"),
        // Named checks call ControllerPublishVolume / ControllerUnpublishVolume only when the
        // controller advertises PUBLISH_UNPUBLISH_VOLUME, so those two alone need no endpoint
        // (the existing-volume check on a node-only plugin).
        Action::Check(_) | Action::Property(_) | Action::Assert(_) => s
            .action
            .rpcs()
            .iter()
            .filter(|r| !matches!(r.as_str(), "ControllerPublishVolume" | "ControllerUnpublishVolume"))
            .filter_map(|r| proto::method(r))
            .any(|m| m.parent_service().name() == "Controller"),
    });
    if needs_controller && plugin.controller.is_none() {
        return Some("calls controller RPCs, and no controller endpoint was given".to_owned());
    }
    let max_node = scenario
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::Call(c) if c.method.parent_service().name() == "Node" => Some(c.node.unwrap_or(0)),
            Action::Call(c) if c.method.parent_service().name() == "Identity" => c.node,
            _ => None,
        })
        .max()
        .map_or(0, |n| n + 1);
    let nodes = scenario.requires.nodes.max(max_node);
    if nodes > plugin.nodes.len() {
        let plural = if nodes == 1 { "" } else { "s" };
        return Some(format!(
            "requires {nodes} node endpoint{plural}, and the run has {} (give more with --node-endpoint)",
            plugin.nodes.len()
        ));
    }
    for option in &scenario.requires.options {
        if !shared.config.options.contains(option) {
            let flag = OPTIONS.iter().find(|(o, _)| o == option).map_or(option.as_str(), |(_, f)| f);
            return Some(format!("requires the opt-in {flag}, which this run did not enable"));
        }
    }
    for key in &scenario.requires.secrets {
        if shared.config.secrets.get(key).is_none_or(BTreeMap::is_empty) {
            return Some(format!("requires secrets for {key} from the secrets file (--secrets), and the run has none"));
        }
    }
    let property = scenario.steps.iter().any(|s| matches!(&s.action, Action::Property(_)));
    if property && shared.config.property_cases == 0 {
        return Some("property checks are off (--property-cases 0)".to_owned());
    }
    let idempotent =
        scenario.steps.iter().any(|s| matches!(&s.action, Action::Call(c) if c.repeat == Repeat::Idempotency));
    if idempotent && shared.config.idempotency_count == 0 {
        return Some("idempotency checks are off (--idempotency-count 0)".to_owned());
    }
    None
}

async fn run_scenario(shared: &Arc<Shared>, si: usize, ci: usize, ticket: Ticket) -> ScenarioResult {
    let scenario = &shared.suites[si].scenarios[ci];
    let index = ticket.index;
    let started = Instant::now();
    let mut result = blank_result(scenario);
    if let Some(reason) = gate(shared, scenario).or(ticket.too_big) {
        result.outcome = Severity::Skip;
        result.skip_reason = Some(reason);
        return result;
    }
    if let Some(reason) = shared.stopped() {
        result.outcome = Severity::Skip;
        result.skip_reason = Some(format!("not run: {reason}"));
        return result;
    }
    let made = match &shared.paths {
        Ok(paths) => paths.scenario(index, &scenario.id).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let paths = match made {
        Ok(paths) => paths,
        Err(e) => {
            result.findings.push(Finding::new(Severity::Error, "setup", shared.scrub(&e)));
            result.settle();
            result.duration = started.elapsed();
            return result;
        }
    };
    let mut ctx = ScenarioCtx::new(shared.clone(), scenario, paths, ticket.lease.id());
    let flow = ctx.run_steps(&scenario.steps).await;
    ctx.teardown().await;
    if let Ok(run_paths) = &shared.paths {
        run_paths.release(&ctx.paths, &ctx.own_paths).await;
    }
    result.findings = ctx.findings.iter().map(|f| scrub_finding(shared, f)).collect();
    if let Flow::Skip(reason) = flow {
        result.outcome = Severity::Skip;
        result.skip_reason = Some(shared.scrub(&reason));
    }
    result.settle();
    result.duration = started.elapsed();
    tracing::info!(scenario = %result.id, outcome = %result.outcome, "scenario done");
    result
}

fn scrub_finding(shared: &Shared, f: &Finding) -> Finding {
    let s = |t: &Option<String>| t.as_deref().map(|t| shared.scrub(t));
    Finding {
        severity: f.severity,
        kind: f.kind.clone(),
        message: shared.scrub(&f.message),
        step: f.step,
        rpc: f.rpc.clone(),
        request: s(&f.request),
        expected: s(&f.expected),
        got: s(&f.got),
        plugin_message: s(&f.plugin_message),
    }
}

/// How a scenario's steps ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Keep going.
    Continue,
    /// A failure (or error) ends the scenario.
    Stop,
    /// The scenario turns into a skip, with this reason.
    Skip(String),
}

/// The plugin's answer to one call.
pub(crate) type Answer = Result<Response, RpcError>;

/// One running scenario: its variables, resources, findings and paths. Named checks work
/// through it too (calls made here are tracked and torn down like any step's).
pub struct ScenarioCtx {
    pub(crate) shared: Arc<Shared>,
    pub(crate) vars: Vars,
    pub(crate) tracker: Tracker,
    pub(crate) findings: Vec<Finding>,
    pub(crate) paths: ScenarioPaths,
    /// Further paths of the scenario's directory that checks made (or that plugins make in
    /// them), removed after teardown like the built-in ones, in this order.
    own_paths: Vec<PathBuf>,
    pub(crate) name: String,
    scenario_id: String,
    /// The step being run (for findings).
    pub(crate) step: Option<usize>,
    step_name: Option<String>,
    /// The budget lease this context works under (its scenario's, or a property case's).
    pub(crate) holder: u64,
    /// The last call retried for contention that still failed: its RPC and the note its
    /// findings carry.
    contention: Option<(String, String)>,
    /// The call step being sent expects a contention code itself: it is not retried.
    contention_expected: bool,
}

impl ScenarioCtx {
    fn new(shared: Arc<Shared>, scenario: &Scenario, paths: ScenarioPaths, holder: u64) -> Self {
        let name = builtin_vars::scenario_name(&shared.run_id, &scenario.id);
        let vars = builtin_vars::values(&shared.config, &shared.plugin.fingerprint, &name, &paths);
        let tracker = Tracker::new(&scenario.id, shared.config.observer.clone());
        ScenarioCtx {
            shared,
            vars,
            tracker,
            findings: Vec::new(),
            paths,
            own_paths: Vec::new(),
            name,
            scenario_id: scenario.id.clone(),
            step: None,
            step_name: None,
            holder,
            contention: None,
            contention_expected: false,
        }
    }

    /// A context for work that runs concurrently with the scenario's own (a property's
    /// cases): the same connections, variables and step, its own tracker numbering from the
    /// scenario's sequence. [`ScenarioCtx::absorb`] takes back what it recorded.
    pub(crate) fn fork(&self) -> ScenarioCtx {
        ScenarioCtx {
            shared: self.shared.clone(),
            vars: self.vars.clone(),
            tracker: self.tracker.fork(),
            findings: Vec::new(),
            paths: self.paths.clone(),
            own_paths: Vec::new(),
            name: self.name.clone(),
            scenario_id: self.scenario_id.clone(),
            step: self.step,
            step_name: self.step_name.clone(),
            holder: self.holder,
            contention: None,
            contention_expected: false,
        }
    }

    /// Takes back what a [`fork`](ScenarioCtx::fork) recorded: the resources it still holds
    /// (torn down with the scenario), its findings and its paths.
    pub(crate) fn absorb(&mut self, fork: ScenarioCtx) {
        self.tracker.absorb(fork.tracker);
        self.findings.extend(fork.findings);
        self.own_paths.extend(fork.own_paths);
    }

    /// The run's configuration.
    pub fn config(&self) -> &RunConfig {
        &self.shared.config
    }

    /// The plugin's fingerprint.
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.shared.plugin.fingerprint
    }

    /// The node connections.
    pub fn node_connections(&self) -> &[Connection] {
        &self.shared.plugin.nodes
    }

    /// The scenario's unique name (the `name` variable).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How the paths of node endpoint `node` can be inspected (`None`: no such endpoint).
    pub fn inspector(&self, node: usize) -> Option<Inspector> {
        self.shared.inspectors.lock().unwrap_or_else(|p| p.into_inner()).get(node).cloned()
    }

    /// Finds again where node endpoint `node`'s paths are (a restarted node plugin is a new
    /// process, perhaps in a new mount namespace), for the rest of the run; `None`: no such
    /// endpoint.
    pub async fn identify_node(&self, node: usize) -> Option<Inspector> {
        let conn = self.shared.plugin.nodes.get(node)?;
        let found = node_inspector(node, conn, &self.shared.config).await;
        if let Some(slot) = self.shared.inspectors.lock().unwrap_or_else(|p| p.into_inner()).get_mut(node) {
            *slot = found.clone();
        }
        Some(found)
    }

    /// Paths inside the scenario's directory to remove after teardown (in this order, before
    /// the built-in ones), with the same care: only empty directories and plain files.
    pub fn own_paths(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.own_paths.extend(paths);
    }

    /// The scenario's full id (`extras.validate.confirms-request`).
    pub fn scenario_id(&self) -> &str {
        &self.scenario_id
    }

    /// Records a finding at the current step.
    pub fn push(&mut self, mut finding: Finding) {
        finding.step = finding.step.or(self.step);
        if let Some((rpc, note)) = &self.contention
            && finding.rpc.as_deref() == Some(rpc)
        {
            finding.message = format!("{} ({note})", finding.message);
        }
        if let Some(name) = &self.step_name {
            finding.message = format!("{name}: {}", finding.message);
        }
        self.findings.push(finding);
    }

    /// Records a failure at the current step.
    pub fn fail(&mut self, kind: &str, message: impl Into<String>) {
        self.push(Finding::new(Severity::Fail, kind, message));
    }

    async fn run_steps(&mut self, steps: &[Step]) -> Flow {
        for (i, step) in steps.iter().enumerate() {
            if let Some(reason) = self.shared.stopped() {
                self.push(Finding::new(Severity::Error, "interrupted", format!("stopped before step {i}: {reason}")));
                return Flow::Stop;
            }
            if !step.when.iter().all(|c| self.shared.plugin.fingerprint.supports(c.capability) != c.negated) {
                continue;
            }
            self.step = Some(i);
            self.step_name = step.name.clone();
            let flow = match &step.action {
                Action::Call(call) => self.call_step(call).await,
                Action::Assert(a) => self.assert_step(a),
                Action::Check(c) => self.check_step(c).await,
                Action::Property(p) => self.property_step(p, i).await,
            };
            self.step_name = None;
            if flow != Flow::Continue {
                return flow;
            }
        }
        self.step = None;
        Flow::Continue
    }

    fn assert_step(&mut self, step: &AssertStep) -> Flow {
        let root = Val::Null;
        match assert::check_all(&step.assertions, &root, &self.vars) {
            Ok(()) => Flow::Continue,
            Err(e) => self.assertion_failed(e, step.otherwise, None, None, None),
        }
    }

    /// Records a failed assertion; `expect` (of a call step) supplies the kind and reason
    /// of a miss.
    fn assertion_failed(
        &mut self,
        e: AssertError,
        otherwise: Severity,
        rpc: Option<&str>,
        request: Option<&DynamicMessage>,
        expect: Option<&Expect>,
    ) -> Flow {
        let (severity, kind) = match &e {
            AssertError::Failed(_) => (otherwise, expect.map_or("assertion", |x| x.kind_or("assertion"))),
            AssertError::Invalid(_) => (Severity::Error, "suite"),
        };
        let f = match (rpc, request) {
            (Some(rpc), Some(request)) => {
                let message = format!("{rpc} response: {}", e.message());
                let message = match (&e, expect) {
                    (AssertError::Failed(_), Some(x)) => x.explain(message),
                    _ => message,
                };
                call_finding(severity, kind, message, rpc, request)
            }
            _ => Finding::new(severity, kind, e.message()),
        };
        self.push(f);
        flow_after(severity)
    }

    /// The arguments of a check or property step (`what`: `check path-state`), variables
    /// substituted; a variable that cannot be is an error that ends the scenario.
    pub(crate) fn eval_args(&mut self, what: &str, args: &[(String, crate::yaml::Node)]) -> Result<CheckArgs, Flow> {
        let mut out = BTreeMap::new();
        for (name, node) in args {
            match self.vars.eval(node) {
                Ok(v) => {
                    out.insert(name.clone(), v);
                }
                Err((_, e)) => {
                    self.push(Finding::new(Severity::Error, "suite", format!("argument `{name}` of {what}: {e}")));
                    return Err(Flow::Stop);
                }
            }
        }
        Ok(out)
    }

    async fn check_step(&mut self, step: &CheckStep) -> Flow {
        let args = match self.eval_args(&format!("check {}", step.check.name), &step.args) {
            Ok(args) => args,
            Err(flow) => return flow,
        };
        let before = self.findings.iter().filter(|f| f.severity >= Severity::Fail).count();
        match (step.check.run)(self, args).await {
            CheckOutcome::Skip(reason) => Flow::Skip(reason),
            CheckOutcome::Stop => Flow::Stop,
            CheckOutcome::Done(outputs) => {
                let failed = self.findings.iter().filter(|f| f.severity >= Severity::Fail).count() > before;
                let root = Val::Map(outputs);
                if self.save(&step.save, &root).is_err() || failed {
                    return Flow::Stop;
                }
                Flow::Continue
            }
        }
    }

    fn save(&mut self, saves: &[Save], root: &Val) -> Result<(), ()> {
        for save in saves {
            match root.get(save.path.segs()) {
                Ok(Val::Null) => {
                    self.push(Finding::new(
                        Severity::Fail,
                        "save",
                        format!("nothing to save as {}: {} is absent", save.var, save.path),
                    ));
                    return Err(());
                }
                Ok(v) => self.vars.insert(save.var.clone(), v),
                Err(e) => {
                    self.push(Finding::new(Severity::Error, "suite", format!("cannot save {}: {e}", save.var)));
                    return Err(());
                }
            }
        }
        Ok(())
    }

    async fn call_step(&mut self, call: &Call) -> Flow {
        let request = match build_request(&call.method, &call.request, &self.vars) {
            Ok(r) => r,
            Err(e) => {
                let mut f = Finding::new(
                    Severity::Error,
                    "request",
                    format!("cannot build the {} request: {e}", call.method.name()),
                );
                f.rpc = Some(call.method.name().to_owned());
                self.push(f);
                return Flow::Stop;
            }
        };
        let times = match call.repeat {
            Repeat::Times(n) => n.max(1),
            Repeat::Idempotency => self.shared.config.idempotency_count.max(1),
        };
        let poll = call.poll.as_ref();
        let deadline = poll.map(|p| Instant::now() + p.timeout);
        let mut first: Option<Val> = None;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            if attempt > 1
                && let Some(reason) = self.shared.stopped()
            {
                let rpc = call.method.name();
                let message = format!("stopped before call {attempt} of {rpc}: {reason}");
                self.push(call_finding(Severity::Error, "interrupted", message, rpc, &request));
                return Flow::Stop;
            }
            self.contention_expected =
                [Code::ResourceExhausted, Code::Aborted].iter().any(|c| call.expect.codes.names(*c));
            let (sent, answer) = self.send(&call.method, request.clone(), call.node, &call.secrets, true).await;
            self.contention_expected = false;
            let root = match self.judge(call, &sent, answer) {
                Judged::Response(r) => r.to_val(),
                Judged::Accepted if attempt >= times => return Flow::Continue,
                Judged::Accepted => continue,
                Judged::Flow(flow) => return flow,
            };
            if let (Some(p), Some(deadline)) = (poll, deadline) {
                match self.poll_condition(call, p, deadline, &root, &sent) {
                    Some(Flow::Continue) => return self.finish_call(call, &root),
                    Some(flow) => return flow,
                    None => {
                        tokio::time::sleep(p.interval).await;
                        continue;
                    }
                }
            }
            match &first {
                None => first = Some(root),
                Some(first_root) if call.repeat_compare => {
                    if let Some((path, a, b)) = assert::difference(first_root, &root) {
                        let at = if path.is_empty() { String::new() } else { format!(" at {path}") };
                        let rpc = call.method.name();
                        let message = format!(
                            "{rpc} call {attempt} of {times} answered differently from the first{at}: {b} instead of {a}"
                        );
                        let mut f = call_finding(call.expect.otherwise, "not-idempotent", message, rpc, &sent);
                        f.expected = Some(a.to_string());
                        f.got = Some(b.to_string());
                        self.push(f);
                        if flow_after(call.expect.otherwise) == Flow::Stop {
                            return Flow::Stop;
                        }
                    }
                }
                Some(_) => {}
            }
            if attempt >= times {
                let saved = first.take().unwrap_or(Val::Null);
                return self.finish_call(call, &saved);
            }
        }
    }

    /// Checks a poll's condition: `Some(Continue)` when it holds, `Some(other)` when the
    /// scenario must stop (timeout, bad assertion), `None` to poll again.
    fn poll_condition(
        &mut self,
        call: &Call,
        poll: &Poll,
        deadline: Instant,
        root: &Val,
        sent: &DynamicMessage,
    ) -> Option<Flow> {
        match assert::check_all(&poll.until, root, &self.vars) {
            Ok(()) => Some(Flow::Continue),
            Err(e @ AssertError::Invalid(_)) => {
                Some(self.assertion_failed(e, Severity::Error, Some(call.method.name()), Some(sent), None))
            }
            Err(AssertError::Failed(e)) if Instant::now() + poll.interval > deadline => {
                let rpc = call.method.name();
                let within = crate::client::human_duration(poll.timeout);
                let message = format!("{rpc} never met the poll condition within {within}: {e}");
                self.push(call_finding(call.expect.otherwise, "poll-timeout", message, rpc, sent));
                Some(flow_after(call.expect.otherwise))
            }
            Err(AssertError::Failed(_)) => None,
        }
    }

    fn finish_call(&mut self, call: &Call, root: &Val) -> Flow {
        match self.save(&call.save, root) {
            Ok(()) => Flow::Continue,
            Err(()) => Flow::Stop,
        }
    }

    /// Judges an answer against the step's expectation.
    fn judge(&mut self, call: &Call, sent: &DynamicMessage, answer: Answer) -> Judged {
        let rpc = call.method.name();
        let code = match &answer {
            Ok(_) => Code::Ok,
            Err(e) => e.code,
        };
        if let Err(e) = &answer {
            if e.is_unreachable() {
                self.push(unreachable_finding(e, sent));
                return Judged::Flow(Flow::Stop);
            }
            if e.origin == ErrorOrigin::Decode {
                let message = format!(
                    "{rpc} answered with a message that could not be decoded (malformed, or over --max-message-size): {}",
                    e.message
                );
                self.push(rpc_error_finding(e, sent, Severity::Fail, "bad-response", message, None));
                return Judged::Flow(Flow::Stop);
            }
            if e.origin == ErrorOrigin::Deadline {
                let waited = crate::client::human_duration(e.elapsed);
                let message = format!("{rpc} did not answer within {waited} (--rpc-timeout); the plugin may be hung");
                self.push(rpc_error_finding(e, sent, Severity::Fail, "timeout", message, None));
                return Judged::Flow(Flow::Stop);
            }
        }
        if let Ok(response) = &answer {
            let mut worst = Severity::Pass;
            for problem in response.messages().iter().flat_map(proto::impossible_values) {
                // A size below zero is nonsense; an unknown enum number may come from a newer
                // spec version, which a CO must tolerate.
                let severity = match problem.kind {
                    proto::Impossible::Negative(_) => Severity::Fail,
                    proto::Impossible::UndefinedEnum { .. } => Severity::Warn,
                };
                worst = worst.max(severity);
                let message = format!("{rpc} answered {problem}");
                self.push(call_finding(severity, "impossible-value", message, rpc, sent));
            }
            if worst >= Severity::Fail {
                return Judged::Flow(Flow::Stop);
            }
        }
        if !call.expect.codes.accepts(code) {
            if let Some(skip) = call.skip_on.as_ref().filter(|s| s.codes.contains(&code)) {
                let why = skip.reason.clone().unwrap_or_else(|| "the plugin cannot do this".to_owned());
                let message = answer.as_ref().err().map(|e| e.message.clone()).unwrap_or_default();
                let detail = if message.is_empty() { String::new() } else { format!(": {message}") };
                return Judged::Flow(Flow::Skip(format!(
                    "{why} ({rpc} answered {}{detail})",
                    crate::client::code_name(code)
                )));
            }
            if !call.expect.codes.names(code)
                && let Some(reason) = self.advertised_but_unimplemented(rpc, code)
            {
                return Judged::Flow(Flow::Skip(reason));
            }
            let expected = call.expect.codes.to_string();
            let mut message = format!("{rpc} answered {}, expected {expected}", crate::client::code_name(code));
            if let Ok(response) = &answer {
                message.push_str(&ok_summary(response));
            }
            let message = call.expect.explain(message);
            let kind = call.expect.kind_or("unexpected-code");
            let f = match &answer {
                Err(e) => rpc_error_finding(e, sent, call.expect.otherwise, kind, message, Some(expected)),
                Ok(_) => {
                    let mut f = call_finding(call.expect.otherwise, kind, message, rpc, sent);
                    (f.expected, f.got) = (Some(expected), Some("OK".to_owned()));
                    f
                }
            };
            self.push(f);
            return Judged::Flow(flow_after(call.expect.otherwise));
        }
        let Ok(response) = answer else {
            return Judged::Accepted;
        };
        let root = response.to_val();
        match assert::check_all(&call.expect.fields, &root, &self.vars) {
            Ok(()) => Judged::Response(response),
            Err(e) => {
                let warn = matches!(e, AssertError::Failed(_)) && call.expect.otherwise == Severity::Warn;
                let flow = self.assertion_failed(e, call.expect.otherwise, Some(rpc), Some(sent), Some(&call.expect));
                if warn { Judged::Response(response) } else { Judged::Flow(flow) }
            }
        }
    }

    /// Sends one RPC: picks the connection, fills secrets, records what it creates and
    /// releases (when `track`). Returns the request as sent and the answer.
    pub(crate) async fn send(
        &mut self,
        method: &MethodDescriptor,
        mut request: DynamicMessage,
        node: Option<usize>,
        secrets: &SecretsMode,
        track: bool,
    ) -> (DynamicMessage, Answer) {
        let key = self.apply_secrets(&mut request, method.name(), secrets);
        let node_index = node.unwrap_or(0);
        let conn = match self.connection(method, node) {
            Ok(c) => c,
            Err(e) => return (request, Err(e)),
        };
        let endpoint = conn.endpoint().to_string();
        // A call that is not sent: the harness's own error, never the plugin's answer.
        let not_sent = |code: Code, message: String| RpcError {
            rpc: method.name().to_owned(),
            code,
            message,
            elapsed: Duration::ZERO,
            origin: ErrorOrigin::Transport,
        };
        if let Some(why) = self.shared.gone(&endpoint) {
            return (request, Err(not_sent(Code::Unavailable, why)));
        }
        if let Some(why) = super::existing::refusal(method.name(), &request, &self.shared.config.existing_volumes) {
            self.push(Finding::new(Severity::Error, "protected-volume", why.clone()));
            return (request, Err(not_sent(Code::Aborted, why)));
        }
        let scrubber = &self.shared.config.scrubber;
        scrubber.add(proto::sensitive_values(&request));
        tracing::debug!(rpc = method.name(), request = %self.shared.scrub(&proto::to_redacted_json(&request)), "call");
        let sending = if track { self.tracker.sending(method.name(), &request, node_index, key.as_deref()) } else { None };
        // Contention while this run holds other resources on the plugin is retried after a
        // release (bounded by --contention-timeout), not judged.
        let holder = if self.contention_expected { None } else { Some(self.holder) };
        let (answer, retried) = self
            .shared
            .budget
            .retry_contention(holder, || async {
                if method.is_server_streaming() {
                    conn.call_dynamic_streaming(method, request.clone()).await.map(Response::Stream)
                } else {
                    conn.call_dynamic(method, request.clone()).await.map(Response::Unary)
                }
            })
            .await;
        self.contention = match retried {
            Some(r @ Retried { code: Some(_), .. }) => Some((method.name().to_owned(), r.note())),
            _ => None,
        };
        match &answer {
            Ok(response) => response.messages().iter().for_each(|m| scrubber.add(proto::sensitive_values(m))),
            Err(e) if e.is_unreachable() => self.shared.lost(&conn).await,
            Err(_) => {}
        }
        if track {
            let outcome = match &answer {
                Ok(Response::Unary(m)) => Some(Ok(m)),
                Ok(Response::Stream(_)) => None,
                Err(e) => Some(Err(e.code)),
            };
            if let Some(outcome) = outcome {
                self.tracker.observe_call(sending.as_ref(), method.name(), &request, outcome, node_index, key.as_deref());
            }
            // Only an answer from the plugin settles the call: after a timeout, a lost
            // connection or an undecodable answer, it may have made something.
            let heard = answer.as_ref().err().is_none_or(|e| e.origin == ErrorOrigin::Plugin);
            self.tracker.answered(sending, heard);
        }
        (request, answer)
    }

    /// Sends a unary RPC by name with `secrets: auto`, tracked: the way named checks call.
    pub async fn call(
        &mut self,
        rpc: &str,
        request: DynamicMessage,
        node: Option<usize>,
    ) -> Result<DynamicMessage, RpcError> {
        let Some(method) = proto::method(rpc) else {
            return Err(RpcError {
                rpc: rpc.to_owned(),
                code: Code::Unimplemented,
                message: "not a CSI RPC".into(),
                elapsed: Duration::ZERO,
                origin: ErrorOrigin::Plugin,
            });
        };
        match self.send(&method, request, node, &SecretsMode::Auto, true).await.1 {
            Ok(Response::Unary(m)) => Ok(m),
            Ok(Response::Stream(mut messages)) => {
                Ok(messages.pop().unwrap_or_else(|| DynamicMessage::new(method.output())))
            }
            Err(e) => Err(e),
        }
    }

    /// Why the scenario cannot go on when `rpc` answered `code`: UNIMPLEMENTED from an RPC
    /// whose capability the plugin advertises. The scenario is then a skip saying so (the
    /// capability-honesty scenarios are where that is a failure, once, naming the
    /// capability), not one more failure about the same missing RPC.
    pub(crate) fn advertised_but_unimplemented(&self, rpc: &str, code: Code) -> Option<String> {
        if code != Code::Unimplemented {
            return None;
        }
        let capability = Capability::serving(rpc)?;
        self.fingerprint().supports(capability).then(|| {
            format!(
                "{rpc} answered UNIMPLEMENTED although the plugin advertises {capability} (the `capabilities` suite reports this)"
            )
        })
    }

    /// Records a failed call made by a check; returns the flow it implies.
    pub fn call_failed(&mut self, error: &RpcError, request: &DynamicMessage, expected: &str) -> CheckOutcome {
        if let Some(reason) = self.advertised_but_unimplemented(&error.rpc, error.code) {
            return CheckOutcome::Skip(reason);
        }
        let f = if error.is_unreachable() {
            unreachable_finding(error, request)
        } else {
            let message = format!("{} answered {}, expected {expected}", error.rpc, error.code_name());
            rpc_error_finding(error, request, Severity::Fail, "unexpected-code", message, Some(expected.to_owned()))
        };
        self.push(f);
        CheckOutcome::Stop
    }

    fn connection(&self, method: &MethodDescriptor, node: Option<usize>) -> Result<Connection, RpcError> {
        let plugin = &self.shared.plugin;
        let service = method.parent_service().name().to_owned();
        let found = match service.as_str() {
            "Node" => plugin.nodes.get(node.unwrap_or(0)),
            "Identity" => match node {
                Some(n) => plugin.nodes.get(n),
                None => plugin.controller.as_ref().or(plugin.nodes.first()),
            },
            _ => plugin.controller.as_ref(),
        };
        found.cloned().ok_or_else(|| RpcError {
            rpc: method.name().to_owned(),
            code: Code::Unavailable,
            message: format!("no endpoint serves the {service} service in this run"),
            elapsed: Duration::ZERO,
            origin: ErrorOrigin::Transport,
        })
    }

    /// Fills the request's `secrets`; returns the key used (a name, never values).
    fn apply_secrets(&self, request: &mut DynamicMessage, rpc: &str, mode: &SecretsMode) -> Option<String> {
        let field = request.descriptor().get_field_by_name("secrets")?;
        let key = match mode {
            SecretsMode::None => {
                request.clear_field(&field);
                return None;
            }
            SecretsMode::Auto if request.has_field(&field) => return Some("(request)".to_owned()),
            SecretsMode::Auto => secret_key(rpc),
            SecretsMode::Key(k) => k.clone(),
        };
        let values = self.shared.config.secrets.get(&key)?;
        super::resources::set_secrets(request, values);
        Some(key)
    }

    async fn teardown(&mut self) {
        self.step = None;
        self.step_name = None;
        for tracked in self.tracker.teardown_order() {
            let (rpc, request) = tracked.resource.teardown();
            let Some(method) = proto::method(rpc) else { continue };
            let mode = if tracked.secrets_key.is_some() { SecretsMode::Auto } else { SecretsMode::None };
            let (sent, answer) = self.send(&method, request, tracked.resource.node(), &mode, false).await;
            match answer {
                Ok(_) => self.tracker.release(tracked.seq),
                Err(e) if e.code == Code::NotFound => self.tracker.release(tracked.seq),
                Err(e) => {
                    let severity = if e.is_unreachable() { Severity::Error } else { Severity::Fail };
                    let why = format!("{rpc} answered {}: {}", e.code_name(), e.message);
                    let message =
                        format!("teardown could not remove {}: {why}; it is left on the plugin", tracked.resource);
                    self.push(rpc_error_finding(&e, &sent, severity, "teardown", message, None));
                    self.tracker.abandon(tracked.seq, &why);
                }
            }
        }
    }
}

/// A finding about one call: its RPC and one-line redacted request filled in.
pub fn call_finding(
    severity: Severity,
    kind: &str,
    message: impl Into<String>,
    rpc: &str,
    request: &DynamicMessage,
) -> Finding {
    let mut f = Finding::new(severity, kind, message);
    f.rpc = Some(rpc.to_owned());
    f.request = Some(proto::to_redacted_json(request));
    f
}

/// What an OK answer held, for a finding that expected an error: `; it returned ...` (see
/// [`proto::summary`]: redacted, bounded; the finding is scrubbed as well).
pub(crate) fn ok_summary(response: &Response) -> String {
    match response.messages() {
        [one] => format!("; it returned {}", proto::summary(one, proto::SUMMARY_MAX)),
        [] => "; it returned an empty stream".to_owned(),
        [first, ..] => format!(
            "; it returned {} messages, the first {}",
            response.messages().len(),
            proto::summary(first, proto::SUMMARY_MAX)
        ),
    }
}

/// A finding about a call that failed: also the code it got and the plugin's message.
pub(crate) fn rpc_error_finding(
    error: &RpcError,
    request: &DynamicMessage,
    severity: Severity,
    kind: &str,
    message: String,
    expected: Option<String>,
) -> Finding {
    let mut f = call_finding(severity, kind, message, &error.rpc, request);
    f.expected = expected;
    f.got = Some(error.code_name().to_owned());
    f.plugin_message = Some(error.message.clone()).filter(|m| !m.is_empty());
    f
}

pub(crate) fn unreachable_finding(error: &RpcError, request: &DynamicMessage) -> Finding {
    let message = format!("plugin unreachable: {}", error.message);
    rpc_error_finding(error, request, Severity::Error, "unreachable", message, None)
}

/// How a scenario goes on after a miss of this severity: a warning lets it continue.
fn flow_after(severity: Severity) -> Flow {
    if severity == Severity::Warn { Flow::Continue } else { Flow::Stop }
}

/// What `judge` made of an answer.
enum Judged {
    /// An OK response that met the expectation.
    Response(Response),
    /// An expected error code.
    Accepted,
    /// The scenario goes this way.
    Flow(Flow),
}

/// A plugin's answer: one message, or every message of a stream.
#[derive(Debug, Clone)]
pub enum Response {
    /// A unary RPC's response.
    Unary(DynamicMessage),
    /// A server-streaming RPC's messages.
    Stream(Vec<DynamicMessage>),
}

impl Response {
    /// Every message of the answer (one for a unary RPC).
    pub fn messages(&self) -> &[DynamicMessage] {
        match self {
            Response::Unary(m) => std::slice::from_ref(m),
            Response::Stream(messages) => messages,
        }
    }

    /// The response as a value; a stream is `{messages: [...]}`.
    pub fn to_val(&self) -> Val {
        match self {
            Response::Unary(m) => Val::from_message(m),
            Response::Stream(messages) => Val::Map(BTreeMap::from([(
                "messages".to_owned(),
                Val::List(messages.iter().map(Val::from_message).collect()),
            )])),
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
