//! Small configuration files a run reads: csi-sanity's flat parameter maps
//! (`--test-volume-parameters`, `--test-volume-mutable-parameters`,
//! `--test-snapshot-parameters`) and the settings file of `run --config` (a map of long flag
//! names to values), with errors that name the file, line and column.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use crate::yaml::{self, Node, Pos};

/// Why a configuration file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: {reason}", file = file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// The I/O error, as text.
        reason: String,
    },
    /// The file is not what it should be.
    #[error("{file}:{pos}: {reason}", file = file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// Where in it.
        pos: Pos,
        /// What is wrong.
        reason: String,
    },
}

/// Loads a flat YAML map of strings (`key: value`), as csi-sanity's parameter files are.
/// Numbers and booleans are taken as their text (`iops: 3000` is `"3000"`); an empty file is
/// an empty map. Anything else (lists, nested maps, null values) is an error at its line.
pub fn load_string_map(file: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let text = std::fs::read_to_string(file).map_err(|e| ConfigError::Io {
        file: file.to_owned(),
        reason: e.to_string(),
    })?;
    parse_string_map(&text, file)
}

/// Parses the text of a flat string map; `file` names it in errors.
pub fn parse_string_map(text: &str, file: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let invalid = |pos: Pos, reason: String| ConfigError::Invalid { file: file.to_owned(), pos, reason };
    let Some(root) = parse_map(text, file)? else { return Ok(BTreeMap::new()) };
    let entries = root.as_map().unwrap_or_default();
    let mut map = BTreeMap::new();
    for (key, value) in entries {
        let name = scalar(key).ok_or_else(|| invalid(key.pos, format!("a key must be text, found {}", key.describe())))?;
        let text = scalar(value).filter(|_| !value.is_null()).ok_or_else(|| {
            invalid(value.pos, format!("the value of {name:?} must be text, found {}", value.describe()))
        })?;
        map.insert(name, text);
    }
    Ok(map)
}

/// Parses a document that must be a mapping; `None` when it is empty.
fn parse_map(text: &str, file: &Path) -> Result<Option<Node>, ConfigError> {
    let invalid = |pos: Pos, reason: String| ConfigError::Invalid { file: file.to_owned(), pos, reason };
    let root = match yaml::parse(text) {
        Ok(Some(root)) if !root.is_null() => root,
        Ok(_) => return Ok(None),
        Err(errors) => {
            let first = &errors[0];
            return Err(invalid(first.pos, first.message.clone()));
        }
    };
    if root.as_map().is_none() {
        return Err(invalid(root.pos, format!("expected a map of names to values, found {}", root.describe())));
    }
    Ok(Some(root))
}

/// The value of one setting of a settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingValue {
    /// `true` or `false`, unquoted.
    Bool(bool),
    /// One value (numbers are taken as their text).
    Text(String),
    /// A list of values, each with its position.
    List(Vec<(String, Pos)>),
}

/// One `key: value` of a settings file, with where each was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The key as written.
    pub key: String,
    /// Where the key is.
    pub key_pos: Pos,
    /// The value.
    pub value: SettingValue,
    /// Where the value is.
    pub pos: Pos,
}

/// Loads a settings file (`run --config FILE`): a YAML map whose values are scalars or lists
/// of scalars. Which keys are allowed is the caller's business; the shapes are checked here.
pub fn load_settings(file: &Path) -> Result<Vec<Setting>, ConfigError> {
    let text = std::fs::read_to_string(file).map_err(|e| ConfigError::Io { file: file.to_owned(), reason: e.to_string() })?;
    parse_settings(&text, file)
}

/// Parses the text of a settings file; `file` names it in errors.
pub fn parse_settings(text: &str, file: &Path) -> Result<Vec<Setting>, ConfigError> {
    let invalid = |pos: Pos, reason: String| ConfigError::Invalid { file: file.to_owned(), pos, reason };
    let Some(root) = parse_map(text, file)? else { return Ok(Vec::new()) };
    let mut settings = Vec::new();
    for (key, node) in root.as_map().unwrap_or_default() {
        let name = key.as_str().ok_or_else(|| invalid(key.pos, format!("a key must be a name, found {}", key.describe())))?;
        let shape_error = |node: &Node| {
            invalid(node.pos, format!("the value of {name:?} must be text, a number, true/false or a list of those, found {}", node.describe()))
        };
        let value = match (node.plain(), node.as_seq()) {
            (Some(yaml::Plain::Bool(b)), _) => SettingValue::Bool(b),
            (Some(yaml::Plain::Null), _) | (None, None) => return Err(shape_error(node)),
            (Some(_), _) => SettingValue::Text(node.scalar_text().unwrap_or_default().to_owned()),
            (None, Some(items)) => SettingValue::List(
                items
                    .iter()
                    .map(|item| match item.plain() {
                        Some(yaml::Plain::Null) | None => Err(shape_error(item)),
                        Some(_) => Ok((item.scalar_text().unwrap_or_default().to_owned(), item.pos)),
                    })
                    .collect::<Result<_, _>>()?,
            ),
        };
        settings.push(Setting { key: name.to_owned(), key_pos: key.pos, value, pos: node.pos });
    }
    Ok(settings)
}

fn scalar(node: &Node) -> Option<String> {
    node.scalar_text().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<BTreeMap<String, String>, String> {
        parse_string_map(text, Path::new("params.yaml")).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_csi_sanity_parameter_files() {
        let map = parse("volBackendFs: \"fs1\"\nclusterId: \"8809226123290901444\"\niops: 3000\n").unwrap();
        assert_eq!(map["volBackendFs"], "fs1");
        assert_eq!(map["clusterId"], "8809226123290901444");
        assert_eq!(map["iops"], "3000");
        assert!(parse("").unwrap().is_empty());
        assert!(parse("# nothing\n").unwrap().is_empty());
    }

    #[test]
    fn errors_name_file_line_and_column() {
        assert_eq!(parse("- a\n- b\n").unwrap_err(), "params.yaml:1:1: expected a map of names to values, found a list");
        assert_eq!(parse("a: 1\nb:\n  c: d\n").unwrap_err(), "params.yaml:3:3: the value of \"b\" must be text, found a mapping");
        assert_eq!(parse("a: 1\nb:\n").unwrap_err().split(": the").next().unwrap(), "params.yaml:2:2");
        assert_eq!(parse("a: 1\na: 2\n").unwrap_err(), "params.yaml:2:1: duplicate key \"a\" (first at line 1)");
        assert!(parse("a: [\n").unwrap_err().starts_with("params.yaml:"));
    }

    #[test]
    fn settings_keep_shapes_and_positions() {
        let file = Path::new("run.yaml");
        let settings = parse_settings("endpoint: /tmp/x.sock\nstrict: true\njobs: 4\nfocus: [a, 'b c']\n", file).unwrap();
        let keys: Vec<_> = settings.iter().map(|s| (s.key.as_str(), s.key_pos.line)).collect();
        assert_eq!(keys, [("endpoint", 1), ("strict", 2), ("jobs", 3), ("focus", 4)]);
        assert_eq!(settings[0].value, SettingValue::Text("/tmp/x.sock".into()));
        assert_eq!(settings[1].value, SettingValue::Bool(true));
        assert_eq!(settings[2].value, SettingValue::Text("4".into()));
        let SettingValue::List(items) = &settings[3].value else { panic!("{:?}", settings[3]) };
        assert_eq!(items.iter().map(|(v, _)| v.as_str()).collect::<Vec<_>>(), ["a", "b c"]);
        let err = |t: &str| parse_settings(t, file).unwrap_err().to_string();
        assert_eq!(err("a: 1\nb: {c: d}\n"), "run.yaml:2:4: the value of \"b\" must be text, a number, true/false or a list of those, found a mapping");
        assert_eq!(err("a:\n"), "run.yaml:1:2: the value of \"a\" must be text, a number, true/false or a list of those, found null");
        assert!(err("- x\n").starts_with("run.yaml:1:1: expected a map"));
        assert!(parse_settings("", file).unwrap().is_empty());
    }
}
