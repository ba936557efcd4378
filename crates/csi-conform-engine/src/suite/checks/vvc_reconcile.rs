//! The `vvc-reconcile` check: sends ValidateVolumeCapabilities and reconciles the answer with
//! the request (see `confirm`).

use std::collections::BTreeMap;

use super::{CheckDef, confirm};
use crate::suite::{
    catalog::{ArgKind, ArgSpec, CheckArgs, CheckSpec},
    ctx::{CheckOutcome, ScenarioCtx, bad_arg},
    vars::{Ty, Val},
};

pub(super) static CHECK: CheckDef = CheckDef {
    spec: CheckSpec {
        name: "vvc-reconcile",
        description: "sends ValidateVolumeCapabilities and reconciles the answer with the request: unconfirmed / incomplete-confirmation warn, mismatched-confirmation / dropped-field fail; saves verdict",
        args: &[
            confirm::VALIDATE_ARGS[0],
            ArgSpec { name: "capabilities", kind: ArgKind::Capabilities, required: true },
            confirm::VALIDATE_ARGS[1],
            confirm::VALIDATE_ARGS[2],
            confirm::VALIDATE_ARGS[3],
        ],
        outputs: || vec![("verdict", Ty::Scalar)],
        rpcs: &["ValidateVolumeCapabilities"],
        holds: &[],
        demand: CheckSpec::no_demand,
        cost: CheckSpec::few_rpcs,
        orchestrated: false,
    },
    run: |ctx, args| Box::pin(vvc_reconcile(ctx, args)),
};

async fn vvc_reconcile(ctx: &mut ScenarioCtx, args: CheckArgs) -> CheckOutcome {
    let capabilities = args.get("capabilities").cloned().unwrap_or(Val::Null);
    let request = match confirm::request(&args, capabilities) {
        Ok(r) => r,
        Err(e) => return bad_arg(ctx, e),
    };
    let reconciliation = match confirm::validate(ctx, &request).await {
        Ok(r) => r,
        Err(e) => return ctx.call_failed(&e, &request, "OK"),
    };
    let verdict = reconciliation.verdict;
    if let Some(finding) = confirm::finding(&reconciliation, ctx.config().strict, &request) {
        ctx.push(finding);
    }
    CheckOutcome::Done(BTreeMap::from([("verdict".to_owned(), Val::Str(verdict.kind().to_owned()))]))
}
