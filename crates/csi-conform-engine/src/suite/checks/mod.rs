//! Named checks: what YAML cannot say, written in Rust and called by name from a `check`
//! step, and the named properties of `property` steps. Each check is one file (a folder for
//! the big ones: `lifecycle`, `data`) holding one [`CheckDef`]: its [`CheckSpec`] (name,
//! docs, arguments, outputs, RPCs, pools, demand and cost, all data) and its async body,
//! which works through the scenario's context so everything it creates is tracked and torn
//! down. `REGISTRY` lists them; it is the [`Catalog`] the loader reads (through
//! [`Registry`]) and the table the engine runs from.
//!
//! Adding a named check: write `checks/<name>.rs` with a `pub(super) static CHECK: CheckDef`
//! and add one line to `REGISTRY` (and its `mod` line here). The loader checks its arguments,
//! `list --checks` shows it, and the scheduler budgets it from its spec's `demand` and `cost`.

use crate::suite::catalog::{Catalog, CheckSpec, PropertySpec};

mod api;
pub(crate) mod confirm;
pub(crate) mod properties;
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
    health,
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
}
