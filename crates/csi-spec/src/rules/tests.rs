//! Unit tests of the response rules: the table is well formed, and each check fires on the lie
//! it is for and stays quiet on a faithful answer.

use std::collections::BTreeSet;

use super::*;
use crate::proto::{self, v1};

fn ids(found: &[Violation]) -> Vec<&'static str> {
    found.iter().map(|v| v.rule.id).collect()
}

#[test]
fn every_rule_has_a_unique_id_and_a_known_requirement() {
    let mut seen = BTreeSet::new();
    for r in RULES {
        assert!(seen.insert(r.id), "duplicate rule id {}", r.id);
        assert!(r.id.starts_with("answer."), "{}", r.id);
        assert!(crate::spec::builtin().get(r.requirement).is_some(), "{}: unknown requirement {}", r.id, r.requirement);
    }
}

#[test]
fn a_faithful_create_volume_answer_breaks_nothing() {
    let request = v1::CreateVolumeRequest {
        name: "v".into(),
        capacity_range: Some(v1::CapacityRange { required_bytes: 10, limit_bytes: 20 }),
        ..Default::default()
    };
    let answer = v1::CreateVolumeResponse {
        volume: Some(v1::Volume {
            capacity_bytes: 10,
            volume_id: "vol-1".into(),
            volume_context: [("k".to_owned(), "v".to_owned())].into(),
            accessible_topology: vec![v1::Topology { segments: [("example.com/zone".to_owned(), "z1".to_owned())].into() }],
            ..Default::default()
        }),
    };
    let found = check_answer("CreateVolume", &proto::to_dynamic(&request), &[proto::to_dynamic(&answer)]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn create_volume_lies_are_each_named() {
    let request = proto::to_dynamic(&v1::CreateVolumeRequest {
        capacity_range: Some(v1::CapacityRange { required_bytes: 100, limit_bytes: 0 }),
        ..Default::default()
    });
    let none = proto::to_dynamic(&v1::CreateVolumeResponse { volume: None });
    assert_eq!(ids(&check_answer("CreateVolume", &request, &[none])), ["answer.create-volume.volume"]);
    let long = "x".repeat(200);
    let lie = proto::to_dynamic(&v1::CreateVolumeResponse {
        volume: Some(v1::Volume {
            capacity_bytes: 50,
            volume_id: String::new(),
            volume_context: [("k".to_owned(), long.clone()), ("big".to_owned(), "y".repeat(5000))].into(),
            accessible_topology: vec![v1::Topology { segments: [("Bad Key".to_owned(), "-z".to_owned())].into() }],
            ..Default::default()
        }),
    });
    let found = check_answer("CreateVolume", &request, &[lie]);
    let got: BTreeSet<_> = ids(&found).into_iter().collect();
    for want in [
        "answer.create-volume.volume-id",
        "answer.create-volume.capacity-in-range",
        "answer.maps.within-4kib",
        "answer.topology.key-format",
        "answer.topology.value-format",
    ] {
        assert!(got.contains(want), "{want} missing from {found:#?}");
    }
}

#[test]
fn strings_over_128_bytes_fail_but_node_id_has_256() {
    let info = |id: &str| proto::to_dynamic(&v1::NodeGetInfoResponse { node_id: id.into(), ..Default::default() });
    let req = proto::to_dynamic(&v1::NodeGetInfoRequest {});
    assert!(check_answer("NodeGetInfo", &req, &[info(&"n".repeat(200))]).is_empty());
    assert_eq!(ids(&check_answer("NodeGetInfo", &req, &[info(&"n".repeat(300))])), ["answer.strings.within-128-bytes"]);
    assert_eq!(ids(&check_answer("NodeGetInfo", &req, &[info("")])), ["answer.node-info.node-id"]);
    let vvc = proto::to_dynamic(&v1::ValidateVolumeCapabilitiesResponse { confirmed: None, message: "m".repeat(200) });
    let found = check_answer("ValidateVolumeCapabilities", &req, &[vvc]);
    assert_eq!(ids(&found), ["answer.strings.message-within-128-bytes"]);
    assert_eq!(found[0].rule.level, Level::Tolerated);
}

#[test]
fn plugin_info_and_snapshot_required_fields() {
    let req = proto::to_dynamic(&v1::GetPluginInfoRequest {});
    let info = proto::to_dynamic(&v1::GetPluginInfoResponse { name: "-bad_name".into(), ..Default::default() });
    let got: BTreeSet<_> = ids(&check_answer("GetPluginInfo", &req, &[info])).into_iter().collect();
    assert_eq!(got, BTreeSet::from(["answer.plugin-info.vendor-version", "answer.plugin-info.name-format"]));
    let snap = proto::to_dynamic(&v1::CreateSnapshotResponse {
        snapshot: Some(v1::Snapshot { snapshot_id: "s".into(), source_volume_id: "v".into(), ..Default::default() }),
    });
    let req = proto::to_dynamic(&v1::CreateSnapshotRequest::default());
    assert_eq!(ids(&check_answer("CreateSnapshot", &req, &[snap])), ["answer.create-snapshot.creation-time"]);
}

#[test]
fn usage_with_an_unknown_unit_or_above_total() {
    let req = proto::to_dynamic(&v1::NodeGetVolumeStatsRequest::default());
    let stats = proto::to_dynamic(&v1::NodeGetVolumeStatsResponse {
        usage: vec![
            v1::VolumeUsage { available: 1, total: 10, used: 2, unit: 0 },
            v1::VolumeUsage { available: 1, total: 10, used: 20, unit: 1 },
        ],
        ..Default::default()
    });
    assert_eq!(ids(&check_answer("NodeGetVolumeStats", &req, &[stats])), ["answer.stats.unit-known", "answer.stats.within-total"]);
}

#[test]
fn errors_need_a_message_and_no_details() {
    assert!(check_error("CreateVolume", "NOT_FOUND", "no such volume", &[]).is_empty());
    assert_eq!(ids(&check_error("CreateVolume", "NOT_FOUND", " ", &[1])), ["answer.error.message", "answer.error.details-empty"]);
    // A bare UNIMPLEMENTED is what gRPC frameworks send for a service not registered.
    assert!(check_error("GetSnapshot", "UNIMPLEMENTED", "", &[]).is_empty());
}

#[test]
fn a_repeated_next_token_is_caught_and_asking_a_page_again_is_not() {
    let log = RuleLog::new();
    let ask = |token: &str| proto::to_dynamic(&v1::ListVolumesRequest { max_entries: 1, starting_token: token.into() });
    let page = |next: &str| proto::to_dynamic(&v1::ListVolumesResponse { entries: vec![], next_token: next.into() });
    log.answer("ListVolumes", &ask(""), &[page("a")]);
    log.answer("ListVolumes", &ask("a"), &[page("b")]);
    log.answer("ListVolumes", &ask("a"), &[page("b")]);
    assert!(log.take().is_empty());
    log.answer("ListVolumes", &ask("b"), &[page("a")]);
    assert_eq!(ids(&log.take()), ["answer.list-volumes.token-not-repeated"]);
    log.answer("ListVolumes", &ask("c"), &[page("c")]);
    assert_eq!(ids(&log.take()), ["answer.list-volumes.token-not-repeated"]);
}

#[test]
fn a_page_longer_than_max_entries() {
    let req = proto::to_dynamic(&v1::ListSnapshotsRequest { max_entries: 1, ..Default::default() });
    let entry = || v1::list_snapshots_response::Entry {
        snapshot: Some(v1::Snapshot {
            snapshot_id: "s".into(),
            source_volume_id: "v".into(),
            creation_time: Some(prost_types::Timestamp::default()),
            ..Default::default()
        }),
    };
    let page = proto::to_dynamic(&v1::ListSnapshotsResponse { entries: vec![entry(), entry()], next_token: String::new() });
    assert_eq!(ids(&check_answer("ListSnapshots", &req, &[page])), ["answer.list-snapshots.max-entries"]);
}

#[test]
fn topology_words() {
    assert!(topology_key("zone").is_ok());
    assert!(topology_key("topology.example.com/zone").is_ok());
    assert!(topology_key("Example.com/zone").is_err());
    assert!(topology_key(&"z".repeat(64)).is_err());
    assert!(topology_key("zone_").is_err());
    assert!(segment_word("us-east-1a", "value").is_ok());
    assert!(segment_word("", "value").is_err());
    assert!(plugin_name("csi.example.com").is_ok());
    assert!(plugin_name("csi_example").is_err());
}

// ------------------------------------------------------------------------------------------
// Every rule with a faithful answer and a lie, the rule's id and path asserted; the boundaries
// of every comparison (written for the mutation run of docs/mutants.md, `### response rules`).

use prost_reflect::{DynamicMessage, Value};

/// (rule id, path) of each violation, in order.
fn broken(found: &[Violation]) -> Vec<(&'static str, &str)> {
    found.iter().map(|v| (v.rule.id, v.path.as_str())).collect()
}

fn d<M: prost::Message + prost::Name>(message: &M) -> DynamicMessage {
    proto::to_dynamic(message)
}

fn time() -> Option<prost_types::Timestamp> {
    Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: 0 })
}

fn volume(id: &str) -> v1::Volume {
    v1::Volume {
        capacity_bytes: 10,
        volume_id: id.into(),
        volume_context: [("Any Key/x".to_owned(), "any value".to_owned())].into(),
        accessible_topology: vec![v1::Topology { segments: [("example.com/zone".to_owned(), "z1".to_owned())].into() }],
        ..Default::default()
    }
}

fn snapshot(id: &str, group: &str, ready: bool) -> v1::Snapshot {
    v1::Snapshot {
        size_bytes: 10,
        snapshot_id: id.into(),
        source_volume_id: format!("vol-{id}"),
        creation_time: time(),
        ready_to_use: ready,
        group_snapshot_id: group.into(),
        ..Default::default()
    }
}

fn group(id: &str, ready: bool, members: Vec<v1::Snapshot>) -> v1::VolumeGroupSnapshot {
    v1::VolumeGroupSnapshot { group_snapshot_id: id.into(), snapshots: members, creation_time: time(), ready_to_use: ready }
}

/// A request and a faithful answer of `rpc`, one for each RPC a REQUIRED rule names.
fn faithful(rpc: &str) -> (DynamicMessage, DynamicMessage) {
    let members = || vec![snapshot("s1", "g1", true), snapshot("s2", "g1", true)];
    match rpc {
        "CreateVolume" => (
            d(&v1::CreateVolumeRequest { name: "v".into(), ..Default::default() }),
            d(&v1::CreateVolumeResponse { volume: Some(volume("vol-1")) }),
        ),
        "ListVolumes" => {
            let entry = |id: &str| v1::list_volumes_response::Entry {
                volume: Some(volume(id)),
                status: Some(v1::list_volumes_response::VolumeStatus {
                    published_node_ids: vec!["node-1".into(), "node-2".into()],
                    ..Default::default()
                }),
            };
            (
                d(&v1::ListVolumesRequest::default()),
                d(&v1::ListVolumesResponse { entries: vec![entry("vol-1"), entry("vol-2")], next_token: String::new() }),
            )
        }
        "ControllerGetVolume" => (
            d(&v1::ControllerGetVolumeRequest { volume_id: "vol-1".into() }),
            d(&v1::ControllerGetVolumeResponse { volume: Some(volume("vol-1")), status: None }),
        ),
        "CreateSnapshot" => (
            d(&v1::CreateSnapshotRequest::default()),
            d(&v1::CreateSnapshotResponse { snapshot: Some(snapshot("s1", "", true)) }),
        ),
        "ListSnapshots" => {
            let entry = |id: &str| v1::list_snapshots_response::Entry { snapshot: Some(snapshot(id, "", false)) };
            (
                d(&v1::ListSnapshotsRequest::default()),
                d(&v1::ListSnapshotsResponse { entries: vec![entry("s1"), entry("s2")], next_token: String::new() }),
            )
        }
        "GetSnapshot" => (
            d(&v1::GetSnapshotRequest::default()),
            d(&v1::GetSnapshotResponse { snapshot: Some(snapshot("s1", "", true)) }),
        ),
        "CreateVolumeGroupSnapshot" => (
            d(&v1::CreateVolumeGroupSnapshotRequest::default()),
            d(&v1::CreateVolumeGroupSnapshotResponse { group_snapshot: Some(group("g1", true, members())) }),
        ),
        "GetVolumeGroupSnapshot" => (
            d(&v1::GetVolumeGroupSnapshotRequest::default()),
            d(&v1::GetVolumeGroupSnapshotResponse { group_snapshot: Some(group("g1", false, members())) }),
        ),
        "NodeGetInfo" => (
            d(&v1::NodeGetInfoRequest {}),
            d(&v1::NodeGetInfoResponse {
                node_id: "node-1".into(),
                max_volumes_per_node: 16,
                accessible_topology: Some(v1::Topology {
                    segments: [("example.com/zone".to_owned(), "z1".to_owned()), ("example.com/rack".to_owned(), "r_1.a-b".to_owned())]
                        .into(),
                }),
            }),
        ),
        "GetPluginInfo" => (
            d(&v1::GetPluginInfoRequest {}),
            d(&v1::GetPluginInfoResponse { name: "csi.example-1.com".into(), vendor_version: "1.0".into(), ..Default::default() }),
        ),
        other => panic!("no faithful answer for {other}"),
    }
}

const FAITHFUL_RPCS: &[&str] = &[
    "CreateVolume",
    "ListVolumes",
    "ControllerGetVolume",
    "CreateSnapshot",
    "ListSnapshots",
    "GetSnapshot",
    "CreateVolumeGroupSnapshot",
    "GetVolumeGroupSnapshot",
    "NodeGetInfo",
    "GetPluginInfo",
];

/// A copy of `message` with the field at `path` (`entries[1].volume.volume_id`) cleared, or
/// set to `value`.
fn edited(message: &DynamicMessage, path: &str, value: Option<Value>) -> DynamicMessage {
    let mut copy = message.clone();
    let steps: Vec<&str> = path.split('.').collect();
    let (last, outer) = steps.split_last().expect("a path");
    let mut here = &mut copy;
    for step in outer {
        let (name, index) = match step.split_once('[') {
            Some((name, i)) => (name, Some(i.trim_end_matches(']').parse::<usize>().expect("an index"))),
            None => (*step, None),
        };
        let field = here.get_field_by_name_mut(name).unwrap_or_else(|| panic!("{name} in {path}"));
        here = match (field, index) {
            (Value::List(items), Some(i)) => items[i].as_message_mut().expect("a message in the list"),
            (field, None) => field.as_message_mut().expect("a message"),
            (_, Some(_)) => panic!("{name} is not a list"),
        };
    }
    match value {
        Some(v) => here.set_field_by_name(last, v),
        None => here.clear_field_by_name(last),
    }
    copy
}

#[test]
fn faithful_answers_of_every_rpc_break_nothing() {
    for rpc in FAITHFUL_RPCS {
        let (request, answer) = faithful(rpc);
        let found = check_answer(rpc, &request, &[answer]);
        assert!(found.is_empty(), "{rpc}: {found:#?}");
    }
}

/// Each REQUIRED rule: (rule, RPC, the field cleared in that RPC's faithful answer, which is
/// also the violation's path).
const REQUIRED: &[(&str, &str, &str)] = &[
    ("answer.create-volume.volume", "CreateVolume", "volume"),
    ("answer.create-volume.volume-id", "CreateVolume", "volume.volume_id"),
    ("answer.list-volumes.entry", "ListVolumes", "entries[0].volume"),
    ("answer.list-volumes.volume-id", "ListVolumes", "entries[1].volume.volume_id"),
    ("answer.get-volume.volume", "ControllerGetVolume", "volume"),
    ("answer.get-volume.volume-id", "ControllerGetVolume", "volume.volume_id"),
    ("answer.create-snapshot.snapshot", "CreateSnapshot", "snapshot"),
    ("answer.create-snapshot.snapshot-id", "CreateSnapshot", "snapshot.snapshot_id"),
    ("answer.create-snapshot.source-volume-id", "CreateSnapshot", "snapshot.source_volume_id"),
    ("answer.create-snapshot.creation-time", "CreateSnapshot", "snapshot.creation_time"),
    ("answer.list-snapshots.entry", "ListSnapshots", "entries[1].snapshot"),
    ("answer.list-snapshots.snapshot-id", "ListSnapshots", "entries[0].snapshot.snapshot_id"),
    ("answer.list-snapshots.source-volume-id", "ListSnapshots", "entries[1].snapshot.source_volume_id"),
    ("answer.list-snapshots.creation-time", "ListSnapshots", "entries[0].snapshot.creation_time"),
    ("answer.get-snapshot.snapshot", "GetSnapshot", "snapshot"),
    ("answer.get-snapshot.snapshot-id", "GetSnapshot", "snapshot.snapshot_id"),
    ("answer.get-snapshot.source-volume-id", "GetSnapshot", "snapshot.source_volume_id"),
    ("answer.get-snapshot.creation-time", "GetSnapshot", "snapshot.creation_time"),
    ("answer.create-group-snapshot.group", "CreateVolumeGroupSnapshot", "group_snapshot"),
    ("answer.group-snapshot.id", "CreateVolumeGroupSnapshot", "group_snapshot.group_snapshot_id"),
    ("answer.group-snapshot.members", "GetVolumeGroupSnapshot", "group_snapshot.snapshots"),
    ("answer.group-snapshot.creation-time", "GetVolumeGroupSnapshot", "group_snapshot.creation_time"),
    ("answer.group-snapshot.member-id", "CreateVolumeGroupSnapshot", "group_snapshot.snapshots[1].snapshot_id"),
    ("answer.group-snapshot.member-source", "CreateVolumeGroupSnapshot", "group_snapshot.snapshots[0].source_volume_id"),
    ("answer.get-group-snapshot.group", "GetVolumeGroupSnapshot", "group_snapshot"),
    ("answer.node-info.node-id", "NodeGetInfo", "node_id"),
    ("answer.plugin-info.name", "GetPluginInfo", "name"),
    ("answer.plugin-info.vendor-version", "GetPluginInfo", "vendor_version"),
];

#[test]
fn every_required_field_left_out_breaks_its_own_rule_and_no_other() {
    for (rule, rpc, path) in REQUIRED {
        let (request, answer) = faithful(rpc);
        let found = check_answer(rpc, &request, &[edited(&answer, path, None)]);
        assert_eq!(broken(&found), [(*rule, *path)], "{rpc} without {path}: {found:#?}");
        assert_eq!(found[0].rpc, *rpc);
        assert_eq!(found[0].value, None);
    }
    for r in RULES.iter().filter(|r| matches!(r.check, Check::Required { .. })) {
        assert!(REQUIRED.iter().any(|(id, ..)| *id == r.id), "{} has no case here", r.id);
    }
}

#[test]
fn a_missing_field_is_named_as_missing_empty_or_without_element() {
    let detail = |rpc: &str, path: &str| {
        let (request, answer) = faithful(rpc);
        check_answer(rpc, &request, &[edited(&answer, path, None)]).remove(0).detail
    };
    assert_eq!(detail("CreateVolume", "volume"), "volume is missing");
    assert_eq!(detail("CreateVolume", "volume.volume_id"), "volume.volume_id is empty");
    assert_eq!(detail("GetVolumeGroupSnapshot", "group_snapshot.snapshots"), "group_snapshot.snapshots has no element");
}

#[test]
fn a_negative_number_breaks_its_sign_rule_and_zero_does_not() {
    let listed = |capacity| {
        d(&v1::ListVolumesResponse {
            entries: vec![v1::list_volumes_response::Entry { volume: Some(v1::Volume { capacity_bytes: capacity, ..volume("v") }), status: None }],
            next_token: String::new(),
        })
    };
    let capacity = |available, maximum, minimum| {
        d(&v1::GetCapacityResponse { available_capacity: available, maximum_volume_size: maximum, minimum_volume_size: minimum })
    };
    let usage = |available, total, used| {
        d(&v1::NodeGetVolumeStatsResponse { usage: vec![v1::VolumeUsage { available, total, used, unit: 1 }], ..Default::default() })
    };
    let info = |max| d(&v1::NodeGetInfoResponse { node_id: "n".into(), max_volumes_per_node: max, accessible_topology: None });
    let snap = |size| d(&v1::GetSnapshotResponse { snapshot: Some(v1::Snapshot { size_bytes: size, ..snapshot("s", "", true) }) });
    let cases = [
        ("ListVolumes", listed(-1), "answer.volume.capacity-non-negative", "entries[0].volume.capacity_bytes"),
        ("GetCapacity", capacity(-1, None, None), "answer.capacity.available-non-negative", "available_capacity"),
        ("GetCapacity", capacity(1, Some(-1), None), "answer.capacity.maximum-non-negative", "maximum_volume_size"),
        ("GetCapacity", capacity(1, None, Some(-1)), "answer.capacity.minimum-non-negative", "minimum_volume_size"),
        ("NodeGetVolumeStats", usage(-1, 10, 5), "answer.stats.available-non-negative", "usage[0].available"),
        ("NodeGetVolumeStats", usage(1, -1, 5), "answer.stats.total-non-negative", "usage[0].total"),
        ("NodeGetVolumeStats", usage(1, 10, -1), "answer.stats.used-non-negative", "usage[0].used"),
        ("NodeGetInfo", info(-1), "answer.node-info.max-volumes-non-negative", "max_volumes_per_node"),
        ("GetSnapshot", snap(-1), "answer.snapshot.size-non-negative", "snapshot.size_bytes"),
    ];
    let req = d(&v1::GetCapacityRequest::default());
    for (rpc, answer, rule, path) in cases {
        let found = check_answer(rpc, &req, &[answer]);
        assert_eq!(broken(&found), [(rule, path)], "{rpc}: {found:#?}");
        assert_eq!(found[0].value.as_deref(), Some("-1"));
        assert_eq!(found[0].detail, format!("{path} is negative"));
    }
    // Zero is not negative, also when set explicitly in a wrapper (Int64Value{0} is "set").
    for answer in [listed(0), capacity(0, Some(0), Some(0)), usage(0, 0, 0), info(0), snap(0)] {
        let found = check_answer("GetCapacity", &req, &[answer]);
        assert!(found.is_empty(), "{found:#?}");
    }
    // A metadata range's size_bytes is not a snapshot's: only the stream's order rule speaks.
    let stream = d(&v1::GetMetadataAllocatedResponse {
        block_metadata_type: 1,
        volume_capacity_bytes: 100,
        block_metadata: vec![v1::BlockMetadata { byte_offset: 8, size_bytes: -4 }],
    });
    let found = check_answer("GetMetadataAllocated", &d(&v1::GetMetadataAllocatedRequest::default()), &[stream]);
    assert_eq!(broken(&found), [("answer.metadata-allocated.order", "[0].block_metadata[0]")]);
}

#[test]
fn a_usage_unit_must_be_bytes_or_inodes() {
    let req = proto::to_dynamic(&v1::NodeGetVolumeStatsRequest::default());
    let stats = |unit| {
        proto::to_dynamic(&v1::NodeGetVolumeStatsResponse {
            usage: vec![v1::VolumeUsage { available: 1, total: 10, used: 2, unit }],
            ..Default::default()
        })
    };
    for unit in [1, 2] {
        assert!(check_answer("NodeGetVolumeStats", &req, &[stats(unit)]).is_empty(), "unit {unit}");
    }
    for (unit, shown) in [(0, "UNKNOWN"), (7, "7")] {
        let found = check_answer("NodeGetVolumeStats", &req, &[stats(unit)]);
        assert_eq!(broken(&found), [("answer.stats.unit-known", "usage[0].unit")], "unit {unit}");
        assert_eq!(found[0].value.as_deref(), Some(shown));
    }
}

#[test]
fn used_and_available_may_reach_the_total_but_not_pass_it() {
    let req = proto::to_dynamic(&v1::NodeGetVolumeStatsRequest::default());
    let stats = |available, total, used| {
        let usage = vec![v1::VolumeUsage { available, total, used, unit: 1 }];
        check_answer("NodeGetVolumeStats", &req, &[proto::to_dynamic(&v1::NodeGetVolumeStatsResponse { usage, ..Default::default() })])
    };
    assert!(stats(10, 10, 10).is_empty());
    // An unknown total (0) says nothing about used or available.
    assert!(stats(5, 0, 5).is_empty());
    let found = stats(11, 10, 0);
    assert_eq!(broken(&found), [("answer.stats.within-total", "usage[0].available")]);
    assert_eq!(found[0].value.as_deref(), Some("11"));
    assert_eq!(found[0].rule.level, Level::Note);
    assert_eq!(broken(&stats(0, 10, 11)), [("answer.stats.within-total", "usage[0].used")]);
}

#[test]
fn strings_are_held_to_128_bytes_wherever_they_are() {
    let (request, answer) = faithful("ListVolumes");
    let at = |path: &str, len: usize| {
        check_answer("ListVolumes", &request, &[edited(&answer, path, Some(Value::String("i".repeat(len))))])
    };
    assert!(at("entries[0].volume.volume_id", 128).is_empty());
    let found = at("entries[0].volume.volume_id", 129);
    assert_eq!(broken(&found), [("answer.strings.within-128-bytes", "entries[0].volume.volume_id")]);
    assert_eq!(found[0].value.as_deref(), Some(format!("{:?}... (129 bytes)", "i".repeat(32)).as_str()));
    assert_eq!(found[0].detail, "entries[0].volume.volume_id is 129 bytes, over the 128-byte limit");
    // A string in a list: one published node id too long.
    let ids = vec![Value::String("node-1".into()), Value::String("n".repeat(129))];
    let nodes = edited(&answer, "entries[1].status.published_node_ids", Some(Value::List(ids)));
    let found = check_answer("ListVolumes", &request, &[nodes]);
    assert_eq!(broken(&found), [("answer.strings.within-128-bytes", "entries[1].status.published_node_ids[1]")]);
}

#[test]
fn only_node_id_has_its_own_limit() {
    assert_eq!(check::own_limit("NodeGetInfoResponse", "node_id"), 256);
    assert_eq!(check::own_limit("NodeGetInfoResponse", "max_volumes_per_node"), STRING_LIMIT);
    assert_eq!(check::own_limit("Volume", "node_id"), STRING_LIMIT);
    assert_eq!(check::own_limit("Volume", "volume_id"), STRING_LIMIT);
    let req = proto::to_dynamic(&v1::NodeGetInfoRequest {});
    let info = |id: &str| proto::to_dynamic(&v1::NodeGetInfoResponse { node_id: id.into(), ..Default::default() });
    assert!(check_answer("NodeGetInfo", &req, &[info(&"n".repeat(256))]).is_empty());
    assert_eq!(broken(&check_answer("NodeGetInfo", &req, &[info(&"n".repeat(257))])), [("answer.strings.within-128-bytes", "node_id")]);
}

#[test]
fn a_value_is_shown_short_cut_on_a_character_and_a_mount_flag_never() {
    assert_eq!(check::shown(None, &"a".repeat(40)), format!("{:?}", "a".repeat(40)));
    assert_eq!(check::shown(None, &"a".repeat(41)), format!("{:?}... (41 bytes)", "a".repeat(32)));
    // 'é' is two bytes: the cut at 32 would split it, so the shown part stops before it.
    let text = format!("{}é{}", "a".repeat(31), "b".repeat(20));
    assert_eq!(check::shown(None, &text), format!("{:?}... (53 bytes)", "a".repeat(31)));
    // A mount flag over the limit: named, never shown (it may carry a password).
    let flag = format!("password={}", "p".repeat(200));
    let capability = v1::VolumeCapability {
        access_type: Some(v1::volume_capability::AccessType::Mount(v1::volume_capability::MountVolume {
            mount_flags: vec!["ro".into(), flag.clone()],
            ..Default::default()
        })),
        ..Default::default()
    };
    let answer = proto::to_dynamic(&v1::ValidateVolumeCapabilitiesResponse {
        confirmed: Some(v1::validate_volume_capabilities_response::Confirmed {
            volume_capabilities: vec![capability],
            ..Default::default()
        }),
        message: String::new(),
    });
    let req = proto::to_dynamic(&v1::ValidateVolumeCapabilitiesRequest::default());
    let found = check_answer("ValidateVolumeCapabilities", &req, &[answer]);
    assert_eq!(
        broken(&found),
        [("answer.strings.within-128-bytes", "confirmed.volume_capabilities[0].mount.mount_flags[1]")]
    );
    assert_eq!(found[0].value.as_deref(), Some(proto::REDACTED));
    assert!(!found[0].to_string().contains("password"), "{}", found[0]);
}

#[test]
fn maps_are_held_to_4_kib_and_their_values_warn_past_128_bytes() {
    let (request, answer) = faithful("CreateVolume");
    let with_context = |entries: Vec<(String, String)>| {
        let map = entries.into_iter().map(|(k, v)| (prost_reflect::MapKey::String(k), Value::String(v))).collect();
        check_answer("CreateVolume", &request, &[edited(&answer, "volume.volume_context", Some(Value::Map(map)))])
    };
    // 32 entries of 3 + 125 bytes: 4096 bytes, every value within 128.
    let full: Vec<(String, String)> = (0..32).map(|i| (format!("k{i:02}"), "v".repeat(125))).collect();
    assert!(with_context(full.clone()).is_empty());
    let mut over = full;
    over[0].1.push('v');
    let found = with_context(over);
    assert_eq!(broken(&found), [("answer.maps.within-4kib", "volume.volume_context")]);
    assert_eq!(found[0].detail, "volume.volume_context is 4097 bytes (32 entries), over the 4 KiB limit");
    // A value of 128 bytes is fine; of 129 it warns, naming the first such key.
    assert!(with_context(vec![("k".into(), "v".repeat(128))]).is_empty());
    let found = with_context(vec![("b".into(), "v".repeat(129)), ("a".into(), "v".repeat(130)), ("c".into(), "v".into())]);
    assert_eq!(broken(&found), [("answer.maps.value-within-128-bytes", "volume.volume_context[\"a\"]")]);
    assert_eq!(found[0].value.as_deref(), Some("130 bytes"));
    assert_eq!(found[0].rule.level, Level::Note);
    // Keys of a context are the plugin's own: no topology rule reaches them.
    assert!(with_context(vec![("Not A/Topology Key".into(), "-".into())]).is_empty());
}

#[test]
fn topology_segments_are_checked_where_a_plugin_reports_them() {
    let req = proto::to_dynamic(&v1::NodeGetInfoRequest {});
    let info = |segments: &[(&str, &str)]| {
        let segments = segments.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let answer = v1::NodeGetInfoResponse { node_id: "n".into(), accessible_topology: Some(v1::Topology { segments }), ..Default::default() };
        check_answer("NodeGetInfo", &req, &[proto::to_dynamic(&answer)])
    };
    assert!(info(&[("example.com/zone", "z1"), ("example.com/rack", "r1")]).is_empty());
    let found = info(&[("example.com/zone", "-z1")]);
    assert_eq!(broken(&found), [("answer.topology.value-format", "accessible_topology.segments[\"example.com/zone\"]")]);
    assert_eq!(found[0].detail, "value \"-z1\" does not begin and end with an alphanumeric character");
    let found = info(&[("Example.com/zone", "z1")]);
    assert_eq!(broken(&found), [("answer.topology.key-format", "accessible_topology.segments[\"Example.com/zone\"]")]);
    // Keys are case-insensitive: two that differ by case only are one key named twice.
    let found = info(&[("zone", "z1"), ("Zone", "z1")]);
    assert_eq!(broken(&found), [("answer.topology.key-format", "accessible_topology.segments[\"zone\"]")]);
    assert!(found[0].detail.contains("differ only by case"), "{}", found[0].detail);
    // One prefix on every key.
    let found = info(&[("a.example.com/zone", "z1"), ("b.example.com/rack", "r1")]);
    assert_eq!(broken(&found), [("answer.topology.key-format", "accessible_topology")]);
    assert_eq!(found[0].detail, "topology keys use 2 prefixes (a.example.com, b.example.com); one prefix is used on every key");
    let found = info(&[("a.example.com/zone", "z1"), ("b.example.com/rack", "r1"), ("c.example.com/row", "w1")]);
    assert_eq!(broken(&found), [("answer.topology.key-format", "accessible_topology")]);
}

#[test]
fn topology_keys_and_values_follow_the_spec_character_rules() {
    for ok in ["zone", "topology.example.com/zone", "my-zone.example.com/z", "a1.b2/Zone_1.a-b", &format!("{}/z", "a".repeat(63))] {
        assert_eq!(topology_key(ok), Ok(()), "{ok}");
    }
    for bad in [
        "Example.com/zone",
        "example.com-/zone",
        "-example.com/zone",
        "zone-.example.com/zone",
        "exa_mple.com/zone",
        "a..b/zone",
        "/zone",
        "example.com/",
        &format!("{}/z", "a".repeat(64)),
        &"z".repeat(64),
        "zone_",
    ] {
        assert!(topology_key(bad).is_err(), "{bad} passed");
    }
    assert_eq!(
        topology_key("exa_mple.com/zone"),
        Err("prefix \"exa_mple.com\" is not a lower-case domain name of at most 63 characters".into())
    );
    assert_eq!(segment_word(&"a".repeat(63), "value"), Ok(()));
    assert_eq!(segment_word("A1_b-c.d", "value"), Ok(()));
    assert_eq!(segment_word(&"a".repeat(64), "value"), Err("value is 64 characters, over 63".into()));
    assert_eq!(segment_word(&"a".repeat(100), "name"), Err("name is 100 characters, over 63".into()));
    assert_eq!(segment_word("", "value"), Err("value is empty".into()));
    for bad in ["a-", "-a", "a b", "a/b"] {
        assert!(segment_word(bad, "value").is_err(), "{bad} passed");
    }
    assert_eq!(segment_word("a b", "value"), Err("value \"a b\" contains ' '".into()));
}

#[test]
fn a_plugin_name_is_domain_name_shaped() {
    for ok in ["csi.example.com", "a", "A-1.b", &"a".repeat(63), ""] {
        assert_eq!(plugin_name(ok), Ok(()), "{ok}");
    }
    assert_eq!(plugin_name(&"a".repeat(64)), Err("it is 64 characters, over 63".into()));
    assert_eq!(plugin_name(&"a".repeat(100)), Err("it is 100 characters, over 63".into()));
    for bad in ["a-", "-a", ".a", "a."] {
        assert_eq!(plugin_name(bad), Err("it does not begin and end with an alphanumeric character".into()), "{bad}");
    }
    assert_eq!(plugin_name("csi_example"), Err("it contains '_'".into()));
    assert_eq!(plugin_name("csi/example"), Err("it contains '/'".into()));
    let (request, answer) = faithful("GetPluginInfo");
    let found = check_answer("GetPluginInfo", &request, &[edited(&answer, "name", Some(Value::String("csi_x".into())))]);
    assert_eq!(broken(&found), [("answer.plugin-info.name-format", "name")]);
    assert_eq!(found[0].value.as_deref(), Some("\"csi_x\""));
    assert_eq!(found[0].detail, "name it contains '_'");
}

#[test]
fn create_volume_capacity_is_within_the_range_asked_for() {
    let check = |required, limit, got| {
        let request = proto::to_dynamic(&v1::CreateVolumeRequest {
            name: "v".into(),
            capacity_range: Some(v1::CapacityRange { required_bytes: required, limit_bytes: limit }),
            ..Default::default()
        });
        let answer = proto::to_dynamic(&v1::CreateVolumeResponse { volume: Some(v1::Volume { capacity_bytes: got, ..volume("v") }) });
        check_answer("CreateVolume", &request, &[answer])
    };
    for (required, limit, got) in [(10, 20, 10), (10, 20, 15), (10, 20, 20), (10, 20, 0), (10, 0, 50), (0, 20, 5), (0, 0, 7)] {
        assert!(check(required, limit, got).is_empty(), "{required}..{limit}: {got}");
    }
    let found = check(10, 20, 9);
    assert_eq!(broken(&found), [("answer.create-volume.capacity-in-range", "volume.capacity_bytes")]);
    assert_eq!(found[0].detail, "volume.capacity_bytes 9 is below required_bytes 10");
    let found = check(10, 20, 21);
    assert_eq!(broken(&found), [("answer.create-volume.capacity-in-range", "volume.capacity_bytes")]);
    assert_eq!(found[0].detail, "volume.capacity_bytes 21 is above limit_bytes 20");
    assert_eq!(found[0].value.as_deref(), Some("21"));
    // A negative capacity is the sign rule's, not the range's.
    assert_eq!(broken(&check(0, 0, -1)), [("answer.volume.capacity-non-negative", "volume.capacity_bytes")]);
}

#[test]
fn a_volume_created_with_requisite_topologies_is_reachable_from_one() {
    let topology = |pairs: &[(&str, &str)]| v1::Topology {
        segments: pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
    };
    let check = |requisite: Vec<v1::Topology>, reported: Vec<v1::Topology>| {
        let request = proto::to_dynamic(&v1::CreateVolumeRequest {
            name: "v".into(),
            accessibility_requirements: Some(v1::TopologyRequirement { requisite, preferred: vec![] }),
            ..Default::default()
        });
        let answer = proto::to_dynamic(&v1::CreateVolumeResponse {
            volume: Some(v1::Volume { accessible_topology: reported, ..volume("v") }),
        });
        check_answer("CreateVolume", &request, &[answer])
    };
    let z = |zone: &str| topology(&[("zone", zone)]);
    assert!(check(vec![z("z1"), z("z2")], vec![topology(&[("zone", "z2"), ("rack", "r1")])]).is_empty());
    assert!(check(vec![z("z1")], vec![z("z3"), z("z1")]).is_empty());
    // No key in common contradicts nothing.
    assert!(check(vec![z("z1")], vec![topology(&[("rack", "r1")])]).is_empty());
    assert!(check(vec![], vec![z("z3")]).is_empty());
    assert!(check(vec![z("z1")], vec![]).is_empty());
    let found = check(vec![z("z1"), z("z2")], vec![z("z3"), topology(&[("zone", "z1"), ("rack", "r1")])]);
    assert!(found.is_empty(), "{found:#?}");
    let found = check(vec![z("z1"), z("z2")], vec![z("z3")]);
    assert_eq!(broken(&found), [("answer.create-volume.requisite-topology", "volume.accessible_topology")]);
}

#[test]
fn an_expanded_volume_is_at_least_the_bytes_asked_for() {
    let check = |asked, got| {
        let request = proto::to_dynamic(&v1::ControllerExpandVolumeRequest {
            volume_id: "v".into(),
            capacity_range: Some(v1::CapacityRange { required_bytes: asked, limit_bytes: 0 }),
            ..Default::default()
        });
        let answer = proto::to_dynamic(&v1::ControllerExpandVolumeResponse { capacity_bytes: got, node_expansion_required: false });
        check_answer("ControllerExpandVolume", &request, &[answer])
    };
    assert!(check(10, 10).is_empty());
    assert!(check(10, 11).is_empty());
    assert!(check(0, 5).is_empty());
    let found = check(10, 9);
    assert_eq!(broken(&found), [("answer.expand.at-least-requested", "capacity_bytes")]);
    assert_eq!(found[0].value.as_deref(), Some("9"));
    assert_eq!(found[0].detail, "capacity_bytes 9 is below the 10 bytes asked for");
    assert_eq!(broken(&check(10, 0)), [("answer.expand.at-least-requested", "capacity_bytes")]);
}

#[test]
fn a_page_may_hold_max_entries_and_no_more() {
    let (_, answer) = faithful("ListVolumes");
    let ask = |max| proto::to_dynamic(&v1::ListVolumesRequest { max_entries: max, starting_token: String::new() });
    assert!(check_answer("ListVolumes", &ask(2), std::slice::from_ref(&answer)).is_empty());
    assert!(check_answer("ListVolumes", &ask(0), std::slice::from_ref(&answer)).is_empty());
    let found = check_answer("ListVolumes", &ask(1), &[answer]);
    assert_eq!(broken(&found), [("answer.list-volumes.max-entries", "entries")]);
    assert_eq!(found[0].value.as_deref(), Some("2"));
    let (_, answer) = faithful("ListSnapshots");
    let ask = |max| proto::to_dynamic(&v1::ListSnapshotsRequest { max_entries: max, ..Default::default() });
    assert!(check_answer("ListSnapshots", &ask(2), std::slice::from_ref(&answer)).is_empty());
    assert_eq!(broken(&check_answer("ListSnapshots", &ask(1), &[answer])), [("answer.list-snapshots.max-entries", "entries")]);
}

#[test]
fn a_group_snapshot_is_ready_only_with_its_members_and_they_name_it() {
    let check = |g: v1::VolumeGroupSnapshot| {
        let answer = proto::to_dynamic(&v1::CreateVolumeGroupSnapshotResponse { group_snapshot: Some(g) });
        check_answer("CreateVolumeGroupSnapshot", &proto::to_dynamic(&v1::CreateVolumeGroupSnapshotRequest::default()), &[answer])
    };
    // Ready with ready members, not ready with members in any state; a member that names no
    // group is the plugin's to delete alone, not a lie.
    assert!(check(group("g1", true, vec![snapshot("s1", "g1", true), snapshot("s2", "", true)])).is_empty());
    assert!(check(group("g1", false, vec![snapshot("s1", "g1", false), snapshot("s2", "g1", true)])).is_empty());
    let found = check(group("g1", true, vec![snapshot("s1", "g1", true), snapshot("s2", "g1", false)]));
    assert_eq!(broken(&found), [("answer.group-snapshot.ready-only-if-members", "group_snapshot.ready_to_use")]);
    assert_eq!(found[0].detail, "group_snapshot.ready_to_use is true while group_snapshot.snapshots[1].ready_to_use is false");
    let found = check(group("g1", false, vec![snapshot("s1", "g1", false), snapshot("s2", "g2", false)]));
    assert_eq!(broken(&found), [("answer.group-snapshot.members-name-group", "group_snapshot.snapshots[1].group_snapshot_id")]);
    assert_eq!(found[0].value.as_deref(), Some("\"g2\""));
    // A group without an id: the REQUIRED rule speaks, not a comparison with an empty id.
    let found = check(group("", false, vec![snapshot("s1", "g1", false)]));
    assert_eq!(broken(&found), [("answer.group-snapshot.id", "group_snapshot.group_snapshot_id")]);
}

fn ranges(kind: i32, spans: &[(i64, i64)]) -> v1::GetMetadataAllocatedResponse {
    v1::GetMetadataAllocatedResponse {
        block_metadata_type: kind,
        volume_capacity_bytes: 1 << 20,
        block_metadata: spans.iter().map(|&(byte_offset, size_bytes)| v1::BlockMetadata { byte_offset, size_bytes }).collect(),
    }
}

fn allocated(start: i64, max: i32, stream: &[v1::GetMetadataAllocatedResponse]) -> Vec<Violation> {
    let request = proto::to_dynamic(&v1::GetMetadataAllocatedRequest {
        snapshot_id: "s".into(),
        starting_offset: start,
        max_results: max,
        ..Default::default()
    });
    let messages: Vec<_> = stream.iter().map(proto::to_dynamic).collect();
    check_answer("GetMetadataAllocated", &request, &messages)
}

#[test]
fn metadata_ranges_come_in_order_from_the_starting_offset() {
    // Adjacent ranges, a gap, several messages of the same type, max_results reached exactly.
    assert!(allocated(0, 2, &[ranges(1, &[(0, 4), (4, 4)]), ranges(1, &[(16, 4)])]).is_empty());
    assert!(allocated(0, 0, &[ranges(2, &[(0, 1), (1, 1), (2, 1)])]).is_empty());
    // The first range may hold the starting offset.
    assert!(allocated(6, 0, &[ranges(1, &[(4, 4), (8, 4)])]).is_empty());
    let order = "answer.metadata-allocated.order";
    assert_eq!(broken(&allocated(0, 0, &[ranges(1, &[(0, 8), (4, 8)])])), [(order, "[0].block_metadata[1]")]);
    assert_eq!(broken(&allocated(0, 0, &[ranges(1, &[(0, 4)]), ranges(1, &[(2, 4)])])), [(order, "[1].block_metadata[0]")]);
    assert_eq!(broken(&allocated(0, 0, &[ranges(1, &[(0, 4), (4, 0)])])), [(order, "[0].block_metadata[1]")]);
    let found = allocated(0, 0, &[ranges(1, &[(0, 4)]), ranges(2, &[(4, 4)])]);
    assert_eq!(broken(&found), [(order, "[1].block_metadata_type")]);
    assert_eq!(found[0].value.as_deref(), Some("2"));
    // One order violation per stream, however many follow.
    assert_eq!(broken(&allocated(0, 0, &[ranges(1, &[(8, 4), (0, 4), (0, 4)]), ranges(2, &[])])), [(order, "[0].block_metadata[1]")]);
    // A range that ends at or before the starting offset.
    let start = "answer.metadata-allocated.starting-offset";
    let found = allocated(8, 0, &[ranges(1, &[(0, 8), (8, 4)])]);
    assert_eq!(broken(&found), [(start, "[0].block_metadata[0]")]);
    assert_eq!(found[0].value.as_deref(), Some("0+8"));
    assert_eq!(broken(&allocated(8, 0, &[ranges(1, &[(0, 2), (2, 2)])])), [(start, "[0].block_metadata[0]")]);
    // More ranges than max_results in a message, said once.
    let max = "answer.metadata-allocated.max-results";
    let found = allocated(0, 1, &[ranges(1, &[(0, 4), (4, 4)]), ranges(1, &[(8, 4), (12, 4)])]);
    assert_eq!(broken(&found), [(max, "[0].block_metadata")]);
    assert_eq!(found[0].value.as_deref(), Some("2"));
    assert_eq!(broken(&allocated(0, 2, &[ranges(1, &[(0, 4)]), ranges(1, &[(8, 4), (12, 4), (16, 4)])])), [(max, "[1].block_metadata")]);
}

#[test]
fn metadata_delta_streams_break_the_delta_rules() {
    let request = proto::to_dynamic(&v1::GetMetadataDeltaRequest { starting_offset: 8, max_results: 1, ..Default::default() });
    let stream = |spans: &[(i64, i64)]| {
        let r = ranges(1, spans);
        proto::to_dynamic(&v1::GetMetadataDeltaResponse {
            block_metadata_type: r.block_metadata_type,
            volume_capacity_bytes: r.volume_capacity_bytes,
            block_metadata: r.block_metadata,
        })
    };
    assert!(check_answer("GetMetadataDelta", &request, &[stream(&[(8, 4)]), stream(&[(12, 4)])]).is_empty());
    let found = check_answer("GetMetadataDelta", &request, &[stream(&[(0, 4), (2, 8)])]);
    assert_eq!(
        broken(&found),
        [
            ("answer.metadata-delta.max-results", "[0].block_metadata"),
            ("answer.metadata-delta.starting-offset", "[0].block_metadata[0]"),
            ("answer.metadata-delta.order", "[0].block_metadata[1]"),
        ]
    );
}

#[test]
fn every_listing_rpc_is_followed_for_repeated_tokens() {
    let log = RuleLog::new();
    let ask = |token: &str| proto::to_dynamic(&v1::ListSnapshotsRequest { max_entries: 1, starting_token: token.into(), ..Default::default() });
    let page = |next: &str| proto::to_dynamic(&v1::ListSnapshotsResponse { entries: vec![], next_token: next.into() });
    log.answer("ListSnapshots", &ask(""), &[page("a")]);
    log.answer("ListSnapshots", &ask("a"), &[page("")]);
    assert!(log.take().is_empty());
    log.answer("ListSnapshots", &ask("x"), &[page("x")]);
    let found = log.take();
    assert_eq!(broken(&found), [("answer.list-snapshots.token-not-repeated", "next_token")]);
    assert_eq!(found[0].value.as_deref(), Some("\"x\""));
    assert_eq!(found[0].rpc, "ListSnapshots");
}

#[test]
fn a_listing_may_take_max_pages_and_not_one_more() {
    let log = RuleLog::new();
    let ask = |token: &str| proto::to_dynamic(&v1::ListVolumesRequest { max_entries: 1, starting_token: token.into() });
    let page = |next: &str| proto::to_dynamic(&v1::ListVolumesResponse { entries: vec![], next_token: next.into() });
    let token = |i: usize| if i == 0 { String::new() } else { format!("t{i}") };
    for i in 0..MAX_PAGES {
        log.answer("ListVolumes", &ask(&token(i)), &[page(&token(i + 1))]);
    }
    // Asking the last page again is not a new page.
    log.answer("ListVolumes", &ask(&token(MAX_PAGES - 1)), &[page(&token(MAX_PAGES))]);
    assert!(log.take().is_empty());
    log.answer("ListVolumes", &ask(&token(MAX_PAGES)), &[page(&token(MAX_PAGES + 1))]);
    let found = log.take();
    assert_eq!(broken(&found), [("answer.list-volumes.pages-end", "next_token")]);
    assert_eq!(found[0].value.as_deref(), Some("\"t1001\""));
    // A listing started again from the beginning counts again from one.
    log.answer("ListVolumes", &ask(""), &[page("t1")]);
    assert!(log.take().is_empty());
}

#[test]
fn the_log_keeps_what_answers_and_errors_broke_until_taken() {
    let log = RuleLog::new();
    let (request, answer) = faithful("CreateVolume");
    log.answer("CreateVolume", &request, &[edited(&answer, "volume.volume_id", None)]);
    log.error("DeleteVolume", "INTERNAL", "", &[]);
    let clone = log.clone();
    let found = clone.take();
    assert_eq!(broken(&found), [("answer.create-volume.volume-id", "volume.volume_id"), ("answer.error.message", "status.message")]);
    assert_eq!(found[1].rpc, "DeleteVolume");
    assert_eq!(found[1].detail, "the INTERNAL answer has no message");
    assert!(log.take().is_empty());
    let found = check_error("DeleteVolume", "INTERNAL", "boom", &[1, 2, 3]);
    assert_eq!(broken(&found), [("answer.error.details-empty", "status.details")]);
    assert_eq!(found[0].value.as_deref(), Some("3 bytes"));
}

#[test]
fn a_violation_reads_as_rpc_rule_detail_value_summary_and_level() {
    let (request, answer) = faithful("CreateVolume");
    let found = check_answer("CreateVolume", &request, &[edited(&answer, "volume.volume_id", None)]);
    assert_eq!(
        found[0].to_string(),
        "CreateVolume's answer breaks answer.create-volume.volume-id: volume.volume_id is empty; \
         CreateVolume's volume has a non-empty volume_id [MUST]"
    );
    let found = check_error("Probe", "INTERNAL", "x", &[7]);
    assert_eq!(
        found[0].to_string(),
        "Probe's answer breaks answer.error.details-empty: the status details are not empty (value 1 bytes); \
         An error answer leaves the status details empty [MUST]"
    );
    assert_eq!(Level::Tolerated.as_str(), "tolerated deviation from MUST");
}

#[test]
fn created_ids_are_read_from_each_creating_rpc() {
    let (_, volume) = faithful("CreateVolume");
    assert_eq!(created_id("CreateVolume", &volume), Some(("volume", Some("vol-1".to_owned()))));
    assert_eq!(created_id("CreateVolume", &edited(&volume, "volume.volume_id", None)), Some(("volume", None)));
    assert_eq!(created_id("CreateVolume", &edited(&volume, "volume", None)), Some(("volume", None)));
    let (_, snap) = faithful("CreateSnapshot");
    assert_eq!(created_id("CreateSnapshot", &snap), Some(("snapshot", Some("s1".to_owned()))));
    let (_, group) = faithful("CreateVolumeGroupSnapshot");
    assert_eq!(created_id("CreateVolumeGroupSnapshot", &group), Some(("group snapshot", Some("g1".to_owned()))));
    assert_eq!(created_id("ControllerGetVolume", &volume), None);
    assert_eq!(created_id("DeleteVolume", &d(&v1::DeleteVolumeResponse {})), None);
}

#[test]
fn rules_are_found_by_id_and_by_check_and_cover_their_requirements() {
    assert_eq!(by_id("answer.error.message").map(|r| r.check), Some(Check::ErrorMessage));
    assert_eq!(by_id("answer.stats.within-total").map(|r| r.level), Some(Level::Note));
    assert_eq!(by_id("answer.no-such-rule"), None);
    assert_eq!(table::of(Check::GroupReady).map(|r| r.id), Some("answer.group-snapshot.ready-only-if-members"));
    let pairs = covering();
    assert_eq!(pairs.len(), RULES.len());
    for (pair, rule) in pairs.iter().zip(RULES) {
        assert_eq!(pair, &(format!("rule {}", rule.id), vec![rule.requirement.to_owned()]));
    }
}
