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
    assert_eq!(found[0].rule.level, Level::Should);
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
