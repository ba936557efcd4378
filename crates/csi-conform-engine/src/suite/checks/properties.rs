//! The named properties of `property` steps: invariants checked over generated volume
//! capability sets, one case at a time. Each is a [`PropertyDef`]: its [`PropertySpec`] and
//! the body of one case. The engine (`suite::property`) generates, runs and shrinks the cases.

use std::{collections::BTreeMap, fmt, future::Future, pin::Pin};

use tonic::Code;

use super::confirm;
use crate::{
    capability::VolumeCapability,
    client::RpcError,
    proto::{self, v1},
    report::{Finding, Severity},
    suite::{
        catalog::{ArgKind, ArgSpec, CheckArgs, PropertySpec},
        ctx::{ScenarioCtx, call_finding, rpc_error_finding, unreachable_finding},
        vars::Val,
    },
};

/// What a property's case gets: the step's arguments and a name unique to the case.
pub struct CaseInput {
    /// The step's arguments, variables substituted.
    pub args: CheckArgs,
    /// A name for anything the case creates (`<scenario name>-p<n>`).
    pub name: String,
}

/// How one case came out.
#[derive(Debug)]
pub enum CaseOutcome {
    /// The invariant holds for this case.
    Holds,
    /// It does not: the finding says why (its message is about this case alone).
    Fails(Finding),
    /// The case could not be judged (plugin unreachable, bad arguments): recorded as it is,
    /// and the step ends (a failure found before stays reported, shrunk as far as it got).
    Stop(Finding),
    /// The scenario cannot go on here, for this reason (a failure found before is reported
    /// instead).
    Skip(String),
}

/// The future a case returns.
pub type CaseFuture<'a> = Pin<Box<dyn Future<Output = CaseOutcome> + Send + 'a>>;

/// A named invariant.
pub struct PropertyDef {
    /// What it is, as data.
    pub spec: PropertySpec,
    /// One case.
    pub case: for<'a> fn(&'a mut ScenarioCtx, &'a CaseInput, &'a [VolumeCapability]) -> CaseFuture<'a>,
}

impl fmt::Debug for PropertyDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PropertyDef").field("name", &self.spec.name).finish_non_exhaustive()
    }
}

static REGISTRY: [PropertyDef; 3] = [
    PropertyDef {
        spec: PropertySpec {
            name: "validate-never-fails",
            description: "ValidateVolumeCapabilities of a volume with any generated capability set answers OK (or INVALID_ARGUMENT) and never reconciles to a failure",
            args: &confirm::VALIDATE_ARGS,
            rpcs: &["ValidateVolumeCapabilities"],
        },
        case: |ctx, input, caps| Box::pin(validate_never_fails(ctx, input, caps)),
    },
    PropertyDef {
        spec: PropertySpec {
            name: "create-then-validate",
            description: "CreateVolume with any generated capability set succeeds or answers INVALID_ARGUMENT, OUT_OF_RANGE or ALREADY_EXISTS (never INTERNAL, UNKNOWN or another code), and a created volume validates back",
            args: &[ArgSpec { name: "parameters", kind: ArgKind::Map, required: false }],
            rpcs: &["CreateVolume", "ValidateVolumeCapabilities", "DeleteVolume"],
        },
        case: |ctx, input, caps| Box::pin(create_then_validate(ctx, input, caps)),
    },
    PropertyDef {
        spec: PropertySpec {
            name: "validate-is-stable",
            description: "the same ValidateVolumeCapabilities request, sent twice, gets the same answer code and verdict",
            args: &confirm::VALIDATE_ARGS,
            rpcs: &["ValidateVolumeCapabilities"],
        },
        case: |ctx, input, caps| Box::pin(validate_is_stable(ctx, input, caps)),
    },
];

/// Every property (`csi-conform list --checks` lists them after the checks).
pub fn properties() -> impl Iterator<Item = &'static PropertySpec> {
    REGISTRY.iter().map(|p| &p.spec)
}

/// A property by name.
pub fn find(name: &str) -> Option<&'static PropertyDef> {
    REGISTRY.iter().find(|p| p.spec.name == name)
}

/// The capabilities as request values.
fn capability_vals(caps: &[VolumeCapability]) -> Val {
    Val::List(caps.iter().map(|c| Val::Message(proto::to_dynamic(&v1::VolumeCapability::from(c)))).collect())
}

/// What a failed call means for a case: unreachable stops, UNIMPLEMENTED of an advertised
/// capability skips, any other code the invariant does not allow fails it.
fn error_outcome(ctx: &ScenarioCtx, e: &RpcError, request: &prost_reflect::DynamicMessage, expected: &str) -> CaseOutcome {
    if e.is_unreachable() {
        return CaseOutcome::Stop(unreachable_finding(e, request));
    }
    if let Some(reason) = ctx.advertised_but_unimplemented(&e.rpc, e.code) {
        return CaseOutcome::Skip(reason);
    }
    let message = format!("{} answered {}, expected {expected}", e.rpc, e.code_name());
    CaseOutcome::Fails(rpc_error_finding(e, request, Severity::Fail, "unexpected-code", message, Some(expected.to_owned())))
}

/// A case's outcome from a reconciliation: it fails when the verdict's severity (under
/// `--strict`) is a failure; `context` prefixes the finding's message.
fn verdict_outcome(
    ctx: &ScenarioCtx,
    reconciliation: &crate::capability::Reconciliation,
    request: &prost_reflect::DynamicMessage,
    context: &str,
) -> CaseOutcome {
    match confirm::finding(reconciliation, ctx.strict(), request) {
        Some(mut f) if f.severity >= Severity::Fail => {
            f.message = format!("{context}{}", f.message);
            CaseOutcome::Fails(f)
        }
        _ => CaseOutcome::Holds,
    }
}

async fn validate_never_fails(ctx: &mut ScenarioCtx, input: &CaseInput, caps: &[VolumeCapability]) -> CaseOutcome {
    let request = match confirm::request(&input.args, capability_vals(caps)) {
        Ok(r) => r,
        Err(e) => return CaseOutcome::Stop(Finding::new(Severity::Error, "suite", e)),
    };
    match confirm::validate(ctx, &request).await {
        Ok(r) => verdict_outcome(ctx, &r, &request, ""),
        Err(e) if e.code == Code::InvalidArgument => CaseOutcome::Holds,
        Err(e) => error_outcome(ctx, &e, &request, "OK or INVALID_ARGUMENT"),
    }
}

async fn validate_is_stable(ctx: &mut ScenarioCtx, input: &CaseInput, caps: &[VolumeCapability]) -> CaseOutcome {
    let request = match confirm::request(&input.args, capability_vals(caps)) {
        Ok(r) => r,
        Err(e) => return CaseOutcome::Stop(Finding::new(Severity::Error, "suite", e)),
    };
    let mut answers = Vec::with_capacity(2);
    for _ in 0..2 {
        match confirm::validate(ctx, &request).await {
            Ok(r) => answers.push(format!("OK ({})", r.verdict.kind())),
            Err(e) if e.is_unreachable() => return CaseOutcome::Stop(unreachable_finding(&e, &request)),
            Err(e) => answers.push(e.code_name().to_owned()),
        }
    }
    if answers[0] == answers[1] {
        return CaseOutcome::Holds;
    }
    let message = format!("the same {} request answered {}, then {}", confirm::RPC, answers[0], answers[1]);
    let mut f = call_finding(Severity::Fail, "inconsistent-verdict", message, confirm::RPC, &request);
    (f.expected, f.got) = (Some(answers[0].clone()), Some(answers[1].clone()));
    CaseOutcome::Fails(f)
}

/// The codes CreateVolume may answer a generated capability set with besides OK.
const CREATE_REFUSALS: [Code; 3] = [Code::InvalidArgument, Code::OutOfRange, Code::AlreadyExists];

async fn create_then_validate(ctx: &mut ScenarioCtx, input: &CaseInput, caps: &[VolumeCapability]) -> CaseOutcome {
    let parameters: BTreeMap<String, String> = match input.args.get("parameters") {
        Some(Val::Map(m)) => m.iter().map(|(k, v)| (k.clone(), v.to_text().unwrap_or_default())).collect(),
        _ => ctx.requests().parameters.as_ref().clone(),
    };
    let wire_caps: Vec<v1::VolumeCapability> = caps.iter().map(Into::into).collect();
    let create = proto::to_dynamic(&v1::CreateVolumeRequest {
        name: input.name.clone(),
        capacity_range: Some(v1::CapacityRange { required_bytes: ctx.small_size(), limit_bytes: 0 }),
        volume_capabilities: wire_caps.clone(),
        parameters: parameters.clone().into_iter().collect(),
        ..Default::default()
    });
    let response = match ctx.call("CreateVolume", create.clone(), None).await {
        Ok(r) => r,
        Err(e) if CREATE_REFUSALS.contains(&e.code) => return CaseOutcome::Holds,
        Err(e) => return error_outcome(ctx, &e, &create, "OK, INVALID_ARGUMENT, OUT_OF_RANGE or ALREADY_EXISTS"),
    };
    let created: v1::CreateVolumeResponse = response.transcode_to().expect("the decoded response transcodes");
    let Some(volume) = created.volume.filter(|v| !v.volume_id.is_empty()) else {
        let mut f = call_finding(
            Severity::Fail,
            "assertion",
            "CreateVolume answered OK without a volume id",
            "CreateVolume",
            &create,
        );
        (f.expected, f.got) = (Some("volume.volume_id".to_owned()), Some("none".to_owned()));
        return CaseOutcome::Fails(f);
    };
    let validate = proto::to_dynamic(&v1::ValidateVolumeCapabilitiesRequest {
        volume_id: volume.volume_id.clone(),
        volume_context: volume.volume_context,
        volume_capabilities: wire_caps,
        parameters: parameters.into_iter().collect(),
        ..Default::default()
    });
    let outcome = match confirm::validate(ctx, &validate).await {
        Ok(r) => verdict_outcome(ctx, &r, &validate, "the volume CreateVolume made with these capabilities does not validate back: "),
        Err(e) => error_outcome(ctx, &e, &validate, "OK"),
    };
    // Deleted here (the capacity of many cases adds up); a failed delete stays tracked and
    // the scenario's teardown tries again and reports it.
    let delete = proto::to_dynamic(&v1::DeleteVolumeRequest { volume_id: volume.volume_id, ..Default::default() });
    if let Err(e) = ctx.call("DeleteVolume", delete, None).await {
        tracing::debug!("DeleteVolume of a property case's volume answered {}: {}", e.code_name(), e.message);
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_names_are_unique_and_rpcs_exist() {
        let mut names: Vec<&str> = properties().map(|p| p.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), properties().count());
        for p in properties() {
            assert!(!p.description.contains('\n'));
            for rpc in p.rpcs {
                assert!(proto::method(rpc).is_some(), "{rpc}");
            }
        }
    }
}
