//! The performance quirks: `slow-after-n` (each call after the first [`SLOW_AFTER`] answers a
//! little later than the one before, as a plugin whose in-memory index degrades) and
//! `leak-fd-per-call` (each CreateVolume keeps a descriptor open for good, as a plugin that
//! opens its backend per volume and never closes it). `bench` and `report --compare` catch the
//! first, the soak the second; the conformance scenarios see neither, as the spec sets no pace
//! and no resource limit.

use std::sync::{
    Mutex,
    atomic::{AtomicU64, Ordering},
};
use std::time::Duration;

use super::{Plugin, Quirk};

/// Calls answered at full speed before `slow-after-n` starts slowing down.
pub const SLOW_AFTER: u64 = 50;
/// How much later each further call answers than the one before.
pub const SLOW_STEP: Duration = Duration::from_millis(1);
/// The most `slow-after-n` delays one call.
pub const SLOW_MAX: Duration = Duration::from_millis(100);
/// The most descriptors `leak-fd-per-call` holds (far below any open-files limit: the plugin
/// leaks, it does not die of it within a bench).
pub const LEAK_MAX: usize = 4096;

pub(super) const SLOW_AFTER_N_DESCRIPTION: &str = "after its first 50 calls, every call answers 1 ms later than the one before (up to 100 ms more): a plugin whose latency degrades with use (caught by `bench` and `report --compare`, never by a conformance scenario)";
pub(super) const LEAK_DESCRIPTION: &str = "every CreateVolume opens a file descriptor and never closes it (up to 4096): a plugin that leaks per call (caught by `bench --duration`'s soak, never by a conformance scenario)";

/// What the performance quirks keep: calls counted, descriptors leaked.
#[derive(Debug, Default)]
pub(crate) struct Drift {
    calls: AtomicU64,
    leaked: Mutex<Vec<std::fs::File>>,
}

/// Before each call's body: counts it, and with the quirks on, delays or leaks.
pub(super) async fn on_call(plugin: &Plugin, rpc: &str) {
    let n = plugin.drift.calls.fetch_add(1, Ordering::Relaxed) + 1;
    if plugin.quirk(Quirk::SlowAfterN) && n > SLOW_AFTER {
        let extra = SLOW_STEP.saturating_mul(u32::try_from(n - SLOW_AFTER).unwrap_or(u32::MAX)).min(SLOW_MAX);
        tokio::time::sleep(extra).await;
    }
    if plugin.quirk(Quirk::LeakFdPerCall) && rpc == "CreateVolume" {
        let mut leaked = plugin.drift.leaked.lock().unwrap_or_else(|p| p.into_inner());
        if leaked.len() < LEAK_MAX
            && let Ok(file) = std::fs::File::open("/dev/null")
        {
            leaked.push(file);
        }
    }
}
