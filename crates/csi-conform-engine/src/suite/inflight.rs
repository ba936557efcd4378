//! The run's own calls in flight, by the volume id each names: whether an ABORTED answer came
//! while another call of this run on that volume was in flight, which the spec makes lawful
//! (#concurrency: the plugin "MAY return this error code to reject secondary calls") and the
//! run's own doing, so it is retried as contention once those calls are done, never judged.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use prost_reflect::DynamicMessage;
use tokio::sync::Notify;

/// The request fields that name the volume a call is about, first match wins.
const VOLUME_FIELDS: [&str; 2] = ["volume_id", "source_volume_id"];

/// The volume a request names, if any (an empty id names none).
pub(crate) fn volume_of(request: &DynamicMessage) -> Option<String> {
    VOLUME_FIELDS.iter().find_map(|f| crate::proto::str_at(request, &[f]).filter(|id| !id.is_empty()))
}

/// Per volume id: the run's calls in flight on it, and how many were ever started on it.
#[derive(Default)]
pub(crate) struct InFlight {
    volumes: Mutex<HashMap<String, Volume>>,
    /// Told whenever a call ends.
    ended: Notify,
}

#[derive(Default)]
struct Volume {
    open: u32,
    started: u64,
}

/// One call in flight, registered until dropped.
pub(crate) struct Call<'a> {
    registry: &'a InFlight,
    volume: String,
    /// The volume's start count with this call counted.
    started: u64,
    /// Whether another call on the volume was in flight when this one started.
    busy_at_start: bool,
}

impl InFlight {
    fn volumes(&self) -> MutexGuard<'_, HashMap<String, Volume>> {
        self.volumes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a call on `volume` (none: a call about no volume, not registered).
    pub(crate) fn begin(&self, volume: Option<&str>) -> Option<Call<'_>> {
        let volume = volume?;
        let mut volumes = self.volumes();
        let v = volumes.entry(volume.to_owned()).or_default();
        let busy_at_start = v.open > 0;
        v.open += 1;
        v.started += 1;
        Some(Call { registry: self, volume: volume.to_owned(), started: v.started, busy_at_start })
    }

    /// Waits until none of the run's calls on `volume` is in flight, for at most `bound`.
    pub(crate) async fn idle(&self, volume: &str, bound: Duration) {
        let wait = async {
            loop {
                let ended = self.ended.notified();
                let mut ended = std::pin::pin!(ended);
                ended.as_mut().enable();
                if self.volumes().get(volume).is_none_or(|v| v.open == 0) {
                    return;
                }
                ended.await;
            }
        };
        let _ = tokio::time::timeout(bound, wait).await;
    }
}

impl Call<'_> {
    /// Whether another of the run's calls on the same volume was in flight at some moment
    /// while this one was: at its start, started since, or still open.
    pub(crate) fn overlapped(&self) -> bool {
        let volumes = self.registry.volumes();
        let v = volumes.get(&self.volume);
        self.busy_at_start || v.is_some_and(|v| v.open > 1 || v.started > self.started)
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        let mut volumes = self.registry.volumes();
        if let Some(v) = volumes.get_mut(&self.volume) {
            v.open = v.open.saturating_sub(1);
            if v.open == 0 {
                volumes.remove(&self.volume);
            }
        }
        drop(volumes);
        self.registry.ended.notify_waiters();
    }
}

/// The note a finding about a call carries when it still failed after `times` retries for
/// the run's own calls on its volume.
pub(crate) fn note(times: u32, over: Duration, bound: Duration) -> String {
    format!(
        "asked again {times} time(s) over {} after ABORTED answers that came while another call of this run on the \
         volume was in flight (lawful, #concurrency), until the wait's bound: {} (--contention-timeout)",
        crate::client::human_duration(over),
        crate::client::human_duration(bound)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_alone_did_not_overlap() {
        let run = InFlight::default();
        let a = run.begin(Some("v1")).unwrap();
        let other_volume = run.begin(Some("v2")).unwrap();
        assert!(!a.overlapped());
        assert!(!other_volume.overlapped());
        assert!(run.begin(None).is_none());
    }

    #[test]
    fn calls_on_one_volume_overlap_whichever_ends_first() {
        let run = InFlight::default();
        let a = run.begin(Some("v1")).unwrap();
        let b = run.begin(Some("v1")).unwrap();
        drop(a);
        // b started while a was in flight.
        assert!(b.overlapped());
        drop(b);
        let c = run.begin(Some("v1")).unwrap();
        let d = run.begin(Some("v1")).unwrap();
        drop(d);
        // d started (and ended) while c was in flight.
        assert!(c.overlapped());
        drop(c);
        let e = run.begin(Some("v1")).unwrap();
        assert!(!e.overlapped(), "calls that ended before it started are no overlap");
    }

    #[tokio::test]
    async fn idle_waits_for_the_volume_s_calls_to_end() {
        let run = InFlight::default();
        let call = run.begin(Some("v1")).unwrap();
        let ended = std::cell::Cell::new(false);
        let waiter = async {
            run.idle("v1", Duration::from_secs(60)).await;
            ended.get()
        };
        let ender = async {
            tokio::task::yield_now().await;
            ended.set(true);
            drop(call);
        };
        let (saw_the_end, ()) = tokio::join!(waiter, ender);
        assert!(saw_the_end, "idle returned while a call on the volume was in flight");
    }
}
