//! Small configuration files a run reads: csi-sanity's flat parameter maps
//! (`--test-volume-parameters`, `--test-volume-mutable-parameters`,
//! `--test-snapshot-parameters`), with errors that name the file, line and column.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use crate::yaml::{self, Node, Pos};

/// Why a configuration file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read: {reason}", file = file.display())]
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
    let root = match yaml::parse(text) {
        Ok(Some(root)) => root,
        Ok(None) => return Ok(BTreeMap::new()),
        Err(errors) => {
            let first = &errors[0];
            return Err(invalid(first.pos, first.message.clone()));
        }
    };
    if root.is_null() {
        return Ok(BTreeMap::new());
    }
    let Some(entries) = root.as_map() else {
        return Err(invalid(root.pos, format!("expected a map of names to values, found {}", root.describe())));
    };
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
}
