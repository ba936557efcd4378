//! `--node-agents nomad://HOST:PORT/SERVICE`: the agents' addresses from Nomad's service
//! discovery (`GET /v1/service/SERVICE` of Nomad's HTTP API, one registration per agent), with
//! the ACL token of `NOMAD_TOKEN` when it is set (sent as `X-Nomad-Token`, never printed).
//! Plain HTTP, as a Nomad agent's local API (`127.0.0.1:4646`) serves by default; a query
//! (`?namespace=ops`) is passed on as written.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use csi_client::client::Endpoint;

/// The environment variable holding Nomad's ACL token (as the `nomad` command reads it).
pub const TOKEN_ENV: &str = "NOMAD_TOKEN";

/// The most of an answer read: a service of thousands of agents fits many times over.
const MAX_ANSWER: u64 = 16 << 20;

/// Why Nomad did not give the agents' addresses.
#[derive(Debug, thiserror::Error)]
pub enum NomadError {
    /// The spec is not `nomad://HOST:PORT/SERVICE`.
    #[error("{0} is not nomad://HOST:PORT/SERVICE[?namespace=NS]")]
    Spec(String),
    /// Nomad could not be reached or did not answer in time.
    #[error("Nomad at {address}: {detail}")]
    Unreachable {
        /// HOST:PORT.
        address: String,
        /// Why.
        detail: String,
    },
    /// Nomad answered with an error status.
    #[error("Nomad at {address} answered {status} for service {service}{hint}")]
    Status {
        /// HOST:PORT.
        address: String,
        /// The service asked for.
        service: String,
        /// The HTTP status line's code and reason.
        status: String,
        /// What to check.
        hint: &'static str,
    },
    /// The answer is not the registrations' JSON.
    #[error("Nomad at {address}: the answer for service {service} is not a list of registrations: {detail}")]
    Answer {
        /// HOST:PORT.
        address: String,
        /// The service asked for.
        service: String,
        /// Why.
        detail: String,
    },
    /// The token holds what no HTTP header can carry (its value is never shown).
    #[error("NOMAD_TOKEN holds a control character, which no HTTP header can carry")]
    Token,
    /// The service has no registration.
    #[error("Nomad at {address} lists no registration of service {service} (is the agents' job running?)")]
    Empty {
        /// HOST:PORT.
        address: String,
        /// The service asked for.
        service: String,
    },
}

/// The agents Nomad lists under `spec` (`HOST:PORT/SERVICE[?QUERY]`, after `nomad://`),
/// sorted, with `token` (`NOMAD_TOKEN`) when given, within `timeout`.
pub async fn agents(spec: &str, token: Option<&str>, timeout: Duration) -> Result<Vec<Endpoint>, NomadError> {
    let (address, path) = spec.split_once('/').ok_or_else(|| NomadError::Spec(format!("nomad://{spec}")))?;
    let service = path.split('?').next().unwrap_or_default().to_owned();
    if address.is_empty() || service.is_empty() || !address.contains(':') || service.contains('/') {
        return Err(NomadError::Spec(format!("nomad://{spec}")));
    }
    if token.is_some_and(|t| t.chars().any(char::is_control)) {
        return Err(NomadError::Token);
    }
    let unreachable = |detail: String| NomadError::Unreachable { address: address.to_owned(), detail };
    let answer = tokio::time::timeout(timeout, get(address, &format!("/v1/service/{path}"), token))
        .await
        .map_err(|_| unreachable(format!("no answer within {} (--connect-timeout)", csi_client::client::human_duration(timeout))))?
        .map_err(|e| unreachable(e.to_string()))?;
    let (status, body) = split_answer(&answer).ok_or_else(|| NomadError::Answer {
        address: address.to_owned(),
        service: service.clone(),
        detail: "not an HTTP answer".into(),
    })?;
    if !status.starts_with("200") {
        let hint = match status.get(..3) {
            Some("401" | "403") => " (set NOMAD_TOKEN to a token with read-job on the service's namespace)",
            Some("404") => " (is the address Nomad's HTTP API?)",
            _ => "",
        };
        return Err(NomadError::Status { address: address.to_owned(), service, status: status.to_owned(), hint });
    }
    let bad = |detail: String| NomadError::Answer { address: address.to_owned(), service: service.clone(), detail };
    let registrations: serde_json::Value = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    let registrations = registrations.as_array().ok_or_else(|| bad("not a JSON list".into()))?;
    let mut found = Vec::new();
    for r in registrations {
        let host = r.get("Address").and_then(|a| a.as_str()).filter(|a| !a.is_empty());
        let port = r.get("Port").and_then(|p| p.as_u64()).and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0);
        match (host, port) {
            (Some(host), Some(port)) => found.push(Endpoint::Tcp { host: host.to_owned(), port }),
            _ => return Err(bad(format!("a registration without an Address and Port: {r}"))),
        }
    }
    found.sort();
    found.dedup();
    if found.is_empty() {
        return Err(NomadError::Empty { address: address.to_owned(), service });
    }
    Ok(found)
}

/// One HTTP/1.0 GET (so the answer is never chunked, and ends when the connection does).
async fn get(address: &str, path: &str, token: Option<&str>) -> std::io::Result<Vec<u8>> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let mut request = format!("GET {path} HTTP/1.0\r\nHost: {address}\r\nAccept: application/json\r\n");
    if let Some(token) = token {
        request.push_str(&format!("X-Nomad-Token: {token}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.take(MAX_ANSWER).read_to_end(&mut answer).await?;
    Ok(answer)
}

/// The status (`200 OK`) and body of an HTTP answer.
fn split_answer(answer: &[u8]) -> Option<(&str, &[u8])> {
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&answer[..end]).ok()?;
    let status = head.lines().next()?.split_once(' ')?.1.trim();
    Some((status, &answer[end + 4..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Nomad stand-in on loopback: answers one request with `status` and `body`, and hands
    /// back the request it got.
    async fn fake_nomad(status: &'static str, body: &'static str) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let served = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "the request ended early");
                request.extend_from_slice(&buf[..n]);
            }
            let answer = format!("HTTP/1.0 {status}\r\nContent-Type: application/json\r\n\r\n{body}");
            stream.write_all(answer.as_bytes()).await.unwrap();
            String::from_utf8(request).unwrap()
        });
        (address, served)
    }

    const TWO: &str = r#"[{"ID":"_nomad-task-b","ServiceName":"csi-conform-agent","Namespace":"default","NodeID":"n2","Datacenter":"dc1","JobID":"csi-conform-agent","AllocID":"b","Tags":[],"Address":"10.0.0.3","Port":7443,"CreateIndex":2,"ModifyIndex":2},
        {"ID":"_nomad-task-a","ServiceName":"csi-conform-agent","Namespace":"default","NodeID":"n1","Datacenter":"dc1","JobID":"csi-conform-agent","AllocID":"a","Tags":[],"Address":"10.0.0.2","Port":7443,"CreateIndex":1,"ModifyIndex":1}]"#;

    #[tokio::test]
    async fn the_agents_are_the_services_registrations_asked_with_the_token() {
        let (address, served) = fake_nomad("200 OK", TWO).await;
        let spec = format!("{address}/csi-conform-agent?namespace=ops");
        let found = agents(&spec, Some("s3cr3t-token"), Duration::from_secs(10)).await.unwrap();
        assert_eq!(
            found,
            [Endpoint::Tcp { host: "10.0.0.2".into(), port: 7443 }, Endpoint::Tcp { host: "10.0.0.3".into(), port: 7443 }],
            "every registration, sorted"
        );
        let request = served.await.unwrap();
        assert!(request.starts_with("GET /v1/service/csi-conform-agent?namespace=ops HTTP/1.0\r\n"), "{request}");
        assert!(request.contains("\r\nX-Nomad-Token: s3cr3t-token\r\n"), "{request}");

        let (address, served) = fake_nomad("200 OK", TWO).await;
        agents(&format!("{address}/csi-conform-agent"), None, Duration::from_secs(10)).await.unwrap();
        assert!(!served.await.unwrap().contains("X-Nomad-Token"), "no token, no header");
    }

    #[tokio::test]
    async fn a_refusal_or_an_empty_service_is_said_without_the_token() {
        let (address, _served) = fake_nomad("403 Forbidden", "Permission denied").await;
        let e = agents(&format!("{address}/csi-conform-agent"), Some("s3cr3t-token"), Duration::from_secs(10))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("403 Forbidden") && e.contains("NOMAD_TOKEN"), "{e}");
        assert!(!e.contains("s3cr3t"), "the token never appears: {e}");
        let (address, _served) = fake_nomad("200 OK", "[]").await;
        let e = agents(&format!("{address}/csi-conform-agent"), None, Duration::from_secs(10)).await.unwrap_err();
        assert!(matches!(e, NomadError::Empty { .. }), "{e}");
        let (address, _served) = fake_nomad("200 OK", "{\"not\": \"a list\"}").await;
        let e = agents(&format!("{address}/csi-conform-agent"), None, Duration::from_secs(10)).await.unwrap_err();
        assert!(matches!(e, NomadError::Answer { .. }), "{e}");
        let e = agents(&format!("{address}/csi-conform-agent"), Some("s3cr3t\r\nX-Other: 1"), Duration::from_secs(1)).await;
        assert!(matches!(e, Err(NomadError::Token)), "no header is smuggled in: {e:?}");
        for bad in ["127.0.0.1:4646", "127.0.0.1:4646/", "nomad-host/agents", "127.0.0.1:4646/a/b"] {
            assert!(matches!(agents(bad, None, Duration::from_secs(1)).await, Err(NomadError::Spec(_))), "{bad}");
        }
    }
}
