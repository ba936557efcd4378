//! The `lifecycles` check: `--stress-workers` workers at once, each taking its share of
//! `--stress-volumes` volumes of its own through a whole lifecycle (create, controller publish,
//! stage, publish, a data marker written and read back, unpublish, unstage, controller
//! unpublish, delete), as a busy CO does; then the plugin's listing must hold no volume the
//! run was never told of. As many workers as the run's budgets hold.

use std::collections::{BTreeMap, BTreeSet};

use prost_reflect::DynamicMessage;

use super::{
    Check, CheckDef, CheckFuture,
    stress_support::{
        Volume, controller_has, controller_publish, controller_unpublish, create, delete, extra_leases, ghosts_seen_twice,
        listed_volumes, node_has, node_id, note, publish_request, stage_request, typed_capability, unpublish, unstage,
        worker,
    },
    support::{OwnCapability, call_ok, capability_arg},
};
use crate::{
    fingerprint::{ControllerCapability, NodeCapability},
    proto::v1,
    report::{Finding, Severity},
    suite::{
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
        marker::{self, Marker},
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<Lifecycles>()];

struct Lifecycles;

impl Check for Lifecycles {
    type Args = OwnCapability;
    const NAME: &'static str = "lifecycles";
    const DESCRIPTION: &'static str = "--stress-workers workers at once take --stress-volumes volumes of their own through whole lifecycles (create, publish, stage, publish, a data marker written and read back, and back); afterwards ListVolumes holds no volume no answer named";
    const RPCS: &'static [&'static str] = &[
        "CreateVolume",
        "ControllerPublishVolume",
        "NodeStageVolume",
        "NodePublishVolume",
        "NodeUnpublishVolume",
        "NodeUnstageVolume",
        "ControllerUnpublishVolume",
        "DeleteVolume",
        "ListVolumes",
        "ControllerGetVolume",
    ];

    /// One worker's volume; the other workers take further leases when it runs.
    fn demand(_: &OwnCapability, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { volumes: 1, publish: vec![1], ..CheckDemand::default() }
    }

    fn cost(_: &OwnCapability, _: &CheckUse<'_>) -> u64 {
        40
    }

    fn run(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckFuture<'_> {
        Box::pin(lifecycles(ctx, args))
    }
}

/// Requirement: calls racing are handled gracefully.
const GRACEFUL: &str = "General.concurrency.graceful";
/// Requirement: the published volume can be used as its capability says.
const USABLE: &str = "NodePublishVolume.capability.honoured";

/// What every worker needs to know.
#[derive(Clone)]
struct Plan {
    capability: DynamicMessage,
    typed: v1::VolumeCapability,
    node: String,
    controller_publishes: bool,
    stages: bool,
    block: bool,
    /// Held around each ControllerPublishVolume / ControllerUnpublishVolume: the workers send
    /// them one at a time, as Nomad does since PR #17996, so that what overlapping publishes
    /// do is `publish-race`'s finding alone, never this check's too.
    controller: std::sync::Arc<tokio::sync::Mutex<()>>,
}

async fn lifecycles(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckOutcome {
    let capability = match capability_arg(ctx, &args.0) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, e),
    };
    let Some(typed) = typed_capability(&capability) else { return bad_arg(ctx, "argument capability does not decode".into()) };
    let node = match node_id(ctx) {
        Ok(id) => id,
        Err(outcome) => return outcome,
    };
    let plan = Plan {
        block: matches!(typed.access_type, Some(v1::volume_capability::AccessType::Block(_))),
        capability,
        typed,
        node,
        controller_publishes: controller_has(ctx, ControllerCapability::PublishUnpublishVolume),
        stages: node_has(ctx, NodeCapability::StageUnstageVolume),
        controller: Default::default(),
    };
    let stress = ctx.stress();
    let volumes = stress.volumes.max(1) as usize;
    let want = stress.workers.clamp(1, stress.volumes.max(1));
    let leases = extra_leases(ctx, want - 1, true);
    let workers = 1 + leases.len();
    if workers < want as usize {
        note(ctx, format!("ran {workers} workers of the {want} asked (--stress-workers): the run's budgets hold no more volumes at once"));
    }
    let before = match listed_volumes(ctx).await {
        Ok(listed) => listed,
        Err(outcome) => return outcome,
    };
    let mut forks = Vec::new();
    for w in 0..workers {
        match worker(ctx, &format!("w{w}")) {
            Ok(mut fork) => {
                if let Some(lease) = leases.get(w.wrapping_sub(1)) {
                    fork.work_under(lease);
                }
                forks.push(fork);
            }
            Err(outcome) => return outcome,
        }
    }
    let ran = futures_util::future::join_all(forks.iter_mut().enumerate().map(|(w, fork)| {
        let plan = plan.clone();
        async move {
            let mut named = Vec::new();
            for i in (w..volumes).step_by(workers) {
                match one_lifecycle(fork, &plan, i).await {
                    Ok(id) => named.push(id),
                    Err(outcome) => return (named, Some(outcome)),
                }
            }
            (named, None)
        }
    }))
    .await;
    for fork in forks {
        ctx.absorb(fork);
    }
    drop(leases);
    let mut known = BTreeSet::new();
    let mut stopped = None;
    for (named, outcome) in ran {
        known.extend(named);
        if let Some(outcome) = outcome {
            stopped.get_or_insert(outcome);
        }
    }
    if let Some(outcome) = stopped {
        return outcome;
    }
    ghosts(ctx, before, &known, volumes, workers).await
}

/// One volume's whole lifecycle in worker `fork`; the id of its volume.
async fn one_lifecycle(ctx: &mut ScenarioCtx, plan: &Plan, i: usize) -> Result<String, CheckOutcome> {
    let volume: Volume = create(ctx, &format!("v{i}"), &plan.capability).await?;
    let publish_context = if plan.controller_publishes {
        let _one_at_a_time = plan.controller.lock().await;
        controller_publish(ctx, &volume, &plan.node, &plan.typed).await.map_err(|(e, request)| ctx.call_failed(&e, &request, "OK"))?
    } else {
        Default::default()
    };
    let (staging, target) = (ctx.paths().staging.clone(), ctx.paths().target.clone());
    if plan.stages {
        call_ok(ctx, "NodeStageVolume", stage_request(&volume, &publish_context, &staging, &plan.typed), Some(0)).await?;
    }
    let request = publish_request(&volume, &publish_context, plan.stages.then_some(staging.as_path()), &target, &plan.typed);
    call_ok(ctx, "NodePublishVolume", request, Some(0)).await?;
    round_trip(ctx, plan, &volume, &target, i);
    unpublish(ctx, &volume, &target).await?;
    if plan.stages {
        unstage(ctx, &volume, &staging).await?;
    }
    if plan.controller_publishes {
        let _one_at_a_time = plan.controller.lock().await;
        controller_unpublish(ctx, &volume, &plan.node).await?;
    }
    delete(ctx, &volume.id).await?;
    Ok(volume.id)
}

/// A data marker written into the published volume and read back at once, where node 0's
/// files are reachable from here (in its mount namespace); a marker that does not read back
/// fails, a write the node refuses is left to the data suite (no verdict here).
fn round_trip(ctx: &mut ScenarioCtx, plan: &Plan, volume: &Volume, target: &std::path::Path, i: usize) {
    let Some(local) = ctx.inspector(0).and_then(|n| n.local_path(target)) else { return };
    let marker = Marker::new(ctx.seed(), ctx.name(), &format!("stress-{i}"));
    let placement = match marker::write(&local, plan.block, &marker, None) {
        Ok(p) => p,
        Err(e) => {
            tracing::info!(volume = volume.id, "stress marker not written ({e}): no data verdict here");
            return;
        }
    };
    let mismatch = match marker::verify(&local, &placement, &marker, &[]) {
        Ok(m) => m,
        Err(e) => {
            tracing::info!(volume = volume.id, "stress marker not read back ({e}): no data verdict here");
            None
        }
    };
    if let Some((place, mismatch)) = mismatch {
        let mut f = Finding::new(
            Severity::Fail,
            "data-lost",
            format!(
                "volume {} published at {} while other volumes went through their lifecycles at once: {}",
                volume.id,
                target.display(),
                mismatch.describe(&place, &marker)
            ),
        );
        f.rpc = Some("NodePublishVolume".into());
        f.requirements = vec![USABLE.to_owned()];
        ctx.push(f);
    }
    let _ = marker::remove(&local, &placement);
}

/// Volumes listed now that were not before and that no answer named, each seen a second time
/// (ControllerGetVolume where the plugin has it, a second listing where not): warned, and
/// deleted (the scenario holds the volumes exclusively, so they came of its calls).
async fn ghosts(
    ctx: &mut ScenarioCtx,
    before: Option<Vec<String>>,
    known: &BTreeSet<String>,
    volumes: usize,
    workers: usize,
) -> CheckOutcome {
    let confirmed = match ghosts_seen_twice(ctx, before, known).await {
        Ok(confirmed) => confirmed,
        Err(outcome) => return outcome,
    };
    for ghost in confirmed {
        let mut f = Finding::new(
            Severity::Warn,
            "ghost-volume",
            format!(
                "after {volumes} volume lifecycles by {workers} workers at once, each volume deleted, the plugin holds volume \
                 {ghost}, which no answer named and which was not there before (listed, and seen again): calls running at \
                 once should be handled gracefully (#concurrency); it is deleted now"
            ),
        );
        f.rpc = Some("ListVolumes".into());
        f.requirements = vec![GRACEFUL.to_owned()];
        ctx.push(f);
        if let Err(outcome) = delete(ctx, &ghost).await {
            return outcome;
        }
    }
    CheckOutcome::Done(BTreeMap::new())
}
