//! The `path-state` check: inspects a path where the node plugin sees it (its mount namespace),
//! and, with `group`, the group a mount shows (a published volume_mount_group).

use std::{collections::BTreeMap, path::Path};

use super::{Args, ArgReader, Check, CheckDef, CheckFuture};
use crate::{
    report::{Finding, Severity},
    suite::{
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
        inspect::{self, PATH_STATES},
        mounted::{self, Seen},
    },
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<PathState>()];

struct PathState;

/// Its arguments.
struct Inspect {
    /// The path, as the node plugin sees it.
    path: String,
    /// The state it must be in (one of `PATH_STATES`).
    is: String,
    /// The node endpoint's index.
    node: i64,
    /// A numeric gid a mount there must show.
    group: Option<String>,
}

impl Args for Inspect {
    fn read(a: &mut ArgReader<'_>) -> Self {
        Inspect { path: a.str("path"), is: a.choice("is", PATH_STATES), node: a.int("node", 0), group: a.opt_str("group") }
    }
}

impl Check for PathState {
    type Args = Inspect;
    const NAME: &'static str = "path-state";
    const DESCRIPTION: &'static str = "inspects a path where the node plugin sees it (its mount namespace): absent, directory, file, exists, mount-point, not-mount-point or read-only-mount; with `group` (a numeric gid), a mount point whose group is that gid, by the path's owner group or the mount's gid= option";
    const RPCS: &'static [&'static str] = &[];

    fn run(ctx: &mut ScenarioCtx, args: Inspect) -> CheckFuture<'_> {
        Box::pin(path_state(ctx, args))
    }
}

async fn path_state(ctx: &mut ScenarioCtx, args: Inspect) -> CheckOutcome {
    let Inspect { path, is: state, node, group } = args;
    let Some(inspector) = usize::try_from(node).ok().and_then(|n| ctx.inspector(n)) else {
        return bad_arg(ctx, format!("path-state: the run has no node endpoint {node}"));
    };
    if let Some(why) = inspector.unreachable() {
        return CheckOutcome::Skip(format!("path-state cannot inspect {path}: {why}"));
    }
    if inspect::needs_mounts(&state)
        && let Some(why) = inspector.mounts_skipped()
    {
        return CheckOutcome::Skip(format!("path-state cannot tell whether {path} is {state}: {why}"));
    }
    let found = match judge(ctx, &inspector, Path::new(&path), &state).await {
        Ok(Ok(found)) => found,
        Ok(Err(disagreement)) => {
            ctx.push(disagreement);
            return CheckOutcome::Stop;
        }
        Err(e) => {
            let kind = if matches!(e, inspect::CheckError::Command(_)) { "check-path-cmd" } else { "mount-table" };
            ctx.push(Finding::new(Severity::Error, kind, e.to_string()));
            return CheckOutcome::Stop;
        }
    };
    if let Err(found) = found {
        ctx.fail("path-state", format!("{path} {found}, expected {state}"));
        return CheckOutcome::Stop;
    }
    let Some(group) = group else {
        return CheckOutcome::Done(BTreeMap::new());
    };
    let Ok(gid) = group.trim().parse::<u32>() else {
        return bad_arg(ctx, format!("path-state: group must be a numeric gid, not {group:?}"));
    };
    match mount_group(&inspector, Path::new(&path), gid) {
        Ok(GroupSeen::Matches) => CheckOutcome::Done(BTreeMap::new()),
        Ok(GroupSeen::Unseen(why)) => CheckOutcome::Skip(format!("path-state cannot see the group of {path}: {why}")),
        Ok(GroupSeen::Differs(seen)) => {
            ctx.fail("mount-group", format!("{path} {seen}, expected group {gid} (the volume_mount_group passed as the mount's group)"));
            CheckOutcome::Stop
        }
        Err(e) => {
            ctx.push(Finding::new(Severity::Error, "mount-table", e.to_string()));
            CheckOutcome::Stop
        }
    }
}

/// Checks a `path-state` word against the node's view: a mount state by both witnesses
/// (the mount table and the path itself, see [`mounted`]), whose disagreement is the
/// inconclusive finding returned instead.
async fn judge(
    ctx: &ScenarioCtx,
    inspector: &inspect::Inspector,
    path: &Path,
    state: &str,
) -> Result<Result<Result<(), String>, Finding>, inspect::CheckError> {
    if !inspect::needs_mounts(state) {
        return inspector.check(path, state).await.map(Ok);
    }
    let kind = inspector.kind(path).await?.unwrap_or(inspect::PathKind::NotFound);
    Ok(match mounted::mounts_at(ctx, inspector, path)? {
        Some(Seen::Disagree(f)) => Err(*f),
        Some(Seen::Agreed(stacked)) => Ok(inspect::judge_mount(kind, stacked.last(), state)),
        None => Ok(inspect::judge_mount(kind, None, state)),
    })
}

/// What the node shows of a mount's group.
#[derive(Debug, PartialEq, Eq)]
enum GroupSeen {
    /// The path's owner group is the gid, or the mount's options say `gid=` it.
    Matches,
    /// Neither: what both witnesses show.
    Differs(String),
    /// The group cannot be seen from here, for this reason.
    Unseen(String),
}

/// The group of the mount at `path` on the node, by two witnesses: the owner group of the
/// mounted directory (`stat`; what a chgrp of the file system's root, or a file system that
/// takes the group from the mount, shows) and the `gid=` option the mount table shows (file
/// systems without owners, such as vfat or NFS with an id map, carry the group only there).
/// Either one showing `gid` is the group passed; the group differs only when both show
/// something else.
fn mount_group(inspector: &inspect::Inspector, path: &Path, gid: u32) -> Result<GroupSeen, inspect::MountTableError> {
    if !inspector.reaches_files() {
        return Ok(GroupSeen::Unseen("the node's files are not reachable from here (only through --check-path-cmd)".into()));
    };
    if let Some(why) = inspector.mounts_skipped() {
        return Ok(GroupSeen::Unseen(why.to_owned()));
    }
    let Some(Some(mount)) = inspector.mount_entry(path)? else {
        return Ok(GroupSeen::Unseen("nothing is mounted there".into()));
    };
    let owner = match inspector.gid(path) {
        Ok(gid) => gid,
        Err(e) => return Ok(GroupSeen::Unseen(format!("stat: {e}"))),
    };
    let option = mount.super_options.iter().chain(&mount.mount_options).find_map(|o| o.strip_prefix("gid="));
    if owner == gid || option.is_some_and(|g| g.parse() == Ok(gid)) {
        return Ok(GroupSeen::Matches);
    }
    let shown = option.map_or_else(|| "no gid= option".to_owned(), |g| format!("gid={g}"));
    Ok(GroupSeen::Differs(format!("belongs to group {owner}, and its mount ({}) shows {shown}", mount.fs_type)))
}
