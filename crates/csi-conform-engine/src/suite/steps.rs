//! Running a scenario's steps: call steps with their expectations, saves, repeats and
//! polls, assertions, check steps (dispatched to the named checks) and property steps.
//! Free functions over the scenario context; the runner calls in, never the reverse.

use std::time::Instant;

use prost_reflect::{DynamicMessage, ReflectMessage};
use tonic::Code;

use super::{
    assert::{self, AssertError},
    checks,
    ctx::{CheckOutcome, Answer, Flow, Response, ScenarioCtx, call_finding, ok_summary, rpc_error_finding, unreachable_finding},
    model::*,
    patience,
    property,
    request::build_request,
    vars::Val,
};
use crate::{
    client::{ErrorOrigin, Pacer},
    proto,
    report::{Finding, Severity},
};

pub(crate) async fn run_steps(ctx: &mut ScenarioCtx, steps: &[Step]) -> Flow {
    for (i, step) in steps.iter().enumerate() {
        if let Some(reason) = ctx.stopped() {
            ctx.push(Finding::new(Severity::Error, "interrupted", format!("stopped before step {i}: {reason}")));
            return Flow::Stop;
        }
        if !step.when.iter().all(|c| ctx.fingerprint().supports(c.capability) != c.negated) {
            continue;
        }
        ctx.begin_step(i, step.name.clone(), step.spec.clone());
        // A delete by the last step, when it is one call, goes to the run's verifier as
        // teardown's do: nothing later can depend on the object being gone. (A check's calls
        // are not deferred: its own later calls may depend on it.)
        let defer_steps = ctx.defer_steps();
        if i + 1 == steps.len() && matches!(step.action, Action::Call(_)) {
            ctx.set_defer_steps(defer_steps || ctx.defer_teardown());
        }
        let flow = match &step.action {
            Action::Call(call) => call_step(ctx, call).await,
            Action::Assert(a) => assert_step(ctx, a),
            Action::Check(c) => check_step(ctx, c).await,
            Action::Property(p) => property::property_step(ctx, p, i).await,
        };
        ctx.set_defer_steps(defer_steps);
        ctx.end_step();
        if flow != Flow::Continue {
            return flow;
        }
        // An answer nothing can follow (a creation without a usable id) ends the scenario.
        if ctx.halted() {
            return Flow::Stop;
        }
    }
    ctx.end_steps();
    Flow::Continue
}

pub(crate) fn assert_step(ctx: &mut ScenarioCtx, step: &AssertStep) -> Flow {
    let root = Val::Null;
    match assert::check_all(&step.only_if, &root, ctx.vars()) {
        Ok(()) => {}
        // The rule does not bind this plugin: the step is passed over.
        Err(AssertError::Failed(_)) => return Flow::Continue,
        Err(e) => return assertion_failed(ctx, e, step.otherwise, None, None, None),
    }
    match assert::check_all(&step.assertions, &root, ctx.vars()) {
        Ok(()) => Flow::Continue,
        Err(e) => assertion_failed(ctx, e, step.otherwise, None, None, None),
    }
}

/// Records a failed assertion; `expect` (of a call step) supplies the kind and reason
/// of a miss.
pub(crate) fn assertion_failed(
    ctx: &mut ScenarioCtx,
    e: AssertError,
    otherwise: Severity,
    rpc: Option<&str>,
    request: Option<&DynamicMessage>,
    expect: Option<&Expect>,
) -> Flow {
    let (severity, kind) = match &e {
        AssertError::Failed(_) if otherwise == Severity::Pass => (otherwise, crate::report::NOTE_KIND),
        AssertError::Failed(_) => (otherwise, expect.map_or("assertion", |x| x.kind_or("assertion"))),
        AssertError::Invalid(_) => (Severity::Error, "suite"),
    };
    let f = match (rpc, request) {
        (Some(rpc), Some(request)) => {
            let message = format!("{rpc} response: {}", e.message());
            let message = match (&e, expect) {
                (AssertError::Failed(_), Some(x)) => x.explain(message),
                _ => message,
            };
            call_finding(severity, kind, message, rpc, request)
        }
        _ => Finding::new(severity, kind, e.message()),
    };
    ctx.push(f);
    flow_after(severity)
}

pub(crate) async fn check_step(ctx: &mut ScenarioCtx, step: &CheckStep) -> Flow {
    let args = match ctx.eval_args(&format!("check {}", step.check.name), &step.args) {
        Ok(args) => args,
        Err(flow) => return flow,
    };
    let before = ctx.findings().iter().filter(|f| f.severity >= Severity::Fail).count();
    let def = checks::find(step.check.name).expect("a check step names a registered check");
    match (def.run)(ctx, args).await {
        CheckOutcome::Skip(reason) => Flow::Skip(reason),
        CheckOutcome::Stop => Flow::Stop,
        CheckOutcome::Done(outputs) => {
            let failed = ctx.findings().iter().filter(|f| f.severity >= Severity::Fail).count() > before;
            let root = Val::Map(outputs);
            if save(ctx, &step.save, &root).is_err() || failed {
                return Flow::Stop;
            }
            Flow::Continue
        }
    }
}

pub(crate) fn save(ctx: &mut ScenarioCtx, saves: &[Save], root: &Val) -> Result<(), ()> {
    for save in saves {
        match root.get(save.path.segs()) {
            Ok(Val::Null) => {
                ctx.push(Finding::new(
                    Severity::Fail,
                    "save",
                    format!("nothing to save as {}: {} is absent", save.var, save.path),
                ));
                return Err(());
            }
            Ok(v) => ctx.vars_mut().insert(save.var.clone(), v),
            Err(e) => {
                ctx.push(Finding::new(Severity::Error, "suite", format!("cannot save {}: {e}", save.var)));
                return Err(());
            }
        }
    }
    Ok(())
}

/// Before a NodeStageVolume at the scenario's own staging path: the directory made again if
/// an unstage removed it, as the CO must ("The CO SHALL be responsible for creating the
/// directory if it does not exist", #nodestagevolume); a plugin that counts on that is right.
/// Not where a create command makes staging paths (the run cannot remake one there).
fn remake_staging(ctx: &ScenarioCtx, request: &DynamicMessage) {
    use prost_reflect::ReflectMessage;
    let staging = &ctx.paths().staging;
    if request.descriptor().name() == "NodeStageVolumeRequest"
        && ctx.path_settings().create_staging_cmd.is_none()
        && proto::str_at(request, &["staging_target_path"]).is_some_and(|p| std::path::Path::new(&p) == staging)
        && !staging.exists()
    {
        let _ = std::fs::create_dir_all(staging);
    }
}

pub(crate) async fn call_step(ctx: &mut ScenarioCtx, call: &Call) -> Flow {
    let request = match build_request(&call.method, &call.request, ctx.vars()) {
        Ok(r) => r,
        Err(e) => {
            let mut f = Finding::new(
                Severity::Error,
                "request",
                format!("cannot build the {} request: {e}", call.method.name()),
            );
            f.rpc = Some(call.method.name().to_owned());
            ctx.push(f);
            return Flow::Stop;
        }
    };
    let times = match call.repeat {
        Repeat::Times(n) => n.max(1),
        Repeat::Idempotency => ctx.idempotency_count().max(1),
    };
    remake_staging(ctx, &request);
    let poll = call.poll.as_ref();
    // A poll looks again at the plugin's own pace, backing off to the step's interval, until
    // its bound (see `patience`); it ends at the first conclusive answer.
    let mut pacer = poll.map(|p| Pacer::new(ctx.latency(call.method.name(), call.node), p.interval));
    let bound = poll.map(|p| patience::ready_bound(ctx.waits(), Some(p.timeout)));
    let deadline = bound.as_ref().map(|(within, _)| Instant::now() + *within);
    let mut first: Option<Val> = None;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        if attempt > 1
            && let Some(reason) = ctx.stopped()
        {
            let rpc = call.method.name();
            let message = format!("stopped before call {attempt} of {rpc}: {reason}");
            ctx.push(call_finding(Severity::Error, "interrupted", message, rpc, &request));
            return Flow::Stop;
        }
        ctx.expect_contention([Code::ResourceExhausted, Code::Aborted].iter().any(|c| call.expect.codes.names(*c)));
        let (sent, answer) = ctx.send(&call.method, request.clone(), call.node, &call.secrets, true).await;
        ctx.expect_contention(false);
        let root = match judge(ctx, call, &sent, answer) {
            Judged::Response(r) => r.to_val(),
            Judged::Accepted if attempt >= times => return Flow::Continue,
            Judged::Accepted => continue,
            Judged::Flow(flow) => return flow,
        };
        if let (Some(p), Some(deadline), Some(pacer), Some(bound)) = (poll, deadline, pacer.as_mut(), bound.as_ref()) {
            match poll_condition(ctx, call, p, &root, &sent) {
                Some(Flow::Continue) => return finish_call(ctx, call, &root),
                Some(flow) => return flow,
                None => match pacer.pause(deadline.saturating_duration_since(Instant::now())) {
                    Some(pause) => {
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                    None => return poll_ran_out(ctx, call, p, bound, &root, &sent),
                },
            }
        }
        match &first {
            None => first = Some(root),
            Some(first_root) if call.repeat_compare => {
                if let Some((path, a, b)) = assert::difference(first_root, &root) {
                    let at = if path.is_empty() { String::new() } else { format!(" at {path}") };
                    let rpc = call.method.name();
                    let message = format!(
                        "{rpc} call {attempt} of {times} answered differently from the first{at}: {b} instead of {a}"
                    );
                    let mut f = call_finding(call.expect.otherwise, "not-idempotent", message, rpc, &sent);
                    f.expected = Some(a.to_string());
                    f.got = Some(b.to_string());
                    ctx.push(f);
                    if flow_after(call.expect.otherwise) == Flow::Stop {
                        return Flow::Stop;
                    }
                }
            }
            Some(_) => {}
        }
        if attempt >= times {
            let saved = first.take().unwrap_or(Val::Null);
            return finish_call(ctx, call, &saved);
        }
    }
}

/// Checks a poll's condition: `Some(Continue)` when it holds, `Some(other)` when the
/// scenario must stop (a bad assertion), `None` when it does not hold yet.
pub(crate) fn poll_condition(
    ctx: &mut ScenarioCtx,
    call: &Call,
    poll: &Poll,
    root: &Val,
    sent: &DynamicMessage,
) -> Option<Flow> {
    match assert::check_all(&poll.until, root, ctx.vars()) {
        Ok(()) => Some(Flow::Continue),
        Err(e @ AssertError::Invalid(_)) => {
            Some(assertion_failed(ctx, e, Severity::Error, Some(call.method.name()), Some(sent), None))
        }
        Err(AssertError::Failed(_)) => None,
    }
}

/// A poll whose condition still did not hold at its bound, looked at last at the bound: the
/// spec sets no deadline on what a poll waits for (readiness), so the step is inconclusive,
/// naming the flag that bounds it, and the scenario stops (what it goes on to needs the
/// condition).
fn poll_ran_out(
    ctx: &mut ScenarioCtx,
    call: &Call,
    poll: &Poll,
    (within, by): &(std::time::Duration, String),
    root: &Val,
    sent: &DynamicMessage,
) -> Flow {
    let rpc = call.method.name();
    let unmet = match assert::check_all(&poll.until, root, ctx.vars()) {
        Err(AssertError::Failed(e)) => e.to_string(),
        _ => String::new(),
    };
    let message = format!(
        "{rpc} did not meet the poll condition within {} ({by}): {unmet}; the spec sets this no deadline, so \
         the step is inconclusive, not failed",
        crate::client::human_duration(*within)
    );
    let mut f = patience::ran_out(message);
    f.rpc = Some(rpc.to_owned());
    f.request = Some(proto::to_redacted_json(sent));
    ctx.push(f);
    Flow::Stop
}

pub(crate) fn finish_call(ctx: &mut ScenarioCtx, call: &Call, root: &Val) -> Flow {
    match save(ctx, &call.save, root) {
        Ok(()) => Flow::Continue,
        Err(()) => Flow::Stop,
    }
}

/// Judges an answer against the step's expectation.
pub(crate) fn judge(ctx: &mut ScenarioCtx, call: &Call, sent: &DynamicMessage, answer: Answer) -> Judged {
    let rpc = call.method.name();
    let code = match &answer {
        Ok(_) => Code::Ok,
        Err(e) => e.code,
    };
    if let Err(e) = &answer {
        if e.is_unreachable() {
            ctx.push(unreachable_finding(e, sent));
            return Judged::Flow(Flow::Stop);
        }
        if e.origin == ErrorOrigin::Decode {
            let message = format!(
                "{rpc} answered with a message that could not be decoded (malformed, or over --max-message-size): {}",
                e.message
            );
            ctx.push(rpc_error_finding(e, sent, Severity::Fail, "bad-response", message, None));
            return Judged::Flow(Flow::Stop);
        }
        if e.origin == ErrorOrigin::Deadline {
            let waited = crate::client::human_duration(e.elapsed);
            let message = format!("{rpc} did not answer within {waited} (--rpc-timeout); the plugin may be hung");
            ctx.push(rpc_error_finding(e, sent, Severity::Fail, "timeout", message, None));
            return Judged::Flow(Flow::Stop);
        }
    }
    if let Ok(response) = &answer {
        let mut worst = Severity::Pass;
        for problem in response.messages().iter().flat_map(proto::impossible_values) {
            // A size below zero is nonsense; an unknown enum number may come from a newer
            // spec version, which a CO must tolerate.
            let severity = match problem.kind {
                proto::Impossible::Negative(_) => Severity::Fail,
                proto::Impossible::UndefinedEnum { .. } => Severity::Warn,
            };
            worst = worst.max(severity);
            let message = format!("{rpc} answered {problem}");
            ctx.push(call_finding(severity, "impossible-value", message, rpc, sent));
        }
        if worst >= Severity::Fail {
            return Judged::Flow(Flow::Stop);
        }
    }
    if !call.expect.codes.accepts(code) {
        if let Some(skip) = call.skip_on.as_ref().filter(|s| s.codes.contains(&code)) {
            let why = skip.reason.clone().unwrap_or_else(|| "the plugin cannot do this".to_owned());
            let message = answer.as_ref().err().map(|e| e.message.clone()).unwrap_or_default();
            let detail = if message.is_empty() { String::new() } else { format!(": {message}") };
            return Judged::Flow(Flow::Skip(format!(
                "{why} ({rpc} answered {}{detail})",
                crate::client::code_name(code)
            )));
        }
        if !call.expect.codes.names(code)
            && let Some(reason) = ctx.advertised_but_unimplemented(rpc, code)
        {
            return Judged::Flow(Flow::Skip(reason));
        }
        if let Err(e) = &answer
            && let Some(reason) = other_fault(call, sent, e)
        {
            return Judged::Flow(Flow::Skip(reason));
        }
        let expected = call.expect.codes.to_string();
        let mut message = format!("{rpc} answered {}, expected {expected}", crate::client::code_name(code));
        if let Ok(response) = &answer {
            message.push_str(&ok_summary(response));
        }
        let message = call.expect.explain(message);
        let kind = call.expect.kind_or("unexpected-code");
        let f = match &answer {
            Err(e) => rpc_error_finding(e, sent, call.expect.otherwise, kind, message, Some(expected)),
            Ok(_) => {
                let mut f = call_finding(call.expect.otherwise, kind, message, rpc, sent);
                (f.expected, f.got) = (Some(expected), Some("OK".to_owned()));
                f
            }
        };
        ctx.push(f);
        reached_by_kind(ctx, call);
        return Judged::Flow(flow_after(call.expect.otherwise));
    }
    reached_by_kind(ctx, call);
    let Ok(response) = answer else {
        return Judged::Accepted;
    };
    let root = response.to_val();
    match assert::check_all(&call.expect.fields, &root, ctx.vars()) {
        Ok(()) => Judged::Response(response),
        Err(e) => {
            let warn = matches!(e, AssertError::Failed(_)) && matches!(call.expect.otherwise, Severity::Warn | Severity::Pass);
            let flow = assertion_failed(ctx, e, call.expect.otherwise, Some(rpc), Some(sent), Some(&call.expect));
            if warn { Judged::Response(response) } else { Judged::Flow(flow) }
        }
    }
}

/// A step whose expectation names the kind its finding would have (`expect.kind`) was judged:
/// the matrix rows that kind feeds (`ids::FED_BY`) were got to, whatever else the scenario
/// finds (a YAML scenario's counterpart of a check's `ScenarioCtx::reached`).
fn reached_by_kind(ctx: &mut ScenarioCtx, call: &Call) {
    let Some(kind) = call.expect.kind.as_deref() else { return };
    for (row, ..) in crate::orchestrator::ids::FED_BY.iter().filter(|(_, _, kinds)| kinds.contains(&kind)) {
        ctx.reached(row);
    }
}

/// Request fields a run may leave empty for want of an option, with the words a plugin's
/// message uses for them and the option that fills them.
const SECOND_FAULTS: [(&str, &[&str], &str); 2] = [
    ("secrets", &["secret", "credential"], "--secrets"),
    ("mutable_parameters", &["mutable", "parameter"], "--test-volume-mutable-parameters"),
];

/// Why an INVALID_ARGUMENT the step did not expect is not the plugin's fault, if it is not: the
/// request also left empty a field the run could not fill (no `--secrets`, no mutable
/// parameters), and the plugin's message names that field. The spec orders no error checks, so
/// a plugin may report either fault first: what the step checks could not be checked.
fn other_fault(call: &Call, sent: &DynamicMessage, e: &crate::client::RpcError) -> Option<String> {
    if e.code != Code::InvalidArgument || call.expect.codes.names(Code::InvalidArgument) {
        return None;
    }
    let message = e.message.to_ascii_lowercase();
    let (field, _, option) = SECOND_FAULTS.iter().find(|(field, words, _)| {
        let empty = sent.descriptor().get_field_by_name(field).is_some_and(|f| match sent.get_field(&f).as_ref() {
            prost_reflect::Value::Map(m) => m.is_empty(),
            _ => false,
        });
        empty && words.iter().any(|w| message.contains(w))
    })?;
    Some(format!(
        "{} answered INVALID_ARGUMENT ({}) to a request that also left {field} empty, which this run cannot fill \
         (give {option}): the spec orders no error checks, so expecting {} could not be checked",
        call.method.name(),
        e.message,
        call.expect.codes
    ))
}

/// How a scenario goes on after a miss of this severity: a warning or a note (`otherwise:
/// note`, a passing finding) lets it continue.
pub(crate) fn flow_after(severity: Severity) -> Flow {
    if matches!(severity, Severity::Warn | Severity::Pass) { Flow::Continue } else { Flow::Stop }
}

/// What `judge` made of an answer.
pub(crate) enum Judged {
    /// An OK response that met the expectation.
    Response(Response),
    /// An expected error code.
    Accepted,
    /// The scenario goes this way.
    Flow(Flow),
}
