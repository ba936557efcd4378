//! Faults while a run or a cleanup works, against the reference plugin in a process of its
//! own: an answer that comes after the deadline, the harness SIGKILLed at several points of a
//! run and during `cleanup`, the plugin killed and restarted on its socket. Each ends with
//! nothing left: not on the plugin (read from the plugin), not in the mount table, not under
//! the work directory, not in the journal (nor a lock file beside it).

use std::path::Path;

use csi_conform::{journal, mounts};
use nix::sys::signal::Signal;

use crate::support::process::{ReferenceProcess, csi_conform, signal, spawn_csi_conform, wait_for_journal};

/// Nothing of the run is left: no volume on the plugin, no mount, nothing under `work`,
/// nothing in the journal, no lock file beside it.
async fn assert_nothing_left(plugin: &ReferenceProcess, cwd: &Path) {
    assert_eq!(plugin.volume_ids().await, Vec::<String>::new(), "volumes left on the plugin");
    let mounted = mounts::mounts_under(cwd);
    assert!(mounted.is_empty(), "mounts left: {mounted:?}");
    let work = cwd.join("work");
    let dirs: Vec<_> = std::fs::read_dir(&work).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(dirs.is_empty(), "left under the work dir: {dirs:?}");
    let journal_path = cwd.join("reports/journal.jsonl");
    let outstanding = journal::outstanding(&journal_path).unwrap();
    assert!(outstanding.is_empty(), "left in the journal: {outstanding:#?}");
    assert!(!cwd.join("reports/journal.jsonl.lock").exists(), "a lock file stays beside the journal");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A CreateVolume the plugin answers after `--rpc-timeout` is in doubt: the run asks it again
/// (same name, same request) before it ends, learns the id, and deletes the volume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_answered_after_the_deadline_is_asked_again_and_undone_before_the_run_ends() {
    let plugin = ReferenceProcess::start(&["--create-answer-delay", "600ms"]).await;
    let cwd = tempfile::tempdir().unwrap();
    let endpoint = plugin.endpoint();
    let args = ["run", "--endpoint", &endpoint, "--focus", r"^controller\.delete-volume", "--work-dir", "work", "--rpc-timeout", "300ms"];
    let out = csi_conform(&args, cwd.path()).await;
    let stderr = text(&out.stderr);
    assert!(stderr.contains("in doubt at the end of the run"), "{stderr}");
    assert!(stderr.contains("asked again, it is volume vol-"), "{stderr}");
    assert!(!stderr.contains("undo them with `csi-conform cleanup"), "{stderr}");
    // The summary names what was asked again and the bound it was asked within; so does the
    // JSON report.
    let stdout = text(&out.stdout);
    let line = stdout.lines().find(|l| l.starts_with("In doubt at the end:")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("--reconnect-attempts (") && line.contains("--cleanup-timeout (") && line.contains(" 0 left"), "{line}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cwd.path().join("reports/report.json")).unwrap()).unwrap();
    let settled = &json["settled"];
    assert!(settled["undone"].as_array().is_some_and(|u| !u.is_empty()), "{settled}");
    assert_eq!(settled["left"], serde_json::json!([]));
    assert!(settled["reconnect_attempts"].is_u64() && settled["cleanup_timeout"].as_f64().is_some_and(|t| t > 0.0), "{settled}");
    assert_nothing_left(&plugin, cwd.path()).await;
}

/// Mount tests need CAP_SYS_ADMIN (the reference plugin bind-mounts); say so when missing.
fn can_mount(test: &str) -> bool {
    crate::support::can_mount(test, "the reference plugin mounts")
}

/// Starts a run of the built-in node scenarios (they create, publish, stage and mount).
fn start_node_run(plugin: &ReferenceProcess, cwd: &Path) -> tokio::process::Child {
    let endpoint = plugin.endpoint();
    let args = ["run", "--endpoint", &endpoint, "--focus", r"^node\.", "--work-dir", "work", "-j", "4"];
    spawn_csi_conform(&args, cwd)
}

/// How many lines of the journal at `path` contain `what`.
fn journal_lines(path: &Path, what: &str) -> usize {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter(|l| l.contains(what)).count()
}

/// A run SIGKILLed as soon as its own directory exists (before anything was staged under
/// it): `cleanup` removes that directory too, which the journal names from before it was made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_sigkilled_before_any_staging_leaves_no_directory_after_cleanup() {
    let plugin = ReferenceProcess::start(&["--latency", "20ms"]).await;
    let cwd = tempfile::tempdir().unwrap();
    let endpoint = plugin.endpoint();
    let args = ["run", "--endpoint", &endpoint, "--focus", r"^controller\.", "--work-dir", "work"];
    let mut child = spawn_csi_conform(&args, cwd.path());
    let work = cwd.path().join("work");
    let run_dir = || {
        std::fs::read_dir(&work).ok()?.flatten().map(|e| e.path()).find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("run-"))
        })
    };
    let mut made = None;
    for _ in 0..3000 {
        made = run_dir();
        if made.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    signal(&child, Signal::SIGKILL);
    child.wait().await.unwrap();
    let made = made.expect("the run made its directory");
    assert!(made.is_dir(), "{} is there when the run is killed", made.display());
    let cleaned = csi_conform(&["cleanup", "--journal", "reports/journal.jsonl"], cwd.path()).await;
    assert_eq!(cleaned.status.code(), Some(0), "{}{}", text(&cleaned.stdout), text(&cleaned.stderr));
    assert_nothing_left(&plugin, cwd.path()).await;
}

/// A run directory `cleanup` did not find empty (a file in it that no run made) is never
/// removed: it is named as left, `cleanup` exits 1, and it stays in the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_directory_holding_a_file_is_named_as_left_and_kept() {
    let cwd = tempfile::tempdir().unwrap();
    let dir = cwd.path().join("work/run-x-1");
    std::fs::create_dir_all(dir.join("0001-s")).unwrap();
    std::fs::write(dir.join("0001-s/keep"), "not ours").unwrap();
    let journal_path = cwd.path().join("reports/journal.jsonl");
    let journal = journal::Journal::open(&journal_path, "x").unwrap();
    journal.run_dir(&dir).unwrap();
    drop(journal);
    let cleaned = csi_conform(&["cleanup", "--journal", "reports/journal.jsonl"], cwd.path()).await;
    let stdout = text(&cleaned.stdout);
    assert_eq!(cleaned.status.code(), Some(1), "{stdout}{}", text(&cleaned.stderr));
    assert!(stdout.contains("FAILED the run's directory") && stdout.contains("not empty"), "{stdout}");
    assert!(dir.join("0001-s/keep").is_file());
    assert_eq!(journal::run_dirs(&journal_path).unwrap().len(), 1);
    std::fs::remove_file(dir.join("0001-s/keep")).unwrap();
    let again = csi_conform(&["cleanup", "--journal", "reports/journal.jsonl"], cwd.path()).await;
    assert_eq!(again.status.code(), Some(0), "{}{}", text(&again.stdout), text(&again.stderr));
    assert!(!dir.exists() && cwd.path().join("work").is_dir(), "the emptied run directory goes, the work dir stays");
    assert_eq!(journal::run_dirs(&journal_path).unwrap(), Vec::new());
}

/// `csi-conform cleanup` undoes everything, whenever the run was SIGKILLed once it has
/// staged: a volume staged, one published and mounted, several.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_sigkilled_at_any_point_leaves_nothing_after_cleanup() {
    if !can_mount("a_run_sigkilled_at_any_point_leaves_nothing_after_cleanup") {
        return;
    }
    let plugin = ReferenceProcess::start(&["--latency", "20ms"]).await;
    for (what, n) in [(r#""kind":"node-stage""#, 1), (r#""kind":"node-publication""#, 1), (r#""kind":"node-publication""#, 3)] {
        let cwd = tempfile::tempdir().unwrap();
        let journal_path = cwd.path().join("reports/journal.jsonl");
        let mut child = start_node_run(&plugin, cwd.path());
        wait_for_journal(&journal_path, what, n).await;
        signal(&child, Signal::SIGKILL);
        child.wait().await.unwrap();
        let cleaned = csi_conform(&["cleanup", "--journal", "reports/journal.jsonl"], cwd.path()).await;
        assert_eq!(cleaned.status.code(), Some(0), "killed at {what} x{n}: {}{}", text(&cleaned.stdout), text(&cleaned.stderr));
        assert_nothing_left(&plugin, cwd.path()).await;
    }
}

/// A `cleanup` SIGKILLed after it undid the run's stagings and publications (their records
/// marked done, volumes still to go) leaves their directories to the next `cleanup`, which
/// removes them although no record it reads names them any more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanup_sigkilled_mid_way_leaves_nothing_after_the_next_cleanup() {
    if !can_mount("a_cleanup_sigkilled_mid_way_leaves_nothing_after_the_next_cleanup") {
        return;
    }
    // Slow, so that cleanup is still deleting volumes (the node's undos come first) when it
    // is killed.
    let plugin = ReferenceProcess::start(&["--latency", "100ms"]).await;
    let cwd = tempfile::tempdir().unwrap();
    let journal_path = cwd.path().join("reports/journal.jsonl");
    let mut child = start_node_run(&plugin, cwd.path());
    wait_for_journal(&journal_path, r#""kind":"node-publication""#, 1).await;
    signal(&child, Signal::SIGKILL);
    child.wait().await.unwrap();
    let node_records = journal::outstanding(&journal_path)
        .unwrap()
        .iter()
        .filter(|(_, o)| match o {
            journal::Outstanding::Resource(r) => r.resource.node().is_some(),
            journal::Outstanding::Call(c) => c.rpc.starts_with("Node"),
        })
        .count();
    let volumes_left = journal::outstanding(&journal_path).unwrap().len() - node_records;
    assert!(node_records > 0 && volumes_left > 0, "{node_records} node records, {volumes_left} others");
    let done = r#""op":"done""#;
    let before = journal_lines(&journal_path, done);
    let mut cleanup = spawn_csi_conform(&["cleanup", "--journal", "reports/journal.jsonl"], cwd.path());
    wait_for_journal(&journal_path, done, before + node_records).await;
    signal(&cleanup, Signal::SIGKILL);
    cleanup.wait().await.unwrap();
    let again = csi_conform(&["cleanup", "--journal", "reports/journal.jsonl"], cwd.path()).await;
    assert_eq!(again.status.code(), Some(0), "{}{}", text(&again.stdout), text(&again.stderr));
    assert_nothing_left(&plugin, cwd.path()).await;
}

/// The plugin killed and restarted on its socket while a run works: calls cut off are in
/// doubt and asked again, teardown that found no plugin is retried once it is back, and the
/// run itself leaves nothing (no `cleanup` needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_killed_and_restarted_mid_run_leaves_nothing() {
    if !can_mount("a_plugin_killed_and_restarted_mid_run_leaves_nothing") {
        return;
    }
    let mut plugin = ReferenceProcess::start(&["--latency", "20ms"]).await;
    let cwd = tempfile::tempdir().unwrap();
    let journal_path = cwd.path().join("reports/journal.jsonl");
    let child = start_node_run(&plugin, cwd.path());
    wait_for_journal(&journal_path, r#""kind":"node-publication""#, 1).await;
    plugin.kill_and_restart(&["--latency", "20ms"]).await;
    let out = child.wait_with_output().await.unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out.stderr));
    assert_nothing_left(&plugin, cwd.path()).await;
}
