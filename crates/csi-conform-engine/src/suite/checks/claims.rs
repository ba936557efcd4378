//! Claims weighed against behaviour: whether a volume serves a capability, seen by trying it
//! on node endpoint 0 (ControllerPublishVolume, NodeStageVolume, NodePublishVolume, as the
//! plugin's capabilities call for), and the `confirmation-holds` check, which fails a
//! ValidateVolumeCapabilities confirmation that the plugin's own node then refuses.
//!
//! A refusal convicts a claim only when it names the capability: INVALID_ARGUMENT or
//! FAILED_PRECONDITION (the codes the error tables give a capability the volume does not
//! support) to the request with the capability in question, where the same request with the
//! volume's own capability (`control`) is accepted. Anything else (RESOURCE_EXHAUSTED at an
//! attach limit, a deadline, the control refused as well) leaves the behaviour unknown and
//! the claim unjudged.

use std::collections::{BTreeMap, HashMap};

use prost_reflect::{DynamicMessage, ReflectMessage, Value};
use tonic::Code;

use super::{Args, ArgReader, Check, CheckDef, CheckFuture, confirm};
use crate::{
    capability::Verdict,
    client::RpcError,
    fingerprint::{Capability, ControllerCapability, NodeCapability},
    proto::{self, v1},
    report::{Finding, Severity},
    suite::{
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg, call_finding},
        request::message_from_val,
        vars::Val,
    },
};

/// The requirement a confirmation of an unsupported capability breaks.
pub(super) const CONFIRM_ONLY_SUPPORTED: &str = "ValidateVolumeCapabilities.confirm-only-supported";

/// What trying a capability on the node showed.
#[derive(Debug, Clone)]
pub(super) enum Served {
    /// Every step the plugin's capabilities call for answered OK.
    Yes,
    /// A step refused the capability (and accepted the volume's own capability in its place).
    Refused(RpcError),
    /// Nothing can be told, for this reason.
    Unknown(String),
}

/// The volume to try a capability on.
pub(super) struct Probe {
    /// Its id.
    pub volume_id: String,
    /// Its volume_context, as CreateVolume returned it.
    pub volume_context: HashMap<String, String>,
    /// Node endpoint 0's node id (ControllerPublishVolume needs it).
    pub node_id: Option<String>,
}

impl Probe {
    /// The probe of the volume `volume_id` / `volume_context` (values as a scenario holds
    /// them), on node endpoint 0 as NodeGetInfo named it.
    pub(super) fn new(ctx: &ScenarioCtx, volume_id: String, volume_context: &Val) -> Probe {
        let volume_context = match volume_context {
            Val::Map(m) => m.iter().filter_map(|(k, v)| v.to_text().map(|t| (k.clone(), t))).collect(),
            _ => HashMap::new(),
        };
        let node_id = ctx.fingerprint().nodes.first().map(|n| n.node_id.clone()).filter(|id| !id.is_empty());
        Probe { volume_id, volume_context, node_id }
    }
}

/// Tries `capability` on the probe's volume on node endpoint 0, as a CO would use it
/// (publish to the node, stage, publish at the scenario's paths). A step refused with a code
/// that names a capability is tried again with `control`, the capability the volume was made
/// for: only if that is accepted is the refusal the capability's. What it publishes or stages
/// is torn down with the scenario.
pub(super) async fn try_capability(
    ctx: &mut ScenarioCtx,
    probe: &Probe,
    capability: &DynamicMessage,
    control: &DynamicMessage,
) -> Served {
    if ctx.node_connections().is_empty() {
        return Served::Unknown("the run has no node endpoint to try it on".into());
    }
    let mut publish_context = HashMap::new();
    if ctx.fingerprint().supports(Capability::Controller(ControllerCapability::PublishUnpublishVolume)) {
        let Some(node_id) = probe.node_id.clone() else {
            return Served::Unknown("ControllerPublishVolume needs node endpoint 0's node id, which is not known".into());
        };
        let request = |cap: &DynamicMessage| {
            with_capability(
                proto::to_dynamic(&v1::ControllerPublishVolumeRequest {
                    volume_id: probe.volume_id.clone(),
                    node_id: node_id.clone(),
                    volume_context: probe.volume_context.clone(),
                    ..Default::default()
                }),
                cap,
            )
        };
        match step(ctx, request(capability), request(control)).await {
            Ok(Some(answer)) => {
                if let Ok(r) = answer.transcode_to::<v1::ControllerPublishVolumeResponse>() {
                    publish_context = r.publish_context;
                }
            }
            // Advertised, not implemented: the behaviour says the volume needs no publishing.
            Ok(None) => {}
            Err(served) => return served,
        }
    }
    let mut stages = ctx
        .fingerprint()
        .nodes
        .first()
        .is_some_and(|n| n.capabilities.contains(&NodeCapability::StageUnstageVolume));
    let staging = ctx.paths().staging.display().to_string();
    if stages {
        let request = |cap: &DynamicMessage| {
            with_capability(
                proto::to_dynamic(&v1::NodeStageVolumeRequest {
                    volume_id: probe.volume_id.clone(),
                    publish_context: publish_context.clone(),
                    staging_target_path: staging.clone(),
                    volume_context: probe.volume_context.clone(),
                    ..Default::default()
                }),
                cap,
            )
        };
        match step(ctx, request(capability), request(control)).await {
            Ok(Some(_)) => {}
            // Advertised, not implemented: published without staging, as the behaviour says.
            Ok(None) => stages = false,
            Err(served) => return served,
        }
    }
    let request = |cap: &DynamicMessage| {
        with_capability(
            proto::to_dynamic(&v1::NodePublishVolumeRequest {
                volume_id: probe.volume_id.clone(),
                publish_context: publish_context.clone(),
                staging_target_path: if stages { staging.clone() } else { String::new() },
                target_path: ctx.paths().target.display().to_string(),
                volume_context: probe.volume_context.clone(),
                readonly: false,
                ..Default::default()
            }),
            cap,
        )
    };
    let (asked, controlled) = (request(capability), request(control));
    match step(ctx, asked, controlled).await {
        Ok(Some(_)) => Served::Yes,
        Ok(None) => Served::Unknown("NodePublishVolume answered UNIMPLEMENTED".into()),
        Err(served) => served,
    }
}

/// `request` with its `volume_capability` set to `capability`.
fn with_capability(mut request: DynamicMessage, capability: &DynamicMessage) -> DynamicMessage {
    request.set_field_by_name("volume_capability", Value::Message(capability.clone()));
    request
}

/// One step: `asked` is sent; a refusal naming a capability is weighed by sending `control`.
/// `Ok(None)`: the plugin's own UNIMPLEMENTED, for an RPC whose capability it advertises (the
/// `capabilities` suite files that claim, once): the caller goes on as the behaviour says.
async fn step(ctx: &mut ScenarioCtx, asked: DynamicMessage, control: DynamicMessage) -> Result<Option<DynamicMessage>, Served> {
    let rpc = asked.descriptor().name().trim_end_matches("Request").to_owned();
    let refusal = match ctx.call(&rpc, asked, None).await {
        Ok(answer) => return Ok(Some(answer)),
        Err(e) => e,
    };
    if refusal.origin == crate::client::ErrorOrigin::Plugin && ctx.advertised_but_unimplemented(&rpc, refusal.code).is_some() {
        return Ok(None);
    }
    if let Some(why) = not_about_a_capability(&refusal) {
        return Err(Served::Unknown(why));
    }
    let control = ctx.call(&rpc, control, None).await.map(|_| ());
    Err(weigh(refusal, control))
}

/// Why a refusal says nothing about a capability, if so: only INVALID_ARGUMENT and
/// FAILED_PRECONDITION, answered by the plugin itself, can name one (a capability the volume
/// lacks, #nodestagevolume-errors, #nodepublishvolume-errors, #controllerpublishvolume-errors
/// and the error scheme's invalid field); RESOURCE_EXHAUSTED (an attach limit), ABORTED (an
/// operation in flight), a deadline or a lost connection do not.
fn not_about_a_capability(refusal: &RpcError) -> Option<String> {
    let names_one = matches!(refusal.code, Code::InvalidArgument | Code::FailedPrecondition);
    let from_plugin = refusal.origin == crate::client::ErrorOrigin::Plugin && !refusal.is_unreachable();
    (!from_plugin || !names_one).then(|| {
        format!("{} answered {} ({}), which is no refusal of the capability", refusal.rpc, refusal.code_name(), refusal.message)
    })
}

/// A refusal that names a capability, weighed by the control (the same call with the volume's
/// own capability): the capability's only if the control was accepted.
fn weigh(refusal: RpcError, control: Result<(), RpcError>) -> Served {
    match control {
        Ok(()) => Served::Refused(refusal),
        Err(e) => Served::Unknown(format!(
            "{} refused the capability ({}), but also the volume's own capability ({}): the refusal may be about something else",
            refusal.rpc,
            refusal.code_name(),
            e.code_name()
        )),
    }
}

/// What a refusal says, for a finding's message.
pub(super) fn refusal_text(e: &RpcError) -> String {
    if e.message.is_empty() {
        format!("{} answered {}", e.rpc, e.code_name())
    } else {
        format!("{} answered {} ({})", e.rpc, e.code_name(), e.message)
    }
}

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<ConfirmationHolds>()];

struct ConfirmationHolds;

/// Its arguments, as given.
struct Claim {
    volume_id: String,
    /// The capability asked about.
    capability: Val,
    /// The capability the volume was made for.
    control: Val,
    volume_context: Val,
    parameters: Val,
}

impl Args for Claim {
    fn read(a: &mut ArgReader<'_>) -> Self {
        Claim {
            volume_id: a.str("volume_id"),
            capability: a.capability("capability", true),
            control: a.capability("control", true),
            volume_context: a.map("volume_context"),
            parameters: a.map("parameters"),
        }
    }
}

impl Check for ConfirmationHolds {
    type Args = Claim;
    const NAME: &'static str = "confirmation-holds";
    const DESCRIPTION: &'static str = "asks ValidateVolumeCapabilities about `capability` for a volume made for `control`; a confirmation is tried on node 0 (publish, stage, publish): a capability the node refuses (INVALID_ARGUMENT / FAILED_PRECONDITION, while `control` is accepted) fails the confirmation, once; served passes; untried skips";
    const RPCS: &'static [&'static str] =
        &["ValidateVolumeCapabilities", "ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume"];

    /// The scenario's volume, published on node 0 once.
    fn demand(_: &Claim, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { publish: vec![1], ..CheckDemand::default() }
    }

    fn run(ctx: &mut ScenarioCtx, args: Claim) -> CheckFuture<'_> {
        Box::pin(confirmation_holds(ctx, args))
    }
}

/// `confirmation-holds`. The spec: ValidateVolumeCapabilities "SHALL return `confirmed` only
/// if all the volume capabilities specified in the request are supported"
/// ([ValidateVolumeCapabilities]). A confirmation alone proves nothing either way (a volume
/// may serve more than it was made for); the node's behaviour decides.
///
/// [ValidateVolumeCapabilities]: https://github.com/container-storage-interface/spec/blob/master/spec.md#validatevolumecapabilities
async fn confirmation_holds(ctx: &mut ScenarioCtx, args: Claim) -> CheckOutcome {
    let capability = |arg: &str, value: &Val| {
        let desc = proto::message("VolumeCapability").expect("VolumeCapability is in the pool");
        message_from_val(&desc, value).map_err(|e| format!("argument {arg}: {e}"))
    };
    let (asked, control) = match (capability("capability", &args.capability), capability("control", &args.control)) {
        (Ok(a), Ok(c)) => (a, c),
        (Err(e), _) | (_, Err(e)) => return bad_arg(ctx, e),
    };
    let given = BTreeMap::from([
        ("volume_id".to_owned(), Val::Str(args.volume_id.clone())),
        ("volume_context".to_owned(), args.volume_context.clone()),
        ("parameters".to_owned(), args.parameters),
    ]);
    let request = match confirm::request(&given, Val::List(vec![Val::from_message(&asked)])) {
        Ok(r) => r,
        Err(e) => return bad_arg(ctx, e),
    };
    let reconciliation = match confirm::validate(ctx, &request).await {
        Ok(r) => r,
        // An error is no confirmation.
        Err(e) if e.code == Code::InvalidArgument => return CheckOutcome::Done(BTreeMap::new()),
        Err(e) => return ctx.call_failed(&e, &request, "OK or INVALID_ARGUMENT"),
    };
    match reconciliation.verdict {
        // A confirmation that leaves out a field still confirms the access type.
        Verdict::Confirmed | Verdict::DroppedField => {}
        Verdict::Unconfirmed | Verdict::UnconfirmedSilent => return CheckOutcome::Done(BTreeMap::new()),
        // A confirmation of something never asked about is wrong whatever the node does.
        Verdict::MismatchedConfirmation | Verdict::IncompleteConfirmation => {
            if let Some(f) = confirm::finding(&reconciliation, ctx.strict(), &request) {
                ctx.push(f);
            }
            return CheckOutcome::Done(BTreeMap::new());
        }
    }
    let (volume_id, context) = (args.volume_id, args.volume_context);
    let probe = Probe::new(ctx, volume_id, &context);
    let what = capability_words(&asked);
    match try_capability(ctx, &probe, &asked, &control).await {
        Served::Yes => CheckOutcome::Done(BTreeMap::new()),
        Served::Unknown(why) => CheckOutcome::Skip(format!(
            "ValidateVolumeCapabilities confirmed {what} for the volume; whether the volume serves it could not be seen: {why}"
        )),
        Served::Refused(e) => {
            ctx.push(false_confirmation(&request, &what, &e));
            CheckOutcome::Stop
        }
    }
}

/// The finding of a confirmation the node disproved: ValidateVolumeCapabilities' own.
fn false_confirmation(request: &DynamicMessage, what: &str, refusal: &RpcError) -> Finding {
    let message = format!(
        "ValidateVolumeCapabilities confirmed {what} for the volume, but the plugin's own node refuses it: {}, while it accepts the capability the volume was made for; `confirmed` is set only when every capability asked about is supported",
        refusal_text(refusal)
    );
    let mut f = call_finding(Severity::Fail, "confirms-unsupported", message, confirm::RPC, request);
    f.expected = Some("no confirmation of a capability the volume does not support".to_owned());
    f.got = Some(format!("confirmed, then {} {}", refusal.rpc, refusal.code_name()));
    f.plugin_message = Some(refusal.message.clone()).filter(|m| !m.is_empty());
    f.requirements = vec![CONFIRM_ONLY_SUPPORTED.to_owned()];
    f
}

/// `block access` or `mount access`: what a capability asks for, in words.
pub(super) fn capability_words(capability: &DynamicMessage) -> String {
    let access = if capability.has_field_by_name("block") { "block" } else { "mount" };
    format!("{access} access")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::ErrorOrigin;

    fn answered(code: Code, origin: ErrorOrigin) -> RpcError {
        RpcError { rpc: "NodePublishVolume".into(), code, message: "m".into(), elapsed: Duration::ZERO, origin }
    }

    #[test]
    fn only_the_plugins_invalid_argument_or_failed_precondition_can_name_a_capability() {
        for code in [Code::InvalidArgument, Code::FailedPrecondition] {
            assert_eq!(not_about_a_capability(&answered(code, ErrorOrigin::Plugin)), None, "{code:?}");
        }
        for code in [Code::ResourceExhausted, Code::Aborted, Code::NotFound, Code::Internal, Code::Unavailable] {
            assert!(not_about_a_capability(&answered(code, ErrorOrigin::Plugin)).is_some(), "{code:?}");
        }
        assert!(not_about_a_capability(&answered(Code::DeadlineExceeded, ErrorOrigin::Deadline)).is_some());
        // A status the transport made up is not the plugin's word, whatever its code.
        assert!(not_about_a_capability(&answered(Code::InvalidArgument, ErrorOrigin::Transport)).is_some());
    }

    #[test]
    fn a_refusal_is_the_capabilitys_only_when_the_volumes_own_capability_is_accepted() {
        let refusal = answered(Code::InvalidArgument, ErrorOrigin::Plugin);
        assert!(matches!(weigh(refusal.clone(), Ok(())), Served::Refused(e) if e == refusal));
        let control = answered(Code::InvalidArgument, ErrorOrigin::Plugin);
        assert!(matches!(weigh(refusal, Err(control)), Served::Unknown(why) if why.contains("also the volume's own capability")));
    }
}
