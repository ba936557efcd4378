//! The bundled reference plugin as a run without an endpoint starts it (one controller that
//! is also node 0, and a second node plugin, sharing a temporary state directory), served
//! in-process, and restarted in-process when a scenario restarts it ([`suite::Restarter`]):
//! its server stopped and a new plugin started with the same configuration on the same socket
//! and state directory, so that what the old one kept in memory is gone, as after a process
//! restart, while its state on disk and the kernel's mounts stay.

use std::sync::Arc;

use tokio::sync::Mutex;

use crate::{
    client::{Endpoint, Targets},
    reference::{self, ReferenceHandle},
    suite::{self, Restarting},
    version::SpecVersion,
};

/// How many node plugins the bundled plugin has: enough for the two-node scenarios.
pub const NODES: usize = 2;

/// One plugin of the bundled set: what starts it again, and its server while it runs.
struct Served {
    config: reference::Config,
    endpoint: Endpoint,
    handle: Option<ReferenceHandle>,
}

/// The bundled reference plugin, started for a run that names no endpoint.
pub struct Bundled {
    /// Node 0 first (it is also the controller).
    plugins: Vec<Mutex<Served>>,
    /// Sockets and state; removed when this is dropped.
    dir: tempfile::TempDir,
}

impl Bundled {
    /// Starts the bundled plugin speaking `spec_version` (v1.13 when `None`), with `quirks`;
    /// returns it and its endpoints by role.
    pub async fn start(spec_version: Option<SpecVersion>, quirks: &[reference::Quirk]) -> Result<(Arc<Bundled>, Targets), String> {
        let dir = reference::scratch_dir().map_err(|e| format!("cannot make a directory for the reference plugin: {e}"))?;
        let state_dir = dir.path().join("state");
        let mut plugins = Vec::new();
        let mut nodes = Vec::new();
        for n in 1..=NODES {
            let socket = if n == 1 { "csi.sock".to_owned() } else { format!("node-{n}.sock") };
            let endpoint = Endpoint::Unix(dir.path().join(socket));
            let config = reference::Config {
                node_id: format!("csi-conform-node-{n}"),
                mode: if n == 1 { reference::Mode::All } else { reference::Mode::NodeOnly },
                state_dir: Some(state_dir.clone()),
                spec_version: spec_version.unwrap_or_default(),
                quirks: quirks.iter().copied().collect(),
                ..reference::Config::default()
            };
            match reference::spawn(config.clone(), &endpoint.to_string()).await {
                Ok(handle) => plugins.push(Mutex::new(Served { config, endpoint: endpoint.clone(), handle: Some(handle) })),
                Err(e) => {
                    Bundled { plugins, dir }.shutdown().await;
                    return Err(e.to_string());
                }
            }
            nodes.push(endpoint);
        }
        let targets = Targets::resolve(None, nodes.first().cloned(), nodes);
        Ok((Arc::new(Bundled { plugins, dir }), targets))
    }

    /// Stops every plugin of the set.
    pub async fn shutdown(&self) {
        for served in &self.plugins {
            if let Some(handle) = served.lock().await.handle.take()
                && let Err(e) = handle.shutdown().await
            {
                tracing::warn!("the reference plugin did not stop cleanly: {e}");
            }
        }
    }

    /// The directory of its sockets and state.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Stops plugin `index` and starts it again with the same configuration on the same
    /// socket (the state directory is in the configuration).
    async fn restart(&self, index: usize) -> Result<(), String> {
        let Some(served) = self.plugins.get(index) else {
            return Err(format!("the bundled plugin has no node {index}"));
        };
        let mut served = served.lock().await;
        // A server that stopped uncleanly is stopped all the same: start the new one.
        if let Some(handle) = served.handle.take()
            && let Err(e) = handle.shutdown().await
        {
            tracing::warn!("the reference plugin on {} did not stop cleanly before its restart: {e}", served.endpoint);
        }
        let handle = reference::spawn(served.config.clone(), &served.endpoint.to_string())
            .await
            .map_err(|e| format!("starting it again on {}: {e}", served.endpoint))?;
        served.handle = Some(handle);
        Ok(())
    }
}

impl std::fmt::Debug for Bundled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundled").field("dir", &self.dir.path()).field("plugins", &self.plugins.len()).finish()
    }
}

impl suite::Restarter for Bundled {
    fn restart_node(&self, index: usize) -> Restarting<'_> {
        Box::pin(self.restart(index))
    }

    /// Node 0's plugin is the controller.
    fn restart_controller(&self) -> Restarting<'_> {
        Box::pin(self.restart(0))
    }
}
