//! The engine against plugins that hang, crash, come back, or lie on the wire: every case is
//! a finding on the scenario it hits, never a hang past its bound, a panic or a lost resource.

use std::{sync::Arc, time::Duration};

use csi_conform::{
    client::ClientOptions,
    journal::{self, Journal, JournalObserver, Outstanding},
    proto::v1,
    report::{RunReport, ScenarioResult, Severity},
    suite::{self, Reconnect, RunConfig, Suite},
};
use prost::Message;

use crate::support::{
    fake_plugin::{FakeOptions, FakePlugin},
    misbehaving::{Misbehaviour, fake_where, rules},
    process::csi_conform,
};

fn config(work: &tempfile::TempDir) -> RunConfig {
    RunConfig {
        jobs: 1,
        idempotency_count: 2,
        seed: 6,
        work_dir: work.path().join("work"),
        reconnect: Reconnect { attempts: 6, first_wait: Duration::from_millis(25) },
        ..RunConfig::default()
    }
}

fn options(rpc_timeout: Duration) -> ClientOptions {
    ClientOptions { rpc_timeout, ..ClientOptions::default() }
}

fn load(text: &str) -> Vec<Suite> {
    vec![suite::load_str("misbehaving.yaml", text).unwrap_or_else(|e| panic!("{e}"))]
}

fn scenario<'a>(report: &'a RunReport, id: &str) -> &'a ScenarioResult {
    report.suites.iter().flat_map(|s| &s.scenarios).find(|s| s.id == id).unwrap_or_else(|| panic!("no {id}"))
}

/// (kind, message) of each finding.
fn findings(s: &ScenarioResult) -> Vec<(String, String)> {
    s.findings.iter().map(|f| (f.kind.clone(), f.message.clone())).collect()
}

const HANG_SUITE: &str = r#"
suite: hang
title: CreateVolume never answers
scenarios:
  - id: create
    title: the hung call fails at the deadline
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
  - id: after
    title: and the run goes on
    steps:
      - call: Probe
      - call: ControllerPublishVolume
        request: { volume_id: "vol-x", node_id: "${node.id}", volume_capability: "${capability}" }
        expect: { code: NOT_FOUND }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rpc_that_never_answers_fails_its_scenario_at_the_deadline_and_the_run_goes_on() {
    let fake = fake_where("CreateVolume", Misbehaviour::Hang).await;
    let plugin = fake.engine_plugin(options(Duration::from_millis(300))).await;
    let work = tempfile::tempdir().unwrap();
    let report = suite::run(&plugin, &load(HANG_SUITE), &config(&work)).await;
    let hung = scenario(&report, "hang.create");
    assert_eq!(hung.outcome, Severity::Fail);
    assert_eq!(
        findings(hung),
        [("timeout".to_owned(), "CreateVolume did not answer within 300ms (--rpc-timeout); the plugin may be hung".to_owned())]
    );
    assert_eq!(hung.findings[0].rpc.as_deref(), Some("CreateVolume"));
    assert_eq!(scenario(&report, "hang.after").outcome, Severity::Pass, "{:?}", findings(scenario(&report, "hang.after")));
    assert!(fake.volume_ids().is_empty());
}

const CRASH_SUITE: &str = r#"
suite: crash
title: The plugin dies in the first scenario
scenarios:
  - id: a
    title: the plugin dies while creating
    steps:
      - call: CreateVolume
        request: { name: "${name}-crash", volume_capabilities: ["${capability}"] }
  - id: b
    title: a whole lifecycle afterwards
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
        save: { vol: volume.volume_id }
      - call: ControllerPublishVolume
        request: { volume_id: "${vol}", node_id: "${node.id}", volume_capability: "${capability}" }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_comes_back_after_a_crash_is_reconnected_and_later_scenarios_run() {
    let fake = FakePlugin::start(FakeOptions { restart_after: Some(Duration::from_millis(100)), ..FakeOptions::default() })
        .await;
    let plugin = fake.engine_plugin(options(Duration::from_secs(5))).await;
    let work = tempfile::tempdir().unwrap();
    let report = suite::run(&plugin, &load(CRASH_SUITE), &config(&work)).await;
    let crashed = scenario(&report, "crash.a");
    assert_eq!(crashed.outcome, Severity::Error);
    assert_eq!(crashed.findings[0].kind, "unreachable");
    assert!(crashed.findings[0].message.starts_with("plugin unreachable: "), "{}", crashed.findings[0].message);
    let after = scenario(&report, "crash.b");
    assert_eq!(after.outcome, Severity::Pass, "{:?}", findings(after));
    // The restarted plugin was used, and everything made on it was torn down.
    assert!(fake.volume_ids().is_empty(), "{:?}", fake.volume_ids());
    assert!(fake.state.lock().unwrap().published.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_stays_dead_fails_the_rest_as_errors_after_bounded_retries() {
    let fake = FakePlugin::start(FakeOptions::default()).await;
    let plugin = fake.engine_plugin(options(Duration::from_secs(5))).await;
    let work = tempfile::tempdir().unwrap();
    let mut cfg = config(&work);
    cfg.reconnect = Reconnect { attempts: 2, first_wait: Duration::from_millis(10) };
    let report = suite::run(&plugin, &load(CRASH_SUITE), &cfg).await;
    assert_eq!(scenario(&report, "crash.a").outcome, Severity::Error);
    let after = scenario(&report, "crash.b");
    assert_eq!(after.outcome, Severity::Error);
    let (kind, message) = &findings(after)[0];
    assert_eq!(kind, "unreachable");
    let endpoint = format!("unix://{}", fake.socket.display());
    assert!(
        message.starts_with(&format!("plugin unreachable: {endpoint} stopped answering earlier in the run (2 reconnect attempts over ")),
        "{message}"
    );
    assert!(message.contains(" failed, --reconnect-attempts)"), "the bound is named with its flag: {message}");
    assert!(report.failed());
}

/// The bytes of a prost message, for a plugin that answers exactly them.
fn raw(message: impl Message) -> Misbehaviour {
    Misbehaviour::Raw(message.encode_to_vec())
}

const LIES_SUITE: &str = r#"
suite: lies
title: Answers that cannot be true
scenarios:
  - id: undecodable
    title: bytes that are no CreateVolumeResponse
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
  - id: enormous
    title: an answer over the message size limit
    steps:
      - call: ListVolumes
  - id: negative
    title: a negative capacity
    steps:
      - call: ControllerExpandVolume
        request: { volume_id: "v", capacity_range: { required_bytes: 1 } }
  - id: undefined-enum
    title: a capability the spec does not define
    steps:
      - call: ControllerGetCapabilities
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_enormous_and_impossible_answers_are_findings_not_crashes() {
    use v1::controller_service_capability::{Rpc, Type};
    let capability = |n| v1::ControllerServiceCapability { r#type: Some(Type::Rpc(Rpc { r#type: n })) };
    let fake = FakePlugin::start(FakeOptions {
        misbehave: rules([
            // A field header announcing a length-delimited field 1 of 2^35 bytes.
            ("CreateVolume", Misbehaviour::Raw(vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x7f])),
            ("ListVolumes", Misbehaviour::Raw(vec![0; 100 * 1024])),
            ("ControllerExpandVolume", raw(v1::ControllerExpandVolumeResponse { capacity_bytes: -5, node_expansion_required: false })),
            ("ControllerGetCapabilities", raw(v1::ControllerGetCapabilitiesResponse { capabilities: vec![capability(1), capability(99)] })),
        ]),
        ..FakeOptions::default()
    })
    .await;
    let plugin = fake
        .engine_plugin(ClientOptions { max_message_size: 64 * 1024, ..options(Duration::from_secs(5)) })
        .await;
    // The fingerprint survived the undefined capability, and says so.
    assert!(plugin.fingerprint.notes.iter().any(|n| n.contains("99")), "{:?}", plugin.fingerprint.notes);
    let work = tempfile::tempdir().unwrap();
    let report = suite::run(&plugin, &load(LIES_SUITE), &config(&work)).await;

    let undecodable = scenario(&report, "lies.undecodable");
    assert_eq!(undecodable.outcome, Severity::Fail);
    let (kind, message) = &findings(undecodable)[0];
    assert_eq!(kind, "bad-response");
    assert!(
        message.starts_with("CreateVolume answered with a message that could not be decoded (malformed, or over --max-message-size): failed to decode CreateVolumeResponse"),
        "{message}"
    );

    let enormous = scenario(&report, "lies.enormous");
    assert_eq!(enormous.outcome, Severity::Fail);
    let (kind, message) = &findings(enormous)[0];
    assert_eq!(kind, "bad-response");
    assert!(message.contains("found 102400 bytes, the limit is: 65536 bytes"), "{message}");

    let negative = scenario(&report, "lies.negative");
    assert_eq!(
        findings(negative),
        [("impossible-value".to_owned(), "ControllerExpandVolume answered capacity_bytes = -5, which cannot be negative".to_owned())]
    );
    assert_eq!(negative.outcome, Severity::Fail);

    let undefined = scenario(&report, "lies.undefined-enum");
    assert_eq!(undefined.outcome, Severity::Warn, "a newer spec may define it: {:?}", findings(undefined));
    assert_eq!(
        findings(undefined),
        [(
            "impossible-value".to_owned(),
            "ControllerGetCapabilities answered capabilities[1].rpc.type = 99, which csi.v1.ControllerServiceCapability.RPC.Type does not define in CSI v1.12 or v1.13 (garbage, or a newer spec version)".to_owned()
        )]
    );
}

const OK_INSTEAD_SUITE: &str = r#"
suite: ok-instead
title: OK where an error is due
scenarios:
  - id: stats
    title: stats of a volume that does not exist
    steps:
      - call: NodeGetVolumeStats
        request: { volume_id: "${name}-nonexistent", volume_path: "${paths.target}" }
        expect: { code: NOT_FOUND }
  - id: validate
    title: capabilities of a volume that does not exist
    steps:
      - call: ValidateVolumeCapabilities
        request: { volume_id: "${name}-nonexistent", volume_capabilities: ["${capability}"] }
        expect: { code: NOT_FOUND }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ok_where_an_error_is_due_shows_what_came_back_redacted_and_short() {
    use v1::volume_capability::{AccessMode, AccessType, MountVolume};
    let secret = "Kx77-stage-secret";
    let stats = v1::NodeGetVolumeStatsResponse {
        usage: vec![v1::VolumeUsage { total: 1024, used: 1, available: 1023, unit: 1 }],
        volume_condition: Some(v1::VolumeCondition { abnormal: true, message: format!("no such volume; key {secret}") }),
    };
    let confirmed = v1::ValidateVolumeCapabilitiesResponse {
        confirmed: Some(v1::validate_volume_capabilities_response::Confirmed {
            volume_capabilities: vec![v1::VolumeCapability {
                access_type: Some(AccessType::Mount(MountVolume { mount_flags: vec!["password=hunter2".into()], ..Default::default() })),
                access_mode: Some(AccessMode { mode: 1 }),
            }],
            ..Default::default()
        }),
        message: "x".repeat(500),
    };
    let fake = FakePlugin::start(FakeOptions {
        misbehave: rules([("NodeGetVolumeStats", raw(stats)), ("ValidateVolumeCapabilities", raw(confirmed))]),
        ..FakeOptions::default()
    })
    .await;
    let plugin = fake.engine_plugin(options(Duration::from_secs(5))).await;
    let work = tempfile::tempdir().unwrap();
    let mut config = config(&work);
    config.secrets = [("NodeStageVolumeSecret".to_owned(), [("key".to_owned(), secret.to_owned())].into())].into();
    let report = suite::run(&plugin, &load(OK_INSTEAD_SUITE), &config).await;

    let stats = scenario(&report, "ok-instead.stats");
    assert_eq!(stats.outcome, Severity::Fail);
    let f = &stats.findings[0];
    assert_eq!((f.expected.as_deref(), f.got.as_deref()), (Some("NOT_FOUND"), Some("OK")));
    assert_eq!(
        f.message,
        "NodeGetVolumeStats answered OK, expected NOT_FOUND; it returned usage[0].available=1023, usage[0].total=1024, \
         usage[0].used=1, usage[0].unit='BYTES', volume_condition.abnormal=true, volume_condition.message='no such volume; key <redacted>'"
    );

    let validate = scenario(&report, "ok-instead.validate");
    // The 500-byte message also breaks the (SHOULD) size rule for message fields: a warning.
    let rule = validate.findings.iter().find(|f| f.kind == "response-rule").expect("the size rule's finding");
    assert_eq!((rule.severity, rule.requirements.as_slice()), (Severity::Warn, &["General.strings.answer-within-limit".to_owned()][..]));
    let f = validate.findings.iter().find(|f| f.kind == "unexpected-code").expect("the unexpected OK");
    assert!(
        f.message.starts_with(
            "ValidateVolumeCapabilities answered OK, expected NOT_FOUND; it returned \
             confirmed.volume_capabilities[0].mount.mount_flags[0]='<redacted>'"
        ),
        "{}",
        f.message
    );
    assert!(f.message.contains(&format!("message='{}...'", "x".repeat(60))), "{}", f.message);
    assert!(f.message.chars().count() < 400, "bounded: {}", f.message);
    let json = csi_conform::report::to_json(&report);
    assert!(!json.contains("hunter2") && !json.contains(secret), "no secret in the report");
}

/// A plugin that cannot stage at all (ember-csi on its fake Cinder backend answers UNKNOWN):
/// the built-in scenario about a missing volume_context fails on its control step, and does
/// not blame the missing context with a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_cannot_stage_is_not_warned_about_the_volume_context() {
    let fake = FakePlugin::start(FakeOptions {
        misbehave: rules([("NodeStageVolume", Misbehaviour::Refuse(tonic::Code::Unknown, "cannot attach"))]),
        ..FakeOptions::default()
    })
    .await;
    let plugin = fake.engine_plugin(options(Duration::from_secs(5))).await;
    let work = tempfile::tempdir().unwrap();
    let config = RunConfig {
        focus: vec![regex::Regex::new("^extras\\.node\\.stage-without-volume-context$").unwrap()],
        ..config(&work)
    };
    let report = suite::run(&plugin, &suite::builtin(), &config).await;
    let s = scenario(&report, "extras.node.stage-without-volume-context");
    assert_eq!(s.outcome, Severity::Fail, "{:?}", findings(s));
    let (kind, message) = &findings(s)[0];
    assert_eq!(kind, "unexpected-code");
    assert!(message.starts_with("NodeStageVolume with the volume_context: NodeStageVolume answered UNKNOWN"), "{message}");
    assert!(s.findings.iter().all(|f| f.kind != "requires-volume-context"), "{:?}", findings(s));
}

const ABANDON_SUITE: &str = r#"
suite: abandon
title: Teardown that cannot finish
scenarios:
  - id: stuck
    title: a volume whose DeleteVolume never answers
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
      - call: Probe
  - id: never
    title: not started after the stop
    steps:
      - call: Probe
"#;

/// Forwards to the journal, and says when the first resource is registered.
struct Notifying(JournalObserver, Arc<tokio::sync::Notify>);

impl suite::ResourceObserver for Notifying {
    fn sending(&self, call: &suite::Sending) {
        self.0.sending(call)
    }
    fn answered(&self, call: &suite::Sending) {
        self.0.answered(call)
    }
    fn unanswered(&self, call: &suite::Sending) {
        self.0.unanswered(call)
    }
    fn registered(&self, r: &suite::Tracked) {
        self.0.registered(r);
        self.1.notify_one();
    }
    fn released(&self, r: &suite::Tracked) {
        self.0.released(r)
    }
    fn left_behind(&self, r: &suite::Tracked, why: &str) {
        self.0.left_behind(r, why)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_bounds_teardown_by_the_cleanup_timeout_and_leaves_the_rest_in_the_journal() {
    let fake = fake_where("DeleteVolume", Misbehaviour::Hang).await;
    let work = tempfile::tempdir().unwrap();
    let mut cfg = config(&work);
    cfg.cleanup_timeout = Duration::from_millis(200);
    let (report, path) = stopped_at_first_creation(&fake, &work, cfg).await;

    assert_eq!(report.interrupted.as_deref(), Some("interrupted by SIGINT"));
    let stuck = scenario(&report, "abandon.stuck");
    assert_eq!(stuck.outcome, Severity::Error);
    assert_eq!(
        findings(stuck),
        [(
            "interrupted".to_owned(),
            "interrupted by SIGINT; the scenario did not finish its teardown within the cleanup timeout of 200ms (--cleanup-timeout): what it created is left in the journal for `csi-conform cleanup`".to_owned()
        )]
    );
    let never = scenario(&report, "abandon.never");
    assert_eq!((never.outcome, never.skip_reason.as_deref()), (Severity::Skip, Some("not run: interrupted by SIGINT")));
    // The volume exists, and the journal says so (the unanswered call too).
    let ids = fake.volume_ids();
    assert_eq!(ids.len(), 1);
    let left = journal::outstanding(&path).unwrap();
    let volumes: Vec<String> = left
        .iter()
        .map(|(_, o)| match o {
            Outstanding::Resource(r) => r.resource.to_string(),
            Outstanding::Call(c) => format!("call {}", c.rpc),
        })
        .collect();
    assert_eq!(volumes, [format!("volume {}", ids[0])]);
}

/// [`ABANDON_SUITE`] against `fake`, journaled, stopped ("interrupted by SIGINT") as soon as
/// its first volume is created; the RPC timeout (600 s) far beyond any other bound, so only
/// those end what hangs. The report and the journal's path.
async fn stopped_at_first_creation(fake: &FakePlugin, work: &tempfile::TempDir, mut cfg: RunConfig) -> (RunReport, std::path::PathBuf) {
    let plugin = fake.engine_plugin(options(Duration::from_secs(600))).await;
    let path = work.path().join("journal.jsonl");
    let endpoint = format!("unix://{}", fake.socket.display());
    let created = Arc::new(tokio::sync::Notify::new());
    let observer = JournalObserver::new(Journal::open(&path, "r1").unwrap(), Some(endpoint.clone()), vec![endpoint]);
    cfg.observer = Some(Arc::new(Notifying(observer, created.clone())));
    let stop = async move {
        created.notified().await;
        "interrupted by SIGINT".to_owned()
    };
    (suite::run_until(&plugin, &load(ABANDON_SUITE), &cfg, stop).await, path)
}

/// A stopped run whose teardown's delete is still to be verified when the scenarios are done,
/// against a plugin whose listing never answers: the verifier gets the grace period, not the
/// RPC timeout, and then reports the delete as not verified (an error, never a pass), the
/// volume left in the journal for `cleanup`.
#[tokio::test]
async fn a_stopped_run_reports_a_delete_it_could_not_verify_in_time() {
    let fake = fake_where("ListVolumes", Misbehaviour::Hang).await;
    let work = tempfile::tempdir().unwrap();
    let mut cfg = config(&work);
    cfg.delete_grace = Duration::from_millis(300);
    let (report, path) = stopped_at_first_creation(&fake, &work, cfg).await;

    assert_eq!(report.interrupted.as_deref(), Some("interrupted by SIGINT"));
    let stuck = scenario(&report, "abandon.stuck");
    assert_eq!(stuck.outcome, Severity::Error, "{stuck:#?}");
    let found = findings(stuck);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].0, "delete-unverified");
    assert!(found[0].1.starts_with("DeleteVolume answered OK, but whether the plugin deleted the volume"), "{found:#?}");
    // The delete was answered, the volume is gone from the fake, and the journal still lists
    // it: `cleanup` deletes it again (idempotent) rather than trust an unverified delete.
    assert!(fake.volume_ids().is_empty());
    let left = journal::outstanding(&path).unwrap();
    assert_eq!(left.len(), 1, "{left:#?}");
}

/// Runs `csi-conform run --no-builtin --suite <text>` against `fake` with extra `args`;
/// returns the output and the run's JSON report.
async fn cli_run(fake: &FakePlugin, suite: &str, args: &[&str]) -> (std::process::Output, RunReport, tempfile::TempDir) {
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("suite.yaml"), suite).unwrap();
    let socket = fake.socket.display().to_string();
    let mut all = vec!["run", "--endpoint", &socket, "--no-builtin", "--suite", "suite.yaml", "--work-dir", "work"];
    all.extend(args);
    let out = csi_conform(&all, cwd.path()).await;
    let json = std::fs::read_to_string(cwd.path().join("reports/report.json"))
        .unwrap_or_else(|e| panic!("no report ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (out, csi_conform::report::from_json(&json).unwrap(), cwd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_reports_a_hung_rpc_with_its_deadline_and_exits_1() {
    let fake = fake_where("CreateVolume", Misbehaviour::Hang).await;
    let (out, report, cwd) = cli_run(&fake, HANG_SUITE, &["--rpc-timeout", "250ms", "--cleanup-timeout", "500ms"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL  hang.create"), "{stdout}");
    assert!(stdout.contains("CreateVolume did not answer within 250ms (--rpc-timeout); the plugin may be hung"), "{stdout}");
    assert_eq!(scenario(&report, "hang.after").outcome, Severity::Pass);
    // The plugin may yet make the volume it never answered for: the journal keeps the call.
    let left = journal::outstanding(&cwd.path().join("reports/journal.jsonl")).unwrap();
    let described: Vec<String> = left.iter().map(|(_, o)| o.to_string()).collect();
    assert_eq!(described.len(), 1);
    assert!(described[0].starts_with("unanswered CreateVolume of csi-conform-"), "{described:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "warning: reports/journal.jsonl lists 1 resource(s) or unanswered call(s) left on the plugin \
             (not undone within --cleanup-timeout 500ms and 3 --reconnect-attempts); undo them with `csi-conform cleanup --journal reports/journal.jsonl`"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_timeout_bounds_a_run_stuck_in_a_hung_rpc() {
    let fake = fake_where("CreateVolume", Misbehaviour::Hang).await;
    // Without the run timeout this run would wait out a ten-minute RPC deadline.
    let args = ["--rpc-timeout", "10m", "--run-timeout", "300ms", "--cleanup-timeout", "200ms", "-j", "1"];
    let (out, report, _cwd) = cli_run(&fake, HANG_SUITE, &args).await;
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(report.interrupted.as_deref(), Some("the run timeout of 300ms (--run-timeout) was reached"));
    let hung = scenario(&report, "hang.create");
    assert_eq!(hung.outcome, Severity::Error);
    assert_eq!(hung.findings[0].kind, "interrupted");
    let after = scenario(&report, "hang.after");
    assert_eq!(
        (after.outcome, after.skip_reason.as_deref()),
        (Severity::Skip, Some("not run: the run timeout of 300ms (--run-timeout) was reached"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_dying_mid_run_gives_errors_a_junit_report_and_exit_1() {
    let fake = FakePlugin::start(FakeOptions::default()).await;
    let (out, report, cwd) = cli_run(&fake, CRASH_SUITE, &["--reconnect-attempts", "1", "-j", "1"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("ERROR crash.a") && stdout.contains("ERROR crash.b"), "{stdout}");
    for id in ["crash.a", "crash.b"] {
        let s = scenario(&report, id);
        assert_eq!(s.outcome, Severity::Error);
        assert!(s.findings[0].message.starts_with("plugin unreachable: "), "{}", s.findings[0].message);
    }
    let junit = std::fs::read_to_string(cwd.path().join("reports/junit.xml")).unwrap();
    let parsed = crate::report::parse_junit(&junit);
    assert_eq!((parsed.tests, parsed.errors), (2, 2));
}
