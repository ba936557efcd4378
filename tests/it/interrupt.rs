//! A real `csi-conform run` process stopped by SIGINT, SIGTERM, two signals, or SIGKILL
//! (then `csi-conform cleanup`), against the reference plugin in a process of its own: what
//! is left on the plugin is read from the plugin, and a volume that existed before the run
//! survives everything.

use std::path::Path;

use csi_conform::{journal, mounts, report::RunReport};
use nix::sys::signal::Signal;
use tokio::io::AsyncBufReadExt;

use crate::support::{
    misbehaving::{Misbehaviour, fake_where},
    process::{ReferenceProcess, csi_conform, signal, spawn_csi_conform, wait_for_journal},
};

/// Mount tests need CAP_SYS_ADMIN (the reference plugin bind-mounts); say so when missing.
fn can_mount(test: &str) -> bool {
    crate::support::can_mount(test, "the reference plugin mounts")
}

/// Starts a run of the built-in node scenarios (they stage and publish: mounts) against
/// `plugin` in `cwd` (reports and journal under `cwd/reports`, scenario paths under
/// `cwd/work`), and waits until a node publication is journaled.
async fn start_run(plugin: &ReferenceProcess, cwd: &Path) -> tokio::process::Child {
    let endpoint = plugin.endpoint();
    let args = ["run", "--endpoint", &endpoint, "--focus", r"^node\.", "--work-dir", "work", "--seed", "11", "-j", "4"];
    let child = spawn_csi_conform(&args, cwd);
    wait_for_journal(&cwd.join("reports/journal.jsonl"), r#""kind":"node-publication""#, 1).await;
    assert!(!mounts::mounts_under(cwd).is_empty(), "the run has mounted something by now");
    child
}

fn assert_no_mounts(under: &Path) {
    let left = mounts::mounts_under(under);
    assert!(left.is_empty(), "mounts left under {}: {left:?}", under.display());
}

async fn a_signal_tears_down_writes_the_partial_report_and_exits(sig: Signal, code: i32) {
    let plugin = ReferenceProcess::start(&["--latency", "20ms"]).await;
    let kept = plugin.create_volume("made-before-the-run").await;
    let cwd = tempfile::tempdir().unwrap();
    let child = start_run(&plugin, cwd.path()).await;
    let journal_path = cwd.path().join("reports/journal.jsonl");
    signal(&child, sig);
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reason = format!("interrupted by {sig}");
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(stderr.contains(&format!("{reason}: stopping; tearing down what was created")), "{stderr}");

    // The partial report is written, and says what was not run and why.
    let report: RunReport =
        csi_conform::report::from_json(&std::fs::read_to_string(cwd.path().join("reports/report.json")).unwrap()).unwrap();
    assert_eq!(report.interrupted.as_deref(), Some(reason.as_str()));
    let scenarios: Vec<_> = report.suites.iter().flat_map(|s| &s.scenarios).collect();
    let not_run = format!("not run: {reason}");
    assert!(scenarios.iter().any(|s| s.skip_reason.as_deref() == Some(not_run.as_str())));
    let junit = std::fs::read_to_string(cwd.path().join("reports/junit.xml")).unwrap();
    let parsed = crate::report::parse_junit(&junit);
    assert_eq!(parsed.tests as usize, scenarios.len());
    assert!(junit.contains(&format!(r#"<property name="interrupted" value="{reason}"/>"#)), "{}", &junit[..1500]);

    // Everything the run made is gone from the plugin; what was there before is not.
    assert_eq!(plugin.volume_ids().await, [kept]);
    assert_no_mounts(cwd.path());
    assert!(journal::outstanding(&journal_path).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_tears_down_writes_the_partial_report_and_exits_130() {
    if can_mount("sigint_tears_down_writes_the_partial_report_and_exits_130") {
        a_signal_tears_down_writes_the_partial_report_and_exits(Signal::SIGINT, 130).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_tears_down_writes_the_partial_report_and_exits_143() {
    if can_mount("sigterm_tears_down_writes_the_partial_report_and_exits_143") {
        a_signal_tears_down_writes_the_partial_report_and_exits(Signal::SIGTERM, 143).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_run_refuses_to_start_and_cleanup_undoes_everything_idempotently() {
    if !can_mount("after_sigkill_run_refuses_to_start_and_cleanup_undoes_everything_idempotently") {
        return;
    }
    let plugin = ReferenceProcess::start(&["--latency", "20ms"]).await;
    let kept = plugin.create_volume("made-before-the-run").await;
    let cwd = tempfile::tempdir().unwrap();
    let mut child = start_run(&plugin, cwd.path()).await;
    let journal_path = cwd.path().join("reports/journal.jsonl");
    signal(&child, Signal::SIGKILL);
    let status = child.wait().await.unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9));
    let left = journal::outstanding(&journal_path).unwrap().len();
    assert!(left > 0, "a killed run leaves its resources in the journal");
    assert!(plugin.volume_ids().await.len() > 1, "and on the plugin");

    // A new run against the same plugin refuses to start.
    let endpoint = plugin.endpoint();
    let again = ["run", "--endpoint", endpoint.as_str(), "--work-dir", "work", "--focus", r"^identity\.probe$"];
    let refused = csi_conform(&again, cwd.path()).await;
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        format!(
            "error: reports/journal.jsonl lists {left} resource(s) an earlier run may have left on this plugin; \
             run `csi-conform cleanup --journal reports/journal.jsonl` or pass --cleanup-first\n"
        )
    );

    let cleaned = csi_conform(&["cleanup", "--journal", "reports/journal.jsonl"], cwd.path()).await;
    let stdout = String::from_utf8_lossy(&cleaned.stdout);
    assert_eq!(cleaned.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&cleaned.stderr));
    assert!(stdout.ends_with(&format!("cleanup: {left} undone, 0 left\n")), "{stdout}");
    assert_eq!(plugin.volume_ids().await, std::slice::from_ref(&kept));
    assert_no_mounts(cwd.path());
    // Nor any empty scenario directory of the killed run, nor the run's own directory.
    let left_dirs: Vec<_> = std::fs::read_dir(cwd.path().join("work")).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left_dirs.is_empty(), "left under the work dir: {left_dirs:?}");

    // Nothing is left to do, and the run starts again.
    let twice = csi_conform(&["cleanup", "--journal", "reports/journal.jsonl"], cwd.path()).await;
    assert_eq!((twice.status.code(), String::from_utf8_lossy(&twice.stdout).as_ref()), (Some(0), "cleanup: nothing to do\n"));
    let rerun = csi_conform(&again, cwd.path()).await;
    assert_eq!(rerun.status.code(), Some(0), "{}", String::from_utf8_lossy(&rerun.stderr));
    assert_eq!(plugin.volume_ids().await, [kept]);
}

const CREATE_THEN_PROBE: &str = r#"
suite: stuck
title: A volume whose deletion never answers
scenarios:
  - id: create
    title: create, then probe
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
      - call: Probe
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_stops_at_once_and_leaves_the_journal() {
    let fake = fake_where("DeleteVolume", Misbehaviour::Hang).await;
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("stuck.yaml"), CREATE_THEN_PROBE).unwrap();
    let socket = fake.socket.display().to_string();
    let args = ["run", "--endpoint", &socket, "--no-builtin", "--suite", "stuck.yaml", "--work-dir", "work"];
    let mut child = spawn_csi_conform(&args, cwd.path());
    let journal_path = cwd.path().join("reports/journal.jsonl");
    wait_for_journal(&journal_path, r#""op":"created""#, 1).await;
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    signal(&child, Signal::SIGINT);
    while let Some(line) = stderr.next_line().await.unwrap() {
        if line.contains("stopping; tearing down") {
            break;
        }
    }
    // Teardown is stuck on DeleteVolume (for up to --rpc-timeout); a second signal ends it.
    signal(&child, Signal::SIGTERM);
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(143));
    let mut rest = Vec::new();
    while let Some(line) = stderr.next_line().await.unwrap() {
        rest.push(line);
    }
    assert!(rest.iter().any(|l| l.contains("stopped at once; what is left is in the journal")), "{rest:?}");
    let left = journal::outstanding(&journal_path).unwrap();
    let (id, name) = {
        let state = fake.state.lock().unwrap();
        let (id, volume) = state.volumes.iter().next().expect("the volume is still on the plugin");
        (id.clone(), volume.name.clone())
    };
    let described: Vec<String> = left.iter().map(|(_, o)| o.to_string()).collect();
    assert_eq!(described, [format!("volume {id} ({name}) on unix://{socket} (scenario stuck.create)")]);
}
