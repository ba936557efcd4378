//! Real mounts: the reference plugin's stage/publish as bind mounts seen in
//! /proc/self/mountinfo (read-only enforced by the kernel), block volumes as bind-mounted
//! files, data carried by snapshots and clones, and no mount left behind. Every test needs
//! CAP_SYS_ADMIN and says SKIPPED on stderr without it.

use std::io::Write;
use std::path::Path;

use csi_conform::mounts::{self, is_mount_point, mount_entry, mounts_under};
use csi_conform::proto::v1::{self, volume_capability::access_mode::Mode};
use csi_conform::reference::{self, Config};

use crate::support::*;

/// False (after saying so on stderr) when this process cannot mount.
fn can_mount(test: &str) -> bool {
    crate::support::can_mount(test, "the reference plugin mounts")
}

fn assert_no_mounts_under(dir: &Path) {
    let left = mounts_under(dir);
    assert!(
        left.is_empty(),
        "mounts left under {}: {left:?}",
        dir.display()
    );
}

async fn publish_flow(
    p: &TestPlugin,
    volume: &str,
    cap: v1::VolumeCapability,
) -> std::collections::HashMap<String, String> {
    let mut ctl = p.controller();
    ok(ctl
        .controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: volume.into(),
            node_id: reference::DEFAULT_NODE_ID.into(),
            volume_capability: Some(cap),
            ..Default::default()
        })
        .await)
    .publish_context
}

#[tokio::test]
async fn stage_and_publish_make_real_bind_mounts_and_unpublish_removes_them() {
    if !can_mount("stage_and_publish_make_real_bind_mounts_and_unpublish_removes_them") {
        return;
    }
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    let mut node = p.node();
    let cap = mount_cap(Mode::MultiNodeMultiWriter);
    let v = create(&mut ctl, "v", vec![cap.clone()]).await.volume_id;
    let ctx = publish_flow(&p, &v, cap.clone()).await;
    let staging = p.path("staging");
    ok(node
        .node_stage_volume(v1::NodeStageVolumeRequest {
            volume_id: v.clone(),
            staging_target_path: staging.clone(),
            volume_capability: Some(cap.clone()),
            publish_context: ctx.clone(),
            ..Default::default()
        })
        .await);
    assert!(is_mount_point(Path::new(&staging)), "staging is a mount");

    let publish = |target: &str, readonly: bool| v1::NodePublishVolumeRequest {
        volume_id: v.clone(),
        staging_target_path: staging.clone(),
        target_path: p.path(target),
        volume_capability: Some(cap.clone()),
        readonly,
        publish_context: ctx.clone(),
        ..Default::default()
    };
    ok(node.node_publish_volume(publish("rw", false)).await);
    ok(node.node_publish_volume(publish("ro", true)).await);
    let rw = p.path("rw");
    let ro = p.path("ro");
    let entry = mount_entry(Path::new(&rw)).expect("rw target is in mountinfo");
    assert!(!entry.read_only);
    assert!(
        mount_entry(Path::new(&ro))
            .expect("ro target is in mountinfo")
            .read_only
    );

    // Writes through the rw target show up everywhere; the ro target refuses them.
    std::fs::write(Path::new(&rw).join("hello.txt"), "hello").unwrap();
    assert_eq!(
        std::fs::read_to_string(Path::new(&ro).join("hello.txt")).unwrap(),
        "hello"
    );
    assert_eq!(
        std::fs::read_to_string(Path::new(&staging).join("hello.txt")).unwrap(),
        "hello"
    );
    let err = std::fs::write(Path::new(&ro).join("nope.txt"), "x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EROFS), "{err}");

    for t in [&rw, &ro] {
        ok(node
            .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
                volume_id: v.clone(),
                target_path: t.clone(),
            })
            .await);
        assert!(!is_mount_point(Path::new(t)));
        assert!(!Path::new(t).exists(), "target removed");
    }
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: v.clone(),
            staging_target_path: staging.clone(),
        })
        .await);
    assert!(!Path::new(&staging).exists(), "staging removed");
    assert_no_mounts_under(p.dir.path());
}

#[tokio::test]
async fn block_volumes_bind_mount_their_backing_file() {
    if !can_mount("block_volumes_bind_mount_their_backing_file") {
        return;
    }
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    let mut node = p.node();
    let cap = block_cap(Mode::SingleNodeWriter);
    let v = create(&mut ctl, "blk", vec![cap.clone()]).await.volume_id;
    let ctx = publish_flow(&p, &v, cap.clone()).await;
    ok(node
        .node_stage_volume(v1::NodeStageVolumeRequest {
            volume_id: v.clone(),
            staging_target_path: p.path("staging"),
            volume_capability: Some(cap.clone()),
            publish_context: ctx.clone(),
            ..Default::default()
        })
        .await);
    let dev = p.path("dev");
    ok(node
        .node_publish_volume(v1::NodePublishVolumeRequest {
            volume_id: v.clone(),
            staging_target_path: p.path("staging"),
            target_path: dev.clone(),
            volume_capability: Some(cap.clone()),
            publish_context: ctx,
            ..Default::default()
        })
        .await);
    assert!(is_mount_point(Path::new(&dev)));
    let meta = std::fs::metadata(&dev).unwrap();
    assert!(meta.is_file());
    assert_eq!(
        meta.len(),
        reference::GIB as u64,
        "the target shows the volume's backing file"
    );
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&dev)
            .unwrap();
        f.write_all_at(b"block data", 4096).unwrap();
        let mut buf = [0u8; 10];
        f.read_exact_at(&mut buf, 4096).unwrap();
        assert_eq!(&buf, b"block data");
    }
    ok(node
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: v.clone(),
            target_path: dev.clone(),
        })
        .await);
    assert!(!Path::new(&dev).exists());
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: v,
            staging_target_path: p.path("staging"),
        })
        .await);
    assert_no_mounts_under(p.dir.path());
}

#[tokio::test]
async fn snapshots_and_clones_carry_the_data() {
    if !can_mount("snapshots_and_clones_carry_the_data") {
        return;
    }
    let p = TestPlugin::start(reference_without_staging()).await;
    let mut ctl = p.controller();
    let mut node = p.node();
    let cap = mount_cap(Mode::SingleNodeWriter);
    let src = create(&mut ctl, "src", vec![cap.clone()]).await.volume_id;

    let mount = |volume: &str, target: &str| v1::NodePublishVolumeRequest {
        volume_id: volume.into(),
        target_path: p.path(target),
        volume_capability: Some(cap.clone()),
        ..Default::default()
    };
    let unmount = |volume: &str, target: &str| v1::NodeUnpublishVolumeRequest {
        volume_id: volume.into(),
        target_path: p.path(target),
    };

    // Without STAGE_UNSTAGE_VOLUME the volume's directory is mounted at the target directly.
    ok(node.node_publish_volume(mount(&src, "src")).await);
    assert!(is_mount_point(Path::new(&p.path("src"))));
    let mut f = std::fs::File::create(Path::new(&p.path("src")).join("data.txt")).unwrap();
    f.write_all(b"v1").unwrap();
    drop(f);
    let snap = ok(ctl
        .create_snapshot(v1::CreateSnapshotRequest {
            source_volume_id: src.clone(),
            name: "snap".into(),
            ..Default::default()
        })
        .await)
    .snapshot
    .unwrap();
    std::fs::write(Path::new(&p.path("src")).join("data.txt"), "v2").unwrap();
    ok(node.node_unpublish_volume(unmount(&src, "src")).await);

    use v1::volume_content_source::{SnapshotSource, Type, VolumeSource};
    let restored = ok(ctl
        .create_volume(v1::CreateVolumeRequest {
            volume_content_source: Some(v1::VolumeContentSource {
                r#type: Some(Type::Snapshot(SnapshotSource {
                    snapshot_id: snap.snapshot_id,
                })),
            }),
            ..create_req("restored", vec![cap.clone()])
        })
        .await)
    .volume
    .unwrap()
    .volume_id;
    let cloned = ok(ctl
        .create_volume(v1::CreateVolumeRequest {
            volume_content_source: Some(v1::VolumeContentSource {
                r#type: Some(Type::Volume(VolumeSource {
                    volume_id: src.clone(),
                })),
            }),
            ..create_req("cloned", vec![cap.clone()])
        })
        .await)
    .volume
    .unwrap()
    .volume_id;
    for (volume, expected) in [(&restored, "v1"), (&cloned, "v2")] {
        ok(node.node_publish_volume(mount(volume, "check")).await);
        assert_eq!(
            std::fs::read_to_string(Path::new(&p.path("check")).join("data.txt")).unwrap(),
            expected
        );
        ok(node.node_unpublish_volume(unmount(volume, "check")).await);
    }
    assert_no_mounts_under(p.dir.path());
}

fn reference_without_staging() -> Config {
    let mut config = Config::default();
    config.disabled.add("STAGE_UNSTAGE_VOLUME").unwrap();
    config.disabled.add("PUBLISH_UNPUBLISH_VOLUME").unwrap();
    config
}

#[test]
fn bind_mount_helpers_mount_read_only_and_unmount() {
    if !can_mount("bind_mount_helpers_mount_read_only_and_unmount") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&dst).unwrap();
    mounts::bind_mount(&src, &dst, true).unwrap();
    let entry = mount_entry(&dst).expect("mounted");
    assert!(entry.read_only);
    assert_eq!(mounts_under(dir.path()).len(), 1);
    mounts::unmount(&dst).unwrap();
    mounts::unmount(&dst).unwrap();
    assert_no_mounts_under(dir.path());
    // A path with a space exercises mountinfo's octal escapes.
    let spaced = dir.path().join("with space");
    std::fs::create_dir(&spaced).unwrap();
    mounts::bind_mount(&src, &spaced, false).unwrap();
    assert!(is_mount_point(&spaced));
    mounts::unmount(&spaced).unwrap();
    assert_no_mounts_under(dir.path());
}

/// A mount at a staging path or a target path that no record of the plugin knows (made by a
/// plugin process killed before it recorded it) is undone by NodeUnstageVolume and
/// NodeUnpublishVolume all the same, as a real plugin unmounts whatever is mounted there.
#[tokio::test]
async fn unstage_and_unpublish_undo_a_mount_no_record_knows() {
    if !can_mount("unstage_and_unpublish_undo_a_mount_no_record_knows") {
        return;
    }
    let p = TestPlugin::start(Config::default()).await;
    let mut ctl = p.controller();
    let mut node = p.node();
    let v = create(&mut ctl, "v", vec![mount_cap(Mode::SingleNodeWriter)]).await.volume_id;
    let source = p.path("source");
    std::fs::create_dir_all(&source).unwrap();
    let (staging, target) = (p.path("staging"), p.path("target"));
    for path in [&staging, &target] {
        std::fs::create_dir_all(path).unwrap();
        mounts::bind_mount(Path::new(&source), Path::new(path), false).unwrap();
        assert!(is_mount_point(Path::new(path)));
    }
    ok(node
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest { volume_id: v.clone(), target_path: target.clone() })
        .await);
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest { volume_id: v.clone(), staging_target_path: staging.clone() })
        .await);
    for path in [&staging, &target] {
        assert!(!is_mount_point(Path::new(path)), "{path} is still a mount point");
    }
    assert_no_mounts_under(Path::new(&p.path("")));
}
