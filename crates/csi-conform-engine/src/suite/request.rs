//! Requests from YAML: a YAML mapping (or a variable's value) turned into a `DynamicMessage` of
//! the RPC's request type, field by field through the compiled descriptor. The same walk runs
//! at load time without variables (every field name, type, enum name and oneof is checked
//! then) and at run time with them.
//!
//! Scalars: integers of every width from numbers or numeric strings (range-checked); floats
//! from numbers or strings; bools; strings from any scalar (as written); bytes from a string's
//! UTF-8 or from `!!binary` base64; enums by value name (or number, to send unknown values);
//! `google.protobuf.*Value` wrappers as plain scalars; `google.protobuf.Timestamp` as an
//! RFC 3339 string. `null` leaves a field unset; `{}` sends a present, empty message.

use std::{borrow::Cow, collections::HashMap};

use base64::Engine as _;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, MethodDescriptor, ReflectMessage, Value,
};

use crate::yaml::{self, Node, NodeKind, Plain, Pos};
use super::{
    error::{LoadError, LoadErrors},
    vars::{Subst, Template, Val, Vars, did_you_mean, is_wrapper, unknown_field_text},
};

/// A request text as parsed from YAML, not yet typed: kept with its origin so that building
/// it can name `file:line:column`.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestTemplate {
    origin: String,
    node: Option<Node>,
}

impl RequestTemplate {
    /// A template from an already parsed node (`None`: an empty request).
    pub(crate) fn new(origin: &str, node: Option<Node>) -> Self {
        RequestTemplate { origin: origin.to_owned(), node }
    }

    /// The parsed YAML, if any.
    pub fn node(&self) -> Option<&Node> {
        self.node.as_ref()
    }

    /// Where it came from (a suite file, or `<request>`).
    pub fn origin(&self) -> &str {
        &self.origin
    }
}

/// Parses a standalone request text (the CLI's `call --request`), e.g. with origin
/// `<request>`. An empty text is an empty request.
pub fn parse_request(origin: &str, text: &str) -> Result<RequestTemplate, LoadErrors> {
    let node = yaml::parse(text)
        .map_err(|errs| LoadErrors(errs.into_iter().map(|e| LoadError::new(origin, e.pos, e.message)).collect()))?;
    Ok(RequestTemplate::new(origin, node))
}

/// Builds the request of `method` from a template, substituting `vars`. Every problem is
/// reported with its position, all of them at once.
pub fn build_request(
    method: &MethodDescriptor,
    request: &RequestTemplate,
    vars: &Vars,
) -> Result<DynamicMessage, LoadErrors> {
    build_message(&method.input(), request, Some(vars))
}

/// Builds a message of type `desc` from a template (`vars: None` checks shape only).
pub(crate) fn build_message(
    desc: &MessageDescriptor,
    request: &RequestTemplate,
    vars: Option<&Vars>,
) -> Result<DynamicMessage, LoadErrors> {
    let mut builder = Builder { vars, errors: Vec::new(), path: Vec::new() };
    let message = match &request.node {
        None => DynamicMessage::new(desc.clone()),
        Some(node) if node.is_null() => DynamicMessage::new(desc.clone()),
        Some(node) => {
            builder.message(desc, Input::Node(node), node.pos).unwrap_or_else(|| DynamicMessage::new(desc.clone()))
        }
    };
    if builder.errors.is_empty() {
        Ok(message)
    } else {
        Err(LoadErrors(builder.errors.into_iter().map(|(pos, m)| LoadError::new(&request.origin, pos, m)).collect()))
    }
}

/// Checks a request template against its message type without variables: the load-time
/// validation. Returns every error with its position.
pub(crate) fn validate(desc: &MessageDescriptor, node: &Node) -> Vec<(Pos, String)> {
    let mut builder = Builder { vars: None, errors: Vec::new(), path: Vec::new() };
    if !node.is_null() {
        builder.message(desc, Input::Node(node), node.pos);
    }
    builder.errors
}

/// Converts a value into a message of type `desc` (for comparing a response message with a
/// YAML mapping).
pub(crate) fn message_from_val(desc: &MessageDescriptor, val: &Val) -> Result<DynamicMessage, String> {
    let mut builder = Builder { vars: None, errors: Vec::new(), path: Vec::new() };
    let pos = Pos::default();
    match builder.message(desc, Input::Val(val), pos) {
        Some(m) if builder.errors.is_empty() => Ok(m),
        _ => Err(builder.errors.into_iter().map(|(_, m)| m).collect::<Vec<_>>().join("; ")),
    }
}

/// Where a value to build comes from: a YAML node, or a value substituted for a variable.
#[derive(Clone, Copy)]
enum Input<'a> {
    Node(&'a Node),
    Val(&'a Val),
    Text(&'a str),
}

/// A scalar, whatever its source.
enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    /// A string, with the text as written (numbers written into string fields keep it).
    Str(Cow<'a, str>),
    /// A `!!binary` scalar: base64 text.
    Binary(&'a str),
    Bytes(&'a [u8]),
    Enum(&'a prost_reflect::EnumDescriptor, i32),
}

enum Shape<'a> {
    Scalar(Scalar<'a>, Option<&'a str>),
    Seq(Vec<Input<'a>>),
    Map(Vec<(Cow<'a, str>, Input<'a>, Option<Pos>)>),
    Message(&'a DynamicMessage),
}

fn shape(input: Input<'_>) -> Shape<'_> {
    match input {
        Input::Text(t) => Shape::Scalar(Scalar::Str(Cow::Borrowed(t)), Some(t)),
        Input::Node(node) => match &node.kind {
            NodeKind::Seq(items) => Shape::Seq(items.iter().map(Input::Node).collect()),
            NodeKind::Map(entries) => Shape::Map(
                entries
                    .iter()
                    .map(|(k, v)| (Cow::Borrowed(k.scalar_text().unwrap_or_default()), Input::Node(v), Some(k.pos)))
                    .collect(),
            ),
            NodeKind::Scalar { text, tag, .. } => {
                let scalar = match node.plain() {
                    _ if tag.as_deref() == Some("binary") => Scalar::Binary(text),
                    Some(Plain::Null) | None => Scalar::Null,
                    Some(Plain::Bool(b)) => Scalar::Bool(b),
                    Some(Plain::Int(i)) => Scalar::Int(i),
                    Some(Plain::Float(f)) => Scalar::Float(f),
                    Some(Plain::Str(s)) => Scalar::Str(Cow::Borrowed(s)),
                };
                Shape::Scalar(scalar, Some(text))
            }
        },
        Input::Val(val) => match val {
            Val::Null => Shape::Scalar(Scalar::Null, None),
            Val::Bool(b) => Shape::Scalar(Scalar::Bool(*b), None),
            Val::Int(i) => Shape::Scalar(Scalar::Int(*i), None),
            Val::Float(f) => Shape::Scalar(Scalar::Float(*f), None),
            Val::Str(s) => Shape::Scalar(Scalar::Str(Cow::Borrowed(s)), Some(s)),
            Val::Bytes(b) => Shape::Scalar(Scalar::Bytes(b), None),
            Val::Enum(e, n) => Shape::Scalar(Scalar::Enum(e, *n), None),
            Val::List(items) => Shape::Seq(items.iter().map(Input::Val).collect()),
            Val::Map(entries) => {
                Shape::Map(entries.iter().map(|(k, v)| (Cow::Borrowed(k.as_str()), Input::Val(v), None)).collect())
            }
            Val::Message(m) => Shape::Message(m),
        },
    }
}

struct Builder<'v> {
    vars: Option<&'v Vars>,
    errors: Vec<(Pos, String)>,
    /// Field names from the request's root to the value being built.
    path: Vec<String>,
}

/// A scalar node's substitution: the node itself, a value, interpolated text, or nothing
/// (variables unknown at load time, or an error already recorded).
enum Resolved<'a> {
    Node(&'a Node),
    Val(Val),
    Text(String),
    Skip,
}

impl Builder<'_> {
    fn error(&mut self, pos: Pos, message: String) {
        self.errors.push((pos, message));
    }

    fn here(&self) -> String {
        let mut out = String::new();
        for part in &self.path {
            if !out.is_empty() && !part.starts_with('[') {
                out.push('.');
            }
            out.push_str(part);
        }
        out
    }

    fn resolve<'a>(&mut self, node: &'a Node) -> Resolved<'a> {
        let NodeKind::Scalar { text, .. } = &node.kind else {
            return Resolved::Node(node);
        };
        let template = match Template::parse(text) {
            Ok(t) => t,
            Err(e) => {
                self.error(node.pos, e);
                return Resolved::Skip;
            }
        };
        if !template.has_vars() {
            return Resolved::Node(node);
        }
        let Some(vars) = self.vars else {
            return Resolved::Skip;
        };
        match vars.substitute(&template) {
            Ok(Subst::Whole(v)) => Resolved::Val(v),
            Ok(Subst::Text(t)) => Resolved::Text(t),
            Ok(Subst::Literal) => Resolved::Node(node),
            Err(e) => {
                self.error(node.pos, e);
                Resolved::Skip
            }
        }
    }

    /// Runs `f` on the input with its variables substituted.
    fn with_input<T>(&mut self, input: Input<'_>, f: impl FnOnce(&mut Self, Input<'_>) -> Option<T>) -> Option<T> {
        let Input::Node(node) = input else {
            return f(self, input);
        };
        match self.resolve(node) {
            Resolved::Node(n) => f(self, Input::Node(n)),
            Resolved::Val(v) => f(self, Input::Val(&v)),
            Resolved::Text(t) => f(self, Input::Text(&t)),
            Resolved::Skip => None,
        }
    }

    fn message(&mut self, desc: &MessageDescriptor, input: Input<'_>, pos: Pos) -> Option<DynamicMessage> {
        self.with_input(input, |b, input| b.message_resolved(desc, input, pos))
    }

    fn message_resolved(&mut self, desc: &MessageDescriptor, input: Input<'_>, pos: Pos) -> Option<DynamicMessage> {
        let entries = match shape(input) {
            Shape::Map(entries) => entries,
            Shape::Message(m) if m.descriptor() == *desc => return Some(m.clone()),
            Shape::Scalar(Scalar::Null, _) => return None,
            other => {
                let got = describe_shape(&other, input);
                let at = self.described_here(desc);
                self.error(pos, format!("{at} expects a mapping ({}), got {got}", desc.full_name()));
                return None;
            }
        };
        let mut message = DynamicMessage::new(desc.clone());
        let mut oneofs: HashMap<String, (String, Pos)> = HashMap::new();
        for (key, value, key_pos) in entries {
            let key_pos = key_pos.unwrap_or(pos);
            let Some(field) = desc.get_field_by_name(&key) else {
                self.error(key_pos, format!("unknown field: {}", unknown_field_text(desc, &key)));
                continue;
            };
            if let Some(oneof) = field.containing_oneof().filter(|o| !o.is_synthetic()) {
                if let Some((other, other_pos)) = oneofs.get(oneof.name()) {
                    self.error(
                        key_pos,
                        format!(
                            "{key} and {other} (line {}) are both members of oneof {} in {}; set only one",
                            other_pos.line,
                            oneof.name(),
                            desc.full_name()
                        ),
                    );
                    continue;
                }
                oneofs.insert(oneof.name().to_owned(), (key.to_string(), key_pos));
            }
            let value_pos = match value {
                Input::Node(n) => n.pos,
                _ => pos,
            };
            self.path.push(key.to_string());
            if let Some(v) = self.field_value(&field, value, value_pos) {
                message.set_field(&field, v);
            }
            self.path.pop();
        }
        Some(message)
    }

    fn described_here(&self, desc: &MessageDescriptor) -> String {
        if self.path.is_empty() {
            format!("the request ({})", desc.full_name())
        } else {
            format!("field {}", self.here())
        }
    }

    fn field_value(&mut self, field: &FieldDescriptor, input: Input<'_>, pos: Pos) -> Option<Value> {
        self.with_input(input, |b, input| {
            if field.is_map() {
                b.map_value(field, input, pos)
            } else if field.is_list() {
                b.list_value(field, input, pos)
            } else {
                match shape(input) {
                    Shape::Scalar(Scalar::Null, _) => None,
                    _ => b.single(&field.kind(), input, pos),
                }
            }
        })
    }

    fn list_value(&mut self, field: &FieldDescriptor, input: Input<'_>, pos: Pos) -> Option<Value> {
        let items = match shape(input) {
            Shape::Seq(items) => items,
            Shape::Scalar(Scalar::Null, _) => return None,
            other => {
                let got = describe_shape(&other, input);
                self.error(pos, format!("field {} is repeated and expects a list, got {got}", self.here()));
                return None;
            }
        };
        let kind = field.kind();
        let mut values = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            let item_pos = input_pos(item, pos);
            self.path.push(format!("[{i}]"));
            let built = self.with_input(item, |b, item| match shape(item) {
                Shape::Scalar(Scalar::Null, _) => {
                    b.error(item_pos, format!("{} is null; a list element must have a value", b.here()));
                    None
                }
                _ => b.single(&kind, item, item_pos),
            });
            self.path.pop();
            values.extend(built);
        }
        Some(Value::List(values))
    }

    fn map_value(&mut self, field: &FieldDescriptor, input: Input<'_>, pos: Pos) -> Option<Value> {
        let entries = match shape(input) {
            Shape::Map(entries) => entries,
            Shape::Scalar(Scalar::Null, _) => return None,
            other => {
                let got = describe_shape(&other, input);
                self.error(pos, format!("field {} is a map and expects a mapping, got {got}", self.here()));
                return None;
            }
        };
        let Kind::Message(entry) = field.kind() else {
            return None;
        };
        let key_kind = entry.map_entry_key_field().kind();
        let value_kind = entry.map_entry_value_field().kind();
        let mut map = HashMap::new();
        for (key, value, key_pos) in entries {
            let key_pos = key_pos.unwrap_or(pos);
            let Some(k) = map_key(&key_kind, &key) else {
                self.error(
                    key_pos,
                    format!("map {} has {} keys; {key:?} is not one", self.here(), kind_name(&key_kind)),
                );
                continue;
            };
            self.path.push(key.to_string());
            let value_pos = input_pos(value, key_pos);
            let built = self.with_input(value, |b, value| match shape(value) {
                Shape::Scalar(Scalar::Null, _) => {
                    b.error(value_pos, format!("map value {} is null", b.here()));
                    None
                }
                _ => b.single(&value_kind, value, value_pos),
            });
            self.path.pop();
            if let Some(v) = built {
                map.insert(k, v);
            }
        }
        Some(Value::Map(map))
    }

    /// One value of `kind` (not a list or map).
    fn single(&mut self, kind: &Kind, input: Input<'_>, pos: Pos) -> Option<Value> {
        match kind {
            Kind::Message(desc) => {
                if let Shape::Scalar(scalar, _) = shape(input)
                    && !matches!(scalar, Scalar::Null)
                {
                    return self.special_message(desc, scalar, input, pos);
                }
                self.message_resolved(desc, input, pos).map(Value::Message)
            }
            _ => match shape(input) {
                Shape::Scalar(scalar, text) => match scalar_value(kind, scalar, text) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        self.error(pos, format!("field {} ({}) {e}", self.here(), kind_name(kind)));
                        None
                    }
                },
                other => {
                    let got = describe_shape(&other, input);
                    self.error(pos, format!("field {} expects {}, got {got}", self.here(), kind_name(kind)));
                    None
                }
            },
        }
    }

    /// Scalars written for wrapper and Timestamp messages.
    fn special_message(
        &mut self,
        desc: &MessageDescriptor,
        scalar: Scalar<'_>,
        input: Input<'_>,
        pos: Pos,
    ) -> Option<Value> {
        let mut message = DynamicMessage::new(desc.clone());
        let result = if is_wrapper(desc) {
            let text = match input {
                Input::Node(n) => n.scalar_text(),
                Input::Text(t) => Some(t),
                Input::Val(_) => None,
            };
            desc.get_field_by_name("value")
                .ok_or_else(|| "has no value field".to_owned())
                .and_then(|f| scalar_value(&f.kind(), scalar, text).map(|v| message.set_field(&f, v)))
        } else if desc.full_name() == "google.protobuf.Timestamp" {
            match scalar {
                Scalar::Str(s) => timestamp(&s).map(|(secs, nanos)| {
                    message.set_field_by_name("seconds", Value::I64(secs));
                    message.set_field_by_name("nanos", Value::I32(nanos));
                }),
                _ => Err("expects an RFC 3339 time such as 2024-01-31T12:00:00Z".to_owned()),
            }
        } else {
            let got = describe_shape(&Shape::Scalar(scalar, None), input);
            Err(format!("expects a mapping ({}), got {got}", desc.full_name()))
        };
        match result {
            Ok(()) => Some(Value::Message(message)),
            Err(e) => {
                self.error(pos, format!("field {} {e}", self.here()));
                None
            }
        }
    }
}

fn input_pos(input: Input<'_>, fallback: Pos) -> Pos {
    match input {
        Input::Node(n) => n.pos,
        _ => fallback,
    }
}

fn describe_shape(shape: &Shape<'_>, input: Input<'_>) -> String {
    match (shape, input) {
        (_, Input::Node(n)) => n.describe().to_owned(),
        (_, Input::Val(v)) => v.describe(),
        (_, Input::Text(_)) => "a string".to_owned(),
    }
}

/// The proto name of a kind, for messages.
pub(crate) fn kind_name(kind: &Kind) -> String {
    match kind {
        Kind::Double => "double".into(),
        Kind::Float => "float".into(),
        Kind::Int32 => "int32".into(),
        Kind::Int64 => "int64".into(),
        Kind::Uint32 => "uint32".into(),
        Kind::Uint64 => "uint64".into(),
        Kind::Sint32 => "sint32".into(),
        Kind::Sint64 => "sint64".into(),
        Kind::Fixed32 => "fixed32".into(),
        Kind::Fixed64 => "fixed64".into(),
        Kind::Sfixed32 => "sfixed32".into(),
        Kind::Sfixed64 => "sfixed64".into(),
        Kind::Bool => "bool".into(),
        Kind::String => "string".into(),
        Kind::Bytes => "bytes".into(),
        Kind::Message(m) => m.full_name().into(),
        Kind::Enum(e) => e.full_name().into(),
    }
}

fn int_in(kind: &Kind, i: i128) -> Result<Value, String> {
    let out = |range: &str| format!("expects an integer in {range}, got {i}");
    match kind {
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            i32::try_from(i).map(Value::I32).map_err(|_| out("the int32 range"))
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            i64::try_from(i).map(Value::I64).map_err(|_| out("the int64 range"))
        }
        Kind::Uint32 | Kind::Fixed32 => u32::try_from(i).map(Value::U32).map_err(|_| out("0..=4294967295")),
        Kind::Uint64 | Kind::Fixed64 => u64::try_from(i).map(Value::U64).map_err(|_| out("the uint64 range")),
        _ => Err("is not an integer field".into()),
    }
}

fn is_int_kind(kind: &Kind) -> bool {
    matches!(
        kind,
        Kind::Int32
            | Kind::Sint32
            | Kind::Sfixed32
            | Kind::Int64
            | Kind::Sint64
            | Kind::Sfixed64
            | Kind::Uint32
            | Kind::Fixed32
            | Kind::Uint64
            | Kind::Fixed64
    )
}

/// Converts a scalar into a field value of a scalar kind.
fn scalar_value(kind: &Kind, scalar: Scalar<'_>, text: Option<&str>) -> Result<Value, String> {
    let shown = |s: &Scalar<'_>| match s {
        Scalar::Str(t) => format!("{t:?}"),
        Scalar::Binary(_) => "!!binary data".into(),
        Scalar::Bytes(_) => "bytes".into(),
        Scalar::Null => "null".into(),
        Scalar::Bool(b) => b.to_string(),
        Scalar::Int(i) => i.to_string(),
        Scalar::Float(f) => f.to_string(),
        Scalar::Enum(e, n) => e.get_value(*n).map_or(n.to_string(), |v| v.name().to_owned()),
    };
    match (kind, &scalar) {
        (k, Scalar::Int(i)) if is_int_kind(k) => int_in(k, *i),
        (k, Scalar::Str(s)) if is_int_kind(k) => match yaml::parse_int(s.trim()) {
            Some(i) => int_in(k, i),
            None => Err(format!("expects an integer, got {}", shown(&scalar))),
        },
        (Kind::Double | Kind::Float, Scalar::Int(i)) => Ok(float_value(kind, *i as f64)),
        (Kind::Double | Kind::Float, Scalar::Float(f)) => Ok(float_value(kind, *f)),
        (Kind::Double | Kind::Float, Scalar::Str(s)) => s
            .trim()
            .parse::<f64>()
            .map(|f| float_value(kind, f))
            .map_err(|_| format!("expects a number, got {}", shown(&scalar))),
        (Kind::Bool, Scalar::Bool(b)) => Ok(Value::Bool(*b)),
        (Kind::Bool, Scalar::Str(s)) if matches!(s.as_ref(), "true" | "false") => Ok(Value::Bool(s == "true")),
        (Kind::String, Scalar::Str(s)) => Ok(Value::String(s.to_string())),
        (Kind::String, Scalar::Bool(_) | Scalar::Int(_) | Scalar::Float(_) | Scalar::Enum(..)) => {
            Ok(Value::String(text.map_or_else(|| shown(&scalar), str::to_owned)))
        }
        (Kind::String, Scalar::Bytes(b)) => String::from_utf8(b.to_vec())
            .map(Value::String)
            .map_err(|_| "expects text, got bytes that are not UTF-8".to_owned()),
        (Kind::Bytes, Scalar::Str(s)) => Ok(Value::Bytes(s.as_bytes().to_vec().into())),
        (Kind::Bytes, Scalar::Bytes(b)) => Ok(Value::Bytes(b.to_vec().into())),
        (Kind::Bytes | Kind::String, Scalar::Binary(b64)) => {
            let clean: String = b64.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(clean)
                .map_err(|e| format!("has !!binary data that is not base64: {e}"))?;
            match kind {
                Kind::Bytes => Ok(Value::Bytes(bytes.into())),
                _ => String::from_utf8(bytes)
                    .map(Value::String)
                    .map_err(|_| "expects text, got !!binary data that is not UTF-8".to_owned()),
            }
        }
        (Kind::Enum(e), Scalar::Str(name)) => {
            e.get_value_by_name(name).map(|v| Value::EnumNumber(v.number())).ok_or_else(|| {
                let names: Vec<String> = e.values().map(|v| v.name().to_owned()).collect();
                format!(
                    "has no value {name:?}{} (valid names: {})",
                    did_you_mean(name, names.iter().map(String::as_str)),
                    names.join(", ")
                )
            })
        }
        (Kind::Enum(_), Scalar::Int(i)) => {
            i32::try_from(*i).map(Value::EnumNumber).map_err(|_| format!("expects a value name or an int32, got {i}"))
        }
        (Kind::Enum(e), Scalar::Enum(other, n)) if other.full_name() == e.full_name() => Ok(Value::EnumNumber(*n)),
        _ => Err(format!("expects {}, got {}", expected_text(kind), describe_scalar(&scalar))),
    }
}

fn float_value(kind: &Kind, f: f64) -> Value {
    match kind {
        Kind::Float => Value::F32(f as f32),
        _ => Value::F64(f),
    }
}

fn expected_text(kind: &Kind) -> String {
    match kind {
        k if is_int_kind(k) => "an integer".into(),
        Kind::Double | Kind::Float => "a number".into(),
        Kind::Bool => "true or false".into(),
        Kind::String => "a string".into(),
        Kind::Bytes => "a string or !!binary data".into(),
        Kind::Enum(e) => format!("a {} value name", e.full_name()),
        Kind::Message(m) => format!("a mapping ({})", m.full_name()),
        _ => "a value".into(),
    }
}

fn describe_scalar(scalar: &Scalar<'_>) -> String {
    match scalar {
        Scalar::Null => "null".into(),
        Scalar::Bool(b) => format!("a boolean ({b})"),
        Scalar::Int(i) => format!("an integer ({i})"),
        Scalar::Float(f) => format!("a number ({f})"),
        Scalar::Str(s) => format!("a string ({s:?})"),
        Scalar::Binary(_) => "!!binary data".into(),
        Scalar::Bytes(_) => "bytes".into(),
        Scalar::Enum(e, _) => format!("a {} value", e.full_name()),
    }
}

fn map_key(kind: &Kind, text: &str) -> Option<MapKey> {
    match kind {
        Kind::String => Some(MapKey::String(text.to_owned())),
        Kind::Bool => match text {
            "true" => Some(MapKey::Bool(true)),
            "false" => Some(MapKey::Bool(false)),
            _ => None,
        },
        k => match int_in(k, yaml::parse_int(text)?).ok()? {
            Value::I32(i) => Some(MapKey::I32(i)),
            Value::I64(i) => Some(MapKey::I64(i)),
            Value::U32(i) => Some(MapKey::U32(i)),
            Value::U64(i) => Some(MapKey::U64(i)),
            _ => None,
        },
    }
}

/// Parses an RFC 3339 time into seconds and nanoseconds since the Unix epoch.
fn timestamp(text: &str) -> Result<(i64, i32), String> {
    let t = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map_err(|e| format!("expects an RFC 3339 time such as 2024-01-31T12:00:00Z, got {text:?} ({e})"))?;
    Ok((t.unix_timestamp(), t.nanosecond() as i32))
}

#[cfg(test)]
mod tests {
    use prost_reflect::ReflectMessage;

    use super::*;
    use crate::proto::{self, v1};

    fn build(method: &str, text: &str, vars: &Vars) -> Result<DynamicMessage, String> {
        let request = parse_request("<request>", text).map_err(|e| e.to_string())?;
        build_request(&proto::method(method).unwrap(), &request, vars).map_err(|e| e.to_string())
    }

    fn typed<M: prost::Message + Default>(m: &DynamicMessage) -> M {
        m.transcode_to().unwrap()
    }

    #[test]
    fn scalars_messages_lists_maps_enums_and_oneofs() {
        let text = "name: vol\ncapacity_range: { required_bytes: \"10737418240\", limit_bytes: 20 }\n\
                    volume_capabilities:\n  - access_mode: { mode: SINGLE_NODE_WRITER }\n    mount: { fs_type: ext4, mount_flags: [ro] }\n\
                    parameters: { iops: 3000, fast: true }\n";
        let m = build("CreateVolume", text, &Vars::new()).unwrap();
        let req: v1::CreateVolumeRequest = typed(&m);
        assert_eq!(req.name, "vol");
        assert_eq!(req.capacity_range.as_ref().unwrap().required_bytes, 10_737_418_240);
        assert_eq!(req.capacity_range.as_ref().unwrap().limit_bytes, 20);
        let cap = &req.volume_capabilities[0];
        assert_eq!(cap.access_mode.as_ref().unwrap().mode, 1);
        assert!(
            matches!(cap.access_type, Some(v1::volume_capability::AccessType::Mount(ref m)) if m.fs_type == "ext4")
        );
        assert_eq!(req.parameters["iops"], "3000");
        assert_eq!(req.parameters["fast"], "true");
    }

    #[test]
    fn empty_message_is_present_and_differs_from_unset() {
        let m = build("CreateVolume", "volume_capabilities: [{ block: {} }]", &Vars::new()).unwrap();
        let req: v1::CreateVolumeRequest = typed(&m);
        assert!(matches!(req.volume_capabilities[0].access_type, Some(v1::volume_capability::AccessType::Block(_))));
        assert!(req.volume_capabilities[0].access_mode.is_none());
        let unset = build("CreateVolume", "volume_capabilities: [{}]", &Vars::new()).unwrap();
        let req: v1::CreateVolumeRequest = typed(&unset);
        assert!(req.volume_capabilities[0].access_type.is_none());
        let null = build("CreateVolume", "capacity_range: ~", &Vars::new()).unwrap();
        assert!(typed::<v1::CreateVolumeRequest>(&null).capacity_range.is_none());
        let empty = build("CreateVolume", "capacity_range: {}", &Vars::new()).unwrap();
        assert!(typed::<v1::CreateVolumeRequest>(&empty).capacity_range.is_some());
    }

    #[test]
    fn wrappers_and_timestamps_are_written_as_scalars() {
        let desc = proto::message("ProbeResponse").unwrap();
        let t = RequestTemplate::new("<t>", yaml::parse("ready: false").unwrap());
        let m = build_message(&desc, &t, Some(&Vars::new())).unwrap();
        assert_eq!(typed::<v1::ProbeResponse>(&m).ready, Some(false));
        let desc = proto::message("Snapshot").unwrap();
        let t =
            RequestTemplate::new("<t>", yaml::parse("creation_time: 2024-01-31T12:00:00.5Z\nsize_bytes: 1").unwrap());
        let m = build_message(&desc, &t, Some(&Vars::new())).unwrap();
        let snap: v1::Snapshot = typed(&m);
        assert_eq!(snap.creation_time.unwrap().seconds, 1_706_702_400);
        assert_eq!(snap.creation_time.unwrap().nanos, 500_000_000);
    }

    #[test]
    fn variables_substitute_typed_values_and_interpolate_text() {
        let mut vars = Vars::new();
        vars.insert("size", Val::Int(42));
        vars.insert("name", Val::Str("n".into()));
        let cap = proto::to_dynamic(&v1::VolumeCapability {
            access_type: Some(v1::volume_capability::AccessType::Block(Default::default())),
            access_mode: None,
        });
        vars.insert("capability", Val::Message(cap));
        let m = build(
            "CreateVolume",
            "name: \"${name}-clone\"\ncapacity_range: { required_bytes: \"${size}\" }\nvolume_capabilities: [\"${capability}\"]",
            &vars,
        )
        .unwrap();
        let req: v1::CreateVolumeRequest = typed(&m);
        assert_eq!(req.name, "n-clone");
        assert_eq!(req.capacity_range.unwrap().required_bytes, 42);
        assert_eq!(req.volume_capabilities.len(), 1);
        let e = build("CreateVolume", "capacity_range: \"${capability}\"", &vars).unwrap_err();
        assert!(e.contains("expects a mapping (csi.v1.CapacityRange), got a csi.v1.VolumeCapability"), "{e}");
    }

    #[test]
    fn errors_name_position_field_and_alternatives() {
        let e = build(
            "CreateVolume",
            "nmae: x\ncapacity_range: { required_bytes: abc }\nvolume_capabilities: {}\n",
            &Vars::new(),
        )
        .unwrap_err();
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(
            lines[0],
            "<request>:1:1: unknown field: csi.v1.CreateVolumeRequest has no field \"nmae\"; did you mean name?"
        );
        assert_eq!(
            lines[1],
            "<request>:2:35: field capacity_range.required_bytes (int64) expects an integer, got \"abc\""
        );
        assert_eq!(lines[2], "<request>:3:22: field volume_capabilities is repeated and expects a list, got a mapping");
        let e =
            build("CreateVolume", "volume_capabilities: [{access_mode: {mode: WRITER}}]", &Vars::new()).unwrap_err();
        assert!(e.contains("has no value \"WRITER\""), "{e}");
        assert!(e.contains("SINGLE_NODE_WRITER"), "{e}");
        let e = build("CreateVolume", "volume_capabilities: [{block: {}, mount: {}}]", &Vars::new()).unwrap_err();
        assert!(e.contains("both members of oneof access_type"), "{e}");
        let e = build("CreateVolume", "parameters: [a]", &Vars::new()).unwrap_err();
        assert!(e.contains("is a map and expects a mapping, got a list"), "{e}");
        let e = build("NodeGetInfo", "x: 1", &Vars::new()).unwrap_err();
        assert!(e.contains("csi.v1.NodeGetInfoRequest has no field \"x\"; its fields are: "), "{e}");
    }

    #[test]
    fn enums_accept_numbers_and_bytes_accept_binary() {
        let m = build("CreateVolume", "volume_capabilities: [{access_mode: {mode: 99}}]", &Vars::new()).unwrap();
        let req: v1::CreateVolumeRequest = typed(&m);
        assert_eq!(req.volume_capabilities[0].access_mode.as_ref().unwrap().mode, 99);
        let desc = proto::message("google.protobuf.BytesValue").unwrap();
        let t = RequestTemplate::new("<t>", yaml::parse("value: !!binary aGk=").unwrap());
        let m = build_message(&desc, &t, None).unwrap();
        assert_eq!(m.get_field_by_name("value").unwrap().as_bytes().unwrap().as_ref(), b"hi");
        assert_eq!(m.descriptor().full_name(), "google.protobuf.BytesValue");
    }

    #[test]
    fn load_time_validation_skips_variables_but_checks_the_rest() {
        let desc = proto::message("CreateVolumeRequest").unwrap();
        let node = yaml::parse("name: \"${name}\"\ncapacity_range: \"${x}\"\nbogus: 1").unwrap().unwrap();
        let errors = validate(&desc, &node);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, Pos { line: 3, col: 1 });
    }
}
