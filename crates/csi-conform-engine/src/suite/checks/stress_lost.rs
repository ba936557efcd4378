//! The lost half of "afterwards the plugin's listings equal what the run knows" (issue 29): an
//! object an OK answer of the check named, not deleted since, missing from the plugin's
//! listing. Never judged on one witness: the listing is read again, whole, and the object is
//! asked for alone (ControllerGetVolume where advertised and believed, `witness.rs`;
//! ListSnapshots filtered by its snapshot_id). Both say gone: the object is lost (fail). The
//! object answers for itself and the listing still omits it after `--delete-grace` (a listing
//! may lag, as after a delete), every listing read while nothing changed what it lists: the
//! listing broke its rule (fail). The listing alone says so: a note.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use super::{
    list::{LIST_SNAPSHOTS, LIST_VOLUMES, Lister, changes, cursor_moved},
    stress_support::{controller_has, found, listed_snapshots, listed_volumes, note},
};
use crate::{
    client::Pacer,
    fingerprint::ControllerCapability,
    proto::{self, v1},
    report::{Evidence, Finding, Severity},
    suite::ctx::{CheckOutcome, ScenarioCtx},
};

/// Requirement: the volume a CreateVolume answered OK with exists (its id identifies it).
const VOLUME_EXISTS: &str = "CreateVolume.volume.exists";
/// Requirement: the snapshot a CreateSnapshot answered OK with exists.
const SNAPSHOT_EXISTS: &str = "CreateSnapshot.snapshot.exists";
/// Requirement: ListVolumes lists every volume the plugin knows.
const ALL_VOLUMES: &str = "ListVolumes.all-volumes";
/// Requirement: ListSnapshots lists every snapshot.
const ALL_SNAPSHOTS: &str = "ListSnapshots.all-snapshots";

/// What is looked for: volumes or snapshots.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Objects {
    Volumes,
    Snapshots,
}

impl Objects {
    fn noun(self) -> &'static str {
        match self {
            Objects::Volumes => "volume",
            Objects::Snapshots => "snapshot",
        }
    }

    fn lister(self) -> &'static Lister {
        match self {
            Objects::Volumes => &LIST_VOLUMES,
            Objects::Snapshots => &LIST_SNAPSHOTS,
        }
    }

    fn creator(self) -> &'static str {
        match self {
            Objects::Volumes => "CreateVolume",
            Objects::Snapshots => "CreateSnapshot",
        }
    }

    /// The whole listing now, and whether nothing that changes it was sent, ended or in flight
    /// while it was read (`None`: the plugin does not list these).
    async fn listing(self, ctx: &mut ScenarioCtx) -> Result<Option<(BTreeSet<String>, bool)>, CheckOutcome> {
        let before = changes(ctx, self.lister());
        let listed = match self {
            Objects::Volumes => listed_volumes(ctx).await?,
            Objects::Snapshots => listed_snapshots(ctx).await?,
        };
        let quiet = !cursor_moved(before, changes(ctx, self.lister()));
        Ok(listed.map(|ids| (ids.into_iter().collect(), quiet)))
    }

    /// Whether `id` is listed within `--delete-grace` (a listing may lag what the plugin holds,
    /// as it may lag a delete), looked at again at the pace of the listing's observed latency;
    /// `quiet`: whether the listings so far were read while nothing changed what they list.
    async fn listed_within_grace(self, ctx: &mut ScenarioCtx, id: &str, mut quiet: bool) -> Result<Grace, CheckOutcome> {
        let within = ctx.waits().delete_grace;
        let deadline = Instant::now() + within;
        let mut pacer = Pacer::new(ctx.latency(self.lister().rpc, None), within.max(Duration::from_millis(10)));
        while let Some(pause) = pacer.pause(deadline.saturating_duration_since(Instant::now())) {
            tokio::time::sleep(pause).await;
            let Some((listed, calm)) = self.listing(ctx).await? else { return Ok(Grace::Busy) };
            if listed.contains(id) {
                return Ok(Grace::Listed);
            }
            quiet &= calm;
        }
        Ok(if quiet { Grace::Quiet } else { Grace::Busy })
    }

    /// The object asked for alone: whether it answers (`false`: the witness says it does not
    /// exist), and which witness said so; `None` no witness to believe. The delete verifier's
    /// look-up (ControllerGetVolume, GetSnapshot) where advertised and believed; for a snapshot
    /// without one, ListSnapshots filtered by its id.
    async fn alone(self, ctx: &mut ScenarioCtx, id: &str) -> Option<(bool, &'static str)> {
        match self {
            Objects::Volumes => found(ctx, "DeleteVolume", id).await.map(|seen| (seen, "ControllerGetVolume")),
            Objects::Snapshots => match found(ctx, "DeleteSnapshot", id).await {
                Some(seen) => Some((seen, "GetSnapshot")),
                None => snapshot_alone(ctx, id).await.map(|seen| (seen, "ListSnapshots(snapshot_id)")),
            },
        }
    }
}

/// What the listing did within the grace.
enum Grace {
    /// It listed the object.
    Listed,
    /// It never did, every listing read while nothing changed what it lists.
    Quiet,
    /// It never did, some listing read while calls changed what it lists.
    Busy,
}

/// ListSnapshots filtered by `snapshot_id`: `Some(true)` it lists that snapshot, `Some(false)`
/// it answers with no entry or NOT_FOUND, `None` when the plugin does not list snapshots, or
/// answers with other snapshots only (it did not filter: no witness of this one).
async fn snapshot_alone(ctx: &mut ScenarioCtx, id: &str) -> Option<bool> {
    if !controller_has(ctx, ControllerCapability::ListSnapshots) {
        return None;
    }
    let request = proto::to_dynamic(&v1::ListSnapshotsRequest { snapshot_id: id.to_owned(), ..Default::default() });
    match ctx.call("ListSnapshots", request, None).await {
        Ok(response) => {
            let typed: v1::ListSnapshotsResponse = response.transcode_to().ok()?;
            let ids: Vec<String> = typed.entries.into_iter().filter_map(|e| e.snapshot).map(|s| s.snapshot_id).collect();
            if ids.iter().any(|s| s == id) {
                Some(true)
            } else {
                ids.is_empty().then_some(false)
            }
        }
        Err(e) if e.code == tonic::Code::NotFound => Some(false),
        Err(_) => None,
    }
}

/// The ids of `named` (objects this check's own OK answers named, none deleted since) that the
/// plugin has lost: missing from two whole listings and said not to exist by the object's own
/// witness. Files the findings (see the module's documentation); `what` says how the objects
/// were made, for the messages. Empty when the plugin does not list these objects.
pub(super) async fn lost(ctx: &mut ScenarioCtx, objects: Objects, named: &BTreeSet<String>, what: &str) -> Result<BTreeSet<String>, CheckOutcome> {
    let Some((first, _)) = objects.listing(ctx).await? else { return Ok(BTreeSet::new()) };
    let missing: BTreeSet<&String> = named.iter().filter(|id| !first.contains(*id)).collect();
    if missing.is_empty() {
        return Ok(BTreeSet::new());
    }
    let (second, quiet) = objects.listing(ctx).await?.unwrap_or_default();
    let (noun, rpc) = (objects.noun(), objects.lister().rpc);
    let (mut gone, mut unlisted, mut unsure) = (BTreeSet::new(), Vec::new(), Vec::new());
    let mut evidence = Vec::new();
    for id in missing {
        if second.contains(id) {
            tracing::info!(object = id, "an object missing from one listing was listed again: no verdict");
            continue;
        }
        match objects.alone(ctx, id).await {
            Some((false, witness)) => {
                evidence.push(ctx.witnesses().observe(rpc, id, "not listed, in two whole listings"));
                evidence.push(ctx.witnesses().observe(witness, id, "does not exist"));
                gone.insert(id.clone());
            }
            Some((true, witness)) => match objects.listed_within_grace(ctx, id, quiet).await? {
                Grace::Listed => tracing::info!(object = id, "an object the listing lagged was listed within --delete-grace: no verdict"),
                Grace::Quiet => unlisted.push((id.clone(), ctx.witnesses().observe(witness, id, "answers for itself"))),
                Grace::Busy => unsure.push(format!("{id} (it answers for itself; the listings were read while calls changed them)")),
            },
            None => unsure.push(id.clone()),
        }
    }
    if !gone.is_empty() {
        let ids: Vec<&str> = gone.iter().map(String::as_str).collect();
        let message = lost_message(objects, what, &ids);
        let mut f = Finding::new(Severity::Fail, if objects == Objects::Volumes { "lost-volume" } else { "lost-snapshot" }, message);
        f.rpc = Some(objects.creator().to_owned());
        (f.expected, f.got) = (Some(format!("every {noun} answered OK exists")), Some(format!("{} no witness finds", ids.join(", "))));
        f.requirements = vec![if objects == Objects::Volumes { VOLUME_EXISTS } else { SNAPSHOT_EXISTS }.to_owned()];
        f.evidence = evidence;
        ctx.push(f);
    }
    if !unlisted.is_empty() {
        let ids: Vec<&str> = unlisted.iter().map(|(id, _)| id.as_str()).collect();
        let message = format!(
            "{rpc} did not list {noun}(s) {} ({what}) in whole listings over {} (--delete-grace), read while nothing \
             changed what it lists, yet each answers when asked for alone: the witnesses disagree, and the listing broke its \
             rule: \"The Plugin SHALL return the information about {}\" (#{})",
            ids.join(", "),
            crate::client::human_duration(ctx.waits().delete_grace),
            if objects == Objects::Volumes { "all the volumes that it knows about" } else { "all snapshots on the storage system" },
            rpc.to_lowercase()
        );
        let mut f = Finding::new(Severity::Fail, if objects == Objects::Volumes { "unlisted-volume" } else { "unlisted-snapshot" }, message);
        f.rpc = Some(rpc.to_owned());
        (f.expected, f.got) = (Some(format!("every {noun} listed")), Some(format!("{} not listed", ids.join(", "))));
        f.requirements = vec![if objects == Objects::Volumes { ALL_VOLUMES } else { ALL_SNAPSHOTS }.to_owned()];
        f.evidence = unlisted.into_iter().map(|(_, e)| e).collect::<Vec<Evidence>>();
        ctx.push(f);
    }
    if !unsure.is_empty() {
        note(
            ctx,
            format!(
                "{rpc} did not list {noun}(s) {} ({what}) in two whole listings, and no second witness confirms it is gone \
                 (no verdict on the listing's word alone)",
                unsure.join(", ")
            ),
        );
    }
    Ok(gone)
}

/// The lost finding's sentence, quoting the rule the OK answer broke.
fn lost_message(objects: Objects, what: &str, ids: &[&str]) -> String {
    let rpc = objects.creator();
    let quote = match objects {
        Objects::Volumes => {
            "its volume_id \"MUST contain enough information to uniquely identify this specific volume vs all other volumes \
             supported by this plugin\" and \"SHALL be used by the CO in subsequent calls to refer to this volume\" \
             (#createvolume): an id that names no volume identifies nothing"
        }
        Objects::Snapshots => {
            "the Plugin \"MUST reply 0 OK\" when the snapshot \"is successfully cut\", and its snapshot_id \"MUST contain \
             enough information to uniquely identify this specific snapshot\" (#createsnapshot): an id that names no \
             snapshot identifies nothing"
        }
    };
    format!(
        "{rpc} answered OK with {} ({what}), never deleted since, and the plugin does not have {}: not listed in two whole \
         listings, and not found when asked for alone; {quote}. The {} the plugin said it created is lost",
        ids.join(", "),
        if ids.len() == 1 { "it" } else { "them" },
        objects.noun()
    )
}
