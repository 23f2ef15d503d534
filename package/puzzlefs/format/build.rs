//! Generates the Cap'n Proto readers for the two schemas into OUT_DIR
//! (`manifest_capnp.rs`, `metadata_capnp.rs`). The kernel build uses the
//! same two generated files, so their names must not change.

fn main() {
    println!("cargo:rerun-if-changed=schema/manifest.capnp");
    println!("cargo:rerun-if-changed=schema/metadata.capnp");
    capnpc::CompilerCommand::new()
        .src_prefix("schema")
        .file("schema/manifest.capnp")
        .file("schema/metadata.capnp")
        .run()
        .expect("compiling the Cap'n Proto schemas (is /usr/bin/capnp installed?)");
}
