//! The `vvc-reconcile` check: sends ValidateVolumeCapabilities and reconciles the answer with
//! the request (see `confirm`).

use std::collections::BTreeMap;

use super::{Args, ArgReader, Check, CheckDef, CheckFuture, confirm};
use crate::suite::{
    ctx::{CheckOutcome, ScenarioCtx, bad_arg},
    vars::{Ty, Val},
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<VvcReconcile>()];

struct VvcReconcile;

/// Its arguments: the request's fields, as given.
struct Request {
    volume_id: String,
    capabilities: Val,
    volume_context: Val,
    parameters: Val,
    mutable_parameters: Val,
}

impl Args for Request {
    fn read(a: &mut ArgReader<'_>) -> Self {
        Request {
            volume_id: a.str("volume_id"),
            capabilities: a.capabilities("capabilities"),
            volume_context: a.map("volume_context"),
            parameters: a.map("parameters"),
            mutable_parameters: a.map("mutable_parameters"),
        }
    }
}

impl Check for VvcReconcile {
    type Args = Request;
    const NAME: &'static str = "vvc-reconcile";
    const DESCRIPTION: &'static str = "sends ValidateVolumeCapabilities and reconciles the answer with the request: unconfirmed / incomplete-confirmation warn, mismatched-confirmation / dropped-field fail; saves verdict";
    const RPCS: &'static [&'static str] = &["ValidateVolumeCapabilities"];

    fn outputs() -> Vec<(&'static str, Ty)> {
        vec![("verdict", Ty::Scalar)]
    }

    fn run(ctx: &mut ScenarioCtx, args: Request) -> CheckFuture<'_> {
        Box::pin(vvc_reconcile(ctx, args))
    }
}

async fn vvc_reconcile(ctx: &mut ScenarioCtx, args: Request) -> CheckOutcome {
    let given = BTreeMap::from([
        ("volume_id".to_owned(), Val::Str(args.volume_id)),
        ("volume_context".to_owned(), args.volume_context),
        ("parameters".to_owned(), args.parameters),
        ("mutable_parameters".to_owned(), args.mutable_parameters),
    ]);
    let request = match confirm::request(&given, args.capabilities) {
        Ok(r) => r,
        Err(e) => return bad_arg(ctx, e),
    };
    let reconciliation = match confirm::validate(ctx, &request).await {
        Ok(r) => r,
        Err(e) => return ctx.call_failed(&e, &request, "OK"),
    };
    let verdict = reconciliation.verdict;
    if let Some(finding) = confirm::finding(&reconciliation, ctx.strict(), &request) {
        ctx.push(finding);
    }
    CheckOutcome::Done(BTreeMap::from([("verdict".to_owned(), Val::Str(verdict.kind().to_owned()))]))
}
