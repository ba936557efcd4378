//! Quirk profiles over the real unix socket: for each quirk, the exact RPC-level misbehaviour,
//! next to the compliant plugin answering the same call correctly; then `--quirk` parsing,
//! `--list-quirks` and the startup warning through the built binary.

use std::process::Stdio;
use std::time::Duration;

use clap::Parser;
use csi_conform::proto::v1::{
    self,
    controller_service_capability::rpc::Type as ControllerRpc,
    validate_volume_capabilities_response::Confirmed,
    volume_capability::access_mode::Mode,
    volume_content_source::{SnapshotSource, Type as SourceType},
};
use csi_conform::reference::{self, Config, EMPTY_SOURCE_MESSAGE, Quirk, UNCONFIRMED_MESSAGE};
use csi_conform::secrets::{SecretKey, Secrets};
use tokio::io::AsyncBufReadExt;
use tonic::Code;

use crate::support::*;

/// A plugin configuration with `quirks` and no real mounts (mounts are beside the point).
fn config(quirks: &[Quirk]) -> Config {
    Config {
        quirks: quirks.iter().copied().collect(),
        real_mounts: false,
        ..Config::default()
    }
}

/// The compliant plugin and one with `quirk`, otherwise configured alike from `base`.
async fn compliant_and(quirk: Quirk, base: Config) -> (TestPlugin, TestPlugin) {
    let quirky = Config {
        quirks: [quirk].into(),
        ..base.clone()
    };
    (
        TestPlugin::start(base).await,
        TestPlugin::start(quirky).await,
    )
}

// ------------------------------------------------------------------------------------------
// ValidateVolumeCapabilities confirmation quirks
// ------------------------------------------------------------------------------------------

/// The capabilities every confirmation test asks about: a mount capability with a file
/// system, flags and a mount group, and a plain reader-only one.
fn asked_caps(flags: &[&str], group: &str, first: Mode, second: Mode) -> Vec<v1::VolumeCapability> {
    vec![
        mount_cap_with(first, "ext4", flags, group),
        mount_cap(second),
    ]
}

/// Creates a MULTI_NODE_MULTI_WRITER mount volume (which supports both asked capabilities)
/// and returns the ValidateVolumeCapabilities request about it.
async fn confirmable_request(p: &TestPlugin) -> v1::ValidateVolumeCapabilitiesRequest {
    let mut ctl = p.controller();
    let created = v1::CreateVolumeRequest {
        parameters: map(&[("tier", "gold")]),
        ..create_req("v", vec![mount_cap(Mode::MultiNodeMultiWriter)])
    };
    let v = ok(ctl.create_volume(created).await)
        .volume
        .expect("a volume");
    v1::ValidateVolumeCapabilitiesRequest {
        volume_id: v.volume_id,
        volume_context: v.volume_context,
        parameters: map(&[("tier", "gold")]),
        volume_capabilities: asked_caps(
            &["noatime", "nodiratime"],
            "1000",
            Mode::SingleNodeWriter,
            Mode::SingleNodeReaderOnly,
        ),
        ..Default::default()
    }
}

/// A confirmation echoing `req`'s context and parameters, with `caps`.
fn confirmed(
    req: &v1::ValidateVolumeCapabilitiesRequest,
    caps: Vec<v1::VolumeCapability>,
) -> v1::ValidateVolumeCapabilitiesResponse {
    v1::ValidateVolumeCapabilitiesResponse {
        confirmed: Some(Confirmed {
            volume_context: req.volume_context.clone(),
            volume_capabilities: caps,
            parameters: req.parameters.clone(),
            mutable_parameters: req.mutable_parameters.clone(),
        }),
        message: String::new(),
    }
}

fn withheld(message: &str) -> v1::ValidateVolumeCapabilitiesResponse {
    v1::ValidateVolumeCapabilitiesResponse {
        confirmed: None,
        message: message.into(),
    }
}

#[tokio::test]
async fn confirmation_quirks_reshape_only_what_would_be_confirmed() {
    let expected = |quirk: Option<Quirk>, req: &v1::ValidateVolumeCapabilitiesRequest| {
        let asked = req.volume_capabilities.clone();
        match quirk {
            None => confirmed(req, asked),
            Some(Quirk::Unconfirmed) => withheld(UNCONFIRMED_MESSAGE),
            Some(Quirk::UnconfirmedSilent) => withheld(""),
            Some(Quirk::IncompleteConfirmation) => confirmed(req, asked[..1].to_vec()),
            Some(Quirk::Overconfirm) => confirmed(
                req,
                asked_caps(
                    &["noatime", "nodiratime"],
                    "1000",
                    Mode::MultiNodeReaderOnly,
                    Mode::SingleNodeWriter,
                ),
            ),
            Some(Quirk::DropMountFlags) => confirmed(
                req,
                asked_caps(&[], "", Mode::SingleNodeWriter, Mode::SingleNodeReaderOnly),
            ),
            Some(q) => unreachable!("{q} is not a confirmation quirk"),
        }
    };
    for quirk in [
        None,
        Some(Quirk::Unconfirmed),
        Some(Quirk::UnconfirmedSilent),
        Some(Quirk::IncompleteConfirmation),
        Some(Quirk::Overconfirm),
        Some(Quirk::DropMountFlags),
    ] {
        let p = TestPlugin::start(config(quirk.as_slice())).await;
        let mut ctl = p.controller();
        let req = confirmable_request(&p).await;
        let answer = ok(ctl.validate_volume_capabilities(req.clone()).await);
        assert_eq!(answer, expected(quirk, &req), "{quirk:?}");

        // Where the compliant plugin would not confirm, no quirk changes the answer.
        let unsupported = v1::ValidateVolumeCapabilitiesRequest {
            volume_capabilities: vec![block_cap(Mode::SingleNodeWriter)],
            ..req
        };
        let answer = ok(ctl.validate_volume_capabilities(unsupported).await);
        assert!(answer.confirmed.is_none(), "{quirk:?}: {answer:?}");
        assert!(
            answer.message.contains("volume_capabilities[0] (block)"),
            "{quirk:?}: {}",
            answer.message
        );
    }
}

#[tokio::test]
async fn confirmation_quirks_compose() {
    let p = TestPlugin::start(config(&[
        Quirk::IncompleteConfirmation,
        Quirk::Overconfirm,
        Quirk::DropMountFlags,
    ]))
    .await;
    let req = confirmable_request(&p).await;
    let answer = ok(p
        .controller()
        .validate_volume_capabilities(req.clone())
        .await);
    let only_first = vec![mount_cap_with(Mode::MultiNodeReaderOnly, "ext4", &[], "")];
    assert_eq!(answer, confirmed(&req, only_first));

    let p = TestPlugin::start(config(&[Quirk::UnconfirmedSilent, Quirk::Unconfirmed])).await;
    let req = confirmable_request(&p).await;
    let answer = ok(p.controller().validate_volume_capabilities(req).await);
    assert_eq!(answer, withheld(UNCONFIRMED_MESSAGE));
}

// ------------------------------------------------------------------------------------------
// advertise-publish-unimplemented
// ------------------------------------------------------------------------------------------

fn stage_req(p: &TestPlugin, v: &v1::Volume, with_context: bool) -> v1::NodeStageVolumeRequest {
    v1::NodeStageVolumeRequest {
        volume_id: v.volume_id.clone(),
        staging_target_path: p.path("staging"),
        volume_capability: Some(snw()),
        volume_context: if with_context {
            v.volume_context.clone()
        } else {
            Default::default()
        },
        ..Default::default()
    }
}

fn node_publish_req(
    p: &TestPlugin,
    v: &v1::Volume,
    with_context: bool,
) -> v1::NodePublishVolumeRequest {
    let stage = stage_req(p, v, with_context);
    v1::NodePublishVolumeRequest {
        volume_id: stage.volume_id,
        staging_target_path: stage.staging_target_path,
        target_path: p.path("target"),
        volume_capability: stage.volume_capability,
        volume_context: stage.volume_context,
        ..Default::default()
    }
}

/// Stages, publishes, unpublishes and unstages `v` with its volume_context and no
/// publish_context; every step must succeed.
async fn node_round_trip(p: &TestPlugin, v: &v1::Volume) {
    let mut node = p.node();
    ok(node.node_stage_volume(stage_req(p, v, true)).await);
    ok(node.node_publish_volume(node_publish_req(p, v, true)).await);
    ok(node
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: v.volume_id.clone(),
            target_path: p.path("target"),
        })
        .await);
    ok(node
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: v.volume_id.clone(),
            staging_target_path: p.path("staging"),
        })
        .await);
}

fn controller_publish_req(v: &v1::Volume) -> v1::ControllerPublishVolumeRequest {
    v1::ControllerPublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        node_id: reference::DEFAULT_NODE_ID.into(),
        volume_capability: Some(snw()),
        volume_context: v.volume_context.clone(),
        ..Default::default()
    }
}

#[tokio::test]
async fn advertise_publish_unimplemented_advertises_what_it_does_not_serve() {
    let (good, quirky) = compliant_and(Quirk::AdvertisePublishUnimplemented, config(&[])).await;
    let publish_cap = v1::ControllerServiceCapability {
        r#type: Some(v1::controller_service_capability::Type::Rpc(
            v1::controller_service_capability::Rpc {
                r#type: ControllerRpc::PublishUnpublishVolume as i32,
            },
        )),
    };
    let unpublish = |v: &v1::Volume| v1::ControllerUnpublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        node_id: reference::DEFAULT_NODE_ID.into(),
        ..Default::default()
    };
    for p in [&good, &quirky] {
        let caps = ok(p
            .controller()
            .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
            .await);
        assert!(caps.capabilities.contains(&publish_cap), "{caps:?}");
    }

    // Compliant: a node insists on the publication, and publishing works.
    let mut ctl = good.controller();
    let v = create(&mut ctl, "v", vec![snw()]).await;
    let s = expect_code(
        good.node()
            .node_stage_volume(stage_req(&good, &v, true))
            .await,
        Code::FailedPrecondition,
    );
    assert!(s.message().contains("ControllerPublishVolume"), "{s:?}");
    let published = ok(ctl
        .controller_publish_volume(controller_publish_req(&v))
        .await);
    assert!(!published.publish_context.is_empty());
    ok(ctl.controller_unpublish_volume(unpublish(&v)).await);

    // Quirky: both publish RPCs are UNIMPLEMENTED, and the node does not wait for them.
    let mut ctl = quirky.controller();
    let v = create(&mut ctl, "v", vec![snw()]).await;
    for s in [
        code_of(
            ctl.controller_publish_volume(controller_publish_req(&v))
                .await,
        ),
        code_of(ctl.controller_unpublish_volume(unpublish(&v)).await),
    ] {
        assert_eq!(s.code(), Code::Unimplemented, "{s:?}");
    }
    node_round_trip(&quirky, &v).await;
}

// ------------------------------------------------------------------------------------------
// empty-source-rejected
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn empty_source_rejected_differs_on_empty_sources_only() {
    let (good, quirky) = compliant_and(Quirk::EmptySourceRejected, config(&[])).await;
    let with_source =
        |name: &str, source: Option<v1::VolumeContentSource>| v1::CreateVolumeRequest {
            volume_content_source: source,
            ..create_req(name, vec![snw()])
        };
    let set_but_empty = Some(v1::VolumeContentSource { r#type: None });
    let empty_snapshot_id = Some(v1::VolumeContentSource {
        r#type: Some(SourceType::Snapshot(SnapshotSource {
            snapshot_id: String::new(),
        })),
    });

    for p in [&good, &quirky] {
        let mut ctl = p.controller();
        // An unset source works on both.
        let plain = ok(ctl.create_volume(with_source("plain", None)).await);
        assert_eq!(plain.volume.expect("a volume").content_source, None);
        // A snapshot source without its (REQUIRED) id is INVALID_ARGUMENT on both.
        let s = expect_code(
            ctl.create_volume(with_source("no-id", empty_snapshot_id.clone())).await,
            Code::InvalidArgument,
        );
        assert!(s.message().contains("snapshot_id"), "{s:?}");
        // A real snapshot source is restored on both.
        let src = create(&mut ctl, "src", vec![snw()]).await;
        let snap = ok(ctl
            .create_snapshot(v1::CreateSnapshotRequest {
                source_volume_id: src.volume_id,
                name: "snap".into(),
                ..Default::default()
            })
            .await)
        .snapshot
        .expect("a snapshot");
        let real = Some(v1::VolumeContentSource {
            r#type: Some(SourceType::Snapshot(SnapshotSource {
                snapshot_id: snap.snapshot_id,
            })),
        });
        let restored = ok(ctl
            .create_volume(with_source("restored", real.clone()))
            .await);
        assert_eq!(restored.volume.expect("a volume").content_source, real);
    }

    // The one observable difference: a set-but-empty source is read as no source by the
    // compliant plugin, and refused by the quirk.
    let blank = ok(good
        .controller()
        .create_volume(with_source("empty", set_but_empty.clone()))
        .await)
    .volume
    .expect("a volume");
    assert_eq!(blank.content_source, None, "a blank volume, no source");
    let s = expect_code(
        quirky
            .controller()
            .create_volume(with_source("empty", set_but_empty))
            .await,
        Code::InvalidArgument,
    );
    assert_eq!(s.message(), EMPTY_SOURCE_MESSAGE);
}

// ------------------------------------------------------------------------------------------
// require-volume-context
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn require_volume_context_fails_node_calls_without_it() {
    let (good, quirky) = compliant_and(Quirk::RequireVolumeContext, config(&[])).await;
    for (p, requires) in [(&good, false), (&quirky, true)] {
        let mut ctl = p.controller();
        let v = create(&mut ctl, "v", vec![snw()]).await;
        assert!(
            !v.volume_context.is_empty(),
            "the volume was handed a context"
        );
        // The controller side is untouched: no volume_context needed there.
        let vvc = v1::ValidateVolumeCapabilitiesRequest {
            volume_id: v.volume_id.clone(),
            volume_capabilities: vec![snw()],
            ..Default::default()
        };
        assert!(
            ok(ctl.validate_volume_capabilities(vvc).await)
                .confirmed
                .is_some()
        );
        let publish = v1::ControllerPublishVolumeRequest {
            volume_context: Default::default(),
            ..controller_publish_req(&v)
        };
        ok(ctl.controller_publish_volume(publish).await);

        // No publish_context below: the quirk, unlike --require-context, does not need it.
        let mut node = p.node();
        let stage = node.node_stage_volume(stage_req(p, &v, false)).await;
        if requires {
            let s = expect_code(stage, Code::FailedPrecondition);
            assert!(
                s.message().contains("NodeStageVolume: volume_context"),
                "{s:?}"
            );
            ok(node.node_stage_volume(stage_req(p, &v, true)).await);
        } else {
            ok(stage);
        }
        let publish = node
            .node_publish_volume(node_publish_req(p, &v, false))
            .await;
        if requires {
            let s = expect_code(publish, Code::FailedPrecondition);
            assert!(
                s.message().contains("NodePublishVolume: volume_context"),
                "{s:?}"
            );
            ok(node
                .node_publish_volume(node_publish_req(p, &v, true))
                .await);
        } else {
            ok(publish);
        }
    }
}

// ------------------------------------------------------------------------------------------
// ignore-secrets
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn ignore_secrets_accepts_missing_and_wrong_secrets() {
    let secrets = Secrets::from_maps([(
        SecretKey::CreateVolume,
        [("password".to_owned(), "hunter2".to_owned())].into(),
    )]);
    let base = Config {
        secrets: Some(secrets),
        ..config(&[])
    };
    let (good, quirky) = compliant_and(Quirk::IgnoreSecrets, base).await;
    let with_secrets = |name: &str, secrets: &[(&str, &str)]| v1::CreateVolumeRequest {
        secrets: map(secrets),
        ..create_req(name, vec![snw()])
    };
    let mut ctl = good.controller();
    expect_code(
        ctl.create_volume(with_secrets("missing", &[])).await,
        Code::Unauthenticated,
    );
    expect_code(
        ctl.create_volume(with_secrets("wrong", &[("password", "letmein")]))
            .await,
        Code::PermissionDenied,
    );
    ok(ctl
        .create_volume(with_secrets("right", &[("password", "hunter2")]))
        .await);

    let mut ctl = quirky.controller();
    for (name, secrets) in [
        ("missing", &[][..]),
        ("wrong", &[("password", "letmein")][..]),
        ("right", &[("password", "hunter2")][..]),
    ] {
        ok(ctl.create_volume(with_secrets(name, secrets)).await);
    }

    // Without --require-secrets the quirk changes nothing.
    let p = TestPlugin::start(config(&[Quirk::IgnoreSecrets])).await;
    ok(p.controller()
        .create_volume(with_secrets("any", &[("password", "whatever")]))
        .await);
}

// ------------------------------------------------------------------------------------------
// internal-on-odd-caps
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn internal_on_odd_caps_fails_block_multi_node_multi_writer() {
    let (good, quirky) = compliant_and(Quirk::InternalOnOddCaps, config(&[])).await;
    let odd = block_cap(Mode::MultiNodeMultiWriter);
    let vvc = |id: &str, cap: v1::VolumeCapability| v1::ValidateVolumeCapabilitiesRequest {
        volume_id: id.into(),
        volume_capabilities: vec![cap],
        ..Default::default()
    };

    let mut ctl = good.controller();
    ok(ctl
        .create_volume(create_req("odd", vec![odd.clone()]))
        .await);
    let v = create(&mut ctl, "v", vec![block_cap(Mode::SingleNodeWriter)]).await;
    let answer = ok(ctl
        .validate_volume_capabilities(vvc(&v.volume_id, odd.clone()))
        .await);
    assert!(answer.confirmed.is_none(), "not covered: {answer:?}");
    assert!(
        answer.message.contains("MULTI_NODE_MULTI_WRITER"),
        "{answer:?}"
    );

    let mut ctl = quirky.controller();
    for caps in [vec![odd.clone()], vec![snw(), odd.clone()]] {
        let s = expect_code(
            ctl.create_volume(create_req("odd", caps)).await,
            Code::Internal,
        );
        assert!(s.message().contains("MULTI_NODE_MULTI_WRITER"), "{s:?}");
    }
    let v = create(&mut ctl, "v", vec![block_cap(Mode::SingleNodeWriter)]).await;
    expect_code(
        ctl.validate_volume_capabilities(vvc(&v.volume_id, odd))
            .await,
        Code::Internal,
    );
    // Other combinations are answered as usual.
    let fine = ok(ctl
        .validate_volume_capabilities(vvc(&v.volume_id, block_cap(Mode::SingleNodeWriter)))
        .await);
    assert!(fine.confirmed.is_some(), "{fine:?}");
    ok(ctl
        .create_volume(create_req(
            "mnmw",
            vec![mount_cap(Mode::MultiNodeMultiWriter)],
        ))
        .await);
}

// ------------------------------------------------------------------------------------------
// The command line
// ------------------------------------------------------------------------------------------

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: reference::Args,
}

#[test]
fn quirk_flags_parse_into_the_config() {
    let args = Cli::try_parse_from([
        "x",
        "--endpoint",
        "unix:///tmp/x.sock",
        "--quirk",
        "overconfirm",
        "--quirk",
        "ignore-secrets",
        "--quirk",
        "overconfirm",
    ])
    .unwrap()
    .args;
    let config = Config::from_args(&args).unwrap();
    assert_eq!(
        config.quirks,
        [Quirk::Overconfirm, Quirk::IgnoreSecrets].into()
    );
    assert!(
        Config::from_args(&Cli::try_parse_from(["x"]).unwrap().args)
            .unwrap()
            .quirks
            .is_empty()
    );

    let err = Cli::try_parse_from(["x", "--quirk", "nonsense"])
        .err()
        .expect("an unknown quirk is a usage error")
        .to_string();
    assert!(err.contains("unknown quirk \"nonsense\""), "{err}");
    assert!(!err.contains("did you mean"), "{err}");
    for q in Quirk::ALL {
        assert!(err.contains(q.name()), "{q} missing from: {err}");
    }
    let err = Cli::try_parse_from(["x", "--quirk", "overconfirmed"])
        .err()
        .expect("a usage error")
        .to_string();
    assert!(err.contains("did you mean \"overconfirm\"?"), "{err}");
}

/// The built binary's `reference-plugin` subcommand, without CSI_ENDPOINT from the caller.
fn binary(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_csi-conform"))
        .arg("reference-plugin")
        .args(args)
        .env_remove("CSI_ENDPOINT")
        .output()
        .expect("run the binary")
}

#[test]
fn list_quirks_prints_every_quirk_without_an_endpoint() {
    let out = binary(&["--list-quirks"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), Quirk::ALL.len(), "{stdout}");
    for (line, q) in lines.iter().zip(Quirk::ALL) {
        let (name, description) = line.split_once(' ').expect("name and description");
        assert_eq!(name, q.name());
        let description = description.trim_start();
        match q.answer_rule() {
            // Answer quirks name the response rule they break, and its requirement.
            Some(rule) => {
                assert!(description.starts_with(q.description()), "{line}");
                assert!(description.ends_with(&format!("[breaks {rule}, {}]", {
                    let r = csi_conform::rules::by_id(rule).unwrap();
                    format!("{} {}", r.requirement, r.level.as_str())
                })), "{line}");
            }
            None => assert_eq!(description, q.description()),
        }
    }

    // Serving still needs an endpoint; an unknown quirk is a usage error.
    let out = binary(&[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--endpoint"), "{stderr}");
    let out = binary(&["--list-quirks", "--quirk", "nonsense"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("valid quirks: unconfirmed,"), "{stderr}");
}

#[tokio::test]
async fn active_quirks_are_logged_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_csi-conform"))
        .arg("reference-plugin")
        .arg("--endpoint")
        .arg(format!("unix://{}", socket.display()))
        .args(["--quirk", "overconfirm", "--quirk", "ignore-secrets"])
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the plugin binary");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut logged = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        while logged.len() < 2 {
            let line = lines.next_line().await.unwrap().expect("the plugin exited");
            if line.contains("quirk active") {
                logged.push(line);
            }
        }
    })
    .await;
    child.kill().await.unwrap();
    assert!(read.is_ok(), "no quirk warnings; got {logged:?}");
    assert!(logged.iter().all(|l| l.contains("WARN")), "{logged:?}");
    assert!(
        logged[0].contains("overconfirm") && logged[1].contains("ignore-secrets"),
        "{logged:?}"
    );
}
