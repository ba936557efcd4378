//! The reference plugin's command line ([`Args`]), its validated [`Config`], endpoints,
//! duration/size parsing, and which capabilities it advertises ([`Capabilities`]).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use crate::proto::v1::{
    controller_service_capability::rpc::Type as ControllerRpc,
    group_controller_service_capability::rpc::Type as GroupRpc,
    node_service_capability::rpc::Type as NodeRpc,
    plugin_capability::service::Type as PluginService,
    self as v1,
};
use crate::secrets::Secrets;
use crate::version::SpecVersion;

use super::Error;
use super::quirks::Quirk;

/// Command-line arguments of `csi-conform reference-plugin`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Where to listen: `unix:///abs/path.sock`, `unix:relative.sock`, a bare path, or
    /// `tcp://host:port`. Required to serve (not for `--list-quirks`).
    #[arg(long, env = "CSI_ENDPOINT", value_name = "E")]
    pub endpoint: Option<String>,

    /// Keep state in DIR (shared by several plugin processes at once); in memory otherwise.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Do not advertise (or serve) a capability, e.g. `PUBLISH_UNPUBLISH_VOLUME`,
    /// `node:EXPAND_VOLUME`, `ONLINE`. Repeatable.
    #[arg(long, value_name = "CAP")]
    pub disable: Vec<String>,

    /// Serve only the Identity and Node services.
    #[arg(long, conflicts_with = "controller_only")]
    pub node_only: bool,

    /// Serve only the Identity, Controller, GroupController and SnapshotMetadata services.
    #[arg(long)]
    pub controller_only: bool,

    /// The node id this plugin reports and serves.
    #[arg(long, value_name = "ID", default_value = "csi-conform-node-1")]
    pub node_id: String,

    /// NodeGetInfo's max_volumes_per_node, enforced by ControllerPublishVolume.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_volumes_per_node: i64,

    /// Require the secrets of this csi-sanity style secrets file on every RPC that carries
    /// secrets.
    #[arg(long, value_name = "FILE")]
    pub require_secrets: Option<PathBuf>,

    /// Require volume_context and publish_context wherever the CO must pass them.
    #[arg(long)]
    pub require_context: bool,

    /// Sleep this long before answering every RPC (e.g. `20ms`).
    #[arg(long, value_name = "DUR", default_value = "0", value_parser = crate::units::parse_duration)]
    pub latency: Duration,

    /// CreateVolume makes the volume, then waits this long before answering: an answer
    /// that comes after a caller's shorter deadline (its call is then in doubt).
    #[arg(long, value_name = "DUR", default_value = "0", value_parser = crate::units::parse_duration)]
    pub create_answer_delay: Duration,

    /// Snapshots report ready_to_use=false until this long after they were cut.
    #[arg(long, value_name = "DUR", default_value = "0", value_parser = crate::units::parse_duration)]
    pub snapshot_ready_after: Duration,

    /// Probe reports ready=false until this long after start.
    #[arg(long, value_name = "DUR", default_value = "0", value_parser = crate::units::parse_duration)]
    pub ready_after: Duration,

    /// The plugin name GetPluginInfo reports.
    #[arg(long, default_value = DEFAULT_NAME)]
    pub name: String,

    /// The vendor_version GetPluginInfo reports (default: csi-conform's own), e.g. to act one
    /// instance of a deployment in the middle of an upgrade.
    #[arg(long, value_name = "V", default_value = env!("CARGO_PKG_VERSION"))]
    pub vendor_version: String,

    /// Total pool capacity (bytes; `Ki`/`Mi`/`Gi`/`Ti` suffixes allowed).
    #[arg(long, value_name = "BYTES", default_value = "1Ti", value_parser = crate::units::parse_bytes)]
    pub capacity: i64,

    /// Largest volume (bytes; suffixes allowed).
    #[arg(long, value_name = "BYTES", default_value = "1Ti", value_parser = crate::units::parse_bytes)]
    pub max_volume_size: i64,

    /// Allocate like real storage (as kubernetes-csi's hostpath plugin does): every block
    /// volume takes its whole size on the file system of `--data-dir` (fallocate), snapshots
    /// and clones copy every byte, and a full file system fails CreateVolume with UNKNOWN "no
    /// space left on device". GetCapacity still reports `--capacity`, however much the disk
    /// has. Without it, block volumes are sparse files.
    #[arg(long)]
    pub allocate: bool,

    /// Keep the volumes' and snapshots' bytes in DIR (default: `--state-dir`, else a private
    /// temporary directory), e.g. on a disk while the state stays in memory.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Misbehave on purpose the way some real plugins do (see `--list-quirks`). Repeatable.
    #[arg(long = "quirk", value_name = "NAME")]
    pub quirks: Vec<Quirk>,

    /// Print every quirk's name and description, then exit.
    #[arg(long)]
    pub list_quirks: bool,

    /// Move into a mount namespace of its own at start (as a containerized plugin lives):
    /// its mounts are then seen by it alone, not by the process that started it. Needs
    /// CAP_SYS_ADMIN.
    #[arg(long)]
    pub private_mounts: bool,

    /// The CSI spec version to speak: `1.13` (the default: volume and storage health, snapshot
    /// topology, no VOLUME_CONDITION) or `1.12` (VOLUME_CONDITION, as before v1.13).
    #[arg(long, value_name = "V", default_value = "1.13")]
    pub spec_version: SpecVersion,

    /// What NodeGetStorageHealth reports (v1.13), `STATUS:Reason` (STORAGE_DEGRADED or
    /// STORAGE_UNREACHABLE and a CamelCase reason), e.g. `STORAGE_DEGRADED:PoolNearlyFull`.
    /// Repeatable; none: the storage is healthy. A volume reports adverse health when created
    /// with the parameter `csi-conform.dev/health: STATUS:Reason[,STATUS:Reason...]`.
    #[arg(long, value_name = "STATUS:REASON")]
    pub storage_health: Vec<String>,
}

/// The default plugin name.
pub const DEFAULT_NAME: &str = "reference.csi-conform.dev";
/// The default node id.
pub const DEFAULT_NODE_ID: &str = "csi-conform-node-1";
/// The topology key of every segment this plugin reports.
pub const TOPOLOGY_KEY: &str = "topology.csi-conform.dev/node";
/// One gibibyte, the capacity of volumes created without a capacity range.
pub const GIB: i64 = 1 << 30;
/// One tebibyte, the default pool and maximum volume size.
pub const TIB: i64 = 1 << 40;
/// The mutable parameters ControllerModifyVolume accepts by default.
pub const DEFAULT_MUTABLE_KEYS: [&str; 2] = ["iops", "throughput"];

/// Which services this instance serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Identity, Controller, GroupController, SnapshotMetadata and Node.
    #[default]
    All,
    /// Identity and Node only. CONTROLLER_SERVICE (and the other controller-side services)
    /// are advertised only when the node shares a state directory with a controller, since
    /// every instance of a deployment reports the same plugin capabilities.
    NodeOnly,
    /// Identity, Controller, GroupController and SnapshotMetadata.
    ControllerOnly,
}

impl Mode {
    /// Whether the Controller (and group/metadata) services are served.
    pub fn serves_controller(self) -> bool {
        self != Mode::NodeOnly
    }
    /// Whether the Node service is served.
    pub fn serves_node(self) -> bool {
        self != Mode::ControllerOnly
    }
}


/// Capabilities switched off with `--disable`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Disabled {
    /// PluginCapability.Service.Type values.
    pub plugin: BTreeSet<i32>,
    /// Whether VolumeExpansion ONLINE is disabled.
    pub online_expansion: bool,
    /// ControllerServiceCapability.RPC.Type values.
    pub controller: BTreeSet<i32>,
    /// NodeServiceCapability.RPC.Type values.
    pub node: BTreeSet<i32>,
    /// GroupControllerServiceCapability.RPC.Type values.
    pub group: BTreeSet<i32>,
}

const PLUGIN_SERVICES: [PluginService; 5] = [
    PluginService::ControllerService,
    PluginService::VolumeAccessibilityConstraints,
    PluginService::GroupControllerService,
    PluginService::SnapshotMetadataService,
    PluginService::SnapshotAccessibilityConstraints,
];

/// Every controller RPC capability of either spec version, in enum order.
pub const CONTROLLER_RPCS: [ControllerRpc; 17] = [
    ControllerRpc::CreateDeleteVolume,
    ControllerRpc::PublishUnpublishVolume,
    ControllerRpc::ListVolumes,
    ControllerRpc::GetCapacity,
    ControllerRpc::CreateDeleteSnapshot,
    ControllerRpc::ListSnapshots,
    ControllerRpc::CloneVolume,
    ControllerRpc::PublishReadonly,
    ControllerRpc::ExpandVolume,
    ControllerRpc::ListVolumesPublishedNodes,
    ControllerRpc::VolumeCondition,
    ControllerRpc::GetVolume,
    ControllerRpc::SingleNodeMultiWriter,
    ControllerRpc::ModifyVolume,
    ControllerRpc::GetSnapshot,
    ControllerRpc::GetVolumeHealth,
    ControllerRpc::ListVolumeHealth,
];

/// Every node RPC capability of either spec version, in enum order.
pub const NODE_RPCS: [NodeRpc; 8] = [
    NodeRpc::StageUnstageVolume,
    NodeRpc::GetVolumeStats,
    NodeRpc::ExpandVolume,
    NodeRpc::VolumeCondition,
    NodeRpc::SingleNodeMultiWriter,
    NodeRpc::VolumeMountGroup,
    NodeRpc::GetVolumeHealth,
    NodeRpc::GetStorageHealth,
];

/// The health condition NodeGetStorageHealth reports: (StorageHealthErrorType, reason).
pub type StorageCondition = (v1::StorageHealthErrorType, String);

/// Parses `STATUS:Reason` for `--storage-health`.
pub fn storage_condition(text: &str) -> Result<StorageCondition, Error> {
    let bad = || {
        Error::Config(format!(
            "--storage-health {text:?}: expected STATUS:Reason, STATUS one of STORAGE_DEGRADED, STORAGE_UNREACHABLE, and a non-empty Reason"
        ))
    };
    let (status, reason) = text.split_once(':').ok_or_else(bad)?;
    let status = v1::StorageHealthErrorType::from_str_name(status.trim()).filter(|s| *s as i32 != 0).ok_or_else(bad)?;
    let reason = reason.trim();
    // The reason is REQUIRED; the quirk `health-missing-reason` is how to leave it out.
    if reason.is_empty() {
        return Err(bad());
    }
    Ok((status, reason.to_owned()))
}

const GROUP_RPCS: [GroupRpc; 1] = [GroupRpc::CreateDeleteGetVolumeGroupSnapshot];

const ONLINE: &str = "ONLINE";

impl Disabled {
    /// Every name `--disable` accepts (bare names; prefix with `plugin:`, `controller:`,
    /// `node:` or `group:` to pick one service).
    pub fn valid_names() -> Vec<String> {
        let mut names: BTreeSet<String> = BTreeSet::new();
        names.extend(PLUGIN_SERVICES.iter().map(|t| t.as_str_name().to_owned()));
        names.insert(ONLINE.to_owned());
        names.extend(CONTROLLER_RPCS.iter().map(|t| t.as_str_name().to_owned()));
        names.extend(NODE_RPCS.iter().map(|t| t.as_str_name().to_owned()));
        names.extend(GROUP_RPCS.iter().map(|t| t.as_str_name().to_owned()));
        names.into_iter().collect()
    }

    /// Disables one capability by name; bare names present in several services (e.g.
    /// `EXPAND_VOLUME`) disable all of them.
    pub fn add(&mut self, spec: &str) -> Result<(), Error> {
        let spec = spec.trim();
        let (scope, name) = match spec.split_once(':') {
            Some((scope, name)) => (Some(scope.to_ascii_lowercase()), name.trim()),
            None => (None, spec),
        };
        let name = name.to_ascii_uppercase();
        if let Some(s) = &scope
            && !["plugin", "controller", "node", "group"].contains(&s.as_str())
        {
            return Err(Error::Config(format!(
                "--disable {spec:?}: unknown scope {s:?} (use plugin:, controller:, node: or group:)"
            )));
        }
        let in_scope = |s: &str| scope.as_deref().is_none_or(|x| x == s);
        let mut hit = false;
        if in_scope("plugin") {
            if let Some(t) = PLUGIN_SERVICES.iter().find(|t| t.as_str_name() == name) {
                self.plugin.insert(*t as i32);
                hit = true;
            }
            if name == ONLINE {
                self.online_expansion = true;
                hit = true;
            }
        }
        if in_scope("controller")
            && let Some(t) = CONTROLLER_RPCS.iter().find(|t| t.as_str_name() == name)
        {
            self.controller.insert(*t as i32);
            hit = true;
        }
        if in_scope("node")
            && let Some(t) = NODE_RPCS.iter().find(|t| t.as_str_name() == name)
        {
            self.node.insert(*t as i32);
            hit = true;
        }
        if in_scope("group")
            && let Some(t) = GROUP_RPCS.iter().find(|t| t.as_str_name() == name)
        {
            self.group.insert(*t as i32);
            hit = true;
        }
        if hit {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "--disable {spec:?}: unknown capability; valid names: {}",
                Disabled::valid_names().join(", ")
            )))
        }
    }
}

/// The validated configuration of a reference plugin instance.
#[derive(Debug, Clone)]
pub struct Config {
    /// GetPluginInfo's name.
    pub name: String,
    /// GetPluginInfo's vendor_version.
    pub vendor_version: String,
    /// This instance's node id.
    pub node_id: String,
    /// Which services are served.
    pub mode: Mode,
    /// Capabilities switched off.
    pub disabled: Disabled,
    /// Shared persistent state directory; `None` keeps state in memory.
    pub state_dir: Option<PathBuf>,
    /// NodeGetInfo's max_volumes_per_node (0 = no limit).
    pub max_volumes_per_node: i64,
    /// Secrets every RPC must carry.
    pub secrets: Option<Secrets>,
    /// Whether volume_context / publish_context are mandatory where the spec says "MUST be
    /// passed".
    pub require_context: bool,
    /// Delay before every answer.
    pub latency: Duration,
    /// Delay between making a volume and answering CreateVolume.
    pub create_answer_delay: Duration,
    /// How long a new snapshot reports ready_to_use=false.
    pub snapshot_ready_after: Duration,
    /// How long Probe reports ready=false.
    pub ready_after: Duration,
    /// Total pool capacity in bytes.
    pub capacity: i64,
    /// Largest volume in bytes.
    pub max_volume_size: i64,
    /// Block volumes and their copies take all their bytes (`--allocate`).
    pub allocate: bool,
    /// Where the backing stores live (`--data-dir`; none: the state directory, else a
    /// private temporary directory).
    pub data_dir: Option<PathBuf>,
    /// Mutable parameter keys CreateVolume / ControllerModifyVolume accept.
    pub mutable_keys: Vec<String>,
    /// Whether to create real bind mounts (only effective with CAP_SYS_ADMIN).
    pub real_mounts: bool,
    /// Deliberate misbehaviours (empty for the compliant plugin).
    pub quirks: BTreeSet<Quirk>,
    /// The CSI spec version it speaks.
    pub spec_version: SpecVersion,
    /// What NodeGetStorageHealth reports (empty: healthy).
    pub storage_health: Vec<StorageCondition>,
}

impl Default for Config {
    /// Everything enabled, in-memory state, default sizes and ids.
    fn default() -> Config {
        Config {
            name: DEFAULT_NAME.to_owned(),
            vendor_version: env!("CARGO_PKG_VERSION").to_owned(),
            node_id: DEFAULT_NODE_ID.to_owned(),
            mode: Mode::All,
            disabled: Disabled::default(),
            state_dir: None,
            max_volumes_per_node: 16,
            secrets: None,
            require_context: false,
            latency: Duration::ZERO,
            create_answer_delay: Duration::ZERO,
            snapshot_ready_after: Duration::ZERO,
            ready_after: Duration::ZERO,
            capacity: TIB,
            max_volume_size: TIB,
            allocate: false,
            data_dir: None,
            mutable_keys: DEFAULT_MUTABLE_KEYS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            real_mounts: true,
            quirks: BTreeSet::new(),
            spec_version: SpecVersion::V1_13,
            storage_health: Vec::new(),
        }
    }
}

impl Config {
    /// Validates the command line into a configuration (loads the secrets file).
    pub fn from_args(args: &Args) -> Result<Config, Error> {
        let mut disabled = Disabled::default();
        for spec in &args.disable {
            disabled.add(spec)?;
        }
        let mode = match (args.node_only, args.controller_only) {
            (true, true) => {
                return Err(Error::Config(
                    "--node-only and --controller-only exclude each other".into(),
                ));
            }
            (true, false) => Mode::NodeOnly,
            (false, true) => Mode::ControllerOnly,
            (false, false) => Mode::All,
        };
        let secrets = match &args.require_secrets {
            Some(file) => Some(Secrets::load(file)?),
            None => None,
        };
        let config = Config {
            name: args.name.clone(),
            vendor_version: args.vendor_version.clone(),
            node_id: args.node_id.clone(),
            mode,
            disabled,
            state_dir: args.state_dir.clone(),
            max_volumes_per_node: args.max_volumes_per_node,
            secrets,
            require_context: args.require_context,
            latency: args.latency,
            create_answer_delay: args.create_answer_delay,
            snapshot_ready_after: args.snapshot_ready_after,
            ready_after: args.ready_after,
            capacity: args.capacity,
            max_volume_size: args.max_volume_size,
            allocate: args.allocate,
            data_dir: args.data_dir.clone(),
            quirks: args.quirks.iter().copied().collect(),
            spec_version: args.spec_version,
            storage_health: args.storage_health.iter().map(|t| storage_condition(t)).collect::<Result<_, _>>()?,
            ..Config::default()
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks the values that the command line cannot check by type.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if !valid_plugin_name(&self.name) {
            return bad(format!(
                "--name {:?}: must be at most 63 characters of alphanumerics, '-' and '.', \
                 beginning and ending with an alphanumeric",
                self.name
            ));
        }
        if self.node_id.is_empty() || self.node_id.len() > 256 {
            return bad("--node-id must be 1 to 256 bytes".into());
        }
        if self.max_volumes_per_node < 0 {
            return bad("--max-volumes-per-node must not be negative".into());
        }
        if self.capacity <= 0 || self.max_volume_size <= 0 {
            return bad("--capacity and --max-volume-size must be positive".into());
        }
        Ok(())
    }

    /// The capabilities this configuration advertises.
    pub fn capabilities(&self) -> Capabilities {
        Capabilities::new(self)
    }
}

/// The spec's rule for GetPluginInfo.name.
fn valid_plugin_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

/// What an instance advertises, derived once from its [`Config`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// Plugin service capabilities (GetPluginCapabilities).
    pub plugin: Vec<PluginService>,
    /// Whether VolumeExpansion ONLINE is advertised.
    pub online_expansion: bool,
    /// Controller capabilities (ControllerGetCapabilities).
    pub controller: Vec<ControllerRpc>,
    /// Node capabilities (NodeGetCapabilities).
    pub node: Vec<NodeRpc>,
    /// Group controller capabilities.
    pub group: Vec<GroupRpc>,
}

impl Capabilities {
    fn new(config: &Config) -> Capabilities {
        let d = &config.disabled;
        let version = config.spec_version;
        let defined = |scope: &str, name: &str| version.defines(scope, name);
        let lies = |q: Quirk| config.quirks.contains(&q);
        let plugin = PLUGIN_SERVICES
            .into_iter()
            .filter(|t| !d.plugin.contains(&(*t as i32)))
            .filter(|t| defined("plugin", t.as_str_name()))
            // It sets snapshot topology all the same (see the quirk).
            .filter(|t| !(lies(Quirk::SnapshotTopologyWithoutCapability) && *t == PluginService::SnapshotAccessibilityConstraints))
            // GetPluginCapabilities is the grand sum of the deployment, the same on every
            // instance (spec.md, GetPluginCapabilities): a node that shares its state with a
            // controller (a state directory) reports the controller's services too; only a
            // standalone node plugin (no state directory) has none.
            .filter(|t| {
                config.mode.serves_controller()
                    || config.state_dir.is_some()
                    || *t == PluginService::VolumeAccessibilityConstraints
            })
            .collect::<Vec<_>>();
        // Snapshot topology is the volumes' topology: none without it.
        let topology = plugin.contains(&PluginService::VolumeAccessibilityConstraints);
        let plugin: Vec<PluginService> =
            plugin.into_iter().filter(|t| topology || *t != PluginService::SnapshotAccessibilityConstraints).collect();
        let controller: Vec<ControllerRpc> = CONTROLLER_RPCS
            .into_iter()
            .filter(|t| !d.controller.contains(&(*t as i32)))
            .filter(|t| defined("controller", t.as_str_name()))
            .filter(|t| !(lies(Quirk::ListHealthWithoutGet) && *t == ControllerRpc::GetVolumeHealth))
            .collect();
        let node: Vec<NodeRpc> = NODE_RPCS
            .into_iter()
            .filter(|t| !d.node.contains(&(*t as i32)))
            .filter(|t| defined("node", t.as_str_name()))
            .collect();
        // Capabilities that need another (spec.md, ControllerGetCapabilities and
        // GetPluginCapabilities): LIST_VOLUMES_PUBLISHED_NODES needs PUBLISH_UNPUBLISH_VOLUME,
        // ONLINE expansion needs an EXPAND_VOLUME. Disabling the one withdraws the other.
        // LIST_VOLUME_HEALTH needs GET_VOLUME_HEALTH (v1.13), unless the quirk lies.
        let publishes = controller.contains(&ControllerRpc::PublishUnpublishVolume);
        let gets_health =
            controller.contains(&ControllerRpc::GetVolumeHealth) || lies(Quirk::ListHealthWithoutGet);
        let controller: Vec<ControllerRpc> = controller
            .into_iter()
            .filter(|t| publishes || *t != ControllerRpc::ListVolumesPublishedNodes)
            .filter(|t| gets_health || *t != ControllerRpc::ListVolumeHealth)
            .collect();
        let expands = controller.contains(&ControllerRpc::ExpandVolume) || node.contains(&NodeRpc::ExpandVolume);
        Capabilities {
            plugin,
            online_expansion: !d.online_expansion && expands,
            controller,
            node,
            group: GROUP_RPCS
                .into_iter()
                .filter(|t| !d.group.contains(&(*t as i32)))
                .collect(),
        }
    }

    /// Whether a plugin service capability is advertised.
    pub fn has_plugin(&self, t: PluginService) -> bool {
        self.plugin.contains(&t)
    }
    /// Whether a controller capability is advertised.
    pub fn has_controller(&self, t: ControllerRpc) -> bool {
        self.controller.contains(&t)
    }
    /// Whether a node capability is advertised.
    pub fn has_node(&self, t: NodeRpc) -> bool {
        self.node.contains(&t)
    }
    /// Whether a group controller capability is advertised.
    pub fn has_group(&self, t: GroupRpc) -> bool {
        self.group.contains(&t)
    }
    /// Whether topology is reported (VOLUME_ACCESSIBILITY_CONSTRAINTS).
    pub fn topology(&self) -> bool {
        self.has_plugin(PluginService::VolumeAccessibilityConstraints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;


    #[test]
    fn disable_accepts_bare_and_scoped_names() {
        let mut d = Disabled::default();
        d.add("EXPAND_VOLUME").unwrap();
        assert!(d.controller.contains(&(ControllerRpc::ExpandVolume as i32)));
        assert!(d.node.contains(&(NodeRpc::ExpandVolume as i32)));
        let mut d = Disabled::default();
        d.add("node:volume_condition").unwrap();
        assert!(d.node.contains(&(NodeRpc::VolumeCondition as i32)));
        assert!(d.controller.is_empty());
        d.add("ONLINE").unwrap();
        assert!(d.online_expansion);
        d.add("GROUP_CONTROLLER_SERVICE").unwrap();
        let err = d.add("PUBLISH_UNPUBLISH").unwrap_err().to_string();
        assert!(
            err.contains("valid names") && err.contains("PUBLISH_UNPUBLISH_VOLUME"),
            "{err}"
        );
        let err = d.add("node:CREATE_DELETE_VOLUME").unwrap_err().to_string();
        assert!(
            err.contains("\"node:CREATE_DELETE_VOLUME\": unknown capability; valid names"),
            "not a node capability: {err}"
        );
        let err = d.add("bogus:GET_VOLUME").unwrap_err().to_string();
        assert!(err.contains("unknown scope \"bogus\""), "{err}");
    }

    #[test]
    fn modes_shape_the_plugin_capabilities() {
        let all = Config::default().capabilities();
        assert_eq!(all.plugin.len(), 5);
        assert_eq!(all.controller.len(), 16, "v1.13: no VOLUME_CONDITION, two health RPCs");
        assert_eq!(all.node.len(), 7);
        assert!(!all.has_node(NodeRpc::VolumeCondition) && all.has_node(NodeRpc::GetStorageHealth));
        let v12 = Config { spec_version: SpecVersion::V1_12, ..Config::default() }.capabilities();
        assert_eq!((v12.plugin.len(), v12.controller.len(), v12.node.len()), (4, 15, 6), "v1.12 as before");
        assert!(v12.has_controller(ControllerRpc::VolumeCondition) && !v12.has_controller(ControllerRpc::GetVolumeHealth));
        let liar = Config { quirks: [Quirk::ListHealthWithoutGet].into(), ..Config::default() }.capabilities();
        assert!(liar.has_controller(ControllerRpc::ListVolumeHealth) && !liar.has_controller(ControllerRpc::GetVolumeHealth));
        let mut disabled = Disabled::default();
        disabled.add("controller:GET_VOLUME_HEALTH").unwrap();
        let honest = Config { disabled, ..Config::default() }.capabilities();
        assert!(!honest.has_controller(ControllerRpc::ListVolumeHealth), "LIST_VOLUME_HEALTH needs GET_VOLUME_HEALTH");
        let node_only = Config {
            mode: Mode::NodeOnly,
            ..Config::default()
        }
        .capabilities();
        assert_eq!(
            node_only.plugin,
            vec![PluginService::VolumeAccessibilityConstraints]
        );
        let mut config = Config::default();
        config
            .disabled
            .add("controller:SINGLE_NODE_MULTI_WRITER")
            .unwrap();
        let caps = config.capabilities();
        assert!(!caps.has_controller(ControllerRpc::SingleNodeMultiWriter));
        assert!(caps.has_node(NodeRpc::SingleNodeMultiWriter));
    }

    #[test]
    fn capabilities_that_need_another_go_with_it() {
        let mut disabled = Disabled::default();
        disabled.add("PUBLISH_UNPUBLISH_VOLUME").unwrap();
        let caps = Config { disabled, ..Config::default() }.capabilities();
        assert!(!caps.has_controller(ControllerRpc::ListVolumesPublishedNodes));
        assert!(caps.online_expansion, "the EXPAND_VOLUMEs are still there");
        let mut disabled = Disabled::default();
        disabled.add("EXPAND_VOLUME").unwrap();
        let caps = Config { disabled, ..Config::default() }.capabilities();
        assert!(!caps.online_expansion, "ONLINE needs an EXPAND_VOLUME");
        assert!(caps.has_controller(ControllerRpc::ListVolumesPublishedNodes));
    }

    #[test]
    fn config_validation_rejects_bad_names() {
        let refused = |config: Config| config.validate().expect_err("refused").to_string();
        for name in ["-bad".to_owned(), "a".repeat(64)] {
            let err = refused(Config { name: name.clone(), ..Config::default() });
            assert!(err.contains(&format!("--name {name:?}: must be at most 63 characters")), "{err}");
        }
        let err = refused(Config { node_id: String::new(), ..Config::default() });
        assert!(err.contains("--node-id must be 1 to 256 bytes"), "{err}");
        let err = refused(Config { max_volumes_per_node: -1, ..Config::default() });
        assert!(err.contains("--max-volumes-per-node must not be negative"), "{err}");
        let err = refused(Config { capacity: 0, ..Config::default() });
        assert!(err.contains("--capacity and --max-volume-size must be positive"), "{err}");
        assert!(Config::default().validate().is_ok());
    }
}
