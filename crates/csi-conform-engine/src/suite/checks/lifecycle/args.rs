//! The `lifecycle` check's argument readers: a string, a boolean, a list of strings and a map
//! of strings, each with an error that names the argument.

use std::collections::BTreeMap;

use crate::suite::{catalog::CheckArgs, vars::Val};

pub(super) fn str_arg(args: &CheckArgs, name: &str) -> Option<String> {
    match args.get(name) {
        None | Some(Val::Null) => None,
        Some(v) => v.to_text(),
    }
}

pub(super) fn bool_arg(args: &CheckArgs, name: &str) -> Result<bool, String> {
    match args.get(name) {
        None | Some(Val::Null) => Ok(false),
        Some(Val::Bool(b)) => Ok(*b),
        Some(Val::Str(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(other) => Err(format!("argument {name} must be true or false, not {}", other.describe())),
    }
}

pub(super) fn list_arg(args: &CheckArgs, name: &str) -> Result<Option<Vec<String>>, String> {
    match args.get(name) {
        None | Some(Val::Null) => Ok(None),
        Some(Val::List(items)) => items
            .iter()
            .map(|v| match v {
                Val::List(_) | Val::Map(_) | Val::Message(_) | Val::Null => {
                    Err(format!("argument {name} must be a list of strings, not a list holding {}", v.describe()))
                }
                v => Ok(v.to_text().unwrap_or_default()),
            })
            .collect::<Result<_, _>>()
            .map(Some),
        Some(other) => Err(format!("argument {name} must be a list of strings, not {}", other.describe())),
    }
}

pub(super) fn map_arg(args: &CheckArgs, name: &str) -> Result<BTreeMap<String, String>, String> {
    match args.get(name) {
        None | Some(Val::Null) => Ok(BTreeMap::new()),
        Some(Val::Map(entries)) => entries
            .iter()
            .map(|(k, v)| match v.to_text() {
                Some(t) if !matches!(v, Val::Null) => Ok((k.clone(), t)),
                _ => Err(format!("argument {name}: the value of {k:?} must be a string, not {}", v.describe())),
            })
            .collect(),
        Some(other) => Err(format!("argument {name} must be a mapping of strings, not {}", other.describe())),
    }
}
