//! The typed form of a suite file: suites, scenarios, steps, expectations and assertions, each
//! remembering where it was written. Built only by the loader, so everything in it has been
//! checked (RPC names, request fields, codes, capabilities, variables, regexes).

use std::{fmt, time::Duration};

use prost_reflect::MethodDescriptor;
use regex::Regex;
use tonic::Code;

pub use super::pool::Pool;
use super::{
    catalog::{CheckSpec, PropertySpec},
    request::RequestTemplate,
    vars::FieldPath,
};
use super::bounds::BoundsOverride;
use crate::yaml::{Node, Pos};
use crate::{fingerprint::Capability, report::Severity};

/// Where something was written: `file:line:column`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// The file (or `builtin:NAME.yaml`, `<request>`).
    pub origin: String,
    /// Line and column.
    pub pos: Pos,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.origin, self.pos)
    }
}

/// One suite file.
#[derive(Debug, Clone)]
pub struct Suite {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) description: Option<String>,
    pub(crate) location: Location,
    pub(crate) requires: Requires,
    pub(crate) scenarios: Vec<Scenario>,
}

impl Suite {
    /// The suite id (`controller`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its title.
    pub fn title(&self) -> &str {
        &self.title
    }

    /// Its description, if any.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// Where it came from: `builtin:controller.yaml` or the file path as given.
    pub fn source(&self) -> &str {
        &self.location.origin
    }

    /// Where its `suite:` key is.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The requirements that apply to every scenario.
    pub fn requires(&self) -> &Requires {
        &self.requires
    }

    /// The scenarios, in file order.
    pub fn scenarios(&self) -> &[Scenario] {
        &self.scenarios
    }
}

/// What a scenario (or suite) needs in order to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requires {
    /// `requires`: every one must be advertised.
    pub capabilities: Vec<Capability>,
    /// `requires_any`: at least one must be advertised.
    pub any: Vec<Capability>,
    /// `requires_nodes`: at least this many node endpoints.
    pub nodes: usize,
    /// `requires_option`: opt-ins the run must enable (`attach_limit`).
    pub options: Vec<String>,
    /// `requires_secrets`: secrets-file keys the run's secrets must configure
    /// (`CreateVolumeSecret`).
    pub secrets: Vec<String>,
}

impl Requires {
    /// Both sets of requirements together.
    pub fn merged(&self, other: &Requires) -> Requires {
        let mut out = self.clone();
        for c in &other.capabilities {
            if !out.capabilities.contains(c) {
                out.capabilities.push(*c);
            }
        }
        out.any.extend(other.any.iter().copied());
        out.nodes = out.nodes.max(other.nodes);
        for o in &other.options {
            if !out.options.contains(o) {
                out.options.push(o.clone());
            }
        }
        for k in &other.secrets {
            if !out.secrets.contains(k) {
                out.secrets.push(k.clone());
            }
        }
        out
    }
}

/// The tag of a scenario that runs only as orchestrator instances (`--orchestrator`): its
/// base would test nothing an orchestrator-free run does not.
pub const ORCHESTRATOR_ONLY: &str = "orchestrator-only";

/// One scenario: a titled list of steps with requirements.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) spec: Vec<String>,
    pub(crate) parity: Vec<u32>,
    pub(crate) tags: Vec<String>,
    /// The scenario's own requirements merged with its suite's.
    pub(crate) requires: Requires,
    /// Service capabilities implied by the RPCs it calls.
    pub(crate) implied: Vec<Capability>,
    pub(crate) serial: bool,
    /// `exclusive:`: the pools it needs unchanged by other scenarios while it runs.
    pub(crate) exclusive: Vec<Pool>,
    /// Whether it may use its node paths (`${paths...}`, or a node RPC that takes a path,
    /// itself or through a named check or property): only then are they made for it.
    pub(crate) uses_paths: bool,
    pub(crate) steps: Vec<Step>,
    pub(crate) location: Location,
    /// Set on an instance of a scenario (`<id>@<orchestrator>`): the call pattern its
    /// orchestrated checks follow. `None` on every scenario as loaded.
    pub(crate) orchestrator: Option<crate::orchestrator::Profile>,
}

impl Scenario {
    /// The full id, `<suite>.<id>`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its title.
    pub fn title(&self) -> &str {
        &self.title
    }

    /// The ids of the CSI requirements it checks (see [`crate::spec`]).
    pub fn spec(&self) -> &[String] {
        &self.spec
    }

    /// The csi-sanity case numbers it covers.
    pub fn parity(&self) -> &[u32] {
        &self.parity
    }

    /// Its tags.
    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// Its requirements, its suite's included (not the implied service capabilities).
    pub fn requires(&self) -> &Requires {
        &self.requires
    }

    /// The plugin services its RPCs imply (`plugin:CONTROLLER_SERVICE`...), unless it opted
    /// out with `implicit_requires: false`.
    pub fn implied_requires(&self) -> &[Capability] {
        &self.implied
    }

    /// Whether it runs alone.
    pub fn serial(&self) -> bool {
        self.serial
    }

    /// The pools no other scenario may change while it runs (`exclusive:`).
    pub fn exclusive(&self) -> &[Pool] {
        &self.exclusive
    }

    /// Whether it may use its node paths, so that the run makes them (see [`takes_node_path`]).
    pub fn uses_paths(&self) -> bool {
        self.uses_paths
    }

    /// The orchestrator an instance follows (`None`: the scenario as loaded).
    pub fn orchestrator(&self) -> Option<crate::orchestrator::Profile> {
        self.orchestrator
    }

    /// Its steps.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Where its `id:` is: `file:line:column`.
    pub fn source(&self) -> &Location {
        &self.location
    }
}

/// Whether `rpc` takes a path on the node: its request has a `staging_target_path`,
/// `target_path` or `volume_path` field (NodeStageVolume, NodePublishVolume,
/// NodeGetVolumeStats...). A scenario that may call one gets its paths made.
pub fn takes_node_path(rpc: &str) -> bool {
    crate::proto::method(rpc).is_some_and(|m| {
        let input = m.input();
        ["staging_target_path", "target_path", "volume_path"].iter().any(|f| input.get_field_by_name(f).is_some())
    })
}

impl Step {
    /// The RPCs it may call: its call's, or its named check's or property's.
    pub fn rpcs(&self) -> Vec<&str> {
        match &self.action {
            Action::Call(call) => vec![call.method.name()],
            Action::Check(check) => check.check.rpcs.to_vec(),
            Action::Property(p) => p.property.rpcs.to_vec(),
            Action::Assert(_) => Vec::new(),
        }
    }
}

/// A `when:` condition: a capability that must (or, negated, must not) be advertised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Condition {
    /// `!scope:NAME`.
    pub negated: bool,
    /// The capability.
    pub capability: Capability,
}

/// One step.
#[derive(Debug, Clone)]
pub struct Step {
    /// `name:`, shown in reports.
    pub name: Option<String>,
    /// `when:`: every condition must hold for the step to run.
    pub when: Vec<Condition>,
    /// `spec:`: the requirements this step checks; its findings name them instead of the
    /// scenario's (a response rule's finding names the rule's own).
    pub spec: Vec<String>,
    /// What it does.
    pub action: Action,
    /// Where it starts.
    pub pos: Pos,
}

/// What a step does.
#[derive(Debug, Clone)]
pub enum Action {
    /// One RPC.
    Call(Box<Call>),
    /// Assertions on known values.
    Assert(AssertStep),
    /// A named check.
    Check(CheckStep),
    /// A property checked over generated cases.
    Property(PropertyStep),
}

impl Action {
    /// The RPCs the step may call.
    pub fn rpcs(&self) -> Vec<String> {
        match self {
            Action::Call(call) => vec![call.method.name().to_owned()],
            Action::Check(check) => check.check.rpcs.iter().map(|r| (*r).to_owned()).collect(),
            Action::Property(p) => p.property.rpcs.iter().map(|r| (*r).to_owned()).collect(),
            Action::Assert(_) => Vec::new(),
        }
    }
}

/// A `call` step.
#[derive(Debug, Clone)]
pub struct Call {
    /// The RPC.
    pub method: MethodDescriptor,
    /// `node:` for Node (and Identity) RPCs; `None` means the default.
    pub node: Option<usize>,
    /// The request as written.
    pub request: RequestTemplate,
    /// `secrets:`.
    pub secrets: SecretsMode,
    /// `expect:`.
    pub expect: Expect,
    /// `skip_on:`.
    pub skip_on: Option<SkipOn>,
    /// `save:`.
    pub save: Vec<Save>,
    /// `repeat:`.
    pub repeat: Repeat,
    /// `repeat_compare:`: whether repeated OK responses must equal the first.
    pub repeat_compare: bool,
    /// `poll:`.
    pub poll: Option<Poll>,
}

/// How the request's `secrets` field is filled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SecretsMode {
    /// From the csi-sanity key for the RPC, unless the request sets `secrets` itself.
    Auto,
    /// No secrets.
    None,
    /// From this secrets-file key.
    Key(String),
}

impl fmt::Display for SecretsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretsMode::Auto => f.write_str("auto"),
            SecretsMode::None => f.write_str("none"),
            SecretsMode::Key(k) => f.write_str(k),
        }
    }
}

/// What a call must answer.
#[derive(Debug, Clone)]
pub struct Expect {
    /// The acceptable codes.
    pub codes: ExpectCodes,
    /// The severity of a miss.
    pub otherwise: Severity,
    /// Assertions on an OK response.
    pub fields: Vec<Assertion>,
    /// `kind:`: the finding kind of a miss, instead of `unexpected-code` / `assertion`.
    pub kind: Option<String>,
    /// `reason:`: why the expectation holds, appended to the finding of a miss.
    pub reason: Option<String>,
}

impl Default for Expect {
    fn default() -> Self {
        Expect {
            codes: ExpectCodes::Codes(vec![Code::Ok]),
            otherwise: Severity::Fail,
            fields: Vec::new(),
            kind: None,
            reason: None,
        }
    }
}

impl Expect {
    /// The kind of a finding about a miss: `kind:` if given, else `default`.
    /// A miss with `otherwise: note` is always of kind `note` (see [`crate::report::NOTE_KIND`]).
    pub fn kind_or<'a>(&'a self, default: &'a str) -> &'a str {
        if self.otherwise == Severity::Pass {
            return crate::report::NOTE_KIND;
        }
        self.kind.as_deref().unwrap_or(default)
    }

    /// A finding message with `reason:` appended, if given.
    pub fn explain(&self, message: String) -> String {
        match &self.reason {
            Some(reason) => format!("{message} ({reason})"),
            None => message,
        }
    }
}

/// Acceptable codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectCodes {
    /// One of these.
    Codes(Vec<Code>),
    /// Any code but OK.
    AnyError,
    /// Any code (OK included) but these (`not_code:`).
    Except(Vec<Code>),
}

impl ExpectCodes {
    /// Whether `code` is acceptable.
    pub fn accepts(&self, code: Code) -> bool {
        match self {
            ExpectCodes::Codes(codes) => codes.contains(&code),
            ExpectCodes::AnyError => code != Code::Ok,
            ExpectCodes::Except(codes) => !codes.contains(&code),
        }
    }

    /// Whether the expectation names `code` itself (accepting or refusing it), rather than
    /// merely leaving it out.
    pub fn names(&self, code: Code) -> bool {
        match self {
            ExpectCodes::Codes(codes) | ExpectCodes::Except(codes) => codes.contains(&code),
            ExpectCodes::AnyError => false,
        }
    }

    /// Whether an OK answer is acceptable.
    pub fn accepts_ok(&self) -> bool {
        self.accepts(Code::Ok)
    }
}

impl fmt::Display for ExpectCodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpectCodes::AnyError => f.write_str("any error"),
            ExpectCodes::Codes(codes) => {
                let names: Vec<&str> = codes.iter().map(|c| crate::client::code_name(*c)).collect();
                f.write_str(&names.join(" or "))
            }
            ExpectCodes::Except(codes) => {
                let names: Vec<&str> = codes.iter().map(|c| crate::client::code_name(*c)).collect();
                write!(f, "any code but {}", names.join(" or "))
            }
        }
    }
}

/// `skip_on:`.
#[derive(Debug, Clone)]
pub struct SkipOn {
    /// Codes that make the scenario a skip.
    pub codes: Vec<Code>,
    /// Why, for the report.
    pub reason: Option<String>,
}

/// One `save:` entry: a variable and the path it takes from the response (or check output).
#[derive(Debug, Clone)]
pub struct Save {
    /// The variable name.
    pub var: String,
    /// The path.
    pub path: FieldPath,
    /// Where it is written.
    pub pos: Pos,
}

/// `repeat:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// This many times.
    Times(u32),
    /// `--idempotency-count` times.
    Idempotency,
}

/// `poll:`.
#[derive(Debug, Clone)]
pub struct Poll {
    /// The condition to wait for.
    pub until: Vec<Assertion>,
    /// The longest wait.
    pub timeout: Duration,
    /// The pause between calls.
    pub interval: Duration,
}

/// An `assert` step.
#[derive(Debug, Clone)]
pub struct AssertStep {
    /// The assertions.
    pub assertions: Vec<Assertion>,
    /// `only_if:`: the step applies only when these hold (a rule that binds some plugins only,
    /// such as instances of the same version); otherwise it is passed over.
    pub only_if: Vec<Assertion>,
    /// The severity of a failed assertion.
    pub otherwise: Severity,
}

/// A `check` step.
#[derive(Debug, Clone)]
pub struct CheckStep {
    /// The check.
    pub check: &'static CheckSpec,
    /// Its arguments, as written (variables substituted at run time).
    pub args: Vec<(String, Node)>,
    /// `save:` from its outputs.
    pub save: Vec<Save>,
}

/// A `property` step: an invariant checked over generated capability sets.
#[derive(Debug, Clone)]
pub struct PropertyStep {
    /// The invariant.
    pub property: &'static PropertySpec,
    /// Its arguments, as written (variables substituted at run time).
    pub args: Vec<(String, Node)>,
    /// `bounds:` as written: these keys replace the run's bounds
    /// (`--property-bounds`, or the defaults).
    pub bounds: BoundsOverride,
}

/// What an assertion looks at.
#[derive(Debug, Clone)]
pub enum Subject {
    /// A path into the response (or list element).
    Path(FieldPath),
    /// A value (`assert` steps).
    Value(Node),
}

/// One assertion: a subject and the tests it must pass.
#[derive(Debug, Clone)]
pub struct Assertion {
    /// What it looks at.
    pub subject: Subject,
    /// The tests, all of which must pass.
    pub tests: Vec<Test>,
    /// `or_zero`: numeric comparisons also accept 0.
    pub or_zero: bool,
    /// Where it is written.
    pub pos: Pos,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `ge`.
    Ge,
    /// `le`.
    Le,
    /// `gt`.
    Gt,
    /// `lt`.
    Lt,
    /// `equals` (lengths).
    Eq,
}

impl Cmp {
    /// The symbol, for messages.
    pub fn symbol(self) -> &'static str {
        match self {
            Cmp::Ge => ">=",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Lt => "<",
            Cmp::Eq => "==",
        }
    }

    /// Whether `ordering` (value compared with bound) satisfies the operator.
    pub fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Cmp::Ge => ordering != Less,
            Cmp::Le => ordering != Greater,
            Cmp::Gt => ordering == Greater,
            Cmp::Lt => ordering == Less,
            Cmp::Eq => ordering == Equal,
        }
    }
}

/// One test of an assertion.
#[derive(Debug, Clone)]
pub enum Test {
    /// `equals` / `not_equals` (negated).
    Equals {
        /// The expected value.
        value: Node,
        /// `not_equals`.
        negated: bool,
    },
    /// `non_empty: true` (or `absent: false`).
    NonEmpty,
    /// `absent: true` (or `non_empty: false`).
    Absent,
    /// `ge`, `le`, `gt`, `lt`.
    Compare {
        /// The operator.
        op: Cmp,
        /// The bound.
        bound: Node,
    },
    /// `matches`.
    Matches(Regex),
    /// `length`, `length_ge`, `length_le`.
    Length {
        /// The operator.
        op: Cmp,
        /// The bound.
        bound: Node,
    },
    /// `contains` / `not_contains` (negated).
    Contains {
        /// The element, key or substring.
        value: Node,
        /// `not_contains`.
        negated: bool,
    },
    /// `one_of` with a list written out.
    OneOf(Vec<Node>),
    /// `one_of: "${var}"`: one of the elements of a list variable (e.g. a list saved from
    /// another answer, for order-free comparisons with `each`).
    OneOfList(Node),
    /// `each`: every element satisfies these (paths relative to the element).
    Each(Vec<Assertion>),
}
