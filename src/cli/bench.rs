//! The `bench` command: its arguments (the volume, budget and cleanup flags named and read as
//! `run`'s), the bundled reference plugin as a child process of its own (so /proc measures it
//! alone), signals, the cleanup of whatever the bench left, and its console, JSON and HTML
//! outputs; and `report --compare` of two bench reports.

use super::*;

/// `csi-conform bench`.
#[derive(Debug, Args)]
#[command(after_long_help = BENCH_HELP)]
pub struct BenchArgs {
    /// The plugin (none: the bundled reference plugin, started as a child process).
    #[command(flatten)]
    pub connect: ConnectArgs,

    /// The ramp's highest concurrency: levels 1, 2, 4, ... up to this (stopping earlier at
    /// the first level with errors, or past the latency knee).
    #[arg(help_heading = "Bench", long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrency: u16,

    /// Lifecycles each worker runs per level.
    #[arg(help_heading = "Bench", long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    pub lifecycles: u64,

    /// Soak instead of ramp: repeat lifecycles at --concurrency for this long (`2m`, `30m`,
    /// `8h`), sampling the plugin's memory, fds, mounts, volumes and latency; exit 1 when one
    /// keeps growing (a leak) or latency drifts.
    #[arg(help_heading = "Soak", long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub duration: Option<Duration>,

    /// The soak's concurrency.
    #[arg(help_heading = "Soak", long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,

    /// Time between soak samples (default: --duration / 60, between 250ms and 1m).
    #[arg(help_heading = "Soak", long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub sample_every: Option<Duration>,

    /// Bundled plugin only: sleep this long before answering every RPC (its --latency).
    #[arg(help_heading = "Bundled plugin", long, value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub latency: Option<Duration>,

    /// Bundled plugin only: a quirk to misbehave with (`slow-after-n`, `leak-fd-per-call`,
    /// ...; see `reference-plugin --list-quirks`). Repeatable.
    #[arg(help_heading = "Bundled plugin", long = "quirk", value_name = "NAME")]
    pub quirks: Vec<crate::reference::Quirk>,

    /// As `run`: the access type of the volumes.
    #[arg(help_heading = "Test volumes and requests", long, value_enum, default_value_t = AccessTypeArg::Mount)]
    pub access_type: AccessTypeArg,

    /// As `run`, but 1 MiB by default (Kubernetes' volumeperf size): CreateVolume's size.
    #[arg(help_heading = "Test volumes and requests", long, value_name = "BYTES", default_value = "1Mi", value_parser = parse_positive_bytes)]
    pub test_volume_size: i64,

    /// As `run`: the size ControllerExpandVolume grows to (default: twice the volume size).
    #[arg(help_heading = "Test volumes and requests", long, value_name = "BYTES", value_parser = crate::units::parse_bytes)]
    pub test_volume_expand_size: Option<i64>,

    /// As `run`: YAML map of CreateVolume parameters.
    #[arg(help_heading = "Test volumes and requests", long, value_name = "FILE")]
    pub test_volume_parameters: Option<PathBuf>,

    /// As `run`: YAML map of CreateSnapshot parameters.
    #[arg(help_heading = "Test volumes and requests", long, value_name = "FILE")]
    pub test_snapshot_parameters: Option<PathBuf>,

    /// As `run`: secrets file in csi-sanity's format.
    #[arg(help_heading = "Test volumes and requests", long, value_name = "FILE")]
    pub secrets: Option<PathBuf>,

    /// As `run`: volumes that may exist at once (caps the ramp's concurrency).
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_live_volumes: Option<u32>,

    /// As `run`: bytes of volumes that may exist at once (caps the ramp's concurrency).
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "BYTES", value_parser = parse_positive_bytes)]
    pub max_live_bytes: Option<i64>,

    /// As `run`: after SIGINT/SIGTERM or at the end, how long undoing what is left may take.
    #[arg(help_heading = "Budgets and timeouts", long, value_name = "DURATION", default_value = "2m", value_parser = parse_positive_duration)]
    pub cleanup_timeout: Duration,

    /// As `run`: the directory under which the bench's staging and target paths go.
    #[arg(help_heading = "Node paths", long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,

    /// The bench report as JSON (a baseline for `report --compare`).
    #[arg(help_heading = "Output", long, value_name = "FILE", default_value = "reports/bench.json")]
    pub json: PathBuf,

    /// The bench report as HTML with charts.
    #[arg(help_heading = "Output", long, value_name = "FILE", default_value = "reports/bench.html")]
    pub html: PathBuf,

    /// As `run`: the cleanup journal.
    #[arg(help_heading = "Output", long, value_name = "FILE", default_value = "reports/journal.jsonl")]
    pub journal: PathBuf,

    /// As `run`: clean up what an earlier run left in the journal before starting.
    #[arg(help_heading = "Output", long)]
    pub cleanup_first: bool,
}

const BENCH_HELP: &str = "\
Examples:
  csi-conform bench                                   (the bundled plugin, in a child process)
  csi-conform bench --latency 50ms --max-concurrency 16
  csi-conform bench --endpoint /run/csi/csi.sock --json base.json
  csi-conform bench --endpoint /run/csi/csi.sock --duration 30m --concurrency 8
  csi-conform report --compare base.json new.json     (exit 1 on a regression)

Each lifecycle: CreateVolume, CreateSnapshot/DeleteSnapshot, a clone and its delete,
ControllerExpandVolume, ControllerPublishVolume, NodeStageVolume, NodePublishVolume, then the
undo of each, as the plugin advertises them. See docs/benchmarking.md.";

/// The bundled reference plugin, running as a child process on a socket in a scratch dir.
struct Child {
    process: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl Child {
    async fn start(args: &BenchArgs) -> Result<(Child, Endpoint), CliError> {
        let dir = crate::reference::scratch_dir().map_err(|e| CliError::usage(format!("cannot make a directory for the reference plugin: {e}")))?;
        let socket = dir.path().join("csi.sock");
        let exe = std::env::current_exe().map_err(|e| CliError::usage(format!("cannot find csi-conform's own binary: {e}")))?;
        let mut command = tokio::process::Command::new(exe);
        command.arg("reference-plugin").arg("--endpoint").arg(format!("unix://{}", socket.display())).env_remove("CSI_ENDPOINT");
        if let Some(latency) = args.latency {
            command.arg("--latency").arg(format!("{}us", latency.as_micros()));
        }
        for q in &args.quirks {
            command.arg("--quirk").arg(q.name());
        }
        let log = std::fs::File::create(dir.path().join("plugin.log")).map_err(|e| CliError::usage(format!("reference plugin log: {e}")))?;
        command.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(log).kill_on_drop(true);
        let process = command.spawn().map_err(|e| CliError::usage(format!("cannot start the reference plugin: {e}")))?;
        Ok((Child { process, _dir: dir }, Endpoint::Unix(socket)))
    }

    async fn stop(mut self) {
        if let Some(pid) = self.process.id() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(10), self.process.wait()).await.is_err() {
            let _ = self.process.kill().await;
        }
    }
}

/// `bench`: exit 0 when it ran (its figures are findings for a reader, not verdicts), 1 when
/// the soak judged a leak or drift or the bench left something behind, 2 when it could not
/// run.
pub(super) async fn bench(args: BenchArgs, quiet: bool, scrubber: &Scrubber) -> Result<u8, CliError> {
    let config = bench_config(&args, scrubber)?;
    let mut targets = args.connect.targets();
    let mut child = None;
    if targets.is_empty() {
        let (started, endpoint) = Child::start(&args).await?;
        eprintln!("no --endpoint: benchmarking the bundled reference plugin in a child process ({endpoint})");
        child = Some(started);
        targets = Targets::resolve(Some(endpoint), None, Vec::new());
    } else if args.latency.is_some() || !args.quirks.is_empty() {
        return Err(CliError::usage("--latency and --quirk shape the bundled plugin: they take no --endpoint"));
    }
    let result = bench_on(&args, &config, &targets, quiet, scrubber).await;
    if let Some(child) = child {
        child.stop().await;
    }
    result
}

fn bench_config(args: &BenchArgs, scrubber: &Scrubber) -> Result<crate::bench::BenchConfig, CliError> {
    let expand_size = args.test_volume_expand_size.unwrap_or(args.test_volume_size.saturating_mul(2));
    if expand_size < args.test_volume_size {
        return Err(CliError::usage("--test-volume-expand-size is smaller than --test-volume-size; expansion only grows"));
    }
    let soak = args.duration.map(|duration| crate::bench::soak::SoakConfig {
        duration,
        concurrency: usize::from(args.concurrency),
        interval: args.sample_every.unwrap_or_else(|| crate::bench::soak::SoakConfig::default_interval(duration)),
    });
    Ok(crate::bench::BenchConfig {
        max_concurrency: usize::from(args.max_concurrency),
        lifecycles_per_worker: args.lifecycles,
        volume_size: args.test_volume_size,
        expand_size,
        block: args.access_type == AccessTypeArg::Block,
        parameters: load_map(&args.test_volume_parameters)?.unwrap_or_default(),
        snapshot_parameters: load_map(&args.test_snapshot_parameters)?.unwrap_or_default(),
        secrets: args.secrets.as_deref().map(|f| load_secrets(f, scrubber)).transpose()?.unwrap_or_default(),
        max_live_volumes: args.max_live_volumes,
        max_live_bytes: args.max_live_bytes,
        soak,
        bundled_latency: args.latency,
        bundled_quirks: args.quirks.iter().map(|q| q.name().to_owned()).collect(),
    })
}

async fn bench_on(
    args: &BenchArgs,
    config: &crate::bench::BenchConfig,
    targets: &Targets,
    quiet: bool,
    scrubber: &Scrubber,
) -> Result<u8, CliError> {
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
    let signals = crate::session::Signals::catch().map_err(CliError::usage)?;
    let options = args.connect.client_options();
    let connections = targets.connect_noting(&options, |wait| eprintln!("{wait}")).await.map_err(CliError::usage)?;
    if !leftovers.is_empty() {
        let cleaned = crate::cleanup::undo(&args.journal, &leftovers, &connections, &config.secrets).await;
        eprint!("{}", scrubber.scrub(&cleaned.to_string()));
        if !cleaned.is_complete() {
            return Err(CliError::usage(format!("--cleanup-first could not undo everything {} lists; not starting", args.journal.display())));
        }
    }
    let (Some(controller), Some(node)) = (connections.controller.clone(), connections.nodes.first().cloned()) else {
        return Err(CliError::usage(NO_ENDPOINT));
    };
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let run_id = format!("{:x}-{}", started.as_millis(), std::process::id());
    let journal = std::sync::Arc::new(crate::journal::Journal::open(&args.journal, &run_id).map_err(CliError::usage)?);
    let work_dir = match &args.work_dir {
        Some(dir) => std::path::absolute(dir).map_err(|e| CliError::usage(format!("--work-dir {}: {e}", dir.display())))?,
        None => std::env::temp_dir().join("csi-conform"),
    };
    let dir = work_dir.join(format!("bench-{run_id}"));
    let dir_id = journal.run_dir(&dir).map_err(CliError::usage)?;
    std::fs::create_dir_all(&dir).map_err(|e| CliError::usage(format!("{}: {e}", dir.display())))?;
    let target = crate::bench::Target { controller, node, journal: journal.clone(), dir: dir.clone(), run_id: run_id.clone() };
    let interrupted = tokio::select! {
        result = crate::bench::run(target, config) => Ok(result),
        (reason, code) = crate::session::first_signal(signals) => Err((reason, code)),
    };
    // Whatever a failed undo or a signal left: undone now, within --cleanup-timeout.
    let prefix = format!("{run_id}:");
    let mine: Vec<_> = journal::outstanding(&args.journal)
        .map_err(CliError::usage)?
        .into_iter()
        .filter(|(id, _)| id.starts_with(&prefix))
        .collect();
    if !mine.is_empty() {
        let undo = crate::cleanup::undo(&args.journal, &mine, &connections, &config.secrets);
        match tokio::time::timeout(args.cleanup_timeout, undo).await {
            Ok(cleaned) => eprint!("{}", scrubber.scrub(&cleaned.to_string())),
            Err(_) => eprintln!("undoing what the bench left took longer than --cleanup-timeout"),
        }
    }
    if crate::mounts::mounts_under(&dir).is_empty() && std::fs::remove_dir_all(&dir).is_ok() {
        let _ = journal.done(&dir_id);
    }
    let left = journal::outstanding(&args.journal).map_err(CliError::usage)?.into_iter().filter(|(id, _)| id.starts_with(&prefix)).count();
    let _ = journal.compact();
    let mut report = match interrupted {
        Ok(result) => result.map_err(|e| CliError::usage(scrubber.scrub(&e.to_string())))?,
        Err((reason, code)) => {
            eprintln!("{reason}: the bench stopped; {left} resource(s) left in the journal");
            return Ok(code);
        }
    };
    report.left_behind = left;
    let value = serde_json::to_value(&report).map_err(CliError::usage)?;
    let report: crate::bench::BenchReport = scrubber.clean(&value).and_then(|v| serde_json::from_value(v).ok()).unwrap_or(report);
    let json = serde_json::to_string_pretty(&report).map_err(CliError::usage)?;
    report::write_atomically(&args.json, &json).map_err(CliError::usage)?;
    report::write_atomically(&args.html, &crate::bench::output::html(&report)).map_err(CliError::usage)?;
    if !quiet {
        print!("{}", crate::bench::output::console(&report));
    }
    println!("reports: JSON {}, HTML {}", args.json.display(), args.html.display());
    let findings = report.soak.as_ref().is_some_and(|s| s.findings().next().is_some());
    if left > 0 {
        eprintln!("warning: {} lists {left} resource(s) the bench left; undo them with `csi-conform cleanup --journal {}`", args.journal.display(), args.journal.display());
    }
    Ok(if findings || left > 0 { EXIT_FINDINGS } else { EXIT_OK })
}

/// `report --compare OLD NEW` of two bench reports: exit 1 on a regression.
pub(super) fn compare_benches(
    args: &ReportArgs,
    old: (&Path, crate::bench::BenchReport),
    new: (&Path, crate::bench::BenchReport),
) -> Result<u8, CliError> {
    let t = crate::bench::compare::Thresholds {
        p99_ratio: args.p99_ratio,
        p99_ms: args.p99_ms,
        throughput_drop: args.throughput_drop,
        throughput_abs: args.throughput_abs,
    };
    for (label, (path, r)) in [("old", &old), ("new", &new)] {
        println!(
            "{label}: {} ({} {}, {}): {} level(s), top {:.1} lifecycles/s",
            path.display(),
            r.plugin_name,
            r.plugin_version,
            r.started,
            r.levels.len(),
            r.levels.iter().map(|l| l.lifecycles_per_second).fold(0.0, f64::max)
        );
    }
    let comparison = crate::bench::compare::compare(&old.1, &new.1, &t);
    print!("{}", comparison.to_text(&t));
    Ok(if comparison.regressions.is_empty() { EXIT_OK } else { EXIT_FINDINGS })
}
