//! The `volume-pagination` check: pages ListVolumes 2 at a time over volumes of its own while
//! deleting and adding one, and checks nothing repeats or goes missing.

use std::collections::BTreeMap;

use super::{
    CheckDef,
    list::{CHANGED_WHILE_PAGING, LIST_VOLUMES, list_base, list_page, page_to_end},
    support::{call_ok, capability_arg, create_volume, int_arg},
};
use crate::{
    proto::{self, v1},
    report::{Finding, Severity},
    suite::{
        catalog::{ArgKind, ArgSpec, CheckArgs, CheckDemand, CheckSpec, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
    },
};

pub(super) static CHECK: CheckDef = CheckDef {
    spec: CheckSpec {
        name: "volume-pagination",
        description: "creates its own volumes, pages ListVolumes 2 at a time while deleting and adding one of its own, and checks nothing repeats or goes missing",
        args: &[ArgSpec { name: "volumes", kind: ArgKind::Int, required: false }],
        outputs: Vec::new,
        rpcs: &["CreateVolume", "DeleteVolume", "ListVolumes"],
        holds: &[],
        demand,
        cost: |u| 2 * u.int("volumes").unwrap_or(5).max(0) as u64 + 6,
        orchestrated: false,
    },
    run: |ctx, args| Box::pin(volume_pagination(ctx, args)),
};

/// Its `volumes` (default 5) and the one it adds.
fn demand(u: &CheckUse<'_>) -> CheckDemand {
    let count = u.int("volumes").unwrap_or(5).clamp(3, 100);
    CheckDemand { volumes: count as u32 + 1, ..CheckDemand::default() }
}

async fn volume_pagination(ctx: &mut ScenarioCtx, args: CheckArgs) -> CheckOutcome {
    let count = match int_arg(&args, "volumes") {
        Ok(n) => n.unwrap_or(5).clamp(3, 100),
        Err(e) => return bad_arg(ctx, e),
    };
    let capability = match capability_arg(ctx, &args) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, e),
    };
    let mut own = Vec::new();
    for i in 0..count {
        match create_volume(ctx, &format!("page-{i}"), &capability).await {
            Ok(id) => own.push(id),
            Err(o) => return o,
        }
    }
    let lister = LIST_VOLUMES;
    let base = list_base(&lister, &args);
    let first = match list_page(ctx, &lister, &base, 2, "").await {
        Ok(p) => p,
        Err(o) => return o,
    };
    if first.next_token.is_empty() {
        ctx.fail(
            "pagination",
            format!("ListVolumes with max_entries 2 returned no next_token although at least {count} volumes exist"),
        );
        return CheckOutcome::Stop;
    }
    let deleted = own.iter().find(|id| first.entries.iter().any(|(e, _)| e == *id)).cloned();
    if let Some(id) = &deleted {
        let request = proto::to_dynamic(&v1::DeleteVolumeRequest { volume_id: id.clone(), ..Default::default() });
        if let Err(o) = call_ok(ctx, "DeleteVolume", request, None).await {
            return o;
        }
    }
    if let Err(o) = create_volume(ctx, "page-extra", &capability).await {
        return o;
    }
    let mut seen = first.entries;
    if let Err(o) = page_to_end(ctx, &lister, &base, 2, first.next_token, &mut seen, true).await {
        return o;
    }
    let missing: Vec<&String> =
        own.iter().filter(|id| Some(*id) != deleted.as_ref() && !seen.iter().any(|(s, _)| s == *id)).collect();
    if !missing.is_empty() {
        // A plugin whose token is a position in its list skips an entry when one before it
        // is deleted: the spec allows that ("The CO SHALL NOT expect a consistent view",
        // #listvolumes), so it is a note, never a verdict.
        let list: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        ctx.push(Finding::new(
            Severity::Pass,
            crate::report::NOTE_KIND,
            format!(
                "paging ListVolumes 2 at a time never listed these volumes, which existed throughout: {}{CHANGED_WHILE_PAGING}",
                list.join(", ")
            ),
        ));
    }
    CheckOutcome::Done(BTreeMap::new())
}
