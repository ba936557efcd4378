//! The `restart-published` check: a volume of its own staged and published on node 0 with a
//! data marker in it, then the node plugin restarted (`--allow-restart-cmd`, also spelled
//! `--restart-node-cmd`; in-process for the bundled plugin), as an orchestrator meets it when a node plugin is upgraded or
//! crashes (nomad#13028, nomad#25813; the kubelet reconstructs its mounts after a restart).
//! The publication must still be there (the mount, and the marker read back), and the volume
//! must still be unpublished, published again (a workload started again), unstaged with
//! nothing left mounted, unpublished from the node and deleted. The time the plugin took to
//! answer Probe ready is reported.

use std::collections::BTreeMap;

use prost_reflect::DynamicMessage;

use super::{
    Check, CheckDef, CheckFuture,
    node_restart::restart_node,
    stress_support::{
        OnNode, controller_unpublish, delete, left_mounted, mounts_at, node_id, note, publish_on_node, typed_capability,
        unpublish, unstage,
    },
    support::{OwnCapability, capability_arg},
};
use crate::{
    report::{Finding, Severity},
    suite::{
        answer::rpc_error_finding,
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
        marker::{self, Marker, Placement},
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<RestartPublished>()];

struct RestartPublished;

impl Check for RestartPublished {
    type Args = OwnCapability;
    const NAME: &'static str = "restart-published";
    const DESCRIPTION: &'static str = "stages and publishes a volume of its own on node 0 with a data marker, restarts the node plugin (--allow-restart-cmd, or in-process for the bundled plugin) and waits for Probe ready (reported): the mount and the marker must still be there, and unpublish, publish again, unstage (nothing left mounted), controller unpublish and delete must work";
    const RPCS: &'static [&'static str] = &[
        "CreateVolume",
        "ControllerPublishVolume",
        "NodeStageVolume",
        "NodePublishVolume",
        "NodeUnpublishVolume",
        "NodeUnstageVolume",
        "ControllerUnpublishVolume",
        "DeleteVolume",
        "Probe",
    ];

    fn demand(_: &OwnCapability, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { volumes: 1, publish: vec![1], ..CheckDemand::default() }
    }

    fn cost(_: &OwnCapability, _: &CheckUse<'_>) -> u64 {
        14
    }

    fn run(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckFuture<'_> {
        Box::pin(restart_published(ctx, args))
    }
}

/// Requirement: with STAGE_UNSTAGE_VOLUME, a volume staged on the node is published from its
/// staging path.
const STAGED_PUBLISHES: &str = "NodeStageVolume.stage-before-publish";
/// Requirement: a mount volume is mounted at the target path.
const AT_TARGET: &str = "NodePublishVolume.mount.at-target";

/// A call after the restart that must answer OK: a refusal fails, naming `requirement` and
/// saying that the plugin lost what it did before the restart.
async fn after_restart(
    ctx: &mut ScenarioCtx,
    rpc: &str,
    request: DynamicMessage,
    requirement: &str,
) -> Result<(), CheckOutcome> {
    let Err(e) = ctx.call(rpc, request.clone(), Some(0)).await else { return Ok(()) };
    if e.is_unreachable() || ctx.advertised_but_unimplemented(rpc, e.code).is_some() {
        return Err(ctx.call_failed(&e, &request, "OK"));
    }
    let message = format!(
        "{rpc} answered {} after the node plugin was restarted, for a volume it had staged and published before the \
         restart and that nothing has undone since: a restarted node plugin must go on serving what it staged (the CO \
         cannot stage again what is staged; nomad#13028, nomad#25813)",
        e.code_name()
    );
    let mut f = rpc_error_finding(&e, &request, Severity::Fail, "restart-lost-state", message, Some("OK".into()));
    f.requirements = vec![requirement.to_owned()];
    ctx.push(f);
    Err(CheckOutcome::Stop)
}

async fn restart_published(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckOutcome {
    let capability = match capability_arg(ctx, &args.0) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, e),
    };
    let Some(typed) = typed_capability(&capability) else { return bad_arg(ctx, "argument capability does not decode".into()) };
    let node = match node_id(ctx) {
        Ok(id) => id,
        Err(outcome) => return outcome,
    };
    let block = matches!(typed.access_type, Some(crate::proto::v1::volume_capability::AccessType::Block(_)));
    let OnNode { volume, controller_published: publishes, staged: stages, publish } =
        match publish_on_node(ctx, &node, "restart", (&capability, &typed)).await {
            Ok(on) => on,
            Err(outcome) => return outcome,
        };
    let (staging, target) = (ctx.paths().staging.clone(), ctx.paths().target.clone());
    // What was there before the restart: the mounts, and a marker in the volume.
    let mounted_before = mounts_at(ctx, &target);
    let local = ctx.inspector(0).and_then(|n| n.local_path(&target));
    let marker = Marker::new(ctx.seed(), ctx.name(), "before-restart");
    let written: Option<Placement> = local.as_ref().and_then(|l| marker::write(l, block, &marker, None).ok());

    match restart_node(ctx, 0, &node).await {
        Ok(restarted) => note(ctx, restarted.note("node")),
        Err(outcome) => return outcome,
    }

    // Still published? Two witnesses: the node's mount table and the marker read back.
    let mount_gone = matches!((mounted_before, mounts_at(ctx, &target)), (Some(b), Some(0)) if b > 0);
    let marker_gone = match (&local, &written) {
        (Some(l), Some(p)) => match marker::verify(l, p, &marker, &[]) {
            Ok(None) => Some(false),
            Ok(Some(_)) => Some(true),
            Err(_) => None,
        },
        _ => None,
    };
    let witnesses = usize::from(mounted_before.is_some()) + usize::from(marker_gone.is_some());
    let lost = usize::from(mount_gone) + usize::from(marker_gone == Some(true));
    if lost > 0 {
        // Both witnesses say it is gone, or the only one there is: a publication the plugin
        // answered OK for, that no call undid, is no longer there.
        let severity = if lost == witnesses && witnesses == 2 { Severity::Fail } else { Severity::Warn };
        let mut f = Finding::new(
            severity,
            "restart-lost-publication",
            format!(
                "after the node plugin was restarted, volume {} is no longer published at {} ({}), though no \
                 NodeUnpublishVolume was sent: the workload using it lost its data path{}",
                volume.id,
                target.display(),
                [mount_gone.then_some("nothing is mounted there any more"), (marker_gone == Some(true)).then_some("the data marker written before the restart does not read back")]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join("; "),
                if severity == Severity::Warn { " (one witness of two: a warning)" } else { "" }
            ),
        );
        f.rpc = Some("NodePublishVolume".into());
        f.requirements = vec![AT_TARGET.to_owned()];
        ctx.push(f);
    }
    if let Some(p) = &written
        && let Some(l) = &local
    {
        let _ = marker::remove(l, p);
    }
    // Taken down and used again, as the CO does when the workload restarts.
    if let Err(outcome) = unpublish(ctx, &volume, &target).await {
        return outcome;
    }
    if left_mounted(ctx, "NodeUnpublishVolume", &target, "NodeUnpublishVolume.undoes-publish") {
        return CheckOutcome::Stop;
    }
    if let Err(outcome) = after_restart(ctx, "NodePublishVolume", publish, if stages { STAGED_PUBLISHES } else { AT_TARGET }).await {
        return outcome;
    }
    ctx.reached(crate::orchestrator::ids::RESTART_NODE);
    if let Err(outcome) = unpublish(ctx, &volume, &target).await {
        return outcome;
    }
    if stages {
        if let Err(outcome) = unstage(ctx, &volume, &staging).await {
            return outcome;
        }
        if left_mounted(ctx, "NodeUnstageVolume", &staging, "NodeUnstageVolume.undoes-stage") {
            return CheckOutcome::Stop;
        }
    }
    if publishes && let Err(outcome) = controller_unpublish(ctx, &volume, &node).await {
        return outcome;
    }
    if let Err(outcome) = delete(ctx, &volume.id).await {
        return outcome;
    }
    CheckOutcome::Done(BTreeMap::new())
}
