//! The reference plugin's Controller service: volume RPCs (create, delete, publish, validate,
//! list, capacity, get) and the trait wiring of every Controller RPC (the snapshot RPC bodies
//! live in `snapshots`, expand and modify in `volume_changes`).

use std::collections::BTreeSet;
use std::ops::Bound;

use tonic::{Request, Response, Status};

use crate::proto::v1::{
    self, controller_server::Controller, controller_service_capability::rpc::Type as ControllerRpc,
};

use super::checks;
use super::config::{GIB, TOPOLOGY_KEY};
use super::keys::{DEVICE_KEY, NODE_KEY};
use super::state::{
    Capability, ControllerPublication, Source, State, StringMap, VolumeRecord, from_map, to_map,
};
use super::{Plugin, Service};

/// The volume_context key holding the volume's name.
pub const NAME_KEY: &str = "csi-conform.dev/name";
/// The volume_context key holding the volume's file system (or `block`).
pub const FS_KEY: &str = "csi-conform.dev/fs";

/// The paging-token kind of ListVolumes.
const VOLUMES: &str = "volumes";

impl Plugin {
    /// The wire form of a volume.
    pub(crate) fn volume_proto(&self, v: &VolumeRecord) -> v1::Volume {
        v1::Volume {
            capacity_bytes: v.capacity,
            volume_id: v.id.clone(),
            volume_context: from_map(&v.context),
            content_source: v.source.as_ref().map(Source::to_proto),
            accessible_topology: if self.caps.topology() {
                v.topology
                    .iter()
                    .map(|t| v1::Topology {
                        segments: from_map(t),
                    })
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    /// Node ids ControllerPublishVolume accepts: ours and every registered node plugin's.
    pub(crate) fn known_nodes(&self, state: &State) -> BTreeSet<String> {
        let mut nodes: BTreeSet<String> = state.nodes.keys().cloned().collect();
        nodes.insert(self.config.node_id.clone());
        nodes
    }

    /// Whether a topology is one of our nodes' (`{TOPOLOGY_KEY: <known node id>}`).
    fn topology_served(&self, state: &State, t: &v1::Topology) -> bool {
        (t.segments.len() == 1 || self.quirk(super::Quirk::TopologyExtraNodeSegment))
            && t.segments
                .get(TOPOLOGY_KEY)
                .is_some_and(|n| self.known_nodes(state).contains(n))
    }

    /// Where a new volume is accessible: the first preferred topology we serve (that is also
    /// requisite, when requisite is given), else the first requisite one we serve, else this
    /// node. RESOURCE_EXHAUSTED when no requisite topology is served.
    pub(crate) fn choose_topology(
        &self,
        state: &State,
        req: Option<&v1::TopologyRequirement>,
    ) -> Result<Vec<StringMap>, Status> {
        if !self.caps.topology() {
            return Ok(Vec::new());
        }
        let own = vec![own_segment(&self.node_topology())];
        let Some(r) = req else { return Ok(own) };
        if let Some(t) = r.preferred.iter().find(|t| {
            self.topology_served(state, t) && (r.requisite.is_empty() || r.requisite.contains(t))
        }) {
            return Ok(vec![own_segment(t)]);
        }
        if let Some(t) = r.requisite.iter().find(|t| self.topology_served(state, t)) {
            return Ok(vec![own_segment(t)]);
        }
        if !r.requisite.is_empty() {
            return Err(Status::resource_exhausted(format!(
                "none of the requisite topologies is served by this plugin (segments are {{{TOPOLOGY_KEY:?}: <node id>}})"
            )));
        }
        Ok(own)
    }

    /// The validated content source of a CreateVolume request.
    ///
    /// An unset source is no source, and so is a source that is set but names neither a
    /// snapshot nor a volume. spec.md says of VolumeContentSource "One of the type fields MUST
    /// be specified", so a CO sending the empty message is at fault; but orchestrators have
    /// sent exactly that where they meant "no source" (a zero-value struct serialised as
    /// present), and a plugin that fails those requests breaks them for no gain: the empty
    /// message asks for nothing a blank volume does not give. `empty-source-rejected` is the
    /// quirk that refuses it. A snapshot or volume source without its id is a real request
    /// with a missing REQUIRED field: INVALID_ARGUMENT.
    fn content_source(
        &self,
        source: Option<&v1::VolumeContentSource>,
    ) -> Result<Option<Source>, Status> {
        use v1::volume_content_source::Type;
        let Some(source) = source else {
            return Ok(None);
        };
        if let Some(quirky) = self.quirk_content_source(source) {
            return quirky;
        }
        match &source.r#type {
            None => Ok(None),
            Some(Type::Snapshot(s)) => {
                if !self
                    .caps
                    .has_controller(ControllerRpc::CreateDeleteSnapshot)
                {
                    return Err(Status::invalid_argument(
                        "creating a volume from a snapshot needs CREATE_DELETE_SNAPSHOT, which is not advertised",
                    ));
                }
                checks::required(&s.snapshot_id, "volume_content_source.snapshot.snapshot_id")?;
                Ok(Some(Source::Snapshot(s.snapshot_id.clone())))
            }
            Some(Type::Volume(v)) => {
                if !self.caps.has_controller(ControllerRpc::CloneVolume) {
                    return Err(Status::invalid_argument(
                        "cloning a volume needs CLONE_VOLUME, which is not advertised",
                    ));
                }
                checks::required(&v.volume_id, "volume_content_source.volume.volume_id")?;
                Ok(Some(Source::Volume(v.volume_id.clone())))
            }
        }
    }

    /// The capacity of a new volume: required_bytes, else limit_bytes, else the source's size,
    /// else 1 GiB; never smaller than the source. OUT_OF_RANGE beyond the maximum volume size
    /// or when the source does not fit under limit_bytes.
    fn resolve_capacity(
        &self,
        range: Option<(i64, i64)>,
        source_size: Option<i64>,
    ) -> Result<i64, Status> {
        let max = self.config.max_volume_size;
        let (required, limit) = range.unwrap_or((0, 0));
        if required > max {
            return Err(Status::out_of_range(format!(
                "required_bytes {required} exceeds the maximum volume size {max}"
            )));
        }
        let mut capacity = if required > 0 {
            required
        } else if limit > 0 {
            limit.min(max)
        } else {
            source_size.unwrap_or(GIB).min(max)
        };
        if let Some(size) = source_size
            && size > capacity
        {
            if limit > 0 && size > limit {
                return Err(Status::out_of_range(format!(
                    "the source is {size} bytes, more than limit_bytes {limit}"
                )));
            }
            capacity = size;
        }
        if capacity > max {
            return Err(Status::out_of_range(format!(
                "{capacity} bytes exceed the maximum volume size {max}"
            )));
        }
        Ok(capacity)
    }

    /// The volume_context of a new volume.
    fn new_volume_context(name: &str, caps: &[Capability]) -> StringMap {
        let fs = caps
            .iter()
            .find(|c| !c.is_block() && !c.fs_type().is_empty())
            .map(|c| c.fs_type())
            .or_else(|| {
                caps.iter()
                    .any(|c| !c.is_block())
                    .then_some(checks::DEFAULT_FS_TYPE)
            })
            .unwrap_or("block");
        [
            (NAME_KEY.to_owned(), name.to_owned()),
            (FS_KEY.to_owned(), fs.to_owned()),
        ]
        .into()
    }

    fn create_volume(
        &self,
        req: v1::CreateVolumeRequest,
    ) -> Result<v1::CreateVolumeResponse, Status> {
        checks::name(&req.name, "name")?;
        let caps = checks::capabilities(&req.volume_capabilities, "volume_capabilities")?;
        self.quirk_odd_capabilities("CreateVolume", &caps)?;
        for c in &caps {
            checks::fs_type(c)?;
            checks::controller_mode(&self.caps, c)?;
        }
        let range = checks::capacity_range(req.capacity_range.as_ref())?;
        self.check_mutable_parameters(&req.mutable_parameters)?;
        let source = self.content_source(req.volume_content_source.as_ref())?;
        // An empty TopologyRequirement (neither requisite nor preferred) requires nothing:
        // it is read as unset, like an empty content source.
        let topology = req
            .accessibility_requirements
            .as_ref()
            .filter(|t| !t.requisite.is_empty() || !t.preferred.is_empty());
        if topology.is_some() && !self.caps.topology() {
            return Err(Status::invalid_argument(
                "accessibility_requirements need VOLUME_ACCESSIBILITY_CONSTRAINTS, which is not advertised",
            ));
        }
        let parameters = to_map(&req.parameters);
        let mutable = to_map(&req.mutable_parameters);
        let free = self.quirk_name_was_free(&req.name)?; // `race-create-duplicates`: made again if so
        let clone_in_flight = self.quirk_clone_in_flight(source.as_ref()); // `clone-fanout-shares-source`
        let (_first_clone, lost) = self.quirk_clone_lost(source.as_ref()); // `fanout-loses-clone`
        self.store.transact(|state| {
            if let Some(shared) = Plugin::quirk_shared_clone(state, &clone_in_flight) {
                return Ok(v1::CreateVolumeResponse { volume: Some(self.volume_proto(shared)) });
            }
            if let Some(existing) = state.volumes.values().find(|v| !v.static_volume && v.name == req.name && !free) {
                // Quirk `same-name-any-capability`: the capabilities are not compared.
                let compared: &[Capability] = if self.quirk(super::Quirk::SameNameAnyCapability) { &[] } else { &caps };
                same_volume_request(
                    existing,
                    compared,
                    range,
                    &parameters,
                    &mutable,
                    &source,
                    topology,
                )?;
                return Ok(v1::CreateVolumeResponse {
                    volume: Some(self.volume_proto(existing)),
                });
            }
            let source_store = match &source {
                None => None,
                Some(Source::Snapshot(id)) => {
                    let snap = state.snapshots.get(id).ok_or_else(|| {
                        Status::not_found(format!("source snapshot {id} does not exist"))
                    })?;
                    if snap.created.elapsed() < self.config.snapshot_ready_after {
                        return Err(Status::failed_precondition(format!(
                            "source snapshot {id} is not ready to use yet"
                        )));
                    }
                    Some((self.data.snapshot(id), snap.size))
                }
                Some(Source::Volume(id)) => {
                    let vol = state.volumes.get(id).ok_or_else(|| {
                        Status::not_found(format!("source volume {id} does not exist"))
                    })?;
                    Some((self.data.volume(id), vol.capacity))
                }
            };
            let capacity = self.resolve_capacity(range, source_store.as_ref().map(|(_, s)| *s))?;
            let available = self.config.capacity - state.provisioned();
            if capacity > available {
                return Err(Status::resource_exhausted(format!(
                    "{capacity} bytes requested, {available} bytes left in the pool"
                )));
            }
            // Restored without a requirement: where the snapshot said (v1.13 snapshot topology).
            let snapshot_topology = match &source {
                Some(Source::Snapshot(id)) => state.snapshots.get(id).map(|s| s.topology.clone()).filter(|t| !t.is_empty()),
                _ => None,
            };
            let topology = match (topology, snapshot_topology) {
                (None, Some(t)) if self.caps.topology() => t,
                (t, _) => self.choose_topology(state, t)?,
            };
            let id = format!("vol-{:06}", state.next_seq());
            let has_mount = caps.iter().any(|c| !c.is_block());
            let has_block = caps.iter().any(Capability::is_block);
            let store = self.data.volume(&id);
            let filled = match (&source_store, &source) {
                (Some((src, _)), Some(Source::Volume(_))) if self.quirk(super::Quirk::CloneSharesData) => {
                    store.share(src)
                }
                (Some(_), Some(Source::Snapshot(_))) if self.quirk(super::Quirk::SnapshotEmpty) => {
                    store.create(has_mount, has_block, capacity)
                }
                (Some((src, _)), Some(Source::Snapshot(_))) if self.quirk(super::Quirk::RestoreHeadOnly) => store
                    .create(has_mount, has_block, capacity)
                    .and_then(|()| store.fill_from(src, capacity))
                    .and_then(|()| store.zero_block_tail()),
                (Some((src, _)), _) => store
                    .create(has_mount, has_block, capacity)
                    .and_then(|()| store.fill_from(src, capacity)),
                (None, _) => store.create(has_mount, has_block, capacity),
            };
            if let Err(e) = filled {
                let _ = store.remove();
                // A full file system comes back as an unwrapped error, UNKNOWN, the way
                // hostpath's failed fallocate does.
                if super::backing::no_space(&e) {
                    return Err(Status::unknown(format!("failed to create block device: {e}")));
                }
                return Err(Status::internal(format!(
                    "could not create the backing store: {e}"
                )));
            }
            let volume = VolumeRecord {
                id: id.clone(),
                name: req.name.clone(),
                capacity,
                context: Self::new_volume_context(&req.name, &caps),
                capabilities: caps.clone(),
                parameters: parameters.clone(),
                mutable_parameters: mutable.clone(),
                created_mutable_parameters: mutable.clone(),
                topology,
                source: source.clone(),
                has_mount,
                has_block,
                publications: Default::default(),
                static_volume: false,
                static_path: None,
            };
            let response = v1::CreateVolumeResponse {
                volume: Some(self.volume_proto(&volume)),
            };
            Plugin::record_volume(state, volume, lost, &store);
            Ok(response)
        })
    }

    fn delete_volume(
        &self,
        req: v1::DeleteVolumeRequest,
    ) -> Result<v1::DeleteVolumeResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        self.store.transact(|state| {
            if !state.volumes.contains_key(&req.volume_id) {
                return Ok(v1::DeleteVolumeResponse {});
            }
            if let Some(why) = state.volume_in_use(&req.volume_id) {
                return Err(Status::failed_precondition(format!(
                    "volume {} cannot be deleted: {why}",
                    req.volume_id
                )));
            }
            if self.quirk(super::Quirk::DeleteKeepsVolume) {
                return Ok(v1::DeleteVolumeResponse {});
            }
            self.data.volume(&req.volume_id).remove().map_err(|e| {
                Status::internal(format!("could not remove the backing store: {e}"))
            })?;
            state.volumes.remove(&req.volume_id);
            Ok(v1::DeleteVolumeResponse {})
        })
    }

    fn controller_publish_volume(
        &self,
        req: v1::ControllerPublishVolumeRequest,
    ) -> Result<v1::ControllerPublishVolumeResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        checks::required(&req.node_id, "node_id")?;
        let cap = checks::capability(req.volume_capability.as_ref(), "volume_capability")?;
        checks::fs_type(&cap)?;
        checks::controller_mode(&self.caps, &cap)?;
        if req.readonly && !self.caps.has_controller(ControllerRpc::PublishReadonly) {
            return Err(Status::invalid_argument(
                "readonly needs the controller capability PUBLISH_READONLY, which is not advertised",
            ));
        }
        let node = req.node_id.clone();
        let raced = self.quirk_attach_device(&node)?;
        self.store.transact(|state| {
            let known = self.known_nodes(state);
            // A volume it made, or a pre-provisioned one its volume_context describes.
            self.node_volume(state, &req.volume_id, &req.volume_context)?;
            let volume = state
                .volumes
                .get(&req.volume_id)
                .ok_or_else(|| Status::not_found(format!("volume {} does not exist", req.volume_id)))?;
            if !known.contains(&node) {
                return Err(Status::not_found(format!("node {node} does not exist")));
            }
            checks::volume_context("ControllerPublishVolume", volume, &req.volume_context, self.config.require_context)?;
            if let Some(why) = checks::volume_support_problem(volume, &cap) {
                return Err(checks::unsupported_capability("ControllerPublishVolume", why));
            }
            if let Some(why) = self.quirk_mount_flags_problem(volume, &cap) {
                return Err(Status::invalid_argument(why));
            }
            if let Some(existing) = volume.publications.get(&node) {
                if existing.capability == cap && existing.readonly == req.readonly {
                    return Ok(v1::ControllerPublishVolumeResponse {
                        publish_context: from_map(&existing.publish_context),
                    });
                }
                return Err(Status::already_exists(format!(
                    "volume {} is already published to node {node} with a different capability or readonly flag",
                    req.volume_id
                )));
            }
            if !self.quirk(super::Quirk::AllowSecondWriter) {
                check_other_nodes(volume, &node, &cap, req.readonly)?;
            }
            let published_here = state.volumes.values().filter(|v| v.publications.contains_key(&node)).count();
            let max = self.config.max_volumes_per_node;
            if max > 0 && published_here as i64 >= max {
                return Err(Status::resource_exhausted(format!(
                    "node {node} already has the maximum of {max} volumes published"
                )));
            }
            if let Some(refused) = raced.as_deref().and_then(|d| self.quirk_device_taken(state, &node, &req.volume_id, d)) {
                return Err(refused);
            }
            let publish_context: StringMap = [
                (DEVICE_KEY.to_owned(), raced.clone().unwrap_or_else(|| format!("/dev/csi-conform/{}", req.volume_id))),
                (NODE_KEY.to_owned(), node.clone()),
            ]
            .into();
            let response = v1::ControllerPublishVolumeResponse { publish_context: from_map(&publish_context) };
            if let Some(v) = state.volumes.get_mut(&req.volume_id) {
                v.publications.insert(
                    node.clone(),
                    ControllerPublication { capability: cap.clone(), readonly: req.readonly, publish_context },
                );
            }
            Ok(response)
        })
    }

    fn controller_unpublish_volume(
        &self,
        req: v1::ControllerUnpublishVolumeRequest,
    ) -> Result<v1::ControllerUnpublishVolumeResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        self.quirk_unknown_node(&req.node_id)?;
        self.store.transact(|state| {
            if let Some(v) = state.volumes.get_mut(&req.volume_id) {
                if req.node_id.is_empty() {
                    v.publications.clear();
                } else {
                    v.publications.remove(&req.node_id);
                }
            }
            Ok(v1::ControllerUnpublishVolumeResponse {})
        })
    }

    fn validate_volume_capabilities(
        &self,
        req: v1::ValidateVolumeCapabilitiesRequest,
    ) -> Result<v1::ValidateVolumeCapabilitiesResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        let caps = checks::capabilities(&req.volume_capabilities, "volume_capabilities")?;
        self.quirk_odd_capabilities("ValidateVolumeCapabilities", &caps)?;
        let state = self.store.snapshot()?;
        let volume = state
            .volumes
            .get(&req.volume_id)
            .ok_or_else(|| Status::not_found(format!("volume {} does not exist", req.volume_id)))?;
        // The message is a string field like any other: 128 bytes at most (Size Limits).
        let unconfirmed = |message: String| {
            Ok(v1::ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: checks::within_string_limit(message),
            })
        };
        if req.volume_context.is_empty() {
            checks::volume_context(
                "ValidateVolumeCapabilities",
                volume,
                &req.volume_context,
                self.config.require_context,
            )?;
        } else if let Some(diff) = checks::map_difference(&volume.context, &req.volume_context) {
            return unconfirmed(format!(
                "volume_context does not match the volume's: {diff}"
            ));
        }
        if !req.parameters.is_empty()
            && let Some(diff) = checks::map_difference(&volume.parameters, &req.parameters)
        {
            return unconfirmed(format!("parameters differ from the volume's: {diff}"));
        }
        if !req.mutable_parameters.is_empty()
            && let Some(diff) =
                checks::map_difference(&volume.mutable_parameters, &req.mutable_parameters)
        {
            return unconfirmed(format!(
                "mutable_parameters differ from the volume's: {diff}"
            ));
        }
        // Quirk `confirm-everything`: no capability is weighed against the volume.
        let weighed: &[Capability] = if self.quirk(super::Quirk::ConfirmEverything) { &[] } else { &caps };
        for (i, cap) in weighed.iter().enumerate() {
            let problem = checks::controller_mode_problem(&self.caps, cap)
                .or_else(|| checks::volume_support_problem(volume, cap))
                .or_else(|| self.quirk_mount_flags_problem(volume, cap));
            if let Some(why) = problem {
                return unconfirmed(format!(
                    "volume_capabilities[{i}] ({}): {why}",
                    cap.access_name()
                ));
            }
        }
        Ok(self.confirmation(
            v1::validate_volume_capabilities_response::Confirmed {
                volume_context: req.volume_context,
                volume_capabilities: req.volume_capabilities,
                parameters: req.parameters,
                mutable_parameters: req.mutable_parameters,
            },
        ))
    }

    /// The condition of a volume as the controller sees it: abnormal when its backing store
    /// has gone.
    pub(crate) fn volume_condition(&self, v: &VolumeRecord) -> v1::VolumeCondition {
        let store = self.data.volume(&v.id);
        let missing =
            (v.has_mount && !store.fs().is_dir()) || (v.has_block && !store.block().is_file());
        if missing {
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
    }

    fn list_volumes(&self, req: v1::ListVolumesRequest) -> Result<v1::ListVolumesResponse, Status> {
        if req.max_entries < 0 {
            return Err(Status::invalid_argument("max_entries must not be negative"));
        }
        let state = self.store.snapshot()?;
        let starting_token = self.unstamp_listing_token(&state, &req.starting_token)?;
        let after = page_start(&state, VOLUMES, starting_token)?;
        let published = self
            .caps
            .has_controller(ControllerRpc::ListVolumesPublishedNodes);
        let condition = self.caps.has_controller(ControllerRpc::VolumeCondition) || self.quirk(super::Quirk::MixedVersions);
        let ids: Vec<&String> = state
            .volumes
            .range::<String, _>((
                after.as_ref().map_or(Bound::Unbounded, Bound::Excluded),
                Bound::Unbounded,
            ))
            .map(|(id, _)| id)
            .collect();
        let (page, mut next_token) = paginate(&state, VOLUMES, &ids, req.max_entries);
        self.stamp_listing_token(&state, &mut next_token);
        let entries = page
            .into_iter()
            .filter_map(|id| state.volumes.get(id))
            .map(|v| v1::list_volumes_response::Entry {
                volume: Some(self.volume_proto(v)),
                status: (published || condition).then(|| v1::list_volumes_response::VolumeStatus {
                    published_node_ids: if published {
                        v.publications.keys().cloned().collect()
                    } else {
                        Vec::new()
                    },
                    volume_condition: condition.then(|| self.volume_condition(v)),
                }),
            })
            .collect();
        Ok(v1::ListVolumesResponse {
            entries,
            next_token,
        })
    }

    fn get_capacity(&self, req: v1::GetCapacityRequest) -> Result<v1::GetCapacityResponse, Status> {
        let caps: Vec<Capability> = req
            .volume_capabilities
            .iter()
            .enumerate()
            .map(|(i, c)| {
                Capability::from_proto(c).map_err(|why| {
                    Status::invalid_argument(format!("volume_capabilities[{i}] {why}"))
                })
            })
            .collect::<Result<_, _>>()?;
        if req.accessible_topology.is_some() && !self.caps.topology() {
            return Err(Status::invalid_argument(
                "accessible_topology needs VOLUME_ACCESSIBILITY_CONSTRAINTS, which is not advertised",
            ));
        }
        let state = self.store.snapshot()?;
        let supported = caps.iter().all(|c| {
            checks::fs_type_problem(c).is_none()
                && checks::controller_mode_problem(&self.caps, c).is_none()
        });
        let reachable = req
            .accessible_topology
            .as_ref()
            .is_none_or(|t| self.topology_served(&state, t));
        let available = if supported && reachable {
            (self.config.capacity - state.provisioned()).max(0)
        } else {
            0
        };
        Ok(v1::GetCapacityResponse {
            available_capacity: available,
            maximum_volume_size: Some(self.config.max_volume_size.min(available)),
            minimum_volume_size: Some(1),
        })
    }

    fn controller_get_capabilities(
        &self,
        _: v1::ControllerGetCapabilitiesRequest,
    ) -> Result<v1::ControllerGetCapabilitiesResponse, Status> {
        use v1::controller_service_capability::{Rpc, Type};
        Ok(v1::ControllerGetCapabilitiesResponse {
            capabilities: self
                .caps
                .controller
                .iter()
                .map(|t| v1::ControllerServiceCapability {
                    r#type: Some(Type::Rpc(Rpc { r#type: *t as i32 })),
                })
                .collect(),
        })
    }

    fn controller_get_volume(
        &self,
        req: v1::ControllerGetVolumeRequest,
    ) -> Result<v1::ControllerGetVolumeResponse, Status> {
        checks::required(&req.volume_id, "volume_id")?;
        let state = self.store.snapshot()?;
        let missing = || format!("volume {} does not exist", req.volume_id);
        let Some(v) = state.volumes.get(&req.volume_id) else {
            if self.quirk(super::Quirk::GetVolumeOkWhenMissing) {
                return Ok(super::quirks::missing_volume_answer(&req.volume_id, &missing()));
            }
            return Err(Status::not_found(missing()));
        };
        let published = self
            .caps
            .has_controller(ControllerRpc::ListVolumesPublishedNodes);
        let condition = self.caps.has_controller(ControllerRpc::VolumeCondition) || self.quirk(super::Quirk::MixedVersions);
        Ok(v1::ControllerGetVolumeResponse {
            volume: Some(self.volume_proto(v)),
            status: Some(v1::controller_get_volume_response::VolumeStatus {
                published_node_ids: if published {
                    v.publications.keys().cloned().collect()
                } else {
                    Vec::new()
                },
                volume_condition: condition.then(|| self.volume_condition(v)),
            }),
        })
    }
}

/// CreateVolume with the name of an existing volume must ask for something that volume
/// already is; otherwise ALREADY_EXISTS naming what differs.
fn same_volume_request(
    existing: &VolumeRecord,
    caps: &[Capability],
    range: Option<(i64, i64)>,
    parameters: &StringMap,
    mutable: &StringMap,
    source: &Option<Source>,
    topology: Option<&v1::TopologyRequirement>,
) -> Result<(), Status> {
    let differs = |what: &str| {
        Err(Status::already_exists(format!(
            "a volume named {:?} already exists ({}) with a different {what}",
            existing.name, existing.id
        )))
    };
    if let Some((required, limit)) = range
        && ((required > 0 && existing.capacity < required)
            || (limit > 0 && existing.capacity > limit))
    {
        return differs("capacity");
    }
    // A capability the volume was created with is the same request, whatever the others
    // say (a re-send of a request naming several file systems must not be refused by the
    // one the volume was formatted with); any other must be one the volume supports.
    if caps
        .iter()
        .any(|c| !existing.capabilities.contains(c) && checks::volume_support_problem(existing, c).is_some())
    {
        return differs("set of volume capabilities");
    }
    if *parameters != existing.parameters {
        return differs("parameters");
    }
    if *mutable != existing.created_mutable_parameters {
        return differs("mutable_parameters");
    }
    if *source != existing.source {
        return differs("volume_content_source");
    }
    if let Some(t) = topology
        && !t.requisite.is_empty()
        && !existing
            .topology
            .iter()
            .any(|seg| t.requisite.iter().any(|r| to_map(&r.segments) == *seg || own_segment(r) == *seg))
    {
        return differs("accessibility_requirements");
    }
    Ok(())
}

/// A second node may only get the volume when no single-node mode is involved, and with
/// MULTI_NODE_SINGLE_WRITER only one node may write.
fn check_other_nodes(
    volume: &VolumeRecord,
    node: &str,
    cap: &Capability,
    readonly: bool,
) -> Result<(), Status> {
    let Some((other, _)) = volume.publications.iter().find(|(n, _)| *n != node) else {
        return Ok(());
    };
    let single = checks::is_single_node(cap.mode())
        || volume
            .publications
            .values()
            .any(|p| checks::is_single_node(p.capability.mode()));
    if single {
        return Err(Status::failed_precondition(format!(
            "volume {} is already published to node {other} and its access mode allows a single node",
            volume.id
        )));
    }
    use v1::volume_capability::access_mode::Mode;
    if cap.mode() == Mode::MultiNodeSingleWriter
        && !readonly
        && let Some((writer, _)) = volume.publications.iter().find(|(n, p)| {
            *n != node && !p.readonly && p.capability.mode() == Mode::MultiNodeSingleWriter
        })
    {
        return Err(Status::failed_precondition(format!(
            "volume {} is already published read-write to node {writer} (MULTI_NODE_SINGLE_WRITER)",
            volume.id
        )));
    }
    Ok(())
}

/// What the volume list is now, for `listing-token-expires`: a hash of its ids.
fn volume_list_generation(state: &State) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    state.volumes.keys().for_each(|id| id.hash(&mut hasher));
    hasher.finish()
}

impl Plugin {
    /// `listing-token-expires`: a ListVolumes next_token names the volume list it was cut
    /// from.
    fn stamp_listing_token(&self, state: &State, token: &mut String) {
        if self.quirk(super::Quirk::ListingTokenExpires) && !token.is_empty() {
            *token = format!("{token}@{:016x}", volume_list_generation(state));
        }
    }

    /// `listing-token-expires`: the starting_token without its stamp, or ABORTED when the
    /// volume list changed since it was issued (the spec's "Invalid starting_token").
    fn unstamp_listing_token<'t>(&self, state: &State, token: &'t str) -> Result<&'t str, Status> {
        if !self.quirk(super::Quirk::ListingTokenExpires) || token.is_empty() {
            return Ok(token);
        }
        match token.rsplit_once('@') {
            Some((inner, generation)) if *generation == format!("{:016x}", volume_list_generation(state)) => Ok(inner),
            Some(_) => Err(Status::aborted(format!(
                "starting_token {token:?} is no longer valid: the volume list changed since it was issued; start again"
            ))),
            None => Ok(token),
        }
    }
}

/// The id after which a listing continues: none for an empty token, ABORTED for a token we
/// did not issue.
pub(crate) fn page_start(state: &State, kind: &str, token: &str) -> Result<Option<String>, Status> {
    if token.is_empty() {
        return Ok(None);
    }
    state.parse_token(kind, token).map(Some).ok_or_else(|| {
        Status::aborted(format!(
            "starting_token {token:?} was not issued by this plugin"
        ))
    })
}

/// The first `max` ids (all for 0) and the token continuing after them, if any remain.
pub(crate) fn paginate<'a>(
    state: &State,
    kind: &str,
    ids: &[&'a String],
    max: i32,
) -> (Vec<&'a String>, String) {
    let max = if max <= 0 { ids.len() } else { max as usize };
    if ids.len() <= max {
        return (ids.to_vec(), String::new());
    }
    let page = ids[..max].to_vec();
    let token = page
        .last()
        .map(|last| state.issue_token(kind, last))
        .unwrap_or_default();
    (page, token)
}

#[tonic::async_trait]
impl Controller for Service {
    async fn create_volume(
        &self,
        request: Request<v1::CreateVolumeRequest>,
    ) -> Result<Response<v1::CreateVolumeResponse>, Status> {
        let empty_source = request.get_ref().volume_content_source.as_ref().is_some_and(|s| s.r#type.is_none());
        let mut answer = self.told("CreateVolume", self.call("CreateVolume", request, Plugin::create_volume).await)?;
        self.0.lag_created(answer.get_ref().volume.as_ref());
        if empty_source {
            self.0.lie_about_empty_source(answer.get_mut());
        }
        Ok(answer)
    }

    async fn delete_volume(
        &self,
        request: Request<v1::DeleteVolumeRequest>,
    ) -> Result<Response<v1::DeleteVolumeResponse>, Status> {
        let entry = self.0.lag_deleting(&request.get_ref().volume_id);
        let answer = self.call("DeleteVolume", request, Plugin::delete_volume).await?;
        self.0.lag_deleted(entry);
        Ok(answer)
    }

    async fn controller_publish_volume(
        &self,
        request: Request<v1::ControllerPublishVolumeRequest>,
    ) -> Result<Response<v1::ControllerPublishVolumeResponse>, Status> {
        let answer = self.call("ControllerPublishVolume", request, Plugin::controller_publish_volume).await;
        self.told("ControllerPublishVolume", answer)
    }

    async fn controller_unpublish_volume(
        &self,
        request: Request<v1::ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<v1::ControllerUnpublishVolumeResponse>, Status> {
        self.call("ControllerUnpublishVolume", request, Plugin::controller_unpublish_volume).await
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<v1::ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<v1::ValidateVolumeCapabilitiesResponse>, Status> {
        self.call(
            "ValidateVolumeCapabilities",
            request,
            Plugin::validate_volume_capabilities,
        )
        .await
    }

    async fn list_volumes(
        &self,
        request: Request<v1::ListVolumesRequest>,
    ) -> Result<Response<v1::ListVolumesResponse>, Status> {
        let start = request.get_ref().starting_token.clone();
        let whole = start.is_empty() && request.get_ref().max_entries == 0;
        let mut answer = self.call("ListVolumes", request, Plugin::list_volumes).await?;
        self.0.lag_listing(answer.get_mut(), whole);
        self.0.lie_about_next_token(&start, &mut answer.get_mut().next_token);
        Ok(answer)
    }

    async fn get_capacity(
        &self,
        request: Request<v1::GetCapacityRequest>,
    ) -> Result<Response<v1::GetCapacityResponse>, Status> {
        let mut answer = self.call("GetCapacity", request, Plugin::get_capacity).await?;
        self.0.lie_about_capacity(answer.get_mut());
        Ok(answer)
    }

    async fn controller_get_capabilities(
        &self,
        request: Request<v1::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<v1::ControllerGetCapabilitiesResponse>, Status> {
        self.call(
            "ControllerGetCapabilities",
            request,
            Plugin::controller_get_capabilities,
        )
        .await
    }

    async fn create_snapshot(
        &self,
        request: Request<v1::CreateSnapshotRequest>,
    ) -> Result<Response<v1::CreateSnapshotResponse>, Status> {
        self.told("CreateSnapshot", self.call("CreateSnapshot", request, Plugin::create_snapshot).await)
    }

    async fn delete_snapshot(
        &self,
        request: Request<v1::DeleteSnapshotRequest>,
    ) -> Result<Response<v1::DeleteSnapshotResponse>, Status> {
        self.call("DeleteSnapshot", request, Plugin::delete_snapshot)
            .await
    }

    async fn list_snapshots(
        &self,
        request: Request<v1::ListSnapshotsRequest>,
    ) -> Result<Response<v1::ListSnapshotsResponse>, Status> {
        self.call("ListSnapshots", request, Plugin::list_snapshots)
            .await
    }

    async fn get_snapshot(
        &self,
        request: Request<v1::GetSnapshotRequest>,
    ) -> Result<Response<v1::GetSnapshotResponse>, Status> {
        self.call("GetSnapshot", request, Plugin::get_snapshot)
            .await
    }

    async fn controller_expand_volume(
        &self,
        request: Request<v1::ControllerExpandVolumeRequest>,
    ) -> Result<Response<v1::ControllerExpandVolumeResponse>, Status> {
        self.call(
            "ControllerExpandVolume",
            request,
            Plugin::controller_expand_volume,
        )
        .await
    }

    async fn controller_get_volume(
        &self,
        request: Request<v1::ControllerGetVolumeRequest>,
    ) -> Result<Response<v1::ControllerGetVolumeResponse>, Status> {
        let answer = self.call("ControllerGetVolume", request, Plugin::controller_get_volume).await;
        self.told("ControllerGetVolume", answer)
    }

    async fn controller_modify_volume(
        &self,
        request: Request<v1::ControllerModifyVolumeRequest>,
    ) -> Result<Response<v1::ControllerModifyVolumeResponse>, Status> {
        self.call(
            "ControllerModifyVolume",
            request,
            Plugin::controller_modify_volume,
        )
        .await
    }

    async fn controller_list_volume_health(
        &self,
        request: Request<v1::ControllerListVolumeHealthRequest>,
    ) -> Result<Response<v1::ControllerListVolumeHealthResponse>, Status> {
        self.call("ControllerListVolumeHealth", request, Plugin::controller_list_volume_health).await
    }

    async fn controller_get_volume_health(
        &self,
        request: Request<v1::ControllerGetVolumeHealthRequest>,
    ) -> Result<Response<v1::ControllerGetVolumeHealthResponse>, Status> {
        self.call("ControllerGetVolumeHealth", request, Plugin::controller_get_volume_health).await
    }
}

/// A topology without the extra segment of `topology-extra-node-segment` (which its nodes
/// report and its volumes never carry): the topology itself for every other plugin.
fn own_segment(t: &v1::Topology) -> StringMap {
    let mut segments = to_map(&t.segments);
    segments.remove(super::quirks::EXTRA_TOPOLOGY_KEY);
    segments
}
