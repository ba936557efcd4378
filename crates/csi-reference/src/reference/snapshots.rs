//! The reference plugin's snapshot RPCs of the Controller service: CreateSnapshot,
//! DeleteSnapshot, ListSnapshots and GetSnapshot. A snapshot is a copy of its volume's backing
//! store, so it outlives the volume and can seed new volumes.

use std::ops::Bound;

use tonic::Status;

use crate::proto::v1;

use super::Plugin;
use super::checks;
use super::controller::{page_start, paginate};
use super::state::{SnapshotRecord, State, Timestamp, from_map, to_map};
use crate::proto::v1::plugin_capability::service::Type as PluginService;

/// The paging-token kind of ListSnapshots.
const SNAPSHOTS: &str = "snapshots";

impl Plugin {
    /// Whether a snapshot has finished its (simulated) post-cut processing.
    pub(crate) fn snapshot_ready(&self, s: &SnapshotRecord) -> bool {
        s.created.elapsed() >= self.config.snapshot_ready_after
    }

    /// Whether snapshots carry accessible_topology: with SNAPSHOT_ACCESSIBILITY_CONSTRAINTS,
    /// or without it under the quirk `snapshot-topology-without-capability`.
    fn snapshot_topology_reported(&self) -> bool {
        self.caps.has_plugin(PluginService::SnapshotAccessibilityConstraints)
            || self.quirk(super::Quirk::SnapshotTopologyWithoutCapability)
    }

    /// The wire form of a snapshot.
    pub(crate) fn snapshot_proto(&self, s: &SnapshotRecord) -> v1::Snapshot {
        v1::Snapshot {
            size_bytes: s.size,
            snapshot_id: s.id.clone(),
            source_volume_id: s.source_volume_id.clone(),
            creation_time: Some(s.created.to_proto()),
            ready_to_use: self.snapshot_ready(s),
            group_snapshot_id: s.group_id.clone().unwrap_or_default(),
            accessible_topology: if self.snapshot_topology_reported() {
                s.topology.iter().map(|t| v1::Topology { segments: from_map(t) }).collect()
            } else {
                Vec::new()
            },
        }
    }

    /// Cuts a snapshot of `volume_id`: copies its backing store and records it. `name` is empty
    /// for members of a group snapshot.
    pub(crate) fn cut_snapshot(
        &self,
        state: &mut State,
        volume_id: &str,
        name: &str,
        group_id: Option<String>,
        parameters: super::state::StringMap,
        created: Timestamp,
    ) -> Result<SnapshotRecord, Status> {
        let volume = state.volumes.get(volume_id).ok_or_else(|| {
            Status::not_found(format!("source volume {volume_id} does not exist"))
        })?;
        let (size, has_mount, has_block) = (volume.capacity, volume.has_mount, volume.has_block);
        let topology = volume.topology.clone();
        let seq = state.next_seq();
        let id = format!("snap-{seq:06}");
        let store = self.data.snapshot(&id);
        if let Err(e) = store.copy_from(&self.data.volume(volume_id)) {
            let _ = store.remove();
            return Err(Status::internal(format!("could not copy the volume: {e}")));
        }
        let record = SnapshotRecord {
            id: id.clone(),
            name: name.to_owned(),
            source_volume_id: volume_id.to_owned(),
            size,
            created,
            seq,
            group_id,
            parameters,
            has_mount,
            has_block,
            topology,
        };
        state.snapshots.insert(id, record.clone());
        Ok(record)
    }

    pub(crate) fn create_snapshot(
        &self,
        req: v1::CreateSnapshotRequest,
    ) -> Result<v1::CreateSnapshotResponse, Status> {
        checks::name(&req.name, "name")?;
        checks::required(&req.source_volume_id, "source_volume_id")?;
        // v1.13: accessibility_requirements only for plugins with the capability; an empty
        // requirement is read as unset, as in CreateVolume.
        let requirement = req
            .accessibility_requirements
            .as_ref()
            .filter(|t| !t.requisite.is_empty() || !t.preferred.is_empty());
        if requirement.is_some() && !self.caps.has_plugin(PluginService::SnapshotAccessibilityConstraints) {
            return Err(Status::invalid_argument(
                "accessibility_requirements need SNAPSHOT_ACCESSIBILITY_CONSTRAINTS, which is not advertised",
            ));
        }
        let answer = self.store.transact(|state| {
            if let Some(existing) = state
                .snapshots
                .values()
                .find(|s| !s.name.is_empty() && s.name == req.name)
            {
                if existing.source_volume_id != req.source_volume_id {
                    return Err(Status::already_exists(format!(
                        "a snapshot named {:?} already exists ({}) of another volume ({})",
                        req.name, existing.id, existing.source_volume_id
                    )));
                }
                return Ok(v1::CreateSnapshotResponse {
                    snapshot: Some(self.snapshot_proto(existing)),
                });
            }
            // A copy can live on any node this plugin serves: where it is asked to (checked
            // before anything is copied).
            let placed = requirement.map(|r| self.choose_topology(state, Some(r))).transpose()?;
            let record = self.cut_snapshot(
                state,
                &req.source_volume_id,
                &req.name,
                None,
                to_map(&req.parameters),
                Timestamp::now(),
            )?;
            let record = match placed {
                Some(topology) => {
                    let placed = SnapshotRecord { topology, ..record };
                    state.snapshots.insert(placed.id.clone(), placed.clone());
                    placed
                }
                None => record,
            };
            Ok(v1::CreateSnapshotResponse {
                snapshot: Some(self.snapshot_proto(&record)),
            })
        })?;
        self.lag_snapshot_created(answer.snapshot.as_ref());
        Ok(answer)
    }

    pub(crate) fn delete_snapshot(
        &self,
        req: v1::DeleteSnapshotRequest,
    ) -> Result<v1::DeleteSnapshotResponse, Status> {
        checks::required(&req.snapshot_id, "snapshot_id")?;
        self.store.transact(|state| {
            let Some(snapshot) = state.snapshots.get(&req.snapshot_id) else {
                return Ok(v1::DeleteSnapshotResponse {});
            };
            if let Some(group) = &snapshot.group_id {
                // spec.md, DeleteSnapshot Errors: "Snapshot is part of a group | 3 INVALID_ARGUMENT".
                return Err(Status::invalid_argument(format!(
                    "snapshot {} is part of group snapshot {group}; delete it with DeleteVolumeGroupSnapshot",
                    req.snapshot_id
                )));
            }
            if self.quirk(super::Quirk::DeleteKeepsSnapshot) {
                return Ok(v1::DeleteSnapshotResponse {});
            }
            self.data
                .snapshot(&req.snapshot_id)
                .remove()
                .map_err(|e| Status::internal(format!("could not remove the snapshot data: {e}")))?;
            if let Some(gone) = state.snapshots.remove(&req.snapshot_id) {
                self.lag_snapshot_deleted(v1::list_snapshots_response::Entry { snapshot: Some(self.snapshot_proto(&gone)) });
            }
            Ok(v1::DeleteSnapshotResponse {})
        })
    }

    pub(crate) fn list_snapshots(
        &self,
        req: v1::ListSnapshotsRequest,
    ) -> Result<v1::ListSnapshotsResponse, Status> {
        if req.max_entries < 0 {
            return Err(Status::invalid_argument("max_entries must not be negative"));
        }
        let state = self.store.snapshot()?;
        let after = page_start(&state, SNAPSHOTS, &req.starting_token)?;
        let ids: Vec<&String> = state
            .snapshots
            .range::<String, _>((
                after.as_ref().map_or(Bound::Unbounded, Bound::Excluded),
                Bound::Unbounded,
            ))
            .filter(|(id, s)| {
                (req.snapshot_id.is_empty() || **id == req.snapshot_id)
                    && (req.source_volume_id.is_empty()
                        || s.source_volume_id == req.source_volume_id)
            })
            .map(|(id, _)| id)
            .collect();
        let (page, next_token) = paginate(&state, SNAPSHOTS, &ids, req.max_entries);
        let entries = page
            .into_iter()
            .filter_map(|id| state.snapshots.get(id))
            .map(|s| v1::list_snapshots_response::Entry {
                snapshot: Some(self.snapshot_proto(s)),
            })
            .collect();
        let mut answer = v1::ListSnapshotsResponse { entries, next_token };
        let whole = req.starting_token.is_empty()
            && req.max_entries == 0
            && req.snapshot_id.is_empty()
            && req.source_volume_id.is_empty();
        self.lag_snapshot_listing(&mut answer, whole);
        Ok(answer)
    }

    pub(crate) fn get_snapshot(
        &self,
        req: v1::GetSnapshotRequest,
    ) -> Result<v1::GetSnapshotResponse, Status> {
        checks::required(&req.snapshot_id, "snapshot_id")?;
        let state = self.store.snapshot()?;
        let s = state.snapshots.get(&req.snapshot_id).ok_or_else(|| {
            Status::not_found(format!("snapshot {} does not exist", req.snapshot_id))
        })?;
        Ok(v1::GetSnapshotResponse {
            snapshot: Some(self.snapshot_proto(s)),
        })
    }
}
