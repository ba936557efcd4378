//! Named checks: what YAML cannot say, written in Rust and called by name from a `check`
//! step. Each has an argument schema (checked at load time), declared outputs (for `save`),
//! the RPCs it may call (for implicit requirements) and an async body that works through the
//! scenario's context, so everything it creates is tracked and torn down.

use std::{collections::BTreeMap, fmt, future::Future, path::Path, pin::Pin};

use prost_reflect::DynamicMessage;

use crate::yaml::{Node, Plain};
use super::{
    inspect::{self, PATH_STATES},
    confirm,
    ctx::{ScenarioCtx, call_finding},
    vars::{FieldPath, Ty, Val},
};
use crate::{
    capability::Verdict,
    proto::{self, v1},
    report::{Finding, Severity},
};

pub use super::ctx::CheckOutcome;

/// A check's arguments, variables substituted.
pub type CheckArgs = BTreeMap<String, Val>;

/// The future a check body returns.
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = CheckOutcome> + Send + 'a>>;


/// The type of one argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A string.
    Str,
    /// A whole number.
    Int,
    /// true / false.
    Bool,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// A VolumeCapability (a mapping, or a variable such as `${capability}`).
    Capability,
    /// A list of strings.
    StrList,
    /// A non-empty list of VolumeCapabilities (mappings or variables), or a variable.
    Capabilities,
    /// A map of strings (a mapping of text values, or a variable such as `${parameters}`).
    Map,
}

/// One argument of a check.
#[derive(Debug, Clone, Copy)]
pub struct ArgSpec {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub kind: ArgKind,
    /// Whether it must be given.
    pub required: bool,
}

/// A named check.
pub struct CheckDef {
    /// The name used in `check:`.
    pub name: &'static str,
    /// One line for `csi-conform list --checks`.
    pub description: &'static str,
    /// Its arguments.
    pub args: &'static [ArgSpec],
    /// The values it produces, with their types.
    pub outputs: fn() -> Vec<(&'static str, Ty)>,
    /// The RPCs it may call.
    pub rpcs: &'static [&'static str],
    /// The body.
    pub run: for<'a> fn(&'a mut ScenarioCtx, CheckArgs) -> CheckFuture<'a>,
}

impl fmt::Debug for CheckDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckDef").field("name", &self.name).finish_non_exhaustive()
    }
}

/// The arguments of a ValidateVolumeCapabilities request about an existing volume (the
/// `vvc-reconcile` check, and the property steps that validate one).
pub(crate) const VALIDATE_ARGS: [ArgSpec; 4] = [
    ArgSpec { name: "volume_id", kind: ArgKind::Str, required: true },
    ArgSpec { name: "volume_context", kind: ArgKind::Map, required: false },
    ArgSpec { name: "parameters", kind: ArgKind::Map, required: false },
    ArgSpec { name: "mutable_parameters", kind: ArgKind::Map, required: false },
];

static REGISTRY: [CheckDef; 11] = [
    CheckDef {
        name: "list-all-volumes",
        description: "pages through ListVolumes to the end, failing on a repeated token or a duplicate entry; saves ids, count, entries",
        args: &[ArgSpec { name: "max_entries", kind: ArgKind::Int, required: false }],
        outputs: || list_outputs("ListVolumesResponse.Entry"),
        rpcs: &["ListVolumes"],
        run: |ctx, args| Box::pin(list_all(ctx, args, LIST_VOLUMES)),
    },
    CheckDef {
        name: "list-all-snapshots",
        description: "pages through ListSnapshots (optionally filtered by snapshot_id / source_volume_id) to the end; saves ids, count, entries",
        args: &[
            ArgSpec { name: "snapshot_id", kind: ArgKind::Str, required: false },
            ArgSpec { name: "source_volume_id", kind: ArgKind::Str, required: false },
            ArgSpec { name: "max_entries", kind: ArgKind::Int, required: false },
        ],
        outputs: || list_outputs("ListSnapshotsResponse.Entry"),
        rpcs: &["ListSnapshots"],
        run: |ctx, args| Box::pin(list_all(ctx, args, LIST_SNAPSHOTS)),
    },
    CheckDef {
        name: "volume-pagination",
        description: "creates its own volumes, pages ListVolumes 2 at a time while deleting and adding one of its own, and checks nothing repeats or goes missing",
        args: &[ArgSpec { name: "volumes", kind: ArgKind::Int, required: false }],
        outputs: Vec::new,
        rpcs: &["CreateVolume", "DeleteVolume", "ListVolumes"],
        run: |ctx, args| Box::pin(volume_pagination(ctx, args)),
    },
    CheckDef {
        name: "attach-limit",
        description: "publishes max_volumes_per_node of its own volumes to node 0, then one more, which must fail",
        args: &[ArgSpec { name: "capability", kind: ArgKind::Capability, required: false }],
        outputs: Vec::new,
        rpcs: &["CreateVolume", "ControllerPublishVolume"],
        run: |ctx, args| Box::pin(attach_limit(ctx, args)),
    },
    CheckDef {
        name: "path-state",
        description: "inspects a path where the node plugin sees it (its mount namespace): absent, directory, file, exists, mount-point, not-mount-point or read-only-mount",
        args: &[
            ArgSpec { name: "path", kind: ArgKind::Str, required: true },
            ArgSpec { name: "is", kind: ArgKind::Choice(PATH_STATES), required: true },
            ArgSpec { name: "node", kind: ArgKind::Int, required: false },
        ],
        outputs: Vec::new,
        rpcs: &[],
        run: |ctx, args| Box::pin(path_state(ctx, args)),
    },
    CheckDef {
        name: "lifecycle",
        description: "drives a volume through its whole lifecycle as an orchestrator does (create, validate, publish, stage, publish on one or two nodes, stats, and back), verifying the node's mounts (in its mount namespace) after each node step",
        args: super::lifecycle::ARGS,
        outputs: Vec::new,
        rpcs: super::lifecycle::RPCS,
        run: |ctx, args| Box::pin(super::lifecycle::run(ctx, args)),
    },
    CheckDef {
        name: "existing-volume",
        description: "drives each existing volume (--existing-volume) through the node lifecycle as a CO does (controller publish, stage, publish, stats, and back) with its volume_context, verifying the host's mounts; never creates, changes or deletes a volume",
        args: super::lifecycle::EXISTING_ARGS,
        outputs: Vec::new,
        rpcs: super::lifecycle::EXISTING_RPCS,
        run: |ctx, args| Box::pin(super::lifecycle::run_existing(ctx, args)),
    },
    CheckDef {
        name: "data",
        description: "writes seeded markers into its own published volumes and verifies them by digest after republishing, moving between nodes, sharing, a read-only publish, a snapshot restore, a clone or an expansion",
        args: super::data::ARGS,
        outputs: Vec::new,
        rpcs: super::data::RPCS,
        run: |ctx, args| Box::pin(super::data::run(ctx, args)),
    },
    CheckDef {
        name: "marker",
        description: "writes, verifies (by digest) or removes a seeded data marker in a published volume the scenario created; saves digest, tail",
        args: super::data::MARKER_ARGS,
        outputs: super::data::marker_outputs,
        rpcs: &[],
        run: |ctx, args| Box::pin(super::data::marker_step(ctx, args)),
    },
    CheckDef {
        name: "name-conflict",
        description: "creates a volume for `first`, then one of the same name for `second`: ALREADY_EXISTS passes, and so does OK for a volume ValidateVolumeCapabilities confirms for `second` (it serves both); OK for one confirmed for `first` only fails, for one confirmed for neither warns",
        args: &[
            ArgSpec { name: "first", kind: ArgKind::Capability, required: true },
            ArgSpec { name: "second", kind: ArgKind::Capability, required: true },
        ],
        outputs: Vec::new,
        rpcs: &["CreateVolume", "ValidateVolumeCapabilities"],
        run: |ctx, args| Box::pin(name_conflict(ctx, args)),
    },
    CheckDef {
        name: "vvc-reconcile",
        description: "sends ValidateVolumeCapabilities and reconciles the answer with the request: unconfirmed / incomplete-confirmation warn, mismatched-confirmation / dropped-field fail; saves verdict",
        args: &[
            VALIDATE_ARGS[0],
            ArgSpec { name: "capabilities", kind: ArgKind::Capabilities, required: true },
            VALIDATE_ARGS[1],
            VALIDATE_ARGS[2],
            VALIDATE_ARGS[3],
        ],
        outputs: || vec![("verdict", Ty::Scalar)],
        rpcs: &["ValidateVolumeCapabilities"],
        run: |ctx, args| Box::pin(vvc_reconcile(ctx, args)),
    },
];

/// Every named check.
pub fn registry() -> &'static [CheckDef] {
    &REGISTRY
}

/// A check by name.
pub fn find(name: &str) -> Option<&'static CheckDef> {
    REGISTRY.iter().find(|c| c.name == name)
}

/// `(name, one-line description)` of every check, for `csi-conform list --checks`.
pub fn checks() -> impl Iterator<Item = (&'static str, &'static str)> {
    REGISTRY.iter().map(|c| (c.name, c.description))
}

/// Checks a literal (variable-free) argument against its kind.
pub(crate) fn check_arg_literal(kind: ArgKind, node: &Node) -> Result<(), String> {
    match (kind, node.plain()) {
        (ArgKind::Str, Some(Plain::Str(_))) | (ArgKind::Bool, Some(Plain::Bool(_))) => Ok(()),
        (ArgKind::Int, Some(Plain::Int(i))) if i >= 0 => Ok(()),
        (ArgKind::Choice(words), Some(Plain::Str(s))) if words.contains(&s) => Ok(()),
        (ArgKind::Capability, None) if node.as_map().is_some() => Ok(()),
        (ArgKind::StrList, None) if node.as_seq().is_some_and(|items| items.iter().all(is_scalar)) => Ok(()),
        (ArgKind::Capabilities, None)
            if node.as_seq().is_some_and(|items| {
                !items.is_empty()
                    && items.iter().all(|i| i.as_map().is_some() || i.scalar_text().is_some_and(|t| t.contains("${")))
            }) =>
        {
            Ok(())
        }
        (ArgKind::Map, None)
            if node.as_map().is_some_and(|entries| {
                entries.iter().all(|(_, v)| v.scalar_text().is_some() && !v.is_null())
            }) =>
        {
            Ok(())
        }
        (ArgKind::Str, _) => Err(format!("expects a string, not {}", node.describe())),
        (ArgKind::Bool, _) => Err(format!("expects true or false, not {}", node.describe())),
        (ArgKind::Int, _) => Err(format!("expects a whole number, not {}", node.describe())),
        (ArgKind::Choice(words), _) => Err(format!(
            "expects one of {}, not {}",
            words.join(", "),
            node.scalar_text().map_or_else(|| node.describe().to_owned(), |t| format!("{t:?}"))
        )),
        (ArgKind::Capability, _) => Err(format!("expects a VolumeCapability mapping, not {}", node.describe())),
        (ArgKind::StrList, _) => Err(format!("expects a list of strings, not {}", node.describe())),
        (ArgKind::Capabilities, _) => {
            Err(format!("expects a non-empty list of VolumeCapability mappings, not {}", node.describe()))
        }
        (ArgKind::Map, _) => Err(format!("expects a mapping of text values, not {}", node.describe())),
    }
}

fn is_scalar(node: &Node) -> bool {
    node.scalar_text().is_some()
}

fn list_outputs(entry: &str) -> Vec<(&'static str, Ty)> {
    let entry = proto::message(entry).map_or(Ty::Any, Ty::Message);
    vec![("ids", Ty::List(Box::new(Ty::Scalar))), ("count", Ty::Scalar), ("entries", Ty::List(Box::new(entry)))]
}

/// How to page through one List RPC.
struct Lister {
    rpc: &'static str,
    request: &'static str,
    /// The path of an entry's id.
    id: &'static str,
    /// What an entry is, for messages.
    noun: &'static str,
    /// Filters copied from the check's arguments into the request.
    filters: &'static [&'static str],
}

const LIST_VOLUMES: Lister =
    Lister { rpc: "ListVolumes", request: "ListVolumesRequest", id: "volume.volume_id", noun: "volume", filters: &[] };
const LIST_SNAPSHOTS: Lister = Lister {
    rpc: "ListSnapshots",
    request: "ListSnapshotsRequest",
    id: "snapshot.snapshot_id",
    noun: "snapshot",
    filters: &["snapshot_id", "source_volume_id"],
};

/// The most pages a listing may take before it is considered endless.
/// The bound on a listing: the response rules' (`answer.list-*.pages-end`).
const MAX_PAGES: usize = crate::rules::MAX_PAGES;

fn int_arg(args: &CheckArgs, name: &str) -> Result<Option<i64>, String> {
    match args.get(name) {
        None | Some(Val::Null) => Ok(None),
        Some(Val::Int(i)) => i64::try_from(*i).map(Some).map_err(|_| format!("argument {name} is out of range")),
        Some(Val::Str(s)) => {
            s.trim().parse().map(Some).map_err(|_| format!("argument {name} must be a whole number, not {s:?}"))
        }
        Some(other) => Err(format!("argument {name} must be a whole number, not {}", other.describe())),
    }
}

fn text_arg(args: &CheckArgs, name: &str) -> Option<String> {
    args.get(name).and_then(Val::to_text)
}

pub(crate) fn bad_arg(ctx: &mut ScenarioCtx, message: String) -> CheckOutcome {
    ctx.push(Finding::new(Severity::Error, "suite", message));
    CheckOutcome::Stop
}

fn path_of(text: &str) -> Vec<super::vars::Seg> {
    FieldPath::parse(text).map(|p| p.0).unwrap_or_default()
}

/// Calls `rpc` and returns the response, or records the failure.
async fn call_ok(
    ctx: &mut ScenarioCtx,
    rpc: &str,
    request: DynamicMessage,
    node: Option<usize>,
) -> Result<DynamicMessage, CheckOutcome> {
    match ctx.call(rpc, request.clone(), node).await {
        Ok(r) => Ok(r),
        Err(e) => Err(ctx.call_failed(&e, &request, "OK")),
    }
}

/// One listing page: its entries (id, entry) and next token.
struct Page {
    entries: Vec<(String, Val)>,
    next_token: String,
}

async fn list_page(
    ctx: &mut ScenarioCtx,
    lister: &Lister,
    base: &DynamicMessage,
    max: i64,
    token: &str,
) -> Result<Page, CheckOutcome> {
    let mut request = base.clone();
    request.set_field_by_name("max_entries", prost_reflect::Value::I32(i32::try_from(max).unwrap_or(i32::MAX)));
    request.set_field_by_name("starting_token", prost_reflect::Value::String(token.to_owned()));
    let response = call_ok(ctx, lister.rpc, request, None).await?;
    let val = Val::from_message(&response);
    let entries = match val.get(&path_of("entries")) {
        Ok(Val::List(items)) => items,
        _ => Vec::new(),
    };
    if max > 0 && entries.len() as i64 > max {
        ctx.fail(
            "pagination",
            format!("{} returned {} entries, more than max_entries {max}", lister.rpc, entries.len()),
        );
    }
    let entries = entries
        .into_iter()
        .map(|e| (e.get(&path_of(lister.id)).ok().and_then(|v| v.to_text()).unwrap_or_default(), e))
        .collect();
    let next_token = val.get(&path_of("next_token")).ok().and_then(|v| v.to_text()).unwrap_or_default();
    Ok(Page { entries, next_token })
}

/// Pages from `token` to the end, adding to `seen`; fails on a repeated entry, unless the
/// listing is `changing` (entries were created or deleted since its first page), where the
/// spec lets a CO see duplicates (#listvolumes): then a repeat is a warning, once.
async fn page_to_end(
    ctx: &mut ScenarioCtx,
    lister: &Lister,
    base: &DynamicMessage,
    max: i64,
    mut token: String,
    seen: &mut Vec<(String, Val)>,
    changing: bool,
) -> Result<(), CheckOutcome> {
    let mut tokens = vec![token.clone()];
    let mut warned = false;
    for page in 1..=MAX_PAGES {
        let got = list_page(ctx, lister, base, max, &token).await?;
        for (id, entry) in got.entries {
            if seen.iter().any(|(s, _)| *s == id) {
                let message = format!("{} listed {} {id:?} twice (again on page {page})", lister.rpc, lister.noun);
                if !changing {
                    ctx.fail("pagination", message);
                    return Err(CheckOutcome::Stop);
                }
                if !warned {
                    warned = true;
                    ctx.push(Finding::new(Severity::Warn, "pagination", format!("{message}{CHANGED_WHILE_PAGING}")));
                }
                continue;
            }
            seen.push((id, entry));
        }
        if got.next_token.is_empty() {
            return Ok(());
        }
        if tokens.contains(&got.next_token) {
            // The response rule answer.list-*.token-not-repeated has recorded it at this call.
            if !ctx.findings.iter().any(|f| f.kind == "response-rule" && f.rpc.as_deref() == Some(lister.rpc)) {
                let again = format!("{} returned next_token {:?} again on page {page}", lister.rpc, got.next_token);
                ctx.fail("pagination", format!("{again}; paging would never end"));
            }
            return Err(CheckOutcome::Stop);
        }
        tokens.push(got.next_token.clone());
        token = got.next_token;
    }
    // The response rule answer.list-*.pages-end has recorded it at the last call.
    if !ctx.findings.iter().any(|f| f.kind == "response-rule" && f.rpc.as_deref() == Some(lister.rpc)) {
        ctx.fail("pagination", format!("{} did not reach the last page within {MAX_PAGES} pages", lister.rpc));
    }
    Err(CheckOutcome::Stop)
}

fn list_base(lister: &Lister, args: &CheckArgs) -> DynamicMessage {
    let mut base = DynamicMessage::new(proto::message(lister.request).expect("List requests are in the pool"));
    for filter in lister.filters {
        if let Some(v) = text_arg(args, filter) {
            base.set_field_by_name(filter, prost_reflect::Value::String(v));
        }
    }
    base
}

async fn list_all(ctx: &mut ScenarioCtx, args: CheckArgs, lister: Lister) -> CheckOutcome {
    let max = match int_arg(&args, "max_entries") {
        Ok(m) => m.unwrap_or(0),
        Err(e) => return bad_arg(ctx, e),
    };
    let base = list_base(&lister, &args);
    let mut seen = Vec::new();
    if let Err(outcome) = page_to_end(ctx, &lister, &base, max, String::new(), &mut seen, false).await {
        return outcome;
    }
    let count = seen.len();
    let (ids, entries): (Vec<Val>, Vec<Val>) = seen.into_iter().map(|(id, e)| (Val::Str(id), e)).unzip();
    CheckOutcome::Done(BTreeMap::from([
        ("ids".to_owned(), Val::List(ids)),
        ("count".to_owned(), Val::Int(count as i128)),
        ("entries".to_owned(), Val::List(entries)),
    ]))
}

fn capability_arg(ctx: &ScenarioCtx, args: &CheckArgs) -> Result<DynamicMessage, String> {
    let value = match args.get("capability") {
        None | Some(Val::Null) => ctx.vars.get("capability").cloned().unwrap_or(Val::Null),
        Some(v) => v.clone(),
    };
    let desc = proto::message("VolumeCapability").expect("VolumeCapability is in the pool");
    super::request::message_from_val(&desc, &value).map_err(|e| format!("argument capability: {e}"))
}

fn create_request(ctx: &ScenarioCtx, name: String, capability: &DynamicMessage) -> DynamicMessage {
    let config = ctx.config();
    let mut request = proto::to_dynamic(&v1::CreateVolumeRequest {
        name,
        capacity_range: Some(v1::CapacityRange { required_bytes: config.volume_size, limit_bytes: 0 }),
        parameters: config.parameters.clone().into_iter().collect(),
        ..Default::default()
    });
    request.set_field_by_name(
        "volume_capabilities",
        prost_reflect::Value::List(vec![prost_reflect::Value::Message(capability.clone())]),
    );
    request
}

async fn create_volume(
    ctx: &mut ScenarioCtx,
    suffix: &str,
    capability: &DynamicMessage,
) -> Result<String, CheckOutcome> {
    let name = format!("{}-{suffix}", ctx.name());
    let response = call_ok(ctx, "CreateVolume", create_request(ctx, name, capability), None).await?;
    match Val::from_message(&response).get(&path_of("volume.volume_id")) {
        Ok(Val::Str(id)) if !id.is_empty() => Ok(id),
        _ => {
            ctx.fail("assertion", "CreateVolume answered OK without a volume id");
            Err(CheckOutcome::Stop)
        }
    }
}

async fn volume_pagination(ctx: &mut ScenarioCtx, args: CheckArgs) -> CheckOutcome {
    let count = match int_arg(&args, "volumes") {
        Ok(n) => n.unwrap_or(5).clamp(3, 100),
        Err(e) => return bad_arg(ctx, e),
    };
    let capability = match capability_arg(ctx, &args) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, e),
    };
    let mut own = Vec::new();
    for i in 0..count {
        match create_volume(ctx, &format!("page-{i}"), &capability).await {
            Ok(id) => own.push(id),
            Err(o) => return o,
        }
    }
    let lister = LIST_VOLUMES;
    let base = list_base(&lister, &args);
    let first = match list_page(ctx, &lister, &base, 2, "").await {
        Ok(p) => p,
        Err(o) => return o,
    };
    if first.next_token.is_empty() {
        ctx.fail(
            "pagination",
            format!("ListVolumes with max_entries 2 returned no next_token although at least {count} volumes exist"),
        );
        return CheckOutcome::Stop;
    }
    let deleted = own.iter().find(|id| first.entries.iter().any(|(e, _)| e == *id)).cloned();
    if let Some(id) = &deleted {
        let request = proto::to_dynamic(&v1::DeleteVolumeRequest { volume_id: id.clone(), ..Default::default() });
        if let Err(o) = call_ok(ctx, "DeleteVolume", request, None).await {
            return o;
        }
    }
    if let Err(o) = create_volume(ctx, "page-extra", &capability).await {
        return o;
    }
    let mut seen = first.entries;
    if let Err(o) = page_to_end(ctx, &lister, &base, 2, first.next_token, &mut seen, true).await {
        return o;
    }
    let missing: Vec<&String> =
        own.iter().filter(|id| Some(*id) != deleted.as_ref() && !seen.iter().any(|(s, _)| s == *id)).collect();
    if !missing.is_empty() {
        // A plugin whose token is a position in its list skips an entry when one before it
        // is deleted: the spec allows that, so it is a warning, not a failure.
        let list: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        ctx.push(Finding::new(
            Severity::Warn,
            "pagination",
            format!(
                "paging ListVolumes 2 at a time never listed these volumes, which existed throughout: {}{CHANGED_WHILE_PAGING}",
                list.join(", ")
            ),
        ));
    }
    CheckOutcome::Done(BTreeMap::new())
}

/// The most volumes the attach-limit check creates.
const ATTACH_LIMIT_MAX: i64 = 256;

/// Why a listing's duplicate or missing entry is a warning when volumes changed while paging.
const CHANGED_WHILE_PAGING: &str = "; volumes were created and deleted while paging, when the spec lets a CO see duplicates and miss \
     existing volumes (#listvolumes), but a CO that pages while others provision cannot trust the listing";

async fn attach_limit(ctx: &mut ScenarioCtx, args: CheckArgs) -> CheckOutcome {
    let Some(node) = ctx.fingerprint().nodes.first().cloned() else {
        return CheckOutcome::Skip("the run has no node endpoint to learn the attach limit from".into());
    };
    let max = node.max_volumes_per_node;
    if max <= 0 {
        return CheckOutcome::Skip(
            "node 0 reports no max_volumes_per_node, so there is no attach limit to test".into(),
        );
    }
    if max > ATTACH_LIMIT_MAX {
        return CheckOutcome::Skip(format!(
            "node 0 reports max_volumes_per_node {max}; csi-conform tests limits up to {ATTACH_LIMIT_MAX}"
        ));
    }
    let capability = match capability_arg(ctx, &args) {
        Ok(c) => c,
        Err(e) => return bad_arg(ctx, e),
    };
    for i in 0..=max {
        let volume_id = match create_volume(ctx, &format!("attach-{i}"), &capability).await {
            Ok(id) => id,
            Err(o) => return o,
        };
        let mut request = proto::to_dynamic(&v1::ControllerPublishVolumeRequest {
            volume_id: volume_id.clone(),
            node_id: node.node_id.clone(),
            ..Default::default()
        });
        request.set_field_by_name("volume_capability", prost_reflect::Value::Message(capability.clone()));
        let answer = ctx.call("ControllerPublishVolume", request.clone(), None).await;
        match (i < max, answer) {
            (true, Ok(_)) | (false, Err(_)) => {}
            (true, Err(e)) => return ctx.call_failed(&e, &request, "OK"),
            (false, Ok(answer)) => {
                let message = format!(
                    "ControllerPublishVolume of volume {} to node {} succeeded, but the node reports max_volumes_per_node {max}; it returned {}",
                    max + 1,
                    node.node_id,
                    crate::proto::summary(&answer, crate::proto::SUMMARY_MAX)
                );
                let mut f = call_finding(Severity::Fail, "attach-limit", message, "ControllerPublishVolume", &request);
                (f.expected, f.got) = (Some("an error".into()), Some("OK".into()));
                ctx.push(f);
            }
        }
    }
    CheckOutcome::Done(BTreeMap::new())
}

/// `name-conflict`. The spec answers ALREADY_EXISTS to a CreateVolume whose name exists
/// with a volume incompatible with the request ([CreateVolume errors]); a plugin whose
/// volumes serve both capabilities may answer OK and return the volume. So an OK is judged
/// by what ValidateVolumeCapabilities says of the volume it returned, with `first` (what the
/// volume was made for) as the yardstick: `second` confirmed passes, `first` confirmed and
/// `second` not fails (the plugin itself calls the volume incompatible), neither confirmed
/// warns (a plugin that never confirms gives nothing to tell by). A plugin that refuses
/// either capability outright (INVALID_ARGUMENT, also under a fresh name) cannot show the
/// conflict: a skip; INVALID_ARGUMENT to the conflict from a plugin that does create such
/// volumes under a fresh name is the wrong code, a failure.
///
/// [CreateVolume errors]: https://github.com/container-storage-interface/spec/blob/master/spec.md#createvolume-errors
async fn name_conflict(ctx: &mut ScenarioCtx, args: CheckArgs) -> CheckOutcome {
    let capability = |arg: &str| {
        let desc = proto::message("VolumeCapability").expect("VolumeCapability is in the pool");
        let value = args.get(arg).cloned().unwrap_or(Val::Null);
        super::request::message_from_val(&desc, &value).map_err(|e| format!("argument {arg}: {e}"))
    };
    let (first, second) = match (capability("first"), capability("second")) {
        (Ok(first), Ok(second)) => (first, second),
        (Err(e), _) | (_, Err(e)) => return bad_arg(ctx, e),
    };
    let (first_access, second_access) = (access_type(&first), access_type(&second));
    let refused = |ctx: &mut ScenarioCtx, e: &crate::client::RpcError, request: &DynamicMessage, access, expected| {
        if e.code == tonic::Code::InvalidArgument {
            CheckOutcome::Skip(format!(
                "the plugin does not create volumes for {access} access (CreateVolume answered INVALID_ARGUMENT), so a name conflict cannot be seen"
            ))
        } else {
            ctx.call_failed(e, request, expected)
        }
    };
    let name = ctx.name().to_owned();
    let request = create_request(ctx, name.clone(), &first);
    if let Err(e) = ctx.call("CreateVolume", request.clone(), None).await {
        return refused(ctx, &e, &request, first_access, "OK");
    }
    let request = create_request(ctx, name.clone(), &second);
    let answer = match ctx.call("CreateVolume", request.clone(), None).await {
        Ok(answer) => answer,
        Err(e) if e.code == tonic::Code::AlreadyExists => return CheckOutcome::Done(BTreeMap::new()),
        Err(e) if e.code == tonic::Code::InvalidArgument => {
            // Refused for the conflict, or because the plugin makes no such volumes at all?
            // The same request under a fresh name tells: only the second is a skip.
            let fresh = create_request(ctx, format!("{name}-fresh"), &second);
            return match ctx.call("CreateVolume", fresh.clone(), None).await {
                Ok(_) => {
                    let message = format!(
                        "CreateVolume answered INVALID_ARGUMENT to the name of a volume created for {first_access} access, \
                         asked for {second_access} access, though the same request under a fresh name creates a volume: an \
                         existing volume incompatible with the request gets ALREADY_EXISTS"
                    );
                    let mut f = call_finding(Severity::Fail, "unexpected-code", message, "CreateVolume", &request);
                    (f.expected, f.got) = (Some("ALREADY_EXISTS".into()), Some("INVALID_ARGUMENT".into()));
                    f.plugin_message = Some(e.message.clone()).filter(|m| !m.is_empty());
                    ctx.push(f);
                    CheckOutcome::Done(BTreeMap::new())
                }
                Err(e) => refused(ctx, &e, &fresh, second_access, "OK"),
            };
        }
        Err(e) => return refused(ctx, &e, &request, second_access, "ALREADY_EXISTS"),
    };
    let returned = Val::from_message(&answer);
    let field = |path: &str| returned.get(&path_of(path)).unwrap_or(Val::Null);
    let mut ask = CheckArgs::from([
        ("volume_id".to_owned(), field("volume.volume_id")),
        ("volume_context".to_owned(), field("volume.volume_context")),
    ]);
    if let Some(parameters) = ctx.vars.get("parameters") {
        ask.insert("parameters".to_owned(), parameters.clone());
    }
    let confirms = async |ctx: &mut ScenarioCtx, capability: &DynamicMessage| {
        let capabilities = Val::List(vec![Val::from_message(capability)]);
        let request = match confirm::request(&ask, capabilities) {
            Ok(r) => r,
            Err(e) => return Err(bad_arg(ctx, e)),
        };
        match confirm::validate(ctx, &request).await {
            // A confirmation that leaves out a field still confirms the access type.
            Ok(r) => Ok(matches!(r.verdict, Verdict::Confirmed | Verdict::DroppedField)),
            Err(e) => Err(ctx.call_failed(&e, &request, "OK")),
        }
    };
    let serves_second = match confirms(ctx, &second).await {
        Ok(c) => c,
        Err(outcome) => return outcome,
    };
    if serves_second {
        return CheckOutcome::Done(BTreeMap::new());
    }
    let serves_first = match confirms(ctx, &first).await {
        Ok(c) => c,
        Err(outcome) => return outcome,
    };
    let what = format!(
        "CreateVolume answered OK to the name of a volume created for {first_access} access, asked for {second_access} access, returning {}",
        proto::summary(&answer, proto::SUMMARY_MAX)
    );
    let (severity, kind, why) = if serves_first {
        (
            Severity::Fail,
            "incompatible-volume",
            format!(
                "; ValidateVolumeCapabilities confirms {first_access} access for that volume but not {second_access} access, so it is \
                 incompatible with the request and the answer must be ALREADY_EXISTS"
            ),
        )
    } else {
        (
            Severity::Warn,
            "unverified-compatibility",
            format!(
                "; ValidateVolumeCapabilities confirms neither {first_access} nor {second_access} access for it, so whether the \
                 volume serves {second_access} access (and OK is right) cannot be told"
            ),
        )
    };
    let mut f = call_finding(severity, kind, format!("{what}{why}"), "CreateVolume", &request);
    (f.expected, f.got) = (Some(format!("ALREADY_EXISTS, or OK for a volume that serves {second_access} access")), Some("OK".into()));
    ctx.push(f);
    CheckOutcome::Done(BTreeMap::new())
}

/// `block` or `mount`: the access type a VolumeCapability asks for.
fn access_type(capability: &DynamicMessage) -> &'static str {
    if capability.has_field_by_name("block") { "block" } else { "mount" }
}

async fn vvc_reconcile(ctx: &mut ScenarioCtx, args: CheckArgs) -> CheckOutcome {
    let capabilities = args.get("capabilities").cloned().unwrap_or(Val::Null);
    let request = match confirm::request(&args, capabilities) {
        Ok(r) => r,
        Err(e) => return bad_arg(ctx, e),
    };
    let reconciliation = match confirm::validate(ctx, &request).await {
        Ok(r) => r,
        Err(e) => return ctx.call_failed(&e, &request, "OK"),
    };
    let verdict = reconciliation.verdict;
    if let Some(finding) = confirm::finding(&reconciliation, ctx.config().strict, &request) {
        ctx.push(finding);
    }
    CheckOutcome::Done(BTreeMap::from([("verdict".to_owned(), Val::Str(verdict.kind().to_owned()))]))
}

async fn path_state(ctx: &mut ScenarioCtx, args: CheckArgs) -> CheckOutcome {
    let node = match int_arg(&args, "node") {
        Ok(n) => n.unwrap_or(0),
        Err(e) => return bad_arg(ctx, e),
    };
    let (Some(path), Some(state)) = (text_arg(&args, "path"), text_arg(&args, "is")) else {
        return bad_arg(ctx, "path-state needs `path` and `is`".into());
    };
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
    let found = match inspector.check(Path::new(&path), &state).await {
        Ok(found) => found,
        Err(e) => {
            let kind = if matches!(e, inspect::CheckError::Command(_)) { "check-path-cmd" } else { "mount-table" };
            ctx.push(Finding::new(Severity::Error, kind, e.to_string()));
            return CheckOutcome::Stop;
        }
    };
    match found {
        Ok(()) => CheckOutcome::Done(BTreeMap::new()),
        Err(found) => {
            ctx.fail("path-state", format!("{path} {found}, expected {state}"));
            CheckOutcome::Stop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_names_are_unique_and_described() {
        let names: Vec<&str> = checks().map(|(n, _)| n).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names.len(), sorted.len());
        assert!(checks().all(|(_, d)| !d.is_empty() && !d.contains('\n')));
        for c in registry() {
            for rpc in c.rpcs {
                assert!(proto::method(rpc).is_some(), "{rpc}");
            }
            let _ = (c.outputs)();
        }
    }
}
