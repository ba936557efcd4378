//! The console as CI sees it (no terminal): plain lines with no control characters, `-q` for
//! the summary alone, `-v` and `RUST_LOG` for logs, and a summary whose rerun command, pasted
//! into a shell, reruns exactly the failed scenario.

use csi_conform::reference::Config;

use crate::support::{TestPlugin, csi_conform_env};

/// A suite with one passing and one failing scenario.
use crate::run::FAILING_SUITE as SUITE;

fn assert_plain(what: &str, bytes: &[u8]) {
    let text = String::from_utf8(bytes.to_vec()).unwrap_or_else(|e| panic!("{what} is not UTF-8: {e}"));
    let bad: Vec<(usize, char)> = text.char_indices().filter(|(_, c)| c.is_control() && *c != '\n').collect();
    assert!(bad.is_empty(), "{what} holds control characters at {bad:?}:\n{text}");
}

#[tokio::test]
async fn output_without_a_terminal_is_plain_and_the_rerun_command_reruns_the_failure() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("mine.yaml"), SUITE).unwrap();
    let socket = plugin.socket.display().to_string();
    let args = ["run", "--endpoint", &socket, "--no-builtin", "--suite", "mine.yaml", "-v", "--junit", "out/j.xml", "-j", "3", "--html", "out/r.html"];
    // Not a terminal, and no CI variable either: plain lines all the same.
    let out = csi_conform_env(&args, cwd.path(), &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_plain("stdout", &out.stdout);
    assert_plain("stderr", &out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("PASS  mine.probe-ok ("), "{stdout}");
    assert!(stdout.contains("FAIL  mine.wrong-expectation ("), "{stdout}");
    assert!(stderr.contains("INFO") && stderr.contains("scenario done"), "-v logs at info: {stderr}");
    assert!(!stderr.contains("DEBUG"), "{stderr}");

    let summary = stdout.split("\nFailures:\n").nth(1).expect("a Failures section");
    assert!(summary.starts_with("  FAIL  mine.wrong-expectation: GetPluginInfo answered OK, expected NOT_FOUND"), "{summary}");
    let rerun = summary.lines().find_map(|l| l.trim().strip_prefix("rerun: ")).expect("a rerun command");
    assert!(!rerun.contains("..."), "{rerun}");
    assert!(rerun.contains(&format!("run --endpoint {socket} --suite mine.yaml --no-builtin")), "{rerun}");
    assert!(rerun.ends_with(&format!(r"--focus '^mine\.wrong-expectation$' --seed {}", seed_of(&stdout))), "{rerun}");
    // Only what decides the scenario's verdict: no report paths, no --jobs.
    assert!(!rerun.contains("--junit") && !rerun.contains("--html") && !rerun.contains("-j"), "{rerun}");
    // The last line names the report files, where the run put them.
    assert!(stdout.ends_with("Result: FAILED\nReports: out/j.xml (JUnit), reports/report.json (JSON), out/r.html (HTML)\n"), "{stdout}");

    // Pasted into a shell, it runs that one scenario again, with the same seed.
    let again = tokio::process::Command::new("sh").arg("-c").arg(rerun).current_dir(cwd.path()).env_remove("CI").output().await.unwrap();
    assert_eq!(again.status.code(), Some(1));
    let report = csi_conform::report::from_json(&std::fs::read_to_string(cwd.path().join("reports/report.json")).unwrap()).unwrap();
    let ids: Vec<&str> = report.suites.iter().flat_map(|s| &s.scenarios).map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["mine.wrong-expectation"]);
    assert_eq!(report.seed, seed_of(&stdout));
}

fn seed_of(stdout: &str) -> u64 {
    let line = stdout.lines().find(|l| l.starts_with("Seed: ")).expect("a Seed line");
    line["Seed: ".len()..].split(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn quiet_prints_the_summary_only_and_rust_log_is_honoured() {
    let plugin = TestPlugin::start(Config::default()).await;
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("mine.yaml"), SUITE).unwrap();
    let socket = plugin.socket.display().to_string();
    let args = ["run", "--endpoint", &socket, "--no-builtin", "--suite", "mine.yaml", "-q"];
    let out = csi_conform_env(&args, cwd.path(), &[("CI", "true"), ("RUST_LOG", "csi_conform=debug")]).await;
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("PASS  mine.probe-ok"), "-q: no per-scenario lines: {stdout}");
    assert!(stdout.starts_with("csi-conform "), "{stdout}");
    assert!(stdout.contains("2 scenarios in ") && stdout.contains("  FAIL  mine.wrong-expectation") && stdout.ends_with("Result: FAILED\nReports: reports/junit.xml (JUnit), reports/report.json (JSON), reports/report.html (HTML)\n"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("DEBUG") && stderr.contains("rpc"), "RUST_LOG wins over -q: {stderr}");
    assert_plain("stdout", &out.stdout);
    assert_plain("stderr", &out.stderr);
}

/// `run --help` groups its flags under headings, in the order a reader looks for them, and
/// leaves almost nothing under the catch-all "Options".
#[tokio::test]
async fn run_help_groups_flags_under_headings() {
    let cwd = tempfile::tempdir().unwrap();
    let out = csi_conform_env(&["run", "--help"], cwd.path(), &[]).await;
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    let headings = [
        "Options:",
        "Plugin endpoints:",
        "Selection:",
        "Test volumes and requests:",
        "Budgets and timeouts:",
        "Node paths:",
        "Output:",
        "Compatibility:",
        "Existing (pre-provisioned) volumes:",
    ];
    let at: Vec<usize> = headings.iter().map(|h| help.find(&format!("\n{h}\n")).unwrap_or_else(|| panic!("no {h}:\n{help}"))).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "headings out of order: {at:?}");
    let section = |h: &str| {
        let i = headings.iter().position(|x| *x == h).unwrap();
        &help[at[i]..at.get(i + 1).copied().unwrap_or(help.len())]
    };
    let flags = |text: &str| text.lines().filter_map(|l| l.trim_start().split([' ', ',', '.']).find(|w| w.starts_with("--")).map(str::to_owned)).collect::<Vec<_>>();
    assert_eq!(flags(section("Options:")), ["--config", "--help"]);
    for (heading, flag) in [
        ("Plugin endpoints:", "--endpoint"),
        ("Plugin endpoints:", "--node-endpoint"),
        ("Plugin endpoints:", "--connect-timeout"),
        ("Plugin endpoints:", "--rpc-timeout"),
        ("Selection:", "--focus"),
        ("Selection:", "--seed"),
        ("Test volumes and requests:", "--secrets"),
        ("Budgets and timeouts:", "--jobs"),
        ("Budgets and timeouts:", "--run-timeout"),
        ("Node paths:", "--mount-dir"),
        ("Node paths:", "--check-path-cmd"),
        ("Output:", "--junit"),
        ("Output:", "--junit-warnings"),
        ("Output:", "--verbose"),
        ("Output:", "--quiet"),
        ("Compatibility:", "--profile"),
        ("Compatibility:", "--orchestrator"),
        ("Compatibility:", "--orchestrator-only"),
    ] {
        assert!(flags(section(heading)).iter().any(|f| f == flag), "{flag} not under {heading}:\n{}", section(heading));
    }
}

/// `csi-conform --endpoint X` is `csi-conform run --endpoint X`, as csi-sanity's own flags
/// are; a socket that does not come says what is awaited after a second and names the flag
/// that bounds the wait.
#[tokio::test]
async fn run_flags_work_without_the_subcommand_and_a_missing_socket_names_connect_timeout() {
    let cwd = tempfile::tempdir().unwrap();
    let socket = cwd.path().join("absent.sock").display().to_string();
    let started = std::time::Instant::now();
    let out = csi_conform_env(&["--endpoint", &socket, "--connect-timeout", "1500ms"], cwd.path(), &[]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("waiting for the socket {socket} to appear (up to 1.5s, --connect-timeout)")), "{stderr}");
    assert!(stderr.contains(&format!("error: no socket at {socket} (waited 1.5s, --connect-timeout)")), "{stderr}");
    // A generous bound that only tells a wait past --connect-timeout from one within it.
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}
