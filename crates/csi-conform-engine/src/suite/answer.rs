//! A plugin's answer as the engine holds it ([`Response`]) and the helpers that turn one call
//! and its answer into a [`Finding`]: plain values, below the context that sends the calls.

use std::collections::BTreeMap;

use prost_reflect::DynamicMessage;

use super::vars::Val;
use crate::{
    client::RpcError,
    proto,
    report::{Finding, Severity},
};

/// A finding about one call: its RPC and one-line redacted request filled in.
pub fn call_finding(
    severity: Severity,
    kind: &str,
    message: impl Into<String>,
    rpc: &str,
    request: &DynamicMessage,
) -> Finding {
    let mut f = Finding::new(severity, kind, message);
    f.rpc = Some(rpc.to_owned());
    f.request = Some(proto::to_redacted_json(request));
    f
}

/// What an OK answer held, for a finding that expected an error: `; it returned ...` (see
/// [`proto::summary`]: redacted, bounded; the finding is scrubbed as well).
pub(crate) fn ok_summary(response: &Response) -> String {
    match response.messages() {
        [one] => format!("; it returned {}", proto::summary(one, proto::SUMMARY_MAX)),
        [] => "; it returned an empty stream".to_owned(),
        [first, ..] => format!(
            "; it returned {} messages, the first {}",
            response.messages().len(),
            proto::summary(first, proto::SUMMARY_MAX)
        ),
    }
}

/// A finding about a call that failed: also the code it got and the plugin's message.
pub(crate) fn rpc_error_finding(
    error: &RpcError,
    request: &DynamicMessage,
    severity: Severity,
    kind: &str,
    message: String,
    expected: Option<String>,
) -> Finding {
    let mut f = call_finding(severity, kind, message, &error.rpc, request);
    f.expected = expected;
    f.got = Some(error.code_name().to_owned());
    f.plugin_message = Some(error.message.clone()).filter(|m| !m.is_empty());
    f
}

pub(crate) fn unreachable_finding(error: &RpcError, request: &DynamicMessage) -> Finding {
    let message = format!("plugin unreachable: {}", error.message);
    rpc_error_finding(error, request, Severity::Error, "unreachable", message, None)
}

/// A plugin's answer: one message, or every message of a stream.
#[derive(Debug, Clone)]
pub enum Response {
    /// A unary RPC's response.
    Unary(DynamicMessage),
    /// A server-streaming RPC's messages.
    Stream(Vec<DynamicMessage>),
}

impl Response {
    /// Every message of the answer (one for a unary RPC).
    pub fn messages(&self) -> &[DynamicMessage] {
        match self {
            Response::Unary(m) => std::slice::from_ref(m),
            Response::Stream(messages) => messages,
        }
    }

    /// The response as a value; a stream is `{messages: [...]}`.
    pub fn to_val(&self) -> Val {
        match self {
            Response::Unary(m) => Val::from_message(m),
            Response::Stream(messages) => Val::Map(BTreeMap::from([(
                "messages".to_owned(),
                Val::List(messages.iter().map(Val::from_message).collect()),
            )])),
        }
    }
}
