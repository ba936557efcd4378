//! The vocabulary of named checks and properties, as data: their argument kinds and specs,
//! a [`CheckSpec`] / [`PropertySpec`] per name (docs, arguments, outputs, the RPCs it may
//! call, the pools it holds and what it demands of the plugin), and the [`Catalog`] interface
//! through which the loader finds them. The runnable bodies live above the context
//! (`checks/`); the model, the loader and the scheduler see only these specs.

use std::{collections::BTreeMap, fmt};

use super::{
    pool::Pool,
    vars::{Ty, Val},
};
use crate::yaml::{Node, Plain};

/// A check's arguments, variables substituted.
pub type CheckArgs = BTreeMap<String, Val>;

/// The type of one argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A string.
    Str,
    /// A whole number from 0 to [`INT_ARG_MAX`] (counts and indices: a literal beyond is a
    /// load error, never an overflow at run time).
    Int,
    /// A whole number in this inclusive range.
    IntIn(i128, i128),
    /// true / false.
    Bool,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// A VolumeCapability (a mapping, or a variable such as `${capability}`).
    Capability,
    /// A list of strings.
    StrList,
    /// A non-empty list of VolumeCapabilities (mappings or variables), or a variable.
    Capabilities,
    /// A map of strings (a mapping of text values, or a variable such as `${parameters}`).
    Map,
}

/// The largest literal an [`ArgKind::Int`] argument takes.
pub const INT_ARG_MAX: i128 = 1_000_000;

/// One argument of a check.
#[derive(Debug, Clone, Copy)]
pub struct ArgSpec {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub kind: ArgKind,
    /// Whether it must be given.
    pub required: bool,
}

/// What the scheduler knows of one use of a check: the step's literal arguments and the
/// plugin's size, from which the check's [`CheckSpec::demand`] and [`CheckSpec::cost`] say
/// what it holds and how long it takes.
#[derive(Debug, Clone, Copy)]
pub struct CheckUse<'a> {
    /// The step's arguments as written (variables unsubstituted).
    pub args: &'a [(String, Node)],
    /// The node endpoints of the run (at least 1).
    pub nodes: usize,
    /// Node 0's `max_volumes_per_node` (0: no limit reported, or no node).
    pub max_volumes_per_node: i64,
    /// `--idempotency-count` (at least 1).
    pub times: u64,
}

/// What one use of a check holds on the plugin at most, at once, beside what its scenario's
/// own calls hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckDemand {
    /// Volumes of its own alive at once (each of the test volume size).
    pub volumes: u32,
    /// Volumes it publishes at once on each node endpoint (by index; missing: none).
    pub publish: Vec<u32>,
    /// It expands volumes (they count at the expansion target).
    pub expands: bool,
    /// It runs with nothing else.
    pub alone: bool,
}

/// A named check as data: what `check:` steps, `list --checks` and the scheduler know of it.
pub struct CheckSpec {
    /// The name used in `check:`.
    pub name: &'static str,
    /// One line for `csi-conform list --checks`.
    pub description: &'static str,
    /// Its arguments, in order (declared by its typed arguments' reader).
    pub args: fn() -> Vec<ArgSpec>,
    /// The values it produces, with their types.
    pub outputs: fn() -> Vec<(&'static str, Ty)>,
    /// The RPCs it may call.
    pub rpcs: &'static [&'static str],
    /// Pools it changes beyond those its RPCs change (the existing volumes it stages).
    pub holds: &'static [Pool],
    /// What one use of it holds on the plugin.
    pub demand: fn(&CheckUse<'_>) -> CheckDemand,
    /// How long one use of it takes, in sequential RPCs.
    pub cost: fn(&CheckUse<'_>) -> u64,
    /// It follows an orchestrator's call pattern when its scenario runs as an instance
    /// (`<id>@<orchestrator>`, `--orchestrator`): the engine makes one instance per chosen
    /// orchestrator of every scenario that uses such a check.
    pub orchestrated: bool,
}

impl fmt::Debug for CheckSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckSpec").field("name", &self.name).finish_non_exhaustive()
    }
}

/// A property (an invariant checked over generated cases) as data. A case that may call
/// CreateVolume holds one volume; its cost is its RPCs per case.
pub struct PropertySpec {
    /// The name used in `property:`.
    pub name: &'static str,
    /// One line for `csi-conform list --checks`.
    pub description: &'static str,
    /// Its arguments.
    pub args: &'static [ArgSpec],
    /// The RPCs a case may call.
    pub rpcs: &'static [&'static str],
}

impl fmt::Debug for PropertySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PropertySpec").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Where the loader finds the checks and properties a suite names: the built-in registry
/// implements it (`checks::Registry`), so the loader never imports the runnable checks.
pub trait Catalog: Sync {
    /// The check called `name`.
    fn check(&self, name: &str) -> Option<&'static CheckSpec>;
    /// The property called `name`.
    fn property(&self, name: &str) -> Option<&'static PropertySpec>;
    /// Every check's name (for "did you mean").
    fn check_names(&self) -> Vec<&'static str>;
    /// Every property's name.
    fn property_names(&self) -> Vec<&'static str>;
}

/// Checks a literal (variable-free) argument against its kind.
pub(crate) fn check_arg_literal(kind: ArgKind, node: &Node) -> Result<(), String> {
    match (kind, node.plain()) {
        (ArgKind::Str, Some(Plain::Str(_))) | (ArgKind::Bool, Some(Plain::Bool(_))) => Ok(()),
        (ArgKind::Int, Some(Plain::Int(i))) if (0..=INT_ARG_MAX).contains(&i) => Ok(()),
        (ArgKind::IntIn(lo, hi), Some(Plain::Int(i))) if (lo..=hi).contains(&i) => Ok(()),
        (ArgKind::Int, Some(Plain::Int(i))) => Err(format!("expects a whole number from 0 to {INT_ARG_MAX}, not {i}")),
        (ArgKind::IntIn(lo, hi), Some(Plain::Int(i))) => Err(format!("expects a whole number from {lo} to {hi}, not {i}")),
        (ArgKind::Choice(words), Some(Plain::Str(s))) if words.contains(&s) => Ok(()),
        (ArgKind::Capability, None) if node.as_map().is_some() => Ok(()),
        (ArgKind::StrList, None) if node.as_seq().is_some_and(|items| items.iter().all(is_scalar)) => Ok(()),
        (ArgKind::Capabilities, None)
            if node.as_seq().is_some_and(|items| {
                !items.is_empty()
                    && items.iter().all(|i| i.as_map().is_some() || i.scalar_text().is_some_and(|t| t.contains("${")))
            }) =>
        {
            Ok(())
        }
        (ArgKind::Map, None)
            if node.as_map().is_some_and(|entries| {
                entries.iter().all(|(_, v)| v.scalar_text().is_some() && !v.is_null())
            }) =>
        {
            Ok(())
        }
        (ArgKind::Str, _) => Err(format!("expects a string, not {}", node.describe())),
        (ArgKind::Bool, _) => Err(format!("expects true or false, not {}", node.describe())),
        (ArgKind::Int | ArgKind::IntIn(..), _) => Err(format!("expects a whole number, not {}", node.describe())),
        (ArgKind::Choice(words), _) => Err(format!(
            "expects one of {}, not {}",
            words.join(", "),
            node.scalar_text().map_or_else(|| node.describe().to_owned(), |t| format!("{t:?}"))
        )),
        (ArgKind::Capability, _) => Err(format!("expects a VolumeCapability mapping, not {}", node.describe())),
        (ArgKind::StrList, _) => Err(format!("expects a list of strings, not {}", node.describe())),
        (ArgKind::Capabilities, _) => {
            Err(format!("expects a non-empty list of VolumeCapability mappings, not {}", node.describe()))
        }
        (ArgKind::Map, _) => Err(format!("expects a mapping of text values, not {}", node.describe())),
    }
}

fn is_scalar(node: &Node) -> bool {
    node.scalar_text().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literal(kind: ArgKind, text: &str) -> Result<(), String> {
        check_arg_literal(kind, &crate::yaml::parse(text).unwrap().unwrap())
    }

    /// A whole number a check cannot take is a load error (so `suites check` rejects it),
    /// never an overflow or a refusal at run time.
    #[test]
    fn whole_numbers_out_of_range_are_load_errors() {
        assert_eq!(literal(ArgKind::Int, "5"), Ok(()));
        assert_eq!(literal(ArgKind::Int, "1000000"), Ok(()));
        let err = literal(ArgKind::Int, "0x7fffffffffffffff").unwrap_err();
        assert_eq!(err, "expects a whole number from 0 to 1000000, not 9223372036854775807");
        assert!(literal(ArgKind::Int, "-1").is_err());
        assert_eq!(literal(ArgKind::IntIn(1, 4), "4"), Ok(()));
        assert_eq!(literal(ArgKind::IntIn(1, 4), "0").unwrap_err(), "expects a whole number from 1 to 4, not 0");
        assert_eq!(literal(ArgKind::IntIn(1, 4), "x").unwrap_err(), "expects a whole number, not a string");
    }
}
