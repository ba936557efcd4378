//! What a plugin vendor's CI sees (issue 21): warnings shown as warnings (their own level, one
//! line each, never under a bare MUST; `--junit-warnings` for CI test views), root causes that
//! lead the console, the HTML page and the job summary, and the GitHub job summary itself
//! (a golden file).

use std::time::Duration;

use csi_conform::{
    reference::{Config, Quirk},
    report::{self, Finding, RequirementRef, RunReport, ScenarioResult, Severity, SuiteResult},
};

use crate::{
    report::{case, parse_junit},
    support::{TestPlugin, csi_conform_env},
};

/// The scenarios the unconfirmed quirk warns on, and one it does not touch.
const FOCUS: &str = r"^(controller\.validate|lifecycle\.mount\.read-write|identity\.probe)$";

#[tokio::test]
async fn warnings_have_their_own_level_one_line_each_and_stand_out_in_junit_on_request() {
    let plugin = TestPlugin::start(Config { quirks: [Quirk::Unconfirmed].into(), ..Config::default() }).await;
    let socket = plugin.socket.display().to_string();
    let cwd = tempfile::tempdir().unwrap();
    let run = |extra: &'static [&'static str]| {
        let socket = socket.clone();
        let cwd = cwd.path().to_owned();
        async move {
            let mut args = vec!["run", "--endpoint", socket.as_str(), "-q", "--focus", FOCUS, "--seed", "3"];
            args.extend_from_slice(extra);
            csi_conform_env(&args, &cwd, &[]).await
        }
    };

    let out = run(&[]).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "warnings do not fail the run: {stdout}");
    let json = std::fs::read_to_string(cwd.path().join("reports/report.json")).unwrap();
    let run_report = report::from_json(&json).unwrap();
    let warnings: Vec<(&ScenarioResult, &Finding)> = run_report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .flat_map(|s| s.findings.iter().filter(|f| f.severity == Severity::Warn).map(move |f| (s, f)))
        .collect();
    assert!(warnings.len() >= 2, "the quirk warns: {stdout}");

    // One line per warning, with its level; nothing else in the section, no rerun lines.
    let section = stdout.split("\nWarnings:\n").nth(1).expect("a Warnings section");
    let section: Vec<&str> = section.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(section.len(), warnings.len(), "{stdout}");
    for ((s, f), line) in warnings.iter().zip(&section) {
        assert_eq!(*line, format!("  WARN  {} [tolerated deviation from MUST]: {}", s.id, f.message), "{stdout}");
    }
    assert!(!stdout.contains("By requirement"), "a warning is listed under no MUST heading: {stdout}");
    assert!(!stdout.contains("[MUST]"), "{stdout}");

    // JUnit: passed, with the warning and its level in <system-out> (what GitLab and Jenkins show).
    let junit = parse_junit(&std::fs::read_to_string(cwd.path().join("reports/junit.xml")).unwrap());
    let (warned, _) = warnings[0];
    let tc = case(&junit, &warned.id);
    assert!(tc.status.is_success(), "{tc:?}");
    let out_text = tc.system_out.as_deref().unwrap_or_default();
    assert!(out_text.contains("WARN unconfirmed") && out_text.contains("[tolerated deviation from MUST]"), "{out_text}");

    // --junit-warnings failure: a <failure type="warning">, and the exit code unchanged.
    let out = run(&["--junit-warnings", "failure", "--junit", "failure.xml"]).await;
    assert_eq!(out.status.code(), Some(0));
    let junit = parse_junit(&std::fs::read_to_string(cwd.path().join("failure.xml")).unwrap());
    let tc = case(&junit, &warned.id);
    assert!(tc.status.is_failure(), "{tc:?}");
    let failure = tc.status.failure_as_ref();
    assert_eq!(failure.failure_type, "warning");
    assert!(failure.message.starts_with("warning [tolerated deviation from MUST]: "), "{}", failure.message);
    assert!(case(&junit, "identity.probe").status.is_success(), "a clean pass stays a pass");

    // --junit-warnings skipped: skipped, the warning as the skip message.
    let out = run(&["--junit-warnings", "skipped", "--junit", "skipped.xml"]).await;
    assert_eq!(out.status.code(), Some(0));
    let junit = parse_junit(&std::fs::read_to_string(cwd.path().join("skipped.xml")).unwrap());
    let tc = case(&junit, &warned.id);
    assert!(tc.status.is_skipped(), "{tc:?}");
    assert!(tc.status.skipped_as_ref().message.starts_with("warning [tolerated deviation from MUST]: "));
}

fn requirement(id: &str, level: &str) -> RequirementRef {
    RequirementRef {
        id: id.into(),
        level: level.into(),
        summary: format!("{id} in one line"),
        link: format!("https://github.com/container-storage-interface/spec/blob/v1.12.0/spec.md#{}", id.split('.').next().unwrap().to_lowercase()),
    }
}

fn scenario(id: &str, requirements: Vec<RequirementRef>, findings: Vec<Finding>) -> ScenarioResult {
    let mut s = ScenarioResult {
        id: id.into(),
        title: format!("the {id} scenario"),
        requirements,
        tags: vec![],
        parity: vec![],
        outcome: Severity::Pass,
        skip_reason: None,
        findings,
        duration: Duration::from_millis(12),
        expectation: None,
    };
    s.settle();
    s
}

/// NodeStageVolume answering UNKNOWN, with a message naming the volume.
fn stage_unknown(volume: &str) -> Finding {
    Finding {
        step: Some(2),
        rpc: Some("NodeStageVolume".into()),
        expected: Some("OK".into()),
        got: Some("UNKNOWN".into()),
        plugin_message: Some(format!("cannot attach {volume}: KeyError: 'target_portal'")),
        ..Finding::new(Severity::Fail, "unexpected-code", "NodeStageVolume answered UNKNOWN, expected OK")
    }
}

/// A run against an ember-csi-like plugin: three scenarios fail on one cause, one on another,
/// one warns (a SHOULD), one passes, one is skipped.
pub(crate) fn one_cause_report() -> RunReport {
    let stage = requirement("NodeStageVolume.stages", "MUST");
    let mut skipped = scenario("snapshot.create", vec![requirement("CreateSnapshot.creates", "MUST")], vec![]);
    skipped.outcome = Severity::Skip;
    skipped.skip_reason = Some("requires controller:CREATE_DELETE_SNAPSHOT, which the plugin does not advertise".into());
    let scenarios = vec![
        scenario("lifecycle.mount.read-write", vec![stage.clone()], vec![stage_unknown("vol-0a1b2c")]),
        scenario("lifecycle.block.read-write", vec![stage.clone()], vec![stage_unknown("vol-77ee99")]),
        scenario(
            "controller.create-volume.no-name",
            vec![requirement("CreateVolume.errors.no-name", "MUST")],
            vec![Finding {
                rpc: Some("CreateVolume".into()),
                expected: Some("INVALID_ARGUMENT".into()),
                got: Some("OK".into()),
                ..Finding::new(Severity::Fail, "unexpected-code", "CreateVolume answered OK, expected INVALID_ARGUMENT")
            }],
        ),
        scenario("data.republish", vec![stage], vec![stage_unknown("vol-123456")]),
        scenario(
            "lifecycle.single-node-single-writer.second-target-refused",
            vec![requirement("NodePublishVolume.second-target.single-node", "SHOULD")],
            vec![Finding::new(Severity::Warn, "second-target", "a second target path on the node was published | not refused")],
        ),
        scenario("identity.probe", vec![requirement("Probe.answers", "MUST")], vec![]),
        skipped,
    ];
    RunReport {
        tool_version: "0.1.0".into(),
        plugin_name: "ember-csi.io".into(),
        plugin_version: "0.9.1".into(),
        endpoints: vec!["unix:///run/ember/csi.sock".into()],
        capabilities: vec!["plugin:CONTROLLER_SERVICE".into(), "node:STAGE_UNSTAGE_VOLUME".into()],
        seed: 7,
        strict: false,
        started_at: "2026-11-25T02:00:00Z".into(),
        duration: Duration::from_millis(4_250),
        suites: vec![SuiteResult { id: "all".into(), title: "All".into(), source: "builtin:all.yaml".into(), scenarios }],
        rpc_latency: Default::default(),
        interrupted: None,
        mounts: Vec::new(),
    }
}

const STAGED: [&str; 3] = ["lifecycle.mount.read-write", "lifecycle.block.read-write", "data.republish"];

#[test]
fn root_causes_lead_the_console_summary_and_the_html_page() {
    let report = one_cause_report();
    let summary = report::summary_with_command(&report, false, "csi-conform run --endpoint /run/ember/csi.sock");
    let causes = summary.find("Root causes (one failing answer behind several scenarios):\n").expect(&summary);
    let failures = summary.find("\nFailures:\n").expect(&summary);
    assert!(causes < failures, "causes first:\n{summary}");
    let block = &summary[causes..failures];
    let mut expected = String::from(
        "  NodeStageVolume answered UNKNOWN: 3 scenarios\n    plugin message: cannot attach vol-0a1b2c: KeyError: 'target_portal'\n",
    );
    for id in STAGED {
        expected += &format!("    FAIL  {id}\n");
    }
    assert!(block.ends_with(&format!("{expected}")), "{block}");
    assert!(!block.contains("CreateVolume"), "one failure alone is no shared cause:\n{block}");
    // Every scenario is still listed, with its rerun command.
    for id in STAGED.iter().chain(&["controller.create-volume.no-name"]) {
        assert!(summary[failures..].contains(&format!("  FAIL  {id}: ")), "{id}:\n{summary}");
    }
    // The SHOULD warning says so, on one line, and sits under no requirement heading.
    assert!(summary.contains("\nWarnings:\n  WARN  lifecycle.single-node-single-writer.second-target-refused [SHOULD]: a second target path"), "{summary}");
    let by_requirement = &summary[summary.find("By requirement").expect(&summary)..];
    assert!(!by_requirement.contains("second-target"), "{by_requirement}");

    let html = report::html::to_html(&report);
    let causes = html.find("<section id=\"causes\"><h2>Root causes</h2>").expect("a causes section");
    assert!(causes < html.find("<section id=\"problems\">").unwrap());
    let section = &html[causes..html[causes..].find("</section>").unwrap() + causes];
    assert!(section.contains("<b>NodeStageVolume answered UNKNOWN: 3 scenarios</b>"), "{section}");
    for id in STAGED {
        assert!(section.contains(&format!("<li><a href=\"#{id}\"><code>{id}</code></a>")), "{id}: {section}");
    }
    assert_eq!(section.matches("<li>").count(), 3);
    assert!(html.contains("<h3>Warnings <small>[SHOULD]</small></h3>"), "warnings grouped by their level");
    // No RPC was recorded: no latency heading without a chart.
    assert!(!html.contains("RPC latency"));
    assert!(html.contains("<div class=\"banner failed\" id=\"verdict\">FAILED<small>coverage: 4 of 5 requirements checked (80%); 6 of 7 scenarios ran (86%), 1 skipped</small></div>"));
}

#[test]
fn the_job_summary_matches_golden() {
    let report = one_cause_report();
    let files = [("JUnit", std::path::Path::new("reports/junit.xml")), ("HTML", std::path::Path::new("reports/report.html"))];
    let markdown = report::markdown::job_summary(&report, Some("csi-conform run --endpoint /run/ember/csi.sock"), &files);
    crate::report::golden("job-summary.md", &markdown);
    assert!(markdown.starts_with("## csi-conform: ❌ FAILED\n"));
    // A plugin's text cannot open a table column or a link.
    assert!(markdown.contains("published \\| not refused"), "{markdown}");
}

/// `reference-plugin` says, on one line, when it listens and how to stop it.
#[tokio::test]
async fn the_reference_plugin_says_when_it_listens() {
    use tokio::io::AsyncBufReadExt as _;
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("unix://{}", dir.path().join("ref.sock").display());
    let mut child = tokio::process::Command::new(crate::support::bin())
        .args(["reference-plugin", "--endpoint", &endpoint, "--node-only"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await.expect("a line in time").unwrap();
    assert_eq!(
        line.as_deref(),
        Some(format!("csi-conform reference plugin listening on {endpoint} (node only, node id csi-conform-node-1, 0 quirk(s)); SIGINT or SIGTERM stops it").as_str())
    );
    assert!(dir.path().join("ref.sock").exists(), "it says so once the socket is there");
    child.kill().await.unwrap();
}
