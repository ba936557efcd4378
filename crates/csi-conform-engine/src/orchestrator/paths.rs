//! Where each orchestrator puts a volume's staging and target paths, under a root that stands
//! for its own directory (Nomad's `csi_plugin.mount_dir`, the kubelet's root, the Swarm
//! plugin's root file system), and which of the directories on the way it makes itself.

use std::path::{Path, PathBuf};

/// A path layout (rows `paths.staging`, `paths.staging-block`, `paths.publish-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `staging/<namespace>/<volume>/<usage>` and `per-alloc/<alloc>/<volume>/<usage>`
    /// (`client/pluginmanager/csimanager/volume.go`).
    Nomad,
    /// Nomad before PR #20532: `staging/<volume>/<usage>`, no namespace.
    NomadNoNamespace,
    /// `plugins/kubernetes.io/csi/<driver>/<digest of the handle>/globalmount` and
    /// `pods/<pod>/volumes/kubernetes.io~csi/<pv>/mount`; block: `.../volumeDevices/staging/<pv>`
    /// and the *file* `.../volumeDevices/publish/<pv>/<pod>` (`pkg/volume/csi`).
    Kubelet,
    /// The kubelet before 1.24 (kubernetes PR #107065): a mount volume staged at
    /// `plugins/kubernetes.io/csi/pv/<pv>/globalmount`; the rest as [`Layout::Kubelet`].
    KubeletPvName,
    /// `data/staged/<volume>` and `data/published/<volume>`, flat (`agent/csi/plugin/plugin.go`).
    SwarmFlat,
}

/// One use of a volume on a node, as the orchestrator names it.
#[derive(Debug, Clone, Copy)]
pub struct Use<'a> {
    /// The orchestrator's own name of the volume (Nomad's and Swarm's volume id, the
    /// kubelet's PV name); not the plugin's volume_id.
    pub volume: &'a str,
    /// The plugin's volume_id (the kubelet's volume handle).
    pub handle: &'a str,
    /// The plugin's name (GetPluginInfo), the kubelet's driver directory.
    pub driver: &'a str,
    /// The workload using it: Nomad's allocation, the kubelet's pod uid.
    pub workload: &'a str,
    /// Block access.
    pub block: bool,
    /// Read-only use (Nomad's usage directory says `ro-`).
    pub read_only: bool,
    /// The access mode's spec name (`SINGLE_NODE_WRITER`).
    pub mode: &'a str,
}

impl Layout {
    /// The staging path under `root`.
    pub fn staging(self, root: &Path, u: &Use<'_>) -> PathBuf {
        match self {
            Layout::Nomad => root.join("staging").join("default").join(u.volume).join(nomad_usage(u)),
            Layout::NomadNoNamespace => root.join("staging").join(u.volume).join(nomad_usage(u)),
            Layout::Kubelet | Layout::KubeletPvName if u.block => {
                root.join("plugins/kubernetes.io/csi/volumeDevices/staging").join(u.volume)
            }
            Layout::Kubelet => {
                root.join("plugins/kubernetes.io/csi").join(driver_dir(u.driver)).join(digest64(u.handle)).join("globalmount")
            }
            Layout::KubeletPvName => root.join("plugins/kubernetes.io/csi/pv").join(u.volume).join("globalmount"),
            Layout::SwarmFlat => root.join("data/staged").join(u.volume),
        }
    }

    /// The target path under `root` (a file for the kubelet's block volumes).
    pub fn target(self, root: &Path, u: &Use<'_>) -> PathBuf {
        match self {
            Layout::Nomad | Layout::NomadNoNamespace => {
                root.join("per-alloc").join(u.workload).join(u.volume).join(nomad_usage(u))
            }
            Layout::Kubelet | Layout::KubeletPvName if u.block => {
                root.join("plugins/kubernetes.io/csi/volumeDevices/publish").join(u.volume).join(u.workload)
            }
            Layout::Kubelet | Layout::KubeletPvName => {
                root.join("pods").join(u.workload).join("volumes/kubernetes.io~csi").join(u.volume).join("mount")
            }
            Layout::SwarmFlat => root.join("data/published").join(u.volume),
        }
    }

    /// The behaviour id of the staging path of a use (the kubelet's block staging is a row
    /// of its own).
    pub fn staging_id(self, block: bool) -> &'static str {
        if block && self.kubelet() { super::ids::STAGING_BLOCK } else { super::ids::STAGING }
    }

    /// One of the kubelet's layouts (its workloads are pods).
    pub fn kubelet(self) -> bool {
        matches!(self, Layout::Kubelet | Layout::KubeletPvName)
    }

    /// The behaviour id of the target path of a use.
    pub fn target_id(block: bool) -> &'static str {
        if block { super::ids::PUBLISH_BLOCK } else { super::ids::PUBLISH_MOUNT }
    }
}

/// Nomad's usage directory: `rw-file-system-single-node-writer` (`UsageOptions.ToFS`).
fn nomad_usage(u: &Use<'_>) -> String {
    let access = if u.block { "block-device" } else { "file-system" };
    let mode = u.mode.to_ascii_lowercase().replace('_', "-");
    format!("{}-{access}-{mode}", if u.read_only { "ro" } else { "rw" })
}

/// A driver name as a directory name (the kubelet escapes `/`; a name has no other).
fn driver_dir(driver: &str) -> String {
    let name = if driver.is_empty() { "csi-driver" } else { driver };
    name.replace('/', "~")
}

/// 64 hex digits derived from `text`: the shape of the kubelet's sha256 of the volume handle
/// (four FNV-1a passes with different seeds; the plugin sees only a per-volume name).
pub fn digest64(text: &str) -> String {
    let mut out = String::with_capacity(64);
    for seed in 0u64..4 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn use_of(block: bool) -> Use<'static> {
        Use {
            volume: "vol0",
            handle: "vol-000001",
            driver: "csi-conform.dev",
            workload: "alloc0",
            block,
            read_only: false,
            mode: "SINGLE_NODE_WRITER",
        }
    }

    #[test]
    fn each_layout_names_its_paths_as_the_orchestrator_does() {
        let root = Path::new("/r");
        let u = use_of(false);
        assert_eq!(Layout::Nomad.staging(root, &u), Path::new("/r/staging/default/vol0/rw-file-system-single-node-writer"));
        assert_eq!(Layout::Nomad.target(root, &u), Path::new("/r/per-alloc/alloc0/vol0/rw-file-system-single-node-writer"));
        let k = Layout::Kubelet.staging(root, &u);
        assert!(k.ends_with("globalmount") && k.starts_with("/r/plugins/kubernetes.io/csi/csi-conform.dev"), "{k:?}");
        assert_eq!(k.parent().unwrap().file_name().unwrap().len(), 64);
        assert_eq!(Layout::Kubelet.target(root, &use_of(true)), Path::new("/r/plugins/kubernetes.io/csi/volumeDevices/publish/vol0/alloc0"));
        assert_eq!(Layout::NomadNoNamespace.staging(root, &u), Path::new("/r/staging/vol0/rw-file-system-single-node-writer"));
        assert_eq!(Layout::KubeletPvName.staging(root, &u), Path::new("/r/plugins/kubernetes.io/csi/pv/vol0/globalmount"));
        assert_eq!(Layout::KubeletPvName.target(root, &u), Layout::Kubelet.target(root, &u));
        assert_eq!(Layout::SwarmFlat.staging(root, &u), Path::new("/r/data/staged/vol0"));
        assert_eq!(Layout::SwarmFlat.target(root, &u), Path::new("/r/data/published/vol0"));
        assert_ne!(digest64("a"), digest64("b"));
    }
}
