//! Resource budgets of a run: what each scenario holds on the plugin at once (volumes
//! published per node, live test volumes and their bytes, whether it must run alone, which
//! pools of the plugin's objects it changes or needs unchanged; derived in [`demand`]), the
//! limits the plugin reports (NodeGetInfo `max_volumes_per_node`, GetCapacity
//! `available_capacity`) or the user sets (`--max-live-volumes`, `--max-live-bytes`), and the
//! scheduler that starts scenarios, and lets property cases run side by side, only within
//! every limit, so that a verdict does not depend on `--jobs`. A scenario that needs more
//! than a limit on its own is skipped with the reason. It also decides when an answer is
//! contention (RESOURCE_EXHAUSTED, ABORTED "operation pending") that is retried after a
//! release rather than judged.
//!
//! In the spirit of nextest's test groups and CTest's resource groups: each scenario declares
//! (here: derives, from its steps and named checks) what it holds, and one scheduler keeps
//! every limit. The runner depends on this module, never the reverse.

use std::{
    collections::{BTreeMap, VecDeque},
    future::Future,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tonic::Code;

use super::model::Pool;
use crate::{
    client::{Connection, RpcError},
    fingerprint::{Capability, ControllerCapability, Fingerprint},
    proto::{self, v1},
};

/// The default `--contention-timeout`.
pub const DEFAULT_CONTENTION_TIMEOUT: Duration = Duration::from_secs(120);

mod demand;
pub use demand::{Demand, Sizing, cost, demand};

/// What the user sets about budgets (`run`'s flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetConfig {
    /// `--max-live-volumes`: test volumes that may exist at once (none: no limit of ours).
    pub max_live_volumes: Option<u32>,
    /// `--max-live-bytes`: their total size (none: only what GetCapacity reports).
    pub max_live_bytes: Option<i64>,
    /// `--contention-timeout`: how long a call answered with contention is retried.
    pub contention_timeout: Duration,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig { max_live_volumes: None, max_live_bytes: None, contention_timeout: DEFAULT_CONTENTION_TIMEOUT }
    }
}

/// The limits a run keeps.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Per node endpoint: its budget group (endpoints that report the same node id share one).
    group_of: Vec<usize>,
    /// Per group: the node id and its `max_volumes_per_node` (none: no limit).
    groups: Vec<(String, Option<u32>)>,
    /// Live test volumes, and where the limit comes from.
    volumes: Option<(u32, String)>,
    /// Their bytes, and where the limit comes from.
    bytes: Option<(i64, String)>,
    /// Scenarios at once.
    jobs: usize,
}

impl Limits {
    /// The limits of a run: every node endpoint's `max_volumes_per_node` (0: none), the
    /// configured ones, and `available` bytes (GetCapacity's answer, if any; the smaller of
    /// it and `--max-live-bytes` counts).
    pub fn new(fp: &Fingerprint, config: &BudgetConfig, jobs: usize, available: Option<i64>) -> Limits {
        let mut groups: Vec<(String, Option<u32>)> = Vec::new();
        let mut group_of = Vec::new();
        for node in &fp.nodes {
            let max = u32::try_from(node.max_volumes_per_node).ok().filter(|&m| m > 0);
            match groups.iter().position(|(id, _)| *id == node.node_id) {
                Some(g) => {
                    // Two endpoints of one node: the smaller limit holds.
                    groups[g].1 = match (groups[g].1, max) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    group_of.push(g);
                }
                None => {
                    group_of.push(groups.len());
                    groups.push((node.node_id.clone(), max));
                }
            }
        }
        let volumes = config.max_live_volumes.map(|n| (n, "--max-live-volumes".to_owned()));
        let from_plugin = available.map(|b| (b, "the plugin reports available (GetCapacity)".to_owned()));
        let from_flag = config.max_live_bytes.map(|b| (b, "--max-live-bytes allows".to_owned()));
        let bytes = match (from_plugin, from_flag) {
            (Some(p), Some(f)) => Some(if f.0 < p.0 { f } else { p }),
            (p, f) => p.or(f),
        };
        Limits { group_of, groups, volumes, bytes, jobs: jobs.max(1) }
    }

    /// Reads the plugin's limits: NodeGetInfo's (already in the fingerprint) and, when the
    /// controller advertises GET_CAPACITY, GetCapacity with the run's parameters and default
    /// capability. A GetCapacity that fails or reports 0 gives no byte limit (0 may mean
    /// "unknown" to a plugin, and the capacity suites judge the answer).
    pub async fn read(
        controller: Option<&Connection>,
        fp: &Fingerprint,
        config: &BudgetConfig,
        jobs: usize,
        parameters: &BTreeMap<String, String>,
        capability: v1::VolumeCapability,
    ) -> Limits {
        let mut available = None;
        if let Some(conn) = controller
            && fp.supports(Capability::Controller(ControllerCapability::GetCapacity))
            && let Some(method) = proto::method("GetCapacity")
        {
            let request = v1::GetCapacityRequest {
                volume_capabilities: vec![capability],
                parameters: parameters.clone().into_iter().collect(),
                ..Default::default()
            };
            match conn.call_dynamic(&method, proto::to_dynamic(&request)).await {
                Ok(answer) => match answer.transcode_to::<v1::GetCapacityResponse>() {
                    Ok(r) if r.available_capacity > 0 => available = Some(r.available_capacity),
                    Ok(_) => tracing::info!("GetCapacity reports 0 bytes available: no capacity budget"),
                    Err(e) => tracing::warn!("GetCapacity's answer does not decode ({e}): no capacity budget"),
                },
                Err(e) => tracing::warn!("GetCapacity answered {} ({}): no capacity budget", e.code_name(), e.message),
            }
        }
        let limits = Limits::new(fp, config, jobs, available);
        tracing::info!(?limits, "budgets");
        limits
    }

    /// Why `demand` can never fit, even alone: the dimension it exceeds.
    pub fn too_big(&self, demand: &Demand) -> Option<String> {
        for (g, (node, max)) in self.groups.iter().enumerate() {
            let want = self.group_demand(demand, g);
            if let Some(max) = max
                && want > *max
            {
                return Some(format!(
                    "holds up to {want} volumes published on node {node} at once, more than its max_volumes_per_node of {max}"
                ));
            }
        }
        if let Some((max, from)) = &self.volumes
            && demand.volumes > *max
        {
            return Some(format!("needs up to {} live volumes at once, more than {from} {max}", demand.volumes));
        }
        if let Some((max, from)) = &self.bytes
            && demand.bytes > *max
        {
            return Some(format!(
                "needs up to {} at once for its volumes, more than the {} {from}",
                human_bytes(demand.bytes),
                human_bytes(*max)
            ));
        }
        None
    }

    fn group_demand(&self, demand: &Demand, group: usize) -> u32 {
        demand.publish.iter().enumerate().filter(|(n, _)| self.group_of.get(*n) == Some(&group)).map(|(_, c)| c).sum()
    }
}

/// `10 GiB`, `512 MiB`, `4096 bytes`: a size as a person reads it.
pub(crate) fn human_bytes(bytes: i64) -> String {
    const UNITS: [(&str, i64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    UNITS
        .iter()
        .find(|(_, size)| bytes >= *size && bytes % size == 0)
        .map_or_else(|| format!("{bytes} bytes"), |(unit, size)| format!("{} {unit}", bytes / size))
}

/// What is held now.
#[derive(Debug, Default)]
struct Held {
    /// Scenarios running.
    jobs: usize,
    /// Whether an alone scenario runs.
    alone: bool,
    /// Per pool: the running scenarios that change it (exclusive holders included).
    changing: BTreeMap<Pool, u32>,
    /// Per pool: the running scenarios that hold it exclusively (at most one).
    exclusive: BTreeMap<Pool, u32>,
    /// Publications per group.
    publish: Vec<u32>,
    volumes: u32,
    bytes: i64,
    /// Every lease: its id → (what it holds per group, the demand, whether it is a job).
    leases: BTreeMap<u64, (Vec<u32>, Demand, bool)>,
    /// Leases waiting in a contention retry: they release nothing until it ends.
    waiting: BTreeMap<u64, u32>,
    next_id: u64,
}

/// The scheduler: admits scenarios (and extra property cases) within every limit.
#[derive(Debug)]
pub struct Budget {
    limits: Limits,
    held: Mutex<Held>,
    released: tokio::sync::Notify,
    /// Releases so far (a call that overlapped one is worth trying again).
    releases: std::sync::atomic::AtomicU64,
    /// Objects the run deleted (answered OK) that no look has yet seen gone (the delete
    /// verifier's, [`super::verifier`]): until then the plugin may still hold their room, and
    /// it will let it go without this run doing anything more.
    unseen_deletes: std::sync::atomic::AtomicU64,
    /// A call waits for room while deleted objects are unseen: whoever decides them (the
    /// verifier) is asked to look now rather than at their deadline.
    sighting_wanted: tokio::sync::Notify,
    contention_timeout: Duration,
}

/// A place in the budget: released when dropped.
#[derive(Debug)]
pub struct Lease {
    budget: Arc<Budget>,
    id: u64,
}

impl Lease {
    /// Who holds it (see [`Budget::others_can_release`]).
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.budget.release(self.id);
    }
}

/// The scenarios waiting to start, in the order they should.
#[derive(Debug, Default)]
pub struct Queue {
    /// (scenario index, demand, why it cannot run within the budgets).
    pending: VecDeque<(usize, Demand, Option<String>)>,
}

impl Queue {
    /// A queue of `(index, demand)` in start order; a demand that exceeds a limit on its own
    /// is queued holding nothing, with the reason (the scenario is then skipped).
    pub fn new(limits: &Limits, items: impl IntoIterator<Item = (usize, Demand)>) -> Queue {
        let pending = items
            .into_iter()
            .map(|(index, mut demand)| match limits.too_big(&demand) {
                Some(reason) => (index, Demand::default(), Some(reason)),
                None => {
                    if let (true, Some((all, _))) = (demand.plugin_sized, &limits.bytes) {
                        demand.bytes = *all;
                    }
                    (index, demand, None)
                }
            })
            .collect();
        Queue { pending }
    }
}

/// A started scenario's place: the lease, and why it must be skipped, if so.
#[derive(Debug)]
pub struct Ticket {
    /// Its index (as given to [`Queue::new`]).
    pub index: usize,
    /// Held until the scenario ends.
    pub lease: Lease,
    /// The scenario needs more than a limit allows: it is skipped with this reason.
    pub too_big: Option<String>,
}

impl Budget {
    /// A scheduler keeping `limits`.
    pub fn new(limits: Limits, contention_timeout: Duration) -> Arc<Budget> {
        let groups = limits.groups.len();
        Arc::new(Budget {
            limits,
            held: Mutex::new(Held { publish: vec![0; groups], ..Held::default() }),
            released: tokio::sync::Notify::new(),
            releases: std::sync::atomic::AtomicU64::new(0),
            unseen_deletes: std::sync::atomic::AtomicU64::new(0),
            sighting_wanted: tokio::sync::Notify::new(),
            contention_timeout,
        })
    }

    /// The limits it keeps.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `demand` fits beside what is held (`job`: it is a scenario, which takes a job
    /// and respects `alone`).
    fn fits(&self, held: &Held, demand: &Demand, job: bool) -> bool {
        if job {
            if demand.alone && held.jobs > 0 || held.alone || held.jobs >= self.limits.jobs {
                return false;
            }
            // Exclusive: nobody else changes or holds the pool; changing: nobody holds it
            // exclusively. (A demand's changes include its exclusive pools, but the rule does
            // not rest on that.)
            let count = |map: &BTreeMap<Pool, u32>, p: &Pool| map.get(p).copied().unwrap_or(0);
            let taken = |p: &Pool| count(&held.changing, p) + count(&held.exclusive, p) > 0;
            if demand.exclusive.iter().any(taken) || demand.changes.iter().any(|p| count(&held.exclusive, p) > 0) {
                return false;
            }
        }
        let publish_fits = (0..self.limits.groups.len()).all(|g| match self.limits.groups[g].1 {
            Some(max) => held.publish[g] + self.limits.group_demand(demand, g) <= max,
            None => true,
        });
        let volumes_fit = self.limits.volumes.as_ref().is_none_or(|(max, _)| held.volumes + demand.volumes <= *max);
        let bytes_fit =
            self.limits.bytes.as_ref().is_none_or(|(max, _)| held.bytes.saturating_add(demand.bytes) <= *max);
        publish_fits && volumes_fit && bytes_fit
    }

    fn reserve(self: &Arc<Self>, held: &mut Held, demand: Demand, job: bool) -> Lease {
        let per_group: Vec<u32> = (0..self.limits.groups.len()).map(|g| self.limits.group_demand(&demand, g)).collect();
        for (g, n) in per_group.iter().enumerate() {
            held.publish[g] += n;
        }
        held.volumes += demand.volumes;
        held.bytes = held.bytes.saturating_add(demand.bytes);
        if job {
            held.jobs += 1;
            held.alone |= demand.alone;
            for p in &demand.changes {
                *held.changing.entry(*p).or_default() += 1;
            }
            for p in &demand.exclusive {
                *held.exclusive.entry(*p).or_default() += 1;
            }
        }
        held.next_id += 1;
        let id = held.next_id;
        held.leases.insert(id, (per_group, demand, job));
        Lease { budget: self.clone(), id }
    }

    fn release(&self, id: u64) {
        {
            let mut held = self.held();
            if let Some((per_group, demand, job)) = held.leases.remove(&id) {
                for (g, n) in per_group.iter().enumerate() {
                    held.publish[g] -= n;
                }
                held.volumes -= demand.volumes;
                held.bytes -= demand.bytes;
                if job {
                    held.jobs -= 1;
                    if demand.alone {
                        held.alone = false;
                    }
                    for p in &demand.changes {
                        *held.changing.entry(*p).or_default() -= 1;
                    }
                    for p in &demand.exclusive {
                        *held.exclusive.entry(*p).or_default() -= 1;
                    }
                }
            }
        }
        self.releases.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.released.notify_waiters();
    }

    /// The next scenario of `queue` that fits, in queue order (a later one may pass one that
    /// must wait), once one does; `None` when the queue is empty.
    pub async fn next(self: &Arc<Self>, queue: &mut Queue) -> Option<Ticket> {
        loop {
            let released = self.released.notified();
            let mut released = std::pin::pin!(released);
            released.as_mut().enable();
            {
                let mut held = self.held();
                if queue.pending.is_empty() {
                    return None;
                }
                if let Some(pos) = queue.pending.iter().position(|(_, d, _)| self.fits(&held, d, true)) {
                    let (index, demand, too_big) = queue.pending.remove(pos).expect("the position is in the queue");
                    let lease = self.reserve(&mut held, demand, true);
                    return Some(Ticket { index, lease, too_big });
                }
            }
            released.await;
        }
    }

    /// A further place for work beside a running scenario (a property case), if `demand`
    /// fits now; it takes no job.
    pub fn try_extra(self: &Arc<Self>, demand: Demand) -> Option<Lease> {
        let mut held = self.held();
        self.fits(&held, &demand, false).then(|| self.reserve(&mut held, demand, false))
    }

    /// An object was deleted (answered OK) and no look has seen it gone yet: a plugin that
    /// deletes in the background may still hold its room, so a create refused for lack of
    /// room meanwhile is contention (retried when it is seen), not the plugin's verdict.
    pub fn delete_unseen(&self) {
        self.unseen_deletes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Resolves when a call waits for room while deleted objects are unseen (at once if one
    /// asked since the last time): the verifier then looks at them without waiting for their
    /// deadline.
    pub async fn sighting_wanted(&self) {
        self.sighting_wanted.notified().await;
    }

    /// An object of [`Budget::delete_unseen`] was decided (seen gone, or kept by the plugin):
    /// a release for whoever waits on contention.
    pub fn delete_seen(&self) {
        let _ = self.unseen_deletes.fetch_update(
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
            |n| n.checked_sub(1),
        );
        self.releases.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.released.notify_waiters();
    }

    /// Whether a lease other than `me` holds resources and can let them go: one that is not
    /// itself waiting for a release; or an object deleted and not yet seen gone
    /// ([`Budget::delete_unseen`]). When every holder waits, none will release (what the
    /// plugin lost, or what no call can delete, is not this run's to release).
    pub fn others_can_release(&self, me: u64) -> bool {
        if self.unseen_deletes.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            return true;
        }
        let held = self.held();
        held.leases
            .iter()
            .any(|(id, (_, demand, _))| *id != me && demand.holds() && !held.waiting.contains_key(id))
    }

    fn waiting(&self, me: u64, on: bool) {
        let mut held = self.held();
        let n = held.waiting.entry(me).or_insert(0);
        if on {
            *n += 1;
        } else {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.waiting.remove(&me);
            }
        }
    }

    /// Calls `call` and, while it answers with contention (see [`is_contention`]) and other
    /// leases than `me` hold resources (or one was released while it was calling), calls it
    /// again after one of them is released (or a short backoff), for at most the contention
    /// timeout (`me` none: never, the caller expects contention codes). Returns the last
    /// answer and, when it was retried, how (for the finding when it still fails).
    pub async fn retry_contention<T, F, Fut>(&self, me: Option<u64>, mut call: F) -> (Result<T, RpcError>, Option<Retried>)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, RpcError>>,
    {
        let started = Instant::now();
        let mut retries = 0u32;
        let mut backoff = Duration::from_millis(100);
        loop {
            let released = self.released.notified();
            let mut released = std::pin::pin!(released);
            released.as_mut().enable();
            let releases = self.releases.load(std::sync::atomic::Ordering::SeqCst);
            let answer = call().await;
            let contended = answer
                .as_ref()
                .err()
                .filter(|e| is_contention(e.code, &e.message) || is_no_space(&e.rpc, e.code, &e.message))
                .map(|e| e.code);
            let retried = |timed_out: bool| {
                (retries > 0).then(|| Retried {
                    times: retries,
                    over: started.elapsed(),
                    code: contended,
                    bound: self.contention_timeout,
                    timed_out,
                })
            };
            let (Some(_), Some(me)) = (contended, me) else { return (answer, retried(false)) };
            let left = self.contention_timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                return (answer, retried(true));
            }
            if self.releases.load(std::sync::atomic::Ordering::SeqCst) != releases {
                // Something was let go while the plugin answered: try again at once.
                retries += 1;
                continue;
            }
            if !self.others_can_release(me) {
                return (answer, retried(false));
            }
            retries += 1;
            tracing::info!(retries, "contention: waiting for this run to release something before calling again");
            if self.unseen_deletes.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                self.sighting_wanted.notify_one();
            }
            self.waiting(me, true);
            let _ = tokio::time::timeout(backoff.min(left), released).await;
            self.waiting(me, false);
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }
}

/// How a call was retried for contention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retried {
    /// Calls after the first.
    pub times: u32,
    /// Over how long.
    pub over: Duration,
    /// The contention code of the last answer (none: the last answer was something else).
    pub code: Option<Code>,
    /// The bound of the wait (`--contention-timeout`).
    pub bound: Duration,
    /// Whether the wait ended at that bound (else: nothing the run holds could be released
    /// any more, or the last answer was no contention).
    pub timed_out: bool,
}

impl Retried {
    /// The note a finding about the call carries.
    pub fn note(&self) -> String {
        let bound = crate::client::human_duration(self.bound);
        let end = if self.timed_out {
            format!("until the wait's bound ran out: waited {bound} (--contention-timeout)")
        } else {
            format!("until nothing more they hold could be released (bound: {bound}, --contention-timeout)")
        };
        format!(
            "retried {} time(s) over {} while other scenarios of this run held resources on the plugin they could still release, {end}",
            self.times,
            crate::client::human_duration(self.over)
        )
    }
}

/// Whether an answer is contention for what the run holds: RESOURCE_EXHAUSTED, or ABORTED
/// saying an operation is pending (the spec's "operation pending for volume" rows).
pub fn is_contention(code: Code, message: &str) -> bool {
    code == Code::ResourceExhausted || code == Code::Aborted && message.to_ascii_lowercase().contains("pending")
}

/// The RPCs that take space on the plugin: a lack of it while the run holds other volumes is
/// the run's own doing.
const ALLOCATING: [&str; 6] = [
    "CreateVolume",
    "CreateSnapshot",
    "CreateVolumeGroupSnapshot",
    "ControllerExpandVolume",
    "NodeExpandVolume",
    "NodeStageVolume",
];

/// Whether an answer says the plugin ran out of space, with another code than
/// RESOURCE_EXHAUSTED (which [`is_contention`] covers): an allocating RPC answering UNKNOWN,
/// INTERNAL, UNAVAILABLE, ABORTED or FAILED_PRECONDITION whose message says no space, ENOSPC
/// or quota (hostpath answers a full disk with UNKNOWN "no space left on device"). Verdict
/// codes about the request itself (OUT_OF_RANGE, INVALID_ARGUMENT, ...) never are.
pub fn is_no_space(rpc: &str, code: Code, message: &str) -> bool {
    const SAYS: [&str; 7] =
        ["no space", "enospc", "quota", "out of space", "not enough space", "insufficient space", "insufficient capacity"];
    let message = message.to_ascii_lowercase();
    ALLOCATING.contains(&rpc)
        && matches!(code, Code::Unknown | Code::Internal | Code::Unavailable | Code::Aborted | Code::FailedPrecondition)
        && SAYS.iter().any(|s| message.contains(s))
}

#[cfg(test)]
mod tests;
