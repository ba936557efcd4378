//! The `attach-limit` check: publishes node 0's `max_volumes_per_node` of its own volumes to
//! it, then one more, which must fail. It fills the node on purpose, so it runs alone.

use std::collections::BTreeMap;

use super::{
    Check, CheckDef, CheckFuture,
    support::{OwnCapability, capability_arg, create_volume},
};
use crate::{
    proto::{self, v1},
    report::Severity,
    suite::{
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg, call_finding},
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<AttachLimit>()];

struct AttachLimit;

impl Check for AttachLimit {
    type Args = OwnCapability;
    const NAME: &'static str = "attach-limit";
    const DESCRIPTION: &'static str = "publishes max_volumes_per_node of its own volumes to node 0, then one more, which must fail";
    const RPCS: &'static [&'static str] = &["CreateVolume", "ControllerPublishVolume"];

    /// Node 0's `max_volumes_per_node` + 1 volumes, alone (its publications fill the node on
    /// purpose, so they are not budgeted).
    fn demand(_: &OwnCapability, u: &CheckUse<'_>) -> CheckDemand {
        let max = u.max_volumes_per_node;
        let volumes = if (1..=ATTACH_LIMIT_MAX).contains(&max) { max as u32 + 1 } else { 0 };
        CheckDemand { volumes, alone: true, ..CheckDemand::default() }
    }

    fn cost(_: &OwnCapability, u: &CheckUse<'_>) -> u64 {
        2 * u.max_volumes_per_node.clamp(0, ATTACH_LIMIT_MAX) as u64 + 4
    }

    fn run(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckFuture<'_> {
        Box::pin(attach_limit(ctx, args))
    }
}

/// The most volumes the attach-limit check creates.
const ATTACH_LIMIT_MAX: i64 = 256;

async fn attach_limit(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckOutcome {
    let Some(node) = ctx.fingerprint().nodes.first().cloned() else {
        return CheckOutcome::Skip("the run has no node endpoint to learn the attach limit from".into());
    };
    let max = node.max_volumes_per_node;
    if max <= 0 {
        return CheckOutcome::Skip(
            "node 0 reports no max_volumes_per_node, so there is no attach limit to test".into(),
        );
    }
    if max > ATTACH_LIMIT_MAX {
        return CheckOutcome::Skip(format!(
            "node 0 reports max_volumes_per_node {max}; csi-conform tests limits up to {ATTACH_LIMIT_MAX}"
        ));
    }
    let capability = match capability_arg(ctx, &args.0) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, e),
    };
    for i in 0..=max {
        let volume_id = match create_volume(ctx, &format!("attach-{i}"), &capability).await {
            Ok(id) => id,
            Err(o) => return o,
        };
        let mut request = proto::to_dynamic(&v1::ControllerPublishVolumeRequest {
            volume_id: volume_id.clone(),
            node_id: node.node_id.clone(),
            ..Default::default()
        });
        request.set_field_by_name("volume_capability", prost_reflect::Value::Message(capability.clone()));
        let answer = ctx.call("ControllerPublishVolume", request.clone(), None).await;
        match (i < max, answer) {
            (true, Ok(_)) | (false, Err(_)) => {}
            (true, Err(e)) => return ctx.call_failed(&e, &request, "OK"),
            (false, Ok(answer)) => {
                let message = format!(
                    "ControllerPublishVolume of volume {} to node {} succeeded, but the node reports max_volumes_per_node {max}; it returned {}",
                    max + 1,
                    node.node_id,
                    proto::summary(&answer, proto::SUMMARY_MAX)
                );
                let mut f = call_finding(Severity::Fail, "attach-limit", message, "ControllerPublishVolume", &request);
                (f.expected, f.got) = (Some("an error".into()), Some("OK".into()));
                ctx.push(f);
            }
        }
    }
    CheckOutcome::Done(BTreeMap::new())
}
