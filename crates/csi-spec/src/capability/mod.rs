//! Volume capabilities as typed values: access mode and access type (block, or mount with
//! fs_type, mount flags and volume_mount_group), converted to and from the wire form, shown
//! with mount flags redacted, and compared field by field.
//!
//! Mount flags may carry credentials (the spec says so), so nothing here ever prints them:
//! [`fmt::Display`] shows how many there are, and [`Difference`] says only that they differ.

mod reconcile;
pub mod strategy;

use std::fmt;

use crate::proto::v1::{self, volume_capability};

pub use reconcile::{Reconciliation, Verdict, reconcile};

/// `VolumeCapability.AccessMode.Mode`, with room for values this spec version does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AccessMode {
    /// `UNKNOWN` (0): never valid in a request.
    Unknown,
    /// Read-write on one node.
    SingleNodeWriter,
    /// Read-only on one node.
    SingleNodeReaderOnly,
    /// Read-only on many nodes.
    MultiNodeReaderOnly,
    /// Many nodes, one writer.
    MultiNodeSingleWriter,
    /// Read-write on many nodes.
    MultiNodeMultiWriter,
    /// Read-write by one workload on one node.
    SingleNodeSingleWriter,
    /// Read-write by many workloads on one node.
    SingleNodeMultiWriter,
    /// A value CSI v1.12 does not define.
    Other(i32),
}

type ProtoMode = volume_capability::access_mode::Mode;

impl AccessMode {
    /// Every mode CSI v1.12 defines (UNKNOWN excluded), in enum order.
    pub const ALL: [AccessMode; 7] = [
        AccessMode::SingleNodeWriter,
        AccessMode::SingleNodeReaderOnly,
        AccessMode::MultiNodeReaderOnly,
        AccessMode::MultiNodeSingleWriter,
        AccessMode::MultiNodeMultiWriter,
        AccessMode::SingleNodeSingleWriter,
        AccessMode::SingleNodeMultiWriter,
    ];

    /// From the wire value.
    pub fn from_i32(value: i32) -> Self {
        match ProtoMode::try_from(value) {
            Ok(ProtoMode::Unknown) => AccessMode::Unknown,
            Ok(ProtoMode::SingleNodeWriter) => AccessMode::SingleNodeWriter,
            Ok(ProtoMode::SingleNodeReaderOnly) => AccessMode::SingleNodeReaderOnly,
            Ok(ProtoMode::MultiNodeReaderOnly) => AccessMode::MultiNodeReaderOnly,
            Ok(ProtoMode::MultiNodeSingleWriter) => AccessMode::MultiNodeSingleWriter,
            Ok(ProtoMode::MultiNodeMultiWriter) => AccessMode::MultiNodeMultiWriter,
            Ok(ProtoMode::SingleNodeSingleWriter) => AccessMode::SingleNodeSingleWriter,
            Ok(ProtoMode::SingleNodeMultiWriter) => AccessMode::SingleNodeMultiWriter,
            Err(_) => AccessMode::Other(value),
        }
    }

    /// The wire value.
    pub fn to_i32(self) -> i32 {
        match self {
            AccessMode::Unknown => ProtoMode::Unknown as i32,
            AccessMode::SingleNodeWriter => ProtoMode::SingleNodeWriter as i32,
            AccessMode::SingleNodeReaderOnly => ProtoMode::SingleNodeReaderOnly as i32,
            AccessMode::MultiNodeReaderOnly => ProtoMode::MultiNodeReaderOnly as i32,
            AccessMode::MultiNodeSingleWriter => ProtoMode::MultiNodeSingleWriter as i32,
            AccessMode::MultiNodeMultiWriter => ProtoMode::MultiNodeMultiWriter as i32,
            AccessMode::SingleNodeSingleWriter => ProtoMode::SingleNodeSingleWriter as i32,
            AccessMode::SingleNodeMultiWriter => ProtoMode::SingleNodeMultiWriter as i32,
            AccessMode::Other(v) => v,
        }
    }

    /// Whether the mode allows more than one node at a time.
    pub fn is_multi_node(self) -> bool {
        matches!(
            self,
            AccessMode::MultiNodeReaderOnly | AccessMode::MultiNodeSingleWriter | AccessMode::MultiNodeMultiWriter
        )
    }

    /// Whether the mode only allows reading.
    pub fn is_read_only(self) -> bool {
        matches!(self, AccessMode::SingleNodeReaderOnly | AccessMode::MultiNodeReaderOnly)
    }
}

impl fmt::Display for AccessMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessMode::Other(v) => write!(f, "access mode {v}"),
            m => f.write_str(ProtoMode::try_from(m.to_i32()).map_or("?", |p| p.as_str_name())),
        }
    }
}

/// The file-system side of a capability.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Mount {
    /// The file system type; empty means the plugin's default.
    pub fs_type: String,
    /// Mount options. May be sensitive: never displayed.
    pub mount_flags: Vec<String>,
    /// The group that should own the volume; empty means unset.
    pub volume_mount_group: String,
}

/// How the volume is accessed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AccessType {
    /// A raw block device.
    Block,
    /// A mounted file system.
    Mount(Mount),
}

/// A VolumeCapability, typed. Both parts are optional on the wire, and so here: a request
/// without them is malformed, and tests need to express exactly that.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VolumeCapability {
    /// `access_mode.mode`; `None` when the access_mode message is absent.
    pub access_mode: Option<AccessMode>,
    /// `access_type`; `None` when neither block nor mount is set.
    pub access_type: Option<AccessType>,
}

impl VolumeCapability {
    /// A mount capability with the plugin's default file system and no flags.
    pub fn mount(mode: AccessMode) -> Self {
        VolumeCapability {
            access_mode: Some(mode),
            access_type: Some(AccessType::Mount(Mount::default())),
        }
    }

    /// A block capability.
    pub fn block(mode: AccessMode) -> Self {
        VolumeCapability {
            access_mode: Some(mode),
            access_type: Some(AccessType::Block),
        }
    }

    /// The mount part, if this is a mount capability.
    pub fn mount_options(&self) -> Option<&Mount> {
        match &self.access_type {
            Some(AccessType::Mount(m)) => Some(m),
            _ => None,
        }
    }

    /// Every way `other` differs from `self` (self = requested, other = confirmed), in a
    /// fixed field order. Empty when they are equal. Mount flags compare as a set.
    pub fn differences(&self, other: &VolumeCapability) -> Vec<Difference> {
        let mut out = Vec::new();
        if self.access_mode != other.access_mode {
            out.push(Difference::changed(
                Field::AccessMode,
                show_mode(self.access_mode),
                show_mode(other.access_mode),
            ));
        }
        match (&self.access_type, &other.access_type) {
            (Some(AccessType::Mount(a)), Some(AccessType::Mount(b))) => mount_differences(a, b, &mut out),
            (a, b) if a != b => out.push(Difference::changed(Field::AccessType, show_type(a), show_type(b))),
            _ => {}
        }
        out
    }
}

fn mount_differences(requested: &Mount, confirmed: &Mount, out: &mut Vec<Difference>) {
    if requested.fs_type != confirmed.fs_type {
        out.push(Difference::of(Field::FsType, &requested.fs_type, &confirmed.fs_type));
    }
    let mut a = requested.mount_flags.clone();
    let mut b = confirmed.mount_flags.clone();
    a.sort();
    a.dedup();
    b.sort();
    b.dedup();
    if a != b {
        let kind = if b.is_empty() { DifferenceKind::Dropped } else { DifferenceKind::Changed };
        // Never the flags themselves: they may carry credentials.
        out.push(Difference {
            field: Field::MountFlags,
            kind,
            requested: format!("{} flag(s)", a.len()),
            confirmed: format!("{} flag(s)", b.len()),
        });
    }
    if requested.volume_mount_group != confirmed.volume_mount_group {
        out.push(Difference::of(
            Field::VolumeMountGroup,
            &requested.volume_mount_group,
            &confirmed.volume_mount_group,
        ));
    }
}

fn show_mode(mode: Option<AccessMode>) -> String {
    mode.map_or_else(|| "(no access mode)".to_owned(), |m| m.to_string())
}

fn show_type(t: &Option<AccessType>) -> String {
    match t {
        None => "(no access type)".to_owned(),
        Some(AccessType::Block) => "block".to_owned(),
        Some(AccessType::Mount(_)) => "mount".to_owned(),
    }
}

/// A field of a VolumeCapability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// `access_mode.mode`.
    AccessMode,
    /// `block` versus `mount`.
    AccessType,
    /// `mount.fs_type`.
    FsType,
    /// `mount.mount_flags`.
    MountFlags,
    /// `mount.volume_mount_group`.
    VolumeMountGroup,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::AccessMode => "access mode",
            Field::AccessType => "access type",
            Field::FsType => "fs_type",
            Field::MountFlags => "mount flags",
            Field::VolumeMountGroup => "volume_mount_group",
        })
    }
}

/// Whether the confirmed value is different, or simply missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DifferenceKind {
    /// The confirmed value is another value.
    Changed,
    /// The request set the field and the confirmation left it empty: a plugin saying
    /// "valid" about a field it does not understand.
    Dropped,
}

/// One field that differs between a requested and a confirmed capability.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Difference {
    /// Which field.
    pub field: Field,
    /// Changed or dropped.
    pub kind: DifferenceKind,
    /// The requested value, as shown (never a mount flag).
    pub requested: String,
    /// The confirmed value, as shown (never a mount flag).
    pub confirmed: String,
}

impl Difference {
    fn changed(field: Field, requested: String, confirmed: String) -> Self {
        Difference {
            field,
            kind: DifferenceKind::Changed,
            requested,
            confirmed,
        }
    }

    fn of(field: Field, requested: &str, confirmed: &str) -> Self {
        let kind = if confirmed.is_empty() && !requested.is_empty() {
            DifferenceKind::Dropped
        } else {
            DifferenceKind::Changed
        };
        let show = |s: &str| if s.is_empty() { "(unset)".to_owned() } else { s.to_owned() };
        Difference {
            field,
            kind,
            requested: show(requested),
            confirmed: show(confirmed),
        }
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.field, self.kind) {
            (Field::MountFlags, DifferenceKind::Dropped) => {
                write!(f, "mount flags were requested ({}) but the confirmation has none", self.requested)
            }
            (Field::MountFlags, DifferenceKind::Changed) => f.write_str("mount flags differ"),
            (field, DifferenceKind::Dropped) => {
                write!(f, "requested {field} {}, the confirmation drops it", self.requested)
            }
            (field, DifferenceKind::Changed) => {
                write!(f, "requested {field} {}, confirmed {}", self.requested, self.confirmed)
            }
        }
    }
}

impl fmt::Display for VolumeCapability {
    /// `SINGLE_NODE_WRITER mount(fs_type=ext4, 2 mount flags, volume_mount_group=1000)`;
    /// mount flags are counted, never shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&show_mode(self.access_mode))?;
        match &self.access_type {
            None => f.write_str(" (no access type)"),
            Some(AccessType::Block) => f.write_str(" block"),
            Some(AccessType::Mount(m)) => {
                let mut parts = Vec::new();
                if !m.fs_type.is_empty() {
                    parts.push(format!("fs_type={}", m.fs_type));
                }
                if !m.mount_flags.is_empty() {
                    parts.push(format!("{} mount flag(s)", m.mount_flags.len()));
                }
                if !m.volume_mount_group.is_empty() {
                    parts.push(format!("volume_mount_group={}", m.volume_mount_group));
                }
                write!(f, " mount({})", parts.join(", "))
            }
        }
    }
}

impl From<&v1::VolumeCapability> for VolumeCapability {
    fn from(cap: &v1::VolumeCapability) -> Self {
        VolumeCapability {
            access_mode: cap.access_mode.as_ref().map(|m| AccessMode::from_i32(m.mode)),
            access_type: cap.access_type.as_ref().map(|t| match t {
                volume_capability::AccessType::Block(_) => AccessType::Block,
                volume_capability::AccessType::Mount(m) => AccessType::Mount(Mount {
                    fs_type: m.fs_type.clone(),
                    mount_flags: m.mount_flags.clone(),
                    volume_mount_group: m.volume_mount_group.clone(),
                }),
            }),
        }
    }
}

impl From<v1::VolumeCapability> for VolumeCapability {
    fn from(cap: v1::VolumeCapability) -> Self {
        VolumeCapability::from(&cap)
    }
}

impl From<&VolumeCapability> for v1::VolumeCapability {
    fn from(cap: &VolumeCapability) -> Self {
        v1::VolumeCapability {
            access_mode: cap
                .access_mode
                .map(|m| volume_capability::AccessMode { mode: m.to_i32() }),
            access_type: cap.access_type.as_ref().map(|t| match t {
                AccessType::Block => volume_capability::AccessType::Block(volume_capability::BlockVolume {}),
                AccessType::Mount(m) => volume_capability::AccessType::Mount(volume_capability::MountVolume {
                    fs_type: m.fs_type.clone(),
                    mount_flags: m.mount_flags.clone(),
                    volume_mount_group: m.volume_mount_group.clone(),
                }),
            }),
        }
    }
}

impl From<VolumeCapability> for v1::VolumeCapability {
    fn from(cap: VolumeCapability) -> Self {
        v1::VolumeCapability::from(&cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(fs: &str, flags: &[&str], group: &str) -> VolumeCapability {
        VolumeCapability {
            access_mode: Some(AccessMode::SingleNodeWriter),
            access_type: Some(AccessType::Mount(Mount {
                fs_type: fs.into(),
                mount_flags: flags.iter().map(|s| s.to_string()).collect(),
                volume_mount_group: group.into(),
            })),
        }
    }

    #[test]
    fn converts_to_and_from_the_wire_without_loss() {
        for cap in [
            mount("ext4", &["noatime", "password=x"], "1000"),
            VolumeCapability::block(AccessMode::MultiNodeMultiWriter),
            VolumeCapability { access_mode: None, access_type: None },
            VolumeCapability { access_mode: Some(AccessMode::Other(42)), access_type: Some(AccessType::Block) },
        ] {
            let wire = v1::VolumeCapability::from(&cap);
            assert_eq!(VolumeCapability::from(&wire), cap);
        }
    }

    #[test]
    fn display_counts_mount_flags_and_never_shows_them() {
        let cap = mount("ext4", &["password=hunter2", "noatime"], "1000");
        let text = cap.to_string();
        assert_eq!(text, "SINGLE_NODE_WRITER mount(fs_type=ext4, 2 mount flag(s), volume_mount_group=1000)");
        assert!(!text.contains("hunter2"));
        assert_eq!(VolumeCapability::block(AccessMode::MultiNodeReaderOnly).to_string(), "MULTI_NODE_READER_ONLY block");
    }

    #[test]
    fn differences_name_the_field_and_both_values() {
        let requested = mount("ext4", &[], "");
        let mut confirmed = requested.clone();
        confirmed.access_mode = Some(AccessMode::MultiNodeReaderOnly);
        let d = requested.differences(&confirmed);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].to_string(), "requested access mode SINGLE_NODE_WRITER, confirmed MULTI_NODE_READER_ONLY");

        let d = requested.differences(&mount("xfs", &[], ""));
        assert_eq!(d[0].to_string(), "requested fs_type ext4, confirmed xfs");

        let d = requested.differences(&VolumeCapability::block(AccessMode::SingleNodeWriter));
        assert_eq!(d[0].to_string(), "requested access type mount, confirmed block");
        assert!(requested.differences(&requested.clone()).is_empty());
    }

    #[test]
    fn mount_flags_compare_as_a_set_and_are_never_printed() {
        let a = mount("", &["ro", "password=s3cret"], "");
        assert!(a.differences(&mount("", &["password=s3cret", "ro"], "")).is_empty());
        let changed = a.differences(&mount("", &["ro"], ""));
        assert_eq!(changed[0].to_string(), "mount flags differ");
        assert_eq!(changed[0].kind, DifferenceKind::Changed);
        let dropped = a.differences(&mount("", &[], ""));
        assert_eq!(dropped[0].kind, DifferenceKind::Dropped);
        for d in changed.iter().chain(&dropped) {
            assert!(!format!("{d} {d:?}").contains("s3cret"));
        }
    }

    #[test]
    fn an_unset_confirmed_field_the_request_set_is_dropped() {
        let d = mount("ext4", &[], "1000").differences(&mount("ext4", &[], ""));
        assert_eq!(d[0].kind, DifferenceKind::Dropped);
        assert_eq!(d[0].to_string(), "requested volume_mount_group 1000, the confirmation drops it");
    }
}
