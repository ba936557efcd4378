//! Which CSI spec version a plugin speaks (v1.12 or v1.13): the versions, the capability
//! names, answer fields and RPCs only one of them defines, the inference from what a plugin
//! advertises (with the reason a report prints), and the evidence its answers give later.
//!
//! No RPC says which version a plugin implements. `proto/csi.proto` holds both (v1.13 only
//! reserved what it removed, so the superset decodes either), and this module says which
//! parts belong to which: v1.13 added volume and storage health and snapshot topology and
//! removed VOLUME_CONDITION (`/work/shared/spec/csi-v1.13-changes.md`, summarised in
//! `suites/spec/v1.13.yaml`).

use std::{fmt, str::FromStr};

use prost_reflect::{DynamicMessage, ReflectMessage, Value};
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
    /// What the plugin advertises that only one version defines (`capability node:NAME`),
    /// whatever the version was assumed from.
    pub advertised: Vec<Evidence>,
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
        Assumed { version, stated: true, reason, advertised: capability_evidence(advertised) }
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
        Assumed { version, stated: false, reason, advertised: capability_evidence(advertised) }
    }

    /// Whether `evidence` (of an answer) speaks against the version the run judges by: it
    /// belongs to the other version, and nothing the plugin advertises declares that one
    /// (a plugin that advertises both versions' capabilities serves both kinds of CO on
    /// purpose: the migration note covers it).
    pub fn contradicted_by(&self, evidence: &Evidence) -> bool {
        evidence.version != self.version && !self.advertised.iter().any(|a| a.version == evidence.version)
    }

    /// The warning a contradicting answer gets: what it showed, what the run judges by and
    /// why, and what that means for the verdicts.
    pub fn contradiction(&self, evidence: &Evidence) -> String {
        let how = if self.stated { "as stated with --spec-version" } else { "as inferred" };
        format!(
            "{} (only CSI v{} defines it), but the run judges the plugin by CSI v{} ({how}: {}); the verdicts stay \
             those of v{}: a plugin that mixes versions leaves orchestrators of one of them without what it sends \
             (state its version with --spec-version {}, or advertise the capabilities of the version it speaks)",
            evidence.what,
            evidence.version,
            self.version,
            self.reason.trim_start_matches("inferred: "),
            self.version,
            evidence.version
        )
    }
}

/// One sign of the version a plugin speaks: a capability it advertises, a field its answer
/// sets or an RPC it serves that only `version` defines.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Evidence {
    /// The version that alone defines it.
    pub version: SpecVersion,
    /// What was seen: `capability node:VOLUME_CONDITION`, `ListVolumes's answer sets
    /// entries[].status.volume_condition`, `NodeGetVolumeHealth answered OK`.
    pub what: String,
    /// The requirement it bears on (an id of `suites/spec/`), for a finding it makes.
    #[serde(skip)]
    pub requirement: &'static str,
}

/// Fields only one version defines, in answers: (version, message inside the package, field,
/// the requirement a contradiction names). v1.13 reserves VolumeCondition's numbers, and
/// added snapshot topology (`/work/shared/spec/csi-v1.13-changes.md`).
const ANSWER_FIELDS: &[(SpecVersion, &str, &str, &str)] = &[
    (SpecVersion::V1_12, "ListVolumesResponse.VolumeStatus", "volume_condition", "VolumeHealth.migration"),
    (SpecVersion::V1_12, "ControllerGetVolumeResponse.VolumeStatus", "volume_condition", "VolumeHealth.migration"),
    (SpecVersion::V1_12, "NodeGetVolumeStatsResponse", "volume_condition", "VolumeHealth.migration"),
    (SpecVersion::V1_13, "Snapshot", "accessible_topology", "Snapshot.accessible-topology.needs-capability"),
];

/// RPCs only CSI v1.13 defines, with the requirement a contradiction names: answering one
/// with OK is v1.13 behaviour.
const V1_13_RPCS: &[(&str, &str)] = &[
    ("ControllerListVolumeHealth", "ControllerListVolumeHealth.implemented"),
    ("ControllerGetVolumeHealth", "ControllerGetVolumeHealth.implemented"),
    ("NodeGetVolumeHealth", "NodeGetVolumeHealth.implemented"),
    ("NodeGetStorageHealth", "NodeGetStorageHealth.implemented"),
];

fn capability_evidence(advertised: &[(&str, &str)]) -> Vec<Evidence> {
    let mut out: Vec<Evidence> = advertised
        .iter()
        .filter_map(|(scope, name)| {
            let version = if V1_12_ONLY.contains(&(scope, name)) {
                SpecVersion::V1_12
            } else if V1_13_ONLY.contains(&(scope, name)) {
                SpecVersion::V1_13
            } else {
                return None;
            };
            Some(Evidence { version, what: format!("capability {scope}:{name}"), requirement: "" })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// What a successful answer of `rpc` (one message, or a stream's) shows of the version the
/// plugin speaks: each field only one version defines that it sets (the path without list
/// indices), and a v1.13-only RPC served. Sorted, each once.
pub fn answer_evidence(rpc: &str, messages: &[DynamicMessage]) -> Vec<Evidence> {
    answer_evidence_of(rpc, messages, |_| true)
}

/// The RPCs whose answers list every object of the plugin, not only the ones asked about:
/// (RPC, the entry's object field, that object's id field).
const LISTINGS: [(&str, &str, &str); 2] = [("ListVolumes", "volume", "volume_id"), ("ListSnapshots", "snapshot", "snapshot_id")];

/// [`answer_evidence`], reading a listing's entries only for the objects whose id `own`
/// accepts. A listing shows whatever other scenarios hold at that moment, so evidence read
/// from their entries would land on a scenario by chance of timing; the caller passes the
/// ids it holds, so what it is told is the same at any `--jobs` and in any order.
pub fn answer_evidence_of(rpc: &str, messages: &[DynamicMessage], own: impl Fn(&str) -> bool) -> Vec<Evidence> {
    let mut out = Vec::new();
    if let Some((_, requirement)) = V1_13_RPCS.iter().find(|(r, _)| *r == rpc) {
        out.push(Evidence { version: SpecVersion::V1_13, what: format!("{rpc} answered OK"), requirement });
    }
    let listing = LISTINGS.iter().find(|(r, ..)| *r == rpc);
    for m in messages {
        match listing {
            Some((_, object, id)) => {
                let mut kept = m.clone();
                if let Some(Value::List(entries)) = kept.get_field_by_name_mut("entries") {
                    entries.retain(|entry| entry_id(entry, object, id).is_some_and(|id| own(&id)));
                }
                walk(rpc, &kept, "", &mut out);
            }
            None => walk(rpc, m, "", &mut out),
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The id of a listing's entry: `entry.<object>.<id>`.
fn entry_id(entry: &Value, object: &str, id: &str) -> Option<String> {
    crate::proto::str_at(entry.as_message()?, &[object, id])
}

fn walk(rpc: &str, message: &DynamicMessage, path: &str, out: &mut Vec<Evidence>) {
    let full = message.descriptor().full_name().to_owned();
    let name = full.strip_prefix("csi.v1.").unwrap_or(&full);
    for (field, value) in message.fields() {
        let at = if path.is_empty() { field.name().to_owned() } else { format!("{path}.{}", field.name()) };
        let set = match value {
            Value::List(items) => !items.is_empty(),
            _ => true,
        };
        if let Some((version, .., requirement)) =
            ANSWER_FIELDS.iter().find(|(_, m, f, _)| *m == name && *f == field.name()).filter(|_| set)
        {
            out.push(Evidence { version: *version, what: format!("{rpc}'s answer sets {at}"), requirement });
        }
        match value {
            Value::Message(m) => walk(rpc, m, &at, out),
            Value::List(items) => {
                for item in items {
                    if let Value::Message(m) = item {
                        walk(rpc, m, &format!("{at}[]"), out);
                    }
                }
            }
            _ => {}
        }
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

    #[test]
    fn answers_show_the_fields_and_rpcs_of_one_version() {
        use crate::proto::{to_dynamic, v1};
        let stats = v1::NodeGetVolumeStatsResponse {
            volume_condition: Some(v1::VolumeCondition { abnormal: false, message: String::new() }),
            ..Default::default()
        };
        let found = answer_evidence("NodeGetVolumeStats", &[to_dynamic(&stats)]);
        let whats: Vec<(SpecVersion, &str)> = found.iter().map(|e| (e.version, e.what.as_str())).collect();
        assert_eq!(whats, [(SpecVersion::V1_12, "NodeGetVolumeStats's answer sets volume_condition")]);
        let listed = v1::ListVolumesResponse {
            entries: vec![
                v1::list_volumes_response::Entry {
                    status: Some(v1::list_volumes_response::VolumeStatus {
                        volume_condition: Some(Default::default()),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                2
            ],
            ..Default::default()
        };
        let found = answer_evidence("ListVolumes", &[to_dynamic(&listed)]);
        assert_eq!(found.len(), 1, "one piece per field, whatever the entries: {found:?}");
        assert_eq!(found[0].what, "ListVolumes's answer sets entries[].status.volume_condition");
        // Read for the scenario that holds a volume: only its own entry counts.
        let mut mixed = listed.clone();
        mixed.entries[0].volume = Some(v1::Volume { volume_id: "theirs".into(), ..Default::default() });
        mixed.entries[1].volume = Some(v1::Volume { volume_id: "mine".into(), ..Default::default() });
        mixed.entries[1].status = None;
        let own = |id: &str| id == "mine";
        assert!(answer_evidence_of("ListVolumes", &[to_dynamic(&mixed)], own).is_empty(), "only another's entry shows it");
        assert_eq!(answer_evidence("ListVolumes", &[to_dynamic(&mixed)]).len(), 1, "the report still hears it");
        mixed.entries[1].status = listed.entries[0].status.clone();
        assert_eq!(answer_evidence_of("ListVolumes", &[to_dynamic(&mixed)], own).len(), 1);
        let snapshot = v1::CreateSnapshotResponse {
            snapshot: Some(v1::Snapshot { accessible_topology: vec![Default::default()], ..Default::default() }),
        };
        let found = answer_evidence("CreateSnapshot", &[to_dynamic(&snapshot)]);
        assert_eq!(found.iter().map(|e| (e.version, e.requirement)).collect::<Vec<_>>(), [(
            SpecVersion::V1_13,
            "Snapshot.accessible-topology.needs-capability"
        )]);
        let health = answer_evidence("NodeGetStorageHealth", &[to_dynamic(&v1::NodeGetStorageHealthResponse::default())]);
        assert_eq!(health[0].what, "NodeGetStorageHealth answered OK");
        // Fields both versions define, and an unset condition, say nothing.
        let plain = v1::NodeGetVolumeStatsResponse { usage: vec![Default::default()], volume_condition: None };
        assert!(answer_evidence("NodeGetVolumeStats", &[to_dynamic(&plain)]).is_empty());
    }

    #[test]
    fn only_evidence_of_an_undeclared_other_version_contradicts() {
        let v13 = Evidence { version: SpecVersion::V1_13, what: "x".into(), requirement: "" };
        let v12 = Evidence { version: SpecVersion::V1_12, what: "y".into(), requirement: "" };
        let by_default = Assumed::infer(&[]);
        assert!(by_default.contradicted_by(&v13) && !by_default.contradicted_by(&v12));
        let new = Assumed::infer(&[("node", "GET_VOLUME_HEALTH")]);
        assert!(new.contradicted_by(&v12) && !new.contradicted_by(&v13));
        assert!(new.contradiction(&v12).contains("judges the plugin by CSI v1.13 (as inferred: it advertises node:GET_VOLUME_HEALTH"));
        // A plugin that advertises both versions' capabilities serves both on purpose.
        let both = Assumed::infer(&[("node", "GET_VOLUME_HEALTH"), ("node", "VOLUME_CONDITION")]);
        assert!(!both.contradicted_by(&v12) && !both.contradicted_by(&v13));
        let stated = Assumed::stated(SpecVersion::V1_12, &[("node", "GET_VOLUME_HEALTH")]);
        assert!(!stated.contradicted_by(&v13), "what it advertises declares v1.13: the reason says so already");
    }
}
