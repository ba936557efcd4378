//! Running suites against a real plugin over a real unix socket (the in-test fake): gating,
//! codes, assertions, variables, idempotency, polling, secrets, teardown, serial scenarios,
//! determinism across `jobs`, filters, and an unreachable plugin.

use std::{collections::BTreeMap, time::Duration};

use csi_conform::{
    client::ClientOptions,
    report::{RunReport, ScenarioResult, Severity},
    suite::{self, Plugin, RunConfig, Suite},
};
use regex::Regex;

use crate::support::{
    EventLog,
    fake_plugin::{FakeOptions, FakePlugin, FakeVolume},
};

const SUITE: &str = r#"
suite: run
title: Engine run tests
scenarios:
  - id: gate.capability
    title: needs GetSnapshot
    requires: [controller:GET_SNAPSHOT]
    steps: [{ call: Probe }]
  - id: gate.nodes
    title: needs two nodes
    requires_nodes: 2
    steps: [{ call: Probe }]
  - id: gate.option
    title: needs the attach-limit opt-in
    requires_option: attach_limit
    steps: [{ call: Probe }]
  - id: gate.any
    title: needs one of two capabilities
    requires_any: [controller:GET_SNAPSHOT, controller:CLONE_VOLUME]
    steps: [{ call: Probe }]
  - id: codes.no-name
    title: CreateVolume without a name is refused
    steps:
      - call: CreateVolume
        request: { volume_capabilities: ["${capability}"] }
        expect: { code: INVALID_ARGUMENT }
  - id: codes.wrong
    title: an unexpected code is a failure with details
    steps:
      - call: CreateVolume
        request: { name: "", volume_capabilities: ["${capability}"] }
  - id: lifecycle.ok
    title: create, validate, publish, stage, publish
    tags: [lifecycle]
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"], capacity_range: { required_bytes: "${volume_size}" } }
        expect:
          fields:
            - { path: volume.volume_id, non_empty: true, matches: "^vol-" }
            - { path: volume.capacity_bytes, ge: "${volume_size}" }
            - { path: volume.accessible_topology, each: { path: segments.zone, equals: "${node.topology.zone}" } }
        save: { vol: volume, vol_id: volume.volume_id }
      - assert:
          - { value: "${vol.volume_id}", equals: "${vol_id}" }
          - { value: "${vol_id}", equals: "vol-${name}" }
      - call: ValidateVolumeCapabilities
        request: { volume_id: "${vol_id}", volume_capabilities: ["${capability}"] }
        expect: { fields: [{ path: confirmed.volume_capabilities, length: 1 }] }
      - when: controller:PUBLISH_UNPUBLISH_VOLUME
        call: ControllerPublishVolume
        request: { volume_id: "${vol_id}", node_id: "${node.id}", volume_capability: "${capability}" }
        save: { ctx: publish_context }
      - when: node:STAGE_UNSTAGE_VOLUME
        call: NodeStageVolume
        request: { volume_id: "${vol_id}", staging_target_path: "${paths.staging}", volume_capability: "${capability}", publish_context: "${ctx}" }
      - call: NodePublishVolume
        request: { volume_id: "${vol_id}", staging_target_path: "${paths.staging}", target_path: "${paths.target}", volume_capability: "${capability}" }
      - check: path-state
        args: { path: "${paths.target}", is: directory }
      - check: path-state
        args: { path: "${paths.target2}", is: absent }
  - id: idempotency.ok
    title: a repeated CreateVolume answers the same
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
        repeat: idempotency
  - id: idempotency.flaky
    title: a plugin that answers differently is caught
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"], parameters: { flaky: "yes" } }
        repeat: idempotency
  - id: poll.snapshot
    title: polling until a snapshot is ready
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
        save: { vol_id: volume.volume_id }
      - call: CreateSnapshot
        request: { name: "${name}", source_volume_id: "${vol_id}" }
        poll: { until: { path: snapshot.ready_to_use, equals: true }, timeout: 5s, interval: 20ms }
        save: { snap: snapshot.snapshot_id }
      - assert: [{ value: "${snap}", equals: "snap-${name}" }]
  - id: secrets.auto
    title: secrets reach the plugin and never the report
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
      - call: CreateVolume
        request: { name: "${name}-echo", volume_capabilities: ["${capability}"], parameters: { echo_secret: "1" } }
  - id: teardown.after-failure
    title: what a failing scenario created is torn down
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
        save: { vol_id: volume.volume_id }
      - call: NodePublishVolume
        request: { volume_id: "${vol_id}", target_path: "${paths.target}", volume_capability: "${capability}" }
      - assert: [{ value: "${vol_id}", equals: nope }]
  - id: teardown.undeletable
    title: a teardown failure is a finding
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"], parameters: { undeletable: "1" } }
  - id: teardown.explicit
    title: an explicit delete marks the volume done
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
        save: { vol_id: volume.volume_id }
      - call: DeleteVolume
        request: { volume_id: "${vol_id}" }
  - id: skip-on
    title: skip_on turns a code into a skip
    steps:
      - call: GetCapacity
        skip_on: { codes: [UNIMPLEMENTED], reason: no capacity reporting }
  - id: warn.otherwise
    title: otherwise warn tolerates and goes on
    steps:
      - call: GetCapacity
        expect: { otherwise: warn }
      - call: Probe
        expect: { fields: [{ path: ready, equals: true }] }
  - id: vars.wrong-type
    title: a variable of the wrong type for a field is an error finding
    steps:
      - call: CreateVolume
        request: { name: "${name}", capacity_range: "${capability}", volume_capabilities: ["${capability}"] }
  - id: vars.unset
    title: a variable saved by a step that did not run
    steps:
      - when: controller:GET_SNAPSHOT
        call: Probe
        save: { ready: ready }
      - assert: [{ value: "${ready}", equals: true }]
  - id: serial.one
    title: runs alone
    serial: true
    steps:
      - call: CreateVolume
        request: { name: "${name}-serial", volume_capabilities: ["${capability}"], parameters: { sleep_ms: "60" } }
  - id: parallel.a
    title: runs alongside
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"], parameters: { sleep_ms: "60" } }
  - id: parallel.b
    title: runs alongside too
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"], parameters: { sleep_ms: "60" } }
"#;

const SECRET_CREATE: &str = "s3cret-create-value";
const SECRET_DELETE: &str = "s3cret-delete-value";

fn suites() -> Vec<Suite> {
    vec![suite::load_str("run.yaml", SUITE).unwrap_or_else(|e| panic!("{e}"))]
}

async fn plugin(fake: &FakePlugin) -> Plugin {
    let options = ClientOptions { rpc_timeout: Duration::from_secs(2), ..ClientOptions::default() };
    fake.engine_plugin(options).await
}

fn config(work_dir: &std::path::Path, jobs: usize) -> RunConfig {
    RunConfig {
        jobs,
        idempotency_count: 3,
        work_dir: work_dir.to_path_buf(),
        seed: 42,
        reconnect: suite::Reconnect { attempts: 2, first_wait: Duration::from_millis(20) },
        secrets: BTreeMap::from([
            ("CreateVolumeSecret".to_owned(), BTreeMap::from([("password".to_owned(), SECRET_CREATE.to_owned())])),
            ("DeleteVolumeSecret".to_owned(), BTreeMap::from([("password".to_owned(), SECRET_DELETE.to_owned())])),
        ]),
        ..RunConfig::default()
    }
}

fn result<'a>(report: &'a RunReport, id: &str) -> &'a ScenarioResult {
    let full = format!("run.{id}");
    report.scenario(&full).unwrap_or_else(|| panic!("no result for {full}"))
}

/// The parts of a report that must not depend on timing.
/// A report's results less what differs from run to run by design: durations, and the run
/// id in names (fresh in every run, whatever the seed).
fn stable(report: &RunReport) -> serde_json::Value {
    let mut suites = report.suites.clone();
    for s in suites.iter_mut().flat_map(|s| s.scenarios.iter_mut()) {
        s.duration = Duration::ZERO;
    }
    let text = serde_json::to_string(&suites).unwrap();
    let names = regex::Regex::new("csi-conform-[0-9a-f]{8}-").unwrap();
    serde_json::from_str(&names.replace_all(&text, "csi-conform-RUNID-")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_gates_checks_tears_down_and_keeps_secrets_out() {
    let fake = FakePlugin::start(FakeOptions::default()).await;
    fake.state.lock().unwrap().volumes.insert(
        "vol-preexisting".into(),
        FakeVolume { name: "preexisting".into(), capacity: 1, parameters: BTreeMap::new(), calls: 0, block: false },
    );
    let plugin = plugin(&fake).await;
    let work = tempfile::tempdir().unwrap();
    let report = suite::run(&plugin, &suites(), &config(work.path(), 8)).await;
    if std::env::var_os("SHOW_REPORT").is_some() {
        println!("{}", serde_json::to_string_pretty(&report).unwrap());
    }

    let skip = |id: &str| {
        let r = result(&report, id);
        assert_eq!(r.outcome, Severity::Skip, "{id}: {r:?}");
        r.skip_reason.clone().unwrap()
    };
    assert_eq!(skip("gate.capability"), "requires controller:GET_SNAPSHOT, which the plugin does not advertise");
    assert_eq!(skip("gate.nodes"), "requires 2 node endpoints, and the run has 1 (give more with --node-endpoint)");
    assert_eq!(
        skip("gate.option"),
        "requires the opt-in --test-node-volume-attach-limit, which this run did not enable"
    );
    assert_eq!(
        skip("gate.any"),
        "requires one of controller:GET_SNAPSHOT, controller:CLONE_VOLUME, none of which the plugin advertises"
    );
    assert_eq!(
        skip("skip-on"),
        "no capacity reporting (GetCapacity answered UNIMPLEMENTED: get_capacity is not implemented by the fake)"
    );

    for id in [
        "codes.no-name",
        "lifecycle.ok",
        "idempotency.ok",
        "poll.snapshot",
        "teardown.explicit",
        "serial.one",
        "parallel.a",
        "parallel.b",
    ] {
        let r = result(&report, id);
        assert_eq!(r.outcome, Severity::Pass, "{id}: {:#?}", r.findings);
    }

    let wrong = result(&report, "codes.wrong");
    assert_eq!(wrong.outcome, Severity::Fail);
    let f = &wrong.findings[0];
    assert_eq!((f.kind.as_str(), f.step), ("unexpected-code", Some(0)));
    assert_eq!(f.message, "CreateVolume answered INVALID_ARGUMENT, expected OK");
    assert_eq!(f.rpc.as_deref(), Some("CreateVolume"));
    assert_eq!((f.expected.as_deref(), f.got.as_deref()), (Some("OK"), Some("INVALID_ARGUMENT")));
    assert_eq!(f.plugin_message.as_deref(), Some("name is required"));
    let request = f.request.as_deref().unwrap();
    assert!(request.starts_with('{') && !request.contains('\n') && request.contains("SINGLE_NODE_WRITER"), "{request}");
    assert!(request.contains("\"password\":\"<redacted>\""), "{request}");

    let flaky = result(&report, "idempotency.flaky");
    assert_eq!(flaky.outcome, Severity::Fail);
    assert_eq!(flaky.findings[0].kind, "not-idempotent");
    assert!(
        flaky.findings[0].message.contains("call 2 of 3 answered differently from the first at volume.volume_context"),
        "{}",
        flaky.findings[0].message
    );

    let warn = result(&report, "warn.otherwise");
    assert_eq!(warn.outcome, Severity::Warn, "{:#?}", warn.findings);
    assert_eq!(warn.findings.len(), 1);

    let wrong_type = result(&report, "vars.wrong-type");
    assert_eq!(wrong_type.outcome, Severity::Error);
    assert_eq!(wrong_type.findings[0].kind, "request");
    assert_eq!(
        wrong_type.findings[0].message,
        "cannot build the CreateVolume request: run.yaml:131:53: field capacity_range expects a mapping \
         (csi.v1.CapacityRange), got a csi.v1.VolumeCapability"
    );
    let unset = result(&report, "vars.unset");
    assert_eq!(unset.outcome, Severity::Error);
    assert!(unset.findings[0].message.contains("variable \"ready\" is not set (the step that saves it did not run)"));

    let failed = result(&report, "teardown.after-failure");
    assert_eq!(failed.outcome, Severity::Fail);
    assert_eq!(failed.findings.len(), 1, "{:#?}", failed.findings);
    assert_eq!(failed.findings[0].kind, "assertion");
    assert_eq!(failed.findings[0].step, Some(2));

    let undeletable = result(&report, "teardown.undeletable");
    assert_eq!(undeletable.outcome, Severity::Fail);
    let t = &undeletable.findings[0];
    assert_eq!(t.kind, "teardown");
    assert!(t.message.starts_with("teardown could not remove volume vol-csi-conform-"), "{}", t.message);
    assert!(
        t.message.ends_with(
            "DeleteVolume answered FAILED_PRECONDITION: this volume cannot be deleted; it is left on the plugin"
        ),
        "{}",
        t.message
    );

    // Secrets reached the plugin, by csi-sanity key, for create and teardown delete...
    let received = fake.state.lock().unwrap().secrets.clone();
    let got =
        |rpc: &str| received.iter().filter(|(r, _)| r == rpc).map(|(_, m)| m["password"].clone()).collect::<Vec<_>>();
    assert!(got("CreateVolume").iter().all(|v| v == SECRET_CREATE) && !got("CreateVolume").is_empty());
    assert!(got("DeleteVolume").iter().all(|v| v == SECRET_DELETE) && !got("DeleteVolume").is_empty());
    // ...and never the report, not even through the plugin's own error text.
    let json = serde_json::to_string(&report).unwrap();
    assert!(!json.contains(SECRET_CREATE) && !json.contains(SECRET_DELETE), "{json}");
    let echoed = result(&report, "secrets.auto");
    assert_eq!(echoed.outcome, Severity::Fail);
    assert_eq!(echoed.findings[0].plugin_message.as_deref(), Some("refusing secrets [\"<redacted>\"]"));

    // Everything created was torn down, except what teardown could not remove; what
    // existed before the run is untouched.
    let left = fake.volume_ids();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.contains(&"vol-preexisting".to_owned()));
    {
        let state = fake.state.lock().unwrap();
        assert!(state.volumes.values().any(|v| v.parameters.contains_key("undeletable")));
        assert!(state.published.is_empty() && state.staged.is_empty() && state.node_published.is_empty(), "{state:?}");
        assert!(state.snapshots.is_empty(), "{:?}", state.snapshots);
        assert_eq!(state.serial_max_in_flight, 1, "a serial scenario overlapped others");
    }
    assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0, "scenario directories are removed");

    assert_eq!(report.seed, 42);
    assert_eq!(report.plugin_name, "fake.csi-conform.test");
    assert!(report.capabilities.contains(&"controller:CREATE_DELETE_VOLUME".to_owned()));
    let create = &report.rpc_latency["CreateVolume"];
    assert!(create.calls >= 10 && create.errors >= 2 && create.min <= create.median && create.median <= create.max);
    let ids: Vec<&str> = report.suites[0].scenarios.iter().map(|s| s.id.as_str()).collect();
    let declared: Vec<String> = suites()[0].scenarios().iter().map(|s| s.id().to_owned()).collect();
    assert_eq!(ids, declared, "results come in suite order");
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn results_are_identical_with_one_job_or_eight() {
    let fake = FakePlugin::start(FakeOptions::default()).await;
    let plugin = plugin(&fake).await;
    let work = tempfile::tempdir().unwrap();
    let parallel = suite::run(&plugin, &suites(), &config(work.path(), 8)).await;
    let serial = suite::run(&plugin, &suites(), &config(work.path(), 1)).await;
    assert_eq!(stable(&parallel), stable(&serial));
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn focus_and_skip_filters_leave_scenarios_out() {
    let fake = FakePlugin::start(FakeOptions::default()).await;
    let plugin = plugin(&fake).await;
    let work = tempfile::tempdir().unwrap();
    let mut cfg = config(work.path(), 2);
    cfg.focus = vec![Regex::new(r"^run\.gate\.").unwrap(), Regex::new("^lifecycle$").unwrap()];
    cfg.skip = vec![Regex::new("two nodes").unwrap()];
    let report = suite::run(&plugin, &suites(), &cfg).await;
    let ids: Vec<&str> = report.suites.iter().flat_map(|s| &s.scenarios).map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["run.gate.capability", "run.gate.option", "run.gate.any", "run.lifecycle.ok"]);
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_plugin_is_an_error_not_a_hang() {
    let suite_text = r#"
suite: crash
title: The plugin goes away
scenarios:
  - id: a.crash
    title: the plugin crashes during this one
    steps:
      - call: CreateVolume
        request: { name: "${name}-crash", volume_capabilities: ["${capability}"] }
        expect: { any_error: true }
      - call: Probe
  - id: b.after
    title: and is gone for this one
    steps:
      - call: Probe
"#;
    let suites = vec![suite::load_str("crash.yaml", suite_text).unwrap()];
    let fake = FakePlugin::start(FakeOptions::default()).await;
    let plugin = plugin(&fake).await;
    let work = tempfile::tempdir().unwrap();
    let report = tokio::time::timeout(Duration::from_secs(8), suite::run(&plugin, &suites, &config(work.path(), 1)))
        .await
        .expect("the run ends although the plugin is gone");
    for s in &report.suites[0].scenarios {
        assert_eq!(s.outcome, Severity::Error, "{}: {:#?}", s.id, s.findings);
        let f = s.findings.last().unwrap();
        assert_eq!(f.kind, "unreachable", "{f:?}");
        assert!(f.message.starts_with("plugin unreachable"), "{}", f.message);
    }
    fake.stop().await;
}

/// Records every resource event, to check that the observer hook hears all of them.
#[derive(Default)]
struct Journal(std::sync::Mutex<Vec<String>>);

impl suite::ResourceObserver for Journal {
    fn registered(&self, r: &suite::Tracked) {
        self.0.lock().unwrap().push(format!("+{}", r.resource));
    }
    fn released(&self, r: &suite::Tracked) {
        self.0.lock().unwrap().push(format!("-{}", r.resource));
    }
    fn left_behind(&self, r: &suite::Tracked, _why: &str) {
        self.0.lock().unwrap().push(format!("!{}", r.resource));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_checks_page_count_and_publish_to_the_limit() {
    let suite_text = r#"
suite: checks
title: Named checks
scenarios:
  - id: list-all
    title: list-all-volumes pages to the end
    steps:
      - call: CreateVolume
        request: { name: "${name}-1", volume_capabilities: ["${capability}"] }
        save: { one: volume.volume_id }
      - call: CreateVolume
        request: { name: "${name}-2", volume_capabilities: ["${capability}"] }
      - check: list-all-volumes
        args: { max_entries: 1 }
        save: { ids: ids, count: count, first: "entries[0].volume.volume_id" }
      - assert:
          - { value: "${count}", ge: 2 }
          - { value: "${ids}", contains: "${one}" }
          - { value: "${first}", non_empty: true }
  - id: pagination
    title: volume-pagination on our own volumes
    steps:
      - check: volume-pagination
        args: { volumes: 4 }
  - id: attach-limit
    title: publishing past max_volumes_per_node fails
    requires_option: attach_limit
    steps:
      - check: attach-limit
        args: { capability: "${capability}" }
  - id: path-state.fails
    title: path-state reports what a path is
    steps:
      - check: path-state
        args: { path: "${paths.dir}", is: absent }
"#;
    let suites = vec![suite::load_str("checks.yaml", suite_text).unwrap_or_else(|e| panic!("{e}"))];
    let fake = FakePlugin::start(FakeOptions::default()).await;
    let plugin = plugin(&fake).await;
    let work = tempfile::tempdir().unwrap();
    let journal = std::sync::Arc::new(Journal::default());
    let mut cfg = config(work.path(), 4);
    cfg.options.insert("attach_limit".into());
    cfg.observer = Some(journal.clone());
    let report = suite::run(&plugin, &suites, &cfg).await;
    let outcome = |id: &str| {
        let r = report.suites[0].scenarios.iter().find(|s| s.id == format!("checks.{id}")).unwrap();
        (r.outcome, r.findings.iter().map(|f| f.message.clone()).collect::<Vec<_>>())
    };
    for id in ["list-all", "pagination", "attach-limit"] {
        assert_eq!(outcome(id).0, Severity::Pass, "{id}: {:?}", outcome(id).1);
    }
    let (state, messages) = outcome("path-state.fails");
    assert_eq!(state, Severity::Fail);
    assert!(messages[0].ends_with("is a directory, expected absent"), "{messages:?}");

    assert!(fake.volume_ids().is_empty(), "{:?}", fake.volume_ids());
    assert!(fake.state.lock().unwrap().published.is_empty());
    let events = journal.0.lock().unwrap().clone();
    let registered = events.iter().filter(|e| e.starts_with('+')).count();
    let released = events.iter().filter(|e| e.starts_with('-')).count();
    assert!(registered >= 2 + 5 + 3 + 2, "{events:?}");
    assert_eq!(registered, released, "{events:?}");
    fake.stop().await;
}

/// The first scenario's CreateVolume is held by the fake until the run stops, so the timeout
/// always falls while it is in flight, whatever the machine's speed: it finishes, and the
/// others never start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_timeout_interrupts_and_leaves_the_rest_unrun() {
    let text = r#"
suite: held
title: t
scenarios:
  - id: a
    title: held until the run stops
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"], parameters: { hold: held } }
  - id: b
    title: would run next
    steps: [{ call: Probe }]
  - id: c
    title: and then this
    steps: [{ call: Probe }]
"#;
    let fake = FakePlugin::start(FakeOptions::default()).await;
    let plugin = plugin(&fake).await;
    let work = tempfile::tempdir().unwrap();
    let mut cfg = config(work.path(), 1);
    cfg.timeout = Some(Duration::from_secs(1));
    let progress = EventLog::releasing(vec![(crate::support::Release::OnStop, fake.gates.gate("held"))]);
    cfg.progress = Some(progress.clone());
    let suites = vec![suite::load_str("held.yaml", text).unwrap()];
    let report = tokio::time::timeout(Duration::from_secs(60), suite::run(&plugin, &suites, &cfg)).await.expect("the run ends");
    let reason = "the run timeout of 1s (--run-timeout) was reached";
    assert_eq!(report.interrupted.as_deref(), Some(reason));
    assert_eq!(progress.events(), ["started held.a".to_owned(), format!("interrupted: {reason}"), "finished held.a".to_owned()]);
    let outcomes: Vec<(Severity, Option<String>)> =
        report.suites[0].scenarios.iter().map(|s| (s.outcome, s.skip_reason.clone())).collect();
    assert_eq!(outcomes[0], (Severity::Pass, None), "the scenario in flight finishes");
    for unrun in &outcomes[1..] {
        assert_eq!(*unrun, (Severity::Skip, Some(format!("not run: {reason}"))));
    }
    assert!(report.failed());
    assert!(fake.volume_ids().is_empty());
    fake.stop().await;
}

/// `only_if` applies an assert step only where its preconditions hold: a failing assertion
/// under a precondition that does not hold is passed over, one under a precondition that
/// holds fails, and an unknown variable in the precondition is a suite error, not a pass.
#[tokio::test]
async fn an_assert_step_applies_only_where_its_only_if_holds() {
    let plugin = crate::support::TestPlugin::start(csi_conform::reference::Config::default()).await;
    let engine = crate::support::engine_plugin(&plugin).await;
    let text = "suite: o\ntitle: t\nscenarios:\n\
        \x20 - id: passed-over\n    title: t\n    steps:\n      - call: GetPluginInfo\n        save: { plugin: name }\n\
        \x20     - assert: [{ value: \"${plugin}\", equals: other }]\n        only_if: [{ value: \"${plugin}\", equals: \"not-the-plugin\" }]\n\
        \x20 - id: applies\n    title: t\n    steps:\n      - call: GetPluginInfo\n        save: { plugin: name }\n\
        \x20     - assert: [{ value: \"${plugin}\", equals: other }]\n        only_if: [{ value: \"${plugin}\", non_empty: true }]\n";
    let suite = suite::load_str("o.yaml", text).unwrap_or_else(|e| panic!("{e}"));
    let work = tempfile::tempdir().unwrap();
    let report = suite::run(&engine, &[suite], &config(work.path(), 2)).await;
    let outcome = |id: &str| report.suites[0].scenarios.iter().find(|s| s.id == id).map(|s| s.outcome);
    assert_eq!(outcome("o.passed-over"), Some(Severity::Pass));
    assert_eq!(outcome("o.applies"), Some(Severity::Fail));
    let bad = "suite: o\ntitle: t\nscenarios:\n  - id: s\n    title: t\n    steps:\n      - assert: [{ value: 1, equals: 1 }]\n        only_if: [{ value: \"${nope}\", equals: 1 }]\n";
    let e = suite::load_str("o.yaml", bad).unwrap_err().to_string();
    assert!(e.starts_with("o.yaml:8:"), "{e}");
}

/// A step's own `spec:` is what its failures blame, not the scenario's list; a step naming an
/// id the inventory lacks is a load error at its line.
#[tokio::test]
async fn a_step_names_the_requirement_its_failure_breaks() {
    let plugin = crate::support::TestPlugin::start(csi_conform::reference::Config::default()).await;
    let engine = crate::support::engine_plugin(&plugin).await;
    let text = "suite: o\ntitle: t\nscenarios:\n\
        \x20 - id: s\n    title: t\n    spec: [GetPluginInfo.name.required, GetPluginInfo.name.format]\n    steps:\n\
        \x20     - call: GetPluginInfo\n        spec: [GetPluginInfo.name.format]\n        expect: { fields: [{ path: name, equals: other }] }\n";
    let suite = suite::load_str("o.yaml", text).unwrap_or_else(|e| panic!("{e}"));
    let work = tempfile::tempdir().unwrap();
    let report = suite::run(&engine, &[suite], &config(work.path(), 1)).await;
    let s = &report.suites[0].scenarios[0];
    assert_eq!(s.outcome, Severity::Fail);
    assert_eq!(s.findings[0].requirements, ["GetPluginInfo.name.format"]);
    assert_eq!(s.blamed().iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["GetPluginInfo.name.format"]);
    let bad = text.replace("spec: [GetPluginInfo.name.format]", "spec: [GetPluginInfo.nope]");
    let e = suite::load_str("o.yaml", &bad).unwrap_err().to_string();
    assert!(e.starts_with("o.yaml:9:") && e.contains("GetPluginInfo.nope"), "{e}");
}

/// A poll that never meets its condition ends at its own bound, and the finding names it: what
/// was waited for, how long, and the setting that sets it (the step's `poll.timeout`). The
/// spec sets such waits no deadline, so the bound makes the step inconclusive, never failed.
/// The assertion is on the message, not on elapsed time.
#[tokio::test]
async fn a_poll_that_never_ends_stops_at_its_bound_and_names_it() {
    let plugin = crate::support::TestPlugin::start(csi_conform::reference::Config::default()).await;
    let engine = crate::support::engine_plugin(&plugin).await;
    let text = "suite: o\ntitle: t\nscenarios:\n\
        \x20 - id: never\n    title: t\n    steps:\n      - call: Probe\n\
        \x20       poll: { until: { path: ready, equals: false }, timeout: 60ms, interval: 10ms }\n";
    let suite = suite::load_str("o.yaml", text).unwrap_or_else(|e| panic!("{e}"));
    let work = tempfile::tempdir().unwrap();
    let report = suite::run(&engine, &[suite], &config(work.path(), 1)).await;
    let s = &report.suites[0].scenarios[0];
    assert_eq!(s.outcome, Severity::Inconclusive, "{:#?}", s.findings);
    let f = s.findings.iter().find(|f| f.kind == "bound-ran-out").expect("a bound-ran-out finding");
    assert!(
        f.message.starts_with("Probe did not meet the poll condition within 60ms (the step's poll.timeout; --ready-timeout overrides it): "),
        "{}",
        f.message
    );
}

/// An UNKNOWN entry in a capability list (the csi-test mock's) is lawful: no rule forbids it
/// and it advertises nothing. The capability scenarios pass, each with a note saying so.
#[tokio::test]
async fn an_unknown_capability_entry_is_a_note_never_a_verdict() {
    let mut options = FakeOptions::default();
    options.controller.push(csi_conform::fingerprint::ControllerCapability::Unknown);
    options.node.push(csi_conform::fingerprint::NodeCapability::Unknown);
    let fake = FakePlugin::start(options).await;
    let plugin = plugin(&fake).await;
    let work = tempfile::tempdir().unwrap();
    let config = RunConfig {
        focus: vec![Regex::new(r"^(controller|node)\.get-capabilities$").unwrap()],
        ..config(work.path(), 1)
    };
    let report = suite::run(&plugin, &suite::builtin(), &config).await;
    for id in ["controller.get-capabilities", "node.get-capabilities"] {
        let s = report.scenario(id).unwrap_or_else(|| panic!("no {id}"));
        assert_eq!(s.outcome, Severity::Pass, "{id}: {:#?}", s.findings);
        let note = s.findings.iter().find(|f| f.kind == csi_conform::report::NOTE_KIND);
        assert!(note.is_some_and(|f| f.severity == Severity::Pass && f.message.contains("UNKNOWN")), "{id}: {:#?}", s.findings);
    }
    let summary = csi_conform::report::summary(&report, false);
    assert!(summary.contains("\nNotes (what the spec permits; no verdict):\n  NOTE  controller.get-capabilities: "), "{summary}");
}

/// A plugin that checks secrets first (the csi-test mock: INVALID_ARGUMENT "secret must be
/// provided") and a run without `--secrets`: the request has two faults, the spec orders no
/// error checks, so ValidateVolumeCapabilities' NOT_FOUND scenario cannot be checked. It skips,
/// saying why; it does not fail. A plugin whose INVALID_ARGUMENT names no other fault still fails.
#[tokio::test]
async fn invalid_argument_for_a_second_fault_the_message_names_skips_not_fails() {
    use crate::support::misbehaving::{Misbehaviour, rules};
    let focus = Regex::new(r"^controller\.validate\.not-found$").unwrap();
    for (message, want) in [("secret must be provided", Severity::Skip), ("volume id is malformed", Severity::Fail)] {
        let options = FakeOptions {
            misbehave: rules([("ValidateVolumeCapabilities", Misbehaviour::Refuse(tonic::Code::InvalidArgument, message))]),
            ..FakeOptions::default()
        };
        let fake = FakePlugin::start(options).await;
        let plugin = plugin(&fake).await;
        let work = tempfile::tempdir().unwrap();
        let config = RunConfig {
            focus: vec![focus.clone()],
            secrets: BTreeMap::new(),
            ..config(work.path(), 1)
        };
        let report = suite::run(&plugin, &suite::builtin(), &config).await;
        let s = report.scenario("controller.validate.not-found").expect("the scenario ran");
        assert_eq!(s.outcome, want, "{message}: {s:#?}");
        if want == Severity::Skip {
            let why = s.skip_reason.as_deref().unwrap_or_default();
            assert!(why.contains("left secrets empty") && why.contains("orders no error checks"), "{why}");
        }
    }
}
