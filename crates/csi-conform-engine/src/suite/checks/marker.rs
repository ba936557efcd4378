//! The `marker` check: one seeded data marker written into, verified in or removed from a
//! published volume the scenario created (the markers themselves are `suite::marker`).

use std::{collections::BTreeMap, path::PathBuf};

use super::{CheckDef, data::unreachable_files};
use crate::suite::{
    catalog::{ArgKind, ArgSpec, CheckArgs, CheckSpec},
    ctx::{CheckOutcome, ScenarioCtx, bad_arg},
    marker::{self, Marker, Placement},
    resources::Resource,
    settings::AccessType,
    vars::{Ty, Val},
};

pub(super) static CHECK: CheckDef = CheckDef {
    spec: CheckSpec {
        name: "marker",
        description: "writes, verifies (by digest) or removes a seeded data marker in a published volume the scenario created; saves digest, tail",
        args: MARKER_ARGS,
        outputs: marker_outputs,
        rpcs: &[],
        holds: &[],
        demand: CheckSpec::no_demand,
        cost: CheckSpec::few_rpcs,
        orchestrated: false,
    },
    run: |ctx, args| Box::pin(marker_step(ctx, args)),
};

/// The arguments of `marker`.
const MARKER_ARGS: &[ArgSpec] = &[
    ArgSpec { name: "action", kind: ArgKind::Choice(&["write", "verify", "remove"]), required: true },
    ArgSpec { name: "volume_id", kind: ArgKind::Str, required: true },
    ArgSpec { name: "path", kind: ArgKind::Str, required: true },
    ArgSpec { name: "node", kind: ArgKind::Int, required: false },
    ArgSpec { name: "access", kind: ArgKind::Choice(&["mount", "block"]), required: false },
    ArgSpec { name: "label", kind: ArgKind::Str, required: false },
    ArgSpec { name: "tail", kind: ArgKind::Int, required: false },
];

/// What `marker` saves: the marker's digest and, for a block volume, the offset of its
/// second copy (pass it as `tail` to verify or remove it after the volume has grown).
fn marker_outputs() -> Vec<(&'static str, Ty)> {
    vec![("digest", Ty::Scalar), ("tail", Ty::Scalar)]
}

/// Runs the `marker` check: one marker written into, verified in or removed from the
/// volume `volume_id` published at `path` on node `node`. Only volumes this scenario created
/// are ever written to.
async fn marker_step(ctx: &mut ScenarioCtx, args: CheckArgs) -> CheckOutcome {
    let text = |name: &str| match args.get(name) {
        Some(Val::Null) | None => None,
        Some(v) => v.to_text(),
    };
    let (Some(action), Some(volume_id), Some(path)) = (text("action"), text("volume_id"), text("path")) else {
        return bad_arg(ctx, "check marker needs action, volume_id and path".into());
    };
    let number = |name: &str| text(name).map(|t| t.parse::<u64>().map_err(|_| format!("argument {name} must be a whole number, not {t:?}")));
    let (node, tail) = match (number("node").transpose(), number("tail").transpose()) {
        (Ok(node), Ok(tail)) => (node.unwrap_or(0) as usize, tail),
        (Err(e), _) | (_, Err(e)) => return bad_arg(ctx, format!("check marker: {e}")),
    };
    let block = match text("access") {
        Some(a) => a == "block",
        None => ctx.config().access_type == AccessType::Block,
    };
    let created = ctx.tracker.teardown_order().iter().any(|t| {
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
    let Some(local) = ctx.inspector(node).and_then(|i| i.local_path(&target)) else {
        return CheckOutcome::Skip(unreachable_files(ctx, node).unwrap_or_default());
    };
    let label = text("label").unwrap_or_else(|| "A".to_owned());
    let marker = Marker::new(ctx.config().seed, ctx.name(), &label);
    let placement = match (block, tail) {
        (false, _) => Some(Placement::File),
        (true, Some(tail)) => Some(Placement::Block { tail }),
        (true, None) => match marker::block_size(&local) {
            Ok(size) if size >= 2 * marker::MARKER_LEN as u64 => Some(Placement::Block { tail: size - marker::MARKER_LEN as u64 }),
            _ => None,
        },
    };
    let at = format!("{path} on node endpoint {node}");
    let result = match (action.as_str(), placement) {
        ("write", placement) => marker::write(&local, block, &marker, placement.as_ref()).map(Some).map_err(|e| {
            ("data-write", format!("writing marker {label} into volume {volume_id} at {at} failed: {e}"))
        }),
        ("verify", Some(placement)) => match marker::verify(&local, &placement, &marker, &[]) {
            Ok(None) => Ok(Some(placement)),
            Ok(Some((place, m))) => {
                Err(("data-lost", format!("volume {volume_id} at {at}: {}", m.describe(&place, &marker))))
            }
            Err(e) => Err(("data-read", format!("reading marker {label} from volume {volume_id} at {at} failed: {e}"))),
        },
        (_, Some(placement)) => marker::remove(&local, &placement)
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
