//! The settle stage of [`ScenarioCtx::send`] (and of teardown): whether what a delete
//! answered OK for is gone, looked up at once or handed to the run's [`Verifier`](verifier::Verifier), and what
//! the context records when the plugin kept it.

use std::time::Instant;

use prost_reflect::DynamicMessage;

use super::ScenarioCtx;
use crate::suite::{
    deleted,
    verifier::{self, Deferred, Watched},
};

impl ScenarioCtx {
    /// A delete a step made (`track`), answered OK, of something the scenario holds: is it
    /// gone? (A property case's goes to the run's verifier; teardown looks at its deletes
    /// together, see `teardown`.)
    pub(super) async fn settle_step_delete(&mut self, rpc: &str, request: &DynamicMessage, node: usize) {
        if !self.tracker.holds(rpc, request, node) {
            return;
        }
        let answered = Instant::now();
        if !(self.defer_steps && self.defer(rpc, request, node, answered)) {
            let watched = self.watch(rpc, request, answered).await;
            self.settle_delete(request, node, watched);
        }
    }

    /// Whether the object a delete of `request` answered OK for at `answered` is gone, looked
    /// up at once (see [`verifier::watch`]); the calls' rule violations wait in the rule log.
    pub(super) async fn watch(&self, rpc: &str, request: &DynamicMessage, answered: Instant) -> Watched {
        let shared = &self.shared;
        let witnesses = &shared.verifier.witnesses;
        verifier::watch(&shared.plugin, &shared.lookups, witnesses, &self.scenario_id, &self.rules, rpc, request, answered)
            .await
    }

    /// Hands what a delete of `request` (`node`) answered OK for at `answered` to the run's
    /// [`Verifier`](verifier::Verifier): the tracker forgets it, and the verifier tells the journal, and the
    /// scenario's result, what became of it. `false`: the verifier cannot take it (look it up
    /// at once).
    pub(super) fn defer(&mut self, rpc: &str, request: &DynamicMessage, node: usize, answered: Instant) -> bool {
        let verifier = self.shared.verifier.clone();
        let handed = self.tracker.hand_over_matching(rpc, request, node);
        if handed.is_empty() {
            return false;
        }
        let mut refused = Vec::new();
        for tracked in handed {
            let object = Deferred {
                scenario: self.scenario_id.clone(),
                rpc: rpc.to_owned(),
                request: request.clone(),
                tracked,
                answered,
                step: self.step,
                step_name: self.step_name.clone(),
            };
            if let Err(object) = verifier.defer(object) {
                refused.push(object.tracked);
            }
        }
        let deferred = refused.is_empty();
        for tracked in refused {
            self.tracker.take_back(tracked);
        }
        deferred
    }


    /// Takes in what [`ScenarioCtx::watch`] found for the delete `request` (`node`): its calls and
    /// their rule violations; when the witnesses disagreed, an inconclusive finding (the
    /// scenario goes on); when the plugin kept the object, a finding of the current step
    /// (rule `answer.delete-*.gone`, with the witnesses' evidence), the scenario stopping
    /// after the step, and the object handed back to the plugin in the tracker (the journal:
    /// kept by the plugin, never retried by `cleanup`).
    pub(super) fn settle_delete(&mut self, request: &DynamicMessage, node: usize, watched: Watched) {
        self.rpcs += watched.calls;
        // What the look-ups find is about what the plugin keeps, not about the orchestrator's
        // call pattern the delete was sent in (Swarm's `rpc.unstage`: a staged volume deleted):
        // filed under no behaviour, and never excused as the orchestrator's deviation.
        let behaviour = self.behaviour.take();
        for violation in self.rules.take() {
            self.push_violation(&violation, &deleted::request(&violation.rpc, "", ""));
        }
        if let Some(f) = watched.undecided {
            self.push(f);
        }
        let mut decided = None;
        if let Some(kept) = watched.kept {
            self.shared.verifier.witnesses.kept(&kept.rpc, &kept.evidence);
            if let Some((violation, why)) = kept.violation(self.shared.lookups.delete_grace, self.step.is_some()) {
                let mut f = verifier::violation_finding(&violation, request);
                f.step = self.step;
                f.evidence = kept.evidence.clone();
                if !self.findings.iter().any(|g| g.repeats(&f)) {
                    self.push(f);
                }
                decided = Some((kept, why));
            }
        }
        self.behaviour = behaviour;
        let Some((kept, why)) = decided else { return };
        self.halted |= self.step.is_some();
        self.tracker.kept(&kept.rpc, request, node, &why);
        self.kept.push(kept.id);
    }

}
