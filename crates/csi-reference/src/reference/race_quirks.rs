//! The reference plugin's concurrency and lost-node quirks: overlapping calls that pick the
//! same device (`attach-race`), make a volume each (`race-create-duplicates`) or refuse each
//! other (`stage-not-reentrant`), and a controller that will not unpublish from a node it does
//! not know (`unpublish-needs-known-node`). Each is behind a `self.quirk(..)` test.

use std::collections::BTreeSet;

use tonic::Status;

use super::{Plugin, Quirk};

/// How long a racy quirk pauses between reading the state and acting on it, so that calls
/// sent together meet.
const RACE_PAUSE: std::time::Duration = std::time::Duration::from_millis(150);

impl Plugin {
    /// `attach-race`: the device a ControllerPublishVolume to `node` picks, read from the
    /// state before a pause (so overlapping calls pick the same one): the lowest
    /// `/dev/csi-conform/slot-N` no volume published there holds. `None` without the quirk.
    pub(crate) fn quirk_attach_device(&self, node: &str) -> Result<Option<String>, Status> {
        if !self.quirk(Quirk::AttachRace) {
            return Ok(None);
        }
        let state = self.store.snapshot()?;
        let taken: BTreeSet<String> = state
            .volumes
            .values()
            .filter_map(|v| v.publications.get(node))
            .filter_map(|p| p.publish_context.get(super::keys::DEVICE_KEY).cloned())
            .collect();
        let device = (0..).map(|n| format!("/dev/csi-conform/slot-{n}")).find(|d| !taken.contains(d)).unwrap_or_default();
        std::thread::sleep(std::time::Duration::from_millis(150));
        Ok(Some(device))
    }

    /// `attach-race`: the refusal of an attach whose device another volume on `node` got
    /// meanwhile.
    pub(crate) fn quirk_device_taken(state: &super::state::State, node: &str, volume_id: &str, device: &str) -> Option<Status> {
        let holder = state.volumes.values().find(|v| {
            v.id != volume_id
                && v.publications.get(node).is_some_and(|p| p.publish_context.get(super::keys::DEVICE_KEY).is_some_and(|d| d == device))
        })?;
        Some(Status::internal(format!(
            "attaching volume {volume_id} to node {node} as {device} failed: the device is in use (attached for volume {})",
            holder.id
        )))
    }

    /// `race-create-duplicates`: whether the name was free when looked up before a pause (so
    /// overlapping calls all find it free and each creates); `false` without the quirk.
    pub(crate) fn quirk_name_was_free(&self, name: &str) -> Result<bool, Status> {
        if !self.quirk(Quirk::RaceCreateDuplicates) {
            return Ok(false);
        }
        let free = !self.store.snapshot()?.volumes.values().any(|v| !v.static_volume && v.name == name);
        std::thread::sleep(RACE_PAUSE);
        Ok(free)
    }

    /// `restart-loses-staging`: a node plugin starting forgets this node's stage records.
    pub(crate) fn quirk_forget_stagings(&self) -> Result<(), Status> {
        if self.quirk(Quirk::RestartLosesStaging) {
            let node = self.config.node_id.clone();
            self.store.transact(|s| {
                s.node_mut(&node).stagings.clear();
                Ok(())
            })?;
        }
        Ok(())
    }

    /// `restart-forgets-names`: a controller starting forgets the names of the volumes.
    pub(crate) fn quirk_forget_names(&self) -> Result<(), Status> {
        if self.quirk(Quirk::RestartForgetsNames) {
            self.store.transact(|s| {
                s.volumes.values_mut().for_each(|v| v.name.clear());
                Ok(())
            })?;
        }
        Ok(())
    }

    /// `unpublish-needs-known-node`: NOT_FOUND for a ControllerUnpublishVolume naming a node
    /// the plugin does not know.
    pub(crate) fn quirk_unknown_node(&self, node: &str) -> Result<(), Status> {
        if !self.quirk(Quirk::UnpublishNeedsKnownNode) || node.is_empty() {
            return Ok(());
        }
        let state = self.store.snapshot()?;
        if self.known_nodes(&state).contains(node) {
            return Ok(());
        }
        Err(Status::not_found(format!("node {node} does not exist")))
    }
}

/// `stage-not-reentrant`: a NodeStageVolume in flight on a volume, released when dropped.
pub(crate) struct Staging {
    plugin: std::sync::Arc<Plugin>,
    key: String,
}

impl Drop for Staging {
    fn drop(&mut self) {
        self.plugin.busy.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.key);
    }
}

/// `stage-not-reentrant`: marks a NodeStageVolume of `volume` in flight, or refuses it with
/// INTERNAL while another is; `Ok(None)` without the quirk or for any other RPC.
pub(crate) fn stage_in_flight(plugin: &std::sync::Arc<Plugin>, rpc: &str, volume: &str) -> Result<Option<Staging>, Status> {
    if !plugin.quirk(Quirk::StageNotReentrant) || rpc != "NodeStageVolume" || volume.is_empty() {
        return Ok(None);
    }
    // Its own key space: `aborts-when-busy` keys the same set by bare volume id.
    let key = format!("stage:{volume}");
    if !plugin.busy.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone()) {
        return Err(Status::internal(format!("staging volume {volume} failed: operation already in progress")));
    }
    Ok(Some(Staging { plugin: plugin.clone(), key }))
}

/// How long a NodeStageVolume holds its volume under `stage-not-reentrant` (the time a real
/// stage takes to format and mount), so that a second one sent meanwhile meets it.
pub(crate) const STAGE_HOLD: std::time::Duration = RACE_PAUSE;
