//! The reference plugin: an in-memory (optionally directory-backed) CSI v1.13 plugin (v1.12
//! with `--spec-version 1.12`) that implements every RPC as the specification describes, so each harness check can be proven
//! against it. This module owns its configuration, serving (unix or TCP), the per-RPC
//! plumbing (latency, UNIMPLEMENTED for disabled capabilities, secrets, logging) and errors.
//!
//! Every RPC body is a plain synchronous function on [`Plugin`](self) that runs one state
//! transaction on a blocking thread; the rules they share live in `checks`.
//!
//! Where spec.md's error tables decide a code, they win:
//! - a capability the volume does not support is FAILED_PRECONDITION in NodeStageVolume and
//!   NodePublishVolume ("Exceeds capabilities"), and ControllerPublishVolume (no row) follows
//!   them; it is INVALID_ARGUMENT in the expand and modify RPCs, whose tables say so;
//! - ControllerExpandVolume on a volume already at least as large answers OK with its
//!   current size ("the plugin SHOULD reply 0 OK"); a limit below the current size is
//!   OUT_OF_RANGE;
//! - DeleteSnapshot of a group member is INVALID_ARGUMENT ("Snapshot is part of a group");
//! - Get/DeleteVolumeGroupSnapshot require `snapshot_ids` ("This field is REQUIRED");
//! - NodeUnstageVolume / NodeUnpublishVolume of an unknown volume are NOT_FOUND, of a known
//!   volume that is not staged/published there OK;
//! - a missing target parent in NodePublishVolume is INVALID_ARGUMENT (no row);
//! - CreateVolume honours `preferred`, then `requisite` topologies this plugin serves, and
//!   is RESOURCE_EXHAUSTED when no requisite topology is served.

mod backing;
mod checks;
mod config;
mod controller;
mod echo;
mod group;
mod health;
mod identity;
mod keys;
mod lag;
mod lies;
mod node;
mod quirks;
mod snapshot_metadata;
mod snapshots;
mod state;
mod volume_changes;

pub use backing::scratch_dir;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};

pub use config::{
    Args, Capabilities, Config, DEFAULT_MUTABLE_KEYS, DEFAULT_NAME, DEFAULT_NODE_ID, Disabled,
    GIB, Mode, TIB, TOPOLOGY_KEY,
};
pub use health::HEALTH_PARAMETER;
pub use quirks::{EMPTY_SOURCE_MESSAGE, Quirk, UNCONFIRMED_MESSAGE, UnknownQuirk};

use crate::proto::v1::{
    self, controller_server::ControllerServer,
    controller_service_capability::rpc::Type as ControllerRpc,
    group_controller_server::GroupControllerServer,
    group_controller_service_capability::rpc::Type as GroupRpc, identity_server::IdentityServer,
    node_server::NodeServer, node_service_capability::rpc::Type as NodeRpc,
    plugin_capability::service::Type as PluginService,
    snapshot_metadata_server::SnapshotMetadataServer,
};
use crate::client::Endpoint;
use crate::secrets::{SecretsError, SecretsMismatch};

/// What can go wrong configuring, starting or running the reference plugin.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint is not one we can listen on.
    #[error("invalid endpoint {0}")]
    Endpoint(String),
    /// A command-line value is invalid.
    #[error("{0}")]
    Config(String),
    /// The secrets file is invalid.
    #[error("--require-secrets: {0}")]
    Secrets(#[from] SecretsError),
    /// The state directory cannot be used.
    #[error("state directory {}: {source}", dir.display())]
    State {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The data directory for backing stores cannot be created.
    #[error("cannot create the data directory: {0}")]
    Data(std::io::Error),
    /// Listening failed.
    #[error("cannot listen on {endpoint}: {source}")]
    Listen {
        /// The endpoint.
        endpoint: String,
        /// Why.
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("serving failed: {0}")]
    Serve(#[from] tonic::transport::Error),
    /// Waiting for a signal failed.
    #[error("cannot wait for signals: {0}")]
    Signal(std::io::Error),
    /// `--private-mounts`: the process could not move into a mount namespace of its own.
    #[error("--private-mounts: {0}")]
    PrivateMounts(#[from] crate::mounts::PrivateMountsError),
}

/// Set once this process is in a mount namespace of its own ([`prepare`]).
static PRIVATE_MOUNTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What must happen before the async runtime starts its threads: with `--private-mounts`,
/// the move into a mount namespace of its own (the kernel allows it only to a process with
/// one thread). Call it first thing in `main`, before [`run`].
pub fn prepare(args: &Args) -> Result<(), Error> {
    if args.private_mounts && !args.list_quirks {
        crate::mounts::enter_private_mount_namespace()?;
        PRIVATE_MOUNTS.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    Ok(())
}

/// The plugin instance behind every service: configuration, state and backing stores.
pub(crate) struct Plugin {
    config: Config,
    caps: Capabilities,
    store: state::Store,
    data: backing::DataDir,
    started: Instant,
    /// Whether node operations make real bind mounts (CAP_SYS_ADMIN and allowed by config).
    mounts: bool,
    /// `aborts-when-busy`: the volumes a call is in flight on.
    busy: std::sync::Mutex<std::collections::HashSet<String>>,
    /// `listing-lags`: what the lagging listing still shows, and does not show yet.
    lag: std::sync::Mutex<lag::Lagging>,
}

impl Plugin {
    fn new(config: Config) -> Result<Plugin, Error> {
        let store = match &config.state_dir {
            Some(dir) => state::Store::open(dir).map_err(|source| Error::State {
                dir: dir.clone(),
                source,
            })?,
            None => state::Store::memory(),
        };
        let data_dir = config.data_dir.as_deref().or(config.state_dir.as_deref());
        let data = backing::DataDir::new(data_dir).map_err(Error::Data)?.allocating(config.allocate);
        let mounts =
            config.real_mounts && config.mode.serves_node() && crate::mounts::has_cap_sys_admin();
        quirks::warn_active(&config.quirks);
        let plugin = Plugin {
            caps: config.capabilities(),
            config,
            store,
            data,
            started: Instant::now(),
            mounts,
            busy: std::sync::Mutex::default(),
            lag: std::sync::Mutex::default(),
        };
        if plugin.config.mode.serves_node() {
            // Register this node so a controller sharing the state knows the node id.
            let node_id = plugin.config.node_id.clone();
            plugin
                .store
                .transact(|s| {
                    s.node_mut(&node_id);
                    Ok(())
                })
                .map_err(|s| Error::State {
                    dir: plugin.config.state_dir.clone().unwrap_or_default(),
                    source: std::io::Error::other(s.message().to_owned()),
                })?;
            if !plugin.mounts {
                tracing::warn!(
                    node_id = %plugin.config.node_id,
                    "running without real mounts (no CAP_SYS_ADMIN or disabled): published \
                     targets are plain directories and files"
                );
            }
        }
        Ok(plugin)
    }

    /// Why an RPC is switched off, if it is (answered with UNIMPLEMENTED).
    fn disabled_reason(&self, rpc: &str) -> Option<String> {
        let controller = |t: ControllerRpc| {
            (!self.caps.has_controller(t))
                .then(|| format!("the controller capability {} is disabled", t.as_str_name()))
        };
        let node = |t: NodeRpc| {
            (!self.caps.has_node(t))
                .then(|| format!("the node capability {} is disabled", t.as_str_name()))
        };
        match rpc {
            "CreateVolume" | "DeleteVolume" => controller(ControllerRpc::CreateDeleteVolume),
            "ControllerPublishVolume" | "ControllerUnpublishVolume" => {
                controller(ControllerRpc::PublishUnpublishVolume)
            }
            "ListVolumes" => controller(ControllerRpc::ListVolumes),
            "GetCapacity" => controller(ControllerRpc::GetCapacity),
            "CreateSnapshot" | "DeleteSnapshot" => controller(ControllerRpc::CreateDeleteSnapshot),
            "ListSnapshots" => controller(ControllerRpc::ListSnapshots),
            "GetSnapshot" => controller(ControllerRpc::GetSnapshot),
            "ControllerExpandVolume" => controller(ControllerRpc::ExpandVolume),
            "ControllerGetVolume" => controller(ControllerRpc::GetVolume),
            "ControllerModifyVolume" => controller(ControllerRpc::ModifyVolume),
            "ControllerGetVolumeHealth" => controller(ControllerRpc::GetVolumeHealth),
            "ControllerListVolumeHealth" => controller(ControllerRpc::ListVolumeHealth),
            "NodeGetVolumeHealth" => node(NodeRpc::GetVolumeHealth),
            "NodeGetStorageHealth" => node(NodeRpc::GetStorageHealth),
            "NodeStageVolume" | "NodeUnstageVolume" => node(NodeRpc::StageUnstageVolume),
            "NodeExpandVolume" => node(NodeRpc::ExpandVolume),
            "NodeGetVolumeStats" => {
                // The spec requires NodeGetVolumeStats for GET_VOLUME_STATS or VOLUME_CONDITION.
                node(NodeRpc::GetVolumeStats)
                    .filter(|_| !self.caps.has_node(NodeRpc::VolumeCondition))
            }
            "CreateVolumeGroupSnapshot"
            | "DeleteVolumeGroupSnapshot"
            | "GetVolumeGroupSnapshot" => {
                let t = GroupRpc::CreateDeleteGetVolumeGroupSnapshot;
                (!self.caps.has_group(t)).then(|| {
                    format!(
                        "the group controller capability {} is disabled",
                        t.as_str_name()
                    )
                })
            }
            _ => None,
        }
    }

    /// UNIMPLEMENTED for disabled RPCs, then the secrets check.
    fn gate(&self, rpc: &str, secrets: Option<&HashMap<String, String>>) -> Result<(), Status> {
        if let Some(why) = self.disabled_reason(rpc) {
            return Err(Status::unimplemented(format!(
                "{rpc} is not implemented: {why}"
            )));
        }
        if let Some(status) = self.quirk_unimplemented(rpc) {
            return Err(status);
        }
        if let (Some(configured), Some(given)) = (self.enforced_secrets(), secrets) {
            match configured.check(rpc, given) {
                Ok(()) => {}
                Err(m @ SecretsMismatch::Missing { .. }) => {
                    return Err(Status::unauthenticated(format!("{rpc} {m}")));
                }
                Err(m @ SecretsMismatch::Different { .. }) => {
                    return Err(Status::permission_denied(format!("{rpc}: {m}")));
                }
            }
        }
        Ok(())
    }

    /// Whether the node must insist on a prior ControllerPublishVolume: PUBLISH_UNPUBLISH_VOLUME
    /// is advertised and some controller can have done it (this process, or one sharing state).
    /// Under `advertise-publish-unimplemented` no controller can, whatever is advertised.
    fn controller_publish_required(&self) -> bool {
        self.caps
            .has_controller(ControllerRpc::PublishUnpublishVolume)
            && (self.config.mode.serves_controller() || self.config.state_dir.is_some())
            && !self.quirk(Quirk::AdvertisePublishUnimplemented)
    }

    /// A standalone node plugin (node-only, no shared state) has no controller: every volume
    /// id is a statically provisioned volume.
    fn standalone_node(&self) -> bool {
        self.config.mode == Mode::NodeOnly && self.config.state_dir.is_none()
    }

    /// This node's topology segments (with a zone under `topology-extra-node-segment`).
    fn node_topology(&self) -> v1::Topology {
        let mut t = node_topology(&self.config.node_id);
        if self.quirk(Quirk::TopologyExtraNodeSegment) {
            t.segments.insert(quirks::EXTRA_TOPOLOGY_KEY.to_owned(), "zone-1".to_owned());
        }
        t
    }
}

/// The topology segments of a node.
pub(crate) fn node_topology(node_id: &str) -> v1::Topology {
    v1::Topology {
        segments: [(TOPOLOGY_KEY.to_owned(), node_id.to_owned())].into(),
    }
}

/// What the per-RPC plumbing needs from a request: its secrets and what to log it under.
pub(crate) trait RpcRequest {
    /// The request's secrets map, for RPCs that have one.
    fn secrets(&self) -> Option<&HashMap<String, String>> {
        None
    }
    /// The id or name the request is about (for logs; never a secret).
    fn subject(&self) -> &str {
        ""
    }
}

macro_rules! rpc_request {
    ($($t:ident),* $(,)?) => { $(impl RpcRequest for v1::$t {})* };
}
macro_rules! rpc_request_with {
    ($($t:ident => $subject:ident, $secrets:tt;)*) => {
        $(impl RpcRequest for v1::$t {
            fn secrets(&self) -> Option<&HashMap<String, String>> {
                rpc_request_with!(@secrets self, $secrets)
            }
            fn subject(&self) -> &str {
                &self.$subject
            }
        })*
    };
    (@secrets $self:ident, secrets) => { Some(&$self.secrets) };
    (@secrets $self:ident, none) => { None };
}

rpc_request!(
    GetPluginInfoRequest,
    GetPluginCapabilitiesRequest,
    ProbeRequest,
    ListVolumesRequest,
    GetCapacityRequest,
    ControllerGetCapabilitiesRequest,
    GroupControllerGetCapabilitiesRequest,
    NodeGetCapabilitiesRequest,
    NodeGetInfoRequest,
);
rpc_request_with! {
    CreateVolumeRequest => name, secrets;
    DeleteVolumeRequest => volume_id, secrets;
    ControllerPublishVolumeRequest => volume_id, secrets;
    ControllerUnpublishVolumeRequest => volume_id, secrets;
    ValidateVolumeCapabilitiesRequest => volume_id, secrets;
    CreateSnapshotRequest => name, secrets;
    DeleteSnapshotRequest => snapshot_id, secrets;
    ListSnapshotsRequest => snapshot_id, secrets;
    GetSnapshotRequest => snapshot_id, secrets;
    ControllerExpandVolumeRequest => volume_id, secrets;
    ControllerGetVolumeRequest => volume_id, none;
    ControllerModifyVolumeRequest => volume_id, secrets;
    ControllerGetVolumeHealthRequest => volume_id, secrets;
    NodeGetVolumeHealthRequest => volume_id, none;
    CreateVolumeGroupSnapshotRequest => name, secrets;
    DeleteVolumeGroupSnapshotRequest => group_snapshot_id, secrets;
    GetVolumeGroupSnapshotRequest => group_snapshot_id, secrets;
    GetMetadataAllocatedRequest => snapshot_id, secrets;
    GetMetadataDeltaRequest => target_snapshot_id, secrets;
    NodeStageVolumeRequest => volume_id, secrets;
    NodeUnstageVolumeRequest => volume_id, none;
    NodePublishVolumeRequest => volume_id, secrets;
    NodeUnpublishVolumeRequest => volume_id, none;
    NodeGetVolumeStatsRequest => volume_id, none;
    NodeExpandVolumeRequest => volume_id, secrets;
}

impl RpcRequest for v1::ControllerListVolumeHealthRequest {
    fn secrets(&self) -> Option<&HashMap<String, String>> {
        Some(&self.secrets)
    }
}
impl RpcRequest for v1::NodeGetStorageHealthRequest {
    fn secrets(&self) -> Option<&HashMap<String, String>> {
        Some(&self.secrets)
    }
}

/// The gRPC face of a [`Plugin`]; implements every service trait.
#[derive(Clone)]
pub(crate) struct Service(Arc<Plugin>);

impl Service {
    /// Runs one RPC: latency, UNIMPLEMENTED / secrets gate, then `body` on a blocking thread
    /// (it may take the state lock and mount), and logs the outcome code.
    async fn call<Req, Resp>(
        &self,
        rpc: &'static str,
        request: Request<Req>,
        body: fn(&Plugin, Req) -> Result<Resp, Status>,
    ) -> Result<Response<Resp>, Status>
    where
        Req: RpcRequest + prost::Message + prost::Name + Send + 'static,
        Resp: Send + 'static,
    {
        let plugin = self.0.clone();
        if !plugin.config.latency.is_zero() {
            tokio::time::sleep(plugin.config.latency).await;
        }
        let req = request.into_inner();
        let echo = plugin.quirk(Quirk::EchoSecrets).then(|| echo::Echo::of(&req)).flatten();
        let subject = req.subject().to_owned();
        let malformed = || {
            plugin.quirk(Quirk::StrictIds).then(|| quirks::malformed_id(&crate::proto::to_dynamic(&req))).flatten()
        };
        let lock = match quirks::lock_volume(&self.0, rpc, &subject) {
            Ok(lock) => lock,
            Err(status) => return Err(self.0.told_error(status)),
        };
        let result = match plugin.gate(rpc, req.secrets()).and_then(|()| malformed().map_or(Ok(()), Err)) {
            Err(status) => Err(status),
            Ok(()) => tokio::task::spawn_blocking(move || body(&plugin, req))
                .await
                .unwrap_or_else(|e| Err(Status::internal(format!("{rpc} failed: {e}")))),
        };
        if lock.is_some() {
            // The backend's time under the lock, so that calls on one volume can meet.
            tokio::time::sleep(quirks::BUSY_HOLD).await;
        }
        drop(lock);
        if rpc == "CreateVolume" && !self.0.config.create_answer_delay.is_zero() {
            tokio::time::sleep(self.0.config.create_answer_delay).await;
        }
        let result = result.map_err(|status| self.0.told_error(status));
        let result = match &echo {
            Some(echo) => result.map(|answer| echo.answer(answer)).map_err(|status| echo.status(status)),
            None => result,
        };
        match &result {
            Ok(_) => tracing::info!(rpc, subject = %subject, code = "OK", "rpc"),
            Err(s) => tracing::info!(
                rpc,
                subject = %subject,
                code = ?s.code(),
                message = %s.message(),
                "rpc"
            ),
        }
        result.map(Response::new)
    }
}

/// A running reference plugin started by [`spawn`]. Dropping it stops the server.
pub struct ReferenceHandle {
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
    socket: Option<PathBuf>,
    local_addr: Option<SocketAddr>,
}

impl ReferenceHandle {
    /// The unix socket it listens on, if any.
    pub fn socket_path(&self) -> Option<&Path> {
        self.socket.as_deref()
    }

    /// The TCP address it listens on, if any (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// Stops serving, waits (briefly) for the server to finish and removes the socket file.
    pub async fn shutdown(mut self) -> Result<(), Error> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let mut result = Ok(());
        if let Some(mut task) = self.task.take() {
            match tokio::time::timeout(Duration::from_secs(2), &mut task).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => result = Err(Error::Serve(e)),
                Ok(Err(_)) => {}
                Err(_) => task.abort(),
            }
        }
        if let Some(path) = self.socket.take() {
            let _ = std::fs::remove_file(path);
        }
        result
    }
}

impl Drop for ReferenceHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(path) = self.socket.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Removes a socket file left behind by an earlier run; refuses to remove anything else.
fn remove_stale_socket(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|source| Error::Listen {
                endpoint: path.display().to_string(),
                source,
            })
        }
        Ok(_) => Err(Error::Listen {
            endpoint: path.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the path exists and is not a socket",
            ),
        }),
        Err(_) => Ok(()),
    }
}

/// Listens on `path` so that the socket file appears only once it accepts connections.
///
/// `bind(2)` creates the file before `listen(2)` makes it connectable, and a client that waits
/// for the file (the kubelet's plugin watcher, a script polling for it) can connect in between
/// and be refused. So the socket is bound and listening under a temporary name in the same
/// directory and then renamed into place: the name appears already listening.
fn bind_in_place(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    let name = path.file_name().unwrap_or_default();
    // A short suffix: a unix socket path has a limit of about 107 bytes.
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}", std::process::id()));
    let temp = path.with_file_name(temp_name);
    let _ = std::fs::remove_file(&temp);
    let listener = match tokio::net::UnixListener::bind(&temp) {
        Ok(listener) => listener,
        // The temporary name is too long for a socket address (or the directory refuses it):
        // bind the path itself, as before.
        Err(_) => return tokio::net::UnixListener::bind(path),
    };
    if let Err(e) = std::fs::rename(&temp, path) {
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    Ok(listener)
}

/// Builds the router with the services this configuration serves.
fn router(plugin: Arc<Plugin>) -> tonic::transport::server::Router {
    let svc = Service(plugin.clone());
    let caps = &plugin.caps;
    let mode = plugin.config.mode;
    let controller = mode.serves_controller() && caps.has_plugin(PluginService::ControllerService);
    let group = mode.serves_controller() && caps.has_plugin(PluginService::GroupControllerService);
    let metadata =
        mode.serves_controller() && caps.has_plugin(PluginService::SnapshotMetadataService);
    tonic::transport::Server::builder()
        .add_service(IdentityServer::new(svc.clone()))
        .add_optional_service(controller.then(|| ControllerServer::new(svc.clone())))
        .add_optional_service(group.then(|| GroupControllerServer::new(svc.clone())))
        .add_optional_service(metadata.then(|| SnapshotMetadataServer::new(svc.clone())))
        .add_optional_service(mode.serves_node().then(|| NodeServer::new(svc)))
}

/// Starts a reference plugin on `endpoint` in a tokio task and returns at once (the socket is
/// listening when this returns).
pub async fn spawn(config: Config, endpoint: &str) -> Result<ReferenceHandle, Error> {
    config.validate()?;
    let endpoint: Endpoint = endpoint.parse().map_err(|e: crate::client::EndpointError| Error::Endpoint(e.to_string()))?;
    let plugin = Arc::new(
        tokio::task::spawn_blocking(move || Plugin::new(config))
            .await
            .map_err(|e| Error::Config(format!("starting the plugin failed: {e}")))??,
    );
    let (tx, rx) = oneshot::channel::<()>();
    let signal = async move {
        let _ = rx.await;
    };
    let router = router(plugin.clone());
    let listen_err = |source| Error::Listen {
        endpoint: endpoint.to_string(),
        source,
    };
    let (task, socket, local_addr) = match &endpoint {
        Endpoint::Unix(path) => {
            remove_stale_socket(path)?;
            let listener = bind_in_place(path).map_err(listen_err)?;
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
            let task = tokio::spawn(router.serve_with_incoming_shutdown(incoming, signal));
            (task, Some(path.clone()), None)
        }
        Endpoint::Tcp { host, port } => {
            let listener = tokio::net::TcpListener::bind((host.as_str(), *port))
                .await
                .map_err(listen_err)?;
            let local = listener.local_addr().ok();
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let task = tokio::spawn(router.serve_with_incoming_shutdown(incoming, signal));
            (task, None, local)
        }
    };
    tracing::info!(
        endpoint = %endpoint,
        node_id = %plugin.config.node_id,
        mode = ?plugin.config.mode,
        "reference plugin serving"
    );
    Ok(ReferenceHandle {
        shutdown: Some(tx),
        task: Some(task),
        socket,
        local_addr,
    })
}

/// Serves until SIGINT or SIGTERM, then stops and removes the socket file. With
/// `--list-quirks` it only prints the quirks instead.
pub async fn run(args: Args) -> Result<(), Error> {
    use tokio::signal::unix::{SignalKind, signal};
    if args.list_quirks {
        print!("{}", Quirk::listing());
        return Ok(());
    }
    let Some(endpoint) = args.endpoint.as_deref() else {
        return Err(Error::Config(
            "--endpoint (or CSI_ENDPOINT) is required to serve the reference plugin".into(),
        ));
    };
    let config = Config::from_args(&args)?;
    if args.private_mounts {
        if !PRIVATE_MOUNTS.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Config(
                "--private-mounts: the mount namespace must be left before the runtime starts (call reference::prepare first)"
                    .into(),
            ));
        }
        let namespace = crate::mounts::mount_namespace(None).unwrap_or_default();
        tracing::info!(pid = std::process::id(), %namespace, "serving from a mount namespace of its own");
    }
    let what = match config.mode {
        Mode::All => "controller and node",
        Mode::NodeOnly => "node only",
        Mode::ControllerOnly => "controller only",
    };
    let node_id = config.node_id.clone();
    let quirks = config.quirks.len();
    let mut term = signal(SignalKind::terminate()).map_err(Error::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(Error::Signal)?;
    let handle = spawn(config, endpoint).await?;
    // One line when it is ready, for a person (and for scripts that wait on it).
    println!(
        "csi-conform reference plugin listening on {endpoint} ({what}, node id {node_id}, {quirks} quirk(s)); SIGINT or SIGTERM stops it"
    );
    let _ = std::io::Write::flush(&mut std::io::stdout());
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = int.recv() => tracing::info!("SIGINT: stopping"),
    }
    handle.shutdown().await
}
