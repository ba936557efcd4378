//! What Kubernetes does at each point where the CSI spec leaves a choice to the CO, one
//! [`Behaviour`] per row of its table in `docs/orchestrators.md` (same ids, same order; a
//! unit test keeps the two equal). Summaries in our own words; sources are paths in the
//! orchestrator's public repository or issue numbers.

use super::{Behaviour, CallPattern, Layout, Range, Release, row};

/// The oldest release the table describes: 1.17 brought the per-pod publish file of a block
/// volume (PR #74026, merged October 2019; inferred from the date); older kubelets are not
/// known here.
pub(super) const OLDEST: Release = Release::new(1, 17, 0);

/// The first release that stages at `<driver>/<sha256 of the handle>` (PR #107065).
const DIGEST_STAGING: &[Release] = &[Release::new(1, 24, 0)];

/// The kubelet's current pattern, moved back to release `at`.
pub(super) fn pin(p: &mut CallPattern, at: Option<Release>) {
    if Range::Before(DIGEST_STAGING).holds(at) {
        p.layout = Layout::KubeletPvName;
    }
}

/// Kubernetes's behaviours.
pub(super) const BEHAVIOURS: &[Behaviour] = &[
    row(
        "paths.staging",
        "Stages a mount volume at <kubelet>/plugins/kubernetes.io/csi/<driver>/<sha256 of the volume handle>/globalmount.",
        "since 1.24.0: PR #107065 (rook#10490 and csi-addons#165 adapted plugins to it as \"Kubernetes 1.24 and newer\")",
        "pkg/volume/csi/csi_attacher.go makeDeviceMountPath; PR #107065",
    )
    .since(DIGEST_STAGING),
    row(
        "paths.staging",
        "Stages a mount volume at <kubelet>/plugins/kubernetes.io/csi/pv/<pv name>/globalmount: two PVs of one volume handle get two staging paths (kubernetes#105899).",
        "before 1.24.0",
        "pkg/volume/csi/csi_attacher.go makeDeviceMountPath (PR #60115); kubernetes#105899, PR #107065",
    )
    .before(DIGEST_STAGING),
    row(
        "paths.staging-block",
        "Stages a block volume at <kubelet>/plugins/kubernetes.io/csi/volumeDevices/staging/<pv name> (a directory).",
        "all versions read",
        "pkg/volume/csi/csi_block.go getStagingPath and the file's path table",
    ),
    row(
        "paths.publish-mount",
        "Publishes a mount volume at <kubelet>/pods/<pod uid>/volumes/kubernetes.io~csi/<pv name>/mount.",
        "all versions read",
        "pkg/volume/csi/csi_mounter.go GetPath, SetUpAt",
    ),
    row(
        "paths.publish-block",
        "Publishes a block volume at a file path, <kubelet>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv name>/<pod uid>; the plugin must create the file (bind-mount the device onto it, or make a device node).",
        "per-pod path in current code; when it changed was not verified",
        "csi_block.go getPublishPath, publishVolumeForBlock and the path table of the newer copy",
    ),
    row(
        "dirs.staging",
        "Makes the staging directory (0750) before NodeStageVolume, and writes its own vol_data.json in the staging directory's parent (<sha256>/).",
        "all versions read",
        "csi_attacher.go MountDevice; csi_block.go stageVolumeForBlock",
    ),
    row(
        "dirs.target",
        "Makes the target's parent (0750) and writes vol_data.json there; leaves the target itself to the plugin.",
        "all versions read",
        "csi_mounter.go SetUpAt, TearDownAt; csi_block.go publishVolumeForBlock",
    ),
    row(
        "rpc.stage-without-capability",
        "Asks NodeGetCapabilities before each stage/unstage; without STAGE_UNSTAGE_VOLUME it skips NodeStageVolume and NodeUnstageVolume and sends NodePublishVolume an empty staging path.",
        "all versions read",
        "csi_attacher.go MountDevice, UnmountDevice; csi_mounter.go SetUpAt",
    ),
    row(
        "rpc.unstage",
        "Unstages (UnmountDevice) when no pod on the node uses the volume any more, then deletes the staging directory and its vol_data.json.",
        "all versions read",
        "csi_attacher.go UnmountDevice; csi_block.go TearDownDevice; kubernetes#129825",
    ),
    row(
        "rpc.detach-order",
        "NodeUnpublishVolume (per pod) → NodeUnstageVolume (last pod) on the node; then the attach/detach controller deletes the VolumeAttachment and the external-attacher calls ControllerUnpublishVolume.",
        "all versions read",
        "csi_attacher.go Detach, waitForVolumeDetachmentWithLister; kubernetes#102486, #121357",
    ),
    row(
        "rpc.stage-order",
        "NodeStageVolume only after the VolumeAttachment reports attached (the kubelet reads the publish context from its status).",
        "all versions read",
        "csi_attacher.go MountDevice (getPublishContext)",
    ),
    row(
        "fields.volume-context",
        "Sends the PV's volumeAttributes (what CreateVolume returned) to NodeStageVolume and NodePublishVolume.",
        "all versions read",
        "csi_attacher.go MountDevice; csi_mounter.go SetUpAt",
    ),
    row(
        "fields.pod-info",
        "When the CSIDriver object sets podInfoOnMount, NodePublishVolume's volume context also gets the pod's name, namespace, uid, service account name and whether the volume is ephemeral (csi.storage.k8s.io/... keys); with tokenRequests, a service-account token entry.",
        "all versions read",
        "csi_mounter.go SetUpAt (podInfoEnabled, getPodInfoAttrs, podServiceAccountTokenAttrs)",
    ),
    row(
        "fields.publish-context",
        "Passes the VolumeAttachment's attachment metadata (ControllerPublishVolume's publish_context) to NodeStageVolume and NodePublishVolume.",
        "all versions read",
        "csi_attacher.go MountDevice; csi_mounter.go SetUpAt",
    ),
    row(
        "fields.secrets",
        "A separate secret reference per RPC in the PV/StorageClass: node-stage, node-publish, node-expand (feature gate CSINodeExpandSecret), controller-publish, controller-expand, provisioner (create/delete).",
        "all versions read (node-expand: behind its gate)",
        "csi_attacher.go MountDevice (NodeStageSecretRef); csi_mounter.go (NodePublishSecretRef); expander.go (NodeExpandSecretRef)",
    ),
    row(
        "fields.readonly",
        "NodePublishVolume's readonly is the mount's read-only flag (pod volume or PV).",
        "all versions read",
        "csi_mounter.go SetUpAt (readOnly, AccessModes[0])",
    ),
    row(
        "fields.mount-options",
        "The PV's mountOptions are sent as mount_flags on stage and publish; fs_type from the PV.",
        "all versions read",
        "csi_attacher.go MountDevice; csi_mounter.go SetUpAt",
    ),
    row(
        "fields.expand-staging-path",
        "NodeExpandVolume gets the staging path when the kubelet knows it, but none for a multi-node block volume, whose volume_path is the pod's publish file.",
        "1.27+ for the re-mount case; the RWX block case in current releases (per the plugin reports)",
        "pkg/volume/csi/expander.go nodeExpandWithClient (DeviceStagePath); kubernetes#115343; hpe-storage/csi-driver#552",
    ),
    row(
        "topology.match",
        "CreateVolume's accessible_topology becomes the PV's node affinity: one selector term per topology, each segment a required label.",
        "all versions read",
        "external-provisioner pkg/controller/topology.go GenerateVolumeNodeAffinity; node labels in pkg/volume/csi/nodeinfomanager/nodeinfomanager.go (not re-read)",
    ),
    row(
        "topology.requisite",
        "CreateVolume's requisite is the StorageClass's allowedTopologies flattened, or else the topologies of every node that has the driver's topology keys; preferred puts the scheduler's selected node first.",
        "all versions read",
        "external-provisioner topology.go GenerateAccessibilityRequirements, aggregateTopologies",
    ),
    row(
        "validate.when",
        "Not called by the kubelet, the external-provisioner or the external-attacher in the paths read; plugin authors report never seeing the RPC (spec#494).",
        "all versions read",
        "spec#494; absence in pkg/volume/csi/csi_client.go (not re-read in full)",
    ),
    row(
        "concurrency.controller",
        "The external-attacher works VolumeAttachments with several workers (10 by default, --worker-threads), so ControllerPublishVolume calls for different volumes, to the same node, overlap.",
        "external-attacher with PR #175",
        "kubernetes-csi/external-attacher#175",
    ),
    row(
        "concurrency.node",
        "One operation at a time per volume on a node; different volumes are staged and published concurrently.",
        "(not re-read)",
        "pkg/volume/util/nestedpendingoperations",
    ),
    row(
        "restart.node-plugin",
        "The kubelet does not watch node plugin restarts: its actual state of what is staged and published stands, running pods keep their mounts, and a new pod of a volume already staged on the node only gets NodePublishVolume (NodeStageVolume is sent only where the kubelet has no global mount). After a kubelet restart it reconstructs that state from the pod volume directories and the mount table, and sends NodeUnpublishVolume and NodeUnstageVolume for what no pod needs any more.",
        "all versions read (the reconstruction since kubernetes#27970, refined in #60888; not re-read in full)",
        "pkg/kubelet/volumemanager/reconciler (reconstruct); kubernetes#27970, kubernetes#60888, kubernetes#52683",
    ),
    row(
        "lost-node.controller-unpublish",
        "When a node is gone, the attach/detach controller deletes its VolumeAttachments and the external-attacher sends ControllerUnpublishVolume for that node; it treats NOT_FOUND like any other error and retries, so the VolumeAttachment (and the PV's deletion) stays stuck until the plugin answers OK.",
        "external-attacher 2.0 and later (PR #165, Aug 2019); its 1.x backports took NOT_FOUND as detached",
        "kubernetes-csi/external-attacher#165 (release note), #168–#170; spec#373, spec#375",
    ),
    row(
        "lost-node.node-paths-gone",
        "The kubelet sends NodeUnpublishVolume without looking at the target path (it removes the directory only after an OK), and NodeUnstageVolume unless its own vol_data.json beside the global mount is gone (a raw block volume's is skipped when its staging path is gone). After a reboot, kubelets since 1.28 reconstruct each leftover pod volume and its global mount as uncertain, and so send both. Every error, NOT_FOUND included, is retried with backoff (up to about 2 minutes) for ever; the volume stays in the node's volumesInUse, so on a Ready node the attach/detach controller never deletes the VolumeAttachment and ControllerUnpublishVolume is never sent, and a refused NodeUnpublishVolume also keeps the pod Terminating. Only a node NotReady for over 6 minutes (force detach) or tainted out-of-service gets out.",
        "recent main snapshots (csi_mounter.go 4a0608c, csi_attacher.go 4cb9cbb; release not pinned); the reconstruction since 1.28 (KEP-3756); older kubelets sent only NodeUnpublishVolume, once, after a reboot",
        "pkg/volume/csi/csi_mounter.go TearDownAt; csi_attacher.go UnmountDevice; csi_block.go TearDownDevice; pkg/kubelet/volumemanager/reconciler (reconstruct_common.go); pkg/controller/volume/attachdetach/reconciler; kubernetes PR #113262, #110721, #129825",
    ),
    row(
        "limits.max-volumes",
        "The kubelet copies max_volumes_per_node into the CSINode object's allocatable count; the scheduler's volume-limits filter refuses a pod that would exceed it.",
        "(not re-read)",
        "pkg/volume/csi/nodeinfomanager/nodeinfomanager.go; scheduler plugin nodevolumelimits",
    ),
    row(
        "caps.required",
        "Whether ControllerPublishVolume is called at all is the CSIDriver's attachRequired (default true); the external-attacher does not call it for plugins without PUBLISH_UNPUBLISH_VOLUME and marks the attachment done.",
        "all versions read (attacher side not re-read)",
        "csi_attacher.go; openshift-docs#8783 (attacher without publish capability)",
    ),
];
