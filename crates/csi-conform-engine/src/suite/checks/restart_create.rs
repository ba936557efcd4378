//! The `restart-create` check: a CreateVolume sent while the controller plugin is restarted
//! (`--restart-controller-cmd`, or in-process for the bundled plugin), so that its answer may never come, then the same request
//! asked again once the plugin answers Probe ready, as a CO does with a call in doubt
//! (#timeouts: "the CO MAY retry"; the plugin must pick up where it left off). One volume
//! for the name, and no other new one in the listing.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    Check, CheckDef, CheckFuture,
    node_restart::{can_restart_controller, restart_controller},
    stress_support::{delete, ghosts_seen_twice, listed_volumes, note, volume_id_in},
    support::{OwnCapability, capability_arg, create_request},
};
use crate::{
    report::Severity,
    suite::{
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg, call_finding},
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<RestartCreate>()];

struct RestartCreate;

impl Check for RestartCreate {
    type Args = OwnCapability;
    const NAME: &'static str = "restart-create";
    const DESCRIPTION: &'static str = "sends a CreateVolume while the controller plugin is restarted (--restart-controller-cmd, or in-process for the bundled plugin), waits for Probe ready (reported), asks again with the same name: one volume, the one any earlier OK named, and no other new volume in ListVolumes";
    const RPCS: &'static [&'static str] = &["CreateVolume", "ListVolumes", "ControllerGetVolume", "DeleteVolume", "Probe"];

    fn demand(_: &OwnCapability, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { volumes: 1, ..CheckDemand::default() }
    }

    fn cost(_: &OwnCapability, _: &CheckUse<'_>) -> u64 {
        8
    }

    fn run(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckFuture<'_> {
        Box::pin(restart_create(ctx, args))
    }
}

/// Waits until the CreateVolume in flight has reached the plugin: a volume listed that was
/// not listed `before`, or its answer come (`answered`), polling at the listing's own pace
/// (its observed p90). Without a listing, as long as the controller's calls take (the p90 of
/// CreateVolume so far). Under load, a fixed wait could restart the plugin before the call
/// reached it, and a plugin that forgets its names would then pass.
async fn reached(ctx: &mut ScenarioCtx, before: Option<&[String]>, answered: &std::sync::atomic::AtomicBool) -> Result<(), CheckOutcome> {
    let Some(before) = before else {
        if let Some(reach) = ctx.latency("CreateVolume", None) {
            tokio::time::sleep(reach).await;
        }
        return Ok(());
    };
    while !answered.load(std::sync::atomic::Ordering::SeqCst) {
        let listed = listed_volumes(ctx).await?.unwrap_or_default();
        if listed.iter().any(|id| !before.contains(id)) {
            break;
        }
        tokio::time::sleep(ctx.latency("ListVolumes", None).unwrap_or(std::time::Duration::from_millis(1))).await;
    }
    Ok(())
}

/// Requirement: creating an existing, compatible volume again answers OK with that volume.
const IDEMPOTENT: &str = "CreateVolume.idempotent";

async fn restart_create(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckOutcome {
    let capability = match capability_arg(ctx, &args.0) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, e),
    };
    if !can_restart_controller(ctx) {
        return CheckOutcome::Skip("restarting the controller plugin needs --restart-controller-cmd".into());
    }
    let before = match listed_volumes(ctx).await {
        Ok(listed) => listed,
        Err(outcome) => return outcome,
    };
    let request = create_request(ctx, format!("{}-restart", ctx.name()), &capability);
    // An in-process restart starts at once, where a command takes the time of a process start:
    // it waits until the create has reached the plugin (see [`reached`]), so that what the
    // restart can lose is the answer, not the call.
    let in_process = ctx.restarts().controller.is_none() && ctx.restarts().in_process.is_some();
    // The create and the restart at once: the create's answer may be lost with the process.
    let mut fork = ctx.fork();
    let answered = std::sync::atomic::AtomicBool::new(false);
    let (first, restarted) = {
        let create = async {
            let answer = fork.call("CreateVolume", request.clone(), None).await;
            answered.store(true, std::sync::atomic::Ordering::SeqCst);
            answer
        };
        let restart = async {
            tokio::task::yield_now().await;
            if in_process {
                reached(ctx, before.as_deref(), &answered).await?;
            }
            restart_controller(ctx).await
        };
        tokio::join!(create, restart)
    };
    ctx.absorb(fork);
    let restarted = match restarted {
        Ok(restarted) => restarted,
        Err(outcome) => return outcome,
    };
    let first = match &first {
        Ok(response) => volume_id_in(response),
        Err(e) => {
            tracing::info!("CreateVolume sent during the restart answered {} ({}): asked again", e.code_name(), e.message);
            None
        }
    };
    note(ctx, restarted.note("controller"));
    let again = match ctx.call("CreateVolume", request.clone(), None).await {
        Ok(response) => volume_id_in(&response),
        Err(e) => return ctx.call_failed(&e, &request, "OK (the same CreateVolume, asked again after the restart)"),
    };
    if let (Some(first), Some(again)) = (&first, &again)
        && first != again
    {
        let message = format!(
            "CreateVolume answered OK with volume {first} as the controller plugin was restarted, and the same \
             request after the restart names volume {again}: a CreateVolume for an existing compatible volume MUST answer \
             OK with that volume (#createvolume)"
        );
        let mut f = call_finding(Severity::Fail, "duplicate-volume", message, "CreateVolume", &request);
        (f.expected, f.got) = (Some(first.clone()), Some(again.clone()));
        f.requirements = vec![IDEMPOTENT.to_owned()];
        ctx.push(f);
        return CheckOutcome::Done(BTreeMap::new());
    }
    let known: BTreeSet<String> = first.into_iter().chain(again).collect();
    let confirmed = match ghosts_seen_twice(ctx, before, &known).await {
        Ok(confirmed) => confirmed,
        Err(outcome) => return outcome,
    };
    for ghost in confirmed {
        let message = format!(
            "a CreateVolume sent while the controller plugin restarted, asked again after it, leaves volume {ghost} beside \
             the one the answer named ({}): one name, one volume; CreateVolume MUST be idempotent (#createvolume); it is \
             deleted now",
            known.iter().cloned().collect::<Vec<_>>().join(", ")
        );
        let mut f = call_finding(Severity::Fail, "ghost-volume", message, "CreateVolume", &request);
        f.requirements = vec![IDEMPOTENT.to_owned()];
        ctx.push(f);
        if let Err(outcome) = delete(ctx, &ghost).await {
            return outcome;
        }
    }
    CheckOutcome::Done(BTreeMap::new())
}
