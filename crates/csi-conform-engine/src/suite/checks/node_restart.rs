//! Restarting a node plugin with `--allow-restart-cmd` (also spelled `--restart-node-cmd`),
//! or the controller plugin with `--restart-controller-cmd`, and waiting until it answers
//! Probe ready again, bounded by [`RESTART_TIMEOUT`]: shared by the `lifecycle` check's
//! restart and the `restart-published` and `restart-create` checks.

use std::time::{Duration, Instant};

use super::lifecycle::RESTART_TIMEOUT;
use crate::{
    proto::v1,
    report::{Finding, Severity},
    suite::ctx::{CheckOutcome, ScenarioCtx},
};

/// Runs the restart command for node endpoint `index` (node id `node_id`) and waits for the
/// node plugin to answer Probe ready; how long that took after the command returned.
pub(super) async fn restart_node(ctx: &mut ScenarioCtx, index: usize, node_id: &str) -> Result<Duration, CheckOutcome> {
    let Some(command) = ctx.restarts().node.clone() else {
        return Err(CheckOutcome::Skip("restarting the node plugin needs --allow-restart-cmd".into()));
    };
    let conn = ctx.node_connections()[index].clone();
    let endpoint = conn.endpoint().to_string();
    let env = [
        ("CSI_CONFORM_NODE_ENDPOINT", endpoint.clone()),
        ("CSI_CONFORM_NODE_INDEX", index.to_string()),
        ("CSI_CONFORM_NODE_ID", node_id.to_owned()),
    ];
    restart(ctx, &command, "--allow-restart-cmd", &env, conn, &format!("node endpoint {index} ({endpoint})")).await
}

/// Runs `--restart-controller-cmd` and waits for the controller plugin to answer Probe ready;
/// how long that took after the command returned.
pub(super) async fn restart_controller(ctx: &mut ScenarioCtx) -> Result<Duration, CheckOutcome> {
    let Some(command) = ctx.restarts().controller.clone() else {
        return Err(CheckOutcome::Skip("restarting the controller plugin needs --restart-controller-cmd".into()));
    };
    let Some(conn) = ctx.controller().cloned() else {
        return Err(CheckOutcome::Skip("the run has no controller endpoint to restart".into()));
    };
    let endpoint = conn.endpoint().to_string();
    let env = [("CSI_CONFORM_CONTROLLER_ENDPOINT", endpoint.clone())];
    restart(ctx, &command, "--restart-controller-cmd", &env, conn, &format!("the controller endpoint ({endpoint})")).await
}

/// Runs `command` (the flag `flag` gave it) with `env`, then Probes `conn` until it answers
/// ready; how long that took after the command returned.
async fn restart(
    ctx: &mut ScenarioCtx,
    command: &str,
    flag: &str,
    env: &[(&str, String)],
    conn: crate::client::Connection,
    what: &str,
) -> Result<Duration, CheckOutcome> {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let error = |message: String| Finding::new(Severity::Error, "restart", message);
    let output = match child {
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
    };
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
            Ok(r) if r.ready != Some(false) => return Ok(returned.elapsed()),
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
