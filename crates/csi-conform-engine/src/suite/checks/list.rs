//! The `list-all-volumes` and `list-all-snapshots` checks: page through a List RPC to the
//! end, failing on a repeated token or entry; and the paging that `volume-pagination` shares.

use std::collections::BTreeMap;

use std::time::Instant;

use prost_reflect::DynamicMessage;
use tonic::Code;

use super::{Args, ArgReader, Check, CheckDef, CheckFuture, support::path_of};
use crate::{
    client::{Pacer, RpcError},
    proto,
    report::{Finding, Severity},
    suite::{
        ctx::{CheckOutcome, ScenarioCtx},
        patience,
        vars::{Ty, Val},
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<ListAllVolumes>(), CheckDef::of::<ListAllSnapshots>()];

struct ListAllVolumes;

/// `list-all-volumes`'s arguments.
struct VolumeListing {
    /// The page size (0: the plugin's).
    max_entries: i64,
    /// List until this id shows.
    listed: Option<String>,
    /// List until this id no longer shows.
    unlisted: Option<String>,
}

impl Args for VolumeListing {
    fn read(a: &mut ArgReader<'_>) -> Self {
        VolumeListing { max_entries: a.int("max_entries", 0), listed: a.opt_str("listed"), unlisted: a.opt_str("unlisted") }
    }
}

impl Check for ListAllVolumes {
    type Args = VolumeListing;
    const NAME: &'static str = "list-all-volumes";
    const DESCRIPTION: &'static str = "pages through ListVolumes to the end, failing on a repeated token or a duplicate entry; saves ids, count, entries; with listed / unlisted, lists again until it shows / omits that id (at most --delete-grace)";
    const RPCS: &'static [&'static str] = &["ListVolumes"];

    fn outputs() -> Vec<(&'static str, Ty)> {
        list_outputs("ListVolumesResponse.Entry")
    }

    fn run(ctx: &mut ScenarioCtx, a: VolumeListing) -> CheckFuture<'_> {
        Box::pin(list_all(ctx, LIST_VOLUMES, a.max_entries, (a.listed, a.unlisted), Vec::new()))
    }
}

struct ListAllSnapshots;

/// `list-all-snapshots`'s arguments.
struct SnapshotListing {
    /// Filters copied into the request.
    snapshot_id: Option<String>,
    source_volume_id: Option<String>,
    /// The page size (0: the plugin's).
    max_entries: i64,
    /// List until this id shows.
    listed: Option<String>,
    /// List until this id no longer shows.
    unlisted: Option<String>,
}

impl Args for SnapshotListing {
    fn read(a: &mut ArgReader<'_>) -> Self {
        SnapshotListing {
            snapshot_id: a.opt_str("snapshot_id"),
            source_volume_id: a.opt_str("source_volume_id"),
            max_entries: a.int("max_entries", 0),
            listed: a.opt_str("listed"),
            unlisted: a.opt_str("unlisted"),
        }
    }
}

impl Check for ListAllSnapshots {
    type Args = SnapshotListing;
    const NAME: &'static str = "list-all-snapshots";
    const DESCRIPTION: &'static str = "pages through ListSnapshots (optionally filtered by snapshot_id / source_volume_id) to the end; saves ids, count, entries; with listed / unlisted, lists again until it shows / omits that id (at most --delete-grace)";
    const RPCS: &'static [&'static str] = &["ListSnapshots"];

    fn outputs() -> Vec<(&'static str, Ty)> {
        list_outputs("ListSnapshotsResponse.Entry")
    }

    fn run(ctx: &mut ScenarioCtx, a: SnapshotListing) -> CheckFuture<'_> {
        let filters = vec![("snapshot_id", a.snapshot_id), ("source_volume_id", a.source_volume_id)];
        Box::pin(list_all(ctx, LIST_SNAPSHOTS, a.max_entries, (a.listed, a.unlisted), filters))
    }
}

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
    /// The RPCs that change what it lists: one of them sent or answered between a page and
    /// the next may invalidate the cursor (the spec's "Invalid starting_token", ABORTED).
    pub(super) changed_by: &'static [&'static str],
}

pub(super) const LIST_VOLUMES: Lister = Lister {
    rpc: "ListVolumes",
    request: "ListVolumesRequest",
    id: "volume.volume_id",
    noun: "volume",
    changed_by: &["CreateVolume", "DeleteVolume"],
};
pub(super) const LIST_SNAPSHOTS: Lister = Lister {
    rpc: "ListSnapshots",
    request: "ListSnapshotsRequest",
    id: "snapshot.snapshot_id",
    noun: "snapshot",
    changed_by: &["CreateSnapshot", "DeleteSnapshot", "CreateVolumeGroupSnapshot", "DeleteVolumeGroupSnapshot"],
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
    match try_list_page(ctx, lister, base, max, token).await? {
        Ok(page) => Ok(page),
        Err((e, request)) => Err(ctx.call_failed(&e, &request, "OK")),
    }
}

/// One page, or the plugin's error answer with the request it refused.
async fn try_list_page(
    ctx: &mut ScenarioCtx,
    lister: &Lister,
    base: &DynamicMessage,
    max: i64,
    token: &str,
) -> Result<Result<Page, (RpcError, DynamicMessage)>, CheckOutcome> {
    let mut request = base.clone();
    request.set_field_by_name("max_entries", prost_reflect::Value::I32(i32::try_from(max).unwrap_or(i32::MAX)));
    request.set_field_by_name("starting_token", prost_reflect::Value::String(token.to_owned()));
    let response = match ctx.call(lister.rpc, request.clone(), None).await {
        Ok(r) => r,
        Err(e) => return Ok(Err((e, request))),
    };
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
    Ok(Ok(Page { entries, next_token }))
}

/// How many calls that change a listing were sent and ended so far, on the connection the
/// listing goes to (see `CallStats::sent`).
pub(super) fn changes(ctx: &ScenarioCtx, lister: &Lister) -> (u64, u64) {
    proto::method(lister.rpc)
        .and_then(|m| ctx.connection(&m, None).ok())
        .map_or((0, 0), |c| c.stats().sent(lister.changed_by))
}

/// Whether the run itself may have moved a listing's cursor between `before` (read before
/// the page that gave the token was asked for) and `now` (when the next page was refused): a
/// call that changes the listing was sent or ended in between, or was in flight then.
pub(super) fn cursor_moved(before: (u64, u64), now: (u64, u64)) -> bool {
    before != now || before.0 != before.1
}

/// Pages from `token` to the end, adding to `seen`; fails on a repeated entry, unless the
/// listing is `changing` (entries were created or deleted since its first page), where the
/// spec lets a CO see duplicates (#listvolumes): then a repeat is a warning, once.
///
/// A page whose `starting_token` the plugin refuses with ABORTED (the spec's "Invalid
/// starting_token": "Caller MUST restart the ListVolumes call with an empty starting_token",
/// #listvolumes-errors) after the run's own calls changed what is listed is the run's doing:
/// the listing starts again from the beginning, as a CO would, `seen` emptied, for at most
/// `--contention-timeout`; then the step is inconclusive. Refused with nothing changed, the
/// token was the plugin's own and valid: that fails.
pub(super) async fn page_to_end(
    ctx: &mut ScenarioCtx,
    lister: &Lister,
    base: &DynamicMessage,
    max: i64,
    token: String,
    seen: &mut Vec<(String, Val)>,
    changing: bool,
) -> Result<(), CheckOutcome> {
    let started = Instant::now();
    let bound = ctx.contention_timeout();
    let mut restarts = 0u32;
    let mut token = token;
    // The first token was cut by a page the caller asked for: what changed since is unknown.
    let mut before = None;
    loop {
        match page_on(ctx, lister, base, max, token, seen, changing, &mut before).await? {
            Paged::Done => return Ok(()),
            Paged::Refused(e, request) => {
                let now = changes(ctx, lister);
                let moved = before.is_none_or(|b| cursor_moved(b, now));
                if !moved {
                    return Err(ctx.call_failed(&e, &request, "OK"));
                }
                if started.elapsed() >= bound {
                    ctx.push(crate::suite::patience::ran_out(format!(
                        "{} refused the starting_token of its listing with ABORTED each time the run's own calls had \
                         changed what it lists; restarted from the beginning {restarts} time(s) over {}, as a CO would \
                         (#listvolumes-errors), until the bound of {} (--contention-timeout): inconclusive",
                        lister.rpc,
                        crate::client::human_duration(started.elapsed()),
                        crate::client::human_duration(bound)
                    )));
                    return Err(CheckOutcome::Stop);
                }
                restarts += 1;
                tracing::info!(rpc = lister.rpc, restarts, "a listing's cursor moved under the run's own calls: restarting it");
                seen.clear();
                token = String::new();
                before = None;
            }
        }
    }
}

/// How paging from a token ended.
enum Paged {
    /// At the last page.
    Done,
    /// A page was refused: the error and the request.
    Refused(RpcError, DynamicMessage),
}

#[allow(clippy::too_many_arguments)]
async fn page_on(
    ctx: &mut ScenarioCtx,
    lister: &Lister,
    base: &DynamicMessage,
    max: i64,
    mut token: String,
    seen: &mut Vec<(String, Val)>,
    changing: bool,
    before: &mut Option<(u64, u64)>,
) -> Result<Paged, CheckOutcome> {
    let mut tokens = vec![token.clone()];
    let mut warned = false;
    for page in 1..=MAX_PAGES {
        let asked = changes(ctx, lister);
        let got = match try_list_page(ctx, lister, base, max, &token).await? {
            Ok(got) => got,
            Err((e, request)) if e.code == Code::Aborted && !token.is_empty() && !e.is_unreachable() => {
                return Ok(Paged::Refused(e, request));
            }
            Err((e, request)) => return Err(ctx.call_failed(&e, &request, "OK")),
        };
        *before = Some(asked);
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
            return Ok(Paged::Done);
        }
        if tokens.contains(&got.next_token) {
            // The response rule answer.list-*.token-not-repeated has recorded it at this call.
            if !ctx.findings().iter().any(|f| f.kind == "response-rule" && f.rpc.as_deref() == Some(lister.rpc)) {
                let again = format!("{} returned next_token {:?} again on page {page}", lister.rpc, got.next_token);
                ctx.fail("pagination", format!("{again}; paging would never end"));
            }
            return Err(CheckOutcome::Stop);
        }
        tokens.push(got.next_token.clone());
        token = got.next_token;
    }
    // The response rule answer.list-*.pages-end has recorded it at the last call.
    if !ctx.findings().iter().any(|f| f.kind == "response-rule" && f.rpc.as_deref() == Some(lister.rpc)) {
        ctx.fail("pagination", format!("{} did not reach the last page within {MAX_PAGES} pages (a fixed bound, no flag sets it)", lister.rpc));
    }
    Err(CheckOutcome::Stop)
}

/// A request of `lister` with these filters (the ones given) set.
pub(super) fn list_base(lister: &Lister, filters: &[(&str, Option<String>)]) -> DynamicMessage {
    let mut base = DynamicMessage::new(proto::message(lister.request).expect("List requests are in the pool"));
    for (filter, value) in filters {
        if let Some(v) = value {
            base.set_field_by_name(filter, prost_reflect::Value::String(v.clone()));
        }
    }
    base
}

async fn list_all(
    ctx: &mut ScenarioCtx,
    lister: Lister,
    max: i64,
    (listed, unlisted): (Option<String>, Option<String>),
    filters: Vec<(&str, Option<String>)>,
) -> CheckOutcome {
    let base = list_base(&lister, &filters);
    let started = Instant::now();
    let mut pacer = Pacer::new(ctx.latency(lister.rpc, None), patience::SETTLE_LONGEST_PAUSE);
    let mut seen = Vec::new();
    loop {
        seen.clear();
        if let Err(outcome) = page_to_end(ctx, &lister, &base, max, String::new(), &mut seen, false).await {
            return outcome;
        }
        // A listing may lag what the plugin did (an eventually consistent backend): the
        // step's asserts judge it once it caught up, or once --delete-grace is over.
        let shows = |id: &str| seen.iter().any(|(s, _)| s == id);
        let behind = listed.as_deref().is_some_and(|id| !shows(id)) || unlisted.as_deref().is_some_and(shows);
        let left = ctx.waits().delete_grace.saturating_sub(started.elapsed());
        match pacer.pause(left).filter(|_| behind) {
            Some(pause) => tokio::time::sleep(pause).await,
            None => break,
        }
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

#[cfg(test)]
mod tests {
    use super::cursor_moved;

    #[test]
    fn a_cursor_moved_when_a_listed_kind_was_created_or_deleted_or_in_flight_around_the_page() {
        assert!(!cursor_moved((4, 4), (4, 4)), "nothing sent, nothing in flight: the token was valid");
        assert!(cursor_moved((4, 4), (5, 4)), "a create sent since");
        assert!(cursor_moved((4, 4), (5, 5)), "a create answered since");
        assert!(cursor_moved((5, 4), (5, 5)), "a create in flight when the page was cut");
        assert!(cursor_moved((5, 4), (5, 4)), "still in flight: it may have changed the list");
    }
}
