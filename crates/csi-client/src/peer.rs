//! The process serving a node plugin's unix socket, and where that process's files and mounts
//! are seen from here: as they are (it shares this process's mount namespace), through
//! `/proc/PID/root` and `/proc/PID/mountinfo` (a mount namespace of its own, as a
//! containerized plugin lives), or not at all, with the reason. The engine's inspector and the
//! node agent both find a plugin this way.

use std::{
    io,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::mounts;

/// How long finding the process behind a unix socket may take.
const PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// The process serving the unix socket at `path`: SO_PEERCRED of a connection of our own
/// (closed at once). `Ok(None)` when the kernel gives no pid we can use (0: the process is
/// outside this pid namespace).
pub async fn socket_peer(path: &Path) -> io::Result<Option<i32>> {
    let connect = tokio::net::UnixStream::connect(path);
    let stream = tokio::time::timeout(PEER_TIMEOUT, connect)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connecting took too long"))??;
    Ok(stream.peer_cred()?.pid().filter(|pid| *pid > 0))
}

/// Where a node plugin's files are, seen from this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginView {
    /// The process serving the socket.
    pub pid: i32,
    /// Its mount namespace (`mnt:[4026531841]`).
    pub namespace: String,
    /// Whether that is this process's own.
    pub shared: bool,
}

impl PluginView {
    /// The process serving the unix socket at `socket` and where its files are; the reason
    /// when they cannot be reached from here.
    pub async fn locate(socket: &Path) -> Result<PluginView, String> {
        let pid = match socket_peer(socket).await {
            Ok(Some(pid)) => pid,
            Ok(None) => return Err(format!("the process serving {} is outside this pid namespace (SO_PEERCRED gives no pid)", socket.display())),
            Err(e) => return Err(format!("the process serving {} cannot be identified ({e})", socket.display())),
        };
        let (own, theirs) = match (mounts::mount_namespace(None), mounts::mount_namespace(Some(pid))) {
            (Ok(own), Ok(theirs)) => (own, theirs),
            (_, Err(e)) | (Err(e), _) => return Err(format!("the mount namespace of pid {pid} cannot be read: {e}")),
        };
        if own != theirs && let Err(e) = std::fs::read_dir(format!("/proc/{pid}/root/")) {
            return Err(format!("pid {pid} mounts in a mount namespace of its own ({theirs}) whose files cannot be reached through /proc/{pid}/root ({e})"));
        }
        Ok(PluginView { pid, shared: own == theirs, namespace: theirs })
    }

    /// `path` as the plugin names it, as this process opens it: itself, or under
    /// `/proc/PID/root` with symlinks followed as the plugin would follow them (the last
    /// component stays as it is).
    pub fn local_path(&self, path: &Path) -> PathBuf {
        if self.shared {
            return path.to_owned();
        }
        let root = PathBuf::from(format!("/proc/{}/root", self.pid));
        let inside = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => mounts::resolve_in(&root, parent).join(name),
            _ => mounts::resolve_in(&root, path),
        };
        root.join(inside.strip_prefix("/").unwrap_or(&inside))
    }

    /// The plugin's mount table, as the kernel writes it.
    pub fn mountinfo(&self) -> io::Result<String> {
        std::fs::read_to_string(if self.shared { mounts::MOUNTINFO.to_owned() } else { format!("/proc/{}/mountinfo", self.pid) })
    }

    /// `path` free of symlinks as the plugin resolves it (how its mount table names it).
    pub fn resolved(&self, path: &Path) -> PathBuf {
        if self.shared {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        } else {
            mounts::resolve_in(Path::new(&format!("/proc/{}/root", self.pid)), path)
        }
    }

    /// Whether the process is still there.
    pub fn alive(&self) -> bool {
        Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}
