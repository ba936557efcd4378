//! Wire compatibility of `crates/csi-proto/proto/csi.proto` with the public CSI v1.12 and v1.13 definitions:
//! exact encoded bytes for representative messages, and the whole descriptor (every field
//! number and type, every enum value, every RPC, and the `csi_secret` / `alpha_*` markers)
//! checked against tables written down from the upstream v1.12.0 definition plus the v1.13.0
//! additions (`shared/spec/csi-v1.13-changes.md`). v1.13's removals stay: it reserved their
//! numbers, so the superset reads v1.12 plugins' `volume_condition` too.

use std::collections::{BTreeMap, BTreeSet};

use csi_conform::proto::{self, v1};
use prost::Message;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind};

// =============================================================================================
// Encoded bytes
//
// Every expected byte string below is written by hand from the upstream field numbers:
// a key is `field_number << 3 | wire_type` (0 varint, 2 length-delimited), followed by a varint
// or by a length and that many bytes. A map entry is a nested message with key = 1, value = 2.
// Maps hold one entry each, so the encoding does not depend on hash order.
// =============================================================================================

/// Concatenates hand-written pieces into one expected byte string.
fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Checks that `value` encodes to exactly `expected`, that `expected` decodes back to `value`,
/// and that the run-time descriptor pool encodes the same value to the same bytes (so the
/// generated code and the reflective view of the schema agree).
fn assert_wire<M>(value: &M, expected: &[u8])
where
    M: Message + prost::Name + Default + PartialEq + std::fmt::Debug,
{
    let encoded = value.encode_to_vec();
    assert_eq!(
        encoded,
        expected,
        "{} encodes differently\n  got:      {}\n  expected: {}",
        M::full_name(),
        hex(&encoded),
        hex(expected)
    );
    let decoded = M::decode(expected).unwrap_or_else(|e| panic!("{}: {e}", M::full_name()));
    assert_eq!(&decoded, value, "{} decodes differently", M::full_name());

    let dynamic = proto::to_dynamic(value);
    assert_eq!(
        dynamic.encode_to_vec(),
        expected,
        "{} encodes differently through the descriptor pool",
        M::full_name()
    );
    let descriptor = proto::message(&M::full_name()).expect("message is in the pool");
    let redecoded = DynamicMessage::decode(descriptor, expected).expect("dynamic decode");
    assert_eq!(redecoded, dynamic, "{} dynamic decode differs", M::full_name());
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

fn map(key: &str, value: &str) -> std::collections::HashMap<String, String> {
    [(key.to_owned(), value.to_owned())].into()
}

fn zone_a() -> v1::Topology {
    v1::Topology { segments: map("zone", "a") }
}

/// `Topology{segments: {"zone": "a"}}`: entry (1) = key (1) "zone", value (2) "a".
const ZONE_A: &[u8] = &[0x0a, 0x09, 0x0a, 0x04, b'z', b'o', b'n', b'e', 0x12, 0x01, b'a'];

#[test]
fn create_volume_request_bytes() {
    use v1::volume_capability::{AccessMode, AccessType, MountVolume, access_mode::Mode};
    use v1::volume_content_source::{SnapshotSource, Type as Source};

    let request = v1::CreateVolumeRequest {
        name: "pvc-1".into(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: 1 << 30,
            limit_bytes: 1 << 31,
        }),
        volume_capabilities: vec![v1::VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume {
                fs_type: "ext4".into(),
                mount_flags: vec!["noatime".into()],
                volume_mount_group: "1000".into(),
            })),
            access_mode: Some(AccessMode { mode: Mode::SingleNodeMultiWriter as i32 }),
        }],
        parameters: map("type", "ssd"),
        secrets: map("password", "hunter2"),
        volume_content_source: Some(v1::VolumeContentSource {
            r#type: Some(Source::Snapshot(SnapshotSource { snapshot_id: "snap-1".into() })),
        }),
        accessibility_requirements: Some(v1::TopologyRequirement {
            requisite: vec![zone_a()],
            preferred: vec![zone_a()],
        }),
        mutable_parameters: map("iops", "3000"),
    };
    let expected = cat(&[
        // 1 name
        &[0x0a, 0x05],
        b"pvc-1",
        // 2 capacity_range: 1 required_bytes = 2^30, 2 limit_bytes = 2^31
        &[0x12, 0x0c],
        &[0x08, 0x80, 0x80, 0x80, 0x80, 0x04],
        &[0x10, 0x80, 0x80, 0x80, 0x80, 0x08],
        // 3 volume_capabilities[0] (27 bytes)
        &[0x1a, 0x1b],
        //   2 mount (21 bytes): 1 fs_type, 2 mount_flags[0], 3 volume_mount_group
        &[0x12, 0x15],
        &[0x0a, 0x04],
        b"ext4",
        &[0x12, 0x07],
        b"noatime",
        &[0x1a, 0x04],
        b"1000",
        //   3 access_mode: 1 mode = SINGLE_NODE_MULTI_WRITER (7)
        &[0x1a, 0x02, 0x08, 0x07],
        // 4 parameters {"type": "ssd"}
        &[0x22, 0x0b, 0x0a, 0x04],
        b"type",
        &[0x12, 0x03],
        b"ssd",
        // 5 secrets {"password": "hunter2"}
        &[0x2a, 0x13, 0x0a, 0x08],
        b"password",
        &[0x12, 0x07],
        b"hunter2",
        // 6 volume_content_source: 1 snapshot: 1 snapshot_id
        &[0x32, 0x0a, 0x0a, 0x08, 0x0a, 0x06],
        b"snap-1",
        // 7 accessibility_requirements: 1 requisite[0], 2 preferred[0]
        &[0x3a, 0x1a],
        &[0x0a, 0x0b],
        ZONE_A,
        &[0x12, 0x0b],
        ZONE_A,
        // 8 mutable_parameters {"iops": "3000"}
        &[0x42, 0x0c, 0x0a, 0x04],
        b"iops",
        &[0x12, 0x04],
        b"3000",
    ]);
    assert_wire(&request, &expected);
}

#[test]
fn node_publish_volume_request_bytes() {
    use v1::volume_capability::{AccessMode, AccessType, BlockVolume, access_mode::Mode};

    let request = v1::NodePublishVolumeRequest {
        volume_id: "vol-1".into(),
        publish_context: map("dev", "/dev/sdb"),
        staging_target_path: "/stage".into(),
        target_path: "/target".into(),
        volume_capability: Some(v1::VolumeCapability {
            access_type: Some(AccessType::Block(BlockVolume {})),
            access_mode: Some(AccessMode { mode: Mode::SingleNodeWriter as i32 }),
        }),
        readonly: true,
        secrets: map("k", "v"),
        volume_context: map("fs", "xfs"),
    };
    let expected = cat(&[
        // 1 volume_id
        &[0x0a, 0x05],
        b"vol-1",
        // 2 publish_context {"dev": "/dev/sdb"}
        &[0x12, 0x0f, 0x0a, 0x03],
        b"dev",
        &[0x12, 0x08],
        b"/dev/sdb",
        // 3 staging_target_path
        &[0x1a, 0x06],
        b"/stage",
        // 4 target_path
        &[0x22, 0x07],
        b"/target",
        // 5 volume_capability: 1 block (empty), 3 access_mode: 1 mode = SINGLE_NODE_WRITER (1)
        &[0x2a, 0x06, 0x0a, 0x00, 0x1a, 0x02, 0x08, 0x01],
        // 6 readonly
        &[0x30, 0x01],
        // 7 secrets {"k": "v"}
        &[0x3a, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v'],
        // 8 volume_context {"fs": "xfs"}
        &[0x42, 0x09, 0x0a, 0x02],
        b"fs",
        &[0x12, 0x03],
        b"xfs",
    ]);
    assert_wire(&request, &expected);
}

#[test]
fn validate_volume_capabilities_response_bytes() {
    use v1::validate_volume_capabilities_response::Confirmed;
    use v1::volume_capability::{AccessMode, AccessType, MountVolume, access_mode::Mode};

    let response = v1::ValidateVolumeCapabilitiesResponse {
        confirmed: Some(Confirmed {
            volume_context: map("a", "b"),
            volume_capabilities: vec![v1::VolumeCapability {
                access_type: Some(AccessType::Mount(MountVolume::default())),
                access_mode: Some(AccessMode { mode: Mode::MultiNodeMultiWriter as i32 }),
            }],
            parameters: map("p", "q"),
            mutable_parameters: map("m", "n"),
        }),
        message: "ok".into(),
    };
    let expected = cat(&[
        // 1 confirmed (32 bytes)
        &[0x0a, 0x20],
        //   1 volume_context {"a": "b"}
        &[0x0a, 0x06, 0x0a, 0x01, b'a', 0x12, 0x01, b'b'],
        //   2 volume_capabilities[0]: 2 mount (empty), 3 access_mode: MULTI_NODE_MULTI_WRITER (5)
        &[0x12, 0x06, 0x12, 0x00, 0x1a, 0x02, 0x08, 0x05],
        //   3 parameters {"p": "q"}
        &[0x1a, 0x06, 0x0a, 0x01, b'p', 0x12, 0x01, b'q'],
        //   4 mutable_parameters {"m": "n"}
        &[0x22, 0x06, 0x0a, 0x01, b'm', 0x12, 0x01, b'n'],
        // 2 message
        &[0x12, 0x02],
        b"ok",
    ]);
    assert_wire(&response, &expected);
}

#[test]
fn list_volumes_response_bytes() {
    use v1::list_volumes_response::{Entry, VolumeStatus};

    let response = v1::ListVolumesResponse {
        entries: vec![Entry {
            volume: Some(v1::Volume {
                capacity_bytes: 1024,
                volume_id: "vol-1".into(),
                ..Default::default()
            }),
            status: Some(VolumeStatus {
                published_node_ids: vec!["node-a".into(), "node-b".into()],
                volume_condition: Some(v1::VolumeCondition {
                    abnormal: true,
                    message: "degraded".into(),
                }),
            }),
        }],
        next_token: "t2".into(),
    };
    let expected = cat(&[
        // 1 entries[0] (44 bytes)
        &[0x0a, 0x2c],
        //   1 volume: 1 capacity_bytes = 1024, 2 volume_id
        &[0x0a, 0x0a, 0x08, 0x80, 0x08, 0x12, 0x05],
        b"vol-1",
        //   2 status (30 bytes): 1 published_node_ids x2, 2 volume_condition
        &[0x12, 0x1e],
        &[0x0a, 0x06],
        b"node-a",
        &[0x0a, 0x06],
        b"node-b",
        //     volume_condition: 1 abnormal, 2 message
        &[0x12, 0x0c, 0x08, 0x01, 0x12, 0x08],
        b"degraded",
        // 2 next_token
        &[0x12, 0x02],
        b"t2",
    ]);
    assert_wire(&response, &expected);
}

#[test]
fn snapshot_bytes() {
    let snapshot = v1::Snapshot {
        size_bytes: 4096,
        snapshot_id: "snap-1".into(),
        source_volume_id: "vol-1".into(),
        creation_time: Some(prost_types::Timestamp {
            seconds: 1_700_000_000,
            nanos: 5,
        }),
        ready_to_use: true,
        group_snapshot_id: "group-1".into(),
        accessible_topology: Vec::new(),
    };
    let expected = cat(&[
        // 1 size_bytes = 4096
        &[0x08, 0x80, 0x20],
        // 2 snapshot_id
        &[0x12, 0x06],
        b"snap-1",
        // 3 source_volume_id
        &[0x1a, 0x05],
        b"vol-1",
        // 4 creation_time (Timestamp): 1 seconds = 1700000000, 2 nanos = 5
        &[0x22, 0x08, 0x08, 0x80, 0xe2, 0xcf, 0xaa, 0x06, 0x10, 0x05],
        // 5 ready_to_use
        &[0x28, 0x01],
        // 6 group_snapshot_id
        &[0x32, 0x07],
        b"group-1",
    ]);
    assert_wire(&snapshot, &expected);
}

#[test]
fn v1_13_health_and_snapshot_topology_bytes() {
    use v1::volume_health::VolumeHealthEntry;
    let response = v1::NodeGetVolumeHealthResponse {
        volume_health: Some(v1::VolumeHealth {
            volume_id: "v".into(),
            health_statuses: vec![VolumeHealthEntry {
                status: v1::VolumeHealthErrorType::Degraded as i32,
                reason: "R".into(),
                message: String::new(),
            }],
        }),
    };
    // 1 volume_health (10 bytes): 1 volume_id "v", 2 entry (5 bytes): 1 status = 1, 2 reason "R"
    let expected = cat(&[&[0x0a, 0x0a, 0x0a, 0x01], b"v", &[0x12, 0x05, 0x08, 0x01, 0x12, 0x01], b"R"]);
    assert_wire(&response, &expected);

    let snapshot = v1::Snapshot { snapshot_id: "s".into(), accessible_topology: vec![zone_a()], ..Default::default() };
    // 2 snapshot_id "s", 7 accessible_topology (a Topology, 11 bytes)
    let expected = cat(&[&[0x12, 0x01], b"s", &[0x3a, 0x0b], ZONE_A]);
    assert_wire(&snapshot, &expected);
}

#[test]
fn controller_get_capabilities_response_bytes() {
    use v1::controller_service_capability::{Rpc, Type as Cap, rpc::Type};

    let cap = |t: Type| v1::ControllerServiceCapability {
        r#type: Some(Cap::Rpc(Rpc { r#type: t as i32 })),
    };
    let response = v1::ControllerGetCapabilitiesResponse {
        capabilities: vec![
            cap(Type::CreateDeleteVolume),
            cap(Type::ModifyVolume),
            cap(Type::GetSnapshot),
        ],
    };
    let expected = cat(&[
        // 1 capabilities[i]: 1 rpc: 1 type
        &[0x0a, 0x04, 0x0a, 0x02, 0x08, 0x01], // CREATE_DELETE_VOLUME = 1
        &[0x0a, 0x04, 0x0a, 0x02, 0x08, 0x0e], // MODIFY_VOLUME = 14
        &[0x0a, 0x04, 0x0a, 0x02, 0x08, 0x0f], // GET_SNAPSHOT = 15
    ]);
    assert_wire(&response, &expected);
}

#[test]
fn node_get_info_response_bytes() {
    let response = v1::NodeGetInfoResponse {
        node_id: "node-a".into(),
        max_volumes_per_node: 128,
        accessible_topology: Some(zone_a()),
    };
    let expected = cat(&[
        // 1 node_id
        &[0x0a, 0x06],
        b"node-a",
        // 2 max_volumes_per_node = 128
        &[0x10, 0x80, 0x01],
        // 3 accessible_topology
        &[0x1a, 0x0b],
        ZONE_A,
    ]);
    assert_wire(&response, &expected);
}

#[test]
fn probe_response_distinguishes_unset_false_and_true() {
    // ready is a google.protobuf.BoolValue: unset sends nothing, false sends an empty wrapper.
    assert_wire(&v1::ProbeResponse { ready: None }, &[]);
    assert_wire(&v1::ProbeResponse { ready: Some(false) }, &[0x0a, 0x00]);
    assert_wire(&v1::ProbeResponse { ready: Some(true) }, &[0x0a, 0x02, 0x08, 0x01]);
}

#[test]
fn get_capacity_response_bytes() {
    let response = v1::GetCapacityResponse {
        available_capacity: 10 << 30,
        maximum_volume_size: Some(1 << 40),
        minimum_volume_size: Some(0),
    };
    let expected = cat(&[
        // 1 available_capacity = 10 GiB
        &[0x08, 0x80, 0x80, 0x80, 0x80, 0x28],
        // 2 maximum_volume_size (Int64Value): 1 value = 2^40
        &[0x12, 0x07, 0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20],
        // 3 minimum_volume_size (Int64Value) = 0: present, so an empty wrapper
        &[0x1a, 0x00],
    ]);
    assert_wire(&response, &expected);
}

#[test]
fn get_metadata_delta_request_bytes() {
    let request = v1::GetMetadataDeltaRequest {
        base_snapshot_id: "snap-1".into(),
        target_snapshot_id: "snap-2".into(),
        starting_offset: 1 << 20,
        max_results: 256,
        secrets: map("k", "v"),
    };
    let expected = cat(&[
        // 1 base_snapshot_id
        &[0x0a, 0x06],
        b"snap-1",
        // 2 target_snapshot_id
        &[0x12, 0x06],
        b"snap-2",
        // 3 starting_offset = 2^20
        &[0x18, 0x80, 0x80, 0x40],
        // 4 max_results = 256
        &[0x20, 0x80, 0x02],
        // 5 secrets {"k": "v"}
        &[0x2a, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v'],
    ]);
    assert_wire(&request, &expected);
}

#[test]
fn get_metadata_delta_response_bytes() {
    let response = v1::GetMetadataDeltaResponse {
        block_metadata_type: v1::BlockMetadataType::VariableLength as i32,
        volume_capacity_bytes: 1 << 30,
        block_metadata: vec![
            v1::BlockMetadata { byte_offset: 0, size_bytes: 4096 },
            v1::BlockMetadata { byte_offset: 1 << 20, size_bytes: 128 },
        ],
    };
    let expected = cat(&[
        // 1 block_metadata_type = VARIABLE_LENGTH (2)
        &[0x08, 0x02],
        // 2 volume_capacity_bytes = 2^30
        &[0x10, 0x80, 0x80, 0x80, 0x80, 0x04],
        // 3 block_metadata[0]: 1 byte_offset = 0 (default, omitted), 2 size_bytes = 4096
        &[0x1a, 0x03, 0x10, 0x80, 0x20],
        // 3 block_metadata[1]: 1 byte_offset = 2^20, 2 size_bytes = 128
        &[0x1a, 0x07, 0x08, 0x80, 0x80, 0x40, 0x10, 0x80, 0x01],
    ]);
    assert_wire(&response, &expected);
}

#[test]
fn plugin_capabilities_oneof_bytes() {
    use v1::plugin_capability::{Service, Type as Cap, VolumeExpansion, service, volume_expansion};

    let response = v1::GetPluginCapabilitiesResponse {
        capabilities: vec![
            v1::PluginCapability {
                r#type: Some(Cap::Service(Service {
                    r#type: service::Type::SnapshotMetadataService as i32,
                })),
            },
            v1::PluginCapability {
                r#type: Some(Cap::VolumeExpansion(VolumeExpansion {
                    r#type: volume_expansion::Type::Online as i32,
                })),
            },
        ],
    };
    let expected = cat(&[
        // 1 capabilities[0]: 1 service: 1 type = SNAPSHOT_METADATA_SERVICE (4)
        &[0x0a, 0x04, 0x0a, 0x02, 0x08, 0x04],
        // 1 capabilities[1]: 2 volume_expansion: 1 type = ONLINE (1)
        &[0x0a, 0x04, 0x12, 0x02, 0x08, 0x01],
    ]);
    assert_wire(&response, &expected);
}

// =============================================================================================
// Descriptor tables
//
// Written down from the upstream v1.12.0 definition. Names are relative to `csi.v1`; nested
// messages and enums are dotted (`PluginCapability.Service`). Type notation: scalar names,
// `[T]` for repeated, `map<K,V>`, `enum X` for enums, message names as they are.
// =============================================================================================

const MAP: &str = "map<string,string>";
const VOLUME_CAPABILITIES: &str = "[VolumeCapability]";

/// One field: (name, number, type).
type Field = (&'static str, u32, &'static str);

/// Every message of package csi.v1 (map entries aside) with every field.
const MESSAGES: &[(&str, &[Field])] = &[
    // Identity
    ("GetPluginInfoRequest", &[]),
    (
        "GetPluginInfoResponse",
        &[("name", 1, "string"), ("vendor_version", 2, "string"), ("manifest", 3, MAP)],
    ),
    ("GetPluginCapabilitiesRequest", &[]),
    ("GetPluginCapabilitiesResponse", &[("capabilities", 1, "[PluginCapability]")]),
    (
        "PluginCapability",
        &[
            ("service", 1, "PluginCapability.Service"),
            ("volume_expansion", 2, "PluginCapability.VolumeExpansion"),
        ],
    ),
    ("PluginCapability.Service", &[("type", 1, "enum PluginCapability.Service.Type")]),
    (
        "PluginCapability.VolumeExpansion",
        &[("type", 1, "enum PluginCapability.VolumeExpansion.Type")],
    ),
    ("ProbeRequest", &[]),
    ("ProbeResponse", &[("ready", 1, "google.protobuf.BoolValue")]),
    // Controller: volumes
    (
        "CreateVolumeRequest",
        &[
            ("name", 1, "string"),
            ("capacity_range", 2, "CapacityRange"),
            ("volume_capabilities", 3, VOLUME_CAPABILITIES),
            ("parameters", 4, MAP),
            ("secrets", 5, MAP),
            ("volume_content_source", 6, "VolumeContentSource"),
            ("accessibility_requirements", 7, "TopologyRequirement"),
            ("mutable_parameters", 8, MAP),
        ],
    ),
    (
        "VolumeContentSource",
        &[
            ("snapshot", 1, "VolumeContentSource.SnapshotSource"),
            ("volume", 2, "VolumeContentSource.VolumeSource"),
        ],
    ),
    ("VolumeContentSource.SnapshotSource", &[("snapshot_id", 1, "string")]),
    ("VolumeContentSource.VolumeSource", &[("volume_id", 1, "string")]),
    ("CreateVolumeResponse", &[("volume", 1, "Volume")]),
    (
        "VolumeCapability",
        &[
            ("block", 1, "VolumeCapability.BlockVolume"),
            ("mount", 2, "VolumeCapability.MountVolume"),
            ("access_mode", 3, "VolumeCapability.AccessMode"),
        ],
    ),
    ("VolumeCapability.BlockVolume", &[]),
    (
        "VolumeCapability.MountVolume",
        &[
            ("fs_type", 1, "string"),
            ("mount_flags", 2, "[string]"),
            ("volume_mount_group", 3, "string"),
        ],
    ),
    ("VolumeCapability.AccessMode", &[("mode", 1, "enum VolumeCapability.AccessMode.Mode")]),
    ("CapacityRange", &[("required_bytes", 1, "int64"), ("limit_bytes", 2, "int64")]),
    (
        "Volume",
        &[
            ("capacity_bytes", 1, "int64"),
            ("volume_id", 2, "string"),
            ("volume_context", 3, MAP),
            ("content_source", 4, "VolumeContentSource"),
            ("accessible_topology", 5, "[Topology]"),
        ],
    ),
    ("TopologyRequirement", &[("requisite", 1, "[Topology]"), ("preferred", 2, "[Topology]")]),
    ("Topology", &[("segments", 1, MAP)]),
    ("DeleteVolumeRequest", &[("volume_id", 1, "string"), ("secrets", 2, MAP)]),
    ("DeleteVolumeResponse", &[]),
    (
        "ControllerPublishVolumeRequest",
        &[
            ("volume_id", 1, "string"),
            ("node_id", 2, "string"),
            ("volume_capability", 3, "VolumeCapability"),
            ("readonly", 4, "bool"),
            ("secrets", 5, MAP),
            ("volume_context", 6, MAP),
        ],
    ),
    ("ControllerPublishVolumeResponse", &[("publish_context", 1, MAP)]),
    (
        "ControllerUnpublishVolumeRequest",
        &[("volume_id", 1, "string"), ("node_id", 2, "string"), ("secrets", 3, MAP)],
    ),
    ("ControllerUnpublishVolumeResponse", &[]),
    (
        "ValidateVolumeCapabilitiesRequest",
        &[
            ("volume_id", 1, "string"),
            ("volume_context", 2, MAP),
            ("volume_capabilities", 3, VOLUME_CAPABILITIES),
            ("parameters", 4, MAP),
            ("secrets", 5, MAP),
            ("mutable_parameters", 6, MAP),
        ],
    ),
    (
        "ValidateVolumeCapabilitiesResponse",
        &[
            ("confirmed", 1, "ValidateVolumeCapabilitiesResponse.Confirmed"),
            ("message", 2, "string"),
        ],
    ),
    (
        "ValidateVolumeCapabilitiesResponse.Confirmed",
        &[
            ("volume_context", 1, MAP),
            ("volume_capabilities", 2, VOLUME_CAPABILITIES),
            ("parameters", 3, MAP),
            ("mutable_parameters", 4, MAP),
        ],
    ),
    ("ListVolumesRequest", &[("max_entries", 1, "int32"), ("starting_token", 2, "string")]),
    (
        "ListVolumesResponse",
        &[("entries", 1, "[ListVolumesResponse.Entry]"), ("next_token", 2, "string")],
    ),
    (
        "ListVolumesResponse.VolumeStatus",
        &[("published_node_ids", 1, "[string]"), ("volume_condition", 2, "VolumeCondition")],
    ),
    (
        "ListVolumesResponse.Entry",
        &[("volume", 1, "Volume"), ("status", 2, "ListVolumesResponse.VolumeStatus")],
    ),
    ("ControllerGetVolumeRequest", &[("volume_id", 1, "string")]),
    (
        "ControllerGetVolumeResponse",
        &[("volume", 1, "Volume"), ("status", 2, "ControllerGetVolumeResponse.VolumeStatus")],
    ),
    (
        "ControllerGetVolumeResponse.VolumeStatus",
        &[("published_node_ids", 1, "[string]"), ("volume_condition", 2, "VolumeCondition")],
    ),
    (
        "ControllerModifyVolumeRequest",
        &[("volume_id", 1, "string"), ("secrets", 2, MAP), ("mutable_parameters", 3, MAP)],
    ),
    ("ControllerModifyVolumeResponse", &[]),
    (
        "GetCapacityRequest",
        &[
            ("volume_capabilities", 1, VOLUME_CAPABILITIES),
            ("parameters", 2, MAP),
            ("accessible_topology", 3, "Topology"),
        ],
    ),
    (
        "GetCapacityResponse",
        &[
            ("available_capacity", 1, "int64"),
            ("maximum_volume_size", 2, "google.protobuf.Int64Value"),
            ("minimum_volume_size", 3, "google.protobuf.Int64Value"),
        ],
    ),
    ("ControllerGetCapabilitiesRequest", &[]),
    ("ControllerGetCapabilitiesResponse", &[("capabilities", 1, "[ControllerServiceCapability]")]),
    ("ControllerServiceCapability", &[("rpc", 1, "ControllerServiceCapability.RPC")]),
    (
        "ControllerServiceCapability.RPC",
        &[("type", 1, "enum ControllerServiceCapability.RPC.Type")],
    ),
    // Controller: snapshots and expansion
    (
        "CreateSnapshotRequest",
        &[
            ("source_volume_id", 1, "string"),
            ("name", 2, "string"),
            ("secrets", 3, MAP),
            ("parameters", 4, MAP),
            ("accessibility_requirements", 5, "TopologyRequirement"),
        ],
    ),
    ("CreateSnapshotResponse", &[("snapshot", 1, "Snapshot")]),
    (
        "Snapshot",
        &[
            ("size_bytes", 1, "int64"),
            ("snapshot_id", 2, "string"),
            ("source_volume_id", 3, "string"),
            ("creation_time", 4, "google.protobuf.Timestamp"),
            ("ready_to_use", 5, "bool"),
            ("group_snapshot_id", 6, "string"),
            ("accessible_topology", 7, "[Topology]"),
        ],
    ),
    ("DeleteSnapshotRequest", &[("snapshot_id", 1, "string"), ("secrets", 2, MAP)]),
    ("DeleteSnapshotResponse", &[]),
    (
        "ListSnapshotsRequest",
        &[
            ("max_entries", 1, "int32"),
            ("starting_token", 2, "string"),
            ("source_volume_id", 3, "string"),
            ("snapshot_id", 4, "string"),
            ("secrets", 5, MAP),
        ],
    ),
    (
        "ListSnapshotsResponse",
        &[("entries", 1, "[ListSnapshotsResponse.Entry]"), ("next_token", 2, "string")],
    ),
    ("ListSnapshotsResponse.Entry", &[("snapshot", 1, "Snapshot")]),
    ("GetSnapshotRequest", &[("snapshot_id", 1, "string"), ("secrets", 2, MAP)]),
    ("GetSnapshotResponse", &[("snapshot", 1, "Snapshot")]),
    (
        "ControllerExpandVolumeRequest",
        &[
            ("volume_id", 1, "string"),
            ("capacity_range", 2, "CapacityRange"),
            ("secrets", 3, MAP),
            ("volume_capability", 4, "VolumeCapability"),
        ],
    ),
    (
        "ControllerExpandVolumeResponse",
        &[("capacity_bytes", 1, "int64"), ("node_expansion_required", 2, "bool")],
    ),
    // Node
    (
        "NodeStageVolumeRequest",
        &[
            ("volume_id", 1, "string"),
            ("publish_context", 2, MAP),
            ("staging_target_path", 3, "string"),
            ("volume_capability", 4, "VolumeCapability"),
            ("secrets", 5, MAP),
            ("volume_context", 6, MAP),
        ],
    ),
    ("NodeStageVolumeResponse", &[]),
    (
        "NodeUnstageVolumeRequest",
        &[("volume_id", 1, "string"), ("staging_target_path", 2, "string")],
    ),
    ("NodeUnstageVolumeResponse", &[]),
    (
        "NodePublishVolumeRequest",
        &[
            ("volume_id", 1, "string"),
            ("publish_context", 2, MAP),
            ("staging_target_path", 3, "string"),
            ("target_path", 4, "string"),
            ("volume_capability", 5, "VolumeCapability"),
            ("readonly", 6, "bool"),
            ("secrets", 7, MAP),
            ("volume_context", 8, MAP),
        ],
    ),
    ("NodePublishVolumeResponse", &[]),
    ("NodeUnpublishVolumeRequest", &[("volume_id", 1, "string"), ("target_path", 2, "string")]),
    ("NodeUnpublishVolumeResponse", &[]),
    (
        "NodeGetVolumeStatsRequest",
        &[
            ("volume_id", 1, "string"),
            ("volume_path", 2, "string"),
            ("staging_target_path", 3, "string"),
        ],
    ),
    (
        "NodeGetVolumeStatsResponse",
        &[("usage", 1, "[VolumeUsage]"), ("volume_condition", 2, "VolumeCondition")],
    ),
    (
        "VolumeUsage",
        &[
            ("available", 1, "int64"),
            ("total", 2, "int64"),
            ("used", 3, "int64"),
            ("unit", 4, "enum VolumeUsage.Unit"),
        ],
    ),
    ("VolumeCondition", &[("abnormal", 1, "bool"), ("message", 2, "string")]),
    ("NodeGetCapabilitiesRequest", &[]),
    ("NodeGetCapabilitiesResponse", &[("capabilities", 1, "[NodeServiceCapability]")]),
    ("NodeServiceCapability", &[("rpc", 1, "NodeServiceCapability.RPC")]),
    ("NodeServiceCapability.RPC", &[("type", 1, "enum NodeServiceCapability.RPC.Type")]),
    ("NodeGetInfoRequest", &[]),
    // v1.13: volume and storage health.
    (
        "VolumeHealth",
        &[("volume_id", 1, "string"), ("health_statuses", 2, "[VolumeHealth.VolumeHealthEntry]")],
    ),
    (
        "VolumeHealth.VolumeHealthEntry",
        &[("status", 1, "enum VolumeHealthErrorType"), ("reason", 2, "string"), ("message", 3, "string")],
    ),
    (
        "ControllerListVolumeHealthRequest",
        &[("max_entries", 1, "int32"), ("starting_token", 2, "string"), ("secrets", 3, MAP)],
    ),
    ("ControllerListVolumeHealthResponse", &[("entries", 1, "[VolumeHealth]"), ("next_token", 2, "string")]),
    ("ControllerGetVolumeHealthRequest", &[("volume_id", 1, "string"), ("secrets", 2, MAP)]),
    ("ControllerGetVolumeHealthResponse", &[("volume_health", 1, "VolumeHealth")]),
    (
        "NodeGetVolumeHealthRequest",
        &[("volume_id", 1, "string"), ("volume_publish_path", 2, "string"), ("staging_target_path", 3, "string")],
    ),
    ("NodeGetVolumeHealthResponse", &[("volume_health", 1, "VolumeHealth")]),
    ("NodeGetStorageHealthRequest", &[("secrets", 1, MAP)]),
    (
        "NodeGetStorageHealthResponse",
        &[("backend_health", 1, "[NodeGetStorageHealthResponse.StorageBackendHealth]")],
    ),
    (
        "NodeGetStorageHealthResponse.StorageBackendHealth",
        &[
            ("status", 1, "enum StorageHealthErrorType"),
            ("reason", 2, "string"),
            ("message", 3, "string"),
            ("volume_capability", 4, "VolumeCapability"),
        ],
    ),
    (
        "NodeGetInfoResponse",
        &[
            ("node_id", 1, "string"),
            ("max_volumes_per_node", 2, "int64"),
            ("accessible_topology", 3, "Topology"),
        ],
    ),
    (
        "NodeExpandVolumeRequest",
        &[
            ("volume_id", 1, "string"),
            ("volume_path", 2, "string"),
            ("capacity_range", 3, "CapacityRange"),
            ("staging_target_path", 4, "string"),
            ("volume_capability", 5, "VolumeCapability"),
            ("secrets", 6, MAP),
        ],
    ),
    ("NodeExpandVolumeResponse", &[("capacity_bytes", 1, "int64")]),
    // Group controller
    ("GroupControllerGetCapabilitiesRequest", &[]),
    (
        "GroupControllerGetCapabilitiesResponse",
        &[("capabilities", 1, "[GroupControllerServiceCapability]")],
    ),
    ("GroupControllerServiceCapability", &[("rpc", 1, "GroupControllerServiceCapability.RPC")]),
    (
        "GroupControllerServiceCapability.RPC",
        &[("type", 1, "enum GroupControllerServiceCapability.RPC.Type")],
    ),
    (
        "CreateVolumeGroupSnapshotRequest",
        &[
            ("name", 1, "string"),
            ("source_volume_ids", 2, "[string]"),
            ("secrets", 3, MAP),
            ("parameters", 4, MAP),
        ],
    ),
    ("CreateVolumeGroupSnapshotResponse", &[("group_snapshot", 1, "VolumeGroupSnapshot")]),
    (
        "VolumeGroupSnapshot",
        &[
            ("group_snapshot_id", 1, "string"),
            ("snapshots", 2, "[Snapshot]"),
            ("creation_time", 3, "google.protobuf.Timestamp"),
            ("ready_to_use", 4, "bool"),
        ],
    ),
    (
        "DeleteVolumeGroupSnapshotRequest",
        &[("group_snapshot_id", 1, "string"), ("snapshot_ids", 2, "[string]"), ("secrets", 3, MAP)],
    ),
    ("DeleteVolumeGroupSnapshotResponse", &[]),
    (
        "GetVolumeGroupSnapshotRequest",
        &[("group_snapshot_id", 1, "string"), ("snapshot_ids", 2, "[string]"), ("secrets", 3, MAP)],
    ),
    ("GetVolumeGroupSnapshotResponse", &[("group_snapshot", 1, "VolumeGroupSnapshot")]),
    // Snapshot metadata
    ("BlockMetadata", &[("byte_offset", 1, "int64"), ("size_bytes", 2, "int64")]),
    (
        "GetMetadataAllocatedRequest",
        &[
            ("snapshot_id", 1, "string"),
            ("starting_offset", 2, "int64"),
            ("max_results", 3, "int32"),
            ("secrets", 4, MAP),
        ],
    ),
    (
        "GetMetadataAllocatedResponse",
        &[
            ("block_metadata_type", 1, "enum BlockMetadataType"),
            ("volume_capacity_bytes", 2, "int64"),
            ("block_metadata", 3, "[BlockMetadata]"),
        ],
    ),
    (
        "GetMetadataDeltaRequest",
        &[
            ("base_snapshot_id", 1, "string"),
            ("target_snapshot_id", 2, "string"),
            ("starting_offset", 3, "int64"),
            ("max_results", 4, "int32"),
            ("secrets", 5, MAP),
        ],
    ),
    (
        "GetMetadataDeltaResponse",
        &[
            ("block_metadata_type", 1, "enum BlockMetadataType"),
            ("volume_capacity_bytes", 2, "int64"),
            ("block_metadata", 3, "[BlockMetadata]"),
        ],
    ),
];

/// Every oneof: (message, oneof name, member fields).
const ONEOFS: &[(&str, &str, &[&str])] = &[
    ("PluginCapability", "type", &["service", "volume_expansion"]),
    ("VolumeContentSource", "type", &["snapshot", "volume"]),
    ("VolumeCapability", "access_type", &["block", "mount"]),
    ("ControllerServiceCapability", "type", &["rpc"]),
    ("NodeServiceCapability", "type", &["rpc"]),
    ("GroupControllerServiceCapability", "type", &["rpc"]),
];

/// Every enum with every value: (name, number).
const ENUMS: &[(&str, &[(&str, i32)])] = &[
    (
        "PluginCapability.Service.Type",
        &[
            ("UNKNOWN", 0),
            ("CONTROLLER_SERVICE", 1),
            ("VOLUME_ACCESSIBILITY_CONSTRAINTS", 2),
            ("GROUP_CONTROLLER_SERVICE", 3),
            ("SNAPSHOT_METADATA_SERVICE", 4),
            ("SNAPSHOT_ACCESSIBILITY_CONSTRAINTS", 5),
        ],
    ),
    ("PluginCapability.VolumeExpansion.Type", &[("UNKNOWN", 0), ("ONLINE", 1), ("OFFLINE", 2)]),
    (
        "VolumeCapability.AccessMode.Mode",
        &[
            ("UNKNOWN", 0),
            ("SINGLE_NODE_WRITER", 1),
            ("SINGLE_NODE_READER_ONLY", 2),
            ("MULTI_NODE_READER_ONLY", 3),
            ("MULTI_NODE_SINGLE_WRITER", 4),
            ("MULTI_NODE_MULTI_WRITER", 5),
            ("SINGLE_NODE_SINGLE_WRITER", 6),
            ("SINGLE_NODE_MULTI_WRITER", 7),
        ],
    ),
    (
        "ControllerServiceCapability.RPC.Type",
        &[
            ("UNKNOWN", 0),
            ("CREATE_DELETE_VOLUME", 1),
            ("PUBLISH_UNPUBLISH_VOLUME", 2),
            ("LIST_VOLUMES", 3),
            ("GET_CAPACITY", 4),
            ("CREATE_DELETE_SNAPSHOT", 5),
            ("LIST_SNAPSHOTS", 6),
            ("CLONE_VOLUME", 7),
            ("PUBLISH_READONLY", 8),
            ("EXPAND_VOLUME", 9),
            ("LIST_VOLUMES_PUBLISHED_NODES", 10),
            ("VOLUME_CONDITION", 11),
            ("GET_VOLUME", 12),
            ("SINGLE_NODE_MULTI_WRITER", 13),
            ("MODIFY_VOLUME", 14),
            ("GET_SNAPSHOT", 15),
            ("GET_VOLUME_HEALTH", 16),
            ("LIST_VOLUME_HEALTH", 17),
        ],
    ),
    ("VolumeUsage.Unit", &[("UNKNOWN", 0), ("BYTES", 1), ("INODES", 2)]),
    (
        "NodeServiceCapability.RPC.Type",
        &[
            ("UNKNOWN", 0),
            ("STAGE_UNSTAGE_VOLUME", 1),
            ("GET_VOLUME_STATS", 2),
            ("EXPAND_VOLUME", 3),
            ("VOLUME_CONDITION", 4),
            ("SINGLE_NODE_MULTI_WRITER", 5),
            ("VOLUME_MOUNT_GROUP", 6),
            ("GET_VOLUME_HEALTH", 7),
            ("GET_STORAGE_HEALTH", 8),
        ],
    ),
    (
        "VolumeHealthErrorType",
        &[("UNKNOWN_VOLUME_HEALTH_TYPE", 0), ("DEGRADED", 1), ("INACCESSIBLE", 2), ("DATA_LOSS", 3)],
    ),
    (
        "StorageHealthErrorType",
        &[("UNKNOWN_STORAGE_HEALTH_ERROR_TYPE", 0), ("STORAGE_DEGRADED", 1), ("STORAGE_UNREACHABLE", 2)],
    ),
    (
        "GroupControllerServiceCapability.RPC.Type",
        &[("UNKNOWN", 0), ("CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT", 1)],
    ),
    ("BlockMetadataType", &[("UNKNOWN", 0), ("FIXED_LENGTH", 1), ("VARIABLE_LENGTH", 2)]),
];

/// Every service with its RPCs, in declaration order. Each RPC `X` takes `XRequest` and
/// returns `XResponse`.
const SERVICES: &[(&str, &[&str])] = &[
    ("Identity", &["GetPluginInfo", "GetPluginCapabilities", "Probe"]),
    (
        "Controller",
        &[
            "CreateVolume",
            "DeleteVolume",
            "ControllerPublishVolume",
            "ControllerUnpublishVolume",
            "ValidateVolumeCapabilities",
            "ListVolumes",
            "GetCapacity",
            "ControllerGetCapabilities",
            "CreateSnapshot",
            "DeleteSnapshot",
            "ListSnapshots",
            "GetSnapshot",
            "ControllerExpandVolume",
            "ControllerGetVolume",
            "ControllerModifyVolume",
            "ControllerListVolumeHealth",
            "ControllerGetVolumeHealth",
        ],
    ),
    (
        "GroupController",
        &[
            "GroupControllerGetCapabilities",
            "CreateVolumeGroupSnapshot",
            "DeleteVolumeGroupSnapshot",
            "GetVolumeGroupSnapshot",
        ],
    ),
    ("SnapshotMetadata", &["GetMetadataAllocated", "GetMetadataDelta"]),
    (
        "Node",
        &[
            "NodeStageVolume",
            "NodeUnstageVolume",
            "NodePublishVolume",
            "NodeUnpublishVolume",
            "NodeGetVolumeStats",
            "NodeExpandVolume",
            "NodeGetCapabilities",
            "NodeGetInfo",
            "NodeGetVolumeHealth",
            "NodeGetStorageHealth",
        ],
    ),
];

/// The RPCs whose responses are server streams. No RPC streams its request.
const SERVER_STREAMING: &[&str] = &["GetMetadataAllocated", "GetMetadataDelta"];

/// Fields marked `[(csi_secret) = true]` upstream.
const SECRET_FIELDS: &[&str] = &[
    "CreateVolumeRequest.secrets",
    "DeleteVolumeRequest.secrets",
    "ControllerPublishVolumeRequest.secrets",
    "ControllerUnpublishVolumeRequest.secrets",
    "ValidateVolumeCapabilitiesRequest.secrets",
    "ControllerModifyVolumeRequest.secrets",
    "CreateSnapshotRequest.secrets",
    "DeleteSnapshotRequest.secrets",
    "ListSnapshotsRequest.secrets",
    "GetSnapshotRequest.secrets",
    "ControllerExpandVolumeRequest.secrets",
    "NodeStageVolumeRequest.secrets",
    "NodePublishVolumeRequest.secrets",
    "NodeExpandVolumeRequest.secrets",
    "CreateVolumeGroupSnapshotRequest.secrets",
    "DeleteVolumeGroupSnapshotRequest.secrets",
    "GetVolumeGroupSnapshotRequest.secrets",
    "GetMetadataAllocatedRequest.secrets",
    "GetMetadataDeltaRequest.secrets",
    "ControllerListVolumeHealthRequest.secrets",
    "ControllerGetVolumeHealthRequest.secrets",
    "NodeGetStorageHealthRequest.secrets",
];

/// Fields marked `[(alpha_field) = true]` upstream in v1.12. (The `mutable_parameters` fields
/// lost the marker when ControllerModifyVolume went GA in v1.12.)
const ALPHA_FIELDS: &[&str] = &[
    "ListVolumesResponse.VolumeStatus.volume_condition",
    "GetCapacityResponse.minimum_volume_size",
    "NodeGetVolumeStatsResponse.volume_condition",
    "NodeExpandVolumeRequest.secrets",
    "CreateSnapshotRequest.accessibility_requirements",
    "Snapshot.accessible_topology",
];

/// Messages marked `option (alpha_message) = true` upstream in v1.12.
const ALPHA_MESSAGES: &[&str] = &[
    "ControllerGetVolumeRequest",
    "ControllerGetVolumeResponse",
    "GetSnapshotRequest",
    "GetSnapshotResponse",
    "VolumeCondition",
    "VolumeHealth",
    "ControllerListVolumeHealthRequest",
    "ControllerListVolumeHealthResponse",
    "ControllerGetVolumeHealthRequest",
    "ControllerGetVolumeHealthResponse",
    "NodeGetVolumeHealthRequest",
    "NodeGetVolumeHealthResponse",
    "NodeGetStorageHealthRequest",
    "NodeGetStorageHealthResponse",
];

/// Enum values marked `[(alpha_enum_value) = true]` upstream in v1.12.
const ALPHA_ENUM_VALUES: &[&str] = &[
    "PluginCapability.Service.Type.SNAPSHOT_METADATA_SERVICE",
    "VolumeCapability.AccessMode.Mode.SINGLE_NODE_SINGLE_WRITER",
    "VolumeCapability.AccessMode.Mode.SINGLE_NODE_MULTI_WRITER",
    "ControllerServiceCapability.RPC.Type.VOLUME_CONDITION",
    "ControllerServiceCapability.RPC.Type.GET_VOLUME",
    "ControllerServiceCapability.RPC.Type.SINGLE_NODE_MULTI_WRITER",
    "ControllerServiceCapability.RPC.Type.GET_SNAPSHOT",
    "NodeServiceCapability.RPC.Type.VOLUME_CONDITION",
    "NodeServiceCapability.RPC.Type.SINGLE_NODE_MULTI_WRITER",
    "PluginCapability.Service.Type.SNAPSHOT_ACCESSIBILITY_CONSTRAINTS",
    "ControllerServiceCapability.RPC.Type.GET_VOLUME_HEALTH",
    "ControllerServiceCapability.RPC.Type.LIST_VOLUME_HEALTH",
    "NodeServiceCapability.RPC.Type.GET_VOLUME_HEALTH",
    "NodeServiceCapability.RPC.Type.GET_STORAGE_HEALTH",
];

/// RPCs marked `option (alpha_method) = true` upstream in v1.12.
const ALPHA_METHODS: &[&str] = &[
    "GetSnapshot",
    "ControllerGetVolume",
    "ControllerListVolumeHealth",
    "ControllerGetVolumeHealth",
    "NodeGetVolumeHealth",
    "NodeGetStorageHealth",
];

/// Services marked `option (alpha_service) = true` upstream in v1.12.
const ALPHA_SERVICES: &[&str] = &["SnapshotMetadata"];

// ---------------------------------------------------------------------------------------------

fn short(full_name: &str) -> &str {
    full_name.strip_prefix("csi.v1.").unwrap_or(full_name)
}

fn kind_name(kind: &Kind) -> String {
    match kind {
        Kind::String => "string".into(),
        Kind::Bytes => "bytes".into(),
        Kind::Bool => "bool".into(),
        Kind::Int32 => "int32".into(),
        Kind::Int64 => "int64".into(),
        Kind::Uint32 => "uint32".into(),
        Kind::Uint64 => "uint64".into(),
        Kind::Message(m) => short(m.full_name()).into(),
        Kind::Enum(e) => format!("enum {}", short(e.full_name())),
        other => format!("{other:?}"),
    }
}

fn type_name(field: &FieldDescriptor) -> String {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else { unreachable!("a map is a message") };
        let key = entry.map_entry_key_field().kind();
        let value = entry.map_entry_value_field().kind();
        format!("map<{},{}>", kind_name(&key), kind_name(&value))
    } else if field.is_list() {
        format!("[{}]", kind_name(&field.kind()))
    } else {
        kind_name(&field.kind())
    }
}

fn csi_messages() -> impl Iterator<Item = prost_reflect::MessageDescriptor> {
    proto::pool()
        .all_messages()
        .filter(|m| m.package_name() == proto::PACKAGE && !m.is_map_entry())
}

fn csi_fields() -> impl Iterator<Item = FieldDescriptor> {
    csi_messages().flat_map(|m| m.fields().collect::<Vec<_>>())
}

/// Whether `options` carries the csi.v1 extension `name` set to true.
fn marked(options: &DynamicMessage, name: &str) -> bool {
    let ext = proto::pool()
        .get_extension_by_name(&format!("csi.v1.{name}"))
        .unwrap_or_else(|| panic!("extension csi.v1.{name} is declared"));
    options.has_extension(&ext) && options.get_extension(&ext).as_bool() == Some(true)
}

fn set<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> BTreeSet<String> {
    names.into_iter().map(|n| n.as_ref().to_owned()).collect()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn every_message_and_field_matches_the_spec() {
    let actual: BTreeMap<String, BTreeSet<(String, u32, String)>> = csi_messages()
        .map(|m| {
            let fields = m
                .fields()
                .map(|f| (f.name().to_owned(), f.number(), type_name(&f)))
                .collect();
            (short(m.full_name()).to_owned(), fields)
        })
        .collect();
    let expected: BTreeMap<String, BTreeSet<(String, u32, String)>> = MESSAGES
        .iter()
        .map(|(message, fields)| {
            let fields = fields
                .iter()
                .map(|(name, number, ty)| ((*name).to_owned(), *number, (*ty).to_owned()))
                .collect();
            ((*message).to_owned(), fields)
        })
        .collect();
    assert_eq!(expected.len(), MESSAGES.len(), "the table lists a message twice");

    let names = |m: &BTreeMap<String, _>| m.keys().cloned().collect::<BTreeSet<_>>();
    let (actual_names, expected_names) = (names(&actual), names(&expected));
    assert_eq!(
        actual_names,
        expected_names,
        "messages missing from csi.proto: {:?}; messages the spec does not have: {:?}",
        expected_names.difference(&actual_names).collect::<Vec<_>>(),
        actual_names.difference(&expected_names).collect::<Vec<_>>(),
    );
    for (message, fields) in &expected {
        let got = &actual[message];
        assert_eq!(
            got,
            fields,
            "{message}: missing or different {:?}; unexpected {:?}",
            fields.difference(got).collect::<Vec<_>>(),
            got.difference(fields).collect::<Vec<_>>(),
        );
    }
}

#[test]
fn oneofs_match_the_spec() {
    let mut actual = BTreeSet::new();
    for message in csi_messages() {
        for oneof in message.oneofs() {
            let members: Vec<String> = oneof.fields().map(|f| f.name().to_owned()).collect();
            actual.insert((short(message.full_name()).to_owned(), oneof.name().to_owned(), members));
        }
    }
    let expected: BTreeSet<(String, String, Vec<String>)> = ONEOFS
        .iter()
        .map(|(m, o, fields)| {
            let fields = fields.iter().map(|f| (*f).to_owned()).collect();
            ((*m).to_owned(), (*o).to_owned(), fields)
        })
        .collect();
    assert_eq!(actual, expected);
}

#[test]
fn every_enum_value_matches_the_spec() {
    let actual: BTreeMap<String, Vec<(String, i32)>> = proto::pool()
        .all_enums()
        .filter(|e| e.package_name() == proto::PACKAGE)
        .map(|e| {
            let values = e.values().map(|v| (v.name().to_owned(), v.number())).collect();
            (short(e.full_name()).to_owned(), values)
        })
        .collect();
    let expected: BTreeMap<String, Vec<(String, i32)>> = ENUMS
        .iter()
        .map(|(e, values)| {
            let values = values.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect();
            ((*e).to_owned(), values)
        })
        .collect();
    assert_eq!(actual, expected);
}

#[test]
fn every_service_and_rpc_matches_the_spec() {
    let actual: Vec<(String, Vec<String>)> = proto::pool()
        .services()
        .filter(|s| s.package_name() == proto::PACKAGE)
        .map(|s| (s.name().to_owned(), s.methods().map(|m| m.name().to_owned()).collect()))
        .collect();
    let expected: Vec<(String, Vec<String>)> = SERVICES
        .iter()
        .map(|(s, methods)| ((*s).to_owned(), methods.iter().map(|m| (*m).to_owned()).collect()))
        .collect();
    assert_eq!(actual, expected);
    assert_eq!(
        proto::SERVICES.to_vec(),
        SERVICES.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        "proto::SERVICES lists the services in spec order"
    );

    for method in proto::all_methods() {
        let name = method.name();
        assert_eq!(short(method.input().full_name()), format!("{name}Request"), "{name} input");
        assert_eq!(short(method.output().full_name()), format!("{name}Response"), "{name} output");
        assert!(!method.is_client_streaming(), "{name} streams its request");
        assert_eq!(
            method.is_server_streaming(),
            SERVER_STREAMING.contains(&name),
            "{name}: server streaming flag"
        );
    }
}

#[test]
fn secret_fields_are_exactly_the_specs() {
    let actual = set(csi_fields()
        .filter(proto::is_secret_field)
        .map(|f| short(f.full_name()).to_owned()));
    assert_eq!(actual, set(SECRET_FIELDS));

    let listed = set(proto::secret_fields().iter().map(|f| short(f)));
    assert_eq!(listed, set(SECRET_FIELDS), "proto::secret_fields()");
}

#[test]
fn alpha_fields_are_exactly_the_specs() {
    let actual = set(csi_fields()
        .filter(proto::is_alpha_field)
        .map(|f| short(f.full_name()).to_owned()));
    assert_eq!(actual, set(ALPHA_FIELDS));
}

#[test]
fn alpha_messages_enums_and_values_are_exactly_the_specs() {
    let messages = set(csi_messages()
        .filter(|m| marked(&m.options(), "alpha_message"))
        .map(|m| short(m.full_name()).to_owned()));
    assert_eq!(messages, set(ALPHA_MESSAGES));

    let enums = proto::pool().all_enums().filter(|e| e.package_name() == proto::PACKAGE);
    let mut values = Vec::new();
    for e in enums {
        assert!(!marked(&e.options(), "alpha_enum"), "no enum is alpha as a whole: {}", e.name());
        for v in e.values() {
            if marked(&v.options(), "alpha_enum_value") {
                values.push(format!("{}.{}", short(e.full_name()), v.name()));
            }
        }
    }
    assert_eq!(set(values), set(ALPHA_ENUM_VALUES));
}

#[test]
fn alpha_services_and_rpcs_are_exactly_the_specs() {
    let services = set(proto::pool()
        .services()
        .filter(|s| s.package_name() == proto::PACKAGE && marked(&s.options(), "alpha_service"))
        .map(|s| s.name().to_owned()));
    assert_eq!(services, set(ALPHA_SERVICES));

    let methods = set(proto::all_methods()
        .filter(|m| marked(&m.options(), "alpha_method"))
        .map(|m| m.name().to_owned()));
    assert_eq!(methods, set(ALPHA_METHODS));

    // is_alpha_method covers both markers: the RPC's own and its service's.
    for method in proto::all_methods() {
        let expected = ALPHA_METHODS.contains(&method.name())
            || ALPHA_SERVICES.contains(&method.parent_service().name());
        assert_eq!(proto::is_alpha_method(&method), expected, "{}", method.name());
    }
}

#[test]
fn option_extensions_use_the_spec_numbers() {
    let expected = [
        ("csi_secret", "google.protobuf.FieldOptions", 1059),
        ("alpha_field", "google.protobuf.FieldOptions", 1060),
        ("alpha_enum", "google.protobuf.EnumOptions", 1060),
        ("alpha_enum_value", "google.protobuf.EnumValueOptions", 1060),
        ("alpha_message", "google.protobuf.MessageOptions", 1060),
        ("alpha_method", "google.protobuf.MethodOptions", 1060),
        ("alpha_service", "google.protobuf.ServiceOptions", 1060),
    ];
    let mut actual: Vec<(String, String, u32)> = proto::pool()
        .all_extensions()
        .filter(|x| x.package_name() == proto::PACKAGE)
        .map(|x| {
            assert_eq!(x.kind(), Kind::Bool, "{} is a bool", x.name());
            (x.name().to_owned(), x.containing_message().full_name().to_owned(), x.number())
        })
        .collect();
    actual.sort();
    let mut expected: Vec<(String, String, u32)> = expected
        .iter()
        .map(|(n, m, num)| ((*n).to_owned(), (*m).to_owned(), *num))
        .collect();
    expected.sort();
    assert_eq!(actual, expected);
}

#[test]
fn the_file_is_package_csi_v1_in_proto3() {
    let file = proto::pool()
        .files()
        .find(|f| f.package_name() == proto::PACKAGE)
        .expect("a csi.v1 file");
    assert_eq!(file.name(), "csi.proto");
    assert_eq!(file.syntax(), prost_reflect::Syntax::Proto3);
    let deps: BTreeSet<String> = file.dependencies().map(|d| d.name().to_owned()).collect();
    assert_eq!(
        deps,
        set([
            "google/protobuf/descriptor.proto",
            "google/protobuf/timestamp.proto",
            "google/protobuf/wrappers.proto",
        ])
    );
}
