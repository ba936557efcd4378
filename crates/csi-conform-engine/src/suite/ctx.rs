//! The context named checks and steps work through: [`ScenarioCtx`] (variables, tracked
//! resources, findings, paths, sending calls, teardown), the run-wide [`Shared`] state, how
//! a scenario goes on ([`Flow`], [`CheckOutcome`]); re-exports the plugin's [`Response`] and
//! the finding helpers of [`super::answer`]. Knows nothing of the runner or of step execution.

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
    budget::{Budget, Retried},
    catalog::CheckArgs,
    builtin_vars,
    deleted,
    inspect::Inspector,
    model::*,
    node_of::NodeCalls,
    paths::{PathError, RunPaths, ScenarioPaths},
    resources::Tracker,
    settings::{Plugin, RunConfig, RunFacts},
    vars::{Val, Vars},
    verifier::{self, Deferred, Verifier, Watched},
};
pub use super::answer::{Response, call_finding};
pub(crate) use super::answer::{ok_summary, rpc_error_finding, unreachable_finding};
use crate::{
    client::{Connection, ErrorOrigin, RpcError},
    rules::{RuleLog, Violation},
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
        self.config.scrubber.scrub(text).into_owned()
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
    pub(crate) shared: Arc<Shared>,
    pub(crate) vars: Vars,
    pub(crate) tracker: Tracker,
    pub(crate) findings: Vec<Finding>,
    pub(crate) paths: ScenarioPaths,
    /// Further paths of the scenario's directory that checks made (or that plugins make in
    /// them), removed after teardown like the built-in ones, in this order.
    pub(crate) own_paths: Vec<PathBuf>,
    pub(crate) name: String,
    pub(crate) scenario_id: String,
    /// The step being run (for findings).
    pub(crate) step: Option<usize>,
    pub(crate) step_name: Option<String>,
    /// The running step's own requirement ids (`spec:` on the step).
    pub(crate) step_spec: Vec<String>,
    /// The budget lease this context works under (its scenario's, or a property case's).
    pub(crate) holder: u64,
    /// The last call retried for contention that still failed: its RPC and the note its
    /// findings carry.
    pub(crate) contention: Option<(String, String)>,
    /// The call step being sent expects a contention code itself: it is not retried.
    pub(crate) contention_expected: bool,
    /// RPCs sent to the plugin so far (retries included).
    pub(crate) rpcs: u64,
    /// Where the response rules' violations of this context's calls are collected.
    pub(crate) rules: RuleLog,
    /// An answer the scenario cannot go on from (a creation without a usable id, a delete
    /// the plugin did not carry out): the scenario stops after the step that got it.
    pub(crate) halted: bool,
    /// The step and call refused for room held by what the plugin kept: what else that call's
    /// refusal would be blamed for in the step is that one finding's (see `room_held_by_kept`).
    room_blocked: Option<(Option<usize>, String)>,
    /// The ids of what a delete answered OK for and the plugin still showed after the grace
    /// period (see [`super::deleted`]).
    pub(crate) kept: Vec<String>,
    /// The orchestrator an instance follows (`None`: not an instance).
    pub(crate) orchestrator: Option<Profile>,
    /// The orchestrator's behaviour being exercised: findings are filed under it.
    pub(crate) behaviour: Option<&'static str>,
    /// Every behaviour exercised so far.
    pub(crate) exercised: BTreeSet<&'static str>,
    /// Its ControllerPublishVolume calls overlap others on purpose (see `send`).
    pub(crate) overlapping: bool,
    /// Whether teardown's deletes (and, with `defer_steps`, the deletes of calls) are left
    /// to the run's [`Verifier`] rather than looked up at once: a scenario's (not the run's
    /// own work, nor an orchestrator's instance); `defer_steps` for a property case, and for a
    /// scenario's last step when it is one call: deletes no later step depends on.
    pub(crate) defer_teardown: bool,
    pub(crate) defer_steps: bool,
    node_calls: NodeCalls, // Which node each call went to, and what the step last touched.
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

    /// A fork whose ControllerPublishVolume calls overlap its siblings', as the instance's
    /// orchestrator sends them (only where the pattern says it does).
    pub fn fork_overlapping(&self) -> ScenarioCtx {
        let mut fork = self.fork();
        fork.overlapping = self.pattern().is_some_and(|p| p.parallel_controller_publish);
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

    /// The run's configuration.
    pub fn config(&self) -> &RunConfig {
        &self.shared.config
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
        finding.node = finding.node.take().or_else(|| self.node_calls.named(&finding, &self.shared.plugin, &self.shared.config));
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

    /// Records a broken response rule as a finding of the step that made the call: a MUST
    /// fails, a tolerated MUST warns, what the spec leaves open is a note; the finding names
    /// the rule's requirement. A violation breaks nothing else (the scenario goes on to its
    /// subject), and the same broken field (rule, place and value) is one finding however many
    /// answers of the scenario carry it: the first's.
    pub(crate) fn push_violation(&mut self, v: &Violation, request: &DynamicMessage) {
        let mut f = verifier::violation_finding(v, request);
        f.step = self.step;
        let same_field = |g: &Finding| {
            g.kind == f.kind && g.requirements == f.requirements && g.expected == f.expected && g.got == f.got
        };
        if !self.findings.iter().any(|g| g.repeats(&f) || same_field(g)) {
            self.push(f);
        }
    }

    /// Notes what an OK answer shows of the spec version the plugin speaks, for the report;
    /// evidence against the version the run judges by (judged when the run began, and not
    /// changed mid-run) warns at the step that first got some, once per scenario: never a
    /// failure, as a version is a guess. A listing's entries for objects other scenarios hold
    /// go to the report only: whether they are there depends on timing, and a scenario's
    /// verdict must not.
    fn version_evidence(&mut self, rpc: &str, request: &DynamicMessage, response: &Response) {
        let found = crate::version::answer_evidence(rpc, response.messages());
        if found.is_empty() {
            return;
        }
        let own = {
            let ids = self.tracker.object_ids();
            crate::version::answer_evidence_of(rpc, response.messages(), |id| ids.contains(id))
        };
        let shared = self.shared.clone();
        let assumed = &shared.plugin.fingerprint.spec;
        let mut contradicting = Vec::new();
        {
            let mut seen = self.shared.versions.lock().unwrap_or_else(|p| p.into_inner());
            for evidence in found {
                let scenarios = seen.entry(evidence.clone()).or_default();
                if own.contains(&evidence)
                    && scenarios.insert(self.scenario_id.clone())
                    && assumed.contradicted_by(&evidence)
                {
                    contradicting.push(evidence);
                }
            }
        }
        // One warning per scenario is enough to say it; the report lists every piece.
        let warned = self.findings.iter().any(|f| f.kind == "spec-version");
        if let Some(evidence) = contradicting.into_iter().next().filter(|_| !warned) {
            let mut f = call_finding(Severity::Warn, "spec-version", assumed.contradiction(&evidence), rpc, request);
            f.got = Some(format!("{} (CSI v{})", evidence.what, evidence.version));
            f.expected = Some(format!("what CSI v{} defines", assumed.version));
            f.requirements = vec![evidence.requirement.to_owned()];
            self.push(f);
        }
    }

    /// A creation answered OK without a usable id: the plugin may now hold an object no CSI
    /// call can name, so none can delete it. The finding says so (on the rule's finding of
    /// that call), the scenario stops after this step, and the call is journaled as left
    /// behind by the plugin (returned, for the tracker), never tried again by `cleanup`.
    fn lost_by_plugin(&mut self, rpc: &str, request: &DynamicMessage, answer: &DynamicMessage) -> Option<String> {
        let (noun, None) = crate::rules::created_id(rpc, answer)? else { return None };
        let name = request.get_field_by_name("name").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let why = format!(
            "{rpc} answered OK without a usable {noun} id: the plugin may now hold a {noun} named {name:?} that no CSI \
             call can delete; it is recorded as left behind by the plugin (the journal and this report), not retried by \
             `cleanup`, and the scenario stops here"
        );
        self.halted = true;
        let step = self.step;
        match self.findings.iter_mut().rev().find(|f| f.kind == "response-rule" && f.rpc.as_deref() == Some(rpc) && f.step == step) {
            Some(f) => f.message = format!("{}; {why}", f.message),
            None => {
                let mut f = call_finding(Severity::Fail, "left-by-plugin", why.clone(), rpc, request);
                let requirement = match rpc {
                    "CreateSnapshot" => "CreateSnapshot.snapshot.fields",
                    "CreateVolumeGroupSnapshot" => "CreateVolumeGroupSnapshot.answer",
                    _ => "CreateVolume.volume.id-required",
                };
                f.requirements = vec![requirement.to_owned()];
                self.push(f);
            }
        }
        Some(why)
    }

    /// Whether the object a delete of `request` answered OK for at `answered` is gone, looked
    /// up at once (see [`verifier::watch`]); the calls' rule violations wait in the rule log.
    async fn watch(&self, rpc: &str, request: &DynamicMessage, answered: Instant) -> Watched {
        let shared = &self.shared;
        let witnesses = &shared.verifier.witnesses;
        verifier::watch(&shared.plugin, &shared.config, witnesses, &self.scenario_id, &self.rules, rpc, request, answered)
            .await
    }

    /// Hands what a delete of `request` (`node`) answered OK for at `answered` to the run's
    /// [`Verifier`]: the tracker forgets it, and the verifier tells the journal, and the
    /// scenario's result, what became of it. `false`: the verifier cannot take it (look it up
    /// at once).
    fn defer(&mut self, rpc: &str, request: &DynamicMessage, node: usize, answered: Instant) -> bool {
        let verifier = self.shared.verifier.clone();
        let handed = self.tracker.hand_over_matching(rpc, request, node);
        if handed.is_empty() {
            return false;
        }
        let mut refused = Vec::new();
        for tracked in handed {
            let object = Deferred {
                scenario: self.scenario_id.clone(),
                rpc: rpc.to_owned(),
                request: request.clone(),
                tracked,
                answered,
                step: self.step,
                step_name: self.step_name.clone(),
            };
            if let Err(object) = verifier.defer(object) {
                refused.push(object.tracked);
            }
        }
        let deferred = refused.is_empty();
        for tracked in refused {
            self.tracker.take_back(tracked);
        }
        deferred
    }

    /// A creation refused for room (RESOURCE_EXHAUSTED, or a message saying no space, after
    /// the contention retries) while the plugin keeps objects it answered deleted: the room is
    /// held by what it kept, so the refusal is that broken delete's doing, not this step's
    /// subject. Filed once for the run, as the delete's rule citing what the plugin kept,
    /// under the first scenario (by id) so refused; every other scenario so refused cites
    /// that one finding (see [`super::witness::Witnesses::blocked`]). The scenario stops: its
    /// verdict is the same whether it ran before the room ran out (its own delete is then
    /// kept) or after, so at any `--jobs`.
    fn room_held_by_kept(&mut self, e: &RpcError, request: &DynamicMessage) {
        let refused = e.origin == ErrorOrigin::Plugin
            && (e.code == Code::ResourceExhausted || super::budget::is_no_space(&e.rpc, e.code, &e.message));
        if !refused || self.contention_expected || !matches!(e.rpc.as_str(), "CreateVolume" | "CreateSnapshot") {
            return;
        }
        let kept = self.shared.verifier.witnesses.kept_objects();
        let Some((delete, _)) = kept.first() else { return };
        let delete = delete.clone();
        let noun = if delete == "DeleteSnapshot" { "snapshot" } else { "volume" };
        let same: Vec<_> = kept.into_iter().filter(|(d, _)| *d == delete).map(|(_, seen)| seen).collect();
        let message = format!(
            "{} answered {}: the plugin has no room while it keeps {} {noun}(s) that {delete} answered OK for (the \
             run's other findings name where); what the step checks cannot be tried, and the scenario stops",
            e.rpc,
            e.code_name(),
            same.len()
        );
        let mut f = rpc_error_finding(e, request, Severity::Fail, "room-held-by-kept", message, None);
        f.requirements = vec![format!("{delete}.deletes")];
        let mut short = f.clone();
        short.message = format!(
            "{} answered {}: no room, held by what the plugin kept after {delete} answered OK; what the step checks \
             cannot be tried, and the scenario stops",
            e.rpc,
            e.code_name()
        );
        f.evidence = same.into_iter().take(3).collect();
        let witnesses = &self.shared.verifier.witnesses;
        let refusal = witnesses.observe(&e.rpc, self.scenario_id(), format!("answered {} for room", e.code_name()));
        witnesses.blocked(self.scenario_id(), self.prepare(f), self.prepare(short), refusal);
        self.room_blocked = Some((self.step, e.rpc.clone()));
        self.halted = true;
    }

    /// Takes in what [`ScenarioCtx::watch`] found for the delete `request` (`node`): its calls and
    /// their rule violations; when the witnesses disagreed, an inconclusive finding (the
    /// scenario goes on); when the plugin kept the object, a finding of the current step
    /// (rule `answer.delete-*.gone`, with the witnesses' evidence), the scenario stopping
    /// after the step, and the object handed back to the plugin in the tracker (the journal:
    /// kept by the plugin, never retried by `cleanup`).
    fn settle_delete(&mut self, request: &DynamicMessage, node: usize, watched: Watched) {
        self.rpcs += watched.calls;
        // What the look-ups find is about what the plugin keeps, not about the orchestrator's
        // call pattern the delete was sent in (Swarm's `rpc.unstage`: a staged volume deleted):
        // filed under no behaviour, and never excused as the orchestrator's deviation.
        let behaviour = self.behaviour.take();
        for violation in self.rules.take() {
            self.push_violation(&violation, &deleted::request(&violation.rpc, "", ""));
        }
        if let Some(f) = watched.undecided {
            self.push(f);
        }
        let mut decided = None;
        if let Some(kept) = watched.kept {
            self.shared.verifier.witnesses.kept(&kept.rpc, &kept.evidence);
            if let Some((violation, why)) = kept.violation(self.shared.config.delete_grace, self.step.is_some()) {
                let mut f = verifier::violation_finding(&violation, request);
                f.step = self.step;
                f.evidence = kept.evidence.clone();
                if !self.findings.iter().any(|g| g.repeats(&f)) {
                    self.push(f);
                }
                decided = Some((kept, why));
            }
        }
        self.behaviour = behaviour;
        let Some((kept, why)) = decided else { return };
        self.halted |= self.step.is_some();
        self.tracker.kept(&kept.rpc, request, node, &why);
        self.kept.push(kept.id);
    }

    /// Records a failure at the current step.
    pub fn fail(&mut self, kind: &str, message: impl Into<String>) {
        self.push(Finding::new(Severity::Fail, kind, message));
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
            Ok(c) => c.with_rules(&self.rules),
            Err(e) => return (request, Err(e)),
        };
        self.node_calls.sent_to(self.step, method, node, &self.shared.plugin);
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
        // With --orchestrator, ControllerPublishVolume calls never overlap (Nomad and Swarm
        // serialise them) but where an instance overlaps them on purpose, as its orchestrator
        // does (Kubernetes; that scenario runs alone): what overlapping calls break is then
        // filed under that orchestrator alone.
        let shared = self.shared.clone();
        let _serial = match method.name() {
            "ControllerPublishVolume" if !self.shared.config.orchestrators.is_empty() && !self.overlapping => {
                Some(shared.controller_publish.lock().await)
            }
            _ => None,
        };
        if let Some(why) = super::existing::refusal(method.name(), &request, &self.shared.config.existing_volumes) {
            self.push(Finding::new(Severity::Error, "protected-volume", why.clone()));
            return (request, Err(not_sent(Code::Aborted, why)));
        }
        let scrubber = &self.shared.config.scrubber;
        scrubber.add(proto::sensitive_values(&request));
        tracing::debug!(rpc = method.name(), request = %self.shared.scrub(&proto::to_redacted_json(&request)), "call");
        let sending =
            if track { self.tracker.sending(method.name(), &request, node_index, key.as_deref()) } else { None };
        // Contention while this run holds other resources on the plugin is retried after a
        // release (bounded by --contention-timeout), not judged.
        let holder = if self.contention_expected { None } else { Some(self.holder) };
        // ABORTED while another of this run's calls on the same volume was in flight is the
        // run's own concurrency (#concurrency): asked again once those calls are done.
        let volume = super::inflight::volume_of(&request);
        let overlapped = std::sync::atomic::AtomicBool::new(false);
        let started = Instant::now();
        let bound = self.shared.config.budgets.contention_timeout;
        let mut own = 0u32;
        let (answer, retried) = loop {
            let (answer, retried) = self
                .shared
                .budget
                .retry_contention(holder, || async {
                    let call = self.shared.in_flight.begin(volume.as_deref());
                    let answer = if method.is_server_streaming() {
                        conn.call_dynamic_streaming(method, request.clone()).await.map(Response::Stream)
                    } else {
                        conn.call_dynamic(method, request.clone()).await.map(Response::Unary)
                    };
                    overlapped.store(call.is_some_and(|c| c.overlapped()), std::sync::atomic::Ordering::Relaxed);
                    answer
                })
                .await;
            self.rpcs += 1 + retried.map_or(0, |r| u64::from(r.times));
            let ours = holder.is_some()
                && overlapped.load(std::sync::atomic::Ordering::Relaxed)
                && answer.as_ref().err().is_some_and(|e| e.code == Code::Aborted && e.origin == ErrorOrigin::Plugin);
            let left = bound.saturating_sub(started.elapsed());
            if let (Some(volume), true) = (&volume, ours && !left.is_zero()) {
                own += 1;
                tracing::info!(rpc = method.name(), volume, "ABORTED while another call of this run on the volume was in flight: asked again once those are done");
                self.shared.in_flight.idle(volume, left).await;
                continue;
            }
            break (answer, if ours { None } else { retried });
        };
        self.contention = match retried {
            Some(r @ Retried { code: Some(_), .. }) => Some((method.name().to_owned(), r.note())),
            _ if own > 0 && answer.is_err() => {
                Some((method.name().to_owned(), super::inflight::note(own, started.elapsed(), bound)))
            }
            _ => None,
        };
        match &answer {
            Ok(response) => response.messages().iter().for_each(|m| scrubber.add(proto::sensitive_values(m))),
            Err(e) if e.is_unreachable() => self.shared.lost(&conn).await,
            Err(_) => {}
        }
        for violation in self.rules.take() {
            self.push_violation(&violation, &request);
        }
        if let Ok(response) = &answer {
            self.version_evidence(method.name(), &request, response);
        }
        if let Err(e) = &answer {
            self.room_held_by_kept(e, &request);
        }
        let lost = match &answer {
            Ok(Response::Unary(m)) => self.lost_by_plugin(method.name(), &request, m),
            _ => None,
        };
        // A delete a step made, answered OK, of something the scenario holds: is it gone?
        // (A property case's goes to the run's verifier; teardown looks at its deletes
        // together, see `teardown`.)
        if track && answer.is_ok() && self.tracker.holds(method.name(), &request, node_index) {
            let answered = Instant::now();
            if !(self.defer_steps && self.defer(method.name(), &request, node_index, answered)) {
                let watched = self.watch(method.name(), &request, answered).await;
                self.settle_delete(&request, node_index, watched);
            }
        }
        if track {
            let outcome = match &answer {
                Ok(Response::Unary(m)) => Some(Ok(m)),
                Ok(Response::Stream(_)) => None,
                Err(e) => Some(Err(e.code)),
            };
            if let Some(outcome) = outcome {
                self.tracker.observe_call(
                    sending.as_ref(),
                    method.name(),
                    &request,
                    outcome,
                    node_index,
                    key.as_deref(),
                );
            }
            // Only an answer from the plugin settles the call: after a timeout, a lost
            // connection or an undecodable answer, it may have made something.
            let heard = answer.as_ref().err().is_none_or(|e| e.origin == ErrorOrigin::Plugin);
            match &lost {
                Some(why) => self.tracker.lost(sending, why),
                None => self.tracker.answered(sending, heard),
            }
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
        let values = self.shared.config.secrets.get(&key)?;
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

/// Where node endpoint `index`'s paths and mounts are (see [`Inspector::for_node`]).
/// Records a check's bad argument (an error of the suite) and stops the scenario.
pub(crate) fn bad_arg(ctx: &mut ScenarioCtx, message: String) -> CheckOutcome {
    ctx.push(Finding::new(Severity::Error, "suite", message));
    CheckOutcome::Stop
}

pub(crate) async fn node_inspector(index: usize, conn: &Connection, config: &RunConfig) -> Inspector {
    if let Some(agent) = config.node_agents.get(index) {
        return Inspector::through_agent(index, agent.clone());
    }
    Inspector::for_node(index, conn.endpoint(), config.check_path_cmd.as_ref(), config.mount_check).await
}
