//! The soak: lifecycles repeated at one concurrency for a set time while the plugin process
//! (resident memory, fds, mounts), the volumes it lists and the lifecycle latency are sampled
//! at a steady interval; then each series is judged for a leak or a drift ([`super::trend`]).

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use crate::proto::v1;

use super::{
    lifecycle::{Plan, lifecycle},
    model::{Sample, Soak},
    stats::{Percentiles, Tally},
    trend::{Limit, judge},
};

/// How a soak runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoakConfig {
    /// How long lifecycles keep starting.
    pub duration: Duration,
    /// Workers.
    pub concurrency: usize,
    /// Time between samples.
    pub interval: Duration,
}

impl SoakConfig {
    /// The default interval for `duration`: 60 samples, between 250 ms and 60 s apart.
    pub fn default_interval(duration: Duration) -> Duration {
        (duration / 60).clamp(Duration::from_millis(250), Duration::from_secs(60))
    }
}

/// What counts as a leak or a drift, per metric (documented in docs/benchmarking.md).
pub fn limits(concurrency: usize) -> [(&'static str, Limit); 5] {
    [
        ("rss_kib", Limit { absolute: 8192.0, relative: 0.2, kind: "leak" }),
        ("fds", Limit { absolute: 16.0, relative: 0.1, kind: "leak" }),
        ("mounts", Limit { absolute: 4.0, relative: 0.02, kind: "leak" }),
        // Each worker holds up to two volumes at a time: more than that, and still growing.
        ("volumes", Limit { absolute: 2.0 * concurrency as f64 + 4.0, relative: 0.0, kind: "leak" }),
        ("lifecycle_p50_ms", Limit { absolute: 5.0, relative: 0.5, kind: "drift" }),
    ]
}

/// Volumes the plugin lists now (every page), when it serves ListVolumes.
async fn count_volumes(plan: &Plan) -> Option<u64> {
    if !plan.steps.list_volumes {
        return None;
    }
    let mut token = String::new();
    let mut count = 0u64;
    for _ in 0..10_000 {
        let mut c = plan.controller.controller();
        let request = v1::ListVolumesRequest { max_entries: 1000, starting_token: token.clone() };
        let page = plan.controller.call("ListVolumes", request, |r| async move { c.list_volumes(r).await }).await.ok()?;
        count += page.entries.len() as u64;
        if page.next_token.is_empty() {
            return Some(count);
        }
        token = page.next_token;
    }
    None
}

/// What the workers share with the sampler: the latency of the lifecycles completed since the
/// last sample, and every error.
#[derive(Default)]
struct Window {
    tally: Mutex<Tally>,
}

/// Runs the soak and judges it.
pub async fn soak(plan: Arc<Plan>, config: &SoakConfig, pid: Option<i32>, next: Arc<AtomicU64>) -> Soak {
    let started = Instant::now();
    let deadline = started + config.duration;
    let window = Arc::new(Window::default());
    let errors = Arc::new(Mutex::new(BTreeMap::<String, u64>::new()));
    let completed = Arc::new(AtomicU64::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..config.concurrency.max(1) {
        let (plan, next, window, errors, completed) = (plan.clone(), next.clone(), window.clone(), errors.clone(), completed.clone());
        workers.spawn(async move {
            while Instant::now() < deadline {
                let mut tally = Tally::default();
                let n = next.fetch_add(1, Ordering::Relaxed);
                let ok = lifecycle(&plan, n, &mut tally).await.is_ok();
                completed.fetch_add(u64::from(ok), Ordering::Relaxed);
                for (code, count) in tally.errors_by_code() {
                    *errors.lock().unwrap_or_else(|p| p.into_inner()).entry(code).or_default() += count;
                }
                window.tally.lock().unwrap_or_else(|p| p.into_inner()).merge(&tally);
                if !ok {
                    // A failing plugin is not hammered: the next lifecycle waits a moment.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        });
    }
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + config.interval, config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while Instant::now() < deadline {
        tick.tick().await;
        let taken = std::mem::take(&mut *window.tally.lock().unwrap_or_else(|p| p.into_inner()));
        let proc = pid.and_then(|p| super::procfs::sample(p).ok());
        let lifecycles = taken.lifecycle.len();
        samples.push(Sample {
            at_seconds: started.elapsed().as_secs_f64(),
            rss_kib: proc.map(|p| p.rss_kib),
            fds: proc.map(|p| p.fds),
            mounts: proc.map(|p| p.mounts),
            volumes: count_volumes(&plan).await,
            lifecycle_p50_ms: (lifecycles > 0).then(|| Percentiles::of(&taken.lifecycle).p50_ms),
            completed: lifecycles,
        });
    }
    while workers.join_next().await.is_some() {}
    let trends = limits(config.concurrency)
        .into_iter()
        .filter_map(|(metric, limit)| {
            let points: Vec<(f64, f64)> = samples.iter().filter_map(|s| Some((s.at_seconds, value(s, metric)?))).collect();
            (!points.is_empty()).then(|| judge(metric, &points, limit))
        })
        .collect();
    let errors = errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Soak {
        concurrency: config.concurrency,
        seconds: started.elapsed().as_secs_f64(),
        interval_seconds: config.interval.as_secs_f64(),
        completed: completed.load(Ordering::Relaxed),
        errors,
        samples,
        trends,
    }
}

/// A sample's value of `metric`.
pub fn value(s: &Sample, metric: &str) -> Option<f64> {
    match metric {
        "rss_kib" => s.rss_kib.map(|v| v as f64),
        "fds" => s.fds.map(|v| v as f64),
        "mounts" => s.mounts.map(|v| v as f64),
        "volumes" => s.volumes.map(|v| v as f64),
        "lifecycle_p50_ms" => s.lifecycle_p50_ms,
        _ => None,
    }
}
