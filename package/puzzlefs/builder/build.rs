//! Generates the writer of version-1 manifests as the other implementation
//! lays them out (`schema/manifest-v1.capnp`, into OUT_DIR): see
//! `model::encode_manifest`.

fn main() {
    println!("cargo:rerun-if-changed=schema/manifest-v1.capnp");
    capnpc::CompilerCommand::new()
        .src_prefix("schema")
        .file("schema/manifest-v1.capnp")
        // Included as `model::manifest_v1_capnp`.
        .default_parent_module(vec!["model".into()])
        .run()
        .expect("compiling the Cap'n Proto schema (is /usr/bin/capnp installed?)");
}
