//! Errors of talking to a plugin: a failed RPC unpacked into code, the plugin's own message and
//! one line of direction for an operator, and the ways connecting can fail.

use std::{fmt, time::Duration};

use tonic::Code;

use super::Endpoint;

/// A failed RPC: which call, the gRPC code, the plugin's message, and how long it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The RPC's method name, e.g. `CreateVolume`.
    pub rpc: String,
    /// The gRPC status code (synthesised for deadlines and transport failures).
    pub code: Code,
    /// The plugin's status message, or what went wrong on the way.
    pub message: String,
    /// How long the call ran before it failed.
    pub elapsed: Duration,
    /// Where the failure came from.
    pub origin: ErrorOrigin,
}

/// Whether an error was answered by the plugin, or arose on the way to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorOrigin {
    /// The plugin answered with a gRPC status.
    Plugin,
    /// The call did not finish within its deadline.
    Deadline,
    /// The connection failed: the plugin is unreachable, crashed, or is not speaking gRPC.
    Transport,
    /// The response could not be decoded (malformed bytes, over the size limit).
    Decode,
}

impl RpcError {
    /// Builds the error for `rpc` from a tonic status.
    pub fn from_status(rpc: &str, status: &tonic::Status, elapsed: Duration) -> Self {
        use std::error::Error as _;
        let origin = classify_status(status);
        let mut message = status.message().to_owned();
        if let Some(source) = status.source() {
            let chain = super::error_chain(source);
            if !message.contains(&chain) {
                message = if message.is_empty() { chain } else { format!("{message}: {chain}") };
            }
        }
        RpcError {
            rpc: rpc.to_owned(),
            code: status.code(),
            message,
            elapsed,
            origin,
        }
    }

    /// The error of a call that ran past its deadline.
    pub fn deadline(rpc: &str, waited: Duration) -> Self {
        RpcError {
            rpc: rpc.to_owned(),
            code: Code::DeadlineExceeded,
            message: format!("no answer within {}", human_duration(waited)),
            elapsed: waited,
            origin: ErrorOrigin::Deadline,
        }
    }

    /// The canonical upper-case name of the code, as the CSI spec writes it (`NOT_FOUND`).
    pub fn code_name(&self) -> &'static str {
        code_name(self.code)
    }

    /// Whether the plugin could not be reached at all (crashed, socket gone, not gRPC).
    pub fn is_unreachable(&self) -> bool {
        self.origin == ErrorOrigin::Transport
    }

    /// One line telling an operator what the code usually means for a CSI plugin.
    pub fn direction(&self) -> String {
        direction(self.code, &self.rpc, self.origin)
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed with {}", self.rpc, self.code_name())?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        write!(f, " ({})", self.direction())
    }
}

impl std::error::Error for RpcError {}

fn classify_status(status: &tonic::Status) -> ErrorOrigin {
    use std::error::Error as _;
    // Statuses that tonic synthesises from a transport failure carry the underlying error as
    // their source; statuses sent by the server do not.
    // CANCELLED reaches us only when the call's stream was torn down: a plugin never cancels
    // a call its caller did not cancel, and CANCELLED at our own deadline is recognised as
    // the deadline before this (see `Connection::call`). The plugin went away mid-call.
    if status.code() == Code::Cancelled {
        return ErrorOrigin::Transport;
    }
    if let Some(source) = status.source() {
        // A connection that closed while a call waited for it carries the transport error as
        // its source: the plugin went away, no deadline passed.
        if source.downcast_ref::<tonic::transport::Error>().is_some() {
            return ErrorOrigin::Transport;
        }
        return match status.code() {
            Code::DeadlineExceeded => ErrorOrigin::Deadline,
            _ => ErrorOrigin::Transport,
        };
    }
    let msg = status.message();
    if msg.contains("message length too large") || msg.contains("failed to decode") {
        return ErrorOrigin::Decode;
    }
    if status.code() == Code::Internal && msg.starts_with("protocol error") {
        return ErrorOrigin::Transport;
    }
    // tonic's mapping of an HTTP/2 error (a stream reset, a GOAWAY), whatever code it gave it
    // (INTERNAL, UNAVAILABLE for REFUSED_STREAM, UNKNOWN): the transport's, never the plugin's.
    if msg.starts_with("h2 protocol error") || (status.code() == Code::Unknown && msg.contains("h2 protocol error")) {
        return ErrorOrigin::Transport;
    }
    ErrorOrigin::Plugin
}

/// The CSI spec's spelling of a gRPC code.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Parses a code name as written in suites and on the command line (`NOT_FOUND`,
/// `not_found`, `NotFound` or the number `5`).
pub fn parse_code(text: &str) -> Option<Code> {
    if let Ok(n) = text.parse::<i32>() {
        return (0..=16).contains(&n).then(|| Code::from_i32(n));
    }
    let norm: String = text.chars().filter(|c| *c != '_').collect::<String>().to_ascii_uppercase();
    (0..=16)
        .map(Code::from_i32)
        .find(|c| code_name(*c).replace('_', "") == norm)
}

/// What a code means for a CSI plugin and what an operator can do about it.
pub fn direction(code: Code, rpc: &str, origin: ErrorOrigin) -> String {
    match (origin, code) {
        (ErrorOrigin::Deadline, _) | (_, Code::DeadlineExceeded) => format!(
            "the plugin did not answer {rpc} in time; its backend may be slow or hung: raise --rpc-timeout or check the plugin's logs"
        ),
        (ErrorOrigin::Transport, _) => {
            "the plugin is unreachable: it may have crashed or removed its socket; check that its process is running".to_owned()
        }
        (ErrorOrigin::Decode, _) => {
            "the plugin's answer could not be decoded: it is malformed or larger than --max-message-size".to_owned()
        }
        (_, Code::Ok) => "no error".to_owned(),
        (_, Code::InvalidArgument) => {
            "the plugin rejected the request's arguments: a required field is missing or a value is not supported".to_owned()
        }
        (_, Code::NotFound) => {
            "the plugin does not know this volume, snapshot or node: it may have been deleted outside the orchestrator, or the id is wrong".to_owned()
        }
        (_, Code::AlreadyExists) => {
            "an object with this name already exists with different parameters".to_owned()
        }
        (_, Code::FailedPrecondition) => {
            "the object is not in a state that allows this call (still published or staged, published elsewhere, or not yet attached)".to_owned()
        }
        (_, Code::Unimplemented) => format!(
            "the plugin does not implement {rpc}; check that it advertises the capability, or that the right endpoint (controller or node) was given"
        ),
        (_, Code::ResourceExhausted) => {
            "the plugin is out of capacity, or the node's attach limit is reached".to_owned()
        }
        (_, Code::OutOfRange) => "the requested size is outside what the plugin supports".to_owned(),
        (_, Code::Aborted) => {
            "another operation on this object is in progress, or a pagination token is no longer valid; retry later".to_owned()
        }
        (_, Code::Unauthenticated) => {
            "the plugin needs secrets for this call: check the secrets file (--secrets)".to_owned()
        }
        (_, Code::PermissionDenied) => {
            "the secrets were accepted but do not grant this operation".to_owned()
        }
        (_, Code::Unavailable) => {
            "the plugin or its backend is temporarily unavailable; retry, or check the backend".to_owned()
        }
        (_, Code::Internal | Code::Unknown | Code::DataLoss) => {
            "the plugin hit an internal error; its own logs say more".to_owned()
        }
        (_, Code::Cancelled) => "the call was cancelled before it finished".to_owned(),
    }
}

/// Why no usable connection to a plugin could be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Nothing appeared at the socket path within the wait.
    #[error("no socket at {path} (waited {waited}, --connect-timeout); is the plugin running, and is this its socket path?", path = path.display(), waited = human_duration(*waited))]
    NoSocket {
        /// The socket path.
        path: std::path::PathBuf,
        /// How long we waited for it to appear.
        waited: Duration,
    },
    /// Something other than a socket is at the path.
    #[error("{path} exists but is not a unix socket ({kind})", path = path.display())]
    NotASocket {
        /// The path.
        path: std::path::PathBuf,
        /// What is there instead.
        kind: String,
    },
    /// The socket or port exists, but no process accepts connections on it.
    #[error("nobody is listening at {endpoint} (waited {waited}, --connect-timeout): {detail}; a plugin that crashed leaves its socket file behind", waited = human_duration(*waited))]
    Refused {
        /// The endpoint.
        endpoint: Endpoint,
        /// How long we kept trying.
        waited: Duration,
        /// The operating system's error.
        detail: String,
    },
    /// A server answered, but not with gRPC.
    #[error("the server at {endpoint} does not speak gRPC: {detail}")]
    NotGrpc {
        /// The endpoint.
        endpoint: Endpoint,
        /// What went wrong in the exchange.
        detail: String,
    },
    /// A gRPC server answered, but it does not serve the CSI Identity service.
    #[error("the gRPC server at {endpoint} is not a CSI plugin: Probe answered {code}: {detail}")]
    NotCsi {
        /// The endpoint.
        endpoint: Endpoint,
        /// The code Probe returned (typically UNIMPLEMENTED).
        code: &'static str,
        /// The server's message.
        detail: String,
    },
    /// Probe kept saying the plugin is not ready.
    #[error("the plugin at {endpoint} never became ready: Probe answered ready=false {probes} times in {waited}; raise --connect-timeout if it initialises slowly", waited = human_duration(*waited))]
    NeverReady {
        /// The endpoint.
        endpoint: Endpoint,
        /// How long we waited.
        waited: Duration,
        /// How many Probe calls said "not ready".
        probes: u32,
    },
    /// Probe kept failing with a gRPC error (the spec's way to say "unhealthy").
    #[error("the plugin at {endpoint} reports itself unhealthy: {error} (waited {waited})", waited = human_duration(*waited))]
    Unhealthy {
        /// The endpoint.
        endpoint: Endpoint,
        /// The last Probe error.
        error: RpcError,
        /// How long we waited.
        waited: Duration,
    },
    /// The plugin answered Probe, but after the deadline every call of the run has.
    #[error("the plugin at {endpoint} answered Probe after {took}, slower than --rpc-timeout ({limit}): every call of the run would time out; raise --rpc-timeout above the plugin's answer time (and --connect-timeout with it)", took = human_duration(*took), limit = human_duration(*rpc_timeout))]
    SlowProbe {
        /// The endpoint.
        endpoint: Endpoint,
        /// How long Probe took to answer.
        took: Duration,
        /// The `--rpc-timeout` it missed.
        rpc_timeout: Duration,
    },
    /// The server accepted the connection but answered nothing within the wait.
    #[error("the server at {endpoint} accepted the connection but did not answer Probe within {waited} (--connect-timeout); it is hung, slower than that, or not a gRPC server", waited = human_duration(*waited))]
    Silent {
        /// The endpoint.
        endpoint: Endpoint,
        /// How long we waited.
        waited: Duration,
    },
    /// Any other failure to connect.
    #[error("cannot connect to {endpoint}: {detail}")]
    Other {
        /// The endpoint.
        endpoint: Endpoint,
        /// What went wrong.
        detail: String,
    },
}

/// Formats a duration for people: `250ms`, `1.5s`, `30s`, `2m5s`.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        let s = d.as_secs_f64();
        if (s - s.round()).abs() < 0.05 {
            format!("{}s", s.round() as u64)
        } else {
            format!("{s:.1}s")
        }
    } else {
        let s = d.as_secs();
        format!("{}m{}s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_names_parse_in_every_spelling() {
        assert_eq!(parse_code("NOT_FOUND"), Some(Code::NotFound));
        assert_eq!(parse_code("not_found"), Some(Code::NotFound));
        assert_eq!(parse_code("NotFound"), Some(Code::NotFound));
        assert_eq!(parse_code("5"), Some(Code::NotFound));
        assert_eq!(parse_code("OK"), Some(Code::Ok));
        assert_eq!(parse_code("NOPE"), None);
        assert_eq!(parse_code("17"), None);
        for n in 0..=16 {
            let c = Code::from_i32(n);
            assert_eq!(parse_code(code_name(c)), Some(c));
        }
    }

    #[test]
    fn errors_carry_code_message_and_direction() {
        let e = RpcError::from_status(
            "ControllerPublishVolume",
            &tonic::Status::not_found("volume vol-9 is gone"),
            Duration::from_millis(3),
        );
        let text = e.to_string();
        assert!(text.starts_with("ControllerPublishVolume failed with NOT_FOUND: volume vol-9 is gone"), "{text}");
        assert!(text.contains("deleted outside the orchestrator"), "{text}");
        let u = RpcError::from_status("NodeStageVolume", &tonic::Status::unimplemented(""), Duration::ZERO);
        assert!(u.direction().contains("does not implement NodeStageVolume"));
        let d = RpcError::deadline("CreateVolume", Duration::from_secs(30));
        assert!(d.to_string().contains("no answer within 30s"), "{d}");
        assert!(d.direction().contains("--rpc-timeout"));
    }

    /// What tonic makes of an HTTP/2 failure is the transport's, whatever its code; what a
    /// plugin sends with the same codes is the plugin's.
    #[test]
    fn statuses_the_transport_made_are_told_from_the_plugins() {
        let origin = |code, msg: &str| RpcError::from_status("CreateVolume", &tonic::Status::new(code, msg), Duration::ZERO).origin;
        for code in [Code::Internal, Code::Unavailable, Code::Unknown] {
            assert_eq!(origin(code, "h2 protocol error: stream no longer needed"), ErrorOrigin::Transport, "{code:?}");
            assert_eq!(origin(code, "backend says no"), ErrorOrigin::Plugin, "{code:?}");
        }
        assert_eq!(origin(Code::Cancelled, "operation was canceled"), ErrorOrigin::Transport);
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(human_duration(Duration::from_secs(30)), "30s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(human_duration(Duration::from_secs(125)), "2m5s");
    }
}
