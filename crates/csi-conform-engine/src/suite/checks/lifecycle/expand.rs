//! The `lifecycle` check's `expand` argument: ControllerExpandVolume before the volume is
//! published (as the base `node-expand.after-publish` scenario orders it), then NodeExpandVolume
//! on each node it is published on. In an orchestrator instance NodeExpandVolume is sent as that
//! orchestrator sends it (`fields.expand-staging-path`): the kubelet gives a multi-node block
//! volume no staging_target_path (volume_path is the pod's publish file), Nomad gives the
//! claim's target and the usage's staging path, Swarm never expands. The spec makes
//! staging_target_path OPTIONAL (spec.md#nodeexpandvolume), so a plugin that refuses a call
//! without it, and takes the same call with it, fails where the orchestrator leaves it out.

use super::*;
use crate::orchestrator::ids;

impl Plan {
    /// Why an expanding plan does not run here: the instance's orchestrator never expands.
    pub(super) fn expand_skip_reason(&self, ctx: &ScenarioCtx) -> Option<String> {
        let p = ctx.pattern()?;
        (self.expand && !p.expands).then(|| {
            p.undriven(ids::EXPAND_STAGING_PATH)
                .unwrap_or("the orchestrator never expands a volume")
                .to_owned()
        })
    }
}

impl Lifecycle<'_> {
    /// With `expand`: ControllerExpandVolume of the new volume to twice its size, when the
    /// controller advertises EXPAND_VOLUME. Returns whether NodeExpandVolume is to follow (the
    /// node advertises EXPAND_VOLUME and the controller, if it expanded, asked for it).
    pub(super) async fn controller_expand(&mut self) -> Result<bool, CheckOutcome> {
        if !self.plan.expand {
            return Ok(false);
        }
        // What the controller answers is filed under the expansion row, which only
        // NodeExpandVolume exercises.
        if self.pattern.is_some() {
            self.ctx.set_behaviour(Some(ids::EXPAND_STAGING_PATH));
        }
        let node_expands = self.node_supports(0, NodeCapability::ExpandVolume);
        if !self.supports(Capability::Controller(ControllerCapability::ExpandVolume)) {
            return Ok(node_expands);
        }
        let request = v1::ControllerExpandVolumeRequest {
            volume_id: self.volume_id.clone(),
            capacity_range: Some(self.expanded_range()),
            volume_capability: Some(self.plan.node_capability()),
            ..Default::default()
        };
        let response = self.call("ControllerExpandVolume", proto::to_dynamic(&request), None, 1).await?;
        let answer: v1::ControllerExpandVolumeResponse = typed(&response);
        Ok(node_expands && answer.node_expansion_required)
    }

    /// The capacity the volume is expanded to: twice the size it was created with.
    fn expanded_range(&self) -> v1::CapacityRange {
        v1::CapacityRange { required_bytes: self.ctx.small_expand_size(), limit_bytes: 0 }
    }

    /// NodeExpandVolume of the volume published on `node`, at its target path, with the
    /// staging path where the plugin stages, unless the orchestrator leaves it out. A refusal
    /// without the staging path is tried again with it: if that is taken, the plugin needs a
    /// field the spec makes OPTIONAL and the orchestrator does not send (a failure there).
    pub(super) async fn node_expand(&mut self, node: &NodeUse) -> Result<(), CheckOutcome> {
        let mut request = v1::NodeExpandVolumeRequest {
            volume_id: self.volume_id.clone(),
            volume_path: node.target.display().to_string(),
            capacity_range: Some(self.expanded_range()),
            staging_target_path: if node.stage { node.staging.display().to_string() } else { String::new() },
            volume_capability: Some(self.plan.node_capability()),
            ..Default::default()
        };
        let Some(p) = self.pattern else {
            self.call("NodeExpandVolume", proto::to_dynamic(&request), Some(node.index), 1).await?;
            return Ok(());
        };
        self.exercise(ids::EXPAND_STAGING_PATH);
        let omitted = p.expands_shared_block_unstaged && self.plan.block && self.plan.mode.is_multi_node();
        let staging = std::mem::take(&mut request.staging_target_path);
        if !omitted {
            request.staging_target_path = staging;
            self.call("NodeExpandVolume", proto::to_dynamic(&request), Some(node.index), 1).await?;
            return Ok(());
        }
        let (sent, answer) = self.send("NodeExpandVolume", proto::to_dynamic(&request), Some(node.index)).await;
        let refusal = match answer {
            Ok(_) => return Ok(()),
            Err(e) if e.is_unreachable() || staging.is_empty() => return Err(self.ctx.call_failed(&e, &sent, "OK")),
            Err(e) => e,
        };
        request.staging_target_path = staging;
        let (again, answer) = self.send("NodeExpandVolume", proto::to_dynamic(&request), Some(node.index)).await;
        if let Err(e) = answer {
            return Err(self.ctx.call_failed(&e, &again, "OK"));
        }
        let title = p.orchestrator.title();
        let message = format!(
            "NodeExpandVolume of this multi-node block volume without a staging_target_path answered {} ({}), and OK \
             with {}: will not work under {title}, which sends none there (volume_path is the workload's publish path \
             {}); the spec makes staging_target_path OPTIONAL (spec.md#nodeexpandvolume), so a plugin must find the \
             volume from volume_path",
            refusal.code_name(),
            refusal.message,
            request.staging_target_path,
            node.target.display()
        );
        let mut f = call_finding(Severity::Fail, "expand-staging-path", message, "NodeExpandVolume", &sent);
        (f.expected, f.got, f.plugin_message) =
            (Some("OK".to_owned()), Some(refusal.code_name().to_owned()), Some(refusal.message.clone()));
        self.ctx.push(f);
        Ok(())
    }
}
