//! The built-in variables of suites/README.md: their static types (for load-time checks of
//! `${...}` references) and their run-time values, computed from the run configuration, the
//! fingerprint, what the run learned of the plugin before its scenarios ([`RunFacts`]) and
//! the scenario's own name and paths.

use std::{
    collections::BTreeMap,
    hash::{Hash, Hasher},
    path::Path,
};

use super::{
    paths::ScenarioPaths,
    settings::{RunConfig, RunFacts},
    vars::{Ty, Val, Vars},
};
use crate::{
    fingerprint::Fingerprint,
    proto::{self, v1},
};

/// The longest name the spec allows (and the length of `name_max`).
pub const NAME_MAX: usize = 128;

/// The static type of every built-in variable.
pub fn types() -> BTreeMap<String, Ty> {
    let scalar = || Ty::Scalar;
    let string_map = || Ty::Map(Box::new(Ty::Scalar));
    let capability = || Ty::Message(proto::message("VolumeCapability").expect("VolumeCapability is in the pool"));
    let node = Ty::Record(BTreeMap::from([("id", scalar()), ("topology", string_map()), ("max_volumes", scalar())]));
    let paths = Ty::Record(BTreeMap::from([
        ("staging", scalar()),
        ("target", scalar()),
        ("target2", scalar()),
        ("dir", scalar()),
        ("nowhere", scalar()),
    ]));
    BTreeMap::from([
        ("name".to_owned(), scalar()),
        ("name_max".to_owned(), scalar()),
        ("volume_size".to_owned(), scalar()),
        ("expand_size".to_owned(), scalar()),
        ("small_volume_size".to_owned(), scalar()),
        ("small_expand_size".to_owned(), scalar()),
        ("unknown_volume_id".to_owned(), scalar()),
        ("unknown_snapshot_id".to_owned(), scalar()),
        ("unknown_group_snapshot_id".to_owned(), scalar()),
        ("known_node_id".to_owned(), scalar()),
        ("parameters".to_owned(), string_map()),
        ("mutable_parameters".to_owned(), string_map()),
        ("snapshot_parameters".to_owned(), string_map()),
        ("secrets".to_owned(), Ty::Map(Box::new(string_map()))),
        ("access_type".to_owned(), scalar()),
        ("capability".to_owned(), capability()),
        ("mount_capability".to_owned(), capability()),
        ("block_capability".to_owned(), capability()),
        ("node".to_owned(), node.clone()),
        ("nodes".to_owned(), Ty::List(Box::new(node))),
        ("paths".to_owned(), paths),
        ("idempotency_count".to_owned(), scalar()),
        ("spec_version".to_owned(), scalar()),
    ])
}

fn stable_hash(text: &str) -> u64 {
    // A fixed-key hasher: names must be the same in every run with the same seed.
    let mut h = std::hash::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// A fresh run id, whatever `--seed` says: eight hex digits, part of every name, so that no
/// other run (another CI job pinning the same seed against the same backend, or a rerun)
/// shares a volume name with this one and has its volume adopted. The seed replays what is
/// generated, never names. Random per process (the standard library's hasher keys come from
/// the operating system), mixed with the clock and the process id.
pub fn run_id() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    h.write_u128(now.as_nanos());
    format!("{:08x}", h.finish() & 0xffff_ffff)
}

/// A unique, valid volume name for a scenario: lower-case letters, digits and dashes, at most
/// 100 characters (so that `-suffix`es stay under the spec's 128).
pub fn scenario_name(run_id: &str, scenario_id: &str) -> String {
    let slug: String =
        scenario_id.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let base = format!("csi-conform-{run_id}-");
    let room = 100 - base.len();
    if slug.len() <= room {
        format!("{base}{slug}")
    } else {
        let tag = format!("{:06x}", stable_hash(scenario_id) & 0xff_ffff);
        format!("{base}{}-{tag}", &slug[..room - tag.len() - 1])
    }
}

/// `name_max`: the scenario's name padded to exactly 128 characters.
pub fn max_name(name: &str) -> String {
    let mut out = format!("{name}-");
    while out.len() < NAME_MAX {
        out.push('x');
    }
    out.truncate(NAME_MAX);
    out
}

fn string_map(map: &BTreeMap<String, String>) -> Val {
    Val::Map(map.iter().map(|(k, v)| (k.clone(), Val::Str(v.clone()))).collect())
}

/// A SINGLE_NODE_WRITER capability with the given access type (the run's default one).
pub fn wire_capability(block: bool) -> v1::VolumeCapability {
    use v1::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume, access_mode::Mode};
    v1::VolumeCapability {
        access_type: Some(if block {
            AccessType::Block(BlockVolume {})
        } else {
            AccessType::Mount(MountVolume::default())
        }),
        access_mode: Some(AccessMode { mode: Mode::SingleNodeWriter as i32 }),
    }
}

/// [`wire_capability`] as a value.
pub fn capability(block: bool) -> Val {
    Val::Message(proto::to_dynamic(&wire_capability(block)))
}

/// The values of every built-in variable for one scenario.
pub fn values(config: &RunConfig, fingerprint: &Fingerprint, facts: &RunFacts, name: &str, paths: &ScenarioPaths) -> Vars {
    let mut vars = Vars::new();
    let text = |p: &Path| Val::Str(p.display().to_string());
    vars.insert("name", Val::Str(name.to_owned()));
    vars.insert("name_max", Val::Str(max_name(name)));
    vars.insert("volume_size", Val::Int(config.volume_size.into()));
    vars.insert("expand_size", Val::Int(config.expand_size().into()));
    vars.insert("small_volume_size", Val::Int(facts.small_size(config).into()));
    vars.insert("small_expand_size", Val::Int(facts.small_expand_size(config).into()));
    // Ids of objects that do not exist: set by hand, else one this run created and deleted
    // (in the plugin's own format), else made up from the scenario's name.
    let unknown = |set: &Option<String>, gone: &Option<String>| {
        Val::Str(set.clone().or_else(|| gone.clone()).unwrap_or_else(|| format!("{name}-nonexistent")))
    };
    vars.insert("unknown_volume_id", unknown(&config.nonexistent_volume_id, &facts.gone_volume_id));
    vars.insert("unknown_snapshot_id", unknown(&config.nonexistent_snapshot_id, &facts.gone_snapshot_id));
    vars.insert("unknown_group_snapshot_id", unknown(&None, &facts.gone_group_snapshot_id));
    // A real node's id, for calls about an unknown volume that must name a node.
    let known_node = fingerprint.nodes.first().map_or_else(|| format!("{name}-nonexistent-node"), |n| n.node_id.clone());
    vars.insert("known_node_id", Val::Str(known_node));
    vars.insert("parameters", string_map(&config.parameters));
    vars.insert("mutable_parameters", string_map(&config.mutable_parameters));
    vars.insert("snapshot_parameters", string_map(&config.snapshot_parameters));
    vars.insert("secrets", Val::Map(config.secrets.iter().map(|(k, v)| (k.clone(), string_map(v))).collect()));
    vars.insert("access_type", Val::Str(config.access_type.as_str().to_owned()));
    vars.insert("capability", capability(config.access_type == super::settings::AccessType::Block));
    vars.insert("mount_capability", capability(false));
    vars.insert("block_capability", capability(true));
    let nodes: Vec<Val> = fingerprint
        .nodes
        .iter()
        .map(|n| {
            let topology = n.topology.clone().unwrap_or_default();
            Val::Map(BTreeMap::from([
                ("id".to_owned(), Val::Str(n.node_id.clone())),
                ("topology".to_owned(), string_map(&topology)),
                ("max_volumes".to_owned(), Val::Int(n.max_volumes_per_node.into())),
            ]))
        })
        .collect();
    vars.insert("node", nodes.first().cloned().unwrap_or(Val::Null));
    vars.insert("nodes", Val::List(nodes));
    vars.insert(
        "paths",
        Val::Map(BTreeMap::from([
            ("staging".to_owned(), text(&paths.staging)),
            ("target".to_owned(), text(&paths.target)),
            ("target2".to_owned(), text(&paths.target2)),
            ("dir".to_owned(), text(&paths.dir)),
            ("nowhere".to_owned(), Val::Str(config.profile.nowhere(&paths.target2))),
        ])),
    );
    vars.insert("idempotency_count", Val::Int(config.idempotency_count.into()));
    vars.insert("spec_version", Val::Str(fingerprint.spec.version.as_str().to_owned()));
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_valid_and_bounded() {
        let run = run_id();
        assert_eq!(run.len(), 8);
        // Fresh in every run: 32 ids in a row are all different (a seed-derived id repeats).
        let ids: std::collections::BTreeSet<String> = (0..32).map(|_| run_id()).collect();
        assert_eq!(ids.len(), 32, "{ids:?}");
        let a = scenario_name(&run, "controller.create-volume.ok");
        assert!(a.starts_with("csi-conform-") && a.ends_with("controller-create-volume-ok"), "{a}");
        let long_id = format!("suite.{}", "very-long-".repeat(30));
        let b = scenario_name(&run, &long_id);
        let c = scenario_name(&run, &format!("{long_id}x"));
        assert!(b.len() <= 100 && c.len() <= 100);
        assert_ne!(b, c);
        assert!(b.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-'));
        let m = max_name(&a);
        assert_eq!(m.len(), NAME_MAX);
        assert!(m.starts_with(&a));
    }

    #[test]
    fn every_value_has_a_type() {
        let types = types();
        let config = RunConfig::default();
        let fp = crate::suite::settings::tests_support::fingerprint(1);
        let paths = ScenarioPaths::in_dir("/tmp/x/0000-s_a".into(), "/tmp/x/0000-s_a/staging".into());
        let vars = values(&config, &fp, &RunFacts::default(), "n", &paths);
        let names: Vec<&str> = vars.names().collect();
        let typed: Vec<&str> = types.keys().map(String::as_str).collect();
        assert_eq!(names, typed);
    }

    /// Unknown ids: set by hand beats one the run saw deleted, which beats a made-up one.
    #[test]
    fn unknown_ids_prefer_the_flag_then_a_deleted_one() {
        let fp = crate::suite::settings::tests_support::fingerprint(1);
        let paths = ScenarioPaths::in_dir("/tmp/x/0000-s_a".into(), "/tmp/x/0000-s_a/staging".into());
        let mut config = RunConfig::default();
        let mut facts = RunFacts::default();
        let get = |config: &RunConfig, facts: &RunFacts, var: &str| values(config, &fp, facts, "n", &paths).get(var).cloned();
        assert_eq!(get(&config, &facts, "unknown_volume_id"), Some(Val::Str("n-nonexistent".into())));
        assert_eq!(get(&config, &facts, "known_node_id"), Some(Val::Str("node-0".into())));
        assert_eq!(get(&config, &facts, "small_volume_size"), Some(Val::Int(config.volume_size.into())));
        facts.gone_volume_id = Some("vol-000001".into());
        facts.gone_snapshot_id = Some("snap-000002".into());
        facts.small = Some((1 << 20, "test".into()));
        assert_eq!(get(&config, &facts, "unknown_volume_id"), Some(Val::Str("vol-000001".into())));
        assert_eq!(get(&config, &facts, "unknown_snapshot_id"), Some(Val::Str("snap-000002".into())));
        assert_eq!(get(&config, &facts, "small_volume_size"), Some(Val::Int((1i64 << 20).into())));
        assert_eq!(get(&config, &facts, "small_expand_size"), Some(Val::Int((2i64 << 20).into())));
        config.nonexistent_volume_id = Some("vol-999999".into());
        assert_eq!(get(&config, &facts, "unknown_volume_id"), Some(Val::Str("vol-999999".into())));
    }
}
