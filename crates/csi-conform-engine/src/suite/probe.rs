//! What a run finds out about the plugin once, before its scenarios start ([`RunFacts`]):
//! the smallest volume it serves (GetCapacity's `minimum_volume_size`, else what it makes of
//! a 1 MiB request, stepping up toward `--test-volume-size` while it refuses small sizes;
//! never below 1 MiB, which the data checks' markers and a file system need),
//! and the ids of a volume, snapshot and group snapshot it created and deleted, so that
//! NOT_FOUND scenarios send ids in the plugin's own format. Everything it creates is
//! journaled and torn down like a scenario's.

use std::sync::Arc;

use prost_reflect::DynamicMessage;
use tonic::Code;

use super::{
    budget::human_bytes,
    builtin_vars,
    ctx::{ScenarioCtx, Shared},
    model::{Action, Scenario},
    settings::{AccessType, RunFacts},
};
use crate::{
    client::RpcError,
    fingerprint::Capability,
    proto::{self, v1},
};

/// The id the probe's work is journaled under.
pub(crate) const PROBE_ID: &str = "csi-conform.probe";

const MIB: i64 = 1 << 20;

/// The sizes asked for, smallest first, while the plugin refuses smaller ones; the test
/// volume size ends the ladder.
const LADDER: [i64; 4] = [MIB, 16 * MIB, 256 * MIB, 1 << 30];

/// Finds the run's [`RunFacts`], making and deleting at most one volume, one snapshot and
/// one group snapshot. Never fails: what it cannot learn stays unset (and scenarios fall back
/// to the test volume size and made-up ids).
pub(crate) async fn probe(shared: &Arc<Shared>) -> RunFacts {
    let mut ctx = ScenarioCtx::for_run(shared.clone(), PROBE_ID);
    let facts = learn(&mut ctx).await;
    ctx.teardown().await;
    for f in ctx.findings() {
        tracing::warn!("probe: {}", shared.scrub(&f.message));
    }
    tracing::info!(?facts, "what the run learned of the plugin");
    facts
}

/// Whether `scenario` uses what the probe finds: a request that names a built-in it sets
/// (`${small_...}`, `${unknown_...}`), or a named check or property that creates volumes
/// (they create the small size).
pub(crate) fn needs_facts(scenario: &Scenario) -> bool {
    fn mentions(node: &crate::yaml::Node) -> bool {
        if let Some(text) = node.scalar_text() {
            return text.contains("${small_") || text.contains("${unknown_");
        }
        node.as_map().is_some_and(|m| m.iter().any(|(k, v)| mentions(k) || mentions(v)))
            || node.as_seq().is_some_and(|s| s.iter().any(mentions))
    }
    scenario.steps.iter().any(|step| match &step.action {
        Action::Call(call) => call.request.node().is_some_and(mentions),
        Action::Check(check) => check.check.rpcs.contains(&"CreateVolume"),
        Action::Property(p) => p.property.rpcs.contains(&"CreateVolume"),
        Action::Assert(_) => false,
    })
}

fn can(ctx: &ScenarioCtx, rpc: &str) -> bool {
    Capability::serving(rpc).is_some_and(|c| ctx.fingerprint().supports(c))
}

async fn learn(ctx: &mut ScenarioCtx) -> RunFacts {
    let mut facts = RunFacts::default();
    let requests = ctx.requests().clone();
    let test = requests.volume_size;
    let capability = builtin_vars::wire_capability(requests.access_type == AccessType::Block);
    // A plugin that serves 1-byte volumes serves 1 MiB ones: the data checks need the room.
    let minimum = if can(ctx, "GetCapacity") { minimum_size(ctx, &capability).await } else { None }.map(|m| m.max(MIB));
    if !can(ctx, "CreateVolume") || ctx.controller().is_none() {
        facts.small = minimum.map(|m| {
            let m = m.min(test);
            (m, format!("{}: GetCapacity's minimum_volume_size, at least 1 MiB", human_bytes(m)))
        });
        return facts;
    }
    let ladder: Vec<i64> = match minimum {
        Some(m) => vec![m.min(test)],
        None => LADDER.iter().copied().filter(|&s| s < test).chain([test]).collect(),
    };
    let mut volume_id = None;
    let mut refused: Vec<String> = Vec::new();
    for (step, &size) in ladder.iter().enumerate() {
        let request = v1::CreateVolumeRequest {
            name: format!("{}-{step}", ctx.name()),
            capacity_range: Some(v1::CapacityRange { required_bytes: size, limit_bytes: 0 }),
            volume_capabilities: vec![capability.clone()],
            parameters: requests.parameters.as_ref().clone().into_iter().collect(),
            ..Default::default()
        };
        match ctx.call("CreateVolume", proto::to_dynamic(&request), None).await {
            Ok(answer) => {
                let volume = answer.transcode_to::<v1::CreateVolumeResponse>().ok().and_then(|r| r.volume);
                let (id, capacity) = volume.map_or((String::new(), 0), |v| (v.volume_id, v.capacity_bytes));
                // A plugin that reports less than asked (or nothing) still got `size` asked.
                let served = capacity.max(size);
                let how = match (minimum, capacity > size) {
                    (Some(_), _) => "GetCapacity's minimum_volume_size, at least 1 MiB".to_owned(),
                    (None, true) => format!("what the plugin made of a request for {}", human_bytes(size)),
                    (None, false) => format!("the plugin serves {} as asked", human_bytes(size)),
                };
                let refusals =
                    if refused.is_empty() { String::new() } else { format!("; it refused {}", refused.join(", ")) };
                facts.small = Some((served, format!("{}: {how}{refusals}", human_bytes(served))));
                volume_id = Some(id).filter(|id| !id.is_empty());
                break;
            }
            Err(e) if refuses_size(&e) => refused.push(format!("{} ({})", human_bytes(size), e.code_name())),
            Err(e) => {
                tracing::info!(
                    "probe: CreateVolume of {} answered {}: {}; scenarios use the test volume size",
                    human_bytes(size),
                    e.code_name(),
                    e.message
                );
                break;
            }
        }
    }
    let Some(volume_id) = volume_id else { return facts };
    if can(ctx, "CreateSnapshot") {
        facts.gone_snapshot_id = gone_snapshot(ctx, &volume_id).await;
    }
    if can(ctx, "CreateVolumeGroupSnapshot") {
        facts.gone_group_snapshot_id = gone_group_snapshot(ctx, &volume_id).await;
    }
    let delete = v1::DeleteVolumeRequest { volume_id: volume_id.clone(), ..Default::default() };
    facts.gone_volume_id = deleted(ctx, "DeleteVolume", proto::to_dynamic(&delete), volume_id).await;
    facts
}

/// GetCapacity's `minimum_volume_size` for the run's parameters and capability, if it
/// reports one (above 0).
async fn minimum_size(ctx: &mut ScenarioCtx, capability: &v1::VolumeCapability) -> Option<i64> {
    let request = v1::GetCapacityRequest {
        volume_capabilities: vec![capability.clone()],
        parameters: ctx.requests().parameters.as_ref().clone().into_iter().collect(),
        ..Default::default()
    };
    let answer = ctx.call("GetCapacity", proto::to_dynamic(&request), None).await.ok()?;
    let reply = answer.transcode_to::<v1::GetCapacityResponse>().ok()?;
    reply.minimum_volume_size.filter(|&m| m > 0)
}

/// Whether a CreateVolume answer refuses the size: OUT_OF_RANGE, or INVALID_ARGUMENT whose
/// message is about the size.
pub(crate) fn refuses_size(e: &RpcError) -> bool {
    let message = e.message.to_ascii_lowercase();
    e.code == Code::OutOfRange
        || e.code == Code::InvalidArgument
            && ["size", "capacity", "bytes", "small", "minimum"].iter().any(|w| message.contains(w))
}

async fn gone_snapshot(ctx: &mut ScenarioCtx, volume_id: &str) -> Option<String> {
    let request = v1::CreateSnapshotRequest {
        source_volume_id: volume_id.to_owned(),
        name: format!("{}-snapshot", ctx.name()),
        parameters: ctx.requests().snapshot_parameters.as_ref().clone().into_iter().collect(),
        ..Default::default()
    };
    let answer = ctx.call("CreateSnapshot", proto::to_dynamic(&request), None).await.ok()?;
    let id = answer.transcode_to::<v1::CreateSnapshotResponse>().ok()?.snapshot?.snapshot_id;
    let delete = v1::DeleteSnapshotRequest { snapshot_id: id.clone(), ..Default::default() };
    deleted(ctx, "DeleteSnapshot", proto::to_dynamic(&delete), id).await
}

async fn gone_group_snapshot(ctx: &mut ScenarioCtx, volume_id: &str) -> Option<String> {
    let request = v1::CreateVolumeGroupSnapshotRequest {
        name: format!("{}-group", ctx.name()),
        source_volume_ids: vec![volume_id.to_owned()],
        parameters: ctx.requests().snapshot_parameters.as_ref().clone().into_iter().collect(),
        ..Default::default()
    };
    let answer = ctx.call("CreateVolumeGroupSnapshot", proto::to_dynamic(&request), None).await.ok()?;
    let group = answer.transcode_to::<v1::CreateVolumeGroupSnapshotResponse>().ok()?.group_snapshot?;
    let delete = v1::DeleteVolumeGroupSnapshotRequest {
        group_snapshot_id: group.group_snapshot_id.clone(),
        snapshot_ids: group.snapshots.iter().map(|s| s.snapshot_id.clone()).collect(),
        ..Default::default()
    };
    deleted(ctx, "DeleteVolumeGroupSnapshot", proto::to_dynamic(&delete), group.group_snapshot_id).await
}

/// The id of what `request` deletes, if it is gone: the delete answered OK and the plugin
/// did not keep it (an id it still shows is no id of a deleted object).
async fn deleted(ctx: &mut ScenarioCtx, rpc: &str, request: DynamicMessage, id: String) -> Option<String> {
    ctx.call(rpc, request, None).await.ok()?;
    Some(id).filter(|id| !id.is_empty() && !ctx.kept().contains(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ErrorOrigin;

    fn error(code: Code, message: &str) -> RpcError {
        RpcError {
            rpc: "CreateVolume".into(),
            code,
            message: message.into(),
            elapsed: std::time::Duration::ZERO,
            origin: ErrorOrigin::Plugin,
        }
    }

    #[test]
    fn a_refused_size_is_out_of_range_or_an_invalid_argument_about_the_size() {
        assert!(refuses_size(&error(Code::OutOfRange, "")));
        assert!(refuses_size(&error(Code::InvalidArgument, "requested capacity 1048576 is below the minimum")));
        assert!(!refuses_size(&error(Code::InvalidArgument, "parameter foo is unknown")));
        assert!(!refuses_size(&error(Code::Internal, "size")));
        assert_eq!(human_bytes(MIB), "1 MiB");
        assert_eq!(human_bytes(10 << 30), "10 GiB");
    }
}
