//! The bench report: what `csi-conform bench` measured, as versioned JSON (`--json`), read
//! back by `report --compare` for baselines.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{procfs::ProcessFound, stats::Percentiles, trend::Trend};

/// The `format` of a bench report, told apart from run reports by `report --compare`.
pub const FORMAT: &str = "csi-conform-bench";
/// The version of the bench report's format; readers refuse newer ones.
pub const FORMAT_VERSION: u32 = 1;

/// Everything a bench measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`] when written.
    pub format_version: u32,
    /// csi-conform's version.
    pub tool_version: String,
    /// When it started, RFC 3339.
    pub started: String,
    /// The plugin's name and vendor_version (GetPluginInfo).
    pub plugin_name: String,
    /// The plugin's vendor_version.
    pub plugin_version: String,
    /// The endpoints, controller first.
    pub endpoints: Vec<String>,
    /// How it was asked to run.
    pub settings: Settings,
    /// The RPCs one lifecycle calls, in order.
    pub lifecycle_rpcs: Vec<String>,
    /// The plugin process measured through /proc, when found.
    pub process: Option<ProcessFound>,
    /// Why no process figures are given, when they are not.
    pub process_note: Option<String>,
    /// One entry per concurrency level, rising.
    pub levels: Vec<Level>,
    /// Why the ramp stopped where it did.
    pub stopped: String,
    /// The soak, with `--duration`.
    pub soak: Option<Soak>,
    /// Resources the journal still lists for this bench at the end (0: nothing left).
    pub left_behind: usize,
}

/// The settings a bench ran with (what makes two reports comparable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The highest concurrency tried.
    pub max_concurrency: usize,
    /// Lifecycles each worker runs per level.
    pub lifecycles_per_worker: u64,
    /// CreateVolume's size, bytes.
    pub volume_size: i64,
    /// The expansion size, bytes.
    pub expand_size: i64,
    /// `mount` or `block`.
    pub access_type: String,
    /// The bundled plugin's `--latency`, ms (None for another plugin).
    pub bundled_latency_ms: Option<f64>,
    /// The bundled plugin's quirks.
    pub bundled_quirks: Vec<String>,
}

/// One concurrency level of the ramp.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// Workers running lifecycles at once.
    pub concurrency: usize,
    /// Lifecycles started.
    pub lifecycles: u64,
    /// Lifecycles that completed without an error.
    pub completed: u64,
    /// Wall time of the level, seconds.
    pub seconds: f64,
    /// Completed lifecycles per second.
    pub lifecycles_per_second: f64,
    /// RPCs answered per second (OK or not).
    pub rpcs_per_second: f64,
    /// Whole-lifecycle latency.
    pub lifecycle: Percentiles,
    /// Per RPC label, latency of every answered call.
    pub rpcs: BTreeMap<String, Percentiles>,
    /// Per RPC label, failed calls by gRPC code.
    pub errors: BTreeMap<String, BTreeMap<String, u64>>,
    /// The plugin process during the level.
    pub process: Option<LevelProcess>,
}

/// The plugin process's resources over one level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LevelProcess {
    /// CPU seconds (user + system, with the commands it ran and reaped) used during the level.
    pub cpu_seconds: f64,
    /// CPU milliseconds per completed lifecycle.
    pub cpu_ms_per_lifecycle: f64,
    /// Peak resident memory so far, KiB (VmHWM at the level's end).
    pub peak_rss_kib: u64,
    /// Open fds at the level's end.
    pub fds: u64,
}

impl Level {
    /// Failed calls, all RPCs and codes.
    pub fn error_count(&self) -> u64 {
        self.errors.values().flat_map(BTreeMap::values).sum()
    }
}

/// A soak: lifecycles repeated at one concurrency, sampled over time, and the verdicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Soak {
    /// Workers.
    pub concurrency: usize,
    /// How long it ran, seconds.
    pub seconds: f64,
    /// Seconds between samples.
    pub interval_seconds: f64,
    /// Lifecycles completed.
    pub completed: u64,
    /// Failed calls by gRPC code.
    pub errors: BTreeMap<String, u64>,
    /// The samples, oldest first.
    pub samples: Vec<Sample>,
    /// The trend of each metric, and whether it is a leak or a drift.
    pub trends: Vec<Trend>,
}

impl Soak {
    /// The trends judged a leak or a drift.
    pub fn findings(&self) -> impl Iterator<Item = &Trend> {
        self.trends.iter().filter(|t| t.finding.is_some())
    }
}

/// One soak sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the soak started.
    pub at_seconds: f64,
    /// The plugin's resident memory, KiB.
    pub rss_kib: Option<u64>,
    /// The plugin's open fds.
    pub fds: Option<u64>,
    /// Mounts in the plugin's mount namespace.
    pub mounts: Option<u64>,
    /// Volumes the plugin lists (ListVolumes).
    pub volumes: Option<u64>,
    /// Median lifecycle latency of the lifecycles completed since the previous sample, ms.
    pub lifecycle_p50_ms: Option<f64>,
    /// Lifecycles completed since the previous sample.
    pub completed: u64,
}
