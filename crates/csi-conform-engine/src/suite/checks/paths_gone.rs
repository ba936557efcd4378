//! The `paths-gone` check, the lost-node contract on the node side: a volume of its own staged
//! and published on node 0, then the node "rebooted": what is mounted at the target and
//! staging paths is unmounted and both paths are removed (the scenario's own paths, and only
//! where the run may unmount: CAP_SYS_ADMIN, in the plugin's mount namespace), while the
//! plugin's record still says published and staged. NodeUnpublishVolume and NodeUnstageVolume
//! for those paths must answer OK (both MUST be idempotent: a call that unmounted and removed
//! the path and then crashed leaves exactly this state, and its retry must finish). A refusal
//! fails (`paths-gone`); the path is then made again as an empty directory, as an operator
//! unsticks a node, and asked again, so that the volume still comes down.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use prost_reflect::DynamicMessage;

use super::{
    Check, CheckDef, CheckFuture,
    stress_support::{
        ONE_VOLUME_ON_NODE, OnNode, Volume, controller_unpublish, delete, mounts_at, node_id, note, publish_on_node,
        typed_capability,
    },
    support::{OwnCapability, capability_arg},
};
use crate::{
    client::RpcError,
    proto::{self, v1},
    report::{Evidence, Finding, Severity},
    suite::{
        answer::rpc_error_finding,
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
        inspect::{Inspector, PathKind},
        paths::remove_own_path,
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<PathsGone>()];

struct PathsGone;

impl Check for PathsGone {
    type Args = OwnCapability;
    const NAME: &'static str = "paths-gone";
    const DESCRIPTION: &'static str = "stages and publishes a mount volume of its own on node 0, then plays the node's reboot: unmounts what is at the target and staging paths (only with CAP_SYS_ADMIN in the plugin's mount namespace; skipped otherwise) and removes both paths, confirmed gone; NodeUnpublishVolume and NodeUnstageVolume for them must answer OK (fails `paths-gone`); a refused path is made again as an empty directory and asked again, so the volume is still unstaged, unpublished from the node and deleted";
    const RPCS: &'static [&'static str] = ONE_VOLUME_ON_NODE;

    fn demand(_: &OwnCapability, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { volumes: 1, publish: vec![1], ..CheckDemand::default() }
    }

    fn cost(_: &OwnCapability, _: &CheckUse<'_>) -> u64 {
        10
    }

    fn run(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckFuture<'_> {
        Box::pin(paths_gone(ctx, args))
    }
}

/// The kind of a refusal's finding (what the matrix row `lost-node.node-paths-gone` reads).
const KIND: &str = "paths-gone";
/// Requirement: NodeUnpublishVolume is idempotent (a retried call finishes).
const UNPUBLISH_IDEMPOTENT: &str = "NodeUnpublishVolume.idempotent";
/// Requirement: NodeUnstageVolume answers OK where the volume is not staged.
const UNSTAGE_IDEMPOTENT: &str = "NodeUnstageVolume.idempotent";

/// One of the two paths the reboot takes away.
struct Gone {
    /// `target` or `staging`.
    what: &'static str,
    /// The path as the plugin names it.
    path: PathBuf,
    /// The same path as this process opens it.
    local: PathBuf,
    /// What showed it gone before the call (the path itself and the mount table).
    evidence: Vec<Evidence>,
}

impl Gone {
    /// The `what` path `path` of the node `inspector` reaches (checked reachable by
    /// [`reachable`]).
    fn new(what: &'static str, inspector: &Inspector, path: &Path) -> Self {
        let local = inspector.local_path(path).unwrap_or_else(|| path.to_owned());
        Gone { what, path: path.to_owned(), local, evidence: Vec::new() }
    }
}

/// A node call refused for a path that is gone: what it answered, and what it answered once
/// the path was made again (`None`: OK).
struct Refusal {
    error: RpcError,
    request: DynamicMessage,
    requirement: &'static str,
    again: Option<RpcError>,
}

async fn paths_gone(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckOutcome {
    let capability = match capability_arg(ctx, &args.0) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, e),
    };
    let Some(typed) = typed_capability(&capability) else { return bad_arg(ctx, "argument capability does not decode".into()) };
    if !matches!(typed.access_type, Some(v1::volume_capability::AccessType::Mount(_))) {
        return bad_arg(ctx, "paths-gone takes a mount capability (`${mount_capability}`)".into());
    }
    let node = match node_id(ctx) {
        Ok(id) => id,
        Err(outcome) => return outcome,
    };
    let inspector = match reachable(ctx) {
        Ok(i) => i,
        Err(why) => return CheckOutcome::Skip(why),
    };
    let OnNode { volume, controller_published, staged, .. } =
        match publish_on_node(ctx, &node, "gone", (&capability, &typed)).await {
            Ok(on) => on,
            Err(outcome) => return outcome,
        };
    let (staging, target) = (ctx.paths().staging.clone(), ctx.paths().target.clone());

    // The node reboots: the mounts go, and the paths with them; the plugin's record stays.
    let mut gone = vec![Gone::new("target", &inspector, &target)];
    if staged {
        gone.push(Gone::new("staging", &inspector, &staging));
    }
    if let Err(why) = take_away(ctx, &inspector, &gone) {
        return CheckOutcome::Skip(why);
    }
    if let Err(why) = confirm_gone(ctx, &inspector, &mut gone).await {
        return CheckOutcome::Skip(why);
    }

    // Each call for a path that is gone must answer OK; each refusal is a finding of its own.
    let unpublish = proto::to_dynamic(&v1::NodeUnpublishVolumeRequest {
        volume_id: volume.id.clone(),
        target_path: target.display().to_string(),
    });
    if let Err(outcome) = undo_on_gone(ctx, &volume, ("NodeUnpublishVolume", unpublish), &gone[0], UNPUBLISH_IDEMPOTENT).await {
        return outcome;
    }
    if staged {
        let unstage = proto::to_dynamic(&v1::NodeUnstageVolumeRequest {
            volume_id: volume.id.clone(),
            staging_target_path: staging.display().to_string(),
        });
        if let Err(outcome) = undo_on_gone(ctx, &volume, ("NodeUnstageVolume", unstage), &gone[1], UNSTAGE_IDEMPOTENT).await {
            return outcome;
        }
    }
    ctx.reached(crate::orchestrator::ids::LOST_NODE_PATHS);
    if controller_published && let Err(outcome) = controller_unpublish(ctx, &volume, &node).await {
        return outcome;
    }
    if let Err(outcome) = delete(ctx, &volume.id).await {
        return outcome;
    }
    CheckOutcome::Done(BTreeMap::new())
}

/// Node 0's inspector, when the run can both see whether the scenario's paths are mount points
/// and reach them as files on this host; why not otherwise. Paths made by the operator's path
/// commands are theirs to remove, not this check's.
fn reachable(ctx: &ScenarioCtx) -> Result<Inspector, String> {
    let settings = ctx.path_settings();
    if settings.create_mount_cmd.is_some() || settings.create_staging_cmd.is_some() {
        return Err(
            "the scenario's paths are made by --create-mount-path-cmd / --create-staging-path-cmd where the node sees them; \
             this check removes only paths it made itself on this host"
                .into(),
        );
    }
    let Some(inspector) = ctx.inspector(0) else { return Err("the run has no node endpoint".into()) };
    if let Some(why) = inspector.unreachable() {
        return Err(format!("the node's paths cannot be reached: {why}"));
    }
    if let Some(why) = inspector.mounts_skipped() {
        return Err(format!("whether the target and staging paths are mount points cannot be seen: {why}"));
    }
    if inspector.local_path(&ctx.paths().target).is_none() {
        return Err("the node's paths are not files on this host (a node agent's node), so the run cannot remove them".into());
    }
    Ok(inspector)
}

/// Why the run may not unmount what the plugin mounted, if it may not: it must have
/// CAP_SYS_ADMIN and share the plugin's mount namespace (an unmount elsewhere would not reach
/// the plugin's mount).
fn may_not_unmount(inspector: &Inspector) -> Option<String> {
    let site = inspector.site();
    if !site.shared {
        let pid = site.pid.map_or_else(|| "the plugin".to_owned(), |p| format!("the plugin (pid {p})"));
        let ns = site.namespace.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
        return Some(format!("{pid} mounts in a mount namespace of its own{ns}, where this run cannot unmount"));
    }
    (!crate::mounts::has_cap_sys_admin()).then(|| "this run lacks CAP_SYS_ADMIN, which unmounting needs".to_owned())
}

/// The reboot: unmounts what is mounted at each path (target first: it may be a bind of the
/// staging mount) and removes the path. Why it could not, if so (the scenario then skips: the
/// run's own shortcoming, no verdict).
fn take_away(ctx: &mut ScenarioCtx, inspector: &Inspector, gone: &[Gone]) -> Result<(), String> {
    let mut done = Vec::new();
    for g in gone {
        let Some(mounted) = mounts_at(ctx, &g.path) else {
            return Err(format!("whether the {} path {} is a mount point is not known", g.what, g.path.display()));
        };
        if mounted > 0 {
            if let Some(why) = may_not_unmount(inspector) {
                return Err(format!("the {} path {} is a mount point, and {why}", g.what, g.path.display()));
            }
            crate::mounts::unmount(&g.local).map_err(|e| format!("the run could not unmount {}: {e}", g.path.display()))?;
        }
        remove_own_path(&g.local);
        done.push(if mounted > 0 { format!("unmounted and removed the {} path", g.what) } else { format!("removed the {} path", g.what) });
    }
    note(ctx, format!("the node's reboot: the run {}", done.join(", ")));
    Ok(())
}

/// Both witnesses say each path is gone: the path itself (nothing there) and the mount table
/// (nothing mounted there), their observations kept with it; why not otherwise (the run failed
/// to take it away: no verdict).
async fn confirm_gone(ctx: &mut ScenarioCtx, inspector: &Inspector, gone: &mut [Gone]) -> Result<(), String> {
    for g in gone {
        let kind = inspector.kind(&g.path).await.map_err(|e| e.to_string())?;
        let shown = g.path.display().to_string();
        if kind != Some(PathKind::NotFound) {
            let is = kind.map_or("cannot be seen", |k| k.as_str());
            return Err(format!("the {} path {shown} is still there ({is}) after the run removed it", g.what));
        }
        if mounts_at(ctx, &g.path) != Some(0) {
            return Err(format!("the node's mount table does not confirm that nothing is mounted at {shown}"));
        }
        g.evidence = vec![
            ctx.witnesses().observe("stat", &shown, "does not exist"),
            ctx.witnesses().observe("mount table", &shown, "lists nothing mounted there"),
        ];
    }
    Ok(())
}

/// Sends `request` (NodeUnpublishVolume or NodeUnstageVolume) for the path `gone` took away,
/// which must answer OK (`requirement`). A refusal is a failure; the path is then made again as
/// an empty directory, as an operator unsticks the node, and the call asked again, so that the
/// volume still comes down: refused again, the scenario stops (teardown and the journal hold
/// the volume). An unreachable plugin, or UNIMPLEMENTED from an advertised RPC, ends the
/// scenario as every check's calls do.
async fn undo_on_gone(
    ctx: &mut ScenarioCtx,
    volume: &Volume,
    (rpc, request): (&str, DynamicMessage),
    gone: &Gone,
    requirement: &'static str,
) -> Result<(), CheckOutcome> {
    let Err(error) = ctx.call(rpc, request.clone(), Some(0)).await else { return Ok(()) };
    if error.is_unreachable() || ctx.advertised_but_unimplemented(rpc, error.code).is_some() {
        return Err(ctx.call_failed(&error, &request, "OK"));
    }
    if let Err(e) = std::fs::create_dir_all(&gone.local) {
        tracing::warn!(path = %gone.path.display(), "could not make the path again: {e}");
    }
    let again = match ctx.call(rpc, request.clone(), Some(0)).await {
        Ok(_) => None,
        Err(e) if e.is_unreachable() => return Err(ctx.call_failed(&e, &request, "OK")),
        Err(e) => Some(e),
    };
    let stuck = again.is_some();
    let f = refusal(volume, Refusal { error, request, requirement, again }, gone);
    ctx.push(f);
    if stuck { Err(CheckOutcome::Stop) } else { Ok(()) }
}

/// The finding of a call refused for a path that is gone: the rule it breaks, what the plugin
/// answered (and answered once the path was made again), and what a CO does then.
fn refusal(volume: &Volume, r: Refusal, gone: &Gone) -> Finding {
    let rpc = r.error.rpc.clone();
    let plugin = if r.error.message.is_empty() { String::new() } else { format!(" ({:?})", r.error.message) };
    let rule = if r.requirement == UNSTAGE_IDEMPOTENT {
        "\"If the volume corresponding to the volume_id is not staged to the staging_target_path, the Plugin MUST reply \
         0 OK\" (#nodeunstagevolume): a NodeUnstageVolume that unmounted the staging path and crashed leaves this state, \
         and the CO must see NodeUnstageVolume succeed before it calls ControllerUnpublishVolume"
    } else {
        "\"This operation MUST be idempotent\" (#nodeunpublishvolume), and \"a retried call with the same fields continues \
         where it left off\" (#timeouts): a NodeUnpublishVolume that unmounted and removed the target and crashed leaves \
         this state, and its retry must finish"
    };
    let again = match &r.again {
        None => "It answered OK once the path was made again as an empty directory, as an operator unsticks a node".to_owned(),
        Some(e) => format!("Made again as an empty directory, the path still got {}", e.code_name()),
    };
    let message = format!(
        "{rpc} answered {}{plugin} for volume {}'s {} path, which a node reboot took away with its mount while no call had \
         undone the {} (the path and the mount table both show it gone): {rule}. {again}. Refused, a CO is stuck: \
         Kubernetes and Swarm retry for ever and never send ControllerUnpublishVolume, so the volume stays attached to the \
         node (Nomad takes NOT_FOUND as done; see the lost-node.node-paths-gone row of --orchestrator)",
        r.error.code_name(),
        volume.id,
        gone.what,
        if gone.what == "staging" { "staging" } else { "publication" },
    );
    let mut f = rpc_error_finding(&r.error, &r.request, Severity::Fail, KIND, message, Some("OK".into()));
    f.requirements = vec![r.requirement.to_owned()];
    f.evidence = gone.evidence.clone();
    f
}
