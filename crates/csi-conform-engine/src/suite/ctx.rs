//! The context named checks and steps work through: [`ScenarioCtx`] (variables, tracked
//! resources, findings, paths, sending calls, teardown), the run-wide [`Shared`] state, how
//! a scenario goes on ([`Flow`], [`CheckOutcome`]); re-exports the plugin's [`Response`] and
//! the finding helpers of [`super::answer`]. Knows nothing of the runner or of step execution.
//! Sending a call is its own folder: `ctx/send.rs` (the stages), `ctx/record.rs`,
//! `ctx/settle.rs`.

mod access;
mod record;
mod send;
mod settle;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use prost_reflect::{DynamicMessage, MethodDescriptor, ReflectMessage};
use tonic::Code;

use super::{
    budget::Budget,
    catalog::CheckArgs,
    builtin_vars,
    deleted,
    inspect::Inspector,
    model::*,
    node_of::NodeCalls,
    paths::{PathError, RunPaths, ScenarioPaths},
    resources::Tracker,
    settings::{DeleteLookups, NodeAccess, Plugin, Requests, Restarts, RunConfig, RunFacts, Safety, StressSize, Waits},
    paths::PathSettings,
    vars::{Val, Vars},
    verifier::Verifier,
};
pub use super::answer::{Response, call_finding};
pub(crate) use super::answer::{ok_summary, rpc_error_finding, unreachable_finding};
use crate::{
    client::{Connection, ErrorOrigin, RpcError},
    rules::RuleLog,
    fingerprint::{Capability, Fingerprint},
    orchestrator::{CallPattern, Profile},
    proto,
    report::{Finding, Severity},
    version::Evidence,
};

/// State shared by every scenario of a run.
pub(crate) struct Shared {
    pub(crate) plugin: Plugin,
    pub(crate) config: RunConfig,
    /// What the look-ups after a delete read of the settings (the verifier's and the
    /// scenarios' alike).
    pub(crate) lookups: DeleteLookups,
    /// How node endpoints' paths and mounts are reached.
    pub(crate) node_access: NodeAccess,
    /// What requests carry.
    pub(crate) requests: Requests,
    /// What keeps the run off what is not its own, and secrets out of the report.
    pub(crate) safety: Safety,
    /// The commands that restart the plugin.
    pub(crate) restarts: Restarts,
    pub(crate) suites: Vec<Suite>,
    pub(crate) run_id: String,
    /// The run's path roots, or why they could not be made (every scenario then errors).
    pub(crate) paths: Result<RunPaths, PathError>,
    /// Where each node endpoint's paths and mounts are, found at the start (and again after
    /// a node plugin restart).
    pub(crate) inspectors: Mutex<Vec<Inspector>>,
    /// The scheduler keeping the run's budgets.
    pub(crate) budget: Arc<Budget>,
    pub(crate) stopping: AtomicBool,
    pub(crate) stop_reason: Mutex<Option<String>>,
    /// Endpoints that stopped answering, with why: nothing more is sent to them.
    pub(crate) dead: Mutex<HashMap<String, String>>,
    /// Held while an endpoint is being tried again, so that one scenario does it at a time.
    pub(crate) reconnecting: tokio::sync::Mutex<()>,
    /// What the run learned of the plugin before its scenarios (set once, by the probe).
    pub(crate) facts: std::sync::OnceLock<RunFacts>,
    /// What the plugin's answers showed of the spec version it speaks, with the scenarios
    /// whose calls showed it (the report states it all at the end).
    pub(crate) versions: Mutex<BTreeMap<Evidence, BTreeSet<String>>>,
    /// Held across each ControllerPublishVolume of a run with `--orchestrator` (see `send`).
    pub(crate) controller_publish: tokio::sync::Mutex<()>,
    /// The run's calls in flight per volume: an ABORTED answer while another was in flight
    /// on that volume is the run's own concurrency (see `send`).
    pub(crate) in_flight: super::inflight::InFlight,
    /// Decides, for the whole run, whether what teardowns and property cases deleted is gone.
    pub(crate) verifier: Arc<Verifier>,
}

/// The facts of a run that learned nothing.
static NO_FACTS: RunFacts =
    RunFacts { small: None, gone_volume_id: None, gone_snapshot_id: None, gone_group_snapshot_id: None };

impl Shared {
    pub(crate) fn scrub(&self, text: &str) -> String {
        self.safety.scrubber.scrub(text).into_owned()
    }

    /// Why nothing more is sent to `endpoint`, if so.
    pub(crate) fn gone(&self, endpoint: &str) -> Option<String> {
        self.dead.lock().unwrap_or_else(|p| p.into_inner()).get(endpoint).cloned()
    }

    /// The connection to `conn`'s endpoint was lost: Probe it at once, then with backoff
    /// ([`RunConfig::reconnect`]); an endpoint that never answers is given up for the run.
    pub(crate) async fn lost(&self, conn: &Connection) {
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
            "{endpoint} stopped answering earlier in the run ({} reconnect attempts over {} failed, --reconnect-attempts)",
            policy.attempts,
            crate::client::human_duration(started.elapsed())
        );
        tracing::error!("{why}; nothing more is sent to it");
        self.dead.lock().unwrap_or_else(|p| p.into_inner()).insert(endpoint, why);
    }

    /// What the run learned of the plugin before its scenarios (nothing, before the probe).
    pub(crate) fn facts(&self) -> &RunFacts {
        self.facts.get().unwrap_or(&NO_FACTS)
    }

    pub(crate) fn stopped(&self) -> Option<String> {
        if self.stopping.load(Ordering::SeqCst) {
            Some(self.stop_reason.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or_default())
        } else {
            None
        }
    }

    pub(crate) fn stop(&self, reason: String) {
        let first = {
            let mut held = self.stop_reason.lock().unwrap_or_else(|p| p.into_inner());
            let first = held.is_none();
            held.get_or_insert_with(|| reason.clone());
            first
        };
        self.stopping.store(true, Ordering::SeqCst);
        if first && let Some(progress) = &self.config.progress {
            progress.interrupted(&reason);
        }
    }
}

/// How a check ended.
#[derive(Debug, Clone)]
pub enum CheckOutcome {
    /// It ran; its outputs (failures, if any, are findings already recorded).
    Done(BTreeMap<String, Val>),
    /// The scenario becomes a skip, for this reason.
    Skip(String),
    /// A failure (recorded) ends the scenario.
    Stop,
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
    shared: Arc<Shared>,
    vars: Vars,
    tracker: Tracker,
    findings: Vec<Finding>,
    paths: ScenarioPaths,
    /// Further paths of the scenario's directory that checks made (or that plugins make in
    /// them), removed after teardown like the built-in ones, in this order.
    own_paths: Vec<PathBuf>,
    name: String,
    scenario_id: String,
    /// The step being run (for findings).
    step: Option<usize>,
    step_name: Option<String>,
    /// The running step's own requirement ids (`spec:` on the step).
    step_spec: Vec<String>,
    /// The budget lease this context works under (its scenario's, or a property case's).
    holder: u64,
    /// The last call retried for contention that still failed: its RPC and the note its
    /// findings carry.
    contention: Option<(String, String)>,
    /// The call step being sent expects a contention code itself: it is not retried.
    contention_expected: bool,
    /// RPCs sent to the plugin so far (retries included).
    rpcs: u64,
    /// Where the response rules' violations of this context's calls are collected.
    rules: RuleLog,
    /// An answer the scenario cannot go on from (a creation without a usable id, a delete
    /// the plugin did not carry out): the scenario stops after the step that got it.
    halted: bool,
    /// The step and call refused for room held by what the plugin kept: what else that call's
    /// refusal would be blamed for in the step is that one finding's (see `room_held_by_kept`).
    room_blocked: Option<(Option<usize>, String)>,
    /// The ids of what a delete answered OK for and the plugin still showed after the grace
    /// period (see [`super::deleted`]).
    kept: Vec<String>,
    /// The orchestrator an instance follows (`None`: not an instance).
    orchestrator: Option<Profile>,
    /// The orchestrator's behaviour being exercised: findings are filed under it.
    behaviour: Option<&'static str>,
    /// Every behaviour exercised so far.
    exercised: BTreeSet<&'static str>,
    /// Its ControllerPublishVolume calls overlap others on purpose (see `send`).
    overlapping: bool,
    /// Whether teardown's deletes (and, with `defer_steps`, the deletes of calls) are left
    /// to the run's [`Verifier`] rather than looked up at once: a scenario's (not the run's
    /// own work, nor an orchestrator's instance); `defer_steps` for a property case, and for a
    /// scenario's last step when it is one call: deletes no later step depends on.
    defer_teardown: bool,
    defer_steps: bool,
    /// Which node each call went to, and what the step last touched: a finding's node.
    node_calls: NodeCalls,
}

impl ScenarioCtx {
    pub(crate) fn new(shared: Arc<Shared>, scenario: &Scenario, paths: ScenarioPaths, holder: u64) -> Self {
        let name = builtin_vars::scenario_name(&shared.run_id, &scenario.id);
        let mut ctx = Self::named(shared, &scenario.id, name, paths, holder);
        ctx.orchestrator = scenario.orchestrator;
        ctx.defer_teardown = scenario.orchestrator.is_none();
        ctx
    }

    /// A context for the run's own work outside any scenario (the probe before them), under
    /// the id `id` (what it creates is journaled and torn down like a scenario's).
    pub(crate) fn for_run(shared: Arc<Shared>, id: &str) -> Self {
        let name = builtin_vars::scenario_name(&shared.run_id, id);
        Self::named(shared, id, name, ScenarioPaths::in_dir(PathBuf::new(), PathBuf::new()), 0)
    }

    fn named(shared: Arc<Shared>, id: &str, name: String, paths: ScenarioPaths, holder: u64) -> Self {
        let vars = builtin_vars::values(&shared.config, &shared.plugin.fingerprint, shared.facts(), &name, &paths);
        let tracker = Tracker::new(id, shared.config.observer.clone());
        ScenarioCtx {
            shared,
            vars,
            tracker,
            findings: Vec::new(),
            paths,
            own_paths: Vec::new(),
            name,
            scenario_id: id.to_owned(),
            step: None,
            step_name: None,
            step_spec: Vec::new(),
            holder,
            contention: None,
            contention_expected: false,
            rpcs: 0,
            rules: RuleLog::new(),
            halted: false,
            room_blocked: None,
            kept: Vec::new(),
            orchestrator: None,
            behaviour: None,
            exercised: BTreeSet::new(),
            overlapping: false,
            defer_teardown: false,
            defer_steps: false,
            node_calls: NodeCalls::default(),
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
            step_spec: self.step_spec.clone(),
            holder: self.holder,
            contention: None,
            contention_expected: false,
            rpcs: 0,
            rules: RuleLog::new(),
            halted: false,
            room_blocked: None,
            kept: Vec::new(),
            orchestrator: self.orchestrator,
            behaviour: self.behaviour,
            exercised: BTreeSet::new(),
            overlapping: false,
            defer_teardown: self.defer_teardown,
            defer_steps: false,
            node_calls: NodeCalls::default(),
        }
    }

    /// Takes back what a [`fork`](ScenarioCtx::fork) recorded: the resources it still holds
    /// (torn down with the scenario), its findings and its paths.
    pub(crate) fn absorb(&mut self, fork: ScenarioCtx) {
        self.tracker.absorb(fork.tracker);
        self.rpcs += fork.rpcs;
        self.findings.extend(fork.findings);
        self.own_paths.extend(fork.own_paths);
        self.halted |= fork.halted;
        self.kept.extend(fork.kept);
        self.exercised.extend(fork.exercised);
    }

    /// The call pattern an orchestrated check follows in an instance (`None`: the scenario
    /// as loaded, which follows the spec's own order).
    pub fn pattern(&self) -> Option<CallPattern> {
        self.orchestrator.map(Profile::pattern)
    }

    /// In an instance: behaviour `id` was followed, while what is found stays filed under the
    /// current one.
    pub fn followed(&mut self, id: &'static str) {
        if self.orchestrator.is_some() {
            self.exercised.insert(id);
        }
    }

    /// Outside an instance too: the scenario got to what row `id` of the matrix is about (a
    /// row fed by a plain scenario, `ids::FED_BY`): its calls were sent and judged, so a
    /// finding of the scenario about something else (a witness's lie filed under it) does not
    /// keep the row from being judged.
    pub fn reached(&mut self, id: &'static str) {
        self.exercised.insert(id);
    }

    /// A fork whose ControllerPublishVolume calls overlap its siblings', as the instance's
    /// orchestrator sends them (only where the pattern says it does).
    pub fn fork_overlapping(&self) -> ScenarioCtx {
        let mut fork = self.fork();
        fork.overlapping = self.pattern().is_some_and(|p| p.parallel_controller_publish);
        fork
    }

    /// A fork whose ControllerPublishVolume calls overlap its siblings' whatever the run's
    /// orchestrators (which otherwise serialise them): for a check whose subject is that
    /// overlap (`publish-race`, whose scenario runs alone).
    pub fn fork_racing(&self) -> ScenarioCtx {
        let mut fork = self.fork();
        fork.overlapping = true;
        fork
    }

    /// In an instance: from now on, what is found is filed under behaviour `id`, which
    /// counts as exercised. Nothing outside an instance.
    pub fn exercise(&mut self, id: &'static str) {
        if self.orchestrator.is_some() {
            self.behaviour = Some(id);
            self.exercised.insert(id);
        }
    }

    /// The run's whole configuration, for the engine (property steps): checks read the narrow
    /// view or value they need ([`ScenarioCtx::waits`], [`ScenarioCtx::requests`], ...).
    pub fn config(&self) -> &RunConfig {
        &self.shared.config
    }

    /// How long the run waits where the spec sets no deadline (`--ready-timeout`,
    /// `--settle-time`, `--delete-grace`): what a check's waits read of the settings.
    pub fn waits(&self) -> Waits {
        self.shared.config.waits()
    }

    /// What the run's requests carry (parameters, access type, sizes, secrets).
    pub fn requests(&self) -> &Requests {
        &self.shared.requests
    }

    /// The volumes the run did not create, whether it may write to them, the scrubber.
    pub fn safety(&self) -> &Safety {
        &self.shared.safety
    }

    /// The commands that restart the plugin (`--allow-restart-cmd`,
    /// `--restart-controller-cmd`).
    pub fn restarts(&self) -> &Restarts {
        &self.shared.restarts
    }

    /// `--strict`: whether warnings fail the run (what a reconciliation's verdict weighs).
    pub fn strict(&self) -> bool {
        self.shared.config.strict
    }

    /// The run's seed (data markers, property cases; never names).
    pub fn seed(&self) -> u64 {
        self.shared.config.seed
    }

    /// How big the `stress` and `disruption` suites' scenarios are.
    pub fn stress(&self) -> StressSize {
        self.shared.config.stress
    }

    /// `--idempotency-count`: how often `repeat: idempotency` calls.
    pub fn idempotency_count(&self) -> u32 {
        self.shared.config.idempotency_count
    }

    /// csi-sanity's mount and staging directories and path commands.
    pub fn path_settings(&self) -> &PathSettings {
        &self.shared.config.paths
    }

    /// `--contention-timeout`: how long the run waits out its own contention.
    pub fn contention_timeout(&self) -> std::time::Duration {
        self.shared.config.budgets.contention_timeout
    }

    /// The expansion target of checks that start from the small size
    /// ([`RunFacts::small_expand_size`]).
    pub fn small_expand_size(&self) -> i64 {
        self.shared.facts().small_expand_size(&self.shared.config)
    }

    /// What the run learned of the plugin before its scenarios.
    pub fn facts(&self) -> &RunFacts {
        self.shared.facts()
    }

    /// The size of the volumes of checks whose verdict does not depend on sizes: the
    /// smallest the plugin serves ([`RunFacts::small_size`]).
    pub fn small_size(&self) -> i64 {
        self.shared.facts().small_size(&self.shared.config)
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
        self.node_calls.looked_at(self.step, node);
        self.shared.inspectors.lock().unwrap_or_else(|p| p.into_inner()).get(node).cloned()
    }

    /// Finds again where node endpoint `node`'s paths are (a restarted node plugin is a new
    /// process, perhaps in a new mount namespace), for the rest of the run; `None`: no such
    /// endpoint.
    pub async fn identify_node(&self, node: usize) -> Option<Inspector> {
        let conn = self.shared.plugin.nodes.get(node)?;
        let found = node_inspector(node, conn, &self.shared.node_access).await;
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
    pub fn push(&mut self, finding: Finding) {
        let finding = self.prepare(finding);
        if finding.severity >= Severity::Warn
            && self.room_blocked.as_ref().is_some_and(|(step, rpc)| *step == finding.step && finding.rpc.as_ref() == Some(rpc))
        {
            return;
        }
        self.findings.push(finding);
    }

    /// A finding as the current step files it (step, requirements, step name, behaviour).
    fn prepare(&self, mut finding: Finding) -> Finding {
        finding.step = finding.step.or(self.step);
        if finding.node.is_none() {
            finding.node = self.node_calls.named(&finding, &self.shared.plugin, &self.shared.config);
        }
        if finding.requirements.is_empty() && finding.step == self.step {
            finding.requirements = self.step_spec.clone();
        }
        if let Some((rpc, note)) = &self.contention
            && finding.rpc.as_deref() == Some(rpc)
        {
            finding.message = format!("{} ({note})", finding.message);
        }
        if let Some(name) = &self.step_name {
            finding.message = format!("{name}: {}", finding.message);
        }
        if let (Some(o), Some(id)) = (self.orchestrator, self.behaviour) {
            finding.behaviour.get_or_insert_with(|| id.to_owned());
            // The orchestrator bends the spec here: a plugin that breaks is not at fault by
            // the spec, it will only not work under that orchestrator.
            if finding.severity == Severity::Fail
                && let Some(why) = finding.behaviour.as_deref().and_then(|b| o.pattern().deviation(b))
            {
                finding.severity = Severity::Warn;
                finding.message = format!("{} (will not work under {}: {why})", finding.message, o.title());
            }
        }
        finding
    }

    /// Records a failure at the current step.
    pub fn fail(&mut self, kind: &str, message: impl Into<String>) {
        self.push(Finding::new(Severity::Fail, kind, message));
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

    pub(crate) fn connection(&self, method: &MethodDescriptor, node: Option<usize>) -> Result<Connection, RpcError> {
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

    /// The p90 of the answer times of the connection `rpc` goes to (for node `node`), so far
    /// in the run: what the run's waits scale from (see `client::Latency`).
    pub fn latency(&self, rpc: &str, node: Option<usize>) -> Option<Duration> {
        let method = proto::method(rpc)?;
        self.connection(&method, node).ok()?.stats().latency().p90()
    }

    /// Fills the request's `secrets`; returns the key used (a name, never values).
    pub(crate) fn apply_secrets(&self, request: &mut DynamicMessage, rpc: &str, mode: &SecretsMode) -> Option<String> {
        let field = request.descriptor().get_field_by_name("secrets")?;
        let key = match mode {
            SecretsMode::None => {
                request.clear_field(&field);
                return None;
            }
            SecretsMode::Auto if request.has_field(&field) => return Some("(request)".to_owned()),
            SecretsMode::Auto => crate::secrets::secret_key(rpc),
            SecretsMode::Key(k) => k.clone(),
        };
        let values = self.shared.requests.secrets.get(&key)?;
        super::resources::set_secrets(request, values);
        Some(key)
    }

    pub(crate) async fn teardown(&mut self) {
        self.behaviour = None;
        self.step = None;
        self.step_name = None;
        // The objects deleted OK go to the run's verifier (one listing for many, after the
        // scenario ends); those it cannot take are looked up again together once every
        // delete is sent: a plugin that keeps them costs the grace period once, not once per
        // object.
        let mut deletes = Vec::new();
        for tracked in self.tracker.teardown_order() {
            let (rpc, request) = tracked.resource.teardown();
            let Some(method) = proto::method(rpc) else {
                continue;
            };
            let mode = if tracked.secrets_key.is_some() { SecretsMode::Auto } else { SecretsMode::None };
            let (sent, answer) = self.send(&method, request, tracked.resource.node(), &mode, false).await;
            match answer {
                Ok(_) if deleted::deleted_id(rpc, &sent).is_some() => {
                    let answered = Instant::now();
                    let node = tracked.resource.node().unwrap_or(0);
                    if !(self.defer_teardown && self.defer(rpc, &sent, node, answered)) {
                        deletes.push((tracked, sent, answered));
                    }
                }
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
        let watched = futures_util::future::join_all(
            deletes.iter().map(|(tracked, sent, answered)| self.watch(tracked.resource.teardown().0, sent, *answered)),
        )
        .await;
        for ((tracked, sent, _), watched) in deletes.into_iter().zip(watched) {
            self.settle_delete(&sent, tracked.resource.node().unwrap_or(0), watched);
            self.tracker.release(tracked.seq);
        }
    }
}

/// Records a check's bad argument (an error of the suite) and stops the scenario.
pub(crate) fn bad_arg(ctx: &mut ScenarioCtx, message: String) -> CheckOutcome {
    ctx.push(Finding::new(Severity::Error, "suite", message));
    CheckOutcome::Stop
}

/// Where node endpoint `index`'s paths and mounts are (see [`Inspector::for_node`]).
pub(crate) async fn node_inspector(index: usize, conn: &Connection, access: &NodeAccess) -> Inspector {
    if let Some(agent) = access.agents.get(index) {
        return Inspector::through_agent(index, agent.clone());
    }
    Inspector::for_node(index, conn.endpoint(), access.check_path_cmd.as_ref(), access.mount_check).await
}
