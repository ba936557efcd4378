//! Undoing what earlier runs left behind, from the journal and only from the journal:
//! `csi-conform cleanup`, and `run --cleanup-first`. Idempotent: a resource the plugin no
//! longer knows (NOT_FOUND) counts as undone, and whatever cannot be undone stays in the
//! journal for the next attempt.

use std::{collections::BTreeMap, fmt, path::Path};

use tonic::Code;

use crate::{
    client::{ClientOptions, Connection, Connections, Endpoint},
    journal::{self, Record},
    proto,
    suite::{self, secret_key},
};

/// What a cleanup did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// One line per resource undone (or found already gone).
    pub undone: Vec<String>,
    /// One line per resource that could not be undone, with why; they stay in the journal.
    pub failed: Vec<String>,
}

impl Outcome {
    /// Whether everything was undone.
    pub fn is_complete(&self) -> bool {
        self.failed.is_empty()
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

/// Undoes `records` (as read from the journal at `journal_path`) through whichever of
/// `connections` serves each record's endpoint, newest attachments first, then objects
/// newest first, and marks each undone record done in the journal.
pub async fn undo(
    journal_path: &Path,
    records: &[(String, Record)],
    connections: &Connections,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
) -> Outcome {
    let by_endpoint: BTreeMap<String, &Connection> = connections
        .controller
        .iter()
        .chain(&connections.nodes)
        .map(|c| (c.endpoint().to_string(), c))
        .collect();
    undo_with(journal_path, records, |endpoint| by_endpoint.get(endpoint).copied().cloned(), secrets).await
}

async fn undo_with(
    journal_path: &Path,
    records: &[(String, Record)],
    connection_for: impl Fn(&str) -> Option<Connection>,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
) -> Outcome {
    let mut order: Vec<(usize, &(String, Record))> = records.iter().enumerate().collect();
    order.sort_by_key(|(i, (_, r))| (r.resource.undo_rank(), std::cmp::Reverse(*i)));
    let mut outcome = Outcome::default();
    for (_, (id, record)) in order {
        let what = format!("{} on {} (scenario {})", record.resource, record.endpoint, record.scenario);
        let Some(conn) = connection_for(&record.endpoint) else {
            outcome.failed.push(format!("{what}: no connection to {}", record.endpoint));
            continue;
        };
        let (rpc, mut request) = record.resource.teardown();
        if record.secrets_key.is_some()
            && let Some(values) = secrets.get(&secret_key(rpc))
        {
            suite::set_secrets(&mut request, values);
        }
        let Some(method) = proto::method(rpc) else { continue };
        match conn.call_dynamic(&method, request).await {
            Ok(_) => outcome.undone.push(format!("{rpc}: {what}")),
            Err(e) if e.code == Code::NotFound => outcome.undone.push(format!("{rpc}: {what} (already gone)")),
            Err(e) => {
                outcome.failed.push(format!("{rpc}: {what}: {e}"));
                continue;
            }
        }
        if let Err(e) = journal::mark_done(journal_path, std::slice::from_ref(id)) {
            outcome.failed.push(format!("{what}: undone, but the journal could not record it: {e}"));
        }
    }
    outcome
}

/// `csi-conform cleanup`: reads the journal, connects to every endpoint it names, and undoes
/// everything outstanding. Endpoints that cannot be reached leave their records in place.
pub async fn cleanup(
    journal_path: &Path,
    options: &ClientOptions,
    secrets: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<Outcome, journal::JournalError> {
    let records = journal::outstanding(journal_path)?;
    let mut endpoints: Vec<String> = records.iter().map(|(_, r)| r.endpoint.clone()).collect();
    endpoints.sort();
    endpoints.dedup();
    let mut connected: BTreeMap<String, Connection> = BTreeMap::new();
    let mut unreachable = Vec::new();
    for text in endpoints {
        let connection = match text.parse::<Endpoint>() {
            Ok(endpoint) => Connection::connect(endpoint, options.clone()).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match connection {
            Ok(conn) => {
                connected.insert(text, conn);
            }
            Err(e) => unreachable.push(format!("{text}: {e}")),
        }
    }
    let mut outcome = undo_with(journal_path, &records, |e| connected.get(e).cloned(), secrets).await;
    outcome.failed.splice(0..0, unreachable.into_iter().map(|u| format!("cannot connect to {u}")));
    Ok(outcome)
}
