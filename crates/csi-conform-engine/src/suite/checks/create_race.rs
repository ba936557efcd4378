//! The `create-race` check: the same CreateVolume (one name) sent `--stress-calls` times at
//! once, as a CO that lost its state sends it (#concurrency). Every OK must name one volume,
//! ABORTED is lawful, and afterwards the plugin has the volume they named (`stress_lost`) and
//! lists no volume the run was never told of.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    Check, CheckDef, CheckFuture,
    stress_lost::{self, Objects},
    stress_support::{delete, ghosts_seen_twice, listed_volumes, note, volume_id_in},
    support::{OwnCapability, capability_arg, create_request},
};
use crate::{
    client::RpcError,
    report::Severity,
    suite::{
        answer::rpc_error_finding,
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg, call_finding},
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<CreateRace>()];

struct CreateRace;

impl Check for CreateRace {
    type Args = OwnCapability;
    const NAME: &'static str = "create-race";
    const DESCRIPTION: &'static str = "sends the same CreateVolume (one name) --stress-calls times at once: every OK names one volume (ABORTED is lawful), a lone retry names it too, the plugin has it (listed, or found alone), and ListVolumes shows no other new volume";
    const RPCS: &'static [&'static str] = &["CreateVolume", "ListVolumes", "ControllerGetVolume", "DeleteVolume"];

    /// One volume, if the plugin keeps its word; the scenario holds `volumes` exclusively
    /// so that a new listed volume can only be this check's.
    fn demand(_: &OwnCapability, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { volumes: 1, ..CheckDemand::default() }
    }

    fn cost(_: &OwnCapability, _: &CheckUse<'_>) -> u64 {
        8
    }

    fn run(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckFuture<'_> {
        Box::pin(create_race(ctx, args))
    }
}

/// Requirement: creating an existing, compatible volume again answers OK with that volume.
const IDEMPOTENT: &str = "CreateVolume.idempotent";
/// Requirement: calls racing on one volume are handled gracefully (ABORTED allowed).
const GRACEFUL: &str = "General.concurrency.graceful";

async fn create_race(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckOutcome {
    let capability = match capability_arg(ctx, &args.0) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, e),
    };
    let calls = ctx.stress().calls.max(2) as usize;
    let before = match listed_volumes(ctx).await {
        Ok(listed) => listed,
        Err(outcome) => return outcome,
    };
    let name = format!("{}-same", ctx.name());
    let request = create_request(ctx, name, &capability);
    let mut forks: Vec<ScenarioCtx> = (0..calls).map(|_| ctx.fork()).collect();
    let answers = futures_util::future::join_all(forks.iter_mut().map(|fork| {
        let request = request.clone();
        async move { fork.call("CreateVolume", request, None).await }
    }))
    .await;
    for fork in forks {
        ctx.absorb(fork);
    }
    let mut named: BTreeMap<String, usize> = BTreeMap::new();
    let mut aborted = 0usize;
    let mut refused: Vec<RpcError> = Vec::new();
    for answer in answers {
        match answer {
            // An OK without an id is the response rules' finding (answer.create-volume.volume-id).
            Ok(response) => {
                if let Some(id) = volume_id_in(&response) {
                    *named.entry(id).or_default() += 1;
                }
            }
            Err(e) if e.code == tonic::Code::Aborted => aborted += 1,
            Err(e) => refused.push(e),
        }
    }
    // The same request alone, now that nothing is in flight: what the plugin says the name is.
    let alone = match ctx.call("CreateVolume", request.clone(), None).await {
        Ok(response) => volume_id_in(&response),
        Err(e) => return ctx.call_failed(&e, &request, "OK (the same request, alone, after the race)"),
    };
    if let Some(e) = refused.first() {
        // The lone call was served: the refusal came of the overlap, which the spec asks a
        // plugin to handle gracefully, ABORTED being the answer it allows.
        let message = format!(
            "{} of {calls} identical CreateVolume calls sent at once answered {} (the same request alone answers OK): a call \
             racing another on the same volume should be handled gracefully, ABORTED being the code the spec allows for it \
             (#concurrency)",
            refused.len(),
            e.code_name()
        );
        let mut f = rpc_error_finding(e, &request, Severity::Warn, "race-refused", message, Some("OK or ABORTED".into()));
        f.requirements = vec![GRACEFUL.to_owned()];
        ctx.push(f);
    }
    if named.len() > 1 {
        let ids: Vec<String> = named.iter().map(|(id, n)| format!("{id} ({n}x)")).collect();
        let message = format!(
            "{calls} identical CreateVolume calls (one name) sent at once were answered OK with {} different volumes: {}; \
             one name is one volume, and a CreateVolume for an existing compatible volume MUST answer OK with that volume \
             (#createvolume){}",
            named.len(),
            ids.join(", "),
            alone.as_ref().map(|id| format!("; the same request alone now names {id}")).unwrap_or_default()
        );
        let mut f = call_finding(Severity::Fail, "duplicate-volume", message, "CreateVolume", &request);
        (f.expected, f.got) = (Some("every OK names one volume".into()), Some(format!("{} volumes", named.len())));
        f.requirements = vec![IDEMPOTENT.to_owned()];
        ctx.push(f);
        return CheckOutcome::Done(BTreeMap::new());
    }
    if let (Some(id), Some(alone)) = (named.keys().next(), &alone)
        && id != alone
    {
        let message = format!(
            "identical CreateVolume calls sent at once all named volume {id}, and the same request alone afterwards names \
             {alone}: a CreateVolume for an existing compatible volume MUST answer OK with that volume (#createvolume)"
        );
        let mut f = call_finding(Severity::Fail, "duplicate-volume", message, "CreateVolume", &request);
        (f.expected, f.got) = (Some(id.clone()), Some(alone.clone()));
        f.requirements = vec![IDEMPOTENT.to_owned()];
        ctx.push(f);
        return CheckOutcome::Done(BTreeMap::new());
    }
    if aborted > 0 {
        note(
            ctx,
            format!("{aborted} of {calls} identical CreateVolume calls sent at once answered ABORTED: lawful for calls racing on one volume (#concurrency)"),
        );
    }
    // Nothing else new in the listing: the scenario holds the volumes exclusively, so a
    // volume listed now and not before, that no answer named, came of this race.
    let known: BTreeSet<String> = named.keys().cloned().chain(alone).collect();
    // The volume the answers named is not deleted yet: the plugin must have it.
    if let Err(outcome) = stress_lost::lost(ctx, Objects::Volumes, &known, &format!("{calls} identical CreateVolume calls sent at once")).await {
        return outcome;
    }
    let confirmed = match ghosts_seen_twice(ctx, before, &known).await {
        Ok(confirmed) => confirmed,
        Err(outcome) => return outcome,
    };
    for ghost in confirmed {
        let message = format!(
            "after {calls} identical CreateVolume calls sent at once, the plugin holds volume {ghost}, which no answer named \
             and which was not there before (listed by ListVolumes and seen again): CreateVolume MUST be idempotent, one \
             name one volume (#createvolume); it is deleted now"
        );
        let mut f = call_finding(Severity::Fail, "ghost-volume", message, "CreateVolume", &request);
        (f.expected, f.got) = (Some(format!("only {}", known.iter().cloned().collect::<Vec<_>>().join(", "))), Some(ghost.clone()));
        f.requirements = vec![IDEMPOTENT.to_owned()];
        ctx.push(f);
        if let Err(outcome) = delete(ctx, &ghost).await {
            return outcome;
        }
    }
    CheckOutcome::Done(BTreeMap::new())
}
