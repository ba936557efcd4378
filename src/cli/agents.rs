//! `run --node-agents`: the run's node roles played by node agents (`csi-conform agent`).
//! The agents' addresses are resolved (`dns:///NAME:PORT` gives every address of a headless
//! Service, `nomad://` every registration of a Nomad service), each is reached over mutual TLS, its facts read, the run's lease taken and kept
//! renewed; each agent's channel carries the node plugin's CSI calls as a node connection, and
//! an [`AgentNode`] answers the engine's questions about that node's files ([`NodeAgent`]). The
//! engine sees nodes; only this file knows they are agents. At the end the leases are
//! released, and the agents undo whatever the run left on their nodes.

use std::{
    io,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use crate::{
    agent::{
        client::{AgentLink, keep_renewed, run_tls},
        wire,
    },
    client::{ClientOptions, Connection, Connections, Endpoint},
    fingerprint::Fingerprint,
    report::MountSite,
    suite::{
        NodeAgent, NodeStat, NodeTable, PathKind, WriteProbe,
        marker::{Marker, Mismatch, Placement},
    },
};

use super::CliError;

/// The flags of `run` for node agents.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentRunArgs {
    /// Node agents that play the run's nodes (node 0, 1, ...), comma-separated or repeated:
    /// `tcp://HOST:PORT`, `HOST:PORT`, `unix:///path`, `dns:///NAME:PORT` for every address
    /// NAME resolves to (a headless Service lists every agent pod), or
    /// `nomad://HOST:PORT/SERVICE[?namespace=NS]` for every registration of a Nomad service
    /// (Nomad's HTTP API, with the token of NOMAD_TOKEN when set). Replaces --node-endpoint;
    /// the controller is --controller-endpoint (or --endpoint).
    #[arg(help_heading = "Node agents", long, value_name = "ADDR[,ADDR...]", value_delimiter = ',')]
    pub node_agents: Vec<String>,

    /// The directory `csi-conform agent certs` wrote (ca.pem, run.pem, run-key.pem): the run
    /// talks only to agents its CA signed, with its own certificate.
    #[arg(help_heading = "Node agents", long, value_name = "DIR")]
    pub agent_tls_dir: Option<PathBuf>,

    /// How long an agent keeps the run's work when the run stops renewing its lease (renewed a
    /// third of this apart): a run that dies leaves nothing mounted on any node after this.
    #[arg(help_heading = "Node agents", long, value_name = "DURATION", default_value = "30s", value_parser = crate::units::parse_duration)]
    pub agent_lease: Duration,
}

/// The agents of a run, connected and leased, in node order.
pub(super) struct Agents {
    pub nodes: Vec<Arc<AgentNode>>,
    lease_id: String,
    renewal: tokio::task::JoinHandle<()>,
}

/// One agent as the engine's [`NodeAgent`].
#[derive(Debug)]
pub(super) struct AgentNode {
    link: AgentLink,
    lease_id: String,
    facts: wire::FactsResponse,
}

/// Every agent address `spec` names: one, or every address a `dns:///` name resolves to
/// (sorted, so the same Service gives the same list).
async fn resolve(spec: &str, timeout: Duration) -> Result<Vec<Endpoint>, CliError> {
    let spec = spec.trim();
    if let Some(rest) = spec.strip_prefix("nomad://") {
        let token = std::env::var(crate::agent::nomad::TOKEN_ENV).ok().filter(|t| !t.is_empty());
        return crate::agent::nomad::agents(rest, token.as_deref(), timeout)
            .await
            .map_err(|e| CliError::usage(format!("--node-agents: {e}")));
    }
    if let Some(hostport) = spec.strip_prefix("dns:///") {
        let mut found: Vec<std::net::SocketAddr> = tokio::net::lookup_host(hostport)
            .await
            .map_err(|e| CliError::usage(format!("--node-agents {spec}: {e}")))?
            .collect();
        found.sort();
        found.dedup();
        if found.is_empty() {
            return Err(CliError::usage(format!("--node-agents {spec}: the name resolves to no address")));
        }
        return Ok(found.into_iter().map(|a| Endpoint::Tcp { host: a.ip().to_string(), port: a.port() }).collect());
    }
    let with_scheme = if spec.contains("://") || spec.starts_with('/') { spec.to_owned() } else { format!("tcp://{spec}") };
    let endpoint: Endpoint = with_scheme.parse().map_err(|e| CliError::usage(format!("--node-agents: {e}")))?;
    Ok(vec![endpoint])
}

/// Whether `dir` is inside `root` as written.
fn inside(root: &Path, dir: &Path) -> bool {
    crate::agent::forward::inside(root, dir)
}

impl Agents {
    /// Connects to every agent of `args`, reads its facts and takes the run's lease. The
    /// node order: as listed, each `dns:///` name's agents by node id.
    pub(super) async fn connect(args: &AgentRunArgs, options: &ClientOptions) -> Result<Agents, CliError> {
        let dir = args.agent_tls_dir.as_ref().ok_or_else(|| {
            CliError::usage("--node-agents needs --agent-tls-dir (the run's certificates: `csi-conform agent certs --out DIR`)")
        })?;
        let tls = run_tls(dir).map_err(|e| CliError::usage(format!("--agent-tls-dir: {e}")))?;
        let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let lease_id = format!("csi-conform-{}-{}", std::process::id(), started.as_millis());
        let mut nodes: Vec<Arc<AgentNode>> = Vec::new();
        for spec in &args.node_agents {
            let mut group = Vec::new();
            for address in resolve(spec, options.connect_timeout).await? {
                let link = AgentLink::connect(&address, Some(tls.clone()), options.connect_timeout)
                    .await
                    .map_err(CliError::usage)?;
                let facts = link.facts().await.map_err(CliError::usage)?;
                link.renew(&lease_id, args.agent_lease).await.map_err(CliError::usage)?;
                group.push(Arc::new(AgentNode { link, lease_id: lease_id.clone(), facts }));
            }
            if spec.trim().starts_with("dns:///") || spec.trim().starts_with("nomad://") {
                group.sort_by(|a, b| a.facts.node_id.cmp(&b.facts.node_id));
            }
            nodes.extend(group);
        }
        let mut seen = std::collections::BTreeSet::new();
        for n in &nodes {
            if !seen.insert(n.facts.node_id.clone()) {
                return Err(CliError::usage(format!(
                    "--node-agents: two agents serve node {:?} (each node is played once)",
                    n.facts.node_id
                )));
            }
        }
        let renewal = keep_renewed(nodes.iter().map(|n| n.link.clone()).collect(), lease_id.clone(), args.agent_lease);
        Ok(Agents { nodes, lease_id, renewal })
    }

    /// The run's work directory: inside every agent's (`given`, or the agents' own when they
    /// agree).
    pub(super) fn work_dir(&self, given: Option<&Path>) -> Result<PathBuf, CliError> {
        let dirs: Vec<PathBuf> = self.nodes.iter().map(|n| PathBuf::from(&n.facts.work_dir)).collect();
        let chosen = match given {
            Some(dir) => dir.to_owned(),
            None => dirs.first().cloned().unwrap_or_default(),
        };
        for (i, (dir, node)) in dirs.iter().zip(&self.nodes).enumerate() {
            if !inside(dir, &chosen) {
                return Err(CliError::usage(format!(
                    "the run's work directory {} is not inside the work directory {} of node {i}'s {}; give --work-dir \
                     inside every agent's",
                    chosen.display(),
                    dir.display(),
                    node.describe()
                )));
            }
        }
        Ok(chosen)
    }

    /// The node connections (over each agent's channel) and the fingerprint, with the
    /// controller at `controller`.
    pub(super) async fn connect_nodes(
        &self,
        controller: Option<&Endpoint>,
        options: &ClientOptions,
        spec_version: Option<crate::version::SpecVersion>,
    ) -> Result<(Connections, Fingerprint), CliError> {
        let controller = match controller {
            Some(e) => Some(Connection::connect(e.clone(), options.clone()).await.map_err(CliError::usage)?),
            None => None,
        };
        let nodes = self.node_connections(options).await?;
        let mut fingerprint = Fingerprint::collect(controller.as_ref(), &nodes).await.map_err(CliError::usage)?;
        fingerprint.state_spec_version(spec_version);
        Ok((Connections { controller, nodes }, fingerprint))
    }

    /// The node plugins' connections, one over each agent's channel (its calls tagged with
    /// the run's lease), node 0 first.
    pub(super) async fn node_connections(&self, options: &ClientOptions) -> Result<Vec<Connection>, CliError> {
        let mut nodes = Vec::new();
        for n in &self.nodes {
            let connection = Connection::over(n.link.address().clone(), n.link.channel(), options.clone(), Some(n.tag()?));
            nodes.push(connection.await.map_err(CliError::usage)?);
        }
        Ok(nodes)
    }

    /// The engine's view of them, node 0 first.
    pub(super) fn engine_nodes(&self) -> Vec<Arc<dyn NodeAgent>> {
        self.nodes.iter().map(|n| n.clone() as Arc<dyn NodeAgent>).collect()
    }

    /// The node endpoints (the agents' addresses), node 0 first.
    pub(super) fn endpoints(&self) -> Vec<Endpoint> {
        self.nodes.iter().map(|n| n.link.address().clone()).collect()
    }

    /// Stops renewing and releases every lease: each agent undoes what the run left on its
    /// node. What was undone or left is told on stderr.
    pub(super) async fn release(self) {
        self.renewal.abort();
        for (i, n) in self.nodes.iter().enumerate() {
            match n.link.release(&self.lease_id).await {
                Ok(r) => {
                    for line in &r.undone {
                        eprintln!("node {i} ({}): the agent undid {line}", n.facts.node_id);
                    }
                    for line in &r.left {
                        eprintln!("warning: node {i} ({}): the agent could not undo {line}", n.facts.node_id);
                    }
                }
                Err(e) => eprintln!("warning: {e}; its lease lapses in --agent-lease and the agent undoes the run's work then"),
            }
        }
    }
}

impl crate::session::Connector for Agents {
    fn connect<'a>(
        &'a self,
        targets: &'a crate::client::Targets,
        options: &'a ClientOptions,
        spec_version: Option<crate::version::SpecVersion>,
    ) -> crate::session::Connecting<'a> {
        Box::pin(async move {
            self.connect_nodes(targets.controller.as_ref(), options, spec_version).await.map_err(|e| e.message)
        })
    }
}

fn status_err(s: tonic::Status) -> io::Error {
    io::Error::other(format!("node agent: {}", s.message()))
}

fn answer_err(error: &str, errno: i32) -> io::Error {
    if errno != 0 { io::Error::from_raw_os_error(errno) } else { io::Error::other(error.to_owned()) }
}

fn wire_marker(m: &Marker) -> wire::Marker {
    wire::Marker { label: m.label.clone(), bytes: m.bytes.clone() }
}

fn wire_placement(p: &Placement) -> wire::Placement {
    match p {
        Placement::File => wire::Placement { block: false, tail: 0 },
        Placement::Block { tail } => wire::Placement { block: true, tail: *tail },
    }
}

impl AgentNode {
    /// The tag of the node plugin's calls through this agent: the run's lease (the agent
    /// forwards no other call).
    fn tag(&self) -> Result<(&'static str, tonic::metadata::AsciiMetadataValue), CliError> {
        let value = tonic::metadata::AsciiMetadataValue::try_from(self.lease_id.as_str())
            .map_err(|e| CliError::usage(format!("the run's lease id {:?}: {e}", self.lease_id)))?;
        Ok((crate::agent::LEASE_HEADER, value))
    }

    /// Waits for `f` on this runtime without holding up its other tasks.
    fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
    }
}

impl NodeAgent for AgentNode {
    fn describe(&self) -> String {
        format!("agent {} on host {} (node id {})", self.link.address(), self.facts.hostname, self.facts.node_id)
    }

    fn site(&self) -> MountSite {
        let f = &self.facts;
        MountSite {
            node: 0,
            endpoint: self.link.address().to_string(),
            pid: (f.plugin_pid > 0).then_some(f.plugin_pid),
            namespace: (!f.mount_namespace.is_empty()).then(|| f.mount_namespace.clone()),
            shared: false,
            skipped: (!f.mounts_skipped.is_empty()).then(|| f.mounts_skipped.clone()),
            agent: Some(self.describe()),
        }
    }

    fn stat(&self, path: &Path) -> io::Result<NodeStat> {
        let r = self
            .block(self.link.client().stat(wire::PathRequest { path: path.display().to_string() }))
            .map_err(status_err)?
            .into_inner();
        let kind = match wire::Kind::try_from(r.kind).unwrap_or(wire::Kind::Other) {
            wire::Kind::NotFound => PathKind::NotFound,
            wire::Kind::File => PathKind::File,
            wire::Kind::Directory => PathKind::Directory,
            wire::Kind::Other => PathKind::Other,
        };
        let exists = kind != PathKind::NotFound && r.error.is_empty();
        Ok(NodeStat { kind, device: r.device, gid: exists.then_some(r.gid), block_size: r.block_size, fs_size: r.fs_size })
    }

    fn mount_table(&self, resolve: &[&Path]) -> io::Result<NodeTable> {
        let request = wire::MountTableRequest { resolve: resolve.iter().map(|p| p.display().to_string()).collect() };
        let r = self.block(self.link.client().mount_table(request)).map_err(status_err)?.into_inner();
        if !r.skipped.is_empty() {
            return Ok(Err(r.skipped));
        }
        let table = crate::mounts::parse(&r.mountinfo).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(Ok((table, r.resolved.into_iter().map(PathBuf::from).collect())))
    }

    fn write_marker(&self, target: &Path, block: bool, marker: &Marker, at: Option<&Placement>) -> io::Result<Placement> {
        let request = wire::WriteMarkerRequest {
            run_id: self.lease_id.clone(),
            target: target.display().to_string(),
            block,
            marker: Some(wire_marker(marker)),
            at: at.map(wire_placement),
        };
        let r = self.block(self.link.client().write_marker(request)).map_err(status_err)?.into_inner();
        match r.placement {
            Some(p) if r.error.is_empty() => Ok(if p.block { Placement::Block { tail: p.tail } } else { Placement::File }),
            _ => Err(answer_err(&r.error, r.errno)),
        }
    }

    fn verify_marker(&self, target: &Path, at: &Placement, expected: &Marker, others: &[&Marker]) -> io::Result<Option<(String, Mismatch)>> {
        let request = wire::VerifyMarkerRequest {
            target: target.display().to_string(),
            placement: Some(wire_placement(at)),
            expected: Some(wire_marker(expected)),
            others: others.iter().map(|m| wire_marker(m)).collect(),
        };
        let r = self.block(self.link.client().verify_marker(request)).map_err(status_err)?.into_inner();
        if !r.error.is_empty() {
            return Err(answer_err(&r.error, r.errno));
        }
        if r.intact {
            return Ok(None);
        }
        let mismatch = match r.mismatch.as_str() {
            "missing" => Mismatch::Missing,
            "blank" => Mismatch::Blank,
            "other" => Mismatch::Other(r.other_label),
            "differs" => Mismatch::Differs(r.differs_at as usize),
            other => return Err(io::Error::other(format!("node agent: unknown mismatch {other:?}"))),
        };
        Ok(Some((r.place, mismatch)))
    }

    fn remove_marker(&self, target: &Path, at: &Placement) -> io::Result<()> {
        let request = wire::RemoveMarkerRequest {
            run_id: self.lease_id.clone(),
            target: target.display().to_string(),
            placement: Some(wire_placement(at)),
        };
        let r = self.block(self.link.client().remove_marker(request)).map_err(status_err)?.into_inner();
        if r.error.is_empty() { Ok(()) } else { Err(answer_err(&r.error, r.errno)) }
    }

    fn try_write(&self, target: &Path, block: bool) -> io::Result<()> {
        let request = wire::ProbeWriteRequest { target: target.display().to_string(), block, marker: true };
        let r = self.block(self.link.client().probe_write(request)).map_err(status_err)?.into_inner();
        if r.outcome == "writable" { Ok(()) } else { Err(answer_err(&r.error, r.errno)) }
    }

    fn probe_write(&self, target: &Path, block: bool) -> WriteProbe {
        let request = wire::ProbeWriteRequest { target: target.display().to_string(), block, marker: false };
        match self.block(self.link.client().probe_write(request)) {
            Ok(r) => {
                let r = r.into_inner();
                match r.outcome.as_str() {
                    "writable" => WriteProbe::Writable,
                    "read-only" => WriteProbe::ReadOnly,
                    "not-probed" => WriteProbe::NotProbed,
                    _ => WriteProbe::Failed(r.error),
                }
            }
            Err(s) => WriteProbe::Failed(status_err(s).to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `dns:///` name gives every address it resolves to (as a headless Service lists
    /// every pod), sorted; the other forms give the one address written.
    async fn resolve_(spec: &str) -> Result<Vec<Endpoint>, CliError> {
        resolve(spec, Duration::from_secs(10)).await
    }

    #[tokio::test]
    async fn agent_addresses_resolve_as_written_or_through_dns() {
        let all = resolve_("dns:///localhost:7443").await.unwrap();
        assert!(all.contains(&Endpoint::Tcp { host: "127.0.0.1".into(), port: 7443 }), "{all:?}");
        let mut sorted = all.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(all.len(), sorted.len(), "no address twice");
        assert_eq!(resolve_("10.0.0.2:7443").await.unwrap(), [Endpoint::Tcp { host: "10.0.0.2".into(), port: 7443 }]);
        assert_eq!(resolve_("unix:///run/a.sock").await.unwrap(), [Endpoint::Unix("/run/a.sock".into())]);
        assert!(resolve_("10.0.0.2").await.is_err(), "a port is needed");
        // A nomad:// name asks Nomad's API (here: nothing listens on the discard port).
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = listener.local_addr().unwrap();
        drop(listener);
        let e = resolve_(&format!("nomad://{closed}/csi-conform-agent")).await.unwrap_err();
        assert!(e.message.contains(&format!("Nomad at {closed}")), "{}", e.message);
    }
}
