//! Loading suites: YAML text → the typed model, strictly. Every problem is reported as
//! `file:line:column: message` and all problems of a file are collected, not just the first:
//! unknown keys (with "did you mean"), unknown RPCs, request fields checked against the
//! descriptor, codes, capabilities, options, variables, checks, regexes and duplicate ids.

use std::{collections::BTreeMap, path::Path, str::FromStr, time::Duration};

use tonic::Code;

use crate::yaml::{self, Node, NodeKind, Plain, Pos};
use super::{
    builtin_vars,
    catalog::Catalog,
    model::*,
    vars::{Ty, did_you_mean},
};
use crate::{
    client::{code_name, parse_code},
    fingerprint::{Capability, PluginService},
    proto,
    report::Severity,
};

mod steps;

use steps::describe_value;

pub use super::error::{LoadError, LoadErrors};

/// The opt-ins a scenario can require, with the command-line flag that enables each.
pub const OPTIONS: [(&str, &str); 4] = [
    ("attach_limit", "--test-node-volume-attach-limit"),
    ("restart", "--allow-restart-cmd"),
    ("restart_node", "--restart-node-cmd"),
    ("restart_controller", "--restart-controller-cmd"),
];

fn known_secret_keys() -> Vec<String> {
    let mut keys: Vec<String> = crate::secrets::SecretKey::ALL.iter().map(|k| k.as_str().to_owned()).collect();
    for m in proto::all_methods() {
        if m.input().get_field_by_name("secrets").is_some() {
            keys.push(crate::secrets::secret_key(m.name()));
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Reads and loads a suite file, its checks and properties found in `catalog`.
pub fn load_file_in(catalog: &dyn Catalog, path: &Path) -> Result<Suite, LoadErrors> {
    let origin = path.display().to_string();
    let text = yaml::read_source(path).map_err(|e| {
        let pos = e.pos().unwrap_or_default();
        let message = match e {
            yaml::SourceError::NotUtf8 { .. } => e.to_string(),
            _ => format!("cannot read the suite: {e}"),
        };
        LoadErrors(vec![LoadError::new(&origin, pos, message)])
    })?;
    load_str_in(catalog, &origin, &text)
}

/// Loads a suite from text, its checks and properties found in `catalog`; `origin` names it
/// in errors and reports.
pub fn load_str_in(catalog: &dyn Catalog, origin: &str, text: &str) -> Result<Suite, LoadErrors> {
    let mut loader = Loader { origin, catalog, errors: Vec::new() };
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
pub fn check_unique(suites: &[Suite]) -> Result<(), LoadErrors> {
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
    /// Where the checks and properties that steps name are found.
    catalog: &'a dyn Catalog,
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
    "exclusive",
    "steps",
];
const COMMON_STEP_KEYS: &[&str] = &["name", "when", "spec"];
const CALL_KEYS: &[&str] =
    &["call", "node", "request", "secrets", "expect", "skip_on", "save", "repeat", "repeat_compare", "poll"];
const ASSERT_KEYS: &[&str] = &["assert", "only_if", "otherwise"];
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
            // What the spec permits: a passing finding of kind `note`, never a verdict.
            Some("note") => Some(Severity::Pass),
            _ => {
                self.err(node.pos, format!("otherwise must be fail, warn or note, not {}", describe_value(node)));
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

    fn suite(&mut self, root: &Node) -> Option<Suite> {
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
        Some(Suite {
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
        let exclusive = fields.get("exclusive").map(|n| self.pools(n, serial)).unwrap_or_default();
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
        let uses_paths = fields.get("steps").is_some_and(mentions_paths)
            || steps.iter().any(|s| s.rpcs().into_iter().any(takes_node_path));
        Some(Scenario {
            id: format!("{suite_id}.{}", local?),
            title: title?,
            spec,
            parity,
            tags,
            requires,
            implied,
            serial,
            exclusive,
            uses_paths,
            steps,
            location: Location { origin: self.origin.to_owned(), pos: id_node.map_or(node.pos, |n| n.pos) },
            orchestrator: None,
        })
    }

    /// `exclusive:`: one pool name or a list of them (`serial: true` already runs alone).
    fn pools(&mut self, node: &Node, serial: bool) -> Vec<Pool> {
        if serial {
            self.err(node.pos, "exclusive is for a scenario that may run beside others; serial: true already runs it alone");
        }
        let mut pools = Vec::new();
        for (name, pos) in self.strings(node, "a pool in exclusive") {
            match Pool::from_name(&name) {
                Some(p) if pools.contains(&p) => self.err(pos, format!("pool {name} is named twice in exclusive")),
                Some(p) => pools.push(p),
                None => {
                    let known: Vec<&str> = Pool::ALL.iter().map(|p| p.name()).collect();
                    self.err(pos, format!("unknown pool {name:?} in exclusive; known: {}", known.join(", ")));
                }
            }
        }
        pools
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
            if crate::spec::lookup(&id).is_none() {
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

/// Whether any text under `node` refers to the `paths` variable (`${paths.target}`, ...).
fn mentions_paths(node: &Node) -> bool {
    match &node.kind {
        NodeKind::Scalar { text, .. } => text.match_indices("${").any(|(i, _)| {
            let rest = text[i + 2..].trim_start();
            rest.strip_prefix("paths").is_some_and(|r| !r.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        }),
        NodeKind::Seq(items) => items.iter().any(mentions_paths),
        NodeKind::Map(entries) => entries.iter().any(|(k, v)| mentions_paths(k) || mentions_paths(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::load_str;

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

        use crate::suite::load_str;

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
