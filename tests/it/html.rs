//! The HTML report of a real run with failures: well-formed (parsed as XML), self-contained,
//! with the plugin's identity and capabilities, the outcome of every scenario by suite, every
//! finding, and the SVG latency chart with a row per RPC called.

use std::collections::BTreeSet;

use csi_conform::{
    reference::{Config, Quirk},
    report::html::escape,
};
use quick_xml::events::Event;

use crate::support::{TestPlugin, csi_conform};

/// Parses `html` as XML; returns the names of every element met. Panics on anything malformed
/// (bad nesting, mismatched end tags, unclosed elements, bad attributes).
fn parse_xml(html: &str) -> Vec<String> {
    let mut reader = quick_xml::Reader::from_str(html);
    let mut open: Vec<String> = Vec::new();
    let mut seen = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                for attr in e.attributes() {
                    attr.unwrap_or_else(|err| panic!("bad attribute at {}: {err}", reader.buffer_position()));
                }
                let name = e.name().into_inner().to_owned();
                seen.push(name.clone());
                open.push(name);
            }
            Ok(Event::Empty(e)) => seen.push(e.name().into_inner().to_owned()),
            Ok(Event::End(e)) => {
                let name = e.name().into_inner().to_owned();
                assert_eq!(open.pop().as_deref(), Some(name.as_str()), "end tag at {}", reader.buffer_position());
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", reader.buffer_position()),
        }
    }
    assert!(open.is_empty(), "unclosed elements: {open:?}");
    seen
}

#[tokio::test]
async fn the_html_report_is_well_formed_and_holds_every_finding_and_the_latency_chart() {
    let config = Config { quirks: [Quirk::DropMountFlags, Quirk::EmptySourceRejected].into(), ..Config::default() };
    let plugin = TestPlugin::start(config).await;
    let cwd = tempfile::tempdir().unwrap();
    let socket = plugin.socket.display().to_string();
    let out = csi_conform(&["run", "--endpoint", &socket, "-q", "--html", "out/page.html"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(1), "the quirks make findings: {}", String::from_utf8_lossy(&out.stdout));
    let html = std::fs::read_to_string(cwd.path().join("out/page.html")).unwrap();
    let json = std::fs::read_to_string(cwd.path().join("reports/report.json")).unwrap();
    let report = csi_conform::report::from_json(&json).unwrap();

    let elements = parse_xml(&html);
    let names: BTreeSet<&str> = elements.iter().map(String::as_str).collect();
    for needed in ["html", "head", "style", "body", "table", "details", "svg", "rect", "line", "text"] {
        assert!(names.contains(needed), "no <{needed}> in the page");
    }
    assert!(!names.contains("script") && !names.contains("link") && !names.contains("img"), "self-contained: {names:?}");
    assert_eq!(html.matches("http").count(), html.matches("http://www.w3.org/2000/svg").count(), "no network references");

    assert!(html.contains(&escape(&report.plugin_name)) && html.contains(&escape(&report.plugin_version)));
    for cap in &report.capabilities {
        assert!(html.contains(&format!("<code>{}</code>", escape(cap))), "capability {cap}");
    }
    let mut findings = 0;
    for suite in &report.suites {
        assert!(html.contains(&format!("id=\"suite-{}\"", escape(&suite.id))), "suite {}", suite.id);
        for s in &suite.scenarios {
            assert!(html.contains(&format!("<tr class=\"{}\" id=\"{}\">", s.outcome, escape(&s.id))), "scenario {}", s.id);
            for f in &s.findings {
                findings += 1;
                assert!(html.contains(&escape(&f.message)), "finding of {} missing: {}", s.id, f.message);
            }
        }
    }
    assert!(findings > 0 && report.counts().fail > 0, "{:?}", report.counts());
    assert!(html.contains("<details open=\"open\"><summary><span class=\"sev\">fail</span>"), "failures are open");

    let svg = &html[html.find("<svg").unwrap()..html.find("</svg>").unwrap()];
    for (rpc, latency) in &report.rpc_latency {
        assert!(svg.contains(&format!(">{rpc}</text>")), "no row for {rpc}");
        assert!(svg.contains(&format!("<title>{rpc}: {} calls,", latency.calls)), "{rpc}");
    }
    let medians: Vec<f64> = svg
        .split("<title>")
        .skip(1)
        .map(|t| t.split("median ").nth(1).unwrap().split("ms").next().unwrap().parse().unwrap())
        .collect();
    assert!(medians.windows(2).all(|w| w[0] >= w[1]), "slowest first: {medians:?}");
}
