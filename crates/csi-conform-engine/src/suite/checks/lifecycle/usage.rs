//! The `lifecycle` check's `second_usage`: the volume, published read-write on node 0, used
//! read-only there too by a second workload, as an orchestrator that stages a volume once per
//! use does it (Nomad: a staging path per use, `paths.staging-per-usage`). Only in an
//! orchestrator instance; under one that stages a volume once per node, a skip that says so.

use super::*;
use crate::orchestrator::ids;

/// What the CO bends when it stages one volume twice on a node: the spec's reference counting
/// ("NodeStageVolume MUST be called and return success once per volume per node") and the
/// staging path's "only one `staging_target_path` per volume" (#nodestagevolume).
const ONCE_PER_NODE: &str = "NodeStageVolume.stage-before-publish";

/// The `second_usage` argument: false by default; true only in an orchestrator instance and
/// with an access mode that lets a node publish the volume at two targets.
pub(super) fn second_usage_arg(ctx: &ScenarioCtx, second_usage: bool, mode: AccessMode) -> Result<bool, String> {
    if !second_usage {
        return Ok(false);
    }
    if ctx.pattern().is_none() {
        return Err(format!(
            "second_usage runs only as an orchestrator instance (tag the scenario {} and run with --orchestrator)",
            crate::suite::model::ORCHESTRATOR_ONLY
        ));
    }
    if !allows_several_targets(mode) {
        return Err(format!("second_usage needs a mode that allows two targets on a node (MULTI_NODE_*), not {mode}"));
    }
    Ok(true)
}

impl Plan {
    /// Why the second use does not apply here: the orchestrator stages a volume once per
    /// node, or node 0 does not stage at all.
    pub(super) fn second_usage_skip(&self, ctx: &ScenarioCtx) -> Option<String> {
        let p = ctx.pattern().filter(|_| self.second_usage)?;
        let title = p.orchestrator.title();
        if !p.stages_per_usage {
            return Some(format!(
                "{title} stages a volume once per node, at one staging path, however many workloads use it there: a \
                 second use is only a second publication (paths.staging-per-usage is Nomad's)"
            ));
        }
        let stages = ctx.fingerprint().nodes.first().is_some_and(|n| n.capabilities.contains(&NodeCapability::StageUnstageVolume));
        (!stages).then(|| {
            format!("node 0 does not advertise STAGE_UNSTAGE_VOLUME: {title} stages nothing, so not once per use either")
        })
    }
}

impl Lifecycle<'_> {
    /// With the volume staged and published on `first` (node 0) for a read-write use: a
    /// read-only use beside it, staged at a staging path of its own and published read-only
    /// from there, as Nomad does for a second allocation that claims the volume read-only;
    /// then that use leaves (unpublished, and unstaged as its last allocation goes) and the
    /// first must still be published.
    ///
    /// A plugin that refuses the second staging path is right by the spec (the CO keeps one
    /// staging path per volume): a warning that it will not work under the orchestrator. A
    /// plugin that accepts it must keep its word: the read-only use works, and unstaging it
    /// leaves the other use alone ("MUST undo the work by the corresponding NodeStageVolume").
    pub(super) async fn second_usage(&mut self, first: &NodeUse) -> Result<(), CheckOutcome> {
        let Some(p) = self.pattern else { return Ok(()) };
        let title = p.orchestrator.title();
        let resume = self.ctx.behaviour();
        self.exercise(ids::STAGING_PER_USAGE);
        let mut second = first.clone();
        self.place_use(&mut second, true, "-ro")?;
        let request = self.stage_request(&second);
        let (sent, answer) = self.send("NodeStageVolume", proto::to_dynamic(&request), Some(second.index)).await;
        match answer {
            Ok(_) => {}
            Err(e) if e.is_unreachable() => return Err(self.ctx.call_failed(&e, &sent, "OK")),
            Err(e) => {
                let message = format!(
                    "NodeStageVolume of volume {}, staged on node {} at {}, at a second staging path {} (where {title} \
                     stages it for a read-only use beside the read-write one) answered {} ({}): a job that uses the \
                     volume read-only and read-write on one node does not start under {title}",
                    self.volume_id,
                    second.node_id,
                    first.staging.display(),
                    second.staging.display(),
                    e.code_name(),
                    e.message
                );
                let mut f = call_finding(Severity::Fail, "staging-per-usage", message, "NodeStageVolume", &sent);
                (f.got, f.plugin_message) = (Some(e.code_name().to_owned()), Some(e.message.clone()));
                f.requirements = vec![ONCE_PER_NODE.to_owned()];
                self.ctx.push(f);
                self.ctx.set_behaviour(resume);
                return Ok(());
            }
        }
        self.expect_kind(&second, &second.staging, PathKind::Directory, "NodeStageVolume").await?;
        let readonly = std::mem::replace(&mut self.plan.readonly, true);
        let published = self.publish(&second, &second.target, 1).await;
        self.plan.readonly = readonly;
        published?;
        self.unpublish(&second, &second.target).await?;
        self.unstage(&second).await?;
        let gone = if self.plan.block {
            matches!(first.inspector.kind(&first.target).await, Ok(Some(PathKind::NotFound)))
        } else {
            self.mounted_at(first, &first.target)?.is_some_and(|m| m.is_empty())
        };
        if gone {
            let message = format!(
                "after NodeUnstageVolume of the read-only use's staging path {}, the read-write use published at {} is \
                 gone, never unpublished: {title} unstages each use of a volume when its last allocation leaves, and \
                 unstaging one staging path must undo only what staging there did",
                second.staging.display(),
                first.target.display()
            );
            return Err(self.fail("path-state", message));
        }
        self.ctx.set_behaviour(resume);
        Ok(())
    }
}
