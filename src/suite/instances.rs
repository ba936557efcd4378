//! Orchestrator instances (`--orchestrator`): every scenario that uses an orchestrated check
//! runs once more per chosen orchestrator as `<id>@<orchestrator>`, carrying that
//! orchestrator's call pattern down to its checks as a value, and the compatibility matrix is
//! folded from the instances' results and the orchestrators' tables. The engine never looks
//! at an orchestrator's name: it copies scenarios and counts findings by behaviour id.

use std::collections::BTreeMap;

use super::{
    builtin,
    model::{Action, ORCHESTRATOR_ONLY, Scenario, Suite},
};
use crate::{
    orchestrator::{Orchestrator, ids},
    report::{BehaviourResult, OrchestratorResult, Severity, SuiteResult},
};


/// Whether a scenario uses a check that follows a call pattern.
fn orchestrated(scenario: &Scenario) -> bool {
    scenario.steps.iter().any(|s| matches!(&s.action, Action::Check(c) if c.check.orchestrated))
}

/// `suites` with the orchestrator-only built-in suite and, after each scenario that uses an
/// orchestrated check, its instances for `orchestrators`; `suites` itself when there are none.
pub fn with_instances(suites: &[Suite], orchestrators: &[Orchestrator]) -> Vec<Suite> {
    if orchestrators.is_empty() {
        return suites.to_vec();
    }
    let mut all: Vec<Suite> = suites.to_vec();
    all.extend(builtin::orchestrator_suites());
    for suite in &mut all {
        let mut scenarios = Vec::new();
        for scenario in std::mem::take(&mut suite.scenarios) {
            let instances: Vec<Scenario> = if orchestrated(&scenario) {
                orchestrators
                    .iter()
                    .map(|&o| {
                        let mut s = scenario.clone();
                        s.id = format!("{}@{o}", scenario.id);
                        s.title = format!("{} (as {} calls the plugin)", scenario.title, o.title());
                        s.orchestrator = Some(o);
                        s
                    })
                    .collect()
            } else {
                Vec::new()
            };
            if !scenario.tags.iter().any(|t| t == ORCHESTRATOR_ONLY) {
                scenarios.push(scenario);
            }
            scenarios.extend(instances);
        }
        suite.scenarios = scenarios;
    }
    all.retain(|s| !s.scenarios.is_empty());
    all
}

/// The compatibility matrix: for each orchestrator, one cell per driven behaviour of its
/// table: the worst finding its instances filed under it, pass when exercised without one,
/// skip when no instance exercised it.
pub fn matrix(orchestrators: &[Orchestrator], suites: &[SuiteResult]) -> Vec<OrchestratorResult> {
    orchestrators
        .iter()
        .map(|&o| {
            let suffix = format!("@{o}");
            let instances: Vec<_> =
                suites.iter().flat_map(|s| &s.scenarios).filter(|s| s.id.ends_with(&suffix)).collect();
            let mut cells: BTreeMap<&str, BehaviourResult> = BTreeMap::new();
            let behaviours = o.table().iter().filter(|b| ids::DRIVEN.contains(&b.id));
            for b in behaviours {
                let mut cell = BehaviourResult {
                    id: b.id.to_owned(),
                    summary: b.summary.to_owned(),
                    holds_for: b.holds_for.to_owned(),
                    source: b.source.to_owned(),
                    deviation: o.pattern().deviation(b.id).map(str::to_owned),
                    outcome: Severity::Skip,
                    skip_reason: None,
                    findings: Vec::new(),
                    instances: Vec::new(),
                };
                for s in &instances {
                    let found: Vec<_> =
                        s.findings.iter().filter(|f| f.behaviour.as_deref() == Some(b.id) && f.severity > Severity::Pass).collect();
                    let ran = s.exercised.iter().any(|e| e == b.id);
                    if !ran && found.is_empty() {
                        continue;
                    }
                    cell.instances.push(s.id.clone());
                    if cell.outcome == Severity::Skip {
                        cell.outcome = Severity::Pass;
                    }
                    for f in found.into_iter().filter(|f| f.severity != Severity::Skip) {
                        cell.outcome = cell.outcome.max(f.severity);
                        cell.findings.push(f.clone());
                    }
                }
                if cell.outcome == Severity::Skip {
                    cell.skip_reason = Some(if let Some(why) = o.pattern().undriven(b.id) {
                        why.to_owned()
                    } else if instances.is_empty() {
                        format!("no scenario ran as {} calls the plugin (none selected, or all skipped)", o.title())
                    } else {
                        format!(
                            "no {} instance got to it (they were skipped, stopped earlier, or the plugin lacks the \
                             capability it needs)",
                            o.title()
                        )
                    });
                }
                cells.insert(b.id, cell);
            }
            OrchestratorResult {
                name: o.name().to_owned(),
                title: o.title().to_owned(),
                behaviours: ids::DRIVEN.iter().filter_map(|id| cells.remove(id)).collect(),
            }
        })
        .collect()
}
