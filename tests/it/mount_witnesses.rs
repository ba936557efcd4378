//! Whether a volume is mounted is decided by two witnesses, the node's mount table and the
//! path itself: a plugin (in a mount namespace of its own) whose publication the table lists
//! but the path does not lead to (`hides-target-mount`) gets no pass and no failure, but an
//! inconclusive verdict citing both observations.

use csi_conform::{report::Severity, suite};

use crate::{
    mount_namespace::{PrivatePlugin, config, findings},
    run::outcomes,
};

#[tokio::test]
async fn a_mount_the_table_lists_and_the_path_does_not_lead_to_is_inconclusive_with_both_witnesses() {
    let test = "a_mount_the_table_lists_and_the_path_does_not_lead_to_is_inconclusive_with_both_witnesses";
    let Some(plugin) = PrivatePlugin::start(test, &["--quirk", "hides-target-mount"]).await else { return };
    let engine = plugin.engine().await;
    let work = tempfile::tempdir().unwrap();
    let focus = r"^lifecycle\.mount\.read-write$|^extras\.publish\.readonly$";
    let report = suite::run(&engine, &suite::builtin(), &config(&work, focus)).await;
    let all = outcomes(&report);
    assert_eq!(all.len(), 2, "{all:#?}");
    for (id, (outcome, why)) in &all {
        assert_eq!(*outcome, Severity::Inconclusive, "{id}: {all:#?}");
        assert!(why.contains("is a mount point is not decided") && why.contains("target"), "{id}: {why}");
    }
    let scenario = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == "lifecycle.mount.read-write").unwrap();
    let undecided: Vec<_> = scenario.findings.iter().filter(|f| f.kind == "witnesses-disagree").collect();
    assert_eq!(undecided.len(), 1, "{:#?}", scenario.findings);
    let evidence: Vec<(&str, &str)> = undecided[0].evidence.iter().map(|e| (e.rpc.as_str(), e.claim.as_str())).collect();
    assert_eq!(evidence.len(), 2, "{evidence:?}");
    assert_eq!(evidence[0].0, "mount table");
    assert!(evidence[0].1.starts_with("lists a file system mounted there"), "{evidence:?}");
    assert_eq!(evidence[1], ("statx", "is no mount point (the path does not lead to a mount)"));
    // Nothing else is blamed, and the teardown took the hidden mounts down too.
    let blamed: Vec<String> = findings(&report).into_iter().filter(|f| !f.contains("witnesses-disagree")).collect();
    assert!(blamed.iter().all(|f| !f.contains("fail") || f.contains("note")), "{blamed:#?}");
    assert!(report.suites.iter().flat_map(|s| &s.scenarios).flat_map(|s| &s.findings).all(|f| f.severity != Severity::Fail));
    let left = plugin.mounts_under(work.path());
    assert!(left.is_empty(), "mounts left in the plugin's namespace: {left:?}");
    plugin.stop().await;
}
