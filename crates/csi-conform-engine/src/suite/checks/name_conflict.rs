//! The `name-conflict` check: a volume for `first`, then one of the same name for `second`,
//! judged by ALREADY_EXISTS or, after an OK, by whether the volume returned serves `second`
//! (tried on the node; what ValidateVolumeCapabilities confirms only where it cannot be tried).

use std::collections::BTreeMap;

use prost_reflect::DynamicMessage;

use super::{
    Args, ArgReader, Check, CheckDef, CheckFuture,
    claims::{self, Probe, Served},
    confirm,
    support::{create_request, path_of},
};
use crate::{
    capability::Verdict,
    proto,
    report::Severity,
    suite::{
        catalog::{CheckArgs, CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg, call_finding},
        request::message_from_val,
        vars::Val,
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<NameConflict>()];

struct NameConflict;

/// Its arguments: the two capabilities, as given.
struct Pair {
    first: Val,
    second: Val,
}

impl Args for Pair {
    fn read(a: &mut ArgReader<'_>) -> Self {
        Pair { first: a.capability("first", true), second: a.capability("second", true) }
    }
}

impl Check for NameConflict {
    type Args = Pair;
    const NAME: &'static str = "name-conflict";
    const DESCRIPTION: &'static str = "creates a volume for `first`, then one of the same name for `second`: ALREADY_EXISTS passes; an OK is judged by trying `second` on node 0: served passes (the volume serves both), refused (while `first` is accepted) fails; where it cannot be tried, by ValidateVolumeCapabilities: `second` confirmed passes, `first` only fails, neither warns";
    const RPCS: &'static [&'static str] = &[
        "CreateVolume",
        "ValidateVolumeCapabilities",
        "ControllerPublishVolume",
        "NodeStageVolume",
        "NodePublishVolume",
    ];

    /// Its volume, and a second one if the plugin answers OK with another; the one returned
    /// is published on node 0 to see whether it serves `second`.
    fn demand(_: &Pair, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { volumes: 2, publish: vec![1], ..CheckDemand::default() }
    }

    fn run(ctx: &mut ScenarioCtx, args: Pair) -> CheckFuture<'_> {
        Box::pin(name_conflict(ctx, args))
    }
}

/// `name-conflict`. The spec answers ALREADY_EXISTS to a CreateVolume whose name exists
/// with a volume incompatible with the request ([CreateVolume errors]); a plugin whose
/// volumes serve both capabilities may answer OK and return the volume. So an OK is judged
/// by what ValidateVolumeCapabilities says of the volume it returned, with `first` (what the
/// volume was made for) as the yardstick: `second` confirmed passes, `first` confirmed and
/// `second` not fails (the plugin itself calls the volume incompatible), neither confirmed
/// warns (a plugin that never confirms gives nothing to tell by). A plugin that refuses
/// either capability outright (INVALID_ARGUMENT, also under a fresh name) cannot show the
/// conflict: a skip; INVALID_ARGUMENT to the conflict from a plugin that does create such
/// volumes under a fresh name is the wrong code, a failure.
///
/// [CreateVolume errors]: https://github.com/container-storage-interface/spec/blob/master/spec.md#createvolume-errors
async fn name_conflict(ctx: &mut ScenarioCtx, args: Pair) -> CheckOutcome {
    let capability = |arg: &str, value: &Val| {
        let desc = proto::message("VolumeCapability").expect("VolumeCapability is in the pool");
        message_from_val(&desc, value).map_err(|e| format!("argument {arg}: {e}"))
    };
    let (first, second) = match (capability("first", &args.first), capability("second", &args.second)) {
        (Ok(first), Ok(second)) => (first, second),
        (Err(e), _) | (_, Err(e)) => return bad_arg(ctx, e),
    };
    let (first_access, second_access) = (access_type(&first), access_type(&second));
    let refused = |ctx: &mut ScenarioCtx, e: &crate::client::RpcError, request: &DynamicMessage, access, expected| {
        if e.code == tonic::Code::InvalidArgument {
            CheckOutcome::Skip(format!(
                "the plugin does not create volumes for {access} access (CreateVolume answered INVALID_ARGUMENT), so a name conflict cannot be seen"
            ))
        } else {
            ctx.call_failed(e, request, expected)
        }
    };
    let name = ctx.name().to_owned();
    let request = create_request(ctx, name.clone(), &first);
    if let Err(e) = ctx.call("CreateVolume", request.clone(), None).await {
        return refused(ctx, &e, &request, first_access, "OK");
    }
    let request = create_request(ctx, name.clone(), &second);
    let answer = match ctx.call("CreateVolume", request.clone(), None).await {
        Ok(answer) => answer,
        Err(e) if e.code == tonic::Code::AlreadyExists => return CheckOutcome::Done(BTreeMap::new()),
        Err(e) if e.code == tonic::Code::InvalidArgument => {
            // Refused for the conflict, or because the plugin makes no such volumes at all?
            // The same request under a fresh name tells: only the second is a skip.
            let fresh = create_request(ctx, format!("{name}-fresh"), &second);
            return match ctx.call("CreateVolume", fresh.clone(), None).await {
                Ok(_) => {
                    let message = format!(
                        "CreateVolume answered INVALID_ARGUMENT to the name of a volume created for {first_access} access, \
                         asked for {second_access} access, though the same request under a fresh name creates a volume: an \
                         existing volume incompatible with the request gets ALREADY_EXISTS"
                    );
                    let mut f = call_finding(Severity::Fail, "unexpected-code", message, "CreateVolume", &request);
                    (f.expected, f.got) = (Some("ALREADY_EXISTS".into()), Some("INVALID_ARGUMENT".into()));
                    f.plugin_message = Some(e.message.clone()).filter(|m| !m.is_empty());
                    ctx.push(f);
                    CheckOutcome::Done(BTreeMap::new())
                }
                Err(e) => refused(ctx, &e, &fresh, second_access, "OK"),
            };
        }
        Err(e) => return refused(ctx, &e, &request, second_access, "ALREADY_EXISTS"),
    };
    let returned = Val::from_message(&answer);
    let field = |path: &str| returned.get(&path_of(path)).unwrap_or(Val::Null);
    let what = format!(
        "CreateVolume answered OK to the name of a volume created for {first_access} access, asked for {second_access} access, returning {}",
        proto::summary(&answer, proto::SUMMARY_MAX)
    );
    // What the volume does decides; what ValidateVolumeCapabilities says of it only when
    // the node cannot be asked (a claim the node disproves is that scenario's finding).
    let volume_id = field("volume.volume_id").to_text().unwrap_or_default();
    let probe = Probe::new(ctx, volume_id, &field("volume.volume_context"));
    match claims::try_capability(ctx, &probe, &second, &first).await {
        Served::Yes => return CheckOutcome::Done(BTreeMap::new()),
        Served::Refused(e) => {
            let why = format!(
                "; the plugin's node refuses {second_access} access for that volume ({}) while it accepts {first_access} access, so the volume is incompatible with the request and the answer must be ALREADY_EXISTS",
                claims::refusal_text(&e)
            );
            let mut f = call_finding(Severity::Fail, "incompatible-volume", format!("{what}{why}"), "CreateVolume", &request);
            (f.expected, f.got) = (Some("ALREADY_EXISTS".into()), Some("OK".into()));
            ctx.push(f);
            return CheckOutcome::Done(BTreeMap::new());
        }
        Served::Unknown(why) => tracing::debug!("name-conflict: whether the volume serves {second_access} access is not seen: {why}"),
    }
    let mut ask = CheckArgs::from([
        ("volume_id".to_owned(), field("volume.volume_id")),
        ("volume_context".to_owned(), field("volume.volume_context")),
    ]);
    if let Some(parameters) = ctx.var("parameters") {
        ask.insert("parameters".to_owned(), parameters.clone());
    }
    let confirms = async |ctx: &mut ScenarioCtx, capability: &DynamicMessage| {
        let capabilities = Val::List(vec![Val::from_message(capability)]);
        let request = match confirm::request(&ask, capabilities) {
            Ok(r) => r,
            Err(e) => return Err(bad_arg(ctx, e)),
        };
        match confirm::validate(ctx, &request).await {
            // A confirmation that leaves out a field still confirms the access type.
            Ok(r) => Ok(matches!(r.verdict, Verdict::Confirmed | Verdict::DroppedField)),
            Err(e) => Err(ctx.call_failed(&e, &request, "OK")),
        }
    };
    let serves_second = match confirms(ctx, &second).await {
        Ok(c) => c,
        Err(outcome) => return outcome,
    };
    if serves_second {
        return CheckOutcome::Done(BTreeMap::new());
    }
    let serves_first = match confirms(ctx, &first).await {
        Ok(c) => c,
        Err(outcome) => return outcome,
    };
    let (severity, kind, why) = if serves_first {
        (
            Severity::Fail,
            "incompatible-volume",
            format!(
                "; ValidateVolumeCapabilities confirms {first_access} access for that volume but not {second_access} access, so it is \
                 incompatible with the request and the answer must be ALREADY_EXISTS"
            ),
        )
    } else {
        (
            Severity::Warn,
            "unverified-compatibility",
            format!(
                "; ValidateVolumeCapabilities confirms neither {first_access} nor {second_access} access for it, so whether the \
                 volume serves {second_access} access (and OK is right) cannot be told"
            ),
        )
    };
    let mut f = call_finding(severity, kind, format!("{what}{why}"), "CreateVolume", &request);
    (f.expected, f.got) = (Some(format!("ALREADY_EXISTS, or OK for a volume that serves {second_access} access")), Some("OK".into()));
    ctx.push(f);
    CheckOutcome::Done(BTreeMap::new())
}

/// `block` or `mount`: the access type a VolumeCapability asks for.
fn access_type(capability: &DynamicMessage) -> &'static str {
    if capability.has_field_by_name("block") { "block" } else { "mount" }
}
