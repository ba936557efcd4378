//! The `publish-race` check: ControllerPublishVolume of several volumes of its own to node 0,
//! all sent at once, as a CO with several attach workers sends them (the external-attacher;
//! Nomad before PR #17996). A publish the plugin refuses under the overlap and serves alone
//! afterwards is its failure to handle calls the spec lets a CO overlap (calls on different
//! volumes); so is one device named in the publish_context of two of them (see
//! [`device_entries`] for what names a device). Every volume is then unpublished and deleted.

use std::collections::{BTreeMap, HashMap};

use super::{
    Check, CheckDef, CheckFuture,
    stress_support::{
        Volume, controller_publish, controller_unpublish, create, delete, extra_leases, node_id, note, typed_capability,
    },
    support::{OwnCapability, capability_arg},
};
use crate::{
    proto::v1,
    report::{Finding, Severity},
    suite::{
        answer::rpc_error_finding,
        catalog::{CheckDemand, CheckUse},
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<PublishRace>()];

struct PublishRace;

impl Check for PublishRace {
    type Args = OwnCapability;
    const NAME: &'static str = "publish-race";
    const DESCRIPTION: &'static str = "publishes --stress-volumes volumes of its own to node 0 with ControllerPublishVolume calls sent at once (as many as the budgets hold): a publish refused under the overlap and served alone afterwards warns; then unpublishes and deletes them";
    const RPCS: &'static [&'static str] = &["CreateVolume", "ControllerPublishVolume", "ControllerUnpublishVolume", "DeleteVolume"];

    /// Two volumes at least; the rest are further leases taken when it runs (as many as
    /// fit, up to --stress-volumes).
    fn demand(_: &OwnCapability, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { volumes: 2, publish: vec![2], ..CheckDemand::default() }
    }

    fn cost(_: &OwnCapability, _: &CheckUse<'_>) -> u64 {
        16
    }

    fn run(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckFuture<'_> {
        Box::pin(publish_race(ctx, args))
    }
}

/// Requirement: calls racing are handled gracefully (the spec holds a CO to one call in flight
/// per volume, so calls on different volumes overlap in any CO with several workers).
const GRACEFUL: &str = "General.concurrency.graceful";

async fn publish_race(ctx: &mut ScenarioCtx, args: OwnCapability) -> CheckOutcome {
    let capability = match capability_arg(ctx, &args.0) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, e),
    };
    let Some(typed) = typed_capability(&capability) else { return bad_arg(ctx, "argument capability does not decode".into()) };
    let node = match node_id(ctx) {
        Ok(id) => id,
        Err(outcome) => return outcome,
    };
    let want = ctx.stress().volumes.max(2);
    let leases = extra_leases(ctx, want - 2, true);
    let count = 2 + leases.len();
    if count < want as usize {
        note(ctx, format!("published {count} volumes at once of the {want} asked (--stress-volumes): the run's budgets hold no more"));
    }
    let mut volumes = Vec::new();
    for i in 0..count {
        match create(ctx, &format!("v{i}"), &capability).await {
            Ok(v) => volumes.push(v),
            Err(outcome) => return outcome,
        }
    }
    // Racing forks: with --orchestrator the run serialises ControllerPublishVolume calls, which
    // would hide the very overlap this check is about.
    let mut forks: Vec<ScenarioCtx> = volumes.iter().map(|_| ctx.fork_racing()).collect();
    let answers = futures_util::future::join_all(forks.iter_mut().zip(&volumes).map(|(fork, volume)| {
        let (node, typed) = (node.clone(), typed.clone());
        async move { controller_publish(fork, volume, &node, &typed).await }
    }))
    .await;
    for fork in forks {
        ctx.absorb(fork);
    }
    // Each publish refused under the overlap, asked again alone now that the others are done.
    let mut refused = Vec::new();
    let mut aborted = 0usize;
    let mut contexts: Vec<(usize, HashMap<String, String>)> = Vec::new();
    for (i, (volume, answer)) in volumes.iter().zip(answers).enumerate() {
        let (raced, request) = match answer {
            Ok(context) => {
                contexts.push((i, context));
                continue;
            }
            Err(refusal) => refusal,
        };
        match controller_publish(ctx, volume, &node, &typed).await {
            // ABORTED is the code a CO retries; the spec names it for a call pending on the
            // same volume only, but a plugin that serialises its calls so loses nothing.
            Ok(context) if raced.code == tonic::Code::Aborted => {
                aborted += 1;
                contexts.push((i, context));
            }
            Ok(context) => {
                refused.push((volume.id.clone(), raced, request));
                contexts.push((i, context));
            }
            Err((e, _)) if e.code == tonic::Code::ResourceExhausted => note(
                ctx,
                format!(
                    "ControllerPublishVolume of volume {} answered RESOURCE_EXHAUSTED, also alone, with up to {} volumes \
                     published to node {node}: the node holds no more (no verdict)",
                    volume.id,
                    count - 1
                ),
            ),
            Err((e, request)) => return ctx.call_failed(&e, &request, "OK"),
        }
    }
    if aborted > 0 {
        note(
            ctx,
            format!(
                "{aborted} of {count} ControllerPublishVolume calls for different volumes sent at once answered ABORTED and OK \
                 alone afterwards: the plugin serialises its calls, and a CO retries ABORTED (no verdict)"
            ),
        );
    }
    if let Some((_, raced, request)) = refused.first() {
        let ids: Vec<&str> = refused.iter().map(|(id, _, _)| id.as_str()).collect();
        let message = format!(
            "{} of {count} ControllerPublishVolume calls for different volumes to node {node}, sent at once, answered {} \
             (volumes {}), and each answered OK when asked again alone. The spec holds a CO to one call in \
             flight per volume (#concurrency), so calls for different volumes overlap in any CO with several attach \
             workers (the external-attacher; Nomad before PR #17996, which serialised every controller call for this), \
             and the plugin should handle them",
            refused.len(),
            raced.code_name(),
            ids.join(", ")
        );
        let mut f = rpc_error_finding(raced, request, Severity::Warn, "race-refused", message, Some("OK".into()));
        f.requirements = vec![GRACEFUL.to_owned()];
        ctx.push(f);
    }
    if let Err(outcome) = shared_devices(ctx, &volumes, &contexts, &node, &typed).await {
        return outcome;
    }
    ctx.reached(crate::orchestrator::ids::CONCURRENCY_CONTROLLER);
    for volume in &volumes {
        if let Err(outcome) = controller_unpublish(ctx, volume, &node).await {
            return outcome;
        }
        if let Err(outcome) = delete(ctx, &volume.id).await {
            return outcome;
        }
    }
    drop(leases);
    CheckOutcome::Done(BTreeMap::new())
}

/// The publish_context entries that name a device on the node: a value that is a path under
/// `/dev/` (`/dev/xvdba`, `/dev/disk/by-id/...`), or an absolute path under a key whose last
/// word is `device` or `devicePath` (case-insensitive; `csi.example.com/device`,
/// `devicePath`, `device_path`). Other entries (portals, LUN numbers, flags) may lawfully be
/// the same for several volumes, and publish_context is otherwise opaque to a CO.
pub(super) fn device_entries(context: &HashMap<String, String>) -> Vec<(String, String)> {
    let mut entries: Vec<(String, String)> = context
        .iter()
        .filter(|(key, value)| {
            let key = key.to_ascii_lowercase().replace(['_', '-'], "");
            value.starts_with("/dev/") || (value.starts_with('/') && (key.ends_with("device") || key.ends_with("devicepath")))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    entries.sort();
    entries
}

/// Two volumes published to node `node` at once whose publish_context names one device
/// (first witness: the answers under the overlap), asked again alone (second witness: what
/// the plugin says it holds for each, ControllerPublishVolume being idempotent): still one
/// device for both warns. A later answer that names another device is no verdict.
async fn shared_devices(
    ctx: &mut ScenarioCtx,
    volumes: &[Volume],
    contexts: &[(usize, HashMap<String, String>)],
    node: &str,
    typed: &v1::VolumeCapability,
) -> Result<(), CheckOutcome> {
    let mut holders: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, context) in contexts {
        for entry in device_entries(context) {
            holders.entry(entry).or_default().push(*i);
        }
    }
    for ((key, device), shared) in holders.into_iter().filter(|(_, v)| v.len() > 1) {
        let mut again = Vec::new();
        for &i in &shared {
            match controller_publish(ctx, &volumes[i], node, typed).await {
                Ok(context) if context.get(&key) == Some(&device) => again.push(volumes[i].id.clone()),
                Ok(_) => tracing::info!(volume = volumes[i].id, "a shared device not named again alone: no verdict"),
                Err((e, request)) => return Err(ctx.call_failed(&e, &request, "OK (the same publish again, alone)")),
            }
        }
        if again.len() < 2 {
            continue;
        }
        let mut f = Finding::new(
            Severity::Warn,
            "device-shared",
            format!(
                "ControllerPublishVolume of volumes {} to node {node}, sent at once, answered each with publish_context \
                 {key}={device}, and answered so again when asked alone: one device for several volumes on one node, so \
                 the node, which finds the volume by that entry, would stage one volume's data for the other \
                 (hashicorp/nomad#8336, #17996). publish_context is opaque to a CO and no MUST of the spec says its \
                 values differ, so this warns: calls for different volumes overlap in any CO with several attach workers \
                 and the plugin should handle them (#concurrency)",
                again.join(", ")
            ),
        );
        f.rpc = Some("ControllerPublishVolume".into());
        (f.expected, f.got) = (Some("a device of its own for each volume".into()), Some(format!("{key}={device} for {}", again.join(", "))));
        f.requirements = vec![GRACEFUL.to_owned()];
        ctx.push(f);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(entries: &[(&str, &str)]) -> HashMap<String, String> {
        entries.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_device_is_a_dev_path_or_a_path_under_a_device_key() {
        let named = device_entries(&context(&[
            ("devicePath", "/dev/xvdba"),
            ("csi.example.com/device", "/var/lib/disk7"),
            ("device_path", "/host/disk"),
            ("anything", "/dev/disk/by-id/scsi-1"),
        ]));
        assert_eq!(named.len(), 4, "{named:?}");
        // Portals, LUNs, flags and a device *type* may lawfully be the same for several volumes.
        let unnamed = device_entries(&context(&[
            ("targetPortal", "10.0.0.1:3260"),
            ("lun", "0"),
            ("deviceType", "/dev-like"),
            ("device", "virtio"),
            ("readonly", "false"),
        ]));
        assert!(unnamed.is_empty(), "{unnamed:?}");
    }
}
