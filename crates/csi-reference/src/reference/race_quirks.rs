//! The reference plugin's concurrency and lost-node quirks: overlapping calls that pick the
//! same device (`attach-race`, `publish-device-race`), make a volume each
//! (`race-create-duplicates`), share one clone (`clone-fanout-shares-source`), lose one
//! (`fanout-loses-clone`) or refuse each other (`stage-not-reentrant`), a controller that
//! will not unpublish from a node it does not know (`unpublish-needs-known-node`), and a node
//! plugin that will not unpublish (`unpublish-needs-path`) or unstage
//! (`unstage-unmounts-blindly`) at a path that is gone. Each is behind a `self.quirk(..)` test.

use std::collections::BTreeSet;

use tonic::Status;

use super::{
    Plugin, Quirk,
    state::{Source, State, VolumeRecord},
};

/// How long a racy quirk pauses between reading the state and acting on it, so that calls
/// sent together meet.
const RACE_PAUSE: std::time::Duration = std::time::Duration::from_millis(150);

impl Plugin {
    /// `attach-race` and `publish-device-race`: the device a ControllerPublishVolume to
    /// `node` picks, read from the state before a pause (so overlapping calls pick the same
    /// one): the lowest `/dev/csi-conform/slot-N` no volume published there holds. `None`
    /// without either quirk.
    pub(crate) fn quirk_attach_device(&self, node: &str) -> Result<Option<String>, Status> {
        if !self.quirk(Quirk::AttachRace) && !self.quirk(Quirk::PublishDeviceRace) {
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
    /// meanwhile (`publish-device-race` answers OK with it instead).
    pub(crate) fn quirk_device_taken(&self, state: &super::state::State, node: &str, volume_id: &str, device: &str) -> Option<Status> {
        if !self.quirk(Quirk::AttachRace) {
            return None;
        }
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

    /// `clone-fanout-shares-source`: for a CreateVolume from `source`, when it clones a
    /// volume, either the mark of the one clone of that volume in flight (held while it is
    /// made, after a pause so that clones sent at once meet it), or, when another one is in
    /// flight, `Err(source volume id)` after waiting for it. `Ok(None)` without the quirk.
    pub(crate) fn quirk_clone_in_flight(&self, source: Option<&Source>) -> Result<Option<CloneInFlight<'_>>, String> {
        let Some(Source::Volume(source)) = source.filter(|_| self.quirk(Quirk::CloneFanoutSharesSource)) else { return Ok(None) };
        let key = format!("clone:{source}");
        if self.busy.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone()) {
            std::thread::sleep(RACE_PAUSE);
            return Ok(Some(CloneInFlight { plugin: self, key }));
        }
        while self.busy.lock().unwrap_or_else(|p| p.into_inner()).contains(&key) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Err(source.clone())
    }

    /// `clone-fanout-shares-source`: the newest clone of the volume another clone of which was
    /// in flight, which the waiting CreateVolume answers with, whatever its name.
    pub(crate) fn quirk_shared_clone<'s, T>(state: &'s State, in_flight: &Result<T, String>) -> Option<&'s VolumeRecord> {
        let Err(source) = in_flight else { return None };
        state
            .volumes
            .values()
            .filter(|v| matches!(&v.source, Some(Source::Volume(s)) if s == source))
            .max_by(|a, b| a.id.cmp(&b.id))
    }

    /// `fanout-loses-clone`: for a CreateVolume from `source`, when it clones a volume: the
    /// mark of the first clone of that volume in flight (held while it is made, after a pause
    /// so that clones sent at once meet it), and whether this call is the one clone of that
    /// source whose volume is answered and never recorded (one that meets another in flight;
    /// one per source). `(None, false)` without the quirk.
    pub(crate) fn quirk_clone_lost(&self, source: Option<&Source>) -> (Option<CloneInFlight<'_>>, bool) {
        let Some(Source::Volume(source)) = source.filter(|_| self.quirk(Quirk::FanoutLosesClone)) else { return (None, false) };
        let key = format!("fanout:{source}");
        let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        if busy.insert(key.clone()) {
            drop(busy);
            std::thread::sleep(RACE_PAUSE);
            return (Some(CloneInFlight { plugin: self, key }), false);
        }
        (None, busy.insert(format!("lost:{source}")))
    }

    /// Records `volume` in `state`, unless it is the clone `fanout-loses-clone` loses: then
    /// its backing store is removed and nothing is kept (the answer names it all the same).
    pub(crate) fn record_volume(state: &mut State, volume: VolumeRecord, lost: bool, store: &super::backing::Store) {
        if lost {
            let _ = store.remove();
        } else {
            state.volumes.insert(volume.id.clone(), volume);
        }
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

    /// `unpublish-needs-path`: NOT_FOUND for a NodeUnpublishVolume whose record says the
    /// volume is published at `target`, when `target` is gone: the stat of the path comes
    /// before the plugin's own record.
    pub(crate) fn quirk_target_gone(&self, target: &std::path::Path) -> Result<(), Status> {
        if !self.quirk(Quirk::UnpublishNeedsPath) || std::fs::symlink_metadata(target).is_ok() {
            return Ok(());
        }
        Err(Status::not_found(format!("target path {} not found", target.display())))
    }

    /// `unstage-unmounts-blindly`: INTERNAL for a NodeUnstageVolume whose record says the
    /// volume is staged at `staging`, when `staging` is gone: the unmount comes before any look
    /// at the path.
    pub(crate) fn quirk_staging_gone(&self, staging: &std::path::Path) -> Result<(), Status> {
        if !self.quirk(Quirk::UnstageUnmountsBlindly) || std::fs::symlink_metadata(staging).is_ok() {
            return Ok(());
        }
        Err(Status::internal(format!("unmount {}: no such file or directory", staging.display())))
    }
}

/// `clone-fanout-shares-source`: the clone of a source in flight, released when dropped.
pub(crate) struct CloneInFlight<'a> {
    plugin: &'a Plugin,
    key: String,
}

impl Drop for CloneInFlight<'_> {
    fn drop(&mut self) {
        self.plugin.busy.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.key);
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
