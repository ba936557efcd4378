//! What one scenario holds on the plugin at once (publications per node, live volumes and
//! their bytes, whether it runs alone, the pools it changes or holds exclusively), and how
//! long it takes in RPCs: the demand that the scheduler in the parent module keeps within the
//! limits. Derived from its steps and from what its named checks declare in their specs,
//! never from a check's name.

use crate::{
    fingerprint::Fingerprint,
    suite::{
        catalog::CheckUse,
        model::{Action, Call, CheckStep, Pool, Repeat, Scenario, Step},
    },
    yaml::Plain,
};

/// The run's sizes a scenario's demand depends on.
#[derive(Debug, Clone, Copy)]
pub struct Sizing {
    /// `--test-volume-size`.
    pub volume_size: i64,
    /// The size of volumes whose size does not matter: the smallest the plugin serves
    /// (`${small_volume_size}`, and what named checks and properties create).
    pub small_size: i64,
    /// The expansion target.
    pub expand_size: i64,
    /// The expansion target of a small volume (`${small_expand_size}`).
    pub small_expand_size: i64,
    /// `--idempotency-count`.
    pub idempotency_count: u32,
    /// `--property-cases`.
    pub property_cases: u32,
    /// `--jobs`.
    pub jobs: usize,
}

/// What one scenario (or one property case) holds on the plugin at most, at once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Demand {
    /// Volumes published at once on each node endpoint (by index; missing: none).
    pub publish: Vec<u32>,
    /// Test volumes alive at once.
    pub volumes: u32,
    /// Their bytes.
    pub bytes: i64,
    /// Runs with nothing else (a `serial` scenario, the attach-limit check).
    pub alone: bool,
    /// Pools no other running scenario may change meanwhile (`exclusive:`).
    pub exclusive: Vec<Pool>,
    /// Pools it may change (by the RPCs it may call), and so may not while another scenario
    /// holds them exclusively. Includes its exclusive ones.
    pub changes: Vec<Pool>,
    /// It creates a volume of a size the plugin picks (no capacity range): budgeted as all
    /// the bytes there are, so that nothing else holds any while it runs.
    pub plugin_sized: bool,
}

impl Demand {
    /// One more volume of `bytes` (a property case's).
    pub fn volume(bytes: i64) -> Demand {
        Demand { volumes: 1, bytes, ..Demand::default() }
    }

    /// Whether it holds anything countable.
    pub(super) fn holds(&self) -> bool {
        self.volumes > 0 || self.bytes > 0 || self.publish.iter().any(|&n| n > 0)
    }
}

/// Whether a step of `scenario` runs against this plugin (its `when:` holds).
fn runs(step: &Step, fp: &Fingerprint) -> bool {
    step.when.iter().all(|c| fp.supports(c.capability) != c.negated)
}

/// A map entry of a YAML mapping node.
fn entry<'a>(node: &'a crate::yaml::Node, key: &str) -> Option<&'a crate::yaml::Node> {
    node.as_map()?.iter().find(|(k, _)| k.scalar_text() == Some(key)).map(|(_, v)| v)
}

/// The bytes a CreateVolume step asks for: its literal `capacity_range.required_bytes` (or
/// `limit_bytes`), the size of the variable they name (the small size, its expansion target,
/// the expansion target, else the test volume size), `None` when it sends no capacity range
/// (the plugin picks the size).
fn requested_bytes(call: &Call, sizing: &Sizing) -> Option<i64> {
    let range = call.request.node().and_then(|n| entry(n, "capacity_range")).filter(|r| !r.is_null())?;
    let literal = |key| match entry(range, key).and_then(crate::yaml::Node::plain) {
        Some(Plain::Int(i)) => i64::try_from(i).ok().filter(|&b| b > 0),
        _ => None,
    };
    let mentions = |word: &str| {
        ["required_bytes", "limit_bytes"]
            .iter()
            .filter_map(|k| entry(range, k).and_then(crate::yaml::Node::scalar_text))
            .any(|t| t.contains(word))
    };
    let by_name = if mentions("small_expand_size") {
        sizing.small_expand_size
    } else if mentions("small_volume_size") {
        sizing.small_size
    } else if mentions("expand_size") {
        sizing.expand_size
    } else {
        sizing.volume_size
    };
    Some(literal("required_bytes").or_else(|| literal("limit_bytes")).unwrap_or(by_name))
}

/// What `scenario` holds at most, derived from its steps (those whose `when:` holds) and
/// what its named checks declare:
/// - a CreateVolume call expected to succeed: one live volume; ControllerPublishVolume
///   (to `${node.id}`, node 0), NodeStageVolume and NodePublishVolume calls expected to
///   succeed: publications on their node, never more than the volumes the calls create;
/// - a named check: the volumes, publications per node, expansion and running alone its
///   spec's [`demand`](crate::suite::catalog::CheckSpec::demand) says, and the pools it holds;
/// - a property whose cases create volumes: one (further cases run beside it only while the
///   budget has room, see [`Budget::try_extra`]);
/// - the pools it changes: those any RPC it may call (a call step whatever it expects, a named
///   check's or property's RPCs) changes, and those its named checks hold.
///
/// Bytes are what its CreateVolume calls ask for, plus the small size for every volume of a
/// named check or property, plus for every volume what its largest expansion adds.
pub fn demand(scenario: &Scenario, fp: &Fingerprint, sizing: &Sizing) -> Demand {
    let nodes = fp.nodes.len().max(1);
    let mut called_volumes = 0u32;
    let mut called_bytes = 0i64;
    let mut plugin_sized = false;
    let mut other_volumes = 0u32;
    // How much an expanded volume grows (the largest of its expansions).
    let mut grown = 0i64;
    let small_grown = sizing.small_expand_size.saturating_sub(sizing.small_size).max(0);
    let mut alone = scenario.serial;
    let mut changes: Vec<Pool> = scenario.exclusive.clone();
    let change = |changes: &mut Vec<Pool>, rpcs: &[&str]| {
        for pool in Pool::ALL {
            if !changes.contains(&pool) && rpcs.iter().any(|rpc| pool.changed_by(rpc)) {
                changes.push(pool);
            }
        }
    };
    // Per node: ControllerPublish, NodeStage, NodePublish calls expected to succeed.
    let mut calls = vec![[0u32; 3]; nodes];
    let mut checked = vec![0u32; nodes];
    for step in scenario.steps.iter().filter(|s| runs(s, fp)) {
        change(&mut changes, &step.rpcs());
        match &step.action {
            Action::Call(call) => {
                let ok = call.expect.codes.accepts_ok();
                let node = call.node.unwrap_or(0).min(nodes - 1);
                match call.method.name() {
                    "CreateVolume" if ok => {
                        called_volumes += 1;
                        match requested_bytes(call, sizing) {
                            Some(bytes) => called_bytes = called_bytes.saturating_add(bytes),
                            None => plugin_sized = true,
                        }
                    }
                    // An expansion expected to be refused (a size no backend serves) grows nothing.
                    "ControllerExpandVolume" if ok => {
                        let to = requested_bytes(call, sizing).unwrap_or(sizing.expand_size);
                        let from = if to == sizing.small_expand_size { sizing.small_size } else { sizing.volume_size };
                        grown = grown.max(to.saturating_sub(from).max(0));
                    }
                    "ControllerPublishVolume" if ok => calls[0][0] += 1,
                    "NodeStageVolume" if ok => calls[node][1] += 1,
                    "NodePublishVolume" if ok => calls[node][2] += 1,
                    _ => {}
                }
            }
            Action::Check(check) => {
                let d = (check.check.demand)(&check_use(check, fp, sizing));
                other_volumes += d.volumes;
                if d.expands {
                    grown = grown.max(small_grown);
                }
                alone |= d.alone;
                checked.iter_mut().zip(&d.publish).for_each(|(n, p)| *n += p);
                for &pool in check.check.holds {
                    if !changes.contains(&pool) {
                        changes.push(pool);
                    }
                }
            }
            Action::Property(p) if p.property.rpcs.contains(&"CreateVolume") => other_volumes += 1,
            Action::Property(_) | Action::Assert(_) => {}
        }
    }
    let publish: Vec<u32> = calls
        .iter()
        .zip(&checked)
        .map(|(c, &from_checks)| c.iter().copied().max().unwrap_or(0).min(called_volumes) + from_checks)
        .collect();
    let volumes = called_volumes + other_volumes;
    // Expanded volumes count at the expansion target. Named checks and properties create
    // volumes of the small size.
    let bytes = i64::from(other_volumes)
        .saturating_mul(sizing.small_size)
        .saturating_add(called_bytes)
        .saturating_add(i64::from(volumes).saturating_mul(grown));
    changes.sort();
    Demand { publish, volumes, bytes, alone, plugin_sized, exclusive: scenario.exclusive.clone(), changes }
}

/// What a named check's spec is told of one use of it.
fn check_use<'a>(check: &'a CheckStep, fp: &Fingerprint, sizing: &Sizing) -> CheckUse<'a> {
    CheckUse {
        args: &check.args,
        nodes: fp.nodes.len().max(1),
        max_volumes_per_node: fp.nodes.first().map_or(0, |n| n.max_volumes_per_node),
        times: u64::from(sizing.idempotency_count.max(1)),
    }
}

/// An estimate of how long `scenario` takes, in sequential RPCs: the runner starts the
/// longest first so that the run's wall is not its last long scenario.
pub fn cost(scenario: &Scenario, fp: &Fingerprint, sizing: &Sizing) -> u64 {
    let times = u64::from(sizing.idempotency_count.max(1));
    let mut total = 0u64;
    for step in scenario.steps.iter().filter(|s| runs(s, fp)) {
        total += match &step.action {
            Action::Call(call) => {
                let repeat = match call.repeat {
                    Repeat::Times(n) => u64::from(n.max(1)),
                    Repeat::Idempotency => times,
                };
                repeat + if call.poll.is_some() { 5 } else { 0 }
            }
            Action::Check(check) => (check.check.cost)(&check_use(check, fp, sizing)),
            Action::Property(p) => {
                let cases = u64::from(sizing.property_cases);
                cases * p.property.rpcs.len() as u64 / sizing.jobs.max(1) as u64 + 1
            }
            Action::Assert(_) => 0,
        };
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::settings::tests_support::fingerprint;

    const SIZING: Sizing = Sizing { volume_size: 100, small_size: 100, expand_size: 300, small_expand_size: 200, idempotency_count: 3, property_cases: 16, jobs: 4 };

    fn scenario(steps: &str) -> Scenario {
        let text = format!("suite: t\ntitle: t\nscenarios:\n  - id: s\n    title: t\n    steps:\n{steps}");
        let suite = crate::suite::load_str("test", &text).unwrap_or_else(|e| panic!("{e}"));
        suite.scenarios.into_iter().next().expect("one scenario")
    }

    #[test]
    fn demand_comes_from_the_steps_and_named_checks() {
        let fp = fingerprint(2);
        let s = scenario(
            "      - call: CreateVolume\n        request: { name: a, capacity_range: { required_bytes: 1000 } }\n\
             \x20     - call: CreateVolume\n        request: { name: b, capacity_range: { required_bytes: \"${volume_size}\" } }\n\
             \x20     - call: CreateVolume\n        request: { name: c }\n        expect: { code: INVALID_ARGUMENT }\n\
             \x20     - call: ControllerPublishVolume\n        request: { volume_id: a, node_id: n }\n\
             \x20     - call: ControllerPublishVolume\n        request: { volume_id: b, node_id: n }\n\
             \x20     - call: ControllerPublishVolume\n        request: { volume_id: b, node_id: n }\n\
             \x20     - check: lifecycle\n        args: { nodes: 2 }\n",
        );
        let d = demand(&s, &fp, &SIZING);
        // Two created volumes (the refused CreateVolume makes none) plus the lifecycle's;
        // three publish calls on node 0 but only two volumes to publish, plus the
        // lifecycle's one on each node.
        assert_eq!(d.volumes, 3);
        assert_eq!(d.publish, [3, 1]);
        assert_eq!(d.bytes, 1000 + 100 + 100);
        assert!(!d.alone && !d.plugin_sized);

        let unsized_create = scenario("      - call: CreateVolume\n        request: { name: a }\n");
        assert!(demand(&unsized_create, &fp, &SIZING).plugin_sized);
        let expanding = scenario(
            "      - call: CreateVolume\n        request: { name: a, capacity_range: { required_bytes: \"${volume_size}\" } }\n\
             \x20     - call: ControllerExpandVolume\n        request: { volume_id: a, capacity_range: { required_bytes: \"${expand_size}\" } }\n",
        );
        assert_eq!(demand(&expanding, &fp, &SIZING).bytes, 300);
        // An expansion expected to be refused (4 EiB, answered OUT_OF_RANGE) holds no bytes:
        // counting it made the scheduler skip the scenario as larger than any plugin.
        let refused_growth = scenario(
            "      - call: CreateVolume\n        request: { name: a, capacity_range: { required_bytes: \"${volume_size}\" } }\n\
             \x20     - call: ControllerExpandVolume\n        request: { volume_id: a, capacity_range: { required_bytes: 4611686018427387904 } }\n        expect: { code: OUT_OF_RANGE }\n",
        );
        assert_eq!(demand(&refused_growth, &fp, &SIZING).bytes, 100);
    }


    #[test]
    fn the_pools_a_scenario_changes_come_from_every_rpc_it_may_call() {
        let fp = fingerprint(1);
        let changes = |steps: &str| demand(&scenario(steps), &fp, &SIZING).changes;
        // A call meant to fail still counts: a plugin may create the volume anyway.
        let refused = "      - call: CreateVolume\n        request: { name: a }\n        expect: { code: INVALID_ARGUMENT }\n";
        assert_eq!(changes(refused), [Pool::Volumes]);
        assert_eq!(changes("      - call: DeleteSnapshot\n        request: { snapshot_id: s }\n"), [Pool::Snapshots]);
        assert_eq!(changes("      - check: list-all-volumes\n      - call: Probe\n"), []);
        assert_eq!(changes("      - check: lifecycle\n"), [Pool::Volumes]);
        assert_eq!(changes("      - check: data\n        args: { scenario: snapshot }\n"), [Pool::Volumes, Pool::Snapshots]);
        assert_eq!(changes("      - check: existing-volume\n"), [Pool::ExistingVolumes]);
        // A step whose `when:` does not hold changes nothing.
        assert_eq!(changes("      - when: controller:LIST_SNAPSHOTS\n        call: CreateSnapshot\n        request: { name: s }\n"), []);
    }
}
