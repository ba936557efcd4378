//! Temporary entry point: `csi-conform reference-plugin <ARGS>` (the real CLI replaces this).

use clap::Parser;

#[derive(Parser)]
#[command(name = "csi-conform", version)]
enum Cli {
    /// Run the bundled reference CSI plugin.
    ReferencePlugin(csi_conform::reference::Args),
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let Cli::ReferencePlugin(args) = Cli::parse();
    match csi_conform::reference::run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("csi-conform reference-plugin: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
