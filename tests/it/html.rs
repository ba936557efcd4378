//! The HTML report of a real run with failures: well-formed (parsed as XML), self-contained,
//! leading with exactly the run's failures and warnings grouped by requirement, with the
//! plugin's identity and capabilities, the outcome of every scenario by suite, every finding,
//! and the SVG latency chart with a row per RPC called; its filter buttons work in a headless
//! Chromium when one is installed. GitHub Actions annotations appear only under
//! GITHUB_ACTIONS=true.

use std::collections::BTreeSet;

use csi_conform::{
    reference::{Config, Quirk},
    report::html::escape,
};
use csi_conform::report::Severity;
use quick_xml::events::Event;

use crate::support::{TestPlugin, csi_conform, csi_conform_env};

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
    let config = Config { quirks: [Quirk::DropMountFlags, Quirk::MixedVersions].into(), ..Config::default() };
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
    assert!(!names.contains("link") && !names.contains("img"), "self-contained: {names:?}");
    assert_eq!(html.matches("<script").count(), 1, "one inline script");
    assert!(html.contains("<script>(function(){"), "the script is inline, with no src");
    // Nothing is loaded from the network; the only addresses are the SVG namespace and links
    // (followed only when clicked) into the spec.
    assert!(!html.contains(" src="), "nothing is loaded");
    assert_eq!(
        html.matches("http").count(),
        html.matches("http://www.w3.org/2000/svg").count()
            + html.matches("href=\"https://github.com/container-storage-interface/spec/blob/v1.12.0/spec.md#").count(),
        "no other network references"
    );

    assert!(html.contains(&escape(&report.plugin_name)) && html.contains(&escape(&report.plugin_version)));
    // Capabilities as a table: every advertised one ticked, the others not.
    let table = &html[html.find("<table id=\"capabilities\">").expect("a capabilities table")..];
    let table = &table[..table.find("</table>").unwrap()];
    for cap in &report.capabilities {
        let (scope, name) = cap.split_once(':').unwrap();
        let row = format!("<tr><td>{}</td><td><code>{}</code></td><td class=\"tick\">&#10003;</td></tr>", escape(scope), escape(name));
        assert!(table.contains(&row), "capability {cap} is not ticked");
    }
    assert_eq!(table.matches("class=\"tick\"").count(), report.capabilities.len(), "only advertised ones are ticked");
    assert!(table.contains("<td class=\"no\">"), "the reference plugin lacks some capability: {table}");

    // The verdict banner comes first, with the coverage figure; badges at zero are neutral.
    let banner = html.find("<div class=\"banner failed\" id=\"verdict\">FAILED<small>coverage: ").expect("a FAILED banner");
    assert!(banner < html.find("<h1>").unwrap(), "the banner leads the page");
    let counts = report.counts();
    assert!(html.contains(&format!("<span class=\"fail\">{} failed</span>", counts.fail)));
    assert!(html.contains(&format!("<span class=\"zero\">{} errors</span>", counts.error)) && counts.error == 0, "a zero badge is neutral");
    assert_eq!(html.matches("<h2>RPC latency</h2>").count(), 1, "one latency heading, over its chart");
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

    // The page opens with the root causes (if any) and the failures and warnings: the first
    // sections after the header, listing exactly the JSON report's failing and warning
    // findings, failures grouped by the first requirement their scenario names (groups in
    // order of first appearance), then warnings grouped by their level, never under a MUST.
    let section_at = html.find("<section id=\"problems\">").expect("a failures section");
    let first = html.find("<section id=\"causes\">").unwrap_or(section_at);
    assert_eq!(html.find("<h2>"), Some(first + html[first..].find("<h2>").unwrap()), "they are the first sections");
    assert!(html[first..section_at].matches("<h2>").count() <= 1);
    let section = &html[section_at..html[section_at..].find("</section>").unwrap() + section_at];
    // (a warning's level, or None for failures) -> its (scenario, message, severity) rows.
    type Group = (Option<String>, Vec<(String, String, String)>);
    let mut groups: Vec<Group> = Vec::new();
    for s in report.suites.iter().flat_map(|s| &s.scenarios) {
        for f in s.findings.iter().filter(|f| f.severity >= Severity::Warn) {
            let key = if f.severity == Severity::Warn {
                // Its own requirements' levels first (see Finding::blames), never its scenario's
                // strongest.
                let blamed = f.blames(s);
                let levels: Vec<&str> = blamed.iter().map(|r| r.level.as_str()).collect();
                let level = match () {
                    _ if levels.contains(&"MUST") => "tolerated deviation from MUST",
                    _ if levels.contains(&"SHOULD") => "SHOULD",
                    _ if levels.contains(&"MAY") => "MAY",
                    // A requirement the inventory does not know has no level to show.
                    _ => "tolerated deviation",
                };
                Some(format!("~warnings [{level}]"))
            } else {
                f.blames(s).first().map(|r| r.id.clone())
            };
            let item = (f.severity.to_string(), s.id.clone(), f.message.clone());
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, items)) => items.push(item),
                None => groups.push((key, vec![item])),
            }
        }
    }
    groups.sort_by_key(|(k, _)| match k {
        Some(k) if k.starts_with("~warnings") => 2,
        Some(_) => 0,
        None => 1,
    });
    for (k, _) in &groups {
        if let Some(level) = k.as_deref().and_then(|k| k.strip_prefix("~warnings ")) {
            assert!(section.contains(&format!("<h3>Warnings <small>{level}</small></h3>")), "a heading for {level}");
        }
    }
    let expected: Vec<(String, String, String)> = groups.into_iter().flat_map(|(_, items)| items).collect();
    let listed: Vec<&str> = section.split("<div class=\"finding ").skip(1).collect();
    assert_eq!(listed.len(), expected.len(), "one entry per failing or warning finding");
    for (entry, (severity, id, message)) in listed.iter().zip(&expected) {
        assert!(entry.starts_with(&format!("{severity}\" data-filter=")), "{entry}");
        assert!(entry.contains(&format!("data-scenario=\"{}\"", escape(id))), "{id} out of order: {entry}");
        assert!(entry.contains(&escape(message)), "{id}: {message}");
        assert!(entry.contains("rerun: <code>csi-conform run ... --focus"), "{id}");
    }
    for s in report.suites.iter().flat_map(|s| &s.scenarios).filter(|s| s.outcome >= Severity::Warn) {
        for r in &s.requirements {
            assert!(section.contains(&format!("<a href=\"{}\">{}</a>", escape(&r.link), escape(&r.id))), "{} names {}", s.id, r.id);
        }
    }
    let coverage = html.find("<h2>Requirement coverage of this run</h2>").expect("a coverage table");
    let latency = html.find("<h2>RPC latency</h2>").unwrap();
    let by_suite = html.find("<h2>All scenarios by suite</h2>").unwrap();
    assert!(section_at < coverage && coverage < latency && latency < by_suite, "failures, coverage, latency, then all scenarios");

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

/// A run of the `extras` suite against a plugin with two quirks: failures and warnings both.
async fn quirky_run(cwd: &std::path::Path, env: &[(&str, &str)], extra: &[&str]) -> (std::process::Output, TestPlugin) {
    let config = Config { quirks: [Quirk::DropMountFlags, Quirk::MixedVersions].into(), ..Config::default() };
    let plugin = TestPlugin::start(config).await;
    let socket = plugin.socket.display().to_string();
    let mut args = vec!["run", "--endpoint", &socket, "-q", "--focus", "^extras\\.", "--html", "page.html"];
    args.extend_from_slice(extra);
    let out = csi_conform_env(&args, cwd, env).await;
    (out, plugin)
}

#[tokio::test]
async fn annotations_appear_under_github_actions_only() {
    let cwd = tempfile::tempdir().unwrap();
    let (out, _plugin) = quirky_run(cwd.path(), &[("GITHUB_ACTIONS", "true")], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = std::fs::read_to_string(cwd.path().join("reports/report.json")).unwrap();
    let report = csi_conform::report::from_json(&json).unwrap();
    let errors: Vec<&str> = stdout.lines().filter(|l| l.starts_with("::error title=")).collect();
    let warnings: Vec<&str> = stdout.lines().filter(|l| l.starts_with("::warning title=")).collect();
    let count = |pred: &dyn Fn(Severity) -> bool| {
        report.suites.iter().flat_map(|s| &s.scenarios).flat_map(|s| &s.findings).filter(|f| pred(f.severity)).count()
    };
    assert!(count(&|s| s >= Severity::Fail) > 0 && count(&|s| s == Severity::Warn) > 0, "the quirks make both: {stdout}");
    assert_eq!(errors.len(), count(&|s| s >= Severity::Fail), "one ::error per failing finding:\n{stdout}");
    assert_eq!(warnings.len(), count(&|s| s == Severity::Warn), "one ::warning per warning:\n{stdout}");
    let failed = report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.outcome == Severity::Fail).unwrap();
    // Titled with what its own finding breaks (see Finding::blames).
    let finding = failed.findings.iter().find(|f| f.severity >= Severity::Fail).unwrap();
    let named = finding.blames(failed);
    let title = format!("::error title={} breaks {}::", failed.id, named.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(" "));
    let line = errors.iter().find(|l| l.starts_with(&title)).unwrap_or_else(|| panic!("no annotation titled {title}:\n{stdout}"));
    assert!(line.contains(&format!("%0Aspec: {}", named[0].link)), "{line}");
    assert!(!line.contains('\n'), "one line per finding");

    for (env, extra) in [(vec![], vec![]), (vec![("GITHUB_ACTIONS", "true")], vec!["--no-annotations"])] {
        let cwd = tempfile::tempdir().unwrap();
        let (out, _plugin) = quirky_run(cwd.path(), &env, &extra).await;
        assert_eq!(out.status.code(), Some(1));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("::error") && !stdout.contains("::warning"), "{env:?} {extra:?}: {stdout}");
    }
}

/// The installed headless Chromium, if any.
pub(crate) fn chromium() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|p| p.is_file())
}

/// Runs `browser` headless on `url` with `args` and a fresh profile of its own.
pub(crate) async fn headless(browser: &std::path::Path, args: &[&str], url: &str) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    tokio::process::Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .args(args)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .output()
        .await
        .expect("run chromium")
}

/// The installed Chromium and the HTML page of a quirky run (`page.html` in the directory), or
/// `None` after saying SKIPPED when no Chromium is installed.
async fn quirky_page(test: &str) -> Option<(std::path::PathBuf, tempfile::TempDir, TestPlugin)> {
    let Some(browser) = chromium() else {
        crate::support::skip(
            test,
            crate::support::Precondition::Chromium,
            "none on PATH (scripts/test installs Debian's chromium when run as root with CI=true)",
        );
        return None;
    };
    let cwd = tempfile::tempdir().unwrap();
    let (out, plugin) = quirky_run(cwd.path(), &[], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    Some((browser, cwd, plugin))
}

#[tokio::test]
async fn the_failures_filter_shows_only_failures_in_a_headless_chromium() {
    let Some((browser, cwd, _plugin)) = quirky_page("the_failures_filter_shows_only_failures_in_a_headless_chromium").await else { return };
    let page = cwd.path().join("page.html");
    let url = format!("file://{}#filter=failures", page.display());
    let dom = headless(&browser, &["--virtual-time-budget=2000", "--dump-dom"], &url).await;
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("data-filter=\"failures\""), "the DOM came back: {dom}");
    let entries: Vec<&str> = dom.split("<div class=\"finding ").skip(1).map(|e| &e[..e.find('>').unwrap()]).collect();
    let (fails, warns): (Vec<&str>, Vec<&str>) = entries.iter().partition(|e| e.contains("data-filter=\"failures\""));
    assert!(!fails.is_empty() && !warns.is_empty(), "the run has both: {entries:?}");
    for e in &fails {
        assert!(!e.contains("display: none"), "a failure is hidden: {e}");
    }
    for e in &warns {
        assert!(e.contains("display: none"), "a warning shows under the failures filter: {e}");
    }
    assert!(dom.contains("<body data-filter=\"failures\""), "the filter was clicked");
}

/// The page as a person sees it: Chromium renders it headless to a PNG (kept in the directory
/// `CSI_CONFORM_SCREENSHOT_DIR` names, to look at). The banner leads the rendered page too:
/// its text comes first in the DOM Chromium builds.
#[tokio::test]
async fn the_page_renders_in_a_headless_chromium_screenshot() {
    let Some((browser, cwd, _plugin)) = quirky_page("the_page_renders_in_a_headless_chromium_screenshot").await else { return };
    let page = cwd.path().join("page.html");
    let shot = cwd.path().join("page.png");
    let url = format!("file://{}", page.display());
    let screenshot = format!("--screenshot={}", shot.display());
    let run = headless(&browser, &["--hide-scrollbars", "--window-size=1280,1800", &screenshot], &url).await;
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}): {}", String::from_utf8_lossy(&run.stderr)));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000, "a real rendering: {} bytes", png.len());
    // The width and height in the IHDR chunk: the window asked for.
    let (w, h) = (u32::from_be_bytes(png[16..20].try_into().unwrap()), u32::from_be_bytes(png[20..24].try_into().unwrap()));
    assert_eq!((w, h), (1280, 1800));
    if let Some(dir) = std::env::var_os("CSI_CONFORM_SCREENSHOT_DIR") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&shot, std::path::Path::new(&dir).join("report.png")).unwrap();
    }
    let dom = headless(&browser, &["--dump-dom"], &url).await;
    let dom = String::from_utf8_lossy(&dom.stdout);
    let body = &dom[dom.find("<body").expect("a body")..];
    assert!(body[body.find('>').unwrap() + 1..].trim_start().starts_with("<div class=\"banner failed\" id=\"verdict\">FAILED"), "{body:.300}");
}

/// A requirement only an opt-in suite the run did not load checks is said so in the HTML
/// coverage section and the JSON report (neither a gap nor checked by the run); a report
/// without any has neither the paragraph nor the key.
#[test]
fn the_coverage_section_credits_the_opt_in_suites() {
    let mut run = crate::report::sample_report(false);
    let html = csi_conform::report::html::to_html(&run);
    assert!(!html.contains("id=\"opt-in-coverage\""));
    assert!(!csi_conform::report::to_json(&run).contains("opt_in_coverage"));
    run.opt_in_coverage.insert("General.concurrency.graceful".into(), vec!["stress".into()]);
    let html = csi_conform::report::html::to_html(&run);
    assert!(
        html.contains("<code>General.concurrency.graceful</code> is checked by the opt-in suite stress (<code>--suite stress</code>)"),
        "{html}"
    );
    let json: serde_json::Value = serde_json::from_str(&csi_conform::report::to_json(&run)).unwrap();
    assert_eq!(json["opt_in_coverage"], serde_json::json!({"General.concurrency.graceful": ["stress"]}));
}
