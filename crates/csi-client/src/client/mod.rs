//! Talking to a plugin: endpoints, a bounded connect (socket appears, server answers, Probe
//! says ready), and RPC calls that always carry a deadline and come back as [`RpcError`]s an
//! operator can act on.
//!
//! One [`Connection`] per endpoint is made and reused for the whole run: a tonic channel is
//! cheap to clone and multiplexes concurrent calls over one HTTP/2 connection.
//!
//! Every answer, OK or not, is checked against the spec's response rules ([`crate::rules`])
//! here, whoever made the call: the violations go to the [`RuleLog`] of the caller
//! ([`Connection::with_rules`]), or to the log when a caller keeps none.

mod codec;
mod endpoint;
mod error;
mod heard;
mod latency;

use std::{
    collections::BTreeMap,
    future::Future,
    io,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU8, Ordering},
    },
    time::{Duration, Instant},
};

use prost_reflect::{DynamicMessage, MethodDescriptor};
use tonic::transport::Channel;

pub use codec::DynamicCodec;
pub use endpoint::{Endpoint, EndpointError};
pub use latency::{LATENCY_WINDOW, LEAST_PAUSE, Latency, Pacer, Scaled};
pub use error::{
    ConnectError, ErrorOrigin, RpcError, code_name, direction, human_duration, parse_code,
};

use crate::rules::RuleLog;

use crate::proto::v1::{
    self, controller_client::ControllerClient, group_controller_client::GroupControllerClient,
    identity_client::IdentityClient, node_client::NodeClient,
    snapshot_metadata_client::SnapshotMetadataClient,
};

/// Limits that apply to every connection and call.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long [`Connection::connect`] waits for the socket, the server and readiness.
    pub connect_timeout: Duration,
    /// The deadline of every single RPC.
    pub rpc_timeout: Duration,
    /// The largest response message accepted, in bytes.
    pub max_message_size: usize,
}

/// The default `--connect-timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The default `--rpc-timeout`.
pub const DEFAULT_RPC_TIMEOUT: Duration = Duration::from_secs(30);
/// The default `--max-message-size` (gRPC's usual 4 MiB).
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 * 1024 * 1024;

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            rpc_timeout: DEFAULT_RPC_TIMEOUT,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
        }
    }
}

/// Latency and outcome counts of the calls made over a connection, per RPC.
#[derive(Debug, Default)]
pub struct CallStats {
    by_rpc: Mutex<BTreeMap<String, RpcStats>>,
    /// The answer times of the latest calls the plugin answered (see [`Latency`]).
    latency: Latency,
    /// Per RPC: calls sent, whether answered yet or not (see [`CallStats::sent`]).
    sent: Mutex<BTreeMap<String, u64>>,
}

/// What [`CallStats`] keeps for one RPC.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RpcStats {
    /// Calls made.
    pub calls: u64,
    /// Calls that ended in an error code (including expected ones).
    pub errors: u64,
    /// Each call's duration, in the order they finished.
    #[serde(skip)]
    pub durations: Vec<Duration>,
}

impl CallStats {
    fn record(&self, rpc: &str, elapsed: Duration, ok: bool) {
        let mut map = self.by_rpc.lock().unwrap_or_else(|p| p.into_inner());
        let entry = map.entry(rpc.to_owned()).or_default();
        entry.calls += 1;
        entry.errors += u64::from(!ok);
        entry.durations.push(elapsed);
    }

    /// A copy of the statistics so far, by RPC name.
    pub fn snapshot(&self) -> BTreeMap<String, RpcStats> {
        self.by_rpc.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The plugin's observed answer times on this connection.
    pub fn latency(&self) -> &Latency {
        &self.latency
    }

    fn sending(&self, rpc: &str) {
        *self.sent.lock().unwrap_or_else(|p| p.into_inner()).entry(rpc.to_owned()).or_default() += 1;
    }

    /// How many calls of these RPCs were sent, and how many of them ended (answered or not),
    /// so far: two readings that differ tell that one of them was sent, or ended, in between,
    /// or was in flight (a listing's cursor moved by the run's own creates and deletes).
    pub fn sent(&self, rpcs: &[&str]) -> (u64, u64) {
        let sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        let by_rpc = self.by_rpc.lock().unwrap_or_else(|p| p.into_inner());
        rpcs.iter().fold((0, 0), |(s, e), rpc| {
            (s + sent.get(*rpc).copied().unwrap_or(0), e + by_rpc.get(*rpc).map_or(0, |r| r.calls))
        })
    }
}

/// A live, probed connection to one plugin endpoint.
#[derive(Debug, Clone)]
pub struct Connection {
    endpoint: Endpoint,
    channel: Channel,
    options: ClientOptions,
    stats: Arc<CallStats>,
    /// Where the response rules' violations of this handle's calls go.
    rules: Option<RuleLog>,
    /// A metadata entry every call carries (a node agent's lease tag, see [`Self::over`]).
    tag: Option<(&'static str, tonic::metadata::AsciiMetadataValue)>,
}

impl Connection {
    /// Connects to `endpoint` within `options.connect_timeout`: waits for the socket to
    /// appear, for the server to accept, and for `Probe` to report ready (or leave `ready`
    /// unset). Each failure mode gets its own [`ConnectError`].
    pub async fn connect(endpoint: Endpoint, options: ClientOptions) -> Result<Self, ConnectError> {
        Self::connect_noting(endpoint, options, |_| {}).await
    }

    /// [`Self::connect`], telling `note` once, after [`WAIT_NOTICE_AFTER`], what it is still
    /// waiting for and which flag bounds the wait: `waiting for the socket /run/csi.sock to
    /// appear (up to 30s, --connect-timeout)`. A connection made sooner says nothing.
    pub async fn connect_noting(
        endpoint: Endpoint,
        options: ClientOptions,
        note: impl FnOnce(String),
    ) -> Result<Self, ConnectError> {
        let phase = AtomicU8::new(Phase::Socket as u8);
        let connect = Self::connect_in_phases(endpoint.clone(), options.clone(), &phase);
        tokio::pin!(connect);
        tokio::select! {
            done = &mut connect => return done,
            () = tokio::time::sleep(WAIT_NOTICE_AFTER) => {}
        }
        note(Phase::from(phase.load(Ordering::Relaxed)).waiting_for(&endpoint, &options));
        connect.await
    }

    async fn connect_in_phases(endpoint: Endpoint, options: ClientOptions, phase: &AtomicU8) -> Result<Self, ConnectError> {
        let started = Instant::now();
        let deadline = started + options.connect_timeout;
        if let Endpoint::Unix(path) = &endpoint {
            wait_for_socket(path, started, deadline).await?;
        }
        phase.store(Phase::Server as u8, Ordering::Relaxed);
        let channel = open_channel(&endpoint, started, deadline).await?;
        phase.store(Phase::Probe as u8, Ordering::Relaxed);
        let connection = Connection {
            endpoint,
            channel,
            options,
            stats: Arc::default(),
            rules: None,
            tag: None,
        };
        connection.wait_until_ready(started, deadline).await?;
        Ok(connection)
    }

    /// A connection to `endpoint` over a `channel` made elsewhere (a node agent's, over mutual
    /// TLS), probed as [`Self::connect`] probes, within `options.connect_timeout`. With `tag`,
    /// every call (the probe too) carries that metadata entry (a node agent forwards only calls
    /// tagged with the lease of the run that holds it).
    pub async fn over(
        endpoint: Endpoint,
        channel: Channel,
        options: ClientOptions,
        tag: Option<(&'static str, tonic::metadata::AsciiMetadataValue)>,
    ) -> Result<Self, ConnectError> {
        let started = Instant::now();
        let deadline = started + options.connect_timeout;
        let connection = Connection { endpoint, channel, options, stats: Arc::default(), rules: None, tag };
        connection.wait_until_ready(started, deadline).await?;
        Ok(connection)
    }

    /// The same connection, with the response rules' violations of its calls going to `log`
    /// (a caller's own, so that each finding lands with the caller that made the call).
    pub fn with_rules(&self, log: &RuleLog) -> Connection {
        Connection { rules: Some(log.clone()), ..self.clone() }
    }

    /// The same connection, its calls allowed `rpc_timeout` each (a run's last re-asks of
    /// calls in doubt wait out what is left of --cleanup-timeout).
    pub fn with_rpc_timeout(&self, rpc_timeout: Duration) -> Connection {
        Connection { options: ClientOptions { rpc_timeout, ..self.options.clone() }, ..self.clone() }
    }

    /// Records the violations of a successful answer (one message, or a stream's messages).
    fn check_answer(&self, rpc: &str, request: &DynamicMessage, messages: &[DynamicMessage]) {
        match &self.rules {
            Some(log) => log.answer(rpc, request, messages),
            None => log_unowned(crate::rules::check_answer(rpc, request, messages)),
        }
    }

    /// The endpoint this connection talks to.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The limits this connection applies.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// Per-RPC latency and outcome counts of every call made through this connection.
    pub fn stats(&self) -> &CallStats {
        &self.stats
    }

    /// The underlying channel, for callers that bring their own client (benchmarks).
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// A typed Identity client on this connection.
    pub fn identity(&self) -> IdentityClient<Channel> {
        IdentityClient::new(self.channel.clone()).max_decoding_message_size(self.options.max_message_size)
    }

    /// A typed Controller client on this connection.
    pub fn controller(&self) -> ControllerClient<Channel> {
        ControllerClient::new(self.channel.clone()).max_decoding_message_size(self.options.max_message_size)
    }

    /// A typed Node client on this connection.
    pub fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(self.channel.clone()).max_decoding_message_size(self.options.max_message_size)
    }

    /// A typed GroupController client on this connection.
    pub fn group_controller(&self) -> GroupControllerClient<Channel> {
        GroupControllerClient::new(self.channel.clone())
            .max_decoding_message_size(self.options.max_message_size)
    }

    /// A typed SnapshotMetadata client on this connection.
    pub fn snapshot_metadata(&self) -> SnapshotMetadataClient<Channel> {
        SnapshotMetadataClient::new(self.channel.clone())
            .max_decoding_message_size(self.options.max_message_size)
    }

    /// Runs one typed RPC under the connection's deadline and records it in [`Self::stats`].
    ///
    /// ```no_run
    /// # async fn f(conn: csi_client::client::Connection) -> Result<(), csi_client::client::RpcError> {
    /// use csi_proto::proto::v1::GetPluginInfoRequest;
    /// let mut identity = conn.identity();
    /// let info = conn
    ///     .call("GetPluginInfo", GetPluginInfoRequest {}, |r| async move { identity.get_plugin_info(r).await })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn call<Req, Resp, F, Fut>(&self, rpc: &str, request: Req, send: F) -> Result<Resp, RpcError>
    where
        Req: prost::Message + prost::Name,
        Resp: prost::Message + prost::Name,
        F: FnOnce(tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let sent = crate::proto::to_dynamic(&request);
        let answer = self.call_within(rpc, request, self.options.rpc_timeout, None, send).await;
        if let Ok(response) = &answer {
            self.check_answer(rpc, &sent, &[crate::proto::to_dynamic(response)]);
        }
        answer
    }

    async fn call_within<Req, Resp, F, Fut>(
        &self,
        rpc: &str,
        request: Req,
        timeout: Duration,
        heard: Option<&AtomicBool>,
        send: F,
    ) -> Result<Resp, RpcError>
    where
        F: FnOnce(tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let mut request = tonic::Request::new(request);
        request.set_timeout(timeout);
        if let Some((key, value)) = &self.tag {
            request.metadata_mut().insert(*key, value.clone());
        }
        self.stats.sending(rpc);
        let started = Instant::now();
        let outcome = tokio::time::timeout(timeout, send(request)).await;
        let elapsed = started.elapsed();
        let result = match outcome {
            Ok(Ok(response)) => Ok(response.into_inner()),
            // A server that enforces our grpc-timeout header answers CANCELLED (tonic) or
            // DEADLINE_EXCEEDED (grpc-go) at about the deadline: that is our deadline too.
            Ok(Err(status))
                if matches!(status.code(), tonic::Code::Cancelled | tonic::Code::DeadlineExceeded)
                    && elapsed >= timeout.mul_f64(0.9) =>
            {
                Err(RpcError::deadline(rpc, timeout))
            }
            Ok(Err(status)) => {
                let mut error = RpcError::from_status(rpc, &status, elapsed);
                // No response came: the status is the client library's or the transport's
                // own (tonic's UNAVAILABLE for a connection lost mid-call, say), not the
                // plugin's answer. Whether the plugin acted on the call is unknown.
                if error.origin == ErrorOrigin::Plugin && heard.is_some_and(|h| !heard::answered(h)) {
                    error.origin = ErrorOrigin::Transport;
                    error.message = format!("no answer from the plugin; the client library says: {}", error.message);
                }
                if error.origin == ErrorOrigin::Plugin {
                    match &self.rules {
                        Some(log) => log.error(rpc, error.code_name(), status.message(), status.details()),
                        None => log_unowned(crate::rules::check_error(
                            rpc,
                            error.code_name(),
                            status.message(),
                            status.details(),
                        )),
                    }
                }
                Err(error)
            }
            Err(_) => Err(RpcError::deadline(rpc, timeout)),
        };
        self.stats.record(rpc, elapsed, result.is_ok());
        // Only what the plugin answered tells its pace (not a deadline, nor a lost connection).
        if result.as_ref().err().is_none_or(|e| e.origin == ErrorOrigin::Plugin) {
            self.stats.latency.record(elapsed);
        }
        tracing::debug!(
            rpc,
            elapsed_ms = elapsed.as_secs_f64() * 1000.0,
            code = result.as_ref().err().map_or("OK", RpcError::code_name),
            "rpc"
        );
        result
    }

    /// Calls any unary CSI RPC with a request built at run time; the response comes back as
    /// a dynamic message of the method's output type.
    pub async fn call_dynamic(
        &self,
        method: &MethodDescriptor,
        request: DynamicMessage,
    ) -> Result<DynamicMessage, RpcError> {
        let path = method_path(method);
        let codec = DynamicCodec::new(method.output());
        let channel = heard::Heard::new(self.channel.clone());
        let heard = channel.flag();
        let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(self.options.max_message_size);
        let answer = self
            .call_within(method.name(), request.clone(), self.options.rpc_timeout, Some(&heard), |r| async move {
                grpc.ready().await.map_err(|e| tonic::Status::from_error(Box::new(e)))?;
                grpc.unary(r, path, codec).await
            })
            .await;
        if let Ok(response) = &answer {
            self.check_answer(method.name(), &request, std::slice::from_ref(response));
        }
        answer
    }

    /// Calls a server-streaming CSI RPC (the SnapshotMetadata service) and collects every
    /// message of the stream, all under one deadline.
    pub async fn call_dynamic_streaming(
        &self,
        method: &MethodDescriptor,
        request: DynamicMessage,
    ) -> Result<Vec<DynamicMessage>, RpcError> {
        let path = method_path(method);
        let codec = DynamicCodec::new(method.output());
        let channel = heard::Heard::new(self.channel.clone());
        let heard = channel.flag();
        let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(self.options.max_message_size);
        let sent = request.clone();
        let answer = self.call_within(method.name(), request, self.options.rpc_timeout, Some(&heard), |r| async move {
            grpc.ready().await.map_err(|e| tonic::Status::from_error(Box::new(e)))?;
            let response = grpc.server_streaming(r, path, codec).await?;
            let (metadata, mut stream, extensions) = response.into_parts();
            let mut messages = Vec::new();
            while let Some(message) = stream.message().await? {
                messages.push(message);
            }
            Ok(tonic::Response::from_parts(metadata, messages, extensions))
        })
        .await;
        if let Ok(messages) = &answer {
            self.check_answer(method.name(), &sent, messages);
        }
        answer
    }

    /// One Probe within `timeout`: whether the plugin answers and says it is ready (`ready`
    /// unset counts as ready). Over a connection that was lost, this is also how the channel
    /// reconnects: tonic dials the endpoint again for the call.
    pub async fn probe(&self, timeout: Duration) -> Result<bool, RpcError> {
        let mut identity = self.identity();
        let response = self
            .call_within("Probe", v1::ProbeRequest {}, timeout, None, |r| async move { identity.probe(r).await })
            .await?;
        Ok(response.ready != Some(false))
    }

    async fn wait_until_ready(&self, started: Instant, deadline: Instant) -> Result<(), ConnectError> {
        let mut not_ready = 0u32;
        let mut last_error: Option<RpcError> = None;
        loop {
            // Probe may take all the connect time left, not just --rpc-timeout: a plugin that
            // answers, but slower than --rpc-timeout, is then told as slow, not as silent.
            let remaining = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10));
            let mut identity = self.identity();
            let asked = Instant::now();
            let outcome = self
                .call_within("Probe", v1::ProbeRequest {}, remaining, None, |r| async move {
                    identity.probe(r).await
                })
                .await;
            let took = asked.elapsed();
            let answered = outcome.as_ref().map_or_else(|e| matches!(e.origin, ErrorOrigin::Plugin | ErrorOrigin::Decode), |_| true);
            if answered && took > self.options.rpc_timeout {
                return Err(ConnectError::SlowProbe {
                    endpoint: self.endpoint.clone(),
                    took,
                    rpc_timeout: self.options.rpc_timeout,
                });
            }
            match outcome {
                Ok(response) => match response.ready {
                    None | Some(true) => return Ok(()),
                    Some(false) => not_ready += 1,
                },
                Err(e) if e.origin == ErrorOrigin::Deadline => {
                    if Instant::now() >= deadline {
                        return Err(ConnectError::Silent {
                            endpoint: self.endpoint.clone(),
                            waited: started.elapsed(),
                        });
                    }
                }
                Err(e) if e.origin == ErrorOrigin::Transport => {
                    return Err(ConnectError::NotGrpc {
                        endpoint: self.endpoint.clone(),
                        detail: e.message,
                    });
                }
                Err(e) if e.code == tonic::Code::Unimplemented => {
                    return Err(ConnectError::NotCsi {
                        endpoint: self.endpoint.clone(),
                        code: e.code_name(),
                        detail: e.message,
                    });
                }
                Err(e) => last_error = Some(e),
            }
            if Instant::now() >= deadline {
                let waited = started.elapsed();
                return Err(match last_error {
                    Some(error) if not_ready == 0 => ConnectError::Unhealthy {
                        endpoint: self.endpoint.clone(),
                        error,
                        waited,
                    },
                    _ => ConnectError::NeverReady {
                        endpoint: self.endpoint.clone(),
                        waited,
                        probes: not_ready,
                    },
                });
            }
            let pause = Duration::from_millis(100).min(deadline.saturating_duration_since(Instant::now()));
            tokio::time::sleep(pause).await;
        }
    }
}

/// How long a connection is made in silence before [`Connection::connect_noting`] says what it
/// waits for.
pub const WAIT_NOTICE_AFTER: Duration = Duration::from_secs(1);

/// What a connection attempt is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    /// The unix socket file to appear.
    Socket,
    /// A server to accept the connection.
    Server,
    /// Probe to answer ready.
    Probe,
}

impl From<u8> for Phase {
    fn from(n: u8) -> Self {
        match n {
            0 => Phase::Socket,
            1 => Phase::Server,
            _ => Phase::Probe,
        }
    }
}

impl Phase {
    /// One line for a person watching the console.
    fn waiting_for(self, endpoint: &Endpoint, options: &ClientOptions) -> String {
        let bound = format!("up to {}, --connect-timeout", human_duration(options.connect_timeout));
        match (self, endpoint) {
            (Phase::Socket, Endpoint::Unix(path)) => {
                format!("waiting for the socket {} to appear ({bound})", path.display())
            }
            (Phase::Socket | Phase::Server, _) => {
                format!("waiting for a server to accept connections at {endpoint} ({bound})")
            }
            (Phase::Probe, _) => format!(
                "waiting for the plugin at {endpoint} to answer Probe ready ({bound}; each Probe up to {}, --rpc-timeout)",
                human_duration(options.rpc_timeout)
            ),
        }
    }
}

/// Violations of a call whose caller keeps no [`RuleLog`]: logged, so none goes unseen.
fn log_unowned(found: Vec<crate::rules::Violation>) {
    for v in found {
        tracing::warn!("{v}");
    }
}

/// The gRPC path of a method: `/csi.v1.Controller/CreateVolume`.
pub fn method_path(method: &MethodDescriptor) -> http::uri::PathAndQuery {
    let path = format!("/{}/{}", method.parent_service().full_name(), method.name());
    http::uri::PathAndQuery::try_from(path).expect("CSI method paths are valid URIs")
}

async fn wait_for_socket(path: &std::path::Path, started: Instant, deadline: Instant) -> Result<(), ConnectError> {
    use std::os::unix::fs::FileTypeExt;
    loop {
        match tokio::fs::metadata(path).await {
            Ok(meta) if meta.file_type().is_socket() => return Ok(()),
            Ok(meta) => {
                let kind = if meta.is_dir() {
                    "a directory"
                } else if meta.is_file() {
                    "a regular file"
                } else {
                    "not a socket"
                };
                return Err(ConnectError::NotASocket {
                    path: path.to_owned(),
                    kind: kind.to_owned(),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if Instant::now() >= deadline {
                    return Err(ConnectError::NoSocket {
                        path: path.to_owned(),
                        waited: started.elapsed(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            Err(e) => {
                return Err(ConnectError::Other {
                    endpoint: Endpoint::Unix(path.to_owned()),
                    detail: e.to_string(),
                });
            }
        }
    }
}

async fn open_channel(endpoint: &Endpoint, started: Instant, deadline: Instant) -> Result<Channel, ConnectError> {
    loop {
        let attempt = connect_once(endpoint, deadline).await;
        match attempt {
            Ok(channel) => return Ok(channel),
            Err(e) => {
                let io_kind = io_error_kind(&e);
                let retryable = matches!(
                    io_kind,
                    Some(io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound)
                );
                if retryable && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                let detail = error_chain(&e);
                return Err(if retryable {
                    ConnectError::Refused {
                        endpoint: endpoint.clone(),
                        waited: started.elapsed(),
                        detail,
                    }
                } else {
                    ConnectError::Other {
                        endpoint: endpoint.clone(),
                        detail,
                    }
                });
            }
        }
    }
}

async fn connect_once(endpoint: &Endpoint, deadline: Instant) -> Result<Channel, tonic::transport::Error> {
    let timeout = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10));
    match endpoint {
        Endpoint::Unix(path) => {
            let path = path.clone();
            tonic::transport::Endpoint::from_static("http://localhost")
                .connect_timeout(timeout)
                .connect_with_connector(tower::service_fn(move |_: http::Uri| {
                    let path = path.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, io::Error>(hyper_util::rt::TokioIo::new(stream))
                    }
                }))
                .await
        }
        Endpoint::Tcp { host, port } => {
            let host = if host.contains(':') { format!("[{host}]") } else { host.clone() };
            tonic::transport::Endpoint::from_shared(format!("http://{host}:{port}"))?
                .connect_timeout(timeout)
                .tcp_nodelay(true)
                .connect()
                .await
        }
    }
}

fn io_error_kind(e: &(dyn std::error::Error + 'static)) -> Option<io::ErrorKind> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = current {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return Some(io.kind());
        }
        current = err.source();
    }
    None
}

/// Joins an error and its sources into one line: `transport error: connection refused`.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = current {
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        current = err.source();
    }
    parts.join(": ")
}

/// Which endpoints play which role: the controller (at most one) and the node plugins (one
/// per node). The same endpoint may play both roles; it then gets one shared connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    /// The controller endpoint, if the plugin is to be driven as a controller.
    pub controller: Option<Endpoint>,
    /// The node endpoints, node 0 first.
    pub nodes: Vec<Endpoint>,
}

/// Live connections for every role of [`Targets`].
#[derive(Debug, Clone)]
pub struct Connections {
    /// The controller's connection.
    pub controller: Option<Connection>,
    /// One connection per node endpoint, node 0 first.
    pub nodes: Vec<Connection>,
}

impl Targets {
    /// Resolves the command-line forms: `--endpoint` serves every role unless
    /// `--controller-endpoint` / `--node-endpoint` override it.
    pub fn resolve(endpoint: Option<Endpoint>, controller: Option<Endpoint>, nodes: Vec<Endpoint>) -> Self {
        let controller = controller.or_else(|| endpoint.clone());
        let nodes = if nodes.is_empty() { endpoint.into_iter().collect() } else { nodes };
        Targets { controller, nodes }
    }

    /// Whether no endpoint was given at all.
    pub fn is_empty(&self) -> bool {
        self.controller.is_none() && self.nodes.is_empty()
    }

    /// Every distinct endpoint, controller first.
    pub fn distinct(&self) -> Vec<Endpoint> {
        let mut all: Vec<Endpoint> = Vec::new();
        for e in self.controller.iter().chain(&self.nodes) {
            if !all.contains(e) {
                all.push(e.clone());
            }
        }
        all
    }

    /// Connects to every distinct endpoint concurrently, one connection each.
    pub async fn connect(&self, options: &ClientOptions) -> Result<Connections, ConnectError> {
        self.connect_noting(options, |_| {}).await
    }

    /// [`Self::connect`], telling `note` what each endpoint still waits for after
    /// [`WAIT_NOTICE_AFTER`] (see [`Connection::connect_noting`]).
    pub async fn connect_noting(
        &self,
        options: &ClientOptions,
        note: impl Fn(String) + Clone + Send + 'static,
    ) -> Result<Connections, ConnectError> {
        let distinct = self.distinct();
        let mut tasks = tokio::task::JoinSet::new();
        for (i, endpoint) in distinct.iter().cloned().enumerate() {
            let options = options.clone();
            let note = note.clone();
            tasks.spawn(async move { (i, Connection::connect_noting(endpoint, options, note).await) });
        }
        let mut connected: Vec<Option<Connection>> = vec![None; distinct.len()];
        let mut first_error: Option<(usize, ConnectError)> = None;
        while let Some(joined) = tasks.join_next().await {
            let (i, result) = joined.expect("connect tasks do not panic");
            match result {
                Ok(conn) => connected[i] = Some(conn),
                Err(e) => {
                    if first_error.as_ref().is_none_or(|(j, _)| i < *j) {
                        first_error = Some((i, e));
                    }
                }
            }
        }
        if let Some((_, e)) = first_error {
            return Err(e);
        }
        let by_endpoint = |e: &Endpoint| {
            let i = distinct.iter().position(|d| d == e).expect("every target is in distinct");
            connected[i].clone().expect("every distinct endpoint connected")
        };
        Ok(Connections {
            controller: self.controller.as_ref().map(by_endpoint),
            nodes: self.nodes.iter().map(by_endpoint).collect(),
        })
    }
}
