//! The report writers (console, JUnit XML, JSON, files) and `--expect-failures`, tested on
//! hand-built run reports: golden files, a real JUnit reader, schema rules CI tools rely on,
//! round trips, and text hygiene.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use csi_conform::{
    proto::{self, csi::v1::CreateVolumeRequest},
    report::{
        self, Expectation, ExpectedFailures, Finding, RpcLatency, RunReport, ScenarioResult, Severity,
        SuiteResult,
    },
};
use proptest::prelude::*;

/// A secret that only ever goes into a request before the engine's redaction.
const SECRET: &str = "hunter2-TOPSECRET";

/// A secret too short for the scrubber of free text ([`csi_conform::scrub::MIN_LEN`]).
const PIN: &str = "Zq9";

// ---------------------------------------------------------------------------------------------
// The run used throughout: two suites with a pass, a fail, a warn, a skip, an error, an
// expected failure and an unexpected pass.

fn scenario(id: &str, title: &str, findings: Vec<Finding>, millis: u64) -> ScenarioResult {
    let mut s = ScenarioResult {
        id: id.into(),
        title: title.into(),
        requirements: Vec::new(),
        tags: vec![],
        parity: vec![],
        outcome: Severity::Pass,
        skip_reason: None,
        findings,
        duration: Duration::from_millis(millis),
        expectation: None,
        rpcs: 0,
        exercised: Vec::new(),
    };
    s.settle();
    s
}

/// A finding about an RPC, with what was expected and what came back.
fn rpc_finding(
    severity: Severity,
    kind: &str,
    message: &str,
    rpc: &str,
    expected: &str,
    got: &str,
) -> Finding {
    Finding {
        step: Some(0),
        rpc: Some(rpc.into()),
        expected: Some(expected.into()),
        got: Some(got.into()),
        ..Finding::new(severity, kind, message)
    }
}

/// The one-line request summary the engine would record: secrets redacted by the proto layer.
fn redacted_create_volume() -> String {
    let request = CreateVolumeRequest {
        name: String::new(),
        secrets: [("password".to_owned(), SECRET.to_owned())].into(),
        ..Default::default()
    };
    proto::to_redacted_json(&proto::to_dynamic(&request))
}

pub(crate) fn sample_report(strict: bool) -> RunReport {
    let mut no_name = scenario(
        "controller.create-volume.no-name",
        "CreateVolume fails when no name is provided",
        vec![Finding {
            step: Some(1),
            request: Some(redacted_create_volume()),
            plugin_message: Some(
                "volume name is required & must be < 128 bytes\n  at validate (driver.go:42)".into(),
            ),
            ..rpc_finding(
                Severity::Fail,
                "unexpected-code",
                "CreateVolume without a name: expected INVALID_ARGUMENT, got INTERNAL",
                "CreateVolume",
                "INVALID_ARGUMENT",
                "INTERNAL",
            )
        }],
        45,
    );
    no_name.requirements = vec![
        report::RequirementRef {
            id: "CreateVolume.name.required".into(),
            level: "MUST".into(),
            summary: "A request without a name is refused".into(),
            link: "https://github.com/container-storage-interface/spec/blob/v1.12.0/spec.md#createvolume".into(),
        },
        report::RequirementRef {
            id: "ErrorScheme.errors.missing-required-field".into(),
            level: "MUST".into(),
            summary: "A request lacking a REQUIRED field is refused with INVALID_ARGUMENT".into(),
            link: "https://github.com/container-storage-interface/spec/blob/v1.12.0/spec.md#error-scheme".into(),
        },
    ];
    no_name.parity = vec![10];
    no_name.tags = vec!["negative".into()];

    let mut skipped = scenario("controller.list-snapshots.paging", "ListSnapshots pages", vec![], 0);
    skipped.outcome = Severity::Skip;
    skipped.skip_reason =
        Some("requires controller:LIST_SNAPSHOTS, which the plugin does not advertise".into());

    let mut expected = scenario(
        "node.publish-volume.readonly",
        "NodePublishVolume honours readonly",
        vec![rpc_finding(
            Severity::Fail,
            "assertion",
            "the target path is writable after a readonly publish",
            "NodePublishVolume",
            "read-only mount",
            "read-write mount",
        )],
        120,
    );
    expected.expectation = Some(Expectation::ExpectedFailure {
        reason: "read-only bind mounts are not implemented (issue 12)".into(),
    });

    let mut unexpected =
        scenario("node.get-volume-stats.basic", "NodeGetVolumeStats reports usage", vec![], 30);
    unexpected.expectation =
        Some(Expectation::UnexpectedPass { reason: "stats were missing before 1.2".into() });

    RunReport {
        tool_version: "0.1.0".into(),
        plugin_name: "hostpath.csi.k8s.io".into(),
        plugin_version: "v1.14.0".into(),
        endpoints: vec!["unix:///run/csi/csi.sock".into()],
        capabilities: vec![
            "plugin:CONTROLLER_SERVICE".into(),
            "controller:CREATE_DELETE_VOLUME".into(),
            "node:STAGE_UNSTAGE_VOLUME".into(),
        ],
        seed: 424242,
        strict,
        started_at: "2026-03-01T12:00:00.250Z".into(),
        duration: Duration::from_millis(3_210),
        suites: vec![
            SuiteResult {
                id: "controller".into(),
                title: "Controller service".into(),
                source: "builtin:controller.yaml".into(),
                scenarios: vec![
                    scenario("controller.create-volume.basic", "CreateVolume creates a volume", vec![], 12),
                    no_name,
                    scenario(
                        "controller.validate-volume-capabilities.confirmed",
                        "ValidateVolumeCapabilities confirms what it supports",
                        vec![rpc_finding(
                            Severity::Warn,
                            "unconfirmed",
                            "ValidateVolumeCapabilities did not confirm a capability CreateVolume accepted",
                            "ValidateVolumeCapabilities",
                            "confirmed",
                            "not confirmed",
                        )],
                        8,
                    ),
                    skipped,
                ],
            },
            SuiteResult {
                id: "node".into(),
                title: "Node service".into(),
                source: "builtin:node.yaml".into(),
                scenarios: vec![
                    scenario(
                        "node.stage-volume.basic",
                        "NodeStageVolume stages a volume",
                        vec![Finding {
                            plugin_message: Some("connection refused".into()),
                            ..rpc_finding(
                                Severity::Error,
                                "teardown",
                                "NodeUnstageVolume failed during teardown: the plugin is unreachable",
                                "NodeUnstageVolume",
                                "OK",
                                "UNAVAILABLE",
                            )
                        }],
                        2_001,
                    ),
                    expected,
                    unexpected,
                ],
            },
        ],
        rpc_latency: BTreeMap::from([(
            "CreateVolume".to_owned(),
            RpcLatency { calls: 4, errors: 1, min: 0.001, median: 0.004, max: 0.125 },
        )]),
        interrupted: None,
        mounts: Vec::new(),
        sizes: None,
        spec: None,
        orchestrators: Vec::new(),
        settled: None,
        opt_in_coverage: Default::default(),
    }
}

// ---------------------------------------------------------------------------------------------
// Golden files.

/// Compares `actual` with `tests/golden/<name>`; with `UPDATE_GOLDEN=1` rewrites it instead.
pub(crate) fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 cargo test writes it)", path.display()));
    if expected == actual {
        return;
    }
    let (old, new): (Vec<_>, Vec<_>) = (expected.lines().collect(), actual.lines().collect());
    let mut diff = String::new();
    for i in (0..old.len().max(new.len())).filter(|&i| old.get(i) != new.get(i)).take(12) {
        diff += &format!(
            "line {}:\n  - {}\n  + {}\n",
            i + 1,
            old.get(i).unwrap_or(&"<none>"),
            new.get(i).unwrap_or(&"<none>")
        );
    }
    panic!(
        "{} differs from the output ({} vs {} lines); first differences:\n{diff}\
         If the change is intended, rerun with UPDATE_GOLDEN=1 and review the diff.",
        path.display(),
        old.len(),
        new.len()
    );
}

/// The console output of a run: every scenario line, then the summary.
fn console_output(report: &RunReport, color: bool) -> String {
    let mut out = String::new();
    for s in report.suites.iter().flat_map(|s| &s.scenarios) {
        out += &report::scenario_line(s, color);
        out.push('\n');
    }
    out.push('\n');
    out + &report::summary(report, color)
}

#[test]
fn junit_matches_golden() {
    let xml = report::to_junit_xml(&sample_report(false));
    crate::support::junit_schema::check(&xml).unwrap_or_else(|e| panic!("junit-10.xsd refuses it: {e}"));
    golden("junit.xml", &xml);
}

#[test]
fn junit_strict_matches_golden() {
    let xml = report::to_junit_xml(&sample_report(true));
    crate::support::junit_schema::check(&xml).unwrap_or_else(|e| panic!("junit-10.xsd refuses it: {e}"));
    golden("junit-strict.xml", &xml);
}

#[test]
fn console_matches_golden() {
    golden("console.txt", &console_output(&sample_report(false), false));
}

#[test]
fn junit_is_deterministic() {
    assert_eq!(report::to_junit_xml(&sample_report(false)), report::to_junit_xml(&sample_report(false)));
}

// ---------------------------------------------------------------------------------------------
// JUnit as a CI system reads it.

pub(crate) fn parse_junit(xml: &str) -> junit_parser::TestSuites {
    if let Err(e) = crate::support::junit_schema::check(xml) {
        panic!("the strict JUnit schema (junit-10.xsd) refuses the report: {e}\n{xml}");
    }
    junit_parser::from_reader(std::io::Cursor::new(xml.as_bytes()))
        .unwrap_or_else(|e| panic!("a JUnit reader refuses the report: {e}\n{xml}"))
}

pub(crate) fn case<'a>(suites: &'a junit_parser::TestSuites, id: &str) -> &'a junit_parser::TestCase {
    suites
        .suites
        .iter()
        .flat_map(|s| &s.cases)
        .find(|c| c.original_name == id)
        .unwrap_or_else(|| panic!("no test case {id}"))
}

/// A test case's property: a `name: value` line opening its `<system-out>` (the strict schema
/// has no `<properties>` in a test case).
pub(crate) fn case_prop<'a>(case: &'a junit_parser::TestCase, name: &str) -> Option<&'a str> {
    let out = case.system_out.as_deref()?;
    out.split("\n\n").next()?.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
}

/// The skipped cases of a report: the strict schema has no skipped count on `<testsuites>`,
/// so they are summed over its suites.
pub(crate) fn skipped_in(suites: &junit_parser::TestSuites) -> u64 {
    suites.suites.iter().map(|s| s.skipped).sum()
}

pub(crate) fn prop<'a>(props: &'a junit_parser::Properties, name: &str) -> Option<&'a str> {
    props.vec.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[test]
fn a_junit_reader_sees_the_counts_messages_and_properties() {
    let suites = parse_junit(&report::to_junit_xml(&sample_report(false)));
    // fail + unexpected pass are failures, the teardown error an error, one skip; the warning
    // and the expected failure pass.
    assert_eq!((suites.tests, suites.failures, suites.errors, skipped_in(&suites)), (7, 2, 1, 1));
    assert_eq!(suites.time, 3.21);
    let [controller, node] = &suites.suites[..] else { panic!("two suites") };
    assert_eq!(
        (
            controller.name.as_str(),
            controller.tests,
            controller.failures,
            controller.errors,
            controller.skipped
        ),
        ("controller", 4, 1, 0, 1)
    );
    assert_eq!(
        (node.name.as_str(), node.tests, node.failures, node.errors, node.skipped),
        ("node", 3, 1, 1, 0)
    );
    assert_eq!(controller.hostname.as_deref(), Some("localhost"));
    assert_eq!(controller.timestamp.as_deref(), Some("2026-03-01T12:00:00"));

    let p = &controller.properties;
    assert_eq!(prop(p, "plugin-name"), Some("hostpath.csi.k8s.io"));
    assert_eq!(prop(p, "plugin-version"), Some("v1.14.0"));
    assert_eq!(prop(p, "tool-version"), Some("0.1.0"));
    assert_eq!(prop(p, "seed"), Some("424242"));
    assert_eq!(prop(p, "endpoint.0"), Some("unix:///run/csi/csi.sock"));
    assert_eq!(prop(p, "capability.controller:CREATE_DELETE_VOLUME"), Some("true"));
    assert_eq!(p.hashmap.len(), p.vec.len(), "property names are unique");

    let fail = case(&suites, "controller.create-volume.no-name");
    assert_eq!(fail.classname.as_deref(), Some("controller"));
    assert_eq!(
        crate::report::case_prop(fail, "requirement.CreateVolume.name.required"),
        Some("https://github.com/container-storage-interface/spec/blob/v1.12.0/spec.md#createvolume"),
        "a failed test case names the requirements it breaks, with their spec links"
    );
    assert_eq!(fail.time, 0.045);
    let failure = fail.status.failure_as_ref();
    assert_eq!(failure.failure_type, "unexpected-code");
    assert_eq!(failure.message, "CreateVolume without a name: expected INVALID_ARGUMENT, got INTERNAL");
    for part in [
        "scenario: CreateVolume fails when no name is provided",
        "requirement: CreateVolume.name.required [MUST] A request without a name is refused (https://github.com/container-storage-interface/spec/blob/v1.12.0/spec.md#createvolume)",
        "requirement: ErrorScheme.errors.missing-required-field [MUST]",
        "FAIL unexpected-code (step 2): CreateVolume without a name",
        "rpc: CreateVolume",
        "request: {",
        "\"<redacted>\"",
        "expected: INVALID_ARGUMENT",
        "got: INTERNAL",
        "plugin message: volume name is required & must be < 128 bytes\n      at validate (driver.go:42)",
    ] {
        assert!(failure.text.contains(part), "failure text lacks {part:?}:\n{}", failure.text);
    }

    let skip = case(&suites, "controller.list-snapshots.paging").status.skipped_as_ref();
    assert_eq!(skip.message, "requires controller:LIST_SNAPSHOTS, which the plugin does not advertise");
    assert_eq!(skip.text, skip.message, "GitLab shows the text");

    let warned = case(&suites, "controller.validate-volume-capabilities.confirmed");
    assert!(warned.status.is_success());
    assert_eq!(
        crate::report::case_prop(warned, "warning"),
        Some("unconfirmed: ValidateVolumeCapabilities did not confirm a capability CreateVolume accepted")
    );
    assert!(warned.system_out.as_deref().unwrap().contains("WARN unconfirmed (step 1)"));

    let error = case(&suites, "node.stage-volume.basic").status.error_as_ref();
    assert_eq!(
        (error.error_type.as_str(), error.message.as_str()),
        ("teardown", "NodeUnstageVolume failed during teardown: the plugin is unreachable")
    );
    assert!(error.text.contains("plugin message: connection refused"));

    let xfail = case(&suites, "node.publish-volume.readonly");
    assert!(xfail.status.is_success());
    assert_eq!(
        crate::report::case_prop(xfail, "expected-failure"),
        Some("read-only bind mounts are not implemented (issue 12)")
    );
    let out = xfail.system_out.as_deref().unwrap();
    assert!(out.contains("expected failure") && out.contains("got: read-write mount"), "{out}");

    let xpass = case(&suites, "node.get-volume-stats.basic").status.failure_as_ref();
    assert_eq!(xpass.failure_type, "unexpected-pass");
    assert!(xpass.message.contains("stats were missing before 1.2"), "{}", xpass.message);

    let pass = case(&suites, "controller.create-volume.basic");
    assert!(pass.status.is_success() && pass.system_out.is_none() && pass.properties.vec.is_empty());
    assert!(suites.suites.iter().flat_map(|s| &s.cases).all(|c| c.properties.vec.is_empty()), "no <properties> in a test case");
}

#[test]
fn under_strict_warnings_are_failures() {
    let suites = parse_junit(&report::to_junit_xml(&sample_report(true)));
    assert_eq!((suites.tests, suites.failures, suites.errors, skipped_in(&suites)), (7, 3, 1, 1));
    let warned = case(&suites, "controller.validate-volume-capabilities.confirmed");
    let failure = warned.status.failure_as_ref();
    assert_eq!(failure.failure_type, "unconfirmed");
    assert!(failure.text.contains("WARN unconfirmed (step 1)"));
    assert!(crate::report::case_prop(warned, "warning").is_none());
    assert_eq!(prop(&suites.suites[0].properties, "strict"), Some("true"));
}

// ---------------------------------------------------------------------------------------------
// Schema rules CI tools rely on, checked on the raw XML (the reader above is lenient).

/// An element as the checks below need it.
#[derive(Debug, Default)]
struct Element {
    name: String,
    attrs: BTreeMap<String, String>,
    children: Vec<Element>,
    /// Non-whitespace character data directly inside it (CDATA included).
    has_text: bool,
}

fn parse_tree(xml: &str) -> Element {
    use quick_xml::events::Event;
    let element = |e: &quick_xml::events::BytesStart<'_>| Element {
        name: e.name().as_ref().to_owned(),
        attrs: e
            .attributes()
            .map(|a| {
                let a = a.expect("well-formed attribute");
                let value =
                    a.normalized_value(quick_xml::XmlVersion::Explicit1_0).expect("escaped attribute value");
                (a.key.as_ref().to_owned(), value.into_owned())
            })
            .collect(),
        ..Element::default()
    };
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack = vec![Element::default()];
    loop {
        match reader.read_event().unwrap_or_else(|e| panic!("not well-formed XML: {e}")) {
            Event::Start(e) => stack.push(element(&e)),
            Event::Empty(e) => stack.last_mut().unwrap().children.push(element(&e)),
            Event::End(_) => {
                let done = stack.pop().unwrap();
                stack.last_mut().unwrap().children.push(done);
            }
            Event::Text(t) => stack.last_mut().unwrap().has_text |= !t.trim().is_empty(),
            Event::CData(_) | Event::GeneralRef(_) => stack.last_mut().unwrap().has_text = true,
            Event::Eof => break,
            Event::Decl(_) => {}
            other => panic!("unexpected XML event {other:?}"),
        }
    }
    let mut document = stack.pop().unwrap();
    assert!(stack.is_empty() && document.children.len() == 1, "one root element");
    document.children.pop().unwrap()
}

fn count_attr(e: &Element, name: &str) -> usize {
    e.attrs.get(name).unwrap_or_else(|| panic!("<{}> lacks {name}", e.name)).parse().unwrap()
}

/// A `time` attribute: plain decimal seconds (Jenkins refuses exponents and separators).
fn check_time(e: &Element) -> f64 {
    let time = &e.attrs["time"];
    assert!(time.chars().all(|c| c.is_ascii_digit() || c == '.'), "time {time:?}");
    time.parse().unwrap()
}

fn check_properties(e: &Element) {
    assert!(e.attrs.is_empty() && !e.has_text);
    for p in &e.children {
        assert_eq!(p.name, "property");
        assert!(p.children.is_empty() && !p.has_text);
        assert_eq!(p.attrs.keys().collect::<Vec<_>>(), ["name", "value"]);
    }
}

/// Checks one test case and returns which result element it has, if any.
fn check_testcase(tc: &Element, suite: &str) -> Option<String> {
    assert_eq!(tc.attrs.keys().collect::<Vec<_>>(), ["classname", "name", "time"]);
    assert_eq!(tc.attrs["classname"], suite);
    assert!(tc.attrs["name"].starts_with(&format!("{suite}.")));
    check_time(tc);
    // Order: (skipped | failure | error)?, system-out? (no <properties> in a test case).
    let rank = |name: &str| match name {
        "skipped" | "failure" | "error" => 1,
        "system-out" => 2,
        other => panic!("unexpected <{other}> in a testcase"),
    };
    let ranks: Vec<_> = tc.children.iter().map(|c| rank(&c.name)).collect();
    assert!(
        ranks.windows(2).all(|w| w[0] < w[1]),
        "children of {} out of order or repeated",
        tc.attrs["name"]
    );
    let mut result = None;
    for child in &tc.children {
        match child.name.as_str() {
            "system-out" => assert!(child.attrs.is_empty() && child.has_text),
            name => {
                let keys: Vec<_> = child.attrs.keys().collect();
                assert!(keys == ["message"] || keys == ["message", "type"], "{keys:?}");
                assert!(!child.attrs["message"].is_empty());
                result = Some(name.to_owned());
            }
        }
    }
    result
}

/// The rules: known elements and attributes only, children in schema order, at most one result
/// per test case, counts that agree with the elements, plain decimal times.
fn check_junit_schema(xml: &str) {
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"));
    let bad = xml.chars().find(|&c| matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}'));
    assert_eq!(bad, None, "a character XML 1.0 forbids");
    let root = parse_tree(xml);
    assert_eq!(root.name, "testsuites");
    let mut totals = [0usize; 4];
    for suite in &root.children {
        assert_eq!(suite.name, "testsuite");
        let keys: Vec<_> = suite.attrs.keys().map(String::as_str).collect();
        assert!(
            keys.iter().all(|k| [
                "name",
                "tests",
                "failures",
                "errors",
                "skipped",
                "time",
                "timestamp",
                "hostname"
            ]
            .contains(k)),
            "{keys:?}"
        );
        check_time(suite);
        let (props, cases): (Vec<_>, Vec<_>) = suite.children.iter().partition(|c| c.name == "properties");
        assert!(
            props.len() <= 1
                && suite.children.first().is_some_and(|c| props.is_empty() || c.name == "properties")
        );
        props.iter().for_each(|p| check_properties(p));
        let mut counts = [cases.len(), 0, 0, 0];
        for tc in cases {
            assert_eq!(tc.name, "testcase");
            match check_testcase(tc, &suite.attrs["name"]).as_deref() {
                Some("failure") => counts[1] += 1,
                Some("error") => counts[2] += 1,
                Some("skipped") => counts[3] += 1,
                _ => {}
            }
        }
        let declared = ["tests", "failures", "errors", "skipped"].map(|a| count_attr(suite, a));
        assert_eq!(declared, counts, "counts of suite {}", suite.attrs["name"]);
        totals.iter_mut().zip(counts).for_each(|(t, c)| *t += c);
    }
    assert_eq!(["tests", "failures", "errors"].map(|a| count_attr(&root, a)), totals[..3]);
    assert!(!root.attrs.contains_key("skipped") && !root.attrs.contains_key("timestamp"), "junit-10.xsd: not on <testsuites>");
    check_time(&root);
}

#[test]
fn junit_follows_the_schema_rules() {
    check_junit_schema(&report::to_junit_xml(&sample_report(false)));
    check_junit_schema(&report::to_junit_xml(&sample_report(true)));
    let mut empty = sample_report(false);
    empty.suites.clear();
    check_junit_schema(&report::to_junit_xml(&empty));
}

/// Text a plugin might send back: terminal escapes, NUL, CDATA terminators, markup,
/// non-characters, bidi overrides, CR line ends.
const HOSTILE: &str = "\u{1b}[31mred\u{1b}[0m ]]> <b>&amp;</b> \u{0}nul \u{7}\u{fffe}\u{ffff} \u{202e}txt.exe\r\nsecond\tline\u{85}";

/// The sample run with hostile text in every free-text field a plugin or a suite can fill.
fn hostile_report() -> RunReport {
    let mut report = sample_report(false);
    report.plugin_name = HOSTILE.into();
    report.interrupted = Some(HOSTILE.into());
    for s in report.suites.iter_mut().flat_map(|s| &mut s.scenarios) {
        s.title = HOSTILE.into();
        if let Some(reason) = &mut s.skip_reason {
            *reason = HOSTILE.into();
        }
        for f in &mut s.findings {
            f.message = HOSTILE.into();
            f.plugin_message = Some(HOSTILE.into());
            f.got = Some(HOSTILE.into());
        }
    }
    report
}

#[test]
fn hostile_text_is_made_visible_and_safe() {
    let xml = report::to_junit_xml(&hostile_report());
    crate::support::junit_schema::check(&xml).unwrap_or_else(|e| panic!("junit-10.xsd refuses it: {e}"));
    check_junit_schema(&xml);
    let suites = parse_junit(&xml);
    let failure = case(&suites, "controller.create-volume.no-name").status.failure_as_ref();
    let visible =
        r"\u{1b}[31mred\u{1b}[0m ]]> <b>&amp;</b> \u{0}nul \u{7}\u{fffe}\u{ffff} \u{202e}txt.exe second line";
    assert_eq!(failure.message, visible);
    assert!(
        failure.text.contains(r"plugin message: \u{1b}[31mred\u{1b}[0m ]]\u{3e} <b>&amp;</b> \u{0}nul"),
        "{}",
        failure.text
    );
    assert!(
        failure.text.contains("txt.exe\n    second\tline\n"),
        "continuation lines stay in their item: {}",
        failure.text
    );
    let console = console_output(&hostile_report(), false);
    assert!(!console.chars().any(|c| c.is_control() && c != '\n'), "{console:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_text_gives_readable_junit(message in any::<String>(), reason in any::<String>(), plugin in any::<String>()) {
        let mut report = sample_report(false);
        let scenarios: Vec<&mut ScenarioResult> = report.suites.iter_mut().flat_map(|s| &mut s.scenarios).collect();
        for s in scenarios {
            s.skip_reason = s.skip_reason.as_ref().map(|_| reason.clone());
            for f in &mut s.findings {
                f.message = message.clone();
                f.plugin_message = Some(plugin.clone());
            }
        }
        let xml = report::to_junit_xml(&report);
        crate::support::junit_schema::check(&xml).unwrap_or_else(|e| panic!("junit-10.xsd refuses it: {e}"));
        check_junit_schema(&xml);
        let suites = parse_junit(&xml);
        prop_assert_eq!((suites.tests, suites.failures, suites.errors, skipped_in(&suites)), (7, 2, 1, 1));
    }
}

// ---------------------------------------------------------------------------------------------
// Console.

#[test]
fn console_without_colour_has_no_control_characters_and_with_colour_has_ansi() {
    let report = sample_report(false);
    for s in report.suites.iter().flat_map(|s| &s.scenarios) {
        let line = report::scenario_line(s, false);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(report::scenario_line(s, true).contains("\u{1b}["));
    }
    let plain = report::summary(&report, false);
    assert!(!plain.chars().any(|c| c.is_control() && c != '\n'), "{plain:?}");
    let coloured = report::summary(&report, true);
    assert!(coloured.contains("\u{1b}[1;31mFAILED\u{1b}[0m"), "{coloured:?}");
}

#[test]
fn console_lines_say_why() {
    let report = sample_report(false);
    let scenarios: Vec<_> = report.suites.iter().flat_map(|s| &s.scenarios).collect();
    assert_eq!(report::scenario_line(scenarios[0], false), "PASS  controller.create-volume.basic (0.012s)");
    assert_eq!(
        report::scenario_line(scenarios[1], false),
        "FAIL  controller.create-volume.no-name (0.045s): CreateVolume without a name: expected INVALID_ARGUMENT, got INTERNAL"
    );
    assert!(
        report::scenario_line(scenarios[3], false)
            .starts_with("SKIP  controller.list-snapshots.paging (0.000s): requires")
    );
    assert!(
        report::scenario_line(scenarios[4], false)
            .starts_with("ERROR node.stage-volume.basic (2.001s): NodeUnstageVolume failed")
    );
    let summary = report::summary(&report, false);
    assert!(
        summary.contains(
            r"rerun: csi-conform run ... --focus '^controller\.create-volume\.no-name$' --seed 424242"
        ),
        "{summary}"
    );
    assert!(summary.contains("Seed: 424242"));
    assert!(summary.contains("7 scenarios in 3.210s: 2 passed, 2 failed, 1 warned, 1 skipped, 1 errored\n"));
    assert!(summary.contains("--expect-failures: 1 expected failure, 1 unexpected pass\n"));
}

#[test]
fn an_interrupted_run_says_so_everywhere() {
    let mut run = sample_report(false);
    run.interrupted = Some("received SIGTERM".into());
    assert!(report::summary(&run, false).contains("\nInterrupted: received SIGTERM\n"));
    let suites = parse_junit(&report::to_junit_xml(&run));
    assert!(suites.suites.iter().all(|s| prop(&s.properties, "interrupted") == Some("received SIGTERM")));
    assert_eq!(report::from_json(&report::to_json(&run)).unwrap(), run);
}

// ---------------------------------------------------------------------------------------------
// JSON.

#[test]
fn json_round_trips_and_carries_counts() {
    let original = sample_report(false);
    let json = report::to_json(&original);
    assert_eq!(report::from_json(&json).unwrap(), original);
    assert_eq!(json, report::to_json(&original), "stable");
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["format_version"], 2);
    assert_eq!(value["counts"], serde_json::json!({"pass": 2, "fail": 2, "warn": 1, "skip": 1, "error": 1, "inconclusive": 0}));
    let keys: Vec<_> = value.as_object().unwrap().keys().cloned().collect();
    assert!(json.find("\"format_version\"").unwrap() < json.find("\"counts\"").unwrap());
    assert!(json.find("\"counts\"").unwrap() < json.find("\"tool_version\"").unwrap());
    assert!(keys.contains(&"rpc_latency".to_owned()));
}

#[test]
fn json_from_a_newer_csi_conform_is_refused() {
    let json =
        report::to_json(&sample_report(false)).replacen("\"format_version\": 2", "\"format_version\": 99", 1);
    let err = report::from_json(&json).unwrap_err();
    assert!(matches!(err, report::JsonError::UnsupportedVersion { found: 99 }), "{err}");
    assert!(matches!(report::from_json("{\"counts\": {}}"), Err(report::JsonError::Parse(_))));
}

/// A finding's step is the same number in every report: counted from 1 in the JSON (format
/// 2) as in the JUnit body; a format 1 report (counted from 0) reads back to the same step.
#[test]
fn steps_are_counted_from_one_in_json_as_in_junit() {
    let original = sample_report(false);
    let json = report::to_json(&original);
    let junit = report::to_junit_xml(&original);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut checked = 0;
    for (i, s) in original.suites.iter().flat_map(|s| &s.scenarios).enumerate() {
        for (j, f) in s.findings.iter().enumerate() {
            let Some(step) = f.step else { continue };
            let suite = original.suites.iter().position(|x| x.scenarios.iter().any(|y| y.id == s.id)).unwrap();
            let k = original.suites[suite].scenarios.iter().position(|y| y.id == s.id).unwrap();
            let written = &value["suites"][suite]["scenarios"][k]["findings"][j]["step"];
            assert_eq!(written.as_u64(), Some(step as u64 + 1), "{} finding {j} (scenario {i})", s.id);
            assert!(junit.contains(&format!("(step {})", step + 1)), "{}", s.id);
            checked += 1;
        }
    }
    assert!(checked > 0, "the sample has findings with steps");
    let version1 = json.replacen("\"format_version\": 2", "\"format_version\": 1", 1).replace("\"step\": 1", "\"step\": 0").replace("\"step\": 2", "\"step\": 1");
    let read = report::from_json(&version1).unwrap();
    let steps = |r: &RunReport| r.suites.iter().flat_map(|s| &s.scenarios).flat_map(|s| &s.findings).map(|f| f.step).collect::<Vec<_>>();
    assert_eq!(steps(&read), steps(&original));
}

/// Puts `text` into every finding's plugin message.
fn set_plugin_messages(report: &mut RunReport, text: &str) {
    for f in report.suites.iter_mut().flat_map(|s| &mut s.scenarios).flat_map(|s| &mut s.findings) {
        f.plugin_message = Some(text.to_owned());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn json_round_trips_any_text_and_duration(text in any::<String>(), micros in 0u64..10_000_000_000, seed in any::<u64>()) {
        let mut original = sample_report(false);
        original.seed = seed;
        set_plugin_messages(&mut original, &text);
        original.duration = Duration::from_micros(micros);
        original.suites[0].scenarios[0].duration = Duration::from_micros(micros / 3);
        let back = report::from_json(&report::to_json(&original)).unwrap();
        prop_assert_eq!(back, original);
    }
}

// ---------------------------------------------------------------------------------------------
// Secrets.

/// What the writers themselves guarantee: they do not scrub (redaction happens where the
/// request is built, from the descriptor), they render the redacted request verbatim, so a
/// reader gets `<redacted>` back through any escaping.
#[test]
fn the_redaction_marker_survives_every_writer_verbatim() {
    let request = redacted_create_volume();
    assert!(request.contains(proto::REDACTED) && !request.contains(SECRET), "{request}");
    let report = sample_report(false);
    let suites = parse_junit(&report::to_junit_xml(&report));
    let failure_text = &case(&suites, "controller.create-volume.no-name").status.failure_as_ref().text;
    assert!(failure_text.contains(&format!("\"{}\"", proto::REDACTED)), "{failure_text}");
    let back = report::from_json(&report::to_json(&report)).unwrap();
    assert_eq!(back.suites[0].scenarios[1].findings[0].request.as_deref(), Some(request.as_str()));
    assert!(report::html::to_html(&report).contains("&quot;&lt;redacted&gt;&quot;"), "the HTML page shows the marker escaped");
}

/// A scenario whose failures show the request (with a secret and a mount flag carrying data)
/// and quote an answer that echoes the mount flag.
const LEAKY: &str = r#"
suite: leaky
title: Sensitive values in failures
scenarios:
  - id: request-shown
    title: an unmet expectation shows the request
    steps:
      - call: CreateVolume
        request:
          name: "${name}"
          volume_capabilities: [{ mount: { mount_flags: ["password=Flag-hunter2"] }, access_mode: { mode: SINGLE_NODE_WRITER } }]
        expect: { code: ALREADY_EXISTS }
  - id: answer-quoted
    title: an assertion quotes an answer that echoes the mount flag
    steps:
      - call: CreateVolume
        request:
          name: "${name}"
          volume_capabilities: [{ mount: { mount_flags: ["password=Flag-hunter2"] }, access_mode: { mode: SINGLE_NODE_WRITER } }]
        save: { vol: volume.volume_id }
      - call: ValidateVolumeCapabilities
        request:
          volume_id: "${vol}"
          volume_capabilities: [{ mount: { mount_flags: ["password=Flag-hunter2"] }, access_mode: { mode: SINGLE_NODE_WRITER } }]
        expect:
          fields: [{ path: "confirmed.volume_capabilities[0].mount.mount_flags[0]", equals: "nothing like it" }]
"#;

/// The engine's redaction, end to end: a real run against the reference plugin (which
/// checks the secret it is sent) fails where the request and an answer are shown; every
/// writer's output shows them redacted and never the secret or the flag. Breaking the
/// engine's redaction (`proto::redacted`, or mount flags as sensitive) fails this test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_redacted_by_the_engine_stay_redacted_in_every_output() {
    use csi_conform::{reference, secrets::Secrets, suite};
    // `pin` is shorter than the scrubber's minimum: only the descriptor-driven redaction of
    // the request hides it, so a break there cannot hide behind the scrubbing of free text.
    let secrets = format!("CreateVolumeSecret: {{ password: {SECRET}, pin: {PIN} }}\n");
    let plugin = crate::support::TestPlugin::start(reference::Config {
        secrets: Some(Secrets::parse(&secrets, Path::new("secrets.yaml")).unwrap()),
        ..reference::Config::default()
    })
    .await;
    let engine = crate::support::engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    let config = suite::RunConfig {
        work_dir: work.path().join("work"),
        secrets: BTreeMap::from([(
            "CreateVolumeSecret".to_owned(),
            BTreeMap::from([("password".to_owned(), SECRET.to_owned()), ("pin".to_owned(), PIN.to_owned())]),
        )]),
        ..suite::RunConfig::default()
    };
    let suites = vec![suite::load_str("leaky.yaml", LEAKY).unwrap()];
    let run = suite::run(&engine, &suites, &config).await;

    // Both failed where they show what leaks if redaction breaks.
    let shown = run.scenario("leaky.request-shown").unwrap();
    assert_eq!(shown.outcome, Severity::Fail, "{:#?}", shown.findings);
    let request = shown.findings[0].request.as_deref().unwrap();
    for field in [r#""mount_flags":["<redacted>"]"#, r#""password":"<redacted>""#, r#""pin":"<redacted>""#] {
        assert!(request.contains(field), "{field} in {request}");
    }
    let quoted = run.scenario("leaky.answer-quoted").unwrap();
    assert_eq!(quoted.outcome, Severity::Fail, "{:#?}", quoted.findings);
    assert!(quoted.findings[0].message.contains(proto::REDACTED), "{}", quoted.findings[0].message);

    let outputs = [
        ("JUnit", report::to_junit_xml(&run)),
        ("JUnit strict", report::to_junit_xml(&RunReport { strict: true, ..run.clone() })),
        ("JSON", report::to_json(&run)),
        ("HTML", report::html::to_html(&run)),
        ("console", console_output(&run, false)),
        ("console in colour", console_output(&run, true)),
    ];
    for (what, out) in &outputs {
        for value in [SECRET, "hunter2", PIN] {
            assert!(!out.contains(value), "{value} in the {what} output:\n{out}");
        }
    }
    for (what, out) in &outputs[..4] {
        assert!(out.contains("redacted"), "the {what} output shows the request it redacted");
    }
}

// ---------------------------------------------------------------------------------------------
// --expect-failures.

fn expect_file(dir: &tempfile::TempDir, text: &str) -> PathBuf {
    let path = dir.path().join("expected-failures.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn expect_failures_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("controller.a: known\ncontroller.b: ''\n", ":2:", "empty reason"),
        ("controller.a: known\ncontroller.b:\n", ":2:", "empty reason"),
        (
            "controller.a: known\n\ncontroller.b: x\ncontroller.a: again\n",
            ":4:",
            "duplicate id controller.a (first listed on line 1)",
        ),
        ("- controller.a\n- controller.b\n", ":1:", "expected a map of scenario id"),
        ("controller.a: known\ncontroller.b: [x]\n", ":2:", "expected a non-empty reason"),
        ("controller.a: known\ncontroller.b: 3\n", ":2:", "expected a non-empty reason"),
    ];
    for (text, line, what) in cases {
        let path = expect_file(&dir, text);
        let err = ExpectedFailures::load(&path).unwrap_err().to_string();
        let prefix = format!("{}{line}", path.display());
        assert!(err.starts_with(&prefix) && err.contains(what), "{text:?}: {err}");
    }
    let missing = dir.path().join("nope.yaml");
    let err = ExpectedFailures::load(&missing).unwrap_err().to_string();
    assert!(err.starts_with(&missing.display().to_string()), "{err}");
}

#[test]
fn expect_failures_mark_failures_expected_and_passes_unexpected() {
    let dir = tempfile::tempdir().unwrap();
    let path = expect_file(
        &dir,
        "# known problems\n\
         controller.create-volume.no-name: names are optional in this plugin (issue 7)\n\
         node.stage-volume.basic: flaky teardown\n\
         controller.create-volume.basic: fixed in 1.3\n\
         controller.validate-volume-capabilities.confirmed: never confirms\n\
         controller.list-snapshots.paging: would fail if it ran\n\
         controller.gone: removed from the suite\n",
    );
    let list = ExpectedFailures::load(&path).unwrap();
    let mut run = sample_report(false);
    for s in run.suites.iter_mut().flat_map(|s| &mut s.scenarios) {
        s.expectation = None;
    }
    let missing = list.apply(&mut run);
    assert_eq!(missing, ["controller.gone"]);
    let expectation = |id: &str| {
        run.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id).unwrap().expectation.clone()
    };
    let xfail = |r: &str| Some(Expectation::ExpectedFailure { reason: r.into() });
    let xpass = |r: &str| Some(Expectation::UnexpectedPass { reason: r.into() });
    assert_eq!(
        expectation("controller.create-volume.no-name"),
        xfail("names are optional in this plugin (issue 7)")
    );
    assert_eq!(expectation("node.stage-volume.basic"), xfail("flaky teardown"));
    assert_eq!(expectation("controller.create-volume.basic"), xpass("fixed in 1.3"));
    assert_eq!(expectation("controller.validate-volume-capabilities.confirmed"), xpass("never confirms"));
    assert_eq!(expectation("controller.list-snapshots.paging"), None, "skips are left alone");
    assert_eq!(expectation("node.publish-volume.readonly"), None, "unlisted ones too");
    // The listed failures no longer fail the run; the stale entries do.
    assert!(run.failed());

    // Under --strict a warning fails, so listing it is an expected failure.
    let mut strict = sample_report(true);
    list.apply(&mut strict);
    let warned = &strict.suites[0].scenarios[2];
    assert_eq!(warned.expectation, xfail("never confirms"));
}

// ---------------------------------------------------------------------------------------------
// Inconclusive: the fourth outcome, in every writer.

/// A run of one pass and one scenario the harness could not decide (two witnesses disagreed).
fn undecided_report(strict: bool) -> RunReport {
    let mut run = sample_report(strict);
    let undecided = scenario(
        "controller.list-volumes.create-delete",
        "A deleted volume leaves the listing",
        vec![
            Finding::new(Severity::Pass, "assertion", "ListVolumes lists the new volume"),
            Finding {
                step: Some(3),
                rpc: Some("DeleteVolume".into()),
                ..Finding::inconclusive(
                    "witnesses-disagree",
                    "whether DeleteVolume deleted it: ControllerGetVolume says present, ListVolumes says gone",
                )
            },
        ],
        30,
    );
    run.suites = vec![SuiteResult {
        id: "controller".into(),
        title: "Controller".into(),
        source: "builtin:controller.yaml".into(),
        scenarios: vec![scenario("controller.create-volume.basic", "CreateVolume", vec![], 12), undecided],
    }];
    run.interrupted = None;
    run
}

#[test]
fn inconclusive_is_its_own_outcome_in_every_report_and_never_fails_the_run() {
    for strict in [false, true] {
        let run = undecided_report(strict);
        let id = "controller.list-volumes.create-delete";
        assert_eq!(run.scenario(id).unwrap().outcome, Severity::Inconclusive);
        assert!(!run.failed(), "inconclusive alone leaves the exit code at 0 (strict: {strict})");
        let counts = run.counts();
        assert_eq!((counts.pass, counts.inconclusive, counts.fail), (1, 1, 0));

        // Console: its word, its colour, its section and the count on the summary line.
        let s = run.scenario(id).unwrap();
        let line = report::scenario_line(s, false);
        assert!(line.starts_with(&format!("INCONCLUSIVE {id} (0.030s): whether DeleteVolume deleted it")), "{line}");
        assert!(report::scenario_line(s, true).starts_with("\u{1b}[35mINCONCLUSIVE\u{1b}[0m"));
        let summary = report::summary(&run, false);
        assert!(summary.contains("2 scenarios in 3.210s: 1 passed, 0 failed, 0 warned, 0 skipped, 0 errored, 1 inconclusive\n"), "{summary}");
        assert!(summary.contains("\nInconclusive (the harness could not decide"), "{summary}");
        assert!(summary.contains("Result: PASSED"), "{summary}");

        // JSON: the outcome word and the count, and back.
        let json = report::to_json(&run);
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["counts"]["inconclusive"], 1);
        assert_eq!(value["suites"][0]["scenarios"][1]["outcome"], "inconclusive");
        assert_eq!(value["suites"][0]["scenarios"][1]["findings"][1]["severity"], "inconclusive");
        assert_eq!(report::from_json(&json).unwrap(), run);

        // JUnit: a skipped case saying why, not a failure.
        let xml = report::to_junit_xml(&run);
        crate::support::junit_schema::check(&xml).unwrap_or_else(|e| panic!("junit-10.xsd refuses it: {e}"));
        let suites = parse_junit(&xml);
        assert_eq!((suites.tests, suites.failures, suites.errors, skipped_in(&suites)), (2, 0, 0, 1), "{xml}");
        assert!(
            xml.contains("<skipped message=\"inconclusive: whether DeleteVolume deleted it: ControllerGetVolume says present"),
            "{xml}"
        );
        check_junit_schema(&xml);

        // HTML: its badge, its filter and its group.
        let html = report::html::to_html(&run);
        assert!(html.contains("<span class=\"inconclusive\">1 inconclusive</span>"), "badge");
        assert!(html.contains("data-show=\"inconclusive\""), "filter button");
        assert!(html.contains("<h3>Inconclusive <small>"), "group");
        assert!(html.contains(&format!("data-filter=\"inconclusive\" data-scenario=\"{id}\"")), "item");
        assert!(html.contains("banner passed"), "the verdict stays PASSED");

        // GitHub annotations: a notice, never an error.
        let lines = report::annotations::annotations(&run);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with(&format!("::notice title={id} inconclusive::witnesses-disagree: ")), "{lines:?}");

        // Markdown job summary: counted and listed apart.
        let md = report::markdown::job_summary(&run, None, &[]);
        assert!(md.contains("| inconclusive |") && md.contains("| 1 | 0 | 0 | 0 | 0 | 1 |"), "{md}");
        assert!(md.contains("### Inconclusive (1: "), "{md}");
        assert!(md.contains("PASSED") && !md.contains("### Failures"), "{md}");
    }
}

#[test]
fn an_expected_failure_that_comes_out_inconclusive_is_not_an_unexpected_pass() {
    let dir = tempfile::tempdir().unwrap();
    let path = expect_file(&dir, "controller.list-volumes.create-delete: deletes are slow (issue 9)\n");
    let list = ExpectedFailures::load(&path).unwrap();
    for strict in [false, true] {
        let mut run = undecided_report(strict);
        assert!(list.apply(&mut run).is_empty());
        let s = run.scenario("controller.list-volumes.create-delete").unwrap();
        assert_eq!(s.expectation, None, "neither the listed failure nor a pass");
        assert!(!run.failed());
        assert!(!report::summary(&run, false).contains("unexpected pass"));
    }
}

// ---------------------------------------------------------------------------------------------
// Report files.

#[test]
fn reports_are_written_whole_into_new_directories() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("out/ci/junit.xml");
    let json = dir.path().join("out/json/report.json");
    let run = sample_report(false);
    report::write_reports(&run, Some(&junit), Some(&json)).unwrap();
    assert_eq!(std::fs::read_to_string(&junit).unwrap(), report::to_junit_xml(&run));
    assert_eq!(report::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap(), run);
    // Rewriting replaces the file; no temporary file is left beside it.
    report::write_reports(&run, Some(&junit), None).unwrap();
    let names: Vec<_> =
        std::fs::read_dir(junit.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["junit.xml"]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&junit).unwrap().permissions().mode() & 0o777, 0o644);
    }
}

#[test]
fn report_write_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let target = file.join("junit.xml");
    let err = report::write_reports(&sample_report(false), Some(&target), None).unwrap_err();
    assert!(matches!(err, report::ReportError::CreateDir { .. }), "{err:?}");
    assert!(err.to_string().contains(&file.display().to_string()), "{err}");

    let occupied = dir.path().join("occupied");
    std::fs::create_dir_all(occupied.join("x")).unwrap();
    let err = report::write_reports(&sample_report(false), None, Some(&occupied)).unwrap_err();
    assert!(matches!(err, report::ReportError::Write { .. }), "{err:?}");
    assert!(err.to_string().contains(&occupied.display().to_string()), "{err}");
}
