//! Values and variables: the dynamic [`Val`] every response part, variable and YAML literal
//! becomes; dotted [`FieldPath`]s into them; `${expr}` templates (whole-scalar typed
//! substitution vs. text interpolation); the run-time variable scope [`Vars`]; and the static
//! types ([`Ty`]) that let the loader reject undefined variables and impossible paths.

use std::{collections::BTreeMap, fmt};

use prost_reflect::{
    DynamicMessage, EnumDescriptor, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage, Value,
};

use crate::yaml::{Node, NodeKind, Plain, Pos};

/// A value the engine works with: a variable, a part of a response, a check's output or a
/// YAML literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// Absent: an unset message field, a missing map key, an index past the end.
    Null,
    /// A boolean.
    Bool(bool),
    /// Any integer (every proto integer kind fits).
    Int(i128),
    /// A floating-point number.
    Float(f64),
    /// A string.
    Str(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// An enum value, with its type so it can be named.
    Enum(EnumDescriptor, i32),
    /// A list.
    List(Vec<Val>),
    /// A map with string keys (proto map keys are shown as text).
    Map(BTreeMap<String, Val>),
    /// A protobuf message.
    Message(DynamicMessage),
}

/// The full names of the wrapper messages that are written and read as plain scalars.
pub const WRAPPERS: [&str; 9] = [
    "google.protobuf.BoolValue",
    "google.protobuf.Int32Value",
    "google.protobuf.Int64Value",
    "google.protobuf.UInt32Value",
    "google.protobuf.UInt64Value",
    "google.protobuf.FloatValue",
    "google.protobuf.DoubleValue",
    "google.protobuf.StringValue",
    "google.protobuf.BytesValue",
];

/// Whether a message type is one of the scalar wrappers.
pub fn is_wrapper(desc: &MessageDescriptor) -> bool {
    WRAPPERS.contains(&desc.full_name())
}

impl Val {
    /// Converts a proto field value of kind `kind` (a single element, not a list or map).
    pub fn from_value(value: &Value, kind: &Kind) -> Val {
        match value {
            Value::Bool(b) => Val::Bool(*b),
            Value::I32(i) => Val::Int((*i).into()),
            Value::I64(i) => Val::Int((*i).into()),
            Value::U32(i) => Val::Int((*i).into()),
            Value::U64(i) => Val::Int((*i).into()),
            Value::F32(f) => Val::Float((*f).into()),
            Value::F64(f) => Val::Float(*f),
            Value::String(s) => Val::Str(s.clone()),
            Value::Bytes(b) => Val::Bytes(b.to_vec()),
            Value::EnumNumber(n) => match kind {
                Kind::Enum(e) => Val::Enum(e.clone(), *n),
                _ => Val::Int((*n).into()),
            },
            Value::Message(m) => Val::from_message(m),
            Value::List(items) => Val::List(items.iter().map(|v| Val::from_value(v, kind)).collect()),
            Value::Map(entries) => {
                let value_kind = match kind {
                    Kind::Message(entry) => entry.map_entry_value_field().kind(),
                    other => other.clone(),
                };
                Val::Map(entries.iter().map(|(k, v)| (map_key_text(k), Val::from_value(v, &value_kind))).collect())
            }
        }
    }

    /// A message as a value; scalar wrappers become their scalar.
    pub fn from_message(m: &DynamicMessage) -> Val {
        let desc = m.descriptor();
        if is_wrapper(&desc)
            && let Some(field) = desc.get_field_by_name("value")
        {
            return Val::from_value(&m.get_field(&field), &field.kind());
        }
        Val::Message(m.clone())
    }

    /// The value of one field of a message: `Null` for an unset singular message field.
    pub fn from_field(m: &DynamicMessage, field: &FieldDescriptor) -> Val {
        if !field.is_list() && !field.is_map() && matches!(field.kind(), Kind::Message(_)) && !m.has_field(field) {
            return Val::Null;
        }
        Val::from_value(&m.get_field(field), &field.kind())
    }

    /// A YAML literal (no variables) as a value.
    pub fn from_plain_node(node: &Node) -> Val {
        match &node.kind {
            NodeKind::Seq(items) => Val::List(items.iter().map(Val::from_plain_node).collect()),
            NodeKind::Map(entries) => Val::Map(
                entries
                    .iter()
                    .map(|(k, v)| (k.scalar_text().unwrap_or_default().to_owned(), Val::from_plain_node(v)))
                    .collect(),
            ),
            NodeKind::Scalar { .. } => match node.plain() {
                Some(Plain::Null) | None => Val::Null,
                Some(Plain::Bool(b)) => Val::Bool(b),
                Some(Plain::Int(i)) => Val::Int(i),
                Some(Plain::Float(f)) => Val::Float(f),
                Some(Plain::Str(s)) => Val::Str(s.to_owned()),
            },
        }
    }

    /// A word for the value's type, for messages (`a string`, `a csi.v1.Volume`).
    pub fn describe(&self) -> String {
        match self {
            Val::Null => "absent".into(),
            Val::Bool(_) => "a boolean".into(),
            Val::Int(_) => "an integer".into(),
            Val::Float(_) => "a number".into(),
            Val::Str(_) => "a string".into(),
            Val::Bytes(_) => "bytes".into(),
            Val::Enum(e, _) => format!("a {} value", e.full_name()),
            Val::List(_) => "a list".into(),
            Val::Map(_) => "a map".into(),
            Val::Message(m) => format!("a {}", m.descriptor().full_name()),
        }
    }

    /// The enum value's name, if it is a known value of its enum.
    pub fn enum_name(&self) -> Option<String> {
        match self {
            Val::Enum(e, n) => e.get_value(*n).map(|v| v.name().to_owned()),
            _ => None,
        }
    }

    /// The value as text for interpolation into a longer string; `None` for lists, maps and
    /// messages.
    pub fn to_text(&self) -> Option<String> {
        match self {
            Val::Null => Some(String::new()),
            Val::Bool(b) => Some(b.to_string()),
            Val::Int(i) => Some(i.to_string()),
            Val::Float(f) => Some(f.to_string()),
            Val::Str(s) => Some(s.clone()),
            Val::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Val::Enum(_, n) => Some(self.enum_name().unwrap_or_else(|| n.to_string())),
            Val::List(_) | Val::Map(_) | Val::Message(_) => None,
        }
    }

    /// Whether the value is unset or its type's default (empty string/list/map, 0, false,
    /// absent message).
    pub fn is_empty(&self) -> bool {
        match self {
            Val::Null => true,
            Val::Bool(b) => !b,
            Val::Int(i) => *i == 0,
            Val::Float(f) => *f == 0.0,
            Val::Str(s) => s.is_empty(),
            Val::Bytes(b) => b.is_empty(),
            Val::Enum(_, n) => *n == 0,
            Val::List(items) => items.is_empty(),
            Val::Map(entries) => entries.is_empty(),
            Val::Message(_) => false,
        }
    }

    /// Steps one segment into the value. Absent stays absent; a missing map key or list
    /// index is absent; an unknown message field or a step into a scalar is an error.
    pub fn step(&self, seg: &Seg) -> Result<Val, String> {
        match (self, seg) {
            (Val::Null, _) => Ok(Val::Null),
            (Val::Message(m), Seg::Field(name)) => {
                let desc = m.descriptor();
                let field = desc.get_field_by_name(name).ok_or_else(|| unknown_field_text(&desc, name))?;
                Ok(Val::from_field(m, &field))
            }
            (Val::Map(entries), Seg::Field(key)) => Ok(entries.get(key).cloned().unwrap_or(Val::Null)),
            (Val::List(items), Seg::Index(i)) => Ok(items.get(*i).cloned().unwrap_or(Val::Null)),
            (other, seg) => Err(format!("{} has no {}", other.describe(), seg.describe())),
        }
    }

    /// Follows a whole path.
    pub fn get(&self, path: &[Seg]) -> Result<Val, String> {
        let mut current = self.clone();
        for (i, seg) in path.iter().enumerate() {
            current = current
                .step(seg)
                .map_err(|e| if i == 0 { e } else { format!("{}: {e}", FieldPath(path[..i].to_vec())) })?;
        }
        Ok(current)
    }
}

/// Renders a value on one line, for findings: strings quoted, messages as redacted JSON.
impl fmt::Display for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Val::Null => f.write_str("(absent)"),
            Val::Str(s) => write!(f, "{s:?}"),
            Val::Bytes(b) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Val::Enum(..) | Val::Bool(_) | Val::Int(_) | Val::Float(_) => {
                f.write_str(&self.to_text().unwrap_or_default())
            }
            Val::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Val::Map(entries) => {
                f.write_str("{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
            Val::Message(m) => f.write_str(&crate::proto::to_redacted_json(m)),
        }
    }
}

fn map_key_text(key: &MapKey) -> String {
    match key {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(i) => i.to_string(),
        MapKey::I64(i) => i.to_string(),
        MapKey::U32(i) => i.to_string(),
        MapKey::U64(i) => i.to_string(),
        MapKey::String(s) => s.clone(),
    }
}

/// The closest names to `name` among `candidates` (at most three), best first.
pub fn close_names<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut scored: Vec<(f64, &str)> =
        candidates.into_iter().map(|c| (strsim::jaro_winkler(name, c), c)).filter(|(score, _)| *score >= 0.8).collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let best = scored.first().map_or(0.0, |s| s.0);
    scored.into_iter().take_while(|(score, _)| *score >= best - 0.08).take(3).map(|(_, c)| c).collect()
}

/// `; did you mean x?` or the empty string.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    let close = close_names(name, candidates);
    match close.as_slice() {
        [] => String::new(),
        [one] => format!("; did you mean {one}?"),
        many => format!("; did you mean one of {}?", many.join(", ")),
    }
}

/// The error text for an unknown field of a message, with close or all field names.
pub fn unknown_field_text(desc: &MessageDescriptor, name: &str) -> String {
    let names: Vec<String> = desc.fields().map(|f| f.name().to_owned()).collect();
    let hint = did_you_mean(name, names.iter().map(String::as_str));
    if hint.is_empty() {
        format!("{} has no field {name:?}; its fields are: {}", desc.full_name(), names.join(", "))
    } else {
        format!("{} has no field {name:?}{hint}", desc.full_name())
    }
}

/// One step of a path: a field (or map key) name, or a list index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Seg {
    /// `name`, or a map key (`parameters.key`, `segments["topology.example.com/zone"]`).
    Field(String),
    /// `[n]`.
    Index(usize),
}

impl Seg {
    fn describe(&self) -> String {
        match self {
            Seg::Field(name) => format!("field {name:?}"),
            Seg::Index(i) => format!("element [{i}]"),
        }
    }
}

/// A dotted path: `volume.volume_id`, `entries[0].volume`, `segments["a.b/c"]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FieldPath(pub Vec<Seg>);

impl FieldPath {
    /// Parses a path; the empty string is the empty path (the value itself).
    pub fn parse(text: &str) -> Result<FieldPath, String> {
        let mut segs = Vec::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        let bad = |why: &str| format!("invalid path {text:?}: {why}");
        while i < bytes.len() {
            match bytes[i] {
                b'[' => {
                    let close = text[i..].find(']').ok_or_else(|| bad("'[' without ']'"))? + i;
                    let inner = &text[i + 1..close];
                    if let Some(quoted) = inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
                        segs.push(Seg::Field(quoted.to_owned()));
                    } else {
                        let n = inner.parse().map_err(|_| bad(&format!("[{inner}] is not an index")))?;
                        segs.push(Seg::Index(n));
                    }
                    i = close + 1;
                    if i < bytes.len() && bytes[i] == b'.' {
                        i += 1;
                        if i == bytes.len() {
                            return Err(bad("it ends with '.'"));
                        }
                    }
                }
                b'.' => return Err(bad("empty name between dots")),
                _ => {
                    let end = text[i..].find(['.', '[']).map_or(bytes.len(), |e| e + i);
                    let name = &text[i..end];
                    if name.contains(['"', ']', ' ']) {
                        return Err(bad(&format!("{name:?} is not a field name")));
                    }
                    segs.push(Seg::Field(name.to_owned()));
                    i = end;
                    if i < bytes.len() && bytes[i] == b'.' {
                        i += 1;
                        if i == bytes.len() {
                            return Err(bad("it ends with '.'"));
                        }
                    }
                }
            }
        }
        Ok(FieldPath(segs))
    }

    /// The segments.
    pub fn segs(&self) -> &[Seg] {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Index(n) => write!(f, "[{n}]")?,
                Seg::Field(name) if name.contains(['.', '[', ']', '/', ' ']) => write!(f, "[{name:?}]")?,
                Seg::Field(name) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(name)?;
                }
            }
        }
        Ok(())
    }
}

/// A piece of a scalar template.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// `${path}`.
    Var(FieldPath),
}

/// A scalar's template: its pieces. A scalar that is exactly one `${...}` substitutes a typed
/// value; `$${` writes a literal `${`.
#[derive(Debug, Clone, PartialEq)]
pub struct Template(pub Vec<Piece>);

impl Template {
    /// Splits a scalar's text into literal text and variable references.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(at) = rest.find('$') {
            literal.push_str(&rest[..at]);
            let tail = &rest[at..];
            if let Some(after) = tail.strip_prefix("$${") {
                literal.push_str("${");
                rest = after;
            } else if let Some(after) = tail.strip_prefix("${") {
                let close = after.find('}').ok_or_else(|| format!("unclosed \"${{\" in {text:?}"))?;
                let expr = after[..close].trim();
                if expr.is_empty() {
                    return Err(format!("empty \"${{}}\" in {text:?}"));
                }
                let path = FieldPath::parse(expr)?;
                if !matches!(path.0.first(), Some(Seg::Field(_))) {
                    return Err(format!("{expr:?} must start with a variable name"));
                }
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Var(path));
                rest = &after[close + 1..];
            } else {
                literal.push('$');
                rest = &tail[1..];
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Ok(Template(pieces))
    }

    /// The path when the whole scalar is one variable reference.
    pub fn whole(&self) -> Option<&FieldPath> {
        match self.0.as_slice() {
            [Piece::Var(path)] => Some(path),
            _ => None,
        }
    }

    /// Whether the template refers to any variable.
    pub fn has_vars(&self) -> bool {
        self.0.iter().any(|p| matches!(p, Piece::Var(_)))
    }

    /// Every variable reference.
    pub fn vars(&self) -> impl Iterator<Item = &FieldPath> {
        self.0.iter().filter_map(|p| match p {
            Piece::Var(path) => Some(path),
            Piece::Text(_) => None,
        })
    }
}

/// What a scalar node turns into once its variables are known.
#[derive(Debug, Clone, PartialEq)]
pub enum Subst {
    /// No variables: the node as written.
    Literal,
    /// A whole-scalar reference: the typed value.
    Whole(Val),
    /// Interpolated text.
    Text(String),
}

/// A run-time variable scope.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    values: BTreeMap<String, Val>,
}

impl Vars {
    /// An empty scope.
    pub fn new() -> Self {
        Vars::default()
    }

    /// Sets a variable.
    pub fn insert(&mut self, name: impl Into<String>, value: Val) {
        self.values.insert(name.into(), value);
    }

    /// A variable's value.
    pub fn get(&self, name: &str) -> Option<&Val> {
        self.values.get(name)
    }

    /// The names in scope.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// Resolves `${path}`.
    pub fn lookup(&self, path: &FieldPath) -> Result<Val, String> {
        let Some((Seg::Field(name), rest)) = path.0.split_first() else {
            return Err(format!("${{{path}}} must start with a variable name"));
        };
        let root = self.values.get(name).ok_or_else(|| {
            format!(
                "variable {name:?} is not set (the step that saves it did not run){}",
                did_you_mean(name, self.names())
            )
        })?;
        root.get(rest).map_err(|e| format!("${{{path}}}: {e}"))
    }

    /// Substitutes a template.
    pub fn substitute(&self, template: &Template) -> Result<Subst, String> {
        if let Some(path) = template.whole() {
            return Ok(Subst::Whole(self.lookup(path)?));
        }
        if !template.has_vars() {
            return Ok(Subst::Literal);
        }
        let mut out = String::new();
        for piece in &template.0 {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Var(path) => {
                    let value = self.lookup(path)?;
                    let text = value
                        .to_text()
                        .ok_or_else(|| format!("${{{path}}} is {} and cannot be part of a text", value.describe()))?;
                    out.push_str(&text);
                }
            }
        }
        Ok(Subst::Text(out))
    }

    /// A YAML node with every variable substituted, as a value (for `assert` values,
    /// expected values and check arguments).
    pub fn eval(&self, node: &Node) -> Result<Val, (Pos, String)> {
        match &node.kind {
            NodeKind::Seq(items) => items.iter().map(|n| self.eval(n)).collect::<Result<_, _>>().map(Val::List),
            NodeKind::Map(entries) => entries
                .iter()
                .map(|(k, v)| Ok((k.scalar_text().unwrap_or_default().to_owned(), self.eval(v)?)))
                .collect::<Result<_, _>>()
                .map(Val::Map),
            NodeKind::Scalar { text, .. } => {
                let template = Template::parse(text).map_err(|e| (node.pos, e))?;
                match self.substitute(&template).map_err(|e| (node.pos, e))? {
                    Subst::Literal => Ok(Val::from_plain_node(node)),
                    Subst::Whole(v) => Ok(v),
                    Subst::Text(t) => Ok(Val::Str(t)),
                }
            }
        }
    }
}

/// The static type of a variable or a path, known at load time.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// Not known until run time (anything goes).
    Any,
    /// A scalar (no further steps possible).
    Scalar,
    /// A message of this type.
    Message(MessageDescriptor),
    /// A list of these.
    List(Box<Ty>),
    /// A map with string keys and these values.
    Map(Box<Ty>),
    /// A fixed set of named members (built-in records such as `node` and `paths`).
    Record(BTreeMap<&'static str, Ty>),
}

impl Ty {
    /// The type of a field's value (a list or map for repeated and map fields).
    pub fn of_field(field: &FieldDescriptor) -> Ty {
        if field.is_map()
            && let Kind::Message(entry) = field.kind()
        {
            return Ty::Map(Box::new(Ty::of_kind(&entry.map_entry_value_field().kind())));
        }
        let single = Ty::of_kind(&field.kind());
        if field.is_list() { Ty::List(Box::new(single)) } else { single }
    }

    /// The type of one value of a kind; wrappers are scalars.
    pub fn of_kind(kind: &Kind) -> Ty {
        match kind {
            Kind::Message(m) if is_wrapper(m) => Ty::Scalar,
            Kind::Message(m) => Ty::Message(m.clone()),
            _ => Ty::Scalar,
        }
    }

    /// Follows a path; an error says which step is impossible.
    pub fn resolve(&self, path: &[Seg]) -> Result<Ty, String> {
        let mut ty = self.clone();
        for (i, seg) in path.iter().enumerate() {
            let at = || if i == 0 { String::new() } else { format!("{}: ", FieldPath(path[..i].to_vec())) };
            ty = match (&ty, seg) {
                (Ty::Any, _) => Ty::Any,
                (Ty::Message(m), Seg::Field(name)) => {
                    let field =
                        m.get_field_by_name(name).ok_or_else(|| format!("{}{}", at(), unknown_field_text(m, name)))?;
                    Ty::of_field(&field)
                }
                (Ty::Map(v), Seg::Field(_)) | (Ty::List(v), Seg::Index(_)) => (**v).clone(),
                (Ty::Record(members), Seg::Field(name)) => members.get(name.as_str()).cloned().ok_or_else(|| {
                    let hint = did_you_mean(name, members.keys().copied());
                    let all: Vec<&str> = members.keys().copied().collect();
                    format!(
                        "{}no member {name:?}{}",
                        at(),
                        if hint.is_empty() { format!("; it has: {}", all.join(", ")) } else { hint }
                    )
                })?,
                (other, seg) => return Err(format!("{}{} has no {}", at(), other.describe(), seg.describe())),
            };
        }
        Ok(ty)
    }

    fn describe(&self) -> String {
        match self {
            Ty::Any => "a value".into(),
            Ty::Scalar => "a scalar".into(),
            Ty::Message(m) => format!("a {}", m.full_name()),
            Ty::List(_) => "a list".into(),
            Ty::Map(_) => "a map".into(),
            Ty::Record(_) => "a record".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{self, v1};

    #[test]
    fn paths_parse_and_print() {
        let p = FieldPath::parse("entries[0].volume.volume_id").unwrap();
        assert_eq!(
            p.0,
            vec![
                Seg::Field("entries".into()),
                Seg::Index(0),
                Seg::Field("volume".into()),
                Seg::Field("volume_id".into())
            ]
        );
        assert_eq!(p.to_string(), "entries[0].volume.volume_id");
        let q = FieldPath::parse("segments[\"topology.example.com/zone\"]").unwrap();
        assert_eq!(q.0[1], Seg::Field("topology.example.com/zone".into()));
        assert_eq!(q.to_string(), "segments[\"topology.example.com/zone\"]");
        assert!(FieldPath::parse("a..b").is_err());
        assert!(FieldPath::parse("a[x]").is_err());
        assert!(FieldPath::parse("a.").is_err());
    }

    #[test]
    fn templates_split_whole_and_interpolated() {
        let t = Template::parse("${vol.volume_id}").unwrap();
        assert_eq!(t.whole().unwrap().to_string(), "vol.volume_id");
        let t = Template::parse("${name}-clone").unwrap();
        assert!(t.whole().is_none());
        assert_eq!(t.0.len(), 2);
        let t = Template::parse("cost: $5 and $${literal}").unwrap();
        assert_eq!(t.0, vec![Piece::Text("cost: $5 and ${literal}".into())]);
        assert!(Template::parse("${unclosed").is_err());
        assert!(Template::parse("${}").is_err());
    }

    #[test]
    fn substitution_is_typed_for_whole_scalars_and_text_otherwise() {
        let mut vars = Vars::new();
        vars.insert("size", Val::Int(10));
        vars.insert("name", Val::Str("vol".into()));
        let mut params = BTreeMap::new();
        params.insert("iops".to_owned(), Val::Str("3000".into()));
        vars.insert("params", Val::Map(params));
        assert_eq!(vars.substitute(&Template::parse("${size}").unwrap()).unwrap(), Subst::Whole(Val::Int(10)));
        assert_eq!(
            vars.substitute(&Template::parse("${name}-${size}").unwrap()).unwrap(),
            Subst::Text("vol-10".into())
        );
        assert_eq!(vars.lookup(&FieldPath::parse("params.iops").unwrap()).unwrap(), Val::Str("3000".into()));
        assert_eq!(vars.lookup(&FieldPath::parse("params.nope").unwrap()).unwrap(), Val::Null);
        let e = vars.substitute(&Template::parse("x${params}").unwrap()).unwrap_err();
        assert!(e.contains("a map and cannot be part of a text"), "{e}");
        let e = vars.lookup(&FieldPath::parse("nmae").unwrap()).unwrap_err();
        assert!(e.contains("did you mean name?"), "{e}");
    }

    #[test]
    fn message_values_step_into_fields_and_unwrap_wrappers() {
        let resp = v1::ProbeResponse { ready: Some(true) };
        let val = Val::from_message(&proto::to_dynamic(&resp));
        assert_eq!(val.get(&FieldPath::parse("ready").unwrap().0).unwrap(), Val::Bool(true));
        let vol = v1::CreateVolumeResponse {
            volume: Some(v1::Volume { volume_id: "v1".into(), capacity_bytes: 5, ..Default::default() }),
        };
        let val = Val::from_message(&proto::to_dynamic(&vol));
        assert_eq!(val.get(&FieldPath::parse("volume.volume_id").unwrap().0).unwrap(), Val::Str("v1".into()));
        assert_eq!(val.get(&FieldPath::parse("volume.content_source").unwrap().0).unwrap(), Val::Null);
        assert_eq!(val.get(&FieldPath::parse("volume.content_source.snapshot").unwrap().0).unwrap(), Val::Null);
        let e = val.get(&FieldPath::parse("volume.volume_idd").unwrap().0).unwrap_err();
        assert!(e.contains("did you mean volume_id?"), "{e}");
        let e = val.get(&FieldPath::parse("volume.volume_id.x").unwrap().0).unwrap_err();
        assert!(e.contains("a string has no field"), "{e}");
    }

    #[test]
    fn static_types_follow_descriptors() {
        let ty = Ty::Message(proto::message("CreateVolumeResponse").unwrap());
        assert_eq!(ty.resolve(&FieldPath::parse("volume.volume_id").unwrap().0).unwrap(), Ty::Scalar);
        assert!(matches!(
            ty.resolve(&FieldPath::parse("volume.accessible_topology[0].segments.zone").unwrap().0).unwrap(),
            Ty::Scalar
        ));
        let e = ty.resolve(&FieldPath::parse("volume.capacity").unwrap().0).unwrap_err();
        assert!(e.contains("volume: csi.v1.Volume has no field \"capacity\"; did you mean capacity_bytes?"), "{e}");
        let e = ty.resolve(&FieldPath::parse("volume.volume_id.x").unwrap().0).unwrap_err();
        assert!(e.contains("a scalar has no field"), "{e}");
    }
}
