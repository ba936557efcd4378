//! Compiles `proto/csi.proto` with protox (pure Rust, so no `protoc` is needed), generates the
//! tonic client and server code, and writes the encoded descriptor set that the library reads
//! at run time through prost-reflect (request building, secret redaction).

use std::{env, fs, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/csi.proto");
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
    Ok(())
}

/// Generated messages implement `prost::Name`, so library code can find a typed message's
/// descriptor in the run-time pool by its full name.
fn prost_config() -> prost_build::Config {
    let mut config = prost_build::Config::new();
    config.enable_type_names();
    config
}
