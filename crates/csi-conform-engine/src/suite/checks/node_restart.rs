//! Restarting a node plugin with `--allow-restart-cmd` (also spelled `--restart-node-cmd`)
//! and waiting until it answers Probe ready again, bounded by [`RESTART_TIMEOUT`]: shared by
//! the `lifecycle` check's restart and the `restart-published` check.

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
    let Some(command) = ctx.config().restart_cmd.clone() else {
        return Err(CheckOutcome::Skip("restarting the node plugin needs --allow-restart-cmd".into()));
    };
    let conn = ctx.node_connections()[index].clone();
    let endpoint = conn.endpoint().to_string();
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&command)
        .env("CSI_CONFORM_NODE_ENDPOINT", &endpoint)
        .env("CSI_CONFORM_NODE_INDEX", index.to_string())
        .env("CSI_CONFORM_NODE_ID", node_id)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let error = |message: String| Finding::new(Severity::Error, "restart", message);
    let output = match child {
        Err(e) => Err(format!("--allow-restart-cmd could not be started: {e}")),
        Ok(child) => match tokio::time::timeout(RESTART_TIMEOUT, child.wait_with_output()).await {
            Err(_) => Err(format!(
                "--allow-restart-cmd did not finish within {} (a fixed bound, no flag sets it)",
                crate::client::human_duration(RESTART_TIMEOUT)
            )),
            Ok(Err(e)) => Err(format!("--allow-restart-cmd failed: {e}")),
            Ok(Ok(out)) if !out.status.success() => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                Err(format!(
                    "--allow-restart-cmd failed ({}): {}",
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
        let checked = conn.with_rules(&ctx.rules);
        let probe = checked.call("Probe", v1::ProbeRequest {}, |r| async move { identity.probe(r).await }).await;
        match probe {
            Ok(r) if r.ready != Some(false) => return Ok(returned.elapsed()),
            _ if Instant::now() >= deadline => {
                ctx.push(error(format!(
                    "node endpoint {index} ({endpoint}) did not answer Probe ready within {} after --allow-restart-cmd (a fixed \
                     bound, no flag sets it)",
                    crate::client::human_duration(RESTART_TIMEOUT)
                )));
                return Err(CheckOutcome::Stop);
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}
