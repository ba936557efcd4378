//! The record stage of [`ScenarioCtx::send`]: what one answer shows beyond its own step's
//! check (broken response rules, evidence of the spec version, a creation refused for room
//! held by what the plugin kept, a creation whose object no call can name).

use prost_reflect::DynamicMessage;
use tonic::Code;

use super::{Response, ScenarioCtx, call_finding, rpc_error_finding};
use crate::{
    client::{ErrorOrigin, RpcError},
    report::{Finding, Severity},
    rules::Violation,
    suite::verifier,
};

impl ScenarioCtx {
    /// Records what an answer shows beyond the step's own check, in this order: the response
    /// rules it broke, the spec version it shows, a refusal for room held by what the plugin
    /// kept, a creation without a usable id. Returns why the call's object is left behind by
    /// the plugin, if so (for the tracker).
    pub(super) fn record(&mut self, rpc: &str, request: &DynamicMessage, answer: &super::Answer) -> Option<String> {
        for violation in self.rules.take() {
            self.push_violation(&violation, request);
        }
        if let Ok(response) = answer {
            self.version_evidence(rpc, request, response);
        }
        if let Err(e) = answer {
            self.room_held_by_kept(e, request);
        }
        match answer {
            Ok(Response::Unary(m)) => self.lost_by_plugin(rpc, request, m),
            _ => None,
        }
    }

    /// Records a broken response rule as a finding of the step that made the call: a MUST
    /// fails, a tolerated MUST warns, what the spec leaves open is a note; the finding names
    /// the rule's requirement. A violation breaks nothing else (the scenario goes on to its
    /// subject), and the same broken field (rule, place and value) is one finding however many
    /// answers of the scenario carry it: the first's.
    pub(crate) fn push_violation(&mut self, v: &Violation, request: &DynamicMessage) {
        let mut f = verifier::violation_finding(v, request);
        f.step = self.step;
        let same_field = |g: &Finding| {
            g.kind == f.kind && g.requirements == f.requirements && g.expected == f.expected && g.got == f.got
        };
        if !self.findings.iter().any(|g| g.repeats(&f) || same_field(g)) {
            self.push(f);
        }
    }

    /// Notes what an OK answer shows of the spec version the plugin speaks, for the report;
    /// evidence against the version the run judges by (judged when the run began, and not
    /// changed mid-run) warns at the step that first got some, once per scenario: never a
    /// failure, as a version is a guess. A listing's entries for objects other scenarios hold
    /// go to the report only: whether they are there depends on timing, and a scenario's
    /// verdict must not.
    pub(super) fn version_evidence(&mut self, rpc: &str, request: &DynamicMessage, response: &Response) {
        let found = crate::version::answer_evidence(rpc, response.messages());
        if found.is_empty() {
            return;
        }
        let own = {
            let ids = self.tracker.object_ids();
            crate::version::answer_evidence_of(rpc, response.messages(), |id| ids.contains(id))
        };
        let shared = self.shared.clone();
        let assumed = &shared.plugin.fingerprint.spec;
        let mut contradicting = Vec::new();
        {
            let mut seen = self.shared.versions.lock().unwrap_or_else(|p| p.into_inner());
            for evidence in found {
                let scenarios = seen.entry(evidence.clone()).or_default();
                if own.contains(&evidence)
                    && scenarios.insert(self.scenario_id.clone())
                    && assumed.contradicted_by(&evidence)
                {
                    contradicting.push(evidence);
                }
            }
        }
        // One warning per scenario is enough to say it; the report lists every piece.
        let warned = self.findings.iter().any(|f| f.kind == "spec-version");
        if let Some(evidence) = contradicting.into_iter().next().filter(|_| !warned) {
            let mut f = call_finding(Severity::Warn, "spec-version", assumed.contradiction(&evidence), rpc, request);
            f.got = Some(format!("{} (CSI v{})", evidence.what, evidence.version));
            f.expected = Some(format!("what CSI v{} defines", assumed.version));
            f.requirements = vec![evidence.requirement.to_owned()];
            self.push(f);
        }
    }

    /// A creation answered OK without a usable id: the plugin may now hold an object no CSI
    /// call can name, so none can delete it. The finding says so (on the rule's finding of
    /// that call), the scenario stops after this step, and the call is journaled as left
    /// behind by the plugin (returned, for the tracker), never tried again by `cleanup`.
    pub(super) fn lost_by_plugin(&mut self, rpc: &str, request: &DynamicMessage, answer: &DynamicMessage) -> Option<String> {
        let (noun, None) = crate::rules::created_id(rpc, answer)? else { return None };
        let name = request.get_field_by_name("name").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let why = format!(
            "{rpc} answered OK without a usable {noun} id: the plugin may now hold a {noun} named {name:?} that no CSI \
             call can delete; it is recorded as left behind by the plugin (the journal and this report), not retried by \
             `cleanup`, and the scenario stops here"
        );
        self.halted = true;
        let step = self.step;
        match self.findings.iter_mut().rev().find(|f| f.kind == "response-rule" && f.rpc.as_deref() == Some(rpc) && f.step == step) {
            Some(f) => f.message = format!("{}; {why}", f.message),
            None => {
                let mut f = call_finding(Severity::Fail, "left-by-plugin", why.clone(), rpc, request);
                let requirement = match rpc {
                    "CreateSnapshot" => "CreateSnapshot.snapshot.fields",
                    "CreateVolumeGroupSnapshot" => "CreateVolumeGroupSnapshot.answer",
                    _ => "CreateVolume.volume.id-required",
                };
                f.requirements = vec![requirement.to_owned()];
                self.push(f);
            }
        }
        Some(why)
    }


    /// A creation refused for room (RESOURCE_EXHAUSTED, or a message saying no space, after
    /// the contention retries) while the plugin keeps objects it answered deleted: the room is
    /// held by what it kept, so the refusal is that broken delete's doing, not this step's
    /// subject. Filed once for the run, as the delete's rule citing what the plugin kept,
    /// under the first scenario (by id) so refused; every other scenario so refused cites
    /// that one finding (see [`crate::suite::witness::Witnesses::blocked`]). The scenario stops: its
    /// verdict is the same whether it ran before the room ran out (its own delete is then
    /// kept) or after, so at any `--jobs`.
    pub(super) fn room_held_by_kept(&mut self, e: &RpcError, request: &DynamicMessage) {
        let refused = e.origin == ErrorOrigin::Plugin
            && (e.code == Code::ResourceExhausted || crate::suite::budget::is_no_space(&e.rpc, e.code, &e.message));
        if !refused || self.contention_expected || !matches!(e.rpc.as_str(), "CreateVolume" | "CreateSnapshot") {
            return;
        }
        let kept = self.shared.verifier.witnesses.kept_objects();
        let Some((delete, _)) = kept.first() else { return };
        let delete = delete.clone();
        let noun = if delete == "DeleteSnapshot" { "snapshot" } else { "volume" };
        let same: Vec<_> = kept.into_iter().filter(|(d, _)| *d == delete).map(|(_, seen)| seen).collect();
        let message = format!(
            "{} answered {}: the plugin has no room while it keeps {} {noun}(s) that {delete} answered OK for (the \
             run's other findings name where); what the step checks cannot be tried, and the scenario stops",
            e.rpc,
            e.code_name(),
            same.len()
        );
        let mut f = rpc_error_finding(e, request, Severity::Fail, "room-held-by-kept", message, None);
        f.requirements = vec![format!("{delete}.deletes")];
        let mut short = f.clone();
        short.message = format!(
            "{} answered {}: no room, held by what the plugin kept after {delete} answered OK; what the step checks \
             cannot be tried, and the scenario stops",
            e.rpc,
            e.code_name()
        );
        f.evidence = same.into_iter().take(3).collect();
        let witnesses = &self.shared.verifier.witnesses;
        let refusal = witnesses.observe(&e.rpc, self.scenario_id(), format!("answered {} for room", e.code_name()));
        witnesses.blocked(self.scenario_id(), self.prepare(f), self.prepare(short), refusal);
        self.room_blocked = Some((self.step, e.rpc.clone()));
        self.halted = true;
    }

}
