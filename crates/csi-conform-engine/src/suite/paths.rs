//! Where each scenario's staging and target paths live, and how they come and go: under the
//! run's own work directory by default, or under csi-sanity's mount and staging directories
//! (`--mount-dir`, `--staging-dir`), made and removed on this host or by the user's path
//! commands (`--create-mount-path-cmd` and friends, run as `<cmd> <path>` like csi-sanity
//! runs them; a create command's trimmed stdout is the path it actually made).
//!
//! csi-sanity makes one mount directory and one staging directory per spec, because its specs
//! run one at a time. Our scenarios run concurrently, so each gets its own directory inside
//! those roots: `<mount-dir>/<run>-<nnnn>-<scenario>` is the parent of its target paths (as
//! csi-sanity's mount dir is the parent of `target`), and `<staging-dir>/<run>-<nnnn>-<scenario>`
//! is its staging path. The roots are made once at the start of the run (by the create
//! command when one is given, so that `mkdir`-style commands work one level at a time) and
//! removed at the end if this run made them.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::Arc,
    time::Duration,
};

use super::resources::ResourceObserver;

/// A scenario's private paths: a directory and a staging directory the engine creates (the
/// spec makes the CO create the staging path), and target paths inside the directory that the
/// plugin creates (they do not exist before the scenario). [`RunPaths`] says where they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioPaths {
    /// `paths.dir`: the scenario's directory (created).
    pub dir: PathBuf,
    /// `paths.staging`.
    pub staging: PathBuf,
    /// `paths.target`.
    pub target: PathBuf,
    /// `paths.target2`.
    pub target2: PathBuf,
}

impl ScenarioPaths {
    /// The paths of a scenario whose directory is `dir`: its target paths inside it, and
    /// `staging` wherever the run put it.
    pub fn in_dir(dir: PathBuf, staging: PathBuf) -> Self {
        ScenarioPaths { staging, target: dir.join("target"), target2: dir.join("target2"), dir }
    }
}

/// How long a path command may take by default (csi-sanity's default too).
pub const DEFAULT_PATH_CMD_TIMEOUT: Duration = Duration::from_secs(10);

/// csi-sanity's path settings: the two roots and the commands that make and remove paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSettings {
    /// `--mount-dir`: the root of every scenario's target paths' parent (default: the run's
    /// directory under the work directory).
    pub mount_dir: Option<PathBuf>,
    /// `--staging-dir`: the root of every scenario's staging path (default: inside the
    /// scenario's own directory).
    pub staging_dir: Option<PathBuf>,
    /// `--create-mount-path-cmd`: makes a target parent instead of `mkdir`.
    pub create_mount_cmd: Option<PathBuf>,
    /// `--create-staging-path-cmd`: makes a staging path instead of `mkdir`.
    pub create_staging_cmd: Option<PathBuf>,
    /// `--create-path-cmd-timeout`.
    pub create_timeout: Duration,
    /// `--remove-mount-path-cmd`: removes a target parent (and what is in it).
    pub remove_mount_cmd: Option<PathBuf>,
    /// `--remove-staging-path-cmd`: removes a staging path.
    pub remove_staging_cmd: Option<PathBuf>,
    /// `--remove-path-cmd-timeout`.
    pub remove_timeout: Duration,
}

impl Default for PathSettings {
    fn default() -> Self {
        PathSettings {
            mount_dir: None,
            staging_dir: None,
            create_mount_cmd: None,
            create_staging_cmd: None,
            create_timeout: DEFAULT_PATH_CMD_TIMEOUT,
            remove_mount_cmd: None,
            remove_staging_cmd: None,
            remove_timeout: DEFAULT_PATH_CMD_TIMEOUT,
        }
    }
}

/// Why a path could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// A local directory could not be made.
    #[error("cannot create the directory {}: {source}", path.display())]
    Create {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// A path command failed, timed out or printed no path.
    #[error("{} {}: {reason}", cmd.display(), path.display())]
    Command {
        /// The command.
        cmd: PathBuf,
        /// The path it was given.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// Which of the two kinds of path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mount,
    Staging,
}

/// A root directory and whether this run made it (and so removes it).
#[derive(Debug)]
struct Root {
    path: PathBuf,
    made: bool,
}

/// The run's roots, ready to hand out per-scenario paths.
#[derive(Debug)]
pub(crate) struct RunPaths {
    settings: PathSettings,
    mount: Root,
    staging: Option<Root>,
    /// Prefix of per-scenario names in user-given roots (they may hold other runs' leftovers).
    prefix: String,
    /// Where the run's own directory is journaled, until it is gone.
    journaled: std::sync::Mutex<Option<JournaledDir>>,
}

/// The journal entry of the run's own directory (see [`ResourceObserver::making_dir`]).
struct JournaledDir {
    observer: Arc<dyn ResourceObserver>,
    token: String,
}

impl std::fmt::Debug for JournaledDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournaledDir").field("token", &self.token).finish_non_exhaustive()
    }
}

impl JournaledDir {
    /// Settles the entry when `dir` is gone or not the run's: nothing is left to remove.
    fn settle_unless(self, left: bool) -> Option<Self> {
        if left {
            return Some(self);
        }
        self.observer.removed_dir(&self.token);
        None
    }
}

impl RunPaths {
    /// Makes the roots: `--mount-dir` (or `<work_dir>/run-<run_id>-<pid>`) and `--staging-dir`.
    #[cfg(test)]
    pub(crate) async fn open(settings: &PathSettings, work_dir: &Path, run_id: &str) -> Result<Self, PathError> {
        Self::open_journaled(settings, work_dir, run_id, None).await
    }

    /// Like [`RunPaths::open`]; the run's own directory (`<work_dir>/run-<run_id>-<pid>`,
    /// made with `mkdir`) is told to `observer` before it is made, and again once it is gone,
    /// so that a `cleanup` after a crash removes it (when empty) even if nothing was staged.
    pub(crate) async fn open_journaled(
        settings: &PathSettings,
        work_dir: &Path,
        run_id: &str,
        observer: Option<Arc<dyn ResourceObserver>>,
    ) -> Result<Self, PathError> {
        let (mount_root, prefix) = match &settings.mount_dir {
            Some(dir) => (dir.clone(), format!("{run_id}-")),
            None => (work_dir.join(format!("run-{run_id}-{}", std::process::id())), String::new()),
        };
        let own = settings.mount_dir.is_none() && settings.create_mount_cmd.is_none() && !mount_root.exists();
        let journaled = observer
            .filter(|_| own)
            .and_then(|observer| Some(JournaledDir { token: observer.making_dir(&mount_root)?, observer }));
        let mut paths =
            RunPaths {
            settings: settings.clone(),
            mount: Root { path: mount_root, made: false },
            staging: None,
            prefix,
            journaled: std::sync::Mutex::new(journaled),
        };
        match paths.make_root(Kind::Mount, &paths.mount.path).await {
            Ok(root) => paths.mount = root,
            Err(e) => {
                paths.settle_dir();
                return Err(e);
            }
        }
        if !paths.mount.made {
            // It was there already: not the run's to remove.
            let mut journaled = paths.journaled.lock().unwrap_or_else(|p| p.into_inner());
            *journaled = journaled.take().and_then(|j| j.settle_unless(false));
        }
        if let Some(staging) = settings.staging_dir.as_ref().filter(|s| **s != paths.mount.path) {
            match paths.make_root(Kind::Staging, staging).await {
                Ok(root) => paths.staging = Some(root),
                Err(e) => {
                    paths.close().await;
                    return Err(e);
                }
            }
        }
        Ok(paths)
    }

    /// Settles the journal entry of the run's own directory once it is gone.
    fn settle_dir(&self) {
        let left = self.mount.path.exists();
        let mut journaled = self.journaled.lock().unwrap_or_else(|p| p.into_inner());
        *journaled = journaled.take().and_then(|j| j.settle_unless(left));
    }

    async fn make_root(&self, kind: Kind, path: &Path) -> Result<Root, PathError> {
        if self.create_cmd(kind).is_some() {
            return Ok(Root { path: self.make(kind, path).await?, made: true });
        }
        if path.is_dir() {
            return Ok(Root { path: path.to_owned(), made: false });
        }
        std::fs::create_dir_all(path).map_err(|source| PathError::Create { path: path.to_owned(), source })?;
        Ok(Root { path: path.to_owned(), made: true })
    }

    fn create_cmd(&self, kind: Kind) -> Option<&Path> {
        match kind {
            Kind::Mount => self.settings.create_mount_cmd.as_deref(),
            Kind::Staging => self.settings.create_staging_cmd.as_deref(),
        }
    }

    fn remove_cmd(&self, kind: Kind) -> Option<&Path> {
        match kind {
            Kind::Mount => self.settings.remove_mount_cmd.as_deref(),
            Kind::Staging => self.settings.remove_staging_cmd.as_deref(),
        }
    }

    /// Makes one directory (which must not exist yet), by the create command or `mkdir`;
    /// returns the path actually made.
    async fn make(&self, kind: Kind, path: &Path) -> Result<PathBuf, PathError> {
        match self.create_cmd(kind) {
            Some(cmd) => {
                let out = run_path_cmd(cmd, path, (self.settings.create_timeout, "--create-path-cmd-timeout")).await?;
                let made = out.trim();
                if made.is_empty() {
                    return Err(PathError::Command {
                        cmd: cmd.to_owned(),
                        path: path.to_owned(),
                        reason: "printed no path (a create command prints the path it made)".to_owned(),
                    });
                }
                Ok(PathBuf::from(made))
            }
            None => {
                std::fs::create_dir(path).map_err(|source| PathError::Create { path: path.to_owned(), source })?;
                Ok(path.to_owned())
            }
        }
    }

    /// Removes one path we made: by the remove command, or on this host without ever crossing
    /// into anything still mounted (only an empty directory or a plain file is removed).
    async fn remove(&self, kind: Kind, path: &Path) {
        match self.remove_cmd(kind) {
            Some(cmd) => {
                if let Err(e) = run_path_cmd(cmd, path, (self.settings.remove_timeout, "--remove-path-cmd-timeout")).await {
                    tracing::warn!("left behind: {e}");
                }
            }
            None => remove_own_path(path),
        }
    }

    /// Where scenario number `index`'s directory and staging path go, without making them:
    /// the paths of a scenario that never uses them (no `${paths...}`, no node RPC that takes
    /// a path), which costs no directory, and no create or remove command.
    pub(crate) fn names(&self, index: usize, scenario_id: &str) -> ScenarioPaths {
        let dir = self.mount.path.join(self.scenario_name(index, scenario_id));
        let staging = self.staging_path(&dir, index, scenario_id);
        ScenarioPaths::in_dir(dir, staging)
    }

    fn scenario_name(&self, index: usize, scenario_id: &str) -> String {
        let slug: String =
            scenario_id.chars().take(60).map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        format!("{}{index:04}-{slug}", self.prefix)
    }

    fn staging_path(&self, dir: &Path, index: usize, scenario_id: &str) -> PathBuf {
        match &self.staging {
            Some(root) => root.path.join(self.scenario_name(index, scenario_id)),
            None => dir.join("staging"),
        }
    }

    /// Makes scenario number `index`'s directory (the parent of its target paths) and staging
    /// path. The target paths themselves are left for the plugin to create, as the spec says.
    pub(crate) async fn scenario(&self, index: usize, scenario_id: &str) -> Result<ScenarioPaths, PathError> {
        let dir = self.make(Kind::Mount, &self.mount.path.join(self.scenario_name(index, scenario_id))).await?;
        let staging_path = self.staging_path(&dir, index, scenario_id);
        let staging = match self.make(Kind::Staging, &staging_path).await {
            Ok(path) => path,
            Err(e) => {
                self.remove(Kind::Mount, &dir).await;
                return Err(e);
            }
        };
        Ok(ScenarioPaths::in_dir(dir, staging))
    }

    /// Removes a scenario's paths: what the plugin left at its target paths (only empty
    /// directories and plain files; a remove command removes the whole parent itself), its
    /// staging path and its directory.
    pub(crate) async fn release(&self, paths: &ScenarioPaths, own: &[PathBuf]) {
        self.release_own(own);
        if self.remove_cmd(Kind::Mount).is_none() {
            remove_own_path(&paths.target2);
            remove_own_path(&paths.target);
        }
        self.remove(Kind::Staging, &paths.staging).await;
        self.remove(Kind::Mount, &paths.dir).await;
    }

    /// Removes paths checks made inside a scenario's directory (another node's staging and
    /// targets), innermost first, with the same care as ours.
    ///
    /// Deepest first, whatever order they were recorded in: checks that made two volumes'
    /// paths under one shared parent record the parent with the first volume.
    pub(crate) fn release_own(&self, own: &[PathBuf]) {
        let mut order: Vec<&PathBuf> = own.iter().collect();
        order.sort_by(|a, b| b.components().count().cmp(&a.components().count()).then(a.cmp(b)));
        order.dedup();
        for path in order {
            remove_own_path(path);
        }
    }

    /// Removes the roots this run made (the run's own directory stays journaled when it
    /// could not be removed, for `cleanup`).
    pub(crate) async fn close(&self) {
        for (kind, root) in [(Kind::Staging, self.staging.as_ref()), (Kind::Mount, Some(&self.mount))] {
            if let Some(root) = root.filter(|r| r.made) {
                self.remove(kind, &root.path).await;
            }
        }
        self.settle_dir();
    }
}

/// Runs `<cmd> <path>` (no shell, as csi-sanity does) within `timeout` (set by the flag
/// `bound.1`); returns its stdout.
async fn run_path_cmd(cmd: &Path, path: &Path, bound: (Duration, &str)) -> Result<String, PathError> {
    let (timeout, flag) = bound;
    let fail = |reason: String| PathError::Command { cmd: cmd.to_owned(), path: path.to_owned(), reason };
    let child = tokio::process::Command::new(cmd)
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(timeout, child).await {
        Err(_) => return Err(fail(format!("did not finish within {} ({flag})", crate::client::human_duration(timeout)))),
        Ok(Err(e)) => return Err(fail(format!("cannot run it: {e}"))),
        Ok(Ok(output)) => output,
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
        let said = if said.is_empty() { String::new() } else { format!(": {said}") };
        return Err(fail(format!("{}{said}", output.status)));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Removes a path we made on this host if it is an empty directory or a plain file; anything
/// else (a mount still there, files the plugin left) is left and logged.
pub(crate) fn remove_own_path(path: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return };
    let result = if meta.is_dir() { std::fs::remove_dir(path) } else { std::fs::remove_file(path) };
    if let Err(e) = result {
        tracing::warn!(path = %path.display(), "left behind: {e}");
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[tokio::test]
    async fn default_paths_live_in_a_run_directory_that_goes_away() {
        let work = tempfile::tempdir().unwrap();
        let paths = RunPaths::open(&PathSettings::default(), work.path(), "abc").await.unwrap();
        let s = paths.scenario(3, "node.stage volume").await.unwrap();
        assert!(s.dir.ends_with("0003-node_stage_volume"), "{}", s.dir.display());
        assert_eq!(s.staging, s.dir.join("staging"));
        assert!(s.staging.is_dir() && !s.target.exists());
        std::fs::create_dir(&s.target).unwrap();
        paths.release(&s, &[]).await;
        assert!(!s.dir.exists());
        paths.close().await;
        assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0);
    }

    /// Two volumes' paths under one shared parent, recorded parent-first with the first
    /// volume (as an orchestrator's layout does): all of it goes, the scenario directory too.
    #[tokio::test]
    async fn paths_checks_made_go_deepest_first_whatever_order_they_were_recorded_in() {
        let work = tempfile::tempdir().unwrap();
        let paths = RunPaths::open(&PathSettings::default(), work.path(), "abc").await.unwrap();
        let s = paths.scenario(0, "two volumes").await.unwrap();
        let co = s.dir.join("co");
        let (parent, one, two) = (co.join("staging"), co.join("staging/v1"), co.join("staging/v2"));
        for dir in [&co, &parent, &one, &two] {
            std::fs::create_dir(dir).unwrap();
        }
        paths.release(&s, &[one.clone(), parent.clone(), co.clone(), two.clone(), one]).await;
        assert!(!s.dir.exists(), "{:?}", std::fs::read_dir(&s.dir).map(|d| d.count()));
        paths.close().await;
        assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn given_roots_hold_one_directory_per_scenario_and_existing_roots_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let mount = tmp.path().join("mount");
        std::fs::create_dir(&mount).unwrap();
        let staging = tmp.path().join("staging");
        let settings = PathSettings { mount_dir: Some(mount.clone()), staging_dir: Some(staging.clone()), ..PathSettings::default() };
        let paths = RunPaths::open(&settings, tmp.path(), "r1").await.unwrap();
        let a = paths.scenario(0, "a").await.unwrap();
        let b = paths.scenario(1, "b").await.unwrap();
        assert_eq!(a.dir, mount.join("r1-0000-a"));
        assert_eq!(a.target, mount.join("r1-0000-a/target"));
        assert_eq!(b.staging, staging.join("r1-0001-b"));
        assert!(a.staging.is_dir() && b.dir.is_dir());
        paths.release(&a, &[]).await;
        paths.release(&b, &[]).await;
        paths.close().await;
        assert!(mount.is_dir(), "a root that existed before is kept");
        assert!(!staging.exists(), "a root this run made is removed");
    }

    #[tokio::test]
    async fn path_commands_make_and_remove_paths_and_their_failures_are_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("log");
        let log_s = log.display();
        // `mkdir` one level at a time, as a `kubectl exec ... mkdir` script would, and a path
        // printed that differs from the one given: the printed one is used.
        let create = script(tmp.path(), "create", &format!("echo create \"$1\" >> '{log_s}'; mkdir \"$1.d\" && echo \"  $1.d  \""));
        let remove = script(tmp.path(), "remove", &format!("echo remove \"$1\" >> '{log_s}'; rmdir \"$1\""));
        let (m, st) = (tmp.path().join("m"), tmp.path().join("s"));
        let settings = PathSettings {
            mount_dir: Some(m.clone()),
            staging_dir: Some(st.clone()),
            create_mount_cmd: Some(create.clone()),
            create_staging_cmd: Some(create.clone()),
            remove_mount_cmd: Some(remove.clone()),
            remove_staging_cmd: Some(remove.clone()),
            ..PathSettings::default()
        };
        let paths = RunPaths::open(&settings, tmp.path(), "r").await.unwrap();
        let s = paths.scenario(2, "x").await.unwrap();
        let (m, st) = (m.display(), st.display());
        assert_eq!(s.dir, PathBuf::from(format!("{m}.d/r-0002-x.d")), "the command's stdout, trimmed");
        assert_eq!(s.staging, PathBuf::from(format!("{st}.d/r-0002-x.d")));
        assert_eq!(s.target, s.dir.join("target"));
        assert!(s.dir.is_dir() && s.staging.is_dir());
        paths.release(&s, &[]).await;
        paths.close().await;
        assert!(!s.dir.exists() && !s.staging.exists());
        let lines = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            lines,
            format!("create {m}\ncreate {st}\ncreate {m}.d/r-0002-x\ncreate {st}.d/r-0002-x\nremove {st}.d/r-0002-x.d\nremove {m}.d/r-0002-x.d\nremove {st}.d\nremove {m}.d\n")
        );
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 3, "only the scripts and the log are left");

        let failing = script(tmp.path(), "failing", "echo 'no such pod' >&2; exit 3");
        let settings = PathSettings { create_mount_cmd: Some(failing), ..PathSettings::default() };
        let e = RunPaths::open(&settings, tmp.path(), "r").await.unwrap_err().to_string();
        assert!(e.contains("exit status: 3: no such pod"), "{e}");
        let silent = script(tmp.path(), "silent", "true");
        let settings = PathSettings { create_staging_cmd: Some(silent), ..PathSettings::default() };
        let paths = RunPaths::open(&settings, tmp.path(), "r").await.unwrap();
        let e = paths.scenario(0, "y").await.unwrap_err().to_string();
        assert!(e.contains("printed no path"), "{e}");
        paths.close().await;
        let slow = script(tmp.path(), "slow", "sleep 5");
        let settings = PathSettings { create_mount_cmd: Some(slow), create_timeout: Duration::from_millis(100), ..PathSettings::default() };
        let e = RunPaths::open(&settings, tmp.path(), "r").await.unwrap_err().to_string();
        assert!(e.contains("did not finish within 100ms (--create-path-cmd-timeout)"), "{e}");
    }
}
