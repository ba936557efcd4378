//! Shared helpers of the integration tests: an in-process reference plugin on a unix socket in
//! a temporary directory, typed tonic clients over that socket, request builders, and test
//! doubles ([`fake_plugin`]).

#![allow(dead_code)]

pub mod fake_plugin;
pub mod junit_schema;
pub mod netns;
pub mod misbehaving;
pub mod process;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use csi_conform::proto::v1::{
    self, controller_client::ControllerClient, group_controller_client::GroupControllerClient,
    identity_client::IdentityClient, node_client::NodeClient,
    snapshot_metadata_client::SnapshotMetadataClient, volume_capability::access_mode::Mode,
};
use csi_conform::reference::{self, Config, ReferenceHandle};
use tempfile::TempDir;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

/// A reference plugin served in-process on `<dir>/csi.sock`.
pub struct TestPlugin {
    /// The test's scratch directory (socket, targets, staging paths).
    pub dir: TempDir,
    /// The socket path.
    pub socket: PathBuf,
    /// A channel connected over the socket.
    pub channel: Channel,
    handle: Option<ReferenceHandle>,
}

/// Connects a channel over a unix socket.
pub async fn connect(path: &Path) -> Channel {
    let path = path.to_path_buf();
    Endpoint::try_from("http://[::]:50051")
        .expect("static URI")
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(path).await?,
                ))
            }
        }))
        .await
        .expect("connect to the plugin socket")
}

impl TestPlugin {
    /// Starts a plugin with `config` in a fresh temporary directory.
    pub async fn start(config: Config) -> TestPlugin {
        let dir = tempfile::tempdir().expect("temp dir");
        TestPlugin::start_in(dir, "csi.sock", config).await
    }

    /// Starts a plugin with `config` on `<dir>/<socket>`.
    pub async fn start_in(dir: TempDir, socket: &str, config: Config) -> TestPlugin {
        let socket = dir.path().join(socket);
        let endpoint = format!("unix://{}", socket.display());
        let handle = reference::spawn(config, &endpoint)
            .await
            .expect("spawn the reference plugin");
        let channel = connect(&socket).await;
        TestPlugin {
            dir,
            socket,
            channel,
            handle: Some(handle),
        }
    }

    /// Starts a second plugin in a sub-directory of this plugin's scratch directory (the two
    /// share nothing unless their configs share a state directory).
    pub async fn start_beside(&self, socket: &str, config: Config) -> (ReferenceHandle, Channel) {
        let path = self.dir.path().join(socket);
        let handle = reference::spawn(config, &format!("unix://{}", path.display()))
            .await
            .expect("spawn the second plugin");
        let channel = connect(&path).await;
        (handle, channel)
    }

    pub fn identity(&self) -> IdentityClient<Channel> {
        IdentityClient::new(self.channel.clone())
    }
    pub fn controller(&self) -> ControllerClient<Channel> {
        ControllerClient::new(self.channel.clone())
    }
    pub fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(self.channel.clone())
    }
    pub fn group(&self) -> GroupControllerClient<Channel> {
        GroupControllerClient::new(self.channel.clone())
    }
    pub fn metadata(&self) -> SnapshotMetadataClient<Channel> {
        SnapshotMetadataClient::new(self.channel.clone())
    }

    /// A path inside the scratch directory (as a string, the way requests carry paths).
    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// Stops the plugin and waits for it.
    pub async fn stop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown().await.expect("clean shutdown");
        }
    }
}

impl Drop for TestPlugin {
    /// A safety net for failed tests: never leave mounts under the scratch directory (the
    /// tests that care assert there are none before this runs).
    fn drop(&mut self) {
        unmount_all_under(self.dir.path());
    }
}

/// Detaches every mount under `dir`, innermost first.
pub fn unmount_all_under(dir: &Path) {
    for m in csi_conform::mounts::mounts_under(dir).iter().rev() {
        let _ = nix::mount::umount2(&m.mount_point, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// A mount capability with `mode` and the default file system.
pub fn mount_cap(mode: Mode) -> v1::VolumeCapability {
    v1::VolumeCapability {
        access_type: Some(v1::volume_capability::AccessType::Mount(
            v1::volume_capability::MountVolume::default(),
        )),
        access_mode: Some(v1::volume_capability::AccessMode { mode: mode as i32 }),
    }
}

/// A mount capability with a file system type and mount flags.
pub fn mount_cap_with(
    mode: Mode,
    fs_type: &str,
    flags: &[&str],
    group: &str,
) -> v1::VolumeCapability {
    v1::VolumeCapability {
        access_type: Some(v1::volume_capability::AccessType::Mount(
            v1::volume_capability::MountVolume {
                fs_type: fs_type.into(),
                mount_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
                volume_mount_group: group.into(),
            },
        )),
        access_mode: Some(v1::volume_capability::AccessMode { mode: mode as i32 }),
    }
}

/// A block capability with `mode`.
pub fn block_cap(mode: Mode) -> v1::VolumeCapability {
    v1::VolumeCapability {
        access_type: Some(v1::volume_capability::AccessType::Block(
            v1::volume_capability::BlockVolume {},
        )),
        access_mode: Some(v1::volume_capability::AccessMode { mode: mode as i32 }),
    }
}

/// The single-node writer mount capability most tests use.
pub fn snw() -> v1::VolumeCapability {
    mount_cap(Mode::SingleNodeWriter)
}

/// A CreateVolume request for `name` with `caps`.
pub fn create_req(name: &str, caps: Vec<v1::VolumeCapability>) -> v1::CreateVolumeRequest {
    v1::CreateVolumeRequest {
        name: name.into(),
        volume_capabilities: caps,
        ..Default::default()
    }
}

/// A capacity range.
pub fn range(required: i64, limit: i64) -> Option<v1::CapacityRange> {
    Some(v1::CapacityRange {
        required_bytes: required,
        limit_bytes: limit,
    })
}

/// Creates a volume and returns it.
pub async fn create(
    ctl: &mut ControllerClient<Channel>,
    name: &str,
    caps: Vec<v1::VolumeCapability>,
) -> v1::Volume {
    ctl.create_volume(create_req(name, caps))
        .await
        .unwrap_or_else(|s| panic!("CreateVolume {name}: {s:?}"))
        .into_inner()
        .volume
        .expect("CreateVolume returns a volume")
}

/// A string map from pairs.
pub fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The code of a failed call; panics (showing the response) when it succeeded.
pub fn code_of<T: std::fmt::Debug>(result: Result<tonic::Response<T>, Status>) -> Status {
    match result {
        Ok(r) => panic!("expected an error, got OK: {:?}", r.into_inner()),
        Err(s) => s,
    }
}

/// Asserts that a call fails with `code` and returns the status for further checks.
#[track_caller]
pub fn expect_code<T: std::fmt::Debug>(
    result: Result<tonic::Response<T>, Status>,
    code: Code,
) -> Status {
    let status = code_of(result);
    assert_eq!(status.code(), code, "unexpected status: {status:?}");
    status
}

/// Unwraps a successful call, showing the status on failure.
#[track_caller]
pub fn ok<T>(result: Result<tonic::Response<T>, Status>) -> T {
    match result {
        Ok(r) => r.into_inner(),
        Err(s) => panic!("expected OK, got {:?}: {}", s.code(), s.message()),
    }
}

/// Connects the harness's own client (as `csi-conform` does) to a test plugin.
pub async fn harness_connection(plugin: &TestPlugin) -> csi_conform::client::Connection {
    csi_conform::client::Connection::connect(
        csi_conform::client::Endpoint::Unix(plugin.socket.clone()),
        csi_conform::client::ClientOptions {
            connect_timeout: std::time::Duration::from_secs(5),
            ..Default::default()
        },
    )
    .await
    .expect("the harness connects to the test plugin")
}

/// A plugin as the suite engine sees it: one endpoint in every role, fingerprinted.
pub async fn engine_plugin(plugin: &TestPlugin) -> csi_conform::suite::Plugin {
    let conn = harness_connection(plugin).await;
    let fingerprint = csi_conform::fingerprint::Fingerprint::collect(Some(&conn), std::slice::from_ref(&conn))
        .await
        .expect("the test plugin fingerprints");
    csi_conform::suite::Plugin { controller: Some(conn.clone()), nodes: vec![conn], fingerprint }
}

/// The `csi-conform` binary built for these tests.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_csi-conform")
}

/// Runs `csi-conform` with `args` in `cwd` (no terminal: stdout and stderr are pipes).
pub async fn csi_conform(args: &[&str], cwd: &Path) -> std::process::Output {
    csi_conform_env(args, cwd, &[]).await
}

/// [`csi_conform`] with extra environment variables (and `CI`, `NO_COLOR`, `RUST_LOG`,
/// `CSI_ENDPOINT` and `GITHUB_ACTIONS` cleared first, so the host's own settings do not leak in).
pub async fn csi_conform_env(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = tokio::process::Command::new(bin());
    cmd.args(args).current_dir(cwd);
    for var in ["CI", "NO_COLOR", "RUST_LOG", "CSI_ENDPOINT", "GITHUB_ACTIONS"] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    cmd.output().await.expect("run csi-conform")
}

/// What a test may skip for, and nothing else: a precondition of the machine, never an
/// outcome of the code under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Root with CAP_SYS_ADMIN: mounting, and namespaces of the test's own.
    CapSysAdmin,
    /// A kernel (or sandbox) that lets a process with CAP_SYS_ADMIN unshare a namespace.
    Namespaces,
    /// A headless Chromium on PATH.
    Chromium,
    /// The OCI image `scripts/dist` builds (a release build, kept out of the default run).
    DistImage,
    /// A container runtime (podman, or buildah's chroot isolation) that can run an image here.
    ContainerRuntime,
}

impl std::fmt::Display for Precondition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precondition::CapSysAdmin => "needs CAP_SYS_ADMIN",
            Precondition::Namespaces => "needs namespaces this machine refuses",
            Precondition::Chromium => "needs chromium",
            Precondition::DistImage => "needs the image scripts/dist builds",
            Precondition::ContainerRuntime => "needs a container runtime that runs here",
        })
    }
}

/// Says that `test` (or the part of it named) skipped, for `precondition`, with the detail
/// `why`: on stderr (`SKIPPED: ...`), and in the file `scripts/test` names in
/// `CSI_CONFORM_SKIP_LOG`, so that the summary at the end of the run lists every skip (cargo
/// hides the output of tests that pass).
pub fn skip(test: &str, precondition: Precondition, why: &str) {
    let line = format!("{test}: {precondition}: {why}");
    eprintln!("SKIPPED: {line}");
    if let Some(path) = std::env::var_os("CSI_CONFORM_SKIP_LOG") {
        use std::io::Write;
        let mut log = std::fs::OpenOptions::new().create(true).append(true).open(&path).expect("open the skip log");
        log.write_all(format!("{line}\n").as_bytes()).expect("write the skip log");
    }
}

/// Whether this process may mount; if not, says that `test` skipped and why.
pub fn can_mount(test: &str, why: &str) -> bool {
    if csi_conform::mounts::has_cap_sys_admin() {
        return true;
    }
    skip(test, Precondition::CapSysAdmin, why);
    false
}

/// A [`csi_conform::suite::Progress`] that records the run's events in the order they happen
/// (`started ID`, `finished ID`, `interrupted: REASON`), so that tests await and order events
/// instead of timing them; optionally it lets a held fake call go when the run stops.
#[derive(Default)]
pub struct EventLog {
    events: std::sync::Mutex<Vec<String>>,
    release: Vec<(Release, std::sync::Arc<tokio::sync::Semaphore>)>,
}

/// When an [`EventLog`] lets a held fake call go.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // `Release::OnStop` reads as the sentence it stands for.
pub enum Release {
    /// When the run stops.
    OnStop,
    /// When this scenario starts.
    OnStarted(String),
    /// When this scenario finishes.
    OnFinished(String),
}

impl EventLog {
    /// A log that only records.
    pub fn new() -> std::sync::Arc<EventLog> {
        std::sync::Arc::default()
    }

    /// A log that also adds a permit to each gate at its event.
    pub fn releasing(release: Vec<(Release, std::sync::Arc<tokio::sync::Semaphore>)>) -> std::sync::Arc<EventLog> {
        std::sync::Arc::new(EventLog { release, ..EventLog::default() })
    }

    fn release_at(&self, event: &Release) {
        self.release.iter().filter(|(when, _)| when == event).for_each(|(_, gate)| gate.add_permits(1));
    }

    /// The events so far.
    pub fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    /// Whether scenarios `a` and `b` were ever in flight together (each started before the
    /// other finished).
    pub fn overlapped(&self, a: &str, b: &str) -> bool {
        let events = self.events();
        let at = |what: &str, id: &str| {
            events.iter().position(|e| *e == format!("{what} {id}")).unwrap_or_else(|| panic!("no {what} {id} in {events:?}"))
        };
        at("started", a) < at("finished", b) && at("started", b) < at("finished", a)
    }

    fn push(&self, event: String) {
        self.events.lock().unwrap().push(event);
    }
}

impl csi_conform::suite::Progress for EventLog {
    fn begin(&self, _: usize) {}

    fn started(&self, id: &str) {
        self.push(format!("started {id}"));
        self.release_at(&Release::OnStarted(id.to_owned()));
    }

    fn finished(&self, result: &csi_conform::report::ScenarioResult) {
        self.push(format!("finished {}", result.id));
        self.release_at(&Release::OnFinished(result.id.clone()));
    }

    fn interrupted(&self, reason: &str) {
        self.push(format!("interrupted: {reason}"));
        self.release_at(&Release::OnStop);
    }
}
