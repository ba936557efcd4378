//! Whole runs of the built-in suites against the reference plugin over a real socket: the
//! compliant plugin passes everything, switched-off capabilities skip with the right reason,
//! results do not depend on --jobs, nothing is left on the plugin, and the `run`, `list`,
//! `suites check` and `call` commands behave as documented.

use std::collections::BTreeMap;

use csi_conform::{
    proto::v1,
    reference::{Config, Mode},
    report::{RunReport, Severity},
    suite::{self, RunConfig},
};

use crate::support::{
    TestPlugin, csi_conform, engine_plugin,
    fake_plugin::{FakeOptions, FakePlugin},
    ok,
};

fn config(dir: &tempfile::TempDir, jobs: usize) -> RunConfig {
    // No --property-time: how many property cases fit in it depends on the machine's speed,
    // and these runs compare every case.
    RunConfig { jobs, seed: 7, work_dir: dir.path().join("work"), property_time: std::time::Duration::ZERO, ..RunConfig::default() }
}

async fn run_builtin(plugin: &TestPlugin, jobs: usize) -> RunReport {
    let engine = engine_plugin(plugin).await;
    let work = tempfile::tempdir().unwrap();
    suite::run(&engine, &suite::builtin(), &config(&work, jobs)).await
}

/// Every scenario's id and outcome, and for non-passes the reason.
pub(crate) fn outcomes(report: &RunReport) -> BTreeMap<String, (Severity, String)> {
    report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .map(|s| {
            let why = s.skip_reason.clone().or_else(|| s.findings.first().map(|f| f.message.clone())).unwrap_or_default();
            (s.id.clone(), (s.outcome, why))
        })
        .collect()
}

pub(crate) fn not_passed(report: &RunReport) -> BTreeMap<String, (Severity, String)> {
    outcomes(report).into_iter().filter(|(_, (o, _))| *o != Severity::Pass).collect()
}

async fn assert_plugin_is_empty(plugin: &TestPlugin) {
    let volumes = ok(plugin.controller().list_volumes(v1::ListVolumesRequest::default()).await);
    assert!(volumes.entries.is_empty(), "volumes left behind: {:?}", volumes.entries);
    // A plugin with LIST_SNAPSHOTS switched off cannot be asked; it then has none to leave.
    if let Ok(snapshots) = plugin.controller().list_snapshots(v1::ListSnapshotsRequest::default()).await {
        let entries = snapshots.into_inner().entries;
        assert!(entries.is_empty(), "snapshots left behind: {entries:?}");
    }
}

#[tokio::test]
async fn the_reference_plugin_passes_every_builtin_scenario_and_is_left_empty() {
    let plugin = TestPlugin::start(Config::default()).await;
    // A volume that exists before the run: the run must never touch it.
    let before = ok(plugin.controller().create_volume(crate::support::create_req("pre-existing", vec![crate::support::snw()])).await);
    let report = run_builtin(&plugin, 8).await;
    let skipped = not_passed(&report);
    let expected_skips = [
        "controller.publish.attach-limit",
        "data.block.move",
        "data.block.shared",
        "data.mount.move",
        "data.mount.shared",
        "existing.read-only",
        "existing.read-write",
        "existing.second-target",
        "existing.unstage-without-path",
        // The reference plugin speaks CSI v1.13, which has no VOLUME_CONDITION.
        "extras.controller-get-volume.condition",
        "extras.list-volumes.condition",
        "extras.node.distinct-ids",
        "extras.secrets.create-volume-without-secrets",
        "extras.volume-stats.condition",
        "lifecycle.restart.between-stage-and-publish",
        "lifecycle.secrets",
        "lifecycle.two-nodes.multi-node-multi-writer",
        "lifecycle.two-nodes.multi-node-reader-only",
        "lifecycle.two-nodes.single-node-writer-refused",
        // Only a plugin with OFFLINE expansion (the reference has ONLINE) owes that refusal.
        "requirements.controller-expand.in-use-offline",
        "requirements.identity.same-capabilities-on-the-second-node",
    ];
    assert_eq!(skipped.keys().map(String::as_str).collect::<Vec<_>>(), expected_skips, "{skipped:#?}");
    assert!(skipped.values().all(|(o, _)| *o == Severity::Skip));
    assert!(skipped["controller.publish.attach-limit"].1.contains("--test-node-volume-attach-limit"));
    assert!(skipped["extras.node.distinct-ids"].1.contains("requires 2 node endpoints"));
    assert!(skipped["data.mount.move"].1.contains("requires 2 node endpoints"));
    assert!(skipped["lifecycle.two-nodes.multi-node-reader-only"].1.contains("requires 2 node endpoints"));
    assert!(skipped["lifecycle.restart.between-stage-and-publish"].1.contains("--allow-restart-cmd"));
    assert!(skipped["lifecycle.secrets"].1.contains("--secrets"));
    assert_eq!(skipped["existing.read-write"].1, csi_conform::suite::NO_EXISTING_VOLUME);
    assert!(skipped["extras.secrets.create-volume-without-secrets"].1.contains("CreateVolumeSecret"));
    assert!(!report.failed());
    assert!(report.counts().pass >= 125, "{:?}", report.counts());

    let left = ok(plugin.controller().list_volumes(v1::ListVolumesRequest::default()).await);
    let ids: Vec<&str> = left.entries.iter().filter_map(|e| e.volume.as_ref()).map(|v| v.volume_id.as_str()).collect();
    assert_eq!(ids, [before.volume.unwrap().volume_id.as_str()], "only the pre-existing volume remains");
    let snapshots = ok(plugin.controller().list_snapshots(v1::ListSnapshotsRequest::default()).await);
    assert!(snapshots.entries.is_empty());
    let mounts = csi_conform::mounts::mounts_under(plugin.dir.path());
    assert!(mounts.is_empty(), "mounts left: {mounts:?}");
}

#[tokio::test]
async fn results_do_not_depend_on_the_number_of_jobs() {
    let serial_plugin = TestPlugin::start(Config::default()).await;
    let parallel_plugin = TestPlugin::start(Config::default()).await;
    let serial = run_builtin(&serial_plugin, 1).await;
    let parallel = run_builtin(&parallel_plugin, 8).await;
    assert_eq!(outcomes(&serial), outcomes(&parallel));
    let order = |r: &RunReport| r.suites.iter().flat_map(|s| &s.scenarios).map(|s| s.id.clone()).collect::<Vec<_>>();
    assert_eq!(order(&serial), order(&parallel), "results are reported in suite order");
}

#[tokio::test]
async fn switched_off_capabilities_skip_their_scenarios_with_the_reason() {
    let mut config = Config::default();
    for cap in ["PUBLISH_UNPUBLISH_VOLUME", "CREATE_DELETE_SNAPSHOT", "LIST_SNAPSHOTS", "GROUP_CONTROLLER_SERVICE", "node:EXPAND_VOLUME"] {
        config.disabled.add(cap).unwrap();
    }
    let plugin = TestPlugin::start(config).await;
    let report = run_builtin(&plugin, 8).await;
    let skipped = not_passed(&report);
    assert!(skipped.values().all(|(o, _)| *o == Severity::Skip), "only skips: {skipped:#?}");
    let reason = |id: &str| skipped.get(id).map(|(_, why)| why.as_str()).unwrap_or_else(|| panic!("{id} was not skipped"));
    assert!(reason("controller.publish.no-volume-id").contains("controller:PUBLISH_UNPUBLISH_VOLUME"), "{}", reason("controller.publish.no-volume-id"));
    assert!(reason("snapshots.create-snapshot.no-name").contains("controller:CREATE_DELETE_SNAPSHOT"));
    assert!(reason("snapshots.list-snapshots").contains("controller:LIST_SNAPSHOTS"), "{}", reason("snapshots.list-snapshots"));
    assert!(reason("group-controller.get-capabilities").contains("plugin:GROUP_CONTROLLER_SERVICE"));
    assert!(reason("expansion.node-expand.no-volume-id").contains("node:EXPAND_VOLUME"));
    // The lifecycle adapts (no ControllerPublish) rather than skipping.
    assert_eq!(outcomes(&report)["node.lifecycle"].0, Severity::Pass);
    assert_plugin_is_empty(&plugin).await;
}

#[tokio::test]
async fn a_node_only_plugin_skips_controller_scenarios_instead_of_failing() {
    let plugin = TestPlugin::start(Config { mode: Mode::NodeOnly, ..Config::default() }).await;
    let report = run_builtin(&plugin, 8).await;
    let all = outcomes(&report);
    let failed: Vec<_> = all.iter().filter(|(_, (o, _))| *o > Severity::Warn).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    let (outcome, why) = &all["controller.get-capabilities"];
    assert_eq!(*outcome, Severity::Skip);
    assert!(why.contains("plugin:CONTROLLER_SERVICE"), "{why}");
    assert_eq!(all["node.get-capabilities"].0, Severity::Pass);
    assert_eq!(all["identity.probe"].0, Severity::Pass);
}

#[tokio::test]
async fn the_run_command_writes_reports_a_ci_reads_and_exits_0() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let socket = plugin.socket.display().to_string();
    let out = csi_conform(&["run", "--endpoint", &socket, "--seed", "3", "-q"], cwd.path()).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Result: PASSED"), "{stdout}");
    assert!(!stdout.contains("PASS  identity.probe"), "-q prints the summary only");

    let junit = std::fs::read_to_string(cwd.path().join("reports/junit.xml")).unwrap();
    let parsed = crate::report::parse_junit(&junit);
    let json: RunReport = csi_conform::report::from_json(&std::fs::read_to_string(cwd.path().join("reports/report.json")).unwrap()).unwrap();
    let counts = json.counts();
    assert_eq!(parsed.tests as usize, counts.total());
    assert_eq!(parsed.failures as usize + parsed.errors as usize, 0);
    assert_eq!(crate::report::skipped_in(&parsed) as usize, counts.skip);
    assert_eq!(parsed.suites.len(), json.suites.len());
    let html = std::fs::read_to_string(cwd.path().join("reports/report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("CreateVolume"));
    assert_eq!(json.seed, 3);
    // Everything was torn down, and the journal says so.
    assert!(csi_conform::journal::outstanding(&cwd.path().join("reports/journal.jsonl")).unwrap().is_empty());
    assert_plugin_is_empty(&plugin).await;
}

/// A user suite with one passing and one failing scenario.
pub(crate) const FAILING_SUITE: &str = r#"
suite: mine
title: A suite with one failing scenario
scenarios:
  - id: probe-ok
    title: Probe answers
    steps:
      - call: Probe
  - id: wrong-expectation
    title: Expects an error a compliant plugin does not give
    steps:
      - call: GetPluginInfo
        expect: { code: NOT_FOUND }
"#;

#[tokio::test]
async fn a_failing_user_suite_exits_1_and_an_expect_failures_list_turns_it_into_0() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("mine.yaml"), FAILING_SUITE).unwrap();
    let socket = plugin.socket.display().to_string();
    let args = ["run", "--endpoint", &socket, "--no-builtin", "--suite", "mine.yaml"];
    let out = csi_conform(&args, cwd.path()).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL  mine.wrong-expectation"), "{stdout}");
    assert!(stdout.contains("GetPluginInfo answered OK, expected NOT_FOUND") || stdout.contains("expected NOT_FOUND"), "{stdout}");

    std::fs::write(cwd.path().join("known.yaml"), "mine.wrong-expectation: plugin under repair\n").unwrap();
    let mut with_list = args.to_vec();
    with_list.extend(["--expect-failures", "known.yaml"]);
    let out = csi_conform(&with_list, cwd.path()).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
}

#[tokio::test]
async fn suites_check_names_file_line_and_column_and_exits_2() {
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("good.yaml"), FAILING_SUITE).unwrap();
    std::fs::write(
        cwd.path().join("bad.yaml"),
        "suite: bad\ntitle: Bad\nscenarios:\n  - id: x\n    title: X\n    steps:\n      - call: CreateVolum\n",
    )
    .unwrap();
    let out = csi_conform(&["suites", "check", "good.yaml"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok: good.yaml (2 scenarios)\n");
    let out = csi_conform(&["suites", "check", "bad.yaml"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: bad.yaml:7:15: unknown RPC \"CreateVolum\""), "{err}");
    // The same file given to `run` stops it before any connection.
    let out = csi_conform(&["run", "--endpoint", "/nonexistent.sock", "--suite", "bad.yaml"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.yaml:7:15"));
}

#[tokio::test]
async fn call_sends_one_rpc_and_prints_the_answer_as_yaml_with_secrets_redacted() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let socket = plugin.socket.display().to_string();
    let request = r#"{name: poked, volume_capabilities: [{mount: {mount_flags: ["password=hunter2"]}, access_mode: {mode: SINGLE_NODE_WRITER}}]}"#;
    let out = csi_conform(&["call", "CreateVolume", "--endpoint", &socket, "--request", request], cwd.path()).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let yaml = String::from_utf8(out.stdout).unwrap();
    assert!(yaml.starts_with("volume:\n"), "{yaml}");
    assert!(yaml.contains("volume_id:"), "{yaml}");
    assert!(!yaml.contains("hunter2"), "{yaml}");
    let listed = csi_conform(&["call", "ListVolumes", "--endpoint", &socket], cwd.path()).await;
    assert!(String::from_utf8_lossy(&listed.stdout).contains("csi-conform.dev/name: poked"));

    // The confirmation echoes the mount flag: the answer shows the field, never its value.
    let volume_id = yaml.lines().find_map(|l| l.trim().strip_prefix("volume_id: ")).unwrap().trim_matches('\'');
    let validate = format!(
        r#"{{volume_id: "{volume_id}", volume_capabilities: [{{mount: {{mount_flags: ["password=hunter2"]}}, access_mode: {{mode: SINGLE_NODE_WRITER}}}}]}}"#
    );
    let confirmed = csi_conform(&["call", "ValidateVolumeCapabilities", "--endpoint", &socket, "--request", &validate], cwd.path()).await;
    assert_eq!(confirmed.status.code(), Some(0), "{}", String::from_utf8_lossy(&confirmed.stderr));
    let confirmed = String::from_utf8(confirmed.stdout).unwrap();
    assert!(confirmed.contains("mount_flags:") && confirmed.contains(csi_conform::proto::REDACTED), "{confirmed}");
    assert!(!confirmed.contains("hunter2"), "{confirmed}");

    // A plugin that quotes the flag in its error text: the message is shown, the flag is not.
    let fake = FakePlugin::start(FakeOptions::default()).await;
    let echoing = r#"{name: echo, parameters: {echo_mount_flags: "1"}, volume_capabilities: [{mount: {mount_flags: ["ro", "password=hunter2"]}, access_mode: {mode: SINGLE_NODE_WRITER}}]}"#;
    let quoted = csi_conform(&["call", "CreateVolume", "--endpoint", &fake.socket.display().to_string(), "--request", echoing], cwd.path()).await;
    assert_eq!(quoted.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&quoted.stderr);
    assert!(stderr.starts_with("CreateVolume failed with INVALID_ARGUMENT") && stderr.contains("refusing mount flags [\"ro\", "), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
    let missing = csi_conform(&["call", "DeleteVolume", "--endpoint", &socket, "--request", "{}"], cwd.path()).await;
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).starts_with("DeleteVolume failed with INVALID_ARGUMENT"));
    let unknown = csi_conform(&["call", "CreateVolume", "--endpoint", &socket, "--request", "{nmae: x}"], cwd.path()).await;
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("<request>:1:2"), "{}", String::from_utf8_lossy(&unknown.stderr));
}

#[tokio::test]
async fn list_parity_shows_every_csi_sanity_case_covered() {
    let cwd = tempfile::tempdir().unwrap();
    let out = csi_conform(&["list", "--parity"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.ends_with("96 of 96 csi-sanity checks covered\n"), "{text}");
    assert!(!text.contains("NOT COVERED"));
    assert!(text.contains("  9  Controller / ListVolumes") && text.contains("controller.list-volumes.pagination"), "{}", &text[..2000.min(text.len())]);
}

#[tokio::test]
async fn profile_csi_sanity_runs_exactly_the_parity_mapped_scenarios_with_csi_sanitys_requests() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let listed = csi_conform(&["list", "--parity"], cwd.path()).await;
    let mapped: std::collections::BTreeSet<String> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("     "))
        .filter(|id| *id != "NOT COVERED")
        .map(str::to_owned)
        .collect();
    assert!(mapped.len() > 90, "{mapped:?}");
    let ids = |file: &str| -> (std::collections::BTreeSet<String>, RunReport) {
        let report = csi_conform::report::from_json(&std::fs::read_to_string(cwd.path().join(file)).unwrap()).unwrap();
        (outcomes(&report).into_keys().collect(), report)
    };
    let socket = plugin.socket.display().to_string();

    // csi-sanity's default mutable parameters are none: ModifyVolume then lacks a required
    // field, which the reference plugin refuses naming it. csi-sanity v5.4 fails that; here the
    // request's fault is the run's (no --test-volume-mutable-parameters), so the two skip,
    // saying which option fills the field, and the run passes.
    let out = csi_conform(&["run", "--endpoint", &socket, "--profile", "csi-sanity", "-q", "--json", "a.json"], cwd.path()).await;
    let (ran, report) = ids("a.json");
    assert_eq!(ran, mapped, "exactly the scenarios `list --parity` maps");
    assert_eq!(out.status.code(), Some(0), "{:?}", not_passed(&report));
    for id in ["modify.volume-with-class", "modify.volume-without-class"] {
        let (outcome, why) = &not_passed(&report)[id];
        assert_eq!(*outcome, Severity::Skip, "{id}: {why}");
        assert!(why.contains("left mutable_parameters empty") && why.contains("--test-volume-mutable-parameters"), "{why}");
    }
    // What csi-sanity's relative "some/path" gets from the reference plugin: NOT_FOUND.
    for id in ["node.volume-stats.not-found", "node.volume-stats.wrong-path", "expansion.node-expand.not-found"] {
        assert_eq!(outcomes(&report)[id].0, Severity::Pass, "{id}");
    }

    // The same profile from a settings file, with the plugin's mutable parameters: all pass.
    std::fs::write(cwd.path().join("mutable.yaml"), "iops: 500\n").unwrap();
    std::fs::write(cwd.path().join("ci.yaml"), "profile: csi-sanity\ntest-volume-mutable-parameters: mutable.yaml\n").unwrap();
    let out = csi_conform(&["run", "--endpoint", &socket, "--config", "ci.yaml", "-q", "--json", "b.json"], cwd.path()).await;
    let (ran, report) = ids("b.json");
    assert_eq!(ran, mapped);
    assert_eq!(out.status.code(), Some(0), "{:?}", not_passed(&report));

    // The full profile (the default) runs more than that.
    let out = csi_conform(&["run", "--endpoint", &socket, "-q", "--json", "c.json"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(0));
    let (ran, _) = ids("c.json");
    assert!(ran.is_superset(&mapped) && ran.len() > mapped.len());
    assert_plugin_is_empty(&plugin).await;
}
