//! The `fanout` check: clone and snapshot fan-out from one source volume, as a CO scaling a
//! workload out of one template sends it. A source volume gets a data marker on node 0; then
//! `--stress-calls` snapshots of it are created at once (CREATE_DELETE_SNAPSHOT), as many
//! clones of it at once (CLONE_VOLUME) and as many volumes restored from one of those
//! snapshots at once, each as far as the run's budgets hold. Every name must get an object of
//! its own, the plugin must have each object it answered OK (`stress_lost`: looked for
//! before any is deleted), a sample of the clones and restores must hold the source's marker,
//! the listings afterwards must hold nothing no answer named, and everything is deleted
//! (snapshots before their source).

use std::collections::{BTreeMap, BTreeSet};

use prost_reflect::DynamicMessage;

use super::{
    Check, CheckDef, CheckFuture,
    stress_lost::{self, Objects},
    stress_support::{
        Volume, controller_has, controller_publish, controller_unpublish, create, delete, extra_leases, ghosts_seen_twice,
        listed_snapshots, listed_volumes, mounts_at, node_has, node_id, note, publish_request, stage_request,
        typed_capability, unpublish, unstage, volume_of,
    },
    support::{OwnCapability, call_ok, capability_arg, create_request},
};
use crate::{
    client::{Pacer, RpcError},
    fingerprint::{ControllerCapability, NodeCapability},
    marker::{self, Marker, Placement},
    proto::{self, v1},
    report::{Finding, Severity},
    suite::{
        answer::rpc_error_finding,
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
        patience,
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<Fanout>()];

struct Fanout;

impl Check for Fanout {
    type Args = OwnCapability;
    const NAME: &'static str = "fanout";
    const DESCRIPTION: &'static str = "from one source volume with a data marker: --stress-calls snapshots of it at once, as many clones of it at once and as many volumes restored from one snapshot at once (each where advertised, as far as the budgets hold): one object per name, each one the plugin has (listed, or found alone) before any is deleted, the marker in a sample of the clones and restores, no ghost in the listings, everything deleted";
    const RPCS: &'static [&'static str] = &[
        "CreateVolume",
        "CreateSnapshot",
        "ControllerPublishVolume",
        "NodeStageVolume",
        "NodePublishVolume",
        "NodeUnpublishVolume",
        "NodeUnstageVolume",
        "ControllerUnpublishVolume",
        "DeleteVolume",
        "DeleteSnapshot",
        "ListVolumes",
        "ListSnapshots",
        "ControllerGetVolume",
        "GetSnapshot",
    ];

    /// The source and one new volume at a time; the further ones are leases taken when it
    /// runs. One volume published on node 0 at a time.
    fn demand(_: &OwnCapability, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { volumes: 2, publish: vec![1], ..CheckDemand::default() }
    }

    fn cost(_: &OwnCapability, _: &CheckUse<'_>) -> u64 {
        40
    }

    fn run(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckFuture<'_> {
        Box::pin(fanout(ctx, args))
    }
}

/// Requirement: calls racing are handled gracefully (ABORTED allowed).
const GRACEFUL: &str = "General.concurrency.graceful";
/// Requirement: different volumes get different volume ids.
const VOLUME_ID_UNIQUE: &str = "CreateVolume.volume.id-unique";
/// Requirement: different snapshots get different snapshot ids.
const SNAPSHOT_ID_UNIQUE: &str = "CreateSnapshot.snapshot.id-unique";
/// Requirement: a plugin with CLONE_VOLUME creates volumes from its volumes (their content).
const FROM_VOLUME: &str = "CreateVolume.source.volume";
/// Requirement: a plugin with CREATE_DELETE_SNAPSHOT creates volumes from its snapshots.
const FROM_SNAPSHOT: &str = "CreateVolume.source.snapshot";
/// The longest pause between two looks at a snapshot that is not ready yet.
const READY_LONGEST_PAUSE: std::time::Duration = std::time::Duration::from_secs(5);

/// How the volumes are used on node 0, when the data path works here.
struct Node {
    id: String,
    typed: v1::VolumeCapability,
    block: bool,
    controller_publishes: bool,
    stages: bool,
}

/// One fan-out: what is created, and the RPC and rule that name it.
#[derive(Clone, Copy)]
struct Kind {
    rpc: &'static str,
    noun: &'static str,
    unique: &'static str,
    anchor: &'static str,
}

const CLONES: Kind = Kind { rpc: "CreateVolume", noun: "clone", unique: VOLUME_ID_UNIQUE, anchor: "#createvolume" };
const RESTORES: Kind = Kind { rpc: "CreateVolume", noun: "restored volume", unique: VOLUME_ID_UNIQUE, anchor: "#createvolume" };
const SNAPSHOTS: Kind = Kind { rpc: "CreateSnapshot", noun: "snapshot", unique: SNAPSHOT_ID_UNIQUE, anchor: "#createsnapshot" };

async fn fanout(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckOutcome {
    match run(ctx, args).await {
        Ok(()) => CheckOutcome::Done(BTreeMap::new()),
        Err(outcome) => outcome,
    }
}

async fn run(ctx: &mut ScenarioCtx, args: OwnCapability) -> Result<(), CheckOutcome> {
    let capability = capability_arg(ctx, &args.0).map_err(|e| bad_arg(ctx, e))?;
    let Some(typed) = typed_capability(&capability) else { return Err(bad_arg(ctx, "argument capability does not decode".into())) };
    let clones = controller_has(ctx, ControllerCapability::CloneVolume);
    let snapshots = controller_has(ctx, ControllerCapability::CreateDeleteSnapshot);
    if !clones && !snapshots {
        return Err(CheckOutcome::Skip("neither controller:CLONE_VOLUME nor controller:CREATE_DELETE_SNAPSHOT is advertised".into()));
    }
    let node = data_node(ctx, &typed);
    let calls = ctx.stress().calls.max(2);
    let leases = extra_leases(ctx, calls - 1, false);
    let volumes_at_once = 1 + leases.len();
    if volumes_at_once < calls as usize {
        note(ctx, format!("{volumes_at_once} clones or restores at once of the {calls} asked (--stress-calls): the run's budgets hold no more volumes"));
    }
    let before = listed_volumes(ctx).await?;
    let snapshots_before = if snapshots { listed_snapshots(ctx).await? } else { None };
    let source = create(ctx, "source", &capability).await?;
    let mut known: BTreeSet<String> = [source.id.clone()].into();
    let written = match &node {
        Some(node) => write_source(ctx, node, &source).await?,
        None => None,
    };
    let mut snapshot_ids: Vec<String> = Vec::new();
    let mut restore_from = None;
    if snapshots {
        let requests: Vec<DynamicMessage> = (0..calls).map(|i| snapshot_request(ctx, &source, i)).collect();
        let got = fan_out(ctx, SNAPSHOTS, &source, &requests).await?;
        // While every snapshot is still there: does the plugin have each one it answered OK?
        let named: BTreeSet<String> = got.iter().flatten().cloned().collect();
        let what = format!("snapshots of volume {} made at once", source.id);
        let lost = stress_lost::lost(ctx, Objects::Snapshots, &named, &what).await?;
        restore_from = got.iter().take(requests.len()).position(|id| id.as_ref().is_some_and(|id| !lost.contains(id)));
        snapshot_ids = named.into_iter().filter(|id| !lost.contains(id)).collect();
    }
    if clones {
        let from = v1::volume_content_source::Type::Volume(v1::volume_content_source::VolumeSource { volume_id: source.id.clone() });
        let made = volumes_from(ctx, CLONES, &source, &capability, from, volumes_at_once).await?;
        known.extend(made.iter().map(|v| v.id.clone()));
        let made = held(ctx, made, CLONES, &source).await?;
        check_data(ctx, node.as_ref(), &written, &made, CLONES).await?;
        for volume in &made {
            delete(ctx, &volume.id).await?;
        }
    }
    if let Some(i) = restore_from {
        let snapshot_id = ready(ctx, &source, i as u32).await?;
        let from = v1::volume_content_source::Type::Snapshot(v1::volume_content_source::SnapshotSource { snapshot_id });
        let made = volumes_from(ctx, RESTORES, &source, &capability, from, volumes_at_once).await?;
        known.extend(made.iter().map(|v| v.id.clone()));
        let made = held(ctx, made, RESTORES, &source).await?;
        check_data(ctx, node.as_ref(), &written, &made, RESTORES).await?;
        for volume in &made {
            delete(ctx, &volume.id).await?;
        }
    }
    drop(leases);
    for ghost in ghosts_seen_twice(ctx, before, &known).await? {
        ghost_found(ctx, "volume", &ghost);
        delete(ctx, &ghost).await?;
    }
    if let Some(before) = snapshots_before {
        let known: BTreeSet<String> = snapshot_ids.iter().cloned().collect();
        for ghost in snapshot_ghosts(ctx, before, &known).await? {
            ghost_found(ctx, "snapshot", &ghost);
            delete_snapshot(ctx, &ghost).await?;
        }
    }
    for id in &snapshot_ids {
        delete_snapshot(ctx, id).await?;
    }
    delete(ctx, &source.id).await
}

/// `made` (all still there: none deleted yet) without the volumes the plugin lost, each
/// confirmed by a second witness and filed (`stress_lost`): a lost volume holds nothing, so it
/// is neither read nor deleted.
async fn held(ctx: &mut ScenarioCtx, made: Vec<Volume>, kind: Kind, source: &Volume) -> Result<Vec<Volume>, CheckOutcome> {
    let named: BTreeSet<String> = made.iter().map(|v| v.id.clone()).collect();
    let what = format!("{}s of volume {} made at once", kind.noun, source.id);
    let lost = stress_lost::lost(ctx, Objects::Volumes, &named, &what).await?;
    Ok(made.into_iter().filter(|v| !lost.contains(&v.id)).collect())
}

/// Node 0, when markers can be written and read through its files here; `None` (and a note
/// saying why) when not: the fan-out is then judged by its answers and listings only.
fn data_node(ctx: &mut ScenarioCtx, typed: &v1::VolumeCapability) -> Option<Node> {
    let why = match node_id(ctx) {
        Err(_) => Some("the run has no node endpoint".to_owned()),
        Ok(_) => super::data::unreachable_files(ctx, 0),
    };
    if let Some(why) = why {
        note(ctx, format!("no marker was written, so the clones' and restores' content is not checked here: {why}"));
        return None;
    }
    Some(Node {
        id: node_id(ctx).ok()?,
        typed: typed.clone(),
        block: matches!(typed.access_type, Some(v1::volume_capability::AccessType::Block(_))),
        controller_publishes: controller_has(ctx, ControllerCapability::PublishUnpublishVolume),
        stages: node_has(ctx, NodeCapability::StageUnstageVolume),
    })
}

/// The CreateSnapshot request for snapshot `i` of `source`.
fn snapshot_request(ctx: &ScenarioCtx, source: &Volume, i: u32) -> DynamicMessage {
    proto::to_dynamic(&v1::CreateSnapshotRequest {
        source_volume_id: source.id.clone(),
        name: format!("{}-s{i}", ctx.name()),
        parameters: ctx.requests().snapshot_parameters.as_ref().clone().into_iter().collect(),
        ..Default::default()
    })
}

/// The object id in a CreateVolume or CreateSnapshot answer (`None`: none; the response
/// rules report that).
fn id_in(kind: Kind, response: &DynamicMessage) -> Option<String> {
    if kind.rpc == "CreateSnapshot" {
        let typed: v1::CreateSnapshotResponse = response.transcode_to().ok()?;
        typed.snapshot.map(|s| s.snapshot_id).filter(|id| !id.is_empty())
    } else {
        volume_of(response).map(|v| v.id)
    }
}

/// `count` volumes made from `from` at once, each named `<name>-<noun initial><i>`.
async fn volumes_from(
    ctx: &mut ScenarioCtx,
    kind: Kind,
    source: &Volume,
    capability: &DynamicMessage,
    from: v1::volume_content_source::Type,
    count: usize,
) -> Result<Vec<Volume>, CheckOutcome> {
    let prefix = if kind.noun == "clone" { "c" } else { "r" };
    let source_message = proto::to_dynamic(&v1::VolumeContentSource { r#type: Some(from) });
    let requests: Vec<DynamicMessage> = (0..count)
        .map(|i| {
            let mut request = create_request(ctx, format!("{}-{prefix}{i}", ctx.name()), capability);
            request.set_field_by_name("volume_content_source", prost_reflect::Value::Message(source_message.clone()));
            request
        })
        .collect();
    let ids = fan_out(ctx, kind, source, &requests).await?;
    let mut seen = BTreeSet::new();
    Ok(ids
        .into_iter()
        .flatten()
        .filter(|id| seen.insert(id.clone()))
        .map(|id| Volume { id, context: Default::default() })
        .collect())
}

/// Sends `requests` at once; a refused one is asked again alone once the others are done.
/// Returns the id each request got in the end (`None`: refused for room, or no id). Files
/// the refusals under the overlap (warn), the ABORTED ones (a note), and two names answered
/// with one object (fail, confirmed by asking each name again alone).
async fn fan_out(ctx: &mut ScenarioCtx, kind: Kind, source: &Volume, requests: &[DynamicMessage]) -> Result<Vec<Option<String>>, CheckOutcome> {
    let mut forks: Vec<ScenarioCtx> = requests.iter().map(|_| ctx.fork()).collect();
    let answers = futures_util::future::join_all(forks.iter_mut().zip(requests).map(|(fork, request)| {
        let request = request.clone();
        async move { fork.call(kind.rpc, request, None).await }
    }))
    .await;
    for fork in forks {
        ctx.absorb(fork);
    }
    let n = requests.len();
    let mut ids = Vec::new();
    let mut refused: Vec<(RpcError, DynamicMessage)> = Vec::new();
    let mut aborted = 0usize;
    for (request, answer) in requests.iter().zip(answers) {
        let raced = match answer {
            Ok(response) => {
                ids.push(id_in(kind, &response));
                continue;
            }
            Err(e) => e,
        };
        match ctx.call(kind.rpc, request.clone(), None).await {
            Ok(response) => {
                if raced.code == tonic::Code::Aborted {
                    aborted += 1;
                } else {
                    refused.push((raced, request.clone()));
                }
                ids.push(id_in(kind, &response));
            }
            Err(e) if e.code == tonic::Code::ResourceExhausted => {
                note(ctx, format!("a {} of volume {} answered RESOURCE_EXHAUSTED, also alone: the plugin holds no more (no verdict)", kind.noun, source.id));
                ids.push(None);
            }
            Err(e) => return Err(ctx.call_failed(&e, request, "OK")),
        }
    }
    if aborted > 0 {
        note(ctx, format!("{aborted} of {n} {} calls ({}s of volume {}) sent at once answered ABORTED and OK alone afterwards (no verdict)", kind.rpc, kind.noun, source.id));
    }
    if let Some((raced, request)) = refused.first() {
        let message = format!(
            "{} of {n} {} calls ({}s of volume {} under different names) sent at once answered {}, and each answered OK \
             when asked again alone: a plugin should handle calls a CO overlaps as gracefully as possible, ABORTED being \
             the code the spec allows (#concurrency)",
            refused.len(),
            kind.rpc,
            kind.noun,
            source.id,
            raced.code_name()
        );
        let mut f = rpc_error_finding(raced, request, Severity::Warn, "race-refused", message, Some("OK or ABORTED".into()));
        f.requirements = vec![GRACEFUL.to_owned()];
        ctx.push(f);
    }
    // Objects the lone retries named beside those of the fan-out are the run's too.
    let extra = shared_answers(ctx, kind, source, requests, &ids).await?;
    ids.extend(extra.into_iter().map(Some));
    Ok(ids)
}

/// Two names answered with one object: each of those names asked again alone (the second
/// witness). Whatever the lone answer names, the answer under the overlap gave one name
/// another name's object: a failure of the id's uniqueness. Returns the ids the lone answers
/// named that the fan-out did not.
async fn shared_answers(
    ctx: &mut ScenarioCtx,
    kind: Kind,
    source: &Volume,
    requests: &[DynamicMessage],
    ids: &[Option<String>],
) -> Result<Vec<String>, CheckOutcome> {
    let mut extra = Vec::new();
    let mut by_id: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, id) in ids.iter().enumerate() {
        if let Some(id) = id {
            by_id.entry(id.as_str()).or_default().push(i);
        }
    }
    for (id, shared) in by_id.into_iter().filter(|(_, v)| v.len() > 1) {
        let mut alone = Vec::new();
        for &i in &shared {
            let response = call_ok(ctx, kind.rpc, requests[i].clone(), None).await?;
            let named = id_in(kind, &response).unwrap_or_default();
            if !named.is_empty() && !ids.contains(&Some(named.clone())) && !extra.contains(&named) {
                extra.push(named.clone());
            }
            alone.push(named);
        }
        let names: Vec<String> = shared.iter().map(|&i| name_of(&requests[i])).collect();
        let again = if alone.iter().all(|a| a == id) {
            "asked again alone, each name is answered with it again: the plugin holds one object under several names".to_owned()
        } else {
            format!(
                "asked again alone, the names are answered with {}: the answers under the overlap gave names another name's \
                 object",
                alone.join(", ")
            )
        };
        let message = format!(
            "{} {} calls ({}s of volume {}) sent at once under the different names {} were all answered OK with {id}; {again}. \
             Each name is a new {}, and its id MUST identify it apart from every other ({})",
            shared.len(),
            kind.rpc,
            kind.noun,
            source.id,
            names.join(", "),
            kind.noun,
            kind.anchor
        );
        let mut f = Finding::new(Severity::Fail, if kind.rpc == "CreateSnapshot" { "shared-snapshot" } else { "shared-volume" }, message);
        f.rpc = Some(kind.rpc.to_owned());
        (f.expected, f.got) = (Some(format!("a {} of its own for each name", kind.noun)), Some(format!("{id} for {}", names.join(", "))));
        f.requirements = vec![kind.unique.to_owned()];
        ctx.push(f);
    }
    Ok(extra)
}

/// The `name` field of a request.
fn name_of(request: &DynamicMessage) -> String {
    request.get_field_by_name("name").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// Waits (asking CreateSnapshot `i` again, as the spec tells a CO to) until the snapshot it
/// names is ready to use; its id.
async fn ready(ctx: &mut ScenarioCtx, source: &Volume, i: u32) -> Result<String, CheckOutcome> {
    let (within, by) = patience::ready_bound(ctx.waits(), None);
    let deadline = std::time::Instant::now() + within;
    let mut pacer = Pacer::new(ctx.latency("CreateSnapshot", None), READY_LONGEST_PAUSE);
    loop {
        let request = snapshot_request(ctx, source, i);
        let response = call_ok(ctx, "CreateSnapshot", request, None).await?;
        let typed: v1::CreateSnapshotResponse = response.transcode_to().unwrap_or_default();
        let snapshot = typed.snapshot.unwrap_or_default();
        let snapshot_id = snapshot.snapshot_id.clone();
        if snapshot.ready_to_use {
            return Ok(snapshot_id);
        }
        match pacer.pause(deadline.saturating_duration_since(std::time::Instant::now())) {
            Some(pause) => tokio::time::sleep(pause).await,
            None => {
                ctx.push(patience::ran_out(format!(
                    "snapshot {snapshot_id} was not ready to use within {} ({by}); readiness is asynchronous and the spec \
                     sets it no deadline (#createsnapshot), so no volume was restored from it",
                    crate::client::human_duration(within)
                )));
                return Err(CheckOutcome::Stop);
            }
        }
    }
}

/// Publishes `volume` on node 0 at the scenario's paths: its publish_context, and the local
/// path of the target when the volume is seen there (both witnesses: the mount table and the
/// path; a device node for block), `None` when not.
async fn publish(ctx: &mut ScenarioCtx, node: &Node, volume: &Volume) -> Result<Option<std::path::PathBuf>, CheckOutcome> {
    let context = if node.controller_publishes {
        controller_publish(ctx, volume, &node.id, &node.typed).await.map_err(|(e, request)| ctx.call_failed(&e, &request, "OK"))?
    } else {
        Default::default()
    };
    let (staging, target) = (ctx.paths().staging.clone(), ctx.paths().target.clone());
    if node.stages {
        call_ok(ctx, "NodeStageVolume", stage_request(volume, &context, &staging, &node.typed), Some(0)).await?;
    }
    let request = publish_request(volume, &context, node.stages.then_some(staging.as_path()), &target, &node.typed);
    call_ok(ctx, "NodePublishVolume", request, Some(0)).await?;
    let Some(inspector) = ctx.inspector(0) else { return Ok(None) };
    let there = if node.block { inspector.is_device(&target) } else { mounts_at(ctx, &target).is_some_and(|n| n > 0) };
    Ok(there.then(|| inspector.local_path(&target)).flatten())
}

/// Takes `volume` down from node 0 (unpublish, unstage, controller unpublish).
async fn take_down(ctx: &mut ScenarioCtx, node: &Node, volume: &Volume) -> Result<(), CheckOutcome> {
    let (staging, target) = (ctx.paths().staging.clone(), ctx.paths().target.clone());
    unpublish(ctx, volume, &target).await?;
    if node.stages {
        unstage(ctx, volume, &staging).await?;
    }
    if node.controller_publishes {
        controller_unpublish(ctx, volume, &node.id).await?;
    }
    Ok(())
}

/// The source's marker, written on node 0 and read back there, and where it lies; `None`
/// (and a note) when the node does not show the volume mounted or the marker does not read
/// back from the source itself: no content verdict then.
async fn write_source(ctx: &mut ScenarioCtx, node: &Node, source: &Volume) -> Result<Option<(Marker, Placement)>, CheckOutcome> {
    let local = publish(ctx, node, source).await?;
    let marker = Marker::new(ctx.seed(), ctx.name(), "source");
    let written = local.as_ref().and_then(|local| {
        let placement = marker::write(local, node.block, &marker, None).ok()?;
        matches!(marker::verify(local, &placement, &marker, &[]), Ok(None)).then_some(placement)
    });
    take_down(ctx, node, source).await?;
    if written.is_none() {
        note(ctx, format!("no marker could be written into and read back from source volume {} on node 0: the copies' content is not checked", source.id));
    }
    Ok(written.map(|p| (marker, p)))
}

/// The source's marker in a sample of `made` (all of them up to 4; else the first, the
/// middle and the last, named in a note): one missing or different fails the rule of the
/// copy (`kind`).
async fn check_data(
    ctx: &mut ScenarioCtx,
    node: Option<&Node>,
    written: &Option<(Marker, Placement)>,
    made: &[Volume],
    kind: Kind,
) -> Result<(), CheckOutcome> {
    let (Some(node), Some((marker, placement))) = (node, written) else { return Ok(()) };
    let sample: Vec<usize> = if made.len() <= 4 {
        (0..made.len()).collect()
    } else {
        let picked: BTreeSet<usize> = [0, made.len() / 2, made.len() - 1].into();
        let ids: Vec<&str> = picked.iter().map(|&i| made[i].id.as_str()).collect();
        note(ctx, format!("the source's marker was looked for in {} of the {} {}s: {}", picked.len(), made.len(), kind.noun, ids.join(", ")));
        picked.into_iter().collect()
    };
    let (requirement, label) = if kind.noun == "clone" { (FROM_VOLUME, "clone-content") } else { (FROM_SNAPSHOT, "snapshot-content") };
    let mut missing = Vec::new();
    for i in sample {
        let volume = &made[i];
        let Some(local) = publish(ctx, node, volume).await? else {
            note(ctx, format!("{} {} is not seen mounted on node 0 after NodePublishVolume: its content is not checked", kind.noun, volume.id));
            take_down(ctx, node, volume).await?;
            continue;
        };
        match marker::verify(&local, placement, marker, &[]) {
            Ok(Some((place, mismatch))) => missing.push(format!("{}: {}", volume.id, mismatch.describe(&place, marker))),
            Ok(None) => {}
            Err(e) => tracing::info!(volume = volume.id, "marker not read ({e}): no content verdict"),
        }
        take_down(ctx, node, volume).await?;
    }
    if !missing.is_empty() {
        let mut f = Finding::new(
            Severity::Fail,
            label,
            format!(
                "{} {}(s) made at once from one source do not hold the content the source had when they were made (its \
                 marker, written and read back before): {}",
                missing.len(),
                kind.noun,
                missing.join("; ")
            ),
        );
        f.rpc = Some("CreateVolume".into());
        f.requirements = vec![requirement.to_owned()];
        ctx.push(f);
    }
    Ok(())
}

/// Snapshots listed now that were not `before` and that no answer named, each seen in a
/// second listing too before it counts.
async fn snapshot_ghosts(ctx: &mut ScenarioCtx, before: Vec<String>, known: &BTreeSet<String>) -> Result<Vec<String>, CheckOutcome> {
    let before: BTreeSet<String> = before.into_iter().collect();
    let fresh = |listed: Vec<String>| -> BTreeSet<String> {
        listed.into_iter().filter(|id| !before.contains(id) && !known.contains(id)).collect()
    };
    let first = fresh(listed_snapshots(ctx).await?.unwrap_or_default());
    if first.is_empty() {
        return Ok(Vec::new());
    }
    let second = fresh(listed_snapshots(ctx).await?.unwrap_or_default());
    Ok(first.intersection(&second).cloned().collect())
}

/// A volume or snapshot listed (and seen again) that no answer named: warned.
fn ghost_found(ctx: &mut ScenarioCtx, noun: &str, id: &str) {
    let mut f = Finding::new(
        Severity::Warn,
        if noun == "volume" { "ghost-volume" } else { "ghost-snapshot" },
        format!(
            "after snapshots and clones of one source were made at once, the plugin holds {noun} {id}, which no answer \
             named and which was not there before (listed, and seen again): calls running at once should be handled \
             gracefully (#concurrency); it is deleted now"
        ),
    );
    f.rpc = Some(if noun == "volume" { "ListVolumes" } else { "ListSnapshots" }.into());
    f.requirements = vec![GRACEFUL.to_owned()];
    ctx.push(f);
}

/// DeleteSnapshot, which must answer OK.
async fn delete_snapshot(ctx: &mut ScenarioCtx, snapshot_id: &str) -> Result<(), CheckOutcome> {
    let request = proto::to_dynamic(&v1::DeleteSnapshotRequest { snapshot_id: snapshot_id.to_owned(), ..Default::default() });
    call_ok(ctx, "DeleteSnapshot", request, None).await.map(drop)
}
