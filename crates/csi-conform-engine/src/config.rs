//! Small configuration files a run reads: csi-sanity's flat parameter maps
//! (`--test-volume-parameters`, `--test-volume-mutable-parameters`,
//! `--test-snapshot-parameters`), the bounds of generated capabilities (`--property-bounds`,
//! and a suite's `property` step `bounds:`), and the settings file of `run --config` (a map
//! of long flag names to values, and its `existing-volumes:` list), with errors that name the
//! file, line and column.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

pub use crate::suite::bounds::{BOUNDS_KEYS, BoundsOverride, parse_bounds};
use crate::{
    capability::strategy::Bounds,
    suite::{CAPABILITY_KEYS, ExistingCapability, ExistingVolume, bounds::texts},
    yaml::{self, Node, Plain, Pos},
};

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

/// Reads a configuration file as text: bounded in size, and UTF-8 (an invalid byte is named
/// by line and byte).
fn read(file: &Path) -> Result<String, ConfigError> {
    yaml::read_source(file).map_err(|e| match e {
        yaml::SourceError::Io(io) => ConfigError::Io { file: file.to_owned(), reason: io.to_string() },
        other => ConfigError::Invalid {
            file: file.to_owned(),
            pos: other.pos().unwrap_or(Pos { line: 1, col: 1 }),
            reason: other.to_string(),
        },
    })
}

/// Loads a flat YAML map of strings (`key: value`), as csi-sanity's parameter files are.
/// Numbers and booleans are taken as their text (`iops: 3000` is `"3000"`); an empty file is
/// an empty map. Anything else (lists, nested maps, null values) is an error at its line.
pub fn load_string_map(file: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let text = read(file)?;
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
    let text = read(file)?;
    parse_settings(&text, file)
}

/// Parses the text of a settings file; `file` names it in errors.
pub fn parse_settings(text: &str, file: &Path) -> Result<Vec<Setting>, ConfigError> {
    let invalid = |pos: Pos, reason: String| ConfigError::Invalid { file: file.to_owned(), pos, reason };
    let Some(root) = parse_map(text, file)? else { return Ok(Vec::new()) };
    let mut settings = Vec::new();
    for (key, node) in root.as_map().unwrap_or_default() {
        let name = key.as_str().ok_or_else(|| invalid(key.pos, format!("a key must be a name, found {}", key.describe())))?;
        if name == EXISTING_VOLUMES_KEY {
            // Not a flag: read by [`load_existing_volumes`].
            continue;
        }
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

/// The settings-file key listing existing volumes: a list of maps with `id`, `context` (a
/// map of text) and `capability` (a map of [`CAPABILITY_KEYS`]).
pub const EXISTING_VOLUMES_KEY: &str = "existing-volumes";

/// The keys of one `existing-volumes:` entry.
const EXISTING_KEYS: [&str; 3] = ["id", "context", "capability"];

/// Loads the `existing-volumes:` list of a settings file (none when it has no such key).
pub fn load_existing_volumes(file: &Path) -> Result<Vec<ExistingVolume>, ConfigError> {
    let text = read(file)?;
    parse_existing_volumes(&text, file)
}

/// Parses the `existing-volumes:` list of a settings file's text; `file` names it in errors.
pub fn parse_existing_volumes(text: &str, file: &Path) -> Result<Vec<ExistingVolume>, ConfigError> {
    let invalid = |(pos, reason): (Pos, String)| ConfigError::Invalid { file: file.to_owned(), pos, reason };
    let Some(root) = parse_map(text, file)? else { return Ok(Vec::new()) };
    let Some((_, list)) = root.as_map().unwrap_or_default().iter().find(|(k, _)| k.as_str() == Some(EXISTING_VOLUMES_KEY)) else {
        return Ok(Vec::new());
    };
    let Some(items) = list.as_seq() else {
        return Err(invalid((list.pos, format!("{EXISTING_VOLUMES_KEY} must be a list of maps (id, context, capability), found {}", list.describe()))));
    };
    let mut volumes: Vec<ExistingVolume> = Vec::new();
    for item in items {
        let volume = existing_volume(item, file).map_err(invalid)?;
        if let Some(first) = volumes.iter().find(|v| v.id == volume.id) {
            return Err(invalid((item.pos, format!("volume {:?} is listed twice (first at {})", volume.id, first.origin))));
        }
        volumes.push(volume);
    }
    Ok(volumes)
}

/// One entry of `existing-volumes:`.
fn existing_volume(item: &Node, file: &Path) -> Result<ExistingVolume, (Pos, String)> {
    let Some(entries) = item.as_map() else {
        return Err((item.pos, format!("an existing volume must be a map with id, context and capability, found {}", item.describe())));
    };
    let mut volume = ExistingVolume { origin: format!("{}:{}", file.display(), item.pos), ..ExistingVolume::default() };
    for (key, value) in entries {
        match key.scalar_text().unwrap_or_default() {
            "id" => match value.plain() {
                Some(Plain::Str(_) | Plain::Int(_)) if !value.scalar_text().unwrap_or_default().is_empty() => {
                    volume.id = value.scalar_text().unwrap_or_default().to_owned();
                }
                _ => return Err((value.pos, format!("id must be the volume's id (text), found {}", value.describe()))),
            },
            "context" => {
                let Some(pairs) = value.as_map() else {
                    return Err((value.pos, format!("context must be a map of text (the volume_context), found {}", value.describe())));
                };
                for (k, v) in pairs {
                    let name = scalar(k).ok_or_else(|| (k.pos, format!("a context key must be text, found {}", k.describe())))?;
                    let text = scalar(v).filter(|_| !v.is_null()).ok_or_else(|| {
                        (v.pos, format!("the context value of {name:?} must be text, found {}", v.describe()))
                    })?;
                    volume.context.insert(name, text);
                }
            }
            "capability" => volume.capability = existing_capability(value)?,
            other => {
                let hint = crate::suite::did_you_mean(other, EXISTING_KEYS);
                let hint = if hint.is_empty() { format!("; keys: {}", EXISTING_KEYS.join(", ")) } else { hint };
                return Err((key.pos, format!("unknown key {other:?} in an existing volume{hint}")));
            }
        }
    }
    if volume.id.is_empty() {
        return Err((item.pos, "an existing volume needs an id".to_owned()));
    }
    Ok(volume)
}

/// An existing volume's `capability:` map.
fn existing_capability(node: &Node) -> Result<ExistingCapability, (Pos, String)> {
    let Some(entries) = node.as_map() else {
        return Err((node.pos, format!("capability must be a map of {}, found {}", CAPABILITY_KEYS.join(", "), node.describe())));
    };
    let mut cap = ExistingCapability::default();
    for (key, value) in entries {
        let name = key.scalar_text().unwrap_or_default();
        let values = texts(value, name)?.into_iter().map(|(t, _)| t).collect();
        cap.set(name, values).map_err(|e| (if CAPABILITY_KEYS.contains(&name) { value.pos } else { key.pos }, e))?;
    }
    cap.check().map_err(|e| (node.pos, e))?;
    Ok(cap)
}

fn scalar(node: &Node) -> Option<String> {
    node.scalar_text().map(str::to_owned)
}

/// Loads `--property-bounds FILE`: a bounds mapping applied to the default bounds.
pub fn load_bounds(file: &Path) -> Result<Bounds, ConfigError> {
    let text = read(file)?;
    parse_bounds_text(&text, file)
}

/// Parses the text of a bounds file; `file` names it in errors.
pub fn parse_bounds_text(text: &str, file: &Path) -> Result<Bounds, ConfigError> {
    let invalid = |(pos, reason): (Pos, String)| ConfigError::Invalid { file: file.to_owned(), pos, reason };
    let root = match yaml::parse(text) {
        Ok(Some(root)) if !root.is_null() => root,
        Ok(_) => return Ok(Bounds::default()),
        Err(errors) => return Err(invalid((errors[0].pos, errors[0].message.clone()))),
    };
    let bounds = parse_bounds(&root).map_err(invalid)?.apply(&Bounds::default());
    bounds.validate().map_err(|e| invalid((root.pos, e.to_string())))?;
    Ok(bounds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::AccessMode;

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
    fn bounds_files_replace_only_the_keys_they_give() {
        let file = Path::new("bounds.yaml");
        let b = parse_bounds_text("access_types: [mount]\nfs_types: [ext4]\nmax_capabilities: 2\n", file).unwrap();
        assert!(b.mount && !b.block);
        assert_eq!(b.fs_types, ["ext4"]);
        assert_eq!(b.max_capabilities, 2);
        assert_eq!(b.mount_flags, Bounds::default().mount_flags, "kept from the defaults");
        assert_eq!(parse_bounds_text("", file).unwrap(), Bounds::default());
        let e = |t: &str| parse_bounds_text(t, file).unwrap_err().to_string();
        assert_eq!(e("access_types: [mount, tape]\n"), "bounds.yaml:1:23: access_types: unknown access type \"tape\"; expected mount or block");
        assert_eq!(e("fs_type: [ext4]\n"), "bounds.yaml:1:1: unknown key \"fs_type\" in bounds; did you mean fs_types?");
        assert!(e("access_modes: [WRITER]\n").contains("unknown access mode \"WRITER\""));
        assert_eq!(e("max_capabilities: 0\n"), "bounds.yaml:1:19: max_capabilities must be a whole number from 1 to 16");
        assert_eq!(e("mount_flags: {a: b}\n"), "bounds.yaml:1:14: mount_flags must be a list of text values, found a mapping");
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
    fn existing_volumes_are_read_with_positions() {
        let file = Path::new("run.yaml");
        let text = "endpoint: /x.sock\nexisting-volumes:\n  - id: pv-1\n    context: { path: /srv/data }\n  - id: pv-2\n    capability: { access: block, mode: MULTI_NODE_MULTI_WRITER }\n";
        assert_eq!(parse_settings(text, file).unwrap().len(), 1, "existing-volumes is not a flag");
        let volumes = parse_existing_volumes(text, file).unwrap();
        assert_eq!(volumes.len(), 2);
        assert_eq!((volumes[0].id.as_str(), volumes[0].origin.as_str()), ("pv-1", "run.yaml:3:5"));
        assert_eq!(volumes[0].context["path"], "/srv/data");
        assert_eq!(volumes[1].capability.block, Some(true));
        assert_eq!(volumes[1].capability.mode, Some(AccessMode::MultiNodeMultiWriter));
        let err = |t: &str| parse_existing_volumes(t, file).unwrap_err().to_string();
        assert_eq!(err("existing-volumes: pv-1\n"), "run.yaml:1:19: existing-volumes must be a list of maps (id, context, capability), found a string");
        assert_eq!(err("existing-volumes:\n  - context: {a: b}\n"), "run.yaml:2:5: an existing volume needs an id");
        assert_eq!(err("existing-volumes:\n  - id: a\n    contxt: {}\n"), "run.yaml:3:5: unknown key \"contxt\" in an existing volume; did you mean context?");
        assert_eq!(err("existing-volumes:\n  - id: a\n    context: {size: [1]}\n"), "run.yaml:3:21: the context value of \"size\" must be text, found a list");
        assert_eq!(
            err("existing-volumes:\n  - id: a\n    capability: {mode: WRITER}\n").split(';').next().unwrap(),
            "run.yaml:3:24: unknown access mode \"WRITER\""
        );
        assert_eq!(err("existing-volumes:\n  - id: a\n  - id: a\n"), "run.yaml:3:5: volume \"a\" is listed twice (first at run.yaml:2:5)");
        assert!(parse_existing_volumes("strict: true\n", file).unwrap().is_empty());
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
