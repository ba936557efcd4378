//! The check API: the [`Check`] trait a named check implements, the typed [`Args`] it takes
//! (read by an [`ArgReader`], which also declares them to the loader, so each argument's name,
//! kind and default are written once), and the [`CheckDef`] the registry holds: the check's
//! [`CheckSpec`] (the data the loader and the scheduler see) and its body, both made from
//! the trait by [`CheckDef::of`].

use std::{collections::BTreeMap, future::Future, pin::Pin};

use crate::suite::{
    catalog::{ArgKind, ArgSpec, CheckArgs, CheckDemand, CheckSpec, CheckUse},
    ctx::{CheckOutcome, ScenarioCtx, bad_arg},
    pool::Pool,
    vars::{Ty, Val, Vars},
};

/// The future a check body returns.
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = CheckOutcome> + Send + 'a>>;

/// A named check: what `check:` steps call. The associated constants are its declaration
/// (the scheduler sees those, never the name); `demand` and `cost` read the same typed
/// arguments as the body (literal ones: an argument given as a `${variable}` takes its
/// default there).
pub trait Check: 'static {
    /// Its arguments.
    type Args: Args;
    /// The name used in `check:`.
    const NAME: &'static str;
    /// One line for `csi-conform list --checks`.
    const DESCRIPTION: &'static str;
    /// The RPCs it may call.
    const RPCS: &'static [&'static str];
    /// Pools it changes beyond those its RPCs change.
    const HOLDS: &'static [Pool] = &[];
    /// It follows an orchestrator's call pattern (see [`CheckSpec::orchestrated`]).
    const ORCHESTRATED: bool = false;

    /// The values it produces, with their types (what `save:` may name).
    fn outputs() -> Vec<(&'static str, Ty)> {
        Vec::new()
    }

    /// What one use of it holds on the plugin at most, at once (default: nothing of its own).
    fn demand(_args: &Self::Args, _run: &CheckUse<'_>) -> CheckDemand {
        CheckDemand::default()
    }

    /// How long one use of it takes, in sequential RPCs (default: a few).
    fn cost(_args: &Self::Args, _run: &CheckUse<'_>) -> u64 {
        3
    }

    /// The body: `Box::pin(an_async_fn(ctx, args))`.
    fn run(ctx: &mut ScenarioCtx, args: Self::Args) -> CheckFuture<'_>;
}

/// A check's typed arguments: `read` takes each one from the reader, naming its kind and its
/// default once; the same function declares them to the loader and fills them at run time.
pub trait Args: Sized + Send + 'static {
    /// Reads every argument, in the order the docs list them.
    fn read(a: &mut ArgReader<'_>) -> Self;
}

/// No arguments.
impl Args for () {
    fn read(_: &mut ArgReader<'_>) -> Self {}
}

/// Reads a check's arguments: while declaring (no values) it records each one's [`ArgSpec`]
/// and returns defaults; at run time it converts the substituted values, keeping the first
/// error; for demand and cost it reads the literal values and ignores errors (the loader
/// already judged them).
pub struct ArgReader<'a> {
    values: Option<&'a CheckArgs>,
    strict: bool,
    specs: Vec<ArgSpec>,
    error: Option<String>,
}

impl<'a> ArgReader<'a> {
    fn new(values: Option<&'a CheckArgs>, strict: bool) -> Self {
        ArgReader { values, strict, specs: Vec::new(), error: None }
    }

    /// Declares one argument and returns its value, if given.
    fn take(&mut self, name: &'static str, kind: ArgKind, required: bool) -> Option<&'a Val> {
        self.specs.push(ArgSpec { name, kind, required });
        let value = self.values.and_then(|v| v.get(name)).filter(|v| **v != Val::Null);
        if value.is_none() && required && self.values.is_some() {
            self.fail(format!("needs argument `{name}`"));
        }
        value
    }

    fn fail(&mut self, message: String) {
        if self.strict && self.error.is_none() {
            self.error = Some(message);
        }
    }

    fn or<T>(&mut self, result: Result<T, String>, default: T) -> T {
        result.unwrap_or_else(|e| {
            self.fail(e);
            default
        })
    }

    /// A required string.
    pub fn str(&mut self, name: &'static str) -> String {
        self.take(name, ArgKind::Str, true).and_then(Val::to_text).unwrap_or_default()
    }

    /// An optional string.
    pub fn opt_str(&mut self, name: &'static str) -> Option<String> {
        self.take(name, ArgKind::Str, false).and_then(Val::to_text)
    }

    /// A required whole number from 0 to [`INT_ARG_MAX`](super::super::catalog::INT_ARG_MAX).
    pub fn req_int(&mut self, name: &'static str) -> i64 {
        let value = self.take(name, ArgKind::Int, true);
        self.whole(name, value).unwrap_or_default()
    }

    /// An optional whole number from 0 to [`INT_ARG_MAX`](super::super::catalog::INT_ARG_MAX).
    pub fn opt_int(&mut self, name: &'static str) -> Option<i64> {
        let value = self.take(name, ArgKind::Int, false);
        self.whole(name, value)
    }

    /// A whole number from 0, `default` when not given.
    pub fn int(&mut self, name: &'static str, default: i64) -> i64 {
        self.opt_int(name).unwrap_or(default)
    }

    /// An optional whole number from `lo` to `hi`.
    pub fn opt_int_in(&mut self, name: &'static str, lo: i128, hi: i128) -> Option<i64> {
        let value = self.take(name, ArgKind::IntIn(lo, hi), false);
        self.whole(name, value)
    }

    fn whole(&mut self, name: &str, value: Option<&Val>) -> Option<i64> {
        let parsed = match value {
            None => Ok(None),
            Some(Val::Int(i)) => i64::try_from(*i).map(Some).map_err(|_| format!("argument {name} is out of range")),
            Some(Val::Str(s)) => {
                s.trim().parse().map(Some).map_err(|_| format!("argument {name} must be a whole number, not {s:?}"))
            }
            Some(other) => Err(format!("argument {name} must be a whole number, not {}", other.describe())),
        };
        self.or(parsed, None)
    }

    /// true / false, `default` when not given.
    pub fn bool(&mut self, name: &'static str, default: bool) -> bool {
        let parsed = match self.take(name, ArgKind::Bool, false) {
            None => Ok(default),
            Some(Val::Bool(b)) => Ok(*b),
            Some(Val::Str(s)) if s == "true" || s == "false" => Ok(s == "true"),
            Some(other) => Err(format!("argument {name} must be true or false, not {}", other.describe())),
        };
        self.or(parsed, default)
    }

    /// A required word of `words` (the body judges a word a variable brought).
    pub fn choice(&mut self, name: &'static str, words: &'static [&'static str]) -> String {
        self.take(name, ArgKind::Choice(words), true).and_then(Val::to_text).unwrap_or_default()
    }

    /// An optional word of `words`.
    pub fn opt_choice(&mut self, name: &'static str, words: &'static [&'static str]) -> Option<String> {
        self.take(name, ArgKind::Choice(words), false).and_then(Val::to_text)
    }

    /// A VolumeCapability as given (Null when not given; `required` or not).
    pub fn capability(&mut self, name: &'static str, required: bool) -> Val {
        self.take(name, ArgKind::Capability, required).cloned().unwrap_or(Val::Null)
    }

    /// A required non-empty list of VolumeCapabilities, as given.
    pub fn capabilities(&mut self, name: &'static str) -> Val {
        self.take(name, ArgKind::Capabilities, true).cloned().unwrap_or(Val::Null)
    }

    /// An optional mapping of text values, as given (Null when not given).
    pub fn map(&mut self, name: &'static str) -> Val {
        self.take(name, ArgKind::Map, false).cloned().unwrap_or(Val::Null)
    }

    /// An optional mapping of text values, as strings (empty when not given).
    pub fn string_map(&mut self, name: &'static str) -> BTreeMap<String, String> {
        let parsed = match self.take(name, ArgKind::Map, false) {
            None => Ok(BTreeMap::new()),
            Some(Val::Map(entries)) => entries
                .iter()
                .map(|(k, v)| match v.to_text() {
                    Some(t) if !matches!(v, Val::Null) => Ok((k.clone(), t)),
                    _ => Err(format!("argument {name}: the value of {k:?} must be a string, not {}", v.describe())),
                })
                .collect(),
            Some(other) => Err(format!("argument {name} must be a mapping of strings, not {}", other.describe())),
        };
        self.or(parsed, BTreeMap::new())
    }

    /// An optional list of strings.
    pub fn str_list(&mut self, name: &'static str) -> Option<Vec<String>> {
        let parsed = match self.take(name, ArgKind::StrList, false) {
            None => Ok(None),
            Some(Val::List(items)) => items
                .iter()
                .map(|v| match v {
                    Val::List(_) | Val::Map(_) | Val::Message(_) | Val::Null => {
                        Err(format!("argument {name} must be a list of strings, not a list holding {}", v.describe()))
                    }
                    v => Ok(v.to_text().unwrap_or_default()),
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(other) => Err(format!("argument {name} must be a list of strings, not {}", other.describe())),
        };
        self.or(parsed, None)
    }
}

/// The arguments `A` declares, in order.
pub fn declared<A: Args>() -> Vec<ArgSpec> {
    let mut reader = ArgReader::new(None, false);
    A::read(&mut reader);
    reader.specs
}

/// `A` with every argument at its default (none given).
pub fn defaults<A: Args>() -> A {
    A::read(&mut ArgReader::new(None, false))
}

/// `A` from a step's arguments, variables substituted.
pub fn parse<A: Args>(values: &CheckArgs) -> Result<A, String> {
    let mut reader = ArgReader::new(Some(values), true);
    let args = A::read(&mut reader);
    reader.error.map_or(Ok(args), Err)
}

/// `A` from a step's literal arguments (one given as a variable takes its default).
pub fn literal<A: Args>(run: &CheckUse<'_>) -> A {
    let none = Vars::new();
    let values: CheckArgs = run.args.iter().filter_map(|(n, node)| Some((n.clone(), none.eval(node).ok()?))).collect();
    A::read(&mut ArgReader::new(Some(&values), false))
}

/// A named check in the registry: its spec (data) and its body, both from a [`Check`].
pub struct CheckDef {
    /// What it is, as data.
    pub spec: CheckSpec,
    /// The body, on untyped arguments (it reads the typed ones first).
    pub run: for<'a> fn(&'a mut ScenarioCtx, CheckArgs) -> CheckFuture<'a>,
}

impl CheckDef {
    /// The registry entry of `C`.
    pub const fn of<C: Check>() -> CheckDef {
        CheckDef {
            spec: CheckSpec {
                name: C::NAME,
                description: C::DESCRIPTION,
                args: declared::<C::Args>,
                outputs: C::outputs,
                rpcs: C::RPCS,
                holds: C::HOLDS,
                demand: demand_of::<C>,
                cost: cost_of::<C>,
                orchestrated: C::ORCHESTRATED,
            },
            run: run_of::<C>,
        }
    }
}

fn demand_of<C: Check>(run: &CheckUse<'_>) -> CheckDemand {
    C::demand(&literal(run), run)
}

fn cost_of<C: Check>(run: &CheckUse<'_>) -> u64 {
    C::cost(&literal(run), run)
}

fn run_of<C: Check>(ctx: &mut ScenarioCtx, values: CheckArgs) -> CheckFuture<'_> {
    match parse(&values) {
        Ok(args) => C::run(ctx, args),
        Err(e) => Box::pin(async move { bad_arg(ctx, format!("check {}: {e}", C::NAME)) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sample {
        volumes: i64,
        path: String,
        repeat: bool,
        size: i64,
    }

    impl Args for Sample {
        fn read(a: &mut ArgReader<'_>) -> Self {
            Sample { volumes: a.int("volumes", 5), path: a.str("path"), repeat: a.bool("repeat", true), size: a.req_int("size") }
        }
    }

    fn step(text: &str) -> Vec<(String, crate::yaml::Node)> {
        let node = crate::yaml::parse(text).unwrap().unwrap();
        node.as_map().unwrap().iter().map(|(k, v)| (k.scalar_text().unwrap().to_owned(), v.clone())).collect()
    }

    /// One reader declares the arguments (in order, with kinds and whether required), gives
    /// their defaults, fills them at run time, and reads literal ones for demand and cost.
    #[test]
    fn one_reader_declares_defaults_parses_and_reads_literals() {
        let specs: Vec<_> = declared::<Sample>().into_iter().map(|s| (s.name, s.kind, s.required)).collect();
        assert_eq!(
            specs,
            [("volumes", ArgKind::Int, false), ("path", ArgKind::Str, true), ("repeat", ArgKind::Bool, false), ("size", ArgKind::Int, true)]
        );
        let d = defaults::<Sample>();
        assert_eq!((d.volumes, d.path.as_str(), d.repeat), (5, "", true));

        let values = CheckArgs::from([
            ("volumes".into(), Val::Int(7)),
            ("path".into(), Val::Str("/p".into())),
            ("size".into(), Val::Str("4096".into())),
        ]);
        let s = parse::<Sample>(&values).unwrap();
        assert_eq!((s.volumes, s.path.as_str(), s.repeat, s.size), (7, "/p", true, 4096));
        let wrong = CheckArgs::from([
            ("path".into(), Val::Str("/p".into())),
            ("repeat".into(), Val::Int(1)),
            ("size".into(), Val::Int(1)),
        ]);
        assert_eq!(parse::<Sample>(&wrong).err().unwrap(), "argument repeat must be true or false, not an integer");
        assert_eq!(parse::<Sample>(&CheckArgs::new()).err().unwrap(), "needs argument `path`");

        let args = step("{volumes: 9, path: \"${p}\"}");
        let run = CheckUse { args: &args, nodes: 1, max_volumes_per_node: 0, times: 1 };
        assert_eq!(literal::<Sample>(&run).volumes, 9);
        let args = step("{volumes: \"${n}\"}");
        let run = CheckUse { args: &args, nodes: 1, max_volumes_per_node: 0, times: 1 };
        assert_eq!(literal::<Sample>(&run).volumes, 5, "a variable takes the default");
    }
}
