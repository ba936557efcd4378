//! The HTML report: one self-contained page (no network) that leads with what failed. In
//! order: a verdict banner (PASSED or FAILED, with how much of the run's scenarios and
//! requirements were actually checked); the plugin's identity and counts (a badge is
//! coloured only when its count is not zero); the **root causes** shared by several failures;
//! **failures**, grouped by the CSI requirement their scenario names first, then
//! **warnings**, grouped by their level (SHOULD, MAY, tolerated deviation), each with its
//! requirements and spec links, expected vs answered, the plugin's message, the redacted
//! request, and the rerun command; the requirement coverage of this run per RPC; the SVG
//! chart of per-RPC latency (slowest first, slow ones in red; no heading when nothing was
//! called); the plugin's endpoints and its capabilities as a table with ticks; then every
//! scenario by suite, collapsed.
//!
//! Filter buttons (all / failures / warnings) and a search box narrow the first section; a
//! small inline script drives them, and the page reads completely with scripts off (the
//! controls stay hidden then). `#filter=failures` in the URL applies a filter on load. The
//! page is well-formed XML as well as HTML (the script uses neither `<` nor `&`), so XML
//! tools can read it.

use std::fmt::Write as _;

use super::{
    causes,
    model::{Counts, Finding, RequirementRef, RunReport, ScenarioResult, Severity},
    text,
};
use crate::fingerprint::{CAPABILITY_SCOPES, Capability};

/// Escapes text for HTML element content and attribute values (terminal escapes and other
/// control characters from plugin messages are made visible, never passed through).
pub fn escape(text: &str) -> String {
    super::text::escape_markup(text)
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#1d2430}\
h1{margin-bottom:.2em}table{border-collapse:collapse;margin:1em 0;width:100%}\
td,th{border:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}\
th{background:#f3f5f7}.pass{background:#dafbe1}.fail{background:#ffd8d3}.error{background:#ffb3ad}\
.warn{background:#fff4c2}.inconclusive{background:#efe4ff}.skip{background:#eef0f3;color:#57606a}.sev{font-weight:600;text-transform:uppercase}\
details{margin:.2em 0}pre{white-space:pre-wrap;margin:.3em 0;font-size:90%}.counts span{margin-right:1.2em}\
code{font-size:90%}.num{text-align:right}.legend{color:#57606a;font-size:90%}\
.finding{border-left:6px solid #d0d7de;padding:.4em .8em;margin:.6em 0}.finding.fail,.finding.error{border-color:#cf222e}\
.finding.warn{border-color:#bf8700}.finding.inconclusive{border-color:#8250df}#filters button{margin-right:.5em}#filters input{margin-left:1em}\
.banner{font-size:1.4em;font-weight:700;padding:.5em .8em;border-radius:6px;margin:.5em 0 1em}\
.banner.passed{background:#dafbe1;color:#116329}.banner.failed{background:#ffd8d3;color:#82071e}\
.banner small{display:block;font-size:60%;font-weight:400;color:#1d2430}\
.counts span{padding:.1em .5em;border-radius:4px}.counts .zero{background:#eef0f3;color:#57606a}\
.tick{color:#116329;font-weight:700;text-align:center}.no{color:#8c959f;text-align:center}.cause{margin:.4em 0}";

/// Drives the filter buttons and the search box of the first section. No `<` and no `&`, so
/// the page stays well-formed XML.
const SCRIPT: &str = "(function(){\
var bar=document.getElementById('filters');if(!bar){return;}bar.hidden=false;\
var items=document.querySelectorAll('#problems .finding');var groups=document.querySelectorAll('#problems .req-group');\
var show='all';var q='';\
function apply(){var i,j;for(i=0;i!==items.length;i++){var it=items[i];\
var a=(show==='all')?true:(it.getAttribute('data-filter')===show);\
var b=(q==='')?true:(it.textContent.toLowerCase().indexOf(q)!==-1);\
it.style.display=a?(b?'':'none'):'none';}\
for(i=0;i!==groups.length;i++){var vis=false;var its=groups[i].querySelectorAll('.finding');\
for(j=0;j!==its.length;j++){if(its[j].style.display!=='none'){vis=true;}}groups[i].style.display=vis?'':'none';}}\
var bs=bar.querySelectorAll('button');\
for(var i=0;i!==bs.length;i++){bs[i].addEventListener('click',function(e){show=e.currentTarget.getAttribute('data-show');\
document.body.setAttribute('data-filter',show);apply();});}\
document.getElementById('search').addEventListener('input',function(e){q=e.target.value.toLowerCase();apply();});\
var m=/filter=(\\w+)/.exec(location.hash);if(m){var btn=bar.querySelector('button[data-show='+m[1]+']');if(btn){btn.click();}}\
})();";

/// The group a listed finding belongs to: a failing one by the first requirement it breaks
/// (see [`Finding::blames`]), a warning by its level (a warning breaks no rule at the level of the requirement its
/// scenario checks, so it is never listed under a bare MUST heading).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Group {
    /// Failures and errors whose finding breaks this requirement first.
    Requirement(RequirementRef),
    /// Failures and errors that name no requirement (nor does their scenario).
    NoRequirement,
    /// Warnings at this level (`SHOULD`, `MAY`, `tolerated deviation from MUST`, ...).
    Warnings(&'static str),
    /// Steps the harness could not decide (witnesses disagreed, a bound ran out): no rule
    /// broken, nothing passed.
    Inconclusive,
}

fn group_of(s: &ScenarioResult, f: &Finding) -> Group {
    match (f.severity, f.blames(s).into_iter().next()) {
        (Severity::Warn, _) => Group::Warnings(text::warning_level(s, f)),
        (Severity::Inconclusive, _) => Group::Inconclusive,
        (_, Some(r)) => Group::Requirement(r),
        (_, None) => Group::NoRequirement,
    }
}

/// One failed, errored, warned or inconclusive finding of the run, with its scenario and group:
/// what the failures-and-warnings section lists, in this order: failures grouped by requirement
/// (groups in order of first appearance, those naming none last), then warnings grouped by
/// level, then the inconclusive ones; report order within a group.
pub fn problems(report: &RunReport) -> Vec<(Group, &ScenarioResult, &Finding)> {
    let mut groups: Vec<(Group, Vec<(&ScenarioResult, &Finding)>)> = Vec::new();
    for s in report.suites.iter().flat_map(|s| &s.scenarios) {
        for f in s.findings.iter().filter(|f| f.severity >= Severity::Inconclusive) {
            let key = group_of(s, f);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, items)) => items.push((s, f)),
                None => groups.push((key, vec![(s, f)])),
            }
        }
    }
    groups.sort_by_key(|(k, _)| match k {
        Group::Requirement(_) => 0,
        Group::NoRequirement => 1,
        Group::Warnings(_) => 2,
        Group::Inconclusive => 3,
    });
    groups.into_iter().flat_map(|(g, items)| items.into_iter().map(move |(s, f)| (g.clone(), s, f))).collect()
}

/// The verdict banner: PASSED or FAILED, and how much was actually checked: scenarios that
/// ran (not skipped) and requirements checked by at least one scenario that ran.
fn banner(out: &mut String, report: &RunReport, counts: &Counts) {
    let (class, word) = if report.failed() { ("failed", "FAILED") } else { ("passed", "PASSED") };
    let ran = counts.total() - counts.skip;
    let (checked, named) = requirement_coverage(report);
    let percent = |part: usize, whole: usize| if whole == 0 { 0.0 } else { part as f64 * 100.0 / whole as f64 };
    let _ = writeln!(
        out,
        "<div class=\"banner {class}\" id=\"verdict\">{word}<small>coverage: {checked} of {named} requirements \
         checked ({:.0}%); {ran} of {} scenarios ran ({:.0}%), {} skipped</small></div>",
        percent(checked, named),
        counts.total(),
        percent(ran, counts.total()),
        counts.skip
    );
}

/// Requirements named by the run's scenarios: how many were checked by a scenario that ran,
/// and how many were named at all.
pub fn requirement_coverage(report: &RunReport) -> (usize, usize) {
    let worst = worst_by_requirement(report);
    (worst.values().filter(|s| **s != Severity::Skip).count(), worst.len())
}

/// Each requirement named by the run's scenarios, with the worst outcome among those naming it
/// (a checked outcome beats a skip).
fn worst_by_requirement(report: &RunReport) -> std::collections::BTreeMap<String, Severity> {
    let mut worst = std::collections::BTreeMap::new();
    for s in report.suites.iter().flat_map(|s| &s.scenarios) {
        // What the scenario names, and what its findings break besides (a response rule's).
        let blamed = s.blamed();
        for id in s.requirements.iter().chain(&blamed).map(|r| r.id.as_str()) {
            // A requirement takes the outcome of the findings that break it, not the scenario's.
            let outcome = s.outcome_of(id);
            let e = worst.entry(id.to_owned()).or_insert(outcome);
            // A checked outcome beats a skip; among checked ones the worst wins.
            if *e == Severity::Skip || (outcome != Severity::Skip && outcome > *e) {
                *e = outcome;
            }
        }
    }
    worst
}

/// A count badge: coloured by its severity when not zero, neutral grey at zero.
fn badge(n: usize, what: &str, severity: Severity) -> String {
    let class = if n == 0 { "zero" } else { severity.as_str() };
    format!("<span class=\"{class}\">{n} {what}</span>")
}

/// The causes shared by several failures, each with its scenarios.
fn causes_section(out: &mut String, report: &RunReport) {
    let causes = causes::causes(report);
    if causes.is_empty() {
        return;
    }
    out.push_str("<section id=\"causes\"><h2>Root causes</h2>\n<p class=\"legend\">One failing answer behind \
        several scenarios: the same call, code and message pattern.</p>\n");
    for cause in &causes {
        let _ = write!(out, "<div class=\"cause finding fail\"><p><b>{}</b>", escape(&cause.heading()));
        if let Some(m) = &cause.plugin_message {
            let _ = write!(out, "<br/>plugin message: <code>{}</code>", escape(m));
        }
        out.push_str("</p><ul>");
        for (s, _) in &cause.members {
            let _ = write!(out, "<li><a href=\"#{id}\"><code>{id}</code></a> {}</li>", escape(&s.title), id = escape(&s.id));
        }
        out.push_str("</ul></div>\n");
    }
    out.push_str("</section>\n");
}

/// The plugin's capabilities as a table: every capability CSI v1.12 defines in each scope,
/// ticked when the plugin advertises it (and any it advertises that v1.12 does not name).
fn capabilities_table(out: &mut String, report: &RunReport) {
    out.push_str("<h2>Capabilities</h2>\n<table id=\"capabilities\"><tr><th>scope</th><th>capability</th><th>advertised</th></tr>\n");
    let mut rows: Vec<(String, String)> = Vec::new();
    for scope in CAPABILITY_SCOPES {
        rows.extend(Capability::names_in(scope).into_iter().map(|n| (scope.to_owned(), n.to_owned())));
    }
    for c in &report.capabilities {
        if let Some((scope, name)) = c.split_once(':')
            && !rows.iter().any(|(s, n)| s == scope && n == name)
        {
            rows.push((scope.to_owned(), name.to_owned()));
        }
    }
    for (scope, name) in rows {
        let advertised = report.capabilities.iter().any(|c| *c == format!("{scope}:{name}"));
        let tick = if advertised { "<td class=\"tick\">&#10003;</td>" } else { "<td class=\"no\">&#8211;</td>" };
        let _ = writeln!(out, "<tr><td>{}</td><td><code>{}</code></td>{tick}</tr>", escape(&scope), escape(&name));
    }
    out.push_str("</table>\n");
}

/// Renders the whole report as an HTML page.
pub fn to_html(report: &RunReport) -> String {
    let counts = report.counts();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>\
         <title>csi-conform: {name}</title><style>{STYLE}</style></head><body>\n",
        name = escape(&report.plugin_name)
    );
    banner(&mut out, report, &counts);
    let _ = writeln!(
        out,
        "<h1>{} <small>{}</small></h1>",
        escape(&report.plugin_name),
        escape(&report.plugin_version)
    );
    let _ = writeln!(
        out,
        "<p>csi-conform {} &#183; started {} &#183; {:.2}s &#183; seed {}{}</p>",
        escape(&report.tool_version),
        escape(&report.started_at),
        report.duration.as_secs_f64(),
        report.seed,
        if report.strict { " &#183; strict" } else { "" }
    );
    if let Some(spec) = &report.spec {
        let _ = writeln!(out, "<p>Judged by {}</p>", escape(&spec.to_string()));
        if let Some(line) = spec.evidence_line() {
            let class = if spec.contradicted() { " class=\"warn\"" } else { "" };
            let _ = writeln!(out, "<p{class}>Version evidence: {}</p>", escape(&line));
        }
    }
    if let Some(why) = &report.interrupted {
        let _ = writeln!(out, "<p class=\"error\">Interrupted: {}</p>", escape(why));
    }
    let _ = writeln!(
        out,
        "<p class=\"counts\">{}{}{}{}{}{}</p>",
        badge(counts.pass, "passed", Severity::Pass),
        badge(counts.fail, "failed", Severity::Fail),
        badge(counts.warn, "warned", Severity::Warn),
        badge(counts.skip, "skipped", Severity::Skip),
        badge(counts.error, "errors", Severity::Error),
        badge(counts.inconclusive, "inconclusive", Severity::Inconclusive),
    );

    causes_section(&mut out, report);
    problems_section(&mut out, report);
    coverage_section(&mut out, report);

    if !report.rpc_latency.is_empty() {
        out.push_str("<h2>RPC latency</h2>\n<p class=\"legend\">Per RPC over the whole run, slowest median first: \
            the bar spans the fastest to the slowest call, the tick is the median, on a logarithmic axis. \
            RPCs whose median is five times the typical one or more are in red.</p>\n");
        out.push_str(&latency_svg(report));
        out.push('\n');
    }

    out.push_str("<h2>Plugin</h2>\n<table>");
    let endpoints = report.endpoints.iter().map(|e| escape(e)).collect::<Vec<_>>().join("<br/>");
    let _ = write!(out, "<tr><th>endpoints</th><td>{endpoints}</td></tr>");
    if !report.mounts.is_empty() {
        let sites = report.mounts.iter().map(|m| escape(&m.to_string())).collect::<Vec<_>>().join("<br/>");
        let _ = write!(out, "<tr><th>mounts</th><td>{sites}</td></tr>");
    }
    out.push_str("</table>\n");
    capabilities_table(&mut out, report);

    out.push_str("<h2>Outcomes by suite</h2>\n<table><tr><th>suite</th>");
    for sev in [Severity::Pass, Severity::Fail, Severity::Error, Severity::Warn, Severity::Inconclusive, Severity::Skip] {
        let _ = write!(out, "<th class=\"{sev}\">{sev}</th>");
    }
    out.push_str("</tr>\n");
    for suite in &report.suites {
        let mut c = super::model::Counts::default();
        suite.scenarios.iter().for_each(|s| c.add(s.outcome));
        let _ = write!(out, "<tr><td><a href=\"#suite-{id}\">{id}</a></td>", id = escape(&suite.id));
        for (sev, n) in [(Severity::Pass, c.pass), (Severity::Fail, c.fail), (Severity::Error, c.error), (Severity::Warn, c.warn), (Severity::Inconclusive, c.inconclusive), (Severity::Skip, c.skip)] {
            let class = if n > 0 { sev.as_str() } else { "" };
            let _ = write!(out, "<td class=\"num {class}\">{n}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");

    super::matrix::html(&mut out, report);

    out.push_str("<h2>All scenarios by suite</h2>\n");
    // A run whose findings name their nodes (several nodes, or node agents) shows them in a
    // column of their own.
    let nodes = report.suites.iter().flat_map(|s| &s.scenarios).flat_map(|s| &s.findings).any(|f| f.node.is_some());
    for suite in &report.suites {
        let _ = writeln!(
            out,
            "<details class=\"suite\" id=\"suite-{id}\"><summary><b>{}</b> <small>{id}</small></summary>\n<table><tr><th>outcome</th><th>scenario</th>{node}<th>time</th><th>detail</th></tr>",
            escape(&suite.title),
            id = escape(&suite.id),
            node = if nodes { "<th>node</th>" } else { "" }
        );
        for s in &suite.scenarios {
            scenario_row(&mut out, s, nodes);
        }
        out.push_str("</table></details>\n");
    }

    let _ = writeln!(out, "<script>{SCRIPT}</script>");
    out.push_str("</body></html>\n");
    out
}

/// The first section: failures and warnings, grouped by requirement, with the filter bar.
fn problems_section(out: &mut String, report: &RunReport) {
    let items = problems(report);
    out.push_str("<section id=\"problems\"><h2>Failures and warnings</h2>\n");
    if items.is_empty() {
        out.push_str("<p>None: no scenario failed or warned.</p></section>\n");
        return;
    }
    out.push_str(
        "<p id=\"filters\" hidden=\"hidden\"><button type=\"button\" data-show=\"all\">all</button>\
         <button type=\"button\" data-show=\"failures\">failures</button>\
         <button type=\"button\" data-show=\"warnings\">warnings</button>\
         <button type=\"button\" data-show=\"inconclusive\">inconclusive</button>\
         <input id=\"search\" type=\"search\" placeholder=\"search\" aria-label=\"search the failures and warnings\"/></p>\n",
    );
    let mut current: Option<Group> = None;
    for (group, s, f) in items {
        if current.as_ref() != Some(&group) {
            if current.is_some() {
                out.push_str("</div>\n");
            }
            match &group {
                Group::Requirement(r) => {
                    let _ = writeln!(
                        out,
                        "<div class=\"req-group\"><h3><a href=\"{link}\">{id}</a> <small>[{level}] {summary}</small></h3>",
                        link = escape(&r.link),
                        id = escape(&r.id),
                        level = escape(&r.level),
                        summary = escape(&r.summary)
                    );
                }
                Group::NoRequirement => out.push_str("<div class=\"req-group\"><h3>No requirement named</h3>\n"),
                Group::Warnings(level) => {
                    let _ = writeln!(out, "<div class=\"req-group\"><h3>Warnings <small>[{}]</small></h3>", escape(level));
                }
                Group::Inconclusive => out.push_str(
                    "<div class=\"req-group\"><h3>Inconclusive <small>(the harness could not decide: \
                     neither passed nor failed)</small></h3>\n",
                ),
            }
            current = Some(group);
        }
        finding_item(out, report, s, f);
    }
    out.push_str("</div></section>\n");
}

fn finding_item(out: &mut String, report: &RunReport, s: &ScenarioResult, f: &Finding) {
    let filter = match f.severity {
        Severity::Warn => "warnings",
        Severity::Inconclusive => "inconclusive",
        _ => "failures",
    };
    let _ = write!(
        out,
        "<div class=\"finding {sev}\" data-filter=\"{filter}\" data-scenario=\"{id}\"><p><span class=\"sev\">{sev}</span> \
         <a href=\"#{id}\"><code>{id}</code></a> {title}<br/><b>{kind}</b>{level}: {message}</p>",
        sev = f.severity,
        level = if f.severity == Severity::Warn { format!(" [{}]", escape(text::warning_level(s, f))) } else { String::new() },
        id = escape(&s.id),
        title = escape(&s.title),
        kind = escape(&f.kind),
        message = escape(&f.message)
    );
    let node = f.node.as_ref().map(ToString::to_string);
    let rows: Vec<(&str, &Option<String>)> = vec![
        ("node", &node),
        ("expected", &f.expected),
        ("answered", &f.got),
        ("plugin message", &f.plugin_message),
        ("rpc", &f.rpc),
        ("request", &f.request),
    ];
    if rows.iter().any(|(_, v)| v.is_some()) || !f.evidence.is_empty() {
        out.push_str("<table>");
        for (label, value) in rows {
            if let Some(v) = value {
                let _ = write!(out, "<tr><th>{label}</th><td><pre>{}</pre></td></tr>", escape(v));
            }
        }
        for e in &f.evidence {
            let _ = write!(out, "<tr><th>evidence</th><td><pre>{}</pre></td></tr>", escape(&e.to_string()));
        }
        out.push_str("</table>");
    }
    if !s.requirements.is_empty() {
        out.push_str("<p>spec: ");
        let links: Vec<String> = s.requirements.iter().map(requirement_link).collect();
        out.push_str(&links.join(", "));
        out.push_str("</p>");
    }
    let _ = writeln!(
        out,
        "<p>rerun: <code>{}</code></p></div>",
        escape(&super::console::rerun_command(report, &s.id, None))
    );
}

fn requirement_link(r: &RequirementRef) -> String {
    format!("<a href=\"{}\">{}</a> [{}]", escape(&r.link), escape(&r.id), escape(&r.level))
}

/// The requirement coverage of this run, per RPC (the part of a requirement id before its
/// first dot): how many requirements the run's scenarios named, and how each came out (the
/// worst outcome among the scenarios naming it).
fn coverage_section(out: &mut String, report: &RunReport) {
    use std::collections::BTreeMap;
    let worst = worst_by_requirement(report);
    let version = report.spec.as_ref().map_or("1.12", |s| s.version.as_str());
    out.push_str(&format!(
        "<h2>Requirement coverage of this run</h2>\n<p class=\"legend\">CSI v{} requirements \
        named by the scenarios of this run (or broken by an answer), by RPC, and how they came out (a requirement takes the worst \
        outcome of the findings that break it; skipped: none of its scenarios ran). <code>csi-conform list --spec</code> \
        shows the whole inventory.</p>\n<table><tr><th>RPC / topic</th><th>requirements</th>",
        escape(version)
    ));
    for sev in [Severity::Pass, Severity::Fail, Severity::Error, Severity::Warn, Severity::Inconclusive, Severity::Skip] {
        let _ = write!(out, "<th class=\"{sev}\">{sev}</th>");
    }
    out.push_str("</tr>\n");
    let mut per: BTreeMap<&str, super::model::Counts> = BTreeMap::new();
    for (id, sev) in &worst {
        per.entry(id.split('.').next().unwrap_or(id)).or_default().add(*sev);
    }
    for (rpc, c) in &per {
        let _ = write!(out, "<tr><td>{}</td><td class=\"num\">{}</td>", escape(rpc), c.total());
        for (sev, n) in [(Severity::Pass, c.pass), (Severity::Fail, c.fail), (Severity::Error, c.error), (Severity::Warn, c.warn), (Severity::Inconclusive, c.inconclusive), (Severity::Skip, c.skip)] {
            let class = if n > 0 { sev.as_str() } else { "" };
            let _ = write!(out, "<td class=\"num {class}\">{n}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    // What only opt-in suites check: neither a gap nor a pass of this run.
    if !report.opt_in_coverage.is_empty() {
        out.push_str("<p class=\"legend\" id=\"opt-in-coverage\">Not checked by this run, and no gap: ");
        let items: Vec<String> = report
            .opt_in_coverage
            .iter()
            .map(|(id, suites)| {
                let by: Vec<String> =
                    suites.iter().map(|s| format!("the opt-in suite {} (<code>--suite {}</code>)", escape(s), escape(s))).collect();
                format!("<code>{}</code> is checked by {}", escape(id), by.join(" and "))
            })
            .collect();
        out.push_str(&items.join("; "));
        out.push_str(".</p>\n");
    }
}

/// One scenario's row; with `nodes`, a cell naming the nodes its findings happened on.
fn scenario_row(out: &mut String, s: &ScenarioResult, nodes: bool) {
    let class = s.outcome.as_str();
    let node_cell = if nodes {
        let mut named: Vec<String> = Vec::new();
        for node in s.findings.iter().filter_map(|f| f.node.as_ref()).map(ToString::to_string) {
            if !named.contains(&node) {
                named.push(node);
            }
        }
        format!("<td class=\"node\">{}</td>", named.iter().map(|n| escape(n)).collect::<Vec<_>>().join("<br/>"))
    } else {
        String::new()
    };
    let _ = write!(
        out,
        "<tr class=\"{class}\" id=\"{id}\"><td class=\"sev\">{class}</td><td><b>{title}</b><br/><code>{id}</code></td>{node_cell}<td>{time:.3}s</td><td>",
        id = escape(&s.id),
        title = escape(&s.title),
        time = s.duration.as_secs_f64()
    );
    if let Some(reason) = &s.skip_reason {
        out.push_str(&escape(reason));
    }
    for f in &s.findings {
        let open = if f.severity >= Severity::Fail { " open=\"open\"" } else { "" };
        let _ = write!(
            out,
            "<details{open}><summary><span class=\"sev\">{}</span> {}: {}</summary><pre>",
            f.severity,
            escape(&f.kind),
            escape(&f.message)
        );
        let node = f.node.as_ref().map(ToString::to_string);
        for (label, value) in [
            ("node", &node),
            ("rpc", &f.rpc),
            ("request", &f.request),
            ("expected", &f.expected),
            ("got", &f.got),
            ("plugin message", &f.plugin_message),
        ] {
            if let Some(v) = value {
                let _ = writeln!(out, "{label}: {}", escape(v));
            }
        }
        for e in &f.evidence {
            let _ = writeln!(out, "evidence: {}", escape(&e.to_string()));
        }
        out.push_str("</pre></details>");
    }
    if let Some(e) = &s.expectation {
        let _ = write!(out, "<p><i>{}</i></p>", escape(&format!("{e:?}")));
    }
    out.push_str("</td></tr>\n");
}

/// A horizontal range chart: one row per RPC, a bar from min to max and a tick at the
/// median, on a shared logarithmic axis (latencies span orders of magnitude).
pub fn latency_svg(report: &RunReport) -> String {
    let mut rows: Vec<_> = report.rpc_latency.iter().collect();
    if rows.is_empty() {
        return "<p>No RPCs were recorded.</p>".to_owned();
    }
    rows.sort_by(|a, b| b.1.median.total_cmp(&a.1.median).then_with(|| a.0.cmp(b.0)));
    let mut medians: Vec<f64> = rows.iter().map(|(_, l)| l.median).collect();
    medians.sort_by(f64::total_cmp);
    let typical = medians[medians.len() / 2];
    let slow = |median: f64| typical > 0.0 && median >= 5.0 * typical;
    const LABEL: f64 = 260.0;
    const WIDTH: f64 = 520.0;
    const ROW: f64 = 22.0;
    let floor = 1e-5_f64;
    let lo = rows.iter().map(|(_, l)| l.min.max(floor)).fold(f64::INFINITY, f64::min).log10().floor();
    let hi = rows.iter().map(|(_, l)| l.max.max(floor)).fold(0.0_f64, f64::max).log10().ceil().max(lo + 1.0);
    let x = |secs: f64| LABEL + (secs.max(floor).log10() - lo) / (hi - lo) * WIDTH;
    let height = ROW * rows.len() as f64 + 40.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" role=\"img\" aria-label=\"RPC latency\" font-size=\"12\" font-family=\"system-ui,sans-serif\">",
        w = LABEL + WIDTH + 90.0
    );
    for (i, (rpc, l)) in rows.iter().enumerate() {
        let y = 10.0 + ROW * i as f64;
        let _ = write!(
            svg,
            "<g><title>{rpc}: {calls} calls, min {min:.3}ms, median {med:.3}ms, max {max:.3}ms</title>\
             <text x=\"{tx}\" y=\"{ty}\" text-anchor=\"end\">{rpc}</text>\
             <rect x=\"{x0:.1}\" y=\"{ry}\" width=\"{bw:.1}\" height=\"8\" fill=\"{bar}\"/>\
             <rect x=\"{xm:.1}\" y=\"{my}\" width=\"3\" height=\"14\" fill=\"{tick}\"/>\
             <text x=\"{vx:.1}\" y=\"{ty}\">{med:.2}ms</text></g>",
            rpc = escape(rpc),
            calls = l.calls,
            min = l.min * 1e3,
            med = l.median * 1e3,
            max = l.max * 1e3,
            tx = LABEL - 8.0,
            ty = y + 10.0,
            x0 = x(l.min),
            ry = y + 3.0,
            bw = (x(l.max) - x(l.min)).max(1.0),
            xm = x(l.median) - 1.5,
            my = y,
            vx = LABEL + WIDTH + 8.0,
            bar = if slow(l.median) { "#ffaba8" } else { "#9ecbff" },
            tick = if slow(l.median) { "#cf222e" } else { "#0550ae" },
        );
    }
    let axis_y = 10.0 + ROW * rows.len() as f64 + 14.0;
    let mut decade = lo;
    while decade <= hi {
        let secs = 10f64.powf(decade);
        let label = if secs >= 1.0 { format!("{secs:.0}s") } else { format!("{}ms", trim(secs * 1e3)) };
        let _ = write!(
            svg,
            "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"6\" y2=\"{ly}\" stroke=\"#d0d7de\"/><text x=\"{px:.1}\" y=\"{axis_y}\" text-anchor=\"middle\">{label}</text>",
            px = x(secs),
            ly = axis_y - 12.0
        );
        decade += 1.0;
    }
    svg.push_str("</svg>");
    svg
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_drops_control_characters() {
        assert_eq!(escape("<a href=\"x\">&'\u{1b}[31m"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\\u{1b}[31m");
    }
}
