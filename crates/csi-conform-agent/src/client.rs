//! The run's side of an agent: a channel over mutual TLS (TCP, or a unix socket), the agent's
//! facts, and the lease the run keeps renewed while it runs (a third of the lease's time
//! apart), released when the run ends.

use std::{path::Path, time::Duration};

use tonic::transport::{Channel, ClientTlsConfig};

use super::wire::{self, agent_client::AgentClient};
use csi_client::client::Endpoint;

/// Why an agent could not be reached or used.
#[derive(Debug, thiserror::Error)]
pub enum AgentClientError {
    /// No connection.
    #[error("node agent {agent}: cannot connect: {detail}")]
    Connect {
        /// The agent's address.
        agent: String,
        /// Why.
        detail: String,
    },
    /// The agent refused or failed a call.
    #[error("node agent {agent}: {rpc}: {message}")]
    Call {
        /// The agent's address.
        agent: String,
        /// The call.
        rpc: &'static str,
        /// The agent's answer.
        message: String,
    },
}

/// One agent, connected.
#[derive(Debug, Clone)]
pub struct AgentLink {
    address: Endpoint,
    channel: Channel,
}

impl AgentLink {
    /// Connects to the agent at `address` within `timeout`, with `tls` (none: a unix socket
    /// served with --no-tls).
    pub async fn connect(address: &Endpoint, tls: Option<ClientTlsConfig>, timeout: Duration) -> Result<AgentLink, AgentClientError> {
        let err = |detail: String| AgentClientError::Connect { agent: address.to_string(), detail };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let uri = match address {
            Endpoint::Tcp { host, port } if host.contains(':') => format!("{scheme}://[{host}]:{port}"),
            Endpoint::Tcp { host, port } => format!("{scheme}://{host}:{port}"),
            Endpoint::Unix(_) => format!("{scheme}://{}", super::AGENT_NAME),
        };
        let mut endpoint = tonic::transport::Endpoint::from_shared(uri).map_err(|e| err(e.to_string()))?.connect_timeout(timeout);
        if let Some(tls) = tls {
            endpoint = endpoint.tls_config(tls).map_err(|e| err(csi_client::client::error_chain(&e)))?;
        }
        let channel = match address {
            Endpoint::Tcp { .. } => endpoint.tcp_nodelay(true).connect().await,
            Endpoint::Unix(path) => {
                let path = path.clone();
                endpoint
                    .connect_with_connector(tower::service_fn(move |_: http::Uri| {
                        let path = path.clone();
                        async move {
                            let stream = tokio::net::UnixStream::connect(path).await?;
                            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                        }
                    }))
                    .await
            }
        }
        .map_err(|e| err(csi_client::client::error_chain(&e)))?;
        Ok(AgentLink { address: address.clone(), channel })
    }

    /// The agent's address.
    pub fn address(&self) -> &Endpoint {
        &self.address
    }

    /// The channel (the node plugin's CSI calls go over it too).
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// The agent's own client.
    pub fn client(&self) -> AgentClient<Channel> {
        AgentClient::new(self.channel.clone())
    }

    fn call_err(&self, rpc: &'static str) -> impl FnOnce(tonic::Status) -> AgentClientError + '_ {
        move |s| AgentClientError::Call { agent: self.address.to_string(), rpc, message: s.message().to_owned() }
    }

    /// The node's facts.
    pub async fn facts(&self) -> Result<wire::FactsResponse, AgentClientError> {
        self.client().facts(wire::FactsRequest {}).await.map(|r| r.into_inner()).map_err(self.call_err("Facts"))
    }

    /// Takes or renews the lease for `run_id`.
    pub async fn renew(&self, run_id: &str, ttl: Duration) -> Result<Duration, AgentClientError> {
        let request = wire::RenewRequest { run_id: run_id.to_owned(), ttl_ms: ttl.as_millis() as u64 };
        self.client()
            .renew(request)
            .await
            .map(|r| Duration::from_millis(r.into_inner().ttl_ms))
            .map_err(self.call_err("Renew"))
    }

    /// Ends the lease: the agent undoes what is left of the run's work on its node.
    pub async fn release(&self, run_id: &str) -> Result<wire::ReleaseResponse, AgentClientError> {
        let request = wire::ReleaseRequest { run_id: run_id.to_owned() };
        self.client().release(request).await.map(|r| r.into_inner()).map_err(self.call_err("Release"))
    }
}

/// Keeps `run_id`'s lease on every agent renewed, a third of `ttl` apart, until dropped. A
/// renewal that fails is logged; the agent undoes the run's work once the lease lapses.
pub fn keep_renewed(agents: Vec<AgentLink>, run_id: String, ttl: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(ttl / 3).await;
            for agent in &agents {
                if let Err(e) = agent.renew(&run_id, ttl).await {
                    tracing::warn!("{e}");
                }
            }
        }
    })
}

/// The TLS of a run, from the directory `agent certs` wrote.
pub fn run_tls(dir: &Path) -> Result<ClientTlsConfig, super::tls::TlsError> {
    super::tls::client_config(dir)
}
