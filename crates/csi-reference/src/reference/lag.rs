//! The `listing-lags` quirk: ListVolumes and ListSnapshots list from a view that lags the
//! plugin's state by [`LAG`], as listings of eventually consistent backends do: a volume or
//! snapshot deleted less than `LAG` ago is still listed, one created less than `LAG` ago is
//! not yet. Every other RPC (ControllerGetVolume and GetSnapshot included) tells the truth.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use crate::proto::v1;

use super::{Plugin, Quirk};

/// How far the listing lags.
pub(crate) const LAG: Duration = Duration::from_millis(300);

/// What the lagging view still shows and does not show yet.
#[derive(Default)]
pub(crate) struct Lagging {
    /// Volumes created, by id: when.
    created: HashMap<String, Instant>,
    /// Volumes deleted, by id: when, and the entry the listing still shows.
    deleted: HashMap<String, (Instant, v1::list_volumes_response::Entry)>,
    /// Snapshots created, by id: when.
    snapshots_created: HashMap<String, Instant>,
    /// Snapshots deleted, by id: when, and the entry the listing still shows.
    snapshots_deleted: HashMap<String, (Instant, v1::list_snapshots_response::Entry)>,
}

impl Plugin {
    fn lagging(&self) -> Option<std::sync::MutexGuard<'_, Lagging>> {
        self.quirk(Quirk::ListingLags).then(|| self.lag.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A CreateVolume answered OK with `volume`.
    pub(crate) fn lag_created(&self, volume: Option<&v1::Volume>) {
        if let (Some(mut lag), Some(volume)) = (self.lagging(), volume) {
            lag.created.entry(volume.volume_id.clone()).or_insert_with(Instant::now);
        }
    }

    /// Before a DeleteVolume of `volume`: its entry, which the listing keeps showing a while.
    pub(crate) fn lag_deleting(&self, volume: &str) -> Option<v1::list_volumes_response::Entry> {
        drop(self.lagging()?);
        let state = self.store.snapshot().ok()?;
        let record = state.volumes.get(volume)?;
        Some(v1::list_volumes_response::Entry { volume: Some(self.volume_proto(record)), status: None })
    }

    /// A DeleteVolume answered OK for the volume whose entry `before` is.
    pub(crate) fn lag_deleted(&self, before: Option<v1::list_volumes_response::Entry>) {
        let Some(entry) = before else { return };
        let Some(volume) = entry.volume.as_ref().map(|v| v.volume_id.clone()) else { return };
        if let Some(mut lag) = self.lagging() {
            lag.created.remove(&volume);
            lag.deleted.insert(volume, (Instant::now(), entry));
        }
    }

    /// A CreateSnapshot answered OK with `snapshot`.
    pub(crate) fn lag_snapshot_created(&self, snapshot: Option<&v1::Snapshot>) {
        if let (Some(mut lag), Some(snapshot)) = (self.lagging(), snapshot) {
            lag.snapshots_created.entry(snapshot.snapshot_id.clone()).or_insert_with(Instant::now);
        }
    }

    /// A DeleteSnapshot removed the snapshot whose entry `before` was.
    pub(crate) fn lag_snapshot_deleted(&self, before: v1::list_snapshots_response::Entry) {
        let Some(snapshot) = before.snapshot.as_ref().map(|s| s.snapshot_id.clone()) else { return };
        if let Some(mut lag) = self.lagging() {
            lag.snapshots_created.remove(&snapshot);
            lag.snapshots_deleted.insert(snapshot, (Instant::now(), before));
        }
    }

    /// A whole unfiltered ListSnapshots (one page, from the start) as the lagging view shows it.
    pub(crate) fn lag_snapshot_listing(&self, answer: &mut v1::ListSnapshotsResponse, whole: bool) {
        let Some(mut lag) = self.lagging() else { return };
        let now = Instant::now();
        lag.snapshots_created.retain(|_, at| now.duration_since(*at) < LAG);
        lag.snapshots_deleted.retain(|_, (at, _)| now.duration_since(*at) < LAG);
        if !whole {
            return;
        }
        let id = |e: &v1::list_snapshots_response::Entry| e.snapshot.as_ref().map(|s| s.snapshot_id.clone()).unwrap_or_default();
        answer.entries.retain(|e| !lag.snapshots_created.contains_key(&id(e)));
        let listed: Vec<String> = answer.entries.iter().map(id).collect();
        let ghosts = lag.snapshots_deleted.iter().filter(|(s, _)| !listed.contains(s)).map(|(_, (_, e))| e.clone());
        answer.entries.extend(ghosts);
    }

    /// A whole listing (one page, from the start) as the lagging view shows it.
    pub(crate) fn lag_listing(&self, answer: &mut v1::ListVolumesResponse, whole: bool) {
        let Some(mut lag) = self.lagging() else { return };
        let now = Instant::now();
        lag.created.retain(|_, at| now.duration_since(*at) < LAG);
        lag.deleted.retain(|_, (at, _)| now.duration_since(*at) < LAG);
        if !whole {
            return;
        }
        let id = |e: &v1::list_volumes_response::Entry| e.volume.as_ref().map(|v| v.volume_id.clone()).unwrap_or_default();
        answer.entries.retain(|e| !lag.created.contains_key(&id(e)));
        let listed: Vec<String> = answer.entries.iter().map(id).collect();
        answer.entries.extend(lag.deleted.iter().filter(|(v, _)| !listed.contains(v)).map(|(_, (_, e))| e.clone()));
    }
}
