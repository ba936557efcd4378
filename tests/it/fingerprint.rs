//! Fingerprinting the reference plugin over a real socket: in full, node-only and
//! controller-only, and with capabilities switched off; plus the `fingerprint` command.

use csi_conform::{
    fingerprint::{Capability, Fingerprint},
    reference::{Config, Mode},
};

use crate::support::{TestPlugin, harness_connection};

fn caps(f: &Fingerprint) -> Vec<String> {
    f.advertised().iter().map(ToString::to_string).collect()
}

#[tokio::test]
async fn the_full_plugin_reports_every_service_and_its_node() {
    let plugin = TestPlugin::start(Config::default()).await;
    let conn = harness_connection(&plugin).await;
    let f = Fingerprint::collect(Some(&conn), std::slice::from_ref(&conn)).await.unwrap();
    assert_eq!(f.plugin.name, "reference.csi-conform.dev");
    assert_eq!(f.plugin.vendor_version, env!("CARGO_PKG_VERSION"));
    let all = caps(&f);
    for expected in [
        "plugin:CONTROLLER_SERVICE",
        "plugin:GROUP_CONTROLLER_SERVICE",
        "expansion:ONLINE",
        "controller:CREATE_DELETE_VOLUME",
        "controller:GET_SNAPSHOT",
        "group:CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT",
        "node:STAGE_UNSTAGE_VOLUME",
        "node:VOLUME_MOUNT_GROUP",
    ] {
        assert!(all.contains(&expected.to_owned()), "{expected} missing from {all:?}");
    }
    assert_eq!(f.nodes.len(), 1);
    assert_eq!(f.nodes[0].node_id, "csi-conform-node-1");
    assert_eq!(f.nodes[0].max_volumes_per_node, 16);
    assert!(f.notes.is_empty(), "{:?}", f.notes);
    let table = f.to_table();
    assert!(table.contains("controller capabilities") && table.contains("CREATE_DELETE_VOLUME"), "{table}");
}

#[tokio::test]
async fn a_node_only_plugin_fingerprints_without_any_controller_call() {
    let plugin = TestPlugin::start(Config { mode: Mode::NodeOnly, ..Config::default() }).await;
    let conn = harness_connection(&plugin).await;
    let f = Fingerprint::collect(Some(&conn), std::slice::from_ref(&conn)).await.unwrap();
    assert!(f.controller.is_none());
    assert!(f.group_controller.is_none());
    assert!(!f.supports("plugin:CONTROLLER_SERVICE".parse::<Capability>().unwrap()));
    assert_eq!(f.nodes.len(), 1);
    let calls = conn.stats().snapshot();
    let controller_calls: Vec<&String> =
        calls.keys().filter(|rpc| rpc.starts_with("Controller") || rpc.starts_with("GroupController")).collect();
    assert!(controller_calls.is_empty(), "controller RPCs were sent: {controller_calls:?}");
    assert!(f.to_table().contains("(not advertised)"));
}

#[tokio::test]
async fn a_controller_only_plugin_fingerprints_with_a_note_instead_of_a_node() {
    let plugin = TestPlugin::start(Config { mode: Mode::ControllerOnly, ..Config::default() }).await;
    let conn = harness_connection(&plugin).await;
    let f = Fingerprint::collect(Some(&conn), std::slice::from_ref(&conn)).await.unwrap();
    assert!(f.controller.is_some());
    assert!(f.nodes.is_empty());
    assert_eq!(f.notes.len(), 1, "{:?}", f.notes);
    assert!(f.notes[0].contains("does not serve the Node service"), "{:?}", f.notes);
    assert!(!f.supports("node:STAGE_UNSTAGE_VOLUME".parse().unwrap()));
}

#[tokio::test]
async fn disabled_capabilities_are_not_advertised() {
    let mut config = Config::default();
    config.disabled.add("PUBLISH_UNPUBLISH_VOLUME").unwrap();
    config.disabled.add("node:STAGE_UNSTAGE_VOLUME").unwrap();
    let plugin = TestPlugin::start(config).await;
    let conn = harness_connection(&plugin).await;
    let f = Fingerprint::collect(Some(&conn), std::slice::from_ref(&conn)).await.unwrap();
    assert!(!f.supports("controller:PUBLISH_UNPUBLISH_VOLUME".parse().unwrap()));
    assert!(!f.supports("node:STAGE_UNSTAGE_VOLUME".parse().unwrap()));
    assert!(f.supports("controller:CREATE_DELETE_VOLUME".parse().unwrap()));
}

#[tokio::test]
async fn the_fingerprint_command_prints_a_table_and_json() {
    let plugin = TestPlugin::start(Config::default()).await;
    let bin = env!("CARGO_BIN_EXE_csi-conform");
    let socket = plugin.socket.display().to_string();
    let table = tokio::process::Command::new(bin).args(["fingerprint", "--endpoint", &socket]).output().await.unwrap();
    assert!(table.status.success(), "{}", String::from_utf8_lossy(&table.stderr));
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.starts_with("plugin "), "{text}");
    assert!(text.contains("reference.csi-conform.dev") && text.contains("node id"), "{text}");
    let json = tokio::process::Command::new(bin)
        .args(["fingerprint", "--endpoint", &format!("unix://{socket}"), "--format", "json"])
        .output()
        .await
        .unwrap();
    assert!(json.status.success());
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["plugin"]["name"], "reference.csi-conform.dev");
    assert_eq!(value["nodes"][0]["node_id"], "csi-conform-node-1");
    assert!(value["controller"]["capabilities"].as_array().unwrap().iter().any(|c| c == "LIST_VOLUMES"));
}

#[tokio::test]
async fn the_fingerprint_command_exits_2_with_the_reason_when_it_cannot_connect() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.sock");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_csi-conform"))
        .args(["fingerprint", "--endpoint", &missing.display().to_string(), "--connect-timeout", "200ms"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with(&format!("error: no socket at {}", missing.display())), "{err}");
}
