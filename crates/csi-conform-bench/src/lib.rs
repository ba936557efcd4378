//! csi-conform-bench: how fast and how steady a plugin is (`csi-conform bench`). Volume
//! lifecycles at rising concurrency with per-RPC latency histograms, throughput and errors by
//! code per level, the plugin process's CPU, memory and fds from /proc; a soak that samples them
//! over time and judges leaks and drift; comparison against a baseline; console, JSON and HTML
//! (SVG) output. It sits above the engine (journal, resources) and the report (HTML escaping);
//! only the CLI depends on it.

pub mod compare;
pub mod lifecycle;
pub mod model;
pub mod output;
pub mod plot;
pub mod procfs;
pub mod soak;
pub mod stats;
pub mod trend;

use csi_client::{client, secrets};
use csi_conform_engine::{journal, suite};
use csi_conform_report::report;
use csi_proto::proto;

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use crate::{
    client::{Connection, RpcError},
    journal::Journal,
    proto::v1,
};

pub use lifecycle::{Plan, Steps};
pub use model::{BenchReport, Level, LevelProcess, Settings};
use stats::{Percentiles, Tally};

/// Why a bench could not run at all (its findings are in the report, not here).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An RPC the bench needs to start failed.
    #[error("{0}")]
    Rpc(#[from] RpcError),
    /// The plugin serves nothing a lifecycle can be made of.
    #[error("{0}")]
    Unsupported(String),
}

/// A level whose throughput grew by less than this factor over the previous level's, while
/// its median lifecycle took [`KNEE_LATENCY`] times as long, is past the knee: the ramp stops.
pub const KNEE_GAIN: f64 = 1.1;
/// See [`KNEE_GAIN`].
pub const KNEE_LATENCY: f64 = 1.5;

/// How a bench runs.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// The highest concurrency of the ramp (1, 2, 4, ... up to it).
    pub max_concurrency: usize,
    /// Lifecycles each worker runs per level.
    pub lifecycles_per_worker: u64,
    /// CreateVolume's size.
    pub volume_size: i64,
    /// ControllerExpandVolume's size.
    pub expand_size: i64,
    /// Block or mount volumes.
    pub block: bool,
    /// CreateVolume parameters.
    pub parameters: BTreeMap<String, String>,
    /// CreateSnapshot parameters.
    pub snapshot_parameters: BTreeMap<String, String>,
    /// The secrets file by key.
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
    /// `--max-live-volumes`: the ramp's concurrency is capped so that no more volumes exist at once.
    pub max_live_volumes: Option<u32>,
    /// `--max-live-bytes`, likewise.
    pub max_live_bytes: Option<i64>,
    /// The soak, instead of the ramp.
    pub soak: Option<soak::SoakConfig>,
    /// The bundled plugin's latency, for the report.
    pub bundled_latency: Option<Duration>,
    /// The bundled plugin's quirks, for the report.
    pub bundled_quirks: Vec<String>,
}

/// The concurrency levels of a ramp up to `max`: 1, 2, 4, ..., and `max` itself.
pub fn levels(max: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut c = 1;
    while c < max {
        out.push(c);
        c *= 2;
    }
    out.push(max.max(1));
    out
}

/// What the plugin serves, from its capabilities; the node's id.
pub async fn discover(controller: &Connection, node: &Connection) -> Result<(Steps, String), BenchError> {
    use v1::{controller_service_capability::rpc::Type as C, node_service_capability::rpc::Type as N};
    let mut c = controller.controller();
    let caps = controller
        .call("ControllerGetCapabilities", v1::ControllerGetCapabilitiesRequest {}, |r| async move { c.controller_get_capabilities(r).await })
        .await?;
    let has = |t: C| {
        caps.capabilities.iter().any(|cap| {
            matches!(&cap.r#type, Some(v1::controller_service_capability::Type::Rpc(rpc)) if rpc.r#type == t as i32)
        })
    };
    if !has(C::CreateDeleteVolume) {
        return Err(BenchError::Unsupported(
            "the plugin does not advertise CREATE_DELETE_VOLUME: there is no volume lifecycle to bench".into(),
        ));
    }
    let mut n = node.node();
    let node_caps =
        node.call("NodeGetCapabilities", v1::NodeGetCapabilitiesRequest {}, |r| async move { n.node_get_capabilities(r).await }).await?;
    let node_has = |t: N| {
        node_caps.capabilities.iter().any(|cap| {
            matches!(&cap.r#type, Some(v1::node_service_capability::Type::Rpc(rpc)) if rpc.r#type == t as i32)
        })
    };
    let mut n = node.node();
    let info = node.call("NodeGetInfo", v1::NodeGetInfoRequest {}, |r| async move { n.node_get_info(r).await }).await?;
    let steps = Steps {
        controller_publish: has(C::PublishUnpublishVolume),
        stage: node_has(N::StageUnstageVolume),
        snapshot: has(C::CreateDeleteSnapshot),
        clone: has(C::CloneVolume),
        expand: has(C::ExpandVolume),
        list_volumes: has(C::ListVolumes),
    };
    Ok((steps, info.node_id))
}

/// The capability every call of the bench names: SINGLE_NODE_WRITER, mount (the plugin's
/// default file system) or block.
pub fn capability(block: bool) -> v1::VolumeCapability {
    use v1::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume, access_mode::Mode};
    v1::VolumeCapability {
        access_type: Some(if block { AccessType::Block(BlockVolume {}) } else { AccessType::Mount(MountVolume::default()) }),
        access_mode: Some(AccessMode { mode: Mode::SingleNodeWriter as i32 }),
    }
}

/// What the budgets allow: the highest concurrency whose lifecycles stay within
/// `--max-live-volumes` and `--max-live-bytes`.
pub fn budget_cap(config: &BenchConfig, steps: &Steps) -> usize {
    let held = steps.volumes_held() as usize;
    let mut cap = config.max_concurrency;
    if let Some(max) = config.max_live_volumes {
        cap = cap.min((max as usize / held).max(1));
    }
    if let Some(bytes) = config.max_live_bytes {
        let per = config.volume_size.max(config.expand_size).max(1) as i128 * held as i128;
        cap = cap.min(usize::try_from(bytes as i128 / per).unwrap_or(usize::MAX).max(1));
    }
    cap
}

/// Runs `workers` workers of `per_worker` lifecycles each (a worker stops at its first
/// error), numbering lifecycles from `next`.
async fn run_level(plan: &Arc<Plan>, workers: usize, per_worker: u64, next: &Arc<AtomicU64>) -> (Tally, Duration) {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (plan, next) = (plan.clone(), next.clone());
        tasks.spawn(async move {
            let mut tally = Tally::default();
            for _ in 0..per_worker {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if lifecycle::lifecycle(&plan, n, &mut tally).await.is_err() {
                    break;
                }
            }
            tally
        });
    }
    let mut total = Tally::default();
    while let Some(done) = tasks.join_next().await {
        if let Ok(tally) = done {
            total.merge(&tally);
        }
    }
    (total, started.elapsed())
}

/// The ramp: each level in turn until the last, an error, or the knee. Returns the levels and
/// why it stopped.
pub async fn ramp(plan: Arc<Plan>, config: &BenchConfig, pid: Option<i32>, next: Arc<AtomicU64>) -> (Vec<Level>, String) {
    let cap = budget_cap(config, &plan.steps);
    let mut out: Vec<Level> = Vec::new();
    let mut why = format!("reached --max-concurrency {}", config.max_concurrency);
    if cap < config.max_concurrency {
        why = format!("reached {cap}, the most --max-live-volumes / --max-live-bytes allow");
    }
    for concurrency in levels(cap) {
        let before = pid.and_then(|p| procfs::sample(p).ok());
        let (tally, took) = run_level(&plan, concurrency, config.lifecycles_per_worker, &next).await;
        let after = pid.and_then(|p| procfs::sample(p).ok());
        let level = level_of(concurrency, &tally, took, before.zip(after));
        let errors = level.error_count();
        let knee = out.last().and_then(|prev| {
            (level.lifecycles_per_second < prev.lifecycles_per_second * KNEE_GAIN
                && level.lifecycle.p50_ms > prev.lifecycle.p50_ms * KNEE_LATENCY)
                .then(|| {
                    format!(
                        "latency knee at concurrency {concurrency}: {:.1} lifecycles/s (at {}: {:.1}/s) while the median lifecycle took {:.1} ms (was {:.1} ms)",
                        level.lifecycles_per_second, prev.concurrency, prev.lifecycles_per_second, level.lifecycle.p50_ms, prev.lifecycle.p50_ms
                    )
                })
        });
        out.push(level);
        if errors > 0 {
            let codes = tally.errors_by_code().iter().map(|(c, n)| format!("{n} {c}")).collect::<Vec<_>>().join(", ");
            why = format!("errors at concurrency {concurrency} ({codes}): the ramp stops at the first level with errors");
            break;
        }
        if let Some(knee) = knee {
            why = knee;
            break;
        }
    }
    (out, why)
}

/// A level's report entry.
fn level_of(concurrency: usize, tally: &Tally, took: Duration, proc: Option<(procfs::ProcSample, procfs::ProcSample)>) -> Level {
    let seconds = took.as_secs_f64().max(1e-9);
    let completed = tally.lifecycle.len();
    Level {
        concurrency,
        lifecycles: tally.started,
        completed,
        seconds,
        lifecycles_per_second: completed as f64 / seconds,
        rpcs_per_second: tally.calls() as f64 / seconds,
        lifecycle: Percentiles::of(&tally.lifecycle),
        rpcs: tally.rpcs.iter().map(|(rpc, h)| (rpc.clone(), Percentiles::of(h))).collect(),
        errors: tally.errors.clone(),
        process: proc.map(|(before, after)| {
            let cpu = (after.cpu_seconds - before.cpu_seconds).max(0.0);
            LevelProcess {
                cpu_seconds: cpu,
                cpu_ms_per_lifecycle: if completed > 0 { cpu * 1000.0 / completed as f64 } else { 0.0 },
                peak_rss_kib: after.peak_rss_kib,
                fds: after.fds,
            }
        }),
    }
}

/// Everything a bench needs besides its configuration: the connections, the journal and
/// where its paths go.
pub struct Target {
    /// The controller's connection.
    pub controller: Connection,
    /// The node's connection (node 0).
    pub node: Connection,
    /// The cleanup journal.
    pub journal: Arc<Journal>,
    /// The bench's own directory (made here, removed at the end when empty).
    pub dir: PathBuf,
    /// Unique per bench: in every name.
    pub run_id: String,
}

/// Runs a bench (the ramp, or with `config.soak` the soak) and returns its report; what the
/// journal still lists for this bench is counted in `left_behind` (the caller undoes it).
pub async fn run(target: Target, config: &BenchConfig) -> Result<BenchReport, BenchError> {
    let started = time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
    let (steps, node_id) = discover(&target.controller, &target.node).await?;
    let mut identity = target.controller.identity();
    let info = target
        .controller
        .call("GetPluginInfo", v1::GetPluginInfoRequest {}, |r| async move { identity.get_plugin_info(r).await })
        .await?;
    let (process, process_note) = match target.node.endpoint().socket_path() {
        Some(socket) => match procfs::serving(socket).await {
            Ok(found) if found.shares_harness => {
                let note = format!(
                    "the plugin (pid {}) is this process: its CPU, memory and fds are shared with the harness",
                    found.pid
                );
                (Some(found), Some(note))
            }
            Ok(found) => (Some(found), None),
            Err(why) => (None, Some(why)),
        },
        None => (None, Some(format!("{} is not a unix socket: its process cannot be measured from here", target.node.endpoint()))),
    };
    let pid = process.as_ref().map(|p| p.pid);
    let plan = Arc::new(Plan {
        controller: target.controller.clone(),
        node: target.node.clone(),
        node_id,
        steps,
        volume_size: config.volume_size,
        expand_size: config.expand_size,
        capability: capability(config.block),
        parameters: config.parameters.clone().into_iter().collect(),
        snapshot_parameters: config.snapshot_parameters.clone().into_iter().collect(),
        secrets: config.secrets.clone(),
        dir: target.dir.clone(),
        name_prefix: format!("csi-conform-bench-{}", target.run_id),
        journal: target.journal.clone(),
    });
    let next = Arc::new(AtomicU64::new(0));
    let (levels, stopped, soak) = match &config.soak {
        None => {
            let (levels, why) = ramp(plan.clone(), config, pid, next).await;
            (levels, why, None)
        }
        Some(soak_config) => {
            let soak = soak::soak(plan.clone(), soak_config, pid, next).await;
            (Vec::new(), "soak: no ramp".to_owned(), Some(soak))
        }
    };
    Ok(BenchReport {
        format: model::FORMAT.into(),
        format_version: model::FORMAT_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        started,
        plugin_name: info.name,
        plugin_version: info.vendor_version,
        endpoints: {
            let mut e = vec![target.controller.endpoint().to_string()];
            let node = target.node.endpoint().to_string();
            if !e.contains(&node) {
                e.push(node);
            }
            e
        },
        settings: Settings {
            max_concurrency: config.max_concurrency,
            lifecycles_per_worker: config.lifecycles_per_worker,
            volume_size: config.volume_size,
            expand_size: config.expand_size,
            access_type: if config.block { "block" } else { "mount" }.into(),
            bundled_latency_ms: config.bundled_latency.map(|d| d.as_secs_f64() * 1000.0),
            bundled_quirks: config.bundled_quirks.clone(),
        },
        lifecycle_rpcs: steps.rpcs().into_iter().map(str::to_owned).collect(),
        process,
        process_note,
        levels,
        stopped,
        soak,
        left_behind: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_double_up_to_the_maximum_which_is_always_tried() {
        assert_eq!(levels(1), vec![1]);
        assert_eq!(levels(8), vec![1, 2, 4, 8]);
        assert_eq!(levels(6), vec![1, 2, 4, 6]);
    }

    /// `--max-live-volumes` / `--max-live-bytes` cap the ramp: a cloning lifecycle holds two
    /// volumes (of the larger of its two sizes) at once.
    #[test]
    fn the_budgets_cap_the_concurrency_by_what_a_lifecycle_holds() {
        let config = BenchConfig {
            max_concurrency: 16,
            lifecycles_per_worker: 1,
            volume_size: 1 << 20,
            expand_size: 2 << 20,
            block: false,
            parameters: BTreeMap::new(),
            snapshot_parameters: BTreeMap::new(),
            secrets: BTreeMap::new(),
            max_live_volumes: Some(9),
            max_live_bytes: None,
            soak: None,
            bundled_latency: None,
            bundled_quirks: vec![],
        };
        let cloning = Steps { clone: true, ..Steps::default() };
        assert_eq!(budget_cap(&config, &cloning), 4);
        assert_eq!(budget_cap(&config, &Steps::default()), 9);
        let bytes = BenchConfig { max_live_volumes: None, max_live_bytes: Some(12 << 20), ..config.clone() };
        assert_eq!(budget_cap(&bytes, &cloning), 3);
        let none = BenchConfig { max_live_volumes: None, ..config };
        assert_eq!(budget_cap(&none, &cloning), 16);
    }
}
