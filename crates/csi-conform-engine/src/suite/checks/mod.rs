//! Named checks: what YAML cannot say, written in Rust and called by name from a `check`
//! step, and the named properties of `property` steps. Each check is a type implementing
//! [`Check`] (see `api.rs`): typed arguments read once by an [`ArgReader`] (which declares
//! them to the loader too), its declaration (name, description, RPCs, outputs, pools,
//! demand and cost) and an async body that works through the scenario's context, so
//! everything it creates is tracked and torn down. The registry is the [`Catalog`] the loader
//! reads (through [`Registry`]) and the table the engine runs from.
//!
//! Adding a named check is one file and one line (CONTRIBUTING.md walks through it): write
//! `checks/<name>.rs` exporting `pub(super) const CHECKS: &[CheckDef]`, and add `<name>` to
//! the `checks!` list below. The macro declares the module and registers what it exports, so
//! there is no `mod` line to add and no array length to bump. A module exports a slice, not
//! one check, because related checks share a file (`list`: volumes and snapshots; `health`;
//! `lifecycle` and `existing-volume`); the list's order is the order `list --checks` shows.

use crate::suite::catalog::{Catalog, CheckSpec, PropertySpec};

mod api;
pub(crate) mod confirm;
mod node_restart;
pub(crate) mod properties;
mod stress_lost;
mod stress_support;
mod support;

pub use api::{ArgReader, Args, Check, CheckDef, CheckFuture};

/// Declares each check module and registers the checks it exports (its `CHECKS`), in the
/// order `list --checks` shows them: `name` or `pub(crate) name`.
macro_rules! checks {
    ($($vis:vis $module:ident),* $(,)?) => {
        $($vis mod $module;)*
        /// Every named check, module by module.
        static REGISTRY: &[&[CheckDef]] = &[$($module::CHECKS),*];
    };
}

checks! {
    list,
    pagination,
    attach_limit,
    path_state,
    pub(crate) lifecycle,
    pub(crate) data,
    marker,
    name_conflict,
    vvc_reconcile,
    claims,
    capacity,
    health,
    create_race,
    publish_race,
    node_race,
    lifecycles,
    fanout,
    restart_published,
    restart_create,
    paths_gone,
}

/// Every named check, in the order `list --checks` shows them.
fn registry() -> impl Iterator<Item = &'static CheckDef> {
    REGISTRY.iter().flat_map(|m| m.iter())
}

/// A check by name.
pub fn find(name: &str) -> Option<&'static CheckDef> {
    registry().find(|c| c.spec.name == name)
}

/// `(name, one-line description)` of every check, for `csi-conform list --checks`.
pub fn checks() -> impl Iterator<Item = (&'static str, &'static str)> {
    registry().map(|c| (c.spec.name, c.spec.description))
}

/// The built-in checks and properties, as the loader sees them.
pub struct Registry;

impl Catalog for Registry {
    fn check(&self, name: &str) -> Option<&'static CheckSpec> {
        find(name).map(|c| &c.spec)
    }

    fn property(&self, name: &str) -> Option<&'static PropertySpec> {
        properties::find(name).map(|p| &p.spec)
    }

    fn check_names(&self) -> Vec<&'static str> {
        registry().map(|c| c.spec.name).collect()
    }

    fn property_names(&self) -> Vec<&'static str> {
        properties::properties().map(|p| p.name).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;

    #[test]
    fn registry_names_are_unique_and_described() {
        let names: Vec<&str> = checks().map(|(n, _)| n).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names.len(), sorted.len());
        assert!(checks().all(|(_, d)| !d.is_empty() && !d.contains('\n')));
        for c in registry().map(|c| &c.spec) {
            for rpc in c.rpcs {
                assert!(proto::method(rpc).is_some(), "{rpc}");
            }
            let _ = (c.outputs)();
        }
    }

    /// The table of checks in suites/README.md, row by row: (name, its args cell).
    fn documented() -> Vec<(String, String)> {
        let readme = include_str!("../../../../../suites/README.md");
        let section = readme.split("### `check`").nth(1).expect("suites/README.md has a `check` section");
        let section = section.split("\n### ").next().unwrap_or_default();
        section
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| {
                let (name, rest) = l.split_once("` |")?;
                Some((name.to_owned(), rest.split(" | ").next().unwrap_or_default().to_owned()))
            })
            .collect()
    }

    /// suites/README.md documents every registered check, each argument it takes, and no
    /// check that does not exist (also in its examples).
    #[test]
    fn the_readme_table_of_checks_is_the_registry() {
        let rows = documented();
        let registered: Vec<&str> = checks().map(|(n, _)| n).collect();
        let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
        for name in &registered {
            assert!(names.contains(name), "suites/README.md's table of checks lacks `{name}`");
        }
        for name in &names {
            assert!(registered.contains(name), "suites/README.md's table names `{name}`, which is no check");
        }
        for (name, args) in &rows {
            for arg in (find(name).expect("registered").spec.args)() {
                assert!(args.contains(&format!("`{}`", arg.name)), "suites/README.md: `{name}` takes `{}`", arg.name);
            }
        }
        let readme = include_str!("../../../../../suites/README.md");
        for called in readme.lines().filter_map(|l| l.trim_start().strip_prefix("- check: ")) {
            let name = called.split_whitespace().next().unwrap_or_default();
            assert!(find(name).is_some(), "suites/README.md calls `{name}`, which is no check");
        }
    }
}
