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
    orchestrator::{CallPattern, Profile, ids},
    report::{BehaviourResult, Finding, OrchestratorResult, ScenarioResult, Severity, SuiteResult},
};


/// Whether a scenario uses a check that follows a call pattern.
fn orchestrated(scenario: &Scenario) -> bool {
    scenario.steps.iter().any(|s| matches!(&s.action, Action::Check(c) if c.check.orchestrated))
}

/// `suites` with the orchestrator-only built-in suite and, after each scenario that uses an
/// orchestrated check, its instances for `orchestrators`; `suites` itself when there are none.
/// With `only` (`--orchestrator-only`), a scenario that has instances is replaced by them.
pub fn with_instances(suites: &[Suite], orchestrators: &[Profile], only: bool) -> Vec<Suite> {
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
            if instances.is_empty() || !(only || scenario.tags.iter().any(|t| t == ORCHESTRATOR_ONLY)) {
                scenarios.push(scenario);
            }
            scenarios.extend(instances);
        }
        suite.scenarios = scenarios;
    }
    all.retain(|s| !s.scenarios.is_empty());
    all
}

/// Feeds `cell` of a row of [`ids::FED_BY`] (nothing for another row) from the plain
/// scenario that drives it: where the defect reaches the orchestrator
/// ([`CallPattern::exposed`]), each finding of the row's kinds at warn or fail turns the
/// cell, a failure where the orchestrator (`pattern`) is stuck for good, none where it takes
/// the refused answer as success ([`CallPattern::forgives`]); without one, the cell passes
/// when the scenario passed or says it got to the row ([`reached`](super::ctx::ScenarioCtx::reached): its other
/// findings are about something else, such as a witness's lie filed under it). A scenario that
/// stopped on something else (a
/// NodeStageVolume refused before the restart, a CreateVolume refused before the lost node's
/// unpublish) may never have got to what the row is about: that is no pass, and the cell
/// stays a skip saying why ([`unjudged`]).
fn feed(cell: &mut BehaviourResult, row: &str, suites: &[SuiteResult], pattern: &CallPattern) {
    let Some((_, scenario, kinds)) = ids::FED_BY.iter().find(|(r, ..)| *r == row) else { return };
    let stuck = pattern.stuck_for_good.contains(&row);
    for s in suites.iter().flat_map(|s| &s.scenarios).filter(|s| s.id == *scenario && s.outcome != Severity::Skip) {
        let of_row = |f: &&Finding| kinds.contains(&f.kind.as_str()) && matches!(f.severity, Severity::Warn | Severity::Fail);
        let got_there = s.outcome == Severity::Pass || s.exercised.iter().any(|e| e == row);
        if !got_there && !s.findings.iter().any(|f| of_row(&f)) {
            continue;
        }
        cell.instances.push(s.id.clone());
        if cell.outcome == Severity::Skip {
            cell.outcome = Severity::Pass;
        }
        if !pattern.exposed(row) {
            continue;
        }
        let hurts = |f: &&Finding| of_row(f) && !pattern.forgives(row, f.rpc.as_deref(), f.got.as_deref());
        for f in s.findings.iter().filter(hurts) {
            cell.outcome = cell.outcome.max(if stuck { Severity::Fail } else { f.severity });
            cell.findings.push(f.clone());
        }
    }
}

/// Why the cell of a row of [`ids::FED_BY`] is a skip, from its scenario: skipped, or not in
/// the run (then nothing for a row the instances drive too: theirs is the reason).
fn fed_skip(row: &str, suites: &[SuiteResult]) -> Option<String> {
    let (_, scenario, _) = ids::FED_BY.iter().find(|(r, ..)| *r == row)?;
    match suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == *scenario) {
        Some(s) if s.outcome != Severity::Skip => Some(unjudged(s)),
        Some(s) => Some(format!("{scenario} was skipped: {}", s.skip_reason.as_deref().unwrap_or("(no reason given)"))),
        None if ids::ALSO_BY_INSTANCES.contains(&row) => None,
        None => {
            let suite = scenario.split('.').next().unwrap_or(scenario);
            Some(format!("{scenario} is not in this run: it is in the opt-in suite {suite} (--suite {suite})"))
        }
    }
}

/// Why a row of [`ids::FED_BY`] is not judged though its scenario `s` ran: it ended on
/// something else than what the row is about, and the first finding at its outcome says what.
fn unjudged(s: &ScenarioResult) -> String {
    let first = s.findings.iter().find(|f| f.severity == s.outcome);
    format!(
        "{} {} on something else ({}) and filed nothing about what this row is about, so the row is not judged",
        s.id,
        match s.outcome {
            Severity::Error => "errored",
            Severity::Inconclusive => "was inconclusive",
            Severity::Warn => "warned",
            _ => "failed",
        },
        first.map_or_else(|| "no finding recorded".to_owned(), |f| f.message.trim().to_owned())
    )
}

/// The compatibility matrix: for each orchestrator, one cell per driven behaviour of its
/// table: the worst finding its instances filed under it, pass when exercised without one,
/// skip when no instance exercised it; the rows of [`ids::FED_BY`] from their scenario.
pub fn matrix(orchestrators: &[Profile], suites: &[SuiteResult]) -> Vec<OrchestratorResult> {
    orchestrators
        .iter()
        .map(|&o| {
            let suffix = format!("@{o}");
            let instances: Vec<_> =
                suites.iter().flat_map(|s| &s.scenarios).filter(|s| s.id.ends_with(&suffix)).collect();
            let mut cells: BTreeMap<&str, BehaviourResult> = BTreeMap::new();
            // The rows of its release (a pinned one has its older rows instead of the new).
            let pattern = o.pattern();
            let behaviours = o.rows().filter(|b| ids::DRIVEN.contains(&b.id));
            for b in behaviours {
                let mut cell = BehaviourResult {
                    id: b.id.to_owned(),
                    summary: b.summary.to_owned(),
                    holds_for: b.holds_for.to_owned(),
                    source: b.source.to_owned(),
                    deviation: pattern.deviation(b.id).map(str::to_owned),
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
                feed(&mut cell, b.id, suites, &pattern);
                if cell.outcome == Severity::Skip {
                    cell.skip_reason = Some(if let Some(why) = pattern.undriven(b.id) {
                        why.to_owned()
                    } else if let Some(why) = fed_skip(b.id, suites) {
                        why
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
                name: o.to_string(),
                title: o.title(),
                release: o.release.map(|r| r.to_string()),
                behaviours: ids::DRIVEN.iter().filter_map(|id| cells.remove(id)).collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrator::{Orchestrator, Release};

    fn suite(text: &str) -> Suite {
        super::super::load_str("test", text).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A plain scenario's result: `outcome`, its `findings`, nothing exercised.
    fn scenario(id: &str, outcome: Severity, findings: Vec<Finding>) -> ScenarioResult {
        ScenarioResult {
            id: id.into(),
            title: String::new(),
            requirements: Vec::new(),
            tags: Vec::new(),
            parity: Vec::new(),
            outcome,
            skip_reason: None,
            findings,
            duration: std::time::Duration::ZERO,
            expectation: None,
            rpcs: 0,
            exercised: Vec::new(),
        }
    }

    const TEXT: &str = "suite: t\ntitle: t\nscenarios:\n  - id: life\n    title: l\n    steps:\n      - check: lifecycle\n\
        \x20 - id: plain\n    title: p\n    steps:\n      - call: Probe\n";

    #[test]
    fn orchestrated_scenarios_get_an_instance_per_orchestrator_right_after_them() {
        let suites = vec![suite(TEXT)];
        assert_eq!(with_instances(&suites, &[], false)[0].scenarios.len(), 2, "no orchestrator: the suites as given");
        assert_eq!(with_instances(&suites, &[], true)[0].scenarios.len(), 2, "nor with --orchestrator-only alone");
        let pinned = Profile { orchestrator: Orchestrator::Nomad, release: Release::parse("1.5") };
        let all = with_instances(&suites, &[Orchestrator::Nomad.into(), pinned, Orchestrator::Swarm.into()], false);
        let ids: Vec<&str> = all[0].scenarios.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["t.life", "t.life@nomad", "t.life@nomad@1.5", "t.life@swarm", "t.plain"]);
        assert_eq!(all[0].scenarios[2].orchestrator, Some(pinned));
        assert_eq!(all[0].scenarios[2].title, "l (as Nomad 1.5 calls the plugin)");
        assert_eq!(all[0].scenarios[3].orchestrator, Some(Orchestrator::Swarm.into()));
        assert_eq!(all[0].scenarios[0].orchestrator, None);
        // The orchestrator-only suite comes along, as instances only.
        let extra: Vec<&str> = all[1..].iter().flat_map(|s| &s.scenarios).map(|s| s.id.as_str()).collect();
        assert!(!extra.is_empty() && extra.iter().all(|id| id.contains('@')), "{extra:?}");
        // --orchestrator-only: the instances instead of the scenario they copy; the rest stays.
        let only = with_instances(&suites, &[Orchestrator::Nomad.into(), Orchestrator::Swarm.into()], true);
        let ids: Vec<&str> = only[0].scenarios.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["t.life@nomad", "t.life@swarm", "t.plain"]);
        assert_eq!(only.len(), all.len());
    }

    #[test]
    fn a_cell_is_the_worst_finding_filed_under_it_pass_when_exercised_skip_otherwise() {
        let result = |id: &str, exercised: &[&str], findings: Vec<Finding>| ScenarioResult {
            exercised: exercised.iter().map(|e| (*e).to_owned()).collect(),
            ..scenario(id, Severity::Pass, findings)
        };
        let filed = |severity, behaviour: &str| Finding { behaviour: Some(behaviour.into()), ..Finding::new(severity, "k", "m") };
        let scenarios = vec![
            result("a@nomad", &["topology.match", "rpc.unstage"], vec![filed(Severity::Warn, "rpc.unstage")]),
            result("b@nomad", &["rpc.unstage"], vec![filed(Severity::Fail, "rpc.unstage")]),
            result("a@swarm", &["topology.match"], vec![filed(Severity::Fail, "topology.match")]),
            result("a", &[], vec![filed(Severity::Fail, "topology.match")]),
        ];
        let suites = vec![SuiteResult { id: "s".into(), title: String::new(), source: String::new(), scenarios }];
        let m = matrix(&[Orchestrator::Nomad.into()], &suites);
        let cell = |id: &str| m[0].behaviours.iter().find(|b| b.id == id).unwrap();
        assert_eq!(cell("topology.match").outcome, Severity::Pass, "another orchestrator's and the base's findings do not count");
        assert_eq!(cell("rpc.unstage").outcome, Severity::Fail);
        assert_eq!(cell("rpc.unstage").instances, ["a@nomad", "b@nomad"]);
        assert_eq!(cell("rpc.unstage").findings.len(), 2);
        assert_eq!(cell("paths.staging").outcome, Severity::Skip);
        assert!(cell("paths.staging").skip_reason.is_some());
        assert!(m[0].behaviours.iter().all(|b| ids::DRIVEN.contains(&b.id.as_str())));
    }

    /// A publish race the stress suite finds turns `concurrency.controller` only for the
    /// orchestrators that overlap ControllerPublishVolume calls for one node (Kubernetes, and
    /// Nomad before its serializer); the others ran it and are not hurt. Without the stress
    /// scenario, the cell keeps the instances' reason.
    #[test]
    fn a_publish_race_turns_the_concurrency_cell_only_where_the_orchestrator_overlaps_publishes() {
        let shared = Finding::new(Severity::Warn, "device-shared", "two volumes at one device");
        let raced = scenario(
            "stress.controller-publish.volumes-at-once",
            Severity::Warn,
            vec![shared, Finding::new(Severity::Warn, "other-kind", "not this row's")],
        );
        let suites = vec![SuiteResult { id: "stress".into(), title: String::new(), source: String::new(), scenarios: vec![raced] }];
        let profiles: Vec<Profile> = vec![
            Orchestrator::Nomad.into(),
            Profile::parse("nomad@1.5").unwrap().remove(0),
            Orchestrator::Kubernetes.into(),
            Orchestrator::Swarm.into(),
        ];
        let m = matrix(&profiles, &suites);
        let cell = |i: usize| m[i].behaviours.iter().find(|b| b.id == ids::CONCURRENCY_CONTROLLER).unwrap();
        for (i, want) in [(0, Severity::Pass), (1, Severity::Warn), (2, Severity::Warn), (3, Severity::Pass)] {
            assert_eq!(cell(i).outcome, want, "{}", m[i].name);
            assert_eq!(cell(i).instances, ["stress.controller-publish.volumes-at-once"], "{}", m[i].name);
            assert_eq!(cell(i).findings.len(), usize::from(want == Severity::Warn), "{}", m[i].name);
        }
        let m = matrix(&profiles, &[]);
        let reason = m[2].behaviours.iter().find(|b| b.id == ids::CONCURRENCY_CONTROLLER).unwrap().skip_reason.clone().unwrap();
        assert!(reason.contains("no scenario ran as Kubernetes"), "{reason}");
        let reason = m[2].behaviours.iter().find(|b| b.id == ids::LOST_NODE).unwrap().skip_reason.clone().unwrap();
        assert!(reason.contains("opt-in suite disruption (--suite disruption)"), "{reason}");
    }

    /// A fed row is judged only by a scenario that got to what it is about. ember-csi 0.9.1 on
    /// Cinder's fake driver refuses NodeStageVolume before any restart: its
    /// `disruption.restart.while-published` failed, and the `restart.node-plugin` cells said
    /// pass, a survived restart that never happened.
    #[test]
    fn a_fed_row_is_judged_only_by_a_scenario_that_got_to_it() {
        let result = scenario;
        let matrix_of = |scenarios: Vec<ScenarioResult>| {
            let suites = vec![SuiteResult { id: "disruption".into(), title: String::new(), source: String::new(), scenarios }];
            matrix(&[Orchestrator::Nomad.into()], &suites)
        };
        let cell = |m: &[OrchestratorResult], id: &str| m[0].behaviours.iter().find(|b| b.id == id).unwrap().clone();
        let (restart, lost) = ("disruption.restart.while-published", "disruption.lost-node.controller-unpublish");
        let refused = |rpc: &str| Finding::new(Severity::Fail, "unexpected-code", format!("{rpc} answered UNKNOWN, expected OK"));

        // Stopped before the restart, and before the lost node's unpublish: neither row judged.
        let m = matrix_of(vec![
            result(restart, Severity::Fail, vec![Finding::new(Severity::Warn, "k", "a warning first"), refused("NodeStageVolume")]),
            result(lost, Severity::Fail, vec![refused("CreateVolume")]),
        ]);
        let (r, l) = (cell(&m, ids::RESTART_NODE), cell(&m, ids::LOST_NODE));
        assert_eq!((r.outcome, l.outcome), (Severity::Skip, Severity::Skip), "{r:#?} {l:#?}");
        assert!(r.instances.is_empty() && r.findings.is_empty(), "{r:#?}");
        let why = r.skip_reason.unwrap();
        assert!(why.contains(restart) && why.contains("NodeStageVolume answered UNKNOWN"), "{why}");
        assert!(l.skip_reason.unwrap().contains("CreateVolume answered UNKNOWN"));

        // A finding of the row's kinds turns it, whatever else the scenario found.
        let lost_state = Finding::new(Severity::Fail, "restart-lost-state", "NodePublishVolume answered NOT_FOUND");
        let m = matrix_of(vec![
            result(restart, Severity::Fail, vec![lost_state, refused("NodeUnstageVolume")]),
            result(lost, Severity::Pass, Vec::new()),
        ]);
        let (r, l) = (cell(&m, ids::RESTART_NODE), cell(&m, ids::LOST_NODE));
        assert_eq!((r.outcome, l.outcome), (Severity::Fail, Severity::Pass));
        assert_eq!(r.findings.iter().map(|f| f.kind.as_str()).collect::<Vec<_>>(), ["restart-lost-state"]);
        assert_eq!((r.instances, l.instances), (vec![restart.to_owned()], vec![lost.to_owned()]));

        // Failed on something else after it got to the row (hostpath's lying ControllerGetVolume
        // filed under the node-reboot scenario): the row is judged, and passes.
        let mut got_there = result(restart, Severity::Fail, vec![Finding::new(Severity::Fail, "lying-witness", "a lie")]);
        got_there.exercised = vec![ids::RESTART_NODE.to_owned()];
        let m = matrix_of(vec![got_there]);
        let r = cell(&m, ids::RESTART_NODE);
        assert_eq!((r.outcome, r.findings.len()), (Severity::Pass, 0), "{r:#?}");
    }

    /// The lost-node path row: a refusal of a node call for a path a reboot took away fails
    /// the cells of the orchestrators it leaves stuck, but not Nomad's where Nomad takes the
    /// answer as done (NOT_FOUND); another code fails Nomad's too.
    #[test]
    fn a_refusal_an_orchestrator_takes_as_done_turns_no_cell_of_it() {
        let refused = |rpc: &str, got: &str| Finding {
            rpc: Some(rpc.into()),
            got: Some(got.into()),
            ..Finding::new(Severity::Fail, "paths-gone", "m")
        };
        let cells = |findings: Vec<Finding>| {
            let outcome = if findings.is_empty() { Severity::Pass } else { Severity::Fail };
            let gone = scenario("disruption.lost-node.node-paths-gone", outcome, findings);
            let suites = vec![SuiteResult { id: "s".into(), title: String::new(), source: String::new(), scenarios: vec![gone] }];
            let all: Vec<Profile> = Orchestrator::ALL.iter().map(|&o| o.into()).collect();
            matrix(&all, &suites)
                .into_iter()
                .map(|o| {
                    let b = o.behaviours.into_iter().find(|b| b.id == ids::LOST_NODE_PATHS).unwrap();
                    (o.name, b.outcome, b.findings.len())
                })
                .collect::<Vec<_>>()
        };
        let not_found = vec![refused("NodeUnpublishVolume", "NOT_FOUND"), refused("NodeUnstageVolume", "NOT_FOUND")];
        let want = [("nomad", Severity::Pass, 0), ("kubernetes", Severity::Fail, 2), ("swarm", Severity::Fail, 2)];
        assert_eq!(cells(not_found), want.map(|(o, s, n)| (o.to_owned(), s, n)));
        let internal = vec![refused("NodeUnpublishVolume", "NOT_FOUND"), refused("NodeUnstageVolume", "INTERNAL")];
        let want = [("nomad", Severity::Fail, 1), ("kubernetes", Severity::Fail, 2), ("swarm", Severity::Fail, 2)];
        assert_eq!(cells(internal), want.map(|(o, s, n)| (o.to_owned(), s, n)));
        let none = cells(Vec::new());
        assert!(none.iter().all(|(_, s, n)| *s == Severity::Pass && *n == 0), "{none:?}");
    }
}
