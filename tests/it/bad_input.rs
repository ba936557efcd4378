//! Bad input stops `csi-conform` before it talks to any plugin, with exit code 2 and a message
//! naming the file, line and what is wrong (or the flag and what is wrong).

use std::os::unix::fs::PermissionsExt;

use crate::support::process::csi_conform;

/// Files every case can use, by name.
const FILES: &[(&str, &str)] = &[
    ("typo-secrets.yaml", "CreateVolumeSecrets:\n  password: x\n"),
    ("broken-secrets.yaml", "CreateVolumeSecret:\n  password: [x\n"),
    ("nested-params.yaml", "a: 1\nb:\n  c: d\n"),
    ("duplicate-params.yaml", "a: 1\na: 2\n"),
    ("duplicate-expect.yaml", "x.y: known\nx.y: again\n"),
    ("empty-reason-expect.yaml", "x.y: \"\"\n"),
    ("bad-suite.yaml", "suite: bad\ntitle: Bad\nscenarios:\n  - id: x\n    title: X\n    stepz: []\n"),
    ("corrupt-journal.jsonl", "{\"op\":\"created\"}\n{\"op\":\"done\",\"id\":\"r:1\"}\n"),
];

/// (arguments after `run --endpoint /nonexistent.sock`, what it prints on stderr: all of it
/// when several lines are given, else the first line exactly, or its start when the
/// expectation ends with a colon).
const RUN_CASES: &[(&[&str], &str)] = &[
    (&["--secrets", "missing.yaml"], "error: missing.yaml: cannot read the secrets file: No such file or directory (os error 2)"),
    (
        &["--secrets", "typo-secrets.yaml"],
        "error: typo-secrets.yaml:1: unknown key \"CreateVolumeSecrets\" (did you mean \"CreateVolumeSecret\"?); valid keys: \
         CreateVolumeSecret, DeleteVolumeSecret, ControllerPublishVolumeSecret, ControllerUnpublishVolumeSecret, \
         ControllerValidateVolumeCapabilitiesSecret, NodeStageVolumeSecret, NodePublishVolumeSecret, CreateSnapshotSecret, \
         DeleteSnapshotSecret, ControllerExpandVolumeSecret, ControllerModifyVolumeSecret, ListSnapshotsSecret, GetSnapshotSecret",
    ),
    (&["--secrets", "broken-secrets.yaml"], "error: broken-secrets.yaml:3:1: invalid YAML: while parsing a flow sequence, expected ',' or ']'"),
    (&["--test-volume-parameters", "missing.yaml"], "error: missing.yaml: cannot read: No such file or directory (os error 2)"),
    (
        &["--test-volume-parameters", "nested-params.yaml"],
        "error: nested-params.yaml:3:3: the value of \"b\" must be text, found a mapping",
    ),
    (
        &["--test-volume-mutable-parameters", "duplicate-params.yaml"],
        "error: duplicate-params.yaml:2:1: duplicate key \"a\" (first at line 1)",
    ),
    (
        &["--test-snapshot-parameters", "nested-params.yaml"],
        "error: nested-params.yaml:3:3: the value of \"b\" must be text, found a mapping",
    ),
    (
        &["--expect-failures", "missing.yaml"],
        "error: missing.yaml: cannot read the expect-failures file: No such file or directory (os error 2)",
    ),
    (&["--expect-failures", "duplicate-expect.yaml"], "error: duplicate-expect.yaml:2:1: duplicate id x.y (first listed on line 1)"),
    (&["--expect-failures", "empty-reason-expect.yaml"], "error: empty-reason-expect.yaml:1:6: x.y: empty reason"),
    (&["--suite", "missing.yaml"], "error: missing.yaml: cannot read the suite: No such file or directory (os error 2)"),
    (
        &["--suite", "bad-suite.yaml"],
        "error: bad-suite.yaml:4:5: a scenario needs `steps`\n\
         bad-suite.yaml:6:5: unknown key \"stepz\" in a scenario; did you mean steps?",
    ),
    (&["--test-volume-size", "0"], "error: --test-volume-size must be more than 0 bytes"),
    (
        &["--test-volume-size", "2Gi", "--test-volume-expand-size", "1Gi"],
        "error: --test-volume-expand-size (1073741824) is smaller than --test-volume-size (2147483648); expansion only grows",
    ),
    (&["--test-volume-size", "10Zi"], "error: invalid value '10Zi' for '--test-volume-size <BYTES>': \"10Zi\": unknown unit \"Zi\""),
    (&["--access-type", "file"], "error: invalid value 'file' for '--access-type <ACCESS_TYPE>'"),
    (&["--jobs", "0"], "error: invalid value '0' for '--jobs <JOBS>': 0 is not in 1..=65535"),
    (&["--rpc-timeout", "0"], "error: invalid value '0' for '--rpc-timeout <DURATION>': must be more than 0"),
    (&["--cleanup-timeout", "0s"], "error: invalid value '0s' for '--cleanup-timeout <DURATION>': must be more than 0"),
    (&["--max-message-size", "0"], "error: invalid value '0' for '--max-message-size <BYTES>': must be more than 0 bytes"),
    (&["--focus", "(unclosed"], "error: --focus \"(unclosed\" is not a valid regex: regex parse error:"),
];

fn workspace() -> tempfile::TempDir {
    let cwd = tempfile::tempdir().unwrap();
    for (name, text) in FILES {
        std::fs::write(cwd.path().join(name), text).unwrap();
    }
    cwd
}

#[tokio::test]
async fn every_bad_input_to_run_exits_2_naming_the_file_line_and_problem() {
    let cwd = workspace();
    let mut wrong = Vec::new();
    for (args, expected) in RUN_CASES {
        let mut all = vec!["run", "--endpoint", "/nonexistent.sock", "--connect-timeout", "50ms"];
        all.extend(*args);
        let out = csi_conform(&all, cwd.path()).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr.lines().next().unwrap_or_default();
        // Messages that go on (a regex parser's own explanation) are compared up to our part.
        let matches = if expected.contains('\n') {
            stderr.trim_end() == *expected
        } else if expected.ends_with(':') {
            first.starts_with(expected)
        } else {
            first == *expected
        };
        if out.status.code() != Some(2) || !matches {
            wrong.push(format!("{args:?}: exit {:?}\n  expected: {expected}\n  got:      {first}", out.status.code()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn a_corrupt_journal_stops_cleanup_and_run_with_its_line() {
    let cwd = workspace();
    for args in [
        &["cleanup", "--journal", "corrupt-journal.jsonl"][..],
        &["run", "--endpoint", "/nonexistent.sock", "--journal", "corrupt-journal.jsonl"][..],
    ] {
        let out = csi_conform(args, cwd.path()).await;
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "error: journal corrupt-journal.jsonl:1: not a journal entry: missing field `id`\n"
        );
    }
}

#[tokio::test]
async fn a_secrets_file_others_can_read_is_warned_about() {
    let cwd = workspace();
    let file = cwd.path().join("open-secrets.yaml");
    std::fs::write(&file, "CreateVolumeSecret:\n  password: not-so-secret\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let args = ["run", "--endpoint", "/nonexistent.sock", "--connect-timeout", "50ms", "--secrets", "open-secrets.yaml"];
    let out = csi_conform(&args, cwd.path()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("open-secrets.yaml is readable by every user on this machine; secrets files should be private (chmod 600)"),
        "{stderr}"
    );
    // A warning, not an error: the run went on to connect.
    assert!(stderr.contains("error: no socket at /nonexistent.sock"), "{stderr}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = csi_conform(&args, cwd.path()).await;
    assert!(!String::from_utf8_lossy(&out.stderr).contains("readable by every user"));
}
