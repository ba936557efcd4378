//! What a node's staging and target paths look like: inspected on this host (file types, the
//! mount table, write probes) when the node plugin is local, through the operator's
//! `--check-path-cmd` (csi-sanity's checkpathcmd: `CMD PATH` prints `file`, `directory`,
//! `not_found` or `other`) when it is not, or not at all, with the reason.

use std::{
    io,
    os::unix::fs::FileTypeExt,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{client::Endpoint, mounts, report::MountSite};

/// The default `--check-path-cmd-timeout`.
pub const DEFAULT_CHECK_PATH_TIMEOUT: Duration = Duration::from_secs(10);

/// `--check-path-cmd`: a shell command that is given a path as its one argument and prints
/// what the path is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathCommand {
    /// The command line (run with `sh -c`, the path passed as `$1`).
    pub command: String,
    /// The longest one call may take.
    pub timeout: Duration,
}

/// What a path is, in check-path-cmd's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// A regular file, or a device node (a block volume's target).
    File,
    /// A directory.
    Directory,
    /// Nothing is there.
    NotFound,
    /// Something else (a socket, a fifo, a dangling link...).
    Other,
}

impl PathKind {
    /// The word check-path-cmd prints for it.
    pub fn as_str(self) -> &'static str {
        match self {
            PathKind::File => "file",
            PathKind::Directory => "directory",
            PathKind::NotFound => "not_found",
            PathKind::Other => "other",
        }
    }

    /// The kind named by check-path-cmd's output.
    pub fn parse(word: &str) -> Option<PathKind> {
        [PathKind::File, PathKind::Directory, PathKind::NotFound, PathKind::Other]
            .into_iter()
            .find(|k| k.as_str() == word)
    }

    /// What a path on this host is.
    pub fn of_local(path: &Path) -> PathKind {
        match std::fs::symlink_metadata(path) {
            Err(_) => PathKind::NotFound,
            Ok(m) if m.is_dir() => PathKind::Directory,
            Ok(m) if m.is_file() || m.file_type().is_block_device() || m.file_type().is_char_device() => {
                PathKind::File
            }
            Ok(_) => PathKind::Other,
        }
    }
}

impl std::fmt::Display for PathKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why check-path-cmd gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum PathCommandError {
    /// It could not be started.
    #[error("--check-path-cmd could not be started: {0}")]
    Spawn(io::Error),
    /// It ran longer than its timeout (it was killed).
    #[error("--check-path-cmd did not finish within {} (--check-path-cmd-timeout) for {}", crate::client::human_duration(*.timeout), .path.display())]
    Timeout {
        /// The path asked about.
        path: PathBuf,
        /// The timeout.
        timeout: Duration,
    },
    /// It exited with an error.
    #[error("--check-path-cmd failed for {} ({status}){}", .path.display(), stderr_suffix(.stderr))]
    Failed {
        /// The path asked about.
        path: PathBuf,
        /// How it exited.
        status: std::process::ExitStatus,
        /// The first line of its stderr.
        stderr: String,
    },
    /// It printed something other than one of the four words.
    #[error("--check-path-cmd printed {output:?} for {}; expected exactly one of file, directory, not_found, other", .path.display())]
    BadOutput {
        /// The path asked about.
        path: PathBuf,
        /// What it printed (trimmed, shortened).
        output: String,
    },
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() { String::new() } else { format!(": {stderr}") }
}

impl PathCommand {
    /// Asks the command what `path` is: `sh -c '<command> "$1"' csi-conform PATH`, so the path
    /// reaches it as one argument whatever characters it holds. A command that outlives the
    /// timeout is killed.
    pub async fn kind(&self, path: &Path) -> Result<PathKind, PathCommandError> {
        let child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{} \"$1\"", self.command))
            .arg("csi-conform-check-path")
            .arg(path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(PathCommandError::Spawn)?;
        let output = match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(result) => result.map_err(PathCommandError::Spawn)?,
            Err(_) => return Err(PathCommandError::Timeout { path: path.to_owned(), timeout: self.timeout }),
        };
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr).lines().next().unwrap_or_default().trim().to_owned();
            return Err(PathCommandError::Failed { path: path.to_owned(), status: output.status, stderr });
        }
        let printed = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        PathKind::parse(&printed).ok_or_else(|| PathCommandError::BadOutput {
            path: path.to_owned(),
            output: printed.chars().take(80).collect(),
        })
    }
}

/// `--mount-check`: whether the mount table of a node is consulted at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MountCheck {
    /// Where the node plugin's mounts can be seen: its own mount namespace for a unix socket
    /// (found through SO_PEERCRED), skipped with the reason where they cannot.
    #[default]
    Auto,
    /// Never: the mount checks are skips (plugins that only pretend to mount).
    Off,
}

impl MountCheck {
    /// The word `--mount-check` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            MountCheck::Auto => "auto",
            MountCheck::Off => "off",
        }
    }
}

impl std::str::FromStr for MountCheck {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(MountCheck::Auto),
            "off" => Ok(MountCheck::Off),
            other => Err(format!("{other:?} is not a mount check mode; expected auto or off")),
        }
    }
}

/// Why the mount table of a node could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the mount table of the node plugin (pid {pid}, /proc/{pid}/mountinfo): {source}; did the process serving the socket exit?")]
pub struct MountTableError {
    /// The process whose table was read.
    pub pid: i32,
    /// What went wrong.
    pub source: io::Error,
}

/// Where a node's files are reached from here.
#[derive(Debug, Clone)]
enum Files {
    /// As they are: the node plugin shares this process's mount namespace.
    Here,
    /// Through `/proc/PID/root`: the node plugin is process `pid`, in another mount namespace.
    Proc {
        /// The process serving the node endpoint.
        pid: i32,
    },
    /// Through `--check-path-cmd` (file kinds only).
    Command(PathCommand),
    /// Not at all, for this reason.
    Unreachable(String),
}

/// How the paths of one node endpoint can be inspected: the one place that knows where a
/// node's paths are. Made once per run and node endpoint ([`Inspector::for_node`]).
#[derive(Debug, Clone)]
pub struct Inspector {
    files: Files,
    /// Why the mount table and write probes are not used, when they are not.
    no_mounts: Option<String>,
    /// Where the mounts are verified, for the report.
    site: MountSite,
}

/// A node's mount table, and the process whose root its mount points are relative to (`None`:
/// this process).
type Table = (Vec<mounts::MountInfo>, Option<i32>);

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

impl Inspector {
    /// The inspector for node endpoint `index` at `endpoint`. For a unix socket, the process
    /// serving it is found (SO_PEERCRED): in this process's mount namespace its paths are
    /// inspected as they are; in another, through `/proc/PID` (its mount table, its root).
    /// When no process can be found (tcp; a process outside this pid namespace) the paths go
    /// to `command` when one is given, and are not inspected otherwise; either way the mount
    /// checks are skipped, with the reason. `MountCheck::Off` skips them always.
    pub async fn for_node(
        index: usize,
        endpoint: &Endpoint,
        command: Option<&PathCommand>,
        mode: MountCheck,
    ) -> Inspector {
        let mut site = MountSite {
            node: index,
            endpoint: endpoint.to_string(),
            pid: None,
            namespace: None,
            shared: false,
            skipped: None,
        };
        let located = match endpoint.socket_path() {
            None => Err(format!(
                "node endpoint {index} ({endpoint}) is reached over TCP, so neither the process serving it nor its \
                 mounts can be found from here"
            )),
            Some(socket) => match socket_peer(socket).await {
                Ok(Some(pid)) => match (mounts::mount_namespace(None), mounts::mount_namespace(Some(pid))) {
                    (Ok(own), Ok(theirs)) if own == theirs => {
                        (site.pid, site.shared, site.namespace) = (Some(pid), true, Some(theirs));
                        Ok(Files::Here)
                    }
                    (Ok(_), Ok(theirs)) => match std::fs::read_dir(format!("/proc/{pid}/root/")) {
                        Ok(_) => {
                            (site.pid, site.namespace) = (Some(pid), Some(theirs));
                            Ok(Files::Proc { pid })
                        }
                        Err(e) => Err(format!(
                            "pid {pid}, which serves node endpoint {index} ({endpoint}), mounts in a mount namespace \
                             of its own ({theirs}) whose files cannot be reached through /proc/{pid}/root ({e})"
                        )),
                    },
                    (_, Err(e)) | (Err(e), _) => Err(format!(
                        "the mount namespace of pid {pid}, which serves node endpoint {index} ({endpoint}), cannot be read: {e}"
                    )),
                },
                Ok(None) => Err(format!(
                    "the process serving node endpoint {index} ({endpoint}) is outside csi-conform's pid namespace \
                     (SO_PEERCRED gives no pid), so its mounts cannot be found from here"
                )),
                Err(e) => Err(format!(
                    "the process serving node endpoint {index} ({endpoint}) cannot be identified ({e}), so its mounts \
                     cannot be found from here"
                )),
            },
        };
        let (files, no_mounts) = match (located, command) {
            (Ok(files), _) => {
                let off = (mode == MountCheck::Off)
                    .then(|| "--mount-check off: the mount table and write probes are not consulted".to_owned());
                (files, off)
            }
            (Err(why), Some(c)) => {
                (Files::Command(c.clone()), Some(format!("{why}; --check-path-cmd only tells file types")))
            }
            (Err(why), None) => {
                let why = format!("{why} (give --check-path-cmd to inspect its paths)");
                (Files::Unreachable(why.clone()), Some(why))
            }
        };
        site.skipped = no_mounts.clone();
        Inspector { files, no_mounts, site }
    }

    /// An inspector that reaches nothing, for this reason.
    pub fn unavailable(reason: String) -> Inspector {
        let site = MountSite {
            node: 0,
            endpoint: String::new(),
            pid: None,
            namespace: None,
            shared: false,
            skipped: Some(reason.clone()),
        };
        Inspector { files: Files::Unreachable(reason.clone()), no_mounts: Some(reason), site }
    }

    /// `path` on the node, as this process can open it (`/proc/PID/root/...` for a plugin in
    /// another mount namespace), or `None` when the node's files cannot be reached from here.
    pub fn local_path(&self, path: &Path) -> Option<PathBuf> {
        match &self.files {
            Files::Here => Some(path.to_owned()),
            Files::Proc { pid } => {
                // Symlinks are followed as the plugin would follow them, inside its root;
                // the last component stays as it is (a link there is what the path is).
                let root = PathBuf::from(format!("/proc/{pid}/root"));
                let inside = match (path.parent(), path.file_name()) {
                    (Some(parent), Some(name)) => mounts::resolve_in(&root, parent).join(name),
                    _ => mounts::resolve_in(&root, path),
                };
                Some(root.join(inside.strip_prefix("/").unwrap_or(&inside)))
            }
            Files::Command(_) | Files::Unreachable(_) => None,
        }
    }

    /// Why nothing about the node's paths can be inspected, if so.
    pub fn unreachable(&self) -> Option<&str> {
        match &self.files {
            Files::Unreachable(why) => Some(why),
            _ => None,
        }
    }

    /// Whether the paths are asked about through `--check-path-cmd`.
    pub fn by_command(&self) -> bool {
        matches!(self.files, Files::Command(_))
    }

    /// Whether the node's mount table is consulted (and write probes made).
    pub fn sees_mounts(&self) -> bool {
        self.no_mounts.is_none()
    }

    /// Why the mount checks are skipped, when they are.
    pub fn mounts_skipped(&self) -> Option<&str> {
        self.no_mounts.as_deref()
    }

    /// Where the mounts are verified (or why not), for the report.
    pub fn site(&self) -> &MountSite {
        &self.site
    }

    /// The mount table of the node's mount namespace, and the root its mount points are
    /// relative to (`None`: the mount checks are skipped).
    fn table(&self) -> Result<Option<Table>, MountTableError> {
        if !self.sees_mounts() {
            return Ok(None);
        }
        match &self.files {
            Files::Here => Ok(Some((mounts::mounts().unwrap_or_default(), None))),
            Files::Proc { pid } => mounts::mounts_of(*pid)
                .map(|t| Some((t, Some(*pid))))
                .map_err(|source| MountTableError { pid: *pid, source }),
            Files::Command(_) | Files::Unreachable(_) => Ok(None),
        }
    }

    /// `path` as the node's mount table names it: free of symlinks in the node's view.
    fn resolved(path: &Path, pid: Option<i32>) -> PathBuf {
        match pid {
            None => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            Some(pid) => mounts::resolve_in(Path::new(&format!("/proc/{pid}/root")), path),
        }
    }

    /// Every mount whose mount point is exactly `path` in the node's mount namespace, bottom
    /// first; `Ok(None)` when the mount checks are skipped.
    pub fn mounts_at(&self, path: &Path) -> Result<Option<Vec<mounts::MountInfo>>, MountTableError> {
        Ok(self.table()?.map(|(table, pid)| {
            let path = Self::resolved(path, pid);
            table.into_iter().filter(|m| m.mount_point == path).collect()
        }))
    }

    /// The topmost mount at exactly `path` in the node's mount namespace (`Ok(None)` inside
    /// when nothing is mounted there); `Ok(None)` when the mount checks are skipped.
    pub fn mount_entry(&self, path: &Path) -> Result<Option<Option<mounts::MountInfo>>, MountTableError> {
        Ok(self.mounts_at(path)?.map(|mut stacked| stacked.pop()))
    }

    /// Every mount at or below `dir` in the node's mount namespace; `Ok(None)` when the mount
    /// checks are skipped.
    pub fn mounts_under(&self, dir: &Path) -> Result<Option<Vec<mounts::MountInfo>>, MountTableError> {
        Ok(self.table()?.map(|(table, pid)| {
            let dir = Self::resolved(dir, pid);
            table.into_iter().filter(|m| m.mount_point.starts_with(&dir)).collect()
        }))
    }

    /// What `path` is; `Ok(None)` when it cannot be inspected.
    pub async fn kind(&self, path: &Path) -> Result<Option<PathKind>, PathCommandError> {
        match &self.files {
            Files::Command(c) => c.kind(path).await.map(Some),
            Files::Unreachable(_) => Ok(None),
            Files::Here | Files::Proc { .. } => Ok(self.local_path(path).map(|p| PathKind::of_local(&p))),
        }
    }

    /// Whether `path` is a block (or character) device node on the node.
    pub fn is_device(&self, path: &Path) -> bool {
        self.local_path(path).and_then(|p| std::fs::metadata(p).ok()).is_some_and(|m| {
            m.file_type().is_block_device() || m.file_type().is_char_device()
        })
    }

    /// Tries to write into a published target on the node (see [`probe_write`]); `None` when
    /// the mount checks are skipped.
    pub fn probe_write(&self, target: &Path, block: bool) -> Option<WriteProbe> {
        if !self.sees_mounts() {
            return None;
        }
        self.local_path(target).map(|p| probe_write(&p, block))
    }

    /// Checks a `path-state` word against the node's view; `Ok(Err(what it is))` when it
    /// does not hold, `Err` when the mount table cannot be read. The caller handles the
    /// states this inspector cannot tell.
    pub async fn check(&self, path: &Path, state: &str) -> Result<Result<(), String>, CheckError> {
        let kind = self.kind(path).await?.unwrap_or(PathKind::NotFound);
        if !needs_mounts(state) {
            return Ok(check_kind(kind, state));
        }
        let mount = self.mount_entry(path)?.flatten();
        Ok(judge_mount(kind, mount.as_ref(), state))
    }
}

/// Why a path's state could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// --check-path-cmd gave no answer.
    #[error(transparent)]
    Command(#[from] PathCommandError),
    /// The node's mount table could not be read.
    #[error(transparent)]
    Mounts(#[from] MountTableError),
}

/// The expected state of a path (`path-state`'s `is:` words).
pub const PATH_STATES: &[&str] =
    &["absent", "directory", "file", "exists", "mount-point", "not-mount-point", "read-only-mount"];

/// Whether a `path-state` word needs the mount table.
pub fn needs_mounts(state: &str) -> bool {
    matches!(state, "mount-point" | "not-mount-point" | "read-only-mount")
}

/// Checks a path's state on this host; the error says what it is instead.
#[cfg(test)]
fn check_local(path: &Path, state: &str) -> Result<(), String> {
    let kind = PathKind::of_local(path);
    if !needs_mounts(state) {
        return check_kind(kind, state);
    }
    judge_mount(kind, mounts::mount_entry(path).as_ref(), state)
}

/// Judges a mount state word from a path's kind and the topmost mount there.
pub(crate) fn judge_mount(kind: PathKind, mount: Option<&mounts::MountInfo>, state: &str) -> Result<(), String> {
    let what = describe(kind);
    match (state, mount) {
        ("mount-point", Some(_)) | ("not-mount-point", None) => Ok(()),
        ("read-only-mount", Some(m)) if m.read_only => Ok(()),
        ("read-only-mount", Some(_)) => Err("is mounted read-write".to_owned()),
        ("not-mount-point", Some(_)) => Err("is a mount point".to_owned()),
        (_, None) => Err(format!("{what} and not a mount point")),
        _ => Err(what.to_owned()),
    }
}

/// Checks a path's kind against a `path-state` word that does not need the mount table.
pub fn check_kind(kind: PathKind, state: &str) -> Result<(), String> {
    let ok = match state {
        "absent" => kind == PathKind::NotFound,
        "directory" => kind == PathKind::Directory,
        "file" => kind == PathKind::File,
        "exists" => kind != PathKind::NotFound,
        _ => false,
    };
    if ok { Ok(()) } else { Err(describe(kind).to_owned()) }
}

fn describe(kind: PathKind) -> &'static str {
    match kind {
        PathKind::NotFound => "is absent",
        PathKind::Directory => "is a directory",
        PathKind::File => "is a file",
        PathKind::Other => "is neither a file nor a directory",
    }
}

/// What writing into a published target showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteProbe {
    /// The write worked (and its trace was removed).
    Writable,
    /// The write failed with EROFS.
    ReadOnly,
    /// The write failed otherwise.
    Failed(String),
    /// Not probed (a device node: a read-only mount does not stop writes to a device).
    NotProbed,
}

/// Tries to write into a published target without changing the volume's data: a mount
/// target gets a new file (removed again), a block target is opened for writing (nothing is
/// written).
pub fn probe_write(target: &Path, block: bool) -> WriteProbe {
    let result = if block {
        match std::fs::symlink_metadata(target) {
            Ok(m) if m.file_type().is_block_device() || m.file_type().is_char_device() => {
                return WriteProbe::NotProbed;
            }
            _ => std::fs::OpenOptions::new().write(true).open(target).map(drop),
        }
    } else {
        let probe = target.join(format!(".csi-conform-write-probe-{}", std::process::id()));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .map(drop)
            .and_then(|()| std::fs::remove_file(&probe))
    };
    match result {
        Ok(()) => WriteProbe::Writable,
        Err(e) if e.raw_os_error() == Some(nix::libc::EROFS) => WriteProbe::ReadOnly,
        Err(e) => WriteProbe::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_states_say_what_a_path_is() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_local(dir.path(), "directory").is_ok());
        assert!(check_local(dir.path(), "not-mount-point").is_ok());
        assert_eq!(check_local(dir.path(), "absent").unwrap_err(), "is a directory");
        assert_eq!(check_local(&dir.path().join("x"), "exists").unwrap_err(), "is absent");
        assert_eq!(check_local(dir.path(), "mount-point").unwrap_err(), "is a directory and not a mount point");
        assert!(check_local(Path::new("/"), "mount-point").is_ok());
        assert_eq!(PathKind::of_local(Path::new("/dev/null")), PathKind::File);
    }

    #[tokio::test]
    async fn a_socket_served_here_is_inspected_here_and_tcp_says_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let _listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let endpoint = Endpoint::Unix(socket.clone());
        let here = Inspector::for_node(0, &endpoint, None, MountCheck::Auto).await;
        assert_eq!(here.site().pid, Some(std::process::id() as i32));
        assert!(here.site().shared && here.sees_mounts() && here.unreachable().is_none());
        assert_eq!(here.local_path(dir.path()), Some(dir.path().to_path_buf()));
        assert_eq!(here.mount_entry(Path::new("/")).unwrap().map(|m| m.is_some()), Some(true));
        assert!(here.check(dir.path(), "not-mount-point").await.unwrap().is_ok());

        let off = Inspector::for_node(0, &endpoint, None, MountCheck::Off).await;
        assert!(!off.sees_mounts() && off.mounts_skipped().unwrap().contains("--mount-check off"));
        assert_eq!(off.kind(dir.path()).await.unwrap(), Some(PathKind::Directory), "file kinds are still checked");
        assert!(off.mounts_at(Path::new("/")).unwrap().is_none());
        assert!(off.probe_write(dir.path(), false).is_none());

        let tcp = Endpoint::Tcp { host: "127.0.0.1".into(), port: 9 };
        let none = Inspector::for_node(1, &tcp, None, MountCheck::Auto).await;
        let why = none.unreachable().unwrap();
        assert!(why.contains("node endpoint 1 (tcp://127.0.0.1:9) is reached over TCP") && why.contains("--check-path-cmd"), "{why}");
        assert_eq!(none.local_path(dir.path()), None);
        assert_eq!(none.site().skipped.as_deref(), Some(why));
        let command = PathCommand { command: "echo directory; :".into(), timeout: Duration::from_secs(5) };
        let asked = Inspector::for_node(1, &tcp, Some(&command), MountCheck::Auto).await;
        assert!(asked.by_command() && asked.mounts_skipped().unwrap().contains("only tells file types"));
        assert_eq!(asked.kind(Path::new("/anything")).await.unwrap(), Some(PathKind::Directory));
    }

    #[test]
    fn a_plugin_in_another_namespace_is_seen_through_its_proc_directory() {
        // This process stands in for the plugin: the view through /proc/PID must agree with
        // its own.
        let pid = std::process::id() as i32;
        let site = MountSite { node: 0, endpoint: String::new(), pid: Some(pid), namespace: None, shared: false, skipped: None };
        let there = Inspector { files: Files::Proc { pid }, no_mounts: None, site };
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink(&dir, dir.join("link")).unwrap();
        let through = there.local_path(&dir.join("link/x")).unwrap();
        assert_eq!(through, PathBuf::from(format!("/proc/{pid}/root{}/x", dir.display())), "links are followed inside");
        assert_eq!(there.local_path(&dir.join("link")).unwrap(), PathBuf::from(format!("/proc/{pid}/root{}/link", dir.display())));
        assert_eq!(PathKind::of_local(&there.local_path(&dir).unwrap()), PathKind::Directory);
        assert_eq!(there.mount_entry(Path::new("/")).unwrap().map(|m| m.is_some()), Some(true));
        assert_eq!(there.mounts_at(&dir).unwrap(), Some(Vec::new()));
        assert_eq!(there.probe_write(&dir, false), Some(WriteProbe::Writable));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "the probe left nothing behind");
        let gone = Inspector { files: Files::Proc { pid: i32::MAX }, ..there };
        let err = gone.mounts_at(&dir).unwrap_err().to_string();
        assert!(err.contains(&format!("pid {}", i32::MAX)) && err.contains("exit"), "{err}");
    }

    #[test]
    fn write_probes_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(probe_write(dir.path(), false), WriteProbe::Writable);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let file = dir.path().join("f");
        std::fs::write(&file, b"data").unwrap();
        assert_eq!(probe_write(&file, true), WriteProbe::Writable);
        assert_eq!(std::fs::read(&file).unwrap(), b"data");
        assert!(matches!(probe_write(&dir.path().join("missing"), false), WriteProbe::Failed(_)));
    }

    #[tokio::test]
    async fn the_command_answers_in_four_words_or_fails_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = |command: &str| PathCommand { command: command.to_owned(), timeout: Duration::from_secs(5) };
        let stat = cmd("if [ -d \"$1\" ]; then echo directory; elif [ -e \"$1\" ]; then echo file; else echo not_found; fi; :");
        assert_eq!(stat.kind(dir.path()).await.unwrap(), PathKind::Directory);
        let spaced = dir.path().join("a b");
        assert_eq!(stat.kind(&spaced).await.unwrap(), PathKind::NotFound);
        std::fs::write(&spaced, b"").unwrap();
        assert_eq!(stat.kind(&spaced).await.unwrap(), PathKind::File);
        let err = cmd("echo mounted; :").kind(dir.path()).await.unwrap_err().to_string();
        assert!(err.contains("\"mounted\"") && err.contains("not_found"), "{err}");
        let err = cmd("echo nope >&2; exit 3; :").kind(dir.path()).await.unwrap_err().to_string();
        assert!(err.contains("nope") && err.contains("exit status: 3"), "{err}");
        let slow = PathCommand { command: "sleep 5; :".into(), timeout: Duration::from_millis(200) };
        let err = slow.kind(dir.path()).await.unwrap_err();
        assert!(matches!(err, PathCommandError::Timeout { .. }));
        assert!(err.to_string().starts_with("--check-path-cmd did not finish within 200ms (--check-path-cmd-timeout) for"), "{err}");
    }
}
