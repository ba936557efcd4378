//! The requirement inventories of CSI v1.12 (`suites/spec/v1.12.yaml`) and of what v1.13
//! changes (`suites/spec/v1.13.yaml`: `removes` and new requirements), built in: their strict
//! loader (every problem as `file:line:col`), lookups by requirement id, and the coverage
//! matrix that joins it with the requirement ids scenarios name in their `spec:` lists.
//!
//! Which scenarios check a requirement is never written in the inventory: it is derived from
//! the scenarios, so the two cannot drift. This module knows nothing of suites; callers hand
//! it `(scenario id, requirement ids)` pairs.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::{self, Write as _},
    sync::OnceLock,
};

use serde::Serialize;

use crate::yaml::{self, Node, NodeKind, Plain, Pos};

/// The inventory text, embedded at build time.
pub const INVENTORY: &str = include_str!("../../../suites/spec/v1.12.yaml");

/// How the built-in inventory is named in errors.
pub const ORIGIN: &str = "suites/spec/v1.12.yaml";

/// The v1.13 changes (removed v1.12 ids and new requirements), embedded at build time.
pub const INVENTORY_1_13: &str = include_str!("../../../suites/spec/v1.13.yaml");

/// How the v1.13 inventory is named in errors.
pub const ORIGIN_1_13: &str = "suites/spec/v1.13.yaml";

/// The level of a requirement (RFC 2119 words; MUST covers MUST NOT, SHALL and REQUIRED).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    /// MUST, MUST NOT, SHALL, SHALL NOT, REQUIRED.
    Must,
    /// SHOULD, SHOULD NOT, RECOMMENDED.
    Should,
    /// MAY, OPTIONAL.
    May,
}

impl Level {
    /// `MUST`, `SHOULD` or `MAY`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
            Level::May => "MAY",
        }
    }
}

/// One requirement of the spec on a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// Stable id, e.g. `CreateVolume.errors.already-exists`.
    pub id: String,
    /// The RPC, or a topic (`General`, `ErrorScheme`, ...).
    pub rpc: String,
    /// The spec.md anchor of its section.
    pub anchor: String,
    /// MUST / SHOULD / MAY.
    pub level: Level,
    /// What it asks, in our words.
    pub summary: String,
    /// For error-table rows: the code the plugin must answer.
    pub code: Option<String>,
    /// Why no CO-side check can exercise it.
    pub untestable: Option<String>,
    /// Why it is testable but unchecked so far.
    pub gap: Option<String>,
    /// Where it is written in the inventory.
    pub pos: Pos,
    link: String,
}

impl Requirement {
    /// The link into the spec: `<base>#<anchor>`.
    pub fn link(&self) -> &str {
        &self.link
    }

    /// Whether it is a row of an RPC's error table.
    pub fn is_error_row(&self) -> bool {
        self.code.is_some()
    }
}

/// The whole inventory.
#[derive(Debug, Clone)]
pub struct Inventory {
    /// The spec version, `v1.12.0`.
    pub version: String,
    /// spec.md at that version.
    pub base: String,
    /// The anchors of the headings the file lists.
    pub anchors: BTreeSet<String>,
    /// The requirements, in file order.
    pub requirements: Vec<Requirement>,
    /// Ids of the previous version's requirements this version drops (`removes`).
    pub removes: Vec<String>,
    index: BTreeMap<String, usize>,
}

/// One problem in an inventory text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryError {
    /// The file.
    pub origin: String,
    /// Where in it.
    pub pos: Pos,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for InventoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.origin, self.pos.line, self.pos.col, self.message)
    }
}

/// Every problem found in an inventory, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InventoryErrors(pub Vec<InventoryError>);

impl fmt::Display for InventoryErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

/// The anchor GitHub gives a markdown heading: lower case, letters, digits, `-` and `_`
/// kept, spaces turned into dashes, everything else dropped.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The gRPC code names an error row may carry.
const CODES: &[&str] = &[
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "UNAUTHENTICATED",
];

const TOP_KEYS: &[&str] = &["version", "base", "headings", "requirements", "removes"];
const ENTRY_KEYS: &[&str] = &["id", "rpc", "anchor", "level", "summary", "code", "untestable", "gap"];

struct Loader<'a> {
    origin: &'a str,
    errors: Vec<InventoryError>,
}

impl Loader<'_> {
    fn err(&mut self, pos: Pos, message: impl Into<String>) {
        self.errors.push(InventoryError { origin: self.origin.to_owned(), pos, message: message.into() });
    }

    fn map<'n>(&mut self, node: &'n Node, what: &str, known: &[&str]) -> Option<&'n [(Node, Node)]> {
        let Some(entries) = node.as_map() else {
            self.err(node.pos, format!("{what} must be a mapping, not {}", node.describe()));
            return None;
        };
        for (k, _) in entries {
            let name = k.scalar_text().unwrap_or_default();
            if !known.contains(&name) {
                self.err(k.pos, format!("unknown key {name:?} in {what}; known keys: {}", known.join(", ")));
            }
        }
        Some(entries)
    }

    fn string(&mut self, node: &Node, what: &str) -> Option<String> {
        match node.plain() {
            Some(Plain::Str(s)) if !s.trim().is_empty() => Some(s.to_owned()),
            _ => {
                self.err(node.pos, format!("{what} must be a non-empty string, not {}", node.describe()));
                None
            }
        }
    }
}

fn get<'n>(entries: &'n [(Node, Node)], key: &str) -> Option<&'n Node> {
    entries.iter().find(|(k, _)| k.scalar_text() == Some(key)).map(|(_, v)| v)
}

fn valid_id(id: &str) -> bool {
    let mut parts = id.split('.');
    let first = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    first.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && first.chars().all(|c| c.is_ascii_alphanumeric())
        && !rest.is_empty()
        && rest.iter().all(|p| {
            !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
}

/// Loads an inventory from text; `origin` names it in errors.
pub fn load_str(origin: &str, text: &str) -> Result<Inventory, InventoryErrors> {
    let mut l = Loader { origin, errors: Vec::new() };
    let root = match yaml::parse(text) {
        Ok(Some(root)) => root,
        Ok(None) => {
            l.err(Pos { line: 1, col: 1 }, "the inventory is empty");
            return Err(InventoryErrors(l.errors));
        }
        Err(errs) => {
            for e in errs {
                l.err(e.pos, e.message);
            }
            return Err(InventoryErrors(l.errors));
        }
    };
    let Some(top) = l.map(&root, "the inventory", TOP_KEYS) else {
        return Err(InventoryErrors(l.errors));
    };
    let need = |l: &mut Loader<'_>, key: &str| {
        let found = get(top, key);
        if found.is_none() {
            l.err(root.pos, format!("the inventory needs `{key}`"));
        }
        found
    };
    let version = need(&mut l, "version").and_then(|n| l.string(n, "version"));
    let base = need(&mut l, "base").and_then(|n| l.string(n, "base"));
    let headings = need(&mut l, "headings");
    let list = need(&mut l, "requirements");
    if let Some(b) = &base
        && !b.starts_with("https://")
    {
        l.err(get(top, "base").map_or(root.pos, |n| n.pos), "base must be an https:// link to spec.md");
    }
    let mut anchors = BTreeSet::new();
    if let Some(h) = headings {
        match h.as_seq() {
            Some(items) => {
                for item in items {
                    if let Some(text) = l.string(item, "a heading")
                        && !anchors.insert(slug(&text))
                    {
                        l.err(item.pos, format!("heading {text:?} is listed twice"));
                    }
                }
            }
            None => l.err(h.pos, format!("headings must be a list, not {}", h.describe())),
        }
    }
    let mut requirements = Vec::new();
    let mut index = BTreeMap::new();
    if let Some(list) = list {
        match &list.kind {
            NodeKind::Seq(items) => {
                for item in items {
                    if let Some(r) = entry(&mut l, item, &anchors, base.as_deref().unwrap_or_default()) {
                        if index.contains_key(&r.id) {
                            l.err(item.pos, format!("requirement id {} is listed twice", r.id));
                            continue;
                        }
                        index.insert(r.id.clone(), requirements.len());
                        requirements.push(r);
                    }
                }
            }
            _ => l.err(list.pos, format!("requirements must be a list, not {}", list.describe())),
        }
    }
    let mut removes = Vec::new();
    if let Some(r) = get(top, "removes") {
        match r.as_seq() {
            Some(items) => removes = items.iter().filter_map(|i| l.string(i, "a removed requirement id")).collect(),
            None => l.err(r.pos, format!("removes must be a list, not {}", r.describe())),
        }
    }
    if !l.errors.is_empty() {
        return Err(InventoryErrors(l.errors));
    }
    Ok(Inventory { version: version.unwrap_or_default(), base: base.unwrap_or_default(), anchors, requirements, removes, index })
}

fn entry(l: &mut Loader<'_>, node: &Node, anchors: &BTreeSet<String>, base: &str) -> Option<Requirement> {
    let fields = l.map(node, "a requirement", ENTRY_KEYS)?;
    let field = |l: &mut Loader<'_>, key: &str| match get(fields, key) {
        Some(n) => l.string(n, key).map(|s| (s, n.pos)),
        None => {
            l.err(node.pos, format!("a requirement needs `{key}`"));
            None
        }
    };
    let id = field(l, "id");
    let rpc = field(l, "rpc");
    let anchor = field(l, "anchor");
    let level = field(l, "level");
    let summary = field(l, "summary");
    let optional = |l: &mut Loader<'_>, key: &str| get(fields, key).and_then(|n| l.string(n, key).map(|s| (s, n.pos)));
    let code = optional(l, "code");
    let untestable = optional(l, "untestable");
    let gap = optional(l, "gap");
    let (id, id_pos) = id?;
    if !valid_id(&id) {
        l.err(id_pos, format!("requirement id {id:?} must be <Rpc or Topic>.<part>[.<part>...], parts in a-z, 0-9 and '-'"));
    }
    let (rpc, rpc_pos) = rpc?;
    if id.split('.').next() != Some(rpc.as_str()) {
        // Ids start with their RPC or topic, so that an id says where it belongs.
        l.err(rpc_pos, format!("rpc {rpc:?} does not match the id {id:?}, which must start with it"));
    }
    let (anchor, anchor_pos) = anchor?;
    if !anchors.contains(&anchor) {
        l.err(anchor_pos, format!("anchor {anchor:?} is not the anchor of any heading listed in `headings`"));
    }
    let (level, level_pos) = level?;
    let level = match level.as_str() {
        "MUST" => Level::Must,
        "SHOULD" => Level::Should,
        "MAY" => Level::May,
        other => {
            l.err(level_pos, format!("level {other:?} must be MUST, SHOULD or MAY"));
            return None;
        }
    };
    let (summary, _) = summary?;
    if let Some((c, pos)) = &code
        && !CODES.contains(&c.as_str())
    {
        l.err(*pos, format!("code {c:?} is not a gRPC error code an error table uses ({})", CODES.join(", ")));
    }
    if id.contains(".errors.") != code.is_some() {
        l.err(node.pos, format!("{id}: error-table rows (ids with .errors.) and only they carry a `code`"));
    }
    if let (Some(_), Some((_, pos))) = (&untestable, &gap) {
        l.err(*pos, format!("{id}: a requirement is either untestable or a gap, not both"));
    }
    Some(Requirement {
        link: format!("{base}#{anchor}"),
        id,
        rpc,
        anchor,
        level,
        summary,
        code: code.map(|(c, _)| c),
        untestable: untestable.map(|(s, _)| s),
        gap: gap.map(|(s, _)| s),
        pos: id_pos,
    })
}

/// The built-in inventory. It is checked by the unit tests, so a broken one is a bug of
/// this build; the panic names the file, line and problem.
pub fn builtin() -> &'static Inventory {
    static INV: OnceLock<Inventory> = OnceLock::new();
    INV.get_or_init(|| match load_str(ORIGIN, INVENTORY) {
        Ok(inv) => inv,
        Err(e) => panic!("the built-in requirement inventory is broken:\n{e}"),
    })
}

fn additions_1_13() -> &'static Inventory {
    static INV: OnceLock<Inventory> = OnceLock::new();
    INV.get_or_init(|| match load_str(ORIGIN_1_13, INVENTORY_1_13) {
        Ok(inv) => inv,
        Err(e) => panic!("the built-in v1.13 requirement inventory is broken:\n{e}"),
    })
}

/// The whole inventory of one spec version: v1.12's, or v1.12's without what v1.13 removes
/// plus what it adds.
pub fn for_version(version: crate::version::SpecVersion) -> &'static Inventory {
    static V13: OnceLock<Inventory> = OnceLock::new();
    match version {
        crate::version::SpecVersion::V1_12 => builtin(),
        crate::version::SpecVersion::V1_13 => V13.get_or_init(|| {
            let (old, new) = (builtin(), additions_1_13());
            let mut requirements: Vec<Requirement> =
                old.requirements.iter().filter(|r| !new.removes.contains(&r.id)).cloned().collect();
            requirements.extend(new.requirements.iter().cloned());
            let index = requirements.iter().enumerate().map(|(i, r)| (r.id.clone(), i)).collect();
            Inventory {
                version: new.version.clone(),
                base: new.base.clone(),
                anchors: old.anchors.union(&new.anchors).cloned().collect(),
                requirements,
                removes: new.removes.clone(),
                index,
            }
        }),
    }
}

/// A requirement of either version, by id (what a scenario's `spec:` may name).
pub fn lookup(id: &str) -> Option<&'static Requirement> {
    builtin().get(id).or_else(|| additions_1_13().get(id))
}

impl Inventory {
    /// The requirement with this id.
    pub fn get(&self, id: &str) -> Option<&Requirement> {
        self.index.get(id).map(|&i| &self.requirements[i])
    }

    /// The error text for an id the inventory does not have: what `spec:` takes, and the
    /// ids that look closest (those of the same RPC or topic, or sharing a part).
    pub fn unknown_id_text(&self, id: &str) -> String {
        let head = id.split(['.', ' ']).next().unwrap_or_default();
        let mut close: Vec<&str> =
            self.requirements.iter().filter(|r| r.rpc == head).map(|r| r.id.as_str()).collect();
        if close.is_empty() {
            let lower = id.to_lowercase();
            close = self
                .requirements
                .iter()
                .filter(|r| r.id.to_lowercase().contains(&lower) || lower.contains(&r.id.to_lowercase()))
                .map(|r| r.id.as_str())
                .collect();
        }
        let mut text = format!(
            "unknown requirement id {id:?}: `spec:` takes a list of requirement ids from {ORIGIN} \
             (e.g. spec: [CreateVolume.errors.already-exists]); `csi-conform list --spec --requirements` lists them"
        );
        if !close.is_empty() {
            let shown: Vec<&str> = close.iter().take(12).copied().collect();
            let more = if close.len() > shown.len() { format!(" and {} more", close.len() - shown.len()) } else { String::new() };
            let _ = write!(text, "; ids of {head}: {}{more}", shown.join(", "));
        }
        text
    }
}

/// How a requirement is accounted for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status", content = "detail")]
pub enum Status {
    /// Scenarios name it (their ids).
    Covered(Vec<String>),
    /// No CO-side check can exercise it (why).
    Untestable(String),
    /// Only opt-in suites check it (their names: `stress`), which a default run does not
    /// load: neither a gap nor covered by the run.
    OptIn(Vec<String>),
    /// Testable but unchecked so far (why).
    Gap(String),
    /// Neither covered nor explained: a bug of the inventory.
    Unaccounted,
}

/// Requirement counts of one RPC or topic (or of the whole spec).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// All requirements.
    pub total: usize,
    /// Named by at least one scenario.
    pub covered: usize,
    /// Explained as untestable.
    pub untestable: usize,
    /// Checked only by opt-in suites (testable, not covered by the default suites).
    pub opt_in: usize,
    /// Testable, not yet covered.
    pub gap: usize,
    /// Neither covered nor explained.
    pub unaccounted: usize,
}

impl Tally {
    fn add(&mut self, status: &Status) {
        self.total += 1;
        match status {
            Status::Covered(_) => self.covered += 1,
            Status::Untestable(_) => self.untestable += 1,
            Status::OptIn(_) => self.opt_in += 1,
            Status::Gap(_) => self.gap += 1,
            Status::Unaccounted => self.unaccounted += 1,
        }
    }

    /// Requirements a scenario could check: all but the untestable ones.
    pub fn testable(&self) -> usize {
        self.total - self.untestable
    }

    /// Covered share of the testable requirements, in percent (100 when none is testable).
    pub fn percent(&self) -> f64 {
        if self.testable() == 0 { 100.0 } else { self.covered as f64 * 100.0 / self.testable() as f64 }
    }
}

/// The inventory joined with the scenarios that name its requirements.
#[derive(Debug, Clone)]
pub struct Coverage<'a> {
    /// The inventory.
    pub inventory: &'a Inventory,
    /// Each requirement's status, in inventory order.
    pub statuses: Vec<Status>,
    /// Scenarios naming a requirement the inventory lacks (the suite loader refuses these,
    /// so this stays empty for loaded suites).
    pub unknown: Vec<(String, String)>,
    /// Scenarios naming a requirement the inventory calls untestable: a contradiction.
    pub contradictions: Vec<(String, String)>,
}

/// Joins `inventory` with `(scenario id, requirement ids)` pairs.
pub fn coverage<'a, 's>(
    inventory: &'a Inventory,
    scenarios: impl IntoIterator<Item = (&'s str, &'s [String])>,
) -> Coverage<'a> {
    coverage_with_opt_in(inventory, scenarios, [])
}

/// [`coverage`], with the `(opt-in suite name, requirement ids its scenarios name)` pairs of
/// the opt-in suites left out of `scenarios`: a requirement only they name is
/// [`Status::OptIn`], whatever `gap:` reason the inventory gives it.
pub fn coverage_with_opt_in<'a, 's>(
    inventory: &'a Inventory,
    scenarios: impl IntoIterator<Item = (&'s str, &'s [String])>,
    opt_in: impl IntoIterator<Item = (&'s str, &'s [String])>,
) -> Coverage<'a> {
    let mut by_opt_in: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (suite, ids) in opt_in {
        for id in ids {
            let suites = by_opt_in.entry(id.as_str()).or_default();
            if !suites.iter().any(|s| s == suite) {
                suites.push(suite.to_owned());
            }
        }
    }
    let mut by_req: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut unknown = Vec::new();
    let mut contradictions = Vec::new();
    for (scenario, ids) in scenarios {
        for id in ids {
            match inventory.get(id) {
                Some(r) => {
                    if r.untestable.is_some() {
                        contradictions.push((scenario.to_owned(), id.clone()));
                    }
                    by_req.entry(r.id.as_str()).or_default().push(scenario.to_owned());
                }
                // A requirement of the other version is no unknown id.
                None if lookup(id).is_some() => {}
                None => unknown.push((scenario.to_owned(), id.clone())),
            }
        }
    }
    let statuses = inventory
        .requirements
        .iter()
        .map(|r| match (by_req.remove(r.id.as_str()), &r.untestable, &r.gap) {
            (Some(s), _, _) => Status::Covered(s),
            (None, Some(why), _) => Status::Untestable(why.clone()),
            (None, None, _) if by_opt_in.contains_key(r.id.as_str()) => {
                Status::OptIn(by_opt_in.remove(r.id.as_str()).unwrap_or_default())
            }
            (None, None, Some(why)) => Status::Gap(why.clone()),
            (None, None, None) => Status::Unaccounted,
        })
        .collect();
    Coverage { inventory, statuses, unknown, contradictions }
}

impl Coverage<'_> {
    /// Tallies per RPC or topic, in order of first appearance, then the overall tally.
    pub fn tallies(&self) -> (Vec<(String, Tally)>, Tally) {
        let mut order: Vec<String> = Vec::new();
        let mut per: BTreeMap<String, Tally> = BTreeMap::new();
        let mut all = Tally::default();
        for (r, s) in self.inventory.requirements.iter().zip(&self.statuses) {
            if !per.contains_key(&r.rpc) {
                order.push(r.rpc.clone());
            }
            per.entry(r.rpc.clone()).or_default().add(s);
            all.add(s);
        }
        let rows = order.into_iter().map(|rpc| {
            let t = per.remove(&rpc).unwrap_or_default();
            (rpc, t)
        }).collect();
        (rows, all)
    }

    /// Requirements that are neither covered nor explained.
    pub fn unaccounted(&self) -> Vec<&Requirement> {
        self.inventory
            .requirements
            .iter()
            .zip(&self.statuses)
            .filter(|(_, s)| **s == Status::Unaccounted)
            .map(|(r, _)| r)
            .collect()
    }

    /// The matrix `list --spec` prints: per RPC or topic, total / covered / untestable /
    /// gap; then the overall line; with `requirements`, every requirement and its status.
    pub fn render(&self, requirements: bool) -> String {
        let mut out = String::new();
        let (rows, all) = self.tallies();
        let _ = writeln!(out, "CSI {} requirements on a plugin ({})", self.inventory.version, self.inventory.base);
        let _ = writeln!(
            out,
            "{:<34} {:>5} {:>7} {:>10} {:>6} {:>4} {:>8}",
            "RPC / topic", "total", "covered", "untestable", "opt-in", "gap", "coverage"
        );
        for (rpc, t) in &rows {
            let _ = writeln!(
                out,
                "{rpc:<34} {:>5} {:>7} {:>10} {:>6} {:>4} {:>7.0}%",
                t.total, t.covered, t.untestable, t.opt_in, t.gap, t.percent()
            );
        }
        let _ = writeln!(
            out,
            "{:<34} {:>5} {:>7} {:>10} {:>6} {:>4} {:>7.1}%",
            "all", all.total, all.covered, all.untestable, all.opt_in, all.gap, all.percent()
        );
        let _ = writeln!(
            out,
            "\n{} of {} testable requirements covered ({:.1}%); {} untestable, {} checked only by opt-in suites, {} gaps{}",
            all.covered,
            all.testable(),
            all.percent(),
            all.untestable,
            all.opt_in,
            all.gap,
            if all.unaccounted > 0 { format!(", {} NOT ACCOUNTED FOR", all.unaccounted) } else { String::new() }
        );
        if requirements {
            out.push('\n');
            for (r, s) in self.inventory.requirements.iter().zip(&self.statuses) {
                let code = r.code.as_deref().map(|c| format!(" -> {c}")).unwrap_or_default();
                let _ = writeln!(out, "{} [{}]{code}  {}", r.id, r.level.as_str(), r.summary);
                let _ = writeln!(out, "    {}", r.link());
                match s {
                    Status::Covered(ids) => {
                        for id in ids {
                            let _ = writeln!(out, "    covered by {id}");
                        }
                    }
                    Status::Untestable(why) => {
                        let _ = writeln!(out, "    untestable: {why}");
                    }
                    Status::OptIn(suites) => {
                        for suite in suites {
                            let _ = writeln!(out, "    checked by the opt-in suite {suite} (--suite {suite})");
                        }
                    }
                    Status::Gap(why) => {
                        let _ = writeln!(out, "    GAP: {why}");
                    }
                    Status::Unaccounted => out.push_str("    NOT ACCOUNTED FOR: no scenario, no reason\n"),
                }
            }
        }
        for (scenario, id) in &self.unknown {
            let _ = writeln!(out, "{scenario} names requirement {id}, which the inventory does not have");
        }
        for (scenario, id) in &self.contradictions {
            let _ = writeln!(out, "{scenario} names requirement {id}, which the inventory calls untestable");
        }
        out
    }

    /// The matrix as JSON: `{version, base, overall, rpcs: [...], requirements: [...]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let (rows, all) = self.tallies();
        let tally = |t: &Tally| {
            serde_json::json!({
                "total": t.total, "covered": t.covered, "untestable": t.untestable, "opt_in": t.opt_in, "gap": t.gap,
                "unaccounted": t.unaccounted, "testable": t.testable(),
                "coverage_percent": (t.percent() * 10.0).round() / 10.0,
            })
        };
        let requirements: Vec<serde_json::Value> = self
            .inventory
            .requirements
            .iter()
            .zip(&self.statuses)
            .map(|(r, s)| {
                let mut v = serde_json::json!({
                    "id": r.id, "rpc": r.rpc, "level": r.level, "summary": r.summary, "link": r.link(),
                });
                if let Some(c) = &r.code {
                    v["code"] = c.clone().into();
                }
                match s {
                    Status::Covered(ids) => {
                        v["status"] = "covered".into();
                        v["scenarios"] = ids.clone().into();
                    }
                    Status::Untestable(why) => {
                        v["status"] = "untestable".into();
                        v["reason"] = why.clone().into();
                    }
                    Status::OptIn(suites) => {
                        v["status"] = "opt-in".into();
                        v["suites"] = suites.clone().into();
                        v["reason"] = format!(
                            "checked by the opt-in suite{} {}, which a default run does not load",
                            if suites.len() == 1 { "" } else { "s" },
                            suites.join(", ")
                        )
                        .into();
                    }
                    Status::Gap(why) => {
                        v["status"] = "gap".into();
                        v["reason"] = why.clone().into();
                    }
                    Status::Unaccounted => v["status"] = "unaccounted".into(),
                }
                v
            })
            .collect();
        serde_json::json!({
            "version": self.inventory.version,
            "base": self.inventory.base,
            "overall": tally(&all),
            "rpcs": rows.iter().map(|(rpc, t)| {
                let mut v = tally(t);
                v["rpc"] = rpc.clone().into();
                v
            }).collect::<Vec<_>>(),
            "requirements": requirements,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes of every error table of spec.md at v1.12.0 (`##### <Rpc> Errors`), RPC by
    /// RPC: the inventory has a row for each, and none for a code a table does not list.
    const ERROR_TABLES: &[(&str, &[&str])] = &[
        ("Probe", &["FAILED_PRECONDITION"]),
        ("CreateVolume", &["ALREADY_EXISTS", "INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_RANGE", "RESOURCE_EXHAUSTED"]),
        ("DeleteVolume", &["FAILED_PRECONDITION"]),
        ("ControllerPublishVolume", &["ALREADY_EXISTS", "FAILED_PRECONDITION", "NOT_FOUND", "RESOURCE_EXHAUSTED"]),
        ("ControllerUnpublishVolume", &["NOT_FOUND"]),
        ("ValidateVolumeCapabilities", &["NOT_FOUND"]),
        ("ListVolumes", &["ABORTED"]),
        ("ControllerGetVolume", &["NOT_FOUND"]),
        ("ControllerModifyVolume", &["INVALID_ARGUMENT", "NOT_FOUND"]),
        ("CreateSnapshot", &["ABORTED", "ALREADY_EXISTS", "RESOURCE_EXHAUSTED"]),
        ("DeleteSnapshot", &["ABORTED", "FAILED_PRECONDITION", "INVALID_ARGUMENT"]),
        ("ListSnapshots", &["ABORTED"]),
        ("GetSnapshot", &["NOT_FOUND"]),
        ("ControllerExpandVolume", &["FAILED_PRECONDITION", "INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_RANGE"]),
        ("NodeStageVolume", &["ALREADY_EXISTS", "FAILED_PRECONDITION", "NOT_FOUND"]),
        ("NodeUnstageVolume", &["NOT_FOUND"]),
        ("NodePublishVolume", &["ALREADY_EXISTS", "FAILED_PRECONDITION", "NOT_FOUND"]),
        ("NodeUnpublishVolume", &["NOT_FOUND"]),
        ("NodeGetVolumeStats", &["NOT_FOUND"]),
        ("NodeExpandVolume", &["FAILED_PRECONDITION", "INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_RANGE"]),
        ("CreateVolumeGroupSnapshot", &["ALREADY_EXISTS", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED"]),
        ("DeleteVolumeGroupSnapshot", &["FAILED_PRECONDITION", "INVALID_ARGUMENT"]),
        ("GetVolumeGroupSnapshot", &["INVALID_ARGUMENT", "NOT_FOUND"]),
        ("GetMetadataAllocated", &["INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_RANGE"]),
        ("GetMetadataDelta", &["FAILED_PRECONDITION", "INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_RANGE"]),
    ];

    #[test]
    fn every_error_table_code_has_an_inventory_row_and_no_row_adds_one() {
        let inv = load_str(ORIGIN, INVENTORY).unwrap_or_else(|e| panic!("{e}"));
        let mut rows: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for r in inv.requirements.iter().filter(|r| r.is_error_row() && r.rpc != "ErrorScheme") {
            rows.entry(r.rpc.as_str()).or_default().insert(r.code.as_deref().expect("an error row has a code"));
        }
        let tables: BTreeMap<&str, BTreeSet<&str>> =
            ERROR_TABLES.iter().map(|(rpc, codes)| (*rpc, codes.iter().copied().collect())).collect();
        assert_eq!(rows, tables);
    }

    #[test]
    fn the_builtin_inventory_loads_and_is_well_formed() {
        let inv = load_str(ORIGIN, INVENTORY).unwrap_or_else(|e| panic!("{e}"));
        assert!(inv.requirements.len() >= 200, "{} requirements", inv.requirements.len());
        let rows = inv.requirements.iter().filter(|r| r.is_error_row()).count();
        assert!(rows >= 60, "{rows} error-table rows");
        for r in &inv.requirements {
            assert!(inv.anchors.contains(&r.anchor), "{}", r.id);
            assert!(r.link().starts_with("https://github.com/container-storage-interface/spec/blob/v1.12.0/spec.md#"));
            assert!(!r.summary.is_empty() && r.summary.len() < 200, "{}: summary is one line", r.id);
        }
        assert_eq!(inv.version, "v1.12.0");
    }

    #[test]
    fn slugs_follow_githubs_rules() {
        assert_eq!(slug("`CreateVolume`"), "createvolume");
        assert_eq!(slug("CreateVolume Errors"), "createvolume-errors");
        assert_eq!(slug("`REQUIRED` vs. `OPTIONAL`"), "required-vs-optional");
        assert_eq!(slug("The ready_to_use Parameter"), "the-ready_to_use-parameter");
        assert_eq!(slug("`CSI_ENDPOINT`"), "csi_endpoint");
    }

    #[test]
    fn a_bad_inventory_is_refused_with_positions() {
        let text = "version: v1\nbase: https://x/spec.md\nheadings: [Error Scheme]\nrequirements:\n  \
                    - {id: X.a, rpc: X, anchor: error-schema, level: MUST, summary: s}\n  \
                    - {id: X.a, rpc: X, anchor: error-scheme, level: OFTEN, summary: s}\n  \
                    - {id: X.errors.b, rpc: X, anchor: error-scheme, level: MUST, summary: s, untestable: u, gap: g}\n";
        let errs = load_str("inv.yaml", text).unwrap_err().to_string();
        assert!(errs.contains("inv.yaml:5:") && errs.contains("\"error-schema\" is not the anchor"), "{errs}");
        assert!(errs.contains("inv.yaml:6:") && errs.contains("level \"OFTEN\""), "{errs}");
        assert!(errs.contains("inv.yaml:7:") && errs.contains("carry a `code`"), "{errs}");
        assert!(errs.contains("either untestable or a gap"), "{errs}");
    }

    #[test]
    fn a_duplicate_id_is_refused() {
        let text = "version: v1\nbase: https://x/spec.md\nheadings: [Error Scheme]\nrequirements:\n  \
                    - {id: X.a, rpc: X, anchor: error-scheme, level: MUST, summary: s}\n  \
                    - {id: X.a, rpc: X, anchor: error-scheme, level: MUST, summary: t}\n";
        let errs = load_str("inv.yaml", text).unwrap_err().to_string();
        assert!(errs.contains("inv.yaml:6:") && errs.contains("listed twice"), "{errs}");
    }

    #[test]
    fn coverage_counts_each_status() {
        let text = "version: v1\nbase: https://x/spec.md\nheadings: [Error Scheme]\nrequirements:\n  \
                    - {id: X.a, rpc: X, anchor: error-scheme, level: MUST, summary: s}\n  \
                    - {id: X.b, rpc: X, anchor: error-scheme, level: MUST, summary: s, untestable: u}\n  \
                    - {id: X.c, rpc: X, anchor: error-scheme, level: MUST, summary: s, gap: g}\n  \
                    - {id: Y.d, rpc: Y, anchor: error-scheme, level: MAY, summary: s}\n";
        let inv = load_str("inv.yaml", text).unwrap();
        let ids = vec!["X.a".to_owned(), "X.b".to_owned(), "Z.z".to_owned()];
        let cov = coverage(&inv, [("s.one", ids.as_slice())]);
        let (rows, all) = cov.tallies();
        assert_eq!(rows[0].1, Tally { total: 3, covered: 2, untestable: 0, opt_in: 0, gap: 1, unaccounted: 0 });
        assert_eq!(rows[1].1, Tally { total: 1, covered: 0, untestable: 0, opt_in: 0, gap: 0, unaccounted: 1 });
        assert_eq!(all.total, 4);
        assert_eq!(cov.unaccounted().iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["Y.d"]);
        assert_eq!(cov.unknown, [("s.one".to_owned(), "Z.z".to_owned())]);
        assert_eq!(cov.contradictions, [("s.one".to_owned(), "X.b".to_owned())]);
    }
}
