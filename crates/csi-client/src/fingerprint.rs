//! What a plugin says about itself: identity, plugin/controller/group/node capabilities and node
//! info, gathered once per run into one typed [`Fingerprint`] that gates every scenario.
//!
//! Controller RPCs are sent only when the plugin advertises `CONTROLLER_SERVICE`, group
//! controller RPCs only with `GROUP_CONTROLLER_SERVICE`, so a node-only plugin fingerprints
//! without a single controller call.

use std::{collections::BTreeMap, collections::BTreeSet, fmt, str::FromStr};

use serde::Serialize;

use crate::{
    version::{Assumed, SpecVersion},
    client::{Connection, Endpoint, RpcError},
    proto::v1::{
        self, controller_service_capability, group_controller_service_capability,
        node_service_capability, plugin_capability,
    },
};

/// `PluginCapability.Service.Type`.
pub type PluginService = plugin_capability::service::Type;
/// `PluginCapability.VolumeExpansion.Type`.
pub type VolumeExpansion = plugin_capability::volume_expansion::Type;
/// `ControllerServiceCapability.RPC.Type`.
pub type ControllerCapability = controller_service_capability::rpc::Type;
/// `NodeServiceCapability.RPC.Type`.
pub type NodeCapability = node_service_capability::rpc::Type;
/// `GroupControllerServiceCapability.RPC.Type`.
pub type GroupCapability = group_controller_service_capability::rpc::Type;

/// Everything a run learns about the plugin before its first scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Fingerprint {
    /// GetPluginInfo of the first endpoint (the controller's when there is one).
    pub plugin: PluginInfo,
    /// GetPluginCapabilities.
    pub capabilities: PluginCapabilities,
    /// The controller service, when the plugin advertises CONTROLLER_SERVICE.
    pub controller: Option<ControllerInfo>,
    /// The group controller service, when the plugin advertises GROUP_CONTROLLER_SERVICE.
    pub group_controller: Option<GroupControllerInfo>,
    /// One entry per node endpoint that serves the Node service.
    pub nodes: Vec<NodeInfo>,
    /// The CSI spec version the plugin is judged by, and why (inferred from what it
    /// advertises, or stated with `--spec-version`).
    pub spec: Assumed,
    /// Things worth an operator's attention that are not failures by themselves
    /// (unknown capability values, endpoints that do not serve the Node service, ...).
    pub notes: Vec<String>,
}

/// GetPluginInfo.
#[derive(Debug, Clone, Serialize)]
pub struct PluginInfo {
    /// Where it was asked.
    pub endpoint: Endpoint,
    /// The plugin's name: the provider, in orchestrator terms.
    pub name: String,
    /// The plugin's version: the provider version.
    pub vendor_version: String,
    /// Free-form details the plugin reports.
    pub manifest: BTreeMap<String, String>,
}

/// GetPluginCapabilities.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PluginCapabilities {
    /// Service capabilities.
    #[serde(serialize_with = "names")]
    pub services: BTreeSet<PluginService>,
    /// Volume expansion modes.
    #[serde(serialize_with = "names")]
    pub volume_expansion: BTreeSet<VolumeExpansion>,
}

/// The controller side.
#[derive(Debug, Clone, Serialize)]
pub struct ControllerInfo {
    /// Where it was asked.
    pub endpoint: Endpoint,
    /// ControllerGetCapabilities.
    #[serde(serialize_with = "names")]
    pub capabilities: BTreeSet<ControllerCapability>,
}

/// The group controller side.
#[derive(Debug, Clone, Serialize)]
pub struct GroupControllerInfo {
    /// GroupControllerGetCapabilities.
    #[serde(serialize_with = "names")]
    pub capabilities: BTreeSet<GroupCapability>,
}

/// One node plugin.
#[derive(Debug, Clone, Serialize)]
pub struct NodeInfo {
    /// Where it was asked.
    pub endpoint: Endpoint,
    /// The plugin name this endpoint reports (it should equal the controller's).
    pub plugin_name: String,
    /// NodeGetCapabilities.
    #[serde(serialize_with = "names")]
    pub capabilities: BTreeSet<NodeCapability>,
    /// NodeGetInfo.node_id.
    pub node_id: String,
    /// NodeGetInfo.max_volumes_per_node (0: no limit reported).
    pub max_volumes_per_node: i64,
    /// NodeGetInfo.accessible_topology segments, if any.
    pub topology: Option<BTreeMap<String, String>>,
}

/// Names a capability enum value the way the spec writes it.
pub trait CapabilityName: Copy {
    /// `CREATE_DELETE_VOLUME`, ...
    fn name(self) -> &'static str;
}

macro_rules! capability_name {
    ($($t:ty),*) => {$(
        impl CapabilityName for $t {
            fn name(self) -> &'static str {
                self.as_str_name()
            }
        }
    )*};
}
capability_name!(PluginService, VolumeExpansion, ControllerCapability, NodeCapability, GroupCapability);

fn names<S: serde::Serializer, T: CapabilityName>(set: &BTreeSet<T>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(set.iter().map(|c| c.name()))
}

/// One capability a scenario can require, written `scope:NAME` (`controller:LIST_VOLUMES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `plugin:CONTROLLER_SERVICE`, ...
    Plugin(PluginService),
    /// `expansion:ONLINE` / `expansion:OFFLINE`.
    Expansion(VolumeExpansion),
    /// `controller:CREATE_DELETE_VOLUME`, ...
    Controller(ControllerCapability),
    /// `node:STAGE_UNSTAGE_VOLUME`, ... (every node endpoint must advertise it).
    Node(NodeCapability),
    /// `group:CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT`.
    Group(GroupCapability),
}

/// The scopes a capability can be named in.
pub const CAPABILITY_SCOPES: [&str; 5] = ["plugin", "expansion", "controller", "node", "group"];

impl Capability {
    /// The scope word (`controller`).
    pub fn scope(self) -> &'static str {
        match self {
            Capability::Plugin(_) => "plugin",
            Capability::Expansion(_) => "expansion",
            Capability::Controller(_) => "controller",
            Capability::Node(_) => "node",
            Capability::Group(_) => "group",
        }
    }

    /// The capability's spec name (`LIST_VOLUMES`).
    pub fn name(self) -> &'static str {
        match self {
            Capability::Plugin(c) => c.name(),
            Capability::Expansion(c) => c.name(),
            Capability::Controller(c) => c.name(),
            Capability::Node(c) => c.name(),
            Capability::Group(c) => c.name(),
        }
    }

    /// The capability whose advertisement promises that `rpc` works, for the RPCs the spec
    /// makes optional: `controller:PUBLISH_UNPUBLISH_VOLUME` for ControllerPublishVolume,
    /// `plugin:CONTROLLER_SERVICE` for the Controller RPCs every controller must serve
    /// (ControllerGetCapabilities, ValidateVolumeCapabilities), and so on. `None` for RPCs
    /// every plugin must serve (Identity, and the Node RPCs without a capability).
    pub fn serving(rpc: &str) -> Option<Capability> {
        use ControllerCapability as C;
        let cap = match rpc {
            "CreateVolume" | "DeleteVolume" => Capability::Controller(C::CreateDeleteVolume),
            "ControllerPublishVolume" | "ControllerUnpublishVolume" => Capability::Controller(C::PublishUnpublishVolume),
            "ListVolumes" => Capability::Controller(C::ListVolumes),
            "GetCapacity" => Capability::Controller(C::GetCapacity),
            "CreateSnapshot" | "DeleteSnapshot" => Capability::Controller(C::CreateDeleteSnapshot),
            "ListSnapshots" => Capability::Controller(C::ListSnapshots),
            "ControllerExpandVolume" => Capability::Controller(C::ExpandVolume),
            "ControllerGetVolume" => Capability::Controller(C::GetVolume),
            "ControllerModifyVolume" => Capability::Controller(C::ModifyVolume),
            "GetSnapshot" => Capability::Controller(C::GetSnapshot),
            "ControllerGetVolumeHealth" => Capability::Controller(C::GetVolumeHealth),
            "ControllerListVolumeHealth" => Capability::Controller(C::ListVolumeHealth),
            "NodeGetVolumeHealth" => Capability::Node(NodeCapability::GetVolumeHealth),
            "NodeGetStorageHealth" => Capability::Node(NodeCapability::GetStorageHealth),
            "ControllerGetCapabilities" | "ValidateVolumeCapabilities" => {
                Capability::Plugin(PluginService::ControllerService)
            }
            "NodeStageVolume" | "NodeUnstageVolume" => Capability::Node(NodeCapability::StageUnstageVolume),
            "NodeGetVolumeStats" => Capability::Node(NodeCapability::GetVolumeStats),
            "NodeExpandVolume" => Capability::Node(NodeCapability::ExpandVolume),
            "GroupControllerGetCapabilities" => Capability::Plugin(PluginService::GroupControllerService),
            "CreateVolumeGroupSnapshot" | "DeleteVolumeGroupSnapshot" | "GetVolumeGroupSnapshot" => {
                Capability::Group(GroupCapability::CreateDeleteGetVolumeGroupSnapshot)
            }
            "GetMetadataAllocated" | "GetMetadataDelta" => Capability::Plugin(PluginService::SnapshotMetadataService),
            _ => return None,
        };
        Some(cap)
    }

    /// Every valid name in `scope`, for error messages.
    pub fn names_in(scope: &str) -> Vec<&'static str> {
        fn all<T: CapabilityName>(from: impl Fn(i32) -> Option<T>) -> Vec<&'static str> {
            (1..64).filter_map(from).map(|c| c.name()).collect()
        }
        match scope {
            "plugin" => all(|i| PluginService::try_from(i).ok()),
            "expansion" => all(|i| VolumeExpansion::try_from(i).ok()),
            "controller" => all(|i| ControllerCapability::try_from(i).ok()),
            "node" => all(|i| NodeCapability::try_from(i).ok()),
            "group" => all(|i| GroupCapability::try_from(i).ok()),
            _ => Vec::new(),
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.scope(), self.name())
    }
}

/// Why a capability reference was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CapabilityError(pub String);

impl FromStr for Capability {
    type Err = CapabilityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (scope, name) = s.split_once(':').ok_or_else(|| {
            CapabilityError(format!(
                "capability {s:?} needs a scope: one of {} followed by ':' (e.g. controller:CREATE_DELETE_VOLUME)",
                CAPABILITY_SCOPES.join(", ")
            ))
        })?;
        let found = match scope {
            "plugin" => PluginService::from_str_name(name).map(Capability::Plugin),
            "expansion" => VolumeExpansion::from_str_name(name).map(Capability::Expansion),
            "controller" => ControllerCapability::from_str_name(name).map(Capability::Controller),
            "node" => NodeCapability::from_str_name(name).map(Capability::Node),
            "group" => GroupCapability::from_str_name(name).map(Capability::Group),
            _ => {
                return Err(CapabilityError(format!(
                    "unknown capability scope {scope:?}; expected one of {}",
                    CAPABILITY_SCOPES.join(", ")
                )));
            }
        };
        match found {
            Some(c) if c.name() != "UNKNOWN" => Ok(c),
            _ => Err(CapabilityError(format!(
                "unknown {scope} capability {name:?}; expected one of {}",
                Capability::names_in(scope).join(", ")
            ))),
        }
    }
}

/// Why a fingerprint could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum FingerprintError {
    /// A required RPC failed.
    #[error("fingerprinting {endpoint}: {error}")]
    Rpc {
        /// Which endpoint.
        endpoint: Endpoint,
        /// The failed call.
        error: RpcError,
    },
    /// No endpoint was given at all.
    #[error("no endpoint to fingerprint")]
    NoEndpoint,
}

impl Fingerprint {
    /// Fingerprints a plugin through its controller connection (if any) and its node
    /// connections. A connection may appear in both roles (one `--endpoint`).
    pub async fn collect(
        controller: Option<&Connection>,
        nodes: &[Connection],
    ) -> Result<Fingerprint, FingerprintError> {
        // Its answers are checked against the response rules like any other; what they break
        // ends up in the notes (the scenarios that ask again report it as findings).
        let rules = crate::rules::RuleLog::new();
        let controller_checked = controller.map(|c| c.with_rules(&rules));
        let nodes_checked: Vec<Connection> = nodes.iter().map(|c| c.with_rules(&rules)).collect();
        let (controller, nodes) = (controller_checked.as_ref(), nodes_checked.as_slice());
        let first = controller.or(nodes.first()).ok_or(FingerprintError::NoEndpoint)?;
        let rpc_err = |conn: &Connection| {
            let endpoint = conn.endpoint().clone();
            move |error| FingerprintError::Rpc { endpoint, error }
        };
        // What each endpoint says about its Node service (and its plugin's name) does not
        // depend on what the plugin advertises, so every endpoint is asked at once, beside
        // the first endpoint's identity: a plugin behind a slow API answers the fingerprint
        // in three round trips, not nine. Errors and notes keep the order of a sequential
        // fingerprint.
        let node_answers = futures_util::future::join_all(nodes.iter().map(|conn| async move {
            let mut notes = Vec::new();
            let asks_name = conn.endpoint() != first.endpoint();
            let (info, name) = tokio::join!(node_info(conn, &mut notes), async {
                if asks_name { Some(plugin_info(conn).await) } else { None }
            });
            (info, name, notes)
        }));
        let mut notes = Vec::new();
        let identity = async {
            let (plugin, capabilities) = tokio::join!(plugin_info(first), plugin_capabilities(first, &mut notes));
            let (plugin, capabilities) = (plugin.map_err(rpc_err(first))?, capabilities.map_err(rpc_err(first))?);
            // Controller-side RPCs only when advertised: a node-only plugin gets none.
            let (mut controller_notes, mut group_notes) = (Vec::new(), Vec::new());
            let (controller_caps, group_caps) = match controller {
                Some(conn) => {
                    let services = &capabilities.services;
                    tokio::join!(
                        async {
                            if services.contains(&PluginService::ControllerService) {
                                Some(controller_capabilities(conn, &mut controller_notes).await)
                            } else {
                                None
                            }
                        },
                        async {
                            if services.contains(&PluginService::GroupControllerService) {
                                Some(group_capabilities(conn, &mut group_notes).await)
                            } else {
                                None
                            }
                        }
                    )
                }
                None => (None, None),
            };
            Ok::<_, FingerprintError>((plugin, capabilities, controller_caps, group_caps, controller_notes, group_notes))
        };
        let (identity, node_answers) = tokio::join!(identity, node_answers);
        let (plugin, capabilities, controller_caps, group_caps, controller_notes, group_notes) = identity?;

        let mut controller_info = None;
        let mut group_controller = None;
        if let Some(conn) = controller {
            // One endpoint in both roles (`--endpoint`) may be a node instance of a split
            // deployment: it advertises CONTROLLER_SERVICE (every instance reports the same
            // plugin capabilities, spec.md GetPluginCapabilities) without serving it. That is
            // no fault of the plugin; the run then has no controller.
            let shared_endpoint = nodes.iter().any(|n| n.endpoint() == conn.endpoint());
            notes.extend(controller_notes);
            match controller_caps {
                None => {}
                Some(Ok(caps)) => {
                    controller_info = Some(ControllerInfo { endpoint: conn.endpoint().clone(), capabilities: caps })
                }
                Some(Err(e)) if shared_endpoint && e.code == tonic::Code::Unimplemented => notes.push(format!(
                    "{} advertises CONTROLLER_SERVICE but does not serve the Controller service (ControllerGetCapabilities is \
                     UNIMPLEMENTED): a node instance of a split deployment; controller scenarios are skipped (give \
                     --controller-endpoint to test the controller)",
                    conn.endpoint()
                )),
                Some(Err(e)) => return Err(rpc_err(conn)(e)),
            }
            notes.extend(group_notes);
            match group_caps {
                None => {}
                Some(Ok(caps)) => group_controller = Some(GroupControllerInfo { capabilities: caps }),
                Some(Err(e)) if shared_endpoint && e.code == tonic::Code::Unimplemented => notes.push(format!(
                    "{} advertises GROUP_CONTROLLER_SERVICE but does not serve it (GroupControllerGetCapabilities is \
                     UNIMPLEMENTED): a node instance of a split deployment; group scenarios are skipped",
                    conn.endpoint()
                )),
                Some(Err(e)) => return Err(rpc_err(conn)(e)),
            }
        }

        let mut node_infos = Vec::new();
        for (conn, (info, name, node_notes)) in nodes.iter().zip(node_answers) {
            notes.extend(node_notes);
            match info {
                Ok(Some(mut info)) => {
                    info.plugin_name = match name {
                        Some(answer) => answer.map_err(rpc_err(conn))?.name,
                        None => plugin.name.clone(),
                    };
                    if info.plugin_name != plugin.name {
                        notes.push(format!(
                            "node endpoint {} reports plugin {:?}, the controller reports {:?}",
                            conn.endpoint(),
                            info.plugin_name,
                            plugin.name
                        ));
                    }
                    node_infos.push(info);
                }
                Ok(None) => notes.push(format!(
                    "{} does not serve the Node service (NodeGetCapabilities is UNIMPLEMENTED)",
                    conn.endpoint()
                )),
                Err(error) => return Err(rpc_err(conn)(error)),
            }
        }

        for violation in rules.take() {
            tracing::warn!("fingerprint: {violation}");
            notes.push(format!("answer rule broken: {violation}"));
        }
        let mut fingerprint = Fingerprint {
            plugin,
            capabilities,
            controller: controller_info,
            group_controller,
            nodes: node_infos,
            notes,
            spec: Assumed::infer(&[]),
        };
        fingerprint.spec = Assumed::infer(&fingerprint.version_evidence());
        Ok(fingerprint)
    }

    /// What the plugin advertises that only one spec version defines, as (`scope`, `NAME`),
    /// from every endpoint (a node capability counts when any node advertises it).
    fn version_evidence(&self) -> Vec<(&'static str, &'static str)> {
        let mut all: Vec<Capability> = self.advertised();
        all.extend(self.nodes.iter().flat_map(|n| n.capabilities.iter().map(|c| Capability::Node(*c))));
        let mut out: Vec<(&'static str, &'static str)> = all.into_iter().map(|c| (c.scope(), c.name())).collect();
        out.sort();
        out.dedup();
        out
    }

    /// Judge the plugin by `version`, as the operator states (`--spec-version`); `None`
    /// keeps the inferred one.
    pub fn state_spec_version(&mut self, version: Option<SpecVersion>) {
        if let Some(v) = version {
            self.spec = Assumed::stated(v, &self.version_evidence());
        }
    }

    /// Whether the plugin advertises `capability`. Node capabilities must be advertised by
    /// every node endpoint (and there must be at least one).
    pub fn supports(&self, capability: Capability) -> bool {
        match capability {
            Capability::Plugin(c) => self.capabilities.services.contains(&c),
            Capability::Expansion(c) => self.capabilities.volume_expansion.contains(&c),
            Capability::Controller(c) => self
                .controller
                .as_ref()
                .is_some_and(|ctl| ctl.capabilities.contains(&c)),
            Capability::Node(c) => {
                !self.nodes.is_empty() && self.nodes.iter().all(|n| n.capabilities.contains(&c))
            }
            Capability::Group(c) => self
                .group_controller
                .as_ref()
                .is_some_and(|g| g.capabilities.contains(&c)),
        }
    }

    /// Every advertised capability, as `scope:NAME` strings (for reports).
    pub fn advertised(&self) -> Vec<Capability> {
        let mut all: Vec<Capability> = Vec::new();
        all.extend(self.capabilities.services.iter().map(|c| Capability::Plugin(*c)));
        all.extend(self.capabilities.volume_expansion.iter().map(|c| Capability::Expansion(*c)));
        if let Some(ctl) = &self.controller {
            all.extend(ctl.capabilities.iter().map(|c| Capability::Controller(*c)));
        }
        if let Some(g) = &self.group_controller {
            all.extend(g.capabilities.iter().map(|c| Capability::Group(*c)));
        }
        let node_caps: BTreeSet<NodeCapability> = self
            .nodes
            .iter()
            .flat_map(|n| n.capabilities.iter().copied())
            .filter(|c| self.supports(Capability::Node(*c)))
            .collect();
        all.extend(node_caps.into_iter().map(Capability::Node));
        all
    }

    /// A readable, aligned table for the console.
    pub fn to_table(&self) -> String {
        let mut rows: Vec<(String, String)> = Vec::new();
        let join = |v: Vec<&str>| if v.is_empty() { "(none)".to_owned() } else { v.join(", ") };
        rows.push(("plugin".into(), self.plugin.name.clone()));
        rows.push(("version".into(), self.plugin.vendor_version.clone()));
        rows.push(("endpoint".into(), self.plugin.endpoint.to_string()));
        for (k, v) in &self.plugin.manifest {
            rows.push((format!("manifest.{k}"), v.clone()));
        }
        rows.push((
            "plugin capabilities".into(),
            join(self.capabilities.services.iter().map(|c| c.name()).collect()),
        ));
        rows.push((
            "volume expansion".into(),
            join(self.capabilities.volume_expansion.iter().map(|c| c.name()).collect()),
        ));
        match &self.controller {
            Some(ctl) => {
                rows.push(("controller endpoint".into(), ctl.endpoint.to_string()));
                rows.push((
                    "controller capabilities".into(),
                    join(ctl.capabilities.iter().map(|c| c.name()).collect()),
                ));
            }
            None => rows.push(("controller".into(), "(not advertised)".into())),
        }
        if let Some(g) = &self.group_controller {
            rows.push((
                "group controller capabilities".into(),
                join(g.capabilities.iter().map(|c| c.name()).collect()),
            ));
        }
        if self.nodes.is_empty() {
            rows.push(("node".into(), "(no node service)".into()));
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let prefix = if self.nodes.len() == 1 { "node".to_owned() } else { format!("node[{i}]") };
            rows.push((format!("{prefix} endpoint"), node.endpoint.to_string()));
            rows.push((format!("{prefix} id"), node.node_id.clone()));
            rows.push((
                format!("{prefix} capabilities"),
                join(node.capabilities.iter().map(|c| c.name()).collect()),
            ));
            rows.push((
                format!("{prefix} max volumes"),
                if node.max_volumes_per_node == 0 {
                    "(no limit reported)".into()
                } else {
                    node.max_volumes_per_node.to_string()
                },
            ));
            if let Some(topology) = &node.topology {
                let segs: Vec<String> = topology.iter().map(|(k, v)| format!("{k}={v}")).collect();
                rows.push((format!("{prefix} topology"), segs.join(", ")));
            }
        }
        rows.push(("spec version".into(), format!("CSI v{} ({})", self.spec.version, self.spec.reason)));
        for note in &self.notes {
            rows.push(("note".into(), note.clone()));
        }
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut out = String::new();
        for (k, v) in rows {
            out.push_str(&format!("{k:<width$}  {v}\n"));
        }
        out
    }
}

async fn plugin_info(conn: &Connection) -> Result<PluginInfo, RpcError> {
    let mut client = conn.identity();
    let info = conn
        .call("GetPluginInfo", v1::GetPluginInfoRequest {}, |r| async move {
            client.get_plugin_info(r).await
        })
        .await?;
    Ok(PluginInfo {
        endpoint: conn.endpoint().clone(),
        name: info.name,
        vendor_version: info.vendor_version,
        manifest: info.manifest.into_iter().collect(),
    })
}

/// The capability values a plugin advertised that CSI v1.12 defines. Each entry is the enum's
/// wire value, or `None` for a capability message with nothing set; every undefined value
/// (UNKNOWN included) and every empty message is noted for the operator instead.
fn known<T>(what: &str, values: impl IntoIterator<Item = Option<i32>>, notes: &mut Vec<String>) -> BTreeSet<T>
where
    T: TryFrom<i32> + CapabilityName + Ord,
{
    let mut set = BTreeSet::new();
    for value in values {
        match value {
            None => notes.push(format!("the plugin advertises an empty {what}")),
            Some(v) => match T::try_from(v) {
                Ok(t) if t.name() != "UNKNOWN" => {
                    set.insert(t);
                }
                _ => notes.push(format!("the plugin advertises {what} {v}, which neither CSI v1.12 nor v1.13 defines")),
            },
        }
    }
    set
}

async fn plugin_capabilities(conn: &Connection, notes: &mut Vec<String>) -> Result<PluginCapabilities, RpcError> {
    let mut client = conn.identity();
    let response = conn
        .call("GetPluginCapabilities", v1::GetPluginCapabilitiesRequest {}, |r| async move {
            client.get_plugin_capabilities(r).await
        })
        .await?;
    let (mut services, mut expansion) = (Vec::new(), Vec::new());
    for cap in response.capabilities {
        match cap.r#type {
            Some(plugin_capability::Type::Service(s)) => services.push(Some(s.r#type)),
            Some(plugin_capability::Type::VolumeExpansion(e)) => expansion.push(Some(e.r#type)),
            // An empty capability: noted once, under the service kind.
            None => services.push(None),
        }
    }
    let caps = PluginCapabilities {
        services: known("plugin service capability", services, notes),
        volume_expansion: known("volume expansion capability", expansion, notes),
    };
    Ok(caps)
}

async fn controller_capabilities(
    conn: &Connection,
    notes: &mut Vec<String>,
) -> Result<BTreeSet<ControllerCapability>, RpcError> {
    let mut client = conn.controller();
    let response = conn
        .call("ControllerGetCapabilities", v1::ControllerGetCapabilitiesRequest {}, |r| async move {
            client.controller_get_capabilities(r).await
        })
        .await?;
    let values = response.capabilities.into_iter().map(|c| c.r#type.map(|controller_service_capability::Type::Rpc(rpc)| rpc.r#type));
    Ok(known("controller capability", values, notes))
}

async fn group_capabilities(conn: &Connection, notes: &mut Vec<String>) -> Result<BTreeSet<GroupCapability>, RpcError> {
    let mut client = conn.group_controller();
    let response = conn
        .call(
            "GroupControllerGetCapabilities",
            v1::GroupControllerGetCapabilitiesRequest {},
            |r| async move { client.group_controller_get_capabilities(r).await },
        )
        .await?;
    let values = response.capabilities.into_iter().map(|c| c.r#type.map(|group_controller_service_capability::Type::Rpc(rpc)| rpc.r#type));
    Ok(known("group controller capability", values, notes))
}

/// NodeGetCapabilities + NodeGetInfo; `None` when the endpoint does not serve the Node service.
async fn node_info(conn: &Connection, notes: &mut Vec<String>) -> Result<Option<NodeInfo>, RpcError> {
    let mut client = conn.node();
    let response = match conn
        .call("NodeGetCapabilities", v1::NodeGetCapabilitiesRequest {}, |r| async move {
            client.node_get_capabilities(r).await
        })
        .await
    {
        Ok(r) => r,
        Err(e) if e.code == tonic::Code::Unimplemented => return Ok(None),
        Err(e) => return Err(e),
    };
    let values = response.capabilities.into_iter().map(|c| c.r#type.map(|node_service_capability::Type::Rpc(rpc)| rpc.r#type));
    let capabilities = known("node capability", values, notes);
    let mut client = conn.node();
    let info = conn
        .call("NodeGetInfo", v1::NodeGetInfoRequest {}, |r| async move {
            client.node_get_info(r).await
        })
        .await?;
    Ok(Some(NodeInfo {
        endpoint: conn.endpoint().clone(),
        plugin_name: String::new(),
        capabilities,
        node_id: info.node_id,
        max_volumes_per_node: info.max_volumes_per_node,
        topology: info
            .accessible_topology
            .map(|t| t.segments.into_iter().collect()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_defined_capabilities_are_kept_and_the_rest_are_noted() {
        let mut notes = Vec::new();
        let set: BTreeSet<ControllerCapability> = known("controller capability", [Some(1), Some(0), Some(99), None, Some(1)], &mut notes);
        assert_eq!(set.into_iter().collect::<Vec<_>>(), [ControllerCapability::CreateDeleteVolume]);
        assert_eq!(
            notes,
            [
                "the plugin advertises controller capability 0, which neither CSI v1.12 nor v1.13 defines",
                "the plugin advertises controller capability 99, which neither CSI v1.12 nor v1.13 defines",
                "the plugin advertises an empty controller capability",
            ]
        );
    }

    #[test]
    fn capabilities_parse_with_scope_and_list_alternatives_on_error() {
        assert_eq!(
            "controller:CREATE_DELETE_VOLUME".parse::<Capability>().unwrap(),
            Capability::Controller(ControllerCapability::CreateDeleteVolume)
        );
        assert_eq!(
            "node:STAGE_UNSTAGE_VOLUME".parse::<Capability>().unwrap().to_string(),
            "node:STAGE_UNSTAGE_VOLUME"
        );
        let e = "controller:CREATE_VOLUME".parse::<Capability>().unwrap_err().0;
        assert!(e.contains("CREATE_DELETE_VOLUME"), "{e}");
        let e = "LIST_VOLUMES".parse::<Capability>().unwrap_err().0;
        assert!(e.contains("needs a scope"), "{e}");
        assert!("controller:UNKNOWN".parse::<Capability>().is_err());
        assert!("disk:X".parse::<Capability>().unwrap_err().0.contains("unknown capability scope"));
    }

    #[test]
    fn every_serving_capability_names_a_real_rpc_and_mandatory_rpcs_have_none() {
        let methods: Vec<String> = crate::proto::all_methods().map(|m| m.name().to_owned()).collect();
        let served: Vec<&String> = methods.iter().filter(|m| Capability::serving(m).is_some()).collect();
        assert_eq!(served.len(), 29, "a name in `serving` is not an RPC: {served:?}");
        for rpc in ["Probe", "GetPluginInfo", "NodePublishVolume", "NodeGetInfo", "NodeGetCapabilities", "NotAnRpc"] {
            assert_eq!(Capability::serving(rpc), None, "{rpc}");
        }
        assert_eq!(
            Capability::serving("ControllerUnpublishVolume").unwrap().to_string(),
            "controller:PUBLISH_UNPUBLISH_VOLUME"
        );
    }
}
