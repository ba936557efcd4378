//! `--orchestrator`: the compatibility matrix of the reference plugin over a real socket. The
//! default plugin has no fail cell under Nomad, Kubernetes or Swarm (and exactly the three
//! warnings where Nomad or Swarm bends the spec); each orchestrator quirk fails (or, where its
//! orchestrator bends the spec, warns) its own orchestrator's behaviour and leaves every other
//! orchestrator's cells as the default plugin has them (the expansion quirk only the kubelet's
//! call without a staging path); the
//! matrix reaches the JSON, the JUnit (one testsuite per orchestrator) and the console; a run
//! without `--orchestrator` has no instance and no matrix.

use std::collections::BTreeMap;

use csi_conform::{
    orchestrator::{Orchestrator, Profile},
    reference::{Config, Quirk},
    report::{self, RunReport, Severity},
    suite::{self, RunConfig},
};
use regex::Regex;

use crate::support::{TestPlugin, csi_conform, engine_plugin};

/// Each orchestrator quirk, the orchestrator it breaks, the behaviour it breaks there and how:
/// a failure, or a warning where that orchestrator bends the spec and the plugin is right by
/// it (Swarm makes no staging directory; the spec makes that the CO's job).
pub(crate) const QUIRKS: [(Quirk, &str, &str, Severity); 6] = [
    (Quirk::TopologyExtraNodeSegment, "nomad", "topology.match", Severity::Fail),
    (Quirk::UnstageByVolume, "nomad", "rpc.unstage", Severity::Fail),
    (Quirk::AttachRace, "kubernetes", "concurrency.controller", Severity::Fail),
    (Quirk::ExpandNeedsStagingPath, "kubernetes", "fields.expand-staging-path", Severity::Fail),
    (Quirk::StageStateInParent, "swarm", "paths.staging", Severity::Fail),
    (Quirk::StagingDirNotMade, "swarm", "dirs.staging", Severity::Warn),
];

/// The cells where the default plugin warns: Nomad stages a volume a second time for a
/// second use on the node (the plugin refuses a second staging path); Swarm never unstages
/// (its DeleteVolume refuses a staged volume) and sends a block volume's
/// ControllerPublishVolume a mount capability.
const DEFAULT_WARNINGS: [(&str, &str); 3] =
    [("nomad", "paths.staging-per-usage"), ("swarm", "rpc.unstage"), ("swarm", "fields.capability")];

/// The instances only (`@` in the id) of the built-in suites, against the reference plugin
/// with `quirks`, as every orchestrator calls it.
async fn matrix_run(quirks: Vec<Quirk>, orchestrators: Vec<impl Into<Profile>>) -> RunReport {
    focused_run(quirks, orchestrators, "@").await
}

/// The scenarios of the built-in suites that match `focus`, against the reference plugin with
/// `quirks`, with `orchestrators` (`nomad`, or pinned: `nomad@1.5`).
pub(crate) async fn focused_run(quirks: Vec<Quirk>, orchestrators: Vec<impl Into<Profile>>, focus: &str) -> RunReport {
    let plugin = TestPlugin::start(Config { quirks: quirks.into_iter().collect(), ..Config::default() }).await;
    let engine = engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    let config = RunConfig {
        seed: 7,
        work_dir: work.path().join("work"),
        focus: vec![Regex::new(focus).unwrap()],
        orchestrators: orchestrators.into_iter().map(Into::into).collect(),
        ..RunConfig::default()
    };
    suite::run(&engine, &suite::builtin(), &config).await
}

fn scenario<'a>(report: &'a RunReport, id: &str) -> &'a report::ScenarioResult {
    report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id).unwrap_or_else(|| panic!("no {id}"))
}

/// Every cell: (orchestrator, behaviour) -> outcome.
fn cells(report: &RunReport) -> BTreeMap<(String, String), Severity> {
    report
        .orchestrators
        .iter()
        .flat_map(|o| o.behaviours.iter().map(move |b| ((o.name.clone(), b.id.clone()), b.outcome)))
        .collect()
}

fn worse_than_pass(report: &RunReport) -> Vec<(String, String, Severity)> {
    cells(report).into_iter().filter(|(_, s)| *s >= Severity::Warn).map(|((o, b), s)| (o, b, s)).collect()
}

#[tokio::test]
async fn the_default_reference_plugin_fails_under_no_orchestrator() {
    let report = matrix_run(Vec::new(), Orchestrator::ALL.to_vec()).await;
    let names: Vec<&str> = report.orchestrators.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["nomad", "kubernetes", "swarm"]);
    let expected: Vec<(String, String, Severity)> =
        DEFAULT_WARNINGS.iter().map(|(o, b)| ((*o).to_owned(), (*b).to_owned(), Severity::Warn)).collect();
    let mut found = worse_than_pass(&report);
    found.sort();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    assert_eq!(found, expected_sorted, "{:#?}", report.orchestrators);
    assert!(!report.failed(), "a warning is no failure");
    // Every driven behaviour of each orchestrator is exercised (pass) but those a run cannot
    // follow with this plugin, each skipped with its reason (and Swarm's expansion: it never
    // expands).
    for o in &report.orchestrators {
        for b in o.behaviours.iter().filter(|b| b.outcome == Severity::Skip) {
            assert!(b.skip_reason.as_deref().is_some_and(|r| !r.is_empty()), "{} {}", o.name, b.id);
            let swarm_expansion = o.name == "swarm" && b.id == "fields.expand-staging-path";
            // The restart and lost-node rows are the opt-in disruption suite's.
            let disruption = ["restart.node-plugin", "lost-node.controller-unpublish", "lost-node.node-paths-gone"].contains(&b.id.as_str())
                && b.skip_reason.as_deref().is_some_and(|r| r.contains("--suite disruption"));
            assert!(
                swarm_expansion
                    || disruption
                    || ["rpc.stage-without-capability", "fields.pod-info", "paths.publish-block"].contains(&b.id.as_str()),
                "{} {} skipped: {:?}",
                o.name,
                b.id,
                b.skip_reason
            );
        }
        assert!(o.count(Severity::Pass) >= 10, "{}: {:#?}", o.name, o.behaviours);
    }
    // Expansion is driven where the orchestrator expands (Nomad, Kubernetes): NodeExpandVolume
    // of the mount volume (the default plugin's controller asks no node expansion of a block
    // volume, so neither orchestrator sends one); Swarm's cell says why it is not.
    let expansion = |o: &str| {
        let o = report.orchestrators.iter().find(|r| r.name == o).unwrap();
        o.behaviours.iter().find(|b| b.id == "fields.expand-staging-path").unwrap().clone()
    };
    for o in ["nomad", "kubernetes"] {
        let cell = expansion(o);
        assert_eq!(cell.outcome, Severity::Pass, "{o}: {cell:#?}");
        assert!(cell.instances.iter().any(|i| i.ends_with(&format!("expand-mount@{o}"))), "{o}: {:?}", cell.instances);
    }
    let swarm = expansion("swarm");
    assert!(swarm.instances.is_empty() && swarm.skip_reason.as_deref().is_some_and(|r| r.contains("never expands")), "{swarm:#?}");
    // The warning says plainly that it will not work there, and why the plugin is not at fault.
    let swarm = &report.orchestrators[2];
    let unstage = swarm.behaviours.iter().find(|b| b.id == "rpc.unstage").unwrap();
    let f = &unstage.findings[0];
    assert!(f.message.contains("will not work under Docker Swarm") && f.message.contains("swarmkit#3178"), "{}", f.message);
    assert!(unstage.deviation.is_some() && unstage.instances.iter().all(|i| i.ends_with("@swarm")));

    // JSON: the matrix round-trips; JUnit: one testsuite per orchestrator, a case per cell.
    let back = report::from_json(&report::to_json(&report)).unwrap();
    assert_eq!(back.orchestrators, report.orchestrators);
    let xml = report::to_junit_xml(&report);
    crate::support::junit_schema::check(&xml).unwrap_or_else(|e| panic!("junit-10.xsd refuses it: {e}"));
    for o in &report.orchestrators {
        assert!(xml.contains(&format!("<testsuite name=\"orchestrator:{}\" tests=\"{}\"", o.name, o.behaviours.len())), "{xml}");
        assert!(xml.contains(&format!("name=\"topology.match\" classname=\"{}\"", o.name)), "{xml}");
    }
    let html = report::html::to_html(&report);
    let table = &html[html.find("<table id=\"matrix\">").expect("the matrix table")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains("<th>Nomad</th><th>Kubernetes</th><th>Docker Swarm</th>"), "{table}");
    assert_eq!(table.matches("<td class=\"warn\"").count(), 3, "{table}");
    assert_eq!(table.matches("<td class=\"fail\"").count(), 0, "{table}");
    let console = report::summary(&report, false);
    assert!(console.contains("swarm: ") && console.contains("rpc.unstage") && console.contains("WARN"), "{console}");
}

/// Nomad stages a volume once per use (`paths.staging-per-usage`): a read-only use beside a
/// read-write one on one node is a second NodeStageVolume, at a second staging path, which
/// the reference plugin refuses (one staging path per volume, as the spec has the CO keep):
/// a warning naming both paths that says the job will not start under Nomad, no failure, and
/// the read-write use goes on to the end. Kubernetes and Swarm stage once per node: their
/// instances of the scenario skip, saying so, and their matrices have no such row.
#[tokio::test]
async fn a_second_use_on_one_node_is_staged_again_only_under_nomad() {
    let report = focused_run(Vec::new(), Orchestrator::ALL.to_vec(), "two-uses-one-node").await;
    let nomad = scenario(&report, "orchestrator.two-uses-one-node@nomad");
    assert_eq!(nomad.outcome, Severity::Warn, "{:#?}", nomad.findings);
    let warned: Vec<_> = nomad.findings.iter().filter(|f| f.severity >= Severity::Warn).collect();
    assert_eq!(warned.len(), 1, "{warned:#?}");
    let f = warned[0];
    assert_eq!(f.behaviour.as_deref(), Some("paths.staging-per-usage"));
    assert_eq!((f.kind.as_str(), f.rpc.as_deref()), ("staging-per-usage", Some("NodeStageVolume")));
    for part in [
        "/staging/default/vol0/rw-file-system-multi-node-multi-writer,",
        "/staging/default/vol0/ro-file-system-multi-node-multi-writer ",
        "FAILED_PRECONDITION",
        "will not work under Nomad",
        "one staging_target_path per volume",
    ] {
        assert!(f.message.contains(part), "{part:?} not in {}", f.message);
    }
    assert!(f.plugin_message.as_deref().is_some_and(|m| m.contains("already staged")), "{f:#?}");
    // The read-write use still went through to DeleteVolume: the refusal stopped nothing.
    assert!(nomad.exercised.iter().any(|e| e == "rpc.detach-order"), "{:?}", nomad.exercised);
    for o in ["kubernetes", "swarm"] {
        let s = scenario(&report, &format!("orchestrator.two-uses-one-node@{o}"));
        assert_eq!(s.outcome, Severity::Skip, "{o}: {:#?}", s.findings);
        assert!(s.skip_reason.as_deref().is_some_and(|r| r.contains("stages a volume once per node")), "{o}: {s:#?}");
    }
    let cell = |o: &str| {
        let o = report.orchestrators.iter().find(|r| r.name == o).unwrap();
        o.behaviours.iter().find(|b| b.id == "paths.staging-per-usage").map(|b| (b.outcome, b.deviation.is_some()))
    };
    assert_eq!(cell("nomad"), Some((Severity::Warn, true)));
    assert_eq!((cell("kubernetes"), cell("swarm")), (None, None), "not a row of theirs");
    assert!(!report.failed());
    // Not a scenario of a run without --orchestrator.
    let plain = focused_run(Vec::new(), Vec::<Orchestrator>::new(), "two-uses-one-node").await;
    assert!(plain.suites.iter().all(|s| s.scenarios.is_empty()), "{:?}", plain.suites);
}

/// Each quirk fails (or warns) exactly its orchestrator's behaviour; every other
/// orchestrator's cells are what the default plugin gets (so it fails no other orchestrator).
/// A warning quirk stops nothing: every other cell, its own orchestrator's too, is the
/// default's.
#[tokio::test]
async fn each_orchestrator_quirk_fails_its_own_orchestrator_only() {
    let default = cells(&matrix_run(Vec::new(), Orchestrator::ALL.to_vec()).await);
    for (quirk, orchestrator, behaviour, severity) in QUIRKS {
        let report = matrix_run(vec![quirk], Orchestrator::ALL.to_vec()).await;
        let found = cells(&report);
        let key = (orchestrator.to_owned(), behaviour.to_owned());
        assert_eq!(found.get(&key), Some(&severity), "{quirk}: {:#?}", report.orchestrators);
        assert_ne!(default.get(&key), Some(&severity), "{quirk}: the default plugin has that cell already");
        let failed: Vec<_> = found.iter().filter(|(_, s)| **s >= Severity::Fail).map(|(k, _)| k.clone()).collect();
        let expected_failed = if severity == Severity::Fail { vec![key.clone()] } else { Vec::new() };
        assert_eq!(failed, expected_failed, "{quirk} fails elsewhere too");
        for (cell, outcome) in &found {
            if cell.0 != orchestrator || (severity < Severity::Fail && *cell != key) {
                assert_eq!(Some(outcome), default.get(cell), "{quirk}: {cell:?} differs from the default plugin's");
            }
        }
        assert_eq!(report.failed(), severity == Severity::Fail, "{quirk}: only a fail cell fails the run");
        let o = report.orchestrators.iter().find(|o| o.name == orchestrator).unwrap();
        let cell = o.behaviours.iter().find(|b| b.id == behaviour).unwrap();
        assert!(!cell.findings.is_empty() && !cell.source.is_empty(), "{quirk}: {cell:#?}");
        if quirk == Quirk::UnstageByVolume {
            // It took the second staging path (a pass there) and lost the first use with it.
            let usage = (orchestrator.to_owned(), "paths.staging-per-usage".to_owned());
            assert_eq!(found.get(&usage), Some(&Severity::Pass), "{:#?}", report.orchestrators);
            let message = &cell.findings[0].message;
            assert!(message.contains("ro-file-system-multi-node-multi-writer") && message.contains("is gone"), "{message}");
            assert_eq!(cell.findings.len(), 1, "only the second use's unstage breaks: {cell:#?}");
        }
        if severity == Severity::Warn {
            // It will not work there, and the orchestrator, not the plugin, bends the spec.
            let message = &cell.findings[0].message;
            assert!(cell.deviation.is_some() && message.contains(&format!("will not work under {}", o.title)), "{message}");
        }
    }
}

/// `expand-needs-staging-path` fails the one call sent without a staging path: the kubelet's
/// NodeExpandVolume of a multi-node block volume. Not the kubelet's expansion of a mount
/// volume, not Nomad's (which sends the staging path), and no scenario of a run without
/// `--orchestrator` (they all send it).
#[tokio::test]
async fn an_expansion_that_needs_the_staging_path_fails_only_the_kubelets_shared_block_volume() {
    let report = matrix_run(vec![Quirk::ExpandNeedsStagingPath], Orchestrator::ALL.to_vec()).await;
    let failed: Vec<&str> = report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .filter(|s| s.outcome >= Severity::Fail)
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(failed, ["orchestrator.expand-shared-block@kubernetes"]);
    let kubernetes = report.orchestrators.iter().find(|o| o.name == "kubernetes").unwrap();
    let cell = kubernetes.behaviours.iter().find(|b| b.id == "fields.expand-staging-path").unwrap();
    let f = &cell.findings[0];
    assert!(
        f.message.contains("without a staging_target_path")
            && f.message.contains("will not work under Kubernetes")
            && f.message.contains("OPTIONAL"),
        "{}",
        f.message
    );
    assert_eq!((f.expected.as_deref(), f.got.as_deref()), (Some("OK"), Some("INVALID_ARGUMENT")));

    let base = |quirks: Vec<Quirk>| async move {
        let report = focused_run(quirks, Vec::<Orchestrator>::new(), "expand").await;
        let outcomes: Vec<(String, Severity)> =
            report.suites.iter().flat_map(|s| &s.scenarios).map(|s| (s.id.clone(), s.outcome)).collect();
        outcomes
    };
    let with_quirk = base(vec![Quirk::ExpandNeedsStagingPath]).await;
    assert!(with_quirk.iter().filter(|(_, o)| *o == Severity::Pass).count() >= 4, "{with_quirk:?}");
    assert_eq!(with_quirk, base(Vec::new()).await);
}

#[tokio::test]
async fn a_quirk_is_judged_only_by_the_orchestrators_asked_for() {
    let report = matrix_run(vec![Quirk::TopologyExtraNodeSegment], vec![Orchestrator::Kubernetes]).await;
    assert_eq!(report.orchestrators.len(), 1);
    assert!(worse_than_pass(&report).is_empty(), "{:#?}", report.orchestrators);
    let ids: Vec<&str> = report.suites.iter().flat_map(|s| &s.scenarios).map(|s| s.id.as_str()).collect();
    assert!(!ids.is_empty() && ids.iter().all(|id| id.ends_with("@kubernetes")), "{ids:?}");
    assert!(!report.failed());
}

#[tokio::test]
async fn without_orchestrators_there_is_no_instance_and_no_matrix() {
    let report = focused_run(Vec::new(), Vec::<Orchestrator>::new(), "^lifecycle\\.mount\\.read-write$").await;
    let ids: Vec<&str> = report.suites.iter().flat_map(|s| &s.scenarios).map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["lifecycle.mount.read-write"]);
    assert!(report.orchestrators.is_empty());
    let json = report::to_json(&report);
    assert!(!json.contains("\"orchestrators\"") && !json.contains("\"behaviour\"") && !json.contains("\"exercised\""));
}

/// `--orchestrator-only`: a lifecycle scenario runs only as its instances, for the matrix
/// alone; a scenario without instances runs as loaded; the flag without `--orchestrator` is
/// a usage error.
#[tokio::test]
async fn orchestrator_only_drops_the_scenarios_its_instances_copy() {
    let plugin = TestPlugin::start(Config::default()).await;
    let engine = engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    let run = |only: bool| RunConfig {
        seed: 7,
        work_dir: work.path().join("work"),
        focus: vec![Regex::new("^lifecycle\\.mount\\.read-write(@.*)?$").unwrap(), Regex::new("^identity\\.probe$").unwrap()],
        orchestrators: vec![Orchestrator::Nomad.into(), Orchestrator::Swarm.into()],
        orchestrator_only: only,
        ..RunConfig::default()
    };
    let ids = |report: &RunReport| -> Vec<String> {
        let mut ids: Vec<String> = report.suites.iter().flat_map(|s| &s.scenarios).map(|s| s.id.clone()).collect();
        ids.sort();
        ids
    };
    let both = suite::run(&engine, &suite::builtin(), &run(false)).await;
    assert_eq!(
        ids(&both),
        ["identity.probe", "lifecycle.mount.read-write", "lifecycle.mount.read-write@nomad", "lifecycle.mount.read-write@swarm"]
    );
    let only = suite::run(&engine, &suite::builtin(), &run(true)).await;
    assert_eq!(ids(&only), ["identity.probe", "lifecycle.mount.read-write@nomad", "lifecycle.mount.read-write@swarm"]);
    // The matrix is the same without the scenarios as loaded.
    assert_eq!(cells(&only), cells(&both));
    assert!(!cells(&only).is_empty());

    let cwd = tempfile::tempdir().unwrap();
    let out = csi_conform(&["run", "--endpoint", "/nonexistent.sock", "--orchestrator-only"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--orchestrator-only needs --orchestrator"), "{err}");
}

/// ember-csi's `created-mount-flags-only`: ValidateVolumeCapabilities declines mount flags
/// other than the volume's creation flags, and ControllerPublishVolume then refuses them. The
/// base scenarios warn (a volume need not support capabilities it was not created with); so
/// does each orchestrator's copy, whether or not that orchestrator sends
/// ValidateVolumeCapabilities, under the row the refused flags come from, and no cell fails.
#[tokio::test]
async fn mount_flags_declined_then_refused_warn_under_every_orchestrator() {
    let report = matrix_run(vec![Quirk::CreatedMountFlagsOnly], Orchestrator::ALL.to_vec()).await;
    let found = worse_than_pass(&report);
    assert!(!report.failed() && found.iter().all(|(_, _, s)| *s == Severity::Warn), "{found:#?}");
    let instances: Vec<_> =
        report.suites.iter().flat_map(|s| &s.scenarios).filter(|s| s.id.contains("mount-flags@")).collect();
    assert!(instances.len() >= 9, "{:?}", instances.iter().map(|s| &s.id).collect::<Vec<_>>());
    for s in &instances {
        assert!(s.outcome <= Severity::Warn, "{}: {:#?}", s.id, s.findings);
    }
    let cells = cells(&report);
    for o in ["nomad", "kubernetes"] {
        // A claim's mount_options (Nomad), a PersistentVolume's mountOptions (Kubernetes).
        let key = (o.to_owned(), "fields.mount-options".to_owned());
        assert_eq!(cells.get(&key), Some(&Severity::Warn), "{o}: {:#?}", report.orchestrators);
        assert_eq!(cells.get(&(o.to_owned(), "fields.readonly".to_owned())), Some(&Severity::Pass), "{o}");
    }
    // Each orchestrator's warning on the refused flags says so, not Swarm's block-volume
    // deviation (the default plugin's other Swarm warning, on block volumes, keeps that).
    for o in &report.orchestrators {
        let flags: Vec<_> = o
            .behaviours
            .iter()
            .flat_map(|b| &b.findings)
            .filter(|f| f.plugin_message.as_deref().is_some_and(|m| m.contains("mount_flags")))
            .collect();
        assert!(!flags.is_empty(), "{}: {:#?}", o.name, o.behaviours);
        for f in flags {
            assert_eq!(f.severity, Severity::Warn, "{}", f.message);
            assert!(
                f.message.contains("mount_flags")
                    && f.message.contains(&format!("will not work under {}", o.title))
                    && !f.message.contains("block volume"),
                "{}: {}",
                o.name,
                f.message
            );
        }
    }
}

/// `--orchestrator nomad@1.5`: the rows of that release. Before PR #17996 Nomad sent
/// overlapping ControllerPublishVolume calls for one node, so the EBS device-name race
/// (`attach-race`, nomad#8336) fails Nomad 1.5 and not current Nomad; the older staging path
/// (no namespace) and the kubelet's before 1.24 (`pv/<pv name>`) are followed, and the
/// default plugin passes them (its only warning is current Nomad's, per-use staging).
#[tokio::test]
async fn a_pinned_release_is_judged_by_the_rows_of_that_release() {
    let pin = |word: &str| Profile::parse(word).unwrap().remove(0);
    let old = vec![pin("nomad@1.5"), pin("kubernetes@1.23")];
    let report = matrix_run(Vec::new(), old).await;
    let names: Vec<&str> = report.orchestrators.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["nomad@1.5", "kubernetes@1.23"]);
    let warned = [("nomad@1.5".to_owned(), "paths.staging-per-usage".to_owned(), Severity::Warn)];
    assert_eq!(worse_than_pass(&report), warned, "{:#?}", report.orchestrators);
    for o in &report.orchestrators {
        assert!(o.release.is_some() && o.title.ends_with(o.release.as_deref().unwrap()), "{o:#?}");
        let staging = o.behaviours.iter().find(|b| b.id == "paths.staging").unwrap();
        assert_eq!(staging.outcome, Severity::Pass, "{staging:#?}");
        assert!(staging.holds_for.starts_with("before ") && !staging.summary.contains("<namespace>"), "{staging:#?}");
        let ids: Vec<&str> = report.suites.iter().flat_map(|s| &s.scenarios).map(|s| s.id.as_str()).collect();
        assert!(ids.iter().any(|id| id.ends_with(&format!("@{}", o.name))), "{ids:?}");
    }
    let xml = report::to_junit_xml(&report);
    crate::support::junit_schema::check(&xml).unwrap_or_else(|e| panic!("junit-10.xsd refuses it: {e}"));
    assert!(xml.contains("<testsuite name=\"orchestrator:nomad@1.5\""), "{xml}");

    let report = matrix_run(vec![Quirk::AttachRace], vec![pin("nomad"), pin("nomad@1.5")]).await;
    let failed: Vec<_> = worse_than_pass(&report).into_iter().filter(|(_, _, s)| *s == Severity::Fail).collect();
    assert_eq!(failed, [("nomad@1.5".to_owned(), "concurrency.controller".to_owned(), Severity::Fail)], "{:#?}", report.orchestrators);
    let cell = report.orchestrators[1].behaviours.iter().find(|b| b.id == "concurrency.controller").unwrap();
    assert!(cell.summary.contains("overlapping") || cell.summary.contains("overlap"), "{cell:#?}");
}

/// `staging-path-unused` (cfgd-csi): NodeStageVolume makes and mounts nothing at the staging
/// path and NodePublishVolume mounts from the volume. The spec lets a plugin stage that way,
/// and under Swarm, which makes no staging directory, the path is simply never there: no
/// cell fails or warns beyond the default plugin's, and the base scenarios pass.
#[tokio::test]
async fn a_plugin_that_stages_without_using_the_path_fails_no_orchestrator() {
    let default = cells(&matrix_run(Vec::new(), Orchestrator::ALL.to_vec()).await);
    let report = matrix_run(vec![Quirk::StagingPathUnused], Orchestrator::ALL.to_vec()).await;
    assert_eq!(cells(&report), default, "{:#?}", report.orchestrators);
    assert!(!report.failed(), "{:#?}", report.orchestrators);
    let swarm = &report.orchestrators[2];
    let staging = swarm.behaviours.iter().find(|b| b.id == "paths.staging").unwrap();
    assert_eq!(staging.outcome, Severity::Pass, "{staging:#?}");
}

/// A plugin that drops mount flags and one that mounts read-only publications read-write: under
/// every orchestrator the cell that fails is the row documenting the field at fault
/// (`fields.mount-options`, Swarm's `fields.capability` which carries them; `fields.readonly`),
/// never the path rows (`paths.publish-mount` / `paths.publish-block`) the publish exercised.
#[tokio::test]
async fn mount_flag_and_read_only_defects_fail_their_own_rows_not_the_path_rows() {
    for (quirk, rows) in [
        (Quirk::IgnoreMountFlags, &["fields.mount-options", "fields.capability"][..]),
        (Quirk::IgnoreReadonly, &["fields.readonly"][..]),
    ] {
        let report = focused_run(vec![quirk], Orchestrator::ALL.to_vec(), r"^lifecycle\.(mount|block)\..*@").await;
        let cells = cells(&report);
        for ((o, b), s) in &cells {
            if b.starts_with("paths.publish-") {
                assert!(*s <= Severity::Pass || *s == Severity::Skip, "{quirk}: {o} {b} is {s}: {:#?}", report.orchestrators);
            }
        }
        let failed: Vec<&(String, String)> = cells.iter().filter(|(_, s)| **s == Severity::Fail).map(|(k, _)| k).collect();
        assert!(!failed.is_empty(), "{quirk}: the defect is caught in the matrix: {cells:#?}");
        for (o, b) in failed {
            assert!(rows.contains(&b.as_str()), "{quirk}: {o} fails {b}: {:#?}", report.orchestrators);
        }
    }
}
