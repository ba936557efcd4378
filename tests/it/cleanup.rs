//! `csi-conform cleanup` and `run --cleanup-first` on a journal an earlier run left: every
//! resource and unanswered call it lists is undone (with the secrets its creation used), only
//! those, once; other endpoints are left alone unless asked for.

use std::path::Path;

use csi_conform::{
    journal::{CallRecord, Journal, Record},
    proto::{self, v1},
    reference::Config,
    secrets::Secrets,
    suite::Resource,
};

use crate::support::{
    TestPlugin, create_req,
    fake_plugin::{FakeOptions, FakePlugin},
    ok,
    process::csi_conform,
    range, snw,
};

const SECRETS: &str = "\
CreateVolumeSecret: { key: create-Kx81 }
DeleteVolumeSecret: { key: delete-Kx82 }
ControllerPublishVolumeSecret: { key: publish-Kx83 }
ControllerUnpublishVolumeSecret: { key: unpublish-Kx84 }
";

fn secrets(key: &str) -> std::collections::HashMap<String, String> {
    let value = match key {
        "CreateVolumeSecret" => "create-Kx81",
        "ControllerPublishVolumeSecret" => "publish-Kx83",
        _ => unreachable!(),
    };
    [("key".to_owned(), value.to_owned())].into()
}

/// A CreateVolume request as a CO with the secrets file sends it.
fn create(name: &str) -> v1::CreateVolumeRequest {
    v1::CreateVolumeRequest { secrets: secrets("CreateVolumeSecret"), ..create_req(name, vec![snw()]) }
}

async fn create_directly(plugin: &TestPlugin, name: &str) -> String {
    ok(plugin.controller().create_volume(create(name)).await).volume.unwrap().volume_id
}

async fn volume_ids(plugin: &TestPlugin) -> Vec<String> {
    let listed = ok(plugin.controller().list_volumes(v1::ListVolumesRequest::default()).await);
    listed.entries.into_iter().filter_map(|e| e.volume).map(|v| v.volume_id).collect()
}

fn lines(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out).lines().map(str::to_owned).collect()
}

fn volume_record(endpoint: &str, id: &str, name: &str) -> Record {
    Record {
        endpoint: endpoint.to_owned(),
        scenario: "old.scenario".into(),
        secrets_key: Some("CreateVolumeSecret".into()),
        undo_secrets_key: Some("DeleteVolumeSecret".into()),
        name: Some(name.to_owned()),
        resource: Resource::Volume { volume_id: id.to_owned() },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_undoes_what_the_journal_lists_with_secrets_once_and_nothing_else() {
    let plugin = TestPlugin::start(Config {
        secrets: Some(Secrets::parse(SECRETS, Path::new("secrets.yaml")).unwrap()),
        ..Config::default()
    })
    .await;
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("secrets.yaml"), SECRETS).unwrap();
    let endpoint = format!("unix://{}", plugin.socket.display());
    let socket = plugin.socket.display().to_string();

    // What an earlier run, killed at the wrong moment, left behind.
    let kept = create_directly(&plugin, "made-before-the-run").await;
    let lost = create_directly(&plugin, "answer-lost").await;
    let journaled = create_directly(&plugin, "journaled").await;
    let node_id = ok(plugin.node().node_get_info(v1::NodeGetInfoRequest {}).await).node_id;
    let publish = v1::ControllerPublishVolumeRequest {
        volume_id: journaled.clone(),
        node_id,
        volume_capability: Some(snw()),
        secrets: secrets("ControllerPublishVolumeSecret"),
        ..Default::default()
    };
    ok(plugin.controller().controller_publish_volume(publish.clone()).await);
    let journal_path = cwd.path().join("journal.jsonl");
    let journal = Journal::open(&journal_path, "old").unwrap();
    let call = |rpc: &str, request: serde_json::Value| CallRecord {
        endpoint: endpoint.clone(),
        scenario: "old.scenario".into(),
        secrets_key: Some(format!("{rpc}Secret")),
        rpc: rpc.to_owned(),
        node: 0,
        request,
    };
    let stripped = |m: prost_reflect::DynamicMessage| proto::to_json_value(&proto::without_secrets(&m));
    journal.created(&volume_record("unix:///nonexistent/other.sock", "vol-elsewhere", "elsewhere")).unwrap();
    journal.sending(&call("CreateVolume", stripped(proto::to_dynamic(&create("answer-lost"))))).unwrap();
    journal.sending(&call("CreateVolume", stripped(proto::to_dynamic(&create("never-made"))))).unwrap();
    journal.created(&volume_record(&endpoint, &journaled, "journaled")).unwrap();
    journal.sending(&call("ControllerPublishVolume", stripped(proto::to_dynamic(&publish)))).unwrap();
    drop(journal);
    let text = std::fs::read_to_string(&journal_path).unwrap();
    assert!(!text.contains("Kx8"), "no secret reaches the journal: {text}");

    // A run against this plugin refuses to start...
    let probe = ["run", "--endpoint", &socket, "--focus", r"^identity\.probe$", "--journal", "journal.jsonl"];
    let refused = csi_conform(&probe, cwd.path()).await;
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        lines(&refused.stderr),
        ["error: journal.jsonl lists 4 resource(s) an earlier run may have left on this plugin; \
          run `csi-conform cleanup --journal journal.jsonl` or pass --cleanup-first"]
    );

    // ...until cleanup (of this endpoint only) undoes all four: attachments first, then the
    // newest objects; unanswered creations are asked again, by name, to learn what they made.
    let this_plugin = ["cleanup", "--journal", "journal.jsonl", "--secrets", "secrets.yaml", "--endpoint", &socket];
    let cleaned = csi_conform(&this_plugin, cwd.path()).await;
    assert_eq!(cleaned.status.code(), Some(0), "{:?}{:?}", lines(&cleaned.stdout), lines(&cleaned.stderr));
    let at = |what: &str| format!("{what} on {endpoint} (scenario old.scenario)");
    let out = lines(&cleaned.stdout);
    assert_eq!(out.len(), 5, "{out:#?}");
    assert_eq!(out[0], format!("cleanup: {}: ControllerUnpublishVolume OK", at("unanswered ControllerPublishVolume")));
    assert_eq!(out[1], format!("cleanup: {}: DeleteVolume OK", at(&format!("volume {journaled} (journaled)"))));
    let remade = regex::Regex::new(&format!(
        "^cleanup: {}: asked again, it is volume (vol-[0-9]+); DeleteVolume OK$",
        regex::escape(&at("unanswered CreateVolume of never-made"))
    ))
    .unwrap();
    assert!(remade.is_match(&out[2]), "{}", out[2]);
    assert_eq!(
        out[3],
        format!("cleanup: {}: asked again, it is volume {lost}; DeleteVolume OK", at("unanswered CreateVolume of answer-lost"))
    );
    assert_eq!(out[4], "cleanup: 4 undone, 0 left");
    assert_eq!(volume_ids(&plugin).await, std::slice::from_ref(&kept));

    // Idempotent: nothing left to do here.
    let again = csi_conform(&this_plugin, cwd.path()).await;
    assert_eq!((again.status.code(), lines(&again.stdout)), (Some(0), vec!["cleanup: nothing to do".to_owned()]));

    // Without --endpoint every endpoint is cleaned; the other one cannot be reached.
    let everything = ["cleanup", "--journal", "journal.jsonl", "--connect-timeout", "200ms"];
    let partial = csi_conform(&everything, cwd.path()).await;
    assert_eq!(partial.status.code(), Some(1));
    let out = lines(&partial.stdout);
    let other = "volume vol-elsewhere (elsewhere) on unix:///nonexistent/other.sock (scenario old.scenario)";
    assert!(out[0].starts_with(&format!("cleanup: FAILED {other}: cannot connect: no socket at /nonexistent/other.sock")), "{out:?}");
    assert!(out[0].ends_with("(left in the journal)"), "{out:?}");
    assert_eq!(out[1..], ["cleanup: 0 undone, 1 left"]);

    // --cleanup-first undoes this plugin's leftovers and runs; the other endpoint's record
    // neither blocks the run nor is touched.
    let left = create_directly(&plugin, "left-by-another-run").await;
    let journal = Journal::open(&journal_path, "another").unwrap();
    journal.created(&volume_record(&endpoint, &left, "left-by-another-run")).unwrap();
    let mut first = probe.to_vec();
    first.extend(["--cleanup-first", "--secrets", "secrets.yaml", "-q"]);
    let run = csi_conform(&first, cwd.path()).await;
    assert_eq!(run.status.code(), Some(0), "{:?}", lines(&run.stderr));
    assert!(
        lines(&run.stderr).contains(&format!("cleanup: {}: DeleteVolume OK", at(&format!("volume {left} (left-by-another-run)")))),
        "{:?}",
        lines(&run.stderr)
    );
    assert_eq!(volume_ids(&plugin).await, [kept]);
    let outstanding = csi_conform::journal::outstanding(&journal_path).unwrap();
    assert_eq!(outstanding.iter().map(|(_, o)| o.endpoint().to_owned()).collect::<Vec<_>>(), ["unix:///nonexistent/other.sock"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_compacts_the_journal_to_what_is_outstanding_and_cleanup_still_undoes_it() {
    let config = || Config { secrets: Some(Secrets::parse(SECRETS, Path::new("secrets.yaml")).unwrap()), ..Config::default() };
    let plugin = TestPlugin::start(config()).await;
    let other = TestPlugin::start(config()).await;
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("secrets.yaml"), SECRETS).unwrap();
    let endpoint = format!("unix://{}", plugin.socket.display());

    // History: many runs' records, all done, and one volume an earlier run left behind.
    let leftover = create_directly(&plugin, "leftover").await;
    let journal_path = cwd.path().join("journal.jsonl");
    let journal = Journal::open(&journal_path, "history").unwrap();
    for i in 0..2000 {
        let id = journal.created(&volume_record(&endpoint, &format!("gone-{i}"), &format!("gone-{i}"))).unwrap();
        journal.done(&id).unwrap();
    }
    let leftover_id = journal.created(&volume_record(&endpoint, &leftover, "leftover")).unwrap();
    drop(journal);
    assert_eq!(std::fs::read_to_string(&journal_path).unwrap().lines().count(), 4001);

    // A run against another plugin (this one's leftover would stop a run against it) that
    // creates and deletes volumes of its own.
    let other_socket = other.socket.display().to_string();
    let args = ["run", "--endpoint", &other_socket, "--focus", r"^controller\.delete-volume", "--journal", "journal.jsonl", "--secrets", "secrets.yaml"];
    let run = csi_conform(&args, cwd.path()).await;
    assert_eq!(run.status.code(), Some(0), "{:?} {:?}", lines(&run.stdout), lines(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stdout).contains("3 passed"), "{:?}", lines(&run.stdout));
    let text = std::fs::read_to_string(&journal_path).unwrap();
    assert_eq!(text.lines().count(), 1, "only the leftover is left: {text}");
    let outstanding = csi_conform::journal::outstanding(&journal_path).unwrap();
    assert_eq!(outstanding.len(), 1);
    assert_eq!(outstanding[0].0, leftover_id, "the same id, so `done` entries still find it");
    assert!(outstanding[0].1.to_string().starts_with(&format!("volume {leftover} (leftover)")), "{}", outstanding[0].1);
    let dir: Vec<String> =
        std::fs::read_dir(cwd.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!dir.iter().any(|n| n.contains(".tmp")), "no temporary file is left: {dir:?}");

    // cleanup reads the compacted journal, undoes the leftover, and compacts it to nothing.
    let cleanup = csi_conform(&["cleanup", "--journal", "journal.jsonl", "--secrets", "secrets.yaml"], cwd.path()).await;
    assert_eq!(cleanup.status.code(), Some(0), "{:?} {:?}", lines(&cleanup.stdout), lines(&cleanup.stderr));
    assert!(volume_ids(&plugin).await.is_empty());
    assert_eq!(std::fs::read_to_string(&journal_path).unwrap(), "");
}

/// An unanswered CreateVolume in a journal, as the engine writes it (secrets left out).
fn unanswered_create(journal: &Journal, endpoint: &str, request: &v1::CreateVolumeRequest) {
    let stripped = proto::to_json_value(&proto::without_secrets(&proto::to_dynamic(request)));
    let record = CallRecord {
        endpoint: endpoint.to_owned(),
        scenario: "old.scenario".into(),
        secrets_key: None,
        rpc: "CreateVolume".into(),
        node: 0,
        request: stripped,
    };
    journal.sending(&record).unwrap();
}

/// A lost CreateVolume naming several file systems and mount flags is re-sent as the plugin
/// saw it (the journal keeps mount flags, never secrets): the plugin answers with what the
/// first call made, and cleanup deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_creation_with_several_capabilities_and_mount_flags_is_re_sent_identically() {
    use csi_conform::proto::v1::volume_capability::access_mode::Mode;
    use crate::support::mount_cap_with;
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let endpoint = format!("unix://{}", plugin.socket.display());
    let request = v1::CreateVolumeRequest {
        secrets: [("key".to_owned(), "never-journaled-Qz7".to_owned())].into(),
        ..create_req(
            "three-file-systems",
            vec![
                mount_cap_with(Mode::SingleNodeWriter, "", &["noatime"], ""),
                mount_cap_with(Mode::SingleNodeWriter, "ext4", &[], ""),
                mount_cap_with(Mode::SingleNodeWriter, "xfs", &["nodev"], ""),
            ],
        )
    };
    // The call was made; only its answer was lost.
    let made = ok(plugin.controller().create_volume(request.clone()).await).volume.unwrap().volume_id;
    let journal_path = cwd.path().join("journal.jsonl");
    let journal = Journal::open(&journal_path, "old").unwrap();
    unanswered_create(&journal, &endpoint, &request);
    drop(journal);
    let text = std::fs::read_to_string(&journal_path).unwrap();
    assert!(text.contains("nodev") && !text.contains("Qz7"), "mount flags kept, secrets never: {text}");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&journal_path).unwrap().permissions().mode() & 0o777, 0o600);

    let cleaned = csi_conform(&["cleanup", "--journal", "journal.jsonl"], cwd.path()).await;
    let out = lines(&cleaned.stdout);
    assert_eq!(cleaned.status.code(), Some(0), "{out:?} {:?}", lines(&cleaned.stderr));
    let what = format!("unanswered CreateVolume of three-file-systems on {endpoint} (scenario old.scenario)");
    assert_eq!(out, [format!("cleanup: {what}: asked again, it is volume {made}; DeleteVolume OK"), "cleanup: 1 undone, 0 left".to_owned()]);
    assert!(volume_ids(&plugin).await.is_empty());
}

/// ALREADY_EXISTS to a re-sent creation is never "it made nothing": something holds the
/// name (perhaps what the lost call made), so it is named as left, the record stays, exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_creation_answered_already_exists_is_left_by_name_never_made_nothing() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let endpoint = format!("unix://{}", plugin.socket.display());
    let holder = v1::CreateVolumeRequest { parameters: [("tier".to_owned(), "gold".to_owned())].into(), ..create_req("taken", vec![snw()]) };
    let held = ok(plugin.controller().create_volume(holder).await).volume.unwrap().volume_id;
    let journal_path = cwd.path().join("journal.jsonl");
    let journal = Journal::open(&journal_path, "old").unwrap();
    unanswered_create(&journal, &endpoint, &create_req("taken", vec![snw()]));
    drop(journal);

    let args = ["cleanup", "--journal", "journal.jsonl"];
    for _ in 0..2 {
        let cleaned = csi_conform(&args, cwd.path()).await;
        let out = lines(&cleaned.stdout);
        assert_eq!(cleaned.status.code(), Some(1), "{out:?} {:?}", lines(&cleaned.stderr));
        assert_eq!(out.len(), 2, "{out:?}");
        let prefix = format!(
            "cleanup: FAILED unanswered CreateVolume of taken on {endpoint} (scenario old.scenario): \
             asked again, CreateVolume answered ALREADY_EXISTS: an object named \"taken\" is on the plugin"
        );
        assert!(out[0].starts_with(&prefix) && out[0].ends_with("(left in the journal)"), "{out:?}");
        assert_eq!(out[1], "cleanup: 0 undone, 1 left");
        assert_eq!(csi_conform::journal::outstanding(&journal_path).unwrap().len(), 1, "the record is kept");
        assert_eq!(volume_ids(&plugin).await, std::slice::from_ref(&held), "what holds the name is not touched");
    }
}

/// A definite refusal, asked again, means the lost call made nothing either: the record goes,
/// and nothing on the plugin is touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_creation_the_plugin_refuses_again_made_nothing_and_leaves_the_journal() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let endpoint = format!("unix://{}", plugin.socket.display());
    let kept = ok(plugin.controller().create_volume(create_req("made-before", vec![snw()])).await).volume.unwrap().volume_id;
    let journal_path = cwd.path().join("journal.jsonl");
    let journal = Journal::open(&journal_path, "old").unwrap();
    let too_big = v1::CreateVolumeRequest { capacity_range: range(i64::MAX, 0), ..create_req("too-big", vec![snw()]) };
    unanswered_create(&journal, &endpoint, &too_big);
    drop(journal);

    let cleaned = csi_conform(&["cleanup", "--journal", "journal.jsonl"], cwd.path()).await;
    let out = lines(&cleaned.stdout);
    assert_eq!(cleaned.status.code(), Some(0), "{out:?} {:?}", lines(&cleaned.stderr));
    assert_eq!(
        out,
        [
            format!(
                "cleanup: unanswered CreateVolume of too-big on {endpoint} (scenario old.scenario): \
                 asked again, CreateVolume answered OUT_OF_RANGE: it made nothing"
            ),
            "cleanup: 1 undone, 0 left".to_owned(),
        ]
    );
    assert!(csi_conform::journal::outstanding(&journal_path).unwrap().is_empty());
    assert_eq!(volume_ids(&plugin).await, [kept], "nothing on the plugin was touched");
}

/// A plugin that cannot answer now (UNAVAILABLE, DEADLINE_EXCEEDED: "not now", not "no")
/// says nothing about what the lost call made: the record stays, cleanup exits 1, and a
/// later cleanup, once the plugin answers, undoes what the call made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_creation_asked_again_while_the_plugin_cannot_answer_stays_until_a_later_cleanup() {
    let fake = FakePlugin::start(FakeOptions::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let endpoint = format!("unix://{}", fake.socket.display());
    // The lost call did make the volume: only its answer never arrived.
    let request = create_req("answer-lost", vec![snw()]);
    let made = ok(fake.connect().await.controller().create_volume(request.clone()).await).volume.unwrap().volume_id;
    let journal_path = cwd.path().join("journal.jsonl");
    let journal = Journal::open(&journal_path, "old").unwrap();
    unanswered_create(&journal, &endpoint, &request);
    drop(journal);
    let what = format!("unanswered CreateVolume of answer-lost on {endpoint} (scenario old.scenario)");
    let args = ["cleanup", "--journal", "journal.jsonl"];

    for (code, name) in [(tonic::Code::Unavailable, "UNAVAILABLE"), (tonic::Code::DeadlineExceeded, "DEADLINE_EXCEEDED")] {
        fake.state.lock().unwrap().create_refusal = Some(code);
        let failed = csi_conform(&args, cwd.path()).await;
        let out = lines(&failed.stdout);
        assert_eq!(failed.status.code(), Some(1), "{out:?} {:?}", lines(&failed.stderr));
        assert_eq!(out.len(), 2, "{out:?}");
        let prefix = format!("cleanup: FAILED {what}: asking again what it created failed: CreateVolume failed with {name}");
        assert!(out[0].starts_with(&prefix) && out[0].ends_with("(left in the journal)"), "{out:?}");
        assert_eq!(out[1], "cleanup: 0 undone, 1 left");
        assert_eq!(csi_conform::journal::outstanding(&journal_path).unwrap().len(), 1, "the record is kept");
        assert_eq!(fake.volume_ids(), std::slice::from_ref(&made), "the volume is still there");
    }

    // The plugin answers again: the next cleanup learns the id and undoes it.
    fake.state.lock().unwrap().create_refusal = None;
    let cleaned = csi_conform(&args, cwd.path()).await;
    let out = lines(&cleaned.stdout);
    assert_eq!(cleaned.status.code(), Some(0), "{out:?} {:?}", lines(&cleaned.stderr));
    assert_eq!(out, [format!("cleanup: {what}: asked again, it is volume {made}; DeleteVolume OK"), "cleanup: 1 undone, 0 left".to_owned()]);
    assert!(fake.volume_ids().is_empty());
    assert!(csi_conform::journal::outstanding(&journal_path).unwrap().is_empty());
}

/// An undo the plugin refuses (here FAILED_PRECONDITION: the volume cannot be deleted now)
/// leaves the record for the next cleanup; only NOT_FOUND means it is already gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journaled_volume_whose_delete_is_refused_stays_in_the_journal() {
    let fake = FakePlugin::start(FakeOptions::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let endpoint = format!("unix://{}", fake.socket.display());
    let stuck = v1::CreateVolumeRequest {
        parameters: [("undeletable".to_owned(), "yes".to_owned())].into(),
        ..create_req("stuck", vec![snw()])
    };
    let id = ok(fake.connect().await.controller().create_volume(stuck).await).volume.unwrap().volume_id;
    let journal_path = cwd.path().join("journal.jsonl");
    let journal = Journal::open(&journal_path, "old").unwrap();
    journal.created(&Record { secrets_key: None, undo_secrets_key: None, ..volume_record(&endpoint, &id, "stuck") }).unwrap();
    drop(journal);

    let failed = csi_conform(&["cleanup", "--journal", "journal.jsonl"], cwd.path()).await;
    let out = lines(&failed.stdout);
    assert_eq!(failed.status.code(), Some(1), "{out:?} {:?}", lines(&failed.stderr));
    let prefix = format!("cleanup: FAILED volume {id} (stuck) on {endpoint} (scenario old.scenario): DeleteVolume failed with FAILED_PRECONDITION");
    assert!(out[0].starts_with(&prefix) && out[0].ends_with("(left in the journal)"), "{out:?}");
    assert_eq!(out[1..], ["cleanup: 0 undone, 1 left"]);
    assert_eq!(csi_conform::journal::outstanding(&journal_path).unwrap().len(), 1, "the record is kept");
    assert_eq!(fake.volume_ids(), [id], "the volume is still there");
}

/// NOT_FOUND to an undo means the resource is already gone, which is as good as undone: the
/// record leaves the journal and cleanup succeeds (else a run would refuse to start forever).
/// The reference plugin answers NodeUnpublishVolume of a volume it does not know with
/// NOT_FOUND.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journaled_publication_the_plugin_no_longer_knows_is_already_gone() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    let endpoint = format!("unix://{}", plugin.socket.display());
    let target = cwd.path().join("target").display().to_string();
    let journal_path = cwd.path().join("journal.jsonl");
    let journal = Journal::open(&journal_path, "old").unwrap();
    let resource = Resource::NodePublication { volume_id: "deleted-since".into(), target_path: target, node: 0 };
    journal
        .created(&Record { secrets_key: None, undo_secrets_key: None, resource, ..volume_record(&endpoint, "", "gone") })
        .unwrap();
    drop(journal);

    let cleaned = csi_conform(&["cleanup", "--journal", "journal.jsonl"], cwd.path()).await;
    let out = lines(&cleaned.stdout);
    assert_eq!(cleaned.status.code(), Some(0), "{out:?} {:?}", lines(&cleaned.stderr));
    assert!(out[0].ends_with(": NodeUnpublishVolume: already gone"), "{out:?}");
    assert_eq!(out[1..], ["cleanup: 1 undone, 0 left"]);
    assert!(csi_conform::journal::outstanding(&journal_path).unwrap().is_empty(), "the record is done");
}
