//! The suites built into the binary: the YAML files of `suites/`, embedded with
//! `include_str!`, and loading suites with the built-in checks and properties ([`Registry`]).
//! To add one, put the file in `suites/` and add a line to [`BUILTIN`].

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    sync::OnceLock,
};

use super::{checks::Registry, error::LoadErrors, load, model::Suite};

/// Loads a suite from text, with the built-in checks and properties; `origin` names it in
/// errors and reports.
pub fn load_str(origin: &str, text: &str) -> Result<Suite, LoadErrors> {
    load::load_str_in(&Registry, origin, text)
}

/// Reads and loads a suite file, with the built-in checks and properties.
pub fn load_file(path: &Path) -> Result<Suite, LoadErrors> {
    load::load_file_in(&Registry, path)
}

/// Every built-in suite: its file name and text.
pub const BUILTIN: &[(&str, &str)] = &[
    ("identity.yaml", include_str!("../../../../suites/identity.yaml")),
    ("controller.yaml", include_str!("../../../../suites/controller.yaml")),
    ("snapshots.yaml", include_str!("../../../../suites/snapshots.yaml")),
    ("expansion.yaml", include_str!("../../../../suites/expansion.yaml")),
    ("modify.yaml", include_str!("../../../../suites/modify.yaml")),
    ("node.yaml", include_str!("../../../../suites/node.yaml")),
    ("group-controller.yaml", include_str!("../../../../suites/group-controller.yaml")),
    ("extras.yaml", include_str!("../../../../suites/extras.yaml")),
    ("lifecycle.yaml", include_str!("../../../../suites/lifecycle.yaml")),
    ("existing.yaml", include_str!("../../../../suites/existing.yaml")),
    ("data.yaml", include_str!("../../../../suites/data.yaml")),
    ("capabilities.yaml", include_str!("../../../../suites/capabilities.yaml")),
    ("properties.yaml", include_str!("../../../../suites/properties.yaml")),
    ("requirements.yaml", include_str!("../../../../suites/requirements.yaml")),
    ("health.yaml", include_str!("../../../../suites/health.yaml")),
];

/// The built-in suite of scenarios that run only as orchestrator instances (`--orchestrator`):
/// its file name and text. Not in [`BUILTIN`]: a run without `--orchestrator` never loads it.
pub const ORCHESTRATOR_SUITE: (&str, &str) = ("orchestrators.yaml", include_str!("../../../../suites/orchestrators.yaml"));

/// The built-in suites a run loads only when asked for by name (`--suite stress`): their
/// name and text. Not in [`BUILTIN`]: they hammer and restart the plugin, which a default
/// run must not do unasked.
pub const OPT_IN: &[(&str, &str)] = &[
    ("stress", include_str!("../../../../suites/stress.yaml")),
    ("disruption", include_str!("../../../../suites/disruption.yaml")),
];

/// The opt-in built-in suite called `name`, loaded (`None`: no such opt-in suite).
pub fn opt_in_suite(name: &str) -> Option<Result<Suite, LoadErrors>> {
    OPT_IN.iter().find(|(n, _)| *n == name).map(|(n, text)| load_str(&format!("builtin:{n}.yaml"), text))
}

/// The requirements that only opt-in suites check (no default built-in suite names them),
/// each with the opt-in suites whose scenarios name it: what a default run leaves to them,
/// which is neither a gap nor covered by the run. Loaded once.
pub fn only_opt_in() -> &'static BTreeMap<String, Vec<&'static str>> {
    static ONLY: OnceLock<BTreeMap<String, Vec<&'static str>>> = OnceLock::new();
    ONLY.get_or_init(|| {
        let default: BTreeSet<String> =
            builtin().iter().flat_map(|s| s.scenarios()).flat_map(|sc| sc.spec().iter().cloned()).collect();
        let mut out: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
        for (name, _) in OPT_IN {
            let Some(Ok(suite)) = opt_in_suite(name) else { continue };
            for id in suite.scenarios().iter().flat_map(|sc| sc.spec()).filter(|id| !default.contains(*id)) {
                let suites = out.entry(id.clone()).or_default();
                if !suites.contains(name) {
                    suites.push(name);
                }
            }
        }
        out
    })
}

/// The built-in orchestrator-only suite, loaded (see [`ORCHESTRATOR_SUITE`]).
pub fn orchestrator_suites() -> Vec<Suite> {
    let (file, text) = ORCHESTRATOR_SUITE;
    match load_str(&format!("builtin:{file}"), text) {
        Ok(suite) => vec![suite],
        Err(e) => {
            tracing::error!("built-in suite {file} does not load:\n{e}");
            Vec::new()
        }
    }
}

/// Loads every built-in suite. They are checked by a unit test, so this cannot fail in a
/// released binary; a broken one is left out with an error log rather than a panic.
pub fn builtin() -> Vec<Suite> {
    BUILTIN
        .iter()
        .filter_map(|(file, text)| match load_str(&format!("builtin:{file}"), text) {
            Ok(suite) => Some(suite),
            Err(e) => {
                tracing::error!("built-in suite {file} does not load:\n{e}");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_suite_loads_and_ids_are_unique() {
        for (file, text) in BUILTIN {
            if let Err(e) = load_str(&format!("builtin:{file}"), text) {
                panic!("built-in suite {file} does not load:\n{e}");
            }
        }
        let (file, text) = ORCHESTRATOR_SUITE;
        if let Err(e) = load_str(&format!("builtin:{file}"), text) {
            panic!("built-in suite {file} does not load:\n{e}");
        }
        let mut suites = builtin();
        assert_eq!(suites.len(), BUILTIN.len());
        suites.extend(orchestrator_suites());
        for (name, _) in OPT_IN {
            match opt_in_suite(name) {
                Some(Ok(suite)) => suites.push(suite),
                Some(Err(e)) => panic!("opt-in suite {name} does not load:\n{e}"),
                None => unreachable!(),
            }
        }
        assert!(opt_in_suite("controller").is_none());
        load::check_unique(&suites).unwrap();
    }

    /// `General.concurrency.graceful` is checked by `--suite stress` and by no default suite.
    #[test]
    fn a_requirement_only_an_opt_in_suite_names_is_theirs() {
        let only = only_opt_in();
        assert_eq!(only.get("General.concurrency.graceful"), Some(&vec!["stress"]), "{only:#?}");
        // Named by a default suite too: not theirs alone.
        assert!(!only.contains_key("CreateVolume.idempotent"), "{only:#?}");
    }
}
