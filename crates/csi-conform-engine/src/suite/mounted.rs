//! Whether a node path is a mount point, by two independent witnesses: the node's mount table
//! (mountinfo, as the [`Inspector`] reads and matches it) and the path itself (statx(2)'s
//! `STATX_ATTR_MOUNT_ROOT`, asked through the node's root: the kernel's own path walk, with
//! none of our parsing or path matching). A verdict that a volume is, or is not, staged or
//! published rests on both when both can be asked; when they disagree nothing is decided:
//! the disagreement is an inconclusive finding with both observations as evidence (neither
//! witness is the plugin's word, so no rule of the plugin's is broken by it).

use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, StatxAttributes, StatxFlags};

use super::{
    ctx::ScenarioCtx,
    inspect::{Inspector, MountTableError},
};
use crate::{mounts::MountInfo, report::Finding};

/// What the two witnesses say of one path.
#[derive(Debug)]
pub(crate) enum Seen {
    /// They agree, or only the mount table can be asked: the mounts there, bottom first
    /// (none: not a mount point).
    Agreed(Vec<MountInfo>),
    /// They disagree: the inconclusive finding that says so.
    Disagree(Box<Finding>),
}

/// The second witness: whether `path` on the node is the root of a mount, by statx through
/// the node's root; `None` when it cannot be told (the node's files are out of reach, the
/// kernel does not report the attribute, the path cannot be stat'ed). A path that does not
/// exist is no mount point.
pub(crate) fn path_says(inspector: &Inspector, path: &Path) -> Option<bool> {
    let local = resolved_local(inspector, path)?;
    match rustix::fs::statx(CWD, &local, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::TYPE) {
        Ok(st) if st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) => {
            Some(st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT))
        }
        Ok(_) => None,
        Err(rustix::io::Errno::NOENT) => Some(false),
        Err(_) => None,
    }
}

/// `path` on the node, free of symlinks in the node's view (as the mount table names it),
/// opened from here: through `/proc/PID/root` for a plugin in another mount namespace.
fn resolved_local(inspector: &Inspector, path: &Path) -> Option<PathBuf> {
    if !inspector.sees_mounts() {
        return None;
    }
    let site = inspector.site();
    if site.shared {
        return Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
    }
    let root = PathBuf::from(format!("/proc/{}/root", site.pid?));
    let inside = crate::mounts::resolve_in(&root, path);
    Some(root.join(inside.strip_prefix("/").unwrap_or(&inside)))
}

/// The mounts at exactly `path` on the node, by both witnesses; `Ok(None)` when the mount
/// checks are skipped.
pub(crate) fn mounts_at(ctx: &ScenarioCtx, inspector: &Inspector, path: &Path) -> Result<Option<Seen>, MountTableError> {
    let Some(stacked) = inspector.mounts_at(path)? else {
        return Ok(None);
    };
    Ok(Some(match path_says(inspector, path) {
        // The table says mounted exactly when it lists something there.
        Some(root) if root == stacked.is_empty() => Seen::Disagree(Box::new(disagreement(ctx, path, &stacked, root))),
        _ => Seen::Agreed(stacked),
    }))
}

/// The mounts at or below `dir` on the node that the path witness does not deny (each listed
/// mount point asked in turn); a disagreement when the table lists some and the paths deny
/// them all, or lists none while `dir` itself is a mount root. `Ok(None)` when the mount
/// checks are skipped.
pub(crate) fn mounts_under(ctx: &ScenarioCtx, inspector: &Inspector, dir: &Path) -> Result<Option<Seen>, MountTableError> {
    let Some(listed) = inspector.mounts_under(dir)? else {
        return Ok(None);
    };
    let Some(first) = listed.first() else {
        return Ok(Some(match path_says(inspector, dir) {
            Some(true) => Seen::Disagree(Box::new(disagreement(ctx, dir, &listed, true))),
            _ => Seen::Agreed(listed),
        }));
    };
    let first = first.mount_point.clone();
    let kept: Vec<MountInfo> =
        listed.iter().filter(|m| path_says(inspector, &m.mount_point) != Some(false)).cloned().collect();
    Ok(Some(if kept.is_empty() {
        Seen::Disagree(Box::new(disagreement(ctx, &first, &listed, false)))
    } else {
        Seen::Agreed(kept)
    }))
}

/// The inconclusive finding of the two witnesses disagreeing about `path`.
fn disagreement(ctx: &ScenarioCtx, path: &Path, table: &[MountInfo], root: bool) -> Finding {
    let shown = path.display().to_string();
    let witnesses = ctx.witnesses();
    let table_says = match table.last() {
        Some(m) => format!("lists {} mounted there ({} from {})", plural(table.len()), m.fs_type, m.source),
        None => "lists nothing mounted there".to_owned(),
    };
    let path_says = if root { "is the root of a mount" } else { "is no mount point (the path does not lead to a mount)" };
    let evidence =
        vec![witnesses.observe("mount table", &shown, table_says.clone()), witnesses.observe("statx", &shown, path_says)];
    let mut f = Finding::inconclusive(
        "witnesses-disagree",
        format!(
            "whether {shown} is a mount point is not decided: the node's mount table {table_says}, while the path \
             itself (statx) {path_says}; neither is the plugin's word, so the disagreement blames no one"
        ),
    );
    f.evidence = evidence;
    f
}

fn plural(n: usize) -> String {
    if n == 1 { "a file system".to_owned() } else { format!("{n} file systems") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{client::Endpoint, suite::inspect::MountCheck};

    #[tokio::test]
    async fn the_path_witness_sees_mount_roots_where_the_node_sees_them() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let _listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let here = Inspector::for_node(0, &Endpoint::Unix(socket), None, MountCheck::Auto).await;
        // `/` is a mount root wherever the kernel reports the attribute; a plain directory
        // and a missing path are not.
        if let Some(root) = path_says(&here, Path::new("/")) {
            assert!(root);
            assert_eq!(path_says(&here, dir.path()), Some(false));
        }
        assert_eq!(path_says(&here, &dir.path().join("missing")), Some(false));
        let off = Inspector::for_node(0, &Endpoint::Unix(dir.path().join("s.sock")), None, MountCheck::Off).await;
        assert_eq!(path_says(&off, Path::new("/")), None, "no mount checks, no witness");
    }
}
