//! Faults while a run or a cleanup works, against the reference plugin in a process of its
//! own: an answer that comes after the deadline, the harness SIGKILLed at several points of a
//! run and during `cleanup`, the plugin killed and restarted on its socket. Each ends with
//! nothing left: not on the plugin (read from the plugin), not in the mount table, not under
//! the work directory, not in the journal (nor a lock file beside it).

use std::path::Path;

use csi_conform::{journal, mounts};

use crate::support::process::{ReferenceProcess, csi_conform};

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
    assert_nothing_left(&plugin, cwd.path()).await;
}
