//! Which CSI spec version a plugin speaks (v1.12 or v1.13): the versions, the capability
//! names only one of them defines, and the inference from what a plugin advertises, with the
//! reason a report prints.
//!
//! No RPC says which version a plugin implements. `proto/csi.proto` holds both (v1.13 only
//! reserved what it removed, so the superset decodes either), and this module says which
//! parts belong to which: v1.13 added volume and storage health and snapshot topology and
//! removed VOLUME_CONDITION (`/work/shared/spec/csi-v1.13-changes.md`, summarised in
//! `suites/spec/v1.13.yaml`).

use std::{fmt, str::FromStr};

use serde::Serialize;

/// A CSI spec version csi-conform judges by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub enum SpecVersion {
    /// CSI v1.12.0.
    #[serde(rename = "1.12")]
    V1_12,
    /// CSI v1.13.0 (July 2026): health RPCs, snapshot topology, VolumeCondition removed.
    #[default]
    #[serde(rename = "1.13")]
    V1_13,
}

impl SpecVersion {
    /// Every version, oldest first.
    pub const ALL: [SpecVersion; 2] = [SpecVersion::V1_12, SpecVersion::V1_13];

    /// `1.12` / `1.13`.
    pub fn as_str(self) -> &'static str {
        match self {
            SpecVersion::V1_12 => "1.12",
            SpecVersion::V1_13 => "1.13",
        }
    }

    /// Whether this version defines the capability `scope:NAME` (a name of the other version
    /// only is not defined; names both share are).
    pub fn defines(self, scope: &str, name: &str) -> bool {
        let only_in = |list: &[(&str, &str)]| list.iter().any(|(s, n)| *s == scope && *n == name);
        match self {
            SpecVersion::V1_12 => !only_in(V1_13_ONLY),
            SpecVersion::V1_13 => !only_in(V1_12_ONLY),
        }
    }
}

impl fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SpecVersion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().trim_start_matches('v') {
            "1.12" | "1.12.0" => Ok(SpecVersion::V1_12),
            "1.13" | "1.13.0" => Ok(SpecVersion::V1_13),
            other => Err(format!("unknown CSI spec version {other:?}; csi-conform knows 1.12 and 1.13")),
        }
    }
}

/// Capabilities (`scope`, `NAME`) that only CSI v1.12 defines (v1.13 reserves their numbers).
pub const V1_12_ONLY: &[(&str, &str)] = &[("controller", "VOLUME_CONDITION"), ("node", "VOLUME_CONDITION")];

/// Capabilities (`scope`, `NAME`) that CSI v1.13 added.
pub const V1_13_ONLY: &[(&str, &str)] = &[
    ("plugin", "SNAPSHOT_ACCESSIBILITY_CONSTRAINTS"),
    ("controller", "GET_VOLUME_HEALTH"),
    ("controller", "LIST_VOLUME_HEALTH"),
    ("node", "GET_VOLUME_HEALTH"),
    ("node", "GET_STORAGE_HEALTH"),
];

/// The version a run judges a plugin by, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assumed {
    /// The version.
    pub version: SpecVersion,
    /// Whether the operator stated it (`--spec-version`) rather than csi-conform inferring it.
    pub stated: bool,
    /// Why, in one sentence for the report.
    pub reason: String,
}

impl Assumed {
    /// The operator's statement, with what the plugin advertises that speaks against it.
    pub fn stated(version: SpecVersion, advertised: &[(&str, &str)]) -> Assumed {
        let other: Vec<String> = advertised
            .iter()
            .filter(|(s, n)| !version.defines(s, n))
            .map(|(s, n)| format!("{s}:{n}"))
            .collect();
        let mut reason = format!("stated with --spec-version {version}");
        if !other.is_empty() {
            reason.push_str(&format!(
                "; the plugin also advertises {}, which CSI v{version} does not define",
                other.join(", ")
            ));
        }
        Assumed { version, stated: true, reason }
    }

    /// Inferred from the capabilities a plugin advertises (`scope`, `NAME`): any v1.13-only
    /// capability makes it v1.13; only v1.12's VOLUME_CONDITION makes it v1.12; with neither,
    /// v1.12, where both versions ask the same of what the plugin advertises.
    pub fn infer(advertised: &[(&str, &str)]) -> Assumed {
        let names = |list: &[(&str, &str)]| -> Vec<String> {
            advertised.iter().filter(|c| list.contains(c)).map(|(s, n)| format!("{s}:{n}")).collect()
        };
        let (new, old) = (names(V1_13_ONLY), names(V1_12_ONLY));
        let (version, reason) = match (new.is_empty(), old.is_empty()) {
            (false, true) => (SpecVersion::V1_13, format!("inferred: it advertises {}, added in CSI v1.13", new.join(", "))),
            (false, false) => (
                SpecVersion::V1_13,
                format!(
                    "inferred: it advertises {}, added in CSI v1.13 (beside {}, which only v1.12 defines)",
                    new.join(", "),
                    old.join(", ")
                ),
            ),
            (true, false) => (
                SpecVersion::V1_12,
                format!("inferred: it advertises {}, which CSI v1.13 removed, and nothing v1.13 added", old.join(", ")),
            ),
            (true, true) => (
                SpecVersion::V1_12,
                "inferred: it advertises no capability that only one version defines, so v1.12 and v1.13 ask \
                 the same of it; judged by v1.12 (--spec-version states it)"
                    .to_owned(),
            ),
        };
        Assumed { version, stated: false, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_define_their_own_names() {
        assert_eq!("1.13".parse::<SpecVersion>().unwrap(), SpecVersion::V1_13);
        assert_eq!("v1.12.0".parse::<SpecVersion>().unwrap(), SpecVersion::V1_12);
        assert!("1.11".parse::<SpecVersion>().unwrap_err().contains("1.12 and 1.13"));
        assert!(SpecVersion::V1_12.defines("node", "VOLUME_CONDITION"));
        assert!(!SpecVersion::V1_13.defines("node", "VOLUME_CONDITION"));
        assert!(SpecVersion::V1_13.defines("node", "GET_VOLUME_HEALTH"));
        assert!(!SpecVersion::V1_12.defines("controller", "LIST_VOLUME_HEALTH"));
        assert!(SpecVersion::V1_12.defines("controller", "CREATE_DELETE_VOLUME"));
    }

    #[test]
    fn inference_follows_the_capabilities_and_says_why() {
        let v13 = Assumed::infer(&[("node", "GET_VOLUME_HEALTH"), ("controller", "LIST_VOLUMES")]);
        assert_eq!(v13.version, SpecVersion::V1_13);
        assert!(v13.reason.contains("node:GET_VOLUME_HEALTH"), "{}", v13.reason);
        let v12 = Assumed::infer(&[("controller", "VOLUME_CONDITION")]);
        assert_eq!(v12.version, SpecVersion::V1_12);
        let both = Assumed::infer(&[("controller", "VOLUME_CONDITION"), ("controller", "GET_VOLUME_HEALTH")]);
        assert_eq!(both.version, SpecVersion::V1_13);
        assert!(both.reason.contains("only v1.12 defines"), "{}", both.reason);
        let neither = Assumed::infer(&[("controller", "LIST_VOLUMES")]);
        assert_eq!(neither.version, SpecVersion::V1_12);
        assert!(!neither.stated);
        let stated = Assumed::stated(SpecVersion::V1_12, &[("node", "GET_STORAGE_HEALTH")]);
        assert!(stated.stated && stated.reason.contains("node:GET_STORAGE_HEALTH"), "{}", stated.reason);
    }
}
