//! Response rules: what CSI v1.12 asks of every answer a plugin gives, whatever a scenario
//! expects of it. One table ([`RULES`]), applied by the client layer to every answer
//! ([`RuleLog`]); a broken rule is a [`Violation`] that names its rule and requirement, which
//! whoever made the call turns into a finding. Knows requests and answers, nothing of
//! scenarios or reports.

mod check;
mod table;

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex},
};

use prost_reflect::{DynamicMessage, ReflectMessage};

pub use check::{MAP_LIMIT, STRING_LIMIT, plugin_name, segment_word, topology_key};
pub use table::{Check, Level, RULES, Rule, by_id};

/// How many pages one listing may take before it counts as never-ending. Listings the
/// harness follows stop there too.
pub const MAX_PAGES: usize = 1000;

/// One broken rule in one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub rule: &'static Rule,
    /// The RPC that answered.
    pub rpc: String,
    /// Where in the answer: `snapshot.creation_time`, `status.message`.
    pub path: String,
    /// The value found, shortened and redacted (none for a missing field).
    pub value: Option<String>,
    /// What is wrong, in one phrase.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}'s answer breaks {}: {}", self.rpc, self.rule.id, self.detail)?;
        if let Some(v) = &self.value {
            write!(f, " (value {v})")?;
        }
        write!(f, "; {} [{}]", self.rule.summary, self.rule.level.as_str())
    }
}

/// Every violation of a successful answer of `rpc` to `request`, without state (pagination
/// across calls is [`RuleLog`]'s).
pub fn check_answer(rpc: &str, request: &DynamicMessage, messages: &[DynamicMessage]) -> Vec<Violation> {
    let mut out = Vec::new();
    check::answer(rpc, request, messages, &mut out);
    out
}

/// Every violation of an error answer (`code` is the canonical name, `NOT_FOUND`).
pub fn check_error(rpc: &str, code: &str, message: &str, details: &[u8]) -> Vec<Violation> {
    let mut out = Vec::new();
    check::error(rpc, code, message, details, &mut out);
    out
}

/// Where the answers of one caller (a scenario, a property case, the fingerprint, a cleanup)
/// are checked: the violations found since the caller last looked, and the listings it is
/// paging through. Clones share the log.
#[derive(Debug, Clone, Default)]
pub struct RuleLog(Arc<Mutex<LogState>>);

#[derive(Debug, Default)]
struct LogState {
    found: Vec<Violation>,
    /// Per listing (the RPC and its request without the token): each next_token returned,
    /// with the starting_token it answered.
    listings: HashMap<String, HashMap<String, String>>,
}

impl RuleLog {
    /// A fresh log.
    pub fn new() -> Self {
        RuleLog::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks a successful answer, listings included.
    pub fn answer(&self, rpc: &str, request: &DynamicMessage, messages: &[DynamicMessage]) {
        let mut found = check_answer(rpc, request, messages);
        if let (Some(listing), Some(first)) = (listing_rpc(rpc), messages.first()) {
            self.page(listing, request, first, &mut found);
        }
        for v in &found {
            tracing::debug!(rpc, rule = v.rule.id, path = %v.path, "response rule broken");
        }
        self.state().found.extend(found);
    }

    /// Checks an error answer.
    pub fn error(&self, rpc: &str, code: &str, message: &str, details: &[u8]) {
        let found = check_error(rpc, code, message, details);
        self.state().found.extend(found);
    }

    /// The violations found since the last call, oldest first.
    pub fn take(&self) -> Vec<Violation> {
        std::mem::take(&mut self.state().found)
    }

    fn page(&self, rpc: &'static str, request: &DynamicMessage, answer: &DynamicMessage, found: &mut Vec<Violation>) {
        let text = |m: &DynamicMessage, f: &str| {
            m.get_field_by_name(f).and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
        };
        let start = text(request, "starting_token");
        let next = text(answer, "next_token");
        let mut key_request = request.clone();
        if let Some(f) = key_request.descriptor().get_field_by_name("starting_token") {
            key_request.clear_field(&f);
        }
        let key = format!("{rpc} {}", crate::proto::to_json_value(&key_request));
        let mut state = self.state();
        let listing = state.listings.entry(key).or_default();
        if start.is_empty() {
            listing.clear();
        }
        if next.is_empty() {
            return;
        }
        let repeated = next == start || listing.get(&next).is_some_and(|earlier| *earlier != start);
        let shown = check::shown(None, &next);
        if repeated {
            let detail = format!("next_token {shown} was already returned in this listing; following it would never end");
            push(found, Check::TokenNotRepeated { rpc }, rpc, "next_token", Some(shown), detail);
        } else if listing.len() >= MAX_PAGES && !listing.contains_key(&next) {
            let detail = format!("the listing is still going after {MAX_PAGES} pages (a fixed bound, no flag sets it)");
            push(found, Check::PagesEnd { rpc }, rpc, "next_token", Some(shown), detail);
        }
        listing.entry(next).or_insert(start);
    }
}

/// What a creating RPC's OK answer names: `None` when `rpc` creates nothing; else the kind of
/// object and its id, or `None` for the id when the answer names no usable one (the object
/// is missing, or its id is empty): the plugin may then hold an object no CSI call can name.
pub fn created_id(rpc: &str, answer: &DynamicMessage) -> Option<(&'static str, Option<String>)> {
    let (noun, object, id) = match rpc {
        "CreateVolume" => ("volume", "volume", "volume_id"),
        "CreateSnapshot" => ("snapshot", "snapshot", "snapshot_id"),
        "CreateVolumeGroupSnapshot" => ("group snapshot", "group_snapshot", "group_snapshot_id"),
        _ => return None,
    };
    let id = crate::proto::str_at(answer, &[object, id]).filter(|id| !id.is_empty());
    Some((noun, id))
}

/// What the rules cover, as `list --spec` joins it with the scenarios: (`rule <id>`, the
/// requirement it checks), one pair per rule.
pub fn covering() -> &'static [(String, Vec<String>)] {
    static PAIRS: std::sync::OnceLock<Vec<(String, Vec<String>)>> = std::sync::OnceLock::new();
    PAIRS.get_or_init(|| RULES.iter().map(|r| (format!("rule {}", r.id), vec![r.requirement.to_owned()])).collect())
}

fn push(found: &mut Vec<Violation>, check: Check, rpc: &str, path: &str, value: Option<String>, detail: String) {
    if let Some(rule) = table::of(check) {
        found.push(Violation { rule, rpc: rpc.to_owned(), path: path.to_owned(), value, detail });
    }
}

fn listing_rpc(rpc: &str) -> Option<&'static str> {
    match rpc {
        "ListVolumes" => Some("ListVolumes"),
        "ListSnapshots" => Some("ListSnapshots"),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
