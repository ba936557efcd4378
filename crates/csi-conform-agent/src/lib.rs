//! csi-conform-agent: `csi-conform agent`, one process per node, beside the node plugin, that a run reaches over
//! gRPC (mutual TLS) instead of the plugin's socket. It forwards the plugin's CSI Identity and
//! Node calls byte for byte ([`forward`]), answers for the node's paths, mounts and data
//! markers from the plugin's own mount namespace ([`service`]), reports the node's facts, and
//! holds what the run did on the node under a lease ([`lease`]): when the run stops renewing
//! it, the agent undoes that work, so a run that dies leaves no mount behind. `agent certs`
//! makes the CA and certificates of a run and its agents ([`tls`]); [`client`] is the run's
//! side of the wire, and [`nomad`] finds the agents through Nomad's service discovery.

use std::{path::PathBuf, time::Duration};

pub mod client;
pub mod forward;
pub mod lease;
pub mod node;
pub mod nomad;
pub mod service;
pub mod tls;

/// Generated prost/tonic code of `proto/agent.proto` (compiled by csi-proto's build.rs, beside
/// `proto/csi.proto`).
pub use csi_proto::agent_wire as wire;

use csi_client::{marker, peer};
use csi_proto::{proto, units};

/// The name every agent certificate carries, and every run checks: agents are reached by
/// addresses the orchestrator hands out (pod IPs), never known when the certificates are made.
pub const AGENT_NAME: &str = "csi-conform-agent";

/// The name a run's client certificate carries.
pub const RUN_NAME: &str = "csi-conform-run";

/// The metadata header every forwarded CSI call carries: the id of the run's lease. The agent
/// forwards only calls of the run that holds it (and takes the header off before the plugin
/// sees the call), so what it forwarded under a lease is the work that lease's lapse undoes.
pub const LEASE_HEADER: &str = "csi-conform-lease";

/// The default port of an agent.
pub const DEFAULT_PORT: u16 = 7443;

/// The longest lease a run may ask for: an agent never holds a dead run's mounts longer.
pub const MAX_LEASE: Duration = Duration::from_secs(600);

/// `csi-conform agent`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AgentArgs {
    /// `agent certs`; without a subcommand, the agent serves.
    #[command(subcommand)]
    pub command: Option<AgentCommand>,

    /// How the agent serves.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// The subcommands of `agent`.
#[derive(Debug, clap::Subcommand)]
pub enum AgentCommand {
    /// Make a CA and the certificates of one run and its agents (ca.pem, agent.pem,
    /// agent-key.pem, run.pem, run-key.pem) in DIR. The CA's key is not kept: a new run gets
    /// new certificates, and an old run's certificate opens no new run's agents.
    Certs {
        /// The directory to write them to (made if missing; files in it are replaced).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// `csi-conform agent` (serving).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// The node plugin's socket, as seen from the agent (`unix:///csi/csi.sock`).
    #[arg(long, value_name = "ENDPOINT", env = "CSI_ENDPOINT")]
    pub plugin_endpoint: Option<csi_client::client::Endpoint>,

    /// Where the agent listens: `tcp://0.0.0.0:7443`, `tcp://[::]:7443` or `unix:///path`.
    #[arg(long, value_name = "ADDR", default_value = "tcp://0.0.0.0:7443")]
    pub listen: csi_client::client::Endpoint,

    /// The only directory the agent lets the run's staging and target paths be in (the run's
    /// --work-dir must be inside it); it must be visible to the node plugin at the same path.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/kubelet/plugins/csi-conform")]
    pub work_dir: PathBuf,

    /// The directory holding ca.pem, agent.pem and agent-key.pem (`agent certs`): only a
    /// client whose certificate that CA signed is served.
    #[arg(long, value_name = "DIR")]
    pub tls_dir: Option<PathBuf>,

    /// Serve without TLS: only on a unix socket (whose file permissions guard it).
    #[arg(long)]
    pub no_tls: bool,

    /// How long the agent waits for the node plugin's socket.
    #[arg(long, value_parser = crate::units::parse_duration, default_value = "30s")]
    pub connect_timeout: Duration,
}

/// Why the agent could not serve.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A flag or file is wrong.
    #[error("{0}")]
    Usage(String),
    /// The node plugin could not be reached.
    #[error("the node plugin: {0}")]
    Plugin(String),
    /// Serving failed.
    #[error("serving: {0}")]
    Serve(String),
}

/// Runs `csi-conform agent ...` to its end.
pub async fn main(args: AgentArgs) -> Result<(), AgentError> {
    match args.command {
        Some(AgentCommand::Certs { out }) => {
            let written = tls::write_certs(&out).map_err(|e| AgentError::Usage(e.to_string()))?;
            for path in written {
                println!("{}", path.display());
            }
            Ok(())
        }
        None => service::serve(args.serve, shutdown_signal()).await,
    }
}

/// SIGINT or SIGTERM: the agent undoes what a run left and stops.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}
