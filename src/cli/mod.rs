//! The command line: argument parsing (csi-sanity's flags translated by [`crate::compat`],
//! `run --config FILE` settings merged under the command line's), logging set-up, and turning
//! library errors into readable messages with documented exit codes.
//!
//! Exit codes: `0` everything passed, `1` findings failed, `2` usage, configuration or
//! connection error, `130`/`143` interrupted by SIGINT/SIGTERM.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum, parser::ValueSource};

use crate::{
    client::{ClientOptions, Connections, Endpoint, Targets},
    fingerprint::Fingerprint,
    journal,
    report::{
        self, ExpectedFailures, RunReport,
        progress,
    },
    scrub::Scrubber,
    secrets::Secrets,
    session::{Connector, Ended, Reports, Session},
    suite::{self, AccessType, PathSettings, Suite},
};

mod agents;
mod args;
mod bench;
mod commands;
mod error;
mod run;

pub use agents::AgentRunArgs;
pub use args::*;
pub use bench::BenchArgs;
use bench::*;
pub use error::*;
use commands::*;
use run::*;

/// csi-conform: a Kubernetes-free sanity and conformance harness for CSI plugins.
///
/// Runs scenario suites (every csi-sanity check, and more) against a plugin's socket, and
/// writes JUnit, JSON and HTML reports. Without a subcommand, flags mean `run`
/// (`csi-conform --endpoint /tmp/csi.sock`), and csi-sanity's own command line works too:
/// `csi-conform --csi.endpoint=/tmp/csi.sock --ginkgo.focus=Node` runs `run` with the same
/// meaning (see the book, docs/csi-sanity.md: "Replacing csi-sanity").
#[derive(Debug, Parser)]
#[command(name = "csi-conform", version, about, long_about, after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true, help_heading = "Output")]
    pub verbose: u8,

    /// Only the summary (and errors).
    #[arg(short, long, global = true, help_heading = "Output")]
    pub quiet: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

const EXIT_CODES_HELP: &str = "Exit codes: 0 all passed (skips, inconclusive steps and, without --strict, warnings \
allowed), 1 findings failed, 2 usage/config/connection error, 130/143 interrupted (SIGINT/SIGTERM).\n\
Environment: CSI_ENDPOINT (--endpoint), RUST_LOG (log filter, overrides -v/-q), NO_COLOR (no colours), \
CI (plain lines instead of a progress bar).";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Connect to a plugin and print what it says about itself (identity, capabilities, nodes).
    Fingerprint(FingerprintArgs),
    /// Run scenario suites against a plugin (or, with no endpoint, the bundled reference
    /// plugin) and write JUnit, JSON and HTML reports.
    Run(Box<RunArgs>),
    /// List the built-in (and given) suites and scenarios, the csi-sanity parity map, or the
    /// named checks.
    List(ListArgs),
    /// Work with suite files.
    #[command(subcommand)]
    Suites(SuitesCommand),
    /// Send one RPC with a request written as in suites, and print the response as YAML.
    Call(CallArgs),
    /// Work with run reports: `report --compare OLD.json NEW.json` prints what changed
    /// between two runs (exit 1 when the newer run has new failures).
    Report(ReportArgs),
    /// Measure the plugin: volume lifecycles at rising concurrency (per-RPC latency
    /// percentiles, throughput, errors by code, the plugin process's CPU, memory and fds), or
    /// with --duration a soak that judges leaks and latency drift. Writes JSON (a baseline for
    /// `report --compare`) and HTML with charts.
    Bench(Box<BenchArgs>),
    /// Undo what earlier runs left on the plugin, as listed in their journal (and nothing
    /// else); safe to repeat. Exit 0 when everything is undone, 1 when something is left.
    Cleanup(CleanupArgs),
    /// Serve the bundled reference plugin: every CSI v1.13 RPC (v1.12 with --spec-version 1.12),
    /// as the spec says.
    ReferencePlugin(crate::reference::Args),
    /// Serve one node's part of a run across a cluster, beside the node plugin: its CSI
    /// Identity and Node calls, its paths, mounts and data markers, its facts, over mutual TLS
    /// and under the run's lease; or (`agent certs`) make a run's certificates.
    Agent(crate::agent::AgentArgs),
}

/// `csi-conform suites ...`.
#[derive(Debug, Subcommand)]
pub enum SuitesCommand {
    /// Validate suite files without talking to any plugin (exit 2 on the first bad one).
    Check {
        /// The suite files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
}

/// Parses the process arguments, runs the command, and returns the exit code.
pub fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let translated = crate::compat::translate(&raw);
    for warning in &translated.warnings {
        eprintln!("warning: {warning}");
    }
    let (cli, rerun) = match parse(&translated.args) {
        Ok(parsed) => parsed,
        Err(Parsed::Clap(e)) => e.exit(),
        Err(Parsed::Error(e)) => {
            eprintln!("error: {}", e.message);
            return ExitCode::from(e.code);
        }
    };
    // Every sensitive value the process handles is added to this; every log line and every
    // message printed from a plugin's answer goes through it.
    let scrubber = Scrubber::new();
    init_logging(cli.verbose, cli.quiet, &scrubber);
    if let Command::ReferencePlugin(args) = &cli.command
        && let Err(e) = crate::reference::prepare(args)
    {
        eprintln!("error: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match runtime.block_on(dispatch(cli, rerun, &scrubber)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {}", scrubber.scrub(&e.message));
            ExitCode::from(e.code)
        }
    }
}

/// The workspace's crates, whose logs `-v` turns up (the transport crates stay quieter).
const OUR_CRATES: [&str; 7] =
    ["csi_conform", "csi_conform_engine", "csi_conform_report", "csi_reference", "csi_client", "csi_spec", "csi_proto"];

/// Logs go to stderr through `scrubber`. `-v`s raise csi-conform's own level; the transport
/// crates (tonic, h2, hyper, tower) stay at `debug` at most, as their trace output is frame
/// by frame: `RUST_LOG` overrides everything, and even then every line is scrubbed.
fn init_logging(verbose: u8, quiet: bool, scrubber: &Scrubber) {
    use tracing_subscriber::{filter::Targets, prelude::*};
    // A log line's target is its module path, so every crate of the workspace is named.
    let ours = |level: &str| OUR_CRATES.iter().map(|c| format!(",{c}={level}")).collect::<String>();
    let default = match (quiet, verbose) {
        (true, _) => "error".to_owned(),
        (false, 0) => "warn".to_owned(),
        (false, 1) => format!("warn{}", ours("info")),
        (false, 2) => format!("info{}", ours("debug")),
        (false, _) => format!("debug{}", ours("trace")),
    };
    // RUST_LOG holds `target=level` directives and a bare level for every other target.
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| v.parse::<Targets>().ok())
        .unwrap_or_else(|| default.parse().expect("the default log filter parses"));
    // Scrubbed first, then written past the progress bar (which lifts itself for the line).
    let log_scrubber = scrubber.clone();
    // The fmt subscriber's own ceiling (INFO unless told) is lifted: `filter` alone decides.
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || crate::scrub::ScrubbingWriter::new(log_scrubber.clone(), progress::log_writer()))
        .with_ansi(progress::color_for(std::io::IsTerminal::is_terminal(&std::io::stderr())))
        .with_target(false)
        .finish()
        .with(filter)
        .try_init();
}

/// Why the command line could not be parsed.
enum Parsed {
    /// clap's own error (or `--help` / `--version`), printed and exited by clap.
    Clap(clap::Error),
    /// A settings file error.
    Error(CliError),
}

impl From<clap::Error> for Parsed {
    fn from(e: clap::Error) -> Self {
        Parsed::Clap(e)
    }
}

/// Parses `args` (already translated from csi-sanity's style). For `run`, merges the settings
/// of `--config FILE` under the command line and works out the command that reruns one
/// scenario (the run's own arguments without its filters and seed).
fn parse(args: &[String]) -> Result<(Cli, Option<String>), Parsed> {
    let mut command = Cli::command();
    let matches = command.try_get_matches_from_mut(args)?;
    let Some(("run", run_matches)) = matches.subcommand() else {
        return Ok((Cli::from_arg_matches(&matches)?, None));
    };
    let run_command = command.find_subcommand("run").cloned().unwrap_or_else(|| RunArgs::augment_args(clap::Command::new("run")));
    let Some(file) = run_matches.get_one::<PathBuf>("config") else {
        let rerun = rerun_base(args, &run_command, run_matches, &BTreeSet::new());
        return Ok((Cli::from_arg_matches(&matches)?, Some(rerun)));
    };
    let (extra, from_file) = settings_args(file, &run_command, run_matches).map_err(Parsed::Error)?;
    let mut all = args.to_vec();
    all.extend(extra);
    let merged = Cli::command().try_get_matches_from(&all)?;
    let rerun = merged.subcommand_matches("run").map(|m| rerun_base(args, &run_command, m, &from_file));
    Ok((Cli::from_arg_matches(&merged)?, rerun))
}

/// The `run` flags a settings file may set: every long flag but `--config` and `--help`.
fn settable(run_command: &clap::Command) -> impl Iterator<Item = &clap::Arg> {
    run_command.get_arguments().filter(|a| a.get_long().is_some_and(|l| !matches!(l, "config" | "help")) && !a.is_hide_set())
}

/// The arguments a settings file stands for (`--key=value`, as on a command line), leaving out
/// what the command line gives itself; and the ids of the flags it set. Every key and value
/// is checked here, so errors name the file and line.
fn settings_args(
    file: &Path,
    run_command: &clap::Command,
    given: &clap::ArgMatches,
) -> Result<(Vec<String>, BTreeSet<String>), CliError> {
    use crate::config::SettingValue;
    let settings = crate::config::load_settings(file).map_err(CliError::usage)?;
    let base = file.parent().unwrap_or(Path::new(""));
    let mut args = Vec::new();
    let mut ids = BTreeSet::new();
    let mut errors = Vec::new();
    for setting in settings {
        let key = setting.key.as_str();
        let at = |pos: crate::yaml::Pos| format!("{}:{pos}", file.display());
        let Some(arg) = settable(run_command).find(|a| a.get_long() == Some(key)) else {
            let known: Vec<&str> = settable(run_command).filter_map(clap::Arg::get_long).collect();
            let hint = known
                .iter()
                .map(|k| (strsim::jaro_winkler(k, key), k))
                .filter(|(score, _)| *score > 0.85)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, k)| format!(" (did you mean {k:?}?)"))
                .unwrap_or_default();
            errors.push(format!(
                "{}: unknown setting {key:?}{hint}; settings are the long flag names of `csi-conform run` (see --help)",
                at(setting.key_pos)
            ));
            continue;
        };
        let id = arg.get_id().as_str();
        if given.value_source(id) == Some(ValueSource::CommandLine) {
            continue;
        }
        ids.insert(id.to_owned());
        if !arg.get_action().takes_values() {
            match setting.value {
                SettingValue::Bool(true) => args.push(format!("--{key}")),
                SettingValue::Bool(false) => {}
                _ => errors.push(format!("{}: {key} is a switch: write true or false", at(setting.pos))),
            }
            continue;
        }
        let values = match setting.value {
            SettingValue::Bool(b) => vec![(b.to_string(), setting.pos)],
            SettingValue::Text(t) => vec![(t, setting.pos)],
            SettingValue::List(items) if matches!(arg.get_action(), clap::ArgAction::Append) => items,
            SettingValue::List(_) => {
                errors.push(format!("{}: {key} takes one value, not a list", at(setting.pos)));
                continue;
            }
        };
        let value_name = arg.get_value_names().and_then(|n| n.first()).map(|n| n.as_str()).unwrap_or_default();
        for (value, pos) in values {
            let relative_path = matches!(value_name, "FILE" | "DIR") || (value_name == "CMD" && value.contains('/'));
            let value = if relative_path && Path::new(&value).is_relative() && !value.is_empty() {
                base.join(&value).display().to_string()
            } else {
                value
            };
            let one = format!("--{key}={value}");
            let check = clap::Command::new("run").no_binary_name(true).arg(arg.clone()).try_get_matches_from([&one]);
            if let Err(e) = check {
                let first = e.to_string();
                let first = first.lines().next().unwrap_or_default().trim_start_matches("error: ").to_owned();
                errors.push(format!("{}: {key}: {first}", at(pos)));
                continue;
            }
            args.push(one);
        }
    }
    if errors.is_empty() { Ok((args, ids)) } else { Err(CliError::usage(errors.join("\n"))) }
}

/// The command line that reruns this run, less its filters and seed (which a rerun command
/// adds for its one scenario) and what only shapes the output or the pace of a whole run
/// ([`NOT_IN_RERUN`]): the program as invoked, `run`, then each remaining flag given on the
/// command line (or by CSI_ENDPOINT) with its values, quoted for a shell. Flags that came
/// from `--config` stay in the file, which the rerun names again.
fn rerun_base(args: &[String], run_command: &clap::Command, run: &clap::ArgMatches, from_file: &BTreeSet<String>) -> String {
    let program = args.first().map_or("csi-conform", String::as_str);
    let mut words = vec![report::shell_word(program), "run".to_owned()];
    for arg in run_command.get_arguments() {
        let id = arg.get_id().as_str();
        let (Some(long), false) = (arg.get_long(), NOT_IN_RERUN.contains(&id)) else {
            continue;
        };
        if from_file.contains(id) || !matches!(run.value_source(id), Some(ValueSource::CommandLine | ValueSource::EnvVariable)) {
            continue;
        }
        if !arg.get_action().takes_values() {
            words.push(format!("--{long}"));
            continue;
        }
        for value in run.get_raw(id).into_iter().flatten() {
            words.push(format!("--{long}"));
            words.push(report::shell_word(&value.to_string_lossy()));
        }
    }
    words.join(" ")
}

/// The `run` flags a rerun command leaves out: the selection and seed it sets itself, and
/// flags that change only the output or the pace of a whole run, not one scenario's verdict
/// (a rerun writes to the default report files).
const NOT_IN_RERUN: &[&str] = &[
    "focus", "skip", "seed", "verbose", "quiet", "junit", "json", "html", "job_summary", "junit_warnings",
    "no_annotations", "expect_failures", "jobs", "cleanup_first",
];

async fn dispatch(cli: Cli, rerun: Option<String>, scrubber: &Scrubber) -> Result<u8, CliError> {
    match cli.command {
        Command::Fingerprint(args) => fingerprint(args, scrubber).await,
        Command::Run(args) => run(*args, cli.quiet, rerun.unwrap_or_else(|| "csi-conform run".to_owned()), scrubber).await,
        Command::Report(args) => report_command(&args),
        Command::Bench(args) => bench(*args, cli.quiet, scrubber).await,
        Command::List(args) => list(args),
        Command::Suites(SuitesCommand::Check { files }) => suites_check(&files),
        Command::Call(args) => call(args, scrubber).await,
        Command::Cleanup(args) => cleanup(args, scrubber).await,
        Command::ReferencePlugin(args) => crate::reference::run(args)
            .await
            .map(|()| EXIT_OK)
            .map_err(CliError::usage),
        Command::Agent(args) => crate::agent::main(args).await.map(|()| EXIT_OK).map_err(|e| CliError::usage(e.to_string())),
    }
}
