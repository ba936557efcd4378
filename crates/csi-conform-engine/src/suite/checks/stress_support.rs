//! What the stress and disruption checks share: workers (forks of the scenario with names and
//! paths of their own), further budget leases so that a small plugin is never asked to hold
//! more than it says it can, one volume's lifecycle calls, and listing what the plugin holds.

use std::{collections::HashMap, path::Path};

use prost_reflect::DynamicMessage;

use super::{
    list::{LIST_SNAPSHOTS, LIST_VOLUMES, page_to_end},
    support::{accessible_from, call_ok, create_request, path_of},
};
use crate::{
    client::RpcError,
    fingerprint::{Capability, ControllerCapability, NodeCapability, PluginService},
    proto::{self, v1},
    report::{Finding, Severity},
    suite::{
        budget::{Demand, Lease},
        ctx::{CheckOutcome, ScenarioCtx},
        paths::ScenarioPaths,
        vars::Val,
    },
};

/// The kind of a note: a passing finding that changes no outcome (see docs/verdict-audit.md).
pub(super) const NOTE: &str = "note";

/// A note: what the scenario did that a reader should know, no verdict.
pub(super) fn note(ctx: &mut ScenarioCtx, message: String) {
    ctx.push(Finding::new(Severity::Pass, NOTE, message));
}

/// A fork of the scenario that works under its own name (`<name>-<label>`) and its own
/// directory (`<dir>/<label>`, with a `staging` directory in it), so that workers running at
/// once never share a volume name or a path. Its paths are removed with the scenario's.
pub(super) fn worker(ctx: &mut ScenarioCtx, label: &str) -> Result<ScenarioCtx, CheckOutcome> {
    let paths = ctx.path_settings();
    if paths.create_mount_cmd.is_some() || paths.create_staging_cmd.is_some() {
        // Those commands make the scenario's paths where the node sees them; workers' paths
        // of their own are made here only.
        return Err(CheckOutcome::Skip(
            "workers need directories of their own, which this check makes only on this host, not through --create-path-cmd".into(),
        ));
    }
    let mut fork = ctx.fork();
    let dir = ctx.paths().dir.join(label);
    let staging = dir.join("staging");
    if let Err(e) = std::fs::create_dir_all(&staging) {
        ctx.push(Finding::new(Severity::Error, "setup", format!("cannot create {}: {e}", staging.display())));
        return Err(CheckOutcome::Stop);
    }
    let paths = ScenarioPaths::in_dir(dir.clone(), staging.clone());
    let own = vec![paths.target.clone(), paths.target2.clone(), staging, dir];
    fork.relocate(format!("{}-{label}", ctx.name()), paths, own);
    Ok(fork)
}

/// Up to `want` further places in the run's budgets, one volume of the small size each (and
/// one publication on node 0 with `publish`), taken now: as many as fit. Each is held until
/// dropped.
pub(super) fn extra_leases(ctx: &ScenarioCtx, want: u32, publish: bool) -> Vec<Lease> {
    let demand = Demand {
        volumes: 1,
        bytes: ctx.small_size(),
        publish: if publish { vec![1] } else { Vec::new() },
        ..Demand::default()
    };
    (0..want).map_while(|_| ctx.budget().try_extra(demand.clone())).collect()
}

/// Whether the controller advertises `capability`.
pub(super) fn controller_has(ctx: &ScenarioCtx, capability: ControllerCapability) -> bool {
    ctx.fingerprint().supports(Capability::Controller(capability))
}

/// Whether node endpoint 0 advertises `capability`.
pub(super) fn node_has(ctx: &ScenarioCtx, capability: NodeCapability) -> bool {
    ctx.fingerprint().nodes.first().is_some_and(|n| n.capabilities.contains(&capability))
}

/// Node 0's id, or why there is none.
pub(super) fn node_id(ctx: &ScenarioCtx) -> Result<String, CheckOutcome> {
    match ctx.fingerprint().nodes.first() {
        Some(n) if !n.node_id.is_empty() => Ok(n.node_id.clone()),
        _ => Err(CheckOutcome::Skip("the run has no node endpoint with a node id".into())),
    }
}

/// A volume of the scenario's, as the plugin returned it.
#[derive(Debug, Clone)]
pub(super) struct Volume {
    pub(super) id: String,
    pub(super) context: HashMap<String, String>,
}

/// The volume of a CreateVolume answer (`None`: no id; the response rules report that).
pub(super) fn volume_of(response: &DynamicMessage) -> Option<Volume> {
    let typed: v1::CreateVolumeResponse = response.transcode_to().ok()?;
    let volume = typed.volume?;
    (!volume.volume_id.is_empty()).then_some(Volume { id: volume.volume_id, context: volume.volume_context })
}

/// A volume of the small size for `capability`, named `<ctx name>-<suffix>`, where node 0 is
/// (its topology required, where the plugin has accessibility constraints and node 0 reports
/// one: the checks publish it there), which must answer OK.
pub(super) async fn create(ctx: &mut ScenarioCtx, suffix: &str, capability: &DynamicMessage) -> Result<Volume, CheckOutcome> {
    let name = format!("{}-{suffix}", ctx.name());
    let mut request = create_request(ctx, name, capability);
    let constrained = ctx.fingerprint().supports(Capability::Plugin(PluginService::VolumeAccessibilityConstraints));
    if let Some(requirement) = accessible_from(ctx.fingerprint().nodes.first().and_then(|n| n.topology.as_ref())).filter(|_| constrained) {
        request.set_field_by_name("accessibility_requirements", prost_reflect::Value::Message(proto::to_dynamic(&requirement)));
    }
    let response = call_ok(ctx, "CreateVolume", request, None).await?;
    match volume_of(&response) {
        Some(v) => Ok(v),
        None => {
            ctx.fail("assertion", "CreateVolume answered OK without a volume id");
            Err(CheckOutcome::Stop)
        }
    }
}

/// The typed capability of a dynamic one.
pub(super) fn typed_capability(capability: &DynamicMessage) -> Option<v1::VolumeCapability> {
    capability.transcode_to().ok()
}

/// ControllerPublishVolume of `volume` to node `node_id`: its publish_context, or the
/// plugin's answer with the request it refused.
pub(super) async fn controller_publish(
    ctx: &mut ScenarioCtx,
    volume: &Volume,
    node_id: &str,
    capability: &v1::VolumeCapability,
) -> Result<HashMap<String, String>, (RpcError, DynamicMessage)> {
    let request = proto::to_dynamic(&v1::ControllerPublishVolumeRequest {
        volume_id: volume.id.clone(),
        node_id: node_id.to_owned(),
        volume_capability: Some(capability.clone()),
        volume_context: volume.context.clone(),
        ..Default::default()
    });
    match ctx.call("ControllerPublishVolume", request.clone(), None).await {
        Ok(r) => Ok(r.transcode_to::<v1::ControllerPublishVolumeResponse>().map(|r| r.publish_context).unwrap_or_default()),
        Err(e) => Err((e, request)),
    }
}

/// The NodeStageVolume request for `volume` at `staging`.
pub(super) fn stage_request(
    volume: &Volume,
    publish_context: &HashMap<String, String>,
    staging: &std::path::Path,
    capability: &v1::VolumeCapability,
) -> DynamicMessage {
    proto::to_dynamic(&v1::NodeStageVolumeRequest {
        volume_id: volume.id.clone(),
        publish_context: publish_context.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(capability.clone()),
        volume_context: volume.context.clone(),
        ..Default::default()
    })
}

/// The NodePublishVolume request for `volume` at `target` (staged at `staging`, if any).
pub(super) fn publish_request(
    volume: &Volume,
    publish_context: &HashMap<String, String>,
    staging: Option<&std::path::Path>,
    target: &std::path::Path,
    capability: &v1::VolumeCapability,
) -> DynamicMessage {
    proto::to_dynamic(&v1::NodePublishVolumeRequest {
        volume_id: volume.id.clone(),
        publish_context: publish_context.clone(),
        staging_target_path: staging.map(|s| s.display().to_string()).unwrap_or_default(),
        target_path: target.display().to_string(),
        volume_capability: Some(capability.clone()),
        volume_context: volume.context.clone(),
        ..Default::default()
    })
}

/// The RPCs of one volume's whole life on node 0: created, published to the node, staged,
/// published, and back (the `RPCS` of the checks that take a volume through it).
pub(super) const ONE_VOLUME_ON_NODE: &[&str] = &["CreateVolume", "ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume", "ControllerUnpublishVolume", "DeleteVolume"];

/// A volume of a check's own, published on node 0 by [`publish_on_node`].
pub(super) struct OnNode {
    /// The volume.
    pub(super) volume: Volume,
    /// Whether ControllerPublishVolume was sent (the controller publishes).
    pub(super) controller_published: bool,
    /// Whether NodeStageVolume was sent (node 0 stages), at the scenario's staging path.
    pub(super) staged: bool,
    /// The NodePublishVolume request that answered OK, at the scenario's target path.
    pub(super) publish: DynamicMessage,
}

/// Creates a volume of the small size for `capability` (`typed`), named `<ctx name>-<suffix>`
/// where node 0 (`node_id`) is, publishes it to node 0 where the controller publishes, stages it
/// at the scenario's staging path where node 0 stages, and publishes it at the scenario's
/// target path: each must answer OK.
pub(super) async fn publish_on_node(
    ctx: &mut ScenarioCtx,
    node_id: &str,
    suffix: &str,
    (capability, typed): (&DynamicMessage, &v1::VolumeCapability),
) -> Result<OnNode, CheckOutcome> {
    let volume = create(ctx, suffix, capability).await?;
    let controller_published = controller_has(ctx, ControllerCapability::PublishUnpublishVolume);
    let publish_context = if controller_published {
        match controller_publish(ctx, &volume, node_id, typed).await {
            Ok(c) => c,
            Err((e, request)) => return Err(ctx.call_failed(&e, &request, "OK")),
        }
    } else {
        Default::default()
    };
    let (staging, target) = (ctx.paths().staging.clone(), ctx.paths().target.clone());
    let staged = node_has(ctx, NodeCapability::StageUnstageVolume);
    if staged {
        let request = stage_request(&volume, &publish_context, &staging, typed);
        if let Err(e) = ctx.call("NodeStageVolume", request.clone(), Some(0)).await {
            return Err(ctx.call_failed(&e, &request, "OK"));
        }
    }
    let publish = publish_request(&volume, &publish_context, staged.then_some(staging.as_path()), &target, typed);
    if let Err(e) = ctx.call("NodePublishVolume", publish.clone(), Some(0)).await {
        return Err(ctx.call_failed(&e, &publish, "OK"));
    }
    Ok(OnNode { volume, controller_published, staged, publish })
}

/// NodeUnpublishVolume, which must answer OK.
pub(super) async fn unpublish(ctx: &mut ScenarioCtx, volume: &Volume, target: &std::path::Path) -> Result<(), CheckOutcome> {
    let request = proto::to_dynamic(&v1::NodeUnpublishVolumeRequest {
        volume_id: volume.id.clone(),
        target_path: target.display().to_string(),
    });
    call_ok(ctx, "NodeUnpublishVolume", request, Some(0)).await.map(drop)
}

/// NodeUnstageVolume, which must answer OK.
pub(super) async fn unstage(ctx: &mut ScenarioCtx, volume: &Volume, staging: &std::path::Path) -> Result<(), CheckOutcome> {
    let request = proto::to_dynamic(&v1::NodeUnstageVolumeRequest {
        volume_id: volume.id.clone(),
        staging_target_path: staging.display().to_string(),
    });
    call_ok(ctx, "NodeUnstageVolume", request, Some(0)).await.map(drop)
}

/// ControllerUnpublishVolume from node `node_id`, which must answer OK.
pub(super) async fn controller_unpublish(ctx: &mut ScenarioCtx, volume: &Volume, node_id: &str) -> Result<(), CheckOutcome> {
    let request = proto::to_dynamic(&v1::ControllerUnpublishVolumeRequest {
        volume_id: volume.id.clone(),
        node_id: node_id.to_owned(),
        ..Default::default()
    });
    call_ok(ctx, "ControllerUnpublishVolume", request, None).await.map(drop)
}

/// DeleteVolume, which must answer OK.
pub(super) async fn delete(ctx: &mut ScenarioCtx, volume_id: &str) -> Result<(), CheckOutcome> {
    let request = proto::to_dynamic(&v1::DeleteVolumeRequest { volume_id: volume_id.to_owned(), ..Default::default() });
    call_ok(ctx, "DeleteVolume", request, None).await.map(drop)
}

/// Every volume id ListVolumes lists now, paged to the end (the run's own cursor moves are
/// restarted, as `list-all-volumes` does); `None` when the plugin does not list volumes.
pub(super) async fn listed_volumes(ctx: &mut ScenarioCtx) -> Result<Option<Vec<String>>, CheckOutcome> {
    if !controller_has(ctx, ControllerCapability::ListVolumes) {
        return Ok(None);
    }
    let base = proto::to_dynamic(&v1::ListVolumesRequest::default());
    let mut seen: Vec<(String, Val)> = Vec::new();
    page_to_end(ctx, &LIST_VOLUMES, &base, 0, String::new(), &mut seen, false).await?;
    Ok(Some(seen.into_iter().map(|(id, _)| id).collect()))
}

/// Every snapshot id ListSnapshots lists now, paged to the end as [`listed_volumes`] does;
/// `None` when the plugin does not list snapshots.
pub(super) async fn listed_snapshots(ctx: &mut ScenarioCtx) -> Result<Option<Vec<String>>, CheckOutcome> {
    if !controller_has(ctx, ControllerCapability::ListSnapshots) {
        return Ok(None);
    }
    let base = proto::to_dynamic(&v1::ListSnapshotsRequest::default());
    let mut seen: Vec<(String, Val)> = Vec::new();
    page_to_end(ctx, &LIST_SNAPSHOTS, &base, 0, String::new(), &mut seen, false).await?;
    Ok(Some(seen.into_iter().map(|(id, _)| id).collect()))
}

/// Whether the look-up that names one object of the kind `deleting` deletes (ControllerGetVolume
/// for DeleteVolume, GetSnapshot for DeleteSnapshot: the delete verifier's own, `deleted.rs`),
/// where advertised and believed (the run's witness rules, see `witness.rs`), finds `id`:
/// `Some(true)` found, `Some(false)` NOT_FOUND, `None` not advertised, not believed, or another
/// answer.
pub(super) async fn found(ctx: &mut ScenarioCtx, deleting: &str, id: &str) -> Option<bool> {
    let get = crate::suite::deleted::get_lookup(deleting, ctx.fingerprint())?;
    if !ctx.credible(get).await {
        return None;
    }
    let answer = ctx.call(get, crate::suite::deleted::request(get, id, ""), None).await;
    match crate::suite::deleted::look(get, id, answer.as_ref().map_err(|e| (e.code, e.message.as_str()))) {
        crate::suite::deleted::Look::Gone => Some(false),
        crate::suite::deleted::Look::Still(_) => Some(true),
        _ => None,
    }
}

/// Volumes the plugin lists now that it did not list `before` and that no answer named
/// (`known`), each seen a second time before it counts: ControllerGetVolume where the plugin
/// has it and the run believes it, a second listing where not. A volume listed once and not
/// seen again earns no verdict (never blame on one witness). Empty when `before` was not
/// taken (the plugin does not list volumes).
pub(super) async fn ghosts_seen_twice(
    ctx: &mut ScenarioCtx,
    before: Option<Vec<String>>,
    known: &std::collections::BTreeSet<String>,
) -> Result<Vec<String>, CheckOutcome> {
    let Some(before) = before else { return Ok(Vec::new()) };
    let before: std::collections::BTreeSet<String> = before.into_iter().collect();
    let after = listed_volumes(ctx).await?.unwrap_or_default();
    let mut confirmed = Vec::new();
    for ghost in after.into_iter().filter(|id| !before.contains(id) && !known.contains(id)).collect::<std::collections::BTreeSet<_>>() {
        let seen_again = match found(ctx, "DeleteVolume", &ghost).await {
            Some(found) => found,
            None => listed_volumes(ctx).await?.unwrap_or_default().contains(&ghost),
        };
        if seen_again {
            confirmed.push(ghost);
        } else {
            tracing::info!(volume = ghost, "a volume listed once was not seen again: no verdict");
        }
    }
    Ok(confirmed)
}

/// The volume id at `volume.volume_id` of a response, if any.
pub(super) fn volume_id_in(response: &DynamicMessage) -> Option<String> {
    Val::from_message(response).get(&path_of("volume.volume_id")).ok().and_then(|v| v.to_text()).filter(|s| !s.is_empty())
}

/// The mounts at exactly `path` on node 0, as both witnesses see them (the mount table and
/// the path itself, `suite::mounted`): `None` when the mount table cannot be read here, or
/// when the two disagree, which files the inconclusive finding that says so and earns no
/// verdict on one witness's word.
pub(super) fn mounts_at(ctx: &mut ScenarioCtx, path: &Path) -> Option<usize> {
    let inspector = ctx.inspector(0)?;
    match crate::suite::mounted::mounts_at(ctx, &inspector, path) {
        Ok(Some(crate::suite::mounted::Seen::Agreed(stacked))) => Some(stacked.len()),
        Ok(Some(crate::suite::mounted::Seen::Disagree(f))) => {
            ctx.push(*f);
            None
        }
        Ok(None) | Err(_) => None,
    }
}

/// Something still mounted at `path` after `rpc` answered OK: it did not undo what was done
/// there (`requirement`, a MUST).
pub(super) fn left_mounted(ctx: &mut ScenarioCtx, rpc: &str, path: &Path, requirement: &str) -> bool {
    let Some(n) = mounts_at(ctx, path).filter(|&n| n > 0) else { return false };
    let mut f = Finding::new(
        Severity::Fail,
        "left-mounted",
        format!(
            "{rpc} answered OK and {n} mount(s) stay at {}: {rpc} MUST undo the work \
             done at that path (#{})",
            path.display(),
            rpc.to_lowercase()
        ),
    );
    f.rpc = Some(rpc.to_owned());
    f.requirements = vec![requirement.to_owned()];
    ctx.push(f);
    true
}

