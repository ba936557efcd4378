//! The agent's own service and its server: the node's facts (NodeGetInfo, where the plugin
//! mounts), what the node's paths are and its mount table (both from the plugin's mount
//! namespace, found as `run` finds it: SO_PEERCRED on the plugin's socket, then /proc/PID),
//! data markers on published targets (marker.rs on the plugin's view of the target), the
//! lease; and `serve`, which puts it and the CSI forward on one port behind mutual TLS.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use tonic::{Request, Response, Status};

use super::{
    ServeArgs,
    forward::{Forward, IdentityForward, NodeForward, inside},
    lease::{Lease, Undo, Work},
    wire::{self, agent_server::AgentServer},
};
pub use super::node::{NodeView, PluginFiles};
use crate::{
    marker::{self, WriteProbe},
    proto::v1,
};
use csi_client::client::{ClientOptions, Connection, Endpoint};

/// What a path on this node is (as `run`'s inspector tells it: a device node counts as a file).
fn kind_of(path: &Path) -> wire::Kind {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Err(_) => wire::Kind::NotFound,
        Ok(m) if m.is_dir() => wire::Kind::Directory,
        Ok(m) if m.is_file() || m.file_type().is_block_device() || m.file_type().is_char_device() => wire::Kind::File,
        Ok(_) => wire::Kind::Other,
    }
}

/// The agent's service.
#[derive(Debug, Clone)]
pub struct Agent {
    node: Arc<NodeView>,
    lease: Lease,
    work_dir: PathBuf,
}

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

fn placement(p: Option<&wire::Placement>) -> Option<marker::Placement> {
    p.map(|p| if p.block { marker::Placement::Block { tail: p.tail } } else { marker::Placement::File })
}

fn wire_placement(p: &marker::Placement) -> wire::Placement {
    match p {
        marker::Placement::File => wire::Placement { block: false, tail: 0 },
        marker::Placement::Block { tail } => wire::Placement { block: true, tail: *tail },
    }
}

fn to_marker(m: Option<wire::Marker>) -> marker::Marker {
    let m = m.unwrap_or_default();
    marker::Marker { label: m.label, bytes: m.bytes }
}

impl Agent {
    /// The plugin's view of `path`, which must be inside the work directory.
    async fn local(&self, path: &str) -> Result<PathBuf, Status> {
        if !inside(&self.work_dir, Path::new(path)) {
            return Err(Status::permission_denied(format!(
                "csi-conform agent: {path} is outside the agent's work directory {}",
                self.work_dir.display()
            )));
        }
        let inspector = self.node.inspector().await;
        inspector.local_path(Path::new(path)).ok_or_else(|| {
            Status::failed_precondition(format!(
                "csi-conform agent: the node plugin's files cannot be reached: {}",
                inspector.unreachable().unwrap_or_default()
            ))
        })
    }

    fn leased(&self, run_id: &str) -> Result<(), Status> {
        self.lease.check(Some(run_id)).map_err(|e| Status::failed_precondition(format!("csi-conform agent: {e}")))
    }
}

#[tonic::async_trait]
impl wire::agent_server::Agent for Agent {
    async fn facts(&self, _: Request<wire::FactsRequest>) -> Result<Response<wire::FactsResponse>, Status> {
        let info = self
            .node
            .plugin
            .node()
            .node_get_info(v1::NodeGetInfoRequest::default())
            .await
            .map(|r| r.into_inner())
            .map_err(|e| Status::unavailable(format!("csi-conform agent: the node plugin's NodeGetInfo: {}", e.message())))?;
        let files = self.node.inspector().await;
        let view = files.view();
        Ok(Response::new(wire::FactsResponse {
            node_id: info.node_id,
            accessible_topology: info.accessible_topology.map(|t| t.segments).unwrap_or_default(),
            max_volumes_per_node: info.max_volumes_per_node,
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_default(),
            plugin_endpoint: self.node.plugin.endpoint().to_string(),
            work_dir: self.work_dir.display().to_string(),
            plugin_pid: view.map_or(0, |v| v.pid),
            mount_namespace: view.map(|v| v.namespace.clone()).unwrap_or_default(),
            shared_namespace: view.is_some_and(|v| v.shared),
            mounts_skipped: files.unreachable().unwrap_or_default().to_owned(),
            agent_version: env!("CARGO_PKG_VERSION").to_owned(),
            held_by: self.lease.holder().unwrap_or_default(),
        }))
    }

    async fn renew(&self, request: Request<wire::RenewRequest>) -> Result<Response<wire::RenewResponse>, Status> {
        let r = request.into_inner();
        if r.run_id.is_empty() || r.ttl_ms == 0 {
            return Err(Status::invalid_argument("csi-conform agent: a lease needs a run id and a ttl"));
        }
        let ttl = self
            .lease
            .renew(&r.run_id, Duration::from_millis(r.ttl_ms))
            .map_err(|e| Status::failed_precondition(format!("csi-conform agent: {e}")))?;
        Ok(Response::new(wire::RenewResponse { ttl_ms: ttl.as_millis() as u64 }))
    }

    async fn release(&self, request: Request<wire::ReleaseRequest>) -> Result<Response<wire::ReleaseResponse>, Status> {
        let r = request.into_inner();
        let undone = self
            .lease
            .release(Some(&r.run_id), &Undo { node: self.node.clone() })
            .await
            .map_err(|e| Status::failed_precondition(format!("csi-conform agent: {e}")))?;
        Ok(Response::new(wire::ReleaseResponse { undone: undone.undone, left: undone.left }))
    }

    async fn stat(&self, request: Request<wire::PathRequest>) -> Result<Response<wire::StatResponse>, Status> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let local = self.local(&request.into_inner().path).await?;
        let kind = kind_of(&local);
        let meta = std::fs::metadata(&local);
        Ok(Response::new(wire::StatResponse {
            kind: kind as i32,
            device: meta.as_ref().is_ok_and(|m| m.file_type().is_block_device() || m.file_type().is_char_device()),
            gid: meta.as_ref().map(|m| m.gid()).unwrap_or(0),
            block_size: marker::block_size(&local).ok(),
            fs_size: marker::fs_size(&local).ok(),
            error: meta.err().map(|e| e.to_string()).unwrap_or_default(),
        }))
    }

    async fn mount_table(&self, request: Request<wire::MountTableRequest>) -> Result<Response<wire::MountTableResponse>, Status> {
        let files = self.node.inspector().await;
        let Some(view) = files.view() else {
            let why = files.unreachable().unwrap_or_default().to_owned();
            return Ok(Response::new(wire::MountTableResponse { skipped: why, ..Default::default() }));
        };
        let mountinfo = view.mountinfo().map_err(|e| {
            Status::unavailable(format!("csi-conform agent: cannot read the mount table of pid {}: {e}; did the node plugin exit?", view.pid))
        })?;
        let resolved =
            request.into_inner().resolve.iter().map(|p| view.resolved(Path::new(p)).display().to_string()).collect();
        Ok(Response::new(wire::MountTableResponse { mountinfo, resolved, skipped: String::new() }))
    }

    async fn write_marker(&self, request: Request<wire::WriteMarkerRequest>) -> Result<Response<wire::WriteMarkerResponse>, Status> {
        let r = request.into_inner();
        self.leased(&r.run_id)?;
        let local = self.local(&r.target).await?;
        let at = placement(r.at.as_ref());
        Ok(Response::new(match marker::write(&local, r.block, &to_marker(r.marker), at.as_ref()) {
            Ok(p) => {
                let tail = match p {
                    marker::Placement::Block { tail } => Some(tail),
                    marker::Placement::File => None,
                };
                let _ = self.lease.record_for(&r.run_id, Work::Marker { target: r.target, tail });
                wire::WriteMarkerResponse { placement: Some(wire_placement(&p)), ..Default::default() }
            }
            Err(e) => wire::WriteMarkerResponse { placement: None, error: e.to_string(), errno: errno(&e) },
        }))
    }

    async fn verify_marker(&self, request: Request<wire::VerifyMarkerRequest>) -> Result<Response<wire::VerifyMarkerResponse>, Status> {
        let r = request.into_inner();
        let local = self.local(&r.target).await?;
        let at = placement(r.placement.as_ref()).unwrap_or(marker::Placement::File);
        let expected = to_marker(r.expected);
        let others: Vec<marker::Marker> = r.others.into_iter().map(|m| to_marker(Some(m))).collect();
        let refs: Vec<&marker::Marker> = others.iter().collect();
        let mut out = wire::VerifyMarkerResponse::default();
        match marker::verify(&local, &at, &expected, &refs) {
            Ok(None) => out.intact = true,
            Ok(Some((place, m))) => {
                out.place = place;
                out.mismatch = match m {
                    marker::Mismatch::Missing => "missing".to_owned(),
                    marker::Mismatch::Blank => "blank".to_owned(),
                    marker::Mismatch::Other(label) => {
                        out.other_label = label;
                        "other".to_owned()
                    }
                    marker::Mismatch::Differs(at) => {
                        out.differs_at = at as u64;
                        "differs".to_owned()
                    }
                };
            }
            Err(e) => (out.error, out.errno) = (e.to_string(), errno(&e)),
        }
        Ok(Response::new(out))
    }

    async fn remove_marker(&self, request: Request<wire::RemoveMarkerRequest>) -> Result<Response<wire::RemoveMarkerResponse>, Status> {
        let r = request.into_inner();
        self.leased(&r.run_id)?;
        let local = self.local(&r.target).await?;
        let at = placement(r.placement.as_ref()).unwrap_or(marker::Placement::File);
        let tail = match at {
            marker::Placement::Block { tail } => Some(tail),
            marker::Placement::File => None,
        };
        Ok(Response::new(match marker::remove(&local, &at) {
            Ok(()) => {
                self.lease.forget(&Work::Marker { target: r.target, tail });
                wire::RemoveMarkerResponse::default()
            }
            Err(e) => wire::RemoveMarkerResponse { error: e.to_string(), errno: errno(&e) },
        }))
    }

    async fn probe_write(&self, request: Request<wire::ProbeWriteRequest>) -> Result<Response<wire::ProbeWriteResponse>, Status> {
        let r = request.into_inner();
        let local = self.local(&r.target).await?;
        let out = if r.marker {
            match marker::try_write(&local, r.block) {
                Ok(()) => wire::ProbeWriteResponse { outcome: "writable".into(), ..Default::default() },
                Err(e) => wire::ProbeWriteResponse { outcome: "failed".into(), error: e.to_string(), errno: errno(&e) },
            }
        } else {
            match marker::probe_write(&local, r.block) {
                WriteProbe::Writable => wire::ProbeWriteResponse { outcome: "writable".into(), ..Default::default() },
                WriteProbe::ReadOnly => wire::ProbeWriteResponse { outcome: "read-only".into(), ..Default::default() },
                WriteProbe::NotProbed => wire::ProbeWriteResponse { outcome: "not-probed".into(), ..Default::default() },
                WriteProbe::Failed(e) => wire::ProbeWriteResponse { outcome: "failed".into(), error: e, errno: 0 },
            }
        };
        Ok(Response::new(out))
    }
}

/// Serves the agent until `shutdown` resolves; then undoes what a run left and returns.
pub async fn serve(args: ServeArgs, shutdown: impl std::future::Future<Output = ()>) -> Result<(), super::AgentError> {
    use super::AgentError;
    let endpoint = args
        .plugin_endpoint
        .clone()
        .ok_or_else(|| AgentError::Usage("--plugin-endpoint (or CSI_ENDPOINT) is required".into()))?;
    if !args.work_dir.is_absolute() {
        return Err(AgentError::Usage(format!("--work-dir {} must be absolute", args.work_dir.display())));
    }
    let tls = match (&args.tls_dir, args.no_tls, &args.listen) {
        (Some(dir), false, _) => Some(super::tls::server_config(dir).map_err(|e| AgentError::Usage(e.to_string()))?),
        (None, true, Endpoint::Unix(_)) => None,
        (None, true, Endpoint::Tcp { .. }) => {
            return Err(AgentError::Usage("--no-tls is for a unix socket only: over TCP the agent needs --tls-dir".into()));
        }
        (Some(_), true, _) => return Err(AgentError::Usage("--tls-dir and --no-tls exclude each other".into())),
        (None, false, _) => {
            return Err(AgentError::Usage(
                "--tls-dir is required (ca.pem, agent.pem, agent-key.pem; `csi-conform agent certs --out DIR` makes them)".into(),
            ));
        }
    };
    let options = ClientOptions { connect_timeout: args.connect_timeout, ..ClientOptions::default() };
    let plugin = Connection::connect(endpoint.clone(), options).await.map_err(|e| AgentError::Plugin(e.to_string()))?;
    let node = Arc::new(NodeView::new(plugin.clone()).await);
    let lease = Lease::default();
    let undo = Undo { node: node.clone() };
    let watcher = tokio::spawn(lease.clone().watch(undo.clone()));
    let agent = Agent { node: node.clone(), lease: lease.clone(), work_dir: args.work_dir.clone() };
    let forward = Forward::new(plugin.channel(), lease.clone(), node.clone(), args.work_dir.clone());
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls).map_err(|e| AgentError::Usage(format!("TLS: {e}")))?;
    }
    let router = builder
        .add_service(AgentServer::new(agent))
        .add_service(NodeForward(forward.clone()))
        .add_service(IdentityForward(forward));
    let served = match &args.listen {
        Endpoint::Tcp { host, port } => {
            let listener = tokio::net::TcpListener::bind((host.as_str(), *port))
                .await
                .map_err(|e| AgentError::Serve(format!("cannot listen on {}: {e}", args.listen)))?;
            tracing::info!("csi-conform agent: listening on {} for the node plugin at {endpoint}", listener.local_addr().map(|a| a.to_string()).unwrap_or_default());
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            router.serve_with_incoming_shutdown(incoming, shutdown).await
        }
        Endpoint::Unix(path) => {
            let _ = std::fs::remove_file(path);
            let listener = tokio::net::UnixListener::bind(path)
                .map_err(|e| AgentError::Serve(format!("cannot listen on {}: {e}", args.listen)))?;
            tracing::info!("csi-conform agent: listening on {} for the node plugin at {endpoint}", args.listen);
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
            router.serve_with_incoming_shutdown(incoming, shutdown).await
        }
    };
    watcher.abort();
    // Stopping the agent ends any run's hold on the node: its work is undone now.
    if let Ok(undone) = lease.release(None, &undo).await
        && !undone.undone.is_empty()
    {
        tracing::warn!("stopping: undid {} piece(s) of a run's work on this node", undone.undone.len());
    }
    served.map_err(|e| AgentError::Serve(csi_client::client::error_chain(&e)))
}
