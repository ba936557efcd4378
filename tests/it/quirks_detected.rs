//! Every quirk of the reference plugin is caught by a default run of the built-in suites: the
//! expected finding (kind and severity) on the expected scenarios and no other warning,
//! failure or error; `--strict` turns the tolerated warnings into failures; the JUnit report
//! flags incomplete and unconfirmed confirmations; a property failure shrinks to the minimal
//! capability set and replays from its seed (in the library and through the command line);
//! capability honesty holds both ways; and the built-in requests never send an empty message
//! where the spec means unset.

use std::collections::BTreeMap;

use csi_conform::{
    config::BoundsOverride,
    proto,
    reference::{Config, Mode, Quirk},
    report::{self, RunReport, Severity},
    secrets::{SecretKey, Secrets},
    suite::{self, Action, RunConfig, Suite},
    yaml::{Node, NodeKind},
};
use prost_reflect::{Kind, MessageDescriptor};
use regex::Regex;

use crate::{
    report::{case, parse_junit},
    support::{TestPlugin, engine_plugin, fake_plugin},
};

/// The scenarios that reconcile a ValidateVolumeCapabilities answer with `vvc-reconcile`.
const VVC: [&str; 4] =
    ["controller.validate", "extras.validate.confirms-request", "extras.validate.mount-flags", "extras.validate.mount-group"];
/// The lifecycle scenarios of a one-node run: each validates the capability it publishes with.
const LIFECYCLE: [&str; 11] = [
    "lifecycle.block.read-only",
    "lifecycle.block.read-write",
    "lifecycle.mount.read-only",
    "lifecycle.mount.read-only.mount-flags",
    "lifecycle.mount.read-write",
    "lifecycle.mount.read-write.mount-flags",
    "lifecycle.mount.request-mount-flags-replace-the-volumes",
    "lifecycle.mount.volume-mount-flags",
    "lifecycle.no-secrets",
    "lifecycle.single-node-single-writer.second-target-refused",
    "requirements.node.long-paths",
];
/// The lifecycle scenarios whose capability carries mount flags.
const LIFECYCLE_FLAGS: [&str; 4] = [
    "lifecycle.mount.read-only.mount-flags",
    "lifecycle.mount.read-write.mount-flags",
    "lifecycle.mount.request-mount-flags-replace-the-volumes",
    "lifecycle.mount.volume-mount-flags",
];
/// The data scenarios that unpublish and unstage a volume before verifying its marker.
const DATA_AFTER_UNSTAGE: [&str; 6] = [
    "data.block.expand.offline",
    "data.block.read-only",
    "data.block.republish",
    "data.mount.expand.offline",
    "data.mount.read-only",
    "data.mount.republish",
];
/// The property scenarios that fail when a confirmation or a creation goes wrong.
const PROPERTIES: [&str; 2] = ["properties.validate-never-fails", "properties.create-then-validate"];

/// Beside [`LIFECYCLE`] (whose NodeGetVolumeStats answers carry it), the scenarios of a
/// default run whose answers carry volume_condition under `mixed-versions` (ListVolumes,
/// ControllerGetVolume, NodeGetVolumeStats) for a volume they hold. `controller.list-volumes`
/// holds none: the volumes its listing shows are other scenarios', there or not by timing, so
/// they reach the report's evidence but warn no scenario (it did, now and then, under load).
const MIXED_VERSIONS: [&str; 8] = [
    "controller.list-volumes.create-delete",
    "controller.list-volumes.pagination",
    "extras.controller-get-volume",
    "extras.controller-get-volume.published-nodes",
    "extras.list-volumes.published-nodes",
    "node.lifecycle",
    "node.lifecycle.idempotent",
    "requirements.unpublish.all-nodes",
];

/// The secrets of the runs with a secrets file: values that must never appear in any output.
const SECRET_VALUES: [&str; 3] = ["create-s3cr3t", "delete-s3cr3t", "stage-s3cr3t"];

fn secrets_file() -> BTreeMap<String, BTreeMap<String, String>> {
    BTreeMap::from([
        ("CreateVolumeSecret".to_owned(), BTreeMap::from([("password".to_owned(), SECRET_VALUES[0].to_owned())])),
        ("DeleteVolumeSecret".to_owned(), BTreeMap::from([("password".to_owned(), SECRET_VALUES[1].to_owned())])),
        ("NodeStageVolumeSecret".to_owned(), BTreeMap::from([("token".to_owned(), SECRET_VALUES[2].to_owned())])),
    ])
}

/// The same secrets as the reference plugin's `--require-secrets`.
fn required_secrets() -> Secrets {
    let keys = [SecretKey::CreateVolume, SecretKey::DeleteVolume, SecretKey::NodeStageVolume];
    let file = secrets_file();
    Secrets::from_maps(keys.into_iter().map(|k| (k, file[k.as_str()].clone())))
}

/// What a default run of the built-in suites must find with `quirk` (none: the compliant
/// plugin): scenario id, finding kind, severity.
fn expected(quirk: Option<Quirk>) -> Vec<(&'static str, &'static str, Severity)> {
    let on = |ids: &[&'static str], kind: &'static str, severity: Severity| {
        ids.iter().map(|id| (*id, kind, severity)).collect::<Vec<_>>()
    };
    let Some(quirk) = quirk else { return Vec::new() };
    match quirk {
        // The run's unknown ids are ones the plugin made and deleted: nothing to find.
        Quirk::StrictIds => Vec::new(),
        // The run makes every staging directory it hands a plugin, as the spec has the CO do;
        // only Swarm, which makes none, notices (tests/it/orchestrators.rs).
        Quirk::StagingDirNotMade => Vec::new(),
        // No base scenario stages a volume at two paths on one node; only Nomad does.
        Quirk::UnstageByVolume => Vec::new(),
        // The scenario about that rule, and one lying-witness finding for the run under the
        // first scenario whose delete needed the look-up: tests/it/witnesses.rs.
        Quirk::GetVolumeOkWhenMissing => {
            on(&["extras.controller-get-volume.not-found"], "unexpected-code", Severity::Fail)
        }
        // ABORTED for a token the volume list moved under is the spec's "Invalid
        // starting_token": the run restarts the listing, as a CO does (a control).
        Quirk::ListingTokenExpires => Vec::new(),
        // ABORTED for a call that meets another of the run's own on its volume is lawful
        // (#concurrency): asked again, never judged (tests/it/bounds.rs).
        Quirk::AbortsWhenBusy => Vec::new(),
        // A listing 300 ms behind is within --delete-grace: the listing scenario lists again
        // until it caught up, deletes believe the truthful look-up (tests/it/witnesses.rs).
        Quirk::ListingLags => Vec::new(),
        // A mount the table lists and the path does not lead to is inconclusive, no verdict:
        // tests/it/mount_witnesses.rs (in the plugin's own mount namespace).
        Quirk::HidesTargetMount => Vec::new(),
        // Overstated room shows only where a volume does not fit the real room: a default
        // run's volumes do (tests/it/claims.rs fills the pool).
        Quirk::CapacityOverstated => Vec::new(),
        Quirk::Unconfirmed => on(&[&VVC[..], &LIFECYCLE[..]].concat(), "unconfirmed", Severity::Warn),
        Quirk::UnconfirmedSilent => on(&[&VVC[..], &LIFECYCLE[..]].concat(), "unconfirmed-silent", Severity::Warn),
        Quirk::IncompleteConfirmation => on(&["extras.validate.confirms-request"], "incomplete-confirmation", Severity::Warn),
        Quirk::Overconfirm => {
            on(&[&VVC[..], &PROPERTIES[..], &LIFECYCLE[..]].concat(), "mismatched-confirmation", Severity::Fail)
        }
        Quirk::DropMountFlags => on(
            &[&["extras.validate.mount-flags", "extras.validate.mount-group"][..], &PROPERTIES[..], &LIFECYCLE_FLAGS[..]]
                .concat(),
            "dropped-field",
            Severity::Fail,
        ),
        Quirk::AdvertisePublishUnimplemented => {
            on(&["capabilities.publish-unpublish-volume"], "advertised-not-implemented", Severity::Fail)
        }
        // INVALID_ARGUMENT for a set-but-empty content source is the error scheme's code for
        // an invalid field ("One of the type fields MUST be specified"): lawful, nothing found.
        Quirk::EmptySourceRejected => Vec::new(),
        // The spec has the CO pass volume_context "when present" (#createvolume): a plugin may
        // rely on it, so needing it is a note (require_volume_context_is_a_note_on_the_context_free_node_calls_only).
        Quirk::RequireVolumeContext => Vec::new(),
        // Within the spec ("Secrets MAY be required by plugin to complete a RPC request",
        // #secrets-requirements): a note on the scenario that sends none, no verdict.
        Quirk::IgnoreSecrets => Vec::new(),
        Quirk::InternalOnOddCaps => on(&PROPERTIES, "unexpected-code", Severity::Fail),
        Quirk::AllowSecondWriter => on(
            &["lifecycle.single-node-single-writer.second-target-refused", "node.publish.single-writer-second-target"],
            "unexpected-code",
            Severity::Fail,
        ),
        Quirk::IgnoreMountFlags => on(
            &[
                "lifecycle.mount.read-only.mount-flags",
                "lifecycle.mount.read-write.mount-flags",
                "lifecycle.mount.request-mount-flags-replace-the-volumes",
                "lifecycle.mount.volume-mount-flags",
            ],
            "mount-flags",
            Severity::Fail,
        ),
        Quirk::IgnoreReadonly => on(
            &[
                "extras.publish.readonly",
                "lifecycle.block.read-only",
                "lifecycle.mount.read-only",
                "lifecycle.mount.read-only.mount-flags",
            ],
            "path-state",
            Severity::Fail,
        )
        .into_iter()
        // The data suite's read-only publications take a write, and say so by bytes.
        .chain(on(&["data.block.read-only", "data.mount.read-only"], "data-writable", Severity::Fail))
        .collect(),
        Quirk::UnstageIgnoresPath => on(&["node.unstage.no-staging-path"], "unexpected-code", Severity::Fail),
        Quirk::SnapshotEmpty => on(
            &["data.block.group-snapshot", "data.block.snapshot", "data.mount.group-snapshot", "data.mount.snapshot"],
            "snapshot-content",
            Severity::Fail,
        ),
        Quirk::RestoreHeadOnly => on(&["data.block.group-snapshot", "data.block.snapshot"], "snapshot-content", Severity::Fail),
        Quirk::CloneSharesData => on(&["data.block.clone", "data.mount.clone"], "clone-shares-data", Severity::Fail),
        Quirk::ExpandNoGrow => {
            on(&["data.block.expand.offline", "data.block.expand.online"], "volume-size", Severity::Fail)
        }
        Quirk::LoseDataOnUnstage => on(&DATA_AFTER_UNSTAGE, "data-lost", Severity::Fail),
        // A plugin may refuse mount flags its volume was not created with, once it said so in
        // ValidateVolumeCapabilities: a warning, never a failure (ember-csi does this).
        Quirk::CreatedMountFlagsOnly => on(
            &[
                "extras.validate.mount-flags",
                "lifecycle.mount.read-only.mount-flags",
                "lifecycle.mount.read-write.mount-flags",
                "lifecycle.mount.request-mount-flags-replace-the-volumes",
            ],
            "unconfirmed",
            Severity::Warn,
        ),
        Quirk::SameNameAnyCapability => {
            on(&["extras.create-volume.same-name-other-capabilities"], "incompatible-volume", Severity::Fail)
        }
        // A confirmation the node disproves is ValidateVolumeCapabilities' failure, once
        // (tests/it/claims.rs).
        Quirk::ConfirmEverything => {
            on(&["extras.validate.block-for-mount-volume"], "confirms-unsupported", Severity::Fail)
        }
        Quirk::DropsMountGroup => on(&["extras.publish.mount-group"], "mount-group", Severity::Fail),
        // The two health-entry quirks bend adverse entries only; their runs report a degraded
        // storage backend (`quirk_run`), so NodeGetStorageHealth has one to bend. The volume
        // side is in tests/it/v113.rs, with a degraded volume.
        Quirk::DuplicateHealthEntry => on(&["health.node.storage"], "duplicate-health-entry", Severity::Fail),
        Quirk::HealthMissingReason => on(&["health.node.storage"], "health-required", Severity::Fail),
        Quirk::ListHealthWithoutGet => on(&["health.controller.list.needs-get"], "capability-dependency", Severity::Fail),
        Quirk::SnapshotTopologyWithoutCapability => {
            on(&["snapshots.topology.unset-without-capability"], "assertion", Severity::Fail)
        }
        // A v1.13 plugin that still sets v1.12's volume_condition: a warning (never a failure)
        // wherever an answer shows it, once per scenario; tests/it/v113.rs has the details.
        Quirk::MixedVersions => on(&[&LIFECYCLE[..], &MIXED_VERSIONS[..]].concat(), "spec-version", Severity::Warn),
        // The answer quirks break a response rule wherever the lie is told: see answer_quirks.
        _ => crate::answer_quirks::CASES
            .iter()
            // A rule the spec leaves open only notes (answer.maps.value-within-128-bytes).
            .filter(|c| c.quirk == quirk && c.severity >= Severity::Warn)
            .map(|c| (c.scenario, "response-rule", c.severity))
            .collect(),
    }
}

/// Every warning, failure and error of a run, by scenario: (kind, severity).
fn problems(report: &RunReport) -> BTreeMap<String, Vec<(String, Severity)>> {
    report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .map(|s| {
            let found: Vec<(String, Severity)> =
                s.findings.iter().filter(|f| f.severity >= Severity::Warn).map(|f| (f.kind.clone(), f.severity)).collect();
            (s.id.clone(), found)
        })
        .filter(|(_, found)| !found.is_empty())
        .collect()
}

/// Asserts that the run found exactly `expected`: one finding per listed scenario, and
/// nothing at warning level or worse anywhere else. Listed scenarios the run left out (those
/// that need CAP_SYS_ADMIN, on a machine without it) are not expected.
fn assert_found_exactly(report: &RunReport, expected: &[(&str, &str, Severity)]) {
    let ran = |id: &str| report.suites.iter().flat_map(|s| &s.scenarios).any(|s| s.id == id);
    let want: BTreeMap<String, Vec<(String, Severity)>> = expected
        .iter()
        .filter(|(id, _, _)| ran(id))
        .map(|(id, kind, sev)| ((*id).to_owned(), vec![((*kind).to_owned(), *sev)]))
        .collect();
    let got = problems(report);
    let details: Vec<String> = report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .flat_map(|s| s.findings.iter().map(move |f| format!("{} {} {}: {}", s.id, f.severity, f.kind, f.message)))
        .collect();
    assert_eq!(got, want, "findings:\n{}", details.join("\n"));
}

/// The run configuration of these tests. Without CAP_SYS_ADMIN the reference plugin cannot
/// mount, so the scenarios that inspect the mount table are left out, and said so.
fn run_config(work: &tempfile::TempDir) -> RunConfig {
    let mut config = RunConfig { seed: 7, work_dir: work.path().join("work"), ..RunConfig::default() };
    if !csi_conform::mounts::has_cap_sys_admin() {
        let inspecting: Vec<String> = suite::builtin()
            .iter()
            .flat_map(|s| s.scenarios())
            .filter(|c| c.steps().iter().any(|st| matches!(&st.action, Action::Check(k) if k.check.name == "path-state")))
            .map(|c| format!("^{}$", regex::escape(c.id())))
            .collect();
        crate::support::skip(
            "quirks_detected (the scenarios that inspect the mount table)",
            crate::support::Precondition::CapSysAdmin,
            &format!("{} scenarios left out: the reference plugin mounts", inspecting.len()),
        );
        config.skip = inspecting.iter().map(|p| Regex::new(p).unwrap()).collect();
    }
    config
}

/// A default run of the built-in suites against a reference plugin with `quirk`; with
/// `secrets`, the plugin requires the secrets and the run has the secrets file.
async fn quirk_run(quirk: Option<Quirk>, secrets: bool, tune: impl FnOnce(&mut RunConfig)) -> RunReport {
    // The health-entry quirks bend adverse entries: give them a degraded backend to report.
    let bends_health = matches!(quirk, Some(Quirk::DuplicateHealthEntry | Quirk::HealthMissingReason));
    let plugin = TestPlugin::start(Config {
        quirks: quirk.into_iter().collect(),
        secrets: secrets.then(required_secrets),
        storage_health: if bends_health {
            vec![(proto::v1::StorageHealthErrorType::StorageDegraded, "PoolNearlyFull".to_owned())]
        } else {
            Vec::new()
        },
        ..Config::default()
    })
    .await;
    let engine = engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    let mut config = run_config(&work);
    if secrets {
        config.secrets = secrets_file();
    }
    tune(&mut config);
    suite::run(&engine, &suite::builtin(), &config).await
}

/// The finding a scenario has at warning level or worse (exactly one).
fn the_finding<'a>(report: &'a RunReport, id: &str) -> &'a report::Finding {
    let scenario = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id).expect(id);
    let found: Vec<_> = scenario.findings.iter().filter(|f| f.severity >= Severity::Warn).collect();
    assert_eq!(found.len(), 1, "{id}: {found:#?}");
    found[0]
}

async fn caught(quirk: Quirk) -> RunReport {
    let report = quirk_run(Some(quirk), quirk == Quirk::IgnoreSecrets, |_| {}).await;
    assert_found_exactly(&report, &expected(Some(quirk)));
    report
}

/// A plugin that refuses to unpublish or unstage at a path that is gone (either quirk) fails no scenario of a
/// default run: the second NodeUnpublishVolume and NodeUnstageVolume of
/// `extras.node-unpublish-unstage.twice` meet a path the first call removed, but no record
/// left either, and the OK they owe stands. Only the disruption suite's node reboot, which
/// takes the paths away while the record stays, catches it (tests/it/stress.rs).
#[tokio::test]
async fn a_plugin_that_needs_the_path_to_unpublish_or_unstage_fails_no_default_scenario() {
    for quirk in [Quirk::UnpublishNeedsPath, Quirk::UnstageUnmountsBlindly] {
        let report = caught(quirk).await;
        assert!(!report.failed(), "{quirk}");
        assert_eq!(report.scenario("extras.node-unpublish-unstage.twice").map(|s| s.outcome), Some(Severity::Pass), "{quirk}");
    }
}

/// A plugin that counts on the CO to make the staging directory passes every base scenario:
/// each staging path the run hands out exists, also when a scenario stages again after an
/// unstage that removed it. So does one that releases a volume as a whole on the first
/// unstage: only Nomad stages a volume twice on a node.
#[tokio::test]
async fn orchestrator_quirks_of_staging_fail_no_base_scenario() {
    for quirk in [Quirk::StagingDirNotMade, Quirk::UnstageByVolume] {
        let report = caught(quirk).await;
        assert!(!report.failed(), "{quirk}");
    }
}

/// A plugin with formatted ids answers INVALID_ARGUMENT to a malformed one: the default run
/// sends the ids of objects it created and deleted, so no NOT_FOUND scenario fails for our
/// id; with made-up ids set by hand (as every id was before) they do, which shows the
/// quirk bites and that the defaults are what keeps the run clean.
#[tokio::test]
async fn strict_ids_fail_nothing_with_the_runs_own_deleted_ids() {
    let report = caught(Quirk::StrictIds).await;
    assert!(!report.failed());
    let made_up = quirk_run(Some(Quirk::StrictIds), false, |c| {
        c.nonexistent_volume_id = Some("made-up-volume".into());
        c.nonexistent_snapshot_id = Some("made-up-snapshot".into());
    })
    .await;
    let failed: Vec<&str> = made_up
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .filter(|s| s.outcome == Severity::Fail)
        .map(|s| s.id.as_str())
        .collect();
    for id in ["controller.validate.not-found", "controller.publish.volume-not-found", "controller.create-volume.volume-not-found"] {
        let ran = made_up.suites.iter().flat_map(|s| &s.scenarios).any(|s| s.id == id);
        assert!(!ran || failed.contains(&id), "{id} should fail on a malformed id; failed: {failed:?}");
    }
    assert!(failed.len() >= 5, "{failed:?}");
}

#[tokio::test]
async fn unconfirmed_warns_on_every_reconciled_answer_and_junit_shows_the_warning() {
    let report = caught(Quirk::Unconfirmed).await;
    let f = the_finding(&report, "controller.validate");
    assert!(f.message.contains("all requested volume capabilities look fine"), "the plugin's message: {}", f.message);
    let junit = parse_junit(&report::to_junit_xml(&report));
    let warned = case(&junit, "controller.validate");
    assert!(warned.status.is_success(), "a warning is no JUnit failure");
    assert!(crate::report::case_prop(warned, "warning").is_some_and(|w| w.starts_with("unconfirmed: ")), "{:?}", warned.properties);
    assert!(!report.failed());
}

#[tokio::test]
async fn unconfirmed_silent_warns_on_every_reconciled_answer() {
    let report = caught(Quirk::UnconfirmedSilent).await;
    assert!(the_finding(&report, "extras.validate.mount-flags").message.contains("neither confirmed"));
}

#[tokio::test]
async fn incomplete_confirmation_warns_naming_the_missing_capability_and_junit_shows_it() {
    let report = caught(Quirk::IncompleteConfirmation).await;
    let f = the_finding(&report, "extras.validate.confirms-request");
    assert!(
        f.message.contains("1 of 2 requested capabilities confirmed; missing: SINGLE_NODE_READER_ONLY mount()"),
        "{}",
        f.message
    );
    let junit = parse_junit(&report::to_junit_xml(&report));
    let warned = case(&junit, "extras.validate.confirms-request");
    assert!(warned.status.is_success());
    let warning = crate::report::case_prop(warned, "warning").unwrap_or_default();
    assert!(warning.starts_with("incomplete-confirmation: "), "{warning}");
}

#[tokio::test]
async fn overconfirm_fails_naming_both_access_modes() {
    let report = caught(Quirk::Overconfirm).await;
    let f = the_finding(&report, "controller.validate");
    assert!(
        f.message.contains("requested access mode SINGLE_NODE_WRITER, confirmed MULTI_NODE_READER_ONLY"),
        "{}",
        f.message
    );
    assert!(report.failed());
}

#[tokio::test]
async fn drop_mount_flags_fails_without_showing_the_flags() {
    let report = caught(Quirk::DropMountFlags).await;
    let f = the_finding(&report, "extras.validate.mount-flags");
    assert!(f.message.contains("mount flags were requested (2 flag(s)) but the confirmation has none"), "{}", f.message);
    let json = report::to_json(&report);
    for flag in ["noatime", "nodev"] {
        assert!(!f.message.contains(flag) && !f.request.as_deref().unwrap_or_default().contains(flag));
        assert!(!json.contains(&format!("\"{flag}\"")), "{flag} appears in the JSON report");
    }
    let group = the_finding(&report, "extras.validate.mount-group");
    assert!(group.message.contains("requested volume_mount_group 1000, the confirmation drops it"), "{}", group.message);
}

#[tokio::test]
async fn advertise_publish_unimplemented_fails_once_naming_the_capability() {
    let report = caught(Quirk::AdvertisePublishUnimplemented).await;
    let f = the_finding(&report, "capabilities.publish-unpublish-volume");
    assert!(f.message.contains("controller:PUBLISH_UNPUBLISH_VOLUME"), "{}", f.message);
    // The flows that need ControllerPublishVolume skip, saying why, instead of failing too.
    let lifecycle = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == "node.lifecycle").unwrap();
    assert_eq!(lifecycle.outcome, Severity::Skip);
    let why = lifecycle.skip_reason.as_deref().unwrap_or_default();
    assert!(why.contains("answered UNIMPLEMENTED although the plugin advertises controller:PUBLISH_UNPUBLISH_VOLUME"), "{why}");
}

#[tokio::test]
async fn empty_source_rejected_is_lawful_and_passes() {
    let report = caught(Quirk::EmptySourceRejected).await;
    let s = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == "extras.create-volume.content-source-empty");
    assert_eq!(s.map(|s| s.outcome), Some(Severity::Pass), "{s:#?}");
}

#[tokio::test]
async fn require_volume_context_is_a_note_on_the_context_free_node_calls_only() {
    let report = caught(Quirk::RequireVolumeContext).await;
    let s = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == "extras.node.stage-without-volume-context").unwrap();
    assert_eq!(s.outcome, Severity::Pass, "{s:#?}");
    let note = s.findings.iter().find(|f| f.kind == report::NOTE_KIND).expect("a note");
    assert_eq!(note.got.as_deref(), Some("FAILED_PRECONDITION"));
}

#[tokio::test]
async fn ignore_secrets_is_a_note_and_no_secret_reaches_any_output() {
    let report = caught(Quirk::IgnoreSecrets).await;
    let s = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == "extras.secrets.create-volume-without-secrets").unwrap();
    assert_eq!(s.outcome, Severity::Pass, "{s:#?}");
    let notes: Vec<_> = s.findings.iter().filter(|f| f.kind == report::NOTE_KIND).collect();
    assert_eq!(notes.len(), 1, "{s:#?}");
    let f = notes[0];
    assert!(f.message.contains("Secrets MAY be required"), "the spec's words: {}", f.message);
    assert!(f.message.contains("CreateVolumeSecret"), "{}", f.message);
    // What the plugin answered instead of refusing, so the vendor sees the volume it made.
    assert!(f.message.contains("; it returned volume.capacity_bytes="), "{}", f.message);
    assert!(f.message.contains(", volume.volume_id='"), "{}", f.message);
    let outputs = [
        report::to_json(&report),
        report::to_junit_xml(&report),
        report::html::to_html(&report),
        report.suites.iter().flat_map(|s| &s.scenarios).map(|s| report::scenario_line(s, false)).collect(),
        report::summary(&report, false),
    ];
    for out in outputs {
        for secret in SECRET_VALUES {
            assert!(!out.contains(secret), "a secret value in the output");
        }
    }
}

#[tokio::test]
async fn internal_on_odd_caps_fails_the_properties_with_the_minimal_case() {
    let report = caught(Quirk::InternalOnOddCaps).await;
    for id in PROPERTIES {
        let f = the_finding(&report, id);
        assert!(f.message.contains("minimal case [MULTI_NODE_MULTI_WRITER block]"), "{id}: {}", f.message);
        assert_eq!(f.got.as_deref(), Some("INTERNAL"));
    }
}

#[tokio::test]
async fn allow_second_writer_fails_the_single_writer_scenarios() {
    let report = caught(Quirk::AllowSecondWriter).await;
    let f = the_finding(&report, "node.publish.single-writer-second-target");
    assert_eq!(f.got.as_deref(), Some("OK"));
    assert!(f.message.ends_with("expected FAILED_PRECONDITION; it returned an empty message"), "{}", f.message);
}

#[tokio::test]
async fn unstage_ignores_path_fails_the_unstage_without_a_staging_path() {
    let report = caught(Quirk::UnstageIgnoresPath).await;
    let f = the_finding(&report, "node.unstage.no-staging-path");
    assert_eq!((f.got.as_deref(), f.expected.as_deref()), (Some("OK"), Some("INVALID_ARGUMENT")));
}

#[tokio::test]
async fn ignore_mount_flags_fails_every_lifecycle_that_asks_for_flags() {
    if !crate::support::can_mount("ignore_mount_flags_fails_every_lifecycle_that_asks_for_flags", "the mount table shows the flags") {
        return;
    }
    let report = caught(Quirk::IgnoreMountFlags).await;
    let f = the_finding(&report, "lifecycle.mount.read-write.mount-flags");
    // The scenario asks for nosuid and nodev: the finding names both as missing.
    let m = &f.message;
    assert!(m.contains("lacks the mount options") && m.contains("nosuid") && m.contains("nodev"), "{m}");
}

/// A default run against a data quirk, when the reference plugin can mount (the data
/// scenarios skip otherwise, and say so).
async fn data_caught(quirk: Quirk, test: &str) -> Option<RunReport> {
    if !crate::support::can_mount(test, "the reference plugin mounts, or no data is written") {
        return None;
    }
    Some(caught(quirk).await)
}

#[tokio::test]
async fn snapshot_empty_fails_the_restores_naming_the_blank_volume() {
    let Some(report) = data_caught(Quirk::SnapshotEmpty, "snapshot_empty_fails_the_restores_naming_the_blank_volume").await
    else {
        return;
    };
    let block = &the_finding(&report, "data.block.snapshot").message;
    assert!(block.contains("restored from snapshot") && block.contains("byte 0 is blank"), "{block}");
    let mount = &the_finding(&report, "data.mount.snapshot").message;
    assert!(mount.contains("marker A is missing"), "{mount}");
}

/// The marker's second copy, in a block volume's last 4 KiB, is read back too: a restore that
/// loses the tail of the data fails although byte 0 is intact.
#[tokio::test]
async fn restore_head_only_fails_the_block_restores_naming_the_blank_tail() {
    let Some(report) = data_caught(Quirk::RestoreHeadOnly, "restore_head_only_fails_the_block_restores_naming_the_blank_tail").await
    else {
        return;
    };
    for id in ["data.block.snapshot", "data.block.group-snapshot"] {
        let m = &the_finding(&report, id).message;
        assert!(m.contains("(the last 4 KiB) is blank") && !m.contains("byte 0 "), "{m}");
    }
}

#[tokio::test]
async fn clone_shares_data_fails_the_clones_naming_the_overwritten_source() {
    let Some(report) =
        data_caught(Quirk::CloneSharesData, "clone_shares_data_fails_the_clones_naming_the_overwritten_source").await
    else {
        return;
    };
    for id in ["data.block.clone", "data.mount.clone"] {
        let m = &the_finding(&report, id).message;
        assert!(m.contains("a write into clone") && m.contains("holds marker B instead of marker A"), "{m}");
    }
}

#[tokio::test]
async fn expand_no_grow_fails_the_block_expansions_with_both_sizes() {
    let Some(report) = data_caught(Quirk::ExpandNoGrow, "expand_no_grow_fails_the_block_expansions_with_both_sizes").await
    else {
        return;
    };
    let m = &the_finding(&report, "data.block.expand.online").message;
    // Data checks create the smallest volume the plugin serves (1 MiB here) and grow it to
    // twice that.
    let (old, new) = (1u64 << 20, 2u64 << 20);
    assert!(m.contains("the block volume at") && m.contains(&format!("is {old} bytes, less than the {new} bytes it was expanded to")), "{m}");
}

#[tokio::test]
async fn lose_data_on_unstage_fails_every_scenario_that_unstages_before_reading() {
    let Some(report) =
        data_caught(Quirk::LoseDataOnUnstage, "lose_data_on_unstage_fails_every_scenario_that_unstages_before_reading")
            .await
    else {
        return;
    };
    let m = &the_finding(&report, "data.mount.republish").message;
    assert!(m.contains("NodeUnstageVolume") && m.contains("marker A is missing"), "{m}");
}

#[tokio::test]
async fn ignore_readonly_fails_every_read_only_publication() {
    if !crate::support::can_mount("ignore_readonly_fails_every_read_only_publication", "the mount table shows read-only") {
        return;
    }
    let report = caught(Quirk::IgnoreReadonly).await;
    let f = the_finding(&report, "lifecycle.mount.read-only");
    assert!(f.message.contains("mounted read-write"), "{}", f.message);
}

#[tokio::test]
async fn created_mount_flags_only_warns_and_the_refused_publish_is_no_failure() {
    let report = caught(Quirk::CreatedMountFlagsOnly).await;
    let scenario = report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .find(|s| s.id == "lifecycle.mount.read-write.mount-flags")
        .expect("the scenario ran");
    assert_eq!(scenario.outcome, Severity::Warn);
    let why = scenario.skip_reason.as_deref().unwrap_or_default();
    assert!(why.contains("ControllerPublishVolume refused it (INVALID_ARGUMENT"), "{why}");
    let same_flags = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == "lifecycle.mount.volume-mount-flags");
    assert_eq!(same_flags.map(|s| s.outcome), Some(Severity::Pass), "the flags the volume was created with still publish");
}

/// ember-csi's idempotency: OK with the mount volume to a block request. The plugin's own
/// node refuses block access for it (and accepts mount access), so it is incompatible and
/// the OK is a failure that says so.
#[tokio::test]
async fn same_name_any_capability_fails_when_the_plugin_itself_declines_the_new_capability() {
    let report = caught(Quirk::SameNameAnyCapability).await;
    let f = the_finding(&report, "extras.create-volume.same-name-other-capabilities");
    assert!(f.message.contains("the plugin's node refuses block access for that volume"), "{}", f.message);
    assert_eq!((f.expected.as_deref(), f.got.as_deref()), (Some("ALREADY_EXISTS"), Some("OK")));
}

/// The same OK from a plugin that never confirms anything: the node's refusal decides, and
/// what ValidateVolumeCapabilities withholds does not matter.
#[tokio::test]
async fn same_name_any_capability_fails_by_the_node_when_the_plugin_never_confirms() {
    let plugin = TestPlugin::start(Config {
        quirks: [Quirk::SameNameAnyCapability, Quirk::Unconfirmed].into(),
        ..Config::default()
    })
    .await;
    let engine = engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    let mut config = run_config(&work);
    config.focus = vec![Regex::new(r"^extras\.create-volume\.same-name-other-capabilities$").unwrap()];
    let report = suite::run(&engine, &suite::builtin(), &config).await;
    let f = the_finding(&report, "extras.create-volume.same-name-other-capabilities");
    assert_eq!((f.kind.as_str(), f.severity), ("incompatible-volume", Severity::Fail), "{f:#?}");
    assert!(f.message.contains("the plugin's node refuses block access"), "{}", f.message);
}

/// The same-name scenario alone against the test fake with `options`.
async fn same_name_run(options: fake_plugin::FakeOptions) -> (fake_plugin::FakePlugin, RunReport) {
    let fake = fake_plugin::FakePlugin::start(options).await;
    let engine = fake.engine_plugin(csi_conform::client::ClientOptions::default()).await;
    let work = tempfile::tempdir().unwrap();
    let mut config = run_config(&work);
    config.focus = vec![Regex::new(r"^extras\.create-volume\.same-name-other-capabilities$").unwrap()];
    let report = suite::run(&engine, &suite::builtin(), &config).await;
    (fake, report)
}

/// A plugin whose volumes serve every capability (the fake: its idempotency compares the
/// size, and it confirms whatever is asked) may answer OK: the spec owes ALREADY_EXISTS only
/// for an incompatible volume, so the scenario passes.
#[tokio::test]
async fn a_same_name_ok_passes_for_a_volume_confirmed_for_the_new_capability() {
    let (fake, report) = same_name_run(fake_plugin::FakeOptions::default()).await;
    let scenario = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == "extras.create-volume.same-name-other-capabilities");
    let scenario = scenario.expect("the scenario ran");
    assert_eq!(scenario.outcome, Severity::Pass, "{:#?}", scenario.findings);
    assert!(fake.volume_ids().is_empty(), "its volume is torn down: {:?}", fake.volume_ids());
}

/// INVALID_ARGUMENT to the conflict is a skip only when the plugin makes no volumes of that
/// access type at all; from a plugin that creates one under a fresh name it is the wrong
/// code for an incompatible existing volume, a failure.
#[tokio::test]
async fn a_same_name_invalid_argument_fails_when_a_fresh_name_creates_the_volume() {
    let options = fake_plugin::FakeOptions { conflict_invalid_argument: true, ..fake_plugin::FakeOptions::default() };
    let (fake, report) = same_name_run(options).await;
    let f = the_finding(&report, "extras.create-volume.same-name-other-capabilities");
    assert_eq!((f.severity, f.expected.as_deref(), f.got.as_deref()), (Severity::Fail, Some("ALREADY_EXISTS"), Some("INVALID_ARGUMENT")));
    assert!(f.message.contains("under a fresh name creates a volume"), "{}", f.message);
    assert!(f.plugin_message.as_deref().is_some_and(|m| m.ends_with("has another access type")), "{:?}", f.plugin_message);
    assert!(fake.volume_ids().is_empty(), "both volumes are torn down: {:?}", fake.volume_ids());
}

/// A plugin that makes no block volumes at all cannot show the conflict: the scenario skips,
/// saying why, and its mount volume is torn down.
#[tokio::test]
async fn a_same_name_conflict_skips_for_a_plugin_without_block_volumes() {
    let options = fake_plugin::FakeOptions { refuse_block: true, ..fake_plugin::FakeOptions::default() };
    let (fake, report) = same_name_run(options).await;
    let scenario = report.suites.iter().flat_map(|s| &s.scenarios).next().expect("the scenario ran");
    assert_eq!(scenario.outcome, Severity::Skip, "{:#?}", scenario.findings);
    let why = scenario.skip_reason.as_deref().unwrap_or_default();
    assert!(why.starts_with("the plugin does not create volumes for block access"), "{why}");
    assert!(fake.volume_ids().is_empty(), "{:?}", fake.volume_ids());
}

#[tokio::test]
async fn the_compliant_plugin_with_required_secrets_stays_clean() {
    let report = quirk_run(None, true, |_| {}).await;
    assert_found_exactly(&report, &expected(None));
    let scenario = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == "extras.secrets.create-volume-without-secrets");
    assert_eq!(scenario.map(|s| s.outcome), Some(Severity::Pass), "the plugin refuses CreateVolume without its secrets");
}

#[tokio::test]
async fn list_health_without_get_fails_the_capability_dependency_naming_it() {
    let report = caught(Quirk::ListHealthWithoutGet).await;
    let f = the_finding(&report, "health.controller.list.needs-get");
    assert!(f.message.contains("GET_VOLUME_HEALTH"), "{}", f.message);
}

#[tokio::test]
async fn snapshot_topology_without_the_capability_fails_once() {
    let report = caught(Quirk::SnapshotTopologyWithoutCapability).await;
    let f = the_finding(&report, "snapshots.topology.unset-without-capability");
    assert!(f.message.contains("accessible_topology"), "{}", f.message);
}

#[tokio::test]
async fn a_duplicate_storage_health_entry_fails_naming_the_repeated_reason() {
    let report = caught(Quirk::DuplicateHealthEntry).await;
    let f = the_finding(&report, "health.node.storage");
    assert!(f.message.contains("backend_health[1] repeats") && f.message.contains("PoolNearlyFull"), "{}", f.message);
}

#[tokio::test]
async fn a_storage_health_entry_without_a_reason_fails() {
    let report = caught(Quirk::HealthMissingReason).await;
    let f = the_finding(&report, "health.node.storage");
    assert!(f.message.contains("backend_health[0].reason is empty"), "{}", f.message);
}

#[tokio::test]
async fn mixed_versions_warn_where_volume_condition_shows_and_fail_nothing() {
    let report = caught(Quirk::MixedVersions).await;
    assert!(!report.failed());
    let spec = report.spec.as_ref().unwrap();
    assert!(spec.contradicted(), "{:#?}", spec.evidence);
}

#[test]
fn every_quirk_has_an_expectation() {
    // strict-ids is the one quirk a default run must not notice: NOT_FOUND scenarios send
    // well-formed ids (strict_ids_fail_nothing_with_the_runs_own_deleted_ids shows it bites).
    // The orchestrator quirks break only an orchestrator's call pattern: tests/it/orchestrators.rs;
    // staging-path-unused is a control there (within the spec, and under every orchestrator).
    // echo-secrets tests the harness, not a verdict: tests/it/canary.rs greps every output.
    let orchestrated: Vec<Quirk> = crate::orchestrators::QUIRKS.iter().map(|(q, ..)| *q).collect();
    // empty-source-rejected is lawful (INVALID_ARGUMENT for an invalid field): a control too.
    // long-context-value only earns a note (the spec limits a map, not each value): answer_quirks
    // shows the note.
    // require-volume-context only earns notes (the CO passes volume_context when present).
    // aborts-when-busy is lawful (#concurrency): tests/it/bounds.rs shows it bites and finds nothing.
    // listing-lags within --delete-grace is no verdict: tests/it/witnesses.rs.
    // ignore-secrets is within the spec (secrets MAY be required): a note, shown above.
    // capacity-overstated bites only where the room runs out: tests/it/claims.rs.
    // hides-target-mount makes the witnesses disagree (inconclusive): tests/it/mount_witnesses.rs.
    // slow-after-n and leak-fd-per-call break no rule of the spec: `bench` catches them (tests/it/bench.rs).
    let controls =
        [Quirk::StrictIds, Quirk::StagingPathUnused, Quirk::EmptySourceRejected, Quirk::LongContextValue, Quirk::RequireVolumeContext,
         Quirk::EchoSecrets, Quirk::ListingTokenExpires, Quirk::AbortsWhenBusy,
         Quirk::ListingLags, Quirk::HidesTargetMount, Quirk::IgnoreSecrets,
         Quirk::CapacityOverstated, Quirk::SlowAfterN, Quirk::LeakFdPerCall];
    // The race and lost-node quirks of issue 29 bite only the opt-in stress and disruption
    // suites: tests/it/stress.rs.
    let mut stress: Vec<Quirk> = crate::stress::QUIRKS.iter().map(|(q, ..)| *q).collect();
    stress.extend([Quirk::RestartLosesStaging, Quirk::RestartForgetsNames]);
    for quirk in Quirk::ALL.iter().copied().filter(|q| !controls.contains(q) && !orchestrated.contains(q) && !stress.contains(q)) {
        assert!(!expected(Some(quirk)).is_empty(), "{quirk} is not caught by any scenario");
    }
}

// ------------------------------------------------------------------------------------------
// --strict
// ------------------------------------------------------------------------------------------

/// The scenarios that judge confirmations, for the strict runs.
fn confirmations_only(config: &mut RunConfig) {
    config.strict = true;
    config.focus = vec![Regex::new(r"^(controller\.validate|extras\.validate\..*|properties\..*)$").unwrap()];
}

#[tokio::test]
async fn strict_turns_an_incomplete_confirmation_into_a_failure() {
    let report = quirk_run(Some(Quirk::IncompleteConfirmation), false, confirmations_only).await;
    // Under --strict an incomplete confirmation is a failure wherever a confirmation is
    // judged: the scenario, and the properties that must never reconcile to a failure.
    let failing = ["extras.validate.confirms-request", PROPERTIES[0], PROPERTIES[1]];
    assert_found_exactly(&report, &failing.map(|id| (id, "incomplete-confirmation", Severity::Fail)));
    assert!(report.failed());
    let junit = parse_junit(&report::to_junit_xml(&report));
    let failure = case(&junit, "extras.validate.confirms-request").status.failure_as_ref();
    assert_eq!(failure.failure_type, "incomplete-confirmation");
}

#[tokio::test]
async fn strict_makes_an_unconfirmed_answer_fail_the_run() {
    let report = quirk_run(Some(Quirk::Unconfirmed), false, confirmations_only).await;
    assert_found_exactly(&report, &VVC.map(|id| (id, "unconfirmed", Severity::Warn)));
    assert!(report.failed(), "a warning fails a strict run");
    let junit = parse_junit(&report::to_junit_xml(&report));
    for id in VVC {
        let failure = case(&junit, id).status.failure_as_ref();
        assert_eq!(failure.failure_type, "unconfirmed", "{id}");
    }
}

// ------------------------------------------------------------------------------------------
// Property failures: shrinking, seeds, replay
// ------------------------------------------------------------------------------------------

fn finding_of<'a>(report: &'a RunReport, id: &str) -> &'a str {
    the_finding(report, id).message.as_str()
}

#[tokio::test]
async fn a_property_failure_shrinks_to_the_minimal_case_and_replays_from_its_seed() {
    let plugin = TestPlugin::start(Config { quirks: [Quirk::InternalOnOddCaps].into(), ..Config::default() }).await;
    let engine = engine_plugin(&plugin).await;
    let suites = suite::builtin();
    let work = tempfile::tempdir().unwrap();
    let run = |seed: u64, focus: &str, bounds: BoundsOverride| {
        let mut config = run_config(&work);
        config.seed = seed;
        config.focus = vec![Regex::new(focus).unwrap()];
        config.property_bounds = bounds.apply(&config.property_bounds);
        let (engine, suites) = (&engine, &suites);
        async move { suite::run(engine, suites, &config).await }
    };
    let id = "properties.create-then-validate";
    let first = run(11, r"^properties\.", BoundsOverride::default()).await;
    let message = finding_of(&first, id).to_owned();
    assert!(message.contains("minimal case [MULTI_NODE_MULTI_WRITER block]"), "{message}");
    assert!(message.contains("seed 11"), "{message}");
    assert!(message.contains(r"replay: csi-conform run --seed 11 --focus '^properties\.create-then-validate$'"), "{message}");

    // The replay it names: the same scenario alone, the same seed, the same cases.
    let replay = run(11, r"^properties\.create-then-validate$", BoundsOverride::default()).await;
    assert_eq!(finding_of(&replay, id), message);

    // Another seed finds the same minimal case through other cases.
    let other = run(12, r"^properties\.create-then-validate$", BoundsOverride::default()).await;
    assert!(finding_of(&other, id).contains("minimal case [MULTI_NODE_MULTI_WRITER block]"));

    // Bounds that never generate block capabilities never meet the quirk.
    let mount_only = BoundsOverride { access_types: Some((true, false)), ..BoundsOverride::default() };
    let bounded = run(11, r"^properties\.", mount_only).await;
    assert_found_exactly(&bounded, &[]);
    assert_eq!(bounded.counts().pass, 3);
    let left = crate::support::ok(plugin.controller().list_volumes(proto::v1::ListVolumesRequest::default()).await);
    assert!(left.entries.is_empty(), "every case's volume is gone: {:?}", left.entries);
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_csi-conform")
}

/// The message of `id`'s finding in the JSON report a command-line run wrote.
fn reported_finding(cwd: &std::path::Path, id: &str) -> String {
    let json = std::fs::read_to_string(cwd.join("reports/report.json")).expect("the run wrote a JSON report");
    let report = report::from_json(&json).expect("the JSON report reads back");
    finding_of(&report, id).to_owned()
}

#[tokio::test]
async fn the_command_line_prints_a_replay_command_that_reproduces_the_minimal_case() {
    let plugin = TestPlugin::start(Config { quirks: [Quirk::InternalOnOddCaps].into(), ..Config::default() }).await;
    let socket = plugin.socket.display().to_string();
    let cwd = tempfile::tempdir().unwrap();
    let args = ["run", "--endpoint", &socket, "--seed", "5", "--focus", r"^properties\.", "--property-cases", "64", "-q"];
    let out = tokio::process::Command::new(bin()).args(args).current_dir(cwd.path()).output().await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    let id = "properties.validate-never-fails";
    let message = reported_finding(cwd.path(), id);
    let replay = message.split("replay: ").nth(1).expect("a replay command").to_owned();
    assert_eq!(
        replay,
        format!(r"csi-conform run --endpoint {socket} --property-cases 64 -q --seed 5 --focus '^properties\.validate-never-fails$'")
    );

    // Run exactly that command (through a shell, so its quoting is tested too).
    let command = replay.replacen("csi-conform", bin(), 1);
    let again = tokio::process::Command::new("sh").arg("-c").arg(&command).current_dir(cwd.path()).output().await.unwrap();
    assert_eq!(again.status.code(), Some(1), "{}", String::from_utf8_lossy(&again.stdout));
    assert_eq!(reported_finding(cwd.path(), id), message, "the replay finds the same minimal case the same way");
}

#[tokio::test]
async fn property_bounds_files_are_checked_before_anything_runs() {
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("bounds.yaml"), "access_types: [mount, tape]\n").unwrap();
    let out = tokio::process::Command::new(bin())
        .args(["run", "--endpoint", "/nonexistent.sock", "--property-bounds", "bounds.yaml"])
        .current_dir(cwd.path())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bounds.yaml:1:23: access_types: unknown access type \"tape\""), "{stderr}");
}

// ------------------------------------------------------------------------------------------
// Capability honesty
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn controller_rpcs_reach_a_node_only_plugin_only_from_the_honesty_checks() {
    let plugin = TestPlugin::start(Config { mode: Mode::NodeOnly, ..Config::default() }).await;
    let engine = engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    let controller_rpcs = |report: &RunReport| -> Vec<String> {
        report
            .rpc_latency
            .keys()
            .filter(|rpc| proto::method(rpc).is_some_and(|m| m.parent_service().name() == "Controller"))
            .cloned()
            .collect()
    };
    let mut config = run_config(&work);
    config.skip.push(Regex::new(r"^capabilities\.").unwrap());
    let without = suite::run(&engine, &suite::builtin(), &config).await;
    assert!(controller_rpcs(&without).is_empty(), "{:?}", controller_rpcs(&without));
    assert_found_exactly(&without, &[]);

    let mut config = run_config(&work);
    config.focus = vec![Regex::new(r"^capabilities\.").unwrap()];
    let honesty = suite::run(&engine, &suite::builtin(), &config).await;
    assert_found_exactly(&honesty, &[]);
    let sent = controller_rpcs(&honesty);
    assert!(sent.contains(&"ControllerPublishVolume".to_owned()) && sent.contains(&"CreateVolume".to_owned()), "{sent:?}");
    let outcome = |id: &str| honesty.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id).unwrap().outcome;
    assert_eq!(outcome("capabilities.publish-unpublish-volume"), Severity::Pass, "UNIMPLEMENTED, as it should be");
    assert_eq!(outcome("capabilities.stage-unstage-volume"), Severity::Pass, "advertised, and works");
}

#[tokio::test]
async fn an_rpc_served_without_its_capability_is_a_warning_naming_it() {
    use csi_conform::fingerprint::ControllerCapability;
    let options = fake_plugin::FakeOptions {
        controller: vec![ControllerCapability::CreateDeleteVolume],
        ..fake_plugin::FakeOptions::default()
    };
    let fake = fake_plugin::FakePlugin::start(options).await;
    let conn = fake.connect().await;
    let fingerprint = csi_conform::fingerprint::Fingerprint::collect(Some(&conn), std::slice::from_ref(&conn)).await.unwrap();
    let engine = suite::Plugin { controller: Some(conn.clone()), nodes: vec![conn], fingerprint };
    let suites: Vec<Suite> = suite::builtin().into_iter().filter(|s| s.id() == "capabilities").collect();
    let work = tempfile::tempdir().unwrap();
    let report = suite::run(&engine, &suites, &run_config(&work)).await;
    let f = the_finding(&report, "capabilities.list-volumes");
    assert_eq!((f.kind.as_str(), f.severity), ("implemented-not-advertised", Severity::Warn));
    assert!(f.message.contains("does not advertise controller:LIST_VOLUMES"), "{}", f.message);
    assert_eq!(problems(&report).get("capabilities.create-delete-volume"), None, "advertised and implemented");
    fake.stop().await;
}

// ------------------------------------------------------------------------------------------
// Unset versus empty
// ------------------------------------------------------------------------------------------

/// Every place under `node` (a request of type `desc`) that sets a message field to `{}`,
/// other than a oneof member (`mount: {}` selects the member).
fn empty_messages(desc: &MessageDescriptor, node: &Node, at: &str, out: &mut Vec<String>) {
    let NodeKind::Map(entries) = &node.kind else { return };
    for (key, value) in entries {
        let name = key.scalar_text().unwrap_or_default();
        let Some(field) = desc.get_field_by_name(name) else { continue };
        let Kind::Message(inner) = field.kind() else { continue };
        if field.is_map() {
            continue;
        }
        let path = format!("{at}{name}");
        let elements: Vec<&Node> = match &value.kind {
            NodeKind::Seq(items) if field.is_list() => items.iter().collect(),
            _ => vec![value],
        };
        for element in elements {
            if element.as_map().is_some_and(<[_]>::is_empty) && field.containing_oneof().is_none() {
                out.push(path.clone());
            }
            empty_messages(&inner, element, &format!("{path}."), out);
        }
    }
}

#[test]
fn builtin_requests_never_send_an_empty_message_where_the_spec_means_unset() {
    let mut found = Vec::new();
    let mut deliberate = Vec::new();
    for suite in suite::builtin() {
        for scenario in suite.scenarios() {
            for step in scenario.steps() {
                let Action::Call(call) = &step.action else { continue };
                let Some(node) = call.request.node() else { continue };
                let mut here = Vec::new();
                empty_messages(&call.method.input(), node, "", &mut here);
                let target = if scenario.tags().iter().any(|t| t == "nil-vs-empty") { &mut deliberate } else { &mut found };
                target.extend(here.into_iter().map(|p| format!("{}: {} {p}", scenario.id(), call.method.name())));
            }
        }
    }
    assert!(found.is_empty(), "empty messages sent where the spec means unset: {found:#?}");
    assert_eq!(
        deliberate,
        [
            "extras.create-volume.content-source-empty: CreateVolume volume_content_source",
            "extras.create-volume.topology-empty: CreateVolume accessibility_requirements",
        ],
        "the nil-vs-empty scenarios send exactly these"
    );
}


/// Scenarios that asked more than the spec does, against the test fake, which differs from
/// the reference plugin where the spec lets it: its ListVolumes token is a position (a
/// deleted entry shifts the next page past one that exists, as hostpath-style plugins do),
/// ValidateVolumeCapabilities confirms whatever a volume is asked about (and its node then
/// serves it: the confirmation holds, so no finding at all), and DeleteVolume deletes a
/// published volume. Each is a warning naming what it saw, or a pass; with ids as tokens the
/// same paging passes outright.
#[tokio::test]
async fn what_the_spec_allows_is_never_a_failure() {
    let focus = r"^(controller\.list-volumes\.pagination|extras\.validate\.block-for-mount-volume|extras\.delete-volume\.while-published)$";
    let run = |positional_tokens: bool| async move {
        let options = fake_plugin::FakeOptions { positional_tokens, ..fake_plugin::FakeOptions::default() };
        let fake = fake_plugin::FakePlugin::start(options).await;
        let engine = fake.engine_plugin(csi_conform::client::ClientOptions::default()).await;
        let work = tempfile::tempdir().unwrap();
        let mut config = run_config(&work);
        config.focus = vec![Regex::new(focus).unwrap()];
        let report = suite::run(&engine, &suite::builtin(), &config).await;
        assert!(fake.volume_ids().is_empty(), "everything is torn down: {:?}", fake.volume_ids());
        report
            .suites
            .iter()
            .flat_map(|s| &s.scenarios)
            .map(|s| {
                let findings: Vec<(String, Severity)> = s.findings.iter().map(|f| (f.kind.clone(), f.severity)).collect();
                (s.id.clone(), (s.outcome, findings))
            })
            .collect::<BTreeMap<String, (Severity, Vec<(String, Severity)>)>>()
    };
    let positional = run(true).await;
    // A volume missed while another was deleted mid-listing: lawful (#listvolumes), a note.
    let noted = (Severity::Pass, vec![(csi_conform::report::NOTE_KIND.to_owned(), Severity::Pass)]);
    assert_eq!(positional["controller.list-volumes.pagination"], noted, "{positional:#?}");
    assert_eq!(positional["extras.validate.block-for-mount-volume"], (Severity::Pass, vec![]), "{positional:#?}");
    assert_eq!(positional["extras.delete-volume.while-published"], (Severity::Pass, vec![]));
    let by_id = run(false).await;
    assert_eq!(by_id["controller.list-volumes.pagination"], (Severity::Pass, vec![]), "{by_id:#?}");
}
