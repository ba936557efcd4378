//! The `lifecycle` and `existing-volume` checks as the registry sees them: their declarations,
//! demand and cost, and their typed arguments (one [`LifecycleArgs`], which `existing-volume`
//! fills in part, the rest at `lifecycle`'s defaults).

use super::*;
use crate::suite::checks::{ArgReader, Args, Check, CheckFuture, api};

pub(in crate::suite) struct LifecycleCheck;

impl Check for LifecycleCheck {
    type Args = LifecycleArgs;
    const NAME: &'static str = "lifecycle";
    const DESCRIPTION: &'static str = "drives a volume through its whole lifecycle as an orchestrator does (create, validate, publish, stage, publish on one or two nodes, stats, and back), verifying the node's mounts (in its mount namespace) after each node step";
    const RPCS: &'static [&'static str] = RPCS;
    const ORCHESTRATED: bool = true;

    /// One volume, published on each of its `nodes`; or `volumes` of them, all on node 0 at
    /// once.
    fn demand(args: &LifecycleArgs, u: &CheckUse<'_>) -> CheckDemand {
        let on = args.nodes.clamp(1, u.nodes as i64) as usize;
        let volumes = args.volumes.clamp(1, orchestrated::MAX_VOLUMES as i64) as u32;
        if volumes > 1 {
            return CheckDemand { volumes, publish: vec![volumes], ..CheckDemand::default() };
        }
        CheckDemand { volumes: 1, publish: vec![1; on], expands: args.expand, ..CheckDemand::default() }
    }

    fn cost(args: &LifecycleArgs, u: &CheckUse<'_>) -> u64 {
        4 + repeats(args, u) * (2 + 6 * args.nodes.max(1) as u64)
    }

    fn run(ctx: &mut ScenarioCtx, args: LifecycleArgs) -> CheckFuture<'_> {
        Box::pin(run(ctx, args))
    }
}

/// How often `lifecycle` sends each state-changing call: `--idempotency-count`, capped by a
/// literal `repeat_at_most`.
fn repeats(args: &LifecycleArgs, u: &CheckUse<'_>) -> u64 {
    args.repeat_at_most.map_or(u.times, |most| u.times.min(most.max(1) as u64))
}

pub(in crate::suite) struct ExistingCheck;

impl Check for ExistingCheck {
    type Args = ExistingArgs;
    const NAME: &'static str = "existing-volume";
    const DESCRIPTION: &'static str = "drives each existing volume (--existing-volume) through the node lifecycle as a CO does (controller publish, stage, publish, stats, and back) with its volume_context, verifying the host's mounts; never creates, changes or deletes a volume";
    const RPCS: &'static [&'static str] = EXISTING_RPCS;
    // The volumes are the operator's, published one at a time on node 0.
    const HOLDS: &'static [Pool] = &[Pool::ExistingVolumes];
    // A node-only plugin has no volume of its own to drive: its existing volumes are what an
    // orchestrator stages and publishes (Nomad's `volume register`, a static PV).
    const ORCHESTRATED: bool = true;

    fn demand(_: &ExistingArgs, _: &CheckUse<'_>) -> CheckDemand {
        CheckDemand { publish: vec![1], ..CheckDemand::default() }
    }

    fn cost(_: &ExistingArgs, u: &CheckUse<'_>) -> u64 {
        4 + u.times * 8
    }

    fn run(ctx: &mut ScenarioCtx, args: ExistingArgs) -> CheckFuture<'_> {
        Box::pin(run_existing(ctx, args.0))
    }
}

/// The arguments of `lifecycle` (see suites/README.md for each).
pub(crate) struct LifecycleArgs {
    pub(super) access: Option<String>,
    pub(super) mode: String,
    pub(super) readonly: bool,
    pub(super) fs_type: Option<String>,
    pub(super) mount_flags: Option<Vec<String>>,
    pub(super) volume_fs_type: Option<String>,
    pub(super) volume_mount_flags: Option<Vec<String>>,
    pub(super) volume_context: BTreeMap<String, String>,
    pub(super) secrets: String,
    pub(super) repeat: bool,
    pub(super) repeat_at_most: Option<i64>,
    pub(super) nodes: i64,
    pub(super) second_node: Option<String>,
    pub(super) second_target: Option<String>,
    pub(super) refused_code: Option<String>,
    pub(super) restart: bool,
    pub(super) long_paths: bool,
    pub(super) volumes: i64,
    pub(super) expand: bool,
    pub(super) second_usage: bool,
    /// `existing-volume` only.
    pub(super) unstage_without_path: bool,
}

fn mode(a: &mut ArgReader<'_>) -> String {
    a.opt_choice("mode", MODES).unwrap_or_else(|| MODES[0].to_owned())
}

impl Args for LifecycleArgs {
    fn read(a: &mut ArgReader<'_>) -> Self {
        LifecycleArgs {
            access: a.opt_choice("access", &["mount", "block"]),
            mode: mode(a),
            readonly: a.bool("readonly", false),
            fs_type: a.opt_str("fs_type"),
            mount_flags: a.str_list("mount_flags"),
            volume_fs_type: a.opt_str("volume_fs_type"),
            volume_mount_flags: a.str_list("volume_mount_flags"),
            volume_context: a.string_map("volume_context"),
            secrets: a.opt_choice("secrets", &["auto", "none", "required"]).unwrap_or_else(|| "auto".to_owned()),
            repeat: a.bool("repeat", true),
            repeat_at_most: a.opt_int("repeat_at_most"),
            nodes: a.int("nodes", 1),
            second_node: a.opt_choice("second_node", &["works", "refused"]),
            second_target: a.opt_choice("second_target", &["none", "works", "refused"]),
            refused_code: a.opt_str("refused_code"),
            restart: a.bool("restart", false),
            long_paths: a.bool("long_paths", false),
            volumes: a.opt_int_in("volumes", 1, orchestrated::MAX_VOLUMES as i128).unwrap_or(1),
            expand: a.bool("expand", false),
            second_usage: a.bool("second_usage", false),
            unstage_without_path: false,
        }
    }
}

/// The arguments of `existing-volume`: part of `lifecycle`'s, the rest at their defaults.
pub(in crate::suite) struct ExistingArgs(LifecycleArgs);

impl Args for ExistingArgs {
    fn read(a: &mut ArgReader<'_>) -> Self {
        let (mode, readonly) = (mode(a), a.bool("readonly", false));
        let second_target = a.opt_choice("second_target", &["none", "works"]);
        let (repeat, unstage_without_path) = (a.bool("repeat", true), a.bool("unstage_without_path", false));
        let defaults = api::defaults::<LifecycleArgs>();
        ExistingArgs(LifecycleArgs { mode, readonly, second_target, repeat, unstage_without_path, ..defaults })
    }
}
