//! Mount checks where the mounts are: a node plugin in a mount namespace of its own (the
//! reference plugin with `--private-mounts`, as a containerized plugin lives) is verified in
//! that namespace from ours, through /proc/PID; the read-only check still catches a plugin
//! that ignores read-only there; `--mount-check off` and a TCP node endpoint without
//! `--check-path-cmd` turn the mount checks into skips that say why; and the console, JSON,
//! JUnit and HTML reports say where mounts were verified.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use csi_conform::{
    client::{ClientOptions, Connection, Endpoint},
    fingerprint::Fingerprint,
    mounts,
    proto::v1::{self, volume_capability::access_mode::Mode},
    reference::{self, Config},
    report::{self, RunReport, Severity},
    suite::{self, Inspector, MountCheck, RunConfig},
};
use tempfile::TempDir;
use tokio::process::Child;

use crate::{
    report::{parse_junit, prop},
    run::{not_passed, outcomes},
    support::{bin, csi_conform, create_req, mount_cap, ok, range},
};

/// `csi-conform reference-plugin --private-mounts` in a process of its own.
pub(crate) struct PrivatePlugin {
    dir: TempDir,
    socket: PathBuf,
    pid: i32,
    child: Child,
}

impl PrivatePlugin {
    /// Starts it with extra `args`; `None` (after saying SKIPPED and why) when this machine
    /// does not let it have a mount namespace of its own: no CAP_SYS_ADMIN, or the kernel
    /// refusing unshare(CLONE_NEWNS) with EPERM. Any other exit before its socket appears is
    /// the plugin's failure, and fails the test.
    pub(crate) async fn start(test: &str, args: &[&str]) -> Option<PrivatePlugin> {
        if !crate::support::can_mount(test, "a mount namespace of its own is made with it") {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("csi.sock");
        let log_path = dir.path().join("plugin.log");
        let mut child = tokio::process::Command::new(bin())
            .args(["reference-plugin", "--private-mounts", "--endpoint"])
            .arg(&socket)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("start the reference plugin");
        let started = Instant::now();
        while !socket.exists() {
            if let Some(status) = child.try_wait().unwrap() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                if log.contains("unshare(CLONE_NEWNS) failed: EPERM") {
                    crate::support::skip(test, crate::support::Precondition::Namespaces, log.trim());
                    return None;
                }
                panic!("the reference plugin with --private-mounts exited before making its socket ({status}): {}", log.trim());
            }
            // Only turns a hang into a failure.
            assert!(started.elapsed() < Duration::from_secs(60), "the plugin never made its socket");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let pid = child.id().expect("running") as i32;
        Some(PrivatePlugin { dir, socket, pid, child })
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint::Unix(self.socket.clone())
    }

    /// The harness's view of it: one endpoint for the controller and node 0.
    pub(crate) async fn engine(&self) -> suite::Plugin {
        let options = ClientOptions { connect_timeout: Duration::from_secs(20), ..ClientOptions::default() };
        let conn = Connection::connect(self.endpoint(), options).await.expect("connect");
        let fingerprint = Fingerprint::collect(Some(&conn), std::slice::from_ref(&conn)).await.expect("fingerprint");
        suite::Plugin { controller: Some(conn.clone()), nodes: vec![conn], fingerprint }
    }

    /// Mounts under `dir` in the plugin's own mount namespace.
    pub(crate) fn mounts_under(&self, dir: &Path) -> Vec<mounts::MountInfo> {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        mounts::mounts_of(self.pid).unwrap().into_iter().filter(|m| m.mount_point.starts_with(&dir)).collect()
    }

    pub(crate) async fn stop(mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid), nix::sys::signal::Signal::SIGTERM);
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

pub(crate) fn config(work: &TempDir, focus: &str) -> RunConfig {
    RunConfig {
        idempotency_count: 2,
        seed: 13,
        volume_size: 1 << 20,
        work_dir: work.path().join("work"),
        focus: vec![regex::Regex::new(focus).unwrap()],
        ..RunConfig::default()
    }
}

/// Every finding of a run, as `scenario kind: message`.
pub(crate) fn findings(report: &RunReport) -> Vec<String> {
    report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .flat_map(|s| s.findings.iter().map(move |f| format!("{} {}: {}", s.id, f.kind, f.message)))
        .collect()
}

/// A plugin that exits before its socket appears for any reason but the named precondition
/// fails the test that started it; it is not a skip.
#[tokio::test]
async fn a_private_mounts_plugin_that_exits_at_start_fails_the_test_instead_of_skipping() {
    let test = "a_private_mounts_plugin_that_exits_at_start_fails_the_test_instead_of_skipping";
    if !crate::support::can_mount(test, "a mount namespace of its own is made with it") {
        return;
    }
    let started = tokio::spawn(async { PrivatePlugin::start("exits-at-start", &["--quirk", "no-such-quirk"]).await.map(|p| p.pid) });
    let panic = started.await.expect_err("the start must fail").into_panic();
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.starts_with("the reference plugin with --private-mounts exited before making its socket"), "{message}");
    assert!(message.contains("no-such-quirk"), "the plugin's own words are shown: {message}");
}

/// The one-node lifecycles and the scenario that asks path-state for a read-only mount.
const ONE_NODE: &str = r"^lifecycle\.(mount|block)\.|^extras\.publish\.readonly$";

#[tokio::test]
async fn mounts_are_verified_in_the_mount_namespace_of_a_plugin_that_has_its_own() {
    let test = "mounts_are_verified_in_the_mount_namespace_of_a_plugin_that_has_its_own";
    let Some(plugin) = PrivatePlugin::start(test, &[]).await else { return };
    let engine = plugin.engine().await;

    // The plugin's mounts are its own: a staged volume is a mount point in its namespace,
    // not in ours, and the inspector finds it there.
    let inspector = Inspector::for_node(0, &plugin.endpoint(), None, MountCheck::Auto).await;
    let site = inspector.site().clone();
    assert_eq!((site.pid, site.shared, site.skipped.as_deref()), (Some(plugin.pid), false, None), "{site:?}");
    assert_ne!(site.namespace, Some(mounts::mount_namespace(None).unwrap()));
    let conn = &engine.nodes[0];
    let cap = mount_cap(Mode::SingleNodeWriter);
    let volume = ok(conn.controller().create_volume(v1::CreateVolumeRequest {
        capacity_range: range(1 << 20, 0),
        ..create_req("private", vec![cap.clone()])
    })
    .await)
    .volume
    .unwrap()
    .volume_id;
    let publish = v1::ControllerPublishVolumeRequest {
        volume_id: volume.clone(),
        node_id: reference::DEFAULT_NODE_ID.into(),
        volume_capability: Some(cap.clone()),
        ..Default::default()
    };
    let publish_context = ok(conn.controller().controller_publish_volume(publish).await).publish_context;
    let staging = plugin.dir.path().join("staging");
    std::fs::create_dir(&staging).unwrap();
    let stage = v1::NodeStageVolumeRequest {
        volume_id: volume.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(cap),
        publish_context,
        ..Default::default()
    };
    ok(conn.node().node_stage_volume(stage).await);
    assert!(!mounts::is_mount_point(&staging), "the plugin's mount is not in our namespace");
    let entry = inspector.mount_entry(&staging).unwrap().expect("mount checks run");
    assert!(entry.is_some(), "the inspector sees the mount in the plugin's namespace");
    assert_eq!(inspector.local_path(&staging), Some(PathBuf::from(format!("/proc/{}/root{}", plugin.pid, std::fs::canonicalize(&staging).unwrap().display()))));
    let unstage = v1::NodeUnstageVolumeRequest { volume_id: volume.clone(), staging_target_path: staging.display().to_string() };
    ok(conn.node().node_unstage_volume(unstage).await);
    assert_eq!(inspector.mount_entry(&staging).unwrap(), Some(None));
    let unpublish = v1::ControllerUnpublishVolumeRequest {
        volume_id: volume.clone(),
        node_id: reference::DEFAULT_NODE_ID.into(),
        ..Default::default()
    };
    ok(conn.controller().controller_unpublish_volume(unpublish).await);
    ok(conn.controller().delete_volume(v1::DeleteVolumeRequest { volume_id: volume, ..Default::default() }).await);

    // The lifecycles from our namespace: mount checks run in the plugin's, and pass.
    let work = tempfile::tempdir().unwrap();
    let report = suite::run(&engine, &suite::builtin(), &config(&work, ONE_NODE)).await;
    assert!(not_passed(&report).is_empty(), "{:#?}", not_passed(&report));
    assert_eq!(outcomes(&report).len(), 9, "{:#?}", outcomes(&report));
    let all = findings(&report);
    assert!(all.is_empty(), "no mount check was skipped: {all:#?}");
    assert_eq!(report.mounts, vec![site]);
    let left = plugin.mounts_under(work.path());
    assert!(left.is_empty(), "mounts left in the plugin's namespace: {left:?}");
    plugin.stop().await;
}

#[tokio::test]
async fn a_plugin_that_ignores_read_only_fails_in_its_own_namespace_and_mount_check_off_skips_the_check() {
    let test = "a_plugin_that_ignores_read_only_fails_in_its_own_namespace_and_mount_check_off_skips_the_check";
    let Some(plugin) = PrivatePlugin::start(test, &["--quirk", "ignore-readonly"]).await else { return };
    let engine = plugin.engine().await;
    let work = tempfile::tempdir().unwrap();
    let focus = r"^lifecycle\.mount\.read-only$|^extras\.publish\.readonly$";
    let report = suite::run(&engine, &suite::builtin(), &config(&work, focus)).await;
    let failed = not_passed(&report);
    assert_eq!(failed.len(), 2, "{failed:#?}");
    for (id, (outcome, why)) in &failed {
        assert_eq!(*outcome, Severity::Fail, "{id}: {why}");
        assert!(why.contains("read-write"), "{id}: {why}");
    }

    // --mount-check off: the same plugin passes, each mount check a skip that says why.
    let off = RunConfig { mount_check: MountCheck::Off, ..config(&work, focus) };
    let report = suite::run(&engine, &suite::builtin(), &off).await;
    let all = outcomes(&report);
    assert_eq!(all["lifecycle.mount.read-only"].0, Severity::Pass, "{all:#?}");
    let (outcome, why) = &all["extras.publish.readonly"];
    assert_eq!(*outcome, Severity::Skip, "{all:#?}");
    assert!(why.contains("read-only-mount") && why.contains("--mount-check off"), "{why}");
    let notes = findings(&report);
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert!(notes[0].starts_with("lifecycle.mount.read-only mount-check-skipped: ") && notes[0].contains("--mount-check off"), "{notes:?}");
    assert_eq!(report.mounts[0].pid, Some(plugin.pid));
    assert!(report.mounts[0].skipped.as_deref().is_some_and(|s| s.contains("--mount-check off")), "{:?}", report.mounts);
    assert!(plugin.mounts_under(work.path()).is_empty());
    plugin.stop().await;
}

#[tokio::test]
async fn a_tcp_node_endpoint_without_check_path_cmd_skips_the_mount_checks_with_the_reason() {
    let handle = reference::spawn(Config::default(), "tcp://127.0.0.1:0").await.expect("serve on tcp");
    let endpoint = Endpoint::Tcp { host: "127.0.0.1".into(), port: handle.local_addr().unwrap().port() };
    let conn = Connection::connect(endpoint.clone(), ClientOptions::default()).await.expect("connect");
    let fingerprint = Fingerprint::collect(Some(&conn), std::slice::from_ref(&conn)).await.expect("fingerprint");
    let engine = suite::Plugin { controller: Some(conn.clone()), nodes: vec![conn], fingerprint };
    let work = tempfile::tempdir().unwrap();
    let focus = r"^lifecycle\.mount\.read-write$|^extras\.publish\.readonly$";
    let report = suite::run(&engine, &suite::builtin(), &config(&work, focus)).await;
    let all = outcomes(&report);
    assert_eq!(all["lifecycle.mount.read-write"].0, Severity::Pass, "{all:#?}");
    let (outcome, why) = &all["extras.publish.readonly"];
    assert_eq!(*outcome, Severity::Skip, "{all:#?}");
    assert!(why.contains("reached over TCP") && why.contains("give --check-path-cmd"), "{why}");
    let notes = findings(&report);
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert!(notes[0].starts_with("lifecycle.mount.read-write path-check-skipped: ") && notes[0].contains(&endpoint.to_string()), "{notes:?}");
    let site = &report.mounts[0];
    assert_eq!(site.pid, None);
    assert!(site.to_string().contains("mount checks skipped: node endpoint 0 (tcp://127.0.0.1:"), "{site}");
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_console_and_every_report_say_once_where_mounts_were_verified() {
    let test = "the_console_and_every_report_say_once_where_mounts_were_verified";
    let Some(plugin) = PrivatePlugin::start(test, &[]).await else { return };
    let cwd = tempfile::tempdir().unwrap();
    let endpoint = plugin.socket.display().to_string();
    let work = cwd.path().join("work").display().to_string();
    let run = |extra: &'static [&'static str]| {
        let mut args = vec!["run", "--endpoint", &endpoint, "--focus", r"^lifecycle\.mount\.read-write$"];
        args.extend(["--idempotency-count", "2", "--work-dir", &work, "--test-volume-size", "1Mi", "-q"]);
        args.extend(extra);
        let cwd = cwd.path().to_path_buf();
        async move { csi_conform(&args, &cwd).await }
    };
    let out = run(&[]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = format!(
        "Mounts: node 0 (unix://{endpoint}): mounts verified in the mount namespace of pid {} ({}), not csi-conform's",
        plugin.pid,
        mounts::mount_namespace(Some(plugin.pid)).unwrap()
    );
    assert_eq!(stdout.matches("Mounts: ").count(), 1, "{stdout}");
    assert!(stdout.contains(&line), "{line}\nnot in:\n{stdout}");
    let reports = cwd.path().join("reports");
    let json = report::from_json(&std::fs::read_to_string(reports.join("report.json")).unwrap()).unwrap();
    assert_eq!(json.mounts.len(), 1);
    assert_eq!(json.mounts[0].pid, Some(plugin.pid));
    let junit = parse_junit(&std::fs::read_to_string(reports.join("junit.xml")).unwrap());
    let mounts_prop = prop(&junit.suites[0].properties, "mounts.0").map(str::to_owned);
    assert!(mounts_prop.as_deref().is_some_and(|p| line.ends_with(p)), "{mounts_prop:?}");
    let html = std::fs::read_to_string(reports.join("report.html")).unwrap();
    assert!(html.contains(&format!("mount namespace of pid {}", plugin.pid)), "the HTML report names the namespace");

    let out = run(&["--mount-check", "off"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("Mounts: node 0 (unix://") && stdout.contains("mount checks skipped: --mount-check off"), "{stdout}");
    let out = run(&["--mount-check", "sometimes"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--mount-check"), "{out:?}");
    plugin.stop().await;
}

/// The node reboot of `disruption.lost-node.node-paths-gone` unmounts only where the run may:
/// a plugin that mounts in a mount namespace of its own keeps its mounts out of this run's
/// reach, so the scenario skips, naming that namespace (never a verdict), and its volume still
/// comes down; under `--mount-check off` it skips before it makes anything.
#[tokio::test]
async fn the_node_reboot_skips_where_the_plugin_mounts_in_a_namespace_of_its_own() {
    let test = "the_node_reboot_skips_where_the_plugin_mounts_in_a_namespace_of_its_own";
    let Some(plugin) = PrivatePlugin::start(test, &[]).await else { return };
    let engine = plugin.engine().await;
    let work = tempfile::tempdir().unwrap();
    let disruption = vec![suite::opt_in_suite("disruption").expect("an opt-in suite").expect("it loads")];
    let id = "disruption.lost-node.node-paths-gone";
    let focus = r"^disruption\.lost-node\.node-paths-gone$";
    for (mode, said) in [(MountCheck::Auto, format!("pid {}) mounts in a mount namespace of its own", plugin.pid)), (MountCheck::Off, "--mount-check off".to_owned())] {
        let report = suite::run(&engine, &disruption, &RunConfig { mount_check: mode, ..config(&work, focus) }).await;
        let all = outcomes(&report);
        assert_eq!(all.len(), 1, "{all:#?}");
        let (outcome, why) = &all[id];
        assert_eq!(*outcome, Severity::Skip, "{all:#?}");
        assert!(why.contains(&said), "{why}");
        let verdicts: Vec<String> = findings(&report).into_iter().filter(|f| f.contains("paths-gone:")).collect();
        assert!(verdicts.is_empty(), "{verdicts:#?}");
        assert!(plugin.mounts_under(work.path()).is_empty(), "mounts left in the plugin's namespace");
        let mut controller = engine.controller.as_ref().unwrap().controller();
        let left = controller.list_volumes(v1::ListVolumesRequest::default()).await.unwrap().into_inner().entries;
        assert!(left.is_empty(), "{left:?}");
    }
    plugin.stop().await;
}
