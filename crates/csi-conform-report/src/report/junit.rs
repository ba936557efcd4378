//! The JUnit XML report, shaped for what CI systems actually read (Jenkins' JUnit plugin,
//! GitLab's unit test reports, the GitHub Actions JUnit reporters).
//!
//! A small writer of our own rather than the `junit-report` crate: that crate cannot write
//! `<properties>` (suite or testcase), nor the `skipped` counts, nor the aggregate counts on
//! `<testsuites>`; it stamps each suite with the time of writing (not golden-testable); and it
//! puts text in CDATA without guarding against `]]>` or the characters XML 1.0 forbids, both of
//! which a plugin's message can contain.
//!
//! The shape:
//! Every report validates against the strictest common reader's schema, Jenkins' xUnit
//! `junit-10.xsd` (tests/it/support/junit_schema.rs checks each one the tests read): what it
//! has no place for moves to where it has one.
//!
//! - `<testsuites>` carries the run's totals (tests, failures, errors: the schema has no
//!   skipped count there) and wall time; one `<testsuite>` per suite
//!   (`name` = suite id) with its counts, the summed scenario time, the run's start as
//!   `timestamp` (ISO 8601 without zone, in UTC, as the Ant schema has it) and
//!   `hostname="localhost"` (the schema's value for "not recorded": the report holds no host
//!   name, and the output must not vary with the machine that renders it).
//! - Suite `<properties>`: `tool-version`, `plugin-name`, `plugin-version`, `endpoint.N` per
//!   endpoint, `capability.<scope:NAME>` = `true` per advertised capability, `mounts.N` per
//!   node endpoint (where its mounts were verified, or why not), `seed`, `strict`,
//!   `started-at`, `suite-title`, `suite-source`, and `interrupted` when the run was cut short.
//!   Names are unique, because several readers keep properties in a map.
//! - One `<testcase>` per scenario: `name` = full scenario id, `classname` = suite id,
//!   `time` in seconds. Children: the result element, `<system-out>`. The schema has no
//!   `<properties>` in a test case, so the case's properties (below) open its `<system-out>`,
//!   one `name: value` line each.
//! - A failure is `<failure message="one line" type="<finding kind>">`, an error `<error>`;
//!   the body (which is all GitLab shows) names the scenario and lists every failing finding
//!   with its RPC, the redacted request, expected and got, and the plugin's message. Under
//!   `strict` warnings count as failing findings.
//! - A skip is `<skipped message="reason">` with the reason as its text too (Jenkins reads the
//!   attribute, GitLab the text). An inconclusive scenario (the harness could not decide) is a
//!   skip too, `<skipped message="inconclusive: reason">`, with its undecided findings in the
//!   text: neither passed nor failed, under `strict` as well.
//! - A failed or warned test case (and an expected failure) carries one
//!   `requirement.<id>` property per CSI requirement its scenario checks, valued with the
//!   spec link; the failure body lists them too.
//! - Warnings on a test case that is not failed by them become `warning` properties
//!   (`kind: message`) and are detailed in `<system-out>` (which GitLab and Jenkins show for a
//!   passed case), each with its level (`SHOULD`, `MAY`, `tolerated deviation from MUST`).
//!   With [`WarningsAs::Failure`] a warned case is a `<failure type="warning">` instead, with
//!   [`WarningsAs::Skipped`] a `<skipped>` whose message is the warning (`--junit-warnings`),
//!   for teams that want warnings to stand out in their CI's test view.
//! - An expected failure is a passed test case with an `expected-failure` property (the
//!   listed reason) and the details in `<system-out>`; an unexpected pass is a
//!   `<failure type="unexpected-pass">`.
//!
//! Body text goes in CDATA (a `]]>` in it spelled `]]\u{3e}`); every value passes through
//! the shared text hygiene first.
//! The output depends on the report alone, so it can be compared with a golden file.

use std::fmt::Write as _;

use super::{
    matrix,
    model::{Expectation, Finding, OrchestratorResult, RunReport, ScenarioResult, Severity, SuiteResult},
    text,
};

/// How a test case that passed with warnings is written (`--junit-warnings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WarningsAs {
    /// A passed case, its warnings in `<system-out>` (the default).
    #[default]
    Passed,
    /// A skipped case whose skip message is the warning.
    Skipped,
    /// A failed case (`<failure type="warning">`); the run's exit code is not changed by it.
    Failure,
}

impl std::str::FromStr for WarningsAs {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "passed" => Ok(WarningsAs::Passed),
            "skipped" => Ok(WarningsAs::Skipped),
            "failure" => Ok(WarningsAs::Failure),
            other => Err(format!("{other:?} is not one of passed, skipped, failure")),
        }
    }
}

/// Writes indented XML into a string. Attribute values are put on one line and escaped; text
/// content goes into CDATA.
struct Xml {
    out: String,
    depth: usize,
}

impl Xml {
    fn new() -> Self {
        Xml { out: String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"), depth: 0 }
    }

    /// Writes `<name attrs` (without the closing bracket) on a new indented line.
    fn start(&mut self, name: &str, attrs: &[(&str, &str)]) {
        self.out.push_str(&"  ".repeat(self.depth));
        self.out.push('<');
        self.out.push_str(name);
        for (key, value) in attrs {
            let _ = write!(self.out, " {key}=\"{}\"", escape_attr(value));
        }
    }

    /// `<name attrs>`, leaving the element open for children.
    fn open(&mut self, name: &str, attrs: &[(&str, &str)]) {
        self.start(name, attrs);
        self.out.push_str(">\n");
        self.depth += 1;
    }

    /// `</name>`.
    fn close(&mut self, name: &str) {
        self.depth -= 1;
        let _ = writeln!(self.out, "{}</{name}>", "  ".repeat(self.depth));
    }

    /// `<name attrs/>`.
    fn empty(&mut self, name: &str, attrs: &[(&str, &str)]) {
        self.start(name, attrs);
        self.out.push_str("/>\n");
    }

    /// `<name attrs><![CDATA[body]]></name>`.
    fn text(&mut self, name: &str, attrs: &[(&str, &str)], body: &str) {
        self.start(name, attrs);
        // A CDATA section cannot hold its own terminator. Splitting the section around it is
        // valid XML, but lenient readers put a line break at the seam; spelling the `>` out like
        // every other hazard reads the same everywhere.
        let body = text::block(body, "").replace("]]>", "]]\\u{3e}");
        let _ = writeln!(self.out, "><![CDATA[{body}]]></{name}>");
    }

    /// `<properties>` with one `<property>` per pair; nothing when there are none.
    fn properties(&mut self, properties: &[(String, String)]) {
        if properties.is_empty() {
            return;
        }
        self.open("properties", &[]);
        for (name, value) in properties {
            self.empty("property", &[("name", name), ("value", value)]);
        }
        self.close("properties");
    }
}

/// An attribute value: on one line (so no reader normalises it differently) and escaped.
fn escape_attr(value: &str) -> String {
    text::escape_markup(&text::one_line(value))
}

/// The Ant schema's timestamp form (`YYYY-MM-DDThh:mm:ss`, no zone) of an RFC 3339 UTC time;
/// `None` when `rfc3339` is not a UTC time of that form.
fn ant_timestamp(rfc3339: &str) -> Option<String> {
    let re = regex::Regex::new(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|\+00:00)$").ok()?;
    re.captures(rfc3339).map(|c| c[1].to_owned())
}

/// How a test case comes out in JUnit terms.
enum Verdict {
    Passed,
    Skipped(String),
    /// A `<failure>` or `<error>` element.
    Problem {
        element: &'static str,
        kind: String,
        message: String,
        body: String,
    },
}

/// Everything written for one scenario.
struct Case<'a> {
    scenario: &'a ScenarioResult,
    verdict: Verdict,
    properties: Vec<(String, String)>,
    system_out: Vec<String>,
}

/// The details of one finding, for a failure body or `<system-out>`; a warning says its level.
fn finding_details(scenario: &ScenarioResult, finding: &Finding) -> String {
    let mut out = format!("{} {}", finding.severity.as_str().to_uppercase(), text::one_line(&finding.kind));
    if let Some(step) = finding.step {
        // Steps are 0-based in the model and counted from 1 for people.
        let _ = write!(out, " (step {})", step + 1);
    }
    if finding.severity == Severity::Warn {
        let _ = write!(out, " [{}]", text::warning_level(scenario, finding));
    }
    let _ = write!(out, ": {}", text::one_line(&finding.message));
    let node = finding.node.as_ref().map(ToString::to_string);
    let fields = [
        ("node", &node),
        ("rpc", &finding.rpc),
        ("request", &finding.request),
        ("expected", &finding.expected),
        ("got", &finding.got),
        ("plugin message", &finding.plugin_message),
    ];
    for (label, value) in fields {
        if let Some(value) = value {
            let _ = write!(out, "\n  {label}: {}", text::block(value, "    "));
        }
    }
    for e in &finding.evidence {
        let _ = write!(out, "\n  evidence: {}", text::one_line(&e.to_string()));
    }
    out
}

/// The scenario's title and spec section, heading a failure body.
fn context(scenario: &ScenarioResult) -> String {
    let mut out = format!("scenario: {}", text::one_line(&scenario.title));
    // What its findings break (a response rule's requirement, a step's own), else what it names.
    let blamed = scenario.blamed();
    for r in if blamed.is_empty() { &scenario.requirements } else { &blamed } {
        let _ = write!(out, "\nrequirement: {} [{}] {} ({})", r.id, r.level, text::one_line(&r.summary), r.link);
    }
    out
}

/// Paragraphs separated by blank lines.
fn paragraphs(parts: impl IntoIterator<Item = String>) -> String {
    parts.into_iter().collect::<Vec<_>>().join("\n\n")
}

impl<'a> Case<'a> {
    fn new(scenario: &'a ScenarioResult, strict: bool, warnings_as: WarningsAs) -> Self {
        let failing = |f: &&Finding| f.severity >= Severity::Fail || (strict && f.severity == Severity::Warn);
        let problems: Vec<&Finding> = scenario.findings.iter().filter(failing).collect();
        let problem_text = || {
            paragraphs(std::iter::once(context(scenario)).chain(problems.iter().map(|f| finding_details(scenario, f))))
        };
        let mut case =
            Case { scenario, verdict: Verdict::Passed, properties: Vec::new(), system_out: Vec::new() };

        case.verdict = match (&scenario.expectation, scenario.outcome) {
            (_, Severity::Skip) => Verdict::Skipped(text::skip_reason(scenario)),
            (None, Severity::Inconclusive) => {
                let reason = text::outcome_reason(scenario).unwrap_or_default();
                let undecided = scenario.findings.iter().filter(|f| f.severity == Severity::Inconclusive);
                case.system_out.push(paragraphs(
                    std::iter::once(context(scenario)).chain(undecided.map(|f| finding_details(scenario, f))),
                ));
                Verdict::Skipped(format!("inconclusive: {reason}"))
            }
            (Some(Expectation::ExpectedFailure { reason }), _) => {
                case.properties.push(("expected-failure".into(), reason.clone()));
                case.system_out.push(format!(
                    "expected failure, listed in --expect-failures: {}",
                    text::one_line(reason)
                ));
                case.system_out.push(problem_text());
                Verdict::Passed
            }
            (Some(Expectation::UnexpectedPass { reason }), _) => {
                let message = format!(
                    "listed in --expect-failures ({}) but passed: remove it from the list",
                    text::one_line(reason)
                );
                let body = paragraphs([message.clone(), problem_text()]);
                Verdict::Problem { element: "failure", kind: "unexpected-pass".into(), message, body }
            }
            (None, outcome) => {
                let problem = |severity, kind, message| Verdict::Problem {
                    element: if severity == Severity::Error { "error" } else { "failure" },
                    kind,
                    message,
                    body: problem_text(),
                };
                let worst = problems.iter().map(|f| f.severity).max();
                match (worst.and_then(|w| problems.iter().find(|f| f.severity == w)), outcome) {
                    (Some(f), _) => problem(f.severity, f.kind.clone(), text::finding_line(f)),
                    // A failing outcome without a failing finding (the model allows it).
                    (None, Severity::Fail | Severity::Error) => {
                        problem(outcome, outcome.to_string(), outcome.to_string())
                    }
                    (None, Severity::Warn) => {
                        let first = scenario.findings.iter().find(|f| f.severity == Severity::Warn);
                        let line = first.map_or_else(|| "warn".to_owned(), |f| {
                            format!("warning [{}]: {}", text::warning_level(scenario, f), text::finding_line(f))
                        });
                        match warnings_as {
                            WarningsAs::Passed => Verdict::Passed,
                            WarningsAs::Skipped => Verdict::Skipped(line),
                            WarningsAs::Failure => Verdict::Problem {
                                element: "failure",
                                kind: "warning".into(),
                                message: line,
                                body: paragraphs(
                                    std::iter::once(context(scenario)).chain(
                                        scenario
                                            .findings
                                            .iter()
                                            .filter(|f| f.severity == Severity::Warn)
                                            .map(|f| finding_details(scenario, f)),
                                    ),
                                ),
                            },
                        }
                    }
                    (None, _) => Verdict::Passed,
                }
            }
        };

        let warned = !strict && scenario.findings.iter().any(|f| f.severity == Severity::Warn);
        if warned || !matches!(case.verdict, Verdict::Passed | Verdict::Skipped(_)) || !case.properties.is_empty() {
            // Failed, warned and expected-failure cases name the requirements their findings
            // break (else those they check):
            // `requirement.<id>` = the spec link (names stay unique).
            let blamed = scenario.blamed();
            let named = if blamed.is_empty() { &scenario.requirements } else { &blamed };
            for (i, r) in named.iter().enumerate() {
                case.properties.insert(i, (format!("requirement.{}", r.id), r.link.clone()));
            }
        }
        if !strict {
            for warning in scenario.findings.iter().filter(|f| f.severity == Severity::Warn) {
                case.properties.push(("warning".into(), format!("{}: {}", warning.kind, warning.message)));
                case.system_out.push(finding_details(scenario, warning));
            }
        }
        if scenario.outcome != Severity::Inconclusive {
            // Undecided steps of a scenario that came out otherwise are still shown.
            for f in scenario.findings.iter().filter(|f| f.severity == Severity::Inconclusive) {
                case.system_out.push(finding_details(scenario, f));
            }
        }
        case
    }

    fn write(&self, xml: &mut Xml, suite_id: &str) {
        let time = text::seconds(self.scenario.duration);
        let attrs = [("name", self.scenario.id.as_str()), ("classname", suite_id), ("time", time.as_str())];
        if matches!(self.verdict, Verdict::Passed) && self.properties.is_empty() && self.system_out.is_empty()
        {
            xml.empty("testcase", &attrs);
            return;
        }
        xml.open("testcase", &attrs);
        match &self.verdict {
            Verdict::Passed => {}
            Verdict::Skipped(reason) => xml.text("skipped", &[("message", reason)], reason),
            Verdict::Problem { element, kind, message, body } => {
                xml.text(element, &[("message", message), ("type", kind)], body)
            }
        }
        // The strict schema (junit-10.xsd) has no `<properties>` in a test case: the case's
        // properties open its `<system-out>`, one `name: value` line each.
        let properties = (!self.properties.is_empty())
            .then(|| self.properties.iter().map(|(n, v)| format!("{n}: {v}")).collect::<Vec<_>>().join("\n"));
        if properties.is_some() || !self.system_out.is_empty() {
            xml.text("system-out", &[], &paragraphs(properties.into_iter().chain(self.system_out.iter().cloned())));
        }
        xml.close("testcase");
    }
}

/// Test case counts in JUnit's terms (after `strict` and `--expect-failures`).
#[derive(Default)]
struct Tally {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
}

impl Tally {
    fn add(&mut self, case: &Case<'_>) {
        self.tests += 1;
        match case.verdict {
            Verdict::Passed => {}
            Verdict::Skipped(_) => self.skipped += 1,
            Verdict::Problem { element: "error", .. } => self.errors += 1,
            Verdict::Problem { .. } => self.failures += 1,
        }
    }

    /// The count attributes, formatted.
    fn attrs(&self) -> [(&'static str, String); 4] {
        [
            ("tests", self.tests.to_string()),
            ("failures", self.failures.to_string()),
            ("errors", self.errors.to_string()),
            ("skipped", self.skipped.to_string()),
        ]
    }
}

/// The suite `<properties>`: the run's settings and the plugin's identity.
fn suite_properties(report: &RunReport, suite: &SuiteResult) -> Vec<(String, String)> {
    let mut props = vec![
        ("tool-version".to_owned(), report.tool_version.clone()),
        ("plugin-name".to_owned(), report.plugin_name.clone()),
        ("plugin-version".to_owned(), report.plugin_version.clone()),
    ];
    props.extend(report.endpoints.iter().enumerate().map(|(i, e)| (format!("endpoint.{i}"), e.clone())));
    props.extend(report.capabilities.iter().map(|c| (format!("capability.{c}"), "true".to_owned())));
    props.extend(report.mounts.iter().map(|m| (format!("mounts.{}", m.node), m.to_string())));
    props.extend(report.sizes.iter().map(|s| ("volume-sizes".to_owned(), s.to_string())));
    if let Some(spec) = &report.spec {
        props.push(("spec-version".to_owned(), spec.version.clone()));
        props.push(("spec-version-reason".to_owned(), spec.reason.clone()));
        props.extend(spec.evidence_line().map(|line| ("spec-version-evidence".to_owned(), line)));
    }
    props.extend([
        ("seed".to_owned(), report.seed.to_string()),
        ("strict".to_owned(), report.strict.to_string()),
        ("started-at".to_owned(), report.started_at.clone()),
        ("suite-title".to_owned(), suite.title.clone()),
        ("suite-source".to_owned(), suite.source.clone()),
    ]);
    if let Some(why) = &report.interrupted {
        props.push(("interrupted".to_owned(), why.clone()));
    }
    props
}

/// Borrowed attribute pairs from owned ones.
fn borrow<'a>(attrs: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    attrs.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The JUnit XML document for a run, warned cases as passed ones. Deterministic: the same
/// report gives the same bytes.
pub fn to_junit_xml(report: &RunReport) -> String {
    to_junit_xml_with(report, WarningsAs::Passed)
}

/// [`to_junit_xml`] with warned cases written as `warnings_as` says.
pub fn to_junit_xml_with(report: &RunReport, warnings_as: WarningsAs) -> String {
    let suites: Vec<(&SuiteResult, Vec<Case<'_>>)> = report
        .suites
        .iter()
        .map(|s| (s, s.scenarios.iter().map(|sc| Case::new(sc, report.strict, warnings_as)).collect()))
        .collect();
    let timestamp = ant_timestamp(&report.started_at);

    let mut total = Tally::default();
    suites.iter().flat_map(|(_, cases)| cases).for_each(|c| total.add(c));
    // The compatibility matrix: one testsuite per orchestrator, one case per behaviour.
    let matrix: Vec<(&OrchestratorResult, Tally)> = report
        .orchestrators
        .iter()
        .map(|o| {
            let mut tally = Tally::default();
            for b in &o.behaviours {
                tally.tests += 1;
                match matrix::junit_case(o, b).map(|(element, ..)| element) {
                    Some("skipped") => tally.skipped += 1,
                    Some("error") => tally.errors += 1,
                    Some(_) => tally.failures += 1,
                    None => {}
                }
            }
            (o, tally)
        })
        .collect();
    for (_, t) in &matrix {
        (total.tests, total.failures, total.errors, total.skipped) =
            (total.tests + t.tests, total.failures + t.failures, total.errors + t.errors, total.skipped + t.skipped);
    }
    let mut xml = Xml::new();
    // `<testsuites>` takes only these under the strict schema: the skipped count and the
    // timestamp stand on each `<testsuite>`.
    let mut attrs = vec![("name", "csi-conform".to_owned())];
    attrs.extend(total.attrs().into_iter().filter(|(name, _)| *name != "skipped"));
    attrs.push(("time", text::seconds(report.duration)));
    xml.open("testsuites", &borrow(&attrs));

    for (suite, cases) in &suites {
        let mut tally = Tally::default();
        cases.iter().for_each(|c| tally.add(c));
        let time: std::time::Duration = suite.scenarios.iter().map(|s| s.duration).sum();
        let mut attrs = vec![("name", suite.id.clone())];
        attrs.extend(tally.attrs());
        attrs.push(("time", text::seconds(time)));
        attrs.extend(timestamp.clone().map(|t| ("timestamp", t)));
        attrs.push(("hostname", "localhost".to_owned()));
        xml.open("testsuite", &borrow(&attrs));
        xml.properties(&suite_properties(report, suite));
        for case in cases {
            case.write(&mut xml, &suite.id);
        }
        xml.close("testsuite");
    }
    for (o, tally) in matrix {
        let mut attrs = vec![("name", format!("orchestrator:{}", o.name))];
        attrs.extend(tally.attrs());
        attrs.push(("time", "0".to_owned()));
        attrs.extend(timestamp.clone().map(|t| ("timestamp", t)));
        attrs.push(("hostname", "localhost".to_owned()));
        xml.open("testsuite", &borrow(&attrs));
        for b in &o.behaviours {
            let attrs = [("name", b.id.as_str()), ("classname", o.name.as_str()), ("time", "0")];
            match matrix::junit_case(o, b) {
                None if b.findings.is_empty() => xml.empty("testcase", &attrs),
                None => {
                    xml.open("testcase", &attrs);
                    let lines: Vec<String> = b.findings.iter().map(|f| format!("[{}] {}", f.severity, f.message)).collect();
                    xml.text("system-out", &[], &lines.join("\n"));
                    xml.close("testcase");
                }
                Some((element, message, body)) => {
                    xml.open("testcase", &attrs);
                    if element == "skipped" {
                        xml.text(element, &[("message", &message)], &message);
                    } else {
                        xml.text(element, &[("message", &message), ("type", b.id.as_str())], &body);
                    }
                    xml.close("testcase");
                }
            }
        }
        xml.close("testsuite");
    }
    xml.close("testsuites");
    xml.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_lose_zone_and_fraction_and_odd_ones_are_dropped() {
        assert_eq!(ant_timestamp("2026-01-02T03:04:05Z").as_deref(), Some("2026-01-02T03:04:05"));
        assert_eq!(ant_timestamp("2026-01-02T03:04:05.123456Z").as_deref(), Some("2026-01-02T03:04:05"));
        assert_eq!(ant_timestamp("2026-01-02T03:04:05+00:00").as_deref(), Some("2026-01-02T03:04:05"));
        assert_eq!(ant_timestamp("2026-01-02T03:04:05+02:00"), None);
        assert_eq!(ant_timestamp("yesterday"), None);
    }

    #[test]
    fn a_failing_outcome_without_findings_still_fails() {
        let scenario = ScenarioResult {
            id: "s.x".into(),
            title: "x".into(),
            requirements: Vec::new(),
            tags: vec![],
            parity: vec![],
            outcome: Severity::Error,
            skip_reason: None,
            findings: vec![],
            duration: std::time::Duration::ZERO,
            expectation: None,
            rpcs: 0,
            exercised: Vec::new(),
        };
        let mut xml = Xml::new();
        Case::new(&scenario, false, WarningsAs::Passed).write(&mut xml, "s");
        assert!(xml.out.contains(r#"<error message="error" type="error">"#), "{}", xml.out);
    }

    #[test]
    fn attributes_are_escaped_on_one_line() {
        assert_eq!(escape_attr("a<b> & \"c\"\nd"), "a&lt;b&gt; &amp; &quot;c&quot; d");
    }

    #[test]
    fn cdata_end_markers_in_text_are_spelled_out() {
        let mut xml = Xml::new();
        xml.text("system-out", &[], "a]]>b");
        assert!(xml.out.ends_with("<system-out><![CDATA[a]]\\u{3e}b]]></system-out>\n"), "{}", xml.out);
    }
}
