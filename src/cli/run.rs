//! The `run` command: translating its arguments and settings into a [`suite::RunConfig`] and a
//! [`Session`] (which owns the run), the local reference plugin for endpoint-less runs, and the
//! replay command; the session's end becomes the exit code.

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
        config.options.insert("restart_node".to_owned());
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

/// What the journal at `path` still lists on any of `endpoints` (as a session checks).
pub(super) fn leftovers_on(path: &Path, endpoints: &[String]) -> Result<Vec<(String, journal::Outstanding)>, CliError> {
    crate::session::leftovers_on(path, endpoints).map_err(CliError::usage)
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
        if let Some(flag) = args.path_command_flag() {
            return Err(CliError::usage(format!(
                "--node-agents and {flag} exclude each other: each agent makes the run's directories on its node and \
                 checks the paths there itself (a command would run here, not on the node)"
            )));
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
        let (reference, started) = crate::bundled::Bundled::start(args.spec.spec_version, &[]).await.map_err(CliError::usage)?;
        let nodes: Vec<String> = started.nodes.iter().map(ToString::to_string).collect();
        eprintln!("no --endpoint: testing the bundled reference plugin (controller and {} nodes: {})", nodes.len(), nodes.join(", "));
        targets = started;
        // The run restarts it itself where a scenario restarts the plugin and no command
        // is given.
        config.restart_in_process(reference.clone());
        local = Some(reference);
    }
    let session = Session {
        config,
        suites,
        expected,
        targets,
        spec_version: args.spec.spec_version,
        client: options,
        journal: args.journal.clone(),
        cleanup_first: args.cleanup_first,
        quiet,
        strict: args.strict,
        reports: Reports {
            junit: args.junit.clone(),
            json: args.json.clone(),
            html: args.html.clone(),
            junit_warnings: args.junit_warnings.clone(),
            job_summary: args.job_summary.clone(),
            no_annotations: args.no_annotations,
        },
        rerun,
    };
    // The agents play the nodes: the session connects to them over their links.
    let ended = session.run_connecting(scrubber, agents.as_ref().map(|a| a as &dyn Connector)).await;
    if let Some(local) = local {
        local.shutdown().await;
    }
    if let Some(agents) = agents {
        agents.release().await;
    }
    let ended = ended.map_err(CliError::usage)?;
    Ok(match ended {
        Ended::Interrupted(code) => code,
        Ended::Failed => EXIT_FINDINGS,
        Ended::Passed => EXIT_OK,
    })
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
