//! `csi-conform report --compare OLD.json NEW.json` on two stored runs
//! (tests/fixtures/compare): new failures, fixes, coverage lost (pass -> skip) and gained
//! (skip -> pass), scenarios added and gone, latency moves (ListVolumes' 4 ms -> 1 ms is 4x
//! but under the 5 ms floor, so it is not one), and the exit code a nightly job keys on.

use std::path::Path;

use crate::support::csi_conform;

fn fixtures() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/compare"))
}

#[tokio::test]
async fn compare_prints_what_changed_and_exits_1_on_new_failures() {
    let out = csi_conform(&["report", "--compare", "old.json", "new.json"], fixtures()).await;
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let expected = "\
old: old.json (ebs.csi.example.com 1.30.0, 2026-01-10T02:00:00Z, seed 11): 3 passed, 1 failed, 0 warned, 1 skipped, 0 errored
new: new.json (ebs.csi.example.com 1.30.0, 2026-01-11T02:00:00Z, seed 12): 3 passed, 1 failed, 0 warned, 1 skipped, 0 errored
new failures (1):
  controller.create-volume.no-name  pass -> fail  (CreateVolume answered OK, expected INVALID_ARGUMENT)
fixed (1):
  controller.create-volume.max-name  fail -> pass
coverage lost (now skipped) (1):
  controller.delete-volume.unknown-id  pass -> skip  (requires controller:CREATE_DELETE_VOLUME, which the plugin does not advertise)
coverage gained (no longer skipped) (1):
  controller.list-snapshots  skip -> pass
new scenarios (1):
  controller.expand-volume.basic
scenarios gone (1):
  controller.list-volumes.pagination
latency moves (median, more than 1.5x and 5ms):
  CreateVolume                       120.000ms ->   480.000ms  (4.00x)
";
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);

    // The other way round, max-name is the new failure; the same run twice has no changes.
    let out = csi_conform(&["report", "--compare", "new.json", "old.json"], fixtures()).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("new failures (1):\n  controller.create-volume.max-name  pass -> fail"));
    let out = csi_conform(&["report", "--compare", "old.json", "old.json"], fixtures()).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("no changes\n"));

    let out = csi_conform(&["report", "--compare", "old.json", "missing.json"], fixtures()).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: missing.json: "));
}
