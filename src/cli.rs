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
    sync::Arc,
    time::Duration,
};

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum, parser::ValueSource};

use crate::{
    client::{ClientOptions, Connections, Endpoint, Targets},
    fingerprint::{Capability, Fingerprint, PluginService},
    journal::{self, Journal, JournalObserver},
    report::{
        self, ExpectedFailures, RunReport,
        progress::{self, ConsoleProgress, Mode},
    },
    scrub::Scrubber,
    secrets::Secrets,
    suite::{self, AccessType, PathSettings, Suite},
};

/// Every run passed (or only skipped/warned without `--strict`).
pub const EXIT_OK: u8 = 0;
/// At least one finding failed.
pub const EXIT_FINDINGS: u8 = 1;
/// Bad usage, configuration, suite, or no connection to the plugin.
pub const EXIT_USAGE: u8 = 2;

/// csi-conform: a Kubernetes-free sanity and conformance harness for CSI plugins.
///
/// Runs scenario suites (every csi-sanity check, and more) against a plugin's socket, and
/// writes JUnit, JSON and HTML reports. csi-sanity's own command line works too:
/// `csi-conform --csi.endpoint=/tmp/csi.sock --ginkgo.focus=Node` runs `run` with the same
/// meaning (see README.md, "Migrating from csi-sanity").
#[derive(Debug, Parser)]
#[command(name = "csi-conform", version, about, long_about, after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Only the summary (and errors).
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

const EXIT_CODES_HELP: &str = "Exit codes: 0 all passed, 1 findings failed, 2 usage/config/connection error, \
130/143 interrupted (SIGINT/SIGTERM).\n\
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
    /// Undo what earlier runs left on the plugin, as listed in their journal (and nothing
    /// else); safe to repeat. Exit 0 when everything is undone, 1 when something is left.
    Cleanup(CleanupArgs),
    /// Serve the bundled reference plugin: every CSI v1.12 RPC, as the spec says.
    ReferencePlugin(crate::reference::Args),
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

/// Which suites to use.
#[derive(Debug, Clone, Args)]
pub struct SuiteArgs {
    /// A suite file of your own; repeatable. Added to the built-in suites.
    #[arg(long = "suite", value_name = "FILE")]
    pub suites: Vec<PathBuf>,

    /// Leave out the built-in suites (only the --suite files run).
    #[arg(long)]
    pub no_builtin: bool,
}

impl SuiteArgs {
    /// The built-in suites (unless left out) and the given files, checked for duplicate ids.
    pub fn load(&self) -> Result<Vec<Suite>, CliError> {
        let mut suites = if self.no_builtin { Vec::new() } else { suite::builtin() };
        let mut errors = Vec::new();
        for file in &self.suites {
            match suite::load_file(file) {
                Ok(s) => suites.push(s),
                Err(e) => errors.push(e.to_string()),
            }
        }
        if errors.is_empty()
            && let Err(e) = suite::check_unique(&suites)
        {
            errors.push(e.to_string());
        }
        if errors.is_empty() { Ok(suites) } else { Err(CliError::usage(errors.join("\n"))) }
    }
}

/// `csi-conform report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Compare two JSON reports (`run --json`), an older run's and a newer one's: new
    /// failures, fixed scenarios, scenarios that appeared or went away, and RPCs whose median
    /// latency moved by more than 1.5x. Exit code 1 when the newer run has new failures
    /// (a nightly job fails on regressions only), 0 otherwise.
    #[arg(long, num_args = 2, required = true, value_names = ["OLD", "NEW"])]
    pub compare: Vec<PathBuf>,
}

/// csi-sanity's mount and staging directories and path commands (`--csi.mountdir` ...).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Target and staging paths (csi-sanity's --csi.mountdir and friends)")]
pub struct PathArgs {
    /// Where target paths go: each scenario gets its own directory in DIR (created if
    /// missing), the parent of its target paths, as csi-sanity's mount dir is. Default: a
    /// directory of the run under --work-dir.
    #[arg(long, value_name = "DIR")]
    pub mount_dir: Option<PathBuf>,

    /// Where staging paths go: each scenario's staging path is its own directory in DIR
    /// (csi-sanity uses DIR itself, one spec at a time; our scenarios run concurrently).
    /// Default: inside each scenario's directory.
    #[arg(long, value_name = "DIR")]
    pub staging_dir: Option<PathBuf>,

    /// Makes each target parent: run as `CMD PATH` (no shell), it prints the path it made
    /// (e.g. a script that runs mkdir in the plugin's pod). Also run once on --mount-dir.
    #[arg(long, value_name = "CMD")]
    pub create_mount_path_cmd: Option<PathBuf>,

    /// Makes each staging path, as --create-mount-path-cmd does target parents.
    #[arg(long, value_name = "CMD")]
    pub create_staging_path_cmd: Option<PathBuf>,

    /// How long a create command may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::units::parse_duration)]
    pub create_path_cmd_timeout: Duration,

    /// Removes each target parent after its scenario (and --mount-dir at the end, if the run
    /// made it): run as `CMD PATH`.
    #[arg(long, value_name = "CMD")]
    pub remove_mount_path_cmd: Option<PathBuf>,

    /// Removes each staging path after its scenario, as --remove-mount-path-cmd does.
    #[arg(long, value_name = "CMD")]
    pub remove_staging_path_cmd: Option<PathBuf>,

    /// How long a remove command may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::units::parse_duration)]
    pub remove_path_cmd_timeout: Duration,
}

impl PathArgs {
    /// The engine's path settings.
    pub fn settings(&self) -> PathSettings {
        PathSettings {
            mount_dir: self.mount_dir.clone(),
            staging_dir: self.staging_dir.clone(),
            create_mount_cmd: self.create_mount_path_cmd.clone(),
            create_staging_cmd: self.create_staging_path_cmd.clone(),
            create_timeout: self.create_path_cmd_timeout,
            remove_mount_cmd: self.remove_mount_path_cmd.clone(),
            remove_staging_cmd: self.remove_staging_path_cmd.clone(),
            remove_timeout: self.remove_path_cmd_timeout,
        }
    }
}

/// `csi-conform run`.
#[derive(Debug, Args)]
#[command(after_long_help = RUN_HELP)]
pub struct RunArgs {
    /// Settings from a YAML file: each key is a long flag name of `run` (`endpoint`,
    /// `test-volume-size`, `focus: [a, b]`, `strict: true`); flags given on the command line
    /// win. Relative FILE and DIR values are relative to the settings file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// The plugin (none: the bundled reference plugin, started on a temporary socket).
    #[command(flatten)]
    pub connect: ConnectArgs,

    /// Which suites.
    #[command(flatten)]
    pub suites: SuiteArgs,

    /// `csi-sanity`: only the scenarios mapped to csi-sanity cases (`list --parity`), sending
    /// what csi-sanity sends, for its verdicts; `full`: everything (migrate in two steps).
    #[arg(long, value_enum, default_value_t = suite::Profile::Full)]
    pub profile: suite::Profile,

    /// Run only scenarios whose id, title or a tag matches this regex; repeatable (any).
    #[arg(long, value_name = "REGEX")]
    pub focus: Vec<String>,

    /// Leave out scenarios whose id, title or a tag matches this regex; repeatable.
    #[arg(long, value_name = "REGEX")]
    pub skip: Vec<String>,

    /// Scenarios run at once (the work waits on the plugin, so more than the cores).
    #[arg(long, short = 'j', default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: u16,

    /// How often idempotency checks repeat a call (0 skips them).
    #[arg(long, default_value_t = 10)]
    pub idempotency_count: u32,

    /// The access type of the default volume capability.
    #[arg(long, value_enum, default_value_t = AccessTypeArg::Mount)]
    pub access_type: AccessTypeArg,

    /// Size of test volumes (bytes; 10Gi, 512Mi and the like are accepted).
    #[arg(long, value_name = "BYTES", default_value = "10Gi", value_parser = crate::units::parse_bytes)]
    pub test_volume_size: i64,

    /// Size to expand test volumes to (default: the volume size + 1 GiB).
    #[arg(long, value_name = "BYTES", value_parser = crate::units::parse_bytes)]
    pub test_volume_expand_size: Option<i64>,

    /// YAML map of CreateVolume parameters (csi-sanity's --csi.testvolumeparameters).
    #[arg(long, value_name = "FILE")]
    pub test_volume_parameters: Option<PathBuf>,

    /// YAML map of mutable parameters (default: iops: "3000"; none with --profile csi-sanity).
    #[arg(long, value_name = "FILE")]
    pub test_volume_mutable_parameters: Option<PathBuf>,

    /// YAML map of CreateSnapshot parameters.
    #[arg(long, value_name = "FILE")]
    pub test_snapshot_parameters: Option<PathBuf>,

    /// Secrets file in csi-sanity's format (CreateVolumeSecret: {...}, ...).
    #[arg(long, value_name = "FILE")]
    pub secrets: Option<PathBuf>,

    /// Also check that publishing beyond the node's max_volumes_per_node fails.
    #[arg(long)]
    pub test_node_volume_attach_limit: bool,

    /// How to inspect staging and target paths of node endpoints whose process cannot be
    /// found (tcp, or a unix socket served from outside this pid namespace): a shell command
    /// given the path as its argument, printing file, directory, not_found or other
    /// (csi-sanity's --csi.checkpathcmd). Unix sockets are inspected where the serving
    /// process sees its paths (its mount namespace).
    #[arg(long, value_name = "CMD")]
    pub check_path_cmd: Option<String>,

    /// The longest one --check-path-cmd call may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::units::parse_duration)]
    pub check_path_cmd_timeout: Duration,

    /// Whether staging and target mounts are verified: `auto` in the mount namespace of the
    /// process serving each node socket (skipped, with the reason, where it cannot be
    /// found); `off` skips every mount check (plugins that only pretend to mount).
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = ["auto", "off"])]
    pub mount_check: String,

    /// Enables the restart scenario: this shell command restarts the node plugin (it gets
    /// CSI_CONFORM_NODE_ENDPOINT, CSI_CONFORM_NODE_INDEX and CSI_CONFORM_NODE_ID) between
    /// NodeStageVolume and NodePublishVolume.
    #[arg(long, value_name = "CMD")]
    pub allow_restart_cmd: Option<String>,

    /// JUnit XML report.
    #[arg(long, value_name = "FILE", default_value = "reports/junit.xml")]
    pub junit: PathBuf,

    /// JSON report (for scripts and `report --compare`).
    #[arg(long, value_name = "FILE", default_value = "reports/report.json")]
    pub json: PathBuf,

    /// Self-contained HTML report.
    #[arg(long, value_name = "FILE", default_value = "reports/report.html")]
    pub html: PathBuf,

    /// YAML map of scenario id to reason: known failures that do not fail the run.
    #[arg(long, value_name = "FILE")]
    pub expect_failures: Option<PathBuf>,

    /// Warnings (tolerated deviations) fail the run too.
    #[arg(long)]
    pub strict: bool,

    /// Under GitHub Actions (GITHUB_ACTIONS=true), do not print the `::error` / `::warning`
    /// workflow commands that turn each finding into an annotation.
    #[arg(long)]
    pub no_annotations: bool,

    /// Seed of names and property-based checks (default: random; printed for replay).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Generated cases each property step checks (0 skips the property scenarios).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub property_cases: u32,

    /// The longest a property step whose cases create volumes keeps starting new cases
    /// (whichever of this and --property-cases comes first; 0: no time limit).
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = crate::units::parse_duration)]
    pub property_time: Duration,

    /// Test volumes that may exist at once across all running scenarios and property cases
    /// (cloud volume quotas; default: no limit of ours).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_live_volumes: Option<u32>,

    /// Bytes of test volumes that may exist at once (default: the plugin's GetCapacity
    /// available_capacity at the start, when it advertises GET_CAPACITY).
    #[arg(long, value_name = "BYTES", value_parser = parse_positive_bytes)]
    pub max_live_bytes: Option<i64>,

    /// How long a call the plugin answers RESOURCE_EXHAUSTED (or ABORTED "operation
    /// pending") is retried, after a release, while other scenarios of the run hold resources
    /// on it.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = crate::units::parse_duration)]
    pub contention_timeout: Duration,

    /// YAML bounds of the capabilities property steps generate (access_types, access_modes,
    /// fs_types, mount_flags, volume_mount_groups, max_capabilities; see suites/README.md).
    #[arg(long, value_name = "FILE")]
    pub property_bounds: Option<PathBuf>,

    /// The longest the whole run may take; scenarios not started by then are not run, and
    /// those in flight get --cleanup-timeout to finish and tear down.
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub run_timeout: Option<Duration>,

    /// After SIGINT/SIGTERM (or --run-timeout), how long teardown may take; what is not torn
    /// down by then stays in the journal for `csi-conform cleanup`.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_positive_duration)]
    pub cleanup_timeout: Duration,

    /// How often to try a plugin again (with doubling waits from 500ms) after the connection
    /// to it is lost; when it stays gone, its remaining scenarios are errors.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub reconnect_attempts: u32,

    /// Directory under which each scenario gets its staging and target paths.
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,

    /// The cleanup journal: every created resource is recorded here until torn down.
    #[arg(long, value_name = "FILE", default_value = "reports/journal.jsonl")]
    pub journal: PathBuf,

    /// Clean up what an earlier run left in the journal before starting.
    #[arg(long)]
    pub cleanup_first: bool,

    /// Where target and staging paths go, and how they are made.
    #[command(flatten)]
    pub paths: PathArgs,

    /// Volumes the run did not create (the `existing` suite).
    #[command(flatten)]
    pub existing: ExistingArgs,
}

/// `--existing-volume` and its companions.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Existing (pre-provisioned) volumes")]
pub struct ExistingArgs {
    /// A volume the run did not create, by id: the `existing` suite stages and publishes it
    /// as a CO does (never deletes, expands, modifies or snapshots it). More go in the
    /// --config file's `existing-volumes:` list.
    #[arg(long, value_name = "ID")]
    pub existing_volume: Option<String>,

    /// YAML map: the volume_context a CO passes with --existing-volume.
    #[arg(long, value_name = "FILE", requires = "existing_volume")]
    pub existing_volume_context: Option<PathBuf>,

    /// How --existing-volume is used: `mount` or `block`, `fs_type=T`, `mount_flags=a+b`,
    /// `mode=MODE` (comma-separated; e.g. `mount,fs_type=ext4,mode=SINGLE_NODE_WRITER`).
    /// Default: the run's (--access-type, SINGLE_NODE_WRITER).
    #[arg(long, value_name = "SPEC", requires = "existing_volume")]
    pub existing_volume_capability: Option<String>,

    /// The run may write to the existing volumes (write probes, data checks). Without it
    /// nothing is ever written to them.
    #[arg(long)]
    pub existing_volume_writable: bool,
}

impl ExistingArgs {
    /// The existing volumes of the command line and of the settings file `config`.
    fn volumes(&self, config: Option<&Path>) -> Result<Vec<suite::ExistingVolume>, CliError> {
        let mut volumes = Vec::new();
        if let Some(id) = &self.existing_volume {
            if id.is_empty() {
                return Err(CliError::usage("--existing-volume is empty; give the volume's id"));
            }
            let mut volume = suite::ExistingVolume { id: id.clone(), origin: "--existing-volume".into(), ..Default::default() };
            if let Some(file) = &self.existing_volume_context {
                volume.context = crate::config::load_string_map(file).map_err(CliError::usage)?;
            }
            if let Some(spec) = &self.existing_volume_capability {
                volume.capability = suite::ExistingCapability::parse(spec)
                    .map_err(|e| CliError::usage(format!("--existing-volume-capability {spec:?}: {e}")))?;
            }
            volumes.push(volume);
        }
        if let Some(file) = config {
            for volume in crate::config::load_existing_volumes(file).map_err(CliError::usage)? {
                if volumes.iter().any(|v| v.id == volume.id) {
                    return Err(CliError::usage(format!(
                        "{}: volume {:?} is also given with --existing-volume",
                        volume.origin, volume.id
                    )));
                }
                volumes.push(volume);
            }
        }
        Ok(volumes)
    }
}

const RUN_HELP: &str = "\
Examples:
  csi-conform run --endpoint unix:///run/csi/csi.sock --secrets secrets.yaml
  csi-conform run --controller-endpoint /run/ctrl.sock --node-endpoint /run/node-a.sock \\
      --node-endpoint tcp://10.0.0.2:10000
  csi-conform run --config csi-conform.yaml --focus '^node\\.'
  csi-conform --csi.endpoint=/tmp/csi.sock --ginkgo.skip=pagination   (csi-sanity's flags)

Output: one line per scenario as it finishes (a progress bar on a terminal; plain lines when
not a terminal or CI is set; none with -q), then a summary listing every failure with its
reason and a command that reruns it alone. Reports: --junit, --json, --html.";

/// `--access-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AccessTypeArg {
    /// A mounted file system.
    Mount,
    /// A raw block device.
    Block,
}

/// `csi-conform list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Which suites.
    #[command(flatten)]
    pub suites: SuiteArgs,

    /// Show which scenarios cover each csi-sanity check (and any that none covers).
    #[arg(long, conflicts_with = "checks")]
    pub parity: bool,

    /// List the named checks and properties suites can call.
    #[arg(long)]
    pub checks: bool,

    /// Show the coverage of CSI v1.12's requirements on a plugin: per RPC, requirements
    /// total / covered by a scenario / untestable / gaps, and overall (exit 1 when a
    /// requirement is neither covered nor explained).
    #[arg(long, conflicts_with_all = ["checks", "parity"])]
    pub spec: bool,

    /// With --spec: also list every requirement, its spec link and the scenarios naming it.
    #[arg(long, requires = "spec")]
    pub requirements: bool,

    /// With --spec: table (default) or json.
    #[arg(long, value_enum, default_value_t = Format::Table, requires = "spec")]
    pub format: Format,
}

/// `csi-conform call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// The RPC's method name (CreateVolume, NodeGetInfo, ...).
    pub rpc: String,

    /// The plugin.
    #[command(flatten)]
    pub connect: ConnectArgs,

    /// The request as YAML with proto field names, or `-` to read it from stdin.
    #[arg(long, value_name = "YAML")]
    pub request: Option<String>,

    /// For node RPCs: which --node-endpoint (0 is the first).
    #[arg(long, default_value_t = 0)]
    pub node: usize,
}

/// `csi-conform cleanup`.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// The journal of the runs to clean up after.
    #[arg(long, value_name = "FILE", default_value = "reports/journal.jsonl")]
    pub journal: PathBuf,

    /// The secrets file the runs used (undo calls send the secrets their creation sent).
    #[arg(long, value_name = "FILE")]
    pub secrets: Option<PathBuf>,

    /// Connection limits; endpoints given here restrict the cleanup to those endpoints
    /// (default: every endpoint the journal names).
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// How to reach the plugin under test.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// The plugin's endpoint, for every role: unix:///abs/path, unix:rel/path, a bare path,
    /// tcp://host:port or dns:///host:port.
    #[arg(long, env = "CSI_ENDPOINT", value_name = "ENDPOINT")]
    pub endpoint: Option<Endpoint>,

    /// A separate controller endpoint (overrides --endpoint for the controller role).
    #[arg(long, value_name = "ENDPOINT")]
    pub controller_endpoint: Option<Endpoint>,

    /// A node plugin endpoint; repeat for several nodes (overrides --endpoint for the node role).
    #[arg(long = "node-endpoint", value_name = "ENDPOINT")]
    pub node_endpoints: Vec<Endpoint>,

    /// How long to wait for the socket, the server and a ready Probe.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_positive_duration)]
    pub connect_timeout: Duration,

    /// The deadline of every RPC: a call not answered by then fails its scenario.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_positive_duration)]
    pub rpc_timeout: Duration,

    /// The largest response message accepted from the plugin (bytes; 4Mi, 64Ki and the like
    /// are accepted); a larger answer is a finding.
    #[arg(long, value_name = "BYTES", default_value = "4Mi", value_parser = parse_message_size)]
    pub max_message_size: usize,
}

/// A duration above zero (`--rpc-timeout 0` would fail every call).
/// A byte count above zero.
fn parse_positive_bytes(text: &str) -> Result<i64, String> {
    let n = crate::units::parse_bytes(text)?;
    if n > 0 { Ok(n) } else { Err("must be more than 0 bytes".to_owned()) }
}

fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    let d = crate::units::parse_duration(text)?;
    if d.is_zero() { Err("must be more than 0".to_owned()) } else { Ok(d) }
}

/// A message size limit: a byte count above zero.
fn parse_message_size(text: &str) -> Result<usize, String> {
    let n = crate::units::parse_bytes(text)?;
    usize::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| "must be more than 0 bytes".to_owned())
}

impl ConnectArgs {
    /// The endpoints by role.
    pub fn targets(&self) -> Targets {
        Targets::resolve(
            self.endpoint.clone(),
            self.controller_endpoint.clone(),
            self.node_endpoints.clone(),
        )
    }

    /// The client limits.
    pub fn client_options(&self) -> ClientOptions {
        ClientOptions {
            connect_timeout: self.connect_timeout,
            rpc_timeout: self.rpc_timeout,
            max_message_size: self.max_message_size,
        }
    }
}

/// Output format of `fingerprint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// An aligned, readable table.
    Table,
    /// JSON, for scripts.
    Json,
}

/// `csi-conform fingerprint`.
#[derive(Debug, Args)]
pub struct FingerprintArgs {
    /// The plugin.
    #[command(flatten)]
    pub connect: ConnectArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// An error at the command line's edge: what to print, and the exit code.
#[derive(Debug)]
pub struct CliError {
    /// The message, already readable.
    pub message: String,
    /// The process exit code.
    pub code: u8,
}

impl CliError {
    /// A usage, configuration or connection error (exit code 2).
    pub fn usage(message: impl std::fmt::Display) -> Self {
        CliError {
            message: message.to_string(),
            code: EXIT_USAGE,
        }
    }
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

/// Logs go to stderr through `scrubber`. `-v`s raise csi-conform's own level; the transport
/// crates (tonic, h2, hyper, tower) stay at `debug` at most, as their trace output is frame
/// by frame: `RUST_LOG` overrides everything, and even then every line is scrubbed.
fn init_logging(verbose: u8, quiet: bool, scrubber: &Scrubber) {
    use tracing_subscriber::EnvFilter;
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "warn,csi_conform=info",
        (false, 2) => "info,csi_conform=debug",
        (false, _) => "debug,csi_conform=trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // Scrubbed first, then written past the progress bar (which lifts itself for the line).
    let log_scrubber = scrubber.clone();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || crate::scrub::ScrubbingWriter::new(log_scrubber.clone(), progress::log_writer()))
        .with_ansi(progress::color_for(std::io::IsTerminal::is_terminal(&std::io::stderr())))
        .with_target(false)
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
/// adds for its one scenario) and output verbosity: the program as invoked, `run`, then each
/// flag given on the command line (or by CSI_ENDPOINT) with its values, quoted for a shell.
/// Flags that came from `--config` stay in the file, which the rerun names again.
fn rerun_base(args: &[String], run_command: &clap::Command, run: &clap::ArgMatches, from_file: &BTreeSet<String>) -> String {
    let program = args.first().map_or("csi-conform", String::as_str);
    let mut words = vec![report::shell_word(program), "run".to_owned()];
    for arg in run_command.get_arguments() {
        let id = arg.get_id().as_str();
        let (Some(long), false) = (arg.get_long(), matches!(id, "focus" | "skip" | "seed" | "verbose" | "quiet")) else {
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

async fn dispatch(cli: Cli, rerun: Option<String>, scrubber: &Scrubber) -> Result<u8, CliError> {
    match cli.command {
        Command::Fingerprint(args) => fingerprint(args).await,
        Command::Run(args) => run(*args, cli.quiet, rerun.unwrap_or_else(|| "csi-conform run".to_owned()), scrubber).await,
        Command::Report(args) => report_command(&args),
        Command::List(args) => list(args),
        Command::Suites(SuitesCommand::Check { files }) => suites_check(&files),
        Command::Call(args) => call(args, scrubber).await,
        Command::Cleanup(args) => cleanup(args, scrubber).await,
        Command::ReferencePlugin(args) => crate::reference::run(args)
            .await
            .map(|()| EXIT_OK)
            .map_err(CliError::usage),
    }
}

const NO_ENDPOINT: &str =
    "no plugin endpoint: give --endpoint (or --controller-endpoint / --node-endpoint, or CSI_ENDPOINT)";

/// Connects every role and fingerprints the plugin.
async fn connect_and_fingerprint(targets: &Targets, options: &ClientOptions) -> Result<(Connections, Fingerprint), CliError> {
    let connections = targets.connect(options).await.map_err(CliError::usage)?;
    let fingerprint = Fingerprint::collect(connections.controller.as_ref(), &connections.nodes)
        .await
        .map_err(CliError::usage)?;
    Ok((connections, fingerprint))
}

async fn fingerprint(args: FingerprintArgs) -> Result<u8, CliError> {
    let targets = args.connect.targets();
    if targets.is_empty() {
        return Err(CliError::usage(NO_ENDPOINT));
    }
    let (_, fingerprint) = connect_and_fingerprint(&targets, &args.connect.client_options()).await?;
    match args.format {
        Format::Table => print!("{}", fingerprint.to_table()),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&fingerprint).map_err(CliError::usage)?
        ),
    }
    Ok(EXIT_OK)
}

fn load_map(file: &Option<PathBuf>) -> Result<Option<BTreeMap<String, String>>, CliError> {
    file.as_deref().map(crate::config::load_string_map).transpose().map_err(CliError::usage)
}

/// Reads a secrets file (its values join `scrubber` at once) and warns when other users can
/// read it.
fn load_secrets(file: &Path, scrubber: &Scrubber) -> Result<BTreeMap<String, BTreeMap<String, String>>, CliError> {
    use std::os::unix::fs::PermissionsExt;
    let secrets = Secrets::load(file).map_err(CliError::usage)?;
    scrubber.add(secrets.keys().filter_map(|k| secrets.get(k)).flat_map(|m| m.values()));
    if let Ok(meta) = std::fs::metadata(file)
        && meta.permissions().mode() & 0o004 != 0
    {
        tracing::warn!(
            "{} is readable by every user on this machine; secrets files should be private (chmod 600)",
            file.display()
        );
    }
    Ok(secrets.keys().map(|k| (k.to_string(), secrets.get(k).cloned().unwrap_or_default())).collect())
}

fn regexes(patterns: &[String], flag: &str) -> Result<Vec<regex::Regex>, CliError> {
    patterns
        .iter()
        .map(|p| regex::Regex::new(p).map_err(|e| CliError::usage(format!("{flag} {p:?} is not a valid regex: {e}"))))
        .collect()
}

/// Builds the engine's configuration from the command line, reading every file it names.
/// Everything is checked here, before any connection is made.
fn run_config(args: &RunArgs, scrubber: &Scrubber) -> Result<suite::RunConfig, CliError> {
    let mut config = suite::RunConfig {
        jobs: usize::from(args.jobs),
        idempotency_count: args.idempotency_count,
        access_type: match args.access_type {
            AccessTypeArg::Mount => AccessType::Mount,
            AccessTypeArg::Block => AccessType::Block,
        },
        volume_size: args.test_volume_size,
        expand_size: args.test_volume_expand_size,
        profile: args.profile,
        mutable_parameters: args.profile.default_mutable_parameters(),
        focus: regexes(&args.focus, "--focus")?,
        skip: regexes(&args.skip, "--skip")?,
        strict: args.strict,
        seed: args.seed.unwrap_or_else(random_seed),
        property_cases: args.property_cases,
        property_time: args.property_time,
        budgets: suite::BudgetConfig {
            max_live_volumes: args.max_live_volumes,
            max_live_bytes: args.max_live_bytes,
            contention_timeout: args.contention_timeout,
        },
        replay_command: Some(replay_command(std::env::args())),
        timeout: args.run_timeout,
        cleanup_timeout: args.cleanup_timeout,
        reconnect: suite::Reconnect { attempts: args.reconnect_attempts, ..suite::Reconnect::default() },
        scrubber: scrubber.clone(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        ..suite::RunConfig::default()
    };
    if config.volume_size <= 0 {
        return Err(CliError::usage("--test-volume-size must be more than 0 bytes"));
    }
    if let Some(expand) = config.expand_size
        && expand < config.volume_size
    {
        return Err(CliError::usage(format!(
            "--test-volume-expand-size ({expand}) is smaller than --test-volume-size ({}); expansion only grows",
            config.volume_size
        )));
    }
    if let Some(map) = load_map(&args.test_volume_parameters)? {
        config.parameters = map;
    }
    if let Some(map) = load_map(&args.test_volume_mutable_parameters)? {
        config.mutable_parameters = map;
    }
    if let Some(map) = load_map(&args.test_snapshot_parameters)? {
        config.snapshot_parameters = map;
    }
    if let Some(file) = &args.secrets {
        config.secrets = load_secrets(file, scrubber)?;
    }
    if args.test_node_volume_attach_limit {
        config.options.insert("attach_limit".to_owned());
    }
    if let Some(command) = &args.check_path_cmd {
        if command.trim().is_empty() {
            return Err(CliError::usage("--check-path-cmd is empty"));
        }
        config.check_path_cmd =
            Some(suite::PathCommand { command: command.clone(), timeout: args.check_path_cmd_timeout });
    }
    config.mount_check = args.mount_check.parse().map_err(CliError::usage)?;
    if let Some(command) = &args.allow_restart_cmd {
        if command.trim().is_empty() {
            return Err(CliError::usage("--allow-restart-cmd is empty"));
        }
        config.restart_cmd = Some(command.clone());
        config.options.insert("restart".to_owned());
    }
    if let Some(dir) = &args.work_dir {
        // Staging and target paths go to the plugin, which needs them absolute.
        config.work_dir = std::path::absolute(dir)
            .map_err(|e| CliError::usage(format!("--work-dir {}: {e}", dir.display())))?;
    }
    if let Some(file) = &args.property_bounds {
        config.property_bounds = crate::config::load_bounds(file).map_err(CliError::usage)?;
    }
    config.paths = args.paths.settings();
    config.existing_volumes = args.existing.volumes(args.config.as_deref())?;
    config.existing_writable = args.existing.existing_volume_writable;
    Ok(config)
}

/// The command line of this run as a shell command, without the options a replay sets
/// itself (`--seed`, `--focus`, `--skip`): the start of the replay command of a property
/// failure.
fn replay_command(args: impl IntoIterator<Item = String>) -> String {
    let mut out = vec!["csi-conform".to_owned()];
    let mut args = args.into_iter().skip(1);
    while let Some(arg) = args.next() {
        let name = arg.split('=').next().unwrap_or_default();
        if matches!(name, "--seed" | "--focus" | "--skip") {
            if !arg.contains('=') {
                args.next();
            }
            continue;
        }
        out.push(shell_quote(&arg));
    }
    out.join(" ")
}

/// `text` as one shell word.
fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
    if plain { text.to_owned() } else { format!("'{}'", text.replace('\'', "'\\''")) }
}

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// The reference plugins started for a run that names no endpoint.
struct LocalReference {
    handles: Vec<crate::reference::ReferenceHandle>,
    /// Sockets and state; removed when the run ends.
    dir: tempfile::TempDir,
}

impl LocalReference {
    async fn shutdown(self) {
        for handle in self.handles {
            if let Err(e) = handle.shutdown().await {
                tracing::warn!("the reference plugin did not stop cleanly: {e}");
            }
        }
    }
}

/// How many node plugins a run without an endpoint gets: enough for the two-node scenarios.
const REFERENCE_NODES: usize = 2;

/// Starts the bundled reference plugin as an orchestrator would see a small cluster: one
/// controller (which is also node 1) and a second node plugin, sharing a temporary state
/// directory. Returns the plugins and the endpoints by role.
async fn start_reference() -> Result<(LocalReference, Targets), CliError> {
    let dir = tempfile::Builder::new()
        .prefix("csi-conform-reference-")
        .tempdir()
        .map_err(|e| CliError::usage(format!("cannot make a directory for the reference plugin: {e}")))?;
    let state_dir = dir.path().join("state");
    let mut local = LocalReference { handles: Vec::new(), dir };
    let mut nodes = Vec::new();
    for n in 1..=REFERENCE_NODES {
        let socket = if n == 1 { "csi.sock".to_owned() } else { format!("node-{n}.sock") };
        let endpoint = Endpoint::Unix(local.dir.path().join(socket));
        let config = crate::reference::Config {
            node_id: format!("csi-conform-node-{n}"),
            mode: if n == 1 { crate::reference::Mode::All } else { crate::reference::Mode::NodeOnly },
            state_dir: Some(state_dir.clone()),
            ..crate::reference::Config::default()
        };
        match crate::reference::spawn(config, &endpoint.to_string()).await {
            Ok(handle) => local.handles.push(handle),
            Err(e) => {
                local.shutdown().await;
                return Err(CliError::usage(e));
            }
        }
        nodes.push(endpoint);
    }
    let targets = Targets::resolve(None, nodes.first().cloned(), nodes);
    Ok((local, targets))
}

/// SIGINT and SIGTERM, caught from the moment this is made (so that no signal arriving while
/// the run starts up kills it with resources half-made).
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn catch() -> Result<Self, CliError> {
        use tokio::signal::unix::{SignalKind, signal};
        let catch = |kind| signal(kind).map_err(|e| CliError::usage(format!("cannot catch signals: {e}")));
        Ok(Signals { int: catch(SignalKind::interrupt())?, term: catch(SignalKind::terminate())? })
    }
}

/// Resolves when the first SIGINT or SIGTERM arrives, with the reason and the exit code it
/// calls for (130 or 143). A second signal ends the process at once, leaving the journal
/// for `csi-conform cleanup`.
async fn first_signal(signals: Signals) -> (String, u8) {
    let Signals { mut int, mut term } = signals;
    let first = tokio::select! {
        _ = int.recv() => ("interrupted by SIGINT".to_owned(), 130u8),
        _ = term.recv() => ("interrupted by SIGTERM".to_owned(), 143u8),
    };
    eprintln!("{}: stopping; tearing down what was created (signal again to stop at once)", first.0);
    tokio::spawn(async move {
        let code = tokio::select! {
            _ = int.recv() => 130,
            _ = term.recv() => 143,
        };
        eprintln!("stopped at once; what is left is in the journal: run `csi-conform cleanup`");
        std::process::exit(code);
    });
    first
}

async fn run(args: RunArgs, quiet: bool, rerun: String, scrubber: &Scrubber) -> Result<u8, CliError> {
    // Everything the run reads is checked before anything is started or connected.
    let mut config = run_config(&args, scrubber)?;
    let suites = args.suites.load()?;
    let expected = args
        .expect_failures
        .as_deref()
        .map(ExpectedFailures::load)
        .transpose()
        .map_err(CliError::usage)?;

    let mut targets = args.connect.targets();
    let mut local = None;
    if targets.is_empty() {
        let (reference, started) = start_reference().await?;
        let nodes: Vec<String> = started.nodes.iter().map(ToString::to_string).collect();
        eprintln!("no --endpoint: testing the bundled reference plugin (controller and {} nodes: {})", nodes.len(), nodes.join(", "));
        targets = started;
        local = Some(reference);
    }

    if config.check_path_cmd.is_none() {
        for (i, node) in targets.nodes.iter().enumerate().filter(|(_, e)| !e.is_local()) {
            tracing::warn!(
                "node endpoint {i} ({node}) is not on this host: its staging and target paths and mounts \
                 cannot be checked (give --check-path-cmd to check the paths)"
            );
        }
    }

    let endpoints: Vec<String> = targets.distinct().iter().map(ToString::to_string).collect();
    let leftovers = leftovers_on(&args.journal, &endpoints)?;
    if !leftovers.is_empty() && !args.cleanup_first {
        return Err(CliError::usage(format!(
            "{} lists {} resource(s) an earlier run may have left on this plugin; run `csi-conform cleanup --journal {}` or pass --cleanup-first",
            args.journal.display(),
            leftovers.len(),
            args.journal.display()
        )));
    }

    let signals = Signals::catch()?;
    let options = args.connect.client_options();
    let (connections, fingerprint) = connect_and_fingerprint(&targets, &options).await?;
    if !leftovers.is_empty() {
        let cleaned = crate::cleanup::undo(&args.journal, &leftovers, &connections, &config.secrets).await;
        eprint!("{}", scrubber.scrub(&cleaned.to_string()));
        if !cleaned.is_complete() {
            return Err(CliError::usage(format!(
                "--cleanup-first could not undo everything {} lists; not starting",
                args.journal.display()
            )));
        }
    }

    // Unique per process, so that replays with the same --seed never share journal ids.
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let run_id = format!("{:016x}-{}-{}", config.seed, std::process::id(), started.as_millis());
    let journal = Journal::open(&args.journal, &run_id).map_err(CliError::usage)?;
    let observer = Arc::new(JournalObserver::new(
        journal,
        targets.controller.as_ref().map(ToString::to_string),
        targets.nodes.iter().map(ToString::to_string).collect(),
    ));
    config.observer = Some(observer.clone());

    let color = progress::color_for(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let console = ConsoleProgress::new(Mode::detect(quiet), color, args.strict, expected.clone());
    config.progress = Some(console.clone());

    // An endpoint that advertises CONTROLLER_SERVICE without serving it (a node instance of a
    // split deployment, see `Fingerprint::collect`) is no controller for this run.
    let serves_controller = fingerprint.controller.is_some()
        || !fingerprint.supports(Capability::Plugin(PluginService::ControllerService));
    let plugin = suite::Plugin {
        controller: connections.controller.filter(|_| serves_controller),
        nodes: connections.nodes,
        fingerprint,
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<(String, u8)>();
    let signals = tokio::spawn(async move {
        let _ = stop_tx.send(first_signal(signals).await);
    });
    let interrupted = Arc::new(std::sync::Mutex::new(None::<u8>));
    let seen = interrupted.clone();
    let stop = async move {
        match stop_rx.await {
            Ok((reason, code)) => {
                *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(code);
                reason
            }
            Err(_) => std::future::pending().await,
        }
    };
    let mut report: RunReport = suite::run_until(&plugin, &suites, &config, stop).await;
    signals.abort();
    console.finish();
    // The run has written its last record: keep only what is outstanding.
    if let Err(e) = observer.journal().compact() {
        eprintln!("warning: {}", scrubber.scrub(&e.to_string()));
    }

    if let Some(expected) = &expected {
        for id in expected.apply(&mut report) {
            tracing::warn!("--expect-failures lists {id}, which this run did not include");
        }
    }
    write_all_reports(&report, &args)?;
    if !quiet {
        println!();
    }
    print!("{}", report::summary_with_command(&report, color, &rerun));
    if report::annotations::enabled(std::env::var("GITHUB_ACTIONS").ok().as_deref(), args.no_annotations) {
        for line in report::annotations::annotations(&report) {
            println!("{line}");
        }
    }
    let left = leftovers_on(&args.journal, &endpoints)?.len();
    if left > 0 {
        eprintln!(
            "warning: {} lists {left} resource(s) or unanswered call(s) this run left on the plugin; undo them with `csi-conform cleanup --journal {}`",
            args.journal.display(),
            args.journal.display()
        );
    }
    if let Some(local) = local {
        local.shutdown().await;
    }
    let signal_code = *interrupted.lock().unwrap_or_else(|p| p.into_inner());
    Ok(match signal_code {
        Some(code) => code,
        None if report.failed() => EXIT_FINDINGS,
        None => EXIT_OK,
    })
}

/// What the journal at `path` still lists on any of `endpoints`.
fn leftovers_on(path: &Path, endpoints: &[String]) -> Result<Vec<(String, journal::Outstanding)>, CliError> {
    let all = journal::outstanding(path).map_err(CliError::usage)?;
    Ok(all.into_iter().filter(|(_, r)| endpoints.iter().any(|e| e == r.endpoint())).collect())
}

fn write_all_reports(report: &RunReport, args: &RunArgs) -> Result<(), CliError> {
    report::write_reports(report, Some(&args.junit), Some(&args.json)).map_err(CliError::usage)?;
    report::write_atomically(&args.html, &report::html::to_html(report)).map_err(CliError::usage)
}

/// `report --compare OLD NEW`: exit 1 when NEW has new failures.
fn report_command(args: &ReportArgs) -> Result<u8, CliError> {
    let read = |path: &Path| -> Result<RunReport, CliError> {
        let text = std::fs::read_to_string(path).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
        report::from_json(&text).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))
    };
    let [old_path, new_path] = args.compare.as_slice() else {
        return Err(CliError::usage("--compare takes two JSON reports: OLD NEW"));
    };
    let (old, new) = (read(old_path)?, read(new_path)?);
    for (label, path, r) in [("old", old_path, &old), ("new", new_path, &new)] {
        let c = r.counts();
        println!(
            "{label}: {} ({} {}, {}, seed {}): {} passed, {} failed, {} warned, {} skipped, {} errored",
            path.display(),
            r.plugin_name,
            r.plugin_version,
            r.started_at,
            r.seed,
            c.pass,
            c.fail,
            c.warn,
            c.skip,
            c.error
        );
    }
    let comparison = report::compare::compare(&old, &new);
    print!("{}", comparison.render());
    Ok(if comparison.has_regressions() { EXIT_FINDINGS } else { EXIT_OK })
}

fn list(args: ListArgs) -> Result<u8, CliError> {
    if args.checks {
        for (name, description) in suite::checks() {
            println!("{name:<20} {description}");
        }
        println!("\nProperties (`property:` steps):");
        for p in suite::properties() {
            println!("{:<20} {}", p.name, p.description);
        }
        return Ok(EXIT_OK);
    }
    let suites = args.suites.load()?;
    if args.spec {
        let pairs: Vec<(&str, &[String])> =
            suites.iter().flat_map(|s| s.scenarios()).map(|sc| (sc.id(), sc.spec())).collect();
        let coverage = crate::spec::coverage(crate::spec::builtin(), pairs);
        match args.format {
            Format::Json => println!(
                "{}",
                serde_json::to_string_pretty(&coverage.to_json()).map_err(|e| CliError::usage(e.to_string()))?
            ),
            Format::Table => print!("{}", coverage.render(args.requirements)),
        }
        return Ok(if coverage.unaccounted().is_empty() { EXIT_OK } else { EXIT_FINDINGS });
    }
    if args.parity {
        let table = crate::parity::coverage(&suites).map_err(CliError::usage)?;
        print!("{}", table.render());
        return Ok(if table.uncovered().is_empty() { EXIT_OK } else { EXIT_FINDINGS });
    }
    for s in &suites {
        println!("{}  {}  ({} scenarios, {})", s.id(), s.title(), s.scenarios().len(), s.source());
        for sc in s.scenarios() {
            println!("  {:<56} {}", sc.id(), sc.title());
        }
    }
    Ok(EXIT_OK)
}

fn suites_check(files: &[PathBuf]) -> Result<u8, CliError> {
    let mut suites = suite::builtin();
    let mut errors = Vec::new();
    for file in files {
        match suite::load_file(file) {
            Ok(s) => {
                println!("ok: {} ({} scenarios)", file.display(), s.scenarios().len());
                suites.push(s);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    if let Err(e) = suite::check_unique(&suites) {
        errors.push(e.to_string());
    }
    if errors.is_empty() { Ok(EXIT_OK) } else { Err(CliError::usage(errors.join("\n"))) }
}

async fn call(args: CallArgs, scrubber: &Scrubber) -> Result<u8, CliError> {
    let method = crate::proto::method(&args.rpc).ok_or_else(|| {
        CliError::usage(format!("unknown RPC {:?}; CSI RPCs are method names like CreateVolume or NodeGetInfo", args.rpc))
    })?;
    let text = match args.request.as_deref() {
        None => "{}".to_owned(),
        Some("-") => std::io::read_to_string(std::io::stdin()).map_err(|e| CliError::usage(format!("reading the request from stdin: {e}")))?,
        Some(text) => text.to_owned(),
    };
    let template = suite::parse_request("<request>", &text).map_err(CliError::usage)?;
    let request = suite::build_request(&method, &template, &suite::Vars::new()).map_err(CliError::usage)?;
    scrubber.add(crate::proto::sensitive_values(&request));
    let targets = args.connect.targets();
    if targets.is_empty() {
        return Err(CliError::usage(NO_ENDPOINT));
    }
    let connections = targets.connect(&args.connect.client_options()).await.map_err(CliError::usage)?;
    let conn = if method.parent_service().name() == "Node" {
        connections.nodes.get(args.node).ok_or_else(|| CliError::usage(format!("there is no node endpoint {}", args.node)))?
    } else {
        connections.controller.as_ref().or(connections.nodes.first()).ok_or_else(|| CliError::usage(NO_ENDPOINT))?
    };
    let outcome = if method.is_server_streaming() {
        conn.call_dynamic_streaming(&method, request).await.map(|messages| {
            messages.iter().map(crate::proto::to_redacted_yaml).collect::<Vec<_>>().join("---\n")
        })
    } else {
        conn.call_dynamic(&method, request).await.map(|m| crate::proto::to_redacted_yaml(&m))
    };
    match outcome {
        Ok(yaml) => {
            print!("{yaml}");
            Ok(EXIT_OK)
        }
        Err(e) => {
            eprintln!("{}", scrubber.scrub(&e.to_string()));
            Ok(EXIT_FINDINGS)
        }
    }
}

async fn cleanup(args: CleanupArgs, scrubber: &Scrubber) -> Result<u8, CliError> {
    let secrets = match &args.secrets {
        Some(file) => load_secrets(file, scrubber)?,
        None => BTreeMap::new(),
    };
    if !args.journal.exists() {
        println!("cleanup: nothing to do: there is no journal at {}", args.journal.display());
        return Ok(EXIT_OK);
    }
    let endpoints: Vec<String> = args.connect.targets().distinct().iter().map(ToString::to_string).collect();
    let outcome = crate::cleanup::cleanup(&args.journal, &endpoints, &args.connect.client_options(), &secrets)
        .await
        .map_err(CliError::usage)?;
    print!("{}", scrubber.scrub(&outcome.to_string()));
    if let Err(e) = journal::compact(&args.journal) {
        eprintln!("warning: {}", scrubber.scrub(&e.to_string()));
    }
    Ok(if outcome.is_complete() { EXIT_OK } else { EXIT_FINDINGS })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_command_keeps_the_run_but_not_its_selection_or_seed() {
        let args = ["/usr/bin/csi-conform", "run", "--endpoint", "/run/csi.sock", "--seed", "5", "--focus=x", "--skip", "y", "--suite", "my suite.yaml"];
        assert_eq!(
            replay_command(args.iter().map(|s| s.to_string())),
            "csi-conform run --endpoint /run/csi.sock --suite 'my suite.yaml'"
        );
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    /// The budget flags, from the command line and from a settings file, reach the engine.
    #[test]
    fn budget_flags_and_their_settings_reach_the_run_config() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nightly.yaml");
        std::fs::write(&file, "max-live-volumes: 10\nmax-live-bytes: 50Gi\nproperty-time: 2m\ncontention-timeout: 10m\n").unwrap();
        let args: Vec<String> = ["csi-conform", "run", "--config", file.to_str().unwrap(), "--property-time", "0"]
            .iter()
            .map(ToString::to_string)
            .collect();
        let Ok((cli, _)) = parse(&args) else { panic!("the settings parse") };
        let Command::Run(run) = cli.command else { panic!("a run") };
        let config = run_config(&run, &Scrubber::new()).unwrap();
        assert_eq!(config.budgets.max_live_volumes, Some(10));
        assert_eq!(config.budgets.max_live_bytes, Some(50 << 30));
        assert_eq!(config.budgets.contention_timeout, Duration::from_secs(600));
        assert_eq!(config.property_time, Duration::ZERO, "the command line wins");
        let Ok((Cli { command: Command::Run(plain), .. }, _)) = parse(&["csi-conform".to_owned(), "run".to_owned()]) else {
            panic!("a plain run parses")
        };
        let defaults = run_config(&plain, &Scrubber::new()).unwrap();
        assert_eq!(defaults.budgets, suite::BudgetConfig::default());
        assert_eq!(defaults.property_time, suite::DEFAULT_PROPERTY_TIME);
        for bad in [["--max-live-bytes", "0"], ["--max-live-volumes", "0"]] {
            let args: Vec<String> = ["csi-conform", "run", bad[0], bad[1]].iter().map(ToString::to_string).collect();
            assert!(matches!(parse(&args), Err(Parsed::Clap(_))), "{bad:?}");
        }
    }
}
