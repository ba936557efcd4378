//! Tests of [`super`]: what is outstanding, compaction, the lock file, and what each entry
//! settles.

use super::*;

fn volume(id: &str) -> Record {
    Record {
        endpoint: "unix:///x.sock".into(),
        scenario: "s.x".into(),
        secrets_key: Some("CreateVolumeSecret".into()),
        undo_secrets_key: Some("DeleteVolumeSecret".into()),
        name: Some(format!("name-{id}")),
        resource: Resource::Volume { volume_id: id.into() },
    }
}

fn names(path: &Path) -> Vec<String> {
    outstanding(path).unwrap().iter().map(|(_, o)| o.to_string()).collect()
}

#[test]
fn created_minus_done_is_outstanding_in_creation_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/journal.jsonl");
    let j = Journal::open(&path, "run1").unwrap();
    let a = j.created(&volume("a")).unwrap();
    let _b = j.created(&volume("b")).unwrap();
    let c = j.created(&volume("c")).unwrap();
    j.done(&a).unwrap();
    assert_eq!(
        names(&path),
        ["volume b (name-b) on unix:///x.sock (scenario s.x)", "volume c (name-c) on unix:///x.sock (scenario s.x)"]
    );
    mark_done(&path, &[c]).unwrap();
    assert_eq!(outstanding(&path).unwrap().len(), 1);
    // A second run appends to the same file with ids of its own.
    let j2 = Journal::open(&path, "run2").unwrap();
    let d = j2.created(&volume("d")).unwrap();
    assert!(d.starts_with("run2:"));
    assert_eq!(outstanding(&path).unwrap().len(), 2);
}

#[test]
fn compaction_keeps_what_is_outstanding_with_its_id_and_waits_for_other_writers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let a = Journal::open(&path, "a").unwrap();
    let kept = a.created(&volume("kept")).unwrap();
    let gone = a.created(&volume("gone")).unwrap();
    a.done(&gone).unwrap();
    let b = Journal::open(&path, "b").unwrap();
    assert_eq!(a.compact().unwrap(), None, "another run still writes to it");
    assert_eq!(compact(&path).unwrap(), None);
    let from_b = b.created(&volume("from-b")).unwrap();
    drop(b);
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 4, "nothing was lost meanwhile");
    assert_eq!(a.compact().unwrap(), Some(2));
    let ids: Vec<String> = outstanding(&path).unwrap().into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, [kept.clone(), from_b]);
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
    // The shared lock is back: a compaction from elsewhere waits for this run.
    assert_eq!(compact(&path).unwrap(), None);
    drop(a);
    mark_done(&path, &[kept]).unwrap();
    assert_eq!(compact(&path).unwrap(), Some(1));
    assert_eq!(names(&path), ["volume from-b (name-from-b) on unix:///x.sock (scenario s.x)"]);
    std::fs::write(dir.path().join(".j.jsonl.999999.tmp"), "half a rewrite").unwrap();
    let missing = dir.path().join("none.jsonl");
    assert_eq!(compact(&missing).unwrap(), Some(0));
    assert!(!missing.exists(), "no journal is made where there was none");
    assert_eq!(compact(&path).unwrap(), Some(1), "what a killed rewrite left goes");
    let left: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!left.iter().any(|n| n.ends_with(".tmp")), "{left:?}");
}

#[test]
fn a_call_is_outstanding_until_answered_or_settled_by_what_it_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let j = Journal::open(&path, "r").unwrap();
    let call = |name: &str| CallRecord {
        endpoint: "unix:///x.sock".into(),
        scenario: "s.x".into(),
        secrets_key: None,
        rpc: "CreateVolume".into(),
        node: 0,
        request: serde_json::json!({ "name": name }),
    };
    let answered = j.sending(&call("a")).unwrap();
    let created = j.sending(&call("b")).unwrap();
    let _lost = j.sending(&call("c")).unwrap();
    j.done(&answered).unwrap();
    j.created_by(&volume("b"), Some(&created)).unwrap();
    assert_eq!(
        names(&path),
        [
            "unanswered CreateVolume of c on unix:///x.sock (scenario s.x)",
            "volume b (name-b) on unix:///x.sock (scenario s.x)"
        ]
    );
}

#[test]
fn a_torn_last_line_is_ignored_but_corruption_elsewhere_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let j = Journal::open(&path, "r").unwrap();
    j.created(&volume("a")).unwrap();
    drop(j);
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(b"{\"op\":\"created\",\"id\":\"r:2\",\"reso").unwrap();
    assert_eq!(outstanding(&path).unwrap().len(), 1);
    f.write_all(b"\n{\"op\":\"done\",\"id\":\"r:1\"}\n").unwrap();
    let e = outstanding(&path).unwrap_err();
    assert!(e.to_string().contains("j.jsonl:2: not a journal entry"), "{e}");
}

#[test]
fn a_missing_journal_has_nothing_outstanding() {
    assert!(outstanding(Path::new("/nonexistent/journal.jsonl")).unwrap().is_empty());
}

#[test]
fn what_the_plugin_lost_or_kept_is_settled_and_never_undone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let j = Journal::open(&path, "r").unwrap();
    let call = CallRecord {
        endpoint: "unix:///x.sock".into(),
        scenario: "s.x".into(),
        secrets_key: None,
        rpc: "CreateVolume".into(),
        node: 0,
        request: serde_json::json!({ "name": "lost" }),
    };
    let lost = j.sending(&call).unwrap();
    let kept = j.created(&volume("kept")).unwrap();
    let _open = j.created(&volume("open")).unwrap();
    assert_eq!(outstanding(&path).unwrap().len(), 3);
    j.lost_by_plugin(&lost, &call, "answered OK with an empty volume id").unwrap();
    j.kept_by_plugin(&kept, "still listed after the delete").unwrap();
    assert_eq!(names(&path), ["volume open (name-open) on unix:///x.sock (scenario s.x)"]);
    // What the plugin answered is written down for the operator.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("empty volume id") && text.contains("still listed"), "{text}");
}

#[test]
fn a_journal_that_cannot_be_opened_is_an_error_not_an_empty_one() {
    // Only a missing journal has nothing outstanding: any other failure to open it (here a
    // path through a regular file) must not read as "nothing to clean up".
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, "").unwrap();
    let e = outstanding(&file.join("journal.jsonl")).unwrap_err();
    assert!(matches!(e, JournalError::Io { .. }), "{e}");
}

#[test]
fn what_is_outstanding_is_undone_publications_first_whether_made_or_only_asked_for() {
    // cleanup sorts by this rank: a volume deleted before its publication is undone fails.
    let call = |rpc: &str| {
        Outstanding::Call(CallRecord {
            endpoint: "unix:///x.sock".into(),
            scenario: "s.x".into(),
            secrets_key: None,
            rpc: rpc.into(),
            node: 0,
            request: serde_json::json!({}),
        })
    };
    let published = Record {
        resource: Resource::NodePublication { volume_id: "a".into(), target_path: "/t".into(), node: 0 },
        ..volume("a")
    };
    let ranks = [
        Outstanding::Resource(published).undo_rank(),
        call("NodePublishVolume").undo_rank(),
        call("NodeStageVolume").undo_rank(),
        Outstanding::Resource(volume("a")).undo_rank(),
        call("CreateVolume").undo_rank(),
    ];
    assert_eq!(ranks, [0, 0, 1, 3, 3]);
}

/// What a run's engine tells the observer is what the journal holds: each call and each
/// resource at the endpoint that serves it (controller RPCs at the controller, node RPCs
/// at their own node), settled by its answer, its release, or the plugin's own account.
#[test]
fn the_observer_journals_each_call_and_resource_at_the_endpoint_that_serves_it() {
    use crate::suite::{ResourceObserver as _, Sending, Tracked};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let observer = JournalObserver::new(
        Journal::open(&path, "r").unwrap(),
        Some("unix:///controller.sock".into()),
        vec!["unix:///node0.sock".into(), "unix:///node1.sock".into()],
    );
    let sending = |seq: u64, rpc: &str, name: &str| {
        let mut request = prost_reflect::DynamicMessage::new(crate::proto::method(rpc).unwrap().input());
        if !name.is_empty() {
            request.set_field_by_name("name", prost_reflect::Value::String(name.into()));
        }
        Sending { seq, scenario: "s.x".into(), rpc: rpc.into(), request, node: 1, secrets_key: None }
    };
    let tracked = |seq: u64, resource: Resource| Tracked {
        seq,
        scenario: "s.x".into(),
        resource,
        secrets_key: None,
        name: None,
    };
    let volume = |id: &str| Resource::Volume { volume_id: id.into() };

    let (create, stage) = (sending(1, "CreateVolume", "a"), sending(2, "NodeStageVolume", ""));
    observer.sending(&create);
    observer.sending(&stage);
    assert_eq!(
        names(&path),
        [
            "unanswered CreateVolume of a on unix:///controller.sock (scenario s.x)",
            "unanswered NodeStageVolume on unix:///node1.sock (scenario s.x)"
        ],
        "a call is journaled before it is sent, where its undo call must go"
    );
    observer.registered(&tracked(1, volume("v1")));
    observer.answered(&create);
    observer.answered(&stage);
    assert_eq!(names(&path), ["volume v1 on unix:///controller.sock (scenario s.x)"], "answered calls are settled");

    let (lost, unanswered) = (sending(3, "CreateVolume", "lost"), sending(4, "CreateVolume", "unheard"));
    observer.sending(&lost);
    observer.lost(&lost, "answered OK with an empty volume id");
    observer.sending(&unanswered);
    observer.unanswered(&unanswered);
    observer.registered(&tracked(5, volume("v5")));
    observer.kept(&tracked(5, volume("v5")), "still listed after its delete");
    observer.released(&tracked(1, volume("v1")));
    assert_eq!(
        names(&path),
        ["unanswered CreateVolume of unheard on unix:///controller.sock (scenario s.x)"],
        "released, lost and kept are settled; only the unanswered call stays for cleanup"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("empty volume id") && text.contains("still listed"), "{text}");
}

/// What stays in the journal after a run is said to the operator when it happens: an
/// unanswered call, and what teardown could not release.
#[test]
fn the_observer_tells_the_operator_what_stays_for_cleanup() {
    use crate::suite::{ResourceObserver as _, Sending, Tracked};
    #[derive(Clone, Default)]
    struct Log(std::sync::Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Log {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let observer = JournalObserver::new(Journal::open(&path, "r").unwrap(), Some("unix:///c.sock".into()), vec![]);
    let call = Sending {
        seq: 1,
        scenario: "s.x".into(),
        rpc: "CreateVolume".into(),
        request: prost_reflect::DynamicMessage::new(crate::proto::method("CreateVolume").unwrap().input()),
        node: 0,
        secrets_key: None,
    };
    let volume = Tracked {
        seq: 2,
        scenario: "s.x".into(),
        resource: Resource::Volume { volume_id: "v2".into() },
        secrets_key: None,
        name: None,
    };
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    tracing::subscriber::with_default(subscriber, || {
        observer.sending(&call);
        observer.unanswered(&call);
        observer.registered(&volume);
        observer.left_behind(&volume, "its delete failed: INTERNAL");
    });
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("CreateVolume of scenario s.x was never answered; it stays in the journal for `csi-conform cleanup`"),
        "{text}"
    );
    assert!(
        text.contains("volume v2 left on the plugin (its delete failed: INTERNAL); it stays in the journal"),
        "{text}"
    );
    assert_eq!(outstanding(&path).unwrap().len(), 2, "both stay for cleanup");
}

/// A re-send must be the request the plugin saw: the journal keeps mount flags (mode
/// 0600), and never a secret.
#[test]
fn a_call_is_journaled_with_its_mount_flags_and_without_its_secrets_readable_by_its_owner_alone() {
    use crate::suite::{ResourceObserver as _, Sending};
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let observer = JournalObserver::new(Journal::open(&path, "r").unwrap(), Some("unix:///c.sock".into()), vec![]);
    let request = crate::proto::v1::CreateVolumeRequest {
        name: "v".into(),
        secrets: [("password".to_owned(), "hunter2-Zq".to_owned())].into(),
        volume_capabilities: vec![crate::proto::v1::VolumeCapability {
            access_type: Some(crate::proto::v1::volume_capability::AccessType::Mount(
                crate::proto::v1::volume_capability::MountVolume {
                    fs_type: "xfs".into(),
                    mount_flags: vec!["nodev".into(), "uid=1000".into()],
                    volume_mount_group: String::new(),
                },
            )),
            access_mode: None,
        }],
        ..Default::default()
    };
    let call = Sending {
        seq: 1,
        scenario: "s.x".into(),
        rpc: "CreateVolume".into(),
        request: crate::proto::to_dynamic(&request),
        node: 0,
        secrets_key: Some("CreateVolumeSecret".into()),
    };
    observer.sending(&call);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("hunter2") && !text.contains("password"), "{text}");
    let outstanding = outstanding(&path).unwrap();
    let Outstanding::Call(journaled) = &outstanding[0].1 else { panic!("{outstanding:?}") };
    let flags = &journaled.request["volume_capabilities"][0]["mount"]["mount_flags"];
    assert_eq!(flags, &serde_json::json!(["nodev", "uid=1000"]), "{text}");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
}

/// No empty `<journal>.lock` stays beside the journal once nobody uses it, and a lock
/// taken on a lock file since removed is taken again on the one now there.
#[test]
fn the_lock_file_goes_with_its_last_user() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let lock = dir.path().join("j.jsonl.lock");
    let a = Journal::open(&path, "a").unwrap();
    let b = Journal::open(&path, "b").unwrap();
    drop(a);
    assert!(lock.exists(), "another run still writes");
    assert_eq!(compact(&path).unwrap(), None, "and still holds it");
    drop(b);
    assert!(!lock.exists(), "the last user removes it");
    let c = Journal::open(&path, "c").unwrap();
    c.created(&volume("x")).unwrap();
    assert_eq!(compact(&path).unwrap(), None, "a run holds the new lock file");
    drop(c);
    assert_eq!(compact(&path).unwrap(), Some(1));
    assert!(!lock.exists(), "a cleanup's compaction removes it too");
}

#[test]
fn compaction_removes_only_its_own_leftovers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    Journal::open(&path, "r").unwrap().created(&volume("a")).unwrap();
    // A directory shared with other files: another tool's temporary file, and one of
    // another journal's rewrites, are not this journal's to remove.
    for other in ["download.tmp", ".k.jsonl.1.tmp"] {
        std::fs::write(dir.path().join(other), "not ours").unwrap();
    }
    assert_eq!(compact(&path).unwrap(), Some(1));
    for other in ["download.tmp", ".k.jsonl.1.tmp"] {
        assert!(dir.path().join(other).exists(), "{other} was removed");
    }
}

#[test]
fn a_run_directory_is_listed_apart_until_done_and_survives_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let j = Journal::open(&path, "r").unwrap();
    let run_dir = j.run_dir(Path::new("/work/run-r-1")).unwrap();
    let other = j.run_dir(Path::new("/work/run-r-2")).unwrap();
    j.created(&volume("v")).unwrap();
    j.done(&other).unwrap();
    assert_eq!(outstanding(&path).unwrap().len(), 1, "a directory is no resource on the plugin");
    assert_eq!(run_dirs(&path).unwrap(), [(run_dir.clone(), PathBuf::from("/work/run-r-1"))]);
    drop(j);
    assert_eq!(compact(&path).unwrap(), Some(2));
    assert_eq!(run_dirs(&path).unwrap(), [(run_dir.clone(), PathBuf::from("/work/run-r-1"))], "the same id after compaction");
    mark_done(&path, std::slice::from_ref(&run_dir)).unwrap();
    assert_eq!(run_dirs(&path).unwrap(), []);
}
