//! The `data` named check: bytes written into a published volume come back after what an
//! orchestrator does to it. Each scenario creates its own volumes, publishes them the way the
//! `lifecycle` check does, writes seeded markers (see `marker`) through the node's files as
//! this process reaches them (`Inspector::local_path`), and verifies them by digest after
//! republishing, moving to another node, sharing between nodes, a read-only publish, a
//! snapshot and restore, a group snapshot, a clone, or an expansion. Everything is created
//! through the scenario's context, so whatever a failure leaves is torn down with the
//! scenario. Also the `marker` check: one marker written, verified or removed as a suite
//! step, in a volume the scenario created.

use std::{
    collections::{BTreeMap, HashMap},
    io,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use prost_reflect::DynamicMessage;
use tonic::Code;

use super::{Args, ArgReader, Check, CheckDef, CheckFuture, support::accessible_from};
use crate::client::Pacer;
use crate::marker::{Marker, Placement};
use crate::suite::{
    catalog::{CheckDemand, CheckUse},
    ctx::{CheckOutcome, ScenarioCtx, bad_arg},
    inspect::Inspector,
    patience,
    settings::AccessType,
};
use crate::{
    fingerprint::{Capability, ControllerCapability, NodeCapability, PluginService, VolumeExpansion},
    proto::{self, v1},
    report::{Finding, Severity},
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<DataCheck>()];

struct DataCheck;

/// Its arguments.
pub(crate) struct DataArgs {
    /// What the data must survive (one of [`SCENARIOS`]).
    scenario: String,
    /// `mount` or `block` (default: `--access-type`).
    access: Option<String>,
    /// `online` or `offline`, for `expand` (default `online`).
    expansion: Option<String>,
}

impl Args for DataArgs {
    fn read(a: &mut ArgReader<'_>) -> Self {
        DataArgs {
            scenario: a.choice("scenario", SCENARIOS),
            access: a.opt_choice("access", &["mount", "block"]),
            expansion: a.opt_choice("expansion", &["online", "offline"]),
        }
    }
}

impl Check for DataCheck {
    type Args = DataArgs;
    const NAME: &'static str = "data";
    const DESCRIPTION: &'static str = "writes seeded markers into its own published volumes and verifies them by digest after republishing, moving between nodes, sharing, a read-only publish, a snapshot restore, a clone or an expansion";
    const RPCS: &'static [&'static str] = RPCS;

    fn demand(args: &DataArgs, u: &CheckUse<'_>) -> CheckDemand {
        let scenario = args.scenario.as_str();
        let volumes = match scenario {
            // Two sources, and each member's restore.
            "group-snapshot" => 4,
            "snapshot" | "clone" => 2,
            _ => 1,
        };
        let mut publish = vec![publications(scenario) as u32];
        if matches!(scenario, "move" | "shared") && u.nodes > 1 {
            publish.push(1);
        }
        CheckDemand { volumes, publish, expands: scenario == "expand", alone: false }
    }

    /// Create, publish, write, and the way back, once or twice.
    fn cost(_: &DataArgs, _: &CheckUse<'_>) -> u64 {
        16
    }

    fn run(ctx: &mut ScenarioCtx, args: DataArgs) -> CheckFuture<'_> {
        Box::pin(run(ctx, args))
    }
}

/// The scenarios of the `data` check.
pub(crate) const SCENARIOS: &[&str] =
    &["republish", "move", "shared", "read-only", "snapshot", "group-snapshot", "clone", "expand"];

/// The RPCs `data` may call.
pub(crate) const RPCS: &[&str] = &[
    "NodeGetInfo",
    "CreateVolume",
    "ControllerPublishVolume",
    "NodeStageVolume",
    "NodePublishVolume",
    "NodeUnpublishVolume",
    "NodeUnstageVolume",
    "ControllerUnpublishVolume",
    "DeleteVolume",
    "CreateSnapshot",
    "DeleteSnapshot",
    "CreateVolumeGroupSnapshot",
    "DeleteVolumeGroupSnapshot",
    "ControllerExpandVolume",
    "NodeExpandVolume",
];

/// The longest pause between two looks at a snapshot that is not ready yet.
const READY_LONGEST_PAUSE: Duration = Duration::from_secs(5);

/// The file-system overhead allowed after an expansion: a mount volume's file system must
/// hold at least the new capacity less a tenth of it and less 16 MiB (metadata, journal and
/// reserved blocks of common file systems). A block volume gets no allowance.
pub fn fs_overhead(capacity: u64) -> u64 {
    capacity / 10 + (16 << 20)
}

type Step<T> = Result<T, CheckOutcome>;

const SINGLE_NODE_WRITER: i32 = v1::volume_capability::access_mode::Mode::SingleNodeWriter as i32;
const MULTI_NODE_MULTI_WRITER: i32 = v1::volume_capability::access_mode::Mode::MultiNodeMultiWriter as i32;

/// A volume the scenario created.
#[derive(Debug, Clone)]
struct Volume {
    id: String,
    context: HashMap<String, String>,
    capacity: i64,
    mode: i32,
}

/// A volume published on a node.
#[derive(Debug, Clone)]
struct Published {
    node: usize,
    node_id: String,
    staging: Option<PathBuf>,
    target: PathBuf,
    /// Where the node's files are: every read and write of the target goes through it (here,
    /// through /proc/PID, or through the node's agent).
    files: Inspector,
    controller: bool,
}

impl Published {
    fn at(&self) -> String {
        format!("{} on node {}", self.target.display(), self.node_id)
    }
}

struct Data<'a> {
    ctx: &'a mut ScenarioCtx,
    block: bool,
    nodes: BTreeMap<usize, (String, BTreeMap<String, String>)>,
}

/// Runs the `data` check.
pub(crate) async fn run(ctx: &mut ScenarioCtx, args: DataArgs) -> CheckOutcome {
    let DataArgs { scenario, access, expansion } = args;
    let block = match access {
        Some(a) => a == "block",
        None => ctx.requests().access_type == AccessType::Block,
    };
    let online = expansion.as_deref() != Some("offline");
    let nodes = if matches!(scenario.as_str(), "move" | "shared") { 2 } else { 1 };
    if ctx.node_connections().len() < nodes {
        return CheckOutcome::Skip(format!(
            "the data check {scenario:?} needs {nodes} node endpoints, and the run has {}",
            ctx.node_connections().len()
        ));
    }
    for index in 0..nodes {
        if let Some(reason) = unreachable_files(ctx, index) {
            return CheckOutcome::Skip(reason);
        }
    }
    let needed = publications(&scenario);
    if let Some(node) = ctx.fingerprint().nodes.first()
        && node.max_volumes_per_node > 0
        && node.max_volumes_per_node < needed as i64
    {
        return CheckOutcome::Skip(format!(
            "the data check {scenario:?} publishes {needed} volumes on node 0 at once, and it reports \
             max_volumes_per_node {}",
            node.max_volumes_per_node
        ));
    }
    let mut data = Data { ctx, block, nodes: BTreeMap::new() };
    let done = match scenario.as_str() {
        "republish" => data.republish().await,
        "move" => data.moved().await,
        "shared" => data.shared().await,
        "read-only" => data.read_only().await,
        "snapshot" => data.snapshot().await,
        "group-snapshot" => data.group_snapshot().await,
        "clone" => data.clone_volume().await,
        "expand" => data.expand(online).await,
        other => {
            return bad_arg(data.ctx, format!("check data: unknown scenario {other:?}"));
        }
    };
    match done {
        Ok(()) => CheckOutcome::Done(BTreeMap::new()),
        Err(outcome) => outcome,
    }
}

/// How many volumes a `data` scenario holds published on one node at once (node 0; `move`
/// and `shared` use one on each of two nodes).
pub fn publications(scenario: &str) -> usize {
    match scenario {
        "snapshot" | "group-snapshot" | "clone" => 2,
        _ => 1,
    }
}

/// Why the data check cannot work on node `index`'s files, if it cannot: they cannot be
/// reached from this process, or its mount table is not consulted (so a write could land
/// beside the volume instead of in it).
pub(super) fn unreachable_files(ctx: &ScenarioCtx, index: usize) -> Option<String> {
    let inspector = ctx.inspector(index)?;
    let endpoint = ctx.node_connections().get(index).map(|c| c.endpoint().to_string()).unwrap_or_default();
    if !inspector.reaches_files() {
        return Some(format!(
            "data checks read and write the node's files, and those of node endpoint {index} ({endpoint}) cannot be \
             reached from here (--check-path-cmd tells file types only)"
        ));
    }
    if !inspector.sees_mounts() {
        return Some(format!(
            "data checks need the mount table of node endpoint {index} ({endpoint}) to know that a write reaches the \
             volume, and it is not consulted"
        ));
    }
    None
}

/// Whether the published `target` is mounted, or is a device node, on the node: asked of
/// its inspector, which reads the node's own mount table (in the plugin's mount namespace),
/// and not denied by the path itself (a mount the path does not lead to takes no data).
fn target_mounted(inspector: &Inspector, target: &Path) -> bool {
    inspector.is_device(target)
        || (matches!(inspector.mount_entry(target), Ok(Some(Some(_))))
            && crate::suite::mounted::path_says(inspector, target) != Some(false))
}

fn typed<M: prost::Message + Default>(message: &DynamicMessage) -> M {
    message.transcode_to::<M>().unwrap_or_default()
}

fn io_denied(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(nix::libc::EACCES) | Some(nix::libc::EPERM))
}

impl Data<'_> {
    fn supports(&self, capability: Capability) -> bool {
        self.ctx.fingerprint().supports(capability)
    }

    fn node_supports(&self, node: usize, capability: NodeCapability) -> bool {
        self.ctx.fingerprint().nodes.get(node).is_some_and(|n| n.capabilities.contains(&capability))
    }

    fn fail(&mut self, kind: &str, message: String) -> CheckOutcome {
        self.ctx.fail(kind, message);
        CheckOutcome::Stop
    }

    /// The volume is smaller on the node than the expansion asked for: a failure of
    /// `requirement`, saying why.
    fn not_grown(&mut self, requirement: &str, message: String) -> CheckOutcome {
        let mut f = Finding::new(Severity::Fail, "volume-size", message);
        f.rpc = requirement.split('.').next().map(str::to_owned);
        f.requirements = vec![requirement.to_owned()];
        self.ctx.push(f);
        CheckOutcome::Stop
    }

    /// Whether the volume published at `published` is still smaller than `new` bytes (less
    /// the file-system overhead of a mount volume) after looking again at the plugin's pace
    /// for the settle time: what was seen, or none when it shows the new size (the first look
    /// that shows it ends the wait). A node may take a moment to see its device grow.
    async fn too_small(&mut self, published: &Published, new: u64, done: &str) -> Step<Option<String>> {
        let (tolerance, what) = if self.block { (0, "block volume") } else { (fs_overhead(new), "file system") };
        let p90 = self.ctx.latency("NodeExpandVolume", Some(0)).max(self.ctx.latency("ControllerExpandVolume", None));
        let settle = patience::settle(self.ctx.waits(), p90);
        let deadline = Instant::now() + settle;
        let mut pacer = Pacer::new(p90, patience::SETTLE_LONGEST_PAUSE);
        loop {
            let size = if self.block {
                published.files.block_size(&published.target)
            } else {
                published.files.fs_size(&published.target)
            };
            match size {
                Ok(size) if size + tolerance >= new => return Ok(None),
                Ok(size) => match pacer.pause(deadline.saturating_duration_since(Instant::now())) {
                    Some(pause) => tokio::time::sleep(pause).await,
                    None => {
                        let allowance = if tolerance > 0 {
                            format!(" less {tolerance} bytes of file-system overhead")
                        } else {
                            String::new()
                        };
                        return Ok(Some(format!(
                            "{done}, the {what} at {} is {size} bytes, less than the {new} bytes it was expanded \
                             to{allowance}, after looking again for {}",
                            published.at(),
                            patience::settle_bound(settle)
                        )));
                    }
                },
                Err(e) => return Err(self.fail("data-read", format!("cannot tell the size of {}: {e}", published.at()))),
            }
        }
    }

    /// `what` was still not ready to use at the bound of the wait: readiness is asynchronous
    /// and the spec sets it no deadline ("the CO SHOULD issue the CreateSnapshotRequest RPC
    /// with the same arguments again periodically until the ready_to_use field has a value of
    /// true", #createsnapshot), so the scenario is inconclusive, not failed.
    fn not_ready(&mut self, what: String, within: Duration, by: &str) -> CheckOutcome {
        self.ctx.push(patience::ran_out(format!(
            "{what} was not ready to use within {} ({by}); readiness is asynchronous and the spec sets it no \
             deadline (#createsnapshot), so the scenario could not go on to restore from it",
            crate::client::human_duration(within),
        )));
        CheckOutcome::Stop
    }

    fn marker(&self, label: &str) -> Marker {
        Marker::new(self.ctx.seed(), self.ctx.name(), label)
    }

    fn access(&self) -> &'static str {
        if self.block { "block" } else { "mount" }
    }

    /// Sends a call that must answer OK.
    async fn call<M: prost::Message + prost::Name>(
        &mut self,
        rpc: &str,
        request: &M,
        node: Option<usize>,
    ) -> Step<DynamicMessage> {
        let request = proto::to_dynamic(request);
        match self.ctx.call(rpc, request.clone(), node).await {
            Ok(response) => Ok(response),
            Err(e) => Err(self.ctx.call_failed(&e, &request, "OK")),
        }
    }

    async fn node(&mut self, index: usize) -> Step<(String, BTreeMap<String, String>)> {
        if let Some(known) = self.nodes.get(&index) {
            return Ok(known.clone());
        }
        let response = self.call("NodeGetInfo", &v1::NodeGetInfoRequest {}, Some(index)).await?;
        let info: v1::NodeGetInfoResponse = typed(&response);
        if info.node_id.is_empty() {
            return Err(self.fail("assertion", format!("NodeGetInfo of node endpoint {index} returned no node_id")));
        }
        let topology: BTreeMap<String, String> =
            info.accessible_topology.map(|t| t.segments.into_iter().collect()).unwrap_or_default();
        self.nodes.insert(index, (info.node_id.clone(), topology.clone()));
        Ok((info.node_id, topology))
    }

    fn capability(&self, mode: i32) -> v1::VolumeCapability {
        use v1::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
        let access_type =
            if self.block { AccessType::Block(BlockVolume {}) } else { AccessType::Mount(MountVolume::default()) };
        v1::VolumeCapability { access_type: Some(access_type), access_mode: Some(AccessMode { mode }) }
    }

    /// CreateVolume of the run's size, for `nodes`, from `source`. A plugin that refuses the
    /// access type or mode with INVALID_ARGUMENT makes the scenario a skip.
    async fn create(
        &mut self,
        suffix: &str,
        mode: i32,
        source: Option<v1::VolumeContentSource>,
        nodes: &[usize],
    ) -> Step<Volume> {
        let mut topologies = Vec::new();
        for &n in nodes {
            topologies.push(self.node(n).await?.1);
        }
        let requests = self.ctx.requests();
        let mut request = v1::CreateVolumeRequest {
            name: format!("{}-{suffix}", self.ctx.name()),
            capacity_range: Some(v1::CapacityRange { required_bytes: self.ctx.small_size(), limit_bytes: 0 }),
            volume_capabilities: vec![self.capability(mode)],
            parameters: requests.parameters.as_ref().clone().into_iter().collect(),
            volume_content_source: source,
            ..Default::default()
        };
        if self.supports(Capability::Plugin(PluginService::VolumeAccessibilityConstraints)) {
            request.accessibility_requirements = accessible_from(&topologies);
        }
        let sent = proto::to_dynamic(&request);
        let response = match self.ctx.call("CreateVolume", sent.clone(), None).await {
            Ok(r) => r,
            Err(e) if e.code == Code::InvalidArgument && !e.is_unreachable() && request.volume_content_source.is_none() => {
                return Err(CheckOutcome::Skip(format!(
                    "the plugin does not create {} volumes with this access mode (CreateVolume answered INVALID_ARGUMENT: {})",
                    self.access(),
                    e.message
                )));
            }
            Err(e) => return Err(self.ctx.call_failed(&e, &sent, "OK")),
        };
        let volume = typed::<v1::CreateVolumeResponse>(&response).volume.unwrap_or_default();
        if volume.volume_id.is_empty() {
            return Err(self.fail("assertion", "CreateVolume answered OK without a volume id".into()));
        }
        let capacity = if volume.capacity_bytes > 0 { volume.capacity_bytes } else { self.ctx.small_size() };
        Ok(Volume { id: volume.volume_id, context: volume.volume_context, capacity, mode })
    }

    /// The staging and target paths of publication `slot` (0: the scenario's own; others in
    /// a directory of their own inside the scenario's directory, removed after teardown).
    fn paths(&mut self, slot: usize) -> Step<(PathBuf, PathBuf)> {
        let paths = self.ctx.paths();
        let (dir, staging, target) = if slot == 0 {
            (None, paths.staging.clone(), paths.target.clone())
        } else {
            let dir = paths.dir.join(format!("data{slot}"));
            (Some(dir.clone()), dir.join("staging"), dir.join("target"))
        };
        for d in dir.iter().chain([&staging]) {
            if let Err(e) = std::fs::create_dir_all(d) {
                self.ctx.push(Finding::new(Severity::Error, "setup", format!("cannot create {}: {e}", d.display())));
                return Err(CheckOutcome::Stop);
            }
        }
        if let Some(dir) = dir {
            self.ctx.own_paths([target.clone(), staging.clone(), dir]);
        }
        Ok((staging, target))
    }

    /// ControllerPublishVolume (with PUBLISH_UNPUBLISH_VOLUME), NodeStageVolume (with
    /// STAGE_UNSTAGE_VOLUME) and NodePublishVolume of `volume` on node `node` at `slot`'s
    /// paths. A target the host does not show mounted makes the scenario a skip: data written
    /// there would not reach the volume (the lifecycle suite reports the missing mount).
    async fn publish(&mut self, volume: &Volume, node: usize, slot: usize, readonly: bool) -> Step<Published> {
        let (node_id, _) = self.node(node).await?;
        let (staging, target) = self.paths(slot)?;
        let capability = self.capability(volume.mode);
        let controller = self.supports(Capability::Controller(ControllerCapability::PublishUnpublishVolume));
        let mut publish_context = HashMap::new();
        if controller {
            let request = v1::ControllerPublishVolumeRequest {
                volume_id: volume.id.clone(),
                node_id: node_id.clone(),
                volume_capability: Some(capability.clone()),
                readonly: readonly && self.supports(Capability::Controller(ControllerCapability::PublishReadonly)),
                volume_context: volume.context.clone(),
                ..Default::default()
            };
            let response = self.call("ControllerPublishVolume", &request, None).await?;
            publish_context = typed::<v1::ControllerPublishVolumeResponse>(&response).publish_context;
        }
        let stage = self.node_supports(node, NodeCapability::StageUnstageVolume);
        if stage {
            let request = v1::NodeStageVolumeRequest {
                volume_id: volume.id.clone(),
                publish_context: publish_context.clone(),
                staging_target_path: staging.display().to_string(),
                volume_capability: Some(capability.clone()),
                volume_context: volume.context.clone(),
                ..Default::default()
            };
            self.call("NodeStageVolume", &request, Some(node)).await?;
        }
        let request = v1::NodePublishVolumeRequest {
            volume_id: volume.id.clone(),
            publish_context,
            staging_target_path: if stage { staging.display().to_string() } else { String::new() },
            target_path: target.display().to_string(),
            volume_capability: Some(capability),
            readonly,
            volume_context: volume.context.clone(),
            ..Default::default()
        };
        self.call("NodePublishVolume", &request, Some(node)).await?;
        let inspector = self.ctx.inspector(node).expect("the node endpoint exists");
        if !inspector.reaches_files() {
            return Err(CheckOutcome::Skip(unreachable_files(self.ctx, node).unwrap_or_default()));
        }
        let published = Published {
            node,
            node_id,
            staging: stage.then_some(staging),
            target,
            files: inspector.clone(),
            controller,
        };
        if !target_mounted(&inspector, &published.target) {
            return Err(CheckOutcome::Skip(format!(
                "{} is not mounted after NodePublishVolume, so data written there would not reach the volume \
                 (the lifecycle suite reports the missing mount)",
                published.at()
            )));
        }
        Ok(published)
    }

    /// NodeUnpublishVolume, NodeUnstageVolume and ControllerUnpublishVolume (each when it
    /// applies); returns the RPCs called, for messages.
    async fn unpublish(&mut self, volume: &Volume, published: &Published) -> Step<String> {
        let mut called = vec!["NodeUnpublishVolume"];
        let request = v1::NodeUnpublishVolumeRequest {
            volume_id: volume.id.clone(),
            target_path: published.target.display().to_string(),
        };
        self.call("NodeUnpublishVolume", &request, Some(published.node)).await?;
        if let Some(staging) = &published.staging {
            let request = v1::NodeUnstageVolumeRequest {
                volume_id: volume.id.clone(),
                staging_target_path: staging.display().to_string(),
            };
            self.call("NodeUnstageVolume", &request, Some(published.node)).await?;
            called.push("NodeUnstageVolume");
        }
        if published.controller {
            let request = v1::ControllerUnpublishVolumeRequest {
                volume_id: volume.id.clone(),
                node_id: published.node_id.clone(),
                ..Default::default()
            };
            self.call("ControllerUnpublishVolume", &request, None).await?;
            called.push("ControllerUnpublishVolume");
        }
        Ok(called.join(", "))
    }

    /// Writes `marker` into the published volume (where `at` says, else at its places) after
    /// checking that a block volume is as large as the plugin says.
    async fn write(
        &mut self,
        volume: &Volume,
        published: &Published,
        marker: &Marker,
        at: Option<&Placement>,
    ) -> Step<Placement> {
        if self.block && at.is_none() {
            self.block_at_least(published, volume.capacity as u64, "CreateVolume reported")?;
        }
        match published.files.write_marker(&published.target, self.block, marker, at) {
            Ok(placement) => Ok(placement),
            Err(e) if io_denied(&e) => Err(CheckOutcome::Skip(format!(
                "this process may not write into {} ({e}); the data checks need write access to the node's files",
                published.at()
            ))),
            Err(e) => Err(self.fail(
                "data-write",
                format!("writing marker {} into the {} volume published read-write at {} failed: {e}", marker.label, self.access(), published.at()),
            )),
        }
    }

    /// Fails unless the block volume at `published` holds at least `bytes`.
    fn block_at_least(&mut self, published: &Published, bytes: u64, said: &str) -> Step<()> {
        match published.files.block_size(&published.target) {
            Ok(size) if size >= bytes => Ok(()),
            Ok(size) => Err(self.fail(
                "volume-size",
                format!("the block volume published at {} is {size} bytes, less than the {bytes} bytes {said}", published.at()),
            )),
            Err(e) => Err(self.fail("data-read", format!("cannot tell the size of {}: {e}", published.at()))),
        }
    }

    /// Verifies `expected` by digest where `at` says; a finding of `kind` that starts with
    /// `context` otherwise.
    fn verify(
        &mut self,
        published: &Published,
        at: &Placement,
        expected: &Marker,
        others: &[&Marker],
        kind: &str,
        context: &str,
    ) -> Step<()> {
        match published.files.verify_marker(&published.target, at, expected, others) {
            Ok(None) => Ok(()),
            Ok(Some((place, mismatch))) => Err(self.fail(
                kind,
                format!("{context}: {} in the volume at {}", mismatch.describe(&place, expected), published.at()),
            )),
            Err(e) => Err(self.fail("data-read", format!("{context}: reading marker {} at {} failed: {e}", expected.label, published.at()))),
        }
    }

    /// Removes a marker from a read-write publication (the volume is the scenario's own).
    fn remove(&mut self, published: &Published, at: &Placement) -> Step<()> {
        published.files.remove_marker(&published.target, at).map_err(|e| {
            self.ctx.push(Finding::new(
                Severity::Warn,
                "data-cleanup",
                format!("the marker at {} could not be removed: {e}", published.at()),
            ));
            CheckOutcome::Stop
        })
    }

    /// The common start of `republish`, `move` and `read-only`: a SINGLE_NODE_WRITER volume
    /// published on node 0 gets marker A, is taken down to the controller (the RPCs called are
    /// returned for messages) and published again on node `node` at `slot`.
    async fn written_then_republished(
        &mut self,
        node: usize,
        slot: usize,
        readonly: bool,
    ) -> Step<(Published, Published, Marker, Placement, String)> {
        let nodes: Vec<usize> = (0..=node).collect();
        let volume = self.create("data", SINGLE_NODE_WRITER, None, &nodes).await?;
        let first = self.publish(&volume, 0, 0, false).await?;
        let a = self.marker("A");
        let at = self.write(&volume, &first, &a, None).await?;
        let down = self.unpublish(&volume, &first).await?;
        let again = self.publish(&volume, node, slot, readonly).await?;
        Ok((first, again, a, at, down))
    }

    /// write → NodeUnpublish → NodeUnstage → ControllerUnpublish → ControllerPublish →
    /// NodeStage → NodePublish → verify, on one node.
    async fn republish(&mut self) -> Step<()> {
        let (first, again, a, at, down) = self.written_then_republished(0, 0, false).await?;
        let context = format!(
            "the marker written on node {} before {down} is not intact after the volume was published there again",
            first.node_id
        );
        self.verify(&again, &at, &a, &[], "data-lost", &context)?;
        self.remove(&again, &at)
    }

    /// A SINGLE_NODE_WRITER volume written on node 0 holds the marker on node 1 after moving.
    async fn moved(&mut self) -> Step<()> {
        let (first, second, a, at, down) = self.written_then_republished(1, 1, false).await?;
        let context = format!(
            "the marker written on node {} before {down} is not intact after the volume was published on node {}",
            first.node_id, second.node_id
        );
        self.verify(&second, &at, &a, &[], "data-lost", &context)?;
        self.remove(&second, &at)
    }

    /// A MULTI_NODE_MULTI_WRITER volume published on both nodes: node 1 reads what node 0
    /// wrote.
    async fn shared(&mut self) -> Step<()> {
        let volume = self.create("data", MULTI_NODE_MULTI_WRITER, None, &[0, 1]).await?;
        let first = self.publish(&volume, 0, 0, false).await?;
        let second = self.publish(&volume, 1, 1, false).await?;
        let a = self.marker("A");
        let at = self.write(&volume, &first, &a, None).await?;
        let context = format!(
            "the marker written on node {} into the MULTI_NODE_MULTI_WRITER volume is not seen on node {} while both publish it",
            first.node_id, second.node_id
        );
        self.verify(&second, &at, &a, &[], "data-lost", &context)?;
        self.remove(&first, &at)
    }

    /// Written read-write, published again read-only: the marker reads back, a write fails
    /// with EROFS.
    async fn read_only(&mut self) -> Step<()> {
        let (writable, read_only, a, at, down) = self.written_then_republished(0, 0, true).await?;
        let context = format!(
            "the marker written on node {} before {down} cannot be read back from the read-only publication",
            writable.node_id
        );
        self.verify(&read_only, &at, &a, &[], "data-lost", &context)?;
        if read_only.files.is_device(&read_only.target) {
            // A read-only mount does not stop writes to a device node; nothing to prove here.
            return Ok(());
        }
        match read_only.files.try_write(&read_only.target, self.block) {
            Err(e) if e.raw_os_error() == Some(nix::libc::EROFS) => Ok(()),
            Err(e) if io_denied(&e) => Ok(()),
            Err(e) => Err(self.fail(
                "data-writable",
                format!("a write into the read-only publication at {} failed with {e}, not with EROFS", read_only.at()),
            )),
            Ok(()) => Err(self.fail(
                "data-writable",
                format!("the volume published read-only at {} took a write", read_only.at()),
            )),
        }
    }

    /// CreateSnapshot of `volume`, repeated (idempotently) until it is ready to use.
    async fn snapshot_of(&mut self, volume: &Volume) -> Step<String> {
        let request = v1::CreateSnapshotRequest {
            source_volume_id: volume.id.clone(),
            name: format!("{}-snap", self.ctx.name()),
            parameters: self.ctx.requests().snapshot_parameters.as_ref().clone().into_iter().collect(),
            ..Default::default()
        };
        let (within, by) = patience::ready_bound(self.ctx.waits(), None);
        let deadline = Instant::now() + within;
        let mut pacer = Pacer::new(self.ctx.latency("CreateSnapshot", None), READY_LONGEST_PAUSE);
        loop {
            let response = self.call("CreateSnapshot", &request, None).await?;
            let snapshot = typed::<v1::CreateSnapshotResponse>(&response).snapshot.unwrap_or_default();
            if snapshot.snapshot_id.is_empty() {
                return Err(self.fail("assertion", "CreateSnapshot answered OK without a snapshot id".into()));
            }
            if snapshot.ready_to_use {
                return Ok(snapshot.snapshot_id);
            }
            match pacer.pause(deadline.saturating_duration_since(Instant::now())) {
                Some(pause) => tokio::time::sleep(pause).await,
                None => {
                    return Err(self.not_ready(format!("snapshot {}", snapshot.snapshot_id), within, &by));
                }
            }
        }
    }

    /// write A → snapshot → overwrite with B → restore: the restored volume holds A, the
    /// source B.
    async fn snapshot(&mut self) -> Step<()> {
        let source = self.create("data", SINGLE_NODE_WRITER, None, &[0]).await?;
        let published = self.publish(&source, 0, 0, false).await?;
        let (a, b) = (self.marker("A"), self.marker("B"));
        let at = self.write(&source, &published, &a, None).await?;
        let snapshot_id = self.snapshot_of(&source).await?;
        self.write(&source, &published, &b, Some(&at)).await?;
        let from = v1::VolumeContentSource {
            r#type: Some(v1::volume_content_source::Type::Snapshot(
                v1::volume_content_source::SnapshotSource { snapshot_id: snapshot_id.clone() },
            )),
        };
        let restored = self.create("restored", SINGLE_NODE_WRITER, Some(from), &[0]).await?;
        let restored_at = self.publish(&restored, 0, 1, false).await?;
        let context = format!(
            "volume {} restored from snapshot {snapshot_id} does not hold what its source {} held when the snapshot was cut",
            restored.id, source.id
        );
        self.verify(&restored_at, &at, &a, &[&b], "snapshot-content", &context)?;
        let context = format!("source volume {} lost what was written after snapshot {snapshot_id}", source.id);
        self.verify(&published, &at, &b, &[&a], "data-lost", &context)?;
        self.remove(&restored_at, &at)?;
        self.remove(&published, &at)
    }

    /// Two volumes written (A1, A2) → one group snapshot → overwritten (B1, B2) → each
    /// member snapshot restored: it holds what its own source held when the group was cut.
    async fn group_snapshot(&mut self) -> Step<()> {
        let mut sources = Vec::new();
        for i in 1..=2 {
            let volume = self.create(&format!("data{i}"), SINGLE_NODE_WRITER, None, &[0]).await?;
            let published = self.publish(&volume, 0, i - 1, false).await?;
            let (a, b) = (self.marker(&format!("A{i}")), self.marker(&format!("B{i}")));
            let at = self.write(&volume, &published, &a, None).await?;
            sources.push((volume, published, a, b, at));
        }
        let request = v1::CreateVolumeGroupSnapshotRequest {
            name: format!("{}-group", self.ctx.name()),
            source_volume_ids: sources.iter().map(|s| s.0.id.clone()).collect(),
            parameters: self.ctx.requests().snapshot_parameters.as_ref().clone().into_iter().collect(),
            ..Default::default()
        };
        let (within, by) = patience::ready_bound(self.ctx.waits(), None);
        let deadline = Instant::now() + within;
        let mut pacer = Pacer::new(self.ctx.latency("CreateVolumeGroupSnapshot", None), READY_LONGEST_PAUSE);
        let group = loop {
            let response = self.call("CreateVolumeGroupSnapshot", &request, None).await?;
            let group = typed::<v1::CreateVolumeGroupSnapshotResponse>(&response).group_snapshot.unwrap_or_default();
            if group.ready_to_use {
                break group;
            }
            match pacer.pause(deadline.saturating_duration_since(Instant::now())) {
                Some(pause) => tokio::time::sleep(pause).await,
                None => {
                    return Err(self.not_ready(format!("group snapshot {}", group.group_snapshot_id), within, &by));
                }
            }
        };
        for (volume, published, _, b, at) in &sources {
            self.write(volume, published, b, Some(at)).await?;
            // The sources are done with (teardown deletes them): each restore is published alone.
            self.unpublish(volume, published).await?;
        }
        for (i, (source, _, a, _, at)) in sources.iter().enumerate() {
            let Some(member) = group.snapshots.iter().find(|s| s.source_volume_id == source.id) else {
                return Err(self.fail(
                    "assertion",
                    format!("group snapshot {} has no member snapshot of volume {}", group.group_snapshot_id, source.id),
                ));
            };
            let from = v1::VolumeContentSource {
                r#type: Some(v1::volume_content_source::Type::Snapshot(
                    v1::volume_content_source::SnapshotSource { snapshot_id: member.snapshot_id.clone() },
                )),
            };
            let restored = self.create(&format!("restored{}", i + 1), SINGLE_NODE_WRITER, Some(from), &[0]).await?;
            let restored_at = self.publish(&restored, 0, 1 + i, false).await?;
            let context = format!(
                "volume {} restored from snapshot {} (member of group snapshot {}) does not hold what its source {} held \
                 when the group was cut",
                restored.id, member.snapshot_id, group.group_snapshot_id, source.id
            );
            let others: Vec<&Marker> = sources.iter().flat_map(|s| [&s.2, &s.3]).filter(|m| *m != a).collect();
            self.verify(&restored_at, at, a, &others, "snapshot-content", &context)?;
            self.remove(&restored_at, at)?;
            self.unpublish(&restored, &restored_at).await?;
        }
        Ok(())
    }

    /// write A → clone: the clone holds A; a write of B to the clone leaves the source A.
    async fn clone_volume(&mut self) -> Step<()> {
        let source = self.create("data", SINGLE_NODE_WRITER, None, &[0]).await?;
        let published = self.publish(&source, 0, 0, false).await?;
        let (a, b) = (self.marker("A"), self.marker("B"));
        let at = self.write(&source, &published, &a, None).await?;
        // Cloned while published (orchestrators clone volumes in use; the marker is flushed).
        let from = v1::VolumeContentSource {
            r#type: Some(v1::volume_content_source::Type::Volume(v1::volume_content_source::VolumeSource {
                volume_id: source.id.clone(),
            })),
        };
        let clone = self.create("clone", SINGLE_NODE_WRITER, Some(from), &[0]).await?;
        let clone_at = self.publish(&clone, 0, 1, false).await?;
        let context = format!("volume {} cloned from {} does not hold its source's content", clone.id, source.id);
        self.verify(&clone_at, &at, &a, &[&b], "clone-content", &context)?;
        self.write(&clone, &clone_at, &b, Some(&at)).await?;
        let context = format!("a write into clone {} changed its source volume {}", clone.id, source.id);
        self.verify(&published, &at, &a, &[&b], "clone-shares-data", &context)?;
        self.remove(&clone_at, &at)?;
        self.remove(&published, &at)
    }

    /// write → (unpublish, when offline) → ControllerExpandVolume → (publish again) →
    /// NodeExpandVolume at the published path → the volume is as large as asked, the marker
    /// intact.
    async fn expand(&mut self, online: bool) -> Step<()> {
        let controller = self.supports(Capability::Controller(ControllerCapability::ExpandVolume));
        let node_expands = self.node_supports(0, NodeCapability::ExpandVolume);
        if !controller && !node_expands {
            return Err(CheckOutcome::Skip("neither controller:EXPAND_VOLUME nor node:EXPAND_VOLUME is advertised".into()));
        }
        if online && !self.supports(Capability::Expansion(VolumeExpansion::Online)) {
            return Err(CheckOutcome::Skip("online expansion needs expansion:ONLINE, which is not advertised".into()));
        }
        let volume = self.create("data", SINGLE_NODE_WRITER, None, &[0]).await?;
        let mut published = self.publish(&volume, 0, 0, false).await?;
        let a = self.marker("A");
        let at = self.write(&volume, &published, &a, None).await?;
        let new = self.ctx.small_expand_size().max(volume.capacity);
        let range = Some(v1::CapacityRange { required_bytes: new, limit_bytes: 0 });
        let mut steps = Vec::new();
        if !online {
            steps.push(self.unpublish(&volume, &published).await?);
        }
        let mut node_required = true;
        if controller {
            let request = v1::ControllerExpandVolumeRequest {
                volume_id: volume.id.clone(),
                capacity_range: range,
                volume_capability: Some(self.capability(volume.mode)),
                ..Default::default()
            };
            let response = self.call("ControllerExpandVolume", &request, None).await?;
            let answer: v1::ControllerExpandVolumeResponse = typed(&response);
            node_required = answer.node_expansion_required;
            steps.push(format!("ControllerExpandVolume to {new} bytes (answered capacity_bytes {})", answer.capacity_bytes));
        }
        if !online {
            published = self.publish(&volume, 0, 0, false).await?;
            steps.push("publishing again".to_owned());
        }
        if node_expands && node_required {
            let request = v1::NodeExpandVolumeRequest {
                volume_id: volume.id.clone(),
                volume_path: published.target.display().to_string(),
                capacity_range: range,
                staging_target_path: published.staging.as_ref().map(|s| s.display().to_string()).unwrap_or_default(),
                volume_capability: Some(self.capability(volume.mode)),
                ..Default::default()
            };
            self.call("NodeExpandVolume", &request, Some(0)).await?;
            steps.push(format!("NodeExpandVolume at {}", published.target.display()));
        }
        let mut done = format!("after {}", steps.join(", "));
        let new = new as u64;
        let node_expanded = node_expands && node_required;
        if let Some(seen) = self.too_small(&published, new, &done).await? {
            if node_expanded {
                return Err(self.not_grown("NodeExpandVolume.expands", format!(
                    "{seen}: NodeExpandVolume answered OK, which says the volume is expanded on the node (the RPC \
                     \"allows CO to expand volume on a node\"; the added space \"becomes available to workload\", \
                     #controllerexpandvolume), and nothing is left pending that would grow it later"
                )));
            }
            if !online {
                return Err(self.not_grown("ControllerExpandVolume.grows", format!(
                    "{seen}: the volume was staged and published anew after ControllerExpandVolume answered OK with \
                     its capacity after expansion (#controllerexpandvolume) and no node expansion due, so what the \
                     node is given is the volume as it is"
                )));
            }
            // Grown under a publication, with no node expansion due: the node is to see it on
            // its own. A fresh staging is the second witness of the volume's size.
            steps.push(self.unpublish(&volume, &published).await?);
            published = self.publish(&volume, 0, 0, false).await?;
            steps.push("publishing again".to_owned());
            let again = format!("after {}", steps.join(", "));
            if let Some(fresh) = self.too_small(&published, new, &again).await? {
                return Err(self.not_grown("ControllerExpandVolume.grows", format!(
                    "{fresh}: even a fresh staging after ControllerExpandVolume answered OK with its capacity after \
                     expansion (#controllerexpandvolume), with no node expansion due, shows the old size"
                )));
            }
            self.ctx.push(patience::ran_out(format!(
                "{seen}, while a fresh staging shows the new size: no node expansion was due (node_expansion_required \
                 false, or node:EXPAND_VOLUME not advertised), so the node is to see an expansion under a published \
                 volume on its own, which the spec sets no deadline; inconclusive"
            )));
            done = again;
        }
        let context = format!("{done}, the marker written before the expansion is not intact");
        self.verify(&published, &at, &a, &[], "data-lost", &context)?;
        self.remove(&published, &at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overhead_allowance_is_a_tenth_plus_16_mib() {
        assert_eq!(fs_overhead(0), 16 << 20);
        assert_eq!(fs_overhead(10 << 30), (1 << 30) + (16 << 20));
    }
}
