//! A small in-memory CSI plugin (Identity, Controller, Node) served on a real unix socket, for
//! exercising the suite engine. It records what it receives (secrets, overlapping calls) and
//! misbehaves on request through CreateVolume parameters:
//! `flaky` (answers differently each time), `echo_secret` (puts the received secret in its
//! error text), `undeletable` (DeleteVolume fails), `sleep_ms` (answers slowly). A volume
//! whose name ends in `-crash` makes the plugin drop every connection at once and remove its
//! socket, as a crashed plugin does (and, with [`FakeOptions::restart_after`], come back on the
//! same socket with the same state, as a supervised plugin does). [`FakeOptions::misbehave`]
//! makes chosen RPCs hang or answer raw bytes (see [`super::misbehaving`]).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use csi_conform::{
    client::{ClientOptions, Connection, Endpoint},
    fingerprint::{ControllerCapability, NodeCapability},
    proto::v1::{self, controller_server::ControllerServer, identity_server::IdentityServer, node_server::NodeServer},
};
use tokio::sync::Notify;
use tonic::{Request, Response, Status};

/// A volume the fake holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeVolume {
    /// Its name.
    pub name: String,
    /// Its size.
    pub capacity: i64,
    /// Its parameters.
    pub parameters: BTreeMap<String, String>,
    /// CreateVolume calls that returned it (a `flaky` volume shows this count).
    pub calls: u32,
    /// Whether it was created for block access.
    pub block: bool,
}

/// Everything the fake knows and recorded.
#[derive(Debug, Default)]
pub struct State {
    /// Volumes by id.
    pub volumes: BTreeMap<String, FakeVolume>,
    /// Snapshot name → (id, source volume id).
    pub snapshots: BTreeMap<String, (String, String)>,
    /// CreateSnapshot calls per snapshot name (ready after the third).
    pub snapshot_calls: BTreeMap<String, u32>,
    /// (volume, node) publications.
    pub published: BTreeSet<(String, String)>,
    /// (volume, path) stagings and node publications.
    pub staged: BTreeSet<(String, String)>,
    /// (volume, path) node publications.
    pub node_published: BTreeSet<(String, String)>,
    /// Every non-empty secrets map received, with its RPC.
    pub secrets: Vec<(String, BTreeMap<String, String>)>,
    /// The most calls in flight seen while a volume named `*serial*` was being created.
    pub serial_max_in_flight: usize,
    /// While set, CreateVolume answers this code, whatever it is asked (a backend that
    /// cannot be reached now).
    pub create_refusal: Option<tonic::Code>,
}

/// What the fake advertises.
#[derive(Debug, Clone)]
pub struct FakeOptions {
    /// Controller capabilities.
    pub controller: Vec<ControllerCapability>,
    /// Node capabilities.
    pub node: Vec<NodeCapability>,
    /// NodeGetInfo.max_volumes_per_node.
    pub max_volumes_per_node: i64,
    /// After a crash, serve again on the same socket this much later.
    pub restart_after: Option<Duration>,
    /// RPCs (by method name) that misbehave instead of answering.
    pub misbehave: super::misbehaving::Rules,
    /// ListVolumes tokens are positions in the list (as hostpath-style plugins page), so an
    /// entry deleted before the position shifts the next page past one that exists.
    pub positional_tokens: bool,
    /// CreateVolume with an existing name and the other access type answers INVALID_ARGUMENT
    /// (the wrong code for an incompatible existing volume).
    pub conflict_invalid_argument: bool,
    /// CreateVolume refuses block access outright (INVALID_ARGUMENT): a mount-only plugin.
    pub refuse_block: bool,
    /// The name GetPluginInfo answers (none: `fake.csi-conform.test`).
    pub name: Option<String>,
}

impl Default for FakeOptions {
    fn default() -> Self {
        FakeOptions {
            controller: vec![
                ControllerCapability::CreateDeleteVolume,
                ControllerCapability::PublishUnpublishVolume,
                ControllerCapability::ListVolumes,
                ControllerCapability::CreateDeleteSnapshot,
            ],
            node: vec![NodeCapability::StageUnstageVolume],
            max_volumes_per_node: 2,
            restart_after: None,
            misbehave: Default::default(),
            positional_tokens: false,
            conflict_invalid_argument: false,
            refuse_block: false,
            name: None,
        }
    }
}

/// The node id the fake reports.
pub const NODE_ID: &str = "fake-node";

#[derive(Clone)]
struct Fake {
    state: Arc<Mutex<State>>,
    options: FakeOptions,
    in_flight: Arc<AtomicUsize>,
    crash: Arc<Notify>,
    gates: Arc<Gates>,
}

/// Named gates that held calls wait at (see [`FakePlugin::gates`]).
#[derive(Default)]
pub struct Gates(Mutex<BTreeMap<String, Arc<tokio::sync::Semaphore>>>);

impl Gates {
    /// Gate `key` (closed until given permits).
    pub fn gate(&self, key: &str) -> Arc<tokio::sync::Semaphore> {
        self.0.lock().unwrap().entry(key.to_owned()).or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(0))).clone()
    }

    async fn pass(&self, key: &str) {
        self.gate(key).acquire().await.expect("gates stay open").forget();
    }
}

/// Counts a call in flight for as long as it lives.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        InFlight(counter.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running fake plugin.
pub struct FakePlugin {
    /// Its socket.
    pub socket: PathBuf,
    /// A CreateVolume or CreateSnapshot with the parameter `hold: KEY` waits for a permit of
    /// gate KEY before it answers.
    pub gates: Arc<Gates>,
    /// Its state, to inspect and to seed.
    pub state: Arc<Mutex<State>>,
    /// The fake's own runtime: shutting it down drops every connection at once, as a crash
    /// does (a graceful server shutdown would still answer calls on open connections).
    runtime: Arc<Mutex<Option<tokio::runtime::Runtime>>>,
    in_flight: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

impl FakePlugin {
    /// Starts a fake on a fresh socket.
    pub async fn start(options: FakeOptions) -> FakePlugin {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("csi.sock");
        let restart_after = options.restart_after;
        let gates = Arc::new(Gates::default());
        let fake = Fake {
            state: Arc::default(),
            options,
            in_flight: Arc::default(),
            crash: Arc::new(Notify::new()),
            gates: gates.clone(),
        };
        let state = fake.state.clone();
        let in_flight = fake.in_flight.clone();
        let crash = fake.crash.clone();
        let runtime = Arc::new(Mutex::new(Some(serve(&fake, &socket))));
        let on_crash = runtime.clone();
        let crash_socket = socket.clone();
        tokio::spawn(async move {
            crash.notified().await;
            let _ = std::fs::remove_file(&crash_socket);
            if let Some(rt) = on_crash.lock().unwrap().take() {
                rt.shutdown_background();
            }
            if let Some(after) = restart_after {
                tokio::time::sleep(after).await;
                *on_crash.lock().unwrap() = Some(serve(&fake, &crash_socket));
            }
        });
        FakePlugin { socket, gates, state, runtime, in_flight, _dir: dir }
    }

    /// How many calls it is working on now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Connects to it with short timeouts.
    pub async fn connect(&self) -> Connection {
        self.connect_with(ClientOptions { rpc_timeout: Duration::from_secs(2), ..ClientOptions::default() }).await
    }

    /// Connects to it with `options` (and a 5s connect timeout).
    pub async fn connect_with(&self, options: ClientOptions) -> Connection {
        let options = ClientOptions { connect_timeout: Duration::from_secs(5), ..options };
        Connection::connect(Endpoint::Unix(self.socket.clone()), options).await.expect("connect to the fake")
    }

    /// The fake as the suite engine sees it: one connection (with `options`) in every role,
    /// fingerprinted.
    pub async fn engine_plugin(&self, options: ClientOptions) -> csi_conform::suite::Plugin {
        let conn = self.connect_with(options).await;
        let fingerprint = csi_conform::fingerprint::Fingerprint::collect(Some(&conn), std::slice::from_ref(&conn))
            .await
            .expect("the fake fingerprints");
        csi_conform::suite::Plugin { controller: Some(conn.clone()), nodes: vec![conn], fingerprint }
    }

    /// Stops it.
    pub async fn stop(self) {
        if let Some(rt) = self.runtime.lock().unwrap().take() {
            rt.shutdown_background();
        }
    }

    /// The ids of its volumes.
    pub fn volume_ids(&self) -> Vec<String> {
        self.state.lock().unwrap().volumes.keys().cloned().collect()
    }
}

impl Drop for FakePlugin {
    /// A runtime may not be dropped (which blocks) inside async code; shut it down instead.
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.lock().map(|mut r| r.take()).ok().flatten() {
            rt.shutdown_background();
        }
    }
}

/// Serves `fake` on a new socket at `socket`, on a runtime of its own (shutting that runtime
/// down drops every connection at once, as a crash does).
fn serve(fake: &Fake, socket: &std::path::Path) -> tokio::runtime::Runtime {
    let listener = std::os::unix::net::UnixListener::bind(socket).expect("bind the fake's socket");
    listener.set_nonblocking(true).expect("a non-blocking listener");
    let server = tonic::transport::Server::builder()
        .layer(super::misbehaving::Layer::new(fake.options.misbehave.clone()))
        .add_service(IdentityServer::new(fake.clone()))
        .add_service(ControllerServer::new(fake.clone()))
        .add_service(NodeServer::new(fake.clone()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("the fake's runtime");
    let incoming = {
        let _guard = runtime.enter();
        tokio_stream::wrappers::UnixListenerStream::new(
            tokio::net::UnixListener::from_std(listener).expect("register the listener"),
        )
    };
    runtime.spawn(async move {
        let _ = server.serve_with_incoming(incoming).await;
    });
    runtime
}

fn record_secrets(state: &Mutex<State>, rpc: &str, secrets: &std::collections::HashMap<String, String>) {
    if !secrets.is_empty() {
        let map = secrets.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        state.lock().unwrap().secrets.push((rpc.to_owned(), map));
    }
}

fn bad(message: &str) -> Status {
    Status::invalid_argument(message)
}

#[tonic::async_trait]
impl v1::identity_server::Identity for Fake {
    async fn get_plugin_info(
        &self,
        _: Request<v1::GetPluginInfoRequest>,
    ) -> Result<Response<v1::GetPluginInfoResponse>, Status> {
        Ok(Response::new(v1::GetPluginInfoResponse {
            name: self.options.name.clone().unwrap_or_else(|| "fake.csi-conform.test".into()),
            vendor_version: "0.0.1".into(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<v1::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<v1::GetPluginCapabilitiesResponse>, Status> {
        use v1::plugin_capability::{Service, Type, service};
        let service =
            |t: service::Type| v1::PluginCapability { r#type: Some(Type::Service(Service { r#type: t as i32 })) };
        Ok(Response::new(v1::GetPluginCapabilitiesResponse {
            capabilities: vec![
                service(service::Type::ControllerService),
                service(service::Type::VolumeAccessibilityConstraints),
            ],
        }))
    }

    async fn probe(&self, _: Request<v1::ProbeRequest>) -> Result<Response<v1::ProbeResponse>, Status> {
        Ok(Response::new(v1::ProbeResponse { ready: Some(true) }))
    }
}

/// The answer of every RPC the fake does not implement.
fn unimplemented(rpc: &str) -> Status {
    Status::unimplemented(format!("{rpc} is not implemented by the fake"))
}

#[tonic::async_trait]
impl v1::controller_server::Controller for Fake {
    async fn create_volume(
        &self,
        request: Request<v1::CreateVolumeRequest>,
    ) -> Result<Response<v1::CreateVolumeResponse>, Status> {
        let _flight = InFlight::new(&self.in_flight);
        let req = request.into_inner();
        record_secrets(&self.state, "CreateVolume", &req.secrets);
        if let Some(code) = self.state.lock().unwrap().create_refusal {
            return Err(Status::new(code, "the backend cannot be reached now"));
        }
        if req.name.is_empty() {
            return Err(bad("name is required"));
        }
        if req.volume_capabilities.is_empty() {
            return Err(bad("volume_capabilities are required"));
        }
        if req.parameters.contains_key("echo_secret") {
            let shown: Vec<&String> = req.secrets.values().collect();
            return Err(bad(&format!("refusing secrets {shown:?}")));
        }
        if let Some(key) = req.parameters.get("hold") {
            self.gates.pass(key).await;
        }
        if req.parameters.contains_key("echo_mount_flags") {
            // A plugin that quotes the mount options it could not use in its error text.
            let flags: Vec<&String> = req
                .volume_capabilities
                .iter()
                .filter_map(|c| match &c.access_type {
                    Some(v1::volume_capability::AccessType::Mount(m)) => Some(&m.mount_flags),
                    _ => None,
                })
                .flatten()
                .collect();
            return Err(bad(&format!("refusing mount flags {flags:?}")));
        }
        if let Some(ms) = req.parameters.get("sleep_ms").and_then(|s| s.parse().ok()) {
            let serial = req.name.contains("serial");
            let before = self.in_flight.load(Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let after = self.in_flight.load(Ordering::SeqCst);
            if serial {
                let mut state = self.state.lock().unwrap();
                state.serial_max_in_flight = state.serial_max_in_flight.max(before).max(after);
            }
        }
        if req.name.ends_with("-crash") {
            // Dies before answering: the caller sees the connection go.
            self.crash.notify_one();
            std::future::pending::<()>().await;
        }
        let capacity = req.capacity_range.map_or(1 << 30, |c| c.required_bytes);
        let mut state = self.state.lock().unwrap();
        let parameters: BTreeMap<String, String> = req.parameters.clone().into_iter().collect();
        let existing = state.volumes.iter().find(|(_, v)| v.name == req.name).map(|(id, v)| (id.clone(), v.clone()));
        let block = req.volume_capabilities.iter().any(|c| matches!(c.access_type, Some(v1::volume_capability::AccessType::Block(_))));
        if block && self.options.refuse_block {
            return Err(bad("block access is not supported"));
        }
        let id = match existing {
            Some((_, v)) if self.options.conflict_invalid_argument && v.block != block => {
                return Err(bad(&format!("volume {} has another access type", req.name)));
            }
            Some((_, v)) if v.capacity != capacity => {
                return Err(Status::already_exists(format!("volume {} exists with another size", req.name)));
            }
            Some((id, _)) => id,
            None => {
                let id = format!("vol-{}", req.name);
                state.volumes.insert(
                    id.clone(),
                    FakeVolume { name: req.name.clone(), capacity, parameters: parameters.clone(), calls: 0, block },
                );
                id
            }
        };
        let mut context = std::collections::HashMap::new();
        if let Some(volume) = state.volumes.get_mut(&id) {
            volume.calls += 1;
            if parameters.contains_key("flaky") {
                context.insert("call".to_owned(), volume.calls.to_string());
            }
        }
        Ok(Response::new(v1::CreateVolumeResponse {
            volume: Some(v1::Volume {
                volume_id: id,
                capacity_bytes: capacity,
                volume_context: context,
                accessible_topology: vec![v1::Topology { segments: [("zone".to_owned(), "z1".to_owned())].into() }],
                ..Default::default()
            }),
        }))
    }

    async fn delete_volume(
        &self,
        request: Request<v1::DeleteVolumeRequest>,
    ) -> Result<Response<v1::DeleteVolumeResponse>, Status> {
        let _flight = InFlight::new(&self.in_flight);
        let req = request.into_inner();
        record_secrets(&self.state, "DeleteVolume", &req.secrets);
        if req.volume_id.is_empty() {
            return Err(bad("volume_id is required"));
        }
        let mut state = self.state.lock().unwrap();
        if state.volumes.get(&req.volume_id).is_some_and(|v| v.parameters.contains_key("undeletable")) {
            return Err(Status::failed_precondition("this volume cannot be deleted"));
        }
        state.volumes.remove(&req.volume_id);
        Ok(Response::new(v1::DeleteVolumeResponse {}))
    }

    async fn controller_publish_volume(
        &self,
        request: Request<v1::ControllerPublishVolumeRequest>,
    ) -> Result<Response<v1::ControllerPublishVolumeResponse>, Status> {
        let _flight = InFlight::new(&self.in_flight);
        let req = request.into_inner();
        if req.volume_id.is_empty() || req.node_id.is_empty() || req.volume_capability.is_none() {
            return Err(bad("volume_id, node_id and volume_capability are required"));
        }
        let mut state = self.state.lock().unwrap();
        if !state.volumes.contains_key(&req.volume_id) {
            return Err(Status::not_found("no such volume"));
        }
        if req.node_id != NODE_ID {
            return Err(Status::not_found("no such node"));
        }
        let key = (req.volume_id.clone(), req.node_id.clone());
        let on_node = state.published.iter().filter(|(_, n)| *n == req.node_id).count() as i64;
        if !state.published.contains(&key) && on_node >= self.options.max_volumes_per_node {
            return Err(Status::resource_exhausted("attach limit reached"));
        }
        state.published.insert(key);
        Ok(Response::new(v1::ControllerPublishVolumeResponse {
            publish_context: [("device".to_owned(), "/dev/fake".to_owned())].into(),
        }))
    }

    async fn controller_unpublish_volume(
        &self,
        request: Request<v1::ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<v1::ControllerUnpublishVolumeResponse>, Status> {
        let req = request.into_inner();
        if req.volume_id.is_empty() {
            return Err(bad("volume_id is required"));
        }
        self.state
            .lock()
            .unwrap()
            .published
            .retain(|(v, n)| !(*v == req.volume_id && (req.node_id.is_empty() || *n == req.node_id)));
        Ok(Response::new(v1::ControllerUnpublishVolumeResponse {}))
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<v1::ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<v1::ValidateVolumeCapabilitiesResponse>, Status> {
        let req = request.into_inner();
        if !self.state.lock().unwrap().volumes.contains_key(&req.volume_id) {
            return Err(Status::not_found("no such volume"));
        }
        Ok(Response::new(v1::ValidateVolumeCapabilitiesResponse {
            confirmed: Some(v1::validate_volume_capabilities_response::Confirmed {
                volume_capabilities: req.volume_capabilities,
                ..Default::default()
            }),
            message: String::new(),
        }))
    }

    async fn list_volumes(
        &self,
        request: Request<v1::ListVolumesRequest>,
    ) -> Result<Response<v1::ListVolumesResponse>, Status> {
        let req = request.into_inner();
        let state = self.state.lock().unwrap();
        let ids: Vec<&String> = state.volumes.keys().collect();
        let start = match req.starting_token.as_str() {
            "" => 0,
            token if self.options.positional_tokens => {
                token.parse::<usize>().map_err(|_| Status::aborted("invalid starting_token"))?
            }
            token => token
                .strip_prefix("after:")
                .and_then(|id| ids.iter().position(|i| i.as_str() > id))
                .unwrap_or(ids.len()),
        };
        if !req.starting_token.is_empty() && !self.options.positional_tokens && !req.starting_token.starts_with("after:") {
            return Err(Status::aborted("invalid starting_token"));
        }
        let take = if req.max_entries > 0 { req.max_entries as usize } else { usize::MAX };
        let page: Vec<&String> = ids.iter().skip(start).take(take).copied().collect();
        let next_token = match page.last() {
            Some(_) if self.options.positional_tokens && start + page.len() < ids.len() => (start + page.len()).to_string(),
            Some(last) if start + page.len() < ids.len() => format!("after:{last}"),
            _ => String::new(),
        };
        let entries = page
            .into_iter()
            .map(|id| v1::list_volumes_response::Entry {
                volume: Some(v1::Volume {
                    volume_id: id.clone(),
                    capacity_bytes: state.volumes[id].capacity,
                    ..Default::default()
                }),
                status: None,
            })
            .collect();
        Ok(Response::new(v1::ListVolumesResponse { entries, next_token }))
    }

    async fn controller_get_capabilities(
        &self,
        _: Request<v1::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<v1::ControllerGetCapabilitiesResponse>, Status> {
        use v1::controller_service_capability::{Rpc, Type};
        let capabilities = self
            .options
            .controller
            .iter()
            .map(|c| v1::ControllerServiceCapability { r#type: Some(Type::Rpc(Rpc { r#type: *c as i32 })) })
            .collect();
        Ok(Response::new(v1::ControllerGetCapabilitiesResponse { capabilities }))
    }

    async fn create_snapshot(
        &self,
        request: Request<v1::CreateSnapshotRequest>,
    ) -> Result<Response<v1::CreateSnapshotResponse>, Status> {
        let req = request.into_inner();
        record_secrets(&self.state, "CreateSnapshot", &req.secrets);
        if req.name.is_empty() || req.source_volume_id.is_empty() {
            return Err(bad("name and source_volume_id are required"));
        }
        if let Some(key) = req.parameters.get("hold") {
            self.gates.pass(key).await;
        }
        let mut state = self.state.lock().unwrap();
        let id = format!("snap-{}", req.name);
        state.snapshots.insert(req.name.clone(), (id.clone(), req.source_volume_id.clone()));
        let calls = state.snapshot_calls.entry(req.name).or_default();
        *calls += 1;
        Ok(Response::new(v1::CreateSnapshotResponse {
            snapshot: Some(v1::Snapshot {
                snapshot_id: id,
                source_volume_id: req.source_volume_id,
                creation_time: Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: 0 }),
                ready_to_use: *calls >= 3,
                ..Default::default()
            }),
        }))
    }

    async fn delete_snapshot(
        &self,
        request: Request<v1::DeleteSnapshotRequest>,
    ) -> Result<Response<v1::DeleteSnapshotResponse>, Status> {
        let req = request.into_inner();
        if req.snapshot_id.is_empty() {
            return Err(bad("snapshot_id is required"));
        }
        let mut state = self.state.lock().unwrap();
        let names: Vec<String> =
            state.snapshots.iter().filter(|(_, (id, _))| *id == req.snapshot_id).map(|(n, _)| n.clone()).collect();
        for name in names {
            state.snapshots.remove(&name);
            state.snapshot_calls.remove(&name);
        }
        Ok(Response::new(v1::DeleteSnapshotResponse {}))
    }

    /// Advertised (GET_CAPACITY in `controller`): the bytes its `available` parameter names
    /// (as if parameters chose a pool), else 1 TiB; otherwise UNIMPLEMENTED.
    async fn get_capacity(
        &self,
        request: Request<v1::GetCapacityRequest>,
    ) -> Result<Response<v1::GetCapacityResponse>, Status> {
        if !self.options.controller.contains(&ControllerCapability::GetCapacity) {
            return Err(unimplemented("get_capacity"));
        }
        let available = match request.into_inner().parameters.get("available") {
            Some(bytes) => bytes.parse().map_err(|_| bad("available: not a number of bytes"))?,
            None => 1 << 40,
        };
        Ok(Response::new(v1::GetCapacityResponse { available_capacity: available, ..Default::default() }))
    }

    async fn list_snapshots(
        &self,
        _: Request<v1::ListSnapshotsRequest>,
    ) -> Result<Response<v1::ListSnapshotsResponse>, Status> {
        Err(unimplemented("list_snapshots"))
    }

    async fn get_snapshot(
        &self,
        _: Request<v1::GetSnapshotRequest>,
    ) -> Result<Response<v1::GetSnapshotResponse>, Status> {
        Err(unimplemented("get_snapshot"))
    }

    async fn controller_expand_volume(
        &self,
        _: Request<v1::ControllerExpandVolumeRequest>,
    ) -> Result<Response<v1::ControllerExpandVolumeResponse>, Status> {
        Err(unimplemented("controller_expand_volume"))
    }

    async fn controller_get_volume(
        &self,
        _: Request<v1::ControllerGetVolumeRequest>,
    ) -> Result<Response<v1::ControllerGetVolumeResponse>, Status> {
        Err(unimplemented("controller_get_volume"))
    }

    async fn controller_modify_volume(
        &self,
        _: Request<v1::ControllerModifyVolumeRequest>,
    ) -> Result<Response<v1::ControllerModifyVolumeResponse>, Status> {
        Err(unimplemented("controller_modify_volume"))
    }

    async fn controller_list_volume_health(
        &self,
        _: Request<v1::ControllerListVolumeHealthRequest>,
    ) -> Result<Response<v1::ControllerListVolumeHealthResponse>, Status> {
        Err(unimplemented("controller_list_volume_health"))
    }

    async fn controller_get_volume_health(
        &self,
        _: Request<v1::ControllerGetVolumeHealthRequest>,
    ) -> Result<Response<v1::ControllerGetVolumeHealthResponse>, Status> {
        Err(unimplemented("controller_get_volume_health"))
    }
}

/// Which record of node attachments (stagings or publications) an RPC changes.
type Records = fn(&mut State) -> &mut BTreeSet<(String, String)>;

impl Fake {
    /// NodeStage/NodePublish: validates, creates the path (as a plugin would), records it.
    fn attach(&self, volume_id: String, path: String, capability: bool, records: Records) -> Result<(), Status> {
        if volume_id.is_empty() || path.is_empty() || !capability {
            return Err(bad("volume_id, the path and volume_capability are required"));
        }
        check_new_path(&path)?;
        std::fs::create_dir_all(&path).map_err(|e| Status::internal(e.to_string()))?;
        records(&mut self.state.lock().unwrap()).insert((volume_id, path));
        Ok(())
    }

    /// NodeUnstage/NodeUnpublish: removes the path and the record.
    fn detach(&self, volume_id: String, path: String, records: Records) -> Result<(), Status> {
        if volume_id.is_empty() || path.is_empty() {
            return Err(bad("volume_id and the path are required"));
        }
        let _ = std::fs::remove_dir(&path);
        records(&mut self.state.lock().unwrap()).remove(&(volume_id, path));
        Ok(())
    }
}

/// Checks the CO's side of a path: its parent exists, and (unless already used by this
/// volume) the path itself does not.
fn check_new_path(path: &str) -> Result<(), Status> {
    let path = std::path::Path::new(path);
    if !path.is_absolute() || !path.parent().is_some_and(|p| p.is_dir()) {
        return Err(Status::failed_precondition(format!("the parent of {} does not exist", path.display())));
    }
    Ok(())
}

#[tonic::async_trait]
impl v1::node_server::Node for Fake {
    async fn node_stage_volume(
        &self,
        request: Request<v1::NodeStageVolumeRequest>,
    ) -> Result<Response<v1::NodeStageVolumeResponse>, Status> {
        let req = request.into_inner();
        record_secrets(&self.state, "NodeStageVolume", &req.secrets);
        let cap = req.volume_capability.is_some();
        self.attach(req.volume_id, req.staging_target_path, cap, |s| &mut s.staged)?;
        Ok(Response::new(v1::NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        request: Request<v1::NodeUnstageVolumeRequest>,
    ) -> Result<Response<v1::NodeUnstageVolumeResponse>, Status> {
        let req = request.into_inner();
        self.detach(req.volume_id, req.staging_target_path, |s| &mut s.staged)?;
        Ok(Response::new(v1::NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        request: Request<v1::NodePublishVolumeRequest>,
    ) -> Result<Response<v1::NodePublishVolumeResponse>, Status> {
        let req = request.into_inner();
        record_secrets(&self.state, "NodePublishVolume", &req.secrets);
        let cap = req.volume_capability.is_some();
        self.attach(req.volume_id, req.target_path, cap, |s| &mut s.node_published)?;
        Ok(Response::new(v1::NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<v1::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<v1::NodeUnpublishVolumeResponse>, Status> {
        let req = request.into_inner();
        self.detach(req.volume_id, req.target_path, |s| &mut s.node_published)?;
        Ok(Response::new(v1::NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<v1::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<v1::NodeGetCapabilitiesResponse>, Status> {
        use v1::node_service_capability::{Rpc, Type};
        let capabilities = self
            .options
            .node
            .iter()
            .map(|c| v1::NodeServiceCapability { r#type: Some(Type::Rpc(Rpc { r#type: *c as i32 })) })
            .collect();
        Ok(Response::new(v1::NodeGetCapabilitiesResponse { capabilities }))
    }

    async fn node_get_volume_health(
        &self,
        _: Request<v1::NodeGetVolumeHealthRequest>,
    ) -> Result<Response<v1::NodeGetVolumeHealthResponse>, Status> {
        Err(unimplemented("node_get_volume_health"))
    }

    async fn node_get_storage_health(
        &self,
        _: Request<v1::NodeGetStorageHealthRequest>,
    ) -> Result<Response<v1::NodeGetStorageHealthResponse>, Status> {
        Err(unimplemented("node_get_storage_health"))
    }

    async fn node_get_info(
        &self,
        _: Request<v1::NodeGetInfoRequest>,
    ) -> Result<Response<v1::NodeGetInfoResponse>, Status> {
        Ok(Response::new(v1::NodeGetInfoResponse {
            node_id: NODE_ID.into(),
            max_volumes_per_node: self.options.max_volumes_per_node,
            accessible_topology: Some(v1::Topology { segments: [("zone".to_owned(), "z1".to_owned())].into() }),
        }))
    }

    async fn node_get_volume_stats(
        &self,
        _: Request<v1::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<v1::NodeGetVolumeStatsResponse>, Status> {
        Err(unimplemented("node_get_volume_stats"))
    }

    async fn node_expand_volume(
        &self,
        _: Request<v1::NodeExpandVolumeRequest>,
    ) -> Result<Response<v1::NodeExpandVolumeResponse>, Status> {
        Err(unimplemented("node_expand_volume"))
    }
}
