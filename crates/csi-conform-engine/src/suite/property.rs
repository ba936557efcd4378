//! Property steps: a named invariant checked against the plugin over generated volume
//! capability sets (`capability::strategy`), `--property-cases` cases per step.
//!
//! The cases come from proptest's generator, seeded from the run's `--seed`, the scenario id
//! and the step's position, so a run replays exactly and `--focus` on one scenario replays
//! the same cases. A failing case is shrunk the way proptest shrinks (simplify while it still
//! fails, complicate when it passes), each candidate checked against the plugin, down to a
//! minimal case; the finding shows that case (capabilities displayed, mount flags counted,
//! never shown), the seed and the command that replays it. Up to `--jobs` cases are
//! evaluated at once, each through a fork of the scenario's context over the run's
//! connections; the first case by number that does not hold decides, and shrinking is
//! sequential, so a seed gives the same finding whatever the timing. Whatever a case creates
//! is tracked (and journaled), deleted by the case itself, and torn down with the scenario
//! if that failed.

use std::{collections::BTreeMap, time::Instant};

use proptest::{
    strategy::{Strategy, ValueTree},
    test_runner::{Config, RngAlgorithm, TestRng, TestRunner},
};

use super::{
    budget::Demand,
    catalog::CheckArgs,
    checks::properties::{self, CaseInput, CaseOutcome, PropertyDef},
    ctx::{Flow, ScenarioCtx},
    model::PropertyStep,
};
use crate::{
    capability::{VolumeCapability, strategy},
    report::{Finding, Severity},
};

/// The most shrinking steps after a failure (each one calls the plugin).
const MAX_SHRINK_STEPS: u32 = 512;

/// The runnable property a step names (the loader accepts only the registry's names).
fn definition(step: &PropertyStep) -> &'static PropertyDef {
    properties::find(step.property.name).expect("a property step names a registered property")
}

/// The seed of one property step's generator: the run's seed, the scenario and the step,
/// mixed with a fixed function (FNV-1a, then SplitMix64 to fill 32 bytes), so it is the same
/// on every machine and in every build.
pub fn case_seed(run_seed: u64, scenario: &str, step: usize) -> [u8; 32] {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = run_seed.to_le_bytes().into_iter().chain(scenario.bytes()).chain((step as u64).to_le_bytes());
    for b in bytes {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut out = [0u8; 32];
    for chunk in out.chunks_mut(8) {
        hash = hash.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = hash;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out
}

/// A set of capabilities as shown in findings: `[SINGLE_NODE_WRITER block; ...]`.
pub fn show_set(caps: &[VolumeCapability]) -> String {
    let shown: Vec<String> = caps.iter().map(ToString::to_string).collect();
    format!("[{}]", shown.join("; "))
}

/// The command that replays one scenario of this run: its own command line with the seed,
/// focused on the scenario (ids are `[a-z0-9.-]`, so only the dots need escaping).
fn replay_command(ctx: &ScenarioCtx) -> String {
    let config = ctx.config();
    let start = config.replay_command.as_deref().unwrap_or("csi-conform run");
    format!("{start} --seed {} --focus '^{}$'", config.seed, ctx.scenario_id().replace('.', "\\."))
}

/// Runs a `property` step (the `index`th step of the scenario).
pub(crate) async fn property_step(ctx: &mut ScenarioCtx, step: &PropertyStep, index: usize) -> Flow {
    let what = format!("property {}", step.property.name);
    let args = match ctx.eval_args(&what, &step.args) {
        Ok(args) => args,
        Err(flow) => return flow,
    };
    let bounds = step.bounds.apply(&ctx.config().property_bounds);
    if let Err(e) = bounds.validate() {
        ctx.push(Finding::new(Severity::Error, "suite", format!("{what}: {e}")));
        return Flow::Stop;
    }
    let cases = ctx.config().property_cases;
    let seed = case_seed(ctx.seed(), ctx.scenario_id(), index);
    let config = Config { failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let generator = strategy::capability_set(&bounds);
    // The cases are generated in order from the seeded runner, as many evaluated at once
    // as the run has jobs; the first case (by number) that does not hold decides, so the
    // outcome does not depend on which answer came first. Once one is known no further
    // case starts, and every case in flight finishes (what it made is then torn down).
    //
    // A property whose cases create volumes holds one in the scenario's budget: one case
    // runs on that, and further ones beside it only while the run's budgets have room for
    // their volume (see `budget`). It also stops generating new cases after
    // `--property-time`, and says how many ran.
    let width = ctx.config().jobs.max(1);
    let case_fn = definition(step).case;
    let creates = step.property.rpcs.contains(&"CreateVolume");
    let time_limit = Some(ctx.config().property_time).filter(|t| creates && !t.is_zero());
    let started = Instant::now();
    let mut base_free = true;
    let mut out_of_time = false;
    let mut trees = Vec::new();
    let mut in_flight = tokio::task::JoinSet::new();
    let mut decided: BTreeMap<u32, CaseOutcome> = BTreeMap::new();
    let mut cannot_generate = None;
    let mut next = 1u32;
    loop {
        while in_flight.len() < width && next <= cases && decided.is_empty() && cannot_generate.is_none() {
            if time_limit.is_some_and(|t| started.elapsed() >= t) {
                out_of_time = true;
                break;
            }
            let lease = match (creates, base_free) {
                (false, _) | (true, true) => None,
                (true, false) => match ctx.budget().try_extra(Demand::volume(ctx.small_size())) {
                    Some(lease) => Some(lease),
                    None => break,
                },
            };
            let on_base = creates && lease.is_none();
            match generator.new_tree(&mut runner) {
                Ok(tree) => {
                    let caps = tree.current();
                    trees.push(tree);
                    let input = CaseInput { args: args.clone(), name: format!("{}-p{next}", ctx.name()) };
                    let mut fork = ctx.fork();
                    // A case's delete is its last call: nothing of the scenario waits for it.
                    fork.set_defer_steps(fork.defer_teardown());
                    if let Some(lease) = &lease {
                        fork.work_under(lease);
                    }
                    base_free &= !on_base;
                    let case = next;
                    in_flight.spawn(async move {
                        let outcome = case_fn(&mut fork, &input, &caps).await;
                        drop(lease);
                        (case, fork, outcome, on_base)
                    });
                    next += 1;
                }
                Err(reason) => cannot_generate = Some(reason),
            }
        }
        let Some(joined) = in_flight.join_next().await else { break };
        let (case, fork, outcome, on_base) = joined.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        base_free |= on_base;
        ctx.absorb(fork);
        if !matches!(outcome, CaseOutcome::Holds) {
            decided.insert(case, outcome);
        }
    }
    let ran = next - 1;
    if out_of_time && ran < cases {
        let within = crate::client::human_duration(started.elapsed());
        let message = format!(
            "{what}: {ran} of {cases} cases ran, in {within} (--property-time stops a step whose cases create volumes)"
        );
        tracing::info!("{}: {message}", ctx.scenario_id());
        ctx.push(Finding::new(Severity::Pass, "property-cases", message));
    }
    let Some((case, outcome)) = decided.pop_first() else {
        if let Some(reason) = cannot_generate {
            ctx.push(Finding::new(Severity::Error, "suite", format!("{what}: cannot generate a case: {reason}")));
            return Flow::Stop;
        }
        return Flow::Continue;
    };
    let failure = match outcome {
        CaseOutcome::Fails(f) => f,
        other => return end_property(ctx, other),
    };
    // Shrinking is sequential (each candidate depends on the answer to the one before);
    // its cases are named after all the generated ones.
    let mut evaluations = cases;
    let mut tree = trees.swap_remove(case as usize - 1);
    let mut minimal = (tree.current(), failure);
    let mut shrinks = 0u32;
    let mut more = tree.simplify();
    let mut interrupted = None;
    while more && shrinks < MAX_SHRINK_STEPS {
        shrinks += 1;
        more = match property_case(ctx, step, &args, &tree.current(), &mut evaluations).await {
            CaseOutcome::Holds => tree.complicate(),
            CaseOutcome::Fails(f) => {
                minimal = (tree.current(), f);
                tree.simplify()
            }
            other => {
                interrupted = Some(other);
                false
            }
        };
    }
    let (caps, mut finding) = minimal;
    let smallest = if interrupted.is_some() { "smallest case found before shrinking stopped" } else { "minimal case" };
    finding.message = format!(
        "property {} does not hold: {}; {smallest} {} (case {case} of {cases}, {shrinks} shrinking steps); seed {}; replay: {}",
        step.property.name,
        finding.message,
        show_set(&caps),
        ctx.seed(),
        replay_command(ctx),
    );
    ctx.push(finding);
    if let Some(CaseOutcome::Stop(f)) = interrupted {
        ctx.push(f);
    }
    Flow::Stop
}

async fn property_case(
    ctx: &mut ScenarioCtx,
    step: &PropertyStep,
    args: &CheckArgs,
    caps: &[VolumeCapability],
    evaluations: &mut u32,
) -> CaseOutcome {
    *evaluations += 1;
    let input = CaseInput { args: args.clone(), name: format!("{}-p{evaluations}", ctx.name()) };
    (definition(step).case)(ctx, &input, caps).await
}

fn end_property(ctx: &mut ScenarioCtx, outcome: CaseOutcome) -> Flow {
    match outcome {
        CaseOutcome::Holds => Flow::Continue,
        CaseOutcome::Skip(reason) => Flow::Skip(reason),
        CaseOutcome::Fails(f) | CaseOutcome::Stop(f) => {
            ctx.push(f);
            Flow::Stop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_differ_by_run_seed_scenario_and_step_and_are_stable() {
        let a = case_seed(7, "properties.x", 0);
        assert_eq!(a, case_seed(7, "properties.x", 0));
        assert_ne!(a, case_seed(8, "properties.x", 0));
        assert_ne!(a, case_seed(7, "properties.y", 0));
        assert_ne!(a, case_seed(7, "properties.x", 1));
        // Fixed forever (computed independently of this code): a replay with another build
        // of csi-conform must generate the same cases.
        assert_eq!(a[..8], [0, 58, 249, 104, 76, 239, 136, 197]);
    }

    /// The access mode and access type pairs the first `cases` cases of a step (seeded as a
    /// run seeds it) leave untried, under the default bounds.
    fn untried_pairs(run_seed: u64, cases: u32) -> usize {
        use crate::capability::{AccessMode, AccessType};
        let seed = case_seed(run_seed, "properties.validate-never-fails", 1);
        let config = Config { failure_persistence: None, ..Config::default() };
        let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
        let bounds = strategy::Bounds::default();
        let generator = strategy::capability_set(&bounds);
        let mut tried = std::collections::BTreeSet::new();
        for _ in 0..cases {
            for cap in generator.new_tree(&mut runner).expect("a case").current() {
                tried.insert((cap.access_mode, matches!(cap.access_type, Some(AccessType::Block))));
            }
        }
        AccessMode::ALL.len() * 2 - tried.len()
    }

    #[test]
    fn the_default_case_count_tries_every_access_mode_with_both_access_types() {
        // What the default --property-cases buys (docs/benchmarks.md): over 1,000 run seeds, the
        // seeds whose cases leave some access mode x access type pair untried. Measured: 1 at
        // 64 cases (the default), 112 at 32; a default that misses more than 1 seed in 250
        // fails here.
        let missed = |cases| (0..1000u64).filter(|&s| untried_pairs(s, cases) > 0).count();
        let at_default = missed(crate::suite::DEFAULT_PROPERTY_CASES);
        eprintln!("seeds of 1000 leaving a pair untried: {at_default} at the default");
        assert!(at_default <= 4, "{at_default} of 1000 seeds leave a pair untried at the default case count");
    }

    #[test]
    fn sets_show_every_capability_without_mount_flags() {
        use crate::capability::{AccessMode, AccessType, Mount};
        let secret = VolumeCapability {
            access_mode: Some(AccessMode::SingleNodeWriter),
            access_type: Some(AccessType::Mount(Mount { mount_flags: vec!["password=x".into()], ..Mount::default() })),
        };
        let shown = show_set(&[secret, VolumeCapability::block(AccessMode::MultiNodeMultiWriter)]);
        assert_eq!(shown, "[SINGLE_NODE_WRITER mount(1 mount flag(s)); MULTI_NODE_MULTI_WRITER block]");
    }
}
