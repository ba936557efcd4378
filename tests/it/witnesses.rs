//! Two witnesses before blame (issue 33): a delete fails only when every witness the run
//! believes still shows the object; a witness caught breaking its rule is the one finding,
//! filed once, and what rested on it alone is inconclusive, never a failure elsewhere.

use csi_conform::{
    reference::{Config, Quirk},
    report::{Finding, RunReport, ScenarioResult, Severity},
    suite::{self, RunConfig},
};
use regex::Regex;

use crate::support::{TestPlugin, engine_plugin};

/// Scenarios that delete volumes in steps and at teardown, and the one that asks
/// ControllerGetVolume about an unknown id on purpose.
const FOCUS: &str = r"^(controller\.delete-volume|controller\.list-volumes\.create-delete|controller\.create-volume|extras\.controller-get-volume\.not-found)$";

async fn run(quirks: &[Quirk]) -> RunReport {
    run_focused(quirks, FOCUS).await
}

async fn run_focused(quirks: &[Quirk], focus: &str) -> RunReport {
    crate::orchestrators::focused_run(quirks.to_vec(), Vec::<csi_conform::orchestrator::Profile>::new(), focus).await
}

fn all(report: &RunReport) -> Vec<(&ScenarioResult, &Finding)> {
    report.suites.iter().flat_map(|s| &s.scenarios).flat_map(|s| s.findings.iter().map(move |f| (s, f))).collect()
}

fn blames_delete(f: &Finding) -> bool {
    f.requirements.iter().any(|r| r == "DeleteVolume.deletes") || f.message.contains("answer.delete-volume.gone")
}

/// hostpath v1.16.1: ControllerGetVolume answers OK for any id, ListVolumes tells the truth.
/// The look-up is asked about an id the run never created before its word counts, so no
/// delete rests on it: no DeleteVolume failure, nothing inconclusive, and its broken rule is
/// one finding for the run (beside the scenario that tests that rule itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_that_answers_ok_for_missing_volumes_is_one_finding_and_no_delete_fails() {
    let report = run(&[Quirk::GetVolumeOkWhenMissing]).await;
    let found = all(&report);
    let detail = || found.iter().map(|(s, f)| format!("{} {} {}: {}", s.id, f.severity, f.kind, f.message)).collect::<Vec<_>>();
    assert!(!found.iter().any(|(_, f)| blames_delete(f)), "no delete is blamed: {:#?}", detail());
    assert!(!found.iter().any(|(_, f)| f.severity == Severity::Inconclusive), "{:#?}", detail());
    let lies: Vec<_> = found.iter().filter(|(_, f)| f.kind == "lying-witness").collect();
    assert_eq!(lies.len(), 1, "once per run: {:#?}", detail());
    let (filed_under, lie) = lies[0];
    assert_eq!((lie.severity, lie.rpc.as_deref()), (Severity::Fail, Some("ControllerGetVolume")));
    assert_eq!(lie.requirements, ["ControllerGetVolume.errors.not-found"]);
    assert!(lie.evidence.iter().any(|e| e.rpc == "ControllerGetVolume" && e.claim.contains("never created")), "{lie:#?}");
    // Under the scenario that tests the rule it broke (not under a delete's scenario): the
    // same at any --jobs.
    assert_eq!(filed_under.id, "extras.controller-get-volume.not-found", "{:#?}", detail());
    // The scenario about that rule still fails on its own; nothing else warns or fails.
    let not_found = report.scenario("extras.controller-get-volume.not-found").unwrap();
    assert_eq!(not_found.outcome, Severity::Fail);
    let others: Vec<_> = found
        .iter()
        .filter(|(s, f)| f.severity >= Severity::Warn && f.kind != "lying-witness" && s.id != not_found.id)
        .collect();
    assert!(others.is_empty(), "{:#?}", detail());
    for id in ["controller.delete-volume", "controller.list-volumes.create-delete"] {
        assert_eq!(report.scenario(id).unwrap().outcome, Severity::Pass, "{id}: {:#?}", detail());
    }
}

/// A look-up that refuses ids of a foreign format (so the never-created id tells nothing)
/// but answers OK for the volumes the run deleted, which its listing no longer lists: the
/// witnesses disagree. The look-up's broken rule is one finding, each delete judged on its
/// word alone is inconclusive (the scenario goes on), and none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn witnesses_that_disagree_make_the_delete_inconclusive_and_blame_the_liar_once() {
    // No scenario here needs the run's probe (which would catch the liar before any scenario).
    let report = run_focused(&[Quirk::GetVolumeOkWhenMissing, Quirk::StrictIds], r"^controller\.list-volumes\.create-delete$").await;
    assert!(report.scenario("controller.list-volumes.create-delete").is_some());
    let found = all(&report);
    let detail = || found.iter().map(|(s, f)| format!("{} {} {}: {}", s.id, f.severity, f.kind, f.message)).collect::<Vec<_>>();
    assert!(!found.iter().any(|(_, f)| blames_delete(f)), "{:#?}", detail());
    let lies: Vec<_> = found.iter().filter(|(_, f)| f.kind == "lying-witness").collect();
    assert_eq!(lies.len(), 1, "{:#?}", detail());
    let rpcs: Vec<&str> = lies[0].1.evidence.iter().map(|e| e.rpc.as_str()).collect();
    assert_eq!(rpcs, ["ControllerGetVolume", "ListVolumes"], "both witnesses cited: {:#?}", lies[0].1);
    // Only deletes judged before the liar was caught rest on it: at least the first.
    let undecided: Vec<_> = found.iter().filter(|(_, f)| f.severity == Severity::Inconclusive).collect();
    assert!(!undecided.is_empty(), "{:#?}", detail());
    for (s, f) in &undecided {
        assert_eq!((f.kind.as_str(), f.rpc.as_deref()), ("witnesses-disagree", Some("DeleteVolume")), "{}", s.id);
        assert_eq!(f.evidence.len(), 2, "{f:#?}");
    }
}

/// A plugin that keeps what it deleted, by both witnesses: nothing slips, DeleteVolume fails,
/// citing both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_both_witnesses_still_show_fails_the_delete_citing_both() {
    let report = run(&[Quirk::DeleteKeepsVolume]).await;
    let found = all(&report);
    let kept: Vec<_> = found.iter().filter(|(_, f)| blames_delete(f) && f.severity == Severity::Fail).collect();
    assert!(!kept.is_empty(), "{found:#?}");
    for (s, f) in kept {
        let rpcs: Vec<&str> = f.evidence.iter().map(|e| e.rpc.as_str()).collect();
        assert_eq!(rpcs, ["ControllerGetVolume", "ListVolumes"], "{}: {f:#?}", s.id);
    }
    assert!(!found.iter().any(|(_, f)| f.kind == "lying-witness"), "an honest look-up is not blamed");
}

/// Issue 33's case: a plugin that keeps deleted volumes (so they hold its small pool), with
/// an attach limit and an attach race, under Kubernetes' call patterns. Whether a scenario's
/// CreateVolume finds room depends on how many kept volumes the scenarios before it left,
/// so on `--jobs`; a refusal for room held by kept volumes is the broken delete's doing (the
/// same rule the scenario's own delete breaks when it finds room), and every scenario comes
/// out the same at `--jobs` 1, 4 and 32.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_volumes_filling_the_pool_give_the_same_outcomes_at_any_jobs() {
    let mut outcomes = Vec::new();
    for jobs in [1, 4, 32] {
        let plugin = TestPlugin::start(Config {
            quirks: [Quirk::DeleteKeepsVolume, Quirk::AttachRace, Quirk::BigPublishContext].into(),
            max_volumes_per_node: 2,
            capacity: 32 << 20,
            ..Config::default()
        })
        .await;
        let engine = engine_plugin(&plugin).await;
        let work = tempfile::tempdir().unwrap();
        let mut config = RunConfig {
            seed: 99,
            jobs,
            work_dir: work.path().join("work"),
            orchestrators: vec![csi_conform::orchestrator::Orchestrator::Kubernetes.into()],
            ..RunConfig::default()
        };
        config.budgets.contention_timeout = std::time::Duration::from_secs(20);
        let report = suite::run(&engine, &suite::builtin(), &config).await;
        let by_id: std::collections::BTreeMap<String, Severity> =
            report.suites.iter().flat_map(|s| &s.scenarios).map(|s| (s.id.clone(), s.outcome)).collect();
        room_held_once(&report, jobs);
        outcomes.push((jobs, by_id));
    }
    let (_, first) = &outcomes[0];
    for (jobs, other) in &outcomes[1..] {
        let differ: Vec<_> = first
            .iter()
            .filter(|(id, o)| other.get(*id) != Some(*o))
            .map(|(id, o)| format!("{id}: {o} at --jobs 1, {:?} at --jobs {jobs}", other.get(id)))
            .collect();
        assert!(differ.is_empty(), "{differ:#?}");
    }
    for id in ["extras.create-volume.content-source-empty", "extras.create-volume.topology-empty"] {
        assert_eq!(first.get(id), Some(&Severity::Fail), "{id}: the kept volumes are the plugin's fault either way");
    }
}

/// The room held by kept volumes is one finding for the run, with the kept volumes as
/// evidence, under the first scenario (by id) refused for room; every other scenario so
/// refused cites it, once, and nothing else in it blames that refusal.
fn room_held_once(report: &RunReport, jobs: usize) {
    let blocked: Vec<(&str, &Finding)> = report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .flat_map(|s| s.findings.iter().filter(|f| f.kind == "room-held-by-kept").map(move |f| (s.id.as_str(), f)))
        .collect();
    assert!(blocked.len() > 1, "--jobs {jobs}: the case blocks scenarios for room: {blocked:#?}");
    let full: Vec<_> = blocked.iter().filter(|(_, f)| f.evidence.iter().all(|e| e.rpc != "room-held-by-kept")).collect();
    assert_eq!(full.len(), 1, "--jobs {jobs}: one finding with the kept volumes: {full:#?}");
    let (home, one) = *full[0];
    assert_eq!(Some(home), blocked.iter().map(|(id, _)| *id).min(), "--jobs {jobs}: under the first scenario by id");
    assert!(one.evidence.iter().any(|e| e.rpc == "ControllerGetVolume" || e.rpc == "ListVolumes"), "{one:#?}");
    for (id, f) in blocked.iter().filter(|(id, _)| *id != home) {
        assert_eq!(f.requirements, one.requirements, "{id}");
        assert!(f.evidence.iter().any(|e| e.rpc == "room-held-by-kept" && e.object == home), "{id} cites it: {f:#?}");
        assert_eq!(blocked.iter().filter(|(other, _)| other == id).count(), 1, "{id}: once");
    }
    // The refused call is the room's, never the step's subject (no `unexpected-code`, no
    // `empty-differs-from-unset` for a RESOURCE_EXHAUSTED CreateVolume).
    for scenario in report.suites.iter().flat_map(|s| &s.scenarios) {
        let Some(room) = scenario.findings.iter().find(|f| f.kind == "room-held-by-kept") else { continue };
        let also: Vec<_> = scenario
            .findings
            .iter()
            .filter(|f| f.kind != room.kind && f.severity >= Severity::Warn && f.step == room.step && f.rpc == room.rpc)
            .collect();
        assert!(also.is_empty(), "--jobs {jobs} {}: {also:#?}", scenario.id);
    }
}

/// Scenarios whose deletes and listings the lagging ListVolumes witnesses.
const LISTINGS: &str = r"^(controller\.delete-volume|controller\.list-volumes\..*|controller\.create-volume)$";

/// Scenarios whose snapshot deletes and listings the lagging ListSnapshots witnesses.
const SNAPSHOT_LISTINGS: &str = r"^snapshots\.(list-snapshots.*|delete-snapshot|get-snapshot|create-snapshot\..*)$";

async fn run_lagging(quirks: &[Quirk], delete_grace: std::time::Duration) -> (RunReport, u64) {
    run_lagging_on(quirks, delete_grace, LISTINGS, "ListVolumes").await
}

async fn run_lagging_on(quirks: &[Quirk], delete_grace: std::time::Duration, focus: &str, listing: &str) -> (RunReport, u64) {
    let plugin = TestPlugin::start(Config { quirks: quirks.iter().copied().collect(), ..Config::default() }).await;
    let engine = engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    let config = RunConfig {
        seed: 7,
        jobs: 4,
        delete_grace,
        work_dir: work.path().join("work"),
        focus: vec![Regex::new(focus).unwrap()],
        ..RunConfig::default()
    };
    let report = suite::run(&engine, &suite::builtin(), &config).await;
    let listings = engine.controller.as_ref().unwrap().stats().snapshot().get(listing).map_or(0, |s| s.calls);
    (report, listings)
}

/// `listing-lags`: ListVolumes lists a deleted volume 300 ms longer and a new one 300 ms
/// late; ControllerGetVolume tells the truth. Within `--delete-grace` that is no verdict at
/// all: the delete look-up believes the truthful look-up, and the listing scenario lists
/// again until its listing caught up. The quirk bites: that took more listings than the
/// compliant plugin needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_lags_within_the_grace_is_no_finding_anywhere() {
    let grace = std::time::Duration::from_secs(2);
    let (compliant, plain) = run_lagging(&[], grace).await;
    assert!(all(&compliant).is_empty(), "{:#?}", all(&compliant));
    let (report, lagging) = run_lagging(&[Quirk::ListingLags], grace).await;
    let found = all(&report);
    let detail = || found.iter().map(|(s, f)| format!("{} {} {}: {}", s.id, f.severity, f.kind, f.message)).collect::<Vec<_>>();
    assert!(found.is_empty(), "{:#?}", detail());
    assert!(lagging > plain, "ListVolumes calls without and with the lag: {plain}, {lagging}");
}

/// The same listing lagging beyond a `--delete-grace` shorter than its lag: the listing is
/// the witness that broke its rule (#listvolumes: the volumes the plugin knows), filed under
/// ListVolumes in the listing scenario alone; no delete is blamed (the truthful look-up says
/// every deleted volume is gone), and nothing else fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_lags_beyond_the_grace_is_the_listings_finding_alone() {
    let (report, _) = run_lagging(&[Quirk::ListingLags], std::time::Duration::from_millis(100)).await;
    let found = all(&report);
    let detail = || found.iter().map(|(s, f)| format!("{} {} {} {:?}: {}", s.id, f.severity, f.kind, f.requirements, f.message)).collect::<Vec<_>>();
    assert!(!found.iter().any(|(_, f)| blames_delete(f)), "no delete is blamed: {:#?}", detail());
    let failed: Vec<_> = found.iter().filter(|(_, f)| f.severity >= Severity::Inconclusive).collect();
    assert_eq!(failed.len(), 1, "{:#?}", detail());
    let (scenario, f) = failed[0];
    assert_eq!(scenario.id, "controller.list-volumes.create-delete", "{:#?}", detail());
    assert_eq!(f.severity, Severity::Fail, "{:#?}", detail());
    let blamed = f.blames(scenario);
    assert!(!blamed.is_empty() && blamed.iter().all(|r| r.id.starts_with("ListVolumes.")), "{blamed:?}: {:#?}", detail());
}

/// `listing-lags` on snapshots: ListSnapshots lists a deleted snapshot 300 ms longer and a
/// new one 300 ms late; GetSnapshot tells the truth. Within `--delete-grace` nothing is found
/// (the delete believes GetSnapshot; the listing scenario lists again until it caught up, in
/// more ListSnapshots calls than the compliant plugin needed); beyond a grace shorter than the
/// lag the listing is the one witness blamed, under ListSnapshots in its own scenario, and no
/// snapshot delete is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_listing_that_lags_is_blamed_alone_and_only_beyond_the_grace() {
    let grace = std::time::Duration::from_secs(2);
    let (compliant, plain) = run_lagging_on(&[], grace, SNAPSHOT_LISTINGS, "ListSnapshots").await;
    assert!(all(&compliant).is_empty(), "{:#?}", all(&compliant));
    let (report, lagging) = run_lagging_on(&[Quirk::ListingLags], grace, SNAPSHOT_LISTINGS, "ListSnapshots").await;
    let found = all(&report);
    let detail = |found: &[(&ScenarioResult, &Finding)]| {
        found.iter().map(|(s, f)| format!("{} {} {} {:?}: {}", s.id, f.severity, f.kind, f.requirements, f.message)).collect::<Vec<_>>()
    };
    assert!(found.is_empty(), "{:#?}", detail(&found));
    assert!(lagging > plain, "ListSnapshots calls without and with the lag: {plain}, {lagging}");

    let short = std::time::Duration::from_millis(100);
    let (report, _) = run_lagging_on(&[Quirk::ListingLags], short, SNAPSHOT_LISTINGS, "ListSnapshots").await;
    let found = all(&report);
    // Every verdict is the listing's, in the scenarios that list (create-delete, and the
    // unpaged listing of pagination), naming only ListSnapshots rules: no delete is blamed.
    let failed: Vec<_> = found.iter().copied().filter(|(_, f)| f.severity >= Severity::Inconclusive).collect();
    assert!(failed.iter().any(|(s, _)| s.id == "snapshots.list-snapshots.create-delete"), "{:#?}", detail(&found));
    for (scenario, f) in &failed {
        assert!(scenario.id.starts_with("snapshots.list-snapshots."), "{:#?}", detail(&found));
        assert_eq!(f.severity, Severity::Fail, "{:#?}", detail(&found));
        let blamed = f.blames(scenario);
        assert!(!blamed.is_empty() && blamed.iter().all(|r| r.id.starts_with("ListSnapshots.")), "{blamed:?}: {:#?}", detail(&found));
    }
}
