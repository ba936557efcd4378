//! Resource budgets against a constrained reference plugin (two nodes, an attach limit of 2,
//! capacity for a handful of test volumes), over real sockets: the built-in suites give the
//! same outcome for every scenario at the default jobs and at `--jobs 1`, no finding
//! mentions RESOURCE_EXHAUSTED, scenarios that cannot fit are skipped with the reason, and
//! contention the budgets cannot foresee (a plugin that keeps its capacity to itself) is
//! retried rather than judged; the orchestrators' two-volume scenario fits an attach limit of 1
//! or is skipped.

use std::{collections::BTreeMap, time::Duration};

use csi_conform::{
    proto::v1,
    reference::Config,
    report::{RunReport, Severity},
    suite::{self, RunConfig},
};
use tempfile::TempDir;

use crate::{
    lifecycle::{Cluster, can_mount},
    run::outcomes,
};

const MIB: i64 = 1 << 20;

fn constrained(capacity: i64) -> Config {
    Config { max_volumes_per_node: 2, capacity, ..Config::default() }
}

fn config(work: &TempDir, jobs: usize) -> RunConfig {
    RunConfig {
        jobs,
        seed: 11,
        idempotency_count: 3,
        property_cases: 24,
        volume_size: MIB,
        expand_size: Some(2 * MIB),
        options: ["attach_limit".to_owned()].into(),
        work_dir: work.path().join("work"),
        ..RunConfig::default()
    }
}

/// Every finding or skip reason that mentions RESOURCE_EXHAUSTED, as `id: text`.
fn exhausted(report: &RunReport) -> Vec<String> {
    report
        .suites
        .iter()
        .flat_map(|s| &s.scenarios)
        .flat_map(|s| s.findings.iter().map(move |f| format!("{}: {}", s.id, f.message)))
        .filter(|t| t.contains("RESOURCE_EXHAUSTED"))
        .collect()
}

fn verdicts(report: &RunReport) -> BTreeMap<String, Severity> {
    outcomes(report).into_iter().map(|(id, (o, _))| (id, o)).collect()
}

#[tokio::test]
async fn the_builtin_suites_give_the_same_verdicts_at_any_jobs_within_attach_and_capacity_limits() {
    if !can_mount("the_builtin_suites_give_the_same_verdicts_at_any_jobs_within_attach_and_capacity_limits") {
        return;
    }
    // Room for six 1 MiB test volumes: the volume-pagination scenario (5 and the one it
    // adds) just fits alone.
    let cluster = Cluster::start(constrained(6 * MIB), 2).await;
    let engine = cluster.engine().await;
    let mut reports = Vec::new();
    for jobs in [RunConfig::default().jobs, 1] {
        let work = tempfile::tempdir().unwrap();
        let report = suite::run(&engine, &suite::builtin(), &config(&work, jobs)).await;
        cluster.assert_clean().await;
        assert_eq!(exhausted(&report), Vec::<String>::new(), "jobs {jobs}");
        assert!(!report.failed(), "jobs {jobs}: {:#?}", crate::run::not_passed(&report));
        reports.push(report);
    }
    let (parallel, serial) = (verdicts(&reports[0]), verdicts(&reports[1]));
    let differ: Vec<_> = parallel.iter().filter(|(id, o)| serial.get(*id) != Some(o)).collect();
    assert!(differ.is_empty(), "outcomes that depend on --jobs: {differ:?}");
    let all = outcomes(&reports[0]);
    // A scenario that needs more than the plugin has is skipped, saying so.
    let (outcome, why) = &all["controller.create-volume.one-gib"];
    assert_eq!(*outcome, Severity::Skip);
    assert_eq!(why, "needs up to 1 GiB at once for its volumes, more than the 6 MiB the plugin reports available (GetCapacity)");
    // The attach-limit check fills node 0 on its own and passes; the lifecycles on two
    // nodes, the property cases and the pagination ran.
    for id in [
        "controller.publish.attach-limit",
        "controller.list-volumes.pagination",
        "lifecycle.two-nodes.multi-node-multi-writer",
        "properties.create-then-validate",
        "extras.expand.online",
    ] {
        assert_eq!(all[id].0, Severity::Pass, "{id}: {}", all[id].1);
    }
    assert!(reports[0].counts().pass >= 150, "{:?}", reports[0].counts());
}

/// Two volumes published on node 0 at once.
const TWO_AT_ONCE: &str = r#"
suite: budgets
title: publications at once
scenarios:
  - id: two-on-node-0
    title: two volumes published on node 0 at once
    steps:
      - call: CreateVolume
        request: { name: "${name}-a", volume_capabilities: ["${capability}"], capacity_range: { required_bytes: "${volume_size}" } }
        save: { a: volume }
      - call: CreateVolume
        request: { name: "${name}-b", volume_capabilities: ["${capability}"], capacity_range: { required_bytes: "${volume_size}" } }
        save: { b: volume }
      - call: ControllerPublishVolume
        request: { volume_id: "${a.volume_id}", node_id: "${node.id}", volume_capability: "${capability}", readonly: false }
      - call: ControllerPublishVolume
        request: { volume_id: "${b.volume_id}", node_id: "${node.id}", volume_capability: "${capability}", readonly: false }
"#;

#[tokio::test]
async fn a_scenario_over_the_attach_limit_or_the_live_volume_limit_is_skipped_with_the_reason() {
    let mut suites = suite::builtin();
    suites.push(suite::load_str("budgets.yaml", TWO_AT_ONCE).unwrap_or_else(|e| panic!("{e}")));
    let focus = regex::Regex::new(r"^budgets\.|^controller\.publish\.|^controller\.list-volumes\.pagination$").unwrap();
    for max in [1, 2] {
        let cluster = Cluster::start(Config { max_volumes_per_node: max, ..Config::default() }, 2).await;
        let engine = cluster.engine().await;
        let work = tempfile::tempdir().unwrap();
        let mut config = config(&work, 8);
        config.focus = vec![focus.clone()];
        config.budgets.max_live_volumes = Some(4);
        let report = suite::run(&engine, &suites, &config).await;
        cluster.assert_clean().await;
        let all = outcomes(&report);
        let (outcome, why) = &all["controller.list-volumes.pagination"];
        assert_eq!((*outcome, why.as_str()), (Severity::Skip, "needs up to 6 live volumes at once, more than --max-live-volumes 4"));
        let (outcome, why) = &all["budgets.two-on-node-0"];
        if max == 1 {
            let reason = "holds up to 2 volumes published on node node-0 at once, more than its max_volumes_per_node of 1";
            assert_eq!((*outcome, why.as_str()), (Severity::Skip, reason));
        } else {
            assert_eq!(*outcome, Severity::Pass, "{why}");
        }
        // The attach-limit check publishes max + 1 volumes to node 0 on its own, and passes.
        assert_eq!(all["controller.publish.attach-limit"].0, Severity::Pass, "{all:#?}");
        assert!(!report.failed(), "{all:#?}");
        assert_eq!(exhausted(&report), Vec::<String>::new());
    }
}

/// A plugin that does not advertise GET_CAPACITY gives the budgets nothing to go by: the
/// parallel lifecycles and property cases run out of its capacity, and the RESOURCE_EXHAUSTED
/// answers are retried after the other scenarios release their volumes, so every verdict is
/// still the plugin's.
#[tokio::test]
async fn contention_the_budgets_cannot_foresee_is_retried_not_judged() {
    if !can_mount("contention_the_budgets_cannot_foresee_is_retried_not_judged") {
        return;
    }
    let mut plugin = constrained(3 * MIB);
    plugin.max_volumes_per_node = 0;
    plugin.disabled.controller.insert(v1::controller_service_capability::rpc::Type::GetCapacity as i32);
    let cluster = Cluster::start(plugin, 2).await;
    let engine = cluster.engine().await;
    let work = tempfile::tempdir().unwrap();
    let mut config = config(&work, 8);
    config.focus = vec![regex::Regex::new(r"^lifecycle\.(mount|block)\.|^properties\.create-then-validate$").unwrap()];
    config.budgets.contention_timeout = Duration::from_secs(60);
    let report = suite::run(&engine, &suite::builtin(), &config).await;
    cluster.assert_clean().await;
    assert!(!report.failed(), "{:#?}", crate::run::not_passed(&report));
    assert_eq!(exhausted(&report), Vec::<String>::new());
    // The plugin did answer RESOURCE_EXHAUSTED: the run really was contended.
    let create = &report.rpc_latency["CreateVolume"];
    assert!(create.errors > 0, "no CreateVolume was refused: {create:?}");
    assert!(report.counts().pass >= 8, "{:?}", report.counts());
}

/// A property step whose cases create volumes stops at --property-time, however many cases
/// were asked for, says how many ran, and leaves nothing behind.
#[tokio::test]
async fn property_steps_that_create_volumes_stop_at_the_property_time_and_say_how_many_ran() {
    let plugin = crate::support::TestPlugin::start(Config { latency: Duration::from_millis(2), ..Config::default() }).await;
    let engine = crate::support::engine_plugin(&plugin).await;
    let work = tempfile::tempdir().unwrap();
    let mut config = config(&work, 4);
    config.property_cases = 100_000;
    config.property_time = Duration::from_millis(400);
    config.focus = vec![regex::Regex::new(r"^properties\.create-then-validate$").unwrap()];
    // Far above the property time: only turns a step that never stops into a failure.
    let report = tokio::time::timeout(Duration::from_secs(120), suite::run(&engine, &suite::builtin(), &config))
        .await
        .expect("the property step stops");
    let result = report.scenario("properties.create-then-validate").expect("it ran");
    assert_eq!(result.outcome, Severity::Pass, "{:#?}", result.findings);
    let notes: Vec<&str> = result.findings.iter().filter(|f| f.kind == "property-cases").map(|f| f.message.as_str()).collect();
    assert_eq!(notes.len(), 1, "{:#?}", result.findings);
    let ran: u32 = notes[0]
        .split_once("property create-then-validate: ")
        .and_then(|(_, rest)| rest.split_once(" of 100000 cases ran, in "))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", notes[0]));
    assert!((1..100_000).contains(&ran), "{}", notes[0]);
    let volumes = crate::support::ok(plugin.controller().list_volumes(v1::ListVolumesRequest::default()).await);
    assert!(volumes.entries.is_empty(), "{:?}", volumes.entries);
}

/// A suite of one scenario that counts the plugin's volumes across a stretch of calls, and
/// seven that create volumes throughout that stretch; `exclusive` is the counter's
/// `exclusive:` line (or none).
fn counting_suite(exclusive: &str) -> suite::Suite {
    let mut text = format!(
        "suite: counts\ntitle: t\nscenarios:\n  - id: counter\n    title: counts volumes twice\n{exclusive}    steps:\n\
         \x20     - check: list-all-volumes\n        save: {{ before: count }}\n\
         \x20     - call: Probe\n        repeat: 8\n\
         \x20     - check: list-all-volumes\n        save: {{ after: count }}\n\
         \x20     - assert: [{{ value: \"${{after}}\", equals: \"${{before}}\" }}]\n"
    );
    for n in 0..7 {
        text.push_str(&format!("  - id: creates-{n}\n    title: creates volumes\n    steps:\n"));
        for v in 0..4 {
            text.push_str(&format!(
                "      - call: CreateVolume\n        request: {{ name: \"${{name}}-{v}\", volume_capabilities: [\"${{capability}}\"], \
                 capacity_range: {{ required_bytes: \"${{volume_size}}\" }} }}\n      - call: Probe\n"
            ));
        }
    }
    suite::load_str("counts.yaml", &text).unwrap_or_else(|e| panic!("{e}"))
}

/// A scenario that holds the volumes exclusively (`exclusive: [volumes]`, as the built-in
/// ListVolumes count checks do) is never in flight with the seven scenarios that create
/// volumes, at 8 jobs, and sees a stable count; without it the same suite runs them beside
/// it. Judged by the order of the run's events, not by a race the plugin's latency makes.
#[tokio::test]
async fn a_scenario_holding_the_volumes_exclusively_counts_them_undisturbed() {
    let plugin = crate::support::TestPlugin::start(Config::default()).await;
    let engine = crate::support::engine_plugin(&plugin).await;
    let run = |exclusive: &'static str| {
        let engine = engine.clone();
        async move {
            let work = tempfile::tempdir().unwrap();
            let log = crate::support::EventLog::new();
            let config = suite::RunConfig { progress: Some(log.clone()), ..config(&work, 8) };
            let report = suite::run(&engine, &[counting_suite(exclusive)], &config).await;
            let beside: Vec<String> =
                (0..7).map(|n| format!("counts.creates-{n}")).filter(|c| log.overlapped("counts.counter", c)).collect();
            (verdicts(&report), beside)
        }
    };
    let (held, beside) = run("    exclusive: [volumes]\n").await;
    assert_eq!(held.values().filter(|o| **o == Severity::Pass).count(), 8, "{held:?}");
    assert_eq!(beside, Vec::<String>::new(), "no creating scenario runs beside the holder");
    let (unheld, beside) = run("").await;
    assert!(!beside.is_empty(), "without the hold the creating scenarios run beside the counter: {unheld:?}");
}

/// A scenario holding the snapshots exclusively waits for one that is creating a snapshot
/// although it started later: `hv` holds the volumes, so `hs` (which also creates a volume)
/// waits while `s` (which only snapshots a volume made before the run) starts beside `hv`.
/// The fake holds `hv`'s call until `s` has started and `s`'s call until `hv` has finished, so
/// `s` is in flight when `hv` ends, whatever the machine's speed. Then `hs` must still wait
/// for `s`: it never runs beside it. Judged by the run's events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exclusive_holder_waits_for_a_scenario_already_changing_its_pool() {
    use crate::support::{
        EventLog, Release,
        fake_plugin::{FakeOptions, FakePlugin, FakeVolume},
    };
    let fake = FakePlugin::start(FakeOptions::default()).await;
    fake.state.lock().unwrap().volumes.insert(
        "vol-before".into(),
        FakeVolume { name: "before".into(), capacity: 1 << 30, parameters: Default::default(), calls: 0, block: false },
    );
    let text = r#"
suite: pools
title: t
scenarios:
  - id: hv
    title: holds the volumes
    exclusive: [volumes]
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"], parameters: { hold: hv } }
  - id: hs
    title: holds the snapshots, and creates a volume
    exclusive: [snapshots]
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"] }
  - id: s
    title: snapshots a volume that was there before
    steps:
      - call: CreateSnapshot
        request: { name: "${name}", source_volume_id: vol-before, parameters: { hold: s } }
"#;
    let suites = vec![suite::load_str("pools.yaml", text).unwrap_or_else(|e| panic!("{e}"))];
    let plugin = fake.engine_plugin(csi_conform::client::ClientOptions::default()).await;
    let work = tempfile::tempdir().unwrap();
    let log = EventLog::releasing(vec![
        (Release::OnStarted("pools.s".into()), fake.gates.gate("hv")),
        (Release::OnFinished("pools.hv".into()), fake.gates.gate("s")),
    ]);
    let config = suite::RunConfig { progress: Some(log.clone()), ..config(&work, 8) };
    let report = tokio::time::timeout(Duration::from_secs(60), suite::run(&plugin, &suites, &config)).await.expect("the run ends");
    let verdicts = verdicts(&report);
    assert!(verdicts.values().all(|v| *v == Severity::Pass), "{verdicts:?}");
    let events = log.events();
    assert!(log.overlapped("pools.hv", "pools.s"), "s changes only the snapshots, so it runs beside hv: {events:?}");
    assert!(!log.overlapped("pools.hv", "pools.hs"), "{events:?}");
    assert!(!log.overlapped("pools.hs", "pools.s"), "hs started while s was creating a snapshot: {events:?}");
    assert_eq!(fake.volume_ids(), ["vol-before"], "what the run made is gone");
}

/// The byte budget is GetCapacity's answer for the run's `--test-volume-parameters` (on many
/// plugins they choose the pool): a fake that reports what its `available` parameter says
/// (1 TiB without it) gives a scenario that needs 2 MiB a skip against the 1 MiB asked with
/// the parameters. Asked without them (a mutant that left them out), the scenario ran.
#[tokio::test]
async fn get_capacity_is_asked_with_the_runs_parameters() {
    use crate::support::fake_plugin::{FakeOptions, FakePlugin};
    let mut options = FakeOptions::default();
    options.controller.push(csi_conform::fingerprint::ControllerCapability::GetCapacity);
    let fake = FakePlugin::start(options).await;
    let text = r#"
suite: pool
title: t
scenarios:
  - id: one-volume
    title: creates one volume of the run's size
    steps:
      - call: CreateVolume
        request: { name: "${name}", volume_capabilities: ["${capability}"], capacity_range: { required_bytes: "${volume_size}" } }
"#;
    let suites = vec![suite::load_str("pool.yaml", text).unwrap_or_else(|e| panic!("{e}"))];
    let plugin = fake.engine_plugin(csi_conform::client::ClientOptions::default()).await;
    let work = tempfile::tempdir().unwrap();
    let parameters = [("available".to_owned(), MIB.to_string())].into();
    let config = RunConfig { parameters, volume_size: 2 * MIB, ..config(&work, 2) };
    let report = suite::run(&plugin, &suites, &config).await;
    let (outcome, why) = &outcomes(&report)["pool.one-volume"];
    let reason = "needs up to 2 MiB at once for its volumes, more than the 1 MiB the plugin reports available (GetCapacity)";
    assert_eq!((*outcome, why.as_str()), (Severity::Skip, reason));
    assert!(fake.volume_ids().is_empty(), "nothing was created");
}

/// `orchestrator.two-volumes-one-node` declares its two publications on node 0: at an attach
/// limit of 1 every instance is skipped with that reason (never a failure, never a publish past
/// the limit); at 2 every instance runs, and passes but
/// for the Swarm warning every lifecycle instance of the default plugin has.
#[tokio::test]
async fn the_orchestrators_two_volume_scenario_fits_the_attach_limit_or_is_skipped() {
    use csi_conform::orchestrator::Orchestrator;
    let focus = regex::Regex::new(r"^orchestrator\.two-volumes-one-node@").unwrap();
    for max in [1, 2] {
        if max == 2 && !can_mount("the_orchestrators_two_volume_scenario_fits_the_attach_limit_or_is_skipped") {
            return;
        }
        let cluster = Cluster::start(Config { max_volumes_per_node: max, ..Config::default() }, 2).await;
        let engine = cluster.engine().await;
        let work = tempfile::tempdir().unwrap();
        let mut config = config(&work, 8);
        config.focus = vec![focus.clone()];
        config.orchestrators = Orchestrator::ALL.map(Into::into).to_vec();
        let report = suite::run(&engine, &suite::builtin(), &config).await;
        cluster.assert_clean().await;
        let all = outcomes(&report);
        assert_eq!(all.len(), 3, "one instance per orchestrator: {all:#?}");
        for (id, (outcome, why)) in &all {
            if max == 1 {
                let reason = "holds up to 2 volumes published on node node-0 at once, more than its max_volumes_per_node of 1";
                assert_eq!((*outcome, why.as_str()), (Severity::Skip, reason), "{id}");
            } else if id.ends_with("@swarm") {
                // As for every lifecycle instance: Swarm never unstages, and the plugin's
                // DeleteVolume rightly refuses a staged volume (the default plugin's warning).
                assert_eq!(*outcome, Severity::Warn, "{id}: {why}");
                assert!(why.contains("Swarm never sends NodeUnstageVolume"), "{id}: {why}");
            } else {
                assert_eq!(*outcome, Severity::Pass, "{id}: {why}");
            }
        }
        assert!(!report.failed(), "{all:#?}");
    }
}
