//! The `health-entries` and `health-migration` checks (CSI v1.13). `health-entries` calls
//! one health RPC (paging
//! ControllerListVolumeHealth to its end) and judges every entry by the rules the v1.13
//! bindings state: REQUIRED volume_health, volume_id, status and reason; a reason that is a
//! short CamelCase token; no two entries of one volume with the same status and reason, nor
//! two storage entries with the same status, reason and volume capability.
//!
//! Only a broken REQUIRED field or a duplicate fails; a reason that is not CamelCase warns
//! (the rule is a description, not a MUST); nothing here judges an error code.

use std::collections::BTreeMap;

use prost_reflect::DynamicMessage;

use super::{
    Args, ArgReader, Check, CheckDef, CheckFuture,
    list::{Lister, page_to_end},
};
use crate::{
    proto,
    report::{Finding, Severity},
    suite::{
        ctx::{CheckOutcome, ScenarioCtx, bad_arg},
        vars::{FieldPath, Ty, Val},
    },
};

/// The RPCs `health-entries` calls.
const HEALTH_RPCS: [&str; 4] =
    ["ControllerGetVolumeHealth", "ControllerListVolumeHealth", "NodeGetVolumeHealth", "NodeGetStorageHealth"];

pub(super) const CHECKS: &[CheckDef] = &[CheckDef::of::<HealthEntries>(), CheckDef::of::<HealthMigration>()];

struct HealthEntries;

/// `health-entries`'s arguments: the RPC and its request's fields (as the RPC takes them).
struct HealthCall {
    rpc: String,
    volume_id: Option<String>,
    volume_publish_path: Option<String>,
    staging_target_path: Option<String>,
    max_entries: i64,
    node: Option<i64>,
}

impl Args for HealthCall {
    fn read(a: &mut ArgReader<'_>) -> Self {
        HealthCall {
            rpc: a.choice("rpc", &HEALTH_RPCS),
            volume_id: a.opt_str("volume_id"),
            volume_publish_path: a.opt_str("volume_publish_path"),
            staging_target_path: a.opt_str("staging_target_path"),
            max_entries: a.int("max_entries", 0),
            node: a.opt_int("node"),
        }
    }
}

impl Check for HealthEntries {
    type Args = HealthCall;
    const NAME: &'static str = "health-entries";
    const DESCRIPTION: &'static str = "CSI v1.13: calls one health RPC (paging ControllerListVolumeHealth to the end) and checks every entry: REQUIRED fields, CamelCase reasons, no duplicates; saves count, volumes";
    const RPCS: &'static [&'static str] = &HEALTH_RPCS;

    fn outputs() -> Vec<(&'static str, Ty)> {
        health_outputs()
    }

    fn run(ctx: &mut ScenarioCtx, args: HealthCall) -> CheckFuture<'_> {
        Box::pin(health_entries(ctx, args))
    }
}

struct HealthMigration;

impl Check for HealthMigration {
    type Args = ();
    const NAME: &'static str = "health-migration";
    const DESCRIPTION: &'static str = "CSI v1.13 migration: a note per side (controller, node) saying which orchestrators get the health signal (VOLUME_CONDITION for v1.12, GET_VOLUME_HEALTH for v1.13); never a failure";
    const RPCS: &'static [&'static str] = &[];

    fn run(ctx: &mut ScenarioCtx, (): ()) -> CheckFuture<'_> {
        Box::pin(health_migration(ctx))
    }
}

/// What it saves: `count` adverse entries (volume statuses or storage entries) and `volumes`
/// (the volume ids ControllerListVolumeHealth listed).
fn health_outputs() -> Vec<(&'static str, Ty)> {
    vec![("count", Ty::Scalar), ("volumes", Ty::List(Box::new(Ty::Scalar)))]
}

const LIST_HEALTH: Lister = Lister {
    rpc: "ControllerListVolumeHealth",
    request: "ControllerListVolumeHealthRequest",
    id: "volume_id",
    noun: "volume",
    changed_by: &["CreateVolume", "DeleteVolume"],
};

fn get(v: &Val, path: &str) -> Val {
    FieldPath::parse(path).ok().and_then(|p| v.get(&p.0).ok()).unwrap_or(Val::Null)
}

fn text(v: &Val, path: &str) -> String {
    get(v, path).to_text().unwrap_or_default()
}

fn list(v: &Val, path: &str) -> Vec<Val> {
    match get(v, path) {
        Val::List(items) => items,
        _ => Vec::new(),
    }
}

fn enum_number(v: &Val) -> i32 {
    match v {
        Val::Enum(_, n) => *n,
        Val::Int(n) => i32::try_from(*n).unwrap_or(-1),
        _ => 0,
    }
}

/// A short CamelCase token: a capital letter, then letters and digits, at most 64 bytes.
fn camel_case(reason: &str) -> bool {
    reason.len() <= 64
        && reason.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && reason.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Judges the entries of one volume (`key_fields` status, reason) or of the storage (status,
/// reason, volume_capability); `what` names them in findings. Returns how many there are.
fn judge(ctx: &mut ScenarioCtx, rpc: &str, what: &str, entries: &[Val], key_fields: &[&str]) -> usize {
    let mut seen: Vec<String> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if enum_number(&get(e, "status")) == 0 {
            ctx.fail("health-required", format!("{rpc}: {what}[{i}].status is unset (0), a REQUIRED field"));
        }
        let reason = text(e, "reason");
        if reason.is_empty() {
            ctx.fail("health-required", format!("{rpc}: {what}[{i}].reason is empty, a REQUIRED field"));
        } else if !camel_case(&reason) {
            ctx.push(Finding::new(
                Severity::Warn,
                "health-reason-format",
                format!("{rpc}: {what}[{i}].reason {reason:?} is not a short CamelCase token, which COs may parse"),
            ));
        }
        let key = key_fields.iter().map(|f| format!("{:?}", get(e, f))).collect::<Vec<_>>().join("/");
        if seen.contains(&key) {
            ctx.fail(
                "duplicate-health-entry",
                format!(
                    "{rpc}: {what}[{i}] repeats an earlier entry's {} (status {}, reason {reason:?})",
                    key_fields.join(", "),
                    get(e, "status").describe()
                ),
            );
        }
        seen.push(key);
    }
    entries.len()
}

/// Judges one VolumeHealth message; `volume_id`, when known, is the volume asked about.
fn judge_volume(ctx: &mut ScenarioCtx, rpc: &str, health: &Val, volume_id: Option<&str>) -> usize {
    let got = text(health, "volume_id");
    if got.is_empty() {
        ctx.fail("health-required", format!("{rpc}: volume_health.volume_id is empty, a REQUIRED field"));
    } else if let Some(asked) = volume_id.filter(|a| *a != got) {
        ctx.fail("health-volume-id", format!("{rpc} was asked about volume {asked:?} and answered about {got:?}"));
    }
    judge(ctx, rpc, "health_statuses", &list(health, "health_statuses"), &["status", "reason"])
}

async fn health_entries(ctx: &mut ScenarioCtx, args: HealthCall) -> CheckOutcome {
    let rpc = args.rpc;
    let given =
        [("volume_id", args.volume_id), ("volume_publish_path", args.volume_publish_path), ("staging_target_path", args.staging_target_path)];
    let arg = |name: &str| given.iter().find(|(n, _)| *n == name).and_then(|(_, v)| v.clone()).filter(|s| !s.is_empty());
    let node = args.node.and_then(|n| usize::try_from(n).ok());
    let mut volumes = Vec::new();
    let count = if rpc == "ControllerListVolumeHealth" {
        let max = args.max_entries;
        let base = DynamicMessage::new(proto::message(LIST_HEALTH.request).expect("in the pool"));
        let mut seen = Vec::new();
        if let Err(outcome) = page_to_end(ctx, &LIST_HEALTH, &base, max, String::new(), &mut seen, false).await {
            return outcome;
        }
        let mut count = 0;
        for (id, entry) in &seen {
            if !id.is_empty() && list(entry, "health_statuses").is_empty() {
                ctx.push(Finding::new(
                    Severity::Warn,
                    "health-listed-healthy",
                    format!("{rpc} lists volume {id:?} with no adverse health; the list is of volumes with some"),
                ));
            }
            count += judge_volume(ctx, &rpc, entry, None);
            volumes.push(Val::Str(id.clone()));
        }
        count
    } else {
        let Some(message) = proto::message(&format!("{rpc}Request")) else {
            return bad_arg(ctx, format!("rpc {rpc:?} is not a health RPC"));
        };
        let fields = message.clone();
        let mut request = DynamicMessage::new(message);
        for field in ["volume_id", "volume_publish_path", "staging_target_path"] {
            if let (Some(value), Some(_)) = (arg(field), fields.get_field_by_name(field)) {
                request.set_field_by_name(field, prost_reflect::Value::String(value));
            }
        }
        let response = match ctx.call(&rpc, request.clone(), node).await {
            Ok(r) => Val::from_message(&r),
            Err(e) => return ctx.call_failed(&e, &request, "OK"),
        };
        if rpc == "NodeGetStorageHealth" {
            let entries = list(&response, "backend_health");
            judge(ctx, &rpc, "backend_health", &entries, &["status", "reason", "volume_capability"])
        } else {
            let health = get(&response, "volume_health");
            if health == Val::Null {
                ctx.fail("health-required", format!("{rpc} answered without volume_health, a REQUIRED field"));
                return CheckOutcome::Stop;
            }
            judge_volume(ctx, &rpc, &health, arg("volume_id").as_deref())
        }
    };
    CheckOutcome::Done(BTreeMap::from([
        ("count".to_owned(), Val::Int(count as i128)),
        ("volumes".to_owned(), Val::List(volumes)),
    ]))
}

/// The `health-migration` check: a note (a passing finding, never a warning) per side,
/// controller and node, saying which orchestrators get the plugin's health signal: v1.12 COs
/// read `volume_condition` (VOLUME_CONDITION), v1.13 COs call the health RPCs
/// (GET_VOLUME_HEALTH); v1.13 removed the former, so a plugin with only one serves only one.
async fn health_migration(ctx: &mut ScenarioCtx) -> CheckOutcome {
    use crate::fingerprint::{Capability, ControllerCapability as C, NodeCapability as N};
    let fp = ctx.fingerprint();
    let sides = [
        (
            "controller",
            fp.supports(Capability::Controller(C::VolumeCondition)),
            fp.supports(Capability::Controller(C::GetVolumeHealth)),
            "ListVolumes / ControllerGetVolume",
            "ControllerGetVolumeHealth",
        ),
        ("node", fp.supports(Capability::Node(N::VolumeCondition)), fp.supports(Capability::Node(N::GetVolumeHealth)), "NodeGetVolumeStats", "NodeGetVolumeHealth"),
    ];
    let mut notes = Vec::new();
    for (side, condition, health, old_rpcs, new_rpc) in sides {
        let note = match (condition, health) {
            (true, true) => format!(
                "{side}: both VOLUME_CONDITION and GET_VOLUME_HEALTH: orchestrators built on CSI v1.12 read volume_condition \
                 ({old_rpcs}), those on v1.13 call {new_rpc}; both get the health signal (v1.13 itself no longer defines \
                 VOLUME_CONDITION, and ignores it)"
            ),
            (true, false) => format!(
                "{side}: VOLUME_CONDITION only: orchestrators that moved to CSI v1.13 no longer read volume_condition \
                 ({old_rpcs}) and lose this plugin's health signal until it serves {new_rpc} (GET_VOLUME_HEALTH)"
            ),
            (false, true) => format!(
                "{side}: GET_VOLUME_HEALTH only: orchestrators built on CSI v1.12 (e.g. Kubernetes' external-health-monitor \
                 and kubelet volume-health metrics of that era) read volume_condition ({old_rpcs}) and get no health signal \
                 from this plugin"
            ),
            (false, false) => continue,
        };
        notes.push(note);
    }
    for note in notes {
        ctx.push(Finding::new(Severity::Pass, "health-migration", note));
    }
    CheckOutcome::Done(BTreeMap::new())
}
