//! csi-sanity compatibility: rewrites a csi-sanity command line (`-csi.endpoint=...`,
//! `--ginkgo.focus ...`) into csi-conform's own flags, so replacing the binary name in a CI
//! job is the whole migration.
//!
//! Go's `flag` package accepts `-name`, `--name`, `-name=value` and `-name value` (but a
//! boolean takes its value only as `-name=false`). csi-sanity's flags map one to one onto
//! `csi-conform run` flags; ginkgo flags we have no use for are accepted and reported as
//! ignored.

/// How a csi-sanity flag maps onto ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mapping {
    /// Takes a value; becomes `--ours VALUE`.
    Value(&'static str),
    /// A boolean; becomes `--ours` when true, nothing when false.
    Switch(&'static str),
    /// A boolean that raises verbosity by this many `-v`.
    Verbose(u8),
    /// Accepted and ignored, with a warning; `true` if it takes a value.
    Ignored(bool),
}

/// csi-sanity's flags (see `../shared/parity/csi-sanity-flags.txt`) and what they become.
const FLAGS: &[(&str, Mapping)] = &[
    ("csi.endpoint", Mapping::Value("--endpoint")),
    ("csi.controllerendpoint", Mapping::Value("--controller-endpoint")),
    ("csi.mountdir", Mapping::Value("--mount-dir")),
    ("csi.stagingdir", Mapping::Value("--staging-dir")),
    ("csi.createmountpathcmd", Mapping::Value("--create-mount-path-cmd")),
    ("csi.createstagingpathcmd", Mapping::Value("--create-staging-path-cmd")),
    ("csi.createpathcmdtimeout", Mapping::Value("--create-path-cmd-timeout")),
    ("csi.removemountpathcmd", Mapping::Value("--remove-mount-path-cmd")),
    ("csi.removestagingpathcmd", Mapping::Value("--remove-staging-path-cmd")),
    ("csi.removepathcmdtimeout", Mapping::Value("--remove-path-cmd-timeout")),
    ("csi.checkpathcmd", Mapping::Value("--check-path-cmd")),
    ("csi.checkpathcmdtimeout", Mapping::Value("--check-path-cmd-timeout")),
    ("csi.secrets", Mapping::Value("--secrets")),
    ("csi.testvolumeaccesstype", Mapping::Value("--access-type")),
    ("csi.testvolumesize", Mapping::Value("--test-volume-size")),
    ("csi.testvolumeexpandsize", Mapping::Value("--test-volume-expand-size")),
    ("csi.testvolumeparameters", Mapping::Value("--test-volume-parameters")),
    ("csi.testvolumemutableparameters", Mapping::Value("--test-volume-mutable-parameters")),
    ("csi.testsnapshotparameters", Mapping::Value("--test-snapshot-parameters")),
    ("csi.testnodevolumeattachlimit", Mapping::Switch("--test-node-volume-attach-limit")),
    ("csi.junitfile", Mapping::Value("--junit")),
    ("ginkgo.focus", Mapping::Value("--focus")),
    ("ginkgo.skip", Mapping::Value("--skip")),
    ("ginkgo.junit-report", Mapping::Value("--junit")),
    ("ginkgo.json-report", Mapping::Ignored(true)),
    ("ginkgo.v", Mapping::Verbose(1)),
    ("ginkgo.vv", Mapping::Verbose(2)),
    ("ginkgo.fail-fast", Mapping::Ignored(false)),
    ("ginkgo.timeout", Mapping::Value("--run-timeout")),
    ("ginkgo.seed", Mapping::Value("--seed")),
    ("version", Mapping::Switch("--version")),
];

/// ginkgo flags that take a value (so the value after them is consumed, not mistaken for a
/// positional argument). Everything else under `ginkgo.` is taken as a boolean.
const GINKGO_VALUE_FLAGS: &[&str] = &[
    "ginkgo.focus-file",
    "ginkgo.skip-file",
    "ginkgo.label-filter",
    "ginkgo.sem-ver-filter",
    "ginkgo.gojson-report",
    "ginkgo.teamcity-report",
    "ginkgo.flake-attempts",
    "ginkgo.grace-period",
    "ginkgo.poll-progress-after",
    "ginkgo.poll-progress-interval",
    "ginkgo.output-interceptor-mode",
    "ginkgo.parallel.process",
    "ginkgo.parallel.total",
    "ginkgo.parallel.host",
];

/// The rewritten command line and what was ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translated {
    /// The arguments to parse, program name first.
    pub args: Vec<String>,
    /// One line per csi-sanity/ginkgo flag that was accepted but has no effect.
    pub warnings: Vec<String>,
}

/// The migration table: each csi-sanity flag (as `-name`) and what csi-conform makes of it,
/// in the order of csi-sanity's documentation. The book's table (docs/csi-sanity.md) is
/// checked against it.
pub fn migration_table() -> Vec<(String, String)> {
    FLAGS
        .iter()
        .map(|(name, mapping)| {
            let ours = match mapping {
                Mapping::Value(ours) | Mapping::Switch(ours) => format!("`{ours}`"),
                Mapping::Verbose(n) => format!("`-{}`", "v".repeat(usize::from(*n))),
                Mapping::Ignored(_) => "ignored, with a warning".to_owned(),
            };
            (format!("-{name}"), ours)
        })
        .collect()
}

/// Whether `arg` is written in csi-sanity's style (`-csi.x`, `--ginkgo.y`, `-version`).
pub fn is_sanity_flag(arg: &str) -> bool {
    let name = flag_name(arg).map(|(n, _)| n);
    name.is_some_and(|n| n.starts_with("csi.") || n.starts_with("ginkgo.") || n == "version")
}

fn flag_name(arg: &str) -> Option<(&str, Option<&str>)> {
    let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    if body.is_empty() || body.starts_with('-') {
        return None;
    }
    Some(match body.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (body, None),
    })
}

/// Rewrites csi-sanity-style arguments into ours. A command line that starts with a flag
/// rather than a subcommand (csi-sanity's or `run`'s own) becomes `run ...`. Arguments that are not csi-sanity
/// flags pass through untouched, so both styles can be mixed.
pub fn translate(args: &[String]) -> Translated {
    let mut out = Vec::with_capacity(args.len() + 1);
    let mut warnings = Vec::new();
    let mut iter = args.iter().peekable();
    if let Some(program) = iter.next() {
        out.push(program.clone());
    }
    if starts_without_subcommand(&args[1.min(args.len())..]) {
        out.push("run".to_owned());
    }
    while let Some(arg) = iter.next() {
        let Some((name, inline)) = flag_name(arg).filter(|_| is_sanity_flag(arg)) else {
            out.push(arg.clone());
            continue;
        };
        let mapping = FLAGS.iter().find(|(n, _)| *n == name).map(|(_, m)| *m).unwrap_or_else(|| {
            Mapping::Ignored(GINKGO_VALUE_FLAGS.contains(&name) || name.starts_with("csi."))
        });
        match mapping {
            Mapping::Value(ours) => {
                let value = inline.map(str::to_owned).or_else(|| iter.next().cloned());
                out.push(ours.to_owned());
                if let Some(v) = value {
                    out.push(v);
                }
            }
            Mapping::Switch(ours) => {
                if go_bool(inline) {
                    out.push(ours.to_owned());
                }
            }
            Mapping::Verbose(n) => {
                if go_bool(inline) {
                    out.push(format!("-{}", "v".repeat(n.into())));
                }
            }
            Mapping::Ignored(takes_value) => {
                if takes_value && inline.is_none() {
                    iter.next();
                }
                let what = if name.starts_with("csi.") { "unknown csi-sanity flag" } else { "ginkgo flag" };
                warnings.push(format!("{what} -{name} has no effect in csi-conform and is ignored"));
            }
        }
    }
    Translated { args: out, warnings }
}

/// Whether a command line (less the program name) gives `run`'s flags without naming a
/// subcommand, as csi-sanity's does: its first word that is not a global `-v`/`-q` is a flag
/// other than help or version (`--endpoint X`, `-csi.endpoint=X`, `-j 4`).
fn starts_without_subcommand(args: &[String]) -> bool {
    let global = |a: &str| matches!(a, "--verbose" | "--quiet" | "-q") || (a.len() > 1 && a[1..].bytes().all(|b| b == b'v'));
    let Some(first) = args.iter().map(String::as_str).find(|a| !global(a)) else {
        return false;
    };
    let help_or_version = matches!(first, "-h" | "--help" | "-V" | "--version" | "-version" | "--help=true")
        || flag_name(first).is_some_and(|(n, _)| n == "version");
    first.starts_with('-') && first != "-" && !help_or_version
}

/// Go's boolean flag values: absent or `true`/`1`/`t` means true.
fn go_bool(inline: Option<&str>) -> bool {
    match inline {
        None => true,
        Some(v) => matches!(v.to_ascii_lowercase().as_str(), "1" | "t" | "true"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(line: &str) -> Translated {
        let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        translate(&args)
    }

    fn joined(line: &str) -> String {
        t(line).args.join(" ")
    }

    #[test]
    fn the_typical_invocations_become_run_commands() {
        assert_eq!(
            joined("csi-conform --csi.endpoint=unix:///tmp/csi.sock"),
            "csi-conform run --endpoint unix:///tmp/csi.sock"
        );
        assert_eq!(
            joined("csi-conform --csi.endpoint=/tmp/node.sock --csi.controllerendpoint=/tmp/ctrl.sock"),
            "csi-conform run --endpoint /tmp/node.sock --controller-endpoint /tmp/ctrl.sock"
        );
        assert_eq!(
            joined("csi-conform --csi.endpoint=x --csi.secrets=secrets.yaml --csi.testnodevolumeattachlimit"),
            "csi-conform run --endpoint x --secrets secrets.yaml --test-node-volume-attach-limit"
        );
        assert_eq!(
            joined("csi-conform -ginkgo.v -csi.junitfile junit.xml -csi.endpoint dns:///1.2.3.4:5 -csi.stagingdir /tmp/staging -csi.mountdir /tmp/mount -csi.createstagingpathcmd mk.sh -csi.checkpathcmd check.sh"),
            "csi-conform run -v --junit junit.xml --endpoint dns:///1.2.3.4:5 --staging-dir /tmp/staging --mount-dir /tmp/mount --create-staging-path-cmd mk.sh --check-path-cmd check.sh"
        );
        assert_eq!(
            joined("csi-conform --csi.endpoint=x --ginkgo.skip=pagination|should.work --ginkgo.focus=Node.Service"),
            "csi-conform run --endpoint x --skip pagination|should.work --focus Node.Service"
        );
    }

    #[test]
    fn booleans_follow_go_rules_and_ignored_flags_warn() {
        assert_eq!(joined("c --csi.endpoint=x --csi.testnodevolumeattachlimit=false"), "c run --endpoint x");
        let out = t("c --csi.endpoint=x --ginkgo.flake-attempts 3 --ginkgo.no-color --ginkgo.randomize-all");
        assert_eq!(out.args.join(" "), "c run --endpoint x");
        assert_eq!(out.warnings.len(), 3);
        assert!(out.warnings[0].contains("-ginkgo.flake-attempts has no effect"), "{:?}", out.warnings);
    }

    #[test]
    fn our_own_run_flags_work_without_a_subcommand_too() {
        assert_eq!(joined("c --endpoint x"), "c run --endpoint x");
        assert_eq!(joined("c -v --endpoint=x --jobs 2"), "c run -v --endpoint=x --jobs 2");
        assert_eq!(joined("c -j 2 --csi.endpoint x"), "c run -j 2 --endpoint x");
        for untouched in ["c", "c -v", "c --help", "c -h", "c -V", "c --version", "c -q list", "c report --compare a b"] {
            assert_eq!(joined(untouched), untouched);
        }
    }

    #[test]
    fn our_own_flags_and_subcommands_pass_through() {
        assert_eq!(joined("c run --endpoint x --jobs 4"), "c run --endpoint x --jobs 4");
        assert_eq!(joined("c fingerprint --endpoint x"), "c fingerprint --endpoint x");
        assert_eq!(joined("c -version"), "c --version");
        assert_eq!(joined("c run -csi.endpoint x -v"), "c run --endpoint x -v");
    }
}
