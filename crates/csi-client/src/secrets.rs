//! The secrets file: csi-sanity's YAML format, one map per RPC kind.
//!
//! The file has the same top-level keys as csi-sanity's `--csi.secrets` file
//! (`CreateVolumeSecret`, `NodePublishVolumeSecret`, ...), each holding a string map. Unlike
//! csi-sanity, an unknown top-level key is an error (with a "did you mean" for near misses),
//! because a typo there silently turns an authenticated test run into an unauthenticated one.
//! Values never appear in `Debug` output or error messages.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::yaml;

/// The top-level keys of a secrets file, one per kind of RPC that carries secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SecretKey {
    /// `CreateVolumeSecret`
    CreateVolume,
    /// `DeleteVolumeSecret`
    DeleteVolume,
    /// `ControllerPublishVolumeSecret`
    ControllerPublishVolume,
    /// `ControllerUnpublishVolumeSecret`
    ControllerUnpublishVolume,
    /// `ControllerValidateVolumeCapabilitiesSecret`
    ControllerValidateVolumeCapabilities,
    /// `NodeStageVolumeSecret`
    NodeStageVolume,
    /// `NodePublishVolumeSecret`
    NodePublishVolume,
    /// `CreateSnapshotSecret`
    CreateSnapshot,
    /// `DeleteSnapshotSecret`
    DeleteSnapshot,
    /// `ControllerExpandVolumeSecret`
    ControllerExpandVolume,
    /// `ControllerModifyVolumeSecret`
    ControllerModifyVolume,
    /// `ListSnapshotsSecret`
    ListSnapshots,
    /// `GetSnapshotSecret`
    GetSnapshot,
}

impl SecretKey {
    /// Every key, in csi-sanity's order.
    pub const ALL: [SecretKey; 13] = [
        SecretKey::CreateVolume,
        SecretKey::DeleteVolume,
        SecretKey::ControllerPublishVolume,
        SecretKey::ControllerUnpublishVolume,
        SecretKey::ControllerValidateVolumeCapabilities,
        SecretKey::NodeStageVolume,
        SecretKey::NodePublishVolume,
        SecretKey::CreateSnapshot,
        SecretKey::DeleteSnapshot,
        SecretKey::ControllerExpandVolume,
        SecretKey::ControllerModifyVolume,
        SecretKey::ListSnapshots,
        SecretKey::GetSnapshot,
    ];

    /// The key as written in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKey::CreateVolume => "CreateVolumeSecret",
            SecretKey::DeleteVolume => "DeleteVolumeSecret",
            SecretKey::ControllerPublishVolume => "ControllerPublishVolumeSecret",
            SecretKey::ControllerUnpublishVolume => "ControllerUnpublishVolumeSecret",
            SecretKey::ControllerValidateVolumeCapabilities => {
                "ControllerValidateVolumeCapabilitiesSecret"
            }
            SecretKey::NodeStageVolume => "NodeStageVolumeSecret",
            SecretKey::NodePublishVolume => "NodePublishVolumeSecret",
            SecretKey::CreateSnapshot => "CreateSnapshotSecret",
            SecretKey::DeleteSnapshot => "DeleteSnapshotSecret",
            SecretKey::ControllerExpandVolume => "ControllerExpandVolumeSecret",
            SecretKey::ControllerModifyVolume => "ControllerModifyVolumeSecret",
            SecretKey::ListSnapshots => "ListSnapshotsSecret",
            SecretKey::GetSnapshot => "GetSnapshotSecret",
        }
    }

    /// The key spelled exactly `name`, if any.
    pub fn from_name(name: &str) -> Option<SecretKey> {
        SecretKey::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Which key's map an RPC (by method name, e.g. `"CreateVolume"`) must carry, following
    /// csi-sanity's mapping. `None` for RPCs whose secrets csi-sanity never fills
    /// (`NodeExpandVolume`, the snapshot-metadata RPCs) and for RPCs without secrets.
    pub fn for_rpc(rpc: &str) -> Option<SecretKey> {
        Some(match rpc {
            "CreateVolume" => SecretKey::CreateVolume,
            "DeleteVolume" => SecretKey::DeleteVolume,
            "ControllerPublishVolume" => SecretKey::ControllerPublishVolume,
            "ControllerUnpublishVolume" => SecretKey::ControllerUnpublishVolume,
            "ValidateVolumeCapabilities" => SecretKey::ControllerValidateVolumeCapabilities,
            "NodeStageVolume" => SecretKey::NodeStageVolume,
            "NodePublishVolume" => SecretKey::NodePublishVolume,
            "CreateSnapshot" | "CreateVolumeGroupSnapshot" => SecretKey::CreateSnapshot,
            "DeleteSnapshot" | "DeleteVolumeGroupSnapshot" => SecretKey::DeleteSnapshot,
            "ControllerExpandVolume" => SecretKey::ControllerExpandVolume,
            "ControllerModifyVolume" => SecretKey::ControllerModifyVolume,
            "ListSnapshots" | "GetVolumeGroupSnapshot" => SecretKey::ListSnapshots,
            "GetSnapshot" => SecretKey::GetSnapshot,
            _ => return None,
        })
    }
}

impl fmt::Display for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The secrets key `secrets: auto` uses for an RPC: csi-sanity's (see
/// [`SecretKey::for_rpc`]), or `<Rpc>Secret` for RPCs
/// csi-sanity has no key for (NodeExpandVolume, the SnapshotMetadata RPCs...).
pub fn secret_key(rpc: &str) -> String {
    SecretKey::for_rpc(rpc).map_or_else(|| format!("{rpc}Secret"), |k| k.as_str().to_owned())
}

/// Why a secrets file could not be loaded. Messages name files, lines and keys, never values.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// The file could not be read.
    #[error("{file}: cannot read the secrets file: {source}")]
    Io {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The YAML does not parse.
    #[error("{file}:{line}:{column}: invalid YAML: {reason}")]
    Yaml {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's complaint (it quotes no values).
        reason: String,
    },
    /// The document is not a map of the known keys.
    #[error("{file}:{line}: {reason}")]
    Shape {
        /// The file.
        file: PathBuf,
        /// 1-based line of the offending key (1 when unknown).
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// The secrets of a csi-sanity style secrets file.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    maps: BTreeMap<SecretKey, BTreeMap<String, String>>,
}

impl fmt::Debug for Secrets {
    /// Shows which keys and secret names are configured, never the values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (key, secrets) in &self.maps {
            map.entry(&key.as_str(), &secrets.keys().collect::<Vec<_>>());
        }
        map.finish()
    }
}

/// What is wrong with the secrets an RPC carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretsMismatch {
    /// The RPC carried no secrets although `key` is configured.
    Missing {
        /// The key whose map was expected.
        key: SecretKey,
    },
    /// The RPC carried secrets that differ from the configured map.
    Different {
        /// The key whose map was expected.
        key: SecretKey,
        /// Secret names that were expected but not given.
        missing: Vec<String>,
        /// Secret names that were given but not expected.
        unexpected: Vec<String>,
        /// Secret names given with a wrong value.
        wrong_value: Vec<String>,
    },
}

impl fmt::Display for SecretsMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretsMismatch::Missing { key } => write!(f, "requires secrets from {key}"),
            SecretsMismatch::Different {
                key,
                missing,
                unexpected,
                wrong_value,
            } => {
                write!(f, "secrets do not match {key}")?;
                let mut parts = Vec::new();
                if !missing.is_empty() {
                    parts.push(format!("missing {}", missing.join(", ")));
                }
                if !unexpected.is_empty() {
                    parts.push(format!("unexpected {}", unexpected.join(", ")));
                }
                if !wrong_value.is_empty() {
                    parts.push(format!("wrong value for {}", wrong_value.join(", ")));
                }
                if !parts.is_empty() {
                    write!(f, " ({})", parts.join("; "))?;
                }
                Ok(())
            }
        }
    }
}

impl Secrets {
    /// Loads and validates a secrets file (at most [`yaml::MAX_SOURCE_BYTES`], UTF-8: an
    /// invalid byte is named by line and byte).
    pub fn load(file: &Path) -> Result<Secrets, SecretsError> {
        let text = yaml::read_source(file).map_err(|e| match e {
            yaml::SourceError::Io(source) => SecretsError::Io { file: file.to_path_buf(), source },
            other => {
                let pos = other.pos().unwrap_or(yaml::Pos { line: 1, col: 1 });
                SecretsError::Yaml { file: file.to_path_buf(), line: pos.line, column: pos.col, reason: other.to_string() }
            }
        })?;
        Secrets::parse(&text, file)
    }

    /// Parses secrets-file text; `file` is only used in error messages. Nesting and size are
    /// bounded while parsing ([`yaml`]), so hostile input is refused in linear time.
    pub fn parse(text: &str, file: &Path) -> Result<Secrets, SecretsError> {
        let root = yaml::parse(text).map_err(|errors| {
            let first = errors.into_iter().next().unwrap_or(yaml::SyntaxError { pos: yaml::Pos::default(), message: String::new() });
            SecretsError::Yaml {
                file: file.to_path_buf(),
                line: first.pos.line.max(1),
                column: first.pos.col.max(1),
                reason: first.message.strip_prefix("invalid YAML: ").unwrap_or(&first.message).to_owned(),
            }
        })?;
        let shape = |line: usize, reason: String| SecretsError::Shape {
            file: file.to_path_buf(),
            line,
            reason,
        };
        let top = match root.as_ref().map(|r| (r, r.as_map())) {
            None => return Ok(Secrets::default()),
            Some((r, _)) if r.is_null() => return Ok(Secrets::default()),
            Some((_, Some(entries))) => entries,
            Some((r, None)) => {
                return Err(shape(r.pos.line, "the document must be a map of secret kinds".into()));
            }
        };
        let mut maps = BTreeMap::new();
        for (k, v) in top {
            let name = k.scalar_text().unwrap_or("<non-scalar key>").to_owned();
            let line = k.pos.line;
            let Some(key) = SecretKey::from_name(&name) else {
                let mut reason = format!("unknown key {name:?}");
                if let Some(near) = did_you_mean(&name) {
                    reason.push_str(&format!(" (did you mean {near:?}?)"));
                }
                reason.push_str(&format!(
                    "; valid keys: {}",
                    SecretKey::ALL.map(SecretKey::as_str).join(", ")
                ));
                return Err(shape(line, reason));
            };
            let entries = if v.is_null() {
                BTreeMap::new()
            } else if let Some(m) = v.as_map() {
                let mut entries = BTreeMap::new();
                for (sk, sv) in m {
                    let sname = scalar_text(sk)
                        .ok_or_else(|| shape(sk.pos.line, format!("{name}: secret names must be strings")))?;
                    let svalue = scalar_text(sv).ok_or_else(|| {
                        shape(sv.pos.line, format!("{name}: the value of {sname:?} must be a string"))
                    })?;
                    entries.insert(sname, svalue);
                }
                entries
            } else {
                return Err(shape(line, format!("{name} must be a map of secret names to values")));
            };
            maps.insert(key, entries);
        }
        Ok(Secrets { maps })
    }

    /// Builds secrets directly (tests, programmatic use).
    pub fn from_maps(
        maps: impl IntoIterator<Item = (SecretKey, BTreeMap<String, String>)>,
    ) -> Secrets {
        Secrets {
            maps: maps.into_iter().collect(),
        }
    }

    /// The map configured for `key`, if the file has that key.
    pub fn get(&self, key: SecretKey) -> Option<&BTreeMap<String, String>> {
        self.maps.get(&key)
    }

    /// The secrets an RPC should carry (empty when none are configured), ready for a request.
    pub fn for_rpc(&self, rpc: &str) -> HashMap<String, String> {
        SecretKey::for_rpc(rpc)
            .and_then(|k| self.get(k))
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// The keys present in the file.
    pub fn keys(&self) -> impl Iterator<Item = SecretKey> + '_ {
        self.maps.keys().copied()
    }

    /// Checks the secrets an RPC carried against the configured map for its key. RPCs whose
    /// key the file does not configure (or configures empty) accept anything.
    pub fn check(&self, rpc: &str, given: &HashMap<String, String>) -> Result<(), SecretsMismatch> {
        let Some(key) = SecretKey::for_rpc(rpc) else {
            return Ok(());
        };
        let Some(expected) = self.get(key).filter(|m| !m.is_empty()) else {
            return Ok(());
        };
        if given.is_empty() {
            return Err(SecretsMismatch::Missing { key });
        }
        let mut missing: Vec<String> = expected
            .keys()
            .filter(|k| !given.contains_key(*k))
            .cloned()
            .collect();
        let mut unexpected: Vec<String> = given
            .keys()
            .filter(|k| !expected.contains_key(*k))
            .cloned()
            .collect();
        let mut wrong_value: Vec<String> = expected
            .iter()
            .filter(|(k, v)| given.get(*k).is_some_and(|g| g != *v))
            .map(|(k, _)| k.clone())
            .collect();
        if missing.is_empty() && unexpected.is_empty() && wrong_value.is_empty() {
            return Ok(());
        }
        missing.sort();
        unexpected.sort();
        wrong_value.sort();
        Err(SecretsMismatch::Different {
            key,
            missing,
            unexpected,
            wrong_value,
        })
    }
}

/// The text of a YAML scalar as written (strings, numbers, booleans: Go's YAML decoder reads
/// any scalar into a string field so); null is the empty string.
fn scalar_text(node: &yaml::Node) -> Option<String> {
    if node.is_null() {
        return Some(String::new());
    }
    node.scalar_text().map(str::to_owned)
}

/// The known key closest to `name`, when it is close enough to be a typo.
fn did_you_mean(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    SecretKey::ALL
        .iter()
        .map(|k| {
            (
                k.as_str(),
                levenshtein(&lower, &k.as_str().to_ascii_lowercase()),
            )
        })
        .filter(|(_, d)| *d <= 3.max(name.len() / 8))
        .min_by_key(|(_, d)| *d)
        .map(|(k, _)| k)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
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

    fn parse(text: &str) -> Result<Secrets, SecretsError> {
        Secrets::parse(text, Path::new("secrets.yaml"))
    }

    #[test]
    fn loads_csi_sanity_keys_and_maps() {
        let s = parse(
            "CreateVolumeSecret:\n  user: alice\n  password: hunter2\nNodePublishVolumeSecret:\n  token: 1234\nDeleteVolumeSecret:\n",
        )
        .unwrap();
        let create = s.get(SecretKey::CreateVolume).unwrap();
        assert_eq!(create.get("password").map(String::as_str), Some("hunter2"));
        assert_eq!(
            s.get(SecretKey::NodePublishVolume)
                .unwrap()
                .get("token")
                .map(String::as_str),
            Some("1234"),
            "numbers become strings as in Go"
        );
        assert!(s.get(SecretKey::DeleteVolume).unwrap().is_empty());
        assert!(s.get(SecretKey::GetSnapshot).is_none());
        assert!(parse("").unwrap().keys().next().is_none());
    }

    #[test]
    fn unknown_keys_are_errors_with_line_and_suggestion() {
        let err = parse("CreateVolumeSecret:\n  a: b\nCreateVolumeSecrets:\n  a: b\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("secrets.yaml:3: unknown key \"CreateVolumeSecrets\""),
            "{text}"
        );
        assert!(
            text.contains("did you mean \"CreateVolumeSecret\""),
            "{text}"
        );
        let err = parse("TotallyUnrelated: {}\n").unwrap_err().to_string();
        assert!(!err.contains("did you mean"), "{err}");
        assert!(err.contains("valid keys: CreateVolumeSecret"), "{err}");
        let err = parse("nodepublishvolumesecret: {}\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("did you mean \"NodePublishVolumeSecret\""),
            "{err}"
        );
    }

    #[test]
    fn malformed_yaml_reports_file_line_and_column() {
        let err = parse("CreateVolumeSecret:\n  a: [b\n  c: d\n").unwrap_err();
        match &err {
            SecretsError::Yaml { line, column, .. } => {
                assert!(*line >= 2, "{err}");
                assert!(*column >= 1, "{err}");
            }
            other => panic!("expected a YAML error, got {other}"),
        }
        assert!(err.to_string().starts_with("secrets.yaml:"), "{err}");
        assert!(parse("- a\n- b\n").is_err());
        assert!(parse("CreateVolumeSecret: [a, b]\n").is_err());
    }

    #[test]
    fn debug_and_errors_never_show_values() {
        let s = parse("CreateVolumeSecret:\n  password: hunter2\n").unwrap();
        let debug = format!("{s:?}");
        assert!(
            debug.contains("password") && !debug.contains("hunter2"),
            "{debug}"
        );
        let given: HashMap<String, String> = [("password".to_owned(), "wrong".to_owned())].into();
        let err = s.check("CreateVolume", &given).unwrap_err().to_string();
        assert!(
            err.contains("wrong value for password") && !err.contains("hunter2"),
            "{err}"
        );
        let err = parse("CreateVolumeSecret:\n  password: [hunter2]\n")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
    }

    /// Every key is the one its own RPC carries (a lost arm would send that RPC without
    /// its secrets, and the run would test an unauthenticated plugin).
    #[test]
    fn every_key_is_carried_by_its_own_rpc() {
        for key in SecretKey::ALL {
            let rpc = key.as_str().trim_end_matches("Secret");
            let rpc = rpc.strip_prefix("Controller").filter(|r| r.starts_with("Validate")).unwrap_or(rpc);
            assert_eq!(SecretKey::for_rpc(rpc), Some(key), "{rpc}");
            assert_eq!(key.to_string(), key.as_str(), "messages name a key as the file spells it");
        }
    }

    #[test]
    fn maps_rpcs_to_keys_like_csi_sanity() {
        assert_eq!(
            SecretKey::for_rpc("ValidateVolumeCapabilities"),
            Some(SecretKey::ControllerValidateVolumeCapabilities)
        );
        assert_eq!(
            SecretKey::for_rpc("CreateVolumeGroupSnapshot"),
            Some(SecretKey::CreateSnapshot)
        );
        assert_eq!(
            SecretKey::for_rpc("DeleteVolumeGroupSnapshot"),
            Some(SecretKey::DeleteSnapshot)
        );
        assert_eq!(
            SecretKey::for_rpc("GetVolumeGroupSnapshot"),
            Some(SecretKey::ListSnapshots)
        );
        assert_eq!(SecretKey::for_rpc("NodeExpandVolume"), None);
        for key in SecretKey::ALL {
            assert_eq!(SecretKey::from_name(key.as_str()), Some(key));
        }
    }

    /// A mismatch names each kind of difference it found, and only those.
    #[test]
    fn a_mismatch_says_what_is_missing_unexpected_or_wrong_and_nothing_else() {
        let different = |missing: &[&str], unexpected: &[&str], wrong_value: &[&str]| {
            let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect();
            SecretsMismatch::Different {
                key: SecretKey::NodeStageVolume,
                missing: names(missing),
                unexpected: names(unexpected),
                wrong_value: names(wrong_value),
            }
            .to_string()
        };
        assert_eq!(
            different(&[], &[], &["token"]),
            "secrets do not match NodeStageVolumeSecret (wrong value for token)"
        );
        assert_eq!(
            different(&["a", "b"], &["c"], &[]),
            "secrets do not match NodeStageVolumeSecret (missing a, b; unexpected c)"
        );
        assert_eq!(different(&[], &[], &[]), "secrets do not match NodeStageVolumeSecret");
    }

    #[test]
    fn a_secrets_file_is_read_from_disk_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secrets.yaml");
        std::fs::write(&file, "NodeStageVolumeSecret:\n  token: abc\n  debug: true\n  empty:\nDeleteVolumeSecret:\n").unwrap();
        let s = Secrets::load(&file).unwrap();
        let stage = s.get(SecretKey::NodeStageVolume).unwrap();
        assert_eq!(stage.get("token").map(String::as_str), Some("abc"));
        assert_eq!(stage.get("debug").map(String::as_str), Some("true"), "booleans become strings as in Go");
        assert_eq!(stage.get("empty").map(String::as_str), Some(""), "a null value is the empty string");
        assert_eq!(s.keys().collect::<Vec<_>>(), [SecretKey::DeleteVolume, SecretKey::NodeStageVolume]);
        let missing = dir.path().join("none.yaml");
        let err = Secrets::load(&missing).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: cannot read the secrets file", missing.display())), "{err}");
        let built = Secrets::from_maps([(SecretKey::DeleteVolume, BTreeMap::from([("k".to_owned(), "v".to_owned())]))]);
        assert_eq!(built.for_rpc("DeleteVolume"), HashMap::from([("k".to_owned(), "v".to_owned())]));
    }

    #[test]
    fn malformed_yaml_is_explained_by_the_parser_without_its_own_location() {
        let err = parse("CreateVolumeSecret:\n  a: [b\n  c: d\n").unwrap_err().to_string();
        let reason = err.split(": invalid YAML: ").nth(1).unwrap_or_default();
        assert!(reason.contains("illegal placement of ':'"), "the parser's own words: {err}");
        assert!(!reason.contains(" at line "), "one location, ours: {err}");
    }

    /// Nesting is refused near the level that breaks the bound, where it is written: the
    /// parse stops there (it does not read the 80,000 levels after it).
    #[test]
    fn deep_nesting_is_refused_at_the_level_that_breaks_the_bound() {
        let deep = format!("CreateVolumeSecret: {{a: {}{}}}\n", "[".repeat(80_000), "]".repeat(80_000));
        let err = parse(&deep).unwrap_err();
        // The scanner looks a few hundred levels ahead (and has a limit of its own there).
        assert!(
            matches!(&err, SecretsError::Yaml { line: 1, column, reason, .. }
                if *column < 400 && (reason.contains("nesting deeper than 64") || reason.contains("recursion limit"))),
            "{err}"
        );
        let block: String = (0..200).map(|i| format!("{}k{i}:\n", " ".repeat(i))).collect();
        let err = parse(&format!("CreateVolumeSecret:\n{block}")).unwrap_err().to_string();
        assert!(err.starts_with("secrets.yaml:66:") && err.contains("nesting deeper"), "{err}");
    }

    #[test]
    fn invalid_utf8_is_named_by_file_line_and_byte() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secrets.yaml");
        std::fs::write(&file, b"CreateVolumeSecret:\n  user: ab\xffc\n").unwrap();
        let err = Secrets::load(&file).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("{}:2:11: invalid YAML: invalid UTF-8 at byte 11 of line 2 (byte 30 of the file)", file.display())
        );
        assert!(!err.contains("ab"), "no value is quoted: {err}");
    }

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions_alike() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("x", "xyz"), 2, "two insertions");
        assert_eq!(levenshtein("xyz", "x"), 2, "two deletions");
        assert_eq!(levenshtein("", "ab"), 2);
        // A name far from every key gets no suggestion, even one that a key contains.
        let err = parse("Volume: {}\n").unwrap_err().to_string();
        assert!(err.contains("\"Volume\"") && !err.contains("did you mean"), "{err}");
    }

    #[test]
    fn long_keys_allow_more_typos_in_a_suggestion() {
        // 41 characters: up to 41 / 8 = 5 edits still suggest (here 4: Capability, a trailing s).
        let err = parse("ControllerValidateVolumeCapabilitySecrets: {}\n").unwrap_err().to_string();
        assert!(err.contains("did you mean \"ControllerValidateVolumeCapabilitiesSecret\""), "{err}");
    }

    #[test]
    fn checks_exact_maps() {
        let s = parse("CreateVolumeSecret:\n  a: '1'\n  b: '2'\n").unwrap();
        let given = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            s.check("CreateVolume", &given(&[("a", "1"), ("b", "2")])),
            Ok(())
        );
        assert_eq!(
            s.check("CreateVolume", &given(&[])),
            Err(SecretsMismatch::Missing {
                key: SecretKey::CreateVolume
            })
        );
        assert!(matches!(
            s.check("CreateVolume", &given(&[("a", "1")])),
            Err(SecretsMismatch::Different { .. })
        ));
        assert!(
            s.check(
                "CreateVolume",
                &given(&[("a", "1"), ("b", "2"), ("c", "3")])
            )
            .is_err()
        );
        assert_eq!(
            s.check("DeleteVolume", &given(&[("x", "y")])),
            Ok(()),
            "unconfigured key"
        );
        assert_eq!(s.for_rpc("CreateVolume"), given(&[("a", "1"), ("b", "2")]));
    }
}
