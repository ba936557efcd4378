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
        rpcs: 0,
        exercised: Vec::new(),
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
        spec: None,
        sizes: None,
        orchestrators: Vec::new(),
        settled: None,
        opt_in_coverage: Default::default(),
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
    assert!(block.ends_with(&expected.to_string()), "{block}");
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

fn repo_file(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Runs the GitHub Action's entry script (`scripts/github-action COMMAND`) in `cwd` as the
/// runner would: GitHub's environment variables pointing into `cwd`, the action's inputs as
/// `INPUT_*`, and this build's csi-conform standing in for the downloaded one.
async fn action(command: &str, cwd: &std::path::Path, inputs: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg(repo_file("scripts/github-action")).arg(command).current_dir(cwd);
    for (var, _) in std::env::vars() {
        if var.starts_with("GITHUB_") || var.starts_with("INPUT_") || var.starts_with("RUNNER_") || var == "CI" {
            cmd.env_remove(var);
        }
    }
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", cwd.join("step-summary.md"))
        .env("GITHUB_OUTPUT", cwd.join("outputs.txt"))
        .env("GITHUB_PATH", cwd.join("path.txt"))
        .env("RUNNER_TEMP", cwd.join("runner-temp"))
        .env("CSI_CONFORM_BIN", crate::support::bin());
    cmd.envs(inputs.iter().copied());
    cmd.output().await.expect("run the action's entry script")
}

fn read(cwd: &std::path::Path, name: &str) -> String {
    std::fs::read_to_string(cwd.join(name)).unwrap_or_default()
}

#[tokio::test]
async fn the_action_runs_csi_conform_and_writes_the_job_summary_annotations_and_outputs() {
    let config = Config { quirks: [Quirk::DropMountFlags, Quirk::MixedVersions].into(), ..Config::default() };
    let plugin = TestPlugin::start(config).await;
    let socket = plugin.socket.display().to_string();
    let cwd = tempfile::tempdir().unwrap();
    let inputs = [
        ("INPUT_ENDPOINT", socket.as_str()),
        ("INPUT_FOCUS", "^extras\\.\n  ^identity\\.probe$\n"),
        ("INPUT_REPORTS_DIR", "out"),
        ("INPUT_ARGS", "--seed 5 -q"),
    ];
    let out = action("run", cwd.path(), &inputs).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "the step itself succeeds; the verdict step fails it: {stdout}");
    assert_eq!(read(cwd.path(), "outputs.txt"), "result=failed\nexit-code=1\nreports-dir=out\njunit=out/junit.xml\n");

    // Annotations, one per finding, on stdout where the runner reads workflow commands.
    assert!(stdout.lines().any(|l| l.starts_with("::error title=extras.")), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("::warning title=extras.")), "{stdout}");

    // The job summary: verdict, counts, failures with requirement and rerun command, warnings.
    let summary = read(cwd.path(), "step-summary.md");
    assert!(summary.starts_with("## csi-conform: ❌ FAILED\n"), "{summary}");
    assert!(summary.contains("| passed | failed | warned | skipped | errored |"), "{summary}");
    let report = report::from_json(&read(cwd.path(), "out/report.json")).unwrap();
    let ids: Vec<&str> = report.suites.iter().flat_map(|s| &s.scenarios).map(|s| s.id.as_str()).collect();
    assert!(ids.contains(&"identity.probe") && ids.iter().all(|i| i.starts_with("extras.") || *i == "identity.probe"), "both focus lines: {ids:?}");
    for s in report.suites.iter().flat_map(|s| &s.scenarios).filter(|s| s.outcome == Severity::Fail) {
        let entry = format!("- **FAIL** <code>{}</code>: ", s.id);
        let at = summary.find(&entry).unwrap_or_else(|| panic!("{} missing from the summary:\n{summary}", s.id));
        let rest = &summary[at..];
        let end = rest[1..].find("\n- ").map_or(rest.len(), |i| i + 1);
        let entry = &rest[..end];
        assert!(entry.contains("  - requirement: [") || s.requirements.is_empty(), "{entry}");
        assert!(entry.contains(&format!("--focus &#39;^{}$&#39; --seed 5", s.id.replace('.', "\\."))), "{entry}");
        assert!(!entry.contains("--junit"), "{entry}");
    }
    assert!(summary.contains("### Warnings ("), "{summary}");
    for file in ["junit.xml", "report.json", "report.html", "job-summary.md"] {
        assert!(cwd.path().join("out").join(file).is_file(), "out/{file}");
    }

    // A plugin that is not there: the run cannot start, and the summary and an annotation say why.
    let missing = cwd.path().join("absent.sock").display().to_string();
    let inputs = [("INPUT_ENDPOINT", missing.as_str()), ("INPUT_REPORTS_DIR", "out2"), ("INPUT_ARGS", "--connect-timeout 1s")];
    std::fs::remove_file(cwd.path().join("outputs.txt")).unwrap();
    let out = action("run", cwd.path(), &inputs).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(read(cwd.path(), "outputs.txt"), "result=error\nexit-code=2\nreports-dir=out2\njunit=out2/junit.xml\n");
    assert!(stdout.contains(&format!("::error title=csi-conform could not run::no socket at {missing}")), "{stdout}");
    let summary = read(cwd.path(), "step-summary.md");
    assert!(summary.contains("## csi-conform: ⚠️ could not run (exit code 2)"), "{summary}");
    assert!(summary.contains("--connect-timeout"), "{summary}");
}

#[tokio::test]
async fn the_action_puts_a_given_binary_on_path_and_its_inputs_match_the_script() {
    let cwd = tempfile::tempdir().unwrap();
    let out = action("fetch", cwd.path(), &[("INPUT_BINARY", crate::support::bin())]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = cwd.path().join("runner-temp/csi-conform-bin");
    assert_eq!(read(cwd.path(), "path.txt"), format!("{}\n", dir.display()));
    assert_eq!(read(cwd.path(), "outputs.txt"), format!("path={}\n", dir.join("csi-conform").display()));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("csi-conform: csi-conform "));
    let bad = action("fetch", cwd.path(), &[("INPUT_BINARY", "/nonexistent/csi-conform")]).await;
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stdout).starts_with("::error title=csi-conform action::binary: "));

    // Every input of action.yml reaches the script as INPUT_*, and the script reads no other.
    let action: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(repo_file("action.yml")).unwrap()).unwrap();
    assert_eq!(action["runs"]["using"].as_str(), Some("composite"));
    let inputs: Vec<String> = action["inputs"].as_mapping().unwrap().keys().map(|k| k.as_str().unwrap().to_owned()).collect();
    let passed: std::collections::BTreeSet<String> = action["runs"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|s| s["env"].as_mapping())
        .flat_map(|env| env.keys().map(|k| k.as_str().unwrap().to_owned()))
        .filter(|k| k.starts_with("INPUT_"))
        .collect();
    let script = std::fs::read_to_string(repo_file("scripts/github-action")).unwrap();
    let read_by_script: std::collections::BTreeSet<String> = regex::Regex::new(r"INPUT_[A-Z_]+")
        .unwrap()
        .find_iter(&script)
        .map(|m| m.as_str().to_owned())
        .collect();
    let unused = ["upload-reports", "artifact-name"];
    for input in inputs.iter().filter(|i| !unused.contains(&i.as_str())) {
        let var = format!("INPUT_{}", input.to_uppercase().replace('-', "_"));
        assert!(passed.contains(&var), "input {input} is not passed to the script as {var}");
        assert!(read_by_script.contains(&var), "the script ignores {var}");
    }
    for var in &read_by_script {
        assert!(passed.contains(var), "the script reads {var}, which action.yml does not set");
    }
}

/// A program on PATH, if there is one.
fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Runs the image in `archive` with `args` (after its entrypoint) and `mounts` (host
/// directory, container path): with podman when it can run a container here, else with
/// buildah's chroot isolation (which needs no OCI runtime: inside CI containers podman's crun
/// may not set rlimits). `Err` says why neither could.
async fn run_image(archive: &std::path::Path, args: &[&str], mounts: &[(String, String)]) -> Result<(&'static str, std::process::Output), String> {
    let image = format!("oci-archive:{}", archive.display());
    let volumes: Vec<String> = mounts.iter().flat_map(|(h, c)| ["-v".to_owned(), format!("{h}:{c}")]).collect();
    let mut why = Vec::new();
    if let Some(podman) = on_path("podman") {
        let out = tokio::process::Command::new(&podman)
            .args(["run", "--rm", "--network", "none"])
            .args(&volumes)
            .arg(&image)
            .args(args)
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // 125-127: podman or the OCI runtime failed, not the program in the container.
        if !matches!(out.status.code(), Some(125..=127)) {
            return Ok(("podman", out));
        }
        why.push(format!("podman: {}", stderr.lines().last().unwrap_or_default()));
    } else {
        why.push("no podman on PATH".to_owned());
    }
    let Some(buildah) = on_path("buildah") else {
        why.push("no buildah on PATH".to_owned());
        return Err(why.join("; "));
    };
    let buildah = |args: Vec<String>| {
        let buildah = buildah.clone();
        async move {
            tokio::process::Command::new(buildah)
                .args(["--storage-driver", "vfs"])
                .args(args)
                .env("BUILDAH_ISOLATION", "chroot")
                .output()
                .await
                .unwrap()
        }
    };
    let from = buildah(vec!["from".into(), "-q".into(), image.clone()]).await;
    let container = String::from_utf8_lossy(&from.stdout).trim().to_owned();
    if !from.status.success() || container.is_empty() {
        why.push(format!("buildah from: {}", String::from_utf8_lossy(&from.stderr).lines().last().unwrap_or_default()));
        return Err(why.join("; "));
    }
    let mut run = vec!["run".to_owned(), "--isolation".into(), "chroot".into()];
    run.extend(volumes);
    run.extend([container.clone(), "--".into(), "/csi-conform".into()]);
    run.extend(args.iter().map(|a| a.to_string()));
    let out = buildah(run).await;
    buildah(vec!["rm".into(), container]).await;
    Ok(("buildah (chroot isolation)", out))
}

/// The image `scripts/dist` builds runs csi-conform against the reference plugin's socket,
/// mounted into the container. It needs the release build of `scripts/dist` (minutes), so it
/// runs only when `dist/csi-conform-image.oci.tar` exists, and only where a container can run;
/// otherwise it says SKIPPED and why.
#[tokio::test]
async fn the_image_runs_against_the_reference_plugins_socket_mounted_in() {
    let archive = repo_file("dist/csi-conform-image.oci.tar");
    if !archive.is_file() {
        crate::support::skip(
            "the_image_runs_against_the_reference_plugins_socket_mounted_in",
            crate::support::Precondition::DistImage,
            "no dist/csi-conform-image.oci.tar; `scripts/dist` builds it (a release build, kept out of the default test run)",
        );
        return;
    }
    let version = match run_image(&archive, &["--version"], &[]).await {
        Ok((_, out)) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        Ok((runtime, out)) => panic!("{runtime}: the image's csi-conform --version failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(why) => {
            crate::support::skip("the_image_runs_against_the_reference_plugins_socket_mounted_in", crate::support::Precondition::ContainerRuntime, &why);
            return;
        }
    };
    assert_eq!(version, format!("csi-conform {}", env!("CARGO_PKG_VERSION")));

    let plugin = TestPlugin::start(Config::default()).await;
    let socket_dir = plugin.socket.parent().unwrap().display().to_string();
    let reports = tempfile::tempdir().unwrap();
    let socket = plugin.socket.display().to_string();
    let args = [
        "--endpoint", &socket, "-q", "--focus", r"^(identity|controller)\.", "--mount-check", "off",
        "--junit", "/reports/junit.xml", "--json", "/reports/report.json", "--html", "/reports/report.html",
    ];
    let mounts = [(socket_dir.clone(), socket_dir), (reports.path().display().to_string(), "/reports".to_owned())];
    let (runtime, out) = run_image(&archive, &args, &mounts).await.expect("it ran --version");
    println!("the image ran under {runtime}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{runtime}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.ends_with("Result: PASSED\nReports: /reports/junit.xml (JUnit), /reports/report.json (JSON), /reports/report.html (HTML)\n"), "{stdout}");
    let run = report::from_json(&std::fs::read_to_string(reports.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(run.plugin_name, "reference.csi-conform.dev");
    assert!(run.counts().pass > 10, "{:?}", run.counts());
}

/// The Action downloads `releases/download/<ref>/NAME` for each asset name in
/// `scripts/github-action`; the release workflow must attach every one of them, or a vendor
/// pinning a tag gets a 404. Renaming an asset on one side only fails here.
#[test]
fn the_release_workflow_attaches_every_asset_the_action_downloads() {
    let action = std::fs::read_to_string(repo_file("scripts/github-action")).unwrap();
    let release = std::fs::read_to_string(repo_file(".github/workflows/release.yml")).unwrap();
    let assets = |text: &str| -> std::collections::BTreeSet<String> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
            .filter(|w| w.starts_with("csi-conform-x86_64-linux"))
            .map(|w| w.trim_end_matches('.').to_owned())
            .collect()
    };
    let wanted = assets(&action);
    assert!(wanted.contains("csi-conform-x86_64-linux"), "the action downloads no binary? {wanted:?}");
    let attached: std::collections::BTreeSet<String> = release
        .lines()
        .filter_map(|l| l.trim().strip_prefix("dist/"))
        .map(|l| l.trim_end_matches('\\').trim().to_owned())
        .collect();
    for name in &wanted {
        assert!(attached.contains(name), "the action downloads {name}, the release workflow attaches only {attached:?}");
    }
}
