//! The `lifecycle` named check: a volume's whole life driven the way an orchestrator drives it
//! (Nomad's order), on one node or two, with what the node sees (in its mount namespace)
//! verified after every node step.
//!
//! NodeGetInfo → CreateVolume (the capability, parameters, secrets, the nodes' topology as
//! requisite) → ValidateVolumeCapabilities → per node: ControllerPublishVolume (node id from
//! NodeGetInfo) → NodeStageVolume (with STAGE_UNSTAGE_VOLUME) → NodePublishVolume → then
//! NodeGetVolumeStats (with GET_VOLUME_STATS) → per node, last first: NodeUnpublishVolume →
//! NodeUnstageVolume → ControllerUnpublishVolume → DeleteVolume. Each mutating call is sent
//! `--idempotency-count` times (at most `repeat_at_most`) and every answer must equal the first.
//!
//! What is forwarded, as a CO must: the `volume_context` CreateVolume returned (plus a
//! configured one's keys it lacks) to ValidateVolumeCapabilities, ControllerPublishVolume,
//! NodeStageVolume and NodePublishVolume; each node's `publish_context` to its NodeStage and
//! NodePublish; the secrets file's key for each RPC that carries secrets. Mount options come
//! from two places, as in Nomad: the volume's (`volume_fs_type`, `volume_mount_flags`, used
//! to create it) and the request's (`fs_type`, `mount_flags`, the claim's); for the
//! capability of every later RPC, each field the request gives replaces the volume's.

use std::{
    collections::{BTreeMap, HashMap},
    path::PathBuf,
    time::Duration,
};

use prost_reflect::{DynamicMessage, ReflectMessage};
use tonic::Code;

use super::{CheckDef, support::accessible_from};
use crate::suite::{
    assert,
    catalog::{CheckDemand, CheckUse},
    ctx::{CheckOutcome, Response, ScenarioCtx, call_finding},
    existing::ExistingVolume,
    inspect::{Inspector, MountTableError, PathKind, WriteProbe},
    model::SecretsMode,
    pool::Pool,
    settings::AccessType,
    vars::Val,
};
use crate::{
    capability::{self, AccessMode, Verdict},
    client::{RpcError, code_name},
    fingerprint::{Capability, ControllerCapability, NodeCapability, PluginService},
    mounts,
    orchestrator::CallPattern,
    proto::{self, v1},
    report::{Finding, Severity},
};

mod args;
mod expand;
mod node;
mod orchestrated;
mod usage;

use args::{ExistingCheck, LifecycleArgs, LifecycleCheck};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<LifecycleCheck>(), CheckDef::of::<ExistingCheck>()];

/// Access modes by their spec names (the `mode` argument).
const MODES: &[&str] = &[
    "SINGLE_NODE_WRITER",
    "SINGLE_NODE_READER_ONLY",
    "MULTI_NODE_READER_ONLY",
    "MULTI_NODE_SINGLE_WRITER",
    "MULTI_NODE_MULTI_WRITER",
    "SINGLE_NODE_SINGLE_WRITER",
    "SINGLE_NODE_MULTI_WRITER",
];

/// With `long_paths`, node 0's staging and target paths live in a directory with a name this
/// long, so that both are well over the 128 bytes the spec makes every plugin accept.
const LONG_PATH_COMPONENT: usize = 160;

/// The RPCs `lifecycle` may call: the six that only a volume of its own gets, then those
/// `existing-volume` calls too ([`EXISTING_RPCS`]).
pub(crate) const RPCS: &[&str] = &[
    "CreateVolume",
    "ValidateVolumeCapabilities",
    "DeleteVolume",
    "ControllerExpandVolume",
    "NodeExpandVolume",
    "Probe",
    "NodeGetInfo",
    "ControllerPublishVolume",
    "NodeStageVolume",
    "NodePublishVolume",
    "NodeGetVolumeStats",
    "NodeUnpublishVolume",
    "NodeUnstageVolume",
    "ControllerUnpublishVolume",
];

/// How long `--allow-restart-cmd` may take, and then how long the node plugin has to answer
/// again.
pub const RESTART_TIMEOUT: Duration = Duration::from_secs(60);

/// One side's mount options: `None` fields are not given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountOptions {
    /// The file system type.
    pub fs_type: Option<String>,
    /// The mount flags.
    pub mount_flags: Option<Vec<String>>,
}

impl MountOptions {
    /// The options a later RPC gets when these (the request's) meet `volume`'s: each field
    /// given here replaces the volume's, a field not given keeps the volume's (Nomad's rule:
    /// flags are replaced as a whole, never merged).
    pub fn over(&self, volume: &MountOptions) -> MountOptions {
        MountOptions {
            fs_type: self.fs_type.clone().or_else(|| volume.fs_type.clone()),
            mount_flags: self.mount_flags.clone().or_else(|| volume.mount_flags.clone()),
        }
    }
}

/// The volume_context a CO forwards: the one CreateVolume returned, plus the keys of a
/// configured one that the plugin did not return (the plugin's own keys win).
pub fn forwarded_context(
    returned: &HashMap<String, String>,
    configured: &BTreeMap<String, String>,
) -> HashMap<String, String> {
    let mut context = returned.clone();
    for (k, v) in configured {
        context.entry(k.clone()).or_insert_with(|| v.clone());
    }
    context
}

/// What should happen when the volume goes to a second node or target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Second {
    /// Not tried.
    None,
    /// It must work.
    Works,
    /// It must be refused with this code.
    Refused(Code),
}

/// The lifecycle's arguments, checked.
#[derive(Debug, Clone)]
struct Plan {
    block: bool,
    mode: AccessMode,
    readonly: bool,
    volume_mount: MountOptions,
    request_mount: MountOptions,
    configured_context: BTreeMap<String, String>,
    secrets: SecretsMode,
    secrets_required: bool,
    times: u32,
    nodes: usize,
    second_node: Second,
    second_target: Second,
    restart: bool,
    long_paths: bool,
    /// The volume is an existing one (no CreateVolume, ValidateVolumeCapabilities or
    /// DeleteVolume; never expanded or changed).
    existing: bool,
    /// Whether the run may write to the volume (always for its own volumes; for an existing
    /// one only with `--existing-volume-writable`).
    writes: bool,
    /// After staging, NodeUnstageVolume without a staging_target_path must be refused with
    /// INVALID_ARGUMENT (and leave the staging in place).
    unstage_without_path: bool,
    /// Volumes on node 0 at once (`volumes`; above 1 only in an orchestrator instance).
    volumes: usize,
    /// Expand the volume once published (`expand`; see `expand.rs`).
    expand: bool,
    /// A second, read-only use of the volume on node 0 (`second_usage`; only in an instance).
    second_usage: bool,
}

impl Plan {
    fn from_args(ctx: &ScenarioCtx, args: &LifecycleArgs) -> Result<Plan, String> {
        let block = match args.access.as_deref() {
            Some(a) => a == "block",
            None => ctx.requests().access_type == AccessType::Block,
        };
        let mode_name = &args.mode;
        let mode = v1::volume_capability::access_mode::Mode::from_str_name(mode_name)
            .map(|m| AccessMode::from_i32(m as i32))
            .ok_or_else(|| format!("argument mode: unknown access mode {mode_name:?}"))?;
        let volume_mount =
            MountOptions { fs_type: args.volume_fs_type.clone(), mount_flags: args.volume_mount_flags.clone() };
        let request_mount = MountOptions { fs_type: args.fs_type.clone(), mount_flags: args.mount_flags.clone() };
        if block && (volume_mount != MountOptions::default() || request_mount != MountOptions::default()) {
            return Err("fs_type and mount flags apply to mount access only, not to access: block".into());
        }
        let nodes = match args.nodes {
            n @ 1..=2 => n as usize,
            other => return Err(format!("argument nodes must be 1 or 2, not {other}")),
        };
        let refused_code = match args.refused_code.clone() {
            None => Code::FailedPrecondition,
            Some(name) => crate::client::parse_code(&name)
                .filter(|c| *c != Code::Ok)
                .ok_or_else(|| format!("argument refused_code: {name:?} is not an error code name"))?,
        };
        let second = |word: Option<String>| match word.as_deref() {
            Some("works") => Second::Works,
            Some("refused") => Second::Refused(refused_code),
            _ => Second::None,
        };
        let second_node = second(args.second_node.clone());
        if nodes < 2 && second_node != Second::None {
            return Err("second_node needs nodes: 2".into());
        }
        let secrets_word = args.secrets.as_str();
        let repeat = args.repeat;
        let at_most = match args.repeat_at_most {
            None => u32::MAX,
            Some(n) if n >= 1 => u32::try_from(n).unwrap_or(u32::MAX),
            Some(n) => return Err(format!("argument repeat_at_most must be at least 1, not {n}")),
        };
        Ok(Plan {
            block,
            mode,
            // Swarm never sets `readonly` (Docker's bind mount makes a task's use read-only).
            readonly: args.readonly && ctx.pattern().is_none_or(|p| p.sets_readonly),
            volume_mount,
            request_mount,
            configured_context: args.volume_context.clone(),
            secrets: if secrets_word == "none" { SecretsMode::None } else { SecretsMode::Auto },
            secrets_required: secrets_word == "required",
            times: if repeat { ctx.idempotency_count().clamp(1, at_most) } else { 1 },
            nodes,
            second_node: if nodes == 2 && second_node == Second::None { Second::Works } else { second_node },
            second_target: second(args.second_target.clone()),
            restart: args.restart,
            long_paths: args.long_paths,
            existing: false,
            writes: true,
            unstage_without_path: args.unstage_without_path,
            volumes: orchestrated::volumes_arg(ctx, args.volumes)?,
            expand: args.expand,
            second_usage: usage::second_usage_arg(ctx, args.second_usage, mode)?,
        })
    }

    /// Why this plan cannot run here, if it cannot.
    fn skip_reason(&self, ctx: &ScenarioCtx) -> Option<String> {
        if ctx.node_connections().len() < self.nodes {
            return Some(format!(
                "the lifecycle on {} nodes needs {} node endpoints, and the run has {}",
                self.nodes,
                self.nodes,
                ctx.node_connections().len()
            ));
        }
        if self.secrets_required && ctx.requests().secrets.is_empty() {
            return Some("the lifecycle with secrets needs a secrets file (--secrets), and the run has none".into());
        }
        if matches!(self.second_node, Second::Refused(_))
            && !ctx.fingerprint().supports(Capability::Controller(ControllerCapability::PublishUnpublishVolume))
        {
            return Some(
                "without controller:PUBLISH_UNPUBLISH_VOLUME no RPC can refuse a second node before it mounts".into(),
            );
        }
        if self.restart && ctx.restarts().node.is_none() {
            return Some("restarting the node plugin needs --allow-restart-cmd".into());
        }
        self.expand_skip_reason(ctx).or_else(|| self.second_usage_skip(ctx))
    }

    fn capability(&self, mount: &MountOptions) -> v1::VolumeCapability {
        use v1::volume_capability::{AccessMode as Mode, AccessType, BlockVolume, MountVolume};
        let access_type = if self.block {
            AccessType::Block(BlockVolume {})
        } else {
            AccessType::Mount(MountVolume {
                fs_type: mount.fs_type.clone().unwrap_or_default(),
                mount_flags: mount.mount_flags.clone().unwrap_or_default(),
                volume_mount_group: String::new(),
            })
        };
        v1::VolumeCapability { access_type: Some(access_type), access_mode: Some(Mode { mode: self.mode.to_i32() }) }
    }

    /// The capability CreateVolume gets: the volume's mount options.
    fn volume_capability(&self) -> v1::VolumeCapability {
        self.capability(&self.volume_mount)
    }

    /// The capability every later RPC gets: the request's options over the volume's.
    fn node_capability(&self) -> v1::VolumeCapability {
        self.capability(&self.request_mount.over(&self.volume_mount))
    }

    /// The VFS options (nosuid, ...) the node RPCs ask for, which the mount table must show.
    fn vfs_options(&self) -> Vec<&'static str> {
        mounts::vfs_options(&self.request_mount.over(&self.volume_mount).mount_flags.unwrap_or_default())
    }

    /// Whether the published volume must refuse writes.
    fn read_only(&self) -> bool {
        self.readonly || self.mode.is_read_only()
    }

    fn describe(&self) -> String {
        let access = if self.block { "block" } else { "mount" };
        let rw = if self.read_only() { "read-only" } else { "read-write" };
        format!("{access} {} {rw}", self.mode)
    }
}

/// One node the volume is put on.
#[derive(Debug, Clone)]
struct NodeUse {
    index: usize,
    node_id: String,
    topology: BTreeMap<String, String>,
    inspector: Inspector,
    staging: PathBuf,
    target: PathBuf,
    publish_context: HashMap<String, String>,
    stage: bool,
}

/// A running lifecycle.
struct Lifecycle<'a> {
    ctx: &'a mut ScenarioCtx,
    plan: Plan,
    volume_id: String,
    context: HashMap<String, String>,
    /// Why the plugin declined the node capability, when ValidateVolumeCapabilities left
    /// unconfirmed a capability that differs from the one the volume was created with.
    declined: Option<String>,
    /// In an orchestrator instance: how that orchestrator calls the plugin.
    pattern: Option<CallPattern>,
    /// Which of the plan's `volumes` this is (0 for the first).
    volume_index: usize,
}

/// The RPCs that carry the node capability to the plugin after ValidateVolumeCapabilities.
const CARRY_NODE_CAPABILITY: [&str; 3] = ["ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume"];

/// Runs the `lifecycle` check.
pub(crate) async fn run(ctx: &mut ScenarioCtx, args: LifecycleArgs) -> CheckOutcome {
    let plan = match Plan::from_args(ctx, &args) {
        Ok(p) => p,
        Err(e) => {
            ctx.push(Finding::new(Severity::Error, "suite", format!("check lifecycle: {e}")));
            return CheckOutcome::Stop;
        }
    };
    if let Some(reason) = plan.skip_reason(ctx) {
        return CheckOutcome::Skip(reason);
    }
    let pattern = ctx.pattern();
    let mut lifecycle =
        Lifecycle { ctx, plan, volume_id: String::new(), context: HashMap::new(), declined: None, pattern, volume_index: 0 };
    let gone = if lifecycle.plan.volumes > 1 { lifecycle.go_several().await } else { lifecycle.go().await };
    match gone {
        Ok(()) => CheckOutcome::Done(BTreeMap::new()),
        Err(outcome) => outcome,
    }
}

/// The RPCs `existing-volume` may call: none that creates, changes or deletes a volume.
pub(crate) const EXISTING_RPCS: &[&str] = RPCS.split_at(6).1;

/// Why an `existing-volume` scenario is skipped when the run names no existing volume.
pub const NO_EXISTING_VOLUME: &str =
    "no existing volume was given (--existing-volume ID, or existing-volumes in the --config file)";

impl Plan {
    /// This plan on `volume`: its capability's fields replace the run's defaults and the
    /// arguments (a `mode` argument applies only when the volume names none). Err: why it
    /// does not apply.
    fn for_existing(&self, ctx: &ScenarioCtx, volume: &ExistingVolume) -> Result<Plan, String> {
        let cap = &volume.capability;
        let mut plan = self.clone();
        plan.existing = true;
        plan.writes = ctx.safety().existing_writable;
        plan.block = cap.block.unwrap_or(self.block);
        plan.request_mount = MountOptions { fs_type: cap.fs_type.clone(), mount_flags: cap.mount_flags.clone() };
        if let Some(mode) = cap.mode {
            plan.mode = mode;
        }
        let id = &volume.id;
        if plan.second_target == Second::Works && !allows_several_targets(plan.mode) {
            return Err(format!("existing volume {id}: access mode {} allows one target path per node", plan.mode));
        }
        if !self.readonly && plan.mode.is_read_only() {
            return Err(format!(
                "existing volume {id} has the read-only access mode {}; the read-only scenario covers it",
                plan.mode
            ));
        }
        Ok(plan)
    }
}

/// Whether a mode lets a node publish the volume at several target paths at once (the spec's
/// NodePublishVolume: every MULTI_NODE mode and SINGLE_NODE_MULTI_WRITER).
fn allows_several_targets(mode: AccessMode) -> bool {
    mode.is_multi_node() || mode == AccessMode::SingleNodeMultiWriter
}

/// Runs the `existing-volume` check: the node lifecycle (ControllerPublishVolume with
/// PUBLISH_UNPUBLISH_VOLUME, NodeStageVolume with STAGE_UNSTAGE_VOLUME, NodePublishVolume,
/// the host's mounts, NodeGetVolumeStats, and back) on each existing volume in turn, with its
/// volume_context and each publish_context passed on as a CO does. Only the attachments are
/// tracked (and journaled), never the volume; it is not written to without
/// `--existing-volume-writable`.
pub(crate) async fn run_existing(ctx: &mut ScenarioCtx, args: LifecycleArgs) -> CheckOutcome {
    let volumes = ctx.safety().existing_volumes.to_vec();
    if volumes.is_empty() {
        return CheckOutcome::Skip(NO_EXISTING_VOLUME.into());
    }
    let base = match Plan::from_args(ctx, &args) {
        Ok(p) => p,
        Err(e) => {
            ctx.push(Finding::new(Severity::Error, "suite", format!("check existing-volume: {e}")));
            return CheckOutcome::Stop;
        }
    };
    let mut skipped = Vec::new();
    for (i, volume) in volumes.iter().enumerate() {
        let plan = match base.for_existing(ctx, volume) {
            Ok(plan) => plan,
            Err(why) => {
                skipped.push(why);
                continue;
            }
        };
        if let Some(why) = plan.skip_reason(ctx) {
            return CheckOutcome::Skip(why);
        }
        let pattern = ctx.pattern();
        if i > 0 && pattern.is_none() {
            // The last volume's unstaging may have removed the staging directory, which is
            // the CO's to make (in an instance, the orchestrator's layout makes its own).
            let _ = std::fs::create_dir_all(&ctx.paths().staging);
        }
        let context = volume.context.clone().into_iter().collect();
        // In an instance each volume gets paths of its own in the orchestrator's layout.
        let mut lifecycle =
            Lifecycle { ctx, plan, volume_id: volume.id.clone(), context, declined: None, pattern, volume_index: i };
        if let Err(outcome) = lifecycle.go().await {
            return outcome;
        }
    }
    if skipped.len() == volumes.len() {
        return CheckOutcome::Skip(skipped.join("; "));
    }
    for why in skipped {
        ctx.push(Finding::new(Severity::Skip, "existing-volume-skipped", why));
    }
    CheckOutcome::Done(BTreeMap::new())
}

fn typed<M: prost::Message + Default>(message: &DynamicMessage) -> M {
    message.transcode_to::<M>().unwrap_or_default()
}

impl Lifecycle<'_> {
    fn supports(&self, capability: Capability) -> bool {
        self.ctx.fingerprint().supports(capability)
    }

    fn node_supports(&self, node: usize, capability: NodeCapability) -> bool {
        self.ctx.fingerprint().nodes.get(node).is_some_and(|n| n.capabilities.contains(&capability))
    }

    pub(super) fn controller_publishes(&self) -> bool {
        self.supports(Capability::Controller(ControllerCapability::PublishUnpublishVolume))
    }

    fn fail(&mut self, kind: &str, message: String) -> CheckOutcome {
        self.ctx.fail(kind, message);
        CheckOutcome::Stop
    }

    /// A mount-table answer, or (when the node's table cannot be read) an error finding.
    fn mount_table<T>(&mut self, answer: Result<Option<T>, MountTableError>) -> Result<Option<T>, CheckOutcome> {
        answer.map_err(|e| {
            self.ctx.push(Finding::new(Severity::Error, "mount-table", e.to_string()));
            CheckOutcome::Stop
        })
    }

    /// Where node endpoint `index`'s paths are, found again (after a restart).
    async fn inspector(&self, index: usize) -> Inspector {
        self.ctx.identify_node(index).await.unwrap_or_else(|| Inspector::unavailable("no such node".into()))
    }

    async fn go(&mut self) -> Result<(), CheckOutcome> {
        let mut nodes = Vec::new();
        for index in 0..self.plan.nodes {
            nodes.push(self.node_info(index).await?);
        }
        for node in &nodes {
            if let Some(why) = node.inspector.unreachable() {
                self.ctx.push(Finding::new(
                    Severity::Skip,
                    "path-check-skipped",
                    format!("host checks of the staging and target paths skipped: {why}"),
                ));
            } else if let Some(why) = node.inspector.mounts_skipped() {
                self.ctx.push(Finding::new(
                    Severity::Skip,
                    "mount-check-skipped",
                    format!("mount checks of node {}'s staging and target paths skipped: {why}", node.index),
                ));
            }
        }
        if !self.plan.existing {
            self.create_volume(&nodes).await?;
            self.validate().await?;
        }
        let node_expands = self.controller_expand().await?;
        for node in &mut nodes {
            self.place(node)?;
        }
        let mut used: Vec<NodeUse> = Vec::new();
        for mut node in nodes {
            let second = node.index > 0;
            if !self.controller_publish(&mut node, second).await? {
                break;
            }
            self.stage(&node).await?;
            // No orchestrator unstages without a path: the base scenario alone asks it.
            if self.plan.unstage_without_path && node.stage && self.pattern.is_none() {
                self.unstage_without_path(&node).await?;
            }
            if self.plan.restart && node.index == 0 {
                self.restart(&node).await?;
                // A new process may live in a new mount namespace.
                node.inspector = self.inspector(node.index).await;
            }
            self.publish(&node, &node.target, self.plan.times).await?;
            if self.plan.second_usage && node.index == 0 {
                self.second_usage(&node).await?;
            }
            used.push(node);
        }
        for node in used.iter().filter(|_| node_expands) {
            self.node_expand(node).await?;
        }
        let second_target = match (self.plan.second_target, used.first()) {
            (Second::None, _) | (_, None) => None,
            (expect, Some(first)) => self.second_target(first, expect).await?,
        };
        for node in &used {
            self.stats(node).await?;
        }
        if let Some((node, target)) = &second_target {
            self.unpublish(node, target).await?;
        }
        for node in used.iter().rev() {
            self.unpublish(node, &node.target).await?;
            self.unstage(node).await?;
            self.controller_unpublish(node).await?;
        }
        if self.plan.existing {
            return Ok(());
        }
        let request = v1::DeleteVolumeRequest { volume_id: self.volume_id.clone(), ..Default::default() };
        self.call("DeleteVolume", proto::to_dynamic(&request), None, self.plan.times).await?;
        Ok(())
    }

    /// NodeGetInfo of node endpoint `index`, and where that node's paths are.
    async fn node_info(&mut self, index: usize) -> Result<NodeUse, CheckOutcome> {
        let response = self.call("NodeGetInfo", proto::to_dynamic(&v1::NodeGetInfoRequest {}), Some(index), 1).await?;
        let info: v1::NodeGetInfoResponse = typed(&response);
        if info.node_id.is_empty() {
            return Err(self.fail("assertion", format!("NodeGetInfo of node endpoint {index} returned no node_id")));
        }
        let paths = self.ctx.paths().clone();
        let (staging, target) = if index == 0 && self.plan.long_paths {
            // Paths over 128 bytes: the spec's minimum a plugin must accept for them.
            let name = format!("long-{}", "p".repeat(LONG_PATH_COMPONENT - 5));
            let dir = paths.dir.join(name);
            let staging = dir.join("staging");
            if let Err(e) = std::fs::create_dir_all(&staging) {
                self.ctx.push(Finding::new(Severity::Error, "setup", format!("cannot create {}: {e}", staging.display())));
                return Err(CheckOutcome::Stop);
            }
            self.ctx.own_paths([dir.join("target"), staging.clone(), dir.clone()]);
            (staging, dir.join("target"))
        } else if index == 0 {
            (paths.staging.clone(), paths.target.clone())
        } else {
            // Another node gets paths of its own: node plugins on one host must not share them.
            let dir = paths.dir.join(format!("node{index}"));
            let staging = dir.join("staging");
            for d in [&dir, &staging] {
                if let Err(e) = std::fs::create_dir_all(d) {
                    self.ctx.push(Finding::new(Severity::Error, "setup", format!("cannot create {}: {e}", d.display())));
                    return Err(CheckOutcome::Stop);
                }
            }
            self.ctx.own_paths([dir.join("target"), staging.clone(), dir]);
            (staging, paths.dir.join(format!("node{index}")).join("target"))
        };
        Ok(NodeUse {
            index,
            topology: info.accessible_topology.map(|t| t.segments.into_iter().collect()).unwrap_or_default(),
            node_id: info.node_id,
            inspector: self.ctx.inspector(index).unwrap_or_else(|| Inspector::unavailable("no such node".into())),
            staging,
            target,
            publish_context: HashMap::new(),
            stage: self.node_supports(index, NodeCapability::StageUnstageVolume),
        })
    }

    async fn create_volume(&mut self, nodes: &[NodeUse]) -> Result<(), CheckOutcome> {
        let requests = self.ctx.requests();
        let mut request = v1::CreateVolumeRequest {
            name: self.volume_name(),
            capacity_range: Some(v1::CapacityRange { required_bytes: self.ctx.small_size(), limit_bytes: 0 }),
            volume_capabilities: vec![self.plan.volume_capability()],
            parameters: requests.parameters.as_ref().clone().into_iter().collect(),
            ..Default::default()
        };
        if self.supports(Capability::Plugin(PluginService::VolumeAccessibilityConstraints))
            && self.requisite_from_nodes()
        {
            request.accessibility_requirements = accessible_from(nodes.iter().map(|n| &n.topology));
        }
        let (sent, answer) = self.send("CreateVolume", proto::to_dynamic(&request), None).await;
        let first = match answer {
            Err(e) if e.code == Code::InvalidArgument && !e.is_unreachable() => {
                return Err(CheckOutcome::Skip(format!(
                    "the plugin does not create {} volumes (CreateVolume answered INVALID_ARGUMENT: {})",
                    self.plan.describe(),
                    e.message
                )));
            }
            other => self.judge("CreateVolume", &sent, other)?,
        };
        self.repeat("CreateVolume", &sent, None, &first, self.plan.times).await?;
        let volume = typed::<v1::CreateVolumeResponse>(&first).volume.unwrap_or_default();
        if volume.volume_id.is_empty() {
            return Err(self.fail("assertion", "CreateVolume answered OK without a volume id".into()));
        }
        self.volume_id = volume.volume_id;
        self.context = forwarded_context(&volume.volume_context, &self.plan.configured_context);
        self.match_topology(nodes, &volume.accessible_topology)
    }

    /// ValidateVolumeCapabilities with the capability the nodes will use; its answer is
    /// reconciled with the request as an orchestrator depends on it.
    async fn validate(&mut self) -> Result<(), CheckOutcome> {
        if let Some(pattern) = self.pattern {
            self.validate_as(&pattern).await?;
            self.learn_declined().await;
            return Ok(());
        }
        let request = self.validate_request(self.plan.node_capability());
        let sent = proto::to_dynamic(&request);
        let response = self.call("ValidateVolumeCapabilities", sent.clone(), None, 1).await?;
        let reconciliation = capability::reconcile(&request, &typed(&response));
        let severity = super::confirm::severity(reconciliation.verdict, self.ctx.strict());
        if severity > Severity::Pass {
            let message = format!(
                "ValidateVolumeCapabilities does not confirm the capability the lifecycle publishes with: {}",
                reconciliation.summary()
            );
            let mut f = call_finding(severity, reconciliation.verdict.kind(), message, "ValidateVolumeCapabilities", &sent);
            f.requirements = super::confirm::breaks(reconciliation.verdict);
            self.ctx.push(f);
            if severity >= Severity::Fail {
                return Err(CheckOutcome::Stop);
            }
            self.declined = self.declines(&reconciliation);
        }
        Ok(())
    }

    /// ControllerPublishVolume to `node` (with the capability). Returns whether the volume
    /// may go on to this node: false when a refusal was expected (and checked).
    async fn controller_publish(&mut self, node: &mut NodeUse, second: bool) -> Result<bool, CheckOutcome> {
        if !self.controller_publishes() {
            return Ok(true);
        }
        let readonly = self.plan.read_only()
            && self.supports(Capability::Controller(ControllerCapability::PublishReadonly));
        let request = v1::ControllerPublishVolumeRequest {
            volume_id: self.volume_id.clone(),
            node_id: node.node_id.clone(),
            volume_capability: Some(self.controller_capability()),
            readonly,
            volume_context: self.context.clone(),
            ..Default::default()
        };
        if second && let Second::Refused(code) = self.plan.second_node {
            let (sent, answer) = self.send("ControllerPublishVolume", proto::to_dynamic(&request), None).await;
            let what = format!(
                "ControllerPublishVolume of a {} volume already published to node {} to a second node {}",
                self.plan.mode,
                self.ctx.fingerprint().nodes.first().map_or("", |n| n.node_id.as_str()),
                node.node_id
            );
            self.expect_refusal(&what, &sent, answer, code)?;
            return Ok(false);
        }
        let response = self.call("ControllerPublishVolume", proto::to_dynamic(&request), None, self.plan.times).await?;
        node.publish_context = typed::<v1::ControllerPublishVolumeResponse>(&response).publish_context;
        Ok(true)
    }

    /// Checks that a call that must be refused was, with `code`; records a failure otherwise.
    fn expect_refusal(
        &mut self,
        what: &str,
        sent: &DynamicMessage,
        answer: Result<DynamicMessage, RpcError>,
        code: Code,
    ) -> Result<(), CheckOutcome> {
        let rpc = sent.descriptor().name().trim_end_matches("Request").to_owned();
        match answer {
            Err(e) if e.code == code => Ok(()),
            Err(e) if e.is_unreachable() => Err(self.ctx.call_failed(&e, sent, code_name(code))),
            Err(e) => {
                let message = format!("{what} answered {}, expected {}", e.code_name(), code_name(code));
                let mut f = call_finding(Severity::Fail, "unexpected-code", message, &rpc, sent);
                (f.expected, f.got, f.plugin_message) =
                    (Some(code_name(code).to_owned()), Some(e.code_name().to_owned()), Some(e.message.clone()));
                self.ctx.push(f);
                Err(CheckOutcome::Stop)
            }
            Ok(answer) => {
                let message = format!(
                    "{what} succeeded; it must fail with {}; it returned {}",
                    code_name(code),
                    proto::summary(&answer, proto::SUMMARY_MAX)
                );
                let mut f = call_finding(Severity::Fail, "unexpected-code", message, &rpc, sent);
                (f.expected, f.got) = (Some(code_name(code).to_owned()), Some("OK".to_owned()));
                self.ctx.push(f);
                Err(CheckOutcome::Stop)
            }
        }
    }

    async fn controller_unpublish(&mut self, node: &NodeUse) -> Result<(), CheckOutcome> {
        self.exercise_detach();
        if !self.controller_publishes() {
            return Ok(());
        }
        let request = v1::ControllerUnpublishVolumeRequest {
            volume_id: self.volume_id.clone(),
            node_id: node.node_id.clone(),
            ..Default::default()
        };
        self.call("ControllerUnpublishVolume", proto::to_dynamic(&request), None, self.plan.times).await?;
        Ok(())
    }

    /// Sends one call with the plan's secrets mode, tracked.
    async fn send(
        &mut self,
        rpc: &str,
        request: DynamicMessage,
        node: Option<usize>,
    ) -> (DynamicMessage, Result<DynamicMessage, RpcError>) {
        let method = proto::method(rpc).expect("lifecycle RPCs are CSI methods");
        let secrets = self.plan.secrets.clone();
        let (sent, answer) = self.ctx.send(&method, request, node, &secrets, true).await;
        let answer = answer.map(|r| match r {
            Response::Unary(m) => m,
            Response::Stream(mut messages) => messages.pop().unwrap_or_else(|| DynamicMessage::new(method.output())),
        });
        (sent, answer)
    }

    /// The response of an OK answer; a finding (and the end of the scenario) otherwise. Under
    /// `secrets: none`, a refusal for missing secrets that the secrets file would have given
    /// makes the scenario a skip.
    fn judge(
        &mut self,
        rpc: &str,
        sent: &DynamicMessage,
        answer: Result<DynamicMessage, RpcError>,
    ) -> Result<DynamicMessage, CheckOutcome> {
        match answer {
            Ok(response) => {
                self.followed_mount_options(rpc);
                Ok(response)
            }
            Err(e)
                if self.plan.secrets == SecretsMode::None
                    && matches!(e.code, Code::Unauthenticated | Code::PermissionDenied)
                    && self.ctx.requests().secrets.contains_key(&crate::secrets::secret_key(rpc)) =>
            {
                Err(CheckOutcome::Skip(format!(
                    "the plugin needs the secrets file's {} for {rpc} ({} without it), so the lifecycle without \
                     secrets does not apply",
                    crate::secrets::secret_key(rpc),
                    e.code_name()
                )))
            }
            Err(e)
                if matches!(e.code, Code::InvalidArgument | Code::FailedPrecondition)
                    && CARRY_NODE_CAPABILITY.contains(&rpc)
                    && self.declined.is_some() =>
            {
                Err(self.declined_refusal(rpc, sent, &e))
            }
            Err(e) => Err(self.ctx.call_failed(&e, sent, "OK")),
        }
    }

    /// Sends the request again until it was sent `times` times, after a first OK `first`;
    /// every answer must be OK and equal the first.
    async fn repeat(
        &mut self,
        rpc: &str,
        sent: &DynamicMessage,
        node: Option<usize>,
        first: &DynamicMessage,
        times: u32,
    ) -> Result<(), CheckOutcome> {
        let first_val = Val::from_message(first);
        for attempt in 2..=times {
            let (again, answer) = self.send(rpc, sent.clone(), node).await;
            let response = self.judge(rpc, &again, answer)?;
            if let Some((path, a, b)) = assert::difference(&first_val, &Val::from_message(&response)) {
                let at = if path.is_empty() { String::new() } else { format!(" at {path}") };
                let message =
                    format!("{rpc} call {attempt} of {times} answered differently from the first{at}: {b} instead of {a}");
                let mut f = call_finding(Severity::Fail, "not-idempotent", message, rpc, &again);
                (f.expected, f.got) = (Some(a.to_string()), Some(b.to_string()));
                self.ctx.push(f);
                return Err(CheckOutcome::Stop);
            }
        }
        Ok(())
    }

    /// Sends a call (`times` times when it changes state) that must answer OK each time, with
    /// equal answers; returns the first answer.
    async fn call(
        &mut self,
        rpc: &str,
        request: DynamicMessage,
        node: Option<usize>,
        times: u32,
    ) -> Result<DynamicMessage, CheckOutcome> {
        let (sent, answer) = self.send(rpc, request, node).await;
        let first = self.judge(rpc, &sent, answer)?;
        if times > 1 {
            self.repeat(rpc, &sent, node, &first, times).await?;
        }
        Ok(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requests_options_replace_the_volumes_field_by_field() {
        let volume = MountOptions { fs_type: Some("xfs".into()), mount_flags: Some(vec!["noexec".into()]) };
        let flags_only = MountOptions { fs_type: None, mount_flags: Some(vec!["nosuid".into(), "nodev".into()]) };
        let merged = flags_only.over(&volume);
        assert_eq!(merged.fs_type.as_deref(), Some("xfs"), "a field the request leaves out keeps the volume's");
        assert_eq!(merged.mount_flags, Some(vec!["nosuid".to_owned(), "nodev".to_owned()]), "flags are replaced, not merged");
        assert_eq!(MountOptions::default().over(&volume), volume);
        let no_flags = MountOptions { fs_type: None, mount_flags: Some(Vec::new()) };
        assert_eq!(no_flags.over(&volume).mount_flags, Some(Vec::new()), "an empty list given replaces too");
    }

    #[test]
    fn an_existing_volume_is_never_created_validated_or_deleted() {
        assert_eq!(EXISTING_RPCS.len(), RPCS.len() - 6);
        for rpc in ["CreateVolume", "ValidateVolumeCapabilities", "DeleteVolume", "ControllerExpandVolume", "NodeExpandVolume"] {
            assert!(RPCS.contains(&rpc) && !EXISTING_RPCS.contains(&rpc), "{rpc}");
        }
    }

    #[test]
    fn the_forwarded_context_is_the_returned_one_plus_configured_keys() {
        let returned: HashMap<String, String> = [("pool".to_owned(), "a".to_owned())].into();
        let configured: BTreeMap<String, String> =
            [("pool".to_owned(), "b".to_owned()), ("share".to_owned(), "/data".to_owned())].into();
        let context = forwarded_context(&returned, &configured);
        assert_eq!(context["pool"], "a", "the plugin's own key wins");
        assert_eq!(context["share"], "/data");
        assert!(forwarded_context(&HashMap::new(), &BTreeMap::new()).is_empty());
    }
}
