//! The `path-state` check: inspects a path where the node plugin sees it (its mount namespace).

use std::{collections::BTreeMap, path::Path};

use super::{
    CheckDef,
    support::{int_arg, text_arg},
};
use crate::{
    report::{Finding, Severity},
    suite::{
        catalog::{ArgKind, ArgSpec, CheckArgs, CheckSpec},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
        inspect::{self, PATH_STATES},
    },
};

pub(super) static CHECK: CheckDef = CheckDef {
    spec: CheckSpec {
        name: "path-state",
        description: "inspects a path where the node plugin sees it (its mount namespace): absent, directory, file, exists, mount-point, not-mount-point or read-only-mount",
        args: &[
            ArgSpec { name: "path", kind: ArgKind::Str, required: true },
            ArgSpec { name: "is", kind: ArgKind::Choice(PATH_STATES), required: true },
            ArgSpec { name: "node", kind: ArgKind::Int, required: false },
        ],
        outputs: Vec::new,
        rpcs: &[],
        holds: &[],
        demand: CheckSpec::no_demand,
        cost: CheckSpec::few_rpcs,
        orchestrated: false,
    },
    run: |ctx, args| Box::pin(path_state(ctx, args)),
};

async fn path_state(ctx: &mut ScenarioCtx, args: CheckArgs) -> CheckOutcome {
    let node = match int_arg(&args, "node") {
        Ok(n) => n.unwrap_or(0),
        Err(e) => return bad_arg(ctx, e),
    };
    let (Some(path), Some(state)) = (text_arg(&args, "path"), text_arg(&args, "is")) else {
        return bad_arg(ctx, "path-state needs `path` and `is`".into());
    };
    let Some(inspector) = usize::try_from(node).ok().and_then(|n| ctx.inspector(n)) else {
        return bad_arg(ctx, format!("path-state: the run has no node endpoint {node}"));
    };
    if let Some(why) = inspector.unreachable() {
        return CheckOutcome::Skip(format!("path-state cannot inspect {path}: {why}"));
    }
    if inspect::needs_mounts(&state)
        && let Some(why) = inspector.mounts_skipped()
    {
        return CheckOutcome::Skip(format!("path-state cannot tell whether {path} is {state}: {why}"));
    }
    let found = match inspector.check(Path::new(&path), &state).await {
        Ok(found) => found,
        Err(e) => {
            let kind = if matches!(e, inspect::CheckError::Command(_)) { "check-path-cmd" } else { "mount-table" };
            ctx.push(Finding::new(Severity::Error, kind, e.to_string()));
            return CheckOutcome::Stop;
        }
    };
    match found {
        Ok(()) => CheckOutcome::Done(BTreeMap::new()),
        Err(found) => {
            ctx.fail("path-state", format!("{path} {found}, expected {state}"));
            CheckOutcome::Stop
        }
    }
}
