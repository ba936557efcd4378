//! Plugin endpoint addresses: parsing the forms operators write (`unix:///abs`, `unix:rel`, a
//! bare path, `tcp://host:port`, `dns:///host:port`) into one typed [`Endpoint`].

use std::{fmt, path::PathBuf, str::FromStr};

/// Where a plugin listens.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// A unix domain socket at this path (absolute, or relative to the working directory).
    Unix(PathBuf),
    /// A TCP address (`tcp://host:port`, or gRPC's `dns:///host:port`).
    Tcp {
        /// Host name or IP address (IPv6 without brackets).
        host: String,
        /// Port number.
        port: u16,
    },
}

/// Why an endpoint string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid endpoint {input:?}: {reason}")]
pub struct EndpointError {
    /// What the operator wrote.
    pub input: String,
    /// What is wrong with it, and what would be accepted.
    pub reason: String,
}

const FORMS: &str =
    "expected unix:///abs/path, unix:relative/path, a bare path, tcp://host:port or dns:///host:port";

impl Endpoint {
    /// Whether the plugin behind this endpoint runs on this host (unix sockets are always
    /// local, though the plugin may mount in a mount namespace of its own).
    pub fn is_local(&self) -> bool {
        matches!(self, Endpoint::Unix(_))
    }

    /// The socket path, for unix endpoints.
    pub fn socket_path(&self) -> Option<&std::path::Path> {
        match self {
            Endpoint::Unix(p) => Some(p),
            Endpoint::Tcp { .. } => None,
        }
    }
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| EndpointError {
            input: input.to_owned(),
            reason: reason.to_owned(),
        };
        let s = input.trim();
        if s.is_empty() {
            return Err(err(&format!("it is empty; {FORMS}")));
        }
        if let Some(rest) = s.strip_prefix("unix://") {
            // unix:///abs/path → "/abs/path"; unix://rel is not a form gRPC accepts.
            if !rest.starts_with('/') {
                return Err(err(&format!(
                    "unix:// must be followed by an absolute path (unix:///path); for a relative path write unix:{rest}"
                )));
            }
            return Ok(Endpoint::Unix(PathBuf::from(rest)));
        }
        if let Some(rest) = s.strip_prefix("unix:") {
            if rest.is_empty() {
                return Err(err("unix: needs a path after it"));
            }
            return Ok(Endpoint::Unix(PathBuf::from(rest)));
        }
        let hostport = if let Some(rest) = s.strip_prefix("tcp://") {
            Some(rest)
        } else if let Some(rest) = s.strip_prefix("dns:///") {
            Some(rest)
        } else if let Some(rest) = s.strip_prefix("dns://") {
            // dns://authority/host:port — the authority (a DNS server) is not supported.
            match rest.split_once('/') {
                Some((_, hp)) => Some(hp),
                None => return Err(err("dns:// needs the form dns:///host:port")),
            }
        } else {
            None
        };
        if let Some(hp) = hostport {
            return parse_host_port(hp).map_err(|r| err(&r));
        }
        if s.contains("://") {
            let scheme = s.split("://").next().unwrap_or_default();
            return Err(err(&format!("unknown scheme {scheme:?}; {FORMS}")));
        }
        Ok(Endpoint::Unix(PathBuf::from(s)))
    }
}

fn parse_host_port(hp: &str) -> Result<Endpoint, String> {
    let hp = hp.trim_end_matches('/');
    let (host, port) = if let Some(rest) = hp.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| "unclosed '[' in IPv6 address".to_owned())?;
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| "a port is required after the IPv6 address ([::1]:port)".to_owned())?;
        (host, port)
    } else {
        hp.rsplit_once(':')
            .ok_or_else(|| "a port is required (host:port)".to_owned())?
    };
    if host.is_empty() {
        return Err("the host is empty".to_owned());
    }
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{port:?} is not a port number (1-65535)"))?;
    Ok(Endpoint::Tcp {
        host: host.to_owned(),
        port,
    })
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(p) if p.is_absolute() => write!(f, "unix://{}", p.display()),
            Endpoint::Unix(p) => write!(f, "unix:{}", p.display()),
            Endpoint::Tcp { host, port } if host.contains(':') => write!(f, "tcp://[{host}]:{port}"),
            Endpoint::Tcp { host, port } => write!(f, "tcp://{host}:{port}"),
        }
    }
}

impl serde::Serialize for Endpoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix(p: &str) -> Endpoint {
        Endpoint::Unix(PathBuf::from(p))
    }

    #[test]
    fn accepts_every_documented_form() {
        assert_eq!("unix:///run/csi.sock".parse(), Ok(unix("/run/csi.sock")));
        assert_eq!("unix:run/csi.sock".parse(), Ok(unix("run/csi.sock")));
        assert_eq!("unix:/run/csi.sock".parse(), Ok(unix("/run/csi.sock")));
        assert_eq!("/run/csi.sock".parse(), Ok(unix("/run/csi.sock")));
        assert_eq!("csi.sock".parse(), Ok(unix("csi.sock")));
        let tcp = |h: &str, p| Endpoint::Tcp { host: h.into(), port: p };
        assert_eq!("tcp://127.0.0.1:10000".parse(), Ok(tcp("127.0.0.1", 10000)));
        assert_eq!("dns:///localhost:9000".parse(), Ok(tcp("localhost", 9000)));
        assert_eq!("tcp://[::1]:7".parse(), Ok(tcp("::1", 7)));
    }

    #[test]
    fn refuses_malformed_forms_with_a_reason() {
        for (bad, why) in [
            ("", "empty"),
            ("unix://relative.sock", "absolute path"),
            ("tcp://host", "port is required"),
            ("tcp://host:http", "not a port number"),
            ("tcp://:80", "host is empty"),
            ("http://x:1", "unknown scheme"),
            ("unix:", "needs a path"),
        ] {
            let e = bad.parse::<Endpoint>().unwrap_err();
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn display_round_trips() {
        for s in ["unix:///a/b.sock", "unix:rel.sock", "tcp://h:1", "tcp://[::1]:2"] {
            let e: Endpoint = s.parse().unwrap();
            assert_eq!(e.to_string(), s);
            assert_eq!(e.to_string().parse::<Endpoint>().unwrap(), e);
        }
    }
}
