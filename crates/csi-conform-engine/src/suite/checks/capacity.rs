//! The `capacity-holds` check: GetCapacity's claim weighed against the plugin's behaviour. A
//! CreateVolume of a size GetCapacity said there was room for (asked with the same
//! capability and parameters) that the plugin refuses for room, while the scenario holds the
//! run's volumes and snapshots exclusively and a second GetCapacity after the refusal still
//! claims that room, disproves the claim: one finding, on GetCapacity.

use std::collections::BTreeMap;

use prost_reflect::DynamicMessage;
use tonic::Code;

use super::{Args, ArgReader, Check, CheckDef, CheckFuture, support::create_request};
use crate::{
    client::{ErrorOrigin, RpcError},
    proto::{self, v1},
    report::{Evidence, Severity},
    suite::{
        budget,
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg, call_finding},
        request::message_from_val,
        vars::Val,
    },
};

/// The requirement a capacity the plugin cannot provision from breaks.
const REQUIREMENT: &str = "GetCapacity.arguments";

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<CapacityHolds>()];

struct CapacityHolds;

/// `capacity-holds`'s arguments.
struct Room {
    /// The capability GetCapacity is asked with and the volume created with.
    capability: Val,
    /// The volume's size in bytes (must be positive).
    size: i64,
}

impl Args for Room {
    fn read(a: &mut ArgReader<'_>) -> Self {
        Room { capability: a.capability("capability", true), size: a.req_int("size") }
    }
}

impl Check for CapacityHolds {
    type Args = Room;
    const NAME: &'static str = "capacity-holds";
    const DESCRIPTION: &'static str = "asks GetCapacity with `capability` and the run's parameters, then creates a volume of `size` bytes when the answer says it fits; a refusal for room (RESOURCE_EXHAUSTED or a no-space message; OUT_OF_RANGE within the reported minimum and maximum volume sizes) that a second GetCapacity does not explain fails GetCapacity's claim, once; a claim of no room, or another refusal, skips (hold the volumes and snapshots `exclusive`ly)";
    const RPCS: &'static [&'static str] = &["GetCapacity", "CreateVolume"];

    fn demand(_: &Room, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { volumes: 1, ..CheckDemand::default() }
    }

    fn run(ctx: &mut ScenarioCtx, args: Room) -> CheckFuture<'_> {
        Box::pin(capacity_holds(ctx, args))
    }
}

/// What one GetCapacity answer claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Claim {
    available: i64,
    minimum: Option<i64>,
    maximum: Option<i64>,
}

impl Claim {
    /// Why a volume of `size` bytes does not fit by this claim, if it does not.
    fn excludes(self, size: i64) -> Option<String> {
        if self.available < size {
            return Some(format!("available_capacity is {} bytes, below {size}", self.available));
        }
        match (self.minimum, self.maximum) {
            (Some(min), _) if min > size => Some(format!("minimum_volume_size is {min} bytes, above {size}")),
            (_, Some(max)) if max < size => Some(format!("maximum_volume_size is {max} bytes, below {size}")),
            _ => None,
        }
    }

    fn words(self) -> String {
        let mut out = format!("available_capacity={}", self.available);
        if let Some(min) = self.minimum {
            out.push_str(&format!(", minimum_volume_size={min}"));
        }
        if let Some(max) = self.maximum {
            out.push_str(&format!(", maximum_volume_size={max}"));
        }
        out
    }
}

/// Whether `refusal` of a CreateVolume of `size` refuses room (or a size) that `claim` said
/// was there: RESOURCE_EXHAUSTED or a no-space message against available_capacity; OUT_OF_RANGE
/// only where the claim gave both size bounds (without them the size may be what is refused).
fn disproves(refusal: &RpcError, claim: Claim, size: i64) -> bool {
    if refusal.origin != ErrorOrigin::Plugin || refusal.is_unreachable() || claim.excludes(size).is_some() {
        return false;
    }
    match refusal.code {
        Code::ResourceExhausted => true,
        Code::OutOfRange => claim.minimum.is_some() && claim.maximum.is_some(),
        code => budget::is_no_space(&refusal.rpc, code, &refusal.message),
    }
}

/// GetCapacity asked with `request`, and what its answer claims (noted in the ledger).
async fn ask(ctx: &mut ScenarioCtx, request: &DynamicMessage) -> Result<(Claim, Evidence), CheckOutcome> {
    let answer = match ctx.call("GetCapacity", request.clone(), None).await {
        Ok(answer) => answer,
        Err(e) => return Err(ctx.call_failed(&e, request, "OK")),
    };
    let reply = answer.transcode_to::<v1::GetCapacityResponse>().unwrap_or_default();
    let claim = Claim { available: reply.available_capacity, minimum: reply.minimum_volume_size, maximum: reply.maximum_volume_size };
    let seen = ctx.witnesses().observe("GetCapacity", "the storage", claim.words());
    Ok((claim, seen))
}

/// `capacity-holds`. The spec: `available_capacity` is "the available capacity, in bytes, of
/// the storage that can be used to provision volumes. If `volume_capabilities` or
/// `parameters` is specified, the Plugin SHALL take those into consideration when
/// calculating the available capacity of the storage" ([GetCapacity]).
///
/// [GetCapacity]: https://github.com/container-storage-interface/spec/blob/master/spec.md#getcapacity
async fn capacity_holds(ctx: &mut ScenarioCtx, args: Room) -> CheckOutcome {
    let desc = proto::message("VolumeCapability").expect("VolumeCapability is in the pool");
    let capability = match message_from_val(&desc, &args.capability) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, format!("argument capability: {e}")),
    };
    let size = match args.size {
        size if size > 0 => size,
        _ => return bad_arg(ctx, "capacity-holds needs a positive `size`".into()),
    };
    let mut question = proto::to_dynamic(&v1::GetCapacityRequest {
        parameters: ctx.requests().parameters.as_ref().clone().into_iter().collect(),
        ..Default::default()
    });
    question.set_field_by_name("volume_capabilities", prost_reflect::Value::List(vec![prost_reflect::Value::Message(capability.clone())]));
    let (before, seen_before) = match ask(ctx, &question).await {
        Ok(c) => c,
        Err(outcome) => return outcome,
    };
    if let Some(why) = before.excludes(size) {
        return CheckOutcome::Skip(format!("GetCapacity claims no room for a volume of {size} bytes ({why}): nothing to hold it to"));
    }
    let mut request = create_request(ctx, format!("{}-room", ctx.name()), &capability);
    let range = v1::CapacityRange { required_bytes: size, limit_bytes: 0 };
    request.set_field_by_name("capacity_range", prost_reflect::Value::Message(proto::to_dynamic(&range)));
    let refusal = match ctx.call("CreateVolume", request.clone(), None).await {
        // Created: the claim holds (the volume goes with the scenario's teardown).
        Ok(_) => return CheckOutcome::Done(BTreeMap::new()),
        Err(e) => e,
    };
    // Refused for room held by objects the plugin kept after deletes: that delete's finding.
    if ctx.halted() {
        return CheckOutcome::Stop;
    }
    if !disproves(&refusal, before, size) {
        return CheckOutcome::Skip(format!(
            "CreateVolume of {size} bytes answered {} ({}), which is no refusal of the room GetCapacity claimed",
            refusal.code_name(),
            refusal.message
        ));
    }
    let refused = ctx.witnesses().observe(
        "CreateVolume",
        &format!("{size} bytes"),
        format!("answered {} ({})", refusal.code_name(), refusal.message),
    );
    let (after, seen_after) = match ask(ctx, &question).await {
        Ok(c) => c,
        Err(outcome) => return outcome,
    };
    if let Some(why) = after.excludes(size) {
        return CheckOutcome::Skip(format!(
            "GetCapacity claimed room for {size} bytes ({}), CreateVolume was refused it, and GetCapacity now claims none ({why}): the room went between the calls, so the claim is not disproved",
            before.words()
        ));
    }
    let message = format!(
        "GetCapacity claims room for a volume of {size} bytes with this capability and the run's parameters ({}, and {} after), \
         but CreateVolume of that size was refused {} ({}) while this scenario held the run's volumes and snapshots alone: \
         the capacity reported is not capacity that can be used to provision volumes",
        before.words(),
        after.words(),
        refusal.code_name(),
        refusal.message
    );
    let mut f = call_finding(Severity::Fail, "capacity-claim", message, "GetCapacity", &question);
    f.expected = Some(format!("an available_capacity a volume of {size} bytes with these capabilities and parameters can be provisioned from"));
    f.got = Some(format!("{}, then CreateVolume {}", before.words(), refusal.code_name()));
    f.plugin_message = Some(refusal.message.clone()).filter(|m| !m.is_empty());
    f.requirements = vec![REQUIREMENT.to_owned()];
    f.evidence = vec![seen_before, refused, seen_after];
    ctx.push(f);
    CheckOutcome::Stop
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn refused(code: Code, message: &str) -> RpcError {
        RpcError { rpc: "CreateVolume".into(), code, message: message.into(), elapsed: Duration::ZERO, origin: ErrorOrigin::Plugin }
    }

    #[test]
    fn only_a_refusal_of_claimed_room_disproves_the_claim() {
        let roomy = Claim { available: 100, minimum: None, maximum: None };
        assert!(disproves(&refused(Code::ResourceExhausted, ""), roomy, 10));
        assert!(disproves(&refused(Code::Internal, "no space left on device"), roomy, 10));
        // A size refused where the claim gave no bounds may be the size's fault.
        assert!(!disproves(&refused(Code::OutOfRange, ""), roomy, 10));
        let bounded = Claim { minimum: Some(1), maximum: Some(50), ..roomy };
        assert!(disproves(&refused(Code::OutOfRange, ""), bounded, 10));
        assert!(!disproves(&refused(Code::InvalidArgument, ""), roomy, 10));
        // No claim of room, nothing disproved.
        assert!(!disproves(&refused(Code::ResourceExhausted, ""), Claim { available: 5, ..roomy }, 10));
        assert_eq!(Claim { maximum: Some(5), ..roomy }.excludes(10).as_deref(), Some("maximum_volume_size is 5 bytes, below 10"));
        let transport = RpcError { origin: ErrorOrigin::Transport, ..refused(Code::ResourceExhausted, "") };
        assert!(!disproves(&transport, roomy, 10));
    }
}
