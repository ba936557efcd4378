//! `aborts-when-busy`: a lock per volume, taken by each call about it and held a while, so
//! that a second call on the same volume meets it and is refused with ABORTED (moved out of
//! `quirks.rs`, which keeps the quirks' names and descriptions, to stay under the line limit).

use tonic::Status;

use super::{Plugin, Quirk};

/// How long each call holds its volume's lock under `aborts-when-busy`.
pub(crate) const BUSY_HOLD: std::time::Duration = std::time::Duration::from_millis(20);

/// The RPCs whose subject is a volume id (`aborts-when-busy` locks it).
const VOLUME_RPCS: [&str; 14] = [
    "DeleteVolume",
    "ControllerPublishVolume",
    "ControllerUnpublishVolume",
    "ValidateVolumeCapabilities",
    "ControllerExpandVolume",
    "ControllerGetVolume",
    "ControllerModifyVolume",
    "ControllerGetVolumeHealth",
    "NodeStageVolume",
    "NodeUnstageVolume",
    "NodePublishVolume",
    "NodeUnpublishVolume",
    "NodeGetVolumeStats",
    "NodeExpandVolume",
];

/// `aborts-when-busy`: a volume's lock, let go when dropped (also when the call is cancelled).
pub(crate) struct VolumeLock {
    plugin: std::sync::Arc<Plugin>,
    volume: String,
}

impl Drop for VolumeLock {
    fn drop(&mut self) {
        self.plugin.busy.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.volume);
    }
}

/// `aborts-when-busy`: takes `volume`'s lock for a call of `rpc`, or refuses the call with
/// ABORTED while another call holds it; `Ok(None)` without the quirk or for a call about no
/// volume.
pub(crate) fn lock_volume(plugin: &std::sync::Arc<Plugin>, rpc: &str, volume: &str) -> Result<Option<VolumeLock>, Status> {
    if !plugin.quirk(Quirk::AbortsWhenBusy) || volume.is_empty() || !VOLUME_RPCS.contains(&rpc) {
        return Ok(None);
    }
    if !plugin.busy.lock().unwrap_or_else(|p| p.into_inner()).insert(volume.to_owned()) {
        return Err(Status::aborted(format!("An operation with the given Volume ID {volume} already exists")));
    }
    Ok(Some(VolumeLock { plugin: plugin.clone(), volume: volume.to_owned() }))
}
