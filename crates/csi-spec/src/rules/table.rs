//! The table of response rules: every rule the client layer applies to a plugin's answers,
//! each with its id, the requirement of `suites/spec/v1.12.yaml` it stands for, its level and
//! what it asks, in one place. The checks in [`super::check`] only say *where* a row applies.

/// How binding a rule is, as the spec's words make it: a broken MUST fails; a MUST the harness
/// tolerates warns, labelled as what it is; what the spec leaves open is only a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The spec says MUST / SHALL / REQUIRED, and a CO depends on it: a failure.
    Must,
    /// The spec says MUST / SHALL, but no CO depends on it (a human-readable message's
    /// length): a warning, labelled a tolerated deviation from MUST.
    Tolerated,
    /// The spec leaves it open (no rule binds the plugin): a note, never a verdict.
    Note,
}

impl Level {
    /// `MUST`, `tolerated deviation from MUST` or `note`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "MUST",
            Level::Tolerated => "tolerated deviation from MUST",
            Level::Note => "note: the spec leaves it open",
        }
    }
}

/// What a rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// A REQUIRED field of message `message` (short name, nested as `ListVolumesResponse.Entry`)
    /// is set and non-empty, in the answers of `rpc` (`None`: any RPC).
    Required {
        /// The RPC whose answers it applies to, or every RPC.
        rpc: Option<&'static str>,
        /// The message type that holds the field.
        message: &'static str,
        /// The field.
        field: &'static str,
    },
    /// An integer field (or an `Int64Value`) of `message` is not negative.
    NonNegative {
        /// The message type.
        message: &'static str,
        /// The field.
        field: &'static str,
    },
    /// An enum field of `message` is set to a defined value other than `UNKNOWN` (0).
    KnownEnum {
        /// The message type.
        message: &'static str,
        /// The field.
        field: &'static str,
    },
    /// Every string field of an answer is within the general limit (128 bytes), unless the
    /// field sets its own (see [`super::check::own_limit`]) or is free text.
    StringLimit,
    /// Free-text strings (`message` fields) within the general limit.
    TextLimit,
    /// Every string map of an answer within the general limit (4 KiB, keys and values).
    MapLimit,
    /// Every value of a string map within the general string limit (128 bytes).
    MapValueLimit,
    /// GetPluginInfo's name in domain-name form, at most 63 characters.
    PluginName,
    /// Topology keys: an optional DNS prefix and a name, in the spec's characters and lengths;
    /// one prefix for all keys; no two keys equal but for case.
    TopologyKey,
    /// Topology values: 1 to 63 characters, alphanumeric at both ends.
    TopologyValue,
    /// CreateVolume's capacity_bytes within the request's range (0 = unknown passes).
    CapacityInRange,
    /// ControllerExpandVolume's capacity_bytes not below the requested bytes.
    ExpandedAtLeast,
    /// NodeGetVolumeStats: used and available not above total (when total is known).
    UsageWithinTotal,
    /// A page of listing `rpc` is not longer than the request's max_entries.
    PageWithinMax {
        /// ListVolumes or ListSnapshots.
        rpc: &'static str,
    },
    /// Listing `rpc`'s next_token is never one it already returned in the same listing.
    TokenNotRepeated {
        /// ListVolumes or ListSnapshots.
        rpc: &'static str,
    },
    /// Listing `rpc` ends within [`super::MAX_PAGES`] pages.
    PagesEnd {
        /// ListVolumes or ListSnapshots.
        rpc: &'static str,
    },
    /// A group snapshot is ready_to_use only when every member is.
    GroupReady,
    /// A volume created with requisite topologies is accessible from one of them (no reported
    /// topology contradicts every requisite one on a key both name).
    RequisiteTopology,
    /// Every member of a group snapshot names the group.
    MembersNameGroup,
    /// SnapshotMetadata ranges of `rpc`: increasing, not overlapping, positive sizes, one type.
    MetadataOrder {
        /// GetMetadataAllocated or GetMetadataDelta.
        rpc: &'static str,
    },
    /// No range of `rpc` ends at or before the requested starting offset.
    MetadataStart {
        /// GetMetadataAllocated or GetMetadataDelta.
        rpc: &'static str,
    },
    /// No message of `rpc` carries more ranges than max_results.
    MetadataMaxResults {
        /// GetMetadataAllocated or GetMetadataDelta.
        rpc: &'static str,
    },
    /// What a DeleteVolume / DeleteSnapshot (`rpc`) answered OK for is gone. Not judged from
    /// the answer alone: the engine looks the object up again (`suite::deleted`).
    Gone {
        /// DeleteVolume or DeleteSnapshot.
        rpc: &'static str,
    },
    /// An error answer has a message.
    ErrorMessage,
    /// An error answer has no status details.
    ErrorDetails,
}

/// One response rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// A stable id, `answer.<area>.<detail>`.
    pub id: &'static str,
    /// The requirement of the built-in inventory it checks.
    pub requirement: &'static str,
    /// MUST fails, a tolerated MUST warns, a note informs.
    pub level: Level,
    /// What it asks, in one line.
    pub summary: &'static str,
    /// Where it applies.
    pub check: Check,
}

const fn rule(id: &'static str, requirement: &'static str, level: Level, summary: &'static str, check: Check) -> Rule {
    Rule { id, requirement, level, summary, check }
}

const fn required(rpc: Option<&'static str>, message: &'static str, field: &'static str) -> Check {
    Check::Required { rpc, message, field }
}

use Level::{Must, Note, Tolerated};

/// Every response rule. Ids are unique (a test checks), and each names a requirement of the
/// built-in inventory (a test checks that too).
pub const RULES: &[Rule] = &[
    // REQUIRED fields.
    rule("answer.create-volume.volume", "CreateVolume.volume.id-required", Must,
        "CreateVolume's answer carries the volume", required(Some("CreateVolume"), "CreateVolumeResponse", "volume")),
    rule("answer.create-volume.volume-id", "CreateVolume.volume.id-required", Must,
        "CreateVolume's volume has a non-empty volume_id", required(Some("CreateVolume"), "Volume", "volume_id")),
    rule("answer.list-volumes.entry", "ListVolumes.entry.volume", Must,
        "Every ListVolumes entry carries a volume with a volume_id", required(Some("ListVolumes"), "ListVolumesResponse.Entry", "volume")),
    rule("answer.list-volumes.volume-id", "ListVolumes.entry.volume", Must,
        "Every listed volume has a volume_id", required(Some("ListVolumes"), "Volume", "volume_id")),
    rule("answer.get-volume.volume", "ControllerGetVolume.answer", Must,
        "ControllerGetVolume's answer carries the volume", required(Some("ControllerGetVolume"), "ControllerGetVolumeResponse", "volume")),
    rule("answer.get-volume.volume-id", "ControllerGetVolume.answer", Must,
        "ControllerGetVolume's volume has a volume_id", required(Some("ControllerGetVolume"), "Volume", "volume_id")),
    rule("answer.create-snapshot.snapshot", "CreateSnapshot.snapshot.fields", Must,
        "CreateSnapshot's answer carries the snapshot", required(Some("CreateSnapshot"), "CreateSnapshotResponse", "snapshot")),
    rule("answer.create-snapshot.snapshot-id", "CreateSnapshot.snapshot.fields", Must,
        "CreateSnapshot's snapshot has a snapshot_id", required(Some("CreateSnapshot"), "Snapshot", "snapshot_id")),
    rule("answer.create-snapshot.source-volume-id", "CreateSnapshot.snapshot.fields", Must,
        "CreateSnapshot's snapshot names its source volume", required(Some("CreateSnapshot"), "Snapshot", "source_volume_id")),
    rule("answer.create-snapshot.creation-time", "CreateSnapshot.snapshot.fields", Must,
        "CreateSnapshot's snapshot has a creation_time", required(Some("CreateSnapshot"), "Snapshot", "creation_time")),
    rule("answer.list-snapshots.entry", "ListSnapshots.all-snapshots", Must,
        "Every ListSnapshots entry carries a snapshot", required(Some("ListSnapshots"), "ListSnapshotsResponse.Entry", "snapshot")),
    rule("answer.list-snapshots.snapshot-id", "ListSnapshots.all-snapshots", Must,
        "Every listed snapshot has a snapshot_id", required(Some("ListSnapshots"), "Snapshot", "snapshot_id")),
    rule("answer.list-snapshots.source-volume-id", "ListSnapshots.all-snapshots", Must,
        "Every listed snapshot names its source volume", required(Some("ListSnapshots"), "Snapshot", "source_volume_id")),
    rule("answer.list-snapshots.creation-time", "ListSnapshots.all-snapshots", Must,
        "Every listed snapshot has a creation_time", required(Some("ListSnapshots"), "Snapshot", "creation_time")),
    rule("answer.get-snapshot.snapshot", "GetSnapshot.answer", Must,
        "GetSnapshot's answer carries the snapshot", required(Some("GetSnapshot"), "GetSnapshotResponse", "snapshot")),
    rule("answer.get-snapshot.snapshot-id", "GetSnapshot.answer", Must,
        "GetSnapshot's snapshot has a snapshot_id", required(Some("GetSnapshot"), "Snapshot", "snapshot_id")),
    rule("answer.get-snapshot.source-volume-id", "GetSnapshot.answer", Must,
        "GetSnapshot's snapshot names its source volume", required(Some("GetSnapshot"), "Snapshot", "source_volume_id")),
    rule("answer.get-snapshot.creation-time", "GetSnapshot.answer", Must,
        "GetSnapshot's snapshot has a creation_time", required(Some("GetSnapshot"), "Snapshot", "creation_time")),
    rule("answer.create-group-snapshot.group", "CreateVolumeGroupSnapshot.answer", Must,
        "CreateVolumeGroupSnapshot's answer carries the group snapshot",
        required(Some("CreateVolumeGroupSnapshot"), "CreateVolumeGroupSnapshotResponse", "group_snapshot")),
    rule("answer.group-snapshot.id", "CreateVolumeGroupSnapshot.answer", Must,
        "A group snapshot has a group_snapshot_id", required(None, "VolumeGroupSnapshot", "group_snapshot_id")),
    rule("answer.group-snapshot.members", "CreateVolumeGroupSnapshot.answer", Must,
        "A group snapshot lists its member snapshots", required(None, "VolumeGroupSnapshot", "snapshots")),
    rule("answer.group-snapshot.creation-time", "CreateVolumeGroupSnapshot.answer", Must,
        "A group snapshot has a creation_time", required(None, "VolumeGroupSnapshot", "creation_time")),
    rule("answer.group-snapshot.member-id", "CreateVolumeGroupSnapshot.answer", Must,
        "Every member snapshot has a snapshot_id and a source volume",
        required(Some("CreateVolumeGroupSnapshot"), "Snapshot", "snapshot_id")),
    rule("answer.group-snapshot.member-source", "CreateVolumeGroupSnapshot.answer", Must,
        "Every member snapshot names its source volume",
        required(Some("CreateVolumeGroupSnapshot"), "Snapshot", "source_volume_id")),
    rule("answer.get-group-snapshot.group", "GetVolumeGroupSnapshot.answer", Must,
        "GetVolumeGroupSnapshot's answer carries the group snapshot",
        required(Some("GetVolumeGroupSnapshot"), "GetVolumeGroupSnapshotResponse", "group_snapshot")),
    rule("answer.group-snapshot.members-name-group", "CreateVolumeGroupSnapshot.answer", Must,
        "Every member snapshot's group_snapshot_id is the group's id", Check::MembersNameGroup),
    rule("answer.node-info.node-id", "NodeGetInfo.node-id", Must,
        "NodeGetInfo's answer has a node_id", required(Some("NodeGetInfo"), "NodeGetInfoResponse", "node_id")),
    rule("answer.plugin-info.name", "GetPluginInfo.name.required", Must,
        "GetPluginInfo's answer has a name", required(Some("GetPluginInfo"), "GetPluginInfoResponse", "name")),
    rule("answer.plugin-info.vendor-version", "GetPluginInfo.vendor-version.required", Must,
        "GetPluginInfo's answer has a vendor_version", required(Some("GetPluginInfo"), "GetPluginInfoResponse", "vendor_version")),
    rule("answer.plugin-info.name-format", "GetPluginInfo.name.format", Must,
        "The plugin name is domain-name shaped: at most 63 characters, alphanumeric at both ends, dots and dashes inside",
        Check::PluginName),
    // Values.
    rule("answer.volume.capacity-non-negative", "CreateVolume.volume.capacity-non-negative", Must,
        "A volume's capacity_bytes is not negative", Check::NonNegative { message: "Volume", field: "capacity_bytes" }),
    rule("answer.create-volume.capacity-in-range", "CreateVolume.capacity.honoured", Must,
        "CreateVolume's capacity_bytes is within the requested range (0 means unknown)", Check::CapacityInRange),
    rule("answer.snapshot.size-non-negative", "CreateSnapshot.snapshot.fields", Must,
        "A snapshot's size_bytes is not negative", Check::NonNegative { message: "Snapshot", field: "size_bytes" }),
    rule("answer.expand.at-least-requested", "ControllerExpandVolume.grows", Must,
        "ControllerExpandVolume's capacity_bytes is at least the requested bytes", Check::ExpandedAtLeast),
    rule("answer.capacity.available-non-negative", "GetCapacity.non-negative", Must,
        "GetCapacity's available_capacity is not negative",
        Check::NonNegative { message: "GetCapacityResponse", field: "available_capacity" }),
    rule("answer.capacity.maximum-non-negative", "GetCapacity.non-negative", Must,
        "GetCapacity's maximum_volume_size is not negative",
        Check::NonNegative { message: "GetCapacityResponse", field: "maximum_volume_size" }),
    rule("answer.capacity.minimum-non-negative", "GetCapacity.non-negative", Must,
        "GetCapacity's minimum_volume_size is not negative",
        Check::NonNegative { message: "GetCapacityResponse", field: "minimum_volume_size" }),
    rule("answer.node-info.max-volumes-non-negative", "NodeGetInfo.max-volumes-non-negative", Must,
        "max_volumes_per_node is not negative",
        Check::NonNegative { message: "NodeGetInfoResponse", field: "max_volumes_per_node" }),
    rule("answer.stats.unit-known", "NodeGetVolumeStats.usage", Must,
        "Every usage entry names its unit (BYTES or INODES)", Check::KnownEnum { message: "VolumeUsage", field: "unit" }),
    rule("answer.stats.available-non-negative", "NodeGetVolumeStats.usage", Must,
        "A usage's available is not negative", Check::NonNegative { message: "VolumeUsage", field: "available" }),
    rule("answer.stats.total-non-negative", "NodeGetVolumeStats.usage", Must,
        "A usage's total is not negative", Check::NonNegative { message: "VolumeUsage", field: "total" }),
    rule("answer.stats.used-non-negative", "NodeGetVolumeStats.usage", Must,
        "A usage's used is not negative", Check::NonNegative { message: "VolumeUsage", field: "used" }),
    rule("answer.stats.within-total", "NodeGetVolumeStats.usage", Note,
        "A usage's used and available are not above its total (when the total is known): the spec sets no such rule, so a note",
        Check::UsageWithinTotal),
    // Size limits and formats.
    rule("answer.strings.within-128-bytes", "General.strings.answer-within-limit", Must,
        "Strings in an answer are at most 128 bytes unless the field sets its own limit (node_id: 256)", Check::StringLimit),
    rule("answer.strings.message-within-128-bytes", "General.strings.answer-within-limit", Tolerated,
        "Human-readable message fields are at most 128 bytes (#size-limits: fields \"SHALL NOT exceed\" 128 bytes; no CO relies on a message's length, so tolerated)",
        Check::TextLimit),
    rule("answer.maps.within-4kib", "General.maps.answer-within-limit", Must,
        "String maps in an answer (volume_context, publish_context, manifest...) are at most 4 KiB, keys and values together",
        Check::MapLimit),
    rule("answer.maps.value-within-128-bytes", "General.strings.answer-within-limit", Note,
        "Values of string maps stay within 128 bytes: the spec limits maps as a whole (4 KiB), and whether its 128-byte string limit reaches each value is left open, so a longer one is a note",
        Check::MapValueLimit),
    rule("answer.topology.key-format", "Topology.segment-format", Must,
        "Topology keys are [prefix/]name: name at most 63 characters, alphanumeric at both ends, '-', '_', '.' inside; prefix a lower-case domain name of at most 63 characters, the same on every key; no two keys differ by case only",
        Check::TopologyKey),
    rule("answer.topology.value-format", "Topology.segment-format", Must,
        "Topology values are 1 to 63 characters, alphanumeric at both ends, '-', '_', '.' inside", Check::TopologyValue),
    // Pagination.
    rule("answer.list-volumes.max-entries", "ListVolumes.max-entries", Must,
        "A ListVolumes page has at most max_entries entries", Check::PageWithinMax { rpc: "ListVolumes" }),
    rule("answer.list-snapshots.max-entries", "ListSnapshots.max-entries", Must,
        "A ListSnapshots page has at most max_entries entries", Check::PageWithinMax { rpc: "ListSnapshots" }),
    rule("answer.list-volumes.token-not-repeated", "ListVolumes.token.pages", Must,
        "ListVolumes never returns a next_token it already returned in the same listing: paging would not end",
        Check::TokenNotRepeated { rpc: "ListVolumes" }),
    rule("answer.list-snapshots.token-not-repeated", "ListSnapshots.token.pages", Must,
        "ListSnapshots never returns a next_token it already returned in the same listing: paging would not end",
        Check::TokenNotRepeated { rpc: "ListSnapshots" }),
    rule("answer.list-volumes.pages-end", "ListVolumes.token.pages", Must,
        "A ListVolumes listing ends within a bounded number of pages", Check::PagesEnd { rpc: "ListVolumes" }),
    rule("answer.list-snapshots.pages-end", "ListSnapshots.token.pages", Must,
        "A ListSnapshots listing ends within a bounded number of pages", Check::PagesEnd { rpc: "ListSnapshots" }),
    // Group snapshots and topology.
    rule("answer.group-snapshot.ready-only-if-members", "CreateVolumeGroupSnapshot.ready-to-use", Must,
        "A group snapshot is ready_to_use only when every member snapshot is", Check::GroupReady),
    rule("answer.create-volume.requisite-topology", "CreateVolume.topology.requisite", Must,
        "A volume created with requisite topologies is accessible from one of them: not every reported topology may contradict every requisite one",
        Check::RequisiteTopology),
    // SnapshotMetadata streams.
    rule("answer.metadata-allocated.order", "GetMetadataAllocated.stream-order", Must,
        "Allocated ranges come in increasing offset order without overlap, with positive sizes, one metadata type per stream",
        Check::MetadataOrder { rpc: "GetMetadataAllocated" }),
    rule("answer.metadata-allocated.starting-offset", "GetMetadataAllocated.starting-offset", Must,
        "No allocated range ends at or before the requested starting offset", Check::MetadataStart { rpc: "GetMetadataAllocated" }),
    rule("answer.metadata-allocated.max-results", "GetMetadataAllocated.max-results", Must,
        "No stream message carries more ranges than max_results", Check::MetadataMaxResults { rpc: "GetMetadataAllocated" }),
    rule("answer.metadata-delta.order", "GetMetadataDelta.stream-order", Must,
        "Changed ranges come in increasing offset order without overlap, with positive sizes, one metadata type per stream",
        Check::MetadataOrder { rpc: "GetMetadataDelta" }),
    rule("answer.metadata-delta.starting-offset", "GetMetadataDelta.starting-offset", Must,
        "No changed range ends at or before the requested starting offset", Check::MetadataStart { rpc: "GetMetadataDelta" }),
    rule("answer.metadata-delta.max-results", "GetMetadataDelta.max-results", Must,
        "No stream message carries more ranges than max_results", Check::MetadataMaxResults { rpc: "GetMetadataDelta" }),
    // Deletions (looked up again by the engine, within --delete-grace).
    rule("answer.delete-volume.gone", "DeleteVolume.deletes", Must,
        "A volume DeleteVolume answered OK for is gone: failed only when every believed witness still shows it after a short grace (ControllerGetVolume answers OK and ListVolumes lists it; one of them when the plugin has only one, or the other lied this run)",
        Check::Gone { rpc: "DeleteVolume" }),
    rule("answer.delete-snapshot.gone", "DeleteSnapshot.deletes", Must,
        "A snapshot DeleteSnapshot answered OK for is gone: failed only when every believed witness still shows it after a short grace (GetSnapshot answers OK and ListSnapshots lists it; one of them when the plugin has only one, or the other lied this run)",
        Check::Gone { rpc: "DeleteSnapshot" }),
    // Error answers.
    rule("answer.error.message", "ErrorScheme.message.human-readable", Must,
        "An error answer (but UNIMPLEMENTED, whose code says it all and which gRPC frameworks send bare for a service the plugin does not register) carries a human-readable message",
        Check::ErrorMessage),
    rule("answer.error.details-empty", "ErrorScheme.details.empty", Must,
        "An error answer leaves the status details empty", Check::ErrorDetails),
];

/// The rule with this id.
pub fn by_id(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

/// The first rule whose check is `check` (every check but `Required`, `NonNegative` and
/// `KnownEnum` has exactly one row).
pub(crate) fn of(check: Check) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.check == check)
}
