//! What Nomad does at each point where the CSI spec leaves a choice to the CO, one
//! [`Behaviour`] per row of its table in `docs/orchestrators.md` (same ids, same order; a
//! unit test keeps the two equal). Summaries in our own words; sources are paths in the
//! orchestrator's public repository or issue numbers.

use super::{Behaviour, CallPattern, Layout, Range, Release, row};

/// The oldest release the table describes: 1.3.0 brought the topology rule
/// (`topology.match`); what Nomad did before it is not known here.
pub(super) const OLDEST: Release = Release::new(1, 3, 0);

/// The first releases with the volume's namespace in the staging path (PR #20532, merged
/// May 2024, and its backports #20572 and #20573): the first release of each series after
/// the merge, inferred from the dates.
const NAMESPACED_STAGING: &[Release] = &[Release::new(1, 6, 11), Release::new(1, 7, 8), Release::new(1, 8, 0)];

/// The first releases with the per-plugin serialiser of controller RPCs (PR #17996, merged
/// July 2023 after 1.6.0, 1.5.7 and 1.4.11 were out, and its backports #18013 to #18015).
const SERIAL_CONTROLLER: &[Release] = &[Release::new(1, 4, 12), Release::new(1, 5, 8), Release::new(1, 6, 1)];

/// Nomad's current pattern, moved back to release `at`.
pub(super) fn pin(p: &mut CallPattern, at: Option<Release>) {
    if Range::Before(NAMESPACED_STAGING).holds(at) {
        p.layout = Layout::NomadNoNamespace;
    }
    if Range::Before(SERIAL_CONTROLLER).holds(at) {
        p.parallel_controller_publish = true;
    }
}

/// Nomad's behaviours.
pub(super) const BEHAVIOURS: &[Behaviour] = &[
    row(
        "paths.staging",
        "Stages at <mount_dir>/staging/<namespace>/<volume id>/<usage>, where <usage> is ro- or rw- followed by the attachment mode and access mode (rw-file-system-single-node-writer).",
        "since 1.6.11, 1.7.8, 1.8.0: releases from May 2024 on, the first of each series after PR #20532 and its backports merged (inferred from the merge dates)",
        "client/pluginmanager/csimanager/volume.go stagingDirForVolume; interface.go UsageOptions.ToFS; nomad#18741, PR #20532 (#20572, #20573)",
    )
    .since(NAMESPACED_STAGING),
    row(
        "paths.staging",
        "Stages at <mount_dir>/staging/<volume id>/<usage>, without the namespace: two volumes of one id in two namespaces share a staging path on a node.",
        "before 1.6.11, 1.7.8, 1.8.0",
        "client/pluginmanager/csimanager/volume.go stagingDirForVolume at 00e8d72; nomad#18741",
    )
    .before(NAMESPACED_STAGING),
    row(
        "paths.staging-per-usage",
        "The usage is part of the staging path, so one volume claimed on one node with two usages (one allocation read-only, another read-write) is staged twice, at two staging paths.",
        "all versions read",
        "volume.go stagingDirForVolume, usage_tracker.go (claims keyed by volume, namespace and usage)",
    ),
    row(
        "paths.publish-mount",
        "Publishes at <mount_dir>/per-alloc/<alloc id>/<volume id>/<usage>: one target per allocation, never shared.",
        "all versions read",
        "volume.go targetForVolume",
    ),
    row(
        "paths.publish-block",
        "Block volumes use the same target path as mount volumes; nothing marks it as a file.",
        "all versions read",
        "volume.go targetForVolume (no branch on the attachment mode)",
    ),
    row(
        "dirs.staging",
        "Makes the staging path itself (mode 0700, all parents) on the host before NodeStageVolume.",
        "all versions read",
        "volume.go ensureStagingDir",
    ),
    row(
        "dirs.target",
        "Makes the target's parent (per-alloc/<alloc>/<volume>) and leaves the target to the plugin.",
        "all versions read",
        "volume.go ensureAllocDir, unpublishVolume",
    ),
    row(
        "rpc.stage-if-mounted",
        "Decides \"already staged\" / \"already published\" by looking at the host's mount table: if the staging (or target) path is already a mount point it skips NodeStageVolume (or NodePublishVolume).",
        "all versions read",
        "volume.go ensureStagingDir, stageVolume, publishVolume",
    ),
    row(
        "rpc.stage-without-capability",
        "Calls NodeStageVolume/NodeUnstageVolume only when the node plugin advertised STAGE_UNSTAGE_VOLUME at its first fingerprint (the answer is cached); otherwise NodePublishVolume gets an empty staging path.",
        "all versions read",
        "csimanager/fingerprint.go fingerprint (requiresStaging), volume.go MountVolume, publishVolume",
    ),
    row(
        "rpc.unstage",
        "Unstages when the last claim of that volume *and usage* on the node is released (a usage tracker counts allocations per volume, namespace and usage).",
        "all versions read",
        "volume.go UnmountVolume; usage_tracker.go Free",
    ),
    row(
        "rpc.detach-order",
        "NodeUnpublishVolume → (NodeUnstageVolume if last) on the client, then ControllerUnpublishVolume from the server; the claim moves through taken → node-detached → controller-detached → ready-to-free.",
        "all versions read",
        "nomad/structs/csi.go CSIVolumeClaimState; plugins/csi/client.go ControllerUnpublishVolume, NodeUnstageVolume, NodeUnpublishVolume; the server side in nomad/csi_endpoint.go Unpublish (not re-read)",
    ),
    row(
        "rpc.retries",
        "NodeStage/NodePublish/NodeUnpublish/NodeUnstage are retried up to 3 times (exponential backoff from 100 ms, 2 minutes per try) on timeouts, UNAVAILABLE and RESOURCE_EXHAUSTED; other codes are final.",
        "all versions read",
        "volume.go (grpc_retry options on each call)",
    ),
    row(
        "fields.volume-context",
        "Sends the volume's context (what the operator registered, or for a created volume what CreateVolume returned: that it is stored from the answer was not re-read) on ControllerPublishVolume, ValidateVolumeCapabilities, NodeStageVolume and NodePublishVolume.",
        "node RPCs since 0.12.0 (PR #8239, June 2020); controller RPCs from PR #7957",
        "plugins/csi/plugin.go NodeStageVolumeRequest, NodePublishVolumeRequest, ControllerPublishVolumeRequest, ControllerValidateVolumeRequest (ToCSIRepresentation); nomad#7771",
    ),
    row(
        "fields.publish-context",
        "Passes ControllerPublishVolume's publish_context to NodeStageVolume and NodePublishVolume.",
        "all versions read",
        "volume.go stageVolume, publishVolume",
    ),
    row(
        "fields.secrets",
        "One secrets map per volume (secrets block of the volume spec) sent on every RPC that has a secrets field: CreateVolume, DeleteVolume, ValidateVolumeCapabilities, ControllerPublish/Unpublish, NodeStage, NodePublish, snapshots.",
        "stored main",
        "plugins/csi/plugin.go request types; volume.go (vol.Secrets)",
    ),
    row(
        "fields.readonly",
        "NodePublishVolume's readonly comes from the claim (read_only of the job's volume block).",
        "all versions read",
        "volume.go publishVolume; plugins/csi/plugin.go ControllerPublishVolumeRequest",
    ),
    row(
        "fields.mount-options",
        "The capability's fs_type and mount_flags are the volume's mount_options with the claim's merged over them field by field (a claim's flags replace the volume's as a whole).",
        "all versions read",
        "volume.go volumeCapability; nomad/structs/csi.go CSIMountOptions.Merge",
    ),
    row(
        "fields.pod-info",
        "Nothing like Kubernetes' pod information is added to the volume context.",
        "all versions read",
        "plugins/csi/plugin.go (context passed through untouched)",
    ),
    row(
        "fields.expand-staging-path",
        "When an operator grows a claimed volume, the client of each claim sends NodeExpandVolume with volume_path the claim's per-alloc target and staging_target_path the usage's staging path (for a plugin without STAGE_UNSTAGE_VOLUME, what it sends was not verified).",
        "since volume expansion (nomad#10324; release not pinned); the namespaced staging path since PR #25253 (March 2025, backported to 1.9.x), before it the namespace-free one (nomad#24465, 1.9.3)",
        "client/csi_endpoint.go NodeExpandVolume (stored 1f01264); plugins/csi/plugin.go NodeExpandVolumeRequest.ToCSIRepresentation; nomad#24465, PR #25253",
    ),
    row(
        "topology.match",
        "A volume with topologies is schedulable on a node only if the node plugin's accessible_topology is exactly equal (same keys, same values) to one of the volume's topologies.",
        "1.3.0 and later (PR #12129, Feb 2022)",
        "scheduler/feasible/feasible.go CSIVolumeChecker.isFeasible; nomad/structs/node.go CSITopology.Equal, MatchFound",
    ),
    row(
        "topology.requisite",
        "CreateVolume's accessibility requirements come from the operator's topology_request in the volume spec, not from the nodes.",
        "1.3.0 and later",
        "PR #12129 description; nomad/structs/node.go CSITopologyRequest",
    ),
    row(
        "validate.when",
        "Calls ValidateVolumeCapabilities when a volume is registered (nomad volume register), sending every capability of the volume spec, its context, parameters and secrets.",
        "stored main",
        "plugins/csi/client.go ControllerValidateCapabilities; call site in nomad/csi_endpoint.go (not re-read)",
    ),
    row(
        "validate.reconcile",
        "No confirmed at all is accepted (the message is only logged).",
        "stored main",
        "plugins/csi/client.go ControllerValidateCapabilities, compareCapabilities",
    ),
    row(
        "concurrency.controller",
        "Destructive controller RPCs (publish, unpublish, create, delete...) go through a per-plugin serializer: one at a time per plugin across the cluster.",
        "since 1.4.12, 1.5.8, 1.6.1: releases from July 2023 on, the first of each series after PR #17996 and its backports merged (1.6.0, 1.5.7 and 1.4.11 came out the day before; inferred from the dates)",
        "PR #17996 (#18013–#18015); nomad#8336",
    )
    .since(SERIAL_CONTROLLER),
    row(
        "concurrency.controller",
        "Controller RPCs for different volumes are sent as claims come: two ControllerPublishVolume calls for one node can overlap (the EBS device-name race).",
        "before 1.4.12, 1.5.8, 1.6.1",
        "PR #17996 (its description of the race); nomad#8336",
    )
    .before(SERIAL_CONTROLLER),
    row(
        "concurrency.node",
        "Node RPCs for one volume are serialised per volume on the client; different volumes proceed concurrently.",
        "releases from Sept 2025 on: main and the 1.10.x backport of PR #26832 (patch releases not pinned)",
        "PR #26832 (#26839)",
    ),
    row(
        "restart.node-plugin",
        "A node plugin that restarts leaves the volumes of running allocations alone: nothing is staged or published again for them; the client waits for the plugin to be healthy before it sends a volume's RPCs (also after a client restart, from the mounts it persisted), and a new allocation of a volume already staged on the node only gets NodePublishVolume from that staging. A plugin that forgot its stagings refuses it.",
        "since PR #17840 (July 2023; backported to 1.3.x, 1.4.x, 1.5.x; releases not pinned); the hands-off rule for running allocations in every release read",
        "nomad#13028, PR #17840, nomad#11999 (the maintainer's comment on plugin restarts), nomad#25813",
    ),
    row(
        "lost-node.controller-unpublish",
        "For an allocation on a node that is down or garbage collected, the server skips the node unpublish and sends ControllerUnpublishVolume for that node anyway; an error is retried by the volumewatcher and the claim is not freed until it answers OK, so the volume cannot be claimed elsewhere.",
        "since PR #13301 (June 2022; backported to 1.3.x, PR #14240); before it the release of such claims failed outright (nomad#12346)",
        "PR #13301, nomad#13264, nomad#12346",
    ),
    row(
        "lost-node.node-paths-gone",
        "The client sends NodeUnpublishVolume, then NodeUnstageVolume once no other allocation on the node uses the volume, without looking at the paths first. NOT_FOUND from either is taken as done. Another error from NodeUnpublishVolume is forgiven when Nomad can remove the (unmounted, empty) target directory itself, or when its message says \"no mount point\"; with the directory gone too it stands. Another error from NodeUnstageVolume always stands: the claim stays unpublishing, ControllerUnpublishVolume is not sent, and the server asks the node again at every claim GC (5 minutes) for as long as the plugin refuses. A node the server marked down gets no node calls at all (PR #13301).",
        "read at main (aa026cc, Aug 2026); NOT_FOUND taken as done since PR #8605 (0.12.2), the unpublish retry since PR #11892 (1.3.0)",
        "plugins/csi/client.go NodeUnpublishVolume, NodeUnstageVolume; client/pluginmanager/csimanager/volume.go unpublishVolume, unmountVolumeImpl, unstageVolume; client/allocrunner/csi_hook.go Postrun; nomad/csi_endpoint.go Unpublish; nomad/core_sched.go csiVolumeClaimGC; PR #8605, #11892, #13301",
    ),
    row(
        "limits.max-volumes",
        "The scheduler counts the volumes of that plugin already claimed on the node and refuses placement when the count reaches max_volumes_per_node; the client turns 0 into \"unlimited\".",
        "stored main",
        "scheduler/feasible/feasible.go CSIVolumeChecker.isFeasible; plugins/csi/client.go NodeGetInfo",
    ),
    row(
        "caps.required",
        "CONTROLLER_SERVICE makes volumes unschedulable until a healthy controller plugin runs; controller PUBLISH_UNPUBLISH_VOLUME turns on the attach/detach flow; CREATE_DELETE_VOLUME is needed for nomad volume create/delete; node STAGE_UNSTAGE_VOLUME turns on staging; VOLUME_ACCESSIBILITY_CONSTRAINTS marks the plugin as topology-aware.",
        "stored main",
        "csimanager/fingerprint.go buildBasicFingerprint, applyCapabilitySetToControllerInfo, buildNodeFingerprint; nomad/structs/node.go CSIInfo",
    ),
    row(
        "errors.translation",
        "Turns the spec's error codes into sentences for the operator (ControllerPublish FAILED_PRECONDITION: \"already published on another node and does not have MULTI_NODE capability\", RESOURCE_EXHAUSTED: \"node has reached the maximum allowable number of attached volumes\", ...).",
        "stored main",
        "plugins/csi/client.go (each RPC's switch code)",
    ),
];
