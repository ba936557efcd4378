//! Mutual TLS between a run and its agents: `agent certs` makes one CA for one run and signs
//! an agent certificate (name [`AGENT_NAME`], server use) and a run certificate (name
//! [`RUN_NAME`], client use) with it; the agent serves only clients whose certificate that CA
//! signed, and the run talks only to agents whose certificate it signed. The CA's key is
//! dropped once both are signed.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

use super::{AGENT_NAME, RUN_NAME};

/// The file names in a certificate directory.
pub const CA: &str = "ca.pem";
/// The agent's certificate and key.
pub const AGENT_CERT: &str = "agent.pem";
/// The agent's key.
pub const AGENT_KEY: &str = "agent-key.pem";
/// The run's certificate.
pub const RUN_CERT: &str = "run.pem";
/// The run's key.
pub const RUN_KEY: &str = "run-key.pem";

/// How long the certificates of one run are valid.
const VALID_DAYS: i64 = 30;

/// Why certificates could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating or signing failed.
    #[error("making certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

fn params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap_or_default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    params.distinguished_name = dn;
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(VALID_DAYS);
    params
}

/// The PEM texts of a new CA's certificate and of an agent and a run certificate it signed:
/// `(ca, agent, agent_key, run, run_key)`.
pub fn generate() -> Result<(String, String, String, String, String), TlsError> {
    let ca_key = KeyPair::generate()?;
    let mut ca = params("csi-conform run CA");
    ca.subject_alt_names.clear();
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |name: &str, usage: ExtendedKeyUsagePurpose| -> Result<(String, String), TlsError> {
        let key = KeyPair::generate()?;
        let mut p = params(name);
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![usage];
        Ok((p.signed_by(&key, &issuer)?.pem(), key.serialize_pem()))
    };
    let (agent, agent_key) = leaf(AGENT_NAME, ExtendedKeyUsagePurpose::ServerAuth)?;
    let (run, run_key) = leaf(RUN_NAME, ExtendedKeyUsagePurpose::ClientAuth)?;
    Ok((ca_cert.pem(), agent, agent_key, run, run_key))
}

/// Writes a new set into `dir` (keys readable by their owner only); the paths written.
pub fn write_certs(dir: &Path) -> Result<Vec<PathBuf>, TlsError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file_err = |path: &Path| {
        let path = path.to_owned();
        move |source| TlsError::File { path, source }
    };
    std::fs::create_dir_all(dir).map_err(file_err(dir))?;
    let (ca, agent, agent_key, run, run_key) = generate()?;
    let mut written = Vec::new();
    for (name, text, mode) in
        [(CA, ca, 0o644), (AGENT_CERT, agent, 0o644), (AGENT_KEY, agent_key, 0o600), (RUN_CERT, run, 0o644), (RUN_KEY, run_key, 0o600)]
    {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
            .map_err(file_err(&path))?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(file_err(&path))?;
        written.push(path);
    }
    Ok(written)
}

fn read(dir: &Path, name: &str) -> Result<String, TlsError> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).map_err(|source| TlsError::File { path, source })
}

/// The agent's TLS: its certificate, and only clients the run's CA signed.
pub fn server_config(dir: &Path) -> Result<ServerTlsConfig, TlsError> {
    Ok(ServerTlsConfig::new()
        .identity(Identity::from_pem(read(dir, AGENT_CERT)?, read(dir, AGENT_KEY)?))
        .client_ca_root(Certificate::from_pem(read(dir, CA)?))
        .client_auth_optional(false))
}

/// The run's TLS: its certificate, and only an agent the run's CA signed.
pub fn client_config(dir: &Path) -> Result<ClientTlsConfig, TlsError> {
    Ok(ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(dir, CA)?))
        .identity(Identity::from_pem(read(dir, RUN_CERT)?, read(dir, RUN_KEY)?))
        .domain_name(AGENT_NAME))
}
