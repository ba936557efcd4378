//! The subcommands' argument types: suites, paths, run settings, connection, listing, calls and cleanup.

use super::*;

/// Which suites to use.
#[derive(Debug, Clone, Args)]
pub struct SuiteArgs {
    /// A suite file of your own, or the name of an opt-in built-in suite (`stress`,
    /// `disruption`; never run otherwise); repeatable. Added to the built-in suites. (The
    /// value name stays FILE: a settings file's relative FILE values are resolved against it.)
    #[arg(help_heading = "Selection", long = "suite", value_name = "FILE")]
    pub suites: Vec<PathBuf>,

    /// Leave out the built-in suites (only the --suite files run).
    #[arg(help_heading = "Selection", long)]
    pub no_builtin: bool,
}

impl SuiteArgs {
    /// The built-in suites (unless left out) and the given files, checked for duplicate ids.
    pub fn load(&self) -> Result<Vec<Suite>, CliError> {
        let mut suites = if self.no_builtin { Vec::new() } else { suite::builtin() };
        let mut errors = Vec::new();
        for file in &self.suites {
            // A name of an opt-in built-in suite, unless a file of that name is there (by its
            // last component: a settings file's relative values come resolved against it).
            let name = file.file_name().and_then(|n| n.to_str()).filter(|_| !file.exists());
            let opt_in = name.and_then(suite::opt_in_suite);
            match opt_in.unwrap_or_else(|| suite::load_file(file)) {
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
    /// failures, fixed scenarios, coverage lost (now skipped) and gained (no longer skipped),
    /// scenarios that appeared or went away, and RPCs whose median latency moved by more than
    /// 1.5x and 5 ms. Exit code 1 when the newer run has new failures (a nightly job fails on
    /// regressions only), 0 otherwise. Two bench reports (`bench --json`) are compared level
    /// by level: exit 1 when a p99 or the throughput regressed past both thresholds below.
    #[arg(long, num_args = 2, required = true, value_names = ["OLD", "NEW"])]
    pub compare: Vec<PathBuf>,

    /// Benches: a p99 (per RPC, or of a whole lifecycle) regressed when the new one is at
    /// least this many times the old...
    #[arg(long, value_name = "RATIO", default_value_t = 1.5)]
    pub p99_ratio: f64,

    /// ...and at least this many milliseconds more (both must hold).
    #[arg(long, value_name = "MS", default_value_t = 5.0)]
    pub p99_ms: f64,

    /// Benches: throughput regressed when it fell by at least this share (0.25: by 25%)...
    #[arg(long, value_name = "SHARE", default_value_t = 0.25)]
    pub throughput_drop: f64,

    /// ...and by at least this many lifecycles per second (both must hold).
    #[arg(long, value_name = "PER_SECOND", default_value_t = 0.5)]
    pub throughput_abs: f64,
}

/// csi-sanity's mount and staging directories and path commands (`--csi.mountdir` ...).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Node paths")]
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

    /// Enables the restart scenarios: this shell command restarts the node plugin (it gets
    /// CSI_CONFORM_NODE_ENDPOINT, CSI_CONFORM_NODE_INDEX and CSI_CONFORM_NODE_ID) between
    /// NodeStageVolume and NodePublishVolume, and (`--suite disruption`) while volumes are
    /// staged and published. Also spelled --restart-node-cmd. Without it, the bundled plugin
    /// (no --endpoint) is restarted in-process for `--suite disruption`.
    #[arg(help_heading = "Plugin endpoints", long, value_name = "CMD", alias = "restart-node-cmd")]
    pub allow_restart_cmd: Option<String>,

    /// Enables the controller restart scenario (`--suite disruption`): this shell command
    /// restarts the controller plugin (it gets CSI_CONFORM_CONTROLLER_ENDPOINT) while a
    /// CreateVolume is in flight. Without it, the bundled plugin is restarted in-process.
    #[arg(help_heading = "Plugin endpoints", long, value_name = "CMD")]
    pub restart_controller_cmd: Option<String>,

    /// Which suites.
    #[command(flatten)]
    pub suites: SuiteArgs,

    /// Run only scenarios whose id, title or a tag matches this regex; repeatable (any).
    #[arg(help_heading = "Selection", long, value_name = "REGEX")]
    pub focus: Vec<String>,

    /// Leave out scenarios whose id, title or a tag matches this regex; repeatable.
    #[arg(help_heading = "Selection", long, value_name = "REGEX")]
    pub skip: Vec<String>,

    /// How often idempotency checks repeat a call (0 skips them).
    #[arg(help_heading = "Selection", long, default_value_t = 10)]
    pub idempotency_count: u32,

    /// Also check that publishing beyond the node's max_volumes_per_node fails.
    #[arg(help_heading = "Selection", long)]
    pub test_node_volume_attach_limit: bool,

    /// Seed of generated values and property-based checks (default: random; printed for
    /// replay). Names never come from it: every run has a fresh run id in its names.
    #[arg(help_heading = "Selection", long)]
    pub seed: Option<u64>,

    /// Generated cases each property step checks (0 skips the property scenarios). The
    /// default tries every access mode with both access types in nearly every run; 256 or
    /// more for a deep run.
    #[arg(help_heading = "Selection", long, value_name = "N", default_value_t = crate::suite::DEFAULT_PROPERTY_CASES)]
    pub property_cases: u32,

    /// The access type of the default volume capability.
    #[arg(help_heading = "Test volumes and requests", long, value_enum, default_value_t = AccessTypeArg::Mount)]
    pub access_type: AccessTypeArg,

    /// Size of the volumes of scenarios about sizes, and of the csi-sanity-mapped ones where
    /// csi-sanity sends its test size (bytes; 10Gi, 512Mi and the like are accepted). Every
    /// other scenario creates the smallest volume the plugin serves (GetCapacity's
    /// minimum_volume_size, else what it makes of 1 MiB, stepping up toward this size while it
    /// refuses smaller ones); the report says which size was used and why.
    #[arg(help_heading = "Test volumes and requests", long, value_name = "BYTES", default_value = "10Gi", value_parser = crate::units::parse_bytes)]
    pub test_volume_size: i64,

    /// Size to expand test-size volumes to (default: the volume size + 1 GiB; small volumes
    /// grow to twice their size).
    #[arg(help_heading = "Test volumes and requests", long, value_name = "BYTES", value_parser = crate::units::parse_bytes)]
    pub test_volume_expand_size: Option<i64>,

    /// The volume id NOT_FOUND scenarios send (default: the id of a volume this run created
    /// and deleted, so it has the plugin's own format; a made-up one if the plugin creates
    /// none).
    #[arg(help_heading = "Test volumes and requests", long, value_name = "ID")]
    pub nonexistent_volume_id: Option<String>,

    /// The snapshot id NOT_FOUND scenarios send (default: the id of a snapshot this run
    /// created and deleted; a made-up one if the plugin creates none).
    #[arg(help_heading = "Test volumes and requests", long, value_name = "ID")]
    pub nonexistent_snapshot_id: Option<String>,

    /// YAML map of CreateVolume parameters (csi-sanity's --csi.testvolumeparameters).
    #[arg(help_heading = "Test volumes and requests", long, value_name = "FILE")]
    pub test_volume_parameters: Option<PathBuf>,

    /// YAML map of mutable parameters (default: iops: "3000"; none with --profile csi-sanity).
    #[arg(help_heading = "Test volumes and requests", long, value_name = "FILE")]
    pub test_volume_mutable_parameters: Option<PathBuf>,

    /// YAML map of CreateSnapshot parameters.
    #[arg(help_heading = "Test volumes and requests", long, value_name = "FILE")]
    pub test_snapshot_parameters: Option<PathBuf>,

    /// Secrets file in csi-sanity's format (CreateVolumeSecret: {...}, ...).
    #[arg(help_heading = "Test volumes and requests", long, value_name = "FILE")]
    pub secrets: Option<PathBuf>,

    /// YAML bounds of the capabilities property steps generate (access_types, access_modes,
    /// fs_types, mount_flags, volume_mount_groups, max_capabilities; see suites/README.md).
    #[arg(help_heading = "Test volumes and requests", long, value_name = "FILE")]
    pub property_bounds: Option<PathBuf>,

    /// Scenarios run at once (the work waits on the plugin, so more than the cores).
    #[arg(help_heading = "Budgets and timeouts", long, short = 'j', default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: u16,

    /// The longest a property step whose cases create volumes keeps starting new cases
    /// (whichever of this and --property-cases comes first; 0: no time limit).
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "DURATION", default_value = "20s", value_parser = crate::units::parse_duration)]
    pub property_time: Duration,

    /// Test volumes that may exist at once across all running scenarios and property cases
    /// (cloud volume quotas; default: no limit of ours).
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_live_volumes: Option<u32>,

    /// Bytes of test volumes that may exist at once (default: the plugin's GetCapacity
    /// available_capacity at the start, when it advertises GET_CAPACITY).
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "BYTES", value_parser = parse_positive_bytes)]
    pub max_live_bytes: Option<i64>,

    /// How long a call the plugin answers RESOURCE_EXHAUSTED (or ABORTED "operation
    /// pending") is retried, after a release, while other scenarios of the run hold resources
    /// on it (a lack of room also while deleted objects are not yet seen gone).
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "DURATION", default_value = "2m", value_parser = crate::units::parse_duration)]
    pub contention_timeout: Duration,

    /// `--suite stress`: workers running volume lifecycles at once (fewer when the run's
    /// budgets hold fewer volumes).
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub stress_workers: u32,

    /// `--suite stress`: volumes the workers take through their lifecycles in all, and how
    /// many volumes are published to one node at once (fewer when the budgets hold fewer).
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub stress_volumes: u32,

    /// `--suite stress`: copies of one call sent at once (the same CreateVolume, the same
    /// NodeStageVolume and NodePublishVolume).
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub stress_calls: u32,

    /// How long a volume or snapshot that DeleteVolume/DeleteSnapshot answered OK for may
    /// still be found or listed (a backend that finishes deleting in the background) before
    /// that fails the scenario that deleted it; it is looked up again within this time (the
    /// deletes of teardowns, last steps and property cases together, with one listing, after
    /// their scenarios end).
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "DURATION", default_value = "2s", value_parser = crate::units::parse_duration)]
    pub delete_grace: Duration,

    /// The longest a wait for readiness lasts (a snapshot's ready_to_use, a suite's `poll:`
    /// step): the spec sets readiness no deadline, so a wait that runs out makes the step
    /// inconclusive, never failed (default: each poll step's own timeout, 5m elsewhere).
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub ready_timeout: Option<Duration>,

    /// The least time an effect on the node that the plugin answered OK for (an expansion
    /// becoming visible) is looked for again before it is judged; 5 times the p90 of the
    /// plugin's answer times when that is longer.
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "DURATION", default_value = "250ms", value_parser = crate::units::parse_duration)]
    pub settle_time: Duration,

    /// The longest the whole run may take; scenarios not started by then are not run, and
    /// those in flight get --cleanup-timeout to finish and tear down.
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub run_timeout: Option<Duration>,

    /// After SIGINT/SIGTERM (or --run-timeout), how long teardown may take; what is not torn
    /// down by then stays in the journal for `csi-conform cleanup`.
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "DURATION", default_value = "2m", value_parser = parse_positive_duration)]
    pub cleanup_timeout: Duration,

    /// How often to try a plugin again (with doubling waits from 500ms) after the connection
    /// to it is lost; when it stays gone, its remaining scenarios are errors.
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "N", default_value_t = 3)]
    pub reconnect_attempts: u32,

    /// How to inspect staging and target paths of node endpoints whose process cannot be
    /// found (tcp, or a unix socket served from outside this pid namespace): a shell command
    /// given the path as its argument, printing file, directory, not_found or other
    /// (csi-sanity's --csi.checkpathcmd). Unix sockets are inspected where the serving
    /// process sees its paths (its mount namespace).
    #[arg(help_heading = "Node paths", long, value_name = "CMD")]
    pub check_path_cmd: Option<String>,

    /// The longest one --check-path-cmd call may take.
    #[arg(help_heading = "Node paths", long, value_name = "DURATION", default_value = "10s", value_parser = crate::units::parse_duration)]
    pub check_path_cmd_timeout: Duration,

    /// Whether staging and target mounts are verified: `auto` in the mount namespace of the
    /// process serving each node socket (skipped, with the reason, where it cannot be
    /// found); `off` skips every mount check (plugins that only pretend to mount).
    #[arg(help_heading = "Node paths", long, value_name = "MODE", default_value = "auto", value_parser = ["auto", "off"])]
    pub mount_check: String,

    /// Directory under which each scenario gets its staging and target paths.
    #[arg(help_heading = "Node paths", long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,

    /// Node agents playing the nodes (`--node-agents`).
    #[command(flatten)]
    pub agents: super::agents::AgentRunArgs,

    /// Where target and staging paths go, and how they are made.
    #[command(flatten)]
    pub paths: PathArgs,

    /// JUnit XML report.
    #[arg(help_heading = "Output", long, value_name = "FILE", default_value = "reports/junit.xml")]
    pub junit: PathBuf,

    /// JSON report (for scripts and `report --compare`).
    #[arg(help_heading = "Output", long, value_name = "FILE", default_value = "reports/report.json")]
    pub json: PathBuf,

    /// Self-contained HTML report.
    #[arg(help_heading = "Output", long, value_name = "FILE", default_value = "reports/report.html")]
    pub html: PathBuf,

    /// YAML map of scenario id to reason: known failures that do not fail the run.
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub expect_failures: Option<PathBuf>,

    /// How a scenario that passed with warnings appears in the JUnit report: `passed` (the
    /// warnings in its <system-out>), `skipped` (the warning as the skip message) or
    /// `failure` (a <failure type="warning">, so CI test views show it; the exit code is
    /// unchanged: use --strict for that).
    #[arg(help_heading = "Output", long, value_name = "AS", default_value = "passed", value_parser = ["passed", "skipped", "failure"])]
    pub junit_warnings: String,

    /// Also write the run's summary as GitHub-flavoured Markdown (verdict, counts, root
    /// causes, failures with their requirement and rerun command, warnings), appended to
    /// FILE. Under GitHub Actions the default is $GITHUB_STEP_SUMMARY (the job summary),
    /// unless --no-annotations.
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    pub job_summary: Option<PathBuf>,

    /// Warnings (tolerated deviations) fail the run too.
    #[arg(help_heading = "Output", long)]
    pub strict: bool,

    /// Under GitHub Actions (GITHUB_ACTIONS=true), do not print the `::error` / `::warning`
    /// workflow commands that turn each finding into an annotation, nor write the job
    /// summary to $GITHUB_STEP_SUMMARY.
    #[arg(help_heading = "Output", long)]
    pub no_annotations: bool,

    /// The cleanup journal: every created resource is recorded here until torn down.
    #[arg(help_heading = "Output", long, value_name = "FILE", default_value = "reports/journal.jsonl")]
    pub journal: PathBuf,

    /// Clean up what an earlier run left in the journal before starting.
    #[arg(help_heading = "Output", long)]
    pub cleanup_first: bool,

    /// `csi-sanity`: only the scenarios mapped to csi-sanity cases (`list --parity`), sending
    /// what csi-sanity sends, for its verdicts; `full`: everything (migrate in two steps).
    #[arg(help_heading = "Compatibility", long, value_enum, default_value_t = suite::Profile::Full)]
    pub profile: suite::Profile,

    /// Also drive the plugin as this orchestrator does (nomad, kubernetes, swarm, or all;
    /// `nomad@1.5`, `kubernetes@1.23`: as that release does, the bare name being the current
    /// releases); repeatable. Each lifecycle scenario runs once more as `<id>@<orchestrator>`
    /// with its paths, directories, RPC order and fields, and the report gets a compatibility
    /// matrix: per orchestrator, pass/fail/warn for each of its behaviours
    /// (docs/orchestrators.md).
    #[arg(help_heading = "Compatibility", long, value_name = "NAME[@RELEASE]")]
    pub orchestrator: Vec<String>,

    /// With --orchestrator: run the lifecycle scenarios only as the orchestrators' instances
    /// (`<id>@<orchestrator>`), not as loaded, for the compatibility matrix alone; scenarios
    /// without instances run as usual. The spec verdicts of those lifecycles are then missing.
    #[arg(help_heading = "Compatibility", long)]
    pub orchestrator_only: bool,

    /// Which CSI version judges the plugin.
    #[command(flatten)]
    pub spec: SpecVersionArg,

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
    pub(super) fn volumes(&self, config: Option<&Path>) -> Result<Vec<suite::ExistingVolume>, CliError> {
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

    /// Show the coverage of CSI's requirements (v1.12, or --spec-version) on a plugin: per RPC, requirements
    /// total / covered by a scenario / untestable / gaps, and overall (exit 1 when a
    /// requirement is neither covered nor explained).
    #[arg(long, conflicts_with_all = ["checks", "parity"])]
    pub spec: bool,

    /// With --spec: also list every requirement, its spec link and the scenarios naming it.
    #[arg(long, requires = "spec")]
    pub requirements: bool,

    /// With --spec: the CSI version's requirements, 1.12 (default) or 1.13 (v1.12's without
    /// VOLUME_CONDITION, plus volume and storage health and snapshot topology).
    #[arg(long, value_name = "VERSION", requires = "spec")]
    pub spec_version: Option<crate::version::SpecVersion>,

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

    /// The node agents of a run made with --node-agents, as that run gave them: what the
    /// journal lists on a node the run played through an agent is undone through that agent.
    #[command(flatten)]
    pub agents: super::agents::AgentRunArgs,
}

/// How to reach the plugin under test.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// The plugin's endpoint, for every role: unix:///abs/path, unix:rel/path, a bare path,
    /// tcp://host:port or dns:///host:port.
    #[arg(help_heading = "Plugin endpoints", long, env = "CSI_ENDPOINT", value_name = "ENDPOINT")]
    pub endpoint: Option<Endpoint>,

    /// A separate controller endpoint (overrides --endpoint for the controller role).
    #[arg(help_heading = "Plugin endpoints", long, value_name = "ENDPOINT")]
    pub controller_endpoint: Option<Endpoint>,

    /// A node plugin endpoint; repeat for several nodes (overrides --endpoint for the node role).
    #[arg(help_heading = "Plugin endpoints", long = "node-endpoint", value_name = "ENDPOINT")]
    pub node_endpoints: Vec<Endpoint>,

    /// How long to wait for the socket, the server and a ready Probe.
    #[arg(help_heading = "Plugin endpoints", long, value_name = "DURATION", default_value = "30s", value_parser = parse_positive_duration)]
    pub connect_timeout: Duration,

    /// The deadline of every RPC: a call not answered by then fails its scenario.
    #[arg(help_heading = "Plugin endpoints", long, value_name = "DURATION", default_value = "30s", value_parser = parse_positive_duration)]
    pub rpc_timeout: Duration,

    /// The largest response message accepted from the plugin (bytes; 4Mi, 64Ki and the like
    /// are accepted); a larger answer is a finding.
    #[arg(help_heading = "Plugin endpoints", long, value_name = "BYTES", default_value = "4Mi", value_parser = parse_message_size)]
    pub max_message_size: usize,
}

/// `--spec-version` of `run` and `fingerprint`.
#[derive(Debug, Clone, Args)]
pub struct SpecVersionArg {
    /// The CSI spec version to judge the plugin by, 1.12 or 1.13. Without it, inferred from
    /// what the plugin advertises (GET_VOLUME_HEALTH and the other v1.13 capabilities: 1.13;
    /// VOLUME_CONDITION alone: 1.12); the report says which and why. With no endpoint, the
    /// bundled reference plugin speaks this version too.
    #[arg(help_heading = "Compatibility", long, value_name = "VERSION")]
    pub spec_version: Option<crate::version::SpecVersion>,
}

/// A duration above zero (`--rpc-timeout 0` would fail every call).
/// A byte count above zero.
pub(super) fn parse_positive_bytes(text: &str) -> Result<i64, String> {
    let n = crate::units::parse_bytes(text)?;
    if n > 0 { Ok(n) } else { Err("must be more than 0 bytes".to_owned()) }
}

pub(super) fn parse_positive_duration(text: &str) -> Result<Duration, String> {
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

    /// Which CSI version judges the plugin.
    #[command(flatten)]
    pub spec: SpecVersionArg,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

impl RunArgs {
    /// The first flag given that makes or checks a node's paths by a command
    /// (`--create-mount-path-cmd` and the like, `--check-path-cmd`): with node agents, the
    /// agents do that on their nodes, and a command would run on the run's host instead.
    pub(super) fn path_command_flag(&self) -> Option<&'static str> {
        let p = &self.paths;
        [
            (p.create_mount_path_cmd.is_some(), "--create-mount-path-cmd"),
            (p.create_staging_path_cmd.is_some(), "--create-staging-path-cmd"),
            (p.remove_mount_path_cmd.is_some(), "--remove-mount-path-cmd"),
            (p.remove_staging_path_cmd.is_some(), "--remove-staging-path-cmd"),
            (self.check_path_cmd.is_some(), "--check-path-cmd"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}
