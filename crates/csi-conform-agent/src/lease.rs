//! The run's lease on an agent, and the ledger of what the run did on the node under it:
//! volumes staged and published through the agent, markers written, directories the agent
//! made. While the run renews the lease, nothing here acts; when the lease lapses (or the run
//! releases it, or the agent is stopped), everything the ledger lists is undone on the node:
//! markers removed, targets unpublished, staging paths unstaged, the agent's own directories
//! removed when empty. Only what the ledger lists is touched.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};

use super::node::NodeView;
use crate::{marker, proto::v1};

/// One piece of node-side work the run did through the agent.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Work {
    /// NodeStageVolume answered OK.
    Staged { volume_id: String, staging: String },
    /// NodePublishVolume answered OK.
    Published { volume_id: String, target: String },
    /// A marker written on a published target (`tail`: a block target's second copy).
    Marker { target: String, tail: Option<u64> },
    /// A directory the agent made.
    Dir(PathBuf),
}

/// Who holds the agent, until when, and what they did.
#[derive(Debug)]
struct Holder {
    run_id: String,
    expires: Instant,
    work: BTreeSet<Work>,
}

/// The agent's one lease (one run at a time), shared by its services.
#[derive(Debug, Clone, Default)]
pub struct Lease {
    holder: Arc<Mutex<Option<Holder>>>,
    changed: Arc<Notify>,
    /// Held (read) by every forwarded call that changes the node, for as long as the plugin
    /// takes; an undo takes it (write) first, so it never races a stage or publish in flight.
    in_flight: Arc<tokio::sync::RwLock<()>>,
}

/// Why a call needs a lease it does not have.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LeaseError {
    /// Nobody holds the agent.
    #[error("no run holds this agent (a run takes it with Renew before it changes anything on the node)")]
    NotHeld,
    /// Another run holds it.
    #[error("run {0} holds this agent until its lease lapses")]
    HeldBy(String),
}

/// What was undone when a lease ended.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Undone {
    /// One line per piece of work undone.
    pub undone: Vec<String>,
    /// One line per piece of work that could not be undone.
    pub left: Vec<String>,
}

impl Lease {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Holder>> {
        self.holder.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run holding the agent now.
    pub fn holder(&self) -> Option<String> {
        self.lock().as_ref().map(|h| h.run_id.clone())
    }

    /// Takes the lease for `run_id` (free, or already its own) for `ttl` from now.
    pub fn renew(&self, run_id: &str, ttl: Duration) -> Result<Duration, LeaseError> {
        let ttl = ttl.min(super::MAX_LEASE);
        let mut holder = self.lock();
        match holder.as_mut() {
            Some(h) if h.run_id == run_id => h.expires = Instant::now() + ttl,
            Some(h) => return Err(LeaseError::HeldBy(h.run_id.clone())),
            None => *holder = Some(Holder { run_id: run_id.to_owned(), expires: Instant::now() + ttl, work: BTreeSet::new() }),
        }
        drop(holder);
        self.changed.notify_waiters();
        Ok(ttl)
    }

    /// Checks that `run_id` (any run when empty) holds the lease now.
    pub fn check(&self, run_id: Option<&str>) -> Result<(), LeaseError> {
        match (self.lock().as_ref(), run_id) {
            (None, _) => Err(LeaseError::NotHeld),
            (Some(h), Some(id)) if h.run_id != id => Err(LeaseError::HeldBy(h.run_id.clone())),
            (Some(h), _) if h.expires <= Instant::now() => Err(LeaseError::NotHeld),
            _ => Ok(()),
        }
    }

    /// Records work done under the lease (nothing when no run holds it); whether it was new.
    pub fn record(&self, work: Work) -> bool {
        self.lock().as_mut().is_some_and(|h| h.work.insert(work))
    }

    /// Records work a call of `run_id` did, in that run's ledger only (nothing when another
    /// run holds the agent now); whether it was new.
    pub fn record_for(&self, run_id: &str, work: Work) -> bool {
        self.lock().as_mut().is_some_and(|h| h.run_id == run_id && h.work.insert(work))
    }

    /// Forgets work the run undid itself.
    pub fn forget(&self, work: &Work) {
        if let Some(h) = self.lock().as_mut() {
            h.work.remove(work);
        }
    }

    /// Forgets the markers on `target` (the run unpublished it, so they are gone with it or
    /// are on the volume, which is the run's).
    pub fn forget_markers(&self, target: &str) {
        if let Some(h) = self.lock().as_mut() {
            h.work.retain(|w| !matches!(w, Work::Marker { target: t, .. } if t == target));
        }
    }

    /// The work listed now (for tests and Facts).
    pub fn work(&self) -> Vec<Work> {
        self.lock().as_ref().map(|h| h.work.iter().cloned().collect()).unwrap_or_default()
    }

    /// A hold that keeps any undo waiting until it is dropped (see `in_flight`).
    pub async fn hold(&self) -> tokio::sync::OwnedRwLockReadGuard<()> {
        self.in_flight.clone().read_owned().await
    }

    /// Ends `run_id`'s lease now (any run's with `None`) and hands back what it listed.
    fn take(&self, run_id: Option<&str>) -> Option<BTreeSet<Work>> {
        let mut holder = self.lock();
        if run_id.is_some_and(|id| holder.as_ref().is_some_and(|h| h.run_id != id)) {
            return None;
        }
        let taken = holder.take().map(|h| h.work);
        drop(holder);
        self.changed.notify_waiters();
        taken
    }

    /// Ends the lease of `run_id` (any with `None`) and undoes its work on the node.
    pub async fn release(&self, run_id: Option<&str>, undo: &Undo) -> Result<Undone, LeaseError> {
        let _quiet = self.in_flight.write().await;
        match self.take(run_id) {
            Some(work) => Ok(undo.undo(work).await),
            None if run_id.is_some() && self.holder().is_some() => Err(LeaseError::HeldBy(self.holder().unwrap_or_default())),
            None => Ok(Undone::default()),
        }
    }

    /// Watches the lease for as long as the agent runs: when it lapses, its work is undone.
    pub async fn watch(self, undo: Undo) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let expires = self.lock().as_ref().map(|h| (h.run_id.clone(), h.expires));
            match expires {
                None => notified.await,
                Some((run_id, at)) => {
                    tokio::select! {
                        () = notified => {}
                        () = tokio::time::sleep_until(at) => {
                            // Calls still in flight finish first (their work is in the ledger).
                            let _quiet = self.in_flight.write().await;
                            let lapsed = self.lock().as_ref().is_some_and(|h| h.run_id == run_id && h.expires <= Instant::now());
                            if lapsed && let Some(work) = self.take(Some(&run_id)) {
                                let done = undo.undo(work).await;
                                tracing::warn!(
                                    "the lease of run {run_id} lapsed: undid {} piece(s) of its work on this node{}",
                                    done.undone.len(),
                                    if done.left.is_empty() { String::new() } else { format!("; could not undo: {}", done.left.join("; ")) }
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// How work is undone on this node: through the node plugin, in its view of the files.
#[derive(Debug, Clone)]
pub struct Undo {
    /// The node plugin and where its files are.
    pub node: Arc<NodeView>,
}

impl Undo {
    /// Undoes `work`: markers first, then every publication, every staging, and last the
    /// agent's own directories (deepest first, only when empty).
    pub async fn undo(&self, work: BTreeSet<Work>) -> Undone {
        let mut out = Undone::default();
        let mut note = |ok: Result<String, String>| match ok {
            Ok(line) => out.undone.push(line),
            Err(line) => out.left.push(line),
        };
        let inspector = self.node.inspector().await;
        let files = |p: &Path| inspector.local_path(p);
        for w in &work {
            if let Work::Marker { target, tail } = w {
                let placement = match tail {
                    Some(tail) => marker::Placement::Block { tail: *tail },
                    None => marker::Placement::File,
                };
                note(match files(Path::new(target)) {
                    Some(local) => marker::remove(&local, &placement)
                        .map(|()| format!("removed the marker on {target}"))
                        .map_err(|e| format!("the marker on {target}: {e}")),
                    None => Err(format!("the marker on {target}: the plugin's files cannot be reached")),
                });
            }
        }
        let mut node = self.node.plugin.node();
        for w in &work {
            if let Work::Published { volume_id, target } = w {
                let request = v1::NodeUnpublishVolumeRequest { volume_id: volume_id.clone(), target_path: target.clone() };
                note(match node.node_unpublish_volume(request).await {
                    Ok(_) => Ok(format!("NodeUnpublishVolume {volume_id} at {target}")),
                    Err(e) => Err(format!("NodeUnpublishVolume {volume_id} at {target}: {}", e.message())),
                });
            }
        }
        for w in &work {
            if let Work::Staged { volume_id, staging } = w {
                let request =
                    v1::NodeUnstageVolumeRequest { volume_id: volume_id.clone(), staging_target_path: staging.clone() };
                note(match node.node_unstage_volume(request).await {
                    Ok(_) => Ok(format!("NodeUnstageVolume {volume_id} at {staging}")),
                    Err(e) => Err(format!("NodeUnstageVolume {volume_id} at {staging}: {}", e.message())),
                });
            }
        }
        let mut dirs: Vec<&PathBuf> = work.iter().filter_map(|w| if let Work::Dir(d) = w { Some(d) } else { None }).collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in dirs {
            // Only an empty directory: never into anything still mounted or holding data.
            if let Some(local) = files(dir)
                && std::fs::remove_dir(&local).is_ok()
            {
                out.undone.push(format!("removed the directory {}", dir.display()));
            }
        }
        out
    }
}
