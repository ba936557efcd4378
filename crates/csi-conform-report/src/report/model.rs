//! The results of a run: findings with a severity, per-scenario and per-suite results, and the
//! whole run. The suite engine produces these; every output format (console, JUnit, JSON)
//! renders them and nothing else.

use std::{collections::BTreeMap, fmt, time::Duration};

use serde::{Deserialize, Serialize};

/// How a finding, or a whole scenario, came out. Ordered from best to worst, so the outcome
/// of a scenario is the maximum of its findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Checked and conformant.
    Pass,
    /// Not run: a required capability is not advertised, or a filter left it out.
    Skip,
    /// The harness could not decide: witnesses disagreed, or a bound without a spec deadline
    /// ran out. Never a pass, never a fail: above a pass and a skip (a scenario with an
    /// undecided step did not pass), below a warning (it never hides a real warning or
    /// failure). It does not fail the run, not even under `--strict`.
    Inconclusive,
    /// A tolerated deviation (such as an unconfirmed ValidateVolumeCapabilities); a failure
    /// under `--strict`.
    Warn,
    /// The plugin broke a spec MUST.
    Fail,
    /// The harness could not run the check (plugin unreachable, bad suite, teardown trouble
    /// of its own).
    Error,
}

impl Severity {
    /// The lower-case word used in every output (`pass`, `fail`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Pass => "pass",
            Severity::Skip => "skip",
            Severity::Inconclusive => "inconclusive",
            Severity::Warn => "warn",
            Severity::Fail => "fail",
            Severity::Error => "error",
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One observation made while running a scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// A short stable word for the kind of finding, e.g. `unexpected-code`,
    /// `assertion`, `unconfirmed`, `teardown`, `skipped-capability`.
    pub kind: String,
    /// One readable sentence; never contains secret values.
    pub message: String,
    /// The step it arose in (0-based here; every report counts from 1, as people do, so the
    /// JSON report's `step: 1` is the JUnit body's `(step 1)`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "step_from_one")]
    pub step: Option<usize>,
    /// The RPC involved, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc: Option<String>,
    /// A one-line summary of the request sent, secrets redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// What the check expected (a code, a value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// What the plugin did instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub got: Option<String>,
    /// The plugin's own status message, if it answered with an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_message: Option<String>,
    /// The ids of the requirements this finding breaks (of `suites/spec/v1.12.yaml`): a
    /// response rule's, a step's own `spec:`, or else empty (the scenario's ids then stand).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<String>,
    /// In an orchestrator instance (`<id>@nomad`): the id of the orchestrator's behaviour it
    /// was found under (`topology.match`), the row of the compatibility matrix it counts for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behaviour: Option<String>,
    /// The answers other than the call under test that the verdict rests on (a look-up after
    /// a delete, a listing), each with its call, object, claim and time: why a reader should
    /// believe it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
    /// On a run with more than one node (or with node agents): the node it happened on, when
    /// it came from a call to a node plugin or a check of a node's paths, mounts or data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<FindingNode>,
}

/// The node a finding happened on, as the run chose its nodes (`run --node-agents` says which
/// agent plays node 0, 1, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingNode {
    /// The node's index (`node: 1` is the second).
    pub index: usize,
    /// Where the run reached it: the node endpoint, or the agent's address.
    pub endpoint: String,
    /// The node plugin's node id there (NodeGetInfo), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
}

impl fmt::Display for FindingNode {
    /// `node 1 (node-b at tcp://10.0.0.2:7443)`, or `node 1 (unix:///csi/node.sock)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node_id {
            Some(id) => write!(f, "node {} ({id} at {})", self.index, self.endpoint),
            None => write!(f, "node {} ({})", self.index, self.endpoint),
        }
    }
}

/// One observation of the plugin's state a verdict rests on: which call, about which object,
/// what its answer claimed, and when (from the start of the run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The call that answered (`ListVolumes`).
    pub rpc: String,
    /// The object it was asked about or looked for (a volume or snapshot id).
    pub object: String,
    /// What its answer claimed, in a few words (`does not list it`, `answers OK with it`).
    pub claim: String,
    /// When the answer came, from the start of the run.
    #[serde(with = "duration_secs")]
    pub at: Duration,
}

impl fmt::Display for Evidence {
    /// `ListVolumes(vol-1) at 1.234s: does not list it`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({}) at {:.3}s: {}", self.rpc, self.object, self.at.as_secs_f64(), self.claim)
    }
}

impl Finding {
    /// Whether `other` says the same as this one at the same place (kind, step, RPC, what
    /// was expected and what came instead): a repeated call's, recorded once.
    pub fn repeats(&self, other: &Finding) -> bool {
        self.kind == other.kind
            && self.step == other.step
            && self.rpc == other.rpc
            && self.got == other.got
            && self.expected == other.expected
    }

    /// A finding with just a severity, kind and message.
    pub fn new(severity: Severity, kind: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            severity,
            kind: kind.into(),
            message: message.into(),
            step: None,
            rpc: None,
            request: None,
            expected: None,
            got: None,
            plugin_message: None,
            requirements: Vec::new(),
            behaviour: None,
            evidence: Vec::new(),
            node: None,
        }
    }

    /// A finding the harness could not decide (see [`Severity::Inconclusive`]): `message`
    /// says why (which witnesses disagreed, which bound ran out).
    pub fn inconclusive(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Finding::new(Severity::Inconclusive, kind, message)
    }
}

/// How a run handled a scenario listed in `--expect-failures`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum Expectation {
    /// The scenario failed as the list says; reported, but it does not fail the run.
    ExpectedFailure {
        /// The reason given in the list.
        reason: String,
    },
    /// The scenario was listed as failing but passed: the list is stale.
    UnexpectedPass {
        /// The reason given in the list.
        reason: String,
    },
}

/// A CSI requirement as reports show it (see `suites/spec/v1.12.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequirementRef {
    /// Its stable id, `CreateVolume.errors.already-exists`.
    pub id: String,
    /// MUST, SHOULD or MAY.
    pub level: String,
    /// What it asks, in one line.
    pub summary: String,
    /// The link into the spec.
    pub link: String,
}

/// The result of one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// The scenario's stable id (`controller.create-volume.no-name`).
    pub id: String,
    /// Its title.
    pub title: String,
    /// The CSI requirements it checks (ids of the built-in inventory, with level, summary
    /// and spec link), so that every failure names the rule it breaks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<RequirementRef>,
    /// Its tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The csi-sanity case numbers it covers (see `../shared/parity/csi-sanity-cases.txt`).
    #[serde(default)]
    pub parity: Vec<u32>,
    /// The overall outcome: the worst finding's severity, or `pass` when there is none.
    pub outcome: Severity,
    /// Why it was skipped, when `outcome` is `skip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// Everything observed, in order.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// Wall time spent, teardown included.
    #[serde(with = "duration_secs")]
    pub duration: Duration,
    /// Set when the scenario is listed in `--expect-failures`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectation: Option<Expectation>,
    /// RPCs the scenario sent to the plugin, its teardown and contention retries included
    /// (what a scenario costs a plugin that serves RPCs one at a time).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rpcs: u64,
    /// In an orchestrator instance: the ids of the orchestrator's behaviours it exercised. In a
    /// plain scenario that feeds a matrix row (restart, lost node, publish race): that row, once
    /// the scenario got to what the row is about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exercised: Vec<String>,
}

impl RequirementRef {
    /// The report's view of the built-in requirement `id` (level, summary and link empty
    /// when the inventory lacks it).
    pub fn of(id: &str) -> RequirementRef {
        match crate::spec::builtin().get(id) {
            Some(r) => RequirementRef {
                id: r.id.clone(),
                level: r.level.as_str().to_owned(),
                summary: r.summary.clone(),
                link: r.link().to_owned(),
            },
            None => RequirementRef { id: id.to_owned(), level: String::new(), summary: String::new(), link: String::new() },
        }
    }
}

impl Finding {
    /// The requirements this finding breaks: its own ids (a response rule's, a step's
    /// `spec:`), or, when it names none, those of its scenario.
    ///
    /// Falling back on the scenario's, a finding names only those about its own RPC when some
    /// are (`NodeStageVolume.staging-path.128-bytes` of six path requirements), and a failure
    /// never names a MAY or a SHOULD: the plugin broke no rule at that level (a failure of
    /// `lifecycle.no-secrets`, which checks a MAY, names what its finding says or nothing).
    pub fn blames(&self, scenario: &ScenarioResult) -> Vec<RequirementRef> {
        if self.requirements.is_empty() {
            let mut named: Vec<RequirementRef> = scenario
                .requirements
                .iter()
                .filter(|r| self.severity < Severity::Fail || !matches!(r.level.trim(), "MAY" | "SHOULD"))
                .cloned()
                .collect();
            // About another RPC (NodePublishVolume's path in a NodeStageVolume finding): not
            // what this finding breaks, when something about its own RPC or the general rules
            // remains.
            if let Some(rpc) = self.rpc.as_deref() {
                let other_rpc = |r: &RequirementRef| {
                    let area = r.id.split('.').next().unwrap_or_default();
                    area != rpc && crate::proto::method(area).is_some()
                };
                if named.iter().any(|r| !other_rpc(r)) {
                    named.retain(|r| !other_rpc(r));
                }
            }
            return named;
        }
        let of = |id: &String| scenario.requirements.iter().find(|r| r.id == *id).cloned();
        self.requirements.iter().map(|id| of(id).unwrap_or_else(|| RequirementRef::of(id))).collect()
    }
}

impl ScenarioResult {
    /// The requirements its failures and warnings break (see [`Finding::blames`]), each
    /// once, in order of first appearance; empty when nothing failed or warned.
    pub fn blamed(&self) -> Vec<RequirementRef> {
        let mut out: Vec<RequirementRef> = Vec::new();
        for f in self.findings.iter().filter(|f| f.severity >= Severity::Warn) {
            for r in f.blames(self) {
                if !out.iter().any(|o| o.id == r.id) {
                    out.push(r);
                }
            }
        }
        out
    }

    /// How requirement `id` came out in this scenario: the worst finding that breaks it; a
    /// pass when none does (a skip when the scenario was skipped).
    pub fn outcome_of(&self, id: &str) -> Severity {
        if self.outcome == Severity::Skip {
            return Severity::Skip;
        }
        self.findings
            .iter()
            .filter(|f| f.severity >= Severity::Warn && f.blames(self).iter().any(|r| r.id == id))
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Pass)
    }

    /// Recomputes `outcome` from the findings (a skip stays a skip).
    pub fn settle(&mut self) {
        if self.outcome == Severity::Skip && self.findings.iter().all(|f| f.severity <= Severity::Skip) {
            return;
        }
        self.outcome = self
            .findings
            .iter()
            .map(|f| f.severity)
            .filter(|s| *s != Severity::Skip)
            .max()
            .unwrap_or(Severity::Pass);
    }

    /// Whether this result makes the run fail (exit code 1).
    pub fn fails_run(&self, strict: bool) -> bool {
        if matches!(self.expectation, Some(Expectation::ExpectedFailure { .. })) {
            return false;
        }
        if matches!(self.expectation, Some(Expectation::UnexpectedPass { .. })) {
            return true;
        }
        match self.outcome {
            Severity::Fail | Severity::Error => true,
            Severity::Warn => strict,
            // Undecided is not failed, not even under --strict.
            Severity::Pass | Severity::Skip | Severity::Inconclusive => false,
        }
    }
}

/// The results of one suite, scenarios in the suite's own order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteResult {
    /// The suite's id (`controller`).
    pub id: String,
    /// Its title.
    pub title: String,
    /// Where it came from: `builtin:controller.yaml` or a file path.
    pub source: String,
    /// Its scenarios' results.
    pub scenarios: Vec<ScenarioResult>,
}

/// Counts by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Passed scenarios.
    pub pass: usize,
    /// Failed scenarios.
    pub fail: usize,
    /// Scenarios that passed with warnings.
    pub warn: usize,
    /// Skipped scenarios.
    pub skip: usize,
    /// Scenarios the harness could not run.
    pub error: usize,
    /// Scenarios the harness could not decide (witnesses disagreed, a bound ran out).
    #[serde(default)]
    pub inconclusive: usize,
}

impl Counts {
    /// Counts one outcome.
    pub fn add(&mut self, outcome: Severity) {
        match outcome {
            Severity::Pass => self.pass += 1,
            Severity::Fail => self.fail += 1,
            Severity::Warn => self.warn += 1,
            Severity::Skip => self.skip += 1,
            Severity::Error => self.error += 1,
            Severity::Inconclusive => self.inconclusive += 1,
        }
    }

    /// All scenarios counted.
    pub fn total(&self) -> usize {
        self.pass + self.fail + self.warn + self.skip + self.error + self.inconclusive
    }
}

/// Per-RPC latency over the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcLatency {
    /// Calls made.
    pub calls: u64,
    /// Calls answered with an error code (expected ones included).
    pub errors: u64,
    /// Fastest call, in seconds.
    pub min: f64,
    /// Median call, in seconds.
    pub median: f64,
    /// Slowest call, in seconds.
    pub max: f64,
}

/// A whole run: what was tested, with what settings, and every result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The csi-conform version that ran.
    pub tool_version: String,
    /// The plugin's name (GetPluginInfo).
    pub plugin_name: String,
    /// The plugin's vendor_version.
    pub plugin_version: String,
    /// The endpoints tested, as given.
    pub endpoints: Vec<String>,
    /// Every capability the plugin advertised, as `scope:NAME`.
    pub capabilities: Vec<String>,
    /// The seed of property-based checks (replay with `--seed`).
    pub seed: u64,
    /// Whether warnings count as failures.
    pub strict: bool,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// Wall time of the run.
    #[serde(with = "duration_secs")]
    pub duration: Duration,
    /// Results per suite.
    pub suites: Vec<SuiteResult>,
    /// Per-RPC latency, by RPC name.
    #[serde(default)]
    pub rpc_latency: BTreeMap<String, RpcLatency>,
    /// Set when the run was cut short (signal, run timeout): why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// Where each node endpoint's mounts were verified (or why they were not), node 0 first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<MountSite>,
    /// The sizes of the volumes the run created, and why (none: the run created none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<VolumeSizes>,
    /// The CSI spec version the verdicts were judged by, and why (absent in reports of
    /// earlier csi-conform versions, which judged by v1.12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SpecJudged>,
    /// The compatibility matrix, one entry per `--orchestrator` (none without).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orchestrators: Vec<OrchestratorResult>,
    /// What the run left in doubt (calls whose answer never came, teardown that found no
    /// plugin) and asked again before it ended, within the bound it names (none: nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<Settled>,
    /// Requirements that no scenario of this run named and only opt-in suites it did not load
    /// check (`General.concurrency.graceful`: `stress`), each with those suites' names:
    /// neither a gap nor checked by this run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub opt_in_coverage: BTreeMap<String, Vec<String>>,
}

/// What a run asked again before it ended, what is still left, and the bound it asked within.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    /// One line per resource or call undone on asking again.
    pub undone: Vec<String>,
    /// One line per resource or call still left (in the journal, for `csi-conform cleanup`).
    pub left: Vec<String>,
    /// `--reconnect-attempts`: how many passes in a row that undo nothing it takes to give up.
    pub reconnect_attempts: u32,
    /// `--cleanup-timeout`: nothing is asked again past it.
    #[serde(with = "duration_secs")]
    pub cleanup_timeout: Duration,
}

impl fmt::Display for Settled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} undone, {} left; asked again until --reconnect-attempts ({}) passes in a row undid \
             nothing, for at most --cleanup-timeout ({:.3}s)",
            self.undone.len(),
            self.left.len(),
            self.reconnect_attempts,
            self.cleanup_timeout.as_secs_f64(),
        )?;
        if !self.left.is_empty() {
            write!(f, "; what is left stays in the journal for `csi-conform cleanup`")?;
        }
        Ok(())
    }
}

/// Whether a plugin survives one orchestrator's call patterns: a verdict per behaviour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrchestratorResult {
    /// Its `--orchestrator` name (`nomad`).
    pub name: String,
    /// Its name in prose (`Docker Swarm`, `Nomad 1.5`).
    pub title: String,
    /// The release it was pinned to (`--orchestrator nomad@1.5`; none: its current releases,
    /// and the name is the bare one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// One per behaviour the checks drive, in the matrix's order.
    pub behaviours: Vec<BehaviourResult>,
}

/// One cell of the compatibility matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BehaviourResult {
    /// The behaviour's id (`topology.match`), a row of `docs/orchestrators.md`.
    pub id: String,
    /// What the orchestrator does.
    pub summary: String,
    /// The releases it holds for.
    pub holds_for: String,
    /// Where it was read (and the incidents it caused).
    pub source: String,
    /// Where the orchestrator itself bends the spec here: what the spec says (a plugin right
    /// by the spec that breaks here warns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deviation: Option<String>,
    /// pass (exercised, survived), fail, warn, error, or skip (not exercised).
    pub outcome: Severity,
    /// Why it was not exercised, when skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// The instances' findings under it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// The instances that exercised it or found something under it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<String>,
}

impl OrchestratorResult {
    /// How many cells have `outcome`.
    pub fn count(&self, outcome: Severity) -> usize {
        self.behaviours.iter().filter(|b| b.outcome == outcome).count()
    }
}

/// The sizes of a run's volumes: scenarios that test sizes (and the csi-sanity-mapped ones
/// that send its test size) use `--test-volume-size`; every other the smallest volume the
/// plugin serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeSizes {
    /// `--test-volume-size`, bytes.
    pub test_bytes: i64,
    /// The size of volumes whose size does not matter, bytes.
    pub small_bytes: i64,
    /// How the small size was found.
    pub why: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl fmt::Display for VolumeSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} for scenarios whose size does not matter; {} bytes (--test-volume-size) for those about sizes",
            self.why, self.test_bytes
        )
    }
}

/// The CSI spec version a run judged the plugin by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecJudged {
    /// `1.12` or `1.13`.
    pub version: String,
    /// Whether the operator stated it (`--spec-version`) rather than csi-conform inferring it.
    pub stated: bool,
    /// Why, in one sentence.
    pub reason: String,
    /// Everything the run saw of the version the plugin speaks, by the end of the run: the
    /// capabilities it advertises and the answers it gave that only one version defines
    /// (absent in reports of earlier csi-conform versions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<SpecEvidence>,
}

/// One sign of the CSI spec version a plugin speaks, as the report states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecEvidence {
    /// The version that alone defines it, `1.12` or `1.13`.
    pub version: String,
    /// What was seen: `capability node:GET_VOLUME_HEALTH`, `ListVolumes's answer sets
    /// entries[].status.volume_condition`, `NodeGetVolumeHealth answered OK`.
    pub what: String,
    /// Whether it speaks against the version the verdicts were judged by (each such answer
    /// is a warning of the scenario that got it).
    #[serde(default)]
    pub contradicts: bool,
    /// The scenarios whose calls showed it (none for a capability: the fingerprint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<String>,
}

impl fmt::Display for SpecJudged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CSI v{} ({})", self.version, self.reason)
    }
}

impl SpecJudged {
    /// The evidence for a console summary (`None` when there is none): what speaks against
    /// the version judged by in full, what agrees with it counted (the other reports list it).
    pub fn evidence_summary(&self) -> Option<String> {
        if self.evidence.is_empty() {
            return None;
        }
        let agree = self.evidence.iter().filter(|e| !e.contradicts);
        let capabilities = agree.clone().filter(|e| e.scenarios.is_empty()).count();
        let answers = agree.count() - capabilities;
        let counted = format!(
            "{capabilities} capabilit{} and {answers} kind{} of answer that only one version defines",
            if capabilities == 1 { "y" } else { "ies" },
            if answers == 1 { "" } else { "s" }
        );
        if !self.contradicted() {
            return Some(format!("consistent with v{}: {counted} (the JSON and HTML reports list them)", self.version));
        }
        let shown = SpecJudged {
            evidence: self.evidence.iter().filter(|e| e.contradicts).cloned().collect(),
            ..self.clone()
        };
        let items = shown.evidence_line().unwrap_or_default();
        Some(format!("{items}; beside {counted} that agree (the JSON and HTML reports list them)"))
    }

    /// Whether anything the run saw speaks against the version it judged by.
    pub fn contradicted(&self) -> bool {
        self.evidence.iter().any(|e| e.contradicts)
    }

    /// The evidence in one line (`None` when there is none): `capability node:GET_VOLUME_HEALTH
    /// (v1.13); ListVolumes's answer sets ... (v1.12, against v1.13 judged by; in 2 scenarios:
    /// a, b)`.
    pub fn evidence_line(&self) -> Option<String> {
        if self.evidence.is_empty() {
            return None;
        }
        let items: Vec<String> = self
            .evidence
            .iter()
            .map(|e| {
                let mut tail = format!("v{}", e.version);
                if e.contradicts {
                    tail.push_str(&format!(", against the v{} judged by", self.version));
                }
                match e.scenarios.as_slice() {
                    [] => {}
                    [one] => tail.push_str(&format!("; in {one}")),
                    [first, second, ..] if e.scenarios.len() > 3 => {
                        tail.push_str(&format!("; in {} scenarios: {first}, {second}, ...", e.scenarios.len()))
                    }
                    many => tail.push_str(&format!("; in {} scenarios: {}", many.len(), many.join(", "))),
                }
                format!("{} ({tail})", e.what)
            })
            .collect();
        let head = if self.contradicted() {
            "the plugin speaks against the version judged by"
        } else {
            "consistent with the version judged by"
        };
        Some(format!("{head}: {}", items.join("; ")))
    }
}

/// Where the mounts of one node endpoint were verified: the mount namespace of the process
/// serving it, or why the mount checks were skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountSite {
    /// The node endpoint's index (`node: 1` is the second).
    pub node: usize,
    /// The node endpoint, as given.
    pub endpoint: String,
    /// The process serving the endpoint, when known (SO_PEERCRED of a unix socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// That process's mount namespace (`mnt:[4026531841]`), where the mounts were verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Whether that is csi-conform's own mount namespace.
    #[serde(default)]
    pub shared: bool,
    /// Why the mount checks were skipped, when they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The node agent that played this node (`run --node-agents`): its address, host and
    /// the node plugin's node id. The pid and namespace are then the node's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl fmt::Display for MountSite {
    /// One line: `node 0 (unix:///csi.sock): mounts verified in the mount namespace of pid
    /// 4242 (mnt:[4026532301]), not csi-conform's`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {} ({}): ", self.node, self.endpoint)?;
        if let Some(agent) = &self.agent {
            return match (&self.skipped, self.pid, &self.namespace) {
                (Some(why), _, _) => write!(f, "played by {agent}; mount checks skipped: {why}"),
                (None, Some(pid), Some(ns)) => {
                    write!(f, "played by {agent}; mounts verified on that node, in the mount namespace of pid {pid} ({ns})")
                }
                (None, _, _) => write!(f, "played by {agent}; mounts verified on that node"),
            };
        }
        match (&self.skipped, self.pid, &self.namespace) {
            (Some(why), _, _) => write!(f, "mount checks skipped: {why}"),
            (None, Some(pid), Some(ns)) if self.shared => {
                write!(f, "mounts verified in csi-conform's own mount namespace ({ns}), where pid {pid} serves the socket")
            }
            (None, Some(pid), Some(ns)) => {
                write!(f, "mounts verified in the mount namespace of pid {pid} ({ns}), not csi-conform's")
            }
            (None, _, _) => write!(f, "mounts verified in csi-conform's own mount namespace"),
        }
    }
}

impl RunReport {
    /// The result of the scenario with this full id (`lifecycle.mount.read-write`), if it ran.
    pub fn scenario(&self, id: &str) -> Option<&ScenarioResult> {
        self.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id)
    }

    /// Counts of scenario outcomes over all suites.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for s in self.suites.iter().flat_map(|s| &s.scenarios) {
            counts.add(s.outcome);
        }
        counts
    }

    /// Whether the run failed (exit code 1): any failure or error, an unexpected pass of a
    /// listed failure, an interruption, or (with `strict`) any warning.
    pub fn failed(&self) -> bool {
        self.interrupted.is_some()
            || self
                .suites
                .iter()
                .flat_map(|s| &s.scenarios)
                .any(|s| s.fails_run(self.strict))
    }
}

/// Serialises a 0-based step number counted from 1.
pub mod step_from_one {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `step + 1`.
    pub fn serialize<S: Serializer>(step: &Option<usize>, s: S) -> Result<S::Ok, S::Error> {
        match step {
            Some(n) => s.serialize_some(&(n + 1)),
            None => s.serialize_none(),
        }
    }

    /// Reads a step counted from 1 (0 is read as the first step).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
        Ok(Option::<usize>::deserialize(d)?.map(|n| n.saturating_sub(1)))
    }
}

/// Serialises a duration as fractional seconds.
pub mod duration_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Serialises as seconds (f64).
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64((d.as_secs_f64() * 1e6).round() / 1e6)
    }

    /// Deserialises from seconds (f64).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(findings: Vec<Severity>) -> ScenarioResult {
        let mut s = ScenarioResult {
            id: "x".into(),
            title: "x".into(),
            requirements: Vec::new(),
            tags: vec![],
            parity: vec![],
            outcome: Severity::Pass,
            skip_reason: None,
            findings: findings.into_iter().map(|sev| Finding::new(sev, "k", "m")).collect(),
            duration: Duration::ZERO,
            expectation: None,
            rpcs: 0,
            exercised: Vec::new(),
        };
        s.settle();
        s
    }

    #[test]
    fn outcome_is_the_worst_finding() {
        assert_eq!(scenario(vec![]).outcome, Severity::Pass);
        assert_eq!(scenario(vec![Severity::Pass, Severity::Warn]).outcome, Severity::Warn);
        assert_eq!(scenario(vec![Severity::Warn, Severity::Fail, Severity::Pass]).outcome, Severity::Fail);
        assert_eq!(scenario(vec![Severity::Fail, Severity::Error]).outcome, Severity::Error);
    }

    #[test]
    fn inconclusive_is_never_a_pass_and_never_hides_a_warning_or_failure() {
        assert_eq!(scenario(vec![Severity::Pass, Severity::Inconclusive]).outcome, Severity::Inconclusive);
        assert_eq!(scenario(vec![Severity::Skip, Severity::Inconclusive]).outcome, Severity::Inconclusive);
        assert_eq!(scenario(vec![Severity::Inconclusive, Severity::Warn]).outcome, Severity::Warn);
        assert_eq!(scenario(vec![Severity::Fail, Severity::Inconclusive]).outcome, Severity::Fail);
        let undecided = scenario(vec![Severity::Inconclusive]);
        assert!(!undecided.fails_run(false), "inconclusive alone passes the run");
        assert!(!undecided.fails_run(true), "--strict does not turn inconclusive into failure");
        let mut counts = Counts::default();
        counts.add(undecided.outcome);
        assert_eq!((counts.inconclusive, counts.total()), (1, 1));
        assert_eq!(Finding::inconclusive("witnesses", "m").severity, Severity::Inconclusive);
        assert_eq!(Severity::Inconclusive.as_str(), "inconclusive");
        assert_eq!(serde_json::to_string(&Severity::Inconclusive).unwrap(), "\"inconclusive\"");
    }

    #[test]
    fn warnings_fail_only_under_strict_and_expected_failures_do_not_fail() {
        let warn = scenario(vec![Severity::Warn]);
        assert!(!warn.fails_run(false));
        assert!(warn.fails_run(true));
        let mut fail = scenario(vec![Severity::Fail]);
        assert!(fail.fails_run(false));
        fail.expectation = Some(Expectation::ExpectedFailure { reason: "known".into() });
        assert!(!fail.fails_run(false));
        let mut pass = scenario(vec![]);
        pass.expectation = Some(Expectation::UnexpectedPass { reason: "known".into() });
        assert!(pass.fails_run(false));
    }
}
