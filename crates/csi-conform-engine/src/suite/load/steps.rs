//! Loading a scenario's steps: call steps (method, request, secrets, expectations, repeats,
//! polls, saves), assertions and their tests, check and property steps with their
//! arguments, and the variable typing (scopes) that ties them together. A child of `load`,
//! which owns the loader and the suite/scenario level.

use std::{collections::BTreeMap, time::Duration};

use prost_reflect::MethodDescriptor;
use regex::Regex;

use super::super::{
    builtin_vars,
    catalog::{self, ArgKind, ArgSpec},
    request::{self, RequestTemplate},
    vars::{FieldPath, Seg, Template, Ty, did_you_mean},
};
use super::*;
use crate::yaml::{self, Node, NodeKind, Plain, Pos};
use crate::{capability::strategy::Bounds, proto, report::Severity};

impl Loader<'_> {
    pub(super) fn step(&mut self, node: &Node, scope: &mut Scope) -> Option<Step> {
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
        let spec = fields.get("spec").map(|n| self.requirement_ids(n)).unwrap_or_default();
        let action = match kind {
            "call" => Action::Call(Box::new(self.call(&fields, node.pos, scope)?)),
            "assert" => Action::Assert(self.assert_step(&fields, scope)?),
            "property" => Action::Property(self.property_step(&fields, scope)?),
            _ => Action::Check(self.check_step(&fields, scope)?),
        };
        Some(Step { name, when, spec, action, pos: node.pos })
    }

    pub(super) fn when(&mut self, node: &Node) -> Vec<Condition> {
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

    pub(super) fn call(&mut self, fields: &Fields<'_>, pos: Pos, scope: &mut Scope) -> Option<Call> {
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

    pub(super) fn method(&mut self, node: &Node) -> Option<MethodDescriptor> {
        let name = self.string(node, "call")?;
        let found = proto::method(&name);
        if found.is_none() {
            let names: Vec<String> = proto::all_methods().map(|m| m.name().to_owned()).collect();
            let hint = did_you_mean(&name, names.iter().map(String::as_str));
            self.err(node.pos, format!("unknown RPC {name:?}{hint}"));
        }
        found
    }

    pub(super) fn secrets(&mut self, node: &Node, method: Option<&MethodDescriptor>) -> SecretsMode {
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

    pub(super) fn expect(&mut self, node: &Node, response: &Ty, scope: &Scope) -> Option<Expect> {
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

    pub(super) fn skip_on(&mut self, node: &Node) -> Option<SkipOn> {
        let fields = self.fields(node, "skip_on", &["codes", "reason"])?;
        let codes_node = self.required(&fields, "codes", "skip_on", node.pos)?;
        let codes = self.codes(codes_node);
        let reason = fields.get("reason").and_then(|n| self.string(n, "reason"));
        Some(SkipOn { codes, reason })
    }

    pub(super) fn repeat(&mut self, node: &Node) -> Option<Repeat> {
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

    pub(super) fn poll(&mut self, node: &Node, response: &Ty, scope: &Scope) -> Option<Poll> {
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

    pub(super) fn saves(&mut self, node: &Node, source: &Ty, scope: &mut Scope) -> Vec<Save> {
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
    pub(super) fn check_vars(&mut self, node: &Node, scope: &Scope) {
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

    pub(super) fn assert_step(&mut self, fields: &Fields<'_>, scope: &Scope) -> Option<AssertStep> {
        let node = fields.get("assert")?;
        let assertions = self.assertions(node, None, scope, "assert");
        let only_if = fields.get("only_if").map(|n| self.assertions(n, None, scope, "only_if")).unwrap_or_default();
        let otherwise = fields.get("otherwise").and_then(|n| self.severity(n)).unwrap_or(Severity::Fail);
        Some(AssertStep { assertions, only_if, otherwise })
    }

    /// A list of assertions (or one mapping). `subject` is the type paths are resolved
    /// against; `None` means `value:` subjects (assert steps).
    pub(super) fn assertions(
        &mut self,
        node: &Node,
        subject: Option<&Ty>,
        scope: &Scope,
        what: &str,
    ) -> Vec<Assertion> {
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

    pub(super) fn assertion(
        &mut self,
        node: &Node,
        subject_ty: Option<&Ty>,
        scope: &Scope,
        in_each: bool,
    ) -> Option<Assertion> {
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

    pub(super) fn test(&mut self, key: &str, value: &Node, ty: &Ty, scope: &Scope) -> Option<Test> {
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
                    self.err(
                        value.pos,
                        format!(
                            "one_of must be a non-empty list or a \"${{variable}}\" holding one, not {}",
                            value.describe()
                        ),
                    );
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
    pub(super) fn number_node(&mut self, node: &Node, what: &str) -> Option<Node> {
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

    pub(super) fn check_step(&mut self, fields: &Fields<'_>, scope: &mut Scope) -> Option<CheckStep> {
        let name_node = fields.get("check")?;
        let name = self.string(name_node, "check")?;
        let Some(def) = self.catalog.check(&name) else {
            let hint = did_you_mean(&name, self.catalog.check_names());
            self.err(name_node.pos, format!("unknown check {name:?}{hint} (`csi-conform list --checks` shows them)"));
            return None;
        };
        let what = format!("check {}", def.name);
        let args = self.step_args(&what, &(def.args)(), fields.get("args"), name_node.pos, scope);
        let outputs = Ty::Record((def.outputs)().into_iter().collect());
        let save = fields.get("save").map(|n| self.saves(n, &outputs, scope)).unwrap_or_default();
        Some(CheckStep { check: def, args, save })
    }

    pub(super) fn property_step(&mut self, fields: &Fields<'_>, scope: &Scope) -> Option<PropertyStep> {
        let name_node = fields.get("property")?;
        let name = self.string(name_node, "property")?;
        let Some(def) = self.catalog.property(&name) else {
            let hint = did_you_mean(&name, self.catalog.property_names());
            self.err(
                name_node.pos,
                format!("unknown property {name:?}{hint} (`csi-conform list --checks` shows them)"),
            );
            return None;
        };
        let what = format!("property {}", def.name);
        let args = self.step_args(&what, def.args, fields.get("args"), name_node.pos, scope);
        let bounds = match fields.get("bounds").map(crate::suite::bounds::parse_bounds).transpose() {
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
    pub(super) fn step_args(
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
                && let Err(e) = catalog::check_arg_literal(spec.kind, value)
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

pub(super) fn check_var(path: &FieldPath, scope: &Scope) -> Result<(), String> {
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
pub(super) fn value_type(node: &Node, scope: &Scope) -> Ty {
    let whole = node.scalar_text().and_then(|t| Template::parse(t).ok()).and_then(|t| t.whole().cloned());
    match whole {
        Some(path) => match path.segs().split_first() {
            Some((Seg::Field(name), rest)) => scope.get(name).and_then(|t| t.resolve(rest).ok()).unwrap_or(Ty::Any),
            _ => Ty::Any,
        },
        None => Ty::Any,
    }
}

pub(super) fn ty_word(ty: &Ty) -> &'static str {
    match ty {
        Ty::Any => "anything",
        Ty::Scalar => "a scalar",
        Ty::Message(_) => "a message",
        Ty::List(_) => "a list",
        Ty::Map(_) => "a map",
        Ty::Record(_) => "a record",
    }
}

pub(super) fn describe_value(node: &Node) -> String {
    match node.scalar_text() {
        Some(t) if !node.is_null() => format!("{t:?}"),
        _ => node.describe().to_owned(),
    }
}
