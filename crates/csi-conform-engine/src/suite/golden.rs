//! Golden tables of the scheduler's view of every built-in scenario (a unit test only): the
//! demand and cost it computes for each, against a bare one-node plugin and a two-node plugin
//! that advertises every capability a built-in scenario names (with and without an attach
//! limit). A refactor of the engine must leave `golden/demand.txt` unchanged; a deliberate
//! change rewrites it with `GOLDEN_BLESS=1 cargo test --lib golden`.

use std::fmt::Write as _;

use super::{
    budget::{Sizing, cost, demand},
    builtin,
    settings::tests_support::fingerprint,
};
use crate::fingerprint::{Capability, ControllerInfo, Fingerprint, GroupControllerInfo};

const SIZING: Sizing = Sizing { volume_size: 100, small_size: 10, expand_size: 300, small_expand_size: 20, idempotency_count: 3, property_cases: 16, jobs: 4 };

/// A two-node fingerprint advertising every capability a built-in scenario's `when:` names.
fn everything(max_volumes_per_node: i64) -> Fingerprint {
    let mut fp = fingerprint(2);
    let endpoint = fp.plugin.endpoint.clone();
    for scenario in builtin().iter().flat_map(|s| &s.scenarios) {
        for c in scenario.steps.iter().flat_map(|s| &s.when).map(|c| c.capability) {
            match c {
                Capability::Plugin(c) => {
                    fp.capabilities.services.insert(c);
                }
                Capability::Expansion(c) => {
                    fp.capabilities.volume_expansion.insert(c);
                }
                Capability::Controller(c) => {
                    fp.controller
                        .get_or_insert_with(|| ControllerInfo { endpoint: endpoint.clone(), capabilities: Default::default() })
                        .capabilities
                        .insert(c);
                }
                Capability::Node(c) => fp.nodes.iter_mut().for_each(|n| {
                    n.capabilities.insert(c);
                }),
                Capability::Group(c) => {
                    fp.group_controller
                        .get_or_insert_with(|| GroupControllerInfo { capabilities: Default::default() })
                        .capabilities
                        .insert(c);
                }
            }
        }
    }
    fp.nodes.iter_mut().for_each(|n| n.max_volumes_per_node = max_volumes_per_node);
    fp
}

fn table() -> String {
    let plugins = [("bare", fingerprint(1)), ("all", everything(0)), ("all+limit3", everything(3))];
    let mut out = String::new();
    for suite in builtin() {
        for scenario in &suite.scenarios {
            for (name, fp) in &plugins {
                let d = demand(scenario, fp, &SIZING);
                writeln!(out, "{} [{name}] cost={} {d:?}", scenario.id, cost(scenario, fp, &SIZING)).unwrap();
            }
        }
    }
    out
}

#[test]
fn every_builtin_scenarios_demand_and_cost_is_the_golden_one() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/suite/golden/demand.txt");
    let now = table();
    if std::env::var_os("GOLDEN_BLESS").is_some() {
        std::fs::write(&path, &now).unwrap();
    }
    let golden = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(now.lines().count() > 100, "too few scenarios: {now}");
    for (i, (a, b)) in golden.lines().zip(now.lines()).enumerate() {
        assert_eq!(a, b, "line {} of {} differs", i + 1, path.display());
    }
    assert_eq!(golden.lines().count(), now.lines().count(), "{} has another number of lines", path.display());
}
