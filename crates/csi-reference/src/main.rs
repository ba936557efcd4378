//! The `csi-reference-plugin` binary: serves the bundled reference plugin on its own, with the
//! flags of `csi-conform reference-plugin`, so an orchestrator's developers can run a plugin
//! with quirks without the harness. Logs go to stderr (`RUST_LOG`, `warn` by default).

use std::process::ExitCode;

use clap::Parser;
use csi_reference::reference;
use tracing_subscriber::{filter::{LevelFilter, Targets}, prelude::*};

/// Serve the bundled reference plugin: every CSI v1.13 RPC (v1.12 with --spec-version 1.12),
/// as the spec says.
#[derive(Parser, Debug)]
#[command(name = "csi-reference-plugin", version)]
struct Cli {
    #[command(flatten)]
    args: reference::Args,
}

fn main() -> ExitCode {
    let Cli { args } = Cli::parse();
    // RUST_LOG's `target=level` directives (a bare level for every other target), else `warn`.
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| v.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::WARN));
    // The fmt subscriber's own ceiling (INFO unless told) is lifted: `filter` alone decides.
    let _ = tracing_subscriber::fmt()
        .with_max_level(LevelFilter::TRACE)
        .with_writer(std::io::stderr)
        .with_target(false)
        .finish()
        .with(filter)
        .try_init();
    // Exit 2 for a usage or configuration error, as `csi-conform reference-plugin` does.
    if let Err(e) = reference::prepare(&args) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(reference::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
