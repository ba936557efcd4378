//! csi-sanity as a drop-in: the typical csi-sanity command lines of
//! `shared/parity/csi-sanity-flags.txt` run unchanged with `csi-conform` in place of
//! `csi-sanity` against the reference plugin, csi-sanity's secrets and parameter files are
//! read, its exit codes hold, and `run --config FILE` holds the same settings.

use std::{os::unix::fs::PermissionsExt, path::Path};

use csi_conform::{
    reference::{Config, Mode},
    report::{RunReport, Severity},
    secrets::Secrets,
};

use crate::support::{TestPlugin, csi_conform};

fn report_in(dir: &Path) -> RunReport {
    let text = std::fs::read_to_string(dir.join("reports/report.json")).expect("the run wrote reports/report.json");
    csi_conform::report::from_json(&text).expect("a JSON report")
}

fn outcomes(report: &RunReport) -> Vec<(String, Severity)> {
    report.suites.iter().flat_map(|s| &s.scenarios).map(|s| (s.id.clone(), s.outcome)).collect()
}

fn text(out: &std::process::Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test]
async fn the_plain_invocation_runs_every_builtin_scenario() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let endpoint = format!("--csi.endpoint=unix://{}", plugin.socket.display());
    let out = csi_conform(&[&endpoint], cwd.path()).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = report_in(cwd.path());
    assert!(report.counts().pass >= 125, "{:?}", report.counts());
    assert_eq!(report.endpoints, [format!("unix://{}", plugin.socket.display())]);
}

#[tokio::test]
async fn split_node_and_controller_endpoints_run_unchanged() {
    let state = tempfile::tempdir().unwrap();
    let shared = |mode| Config { mode, state_dir: Some(state.path().to_owned()), ..Config::default() };
    let node = TestPlugin::start(shared(Mode::NodeOnly)).await;
    let (controller, _channel) = node.start_beside("ctrl.sock", shared(Mode::ControllerOnly)).await;
    let cwd = tempfile::tempdir().unwrap();
    let node_flag = format!("--csi.endpoint={}", node.socket.display());
    let ctrl_flag = format!("--csi.controllerendpoint={}", node.dir.path().join("ctrl.sock").display());
    let out = csi_conform(&[&node_flag, &ctrl_flag], cwd.path()).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = report_in(cwd.path());
    assert_eq!(report.endpoints.len(), 2, "{:?}", report.endpoints);
    let all = outcomes(&report);
    assert!(all.contains(&("node.lifecycle".to_owned(), Severity::Pass)), "{all:?}");
    assert!(all.contains(&("controller.create-volume.no-capacity".to_owned(), Severity::Pass)), "{all:?}");
    assert!(report.counts().pass >= 120, "{:?}", report.counts());
    controller.shutdown().await.unwrap();
}

const SECRETS: &str = "\
CreateVolumeSecret:
  secretKey: secretval1
DeleteVolumeSecret:
  secretKey: secretval2
ControllerPublishVolumeSecret:
  secretKey: secretval3
ControllerUnpublishVolumeSecret:
  secretKey: secretval4
ControllerValidateVolumeCapabilitiesSecret:
  secretKey: secretval5
NodeStageVolumeSecret:
  secretKey: secretval6
NodePublishVolumeSecret:
  secretKey: secretval7
CreateSnapshotSecret:
  secretKey: secretval8
DeleteSnapshotSecret:
  secretKey: secretval9
ControllerExpandVolumeSecret:
  secretKey: secretval10
ControllerModifyVolumeSecret:
  secretKey: secretval11
ListSnapshotsSecret:
  secretKey: secretval12
GetSnapshotSecret:
  secretKey: secretval13
";

#[tokio::test]
async fn a_csi_sanity_secrets_file_is_read_and_the_exit_codes_hold() {
    let cwd = tempfile::tempdir().unwrap();
    let secrets_file = cwd.path().join("secrets.yaml");
    std::fs::write(&secrets_file, SECRETS).unwrap();
    std::fs::set_permissions(&secrets_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The plugin refuses every RPC that lacks the file's secrets.
    let config = Config { secrets: Some(Secrets::load(&secrets_file).unwrap()), ..Config::default() };
    let plugin = TestPlugin::start(config).await;
    let endpoint = format!("--csi.endpoint={}", plugin.socket.display());

    let out = csi_conform(&[&endpoint, "--csi.secrets=secrets.yaml", "--csi.testnodevolumeattachlimit"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = report_in(cwd.path());
    let all = outcomes(&report);
    assert!(all.contains(&("controller.publish.attach-limit".to_owned(), Severity::Pass)), "the opt-in ran: {all:?}");
    let mut everything = text(&out);
    for file in ["reports/report.json", "reports/junit.xml", "reports/report.html", "reports/journal.jsonl"] {
        everything += &std::fs::read_to_string(cwd.path().join(file)).unwrap_or_default();
    }
    for n in 1..=13 {
        let value = format!("secretval{n}");
        assert!(!everything.contains(&format!("{value}\"")) && !everything.contains(&format!("{value}\n")), "{value} leaked");
    }

    // Without the secrets the plugin refuses, and csi-sanity's "any failure" exit code 1 holds.
    let out = csi_conform(&[&endpoint, "--ginkgo.focus=CreateVolume"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // A usage error exits 2, as Go's flag package does for a bad flag.
    let out = csi_conform(&[&endpoint, "--csi.testvolumeaccesstype=floppy"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

const PARAMETER_CHECK: &str = r#"
suite: params
title: csi-sanity's parameter files reach the engine
scenarios:
  - id: values
    title: the parameter maps are the files' contents
    steps:
      - assert:
          - { value: "${parameters.volBackendFs}", equals: fs1 }
          - { value: "${parameters.clusterId}", equals: "8809226123290901444" }
          - { value: "${mutable_parameters.iops}", equals: "5000" }
          - { value: "${snapshot_parameters.snapClass}", equals: gold }
          - { value: "${volume_size}", equals: 2147483648 }
          - { value: "${expand_size}", equals: 3221225472 }
          - { value: "${access_type}", equals: block }
"#;

#[tokio::test]
async fn csi_sanity_parameter_files_and_sizes_are_read() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &str| std::fs::write(cwd.path().join(name), body).unwrap();
    write("params.yaml", "volBackendFs: \"fs1\"\nclusterId: \"8809226123290901444\"\n");
    write("mutable.yaml", "iops: 5000\n");
    write("snap.yaml", "snapClass: gold\n");
    write("params.suite.yaml", PARAMETER_CHECK);
    let endpoint = format!("-csi.endpoint={}", plugin.socket.display());
    let args = [
        endpoint.as_str(),
        "-csi.testvolumeparameters",
        "params.yaml",
        "-csi.testvolumemutableparameters=mutable.yaml",
        "--csi.testsnapshotparameters",
        "snap.yaml",
        "-csi.testvolumesize",
        "2147483648",
        "--csi.testvolumeexpandsize=3221225472",
        "-csi.testvolumeaccesstype",
        "block",
        "--suite",
        "params.suite.yaml",
        "--no-builtin",
    ];
    let out = csi_conform(&args, cwd.path()).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(outcomes(&report_in(cwd.path())), [("params.values".to_owned(), Severity::Pass)]);

    write("bad.yaml", "volBackendFs:\n  nested: map\n");
    let out = csi_conform(&[endpoint.as_str(), "-csi.testvolumeparameters=bad.yaml"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml:2:3: the value of \"volBackendFs\" must be text"), "{err}");
}

fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The invocation of kubernetes-csi's release-tools (prow.sh run_sanity), with scripts that
/// make and remove the directories one level at a time, as `kubectl exec ... mkdir` would.
/// (Its `-csi.checkpathcmd` belongs to the mount-verification work and is left out here.)
#[tokio::test]
async fn the_release_tools_invocation_with_path_commands_runs_unchanged() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let log = cwd.path().join("calls.log");
    let log_s = log.display();
    script(cwd.path(), "mkdir_in_pod.sh", &format!("echo \"mkdir $1\" >> '{log_s}'; mkdir \"$1\" && echo \"$1\""));
    script(cwd.path(), "rmdir_in_pod.sh", &format!("echo \"rmdir $1\" >> '{log_s}'; rm -r \"$1\""));
    let (staging, mount) = (cwd.path().join("staging"), cwd.path().join("mount"));
    let endpoint = format!("unix://{}", plugin.socket.display());
    let (staging_s, mount_s) = (staging.display().to_string(), mount.display().to_string());
    let args = [
        "-ginkgo.v",
        "-csi.junitfile",
        "junit.xml",
        "-csi.endpoint",
        &endpoint,
        "-csi.stagingdir",
        &staging_s,
        "-csi.mountdir",
        &mount_s,
        "-csi.createstagingpathcmd",
        "./mkdir_in_pod.sh",
        "-csi.createmountpathcmd",
        "./mkdir_in_pod.sh",
        "-csi.removestagingpathcmd",
        "./rmdir_in_pod.sh",
        "-csi.removemountpathcmd",
        "./rmdir_in_pod.sh",
        "--ginkgo.focus=Node Service",
    ];
    let out = csi_conform(&args, cwd.path()).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let junit = std::fs::read_to_string(cwd.path().join("junit.xml")).expect("-csi.junitfile names the JUnit report");
    let parsed = crate::report::parse_junit(&junit);
    let report = report_in(cwd.path());
    assert_eq!(parsed.tests as usize, report.counts().total());

    let calls = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines[..2], [format!("mkdir {mount_s}"), format!("mkdir {staging_s}")], "roots first");
    let scenario_dirs = lines.iter().filter(|l| l.starts_with(&format!("mkdir {mount_s}/"))).count();
    let staging_dirs = lines.iter().filter(|l| l.starts_with(&format!("mkdir {staging_s}/"))).count();
    // Paths are made for the scenarios that ran and may use them, and only those: the rest
    // (argument checks that send no path, say) cost no command at all.
    let uses_paths: std::collections::BTreeMap<String, bool> = csi_conform::suite::builtin()
        .iter()
        .flat_map(|s| s.scenarios())
        .map(|s| (s.id().to_owned(), s.uses_paths()))
        .collect();
    let ran: Vec<&str> = report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .filter(|s| s.outcome != csi_conform::report::Severity::Skip)
        .map(|s| s.id.as_str())
        .collect();
    let with_paths = ran.iter().filter(|id| uses_paths[**id]).count();
    assert!(with_paths > 0 && with_paths < ran.len(), "{with_paths} of {} scenarios use paths", ran.len());
    assert_eq!(scenario_dirs, with_paths, "one target parent per scenario that ran and uses its paths:\n{calls}");
    assert_eq!(staging_dirs, with_paths);
    let removed = lines.iter().filter(|l| l.starts_with("rmdir ")).count();
    assert_eq!(removed, 2 * with_paths + 2, "every path made is removed, the roots last:\n{calls}");
    assert_eq!(lines.last().copied(), Some(format!("rmdir {mount_s}").as_str()));
    assert!(!mount.exists() && !staging.exists());
}

#[tokio::test]
async fn ginkgo_focus_and_skip_select_by_csi_sanity_spec_text() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let endpoint = format!("--csi.endpoint={}", plugin.socket.display());
    let out = csi_conform(
        &[&endpoint, "--ginkgo.skip=pagination|should work", "--ginkgo.focus=Node Service", "--ginkgo.no-color", "--ginkgo.flake-attempts", "2"],
        cwd.path(),
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning: ginkgo flag -ginkgo.no-color has no effect"), "{stderr}");
    assert!(stderr.contains("-ginkgo.flake-attempts has no effect"), "{stderr}");
    let report = report_in(cwd.path());
    let ids: Vec<String> = outcomes(&report).into_iter().map(|(id, _)| id).collect();
    assert!(ids.contains(&"node.get-info".to_owned()), "{ids:?}");
    assert!(!ids.contains(&"node.lifecycle".to_owned()), "\"Node Service should work\" is skipped: {ids:?}");
    assert!(!ids.iter().any(|id| id.starts_with("controller.") || id.starts_with("identity.")), "{ids:?}");
    for s in report.suites.iter().flat_map(|s| &s.scenarios) {
        let texts: Vec<&str> = s.parity.iter().filter_map(|&c| csi_conform::parity::spec_text(c)).collect();
        assert!(texts.iter().any(|t| t.starts_with("Node Service")), "{}: {texts:?}", s.id);
        assert!(!texts.iter().any(|t| t.contains("should work") || t.contains("pagination")), "{}: {texts:?}", s.id);
    }
}

#[tokio::test]
async fn a_config_file_holds_the_run_flags_and_the_command_line_wins() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    std::fs::create_dir(cwd.path().join("conf")).unwrap();
    std::fs::write(cwd.path().join("conf/params.yaml"), "volBackendFs: fs1\nclusterId: \"8809226123290901444\"\n").unwrap();
    std::fs::write(cwd.path().join("conf/mutable.yaml"), "iops: \"5000\"\n").unwrap();
    std::fs::write(cwd.path().join("conf/snap.yaml"), "snapClass: gold\n").unwrap();
    std::fs::write(cwd.path().join("conf/params.suite.yaml"), PARAMETER_CHECK).unwrap();
    let config = format!(
        "# csi-conform run settings\nendpoint: {}\nsuite: [params.suite.yaml]\nno-builtin: true\n\
         test-volume-parameters: params.yaml\ntest-volume-mutable-parameters: mutable.yaml\n\
         test-snapshot-parameters: snap.yaml\ntest-volume-size: 2Gi\ntest-volume-expand-size: 3Gi\n\
         access-type: mount\njobs: 2\nstrict: true\njson: out/run.json\n",
        plugin.socket.display()
    );
    std::fs::write(cwd.path().join("conf/run.yaml"), config).unwrap();
    // The file says mount; the command line says block, and wins. Relative FILE values are
    // relative to the settings file (conf/out/run.json).
    let out = csi_conform(&["run", "--config", "conf/run.yaml", "--access-type", "block"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let json = std::fs::read_to_string(cwd.path().join("conf/out/run.json")).unwrap();
    let report = csi_conform::report::from_json(&json).unwrap();
    assert!(report.strict);
    assert_eq!(outcomes(&report), [("params.values".to_owned(), Severity::Pass)]);
    // Without the override the file's `mount` is used, and the suite's block assertion fails.
    let out = csi_conform(&["run", "--config", "conf/run.yaml"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));

    std::fs::write(cwd.path().join("bad.yaml"), "endpont: /x.sock\njobs: 0\nstrict: yes please\nfocus: a\nseed: [1, 2]\n").unwrap();
    let out = csi_conform(&["run", "--config", "bad.yaml"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml:1:1: unknown setting \"endpont\" (did you mean \"endpoint\"?)"), "{err}");
    assert!(err.contains("bad.yaml:2:7: jobs: invalid value '0'"), "{err}");
    assert!(err.contains("bad.yaml:3:9: strict is a switch: write true or false"), "{err}");
    assert!(err.contains("bad.yaml:5:7: seed takes one value, not a list"), "{err}");
    assert!(!err.contains("focus"), "a single value for a repeatable flag is fine: {err}");
}

/// GetPluginCapabilities must be the same on every instance "of the same version": a node
/// instance that advertises less than its controller fails the rule, and the same node
/// reporting another vendor_version (a deployment in the middle of an upgrade) is passed over.
#[tokio::test]
async fn plugin_capabilities_must_match_between_instances_of_the_same_version_only() {
    let run = |node_version: &'static str| async move {
        let state = tempfile::tempdir().unwrap();
        let shared = |mode| Config { mode, state_dir: Some(state.path().to_owned()), ..Config::default() };
        let mut node_config = shared(Mode::NodeOnly);
        node_config.disabled.online_expansion = true;
        node_config.vendor_version = node_version.to_owned();
        let node = TestPlugin::start(node_config).await;
        let (controller, _channel) = node.start_beside("ctrl.sock", shared(Mode::ControllerOnly)).await;
        let cwd = tempfile::tempdir().unwrap();
        let (node_s, ctrl_s) = (node.socket.display().to_string(), node.dir.path().join("ctrl.sock").display().to_string());
        let args = ["run", "--node-endpoint", &node_s, "--controller-endpoint", &ctrl_s, "--focus", r"^requirements\.identity\.same-capabilities-everywhere$"];
        let out = csi_conform(&args, cwd.path()).await;
        controller.shutdown().await.unwrap();
        (out.status.code(), outcomes(&report_in(cwd.path())))
    };
    let id = "requirements.identity.same-capabilities-everywhere".to_owned();
    let (code, same_version) = run(env!("CARGO_PKG_VERSION")).await;
    assert_eq!((code, same_version), (Some(1), vec![(id.clone(), Severity::Fail)]));
    let (code, upgrading) = run("0.0.1-old").await;
    assert_eq!((code, upgrading), (Some(0), vec![(id, Severity::Pass)]));
}
