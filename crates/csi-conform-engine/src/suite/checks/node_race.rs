//! The `node-race` check: the same NodeStageVolume, then the same NodePublishVolume, sent
//! `--stress-calls` times at once on node 0 (a CO that lost its state; nomad#15197). Each
//! copy must answer OK or ABORTED (ABORTED is asked again once the others are done, see
//! `inflight`), one mount must result at each path, and unpublish and unstage must leave
//! nothing mounted.

use std::{collections::BTreeMap, path::Path};

use prost_reflect::DynamicMessage;

use super::{
    Check, CheckDef, CheckFuture,
    stress_support::{
        ONE_VOLUME_ON_NODE, Volume, controller_has, controller_publish, controller_unpublish, create, delete, left_mounted, mounts_at, node_has,
        node_id, note, publish_request, stage_request, typed_capability, unpublish, unstage,
    },
    support::{OwnCapability, capability_arg},
};
use crate::{
    client::RpcError,
    fingerprint::{ControllerCapability, NodeCapability},
    report::{Finding, Severity},
    suite::{
        answer::rpc_error_finding,
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<NodeRace>()];

struct NodeRace;

impl Check for NodeRace {
    type Args = OwnCapability;
    const NAME: &'static str = "node-race";
    const DESCRIPTION: &'static str = "sends the same NodeStageVolume, then the same NodePublishVolume, --stress-calls times at once on node 0: OK or ABORTED each, one mount at each path, and nothing left mounted after unpublish and unstage";
    const RPCS: &'static [&'static str] = ONE_VOLUME_ON_NODE;

    fn demand(_: &OwnCapability, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { volumes: 1, publish: vec![1], ..CheckDemand::default() }
    }

    fn cost(_: &OwnCapability, _: &CheckUse<'_>) -> u64 {
        12
    }

    fn run(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckFuture<'_> {
        Box::pin(node_race(ctx, args))
    }
}

/// Requirement: calls racing on one volume are handled gracefully (ABORTED allowed).
const GRACEFUL: &str = "General.concurrency.graceful";

/// Sends `request` to node 0 `calls` times at once; the errors of the copies that failed.
async fn at_once(ctx: &mut ScenarioCtx, rpc: &str, request: &DynamicMessage, calls: usize) -> Vec<RpcError> {
    let mut forks: Vec<ScenarioCtx> = (0..calls).map(|_| ctx.fork()).collect();
    let answers = futures_util::future::join_all(forks.iter_mut().map(|fork| {
        let request = request.clone();
        async move { fork.call(rpc, request, Some(0)).await }
    }))
    .await;
    for fork in forks {
        ctx.absorb(fork);
    }
    answers.into_iter().filter_map(Result::err).collect()
}

/// Judges the copies of `rpc` that failed under the race: the same call alone must answer OK
/// (else that is the failure); a refusal other than ABORTED then warns.
async fn judge(
    ctx: &mut ScenarioCtx,
    rpc: &str,
    request: &DynamicMessage,
    calls: usize,
    failed: Vec<RpcError>,
) -> Result<(), CheckOutcome> {
    let Some(first) = failed.iter().find(|e| e.code != tonic::Code::Aborted).or(failed.first()).cloned() else {
        return Ok(());
    };
    if let Err(e) = ctx.call(rpc, request.clone(), Some(0)).await {
        return Err(ctx.call_failed(&e, request, "OK (the same request, alone, after the race)"));
    }
    if first.code == tonic::Code::Aborted {
        note(ctx, format!("{} of {calls} identical {rpc} calls sent at once answered ABORTED: lawful (#concurrency)", failed.len()));
        return Ok(());
    }
    let message = format!(
        "{} of {calls} identical {rpc} calls sent at once answered {} (the same request alone answers OK): a call racing \
         another on the same volume should be handled gracefully, ABORTED being the code the spec allows for it \
         (#concurrency)",
        failed.len(),
        first.code_name()
    );
    let mut f = rpc_error_finding(&first, request, Severity::Warn, "race-refused", message, Some("OK or ABORTED".into()));
    f.requirements = vec![GRACEFUL.to_owned()];
    ctx.push(f);
    Ok(())
}

/// More than one mount stacked at `path` after the race: warned (the calls were not handled
/// gracefully); what unpublish or unstage leaves behind is judged by [`left_mounted`].
fn stacked(ctx: &mut ScenarioCtx, rpc: &str, path: &Path, calls: usize) {
    if let Some(n) = mounts_at(ctx, path).filter(|&n| n > 1) {
        let mut f = Finding::new(
            Severity::Warn,
            "stacked-mounts",
            format!(
                "after {calls} identical {rpc} calls sent at once, {n} mounts are stacked at {}: the calls raced inside the \
                 plugin, which should handle them gracefully (#concurrency)",
                path.display()
            ),
        );
        f.rpc = Some(rpc.to_owned());
        f.requirements = vec![GRACEFUL.to_owned()];
        ctx.push(f);
    }
}

async fn node_race(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckOutcome {
    let capability = match capability_arg(ctx, &args.0) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, e),
    };
    let Some(typed) = typed_capability(&capability) else { return bad_arg(ctx, "argument capability does not decode".into()) };
    let node = match node_id(ctx) {
        Ok(id) => id,
        Err(outcome) => return outcome,
    };
    let calls = ctx.stress().calls.max(2) as usize;
    let volume: Volume = match create(ctx, "node", &capability).await {
        Ok(v) => v,
        Err(outcome) => return outcome,
    };
    let publishes = controller_has(ctx, ControllerCapability::PublishUnpublishVolume);
    let publish_context = if publishes {
        match controller_publish(ctx, &volume, &node, &typed).await {
            Ok(c) => c,
            Err((e, request)) => return ctx.call_failed(&e, &request, "OK"),
        }
    } else {
        Default::default()
    };
    let (staging, target) = (ctx.paths().staging.clone(), ctx.paths().target.clone());
    let stages = node_has(ctx, NodeCapability::StageUnstageVolume);
    if mounts_at(ctx, &target).is_none() {
        note(ctx, "node 0's mount table cannot be read here: the mounts at the staging and target paths are not counted".into());
    }
    if stages {
        let request = stage_request(&volume, &publish_context, &staging, &typed);
        let failed = at_once(ctx, "NodeStageVolume", &request, calls).await;
        if let Err(outcome) = judge(ctx, "NodeStageVolume", &request, calls, failed).await {
            return outcome;
        }
        stacked(ctx, "NodeStageVolume", &staging, calls);
    }
    let request = publish_request(&volume, &publish_context, stages.then_some(staging.as_path()), &target, &typed);
    let failed = at_once(ctx, "NodePublishVolume", &request, calls).await;
    if let Err(outcome) = judge(ctx, "NodePublishVolume", &request, calls, failed).await {
        return outcome;
    }
    stacked(ctx, "NodePublishVolume", &target, calls);
    if let Err(outcome) = unpublish(ctx, &volume, &target).await {
        return outcome;
    }
    // What stays mounted would be left behind for good: stop here, teardown says what is left.
    if left_mounted(ctx, "NodeUnpublishVolume", &target, "NodeUnpublishVolume.undoes-publish") {
        return CheckOutcome::Stop;
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
