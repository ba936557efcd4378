//! The node plugin as the agent sees it: its connection, and where its files and mounts are
//! (csi-client's [`PluginView`], found again when a restarted plugin is a new process). Below
//! the forward, the lease and the service, which all read it.

use std::path::{Path, PathBuf};

use crate::peer::PluginView;
use csi_client::client::{Connection, Endpoint};

/// Where the node plugin's files are, seen from the agent (csi-client's [`PluginView`], as
/// `run` finds a local plugin's), or why they cannot be reached.
#[derive(Debug, Clone)]
pub struct PluginFiles(Result<PluginView, String>);

impl PluginFiles {
    async fn locate(endpoint: &Endpoint) -> PluginFiles {
        PluginFiles(match endpoint.socket_path() {
            Some(socket) => PluginView::locate(socket).await,
            None => Err(format!("the node plugin ({endpoint}) is reached over TCP, so its process and mounts cannot be found")),
        })
    }

    /// `path` as the agent opens it; `None` when the plugin's files cannot be reached.
    pub fn local_path(&self, path: &Path) -> Option<PathBuf> {
        self.0.as_ref().ok().map(|v| v.local_path(path))
    }

    /// Why the plugin's files cannot be reached, if so.
    pub fn unreachable(&self) -> Option<&str> {
        self.0.as_ref().err().map(String::as_str)
    }

    /// The plugin's process and mount namespace.
    pub fn view(&self) -> Option<&PluginView> {
        self.0.as_ref().ok()
    }
}

/// The node plugin, and where its files and mounts are seen from the agent.
#[derive(Debug)]
pub struct NodeView {
    /// The node plugin.
    pub plugin: Connection,
    files: tokio::sync::Mutex<PluginFiles>,
}

impl NodeView {
    /// The view of the plugin at `plugin`'s endpoint.
    pub async fn new(plugin: Connection) -> NodeView {
        let files = PluginFiles::locate(plugin.endpoint()).await;
        NodeView { plugin, files: tokio::sync::Mutex::new(files) }
    }

    /// Where the plugin's files are: found again when the process serving its socket is gone
    /// (a restarted plugin is a new process, perhaps in a new mount namespace).
    pub async fn inspector(&self) -> PluginFiles {
        let mut files = self.files.lock().await;
        if files.view().is_none_or(|v| !v.alive()) {
            *files = PluginFiles::locate(self.plugin.endpoint()).await;
        }
        files.clone()
    }
}

