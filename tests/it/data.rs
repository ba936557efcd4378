//! The data suite (`suites/data.yaml`, the `data` check) against the reference plugin run as
//! a two-node cluster with small volumes: the compliant plugin passes every data scenario
//! (mount and block, one and two nodes, snapshot, clone, expansion online and offline) and
//! leaves no marker, mount, directory or volume behind; a quirk that loses data on unstage is
//! named on both nodes of a move; a node endpoint whose files cannot be reached skips the data
//! scenarios with the reason.

use std::path::Path;

use csi_conform::{
    client::Endpoint,
    reference::{self, Config, Mode, Quirk},
    report::{RunReport, Severity},
    suite::{self, PathCommand, RunConfig},
};

use crate::{
    lifecycle::{Cluster, assert_work_dir_clean, can_mount, engine},
    run::not_passed,
};

/// Every data scenario.
const SCENARIOS: [&str; 9] = [
    "republish",
    "move",
    "shared",
    "read-only",
    "snapshot",
    "group-snapshot",
    "clone",
    "expand.online",
    "expand.offline",
];

fn data_suite() -> Vec<suite::Suite> {
    suite::builtin().into_iter().filter(|s| s.id() == "data").collect()
}

fn config(work: &Path, focus: &str) -> RunConfig {
    RunConfig {
        seed: 11,
        volume_size: 8 << 20,
        expand_size: Some(16 << 20),
        work_dir: work.join("work"),
        focus: if focus.is_empty() { Vec::new() } else { vec![regex::Regex::new(focus).unwrap()] },
        ..RunConfig::default()
    }
}

/// Runs the data suite; asserts nothing is left mounted or on disk under the work directory.
async fn run(plugin: &suite::Plugin, config: &RunConfig) -> RunReport {
    let report = suite::run(plugin, &data_suite(), config).await;
    assert_work_dir_clean(config);
    report
}

/// Files named like a marker anywhere under `dir`.
fn markers_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else if entry.file_name().to_string_lossy().starts_with(csi_conform::suite::MARKER_FILE) {
                found.push(path);
            }
        }
    }
    found
}

#[tokio::test]
async fn the_compliant_plugin_passes_every_data_scenario_and_leaves_nothing_behind() {
    let test = "the_compliant_plugin_passes_every_data_scenario_and_leaves_nothing_behind";
    if !can_mount(test) {
        return;
    }
    let cluster = Cluster::start(Config::default(), 2).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let report = run(&engine, &config(work.path(), "")).await;
    assert!(not_passed(&report).is_empty(), "{:#?}", not_passed(&report));
    for access in ["mount", "block"] {
        for scenario in SCENARIOS {
            let id = format!("data.{access}.{scenario}");
            assert_eq!(report.scenario(&id).map(|s| s.outcome), Some(Severity::Pass), "{id}");
        }
    }
    cluster.assert_clean().await;
    assert_eq!(markers_under(cluster.state.path()), Vec::<std::path::PathBuf>::new());
    assert_eq!(markers_under(cluster.plugin.dir.path()), Vec::<std::path::PathBuf>::new());
}

#[tokio::test]
async fn data_lost_on_unstage_is_named_on_both_nodes_of_a_move() {
    if !can_mount("data_lost_on_unstage_is_named_on_both_nodes_of_a_move") {
        return;
    }
    let cluster = Cluster::start(Config { quirks: [Quirk::LoseDataOnUnstage].into(), ..Config::default() }, 2).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let report = run(&engine, &config(work.path(), r"^data\.(mount|block)\.(move|shared)$")).await;
    let failed = not_passed(&report);
    let ids: Vec<&str> = failed.keys().map(String::as_str).collect();
    assert_eq!(ids, ["data.block.move", "data.mount.move"], "sharing never unstages: {failed:#?}");
    let scenario = report.scenario("data.mount.move").unwrap();
    let finding = scenario.findings.iter().find(|f| f.severity == Severity::Fail).unwrap();
    assert_eq!(finding.kind, "data-lost");
    assert!(
        finding.message.contains("the marker written on node node-0 before NodeUnpublishVolume, NodeUnstageVolume")
            && finding.message.contains("published on node node-1")
            && finding.message.contains("marker A is missing"),
        "{}",
        finding.message
    );
    let block = report.scenario("data.block.move").unwrap();
    assert!(block.findings.iter().any(|f| f.message.contains("byte 0 is blank")), "{:#?}", block.findings);
    cluster.assert_clean().await;
}

#[tokio::test]
async fn a_node_whose_files_cannot_be_reached_skips_the_data_scenarios_with_the_reason() {
    let cluster = Cluster::start(Config::default(), 1).await;
    // A second node on TCP: not on this host as far as csi-conform can tell.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let node = Config {
        mode: Mode::NodeOnly,
        node_id: "node-tcp".into(),
        state_dir: Some(cluster.state.path().to_path_buf()),
        ..Config::default()
    };
    let handle = reference::spawn(node, &format!("tcp://127.0.0.1:{port}")).await.expect("spawn the tcp node");
    let nodes = [Endpoint::Unix(cluster.plugin.socket.clone()), Endpoint::Tcp { host: "127.0.0.1".into(), port }];
    let plugin = engine(&cluster.plugin.socket, &nodes).await;
    let work = tempfile::tempdir().unwrap();
    let mut config = config(work.path(), r"^data\.mount\.(move|shared)$");
    let report = run(&plugin, &config).await;
    for id in ["data.mount.move", "data.mount.shared"] {
        let s = report.scenario(id).unwrap();
        assert_eq!(s.outcome, Severity::Skip, "{id}: {:#?}", s.findings);
        let why = s.skip_reason.as_deref().unwrap_or_default();
        assert!(why.contains("node endpoint 1") && why.contains("--check-path-cmd"), "{why}");
    }
    config.check_path_cmd = Some(PathCommand { command: "echo directory; :".into(), timeout: std::time::Duration::from_secs(5) });
    let report = run(&plugin, &config).await;
    let s = report.scenario("data.mount.move").unwrap();
    assert_eq!(s.outcome, Severity::Skip, "{:#?}", s.findings);
    assert!(s.skip_reason.as_deref().unwrap_or_default().contains("file types only"), "{:?}", s.skip_reason);
    handle.shutdown().await.unwrap();
    cluster.assert_clean().await;
}

/// A suite that writes and verifies markers with `marker` steps around its own calls.
const MARKER_SUITE: &str = r#"
suite: marker-steps
title: Markers from steps
scenarios:
  - id: block
    title: a marker written by a step survives unpublish and publish
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${block_capability}"], capacity_range: { required_bytes: 1048576 } }
        save: { vol: volume }
      - call: ControllerPublishVolume
        request: { volume_id: "${vol.volume_id}", node_id: "${node.id}", volume_capability: "${block_capability}" }
        save: { pc: publish_context }
      - call: NodeStageVolume
        request:
          volume_id: "${vol.volume_id}"
          staging_target_path: "${paths.staging}"
          volume_capability: "${block_capability}"
          publish_context: "${pc}"
          volume_context: "${vol.volume_context}"
      - call: NodePublishVolume
        request: &publish
          volume_id: "${vol.volume_id}"
          staging_target_path: "${paths.staging}"
          target_path: "${paths.target}"
          volume_capability: "${block_capability}"
          publish_context: "${pc}"
          volume_context: "${vol.volume_context}"
      - check: marker
        args: { action: write, volume_id: "${vol.volume_id}", path: "${paths.target}", access: block }
        save: { tail: tail }
      - call: NodeUnpublishVolume
        request: { volume_id: "${vol.volume_id}", target_path: "${paths.target}" }
      - call: NodePublishVolume
        request: *publish
      - check: marker
        args: { action: verify, volume_id: "${vol.volume_id}", path: "${paths.target}", access: block, tail: "${tail}" }
      - check: marker
        args: { action: remove, volume_id: "${vol.volume_id}", path: "${paths.target}", access: block, tail: "${tail}" }
      - check: marker
        args: { action: verify, volume_id: "${vol.volume_id}", path: "${paths.target}", access: block, tail: "${tail}" }
  - id: foreign
    title: a volume the scenario did not create is never written to
    steps:
      - check: marker
        args: { action: write, volume_id: "not-ours", path: "${paths.target}" }
"#;

#[tokio::test]
async fn marker_steps_write_verify_and_remove_and_refuse_volumes_the_run_did_not_create() {
    if !can_mount("marker_steps_write_verify_and_remove_and_refuse_volumes_the_run_did_not_create") {
        return;
    }
    let cluster = Cluster::start(Config::default(), 1).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let suite = suite::load_str("test:marker.yaml", MARKER_SUITE).expect("the marker suite loads");
    let config = config(work.path(), "");
    let report = suite::run(&engine, &[suite], &config).await;
    let block = report.scenario("marker-steps.block").unwrap();
    let failed: Vec<_> = block.findings.iter().filter(|f| f.severity >= Severity::Warn).collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0].kind, "data-lost");
    assert_eq!(failed[0].step, Some(9), "only the verify after the removal fails: {:#?}", failed[0]);
    assert!(failed[0].message.contains("byte 0 is blank (all zero bytes) instead of marker A"), "{}", failed[0].message);
    let foreign = report.scenario("marker-steps.foreign").unwrap();
    assert_eq!(foreign.outcome, Severity::Error, "{:#?}", foreign.findings);
    assert!(foreign.findings.iter().any(|f| f.message.contains("\"not-ours\" is not one of them")), "{:#?}", foreign.findings);
    cluster.assert_clean().await;
}

#[tokio::test]
async fn scenarios_that_need_more_publications_than_the_node_allows_skip_with_the_reason() {
    if !can_mount("scenarios_that_need_more_publications_than_the_node_allows_skip_with_the_reason") {
        return;
    }
    let cluster = Cluster::start(Config { max_volumes_per_node: 1, ..Config::default() }, 1).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let config = config(work.path(), r"^data\.block\.");
    let report = run(&engine, &config).await;
    for id in ["data.block.snapshot", "data.block.group-snapshot", "data.block.clone"] {
        let s = report.scenario(id).unwrap();
        assert_eq!(s.outcome, Severity::Skip, "{id}: {:#?}", s.findings);
        let why = s.skip_reason.as_deref().unwrap_or_default();
        // The scheduler knows what the data check holds, and skips it before it starts.
        assert!(why.contains("2 volumes published on node") && why.contains("max_volumes_per_node of 1"), "{why}");
    }
    for id in ["data.block.republish", "data.block.read-only", "data.block.expand.online", "data.block.expand.offline"] {
        assert_eq!(report.scenario(id).map(|s| s.outcome), Some(Severity::Pass), "{id}");
    }
    cluster.assert_clean().await;
}

/// The data check may call group-snapshot RPCs, but only its group scenarios need a group
/// controller: a plugin without one (ember-csi, a spec 1.1 plugin) still gets every other
/// data scenario run, and the group ones skip naming the group capability.
#[tokio::test]
async fn a_plugin_without_a_group_controller_runs_every_data_scenario_but_the_group_ones() {
    if !can_mount("a_plugin_without_a_group_controller_runs_every_data_scenario_but_the_group_ones") {
        return;
    }
    let mut disabled = reference::Disabled::default();
    disabled.add("GROUP_CONTROLLER_SERVICE").unwrap();
    let cluster = Cluster::start(Config { disabled, ..Config::default() }, 1).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let report = run(&engine, &config(work.path(), r"^data\.(mount|block)\.(republish|read-only|snapshot|group-snapshot|clone)$")).await;
    for access in ["mount", "block"] {
        for scenario in ["republish", "read-only", "snapshot", "clone"] {
            let id = format!("data.{access}.{scenario}");
            let s = report.scenario(&id).unwrap();
            assert_eq!(s.outcome, Severity::Pass, "{id}: {:?} {:?}", s.skip_reason, s.findings);
        }
        let id = format!("data.{access}.group-snapshot");
        let s = report.scenario(&id).unwrap();
        assert_eq!(s.outcome, Severity::Skip, "{id}");
        assert!(s.skip_reason.as_deref().unwrap_or_default().contains("GROUP"), "{:?}", s.skip_reason);
    }
    cluster.assert_clean().await;
}
