//! The reference plugin's GroupController service: volume group snapshots, whose member
//! snapshots are cut together and carry the group's id.

use std::collections::BTreeSet;

use tonic::{Request, Response, Status};

use crate::proto::v1::{self, group_controller_server::GroupController};

use super::state::{GroupRecord, State, Timestamp, to_map};
use super::{Plugin, Service, checks};

impl Plugin {
    /// The wire form of a group snapshot with its members.
    fn group_proto(&self, state: &State, g: &GroupRecord) -> v1::VolumeGroupSnapshot {
        let snapshots: Vec<v1::Snapshot> = g
            .snapshot_ids
            .iter()
            .filter_map(|id| state.snapshots.get(id))
            .map(|s| self.snapshot_proto(s))
            .collect();
        v1::VolumeGroupSnapshot {
            group_snapshot_id: g.id.clone(),
            ready_to_use: snapshots.iter().all(|s| s.ready_to_use),
            snapshots,
            creation_time: Some(g.created.to_proto()),
        }
    }

    fn group_controller_get_capabilities(
        &self,
        _: v1::GroupControllerGetCapabilitiesRequest,
    ) -> Result<v1::GroupControllerGetCapabilitiesResponse, Status> {
        use v1::group_controller_service_capability::{Rpc, Type};
        Ok(v1::GroupControllerGetCapabilitiesResponse {
            capabilities: self
                .caps
                .group
                .iter()
                .map(|t| v1::GroupControllerServiceCapability {
                    r#type: Some(Type::Rpc(Rpc { r#type: *t as i32 })),
                })
                .collect(),
        })
    }

    fn create_volume_group_snapshot(
        &self,
        req: v1::CreateVolumeGroupSnapshotRequest,
    ) -> Result<v1::CreateVolumeGroupSnapshotResponse, Status> {
        checks::name(&req.name, "name")?;
        if req.source_volume_ids.is_empty() {
            return Err(Status::invalid_argument("source_volume_ids is required"));
        }
        if req.source_volume_ids.iter().any(String::is_empty) {
            return Err(Status::invalid_argument(
                "source_volume_ids must not contain empty ids",
            ));
        }
        let wanted: BTreeSet<&String> = req.source_volume_ids.iter().collect();
        if wanted.len() != req.source_volume_ids.len() {
            return Err(Status::invalid_argument(
                "source_volume_ids must not repeat a volume",
            ));
        }
        let parameters = to_map(&req.parameters);
        self.store.transact(|state| {
            if let Some(existing) = state.groups.values().find(|g| g.name == req.name) {
                let have: BTreeSet<&String> = existing.source_volume_ids.iter().collect();
                if have != wanted || existing.parameters != parameters {
                    return Err(Status::already_exists(format!(
                        "a group snapshot named {:?} already exists ({}) with different source volumes or parameters",
                        req.name, existing.id
                    )));
                }
                return Ok(v1::CreateVolumeGroupSnapshotResponse {
                    group_snapshot: Some(self.group_proto(state, existing)),
                });
            }
            if let Some(missing) = req.source_volume_ids.iter().find(|id| !state.volumes.contains_key(*id)) {
                return Err(Status::not_found(format!("source volume {missing} does not exist")));
            }
            let id = format!("group-{:06}", state.next_seq());
            let created = Timestamp::now();
            let mut snapshot_ids = Vec::new();
            for volume_id in &req.source_volume_ids {
                let s = self.cut_snapshot(state, volume_id, "", Some(id.clone()), parameters.clone(), created)?;
                snapshot_ids.push(s.id);
            }
            let group = GroupRecord {
                id: id.clone(),
                name: req.name.clone(),
                source_volume_ids: req.source_volume_ids.clone(),
                snapshot_ids,
                parameters: parameters.clone(),
                created,
            };
            let response = v1::CreateVolumeGroupSnapshotResponse { group_snapshot: Some(self.group_proto(state, &group)) };
            state.groups.insert(id, group);
            Ok(response)
        })
    }

    fn get_volume_group_snapshot(
        &self,
        req: v1::GetVolumeGroupSnapshotRequest,
    ) -> Result<v1::GetVolumeGroupSnapshotResponse, Status> {
        checks::required(&req.group_snapshot_id, "group_snapshot_id")?;
        let state = self.store.snapshot()?;
        let group = state.groups.get(&req.group_snapshot_id).ok_or_else(|| {
            Status::not_found(format!(
                "group snapshot {} does not exist",
                req.group_snapshot_id
            ))
        })?;
        check_snapshot_ids(group, &req.snapshot_ids)?;
        Ok(v1::GetVolumeGroupSnapshotResponse {
            group_snapshot: Some(self.group_proto(&state, group)),
        })
    }

    fn delete_volume_group_snapshot(
        &self,
        req: v1::DeleteVolumeGroupSnapshotRequest,
    ) -> Result<v1::DeleteVolumeGroupSnapshotResponse, Status> {
        checks::required(&req.group_snapshot_id, "group_snapshot_id")?;
        self.store.transact(|state| {
            let Some(group) = state.groups.get(&req.group_snapshot_id).cloned() else {
                return Ok(v1::DeleteVolumeGroupSnapshotResponse {});
            };
            check_snapshot_ids(&group, &req.snapshot_ids)?;
            for id in &group.snapshot_ids {
                self.data.snapshot(id).remove().map_err(|e| {
                    Status::internal(format!("could not remove snapshot {id}: {e}"))
                })?;
                state.snapshots.remove(id);
            }
            state.groups.remove(&group.id);
            Ok(v1::DeleteVolumeGroupSnapshotResponse {})
        })
    }
}

/// INVALID_ARGUMENT when the caller's list of member snapshots is missing or is not the
/// group's. spec.md marks GetVolumeGroupSnapshotRequest.snapshot_ids and
/// DeleteVolumeGroupSnapshotRequest.snapshot_ids "This field is REQUIRED" (a REQUIRED
/// repeated field holds at least one element), but the list only means something for a group
/// that exists: an unknown group is NOT_FOUND (Get) or already deleted (Delete) whatever the
/// list says, as csi-sanity's checks 94 and 96 expect.
fn check_snapshot_ids(group: &GroupRecord, ids: &[String]) -> Result<(), Status> {
    if ids.is_empty() {
        return Err(Status::invalid_argument("snapshot_ids is required"));
    }
    let have: BTreeSet<&String> = group.snapshot_ids.iter().collect();
    let given: BTreeSet<&String> = ids.iter().collect();
    if have != given {
        return Err(Status::invalid_argument(format!(
            "snapshot_ids do not match the snapshots of group snapshot {}",
            group.id
        )));
    }
    Ok(())
}

#[tonic::async_trait]
impl GroupController for Service {
    async fn group_controller_get_capabilities(
        &self,
        request: Request<v1::GroupControllerGetCapabilitiesRequest>,
    ) -> Result<Response<v1::GroupControllerGetCapabilitiesResponse>, Status> {
        self.call(
            "GroupControllerGetCapabilities",
            request,
            Plugin::group_controller_get_capabilities,
        )
        .await
    }

    async fn create_volume_group_snapshot(
        &self,
        request: Request<v1::CreateVolumeGroupSnapshotRequest>,
    ) -> Result<Response<v1::CreateVolumeGroupSnapshotResponse>, Status> {
        self.call(
            "CreateVolumeGroupSnapshot",
            request,
            Plugin::create_volume_group_snapshot,
        )
        .await
    }

    async fn delete_volume_group_snapshot(
        &self,
        request: Request<v1::DeleteVolumeGroupSnapshotRequest>,
    ) -> Result<Response<v1::DeleteVolumeGroupSnapshotResponse>, Status> {
        self.call(
            "DeleteVolumeGroupSnapshot",
            request,
            Plugin::delete_volume_group_snapshot,
        )
        .await
    }

    async fn get_volume_group_snapshot(
        &self,
        request: Request<v1::GetVolumeGroupSnapshotRequest>,
    ) -> Result<Response<v1::GetVolumeGroupSnapshotResponse>, Status> {
        self.call(
            "GetVolumeGroupSnapshot",
            request,
            Plugin::get_volume_group_snapshot,
        )
        .await
    }
}
