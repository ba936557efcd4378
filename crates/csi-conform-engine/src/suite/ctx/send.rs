//! [`ScenarioCtx::send`], one RPC to the plugin as a pipeline of named stages: prepare
//! (secrets, connection, refusals, scrubbing), serialise, call (with the contention and
//! own-concurrency retries), hear, record (see `record`), settle deletes (see `settle`),
//! track.

use std::time::{Duration, Instant};

use prost_reflect::{DynamicMessage, MethodDescriptor};
use tokio::sync::MutexGuard;
use tonic::Code;

use super::{Answer, Response, ScenarioCtx, Shared};
use crate::{
    client::{Connection, ErrorOrigin, RpcError},
    proto,
    report::{Finding, Severity},
    suite::{
        budget::Retried,
        existing, inflight,
        model::SecretsMode,
        resources::Sending,
    },
};

impl ScenarioCtx {
    /// Sends one RPC: picks the connection, fills secrets, records what it creates and
    /// releases (when `track`). Returns the request as sent and the answer.
    pub(crate) async fn send(
        &mut self,
        method: &MethodDescriptor,
        mut request: DynamicMessage,
        node: Option<usize>,
        secrets: &SecretsMode,
        track: bool,
    ) -> (DynamicMessage, Answer) {
        let key = self.apply_secrets(&mut request, method.name(), secrets);
        let conn = match self.connection(method, node) {
            Ok(c) => c.with_rules(&self.rules),
            Err(e) => return (request, Err(e)),
        };
        // Which node it goes to: the node of the findings about it.
        self.node_calls.sent_to(self.step, method, node, &self.shared.plugin);
        if let Some(why) = self.shared.gone(&conn.endpoint().to_string()) {
            return (request, Err(not_sent(method, Code::Unavailable, why)));
        }
        let shared = self.shared.clone();
        let _serial = serialise(&shared, method, self.overlapping).await;
        if let Err(e) = self.refuse_protected(method, &request) {
            return (request, Err(e));
        }
        self.register_secrets(method, &request);
        let node_index = node.unwrap_or(0);
        let sending =
            if track { self.tracker.sending(method.name(), &request, node_index, key.as_deref()) } else { None };
        let answer = self.call_with_retries(method, &conn, &request).await;
        self.hear(&conn, &answer).await;
        let lost = self.record(method.name(), &request, &answer);
        if track {
            if answer.is_ok() {
                self.settle_step_delete(method.name(), &request, node_index).await;
            }
            self.track(sending, method, &request, &answer, node_index, key.as_deref(), lost);
        }
        (request, answer)
    }

    /// Prepare: a call that would touch one of the volumes the run was told to leave alone
    /// (`--existing-volume`) is not sent; the refusal is the run's error.
    fn refuse_protected(&mut self, method: &MethodDescriptor, request: &DynamicMessage) -> Result<(), RpcError> {
        match existing::refusal(method.name(), request, &self.shared.safety.existing_volumes) {
            Some(why) => {
                self.push(Finding::new(Severity::Error, "protected-volume", why.clone()));
                Err(not_sent(method, Code::Aborted, why))
            }
            None => Ok(()),
        }
    }

    /// Prepare: the request's sensitive values are scrubbed from everything the run writes
    /// from now on; the call is logged, scrubbed.
    fn register_secrets(&self, method: &MethodDescriptor, request: &DynamicMessage) {
        self.shared.safety.scrubber.add(proto::sensitive_values(request));
        tracing::debug!(rpc = method.name(), request = %self.shared.scrub(&proto::to_redacted_json(request)), "call");
    }

    /// Call: sends the request. Contention while this run holds other resources on the plugin
    /// is retried after a release (bounded by --contention-timeout), not judged; ABORTED while
    /// another of this run's calls on the same volume was in flight is the run's own
    /// concurrency (#concurrency): asked again once those calls are done. The note of a call
    /// so retried that still failed is kept for its findings.
    async fn call_with_retries(&mut self, method: &MethodDescriptor, conn: &Connection, request: &DynamicMessage) -> Answer {
        let holder = if self.contention_expected { None } else { Some(self.holder) };
        let volume = inflight::volume_of(request);
        let overlapped = std::sync::atomic::AtomicBool::new(false);
        let started = Instant::now();
        let bound = self.shared.config.budgets.contention_timeout;
        let mut own = 0u32;
        let (answer, retried) = loop {
            let (answer, retried) = self
                .shared
                .budget
                .retry_contention(holder, || async {
                    let call = self.shared.in_flight.begin(volume.as_deref());
                    let answer = if method.is_server_streaming() {
                        conn.call_dynamic_streaming(method, request.clone()).await.map(Response::Stream)
                    } else {
                        conn.call_dynamic(method, request.clone()).await.map(Response::Unary)
                    };
                    overlapped.store(call.is_some_and(|c| c.overlapped()), std::sync::atomic::Ordering::Relaxed);
                    answer
                })
                .await;
            self.rpcs += 1 + retried.map_or(0, |r| u64::from(r.times));
            let ours = holder.is_some()
                && overlapped.load(std::sync::atomic::Ordering::Relaxed)
                && answer.as_ref().err().is_some_and(|e| e.code == Code::Aborted && e.origin == ErrorOrigin::Plugin);
            let left = bound.saturating_sub(started.elapsed());
            if let (Some(volume), true) = (&volume, ours && !left.is_zero()) {
                own += 1;
                tracing::info!(rpc = method.name(), volume, "ABORTED while another call of this run on the volume was in flight: asked again once those are done");
                self.shared.in_flight.idle(volume, left).await;
                continue;
            }
            break (answer, if ours { None } else { retried });
        };
        self.contention = match retried {
            Some(r @ Retried { code: Some(_), .. }) => Some((method.name().to_owned(), r.note())),
            _ if own > 0 && answer.is_err() => {
                Some((method.name().to_owned(), inflight::note(own, started.elapsed(), bound)))
            }
            _ => None,
        };
        answer
    }

    /// Hear: an answer's sensitive values are scrubbed from now on; a connection that did not
    /// answer is tried again (or given up for the run).
    async fn hear(&self, conn: &Connection, answer: &Answer) {
        match answer {
            Ok(response) => {
                response.messages().iter().for_each(|m| self.shared.safety.scrubber.add(proto::sensitive_values(m)))
            }
            Err(e) if e.is_unreachable() => self.shared.lost(conn).await,
            Err(_) => {}
        }
    }

    /// Track: tells the tracker (and so the journal) what the call made or released. Only an
    /// answer from the plugin settles the call: after a timeout, a lost connection or an
    /// undecodable answer, it may have made something.
    #[allow(clippy::too_many_arguments)]
    fn track(
        &mut self,
        sending: Option<Sending>,
        method: &MethodDescriptor,
        request: &DynamicMessage,
        answer: &Answer,
        node: usize,
        key: Option<&str>,
        lost: Option<String>,
    ) {
        let outcome = match answer {
            Ok(Response::Unary(m)) => Some(Ok(m)),
            Ok(Response::Stream(_)) => None,
            Err(e) => Some(Err(e.code)),
        };
        if let Some(outcome) = outcome {
            self.tracker.observe_call(sending.as_ref(), method.name(), request, outcome, node, key);
        }
        let heard = answer.as_ref().err().is_none_or(|e| e.origin == ErrorOrigin::Plugin);
        match &lost {
            Some(why) => self.tracker.lost(sending, why),
            None => self.tracker.answered(sending, heard),
        }
    }
}

/// Serialise: with --orchestrator, ControllerPublishVolume calls never overlap (Nomad and
/// Swarm serialise them) but where a check overlaps them on purpose: an instance, as its
/// orchestrator does (Kubernetes), or `publish-race`, whose subject the overlap is (each runs
/// alone). What overlapping calls break is then filed under that orchestrator, or by the
/// publish race's scenario, alone. The guard is held until the call is answered.
async fn serialise<'a>(shared: &'a Shared, method: &MethodDescriptor, overlapping: bool) -> Option<MutexGuard<'a, ()>> {
    match method.name() {
        "ControllerPublishVolume" if !shared.config.orchestrators.is_empty() && !overlapping => {
            Some(shared.controller_publish.lock().await)
        }
        _ => None,
    }
}

/// A call that is not sent: the harness's own error, never the plugin's answer.
fn not_sent(method: &MethodDescriptor, code: Code, message: String) -> RpcError {
    RpcError { rpc: method.name().to_owned(), code, message, elapsed: Duration::ZERO, origin: ErrorOrigin::Transport }
}
