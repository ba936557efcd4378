//! What Docker Swarm does at each point where the CSI spec leaves a choice to the CO, one
//! [`Behaviour`] per row of its table in `docs/orchestrators.md` (same ids, same order; a
//! unit test keeps the two equal). Summaries in our own words; sources are paths in the
//! orchestrator's public repository or issue numbers.

use super::{Behaviour, Release, row};

/// The oldest release the table describes: Docker Engine 23.0, the first with cluster
/// volumes (CSI). No row is pinned further: which Engine release took swarmkit#3116
/// (`rpc.stage-without-capability`) was not found.
pub(super) const OLDEST: Release = Release::new(23, 0, 0);

/// Docker Swarm's behaviours.
pub(super) const BEHAVIOURS: &[Behaviour] = &[
    row(
        "paths.staging",
        "Stages at /data/staged/<swarm volume id>: one flat directory for every volume, named by Swarm's own object id (not the plugin's volume_id).",
        "swarmkit v2 (1cca63f)",
        "agent/csi/plugin/plugin.go stagePath, TargetStagePath",
    ),
    row(
        "paths.publish-mount",
        "Publishes at /data/published/<swarm volume id>; the host sees it through the plugin's propagated mount.",
        "swarmkit v2",
        "plugin.go publishPath, TargetPublishPath, GetPublishedPath",
    ),
    row(
        "paths.publish-block",
        "The same paths for block volumes.",
        "swarmkit v2",
        "plugin.go (no branch on access type)",
    ),
    row(
        "dirs.staging",
        "Makes no directory: neither /data/staged nor /data/staged/<id>.",
        "swarmkit v2, open (swarmkit#3197, moby#49780, 2025)",
        "plugin.go NodeStageVolume (no mkdir); moby/swarmkit#3197; ceph/ceph-csi#3769",
    ),
    row(
        "dirs.target",
        "Makes no target or parent either; /data/published exists only as the plugin's propagated mount.",
        "swarmkit v2",
        "plugin.go NodePublishVolume",
    ),
    row(
        "rpc.stage-without-capability",
        "Skips NodeStageVolume without STAGE_UNSTAGE_VOLUME and publishes with an empty staging path.",
        "fixed by swarmkit#3116 (Feb 2023)",
        "plugin.go NodeStageVolume, NodePublishVolume; moby/swarmkit#3116; hetznercloud/csi-driver#376",
    ),
    row(
        "rpc.unstage",
        "Never sends NodeUnstageVolume for a volume it staged: the agent returns early when the volume is in its own table and not published, which is exactly the staged case, so the plugin is never told.",
        "swarmkit v2; fix proposed in swarmkit#3178 (June 2024), open in the stored thread",
        "plugin.go NodeUnstageVolume; moby/swarmkit#3178",
    ),
    row(
        "rpc.detach-order",
        "The agent unpublishes (and \"unstages\") when the scheduler marks the volume pending node-unpublish; the manager calls ControllerUnpublishVolume once the node has reported, then drops the publish status.",
        "swarmkit v2",
        "manager/scheduler/volumes.go freeVolumes; manager/csi/manager.go handleVolume; agent/csi/volumes.go tryRemoveVolume",
    ),
    row(
        "rpc.retries",
        "Each node RPC is retried up to 20 times with a delay doubling from 1 ms; stage failures do not stop the publish attempt.",
        "early agent (725ebcc); the v2 agent not re-read",
        "agent/csi/volumes.go tryAddVolume, tryRemoveVolume",
    ),
    row(
        "fields.volume-context",
        "Sends the volume context CreateVolume returned to ControllerPublishVolume, NodeStageVolume and NodePublishVolume.",
        "swarmkit v2",
        "manager/csi/plugin.go makeControllerPublishVolumeRequest; agent/csi/plugin/plugin.go",
    ),
    row(
        "fields.publish-context",
        "Passes publish_context from ControllerPublishVolume to the node RPCs (through the volume assignment).",
        "swarmkit v2",
        "manager/csi/manager.go handleVolume; agent/csi/plugin/plugin.go",
    ),
    row(
        "fields.secrets",
        "One list of Swarm secrets per volume, sent on CreateVolume, DeleteVolume, ControllerPublish/Unpublish, NodeStage and NodePublish.",
        "swarmkit v2",
        "manager/csi/plugin.go makeSecrets; agent/csi/plugin/plugin.go makeSecrets",
    ),
    row(
        "fields.readonly",
        "Never sets readonly on NodePublishVolume or ControllerPublishVolume; read-only use is expressed only through the access mode (SINGLE_NODE_READER_ONLY, MULTI_NODE_READER_ONLY).",
        "swarmkit v2",
        "agent/csi/plugin/plugin.go NodePublishVolume, makeCapability; manager/csi/plugin.go makeControllerPublishVolumeRequest",
    ),
    row(
        "fields.capability",
        "Node RPCs get the volume's access type and mode; a single-node volume with any sharing but read-only becomes SINGLE_NODE_WRITER.",
        "swarmkit v2",
        "agent/csi/plugin/plugin.go makeCapability; manager/csi/plugin.go makeControllerPublishVolumeRequest",
    ),
    row(
        "fields.expand-staging-path",
        "Swarm never expands a volume: neither ControllerExpandVolume nor NodeExpandVolume is ever called.",
        "swarmkit v2",
        "agent/csi/plugin/plugin.go NodePlugin interface; manager/csi/plugin.go Plugin interface (010b697)",
    ),
    row(
        "topology.match",
        "A volume fits a node if one of the volume's accessible topologies has all its segments equal in the node's topology (subset, like Kubernetes).",
        "swarmkit v2 (the node-topology gap as read)",
        "manager/csi/topology.go IsInTopology; manager/scheduler/volumes.go checkVolume; agent/csi/plugin/plugin.go makeNodeInfo",
    ),
    row(
        "topology.requisite",
        "CreateVolume's accessibility requirements are the volume spec's, given by the operator.",
        "swarmkit v2",
        "manager/csi/plugin.go makeCreateVolume",
    ),
    row(
        "validate.when",
        "Never calls ValidateVolumeCapabilities.",
        "swarmkit v2",
        "manager/csi/plugin.go (not in the Plugin interface)",
    ),
    row(
        "concurrency.controller",
        "The manager handles one volume at a time in a single worker, so controller RPCs never overlap anywhere in the cluster.",
        "swarmkit v2 (2b39716)",
        "manager/csi/manager.go run, processVolume",
    ),
    row(
        "concurrency.node",
        "Each node RPC holds the node plugin's lock for its whole duration: node RPCs to one plugin on one node are serialised.",
        "swarmkit v2",
        "agent/csi/plugin/plugin.go (np.mu held across each RPC)",
    ),
    row(
        "restart.node-plugin",
        "How the agent meets a node plugin restart is not read here; the same NodePublishVolume of a volume staged before the restart is assumed, so a plugin that forgot its stagings is filed here too, at its finding's level.",
        "(not read)",
        "agent/csi (not read for restarts)",
    ),
    row(
        "lost-node.controller-unpublish",
        "How the manager handles a ControllerUnpublishVolume refused for a node that is gone is not read here; the lost-node finding is filed at its own level.",
        "(not read)",
        "manager/csi/manager.go (not read for this case)",
    ),
    row(
        "lost-node.node-paths-gone",
        "The agent sends NodeUnpublishVolume, then NodeUnstageVolume, without looking at the paths; after a reboot its in-memory table is empty, so NodeUnstageVolume does reach the plugin (in normal running it is skipped, see rpc.unstage). Any error, NOT_FOUND included, is retried for ever (backoff up to 10 minutes) and the volume stays pending node unpublish: the manager sends ControllerUnpublishVolume only once the node reports both calls done. A forced volume remove is the way out.",
        "swarmkit main (3e72cb6, v2.1.2-88, Aug 2026); the files read unchanged since Feb 2024",
        "agent/csi/volumes.go unpublishVolume, tryVolume; volumequeue/queue.go; agent/csi/plugin/plugin.go NodeUnpublishVolume, NodeUnstageVolume; manager/dispatcher/dispatcher.go; manager/csi/manager.go handleVolume",
    ),
    row(
        "limits.max-volumes",
        "max_volumes_per_node is recorded but the volume placement code read does not enforce it.",
        "swarmkit v2 as read; other filters not read",
        "manager/scheduler/volumes.go checkVolume; agent/csi/plugin/plugin.go makeNodeInfo",
    ),
    row(
        "caps.required",
        "Without CONTROLLER_SERVICE the volume is not created through the plugin (its id is the volume's name); controller PUBLISH_UNPUBLISH_VOLUME decides whether ControllerPublishVolume is called; the node's STAGE_UNSTAGE_VOLUME decides staging.",
        "swarmkit v2",
        "manager/csi/plugin.go init, CreateVolume, PublishVolume; agent/csi/plugin/plugin.go init",
    ),
];
