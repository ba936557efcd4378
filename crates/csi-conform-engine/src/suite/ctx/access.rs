//! The small API over [`ScenarioCtx`]'s private state: what checks read of the scenario
//! (paths, variables, findings so far, the run's witnesses and budget), and what the engine
//! (steps, properties, the probe, the runner) sets and takes back around them.

use std::{path::PathBuf, sync::Arc};

use super::ScenarioCtx;
use crate::{
    client::Connection,
    report::Finding,
    suite::{
        budget::{Budget, Lease},
        paths::ScenarioPaths,
        resources::Tracker,
        vars::{Val, Vars},
        witness::Witnesses,
    },
};

/// What checks read of the scenario.
impl ScenarioCtx {
    /// The scenario's paths (its directory, staging and target paths).
    pub fn paths(&self) -> &ScenarioPaths {
        &self.paths
    }

    /// The value of variable `name`, if set.
    pub fn var(&self, name: &str) -> Option<&Val> {
        self.vars.get(name)
    }

    /// The findings recorded so far (this context's).
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Whether an answer the scenario cannot go on from was recorded (see `halted` in
    /// [`ScenarioCtx`]): the check stops.
    pub fn halted(&self) -> bool {
        self.halted
    }

    /// The controller connection (`None`: the run has no controller endpoint).
    pub fn controller(&self) -> Option<&Connection> {
        self.shared.plugin.controller.as_ref()
    }

    /// The orchestrator behaviour findings are filed under now (`None`: none).
    pub fn behaviour(&self) -> Option<&'static str> {
        self.behaviour
    }

    /// Files what is found from now on under `behaviour` (without counting it exercised;
    /// see [`ScenarioCtx::exercise`]), or under none: to put back what
    /// [`ScenarioCtx::behaviour`] returned.
    pub fn set_behaviour(&mut self, behaviour: Option<&'static str>) {
        self.behaviour = behaviour;
    }

    /// The run's witnesses (what each observation said, and who contradicted whom).
    pub(crate) fn witnesses(&self) -> &Witnesses {
        &self.shared.verifier.witnesses
    }

    /// Whether the look-up `get` (`ControllerGetVolume`, ...) is a credible witness in this
    /// run (tried once per run, see [`Witnesses::credible`]).
    pub(crate) async fn credible(&self, get: &'static str) -> bool {
        let shared = self.shared.clone();
        shared.verifier.witnesses.credible(get, &shared.plugin, &shared.lookups.nonexistent).await
    }

    /// The resources the scenario holds.
    pub(crate) fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// Where this context's calls' response-rule violations are collected (for a check
    /// that calls a connection of its own).
    pub(crate) fn rules(&self) -> &crate::rules::RuleLog {
        &self.rules
    }

    /// The run's budget scheduler (for extra leases of concurrent work).
    pub(crate) fn budget(&self) -> &Arc<Budget> {
        &self.shared.budget
    }
}

/// What checks and the engine set on a fork before it works.
impl ScenarioCtx {
    /// Works under budget lease `lease` from now on (a fork doing concurrent work).
    pub(crate) fn work_under(&mut self, lease: &Lease) {
        self.holder = lease.id();
    }

    /// Gives a fork its own name and paths (a worker in a directory of its own): `own` are
    /// removed after teardown like the scenario's.
    pub(crate) fn relocate(&mut self, name: String, paths: ScenarioPaths, own: Vec<PathBuf>) {
        self.name = name;
        self.paths = paths;
        self.own_paths.extend(own);
    }
}

/// What the engine (steps, properties, the probe, the runner) sets and takes back.
impl ScenarioCtx {
    /// The scenario's variables.
    pub(crate) fn vars(&self) -> &Vars {
        &self.vars
    }

    /// The scenario's variables, to save into.
    pub(crate) fn vars_mut(&mut self) -> &mut Vars {
        &mut self.vars
    }

    /// Why the run is stopping, if it is.
    pub(crate) fn stopped(&self) -> Option<String> {
        self.shared.stopped()
    }

    /// Step `index` (its name and requirement ids) is being run: findings are filed under it.
    pub(crate) fn begin_step(&mut self, index: usize, name: Option<String>, spec: Vec<String>) {
        self.step = Some(index);
        self.step_name = name;
        self.step_spec = spec;
    }

    /// The step ended (findings still carry its index until the next, or [`Self::end_steps`]).
    pub(crate) fn end_step(&mut self) {
        self.step_name = None;
        self.step_spec = Vec::new();
    }

    /// Every step ran: what follows (teardown) is at no step.
    pub(crate) fn end_steps(&mut self) {
        self.step = None;
    }

    /// Whether the deletes of calls go to the run's verifier (see `defer_steps`).
    pub(crate) fn defer_steps(&self) -> bool {
        self.defer_steps
    }

    pub(crate) fn set_defer_steps(&mut self, defer: bool) {
        self.defer_steps = defer;
    }

    /// Whether teardown's deletes go to the run's verifier (see `defer_teardown`).
    pub(crate) fn defer_teardown(&self) -> bool {
        self.defer_teardown
    }

    /// The call being sent expects a contention code itself: it is not retried.
    pub(crate) fn expect_contention(&mut self, expected: bool) {
        self.contention_expected = expected;
    }

    /// The ids of what a delete answered OK for and the plugin still showed.
    pub(crate) fn kept(&self) -> &[String] {
        &self.kept
    }

    /// The further paths of the scenario's directory checks made, to remove after teardown.
    pub(crate) fn added_paths(&self) -> &[PathBuf] {
        &self.own_paths
    }

    /// RPCs sent to the plugin so far (retries included).
    pub(crate) fn rpcs(&self) -> u64 {
        self.rpcs
    }

    /// Every orchestrator behaviour exercised so far.
    pub(crate) fn exercised(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.exercised.iter().copied()
    }
}
