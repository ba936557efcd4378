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

use crate::{client::Endpoint, mounts};

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
    #[error("--check-path-cmd did not finish within {} for {}", crate::client::human_duration(*.timeout), .path.display())]
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

/// How the paths of one node endpoint can be inspected.
#[derive(Debug, Clone)]
pub enum Inspector {
    /// The node plugin runs on this host: file types, the mount table and write probes.
    Host,
    /// A remote node plugin, asked through `--check-path-cmd` (file types only).
    Command(PathCommand),
    /// Nothing can be inspected; the reason.
    Unavailable(String),
}

impl Inspector {
    /// The inspector for node endpoint `index` at `endpoint`: this host for unix sockets, the
    /// command for others when one is given.
    pub fn for_node(index: usize, endpoint: &Endpoint, command: Option<&PathCommand>) -> Inspector {
        match (endpoint.is_local(), command) {
            (true, _) => Inspector::Host,
            (false, Some(c)) => Inspector::Command(c.clone()),
            (false, None) => Inspector::Unavailable(format!(
                "node endpoint {index} ({endpoint}) is not on this host, so its paths cannot be inspected \
                 here (give --check-path-cmd to inspect them)"
            )),
        }
    }

    /// Whether the mount table of the node is visible (only on this host).
    pub fn sees_mounts(&self) -> bool {
        matches!(self, Inspector::Host)
    }

    /// `path` on the node, as this process can open it (`/proc/PID/root/...` for a plugin in
    /// another mount namespace), or `None` when the node's files cannot be reached from here.
    pub fn local_path(&self, path: &Path) -> Option<PathBuf> {
        match self {
            Inspector::Host => Some(path.to_owned()),
            Inspector::Command(_) | Inspector::Unavailable(_) => None,
        }
    }

    /// What `path` is; `Ok(None)` when it cannot be inspected.
    pub async fn kind(&self, path: &Path) -> Result<Option<PathKind>, PathCommandError> {
        match self {
            Inspector::Host => Ok(Some(PathKind::of_local(path))),
            Inspector::Command(c) => c.kind(path).await.map(Some),
            Inspector::Unavailable(_) => Ok(None),
        }
    }
}

/// The expected state of a path (`path-state`'s `is:` words).
pub const PATH_STATES: &[&str] =
    &["absent", "directory", "file", "exists", "mount-point", "not-mount-point", "read-only-mount"];

/// Whether a `path-state` word needs the mount table.
pub fn needs_mounts(state: &str) -> bool {
    matches!(state, "mount-point" | "not-mount-point" | "read-only-mount")
}

/// Checks a path's state on this host; the error says what it is instead.
pub fn check_local(path: &Path, state: &str) -> Result<(), String> {
    let kind = PathKind::of_local(path);
    if !needs_mounts(state) {
        return check_kind(kind, state);
    }
    let what = describe(kind);
    let mount = mounts::mount_entry(path);
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
        assert!(matches!(slow.kind(dir.path()).await, Err(PathCommandError::Timeout { .. })));
    }
}
