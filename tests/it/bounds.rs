//! Bounds are not verdicts: a wait that runs out where the spec sets no deadline (a snapshot
//! that stays not ready, a `poll:` step's condition) makes its scenario inconclusive, naming
//! the flag or field that bounds it, never failed; an expansion the node does not show after
//! the plugin said it is done fails the one requirement whose answer said so; a listing whose
//! cursor the run's own calls moved is restarted, not failed.

use std::time::Duration;

use csi_conform::{
    reference::{Config, Quirk},
    report::{Finding, RunReport, ScenarioResult, Severity},
    suite::{self, RunConfig},
};

use crate::lifecycle::{Cluster, assert_work_dir_clean};

/// The outcome of a scenario the harness could not decide.
const UNDECIDED: Severity = Severity::Inconclusive;

fn config(work: &std::path::Path, focus: &str) -> RunConfig {
    RunConfig {
        seed: 3,
        volume_size: 8 << 20,
        expand_size: Some(16 << 20),
        work_dir: work.join("work"),
        focus: vec![regex::Regex::new(focus).unwrap()],
        ..RunConfig::default()
    }
}

fn scenario<'a>(report: &'a RunReport, id: &str) -> &'a ScenarioResult {
    report.scenario(id).unwrap_or_else(|| panic!("{id} did not run"))
}

/// The one finding that left `id` undecided: the scenario is neither passed nor failed.
fn undecided<'a>(report: &'a RunReport, id: &str) -> &'a Finding {
    let s = scenario(report, id);
    assert_eq!(s.outcome, UNDECIDED, "{id}: {:#?}", s.findings);
    let found: Vec<&Finding> = s.findings.iter().filter(|f| f.severity >= Severity::Inconclusive).collect();
    assert_eq!(found.len(), 1, "{id}: {found:#?}");
    assert_eq!((found[0].severity, found[0].kind.as_str()), (Severity::Inconclusive, "bound-ran-out"), "{id}");
    found[0]
}

/// A snapshot that is never ready (the reference plugin's `snapshot_ready_after`, as a cloud
/// plugin uploading for minutes): readiness is asynchronous and lawful, so every scenario
/// that waits for it is inconclusive at `--ready-timeout`, named, and none fails.
#[tokio::test]
async fn a_snapshot_that_stays_not_ready_is_inconclusive_naming_the_flag_never_failed() {
    let cluster = Cluster::start(Config { snapshot_ready_after: Duration::from_secs(3600), ..Config::default() }, 1).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let mut config = config(work.path(), r"^(controller\.create-volume\.from-snapshot|requirements\.create-volume\.larger-than-source)$");
    config.ready_timeout = Some(Duration::from_millis(300));
    let report = suite::run(&engine, &suite::builtin(), &config).await;
    assert_work_dir_clean(&config);
    for id in ["controller.create-volume.from-snapshot", "requirements.create-volume.larger-than-source"] {
        let f = undecided(&report, id);
        assert!(
            f.message.contains("CreateSnapshot did not meet the poll condition within 300ms (--ready-timeout)")
                && f.message.contains("snapshot.ready_to_use")
                && f.message.contains("no deadline"),
            "{id}: {}",
            f.message
        );
    }
    assert!(!report.failed(), "{:#?}", crate::run::not_passed(&report));
    cluster.assert_clean().await;
}

/// The data check waits for readiness the same way, bounded by the same flag.
#[tokio::test]
async fn the_data_checks_snapshots_that_stay_not_ready_are_inconclusive_naming_the_flag() {
    if !crate::lifecycle::can_mount("the_data_checks_snapshots_that_stay_not_ready_are_inconclusive_naming_the_flag") {
        return;
    }
    let cluster = Cluster::start(Config { snapshot_ready_after: Duration::from_secs(3600), ..Config::default() }, 1).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let mut config = config(work.path(), r"^data\.(mount\.snapshot|block\.group-snapshot)$");
    config.ready_timeout = Some(Duration::from_millis(300));
    let report = suite::run(&engine, &suite::builtin(), &config).await;
    assert_work_dir_clean(&config);
    let single = &undecided(&report, "data.mount.snapshot").message;
    assert!(single.starts_with("snapshot ") && single.contains("was not ready to use within 300ms (--ready-timeout)"), "{single}");
    let group = &undecided(&report, "data.block.group-snapshot").message;
    assert!(group.starts_with("group snapshot ") && group.contains("(--ready-timeout)"), "{group}");
    cluster.assert_clean().await;
}

/// A suite's own `poll:` bound is named as such when no flag overrides it.
#[tokio::test]
async fn a_polls_own_timeout_is_named_when_no_flag_overrides_it() {
    const SUITE: &str = r#"
suite: bounds
title: A poll that never holds
scenarios:
  - id: never-ready
    title: waits for a snapshot that never becomes ready
    requires: [controller:CREATE_DELETE_VOLUME, controller:CREATE_DELETE_SNAPSHOT]
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"], capacity_range: { required_bytes: 1048576 } }
        save: { vol: volume }
      - call: CreateSnapshot
        request: { name: "${name}-snap", source_volume_id: "${vol.volume_id}" }
        poll: { until: { path: snapshot.ready_to_use, equals: true }, timeout: 200ms, interval: 50ms }
"#;
    let cluster = Cluster::start(Config { snapshot_ready_after: Duration::from_secs(3600), ..Config::default() }, 1).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let suites = vec![suite::load_str("bounds.yaml", SUITE).unwrap_or_else(|e| panic!("{e}"))];
    let config = config(work.path(), ".");
    let report = suite::run(&engine, &suites, &config).await;
    let f = undecided(&report, "bounds.never-ready");
    assert!(f.message.contains("within 200ms (the step's poll.timeout; --ready-timeout overrides it)"), "{}", f.message);
    assert!(!report.failed());
    cluster.assert_clean().await;
}

/// A plugin that reports the new size and grows nothing (`expand-no-grow`), asked for node
/// expansion of block volumes too (`expand-needs-staging-path`): NodeExpandVolume answered
/// OK, so the block device still at its old size is NodeExpandVolume's failure, alone, after
/// looking again for the settle time, not ten fixed seconds.
#[tokio::test]
async fn a_node_expansion_answered_ok_that_the_node_does_not_show_fails_node_expand_volume_alone() {
    if !crate::lifecycle::can_mount("a_node_expansion_answered_ok_that_the_node_does_not_show_fails_node_expand_volume_alone") {
        return;
    }
    for (id, f) in block_expansions_failing(&[Quirk::ExpandNoGrow, Quirk::ExpandNeedsStagingPath], "NodeExpandVolume.expands").await {
        assert!(f.message.contains("NodeExpandVolume answered OK") && f.message.contains("(--settle-time"), "{id}: {}", f.message);
    }
}

/// Without node expansion (the reference asks none for block volumes), a block device that
/// stays small is ControllerExpandVolume's: offline, the volume was staged anew after the
/// expansion; online, a fresh staging is asked for as the second witness, and shows it too.
#[tokio::test]
async fn a_controller_expansion_that_no_staging_shows_fails_controller_expand_volume_alone() {
    if !crate::lifecycle::can_mount("a_controller_expansion_that_no_staging_shows_fails_controller_expand_volume_alone") {
        return;
    }
    let failed = block_expansions_failing(&[Quirk::ExpandNoGrow], "ControllerExpandVolume.grows").await;
    let (_, online) = failed.iter().find(|(id, _)| id == "data.block.expand.online").unwrap();
    assert!(online.message.contains("even a fresh staging"), "{online:#?}");
}

/// Runs the two block expansion scenarios against a one-node reference plugin with `quirks`,
/// asserts that each fails under `requirement` alone and that nothing is left (work directory,
/// plugin), and returns each scenario's failure.
async fn block_expansions_failing(quirks: &[Quirk], requirement: &str) -> Vec<(String, csi_conform::report::Finding)> {
    let cluster = Cluster::start(Config { quirks: quirks.iter().copied().collect(), ..Config::default() }, 1).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let config = config(work.path(), r"^data\.block\.expand\.(online|offline)$");
    let report = suite::run(&engine, &suite::builtin(), &config).await;
    assert_work_dir_clean(&config);
    let mut failed = Vec::new();
    for id in ["data.block.expand.online", "data.block.expand.offline"] {
        let s = scenario(&report, id);
        assert_eq!(s.outcome, Severity::Fail, "{id}: {:#?}", s.findings);
        let f = s.findings.iter().find(|f| f.severity == Severity::Fail).unwrap();
        assert_eq!(f.requirements, [requirement], "{id}: one rule");
        failed.push((id.to_owned(), f.clone()));
    }
    cluster.assert_clean().await;
    failed
}

/// A plugin whose ListVolumes token goes stale when a volume is created or deleted
/// (`listing-token-expires`, hostpath's position tokens): the pagination scenario changes the
/// list between its pages itself, and the listings of the run's other scenarios page while
/// volumes come and go; each refused token restarts its listing, and nothing fails.
#[tokio::test]
async fn a_listing_whose_cursor_the_runs_own_calls_moved_is_restarted_not_failed() {
    let plugin = crate::support::TestPlugin::start(Config { quirks: [Quirk::ListingTokenExpires].into(), ..Config::default() }).await;
    let engine = crate::support::engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    let config = RunConfig {
        jobs: 8,
        ..config(work.path(), r"^(controller\.(list-volumes.*|create-volume\..*)|extras\.list-volumes\..*)$")
    };
    let report = suite::run(&engine, &suite::builtin(), &config).await;
    let pagination = scenario(&report, "controller.list-volumes.pagination");
    assert_eq!(pagination.outcome, Severity::Pass, "{:#?}", pagination.findings);
    assert!(!report.failed(), "{:#?}", crate::run::not_passed(&report));
    // The quirk bites: the plugin refused at least one token of the run.
    let refused = engine.controller.as_ref().unwrap().stats().snapshot()["ListVolumes"].errors;
    assert!(refused >= 2, "ListVolumes errors: {refused} (the invalid-token scenario's and a stale token)");
}

/// A plugin that refuses a call on a volume another call is in flight on with ABORTED
/// (`aborts-when-busy`, the kubernetes-csi drivers' per-volume lock): the property cases
/// validate one volume side by side at `--jobs 8`, so the run's own calls meet on it. That
/// is lawful (#concurrency) and the run's own doing: each refused call is asked again once
/// the others are done, and nothing is found. The quirk bites: the plugin refused calls the
/// compliant plugin answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_for_the_runs_own_call_in_flight_on_the_volume_is_retried_not_judged() {
    let focus = r"^properties\.(validate-never-fails|validate-is-stable)$";
    let mut refused = Vec::new();
    for quirks in [vec![], vec![Quirk::AbortsWhenBusy]] {
        let plugin = crate::support::TestPlugin::start(Config { quirks: quirks.into_iter().collect(), ..Config::default() }).await;
        let engine = crate::support::engine_plugin(&plugin).await;
        let work = tempfile::tempdir().unwrap();
        let config = RunConfig { jobs: 8, property_cases: 32, ..config(work.path(), focus) };
        let report = suite::run(&engine, &suite::builtin(), &config).await;
        for id in ["properties.validate-never-fails", "properties.validate-is-stable"] {
            let s = scenario(&report, id);
            assert_eq!(s.outcome, Severity::Pass, "{id}: {:#?}", s.findings);
        }
        assert!(!report.failed(), "{:#?}", crate::run::not_passed(&report));
        refused.push(engine.controller.as_ref().unwrap().stats().snapshot()["ValidateVolumeCapabilities"].errors);
    }
    assert!(refused[1] > refused[0], "ValidateVolumeCapabilities errors without and with the quirk: {refused:?}");
}
