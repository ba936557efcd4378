//! Compiles `proto/csi.proto` with protox (pure Rust, so no `protoc` is needed), generates the
//! tonic client and server code, and writes the encoded descriptor set that the library reads
//! at run time through prost-reflect (request building, secret redaction); and compiles
//! `proto/agent.proto`, the node agent's own service (`csi-conform agent`), the same way.

use std::{env, fs, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/csi.proto");
    println!("cargo:rerun-if-changed=proto/agent.proto");
    let out = PathBuf::from(env::var("OUT_DIR")?);

    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_imports(true).include_source_info(false);
    compiler.open_file("csi.proto")?;

    // The encoded set keeps the custom options (csi_secret, alpha_field) that a prost_types
    // round trip would drop, so the run-time descriptor pool can see them.
    fs::write(out.join("csi_descriptor.bin"), compiler.encode_file_descriptor_set())?;

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds_with_config(compiler.file_descriptor_set(), prost_config())?;

    // The agent's service on its own: its descriptors stay out of the CSI pool above.
    let mut agent = protox::Compiler::new(["proto"])?;
    agent.include_imports(true).include_source_info(false);
    agent.open_file("agent.proto")?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds_with_config(agent.file_descriptor_set(), prost_build::Config::new())?;
    Ok(())
}

/// Generated messages implement `prost::Name`, so library code can find a typed message's
/// descriptor in the run-time pool by its full name.
fn prost_config() -> prost_build::Config {
    let mut config = prost_build::Config::new();
    config.enable_type_names();
    config
}
