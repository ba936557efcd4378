//! The commands besides `run`: `fingerprint`, `report --compare`, `list`, `suites check`, `call` and `cleanup`,
//! and connecting plus fingerprinting the plugin, which `run` shares.

use super::*;

pub(super) const NO_ENDPOINT: &str =
    "no plugin endpoint: give --endpoint (or --controller-endpoint / --node-endpoint, or CSI_ENDPOINT)";

/// Connects every role and fingerprints the plugin (as a run's session does).
pub(super) async fn connect_and_fingerprint(
    targets: &Targets,
    options: &ClientOptions,
    spec_version: Option<crate::version::SpecVersion>,
) -> Result<(Connections, Fingerprint), CliError> {
    crate::session::connect_and_fingerprint(targets, options, spec_version).await.map_err(CliError::usage)
}

/// `fingerprint`: what the plugin says of itself, every string scrubbed and then capped as the
/// reports cap them (a plugin's 3 MB name is not printed whole).
pub(super) async fn fingerprint(args: FingerprintArgs, scrubber: &Scrubber) -> Result<u8, CliError> {
    let targets = args.connect.targets();
    if targets.is_empty() {
        return Err(CliError::usage(NO_ENDPOINT));
    }
    let (_, fingerprint) = connect_and_fingerprint(&targets, &args.connect.client_options(), args.spec.spec_version).await?;
    match args.format {
        Format::Table => {
            for line in scrubber.scrub(&fingerprint.to_table()).lines() {
                println!("{}", crate::scrub::cap(line, crate::scrub::REPORT_STRING_MAX));
            }
        }
        Format::Json => {
            let value = serde_json::to_value(&fingerprint).map_err(CliError::usage)?;
            let cleaned = scrubber.clean(&value).unwrap_or(value);
            println!("{}", serde_json::to_string_pretty(&cleaned).map_err(CliError::usage)?);
        }
    }
    Ok(EXIT_OK)
}

/// `report --compare OLD NEW`: exit 1 when NEW has new failures.
pub(super) fn report_command(args: &ReportArgs) -> Result<u8, CliError> {
    let read = |path: &Path| -> Result<RunReport, CliError> {
        let text = std::fs::read_to_string(path).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
        report::from_json(&text).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))
    };
    let [old_path, new_path] = args.compare.as_slice() else {
        return Err(CliError::usage("--compare takes two JSON reports: OLD NEW"));
    };
    let bench = |path: &Path| -> Result<Option<crate::bench::BenchReport>, CliError> {
        let text = std::fs::read_to_string(path).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
        crate::bench::compare::from_json(&text).transpose().map_err(|e| CliError::usage(format!("{}: {e}", path.display())))
    };
    match (bench(old_path)?, bench(new_path)?) {
        (Some(old), Some(new)) => return compare_benches(args, (old_path, old), (new_path, new)),
        (None, None) => {}
        _ => return Err(CliError::usage("--compare: one report is a bench report and the other a run report")),
    }
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
        if c.inconclusive > 0 {
            println!("{label}: {} inconclusive", c.inconclusive);
        }
    }
    let comparison = report::compare::compare(&old, &new);
    print!("{}", comparison.render());
    Ok(if comparison.has_regressions() { EXIT_FINDINGS } else { EXIT_OK })
}

/// The built-in opt-in suites (`stress`, `disruption`) that are not among `suites`.
fn opt_in_left_out(suites: &[suite::Suite]) -> Result<Vec<suite::Suite>, CliError> {
    let mut out = Vec::new();
    for (name, _) in suite::OPT_IN {
        if suites.iter().any(|s| s.id() == *name) {
            continue;
        }
        if let Some(loaded) = suite::opt_in_suite(name) {
            out.push(loaded.map_err(|e| CliError::usage(e.to_string()))?);
        }
    }
    Ok(out)
}

pub(super) fn list(args: ListArgs) -> Result<u8, CliError> {
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
        // Scenarios, then the response rules that every answer is checked against.
        let rules = crate::rules::covering().iter().map(|(rule, ids)| (rule.as_str(), ids.as_slice()));
        let pairs: Vec<(&str, &[String])> =
            suites.iter().flat_map(|s| s.scenarios()).map(|sc| (sc.id(), sc.spec())).chain(rules).collect();
        // The opt-in suites not chosen: what only they check is theirs, not a gap.
        let opt_in = opt_in_left_out(&suites)?;
        let opt_in_pairs = opt_in.iter().flat_map(|s| s.scenarios().iter().map(move |sc| (s.id(), sc.spec())));
        let inventory = crate::spec::for_version(args.spec_version.unwrap_or(crate::version::SpecVersion::V1_12));
        let coverage = crate::spec::coverage_with_opt_in(inventory, pairs, opt_in_pairs);
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

pub(super) fn suites_check(files: &[PathBuf]) -> Result<u8, CliError> {
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

pub(super) async fn call(args: CallArgs, scrubber: &Scrubber) -> Result<u8, CliError> {
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
            // A plugin may echo what it was sent in its answer (a context map).
            print!("{}", scrubber.scrub(&yaml));
            Ok(EXIT_OK)
        }
        Err(e) => {
            eprintln!("{}", scrubber.scrub(&e.to_string()));
            Ok(EXIT_FINDINGS)
        }
    }
}

pub(super) async fn cleanup(args: CleanupArgs, scrubber: &Scrubber) -> Result<u8, CliError> {
    let secrets = match &args.secrets {
        Some(file) => load_secrets(file, scrubber)?,
        None => BTreeMap::new(),
    };
    if !args.journal.exists() {
        println!("cleanup: nothing to do: there is no journal at {}", args.journal.display());
        return Ok(EXIT_OK);
    }
    let mut endpoints: Vec<String> = args.connect.targets().distinct().iter().map(ToString::to_string).collect();
    let options = args.connect.client_options();
    // Through node agents: the journal names each agent's address for the node it played;
    // those records are undone over the agent's channel, under a lease of the cleanup's own.
    let agents = if args.agents.node_agents.is_empty() {
        None
    } else {
        Some(super::agents::Agents::connect(&args.agents, &options).await?)
    };
    let over = match &agents {
        Some(agents) => agents.node_connections(&options).await,
        None => Ok(Vec::new()),
    };
    let over = match over {
        Ok(over) => over,
        Err(e) => {
            if let Some(agents) = agents {
                agents.release().await;
            }
            return Err(e);
        }
    };
    if !endpoints.is_empty() {
        endpoints.extend(over.iter().map(|c| c.endpoint().to_string()));
    }
    let outcome = crate::cleanup::cleanup_over(&args.journal, &endpoints, &options, &secrets, over).await;
    if let Some(agents) = agents {
        agents.release().await;
    }
    let outcome = outcome.map_err(CliError::usage)?;
    print!("{}", scrubber.scrub(&outcome.to_string()));
    if let Err(e) = journal::compact(&args.journal) {
        eprintln!("warning: {}", scrubber.scrub(&e.to_string()));
    }
    Ok(if outcome.is_complete() { EXIT_OK } else { EXIT_FINDINGS })
}
