//! What the strictest common JUnit reader accepts: the structure Jenkins' xUnit plugin's
//! `junit-10.xsd` declares, checked element by element (the rules are restated here in our own
//! terms; no schema file is shipped). Every JUnit report a test reads passes through [`check`].
//!
//! - `<testsuites>`: attributes `name`, `time`, `tests`, `failures`, `errors` only; children
//!   `<testsuite>` only.
//! - `<testsuite>`: `name`, `tests`, `failures`, `errors` required; also `group`, `time`,
//!   `skipped`, `timestamp`, `hostname`, `id`, `package`, `file`, `log`, `url`; children
//!   `<testsuite>`, `<properties>`, `<testcase>`, `<system-out>`, `<system-err>`.
//! - `<properties>`: `<property name=".." value=".."/>` children only, both attributes required.
//! - `<testcase>`: `name` required; also `time`, `classname`, `group`; children `<skipped>`,
//!   `<error>`, `<failure>`, the rerun and flaky elements, `<system-out>`, `<system-err>`: no
//!   `<properties>`.
//! - `<skipped>`, `<error>`, `<failure>`: `type` and `message` only, text only.
//! - `<system-out>`, `<system-err>`: text only.
//! - Every `time` is a plain decimal (digits, optional thousands commas, optional fraction).

use quick_xml::events::{BytesStart, Event};

struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<Element>,
}

fn element(e: &BytesStart<'_>) -> Result<Element, String> {
    let mut attrs = Vec::new();
    for a in e.attributes() {
        let a = a.map_err(|e| format!("malformed attribute: {e}"))?;
        let value = a.normalized_value(quick_xml::XmlVersion::Explicit1_0).map_err(|e| format!("malformed attribute value: {e}"))?;
        attrs.push((a.key.as_ref().to_owned(), value.into_owned()));
    }
    Ok(Element { name: e.name().as_ref().to_owned(), attrs, children: Vec::new() })
}

fn tree(xml: &str) -> Result<Element, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack = vec![Element { name: String::new(), attrs: Vec::new(), children: Vec::new() }];
    loop {
        match reader.read_event().map_err(|e| format!("not well-formed XML: {e}"))? {
            Event::Start(e) => stack.push(element(&e)?),
            Event::Empty(e) => {
                let child = element(&e)?;
                stack.last_mut().expect("a parent").children.push(child);
            }
            Event::End(_) => {
                let done = stack.pop().expect("an open element");
                stack.last_mut().ok_or("unbalanced end tag")?.children.push(done);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    let mut document = stack.pop().ok_or("no document")?;
    if !stack.is_empty() || document.children.len() != 1 {
        return Err("not exactly one root element".into());
    }
    Ok(document.children.pop().expect("one root"))
}

/// `time`: what the schema's SUREFIRE_TIME pattern admits.
fn plain_time(t: &str) -> bool {
    let (whole, fraction) = t.split_once('.').unwrap_or((t, ""));
    fraction.chars().all(|c| c.is_ascii_digit()) && whole.chars().all(|c| c.is_ascii_digit() || c == ',')
}

fn check_element(e: &Element, path: &str) -> Result<(), String> {
    let here = format!("{path}/{}", e.name);
    let (allowed, required, children): (&[&str], &[&str], &[&str]) = match e.name.as_str() {
        "testsuites" => (&["name", "time", "tests", "failures", "errors"], &[], &["testsuite"]),
        "testsuite" => (
            &[
                "name", "tests", "failures", "errors", "group", "time", "skipped", "timestamp", "hostname", "id",
                "package", "file", "log", "url",
            ],
            &["name", "tests", "failures", "errors"],
            &["testsuite", "properties", "testcase", "system-out", "system-err"],
        ),
        "properties" => (&[], &[], &["property"]),
        "property" => (&["name", "value"], &["name", "value"], &[]),
        "testcase" => (
            &["name", "time", "classname", "group"],
            &["name"],
            &[
                "skipped", "error", "failure", "rerunFailure", "rerunError", "flakyFailure", "flakyError", "system-out",
                "system-err",
            ],
        ),
        "skipped" | "error" | "failure" => (&["type", "message"], &[], &[]),
        "system-out" | "system-err" => (&[], &[], &[]),
        other => return Err(format!("{here}: <{other}> is not an element of the schema")),
    };
    for (name, value) in &e.attrs {
        if !allowed.contains(&name.as_str()) {
            return Err(format!("{here}: attribute {name:?} is not allowed there"));
        }
        if name == "time" && !plain_time(value) {
            return Err(format!("{here}: time {value:?} is not a plain decimal"));
        }
    }
    for name in required {
        if !e.attrs.iter().any(|(n, _)| n == name) {
            return Err(format!("{here}: required attribute {name:?} is missing"));
        }
    }
    for child in &e.children {
        if !children.contains(&child.name.as_str()) {
            return Err(format!("{here}: <{}> may not stand inside <{}>", child.name, e.name));
        }
        check_element(child, &here)?;
    }
    Ok(())
}

/// Whether `xml` is a JUnit report the strict schema accepts; the error names the first
/// element that breaks it and how.
pub fn check(xml: &str) -> Result<(), String> {
    let root = tree(xml)?;
    if root.name != "testsuites" && root.name != "testsuite" {
        return Err(format!("the root element is <{}>", root.name));
    }
    check_element(&root, "")
}

#[test]
fn the_checker_refuses_what_the_schema_refuses() {
    let ok = r#"<testsuites name="a" tests="1" failures="0" errors="0" time="1,234.5"><testsuite name="s" tests="1" failures="0" errors="0" skipped="0"><properties><property name="p" value="v"/></properties><testcase name="c" classname="s" time="0.001"><skipped message="m">m</skipped><system-out>x</system-out></testcase></testsuite></testsuites>"#;
    assert_eq!(check(ok), Ok(()));
    let refused = [
        ok.replace(r#"<testsuites name="a""#, r#"<testsuites name="a" skipped="0""#),
        ok.replace(r#"time="1,234.5""#, r#"time="1e3""#),
        ok.replace(r#"<testsuite name="s" tests="1""#, r#"<testsuite tests="1""#),
        ok.replace("<system-out>x</system-out>", r#"<properties><property name="p" value="v"/></properties>"#),
        ok.replace(r#"<skipped message="m">"#, r#"<skipped message="m" reason="r">"#),
        ok.replace(r#"<property name="p" value="v"/>"#, r#"<property name="p"/>"#),
    ];
    for xml in refused {
        assert!(check(&xml).is_err(), "accepted: {xml}");
    }
}
