//! What a scenario created on the plugin (volumes, snapshots, group snapshots, controller
//! publications, node stagings and publications), so that it can be torn down afterwards,
//! pass or fail, newest first, and nothing else. A [`ResourceObserver`] hears of every
//! registration and release (the hook for a crash-safe journal).

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use prost_reflect::DynamicMessage;
use serde::Serialize;
use tonic::Code;

use super::vars::{FieldPath, Val};
use crate::proto::{self, v1};

/// Something the engine created on the plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Resource {
    /// CreateVolume → DeleteVolume.
    Volume {
        /// Its id.
        volume_id: String,
    },
    /// CreateSnapshot → DeleteSnapshot.
    Snapshot {
        /// Its id.
        snapshot_id: String,
    },
    /// CreateVolumeGroupSnapshot → DeleteVolumeGroupSnapshot.
    GroupSnapshot {
        /// Its id.
        group_snapshot_id: String,
        /// The member snapshots (DeleteVolumeGroupSnapshot names them).
        snapshot_ids: Vec<String>,
    },
    /// ControllerPublishVolume → ControllerUnpublishVolume.
    ControllerPublication {
        /// The volume.
        volume_id: String,
        /// The node it is published to.
        node_id: String,
    },
    /// NodeStageVolume → NodeUnstageVolume.
    NodeStage {
        /// The volume.
        volume_id: String,
        /// The staging path.
        staging_target_path: String,
        /// Which node endpoint.
        node: usize,
    },
    /// NodePublishVolume → NodeUnpublishVolume.
    NodePublication {
        /// The volume.
        volume_id: String,
        /// The target path.
        target_path: String,
        /// Which node endpoint.
        node: usize,
    },
}

impl Resource {
    /// Where this resource comes in the undo order (lower first): node publications, then
    /// stagings, then controller publications, then every object (volumes and snapshots of
    /// any kind). Within a rank, the newest goes first, so an object made from another (a
    /// clone, a volume from a snapshot) goes before its source.
    pub fn undo_rank(&self) -> u8 {
        Resource::undo_rank_of(self.creating_rpc())
    }

    /// [`Resource::undo_rank`] of what a call of `rpc` creates.
    pub fn undo_rank_of(rpc: &str) -> u8 {
        match rpc {
            "NodePublishVolume" => 0,
            "NodeStageVolume" => 1,
            "ControllerPublishVolume" => 2,
            _ => 3,
        }
    }

    /// The RPCs that create something the engine tracks.
    pub const CREATING_RPCS: [&'static str; 6] = [
        "CreateVolume",
        "CreateSnapshot",
        "CreateVolumeGroupSnapshot",
        "ControllerPublishVolume",
        "NodeStageVolume",
        "NodePublishVolume",
    ];

    /// The RPC that creates this kind of resource.
    pub fn creating_rpc(&self) -> &'static str {
        match self {
            Resource::Volume { .. } => "CreateVolume",
            Resource::Snapshot { .. } => "CreateSnapshot",
            Resource::GroupSnapshot { .. } => "CreateVolumeGroupSnapshot",
            Resource::ControllerPublication { .. } => "ControllerPublishVolume",
            Resource::NodeStage { .. } => "NodeStageVolume",
            Resource::NodePublication { .. } => "NodePublishVolume",
        }
    }

    /// What a successful call created, if it creates anything.
    pub fn created_by(rpc: &str, request: &DynamicMessage, response: &DynamicMessage, node: usize) -> Option<Resource> {
        let req = |p: &str| text_at(request, p);
        let resp = |p: &str| text_at(response, p);
        let found = match rpc {
            "CreateVolume" => Resource::Volume { volume_id: resp("volume.volume_id") },
            "CreateSnapshot" => Resource::Snapshot { snapshot_id: resp("snapshot.snapshot_id") },
            "CreateVolumeGroupSnapshot" => Resource::GroupSnapshot {
                group_snapshot_id: resp("group_snapshot.group_snapshot_id"),
                snapshot_ids: match Val::from_message(response).get(&path("group_snapshot.snapshots")) {
                    Ok(Val::List(items)) => items
                        .iter()
                        .filter_map(|s| match s.get(&path("snapshot_id")) {
                            Ok(Val::Str(id)) => Some(id),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                },
            },
            "ControllerPublishVolume" => {
                Resource::ControllerPublication { volume_id: req("volume_id"), node_id: req("node_id") }
            }
            "NodeStageVolume" => Resource::NodeStage {
                volume_id: req("volume_id"),
                staging_target_path: req("staging_target_path"),
                node,
            },
            "NodePublishVolume" => {
                Resource::NodePublication { volume_id: req("volume_id"), target_path: req("target_path"), node }
            }
            _ => return None,
        };
        (!found.primary_id().is_empty()).then_some(found)
    }

    /// Whether a successful (or NOT_FOUND) call of `rpc` with `request` undoes this resource.
    pub fn released_by(&self, rpc: &str, request: &DynamicMessage, node: usize) -> bool {
        let req = |p: &str| text_at(request, p);
        match (self, rpc) {
            (Resource::Volume { volume_id }, "DeleteVolume") => *volume_id == req("volume_id"),
            (Resource::Snapshot { snapshot_id }, "DeleteSnapshot") => *snapshot_id == req("snapshot_id"),
            (Resource::GroupSnapshot { group_snapshot_id, .. }, "DeleteVolumeGroupSnapshot") => {
                *group_snapshot_id == req("group_snapshot_id")
            }
            (Resource::ControllerPublication { volume_id, node_id }, "ControllerUnpublishVolume") => {
                let n = req("node_id");
                *volume_id == req("volume_id") && (n.is_empty() || *node_id == n)
            }
            (Resource::NodeStage { volume_id, staging_target_path, node: at }, "NodeUnstageVolume") => {
                *volume_id == req("volume_id") && *staging_target_path == req("staging_target_path") && *at == node
            }
            (Resource::NodePublication { volume_id, target_path, node: at }, "NodeUnpublishVolume") => {
                *volume_id == req("volume_id") && *target_path == req("target_path") && *at == node
            }
            _ => false,
        }
    }

    fn primary_id(&self) -> &str {
        match self {
            Resource::Volume { volume_id }
            | Resource::ControllerPublication { volume_id, .. }
            | Resource::NodeStage { volume_id, .. }
            | Resource::NodePublication { volume_id, .. } => volume_id,
            Resource::Snapshot { snapshot_id } => snapshot_id,
            Resource::GroupSnapshot { group_snapshot_id, .. } => group_snapshot_id,
        }
    }

    /// The node endpoint the teardown goes to (node resources), if any.
    pub fn node(&self) -> Option<usize> {
        match self {
            Resource::NodeStage { node, .. } | Resource::NodePublication { node, .. } => Some(*node),
            _ => None,
        }
    }

    /// The RPC and request (without secrets) that undo this resource.
    pub fn teardown(&self) -> (&'static str, DynamicMessage) {
        match self.clone() {
            Resource::Volume { volume_id } => {
                ("DeleteVolume", proto::to_dynamic(&v1::DeleteVolumeRequest { volume_id, ..Default::default() }))
            }
            Resource::Snapshot { snapshot_id } => {
                ("DeleteSnapshot", proto::to_dynamic(&v1::DeleteSnapshotRequest { snapshot_id, ..Default::default() }))
            }
            Resource::GroupSnapshot { group_snapshot_id, snapshot_ids } => (
                "DeleteVolumeGroupSnapshot",
                proto::to_dynamic(&v1::DeleteVolumeGroupSnapshotRequest {
                    group_snapshot_id,
                    snapshot_ids,
                    ..Default::default()
                }),
            ),
            Resource::ControllerPublication { volume_id, node_id } => (
                "ControllerUnpublishVolume",
                proto::to_dynamic(&v1::ControllerUnpublishVolumeRequest { volume_id, node_id, ..Default::default() }),
            ),
            Resource::NodeStage { volume_id, staging_target_path, .. } => (
                "NodeUnstageVolume",
                proto::to_dynamic(&v1::NodeUnstageVolumeRequest { volume_id, staging_target_path }),
            ),
            Resource::NodePublication { volume_id, target_path, .. } => {
                ("NodeUnpublishVolume", proto::to_dynamic(&v1::NodeUnpublishVolumeRequest { volume_id, target_path }))
            }
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Volume { volume_id } => write!(f, "volume {volume_id}"),
            Resource::Snapshot { snapshot_id } => write!(f, "snapshot {snapshot_id}"),
            Resource::GroupSnapshot { group_snapshot_id, .. } => write!(f, "group snapshot {group_snapshot_id}"),
            Resource::ControllerPublication { volume_id, node_id } => {
                write!(f, "publication of volume {volume_id} to node {node_id}")
            }
            Resource::NodeStage { volume_id, staging_target_path, node } => {
                write!(f, "staging of volume {volume_id} at {staging_target_path} (node endpoint {node})")
            }
            Resource::NodePublication { volume_id, target_path, node } => {
                write!(f, "publication of volume {volume_id} at {target_path} (node endpoint {node})")
            }
        }
    }
}

/// Puts `values` into the request's `secrets` field; returns false when the message has none.
pub fn set_secrets(request: &mut DynamicMessage, values: &std::collections::BTreeMap<String, String>) -> bool {
    let Some(field) = prost_reflect::ReflectMessage::descriptor(request).get_field_by_name("secrets") else {
        return false;
    };
    let map = values
        .iter()
        .map(|(k, v)| (prost_reflect::MapKey::String(k.clone()), prost_reflect::Value::String(v.clone())))
        .collect();
    request.set_field(&field, prost_reflect::Value::Map(map));
    true
}

fn path(p: &str) -> Vec<super::vars::Seg> {
    FieldPath::parse(p).map(|p| p.0).unwrap_or_default()
}

fn text_at(message: &DynamicMessage, p: &str) -> String {
    match Val::from_message(message).get(&path(p)) {
        Ok(Val::Str(s)) => s,
        _ => String::new(),
    }
}

/// A registered resource with what is needed to tear it down and to journal it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tracked {
    /// Registration order within the run's scenario (1, 2, ...).
    pub seq: u64,
    /// The scenario that created it.
    pub scenario: String,
    /// What it is.
    pub resource: Resource,
    /// The secrets-file key the creating call used (a name, never values); `None` when it
    /// sent no secrets. Teardown sends secrets (by `auto`) only when this is set.
    pub secrets_key: Option<String>,
    /// The name the creating request gave it (volumes, snapshots), if any.
    pub name: Option<String>,
}

/// A call that may create something, about to be sent: heard before the plugin acts, so that
/// a journal holds it even if the answer is never heard (a crash, SIGKILL, a lost
/// connection).
#[derive(Debug, Clone)]
pub struct Sending {
    /// Numbered with the scenario's [`Tracked`] resources (unique within the scenario).
    pub seq: u64,
    /// The scenario making the call.
    pub scenario: String,
    /// The RPC (one of [`Resource::CREATING_RPCS`]).
    pub rpc: String,
    /// The request as sent, secrets included: observers must strip secret fields
    /// ([`crate::proto::without_secrets`]) before keeping it anywhere.
    pub request: DynamicMessage,
    /// Which node endpoint (node RPCs).
    pub node: usize,
    /// The secrets-file key the call uses, if it sends secrets (a name, never values).
    pub secrets_key: Option<String>,
}

/// Hears about every resource the engine creates and releases, so that a journal can record
/// them and a later run can clean up after a crash. Called synchronously; keep it quick.
///
/// For a call that creates something the order is: [`sending`](Self::sending), the call,
/// [`registered`](Self::registered) when it created something, then
/// [`answered`](Self::answered) when the plugin's answer was heard, whatever it was, or
/// [`unanswered`](Self::unanswered) when it was not (a timeout, a lost connection, bytes
/// that do not decode): then the plugin may have made something nobody knows the id of.
pub trait ResourceObserver: Send + Sync {
    /// A call that may create something is about to be sent.
    fn sending(&self, call: &Sending) {
        let _ = call;
    }
    /// The answer to `call` arrived (and what it created, if anything, is registered).
    fn answered(&self, call: &Sending) {
        let _ = call;
    }
    /// No answer to `call` was heard: what it made, if anything, is unknown.
    fn unanswered(&self, call: &Sending) {
        let _ = call;
    }
    /// A call created `resource`.
    fn registered(&self, resource: &Tracked);
    /// `resource` was deleted/unpublished (by a step or by teardown), or was already gone.
    fn released(&self, resource: &Tracked);
    /// Teardown could not release `resource`; it is left on the plugin.
    fn left_behind(&self, resource: &Tracked, why: &str) {
        let _ = (resource, why);
    }
    /// `call` was answered OK but names no usable id: whatever it made is the plugin's, out
    /// of reach of any CSI call, and nothing is to be undone for it.
    fn lost(&self, call: &Sending, why: &str) {
        let _ = why;
        self.answered(call);
    }
    /// A delete of `resource` was answered OK but the plugin still shows it: it stays the
    /// plugin's, out of reach (deleting again only answers OK again), and nothing more is to
    /// be undone for it.
    fn kept(&self, resource: &Tracked, why: &str) {
        let _ = why;
        self.released(resource);
    }
    /// The run is about to make its own directory `dir` (so that a `cleanup` after a crash
    /// removes it when empty); returns what to settle it with in [`removed_dir`](Self::removed_dir).
    fn making_dir(&self, dir: &std::path::Path) -> Option<String> {
        let _ = dir;
        None
    }
    /// The directory of [`making_dir`](Self::making_dir)'s `token` is gone, or was never made by the run.
    fn removed_dir(&self, token: &str) {
        let _ = token;
    }
}

/// The resources of one scenario.
pub struct Tracker {
    scenario: String,
    live: Vec<Tracked>,
    /// The next sequence number, shared with the trackers forked from this one.
    next: Arc<AtomicU64>,
    observer: Option<Arc<dyn ResourceObserver>>,
}

impl Tracker {
    /// An empty tracker for a scenario.
    pub fn new(scenario: &str, observer: Option<Arc<dyn ResourceObserver>>) -> Self {
        Tracker { scenario: scenario.to_owned(), live: Vec::new(), next: Arc::new(AtomicU64::new(1)), observer }
    }

    /// An empty tracker for the same scenario that numbers what it registers from the same
    /// sequence (so sequence numbers stay unique in the journal): what a property case runs
    /// concurrently with others records there, then [`Tracker::absorb`] takes it back.
    pub fn fork(&self) -> Tracker {
        Tracker {
            scenario: self.scenario.clone(),
            live: Vec::new(),
            next: self.next.clone(),
            observer: self.observer.clone(),
        }
    }

    /// Takes over what a forked tracker still holds (to be torn down with the scenario).
    pub fn absorb(&mut self, other: Tracker) {
        for t in other.live {
            if !self.live.iter().any(|l| l.resource == t.resource) {
                self.live.push(t);
            }
        }
    }

    fn next_seq(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Records what an answered call did: registers what an OK call created, and releases
    /// what an OK or NOT_FOUND call deleted.
    pub fn observe(
        &mut self,
        rpc: &str,
        request: &DynamicMessage,
        outcome: Result<&DynamicMessage, Code>,
        node: usize,
        secrets_key: Option<&str>,
    ) {
        self.observe_call(None, rpc, request, outcome, node, secrets_key);
    }

    /// [`Tracker::observe`] for the answer to `sending` (from [`Tracker::sending`]): what it
    /// created takes the call's sequence number, so an observer pairs the two even when
    /// several calls of the scenario are in flight.
    pub fn observe_call(
        &mut self,
        sending: Option<&Sending>,
        rpc: &str,
        request: &DynamicMessage,
        outcome: Result<&DynamicMessage, Code>,
        node: usize,
        secrets_key: Option<&str>,
    ) {
        match outcome {
            Ok(response) => {
                if let Some(resource) = Resource::created_by(rpc, request, response, node) {
                    let name = Some(text_at(request, "name")).filter(|n| !n.is_empty());
                    self.register_named(resource, secrets_key, name, sending.map(|s| s.seq));
                }
                self.release_matching(rpc, request, node);
            }
            Err(Code::NotFound) => self.release_matching(rpc, request, node),
            Err(_) => {}
        }
    }

    /// Registers a resource (once: re-creating the same thing idempotently is one resource).
    pub fn register(&mut self, resource: Resource, secrets_key: Option<&str>) {
        self.register_named(resource, secrets_key, None, None);
    }

    fn register_named(&mut self, resource: Resource, secrets_key: Option<&str>, name: Option<String>, seq: Option<u64>) {
        if self.live.iter().any(|t| t.resource == resource) {
            return;
        }
        let tracked = Tracked {
            seq: seq.unwrap_or_else(|| self.next_seq()),
            scenario: self.scenario.clone(),
            resource,
            secrets_key: secrets_key.map(str::to_owned),
            name,
        };
        if let Some(o) = &self.observer {
            o.registered(&tracked);
        }
        self.live.push(tracked);
    }

    /// Takes out what a call of `rpc` with `request` undoes.
    fn take_matching(&mut self, rpc: &str, request: &DynamicMessage, node: usize) -> Vec<Tracked> {
        let (matching, live): (Vec<Tracked>, Vec<Tracked>) =
            std::mem::take(&mut self.live).into_iter().partition(|t| t.resource.released_by(rpc, request, node));
        self.live = live;
        matching
    }

    fn release_matching(&mut self, rpc: &str, request: &DynamicMessage, node: usize) {
        for t in self.take_matching(rpc, request, node) {
            if let Some(o) = &self.observer {
                o.released(&t);
            }
        }
    }

    /// Whether a call of `rpc` with `request` undoes something this tracker holds.
    pub fn holds(&self, rpc: &str, request: &DynamicMessage, node: usize) -> bool {
        self.live.iter().any(|t| t.resource.released_by(rpc, request, node))
    }

    /// A call of `rpc` with `request` answered OK without undoing what it names (see
    /// [`ResourceObserver::kept`]): forgets it, telling the observer `why`.
    pub fn kept(&mut self, rpc: &str, request: &DynamicMessage, node: usize, why: &str) {
        for t in self.take_matching(rpc, request, node) {
            if let Some(o) = &self.observer {
                o.kept(&t, why);
            }
        }
    }

    /// Tells the observer that a call of `rpc` that may create something is about to be sent;
    /// returns what to hand to [`Tracker::answered`] once the answer is in (`None` when the
    /// call creates nothing or nobody listens).
    pub fn sending(
        &mut self,
        rpc: &str,
        request: &DynamicMessage,
        node: usize,
        secrets_key: Option<&str>,
    ) -> Option<Sending> {
        let observer = self.observer.as_ref()?;
        if !Resource::CREATING_RPCS.contains(&rpc) {
            return None;
        }
        let call = Sending {
            seq: self.next_seq(),
            scenario: self.scenario.clone(),
            rpc: rpc.to_owned(),
            request: request.clone(),
            node,
            secrets_key: secrets_key.map(str::to_owned),
        };
        observer.sending(&call);
        Some(call)
    }

    /// Tells the observer whether the plugin's answer to `call` was `heard` (call after
    /// [`Tracker::observe`]).
    pub fn answered(&self, call: Option<Sending>, heard: bool) {
        if let (Some(o), Some(call)) = (&self.observer, call) {
            if heard { o.answered(&call) } else { o.unanswered(&call) }
        }
    }

    /// The creating `call` was answered OK without a usable id (see [`ResourceObserver::lost`]).
    pub fn lost(&self, call: Option<Sending>, why: &str) {
        if let (Some(o), Some(call)) = (&self.observer, call) {
            o.lost(&call, why);
        }
    }

    /// Marks one resource released.
    pub fn release(&mut self, seq: u64) {
        if let Some(i) = self.live.iter().position(|t| t.seq == seq) {
            let t = self.live.remove(i);
            if let Some(o) = &self.observer {
                o.released(&t);
            }
        }
    }

    /// Forgets what a call of `rpc` with `request` undoes without telling the observer, and
    /// returns it: whoever takes it tells the observer what became of it.
    pub fn hand_over_matching(&mut self, rpc: &str, request: &DynamicMessage, node: usize) -> Vec<Tracked> {
        self.take_matching(rpc, request, node)
    }

    /// Takes back what [`Tracker::hand_over_matching`] handed over (nobody took it).
    pub fn take_back(&mut self, tracked: Tracked) {
        self.live.push(tracked);
    }

    /// Reports a resource as left behind and forgets it.
    pub fn abandon(&mut self, seq: u64, why: &str) {
        if let Some(i) = self.live.iter().position(|t| t.seq == seq) {
            let t = self.live.remove(i);
            if let Some(o) = &self.observer {
                o.left_behind(&t, why);
            }
        }
    }

    /// The live resources in teardown order: attachments newest first (node publications,
    /// stagings, controller publications), then objects newest first (so a clone goes before
    /// its source snapshot, and a snapshot before its source volume).
    pub fn teardown_order(&self) -> Vec<Tracked> {
        let mut order = self.live.clone();
        order.sort_by_key(|t| (t.resource.undo_rank(), std::cmp::Reverse(t.seq)));
        order
    }

    /// The ids of the volumes and snapshots (group members included) this tracker holds.
    pub fn object_ids(&self) -> std::collections::BTreeSet<&str> {
        let mut ids = std::collections::BTreeSet::new();
        for t in &self.live {
            match &t.resource {
                Resource::Volume { volume_id } => ids.insert(volume_id.as_str()),
                Resource::Snapshot { snapshot_id } => ids.insert(snapshot_id.as_str()),
                Resource::GroupSnapshot { snapshot_ids, .. } => {
                    ids.extend(snapshot_ids.iter().map(String::as_str));
                    true
                }
                _ => false,
            };
        }
        ids
    }

    /// Whether nothing is left.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl ResourceObserver for Log {
        fn registered(&self, r: &Tracked) {
            self.0.lock().unwrap().push(format!("+{}", r.resource));
        }
        fn released(&self, r: &Tracked) {
            self.0.lock().unwrap().push(format!("-{}", r.resource));
        }
    }

    fn created(id: &str) -> DynamicMessage {
        proto::to_dynamic(&v1::CreateVolumeResponse {
            volume: Some(v1::Volume { volume_id: id.into(), ..Default::default() }),
        })
    }

    #[test]
    fn registers_once_releases_on_delete_and_orders_teardown() {
        let log = Arc::new(Log::default());
        let mut t = Tracker::new("s.x", Some(log.clone()));
        let create = proto::to_dynamic(&v1::CreateVolumeRequest::default());
        t.observe("CreateVolume", &create, Ok(&created("v1")), 0, Some("CreateVolumeSecret"));
        t.observe("CreateVolume", &create, Ok(&created("v1")), 0, None);
        t.observe("CreateVolume", &create, Ok(&created("v2")), 0, None);
        let publish = proto::to_dynamic(&v1::NodePublishVolumeRequest {
            volume_id: "v1".into(),
            target_path: "/t".into(),
            ..Default::default()
        });
        let empty = proto::to_dynamic(&v1::NodePublishVolumeResponse {});
        t.observe("NodePublishVolume", &publish, Ok(&empty), 0, None);
        let order: Vec<String> = t.teardown_order().iter().map(|t| t.resource.to_string()).collect();
        assert_eq!(order, vec!["publication of volume v1 at /t (node endpoint 0)", "volume v2", "volume v1"]);
        assert_eq!(t.teardown_order()[2].secrets_key.as_deref(), Some("CreateVolumeSecret"));
        let delete = proto::to_dynamic(&v1::DeleteVolumeRequest { volume_id: "v2".into(), ..Default::default() });
        t.observe("DeleteVolume", &delete, Err(Code::NotFound), 0, None);
        let delete_other = proto::to_dynamic(&v1::DeleteVolumeRequest { volume_id: "v9".into(), ..Default::default() });
        t.observe("DeleteVolume", &delete_other, Err(Code::Internal), 0, None);
        assert_eq!(t.teardown_order().len(), 2);
        assert_eq!(log.0.lock().unwrap().len(), 4);
        assert!(Resource::created_by("CreateVolume", &create, &created(""), 0).is_none());
    }

    #[test]
    fn forks_number_from_the_same_sequence_and_hand_back_what_they_hold() {
        let log = Arc::new(Log::default());
        let mut t = Tracker::new("s.x", Some(log.clone()));
        let create = proto::to_dynamic(&v1::CreateVolumeRequest::default());
        let (mut a, mut b) = (t.fork(), t.fork());
        let sent_a = a.sending("CreateVolume", &create, 0, None);
        let sent_b = b.sending("CreateVolume", &create, 0, None);
        b.observe_call(sent_b.as_ref(), "CreateVolume", &create, Ok(&created("v2")), 0, None);
        a.observe_call(sent_a.as_ref(), "CreateVolume", &create, Ok(&created("v1")), 0, None);
        t.observe("CreateVolume", &create, Ok(&created("v3")), 0, None);
        // What a call created carries the call's number; numbers never repeat.
        assert_eq!(a.teardown_order()[0].seq, sent_a.unwrap().seq);
        assert_eq!(b.teardown_order()[0].seq, sent_b.unwrap().seq);
        let delete = proto::to_dynamic(&v1::DeleteVolumeRequest { volume_id: "v2".into(), ..Default::default() });
        b.observe("DeleteVolume", &delete, Ok(&empty_delete()), 0, None);
        t.absorb(a);
        t.absorb(b);
        let order: Vec<(String, u64)> = t.teardown_order().iter().map(|t| (t.resource.to_string(), t.seq)).collect();
        assert_eq!(order, vec![("volume v3".to_owned(), 3), ("volume v1".to_owned(), 1)]);
        assert_eq!(log.0.lock().unwrap().len(), 4);
    }

    fn empty_delete() -> DynamicMessage {
        proto::to_dynamic(&v1::DeleteVolumeResponse {})
    }
}
