//! Undoing what earlier runs left behind, from the journal and only from the journal:
//! `csi-conform cleanup`, and `run --cleanup-first`. Idempotent: a resource the plugin no
//! longer knows (NOT_FOUND) counts as undone, a creation whose answer was lost is asked for
//! again to learn what it made, and whatever cannot be undone stays in the journal for the
//! next attempt ([`settle_run`] does the same for a run's own calls in doubt before it ends,
//! asking again while the plugin does not answer). The empty directories of the scenarios whose stagings and publications it
//! undoes (and then their run's) are removed too, so a killed run leaves nothing behind on
//! this host either; only empty directories are ever removed.

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
};

use prost_reflect::DynamicMessage;
use tonic::Code;

use crate::{
    client::{ClientOptions, Connection, Connections, Endpoint, ErrorOrigin},
    journal::{self, CallRecord, Outstanding},
    proto,
    suite::{self, Resource, secret_key},
};

/// What a cleanup did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// One line per resource undone (or found already gone).
    pub undone: Vec<String>,
    /// One line per resource that could not be undone, with why; they stay in the journal.
    pub failed: Vec<String>,
    /// One line per response rule an answer broke on the way (the answers of `cleanup` are
    /// checked like a run's).
    pub rules_broken: Vec<String>,
    /// How many of `failed` got no answer (no connection, a deadline) or a "not now"
    /// (UNAVAILABLE, ABORTED): worth asking again once the plugin answers.
    pub retryable: usize,
}

impl Outcome {
    /// Whether everything was undone.
    pub fn is_complete(&self) -> bool {
        self.failed.is_empty()
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.rules_broken {
            writeln!(f, "cleanup: answer rule broken: {line}")?;
        }
        if self.undone.is_empty() && self.failed.is_empty() {
            return writeln!(f, "cleanup: nothing to do");
        }
        for line in &self.undone {
            writeln!(f, "cleanup: {line}")?;
        }
        for line in &self.failed {
            writeln!(f, "cleanup: FAILED {line} (left in the journal)")?;
        }
        writeln!(f, "cleanup: {} undone, {} left", self.undone.len(), self.failed.len())
    }
}

/// Why an undo failed, and whether asking again later may succeed.
struct Failed {
    why: String,
    retry: bool,
}

impl Failed {
    /// A definite failure: asking again gives the same.
    fn definite(why: String) -> Self {
        Failed { why, retry: false }
    }

    /// A failed call: worth retrying when the plugin did not answer (no connection, a
    /// deadline, the client library's own status) or answered "not now".
    fn call(e: &crate::client::RpcError, why: String) -> Self {
        Failed { why, retry: e.origin != ErrorOrigin::Plugin || matches!(e.code, Code::Unavailable | Code::Aborted) }
    }
}

/// Undoes `records` (as read from the journal at `journal_path`) through whichever of
/// `connections` serves each record's endpoint, newest attachments first, then objects
/// newest first, and marks each undone record done in the journal.
pub async fn undo(
    journal_path: &Path,
    records: &[(String, Outstanding)],
    connections: &Connections,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
) -> Outcome {
    let by_endpoint: BTreeMap<String, &Connection> = connections
        .controller
        .iter()
        .chain(&connections.nodes)
        .map(|c| (c.endpoint().to_string(), c))
        .collect();
    let connection_for = |endpoint: &str| {
        by_endpoint.get(endpoint).copied().cloned().ok_or_else(|| format!("no connection to {endpoint}"))
    };
    undo_with(journal_path, records, connection_for, secrets).await
}

async fn undo_with(
    journal_path: &Path,
    records: &[(String, Outstanding)],
    connection_for: impl Fn(&str) -> Result<Connection, String>,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
) -> Outcome {
    let paths: Vec<PathBuf> = records.iter().flat_map(|(_, r)| node_paths(r)).collect();
    let outcome = undo_records(journal_path, records, connection_for, secrets).await;
    prune_scenario_dirs(&paths);
    outcome
}

async fn undo_records(
    journal_path: &Path,
    records: &[(String, Outstanding)],
    connection_for: impl Fn(&str) -> Result<Connection, String>,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
) -> Outcome {
    let mut order: Vec<(usize, &(String, Outstanding))> = records.iter().enumerate().collect();
    order.sort_by_key(|(i, (_, r))| (r.undo_rank(), std::cmp::Reverse(*i)));
    let mut outcome = Outcome::default();
    let rules = crate::rules::RuleLog::new();
    for (_, (id, item)) in order {
        let conn = match connection_for(item.endpoint()) {
            Ok(conn) => conn.with_rules(&rules),
            Err(why) => {
                outcome.failed.push(format!("{item}: {why}"));
                continue;
            }
        };
        let paths = node_paths(item);
        let result = match item {
            Outstanding::Resource(r) => undo_resource(&conn, &r.resource, r.undo_secrets_key.as_deref(), secrets).await,
            Outstanding::Call(c) => undo_call(&conn, c, secrets).await,
        };
        outcome.rules_broken.extend(rules.take().into_iter().map(|v| format!("{item}: {v}")));
        match result {
            Ok(how) => outcome.undone.push(format!("{item}: {how}")),
            Err(failed) => {
                outcome.retryable += usize::from(failed.retry);
                outcome.failed.push(format!("{item}: {}", failed.why));
                continue;
            }
        }
        // Its empty directories go before its record does: a cleanup killed in between
        // finds the record again (already gone, NOT_FOUND) and removes them then.
        prune_scenario_dirs(&paths);
        if let Err(e) = journal::mark_done(journal_path, std::slice::from_ref(id)) {
            outcome.failed.push(format!("{item}: undone, but the journal could not record it: {e}"));
        }
    }
    outcome
}

/// Sends the call that undoes `resource`, with the secrets of `key` (the journal names it
/// when the creating call sent secrets); NOT_FOUND means it is already gone, which is as good.
async fn undo_resource(
    conn: &Connection,
    resource: &Resource,
    key: Option<&str>,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<String, Failed> {
    let (rpc, mut request) = resource.teardown();
    if let Some(values) = key.and_then(|k| secrets.get(k)) {
        suite::set_secrets(&mut request, values);
    }
    let method = proto::method(rpc).ok_or_else(|| Failed::definite(format!("{rpc} is not a CSI RPC")))?;
    match conn.call_dynamic(&method, request).await {
        Ok(_) => Ok(format!("{rpc} OK")),
        Err(e) if e.code == Code::NotFound && e.origin == ErrorOrigin::Plugin => Ok(format!("{rpc}: already gone")),
        Err(e) => Err(Failed::call(&e, e.to_string())),
    }
}

/// Settles a call whose answer was never heard. An attachment is fully named by its
/// request, so it is undone directly. A creation is asked for again (CSI creation is
/// idempotent by name: the plugin answers with what the first call made, or makes it now) to
/// learn the id, which is then undone. The request was journaled without its secrets (mount
/// flags kept, so the repeat is the request the plugin saw); secrets are filled in again from
/// the secrets file. ALREADY_EXISTS to the repeat leaves the record: whatever holds the name
/// is named as left, never taken for nothing made.
async fn undo_call(
    conn: &Connection,
    call: &CallRecord,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<String, Failed> {
    let rpc = call.rpc.as_str();
    let method = proto::method(rpc).ok_or_else(|| Failed::definite(format!("{rpc} is not a CSI RPC")))?;
    let mut request = proto::from_json_value(method.input(), &call.request)
        .map_err(|e| Failed::definite(format!("the journaled request cannot be read: {e}")))?;
    let nothing = DynamicMessage::new(method.output());
    // What undoes it sends secrets when the creating call did, as the engine's teardown does.
    let undo_key = |r: &Resource| call.secrets_key.as_ref().map(|_| secret_key(r.teardown().0));
    if let Some(resource) = Resource::created_by(rpc, &request, &nothing, call.node) {
        return undo_resource(conn, &resource, undo_key(&resource).as_deref(), secrets).await;
    }
    if let Some(key) = &call.secrets_key
        && let Some(values) = secrets.get(key).or_else(|| secrets.get(&secret_key(rpc)))
    {
        suite::set_secrets(&mut request, values);
    }
    let response = match conn.call_dynamic(&method, request.clone()).await {
        Ok(response) => response,
        // The name is taken by something the repeat does not match: what the first call made
        // (the journal's request is what was sent, so the plugin compares it differently) or
        // another's object. Never "made nothing": it is left, by name, for an operator.
        Err(e) if e.origin == ErrorOrigin::Plugin && e.code == Code::AlreadyExists => {
            let name = call.request.get("name").and_then(|n| n.as_str()).unwrap_or_default();
            return Err(Failed::definite(format!(
                "asked again, {rpc} answered ALREADY_EXISTS: an object named {name:?} is on the plugin and may be what \
                 the lost call made; it is left there ({})",
                e.message
            )));
        }
        // A definite refusal of the same request: the first call made nothing either (had it
        // made something, the repeat would be answered with it).
        Err(e) if e.origin == ErrorOrigin::Plugin && !is_transient(e.code) => {
            return Ok(format!("asked again, {rpc} answered {}: it made nothing", e.code_name()));
        }
        Err(e) => return Err(Failed::call(&e, format!("asking again what it created failed: {e}"))),
    };
    match Resource::created_by(rpc, &request, &response, call.node) {
        Some(resource) => {
            let how = undo_resource(conn, &resource, undo_key(&resource).as_deref(), secrets).await?;
            Ok(format!("asked again, it is {resource}; {how}"))
        }
        None => Ok(format!("asked again, {rpc} names nothing to undo")),
    }
}

/// The staging and target paths a record names (a NodeStageVolume's or NodePublishVolume's).
fn node_paths(record: &Outstanding) -> Vec<PathBuf> {
    const FIELDS: [&str; 2] = ["staging_target_path", "target_path"];
    let text = |v: Option<&str>| v.filter(|p| p.starts_with('/')).map(PathBuf::from);
    match record {
        Outstanding::Resource(r) => {
            let (_, request) = r.resource.teardown();
            FIELDS
                .iter()
                .filter_map(|f| text(request.get_field_by_name(f).as_deref().and_then(|v| v.as_str())))
                .collect()
        }
        Outstanding::Call(c) => FIELDS.iter().filter_map(|f| text(c.request.get(*f).and_then(|v| v.as_str()))).collect(),
    }
}

/// Whether `name` is a scenario directory's (`[<run>-]<nnnn>-<scenario>`); its prefix if so.
fn scenario_prefix(name: &str) -> Option<&str> {
    let bytes = name.as_bytes();
    (0..bytes.len().saturating_sub(5)).find_map(|i| {
        let at_start = i == 0 || bytes[i - 1] == b'-';
        (at_start && bytes[i..i + 4].iter().all(u8::is_ascii_digit) && bytes[i + 4] == b'-').then(|| &name[..i])
    })
}

/// Removes `dir` if it holds nothing but empty directories (never a file, never through a
/// symlink, never a mount point: removing a busy directory fails and leaves it).
fn remove_empty_tree(dir: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return false };
    if !meta.is_dir() {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let mut empty = true;
    for entry in entries.flatten() {
        empty &= remove_empty_tree(&entry.path());
    }
    empty && std::fs::remove_dir(dir).is_ok()
}

/// After an undo, the scenario directories of the run(s) the undone paths belong to: every
/// empty scenario directory beside them with the same run prefix, then the run's own
/// directory (`run-<id>-<pid>` under the work directory) when that is empty too.
fn prune_scenario_dirs(paths: &[PathBuf]) {
    let mut runs: Vec<(PathBuf, String)> = Vec::new();
    for path in paths {
        let scenario = path.ancestors().find(|a| {
            a.file_name().and_then(|n| n.to_str()).is_some_and(|n| scenario_prefix(n).is_some())
        });
        let Some(scenario) = scenario else { continue };
        let name = scenario.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let (Some(container), Some(prefix)) = (scenario.parent(), scenario_prefix(name)) else { continue };
        let run = (container.to_owned(), prefix.to_owned());
        if !runs.contains(&run) {
            runs.push(run);
        }
    }
    for (container, prefix) in runs {
        let Ok(entries) = std::fs::read_dir(&container) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if scenario_prefix(&name) == Some(prefix.as_str()) && remove_empty_tree(&entry.path()) {
                tracing::info!(dir = %entry.path().display(), "removed an empty scenario directory");
            }
        }
        if container.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("run-")) {
            let _ = std::fs::remove_dir(&container);
        }
    }
}

/// What a run left in doubt, settled before it ends: the records of the journal at
/// `journal_path` written under `run_id` (calls whose answer never came, and what teardown
/// could not undo) are undone through the run's own `connections`, and what failed for want
/// of an answer is asked again once the plugin answers again: as `reconnect` tries a lost
/// plugin in a run (--reconnect-attempts passes in a row that undo nothing, with doubling
/// waits), never past `bound` (--cleanup-timeout). `None` when the run left nothing.
pub async fn settle_run(
    journal_path: &Path,
    run_id: &str,
    connections: &Connections,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
    bound: std::time::Duration,
    reconnect: suite::Reconnect,
) -> Option<Outcome> {
    let prefix = format!("{run_id}:");
    let deadline = tokio::time::Instant::now() + bound;
    let mut wait = reconnect.first_wait;
    let mut fruitless = 0;
    let mut total = Outcome::default();
    loop {
        let records: Vec<_> = journal::outstanding(journal_path)
            .ok()?
            .into_iter()
            .filter(|(id, _)| id.starts_with(&prefix))
            .collect();
        if records.is_empty() {
            return (!total.undone.is_empty() || !total.failed.is_empty()).then_some(total);
        }
        // A re-ask may wait out the bound: the first call's answer came late, so will this.
        let left = deadline.saturating_duration_since(tokio::time::Instant::now()).max(std::time::Duration::from_millis(10));
        let patient = Connections {
            controller: connections.controller.as_ref().map(|c| c.with_rpc_timeout(left)),
            nodes: connections.nodes.iter().map(|c| c.with_rpc_timeout(left)).collect(),
        };
        let pass = tokio::time::timeout_at(deadline, undo(journal_path, &records, &patient, secrets)).await;
        let Ok(pass) = pass else {
            total.failed = records.iter().map(|(_, r)| format!("{r}: not undone within --cleanup-timeout")).collect();
            return Some(total);
        };
        if pass.undone.is_empty() {
            fruitless += 1;
        } else {
            (fruitless, wait) = (0, reconnect.first_wait);
        }
        total.undone.extend(pass.undone);
        total.rules_broken.extend(pass.rules_broken);
        let again =
            pass.retryable > 0 && fruitless <= reconnect.attempts && tokio::time::Instant::now() + wait < deadline;
        if !again {
            total.failed = pass.failed;
            total.retryable = pass.retryable;
            return Some(total);
        }
        tracing::warn!("{} undo call(s) got no answer; asking again in {}", pass.retryable, crate::client::human_duration(wait));
        tokio::time::sleep(wait).await;
        wait = wait.saturating_mul(2);
    }
}

/// Codes that say "not now" rather than "no": the answer may differ if asked again later.
fn is_transient(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable | Code::Aborted | Code::DeadlineExceeded | Code::Internal | Code::Unknown | Code::Cancelled
    )
}

/// `csi-conform cleanup`: reads the journal, connects to every endpoint it names (only those
/// in `endpoints`, when any are given), and undoes everything outstanding there. Endpoints
/// that cannot be reached leave their records in place.
pub async fn cleanup(
    journal_path: &Path,
    endpoints: &[String],
    options: &ClientOptions,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<Outcome, journal::JournalError> {
    cleanup_over(journal_path, endpoints, options, secrets, Vec::new()).await
}

/// [`cleanup`], reaching the endpoints of `over` through those connections (a node agent's,
/// whose address is what the journal names for the node it played) rather than connecting.
pub async fn cleanup_over(
    journal_path: &Path,
    endpoints: &[String],
    options: &ClientOptions,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
    over: Vec<Connection>,
) -> Result<Outcome, journal::JournalError> {
    let mut records = journal::outstanding(journal_path)?;
    records.retain(|(_, r)| endpoints.is_empty() || endpoints.iter().any(|e| e == r.endpoint()));
    let mut named: Vec<String> = records.iter().map(|(_, r)| r.endpoint().to_owned()).collect();
    named.sort();
    named.dedup();
    let mut connected: BTreeMap<String, Result<Connection, String>> =
        over.into_iter().map(|c| (c.endpoint().to_string(), Ok(c))).collect();
    named.retain(|e| !connected.contains_key(e));
    for text in named {
        let connection = match text.parse::<Endpoint>() {
            Ok(endpoint) => Connection::connect(endpoint, options.clone()).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        connected.insert(text, connection.map_err(|e| format!("cannot connect: {e}")));
    }
    let connection_for = |e: &str| connected.get(e).cloned().unwrap_or_else(|| Err(format!("no connection to {e}")));
    let mut outcome = undo_with(journal_path, &records, connection_for, secrets).await;
    remove_run_dirs(journal_path, &mut outcome)?;
    Ok(outcome)
}

/// The run directories the journal names (each run's `run-<id>-<pid>`, journaled before it
/// was made), of runs nothing else of is outstanding any more: removed when they hold nothing
/// but empty directories, and settled once gone. One that holds anything else is never
/// removed: it is named as left, and stays in the journal.
fn remove_run_dirs(journal_path: &Path, outcome: &mut Outcome) -> Result<(), journal::JournalError> {
    let run_of = |id: &str| id.rsplit_once(':').map_or(id, |(run, _)| run).to_owned();
    let busy: Vec<String> = journal::outstanding(journal_path)?.iter().map(|(id, _)| run_of(id)).collect();
    let mut done = Vec::new();
    for (id, dir) in journal::run_dirs(journal_path)? {
        if busy.contains(&run_of(&id)) {
            continue;
        }
        if std::fs::symlink_metadata(&dir).is_err() {
            done.push(id);
        } else if remove_empty_tree(&dir) {
            outcome.undone.push(format!("removed the run's empty directory {}", dir.display()));
            done.push(id);
        } else {
            outcome.failed.push(format!("the run's directory {}: not empty (only empty directories are removed)", dir.display()));
        }
    }
    journal::mark_done(journal_path, &done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_directories_are_told_by_their_numbered_names() {
        assert_eq!(scenario_prefix("0007-node_stage-volume"), Some(""));
        assert_eq!(scenario_prefix("5f3a-12-0042-lifecycle_mount"), Some("5f3a-12-"));
        assert_eq!(scenario_prefix("staging"), None);
        assert_eq!(scenario_prefix("run-5f3a-12"), None);
    }

    /// What cleanup prunes after an undo starts from these paths: a staging's or a
    /// publication's, whether the record is of what was made or of a call never answered.
    #[test]
    fn the_paths_to_prune_are_the_absolute_staging_and_target_paths_a_record_names() {
        let record = |resource| {
            Outstanding::Resource(journal::Record {
                endpoint: "unix:///n.sock".into(),
                scenario: "s.x".into(),
                secrets_key: None,
                undo_secrets_key: None,
                name: None,
                resource,
            })
        };
        let staged = record(Resource::NodeStage {
            volume_id: "v".into(),
            staging_target_path: "/w/run-a-1/0001-s/staging".into(),
            node: 0,
        });
        let published =
            record(Resource::NodePublication { volume_id: "v".into(), target_path: "/w/run-a-1/0002-p/target".into(), node: 0 });
        assert_eq!(node_paths(&staged), [PathBuf::from("/w/run-a-1/0001-s/staging")]);
        assert_eq!(node_paths(&published), [PathBuf::from("/w/run-a-1/0002-p/target")]);
        assert_eq!(node_paths(&record(Resource::Volume { volume_id: "v".into() })), Vec::<PathBuf>::new());
        let call = Outstanding::Call(CallRecord {
            endpoint: "unix:///n.sock".into(),
            scenario: "s.x".into(),
            secrets_key: None,
            rpc: "NodePublishVolume".into(),
            node: 0,
            request: serde_json::json!({
                "volume_id": "v",
                "staging_target_path": "/w/run-a-1/0003-c/staging",
                "target_path": "relative/target",
            }),
        });
        assert_eq!(node_paths(&call), [PathBuf::from("/w/run-a-1/0003-c/staging")], "only absolute paths");
    }

    #[test]
    fn only_empty_scenario_directories_of_the_run_and_then_the_run_go() {
        let work = tempfile::tempdir().unwrap();
        let run = work.path().join("run-ab-1");
        let staged = run.join("0001-node_stage");
        std::fs::create_dir_all(staged.join("staging")).unwrap();
        std::fs::create_dir_all(run.join("0002-node_publish/target")).unwrap();
        prune_scenario_dirs(&[staged.join("staging")]);
        assert!(!run.exists(), "every scenario directory was empty, and so was the run's");

        let run = work.path().join("run-cd-2");
        std::fs::create_dir_all(run.join("0001-a/staging")).unwrap();
        std::fs::create_dir_all(run.join("0002-b")).unwrap();
        std::fs::write(run.join("0002-b/kept"), "a file").unwrap();
        std::fs::create_dir_all(run.join("not-a-scenario")).unwrap();
        prune_scenario_dirs(&[run.join("0001-a/staging")]);
        assert!(!run.join("0001-a").exists());
        assert!(run.join("0002-b/kept").exists() && run.join("not-a-scenario").exists(), "files and others stay");
    }
}
