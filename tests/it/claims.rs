//! What a plugin does outweighs what it claims: a ValidateVolumeCapabilities confirmation that
//! the plugin's own node refuses is ValidateVolumeCapabilities' failure and nobody else's
//! (`confirm-everything`, as hostpath v1.16.1 does); a same-name CreateVolume answered OK is
//! judged by what the volume returned does, not by that confirmation; and a published
//! volume_mount_group is checked as the mount shows it (`drops-mount-group`).

use std::collections::BTreeSet;

use csi_conform::{
    reference::{Config, Quirk},
    report::{Finding, RunReport, Severity},
    suite::{self, RunConfig},
};
use regex::Regex;

use crate::support::{Precondition, TestPlugin, engine_plugin, skip};

const VALIDATE: &str = "extras.validate.block-for-mount-volume";
const SAME_NAME: &str = "extras.create-volume.same-name-other-capabilities";
const MOUNT_GROUP: &str = "extras.publish.mount-group";

/// A run of the built-in scenarios matching `focus` (all with `None`) against a reference
/// plugin with `quirks`.
async fn run(quirks: &[Quirk], focus: Option<&str>) -> RunReport {
    let plugin = TestPlugin::start(Config { quirks: quirks.iter().copied().collect(), ..Config::default() }).await;
    let engine = engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    let mut config = RunConfig { seed: 7, work_dir: work.path().join("work"), ..RunConfig::default() };
    config.focus = focus.map(|f| Regex::new(f).unwrap()).into_iter().collect();
    suite::run(&engine, &suite::builtin(), &config).await
}

/// Every finding at warning level or worse: (scenario, finding).
fn problems(report: &RunReport) -> Vec<(&str, &Finding)> {
    report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .flat_map(|s| s.findings.iter().filter(|f| f.severity >= Severity::Warn).map(move |f| (s.id.as_str(), f)))
        .collect()
}

/// The requirements a finding of scenario `id` breaks: its own, or else the scenario's.
fn breaks(report: &RunReport, id: &str, f: &Finding) -> Vec<String> {
    if !f.requirements.is_empty() {
        return f.requirements.clone();
    }
    let scenario = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id).unwrap();
    scenario.requirements.iter().map(|r| r.id.clone()).collect()
}

fn outcome(report: &RunReport, id: &str) -> Severity {
    report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id).unwrap_or_else(|| panic!("{id} ran")).outcome
}

/// The plugin confirms block access for a mount volume and its node refuses it: one failure,
/// on the scenario that asks ValidateVolumeCapabilities about it, filed under
/// ValidateVolumeCapabilities' own rule, and nothing anywhere else in a whole default run.
#[tokio::test]
async fn a_confirmation_the_node_refuses_fails_validate_volume_capabilities_and_nothing_else() {
    let report = run(&[Quirk::ConfirmEverything], None).await;
    let found = problems(&report);
    let described: Vec<String> = found.iter().map(|(id, f)| format!("{id} {} {}: {}", f.severity, f.kind, f.message)).collect();
    assert_eq!(found.len(), 1, "{described:#?}");
    let (id, f) = found[0];
    assert_eq!((id, f.kind.as_str(), f.severity), (VALIDATE, "confirms-unsupported", Severity::Fail), "{described:#?}");
    assert_eq!(breaks(&report, id, f), ["ValidateVolumeCapabilities.confirm-only-supported"]);
    assert_eq!(f.rpc.as_deref(), Some("ValidateVolumeCapabilities"));
    assert!(f.message.contains("confirmed block access") && f.message.contains("FAILED_PRECONDITION"), "{}", f.message);
    assert!(report.failed());
}

/// hostpath's pair: OK to a same-name request for block access on a mount volume, and a
/// confirmation of block access for it. The confirmation is disproved by the node, so the OK
/// fails (ALREADY_EXISTS was owed) and the false confirmation fails its own scenario, once.
#[tokio::test]
async fn a_same_name_ok_fails_by_the_nodes_refusal_whatever_validate_volume_capabilities_confirms() {
    let focus = format!("^({}|{})$", regex::escape(VALIDATE), regex::escape(SAME_NAME));
    let report = run(&[Quirk::ConfirmEverything, Quirk::SameNameAnyCapability], Some(&focus)).await;
    let found: BTreeSet<(&str, &str, Severity)> =
        problems(&report).into_iter().map(|(id, f)| (id, f.kind.as_str(), f.severity)).collect();
    assert_eq!(
        found,
        BTreeSet::from([(VALIDATE, "confirms-unsupported", Severity::Fail), (SAME_NAME, "incompatible-volume", Severity::Fail)])
    );
    let (_, f) = problems(&report).into_iter().find(|(id, _)| *id == SAME_NAME).unwrap();
    assert!(f.message.contains("the plugin's node refuses block access for that volume"), "{}", f.message);
    assert_eq!((f.expected.as_deref(), f.got.as_deref()), (Some("ALREADY_EXISTS"), Some("OK")));
    assert_eq!(breaks(&report, SAME_NAME, f), ["CreateVolume.errors.already-exists"]);
}

/// The compliant plugin: no confirmation of block access for a mount volume, ALREADY_EXISTS
/// to the same-name request, and the volume mount group on the mount.
#[tokio::test]
async fn the_compliant_plugin_passes_the_claims_and_the_mount_group() {
    let focus = format!("^({}|{}|{})$", regex::escape(VALIDATE), regex::escape(SAME_NAME), regex::escape(MOUNT_GROUP));
    let report = run(&[], Some(&focus)).await;
    assert!(problems(&report).is_empty(), "{:#?}", problems(&report));
    assert_eq!(outcome(&report, VALIDATE), Severity::Pass);
    assert_eq!(outcome(&report, SAME_NAME), Severity::Pass);
    if csi_conform::mounts::has_cap_sys_admin() {
        assert_eq!(outcome(&report, MOUNT_GROUP), Severity::Pass);
    }
}

/// A plugin that drops volume_mount_group: the target's group is not the one asked for, by
/// the directory's owner group and the mount table alike; one failure, under
/// NodePublishVolume's mount-group rule. The mount table needs real mounts.
#[tokio::test]
async fn a_dropped_volume_mount_group_fails_once_under_node_publish_volume() {
    if !csi_conform::mounts::has_cap_sys_admin() {
        skip(
            "a_dropped_volume_mount_group_fails_once_under_node_publish_volume",
            Precondition::CapSysAdmin,
            "the reference plugin mounts, and the group is checked on the mount",
        );
        return;
    }
    let focus = format!("^{}$", regex::escape(MOUNT_GROUP));
    let report = run(&[Quirk::DropsMountGroup], Some(&focus)).await;
    let found = problems(&report);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (id, f) = found[0];
    assert_eq!((id, f.kind.as_str(), f.severity), (MOUNT_GROUP, "mount-group", Severity::Fail));
    assert_eq!(breaks(&report, id, f), ["NodePublishVolume.mount-group"]);
    assert!(f.message.contains("expected group 1000") && f.message.contains("no gid= option"), "{}", f.message);
}

/// A confirmation of something never asked about (another access mode) is wrong whatever the
/// node does: it reconciles as a mismatch, under ValidateVolumeCapabilities' confirmation
/// rule, and the node is not asked.
#[tokio::test]
async fn a_confirmation_of_another_capability_is_a_mismatch_whatever_the_node_does() {
    let focus = format!("^{}$", regex::escape(VALIDATE));
    let report = run(&[Quirk::ConfirmEverything, Quirk::Overconfirm], Some(&focus)).await;
    let found = problems(&report);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (id, f) = found[0];
    assert_eq!((id, f.kind.as_str(), f.severity), (VALIDATE, "mismatched-confirmation", Severity::Fail));
    assert_eq!(breaks(&report, id, f), ["ValidateVolumeCapabilities.confirmed.capabilities"]);
}

const ROOM: &str = "extras.get-capacity.room-holds";

/// A run of `extras.get-capacity.room-holds` against a reference plugin with an 8 MiB pool
/// and `quirks`, asking for volumes of 16 MiB.
async fn room_run(quirks: &[Quirk]) -> RunReport {
    let plugin = TestPlugin::start(Config { quirks: quirks.iter().copied().collect(), capacity: 8 << 20, ..Config::default() }).await;
    let engine = engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    let config = RunConfig {
        seed: 7,
        volume_size: 16 << 20,
        work_dir: work.path().join("work"),
        focus: vec![Regex::new(&format!("^{}$", regex::escape(ROOM))).unwrap()],
        ..RunConfig::default()
    };
    suite::run(&engine, &suite::builtin(), &config).await
}

/// GetCapacity claims room the plugin then refuses (`capacity-overstated`): the claim is the
/// finding, once, under GetCapacity's own rule, citing the two GetCapacity answers around the
/// refused CreateVolume. An honest plugin that says it has no room for the size is not tried.
#[tokio::test]
async fn room_get_capacity_claims_and_create_volume_refuses_fails_get_capacity() {
    let report = room_run(&[Quirk::CapacityOverstated]).await;
    let found = problems(&report);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (id, f) = found[0];
    assert_eq!((id, f.severity, f.kind.as_str(), f.rpc.as_deref()), (ROOM, Severity::Fail, "capacity-claim", Some("GetCapacity")));
    assert_eq!(breaks(&report, id, f), ["GetCapacity.arguments"]);
    let evidence: Vec<&str> = f.evidence.iter().map(|e| e.rpc.as_str()).collect();
    assert_eq!(evidence, ["GetCapacity", "CreateVolume", "GetCapacity"], "{f:#?}");
    assert!(f.evidence[1].claim.starts_with("answered RESOURCE_EXHAUSTED"), "{f:#?}");

    let honest = room_run(&[]).await;
    assert_eq!(outcome(&honest, ROOM), Severity::Skip);
    let why = honest.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == ROOM).and_then(|s| s.skip_reason.clone());
    assert!(why.as_deref().is_some_and(|w| w.contains("GetCapacity claims no room")), "{why:?}");
}

/// A plugin that advertises PUBLISH_UNPUBLISH_VOLUME but answers UNIMPLEMENTED for it, and
/// confirms block access for a mount volume: the check that tries the confirmation chose to
/// publish from the claim; it goes on as the behaviour says (no publish) and its node's
/// refusal still disproves the confirmation. The advertised-but-unimplemented claim is the
/// `capabilities` scenario's finding, once.
#[tokio::test]
async fn a_claimed_capability_the_plugin_does_not_implement_does_not_hide_a_false_confirmation() {
    let focus = format!("^({}|capabilities\\.publish-unpublish-volume)$", regex::escape(VALIDATE));
    let report = run(&[Quirk::ConfirmEverything, Quirk::AdvertisePublishUnimplemented], Some(&focus)).await;
    let found: BTreeSet<(&str, &str, Severity)> =
        problems(&report).into_iter().map(|(id, f)| (id, f.kind.as_str(), f.severity)).collect();
    assert_eq!(
        found,
        BTreeSet::from([
            (VALIDATE, "confirms-unsupported", Severity::Fail),
            ("capabilities.publish-unpublish-volume", "advertised-not-implemented", Severity::Fail),
        ])
    );
}
