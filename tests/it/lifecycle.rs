//! The orchestrator lifecycle suite (`suites/lifecycle.yaml`, the `lifecycle` check) against
//! the reference plugin run as a small cluster (one controller that is also node 0, further
//! node instances sharing its state directory): mount and block lifecycles pass and are seen
//! on the host; context and secrets reach a plugin that insists on them; single-writer
//! violations, missing mounts and dropped mount flags are caught; a node plugin in another
//! network namespace is reached over TCP (its paths checked only through --check-path-cmd);
//! a node plugin restarted between stage and publish still works; and the default `run`
//! exercises two nodes. After every run nothing is left mounted, on disk or on the plugin.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use csi_conform::{
    client::{ClientOptions, Connection, Endpoint},
    fingerprint::Fingerprint,
    mounts,
    proto::v1,
    reference::{Config, Mode, Quirk, ReferenceHandle},
    report::{RunReport, Severity},
    secrets::{SecretKey, Secrets},
    suite::{self, AccessType, PathCommand, Resource, ResourceObserver, RunConfig, Tracked},
};
use tempfile::TempDir;

use crate::{
    run::{not_passed, outcomes},
    support::{TestPlugin, csi_conform, netns::NetNs, ok},
};

pub(crate) fn can_mount(test: &str) -> bool {
    crate::support::can_mount(test, "the reference plugin mounts")
}

/// The reference plugin as a cluster: `plugin` serves the controller and node 0; `extra`
/// are further node-only instances; all share `state`.
pub(crate) struct Cluster {
    pub(crate) plugin: TestPlugin,
    extra: Vec<ReferenceHandle>,
    nodes: Vec<Endpoint>,
    pub(crate) state: TempDir,
}

impl Cluster {
    pub(crate) async fn start(config: Config, nodes: usize) -> Cluster {
        let state = tempfile::tempdir().unwrap();
        let shared = Config { state_dir: Some(state.path().to_path_buf()), ..config };
        let plugin = TestPlugin::start(Config { node_id: "node-0".into(), ..shared.clone() }).await;
        let mut cluster = Cluster { nodes: vec![Endpoint::Unix(plugin.socket.clone())], plugin, extra: Vec::new(), state };
        for i in 1..nodes {
            let socket = format!("node-{i}.sock");
            let node = Config { mode: Mode::NodeOnly, node_id: format!("node-{i}"), ..shared.clone() };
            let (handle, _) = cluster.plugin.start_beside(&socket, node).await;
            cluster.extra.push(handle);
            cluster.nodes.push(Endpoint::Unix(cluster.plugin.dir.path().join(socket)));
        }
        cluster
    }

    pub(crate) async fn engine(&self) -> suite::Plugin {
        engine(&self.plugin.socket, &self.nodes).await
    }

    /// Asserts the plugin holds no volume and nothing is mounted in its directory.
    pub(crate) async fn assert_clean(&self) {
        let volumes = ok(self.plugin.controller().list_volumes(v1::ListVolumesRequest::default()).await);
        assert!(volumes.entries.is_empty(), "volumes left behind: {:?}", volumes.entries);
        let left = mounts::mounts_under(self.plugin.dir.path());
        assert!(left.is_empty(), "mounts left: {left:?}");
    }
}

/// Connects the harness to a controller socket and node endpoints, as `csi-conform run` does.
pub(crate) async fn engine(controller: &Path, nodes: &[Endpoint]) -> suite::Plugin {
    let options = ClientOptions { connect_timeout: Duration::from_secs(10), ..ClientOptions::default() };
    let controller_endpoint = Endpoint::Unix(controller.to_path_buf());
    let ctl = Connection::connect(controller_endpoint.clone(), options.clone()).await.expect("connect the controller");
    let mut conns = Vec::new();
    for e in nodes {
        conns.push(if *e == controller_endpoint {
            ctl.clone()
        } else {
            Connection::connect(e.clone(), options.clone()).await.expect("connect a node")
        });
    }
    let fingerprint = Fingerprint::collect(Some(&ctl), &conns).await.expect("fingerprint");
    suite::Plugin { controller: Some(ctl), nodes: conns, fingerprint }
}

fn lifecycle_suite() -> Vec<suite::Suite> {
    suite::builtin().into_iter().filter(|s| s.id() == "lifecycle").collect()
}

fn config(work: &TempDir, focus: &str) -> RunConfig {
    RunConfig {
        idempotency_count: 3,
        seed: 5,
        work_dir: work.path().join("work"),
        focus: if focus.is_empty() { Vec::new() } else { vec![regex::Regex::new(focus).unwrap()] },
        ..RunConfig::default()
    }
}

async fn run(plugin: &suite::Plugin, config: &RunConfig) -> RunReport {
    let report = suite::run(plugin, &lifecycle_suite(), config).await;
    assert_work_dir_clean(config);
    report
}

/// Asserts a run left nothing mounted and no scenario directory in its work directory.
pub(crate) fn assert_work_dir_clean(config: &RunConfig) {
    let left = mounts::mounts_under(&config.work_dir);
    assert!(left.is_empty(), "mounts left under the work directory: {left:?}");
    let dirs: Vec<_> = std::fs::read_dir(&config.work_dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(dirs.is_empty(), "scenario directories left behind: {dirs:?}");
}

fn scenario<'a>(report: &'a RunReport, id: &str) -> &'a csi_conform::report::ScenarioResult {
    report.scenario(id).unwrap_or_else(|| panic!("{id} did not run"))
}

/// The scenarios that did not pass, as `id: outcome`.
fn non_passes(report: &RunReport) -> BTreeMap<String, Severity> {
    not_passed(report).into_iter().map(|(id, (o, _))| (id, o)).collect()
}

fn expected(pairs: &[(&str, Severity)]) -> BTreeMap<String, Severity> {
    pairs.iter().map(|(id, s)| ((*id).to_owned(), *s)).collect()
}

#[tokio::test]
async fn lifecycles_pass_on_two_nodes_in_mount_and_block_modes_and_leave_nothing_behind() {
    if !can_mount("lifecycles_pass_on_two_nodes_in_mount_and_block_modes_and_leave_nothing_behind") {
        return;
    }
    let cluster = Cluster::start(Config::default(), 2).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    for access in [AccessType::Mount, AccessType::Block] {
        let report = run(&engine, &RunConfig { access_type: access, ..config(&work, "") }).await;
        assert_eq!(
            non_passes(&report),
            expected(&[
                ("lifecycle.restart.between-stage-and-publish", Severity::Skip),
                ("lifecycle.secrets", Severity::Skip)
            ]),
            "{access:?}: {:#?}",
            not_passed(&report)
        );
        // Both nodes are local, so every path was checked on this host.
        let skipped_checks: Vec<_> =
            report.suites.iter().flat_map(|s| &s.scenarios).flat_map(|s| &s.findings).filter(|f| f.severity == Severity::Skip).collect();
        assert!(skipped_checks.is_empty(), "{skipped_checks:?}");
    }
    cluster.assert_clean().await;
}

/// The full `--idempotency-count` is spent where csi-sanity spends it (issue 19): its
/// idempotency test `node.lifecycle.idempotent` (case 90) sends ControllerPublishVolume,
/// NodeStageVolume and NodePublishVolume that many times, while every lifecycle variant,
/// `mount.read-write` included, sends each state-changing call twice whatever the count.
/// Broken once by dropping `repeat_at_most: 2` from `mount.read-write` in
/// suites/lifecycle.yaml: it then sent 56 more RPCs at 10 than at 3.
#[tokio::test]
async fn the_idempotency_count_is_spent_in_the_idempotency_scenario_and_every_variant_sends_twice() {
    if !can_mount("the_idempotency_count_is_spent_in_the_idempotency_scenario_and_every_variant_sends_twice") {
        return;
    }
    let cluster = Cluster::start(Config::default(), 1).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let focus = r"^(lifecycle\.mount\.read-(write|only)|node\.lifecycle\.idempotent)$";
    let suites: Vec<suite::Suite> =
        suite::builtin().into_iter().filter(|s| s.id() == "lifecycle" || s.id() == "node").collect();
    let mut sent = Vec::new();
    for count in [3, 10] {
        let config = RunConfig { idempotency_count: count, ..config(&work, focus) };
        let report = suite::run(&engine, &suites, &config).await;
        assert_work_dir_clean(&config);
        assert!(non_passes(&report).is_empty(), "{:#?}", not_passed(&report));
        let rpcs = |id| scenario(&report, id).rpcs;
        sent.push([rpcs("lifecycle.mount.read-write"), rpcs("lifecycle.mount.read-only"), rpcs("node.lifecycle.idempotent")]);
    }
    let ([read_write_3, read_only_3, idempotent_3], [read_write_10, read_only_10, idempotent_10]) = (sent[0], sent[1]);
    assert_eq!(read_write_3, read_write_10, "mount.read-write sends the same at any --idempotency-count");
    assert_eq!(read_only_3, read_only_10, "mount.read-only sends the same at any --idempotency-count");
    // Seven more sends of each of ControllerPublishVolume, NodeStageVolume, NodePublishVolume.
    assert_eq!(idempotent_10 - idempotent_3, 7 * 3, "node.lifecycle.idempotent follows --idempotency-count");
    cluster.assert_clean().await;
}

fn distinct_secrets() -> BTreeMap<String, BTreeMap<String, String>> {
    SecretKey::ALL
        .iter()
        .map(|k| (k.as_str().to_owned(), BTreeMap::from([("token".to_owned(), format!("s3cret-for-{}", k.as_str()))])))
        .collect()
}

fn as_secrets(maps: &BTreeMap<String, BTreeMap<String, String>>) -> Secrets {
    Secrets::from_maps(maps.iter().map(|(k, v)| (SecretKey::from_name(k).expect("a csi-sanity key"), v.clone())))
}

#[tokio::test]
async fn a_plugin_that_insists_on_context_and_secrets_passes_because_the_harness_forwards_them() {
    if !can_mount("a_plugin_that_insists_on_context_and_secrets_passes_because_the_harness_forwards_them") {
        return;
    }
    let secrets = distinct_secrets();
    let plugin_config = Config {
        require_context: true,
        quirks: [Quirk::RequireVolumeContext].into(),
        secrets: Some(as_secrets(&secrets)),
        ..Config::default()
    };
    let cluster = Cluster::start(plugin_config, 2).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let with_secrets = RunConfig { secrets: secrets.clone(), ..config(&work, "") };
    let report = run(&engine, &with_secrets).await;
    assert_eq!(
        non_passes(&report),
        expected(&[
            ("lifecycle.no-secrets", Severity::Skip),
            ("lifecycle.restart.between-stage-and-publish", Severity::Skip)
        ]),
        "{:#?}",
        not_passed(&report)
    );
    let why = scenario(&report, "lifecycle.no-secrets").skip_reason.clone().unwrap();
    assert!(why.contains("CreateVolumeSecret") && why.contains("UNAUTHENTICATED"), "{why}");
    let json = csi_conform::report::to_json(&report);
    assert!(!json.contains("s3cret"), "a secret value reached the report");

    // Each RPC must get exactly its own key's map: NodeStageVolume given NodePublishVolume's
    // secrets is refused, and nothing before it is.
    let mut swapped = secrets.clone();
    let stage = swapped.remove("NodeStageVolumeSecret").unwrap();
    let publish = swapped.insert("NodePublishVolumeSecret".into(), stage).unwrap();
    swapped.insert("NodeStageVolumeSecret".into(), publish);
    let report = run(&engine, &RunConfig { secrets: swapped, ..config(&work, "^lifecycle\\.mount\\.read-write$") }).await;
    let failure = &scenario(&report, "lifecycle.mount.read-write").findings[0];
    assert_eq!(failure.severity, Severity::Fail, "{failure:?}");
    assert_eq!((failure.rpc.as_deref(), failure.got.as_deref()), (Some("NodeStageVolume"), Some("PERMISSION_DENIED")), "{failure:?}");
    assert!(!csi_conform::report::to_json(&report).contains("s3cret"));

    // Without the secrets file the first RPC that needs secrets is refused.
    let report = run(&engine, &config(&work, "^lifecycle\\.mount\\.read-write$")).await;
    let failure = &scenario(&report, "lifecycle.mount.read-write").findings[0];
    assert_eq!((failure.rpc.as_deref(), failure.got.as_deref()), (Some("CreateVolume"), Some("UNAUTHENTICATED")), "{failure:?}");
    cluster.assert_clean().await;
}

#[tokio::test]
async fn a_plugin_that_lets_a_second_writer_in_fails_the_single_writer_scenarios() {
    if !can_mount("a_plugin_that_lets_a_second_writer_in_fails_the_single_writer_scenarios") {
        return;
    }
    let cluster = Cluster::start(Config { quirks: [Quirk::AllowSecondWriter].into(), ..Config::default() }, 2).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let report = run(&engine, &config(&work, "two-nodes|second-target")).await;
    assert_eq!(
        non_passes(&report),
        expected(&[
            ("lifecycle.single-node-single-writer.second-target-refused", Severity::Fail),
            ("lifecycle.two-nodes.single-node-writer-refused", Severity::Fail)
        ])
    );
    let node = &scenario(&report, "lifecycle.two-nodes.single-node-writer-refused").findings[0];
    assert!(node.message.contains("to a second node node-1 succeeded; it must fail with FAILED_PRECONDITION"), "{node:?}");
    assert_eq!((node.rpc.as_deref(), node.got.as_deref()), (Some("ControllerPublishVolume"), Some("OK")));
    let target = &scenario(&report, "lifecycle.single-node-single-writer.second-target-refused").findings[0];
    assert!(target.message.contains("at a second target path succeeded"), "{target:?}");
    // What the misbehaving plugin let through was torn down all the same.
    cluster.assert_clean().await;
}

#[tokio::test]
async fn publications_the_host_does_not_show_fail_the_lifecycle() {
    if !can_mount("publications_the_host_does_not_show_fail_the_lifecycle") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let focus = "^lifecycle\\.(mount\\.read-write|mount\\.read-write\\.mount-flags|block\\.read-only)$";

    // A plugin that answers OK but mounts nothing.
    let unmounted = Cluster::start(Config { real_mounts: false, ..Config::default() }, 1).await;
    let report = run(&unmounted.engine().await, &config(&work, focus)).await;
    assert_eq!(
        non_passes(&report),
        expected(&[
            ("lifecycle.block.read-only", Severity::Fail),
            ("lifecycle.mount.read-write", Severity::Fail),
            ("lifecycle.mount.read-write.mount-flags", Severity::Fail)
        ])
    );
    let finding = &scenario(&report, "lifecycle.mount.read-write").findings[0];
    assert!(finding.message.contains("is not a mount point: the volume is not mounted on the host"), "{finding:?}");
    unmounted.assert_clean().await;

    // A plugin that mounts without the capability's flags.
    let flagless = Cluster::start(Config { quirks: [Quirk::IgnoreMountFlags].into(), ..Config::default() }, 1).await;
    let report = run(&flagless.engine().await, &config(&work, focus)).await;
    assert_eq!(non_passes(&report), expected(&[("lifecycle.mount.read-write.mount-flags", Severity::Fail)]));
    let finding = &scenario(&report, "lifecycle.mount.read-write.mount-flags").findings[0];
    assert_eq!(finding.kind, "mount-flags");
    assert!(finding.message.contains("lacks the mount options nosuid, nodev"), "{finding:?}");
    flagless.assert_clean().await;
}

/// Records, at the moment each NodePublishVolume is answered, the options of the mount at its
/// target as this host's mount table shows them.
#[derive(Default)]
struct MountOptionsSeen(Mutex<Vec<(String, Vec<String>)>>);

impl ResourceObserver for MountOptionsSeen {
    fn registered(&self, tracked: &Tracked) {
        if let Resource::NodePublication { target_path, .. } = &tracked.resource {
            let options = mounts::mount_entry(Path::new(target_path)).map(|m| m.mount_options).unwrap_or_default();
            self.0.lock().unwrap().push((tracked.scenario.clone(), options));
        }
    }
    fn released(&self, _: &Tracked) {}
}

#[tokio::test]
async fn the_requests_mount_flags_replace_the_volumes_on_the_way_to_the_node() {
    if !can_mount("the_requests_mount_flags_replace_the_volumes_on_the_way_to_the_node") {
        return;
    }
    let cluster = Cluster::start(Config::default(), 1).await;
    let seen = Arc::new(MountOptionsSeen::default());
    let work = tempfile::tempdir().unwrap();
    let config = RunConfig {
        observer: Some(seen.clone()),
        ..config(&work, "mount\\.(volume-mount-flags|request-mount-flags-replace-the-volumes)$")
    };
    let report = run(&cluster.engine().await, &config).await;
    assert!(non_passes(&report).is_empty(), "{:#?}", not_passed(&report));
    let seen = seen.0.lock().unwrap().clone();
    let options = |id: &str| seen.iter().find(|(s, _)| s == id).map(|(_, o)| o.clone()).unwrap_or_else(|| panic!("{id}: {seen:?}"));
    let volume_only = options("lifecycle.mount.volume-mount-flags");
    assert!(volume_only.contains(&"noexec".to_owned()), "the volume's flags reach the node when the request has none: {volume_only:?}");
    let replaced = options("lifecycle.mount.request-mount-flags-replace-the-volumes");
    assert!(replaced.contains(&"nosuid".to_owned()) && replaced.contains(&"nodev".to_owned()), "{replaced:?}");
    assert!(!replaced.contains(&"noexec".to_owned()), "the volume's noexec must be replaced, not merged: {replaced:?}");
    cluster.assert_clean().await;
}

/// The reference plugin binary, serving as a node plugin.
fn node_plugin_args(node_id: &str, state: &Path, endpoint: &str) -> Vec<String> {
    let mut args: Vec<String> = ["reference-plugin", "--node-only", "--node-id", node_id, "--endpoint", endpoint].map(String::from).to_vec();
    args.extend(["--state-dir".to_owned(), state.display().to_string()]);
    args
}

/// Stops a plugin process by its id with SIGTERM and waits for it.
async fn stop_process(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM);
    }
    if tokio::time::timeout(Duration::from_secs(10), child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

const REMOTE_PATHS: &str = r#"
suite: remote
title: path-state on a remote node
scenarios:
  - id: kinds
    title: File kinds of a remote node's paths
    steps:
      - check: path-state
        args: { path: "${paths.dir}", is: directory, node: 1 }
      - check: path-state
        args: { path: "${paths.target}", is: absent, node: 1 }
  - id: mounts
    title: Mount states of a remote node's paths
    steps:
      - check: path-state
        args: { path: "${paths.dir}", is: not-mount-point, node: 1 }
"#;

#[tokio::test]
async fn a_node_in_another_network_namespace_is_reached_over_tcp_and_its_paths_through_the_command() {
    let test = "a_node_in_another_network_namespace_is_reached_over_tcp_and_its_paths_through_the_command";
    if !can_mount(test) {
        return;
    }
    let ns = match NetNs::create() {
        Ok(ns) => ns,
        // Only for the precondition: no `ip` to make one, or the kernel refusing it.
        Err(why) if why.starts_with("ip: ") || why.contains("Operation not permitted") => {
            crate::support::skip(test, crate::support::Precondition::Namespaces, &format!("no network namespace: {why}"));
            return;
        }
        Err(why) => panic!("making a network namespace failed: {why}"),
    };
    let state = tempfile::tempdir().unwrap();
    let plugin = TestPlugin::start(Config { node_id: "node-0".into(), state_dir: Some(state.path().to_path_buf()), ..Config::default() }).await;
    // Inside the namespace, the node plugin listens on that namespace's own loopback.
    const PORT: u16 = 10000;
    let mut remote = ns
        .command(env!("CARGO_BIN_EXE_csi-conform"))
        .args(node_plugin_args("remote-node", state.path(), &format!("tcp://127.0.0.1:{PORT}")))
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the node plugin in the namespace");
    ns.wait_for_listener(PORT, Duration::from_secs(20)).await.expect("the namespaced node plugin listens");
    let forwarded = ns.forward(PORT).await;
    let remote_endpoint = Endpoint::Tcp { host: "127.0.0.1".into(), port: forwarded.port() };
    let engine = engine(&plugin.socket, &[Endpoint::Unix(plugin.socket.clone()), remote_endpoint]).await;
    assert_eq!(engine.fingerprint.nodes[1].node_id, "remote-node");

    let work = tempfile::tempdir().unwrap();
    let focus = "two-nodes\\.multi-node";
    let report = run(&engine, &config(&work, focus)).await;
    assert!(non_passes(&report).is_empty(), "{:#?}", not_passed(&report));
    let notes: Vec<_> = scenario(&report, "lifecycle.two-nodes.multi-node-multi-writer")
        .findings
        .iter()
        .filter(|f| f.kind == "path-check-skipped")
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].message.contains("node endpoint 1 (tcp://127.0.0.1:") && notes[0].message.contains("--check-path-cmd"), "{:?}", notes[0]);

    // With --check-path-cmd the remote node's paths are asked about (the namespace shares
    // this file system, so a plain stat answers for it).
    let log = work.path().join("asked.log");
    let script = work.path().join("check-path.sh");
    std::fs::write(
        &script,
        format!(
            "echo \"$1\" >> {}\nif [ -d \"$1\" ]; then echo directory; elif [ -e \"$1\" ]; then echo file; else echo not_found; fi\n",
            log.display()
        ),
    )
    .unwrap();
    let with_command = RunConfig {
        check_path_cmd: Some(PathCommand { command: format!("sh {}", script.display()), timeout: Duration::from_secs(10) }),
        ..config(&work, focus)
    };
    let report = run(&engine, &with_command).await;
    assert!(non_passes(&report).is_empty(), "{:#?}", not_passed(&report));
    // Only the remote node's mount checks are skipped, once per scenario, saying why.
    let all_findings: Vec<_> = report.suites.iter().flat_map(|s| &s.scenarios).flat_map(|s| &s.findings).collect();
    assert!(!all_findings.is_empty());
    for f in &all_findings {
        assert_eq!(f.kind, "mount-check-skipped", "{f:?}");
        assert!(f.message.contains("node 1's") && f.message.contains("--check-path-cmd only tells file types"), "{f:?}");
    }
    let asked = std::fs::read_to_string(&log).unwrap();
    for wanted in ["/node1/staging", "/node1/target"] {
        assert!(asked.lines().any(|l| l.ends_with(wanted)), "{wanted} was not asked about: {asked}");
    }
    assert!(!asked.contains("/target2") && !asked.lines().any(|l| l.ends_with("/staging") && !l.contains("/node1/")), "local paths are checked here, not through the command: {asked}");

    // path-state asks the command about a remote node's paths too, but cannot learn mount
    // states from it.
    let remote_paths = suite::load_str("remote.yaml", REMOTE_PATHS).unwrap();
    let unfocused = RunConfig { focus: Vec::new(), ..with_command };
    let report = suite::run(&engine, std::slice::from_ref(&remote_paths), &unfocused).await;
    assert_eq!(scenario(&report, "remote.kinds").outcome, Severity::Pass, "{report:#?}");
    let why = scenario(&report, "remote.mounts").skip_reason.clone().unwrap_or_default();
    assert!(why.contains("--check-path-cmd only tells file types"), "{why}");
    let report = suite::run(&engine, &[remote_paths], &config(&work, "")).await;
    let why = scenario(&report, "remote.kinds").skip_reason.clone().unwrap_or_default();
    assert!(why.contains("is reached over TCP") && why.contains("give --check-path-cmd"), "{why}");

    stop_process(&mut remote).await;
    let volumes = ok(plugin.controller().list_volumes(v1::ListVolumesRequest::default()).await);
    assert!(volumes.entries.is_empty(), "{:?}", volumes.entries);
    assert!(mounts::mounts_under(plugin.dir.path()).is_empty());
    drop(ns);
}

#[tokio::test]
async fn a_node_plugin_restarted_between_stage_and_publish_still_publishes_and_cleans_up() {
    if !can_mount("a_node_plugin_restarted_between_stage_and_publish_still_publishes_and_cleans_up") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let plugin = TestPlugin::start(Config { mode: Mode::ControllerOnly, state_dir: Some(state.path().to_path_buf()), ..Config::default() }).await;
    let dir = plugin.dir.path();
    let socket = dir.join("node.sock");
    let pid_file = dir.join("node.pid");
    let start = format!(
        "{} {} >/dev/null 2>&1 & echo $! > {}",
        env!("CARGO_BIN_EXE_csi-conform"),
        node_plugin_args("node-0", state.path(), &socket.display().to_string()).join(" "),
        pid_file.display()
    );
    // The restart command: stop the running node plugin (it removes its socket on the way
    // out), then start a new one on the same socket and state.
    let restart = format!(
        "kill $(cat {pid}) && while [ -S {sock} ]; do sleep 0.05; done && ({start})",
        pid = pid_file.display(),
        sock = socket.display()
    );
    let status = tokio::process::Command::new("sh").arg("-c").arg(&start).status().await.unwrap();
    assert!(status.success());
    let first_pid = std::fs::read_to_string(&pid_file).unwrap();

    let engine = engine(&plugin.socket, &[Endpoint::Unix(socket.clone())]).await;
    let work = tempfile::tempdir().unwrap();
    let mut config = config(&work, "restart");
    config.restart_cmd = Some(restart);
    config.options.insert("restart".into());
    let report = run(&engine, &config).await;
    let last_pid = std::fs::read_to_string(&pid_file).unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(last_pid.trim().parse().unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    );
    assert!(non_passes(&report).is_empty(), "{:#?}", not_passed(&report));
    assert_ne!(first_pid, last_pid, "the node plugin was really restarted");
    let volumes = ok(plugin.controller().list_volumes(v1::ListVolumesRequest::default()).await);
    assert!(volumes.entries.is_empty(), "{:?}", volumes.entries);
    let started = Instant::now();
    while socket.exists() && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(mounts::mounts_under(dir).is_empty());
}

#[tokio::test]
async fn the_default_run_tests_the_reference_plugin_on_two_nodes() {
    if !can_mount("the_default_run_tests_the_reference_plugin_on_two_nodes") {
        return;
    }
    let cwd = tempfile::tempdir().unwrap();
    let work: PathBuf = cwd.path().join("work");
    let work = work.display().to_string();
    let focus = "^lifecycle\\.two-nodes\\.|^extras\\.node\\.distinct-ids$";
    let args = ["run", "--focus", focus, "--idempotency-count", "2", "--work-dir", &work, "--seed", "9", "-q"];
    let out = csi_conform(&args, cwd.path()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{}\n{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(stderr.contains("controller and 2 nodes"), "{stderr}");
    let report = csi_conform::report::from_json(&std::fs::read_to_string(cwd.path().join("reports/report.json")).unwrap()).unwrap();
    let all = outcomes(&report);
    assert_eq!(all.len(), 4, "{all:#?}");
    assert!(all.values().all(|(o, _)| *o == Severity::Pass), "{all:#?}");
    assert!(mounts::mounts_under(Path::new(&work)).is_empty());
    let left: Vec<_> = std::fs::read_dir(&work).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "left in the work directory: {left:?}");
    // The reference plugins' sockets and shared state went with them.
    let socket = stderr.split("unix://").nth(1).and_then(|rest| rest.split([',', ')']).next()).expect("the socket is named");
    let reference_dir = Path::new(socket).parent().unwrap();
    // In memory where there is room (tmpfs /dev/shm), else the system's temporary directory.
    assert!(reference_dir.starts_with(std::env::temp_dir()) || reference_dir.starts_with("/dev/shm"), "{socket}");
    assert!(!reference_dir.exists(), "{} was left behind", reference_dir.display());

    let out = csi_conform(&["run", "--check-path-cmd", " ", "--endpoint", "/nonexistent.sock"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--check-path-cmd is empty"));
}

#[tokio::test]
async fn the_binaries_end_to_end_forward_context_and_secrets_and_never_print_a_secret() {
    if !can_mount("the_binaries_end_to_end_forward_context_and_secrets_and_never_print_a_secret") {
        return;
    }
    let cwd = tempfile::tempdir().unwrap();
    let secrets_file = cwd.path().join("secrets.yaml");
    let text: String = distinct_secrets()
        .iter()
        .map(|(key, map)| format!("{key}:\n  token: {}\n", map["token"]))
        .collect();
    std::fs::write(&secrets_file, text).unwrap();
    std::fs::set_permissions(&secrets_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let socket = cwd.path().join("plugin.sock");
    let mut plugin = tokio::process::Command::new(env!("CARGO_BIN_EXE_csi-conform"))
        .args(["reference-plugin", "--require-context", "--quirk", "require-volume-context", "--require-secrets"])
        .arg(&secrets_file)
        .arg("--endpoint")
        .arg(&socket)
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the reference plugin binary");
    let socket_text = socket.display().to_string();
    let work = cwd.path().join("work").display().to_string();
    let args = [
        "-vvv", "run", "--endpoint", &socket_text, "--secrets", "secrets.yaml", "--focus", "^lifecycle\\.",
        "--idempotency-count", "2", "--work-dir", &work, "--seed", "11",
    ];
    let out = csi_conform(&args, cwd.path()).await;
    stop_process(&mut plugin).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", &stderr[stderr.len().saturating_sub(4000)..]);
    assert!(stdout.contains("PASS  lifecycle.secrets"), "{stdout}");
    assert!(stdout.contains("SKIP  lifecycle.no-secrets"), "{stdout}");
    assert!(stderr.contains("NodeStageVolume"), "-vvv logs the calls");
    let mut outputs = vec![("stdout".to_owned(), stdout.into_owned()), ("stderr".to_owned(), stderr.into_owned())];
    for file in ["junit.xml", "report.json", "report.html", "journal.jsonl"] {
        outputs.push((file.to_owned(), std::fs::read_to_string(cwd.path().join("reports").join(file)).unwrap()));
    }
    for (name, text) in &outputs {
        assert!(!text.contains("s3cret"), "a secret value is in {name}");
    }
}
