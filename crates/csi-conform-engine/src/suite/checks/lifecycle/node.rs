//! The node side of the `lifecycle` check: NodeStage/NodePublish (with repeats and a second
//! target), a node plugin restart, NodeGetVolumeStats, NodeUnpublish/NodeUnstage, and what
//! the node's mount namespace must show after each. A child of `lifecycle`, which owns the
//! plan, the controller side and how calls are sent and judged.

use std::path::Path;

use super::*;
use crate::{
    mounts::MountInfo,
    orchestrator::{Layout, ids},
    suite::mounted::{self, Seen},
};

impl Lifecycle<'_> {
    /// The mounts at exactly `path` on `node`, as the mount table and the path itself both
    /// show them (see [`mounted`]); `None` when the mount checks are skipped.
    pub(super) fn mounted_at(&mut self, node: &NodeUse, path: &Path) -> Result<Option<Vec<MountInfo>>, CheckOutcome> {
        let seen = mounted::mounts_at(self.ctx, &node.inspector, path);
        self.witnessed(seen)
    }

    /// What the two witnesses agreed on; their disagreement (inconclusive) or an unreadable
    /// mount table (an error) stops the scenario.
    fn witnessed(&mut self, seen: Result<Option<Seen>, MountTableError>) -> Result<Option<Vec<MountInfo>>, CheckOutcome> {
        match self.mount_table(seen)? {
            None => Ok(None),
            Some(Seen::Agreed(mounts)) => Ok(Some(mounts)),
            Some(Seen::Disagree(f)) => {
                self.ctx.push(*f);
                Err(CheckOutcome::Stop)
            }
        }
    }

    pub(super) async fn stage(&mut self, node: &NodeUse) -> Result<(), CheckOutcome> {
        if !node.stage {
            self.exercise(ids::STAGE_WITHOUT_CAPABILITY);
            return Ok(());
        }
        let request = self.stage_request(node);
        if self.pattern.is_some() {
            self.stage_as(node, &request).await?;
        }
        self.call("NodeStageVolume", proto::to_dynamic(&request), Some(node.index), self.plan.times).await?;
        // Where the orchestrator makes no staging directory (Swarm) and the plugin made none
        // either, the plugin stages without using the path (cfgd-csi pulls to a cache): the
        // orchestrator goes on to publish, and so does the instance.
        if self.pattern.is_some_and(|p| !p.makes_staging_dir)
            && matches!(node.inspector.kind(&node.staging).await, Ok(Some(PathKind::NotFound)))
        {
            return Ok(());
        }
        // The staging path is the CO's: the plugin may mount there, but must leave it a directory.
        self.expect_kind(node, &node.staging, PathKind::Directory, "NodeStageVolume").await
    }

    /// NodeStageVolume of the volume on `node`, at its staging path.
    pub(super) fn stage_request(&self, node: &NodeUse) -> v1::NodeStageVolumeRequest {
        v1::NodeStageVolumeRequest {
            volume_id: self.volume_id.clone(),
            publish_context: node.publish_context.clone(),
            staging_target_path: node.staging.display().to_string(),
            volume_capability: Some(self.plan.node_capability()),
            volume_context: self.context.clone(),
            ..Default::default()
        }
    }

    /// NodeUnstageVolume of the staged volume with no staging_target_path: the spec makes
    /// the field required (INVALID_ARGUMENT), and a plugin that unstages by volume id alone
    /// would tear the staging from under a CO that staged it elsewhere.
    pub(super) async fn unstage_without_path(&mut self, node: &NodeUse) -> Result<(), CheckOutcome> {
        let request =
            v1::NodeUnstageVolumeRequest { volume_id: self.volume_id.clone(), staging_target_path: String::new() };
        let (sent, answer) = self.send("NodeUnstageVolume", proto::to_dynamic(&request), Some(node.index)).await;
        let what = format!("NodeUnstageVolume of volume {} without a staging_target_path", self.volume_id);
        self.expect_refusal(&what, &sent, answer, Code::InvalidArgument)
    }

    /// Runs `--allow-restart-cmd` for `node` and waits until the node plugin answers again.
    pub(super) async fn restart(&mut self, node: &NodeUse) -> Result<(), CheckOutcome> {
        super::super::node_restart::restart_node(self.ctx, node.index, &node.node_id).await.map(drop)
    }

    pub(super) fn publish_request(&self, node: &NodeUse, target: &Path) -> v1::NodePublishVolumeRequest {
        v1::NodePublishVolumeRequest {
            volume_id: self.volume_id.clone(),
            publish_context: node.publish_context.clone(),
            staging_target_path: if node.stage { node.staging.display().to_string() } else { String::new() },
            target_path: target.display().to_string(),
            volume_capability: Some(self.plan.node_capability()),
            readonly: self.plan.read_only(),
            volume_context: self.publish_volume_context(),
            ..Default::default()
        }
    }

    pub(super) async fn publish(&mut self, node: &NodeUse, target: &Path, times: u32) -> Result<(), CheckOutcome> {
        // Pod information is exercised where it is sent, and where the orchestrator never adds any.
        let pod_info = if self.pattern.is_some_and(|p| p.pod_info || p.undriven(ids::POD_INFO).is_none()) {
            ids::POD_INFO
        } else {
            ids::READONLY
        };
        for id in [ids::DIRS_TARGET, ids::READONLY, pod_info, Layout::target_id(self.plan.block)] {
            self.exercise(id);
        }
        let request = self.publish_request(node, target);
        self.call("NodePublishVolume", proto::to_dynamic(&request), Some(node.index), times).await?;
        self.check_published(node, target).await
    }

    /// A second NodePublishVolume of the volume on `node` (node endpoint 0), at `paths.target2`.
    pub(super) async fn second_target(
        &mut self,
        node: &NodeUse,
        expect: Second,
    ) -> Result<Option<(NodeUse, PathBuf)>, CheckOutcome> {
        let target = self.ctx.paths().target2.clone();
        match expect {
            Second::None => Ok(None),
            Second::Works => {
                self.publish(node, &target, 1).await?;
                Ok(Some((node.clone(), target)))
            }
            Second::Refused(code) => {
                let request = self.publish_request(node, &target);
                let (sent, answer) =
                    self.send("NodePublishVolume", proto::to_dynamic(&request), Some(node.index)).await;
                let what = format!(
                    "NodePublishVolume of a {} volume already published at {} at a second target path",
                    self.plan.mode,
                    node.target.display()
                );
                self.expect_refusal(&what, &sent, answer, code)?;
                if self.mounted_at(node, &target)?.is_some_and(|m| !m.is_empty()) {
                    return Err(self.fail(
                        "path-state",
                        format!("NodePublishVolume was refused, yet {} is a mount point", target.display()),
                    ));
                }
                Ok(None)
            }
        }
    }

    pub(super) async fn stats(&mut self, node: &NodeUse) -> Result<(), CheckOutcome> {
        if !self.node_supports(node.index, NodeCapability::GetVolumeStats) {
            return Ok(());
        }
        let request = v1::NodeGetVolumeStatsRequest {
            volume_id: self.volume_id.clone(),
            volume_path: node.target.display().to_string(),
            staging_target_path: if node.stage { node.staging.display().to_string() } else { String::new() },
        };
        let response = self.call("NodeGetVolumeStats", proto::to_dynamic(&request), Some(node.index), 1).await?;
        // `usage` is OPTIONAL (#nodegetvolumestats): a plugin that reports only a condition
        // is within the spec, but gives a CO nothing to show.
        if typed::<v1::NodeGetVolumeStatsResponse>(&response).usage.is_empty() {
            // OPTIONAL: a note, never a verdict.
            self.ctx.push(Finding::new(
                Severity::Pass,
                crate::report::NOTE_KIND,
                format!(
                    "NodeGetVolumeStats of {} on node {} reported no usage (OPTIONAL in the spec, but a CO has nothing to show)",
                    node.target.display(),
                    node.node_id
                ),
            ));
        }
        Ok(())
    }

    pub(super) async fn unpublish(&mut self, node: &NodeUse, target: &Path) -> Result<(), CheckOutcome> {
        let request = v1::NodeUnpublishVolumeRequest {
            volume_id: self.volume_id.clone(),
            target_path: target.display().to_string(),
        };
        self.call("NodeUnpublishVolume", proto::to_dynamic(&request), Some(node.index), self.plan.times).await?;
        if self.mounted_at(node, target)?.is_some_and(|m| !m.is_empty()) {
            return Err(self.fail(
                "path-state",
                format!("after NodeUnpublishVolume, {} is still a mount point", target.display()),
            ));
        }
        // An orchestrator that removes an empty target the plugin left (Nomad, the kubelet)
        // does so now: under it, that is no failure.
        if self.pattern.is_some_and(|p| p.removes_left_target) {
            self.exercise(ids::DIRS_TARGET);
            let _ = std::fs::remove_dir(target);
        }
        // The plugin created the target, so it must remove it ("the SP MUST delete the file or
        // directory it created at this path").
        self.expect_kind(node, target, PathKind::NotFound, "NodeUnpublishVolume").await
    }

    pub(super) async fn unstage(&mut self, node: &NodeUse) -> Result<(), CheckOutcome> {
        if !node.stage {
            return Ok(());
        }
        self.exercise(ids::UNSTAGE);
        // An orchestrator that never unstages (Swarm) goes on to ControllerUnpublishVolume and
        // DeleteVolume with the volume staged; what they answer is filed under `rpc.unstage`.
        // The scenario's teardown unstages it all the same.
        if self.pattern.is_some_and(|p| !p.unstages) {
            return Ok(());
        }
        let request = v1::NodeUnstageVolumeRequest {
            volume_id: self.volume_id.clone(),
            staging_target_path: node.staging.display().to_string(),
        };
        self.call("NodeUnstageVolume", proto::to_dynamic(&request), Some(node.index), self.plan.times).await?;
        let seen = mounted::mounts_under(self.ctx, &node.inspector, &node.staging);
        let left = self.witnessed(seen)?.unwrap_or_default();
        if let Some(m) = left.first() {
            return Err(self.fail(
                "path-state",
                format!(
                    "after NodeUnstageVolume, {} is still mounted at {}",
                    if left.len() == 1 { "a file system".to_owned() } else { format!("{} file systems", left.len()) },
                    m.mount_point.display()
                ),
            ));
        }
        Ok(())
    }

    /// Checks the kind of `path` on `node` after `rpc` (nothing when it cannot be inspected).
    pub(super) async fn expect_kind(
        &mut self,
        node: &NodeUse,
        path: &Path,
        want: PathKind,
        rpc: &str,
    ) -> Result<(), CheckOutcome> {
        match node.inspector.kind(path).await {
            Ok(None) => Ok(()),
            Ok(Some(kind)) if kind == want => Ok(()),
            Ok(Some(kind)) => {
                let want = match want {
                    PathKind::NotFound => "removed".to_owned(),
                    other => format!("a {other}"),
                };
                Err(self.fail(
                    "path-state",
                    format!(
                        "after {rpc}, {} on node {} is a {kind}; it should be {want}",
                        path.display(),
                        node.node_id
                    ),
                ))
            }
            Err(e) => {
                self.ctx.push(Finding::new(Severity::Error, "check-path-cmd", e.to_string()));
                Err(CheckOutcome::Stop)
            }
        }
    }

    /// What the host must show after NodePublishVolume: the target exists as the right kind,
    /// is mounted exactly once (repeats must not stack mounts), carries the requested VFS
    /// options, and takes writes only when the publication is read-write.
    pub(super) async fn check_published(&mut self, node: &NodeUse, target: &Path) -> Result<(), CheckOutcome> {
        let want = if self.plan.block { PathKind::File } else { PathKind::Directory };
        self.expect_kind(node, target, want, "NodePublishVolume").await?;
        let Some(stacked) = self.mounted_at(node, target)? else {
            return Ok(());
        };
        let shown = target.display().to_string();
        let device = node.inspector.is_device(target);
        let Some(top) = stacked.last().cloned() else {
            if self.plan.block && device {
                return Ok(());
            }
            return Err(self.fail(
                "path-state",
                format!("after NodePublishVolume, {shown} is not a mount point: the volume is not mounted on the host"),
            ));
        };
        if stacked.len() > 1 {
            return Err(self.fail(
                "path-state",
                format!(
                    "{} file systems are mounted on top of each other at {shown}: a repeated NodePublishVolume \
                     must not mount again",
                    stacked.len()
                ),
            ));
        }
        let read_only = self.plan.read_only();
        if read_only && !top.read_only {
            let message = format!("{shown} was published read-only, but the mount table shows it mounted read-write");
            return Err(self.fail_in_row(ids::READONLY, "path-state", message, READ_ONLY));
        }
        let missing: Vec<&str> = self.plan.vfs_options().into_iter().filter(|o| !top.has_option(o)).collect();
        if !missing.is_empty() {
            let message = format!(
                "the mount at {shown} lacks the mount option{} {} that the volume capability asked for",
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", ")
            );
            return Err(self.fail_in_row(ids::MOUNT_OPTIONS, "mount-flags", message, MOUNT_FLAGS));
        }
        // Nothing is written to a volume the run may not write to (an existing volume without
        // --existing-volume-writable): the mount table's read-only flag is all it sees. The
        // data-path checks (markers written and read back) belong here too, behind the same
        // `self.plan.writes`.
        if !self.plan.writes {
            return Ok(());
        }
        let probe = node.inspector.probe_write(target, self.plan.block).unwrap_or(WriteProbe::NotProbed);
        let problem = match (read_only, &probe) {
            (_, WriteProbe::NotProbed) | (true, WriteProbe::ReadOnly) | (false, WriteProbe::Writable) => None,
            (true, WriteProbe::Writable) => {
                Some(format!("{shown} is published read-only, yet a write to it succeeded"))
            }
            (true, WriteProbe::Failed(e)) => Some(format!(
                "a write to the read-only {shown} failed with {e}, not with EROFS (read-only file system)"
            )),
            (false, WriteProbe::ReadOnly) => Some(format!("{shown} is published read-write, yet it is read-only")),
            (false, WriteProbe::Failed(e)) => Some(format!("{shown} is published read-write, yet a write failed: {e}")),
        };
        match problem {
            // A read-only publication that writes is the node's fault, never the controller's.
            Some(message) if read_only => Err(self.fail_in_row(ids::READONLY, "path-state", message, READ_ONLY)),
            Some(message) => Err(self.fail("path-state", message)),
            None => Ok(()),
        }
    }
}

/// What a read-only publication that is writable breaks: NodePublishVolume mounts it.
const READ_ONLY: &[&str] = &["NodePublishVolume.readonly"];

/// What a published mount without the capability's flags breaks: NodePublishVolume honours
/// the capability it was given.
const MOUNT_FLAGS: &[&str] = &["NodePublishVolume.capability.honoured"];

impl Lifecycle<'_> {
    /// A failure that breaks `requirements`, filed (in an orchestrator instance) under the
    /// matrix row that documents the field at fault (`fields.readonly`,
    /// `fields.mount-options`, or `fields.capability` where the orchestrator has no row of
    /// its own for mount options) rather than the path behaviour being exercised: a matrix
    /// cell's outcome comes only from findings on the behaviour its row documents.
    fn fail_in_row(&mut self, row: &'static str, kind: &str, message: String, requirements: &[&str]) -> CheckOutcome {
        let mut f = Finding::new(Severity::Fail, kind, message);
        f.requirements = requirements.iter().map(|r| (*r).to_owned()).collect();
        if let Some(p) = self.pattern.filter(|_| self.ctx.behaviour().is_some()) {
            let o = p.orchestrator;
            let fallback = (row == ids::MOUNT_OPTIONS).then_some(ids::CAPABILITY);
            let filed = [Some(row), fallback].into_iter().flatten().find(|id| o.behaviour(id).is_some()).unwrap_or(row);
            f.behaviour = Some(filed.to_owned());
        }
        self.ctx.push(f);
        CheckOutcome::Stop
    }
}
