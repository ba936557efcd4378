//! CSI v1.13 against the reference plugin over a real socket: a degraded volume is reported by
//! the controller and the node; the health quirks are caught on a degraded volume with the
//! finding expected and nothing else; paging ControllerListVolumeHealth; which version a run
//! judges by, and the evidence its answers give (consistent at both versions, warned where a
//! plugin mixes them, never a failure); a v1.12 reference run still passes as before;
//! `list --spec --spec-version 1.13`.

use std::collections::BTreeSet;

use csi_conform::{
    proto::v1::{self, volume_capability},
    reference::{Config, HEALTH_PARAMETER, Quirk},
    report::{self, RunReport, Severity, SpecEvidence},
    suite::{self, RunConfig},
    version::SpecVersion,
};
use regex::Regex;

use crate::support::{TestPlugin, csi_conform, engine_plugin};

fn mount_capability() -> v1::VolumeCapability {
    v1::VolumeCapability {
        access_type: Some(volume_capability::AccessType::Mount(Default::default())),
        access_mode: Some(volume_capability::AccessMode {
            mode: volume_capability::access_mode::Mode::SingleNodeWriter as i32,
        }),
    }
}

/// Creates a volume the reference plugin reports with `health` (`STATUS:Reason`).
async fn degraded_volume(plugin: &TestPlugin, name: &str, health: &str) -> String {
    let response = plugin
        .controller()
        .create_volume(v1::CreateVolumeRequest {
            name: name.into(),
            capacity_range: Some(v1::CapacityRange { required_bytes: 1 << 20, limit_bytes: 0 }),
            volume_capabilities: vec![mount_capability()],
            parameters: [(HEALTH_PARAMETER.to_owned(), health.to_owned())].into(),
            ..Default::default()
        })
        .await
        .expect("CreateVolume");
    response.into_inner().volume.expect("a volume").volume_id
}

/// Every finding at warning level or worse: (scenario, kind, severity), once each.
fn problems(report: &RunReport) -> BTreeSet<(String, String, Severity)> {
    report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .flat_map(|s| s.findings.iter().map(move |f| (s.id.clone(), f.kind.clone(), f.severity)))
        .filter(|(_, _, sev)| *sev >= Severity::Warn)
        .collect()
}

async fn health_run(plugin: &TestPlugin) -> RunReport {
    let engine = engine_plugin(plugin).await;
    let work = tempfile::tempdir().unwrap();
    let config = RunConfig {
        seed: 7,
        work_dir: work.path().join("work"),
        focus: vec![Regex::new(r"^(health|capabilities)\.").unwrap()],
        ..RunConfig::default()
    };
    suite::run(&engine, &suite::builtin(), &config).await
}

#[tokio::test]
async fn a_degraded_volume_is_reported_as_such_by_the_controller_and_the_node() {
    let plugin = TestPlugin::start(Config::default()).await;
    let id = degraded_volume(&plugin, "sick", "DEGRADED:ReplicaMissing").await;
    let healthy = degraded_volume(&plugin, "well", "").await;
    let entry = v1::volume_health::VolumeHealthEntry {
        status: v1::VolumeHealthErrorType::Degraded as i32,
        reason: "ReplicaMissing".into(),
        message: "told to report DEGRADED".into(),
    };
    let controller = plugin
        .controller()
        .controller_get_volume_health(v1::ControllerGetVolumeHealthRequest { volume_id: id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .volume_health
        .unwrap();
    assert_eq!((controller.volume_id.as_str(), controller.health_statuses.as_slice()), (id.as_str(), [entry.clone()].as_slice()));
    let node = plugin
        .node()
        .node_get_volume_health(v1::NodeGetVolumeHealthRequest { volume_id: id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .volume_health
        .unwrap();
    assert_eq!(node.health_statuses, [entry]);
    let listed = plugin
        .controller()
        .controller_list_volume_health(v1::ControllerListVolumeHealthRequest::default())
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<&str> = listed.entries.iter().map(|e| e.volume_id.as_str()).collect();
    assert_eq!(ids, [id.as_str()], "only the adverse volume is listed, not {healthy}");
    // ... and the built-in health scenarios pass on it, with no warning.
    let report = health_run(&plugin).await;
    assert_eq!(problems(&report), BTreeSet::new());
}

#[tokio::test]
async fn controller_list_volume_health_pages_one_at_a_time_and_the_scenario_follows() {
    let plugin = TestPlugin::start(Config::default()).await;
    for n in 0..3 {
        degraded_volume(&plugin, &format!("sick-{n}"), "INACCESSIBLE:NoPath").await;
    }
    let page = plugin
        .controller()
        .controller_list_volume_health(v1::ControllerListVolumeHealthRequest { max_entries: 1, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page.entries.len(), 1);
    assert!(!page.next_token.is_empty(), "more remain");
    let report = health_run(&plugin).await;
    let list = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == "health.controller.list").unwrap();
    assert_eq!(list.outcome, Severity::Pass, "{:#?}", list.findings);
    assert_eq!(problems(&report), BTreeSet::new());
}

/// A health quirk on a degraded volume: exactly the expected finding, on the scenario that
/// lists adverse volumes, and nothing else.
async fn caught_on_a_degraded_volume(quirk: Quirk, kind: &str) {
    let plugin = TestPlugin::start(Config { quirks: [quirk].into(), ..Config::default() }).await;
    degraded_volume(&plugin, "sick", "DEGRADED:ReplicaMissing").await;
    let report = health_run(&plugin).await;
    let expected: BTreeSet<_> = [("health.controller.list".to_owned(), kind.to_owned(), Severity::Fail)].into();
    assert_eq!(problems(&report), expected, "{quirk}");
}

#[tokio::test]
async fn a_duplicate_health_entry_fails_the_listing() {
    caught_on_a_degraded_volume(Quirk::DuplicateHealthEntry, "duplicate-health-entry").await;
}

#[tokio::test]
async fn a_health_entry_without_a_reason_fails_the_listing() {
    caught_on_a_degraded_volume(Quirk::HealthMissingReason, "health-required").await;
}

#[tokio::test]
async fn the_version_is_inferred_from_the_capabilities_and_a_v1_12_run_passes_as_before() {
    let v13 = TestPlugin::start(Config::default()).await;
    let engine = engine_plugin(&v13).await;
    assert_eq!(engine.fingerprint.spec.version, SpecVersion::V1_13);
    assert!(engine.fingerprint.spec.reason.contains("node:GET_VOLUME_HEALTH"), "{}", engine.fingerprint.spec.reason);

    let v12 = TestPlugin::start(Config { spec_version: SpecVersion::V1_12, ..Config::default() }).await;
    let engine = engine_plugin(&v12).await;
    assert_eq!(engine.fingerprint.spec.version, SpecVersion::V1_12);
    assert!(engine.fingerprint.spec.reason.contains("controller:VOLUME_CONDITION"), "{}", engine.fingerprint.spec.reason);
    let work = tempfile::tempdir().unwrap();
    let mut config = RunConfig { seed: 7, work_dir: work.path().join("work"), ..RunConfig::default() };
    // The v1.12 checks of VolumeCondition, the new honesty checks and the migration note.
    config.focus = vec![Regex::new(r"(condition|health|topology|get-capabilities|get-plugin-capabilities)").unwrap()];
    let report = suite::run(&engine, &suite::builtin(), &config).await;
    assert_eq!(report.spec.as_ref().map(|s| s.version.as_str()), Some("1.12"));
    assert_eq!(problems(&report), BTreeSet::new());
    let outcome = |id: &str| report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id).map(|s| s.outcome);
    for id in ["extras.list-volumes.condition", "extras.controller-get-volume.condition", "extras.volume-stats.condition"] {
        assert_eq!(outcome(id), Some(Severity::Pass), "{id} still checks v1.12's volume_condition");
    }
    for id in ["health.controller.get.healthy", "health.node.storage", "snapshots.topology.requisite"] {
        assert_eq!(outcome(id), Some(Severity::Skip), "{id} needs a v1.13 capability");
    }
    let migration = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == "health.migration").unwrap();
    assert!(
        migration.findings.iter().any(|f| f.severity == Severity::Pass && f.message.contains("VOLUME_CONDITION only")),
        "{:#?}",
        migration.findings
    );
}

#[tokio::test]
async fn list_spec_shows_the_v1_13_requirements() {
    let dir = tempfile::tempdir().unwrap();
    let out = csi_conform(&["list", "--spec", "--requirements", "--spec-version", "1.13"], dir.path()).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("CSI v1.13.0"), "{stdout}");
    assert!(stdout.contains("ControllerListVolumeHealth.max-entries"), "{stdout}");
    assert!(!stdout.contains("ListVolumes.status.condition"), "v1.13 removed it");
    let v12 = csi_conform(&["list", "--spec", "--requirements"], dir.path()).await;
    let v12 = String::from_utf8_lossy(&v12.stdout);
    assert!(v12.contains("ListVolumes.status.condition") && !v12.contains("ControllerListVolumeHealth"), "{v12}");
}

/// The scenarios that read what only one version defines in answers: v1.12's volume_condition
/// (ListVolumes, ControllerGetVolume, NodeGetVolumeStats), v1.13's health RPCs and snapshot
/// topology.
const VERSIONED: &str = r"^(extras\.(list-volumes|controller-get-volume|volume-stats)\.condition|health\..*|snapshots\.topology\..*|controller\.list-volumes.*)$";

async fn versioned_run(plugin: &TestPlugin, stated: Option<SpecVersion>) -> RunReport {
    let mut engine = engine_plugin(plugin).await;
    engine.fingerprint.state_spec_version(stated);
    let work = tempfile::tempdir().unwrap();
    let config = RunConfig {
        seed: 7,
        work_dir: work.path().join("work"),
        focus: vec![Regex::new(VERSIONED).unwrap()],
        ..RunConfig::default()
    };
    suite::run(&engine, &suite::builtin(), &config).await
}

fn evidence(report: &RunReport) -> Vec<SpecEvidence> {
    report.spec.as_ref().expect("the report says which version").evidence.clone()
}

/// (version, what, contradicts) of each piece of evidence.
fn pieces(report: &RunReport) -> BTreeSet<(String, String, bool)> {
    evidence(report).into_iter().map(|e| (e.version, e.what, e.contradicts)).collect()
}

#[tokio::test]
async fn the_answers_of_either_reference_version_agree_with_the_version_judged_by() {
    let v13 = TestPlugin::start(Config::default()).await;
    let report = versioned_run(&v13, None).await;
    assert_eq!(problems(&report), BTreeSet::new());
    let seen = pieces(&report);
    assert!(seen.contains(&("1.13".into(), "capability node:GET_VOLUME_HEALTH".into(), false)), "{seen:#?}");
    assert!(seen.contains(&("1.13".into(), "NodeGetVolumeHealth answered OK".into(), false)), "{seen:#?}");
    assert!(seen.iter().all(|(v, _, against)| v == "1.13" && !against), "{seen:#?}");
    let health = evidence(&report).into_iter().find(|e| e.what == "ControllerGetVolumeHealth answered OK").unwrap();
    assert!(health.scenarios.iter().any(|s| s.starts_with("health.controller.")), "{health:?}");
    let summary = report::console::summary(&report, false);
    assert!(summary.contains("Version evidence: consistent with v1.13: 5 capabilities and "), "{summary}");

    let v12 = TestPlugin::start(Config { spec_version: SpecVersion::V1_12, ..Config::default() }).await;
    let report = versioned_run(&v12, None).await;
    assert_eq!(problems(&report), BTreeSet::new());
    let seen = pieces(&report);
    let listed = ("1.12".to_owned(), "ListVolumes's answer sets entries[].status.volume_condition".to_owned(), false);
    assert!(seen.contains(&listed), "{seen:#?}");
    assert!(seen.contains(&("1.12".into(), "NodeGetVolumeStats's answer sets volume_condition".into(), false)), "{seen:#?}");
    assert!(seen.iter().all(|(v, _, against)| v == "1.12" && !against), "{seen:#?}");
}

#[tokio::test]
async fn a_v1_13_plugin_that_still_sets_volume_condition_is_warned_never_failed() {
    let plugin = TestPlugin::start(Config { quirks: [Quirk::MixedVersions].into(), ..Config::default() }).await;
    let report = versioned_run(&plugin, None).await;
    assert_eq!(report.spec.as_ref().map(|s| s.version.as_str()), Some("1.13"), "judged by what it advertises");
    let found = problems(&report);
    assert!(!found.is_empty());
    assert!(found.iter().all(|(_, kind, sev)| kind == "spec-version" && *sev == Severity::Warn), "{found:#?}");
    let warned: BTreeSet<&str> = found.iter().map(|(id, ..)| id.as_str()).collect();
    let seen = evidence(&report);
    let against: Vec<&SpecEvidence> = seen.iter().filter(|e| e.contradicts).collect();
    assert!(against.iter().all(|e| e.version == "1.12" && e.what.contains("volume_condition")), "{against:#?}");
    // Every scenario whose calls showed it is warned, and named in the report's evidence.
    let named: BTreeSet<&str> = against.iter().flat_map(|e| e.scenarios.iter().map(String::as_str)).collect();
    assert_eq!(warned, named);
    let f = report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .flat_map(|s| &s.findings)
        .find(|f| f.kind == "spec-version")
        .unwrap();
    assert!(f.message.contains("(only CSI v1.12 defines it), but the run judges the plugin by CSI v1.13"), "{}", f.message);
    assert!(f.message.contains("node:GET_VOLUME_HEALTH") && f.message.contains("--spec-version 1.12"), "{}", f.message);
    assert_eq!(f.requirements, ["VolumeHealth.migration"]);
    assert!(f.rpc.is_some() && f.step.is_some(), "at the call that showed it: {f:?}");
    assert!(!report.failed(), "a version guess never fails a plugin");
    let summary = report::console::summary(&report, false);
    let line = summary.lines().find(|l| l.starts_with("Version evidence: ")).expect(&summary);
    assert!(line.starts_with("Version evidence: the plugin speaks against the version judged by: ListVolumes's answer sets"), "{line}");
    assert!(line.contains("(v1.12, against the v1.13 judged by; in ") && line.contains("that agree (the JSON"), "{line}");
    assert!(!line.contains("capability node:GET_VOLUME_HEALTH"), "what agrees is counted, not listed: {line}");
}

#[tokio::test]
async fn a_v1_12_plugin_with_snapshot_topology_is_judged_by_v1_12_and_the_answer_warns() {
    let plugin = TestPlugin::start(Config {
        spec_version: SpecVersion::V1_12,
        quirks: [Quirk::SnapshotTopologyWithoutCapability].into(),
        ..Config::default()
    })
    .await;
    let report = versioned_run(&plugin, None).await;
    assert_eq!(report.spec.as_ref().map(|s| s.version.as_str()), Some("1.12"));
    let id = "snapshots.topology.unset-without-capability".to_owned();
    let expected: BTreeSet<_> = [(id.clone(), "assertion".to_owned(), Severity::Fail), (id, "spec-version".to_owned(), Severity::Warn)].into();
    assert_eq!(problems(&report), expected);
    let seen = pieces(&report);
    assert!(seen.contains(&("1.13".into(), "CreateSnapshot's answer sets snapshot.accessible_topology".into(), true)), "{seen:#?}");
    let junit = report::to_junit_xml(&report);
    crate::support::junit_schema::check(&junit).unwrap_or_else(|e| panic!("junit-10.xsd refuses it: {e}"));
    assert!(junit.contains("spec-version-evidence") && junit.contains("against the v1.12 judged by"), "{junit}");
}

#[tokio::test]
async fn a_stated_version_against_the_capabilities_is_stated_in_the_evidence_not_warned_per_answer() {
    let plugin = TestPlugin::start(Config::default()).await;
    let report = versioned_run(&plugin, Some(SpecVersion::V1_12)).await;
    let spec = report.spec.as_ref().unwrap();
    assert!(spec.stated && spec.version == "1.12");
    assert!(!problems(&report).iter().any(|(_, kind, _)| kind == "spec-version"), "{:#?}", problems(&report));
    let seen = pieces(&report);
    assert!(seen.contains(&("1.13".into(), "capability node:GET_VOLUME_HEALTH".into(), true)), "{seen:#?}");
    assert!(seen.contains(&("1.13".into(), "NodeGetStorageHealth answered OK".into(), false)), "{seen:#?}");
}
