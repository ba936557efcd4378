//! Whether deleted objects are gone, for the whole run: the look-ups after a delete answered
//! OK ([`watch`], one object at a time, as [`super::deleted`] says why), and the run-wide
//! [`Verifier`] that checks the objects deleted at scenarios' teardowns and by property cases
//! together, with one listing, and hands each scenario what it found
//! ([`Amendment`]) when it knows.
//!
//! The exact-grace rule, the same as one object's look-ups: an object passes only if a look
//! that began after its delete's answer and no later than the answer + `--delete-grace` found
//! it gone. The verifier lists when the oldest waiting object is about to reach that deadline
//! (and once more when the run's scenarios are done, and at once when a create waits for room
//! these objects may still hold, [`Budget::sighting_wanted`]): an object absent from the listing is
//! gone; one it still shows is looked up on its own ([`watch`]) until its own deadline, and if
//! it is still there it was kept by the plugin, the finding of today's look-ups. A listing
//! decides absence only when it is one page and breaks no response rule: CSI lets a listing
//! paged while objects come and go miss some (spec.md, ListVolumes: the CO "SHALL NOT expect a
//! consistent view" across pages), and absence read from such a listing could pass a kept
//! object; then every object of the round is looked up on its own. A plugin that advertises
//! no listing (only GET_VOLUME / GET_SNAPSHOT) is never deferred to the verifier.
//!
//! The verifier's own calls find only whether objects are gone: what their answers break
//! (a response rule) is logged, not filed, since which calls it makes depends on the
//! listing's pages, so on how many objects the run holds at the moment, and a verdict must
//! not depend on `--jobs`; the scenarios that make those calls judge them. A scenario's
//! verdict on its object is the same either way: kept, or not.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use prost_reflect::{DynamicMessage, MethodDescriptor, ReflectMessage};

use super::{
    budget::Budget,
    deleted::{self, Look},
    resources::{Tracked, set_secrets},
    resources::ResourceObserver,
    settings::{DeleteLookups, Plugin},
    witness::Witnesses,
};
use crate::{
    client::Connection,
    proto,
    report::{Evidence, Finding, Severity},
    rules::{Level, RuleLog, Violation},
};

/// The shortest `--delete-grace` under which deletes are deferred: below it a listing could
/// not be taken before the deadline, and each object is looked up at once.
const MIN_GRACE: Duration = Duration::from_millis(200);

/// A delete answered OK whose object the plugin still showed after the grace period.
pub(crate) struct Kept {
    pub(crate) rpc: String,
    pub(crate) noun: &'static str,
    pub(crate) id: String,
    /// Where it still showed (`ListVolumes still lists it`).
    pub(crate) how: String,
    pub(crate) looks: u32,
    /// How long after the answer it was last seen.
    pub(crate) after: Duration,
    /// The last look of each witness that still showed it.
    pub(crate) evidence: Vec<Evidence>,
}

impl Kept {
    /// The broken rule (`answer.delete-*.gone`) and why the object stays the plugin's (for
    /// the journal); `stops`: the scenario stops after the step that deleted it.
    pub(crate) fn violation(&self, grace: Duration, stops: bool) -> Option<(Violation, String)> {
        let Kept { rpc, noun, id, how, looks, after, .. } = self;
        let rule = if *noun == "snapshot" { "answer.delete-snapshot.gone" } else { "answer.delete-volume.gone" };
        let rule = crate::rules::by_id(rule)?;
        let why = format!(
            "{rpc} answered OK, yet {how} {} later ({looks} looks within --delete-grace {}): the {noun} was not \
             deleted. Asking again would only get another OK (a delete is idempotent), so it stays on the plugin: it \
             is recorded as kept by the plugin (the journal and this report), not retried by `cleanup`",
            crate::client::human_duration(*after),
            crate::client::human_duration(grace),
        );
        let detail = if stops { format!("{why}; the scenario stops here") } else { why.clone() };
        let violation =
            Violation { rule, rpc: rpc.clone(), path: format!("{noun}_id"), value: Some(format!("{id:?}")), detail };
        Some((violation, why))
    }
}

/// What the look-ups after one delete found: the object kept (a failure), or the witnesses
/// disagreeing (an inconclusive finding: the verdict could not rest on either), or neither;
/// and the calls they took.
#[derive(Default)]
pub(crate) struct Watched {
    pub(crate) kept: Option<Kept>,
    pub(crate) undecided: Option<Finding>,
    pub(crate) calls: u64,
}

/// The finding of a broken response rule in the answer to `request`: a MUST fails, a tolerated
/// MUST warns, what the spec leaves open is a note; it names the rule's requirement.
pub(crate) fn violation_finding(v: &Violation, request: &DynamicMessage) -> Finding {
    let (severity, kind) = match v.rule.level {
        Level::Must => (Severity::Fail, "response-rule"),
        Level::Tolerated => (Severity::Warn, "response-rule"),
        Level::Note => (Severity::Pass, crate::report::NOTE_KIND),
    };
    let mut f = Finding::new(severity, kind, v.to_string());
    f.rpc = Some(v.rpc.clone());
    f.request = Some(proto::to_redacted_json(request));
    f.expected = Some(v.rule.summary.to_owned());
    f.got = Some(match &v.value {
        Some(value) => format!("{} = {value}", v.path),
        None => v.path.clone(),
    });
    f.requirements = vec![v.rule.requirement.to_owned()];
    f
}

/// The controller connection look-ups go to, its answers checked into `rules`.
fn controller(plugin: &Plugin, rules: &RuleLog) -> Result<Connection, String> {
    plugin
        .controller
        .as_ref()
        .map(|c| c.with_rules(rules))
        .ok_or_else(|| "no endpoint serves the Controller service in this run".to_owned())
}

/// A look-up's request for `id` (a listing's page at `token`), with the secrets the run has
/// for it.
fn look_up_request(lookups: &DeleteLookups, lookup: &str, id: &str, token: &str) -> DynamicMessage {
    let mut request = deleted::request(lookup, id, token);
    if request.descriptor().get_field_by_name("secrets").is_some()
        && let Some(values) = lookups.secrets.get(&crate::secrets::secret_key(lookup))
    {
        set_secrets(&mut request, values);
    }
    request
}

/// One look at `id` through `method` (every page of a listing, at most
/// [`crate::rules::MAX_PAGES`], until it shows), and the calls it took.
async fn look_up(
    plugin: &Plugin,
    lookups: &DeleteLookups,
    rules: &RuleLog,
    method: &MethodDescriptor,
    id: &str,
) -> (Look, u64) {
    let conn = match controller(plugin, rules) {
        Ok(c) => c,
        Err(e) => return (Look::Unknown(e), 0),
    };
    let mut token = String::new();
    let mut seen = HashSet::new();
    let mut calls = 0;
    while calls < crate::rules::MAX_PAGES as u64 {
        let answer = conn.call_dynamic(method, look_up_request(lookups, method.name(), id, &token)).await;
        calls += 1;
        match deleted::look(method.name(), id, answer.as_ref().map_err(|e| (e.code, e.message.as_str()))) {
            Look::Next(next) if seen.insert(next.clone()) => token = next,
            Look::Next(next) => return (Look::Unknown(format!("{} repeated next_token {next:?}", method.name())), calls),
            other => return (other, calls),
        }
    }
    (Look::Unknown(format!("{} did not end within {} pages", method.name(), crate::rules::MAX_PAGES)), calls)
}

/// The claim of a look, for the ledger.
fn claim(look: &Look) -> String {
    match look {
        Look::Gone => "does not show it (gone)".to_owned(),
        Look::Still(how) => how.clone(),
        Look::Next(token) => format!("goes on at {token:?}"),
        Look::Unknown(why) => why.clone(),
    }
}

/// After a DeleteVolume or DeleteSnapshot of `request` answered OK at `answered`: whether
/// the plugin still shows the object, looked up again until it is gone or the grace period
/// (`--delete-grace`, from the answer) is over; never by deleting again.
///
/// Two witnesses where the plugin has them (see [`super::witness`]): the look-up
/// (ControllerGetVolume, GetSnapshot), once the run has found it answers NOT_FOUND for an id it
/// never created, and the listing (ListVolumes, ListSnapshots). The object is kept (a
/// failure) only when every witness still shows it at the end of the grace period, or when
/// the one witness there is still does. When the look-up says it is there and the listing
/// says it is gone, the look-up broke its rule (NOT_FOUND for an object that does not exist):
/// that is filed once for the run, it is not believed again, and this verdict is
/// inconclusive. A plugin that advertises neither is not checked this way. Their rule
/// violations wait in `rules`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn watch(
    plugin: &Plugin,
    lookups: &DeleteLookups,
    witnesses: &Witnesses,
    scenario: &str,
    rules: &RuleLog,
    rpc: &str,
    request: &DynamicMessage,
    answered: Instant,
) -> Watched {
    let mut out = Watched::default();
    let Some((noun, id)) = deleted::deleted_id(rpc, request) else { return out };
    let get = deleted::get_lookup(rpc, &plugin.fingerprint);
    if let Some(get) = get {
        witnesses.relied(get, scenario);
    }
    let get = match get {
        Some(get) if witnesses.credible(get, plugin, &lookups.nonexistent).await => Some(get),
        _ => None,
    };
    let listing = deleted::listing(rpc, &plugin.fingerprint);
    let methods: Vec<MethodDescriptor> = get.into_iter().chain(listing).filter_map(proto::method).collect();
    if methods.is_empty() {
        tracing::debug!(rpc, "the plugin advertises no way to look a deleted {noun} up that the run believes: not checked");
        return out;
    }
    let grace = lookups.delete_grace;
    let mut pause = Duration::from_millis(100);
    let mut looks = 0;
    loop {
        looks += 1;
        let mut still: Vec<(String, Evidence)> = Vec::new();
        for method in &methods {
            let (look, n) = look_up(plugin, lookups, rules, method, &id).await;
            out.calls += n;
            let evidence = witnesses.observe(method.name(), &id, claim(&look));
            match look {
                Look::Still(how) => still.push((how, evidence)),
                Look::Gone | Look::Next(_) if still.is_empty() => return out,
                Look::Gone | Look::Next(_) => {
                    // The look-up shows what the listing of everything the plugin knows does
                    // not, after a delete answered OK: the look-up broke its rule.
                    let get = get.unwrap_or("ControllerGetVolume");
                    let mut shown: Vec<Evidence> = still.into_iter().map(|(_, e)| e).collect();
                    shown.push(evidence);
                    witnesses.catch(
                        get,
                        format!(
                            "{get} answered OK for the {noun} {id:?} after {rpc} answered OK, while {} no longer \
                             lists it: the {noun} is gone by the plugin's own listing, and {get} should have \
                             answered NOT_FOUND; its word is not taken for the rest of the run",
                            method.name()
                        ),
                        shown.clone(),
                    );
                    let mut f = Finding::inconclusive(
                        "witnesses-disagree",
                        format!(
                            "whether {rpc} deleted the {noun} {id:?} is not decided: {get} says it is there, {} \
                             says it is gone (the disagreement is filed once, under {get})",
                            method.name()
                        ),
                    );
                    f.rpc = Some(rpc.to_owned());
                    f.request = Some(proto::to_redacted_json(request));
                    f.evidence = shown;
                    out.undecided = Some(f);
                    return out;
                }
                // The second witness tells nothing: the first, believed, stands alone.
                Look::Unknown(why) if !still.is_empty() => {
                    tracing::info!(rpc, "{} tells nothing of the deleted {noun}: {why}", method.name());
                }
                Look::Unknown(why) => {
                    tracing::info!(rpc, "whether the deleted {noun} is gone is unknown: {why}");
                    return out;
                }
            }
        }
        let left = grace.saturating_sub(answered.elapsed());
        if left.is_zero() {
            let how = still.iter().map(|(how, _)| how.as_str()).collect::<Vec<_>>().join(", and ");
            let evidence = still.into_iter().map(|(_, e)| e).collect();
            out.kept = Some(Kept { rpc: rpc.to_owned(), noun, id, how, looks, after: answered.elapsed(), evidence });
            return out;
        }
        tokio::time::sleep(pause.min(left)).await;
        pause = pause.saturating_mul(2);
    }
}

/// An object whose delete answered OK, handed to the [`Verifier`].
#[derive(Clone)]
pub(crate) struct Deferred {
    /// The scenario that deleted it (its id).
    pub(crate) scenario: String,
    /// The delete and its request as sent.
    pub(crate) rpc: String,
    pub(crate) request: DynamicMessage,
    /// What the scenario tracked: the journal hears of it when the verdict is in.
    pub(crate) tracked: Tracked,
    pub(crate) answered: Instant,
    /// The step that deleted it (`None`: teardown), and its name.
    pub(crate) step: Option<usize>,
    pub(crate) step_name: Option<String>,
}

/// What the verifier found for one scenario after it ended: findings (a kept object, or one
/// not verified) and the look-ups it sent for that scenario's objects alone (not its
/// listings, which are the run's).
#[derive(Debug, Default)]
pub(crate) struct Amendment {
    pub(crate) findings: Vec<Finding>,
    pub(crate) rpcs: u64,
}

#[derive(Default)]
struct State {
    /// Every object handed over and not yet decided.
    objects: BTreeMap<u64, Deferred>,
    /// Those not yet in a listing.
    waiting: Vec<u64>,
    next: u64,
    amendments: BTreeMap<String, Amendment>,
    /// The run's scenarios are done: nothing more is taken.
    closed: bool,
    /// Objects being looked up on their own.
    follow_ups: Vec<tokio::task::JoinHandle<()>>,
    /// The task that lists when a deadline nears.
    serving: Option<tokio::task::JoinHandle<()>>,
}

/// The run-wide delete verifier (see the module's documentation).
pub(crate) struct Verifier {
    /// Whom the run believes about deleted objects (the verifier's look-ups and the
    /// scenarios' alike).
    pub(crate) witnesses: Witnesses,
    plugin: Plugin,
    /// What its look-ups read of the run's settings.
    lookups: DeleteLookups,
    /// Hears of what it finds released or kept.
    observer: Option<Arc<dyn ResourceObserver>>,
    /// Told of every object taken and decided: a create refused for room while objects wait
    /// here is contention (see [`Budget::delete_unseen`]).
    budget: Arc<Budget>,
    state: Mutex<State>,
    wake: tokio::sync::Notify,
}

impl Verifier {
    pub(crate) fn new(
        plugin: Plugin,
        lookups: DeleteLookups,
        observer: Option<Arc<dyn ResourceObserver>>,
        budget: Arc<Budget>,
    ) -> Arc<Verifier> {
        Arc::new(Verifier {
            witnesses: Witnesses::new(Instant::now()),
            plugin,
            lookups,
            observer,
            budget,
            state: Mutex::default(),
            wake: tokio::sync::Notify::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `object` to decide later; hands it back when it cannot (the run's scenarios are
    /// done, no listing is advertised for it, or the grace is too short for one).
    pub(crate) fn defer(&self, object: Deferred) -> Result<(), Box<Deferred>> {
        if self.lookups.delete_grace < MIN_GRACE || deleted::listing(&object.rpc, &self.plugin.fingerprint).is_none() {
            return Err(Box::new(object));
        }
        if let Some(get) = deleted::get_lookup(&object.rpc, &self.plugin.fingerprint) {
            self.witnesses.relied(get, &object.scenario);
        }
        let mut state = self.state();
        if state.closed {
            return Err(Box::new(object));
        }
        state.next += 1;
        let key = state.next;
        state.objects.insert(key, object);
        state.waiting.push(key);
        self.budget.delete_unseen();
        drop(state);
        self.wake.notify_one();
        Ok(())
    }

    /// How long before an object's deadline its listing is taken.
    fn margin(&self) -> Duration {
        (self.lookups.delete_grace / 2).min(Duration::from_secs(1))
    }

    /// Starts listing whenever the oldest waiting object nears its deadline, until
    /// [`Verifier::close`].
    pub(crate) fn start(self: &Arc<Self>) {
        let handle = tokio::spawn(self.clone().serve());
        self.state().serving = Some(handle);
    }

    async fn serve(self: Arc<Self>) {
        loop {
            let due = {
                let state = self.state();
                if state.closed {
                    return;
                }
                state.waiting.iter().filter_map(|k| state.objects.get(k)).map(|o| o.answered).min()
            };
            match due {
                None => self.wake.notified().await,
                Some(answered) => {
                    let at = answered + self.lookups.delete_grace.saturating_sub(self.margin());
                    tokio::select! {
                        () = tokio::time::sleep_until(at.into()) => self.round().await,
                        // A create waits for room these objects may hold: look now (a listing
                        // before the deadline keeps the exact-grace rule).
                        () = self.budget.sighting_wanted() => self.round().await,
                        () = self.wake.notified() => {}
                    }
                }
            }
        }
    }

    /// Takes nothing more; lists what still waits, looks up what a listing still shows, and
    /// returns what each scenario is to be told. `interrupted`: the run was stopped, and
    /// what is not decided within the grace period is reported as not verified (never as a
    /// pass), left in the journal.
    pub(crate) async fn close(self: &Arc<Self>, interrupted: bool) -> BTreeMap<String, Amendment> {
        let serving = {
            let mut state = self.state();
            state.closed = true;
            state.serving.take()
        };
        self.wake.notify_one();
        let abort = serving.as_ref().map(tokio::task::JoinHandle::abort_handle);
        let flush = async {
            if let Some(serving) = serving {
                let _ = serving.await;
            }
            self.round().await;
            loop {
                let follow_ups = std::mem::take(&mut self.state().follow_ups);
                if follow_ups.is_empty() {
                    break;
                }
                futures_util::future::join_all(follow_ups).await;
            }
        };
        if interrupted {
            if tokio::time::timeout(self.lookups.delete_grace, flush).await.is_err() {
                abort.iter().for_each(tokio::task::AbortHandle::abort);
                self.state().follow_ups.drain(..).for_each(|h| h.abort());
            }
        } else {
            flush.await;
        }
        // Whether a witness lies is decided for every look-up some delete needed, whatever
        // the timing let the run ask; each lie is filed once.
        for get in self.witnesses.untried() {
            self.witnesses.credible(get, &self.plugin, &self.lookups.nonexistent).await;
        }
        let mut filings = self.witnesses.filings();
        filings.extend(self.witnesses.room_filings());
        let mut state = self.state();
        for (scenario, f) in filings {
            state.amendments.entry(scenario).or_default().findings.push(f);
        }
        let unverified: Vec<Deferred> = std::mem::take(&mut state.objects).into_values().collect();
        unverified.iter().for_each(|_| self.budget.delete_seen());
        for object in unverified {
            let Some((noun, id)) = deleted::deleted_id(&object.rpc, &object.request) else { continue };
            let message = format!(
                "{} answered OK, but whether the plugin deleted the {noun} {id:?} was not verified: the run was \
                 stopped first; it stays in the journal for `csi-conform cleanup`",
                object.rpc
            );
            let mut f = Finding::new(Severity::Error, "delete-unverified", message);
            f.rpc = Some(object.rpc.clone());
            f.request = Some(proto::to_redacted_json(&object.request));
            let amendment = state.amendments.entry(object.scenario.clone()).or_default();
            amendment.findings.push(at_step(f, &object));
        }
        std::mem::take(&mut state.amendments)
    }

    /// One listing per kind for every waiting object: absent ones are gone, the others are
    /// looked up on their own.
    async fn round(self: &Arc<Self>) {
        let batch: Vec<(u64, Deferred)> = {
            let mut state = self.state();
            let keys = std::mem::take(&mut state.waiting);
            keys.into_iter().filter_map(|k| state.objects.get(&k).map(|o| (k, o.clone()))).collect()
        };
        let mut kinds: BTreeMap<&'static str, Vec<(u64, Deferred)>> = BTreeMap::new();
        for (key, object) in batch {
            if let Some(listing) = deleted::listing(&object.rpc, &self.plugin.fingerprint) {
                kinds.entry(listing).or_default().push((key, object));
            }
        }
        for (listing, mut objects) in kinds {
            objects.sort_by_key(|(_, o)| o.answered);
            let started = Instant::now();
            // The listing is the run's, not a scenario's: which scenarios' objects share it
            // depends on timing, and a scenario's count of RPCs must not (the report's table
            // of RPCs counts it).
            let listed = self.list(listing).await;
            for (key, object) in objects {
                let in_time = started <= object.answered + self.lookups.delete_grace;
                match &listed {
                    Some(ids) if in_time && !ids.contains(&object.id()) => self.settle(key, Watched::default()),
                    _ => {
                        let verifier = self.clone();
                        let handle = tokio::spawn(async move { verifier.follow_up(key, object).await });
                        self.state().follow_ups.push(handle);
                    }
                }
            }
        }
    }

    /// The ids one listing names, or `None` when it cannot tell absence: an error, more than
    /// one page, or an answer breaking a response rule.
    async fn list(&self, listing: &str) -> Option<HashSet<String>> {
        let rules = RuleLog::new();
        let (Some(method), Ok(conn)) = (proto::method(listing), controller(&self.plugin, &rules)) else {
            return None;
        };
        let answer = conn.call_dynamic(&method, look_up_request(&self.lookups, listing, "", "")).await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                tracing::info!("{listing} answered {}: the deleted objects are looked up one by one", e.code_name());
                return None;
            }
        };
        let (ids, next) = deleted::listed(listing, &answer);
        let broken = rules.take();
        if !next.is_empty() || !broken.is_empty() {
            tracing::debug!(listing, pages = !next.is_empty(), broken = broken.len(), "the listing cannot tell absence");
            return None;
        }
        Some(ids.into_iter().collect())
    }

    async fn follow_up(self: Arc<Self>, key: u64, object: Deferred) {
        let rules = RuleLog::new();
        let watched = watch(
            &self.plugin,
            &self.lookups,
            &self.witnesses,
            &object.scenario,
            &rules,
            &object.rpc,
            &object.request,
            object.answered,
        )
        .await;
        // Whether an object is looked up on its own depends on the listing (its pages, so on
        // how many objects the run holds at the moment): what these calls' answers break is
        // left to the scenarios that make those calls, or a verdict would depend on --jobs.
        for broken in rules.take() {
            tracing::info!(scenario = %object.scenario, "a look-up after a delete: {broken}");
        }
        self.settle(key, watched);
    }

    /// The verdict on object `key`: its calls, the finding when the plugin kept it, and the
    /// journal told.
    fn settle(&self, key: u64, watched: Watched) {
        let mut state = self.state();
        let Some(object) = state.objects.remove(&key) else { return };
        // Told before the budget: a create waiting for room learns of it when it wakes.
        if let Some(kept) = &watched.kept {
            self.witnesses.kept(&kept.rpc, &kept.evidence);
        }
        self.budget.delete_seen();
        let amendment = state.amendments.entry(object.scenario.clone()).or_default();
        amendment.rpcs += watched.calls;
        if let Some(f) = watched.undecided {
            amendment.findings.push(at_step(f, &object));
        }
        let evidence = watched.kept.as_ref().map(|k| k.evidence.clone()).unwrap_or_default();
        let kept = watched.kept.and_then(|k| k.violation(self.lookups.delete_grace, false));
        if let Some((violation, _)) = &kept {
            let mut f = violation_finding(violation, &object.request);
            f.evidence = evidence;
            amendment.findings.push(at_step(f, &object));
        }
        drop(state);
        if let Some(observer) = &self.observer {
            match &kept {
                Some((_, why)) => observer.kept(&object.tracked, why),
                None => observer.released(&object.tracked),
            }
        }
    }
}

impl Deferred {
    fn id(&self) -> String {
        deleted::deleted_id(&self.rpc, &self.request).map(|(_, id)| id).unwrap_or_default()
    }
}

/// `f` as the step that deleted `object` would have recorded it.
fn at_step(mut f: Finding, object: &Deferred) -> Finding {
    f.step = object.step;
    if let Some(name) = &object.step_name {
        f.message = format!("{name}: {}", f.message);
    }
    f
}
