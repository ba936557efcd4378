//! Existing (pre-provisioned) volumes end to end: a real `csi-conform run` with
//! `--existing-volume` (or the settings file's `existing-volumes:`) against the reference
//! plugin in node-only mode, in a process of its own. The `existing` scenarios run and pass
//! with the mounts verified, a missing context is the plugin's FAILED_PRECONDITION in the
//! finding, `unstage-ignores-path` is caught, and the volume (a directory holding a file)
//! holds exactly what it held after the run, and after SIGKILL and `cleanup`.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::SystemTime,
};

use csi_conform::{
    journal, mounts,
    report::{RunReport, ScenarioResult, Severity},
};
use nix::sys::signal::Signal;

use crate::support::process::{ReferenceProcess, csi_conform, signal, spawn_csi_conform, wait_for_journal};

/// The scenarios of `suites/existing.yaml`.
const EXISTING: [&str; 4] =
    ["existing.read-write", "existing.read-only", "existing.second-target", "existing.unstage-without-path"];

/// Mount tests need CAP_SYS_ADMIN (the reference plugin bind-mounts); say so when missing.
fn can_mount(test: &str) -> bool {
    crate::support::can_mount(test, "the reference plugin mounts")
}

/// A pre-provisioned volume: a directory in `root` holding one file.
fn volume_dir(root: &Path) -> PathBuf {
    let dir = root.join("pre-provisioned");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("kept.txt"), "held before the run\n").unwrap();
    dir
}

/// What a volume directory holds (names and contents) and when it last changed: a write
/// probe, even one removed at once, changes the directory's mtime.
fn contents(dir: &Path) -> (BTreeMap<String, String>, SystemTime) {
    let files = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(e.path()).unwrap_or_default())
        })
        .collect();
    (files, std::fs::metadata(dir).unwrap().modified().unwrap())
}

/// Writes `path: DIR` as a volume_context file in `cwd`.
fn context_file(cwd: &Path, dir: &Path) -> String {
    std::fs::write(cwd.join("context.yaml"), format!("path: {}\n", dir.display())).unwrap();
    "context.yaml".to_owned()
}

fn read_report(cwd: &Path) -> RunReport {
    csi_conform::report::from_json(&std::fs::read_to_string(cwd.join("reports/report.json")).unwrap()).unwrap()
}

fn scenario<'a>(report: &'a RunReport, id: &str) -> &'a ScenarioResult {
    report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id).unwrap_or_else(|| panic!("no scenario {id}"))
}

fn findings(s: &ScenarioResult) -> String {
    s.findings.iter().map(|f| format!("{} {}: {}\n", f.severity, f.kind, f.message)).collect()
}

/// `run --endpoint E --focus FOCUS --work-dir work` and `extra`, in `cwd`.
async fn run(plugin: &ReferenceProcess, cwd: &Path, focus: &str, extra: &[&str]) -> std::process::Output {
    let endpoint = plugin.endpoint();
    let mut args = vec!["run", "--endpoint", endpoint.as_str(), "--focus", focus, "--work-dir", "work", "--seed", "3"];
    args.extend_from_slice(extra);
    csi_conform(&args, cwd).await
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_existing_scenarios_run_verify_the_mounts_and_leave_the_volume_as_it_was() {
    if !can_mount("the_existing_scenarios_run_verify_the_mounts_and_leave_the_volume_as_it_was") {
        return;
    }
    let plugin = ReferenceProcess::start(&["--node-only"]).await;
    let cwd = tempfile::tempdir().unwrap();
    let dir = volume_dir(cwd.path());
    let context = context_file(cwd.path(), &dir);
    let before = contents(&dir);
    let out = run(&plugin, cwd.path(), r"^existing\.", &["--existing-volume", "pv-static-1", "--existing-volume-context", &context]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = read_report(cwd.path());
    for id in EXISTING {
        let s = scenario(&report, id);
        assert_eq!(s.outcome, Severity::Pass, "{id} ran and passed: {:?} {}", s.skip_reason, findings(s));
        assert!(!s.findings.iter().any(|f| f.kind == "path-check-skipped"), "{id}: the mounts were checked: {}", findings(s));
    }
    assert_eq!(contents(&dir), before, "nothing was written to the volume, not even a write probe");
    assert!(mounts::mounts_under(cwd.path()).is_empty(), "everything was unmounted");
    // A finished run compacts its journal to what is outstanding: nothing. What it records
    // while it runs (stagings and publications, never the volume) is seen by the SIGKILL test.
    assert!(journal::outstanding(&cwd.path().join("reports/journal.jsonl")).unwrap().is_empty());

    // The mount checks are real: a plugin that drops the capability's mount flags fails.
    let quirky = ReferenceProcess::start(&["--node-only", "--quirk", "ignore-mount-flags"]).await;
    let out = run(
        &quirky,
        cwd.path(),
        r"^existing\.read-write$",
        &["--existing-volume", "pv-static-1", "--existing-volume-context", &context, "--existing-volume-capability", "mount,mount_flags=nosuid"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let quirky_report = read_report(cwd.path());
    let s = scenario(&quirky_report, "existing.read-write");
    assert!(s.findings.iter().any(|f| f.kind == "mount-flags" && f.message.contains("nosuid")), "{}", findings(s));

    // --existing-volume-writable lets the run write (its write probe changes the directory),
    // and what the volume held is still there.
    let out = run(&plugin, cwd.path(), r"^existing\.read-write$", &["--existing-volume", "pv-static-1", "--existing-volume-context", &context, "--existing-volume-writable"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let after = contents(&dir);
    assert_eq!(after.0, before.0, "the volume holds what it held");
    assert_ne!(after.1, before.1, "with --existing-volume-writable the write probe ran on the volume");
    assert!(mounts::mounts_under(cwd.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_context_the_plugins_failed_precondition_is_the_finding() {
    let plugin = ReferenceProcess::start(&["--node-only", "--require-context"]).await;
    let cwd = tempfile::tempdir().unwrap();
    let out = run(&plugin, cwd.path(), r"^existing\.read-write$", &["--existing-volume", "pv-static-1"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report = read_report(cwd.path());
    let s = scenario(&report, "existing.read-write");
    assert_eq!(s.outcome, Severity::Fail);
    let f = s.findings.iter().find(|f| f.severity == Severity::Fail).expect("a failure");
    assert_eq!(f.message, "NodeStageVolume answered FAILED_PRECONDITION, expected OK");
    assert_eq!(f.got.as_deref(), Some("FAILED_PRECONDITION"));
    assert!(f.plugin_message.as_deref().is_some_and(|m| m.contains("volume_context is missing")), "{f:?}");
    assert!(text(&out).contains("existing.read-write: NodeStageVolume answered FAILED_PRECONDITION"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_existing_volume_the_scenarios_skip_with_the_reason() {
    let plugin = ReferenceProcess::start(&["--node-only"]).await;
    let cwd = tempfile::tempdir().unwrap();
    let out = run(&plugin, cwd.path(), r"^existing\.", &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = read_report(cwd.path());
    for id in EXISTING {
        let s = scenario(&report, id);
        assert_eq!(s.outcome, Severity::Skip, "{id}");
        assert_eq!(s.skip_reason.as_deref(), Some(csi_conform::suite::NO_EXISTING_VOLUME), "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settings_file_lists_several_volumes_and_bad_entries_name_file_and_line() {
    let plugin = ReferenceProcess::start(&["--node-only"]).await;
    let cwd = tempfile::tempdir().unwrap();
    let dir = volume_dir(cwd.path());
    let before = contents(&dir);
    let settings = format!(
        "existing-volumes:\n  - id: pv-dir\n    context: {{ path: {} }}\n  - id: pv-sized\n    context: {{ size: 1Mi }}\n    capability: {{ access: mount, mode: SINGLE_NODE_WRITER }}\n",
        dir.display()
    );
    std::fs::write(cwd.path().join("run.yaml"), settings).unwrap();
    let out = run(&plugin, cwd.path(), r"^existing\.read-(write|only)$", &["--config", "run.yaml"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = read_report(cwd.path());
    for id in ["existing.read-write", "existing.read-only"] {
        let s = scenario(&report, id);
        assert_eq!(s.outcome, Severity::Pass, "{id}: {}", findings(s));
    }
    // Two scenarios, two volumes, each staging sent --idempotency-count (10) times.
    assert_eq!(report.rpc_latency["NodeStageVolume"].calls, 40, "both volumes were staged by both scenarios");
    assert_eq!(contents(&dir), before);

    std::fs::write(cwd.path().join("bad.yaml"), "existing-volumes:\n  - id: a\n    capability: { mode: WRITER }\n").unwrap();
    let out = run(&plugin, cwd.path(), r"^existing\.", &["--config", "bad.yaml"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.yaml:3:25: unknown access mode \"WRITER\""), "{}", text(&out));
    let out = run(&plugin, cwd.path(), r"^existing\.", &["--existing-volume", "a", "--existing-volume-capability", "block,fs_type=xfs"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--existing-volume-capability \"block,fs_type=xfs\": fs_type and mount_flags apply to mount access only"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unstage_ignores_path_is_caught_on_the_existing_volume_and_by_the_node_suite() {
    let plugin = ReferenceProcess::start(&["--node-only", "--quirk", "unstage-ignores-path"]).await;
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("context.yaml"), "size: 1Mi\n").unwrap();
    let focus = r"^(existing\.unstage-without-path|node\.unstage\.no-staging-path)$";
    let out = run(&plugin, cwd.path(), focus, &["--existing-volume", "pv-sized", "--existing-volume-context", "context.yaml"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report = read_report(cwd.path());
    for id in ["existing.unstage-without-path", "node.unstage.no-staging-path"] {
        let s = scenario(&report, id);
        assert_eq!(s.outcome, Severity::Fail, "{id}: {}", findings(s));
        let f = s.findings.iter().find(|f| f.severity == Severity::Fail).unwrap();
        assert_eq!((f.kind.as_str(), f.got.as_deref(), f.expected.as_deref()), ("unexpected-code", Some("OK"), Some("INVALID_ARGUMENT")), "{id}: {f:?}");
    }

    // The compliant plugin passes both.
    let compliant = ReferenceProcess::start(&["--node-only"]).await;
    let out = run(&compliant, cwd.path(), focus, &["--existing-volume", "pv-sized", "--existing-volume-context", "context.yaml"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_after_sigkill_unpublishes_and_unstages_and_leaves_the_existing_volume() {
    if !can_mount("cleanup_after_sigkill_unpublishes_and_unstages_and_leaves_the_existing_volume") {
        return;
    }
    let plugin = ReferenceProcess::start(&["--node-only", "--latency", "20ms"]).await;
    let cwd = tempfile::tempdir().unwrap();
    let dir = volume_dir(cwd.path());
    let context = context_file(cwd.path(), &dir);
    let before = contents(&dir);
    let endpoint = plugin.endpoint();
    let args = [
        "run", "--endpoint", &endpoint, "--focus", r"^existing\.", "--work-dir", "work", "--existing-volume", "pv-static-1",
        "--existing-volume-context", &context,
    ];
    let mut child = spawn_csi_conform(&args, cwd.path());
    let journal_path = cwd.path().join("reports/journal.jsonl");
    wait_for_journal(&journal_path, r#""kind":"node-publication""#, 1).await;
    assert!(!mounts::mounts_under(cwd.path().join("work").as_path()).is_empty(), "the run has mounted the volume by now");
    signal(&child, Signal::SIGKILL);
    child.wait().await.unwrap();
    let left = journal::outstanding(&journal_path).unwrap();
    assert!(!left.is_empty(), "a killed run leaves its stagings and publications in the journal");
    assert!(left.iter().all(|(_, r)| !r.to_string().starts_with("volume ")), "never the volume: {left:?}");

    let cleaned = csi_conform(&["cleanup", "--journal", "reports/journal.jsonl"], cwd.path()).await;
    let stdout = String::from_utf8_lossy(&cleaned.stdout);
    assert_eq!(cleaned.status.code(), Some(0), "{}", text(&cleaned));
    assert!(stdout.contains("NodeUnpublishVolume OK") || stdout.contains("NodeUnstageVolume OK"), "{stdout}");
    assert!(!stdout.contains("DeleteVolume"), "{stdout}");
    assert!(journal::outstanding(&journal_path).unwrap().is_empty());
    assert!(mounts::mounts_under(cwd.path()).is_empty(), "cleanup unmounted everything");
    let (files, _) = contents(&dir);
    assert_eq!(files, before.0, "the existing volume is still there and holds what it held");
}

/// A suite of the operator's own that asks for every RPC that would harm a volume.
const HARMFUL: &str = r#"
suite: harmful
title: RPCs that would harm the volume named KEPT
scenarios:
  - id: delete
    title: DeleteVolume of it
    steps:
      - call: DeleteVolume
        request: { volume_id: KEPT }
  - id: expand
    title: ControllerExpandVolume of it
    steps:
      - call: ControllerExpandVolume
        request: { volume_id: KEPT, capacity_range: { required_bytes: 2097152 } }
  - id: snapshot
    title: CreateSnapshot of it
    steps:
      - call: CreateSnapshot
        request: { name: "${name}", source_volume_id: KEPT }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_rpc_that_would_harm_an_existing_volume_is_ever_sent() {
    let plugin = ReferenceProcess::start(&[]).await;
    let kept = plugin.create_volume("made-before-the-run").await;
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("harmful.yaml"), HARMFUL.replace("KEPT", &format!("{kept:?}"))).unwrap();
    let out = run(&plugin, cwd.path(), r"^harmful\.", &["--no-builtin", "--suite", "harmful.yaml", "--existing-volume", &kept]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report = read_report(cwd.path());
    for id in ["harmful.delete", "harmful.expand", "harmful.snapshot"] {
        let s = scenario(&report, id);
        let f = s.findings.iter().find(|f| f.kind == "protected-volume").unwrap_or_else(|| panic!("{id}: {}", findings(s)));
        assert_eq!(f.severity, Severity::Error, "the run's own refusal is not the plugin's failure");
        assert!(f.message.contains(&format!("of existing volume {kept} (--existing-volume) was not sent")), "{}", f.message);
    }
    assert_eq!(report.rpc_latency.get("DeleteVolume").map_or(0, |r| r.calls), 0, "never sent");
    assert_eq!(plugin.volume_ids().await, [kept], "the volume is still there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_volume_on_a_controller_plugin_is_controller_published_first_with_its_publish_context() {
    // The reference plugin with both services: ControllerPublishVolume hands out a
    // publish_context that NodeStageVolume and NodePublishVolume must be given back.
    let plugin = ReferenceProcess::start(&["--require-context"]).await;
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("context.yaml"), "size: 1Mi\n").unwrap();
    let out = run(&plugin, cwd.path(), r"^existing\.", &["--existing-volume", "pv-static", "--existing-volume-context", "context.yaml"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = read_report(cwd.path());
    for id in EXISTING {
        let s = scenario(&report, id);
        assert_eq!(s.outcome, Severity::Pass, "{id}: {:?} {}", s.skip_reason, findings(s));
    }
    for rpc in ["ControllerPublishVolume", "ControllerUnpublishVolume", "NodeStageVolume", "NodePublishVolume"] {
        assert!(report.rpc_latency.get(rpc).is_some_and(|r| r.calls > 0 && r.errors == 0), "{rpc}: {:?}", report.rpc_latency.get(rpc));
    }
    for never in ["CreateVolume", "DeleteVolume", "ValidateVolumeCapabilities"] {
        assert!(!report.rpc_latency.contains_key(never), "{never} was called");
    }
    assert!(journal::outstanding(&cwd.path().join("reports/journal.jsonl")).unwrap().is_empty());
}

/// A node-only plugin creates no volume, so the orchestrator instances of `lifecycle` all
/// skip; its existing volumes are what an orchestrator stages and publishes (Nomad's `volume
/// register`, a static PersistentVolume, a Swarm volume without CONTROLLER_SERVICE), so the
/// `existing` scenarios run as each orchestrator calls the plugin and the matrix judges the
/// node rows: the paths and directories of each layout, unstaging, the volume_context passed
/// on (`--require-context`: the plugin refuses a stage without it), readonly. The volume is
/// left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_only_plugins_existing_volume_is_driven_as_each_orchestrator_calls_it() {
    if !can_mount("a_node_only_plugins_existing_volume_is_driven_as_each_orchestrator_calls_it") {
        return;
    }
    let plugin = ReferenceProcess::start(&["--node-only", "--require-context"]).await;
    let cwd = tempfile::tempdir().unwrap();
    let dir = volume_dir(cwd.path());
    let context = context_file(cwd.path(), &dir);
    let before = contents(&dir);
    let existing = ["--existing-volume", "pv-static-1", "--existing-volume-context", &context];
    let out = run(&plugin, cwd.path(), r"^existing\.", &[&existing[..], &["--orchestrator", "all"]].concat()).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = read_report(cwd.path());
    for o in ["nomad", "kubernetes", "swarm"] {
        for id in EXISTING {
            let s = scenario(&report, &format!("{id}@{o}"));
            assert_eq!(s.outcome, Severity::Pass, "{id}@{o}: {:?} {}", s.skip_reason, findings(s));
        }
    }
    let node_rows = ["paths.staging", "paths.publish-mount", "dirs.staging", "dirs.target", "rpc.unstage", "fields.volume-context", "fields.readonly"];
    for o in &report.orchestrators {
        for b in &o.behaviours {
            assert!(matches!(b.outcome, Severity::Pass | Severity::Skip), "{} {}: {b:#?}", o.name, b.id);
            if node_rows.contains(&b.id.as_str()) {
                assert_eq!(b.outcome, Severity::Pass, "{} {}: {:?}", o.name, b.id, b.skip_reason);
                assert!(b.instances.iter().all(|i| i.starts_with("existing.")), "{:?}", b.instances);
            }
        }
    }
    assert_eq!(contents(&dir), before, "nothing was written to the volume");
    assert!(mounts::mounts_under(cwd.path()).is_empty(), "everything was unmounted");
    assert!(journal::outstanding(&cwd.path().join("reports/journal.jsonl")).unwrap().is_empty());

    // No orchestrator unstages without a staging path: only the base scenario asks it, so a
    // plugin that answers OK (cfgd-csi) fails there and in no orchestrator's cell.
    let quirky = ReferenceProcess::start(&["--node-only", "--require-context", "--quirk", "unstage-ignores-path"]).await;
    let focus = r"^existing\.unstage-without-path";
    let out = run(&quirky, cwd.path(), focus, &[&existing[..], &["--orchestrator", "all"]].concat()).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report = read_report(cwd.path());
    assert_eq!(scenario(&report, "existing.unstage-without-path").outcome, Severity::Fail);
    for o in ["nomad", "kubernetes", "swarm"] {
        let s = scenario(&report, &format!("existing.unstage-without-path@{o}"));
        assert_eq!(s.outcome, Severity::Pass, "{o}: {}", findings(s));
    }
    assert!(report.orchestrators.iter().flat_map(|o| &o.behaviours).all(|b| b.outcome != Severity::Fail));
}
