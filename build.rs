//! Compiles `proto/externalscaler.proto` into tonic server and client code, and
//! writes a file descriptor set for gRPC server reflection.
//!
//! `protoc` comes from the `protoc-bin-vendored` crate unless `PROTOC` names
//! one, so a checkout builds with nothing but the Rust toolchain.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let protoc = match std::env::var_os("PROTOC") {
        Some(path) => PathBuf::from(path),
        None => protoc_bin_vendored::protoc_bin_path()?,
    };
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("externalscaler_descriptor.bin"))
        .compile_with_config(config, &["proto/externalscaler.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto/externalscaler.proto");
    println!("cargo:rerun-if-env-changed=PROTOC");
    Ok(())
}
