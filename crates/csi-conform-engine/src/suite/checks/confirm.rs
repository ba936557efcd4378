//! ValidateVolumeCapabilities as the engine sends and judges it: the request built from step
//! arguments, the call, the answer reconciled with the request
//! ([`capability::reconcile`](crate::capability::reconcile)), and the finding a verdict worse
//! than a pass becomes. Used by the `vvc-reconcile` check and by the property steps that
//! validate, so every ValidateVolumeCapabilities answer is judged the same way.

use std::collections::BTreeMap;

use prost_reflect::DynamicMessage;

use crate::suite::{
    catalog::{ArgKind, ArgSpec, CheckArgs},
    ctx::{ScenarioCtx, call_finding},
    request::message_from_val,
    vars::Val,
};
use crate::{
    capability::{Reconciliation, Verdict, reconcile},
    client::RpcError,
    proto::{self, v1},
    report::{Finding, Severity},
};

/// The arguments of a ValidateVolumeCapabilities request about an existing volume (the
/// `vvc-reconcile` check, and the property steps that validate one).
pub(crate) const VALIDATE_ARGS: [ArgSpec; 4] = [
    ArgSpec { name: "volume_id", kind: ArgKind::Str, required: true },
    ArgSpec { name: "volume_context", kind: ArgKind::Map, required: false },
    ArgSpec { name: "parameters", kind: ArgKind::Map, required: false },
    ArgSpec { name: "mutable_parameters", kind: ArgKind::Map, required: false },
];

/// The RPC.
pub(crate) const RPC: &str = "ValidateVolumeCapabilities";

/// The request's fields that step arguments may give, besides the capabilities.
const FIELDS: [&str; 4] = ["volume_id", "volume_context", "parameters", "mutable_parameters"];

/// The ValidateVolumeCapabilities request of `args` (`volume_id`, `volume_context`,
/// `parameters`, `mutable_parameters`; absent ones are left unset) asking about
/// `capabilities` (a list of VolumeCapability values).
pub(crate) fn request(args: &CheckArgs, capabilities: Val) -> Result<DynamicMessage, String> {
    let mut fields: BTreeMap<String, Val> = FIELDS
        .iter()
        .filter_map(|f| args.get(*f).filter(|v| **v != Val::Null).map(|v| ((*f).to_owned(), v.clone())))
        .collect();
    fields.insert("volume_capabilities".to_owned(), capabilities);
    let desc = proto::message("ValidateVolumeCapabilitiesRequest").expect("the request is in the pool");
    message_from_val(&desc, &Val::Map(fields)).map_err(|e| format!("the {RPC} request: {e}"))
}

/// Sends `request` (secrets by `auto`) and reconciles the answer with it.
pub(crate) async fn validate(ctx: &mut ScenarioCtx, request: &DynamicMessage) -> Result<Reconciliation, RpcError> {
    let response = ctx.call(RPC, request.clone(), None).await?;
    let sent: v1::ValidateVolumeCapabilitiesRequest =
        request.transcode_to().expect("a ValidateVolumeCapabilitiesRequest transcodes to its own type");
    let answer: v1::ValidateVolumeCapabilitiesResponse =
        response.transcode_to().expect("the decoded response transcodes to its own type");
    Ok(reconcile(&sent, &answer))
}

/// A verdict's severity: mismatches and dropped fields break a spec MUST; an incomplete
/// confirmation is tolerated (as Nomad does) unless `strict`; an unconfirmed answer is
/// tolerated (Azure and Linode plugins never set it).
pub(crate) fn severity(verdict: Verdict, strict: bool) -> Severity {
    match verdict {
        Verdict::MismatchedConfirmation | Verdict::DroppedField => Severity::Fail,
        Verdict::IncompleteConfirmation if strict => Severity::Fail,
        Verdict::IncompleteConfirmation | Verdict::Unconfirmed | Verdict::UnconfirmedSilent => Severity::Warn,
        Verdict::Confirmed => Severity::Pass,
    }
}

/// The finding of a verdict worse than a pass (`None` for a confirmation): its kind is the
/// verdict's (`unconfirmed`, `dropped-field`...), its severity the verdict's under `strict`,
/// its message the verdict and every difference (field and both values; mount flags and
/// context or parameter values never appear).
pub(crate) fn finding(reconciliation: &Reconciliation, strict: bool, request: &DynamicMessage) -> Option<Finding> {
    let severity = severity(reconciliation.verdict, strict);
    if severity == Severity::Pass {
        return None;
    }
    let verdict = reconciliation.verdict;
    let message = format!("{RPC} answer reconciles as {}", reconciliation.summary());
    let mut f = call_finding(severity, verdict.kind(), message, RPC, request);
    f.expected = Some("a confirmation equal to the request".to_owned());
    f.got = Some(verdict.kind().to_owned());
    f.requirements = breaks(verdict);
    Some(f)
}

/// The requirements a confirmation verdict breaks: the confirmation's own, whatever the
/// scenario goes on to check (a dropped mount flag is ValidateVolumeCapabilities' fault, not
/// the node's). An unconfirmed answer breaks no requirement of its own (none: the scenario's
/// ids stand).
pub(crate) fn breaks(verdict: crate::capability::Verdict) -> Vec<String> {
    use crate::capability::Verdict;
    match verdict {
        Verdict::Unconfirmed | Verdict::UnconfirmedSilent | Verdict::Confirmed => Vec::new(),
        Verdict::MismatchedConfirmation | Verdict::DroppedField | Verdict::IncompleteConfirmation => {
            vec!["ValidateVolumeCapabilities.confirmed.capabilities".to_owned()]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_verdict_has_its_severity_and_strict_fails_only_an_incomplete_confirmation() {
        let cases = [
            (Verdict::Confirmed, Severity::Pass, Severity::Pass),
            (Verdict::Unconfirmed, Severity::Warn, Severity::Warn),
            (Verdict::UnconfirmedSilent, Severity::Warn, Severity::Warn),
            (Verdict::IncompleteConfirmation, Severity::Warn, Severity::Fail),
            (Verdict::MismatchedConfirmation, Severity::Fail, Severity::Fail),
            (Verdict::DroppedField, Severity::Fail, Severity::Fail),
        ];
        for (verdict, lenient, strict) in cases {
            assert_eq!((severity(verdict, false), severity(verdict, true)), (lenient, strict), "{verdict}");
        }
    }
}
