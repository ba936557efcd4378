//! The `csi-reference-plugin` binary serves the reference plugin on its own, with the flags of
//! `csi-conform reference-plugin`: it says when it listens, answers over its socket with the
//! quirks it was given, lists its quirks, and refuses a bad flag with exit code 2.

use std::time::Duration;

use csi_client::client::{ClientOptions, Connection, Endpoint};
use csi_proto::proto::v1::{self, CreateVolumeRequest, GetPluginInfoRequest, ValidateVolumeCapabilitiesRequest};
use csi_spec::capability::{AccessMode, VolumeCapability};
use tokio::io::AsyncBufReadExt as _;

const BIN: &str = env!("CARGO_BIN_EXE_csi-reference-plugin");

#[tokio::test]
async fn it_serves_the_reference_plugin_with_the_quirks_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("ref.sock");
    let endpoint = format!("unix://{}", socket.display());
    let mut child = tokio::process::Command::new(BIN)
        .args(["--endpoint", &endpoint, "--quirk", "unconfirmed"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await.expect("a line in time").unwrap();
    let line = line.unwrap_or_default();
    assert!(line.starts_with(&format!("csi-conform reference plugin listening on {endpoint} (")), "{line}");
    assert!(line.contains("1 quirk(s)"), "{line}");

    let options = ClientOptions { connect_timeout: Duration::from_secs(5), ..ClientOptions::default() };
    let conn = Connection::connect(Endpoint::Unix(socket.clone()), options).await.expect("connect to the plugin");
    let mut identity = conn.identity();
    let info = identity.get_plugin_info(GetPluginInfoRequest {}).await.expect("GetPluginInfo").into_inner();
    assert_eq!(info.name, "reference.csi-conform.dev");
    // The quirk is served: ValidateVolumeCapabilities of a volume never confirms.
    let capability: v1::VolumeCapability = VolumeCapability::block(AccessMode::SingleNodeWriter).into();
    let mut controller = conn.controller();
    let created = controller
        .create_volume(CreateVolumeRequest {
            name: "binary-test".into(),
            volume_capabilities: vec![capability.clone()],
            ..Default::default()
        })
        .await
        .expect("CreateVolume")
        .into_inner();
    let volume_id = created.volume.expect("a volume").volume_id;
    let answer = controller
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id,
            volume_capabilities: vec![capability],
            ..Default::default()
        })
        .await
        .expect("ValidateVolumeCapabilities")
        .into_inner();
    assert_eq!(answer.confirmed, None, "the unconfirmed quirk: {answer:?}");
    child.kill().await.unwrap();
}

#[test]
fn it_lists_its_quirks_as_the_library_does() {
    let out = std::process::Command::new(BIN).arg("--list-quirks").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), csi_reference::reference::Quirk::listing());
}

#[test]
fn a_bad_flag_or_quirk_exits_2() {
    let out = std::process::Command::new(BIN).arg("--no-such-flag").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("unix://{}", dir.path().join("ref.sock").display());
    let out = std::process::Command::new(BIN).args(["--endpoint", &endpoint, "--quirk", "no-such-quirk"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-quirk"), "{out:?}");
}
