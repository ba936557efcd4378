//! Child processes: the `csi-conform` binary as CI runs it (to exercise signals, SIGKILL and
//! exit codes for real), and the reference plugin as a separate process keeping its state in
//! a directory, so that what is left on it is read from the plugin, not from our bookkeeping.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use csi_conform::{
    client::{ClientOptions, Connection, Endpoint},
    proto::v1,
};
use tokio::process::{Child, Command};

pub use super::{bin, csi_conform};

/// Starts `csi-conform args...` in `cwd` with piped output, killed if the test drops it.
pub fn spawn_csi_conform(args: &[&str], cwd: &Path) -> Child {
    Command::new(bin())
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start csi-conform")
}

/// Sends `signal` to a child we started.
pub fn signal(child: &Child, signal: nix::sys::signal::Signal) {
    let pid = child.id().expect("the child is running");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).expect("signal the child");
}

/// `csi-conform reference-plugin` in its own process, state in `<dir>/state`.
pub struct ReferenceProcess {
    /// Its scratch directory (socket and state).
    pub dir: tempfile::TempDir,
    /// Its socket.
    pub socket: PathBuf,
    child: Child,
}

impl ReferenceProcess {
    /// Starts it with extra `args` and waits until it answers Probe.
    pub async fn start(args: &[&str]) -> ReferenceProcess {
        ReferenceProcess::start_with_env(args, &[]).await
    }

    /// Like [`ReferenceProcess::start`], with extra environment variables.
    pub async fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> ReferenceProcess {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("csi.sock");
        let state = dir.path().join("state");
        let endpoint = format!("unix://{}", socket.display());
        let log = std::fs::File::create(dir.path().join("plugin.log")).expect("the plugin's log file");
        let child = Command::new(bin())
            .args(["reference-plugin", "--endpoint", &endpoint, "--state-dir"])
            .arg(&state)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("start the reference plugin");
        let process = ReferenceProcess { dir, socket, child };
        process.connect().await;
        process
    }

    /// Kills it (SIGKILL, as a crash does) and starts it again on the same socket and state
    /// directory with `args`; returns once it answers Probe.
    pub async fn kill_and_restart(&mut self, args: &[&str]) {
        signal(&self.child, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait().await;
        let endpoint = format!("unix://{}", self.socket.display());
        let log = std::fs::OpenOptions::new().append(true).open(self.dir.path().join("plugin.log")).expect("the plugin's log");
        self.child = Command::new(bin())
            .args(["reference-plugin", "--endpoint", &endpoint, "--state-dir"])
            .arg(self.dir.path().join("state"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("restart the reference plugin");
        self.connect().await;
    }

    /// The endpoint as `csi-conform` flags take it.
    pub fn endpoint(&self) -> String {
        self.socket.display().to_string()
    }

    /// The endpoint as the journal writes it.
    pub fn journal_endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// A fresh harness connection to it.
    pub async fn connect(&self) -> Connection {
        let options = ClientOptions { connect_timeout: Duration::from_secs(20), ..ClientOptions::default() };
        Connection::connect(Endpoint::Unix(self.socket.clone()), options).await.expect("connect to the reference plugin")
    }

    /// The ids of every volume the plugin holds, from the plugin itself.
    pub async fn volume_ids(&self) -> Vec<String> {
        let conn = self.connect().await;
        let mut controller = conn.controller();
        let listed = controller
            .list_volumes(v1::ListVolumesRequest::default())
            .await
            .expect("ListVolumes")
            .into_inner();
        listed.entries.into_iter().filter_map(|e| e.volume).map(|v| v.volume_id).collect()
    }

    /// Creates a volume directly (as someone other than csi-conform would) and returns its id.
    pub async fn create_volume(&self, name: &str) -> String {
        let conn = self.connect().await;
        let response = conn
            .controller()
            .create_volume(super::create_req(name, vec![super::snw()]))
            .await
            .expect("CreateVolume")
            .into_inner();
        response.volume.expect("a volume").volume_id
    }

    /// Stops it (SIGTERM) and returns what it wrote on stderr.
    pub async fn stop(mut self) -> String {
        signal(&self.child, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait().await;
        std::fs::read_to_string(self.dir.path().join("plugin.log")).unwrap_or_default()
    }
}

impl Drop for ReferenceProcess {
    /// Never leave mounts under the scratch directory (tests that care assert there are none
    /// before this runs).
    fn drop(&mut self) {
        super::unmount_all_under(self.dir.path());
    }
}

/// Waits (polling, up to a minute) until the journal at `path` has at least `n` lines
/// containing `what` (`"op":"created"`, `"kind":"node-publication"`, ...).
pub async fn wait_for_journal(path: &Path, what: &str, n: usize) {
    for _ in 0..3000 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().filter(|l| l.contains(what)).count() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{} never had {n} lines with {what}", path.display());
}
