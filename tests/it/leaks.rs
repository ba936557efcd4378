//! No secret anywhere: a run at the highest verbosity, with a secrets file the plugin checks
//! and mount flags carrying data, with failures that quote requests and answers, leaves no
//! secret value and no mount flag in stdout, stderr, any report, the journal, or the plugin's
//! own log.

use std::{os::unix::fs::PermissionsExt, path::Path};

use csi_conform::{mounts, report::Severity};

use crate::support::process::{ReferenceProcess, bin};

/// Every value below is distinctive, so that a hit can only be a leak.
const SECRETS: &str = "\
CreateVolumeSecret: { password: Qv9create-3c1f }
DeleteVolumeSecret: { password: Qv9delete-5e2a }
ControllerPublishVolumeSecret: { token: Qv9cpub-7d4b }
ControllerUnpublishVolumeSecret: { token: Qv9cunpub-9a6c }
ControllerValidateVolumeCapabilitiesSecret: { token: Qv9validate-1b8d }
NodeStageVolumeSecret: { token: Qv9stage-2c9e }
NodePublishVolumeSecret: { token: Qv9npub-4d0f }
";

/// A mount flag carrying data: the whole flag and its value are sensitive.
const FLAG_VALUE: &str = "Qv9flag-6e1a";

const LEAKY: &str = r#"
suite: leaky
title: Sensitive values in requests, answers and failures
scenarios:
  - id: flags-quoted
    title: an assertion failure quotes an answer that holds the mount flags
    steps:
      - call: CreateVolume
        request:
          name: "${name}"
          volume_capabilities: [{ mount: { mount_flags: ["password=Qv9flag-6e1a"] }, access_mode: { mode: SINGLE_NODE_WRITER } }]
        save: { vol: volume.volume_id }
      - call: ValidateVolumeCapabilities
        request:
          volume_id: "${vol}"
          volume_capabilities: [{ mount: { mount_flags: ["password=Qv9flag-6e1a"] }, access_mode: { mode: SINGLE_NODE_WRITER } }]
        expect:
          otherwise: warn
          fields:
            - { path: "confirmed.volume_capabilities[0].mount.mount_flags", contains: "something else" }
            - { path: "confirmed.volume_capabilities[0].mount.mount_flags[0]", equals: "nothing like it" }
  - id: request-shown
    title: an unmet expectation shows the request, redacted
    steps:
      - call: CreateVolume
        request:
          name: "${name}"
          volume_capabilities: [{ mount: { mount_flags: ["password=Qv9flag-6e1a"] }, access_mode: { mode: SINGLE_NODE_WRITER } }]
        expect: { code: ALREADY_EXISTS }
"#;

/// Every file under `dir`, recursively.
pub(crate) fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn sensitive() -> Vec<String> {
    let mut values: Vec<String> = SECRETS
        .lines()
        .filter_map(|l| l.split(": ").last())
        .map(|v| v.trim_end_matches(" }").to_owned())
        .collect();
    values.push(FLAG_VALUE.to_owned());
    assert_eq!(values.len(), 8, "{values:?}");
    values
}

/// Names each (output, value) pair where a sensitive value shows.
fn leaks(outputs: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (what, text) in outputs {
        for value in sensitive() {
            if text.contains(&value) {
                found.push(format!("{value} in {what}"));
            }
        }
    }
    found
}

async fn run_and_collect(plugin: &ReferenceProcess, cwd: &Path, verbosity: &[&str], rust_log: Option<&str>) -> Vec<(String, String)> {
    let endpoint = plugin.endpoint();
    let mut command = tokio::process::Command::new(bin());
    command.current_dir(cwd).args([
        "run",
        "--endpoint",
        &endpoint,
        "--secrets",
        "secrets.yaml",
        "--suite",
        "leaky.yaml",
        "--focus",
        r"^(leaky\.|node\.lifecycle$|controller\.publish\.lifecycle$|controller\.create-volume\.one-gib$)",
        "--work-dir",
        "work",
    ]);
    command.args(verbosity);
    match rust_log {
        Some(filter) => command.env("RUST_LOG", filter),
        None => command.env_remove("RUST_LOG"),
    };
    let out = command.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "the leaky suite fails on purpose:\n{stdout}");
    assert!(stderr.len() > 10_000, "the run really logged at trace level ({} bytes)", stderr.len());

    // The checks ran, and what they checked reached the plugin (it refuses wrong secrets).
    let report: csi_conform::report::RunReport =
        csi_conform::report::from_json(&std::fs::read_to_string(cwd.join("reports/report.json")).unwrap()).unwrap();
    let outcome = |id: &str| report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id).unwrap().clone();
    let quoted = outcome("leaky.flags-quoted");
    assert_eq!(quoted.outcome, Severity::Warn, "{:#?}", quoted.findings);
    assert!(quoted.findings.iter().all(|f| f.message.contains("<redacted>")), "{:#?}", quoted.findings);
    let shown = outcome("leaky.request-shown");
    assert!(shown.findings[0].request.as_deref().unwrap().contains(r#""mount_flags":["<redacted>"]"#), "{:?}", shown.findings);
    let mut builtin = vec!["controller.create-volume.one-gib", "controller.publish.lifecycle"];
    if crate::support::can_mount("no_secret_or_mount_flag_reaches_any_output_even_at_trace_level (node.lifecycle)", "the reference plugin mounts") {
        builtin.push("node.lifecycle");
    }
    for id in builtin {
        assert_eq!(outcome(id).outcome, Severity::Pass, "{id}: {:#?}", outcome(id).findings);
    }

    let mut outputs = vec![("stdout".to_owned(), stdout), ("stderr".to_owned(), stderr)];
    for file in files_under(&cwd.join("reports")) {
        outputs.push((file.display().to_string(), String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned()));
    }
    assert!(outputs.iter().any(|(f, _)| f.ends_with("journal.jsonl")));
    assert!(!outputs.iter().any(|(f, _)| f.ends_with("journal.jsonl.lock")), "the run's last user removes the lock file");
    assert_eq!(outputs.len(), 6, "stdout, stderr, JUnit, JSON, HTML and the journal");
    outputs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_or_mount_flag_reaches_any_output_even_at_trace_level() {
    let cwd = tempfile::tempdir().unwrap();
    let cwd = cwd.path();
    let secrets_file = cwd.join("secrets.yaml");
    std::fs::write(&secrets_file, SECRETS).unwrap();
    std::fs::set_permissions(&secrets_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(cwd.join("leaky.yaml"), LEAKY).unwrap();
    // The plugin checks every secret it is sent, and logs at trace level too.
    let require = ["--require-secrets", secrets_file.to_str().unwrap()];
    let plugin = ReferenceProcess::start_with_env(&require, &[("RUST_LOG", "trace")]).await;

    let mut outputs = run_and_collect(&plugin, cwd, &["-vvv"], Some("trace")).await;
    std::fs::remove_dir_all(cwd.join("reports")).unwrap();
    outputs.extend(run_and_collect(&plugin, cwd, &["-vvv"], None).await);
    assert!(mounts::mounts_under(cwd).is_empty());
    outputs.push(("the plugin's log".to_owned(), plugin.stop().await));
    assert_eq!(leaks(&outputs), Vec::<String>::new());
}
