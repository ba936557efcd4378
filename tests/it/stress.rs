//! The opt-in `stress` and `disruption` suites (issue 29): the reference plugin passes both at
//! `--jobs` 1 and 32 with the same verdicts and nothing left on it, restarted in-process by the
//! run where a scenario restarts it; each concurrency, restart or lost-node quirk is one named
//! finding, in its own scenario, at its level, and nowhere else.

use std::collections::BTreeMap;

use csi_conform::{
    proto::v1,
    reference::Quirk,
    report::{RunReport, Severity},
    suite::{self, RunConfig, Suite},
};

use csi_conform::{bundled::Bundled, client::ClientOptions, session::connect_and_fingerprint};

/// Each quirk of issue 29, the scenario that catches it, the finding's kind and its level.
pub const QUIRKS: &[(Quirk, &str, &str, Severity)] = &[
    (Quirk::RaceCreateDuplicates, "stress.create.same-name-at-once", "duplicate-volume", Severity::Fail),
    (Quirk::AttachRace, "stress.controller-publish.volumes-at-once", "race-refused", Severity::Warn),
    (Quirk::StageNotReentrant, "stress.node.same-calls-at-once", "race-refused", Severity::Warn),
    (Quirk::PublishDeviceRace, "stress.controller-publish.volumes-at-once", "device-shared", Severity::Warn),
    (Quirk::CloneFanoutSharesSource, "stress.fanout.clones-and-snapshots", "shared-volume", Severity::Fail),
    (Quirk::FanoutLosesClone, "stress.fanout.clones-and-snapshots", "lost-volume", Severity::Fail),
    (Quirk::UnpublishNeedsKnownNode, "disruption.lost-node.controller-unpublish", "lost-node", Severity::Warn),
    (Quirk::UnpublishNeedsPath, "disruption.lost-node.node-paths-gone", "paths-gone", Severity::Fail),
    (Quirk::UnstageUnmountsBlindly, "disruption.lost-node.node-paths-gone", "paths-gone", Severity::Fail),
];

fn opt_in() -> Vec<Suite> {
    suite::OPT_IN.iter().map(|(name, _)| suite::opt_in_suite(name).expect("an opt-in suite").expect("it loads")).collect()
}

/// A run of both opt-in suites against a fresh bundled reference plugin with `quirks`, as a
/// run without an endpoint starts it, and restarts it in-process (no restart command);
/// asserts that nothing is left on the plugin afterwards.
async fn run(quirks: &[Quirk], jobs: usize) -> RunReport {
    run_as(quirks, jobs, Vec::new()).await
}

/// [`run`] with `--orchestrator`s: the matrix's restart and lost-node rows are fed by the
/// disruption scenarios.
async fn run_as(quirks: &[Quirk], jobs: usize, orchestrators: Vec<csi_conform::orchestrator::Profile>) -> RunReport {
    run_tuned(quirks, jobs, |config| config.orchestrators = orchestrators, true).await
}

/// [`run`] with the run's configuration tuned; `left`: assert that the plugin lists nothing
/// afterwards (not for a plugin whose listing lags).
async fn run_tuned(quirks: &[Quirk], jobs: usize, tune: impl FnOnce(&mut RunConfig), left: bool) -> RunReport {
    let (bundled, targets) = Bundled::start(None, quirks).await.unwrap();
    let (connections, fingerprint) = connect_and_fingerprint(&targets, &ClientOptions::default(), None).await.unwrap();
    let engine = suite::Plugin { controller: connections.controller.clone(), nodes: connections.nodes, fingerprint };
    let work = tempfile::tempdir().unwrap();
    let mut config = RunConfig { seed: 29, jobs, work_dir: work.path().join("work"), ..RunConfig::default() };
    tune(&mut config);
    config.restart_in_process(bundled.clone());
    let report = suite::run(&engine, &opt_in(), &config).await;
    let controller = connections.controller.unwrap();
    if left {
        let left = controller.controller().list_volumes(v1::ListVolumesRequest::default()).await.unwrap().into_inner();
        assert!(left.entries.is_empty(), "{quirks:?} at --jobs {jobs} left {:?}", left.entries);
    }
    assert!(csi_conform::mounts::mounts_under(work.path()).is_empty(), "{quirks:?}: mounts left under the work dir");
    // No path either: the run's directory, with every scenario's paths in it, is gone.
    let paths: Vec<_> = std::fs::read_dir(work.path().join("work")).into_iter().flatten().flatten().map(|e| e.path()).collect();
    assert!(paths.is_empty(), "{quirks:?} at --jobs {jobs} left {paths:?}");
    bundled.shutdown().await;
    report
}

fn outcomes(report: &RunReport) -> BTreeMap<String, Severity> {
    report.suites.iter().flat_map(|s| &s.scenarios).map(|s| (s.id.clone(), s.outcome)).collect()
}

/// Every warning or worse: (scenario, kind, severity).
fn verdicts(report: &RunReport) -> Vec<(String, String, Severity)> {
    report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .flat_map(|s| s.findings.iter().filter(|f| f.severity >= Severity::Warn).map(move |f| (s.id.clone(), f.kind.clone(), f.severity)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_plugin_passes_both_suites_at_any_jobs_and_leaves_nothing() {
    let one = run(&[], 1).await;
    let many = run(&[], 32).await;
    for report in [&one, &many] {
        assert!(verdicts(report).is_empty(), "{:#?}", verdicts(report));
        let ran = outcomes(report);
        // Every scenario of both suites ran and passed (the reference plugin has every
        // capability they need), the restarts too: the run restarts the bundled plugin
        // in-process, with no command, and reports how long it took to answer Probe ready.
        let all: usize = opt_in().iter().map(|s| s.scenarios().len()).sum();
        assert_eq!(ran.len(), all, "{ran:#?}");
        assert!(ran.values().all(|o| *o == Severity::Pass), "{ran:#?}");
        // The node reboot took both paths away; as root the plugin really mounted them, and the
        // run unmounted them first.
        let gone = report.scenario("disruption.lost-node.node-paths-gone").unwrap();
        let took = if csi_conform::mounts::has_cap_sys_admin() { "unmounted and removed" } else { "removed" };
        let note = format!("the run {took} the target path, {took} the staging path");
        assert!(gone.findings.iter().any(|f| f.message.contains(&note)), "{:#?}", gone.findings);
        for (id, who) in [("disruption.restart.while-published", "node"), ("disruption.restart.controller-during-create", "controller")] {
            let notes: Vec<&str> = report.scenario(id).unwrap().findings.iter().map(|f| f.message.as_str()).collect();
            let ready = format!("the {who} plugin answered Probe ready");
            assert!(notes.iter().any(|n| n.contains(&ready) && n.contains("in-process")), "{id}: {notes:#?}");
        }
    }
    assert_eq!(outcomes(&one), outcomes(&many));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_race_and_lost_node_quirk_is_one_finding_in_its_own_scenario() {
    for &(quirk, scenario, kind, severity) in QUIRKS {
        let report = run(&[quirk], 8).await;
        let found = verdicts(&report);
        assert_eq!(found, [(scenario.to_owned(), kind.to_owned(), severity)], "{quirk}: {found:#?}");
        let f = report.scenario(scenario).unwrap().findings.iter().find(|f| f.kind == kind).unwrap();
        // Named at its true level: the idempotency MUST fails, the concurrency SHOULD warns,
        // the lost node's SHOULD (the scenario's own requirement) warns.
        match severity {
            Severity::Fail if quirk == Quirk::UnpublishNeedsPath => {
                assert_eq!(f.requirements, ["NodeUnpublishVolume.idempotent"], "{f:#?}")
            }
            Severity::Fail if quirk == Quirk::UnstageUnmountsBlindly => {
                assert_eq!(f.requirements, ["NodeUnstageVolume.idempotent"], "{f:#?}")
            }
            Severity::Fail if kind == "shared-volume" => assert_eq!(f.requirements, ["CreateVolume.volume.id-unique"], "{f:#?}"),
            Severity::Fail if kind == "lost-volume" => assert_eq!(f.requirements, ["CreateVolume.volume.exists"], "{f:#?}"),
            Severity::Fail => assert_eq!(f.requirements, ["CreateVolume.idempotent"], "{f:#?}"),
            _ if kind == "race-refused" || kind == "device-shared" => {
                assert_eq!(f.requirements, ["General.concurrency.graceful"], "{f:#?}")
            }
            _ => assert!(f.message.contains("#controllerunpublishvolume"), "{f:#?}"),
        }
    }
}

/// The restart quirks, caught by the run's in-process restart of the bundled plugin (no
/// command): a node plugin that forgets its stagings on start fails the publish after the
/// restart; a controller that forgets its names makes a second volume for the CreateVolume
/// asked again. Each one finding, in its scenario, at its level, naming its rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_restart_quirk_is_caught_by_the_in_process_restart_of_the_bundled_plugin() {
    let report = run(&[Quirk::RestartLosesStaging], 8).await;
    let f = report.scenario("disruption.restart.while-published").unwrap().findings.iter().find(|f| f.kind == "restart-lost-state");
    assert_eq!(
        verdicts(&report),
        [("disruption.restart.while-published".to_owned(), "restart-lost-state".to_owned(), Severity::Fail)],
        "{f:#?}"
    );
    assert_eq!(f.unwrap().requirements, ["NodeStageVolume.stage-before-publish"]);

    let report = run(&[Quirk::RestartForgetsNames], 8).await;
    let found = verdicts(&report);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (scenario, kind, severity) = &found[0];
    assert_eq!((scenario.as_str(), *severity), ("disruption.restart.controller-during-create", Severity::Fail));
    // An OK before the restart and another volume after it, or an answer lost with the
    // server and a second volume listed: the one rule either way.
    assert!(["duplicate-volume", "ghost-volume"].contains(&kind.as_str()), "{kind}");
    let f = report.scenario(scenario).unwrap().findings.iter().find(|f| &f.kind == kind).unwrap();
    assert_eq!(f.requirements, ["CreateVolume.idempotent"]);
}

/// The matrix's `restart.node-plugin`, `lost-node.controller-unpublish` and
/// `lost-node.node-paths-gone` cells, per orchestrator: (orchestrator, row) -> outcome.
fn restart_cells(report: &RunReport) -> BTreeMap<(String, String), Severity> {
    report
        .orchestrators
        .iter()
        .flat_map(|o| o.behaviours.iter().map(move |b| ((o.name.clone(), b.id.clone()), b)))
        .filter(|((_, id), _)| ["restart.node-plugin", "lost-node.controller-unpublish", "lost-node.node-paths-gone"].contains(&id.as_str()))
        .map(|(k, b)| (k, b.outcome))
        .collect()
}

/// `--orchestrator all` says which orchestrator a restart or a lost-node defect hurts: the
/// disruption scenarios feed the rows; a plugin without the defect passes every such cell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_and_lost_node_findings_turn_the_orchestrator_cells() {
    let all = csi_conform::orchestrator::Profile::parse("all").unwrap();
    let cell = |o: &str, row: &str, s: Severity| ((o.to_owned(), row.to_owned()), s);
    let (restart, lost, paths) = ("restart.node-plugin", "lost-node.controller-unpublish", "lost-node.node-paths-gone");

    let report = run_as(&[], 4, all.clone()).await;
    let cells = restart_cells(&report);
    assert_eq!(cells.len(), 9, "{cells:#?}");
    assert!(cells.values().all(|s| *s == Severity::Pass), "{cells:#?}");
    // Each feeding scenario says it got to its row (a check's `reached`, or a YAML step that
    // names the row's kind), so a finding about something else filed under it (a lying
    // witness) cannot turn the row into a skip.
    for (scenario, row) in [
        ("disruption.restart.while-published", restart),
        ("disruption.lost-node.controller-unpublish", lost),
        ("disruption.lost-node.node-paths-gone", "lost-node.node-paths-gone"),
        ("stress.controller-publish.volumes-at-once", "concurrency.controller"),
    ] {
        let exercised = &report.scenario(scenario).unwrap().exercised;
        assert!(exercised.iter().any(|e| e == row), "{scenario}: {exercised:?}");
    }

    // Forgotten stagings: the publish after the restart fails under every orchestrator,
    // which all publish again from the staging done before.
    let report = run_as(&[Quirk::RestartLosesStaging], 4, all.clone()).await;
    let cells = restart_cells(&report);
    for o in ["nomad", "kubernetes", "swarm"] {
        assert_eq!(cells[&(o.to_owned(), restart.to_owned())], Severity::Fail, "{o}: {cells:#?}");
        assert_eq!(cells[&(o.to_owned(), lost.to_owned())], Severity::Pass, "{o}: {cells:#?}");
        assert_eq!(cells[&(o.to_owned(), paths.to_owned())], Severity::Pass, "{o}: {cells:#?}");
    }
    let nomad = report.orchestrators.iter().find(|o| o.name == "nomad").unwrap();
    let b = nomad.behaviours.iter().find(|b| b.id == restart).unwrap();
    assert_eq!(b.instances, ["disruption.restart.while-published"]);
    assert_eq!(b.findings.iter().map(|f| f.kind.as_str()).collect::<Vec<_>>(), ["restart-lost-state"]);

    // NOT_FOUND for a node that is gone: a warning in the scenario (a SHOULD), red where the
    // orchestrator retries it for ever (Nomad, Kubernetes), amber under Swarm.
    let report = run_as(&[Quirk::UnpublishNeedsKnownNode], 4, all).await;
    let cells = restart_cells(&report);
    assert_eq!(report.scenario("disruption.lost-node.controller-unpublish").unwrap().outcome, Severity::Warn);
    let want: BTreeMap<_, _> = [
        cell("nomad", lost, Severity::Fail),
        cell("kubernetes", lost, Severity::Fail),
        cell("swarm", lost, Severity::Warn),
        cell("nomad", restart, Severity::Pass),
        cell("kubernetes", restart, Severity::Pass),
        cell("swarm", restart, Severity::Pass),
        cell("nomad", paths, Severity::Pass),
        cell("kubernetes", paths, Severity::Pass),
        cell("swarm", paths, Severity::Pass),
    ]
    .into_iter()
    .collect();
    assert_eq!(cells, want);
}

/// `--orchestrator` says which orchestrator a publish race hurts: two volumes given one device
/// by publishes sent at once turn `concurrency.controller` where the orchestrator overlaps
/// such calls (Kubernetes' attach workers, Nomad before its serializer) and leave it green
/// where it serialises them (current Nomad, Swarm).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_race_turns_the_concurrency_cell_only_where_the_orchestrator_overlaps_publishes() {
    let mut profiles = csi_conform::orchestrator::Profile::parse("all").unwrap();
    profiles.extend(csi_conform::orchestrator::Profile::parse("nomad@1.5").unwrap());
    let report = run_as(&[Quirk::PublishDeviceRace], 4, profiles).await;
    let raced = report.scenario("stress.controller-publish.volumes-at-once").unwrap();
    assert_eq!(raced.outcome, Severity::Warn, "{raced:#?}");
    let cells: BTreeMap<String, (Severity, Vec<String>)> = report
        .orchestrators
        .iter()
        .map(|o| {
            let b = o.behaviours.iter().find(|b| b.id == "concurrency.controller").unwrap();
            (o.name.clone(), (b.outcome, b.findings.iter().map(|f| f.kind.clone()).collect()))
        })
        .collect();
    let want = |s: Severity, kinds: &[&str]| (s, kinds.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>());
    assert_eq!(cells["kubernetes"], want(Severity::Warn, &["device-shared"]), "{cells:#?}");
    assert_eq!(cells["nomad@1.5"], want(Severity::Warn, &["device-shared"]), "{cells:#?}");
    assert_eq!(cells["nomad"], want(Severity::Pass, &[]), "{cells:#?}");
    assert_eq!(cells["swarm"], want(Severity::Pass, &[]), "{cells:#?}");
}

/// A node reboot took the mounts and the paths away while the plugin's record still holds the
/// volume. A plugin that looks at the target before its own record refuses NodeUnpublishVolume
/// with NOT_FOUND; one that unmounts the staging path before it looks refuses NodeUnstageVolume
/// with INTERNAL. Each refusal is one failure naming its rule, resting on the run's two
/// observations that the path is gone (the path, the mount table); the path made again, the
/// volume still comes down and nothing is left (`run_as` asserts it). In the matrix Kubernetes
/// and Swarm are stuck for good on either; Nomad takes NOT_FOUND as done and is stuck on the
/// INTERNAL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_needs_the_path_to_unpublish_or_unstage_fails_the_node_reboot_and_strands_the_orchestrators() {
    let all = csi_conform::orchestrator::Profile::parse("all").unwrap();
    let cases = [
        (Quirk::UnpublishNeedsPath, "NodeUnpublishVolume", "NOT_FOUND", "NodeUnpublishVolume.idempotent", Severity::Pass),
        (Quirk::UnstageUnmountsBlindly, "NodeUnstageVolume", "INTERNAL", "NodeUnstageVolume.idempotent", Severity::Fail),
    ];
    for (quirk, rpc, code, rule, nomad) in cases {
        let report = run_as(&[quirk], 4, all.clone()).await;
        let scenario = report.scenario("disruption.lost-node.node-paths-gone").unwrap();
        let refused: Vec<_> = scenario.findings.iter().filter(|f| f.severity >= Severity::Warn).collect();
        let calls: Vec<(&str, &str, &str, Vec<&str>)> = refused
            .iter()
            .map(|f| {
                let requirements = f.requirements.iter().map(String::as_str).collect();
                (f.kind.as_str(), f.rpc.as_deref().unwrap_or_default(), f.got.as_deref().unwrap_or_default(), requirements)
            })
            .collect();
        assert_eq!(calls, [("paths-gone", rpc, code, vec![rule])], "{quirk}: {refused:#?}");
        let f = refused[0];
        assert_eq!(f.severity, Severity::Fail);
        let claims: Vec<&str> = f.evidence.iter().map(|e| e.claim.as_str()).collect();
        assert_eq!(claims, ["does not exist", "lists nothing mounted there"], "{f:#?}");
        assert!(f.message.contains("answered OK once the path was made again"), "{}", f.message);
        let cells: BTreeMap<String, Severity> = report
            .orchestrators
            .iter()
            .map(|o| (o.name.clone(), o.behaviours.iter().find(|b| b.id == "lost-node.node-paths-gone").unwrap().outcome))
            .collect();
        let want: BTreeMap<String, Severity> =
            [("kubernetes", Severity::Fail), ("nomad", nomad), ("swarm", Severity::Fail)].map(|(o, s)| (o.to_owned(), s)).into();
        assert_eq!(cells, want, "{quirk}");
    }
    if !csi_conform::mounts::has_cap_sys_admin() {
        eprintln!("SKIPPED (in part): no CAP_SYS_ADMIN, so the reference plugin mounted nothing and the reboot only removed the paths");
    }
}

/// The fan-out reads the source's marker back from its copies: a plugin whose volumes restored
/// from a snapshot are blank (`snapshot-empty`) fails it once, under the restore rule, and
/// nothing else in either suite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restores_made_at_once_without_the_source_data_fail_the_fan_out() {
    let report = run(&[Quirk::SnapshotEmpty], 8).await;
    let found = verdicts(&report);
    let expected = [("stress.fanout.clones-and-snapshots".to_owned(), "snapshot-content".to_owned(), Severity::Fail)];
    assert_eq!(found, expected, "{found:#?}");
    let f = report.scenario(&expected[0].0).unwrap().findings.iter().find(|f| f.kind == "snapshot-content").unwrap();
    assert_eq!(f.requirements, ["CreateVolume.source.snapshot"], "{f:#?}");
}

/// A clone answered OK that the plugin never recorded (`fanout-loses-clone`) is lost on two
/// witnesses, looked for while every object of the fan-out is still there: two whole
/// listings without it and ControllerGetVolume's NOT_FOUND (a witness the run believes). One
/// finding naming it, under the rule of the answer; the run deletes what the plugin holds and
/// leaves nothing (`run` asserts it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_answered_ok_and_never_recorded_is_lost_on_two_witnesses() {
    let report = run(&[Quirk::FanoutLosesClone], 8).await;
    let scenario = "stress.fanout.clones-and-snapshots";
    assert_eq!(verdicts(&report), [(scenario.to_owned(), "lost-volume".to_owned(), Severity::Fail)]);
    let f = report.scenario(scenario).unwrap().findings.iter().find(|f| f.kind == "lost-volume").unwrap();
    assert_eq!((f.rpc.as_deref(), f.requirements.as_slice()), (Some("CreateVolume"), &["CreateVolume.volume.exists".to_owned()][..]));
    assert!(f.message.contains("clones of volume") && f.message.contains("#createvolume"), "{}", f.message);
    let witnesses: Vec<(&str, &str)> = f.evidence.iter().map(|e| (e.rpc.as_str(), e.claim.as_str())).collect();
    assert_eq!(witnesses, [("ListVolumes", "not listed, in two whole listings"), ("ControllerGetVolume", "does not exist")]);
    // The one clone lost is the one the finding names; the others were read and deleted.
    let lost = &f.evidence[0].object;
    assert!(f.message.contains(lost.as_str()), "{}", f.message);

    // A ControllerGetVolume that answers OK for an id never created is not believed: with only
    // the listing to say so, the clone missing from it is a note, never a verdict.
    let report = run(&[Quirk::FanoutLosesClone, Quirk::GetVolumeOkWhenMissing], 8).await;
    let found = verdicts(&report);
    assert!(!found.iter().any(|(_, kind, _)| kind.starts_with("lost-") || kind.starts_with("unlisted-")), "{found:#?}");
    let notes: Vec<&str> = report.scenario(scenario).unwrap().findings.iter().map(|f| f.message.as_str()).collect();
    assert!(notes.iter().any(|n| n.contains("no second witness confirms it is gone")), "{notes:#?}");
}

/// A listing that lags the plugin's state (`listing-lags`) is no verdict within
/// `--delete-grace`; with no grace the objects the listing leaves out, each answering for
/// itself, are the listing's fault (its "all the volumes" rule), never a lost object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_leaves_out_what_answers_for_itself_fails_the_listing_past_the_grace() {
    let lost_or_unlisted =
        |report: &RunReport| verdicts(report).into_iter().filter(|(_, kind, _)| kind.starts_with("lost-") || kind.starts_with("unlisted-")).collect::<Vec<_>>();
    let report = run_tuned(&[Quirk::ListingLags], 1, |_| {}, false).await;
    assert!(lost_or_unlisted(&report).is_empty(), "{:#?}", verdicts(&report));
    let report = run_tuned(&[Quirk::ListingLags], 1, |c| c.delete_grace = std::time::Duration::ZERO, false).await;
    let found = lost_or_unlisted(&report);
    let scenario = "stress.fanout.clones-and-snapshots".to_owned();
    assert!(found.contains(&(scenario.clone(), "unlisted-volume".into(), Severity::Fail)), "{found:#?}");
    assert!(found.contains(&(scenario.clone(), "unlisted-snapshot".into(), Severity::Fail)), "{found:#?}");
    assert!(found.iter().all(|(_, kind, _)| kind.starts_with("unlisted-")), "{found:#?}");
    let f = report.scenario(&scenario).unwrap().findings.iter().find(|f| f.kind == "unlisted-snapshot").unwrap();
    assert_eq!(f.requirements, ["ListSnapshots.all-snapshots"]);
    assert!(f.message.contains("all snapshots on the storage system") && f.message.contains("#listsnapshots"), "{}", f.message);
}

/// A plugin that serialises its calls and answers ABORTED to a call on a busy volume is
/// within the spec (#concurrency): no verdict anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_for_a_busy_volume_is_no_verdict() {
    let report = run(&[Quirk::AbortsWhenBusy], 8).await;
    assert!(verdicts(&report).is_empty(), "{:#?}", verdicts(&report));
}

/// `--suite stress --suite disruption` names the opt-in suites (no such files here); the run
/// of the bundled plugin passes (its restarts done in-process), and the calls raced to make one thing leave no entry of the
/// journal in doubt (each fork's record of the same volume is one resource).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_opt_in_suites_are_chosen_by_name_and_leave_nothing_in_doubt() {
    let cwd = tempfile::tempdir().unwrap();
    let work = cwd.path().join("work").display().to_string();
    let args = ["run", "--no-builtin", "--suite", "stress", "--suite", "disruption", "--work-dir", &work, "--seed", "3", "-q"];
    let out = crate::support::csi_conform(&args, cwd.path()).await;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    // Every scenario runs: the run restarts the bundled plugin itself, with no command.
    assert!(stdout.contains("9 scenarios") && stdout.contains("9 passed") && stdout.contains("0 skipped"), "{stdout}");
    assert!(!stdout.contains("in doubt") && !stderr.contains("in doubt"), "{stdout}\n{stderr}");
    // A default run has neither.
    let out = crate::support::csi_conform(&["list"], cwd.path()).await;
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(!listed.contains("stress.create.same-name-at-once"), "{listed}");
}

/// Runs `--suite disruption` with `--restart-node-cmd` and `--restart-controller-cmd` against a reference plugin process
/// (state in a directory, so that a new process finds it) started with `quirks`; the restart
/// command stops it and starts another on the same socket. The run's JSON report, and whether
/// the plugin was really restarted.
async fn restart_run(quirks: &[Quirk]) -> (serde_json::Value, bool) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let quirks: Vec<String> = quirks.iter().map(|q| format!("--quirk {}", q.name())).collect();
    let start = format!(
        "{bin} reference-plugin --endpoint unix://{d}/csi.sock --state-dir {d}/state {q} >>{d}/plugin.log 2>&1 & echo $! > {d}/pid; \
         while [ ! -S {d}/csi.sock ]; do sleep 0.02; done",
        bin = crate::support::bin(),
        q = quirks.join(" ")
    );
    std::fs::write(dir.path().join("start.sh"), &start).unwrap();
    let restart = format!("cp {d}/pid {d}/first.pid 2>/dev/null; kill $(cat {d}/pid); while [ -S {d}/csi.sock ]; do sleep 0.02; done; sh {d}/start.sh");
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    assert!(std::process::Command::new("sh").arg(dir.path().join("start.sh")).status().unwrap().success());
    let endpoint = format!("unix://{d}/csi.sock");
    let (work, json) = (format!("{d}/work"), format!("{d}/r.json"));
    let args = [
        "run", "--endpoint", &endpoint, "--no-builtin", "--suite", "disruption", "--restart-node-cmd", &restart, "--restart-controller-cmd", &restart,
        "--work-dir", &work,
        "--json", &json, "--seed", "5", "-q",
    ];
    let out = crate::support::csi_conform(&args, dir.path()).await;
    let restarted = std::fs::read_to_string(dir.path().join("first.pid")).ok() != std::fs::read_to_string(dir.path().join("pid")).ok();
    let _ = std::process::Command::new("sh").arg("-c").arg(format!("kill $(cat {d}/pid)")).status();
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }))
    .unwrap();
    assert!(csi_conform::mounts::mounts_under(dir.path()).is_empty(), "mounts left under {d}");
    (report, restarted)
}

/// Every warning or worse of a JSON report: (scenario, kind, severity, requirements).
fn json_verdicts(report: &serde_json::Value) -> Vec<(String, String, String, Vec<String>)> {
    let mut out = Vec::new();
    for scenario in report["suites"].as_array().unwrap().iter().flat_map(|s| s["scenarios"].as_array().unwrap()) {
        for f in scenario["findings"].as_array().into_iter().flatten() {
            let severity = f["severity"].as_str().unwrap_or_default();
            if matches!(severity, "pass" | "skip") {
                continue;
            }
            let requirements = f["requirements"].as_array().into_iter().flatten().filter_map(|r| r.as_str().map(str::to_owned)).collect();
            out.push((scenario["id"].as_str().unwrap().to_owned(), f["kind"].as_str().unwrap().to_owned(), severity.to_owned(), requirements));
        }
    }
    out
}

fn json_outcome(report: &serde_json::Value, id: &str) -> String {
    report["suites"].as_array().unwrap().iter().flat_map(|s| s["scenarios"].as_array().unwrap()).find(|s| s["id"] == id).map(|s| s["outcome"].as_str().unwrap().to_owned()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_plugin_restarted_while_published_keeps_the_publication_and_takes_it_down() {
    let (report, restarted) = restart_run(&[]).await;
    assert!(restarted, "the restart command really started another plugin process");
    assert!(json_verdicts(&report).is_empty(), "{:#?}", json_verdicts(&report));
    assert_eq!(json_outcome(&report, "disruption.restart.while-published"), "pass");
    assert_eq!(json_outcome(&report, "disruption.restart.controller-during-create"), "pass");
    let notes = report.to_string();
    for who in ["node", "controller"] {
        assert!(notes.contains(&format!("the {who} plugin answered Probe ready")), "the time to Probe ready is reported");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_forgets_its_stagings_on_restart_is_one_failure_in_the_restart_scenario() {
    let (report, restarted) = restart_run(&[Quirk::RestartLosesStaging]).await;
    assert!(restarted);
    let found = json_verdicts(&report);
    assert_eq!(
        found,
        [(
            "disruption.restart.while-published".to_owned(),
            "restart-lost-state".to_owned(),
            "fail".to_owned(),
            vec!["NodeStageVolume.stage-before-publish".to_owned()]
        )],
        "{found:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_that_forgets_names_on_restart_is_one_failure_in_the_controller_restart_scenario() {
    let (report, restarted) = restart_run(&[Quirk::RestartForgetsNames]).await;
    assert!(restarted);
    let found = json_verdicts(&report);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (scenario, kind, severity, requirements) = &found[0];
    assert_eq!(scenario, "disruption.restart.controller-during-create");
    // An OK before the restart and another volume after it, or an answer lost with the
    // process and a second volume listed: the one rule either way.
    assert!(["duplicate-volume", "ghost-volume"].contains(&kind.as_str()), "{kind}");
    assert_eq!((severity.as_str(), requirements.as_slice()), ("fail", ["CreateVolume.idempotent".to_owned()].as_slice()));
}
