//! The `volume-pagination` check: pages ListVolumes 2 at a time over volumes of its own while
//! deleting and adding one, and checks nothing repeats or goes missing.

use std::collections::BTreeMap;

use super::{
    Args, ArgReader, Check, CheckDef, CheckFuture,
    list::{CHANGED_WHILE_PAGING, LIST_VOLUMES, list_base, list_page, page_to_end},
    support::{call_ok, capability_arg, create_volume},
};
use crate::{
    proto::{self, v1},
    report::{Finding, Severity},
    suite::{
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
        vars::Val,
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<VolumePagination>()];

struct VolumePagination;

/// Its arguments.
struct Paging {
    /// How many volumes of its own, as given (it makes 3 to 100).
    volumes: i64,
}

impl Args for Paging {
    fn read(a: &mut ArgReader<'_>) -> Self {
        Paging { volumes: a.int("volumes", 5) }
    }
}

impl Check for VolumePagination {
    type Args = Paging;
    const NAME: &'static str = "volume-pagination";
    const DESCRIPTION: &'static str = "creates its own volumes, pages ListVolumes 2 at a time while deleting and adding one of its own, and checks nothing repeats or goes missing";
    const RPCS: &'static [&'static str] = &["CreateVolume", "DeleteVolume", "ListVolumes"];

    /// Its `volumes` and the one it adds.
    fn demand(args: &Paging, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { volumes: args.volumes.clamp(3, 100) as u32 + 1, ..CheckDemand::default() }
    }

    fn cost(args: &Paging, _: &CheckUse<'_>) -> u64 {
        2 * args.volumes.max(0) as u64 + 6
    }

    fn run(ctx: &mut ScenarioCtx, args: Paging) -> CheckFuture<'_> {
        Box::pin(volume_pagination(ctx, args))
    }
}

async fn volume_pagination(ctx: &mut ScenarioCtx, args: Paging) -> CheckOutcome {
    let count = args.volumes.clamp(3, 100);
    let capability = match capability_arg(ctx, &Val::Null) {
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
    let base = list_base(&lister, &[]);
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
