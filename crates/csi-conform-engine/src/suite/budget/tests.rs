//! Unit tests of the budget scheduler (suite/budget.rs): limits, admission, leases and
//! contention retries.

use std::sync::atomic::{AtomicU32, Ordering};

use super::*;
use crate::{client::ErrorOrigin, suite::settings::tests_support::fingerprint};

/// What `next` decides now: it takes its decision under the lock before it waits for a
/// release, so one poll is the whole answer (pending: it waits), with no timer.
fn next_now(budget: &Arc<Budget>, queue: &mut Queue) -> std::task::Poll<Option<Ticket>> {
    let mut next = std::pin::pin!(budget.next(queue));
    next.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
}

/// What `next` starts now (`None`: the queue is empty); a panic when it would wait, so a
/// scheduler that wrongly holds a scenario back fails at once instead of hanging.
fn start_now(budget: &Arc<Budget>, queue: &mut Queue) -> Option<Ticket> {
    match next_now(budget, queue) {
        std::task::Poll::Ready(ticket) => ticket,
        std::task::Poll::Pending => panic!("next waits"),
    }
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
    let counter = start_now(&budget, &mut queue).expect("the exclusive one starts first");
    assert_eq!(counter.index, 0);
    let beside = start_now(&budget, &mut queue).expect("a scenario that does not change the volumes");
    assert_eq!(beside.index, 3);
    assert_eq!(start_now(&budget, &mut queue).map(|t| t.index), Some(4));
    let waiting = next_now(&budget, &mut queue);
    assert!(waiting.is_pending(), "1 and 2 change the volumes while 0 holds them");
    drop(counter);
    let changer = start_now(&budget, &mut queue).expect("the volumes are free");
    assert_eq!(changer.index, 1);
    // 2 holds the snapshots exclusively, but 3 still changes them.
    let waiting = next_now(&budget, &mut queue);
    assert!(waiting.is_pending(), "3 changes the snapshots");
    drop(beside);
    assert_eq!(start_now(&budget, &mut queue).map(|t| t.index), Some(2));
    assert!(start_now(&budget, &mut queue).is_none());
}

/// Two holders of one pool never run together, even when a demand leaves the pool out of
/// what it changes.
#[tokio::test]
async fn two_holders_of_a_pool_never_run_together() {
    let budget = Budget::new(limits(&[], None, None, 8), DEFAULT_CONTENTION_TIMEOUT);
    let holder = || Demand { exclusive: vec![Pool::Volumes], ..Demand::default() };
    let mut queue = Queue::new(budget.limits(), [(0, holder()), (1, holder())]);
    let first = start_now(&budget, &mut queue).expect("one starts");
    let waiting = next_now(&budget, &mut queue);
    assert!(waiting.is_pending(), "the second holder waits");
    drop(first);
    assert_eq!(start_now(&budget, &mut queue).map(|t| t.index), Some(1));
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

/// Sizes read as a person writes them: whole units only, the largest that divides.
#[test]
fn sizes_are_named_in_the_largest_whole_unit() {
    assert_eq!(human_bytes(0), "0 bytes");
    assert_eq!(human_bytes(1536), "1536 bytes");
    assert_eq!(human_bytes(4096), "4 KiB");
    assert_eq!(human_bytes((1 << 20) + (1 << 10)), "1025 KiB");
    assert_eq!(human_bytes(3 << 30), "3 GiB");
    assert_eq!(human_bytes(1 << 40), "1 TiB");
}

/// A demand exactly at a limit fits; one more of anything does not.
#[test]
fn a_demand_at_a_limit_fits_and_one_more_does_not() {
    let l = limits(&[2], Some(5), Some(100), 8);
    let at = Demand { publish: vec![2], volumes: 5, bytes: 100, ..Demand::default() };
    assert_eq!(l.too_big(&at), None);
    let over = [
        Demand { publish: vec![3], ..at.clone() },
        Demand { volumes: 6, ..at.clone() },
        Demand { bytes: 101, ..at.clone() },
    ];
    for d in over {
        assert!(l.too_big(&d).is_some(), "{d:?}");
    }
}

/// `--jobs` bounds the scenarios at once, and an `alone` scenario starts only when nothing
/// runs and keeps everything else out until it ends. Decided by polling `next` once: no timer.
#[test]
fn jobs_bound_the_scenarios_at_once_and_alone_means_alone() {
    let budget = Budget::new(limits(&[], None, None, 2), DEFAULT_CONTENTION_TIMEOUT);
    let alone = Demand { alone: true, ..Demand::default() };
    let mut queue =
        Queue::new(budget.limits(), [(0, alone.clone()), (1, Demand::default()), (2, alone), (3, Demand::default())]);
    let first = start_now(&budget, &mut queue).unwrap();
    assert_eq!(first.index, 0, "alone, with nothing running");
    assert!(next_now(&budget, &mut queue).is_pending(), "nothing beside an alone scenario");
    drop(first);
    let one = start_now(&budget, &mut queue).unwrap();
    let three = start_now(&budget, &mut queue).unwrap();
    assert_eq!((one.index, three.index), (1, 3), "2 is alone: it waits, 3 passes it");
    drop(one);
    assert!(next_now(&budget, &mut queue).is_pending(), "2 waits for 3 to end");
    drop(three);
    assert_eq!(start_now(&budget, &mut queue).unwrap().index, 2);

    // Two jobs at most: a third waits until one ends.
    let mut queue = Queue::new(budget.limits(), (0..3).map(|i| (i, Demand::default())));
    let a = start_now(&budget, &mut queue).unwrap();
    let _b = start_now(&budget, &mut queue).unwrap();
    assert!(next_now(&budget, &mut queue).is_pending(), "--jobs 2");
    drop(a);
    assert_eq!(start_now(&budget, &mut queue).unwrap().index, 2);
    assert!(start_now(&budget, &mut queue).is_none(), "the queue is empty");
}

/// Each limit counts what the leases hold and gets back exactly what one lets go: the
/// publications on a node, the bytes, and the live volumes.
#[test]
fn each_limit_counts_what_is_held_and_gets_it_back() {
    let budget = Budget::new(limits(&[1, 0], Some(3), Some(25), 8), DEFAULT_CONTENTION_TIMEOUT);
    let on = |publish: &[u32], bytes: i64| Demand { publish: publish.to_vec(), volumes: 1, bytes, ..Demand::default() };
    let a = budget.try_extra(on(&[1, 0], 10)).expect("room on node 0");
    assert!(budget.try_extra(on(&[1], 0)).is_none(), "node 0 allows one publication");
    let b = budget.try_extra(on(&[0, 5], 10)).expect("node 1 reports no limit");
    assert!(budget.try_extra(on(&[], 6)).is_none(), "26 bytes of 25");
    let c = budget.try_extra(on(&[], 5)).expect("exactly the 25 bytes");
    assert!(budget.try_extra(Demand::volume(0)).is_none(), "a fourth live volume");
    drop(c);
    drop(a);
    let a = budget.try_extra(on(&[1], 15)).expect("node 0's publication and 15 bytes are back");
    assert!(budget.try_extra(on(&[], 1)).is_none(), "25 bytes held again");
    drop((a, b));
    assert!(budget.try_extra(on(&[1, 0], 25)).is_some(), "everything is back");
}

/// Every lease has its own id, so a holder is never mistaken for another.
#[test]
fn every_lease_has_its_own_id() {
    let budget = Budget::new(limits(&[], None, None, 8), DEFAULT_CONTENTION_TIMEOUT);
    let leases: Vec<Lease> = (0..3).map(|_| budget.try_extra(Demand::volume(1)).unwrap()).collect();
    let ids: std::collections::BTreeSet<u64> = leases.iter().map(Lease::id).collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(budget.others_can_release(leases[2].id()));
}

/// A holder that waits in two contention retries at once (two calls of one scenario) is
/// still waiting after the first ends, and can release again only after both have.
#[test]
fn a_holder_waits_until_its_last_retry_ends() {
    let budget = Budget::new(limits(&[], None, None, 8), DEFAULT_CONTENTION_TIMEOUT);
    let (a, b) = (budget.try_extra(Demand::volume(1)).unwrap(), budget.try_extra(Demand::volume(1)).unwrap());
    budget.waiting(a.id(), true);
    budget.waiting(a.id(), true);
    assert!(!budget.others_can_release(b.id()), "a waits");
    budget.waiting(a.id(), false);
    assert!(!budget.others_can_release(b.id()), "a still waits in its other retry");
    budget.waiting(a.id(), false);
    assert!(budget.others_can_release(b.id()), "a waits no more");
}

/// The wait between retries doubles from 100 ms, so a plugin that stays contended is asked
/// a handful of times over a 400 ms bound (0, 100, 300, 400 ms), not hammered. A slow
/// machine only makes fewer calls; the bound is never reached early. (Broken once: a halving
/// wait made hundreds.)
#[tokio::test]
async fn retries_back_off_doubling() {
    let budget = Budget::new(limits(&[], None, None, 8), Duration::from_millis(400));
    let me = budget.try_extra(Demand::volume(1)).unwrap();
    let _other = budget.try_extra(Demand::volume(1)).unwrap();
    let calls = AtomicU32::new(0);
    let (answer, retried) = budget
        .retry_contention(Some(me.id()), || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(exhausted("CreateVolume", "no room", Code::ResourceExhausted))
        })
        .await;
    assert_eq!(answer.unwrap_err().code, Code::ResourceExhausted);
    let calls = calls.load(Ordering::SeqCst);
    assert!(calls <= 5, "{calls} calls");
    if calls > 1 {
        assert_eq!(retried.map(|r| (r.times + 1, r.timed_out)), Some((calls, true)));
    }
}

/// The byte budget is what GetCapacity reports for the run's capability (the reference
/// plugin, over a socket): a capability the plugin cannot serve gets 0 available, which is
/// no budget (0 may mean "unknown"), and so does a controller without GET_CAPACITY.
#[tokio::test]
async fn the_byte_budget_is_get_capacitys_answer_for_the_runs_capability() {
    use crate::{
        client::{ClientOptions, Endpoint},
        fingerprint::ControllerInfo,
    };
    let dir = tempfile::tempdir().unwrap();
    let endpoint = Endpoint::Unix(dir.path().join("c.sock"));
    let config = crate::reference::Config { capacity: 6 << 20, ..crate::reference::Config::default() };
    let plugin = crate::reference::spawn(config, &endpoint.to_string()).await.unwrap();
    let conn = Connection::connect(endpoint.clone(), ClientOptions::default()).await.unwrap();
    let mut fp = fingerprint(1);
    fp.controller = Some(ControllerInfo {
        endpoint,
        capabilities: [ControllerCapability::GetCapacity].into_iter().collect(),
    });
    let mount = crate::suite::builtin_vars::wire_capability(false);
    let mut unknown_fs = mount.clone();
    if let Some(v1::volume_capability::AccessType::Mount(m)) = &mut unknown_fs.access_type {
        m.fs_type = "no-such-fs".into();
    }
    let (config, parameters) = (BudgetConfig::default(), BTreeMap::new());
    let read = |fp, capability| Limits::read(Some(&conn), fp, &config, 4, &parameters, capability);
    let reported = Some((6 << 20, "the plugin reports available (GetCapacity)".to_owned()));
    assert_eq!(read(&fp, mount.clone()).await.bytes, reported);
    assert_eq!(read(&fp, unknown_fs).await.bytes, None, "0 available is no budget");
    let mut without = fp.clone();
    without.controller.as_mut().unwrap().capabilities.clear();
    assert_eq!(read(&without, mount.clone()).await.bytes, None, "GET_CAPACITY not advertised");
    let none = Limits::read(None, &fp, &config, 4, &parameters, mount).await;
    assert_eq!((none.bytes, none.jobs), (None, 4));
    plugin.shutdown().await.unwrap();
}

/// An object deleted (answered OK) that no look has seen gone yet may still hold room on the
/// plugin: until it is seen, a lone holder may wait for it; seeing it gone is a release, and
/// more sightings than deletes never wrap the count.
#[test]
fn a_delete_not_yet_seen_gone_is_room_that_comes_back() {
    let budget = Budget::new(limits(&[], None, None, 8), DEFAULT_CONTENTION_TIMEOUT);
    let me = budget.try_extra(Demand::volume(1)).unwrap();
    let releases = || budget.releases.load(Ordering::SeqCst);
    assert!(!budget.others_can_release(me.id()), "nothing else is held");
    budget.delete_unseen();
    assert!(budget.others_can_release(me.id()), "the deleted object's room may come back");
    let before = releases();
    budget.delete_seen();
    assert_eq!(releases(), before + 1, "seen gone: a release for whoever waits");
    assert!(!budget.others_can_release(me.id()));
    budget.delete_seen();
    assert!(!budget.others_can_release(me.id()), "one sighting too many");
}

/// A create refused for room while an object deleted OK is not yet seen gone (a plugin
/// that deletes in the background) is contention: the verifier is asked to look at once,
/// and the call is retried, not judged at once. On the current-thread runtime the task that
/// decides runs only once the retrier waits, so without the unseen delete the first answer
/// is final, and without the request to look the task is still waiting when the retry ends.
#[tokio::test]
async fn no_space_while_a_delete_is_unseen_is_retried_once_it_is_seen() {
    let message = "failed to allocate: fallocate: no space left on device";
    let budget = Budget::new(limits(&[], None, None, 8), Duration::from_secs(600));
    let me = budget.try_extra(Demand::volume(1)).unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let refused_then_ok = || {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        async move { if n == 0 { Err(exhausted("CreateVolume", message, Code::Unknown)) } else { Ok(()) } }
    };

    budget.delete_unseen();
    assert!(budget.others_can_release(me.id()), "an unseen delete may still hold room");
    // The verifier's part: it looks when asked to (the retrier asks as it starts to wait).
    let decider = {
        let budget = budget.clone();
        tokio::spawn(async move {
            budget.sighting_wanted().await;
            budget.delete_seen();
        })
    };
    let (answer, retried) = budget.retry_contention(Some(me.id()), refused_then_ok).await;
    assert!(decider.is_finished(), "the retrier asked for a look at the unseen delete");
    assert!(answer.is_ok(), "retried once the deleted object was seen");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(retried.map(|r| r.times), Some(1));
    assert!(!budget.others_can_release(me.id()), "every delete seen, nothing else held");

    // Seen, and nothing else held: judged at once.
    calls.store(0, Ordering::SeqCst);
    let (answer, retried) = budget.retry_contention(Some(me.id()), refused_then_ok).await;
    assert_eq!(answer.unwrap_err().code, Code::Unknown);
    assert_eq!((calls.load(Ordering::SeqCst), retried.is_none()), (1, true));
}
