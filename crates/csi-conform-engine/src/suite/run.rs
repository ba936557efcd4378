//! Running suites against a plugin: selection (focus/skip), gating on capabilities, node
//! count and opt-ins, concurrent scenarios (up to `jobs`, within the budgets; `serial` ones
//! alone, `exclusive` ones beside scenarios that do not change their pools), each run
//! through its context (`ctx.rs`, steps in `steps.rs`) and torn down, latency, and the
//! [`RunReport`]. The top of the engine: nothing under `src/suite/` imports it but `mod.rs`.
//! Secret values never leave it: every finding is scrubbed of the secrets file's values.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    future::Future,
    path::PathBuf,
    sync::{Arc, Mutex, atomic::AtomicBool},
    time::{Duration, Instant},
};

use super::{
    budget::{self, Budget, Queue, Ticket},
    builtin_vars,
    ctx::{Flow, ScenarioCtx, Shared, node_inspector},
    load::OPTIONS,
    model::*,
    paths::{RunPaths, ScenarioPaths},
    probe,
    settings::{AccessType, Plugin, RunConfig},
    steps,
    verifier::{Amendment, Verifier},
};
use crate::{
    client::Connection,
    fingerprint::{Capability, PluginService},
    report::{Finding, RpcLatency, RunReport, ScenarioResult, Severity, SuiteResult},
};

/// Runs suites against a plugin and returns the report. Never panics on plugin behaviour; an
/// unreachable plugin turns the affected scenarios into errors.
pub async fn run(plugin: &Plugin, suites: &[Suite], config: &RunConfig) -> RunReport {
    run_until(plugin, suites, config, std::future::pending()).await
}

/// Like [`run`], but stops starting scenarios when `stop` completes (a signal, say) with the
/// reason it gives; scenarios in flight end after their current step and are torn down.
pub async fn run_until(
    plugin: &Plugin,
    suites: &[Suite],
    config: &RunConfig,
    stop: impl Future<Output = String>,
) -> RunReport {
    let started_at =
        time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
    let started = Instant::now();
    // With --orchestrator, the instances of orchestrated scenarios (the engine copies them;
    // what an orchestrator does is in the pattern their checks read).
    let expanded = super::instances::with_instances(suites, &config.orchestrators, config.orchestrator_only);
    let suites = expanded.as_slice();
    // Names never come from the seed (see `builtin_vars::run_id`).
    let run_id = builtin_vars::run_id();
    config.scrubber.add(config.secrets.values().flat_map(|m| m.values()));
    let paths = RunPaths::open_journaled(&config.paths, &config.work_dir, &run_id, config.observer.clone()).await;
    let node_access = config.node_access();
    let mut inspectors = Vec::new();
    for (index, conn) in plugin.nodes.iter().enumerate() {
        inspectors.push(node_inspector(index, conn, &node_access).await);
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
    let budget = Budget::new(limits, config.budgets.contention_timeout);
    let secrets = config.secrets();
    let lookups = config.delete_lookups(secrets.clone());
    let requests = config.requests(secrets);
    let shared = Arc::new(Shared {
        plugin: plugin.clone(),
        config: config.clone(),
        suites: suites.to_vec(),
        paths,
        inspectors: Mutex::new(inspectors),
        run_id,
        budget: budget.clone(),
        stopping: AtomicBool::new(false),
        stop_reason: Mutex::new(None),
        dead: Mutex::new(HashMap::new()),
        reconnecting: tokio::sync::Mutex::new(()),
        facts: std::sync::OnceLock::new(),
        versions: Mutex::new(BTreeMap::new()),
        controller_publish: tokio::sync::Mutex::new(()),
        in_flight: super::inflight::InFlight::default(),
        verifier: Verifier::new(plugin.clone(), lookups.clone(), config.observer.clone(), budget),
        lookups,
        node_access,
        requests,
        safety: config.safety(),
        restarts: config.restarts(),
    });
    shared.verifier.start();
    let selected: Vec<(usize, usize)> = suites
        .iter()
        .enumerate()
        .flat_map(|(si, s)| s.scenarios.iter().enumerate().map(move |(ci, c)| (si, ci, c)))
        .filter(|(_, _, c)| config.selects(c))
        .map(|(si, ci, _)| (si, ci))
        .collect();
    // What scenarios need to know of the plugin (the smallest volume it serves, ids it
    // deleted), found out once, and only when a selected scenario uses it (the probe creates
    // and deletes a volume: a run that needs neither asks for no more than it did).
    let beyond_identity = selected.iter().any(|&(si, ci)| probe::needs_facts(&suites[si].scenarios[ci]));
    let timeout = config.timeout;
    let deadline = async move {
        match timeout {
            Some(t) => {
                tokio::time::sleep(t).await;
                format!("the run timeout of {} (--run-timeout) was reached", crate::client::human_duration(t))
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
    let mut facts = Default::default();
    if beyond_identity {
        // A stop (a signal, the run timeout) ends the probe where it is; what it made is in
        // the journal, and no scenario starts.
        tokio::select! {
            found = probe::probe(&shared) => facts = found,
            reason = &mut stop => {
                stop_fired = true;
                shared.stop(reason);
            }
        }
    }
    let _ = shared.facts.set(facts);

    let mut results: Vec<Option<ScenarioResult>> = vec![None; selected.len()];
    if let Some(progress) = &config.progress {
        progress.begin(selected.len());
    }

    let mut tasks = tokio::task::JoinSet::new();
    let mut task_index: HashMap<tokio::task::Id, usize> = HashMap::new();
    let mut queue = start_order(&shared, &selected);
    while !stop_fired {
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
            let result = run_scenario(&shared, si, ci, &ticket).await;
            if let Some(p) = &progress {
                p.finished(&result);
            }
            // Its resources go back only now: a scenario reported finished holds nothing
            // another one has started with.
            drop(ticket);
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
                    "teardown did not finish within the cleanup timeout of {} (--cleanup-timeout); abandoning {} scenario(s), what they created stays in the journal",
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
    // What the scenarios deleted and the verifier has not decided yet, decided now (before
    // the journal closes); a scenario it finds more in is amended.
    let mut amendments = shared.verifier.close(interrupted.is_some()).await;
    refile_under_the_rules_own_scenario(&mut amendments, &results);
    for (index, &(si, ci)) in selected.iter().enumerate() {
        let id = &suites[si].scenarios[ci].id;
        if let (Some(result), Some(amendment)) = (results[index].as_mut(), amendments.get(id)) {
            amend(&shared, result, amendment);
        }
    }
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
                        "{reason}; the scenario did not finish its teardown within the cleanup timeout of {} (--cleanup-timeout): \
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

    let orchestrators = super::instances::matrix(&config.orchestrators, &suite_results);
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
        sizes: shared.facts().small.as_ref().map(|(small, why)| crate::report::VolumeSizes {
            test_bytes: config.volume_size,
            small_bytes: *small,
            why: why.clone(),
        }),
        orchestrators,
        settled: None,
        opt_in_coverage: opt_in_coverage(suites),
        spec: Some(spec_judged(&fp.spec, &shared.versions.lock().unwrap_or_else(|p| p.into_inner()))),
    }
}

/// The requirements no scenario of `suites` names that only opt-in suites not among them
/// check, with those suites.
fn opt_in_coverage(suites: &[Suite]) -> BTreeMap<String, Vec<String>> {
    let named: BTreeSet<&str> =
        suites.iter().flat_map(|s| s.scenarios()).flat_map(|sc| sc.spec()).map(String::as_str).collect();
    super::builtin::only_opt_in()
        .iter()
        .filter(|(id, _)| !named.contains(id.as_str()))
        .map(|(id, opt_in)| {
            let left_out = opt_in.iter().filter(|name| !suites.iter().any(|s| s.id() == **name)).map(|n| (*n).to_owned());
            (id.clone(), left_out.collect::<Vec<_>>())
        })
        .filter(|(_, left_out)| !left_out.is_empty())
        .collect()
}

/// The version the run judged by and everything it saw of the one the plugin speaks: what
/// it advertises (contradicting only a stated version), then what its answers showed.
fn spec_judged(
    assumed: &crate::version::Assumed,
    answers: &BTreeMap<crate::version::Evidence, BTreeSet<String>>,
) -> crate::report::SpecJudged {
    let advertised = assumed.advertised.iter().map(|e| crate::report::SpecEvidence {
        version: e.version.as_str().to_owned(),
        what: e.what.clone(),
        contradicts: assumed.stated && e.version != assumed.version,
        scenarios: Vec::new(),
    });
    let answered = answers.iter().map(|(e, scenarios)| crate::report::SpecEvidence {
        version: e.version.as_str().to_owned(),
        what: e.what.clone(),
        contradicts: assumed.contradicted_by(e),
        scenarios: scenarios.iter().cloned().collect(),
    });
    crate::report::SpecJudged {
        version: assumed.version.as_str().to_owned(),
        stated: assumed.stated,
        reason: assumed.reason.clone(),
        evidence: advertised.chain(answered).collect(),
    }
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
    ids.iter()
        .filter_map(|id| crate::spec::lookup(id))
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
        rpcs: 0,
        exercised: Vec::new(),
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
    let sizing = config.sizing(shared.facts());
    let scenario = |i: usize| &shared.suites[selected[i].0].scenarios[selected[i].1];
    let demands: Vec<budget::Demand> = (0..selected.len())
        .map(|i| {
            if gate(shared, scenario(i)).is_some() {
                budget::Demand::default()
            } else {
                budget::demand(scenario(i), fp, &sizing)
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..selected.len()).collect();
    if config.jobs > 1 {
        let costs: Vec<u64> = (0..selected.len()).map(|i| budget::cost(scenario(i), fp, &sizing)).collect();
        // Scenarios that hold a pool exclusively first, while nothing that changes it has
        // started (scenarios that leave it alone run beside them): those holding the volumes
        // before those holding the snapshots, since nearly every scenario changes the volumes
        // and a scenario holding them exclusively later would wait for all of those to end.
        // Then the longest first; the ones that run alone last.
        let first_pool = |d: &budget::Demand| d.exclusive.iter().min().copied();
        order.sort_by_key(|&i| {
            let d = &demands[i];
            (d.alone, first_pool(d).is_none(), first_pool(d), std::cmp::Reverse(costs[i]))
        });
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
    // A controller endpoint is needed by a call step to a controller-side RPC, and by a
    // scenario that needs a controller-side service: implied by what its checks and
    // properties may call, or named in its `requires` (a suite that says `implicit_requires:
    // false`, like `existing`, whose check calls ControllerPublishVolume only when advertised,
    // names what it needs itself).
    let controller_side = |c: &Capability| match c {
        Capability::Plugin(service) => matches!(
            service,
            PluginService::ControllerService | PluginService::GroupControllerService | PluginService::SnapshotMetadataService
        ),
        Capability::Controller(_) | Capability::Group(_) => true,
        Capability::Node(_) | Capability::Expansion(_) => false,
    };
    let needs_controller = scenario.implied.iter().chain(&scenario.requires.capabilities).any(controller_side)
        || scenario.steps.iter().any(|s| match &s.action {
            Action::Call(c) => !matches!(c.method.parent_service().name(), "Node" | "Identity"),
            Action::Check(_) | Action::Property(_) | Action::Assert(_) => false,
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
        if shared.requests.secrets.get(key).is_none_or(BTreeMap::is_empty) {
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

async fn run_scenario(shared: &Arc<Shared>, si: usize, ci: usize, ticket: &Ticket) -> ScenarioResult {
    let scenario = &shared.suites[si].scenarios[ci];
    let index = ticket.index;
    let started = Instant::now();
    let mut result = blank_result(scenario);
    if let Some(reason) = gate(shared, scenario).or_else(|| ticket.too_big.clone()) {
        result.outcome = Severity::Skip;
        result.skip_reason = Some(reason);
        return result;
    }
    if let Some(reason) = shared.stopped() {
        result.outcome = Severity::Skip;
        result.skip_reason = Some(format!("not run: {reason}"));
        return result;
    }
    // Paths are made only for a scenario that may use them; the others get their names, and
    // run even when the run's path roots could not be made.
    let made = match &shared.paths {
        Ok(paths) if scenario.uses_paths() => paths.scenario(index, &scenario.id).await.map_err(|e| e.to_string()),
        Ok(paths) => Ok(paths.names(index, &scenario.id)),
        Err(e) if scenario.uses_paths() => Err(e.to_string()),
        Err(_) => Ok(ScenarioPaths::in_dir(PathBuf::new(), PathBuf::new())),
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
    let flow = steps::run_steps(&mut ctx, &scenario.steps).await;
    ctx.teardown().await;
    if let Ok(run_paths) = &shared.paths {
        if scenario.uses_paths() {
            run_paths.release(ctx.paths(), ctx.added_paths()).await;
        } else {
            run_paths.release_own(ctx.added_paths());
        }
    }
    result.findings = ctx.findings().iter().map(|f| scrub_finding(shared, f)).collect();
    result.rpcs = ctx.rpcs();
    result.exercised = ctx.exercised().map(str::to_owned).collect();
    if let Flow::Skip(reason) = flow {
        result.outcome = Severity::Skip;
        result.skip_reason = Some(shared.scrub(&reason));
    }
    result.settle();
    result.duration = started.elapsed();
    tracing::info!(scenario = %result.id, outcome = %result.outcome, "scenario done");
    result
}

/// A witness caught lying is one finding for the run, filed under the scenario that tests the
/// rule it broke (`extras.controller-get-volume.not-found` for
/// `ControllerGetVolume.errors.not-found`; the first by id) when the run has one, so that no
/// scenario about another RPC (the delete whose look-up it was) fails for it. Without such a
/// scenario it stays where the verifier filed it: the first scenario (by id) whose delete
/// needed the witness. Either way the same scenario at any `--jobs`.
fn refile_under_the_rules_own_scenario(amendments: &mut BTreeMap<String, Amendment>, results: &[Option<ScenarioResult>]) {
    let owner = |requirement: &str| {
        results
            .iter()
            .flatten()
            .filter(|r| r.outcome != Severity::Skip && r.requirements.iter().any(|q| q.id == requirement))
            .map(|r| r.id.clone())
            .min()
    };
    let mut moved = Vec::new();
    for (scenario, amendment) in amendments.iter_mut() {
        amendment.findings.retain(|f| {
            let target = (f.kind == "lying-witness")
                .then(|| f.requirements.first().and_then(|r| owner(r)))
                .flatten()
                .filter(|t| t != scenario);
            match target {
                Some(t) => {
                    moved.push((t, f.clone()));
                    false
                }
                None => true,
            }
        });
    }
    for (scenario, f) in moved {
        amendments.entry(scenario).or_default().findings.push(f);
    }
}

/// Adds what the verifier found after the scenario ended to its result; a changed outcome
/// is told to the console.
fn amend(shared: &Shared, result: &mut ScenarioResult, amendment: &Amendment) {
    result.rpcs += amendment.rpcs;
    let before = result.outcome;
    for f in &amendment.findings {
        let f = scrub_finding(shared, f);
        if !result.findings.iter().any(|g| g.repeats(&f)) {
            result.findings.push(f);
        }
    }
    result.settle();
    if result.outcome != before
        && let Some(progress) = &shared.config.progress
    {
        progress.amended(result);
    }
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
        requirements: f.requirements.clone(),
        behaviour: f.behaviour.clone(),
        evidence: f
            .evidence
            .iter()
            .map(|e| crate::report::Evidence { object: shared.scrub(&e.object), claim: shared.scrub(&e.claim), ..e.clone() })
            .collect(),
        node: f.node.clone(),
    }
}

#[cfg(test)]
mod opt_in_tests {
    use super::*;

    /// The default suites leave `General.concurrency.graceful`, the snapshot fan-out's
    /// `CreateSnapshot.snapshot.id-unique` and the lost objects' `*.exists` to `--suite
    /// stress`; a run that loads it has nothing left to credit.
    #[test]
    fn a_run_credits_what_only_the_opt_in_suites_it_did_not_load_check() {
        let mut suites = super::super::builtin::builtin();
        let only = opt_in_coverage(&suites);
        let stress = || vec!["stress".to_owned()];
        let want = BTreeMap::from([
            ("CreateSnapshot.snapshot.exists".to_owned(), stress()),
            ("CreateSnapshot.snapshot.id-unique".to_owned(), stress()),
            ("CreateVolume.volume.exists".to_owned(), stress()),
            ("General.concurrency.graceful".to_owned(), stress()),
        ]);
        assert_eq!(only, want);
        suites.push(super::super::builtin::opt_in_suite("stress").unwrap().unwrap());
        assert!(opt_in_coverage(&suites).is_empty());
    }
}
