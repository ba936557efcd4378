//! The `lifecycle` check in an orchestrator instance (`<id>@<orchestrator>`): the points where
//! it follows the instance's [`CallPattern`] instead of the spec's own order (paths and the
//! directories the orchestrator makes, the requisite topology and how it is matched,
//! ValidateVolumeCapabilities, ControllerPublishVolume's capability, staging without a
//! directory, pod information), and `volumes: N`, several volumes on node 0 at once with
//! their ControllerPublishVolume calls overlapping where the orchestrator's do. Outside an
//! instance every function here leaves the lifecycle as it was.

use std::{
    cmp::Reverse,
    path::{Path, PathBuf},
};

use super::*;
use crate::orchestrator::{TopologyMatch, ids, paths::Use, validate};

/// The most volumes `volumes` takes.
pub(super) const MAX_VOLUMES: usize = 4;

/// The `volumes` argument: 1 by default; more only in an orchestrator instance.
pub(super) fn volumes_arg(ctx: &ScenarioCtx, volumes: i64) -> Result<usize, String> {
    match volumes {
        n if (1..=MAX_VOLUMES as i64).contains(&n) => {
            if n > 1 && ctx.pattern().is_none() {
                return Err(format!(
                    "volumes above 1 runs only as an orchestrator instance (tag the scenario {} and run with \
                     --orchestrator)",
                    crate::suite::model::ORCHESTRATOR_ONLY
                ));
            }
            Ok(n as usize)
        }
        other => Err(format!("argument volumes must be 1 to {MAX_VOLUMES}, not {other}")),
    }
}

/// Segments as sorted pairs.
fn pairs<'a>(segments: impl IntoIterator<Item = (&'a String, &'a String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = segments.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    out.sort();
    out
}

fn show(segments: &[(String, String)]) -> String {
    let inner: Vec<String> = segments.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", inner.join(", "))
}

impl Lifecycle<'_> {
    /// Files what follows under behaviour `id` (nothing outside an instance).
    pub(super) fn exercise(&mut self, id: &'static str) {
        self.ctx.exercise(id);
    }

    /// Before ControllerUnpublishVolume: the detach order, unless the orchestrator never
    /// unstaged (then what the controller answers stays under `rpc.unstage`).
    pub(super) fn exercise_detach(&mut self) {
        if self.pattern.is_some_and(|p| p.unstages) {
            self.exercise(ids::DETACH_ORDER);
        } else {
            self.ctx.followed(ids::DETACH_ORDER);
        }
    }

    /// The CreateVolume name of this volume: the scenario's, suffixed for the second and later.
    pub(super) fn volume_name(&self) -> String {
        match self.volume_index {
            0 => self.ctx.name().to_owned(),
            i => format!("{}-{i}", self.ctx.name()),
        }
    }

    /// Whether CreateVolume's requisite is the nodes' topologies (the spec-order lifecycle's
    /// and the kubelet's choice; Nomad and Swarm send the operator's, which a run has none of).
    pub(super) fn requisite_from_nodes(&mut self) -> bool {
        match self.pattern {
            None => true,
            Some(p) => {
                self.exercise(ids::TOPOLOGY_REQUISITE);
                p.requisite_from_nodes
            }
        }
    }

    /// Whether the orchestrator could place the new volume on the nodes, by its own rule: the
    /// first node (the one it is created for) must match, or no job could use the volume
    /// there; a later node that does not is one the orchestrator would not send it to.
    pub(super) fn match_topology(&mut self, nodes: &[NodeUse], volume: &[v1::Topology]) -> Result<(), CheckOutcome> {
        let Some(p) = self.pattern else { return Ok(()) };
        if !self.supports(Capability::Plugin(PluginService::VolumeAccessibilityConstraints)) {
            return Ok(());
        }
        self.exercise(ids::TOPOLOGY_MATCH);
        let title = p.orchestrator.title();
        let topologies: Vec<Vec<(String, String)>> = volume.iter().map(|t| pairs(&t.segments)).collect();
        for node in nodes {
            let segments = pairs(&node.topology);
            if p.topology.matches(&segments, &topologies) {
                continue;
            }
            let shown: Vec<String> = topologies.iter().map(|t| show(t)).collect();
            let rule = match p.topology {
                TopologyMatch::Exact => "equal to the node's (no more, no fewer segments)",
                TopologyMatch::Subset => "contained in the node's",
            };
            if node.index > 0 {
                return Err(CheckOutcome::Skip(format!(
                    "the volume is accessible from {} only, which node {} ({}) is not in: {title} would not place it \
                     there",
                    shown.join(" or "),
                    node.node_id,
                    show(&segments)
                )));
            }
            let message = format!(
                "{title} could never place this volume on node {}: NodeGetInfo reports the node at {}, CreateVolume made \
                 the volume accessible from {}, and {title} needs one of the volume's topologies {rule}",
                node.node_id,
                show(&segments),
                shown.join(" or ")
            );
            return Err(self.fail("topology", message));
        }
        Ok(())
    }

    /// ValidateVolumeCapabilities as the orchestrator sends it: not at all (Kubernetes, Swarm),
    /// or with the capability the volume was created with, its answer judged by the
    /// orchestrator's own reconciliation (Nomad), which accepts no `confirmed` at all.
    pub(super) async fn validate_as(&mut self, p: &CallPattern) -> Result<(), CheckOutcome> {
        // Not sending it is the orchestrator's behaviour too (and nothing can break there).
        self.exercise(ids::VALIDATE_WHEN);
        if !p.validates {
            return Ok(());
        }
        let request = self.validate_request(self.plan.volume_capability());
        let response = self.call("ValidateVolumeCapabilities", proto::to_dynamic(&request), None, 1).await?;
        self.exercise(ids::VALIDATE_RECONCILE);
        if let Err(why) = validate::accepts(&request.volume_capabilities, &typed(&response)) {
            let message = format!(
                "{} refuses the volume: ValidateVolumeCapabilities {why}",
                p.orchestrator.title()
            );
            return Err(self.fail("confirmation", message));
        }
        Ok(())
    }

    /// ValidateVolumeCapabilities of this volume for `capability`, with its context and the
    /// run's parameters.
    pub(super) fn validate_request(&self, capability: v1::VolumeCapability) -> v1::ValidateVolumeCapabilitiesRequest {
        v1::ValidateVolumeCapabilitiesRequest {
            volume_id: self.volume_id.clone(),
            volume_context: self.context.clone(),
            volume_capabilities: vec![capability],
            parameters: self.ctx.requests().parameters.as_ref().clone().into_iter().collect(),
            ..Default::default()
        }
    }

    /// The capability ControllerPublishVolume gets: the node capability, or, under an
    /// orchestrator that always sends a mount access type (Swarm), that.
    pub(super) fn controller_capability(&mut self) -> v1::VolumeCapability {
        use v1::volume_capability::{AccessType, MountVolume};
        let mut capability = self.plan.node_capability();
        if self.plan.volumes > 1 {
            // Several volumes at once: what ControllerPublishVolume breaks is the overlap's.
            return capability;
        }
        match self.pattern {
            // Only a block volume's capability is bent (and a refusal of it is Swarm's
            // deviation); a mount volume's goes as the spec's lifecycle sends it.
            Some(p) if p.controller_publish_as_mount && self.plan.block => {
                self.exercise(ids::CAPABILITY);
                capability.access_type = Some(AccessType::Mount(MountVolume::default()));
            }
            Some(_) => {
                self.ctx.followed(ids::CAPABILITY);
                self.exercise(ids::READONLY);
            }
            None => {}
        }
        capability
    }

    /// Whether the node capability carries mount flags (which an orchestrator takes from its
    /// `fields.mount-options`).
    fn sends_mount_flags(&self) -> bool {
        use v1::volume_capability::AccessType;
        matches!(self.plan.node_capability().access_type, Some(AccessType::Mount(m)) if !m.mount_flags.is_empty())
    }

    /// After an OK answer of `rpc`: the mount flags it carried were followed.
    pub(super) fn followed_mount_options(&mut self, rpc: &str) {
        if self.pattern.is_some() && CARRY_NODE_CAPABILITY.contains(&rpc) && self.sends_mount_flags() {
            self.ctx.followed(ids::MOUNT_OPTIONS);
        }
    }

    /// Why the plugin declines the node capability, from ValidateVolumeCapabilities'
    /// `reconciliation` of it (spec-order lifecycle and instances alike): a volume need not
    /// support capabilities it was not created with (the spec's "Exceeds capabilities" refers
    /// the CO to ValidateVolumeCapabilities), so a plugin that said so may then refuse them.
    pub(super) fn declines(&self, reconciliation: &capability::Reconciliation) -> Option<String> {
        let unconfirmed = matches!(reconciliation.verdict, Verdict::Unconfirmed | Verdict::UnconfirmedSilent);
        let tolerated = super::super::confirm::severity(reconciliation.verdict, self.ctx.strict()) < Severity::Fail;
        (unconfirmed && tolerated && self.plan.node_capability() != self.plan.volume_capability())
            .then(|| reconciliation.summary())
    }

    /// In an instance whose node capability is not the one the volume was created with (other
    /// mount flags): ValidateVolumeCapabilities of it, sent by the harness whether or not the
    /// orchestrator sends it, only to learn whether the plugin declines it, so that a later
    /// refusal is judged as the spec-order lifecycle judges it. Its answer is filed under no
    /// behaviour and judged by the base scenario, which sends the same request.
    pub(super) async fn learn_declined(&mut self) {
        let capability = self.plan.node_capability();
        if capability == self.plan.volume_capability() {
            return;
        }
        let request = self.validate_request(capability);
        let behaviour = self.ctx.behaviour();
        self.ctx.set_behaviour(None);
        let (_, answer) = self.send("ValidateVolumeCapabilities", proto::to_dynamic(&request), None).await;
        self.ctx.set_behaviour(behaviour);
        if let Ok(response) = answer {
            self.declined = self.declines(&capability::reconcile(&request, &typed(&response)));
        }
    }

    /// `rpc` refused (`e`) a capability ValidateVolumeCapabilities had declined: not the
    /// plugin's fault (the scenario skips, as the spec-order one does). In an instance, also a
    /// warning that the plugin will not work where the orchestrator's mount flags differ from
    /// the volume's creation flags, filed under `fields.mount-options` (the access mode's row,
    /// `fields.capability`, where the orchestrator has none).
    pub(super) fn declined_refusal(&mut self, rpc: &str, sent: &DynamicMessage, e: &RpcError) -> CheckOutcome {
        let reason = format!(
            "the plugin does not support this capability on a volume created with other mount options: \
             ValidateVolumeCapabilities left it unconfirmed ({}) and {rpc} refused it ({}: {})",
            self.declined.as_deref().unwrap_or_default(),
            e.code_name(),
            e.message
        );
        if let Some(p) = self.pattern {
            let o = p.orchestrator;
            let message = format!(
                "{rpc} refused mount_flags the volume was not created with, which ValidateVolumeCapabilities had left \
                 unconfirmed ({}): will not work under {} where {} differ from the volume's creation flags",
                self.declined.as_deref().unwrap_or_default(),
                o.title(),
                p.mount_flags_from
            );
            let mut f = call_finding(Severity::Warn, "declined-capability", message, rpc, sent);
            (f.got, f.plugin_message) = (Some(e.code_name().to_owned()), Some(e.message.clone()));
            let row = [ids::MOUNT_OPTIONS, ids::CAPABILITY].into_iter().find(|id| o.behaviour(id).is_some());
            if let Some(id) = row {
                f.behaviour = Some(id.to_owned());
                self.ctx.followed(id);
            }
            self.ctx.push(f);
        }
        CheckOutcome::Skip(reason)
    }

    /// The node's staging and target paths in the orchestrator's layout, under a root in
    /// the node's scenario directory, and the directories the orchestrator makes (and only
    /// those). Everything on the way is removed after the scenario, deepest first.
    pub(super) fn place(&mut self, node: &mut NodeUse) -> Result<(), CheckOutcome> {
        self.place_use(node, self.plan.read_only(), "")
    }

    /// [`place`](Self::place) for one use of the volume: `read_only` or not, by the workload
    /// whose name ends in `suffix` (a second use on the node is a second allocation).
    pub(super) fn place_use(&mut self, node: &mut NodeUse, read_only: bool, suffix: &str) -> Result<(), CheckOutcome> {
        let Some(p) = self.pattern else { return Ok(()) };
        let dir = &self.ctx.paths().dir;
        let root = if node.index == 0 { dir.join("co") } else { dir.join(format!("node{}", node.index)).join("co") };
        let volume = format!("vol{}", self.volume_index);
        let kind = if p.layout.kubelet() { "pod" } else { "alloc" };
        let workload = format!("{kind}-{}{suffix}", self.volume_index);
        let mode = self.plan.mode.to_string();
        let driver = self.ctx.fingerprint().plugin.name.clone();
        let u = Use {
            volume: &volume,
            handle: &self.volume_id,
            driver: &driver,
            workload: &workload,
            block: self.plan.block,
            read_only,
            mode: &mode,
        };
        node.staging = p.layout.staging(&root, &u);
        node.target = p.layout.target(&root, &u);
        let mut made: Vec<PathBuf> = Vec::new();
        if p.makes_staging_dir && node.stage {
            made.push(node.staging.clone());
        }
        if p.makes_target_parent {
            made.extend(node.target.parent().map(Path::to_path_buf));
        }
        let mut own: Vec<PathBuf> = Vec::new();
        for path in [&node.target, &node.staging] {
            let mut at = path.as_path();
            while at.starts_with(&root) {
                own.push(at.to_path_buf());
                at = at.parent().unwrap_or(&root);
                if at == root {
                    own.push(root.clone());
                    break;
                }
            }
        }
        own.sort_by(|a, b| (Reverse(a.components().count()), a).cmp(&(Reverse(b.components().count()), b)));
        own.dedup();
        self.ctx.own_paths(own);
        for d in made {
            if let Err(e) = std::fs::create_dir_all(&d) {
                self.ctx.push(Finding::new(Severity::Error, "setup", format!("cannot create {}: {e}", d.display())));
                return Err(CheckOutcome::Stop);
            }
        }
        Ok(())
    }

    /// NodeStageVolume as an orchestrator sends it, before the lifecycle's own (idempotent)
    /// stage: with the contexts filed under their rows, and, where the orchestrator makes no
    /// staging directory, sent once without it. A plugin that fails then and stages once the
    /// directory is made expects the CO to make it (`dirs.staging`, where Swarm bends the
    /// spec); one that fails either way breaks on the orchestrator's staging path itself.
    pub(super) async fn stage_as(&mut self, node: &NodeUse, request: &v1::NodeStageVolumeRequest) -> Result<(), CheckOutcome> {
        let Some(p) = self.pattern else { return Ok(()) };
        let staging_id = p.layout.staging_id(self.plan.block);
        for id in [ids::VOLUME_CONTEXT, ids::PUBLISH_CONTEXT, ids::DIRS_STAGING, staging_id] {
            self.exercise(id);
        }
        if p.makes_staging_dir {
            return Ok(());
        }
        self.exercise(ids::DIRS_STAGING);
        let (sent, answer) = self.send("NodeStageVolume", proto::to_dynamic(request), Some(node.index)).await;
        let refusal = match answer {
            Ok(_) => {
                self.exercise(staging_id);
                return Ok(());
            }
            Err(e) if e.is_unreachable() => return Err(self.ctx.call_failed(&e, &sent, "OK")),
            Err(e) => e,
        };
        if let Err(e) = std::fs::create_dir_all(&node.staging) {
            self.ctx.push(Finding::new(Severity::Error, "setup", format!("cannot create {}: {e}", node.staging.display())));
            return Err(CheckOutcome::Stop);
        }
        let (again, answer) = self.send("NodeStageVolume", proto::to_dynamic(request), Some(node.index)).await;
        if answer.is_ok() {
            let message = format!(
                "NodeStageVolume answered {} ({}) while {} did not exist, and OK once the directory was made: the plugin \
                 expects the CO to make the staging directory",
                refusal.code_name(),
                refusal.message,
                node.staging.display()
            );
            self.ctx.push(call_finding(Severity::Fail, "staging-directory", message, "NodeStageVolume", &sent));
            self.exercise(staging_id);
            return Ok(());
        }
        self.exercise(staging_id);
        match answer {
            Err(e) => Err(self.ctx.call_failed(&e, &again, "OK")),
            Ok(_) => Ok(()),
        }
    }

    /// NodePublishVolume's volume_context: the forwarded one, plus the pod's information
    /// where the orchestrator adds it (the kubelet, for a driver that asks).
    pub(super) fn publish_volume_context(&self) -> HashMap<String, String> {
        let mut context = self.context.clone();
        if self.pattern.is_some_and(|p| p.pod_info) {
            let i = self.volume_index;
            for (k, v) in [
                ("csi.storage.k8s.io/pod.name", format!("csi-conform-{i}")),
                ("csi.storage.k8s.io/pod.namespace", "default".to_owned()),
                ("csi.storage.k8s.io/pod.uid", format!("00000000-0000-4000-8000-{i:012}")),
                ("csi.storage.k8s.io/serviceAccount.name", "default".to_owned()),
                ("csi.storage.k8s.io/ephemeral", "false".to_owned()),
            ] {
                context.entry(k.to_owned()).or_insert(v);
            }
        }
        context
    }

    /// `volumes: N` on node 0: N volumes created one by one, ControllerPublishVolume for all
    /// of them at once where the orchestrator's calls overlap (one after the other where it
    /// serialises them), each staged and published at the orchestrator's paths side by side,
    /// then everything taken down in reverse.
    pub(super) async fn go_several(&mut self) -> Result<(), CheckOutcome> {
        let Some(p) = self.pattern else { return Err(self.fail("suite", "volumes above 1 needs an instance".into())) };
        let first = self.node_info(0).await?;
        let mut volumes: Vec<(String, HashMap<String, String>, NodeUse)> = Vec::new();
        for i in 0..self.plan.volumes {
            self.volume_index = i;
            self.create_volume(std::slice::from_ref(&first)).await?;
            let mut node = first.clone();
            self.place(&mut node)?;
            volumes.push((self.volume_id.clone(), self.context.clone(), node));
        }
        self.exercise(ids::CONCURRENCY_CONTROLLER);
        if self.controller_publishes() {
            let mut forks: Vec<ScenarioCtx> = volumes.iter().map(|_| self.ctx.fork_overlapping()).collect();
            let plan = self.plan.clone();
            let publish = forks.iter_mut().zip(volumes.iter().enumerate()).map(|(fork, (i, (id, context, node)))| {
                let plan = plan.clone();
                async move {
                    let mut l = Lifecycle {
                        ctx: fork,
                        plan,
                        volume_id: id.clone(),
                        context: context.clone(),
                        declined: None,
                        pattern: Some(p),
                        volume_index: i,
                    };
                    let mut node = node.clone();
                    let done = l.controller_publish(&mut node, false).await;
                    (done, node.publish_context)
                }
            });
            let answers = if p.parallel_controller_publish {
                futures_util::future::join_all(publish).await
            } else {
                let mut answers = Vec::new();
                for call in publish {
                    answers.push(call.await);
                }
                answers
            };
            let mut failed = None;
            for ((done, publish_context), v) in answers.into_iter().zip(volumes.iter_mut()) {
                v.2.publish_context = publish_context;
                if let Err(outcome) = done {
                    failed.get_or_insert(outcome);
                }
            }
            for fork in forks {
                self.ctx.absorb(fork);
            }
            if let Some(outcome) = failed {
                return Err(outcome);
            }
        }
        for (i, (id, context, node)) in volumes.iter().enumerate() {
            (self.volume_index, self.volume_id, self.context) = (i, id.clone(), context.clone());
            self.stage(node).await?;
            self.publish(node, &node.target, 1).await?;
        }
        for (i, (id, context, node)) in volumes.iter().enumerate().rev() {
            (self.volume_index, self.volume_id, self.context) = (i, id.clone(), context.clone());
            self.unpublish(node, &node.target).await?;
            self.unstage(node).await?;
            self.controller_unpublish(node).await?;
            let request = v1::DeleteVolumeRequest { volume_id: id.clone(), ..Default::default() };
            self.call("DeleteVolume", proto::to_dynamic(&request), None, 1).await?;
        }
        Ok(())
    }
}
