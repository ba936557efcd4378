//! The reference plugin's shared validation rules: required fields, names, capabilities and
//! access modes, capacity ranges, volume and publish contexts. Each rule is one small function
//! returning the status code the specification names, so a quirk profile can replace one rule
//! without touching the RPCs that use it.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use tonic::Status;

use crate::proto::v1::{
    self, controller_service_capability::rpc::Type as ControllerRpc,
    node_service_capability::rpc::Type as NodeRpc, volume_capability::access_mode::Mode,
};

use super::config::Capabilities;
use super::state::{Access, Capability, StringMap, VolumeRecord};

/// The file system types volumes can be created with ("" means [`DEFAULT_FS_TYPE`]).
pub const FS_TYPES: [&str; 2] = ["ext4", "xfs"];
/// The file system of a mount volume created without an fs_type.
pub const DEFAULT_FS_TYPE: &str = "ext4";

/// INVALID_ARGUMENT "`field` is required" when `value` is empty.
pub fn required(value: &str, field: &str) -> Result<(), Status> {
    if value.is_empty() {
        Err(Status::invalid_argument(format!("{field} is required")))
    } else {
        Ok(())
    }
}

/// A required path field that must be absolute.
pub fn required_path(value: &str, field: &str) -> Result<PathBuf, Status> {
    required(value, field)?;
    let path = PathBuf::from(value);
    if !path.is_absolute() {
        return Err(Status::invalid_argument(format!(
            "{field} must be an absolute path"
        )));
    }
    Ok(path)
}

/// Names (of volumes, snapshots, group snapshots) must not contain the control characters the
/// specification bans: U+0000-U+0008, U+000B, U+000C, U+000E-U+001F, U+007F-U+009F.
pub fn name(value: &str, field: &str) -> Result<(), Status> {
    required(value, field)?;
    let banned = |c: char| matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}'..='\u{9f}');
    if value.chars().any(banned) {
        return Err(Status::invalid_argument(format!(
            "{field} contains a banned control character"
        )));
    }
    Ok(())
}

/// A required, well-formed capability.
pub fn capability(cap: Option<&v1::VolumeCapability>, field: &str) -> Result<Capability, Status> {
    let cap = cap.ok_or_else(|| Status::invalid_argument(format!("{field} is required")))?;
    Capability::from_proto(cap).map_err(|why| Status::invalid_argument(format!("{field} {why}")))
}

/// A required, non-empty list of well-formed capabilities.
pub fn capabilities(caps: &[v1::VolumeCapability], field: &str) -> Result<Vec<Capability>, Status> {
    if caps.is_empty() {
        return Err(Status::invalid_argument(format!("{field} is required")));
    }
    caps.iter()
        .enumerate()
        .map(|(i, c)| {
            Capability::from_proto(c)
                .map_err(|why| Status::invalid_argument(format!("{field}[{i}] {why}")))
        })
        .collect()
}

/// Why a capability's file system type is unsupported, if it is.
pub fn fs_type_problem(cap: &Capability) -> Option<String> {
    let fs = cap.fs_type();
    (!fs.is_empty() && !FS_TYPES.contains(&fs))
        .then(|| format!("file system type {fs:?} is not supported (use ext4 or xfs)"))
}

/// INVALID_ARGUMENT for an unsupported file system type.
pub fn fs_type(cap: &Capability) -> Result<(), Status> {
    match fs_type_problem(cap) {
        Some(why) => Err(Status::invalid_argument(why)),
        None => Ok(()),
    }
}

/// Whether the mode is one of the two modes that need SINGLE_NODE_MULTI_WRITER.
pub fn needs_single_node_multi_writer(mode: Mode) -> bool {
    matches!(
        mode,
        Mode::SingleNodeSingleWriter | Mode::SingleNodeMultiWriter
    )
}

/// Why the controller refuses an access mode, if it does.
pub fn controller_mode_problem(caps: &Capabilities, cap: &Capability) -> Option<String> {
    (needs_single_node_multi_writer(cap.mode())
        && !caps.has_controller(ControllerRpc::SingleNodeMultiWriter))
    .then(|| {
        format!(
            "access mode {} needs the controller capability SINGLE_NODE_MULTI_WRITER, which is not advertised",
            cap.mode_name()
        )
    })
}

/// INVALID_ARGUMENT for an access mode the controller does not advertise.
pub fn controller_mode(caps: &Capabilities, cap: &Capability) -> Result<(), Status> {
    match controller_mode_problem(caps, cap) {
        Some(why) => Err(Status::invalid_argument(why)),
        None => Ok(()),
    }
}

/// INVALID_ARGUMENT for an access mode or mount group the node does not advertise.
pub fn node_capability(caps: &Capabilities, cap: &Capability) -> Result<(), Status> {
    if needs_single_node_multi_writer(cap.mode()) && !caps.has_node(NodeRpc::SingleNodeMultiWriter)
    {
        return Err(Status::invalid_argument(format!(
            "access mode {} needs the node capability SINGLE_NODE_MULTI_WRITER, which is not advertised",
            cap.mode_name()
        )));
    }
    if !cap.mount_group().is_empty() && !caps.has_node(NodeRpc::VolumeMountGroup) {
        return Err(Status::invalid_argument(
            "volume_mount_group needs the node capability VOLUME_MOUNT_GROUP, which is not advertised",
        ));
    }
    Ok(())
}

/// Whether a volume created with access mode `created` can be used with `requested`: the
/// same mode, or a mode that promises no more (fewer nodes, fewer writers).
pub fn mode_covers(created: Mode, requested: Mode) -> bool {
    use Mode::*;
    if created == requested {
        return true;
    }
    match created {
        MultiNodeMultiWriter => requested != Unknown,
        MultiNodeSingleWriter => matches!(
            requested,
            MultiNodeReaderOnly
                | SingleNodeWriter
                | SingleNodeReaderOnly
                | SingleNodeSingleWriter
                | SingleNodeMultiWriter
        ),
        MultiNodeReaderOnly => requested == SingleNodeReaderOnly,
        SingleNodeMultiWriter => {
            matches!(
                requested,
                SingleNodeWriter | SingleNodeSingleWriter | SingleNodeReaderOnly
            )
        }
        // The spec asks plugins that know the newer single-node modes to keep accepting the
        // older SINGLE_NODE_WRITER, and the other way round.
        SingleNodeWriter | SingleNodeSingleWriter => {
            matches!(
                requested,
                SingleNodeWriter | SingleNodeSingleWriter | SingleNodeReaderOnly
            )
        }
        SingleNodeReaderOnly | Unknown => false,
    }
}

/// Whether an access mode lets the volume be used on one node only.
pub fn is_single_node(mode: Mode) -> bool {
    matches!(
        mode,
        Mode::SingleNodeWriter
            | Mode::SingleNodeReaderOnly
            | Mode::SingleNodeSingleWriter
            | Mode::SingleNodeMultiWriter
    )
}

/// Whether an access mode lets the volume be published at several targets on one node
/// (the NodePublishVolume tables of the spec).
pub fn allows_several_targets(mode: Mode) -> bool {
    matches!(
        mode,
        Mode::MultiNodeReaderOnly
            | Mode::MultiNodeSingleWriter
            | Mode::MultiNodeMultiWriter
            | Mode::SingleNodeMultiWriter
    )
}

/// Whether an access mode only allows reading.
pub fn is_reader_only(mode: Mode) -> bool {
    matches!(mode, Mode::SingleNodeReaderOnly | Mode::MultiNodeReaderOnly)
}

/// Why `volume` cannot be used with `cap`, if it cannot: an access type it was not created
/// for, a different file system, or an access mode none of its capabilities covers.
/// Statically provisioned volumes accept any well-formed capability.
pub fn volume_support_problem(volume: &VolumeRecord, cap: &Capability) -> Option<String> {
    if volume.static_volume {
        return (cap.is_block() && volume.static_path.is_some())
            .then(|| format!("volume {} is a directory and has no block access", volume.id));
    }
    if cap.is_block() && !volume.has_block {
        return Some(format!(
            "volume {} was not created for block access",
            volume.id
        ));
    }
    if !cap.is_block() && !volume.has_mount {
        return Some(format!(
            "volume {} was not created for mount access",
            volume.id
        ));
    }
    if let Some(why) = fs_type_problem(cap) {
        return Some(why);
    }
    let requested_fs = cap.fs_type();
    if !requested_fs.is_empty()
        && let Some(created_fs) = volume_fs_type(volume)
        && created_fs != requested_fs
    {
        return Some(format!(
            "file system {requested_fs:?} differs from the volume's {created_fs:?}"
        ));
    }
    let modes: BTreeSet<&'static str> = volume.capabilities.iter().map(|c| c.mode_name()).collect();
    if !volume
        .capabilities
        .iter()
        .any(|c| mode_covers(c.mode(), cap.mode()))
    {
        return Some(format!(
            "access mode {} is not covered by the volume's access modes ({})",
            cap.mode_name(),
            modes.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    None
}

/// The file system a volume was created with (the default, ext4, when none was named);
/// `None` for volumes without mount access.
pub fn volume_fs_type(volume: &VolumeRecord) -> Option<&str> {
    let mut mounts = volume.capabilities.iter().filter_map(|c| match &c.access {
        Access::Mount { fs_type, .. } => Some(fs_type.as_str()),
        Access::Block => None,
    });
    let first = mounts.next()?;
    Some(
        std::iter::once(first)
            .chain(mounts)
            .find(|f| !f.is_empty())
            .unwrap_or(DEFAULT_FS_TYPE),
    )
}

/// `text` cut to the spec's general 128-byte string limit (with an ellipsis when cut).
pub fn within_string_limit(text: String) -> String {
    const LIMIT: usize = crate::rules::STRING_LIMIT;
    if text.len() <= LIMIT {
        return text;
    }
    let mut cut = LIMIT - '…'.len_utf8();
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

/// The status for a capability the volume does not support, per RPC. The spec's
/// NodeStageVolume and NodePublishVolume tables name FAILED_PRECONDITION ("Exceeds
/// capabilities"); ControllerPublishVolume has no row, and we answer the same way.
/// ControllerExpandVolume, NodeExpandVolume and ControllerModifyVolume name INVALID_ARGUMENT.
pub fn unsupported_capability(rpc: &str, why: String) -> Status {
    match rpc {
        "ControllerExpandVolume" | "NodeExpandVolume" | "ControllerModifyVolume" => {
            Status::invalid_argument(why)
        }
        _ => Status::failed_precondition(why),
    }
}

/// A validated capacity range: `(required, limit)`, 0 meaning unset.
pub fn capacity_range(range: Option<&v1::CapacityRange>) -> Result<Option<(i64, i64)>, Status> {
    let Some(r) = range else { return Ok(None) };
    if r.required_bytes < 0 || r.limit_bytes < 0 {
        return Err(Status::invalid_argument(
            "capacity_range must not be negative",
        ));
    }
    if r.limit_bytes > 0 && r.limit_bytes < r.required_bytes {
        return Err(Status::invalid_argument(format!(
            "capacity_range.limit_bytes {} is smaller than required_bytes {}",
            r.limit_bytes, r.required_bytes
        )));
    }
    Ok(Some((r.required_bytes, r.limit_bytes)))
}

/// The first key where `given` differs from `expected`, and how.
pub fn map_difference(expected: &StringMap, given: &HashMap<String, String>) -> Option<String> {
    let keys: BTreeSet<&String> = expected.keys().chain(given.keys()).collect();
    keys.into_iter()
        .find_map(|k| match (expected.get(k), given.get(k)) {
            (Some(a), Some(b)) if a == b => None,
            (Some(_), Some(_)) => Some(format!("key {k:?} has a different value")),
            (Some(_), None) => Some(format!("key {k:?} is missing")),
            (None, _) => Some(format!("key {k:?} is unexpected")),
        })
}

/// The volume_context passed to a validation or publishing RPC must equal the one CreateVolume
/// handed out (INVALID_ARGUMENT naming the first differing key, never a value). With
/// `--require-context` a missing context is FAILED_PRECONDITION. A pre-provisioned volume's
/// context is the CO's, not ours: only its absence is refused (when required).
pub fn volume_context(
    rpc: &str,
    volume: &VolumeRecord,
    given: &HashMap<String, String>,
    require: bool,
) -> Result<(), Status> {
    if volume.static_volume {
        if given.is_empty() && require && !volume.context.is_empty() {
            return Err(Status::failed_precondition(format!(
                "{rpc}: volume_context is missing; a pre-provisioned volume needs the context it was registered with"
            )));
        }
        return Ok(());
    }
    if given.is_empty() {
        if require && !volume.context.is_empty() {
            return Err(Status::failed_precondition(format!(
                "{rpc}: volume_context is missing; it must carry the volume_context CreateVolume returned"
            )));
        }
        return Ok(());
    }
    match map_difference(&volume.context, given) {
        Some(diff) => Err(Status::invalid_argument(format!(
            "volume_context does not match the volume's: {diff}"
        ))),
        None => Ok(()),
    }
}

/// The publish_context passed to NodeStageVolume / NodePublishVolume must equal the one
/// ControllerPublishVolume handed out for this node (INVALID_ARGUMENT naming the first
/// differing key). With `--require-context` and controller publishing on, a missing context
/// is FAILED_PRECONDITION.
pub fn publish_context(
    rpc: &str,
    expected: Option<&StringMap>,
    given: &HashMap<String, String>,
    require: bool,
) -> Result<(), Status> {
    let empty = StringMap::new();
    let expected = expected.unwrap_or(&empty);
    if given.is_empty() {
        if require && !expected.is_empty() {
            return Err(Status::failed_precondition(format!(
                "{rpc}: publish_context is missing; it must carry the publish_context ControllerPublishVolume returned"
            )));
        }
        return Ok(());
    }
    match map_difference(expected, given) {
        Some(diff) => Err(Status::invalid_argument(format!(
            "publish_context does not match what ControllerPublishVolume returned: {diff}"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn modes_cover_weaker_modes_only() {
        use Mode::*;
        assert!(mode_covers(MultiNodeMultiWriter, SingleNodeWriter));
        assert!(mode_covers(SingleNodeWriter, SingleNodeSingleWriter));
        assert!(mode_covers(SingleNodeSingleWriter, SingleNodeWriter));
        assert!(!mode_covers(SingleNodeWriter, MultiNodeMultiWriter));
        assert!(!mode_covers(SingleNodeReaderOnly, SingleNodeWriter));
        assert!(!mode_covers(MultiNodeReaderOnly, MultiNodeSingleWriter));
        assert!(mode_covers(MultiNodeReaderOnly, SingleNodeReaderOnly));
    }

    #[test]
    fn names_reject_banned_control_characters() {
        let refused = |value: &str| {
            let status = name(value, "name").expect_err(value);
            (status.code(), status.message().to_owned())
        };
        assert!(name("ok name\twith tab\nand newline", "name").is_ok());
        let banned = (Code::InvalidArgument, "name contains a banned control character".to_owned());
        assert_eq!(refused("bad\u{7}"), banned);
        assert_eq!(refused("bad\u{85}"), banned);
        assert_eq!(refused(""), (Code::InvalidArgument, "name is required".to_owned()));
        assert!(name(&"x".repeat(128), "name").is_ok());
    }

    #[test]
    fn ranges_and_maps_are_checked() {
        let r = |a, b| v1::CapacityRange {
            required_bytes: a,
            limit_bytes: b,
        };
        assert_eq!(capacity_range(Some(&r(5, 10))).unwrap(), Some((5, 10)));
        assert_eq!(capacity_range(None).unwrap(), None);
        let refused = |a, b| {
            let status = capacity_range(Some(&r(a, b))).expect_err("refused");
            (status.code(), status.message().to_owned())
        };
        assert_eq!(refused(-1, 0), (Code::InvalidArgument, "capacity_range must not be negative".to_owned()));
        assert_eq!(refused(0, -1), (Code::InvalidArgument, "capacity_range must not be negative".to_owned()));
        assert_eq!(
            refused(10, 5),
            (Code::InvalidArgument, "capacity_range.limit_bytes 5 is smaller than required_bytes 10".to_owned())
        );
        assert_eq!(capacity_range(Some(&r(10, 0))).unwrap(), Some((10, 0)));
        let expected: StringMap = [("a".into(), "1".into())].into();
        let given: HashMap<String, String> = [("a".into(), "2".into())].into();
        let diff = map_difference(&expected, &given).unwrap();
        assert!(diff.contains("\"a\"") && !diff.contains('2'), "{diff}");
        assert!(map_difference(&expected, &[("a".into(), "1".into())].into()).is_none());
    }
}
