//! The `list-all-volumes` and `list-all-snapshots` checks: page through a List RPC to the
//! end, failing on a repeated token or entry; and the paging that `volume-pagination` shares.

use std::collections::BTreeMap;

use prost_reflect::DynamicMessage;

use super::{
    CheckDef,
    support::{call_ok, int_arg, path_of, text_arg},
};
use crate::{
    proto,
    report::{Finding, Severity},
    suite::{
        catalog::{ArgKind, ArgSpec, CheckArgs, CheckSpec},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
        vars::{Ty, Val},
    },
};

pub(super) static LIST_ALL_VOLUMES: CheckDef = CheckDef {
    spec: CheckSpec {
        name: "list-all-volumes",
        description: "pages through ListVolumes to the end, failing on a repeated token or a duplicate entry; saves ids, count, entries",
        args: &[ArgSpec { name: "max_entries", kind: ArgKind::Int, required: false }],
        outputs: || list_outputs("ListVolumesResponse.Entry"),
        rpcs: &["ListVolumes"],
        holds: &[],
        demand: CheckSpec::no_demand,
        cost: CheckSpec::few_rpcs,
        orchestrated: false,
    },
    run: |ctx, args| Box::pin(list_all(ctx, args, LIST_VOLUMES)),
};

pub(super) static LIST_ALL_SNAPSHOTS: CheckDef = CheckDef {
    spec: CheckSpec {
        name: "list-all-snapshots",
        description: "pages through ListSnapshots (optionally filtered by snapshot_id / source_volume_id) to the end; saves ids, count, entries",
        args: &[
            ArgSpec { name: "snapshot_id", kind: ArgKind::Str, required: false },
            ArgSpec { name: "source_volume_id", kind: ArgKind::Str, required: false },
            ArgSpec { name: "max_entries", kind: ArgKind::Int, required: false },
        ],
        outputs: || list_outputs("ListSnapshotsResponse.Entry"),
        rpcs: &["ListSnapshots"],
        holds: &[],
        demand: CheckSpec::no_demand,
        cost: CheckSpec::few_rpcs,
        orchestrated: false,
    },
    run: |ctx, args| Box::pin(list_all(ctx, args, LIST_SNAPSHOTS)),
};

fn list_outputs(entry: &str) -> Vec<(&'static str, Ty)> {
    let entry = proto::message(entry).map_or(Ty::Any, Ty::Message);
    vec![("ids", Ty::List(Box::new(Ty::Scalar))), ("count", Ty::Scalar), ("entries", Ty::List(Box::new(entry)))]
}

/// How to page through one List RPC.
pub(super) struct Lister {
    pub(super) rpc: &'static str,
    pub(super) request: &'static str,
    /// The path of an entry's id.
    pub(super) id: &'static str,
    /// What an entry is, for messages.
    pub(super) noun: &'static str,
    /// Filters copied from the check's arguments into the request.
    pub(super) filters: &'static [&'static str],
}

pub(super) const LIST_VOLUMES: Lister =
    Lister { rpc: "ListVolumes", request: "ListVolumesRequest", id: "volume.volume_id", noun: "volume", filters: &[] };
const LIST_SNAPSHOTS: Lister = Lister {
    rpc: "ListSnapshots",
    request: "ListSnapshotsRequest",
    id: "snapshot.snapshot_id",
    noun: "snapshot",
    filters: &["snapshot_id", "source_volume_id"],
};

/// The most pages a listing may take before it is considered endless.
/// The bound on a listing: the response rules' (`answer.list-*.pages-end`).
const MAX_PAGES: usize = crate::rules::MAX_PAGES;

/// One listing page: its entries (id, entry) and next token.
pub(super) struct Page {
    pub(super) entries: Vec<(String, Val)>,
    pub(super) next_token: String,
}

pub(super) async fn list_page(
    ctx: &mut ScenarioCtx,
    lister: &Lister,
    base: &DynamicMessage,
    max: i64,
    token: &str,
) -> Result<Page, CheckOutcome> {
    let mut request = base.clone();
    request.set_field_by_name("max_entries", prost_reflect::Value::I32(i32::try_from(max).unwrap_or(i32::MAX)));
    request.set_field_by_name("starting_token", prost_reflect::Value::String(token.to_owned()));
    let response = call_ok(ctx, lister.rpc, request, None).await?;
    let val = Val::from_message(&response);
    let entries = match val.get(&path_of("entries")) {
        Ok(Val::List(items)) => items,
        _ => Vec::new(),
    };
    if max > 0 && entries.len() as i64 > max {
        ctx.fail(
            "pagination",
            format!("{} returned {} entries, more than max_entries {max}", lister.rpc, entries.len()),
        );
    }
    let entries = entries
        .into_iter()
        .map(|e| (e.get(&path_of(lister.id)).ok().and_then(|v| v.to_text()).unwrap_or_default(), e))
        .collect();
    let next_token = val.get(&path_of("next_token")).ok().and_then(|v| v.to_text()).unwrap_or_default();
    Ok(Page { entries, next_token })
}

/// Pages from `token` to the end, adding to `seen`; fails on a repeated entry, unless the
/// listing is `changing` (entries were created or deleted since its first page), where the
/// spec lets a CO see duplicates (#listvolumes): then a repeat is a warning, once.
pub(super) async fn page_to_end(
    ctx: &mut ScenarioCtx,
    lister: &Lister,
    base: &DynamicMessage,
    max: i64,
    mut token: String,
    seen: &mut Vec<(String, Val)>,
    changing: bool,
) -> Result<(), CheckOutcome> {
    let mut tokens = vec![token.clone()];
    let mut warned = false;
    for page in 1..=MAX_PAGES {
        let got = list_page(ctx, lister, base, max, &token).await?;
        for (id, entry) in got.entries {
            if seen.iter().any(|(s, _)| *s == id) {
                let message = format!("{} listed {} {id:?} twice (again on page {page})", lister.rpc, lister.noun);
                if !changing {
                    ctx.fail("pagination", message);
                    return Err(CheckOutcome::Stop);
                }
                if !warned {
                    warned = true;
                    // Lawful while the list changes (#listvolumes): a note.
                    ctx.push(Finding::new(Severity::Pass, crate::report::NOTE_KIND, format!("{message}{CHANGED_WHILE_PAGING}")));
                }
                continue;
            }
            seen.push((id, entry));
        }
        if got.next_token.is_empty() {
            return Ok(());
        }
        if tokens.contains(&got.next_token) {
            // The response rule answer.list-*.token-not-repeated has recorded it at this call.
            if !ctx.findings.iter().any(|f| f.kind == "response-rule" && f.rpc.as_deref() == Some(lister.rpc)) {
                let again = format!("{} returned next_token {:?} again on page {page}", lister.rpc, got.next_token);
                ctx.fail("pagination", format!("{again}; paging would never end"));
            }
            return Err(CheckOutcome::Stop);
        }
        tokens.push(got.next_token.clone());
        token = got.next_token;
    }
    // The response rule answer.list-*.pages-end has recorded it at the last call.
    if !ctx.findings.iter().any(|f| f.kind == "response-rule" && f.rpc.as_deref() == Some(lister.rpc)) {
        ctx.fail("pagination", format!("{} did not reach the last page within {MAX_PAGES} pages (a fixed bound, no flag sets it)", lister.rpc));
    }
    Err(CheckOutcome::Stop)
}

pub(super) fn list_base(lister: &Lister, args: &CheckArgs) -> DynamicMessage {
    let mut base = DynamicMessage::new(proto::message(lister.request).expect("List requests are in the pool"));
    for filter in lister.filters {
        if let Some(v) = text_arg(args, filter) {
            base.set_field_by_name(filter, prost_reflect::Value::String(v));
        }
    }
    base
}

async fn list_all(ctx: &mut ScenarioCtx, args: CheckArgs, lister: Lister) -> CheckOutcome {
    let max = match int_arg(&args, "max_entries") {
        Ok(m) => m.unwrap_or(0),
        Err(e) => return bad_arg(ctx, e),
    };
    let base = list_base(&lister, &args);
    let mut seen = Vec::new();
    if let Err(outcome) = page_to_end(ctx, &lister, &base, max, String::new(), &mut seen, false).await {
        return outcome;
    }
    let count = seen.len();
    let (ids, entries): (Vec<Val>, Vec<Val>) = seen.into_iter().map(|(id, e)| (Val::Str(id), e)).unzip();
    CheckOutcome::Done(BTreeMap::from([
        ("ids".to_owned(), Val::List(ids)),
        ("count".to_owned(), Val::Int(count as i128)),
        ("entries".to_owned(), Val::List(entries)),
    ]))
}

/// Why a listing's duplicate or missing entry is a warning when volumes changed while paging.
pub(super) const CHANGED_WHILE_PAGING: &str = "; volumes were created and deleted while paging, when the spec lets a CO see duplicates and miss \
     existing volumes (#listvolumes: \"The CO SHALL NOT expect a consistent view\")";
