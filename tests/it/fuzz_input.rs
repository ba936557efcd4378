//! Seeded mutations of real inputs (two built-in suites, a settings file, a secrets file, an
//! expect-failures file): every one is either read or refused with a location, none panics,
//! and the work does not grow with what follows the point where a bound breaks (no timing:
//! the refusal's position shows where reading stopped). A few of each kind also go through
//! the binary: exit 2, `file:line` on stderr.

use std::path::Path;

use proptest::test_runner::{RngAlgorithm, TestRng};
use proptest::prelude::Rng as _;

use crate::support::process::csi_conform;

/// A number in `range`, from the seeded generator.
fn pick(rng: &mut TestRng, range: std::ops::Range<usize>) -> usize {
    range.start + (rng.next_u64() % (range.end - range.start) as u64) as usize
}

const SECRETS: &str = "\
CreateVolumeSecret:
  user: alice
  password: \"p@ss\\\"word\"
NodeStageVolumeSecret:
  token: abc123
  empty:
DeleteVolumeSecret: {}
";

const EXPECT: &str = "\
controller.create-volume.max-name: names over 63 bytes are refused (issue 41)
node.publish.readonly-twice: not idempotent yet
\"quoted.id\": 'a reason'
";

const SETTINGS: &str = "\
endpoint: unix:///run/csi/csi.sock
test-volume-size: 1Gi
max-live-volumes: 10
property-cases: 64
property-time: 2m
jobs: 4
focus: [controller, node]
";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Suite,
    Settings,
    Secrets,
    Expect,
}

/// What reading `text` as `kind` gave: `Ok`, or the error's line (0 when it has none) and
/// its text.
fn read(kind: Kind, text: &str) -> Result<(), (usize, String)> {
    let file = Path::new("input.yaml");
    match kind {
        Kind::Suite => csi_conform::suite::load_str("input.yaml", text)
            .map(drop)
            .map_err(|e| (e.0.first().map_or(0, |e| e.pos.line), e.to_string())),
        Kind::Settings => csi_conform::config::parse_settings(text, file).map(drop).map_err(|e| match &e {
            csi_conform::config::ConfigError::Invalid { pos, .. } => (pos.line, e.to_string()),
            other => (0, other.to_string()),
        }),
        Kind::Secrets => csi_conform::secrets::Secrets::parse(text, file).map(drop).map_err(|e| match &e {
            csi_conform::secrets::SecretsError::Yaml { line, .. } | csi_conform::secrets::SecretsError::Shape { line, .. } => {
                (*line, e.to_string())
            }
            other => (0, other.to_string()),
        }),
        Kind::Expect => csi_conform::report::ExpectedFailures::parse_str(text, file).map(drop).map_err(|e| match &e {
            csi_conform::report::ExpectError::Invalid { location, .. } => (location.map_or(0, |l| l.0), e.to_string()),
            other => (0, other.to_string()),
        }),
    }
}

fn inputs() -> Vec<(Kind, String)> {
    let suite = |name: &str| std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("suites").join(name)).unwrap();
    vec![
        (Kind::Suite, suite("identity.yaml")),
        (Kind::Suite, suite("controller.yaml")),
        (Kind::Settings, SETTINGS.to_owned()),
        (Kind::Secrets, SECRETS.to_owned()),
        (Kind::Expect, EXPECT.to_owned()),
    ]
}

/// A mutation, and whether the result is certainly invalid.
#[derive(Debug)]
#[allow(dead_code, reason = "the fields are read through Debug, in failure messages")]
enum Mutation {
    /// `depth` unclosed `[` at the start of a line: always invalid, and must be refused near
    /// where the nesting passes the bound.
    Nest { line: usize, depth: usize },
    /// A stray `]` line: always invalid.
    StrayBracket { line: usize },
    /// A number no field takes, in place of a value.
    HugeNumber { line: usize },
    /// Random bytes flipped to random printable ASCII.
    Flip { at: Vec<usize> },
    /// Cut at a byte.
    Truncate { at: usize },
    /// A line repeated.
    Repeat { line: usize },
}

fn mutate(rng: &mut TestRng, text: &str) -> (Mutation, String) {
    let lines: Vec<&str> = text.lines().collect();
    let line = pick(rng, 0..lines.len());
    let withline = |replacement: String| {
        let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        out[line] = replacement;
        out.join("\n") + "\n"
    };
    match pick(rng, 0..6) {
        0 => {
            let depth = pick(rng, 100..20_000);
            (Mutation::Nest { line: line + 1, depth }, withline(format!("{}{}", "[".repeat(depth), lines[line])))
        }
        1 => (Mutation::StrayBracket { line: line + 1 }, withline(format!("]\n{}", lines[line]))),
        2 => {
            let replaced = match lines[line].split_once(": ") {
                Some((k, _)) => format!("{k}: 0x7fffffffffffffff"),
                None => lines[line].to_owned(),
            };
            (Mutation::HugeNumber { line: line + 1 }, withline(replaced))
        }
        3 => {
            let mut bytes = text.as_bytes().to_vec();
            let at: Vec<usize> = (0..pick(rng, 1..4)).map(|_| pick(rng, 0..bytes.len())).collect();
            for &i in &at {
                bytes[i] = b' ' + pick(rng, 0..95) as u8;
            }
            (Mutation::Flip { at }, String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
        }
        4 => {
            let mut at = pick(rng, 0..text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            (Mutation::Truncate { at }, text[..at].to_owned())
        }
        _ => (Mutation::Repeat { line: line + 1 }, withline(format!("{}\n{}", lines[line], lines[line]))),
    }
}

#[test]
fn seeded_mutations_are_read_or_refused_with_a_location_and_never_panic() {
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[32; 32]);
    let inputs = inputs();
    for (kind, text) in &inputs {
        assert_eq!(read(*kind, text), Ok(()), "{kind:?}: the unmutated input is read");
    }
    let mut refused = 0;
    for case in 0..400 {
        let (kind, text) = &inputs[case % inputs.len()];
        let (mutation, mutated) = mutate(&mut rng, text);
        let lines = mutated.lines().count() + 1;
        let outcome = std::panic::catch_unwind(|| read(*kind, &mutated));
        let Ok(outcome) = outcome else { panic!("case {case}, {kind:?}, {mutation:?}: the reader panicked") };
        let Err((line, message)) = outcome else {
            assert!(
                !matches!(mutation, Mutation::Nest { .. } | Mutation::StrayBracket { .. }),
                "case {case}, {kind:?}, {mutation:?}: an invalid input was read"
            );
            continue;
        };
        refused += 1;
        assert!((1..=lines).contains(&line), "case {case}, {kind:?}, {mutation:?}: no location in {message:?}");
        assert!(message.starts_with(&format!("input.yaml:{line}")), "case {case}, {kind:?}, {mutation:?}: {message}");
        if let Mutation::Nest { line: at, depth } = mutation {
            // Refused on the line the nesting starts, within a few hundred bytes of it: the
            // reader did not go on through the rest of the nesting.
            assert_eq!(line, at, "case {case}, {kind:?}, depth {depth}: {message}");
            let column: usize = message.split(':').nth(2).and_then(|c| c.parse().ok()).unwrap_or(usize::MAX);
            assert!(column <= 400, "case {case}, {kind:?}, depth {depth}: refused at column {column}: {message}");
        }
    }
    assert!(refused > 200, "most mutations break the input ({refused} of 400)");
}

/// The bound on size is checked before anything is parsed, and bytes that are not UTF-8 are
/// named by line and byte.
#[test]
fn a_source_over_the_size_bound_or_not_utf8_is_refused_with_where() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.yaml");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(csi_conform::yaml::MAX_SOURCE_BYTES + 1).unwrap();
    assert!(matches!(csi_conform::yaml::read_source(&big), Err(csi_conform::yaml::SourceError::TooLarge)));
    let err = csi_conform::yaml::decode_source(b"a: 1\nbb: \xc3(\n".to_vec()).unwrap_err();
    assert_eq!(err.pos(), Some(csi_conform::yaml::Pos { line: 2, col: 5 }));
}

/// Through the binary: each kind of input, broken, exits 2 naming `file:line`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_inputs_exit_2_naming_file_andline() {
    let cwd = tempfile::tempdir().unwrap();
    let deep = |text: &str, line: usize| {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines[line - 1] = format!("{}{}", "[".repeat(80_000), lines[line - 1]);
        lines.join("\n")
    };
    let suite = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("suites/identity.yaml")).unwrap();
    let files = [
        ("suite.yaml", deep(&suite, 3)),
        ("settings.yaml", deep(SETTINGS, 2)),
        ("secrets.yaml", deep(SECRETS, 2)),
        ("expect.yaml", deep(EXPECT, 2)),
        ("utf8.yaml", "CreateVolumeSecret:\n  a: \u{0}".replace('\u{0}', "x")),
    ];
    for (name, text) in &files {
        std::fs::write(cwd.path().join(name), text).unwrap();
    }
    std::fs::write(cwd.path().join("utf8.yaml"), b"CreateVolumeSecret:\n  a: b\xff\n").unwrap();
    let run = ["run", "--endpoint", "/nonexistent/csi.sock"];
    let cases: [(Vec<&str>, &str); 5] = [
        (vec!["suites", "check", "suite.yaml"], "suite.yaml:3:"),
        ([&run[..], &["--config", "settings.yaml"]].concat(), "settings.yaml:2:"),
        ([&run[..], &["--secrets", "secrets.yaml"]].concat(), "secrets.yaml:2:"),
        ([&run[..], &["--expect-failures", "expect.yaml"]].concat(), "expect.yaml:2:"),
        ([&run[..], &["--secrets", "utf8.yaml"]].concat(), "utf8.yaml:2:7: invalid YAML: invalid UTF-8 at byte 7 of line 2"),
    ];
    for (args, want) in cases {
        let out = csi_conform(&args, cwd.path()).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: want {want:?} in {stderr}");
    }
}
