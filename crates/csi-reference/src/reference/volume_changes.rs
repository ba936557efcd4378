//! The reference plugin's Controller RPCs that change an existing volume: ControllerExpandVolume
//! and ControllerModifyVolume, and the mutable_parameters check CreateVolume shares.

use tonic::Status;

use crate::proto::v1::{
    self, controller_service_capability::rpc::Type as ControllerRpc,
    node_service_capability::rpc::Type as NodeRpc,
};

use super::Plugin;
use super::checks;

impl Plugin {
    /// mutable_parameters need MODIFY_VOLUME and may only use the configured keys.
    pub(super) fn check_mutable_parameters(
        &self,
        params: &std::collections::HashMap<String, String>,
    ) -> Result<(), Status> {
        if params.is_empty() {
            return Ok(());
        }
        if !self.caps.has_controller(ControllerRpc::ModifyVolume) {
            return Err(Status::invalid_argument(
                "mutable_parameters need the controller capability MODIFY_VOLUME, which is not advertised",
            ));
        }
        let mut keys: Vec<&String> = params.keys().collect();
        keys.sort();
        if let Some(k) = keys
            .into_iter()
            .find(|k| !self.config.mutable_keys.contains(k))
        {
            return Err(Status::invalid_argument(format!(
                "mutable parameter {k:?} is not supported (supported: {})",
                self.config.mutable_keys.join(", ")
            )));
        }
        Ok(())
    }

    pub(super) fn controller_expand_volume(
        &self,
        req: v1::ControllerExpandVolumeRequest,
    ) -> Result<v1::ControllerExpandVolumeResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        let (required, limit) = checks::capacity_range(req.capacity_range.as_ref())?
            .ok_or_else(|| Status::invalid_argument("capacity_range is required"))?;
        if required == 0 && limit == 0 {
            return Err(Status::invalid_argument(
                "capacity_range needs required_bytes or limit_bytes",
            ));
        }
        let cap = req
            .volume_capability
            .as_ref()
            .map(|c| checks::capability(Some(c), "volume_capability"))
            .transpose()?;
        self.store.transact(|state| {
            let in_use = state.volume_in_use(&req.volume_id);
            let provisioned = state.provisioned();
            let volume = state
                .volumes
                .get_mut(&req.volume_id)
                .ok_or_else(|| Status::not_found(format!("volume {} does not exist", req.volume_id)))?;
            if let Some(cap) = &cap
                && let Some(why) = checks::volume_support_problem(volume, cap)
            {
                return Err(checks::unsupported_capability("ControllerExpandVolume", why));
            }
            if !self.caps.online_expansion
                && let Some(why) = in_use
            {
                return Err(Status::failed_precondition(format!(
                    "volume {} cannot be expanded while in use (no ONLINE expansion): {why}",
                    req.volume_id
                )));
            }
            // `expand-needs-staging-path` is a plugin whose node rescans a grown device too.
            let node_expansion_required = (volume.has_mount || self.quirk(super::Quirk::ExpandNeedsStagingPath))
                && self.caps.has_node(NodeRpc::ExpandVolume);
            let max = self.config.max_volume_size;
            if required > max {
                return Err(Status::out_of_range(format!(
                    "required_bytes {required} exceeds the maximum volume size {max}"
                )));
            }
            if limit > 0 && volume.capacity > limit {
                return Err(Status::out_of_range(format!(
                    "the volume already has {} bytes, more than limit_bytes {limit}; volumes cannot shrink",
                    volume.capacity
                )));
            }
            if required <= volume.capacity {
                // Already large enough: the spec asks for OK without change.
                return Ok(v1::ControllerExpandVolumeResponse {
                    capacity_bytes: volume.capacity,
                    node_expansion_required,
                });
            }
            let growth = required - volume.capacity;
            let available = self.config.capacity - provisioned;
            if growth > available {
                return Err(Status::resource_exhausted(format!(
                    "{growth} more bytes requested, {available} bytes left in the pool"
                )));
            }
            if !self.quirk(super::Quirk::ExpandNoGrow) {
                self.data
                    .volume(&volume.id)
                    .grow_block(required)
                    .map_err(|e| Status::internal(format!("could not grow the block file: {e}")))?;
            }
            volume.capacity = required;
            Ok(v1::ControllerExpandVolumeResponse { capacity_bytes: required, node_expansion_required })
        })
    }

    pub(super) fn controller_modify_volume(
        &self,
        req: v1::ControllerModifyVolumeRequest,
    ) -> Result<v1::ControllerModifyVolumeResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        self.store.transact(|state| {
            // An unknown volume is NOT_FOUND whatever else the request lacks (the spec orders
            // no two errors; csi-sanity sends an empty map here and expects NOT_FOUND).
            let volume = state.volumes.get_mut(&req.volume_id).ok_or_else(|| {
                Status::not_found(format!("volume {} does not exist", req.volume_id))
            })?;
            // mutable_parameters is REQUIRED, and an empty proto3 map is the same as a missing
            // one: INVALID_ARGUMENT, the Error Scheme's "missing required field".
            if req.mutable_parameters.is_empty() {
                return Err(Status::invalid_argument("mutable_parameters is required"));
            }
            self.check_mutable_parameters(&req.mutable_parameters)?;
            for (k, v) in &req.mutable_parameters {
                volume.mutable_parameters.insert(k.clone(), v.clone());
            }
            Ok(v1::ControllerModifyVolumeResponse {})
        })
    }
}
