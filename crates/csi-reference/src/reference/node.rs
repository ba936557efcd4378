//! The reference plugin's Node service: staging and publishing as real bind mounts of a
//! volume's backing store (plain directories and files without CAP_SYS_ADMIN), volume stats,
//! node expansion, capabilities and node info. Node-local records live in the shared state
//! under this plugin's node id.

use std::path::Path;

use tonic::{Request, Response, Status};

use crate::mounts;
use crate::proto::v1::{
    self, controller_service_capability::rpc::Type as ControllerRpc, node_server::Node,
    node_service_capability::rpc::Type as NodeRpc,
};

use super::config::GIB;
use super::state::{Capability, NodePublication, Staging, State, VolumeRecord};
use super::{Plugin, Service, checks};

fn internal(what: &str, e: impl std::fmt::Display) -> Status {
    Status::internal(format!("could not {what}: {e}"))
}

/// Makes `target` exist as a directory (mount access) or an empty file (block access). The
/// parent must exist: the CO creates it.
fn create_target(target: &Path, block: bool) -> Result<(), Status> {
    let parent_ok = target.parent().is_some_and(Path::is_dir);
    if !parent_ok {
        return Err(Status::invalid_argument(format!(
            "the parent directory of target_path {} does not exist",
            target.display()
        )));
    }
    match std::fs::symlink_metadata(target) {
        Ok(m) if (block && m.is_file()) || (!block && m.is_dir()) => Ok(()),
        Ok(_) => Err(Status::failed_precondition(format!(
            "target_path {} exists and is not a {}",
            target.display(),
            if block { "file" } else { "directory" }
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let made = if block {
                std::fs::OpenOptions::new()
                    .create_new(true)
                    .write(true)
                    .open(target)
                    .map(drop)
            } else {
                std::fs::create_dir(target)
            };
            made.map_err(|e| internal("create target_path", e))
        }
        Err(e) => Err(internal("inspect target_path", e)),
    }
}

/// Removes a target or staging path we made, never following into a mount.
fn remove_path(path: &Path) -> Result<(), Status> {
    if mounts::is_mount_point(path) {
        return Err(Status::internal(format!(
            "{} is still a mount point",
            path.display()
        )));
    }
    let result = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(internal("remove the path", e)),
        _ => Ok(()),
    }
}

/// Changes the group of a published path when volume_mount_group is a numeric gid.
fn apply_mount_group(target: &Path, group: &str) -> Result<(), Status> {
    if let Ok(gid) = group.parse::<u32>() {
        nix::unistd::chown(target, None, Some(nix::unistd::Gid::from_raw(gid)))
            .map_err(|e| internal("apply volume_mount_group", e))?;
    }
    Ok(())
}

/// The volume_context key naming an existing directory that is a pre-provisioned volume.
pub const CONTEXT_PATH: &str = "path";
/// The volume_context key giving the size of a pre-provisioned volume backed afresh.
pub const CONTEXT_SIZE: &str = "size";

/// What a pre-provisioned volume's volume_context says it is.
enum PreProvisioned {
    /// `path: DIR`: that directory, as is.
    Dir(std::path::PathBuf),
    /// `size: BYTES`: a fresh backing store of that size.
    Size(i64),
    /// Neither key.
    Unspecified,
}

impl PreProvisioned {
    fn from_context(
        volume_id: &str,
        context: &std::collections::HashMap<String, String>,
    ) -> Result<PreProvisioned, Status> {
        if let Some(dir) = context.get(CONTEXT_PATH) {
            let dir = Path::new(dir);
            if !dir.is_absolute() {
                return Err(Status::invalid_argument(format!(
                    "volume_context {CONTEXT_PATH} of volume {volume_id} must be an absolute path"
                )));
            }
            if !dir.is_dir() {
                return Err(Status::not_found(format!(
                    "volume {volume_id} does not exist: its directory {} is not there",
                    dir.display()
                )));
            }
            return Ok(PreProvisioned::Dir(dir.to_owned()));
        }
        if let Some(size) = context.get(CONTEXT_SIZE) {
            return match crate::units::parse_bytes(size) {
                Ok(bytes) if bytes > 0 => Ok(PreProvisioned::Size(bytes)),
                _ => Err(Status::invalid_argument(format!(
                    "volume_context {CONTEXT_SIZE} of volume {volume_id} must be a positive size in bytes"
                ))),
            };
        }
        Ok(PreProvisioned::Unspecified)
    }
}

impl Plugin {
    /// The volume a node RPC is about. An id this plugin never created is a pre-provisioned
    /// volume when its volume_context says what it is (`path: DIR` or `size: BYTES`); on a
    /// standalone node plugin any unknown id is one (a 1 GiB backing made on demand).
    /// Without that context, a node-only plugin with `--require-context` answers
    /// FAILED_PRECONDITION; otherwise an unknown id is NOT_FOUND. ControllerPublishVolume
    /// takes pre-provisioned volumes the same way (a static volume on a controller plugin).
    pub(super) fn node_volume(
        &self,
        state: &mut State,
        volume_id: &str,
        context: &std::collections::HashMap<String, String>,
    ) -> Result<VolumeRecord, Status> {
        if let Some(v) = state.volumes.get(volume_id) {
            return Ok(v.clone());
        }
        let what = PreProvisioned::from_context(volume_id, context)?;
        if matches!(what, PreProvisioned::Unspecified) {
            if self.config.mode == super::Mode::NodeOnly && self.config.require_context {
                return Err(Status::failed_precondition(format!(
                    "volume_context is missing: pre-provisioned volume {volume_id} needs {CONTEXT_PATH} or \
                     {CONTEXT_SIZE} in its volume_context"
                )));
            }
            if !self.standalone_node() {
                return Err(Status::not_found(format!("volume {volume_id} does not exist")));
            }
        }
        let (capacity, static_path) = match what {
            PreProvisioned::Dir(dir) => {
                let capacity = nix::sys::statvfs::statvfs(&dir)
                    .map(|v| (v.blocks() as i64).saturating_mul(v.fragment_size() as i64))
                    .map_err(|e| internal("statvfs the volume's directory", e))?;
                (capacity, Some(dir))
            }
            PreProvisioned::Size(bytes) => (bytes, None),
            PreProvisioned::Unspecified => (GIB, None),
        };
        if static_path.is_none() {
            self.data
                .volume(volume_id)
                .create(true, true, capacity)
                .map_err(|e| internal("create the backing store", e))?;
        }
        let volume = VolumeRecord {
            id: volume_id.to_owned(),
            name: String::new(),
            capacity,
            capabilities: Vec::new(),
            parameters: Default::default(),
            mutable_parameters: Default::default(),
            created_mutable_parameters: Default::default(),
            context: context.clone().into_iter().collect(),
            topology: Vec::new(),
            source: None,
            has_mount: true,
            has_block: static_path.is_none(),
            publications: Default::default(),
            static_volume: true,
            static_path,
        };
        state.volumes.insert(volume_id.to_owned(), volume.clone());
        Ok(volume)
    }

    /// The directory mount access of `volume` uses: its own for a pre-provisioned directory,
    /// its backing store's otherwise.
    fn volume_fs(&self, volume: &VolumeRecord) -> std::path::PathBuf {
        volume.static_path.clone().unwrap_or_else(|| self.data.volume(&volume.id).fs())
    }

    /// Whether an unknown volume id may be treated as "nothing to undo".
    fn volume_known_or_static(&self, state: &State, volume_id: &str) -> bool {
        self.standalone_node() || state.volumes.contains_key(volume_id)
    }

    /// With controller publishing on, the volume must have been ControllerPublished to this
    /// node (FAILED_PRECONDITION), and a given publish_context must be the one handed out.
    fn check_controller_published(
        &self,
        rpc: &str,
        volume: &VolumeRecord,
        given: &std::collections::HashMap<String, String>,
    ) -> Result<(), Status> {
        let required = self.controller_publish_required() && !volume.static_volume;
        let publication = volume.publications.get(&self.config.node_id);
        if required && publication.is_none() {
            return Err(Status::failed_precondition(format!(
                "volume {} is not controller-published to node {} (call ControllerPublishVolume first)",
                volume.id, self.config.node_id
            )));
        }
        // A pre-provisioned volume need not be controller-published, but once it is, its
        // publish_context is owed like any other's.
        checks::publish_context(
            rpc,
            publication.map(|p| &p.publish_context),
            given,
            self.config.require_context && (required || publication.is_some()),
        )
    }

    fn node_stage_volume(
        &self,
        req: v1::NodeStageVolumeRequest,
    ) -> Result<v1::NodeStageVolumeResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        let staging = checks::required_path(&req.staging_target_path, "staging_target_path")?;
        let cap = checks::capability(req.volume_capability.as_ref(), "volume_capability")?;
        checks::fs_type(&cap)?;
        checks::node_capability(&self.caps, &cap)?;
        let key = req.staging_target_path.clone();
        self.store.transact(|state| {
            let volume = self.node_volume(state, &req.volume_id, &req.volume_context)?;
            checks::volume_context("NodeStageVolume", &volume, &req.volume_context, self.node_requires_volume_context())?;
            self.check_controller_published("NodeStageVolume", &volume, &req.publish_context)?;
            if let Some(why) = checks::volume_support_problem(&volume, &cap) {
                return Err(checks::unsupported_capability("NodeStageVolume", why));
            }
            let node = state.node_mut(&self.config.node_id);
            if let Some(existing) = node.stagings.get(&key) {
                if existing.volume_id != req.volume_id {
                    return Err(Status::failed_precondition(format!(
                        "staging_target_path is in use by volume {}",
                        existing.volume_id
                    )));
                }
                if existing.capability == cap {
                    return Ok(v1::NodeStageVolumeResponse {});
                }
                return Err(Status::already_exists(format!(
                    "volume {} is already staged at this path with a different capability",
                    req.volume_id
                )));
            }
            if let Some((other, _)) =
                node.stagings.iter().find(|(_, s)| s.volume_id == req.volume_id).filter(|_| !self.quirk_stages_twice())
            {
                return Err(Status::failed_precondition(format!(
                    "volume {} is already staged at {other}; a volume has one staging path per node",
                    req.volume_id
                )));
            }
            if self.quirk(super::Quirk::StagingPathUnused) {
                node.stagings.insert(key, Staging { volume_id: req.volume_id.clone(), capability: cap, mounted: false });
                return Ok(v1::NodeStageVolumeResponse {});
            }
            let staged: Vec<String> = node.stagings.values().map(|s| s.volume_id.clone()).collect();
            self.quirk_stage_record(&staging, &req.volume_id, &staged)?;
            self.quirk_staging_dir_made(&staging)?;
            std::fs::create_dir_all(&staging).map_err(|e| internal("create staging_target_path", e))?;
            let mounted = !cap.is_block() && self.mounts;
            if mounted {
                // A mount without a record is a leftover of an interrupted stage: replace it.
                mounts::unmount(&staging).map_err(|e| internal("clear staging_target_path", e))?;
                mounts::bind_mount(&self.volume_fs(&volume), &staging, false)
                    .map_err(|e| internal("mount the volume at staging_target_path", e))?;
                let flags = self.mount_flags(&cap);
                if !flags.is_empty()
                    && let Err(e) = mounts::remount(&staging, flags)
                {
                    let _ = mounts::unmount(&staging);
                    return Err(internal("apply the mount flags at staging_target_path", e));
                }
            }
            node.stagings.insert(key, Staging { volume_id: req.volume_id.clone(), capability: cap, mounted });
            Ok(v1::NodeStageVolumeResponse {})
        })
    }

    fn node_unstage_volume(
        &self,
        req: v1::NodeUnstageVolumeRequest,
    ) -> Result<v1::NodeUnstageVolumeResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        if req.staging_target_path.is_empty() && self.quirk(super::Quirk::UnstageIgnoresPath) {
            return Ok(v1::NodeUnstageVolumeResponse {});
        }
        let staging = checks::required_path(&req.staging_target_path, "staging_target_path")?;
        let key = req.staging_target_path.clone();
        self.store.transact(|state| {
            let known = self.volume_known_or_static(state, &req.volume_id);
            let node = state.node_mut(&self.config.node_id);
            let found = node.stagings.get(&key);
            let undone = undo_unrecorded(found.is_none(), &staging, "unmount staging_target_path")?;
            let Some(record) = record_to_undo(found, |r| &r.volume_id, &req.volume_id, known || undone)? else {
                return Ok(v1::NodeUnstageVolumeResponse {});
            };
            self.quirk_staging_gone(&staging)?;
            if let Some((target, _)) = node
                .publications
                .iter()
                .find(|(_, p)| p.volume_id == req.volume_id && p.staging_path == key)
            {
                return Err(Status::failed_precondition(format!(
                    "volume {} is still published at {target} from this staging path",
                    req.volume_id
                )));
            }
            if record.mounted {
                mounts::unmount(&staging)
                    .map_err(|e| internal("unmount staging_target_path", e))?;
            }
            remove_path(&staging)?;
            self.quirk_drop_stage_record(&staging, &req.volume_id);
            if self.quirk(super::Quirk::LoseDataOnUnstage) {
                self.data.volume(&req.volume_id).wipe().map_err(|e| internal("discard the volume's content", e))?;
            }
            node.stagings.remove(&key);
            self.quirk_release_volume(node, &req.volume_id);
            Ok(v1::NodeUnstageVolumeResponse {})
        })
    }

    fn node_publish_volume(
        &self,
        req: v1::NodePublishVolumeRequest,
    ) -> Result<v1::NodePublishVolumeResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        let target = checks::required_path(&req.target_path, "target_path")?;
        let cap = checks::capability(req.volume_capability.as_ref(), "volume_capability")?;
        checks::fs_type(&cap)?;
        checks::node_capability(&self.caps, &cap)?;
        let staging_required = self.caps.has_node(NodeRpc::StageUnstageVolume);
        if !req.staging_target_path.is_empty() {
            checks::required_path(&req.staging_target_path, "staging_target_path")?;
        }
        let key = req.target_path.clone();
        self.store.transact(|state| {
            let volume = self.node_volume(state, &req.volume_id, &req.volume_context)?;
            checks::volume_context("NodePublishVolume", &volume, &req.volume_context, self.node_requires_volume_context())?;
            let node_id = self.config.node_id.clone();
            let staging = if staging_required {
                if req.staging_target_path.is_empty() {
                    return Err(Status::failed_precondition(
                        "staging_target_path is required: the node has STAGE_UNSTAGE_VOLUME (call NodeStageVolume first)",
                    ));
                }
                let staged = state
                    .nodes
                    .get(&node_id)
                    .and_then(|n| n.stagings.get(&req.staging_target_path))
                    .filter(|s| s.volume_id == req.volume_id)
                    .cloned();
                let Some(staged) = staged else {
                    return Err(Status::failed_precondition(format!(
                        "volume {} is not staged at staging_target_path (call NodeStageVolume first)",
                        req.volume_id
                    )));
                };
                Some(staged)
            } else {
                None
            };
            self.check_controller_published("NodePublishVolume", &volume, &req.publish_context)?;
            if let Some(why) = checks::volume_support_problem(&volume, &cap) {
                return Err(checks::unsupported_capability("NodePublishVolume", why));
            }
            if let Some(staged) = &staging
                && staged.capability.is_block() != cap.is_block()
            {
                return Err(checks::unsupported_capability(
                    "NodePublishVolume",
                    format!("the volume is staged for {} access", staged.capability.access_name()),
                ));
            }
            let staging_path = if staging_required { req.staging_target_path.clone() } else { String::new() };
            let node = state.node_mut(&node_id);
            if let Some(existing) = node.publications.get(&key) {
                if existing.volume_id != req.volume_id {
                    return Err(Status::failed_precondition(format!(
                        "target_path is in use by volume {}",
                        existing.volume_id
                    )));
                }
                if existing.capability == cap && existing.readonly == req.readonly && existing.staging_path == staging_path {
                    return Ok(v1::NodePublishVolumeResponse {});
                }
                return Err(Status::already_exists(format!(
                    "volume {} is already published at target_path with a different capability or readonly flag",
                    req.volume_id
                )));
            }
            if !self.quirk(super::Quirk::AllowSecondWriter) {
                check_other_targets(&req.volume_id, node.publications.iter(), &cap)?;
            }
            create_target(&target, cap.is_block())?;
            let store = self.data.volume(&req.volume_id);
            let source = match &staging {
                _ if cap.is_block() => store.block(),
                Some(s) if s.mounted => Path::new(&req.staging_target_path).to_path_buf(),
                _ => self.volume_fs(&volume),
            };
            let read_only = (req.readonly || checks::is_reader_only(cap.mode()))
                && !self.quirk(super::Quirk::IgnoreReadonly);
            let mounted = self.mounts;
            let published = self.mount_target(&source, &target, read_only, &cap, mounted);
            if let Err(e) = published {
                let _ = mounts::unmount(&target);
                let _ = remove_path(&target);
                return Err(e);
            }
            // Quirk `hides-target-mount`: the parent's own bind (no submounts) hides the mount.
            if mounted && self.quirk(super::Quirk::HidesTargetMount) && let Some(parent) = target.parent() {
                mounts::bind_mount(parent, parent, false).map_err(|e| internal("bind target_path's parent", e))?;
            }
            node.publications.insert(
                key,
                NodePublication {
                    volume_id: req.volume_id.clone(),
                    capability: cap,
                    readonly: req.readonly,
                    staging_path,
                    mounted,
                },
            );
            Ok(v1::NodePublishVolumeResponse {})
        })
    }

    /// Bind-mounts `source` at `target` (then applies the mount group, read-only and the
    /// capability's per-mount flags such as `nosuid`), or only applies the mount group to the
    /// plain target without real mounts. File-system specific flags cannot apply to a bind
    /// mount and are ignored.
    fn mount_target(
        &self,
        source: &Path,
        target: &Path,
        read_only: bool,
        cap: &Capability,
        mounted: bool,
    ) -> Result<(), Status> {
        if mounted {
            mounts::unmount(target).map_err(|e| internal("clear target_path", e))?;
            mounts::bind_mount(source, target, false)
                .map_err(|e| internal("mount the volume at target_path", e))?;
        }
        // Quirk `drops-mount-group`: the group is never applied.
        if !self.quirk(super::Quirk::DropsMountGroup) {
            apply_mount_group(target, cap.mount_group())?;
        }
        let mut flags = self.mount_flags(cap);
        if read_only {
            flags |= nix::mount::MsFlags::MS_RDONLY;
        }
        if mounted && !flags.is_empty() {
            mounts::remount(target, flags)
                .map_err(|e| internal("apply read-only and the mount flags at target_path", e))?;
        }
        Ok(())
    }

    fn node_unpublish_volume(
        &self,
        req: v1::NodeUnpublishVolumeRequest,
    ) -> Result<v1::NodeUnpublishVolumeResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        let target = checks::required_path(&req.target_path, "target_path")?;
        let key = req.target_path.clone();
        self.store.transact(|state| {
            let known = self.volume_known_or_static(state, &req.volume_id);
            let node = state.node_mut(&self.config.node_id);
            let found = node.publications.get(&key);
            let undone = undo_unrecorded(found.is_none(), &target, "unmount target_path")?;
            let Some(record) = record_to_undo(found, |r| &r.volume_id, &req.volume_id, known || undone)? else {
                return Ok(v1::NodeUnpublishVolumeResponse {});
            };
            self.quirk_target_gone(&target)?;
            if record.mounted {
                // Quirk `hides-target-mount`: the publication's bind of the parent goes first.
                if self.quirk(super::Quirk::HidesTargetMount) && let Some(parent) = target.parent() {
                    let _ = nix::mount::umount2(parent, nix::mount::MntFlags::MNT_DETACH);
                }
                mounts::unmount(&target).map_err(|e| internal("unmount target_path", e))?;
            }
            remove_path(&target)?;
            node.publications.remove(&key);
            Ok(v1::NodeUnpublishVolumeResponse {})
        })
    }

    /// The capability a volume has at `path` on this node (published or staged there).
    fn capability_at(&self, state: &State, volume_id: &str, path: &str) -> Option<Capability> {
        let node = state.nodes.get(&self.config.node_id)?;
        node.publications
            .get(path)
            .filter(|p| p.volume_id == volume_id)
            .map(|p| p.capability.clone())
            .or_else(|| {
                node.stagings
                    .get(path)
                    .filter(|s| s.volume_id == volume_id)
                    .map(|s| s.capability.clone())
            })
    }

    fn node_get_volume_stats(
        &self,
        req: v1::NodeGetVolumeStatsRequest,
    ) -> Result<v1::NodeGetVolumeStatsResponse, Status> {
        use v1::volume_usage::Unit;
        checks::required(&req.volume_id, "volume_id")?;
        // A relative volume_path names no volume here: NOT_FOUND below, the condition the
        // spec's NodeGetVolumeStats error table names ("does not exist on the specified
        // volume_path"), and what csi-sanity expects of its "some/path".
        checks::required(&req.volume_path, "volume_path")?;
        let state = self.store.snapshot()?;
        let volume = state
            .volumes
            .get(&req.volume_id)
            .ok_or_else(|| Status::not_found(format!("volume {} does not exist", req.volume_id)))?;
        let cap = self
            .capability_at(&state, &req.volume_id, &req.volume_path)
            .ok_or_else(|| {
                Status::not_found(format!(
                    "volume {} is not published or staged at {}",
                    req.volume_id, req.volume_path
                ))
            })?;
        let fs = self.volume_fs(volume);
        let usage = if cap.is_block() {
            vec![v1::VolumeUsage {
                total: volume.capacity,
                unit: Unit::Bytes as i32,
                ..Default::default()
            }]
        } else {
            let (bytes, _) = super::backing::tree_usage(&fs);
            let used = (bytes as i64).min(volume.capacity);
            let vfs = nix::sys::statvfs::statvfs(&fs)
                .map_err(|e| internal("statvfs the volume", e))?;
            let files = vfs.files() as i64;
            let free = (vfs.files_free() as i64).min(files);
            vec![
                v1::VolumeUsage {
                    total: volume.capacity,
                    used,
                    available: volume.capacity - used,
                    unit: Unit::Bytes as i32,
                },
                v1::VolumeUsage {
                    total: files,
                    used: files - free,
                    available: (vfs.files_available() as i64).min(free),
                    unit: Unit::Inodes as i32,
                },
            ]
        };
        let condition = self.caps.has_node(NodeRpc::VolumeCondition) || self.quirk(super::Quirk::MixedVersions);
        let volume_condition = condition.then(|| {
            let mounted_here = state
                .nodes
                .get(&self.config.node_id)
                .and_then(|n| {
                    n.publications
                        .get(&req.volume_path)
                        .map(|p| p.mounted)
                        .or_else(|| n.stagings.get(&req.volume_path).map(|s| s.mounted))
                })
                .unwrap_or(false);
            let path = Path::new(&req.volume_path);
            if !path.exists() {
                v1::VolumeCondition {
                    abnormal: true,
                    message: format!("{} is missing", req.volume_path),
                }
            } else if mounted_here && !mounts::is_mount_point(path) {
                v1::VolumeCondition {
                    abnormal: true,
                    message: format!("{} is no longer mounted", req.volume_path),
                }
            } else if !fs.is_dir() {
                v1::VolumeCondition {
                    abnormal: true,
                    message: "the backing store is missing".into(),
                }
            } else {
                v1::VolumeCondition {
                    abnormal: false,
                    message: "volume is healthy".into(),
                }
            }
        });
        Ok(v1::NodeGetVolumeStatsResponse {
            usage,
            volume_condition,
        })
    }

    fn node_expand_volume(
        &self,
        req: v1::NodeExpandVolumeRequest,
    ) -> Result<v1::NodeExpandVolumeResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        // NodeExpandVolume's volume_path is only REQUIRED (the spec asks no absolute path of
        // it); a path where the volume is not published or staged is NOT_FOUND below.
        checks::required(&req.volume_path, "volume_path")?;
        let (required, limit) =
            checks::capacity_range(req.capacity_range.as_ref())?.unwrap_or((0, 0));
        let cap = req
            .volume_capability
            .as_ref()
            .map(|c| checks::capability(Some(c), "volume_capability"))
            .transpose()?;
        let controller_expands = self.caps.has_controller(ControllerRpc::ExpandVolume)
            && (self.config.mode.serves_controller() || self.config.state_dir.is_some());
        self.store.transact(|state| {
            let at_path = self.capability_at(state, &req.volume_id, &req.volume_path);
            let unstaged = self.quirk_expand_staging(
                state.nodes.get(&self.config.node_id),
                &req.volume_id,
                &req.staging_target_path,
            );
            let volume = state
                .volumes
                .get_mut(&req.volume_id)
                .ok_or_else(|| Status::not_found(format!("volume {} does not exist", req.volume_id)))?;
            if at_path.is_none() {
                return Err(Status::not_found(format!(
                    "volume {} is not published or staged at {}",
                    req.volume_id, req.volume_path
                )));
            }
            if let Some(cap) = &cap
                && let Some(why) = checks::volume_support_problem(volume, cap)
            {
                return Err(checks::unsupported_capability("NodeExpandVolume", why));
            }
            if limit > 0 && volume.capacity > limit {
                return Err(Status::out_of_range(format!(
                    "the volume has {} bytes, more than limit_bytes {limit}",
                    volume.capacity
                )));
            }
            if required > volume.capacity {
                if controller_expands && !volume.static_volume {
                    return Err(Status::out_of_range(format!(
                        "required_bytes {required} is more than the volume's {} bytes: call ControllerExpandVolume first",
                        volume.capacity
                    )));
                }
                if required > self.config.max_volume_size {
                    return Err(Status::out_of_range(format!(
                        "required_bytes {required} exceeds the maximum volume size {}",
                        self.config.max_volume_size
                    )));
                }
            }
            // `expand-needs-staging-path`, once the request is known to be servable.
            unstaged?;
            if required > volume.capacity {
                if !self.quirk(super::Quirk::ExpandNoGrow) {
                    self.data
                        .volume(&volume.id)
                        .grow_block(required)
                        .map_err(|e| internal("grow the block file", e))?;
                }
                volume.capacity = required;
            }
            Ok(v1::NodeExpandVolumeResponse { capacity_bytes: volume.capacity })
        })
    }

    fn node_get_capabilities(
        &self,
        _: v1::NodeGetCapabilitiesRequest,
    ) -> Result<v1::NodeGetCapabilitiesResponse, Status> {
        use v1::node_service_capability::{Rpc, Type};
        Ok(v1::NodeGetCapabilitiesResponse {
            capabilities: self
                .caps
                .node
                .iter()
                .map(|t| v1::NodeServiceCapability {
                    r#type: Some(Type::Rpc(Rpc { r#type: *t as i32 })),
                })
                .collect(),
        })
    }

    fn node_get_info(&self, _: v1::NodeGetInfoRequest) -> Result<v1::NodeGetInfoResponse, Status> {
        Ok(v1::NodeGetInfoResponse {
            node_id: self.config.node_id.clone(),
            max_volumes_per_node: self.config.max_volumes_per_node,
            accessible_topology: self.caps.topology().then(|| self.node_topology()),
        })
    }
}

/// The spec's second-NodePublishVolume tables: another target on this node is fine for
/// MULTI_NODE_* and SINGLE_NODE_MULTI_WRITER, FAILED_PRECONDITION otherwise, and
/// FAILED_PRECONDITION for a different capability in any case.
fn check_other_targets<'a>(
    volume_id: &str,
    publications: impl Iterator<Item = (&'a String, &'a NodePublication)>,
    cap: &Capability,
) -> Result<(), Status> {
    for (target, p) in publications.filter(|(_, p)| p.volume_id == volume_id) {
        if !checks::allows_several_targets(cap.mode()) {
            return Err(Status::failed_precondition(format!(
                "volume {volume_id} is already published at {target} and access mode {} allows one target",
                cap.mode_name()
            )));
        }
        if p.capability != *cap {
            return Err(Status::failed_precondition(format!(
                "volume {volume_id} is already published at {target} with a different volume_capability"
            )));
        }
    }
    Ok(())
}

#[tonic::async_trait]
impl Node for Service {
    async fn node_stage_volume(
        &self,
        request: Request<v1::NodeStageVolumeRequest>,
    ) -> Result<Response<v1::NodeStageVolumeResponse>, Status> {
        self.call("NodeStageVolume", request, Plugin::node_stage_volume)
            .await
    }

    async fn node_unstage_volume(
        &self,
        request: Request<v1::NodeUnstageVolumeRequest>,
    ) -> Result<Response<v1::NodeUnstageVolumeResponse>, Status> {
        self.call("NodeUnstageVolume", request, Plugin::node_unstage_volume)
            .await
    }

    async fn node_publish_volume(
        &self,
        request: Request<v1::NodePublishVolumeRequest>,
    ) -> Result<Response<v1::NodePublishVolumeResponse>, Status> {
        self.call("NodePublishVolume", request, Plugin::node_publish_volume)
            .await
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<v1::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<v1::NodeUnpublishVolumeResponse>, Status> {
        self.call(
            "NodeUnpublishVolume",
            request,
            Plugin::node_unpublish_volume,
        )
        .await
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<v1::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<v1::NodeGetVolumeStatsResponse>, Status> {
        let answer = self.call("NodeGetVolumeStats", request, Plugin::node_get_volume_stats).await;
        self.told("NodeGetVolumeStats", answer)
    }

    async fn node_expand_volume(
        &self,
        request: Request<v1::NodeExpandVolumeRequest>,
    ) -> Result<Response<v1::NodeExpandVolumeResponse>, Status> {
        self.call("NodeExpandVolume", request, Plugin::node_expand_volume)
            .await
    }

    async fn node_get_capabilities(
        &self,
        request: Request<v1::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<v1::NodeGetCapabilitiesResponse>, Status> {
        self.call(
            "NodeGetCapabilities",
            request,
            Plugin::node_get_capabilities,
        )
        .await
    }

    async fn node_get_info(
        &self,
        request: Request<v1::NodeGetInfoRequest>,
    ) -> Result<Response<v1::NodeGetInfoResponse>, Status> {
        self.told("NodeGetInfo", self.call("NodeGetInfo", request, Plugin::node_get_info).await)
    }

    async fn node_get_volume_health(
        &self,
        request: Request<v1::NodeGetVolumeHealthRequest>,
    ) -> Result<Response<v1::NodeGetVolumeHealthResponse>, Status> {
        self.call("NodeGetVolumeHealth", request, Plugin::node_get_volume_health).await
    }

    async fn node_get_storage_health(
        &self,
        request: Request<v1::NodeGetStorageHealthRequest>,
    ) -> Result<Response<v1::NodeGetStorageHealthResponse>, Status> {
        self.call("NodeGetStorageHealth", request, Plugin::node_get_storage_health).await
    }
}

/// What an undoing RPC (NodeUnstage, NodeUnpublish) finds at its path: the record, when it is
/// this volume's; nothing to do (`None`, the call is idempotent) when the volume exists but is
/// not staged or published there; NOT_FOUND when the volume does not exist at all, as both
/// RPCs' error tables say.
/// A mount at `path` that no record knows (`unrecorded`): what a process of this plugin
/// killed before it recorded its staging or publication left. Undone all the same, whether
/// the volume still exists or was deleted since (a real plugin unmounts whatever is mounted at
/// the path it is asked to clean; without this a restart between mount and record would leave
/// the mount for good once the volume is gone). Whether it undid one: the call then answers
/// OK, as for an unpublish of what was published.
fn undo_unrecorded(unrecorded: bool, path: &std::path::Path, what: &str) -> Result<bool, Status> {
    if !unrecorded || !mounts::is_mount_point(path) {
        return Ok(false);
    }
    mounts::unmount(path).map_err(|e| internal(what, e))?;
    remove_path(path)?;
    Ok(true)
}

fn record_to_undo<R: Clone>(
    found: Option<&R>,
    volume_of: impl Fn(&R) -> &String,
    volume_id: &str,
    volume_known: bool,
) -> Result<Option<R>, Status> {
    match found.filter(|r| volume_of(r) == volume_id) {
        Some(record) => Ok(Some(record.clone())),
        None if volume_known => Ok(None),
        None => Err(Status::not_found(format!("volume {volume_id} does not exist"))),
    }
}
