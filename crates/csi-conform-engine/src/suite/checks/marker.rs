//! The `marker` check: one seeded data marker written into, verified in or removed from a
//! published volume the scenario created (the markers themselves are csi-client's `marker`;
//! the node's files are reached through its inspector, here or through the node's agent).

use std::{collections::BTreeMap, path::PathBuf};

use super::{Args, ArgReader, Check, CheckDef, CheckFuture, data::unreachable_files};
use crate::marker::{self, Marker, Placement};
use crate::suite::{
    ctx::{CheckOutcome, ScenarioCtx, bad_arg},
    resources::Resource,
    settings::AccessType,
    vars::{Ty, Val},
};

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<MarkerCheck>()];

struct MarkerCheck;

/// The arguments of `marker`.
struct MarkerArgs {
    /// `write`, `verify` or `remove`.
    action: String,
    /// A volume this scenario created.
    volume_id: String,
    /// Where it is published.
    path: String,
    /// The node endpoint's index.
    node: i64,
    /// `mount` or `block` (default: `--access-type`).
    access: Option<String>,
    /// The marker's label.
    label: String,
    /// A block marker's second offset, as `write` saved it.
    tail: Option<i64>,
}

impl Args for MarkerArgs {
    fn read(a: &mut ArgReader<'_>) -> Self {
        MarkerArgs {
            action: a.choice("action", &["write", "verify", "remove"]),
            volume_id: a.str("volume_id"),
            path: a.str("path"),
            node: a.int("node", 0),
            access: a.opt_choice("access", &["mount", "block"]),
            label: a.opt_str("label").unwrap_or_else(|| "A".to_owned()),
            tail: a.opt_int("tail"),
        }
    }
}

impl Check for MarkerCheck {
    type Args = MarkerArgs;
    const NAME: &'static str = "marker";
    const DESCRIPTION: &'static str = "writes, verifies (by digest) or removes a seeded data marker in a published volume the scenario created; saves digest, tail";
    const RPCS: &'static [&'static str] = &[];

    fn outputs() -> Vec<(&'static str, Ty)> {
        marker_outputs()
    }

    fn run(ctx: &mut ScenarioCtx, args: MarkerArgs) -> CheckFuture<'_> {
        Box::pin(marker_step(ctx, args))
    }
}

/// What `marker` saves: the marker's digest and, for a block volume, the offset of its
/// second copy (pass it as `tail` to verify or remove it after the volume has grown).
fn marker_outputs() -> Vec<(&'static str, Ty)> {
    vec![("digest", Ty::Scalar), ("tail", Ty::Scalar)]
}

/// Runs the `marker` check: one marker written into, verified in or removed from the
/// volume `volume_id` published at `path` on node `node`. Only volumes this scenario created
/// are ever written to.
async fn marker_step(ctx: &mut ScenarioCtx, args: MarkerArgs) -> CheckOutcome {
    let MarkerArgs { action, volume_id, path, node, access, label, tail } = args;
    let (Ok(node), Ok(tail)) = (usize::try_from(node), tail.map(u64::try_from).transpose()) else {
        return bad_arg(ctx, "check marker: node and tail must be whole numbers from 0".into());
    };
    let block = match access {
        Some(a) => a == "block",
        None => ctx.requests().access_type == AccessType::Block,
    };
    let created = ctx.tracker().teardown_order().iter().any(|t| {
        matches!(&t.resource, Resource::Volume { volume_id: id } if *id == volume_id)
    });
    if !created {
        return bad_arg(
            ctx,
            format!("check marker writes only into volumes the scenario created, and {volume_id:?} is not one of them"),
        );
    }
    if ctx.inspector(node).is_none() {
        return bad_arg(ctx, format!("check marker: the run has no node endpoint {node}"));
    }
    if let Some(reason) = unreachable_files(ctx, node) {
        return CheckOutcome::Skip(reason);
    }
    let target = PathBuf::from(&path);
    let Some(files) = ctx.inspector(node).filter(|i| i.reaches_files()) else {
        return CheckOutcome::Skip(unreachable_files(ctx, node).unwrap_or_default());
    };
    let marker = Marker::new(ctx.seed(), ctx.name(), &label);
    let placement = match (block, tail) {
        (false, _) => Some(Placement::File),
        (true, Some(tail)) => Some(Placement::Block { tail }),
        (true, None) => match files.block_size(&target) {
            Ok(size) if size >= 2 * marker::MARKER_LEN as u64 => Some(Placement::Block { tail: size - marker::MARKER_LEN as u64 }),
            _ => None,
        },
    };
    let at = format!("{path} on node endpoint {node}");
    let result = match (action.as_str(), placement) {
        ("write", placement) => files.write_marker(&target, block, &marker, placement.as_ref()).map(Some).map_err(|e| {
            ("data-write", format!("writing marker {label} into volume {volume_id} at {at} failed: {e}"))
        }),
        ("verify", Some(placement)) => match files.verify_marker(&target, &placement, &marker, &[]) {
            Ok(None) => Ok(Some(placement)),
            Ok(Some((place, m))) => {
                Err(("data-lost", format!("volume {volume_id} at {at}: {}", m.describe(&place, &marker))))
            }
            Err(e) => Err(("data-read", format!("reading marker {label} from volume {volume_id} at {at} failed: {e}"))),
        },
        (_, Some(placement)) => files.remove_marker(&target, &placement)
            .map(|()| Some(placement))
            .map_err(|e| ("data-cleanup", format!("removing marker {label} from {at} failed: {e}"))),
        (_, None) => Err(("data-lost", format!("volume {volume_id} at {at} is too small to hold marker {label}"))),
    };
    match result {
        Ok(placement) => {
            let tail = match placement {
                Some(Placement::Block { tail }) => Val::Int(i128::from(tail)),
                _ => Val::Null,
            };
            CheckOutcome::Done(BTreeMap::from([
                ("digest".to_owned(), Val::Str(marker.digest())),
                ("tail".to_owned(), tail),
            ]))
        }
        Err((kind, message)) => {
            ctx.fail(kind, message);
            CheckOutcome::Stop
        }
    }
}
