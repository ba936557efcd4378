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
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(JournalError::Io { path: path.to_owned(), source }),
    };
    let lines: Vec<String> = BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(|source| JournalError::Io { path: path.to_owned(), source })?;
    let mut open: BTreeMap<usize, (String, Outstanding)> = BTreeMap::new();
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
                open.insert(n, (id, Outstanding::Call(call)));
            }
            Ok(Entry::Created { id, record, replaces }) => {
                if let Some(call) = replaces {
                    settle(&call, &mut open, &mut index);
                }
                index.insert(id.clone(), n);
                open.insert(n, (id, Outstanding::Resource(record)));
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
    let open = outstanding(path)?;
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
                Outstanding::Call(call) => Entry::Sending { id: id.clone(), call: call.clone() },
                Outstanding::Resource(record) => Entry::Created { id: id.clone(), record: record.clone(), replaces: None },
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(id: &str) -> Record {
        Record {
            endpoint: "unix:///x.sock".into(),
            scenario: "s.x".into(),
            secrets_key: Some("CreateVolumeSecret".into()),
            undo_secrets_key: Some("DeleteVolumeSecret".into()),
            name: Some(format!("name-{id}")),
            resource: Resource::Volume { volume_id: id.into() },
        }
    }

    fn names(path: &Path) -> Vec<String> {
        outstanding(path).unwrap().iter().map(|(_, o)| o.to_string()).collect()
    }

    #[test]
    fn created_minus_done_is_outstanding_in_creation_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/journal.jsonl");
        let j = Journal::open(&path, "run1").unwrap();
        let a = j.created(&volume("a")).unwrap();
        let _b = j.created(&volume("b")).unwrap();
        let c = j.created(&volume("c")).unwrap();
        j.done(&a).unwrap();
        assert_eq!(
            names(&path),
            ["volume b (name-b) on unix:///x.sock (scenario s.x)", "volume c (name-c) on unix:///x.sock (scenario s.x)"]
        );
        mark_done(&path, &[c]).unwrap();
        assert_eq!(outstanding(&path).unwrap().len(), 1);
        // A second run appends to the same file with ids of its own.
        let j2 = Journal::open(&path, "run2").unwrap();
        let d = j2.created(&volume("d")).unwrap();
        assert!(d.starts_with("run2:"));
        assert_eq!(outstanding(&path).unwrap().len(), 2);
    }

    #[test]
    fn compaction_keeps_what_is_outstanding_with_its_id_and_waits_for_other_writers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let a = Journal::open(&path, "a").unwrap();
        let kept = a.created(&volume("kept")).unwrap();
        let gone = a.created(&volume("gone")).unwrap();
        a.done(&gone).unwrap();
        let b = Journal::open(&path, "b").unwrap();
        assert_eq!(a.compact().unwrap(), None, "another run still writes to it");
        assert_eq!(compact(&path).unwrap(), None);
        let from_b = b.created(&volume("from-b")).unwrap();
        drop(b);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 4, "nothing was lost meanwhile");
        assert_eq!(a.compact().unwrap(), Some(2));
        let ids: Vec<String> = outstanding(&path).unwrap().into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, [kept.clone(), from_b]);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
        // The shared lock is back: a compaction from elsewhere waits for this run.
        assert_eq!(compact(&path).unwrap(), None);
        drop(a);
        mark_done(&path, &[kept]).unwrap();
        assert_eq!(compact(&path).unwrap(), Some(1));
        assert_eq!(names(&path), ["volume from-b (name-from-b) on unix:///x.sock (scenario s.x)"]);
        std::fs::write(dir.path().join(".j.jsonl.999999.tmp"), "half a rewrite").unwrap();
        let missing = dir.path().join("none.jsonl");
        assert_eq!(compact(&missing).unwrap(), Some(0));
        assert!(!missing.exists(), "no journal is made where there was none");
        assert_eq!(compact(&path).unwrap(), Some(1), "what a killed rewrite left goes");
        let left: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert!(!left.iter().any(|n| n.ends_with(".tmp")), "{left:?}");
    }

    #[test]
    fn a_call_is_outstanding_until_answered_or_settled_by_what_it_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let j = Journal::open(&path, "r").unwrap();
        let call = |name: &str| CallRecord {
            endpoint: "unix:///x.sock".into(),
            scenario: "s.x".into(),
            secrets_key: None,
            rpc: "CreateVolume".into(),
            node: 0,
            request: serde_json::json!({ "name": name }),
        };
        let answered = j.sending(&call("a")).unwrap();
        let created = j.sending(&call("b")).unwrap();
        let _lost = j.sending(&call("c")).unwrap();
        j.done(&answered).unwrap();
        j.created_by(&volume("b"), Some(&created)).unwrap();
        assert_eq!(
            names(&path),
            [
                "unanswered CreateVolume of c on unix:///x.sock (scenario s.x)",
                "volume b (name-b) on unix:///x.sock (scenario s.x)"
            ]
        );
    }

    #[test]
    fn a_torn_last_line_is_ignored_but_corruption_elsewhere_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let j = Journal::open(&path, "r").unwrap();
        j.created(&volume("a")).unwrap();
        drop(j);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"op\":\"created\",\"id\":\"r:2\",\"reso").unwrap();
        assert_eq!(outstanding(&path).unwrap().len(), 1);
        f.write_all(b"\n{\"op\":\"done\",\"id\":\"r:1\"}\n").unwrap();
        let e = outstanding(&path).unwrap_err();
        assert!(e.to_string().contains("j.jsonl:2: not a journal entry"), "{e}");
    }

    #[test]
    fn a_missing_journal_has_nothing_outstanding() {
        assert!(outstanding(Path::new("/nonexistent/journal.jsonl")).unwrap().is_empty());
    }

    #[test]
    fn what_the_plugin_lost_or_kept_is_settled_and_never_undone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let j = Journal::open(&path, "r").unwrap();
        let call = CallRecord {
            endpoint: "unix:///x.sock".into(),
            scenario: "s.x".into(),
            secrets_key: None,
            rpc: "CreateVolume".into(),
            node: 0,
            request: serde_json::json!({ "name": "lost" }),
        };
        let lost = j.sending(&call).unwrap();
        let kept = j.created(&volume("kept")).unwrap();
        let _open = j.created(&volume("open")).unwrap();
        assert_eq!(outstanding(&path).unwrap().len(), 3);
        j.lost_by_plugin(&lost, &call, "answered OK with an empty volume id").unwrap();
        j.kept_by_plugin(&kept, "still listed after the delete").unwrap();
        assert_eq!(names(&path), ["volume open (name-open) on unix:///x.sock (scenario s.x)"]);
        // What the plugin answered is written down for the operator.
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("empty volume id") && text.contains("still listed"), "{text}");
    }

    #[test]
    fn a_journal_that_cannot_be_opened_is_an_error_not_an_empty_one() {
        // Only a missing journal has nothing outstanding: any other failure to open it (here a
        // path through a regular file) must not read as "nothing to clean up".
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, "").unwrap();
        let e = outstanding(&file.join("journal.jsonl")).unwrap_err();
        assert!(matches!(e, JournalError::Io { .. }), "{e}");
    }

    #[test]
    fn what_is_outstanding_is_undone_publications_first_whether_made_or_only_asked_for() {
        // cleanup sorts by this rank: a volume deleted before its publication is undone fails.
        let call = |rpc: &str| {
            Outstanding::Call(CallRecord {
                endpoint: "unix:///x.sock".into(),
                scenario: "s.x".into(),
                secrets_key: None,
                rpc: rpc.into(),
                node: 0,
                request: serde_json::json!({}),
            })
        };
        let published = Record {
            resource: Resource::NodePublication { volume_id: "a".into(), target_path: "/t".into(), node: 0 },
            ..volume("a")
        };
        let ranks = [
            Outstanding::Resource(published).undo_rank(),
            call("NodePublishVolume").undo_rank(),
            call("NodeStageVolume").undo_rank(),
            Outstanding::Resource(volume("a")).undo_rank(),
            call("CreateVolume").undo_rank(),
        ];
        assert_eq!(ranks, [0, 0, 1, 3, 3]);
    }

    /// What a run's engine tells the observer is what the journal holds: each call and each
    /// resource at the endpoint that serves it (controller RPCs at the controller, node RPCs
    /// at their own node), settled by its answer, its release, or the plugin's own account.
    #[test]
    fn the_observer_journals_each_call_and_resource_at_the_endpoint_that_serves_it() {
        use crate::suite::{ResourceObserver as _, Sending, Tracked};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let observer = JournalObserver::new(
            Journal::open(&path, "r").unwrap(),
            Some("unix:///controller.sock".into()),
            vec!["unix:///node0.sock".into(), "unix:///node1.sock".into()],
        );
        let sending = |seq: u64, rpc: &str, name: &str| {
            let mut request = prost_reflect::DynamicMessage::new(crate::proto::method(rpc).unwrap().input());
            if !name.is_empty() {
                request.set_field_by_name("name", prost_reflect::Value::String(name.into()));
            }
            Sending { seq, scenario: "s.x".into(), rpc: rpc.into(), request, node: 1, secrets_key: None }
        };
        let tracked = |seq: u64, resource: Resource| Tracked {
            seq,
            scenario: "s.x".into(),
            resource,
            secrets_key: None,
            name: None,
        };
        let volume = |id: &str| Resource::Volume { volume_id: id.into() };

        let (create, stage) = (sending(1, "CreateVolume", "a"), sending(2, "NodeStageVolume", ""));
        observer.sending(&create);
        observer.sending(&stage);
        assert_eq!(
            names(&path),
            [
                "unanswered CreateVolume of a on unix:///controller.sock (scenario s.x)",
                "unanswered NodeStageVolume on unix:///node1.sock (scenario s.x)"
            ],
            "a call is journaled before it is sent, where its undo call must go"
        );
        observer.registered(&tracked(1, volume("v1")));
        observer.answered(&create);
        observer.answered(&stage);
        assert_eq!(names(&path), ["volume v1 on unix:///controller.sock (scenario s.x)"], "answered calls are settled");

        let (lost, unanswered) = (sending(3, "CreateVolume", "lost"), sending(4, "CreateVolume", "unheard"));
        observer.sending(&lost);
        observer.lost(&lost, "answered OK with an empty volume id");
        observer.sending(&unanswered);
        observer.unanswered(&unanswered);
        observer.registered(&tracked(5, volume("v5")));
        observer.kept(&tracked(5, volume("v5")), "still listed after its delete");
        observer.released(&tracked(1, volume("v1")));
        assert_eq!(
            names(&path),
            ["unanswered CreateVolume of unheard on unix:///controller.sock (scenario s.x)"],
            "released, lost and kept are settled; only the unanswered call stays for cleanup"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("empty volume id") && text.contains("still listed"), "{text}");
    }

    /// What stays in the journal after a run is said to the operator when it happens: an
    /// unanswered call, and what teardown could not release.
    #[test]
    fn the_observer_tells_the_operator_what_stays_for_cleanup() {
        use crate::suite::{ResourceObserver as _, Sending, Tracked};
        #[derive(Clone, Default)]
        struct Log(std::sync::Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Log {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let observer = JournalObserver::new(Journal::open(&path, "r").unwrap(), Some("unix:///c.sock".into()), vec![]);
        let call = Sending {
            seq: 1,
            scenario: "s.x".into(),
            rpc: "CreateVolume".into(),
            request: prost_reflect::DynamicMessage::new(crate::proto::method("CreateVolume").unwrap().input()),
            node: 0,
            secrets_key: None,
        };
        let volume = Tracked {
            seq: 2,
            scenario: "s.x".into(),
            resource: Resource::Volume { volume_id: "v2".into() },
            secrets_key: None,
            name: None,
        };
        let log = Log::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        tracing::subscriber::with_default(subscriber, || {
            observer.sending(&call);
            observer.unanswered(&call);
            observer.registered(&volume);
            observer.left_behind(&volume, "its delete failed: INTERNAL");
        });
        let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.contains("CreateVolume of scenario s.x was never answered; it stays in the journal for `csi-conform cleanup`"),
            "{text}"
        );
        assert!(
            text.contains("volume v2 left on the plugin (its delete failed: INTERNAL); it stays in the journal"),
            "{text}"
        );
        assert_eq!(outstanding(&path).unwrap().len(), 2, "both stay for cleanup");
    }

    /// A re-send must be the request the plugin saw: the journal keeps mount flags (mode
    /// 0600), and never a secret.
    #[test]
    fn a_call_is_journaled_with_its_mount_flags_and_without_its_secrets_readable_by_its_owner_alone() {
        use crate::suite::{ResourceObserver as _, Sending};
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let observer = JournalObserver::new(Journal::open(&path, "r").unwrap(), Some("unix:///c.sock".into()), vec![]);
        let request = crate::proto::v1::CreateVolumeRequest {
            name: "v".into(),
            secrets: [("password".to_owned(), "hunter2-Zq".to_owned())].into(),
            volume_capabilities: vec![crate::proto::v1::VolumeCapability {
                access_type: Some(crate::proto::v1::volume_capability::AccessType::Mount(
                    crate::proto::v1::volume_capability::MountVolume {
                        fs_type: "xfs".into(),
                        mount_flags: vec!["nodev".into(), "uid=1000".into()],
                        volume_mount_group: String::new(),
                    },
                )),
                access_mode: None,
            }],
            ..Default::default()
        };
        let call = Sending {
            seq: 1,
            scenario: "s.x".into(),
            rpc: "CreateVolume".into(),
            request: crate::proto::to_dynamic(&request),
            node: 0,
            secrets_key: Some("CreateVolumeSecret".into()),
        };
        observer.sending(&call);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("hunter2") && !text.contains("password"), "{text}");
        let outstanding = outstanding(&path).unwrap();
        let Outstanding::Call(journaled) = &outstanding[0].1 else { panic!("{outstanding:?}") };
        let flags = &journaled.request["volume_capabilities"][0]["mount"]["mount_flags"];
        assert_eq!(flags, &serde_json::json!(["nodev", "uid=1000"]), "{text}");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    /// No empty `<journal>.lock` stays beside the journal once nobody uses it, and a lock
    /// taken on a lock file since removed is taken again on the one now there.
    #[test]
    fn the_lock_file_goes_with_its_last_user() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let lock = dir.path().join("j.jsonl.lock");
        let a = Journal::open(&path, "a").unwrap();
        let b = Journal::open(&path, "b").unwrap();
        drop(a);
        assert!(lock.exists(), "another run still writes");
        assert_eq!(compact(&path).unwrap(), None, "and still holds it");
        drop(b);
        assert!(!lock.exists(), "the last user removes it");
        let c = Journal::open(&path, "c").unwrap();
        c.created(&volume("x")).unwrap();
        assert_eq!(compact(&path).unwrap(), None, "a run holds the new lock file");
        drop(c);
        assert_eq!(compact(&path).unwrap(), Some(1));
        assert!(!lock.exists(), "a cleanup's compaction removes it too");
    }

    #[test]
    fn compaction_removes_only_its_own_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        Journal::open(&path, "r").unwrap().created(&volume("a")).unwrap();
        // A directory shared with other files: another tool's temporary file, and one of
        // another journal's rewrites, are not this journal's to remove.
        for other in ["download.tmp", ".k.jsonl.1.tmp"] {
            std::fs::write(dir.path().join(other), "not ours").unwrap();
        }
        assert_eq!(compact(&path).unwrap(), Some(1));
        for other in ["download.tmp", ".k.jsonl.1.tmp"] {
            assert!(dir.path().join(other).exists(), "{other} was removed");
        }
    }
}
