//! One volume lifecycle as a CO drives it, timed call by call: create, snapshot and delete
//! it, clone and delete the clone, expand, controller publish, stage, publish, then undo in
//! reverse; each as the plugin supports it. Every resource is journaled before the run relies
//! on it and marked done once undone, so nothing outlives the bench unnoticed.

use std::{
    collections::{BTreeMap, HashMap},
    future::Future,
    path::PathBuf,
    sync::Arc,
    time::Instant,
};

use crate::{
    client::{Connection, RpcError},
    journal::{CallRecord, Journal, Record},
    proto::v1,
    suite::Resource,
};

use super::stats::Tally;

/// The RPC label of CreateVolume from a volume (a clone), kept apart from plain creates.
pub const CLONE: &str = "CreateVolume (clone)";
/// The RPC label of DeleteVolume of a clone.
pub const CLONE_DELETE: &str = "DeleteVolume (clone)";

/// Which optional steps the plugin serves (from its advertised capabilities).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Steps {
    /// ControllerPublishVolume / ControllerUnpublishVolume (PUBLISH_UNPUBLISH_VOLUME).
    pub controller_publish: bool,
    /// NodeStageVolume / NodeUnstageVolume (STAGE_UNSTAGE_VOLUME).
    pub stage: bool,
    /// CreateSnapshot / DeleteSnapshot (CREATE_DELETE_SNAPSHOT).
    pub snapshot: bool,
    /// CreateVolume from a volume (CLONE_VOLUME).
    pub clone: bool,
    /// ControllerExpandVolume (EXPAND_VOLUME).
    pub expand: bool,
    /// ListVolumes (LIST_VOLUMES): soak counts the volumes the plugin holds.
    pub list_volumes: bool,
}

impl Steps {
    /// The RPC labels a lifecycle with these steps calls, in order.
    pub fn rpcs(&self) -> Vec<&'static str> {
        let mut out = vec!["CreateVolume"];
        if self.snapshot {
            out.extend(["CreateSnapshot", "DeleteSnapshot"]);
        }
        if self.clone {
            out.extend([CLONE, CLONE_DELETE]);
        }
        if self.expand {
            out.push("ControllerExpandVolume");
        }
        if self.controller_publish {
            out.push("ControllerPublishVolume");
        }
        if self.stage {
            out.push("NodeStageVolume");
        }
        out.extend(["NodePublishVolume", "NodeUnpublishVolume"]);
        if self.stage {
            out.push("NodeUnstageVolume");
        }
        if self.controller_publish {
            out.push("ControllerUnpublishVolume");
        }
        out.push("DeleteVolume");
        out
    }

    /// Volumes one lifecycle holds at once (the source, and its clone for a moment).
    pub fn volumes_held(&self) -> u32 {
        if self.clone { 2 } else { 1 }
    }
}

/// What every lifecycle of a bench shares.
pub struct Plan {
    /// The controller's connection.
    pub controller: Connection,
    /// The node's connection.
    pub node: Connection,
    /// The node's id (NodeGetInfo), for ControllerPublishVolume.
    pub node_id: String,
    /// What the plugin serves.
    pub steps: Steps,
    /// CreateVolume's required_bytes.
    pub volume_size: i64,
    /// ControllerExpandVolume's required_bytes.
    pub expand_size: i64,
    /// The capability every call names.
    pub capability: v1::VolumeCapability,
    /// CreateVolume parameters.
    pub parameters: HashMap<String, String>,
    /// CreateSnapshot parameters.
    pub snapshot_parameters: HashMap<String, String>,
    /// The secrets file, by key (`CreateVolumeSecret`...).
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
    /// This bench's directory: each lifecycle gets a directory in it for its paths.
    pub dir: PathBuf,
    /// Names start with this (unique per bench).
    pub name_prefix: String,
    /// The cleanup journal.
    pub journal: Arc<Journal>,
}

/// Something made, with its journal id, to undo.
enum Made {
    Volume(String),
    Snapshot(String),
    Published(String),
    Staged(String, String),
    NodePublished(String, String),
}

impl Plan {
    fn secrets(&self, rpc: &str) -> (HashMap<String, String>, Option<String>) {
        let key = crate::secrets::secret_key(rpc);
        match self.secrets.get(&key) {
            Some(map) => (map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(), Some(key)),
            None => (HashMap::new(), None),
        }
    }

    fn endpoint(&self, node: bool) -> String {
        if node { self.node.endpoint().to_string() } else { self.controller.endpoint().to_string() }
    }

    /// Journals a call that may create something before it is sent.
    fn sending<M: prost::Message + prost::Name>(&self, rpc: &str, request: &M, node: bool, key: Option<String>) -> Option<String> {
        let request = crate::proto::to_json_value(&crate::proto::without_secrets(&crate::proto::to_dynamic(request)));
        let call = CallRecord { endpoint: self.endpoint(node), scenario: "bench".into(), secrets_key: key, rpc: rpc.into(), node: 0, request };
        self.journal.sending(&call).map_err(|e| tracing::error!("{e}: a {rpc} call of the bench is not journaled")).ok()
    }

    /// Journals what a call made, settling its `sending` entry.
    fn created(&self, resource: Resource, name: Option<String>, key: Option<String>, sending: Option<String>) -> String {
        let node = resource.node().is_some();
        let undo_key = key.as_ref().map(|_| crate::secrets::secret_key(resource.teardown().0));
        let record = Record { endpoint: self.endpoint(node), scenario: "bench".into(), secrets_key: key, undo_secrets_key: undo_key, name, resource };
        self.journal.created_by(&record, sending.as_deref()).unwrap_or_else(|e| {
            tracing::error!("{e}: a resource of the bench is not journaled");
            String::new()
        })
    }

    fn done(&self, id: &str) {
        if !id.is_empty()
            && let Err(e) = self.journal.done(id)
        {
            tracing::error!("{e}: an undo of the bench is not journaled");
        }
    }
}

/// Runs `call`, timing it into `tally` under `label`.
async fn timed<T>(tally: &mut Tally, label: &str, call: impl Future<Output = Result<T, RpcError>>) -> Result<T, RpcError> {
    let started = Instant::now();
    let answer = call.await;
    tally.call(label, started.elapsed(), answer.as_ref().err().map(RpcError::code_name));
    answer
}

/// One lifecycle, number `n` of the bench, timed into `tally`. On the first error it stops
/// and undoes what it made; the error is returned (and counted in `tally`). What cannot be
/// undone stays in the journal.
pub async fn lifecycle(plan: &Plan, n: u64, tally: &mut Tally) -> Result<(), RpcError> {
    tally.started += 1;
    let started = Instant::now();
    let dir = plan.dir.join(format!("{n:06}"));
    let mut made = Vec::new();
    let forward = forward(plan, n, &dir, tally, &mut made).await;
    let undone = undo(plan, tally, made).await;
    let _ = std::fs::remove_dir(dir.join("staging"));
    let _ = std::fs::remove_dir(&dir);
    forward.and(undone)?;
    super::stats::record(&mut tally.lifecycle, started.elapsed());
    Ok(())
}

async fn forward(plan: &Plan, n: u64, dir: &std::path::Path, tally: &mut Tally, made: &mut Vec<(Made, String)>) -> Result<(), RpcError> {
    let cap = Some(plan.capability.clone());
    let name = format!("{}-{n:06}", plan.name_prefix);
    let (secrets, key) = plan.secrets("CreateVolume");
    let create = v1::CreateVolumeRequest {
        name: name.clone(),
        capacity_range: Some(v1::CapacityRange { required_bytes: plan.volume_size, limit_bytes: 0 }),
        volume_capabilities: vec![plan.capability.clone()],
        parameters: plan.parameters.clone(),
        secrets: secrets.clone(),
        ..Default::default()
    };
    let sending = plan.sending("CreateVolume", &create, false, key.clone());
    let mut c = plan.controller.controller();
    let answer = timed(tally, "CreateVolume", plan.controller.call("CreateVolume", create, |r| async move { c.create_volume(r).await })).await;
    let volume = match answer {
        Ok(a) => a.volume.unwrap_or_default(),
        Err(e) => {
            if let Some(id) = &sending {
                plan.done(id); // answered: nothing was made
            }
            return Err(e);
        }
    };
    let volume_id = volume.volume_id.clone();
    let context = volume.volume_context.clone();
    let id = plan.created(Resource::Volume { volume_id: volume_id.clone() }, Some(name.clone()), key, sending);
    made.push((Made::Volume(volume_id.clone()), id));

    if plan.steps.snapshot {
        let (secrets, key) = plan.secrets("CreateSnapshot");
        let request = v1::CreateSnapshotRequest {
            source_volume_id: volume_id.clone(),
            name: format!("{name}-snap"),
            secrets,
            parameters: plan.snapshot_parameters.clone(),
            ..Default::default()
        };
        let sending = plan.sending("CreateSnapshot", &request, false, key.clone());
        let mut c = plan.controller.controller();
        let snap = timed(tally, "CreateSnapshot", plan.controller.call("CreateSnapshot", request, |r| async move { c.create_snapshot(r).await }))
            .await
            .inspect_err(|_| sending.iter().for_each(|id| plan.done(id)))?
            .snapshot
            .unwrap_or_default();
        let id = plan.created(Resource::Snapshot { snapshot_id: snap.snapshot_id.clone() }, Some(format!("{name}-snap")), key, sending);
        let (secrets, _) = plan.secrets("DeleteSnapshot");
        let request = v1::DeleteSnapshotRequest { snapshot_id: snap.snapshot_id.clone(), secrets };
        let mut c = plan.controller.controller();
        match timed(tally, "DeleteSnapshot", plan.controller.call("DeleteSnapshot", request, |r| async move { c.delete_snapshot(r).await })).await {
            Ok(_) => plan.done(&id),
            Err(e) => {
                made.push((Made::Snapshot(snap.snapshot_id), id));
                return Err(e);
            }
        }
    }

    if plan.steps.clone {
        let (secrets, key) = plan.secrets("CreateVolume");
        let request = v1::CreateVolumeRequest {
            name: format!("{name}-clone"),
            capacity_range: Some(v1::CapacityRange { required_bytes: plan.volume_size, limit_bytes: 0 }),
            volume_capabilities: vec![plan.capability.clone()],
            parameters: plan.parameters.clone(),
            secrets,
            volume_content_source: Some(v1::VolumeContentSource {
                r#type: Some(v1::volume_content_source::Type::Volume(v1::volume_content_source::VolumeSource { volume_id: volume_id.clone() })),
            }),
            ..Default::default()
        };
        let sending = plan.sending("CreateVolume", &request, false, key.clone());
        let mut c = plan.controller.controller();
        let clone = timed(tally, CLONE, plan.controller.call("CreateVolume", request, |r| async move { c.create_volume(r).await }))
            .await
            .inspect_err(|_| sending.iter().for_each(|id| plan.done(id)))?
            .volume
            .unwrap_or_default();
        let id = plan.created(Resource::Volume { volume_id: clone.volume_id.clone() }, Some(format!("{name}-clone")), key, sending);
        let (secrets, _) = plan.secrets("DeleteVolume");
        let request = v1::DeleteVolumeRequest { volume_id: clone.volume_id.clone(), secrets };
        let mut c = plan.controller.controller();
        match timed(tally, CLONE_DELETE, plan.controller.call("DeleteVolume", request, |r| async move { c.delete_volume(r).await })).await {
            Ok(_) => plan.done(&id),
            Err(e) => {
                made.push((Made::Volume(clone.volume_id), id));
                return Err(e);
            }
        }
    }

    if plan.steps.expand {
        let (secrets, _) = plan.secrets("ControllerExpandVolume");
        let request = v1::ControllerExpandVolumeRequest {
            volume_id: volume_id.clone(),
            capacity_range: Some(v1::CapacityRange { required_bytes: plan.expand_size, limit_bytes: 0 }),
            secrets,
            volume_capability: cap.clone(),
        };
        let mut c = plan.controller.controller();
        timed(tally, "ControllerExpandVolume", plan.controller.call("ControllerExpandVolume", request, |r| async move { c.controller_expand_volume(r).await }))
            .await?;
    }

    let mut publish_context = HashMap::new();
    if plan.steps.controller_publish {
        let (secrets, key) = plan.secrets("ControllerPublishVolume");
        let request = v1::ControllerPublishVolumeRequest {
            volume_id: volume_id.clone(),
            node_id: plan.node_id.clone(),
            volume_capability: cap.clone(),
            readonly: false,
            secrets,
            volume_context: context.clone(),
        };
        let sending = plan.sending("ControllerPublishVolume", &request, false, key.clone());
        let mut c = plan.controller.controller();
        let answer = timed(tally, "ControllerPublishVolume", plan.controller.call("ControllerPublishVolume", request, |r| async move { c.controller_publish_volume(r).await }))
            .await
            .inspect_err(|_| sending.iter().for_each(|id| plan.done(id)))?;
        publish_context = answer.publish_context;
        let id = plan.created(Resource::ControllerPublication { volume_id: volume_id.clone(), node_id: plan.node_id.clone() }, None, key, sending);
        made.push((Made::Published(volume_id.clone()), id));
    }

    std::fs::create_dir_all(dir).map_err(|e| local_error("NodeStageVolume", dir, &e))?;
    let staging = dir.join("staging");
    let staging_path = staging.display().to_string();
    if plan.steps.stage {
        std::fs::create_dir_all(&staging).map_err(|e| local_error("NodeStageVolume", &staging, &e))?;
        let (secrets, key) = plan.secrets("NodeStageVolume");
        let request = v1::NodeStageVolumeRequest {
            volume_id: volume_id.clone(),
            publish_context: publish_context.clone(),
            staging_target_path: staging_path.clone(),
            volume_capability: cap.clone(),
            secrets,
            volume_context: context.clone(),
        };
        let sending = plan.sending("NodeStageVolume", &request, true, key.clone());
        let mut c = plan.node.node();
        timed(tally, "NodeStageVolume", plan.node.call("NodeStageVolume", request, |r| async move { c.node_stage_volume(r).await }))
            .await
            .inspect_err(|_| sending.iter().for_each(|id| plan.done(id)))?;
        let id = plan.created(
            Resource::NodeStage { volume_id: volume_id.clone(), staging_target_path: staging_path.clone(), node: 0 },
            None,
            key,
            sending,
        );
        made.push((Made::Staged(volume_id.clone(), staging_path.clone()), id));
    }

    let target = dir.join("target").display().to_string();
    let (secrets, key) = plan.secrets("NodePublishVolume");
    let request = v1::NodePublishVolumeRequest {
        volume_id: volume_id.clone(),
        publish_context,
        staging_target_path: if plan.steps.stage { staging_path } else { String::new() },
        target_path: target.clone(),
        volume_capability: cap,
        readonly: false,
        secrets,
        volume_context: context,
    };
    let sending = plan.sending("NodePublishVolume", &request, true, key.clone());
    let mut c = plan.node.node();
    timed(tally, "NodePublishVolume", plan.node.call("NodePublishVolume", request, |r| async move { c.node_publish_volume(r).await }))
        .await
        .inspect_err(|_| sending.iter().for_each(|id| plan.done(id)))?;
    let id = plan.created(Resource::NodePublication { volume_id: volume_id.clone(), target_path: target.clone(), node: 0 }, None, key, sending);
    made.push((Made::NodePublished(volume_id, target), id));
    Ok(())
}

/// An error of ours (a directory we could not make), as an RpcError of the step it stopped.
fn local_error(rpc: &str, path: &std::path::Path, e: &std::io::Error) -> RpcError {
    RpcError {
        rpc: rpc.to_owned(),
        code: tonic::Code::Internal,
        message: format!("csi-conform could not make {}: {e}", path.display()),
        elapsed: std::time::Duration::ZERO,
        origin: crate::client::ErrorOrigin::Transport,
    }
}

/// Undoes `made` newest first; the first error is returned, what it left stays journaled.
async fn undo(plan: &Plan, tally: &mut Tally, made: Vec<(Made, String)>) -> Result<(), RpcError> {
    let mut first = Ok(());
    for (what, id) in made.into_iter().rev() {
        let answer = match what {
            Made::NodePublished(volume_id, target_path) => {
                let mut c = plan.node.node();
                let request = v1::NodeUnpublishVolumeRequest { volume_id, target_path };
                timed(tally, "NodeUnpublishVolume", plan.node.call("NodeUnpublishVolume", request, |r| async move { c.node_unpublish_volume(r).await }))
                    .await
                    .map(drop)
            }
            Made::Staged(volume_id, staging_target_path) => {
                let mut c = plan.node.node();
                let request = v1::NodeUnstageVolumeRequest { volume_id, staging_target_path };
                timed(tally, "NodeUnstageVolume", plan.node.call("NodeUnstageVolume", request, |r| async move { c.node_unstage_volume(r).await }))
                    .await
                    .map(drop)
            }
            Made::Published(volume_id) => {
                let (secrets, _) = plan.secrets("ControllerUnpublishVolume");
                let mut c = plan.controller.controller();
                let request = v1::ControllerUnpublishVolumeRequest { volume_id, node_id: plan.node_id.clone(), secrets };
                timed(
                    tally,
                    "ControllerUnpublishVolume",
                    plan.controller.call("ControllerUnpublishVolume", request, |r| async move { c.controller_unpublish_volume(r).await }),
                )
                .await
                .map(drop)
            }
            Made::Snapshot(snapshot_id) => {
                let (secrets, _) = plan.secrets("DeleteSnapshot");
                let mut c = plan.controller.controller();
                let request = v1::DeleteSnapshotRequest { snapshot_id, secrets };
                timed(tally, "DeleteSnapshot", plan.controller.call("DeleteSnapshot", request, |r| async move { c.delete_snapshot(r).await }))
                    .await
                    .map(drop)
            }
            Made::Volume(volume_id) => {
                let (secrets, _) = plan.secrets("DeleteVolume");
                let mut c = plan.controller.controller();
                let request = v1::DeleteVolumeRequest { volume_id, secrets };
                timed(tally, "DeleteVolume", plan.controller.call("DeleteVolume", request, |r| async move { c.delete_volume(r).await }))
                    .await
                    .map(drop)
            }
        };
        match answer {
            Ok(()) => plan.done(&id),
            Err(e) => {
                tracing::warn!("the bench could not undo a resource ({e}); it stays in the journal");
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
    }
    first
}
