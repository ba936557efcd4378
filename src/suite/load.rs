//! Loading suites: YAML text → the typed model, strictly. Every problem is reported as
//! `file:line:column: message` and all problems of a file are collected, not just the first:
//! unknown keys (with "did you mean"), unknown RPCs, request fields checked against the
//! descriptor, codes, capabilities, options, variables, checks, regexes and duplicate ids.

use std::{collections::BTreeMap, fmt, path::Path, str::FromStr, time::Duration};

use prost_reflect::MethodDescriptor;
use regex::Regex;
use tonic::Code;

use crate::yaml::{self, Node, NodeKind, Plain, Pos};
use super::{
    builtin_vars,
    checks::{self, ArgKind, ArgSpec},
    model::*,
    property,
    request::{self, RequestTemplate},
    vars::{FieldPath, Seg, Template, Ty, did_you_mean},
};
use crate::{
    capability::strategy::Bounds,
    client::{code_name, parse_code},
    config,
    fingerprint::{Capability, PluginService},
    proto,
    report::Severity,
};

/// One problem in a suite (or request) text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LoadError {
    /// The file.
    pub origin: String,
    /// Where in it (line 0 when the problem is the file as a whole).
    pub pos: Pos,
    /// What is wrong.
    pub message: String,
}

impl LoadError {
    /// A problem at a position.
    pub fn new(origin: &str, pos: Pos, message: impl Into<String>) -> Self {
        LoadError { origin: origin.to_owned(), pos, message: message.into() }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pos.line == 0 {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(f, "{}:{}:{}: {}", self.origin, self.pos.line, self.pos.col, self.message)
        }
    }
}

/// Every problem found, one `file:line:col: message` per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LoadErrors(pub Vec<LoadError>);

impl fmt::Display for LoadErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// The opt-ins a scenario can require, with the command-line flag that enables each.
pub const OPTIONS: [(&str, &str); 2] =
    [("attach_limit", "--test-node-volume-attach-limit"), ("restart", "--allow-restart-cmd")];

/// The secrets key `secrets: auto` uses for an RPC: csi-sanity's (see
/// [`SecretKey::for_rpc`](crate::secrets::SecretKey::for_rpc)), or `<Rpc>Secret` for RPCs
/// csi-sanity has no key for (NodeExpandVolume, the SnapshotMetadata RPCs...).
pub fn secret_key(rpc: &str) -> String {
    crate::secrets::SecretKey::for_rpc(rpc).map_or_else(|| format!("{rpc}Secret"), |k| k.as_str().to_owned())
}

fn known_secret_keys() -> Vec<String> {
    let mut keys: Vec<String> = crate::secrets::SecretKey::ALL.iter().map(|k| k.as_str().to_owned()).collect();
    for m in proto::all_methods() {
        if m.input().get_field_by_name("secrets").is_some() {
            keys.push(secret_key(m.name()));
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Reads and loads a suite file.
pub fn load_file(path: &Path) -> Result<super::Suite, LoadErrors> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        LoadErrors(vec![LoadError::new(&origin, Pos::default(), format!("cannot read the suite: {e}"))])
    })?;
    load_str(&origin, &text)
}

/// Loads a suite from text; `origin` names it in errors and reports.
pub fn load_str(origin: &str, text: &str) -> Result<super::Suite, LoadErrors> {
    let mut loader = Loader { origin, errors: Vec::new() };
    let suite = match yaml::parse(text) {
        Err(errs) => {
            for e in errs {
                loader.err(e.pos, e.message);
            }
            None
        }
        Ok(None) => {
            loader.err(Pos { line: 1, col: 1 }, "the suite is empty");
            None
        }
        Ok(Some(root)) => loader.suite(&root),
    };
    match suite {
        Some(s) if loader.errors.is_empty() => Ok(s),
        _ => {
            let mut errors = loader.errors;
            errors.sort();
            errors.dedup();
            Err(LoadErrors(errors))
        }
    }
}

/// Checks that suite ids and scenario ids are unique across all loaded suites; each
/// duplicate names both places.
pub fn check_unique(suites: &[super::Suite]) -> Result<(), LoadErrors> {
    let mut errors = Vec::new();
    let mut suite_ids: BTreeMap<&str, &Location> = BTreeMap::new();
    let mut scenario_ids: BTreeMap<&str, &Location> = BTreeMap::new();
    for suite in suites {
        if let Some(first) = suite_ids.insert(&suite.id, &suite.location) {
            errors.push(LoadError::new(
                &suite.location.origin,
                suite.location.pos,
                format!("duplicate suite id {:?}: also defined at {first}", suite.id),
            ));
            suite_ids.insert(&suite.id, first);
        }
        for scenario in &suite.scenarios {
            if let Some(first) = scenario_ids.insert(&scenario.id, &scenario.location) {
                errors.push(LoadError::new(
                    &scenario.location.origin,
                    scenario.location.pos,
                    format!("duplicate scenario id {:?}: also defined at {first}", scenario.id),
                ));
                scenario_ids.insert(&scenario.id, first);
            }
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(LoadErrors(errors)) }
}

struct Loader<'a> {
    origin: &'a str,
    errors: Vec<LoadError>,
}

/// A mapping whose keys were checked against the allowed set.
struct Fields<'n> {
    entries: &'n [(Node, Node)],
}

impl<'n> Fields<'n> {
    fn get(&self, key: &str) -> Option<&'n Node> {
        self.entries.iter().find(|(k, _)| k.scalar_text() == Some(key)).map(|(_, v)| v)
    }

    fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

/// The variables defined at a step, with their types.
type Scope = BTreeMap<String, Ty>;

const SUITE_KEYS: &[&str] = &[
    "suite",
    "title",
    "description",
    "requires",
    "requires_any",
    "requires_nodes",
    "requires_option",
    "requires_secrets",
    "scenarios",
];
const SCENARIO_KEYS: &[&str] = &[
    "id",
    "title",
    "spec",
    "parity",
    "tags",
    "requires",
    "requires_any",
    "requires_nodes",
    "requires_option",
    "requires_secrets",
    "implicit_requires",
    "serial",
    "steps",
];
const COMMON_STEP_KEYS: &[&str] = &["name", "when"];
const CALL_KEYS: &[&str] =
    &["call", "node", "request", "secrets", "expect", "skip_on", "save", "repeat", "repeat_compare", "poll"];
const ASSERT_KEYS: &[&str] = &["assert", "otherwise"];
const CHECK_KEYS: &[&str] = &["check", "args", "save"];
const PROPERTY_KEYS: &[&str] = &["property", "args", "bounds"];
const EXPECT_KEYS: &[&str] = &["code", "not_code", "any_error", "otherwise", "kind", "reason", "fields"];
const ASSERTION_KEYS: &[&str] = &[
    "path",
    "value",
    "equals",
    "not_equals",
    "non_empty",
    "absent",
    "ge",
    "le",
    "gt",
    "lt",
    "or_zero",
    "matches",
    "length",
    "length_ge",
    "length_le",
    "contains",
    "not_contains",
    "one_of",
    "each",
];

impl Loader<'_> {
    fn err(&mut self, pos: Pos, message: impl Into<String>) {
        self.errors.push(LoadError::new(self.origin, pos, message));
    }

    /// Checks that `node` is a mapping with only `known` keys; `what` names it in errors.
    fn fields<'n>(&mut self, node: &'n Node, what: &str, known: &[&str]) -> Option<Fields<'n>> {
        let Some(entries) = node.as_map() else {
            self.err(node.pos, format!("{what} must be a mapping, not {}", node.describe()));
            return None;
        };
        for (key, _) in entries {
            let name = key.scalar_text().unwrap_or_default();
            if !known.contains(&name) {
                self.err(
                    key.pos,
                    format!("unknown key {name:?} in {what}{}", did_you_mean(name, known.iter().copied())),
                );
            }
        }
        Some(Fields { entries })
    }

    fn required<'n>(&mut self, fields: &Fields<'n>, key: &str, what: &str, pos: Pos) -> Option<&'n Node> {
        let found = fields.get(key);
        if found.is_none() {
            self.err(pos, format!("{what} needs `{key}`"));
        }
        found
    }

    fn string(&mut self, node: &Node, what: &str) -> Option<String> {
        match node.plain() {
            Some(Plain::Str(s)) => Some(s.to_owned()),
            _ => {
                self.err(node.pos, format!("{what} must be a string, not {}", node.describe()));
                None
            }
        }
    }

    fn boolean(&mut self, node: &Node, what: &str) -> Option<bool> {
        match node.plain() {
            Some(Plain::Bool(b)) => Some(b),
            _ => {
                self.err(node.pos, format!("{what} must be true or false, not {}", node.describe()));
                None
            }
        }
    }

    fn count(&mut self, node: &Node, what: &str, min: i128) -> Option<u32> {
        match node.plain() {
            Some(Plain::Int(i)) if i >= min && i <= i128::from(u32::MAX) => u32::try_from(i).ok(),
            _ => {
                self.err(
                    node.pos,
                    format!("{what} must be a whole number of at least {min}, not {}", describe_value(node)),
                );
                None
            }
        }
    }

    /// A string or a list of strings.
    fn strings(&mut self, node: &Node, what: &str) -> Vec<(String, Pos)> {
        match &node.kind {
            NodeKind::Seq(items) => items.iter().filter_map(|n| self.string(n, what).map(|s| (s, n.pos))).collect(),
            _ => self.string(node, what).map(|s| vec![(s, node.pos)]).unwrap_or_default(),
        }
    }

    fn duration(&mut self, node: &Node, what: &str) -> Option<Duration> {
        let text = node.scalar_text().unwrap_or_default();
        match crate::units::parse_duration(text).ok() {
            Some(d) => Some(d),
            None => {
                self.err(
                    node.pos,
                    format!("{what} must be a duration such as 500ms, 10s or 2m, not {}", describe_value(node)),
                );
                None
            }
        }
    }

    fn severity(&mut self, node: &Node) -> Option<Severity> {
        match node.scalar_text() {
            Some("fail") => Some(Severity::Fail),
            Some("warn") => Some(Severity::Warn),
            _ => {
                self.err(node.pos, format!("otherwise must be fail or warn, not {}", describe_value(node)));
                None
            }
        }
    }

    fn capability(&mut self, text: &str, pos: Pos) -> Option<Capability> {
        match Capability::from_str(text) {
            Ok(c) => Some(c),
            Err(e) => {
                self.err(pos, e.0);
                None
            }
        }
    }

    fn code(&mut self, node: &Node) -> Option<Code> {
        let text = node.scalar_text().unwrap_or_default();
        match parse_code(text).filter(|_| matches!(node.plain(), Some(Plain::Str(_)))) {
            Some(c) => Some(c),
            None => {
                let names: Vec<&str> = (0..=16).map(|i| code_name(Code::from_i32(i))).collect();
                self.err(
                    node.pos,
                    format!(
                        "unknown code {}{} (valid codes: {})",
                        describe_value(node),
                        did_you_mean(text, names.iter().copied()),
                        names.join(", ")
                    ),
                );
                None
            }
        }
    }

    fn codes(&mut self, node: &Node) -> Vec<Code> {
        match &node.kind {
            NodeKind::Seq(items) => items.iter().filter_map(|n| self.code(n)).collect(),
            _ => self.code(node).into_iter().collect(),
        }
    }

    fn requires(&mut self, fields: &Fields<'_>) -> Requires {
        let mut out = Requires::default();
        let caps = |loader: &mut Self, key: &str| -> Vec<Capability> {
            let Some(node) = fields.get(key) else { return Vec::new() };
            let items = loader.strings(node, key);
            items.into_iter().filter_map(|(s, pos)| loader.capability(&s, pos)).collect()
        };
        out.capabilities = caps(self, "requires");
        out.any = caps(self, "requires_any");
        if let Some(node) = fields.get("requires_nodes") {
            out.nodes = self.count(node, "requires_nodes", 1).unwrap_or(0) as usize;
        }
        if let Some(node) = fields.get("requires_option") {
            for (option, pos) in self.strings(node, "requires_option") {
                if OPTIONS.iter().any(|(o, _)| *o == option) {
                    out.options.push(option);
                } else {
                    let names: Vec<&str> = OPTIONS.iter().map(|(o, _)| *o).collect();
                    self.err(pos, format!("unknown option {option:?}; known options: {}", names.join(", ")));
                }
            }
        }
        if let Some(node) = fields.get("requires_secrets") {
            let keys = known_secret_keys();
            for (key, pos) in self.strings(node, "requires_secrets") {
                if keys.contains(&key) {
                    out.secrets.push(key);
                } else {
                    let hint = did_you_mean(&key, keys.iter().map(String::as_str));
                    self.err(pos, format!("requires_secrets: {key:?} is not a secrets-file key{hint}"));
                }
            }
        }
        out
    }

    fn suite(&mut self, root: &Node) -> Option<super::Suite> {
        let fields = self.fields(root, "the suite", SUITE_KEYS)?;
        let id_node = self.required(&fields, "suite", "the suite", root.pos);
        let id = id_node.and_then(|n| self.string(n, "suite"));
        if let (Some(id), Some(node)) = (&id, id_node)
            && (id.is_empty() || !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        {
            self.err(node.pos, format!("suite id {id:?} must use only a-z, 0-9 and '-'"));
        }
        let title = self.required(&fields, "title", "the suite", root.pos).and_then(|n| self.string(n, "title"));
        let description = fields.get("description").and_then(|n| self.string(n, "description"));
        let requires = self.requires(&fields);
        let suite_id = id.clone().unwrap_or_default();
        let mut scenarios = Vec::new();
        if let Some(list) = self.required(&fields, "scenarios", "the suite", root.pos) {
            match list.as_seq() {
                Some([]) => self.err(list.pos, "scenarios is empty"),
                Some(items) => {
                    let mut seen: BTreeMap<String, Pos> = BTreeMap::new();
                    for item in items {
                        if let Some(s) = self.scenario(item, &suite_id, &requires) {
                            if let Some(first) = seen.get(&s.id) {
                                self.err(
                                    s.location.pos,
                                    format!(
                                        "duplicate scenario id {:?}: also defined at {}:{}",
                                        s.id, self.origin, first
                                    ),
                                );
                            } else {
                                seen.insert(s.id.clone(), s.location.pos);
                            }
                            scenarios.push(s);
                        }
                    }
                }
                None => self.err(list.pos, format!("scenarios must be a list, not {}", list.describe())),
            }
        }
        Some(super::Suite {
            id: id?,
            title: title?,
            description,
            location: Location { origin: self.origin.to_owned(), pos: id_node.map_or(root.pos, |n| n.pos) },
            requires,
            scenarios,
        })
    }

    fn scenario(&mut self, node: &Node, suite_id: &str, suite_requires: &Requires) -> Option<Scenario> {
        let fields = self.fields(node, "a scenario", SCENARIO_KEYS)?;
        let id_node = self.required(&fields, "id", "a scenario", node.pos);
        let local = id_node.and_then(|n| self.string(n, "id"));
        if let (Some(id), Some(n)) = (&local, id_node)
            && (id.is_empty()
                || !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'))
        {
            self.err(n.pos, format!("scenario id {id:?} must use only a-z, 0-9, '.' and '-'"));
        }
        let title = self.required(&fields, "title", "a scenario", node.pos).and_then(|n| self.string(n, "title"));
        let spec = fields.get("spec").map(|n| self.requirement_ids(n)).unwrap_or_default();
        let parity = fields.get("parity").map(|n| self.parity(n)).unwrap_or_default();
        let tags = fields
            .get("tags")
            .map(|n| self.strings(n, "tags").into_iter().map(|(s, _)| s).collect())
            .unwrap_or_default();
        let requires = suite_requires.merged(&self.requires(&fields));
        let serial = fields.get("serial").and_then(|n| self.boolean(n, "serial")).unwrap_or(false);
        let implicit =
            fields.get("implicit_requires").and_then(|n| self.boolean(n, "implicit_requires")).unwrap_or(true);
        let mut steps = Vec::new();
        if let Some(list) = self.required(&fields, "steps", "a scenario", node.pos) {
            let mut scope = builtin_vars::types();
            match list.as_seq() {
                Some([]) => self.err(list.pos, "steps is empty"),
                Some(items) => steps = items.iter().filter_map(|s| self.step(s, &mut scope)).collect(),
                None => self.err(list.pos, format!("steps must be a list, not {}", list.describe())),
            }
        }
        let implied = if implicit { implied_services(&steps) } else { Vec::new() };
        Some(Scenario {
            id: format!("{suite_id}.{}", local?),
            title: title?,
            spec,
            parity,
            tags,
            requires,
            implied,
            serial,
            steps,
            location: Location { origin: self.origin.to_owned(), pos: id_node.map_or(node.pos, |n| n.pos) },
        })
    }

    /// `spec:`: one requirement id or a list of them, each one the built-in inventory has.
    fn requirement_ids(&mut self, node: &Node) -> Vec<String> {
        if matches!(&node.kind, NodeKind::Seq(items) if items.is_empty()) {
            self.err(node.pos, "spec is empty; name the requirement ids the scenario checks, or leave spec out");
            return Vec::new();
        }
        let inventory = crate::spec::builtin();
        let mut ids = Vec::new();
        for (id, pos) in self.strings(node, "a requirement id in spec") {
            if inventory.get(&id).is_none() {
                self.err(pos, inventory.unknown_id_text(&id));
            } else if ids.contains(&id) {
                self.err(pos, format!("requirement {id} is named twice in spec"));
            } else {
                ids.push(id);
            }
        }
        ids
    }

    fn parity(&mut self, node: &Node) -> Vec<u32> {
        let items: Vec<&Node> = match &node.kind {
            NodeKind::Seq(items) => items.iter().collect(),
            _ => vec![node],
        };
        items.into_iter().filter_map(|n| self.count(n, "a parity case number", 1)).collect()
    }

    fn step(&mut self, node: &Node, scope: &mut Scope) -> Option<Step> {
        let Some(entries) = node.as_map() else {
            self.err(node.pos, format!("a step must be a mapping, not {}", node.describe()));
            return None;
        };
        let kinds: Vec<&str> = ["call", "assert", "check", "property"]
            .into_iter()
            .filter(|k| entries.iter().any(|(key, _)| key.scalar_text() == Some(k)))
            .collect();
        let (kind, own_keys) = match kinds.as_slice() {
            ["call"] => ("call", CALL_KEYS),
            ["assert"] => ("assert", ASSERT_KEYS),
            ["check"] => ("check", CHECK_KEYS),
            ["property"] => ("property", PROPERTY_KEYS),
            [] => {
                self.err(node.pos, "a step needs one of `call`, `assert`, `check` or `property`");
                return None;
            }
            many => {
                self.err(
                    node.pos,
                    format!(
                        "a step has exactly one of call, assert, check, property; this one has {}",
                        many.join(" and ")
                    ),
                );
                return None;
            }
        };
        let known: Vec<&str> = COMMON_STEP_KEYS.iter().chain(own_keys).copied().collect();
        let fields = self.fields(node, &format!("a {kind} step"), &known)?;
        let name = fields.get("name").and_then(|n| self.string(n, "name"));
        let when = fields.get("when").map(|n| self.when(n)).unwrap_or_default();
        let action = match kind {
            "call" => Action::Call(Box::new(self.call(&fields, node.pos, scope)?)),
            "assert" => Action::Assert(self.assert_step(&fields, scope)?),
            "property" => Action::Property(self.property_step(&fields, scope)?),
            _ => Action::Check(self.check_step(&fields, scope)?),
        };
        Some(Step { name, when, action, pos: node.pos })
    }

    fn when(&mut self, node: &Node) -> Vec<Condition> {
        let items = self.strings(node, "when");
        items
            .into_iter()
            .filter_map(|(text, pos)| {
                let (negated, cap) = match text.strip_prefix('!') {
                    Some(rest) => (true, rest.trim()),
                    None => (false, text.as_str()),
                };
                self.capability(cap, pos).map(|capability| Condition { negated, capability })
            })
            .collect()
    }

    fn call(&mut self, fields: &Fields<'_>, pos: Pos, scope: &mut Scope) -> Option<Call> {
        let method_node = fields.get("call")?;
        let method = self.method(method_node);
        let node = fields.get("node").and_then(|n| self.count(n, "node", 0)).map(|n| n as usize);
        let request_node = fields.get("request");
        let secrets = fields.get("secrets").map(|n| self.secrets(n, method.as_ref())).unwrap_or(SecretsMode::Auto);
        let response_ty = method.as_ref().map_or(Ty::Any, response_type);
        let expect = match fields.get("expect") {
            Some(n) => self.expect(n, &response_ty, scope),
            None => Some(Expect::default()),
        };
        let skip_on = fields.get("skip_on").and_then(|n| self.skip_on(n));
        let repeat = fields.get("repeat").and_then(|n| self.repeat(n)).unwrap_or(Repeat::Times(1));
        let repeat_compare =
            fields.get("repeat_compare").and_then(|n| self.boolean(n, "repeat_compare")).unwrap_or(true);
        let poll = fields.get("poll").and_then(|n| self.poll(n, &response_ty, scope));
        if poll.is_some() && repeat != Repeat::Times(1) {
            self.err(pos, "a call step cannot both `repeat` and `poll`");
        }
        if let Some(n) = request_node {
            self.check_vars(n, scope);
            if let Some(m) = &method {
                for (p, message) in request::validate(&m.input(), n) {
                    self.err(p, message);
                }
            }
        }
        let save = fields.get("save").map(|n| self.saves(n, &response_ty, scope)).unwrap_or_default();
        Some(Call {
            method: method?,
            node,
            request: RequestTemplate::new(self.origin, request_node.cloned()),
            secrets,
            expect: expect?,
            skip_on,
            save,
            repeat,
            repeat_compare,
            poll,
        })
    }

    fn method(&mut self, node: &Node) -> Option<MethodDescriptor> {
        let name = self.string(node, "call")?;
        let found = proto::method(&name);
        if found.is_none() {
            let names: Vec<String> = proto::all_methods().map(|m| m.name().to_owned()).collect();
            let hint = did_you_mean(&name, names.iter().map(String::as_str));
            self.err(node.pos, format!("unknown RPC {name:?}{hint}"));
        }
        found
    }

    fn secrets(&mut self, node: &Node, method: Option<&MethodDescriptor>) -> SecretsMode {
        let Some(text) = self.string(node, "secrets") else { return SecretsMode::Auto };
        match text.as_str() {
            "auto" => SecretsMode::Auto,
            "none" => SecretsMode::None,
            key => {
                let keys = known_secret_keys();
                if !keys.iter().any(|k| k == key) {
                    let hint = did_you_mean(key, keys.iter().map(String::as_str));
                    self.err(node.pos, format!("secrets must be auto, none or a secrets-file key, not {key:?}{hint}"));
                } else if let Some(m) = method
                    && m.input().get_field_by_name("secrets").is_none()
                {
                    self.err(node.pos, format!("{} has no secrets field", m.input().full_name()));
                }
                SecretsMode::Key(key.to_owned())
            }
        }
    }

    fn expect(&mut self, node: &Node, response: &Ty, scope: &Scope) -> Option<Expect> {
        let fields = self.fields(node, "expect", EXPECT_KEYS)?;
        let mut expect = Expect::default();
        let any_error = fields.get("any_error").and_then(|n| self.boolean(n, "any_error")).unwrap_or(false);
        let given: Vec<&str> =
            [("`code`", fields.has("code")), ("`not_code`", fields.has("not_code")), ("`any_error: true`", any_error)]
                .into_iter()
                .filter_map(|(k, set)| set.then_some(k))
                .collect();
        if given.len() > 1 {
            self.err(node.pos, format!("expect has both {}; use one", given.join(" and ")));
        } else if let Some(n) = fields.get("code") {
            let codes = self.codes(n);
            if !codes.is_empty() {
                expect.codes = ExpectCodes::Codes(codes);
            }
        } else if let Some(n) = fields.get("not_code") {
            let codes = self.codes(n);
            if !codes.is_empty() {
                expect.codes = ExpectCodes::Except(codes);
            }
        } else if any_error {
            expect.codes = ExpectCodes::AnyError;
        }
        if let Some(n) = fields.get("otherwise") {
            expect.otherwise = self.severity(n).unwrap_or(Severity::Fail);
        }
        if let Some(n) = fields.get("kind")
            && let Some(kind) = self.string(n, "kind")
        {
            if kind.is_empty() || !kind.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
                self.err(n.pos, format!("kind {kind:?} must use only a-z, 0-9 and '-'"));
            }
            expect.kind = Some(kind);
        }
        expect.reason = fields.get("reason").and_then(|n| self.string(n, "reason"));
        if let Some(n) = fields.get("fields") {
            if !expect.codes.accepts_ok() {
                self.err(
                    n.pos,
                    format!("fields are checked only on an OK answer, but expect accepts {}", expect.codes),
                );
            }
            expect.fields = self.assertions(n, Some(response), scope, "fields");
        }
        Some(expect)
    }

    fn skip_on(&mut self, node: &Node) -> Option<SkipOn> {
        let fields = self.fields(node, "skip_on", &["codes", "reason"])?;
        let codes_node = self.required(&fields, "codes", "skip_on", node.pos)?;
        let codes = self.codes(codes_node);
        let reason = fields.get("reason").and_then(|n| self.string(n, "reason"));
        Some(SkipOn { codes, reason })
    }

    fn repeat(&mut self, node: &Node) -> Option<Repeat> {
        match node.plain() {
            Some(Plain::Str("idempotency")) => Some(Repeat::Idempotency),
            Some(Plain::Int(_)) => self.count(node, "repeat", 1).map(Repeat::Times),
            _ => {
                self.err(
                    node.pos,
                    format!(
                        "repeat must be a whole number of at least 1 or \"idempotency\", not {}",
                        describe_value(node)
                    ),
                );
                None
            }
        }
    }

    fn poll(&mut self, node: &Node, response: &Ty, scope: &Scope) -> Option<Poll> {
        let fields = self.fields(node, "poll", &["until", "timeout", "interval"])?;
        let until = self
            .required(&fields, "until", "poll", node.pos)
            .map(|n| self.assertions(n, Some(response), scope, "until"));
        let timeout =
            fields.get("timeout").and_then(|n| self.duration(n, "timeout")).unwrap_or(Duration::from_secs(60));
        let interval =
            fields.get("interval").and_then(|n| self.duration(n, "interval")).unwrap_or(Duration::from_secs(1));
        Some(Poll { until: until?, timeout, interval })
    }

    fn saves(&mut self, node: &Node, source: &Ty, scope: &mut Scope) -> Vec<Save> {
        let Some(entries) = node.as_map() else {
            self.err(node.pos, format!("save must be a mapping of variable: path, not {}", node.describe()));
            return Vec::new();
        };
        let builtin = builtin_vars::types();
        let mut out = Vec::new();
        for (key, value) in entries {
            let var = key.scalar_text().unwrap_or_default().to_owned();
            let valid = var.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
                && var.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !valid {
                self.err(
                    key.pos,
                    format!("variable name {var:?} must use only a-z, 0-9 and '_' and not start with a digit"),
                );
                continue;
            }
            if builtin.contains_key(&var) {
                self.err(key.pos, format!("{var:?} is a built-in variable and cannot be saved to"));
                continue;
            }
            let Some(text) = self.string(value, "a save path") else { continue };
            let path = match FieldPath::parse(&text) {
                Ok(p) => p,
                Err(e) => {
                    self.err(value.pos, e);
                    continue;
                }
            };
            match source.resolve(path.segs()) {
                Ok(ty) => {
                    scope.insert(var.clone(), ty);
                    out.push(Save { var, path, pos: key.pos });
                }
                Err(e) => self.err(value.pos, format!("cannot save {text:?}: {e}")),
            }
        }
        out
    }

    /// Checks every `${...}` under `node` against the scope.
    fn check_vars(&mut self, node: &Node, scope: &Scope) {
        match &node.kind {
            NodeKind::Seq(items) => items.iter().for_each(|n| self.check_vars(n, scope)),
            NodeKind::Map(entries) => entries.iter().for_each(|(k, v)| {
                self.check_vars(k, scope);
                self.check_vars(v, scope);
            }),
            NodeKind::Scalar { text, .. } => match Template::parse(text) {
                Err(e) => self.err(node.pos, e),
                Ok(t) => {
                    for path in t.vars() {
                        if let Err(e) = check_var(path, scope) {
                            self.err(node.pos, e);
                        }
                    }
                }
            },
        }
    }

    fn assert_step(&mut self, fields: &Fields<'_>, scope: &Scope) -> Option<AssertStep> {
        let node = fields.get("assert")?;
        let assertions = self.assertions(node, None, scope, "assert");
        let otherwise = fields.get("otherwise").and_then(|n| self.severity(n)).unwrap_or(Severity::Fail);
        Some(AssertStep { assertions, otherwise })
    }

    /// A list of assertions (or one mapping). `subject` is the type paths are resolved
    /// against; `None` means `value:` subjects (assert steps).
    fn assertions(&mut self, node: &Node, subject: Option<&Ty>, scope: &Scope, what: &str) -> Vec<Assertion> {
        match &node.kind {
            NodeKind::Seq(items) if items.is_empty() => {
                self.err(node.pos, format!("{what} is empty"));
                Vec::new()
            }
            NodeKind::Seq(items) => items.iter().filter_map(|n| self.assertion(n, subject, scope, false)).collect(),
            NodeKind::Map(_) => self.assertion(node, subject, scope, false).into_iter().collect(),
            _ => {
                self.err(node.pos, format!("{what} must be a list of assertions, not {}", node.describe()));
                Vec::new()
            }
        }
    }

    fn assertion(&mut self, node: &Node, subject_ty: Option<&Ty>, scope: &Scope, in_each: bool) -> Option<Assertion> {
        let fields = self.fields(node, "an assertion", ASSERTION_KEYS)?;
        let (subject, ty) = match (subject_ty, fields.get("path"), fields.get("value")) {
            (_, Some(_), Some(_)) => {
                self.err(node.pos, "an assertion has either `path` or `value`, not both");
                return None;
            }
            (Some(ty), Some(p), None) => {
                let text = self.string(p, "path")?;
                let path = match FieldPath::parse(&text) {
                    Ok(path) => path,
                    Err(e) => {
                        self.err(p.pos, e);
                        return None;
                    }
                };
                let resolved = match ty.resolve(path.segs()) {
                    Ok(t) => t,
                    Err(e) => {
                        self.err(p.pos, format!("path {text:?}: {e}"));
                        Ty::Any
                    }
                };
                (Subject::Path(path), resolved)
            }
            (Some(ty), None, None) if in_each => (Subject::Path(FieldPath::default()), ty.clone()),
            (Some(_), None, _) => {
                self.err(node.pos, "an assertion on a response needs `path`");
                return None;
            }
            (None, Some(p), _) => {
                self.err(p.pos, "an assert step compares values: use `value: \"${...}\"` instead of `path`");
                return None;
            }
            (None, None, Some(v)) => {
                self.check_vars(v, scope);
                (Subject::Value(v.clone()), value_type(v, scope))
            }
            (None, None, None) => {
                self.err(node.pos, "an assertion in an assert step needs `value`");
                return None;
            }
        };
        let mut tests = Vec::new();
        for (key, value) in fields.entries {
            let name = key.scalar_text().unwrap_or_default();
            if matches!(name, "path" | "value" | "or_zero") {
                continue;
            }
            if let Some(test) = self.test(name, value, &ty, scope) {
                tests.push(test);
            }
        }
        let or_zero = fields.get("or_zero").and_then(|n| self.boolean(n, "or_zero")).unwrap_or(false);
        if or_zero && !tests.iter().any(|t| matches!(t, Test::Compare { .. })) {
            self.err(node.pos, "or_zero applies to ge, le, gt or lt, and this assertion has none");
        }
        let only_subject =
            fields.entries.iter().all(|(k, _)| matches!(k.scalar_text(), Some("path" | "value" | "or_zero")));
        if tests.is_empty() && only_subject {
            self.err(
                node.pos,
                "an assertion needs a test: equals, not_equals, non_empty, absent, ge, le, gt, lt, matches, length, length_ge, length_le, contains, not_contains, one_of or each",
            );
        }
        Some(Assertion { subject, tests, or_zero, pos: node.pos })
    }

    fn test(&mut self, key: &str, value: &Node, ty: &Ty, scope: &Scope) -> Option<Test> {
        if !matches!(key, "non_empty" | "absent" | "matches" | "each") {
            self.check_vars(value, scope);
        }
        let cmp = |k: &str| match k {
            "ge" | "length_ge" => Cmp::Ge,
            "le" | "length_le" => Cmp::Le,
            "gt" => Cmp::Gt,
            "lt" => Cmp::Lt,
            _ => Cmp::Eq,
        };
        Some(match key {
            "equals" | "not_equals" => Test::Equals { value: value.clone(), negated: key == "not_equals" },
            "non_empty" | "absent" => {
                let yes = self.boolean(value, key)?;
                if (key == "non_empty") == yes { Test::NonEmpty } else { Test::Absent }
            }
            "ge" | "le" | "gt" | "lt" => Test::Compare { op: cmp(key), bound: self.number_node(value, key)? },
            "length" | "length_ge" | "length_le" => Test::Length { op: cmp(key), bound: self.number_node(value, key)? },
            "matches" => {
                let text = self.string(value, "matches")?;
                match Regex::new(&text) {
                    Ok(re) => Test::Matches(re),
                    Err(e) => {
                        let detail = e
                            .to_string()
                            .lines()
                            .last()
                            .unwrap_or_default()
                            .trim()
                            .trim_start_matches("error: ")
                            .to_owned();
                        self.err(value.pos, format!("invalid regex {text:?}: {detail}"));
                        return None;
                    }
                }
            }
            "contains" | "not_contains" => Test::Contains { value: value.clone(), negated: key == "not_contains" },
            "one_of" => match value.as_seq() {
                Some(items) if !items.is_empty() => Test::OneOf(items.to_vec()),
                None if value.as_str().is_some_and(|t| t.trim().starts_with("${") && t.trim().ends_with('}')) => {
                    Test::OneOfList(value.clone())
                }
                _ => {
                    self.err(value.pos, format!("one_of must be a non-empty list or a \"${{variable}}\" holding one, not {}", value.describe()));
                    return None;
                }
            },
            "each" => {
                let element = match ty {
                    Ty::List(inner) => (**inner).clone(),
                    Ty::Any => Ty::Any,
                    other => {
                        self.err(value.pos, format!("each applies to lists, and this path is {}", ty_word(other)));
                        Ty::Any
                    }
                };
                let nested: Vec<Assertion> = match &value.kind {
                    NodeKind::Seq(items) => {
                        items.iter().filter_map(|n| self.assertion(n, Some(&element), scope, true)).collect()
                    }
                    _ => self.assertion(value, Some(&element), scope, true).into_iter().collect(),
                };
                Test::Each(nested)
            }
            _ => return None,
        })
    }

    /// A number, or a `${...}` that will be one.
    fn number_node(&mut self, node: &Node, what: &str) -> Option<Node> {
        let is_var = node.scalar_text().is_some_and(|t| t.contains("${"));
        let numeric = matches!(node.plain(), Some(Plain::Int(_) | Plain::Float(_)))
            || node.as_str().is_some_and(|s| yaml::parse_int(s.trim()).is_some());
        if is_var || numeric {
            Some(node.clone())
        } else {
            self.err(node.pos, format!("{what} must be a number, not {}", describe_value(node)));
            None
        }
    }

    fn check_step(&mut self, fields: &Fields<'_>, scope: &mut Scope) -> Option<CheckStep> {
        let name_node = fields.get("check")?;
        let name = self.string(name_node, "check")?;
        let Some(def) = checks::find(&name) else {
            let hint = did_you_mean(&name, checks::registry().iter().map(|c| c.name));
            self.err(name_node.pos, format!("unknown check {name:?}{hint} (`csi-conform list --checks` shows them)"));
            return None;
        };
        let what = format!("check {}", def.name);
        let args = self.step_args(&what, def.args, fields.get("args"), name_node.pos, scope);
        let outputs = Ty::Record((def.outputs)().into_iter().collect());
        let save = fields.get("save").map(|n| self.saves(n, &outputs, scope)).unwrap_or_default();
        Some(CheckStep { check: def, args, save })
    }

    fn property_step(&mut self, fields: &Fields<'_>, scope: &Scope) -> Option<PropertyStep> {
        let name_node = fields.get("property")?;
        let name = self.string(name_node, "property")?;
        let Some(def) = property::find(&name) else {
            let hint = did_you_mean(&name, property::properties().iter().map(|p| p.name));
            self.err(
                name_node.pos,
                format!("unknown property {name:?}{hint} (`csi-conform list --checks` shows them)"),
            );
            return None;
        };
        let what = format!("property {}", def.name);
        let args = self.step_args(&what, def.args, fields.get("args"), name_node.pos, scope);
        let bounds = match fields.get("bounds").map(config::parse_bounds).transpose() {
            Ok(b) => b.unwrap_or_default(),
            Err((pos, message)) => {
                self.err(pos, message);
                return None;
            }
        };
        if let (Some(node), Err(e)) = (fields.get("bounds"), bounds.apply(&Bounds::default()).validate()) {
            self.err(node.pos, e.to_string());
        }
        Some(PropertyStep { property: def, args, bounds })
    }

    /// The `args` of a check or property step (`what` names it: `check path-state`),
    /// checked against its argument specs.
    fn step_args(
        &mut self,
        what: &str,
        specs: &[ArgSpec],
        node: Option<&Node>,
        at: Pos,
        scope: &Scope,
    ) -> Vec<(String, Node)> {
        let Some(node) = node else {
            for spec in specs.iter().filter(|a| a.required) {
                self.err(at, format!("{what} needs argument `{}`", spec.name));
            }
            return Vec::new();
        };
        let known: Vec<&str> = specs.iter().map(|a| a.name).collect();
        let Some(fields) = self.fields(node, &format!("the args of {what}"), &known) else {
            return Vec::new();
        };
        for spec in specs.iter().filter(|a| a.required) {
            if !fields.has(spec.name) {
                self.err(node.pos, format!("{what} needs argument `{}`", spec.name));
            }
        }
        let mut out = Vec::new();
        for (key, value) in fields.entries {
            let name = key.scalar_text().unwrap_or_default();
            let Some(spec) = specs.iter().find(|a| a.name == name) else { continue };
            self.check_vars(value, scope);
            if !value.scalar_text().is_some_and(|t| t.contains("${"))
                && let Err(e) = checks::check_arg_literal(spec.kind, value)
            {
                self.err(value.pos, format!("argument `{name}` of {what}: {e}"));
            }
            let capabilities: Vec<&Node> = match spec.kind {
                ArgKind::Capability => vec![value],
                ArgKind::Capabilities => value.as_seq().map(|items| items.iter().collect()).unwrap_or_default(),
                _ => Vec::new(),
            };
            if let Some(desc) = proto::message("VolumeCapability") {
                for cap in capabilities.into_iter().filter(|c| c.as_map().is_some()) {
                    for (p, m) in request::validate(&desc, cap) {
                        self.err(p, m);
                    }
                }
            }
            out.push((name.to_owned(), value.clone()));
        }
        out
    }
}

/// The type of a response: the output message, or `{messages: [...]}` for streaming RPCs.
pub(crate) fn response_type(method: &MethodDescriptor) -> Ty {
    let message = Ty::Message(method.output());
    if method.is_server_streaming() {
        Ty::Record(BTreeMap::from([("messages", Ty::List(Box::new(message)))]))
    } else {
        message
    }
}

fn check_var(path: &FieldPath, scope: &Scope) -> Result<(), String> {
    let Some(Seg::Field(name)) = path.segs().first() else {
        return Err(format!("${{{path}}} must start with a variable name"));
    };
    let Some(ty) = scope.get(name) else {
        let hint = did_you_mean(name, scope.keys().map(String::as_str));
        return Err(format!(
            "undefined variable {name:?} in ${{{path}}}{hint} (variables: the built-ins and earlier saves of this scenario)"
        ));
    };
    ty.resolve(&path.segs()[1..]).map(|_| ()).map_err(|e| format!("${{{path}}}: {e}"))
}

/// The static type of an `assert` value: a whole variable's type, or anything.
fn value_type(node: &Node, scope: &Scope) -> Ty {
    let whole = node.scalar_text().and_then(|t| Template::parse(t).ok()).and_then(|t| t.whole().cloned());
    match whole {
        Some(path) => match path.segs().split_first() {
            Some((Seg::Field(name), rest)) => scope.get(name).and_then(|t| t.resolve(rest).ok()).unwrap_or(Ty::Any),
            _ => Ty::Any,
        },
        None => Ty::Any,
    }
}

fn ty_word(ty: &Ty) -> &'static str {
    match ty {
        Ty::Any => "anything",
        Ty::Scalar => "a scalar",
        Ty::Message(_) => "a message",
        Ty::List(_) => "a list",
        Ty::Map(_) => "a map",
        Ty::Record(_) => "a record",
    }
}

fn describe_value(node: &Node) -> String {
    match node.scalar_text() {
        Some(t) if !node.is_null() => format!("{t:?}"),
        _ => node.describe().to_owned(),
    }
}

/// The plugin services a scenario's calls imply: a controller RPC needs
/// `plugin:CONTROLLER_SERVICE` unless its step only runs under a `controller:` condition
/// (which cannot hold without the service); likewise for group controller and snapshot
/// metadata RPCs. Named checks and property steps contribute the RPCs they call.
fn implied_services(steps: &[Step]) -> Vec<Capability> {
    let mut out = Vec::new();
    for step in steps {
        for method in step.action.rpcs().iter().filter_map(|r| proto::method(r)) {
            let (service, guard_scope) = match method.parent_service().name() {
                "Controller" => (PluginService::ControllerService, Some("controller")),
                "GroupController" => (PluginService::GroupControllerService, Some("group")),
                "SnapshotMetadata" => (PluginService::SnapshotMetadataService, None),
                _ => continue,
            };
            let guarded = step.when.iter().any(|c| !c.negated && Some(c.capability.scope()) == guard_scope);
            let cap = Capability::Plugin(service);
            if !guarded && !out.contains(&cap) {
                out.push(cap);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_keys_follow_csi_sanity_and_extend_by_rpc_name() {
        assert_eq!(secret_key("CreateVolume"), "CreateVolumeSecret");
        assert_eq!(secret_key("ValidateVolumeCapabilities"), "ControllerValidateVolumeCapabilitiesSecret");
        assert_eq!(secret_key("CreateVolumeGroupSnapshot"), "CreateSnapshotSecret");
        assert_eq!(secret_key("NodeExpandVolume"), "NodeExpandVolumeSecret");
    }

    fn errors(text: &str) -> Vec<String> {
        match load_str("t.yaml", text) {
            Ok(_) => Vec::new(),
            Err(e) => e.0.iter().map(ToString::to_string).collect(),
        }
    }

    const HEAD: &str = "suite: s\ntitle: t\nscenarios:\n  - id: a\n    title: a\n";

    #[test]
    fn property_steps_check_their_name_arguments_and_bounds() {
        let ok = format!(
            "{HEAD}    steps:\n      - property: validate-never-fails\n        args: {{ volume_id: x, parameters: {{ a: b }} }}\n        bounds: {{ access_types: [mount], max_capabilities: 2 }}\n"
        );
        let suite = load_str("t.yaml", &ok).unwrap();
        let Action::Property(step) = &suite.scenarios[0].steps[0].action else { panic!("a property step") };
        assert_eq!(step.bounds.access_types, Some((true, false)));
        assert_eq!(suite.scenarios[0].implied, [Capability::Plugin(PluginService::ControllerService)]);

        let bad = format!(
            "{HEAD}    steps:\n      - property: validate-never-fail\n      - property: create-then-validate\n        args: {{ parameters: [a] }}\n        bounds: {{ access_types: [] }}\n"
        );
        assert_eq!(
            errors(&bad),
            [
                "t.yaml:7:19: unknown property \"validate-never-fail\"; did you mean validate-never-fails? (`csi-conform list --checks` shows them)",
                "t.yaml:9:29: argument `parameters` of property create-then-validate: expects a mapping of text values, not a list",
                "t.yaml:10:33: access_types must list mount, block or both",
            ]
        );
    }

    #[test]
    fn vvc_reconcile_takes_a_list_of_capabilities_checked_against_the_descriptor() {
        let text = format!(
            "{HEAD}    steps:\n      - check: vvc-reconcile\n        args: {{ volume_id: x, capabilities: [{{ mount: {{}}, access_mode: {{ mode: WRITER }} }}] }}\n      - check: vvc-reconcile\n        args: {{ volume_id: x, capabilities: [] }}\n"
        );
        let errs = errors(&text);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with("t.yaml:8:") && errs[0].contains("WRITER"), "{}", errs[0]);
        assert_eq!(
            errs[1],
            "t.yaml:10:45: argument `capabilities` of check vvc-reconcile: expects a non-empty list of VolumeCapability mappings, not a list"
        );
    }

    #[test]
    fn expect_kind_reason_not_code_and_requires_secrets_are_checked() {
        let text = format!(
            "{HEAD}    requires_secrets: [CreateVolumeSecrets]\n    steps:\n      - call: Probe\n        expect: {{ not_code: UNIMPLEMENTED, kind: Bad_Kind, reason: why }}\n      - call: Probe\n        expect: {{ code: OK, not_code: INTERNAL }}\n"
        );
        assert_eq!(
            errors(&text),
            [
                "t.yaml:6:24: requires_secrets: \"CreateVolumeSecrets\" is not a secrets-file key; did you mean CreateVolumeSecret?",
                "t.yaml:9:50: kind \"Bad_Kind\" must use only a-z, 0-9 and '-'",
                "t.yaml:11:17: expect has both `code` and `not_code`; use one",
            ]
        );
        let good = format!(
            "{HEAD}    requires_secrets: CreateVolumeSecret\n    steps:\n      - call: Probe\n        expect: {{ not_code: [UNIMPLEMENTED, INTERNAL], kind: probe-broken, reason: why }}\n"
        );
        let suite = load_str("t.yaml", &good).unwrap();
        assert_eq!(suite.scenarios[0].requires.secrets, ["CreateVolumeSecret"]);
        let Action::Call(call) = &suite.scenarios[0].steps[0].action else { panic!("a call") };
        assert_eq!(call.expect.codes, ExpectCodes::Except(vec![Code::Unimplemented, Code::Internal]));
        assert!(call.expect.codes.accepts(Code::Ok) && !call.expect.codes.accepts(Code::Internal));
        assert_eq!(call.expect.codes.to_string(), "any code but UNIMPLEMENTED or INTERNAL");
        assert_eq!(call.expect.kind_or("unexpected-code"), "probe-broken");
        assert_eq!(call.expect.explain("Probe answered INTERNAL".into()), "Probe answered INTERNAL (why)");
    }

    mod never_panics {
        use proptest::prelude::*;

        use super::super::load_str;

        /// Fragments of suite-like YAML, so that generated texts get past the parser often.
        fn fragment() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("suite: s\n".to_owned()),
                Just("title: t\n".to_owned()),
                Just("scenarios:\n".to_owned()),
                Just("  - id: a\n".to_owned()),
                Just("    title: x\n".to_owned()),
                Just("    steps:\n".to_owned()),
                Just("      - call: CreateVolume\n".to_owned()),
                Just(
                    "        request: { name: \"${name}\", capacity_range: { required_bytes: \"${x.y[3]}\" } }\n"
                        .to_owned()
                ),
                Just(
                    "        expect: { code: [OK, 5], fields: [{ path: volume.volume_id, matches: \"(\" }] }\n"
                        .to_owned()
                ),
                Just("      - assert: [{ value: \"${\", each: { each: {} } }]\n".to_owned()),
                Just("      - check: path-state\n        args: { path: [], is: {} }\n".to_owned()),
                Just("        save: { v: \"a[\\\"x\\\"].b[99999999999999999999]\" }\n".to_owned()),
                Just("        poll: { until: [], timeout: 1e999s }\n".to_owned()),
                Just("&a [*a]\n".to_owned()),
                Just("        when: [\"!\", \"!!x\", \":\"]\n".to_owned()),
                "[ -~\\t\\n]{0,40}",
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

            #[test]
            fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
                let _ = load_str("p.yaml", &text);
            }

            #[test]
            fn suite_like_text_never_panics(parts in proptest::collection::vec(fragment(), 0..24)) {
                let _ = load_str("p.yaml", &parts.concat());
            }
        }
    }
}
