//! The seam between the engine and a node the run reaches through a node agent (`run
//! --node-agents`): [`NodeAgent`] is what the engine asks of such a node (what a path is, the
//! node plugin's mount table, data markers, write probes), answered on the node itself, in
//! the node plugin's mount namespace. The engine sees an [`Inspector`] as for any other node;
//! which transport answers is this file's business and the caller's (the CLI supplies the
//! agent). The file operations of every inspector that the checks use (markers, sizes,
//! owners, write probes) are here too, so a check never opens a node's file itself.

use std::{
    io,
    path::{Path, PathBuf},
    sync::Arc,
};

use super::{Files, Inspector, PathKind, WriteProbe, probe_write};
use crate::{
    mounts::MountInfo,
    report::MountSite,
    marker::{self, Marker, Mismatch, Placement},
};

/// What one path on the node is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStat {
    /// What it is.
    pub kind: PathKind,
    /// Whether it is a block or character device node.
    pub device: bool,
    /// Its owner group, when it exists.
    pub gid: Option<u32>,
    /// A block target's size (a device's, or a file's length).
    pub block_size: Option<u64>,
    /// The size of the file system mounted there.
    pub fs_size: Option<u64>,
}

/// A node plugin's mount table, and the paths asked about as it resolves them; or why the
/// agent does not consult it.
pub type NodeTable = Result<(Vec<MountInfo>, Vec<PathBuf>), String>;

/// A node reached through its agent. The calls block until the agent answers (the engine's
/// checks ask them synchronously, as they read a local mount table).
pub trait NodeAgent: Send + Sync + std::fmt::Debug {
    /// Who plays the node, for the report and messages: `agent tcp://10.0.0.2:7443 on host
    /// node-b`.
    fn describe(&self) -> String;
    /// Where the node plugin's mounts are verified on the node (its pid and mount namespace
    /// there), or why they are not.
    fn site(&self) -> MountSite;
    /// What `path` is.
    fn stat(&self, path: &Path) -> io::Result<NodeStat>;
    /// The node plugin's mount table and `resolve`'s paths as the plugin resolves them;
    /// `None` when the agent does not consult it (and why).
    fn mount_table(&self, resolve: &[&Path]) -> io::Result<NodeTable>;
    /// Writes a marker into the published `target` (marker.rs's `write`, on the node).
    fn write_marker(&self, target: &Path, block: bool, marker: &Marker, at: Option<&Placement>) -> io::Result<Placement>;
    /// Reads a marker back (marker.rs's `verify`, on the node).
    fn verify_marker(
        &self,
        target: &Path,
        at: &Placement,
        expected: &Marker,
        others: &[&Marker],
    ) -> io::Result<Option<(String, Mismatch)>>;
    /// Removes a marker (marker.rs's `remove`, on the node).
    fn remove_marker(&self, target: &Path, at: &Placement) -> io::Result<()>;
    /// marker.rs's `try_write`, on the node.
    fn try_write(&self, target: &Path, block: bool) -> io::Result<()>;
    /// The inspector's write probe, on the node.
    fn probe_write(&self, target: &Path, block: bool) -> WriteProbe;
}

impl Inspector {
    /// The inspector of node `index`, played by `agent`.
    pub fn through_agent(index: usize, agent: Arc<dyn NodeAgent>) -> Inspector {
        let mut site = agent.site();
        site.node = index;
        Inspector { files: Files::Agent(agent), no_mounts: site.skipped.clone(), site }
    }

    /// The agent playing this node, if one does.
    pub fn agent(&self) -> Option<&Arc<dyn NodeAgent>> {
        match &self.files {
            Files::Agent(a) => Some(a),
            _ => None,
        }
    }

    /// Whether the node's files can be read and written (here, through /proc/PID, or through
    /// its agent), not only their kinds told.
    pub fn reaches_files(&self) -> bool {
        self.agent().is_some() || self.local_path(Path::new("/")).is_some()
    }

    fn local_or_unreachable(&self, path: &Path) -> io::Result<PathBuf> {
        self.local_path(path).ok_or_else(|| {
            io::Error::new(io::ErrorKind::Unsupported, self.unreachable().unwrap_or("the node's files cannot be reached").to_owned())
        })
    }

    /// The owner group of `path` on the node.
    pub fn gid(&self, path: &Path) -> io::Result<u32> {
        use std::os::unix::fs::MetadataExt;
        match self.agent() {
            Some(agent) => agent.stat(path)?.gid.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such path")),
            None => std::fs::metadata(self.local_or_unreachable(path)?).map(|m| m.gid()),
        }
    }

    /// The size of the block target at `path` (marker.rs's `block_size`).
    pub fn block_size(&self, path: &Path) -> io::Result<u64> {
        match self.agent() {
            Some(agent) => agent.stat(path)?.block_size.ok_or_else(|| io::Error::other("the agent could not tell its size")),
            None => marker::block_size(&self.local_or_unreachable(path)?),
        }
    }

    /// The size of the file system mounted at `path` (marker.rs's `fs_size`).
    pub fn fs_size(&self, path: &Path) -> io::Result<u64> {
        match self.agent() {
            Some(agent) => agent.stat(path)?.fs_size.ok_or_else(|| io::Error::other("the agent could not tell its size")),
            None => marker::fs_size(&self.local_or_unreachable(path)?),
        }
    }

    /// Writes `marker` into the published `target` on the node.
    pub fn write_marker(&self, target: &Path, block: bool, m: &Marker, at: Option<&Placement>) -> io::Result<Placement> {
        match self.agent() {
            Some(agent) => agent.write_marker(target, block, m, at),
            None => marker::write(&self.local_or_unreachable(target)?, block, m, at),
        }
    }

    /// Reads `expected` back from the published `target` on the node.
    pub fn verify_marker(
        &self,
        target: &Path,
        at: &Placement,
        expected: &Marker,
        others: &[&Marker],
    ) -> io::Result<Option<(String, Mismatch)>> {
        match self.agent() {
            Some(agent) => agent.verify_marker(target, at, expected, others),
            None => marker::verify(&self.local_or_unreachable(target)?, at, expected, others),
        }
    }

    /// Removes a marker from the published `target` on the node.
    pub fn remove_marker(&self, target: &Path, at: &Placement) -> io::Result<()> {
        match self.agent() {
            Some(agent) => agent.remove_marker(target, at),
            None => marker::remove(&self.local_or_unreachable(target)?, at),
        }
    }

    /// Tries to write into a read-only publication on the node (marker.rs's `try_write`).
    pub fn try_write(&self, target: &Path, block: bool) -> io::Result<()> {
        match self.agent() {
            Some(agent) => agent.try_write(target, block),
            None => marker::try_write(&self.local_or_unreachable(target)?, block),
        }
    }

    /// The write probe of `target` through the agent.
    pub(super) fn agent_probe(agent: &dyn NodeAgent, target: &Path, block: bool) -> WriteProbe {
        agent.probe_write(target, block)
    }

    /// A local probe, for symmetry with [`Self::agent_probe`].
    pub(super) fn local_probe(local: &Path, block: bool) -> WriteProbe {
        probe_write(local, block)
    }
}
