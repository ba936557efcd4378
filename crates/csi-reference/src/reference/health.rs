//! The reference plugin's CSI v1.13 health RPCs: ControllerListVolumeHealth,
//! ControllerGetVolumeHealth, NodeGetVolumeHealth and NodeGetStorageHealth, and the health
//! state it can be told to report.
//!
//! A volume is healthy (an empty `health_statuses`) unless its backing store has gone
//! (INACCESSIBLE `BackingStoreMissing`), a node publication is no longer mounted (node's view:
//! INACCESSIBLE `NotMounted`), or it was created with the parameter
//! `csi-conform.dev/health: STATUS:Reason[,STATUS:Reason...]` (how a test degrades one). The
//! storage reports what `--storage-health` says. The quirks `duplicate-health-entry` and
//! `health-missing-reason` bend the entries after they are built.

use std::ops::Bound;
use std::path::Path;

use tonic::Status;

use crate::mounts;
use crate::proto::v1::{self, volume_health::VolumeHealthEntry};

use super::Plugin;
use super::checks;
use super::controller::{page_start, paginate};
use super::quirks::Quirk;
use super::state::{State, VolumeRecord};

/// The CreateVolume parameter that tells the reference plugin which adverse health a volume
/// has: `STATUS:Reason`, comma-separated (`DEGRADED:ReplicaMissing`).
pub const HEALTH_PARAMETER: &str = "csi-conform.dev/health";

/// The paging-token kind of ControllerListVolumeHealth.
const VOLUME_HEALTH: &str = "volume-health";

fn entry(status: v1::VolumeHealthErrorType, reason: &str, message: String) -> VolumeHealthEntry {
    VolumeHealthEntry { status: status as i32, reason: reason.to_owned(), message }
}

/// The volume a health request names: INVALID_ARGUMENT without an id, NOT_FOUND for one that
/// does not exist.
fn existing_volume<'s>(state: &'s State, volume_id: &str) -> Result<&'s VolumeRecord, Status> {
    checks::required(volume_id, "volume_id")?;
    state.volumes.get(volume_id).ok_or_else(|| Status::not_found(format!("volume {volume_id} does not exist")))
}

impl Plugin {
    /// The entries the quirks make of compliant ones: each twice, or without a reason.
    fn bend<T: Clone>(&self, entries: Vec<T>, clear_reason: impl Fn(&mut T)) -> Vec<T> {
        let mut out = Vec::new();
        for mut e in entries {
            if self.quirk(Quirk::HealthMissingReason) {
                clear_reason(&mut e);
            }
            if self.quirk(Quirk::DuplicateHealthEntry) {
                out.push(e.clone());
            }
            out.push(e);
        }
        out
    }

    /// A volume's adverse conditions as the controller sees them.
    fn controller_health(&self, v: &VolumeRecord) -> Vec<VolumeHealthEntry> {
        let mut out = Vec::new();
        for part in v.parameters.get(HEALTH_PARAMETER).map(String::as_str).unwrap_or_default().split(',') {
            let Some((status, reason)) = part.split_once(':') else { continue };
            // Only well-formed conditions: a known, non-zero status and a reason (REQUIRED).
            if let Some(status) = v1::VolumeHealthErrorType::from_str_name(status.trim()).filter(|s| *s as i32 != 0)
                && !reason.trim().is_empty()
            {
                out.push(entry(status, reason.trim(), format!("told to report {}", status.as_str_name())));
            }
        }
        let store = self.data.volume(&v.id);
        if (v.has_mount && !store.fs().is_dir()) || (v.has_block && !store.block().is_file()) {
            out.push(entry(v1::VolumeHealthErrorType::Inaccessible, "BackingStoreMissing", "the backing store is missing".into()));
        }
        out
    }

    fn volume_health(&self, volume_id: &str, entries: Vec<VolumeHealthEntry>) -> v1::VolumeHealth {
        v1::VolumeHealth { volume_id: volume_id.to_owned(), health_statuses: self.bend(entries, |e| e.reason.clear()) }
    }

    pub(crate) fn controller_get_volume_health(
        &self,
        req: v1::ControllerGetVolumeHealthRequest,
    ) -> Result<v1::ControllerGetVolumeHealthResponse, Status> {
        let state = self.store.snapshot()?;
        let volume = existing_volume(&state, &req.volume_id)?;
        Ok(v1::ControllerGetVolumeHealthResponse {
            volume_health: Some(self.volume_health(&volume.id, self.controller_health(volume))),
        })
    }

    pub(crate) fn controller_list_volume_health(
        &self,
        req: v1::ControllerListVolumeHealthRequest,
    ) -> Result<v1::ControllerListVolumeHealthResponse, Status> {
        if req.max_entries < 0 {
            return Err(Status::invalid_argument("max_entries must not be negative"));
        }
        let state = self.store.snapshot()?;
        let after = page_start(&state, VOLUME_HEALTH, &req.starting_token)?;
        // Only volumes with adverse health are listed.
        let ids: Vec<&String> = state
            .volumes
            .range::<String, _>((after.as_ref().map_or(Bound::Unbounded, Bound::Excluded), Bound::Unbounded))
            .filter(|(_, v)| !self.controller_health(v).is_empty())
            .map(|(id, _)| id)
            .collect();
        let (page, next_token) = paginate(&state, VOLUME_HEALTH, &ids, req.max_entries);
        let entries = page
            .into_iter()
            .filter_map(|id| state.volumes.get(id))
            .map(|v| self.volume_health(&v.id, self.controller_health(v)))
            .collect();
        Ok(v1::ControllerListVolumeHealthResponse { entries, next_token })
    }

    /// Whether `path` (absolute) holds `volume_id` on this node, and whether it should be a
    /// mount point there.
    fn node_path(&self, state: &State, volume_id: &str, path: &str, field: &str) -> Result<bool, Status> {
        checks::required_path(path, field)?;
        let node = state.nodes.get(&self.config.node_id);
        let found = node.and_then(|n| {
            n.publications
                .get(path)
                .filter(|p| p.volume_id == volume_id)
                .map(|p| p.mounted)
                .or_else(|| n.stagings.get(path).filter(|s| s.volume_id == volume_id).map(|s| s.mounted))
        });
        found.ok_or_else(|| Status::not_found(format!("volume {volume_id} is not published or staged at {path}")))
    }

    pub(crate) fn node_get_volume_health(
        &self,
        req: v1::NodeGetVolumeHealthRequest,
    ) -> Result<v1::NodeGetVolumeHealthResponse, Status> {
        let state = self.store.snapshot()?;
        let volume = existing_volume(&state, &req.volume_id)?;
        let mut entries = self.controller_health(volume);
        if !req.staging_target_path.is_empty() && !self.caps.has_node(v1::node_service_capability::rpc::Type::StageUnstageVolume) {
            return Err(Status::invalid_argument("staging_target_path is only for plugins with STAGE_UNSTAGE_VOLUME"));
        }
        for (path, field) in [(&req.volume_publish_path, "volume_publish_path"), (&req.staging_target_path, "staging_target_path")] {
            if path.is_empty() {
                continue;
            }
            let mounted = self.node_path(&state, &req.volume_id, path, field)?;
            if mounted && !mounts::is_mount_point(Path::new(path)) {
                entries.push(entry(v1::VolumeHealthErrorType::Inaccessible, "NotMounted", format!("{path} is no longer mounted")));
            }
        }
        Ok(v1::NodeGetVolumeHealthResponse { volume_health: Some(self.volume_health(&volume.id, entries)) })
    }

    pub(crate) fn node_get_storage_health(
        &self,
        _req: v1::NodeGetStorageHealthRequest,
    ) -> Result<v1::NodeGetStorageHealthResponse, Status> {
        use v1::node_get_storage_health_response::StorageBackendHealth;
        let entries = self
            .config
            .storage_health
            .iter()
            .map(|(status, reason)| StorageBackendHealth {
                status: *status as i32,
                reason: reason.clone(),
                message: format!("told to report {}", status.as_str_name()),
                volume_capability: None,
            })
            .collect();
        Ok(v1::NodeGetStorageHealthResponse { backend_health: self.bend(entries, |e| e.reason.clear()) })
    }
}
