//! The `run` command: translating its arguments and settings into a [`suite::RunConfig`], the local
//! reference plugin for endpoint-less runs, signals, the replay command, and writing the reports.

use super::*;

pub(super) fn load_map(file: &Option<PathBuf>) -> Result<Option<BTreeMap<String, String>>, CliError> {
    file.as_deref().map(crate::config::load_string_map).transpose().map_err(CliError::usage)
}

/// Reads a secrets file (its values join `scrubber` at once) and warns when other users can
/// read it.
pub(super) fn load_secrets(file: &Path, scrubber: &Scrubber) -> Result<BTreeMap<String, BTreeMap<String, String>>, CliError> {
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

pub(super) fn regexes(patterns: &[String], flag: &str) -> Result<Vec<regex::Regex>, CliError> {
    patterns
        .iter()
        .map(|p| regex::Regex::new(p).map_err(|e| CliError::usage(format!("{flag} {p:?} is not a valid regex: {e}"))))
        .collect()
}

/// Builds the engine's configuration from the command line, reading every file it names.
/// Everything is checked here, before any connection is made.
pub(super) fn run_config(args: &RunArgs, scrubber: &Scrubber) -> Result<suite::RunConfig, CliError> {
    let mut config = suite::RunConfig {
        jobs: usize::from(args.jobs),
        idempotency_count: args.idempotency_count,
        access_type: match args.access_type {
            AccessTypeArg::Mount => AccessType::Mount,
            AccessTypeArg::Block => AccessType::Block,
        },
        volume_size: args.test_volume_size,
        expand_size: args.test_volume_expand_size,
        nonexistent_volume_id: args.nonexistent_volume_id.clone(),
        nonexistent_snapshot_id: args.nonexistent_snapshot_id.clone(),
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
        delete_grace: args.delete_grace,
        ready_timeout: args.ready_timeout,
        settle_time: args.settle_time,
        replay_command: Some(replay_command(std::env::args())),
        timeout: args.run_timeout,
        cleanup_timeout: args.cleanup_timeout,
        reconnect: suite::Reconnect { attempts: args.reconnect_attempts, ..suite::Reconnect::default() },
        scrubber: scrubber.clone(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        stress: suite::StressSize { workers: args.stress_workers, volumes: args.stress_volumes, calls: args.stress_calls },
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
    if let Some(command) = &args.restart_controller_cmd {
        if command.trim().is_empty() {
            return Err(CliError::usage("--restart-controller-cmd is empty"));
        }
        config.restart_controller_cmd = Some(command.clone());
        config.options.insert("restart_controller".to_owned());
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
    for word in &args.orchestrator {
        for o in crate::orchestrator::Profile::parse(word).map_err(|e| CliError::usage(format!("--orchestrator: {e}")))? {
            if !config.orchestrators.contains(&o) {
                config.orchestrators.push(o);
            }
        }
    }
    config.orchestrators.sort();
    if args.orchestrator_only && config.orchestrators.is_empty() {
        return Err(CliError::usage("--orchestrator-only needs --orchestrator (nomad, kubernetes, swarm or all)"));
    }
    config.orchestrator_only = args.orchestrator_only;
    Ok(config)
}

/// The command line of this run as a shell command, without the options a replay sets
/// itself (`--seed`, `--focus`, `--skip`): the start of the replay command of a property
/// failure.
pub(super) fn replay_command(args: impl IntoIterator<Item = String>) -> String {
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
pub(super) fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
    if plain { text.to_owned() } else { format!("'{}'", text.replace('\'', "'\\''")) }
}

pub(super) fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// The reference plugins started for a run that names no endpoint.
pub(super) struct LocalReference {
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
pub(super) const REFERENCE_NODES: usize = 2;

/// Starts the bundled reference plugin as an orchestrator would see a small cluster: one
/// controller (which is also node 1) and a second node plugin, sharing a temporary state
/// directory. Returns the plugins and the endpoints by role.
/// `spec_version` is the version it speaks (`--spec-version`; v1.13 when `None`).
pub(super) async fn start_reference(
    spec_version: Option<crate::version::SpecVersion>,
) -> Result<(LocalReference, Targets), CliError> {
    let dir = crate::reference::scratch_dir()
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
            spec_version: spec_version.unwrap_or_default(),
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
pub(super) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    pub(super) fn catch() -> Result<Self, CliError> {
        use tokio::signal::unix::{SignalKind, signal};
        let catch = |kind| signal(kind).map_err(|e| CliError::usage(format!("cannot catch signals: {e}")));
        Ok(Signals { int: catch(SignalKind::interrupt())?, term: catch(SignalKind::terminate())? })
    }
}

/// Resolves when the first SIGINT or SIGTERM arrives, with the reason and the exit code it
/// calls for (130 or 143). A second signal ends the process at once, leaving the journal
/// for `csi-conform cleanup`.
pub(super) async fn first_signal(signals: Signals) -> (String, u8) {
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

pub(super) async fn run(args: RunArgs, quiet: bool, rerun: String, scrubber: &Scrubber) -> Result<u8, CliError> {
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
    let options = args.connect.client_options();
    // With node agents, the agents play the nodes: connected, leased, and the run's work
    // directory checked to be inside each agent's before anything else starts.
    let agents = if args.agents.node_agents.is_empty() {
        None
    } else {
        if !args.connect.node_endpoints.is_empty() {
            return Err(CliError::usage("--node-agents and --node-endpoint exclude each other (the agents play the nodes)"));
        }
        if targets.controller.is_none() {
            return Err(CliError::usage("--node-agents needs --controller-endpoint (or --endpoint) for the controller"));
        }
        let agents = agents::Agents::connect(&args.agents, &options).await?;
        let work_dir = match agents.work_dir(args.work_dir.as_ref().map(|_| config.work_dir.as_path())) {
            Ok(dir) => dir,
            Err(e) => {
                agents.release().await;
                return Err(e);
            }
        };
        config.work_dir = work_dir;
        config.node_agents = agents.engine_nodes();
        targets.nodes = agents.endpoints();
        for (i, node) in agents.nodes.iter().enumerate() {
            eprintln!("node {i}: {}", crate::suite::NodeAgent::describe(node.as_ref()));
        }
        Some(agents)
    };
    let mut local = None;
    if targets.is_empty() {
        let (reference, started) = start_reference(args.spec.spec_version).await?;
        let nodes: Vec<String> = started.nodes.iter().map(ToString::to_string).collect();
        eprintln!("no --endpoint: testing the bundled reference plugin (controller and {} nodes: {})", nodes.len(), nodes.join(", "));
        targets = started;
        local = Some(reference);
    }

    if config.check_path_cmd.is_none() && agents.is_none() {
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
    let (connections, fingerprint) = match &agents {
        Some(agents) => agents.connect_nodes(targets.controller.as_ref(), &options, args.spec.spec_version).await?,
        None => connect_and_fingerprint(&targets, &options, args.spec.spec_version).await?,
    };
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
    // Calls whose answer never came, and teardown that failed for want of a connection:
    // asked again (idempotently) and undone before the run ends, within --cleanup-timeout
    // (after a signal, the run's teardown has had that bound already).
    let signalled = interrupted.lock().unwrap_or_else(|p| p.into_inner()).is_some();
    if !signalled {
        let connections = crate::client::Connections { controller: plugin.controller.clone(), nodes: plugin.nodes.clone() };
        let settled =
            crate::cleanup::settle_run(&args.journal, &run_id, &connections, &config.secrets, config.cleanup_timeout, config.reconnect)
                .await;
        if let Some(settled) = settled {
            eprintln!("in doubt at the end of the run (undone from the journal, within --cleanup-timeout):");
            eprint!("{}", scrubber.scrub(&settled.to_string()));
            // The summary and the JSON report name the bound it was asked again within.
            report.settled = Some(report::Settled {
                undone: settled.undone,
                left: settled.failed,
                reconnect_attempts: config.reconnect.attempts,
                cleanup_timeout: config.cleanup_timeout,
            });
        }
    }
    // The run has written its last record: keep only what is outstanding.
    if let Err(e) = observer.journal().compact() {
        eprintln!("warning: {}", scrubber.scrub(&e.to_string()));
    }

    if let Some(expected) = &expected {
        for id in expected.apply(&mut report) {
            tracing::warn!("--expect-failures lists {id}, which this run did not include");
        }
    }
    // Every string of the report scrubbed (in every encoding) and then capped, before any of
    // it is written or printed: what a plugin sent back is repeated in every report.
    let report = match scrubber.clean(&report) {
        Some(cleaned) => cleaned,
        None => {
            // A held value spells one of the report's own words: what the scenarios
            // recorded was scrubbed as it was recorded; the rest is written as it is.
            tracing::warn!("the report could not be scrubbed as a whole; its findings were scrubbed as they were made");
            report
        }
    };
    write_all_reports(&report, &args)?;
    let github = report::annotations::enabled(std::env::var("GITHUB_ACTIONS").ok().as_deref(), args.no_annotations);
    if github {
        // Workflow commands first: the log hides them, and the summary stays the last thing.
        for line in report::annotations::annotations(&report) {
            println!("{line}");
        }
    }
    if !quiet {
        println!();
    }
    print!("{}", report::summary_with_command(&report, color, &rerun));
    let mut files = report_files(&args);
    let job_summary = args.job_summary.clone().or_else(|| {
        github.then(|| std::env::var_os("GITHUB_STEP_SUMMARY")).flatten().filter(|p| !p.is_empty()).map(PathBuf::from)
    });
    if let Some(path) = &job_summary {
        let markdown = report::markdown::job_summary(&report, Some(&rerun), &files);
        match append(path, &markdown) {
            Ok(()) => files.push(("job summary", path.as_path())),
            Err(e) => eprintln!("warning: cannot write the job summary to {}: {e}", path.display()),
        }
    }
    print!("{}", report::console::report_files_line(&files));
    let left = leftovers_on(&args.journal, &endpoints)?.len();
    if left > 0 {
        eprintln!(
            "warning: {} lists {left} resource(s) or unanswered call(s) left on the plugin (not undone within --cleanup-timeout {} and {} --reconnect-attempts); undo them with `csi-conform cleanup --journal {}`",
            args.journal.display(),
            crate::client::human_duration(config.cleanup_timeout),
            config.reconnect.attempts,
            args.journal.display()
        );
    }
    if let Some(local) = local {
        local.shutdown().await;
    }
    if let Some(agents) = agents {
        agents.release().await;
    }
    let signal_code = *interrupted.lock().unwrap_or_else(|p| p.into_inner());
    Ok(match signal_code {
        Some(code) => code,
        None if report.failed() => EXIT_FINDINGS,
        None => EXIT_OK,
    })
}

/// What the journal at `path` still lists on any of `endpoints`.
pub(super) fn leftovers_on(path: &Path, endpoints: &[String]) -> Result<Vec<(String, journal::Outstanding)>, CliError> {
    let all = journal::outstanding(path).map_err(CliError::usage)?;
    Ok(all.into_iter().filter(|(_, r)| endpoints.iter().any(|e| e == r.endpoint())).collect())
}

pub(super) fn write_all_reports(report: &RunReport, args: &RunArgs) -> Result<(), CliError> {
    let warnings_as = args.junit_warnings.parse().map_err(CliError::usage)?;
    report::write_atomically(&args.junit, &report::junit::to_junit_xml_with(report, warnings_as)).map_err(CliError::usage)?;
    report::write_reports(report, None, Some(&args.json)).map_err(CliError::usage)?;
    report::write_atomically(&args.html, &report::html::to_html(report)).map_err(CliError::usage)
}

/// The report files a run writes, `(what, path)`, for the line that ends its output.
fn report_files(args: &RunArgs) -> Vec<(&'static str, &Path)> {
    vec![("JUnit", args.junit.as_path()), ("JSON", args.json.as_path()), ("HTML", args.html.as_path())]
}

/// Appends `text` to the file at `path` (made if missing), as `$GITHUB_STEP_SUMMARY` wants.
fn append(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(text.as_bytes())
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
        assert_eq!(defaults.property_cases, suite::DEFAULT_PROPERTY_CASES);
        for bad in [["--max-live-bytes", "0"], ["--max-live-volumes", "0"]] {
            let args: Vec<String> = ["csi-conform", "run", bad[0], bad[1]].iter().map(ToString::to_string).collect();
            assert!(matches!(parse(&args), Err(Parsed::Clap(_))), "{bad:?}");
        }
    }
}
