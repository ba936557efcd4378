//! Restarting a node plugin with `--allow-restart-cmd` (also spelled `--restart-node-cmd`),
//! or the controller plugin with `--restart-controller-cmd`, or, without the command, the
//! plugin the run started itself in-process (the bundled reference plugin), and waiting until
//! it answers Probe ready again, bounded by [`RESTART_TIMEOUT`]: shared by the `lifecycle`
//! check's restart and the `restart-published` and `restart-create` checks.

use std::time::{Duration, Instant};

use super::lifecycle::RESTART_TIMEOUT;
use crate::{
    proto::v1,
    report::{Finding, Severity},
    suite::{
        ctx::{CheckOutcome, ScenarioCtx},
        settings::Restarting,
    },
};

/// What restarts the plugin: a command a flag gave, or the run's own in-process restart.
enum How<'a> {
    /// The shell command `command` of the flag `flag`, run with `env`.
    Command { command: String, flag: &'static str, env: &'a [(&'a str, String)] },
    /// The bundled plugin's server stopped and started again ([`crate::suite::Restarter`]).
    InProcess(Restarting<'a>),
}

/// A restart done: how long the plugin took to answer Probe ready after it, and how it was
/// restarted.
pub(super) struct Restarted {
    /// From the restart's return to Probe ready.
    pub took: Duration,
    /// Whether the run restarted the plugin itself (no command).
    pub in_process: bool,
}

impl Restarted {
    /// The note that reports it, for the plugin called `who` (`node`, `controller`).
    pub fn note(&self, who: &str) -> String {
        let after = if self.in_process { "the run restarted it in-process" } else { "the restart command returned" };
        format!("the {who} plugin answered Probe ready {} after {after}", crate::client::human_duration(self.took))
    }
}

/// What the report calls the restart, in its errors.
const IN_PROCESS: &str = "the in-process restart of the bundled plugin";

/// Restarts the node plugin of node endpoint `index` (node id `node_id`) with the restart
/// command, or in-process when the run started the plugin itself, and waits for it to answer
/// Probe ready; how long that took after the restart returned.
pub(super) async fn restart_node(ctx: &mut ScenarioCtx, index: usize, node_id: &str) -> Result<Restarted, CheckOutcome> {
    let conn = ctx.node_connections()[index].clone();
    let endpoint = conn.endpoint().to_string();
    let env = [
        ("CSI_CONFORM_NODE_ENDPOINT", endpoint.clone()),
        ("CSI_CONFORM_NODE_INDEX", index.to_string()),
        ("CSI_CONFORM_NODE_ID", node_id.to_owned()),
    ];
    let restarter = ctx.restarts().in_process.clone();
    let how = match (ctx.restarts().node.clone(), &restarter) {
        (Some(command), _) => How::Command { command, flag: "--allow-restart-cmd", env: &env },
        (None, Some(r)) => How::InProcess(r.restart_node(index)),
        (None, None) => return Err(CheckOutcome::Skip("restarting the node plugin needs --allow-restart-cmd".into())),
    };
    restart(ctx, how, conn, &format!("node endpoint {index} ({endpoint})")).await
}

/// Restarts the controller plugin with `--restart-controller-cmd`, or in-process when the run
/// started the plugin itself, and waits for it to answer Probe ready; how long that took
/// after the restart returned.
pub(super) async fn restart_controller(ctx: &mut ScenarioCtx) -> Result<Restarted, CheckOutcome> {
    let Some(conn) = ctx.controller().cloned() else {
        return Err(CheckOutcome::Skip("the run has no controller endpoint to restart".into()));
    };
    let endpoint = conn.endpoint().to_string();
    let env = [("CSI_CONFORM_CONTROLLER_ENDPOINT", endpoint.clone())];
    let restarter = ctx.restarts().in_process.clone();
    let how = match (ctx.restarts().controller.clone(), &restarter) {
        (Some(command), _) => How::Command { command, flag: "--restart-controller-cmd", env: &env },
        (None, Some(r)) => How::InProcess(r.restart_controller()),
        (None, None) => {
            return Err(CheckOutcome::Skip("restarting the controller plugin needs --restart-controller-cmd".into()));
        }
    };
    restart(ctx, how, conn, &format!("the controller endpoint ({endpoint})")).await
}

/// Whether the run can restart the controller plugin: a command, or in-process.
pub(super) fn can_restart_controller(ctx: &ScenarioCtx) -> bool {
    ctx.restarts().controller.is_some() || ctx.restarts().in_process.is_some()
}

/// Runs the command `how` names (or restarts in-process), then Probes `conn` until it answers
/// ready; how long that took after the restart returned.
async fn restart(ctx: &mut ScenarioCtx, how: How<'_>, conn: crate::client::Connection, what: &str) -> Result<Restarted, CheckOutcome> {
    let in_process = matches!(how, How::InProcess(_));
    let (output, flag) = match how {
        How::Command { command, flag, env } => (run_command(&command, flag, env).await, flag),
        How::InProcess(restarting) => {
            let done = match tokio::time::timeout(RESTART_TIMEOUT, restarting).await {
                Ok(done) => done.map_err(|e| format!("{IN_PROCESS} failed: {e}")),
                Err(_) => Err(format!("{IN_PROCESS} did not finish within {}", crate::client::human_duration(RESTART_TIMEOUT))),
            };
            (done, IN_PROCESS)
        }
    };
    let error = |message: String| Finding::new(Severity::Error, "restart", message);
    if let Err(message) = output {
        ctx.push(error(message));
        return Err(CheckOutcome::Stop);
    }
    // The connection reconnects on its own; Probe until the new process answers ready.
    let returned = Instant::now();
    let deadline = returned + RESTART_TIMEOUT;
    loop {
        let mut identity = conn.identity();
        let checked = conn.with_rules(ctx.rules());
        let probe = checked.call("Probe", v1::ProbeRequest {}, |r| async move { identity.probe(r).await }).await;
        match probe {
            Ok(r) if r.ready != Some(false) => return Ok(Restarted { took: returned.elapsed(), in_process }),
            _ if Instant::now() >= deadline => {
                ctx.push(error(format!(
                    "{what} did not answer Probe ready within {} after {flag} (a fixed bound, no flag sets it)",
                    crate::client::human_duration(RESTART_TIMEOUT)
                )));
                return Err(CheckOutcome::Stop);
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Runs `command` (the flag `flag` gave it) with `env`, bounded by [`RESTART_TIMEOUT`]; why it
/// failed, if it did.
async fn run_command(command: &str, flag: &str, env: &[(&str, String)]) -> Result<(), String> {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    match child {
        Err(e) => Err(format!("{flag} could not be started: {e}")),
        Ok(child) => match tokio::time::timeout(RESTART_TIMEOUT, child.wait_with_output()).await {
            Err(_) => Err(format!(
                "{flag} did not finish within {} (a fixed bound, no flag sets it)",
                crate::client::human_duration(RESTART_TIMEOUT)
            )),
            Ok(Err(e)) => Err(format!("{flag} failed: {e}")),
            Ok(Ok(out)) if !out.status.success() => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                Err(format!(
                    "{flag} failed ({}): {}",
                    out.status,
                    stderr.lines().next().unwrap_or_default().trim()
                ))
            }
            Ok(Ok(_)) => Ok(()),
        },
    }
}
