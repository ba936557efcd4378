//! Whom the run believes about the plugin's state: the ledger of the look-ups state verdicts
//! rest on (each kept as an [`Evidence`]: call, object, claim, time from the run's start),
//! and the witnesses the run caught breaking their own rule, whose word no verdict rests on
//! afterwards.
//!
//! A delete is judged by two witnesses where the plugin has them (ControllerGetVolume and
//! ListVolumes; GetSnapshot and ListSnapshots, see [`super::verifier::watch`]). A look-up
//! (ControllerGetVolume, GetSnapshot) is asked once per run about an id the run never created
//! before its word counts: the spec gives NOT_FOUND for an unknown id (#controllergetvolume-errors,
//! #getsnapshot-errors), so one that answers OK there would call any deleted object "still
//! there". Such a witness, or one whose claim the other witness disproves, is set aside for
//! the rest of the run, and the broken rule is one finding, filed once per run under the
//! first scenario (by id) whose delete needed it: the same scenario at any `--jobs`.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Mutex,
    time::Instant,
};

use tonic::Code;

use super::{
    deleted,
    settings::{NonexistentIds, Plugin},
};
use crate::{
    proto,
    report::{Evidence, Finding, Severity},
    rules::RuleLog,
};

/// The most observations the ledger keeps (a run's state verdicts need far fewer).
const LEDGER_CAP: usize = 20_000;

/// The run's ledger and its verdicts on witnesses.
pub(crate) struct Witnesses {
    start: Instant,
    state: Mutex<State>,
    /// Held while a look-up's credibility is being tried, so it is tried once.
    trying: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    ledger: Vec<Evidence>,
    /// Look-ups tried: whether each may be believed.
    credible: BTreeMap<&'static str, bool>,
    /// The finding of each witness caught breaking its rule.
    caught: BTreeMap<&'static str, Finding>,
    /// The scenarios whose delete verdicts needed each look-up (whether or not it lied).
    relied: BTreeMap<&'static str, BTreeSet<String>>,
    /// The last sighting of each object the plugin kept after a delete answered OK, by the
    /// delete (`DeleteVolume`): what may hold the room a later creation is refused for.
    kept: BTreeMap<String, Vec<Evidence>>,
    /// The scenarios whose creation was refused for room held by what the plugin kept: the
    /// full finding, the short one that cites it, and the refusal.
    blocked: BTreeMap<String, (Finding, Finding, Evidence)>,
}

/// The requirement a look-up breaks when it answers OK for an object that does not exist.
fn not_found_requirement(get: &str) -> &'static str {
    if get == "GetSnapshot" { "GetSnapshot.errors.not-found" } else { "ControllerGetVolume.errors.not-found" }
}

impl Witnesses {
    pub(crate) fn new(start: Instant) -> Witnesses {
        Witnesses { start, state: Mutex::default(), trying: tokio::sync::Mutex::new(()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records what `rpc`'s answer claimed about `object`, now; returns the observation.
    pub(crate) fn observe(&self, rpc: &str, object: &str, claim: impl Into<String>) -> Evidence {
        let evidence = Evidence {
            rpc: rpc.to_owned(),
            object: object.to_owned(),
            claim: claim.into(),
            at: self.start.elapsed(),
        };
        let mut state = self.state();
        if state.ledger.len() < LEDGER_CAP {
            state.ledger.push(evidence.clone());
        }
        evidence
    }

    /// The observations so far, oldest first.
    #[cfg(test)]
    pub(crate) fn ledger(&self) -> Vec<Evidence> {
        self.state().ledger.clone()
    }

    /// Notes that `scenario`'s delete of an object needs look-up `get`'s word.
    pub(crate) fn relied(&self, get: &'static str, scenario: &str) {
        // The run's own work (the probe, `csi-conform.probe`) is no scenario to file under.
        if !scenario.starts_with("csi-conform.") {
            self.state().relied.entry(get).or_default().insert(scenario.to_owned());
        }
    }

    /// Files that `get` broke its rule: `message` says how, `evidence` shows it. The first
    /// time counts; `get` is not believed again in this run.
    pub(crate) fn catch(&self, get: &'static str, message: String, evidence: Vec<Evidence>) {
        let mut state = self.state();
        state.credible.insert(get, false);
        state.caught.entry(get).or_insert_with(|| {
            let mut f = Finding::new(Severity::Fail, "lying-witness", message);
            f.rpc = Some(get.to_owned());
            f.expected = Some("NOT_FOUND for an object that does not exist".to_owned());
            f.requirements = vec![not_found_requirement(get).to_owned()];
            f.evidence = evidence;
            f
        });
    }

    /// Whether look-up `get` may be believed: asked once per run about an id the run never
    /// created (`--nonexistent-volume-id` / `--nonexistent-snapshot-id` when given); an OK
    /// there breaks its rule (see the module's documentation). Any other answer lets it be
    /// believed (a plugin may refuse an id of a foreign format with INVALID_ARGUMENT).
    pub(crate) async fn credible(&self, get: &'static str, plugin: &Plugin, ids: &NonexistentIds) -> bool {
        if let Some(known) = self.state().credible.get(get) {
            return *known;
        }
        let _once = self.trying.lock().await;
        if let Some(known) = self.state().credible.get(get) {
            return *known;
        }
        let unknown = match get {
            "GetSnapshot" => ids.snapshot.clone(),
            _ => ids.volume.clone(),
        }
        .unwrap_or_else(|| format!("csi-conform-never-created-{}", std::process::id()));
        let (Some(method), Some(conn)) = (proto::method(get), plugin.controller.as_ref()) else {
            return false;
        };
        let rules = RuleLog::new();
        let answer = conn.with_rules(&rules).call_dynamic(&method, deleted::request(get, &unknown, "")).await;
        let believed = match &answer {
            Ok(_) => {
                let evidence = self.observe(get, &unknown, "answered OK for an id this run never created");
                let noun = if get == "GetSnapshot" { "snapshot" } else { "volume" };
                self.catch(
                    get,
                    format!(
                        "{get} answered OK for the {noun} id {unknown:?}, which this run never created (the spec: \
                         NOT_FOUND for an unknown id): its word that a deleted {noun} is still there is not taken; \
                         the run's delete verdicts rest on the listing instead"
                    ),
                    vec![evidence],
                );
                false
            }
            Err(e) => {
                self.observe(get, &unknown, format!("answered {} for an id this run never created", e.code_name()));
                e.code != Code::Ok
            }
        };
        self.state().credible.insert(get, believed);
        believed
    }

    /// Notes that the plugin kept what `rpc` (a delete) answered OK for, as `evidence` shows.
    pub(crate) fn kept(&self, rpc: &str, evidence: &[Evidence]) {
        if let Some(last) = evidence.last() {
            self.state().kept.entry(rpc.to_owned()).or_default().push(last.clone());
        }
    }

    /// The sightings of objects the plugin kept after deletes answered OK (volumes first),
    /// with the delete that did not delete them.
    pub(crate) fn kept_objects(&self) -> Vec<(String, Evidence)> {
        let state = self.state();
        state.kept.iter().flat_map(|(rpc, seen)| seen.iter().map(|e| (rpc.clone(), e.clone()))).collect()
    }

    /// Notes that `scenario`'s creation was refused for room held by what the plugin kept:
    /// `full` is the finding with the kept objects as evidence, `short` the one that cites it,
    /// `refusal` the refused call. The first refusal of each scenario counts.
    pub(crate) fn blocked(&self, scenario: &str, full: Finding, short: Finding, refusal: Evidence) {
        self.state().blocked.entry(scenario.to_owned()).or_insert((full, short, refusal));
    }

    /// The room-held-by-kept findings, for the run's end: the full one once, under the first
    /// scenario (by id) refused for room, and for every other scenario so refused its short
    /// finding citing that one (its refusal and the citation as evidence): the same scenario
    /// at any `--jobs`.
    pub(crate) fn room_filings(&self) -> Vec<(String, Finding)> {
        let state = self.state();
        let Some((first, (full, _, first_refusal))) = state.blocked.iter().next() else {
            return Vec::new();
        };
        let cite = Evidence {
            rpc: full.kind.clone(),
            object: first.clone(),
            claim: format!(
                "the run's one {} finding (under {}, with what the plugin kept as evidence)",
                full.kind,
                full.requirements.join(", ")
            ),
            at: first_refusal.at,
        };
        let mut full = full.clone();
        full.evidence.insert(0, first_refusal.clone());
        let mut out = vec![(first.clone(), full)];
        for (scenario, (_, short, refusal)) in state.blocked.iter().skip(1) {
            let mut f = short.clone();
            f.evidence = vec![refusal.clone(), cite.clone()];
            out.push((scenario.clone(), f));
        }
        out
    }

    /// The findings of the witnesses caught, each for the first scenario (by id) whose
    /// delete verdicts needed that witness; none for a witness no scenario needed.
    pub(crate) fn filings(&self) -> Vec<(String, Finding)> {
        let state = self.state();
        state
            .caught
            .iter()
            .filter_map(|(get, f)| {
                let first = state.relied.get(get)?.iter().next()?;
                Some((first.clone(), f.clone()))
            })
            .collect()
    }

    /// The look-ups some scenario needed that were never tried (their credibility is tried
    /// before the run ends, so that whether a lie is filed does not depend on timing).
    pub(crate) fn untried(&self) -> Vec<&'static str> {
        let state = self.state();
        state.relied.keys().filter(|g| !state.credible.contains_key(*g)).copied().collect()
    }

}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_keeps_each_observation_with_its_time() {
        let witnesses = Witnesses::new(Instant::now());
        let e = witnesses.observe("ListVolumes", "v1", "does not show it (gone)");
        assert_eq!(witnesses.ledger(), vec![e.clone()]);
        assert_eq!(e.to_string(), format!("ListVolumes(v1) at {:.3}s: does not show it (gone)", e.at.as_secs_f64()));
    }

    #[test]
    fn a_lie_is_filed_once_under_the_first_scenario_by_id_that_needed_the_witness() {
        let witnesses = Witnesses::new(Instant::now());
        for scenario in ["lifecycle.b", "csi-conform.probe", "controller.a", "lifecycle.a"] {
            witnesses.relied("ControllerGetVolume", scenario);
        }
        witnesses.relied("GetSnapshot", "snapshots.x");
        assert!(witnesses.filings().is_empty(), "nothing caught, nothing filed");
        assert_eq!(witnesses.untried(), ["ControllerGetVolume", "GetSnapshot"]);
        let evidence = witnesses.observe("ControllerGetVolume", "never", "answered OK");
        witnesses.catch("ControllerGetVolume", "lied".into(), vec![evidence.clone()]);
        witnesses.catch("ControllerGetVolume", "lied again".into(), vec![]);
        let filings = witnesses.filings();
        assert_eq!(filings.len(), 1, "once per run: {filings:?}");
        let (scenario, f) = &filings[0];
        assert_eq!(scenario, "controller.a", "the probe is no scenario; the first by id, at any --jobs");
        assert_eq!((f.severity, f.message.as_str()), (Severity::Fail, "lied"));
        assert_eq!(f.requirements, ["ControllerGetVolume.errors.not-found"]);
        assert_eq!(f.evidence, [evidence]);
        assert_eq!(witnesses.untried(), ["GetSnapshot"], "a caught witness is tried");
    }
}
