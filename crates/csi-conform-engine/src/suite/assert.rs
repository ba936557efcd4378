//! Evaluating assertions (`expect.fields`, `assert`, `poll.until`, `each`) against values, and
//! the value comparison they share with the idempotency check: messages field by field,
//! numbers by value (whatever their written form), enums by name or number.

use std::cmp::Ordering;

use prost_reflect::ReflectMessage;

use crate::yaml::Node;
use super::{
    model::{Assertion, Cmp, Subject, Test},
    request,
    vars::{FieldPath, Val, Vars},
};

/// Why an assertion did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssertError {
    /// The plugin's value does not satisfy it.
    Failed(String),
    /// It could not be evaluated (a variable of the wrong type, an impossible path): a
    /// problem of the suite, reported as an error.
    Invalid(String),
}

impl AssertError {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            AssertError::Failed(m) | AssertError::Invalid(m) => m,
        }
    }
}

/// Checks every assertion against `root` (the response, or a list element); the first
/// failure is returned.
pub fn check_all(assertions: &[Assertion], root: &Val, vars: &Vars) -> Result<(), AssertError> {
    assertions.iter().try_for_each(|a| check(a, root, vars, ""))
}

fn check(assertion: &Assertion, root: &Val, vars: &Vars, prefix: &str) -> Result<(), AssertError> {
    let (label, actual) = match &assertion.subject {
        Subject::Path(path) => {
            let actual = root.get(path.segs()).map_err(AssertError::Invalid)?;
            (join_label(prefix, path), actual)
        }
        Subject::Value(node) => {
            let actual = eval(vars, node)?;
            (node.scalar_text().map_or_else(|| actual.to_string(), str::to_owned), actual)
        }
    };
    for test in &assertion.tests {
        run_test(test, &label, &actual, assertion.or_zero, vars)?;
    }
    Ok(())
}

fn join_label(prefix: &str, path: &FieldPath) -> String {
    let p = path.to_string();
    match (prefix.is_empty(), p.is_empty()) {
        (true, _) => p,
        (false, true) => prefix.to_owned(),
        (false, false) if p.starts_with('[') => format!("{prefix}{p}"),
        (false, false) => format!("{prefix}.{p}"),
    }
}

fn eval(vars: &Vars, node: &Node) -> Result<Val, AssertError> {
    vars.eval(node).map_err(|(pos, e)| AssertError::Invalid(format!("line {}: {e}", pos.line)))
}

fn run_test(test: &Test, label: &str, actual: &Val, or_zero: bool, vars: &Vars) -> Result<(), AssertError> {
    let fail = |m: String| Err(AssertError::Failed(m));
    match test {
        Test::Equals { value, negated } => {
            let expected = eval(vars, value)?;
            let equal = values_equal(actual, &expected);
            match (equal, negated) {
                (true, false) | (false, true) => Ok(()),
                (false, false) => fail(format!("{label} is {actual}, expected {expected}")),
                (true, true) => fail(format!("{label} is {actual}, expected anything else")),
            }
        }
        Test::NonEmpty if actual.is_empty() => {
            fail(format!("{label} is {}, expected a non-empty value", empty_word(actual)))
        }
        Test::Absent if !actual.is_empty() => fail(format!("{label} is {actual}, expected it absent or empty")),
        Test::NonEmpty | Test::Absent => Ok(()),
        Test::Compare { op, bound } => {
            let bound = eval(vars, bound)?;
            let b = number(&bound).ok_or_else(|| AssertError::Invalid(format!("the bound {bound} is not a number")))?;
            let Some(a) = number(actual) else {
                return fail(format!("{label} is {actual}, expected a number {} {bound}", op.symbol()));
            };
            if op.holds(a.partial_cmp(&b).unwrap_or(Ordering::Less)) || (or_zero && a == 0.0) {
                Ok(())
            } else {
                let zero = if or_zero { " (or 0)" } else { "" };
                fail(format!("{label} is {actual}, expected {} {bound}{zero}", op.symbol()))
            }
        }
        Test::Matches(re) => match actual.to_text().filter(|_| !matches!(actual, Val::Null)) {
            Some(text) if re.is_match(&text) => Ok(()),
            _ => fail(format!("{label} is {actual}, expected a match of /{}/", re.as_str())),
        },
        Test::Length { op, bound } => {
            let bound = eval(vars, bound)?;
            let b =
                number(&bound).ok_or_else(|| AssertError::Invalid(format!("the length {bound} is not a number")))?;
            let Some(len) = length(actual) else {
                return fail(format!("{label} is {}, which has no length", actual.describe()));
            };
            if op.holds((len as f64).partial_cmp(&b).unwrap_or(Ordering::Less)) {
                Ok(())
            } else {
                let op = if *op == Cmp::Eq { "" } else { op.symbol() };
                fail(format!("{label} has length {len}, expected {op}{bound}"))
            }
        }
        Test::Contains { value: x, negated } => {
            let x = eval(vars, x)?;
            let found = match actual {
                Val::List(items) => items.iter().any(|i| values_equal(i, &x)),
                Val::Map(entries) => x.to_text().is_some_and(|k| entries.contains_key(&k)),
                other => match (other.to_text(), x.to_text()) {
                    (Some(hay), Some(needle)) => hay.contains(&needle),
                    _ => false,
                },
            };
            match (found, negated) {
                (true, false) | (false, true) => Ok(()),
                (false, false) => fail(format!("{label} is {actual}, expected it to contain {x}")),
                (true, true) => fail(format!("{label} is {actual}, expected it not to contain {x}")),
            }
        }
        Test::OneOf(options) => {
            let options: Vec<Val> = options.iter().map(|o| eval(vars, o)).collect::<Result<_, _>>()?;
            if options.iter().any(|o| values_equal(actual, o)) {
                Ok(())
            } else {
                fail(format!("{label} is {actual}, expected one of {}", Val::List(options)))
            }
        }
        Test::OneOfList(list) => match eval(vars, list)? {
            Val::List(options) if options.iter().any(|o| values_equal(actual, o)) => Ok(()),
            Val::List(options) => fail(format!("{label} is {actual}, expected one of {}", Val::List(options))),
            other => Err(AssertError::Invalid(format!("one_of needs a list, and the variable holds {}", other.describe()))),
        },
        Test::Each(nested) => match actual {
            Val::Null => Ok(()),
            Val::List(items) => items.iter().enumerate().try_for_each(|(i, item)| {
                let prefix = format!("{label}[{i}]");
                nested.iter().try_for_each(|a| check(a, item, vars, &prefix))
            }),
            other => fail(format!("{label} is {}, expected a list", other.describe())),
        },
    }
}

fn empty_word(v: &Val) -> &'static str {
    match v {
        Val::Null => "absent",
        Val::Str(_) | Val::Bytes(_) => "empty",
        Val::List(_) => "an empty list",
        Val::Map(_) => "an empty map",
        _ => "the default (zero)",
    }
}

fn number(v: &Val) -> Option<f64> {
    match v {
        Val::Int(i) => Some(*i as f64),
        Val::Float(f) => Some(*f),
        Val::Str(s) => s.trim().parse().ok(),
        Val::Enum(_, n) => Some((*n).into()),
        _ => None,
    }
}

fn length(v: &Val) -> Option<usize> {
    match v {
        Val::Null => Some(0),
        Val::Str(s) => Some(s.chars().count()),
        Val::Bytes(b) => Some(b.len()),
        Val::List(items) => Some(items.len()),
        Val::Map(entries) => Some(entries.len()),
        _ => None,
    }
}

/// Whether two values are equal in the assertion sense.
pub fn values_equal(a: &Val, b: &Val) -> bool {
    difference(a, b).is_none()
}

/// The first place where two values differ: its path and the two values there.
pub fn difference(a: &Val, b: &Val) -> Option<(String, Val, Val)> {
    let mut path = Vec::new();
    diff_at(a, b, &mut path).map(|(x, y)| (path.join(""), x, y))
}

fn diff_at(a: &Val, b: &Val, path: &mut Vec<String>) -> Option<(Val, Val)> {
    let whole = || Some((a.clone(), b.clone()));
    match (a, b) {
        (Val::Message(x), Val::Message(y)) => {
            let desc = x.descriptor();
            if desc.full_name() != y.descriptor().full_name() {
                return whole();
            }
            for field in desc.fields() {
                let (fx, fy) = (Val::from_field(x, &field), Val::from_field(y, &field));
                path.push(if path.is_empty() { field.name().to_owned() } else { format!(".{}", field.name()) });
                if let Some(d) = diff_at(&fx, &fy, path) {
                    return Some(d);
                }
                path.pop();
            }
            None
        }
        (Val::Message(m), Val::Map(_)) | (Val::Map(_), Val::Message(m)) => {
            let other = if matches!(a, Val::Map(_)) { a } else { b };
            match request::message_from_val(&m.descriptor(), other) {
                Ok(converted) => {
                    let converted = Val::Message(converted);
                    let (x, y) = if matches!(a, Val::Map(_)) { (&converted, b) } else { (a, &converted) };
                    diff_at(x, y, path)
                }
                Err(_) => whole(),
            }
        }
        (Val::List(x), Val::List(y)) => {
            if x.len() != y.len() {
                return whole();
            }
            for (i, (ex, ey)) in x.iter().zip(y).enumerate() {
                path.push(format!("[{i}]"));
                if let Some(d) = diff_at(ex, ey, path) {
                    return Some(d);
                }
                path.pop();
            }
            None
        }
        (Val::Map(x), Val::Map(y)) => {
            if x.keys().ne(y.keys()) {
                return whole();
            }
            for (k, ex) in x {
                path.push(if path.is_empty() { k.clone() } else { format!(".{k}") });
                if let Some(d) = diff_at(ex, &y[k], path) {
                    return Some(d);
                }
                path.pop();
            }
            None
        }
        _ if scalars_equal(a, b) => None,
        _ => whole(),
    }
}

fn scalars_equal(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Null, Val::Null) => true,
        (Val::Enum(e1, n1), Val::Enum(e2, n2)) => e1.full_name() == e2.full_name() && n1 == n2,
        (Val::Enum(..), Val::Str(s)) | (Val::Str(s), Val::Enum(..)) => {
            let e = if matches!(a, Val::Enum(..)) { a } else { b };
            e.enum_name().as_deref() == Some(s.as_str())
        }
        (Val::Enum(_, n), Val::Int(i)) | (Val::Int(i), Val::Enum(_, n)) => i128::from(*n) == *i,
        (Val::Str(x), Val::Str(y)) => x == y,
        (Val::Bytes(x), Val::Bytes(y)) => x == y,
        (Val::Bytes(x), Val::Str(y)) | (Val::Str(y), Val::Bytes(x)) => x.as_slice() == y.as_bytes(),
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Bool(x), Val::Str(y)) | (Val::Str(y), Val::Bool(x)) => y == if *x { "true" } else { "false" },
        (Val::Int(x), Val::Int(y)) => x == y,
        (Val::Int(_) | Val::Float(_) | Val::Str(_), Val::Int(_) | Val::Float(_) | Val::Str(_)) => {
            matches!((number(a), number(b)), (Some(x), Some(y)) if x == y)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::{
        proto::{self, v1},
        suite::model::Assertion,
        yaml,
    };

    fn node(text: &str) -> Node {
        yaml::parse(text).unwrap().unwrap()
    }

    fn path_assertion(path: &str, tests: Vec<Test>, or_zero: bool) -> Assertion {
        Assertion { subject: Subject::Path(FieldPath::parse(path).unwrap()), tests, or_zero, pos: Default::default() }
    }

    fn response() -> Val {
        let resp = v1::CreateVolumeResponse {
            volume: Some(v1::Volume {
                volume_id: "vol-1".into(),
                capacity_bytes: 0,
                volume_context: [("a".to_owned(), "b".to_owned())].into(),
                accessible_topology: vec![v1::Topology { segments: [("zone".to_owned(), "z1".to_owned())].into() }],
                ..Default::default()
            }),
        };
        Val::from_message(&proto::to_dynamic(&resp))
    }

    fn run(path: &str, tests: Vec<Test>, or_zero: bool) -> Result<(), AssertError> {
        let mut vars = Vars::new();
        vars.insert("size", Val::Int(10));
        check_all(&[path_assertion(path, tests, or_zero)], &response(), &vars)
    }

    #[test]
    fn one_of_a_list_variable() {
        let mut vars = Vars::new();
        vars.insert("ids", Val::List(vec![Val::Str("vol-0".into()), Val::Str("vol-1".into())]));
        vars.insert("other", Val::List(vec![Val::Str("vol-2".into())]));
        let one_of = |var: &str| path_assertion("volume.volume_id", vec![Test::OneOfList(node(&format!("\"${{{var}}}\"")))], false);
        assert!(check_all(&[one_of("ids")], &response(), &vars).is_ok());
        let e = check_all(&[one_of("other")], &response(), &vars).unwrap_err();
        assert_eq!(e, AssertError::Failed("volume.volume_id is \"vol-1\", expected one of [\"vol-2\"]".into()));
    }

    #[test]
    fn equality_numbers_strings_and_negation() {
        assert!(run("volume.volume_id", vec![Test::Equals { value: node("vol-1"), negated: false }], false).is_ok());
        let e =
            run("volume.volume_id", vec![Test::Equals { value: node("vol-2"), negated: false }], false).unwrap_err();
        assert_eq!(e, AssertError::Failed("volume.volume_id is \"vol-1\", expected \"vol-2\"".into()));
        assert!(run("volume.capacity_bytes", vec![Test::Equals { value: node("'0'"), negated: false }], false).is_ok());
        assert!(run("volume.volume_id", vec![Test::Equals { value: node("x"), negated: true }], false).is_ok());
    }

    #[test]
    fn comparisons_honour_or_zero_and_variables() {
        let ge = || vec![Test::Compare { op: Cmp::Ge, bound: node("\"${size}\"") }];
        assert!(run("volume.capacity_bytes", ge(), true).is_ok());
        let e = run("volume.capacity_bytes", ge(), false).unwrap_err();
        assert_eq!(e.message(), "volume.capacity_bytes is 0, expected >= 10");
    }

    #[test]
    fn presence_length_contains_matches_one_of_each() {
        assert!(run("volume.volume_id", vec![Test::NonEmpty], false).is_ok());
        assert!(run("volume.content_source", vec![Test::Absent], false).is_ok());
        let e = run("volume.content_source", vec![Test::NonEmpty], false).unwrap_err();
        assert_eq!(e.message(), "volume.content_source is absent, expected a non-empty value");
        assert!(run("volume.volume_context", vec![Test::Length { op: Cmp::Eq, bound: node("1") }], false).is_ok());
        assert!(run("volume.volume_context", vec![Test::Contains { value: node("a"), negated: false }], false).is_ok());
        let e =
            run("volume.volume_id", vec![Test::Contains { value: node("'-1'"), negated: true }], false).unwrap_err();
        assert_eq!(e.message(), "volume.volume_id is \"vol-1\", expected it not to contain \"-1\"");
        assert!(run("volume.volume_id", vec![Test::Matches(regex::Regex::new("^vol-").unwrap())], false).is_ok());
        assert!(run("volume.volume_id", vec![Test::OneOf(vec![node("x"), node("vol-1")])], false).is_ok());
        let inner = path_assertion("segments.zone", vec![Test::Equals { value: node("z2"), negated: false }], false);
        let e = run("volume.accessible_topology", vec![Test::Each(vec![inner])], false).unwrap_err();
        assert_eq!(e.message(), "volume.accessible_topology[0].segments.zone is \"z1\", expected \"z2\"");
        assert!(matches!(run("volume.nope", vec![Test::NonEmpty], false), Err(AssertError::Invalid(_))));
    }

    #[test]
    fn messages_compare_field_by_field_and_with_mappings() {
        let vol = response().get(&FieldPath::parse("volume").unwrap().0).unwrap();
        let mapping = Val::from_plain_node(&node(
            "{volume_id: vol-1, volume_context: {a: b}, accessible_topology: [{segments: {zone: z1}}]}",
        ));
        assert!(values_equal(&vol, &mapping));
        let other = Val::from_plain_node(&node("{volume_id: vol-2}"));
        let (path, x, y) = difference(&vol, &other).unwrap();
        assert_eq!((path.as_str(), x, y), ("volume_id", Val::Str("vol-1".into()), Val::Str("vol-2".into())));
        let a = response();
        let changed = v1::CreateVolumeResponse {
            volume: Some(v1::Volume { volume_id: "vol-1".into(), capacity_bytes: 7, ..Default::default() }),
        };
        let b = Val::from_message(&proto::to_dynamic(&changed));
        let (path, _, _) = difference(&a, &b).unwrap();
        assert_eq!(path, "volume.capacity_bytes");
        let enum_val = Val::Enum(proto::pool().get_enum_by_name("csi.v1.VolumeCapability.AccessMode.Mode").unwrap(), 1);
        assert!(values_equal(&enum_val, &Val::Str("SINGLE_NODE_WRITER".into())));
        assert!(values_equal(&Val::Map(BTreeMap::new()), &Val::Map(BTreeMap::new())));
    }
}
