//! The reference plugin over its real unix socket: every error code the spec names for each
//! RPC, idempotency, paging, snapshots, group snapshots, snapshot metadata, modes, disabled
//! capabilities, secrets, contexts, and several instances sharing one state directory.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

use clap::Parser;
use csi_conform::proto::v1::{
    self, controller_service_capability::rpc::Type as ControllerRpc,
    node_service_capability::rpc::Type as NodeRpc, plugin_capability,
    volume_capability::access_mode::Mode,
};
use csi_conform::reference::{self, Config, Mode as PluginMode, TOPOLOGY_KEY};
use csi_conform::secrets::{SecretKey, Secrets};
use tonic::Code;

use crate::support::*;

fn disabled(names: &[&str]) -> Config {
    let mut config = Config::default();
    for n in names {
        config.disabled.add(n).expect("valid capability name");
    }
    config
}

fn topology(node: &str) -> v1::Topology {
    v1::Topology {
        segments: map(&[(TOPOLOGY_KEY, node)]),
    }
}

// ------------------------------------------------------------------------------------------
// Identity and capabilities
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn identity_reports_name_version_capabilities_and_readiness() {
    let p = TestPlugin::start(Config::default()).await;
    let mut id = p.identity();
    let info = ok(id.get_plugin_info(v1::GetPluginInfoRequest {}).await);
    assert_eq!(info.name, reference::DEFAULT_NAME);
    assert_eq!(info.vendor_version, env!("CARGO_PKG_VERSION"));
    assert!(info.manifest.contains_key("url"));

    let caps = ok(id
        .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
        .await);
    use plugin_capability::{Type, service::Type as S, volume_expansion::Type as E};
    let services: Vec<i32> = caps
        .capabilities
        .iter()
        .filter_map(|c| match &c.r#type {
            Some(Type::Service(s)) => Some(s.r#type),
            _ => None,
        })
        .collect();
    for s in [
        S::ControllerService,
        S::VolumeAccessibilityConstraints,
        S::GroupControllerService,
        S::SnapshotMetadataService,
        S::SnapshotAccessibilityConstraints,
    ] {
        assert!(services.contains(&(s as i32)), "{s:?} missing");
    }
    assert!(caps.capabilities.iter().any(|c| matches!(&c.r#type,
        Some(Type::VolumeExpansion(e)) if e.r#type == E::Online as i32)));
    assert_eq!(ok(id.probe(v1::ProbeRequest {}).await).ready, Some(true));

    let ctl = ok(p
        .controller()
        .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
        .await);
    // CSI v1.13: GET_VOLUME_HEALTH and LIST_VOLUME_HEALTH, no VOLUME_CONDITION.
    assert_eq!(ctl.capabilities.len(), 16);
    let node = ok(p
        .node()
        .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
        .await);
    assert_eq!(node.capabilities.len(), 7, "v1.13: GET_VOLUME_HEALTH and GET_STORAGE_HEALTH, no VOLUME_CONDITION");
    let group = ok(p
        .group()
        .group_controller_get_capabilities(v1::GroupControllerGetCapabilitiesRequest {})
        .await);
    assert_eq!(group.capabilities.len(), 1);

    let info = ok(p.node().node_get_info(v1::NodeGetInfoRequest {}).await);
    assert_eq!(info.node_id, reference::DEFAULT_NODE_ID);
    assert_eq!(info.max_volumes_per_node, 16);
    assert_eq!(
        info.accessible_topology,
        Some(topology(reference::DEFAULT_NODE_ID))
    );
}

/// A bound far above any delay these tests configure: it only turns a hang into a failure.
const HANG: Duration = Duration::from_secs(60);

/// Calls `ask` until `done` holds for its answer (the plugin's own state, not a guess at how
/// long it takes), within [`HANG`].
async fn until<T, F, Fut>(mut ask: F, done: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let started = Instant::now();
    loop {
        let answer = ask().await;
        if done(&answer) {
            return answer;
        }
        assert!(started.elapsed() < HANG, "the plugin never reached the state");
        // A pause between questions, not a guess at when the answer changes.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn probe_is_not_ready_until_ready_after_and_latency_delays_answers() {
    // ready_after is counted from the plugin's start: three seconds leave the first Probe far
    // inside it, and the wait for ready=true asks the plugin rather than sleeping.
    let config = Config {
        ready_after: Duration::from_secs(3),
        latency: Duration::from_millis(60),
        ..Config::default()
    };
    let p = TestPlugin::start(config).await;
    let mut id = p.identity();
    let started = Instant::now();
    assert_eq!(ok(id.probe(v1::ProbeRequest {}).await).ready, Some(false));
    // A lower bound only (a slow machine makes it longer, never shorter).
    assert!(
        started.elapsed() >= Duration::from_millis(60),
        "latency applies"
    );
    let probe = || {
        let mut id = id.clone();
        async move { ok(id.probe(v1::ProbeRequest {}).await).ready }
    };
    assert_eq!(until(probe, |ready| *ready != Some(false)).await, Some(true));
}

// ------------------------------------------------------------------------------------------
// CreateVolume / DeleteVolume
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn create_volume_rejects_invalid_arguments() {
    let p = TestPlugin::start(Config {
        capacity: 10 << 30,
        max_volume_size: 4 << 30,
        ..Config::default()
    })
    .await;
    let mut ctl = p.controller();
    expect_code(
        ctl.create_volume(create_req("", vec![snw()])).await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.create_volume(create_req("v", vec![])).await,
        Code::InvalidArgument,
    );
    let no_access = v1::VolumeCapability {
        access_type: None,
        ..snw()
    };
    expect_code(
        ctl.create_volume(create_req("v", vec![no_access])).await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.create_volume(create_req("v", vec![mount_cap(Mode::Unknown)]))
            .await,
        Code::InvalidArgument,
    );
    let no_mode = v1::VolumeCapability {
        access_mode: None,
        ..snw()
    };
    expect_code(
        ctl.create_volume(create_req("v", vec![no_mode])).await,
        Code::InvalidArgument,
    );
    let ntfs = mount_cap_with(Mode::SingleNodeWriter, "ntfs", &[], "");
    expect_code(
        ctl.create_volume(create_req("v", vec![ntfs])).await,
        Code::InvalidArgument,
    );
    for (req_b, lim_b) in [(-1, 0), (0, -1), (2 << 20, 1 << 20)] {
        let r = v1::CreateVolumeRequest {
            capacity_range: range(req_b, lim_b),
            ..create_req("v", vec![snw()])
        };
        expect_code(ctl.create_volume(r).await, Code::InvalidArgument);
    }
    let too_big = v1::CreateVolumeRequest {
        capacity_range: range(5 << 30, 0),
        ..create_req("v", vec![snw()])
    };
    expect_code(ctl.create_volume(too_big).await, Code::OutOfRange);
    let bad_mutable = v1::CreateVolumeRequest {
        mutable_parameters: map(&[("color", "red")]),
        ..create_req("v", vec![snw()])
    };
    let s = expect_code(ctl.create_volume(bad_mutable).await, Code::InvalidArgument);
    assert!(s.message().contains("color"), "{s:?}");
    let with_banned = create_req("bad\u{1}name", vec![snw()]);
    expect_code(ctl.create_volume(with_banned).await, Code::InvalidArgument);

    // The pool holds 10 GiB: two 4 GiB volumes fit, a third does not.
    for name in ["a", "b"] {
        ok(ctl
            .create_volume(v1::CreateVolumeRequest {
                capacity_range: range(4 << 30, 0),
                ..create_req(name, vec![snw()])
            })
            .await);
    }
    let third = v1::CreateVolumeRequest {
        capacity_range: range(4 << 30, 0),
        ..create_req("c", vec![snw()])
    };
    expect_code(ctl.create_volume(third).await, Code::ResourceExhausted);
    let cap = ok(ctl.get_capacity(v1::GetCapacityRequest::default()).await);
    assert_eq!(cap.available_capacity, 2 << 30);
    assert_eq!(cap.maximum_volume_size, Some(2 << 30));
    assert_eq!(cap.minimum_volume_size, Some(1));
}

#[tokio::test]
async fn single_node_multi_writer_modes_need_the_capability() {
    let p = TestPlugin::start(disabled(&["SINGLE_NODE_MULTI_WRITER"])).await;
    let mut ctl = p.controller();
    for mode in [Mode::SingleNodeSingleWriter, Mode::SingleNodeMultiWriter] {
        expect_code(
            ctl.create_volume(create_req("v", vec![mount_cap(mode)]))
                .await,
            Code::InvalidArgument,
        );
    }
    create(&mut ctl, "v", vec![snw()]).await;
    let p = TestPlugin::start(Config::default()).await;
    create(
        &mut p.controller(),
        "v",
        vec![mount_cap(Mode::SingleNodeSingleWriter)],
    )
    .await;
}

#[tokio::test]
async fn create_volume_is_idempotent_and_detects_conflicts() {
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    let first = create(&mut ctl, "vol", vec![snw()]).await;
    assert_eq!(first.capacity_bytes, reference::GIB, "1 GiB by default");
    assert_eq!(
        first
            .volume_context
            .get("csi-conform.dev/name")
            .map(String::as_str),
        Some("vol")
    );
    assert_eq!(
        first.accessible_topology,
        vec![topology(reference::DEFAULT_NODE_ID)]
    );
    let again = create(&mut ctl, "vol", vec![snw()]).await;
    assert_eq!(again, first);
    // A compatible range is fine; an incompatible one, other capabilities or parameters are not.
    let compatible = v1::CreateVolumeRequest {
        capacity_range: range(reference::GIB, 0),
        ..create_req("vol", vec![snw()])
    };
    assert_eq!(
        ok(ctl.create_volume(compatible).await).volume,
        Some(first.clone())
    );
    let bigger = v1::CreateVolumeRequest {
        capacity_range: range(2 << 30, 2 << 30),
        ..create_req("vol", vec![snw()])
    };
    expect_code(ctl.create_volume(bigger).await, Code::AlreadyExists);
    expect_code(
        ctl.create_volume(create_req("vol", vec![block_cap(Mode::SingleNodeWriter)]))
            .await,
        Code::AlreadyExists,
    );
    let params = v1::CreateVolumeRequest {
        parameters: map(&[("tier", "gold")]),
        ..create_req("vol", vec![snw()])
    };
    expect_code(ctl.create_volume(params).await, Code::AlreadyExists);

    let sized = v1::CreateVolumeRequest {
        capacity_range: range(10 << 20, 0),
        ..create_req("sized", vec![snw()])
    };
    assert_eq!(
        ok(ctl.create_volume(sized).await)
            .volume
            .unwrap()
            .capacity_bytes,
        10 << 20
    );
    let limited = v1::CreateVolumeRequest {
        capacity_range: range(0, 20 << 20),
        ..create_req("limited", vec![snw()])
    };
    assert_eq!(
        ok(ctl.create_volume(limited).await)
            .volume
            .unwrap()
            .capacity_bytes,
        20 << 20
    );

    let long = "n".repeat(128);
    let v = create(&mut ctl, &long, vec![snw()]).await;
    assert_eq!(
        create(&mut ctl, &long, vec![snw()]).await.volume_id,
        v.volume_id
    );
    let both = create(
        &mut ctl,
        "both",
        vec![snw(), block_cap(Mode::SingleNodeWriter)],
    )
    .await;
    assert_eq!(
        both.volume_context
            .get("csi-conform.dev/fs")
            .map(String::as_str),
        Some("ext4")
    );

    // An identical re-send is the same request, whatever file systems its capabilities
    // name (a lost answer is asked for again this way), mount flags and all.
    let many = || {
        vec![
            mount_cap_with(Mode::SingleNodeWriter, "", &["noatime"], ""),
            mount_cap_with(Mode::SingleNodeWriter, "ext4", &[], ""),
            mount_cap_with(Mode::SingleNodeWriter, "xfs", &["nodev", "noexec"], ""),
        ]
    };
    let made = create(&mut ctl, "three-file-systems", many()).await;
    for _ in 0..2 {
        assert_eq!(create(&mut ctl, "three-file-systems", many()).await, made, "an identical re-send");
    }
    // A capability it was not created with is still compared with what it supports.
    expect_code(
        ctl.create_volume(create_req(
            "three-file-systems",
            vec![block_cap(Mode::SingleNodeWriter)],
        ))
        .await,
        Code::AlreadyExists,
    );
}

#[tokio::test]
async fn create_volume_from_sources_and_topology() {
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    use v1::volume_content_source::{SnapshotSource, Type, VolumeSource};
    let from = |t: Type| Some(v1::VolumeContentSource { r#type: Some(t) });
    let missing_snap = v1::CreateVolumeRequest {
        volume_content_source: from(Type::Snapshot(SnapshotSource {
            snapshot_id: "snap-nope".into(),
        })),
        ..create_req("c1", vec![snw()])
    };
    expect_code(ctl.create_volume(missing_snap).await, Code::NotFound);
    let missing_vol = v1::CreateVolumeRequest {
        volume_content_source: from(Type::Volume(VolumeSource {
            volume_id: "vol-nope".into(),
        })),
        ..create_req("c2", vec![snw()])
    };
    expect_code(ctl.create_volume(missing_vol).await, Code::NotFound);

    let src = create(&mut ctl, "src", vec![snw()]).await;
    let snap = ok(ctl
        .create_snapshot(v1::CreateSnapshotRequest {
            source_volume_id: src.volume_id.clone(),
            name: "s".into(),
            ..Default::default()
        })
        .await)
    .snapshot
    .unwrap();
    let source = from(Type::Snapshot(SnapshotSource {
        snapshot_id: snap.snapshot_id.clone(),
    }));
    let restored = ok(ctl
        .create_volume(v1::CreateVolumeRequest {
            volume_content_source: source.clone(),
            ..create_req("restored", vec![snw()])
        })
        .await)
    .volume
    .unwrap();
    assert_eq!(restored.content_source, source);
    assert_eq!(restored.capacity_bytes, snap.size_bytes);
    let too_small = v1::CreateVolumeRequest {
        volume_content_source: source.clone(),
        capacity_range: range(0, 1 << 20),
        ..create_req("small", vec![snw()])
    };
    expect_code(ctl.create_volume(too_small).await, Code::OutOfRange);
    let clone_src = from(Type::Volume(VolumeSource {
        volume_id: src.volume_id.clone(),
    }));
    let clone = ok(ctl
        .create_volume(v1::CreateVolumeRequest {
            volume_content_source: clone_src.clone(),
            ..create_req("clone", vec![snw()])
        })
        .await)
    .volume
    .unwrap();
    assert_eq!(clone.content_source, clone_src);

    // Topology: a preferred segment we serve is chosen; requisite segments we do not serve fail.
    let wanted = v1::TopologyRequirement {
        requisite: vec![],
        preferred: vec![topology(reference::DEFAULT_NODE_ID)],
    };
    let placed = ok(ctl
        .create_volume(v1::CreateVolumeRequest {
            accessibility_requirements: Some(wanted),
            ..create_req("topo", vec![snw()])
        })
        .await)
    .volume
    .unwrap();
    assert_eq!(
        placed.accessible_topology,
        vec![topology(reference::DEFAULT_NODE_ID)]
    );
    let elsewhere = v1::TopologyRequirement {
        requisite: vec![topology("mars")],
        preferred: vec![],
    };
    expect_code(
        ctl.create_volume(v1::CreateVolumeRequest {
            accessibility_requirements: Some(elsewhere),
            ..create_req("mars", vec![snw()])
        })
        .await,
        Code::ResourceExhausted,
    );
    let foreign = ok(ctl
        .get_capacity(v1::GetCapacityRequest {
            accessible_topology: Some(topology("mars")),
            ..Default::default()
        })
        .await);
    assert_eq!(foreign.available_capacity, 0);
    let ours = ok(ctl
        .get_capacity(v1::GetCapacityRequest {
            accessible_topology: Some(topology(reference::DEFAULT_NODE_ID)),
            ..Default::default()
        })
        .await);
    assert!(ours.available_capacity > 0);

    // Without the capabilities, sources are invalid arguments.
    let p = TestPlugin::start(disabled(&["CLONE_VOLUME", "CREATE_DELETE_SNAPSHOT"])).await;
    let mut ctl = p.controller();
    let src = create(&mut ctl, "src", vec![snw()]).await;
    let clone = v1::CreateVolumeRequest {
        volume_content_source: from(Type::Volume(VolumeSource {
            volume_id: src.volume_id,
        })),
        ..create_req("clone", vec![snw()])
    };
    expect_code(ctl.create_volume(clone).await, Code::InvalidArgument);
    let restore = v1::CreateVolumeRequest {
        volume_content_source: from(Type::Snapshot(SnapshotSource {
            snapshot_id: "x".into(),
        })),
        ..create_req("restore", vec![snw()])
    };
    expect_code(ctl.create_volume(restore).await, Code::InvalidArgument);
}

#[tokio::test]
async fn delete_volume_is_idempotent_and_refuses_volumes_in_use() {
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    expect_code(
        ctl.delete_volume(v1::DeleteVolumeRequest::default()).await,
        Code::InvalidArgument,
    );
    ok(ctl
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: "vol-unknown".into(),
            ..Default::default()
        })
        .await);
    let v = create(&mut ctl, "v", vec![snw()]).await;
    ok(ctl
        .controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: v.volume_id.clone(),
            node_id: reference::DEFAULT_NODE_ID.into(),
            volume_capability: Some(snw()),
            ..Default::default()
        })
        .await);
    let del = v1::DeleteVolumeRequest {
        volume_id: v.volume_id.clone(),
        ..Default::default()
    };
    expect_code(
        ctl.delete_volume(del.clone()).await,
        Code::FailedPrecondition,
    );
    ok(ctl
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: v.volume_id.clone(),
            ..Default::default()
        })
        .await);
    let snap = ok(ctl
        .create_snapshot(v1::CreateSnapshotRequest {
            source_volume_id: v.volume_id.clone(),
            name: "keep".into(),
            ..Default::default()
        })
        .await);
    ok(ctl.delete_volume(del.clone()).await);
    ok(ctl.delete_volume(del).await);
    // Snapshots outlive their volume.
    let listed = ok(ctl
        .list_snapshots(v1::ListSnapshotsRequest::default())
        .await);
    assert_eq!(listed.entries.len(), 1);
    assert_eq!(
        listed.entries[0].snapshot.as_ref().unwrap().snapshot_id,
        snap.snapshot.unwrap().snapshot_id
    );
}

// ------------------------------------------------------------------------------------------
// ControllerPublishVolume / ControllerUnpublishVolume
// ------------------------------------------------------------------------------------------

fn publish_req(
    volume: &str,
    cap: v1::VolumeCapability,
    readonly: bool,
) -> v1::ControllerPublishVolumeRequest {
    v1::ControllerPublishVolumeRequest {
        volume_id: volume.into(),
        node_id: reference::DEFAULT_NODE_ID.into(),
        volume_capability: Some(cap),
        readonly,
        ..Default::default()
    }
}

#[tokio::test]
async fn controller_publish_checks_arguments_and_is_idempotent() {
    let p = TestPlugin::start(Config {
        max_volumes_per_node: 2,
        ..Config::default()
    })
    .await;
    let mut ctl = p.controller();
    let v = create(&mut ctl, "v", vec![snw()]).await;
    let good = publish_req(&v.volume_id, snw(), false);
    // Required fields, in order.
    let s = expect_code(
        ctl.controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: String::new(),
            node_id: String::new(),
            ..good.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(s.message().contains("volume_id"), "{s:?}");
    let s = expect_code(
        ctl.controller_publish_volume(v1::ControllerPublishVolumeRequest {
            node_id: String::new(),
            volume_capability: None,
            ..good.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(s.message().contains("node_id"), "{s:?}");
    let s = expect_code(
        ctl.controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_capability: None,
            ..good.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(s.message().contains("volume_capability"), "{s:?}");
    expect_code(
        ctl.controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: "vol-nope".into(),
            ..good.clone()
        })
        .await,
        Code::NotFound,
    );
    expect_code(
        ctl.controller_publish_volume(v1::ControllerPublishVolumeRequest {
            node_id: "node-nope".into(),
            ..good.clone()
        })
        .await,
        Code::NotFound,
    );
    // A capability the volume was not created with.
    expect_code(
        ctl.controller_publish_volume(publish_req(
            &v.volume_id,
            block_cap(Mode::SingleNodeWriter),
            false,
        ))
        .await,
        Code::FailedPrecondition,
    );
    let mut other_ctx = v.volume_context.clone();
    other_ctx.insert("csi-conform.dev/name".into(), "other".into());
    let s = expect_code(
        ctl.controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_context: other_ctx,
            ..good.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(
        s.message().contains("csi-conform.dev/name") && !s.message().contains("other"),
        "{s:?}"
    );

    let first = ok(ctl.controller_publish_volume(good.clone()).await);
    assert_eq!(
        first
            .publish_context
            .get("csi-conform.dev/node")
            .map(String::as_str),
        Some(reference::DEFAULT_NODE_ID)
    );
    let ctx_ok = v1::ControllerPublishVolumeRequest {
        volume_context: v.volume_context.clone(),
        ..good.clone()
    };
    assert_eq!(
        ok(ctl.controller_publish_volume(ctx_ok).await),
        first,
        "idempotent"
    );
    expect_code(
        ctl.controller_publish_volume(publish_req(&v.volume_id, snw(), true))
            .await,
        Code::AlreadyExists,
    );
    expect_code(
        ctl.controller_publish_volume(publish_req(
            &v.volume_id,
            mount_cap(Mode::SingleNodeReaderOnly),
            false,
        ))
        .await,
        Code::AlreadyExists,
    );

    // max_volumes_per_node = 2.
    let w = create(&mut ctl, "w", vec![snw()]).await;
    ok(ctl
        .controller_publish_volume(publish_req(&w.volume_id, snw(), false))
        .await);
    let x = create(&mut ctl, "x", vec![snw()]).await;
    expect_code(
        ctl.controller_publish_volume(publish_req(&x.volume_id, snw(), false))
            .await,
        Code::ResourceExhausted,
    );

    // Unpublish: id required; unknown volume or node, and repeats, are OK; no node = all.
    expect_code(
        ctl.controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest::default())
            .await,
        Code::InvalidArgument,
    );
    ok(ctl
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: "vol-nope".into(),
            node_id: "n".into(),
            ..Default::default()
        })
        .await);
    ok(ctl
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: v.volume_id.clone(),
            node_id: "node-nope".into(),
            ..Default::default()
        })
        .await);
    ok(ctl
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: v.volume_id.clone(),
            ..Default::default()
        })
        .await);
    let got = ok(ctl
        .controller_get_volume(v1::ControllerGetVolumeRequest {
            volume_id: v.volume_id.clone(),
        })
        .await);
    assert!(got.status.unwrap().published_node_ids.is_empty());
    ok(ctl
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: v.volume_id.clone(),
            node_id: reference::DEFAULT_NODE_ID.into(),
            ..Default::default()
        })
        .await);
    ok(ctl
        .controller_publish_volume(publish_req(&x.volume_id, snw(), false))
        .await);

    // readonly needs PUBLISH_READONLY.
    let p = TestPlugin::start(disabled(&["PUBLISH_READONLY"])).await;
    let mut ctl = p.controller();
    let v = create(&mut ctl, "v", vec![snw()]).await;
    expect_code(
        ctl.controller_publish_volume(publish_req(&v.volume_id, snw(), true))
            .await,
        Code::InvalidArgument,
    );
}

// ------------------------------------------------------------------------------------------
// ValidateVolumeCapabilities, ControllerGetVolume, ControllerModifyVolume
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn validate_volume_capabilities_confirms_exactly_what_is_supported() {
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    let req = |id: &str, caps: Vec<v1::VolumeCapability>| v1::ValidateVolumeCapabilitiesRequest {
        volume_id: id.into(),
        volume_capabilities: caps,
        ..Default::default()
    };
    expect_code(
        ctl.validate_volume_capabilities(req("", vec![snw()])).await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.validate_volume_capabilities(req("vol-x", vec![])).await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.validate_volume_capabilities(req("vol-x", vec![snw()]))
            .await,
        Code::NotFound,
    );
    let created = v1::CreateVolumeRequest {
        parameters: map(&[("tier", "gold")]),
        mutable_parameters: map(&[("iops", "100")]),
        ..create_req("v", vec![snw()])
    };
    let v = ok(ctl.create_volume(created).await).volume.unwrap();
    let full = v1::ValidateVolumeCapabilitiesRequest {
        volume_context: v.volume_context.clone(),
        parameters: map(&[("tier", "gold")]),
        mutable_parameters: map(&[("iops", "100")]),
        ..req(
            &v.volume_id,
            vec![snw(), mount_cap(Mode::SingleNodeReaderOnly)],
        )
    };
    let answer = ok(ctl.validate_volume_capabilities(full.clone()).await);
    let confirmed = answer.confirmed.expect("confirmed");
    assert_eq!(confirmed.volume_capabilities, full.volume_capabilities);
    assert_eq!(confirmed.volume_context, full.volume_context);
    assert_eq!(confirmed.parameters, full.parameters);
    assert_eq!(confirmed.mutable_parameters, full.mutable_parameters);

    for (bad, what) in [
        (
            req(&v.volume_id, vec![snw(), block_cap(Mode::SingleNodeWriter)]),
            "block",
        ),
        (
            req(&v.volume_id, vec![mount_cap(Mode::MultiNodeMultiWriter)]),
            "MULTI_NODE_MULTI_WRITER",
        ),
        (
            req(
                &v.volume_id,
                vec![mount_cap_with(Mode::SingleNodeWriter, "xfs", &[], "")],
            ),
            "xfs",
        ),
        (
            v1::ValidateVolumeCapabilitiesRequest {
                volume_context: map(&[("x", "y")]),
                ..req(&v.volume_id, vec![snw()])
            },
            "volume_context",
        ),
        (
            v1::ValidateVolumeCapabilitiesRequest {
                parameters: map(&[("tier", "lead")]),
                ..req(&v.volume_id, vec![snw()])
            },
            "parameters",
        ),
    ] {
        let answer = ok(ctl.validate_volume_capabilities(bad).await);
        assert!(answer.confirmed.is_none(), "{what}: {answer:?}");
        assert!(answer.message.contains(what), "{what}: {}", answer.message);
    }
}

#[tokio::test]
async fn get_modify_and_expand_volumes() {
    // v1.12, whose ControllerGetVolume reports a volume condition.
    let p = TestPlugin::start(Config {
        max_volume_size: 8 << 30,
        spec_version: csi_conform::version::SpecVersion::V1_12,
        ..Config::default()
    })
    .await;
    let mut ctl = p.controller();
    expect_code(
        ctl.controller_get_volume(v1::ControllerGetVolumeRequest::default())
            .await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.controller_get_volume(v1::ControllerGetVolumeRequest {
            volume_id: "vol-x".into(),
        })
        .await,
        Code::NotFound,
    );
    let v = create(&mut ctl, "v", vec![snw()]).await;
    ok(ctl
        .controller_publish_volume(publish_req(&v.volume_id, snw(), false))
        .await);
    let got = ok(ctl
        .controller_get_volume(v1::ControllerGetVolumeRequest {
            volume_id: v.volume_id.clone(),
        })
        .await);
    assert_eq!(got.volume.as_ref(), Some(&v));
    let status = got.status.unwrap();
    assert_eq!(
        status.published_node_ids,
        vec![reference::DEFAULT_NODE_ID.to_owned()]
    );
    assert_eq!(status.volume_condition.map(|c| c.abnormal), Some(false));

    // Modify.
    let modify = |id: &str, params: &[(&str, &str)]| v1::ControllerModifyVolumeRequest {
        volume_id: id.into(),
        mutable_parameters: map(params),
        ..Default::default()
    };
    expect_code(
        ctl.controller_modify_volume(modify("", &[("iops", "1")]))
            .await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.controller_modify_volume(modify(&v.volume_id, &[]))
            .await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.controller_modify_volume(modify("vol-x", &[("iops", "1")]))
            .await,
        Code::NotFound,
    );
    // csi-sanity's "should fail if volume does not exist" sends an empty map: an unknown
    // volume is NOT_FOUND before the missing mutable_parameters are looked at.
    expect_code(ctl.controller_modify_volume(modify("vol-x", &[])).await, Code::NotFound);
    expect_code(
        ctl.controller_modify_volume(modify(&v.volume_id, &[("colour", "red")]))
            .await,
        Code::InvalidArgument,
    );
    ok(ctl
        .controller_modify_volume(modify(&v.volume_id, &[("iops", "500")]))
        .await);
    ok(ctl
        .controller_modify_volume(modify(&v.volume_id, &[("iops", "500")]))
        .await);
    let validated = ok(ctl
        .validate_volume_capabilities(v1::ValidateVolumeCapabilitiesRequest {
            volume_id: v.volume_id.clone(),
            volume_capabilities: vec![snw()],
            mutable_parameters: map(&[("iops", "500")]),
            ..Default::default()
        })
        .await);
    assert!(validated.confirmed.is_some(), "{validated:?}");

    // Expand.
    let expand = |id: &str, req_b: i64, lim_b: i64| v1::ControllerExpandVolumeRequest {
        volume_id: id.into(),
        capacity_range: range(req_b, lim_b),
        ..Default::default()
    };
    expect_code(
        ctl.controller_expand_volume(expand("", 1, 0)).await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.controller_expand_volume(v1::ControllerExpandVolumeRequest {
            volume_id: v.volume_id.clone(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.controller_expand_volume(expand("vol-x", 2 << 30, 0))
            .await,
        Code::NotFound,
    );
    expect_code(
        ctl.controller_expand_volume(expand(&v.volume_id, 9 << 30, 0))
            .await,
        Code::OutOfRange,
    );
    expect_code(
        ctl.controller_expand_volume(expand(&v.volume_id, 0, 1 << 20))
            .await,
        Code::OutOfRange,
    );
    let wrong_cap = v1::ControllerExpandVolumeRequest {
        volume_capability: Some(block_cap(Mode::SingleNodeWriter)),
        ..expand(&v.volume_id, 2 << 30, 0)
    };
    expect_code(
        ctl.controller_expand_volume(wrong_cap).await,
        Code::InvalidArgument,
    );
    let grown = ok(ctl
        .controller_expand_volume(expand(&v.volume_id, 3 << 30, 0))
        .await);
    assert_eq!(grown.capacity_bytes, 3 << 30);
    assert!(
        grown.node_expansion_required,
        "mount volumes need node expansion"
    );
    assert_eq!(
        ok(ctl
            .controller_expand_volume(expand(&v.volume_id, 3 << 30, 0))
            .await),
        grown,
        "idempotent"
    );
    let smaller = ok(ctl
        .controller_expand_volume(expand(&v.volume_id, 1 << 30, 0))
        .await);
    assert_eq!(
        smaller.capacity_bytes,
        3 << 30,
        "already large enough: OK, unchanged"
    );
    let b = create(&mut ctl, "b", vec![block_cap(Mode::SingleNodeWriter)]).await;
    let grown = ok(ctl
        .controller_expand_volume(expand(&b.volume_id, 2 << 30, 0))
        .await);
    assert_eq!(grown.capacity_bytes, 2 << 30);
    assert!(
        !grown.node_expansion_required,
        "block-only volumes need no node expansion"
    );
}

// ------------------------------------------------------------------------------------------
// ListVolumes / ListSnapshots paging
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn list_volumes_pages_survive_deletions_and_reject_foreign_tokens() {
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            create(&mut ctl, &format!("v{i}"), vec![snw()])
                .await
                .volume_id,
        );
    }
    ok(ctl
        .controller_publish_volume(publish_req(&ids[0], snw(), false))
        .await);
    expect_code(
        ctl.list_volumes(v1::ListVolumesRequest {
            max_entries: -1,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.list_volumes(v1::ListVolumesRequest {
            starting_token: "bogus".into(),
            ..Default::default()
        })
        .await,
        Code::Aborted,
    );

    let all = ok(ctl.list_volumes(v1::ListVolumesRequest::default()).await);
    assert_eq!(all.entries.len(), 5);
    assert!(all.next_token.is_empty());
    let status = all.entries[0]
        .status
        .as_ref()
        .expect("status with LIST_VOLUMES_PUBLISHED_NODES");
    assert_eq!(
        status.published_node_ids,
        vec![reference::DEFAULT_NODE_ID.to_owned()]
    );
    assert_eq!(status.volume_condition, None, "CSI v1.13 has no VolumeCondition");

    let page1 = ok(ctl
        .list_volumes(v1::ListVolumesRequest {
            max_entries: 2,
            ..Default::default()
        })
        .await);
    assert_eq!(page1.entries.len(), 2);
    assert!(!page1.next_token.is_empty());
    // Delete the last volume of page 1 and the first of page 2: the token still works.
    ok(ctl
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: ids[0].clone(),
            ..Default::default()
        })
        .await);
    for id in [&ids[1], &ids[2]] {
        ok(ctl
            .delete_volume(v1::DeleteVolumeRequest {
                volume_id: id.clone(),
                ..Default::default()
            })
            .await);
    }
    let page2 = ok(ctl
        .list_volumes(v1::ListVolumesRequest {
            max_entries: 2,
            starting_token: page1.next_token.clone(),
        })
        .await);
    let got: Vec<String> = page2
        .entries
        .iter()
        .map(|e| e.volume.as_ref().unwrap().volume_id.clone())
        .collect();
    assert_eq!(got, vec![ids[3].clone(), ids[4].clone()]);
    assert!(page2.next_token.is_empty());
    let tampered = format!("{}0", page1.next_token);
    expect_code(
        ctl.list_volumes(v1::ListVolumesRequest {
            max_entries: 2,
            starting_token: tampered,
        })
        .await,
        Code::Aborted,
    );
}

// ------------------------------------------------------------------------------------------
// Snapshots
// ------------------------------------------------------------------------------------------

fn snap_req(volume: &str, name: &str) -> v1::CreateSnapshotRequest {
    v1::CreateSnapshotRequest {
        source_volume_id: volume.into(),
        name: name.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn snapshots_are_idempotent_filterable_and_pageable() {
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    let a = create(&mut ctl, "a", vec![snw()]).await.volume_id;
    let b = create(&mut ctl, "b", vec![snw()]).await.volume_id;
    let s = expect_code(
        ctl.create_snapshot(snap_req("", "")).await,
        Code::InvalidArgument,
    );
    assert!(s.message().contains("name"), "name is checked first: {s:?}");
    let s = expect_code(
        ctl.create_snapshot(snap_req("", "s")).await,
        Code::InvalidArgument,
    );
    assert!(s.message().contains("source_volume_id"), "{s:?}");
    expect_code(
        ctl.create_snapshot(snap_req("vol-nope", "s")).await,
        Code::NotFound,
    );

    let s1 = ok(ctl.create_snapshot(snap_req(&a, "s1")).await)
        .snapshot
        .unwrap();
    assert_eq!(s1.source_volume_id, a);
    assert_eq!(s1.size_bytes, reference::GIB);
    assert!(s1.ready_to_use);
    assert!(s1.creation_time.is_some());
    assert!(s1.group_snapshot_id.is_empty());
    assert_eq!(
        ok(ctl.create_snapshot(snap_req(&a, "s1")).await)
            .snapshot
            .unwrap(),
        s1
    );
    expect_code(
        ctl.create_snapshot(snap_req(&b, "s1")).await,
        Code::AlreadyExists,
    );
    let long = "s".repeat(128);
    let s2 = ok(ctl.create_snapshot(snap_req(&b, &long)).await)
        .snapshot
        .unwrap();
    let s3 = ok(ctl.create_snapshot(snap_req(&a, "s3")).await)
        .snapshot
        .unwrap();

    let list = |req: v1::ListSnapshotsRequest| {
        let mut ctl = ctl.clone();
        async move {
            ok(ctl.list_snapshots(req).await)
                .entries
                .into_iter()
                .map(|e| e.snapshot.unwrap().snapshot_id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(v1::ListSnapshotsRequest::default()).await.len(), 3);
    assert_eq!(
        list(v1::ListSnapshotsRequest {
            snapshot_id: s2.snapshot_id.clone(),
            ..Default::default()
        })
        .await,
        vec![s2.snapshot_id.clone()]
    );
    assert_eq!(
        list(v1::ListSnapshotsRequest {
            source_volume_id: a.clone(),
            ..Default::default()
        })
        .await,
        vec![s1.snapshot_id.clone(), s3.snapshot_id.clone()]
    );
    assert!(
        list(v1::ListSnapshotsRequest {
            snapshot_id: "snap-nope".into(),
            ..Default::default()
        })
        .await
        .is_empty()
    );
    assert!(
        list(v1::ListSnapshotsRequest {
            source_volume_id: "vol-nope".into(),
            ..Default::default()
        })
        .await
        .is_empty()
    );
    assert!(
        list(v1::ListSnapshotsRequest {
            snapshot_id: s2.snapshot_id.clone(),
            source_volume_id: a.clone(),
            ..Default::default()
        })
        .await
        .is_empty()
    );

    expect_code(
        ctl.list_snapshots(v1::ListSnapshotsRequest {
            max_entries: -1,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.list_snapshots(v1::ListSnapshotsRequest {
            starting_token: "nope".into(),
            ..Default::default()
        })
        .await,
        Code::Aborted,
    );
    let page1 = ok(ctl
        .list_snapshots(v1::ListSnapshotsRequest {
            max_entries: 1,
            ..Default::default()
        })
        .await);
    assert_eq!(page1.entries.len(), 1);
    ok(ctl
        .delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id: s1.snapshot_id.clone(),
            ..Default::default()
        })
        .await);
    let page2 = ok(ctl
        .list_snapshots(v1::ListSnapshotsRequest {
            max_entries: 5,
            starting_token: page1.next_token,
            ..Default::default()
        })
        .await);
    assert_eq!(page2.entries.len(), 2);

    expect_code(
        ctl.get_snapshot(v1::GetSnapshotRequest::default()).await,
        Code::InvalidArgument,
    );
    expect_code(
        ctl.get_snapshot(v1::GetSnapshotRequest {
            snapshot_id: s1.snapshot_id.clone(),
            ..Default::default()
        })
        .await,
        Code::NotFound,
    );
    assert_eq!(
        ok(ctl
            .get_snapshot(v1::GetSnapshotRequest {
                snapshot_id: s2.snapshot_id.clone(),
                ..Default::default()
            })
            .await)
        .snapshot,
        Some(s2)
    );
    expect_code(
        ctl.delete_snapshot(v1::DeleteSnapshotRequest::default())
            .await,
        Code::InvalidArgument,
    );
    ok(ctl
        .delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id: s1.snapshot_id,
            ..Default::default()
        })
        .await);
}

#[tokio::test]
async fn snapshots_become_ready_after_the_configured_delay() {
    // Three seconds from the snapshot's creation: the restore attempted at once is far inside
    // it; the wait for readiness asks the plugin rather than sleeping.
    let p = TestPlugin::start(Config {
        snapshot_ready_after: Duration::from_secs(3),
        ..Config::default()
    })
    .await;
    let mut ctl = p.controller();
    let v = create(&mut ctl, "v", vec![snw()]).await.volume_id;
    let s = ok(ctl.create_snapshot(snap_req(&v, "s")).await)
        .snapshot
        .unwrap();
    assert!(!s.ready_to_use);
    use v1::volume_content_source::{SnapshotSource, Type};
    let restore = v1::CreateVolumeRequest {
        volume_content_source: Some(v1::VolumeContentSource {
            r#type: Some(Type::Snapshot(SnapshotSource {
                snapshot_id: s.snapshot_id.clone(),
            })),
        }),
        ..create_req("restore", vec![snw()])
    };
    expect_code(
        ctl.create_volume(restore.clone()).await,
        Code::FailedPrecondition,
    );
    let ask = || {
        let mut ctl = ctl.clone();
        let v = v.clone();
        async move { ok(ctl.create_snapshot(snap_req(&v, "s")).await).snapshot.unwrap() }
    };
    let again = until(ask, |s| s.ready_to_use).await;
    assert_eq!(again.creation_time, s.creation_time);
    ok(ctl.create_volume(restore).await);
}

// ------------------------------------------------------------------------------------------
// Group snapshots
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn group_snapshots_cut_members_together() {
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    let mut group = p.group();
    let a = create(&mut ctl, "a", vec![snw()]).await.volume_id;
    let b = create(&mut ctl, "b", vec![snw()]).await.volume_id;
    let c = create(&mut ctl, "c", vec![snw()]).await.volume_id;
    let req = |name: &str, ids: &[&String]| v1::CreateVolumeGroupSnapshotRequest {
        name: name.into(),
        source_volume_ids: ids.iter().map(|s| (*s).clone()).collect(),
        ..Default::default()
    };
    expect_code(
        group.create_volume_group_snapshot(req("", &[&a])).await,
        Code::InvalidArgument,
    );
    expect_code(
        group.create_volume_group_snapshot(req("g", &[])).await,
        Code::InvalidArgument,
    );
    expect_code(
        group
            .create_volume_group_snapshot(req("g", &[&a, &a]))
            .await,
        Code::InvalidArgument,
    );
    let nope = "vol-nope".to_owned();
    expect_code(
        group
            .create_volume_group_snapshot(req("g", &[&a, &nope]))
            .await,
        Code::NotFound,
    );
    let g = ok(group
        .create_volume_group_snapshot(req("g", &[&a, &b]))
        .await)
    .group_snapshot
    .unwrap();
    assert_eq!(g.snapshots.len(), 2);
    assert!(g.ready_to_use && g.creation_time.is_some());
    assert!(
        g.snapshots
            .iter()
            .all(|s| s.group_snapshot_id == g.group_snapshot_id && s.ready_to_use)
    );
    let again = ok(group
        .create_volume_group_snapshot(req("g", &[&b, &a]))
        .await)
    .group_snapshot
    .unwrap();
    assert_eq!(again, g, "idempotent, order does not matter");
    expect_code(
        group
            .create_volume_group_snapshot(req("g", &[&a, &c]))
            .await,
        Code::AlreadyExists,
    );

    let ids: Vec<String> = g.snapshots.iter().map(|s| s.snapshot_id.clone()).collect();
    let get = |id: &str, ids: &[String]| v1::GetVolumeGroupSnapshotRequest {
        group_snapshot_id: id.into(),
        snapshot_ids: ids.to_vec(),
        ..Default::default()
    };
    expect_code(
        group.get_volume_group_snapshot(get("", &ids)).await,
        Code::InvalidArgument,
    );
    expect_code(
        group
            .get_volume_group_snapshot(get(&g.group_snapshot_id, &[]))
            .await,
        Code::InvalidArgument,
    );
    expect_code(
        group
            .get_volume_group_snapshot(get("group-nope", &ids))
            .await,
        Code::NotFound,
    );
    expect_code(
        group
            .get_volume_group_snapshot(get(&g.group_snapshot_id, &ids[..1]))
            .await,
        Code::InvalidArgument,
    );
    assert_eq!(
        ok(group
            .get_volume_group_snapshot(get(&g.group_snapshot_id, &ids))
            .await)
        .group_snapshot,
        Some(g.clone())
    );

    // Members are listed and gettable, but cannot be deleted on their own.
    let member = ok(ctl
        .get_snapshot(v1::GetSnapshotRequest {
            snapshot_id: ids[0].clone(),
            ..Default::default()
        })
        .await)
    .snapshot
    .unwrap();
    assert_eq!(member.group_snapshot_id, g.group_snapshot_id);
    expect_code(
        ctl.delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id: ids[0].clone(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
    );

    let delete = |id: &str, ids: &[String]| v1::DeleteVolumeGroupSnapshotRequest {
        group_snapshot_id: id.into(),
        snapshot_ids: ids.to_vec(),
        ..Default::default()
    };
    expect_code(
        group.delete_volume_group_snapshot(delete("", &ids)).await,
        Code::InvalidArgument,
    );
    expect_code(
        group
            .delete_volume_group_snapshot(delete(&g.group_snapshot_id, &ids[1..]))
            .await,
        Code::InvalidArgument,
    );
    ok(group
        .delete_volume_group_snapshot(delete(&g.group_snapshot_id, &ids))
        .await);
    ok(group
        .delete_volume_group_snapshot(delete(&g.group_snapshot_id, &ids))
        .await);
    ok(group
        .delete_volume_group_snapshot(delete("group-nope", &ids))
        .await);
    assert!(
        ok(ctl
            .list_snapshots(v1::ListSnapshotsRequest::default())
            .await)
        .entries
        .is_empty()
    );
}

// ------------------------------------------------------------------------------------------
// Snapshot metadata
// ------------------------------------------------------------------------------------------

async fn collect<T>(
    stream: Result<tonic::Response<tonic::Streaming<T>>, tonic::Status>,
) -> Result<Vec<T>, tonic::Status> {
    let mut stream = stream?.into_inner();
    let mut out = Vec::new();
    while let Some(m) = stream.message().await? {
        out.push(m);
    }
    Ok(out)
}

#[tokio::test]
async fn snapshot_metadata_reports_allocated_and_changed_extents() {
    use std::os::unix::fs::FileExt;
    let state = tempfile::tempdir().unwrap();
    let p = TestPlugin::start(Config {
        state_dir: Some(state.path().to_path_buf()),
        ..Config::default()
    })
    .await;
    let mut ctl = p.controller();
    let mut md = p.metadata();
    let v = create(&mut ctl, "blk", vec![block_cap(Mode::SingleNodeWriter)]).await;
    let block = state
        .path()
        .join("volumes")
        .join(&v.volume_id)
        .join("block");
    let write = |offset: u64| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&block)
            .unwrap();
        f.write_all_at(&[0xab; 4096], offset).unwrap();
    };
    write(1 << 20);
    let s1 = ok(ctl.create_snapshot(snap_req(&v.volume_id, "s1")).await)
        .snapshot
        .unwrap()
        .snapshot_id;
    write(3 << 20);
    let s2 = ok(ctl.create_snapshot(snap_req(&v.volume_id, "s2")).await)
        .snapshot
        .unwrap()
        .snapshot_id;

    let alloc = |id: &str, offset: i64, max: i32| v1::GetMetadataAllocatedRequest {
        snapshot_id: id.into(),
        starting_offset: offset,
        max_results: max,
        ..Default::default()
    };
    let msgs = collect(md.get_metadata_allocated(alloc(&s2, 0, 1)).await)
        .await
        .unwrap();
    assert!(msgs.len() >= 2, "max_results 1 splits the stream: {msgs:?}");
    let extents: Vec<&v1::BlockMetadata> =
        msgs.iter().flat_map(|m| m.block_metadata.iter()).collect();
    assert!(msgs.iter().all(|m| m.block_metadata.len() <= 1
        && m.volume_capacity_bytes == reference::GIB
        && m.block_metadata_type == v1::BlockMetadataType::VariableLength as i32));
    let covers = |at: i64| {
        extents
            .iter()
            .any(|e| e.byte_offset <= at && at + 4096 <= e.byte_offset + e.size_bytes)
    };
    assert!(covers(1 << 20) && covers(3 << 20), "{extents:?}");
    assert!(
        extents
            .windows(2)
            .all(|w| w[0].byte_offset + w[0].size_bytes <= w[1].byte_offset)
    );
    let later = collect(md.get_metadata_allocated(alloc(&s2, 2 << 20, 0)).await)
        .await
        .unwrap();
    assert!(
        later
            .iter()
            .flat_map(|m| &m.block_metadata)
            .all(|e| e.byte_offset + e.size_bytes > 2 << 20)
    );

    let delta = |base: &str, target: &str, offset: i64| v1::GetMetadataDeltaRequest {
        base_snapshot_id: base.into(),
        target_snapshot_id: target.into(),
        starting_offset: offset,
        ..Default::default()
    };
    let changed = collect(md.get_metadata_delta(delta(&s1, &s2, 0)).await)
        .await
        .unwrap();
    let changed: Vec<(i64, i64)> = changed
        .iter()
        .flat_map(|m| &m.block_metadata)
        .map(|e| (e.byte_offset, e.size_bytes))
        .collect();
    assert_eq!(changed, vec![(3 << 20, 4096)]);

    fn err<T: std::fmt::Debug>(r: Result<Vec<T>, tonic::Status>) -> Code {
        r.expect_err("an error").code()
    }
    assert_eq!(
        err(collect(md.get_metadata_allocated(alloc("", 0, 0)).await).await),
        Code::InvalidArgument
    );
    assert_eq!(
        err(collect(md.get_metadata_allocated(alloc("snap-nope", 0, 0)).await).await),
        Code::NotFound
    );
    assert_eq!(
        err(collect(
            md.get_metadata_allocated(alloc(&s1, reference::GIB + 1, 0))
                .await
        )
        .await),
        Code::OutOfRange
    );
    // A negative offset is an invalid value; OUT_OF_RANGE is for one past the volume.
    assert_eq!(
        err(collect(md.get_metadata_allocated(alloc(&s1, -1, 0)).await).await),
        Code::InvalidArgument
    );
    assert_eq!(
        err(collect(md.get_metadata_delta(delta("", &s2, 0)).await).await),
        Code::InvalidArgument
    );
    assert_eq!(
        err(collect(md.get_metadata_delta(delta(&s1, "snap-nope", 0)).await).await),
        Code::NotFound
    );
    assert_eq!(
        err(collect(md.get_metadata_delta(delta(&s2, &s1, 0)).await).await),
        Code::InvalidArgument
    );
    assert_eq!(
        err(collect(
            md.get_metadata_delta(delta(&s1, &s2, reference::GIB + 1))
                .await
        )
        .await),
        Code::OutOfRange
    );
    let m = create(&mut ctl, "fs", vec![snw()]).await;
    let ms = ok(ctl.create_snapshot(snap_req(&m.volume_id, "fs-snap")).await)
        .snapshot
        .unwrap()
        .snapshot_id;
    assert_eq!(
        err(collect(md.get_metadata_allocated(alloc(&ms, 0, 0)).await).await),
        Code::InvalidArgument
    );
}

// ------------------------------------------------------------------------------------------
// Node
// ------------------------------------------------------------------------------------------

fn stage_req(
    p: &TestPlugin,
    volume: &str,
    cap: v1::VolumeCapability,
) -> v1::NodeStageVolumeRequest {
    v1::NodeStageVolumeRequest {
        volume_id: volume.into(),
        staging_target_path: p.path("staging"),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

fn node_publish_req(
    p: &TestPlugin,
    volume: &str,
    target: &str,
    cap: v1::VolumeCapability,
) -> v1::NodePublishVolumeRequest {
    v1::NodePublishVolumeRequest {
        volume_id: volume.into(),
        staging_target_path: p.path("staging"),
        target_path: p.path(target),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

#[tokio::test]
async fn node_stage_and_publish_follow_the_spec_tables() {
    // v1.12, whose NodeGetVolumeStats reports a volume condition.
    let p = TestPlugin::start(Config { spec_version: csi_conform::version::SpecVersion::V1_12, ..Config::default() }).await;
    let mut ctl = p.controller();
    let mut node = p.node();
    let v = create(&mut ctl, "v", vec![snw()]).await.volume_id;

    // NodeStageVolume: required fields in order, unknown volume, missing ControllerPublish.
    let good = stage_req(&p, &v, snw());
    let s = expect_code(
        node.node_stage_volume(v1::NodeStageVolumeRequest {
            volume_id: String::new(),
            staging_target_path: String::new(),
            ..good.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(s.message().contains("volume_id"), "{s:?}");
    let s = expect_code(
        node.node_stage_volume(v1::NodeStageVolumeRequest {
            staging_target_path: String::new(),
            volume_capability: None,
            ..good.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(s.message().contains("staging_target_path"), "{s:?}");
    let s = expect_code(
        node.node_stage_volume(v1::NodeStageVolumeRequest {
            volume_capability: None,
            ..good.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(s.message().contains("volume_capability"), "{s:?}");
    expect_code(
        node.node_stage_volume(stage_req(&p, "vol-nope", snw()))
            .await,
        Code::NotFound,
    );
    expect_code(
        node.node_stage_volume(good.clone()).await,
        Code::FailedPrecondition,
    );
    let published = ok(ctl
        .controller_publish_volume(publish_req(&v, snw(), false))
        .await);
    let wrong_ctx = v1::NodeStageVolumeRequest {
        publish_context: map(&[("csi-conform.dev/node", "elsewhere")]),
        ..good.clone()
    };
    expect_code(
        node.node_stage_volume(wrong_ctx).await,
        Code::InvalidArgument,
    );
    expect_code(
        node.node_stage_volume(stage_req(&p, &v, block_cap(Mode::SingleNodeWriter)))
            .await,
        Code::FailedPrecondition,
    );
    let good = v1::NodeStageVolumeRequest {
        publish_context: published.publish_context.clone(),
        ..good
    };
    ok(node.node_stage_volume(good.clone()).await);
    ok(node.node_stage_volume(good.clone()).await);
    expect_code(
        node.node_stage_volume(stage_req(&p, &v, mount_cap(Mode::SingleNodeReaderOnly)))
            .await,
        Code::AlreadyExists,
    );

    // NodePublishVolume.
    let pubreq = node_publish_req(&p, &v, "target", snw());
    let s = expect_code(
        node.node_publish_volume(v1::NodePublishVolumeRequest {
            volume_id: String::new(),
            target_path: String::new(),
            ..pubreq.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(s.message().contains("volume_id"), "{s:?}");
    let s = expect_code(
        node.node_publish_volume(v1::NodePublishVolumeRequest {
            target_path: String::new(),
            volume_capability: None,
            ..pubreq.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(s.message().contains("target_path"), "{s:?}");
    let s = expect_code(
        node.node_publish_volume(v1::NodePublishVolumeRequest {
            volume_capability: None,
            ..pubreq.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(s.message().contains("volume_capability"), "{s:?}");
    expect_code(
        node.node_publish_volume(node_publish_req(&p, "vol-nope", "target", snw()))
            .await,
        Code::NotFound,
    );
    expect_code(
        node.node_publish_volume(v1::NodePublishVolumeRequest {
            staging_target_path: String::new(),
            ..pubreq.clone()
        })
        .await,
        Code::FailedPrecondition,
    );
    expect_code(
        node.node_publish_volume(v1::NodePublishVolumeRequest {
            staging_target_path: p.path("elsewhere"),
            ..pubreq.clone()
        })
        .await,
        Code::FailedPrecondition,
    );
    expect_code(
        node.node_publish_volume(node_publish_req(
            &p,
            &v,
            "target",
            block_cap(Mode::SingleNodeWriter),
        ))
        .await,
        Code::FailedPrecondition,
    );
    expect_code(
        node.node_publish_volume(v1::NodePublishVolumeRequest {
            target_path: p.path("no/such/parent/target"),
            ..pubreq.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    ok(node.node_publish_volume(pubreq.clone()).await);
    assert!(
        std::path::Path::new(&pubreq.target_path).is_dir(),
        "the plugin creates the target"
    );
    ok(node.node_publish_volume(pubreq.clone()).await);
    expect_code(
        node.node_publish_volume(v1::NodePublishVolumeRequest {
            readonly: true,
            ..pubreq.clone()
        })
        .await,
        Code::AlreadyExists,
    );
    // SINGLE_NODE_WRITER allows one target per node.
    expect_code(
        node.node_publish_volume(node_publish_req(&p, &v, "target2", snw()))
            .await,
        Code::FailedPrecondition,
    );

    // Stats and node expansion.
    let stats = |path: &str| v1::NodeGetVolumeStatsRequest {
        volume_id: v.clone(),
        volume_path: path.into(),
        ..Default::default()
    };
    expect_code(
        node.node_get_volume_stats(v1::NodeGetVolumeStatsRequest {
            volume_id: String::new(),
            ..stats(&pubreq.target_path)
        })
        .await,
        Code::InvalidArgument,
    );
    expect_code(
        node.node_get_volume_stats(stats("")).await,
        Code::InvalidArgument,
    );
    expect_code(
        node.node_get_volume_stats(v1::NodeGetVolumeStatsRequest {
            volume_id: "vol-nope".into(),
            ..stats(&pubreq.target_path)
        })
        .await,
        Code::NotFound,
    );
    expect_code(
        node.node_get_volume_stats(stats(&p.path("not-here"))).await,
        Code::NotFound,
    );
    // csi-sanity's relative "some/path" names no volume: NOT_FOUND, for a known volume and
    // for an unknown one.
    expect_code(node.node_get_volume_stats(stats("some/path")).await, Code::NotFound);
    expect_code(
        node.node_get_volume_stats(v1::NodeGetVolumeStatsRequest { volume_id: "vol-nope".into(), ..stats("some/path") }).await,
        Code::NotFound,
    );
    let st = ok(node.node_get_volume_stats(stats(&pubreq.target_path)).await);
    use v1::volume_usage::Unit;
    let bytes = st
        .usage
        .iter()
        .find(|u| u.unit == Unit::Bytes as i32)
        .expect("BYTES usage");
    assert_eq!(bytes.total, reference::GIB);
    assert_eq!(bytes.used + bytes.available, bytes.total);
    let inodes = st
        .usage
        .iter()
        .find(|u| u.unit == Unit::Inodes as i32)
        .expect("INODES usage");
    assert!(inodes.total > 0 && inodes.used >= 0);
    assert_eq!(st.volume_condition.map(|c| c.abnormal), Some(false));
    ok(node.node_get_volume_stats(stats(&p.path("staging"))).await);
    let expand = |path: &str, req_b: i64| v1::NodeExpandVolumeRequest {
        volume_id: v.clone(),
        volume_path: path.into(),
        capacity_range: range(req_b, 0),
        ..Default::default()
    };
    expect_code(
        node.node_expand_volume(v1::NodeExpandVolumeRequest {
            volume_id: String::new(),
            ..expand(&pubreq.target_path, 0)
        })
        .await,
        Code::InvalidArgument,
    );
    expect_code(
        node.node_expand_volume(expand("", 0)).await,
        Code::InvalidArgument,
    );
    expect_code(
        node.node_expand_volume(v1::NodeExpandVolumeRequest {
            volume_id: "vol-nope".into(),
            ..expand(&pubreq.target_path, 0)
        })
        .await,
        Code::NotFound,
    );
    expect_code(
        node.node_expand_volume(v1::NodeExpandVolumeRequest { volume_id: "vol-nope".into(), ..expand("some/path", 0) }).await,
        Code::NotFound,
    );
    expect_code(node.node_expand_volume(expand("some/path", 0)).await, Code::NotFound);
    expect_code(
        node.node_expand_volume(expand(&pubreq.target_path, 2 << 30))
            .await,
        Code::OutOfRange,
    );
    ok(ctl
        .controller_expand_volume(v1::ControllerExpandVolumeRequest {
            volume_id: v.clone(),
            capacity_range: range(2 << 30, 0),
            ..Default::default()
        })
        .await);
    assert_eq!(
        ok(node
            .node_expand_volume(expand(&pubreq.target_path, 2 << 30))
            .await)
        .capacity_bytes,
        2 << 30
    );
    assert_eq!(
        ok(node.node_expand_volume(expand(&p.path("staging"), 0)).await).capacity_bytes,
        2 << 30
    );

    // Teardown order is enforced, and every step is idempotent.
    let unstage = v1::NodeUnstageVolumeRequest {
        volume_id: v.clone(),
        staging_target_path: p.path("staging"),
    };
    expect_code(
        node.node_unstage_volume(unstage.clone()).await,
        Code::FailedPrecondition,
    );
    expect_code(
        ctl.delete_volume(v1::DeleteVolumeRequest {
            volume_id: v.clone(),
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
    );
    let unpublish = v1::NodeUnpublishVolumeRequest {
        volume_id: v.clone(),
        target_path: pubreq.target_path.clone(),
    };
    expect_code(
        node.node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: String::new(),
            ..unpublish.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    expect_code(
        node.node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            target_path: String::new(),
            ..unpublish.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    ok(node.node_unpublish_volume(unpublish.clone()).await);
    assert!(
        !std::path::Path::new(&pubreq.target_path).exists(),
        "the target path is removed"
    );
    ok(node.node_unpublish_volume(unpublish.clone()).await);
    expect_code(
        node.node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: "vol-nope".into(),
            ..unpublish
        })
        .await,
        Code::NotFound,
    );
    expect_code(
        node.node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: String::new(),
            ..unstage.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    expect_code(
        node.node_unstage_volume(v1::NodeUnstageVolumeRequest {
            staging_target_path: String::new(),
            ..unstage.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    ok(node.node_unstage_volume(unstage.clone()).await);
    ok(node.node_unstage_volume(unstage.clone()).await);
    expect_code(
        node.node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: "vol-nope".into(),
            ..unstage
        })
        .await,
        Code::NotFound,
    );
    ok(ctl
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: v.clone(),
            ..Default::default()
        })
        .await);
    ok(ctl
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: v,
            ..Default::default()
        })
        .await);
}

#[tokio::test]
async fn node_publish_access_modes_and_mount_groups() {
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    let mut node = p.node();
    // MULTI_NODE_MULTI_WRITER: several targets on one node, same capability only.
    let mnmw = mount_cap(Mode::MultiNodeMultiWriter);
    let v = create(&mut ctl, "shared", vec![mnmw.clone()])
        .await
        .volume_id;
    ok(ctl
        .controller_publish_volume(publish_req(&v, mnmw.clone(), false))
        .await);
    ok(node
        .node_stage_volume(stage_req(&p, &v, mnmw.clone()))
        .await);
    ok(node
        .node_publish_volume(node_publish_req(&p, &v, "t1", mnmw.clone()))
        .await);
    ok(node
        .node_publish_volume(v1::NodePublishVolumeRequest {
            readonly: true,
            ..node_publish_req(&p, &v, "t2", mnmw.clone())
        })
        .await);
    // A second target with a different capability is refused (spec: FAILED_PRECONDITION).
    let grouped = mount_cap_with(
        Mode::MultiNodeMultiWriter,
        "",
        &["noatime", "nodev"],
        "4242",
    );
    expect_code(
        node.node_publish_volume(node_publish_req(&p, &v, "t3", grouped.clone()))
            .await,
        Code::FailedPrecondition,
    );
    expect_code(
        node.node_publish_volume(node_publish_req(
            &p,
            &v,
            "t3",
            mount_cap(Mode::MultiNodeReaderOnly),
        ))
        .await,
        Code::FailedPrecondition,
    );
    for t in ["t1", "t2"] {
        ok(node
            .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
                volume_id: v.clone(),
                target_path: p.path(t),
            })
            .await);
    }
    // volume_mount_group with a numeric gid owns the published directory.
    ok(node
        .node_publish_volume(node_publish_req(&p, &v, "t4", grouped.clone()))
        .await);
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(p.path("t4")).unwrap().gid(), 4242);
    }
    ok(node
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: v.clone(),
            target_path: p.path("t4"),
        })
        .await);
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: v.clone(),
            staging_target_path: p.path("staging"),
        })
        .await);

    // SINGLE_NODE_SINGLE_WRITER: one target; SINGLE_NODE_MULTI_WRITER: several.
    for (mode, second) in [
        (Mode::SingleNodeSingleWriter, false),
        (Mode::SingleNodeMultiWriter, true),
    ] {
        let cap = mount_cap(mode);
        let v = create(&mut ctl, mode.as_str_name(), vec![cap.clone()])
            .await
            .volume_id;
        ok(ctl
            .controller_publish_volume(publish_req(&v, cap.clone(), false))
            .await);
        let stage = v1::NodeStageVolumeRequest {
            staging_target_path: p.path(&format!("stage-{}", mode as i32)),
            ..stage_req(&p, &v, cap.clone())
        };
        ok(node.node_stage_volume(stage.clone()).await);
        let publish = |t: &str| v1::NodePublishVolumeRequest {
            staging_target_path: stage.staging_target_path.clone(),
            ..node_publish_req(&p, &v, t, cap.clone())
        };
        let targets = [format!("a-{}", mode as i32), format!("b-{}", mode as i32)];
        ok(node.node_publish_volume(publish(&targets[0])).await);
        let r = node.node_publish_volume(publish(&targets[1])).await;
        if second {
            ok(r);
        } else {
            expect_code(r, Code::FailedPrecondition);
        }
        for t in &targets {
            ok(node
                .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
                    volume_id: v.clone(),
                    target_path: p.path(t),
                })
                .await);
        }
        ok(node
            .node_unstage_volume(v1::NodeUnstageVolumeRequest {
                volume_id: v.clone(),
                staging_target_path: stage.staging_target_path.clone(),
            })
            .await);
    }
    assert!(
        csi_conform::mounts::mounts_under(p.dir.path()).is_empty(),
        "no mount left behind"
    );

    // Without VOLUME_MOUNT_GROUP a mount group is an invalid argument.
    let p = TestPlugin::start(disabled(&[
        "VOLUME_MOUNT_GROUP",
        "PUBLISH_UNPUBLISH_VOLUME",
    ]))
    .await;
    let mut ctl = p.controller();
    let mut node = p.node();
    let v = create(&mut ctl, "v", vec![snw()]).await.volume_id;
    let grouped = mount_cap_with(Mode::SingleNodeWriter, "", &[], "4242");
    expect_code(
        node.node_stage_volume(stage_req(&p, &v, grouped)).await,
        Code::InvalidArgument,
    );
    // Without PUBLISH_UNPUBLISH_VOLUME no ControllerPublish is needed (and it is unimplemented).
    ok(node.node_stage_volume(stage_req(&p, &v, snw())).await);
    expect_code(
        ctl.controller_publish_volume(publish_req(&v, snw(), false))
            .await,
        Code::Unimplemented,
    );
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: v,
            staging_target_path: p.path("staging"),
        })
        .await);
}

#[tokio::test]
async fn block_volumes_publish_as_files() {
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    let mut node = p.node();
    let cap = block_cap(Mode::SingleNodeWriter);
    let v = create(&mut ctl, "blk", vec![cap.clone()]).await;
    assert_eq!(
        v.volume_context
            .get("csi-conform.dev/fs")
            .map(String::as_str),
        Some("block")
    );
    let ctx = ok(ctl
        .controller_publish_volume(publish_req(&v.volume_id, cap.clone(), false))
        .await)
    .publish_context;
    ok(node
        .node_stage_volume(v1::NodeStageVolumeRequest {
            publish_context: ctx.clone(),
            ..stage_req(&p, &v.volume_id, cap.clone())
        })
        .await);
    expect_code(
        node.node_publish_volume(node_publish_req(&p, &v.volume_id, "dev", snw()))
            .await,
        Code::FailedPrecondition,
    );
    ok(node
        .node_publish_volume(v1::NodePublishVolumeRequest {
            publish_context: ctx,
            ..node_publish_req(&p, &v.volume_id, "dev", cap.clone())
        })
        .await);
    assert!(std::path::Path::new(&p.path("dev")).is_file());
    let st = ok(node
        .node_get_volume_stats(v1::NodeGetVolumeStatsRequest {
            volume_id: v.volume_id.clone(),
            volume_path: p.path("dev"),
            ..Default::default()
        })
        .await);
    assert_eq!(st.usage.len(), 1);
    assert_eq!(st.usage[0].total, reference::GIB);
    ok(node
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: v.volume_id.clone(),
            target_path: p.path("dev"),
        })
        .await);
    assert!(!std::path::Path::new(&p.path("dev")).exists());
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: v.volume_id,
            staging_target_path: p.path("staging"),
        })
        .await);
}

// ------------------------------------------------------------------------------------------
// Modes and disabled capabilities
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn node_only_plugins_serve_static_volumes_and_no_controller() {
    let p = TestPlugin::start(Config {
        mode: PluginMode::NodeOnly,
        ..Config::default()
    })
    .await;
    let caps = ok(p
        .identity()
        .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
        .await);
    use plugin_capability::{Type, service::Type as S};
    assert!(!caps.capabilities.iter().any(
        |c| matches!(&c.r#type, Some(Type::Service(s)) if s.r#type == S::ControllerService as i32)
    ));
    expect_code(
        p.controller()
            .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
            .await,
        Code::Unimplemented,
    );
    expect_code(
        p.controller()
            .create_volume(create_req("v", vec![snw()]))
            .await,
        Code::Unimplemented,
    );
    expect_code(
        p.group()
            .group_controller_get_capabilities(v1::GroupControllerGetCapabilitiesRequest {})
            .await,
        Code::Unimplemented,
    );
    // Any volume id is statically provisioned: stage, publish, tear down.
    let mut node = p.node();
    ok(node
        .node_stage_volume(stage_req(&p, "static-1", snw()))
        .await);
    ok(node
        .node_publish_volume(node_publish_req(&p, "static-1", "t", snw()))
        .await);
    ok(node
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: "static-1".into(),
            target_path: p.path("t"),
        })
        .await);
    ok(node
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: "static-2".into(),
            target_path: p.path("t"),
        })
        .await);
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: "static-1".into(),
            staging_target_path: p.path("staging"),
        })
        .await);
}

#[tokio::test]
async fn node_only_plugins_take_pre_provisioned_volumes_from_their_context() {
    let p = TestPlugin::start(Config { mode: PluginMode::NodeOnly, require_context: true, ..Config::default() }).await;
    let mut node = p.node();
    let with = |context: &[(&str, &str)], cap: v1::VolumeCapability| v1::NodeStageVolumeRequest {
        volume_context: map(context),
        ..stage_req(&p, "pv-1", cap)
    };
    // --require-context: an id it never made, with no context, is refused.
    let refused = code_of(node.node_stage_volume(stage_req(&p, "pv-1", snw())).await);
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(refused.message().contains("volume_context is missing"), "{}", refused.message());
    // Bad contexts name what is wrong.
    expect_code(node.node_stage_volume(with(&[("path", "relative/dir")], snw())).await, Code::InvalidArgument);
    expect_code(node.node_stage_volume(with(&[("path", "/nonexistent/csi-conform/dir")], snw())).await, Code::NotFound);
    expect_code(node.node_stage_volume(with(&[("size", "lots")], snw())).await, Code::InvalidArgument);
    // A directory volume has no block access; it is the directory, and stats see its file.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kept.txt"), "x".repeat(5000)).unwrap();
    let path = dir.path().display().to_string();
    expect_code(
        node.node_stage_volume(with(&[("path", &path)], block_cap(Mode::SingleNodeWriter))).await,
        Code::FailedPrecondition,
    );
    ok(node.node_stage_volume(with(&[("path", &path)], snw())).await);
    let publish = v1::NodePublishVolumeRequest { volume_context: map(&[("path", &path)]), ..node_publish_req(&p, "pv-1", "t", snw()) };
    ok(node.node_publish_volume(publish).await);
    let stats = ok(node
        .node_get_volume_stats(v1::NodeGetVolumeStatsRequest {
            volume_id: "pv-1".into(),
            volume_path: p.path("t"),
            staging_target_path: String::new(),
        })
        .await);
    assert!(stats.usage[0].used >= 5000, "{stats:?}");
    // Later calls without the context are refused too.
    expect_code(node.node_publish_volume(node_publish_req(&p, "pv-1", "t2", snw())).await, Code::FailedPrecondition);
    ok(node.node_unpublish_volume(v1::NodeUnpublishVolumeRequest { volume_id: "pv-1".into(), target_path: p.path("t") }).await);
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest { volume_id: "pv-1".into(), staging_target_path: p.path("staging") })
        .await);
    assert_eq!(std::fs::read_to_string(dir.path().join("kept.txt")).unwrap(), "x".repeat(5000), "the directory is left as it was");
    // A sized one gets a fresh backing, block access included.
    let sized = v1::NodeStageVolumeRequest { volume_id: "pv-2".into(), ..with(&[("size", "1Mi")], block_cap(Mode::SingleNodeWriter)) };
    ok(node.node_stage_volume(sized).await);
}

#[tokio::test]
async fn a_controller_plugin_publishes_a_pre_provisioned_volume_and_wants_its_publish_context_back() {
    let p = TestPlugin::start(Config { require_context: true, ..Config::default() }).await;
    let context = map(&[("size", "1Mi")]);
    let node_id = ok(p.node().node_get_info(v1::NodeGetInfoRequest {}).await).node_id;
    let publish = |context: HashMap<String, String>| v1::ControllerPublishVolumeRequest {
        volume_id: "pv-ctrl".into(),
        node_id: node_id.clone(),
        volume_capability: Some(snw()),
        volume_context: context,
        ..Default::default()
    };
    expect_code(p.controller().controller_publish_volume(publish(HashMap::new())).await, Code::NotFound);
    let published = ok(p.controller().controller_publish_volume(publish(context.clone())).await);
    assert!(!published.publish_context.is_empty());
    let stage = |publish_context: HashMap<String, String>| v1::NodeStageVolumeRequest {
        volume_context: context.clone(),
        publish_context,
        ..stage_req(&p, "pv-ctrl", snw())
    };
    expect_code(p.node().node_stage_volume(stage(HashMap::new())).await, Code::FailedPrecondition);
    ok(p.node().node_stage_volume(stage(published.publish_context.clone())).await);
}

#[tokio::test]
async fn controller_only_plugins_serve_no_node() {
    let p = TestPlugin::start(Config {
        mode: PluginMode::ControllerOnly,
        ..Config::default()
    })
    .await;
    expect_code(
        p.node().node_get_info(v1::NodeGetInfoRequest {}).await,
        Code::Unimplemented,
    );
    ok(p.controller()
        .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
        .await);
    ok(p.group()
        .group_controller_get_capabilities(v1::GroupControllerGetCapabilitiesRequest {})
        .await);
    ok(p.identity().probe(v1::ProbeRequest {}).await);
}

#[tokio::test]
async fn disabled_capabilities_answer_unimplemented_and_disappear() {
    let p = TestPlugin::start(disabled(&[
        "CREATE_DELETE_VOLUME",
        "LIST_SNAPSHOTS",
        "GET_SNAPSHOT",
        "node:EXPAND_VOLUME",
        "STAGE_UNSTAGE_VOLUME",
        "GROUP_CONTROLLER_SERVICE",
        "SNAPSHOT_METADATA_SERVICE",
        "GET_VOLUME_STATS",
        "node:VOLUME_CONDITION",
    ]))
    .await;
    let mut ctl = p.controller();
    let s = expect_code(
        ctl.create_volume(create_req("v", vec![snw()])).await,
        Code::Unimplemented,
    );
    assert!(s.message().contains("CREATE_DELETE_VOLUME"), "{s:?}");
    expect_code(
        ctl.delete_volume(v1::DeleteVolumeRequest {
            volume_id: "x".into(),
            ..Default::default()
        })
        .await,
        Code::Unimplemented,
    );
    expect_code(
        ctl.list_snapshots(v1::ListSnapshotsRequest::default())
            .await,
        Code::Unimplemented,
    );
    expect_code(
        ctl.get_snapshot(v1::GetSnapshotRequest {
            snapshot_id: "x".into(),
            ..Default::default()
        })
        .await,
        Code::Unimplemented,
    );
    let caps = ok(ctl
        .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
        .await);
    let has = |t: ControllerRpc| {
        caps.capabilities.iter().any(|c| matches!(&c.r#type, Some(v1::controller_service_capability::Type::Rpc(r)) if r.r#type == t as i32))
    };
    assert!(!has(ControllerRpc::CreateDeleteVolume) && has(ControllerRpc::ExpandVolume));
    let mut node = p.node();
    let ncaps = ok(node
        .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
        .await);
    let nhas = |t: NodeRpc| {
        ncaps.capabilities.iter().any(|c| matches!(&c.r#type, Some(v1::node_service_capability::Type::Rpc(r)) if r.r#type == t as i32))
    };
    assert!(
        !nhas(NodeRpc::ExpandVolume)
            && !nhas(NodeRpc::StageUnstageVolume)
            && nhas(NodeRpc::SingleNodeMultiWriter)
    );
    expect_code(
        node.node_stage_volume(stage_req(&p, "v", snw())).await,
        Code::Unimplemented,
    );
    expect_code(
        node.node_expand_volume(v1::NodeExpandVolumeRequest {
            volume_id: "v".into(),
            volume_path: "/x".into(),
            ..Default::default()
        })
        .await,
        Code::Unimplemented,
    );
    expect_code(
        node.node_get_volume_stats(v1::NodeGetVolumeStatsRequest {
            volume_id: "v".into(),
            volume_path: "/x".into(),
            ..Default::default()
        })
        .await,
        Code::Unimplemented,
    );
    expect_code(
        p.group()
            .group_controller_get_capabilities(v1::GroupControllerGetCapabilitiesRequest {})
            .await,
        Code::Unimplemented,
    );
    let r = collect(
        p.metadata()
            .get_metadata_allocated(v1::GetMetadataAllocatedRequest {
                snapshot_id: "s".into(),
                ..Default::default()
            })
            .await,
    )
    .await;
    assert_eq!(r.expect_err("unimplemented").code(), Code::Unimplemented);
    let caps = ok(p
        .identity()
        .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
        .await);
    assert_eq!(
        caps.capabilities.len(),
        4,
        "CONTROLLER_SERVICE, VOLUME_ACCESSIBILITY_CONSTRAINTS, SNAPSHOT_ACCESSIBILITY_CONSTRAINTS, ONLINE: {caps:?}"
    );
}

#[tokio::test]
async fn without_stage_unstage_publish_uses_the_volume_directly() {
    let p = TestPlugin::start(disabled(&["STAGE_UNSTAGE_VOLUME"])).await;
    let mut ctl = p.controller();
    let mut node = p.node();
    let v = create(&mut ctl, "v", vec![snw()]).await.volume_id;
    let ctx = ok(ctl
        .controller_publish_volume(publish_req(&v, snw(), false))
        .await)
    .publish_context;
    let req = |target: &str| v1::NodePublishVolumeRequest {
        staging_target_path: String::new(),
        publish_context: ctx.clone(),
        ..node_publish_req(&p, &v, target, snw())
    };
    let target = std::path::PathBuf::from(p.path("t"));
    ok(node.node_publish_volume(req("t")).await);
    ok(node.node_publish_volume(req("t")).await);
    assert!(target.is_dir(), "the plugin made the target");
    let unpublish = |target: &str| v1::NodeUnpublishVolumeRequest { volume_id: v.clone(), target_path: p.path(target) };
    if !crate::support::can_mount("without_stage_unstage_publish_uses_the_volume_directly (the volume's content)", "the reference plugin mounts") {
        ok(node.node_unpublish_volume(unpublish("t")).await);
        assert!(!target.exists(), "unpublish removes the target");
        return;
    }
    // The target is the volume itself, mounted once (the repeat mounts nothing more): what is
    // written there is in the volume, and shows at the next target it is published at.
    let real = std::fs::canonicalize(&target).unwrap();
    let mounted: Vec<_> = csi_conform::mounts::mounts_under(&target).into_iter().filter(|m| m.mount_point == real).collect();
    assert_eq!(mounted.len(), 1, "{mounted:?}");
    std::fs::write(target.join("kept"), b"in the volume").unwrap();
    ok(node.node_unpublish_volume(unpublish("t")).await);
    assert!(!target.exists(), "unpublish removes the target");
    ok(node.node_publish_volume(req("t2")).await);
    assert_eq!(std::fs::read(std::path::Path::new(&p.path("t2")).join("kept")).unwrap(), b"in the volume");
    ok(node.node_unpublish_volume(unpublish("t2")).await);
}

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: reference::Args,
}

#[test]
fn command_line_arguments_are_validated() {
    let parse = |extra: &[&str]| {
        let mut argv = vec!["x", "--endpoint", "unix:///tmp/x.sock"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).map(|c| c.args)
    };
    let args = parse(&[
        "--disable",
        "node:EXPAND_VOLUME",
        "--latency",
        "20ms",
        "--capacity",
        "10Gi",
    ])
    .unwrap();
    let config = Config::from_args(&args).unwrap();
    assert_eq!(config.latency, Duration::from_millis(20));
    assert_eq!(config.capacity, 10 << 30);
    assert!(!config.capabilities().has_node(NodeRpc::ExpandVolume));
    assert!(
        config
            .capabilities()
            .has_controller(ControllerRpc::ExpandVolume)
    );
    let err = Config::from_args(&parse(&["--disable", "EXPAND"]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("EXPAND_VOLUME") && err.contains("valid names"),
        "{err}"
    );
    assert!(parse(&["--node-only", "--controller-only"]).is_err());
    assert!(parse(&["--latency", "soon"]).is_err());
    let missing =
        Config::from_args(&parse(&["--require-secrets", "/nonexistent/secrets.yaml"]).unwrap());
    assert!(missing.is_err());
}

// ------------------------------------------------------------------------------------------
// Secrets and contexts
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn required_secrets_are_checked_without_echoing_values() {
    let secrets = Secrets::from_maps([
        (
            SecretKey::CreateVolume,
            [("password".to_owned(), "hunter2".to_owned())].into(),
        ),
        (
            SecretKey::NodePublishVolume,
            [("token".to_owned(), "t0k3n".to_owned())].into(),
        ),
    ]);
    let p = TestPlugin::start(Config {
        secrets: Some(secrets),
        ..disabled(&["PUBLISH_UNPUBLISH_VOLUME", "STAGE_UNSTAGE_VOLUME"])
    })
    .await;
    let mut ctl = p.controller();
    let s = expect_code(
        ctl.create_volume(create_req("v", vec![snw()])).await,
        Code::Unauthenticated,
    );
    assert!(
        s.message()
            .contains("requires secrets from CreateVolumeSecret"),
        "{s:?}"
    );
    let wrong = v1::CreateVolumeRequest {
        secrets: map(&[("password", "letmein")]),
        ..create_req("v", vec![snw()])
    };
    let s = expect_code(ctl.create_volume(wrong).await, Code::PermissionDenied);
    assert!(
        !s.message().contains("letmein") && !s.message().contains("hunter2"),
        "{s:?}"
    );
    let right = v1::CreateVolumeRequest {
        secrets: map(&[("password", "hunter2")]),
        ..create_req("v", vec![snw()])
    };
    let v = ok(ctl.create_volume(right).await).volume.unwrap().volume_id;
    // DeleteVolume has no configured secrets: anything goes.
    let mut node = p.node();
    let publish = v1::NodePublishVolumeRequest {
        staging_target_path: String::new(),
        ..node_publish_req(&p, &v, "t", snw())
    };
    expect_code(
        node.node_publish_volume(publish.clone()).await,
        Code::Unauthenticated,
    );
    ok(node
        .node_publish_volume(v1::NodePublishVolumeRequest {
            secrets: map(&[("token", "t0k3n")]),
            ..publish
        })
        .await);
    ok(node
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: v.clone(),
            target_path: p.path("t"),
        })
        .await);
    ok(ctl
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: v,
            ..Default::default()
        })
        .await);
}

#[tokio::test]
async fn required_contexts_must_be_passed_back() {
    let p = TestPlugin::start(Config {
        require_context: true,
        ..Config::default()
    })
    .await;
    let mut ctl = p.controller();
    let mut node = p.node();
    let v = create(&mut ctl, "v", vec![snw()]).await;
    let s = expect_code(
        ctl.controller_publish_volume(publish_req(&v.volume_id, snw(), false))
            .await,
        Code::FailedPrecondition,
    );
    assert!(s.message().contains("volume_context"), "{s:?}");
    let publish = v1::ControllerPublishVolumeRequest {
        volume_context: v.volume_context.clone(),
        ..publish_req(&v.volume_id, snw(), false)
    };
    let pctx = ok(ctl.controller_publish_volume(publish).await).publish_context;
    let stage = v1::NodeStageVolumeRequest {
        volume_context: v.volume_context.clone(),
        ..stage_req(&p, &v.volume_id, snw())
    };
    let s = expect_code(
        node.node_stage_volume(stage.clone()).await,
        Code::FailedPrecondition,
    );
    assert!(s.message().contains("publish_context"), "{s:?}");
    let s = expect_code(
        node.node_stage_volume(v1::NodeStageVolumeRequest {
            volume_context: Default::default(),
            publish_context: pctx.clone(),
            ..stage.clone()
        })
        .await,
        Code::FailedPrecondition,
    );
    assert!(s.message().contains("volume_context"), "{s:?}");
    let mut bad_ctx = v.volume_context.clone();
    bad_ctx.insert("csi-conform.dev/fs".into(), "zfs".into());
    let s = expect_code(
        node.node_stage_volume(v1::NodeStageVolumeRequest {
            volume_context: bad_ctx,
            publish_context: pctx.clone(),
            ..stage.clone()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(
        s.message().contains("csi-conform.dev/fs") && !s.message().contains("zfs"),
        "{s:?}"
    );
    ok(node
        .node_stage_volume(v1::NodeStageVolumeRequest {
            publish_context: pctx.clone(),
            ..stage
        })
        .await);
    let vvc = v1::ValidateVolumeCapabilitiesRequest {
        volume_id: v.volume_id.clone(),
        volume_capabilities: vec![snw()],
        ..Default::default()
    };
    expect_code(
        ctl.validate_volume_capabilities(vvc).await,
        Code::FailedPrecondition,
    );
    let publish = v1::NodePublishVolumeRequest {
        volume_context: v.volume_context.clone(),
        publish_context: pctx,
        ..node_publish_req(&p, &v.volume_id, "t", snw())
    };
    ok(node.node_publish_volume(publish).await);
    ok(node
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: v.volume_id.clone(),
            target_path: p.path("t"),
        })
        .await);
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: v.volume_id,
            staging_target_path: p.path("staging"),
        })
        .await);
}

// ------------------------------------------------------------------------------------------
// Serving and shared state
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn serves_tcp_and_replaces_stale_sockets() {
    let handle = reference::spawn(Config::default(), "tcp://127.0.0.1:0")
        .await
        .unwrap();
    let addr = handle.local_addr().expect("a TCP address");
    let channel = tonic::transport::Endpoint::try_from(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut id = v1::identity_client::IdentityClient::new(channel);
    ok(id.probe(v1::ProbeRequest {}).await);
    handle.shutdown().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("p.sock");
    let stale = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    drop(stale);
    assert!(socket.exists());
    let handle = reference::spawn(Config::default(), &format!("unix:{}", socket.display()))
        .await
        .unwrap();
    ok(
        v1::identity_client::IdentityClient::new(connect(&socket).await)
            .probe(v1::ProbeRequest {})
            .await,
    );
    handle.shutdown().await.unwrap();
    assert!(!socket.exists(), "the socket is removed on shutdown");
    std::fs::write(&socket, "not a socket").unwrap();
    assert!(
        reference::spawn(Config::default(), socket.to_str().unwrap())
            .await
            .is_err(),
        "never removes other files"
    );
}

#[tokio::test]
async fn controller_and_node_instances_share_a_state_directory() {
    let state = tempfile::tempdir().unwrap();
    let shared = |mode, node: &str| Config {
        mode,
        node_id: node.into(),
        state_dir: Some(state.path().to_path_buf()),
        ..Config::default()
    };
    let mut c = TestPlugin::start(shared(PluginMode::ControllerOnly, "controller-host")).await;
    let (node_handle, node_channel) = c
        .start_beside("node-2.sock", shared(PluginMode::NodeOnly, "node-2"))
        .await;
    let (node3_handle, node3_channel) = c
        .start_beside("node-3.sock", shared(PluginMode::NodeOnly, "node-3"))
        .await;
    let mut ctl = c.controller();
    let mut node = v1::node_client::NodeClient::new(node_channel);
    let mut node3 = v1::node_client::NodeClient::new(node3_channel);
    assert_eq!(
        ok(node.node_get_info(v1::NodeGetInfoRequest {}).await).node_id,
        "node-2"
    );

    let v = create(&mut ctl, "v", vec![snw()]).await.volume_id;
    let to = |n: &str| v1::ControllerPublishVolumeRequest {
        node_id: n.into(),
        ..publish_req(&v, snw(), false)
    };
    expect_code(
        ctl.controller_publish_volume(to("node-9")).await,
        Code::NotFound,
    );
    let ctx = ok(ctl.controller_publish_volume(to("node-2")).await).publish_context;
    let s = expect_code(
        ctl.controller_publish_volume(to("node-3")).await,
        Code::FailedPrecondition,
    );
    assert!(
        s.message().contains("node-2"),
        "names the node it is published to: {s:?}"
    );
    // The node instance sees the controller's volume and publication.
    let stage = v1::NodeStageVolumeRequest {
        publish_context: ctx.clone(),
        ..stage_req(&c, &v, snw())
    };
    expect_code(
        node3.node_stage_volume(stage.clone()).await,
        Code::FailedPrecondition,
    );
    ok(node.node_stage_volume(stage).await);
    let publish = v1::NodePublishVolumeRequest {
        publish_context: ctx,
        ..node_publish_req(&c, &v, "t", snw())
    };
    ok(node.node_publish_volume(publish).await);
    expect_code(
        ctl.delete_volume(v1::DeleteVolumeRequest {
            volume_id: v.clone(),
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
    );

    // MULTI_NODE volumes go to both nodes.
    let m = create(&mut ctl, "m", vec![mount_cap(Mode::MultiNodeMultiWriter)])
        .await
        .volume_id;
    for n in ["node-2", "node-3"] {
        ok(ctl
            .controller_publish_volume(v1::ControllerPublishVolumeRequest {
                node_id: n.into(),
                ..publish_req(&m, mount_cap(Mode::MultiNodeMultiWriter), false)
            })
            .await);
    }
    let listed = ok(ctl.list_volumes(v1::ListVolumesRequest::default()).await);
    let entry = listed
        .entries
        .iter()
        .find(|e| e.volume.as_ref().unwrap().volume_id == m)
        .unwrap();
    assert_eq!(
        entry.status.as_ref().unwrap().published_node_ids,
        vec!["node-2".to_owned(), "node-3".to_owned()]
    );

    // A restarted controller resumes from the state.
    c.stop().await;
    let (c2, c2_channel) = {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c2.sock");
        let h = reference::spawn(
            shared(PluginMode::ControllerOnly, "controller-host"),
            &format!("unix://{}", path.display()),
        )
        .await
        .unwrap();
        ((h, dir), connect(&path).await)
    };
    let mut ctl = v1::controller_client::ControllerClient::new(c2_channel);
    assert_eq!(
        ok(ctl.list_volumes(v1::ListVolumesRequest::default()).await)
            .entries
            .len(),
        2
    );
    ok(node
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: v.clone(),
            target_path: c.path("t"),
        })
        .await);
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: v.clone(),
            staging_target_path: c.path("staging"),
        })
        .await);
    ok(ctl
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: v.clone(),
            ..Default::default()
        })
        .await);
    ok(ctl
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: v,
            ..Default::default()
        })
        .await);
    assert!(state.path().join("state.json").is_file());
    c2.0.shutdown().await.unwrap();
    node_handle.shutdown().await.unwrap();
    node3_handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_mounts_targets_are_plain_directories_and_files() {
    let p = TestPlugin::start(Config {
        real_mounts: false,
        ..Config::default()
    })
    .await;
    let mut ctl = p.controller();
    let mut node = p.node();
    for (name, cap, block) in [
        ("fs", snw(), false),
        ("blk", block_cap(Mode::SingleNodeWriter), true),
    ] {
        let v = create(&mut ctl, name, vec![cap.clone()]).await.volume_id;
        let ctx = ok(ctl
            .controller_publish_volume(publish_req(&v, cap.clone(), false))
            .await)
        .publish_context;
        let staging = p.path(&format!("stage-{name}"));
        ok(node
            .node_stage_volume(v1::NodeStageVolumeRequest {
                staging_target_path: staging.clone(),
                publish_context: ctx.clone(),
                ..stage_req(&p, &v, cap.clone())
            })
            .await);
        let target = p.path(&format!("target-{name}"));
        ok(node
            .node_publish_volume(v1::NodePublishVolumeRequest {
                staging_target_path: staging.clone(),
                target_path: target.clone(),
                publish_context: ctx,
                readonly: true,
                ..node_publish_req(&p, &v, "unused", cap.clone())
            })
            .await);
        let path = std::path::Path::new(&target);
        assert_eq!(path.is_file(), block, "{name}");
        assert_eq!(path.is_dir(), !block, "{name}");
        assert!(!csi_conform::mounts::is_mount_point(path));
        ok(node
            .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
                volume_id: v.clone(),
                target_path: target.clone(),
            })
            .await);
        assert!(!path.exists());
        ok(node
            .node_unstage_volume(v1::NodeUnstageVolumeRequest {
                volume_id: v,
                staging_target_path: staging,
            })
            .await);
    }
    assert!(csi_conform::mounts::mounts_under(p.dir.path()).is_empty());
}

#[tokio::test]
async fn without_online_expansion_published_volumes_do_not_grow() {
    let p = TestPlugin::start(disabled(&["ONLINE"])).await;
    let mut ctl = p.controller();
    let caps = ok(p
        .identity()
        .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
        .await);
    assert!(
        !caps
            .capabilities
            .iter()
            .any(|c| matches!(c.r#type, Some(plugin_capability::Type::VolumeExpansion(_))))
    );
    let v = create(&mut ctl, "v", vec![snw()]).await.volume_id;
    ok(ctl
        .controller_publish_volume(publish_req(&v, snw(), false))
        .await);
    let expand = v1::ControllerExpandVolumeRequest {
        volume_id: v.clone(),
        capacity_range: range(2 << 30, 0),
        ..Default::default()
    };
    expect_code(
        ctl.controller_expand_volume(expand.clone()).await,
        Code::FailedPrecondition,
    );
    ok(ctl
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: v,
            ..Default::default()
        })
        .await);
    assert_eq!(
        ok(ctl.controller_expand_volume(expand).await).capacity_bytes,
        2 << 30
    );
}

#[tokio::test]
async fn concurrent_instances_on_one_state_directory_lose_no_updates() {
    let state = tempfile::tempdir().unwrap();
    let config = || Config {
        mode: PluginMode::ControllerOnly,
        state_dir: Some(state.path().to_path_buf()),
        ..Config::default()
    };
    let a = TestPlugin::start(config()).await;
    let (b_handle, b_channel) = a.start_beside("b.sock", config()).await;
    let mut calls = Vec::new();
    for i in 0..12 {
        let mut ctl = if i % 2 == 0 {
            a.controller()
        } else {
            v1::controller_client::ControllerClient::new(b_channel.clone())
        };
        calls.push(tokio::spawn(async move {
            ok(ctl
                .create_volume(create_req(&format!("v{i}"), vec![snw()]))
                .await)
            .volume
            .unwrap()
            .volume_id
        }));
    }
    let mut ids = Vec::new();
    for c in calls {
        ids.push(c.await.unwrap());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 12, "every create got its own id");
    assert_eq!(
        ok(a.controller()
            .list_volumes(v1::ListVolumesRequest::default())
            .await)
        .entries
        .len(),
        12
    );
    b_handle.shutdown().await.unwrap();
}

/// Starts the `csi-conform reference-plugin` binary on `socket` with `args`, and returns as
/// soon as the socket file exists (a client polling for it, as the kubelet's plugin watcher
/// does, connects at that moment).
async fn plugin_binary(socket: &Path, args: &[&OsStr]) -> tokio::process::Child {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_csi-conform"))
        .arg("reference-plugin")
        .arg("--endpoint")
        .arg(format!("unix://{}", socket.display()))
        .args(args)
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the plugin binary");
    let started = Instant::now();
    while !socket.exists() {
        // Only turns a hang into a failure.
        assert!(started.elapsed() < Duration::from_secs(30), "the plugin never made its socket");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    child
}

#[tokio::test]
async fn a_separate_node_process_registers_and_serves_from_the_shared_state() {
    let state = tempfile::tempdir().unwrap();
    let c = TestPlugin::start(Config {
        mode: PluginMode::ControllerOnly,
        state_dir: Some(state.path().to_path_buf()),
        ..Config::default()
    })
    .await;
    let socket = c.dir.path().join("node-proc.sock");
    let state_dir = state.path().as_os_str();
    let mut child =
        plugin_binary(&socket, &[OsStr::new("--state-dir"), state_dir, "--node-only".as_ref(), "--node-id".as_ref(), "proc-node".as_ref()]).await;
    let mut node = v1::node_client::NodeClient::new(connect(&socket).await);
    assert_eq!(
        ok(node.node_get_info(v1::NodeGetInfoRequest {}).await).node_id,
        "proc-node"
    );

    let mut ctl = c.controller();
    let v = create(&mut ctl, "v", vec![snw()]).await.volume_id;
    let publish = v1::ControllerPublishVolumeRequest {
        node_id: "proc-node".into(),
        ..publish_req(&v, snw(), false)
    };
    let ctx = ok(ctl.controller_publish_volume(publish).await).publish_context;
    let stage = v1::NodeStageVolumeRequest {
        publish_context: ctx,
        ..stage_req(&c, &v, snw())
    };
    ok(node.node_stage_volume(stage).await);
    expect_code(
        ctl.delete_volume(v1::DeleteVolumeRequest {
            volume_id: v.clone(),
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
    );
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: v.clone(),
            staging_target_path: c.path("staging"),
        })
        .await);

    let pid = nix::unistd::Pid::from_raw(child.id().expect("running") as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .expect("exits on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!socket.exists(), "the socket is removed on exit");
    ok(ctl
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: v.clone(),
            ..Default::default()
        })
        .await);
    ok(ctl
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: v,
            ..Default::default()
        })
        .await);
}

/// The socket file appears only once it accepts connections: it is bound and listening under a
/// temporary name and renamed into place, so a client that waits for the file and connects at
/// once (as the kubelet's plugin watcher does) is never refused, and no temporary name is left
/// beside it. Binding the path itself made the file exist a moment before `listen(2)`, and such
/// a connect was refused now and then (a CI failure); inotify shows which way the name came.
#[tokio::test]
async fn the_socket_file_appears_already_listening() {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("p.sock");
    let watch = Inotify::init(InitFlags::IN_NONBLOCK).unwrap();
    watch
        .add_watch(dir.path(), AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
        .unwrap();
    let mut child = plugin_binary(&socket, &[]).await;
    let stream = tokio::net::UnixStream::connect(&socket).await;
    assert!(stream.is_ok(), "the socket existed but refused: {stream:?}");
    let events: Vec<(String, AddWatchFlags)> = watch
        .read_events()
        .unwrap()
        .into_iter()
        .map(|e| (e.name.unwrap_or_default().to_string_lossy().into_owned(), e.mask))
        .collect();
    let arrivals: Vec<_> = events.iter().filter(|(name, _)| name == "p.sock").collect();
    assert_eq!(arrivals.len(), 1, "{events:?}");
    assert!(arrivals[0].1.contains(AddWatchFlags::IN_MOVED_TO), "p.sock was created in place, not renamed in: {events:?}");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["p.sock"]);
    child.kill().await.unwrap();
}
