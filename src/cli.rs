//! The command line: argument parsing, logging set-up, and turning library errors into
//! readable messages with documented exit codes.
//!
//! Exit codes: `0` everything passed, `1` findings failed, `2` usage, configuration or
//! connection error, `130`/`143` interrupted by SIGINT/SIGTERM.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::{
    client::{self, ClientOptions, Endpoint, Targets},
    fingerprint::Fingerprint,
};

/// Every run passed (or only skipped/warned without `--strict`).
pub const EXIT_OK: u8 = 0;
/// At least one finding failed.
pub const EXIT_FINDINGS: u8 = 1;
/// Bad usage, configuration, suite, or no connection to the plugin.
pub const EXIT_USAGE: u8 = 2;

/// csi-conform: a Kubernetes-free sanity and conformance harness for CSI plugins.
#[derive(Debug, Parser)]
#[command(name = "csi-conform", version, about, long_about = None, after_help = EXIT_CODES_HELP)]
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
130/143 interrupted (SIGINT/SIGTERM).";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Connect to a plugin and print what it says about itself (identity, capabilities, nodes).
    Fingerprint(FingerprintArgs),
    /// Serve the bundled reference plugin: every CSI v1.12 RPC, as the spec says.
    ReferencePlugin(crate::reference::Args),
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
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::units::parse_duration)]
    pub connect_timeout: Duration,

    /// The deadline of every RPC.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::units::parse_duration)]
    pub rpc_timeout: Duration,

    /// The largest response message accepted from the plugin, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = client::DEFAULT_MAX_MESSAGE_SIZE)]
    pub max_message_size: usize,
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
    let cli = Cli::parse();
    init_logging(cli.verbose, cli.quiet);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}

fn init_logging(verbose: u8, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none())
        .with_target(false)
        .try_init();
}

async fn dispatch(cli: Cli) -> Result<u8, CliError> {
    match cli.command {
        Command::Fingerprint(args) => fingerprint(args).await,
        Command::ReferencePlugin(args) => crate::reference::run(args)
            .await
            .map(|()| EXIT_OK)
            .map_err(CliError::usage),
    }
}

async fn fingerprint(args: FingerprintArgs) -> Result<u8, CliError> {
    let targets = args.connect.targets();
    if targets.is_empty() {
        return Err(CliError::usage(
            "no plugin endpoint: give --endpoint (or --controller-endpoint / --node-endpoint, or CSI_ENDPOINT)",
        ));
    }
    let connections = targets
        .connect(&args.connect.client_options())
        .await
        .map_err(CliError::usage)?;
    let fingerprint = Fingerprint::collect(connections.controller.as_ref(), &connections.nodes)
        .await
        .map_err(CliError::usage)?;
    match args.format {
        Format::Table => print!("{}", fingerprint.to_table()),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&fingerprint).map_err(CliError::usage)?
        ),
    }
    Ok(EXIT_OK)
}

/// Where reports go by default: `reports/` under the working directory.
pub fn default_reports_dir() -> PathBuf {
    PathBuf::from("reports")
}
