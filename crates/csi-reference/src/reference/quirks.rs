//! Quirk profiles: named, deliberate misbehaviours of the reference plugin (`--quirk NAME`),
//! each reproducing a failure seen in a real CSI plugin so the harness can prove it notices.
//!
//! Every quirk is hooked at one narrow point (an existing rule of `checks`, the
//! ValidateVolumeCapabilities confirmation builder, the per-RPC gate), always behind a
//! `self.quirk(..)` test, so a plugin without quirks takes exactly the compliant path.
//!
//! Several quirks may be active at once. The confirmation quirks compose in this order:
//! `incomplete-confirmation` trims, `overconfirm` swaps modes, `drop-mount-flags` clears
//! flags, and `unconfirmed` / `unconfirmed-silent` finally withhold the confirmation
//! (`unconfirmed`'s message wins when both are on).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use tonic::Status;

use crate::proto::v1::{
    self,
    validate_volume_capabilities_response::Confirmed,
    volume_capability::{AccessType, access_mode::Mode},
};
use crate::secrets::Secrets;

use super::Plugin;
use super::state::{Capability, Source, VolumeRecord};

/// One deliberate misbehaviour of the reference plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Quirk {
    /// ValidateVolumeCapabilities never confirms, but says all is well in `message`.
    Unconfirmed,
    /// ValidateVolumeCapabilities never confirms and leaves `message` empty.
    UnconfirmedSilent,
    /// ValidateVolumeCapabilities confirms only the first requested capability.
    IncompleteConfirmation,
    /// ValidateVolumeCapabilities confirms other access modes than requested.
    Overconfirm,
    /// ValidateVolumeCapabilities confirms mount capabilities without their flags and group.
    DropMountFlags,
    /// PUBLISH_UNPUBLISH_VOLUME is advertised, the publish RPCs are UNIMPLEMENTED.
    AdvertisePublishUnimplemented,
    /// CreateVolume rejects a set-but-empty content source (which the compliant plugin reads
    /// as no source).
    EmptySourceRejected,
    /// NodeStageVolume / NodePublishVolume insist on the volume_context.
    RequireVolumeContext,
    /// `--require-secrets` is not enforced.
    IgnoreSecrets,
    /// block + MULTI_NODE_MULTI_WRITER makes CreateVolume and ValidateVolumeCapabilities INTERNAL.
    InternalOnOddCaps,
    /// Single-node volumes may be published to a second node, and single-target ones at a
    /// second target path.
    AllowSecondWriter,
    /// NodeStageVolume / NodePublishVolume mount without the capability's mount flags.
    IgnoreMountFlags,
    /// NodePublishVolume mounts read-write although the publication is read-only.
    IgnoreReadonly,
    /// NodeUnstageVolume answers OK when staging_target_path is missing.
    UnstageIgnoresPath,
    /// A volume created from a snapshot is blank: the snapshot's content is not restored.
    SnapshotEmpty,
    /// A block volume created from a snapshot gets only the first half of its data; the rest
    /// reads as zeros.
    RestoreHeadOnly,
    /// A clone is the same storage as its source: writes to either show in both.
    CloneSharesData,
    /// ControllerExpandVolume / NodeExpandVolume report the new size, the storage stays as it was.
    ExpandNoGrow,
    /// NodeUnstageVolume discards the volume's content.
    LoseDataOnUnstage,
    /// A mount capability whose mount flags differ from those the volume was created with is
    /// not confirmed by ValidateVolumeCapabilities and refused (INVALID_ARGUMENT) by
    /// ControllerPublishVolume.
    CreatedMountFlagsOnly,
    /// CreateVolume with an existing volume's name compares everything but the capabilities.
    SameNameAnyCapability,
    /// v1.13: every adverse health entry (volume or storage) is reported twice.
    DuplicateHealthEntry,
    /// v1.13: adverse health entries (volume or storage) carry no reason.
    HealthMissingReason,
    /// v1.13: LIST_VOLUME_HEALTH is advertised without GET_VOLUME_HEALTH (whose RPC is then
    /// UNIMPLEMENTED).
    ListHealthWithoutGet,
    /// v1.13: snapshots carry accessible_topology though SNAPSHOT_ACCESSIBILITY_CONSTRAINTS is
    /// not advertised.
    SnapshotTopologyWithoutCapability,
    /// v1.13 capabilities, and v1.12's volume_condition still set in ListVolumes,
    /// ControllerGetVolume and NodeGetVolumeStats answers without VOLUME_CONDITION.
    MixedVersions,
    /// Volume, snapshot and group snapshot ids not in the plugin's own format are refused
    /// with INVALID_ARGUMENT before they are looked up.
    StrictIds,
    /// CreateVolume answers OK with an empty volume_id (the volume exists under its real id).
    CreateEmptyId,
    /// A set but empty volume_content_source makes a volume whose answer has no id (csi-test mock).
    MockEmptySource,
    /// CreateSnapshot's snapshot has no creation_time.
    SnapshotNoCreationTime,
    /// GetPluginInfo's vendor_version is empty.
    EmptyVendorVersion,
    /// NodeGetVolumeStats reports usage with unit UNKNOWN.
    StatsUnknownUnit,
    /// volume_context carries a 200-byte value.
    LongContextValue,
    /// publish_context is over 4 KiB.
    BigPublishContext,
    /// NodeGetInfo's topology keys contain a space.
    BadTopologyKey,
    /// ListVolumes answers every page after the first with the same next_token.
    RepeatNextToken,
    /// ListVolumes refuses (ABORTED) a starting_token issued before the volume list last
    /// changed.
    ListingTokenExpires,
    /// Error answers carry no message.
    EmptyErrorMessage,
    /// Error answers carry status details.
    ErrorDetails,
    /// DeleteVolume answers OK and keeps the volume (still listed, found and holding space).
    DeleteKeepsVolume,
    /// DeleteSnapshot answers OK and keeps the snapshot (still listed and found).
    DeleteKeepsSnapshot,
    /// NodeGetInfo reports a second topology segment that volumes never carry.
    TopologyExtraNodeSegment,
    /// Overlapping ControllerPublishVolume calls for one node pick the same device, and the
    /// later one fails.
    AttachRace,
    /// NodeStageVolume keeps its stage record in the staging path's parent, one volume per
    /// parent.
    StageStateInParent,
    /// NodeExpandVolume of a volume staged on the node refuses a request without
    /// staging_target_path (an OPTIONAL field); ControllerExpandVolume asks for node expansion
    /// of block volumes too.
    ExpandNeedsStagingPath,
    /// NodeStageVolume refuses a staging path that does not exist instead of making it.
    StagingDirNotMade,
    /// A staged volume is staged at a second staging path too, and NodeUnstageVolume of any
    /// of them takes down every staging and publication of the volume on the node.
    UnstageByVolume,
    /// NodeStageVolume makes and mounts nothing at the staging path; NodePublishVolume
    /// mounts from the volume itself.
    StagingPathUnused,
    /// ValidateVolumeCapabilities confirms every capability asked about, whatever the volume
    /// supports, while the node still refuses what the volume cannot do.
    ConfirmEverything,
    /// NodePublishVolume ignores the capability's volume_mount_group.
    DropsMountGroup,
    /// ControllerGetVolume answers OK for a volume that does not exist, with an abnormal
    /// volume condition saying NotFound (the kubernetes-csi hostpath plugin v1.16.1).
    GetVolumeOkWhenMissing,
    /// Error messages and answered contexts repeat the secrets and mount flags received,
    /// raw and encoded.
    EchoSecrets,
    /// A call on a volume another call is in flight on is refused with ABORTED (a lock per
    /// volume, held a while by each call).
    AbortsWhenBusy,
    /// ListVolumes and ListSnapshots lag the plugin's state: a deleted volume or snapshot is
    /// listed a while longer, a created one not yet.
    ListingLags,
    /// NodePublishVolume binds the target's parent over itself after mounting: the mount
    /// table lists the target's mount, the path no longer leads to it.
    HidesTargetMount,
    /// GetCapacity reports 1 TiB more available_capacity (and maximum_volume_size) than there is.
    CapacityOverstated,
    /// Every call after the first 50 answers a little later than the one before (`drift.rs`).
    SlowAfterN,
    /// Every CreateVolume keeps a file descriptor open for good (`drift.rs`).
    LeakFdPerCall,
    /// CreateVolume looks the name up before a pause and creates after it: calls with one
    /// name that overlap each make a volume.
    RaceCreateDuplicates,
    /// A NodeStageVolume while another for the same volume is in flight answers INTERNAL.
    StageNotReentrant,
    /// Overlapping ControllerPublishVolume calls for one node pick the same device and both
    /// answer OK with it.
    PublishDeviceRace,
    /// A CreateVolume cloning a volume while another clone of that source is in flight is
    /// answered with that other clone.
    CloneFanoutSharesSource,
    /// A CreateVolume cloning a volume while another clone of that source is in flight
    /// answers OK and records nothing: that clone is never listed nor found.
    FanoutLosesClone,
    /// ControllerUnpublishVolume for a node id the plugin does not know answers NOT_FOUND.
    UnpublishNeedsKnownNode,
    /// NodeUnpublishVolume answers NOT_FOUND when the plugin's record says published at the
    /// target path but the path is gone (after a node reboot).
    UnpublishNeedsPath,
    /// NodeUnstageVolume unmounts the staging path before it looks at it and answers INTERNAL
    /// when the path is gone though its record says staged (after a node reboot).
    UnstageUnmountsBlindly,
    /// A node plugin forgets on start what it had staged (its stage records), though the
    /// mounts stay: a volume staged before a restart is no longer published from there.
    RestartLosesStaging,
    /// A controller plugin forgets on start which name each volume was created under: a
    /// CreateVolume asked again after a restart makes a second volume.
    RestartForgetsNames,
}

/// ControllerGetVolume's answer for a volume that does not exist under
/// `get-volume-ok-when-missing`: OK, the id echoed, the condition abnormal with the NotFound
/// the plugin should have answered (as the hostpath plugin v1.16.1 does).
pub(crate) fn missing_volume_answer(volume_id: &str, why: &str) -> crate::proto::v1::ControllerGetVolumeResponse {
    use crate::proto::v1;
    v1::ControllerGetVolumeResponse {
        volume: Some(v1::Volume { volume_id: volume_id.to_owned(), ..Default::default() }),
        status: Some(v1::controller_get_volume_response::VolumeStatus {
            published_node_ids: Vec::new(),
            volume_condition: Some(v1::VolumeCondition {
                abnormal: true,
                message: format!("rpc error: code = NotFound desc = {why}"),
            }),
        }),
    }
}

pub(crate) use super::busy::{BUSY_HOLD, lock_volume};

/// The message of a withheld confirmation under `unconfirmed`.
pub const UNCONFIRMED_MESSAGE: &str = "all requested volume capabilities look fine";

/// The message of a set-but-empty content source under `empty-source-rejected`.
pub const EMPTY_SOURCE_MESSAGE: &str = "volume_content_source must have a snapshot or a volume";

impl Quirk {
    /// Every quirk, in the order `--list-quirks` shows them.
    pub const ALL: &[Quirk] = &[
        Quirk::Unconfirmed,
        Quirk::UnconfirmedSilent,
        Quirk::IncompleteConfirmation,
        Quirk::Overconfirm,
        Quirk::DropMountFlags,
        Quirk::AdvertisePublishUnimplemented,
        Quirk::EmptySourceRejected,
        Quirk::RequireVolumeContext,
        Quirk::IgnoreSecrets,
        Quirk::InternalOnOddCaps,
        Quirk::AllowSecondWriter,
        Quirk::IgnoreMountFlags,
        Quirk::IgnoreReadonly,
        Quirk::UnstageIgnoresPath,
        Quirk::SnapshotEmpty,
        Quirk::RestoreHeadOnly,
        Quirk::CloneSharesData,
        Quirk::ExpandNoGrow,
        Quirk::LoseDataOnUnstage,
        Quirk::CreatedMountFlagsOnly,
        Quirk::SameNameAnyCapability,
        Quirk::DuplicateHealthEntry,
        Quirk::HealthMissingReason,
        Quirk::ListHealthWithoutGet,
        Quirk::SnapshotTopologyWithoutCapability,
        Quirk::MixedVersions,
        Quirk::StrictIds,
        Quirk::CreateEmptyId,
        Quirk::MockEmptySource,
        Quirk::SnapshotNoCreationTime,
        Quirk::EmptyVendorVersion,
        Quirk::StatsUnknownUnit,
        Quirk::LongContextValue,
        Quirk::BigPublishContext,
        Quirk::BadTopologyKey,
        Quirk::RepeatNextToken,
        Quirk::ListingTokenExpires,
        Quirk::EmptyErrorMessage,
        Quirk::ErrorDetails,
        Quirk::DeleteKeepsVolume,
        Quirk::DeleteKeepsSnapshot,
        Quirk::TopologyExtraNodeSegment,
        Quirk::AttachRace,
        Quirk::StageStateInParent,
        Quirk::ExpandNeedsStagingPath,
        Quirk::StagingDirNotMade,
        Quirk::UnstageByVolume,
        Quirk::StagingPathUnused,
        Quirk::ConfirmEverything,
        Quirk::DropsMountGroup,
        Quirk::GetVolumeOkWhenMissing,
        Quirk::EchoSecrets,
        Quirk::AbortsWhenBusy,
        Quirk::ListingLags,
        Quirk::HidesTargetMount,
        Quirk::CapacityOverstated,
        Quirk::SlowAfterN,
        Quirk::LeakFdPerCall,
        Quirk::RaceCreateDuplicates,
        Quirk::StageNotReentrant,
        Quirk::PublishDeviceRace,
        Quirk::CloneFanoutSharesSource,
        Quirk::FanoutLosesClone,
        Quirk::UnpublishNeedsKnownNode,
        Quirk::UnpublishNeedsPath,
        Quirk::UnstageUnmountsBlindly,
        Quirk::RestartLosesStaging,
        Quirk::RestartForgetsNames,
    ];

    /// The name `--quirk` takes.
    pub fn name(self) -> &'static str {
        match self {
            Quirk::Unconfirmed => "unconfirmed",
            Quirk::UnconfirmedSilent => "unconfirmed-silent",
            Quirk::IncompleteConfirmation => "incomplete-confirmation",
            Quirk::Overconfirm => "overconfirm",
            Quirk::DropMountFlags => "drop-mount-flags",
            Quirk::AdvertisePublishUnimplemented => "advertise-publish-unimplemented",
            Quirk::EmptySourceRejected => "empty-source-rejected",
            Quirk::RequireVolumeContext => "require-volume-context",
            Quirk::IgnoreSecrets => "ignore-secrets",
            Quirk::InternalOnOddCaps => "internal-on-odd-caps",
            Quirk::AllowSecondWriter => "allow-second-writer",
            Quirk::IgnoreMountFlags => "ignore-mount-flags",
            Quirk::IgnoreReadonly => "ignore-readonly",
            Quirk::UnstageIgnoresPath => "unstage-ignores-path",
            Quirk::SnapshotEmpty => "snapshot-empty",
            Quirk::RestoreHeadOnly => "restore-head-only",
            Quirk::CloneSharesData => "clone-shares-data",
            Quirk::ExpandNoGrow => "expand-no-grow",
            Quirk::LoseDataOnUnstage => "lose-data-on-unstage",
            Quirk::CreatedMountFlagsOnly => "created-mount-flags-only",
            Quirk::SameNameAnyCapability => "same-name-any-capability",
            Quirk::DuplicateHealthEntry => "duplicate-health-entry",
            Quirk::HealthMissingReason => "health-missing-reason",
            Quirk::ListHealthWithoutGet => "list-health-without-get",
            Quirk::SnapshotTopologyWithoutCapability => "snapshot-topology-without-capability",
            Quirk::MixedVersions => "mixed-versions",
            Quirk::StrictIds => "strict-ids",
            Quirk::CreateEmptyId => "create-empty-id",
            Quirk::MockEmptySource => "mock-empty-source",
            Quirk::SnapshotNoCreationTime => "snapshot-no-creation-time",
            Quirk::EmptyVendorVersion => "empty-vendor-version",
            Quirk::StatsUnknownUnit => "stats-unknown-unit",
            Quirk::LongContextValue => "long-context-value",
            Quirk::BigPublishContext => "context-over-4kib",
            Quirk::BadTopologyKey => "bad-topology-key",
            Quirk::RepeatNextToken => "repeat-next-token",
            Quirk::ListingTokenExpires => "listing-token-expires",
            Quirk::EmptyErrorMessage => "empty-error-message",
            Quirk::ErrorDetails => "error-details",
            Quirk::DeleteKeepsVolume => "delete-keeps-volume",
            Quirk::DeleteKeepsSnapshot => "delete-keeps-snapshot",
            Quirk::TopologyExtraNodeSegment => "topology-extra-node-segment",
            Quirk::AttachRace => "attach-race",
            Quirk::StageStateInParent => "stage-state-in-parent",
            Quirk::ExpandNeedsStagingPath => "expand-needs-staging-path",
            Quirk::StagingDirNotMade => "staging-dir-not-made",
            Quirk::UnstageByVolume => "unstage-by-volume",
            Quirk::StagingPathUnused => "staging-path-unused",
            Quirk::ConfirmEverything => "confirm-everything",
            Quirk::DropsMountGroup => "drops-mount-group",
            Quirk::GetVolumeOkWhenMissing => "get-volume-ok-when-missing",
            Quirk::EchoSecrets => "echo-secrets",
            Quirk::AbortsWhenBusy => "aborts-when-busy",
            Quirk::ListingLags => "listing-lags",
            Quirk::HidesTargetMount => "hides-target-mount",
            Quirk::CapacityOverstated => "capacity-overstated",
            Quirk::SlowAfterN => "slow-after-n",
            Quirk::LeakFdPerCall => "leak-fd-per-call",
            Quirk::RaceCreateDuplicates => "race-create-duplicates",
            Quirk::StageNotReentrant => "stage-not-reentrant",
            Quirk::PublishDeviceRace => "publish-device-race",
            Quirk::CloneFanoutSharesSource => "clone-fanout-shares-source",
            Quirk::FanoutLosesClone => "fanout-loses-clone",
            Quirk::UnpublishNeedsKnownNode => "unpublish-needs-known-node",
            Quirk::UnpublishNeedsPath => "unpublish-needs-path",
            Quirk::UnstageUnmountsBlindly => "unstage-unmounts-blindly",
            Quirk::RestartLosesStaging => "restart-loses-staging",
            Quirk::RestartForgetsNames => "restart-forgets-names",
        }
    }

    /// One line: what the quirk does, and which real-world plugin behaviour it mirrors.
    pub fn description(self) -> &'static str {
        match self {
            Quirk::Unconfirmed => {
                "ValidateVolumeCapabilities never sets confirmed, only a \"capabilities look fine\" message (Azure and Linode plugins)"
            }
            Quirk::UnconfirmedSilent => {
                "ValidateVolumeCapabilities never sets confirmed and leaves message empty (plugins that stub the RPC out)"
            }
            Quirk::IncompleteConfirmation => {
                "ValidateVolumeCapabilities confirms only the first requested capability (plugins that look at volume_capabilities[0] only)"
            }
            Quirk::Overconfirm => {
                "ValidateVolumeCapabilities confirms a different access mode than requested (plugins that echo their own modes)"
            }
            Quirk::DropMountFlags => {
                "ValidateVolumeCapabilities confirms mount capabilities with mount_flags and volume_mount_group cleared (older plugins that call fields they do not know valid)"
            }
            Quirk::AdvertisePublishUnimplemented => {
                "PUBLISH_UNPUBLISH_VOLUME is advertised but ControllerPublishVolume/ControllerUnpublishVolume answer UNIMPLEMENTED (Ceph CSI)"
            }
            Quirk::EmptySourceRejected => {
                "CreateVolume rejects a set-but-empty volume_content_source with INVALID_ARGUMENT instead of reading it as no source (EBS-style source parsing)"
            }
            Quirk::RequireVolumeContext => {
                "NodeStageVolume/NodePublishVolume fail FAILED_PRECONDITION without the volume_context CreateVolume returned (MooseFS)"
            }
            Quirk::IgnoreSecrets => {
                "missing or wrong secrets are accepted even with --require-secrets (plugins that never read the secrets map)"
            }
            Quirk::InternalOnOddCaps => {
                "CreateVolume and ValidateVolumeCapabilities answer INTERNAL for block + MULTI_NODE_MULTI_WRITER (plugins that crash on combinations they never expected)"
            }
            Quirk::AllowSecondWriter => {
                "a single-node volume can be ControllerPublished to a second node and a single-writer volume NodePublished at a second target (plugins that never look at existing attachments)"
            }
            Quirk::IgnoreMountFlags => {
                "NodeStageVolume and NodePublishVolume mount without the capability's mount_flags (plugins that mount with fixed options of their own)"
            }
            Quirk::IgnoreReadonly => {
                "NodePublishVolume mounts read-write although readonly is set or the access mode is reader-only (plugins that never pass the read-only flag to mount)"
            }
            Quirk::UnstageIgnoresPath => {
                "NodeUnstageVolume answers OK without a staging_target_path instead of INVALID_ARGUMENT (node-only plugins that unstage by volume id alone)"
            }
            Quirk::SnapshotEmpty => {
                "a volume created from a snapshot is blank (plugins that provision the new volume but never copy or restore the snapshot's data)"
            }
            Quirk::RestoreHeadOnly => {
                "a block volume created from a snapshot holds only the first half of the snapshot's data, the rest zeros (plugins that copy a fixed-size head or only the first extents of an image)"
            }
            Quirk::CloneSharesData => {
                "a volume cloned from another is the same storage as its source, so writes to one show in the other (plugins that clone by reference)"
            }
            Quirk::ExpandNoGrow => {
                "ControllerExpandVolume and NodeExpandVolume report the new capacity but the volume keeps its old size (plugins that update their records, not the storage)"
            }
            Quirk::LoseDataOnUnstage => {
                "NodeUnstageVolume discards the volume's content (plugins that format or recreate scratch storage on every stage)"
            }
            Quirk::CreatedMountFlagsOnly => {
                "ValidateVolumeCapabilities does not confirm, and ControllerPublishVolume refuses with INVALID_ARGUMENT, mount_flags other than the volume was created with (ember-csi)"
            }
            Quirk::StrictIds => {
                "volume, snapshot and group snapshot ids not in the plugin's own format (vol-NNNNNN, snap-NNNNNN, group-NNNNNN) are refused with INVALID_ARGUMENT (EBS vol-..., the structured ids of Ceph, Spectrum Scale and DigitalOcean)"
            }
            Quirk::SameNameAnyCapability => {
                "CreateVolume with an existing volume's name and other capabilities answers OK with that volume, which ValidateVolumeCapabilities does not confirm for them (ember-csi, whose idempotency compares the size only)"
            }
            Quirk::DuplicateHealthEntry => {
                "v1.13: every adverse volume and storage health entry is reported twice (plugins that append a condition on every poll instead of keeping one)"
            }
            Quirk::HealthMissingReason => {
                "v1.13: adverse volume and storage health entries leave the REQUIRED reason empty (plugins that only fill the human message)"
            }
            Quirk::ListHealthWithoutGet => {
                "v1.13: LIST_VOLUME_HEALTH is advertised without GET_VOLUME_HEALTH, and ControllerGetVolumeHealth is UNIMPLEMENTED (plugins that only implemented the bulk RPC)"
            }
            Quirk::SnapshotTopologyWithoutCapability => {
                "v1.13: snapshots carry accessible_topology although SNAPSHOT_ACCESSIBILITY_CONSTRAINTS is not advertised (plugins that copy the volume's topology into every snapshot)"
            }
            Quirk::MixedVersions => {
                "v1.13 capabilities, yet ListVolumes, ControllerGetVolume and NodeGetVolumeStats still set v1.12's volume_condition (whose number v1.13 reserves) without VOLUME_CONDITION (plugins half-way through moving to v1.13)"
            }
            Quirk::CreateEmptyId => {
                "CreateVolume makes the volume but answers OK with an empty volume_id, so no CSI call can delete it (plugins that lose the id between backend and answer)"
            }
            Quirk::MockEmptySource => {
                "CreateVolume with a set but empty volume_content_source stores a volume and answers OK with an empty volume_id (the csi-test mock driver)"
            }
            Quirk::SnapshotNoCreationTime => "CreateSnapshot answers without the snapshot's creation_time (ListSnapshots and GetSnapshot still have it)",
            Quirk::EmptyVendorVersion => "GetPluginInfo answers with an empty vendor_version",
            Quirk::StatsUnknownUnit => "NodeGetVolumeStats reports its usage with unit UNKNOWN",
            Quirk::LongContextValue => {
                "CreateVolume and ControllerGetVolume add a 200-byte value to the volume_context (plugins that put whole configurations there)"
            }
            Quirk::BigPublishContext => "ControllerPublishVolume adds a value of 5,000 bytes to publish_context, over the 4 KiB map limit",
            Quirk::BadTopologyKey => "NodeGetInfo reports topology keys with a space in them",
            Quirk::RepeatNextToken => "ListVolumes answers every page after the first with the same next_token, so paging never ends",
            Quirk::ListingTokenExpires => {
                "ListVolumes answers ABORTED to a starting_token issued before a volume was created or deleted (plugins whose token is a position in a list that moved, as hostpath's): within the spec, the CO restarts the listing (a control)"
            }
            Quirk::EmptyErrorMessage => "every error answer has an empty status message",
            Quirk::ErrorDetails => "every error answer carries status details",
            Quirk::DeleteKeepsVolume => {
                "DeleteVolume answers OK but keeps the volume: it is still listed, still found by ControllerGetVolume and still holds its space (plugins that acknowledge a delete their backend then refuses or never runs)"
            }
            Quirk::DeleteKeepsSnapshot => {
                "DeleteSnapshot answers OK but keeps the snapshot: it is still listed and still found by GetSnapshot (plugins that acknowledge a delete their backend then refuses or never runs)"
            }
            Quirk::TopologyExtraNodeSegment => {
                "NodeGetInfo reports a second topology segment (zone) that CreateVolume's accessible_topology leaves out: fine where a volume's segments need only be among the node's (Kubernetes, Swarm), unschedulable where they must equal them (Nomad; hetznercloud/csi-driver#333, #771)"
            }
            Quirk::AttachRace => {
                "ControllerPublishVolume calls for one node that overlap pick the same free device, and the later attach fails INTERNAL (EBS under concurrent attaches; hashicorp/nomad#8336, aws-ebs-csi-driver#528)"
            }
            Quirk::StageStateInParent => {
                "NodeStageVolume keeps its stage record in the staging path's parent directory and refuses a second volume there, assuming every volume gets a directory of its own (breaks Swarm's flat /data/staged/<id>; moby/swarmkit#3197)"
            }
            Quirk::ExpandNeedsStagingPath => {
                "NodeExpandVolume of a volume staged on the node answers INVALID_ARGUMENT without staging_target_path, which the spec makes OPTIONAL, and ControllerExpandVolume asks for node expansion of block volumes too (to rescan the device): breaks where the kubelet sends no staging path, for a multi-node block volume (hpe-storage/csi-driver#552, ceph/ceph-csi#3624)"
            }
            Quirk::StagingDirNotMade => {
                "NodeStageVolume answers INTERNAL when the staging path does not exist instead of making it, relying on the CO to make it as the spec says (breaks Swarm, which makes none; moby/swarmkit#3197, ceph/ceph-csi#3769)"
            }
            Quirk::UnstageByVolume => {
                "NodeStageVolume stages an already staged volume at a second staging path too, and NodeUnstageVolume of any one of them releases the volume on the node, unmounting every staging and publication of it there (node state kept by volume id: breaks Nomad, which stages a volume once per use and unstages each use alone)"
            }
            Quirk::StagingPathUnused => {
                "NodeStageVolume prepares the volume elsewhere and makes or mounts nothing at staging_target_path; NodePublishVolume mounts from the volume itself (cfgd-csi pulls to a cache): within the spec, and fine under Swarm, which makes no staging directory (a control)"
            }
            Quirk::ConfirmEverything => {
                "ValidateVolumeCapabilities confirms every capability asked about (block access for a mount volume too), while the node refuses what the volume cannot do (hostpath v1.16.1)"
            }
            Quirk::DropsMountGroup => {
                "NodePublishVolume ignores volume_mount_group: the published target keeps its own group (a plugin that advertises VOLUME_MOUNT_GROUP and never passes it to the mount)"
            }
            Quirk::GetVolumeOkWhenMissing => {
                "ControllerGetVolume answers OK for a volume that does not exist (never made, or deleted), with volume_condition abnormal and a NotFound message, where the spec wants NOT_FOUND; ListVolumes tells the truth (the kubernetes-csi hostpath plugin v1.16.1): a lying witness of deletes"
            }
            Quirk::AbortsWhenBusy => {
                "a call on a volume that another call is in flight on answers ABORTED \"An operation with the given Volume ID ... already exists\" (the kubernetes-csi drivers' per-volume lock; each call holds it 20 ms): lawful (#concurrency), the CO asks again once its other call is done (a control)"
            }
            Quirk::ListingLags => {
                "ListVolumes and ListSnapshots list from a view 300 ms behind: a deleted volume or snapshot is still listed, a new one not yet (eventually consistent backend listings); ControllerGetVolume and GetSnapshot tell the truth: within the delete grace a control, beyond it the listing's own finding"
            }
            Quirk::HidesTargetMount => {
                "NodePublishVolume mounts the volume at target_path, then bind-mounts target_path's parent over itself, hiding that mount (plugins that re-bind a directory onto itself to change its propagation): the mount table lists the target's mount, the path does not lead to it; two witnesses that disagree"
            }
            Quirk::CapacityOverstated => "GetCapacity reports 1 TiB more available_capacity and maximum_volume_size than the pool has (plugins that report the backend's raw size, not its free room): CreateVolume then refuses room GetCapacity claimed",
            Quirk::SlowAfterN => super::drift::SLOW_AFTER_N_DESCRIPTION,
            Quirk::LeakFdPerCall => super::drift::LEAK_DESCRIPTION,
            Quirk::RaceCreateDuplicates => "CreateVolume looks the name up, pauses, then creates: identical calls that overlap each make a volume of that name and answer with different ids (a check-then-create without a lock; what a CO that lost its state and sent CreateVolume again meets)",
            Quirk::StageNotReentrant => "NodeStageVolume answers INTERNAL \"operation already in progress\" while another NodeStageVolume for the same volume is in flight, instead of waiting or ABORTED (hashicorp/nomad#15197: a stage sent again while the first was still running)",
            Quirk::PublishDeviceRace => "ControllerPublishVolume calls for one node that overlap pick the same free device and both answer OK with it in publish_context (`devicePath` of EBS-style plugins; hashicorp/nomad#17996, #8336): two volumes attached at one device, so the node would stage one volume's data for the other",
            Quirk::CloneFanoutSharesSource => "a CreateVolume cloning a volume while another clone of that source is in flight waits for it and answers with that clone, whatever its own name (in-flight requests coalesced by source instead of by name): clones of one source sent at once get one volume",
            Quirk::FanoutLosesClone => "of the CreateVolume calls cloning one volume at once, one answers OK with a new volume id and records nothing (a lost update: state saved read-modify-write without a lock, one clone's record overwritten by another's): the CO holds a volume the plugin neither lists nor finds",
            Quirk::UnpublishNeedsKnownNode => "ControllerUnpublishVolume for a node id the plugin does not know answers NOT_FOUND instead of OK, so a CO whose node is gone for good can never release the volume (hashicorp/nomad#13301, #8683)",
            Quirk::UnpublishNeedsPath => "NodeUnpublishVolume answers NOT_FOUND \"target path not found\" when the plugin's record says the volume is published at the target path but the path is gone, as after a node reboot (plugins that stat the target before they look at their own record): the kubelet and the Swarm agent then retry for ever and never detach the volume (Nomad takes NOT_FOUND as done)",
            Quirk::UnstageUnmountsBlindly => "NodeUnstageVolume unmounts the staging path before it looks at it, and answers INTERNAL \"unmount ...: no such file or directory\" when the path is gone though the plugin's record says the volume is staged there, as after a node reboot: Nomad, the kubelet and the Swarm agent all retry for ever and never send ControllerUnpublishVolume (Nomad forgives only NOT_FOUND)",
            Quirk::RestartLosesStaging => "a node plugin forgets on start what it had staged (its stage records; the mounts stay), so a volume staged before a restart answers FAILED_PRECONDITION \"not staged\" to NodePublishVolume afterwards (hashicorp/nomad#13028, #25813: node plugins that keep their state in memory)",
            Quirk::RestartForgetsNames => "a controller plugin forgets on start which name each volume was created under (a name index kept in memory), so a CreateVolume whose answer was lost in a restart, asked again, makes a second volume",
            Quirk::EchoSecrets => {
                "error messages and the volume_context / publish_context answered repeat the secrets and mount flags received, raw, JSON-quoted, base64, base64url, URL-encoded and hex (plugins that wrap or log their whole request; proves the harness scrubs all it shows)"
            }
        }
    }

    /// The response rule (of [`crate::rules`]) an answer quirk breaks; `None` for quirks
    /// that misbehave in what they do rather than in what they answer.
    pub fn answer_rule(self) -> Option<&'static str> {
        Some(match self {
            Quirk::CreateEmptyId | Quirk::MockEmptySource => "answer.create-volume.volume-id",
            Quirk::SnapshotNoCreationTime => "answer.create-snapshot.creation-time",
            Quirk::EmptyVendorVersion => "answer.plugin-info.vendor-version",
            Quirk::StatsUnknownUnit => "answer.stats.unit-known",
            Quirk::LongContextValue => "answer.maps.value-within-128-bytes",
            Quirk::BigPublishContext => "answer.maps.within-4kib",
            Quirk::BadTopologyKey => "answer.topology.key-format",
            Quirk::RepeatNextToken => "answer.list-volumes.token-not-repeated",
            Quirk::EmptyErrorMessage => "answer.error.message",
            Quirk::ErrorDetails => "answer.error.details-empty",
            Quirk::DeleteKeepsVolume => "answer.delete-volume.gone",
            Quirk::DeleteKeepsSnapshot => "answer.delete-snapshot.gone",
            _ => return None,
        })
    }

    /// What `--list-quirks` prints: each name and description on one line, aligned.
    pub fn listing() -> String {
        let width = Quirk::ALL.iter().map(|q| q.name().len()).max().unwrap_or(0);
        Quirk::ALL
            .iter()
            .map(|q| match q.answer_rule().and_then(crate::rules::by_id) {
                Some(rule) => format!(
                    "{:width$}  {} [breaks {}, {} {}]\n",
                    q.name(),
                    q.description(),
                    rule.id,
                    rule.requirement,
                    rule.level.as_str()
                ),
                None => format!("{:width$}  {}\n", q.name(), q.description()),
            })
            .collect()
    }
}

impl fmt::Display for Quirk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--quirk` name that is not one of [`Quirk::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown quirk {given:?}{}; valid quirks: {}", suggestion_text(*.suggestion), valid_names())]
pub struct UnknownQuirk {
    /// What was given.
    pub given: String,
    /// The closest valid quirk, if one is close enough.
    pub suggestion: Option<Quirk>,
}

fn suggestion_text(suggestion: Option<Quirk>) -> String {
    suggestion
        .map(|q| format!(" (did you mean {:?}?)", q.name()))
        .unwrap_or_default()
}

fn valid_names() -> String {
    Quirk::ALL.iter().map(|q| q.name()).collect::<Vec<_>>().join(", ")
}

impl FromStr for Quirk {
    type Err = UnknownQuirk;

    /// Parses a quirk name; case and `_` for `-` are forgiven.
    fn from_str(s: &str) -> Result<Quirk, UnknownQuirk> {
        let wanted = s.trim().to_ascii_lowercase().replace('_', "-");
        if let Some(q) = Quirk::ALL.iter().copied().find(|q| q.name() == wanted) {
            return Ok(q);
        }
        let suggestion = Quirk::ALL
            .iter()
            .copied()
            .map(|q| (edit_distance(&wanted, q.name()), q))
            .filter(|(d, q)| *d <= (q.name().len() / 3).max(2))
            .min_by_key(|(d, _)| *d)
            .map(|(_, q)| q)
            .or_else(|| {
                // A fragment of one name only ("publish", "silent").
                let mut hits = Quirk::ALL
                    .iter()
                    .copied()
                    .filter(|q| wanted.len() >= 4 && q.name().contains(&wanted));
                hits.next().filter(|_| hits.next().is_none())
            });
        Err(UnknownQuirk {
            given: s.to_owned(),
            suggestion,
        })
    }
}

/// Levenshtein distance over bytes (quirk names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// `strict-ids`: INVALID_ARGUMENT for the first volume, snapshot or group snapshot id of a
/// request (at any depth, a content source's too) that is not in this plugin's format.
/// Empty ids are left to the RPC's own checks.
pub(crate) fn malformed_id(request: &prost_reflect::DynamicMessage) -> Option<Status> {
    use prost_reflect::Value;
    fn prefix(field: &str) -> Option<&'static str> {
        if field.ends_with("group_snapshot_id") {
            Some("group-")
        } else if field.ends_with("snapshot_id") || field == "snapshot_ids" {
            Some("snap-")
        } else if field.ends_with("volume_id") || field == "source_volume_ids" {
            Some("vol-")
        } else {
            None
        }
    }
    let well_formed = |prefix: &str, id: &str| {
        id.is_empty() || id.strip_prefix(prefix).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    for (field, value) in request.fields() {
        let name = field.name();
        let bad = match (prefix(name), value) {
            (Some(p), Value::String(id)) => (!well_formed(p, id)).then(|| id.clone()),
            (Some(p), Value::List(ids)) => {
                ids.iter().filter_map(Value::as_str).find(|id| !well_formed(p, id)).map(str::to_owned)
            }
            (None, Value::Message(inner)) => {
                if let Some(status) = malformed_id(inner) {
                    return Some(status);
                }
                None
            }
            _ => None,
        };
        if let Some(id) = bad {
            return Some(Status::invalid_argument(format!(
                "{name} {id:?} is malformed: this plugin's ids look like {}000001",
                prefix(name).unwrap_or_default()
            )));
        }
    }
    None
}

/// Logs the active quirks (warn level): this plugin misbehaves on purpose.
pub(crate) fn warn_active(quirks: &BTreeSet<Quirk>) {
    for q in quirks {
        tracing::warn!(quirk = q.name(), "quirk active: {}", q.description());
    }
}

/// The mode `overconfirm` confirms instead of `mode`: never the one requested.
fn other_mode(mode: i32) -> Mode {
    if mode == Mode::SingleNodeWriter as i32 {
        Mode::MultiNodeReaderOnly
    } else {
        Mode::SingleNodeWriter
    }
}

/// The name of the stage record `stage-state-in-parent` keeps beside the staging path.
pub const STAGE_RECORD: &str = ".csi-conform-stage";

/// The topology key of the extra segment of `topology-extra-node-segment`.
pub const EXTRA_TOPOLOGY_KEY: &str = "topology.csi-conform.dev/zone";

impl Plugin {
    /// `stage-state-in-parent`: records `volume_id` in the staging path's parent, refusing
    /// when the record there names another volume still staged on this node.
    pub(crate) fn quirk_stage_record(&self, staging: &std::path::Path, volume_id: &str, staged: &[String]) -> Result<(), Status> {
        if !self.quirk(Quirk::StageStateInParent) {
            return Ok(());
        }
        let Some(parent) = staging.parent() else { return Ok(()) };
        let record = parent.join(STAGE_RECORD);
        if let Ok(other) = std::fs::read_to_string(&record)
            && other != volume_id
            && staged.contains(&other)
        {
            return Err(Status::failed_precondition(format!(
                "{} holds the stage state of volume {other}: one volume per staging directory's parent",
                parent.display()
            )));
        }
        std::fs::create_dir_all(parent)
            .and_then(|()| std::fs::write(&record, volume_id))
            .map_err(|e| Status::internal(format!("cannot write the stage record {}: {e}", record.display())))
    }

    /// `staging-dir-not-made`: a staging path that does not exist is refused, not made (the
    /// spec has the CO make it).
    pub(crate) fn quirk_staging_dir_made(&self, staging: &std::path::Path) -> Result<(), Status> {
        if self.quirk(Quirk::StagingDirNotMade) && !staging.exists() {
            return Err(Status::internal(format!("staging path {} does not exist", staging.display())));
        }
        Ok(())
    }

    /// `unstage-by-volume`: whether a staged volume may be staged at another path too.
    pub(crate) fn quirk_stages_twice(&self) -> bool {
        self.quirk(Quirk::UnstageByVolume)
    }

    /// `unstage-by-volume`: after NodeUnstageVolume of one staging path, every other staging
    /// and publication of `volume_id` on the node is unmounted and forgotten (the volume was
    /// released as a whole), their directories left as they are.
    pub(crate) fn quirk_release_volume(&self, node: &mut super::state::NodeRecord, volume_id: &str) {
        if !self.quirk(Quirk::UnstageByVolume) {
            return;
        }
        node.publications.retain(|target, p| {
            if p.volume_id == volume_id && p.mounted {
                let _ = crate::mounts::unmount(std::path::Path::new(target));
            }
            p.volume_id != volume_id
        });
        node.stagings.retain(|staging, s| {
            if s.volume_id == volume_id && s.mounted {
                let _ = crate::mounts::unmount(std::path::Path::new(staging));
            }
            s.volume_id != volume_id
        });
    }

    /// `stage-state-in-parent`: removes the stage record of `volume_id` beside `staging`.
    pub(crate) fn quirk_drop_stage_record(&self, staging: &std::path::Path, volume_id: &str) {
        if let Some(record) = staging.parent().map(|p| p.join(STAGE_RECORD))
            && self.quirk(Quirk::StageStateInParent)
            && std::fs::read_to_string(&record).is_ok_and(|v| v == volume_id)
        {
            let _ = std::fs::remove_file(record);
        }
    }

    /// `expand-needs-staging-path`: the refusal of a NodeExpandVolume of `volume_id` without a
    /// staging path while the volume is staged on `node` (a plugin that finds the staged
    /// device only through the staging path).
    pub(crate) fn quirk_expand_staging(&self, node: Option<&super::state::NodeRecord>, volume_id: &str, staging: &str) -> Result<(), Status> {
        let staged = node.is_some_and(|n| n.stagings.values().any(|s| s.volume_id == volume_id));
        if self.quirk(Quirk::ExpandNeedsStagingPath) && staging.is_empty() && staged {
            return Err(Status::invalid_argument(format!(
                "staging_target_path is required: volume {volume_id} is staged on this node and its device is found through the staging path"
            )));
        }
        Ok(())
    }

    /// Whether a quirk is active.
    pub(crate) fn quirk(&self, q: Quirk) -> bool {
        self.config.quirks.contains(&q)
    }

    /// `advertise-publish-unimplemented`: UNIMPLEMENTED for the publish RPCs even though
    /// PUBLISH_UNPUBLISH_VOLUME is advertised.
    pub(crate) fn quirk_unimplemented(&self, rpc: &str) -> Option<Status> {
        (self.quirk(Quirk::AdvertisePublishUnimplemented)
            && matches!(rpc, "ControllerPublishVolume" | "ControllerUnpublishVolume"))
        .then(|| Status::unimplemented(format!("{rpc} is not implemented")))
    }

    /// The secrets requests must carry: the configured ones, unless `ignore-secrets`.
    pub(crate) fn enforced_secrets(&self) -> Option<&Secrets> {
        self.config
            .secrets
            .as_ref()
            .filter(|_| !self.quirk(Quirk::IgnoreSecrets))
    }

    /// Whether NodeStageVolume / NodePublishVolume require the volume_context: with
    /// `--require-context`, or with `require-volume-context` (which, unlike the flag, leaves
    /// publish_context and the controller RPCs alone).
    pub(crate) fn node_requires_volume_context(&self) -> bool {
        self.config.require_context || self.quirk(Quirk::RequireVolumeContext)
    }

    /// The per-mount flags (nosuid, ...) a node mount applies for `cap`: its VFS mount flags,
    /// none under `ignore-mount-flags`.
    pub(crate) fn mount_flags(&self, cap: &Capability) -> nix::mount::MsFlags {
        if self.quirk(Quirk::IgnoreMountFlags) {
            nix::mount::MsFlags::empty()
        } else {
            crate::mounts::vfs_flags(cap.mount_flags())
        }
    }

    /// `created-mount-flags-only`: why `cap` is not supported on `volume` when its mount
    /// flags differ from every mount capability the volume was created with; `None` when
    /// the quirk is off or the flags match.
    pub(crate) fn quirk_mount_flags_problem(&self, volume: &VolumeRecord, cap: &Capability) -> Option<String> {
        if !self.quirk(Quirk::CreatedMountFlagsOnly) || cap.is_block() {
            return None;
        }
        let created = volume.capabilities.iter().filter(|c| !c.is_block());
        let mut created = created.map(|c| c.mount_flags()).peekable();
        created.peek()?;
        (!created.any(|flags| flags == cap.mount_flags()))
            .then(|| format!("volume {} was not created with these mount_flags", volume.id))
    }

    /// `internal-on-odd-caps`: INTERNAL when any capability is block + MULTI_NODE_MULTI_WRITER.
    pub(crate) fn quirk_odd_capabilities(
        &self,
        rpc: &str,
        caps: &[Capability],
    ) -> Result<(), Status> {
        let odd = caps
            .iter()
            .any(|c| c.is_block() && c.mode() == Mode::MultiNodeMultiWriter);
        if odd && self.quirk(Quirk::InternalOnOddCaps) {
            return Err(Status::internal(format!(
                "{rpc}: unexpected capability combination block/MULTI_NODE_MULTI_WRITER"
            )));
        }
        Ok(())
    }

    /// `empty-source-rejected`: INVALID_ARGUMENT for a set-but-empty content source; `None`
    /// to take the compliant path (every other source).
    pub(crate) fn quirk_content_source(
        &self,
        source: &v1::VolumeContentSource,
    ) -> Option<Result<Option<Source>, Status>> {
        (self.quirk(Quirk::EmptySourceRejected) && source.r#type.is_none())
            .then(|| Err(Status::invalid_argument(EMPTY_SOURCE_MESSAGE)))
    }

    /// The answer of a ValidateVolumeCapabilities call that confirms `confirmed`: the
    /// confirmation itself, unless a confirmation quirk reshapes or withholds it.
    pub(crate) fn confirmation(
        &self,
        mut confirmed: Confirmed,
    ) -> v1::ValidateVolumeCapabilitiesResponse {
        let caps = &mut confirmed.volume_capabilities;
        if self.quirk(Quirk::IncompleteConfirmation) {
            caps.truncate(1);
        }
        for cap in caps.iter_mut() {
            if self.quirk(Quirk::Overconfirm)
                && let Some(m) = cap.access_mode.as_mut()
            {
                m.mode = other_mode(m.mode) as i32;
            }
            if self.quirk(Quirk::DropMountFlags)
                && let Some(AccessType::Mount(m)) = cap.access_type.as_mut()
            {
                m.mount_flags.clear();
                m.volume_mount_group.clear();
            }
        }
        let withheld = |message: &str| v1::ValidateVolumeCapabilitiesResponse {
            confirmed: None,
            message: message.to_owned(),
        };
        if self.quirk(Quirk::Unconfirmed) {
            return withheld(UNCONFIRMED_MESSAGE);
        }
        if self.quirk(Quirk::UnconfirmedSilent) {
            return withheld("");
        }
        v1::ValidateVolumeCapabilitiesResponse {
            confirmed: Some(confirmed),
            message: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let names: BTreeSet<&str> = Quirk::ALL.iter().map(|q| q.name()).collect();
        assert_eq!(names.len(), Quirk::ALL.len());
        for &q in Quirk::ALL {
            assert_eq!(q.name().parse::<Quirk>(), Ok(q));
            assert_eq!(q.to_string(), q.name());
            assert!(!q.description().contains('\n'), "{q}: one line");
        }
        assert_eq!(
            "Drop_Mount_Flags".parse::<Quirk>(),
            Ok(Quirk::DropMountFlags)
        );
    }

    #[test]
    fn unknown_names_list_the_valid_ones_and_suggest_the_closest() {
        let err = "unconfirmed-slient".parse::<Quirk>().unwrap_err();
        assert_eq!(err.suggestion, Some(Quirk::UnconfirmedSilent));
        let text = err.to_string();
        assert!(
            text.contains("did you mean \"unconfirmed-silent\"?"),
            "{text}"
        );
        assert!(text.contains(&valid_names()), "{text}");
        // ("publish" alone is part of unpublish-needs-known-node too: no guess.)
        assert_eq!(
            "advertise-publish".parse::<Quirk>().unwrap_err().suggestion,
            Some(Quirk::AdvertisePublishUnimplemented)
        );
        let err = "nonsense".parse::<Quirk>().unwrap_err();
        assert_eq!(err.suggestion, None);
        assert!(!err.to_string().contains("did you mean"), "{err}");
        // "confirm" is part of several names: no guess.
        assert_eq!("confirm".parse::<Quirk>().unwrap_err().suggestion, None);
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("abc", "abd"), 1);
        assert_eq!(edit_distance("ab", "abc"), 1);
        assert_eq!(edit_distance("slient", "silent"), 2);
    }

    #[test]
    fn overconfirm_never_confirms_the_requested_mode() {
        for mode in 1..=7 {
            assert_ne!(other_mode(mode) as i32, mode);
        }
    }

    #[test]
    fn listing_has_one_aligned_line_per_quirk() {
        let listing = Quirk::listing();
        let lines: Vec<&str> = listing.lines().collect();
        assert_eq!(lines.len(), Quirk::ALL.len());
        let column = lines[0].find(Quirk::ALL[0].description()).unwrap();
        for (line, q) in lines.iter().zip(Quirk::ALL) {
            assert!(line.starts_with(q.name()), "{line}");
            assert_eq!(line.find(q.description()), Some(column), "{line}");
        }
    }
}
