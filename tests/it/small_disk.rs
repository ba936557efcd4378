//! The reference plugin allocating like real storage (`--allocate`: block volumes fallocated,
//! snapshots and clones copied byte for byte, GetCapacity reporting its configured 1 TiB, as
//! kubernetes-csi's hostpath plugin does) with its state on a 256 MiB tmpfs: a default run
//! with csi-sanity's default test volume size (10 GiB) reports no failure, never comes near
//! filling the file system, and leaves nothing on it. Needs CAP_SYS_ADMIN to mount the tmpfs
//! and says SKIPPED on stderr without it.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use csi_conform::{
    mounts::has_cap_sys_admin,
    reference::Config,
    report::Severity,
    suite::{self, RunConfig},
};

use crate::support::{TestPlugin, engine_plugin};

/// The size of the file system the plugin's volumes live on.
const FS_BYTES: u64 = 256 << 20;
/// The most the run may have on it at once (issue 19's target).
const PEAK_MAX: u64 = 64 << 20;

/// A tmpfs of [`FS_BYTES`] mounted for the test, unmounted when dropped.
struct Tmpfs {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Tmpfs {
    fn mount() -> Tmpfs {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("fs");
        std::fs::create_dir(&path).expect("mount point");
        nix::mount::mount(
            Some("tmpfs"),
            &path,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some(format!("size={FS_BYTES}").as_str()),
        )
        .expect("mount a tmpfs");
        Tmpfs { _dir: dir, path }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.path, nix::mount::MntFlags::MNT_DETACH);
    }
}

fn used(path: &Path) -> u64 {
    nix::sys::statvfs::statvfs(path)
        .map(|v| v.blocks().saturating_sub(v.blocks_free()).saturating_mul(v.fragment_size()))
        .unwrap_or(0)
}

/// Samples the bytes used on `path` every few milliseconds until stopped; the highest seen.
fn sample_peak(path: PathBuf) -> (Arc<AtomicBool>, Arc<AtomicU64>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let (s, p) = (stop.clone(), peak.clone());
    let handle = std::thread::spawn(move || {
        while !s.load(Ordering::SeqCst) {
            p.fetch_max(used(&path), Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    (stop, peak, handle)
}

/// A fresh 256 MiB tmpfs and the plugin's state directory on it; `None` (after saying
/// SKIPPED and why on stderr) without CAP_SYS_ADMIN.
fn small_fs(test: &str) -> Option<(Tmpfs, PathBuf)> {
    if !has_cap_sys_admin() {
        eprintln!("SKIPPED: {test}: no CAP_SYS_ADMIN to mount a 256 MiB tmpfs");
        return None;
    }
    let fs = Tmpfs::mount();
    let state = fs.path.join("state");
    std::fs::create_dir(&state).expect("the state directory");
    Some((fs, state))
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_default_run_against_a_disk_backed_plugin_on_a_small_filesystem_fails_nothing_and_leaves_nothing() {
    let Some((fs, state)) = small_fs("disk-backed run on a small file system") else { return };
    let before = used(&fs.path);
    let mut plugin = TestPlugin::start(Config { state_dir: Some(state.clone()), allocate: true, ..Config::default() }).await;
    let engine = engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    // csi-sanity's default test volume size, as a vendor who swapped tools keeps it.
    let config = RunConfig { seed: 7, work_dir: work.path().join("work"), ..RunConfig::default() };
    assert_eq!(config.volume_size, 10 << 30);
    let (stop, peak, sampler) = sample_peak(fs.path.clone());
    let report = suite::run(&engine, &suite::builtin(), &config).await;
    stop.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    plugin.stop().await;

    let bad: Vec<String> = report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .filter(|s| s.outcome >= Severity::Fail)
        .flat_map(|s| s.findings.iter().map(move |f| format!("{} {} {}: {}", s.id, f.severity, f.kind, f.message)))
        .collect();
    assert!(bad.is_empty(), "the plugin got nothing wrong, yet:\n{}", bad.join("\n"));
    let sizes = report.sizes.as_ref().expect("the report says which sizes were used");
    assert_eq!(sizes.small_bytes, 1 << 20, "{sizes}");
    let peak = peak.load(Ordering::SeqCst).saturating_sub(before);
    assert!(peak < PEAK_MAX, "peak use of the plugin's file system: {peak} bytes");
    for kind in ["volumes", "snapshots"] {
        let left = entries(&state.join(kind));
        assert!(left.is_empty(), "{kind} left on the plugin's file system: {left:?}");
    }
    eprintln!("peak use of the plugin's file system during the run: {} KiB", peak >> 10);
}

/// Without the small sizes the same plugin runs out of space the way hostpath does: a block
/// volume of csi-sanity's 10 GiB on the 256 MiB file system is refused with UNKNOWN and the
/// OS's "No space left on device", which the engine reads as no space.
#[tokio::test]
async fn the_disk_backed_plugin_answers_a_full_filesystem_as_hostpath_does() {
    use csi_conform::proto::v1;
    let Some((fs, state)) = small_fs("disk-backed plugin out of space") else { return };
    let plugin = TestPlugin::start(Config { state_dir: Some(state.clone()), allocate: true, ..Config::default() }).await;
    let capacity = plugin.controller().get_capacity(v1::GetCapacityRequest::default()).await.unwrap().into_inner();
    assert_eq!(capacity.available_capacity, 1 << 40, "GetCapacity reports what it is configured to");
    let mut request = crate::support::create_req("big", vec![crate::support::block_cap(
        v1::volume_capability::access_mode::Mode::SingleNodeWriter,
    )]);
    request.capacity_range = crate::support::range(10 << 30, 0);
    let status = plugin.controller().create_volume(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unknown, "{status:?}");
    assert!(status.message().contains("No space left on device"), "{}", status.message());
    assert!(entries(&state.join("volumes")).is_empty(), "a failed create leaves nothing");
    let mut small = crate::support::create_req("small", vec![crate::support::block_cap(
        v1::volume_capability::access_mode::Mode::SingleNodeWriter,
    )]);
    small.capacity_range = crate::support::range(8 << 20, 0);
    let before = used(&fs.path);
    let volume = plugin.controller().create_volume(small).await.unwrap().into_inner().volume.unwrap();
    assert!(used(&fs.path) - before >= 8 << 20, "a block volume takes its bytes");
    plugin
        .controller()
        .delete_volume(v1::DeleteVolumeRequest { volume_id: volume.volume_id, ..Default::default() })
        .await
        .unwrap();
}
