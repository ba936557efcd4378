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
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::{client::ErrorOrigin, suite::settings::tests_support::fingerprint};

    /// What `next` decides now: it takes its decision under the lock before it waits for a
    /// release, so one poll is the whole answer (pending: it waits), with no timer.
    fn next_now(budget: &Arc<Budget>, queue: &mut Queue) -> std::task::Poll<Option<Ticket>> {
        let mut next = std::pin::pin!(budget.next(queue));
        next.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    }

    fn limits(per_node: &[i64], volumes: Option<u32>, bytes: Option<i64>, jobs: usize) -> Limits {
        let mut fp = fingerprint(per_node.len());
        for (node, max) in fp.nodes.iter_mut().zip(per_node) {
            node.max_volumes_per_node = *max;
        }
        let config = BudgetConfig { max_live_volumes: volumes, ..BudgetConfig::default() };
        Limits::new(&fp, &config, jobs, bytes)
    }

    fn publishing(per_node: &[u32], volumes: u32) -> Demand {
        Demand { publish: per_node.to_vec(), volumes, bytes: i64::from(volumes) * 10, ..Demand::default() }
    }

    /// A scenario holding a pool exclusively runs beside scenarios that leave the pool alone,
    /// never beside one that changes it, and one that changes it starts once it ends.
    #[tokio::test]
    async fn an_exclusive_pool_keeps_out_only_what_changes_it() {
        let budget = Budget::new(limits(&[], None, None, 8), DEFAULT_CONTENTION_TIMEOUT);
        let holds = |exclusive: &[Pool], changes: &[Pool]| Demand {
            exclusive: exclusive.to_vec(),
            changes: changes.to_vec(),
            ..Demand::default()
        };
        let mut queue = Queue::new(
            budget.limits(),
            [
                (0, holds(&[Pool::Volumes], &[Pool::Volumes])),
                (1, holds(&[], &[Pool::Volumes])),
                (2, holds(&[Pool::Snapshots], &[Pool::Volumes, Pool::Snapshots])),
                (3, holds(&[], &[Pool::Snapshots])),
                (4, holds(&[], &[])),
            ],
        );
        let counter = budget.next(&mut queue).await.expect("the exclusive one starts first");
        assert_eq!(counter.index, 0);
        let beside = budget.next(&mut queue).await.expect("a scenario that does not change the volumes");
        assert_eq!(beside.index, 3);
        assert_eq!(budget.next(&mut queue).await.map(|t| t.index), Some(4));
        let waiting = next_now(&budget, &mut queue);
        assert!(waiting.is_pending(), "1 and 2 change the volumes while 0 holds them");
        drop(counter);
        let changer = budget.next(&mut queue).await.expect("the volumes are free");
        assert_eq!(changer.index, 1);
        // 2 holds the snapshots exclusively, but 3 still changes them.
        let waiting = next_now(&budget, &mut queue);
        assert!(waiting.is_pending(), "3 changes the snapshots");
        drop(beside);
        assert_eq!(budget.next(&mut queue).await.map(|t| t.index), Some(2));
        assert!(budget.next(&mut queue).await.is_none());
    }

    /// Two holders of one pool never run together, even when a demand leaves the pool out of
    /// what it changes.
    #[tokio::test]
    async fn two_holders_of_a_pool_never_run_together() {
        let budget = Budget::new(limits(&[], None, None, 8), DEFAULT_CONTENTION_TIMEOUT);
        let holder = || Demand { exclusive: vec![Pool::Volumes], ..Demand::default() };
        let mut queue = Queue::new(budget.limits(), [(0, holder()), (1, holder())]);
        let first = budget.next(&mut queue).await.expect("one starts");
        let waiting = next_now(&budget, &mut queue);
        assert!(waiting.is_pending(), "the second holder waits");
        drop(first);
        assert_eq!(budget.next(&mut queue).await.map(|t| t.index), Some(1));
    }

    #[test]
    fn a_scenario_over_a_limit_is_queued_holding_nothing_with_the_reason() {
        let l = limits(&[2, 0], Some(5), Some(1 << 20), 8);
        assert_eq!(l.too_big(&publishing(&[2, 9], 2)), None, "node 1 reports no limit");
        let reason = l.too_big(&publishing(&[3, 0], 3)).expect("over node 0's limit");
        assert!(reason.contains("3 volumes published on node node-0") && reason.contains("max_volumes_per_node of 2"), "{reason}");
        let reason = l.too_big(&publishing(&[0], 6)).expect("over --max-live-volumes");
        assert!(reason.contains("6 live volumes") && reason.contains("--max-live-volumes 5"), "{reason}");
        let big = Demand { volumes: 1, bytes: 2 << 20, ..Demand::default() };
        let reason = l.too_big(&big).expect("over the capacity");
        assert_eq!(reason, "needs up to 2 MiB at once for its volumes, more than the 1 MiB the plugin reports available (GetCapacity)");
        let queue = Queue::new(&l, [(0, big), (1, publishing(&[1], 1))]);
        assert_eq!(queue.pending[0].1, Demand::default());
        assert!(queue.pending[0].2.is_some() && queue.pending[1].2.is_none());
    }

    #[test]
    fn the_smaller_of_the_flag_and_get_capacity_holds_and_shared_nodes_share_a_limit() {
        let mut fp = fingerprint(2);
        fp.nodes[1].node_id = fp.nodes[0].node_id.clone();
        fp.nodes[0].max_volumes_per_node = 3;
        let config = BudgetConfig { max_live_bytes: Some(100), ..BudgetConfig::default() };
        let l = Limits::new(&fp, &config, 4, Some(1000));
        assert!(l.too_big(&Demand { bytes: 101, ..Demand::default() }).unwrap().contains("--max-live-bytes"));
        // Two endpoints of one node: their publications add up against its one limit.
        assert!(l.too_big(&publishing(&[2, 2], 2)).unwrap().contains("4 volumes published"));
        assert_eq!(l.too_big(&publishing(&[2, 1], 2)), None);
    }

    /// Many scenarios with random demands run through the scheduler at once: at no time do
    /// the running ones together exceed a limit or change a pool one of them holds
    /// exclusively, and every one runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_scenarios_never_exceed_a_budget() {
        let budget = Budget::new(limits(&[2, 3], Some(4), Some(60), 8), DEFAULT_CONTENTION_TIMEOUT);
        let mut rng = 7u64;
        let mut random = |n: u32| {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((rng >> 33) % u64::from(n)) as u32
        };
        let demands: Vec<Demand> = (0..60)
            .map(|_| {
                let mut d = publishing(&[random(4), random(5)], random(6));
                d.alone = random(10) == 0;
                d.changes = [Pool::Volumes, Pool::Snapshots].into_iter().filter(|_| random(2) == 0).collect();
                if random(6) == 0 {
                    d.exclusive = d.changes.iter().copied().take(1).collect();
                }
                d
            })
            .collect();
        // Per pool (0 volumes, 1 snapshots): scenarios changing it and holding it exclusively
        // now, and how often one started beside the other.
        let pools = Arc::new(Mutex::new(([0u32; 2], [0u32; 2], 0u32)));
        let index = |p: &Pool| usize::from(*p == Pool::Snapshots);
        let mut queue = Queue::new(budget.limits(), demands.iter().cloned().enumerate());
        let oversize = queue.pending.iter().filter(|p| p.2.is_some()).count();
        let use_ = Arc::new([(); 5].map(|()| AtomicU32::new(0)));
        let peak = Arc::new([(); 5].map(|()| AtomicU32::new(0)));
        let mut tasks = tokio::task::JoinSet::new();
        let mut started = 0;
        while let Some(ticket) = budget.next(&mut queue).await {
            started += 1;
            let d = if ticket.too_big.is_some() { Demand::default() } else { demands[ticket.index].clone() };
            let amounts = [
                d.publish.first().copied().unwrap_or(0),
                d.publish.get(1).copied().unwrap_or(0),
                d.volumes,
                u32::try_from(d.bytes).unwrap(),
                1 + 100 * u32::from(d.alone),
            ];
            let (use_, peak, pools) = (use_.clone(), peak.clone(), pools.clone());
            let (changes, exclusive): (Vec<usize>, Vec<usize>) =
                (d.changes.iter().map(index).collect(), d.exclusive.iter().map(index).collect());
            tasks.spawn(async move {
                for (i, n) in amounts.iter().enumerate() {
                    let now = use_[i].fetch_add(*n, Ordering::SeqCst) + n;
                    peak[i].fetch_max(now, Ordering::SeqCst);
                }
                {
                    let (changing, held, clashes) = &mut *pools.lock().unwrap();
                    *clashes += changes.iter().filter(|&&p| held[p] > 0).count() as u32;
                    *clashes += exclusive.iter().filter(|&&p| changing[p] > 0).count() as u32;
                    changes.iter().for_each(|&p| changing[p] += 1);
                    exclusive.iter().for_each(|&p| held[p] += 1);
                }
                tokio::time::sleep(Duration::from_millis(u64::from(amounts[2]) + 1)).await;
                {
                    let (changing, held, _) = &mut *pools.lock().unwrap();
                    changes.iter().for_each(|&p| changing[p] -= 1);
                    exclusive.iter().for_each(|&p| held[p] -= 1);
                }
                for (i, n) in amounts.iter().enumerate() {
                    use_[i].fetch_sub(*n, Ordering::SeqCst);
                }
                drop(ticket);
            });
        }
        while tasks.join_next().await.is_some() {}
        assert_eq!(started, 60);
        assert!(oversize > 0, "the random demands include some over a limit");
        let peaks: Vec<u32> = peak.iter().map(|p| p.load(Ordering::SeqCst)).collect();
        assert!(peaks[0] <= 2 && peaks[1] <= 3 && peaks[2] <= 4 && peaks[3] <= 60, "{peaks:?}");
        // Jobs: at most 8 at once, and an alone scenario (101) never beside another.
        assert!(peaks[4] <= 8 || peaks[4] == 101, "{peaks:?}");
        assert!(peaks[0] == 2 && peaks[2] == 4, "the budget is used up to its limit: {peaks:?}");
        assert!(demands.iter().any(|d| !d.exclusive.is_empty()), "the random demands include exclusive ones");
        assert_eq!(pools.lock().unwrap().2, 0, "a scenario changed a pool another held exclusively");
    }

    #[tokio::test]
    async fn extra_leases_take_what_is_left_and_give_it_back() {
        let budget = Budget::new(limits(&[], Some(2), None, 8), DEFAULT_CONTENTION_TIMEOUT);
        let a = budget.try_extra(Demand::volume(1)).expect("room for one");
        let b = budget.try_extra(Demand::volume(1)).expect("room for two");
        assert!(budget.try_extra(Demand::volume(1)).is_none());
        assert!(budget.others_can_release(a.id()));
        drop(b);
        assert!(!budget.others_can_release(a.id()));
        assert!(budget.try_extra(Demand::volume(1)).is_some());
    }

    fn exhausted(rpc: &str, message: &str, code: Code) -> RpcError {
        RpcError {
            rpc: rpc.to_owned(),
            code,
            message: message.to_owned(),
            elapsed: Duration::ZERO,
            origin: ErrorOrigin::Plugin,
        }
    }

    /// RESOURCE_EXHAUSTED while another lease holds something is retried once it is
    /// released; with nothing else held it is returned at once (judged as it is).
    #[tokio::test]
    async fn contention_is_retried_after_a_release() {
        let budget = Budget::new(limits(&[], None, None, 8), DEFAULT_CONTENTION_TIMEOUT);
        let me = budget.try_extra(Demand::volume(1)).unwrap();
        let other = budget.try_extra(Demand::volume(1)).unwrap();
        let calls = AtomicU32::new(0);
        let holder = std::sync::Mutex::new(Some(other));
        let (answer, retried) = budget
            .retry_contention(Some(me.id()), || async {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                if n < 2 {
                    // The other holder lets go while we are answered RESOURCE_EXHAUSTED.
                    if n == 1 {
                        holder.lock().unwrap().take();
                    }
                    Err(exhausted("CreateVolume", "no room", Code::ResourceExhausted))
                } else {
                    Ok(())
                }
            })
            .await;
        assert!(answer.is_ok());
        assert_eq!(retried.map(|r| (r.times, r.code)), Some((2, None)));

        // Nothing else held: no retry, the answer as it came.
        let calls = AtomicU32::new(0);
        let (answer, retried) = budget
            .retry_contention(Some(me.id()), || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(exhausted("CreateVolume", "no room", Code::ResourceExhausted))
            })
            .await;
        assert_eq!(answer.unwrap_err().code, Code::ResourceExhausted);
        assert_eq!((calls.load(Ordering::SeqCst), retried), (1, None));
    }

    #[tokio::test]
    async fn contention_that_outlasts_the_timeout_says_how_it_was_retried() {
        let budget = Budget::new(limits(&[], None, None, 8), Duration::from_millis(250));
        let me = budget.try_extra(Demand::volume(1)).unwrap();
        let _other = budget.try_extra(Demand::volume(1)).unwrap();
        let (answer, retried) = budget
            .retry_contention(Some(me.id()), || async {
                Err::<(), _>(exhausted("NodeStageVolume", "operation pending for volume", Code::Aborted))
            })
            .await;
        assert_eq!(answer.unwrap_err().code, Code::Aborted);
        let retried = retried.expect("retried");
        assert!(retried.times >= 2 && retried.over >= Duration::from_millis(250), "{retried:?}");
        assert_eq!(retried.code, Some(Code::Aborted));
        assert!(retried.note().starts_with(&format!("retried {} time(s) over", retried.times)));
        // The bound that ended the wait is named with the flag that sets it.
        assert!(retried.timed_out, "{retried:?}");
        assert!(retried.note().ends_with("until the wait's bound ran out: waited 250ms (--contention-timeout)"), "{}", retried.note());
        assert!(!is_contention(Code::Aborted, "invalid starting token"));
    }

    /// A create that fails for lack of space, whatever the code, is retried while others hold
    /// space, and judged as it is when nothing else is held. (Broken once by leaving
    /// `is_no_space` out of `retry_contention`: the first assertion failed with 1 call.)
    #[tokio::test]
    async fn no_space_with_another_code_is_contention_only_while_others_hold() {
        let message = "failed to allocate: fallocate: no space left on device";
        assert!(is_no_space("CreateVolume", Code::Unknown, message));
        assert!(is_no_space("CreateSnapshot", Code::Internal, "ENOSPC"));
        assert!(!is_no_space("CreateVolume", Code::OutOfRange, message), "a verdict code about the request");
        assert!(!is_no_space("DeleteVolume", Code::Unknown, message), "deleting takes no space");
        assert!(!is_no_space("CreateVolume", Code::Internal, "database locked"));

        let budget = Budget::new(limits(&[], None, None, 8), Duration::from_secs(5));
        let me = budget.try_extra(Demand::volume(1)).unwrap();
        let other = budget.try_extra(Demand::volume(1)).unwrap();
        let calls = Arc::new(AtomicU32::new(0));
        let releaser = {
            let budget = budget.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                drop(other);
                let _ = budget;
            })
        };
        let (answer, retried) = budget
            .retry_contention(Some(me.id()), || {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                async move { if n == 0 { Err(exhausted("CreateVolume", message, Code::Unknown)) } else { Ok(()) } }
            })
            .await;
        releaser.await.unwrap();
        assert!(answer.is_ok(), "retried after the other lease was released");
        assert!(calls.load(Ordering::SeqCst) >= 2 && retried.is_some());

        // Nothing else held: judged at once.
        calls.store(0, Ordering::SeqCst);
        let (answer, retried) = budget
            .retry_contention(Some(me.id()), || {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>(exhausted("CreateVolume", message, Code::Unknown)) }
            })
            .await;
        assert_eq!(answer.unwrap_err().code, Code::Unknown);
        assert_eq!((calls.load(Ordering::SeqCst), retried), (1, None));
    }

    /// Two scenarios each holding a volume and each answered RESOURCE_EXHAUSTED (a plugin
    /// whose pool is full of what it lost): neither can release while it waits, so neither
    /// waits out the contention timeout. Broken once by counting waiting holders as able to
    /// release: the test then ran into its 5 s bound.
    #[tokio::test]
    async fn holders_that_all_wait_for_each_other_stop_waiting() {
        let budget = Budget::new(limits(&[], None, None, 8), Duration::from_secs(120));
        let a = budget.try_extra(Demand::volume(1)).unwrap();
        let b = budget.try_extra(Demand::volume(1)).unwrap();
        let full = || async { Err::<(), _>(exhausted("CreateVolume", "pool is full", Code::ResourceExhausted)) };
        // Each scenario ends (and lets its volume go) once its call gave up.
        let scenario = |lease: Lease| {
            let budget = &budget;
            async move {
                let answer = budget.retry_contention(Some(lease.id()), full).await;
                drop(lease);
                answer
            }
        };
        let both = async { tokio::join!(scenario(a), scenario(b)) };
        let ((first, _), (second, _)) =
            tokio::time::timeout(Duration::from_secs(5), both).await.expect("no wait for a release that cannot come");
        assert_eq!(first.unwrap_err().code, Code::ResourceExhausted);
        assert_eq!(second.unwrap_err().code, Code::ResourceExhausted);
    }
}
