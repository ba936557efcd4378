//! Every answer quirk of the reference plugin (one lie per class of response rule) fails a
//! default run of the built-in suites over a real socket: at the scenario and RPC that got the
//! lie, naming the rule and its requirement, without hanging the run, with nothing left that the
//! harness could delete (the journal has nothing outstanding; what a creation without a usable
//! id made is journaled as left behind by the plugin); and the compliant plugin breaks no rule.

use std::{sync::Arc, time::Duration};

use csi_conform::{
    journal::{self, Journal, JournalObserver},
    proto::v1,
    reference::{Config, Quirk},
    report::{RunReport, Severity},
    rules, suite,
};

use crate::support::{TestPlugin, engine_plugin};

/// Where each answer quirk must be caught: a scenario that makes the call the lie is told in.
pub struct Case {
    pub quirk: Quirk,
    pub scenario: &'static str,
    pub rpc: &'static str,
    pub severity: Severity,
}

const fn case(quirk: Quirk, scenario: &'static str, rpc: &'static str, severity: Severity) -> Case {
    Case { quirk, scenario, rpc, severity }
}

pub const CASES: [Case; 13] = [
    case(Quirk::CreateEmptyId, "controller.create-volume.one-gib", "CreateVolume", Severity::Fail),
    case(Quirk::MockEmptySource, "extras.create-volume.content-source-empty", "CreateVolume", Severity::Fail),
    case(Quirk::SnapshotNoCreationTime, "snapshots.get-snapshot", "CreateSnapshot", Severity::Fail),
    case(Quirk::EmptyVendorVersion, "identity.get-plugin-info", "GetPluginInfo", Severity::Fail),
    case(Quirk::StatsUnknownUnit, "node.lifecycle", "NodeGetVolumeStats", Severity::Fail),
    // A map value over 128 bytes: the spec limits the map, not each value, so only a note.
    case(Quirk::LongContextValue, "controller.create-volume.one-gib", "CreateVolume", Severity::Pass),
    case(Quirk::BigPublishContext, "controller.publish.lifecycle", "ControllerPublishVolume", Severity::Fail),
    case(Quirk::BadTopologyKey, "node.get-info", "NodeGetInfo", Severity::Fail),
    case(Quirk::RepeatNextToken, "controller.list-volumes.pagination", "ListVolumes", Severity::Fail),
    case(Quirk::EmptyErrorMessage, "controller.create-volume.no-name", "CreateVolume", Severity::Fail),
    case(Quirk::ErrorDetails, "controller.create-volume.no-name", "CreateVolume", Severity::Fail),
    case(Quirk::DeleteKeepsVolume, "controller.delete-volume", "DeleteVolume", Severity::Fail),
    case(Quirk::DeleteKeepsSnapshot, "snapshots.delete-snapshot", "DeleteSnapshot", Severity::Fail),
];

/// Far longer than a run takes on a loaded 2-core machine (about 30 s at worst): reaching it
/// means the run hung.
const HANG: Duration = Duration::from_secs(600);

/// A default run of the built-in suites against the reference plugin with `quirk`, journaled:
/// the report and the plugin (to look at what is left). The run's own timeout is a generous
/// bound that only turns a hang (a lie the harness waited on forever) into a stopped run.
async fn journaled_run(quirk: Option<Quirk>, work: &tempfile::TempDir) -> (RunReport, TestPlugin) {
    let plugin = TestPlugin::start(Config { quirks: quirk.into_iter().collect(), ..Config::default() }).await;
    let engine = engine_plugin(&plugin).await;
    let endpoint = format!("unix://{}", plugin.socket.display());
    let observer = JournalObserver::new(
        Journal::open(&work.path().join("journal.jsonl"), "r1").unwrap(),
        Some(endpoint.clone()),
        vec![endpoint],
    );
    let mut config = suite::RunConfig { seed: 7, work_dir: work.path().join("work"), ..suite::RunConfig::default() };
    config.observer = Some(Arc::new(observer));
    config.timeout = Some(HANG);
    let report = suite::run(&engine, &suite::builtin(), &config).await;
    (report, plugin)
}

/// The response-rule findings of a run, notes of rules the spec leaves open included:
/// (scenario, finding).
fn rule_findings(report: &RunReport) -> Vec<(&str, &csi_conform::report::Finding)> {
    let of_a_rule = |f: &&csi_conform::report::Finding| {
        f.kind == "response-rule" || (f.kind == csi_conform::report::NOTE_KIND && f.message.contains("'s answer breaks answer."))
    };
    report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .flat_map(|s| s.findings.iter().filter(of_a_rule).map(move |f| (s.id.as_str(), f)))
        .collect()
}

async fn volumes_left(plugin: &TestPlugin) -> Vec<String> {
    let answer = plugin.controller().list_volumes(v1::ListVolumesRequest::default()).await.unwrap().into_inner();
    answer.entries.into_iter().filter_map(|e| e.volume).map(|v| v.volume_id).collect()
}

async fn snapshots_left(plugin: &TestPlugin) -> Vec<String> {
    let answer = plugin.controller().list_snapshots(v1::ListSnapshotsRequest::default()).await.unwrap().into_inner();
    answer.entries.into_iter().filter_map(|e| e.snapshot).map(|s| s.snapshot_id).collect()
}

/// The ids the journal records as kept by the plugin (a delete answered OK, the object still
/// there): the id of each `kept-by-plugin` line's `created` entry, resolved to its resource.
fn journaled_as_kept(journal: &str) -> Vec<String> {
    let lines: Vec<serde_json::Value> = journal.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let kept: Vec<&str> = lines.iter().filter(|l| l["op"] == "kept-by-plugin").filter_map(|l| l["id"].as_str()).collect();
    let mut ids: Vec<String> = lines
        .iter()
        .filter(|l| l["op"] == "created" && l["id"].as_str().is_some_and(|id| kept.contains(&id)))
        .filter_map(|l| {
            let r = &l["record"]["resource"];
            r["volume_id"].as_str().or(r["snapshot_id"].as_str()).map(str::to_owned)
        })
        .collect();
    ids.sort();
    ids
}

async fn caught(case: &Case) {
    let work = tempfile::tempdir().unwrap();
    let (report, plugin) = journaled_run(Some(case.quirk), &work).await;
    let rule = rules::by_id(case.quirk.answer_rule().expect("an answer quirk")).expect("a rule of the table");
    let found = rule_findings(&report);
    let hit = found
        .iter()
        .find(|(id, f)| *id == case.scenario && f.message.contains(rule.id))
        .unwrap_or_else(|| panic!("{}: no {} finding in {}: {found:#?}", case.quirk, rule.id, case.scenario));
    let f = hit.1;
    assert_eq!(f.severity, case.severity, "{}: {f:#?}", case.quirk);
    assert_eq!(f.rpc.as_deref(), Some(case.rpc), "{}: at the call that got the lie", case.quirk);
    assert!(f.step.is_some(), "{}: at the step that made the call: {f:#?}", case.quirk);
    assert_eq!(f.requirements, [rule.requirement], "{}: the finding names the rule's requirement", case.quirk);
    assert!(report.failed() || case.severity <= Severity::Warn, "{}: the run fails", case.quirk);
    assert_eq!(report.interrupted, None, "{}: the lie hung the run", case.quirk);
    // Nothing the harness could delete is left.
    let journal = work.path().join("journal.jsonl");
    assert!(journal::outstanding(&journal).unwrap().is_empty(), "{}: outstanding in the journal", case.quirk);
    let left = volumes_left(&plugin).await;
    let text = std::fs::read_to_string(&journal).unwrap_or_default();
    if matches!(case.quirk, Quirk::CreateEmptyId | Quirk::MockEmptySource) {
        // Only what the plugin made without telling its id, each journaled as its own.
        assert!(!left.is_empty(), "{}: the plugin holds what it did not name", case.quirk);
        assert!(text.contains("\"op\":\"lost-by-plugin\""), "{}: journaled as left by the plugin", case.quirk);
        assert!(f.message.contains("no CSI call can delete"), "{f:#?}");
    } else if matches!(case.quirk, Quirk::DeleteKeepsVolume | Quirk::DeleteKeepsSnapshot) {
        // What is left is exactly what the plugin answered OK for and kept, each journaled so.
        let mut left = if case.quirk == Quirk::DeleteKeepsVolume { left } else { snapshots_left(&plugin).await };
        left.sort();
        assert!(!left.is_empty(), "{}: the plugin keeps what it said it deleted", case.quirk);
        assert_eq!(journaled_as_kept(&text), left, "{}: journaled as kept by the plugin", case.quirk);
        // The case's delete is its scenario's last step: the run's verifier decides it, after
        // the scenario (nothing stops). A delete by an earlier step is looked up at once and
        // stops its scenario.
        assert!(f.message.contains("was not deleted") && !f.message.contains("the scenario stops here"), "{f:#?}");
        let stopped = found.iter().any(|(_, g)| g.message.contains(rule.id) && g.message.contains("the scenario stops here"));
        assert!(stopped, "{}: no delete by an earlier step stopped its scenario: {found:#?}", case.quirk);
        if case.quirk == Quirk::DeleteKeepsSnapshot {
            assert_eq!(volumes_left(&plugin).await, Vec::<String>::new(), "{}: volumes left", case.quirk);
        }
    } else {
        assert_eq!(left, Vec::<String>::new(), "{}: volumes left on the plugin", case.quirk);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creations_without_an_id_end_their_scenario_and_are_left_to_the_plugin() {
    caught(&CASES[0]).await;
    caught(&CASES[1]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_required_fields_and_unknown_units_fail() {
    for c in &CASES[2..5] {
        caught(c).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_limits_and_topology_formats_are_checked() {
    for c in &CASES[5..8] {
        caught(c).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_that_never_ends_and_bare_errors_fail() {
    for c in &CASES[8..11] {
        caught(c).await;
    }
}

/// A delete answered OK for a volume or snapshot the plugin keeps fails the step that
/// deleted it, naming DeleteVolume.deletes / DeleteSnapshot.deletes; the run waits no longer
/// than the grace period per delete and leaves on the plugin only what it kept, each
/// journaled as kept by the plugin (so `cleanup` has nothing to do).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_the_plugin_does_not_carry_out_fail_where_they_were_answered() {
    for c in &CASES[11..] {
        caught(c).await;
    }
}

#[test]
fn every_answer_quirk_has_a_case_and_names_a_rule_of_the_table() {
    for q in Quirk::ALL.iter().copied().filter(|q| q.answer_rule().is_some()) {
        assert!(CASES.iter().any(|c| c.quirk == q), "{q} has no case");
        assert!(rules::by_id(q.answer_rule().unwrap()).is_some(), "{q}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compliant_plugin_breaks_no_rule() {
    let work = tempfile::tempdir().unwrap();
    let (report, _) = journaled_run(None, &work).await;
    let found = rule_findings(&report);
    assert!(found.is_empty(), "{found:#?}");
}

/// A default run with `quirk`, unjournaled, for what its reports blame.
async fn blamed_run(quirk: Quirk) -> RunReport {
    let work = tempfile::tempdir().unwrap();
    journaled_run(Some(quirk), &work).await.0
}

/// Every report names, for every failing scenario, exactly the requirements `want`: the
/// console's "By requirement" list, the JUnit properties, the GitHub annotations and the
/// HTML page's groups.
fn blames_only(report: &RunReport, want: &[&str]) {
    let failing: Vec<_> =
        report.suites.iter().flat_map(|s| &s.scenarios).filter(|s| s.outcome >= Severity::Warn).collect();
    assert!(!failing.is_empty(), "the quirk is caught");
    for s in &failing {
        let ids: Vec<String> = s.blamed().into_iter().map(|r| r.id).collect();
        assert_eq!(ids, want, "{} blames {ids:?}: {:#?}", s.id, s.findings);
    }
    let console = csi_conform::report::summary(report, false);
    let by_requirement = &console[console.find("By requirement").expect("a By requirement list")..];
    let listed: Vec<&str> = by_requirement.lines().filter(|l| l.starts_with("  ") && !l.starts_with("    ")).collect();
    assert_eq!(listed.len(), want.len(), "{by_requirement}");
    for (line, id) in listed.iter().zip(want) {
        assert!(line.trim_start().starts_with(id), "{line}");
    }
    let junit = csi_conform::report::to_junit_xml(report);
    crate::support::junit_schema::check(&junit).unwrap_or_else(|e| panic!("junit-10.xsd refuses it: {e}"));
    let html = csi_conform::report::html::to_html(report);
    let annotations = csi_conform::report::annotations::annotations(report).join("\n");
    for text in [&junit, &html, &annotations] {
        for other in ["NodeStageVolume.capability.honoured", "NodePublishVolume.capability.honoured", "ControllerPublishVolume.readonly"] {
            if !want.contains(&other) {
                assert!(!text.contains(&format!("requirement.{other}")) && !text.contains(&format!("breaks {other}")), "{other} blamed");
            }
        }
    }
}

/// drop-mount-flags is ValidateVolumeCapabilities' lie: the lifecycle scenarios that stop at
/// it (and name the node RPCs they go on to check) blame the confirmation only. Before
/// findings carried their own ids, NodeStageVolume/NodePublishVolume capability.honoured were
/// listed as failed for calls never made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_lie_blames_validate_volume_capabilities_only() {
    let report = blamed_run(Quirk::DropMountFlags).await;
    blames_only(&report, &["ValidateVolumeCapabilities.confirmed.capabilities"]);
}

/// ignore-readonly is a node bug: the read-only lifecycles (which also name
/// ControllerPublishVolume.readonly) blame NodePublishVolume.readonly only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_ignores_readonly_is_blamed_alone() {
    if !csi_conform::mounts::has_cap_sys_admin() {
        eprintln!("SKIPPED: ignore-readonly shows in the mount table only; no CAP_SYS_ADMIN to mount");
        return;
    }
    let report = blamed_run(Quirk::IgnoreReadonly).await;
    blames_only(&report, &["NodePublishVolume.readonly"]);
}

/// One scenario that creates a volume and leaves it to teardown, and one that creates none.
const KEPT_AT_TEARDOWN: &str = r#"
suite: kept
title: A volume deleted at teardown
scenarios:
  - id: at-teardown
    title: creates a volume, teardown deletes it
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
  - id: nothing
    title: creates nothing
    steps: [{ call: Probe }]
"#;

/// A volume the plugin keeps after the DeleteVolume of a scenario's teardown is decided by
/// the run-wide verifier after the scenario was printed (as a pass): the final report fails
/// it (JSON, JUnit, the console summary), the console says so on its own line, the run exits
/// 1, and the journal records the volume as kept by the plugin. No timing is asserted: the
/// verdict of the last teardown is always decided after its scenario ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_kept_after_teardown_fails_its_scenario_once_the_verdict_is_in() {
    let plugin = TestPlugin::start(Config { quirks: [Quirk::DeleteKeepsVolume].into(), ..Config::default() }).await;
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("kept.yaml"), KEPT_AT_TEARDOWN).unwrap();
    let socket = plugin.socket.display().to_string();
    let args = ["run", "--endpoint", &socket, "--no-builtin", "--suite", "kept.yaml", "--journal", "journal.jsonl"];
    let out = crate::support::csi_conform(&args, cwd.path()).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "a kept volume fails the run: {stdout}");

    let json = std::fs::read_to_string(cwd.path().join("reports/report.json")).unwrap();
    let report = csi_conform::report::from_json(&json).unwrap();
    let scenario = |id: &str| report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id).unwrap().clone();
    let kept = scenario("kept.at-teardown");
    assert_eq!(kept.outcome, Severity::Fail, "{kept:#?}");
    let f = kept.findings.iter().find(|f| f.message.contains("answer.delete-volume.gone")).expect("the kept finding");
    assert_eq!((f.severity, f.rpc.as_deref(), f.step), (Severity::Fail, Some("DeleteVolume"), None), "at teardown: {f:#?}");
    assert!(f.message.contains("was not deleted") && !f.message.contains("the scenario stops here"), "{f:#?}");
    assert_eq!(scenario("kept.nothing").outcome, Severity::Pass);

    // The console: first the scenario as it ended, then the amended verdict on its own line,
    // and the summary counts the failure.
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains("kept.at-teardown")).collect();
    assert!(lines.len() >= 2, "{stdout}");
    assert!(lines[0].starts_with("PASS"), "printed as it ended: {stdout}");
    assert!(lines[1].starts_with("FAIL") && lines[1].contains("amended after the scenario ended"), "{stdout}");
    assert!(stdout.contains("1 passed, 1 failed"), "{stdout}");

    // JUnit fails it. The volume stays on the plugin, and the journal (compacted at the end
    // of a CLI run) has nothing outstanding: kept by the plugin, `cleanup` has nothing to do
    // (the journal's `kept-by-plugin` lines are asserted in the engine runs above).
    let junit = crate::report::parse_junit(&std::fs::read_to_string(cwd.path().join("reports/junit.xml")).unwrap());
    assert!(crate::report::case(&junit, "kept.at-teardown").status.is_failure());
    assert_eq!(volumes_left(&plugin).await.len(), 1);
    assert!(journal::outstanding(&cwd.path().join("journal.jsonl")).unwrap().is_empty());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("cleanup --journal"), "{}", String::from_utf8_lossy(&out.stderr));
}
