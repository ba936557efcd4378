//! No secret in any encoding, against a plugin that echoes them: the reference plugin under
//! `echo-secrets` repeats every secret and mount flag it receives, raw, JSON-quoted, base64,
//! base64url, URL-encoded and hex, in its error messages and in the volume_context /
//! publish_context it answers with. Secrets with quotes, backslashes, unicode and 100
//! characters go through a run; every output (stdout, stderr, every report, the job summary,
//! the journal, the work directory) is searched for every encoding of every value, and for
//! every 16-byte piece of the long ones (a value cut before it was scrubbed).

use std::os::unix::fs::PermissionsExt;

use base64::Engine as _;

use crate::support::process::{ReferenceProcess, bin};

/// The values. Each is distinctive; the last is under the scrubber's minimum length (see
/// `csi_conform::scrub`): it stays readable in free text, by rule.
fn values() -> Vec<String> {
    let long: String = "Kq8".chars().chain(('a'..='z').cycle().take(97)).collect();
    assert_eq!(long.len(), 100);
    vec![
        r#"Kq8"quoted"\back\slash"#.to_owned(),
        "Kq8-unicode-é€😀-ü".to_owned(),
        long,
        format!("Kq8{}", "0123456789".repeat(10)),
        "Kq8 space/plus+amp&lt<".to_owned(),
    ]
}

const SHORT: &str = "K8";
const FLAG_VALUE: &str = "Kq8flag\"value\\x";

fn yaml_quoted(v: &str) -> String {
    serde_json::to_string(v).unwrap()
}

fn secrets_file() -> String {
    let v = values();
    let mut out = String::new();
    for key in ["CreateVolumeSecret", "DeleteVolumeSecret", "ControllerPublishVolumeSecret", "ControllerUnpublishVolumeSecret", "NodeStageVolumeSecret", "NodePublishVolumeSecret"] {
        out.push_str(&format!("{key}:\n"));
        for (i, value) in v.iter().enumerate() {
            out.push_str(&format!("  k{i}: {}\n", yaml_quoted(value)));
        }
        out.push_str(&format!("  short: {SHORT}\n"));
    }
    out
}

fn suite() -> String {
    let flag = yaml_quoted(&format!("password={FLAG_VALUE}"));
    format!(
        r#"
suite: canary
title: Errors and answers that echo the secrets and flags sent
scenarios:
  - id: create-with-flags
    title: a created volume's context echoes the request's secrets and flags
    steps:
      - call: CreateVolume
        request:
          name: "${{name}}"
          volume_capabilities: [{{ mount: {{ mount_flags: [{flag}] }}, access_mode: {{ mode: SINGLE_NODE_WRITER }} }}]
        expect: {{ code: ALREADY_EXISTS }}
"#
    )
}

/// Every form of `value` that must not show: raw, escaped, URL, hex, and base64 at each
/// alignment (the characters the value alone determines).
fn forms(value: &str) -> Vec<String> {
    let mut out = vec![
        value.to_owned(),
        serde_json::to_string(value).unwrap().trim_matches('"').to_owned(),
        format!("{value:?}").trim_matches('"').to_owned(),
        value.bytes().map(|b| format!("{b:02x}")).collect(),
        value.bytes().map(|b| format!("{b:02X}")).collect(),
        value.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect(),
    ];
    for engine in [base64::engine::general_purpose::STANDARD, base64::engine::general_purpose::URL_SAFE] {
        for prefix in ["", "x", "xy"] {
            let encoded = engine.encode(format!("{prefix}{value}\0\0"));
            let (first, last) = ((8 * prefix.len()).div_ceil(6), 8 * (prefix.len() + value.len()) / 6);
            out.push(encoded[first..last].to_owned());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_encoding_of_any_secret_survives_a_plugin_that_echoes_them() {
    let cwd = tempfile::tempdir().unwrap();
    let cwd = cwd.path();
    let secrets = cwd.join("secrets.yaml");
    std::fs::write(&secrets, secrets_file()).unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(cwd.join("canary.yaml"), suite()).unwrap();
    let args = ["--quirk", "echo-secrets", "--require-secrets", secrets.to_str().unwrap()];
    let plugin = ReferenceProcess::start_with_env(&args, &[("RUST_LOG", "info")]).await;

    let summary = cwd.join("summary.md");
    let out = tokio::process::Command::new(bin())
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .args(["run", "--endpoint", &plugin.endpoint(), "--secrets", "secrets.yaml", "--suite", "canary.yaml", "-vv"])
        .args(["--focus", r"^(canary\.|controller\.create-volume\.|controller\.publish\.lifecycle$|node\.lifecycle$)", "--work-dir", "work"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let plugin_log = plugin.stop().await;
    assert_eq!(out.status.code(), Some(1), "echoed contexts break the map rules:\n{stdout}\n{stderr}");
    // The plugin really echoed: its own log (not ours) holds the values.
    for value in values() {
        assert!(plugin_log.contains(&serde_json::to_string(&value).unwrap()), "the plugin echoed {value:?}");
    }

    let mut outputs = vec![("stdout".to_owned(), stdout), ("stderr".to_owned(), stderr)];
    for file in crate::leaks::files_under(&cwd.join("reports")).into_iter().chain(crate::leaks::files_under(&cwd.join("work"))).chain([summary]) {
        if let Ok(bytes) = std::fs::read(&file) {
            outputs.push((file.display().to_string(), String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    for want in ["report.json", "junit.xml", "report.html", "journal.jsonl", "summary.md"] {
        assert!(outputs.iter().any(|(f, _)| f.ends_with(want)), "{want} was written");
    }
    let report = &outputs.iter().find(|(f, _)| f.ends_with("report.json")).unwrap().1;
    assert!(report.contains("received: "), "the plugin's echoing messages reached the report");
    assert!(report.contains("<redacted>"));

    let mut leaks = Vec::new();
    let mut all = values();
    all.push(format!("password={FLAG_VALUE}"));
    all.push(FLAG_VALUE.to_owned());
    for (what, text) in &outputs {
        for value in &all {
            for form in forms(value) {
                if form.len() >= 6 && text.contains(&form) {
                    leaks.push(format!("{form:?} (of {value:?}) in {what}"));
                }
            }
            // A piece of a long value: a value cut before it was scrubbed.
            let raw = value.as_bytes();
            if raw.len() > 60 {
                for piece in raw.windows(16).step_by(8) {
                    if text.as_bytes().windows(16).any(|w| w == piece) {
                        leaks.push(format!("a piece of {value:?} in {what}"));
                        break;
                    }
                }
            }
        }
    }
    assert_eq!(leaks, Vec::<String>::new());
    // The short value is below the rule's minimum: not blanked from free text, so readable
    // output stays readable (and the plugin's echo of it shows).
    assert!(report.contains(&format!("={SHORT} ")) || report.contains(&format!("={SHORT})")), "the short value is left in free text, by rule");
}

/// `call` prints the plugin's answer: a context that echoes the request's secrets is
/// scrubbed there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_prints_no_secret_an_answer_echoes() {
    let cwd = tempfile::tempdir().unwrap();
    let plugin = ReferenceProcess::start(&["--quirk", "echo-secrets"]).await;
    let secret = &values()[0];
    let request = format!(
        r#"{{ name: canary-call, secrets: {{ k: {} }}, volume_capabilities: [{{ mount: {{}}, access_mode: {{ mode: SINGLE_NODE_WRITER }} }}] }}"#,
        yaml_quoted(secret)
    );
    let out = tokio::process::Command::new(bin())
        .current_dir(cwd.path())
        .args(["call", "CreateVolume", "--endpoint", &plugin.endpoint(), "--request", &request])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("echo/0.b64"), "the answer echoed: {stdout}");
    let leaked: Vec<String> = forms(secret).into_iter().filter(|f| stdout.contains(f.as_str())).collect();
    assert_eq!(leaked, Vec::<String>::new(), "{stdout}");
}

/// A plugin's strings are capped where the reports repeat them, after scrubbing: a 120 kB
/// vendor_version (the reference plugin refuses a name that long; a plugin may send either)
/// does not make every JUnit test suite 120 kB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_plugin_string_is_capped_in_every_report() {
    let cwd = tempfile::tempdir().unwrap();
    let version = format!("huge-version-{}", "v".repeat(120_000));
    let plugin = ReferenceProcess::start(&["--vendor-version", &version]).await;
    let out = tokio::process::Command::new(bin())
        .current_dir(cwd.path())
        .args(["run", "--endpoint", &plugin.endpoint(), "--work-dir", "work"])
        .args(["--focus", r"^(identity\.|controller\.get-capabilities$|node\.get-info$)"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stdout}");
    let junit = std::fs::read_to_string(cwd.path().join("reports/junit.xml")).unwrap();
    crate::support::junit_schema::check(&junit).unwrap_or_else(|e| panic!("junit-10.xsd refuses it: {e}"));
    let suites = junit.matches("<testsuite ").count();
    assert!(suites >= 2, "several test suites repeat the version: {suites}");
    assert!(junit.contains("huge-version-vvvv"), "the version's head is kept");
    for file in ["junit.xml", "report.json", "report.html"] {
        let len = std::fs::metadata(cwd.path().join("reports").join(file)).unwrap().len();
        assert!(len < 100_000, "{file} is {len} bytes");
    }
    // The console too: the live lines, the log and the summary cap it as the reports do.
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        let longest = text.lines().map(str::len).max().unwrap_or(0);
        assert!(longest < 10_000, "{stream} has a line of {longest} bytes: {}", &text[..text.len().min(3000)]);
    }
}

/// A 3 MB plugin name (refused by the reference plugin, sent by this fake) is capped on the
/// console as in the reports: the live lines, the log lines and the summary of a run stay
/// short, and so does `fingerprint` in either format.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_plugin_name_is_capped_on_the_console() {
    use crate::support::fake_plugin::{FakeOptions, FakePlugin};
    let name = format!("huge-name-{}", "n".repeat(3_000_000));
    let fake = FakePlugin::start(FakeOptions { name: Some(name), ..FakeOptions::default() }).await;
    let cwd = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(bin())
        .current_dir(cwd.path())
        .args(["run", "--endpoint", &format!("unix://{}", fake.socket.display()), "--work-dir", "work"])
        .args(["--focus", r"^identity\."])
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "the name breaks its rule: {}", &stdout[..stdout.len().min(3000)]);
    assert!(stdout.contains("huge-name-nnnn"), "the name's head is kept");
    for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        let longest = text.lines().map(str::len).max().unwrap_or(0);
        assert!(longest < 10_000, "{stream} has a line of {longest} bytes: {}", &text[..text.len().min(3000)]);
    }
    for format in ["table", "json"] {
        let out = tokio::process::Command::new(bin())
            .args(["fingerprint", "--endpoint", &format!("unix://{}", fake.socket.display()), "--format", format])
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("huge-name-nnnn"), "{format}: the name's head is kept");
        assert!(stdout.len() < 100_000, "fingerprint --format {format} printed {} bytes", stdout.len());
    }
}
