//! What several named checks share: the capability argument, a call that must answer OK, a
//! volume of their own created with the run's size and parameters, and where it must be
//! accessible from.

use prost_reflect::DynamicMessage;

use super::{ArgReader, Args};

use crate::{
    proto::{self, v1},
    suite::{
        ctx::{CheckOutcome, ScenarioCtx},
        request::message_from_val,
        vars::{FieldPath, Seg, Val},
    },
};

/// CreateVolume's accessibility requirement for a volume used on nodes with `topologies`
/// (each node's NodeGetInfo segments): each distinct non-empty one requisite, the first one
/// preferred; `None` when no node reports one. The caller sends it only where the plugin has
/// VOLUME_ACCESSIBILITY_CONSTRAINTS.
pub(super) fn accessible_from<'a>(
    topologies: impl IntoIterator<Item = &'a std::collections::BTreeMap<String, String>>,
) -> Option<v1::TopologyRequirement> {
    let mut requisite: Vec<v1::Topology> = Vec::new();
    for segments in topologies.into_iter().filter(|t| !t.is_empty()) {
        let t = v1::Topology { segments: segments.clone().into_iter().collect() };
        if !requisite.contains(&t) {
            requisite.push(t);
        }
    }
    let preferred = vec![requisite.first()?.clone()];
    Some(v1::TopologyRequirement { requisite, preferred })
}

pub(super) fn path_of(text: &str) -> Vec<Seg> {
    FieldPath::parse(text).map(|p| p.0).unwrap_or_default()
}

/// Calls `rpc` and returns the response, or records the failure.
pub(super) async fn call_ok(
    ctx: &mut ScenarioCtx,
    rpc: &str,
    request: DynamicMessage,
    node: Option<usize>,
) -> Result<DynamicMessage, CheckOutcome> {
    match ctx.call(rpc, request.clone(), node).await {
        Ok(r) => Ok(r),
        Err(e) => Err(ctx.call_failed(&e, &request, "OK")),
    }
}

/// The arguments of a check whose only one is an optional `capability` (its volumes'; the
/// run's `${capability}` when not given): `type Args = OwnCapability;`, then
/// `capability_arg(ctx, &args.0)`.
pub(super) struct OwnCapability(pub(super) Val);

impl Args for OwnCapability {
    fn read(a: &mut ArgReader<'_>) -> Self {
        OwnCapability(a.capability("capability", false))
    }
}

/// The VolumeCapability of a `capability` argument as given (Null: the run's `${capability}`).
pub(super) fn capability_arg(ctx: &ScenarioCtx, given: &Val) -> Result<DynamicMessage, String> {
    let value = match given {
        Val::Null => ctx.var("capability").cloned().unwrap_or(Val::Null),
        v => v.clone(),
    };
    let desc = proto::message("VolumeCapability").expect("VolumeCapability is in the pool");
    message_from_val(&desc, &value).map_err(|e| format!("argument capability: {e}"))
}

pub(super) fn create_request(ctx: &ScenarioCtx, name: String, capability: &DynamicMessage) -> DynamicMessage {
    let mut request = proto::to_dynamic(&v1::CreateVolumeRequest {
        name,
        capacity_range: Some(v1::CapacityRange { required_bytes: ctx.small_size(), limit_bytes: 0 }),
        parameters: ctx.requests().parameters.as_ref().clone().into_iter().collect(),
        ..Default::default()
    });
    request.set_field_by_name(
        "volume_capabilities",
        prost_reflect::Value::List(vec![prost_reflect::Value::Message(capability.clone())]),
    );
    request
}

pub(super) async fn create_volume(
    ctx: &mut ScenarioCtx,
    suffix: &str,
    capability: &DynamicMessage,
) -> Result<String, CheckOutcome> {
    let name = format!("{}-{suffix}", ctx.name());
    let response = call_ok(ctx, "CreateVolume", create_request(ctx, name, capability), None).await?;
    match Val::from_message(&response).get(&path_of("volume.volume_id")) {
        Ok(Val::Str(id)) if !id.is_empty() => Ok(id),
        _ => {
            ctx.fail("assertion", "CreateVolume answered OK without a volume id");
            Err(CheckOutcome::Stop)
        }
    }
}
