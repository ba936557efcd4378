//! Latency histograms (hdrhistogram, microseconds at 3 significant digits) per RPC and for
//! whole lifecycles, with error counts by gRPC code, and the percentiles the report keeps.

use std::{collections::BTreeMap, time::Duration};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The longest latency a histogram holds exactly: one hour (longer ones are clamped to it).
const HIGHEST_MICROS: u64 = 3_600_000_000;

/// A fresh histogram of microseconds.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_MICROS, 3).expect("fixed, valid bounds")
}

/// Records `took` in `h` (at least 1 µs, at most an hour).
pub fn record(h: &mut Histogram<u64>, took: Duration) {
    let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).clamp(1, HIGHEST_MICROS);
    h.saturating_record(micros);
}

/// What the report keeps of a histogram, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Percentiles {
    /// Calls recorded.
    pub count: u64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Slowest, ms.
    pub max_ms: f64,
    /// Mean, ms.
    pub mean_ms: f64,
}

impl Percentiles {
    /// The percentiles of `h`.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        let ms = |micros: u64| micros as f64 / 1000.0;
        Percentiles {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
            mean_ms: h.mean() / 1000.0,
        }
    }
}

/// What one worker (or a whole level) measured: per RPC latencies of answered calls (OK or
/// an error code from the plugin), error codes per RPC, and lifecycles.
#[derive(Debug, Clone)]
pub struct Tally {
    /// Per RPC label, the answer times.
    pub rpcs: BTreeMap<String, Histogram<u64>>,
    /// Per RPC label, per gRPC code name, the calls that failed.
    pub errors: BTreeMap<String, BTreeMap<String, u64>>,
    /// Whole lifecycles that completed without an error, their duration.
    pub lifecycle: Histogram<u64>,
    /// Lifecycles started.
    pub started: u64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally { rpcs: BTreeMap::new(), errors: BTreeMap::new(), lifecycle: histogram(), started: 0 }
    }
}

impl Tally {
    /// One call of `rpc` that took `took` and ended with `code` (None: OK).
    pub fn call(&mut self, rpc: &str, took: Duration, code: Option<&str>) {
        record(self.rpcs.entry(rpc.to_owned()).or_insert_with(histogram), took);
        if let Some(code) = code {
            *self.errors.entry(rpc.to_owned()).or_default().entry(code.to_owned()).or_default() += 1;
        }
    }

    /// Adds `other` to this one.
    pub fn merge(&mut self, other: &Tally) {
        for (rpc, h) in &other.rpcs {
            let _ = self.rpcs.entry(rpc.clone()).or_insert_with(histogram).add(h);
        }
        for (rpc, codes) in &other.errors {
            let mine = self.errors.entry(rpc.clone()).or_default();
            for (code, n) in codes {
                *mine.entry(code.clone()).or_default() += n;
            }
        }
        let _ = self.lifecycle.add(&other.lifecycle);
        self.started += other.started;
    }

    /// Calls made, all RPCs.
    pub fn calls(&self) -> u64 {
        self.rpcs.values().map(Histogram::len).sum()
    }

    /// Calls that failed, all RPCs.
    pub fn error_count(&self) -> u64 {
        self.errors.values().flat_map(BTreeMap::values).sum()
    }

    /// Errors by code, all RPCs together.
    pub fn errors_by_code(&self) -> BTreeMap<String, u64> {
        let mut by_code = BTreeMap::new();
        for codes in self.errors.values() {
            for (code, n) in codes {
                *by_code.entry(code.clone()).or_default() += n;
            }
        }
        by_code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_recorded_calls_and_errors_are_counted_by_code() {
        let mut a = Tally::default();
        for ms in 1..=100u64 {
            a.call("CreateVolume", Duration::from_millis(ms), None);
        }
        let mut b = Tally::default();
        b.call("CreateVolume", Duration::from_secs(2), Some("ABORTED"));
        b.call("DeleteVolume", Duration::from_millis(3), Some("ABORTED"));
        a.merge(&b);
        let p = Percentiles::of(&a.rpcs["CreateVolume"]);
        assert_eq!(p.count, 101);
        assert!((49.9..=51.1).contains(&p.p50_ms), "{p:?}");
        assert!((98.9..=100.1).contains(&p.p99_ms), "{p:?}");
        assert!((1999.0..=2001.0).contains(&p.max_ms), "{p:?}");
        assert_eq!(a.calls(), 102);
        assert_eq!(a.errors_by_code(), BTreeMap::from([("ABORTED".to_owned(), 2)]));
    }
}
