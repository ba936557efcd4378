//! The reference plugin's model (volumes, snapshots, group snapshots, per-node stagings and
//! publications) and its persistence: one JSON document, in memory or in a state directory
//! shared by several plugin processes under an exclusive `flock`.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use tonic::Status;

use crate::proto::v1::{self, volume_capability::AccessType, volume_capability::access_mode::Mode};

/// A string map as stored (sorted, so comparisons and JSON are stable).
pub type StringMap = BTreeMap<String, String>;

/// Converts a request map into a stored map.
pub fn to_map(map: &std::collections::HashMap<String, String>) -> StringMap {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Converts a stored map into a response map.
pub fn from_map(map: &StringMap) -> std::collections::HashMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// How a volume is accessed.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Access {
    /// Raw block.
    Block,
    /// A mounted file system.
    Mount {
        /// Requested file system type ("" = default).
        #[serde(default)]
        fs_type: String,
        /// Mount flags (may be sensitive: never logged, never in messages).
        #[serde(default)]
        mount_flags: Vec<String>,
        /// The group that should own the mount.
        #[serde(default)]
        volume_mount_group: String,
    },
}

/// A stored, validated VolumeCapability.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    /// Block or mount.
    pub access: Access,
    /// The AccessMode.Mode value.
    pub mode: i32,
}

impl fmt::Debug for Capability {
    /// Shows the access type, fs type and mode; mount flags only by count.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.access {
            Access::Block => write!(f, "block/{}", self.mode_name()),
            Access::Mount {
                fs_type,
                mount_flags,
                ..
            } => write!(
                f,
                "mount({fs_type:?}, {} flags)/{}",
                mount_flags.len(),
                self.mode_name()
            ),
        }
    }
}

impl Capability {
    /// Validates a request's capability: an access type and a known, non-UNKNOWN mode.
    pub fn from_proto(cap: &v1::VolumeCapability) -> Result<Capability, String> {
        let access = match &cap.access_type {
            None => return Err("has no access_type (block or mount)".into()),
            Some(AccessType::Block(_)) => Access::Block,
            Some(AccessType::Mount(m)) => Access::Mount {
                fs_type: m.fs_type.clone(),
                mount_flags: m.mount_flags.clone(),
                volume_mount_group: m.volume_mount_group.clone(),
            },
        };
        let Some(mode) = cap.access_mode.as_ref() else {
            return Err("has no access_mode".into());
        };
        match Mode::try_from(mode.mode) {
            Ok(Mode::Unknown) => Err("has access mode UNKNOWN".into()),
            Ok(_) => Ok(Capability {
                access,
                mode: mode.mode,
            }),
            Err(_) => Err(format!("has an unknown access mode {}", mode.mode)),
        }
    }

    /// Back to the wire form.
    #[cfg(test)]
    pub fn to_proto(&self) -> v1::VolumeCapability {
        let access_type = match &self.access {
            Access::Block => AccessType::Block(v1::volume_capability::BlockVolume {}),
            Access::Mount {
                fs_type,
                mount_flags,
                volume_mount_group,
            } => AccessType::Mount(v1::volume_capability::MountVolume {
                fs_type: fs_type.clone(),
                mount_flags: mount_flags.clone(),
                volume_mount_group: volume_mount_group.clone(),
            }),
        };
        v1::VolumeCapability {
            access_type: Some(access_type),
            access_mode: Some(v1::volume_capability::AccessMode { mode: self.mode }),
        }
    }

    /// The access mode.
    pub fn mode(&self) -> Mode {
        Mode::try_from(self.mode).unwrap_or(Mode::Unknown)
    }

    /// The access mode's spec name.
    pub fn mode_name(&self) -> &'static str {
        self.mode().as_str_name()
    }

    /// Whether this is block access.
    pub fn is_block(&self) -> bool {
        matches!(self.access, Access::Block)
    }

    /// The requested file system type ("" for block or default).
    pub fn fs_type(&self) -> &str {
        match &self.access {
            Access::Mount { fs_type, .. } => fs_type,
            Access::Block => "",
        }
    }

    /// The requested mount group ("" for none).
    pub fn mount_group(&self) -> &str {
        match &self.access {
            Access::Mount {
                volume_mount_group, ..
            } => volume_mount_group,
            Access::Block => "",
        }
    }

    /// The requested mount flags (none for block access). May be sensitive: never logged.
    pub fn mount_flags(&self) -> &[String] {
        match &self.access {
            Access::Mount { mount_flags, .. } => mount_flags,
            Access::Block => &[],
        }
    }

    /// `"block"` or `"mount"`, for messages.
    pub fn access_name(&self) -> &'static str {
        if self.is_block() { "block" } else { "mount" }
    }
}

/// What a volume was pre-populated from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "id", rename_all = "snake_case")]
pub enum Source {
    /// A snapshot id.
    Snapshot(String),
    /// A volume id.
    Volume(String),
}

impl Source {
    /// The wire form.
    pub fn to_proto(&self) -> v1::VolumeContentSource {
        use v1::volume_content_source::{SnapshotSource, Type, VolumeSource};
        v1::VolumeContentSource {
            r#type: Some(match self {
                Source::Snapshot(id) => Type::Snapshot(SnapshotSource {
                    snapshot_id: id.clone(),
                }),
                Source::Volume(id) => Type::Volume(VolumeSource {
                    volume_id: id.clone(),
                }),
            }),
        }
    }
}

/// A volume's controller publication to one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerPublication {
    /// The capability it was published with.
    pub capability: Capability,
    /// Whether it was published read-only.
    pub readonly: bool,
    /// The publish_context handed out.
    pub publish_context: StringMap,
}

/// A volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeRecord {
    /// The plugin-chosen id.
    pub id: String,
    /// The CO's name (idempotency key); empty for statically provisioned volumes.
    pub name: String,
    /// Capacity in bytes.
    pub capacity: i64,
    /// The capabilities it was created with.
    pub capabilities: Vec<Capability>,
    /// CreateVolume parameters.
    #[serde(default)]
    pub parameters: StringMap,
    /// Current mutable parameters.
    #[serde(default)]
    pub mutable_parameters: StringMap,
    /// Mutable parameters as created (for CreateVolume idempotency).
    #[serde(default)]
    pub created_mutable_parameters: StringMap,
    /// The volume_context handed out.
    #[serde(default)]
    pub context: StringMap,
    /// Accessible topology segments.
    #[serde(default)]
    pub topology: Vec<StringMap>,
    /// Content source, if pre-populated.
    #[serde(default)]
    pub source: Option<Source>,
    /// Whether it has a file-system backing directory.
    pub has_mount: bool,
    /// Whether it has a block backing file.
    pub has_block: bool,
    /// Controller publications by node id.
    #[serde(default)]
    pub publications: BTreeMap<String, ControllerPublication>,
    /// Created on demand by a standalone node plugin (no controller).
    #[serde(default)]
    pub static_volume: bool,
    /// A pre-provisioned volume that is an existing directory (volume_context `path`): it is
    /// bind-mounted as is, and never created, changed or removed by the plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_path: Option<std::path::PathBuf>,
}

/// A snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    /// The plugin-chosen id.
    pub id: String,
    /// The CO's name; empty for members of a group snapshot.
    pub name: String,
    /// The volume it was cut from.
    pub source_volume_id: String,
    /// Size in bytes (the source's capacity).
    pub size: i64,
    /// When it was cut.
    pub created: Timestamp,
    /// Creation order, to tell which of two snapshots is newer.
    pub seq: u64,
    /// The group snapshot it belongs to.
    #[serde(default)]
    pub group_id: Option<String>,
    /// CreateSnapshot parameters.
    #[serde(default)]
    pub parameters: StringMap,
    /// Whether the source had a file-system directory (copied).
    pub has_mount: bool,
    /// Whether the source had a block file (copied).
    pub has_block: bool,
    /// Where volumes restored from it are accessible (v1.13 snapshot topology).
    #[serde(default)]
    pub topology: Vec<StringMap>,
}

/// A volume group snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// The plugin-chosen id.
    pub id: String,
    /// The CO's name.
    pub name: String,
    /// The volumes, in request order.
    pub source_volume_ids: Vec<String>,
    /// The member snapshots, in the same order.
    pub snapshot_ids: Vec<String>,
    /// CreateVolumeGroupSnapshot parameters.
    #[serde(default)]
    pub parameters: StringMap,
    /// When it was cut.
    pub created: Timestamp,
}

/// A volume staged on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staging {
    /// The volume.
    pub volume_id: String,
    /// The capability it was staged with.
    pub capability: Capability,
    /// Whether a real mount was made at the staging path.
    pub mounted: bool,
}

/// A volume published on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePublication {
    /// The volume.
    pub volume_id: String,
    /// The capability it was published with.
    pub capability: Capability,
    /// Whether it is read-only.
    pub readonly: bool,
    /// The staging path it came from ("" without staging).
    pub staging_path: String,
    /// Whether a real mount was made at the target.
    pub mounted: bool,
}

/// What one node holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Stagings by staging path.
    #[serde(default)]
    pub stagings: BTreeMap<String, Staging>,
    /// Publications by target path.
    #[serde(default)]
    pub publications: BTreeMap<String, NodePublication>,
}

/// Seconds and nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Timestamp {
    /// Seconds.
    pub seconds: i64,
    /// Nanoseconds within the second.
    pub nanos: i32,
}

impl Timestamp {
    /// The current wall-clock time.
    pub fn now() -> Timestamp {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp {
            seconds: d.as_secs() as i64,
            nanos: d.subsec_nanos() as i32,
        }
    }

    /// The wire form.
    pub fn to_proto(self) -> prost_types::Timestamp {
        prost_types::Timestamp {
            seconds: self.seconds,
            nanos: self.nanos,
        }
    }

    /// How long ago this was (zero if in the future).
    pub fn elapsed(self) -> std::time::Duration {
        let then = UNIX_EPOCH
            + std::time::Duration::new(self.seconds.max(0) as u64, self.nanos.max(0) as u32);
        SystemTime::now().duration_since(then).unwrap_or_default()
    }
}

/// The whole model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Format version.
    pub version: u32,
    /// Keys the paging tokens, so tokens we never issued are recognised.
    pub token_salt: u64,
    /// The last sequence number handed out (ids and ordering).
    pub seq: u64,
    /// Volumes by id.
    #[serde(default)]
    pub volumes: BTreeMap<String, VolumeRecord>,
    /// Snapshots by id.
    #[serde(default)]
    pub snapshots: BTreeMap<String, SnapshotRecord>,
    /// Group snapshots by id.
    #[serde(default)]
    pub groups: BTreeMap<String, GroupRecord>,
    /// Node-local records by node id; a node id is known once its node plugin started.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeRecord>,
}

impl Default for State {
    fn default() -> State {
        State {
            version: 1,
            token_salt: random_u64(),
            seq: 0,
            volumes: BTreeMap::new(),
            snapshots: BTreeMap::new(),
            groups: BTreeMap::new(),
            nodes: BTreeMap::new(),
        }
    }
}

fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    if let Ok(mut f) = File::open("/dev/urandom") {
        use std::io::Read;
        if f.read_exact(&mut buf).is_ok() {
            return u64::from_le_bytes(buf);
        }
    }
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_nanos() as u64) ^ ((std::process::id() as u64) << 32)
}

/// FNV-1a, 64 bit: small, stable across builds, good enough to tell our tokens from others.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.iter().chain(std::iter::once(&0xffu8)) {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

impl State {
    /// The next sequence number.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// A paging token meaning "continue after `last`" for listing `kind`.
    pub fn issue_token(&self, kind: &str, last: &str) -> String {
        let mac = fnv1a(&[
            &self.token_salt.to_le_bytes(),
            kind.as_bytes(),
            last.as_bytes(),
        ]);
        format!("{}.{mac:016x}", hex(last.as_bytes()))
    }

    /// The `last` of a token we issued for `kind`; `None` for anything else.
    pub fn parse_token(&self, kind: &str, token: &str) -> Option<String> {
        let (body, _) = token.split_once('.')?;
        let last = String::from_utf8(unhex(body)?).ok()?;
        (self.issue_token(kind, &last) == token).then_some(last)
    }

    /// The node record of `node_id`, created if missing.
    pub fn node_mut(&mut self, node_id: &str) -> &mut NodeRecord {
        self.nodes.entry(node_id.to_owned()).or_default()
    }

    /// Whether a volume is controller-published, staged or node-published anywhere.
    pub fn volume_in_use(&self, volume_id: &str) -> Option<String> {
        if let Some(v) = self.volumes.get(volume_id)
            && let Some(node) = v.publications.keys().next()
        {
            return Some(format!("it is controller-published to node {node}"));
        }
        for (node, rec) in &self.nodes {
            if rec.stagings.values().any(|s| s.volume_id == volume_id) {
                return Some(format!("it is staged on node {node}"));
            }
            if rec.publications.values().any(|p| p.volume_id == volume_id) {
                return Some(format!("it is published on node {node}"));
            }
        }
        None
    }

    /// Bytes provisioned by all volumes.
    pub fn provisioned(&self) -> i64 {
        self.volumes
            .values()
            .filter(|v| !v.static_volume)
            .map(|v| v.capacity)
            .sum()
    }
}

/// Where the state lives: memory only, or `<dir>/state.json` guarded by `<dir>/lock`.
pub struct Store {
    dir: Option<PathBuf>,
    state: Mutex<State>,
}

/// The state file inside a state directory.
pub const STATE_FILE: &str = "state.json";
/// The lock file inside a state directory.
pub const LOCK_FILE: &str = "lock";

impl Store {
    /// An in-memory store.
    pub fn memory() -> Store {
        Store {
            dir: None,
            state: Mutex::new(State::default()),
        }
    }

    /// A store in `dir` (created if missing); reads the existing state, if any.
    pub fn open(dir: &Path) -> std::io::Result<Store> {
        std::fs::create_dir_all(dir)?;
        let store = Store {
            dir: Some(dir.to_path_buf()),
            state: Mutex::new(State::default()),
        };
        store
            .transact(|_| Ok(()))
            .map_err(|s| std::io::Error::other(s.message().to_owned()))?;
        Ok(store)
    }

    /// Runs `f` as one read-modify-write transaction: exclusive against this process's other
    /// RPCs (mutex) and other processes sharing the directory (flock). The state is re-read
    /// first and written back atomically (temp file + rename) only when `f` succeeded and
    /// changed it; when `f` fails, its changes are discarded.
    pub fn transact<R>(
        &self,
        f: impl FnOnce(&mut State) -> Result<R, Status>,
    ) -> Result<R, Status> {
        let mut guard = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let _lock = match &self.dir {
            Some(dir) => {
                let lock = lock_dir(dir).map_err(|e| internal("lock the state directory", e))?;
                let (state, existed) =
                    read_state(dir).map_err(|e| internal("read the state", e))?;
                *guard = state;
                if !existed {
                    // Persist the fresh state (and its token salt) before anyone relies on it.
                    write_state(dir, &guard).map_err(|e| internal("write the state", e))?;
                }
                Some(lock)
            }
            None => None,
        };
        let before = guard.clone();
        match f(&mut guard) {
            Ok(r) => {
                if let Some(dir) = &self.dir
                    && *guard != before
                {
                    write_state(dir, &guard).map_err(|e| internal("write the state", e))?;
                }
                Ok(r)
            }
            Err(status) => {
                *guard = before;
                Err(status)
            }
        }
    }

    /// A copy of the current state (re-read from disk when persistent).
    pub fn snapshot(&self) -> Result<State, Status> {
        self.transact(|s| Ok(s.clone()))
    }
}

fn internal(what: &str, e: std::io::Error) -> Status {
    Status::internal(format!("could not {what}: {e}"))
}

fn lock_dir(dir: &Path) -> std::io::Result<Flock<File>> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))?;
    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| std::io::Error::from(errno))
}

/// The state in `dir` and whether the file existed.
fn read_state(dir: &Path) -> std::io::Result<(State, bool)> {
    match std::fs::read(dir.join(STATE_FILE)) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(|s| (s, true))
            .map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", dir.join(STATE_FILE).display()),
                )
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((State::default(), false)),
        Err(e) => Err(e),
    }
}

fn write_state(dir: &Path, state: &State) -> std::io::Result<()> {
    let mut tmp = tempfile::Builder::new()
        .prefix(".state.")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    let json = serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?;
    tmp.write_all(&json)?;
    tmp.as_file().sync_all()?;
    tmp.persist(dir.join(STATE_FILE)).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_reject_forgeries() {
        let s = State::default();
        let t = s.issue_token("volumes", "vol-000003");
        assert_eq!(s.parse_token("volumes", &t).as_deref(), Some("vol-000003"));
        assert_eq!(s.parse_token("snapshots", &t), None, "bound to its listing");
        assert_eq!(s.parse_token("volumes", "vol-000003"), None);
        assert_eq!(s.parse_token("volumes", "zz.0000"), None);
        let forged = format!("{}.0123456789abcdef", hex(b"vol-000003"));
        assert_eq!(s.parse_token("volumes", &forged), None);
        let other = State::default();
        assert_eq!(other.parse_token("volumes", &t), None, "salted per state");
    }

    #[test]
    fn capabilities_validate_and_hide_mount_flags() {
        let mut cap = v1::VolumeCapability {
            access_type: Some(AccessType::Mount(v1::volume_capability::MountVolume {
                fs_type: "ext4".into(),
                mount_flags: vec!["password=hunter2".into()],
                volume_mount_group: String::new(),
            })),
            access_mode: Some(v1::volume_capability::AccessMode {
                mode: Mode::SingleNodeWriter as i32,
            }),
        };
        let c = Capability::from_proto(&cap).unwrap();
        assert_eq!(c.to_proto(), cap);
        assert!(!format!("{c:?}").contains("hunter2"));
        cap.access_mode = Some(v1::volume_capability::AccessMode { mode: 0 });
        assert!(Capability::from_proto(&cap).is_err());
        cap.access_mode = Some(v1::volume_capability::AccessMode { mode: 99 });
        assert!(Capability::from_proto(&cap).is_err());
        cap.access_mode = None;
        assert!(Capability::from_proto(&cap).is_err());
        cap.access_type = None;
        assert!(Capability::from_proto(&cap).is_err());
    }

    #[test]
    fn persistent_store_round_trips_and_rolls_back_failures() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .transact(|s| {
                s.nodes.insert("n1".into(), NodeRecord::default());
                Ok(())
            })
            .unwrap();
        let err = store.transact(|s| -> Result<(), Status> {
            s.nodes.insert("n2".into(), NodeRecord::default());
            Err(Status::invalid_argument("no"))
        });
        assert!(err.is_err());
        let other = Store::open(dir.path()).unwrap();
        let state = other.snapshot().unwrap();
        assert!(state.nodes.contains_key("n1"));
        assert!(!state.nodes.contains_key("n2"));
        assert!(dir.path().join(STATE_FILE).exists());
    }
}
