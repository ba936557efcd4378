//! One run from connect to exit: a [`Session`] (what the command line parsed: the run's
//! settings, its suites, the plugin's endpoints, where the reports go) connects and
//! fingerprints the plugin, undoes what an earlier run left when asked to, runs the suites
//! under a journal with the live console, settles what is in doubt, writes and prints the
//! reports, and says how the run [`Ended`]. The command line maps that to its exit code.

use std::{
    future::Future,
    path::{Path, PathBuf},
    pin::Pin,
    sync::Arc,
};

use crate::{
    client::{ClientOptions, Connections, Targets},
    fingerprint::{Capability, Fingerprint, PluginService},
    journal::{self, Journal, JournalObserver},
    report::{
        self, ExpectedFailures, RunReport,
        progress::{self, ConsoleProgress, Mode},
    },
    scrub::Scrubber,
    suite::{self, RunConfig, Suite},
    version::SpecVersion,
};

/// What stops a session before its run ends (the command line's usage, configuration or
/// connection error, exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SessionError(pub String);

impl SessionError {
    fn new(message: impl std::fmt::Display) -> Self {
        SessionError(message.to_string())
    }
}

/// How a session's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every scenario passed (or only skipped or warned without `--strict`).
    Passed,
    /// A finding failed.
    Failed,
    /// A signal stopped it: the exit code it calls for (130 SIGINT, 143 SIGTERM).
    Interrupted(u8),
}

/// Where the reports go, and how they are written.
#[derive(Debug, Clone)]
pub struct Reports {
    /// `--junit`.
    pub junit: PathBuf,
    /// `--json`.
    pub json: PathBuf,
    /// `--html`.
    pub html: PathBuf,
    /// `--junit-warnings`: what a warning is in JUnit (`passed`, `skipped`, `failure`).
    pub junit_warnings: String,
    /// `--job-summary`.
    pub job_summary: Option<PathBuf>,
    /// `--no-annotations`.
    pub no_annotations: bool,
}

/// A run, as the command line set it up.
pub struct Session {
    /// The run's settings.
    pub config: RunConfig,
    /// The suites to run.
    pub suites: Vec<Suite>,
    /// `--expect-failures`.
    pub expected: Option<ExpectedFailures>,
    /// The plugin's endpoints, by role.
    pub targets: Targets,
    /// `--spec-version`: the version to judge by, inferred when `None`.
    pub spec_version: Option<SpecVersion>,
    /// How to connect.
    pub client: ClientOptions,
    /// `--journal`.
    pub journal: PathBuf,
    /// `--cleanup-first`.
    pub cleanup_first: bool,
    /// `--quiet`: only the summary.
    pub quiet: bool,
    /// `--strict`: warnings fail.
    pub strict: bool,
    /// The reports.
    pub reports: Reports,
    /// The command that replays the run, for the summary.
    pub rerun: String,
}

/// Connects every role and fingerprints the plugin.
/// `spec_version` is `--spec-version`: the version to judge by, inferred when `None`.
pub async fn connect_and_fingerprint(
    targets: &Targets,
    options: &ClientOptions,
    spec_version: Option<SpecVersion>,
) -> Result<(Connections, Fingerprint), SessionError> {
    let connections = targets.connect_noting(options, |wait| eprintln!("{wait}")).await.map_err(SessionError::new)?;
    let mut fingerprint =
        Fingerprint::collect(connections.controller.as_ref(), &connections.nodes).await.map_err(SessionError::new)?;
    fingerprint.state_spec_version(spec_version);
    Ok((connections, fingerprint))
}

/// What a [`Connector`] answers: every role connected and the plugin fingerprinted, or why not.
pub type Connecting<'a> = Pin<Box<dyn Future<Output = Result<(Connections, Fingerprint), String>> + Send + 'a>>;

/// Connects the plugin's roles another way than by their endpoints: the node agents (the
/// command line's), whose node plugins are reached over the agents' own links.
pub trait Connector: Send + Sync {
    /// Connects every role (the controller at `targets`' endpoint) and fingerprints the
    /// plugin, as [`connect_and_fingerprint`] does.
    fn connect<'a>(
        &'a self,
        targets: &'a Targets,
        options: &'a ClientOptions,
        spec_version: Option<SpecVersion>,
    ) -> Connecting<'a>;
}

/// SIGINT and SIGTERM, caught from the moment this is made (so that no signal arriving while
/// the run starts up kills it with resources half-made).
pub struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    /// Starts catching them.
    pub fn catch() -> Result<Self, SessionError> {
        use tokio::signal::unix::{SignalKind, signal};
        let catch = |kind| signal(kind).map_err(|e| SessionError::new(format!("cannot catch signals: {e}")));
        Ok(Signals { int: catch(SignalKind::interrupt())?, term: catch(SignalKind::terminate())? })
    }
}

/// Resolves when the first SIGINT or SIGTERM arrives, with the reason and the exit code it
/// calls for (130 or 143). A second signal ends the process at once, leaving the journal
/// for `csi-conform cleanup`.
pub async fn first_signal(signals: Signals) -> (String, u8) {
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

impl Session {
    /// Runs it: everything from connecting to the last line printed.
    pub async fn run(self, scrubber: &Scrubber) -> Result<Ended, SessionError> {
        self.run_connecting(scrubber, None).await
    }

    /// Runs it, connecting through `connector` when one is given (node agents) rather than
    /// to the targets' endpoints.
    pub async fn run_connecting(self, scrubber: &Scrubber, connector: Option<&dyn Connector>) -> Result<Ended, SessionError> {
        let Session { mut config, suites, expected, targets, spec_version, client, journal, cleanup_first, quiet, strict, reports, rerun } =
            self;
        // Node agents verify their nodes' paths and mounts themselves.
        if config.check_path_cmd.is_none() && connector.is_none() && config.node_agents.is_empty() {
            for (i, node) in targets.nodes.iter().enumerate().filter(|(_, e)| !e.is_local()) {
                tracing::warn!(
                    "node endpoint {i} ({node}) is not on this host: its staging and target paths and mounts \
                     cannot be checked (give --check-path-cmd to check the paths)"
                );
            }
        }

        let endpoints: Vec<String> = targets.distinct().iter().map(ToString::to_string).collect();
        let leftovers = leftovers_on(&journal, &endpoints)?;
        if !leftovers.is_empty() && !cleanup_first {
            return Err(SessionError(format!(
                "{} lists {} resource(s) an earlier run may have left on this plugin; run `csi-conform cleanup --journal {}` or pass --cleanup-first",
                journal.display(),
                leftovers.len(),
                journal.display()
            )));
        }

        let signals = Signals::catch()?;
        let (connections, fingerprint) = match connector {
            Some(connector) => connector.connect(&targets, &client, spec_version).await.map_err(SessionError)?,
            None => connect_and_fingerprint(&targets, &client, spec_version).await?,
        };
        if !leftovers.is_empty() {
            let cleaned = crate::cleanup::undo(&journal, &leftovers, &connections, &config.secrets).await;
            eprint!("{}", scrubber.scrub(&cleaned.to_string()));
            if !cleaned.is_complete() {
                return Err(SessionError(format!(
                    "--cleanup-first could not undo everything {} lists; not starting",
                    journal.display()
                )));
            }
        }

        // Unique per process, so that replays with the same --seed never share journal ids.
        let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let run_id = format!("{:016x}-{}-{}", config.seed, std::process::id(), started.as_millis());
        let opened = Journal::open(&journal, &run_id).map_err(SessionError::new)?;
        let observer = Arc::new(JournalObserver::new(
            opened,
            targets.controller.as_ref().map(ToString::to_string),
            targets.nodes.iter().map(ToString::to_string).collect(),
        ));
        config.observer = Some(observer.clone());

        let color = progress::color_for(std::io::IsTerminal::is_terminal(&std::io::stdout()));
        let console = ConsoleProgress::new(Mode::detect(quiet), color, strict, expected.clone());
        config.progress = Some(console.clone());

        // An endpoint that advertises CONTROLLER_SERVICE without serving it (a node instance
        // of a split deployment, see `Fingerprint::collect`) is no controller for this run.
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
            let connections = Connections { controller: plugin.controller.clone(), nodes: plugin.nodes.clone() };
            let settled =
                crate::cleanup::settle_run(&journal, &run_id, &connections, &config.secrets, config.cleanup_timeout, config.reconnect)
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
        // Every string of the report scrubbed (in every encoding) and then capped, before any
        // of it is written or printed: what a plugin sent back is repeated in every report.
        let report = match scrubber.clean(&report) {
            Some(cleaned) => cleaned,
            None => {
                // A held value spells one of the report's own words: what the scenarios
                // recorded was scrubbed as it was recorded; the rest is written as it is.
                tracing::warn!("the report could not be scrubbed as a whole; its findings were scrubbed as they were made");
                report
            }
        };
        reports.write(&report)?;
        let github = report::annotations::enabled(std::env::var("GITHUB_ACTIONS").ok().as_deref(), reports.no_annotations);
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
        let mut files = reports.files();
        let job_summary = reports.job_summary.clone().or_else(|| {
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
        let left = leftovers_on(&journal, &endpoints)?.len();
        if left > 0 {
            eprintln!(
                "warning: {} lists {left} resource(s) or unanswered call(s) left on the plugin (not undone within --cleanup-timeout {} and {} --reconnect-attempts); undo them with `csi-conform cleanup --journal {}`",
                journal.display(),
                crate::client::human_duration(config.cleanup_timeout),
                config.reconnect.attempts,
                journal.display()
            );
        }
        let signal_code = *interrupted.lock().unwrap_or_else(|p| p.into_inner());
        Ok(match signal_code {
            Some(code) => Ended::Interrupted(code),
            None if report.failed() => Ended::Failed,
            None => Ended::Passed,
        })
    }
}

/// What the journal at `path` still lists on any of `endpoints`.
pub fn leftovers_on(path: &Path, endpoints: &[String]) -> Result<Vec<(String, journal::Outstanding)>, SessionError> {
    let all = journal::outstanding(path).map_err(SessionError::new)?;
    Ok(all.into_iter().filter(|(_, r)| endpoints.iter().any(|e| e == r.endpoint())).collect())
}

impl Reports {
    /// Writes the JUnit, JSON and HTML reports.
    pub fn write(&self, report: &RunReport) -> Result<(), SessionError> {
        let warnings_as = self.junit_warnings.parse().map_err(SessionError::new)?;
        report::write_atomically(&self.junit, &report::junit::to_junit_xml_with(report, warnings_as))
            .map_err(SessionError::new)?;
        report::write_reports(report, None, Some(&self.json)).map_err(SessionError::new)?;
        report::write_atomically(&self.html, &report::html::to_html(report)).map_err(SessionError::new)
    }

    /// The report files a run writes, `(what, path)`, for the line that ends its output.
    fn files(&self) -> Vec<(&'static str, &Path)> {
        vec![("JUnit", self.junit.as_path()), ("JSON", self.json.as_path()), ("HTML", self.html.as_path())]
    }
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
