//! `csi-conform agent` on simulated hosts: a reference node plugin with a mount namespace of
//! its own and an agent beside it, reached over mutual TLS. The agent forwards the plugin's
//! calls unchanged, answers for mounts from the plugin's namespace, refuses paths outside its
//! work directory and clients without the run's certificate, and undoes a run's node-side
//! work (markers, publications, stagings) once the run's lease lapses.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use csi_conform::{
    agent::{client::AgentLink, lease::Work, tls, wire},
    client::{ClientOptions, Connection, Endpoint},
    mounts,
    proto::v1::{self, volume_capability::access_mode::Mode},
    suite::marker,
};
use tempfile::TempDir;
use tokio::process::Child;

use crate::support::{bin, create_req, csi_conform, mount_cap, netns::NetNs, ok};

/// One simulated host: a node plugin (its own mount namespace; in its own network namespace
/// when `ns` is set) and an agent beside it.
#[allow(dead_code)] // held for their lifetimes (killed on drop)
pub struct Host {
    pub ns: Option<NetNs>,
    pub plugin: Child,
    pub plugin_pid: i32,
    pub agent: Child,
    /// Where the run reaches the agent.
    pub address: Endpoint,
    pub log: PathBuf,
}

/// The files every host of one test shares: the reference plugins' state, the run's work
/// directory (inside the agents'), the certificates.
pub struct Cluster {
    pub dir: TempDir,
    pub certs: PathBuf,
    pub work: PathBuf,
    pub state: PathBuf,
}

impl Cluster {
    pub fn new() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let certs = dir.path().join("certs");
        tls::write_certs(&certs).unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let state = dir.path().join("state");
        Cluster { certs, work, state, dir }
    }

    /// Starts host `n` (1-based): its plugin (`controller`: controller and node), its agent.
    /// In a network namespace of its own when `netns`, reached through a forward of its
    /// loopback; else on a unix socket. `None` when this machine cannot (said why).
    pub async fn host(&self, test: &str, n: usize, controller: bool, netns: bool) -> Option<Host> {
        self.host_with(test, n, controller, netns, &[]).await
    }

    /// [`Self::host`] with extra arguments for its plugin.
    pub async fn host_with(&self, test: &str, n: usize, controller: bool, netns: bool, extra: &[&str]) -> Option<Host> {
        if !crate::support::can_mount(test, "the node plugin mounts in a mount namespace of its own") {
            return None;
        }
        let ns = if netns {
            match NetNs::create() {
                Ok(ns) => Some(ns),
                Err(e) => {
                    crate::support::skip(test, crate::support::Precondition::Namespaces, &e);
                    return None;
                }
            }
        } else {
            None
        };
        let command = |ns: &Option<NetNs>| match ns {
            Some(ns) => ns.command(bin()),
            None => tokio::process::Command::new(bin()),
        };
        let socket = self.dir.path().join(format!("host-{n}.sock"));
        let log = self.dir.path().join(format!("host-{n}.log"));
        let mut plugin = command(&ns);
        plugin
            .args(["reference-plugin", "--private-mounts", "--node-id", &format!("node-{n}"), "--state-dir"])
            .arg(&self.state)
            .arg("--endpoint")
            .arg(&socket)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .kill_on_drop(true);
        if !controller {
            plugin.arg("--node-only");
        }
        let plugin = plugin.spawn().expect("start the reference plugin");
        wait_for(&socket).await;
        let plugin_pid = csi_conform::suite::socket_peer(&socket).await.unwrap().expect("the plugin's pid");
        let (listen, address) = match &ns {
            Some(_) => ("tcp://127.0.0.1:7443".to_owned(), None),
            None => {
                let path = self.dir.path().join(format!("agent-{n}.sock"));
                (format!("unix://{}", path.display()), Some(Endpoint::Unix(path)))
            }
        };
        let agent = command(&ns)
            .args(["agent", "--listen", &listen, "--plugin-endpoint"])
            .arg(&socket)
            .arg("--work-dir")
            .arg(&self.work)
            .arg("--tls-dir")
            .arg(&self.certs)
            .stdout(Stdio::null())
            .stderr(std::fs::File::options().append(true).open(&log).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("start the agent");
        let address = match (&ns, address) {
            (Some(ns), _) => {
                ns.wait_for_listener(7443, Duration::from_secs(60)).await.unwrap();
                let at = ns.forward(7443).await;
                Endpoint::Tcp { host: at.ip().to_string(), port: at.port() }
            }
            (None, Some(Endpoint::Unix(path))) => {
                wait_for(&path).await;
                Endpoint::Unix(path)
            }
            _ => unreachable!(),
        };
        Some(Host { ns, plugin, plugin_pid, agent, address, log })
    }
}

async fn wait_for(path: &Path) {
    let started = Instant::now();
    while !path.exists() {
        // Only turns a hang into a failure.
        assert!(started.elapsed() < Duration::from_secs(60), "{} never appeared", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Host {
    /// The run's link to this host's agent, with the run's certificate.
    pub async fn link(&self, cluster: &Cluster) -> AgentLink {
        let tls = tls::client_config(&cluster.certs).unwrap();
        AgentLink::connect(&self.address, Some(tls), Duration::from_secs(30)).await.unwrap()
    }

    /// What the plugin has mounted under `dir`, in its own mount namespace.
    pub fn mounts_under(&self, dir: &Path) -> Vec<PathBuf> {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        mounts::mounts_of(self.plugin_pid)
            .unwrap()
            .into_iter()
            .map(|m| m.mount_point)
            .filter(|m| m.starts_with(&dir))
            .collect()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The volume is staged and published through the agent, a marker written on it; then the
/// run stops renewing its lease. The agent undoes all of it in the plugin's own mount
/// namespace: nothing stays mounted there, the marker file is gone, and the agent is free.
#[tokio::test]
async fn a_lapsed_lease_undoes_the_runs_work_on_the_node() {
    let test = "agents::a_lapsed_lease_undoes_the_runs_work_on_the_node";
    let cluster = Cluster::new();
    let Some(host) = cluster.host(test, 1, true, false).await else { return };
    let link = host.link(&cluster).await;
    let facts = link.facts().await.unwrap();
    assert_eq!(facts.node_id, "node-1");
    assert_eq!(facts.plugin_pid, host.plugin_pid, "the agent found the plugin serving its socket");
    assert!(!facts.shared_namespace, "the plugin mounts in a namespace of its own: {facts:?}");
    assert_eq!(facts.max_volumes_per_node, 16);

    let controller = Connection::connect(Endpoint::Unix(cluster.dir.path().join("host-1.sock")), ClientOptions::default())
        .await
        .unwrap();
    let volume = ok(controller.controller().create_volume(create_req("lease", vec![mount_cap(Mode::SingleNodeWriter)])).await)
        .volume
        .unwrap();
    let scenario = cluster.work.join("run-1");
    let (staging, target) = (scenario.join("staging"), scenario.join("target"));

    // Without the lease the agent lets nothing change on the node.
    let stage = v1::NodeStageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(mount_cap(Mode::SingleNodeWriter)),
        ..Default::default()
    };
    let refused = raw_node(&link).node_stage_volume(tagged(stage.clone(), Some("run-a"))).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(refused.message().contains("no run holds this agent"), "{}", refused.message());

    let published = ok(controller
        .controller()
        .controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: volume.volume_id.clone(),
            node_id: facts.node_id.clone(),
            volume_capability: Some(mount_cap(Mode::SingleNodeWriter)),
            ..Default::default()
        })
        .await);
    let stage = v1::NodeStageVolumeRequest { publish_context: published.publish_context.clone(), ..stage };
    link.renew("run-a", Duration::from_secs(2)).await.unwrap();
    assert!(link.renew("run-b", Duration::from_secs(2)).await.unwrap_err().to_string().contains("run run-a holds this agent"));
    let mut node = raw_node(&link);
    ok(node.node_stage_volume(tagged(stage, Some("run-a"))).await);
    assert!(scenario.is_dir(), "the agent made the run's directory the node did not have");
    let publish = v1::NodePublishVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(mount_cap(Mode::SingleNodeWriter)),
        publish_context: published.publish_context.clone(),
        ..Default::default()
    };
    ok(node.node_publish_volume(tagged(publish, Some("run-a"))).await);
    let mut agent = link.client();
    let m = marker::Marker::new(1, "lease", "A");
    let written = agent
        .write_marker(wire::WriteMarkerRequest {
            run_id: "run-a".into(),
            target: target.display().to_string(),
            block: false,
            marker: Some(wire::Marker { label: m.label.clone(), bytes: m.bytes.clone() }),
            at: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(written.error.is_empty(), "{written:?}");
    let verified = agent
        .verify_marker(wire::VerifyMarkerRequest {
            target: target.display().to_string(),
            placement: written.placement,
            expected: Some(wire::Marker { label: m.label.clone(), bytes: m.bytes.clone() }),
            others: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(verified.intact, "{verified:?}");
    let mounted = host.mounts_under(&scenario);
    assert_eq!(mounted.len(), 2, "staging and target are mounted in the plugin's namespace: {mounted:?}");
    assert!(!mounts::mounts().unwrap().iter().any(|x| x.mount_point.starts_with(&scenario)), "and not in ours");
    let table = agent.mount_table(wire::MountTableRequest { resolve: vec![target.display().to_string()] }).await.unwrap().into_inner();
    let theirs = mounts::parse(&table.mountinfo).unwrap();
    assert!(theirs.iter().any(|x| x.mount_point.display().to_string() == table.resolved[0]), "the agent reads the plugin's table");

    // The run stops renewing (as a run that was killed): once the lease lapses, the agent
    // undoes the marker, the publication and the staging, in that order, and then says so in
    // its log (waited for too: the mounts go before the directories, and a loaded machine
    // once caught the directory still there between the two).
    let started = Instant::now();
    while !host.mounts_under(&scenario).is_empty() || !host.log().contains("lapsed: undid") {
        // Only turns a hang into a failure: the lease is 2 s.
        assert!(started.elapsed() < Duration::from_secs(60), "still mounted: {:?}\n{}", host.mounts_under(&scenario), host.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let facts = link.facts().await.unwrap();
    assert_eq!(facts.held_by, "", "the agent is free again");
    assert!(!target.join(marker::MARKER_FILE).exists(), "the marker is gone");
    assert!(!scenario.exists(), "the directories the agent made are gone: {:?}", std::fs::read_dir(&scenario).map(|d| d.count()));
    assert!(host.log().contains("lapsed: undid 4 piece(s)"), "{}", host.log());
    let _ = Work::Dir(PathBuf::new());
}

/// The tag of a run's calls through an agent: its lease id.
fn lease_tag(run: &str) -> Option<(&'static str, tonic::metadata::AsciiMetadataValue)> {
    Some((csi_conform::agent::LEASE_HEADER, run.parse().unwrap()))
}

/// A request carrying `run`'s lease tag (none: untagged).
fn tagged<T>(message: T, run: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some((key, value)) = run.and_then(lease_tag) {
        request.metadata_mut().insert(key, value);
    }
    request
}

/// A node client on the agent's channel that adds nothing to the calls.
fn raw_node(link: &AgentLink) -> v1::node_client::NodeClient<tonic::transport::Channel> {
    v1::node_client::NodeClient::new(link.channel())
}

/// The agent forwards only the calls of the run holding it: untagged, UNAUTHENTICATED;
/// tagged with another run's lease, PERMISSION_DENIED, before the plugin sees them (nothing
/// is made or mounted on the node); tagged with the holder's, forwarded, and what it did is
/// in that run's ledger, which its release undoes.
#[tokio::test]
async fn forwarded_calls_need_the_lease_of_the_run_holding_the_agent() {
    let test = "agents::forwarded_calls_need_the_lease_of_the_run_holding_the_agent";
    let cluster = Cluster::new();
    let Some(host) = cluster.host(test, 1, true, false).await else { return };
    let link = host.link(&cluster).await;
    link.renew("run-a", Duration::from_secs(60)).await.unwrap();
    let mut identity = v1::identity_client::IdentityClient::new(link.channel());
    let untagged = identity.get_plugin_info(tagged(v1::GetPluginInfoRequest {}, None)).await.unwrap_err();
    assert_eq!(untagged.code(), tonic::Code::Unauthenticated, "{untagged:?}");
    assert!(untagged.message().contains("carries no lease"), "{}", untagged.message());
    let other = identity.get_plugin_info(tagged(v1::GetPluginInfoRequest {}, Some("run-b"))).await.unwrap_err();
    assert_eq!(other.code(), tonic::Code::PermissionDenied, "{other:?}");
    assert!(other.message().contains("run run-a holds this agent"), "{}", other.message());
    let info = identity.get_plugin_info(tagged(v1::GetPluginInfoRequest {}, Some("run-a"))).await.unwrap().into_inner();
    assert!(!info.name.is_empty(), "the plugin's own answer came back: {info:?}");

    let controller = Connection::connect(Endpoint::Unix(cluster.dir.path().join("host-1.sock")), ClientOptions::default())
        .await
        .unwrap();
    let volume = ok(controller.controller().create_volume(create_req("tag", vec![mount_cap(Mode::SingleNodeWriter)])).await)
        .volume
        .unwrap();
    let published = ok(controller
        .controller()
        .controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: volume.volume_id.clone(),
            node_id: "node-1".into(),
            volume_capability: Some(mount_cap(Mode::SingleNodeWriter)),
            ..Default::default()
        })
        .await);
    let scenario = cluster.work.join("run-tag");
    let stage = v1::NodeStageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: scenario.join("staging").display().to_string(),
        volume_capability: Some(mount_cap(Mode::SingleNodeWriter)),
        publish_context: published.publish_context.clone(),
        ..Default::default()
    };
    let mut node = raw_node(&link);
    for run in [None, Some("run-b")] {
        let refused = node.node_stage_volume(tagged(stage.clone(), run)).await.unwrap_err();
        assert!(matches!(refused.code(), tonic::Code::Unauthenticated | tonic::Code::PermissionDenied), "{run:?}: {refused:?}");
        assert!(!scenario.exists(), "{run:?}: the refused call made nothing on the node");
        assert!(host.mounts_under(&scenario).is_empty(), "{run:?}: nor mounted anything");
    }
    node.node_stage_volume(tagged(stage.clone(), Some("run-a"))).await.unwrap();
    assert_eq!(host.mounts_under(&scenario).len(), 1, "the tagged call was forwarded and the plugin staged");
    assert!(
        link.client().facts(wire::FactsRequest {}).await.unwrap().into_inner().held_by == "run-a",
        "run-a still holds the agent"
    );
    let released = link.release("run-a").await.unwrap();
    assert!(released.undone.iter().any(|l| l.starts_with("NodeUnstageVolume")), "{released:?}");
    assert!(host.mounts_under(&scenario).is_empty(), "what run-a's calls did was undone with its lease");
    // The lease is gone: run-a's tag opens nothing any more.
    let lapsed = node.node_stage_volume(tagged(stage, Some("run-a"))).await.unwrap_err();
    assert_eq!(lapsed.code(), tonic::Code::PermissionDenied, "{lapsed:?}");
}

/// A call with a path outside the agent's work directory never reaches the plugin.
#[tokio::test]
async fn paths_outside_the_work_dir_are_refused() {
    let test = "agents::paths_outside_the_work_dir_are_refused";
    let cluster = Cluster::new();
    let Some(host) = cluster.host(test, 1, true, false).await else { return };
    let link = host.link(&cluster).await;
    link.renew("run-a", Duration::from_secs(30)).await.unwrap();
    let mut node = raw_node(&link);
    let outside = cluster.dir.path().join("elsewhere");
    let refused = node
        .node_unpublish_volume(tagged(
            v1::NodeUnpublishVolumeRequest { volume_id: "v".into(), target_path: outside.display().to_string() },
            Some("run-a"),
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    assert!(refused.message().contains("outside the agent's work directory"), "{}", refused.message());
    let sneaky = cluster.work.join("..").join("elsewhere");
    let refused = link.client().stat(wire::PathRequest { path: sneaky.display().to_string() }).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    // The plugin's own answers come back unchanged: NOT_FOUND for an unknown volume.
    let inside = cluster.work.join("t");
    let answer = node
        .node_unpublish_volume(tagged(
            v1::NodeUnpublishVolumeRequest { volume_id: "no-such".into(), target_path: inside.display().to_string() },
            Some("run-a"),
        ))
        .await;
    assert_eq!(answer.map(|_| tonic::Code::Ok).unwrap_or_else(|s| s.code()), tonic::Code::NotFound);
    link.release("run-a").await.unwrap();
}

/// Only the run that holds the CA's certificates is served: a client with another run's
/// certificate, or none, is refused at the handshake.
#[tokio::test]
async fn an_agent_refuses_a_client_without_the_runs_certificate() {
    let test = "agents::an_agent_refuses_a_client_without_the_runs_certificate";
    let cluster = Cluster::new();
    let Some(host) = cluster.host(test, 1, true, false).await else { return };
    // The run's own certificate works.
    assert_eq!(host.link(&cluster).await.facts().await.unwrap().node_id, "node-1");
    // Another run's certificates: signed by another CA.
    let other = tempfile::tempdir().unwrap();
    tls::write_certs(other.path()).unwrap();
    let mixed = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(std::fs::read(cluster.certs.join(tls::CA)).unwrap()))
        .identity(tonic::transport::Identity::from_pem(
            std::fs::read(other.path().join(tls::RUN_CERT)).unwrap(),
            std::fs::read(other.path().join(tls::RUN_KEY)).unwrap(),
        ))
        .domain_name(csi_conform::agent::AGENT_NAME);
    let no_cert = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(std::fs::read(cluster.certs.join(tls::CA)).unwrap()))
        .domain_name(csi_conform::agent::AGENT_NAME);
    for (what, config) in [("another run's certificate", mixed), ("no certificate", no_cert)] {
        let refused = match AgentLink::connect(&host.address, Some(config), Duration::from_secs(10)).await {
            Err(e) => e.to_string(),
            Ok(link) => link.facts().await.map(|f| format!("served: {f:?}")).unwrap_or_else(|e| e.to_string()),
        };
        assert!(!refused.starts_with("served"), "{what}: {refused}");
    }
    // Nor a plaintext client.
    let plain = AgentLink::connect(&host.address, None, Duration::from_secs(10)).await;
    let refused = match plain {
        Err(e) => e.to_string(),
        Ok(link) => link.facts().await.map(|f| format!("served: {f:?}")).unwrap_or_else(|e| e.to_string()),
    };
    assert!(!refused.starts_with("served"), "plaintext: {refused}");
    // And the agent did not trust another CA's agent certificate either way round: the run
    // refuses an agent its CA did not sign.
    let wrong_ca = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(std::fs::read(other.path().join(tls::CA)).unwrap()))
        .identity(tonic::transport::Identity::from_pem(
            std::fs::read(cluster.certs.join(tls::RUN_CERT)).unwrap(),
            std::fs::read(cluster.certs.join(tls::RUN_KEY)).unwrap(),
        ))
        .domain_name(csi_conform::agent::AGENT_NAME);
    let refused = match AgentLink::connect(&host.address, Some(wrong_ca), Duration::from_secs(10)).await {
        Err(e) => e.to_string(),
        Ok(link) => link.facts().await.map(|f| format!("served: {f:?}")).unwrap_or_else(|e| e.to_string()),
    };
    assert!(!refused.starts_with("served"), "an agent the run's CA did not sign: {refused}");
}

/// Every scenario's outcome and skip reason in the JSON report at `path`.
fn verdicts(path: &Path) -> BTreeMap<String, (String, Option<String>)> {
    let report = csi_conform::report::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .map(|s| (s.id.clone(), (format!("{:?}", s.outcome), s.skip_reason.clone())))
        .collect()
}

/// The arguments of a run through the agents of `hosts` (host 1 serves the controller).
fn agent_run_args(cluster: &Cluster, hosts: &[Host], out: &Path) -> Vec<String> {
    let agents: Vec<String> = hosts.iter().map(|h| h.address.to_string()).collect();
    vec![
        "run".into(),
        "--controller-endpoint".into(),
        format!("unix://{}", cluster.dir.path().join("host-1.sock").display()),
        "--node-agents".into(),
        agents.join(","),
        "--agent-tls-dir".into(),
        cluster.certs.display().to_string(),
        "--json".into(),
        out.join("agents.json").display().to_string(),
        "--junit".into(),
        out.join("agents.xml").display().to_string(),
        "--html".into(),
        out.join("agents.html").display().to_string(),
        "--journal".into(),
        out.join("agents.journal").display().to_string(),
    ]
}

/// Three simulated hosts, each a network namespace of its own (the plugin and the agent
/// reach nothing but that namespace's loopback; the run reaches each agent through a
/// forward of it) and mount namespaces of their own: the run through their agents gives the
/// verdicts of the single-host two-node run, scenario by scenario, skip reasons included;
/// every node's mounts were verified on that node; and nothing is left mounted on any host.
#[tokio::test]
async fn a_run_through_agents_on_three_hosts_gives_the_single_host_verdicts() {
    let test = "agents::a_run_through_agents_on_three_hosts_gives_the_single_host_verdicts";
    let cluster = Cluster::new();
    let mut hosts = Vec::new();
    for n in 1..=3 {
        let Some(host) = cluster.host(test, n, n == 1, true).await else { return };
        hosts.push(host);
    }
    let out = tempfile::tempdir().unwrap();
    let args = agent_run_args(&cluster, &hosts, out.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let through_agents = csi_conform(&args, out.path()).await;
    let stderr = String::from_utf8_lossy(&through_agents.stderr);
    assert_eq!(through_agents.status.code(), Some(0), "{stderr}\n{}", String::from_utf8_lossy(&through_agents.stdout));
    for (i, host) in hosts.iter().enumerate() {
        assert!(stderr.contains(&format!("node {i}: agent {} on host", host.address)), "{stderr}");
    }
    let single = csi_conform(&["run", "--json", "single.json", "--junit", "single.xml", "--html", "single.html", "--journal", "single.journal"], out.path()).await;
    assert_eq!(single.status.code(), Some(0), "{}", String::from_utf8_lossy(&single.stderr));
    let (ours, theirs) = (verdicts(&out.path().join("agents.json")), verdicts(&out.path().join("single.json")));
    assert_eq!(ours.len(), theirs.len());
    let differ: Vec<_> = theirs.iter().filter(|(id, v)| ours.get(*id) != Some(v)).map(|(id, v)| (id, v, ours.get(id))).collect();
    assert!(differ.is_empty(), "verdicts that differ (single host, agents): {differ:#?}");

    let report = csi_conform::report::from_json(&std::fs::read_to_string(out.path().join("agents.json")).unwrap()).unwrap();
    assert_eq!(report.mounts.len(), 3, "{:?}", report.mounts);
    for (i, (site, host)) in report.mounts.iter().zip(&hosts).enumerate() {
        assert_eq!(site.node, i);
        assert_eq!(site.pid, Some(host.plugin_pid), "node {i}'s mounts were verified in its own plugin's namespace");
        assert!(site.skipped.is_none(), "{site}");
        assert!(site.agent.as_deref().is_some_and(|a| a.contains(&format!("node id node-{}", i + 1))), "{site}");
    }
    for host in &hosts {
        assert!(host.mounts_under(&cluster.work).is_empty(), "left on a host: {:?}", host.mounts_under(&cluster.work));
    }
}

/// The run is killed (SIGKILL: no teardown) while volumes are published through the
/// agents; once its lease lapses, each agent undoes its node's part, and nothing stays
/// mounted on any host.
#[tokio::test]
async fn a_killed_run_leaves_no_mount_on_any_host_once_its_lease_lapses() {
    let test = "agents::a_killed_run_leaves_no_mount_on_any_host_once_its_lease_lapses";
    let cluster = Cluster::new();
    let mut hosts = Vec::new();
    for n in 1..=2 {
        // Slow enough that what is mounted when it is seen is still mounted when the run is
        // killed (every call takes 100 ms).
        let Some(host) = cluster.host_with(test, n, n == 1, true, &["--latency", "100ms"]).await else { return };
        hosts.push(host);
    }
    let out = tempfile::tempdir().unwrap();
    let mut args = agent_run_args(&cluster, &hosts, out.path());
    args.extend(["--agent-lease".into(), "2s".into(), "--focus".into(), "data|lifecycle".into()]);
    let mut run = tokio::process::Command::new(bin())
        .args(&args)
        .current_dir(out.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let started = Instant::now();
    while hosts.iter().all(|h| h.mounts_under(&cluster.work).is_empty()) {
        assert!(run.try_wait().unwrap().is_none(), "the run ended before anything was mounted");
        // Only turns a hang into a failure.
        assert!(started.elapsed() < Duration::from_secs(120), "nothing was ever mounted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    run.start_kill().unwrap();
    run.wait().await.unwrap();
    let mounted: Vec<usize> = hosts.iter().map(|h| h.mounts_under(&cluster.work).len()).collect();
    assert!(mounted.iter().sum::<usize>() > 0, "the run died with volumes mounted");
    let killed = Instant::now();
    // Done when nothing is mounted and every agent that held mounts has said what it undid
    // (it says so once its undo is over).
    let undone = |h: &Host, was: &usize| h.mounts_under(&cluster.work).is_empty() && (*was == 0 || h.log().contains("lapsed: undid"));
    while !hosts.iter().zip(&mounted).all(|(h, was)| undone(h, was)) {
        // Only turns a hang into a failure: the lease is 2 s.
        assert!(killed.elapsed() < Duration::from_secs(60), "still mounted: {:?}", hosts.iter().map(|h| h.mounts_under(&cluster.work)).collect::<Vec<_>>());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The journal still lists what the run did on the nodes, under the agents' addresses
    // (the agents' undo is theirs, not the journal's): `cleanup` with the run's agent flags
    // settles it through the agents, and the controller's volumes through the controller.
    let journal = out.path().join("agents.journal");
    let agents: Vec<String> = hosts.iter().map(|h| h.address.to_string()).collect();
    let on_agents = |j: &Path| {
        csi_conform::journal::outstanding(j).unwrap().iter().filter(|(_, r)| agents.iter().any(|a| a == r.endpoint())).count()
    };
    assert!(on_agents(&journal) > 0, "the killed run journaled node work through its agents");
    let controller = format!("unix://{}", cluster.dir.path().join("host-1.sock").display());
    let (journal_arg, agents_arg, certs) = (journal.display().to_string(), agents.join(","), cluster.certs.display().to_string());
    let cleanup = csi_conform(
        &["cleanup", "--journal", &journal_arg, "--controller-endpoint", &controller, "--node-agents", &agents_arg, "--agent-tls-dir", &certs],
        out.path(),
    )
    .await;
    let said = format!("{}{}", String::from_utf8_lossy(&cleanup.stdout), String::from_utf8_lossy(&cleanup.stderr));
    assert_eq!(cleanup.status.code(), Some(0), "{said}");
    assert_eq!(on_agents(&journal), 0, "nothing is left on the agents' nodes: {said}");
    assert!(csi_conform::journal::outstanding(&journal).unwrap().is_empty(), "nor anywhere: {said}");
    for host in &hosts {
        assert!(host.mounts_under(&cluster.work).is_empty(), "left on a host: {:?}", host.mounts_under(&cluster.work));
    }
}

/// Every mount check happens on the node that owns the mount: node 1's plugin (host 2)
/// ignores read-only, node 0's does not. Through the agents, the two-node reader-only
/// scenario fails on node 1's target, read from node 1's own mount table, and the one-node
/// read-only scenario (node 0) passes.
#[tokio::test]
async fn a_node_plugins_fault_is_found_on_its_own_node() {
    let test = "agents::a_node_plugins_fault_is_found_on_its_own_node";
    let cluster = Cluster::new();
    let Some(first) = cluster.host(test, 1, true, false).await else { return };
    let Some(second) = cluster.host_with(test, 2, false, false, &["--quirk", "ignore-readonly"]).await else { return };
    let out = tempfile::tempdir().unwrap();
    let hosts = [first, second];
    let mut args = agent_run_args(&cluster, &hosts, out.path());
    args.extend(["--focus".into(), r"^lifecycle\.(two-nodes\.multi-node-reader-only|mount\.read-only)$".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = csi_conform(&args, out.path()).await;
    assert_eq!(run.status.code(), Some(1), "{}", String::from_utf8_lossy(&run.stderr));
    let report = csi_conform::report::from_json(&std::fs::read_to_string(out.path().join("agents.json")).unwrap()).unwrap();
    let two = report.scenario("lifecycle.two-nodes.multi-node-reader-only").expect("it ran");
    assert_eq!(two.outcome, csi_conform::report::Severity::Fail, "{two:?}");
    let finding = two.findings.iter().find(|f| f.severity == csi_conform::report::Severity::Fail).unwrap();
    assert!(finding.message.contains("/node1/target was published read-only, but the mount table shows it mounted read-write"), "{}", finding.message);
    // The finding names the node it happened on, as the run chose it: node 1, played by
    // host 2's agent; every report shows it (JSON field, HTML column, JUnit, console).
    let node = finding.node.as_ref().expect("the finding names its node");
    assert_eq!((node.index, node.endpoint.as_str(), node.node_id.as_deref()), (1, hosts[1].address.to_string().as_str(), Some("node-2")), "{node:?}");
    let named = format!("node 1 (node-2 at {})", hosts[1].address);
    let html = std::fs::read_to_string(out.path().join("agents.html")).unwrap();
    assert!(html.contains("<th>node</th>") && html.contains(&format!("<td class=\"node\">{named}</td>")), "the HTML's node column");
    let junit = std::fs::read_to_string(out.path().join("agents.xml")).unwrap();
    assert!(junit.contains(&format!("node: {named}")), "the JUnit failure names the node");
    assert!(String::from_utf8_lossy(&run.stdout).contains(&format!("(on {named})")), "the console names the node: {}", String::from_utf8_lossy(&run.stdout));
    let one = report.scenario("lifecycle.mount.read-only").expect("it ran");
    assert_eq!(one.outcome, csi_conform::report::Severity::Pass, "node 0's plugin honours read-only: {one:?}");
    assert!(report.mounts[1].agent.as_deref().is_some_and(|a| a.contains("node id node-2")), "{:?}", report.mounts);
    assert_eq!(report.mounts[1].pid, Some(hosts[1].plugin_pid));
}

/// With node agents, the agents make and check the run's paths on their nodes: a command
/// that would do it (run on the run's host, not on the node) is refused before anything is
/// connected, naming the flag.
#[tokio::test]
async fn path_commands_and_node_agents_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    for flag in ["--create-mount-path-cmd", "--create-staging-path-cmd", "--check-path-cmd"] {
        let run = csi_conform(
            &["run", "--controller-endpoint", "unix:///nonexistent/c.sock", "--node-agents", "127.0.0.1:9", "--agent-tls-dir", "certs", flag, "/bin/true"],
            dir.path(),
        )
        .await;
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(&format!("--node-agents and {flag} exclude each other")), "{flag}: {stderr}");
    }
}
