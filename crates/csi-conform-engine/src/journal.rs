//! The cleanup journal: an append-only JSON-lines file where every resource a run creates is
//! written (with one unbuffered write, so the death of the process cannot lose it) before the run
//! relies on it, and marked done when torn down.
//! Whatever a crash, SIGKILL or timeout leaves behind, `csi-conform cleanup` reads from here.
//!
//! It does not grow with history: at the end of a run (and of a `cleanup`) it is rewritten to
//! what is still outstanding, through a temporary file renamed over it in the same directory,
//! so a reader sees either the old lines or the new ones. Runs that share a journal hold a
//! shared `flock` on `<journal>.lock` while they write; the rewrite takes it exclusively and is
//! left for later when another run still holds it (whose appends would go to the replaced
//! file otherwise).
//!
//! A call that creates something is journaled *before* it is sent (`sending`), and the
//! resource once the answer names it (`created`): a run killed while the plugin was still
//! working leaves the call behind, and `cleanup` repeats it to learn what it made (creation is
//! idempotent by name in CSI) before undoing that.
//!
//! Only resources in the journal are ever cleaned up: nothing is discovered by listing the
//! plugin. Entries hold ids, names, paths and the *name* of the secrets key that deletes a
//! resource, never secret values: requests are written with every secret field cleared, and
//! with their mount flags (what an identical re-send needs; they may carry data, so the
//! journal is readable by its owner alone, mode 0600).

use std::{
    collections::BTreeMap,
    fs::{File, OpenOptions},
    io::{BufRead, BufReader, Write},
    os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
    sync::Mutex,
};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use crate::suite::Resource;

/// A resource a run created, with what it takes to undo it: where the undo call goes and
/// which secrets-file key it needs (a name, never values).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The endpoint the undo call goes to: the controller's for volumes, snapshots and
    /// controller publications, the node's for stagings and node publications.
    pub endpoint: String,
    /// The scenario that created it.
    pub scenario: String,
    /// The secrets-file key the creating call used, if it sent secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_key: Option<String>,
    /// The secrets-file key whose secrets the undo call sends (set when the creating call
    /// sent secrets; a name, never values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_secrets_key: Option<String>,
    /// The name the creating request gave it (volumes, snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it is.
    pub resource: Resource,
}

/// A call that may create something, written before it is sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The endpoint the call goes to.
    pub endpoint: String,
    /// The scenario making it.
    pub scenario: String,
    /// The secrets-file key it uses, if it sends secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_key: Option<String>,
    /// The RPC.
    pub rpc: String,
    /// Which node endpoint (node RPCs).
    #[serde(default)]
    pub node: usize,
    /// The request with every secret field cleared (mount flags kept), as proto JSON with field names.
    pub request: serde_json::Value,
}

/// Something a journal still lists: a resource, or a call whose answer was never heard.
#[derive(Debug, Clone, PartialEq)]
pub enum Outstanding {
    /// A resource that exists until undone.
    Resource(Record),
    /// A call that may have created something.
    Call(CallRecord),
}

impl Outstanding {
    /// The endpoint it lives on.
    pub fn endpoint(&self) -> &str {
        match self {
            Outstanding::Resource(r) => &r.endpoint,
            Outstanding::Call(c) => &c.endpoint,
        }
    }

    /// The scenario that made it.
    pub fn scenario(&self) -> &str {
        match self {
            Outstanding::Resource(r) => &r.scenario,
            Outstanding::Call(c) => &c.scenario,
        }
    }

    /// Where it comes in the undo order (see [`Resource::undo_rank`]).
    pub fn undo_rank(&self) -> u8 {
        match self {
            Outstanding::Resource(r) => r.resource.undo_rank(),
            Outstanding::Call(c) => Resource::undo_rank_of(&c.rpc),
        }
    }
}

impl std::fmt::Display for Outstanding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outstanding::Resource(r) => {
                write!(f, "{}", r.resource)?;
                if let Some(name) = &r.name {
                    write!(f, " ({name})")?;
                }
            }
            Outstanding::Call(c) => {
                write!(f, "unanswered {}", c.rpc)?;
                if let Some(name) = c.request.get("name").and_then(|n| n.as_str()) {
                    write!(f, " of {name}")?;
                }
            }
        }
        write!(f, " on {} (scenario {})", self.endpoint(), self.scenario())
    }
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Entry {
    /// A call that may create something is about to be sent.
    Sending {
        /// Unique within the journal: `<run id>:<sequence>`.
        id: String,
        /// The call.
        call: CallRecord,
    },
    /// A resource now exists.
    Created {
        /// Unique within the journal: `<run id>:<sequence>`.
        id: String,
        /// The resource.
        record: Record,
        /// The `sending` entry of the call that created it, settled by this entry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replaces: Option<String>,
    },
    /// The resource with this id is gone.
    Done {
        /// The id of the `created` entry.
        id: String,
    },
    /// A creating call was answered OK without a usable id: what it made is left behind by
    /// the plugin, out of reach of any CSI call, and `cleanup` does not try it again.
    LostByPlugin {
        /// The id of the call's `sending` entry, settled by this one.
        id: String,
        /// The call.
        call: CallRecord,
        /// What the plugin answered.
        why: String,
    },
    /// A delete of the resource with this id was answered OK, yet the plugin still showed it
    /// (found or listed) after the grace period: it is left behind by the plugin, and `cleanup`
    /// does not try it again (a second delete only answers OK again).
    KeptByPlugin {
        /// The id of the `created` entry, settled by this one.
        id: String,
        /// What the plugin answered, and where it still showed.
        why: String,
    },
    /// The run is about to make its own directory (`run-<id>-<pid>` under the work
    /// directory), written before `mkdir`: `cleanup` removes it when empty once nothing else
    /// of the run is outstanding, and a `done` entry settles it once the run removed it (or
    /// found it was not its own to make).
    RunDir {
        /// Unique within the journal: `<run id>:<sequence>`.
        id: String,
        /// The directory.
        path: PathBuf,
    },
}

/// Why the journal could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// An I/O error on the journal file.
    #[error("journal {path}: {source}", path = path.display())]
    Io {
        /// The journal file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A line that is not a journal entry (other than a torn last line).
    #[error("journal {path}:{line}: not a journal entry: {reason}", path = path.display())]
    Corrupt {
        /// The journal file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// An open journal that a run appends to. Cheap to share (`&Journal` is `Sync`).
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    run_id: String,
    state: Mutex<(File, u64)>,
    /// A shared lock on `<journal>.lock` for as long as the run writes.
    lock: Flock<File>,
}

impl Journal {
    /// Opens (creating it and its directory if needed) the journal at `path` for a run.
    pub fn open(path: &Path, run_id: &str) -> Result<Self, JournalError> {
        let io = |source| JournalError::Io { path: path.to_owned(), source };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let lock = lock_file(path, FlockArg::LockShared)?.ok_or_else(|| io(std::io::ErrorKind::WouldBlock.into()))?;
        let file = OpenOptions::new().create(true).append(true).mode(0o600).open(path).map_err(io)?;
        // It holds mount flags, which may carry data: for its owner alone, whoever made it.
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
        Ok(Journal {
            path: path.to_owned(),
            run_id: run_id.to_owned(),
            state: Mutex::new((file, 0)),
            lock,
        })
    }

    /// Rewrites the journal to what is still outstanding (see [`compact`]); call it after
    /// the run's last record. `Ok(None)`: another run still writes to it, so it is left as it
    /// is (that run compacts it when it ends).
    pub fn compact(&self) -> Result<Option<usize>, JournalError> {
        if self.lock.relock(FlockArg::LockExclusiveNonblock).is_err() {
            // A failed conversion may have dropped the shared lock (flock(2)): take it again.
            let _ = self.lock.relock(FlockArg::LockShared);
            return Ok(None);
        }
        let _state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let kept = rewrite(&self.path);
        // Back to shared: this journal may still be written to (nothing is lost if not).
        let _ = self.lock.relock(FlockArg::LockShared);
        kept.map(Some)
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records that `resource` exists; returns the id to mark it done with. The line has
    /// reached the kernel when this returns (see [`write_entry`]).
    pub fn created(&self, record: &Record) -> Result<String, JournalError> {
        self.created_by(record, None)
    }

    /// Like [`Journal::created`], also settling the `sending` entry `replaces` of the call
    /// that created it, in the same line (so no crash can leave both or neither).
    pub fn created_by(&self, record: &Record, replaces: Option<&str>) -> Result<String, JournalError> {
        self.append(|id| Entry::Created { id, record: record.clone(), replaces: replaces.map(str::to_owned) })
    }

    /// Records a call that may create something, before it is sent; returns the id to mark
    /// it done with once answered.
    pub fn sending(&self, call: &CallRecord) -> Result<String, JournalError> {
        self.append(|id| Entry::Sending { id, call: call.clone() })
    }

    fn append(&self, entry: impl FnOnce(String) -> Entry) -> Result<String, JournalError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.1 += 1;
        let id = format!("{}:{}", self.run_id, state.1);
        write_entry(&self.path, &mut state.0, &entry(id.clone()))?;
        Ok(id)
    }

    /// Records that the call of `sending` entry `id` made something the plugin holds out of
    /// reach (answered OK without a usable id): settled, never undone.
    pub fn lost_by_plugin(&self, id: &str, call: &CallRecord, why: &str) -> Result<(), JournalError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let entry = Entry::LostByPlugin { id: id.to_owned(), call: call.clone(), why: why.to_owned() };
        write_entry(&self.path, &mut state.0, &entry)
    }

    /// Records that a delete of the resource with `id` was answered OK but the plugin keeps
    /// it: settled, never undone.
    pub fn kept_by_plugin(&self, id: &str, why: &str) -> Result<(), JournalError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        write_entry(&self.path, &mut state.0, &Entry::KeptByPlugin { id: id.to_owned(), why: why.to_owned() })
    }

    /// Records that the run is about to make its directory `path`; returns the id to mark it
    /// done with once removed (or not made after all).
    pub fn run_dir(&self, path: &Path) -> Result<String, JournalError> {
        self.append(|id| Entry::RunDir { id, path: path.to_owned() })
    }

    /// Records that the resource with `id` is gone.
    pub fn done(&self, id: &str) -> Result<(), JournalError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        write_entry(&self.path, &mut state.0, &Entry::Done { id: id.to_owned() })
    }
}

/// Appends one line with a single unbuffered write to an `O_APPEND` file: once it returns,
/// the line is in the kernel, so the death of this process (SIGKILL, a panic, the OOM killer)
/// cannot lose it, which is what the journal is for. It is not fsync'd: that would only add
/// durability across a crash of the whole machine, at the price of a disk flush per record
/// (thousands per run, with property steps creating a volume per case).
fn write_entry(path: &Path, file: &mut File, entry: &Entry) -> Result<(), JournalError> {
    let mut line = serde_json::to_string(entry).expect("journal entries serialise");
    line.push('\n');
    file.write_all(line.as_bytes()).map_err(|source| JournalError::Io { path: path.to_owned(), source })
}

/// Reads a journal and returns what is created (or being created) and not yet done, oldest
/// first. A missing file has nothing outstanding. A torn last line (a crash mid-write) is
/// ignored; any other malformed line is an error naming its line.
pub fn outstanding(path: &Path) -> Result<Vec<(String, Outstanding)>, JournalError> {
    Ok(read_open(path)?.into_iter().filter_map(|(id, open)| match open {
        Open::Item(item) => Some((id, item)),
        Open::RunDir(_) => None,
    }).collect())
}

/// The run directories the journal at `path` names and no `done` entry settled, oldest first,
/// with their ids (see [`Entry::RunDir`]).
pub fn run_dirs(path: &Path) -> Result<Vec<(String, PathBuf)>, JournalError> {
    Ok(read_open(path)?.into_iter().filter_map(|(id, open)| match open {
        Open::RunDir(dir) => Some((id, dir)),
        Open::Item(_) => None,
    }).collect())
}

/// An entry no `done` entry settled yet.
enum Open {
    Item(Outstanding),
    RunDir(PathBuf),
}

fn read_open(path: &Path) -> Result<Vec<(String, Open)>, JournalError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(JournalError::Io { path: path.to_owned(), source }),
    };
    let lines: Vec<String> = BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(|source| JournalError::Io { path: path.to_owned(), source })?;
    let mut open: BTreeMap<usize, (String, Open)> = BTreeMap::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let settle = |id: &str, open: &mut BTreeMap<usize, _>, index: &mut BTreeMap<String, usize>| {
        if let Some(at) = index.remove(id) {
            open.remove(&at);
        }
    };
    let last = lines.len();
    for (n, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Entry>(line) {
            Ok(Entry::Sending { id, call }) => {
                index.insert(id.clone(), n);
                open.insert(n, (id, Open::Item(Outstanding::Call(call))));
            }
            Ok(Entry::Created { id, record, replaces }) => {
                if let Some(call) = replaces {
                    settle(&call, &mut open, &mut index);
                }
                index.insert(id.clone(), n);
                open.insert(n, (id, Open::Item(Outstanding::Resource(record))));
            }
            Ok(Entry::RunDir { id, path }) => {
                index.insert(id.clone(), n);
                open.insert(n, (id, Open::RunDir(path)));
            }
            Ok(Entry::Done { id } | Entry::LostByPlugin { id, .. } | Entry::KeptByPlugin { id, .. }) => settle(&id, &mut open, &mut index),
            Err(_) if n + 1 == last => {}
            Err(e) => {
                return Err(JournalError::Corrupt {
                    path: path.to_owned(),
                    line: n + 1,
                    reason: e.to_string(),
                });
            }
        }
    }
    Ok(open.into_values().collect())
}

/// The journal's lock file: `<journal>.lock`.
fn lock_path(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Takes the journal's lock file (`<journal>.lock`) with `how`; `None` when a non-blocking
/// attempt finds it held. The last holder removes the file ([`release_lock_file`]), so a
/// lock taken on a file since removed is no lock: it is taken again on the file now there.
fn lock_file(journal: &Path, how: FlockArg) -> Result<Option<Flock<File>>, JournalError> {
    use std::os::unix::fs::MetadataExt as _;
    let path = lock_path(journal);
    let io = |source| JournalError::Io { path: path.clone(), source };
    loop {
        let file = OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(&path).map_err(io)?;
        let lock = match Flock::lock(file, how) {
            Ok(lock) => lock,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => return Ok(None),
            Err((_, errno)) => return Err(io(errno.into())),
        };
        let held = lock.metadata().map_err(io)?;
        match std::fs::metadata(&path) {
            Ok(now) if (now.dev(), now.ino()) == (held.dev(), held.ino()) => return Ok(Some(lock)),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(e)),
        }
    }
}

/// Removes the lock file of `journal` when `lock` (on it) can be held exclusively, i.e. no
/// other run or cleanup uses the journal: nothing is left beside it after a run. Another
/// process that opened the file before it went finds it gone once it holds the lock, and
/// takes it again on a new file (see [`lock_file`]).
fn release_lock_file(journal: &Path, lock: &Flock<File>) {
    if lock.relock(FlockArg::LockExclusiveNonblock).is_ok() {
        let _ = std::fs::remove_file(lock_path(journal));
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        release_lock_file(&self.path, &self.lock);
    }
}

/// Rewrites the journal at `path` to what is still outstanding (the same ids, so `cleanup`
/// and `done` entries still find them), atomically: a temporary file in the same directory,
/// synced, then renamed over it. Returns how many entries it kept; a missing journal stays
/// missing. `Ok(None)`: a run still writes to it, so it is left as it is.
pub fn compact(path: &Path) -> Result<Option<usize>, JournalError> {
    if !path.exists() {
        return Ok(Some(0));
    }
    let Some(lock) = lock_file(path, FlockArg::LockExclusiveNonblock)? else {
        return Ok(None);
    };
    let kept = rewrite(path).map(Some);
    release_lock_file(path, &lock);
    kept
}

/// The rewrite itself; the caller holds the exclusive lock.
fn rewrite(path: &Path) -> Result<usize, JournalError> {
    let open = read_open(path)?;
    let io = |source| JournalError::Io { path: path.to_owned(), source };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    // Under the exclusive lock no other rewrite runs: a temporary file of this journal is
    // what a rewrite killed half-way left.
    if let Ok(entries) = std::fs::read_dir(dir) {
        let prefix = format!(".{file_name}.");
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix) && name.ends_with(".tmp") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let written = (|| {
        let mut text = String::new();
        for (id, item) in &open {
            let entry = match item {
                Open::Item(Outstanding::Call(call)) => Entry::Sending { id: id.clone(), call: call.clone() },
                Open::Item(Outstanding::Resource(record)) => {
                    Entry::Created { id: id.clone(), record: record.clone(), replaces: None }
                }
                Open::RunDir(path) => Entry::RunDir { id: id.clone(), path: path.clone() },
            };
            text.push_str(&serde_json::to_string(&entry).expect("journal entries serialise"));
            text.push('\n');
        }
        let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(io(e));
    }
    Ok(open.len())
}

/// Appends `done` entries for `ids` to the journal at `path` (used by `cleanup`).
pub fn mark_done(path: &Path, ids: &[String]) -> Result<(), JournalError> {
    let journal = Journal::open(path, "cleanup")?;
    ids.iter().try_for_each(|id| journal.done(id))
}

/// Records every resource the suite engine creates and releases in a [`Journal`].
#[derive(Debug)]
pub struct JournalObserver {
    journal: Journal,
    controller: Option<String>,
    nodes: Vec<String>,
    ids: Mutex<std::collections::HashMap<(String, u64), String>>,
    /// The calls in flight, by scenario and sequence number (a property step makes several
    /// at once), with their journal ids.
    in_flight: Mutex<std::collections::HashMap<(String, u64), String>>,
}

impl JournalObserver {
    /// Journals into `journal`; `controller` and `nodes` are the run's endpoints, so each
    /// record names where its undo call goes.
    pub fn new(journal: Journal, controller: Option<String>, nodes: Vec<String>) -> Self {
        JournalObserver { journal, controller, nodes, ids: Mutex::default(), in_flight: Mutex::default() }
    }

    /// The journal it writes (to [`Journal::compact`] it when the run is over).
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The endpoint of node `node`, or of the controller.
    fn endpoint_of(&self, node: Option<usize>) -> String {
        let endpoint = match node {
            Some(i) => self.nodes.get(i),
            None => self.controller.as_ref(),
        };
        endpoint.cloned().unwrap_or_default()
    }
}

impl JournalObserver {
    /// How `call` is journaled: secrets cleared, mount flags kept.
    fn call_record(&self, call: &crate::suite::Sending) -> CallRecord {
        let node = crate::proto::method(&call.rpc)
            .filter(|m| m.parent_service().name() == "Node")
            .map(|_| call.node);
        // Mount flags stay (a re-send must be the request the plugin saw: the journal is
        // mode 0600); secrets never do (they are read again from the secrets file).
        let request = crate::proto::to_json_value(&crate::proto::without_secrets(&call.request));
        CallRecord {
            endpoint: self.endpoint_of(node),
            scenario: call.scenario.clone(),
            secrets_key: call.secrets_key.clone(),
            rpc: call.rpc.clone(),
            node: call.node,
            request,
        }
    }
}

impl crate::suite::ResourceObserver for JournalObserver {
    fn sending(&self, call: &crate::suite::Sending) {
        let record = self.call_record(call);
        match self.journal.sending(&record) {
            Ok(id) => {
                self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).insert((call.scenario.clone(), call.seq), id);
            }
            Err(e) => tracing::error!("{e}: a {} call is not journaled; `cleanup` cannot find what it makes after a crash", call.rpc),
        }
    }

    fn answered(&self, call: &crate::suite::Sending) {
        let id = self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&(call.scenario.clone(), call.seq));
        if let Some(id) = id
            && let Err(e) = self.journal.done(&id)
        {
            tracing::error!("{e}: the answer to a {} call is not journaled", call.rpc);
        }
    }

    fn lost(&self, call: &crate::suite::Sending, why: &str) {
        let id = self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&(call.scenario.clone(), call.seq));
        if let Some(id) = id
            && let Err(e) = self.journal.lost_by_plugin(&id, &self.call_record(call), why)
        {
            tracing::error!("{e}: what the plugin left behind for a {} call is not journaled", call.rpc);
        }
    }

    fn unanswered(&self, call: &crate::suite::Sending) {
        // The `sending` line stays: `cleanup` asks again what the call made.
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&(call.scenario.clone(), call.seq));
        tracing::warn!(
            "{} of scenario {} was never answered; it stays in the journal for `csi-conform cleanup`",
            call.rpc,
            call.scenario
        );
    }

    fn registered(&self, tracked: &crate::suite::Tracked) {
        let record = Record {
            endpoint: self.endpoint_of(tracked.resource.node()),
            scenario: tracked.scenario.clone(),
            secrets_key: tracked.secrets_key.clone(),
            undo_secrets_key: tracked.secrets_key.as_ref().map(|_| crate::suite::secret_key(tracked.resource.teardown().0)),
            name: tracked.name.clone(),
            resource: tracked.resource.clone(),
        };
        let replaces = self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&(tracked.scenario.clone(), tracked.seq));
        match self.journal.created_by(&record, replaces.as_deref()) {
            Ok(id) => {
                let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
                ids.insert((tracked.scenario.clone(), tracked.seq), id);
            }
            Err(e) => tracing::error!("{e}: {} is not journaled; `cleanup` cannot find it after a crash", tracked.resource),
        }
    }

    fn released(&self, tracked: &crate::suite::Tracked) {
        let id = self.ids.lock().unwrap_or_else(|p| p.into_inner()).remove(&(tracked.scenario.clone(), tracked.seq));
        if let Some(id) = id
            && let Err(e) = self.journal.done(&id)
        {
            tracing::error!("{e}: the release of {} is not journaled", tracked.resource);
        }
    }

    fn kept(&self, tracked: &crate::suite::Tracked, why: &str) {
        let id = self.ids.lock().unwrap_or_else(|p| p.into_inner()).remove(&(tracked.scenario.clone(), tracked.seq));
        if let Some(id) = id
            && let Err(e) = self.journal.kept_by_plugin(&id, why)
        {
            tracing::error!("{e}: that the plugin kept {} is not journaled", tracked.resource);
        }
    }

    fn left_behind(&self, tracked: &crate::suite::Tracked, why: &str) {
        tracing::warn!("{} left on the plugin ({why}); it stays in the journal for `csi-conform cleanup`", tracked.resource);
    }

    fn making_dir(&self, dir: &Path) -> Option<String> {
        self.journal
            .run_dir(dir)
            .inspect_err(|e| tracing::error!("{e}: the run's directory is not journaled; `cleanup` cannot remove it after a crash"))
            .ok()
    }

    fn removed_dir(&self, token: &str) {
        if let Err(e) = self.journal.done(token) {
            tracing::error!("{e}: that the run's directory is gone is not journaled");
        }
    }
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
